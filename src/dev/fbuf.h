/*
 * fbuf: the framebuffer PCI device, QEMU's "stdvga" (PCI 1234:1111, class
 * 0300) or, with vga=off, its "bochs-display" (class 0380), with bhyve's
 * pci_fbuf option syntax.  BAR0 is a 16 MiB linear framebuffer mapped as a
 * KVM memory slot with dirty logging; BAR2 holds the EDID block, the VGA
 * registers, the Bochs VBE DISPI registers and QEMU's extended registers
 * (QEMU hw/display/vga-pci.c); ports 0x1CE/0x1CF are the DISPI index and
 * data (Bochs vbe_display_api).  The legacy VGA (dev/vga.h) shows while
 * DISPI is off.  The device registers the console's display
 * (backend/console.h) and starts the VNC server (backend/vnc.h).
 *
 * This header exports what ACPI and the Linux loader need to know, and the
 * pure helpers the unit tests check.
 */
#ifndef KHYVE_FBUF_H
#define KHYVE_FBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct console_rect;

#define FBUF_VRAM_SIZE (16u << 20) /* BAR0, bytes */
#define FBUF_MMIO_SIZE 4096u       /* BAR2, bytes */
#define FBUF_PAGE      4096u
#define FBUF_MIN_W     640u
#define FBUF_MIN_H     480u
#define FBUF_MAX_W     3840u
#define FBUF_MAX_H     2160u
#define FBUF_EDID_SIZE 128u

/* True once an fbuf with legacy VGA registers (vga=on or vga=io) exists:
 * the FADT then clears "VGA Not Present" (ACPI 6.4 table 5.11). */
bool fbuf_legacy_vga(void);

/* True once an fbuf with the legacy VGA memory window (vga=on) exists: a
 * kernel booted directly may then use VGA text mode (the Linux loader fills
 * screen_info as a BIOS boot loader would). */
bool fbuf_vga_text(void);

/*
 * A 128-byte EDID 1.4 base block (VESA E-EDID Release A rev. 2) whose
 * preferred detailed timing is `w` x `h` at 60 Hz (reduced blanking),
 * with a range-limits and a name descriptor and a valid checksum.
 */
void fbuf_build_edid(uint8_t edid[FBUF_EDID_SIZE], uint32_t w, uint32_t h);

/*
 * The changed rows of a shown mode, from a dirty-page bitmap (bit i: page
 * i of the framebuffer written, 64-bit words, `npages` bits): the mode
 * shows `yres` rows of `line` bytes from byte `start` and `xres` pixels a
 * row.  Rectangles span the whole width and merge touching rows; when
 * more than `cap` would be needed the last one grows to cover the rest.
 * Returns how many were written to `rects`.
 */
unsigned fbuf_dirty_rects(const uint64_t *bitmap, size_t npages, uint64_t start, uint32_t line,
                          uint32_t xres, uint32_t yres, struct console_rect *rects, unsigned cap);

/*
 * Convert `n` pixels at `src` of depth `bpp` (8: indices into `pal`; 15:
 * x1r5g5b5; 16: r5g6b5; 24: b,g,r bytes; 32: b,g,r,x bytes -- all
 * little-endian unless `big_endian`, as QEMU's 0x604 register selects)
 * into XRGB8888 at `dst`.  Other depths draw black.
 */
void fbuf_convert(uint32_t *dst, const uint8_t *src, uint32_t n, unsigned bpp,
                  const uint32_t pal[256], bool big_endian);

#endif
