/*
 * Direct kernel boot (config keys linux.kernel, linux.initrd,
 * linux.cmdline): what the bzImage loader (boot/linux.c) and the PVH ELF
 * loader (boot/pvh.c) share, and kernel_load(), which reads the kernel and
 * picks one of them.
 */
#ifndef KHYVE_LOADER_H
#define KHYVE_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "boot/e820.h"
#include "vmm/mem.h"
#include "vmm/vcpu.h"

/* Fixed guest-physical addresses both loaders use (below 1 MiB). */
#define LINUX_GDT_GPA     0x500ull
#define LINUX_CMDLINE_GPA 0x20000ull
#define LINUX_CMDLINE_MAX 0x10000ull /* bytes, including the NUL */

/* Largest kernel and initrd files read, bytes. */
#define LOADER_KERNEL_MAX ((size_t)512 << 20)
#define LOADER_INITRD_MAX ((size_t)2 << 30)

/* What the user asked to boot; the strings belong to the config tree. */
struct linux_boot {
	const char *kernel;  /* bzImage or PVH ELF path */
	const char *initrd;  /* path or NULL */
	const char *cmdline; /* or NULL for empty */
};

/*
 * Write `cmdline` (NULL: empty) with its NUL at LINUX_CMDLINE_GPA; `max` is
 * the longest the kernel accepts, in bytes without the NUL (at most
 * LINUX_CMDLINE_MAX - 1 is used).  0, or -1 with `err`.
 */
int loader_write_cmdline(const struct guest_mem *gm, const char *cmdline, size_t max, char *err,
                         size_t errlen);

/*
 * Read `lb->kernel` and load it with everything it needs: an ELF with a PVH
 * note through pvh_load(), anything else as a bzImage through
 * bzimage_load().  `map` is the guest's memory map, `rsdp_gpa` the ACPI
 * RSDP (0: none); `*cpu` gets the BSP's start state.  0, or -1 with a
 * one-line reason in `err`.
 */
int kernel_load(const struct guest_mem *gm, const struct linux_boot *lb, const struct e820_map *map,
                uint64_t rsdp_gpa, struct boot_cpu_state *cpu, char *err, size_t errlen);

#endif
