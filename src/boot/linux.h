/*
 * Linux direct boot through the x86 boot protocol's 64-bit entry
 * (Documentation/arch/x86/boot.rst, "64-bit Boot Protocol"): the bzImage's
 * protected-mode kernel at 1 MiB, a zero page (struct boot_params) with the
 * setup header, e820 map, command line and initrd, identity-mapped page
 * tables for the first 4 GiB, and the CPU in long mode at startup_64.
 * Config keys: linux.kernel, linux.initrd, linux.cmdline.
 */
#ifndef KHYVE_LINUX_H
#define KHYVE_LINUX_H

#include <stddef.h>
#include <stdint.h>

#include "boot/e820.h"
#include "boot/loader.h"
#include "vmm/mem.h"
#include "vmm/vcpu.h"

/* Fixed guest-physical addresses of the bzImage boot (below 1 MiB; the
 * GDT and command line addresses are in boot/loader.h). */
#define LINUX_ZERO_PAGE_GPA 0x7000ull
#define LINUX_STACK_GPA     0x8ff0ull
#define LINUX_PML4_GPA      0x9000ull /* then PDPT and four PDs, 0xA000-0xEFFF */
#define LINUX_KERNEL_GPA    0x100000ull

#define LINUX_BOOT_CS       0x10 /* __BOOT_CS */
#define LINUX_BOOT_DS       0x18 /* __BOOT_DS */

/* What the setup header of a bzImage says (offsets per boot.rst). */
struct bzimage_info {
	uint16_t version;      /* boot protocol version, e.g. 0x020f */
	size_t setup_size;     /* bytes of real-mode setup, incl. boot sector */
	size_t kernel_size;    /* bytes of protected-mode kernel after it */
	uint32_t init_size;    /* bytes the kernel needs from its load address */
	uint64_t pref_address; /* where the kernel would like to run */
	uint32_t initrd_addr_max;
	uint32_t cmdline_size; /* longest command line, excluding NUL */
	uint16_t xloadflags;
	uint8_t relocatable;
};

/*
 * Check that `img` (`len` bytes) is a bzImage this loader can boot (protocol
 * 2.12+, 64-bit entry) and describe it.  0, or -1 with a reason in `err`.
 */
int bzimage_parse(const uint8_t *img, size_t len, struct bzimage_info *info, char *err,
                  size_t errlen);

/*
 * Fill the zero page's screen_info (Linux include/uapi/linux/screen_info.h)
 * for 80x25 colour VGA text (mode 3, 16-line font, cursor at the top left),
 * as a BIOS boot loader leaves it, so vgacon takes the console.  The loader
 * calls it when an fbuf with legacy VGA memory (vga=on) exists.
 */
void linux_zp_vga_text(uint8_t *zp);

/*
 * Fill the 4 KiB zero page `zp`: the setup header copied from `img`, loader
 * fields, command line pointer, initrd (gpa 0 = none), e820 map and RSDP.
 */
void linux_build_zero_page(uint8_t *zp, const uint8_t *img, const struct bzimage_info *info,
                           uint64_t cmdline_gpa, uint64_t initrd_gpa, uint64_t initrd_size,
                           const struct e820_map *map, uint64_t rsdp_gpa);

/*
 * Where to put an initrd of `size` bytes: as high as the kernel allows in
 * low RAM, page-aligned, above what the kernel will use.  0 when it does not
 * fit.
 */
uint64_t linux_initrd_addr(const struct bzimage_info *info, uint64_t lowmem, uint64_t size);

/*
 * Load the bzImage `img` (`len` bytes, the caller keeps it) with the
 * initrd and command line of `lb`, and describe the BSP's start state at
 * startup_64.  Called by kernel_load().  0, or -1 with a one-line reason in
 * `err`.
 */
int bzimage_load(const struct guest_mem *gm, const uint8_t *img, size_t len,
                 const struct linux_boot *lb, const struct e820_map *map, uint64_t rsdp_gpa,
                 struct boot_cpu_state *cpu, char *err, size_t errlen);

#endif
