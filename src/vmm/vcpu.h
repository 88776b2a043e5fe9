/*
 * vCPUs: creation, boot register state and KVM_RUN.  The run loop that
 * dispatches exits to the buses lives in core/vcpu_loop.c.
 */
#ifndef KHYVE_VCPU_H
#define KHYVE_VCPU_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct vm;

/* Why KVM_RUN returned, as vcpu_run() counts it for the vCPU counters
 * (vmm/vcpu_stats.h) where KVM has no statistics of its own. */
enum vcpu_exit_kind {
	VCPU_EXIT_IO,
	VCPU_EXIT_MMIO,
	VCPU_EXIT_SIGNAL, /* KVM_EXIT_INTR, or EINTR: a kick */
	VCPU_EXIT_HLT,
	VCPU_EXIT_SYSTEM_EVENT,
	VCPU_EXIT_OTHER, /* any other exit reason or error */
	VCPU_EXIT_KINDS
};

struct vcpu {
	struct vm *vm;
	unsigned index;   /* 0 = bootstrap processor */
	uint32_t apic_id; /* also the KVM vcpu id */
	int fd;
	struct kvm_run *run; /* shared page with KVM, vm->vcpu_mmap_size bytes */
	pthread_t thread;
	bool thread_started; /* `thread` exists (set by its creator, for joining) */
	pthread_t self;      /* the thread, as it wrote itself before `kickable` */
	bool kickable;       /* the thread blocks the kick signal: kicks are never lost */
	/* KVM_RUN returns by kind: written by vcpu_run() on the vCPU's own
	 * thread (relaxed atomic loads and stores), read from any thread. */
	uint64_t exits[VCPU_EXIT_KINDS];
	/* The last KVM_RUN returned KVM_EXIT_IO or KVM_EXIT_MMIO: the
	 * instruction completes only when KVM_RUN is entered again
	 * (vcpu_complete_io() in vmm/vmstate.h).  The vCPU's thread only. */
	bool io_pending;
};

/* How the bootstrap processor starts. */
enum boot_mode {
	BOOT_RESET,  /* architectural reset state: real mode at 0xFFFFFFF0 */
	BOOT_LONG64, /* 64-bit long mode, paging on (Linux 64-bit boot protocol) */
	BOOT_FLAT32, /* 32-bit protected mode, paging off (PVH entry) */
};

/*
 * Register state a boot loader asks for.  The loader has already written the
 * GDT (flat code at selector `cs`, data at `ds`) and, for BOOT_LONG64, the
 * page tables at `cr3` into guest memory.  All addresses guest-physical.
 */
struct boot_cpu_state {
	enum boot_mode mode;
	uint64_t rip, rsp, rsi, rbx;
	uint64_t gdt_base;
	uint16_t gdt_limit;
	uint16_t cs, ds, tr; /* selectors; tr 0 = none */
	uint64_t cr3;
};

/* Create vCPU `index` with KVM vcpu id `apic_id`; 0 or -1 (errno set). */
int vcpu_create(struct vm *vm, struct vcpu *v, unsigned index, uint32_t apic_id);
void vcpu_destroy(struct vcpu *v);

/* Set CPUID (KVM_SET_CPUID2); 0 or -1. */
int vcpu_set_cpuid(struct vcpu *v, struct kvm_cpuid2 *cpuid);

/* Route LINT0 to ExtINT and LINT1 to NMI, as firmware leaves them (so the
 * PIC and NMIs reach the CPU before the guest programs its APIC). */
int vcpu_init_lapic(struct vcpu *v);

/* Load the boot state (no-op for BOOT_RESET); 0 or -1. */
int vcpu_set_boot_state(struct vcpu *v, const struct boot_cpu_state *s);

/* One KVM_RUN; returns 0, or -1 with errno (EINTR when kicked).  Counts
 * the return in v->exits. */
int vcpu_run(struct vcpu *v);

/* Make a running or about-to-run KVM_RUN return with EINTR (any thread). */
void vcpu_kick(struct vcpu *v);

/* Install the signal handler vcpu_kick() relies on; once per process. */
int vcpu_kick_init(void);

/* The signal vcpu_kick() sends. */
int vcpu_kick_signal(void);

/*
 * Called by `v`'s own thread before its first vcpu_run(): block the kick
 * signal in the thread and have KVM unblock it only inside KVM_RUN
 * (KVM_SET_SIGNAL_MASK, api.rst 4.35), as QEMU does.  A kick that comes
 * while the thread is outside KVM_RUN then stays pending and ends the next
 * KVM_RUN at once; left unblocked it would run its handler in user space
 * and be lost, and an application processor still waiting for INIT/SIPI
 * would sleep in KVM_RUN for good (KVM checks immediate_exit only after
 * that wait).  0, or -1 with errno.
 */
int vcpu_block_kick(struct vcpu *v);

/*
 * Called by `v`'s thread after vcpu_block_kick(), before it first looks at
 * whether to stop: from then on vcpu_kick() signals it.  A kick before that
 * only sets immediate_exit, and the thread sees the stop request itself
 * (both flags sequentially consistent, so one of the two sides sees the
 * other).
 */
void vcpu_mark_kickable(struct vcpu *v);

/* After KVM_RUN ended with EINTR: take the pending kicks (they stay
 * pending once KVM has blocked the signal again). */
void vcpu_eat_kicks(void);

#endif
