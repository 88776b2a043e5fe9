/*
 * The legacy VGA of the fbuf device (IBM VGA register set: sequencer,
 * graphics controller, attribute controller, CRTC, DAC), as QEMU's stdvga
 * and bhyve's vga.c: ports 0x3B4/0x3B5/0x3BA and 0x3C0-0x3DF, and the
 * 0xA0000-0xBFFFF memory window onto 256 KiB of video RAM (four planes).
 * It draws text modes from the font in plane 2 and the 16- and 256-colour
 * modes into a console_frame; fbuf (dev/fbuf.c) shows it while the Bochs
 * DISPI interface is off.
 */
#ifndef KHYVE_VGA_H
#define KHYVE_VGA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct console_frame;
struct machine;
struct sbuf;
struct sbuf_reader;
struct vga;

#define VGA_VRAM_SIZE (256 * 1024) /* four 64 KiB planes */

/*
 * Create the VGA and register its ports and, when `memory` (bhyve's
 * vga=on; false is vga=io), the 0xA0000-0xBFFFF window on the MMIO bus
 * (the caller first takes that range out of KVM's low RAM with
 * vm_ram_hole(), as fbuf does, or the guest's accesses never exit).  Ports:
 * 0x3B0-0x3DF.  It starts as a BIOS leaves it: 80x25 colour text (mode 3)
 * with an 8x16 font in plane 2, so a kernel booted directly shows text.
 * NULL with a one-line reason in `err` (ports or window already taken).
 */
struct vga *vga_create(struct machine *m, bool memory, char *err, size_t errlen);

/* Unregister the ports and window and free the VGA (NULL is ignored).
 * `m` may be NULL in vga_create() for a VGA on no bus (unit tests). */
void vga_destroy(struct vga *vga);

/*
 * Load a PSF1 or PSF2 console font (gzip-compressed or plain, 8 dots wide,
 * up to 32 lines) into plane 2 as font 0: the glyphs for code page 437's
 * 256 characters through the font's unicode table, or its first 256 when it
 * has none; shade and block characters it lacks are drawn.  vga_create()
 * tries Debian console-setup-linux's VGA fonts.  0, or -1 with a reason in
 * `err` (plane 2 unchanged).
 */
int vga_load_font(struct vga *vga, const char *path, char *err, size_t errlen);

/* One byte of the 0xA0000-0xBFFFF window at `offset` (0-0x1FFFF) through the
 * read/write modes, as the MMIO handler does (tests, fuzzing). */
uint8_t vga_mem_read(struct vga *vga, uint32_t offset);
void vga_mem_write(struct vga *vga, uint32_t offset, uint8_t val);

/* Fix the text blink and cursor phase (0 off, 1 on) for reproducible
 * renders; -1 (the default) follows the clock. */
void vga_set_blink_phase(struct vga *vga, int phase);

/* Register access as through `port` (0x3B0-0x3DF); `size` 1 or 2 (a 16-bit
 * access is index then data).  fbuf's MMIO BAR forwards its 0x400-0x41F
 * range here (port 0x3C0 + offset - 0x400). */
uint32_t vga_port_read(struct vga *vga, uint16_t port, unsigned size);
void vga_port_write(struct vga *vga, uint16_t port, unsigned size, uint32_t val);

/*
 * Draw the current mode into `pixels` (room for `cap` XRGB8888 pixels) and
 * fill `f` (pixels, width, height, stride, changed areas; `full` on a mode
 * change).  False, `f` untouched, when the screen is off (sequencer reset
 * or screen disabled, or the attribute controller's palette address source
 * bit clear), or the frame needs more than `cap` pixels (at most 2304 x
 * 2048).  Draws text, 16-colour planar, CGA 4-colour and 256-colour modes
 * at their displayed size (320x200 modes as 640x400).  `pixels` stays the
 * caller's; the VGA keeps its own copy of the previous frame for the
 * changed rectangles (one per text row or 16-line band).  When nothing was
 * written since the last call (and the blink and cursor phases are the
 * same), nothing is drawn: `pixels` must then still hold that call's frame
 * (pass the same buffer, or call vga_forget_frame() after reusing it).  Any
 * thread, one at a time; holds the VGA's lock only to snapshot its state, so
 * a vCPU waits microseconds at most.
 */
bool vga_render(struct vga *vga, uint32_t *pixels, size_t cap, struct console_frame *f);

/* How many register and video-memory writes the VGA has taken (wraps);
 * equal values mean nothing was written in between. */
uint64_t vga_write_count(struct vga *vga);

/* The caller's buffer no longer holds the last frame (it drew something
 * else there): the next vga_render() draws in full. */
void vga_forget_frame(struct vga *vga);

/* The DAC's 256 colours as XRGB8888, for DISPI 8-bit modes: 6-bit DAC
 * values scaled to 8 bits, or taken as 8-bit when `dac8`. */
void vga_palette(struct vga *vga, uint32_t pal[256], bool dac8);

/*
 * Saved state (docs/design/snapshots.md section 2, "vga"): the registers
 * (misc, feature control, sequencer, graphics, attribute with its
 * flip-flop, CRTC, DAC with its read/write cycle), the latches and the four
 * planes (sparse, vga_put_pages()).  Not the render side: the next
 * vga_render() draws in full.  vga_save() appends to `out` (no version of
 * its own: it lives inside fbuf's section, whose version covers it).
 * vga_restore() checks every index and cycle position first and fails the
 * reader (sbuf_fail) leaving the registers untouched; the planes are read
 * only after the registers passed.  0, or -1 with the reader failed.
 */
void vga_save(struct vga *vga, struct sbuf *out);
int vga_restore(struct vga *vga, struct sbuf_reader *in);

/*
 * Sparse memory for saved state: `len` bytes at `mem` (a multiple of 4 KiB)
 * as u32 run count, then per run u32 first page, u32 pages and the bytes;
 * all-zero 4 KiB pages are skipped.  vga_get_pages() reads that back into
 * `mem` (pages in no run become zero), refusing runs out of range, out of
 * order or overlapping (the reader fails; `mem` may then be partly
 * written).  Shared by fbuf's VRAM.
 */
void vga_put_pages(struct sbuf *out, const uint8_t *mem, size_t len);
int vga_get_pages(struct sbuf_reader *in, uint8_t *mem, size_t len, const char *what);

#endif
