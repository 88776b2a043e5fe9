/*
 * The KVM layer: one VM (KVM_CREATE_VM) with its guest memory, in-kernel
 * irqchip (PIC, IOAPIC, local APICs) and PIT, and its vCPUs.  It knows
 * nothing of devices: exits are handed to the caller (see vcpu.h).
 *
 * Linux KVM API: Documentation/virt/kvm/api.rst.
 */
#ifndef KHYVE_KVM_H
#define KHYVE_KVM_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmm/cpuid.h"
#include "vmm/mem.h"

/* Guest-physical addresses KVM needs for its own use on Intel VMX (unused
 * on AMD); inside the MMIO hole, below the boot ROM (as QEMU places them). */
#define KVM_IDENTITY_MAP_GPA 0xfeffc000ull
#define KVM_TSS_GPA          0xfeffd000ull /* three pages */

#define IOAPIC_GPA           0xfec00000ull
#define LAPIC_GPA            0xfee00000ull
#define IOAPIC_NPINS         24 /* GSIs 0-23 */

struct vcpu;

struct vm {
	int kvm_fd;           /* /dev/kvm */
	int vm_fd;            /* the VM */
	int vcpu_mmap_size;   /* size of each vCPU's struct kvm_run mapping */
	unsigned next_slot;   /* next free KVM memory slot */
	struct guest_mem mem; /* RAM and ROM regions */
	uint64_t memsize;     /* RAM bytes requested */
	unsigned ram_flags;   /* VM_RAM_* given to vm_create_opts() */
	/* Bytes a page of guest RAM is on the host: 4096, or the huge page
	 * size with VM_RAM_HUGETLB.  Discarding (the balloon) works in these. */
	uint64_t ram_page_size;
	unsigned ncpus;
	struct cpu_topology topo;
	struct vcpu **vcpus; /* ncpus entries */
	struct kvm_cpuid2 *supported_cpuid;
	/* What saving and restoring vCPU state may use, probed by
	 * vmm/vmstate.c on the first save or restore (state_probed). */
	bool state_probed;
	bool state_sregs2;         /* KVM_CAP_SREGS2 */
	bool state_xsave2;         /* KVM_CAP_XSAVE2: KVM_GET_XSAVE2 exists */
	bool state_tsc_control;    /* KVM_CAP_TSC_CONTROL: KVM_SET_TSC_KHZ scales */
	uint32_t state_xsave_size; /* bytes KVM_GET_XSAVE(2) fills, >= 4096 */
	uint32_t *state_msrs;      /* MSR indices a vCPU saves; malloc()ed, NULL until
	                            * the first save; freed by vm_destroy() */
	unsigned state_nmsrs;
	bool state_clock_valid; /* vm_state_restore() read state_clock (ns) */
	uint64_t state_clock;
	/* The coalesced-I/O ring's page in each vCPU mapping once a zone is
	 * registered (vmm/coalesced.h), else 0. */
	unsigned coalesced_page;
};

/*
 * Open /dev/kvm (or $KHYVE_KVM_DEV) and create a VM with `memsize` bytes of RAM
 * laid out by gmem_layout(), an in-kernel irqchip and PIT.  On failure
 * returns -1 with a one-line reason in `err`.
 */
int vm_create(struct vm *vm, uint64_t memsize, const struct cpu_topology *topo, char *err,
              size_t errlen);

/* Guest RAM options of vm_create_opts(). */
#define VM_RAM_MERGEABLE (1u << 0) /* madvise(MADV_MERGEABLE): KSM may merge its pages */
#define VM_RAM_HUGETLB   (1u << 1) /* MAP_HUGETLB pages of the host's default huge page size */

/*
 * vm_create() with `ram_flags` (VM_RAM_*).  With VM_RAM_HUGETLB the RAM is
 * reserved up front: refused with one line ("memory.hugepages: ...") when
 * memsize is not a multiple of the huge page size or /proc/meminfo's
 * HugePages_Free is short.  VM_RAM_MERGEABLE fails on a kernel without
 * KSM.  -1 with `err`, as vm_create().
 */
int vm_create_opts(struct vm *vm, uint64_t memsize, const struct cpu_topology *topo,
                   unsigned ram_flags, char *err, size_t errlen);

/* Release everything vm_create() and vm_create_vcpus() made. */
void vm_destroy(struct vm *vm);

/*
 * Map `size` bytes at guest-physical `gpa` as read-only ROM holding a copy of
 * `data` (`len` bytes, placed at the end of the region, as firmware expects
 * its reset vector at the top).  Guest writes become MMIO exits; the caller
 * must claim them on the MMIO bus.  Returns 0 or -1.
 */
int vm_add_rom(struct vm *vm, uint64_t gpa, uint64_t size, const void *data, uint64_t len);

