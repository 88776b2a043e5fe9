/*
 * PVH boot (Xen's HVM direct boot ABI, xen/include/public/arch-x86/hvm/
 * start_info.h, as QEMU, Firecracker and Cloud Hypervisor use it): an ELF
 * kernel whose XEN_ELFNOTE_PHYS32_ENTRY note names a 32-bit entry point,
 * entered in flat protected mode with paging off and %ebx pointing at a
 * struct hvm_start_info (command line, initrd as module 0, memory map,
 * RSDP).  linux.kernel selects it automatically when the file is such an
 * ELF (Debian's vmlinux is, with CONFIG_PVH), of either class: ELFCLASS64
 * for x86-64 or ELFCLASS32 for i386 (`ld -m elf_i386`), as QEMU's -kernel.
 */
#ifndef KHYVE_PVH_H
#define KHYVE_PVH_H

#include <stddef.h>
#include <stdint.h>

#include "boot/e820.h"
#include "boot/loader.h"
#include "vmm/mem.h"
#include "vmm/vcpu.h"

#define PVH_START_INFO_GPA       0x6000ull /* start info, module list, memory map */
#define XEN_ELFNOTE_PHYS32_ENTRY 18

/*
 * Is `img` an ELF image with a PVH entry note?  Returns 1 and the entry
 * (guest-physical) when it is, 0 when it is not ELF, -1 (with `err`) when
 * it is ELF but malformed, not x86 (EM_X86_64 in ELFCLASS64, EM_386 in
 * ELFCLASS32) or lacks the note.
 */
int pvh_probe(const uint8_t *img, size_t len, uint32_t *entry, char *err, size_t errlen);

/*
 * Load the ELF's PT_LOAD segments at their physical addresses, the
 * command line, initrd and start info, and describe the BSP's entry state.
 * 0, or -1 with `err`.
 */
int pvh_load(const struct guest_mem *gm, const uint8_t *img, size_t len,
             const struct linux_boot *lb, const struct e820_map *map, uint64_t rsdp_gpa,
             struct boot_cpu_state *cpu, char *err, size_t errlen);

#endif