/*
 * A read-only window of `size` bytes at guest-physical `gpa` onto host
 * memory `hva` (page-aligned, owned by the caller) that can be switched off
 * and on again: while on, KVM serves reads from `hva` and writes exit as
 * MMIO; while off, reads exit too.  Flash in read-array mode uses it.  The
 * window is not guest RAM: devices cannot DMA to it.  vm_rom_window_add()
 * returns the KVM slot (the window starts on), or -1 when KVM lacks
 * read-only memory; vm_rom_window_set() returns 0 or -1.
 */
int vm_rom_window_add(struct vm *vm, uint64_t gpa, uint64_t size, void *hva);
int vm_rom_window_set(struct vm *vm, int slot, uint64_t gpa, uint64_t size, void *hva, bool on);

/*
 * A writable window of `size` bytes (a multiple of 4 KiB) onto host memory
 * `hva` (page-aligned, owned by the caller) with KVM dirty-page logging
 * (KVM_MEM_LOG_DIRTY_PAGES; api.rst 4.35): guest reads and writes go
 * straight to `hva` without exits while the window is on.  A device's RAM
 * BAR (fbuf's framebuffer) uses it.  Not guest RAM: devices cannot DMA to
 * it.  vm_ram_window_add() reserves a KVM slot for it and returns the slot
 * (the window starts off) or -1.  vm_ram_window_set() switches the window
 * on at `gpa` or off (`on` false; gpa ignored); the caller switches it off
 * before moving it.  0, or -1 (the window is then off, e.g. when `gpa`
 * overlaps another slot).
 */
int vm_ram_window_add(struct vm *vm);
int vm_ram_window_set(struct vm *vm, int slot, uint64_t gpa, uint64_t size, void *hva, bool on);

/*
 * vm_ram_window_set() without dirty logging, for a window onto a host
 * device's memory (a passed-through device's BAR mmapped from VFIO): guest
 * accesses go straight to the device.  Slots come from vm_ram_window_add().
 * 0, or -1 (the window is then off).
 */
int vm_device_window_set(struct vm *vm, int slot, uint64_t gpa, uint64_t size, void *hva, bool on);

/*
 * Fetch and clear the window's dirty log (KVM_GET_DIRTY_LOG): bit i of
 * `bitmap` (64-bit words, (size / 4096 + 63) / 64 of them, filled by KVM)
 * is set when page i was written since the previous call or since the
 * window was switched on.  0, or -1 (window off: nothing is filled).
 */
int vm_ram_window_dirty(struct vm *vm, int slot, uint64_t *bitmap);

/*
 * KVM dirty-page logging on every writable RAM region (live migration;
 * api.rst 4.35 KVM_MEM_LOG_DIRTY_PAGES, 4.8 KVM_GET_DIRTY_LOG): each
 * region's slot is re-set with the flag on (or off), in place, while the
 * vCPUs may run.  vm_dirty_log_start() returns 0, or -1 with every slot
 * back as it was; vm_dirty_log_stop() switches the flag off everywhere
 * (errors ignored: the slots still work, only slower).
 * vm_dirty_log_take() ORs into `bitmap` (gmem_dirty_words(size) words)
 * the pages of gmem region `idx` the guest wrote since the previous call
 * or since logging started, and clears KVM's log; 0 or -1.  `scratch` is
 * a caller's buffer of the same size (contents lost).
 */
int vm_dirty_log_start(struct vm *vm);
void vm_dirty_log_stop(struct vm *vm);
int vm_dirty_log_take(struct vm *vm, unsigned idx, uint64_t *bitmap, uint64_t *scratch);

/*
 * Take [gpa, gpa+size) (page-aligned, inside one RAM region) out of guest
 * RAM so that accesses there exit as MMIO: the legacy VGA window
 * 0xA0000-0xBFFFF.  The region's KVM slot is split in two around it.
 * Call before the vCPUs run.  0, or -1 when the range is not inside one
 * RAM region or KVM refuses.
 */
int vm_ram_hole(struct vm *vm, uint64_t gpa, uint64_t size);

/* Create the vCPUs with CPUID set from the topology; 0 or -1 (err filled). */
int vm_create_vcpus(struct vm *vm, char *err, size_t errlen);

/* Drive interrupt line `gsi` (IOAPIC pin; ISA IRQs 0-15 also reach the PIC)
 * to `level`.  Edge-triggered sources pulse 1 then 0.  Thread-safe. */
int vm_irq_line(struct vm *vm, uint32_t gsi, int level);

/* Make a guest write of `len` bytes (2 or 4; 0 = any, where supported) to
 * MMIO `gpa` signal eventfd `fd` inside KVM, without an exit
 * (KVM_IOEVENTFD); `assign` false removes it.  0 or -1. */
int vm_ioeventfd(struct vm *vm, uint64_t gpa, unsigned len, int fd, bool assign);

/* True when /dev/kvm can be opened and a VM created (used by tests). */
bool kvm_available(void);

#endif
