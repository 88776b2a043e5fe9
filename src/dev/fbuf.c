/*
 * fbuf: QEMU's stdvga / bochs-display PCI device with bhyve's pci_fbuf
 * options (see dev/fbuf.h).
 *
 * Facts followed: the Bochs VBE "DISPI" interface (Bochs vbe.h, QEMU
 * hw/display/vga.c: register set, GETCAPS, the clamping of bogus modes),
 * QEMU hw/display/vga-pci.c (BAR layout, MMIO register file, extended
 * registers), VESA E-EDID (EDID block), and bhyve's pci_fbuf.c (options).
 *
 * Threads: vCPUs touch the registers (ports, BAR2) and, when KVM cannot map
 * it, the framebuffer through BAR0; the VNC thread calls fbuf_refresh(),
 * the API thread fbuf_screenshot().  fb->lock guards the registers, the
 * memory slot and the soft dirty bits; fb->frame_lock the display-side
 * fields (shadow, shown mode), which those two refreshes share.
 */
#include "dev/fbuf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/un.h>

#include "backend/console.h"
#include "backend/vnc.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "dev/vga.h"
#include "lib/aml.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/devopts.h"
#include "lib/file.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/sbuf.h"
#include "vmm/kvm.h"

/* Bochs VBE DISPI registers (index values) and ENABLE bits. */
#define DISPI_PORT          0x1ce /* index; data at 0x1cf */
#define DISPI_ID            0x0
#define DISPI_XRES          0x1
#define DISPI_YRES          0x2
#define DISPI_BPP           0x3
#define DISPI_ENABLE        0x4
#define DISPI_BANK          0x5
#define DISPI_VIRT_WIDTH    0x6
#define DISPI_VIRT_HEIGHT   0x7
#define DISPI_X_OFFSET      0x8
#define DISPI_Y_OFFSET      0x9
#define DISPI_VIDEO_MEM_64K 0xa
#define DISPI_NREGS         10 /* stored registers 0-9 */
#define DISPI_ID0           0xb0c0
#define DISPI_ID5           0xb0c5
#define DISPI_ENABLED       0x01
#define DISPI_GETCAPS       0x02
#define DISPI_8BIT_DAC      0x20
#define DISPI_LFB_ENABLED   0x40
#define DISPI_NOCLEARMEM    0x80
#define DISPI_MAX_BPP       32

/* BAR2 layout (QEMU vga-pci.c). */
#define MMIO_EDID      0x000
#define MMIO_VGA       0x400
#define MMIO_VGA_LEN   0x20
#define MMIO_DISPI     0x500
#define MMIO_DISPI_LEN (2 * (DISPI_VIDEO_MEM_64K + 1))
#define MMIO_QEXT      0x600
#define QEXT_LEN       8 /* what the size register reports */
#define QEXT_BYTEORDER 0x604
#define QEXT_BIG       0xbebebebeu
#define QEXT_LITTLE    0x1e1e1e1eu

#define FBUF_NPAGES    (FBUF_VRAM_SIZE / FBUF_PAGE)
#define FBUF_NWORDS    (FBUF_NPAGES / 64)
#define SHADOW_PIXELS  ((size_t)FBUF_MAX_W * FBUF_MAX_H)

#define VGABIOS_STDVGA "/usr/share/seabios/vgabios-stdvga.bin"
#define VGABIOS_BOCHS  "/usr/share/seabios/vgabios-bochs-display.bin"

enum fbuf_vga { FBUF_VGA_OFF, FBUF_VGA_IO, FBUF_VGA_ON };

/* What is on the screen: a DISPI mode, the legacy VGA, or nothing yet. */
enum fbuf_shown { SHOWN_NONE, SHOWN_DISPI, SHOWN_VGA, SHOWN_BLANK };

/* The options, checked (bhyve pci_fbuf syntax). */
struct fbuf_opts {
	char host[256];
	int port;
	const char *unix_path;
	const char *password;
	uint32_t width, height;
	enum fbuf_vga vga;
	bool wait;
	bool vnc;
};

/* A DISPI mode as the display needs it. */
struct fbuf_mode {
	bool enabled;
	uint32_t xres, yres, bpp, line; /* line: bytes per row */
	uint64_t start;                 /* bytes into the framebuffer */
	bool dac8, big_endian;
};

struct fbuf {
	pthread_mutex_t lock;
	struct machine *m;
	struct pci_func *f;
	struct vga *vga; /* NULL with vga=off */
	uint8_t *vram;   /* FBUF_VRAM_SIZE, BAR0's contents */
	int slot;        /* KVM slot for BAR0, -1 without one */
	bool slot_on;
	uint16_t index;
	uint16_t regs[DISPI_NREGS];
	uint32_t byteorder;
	uint8_t edid[FBUF_EDID_SIZE];
	uint64_t soft_dirty[FBUF_NWORDS]; /* written through BAR0 exits */
	bool redraw;                      /* slot moved: the KVM log restarted */
	uint32_t width, height;           /* the configured (EDID) size */
	/* frame_lock: the VNC thread's refresh and the API's screenshot */
	pthread_mutex_t frame_lock;
	bool resend;             /* a screenshot took the changes: the VNC's next frame is full */
	uint32_t *shadow;        /* SHADOW_PIXELS, the frame handed out */
	uint64_t vga_seen;       /* vga_write_count() at the last refresh */
	uint64_t vga_pending_ns; /* since when writes wait to be drawn, 0: none */
	uint32_t vga_w, vga_h;   /* the VGA frame last handed out */
	uint64_t dirty[FBUF_NWORDS];
	struct fbuf_mode shown_mode;
	enum fbuf_shown shown;
	uint32_t pal[256];
	struct vnc_server *vnc;
};

static struct ratelimit fbuf_rl = RATELIMIT_INIT;
static bool have_legacy_vga, have_vga_text;

bool fbuf_legacy_vga(void)
{
	return have_legacy_vga;
}

bool fbuf_vga_text(void)
{
	return have_vga_text;
}

/* ---- EDID (VESA E-EDID, EDID 1.4 base block) ---- */

#define EDID_HBLANK 160 /* CVT reduced blanking */
#define EDID_HFRONT 48
#define EDID_HSYNC  32
#define EDID_VFRONT 3
#define EDID_VSYNC  6
#define EDID_VBLANK 34
#define EDID_HZ     60
#define EDID_DPI_MM 264 /* tenths of a mm per pixel at 96 dpi */

static void edid_detailed_timing(uint8_t *d, uint32_t w, uint32_t h)
{
	uint32_t clock = (w + EDID_HBLANK) * (h + EDID_VBLANK) * EDID_HZ / 10000; /* 10 kHz */
	uint32_t wmm = w * EDID_DPI_MM / 1000, hmm = h * EDID_DPI_MM / 1000;

	d[0] = (uint8_t)clock;
	d[1] = (uint8_t)(clock >> 8);
	d[2] = (uint8_t)w;
	d[3] = (uint8_t)EDID_HBLANK;
	d[4] = (uint8_t)(((w >> 8) << 4) | (EDID_HBLANK >> 8));
	d[5] = (uint8_t)h;
	d[6] = (uint8_t)EDID_VBLANK;
	d[7] = (uint8_t)(((h >> 8) << 4) | (EDID_VBLANK >> 8));
	d[8] = EDID_HFRONT;
	d[9] = EDID_HSYNC;
	d[10] = (uint8_t)((EDID_VFRONT << 4) | EDID_VSYNC);
	d[11] = 0; /* high bits of the sync fields: all small */
	d[12] = (uint8_t)wmm;
	d[13] = (uint8_t)hmm;
	d[14] = (uint8_t)(((wmm >> 8) << 4) | ((hmm >> 8) & 0xf));
	d[17] = 0x1a; /* digital separate sync, hsync +, vsync - */
}

/* A display descriptor (tag 0xFC name, 0xFD range limits, 0x10 dummy). */
static void edid_descriptor(uint8_t *d, uint8_t tag, const uint8_t *body, size_t n)
{
	d[3] = tag;
	if (n > 0)
		memcpy(d + 5, body, n);
}

void fbuf_build_edid(uint8_t e[FBUF_EDID_SIZE], uint32_t w, uint32_t h)
{
	static const uint8_t header[8] = {0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00};
	/* sRGB primaries and white point, 10-bit CIE xy (EDID section 3.7) */
	static const uint8_t chroma[10] = {0xee, 0x91, 0xa3, 0x54, 0x4c,
	                                   0x99, 0x26, 0x0f, 0x50, 0x54};
	/* 50-125 Hz, 30-160 kHz, 600 MHz, range limits only */
	static const uint8_t range[13] = {50,  125, 30,  160, 60,  0x01, 0x0a,
	                                  ' ', ' ', ' ', ' ', ' ', ' '};
	static const uint8_t name[13] = {'k', 'h', 'y', 'v', 'e', '\n', ' ',
	                                 ' ', ' ', ' ', ' ', ' ', ' '};
	uint16_t vendor = ('K' - '@') << 10 | ('H' - '@') << 5 | ('V' - '@'); /* "KHV" */
	uint8_t sum = 0;

	memset(e, 0, FBUF_EDID_SIZE);
	memcpy(e, header, sizeof(header));
	e[8] = (uint8_t)(vendor >> 8);
	e[9] = (uint8_t)vendor;
	e[10] = 0x11; /* product code 0x1111, as the PCI device */
	e[11] = 0x11;
	e[16] = 1;  /* week */
	e[17] = 36; /* 2026 - 1990 */
	e[18] = 1;  /* EDID 1.4 */
	e[19] = 4;
	e[20] = 0xa5;                               /* digital, 8 bits per colour, DisplayPort */
	e[21] = (uint8_t)(w * EDID_DPI_MM / 10000); /* cm */
	e[22] = (uint8_t)(h * EDID_DPI_MM / 10000);
	e[23] = 120;  /* gamma 2.2 */
	e[24] = 0x06; /* RGB 4:4:4, sRGB default, preferred timing is native */
	memcpy(e + 25, chroma, sizeof(chroma));
	e[35] = 0x21; /* established: 640x480@60, 800x600@60 */
	e[36] = 0x08; /* 1024x768@60 */
	for (unsigned i = 38; i < 54; i++)
		e[i] = 0x01; /* standard timings unused */
	edid_detailed_timing(e + 54, w, h);
	edid_descriptor(e + 72, 0xfd, range, sizeof(range));
	edid_descriptor(e + 90, 0xfc, name, sizeof(name));
	edid_descriptor(e + 108, 0x10, NULL, 0);
	for (unsigned i = 0; i < FBUF_EDID_SIZE - 1; i++)
		sum = (uint8_t)(sum + e[i]);
	e[FBUF_EDID_SIZE - 1] = (uint8_t)(0x100 - sum);
}

/* ---- DISPI registers ---- */

/* Bits per pixel in memory; 0 for a depth the device refuses. */
static unsigned dispi_bits(uint16_t bpp)
{
	switch (bpp) {
	case 8:
	case 16:
	case 24:
	case 32:
		return bpp;
	case 15:
		return 16;
	default:
		return 0;
	}
}

static uint16_t clamp16(uint32_t v, uint32_t lo, uint32_t hi)
{
	return (uint16_t)(v < lo ? lo : v > hi ? hi : v);
}

/* Byte offset of the shown area's first pixel. */
static uint64_t dispi_start(const uint16_t *r, uint32_t line)
{
	return (uint64_t)r[DISPI_X_OFFSET] * dispi_bits(r[DISPI_BPP]) / 8 +
	       (uint64_t)r[DISPI_Y_OFFSET] * line;
}

/*
 * Bring the registers of an enabled mode back into what the framebuffer
 * holds, as QEMU does (the interface has no way to report an error): a
 * refused depth becomes 8, sizes are clamped and rounded, offsets that
 * would run past the end drop to 0.
 */
static void dispi_fixup_regs(uint16_t *r)
{
	uint32_t line, maxy;

	if (!(r[DISPI_ENABLE] & DISPI_ENABLED))
		return;
	if (dispi_bits(r[DISPI_BPP]) == 0)
		r[DISPI_BPP] = 8;
	r[DISPI_XRES] = clamp16(r[DISPI_XRES] & ~7u, 8, FBUF_MAX_W);
	r[DISPI_VIRT_WIDTH] = clamp16(r[DISPI_VIRT_WIDTH] & ~7u, r[DISPI_XRES], FBUF_MAX_W);
	line = r[DISPI_VIRT_WIDTH] * dispi_bits(r[DISPI_BPP]) / 8;
	maxy = FBUF_VRAM_SIZE / line;
	if (maxy > 0xffff)
		maxy = 0xffff;
	r[DISPI_YRES] = clamp16(r[DISPI_YRES], 1, maxy < FBUF_MAX_H ? maxy : FBUF_MAX_H);
	r[DISPI_X_OFFSET] = clamp16(r[DISPI_X_OFFSET], 0, FBUF_MAX_W);
	r[DISPI_Y_OFFSET] = clamp16(r[DISPI_Y_OFFSET], 0, maxy);
	if (dispi_start(r, line) + (uint64_t)r[DISPI_YRES] * line > FBUF_VRAM_SIZE)
		r[DISPI_Y_OFFSET] = 0;
	if (dispi_start(r, line) + (uint64_t)r[DISPI_YRES] * line > FBUF_VRAM_SIZE)
		r[DISPI_X_OFFSET] = 0;
	r[DISPI_VIRT_HEIGHT] = (uint16_t)maxy;
}

static void dispi_fixup(struct fbuf *fb)
{
	dispi_fixup_regs(fb->regs);
}

static void dispi_enable(struct fbuf *fb, uint16_t val)
{
	uint16_t *r = fb->regs;

	if ((val & DISPI_ENABLED) && !(r[DISPI_ENABLE] & DISPI_ENABLED)) {
		r[DISPI_VIRT_WIDTH] = 0;
		r[DISPI_X_OFFSET] = 0;
		r[DISPI_Y_OFFSET] = 0;
		r[DISPI_ENABLE] |= DISPI_ENABLED;
		dispi_fixup(fb);
		if (!(val & DISPI_NOCLEARMEM))
			memset(fb->vram, 0,
			       (size_t)r[DISPI_YRES] * r[DISPI_VIRT_WIDTH] *
			           dispi_bits(r[DISPI_BPP]) / 8);
	}
	r[DISPI_ENABLE] = val;
}

static void dispi_write(struct fbuf *fb, unsigned idx, uint16_t val)
{
	switch (idx) {
	case DISPI_ID:
		if (val >= DISPI_ID0 && val <= DISPI_ID5)
			fb->regs[DISPI_ID] = val;
		break;
	case DISPI_XRES:
	case DISPI_YRES:
	case DISPI_BPP:
	case DISPI_VIRT_WIDTH:
	case DISPI_X_OFFSET:
	case DISPI_Y_OFFSET:
		fb->regs[idx] = val;
		dispi_fixup(fb);
		break;
	case DISPI_BANK:
		/* 64 KiB banks of the 0xA0000 window; the window itself is the
		 * legacy VGA's, so the bank is only remembered. */
		fb->regs[DISPI_BANK] = val & (FBUF_VRAM_SIZE / 65536 - 1);
		break;
	case DISPI_ENABLE:
		dispi_enable(fb, val);
		break;
	default: /* VIRT_HEIGHT and VIDEO_MEMORY_64K are read-only */
		break;
	}
}

static uint16_t dispi_read(const struct fbuf *fb, unsigned idx)
{
	if (idx == DISPI_VIDEO_MEM_64K)
		return FBUF_VRAM_SIZE / 65536;
	if (idx >= DISPI_NREGS)
		return 0;
	if (fb->regs[DISPI_ENABLE] & DISPI_GETCAPS) {
		if (idx == DISPI_XRES)
			return FBUF_MAX_W;
		if (idx == DISPI_YRES)
			return FBUF_MAX_H;
		if (idx == DISPI_BPP)
			return DISPI_MAX_BPP;
	}
	return fb->regs[idx];
}

/* Ports 0x1CE (index) and 0x1CF (data), 8- or 16-bit. */
static int dispi_port(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct fbuf *fb = arg;
	uint16_t v = (uint16_t)(size == 1 ? (*val & 0xff) : *val);

	if (size > 2 || offset + size > 3)
		return -1;
	pthread_mutex_lock(&fb->lock);
	if (offset == 0 && is_write)
		fb->index = v;
	else if (offset == 0)
		*val = fb->index;
	else if (is_write)
		dispi_write(fb, fb->index, v);
	else
		*val = dispi_read(fb, fb->index);
	if (!is_write && size == 1)
		*val &= 0xff;
	pthread_mutex_unlock(&fb->lock);
	return 0;
}

/* ---- BAR2: the MMIO register file ---- */

static uint64_t mmio_read_byte(struct fbuf *fb, uint64_t off)
{
	if (off < MMIO_EDID + FBUF_EDID_SIZE)
		return fb->edid[off];
	if (off >= MMIO_VGA && off < MMIO_VGA + MMIO_VGA_LEN)
		return fb->vga
		           ? vga_port_read(fb->vga, (uint16_t)(0x3c0 + off - MMIO_VGA), 1) & 0xff
		           : 0xff;
	if (off >= MMIO_DISPI && off < MMIO_DISPI + MMIO_DISPI_LEN)
		return (dispi_read(fb, (unsigned)(off - MMIO_DISPI) / 2) >> (8 * (off & 1))) & 0xff;
	if (off >= MMIO_QEXT && off < MMIO_QEXT + 4)
		return (QEXT_LEN >> (8 * (off - MMIO_QEXT))) & 0xff;
	if (off >= QEXT_BYTEORDER && off < QEXT_BYTEORDER + 4)
		return (fb->byteorder >> (8 * (off - QEXT_BYTEORDER))) & 0xff;
	return 0;
}

static uint64_t mmio_read(struct fbuf *fb, uint64_t off, unsigned size)
{
	uint64_t v = 0;

	if (size <= 2 && off >= MMIO_VGA && off < MMIO_VGA + MMIO_VGA_LEN && fb->vga != NULL)
		return vga_port_read(fb->vga, (uint16_t)(0x3c0 + off - MMIO_VGA), size);
	pthread_mutex_lock(&fb->lock);
	for (unsigned i = 0; i < size; i++)
		v |= mmio_read_byte(fb, off + i) << (8 * i);
	pthread_mutex_unlock(&fb->lock);
	return v;
}

static void mmio_write(struct fbuf *fb, uint64_t off, unsigned size, uint64_t val)
{
	if (off >= MMIO_VGA && off + size <= MMIO_VGA + MMIO_VGA_LEN) {
		if (fb->vga != NULL && size <= 2)
			vga_port_write(fb->vga, (uint16_t)(0x3c0 + off - MMIO_VGA), size,
			               (uint32_t)val);
		return;
	}
	pthread_mutex_lock(&fb->lock);
	if (off >= MMIO_DISPI && off + size <= MMIO_DISPI + MMIO_DISPI_LEN && !(off & 1) &&
	    (size == 2 || size == 4)) {
		dispi_write(fb, (unsigned)(off - MMIO_DISPI) / 2, (uint16_t)val);
		if (size == 4)
			dispi_write(fb, (unsigned)(off - MMIO_DISPI) / 2 + 1,
			            (uint16_t)(val >> 16));
	} else if (off == QEXT_BYTEORDER && size == 4 && (val == QEXT_BIG || val == QEXT_LITTLE)) {
		fb->byteorder = (uint32_t)val;
	} else {
		log_ratelimited(&fbuf_rl, LOG_DEBUG, "fbuf: BAR2 write at 0x%llx size %u ignored",
		                (unsigned long long)off, size);
	}
	pthread_mutex_unlock(&fb->lock);
}

/* ---- BAR0: the framebuffer, when KVM does not serve it ---- */

static void mark_soft_dirty(struct fbuf *fb, uint64_t off, unsigned size)
{
	for (uint64_t p = off / FBUF_PAGE; p <= (off + size - 1) / FBUF_PAGE; p++)
		fb->soft_dirty[p / 64] |= 1ull << (p % 64);
}

static uint64_t fbuf_bar_read(struct pci_func *f, int bar, uint64_t offset, unsigned size)
{
	struct fbuf *fb = f->softc;
	uint64_t v = 0;

	if (bar == 2)
		return mmio_read(fb, offset, size);
	if (bar == 0 && size <= 8 && offset + size <= FBUF_VRAM_SIZE)
		memcpy(&v, fb->vram + offset, size);
	return v;
}

static void fbuf_bar_write(struct pci_func *f, int bar, uint64_t offset, unsigned size,
                           uint64_t val)
{
	struct fbuf *fb = f->softc;

	if (bar == 2) {
		mmio_write(fb, offset, size, val);
		return;
	}
	if (bar != 0 || size == 0 || size > 8 || offset + size > FBUF_VRAM_SIZE)
		return;
	pthread_mutex_lock(&fb->lock);
	memcpy(fb->vram + offset, &val, size);
	mark_soft_dirty(fb, offset, size);
	pthread_mutex_unlock(&fb->lock);
}

/* The guest mapped, unmapped or moved BAR0: follow with the KVM slot so
 * pixel writes go to memory without exits.  Called with cfg_lock held. */
static void fbuf_bar_moved(struct pci_func *f, int bar)
{
	struct fbuf *fb = f->softc;
	struct pci_bar *b = &f->bar[0];

	if (bar != 0 || fb->slot < 0)
		return;
	pthread_mutex_lock(&fb->lock);
	if (fb->slot_on)
		vm_ram_window_set(&fb->m->vm, fb->slot, 0, FBUF_VRAM_SIZE, fb->vram, false);
	fb->slot_on = false;
	if (b->mapped) {
		fb->slot_on = vm_ram_window_set(&fb->m->vm, fb->slot, b->addr, FBUF_VRAM_SIZE,
		                                fb->vram, true) == 0;
		if (fb->slot_on)
			log_debug("fbuf: framebuffer at 0x%llx served by KVM",
			          (unsigned long long)b->addr);
		else
			log_ratelimited(&fbuf_rl, LOG_DEBUG,
			                "fbuf: framebuffer at 0x%llx not mapped by KVM (%s)",
			                (unsigned long long)b->addr, strerror(errno));
	}
	fb->redraw = true;
	pthread_mutex_unlock(&fb->lock);
}

/* ---- the display ---- */

static uint32_t rgb565(uint16_t p)
{
	uint32_t r = (p >> 11) & 0x1f, g = (p >> 5) & 0x3f, b = p & 0x1f;

	return (r << 19 | (r >> 2) << 16) | (g << 10 | (g >> 4) << 8) | (b << 3 | b >> 2);
}

static uint32_t rgb555(uint16_t p)
{
	uint32_t r = (p >> 10) & 0x1f, g = (p >> 5) & 0x1f, b = p & 0x1f;

	return (r << 19 | (r >> 2) << 16) | (g << 11 | (g >> 2) << 8) | (b << 3 | b >> 2);
}

void fbuf_convert(uint32_t *dst, const uint8_t *src, uint32_t n, unsigned bpp,
                  const uint32_t pal[256], bool big_endian)
{
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *s;
		uint16_t p16;

		switch (bpp) {
		case 8:
			dst[i] = pal[src[i]];
			break;
		case 15:
		case 16:
			s = src + 2 * i;
			p16 = big_endian ? (uint16_t)(s[0] << 8 | s[1])
			                 : (uint16_t)(s[1] << 8 | s[0]);
			dst[i] = bpp == 15 ? rgb555(p16) : rgb565(p16);
			break;
		case 24:
			s = src + 3 * i;
			dst[i] = (uint32_t)s[2] << 16 | (uint32_t)s[1] << 8 | s[0];
			break;
		case 32:
			s = src + 4 * i;
			dst[i] = big_endian ? ((uint32_t)s[1] << 16 | (uint32_t)s[2] << 8 | s[3])
			                    : ((uint32_t)s[2] << 16 | (uint32_t)s[1] << 8 | s[0]);
			break;
		default:
			dst[i] = 0;
			break;
		}
	}
}

/* Rows [first, last] are changed: extend the last rectangle or add one. */
static unsigned add_rows(struct console_rect *rects, unsigned n, unsigned cap, uint32_t xres,
                         uint32_t first, uint32_t last)
{
	struct console_rect *prev = n > 0 ? &rects[n - 1] : NULL;

	if (prev != NULL && (first <= prev->y + prev->h || n == cap)) {
		if (last + 1 > prev->y + prev->h)
			prev->h = last + 1 - prev->y;
		return n;
	}
	rects[n] = (struct console_rect){.x = 0, .y = first, .w = xres, .h = last - first + 1};
	return n + 1;
}

unsigned fbuf_dirty_rects(const uint64_t *bitmap, size_t npages, uint64_t start, uint32_t line,
                          uint32_t xres, uint32_t yres, struct console_rect *rects, unsigned cap)
{
	uint64_t end = start + (uint64_t)yres * line;
	unsigned n = 0;

	if (line == 0 || yres == 0 || cap == 0)
		return 0;
	for (size_t p = start / FBUF_PAGE; p < npages && (uint64_t)p * FBUF_PAGE < end; p++) {
		uint64_t b0 = (uint64_t)p * FBUF_PAGE, b1 = b0 + FBUF_PAGE;

		if (!(bitmap[p / 64] & (1ull << (p % 64))))
			continue;
		if (b0 < start)
			b0 = start;
		if (b1 > end)
			b1 = end;
		n = add_rows(rects, n, cap, xres, (uint32_t)((b0 - start) / line),
		             (uint32_t)((b1 - 1 - start) / line));
	}
	return n;
}

/* A fixed palette for 8-bit modes without a VGA DAC (vga=off): 3-3-2. */
static void palette_332(uint32_t pal[256])
{
	for (unsigned i = 0; i < 256; i++) {
		uint32_t r = (i >> 5) & 7, g = (i >> 2) & 7, b = i & 3;

		pal[i] = (r * 255 / 7) << 16 | (g * 255 / 7) << 8 | (b * 255 / 3);
	}
}

static struct fbuf_mode current_mode(const struct fbuf *fb)
{
	const uint16_t *r = fb->regs;
	struct fbuf_mode md = {.enabled = (r[DISPI_ENABLE] & DISPI_ENABLED) != 0};

	if (!md.enabled)
		return md;
	md.xres = r[DISPI_XRES];
	md.yres = r[DISPI_YRES];
	md.bpp = r[DISPI_BPP];
	md.line = r[DISPI_VIRT_WIDTH] * dispi_bits(r[DISPI_BPP]) / 8;
	md.start = dispi_start(r, md.line);
	md.dac8 = (r[DISPI_ENABLE] & DISPI_8BIT_DAC) != 0;
	md.big_endian = fb->byteorder == QEXT_BIG;
	return md;
}

/* Snapshot the mode and collect the pages written since the last call;
 * false when everything must be redrawn (the log restarted or failed). */
static bool take_dirty(struct fbuf *fb, struct fbuf_mode *md)
{
	uint64_t kvm[FBUF_NWORDS];
	bool complete = true;

	pthread_mutex_lock(&fb->lock);
	*md = current_mode(fb);
	memcpy(fb->dirty, fb->soft_dirty, sizeof(fb->dirty));
	memset(fb->soft_dirty, 0, sizeof(fb->soft_dirty));
	if (fb->slot_on) {
		if (vm_ram_window_dirty(&fb->m->vm, fb->slot, kvm) == 0)
			for (unsigned i = 0; i < FBUF_NWORDS; i++)
				fb->dirty[i] |= kvm[i];
		else
			complete = false;
	}
	if (fb->redraw)
		complete = false;
	fb->redraw = false;
	pthread_mutex_unlock(&fb->lock);
	return complete;
}

static void convert_rows(struct fbuf *fb, const struct fbuf_mode *md, uint32_t y0, uint32_t h)
{
	for (uint32_t y = y0; y < y0 + h; y++)
		fbuf_convert(fb->shadow + (size_t)y * md->xres,
		             fb->vram + md->start + (uint64_t)y * md->line, md->xres, md->bpp,
		             fb->pal, md->big_endian);
}

static bool palette_update(struct fbuf *fb, const struct fbuf_mode *md)
{
	uint32_t pal[256];

	if (fb->vga != NULL)
		vga_palette(fb->vga, pal, md->dac8);
	else
		palette_332(pal);
	if (memcmp(pal, fb->pal, sizeof(pal)) == 0)
		return false;
	memcpy(fb->pal, pal, sizeof(pal));
	return true;
}

static bool same_mode(const struct fbuf_mode *a, const struct fbuf_mode *b)
{
	return a->enabled == b->enabled && a->xres == b->xres && a->yres == b->yres &&
	       a->bpp == b->bpp && a->line == b->line && a->start == b->start &&
	       a->dac8 == b->dac8 && a->big_endian == b->big_endian;
}

static void refresh_dispi(struct fbuf *fb, const struct fbuf_mode *md, bool complete,
                          struct console_frame *f)
{
	bool full = !complete || fb->shown != SHOWN_DISPI || !same_mode(md, &fb->shown_mode);

	if (md->bpp == 8 && palette_update(fb, md))
		full = true;
	f->pixels = fb->shadow;
	f->width = f->stride = md->xres;
	f->height = md->yres;
	if (full) {
		f->full = true;
		convert_rows(fb, md, 0, md->yres);
	} else {
		f->nrects = fbuf_dirty_rects(fb->dirty, FBUF_NPAGES, md->start, md->line, md->xres,
		                             md->yres, f->rects, CONSOLE_MAX_RECTS);
		for (unsigned i = 0; i < f->nrects; i++)
			convert_rows(fb, md, f->rects[i].y, f->rects[i].h);
	}
	fb->shown = SHOWN_DISPI;
	fb->shown_mode = *md;
}

/* DISPI off: the legacy VGA's picture, or a black screen of the
 * configured size (no VGA, or a VGA with its screen off). */
/*
 * Text reaches the VGA a character at a time, each write an exit, so a
 * refresh in the middle of a line sends a torn line and then the rest.
 * While the writes go on, hold the picture back for up to VGA_SETTLE_NS
 * (a refresh or two) so that one update carries the whole change.
 */
#define VGA_SETTLE_NS 50000000ull

static bool vga_settling(struct fbuf *fb)
{
	uint64_t gen = vga_write_count(fb->vga), now = monotonic_ns();

	if (gen == fb->vga_seen || fb->shown != SHOWN_VGA) {
		fb->vga_seen = gen;
		fb->vga_pending_ns = 0;
		return false;
	}
	fb->vga_seen = gen;
	if (fb->vga_pending_ns == 0)
		fb->vga_pending_ns = now;
	if (now - fb->vga_pending_ns < VGA_SETTLE_NS)
		return true;
	fb->vga_pending_ns = 0;
	return false;
}

static void refresh_legacy(struct fbuf *fb, struct console_frame *f)
{
	if (fb->vga != NULL && fb->shown != SHOWN_VGA) /* the shadow held another picture */
		vga_forget_frame(fb->vga);
	if (fb->vga != NULL && vga_settling(fb)) {
		f->pixels = fb->shadow;
		f->width = f->stride = fb->vga_w;
		f->height = fb->vga_h;
		return;
	}
	if (fb->vga != NULL && vga_render(fb->vga, fb->shadow, SHADOW_PIXELS, f)) {
		if (fb->shown != SHOWN_VGA)
			f->full = true;
		fb->shown = SHOWN_VGA;
		fb->vga_w = f->width;
		fb->vga_h = f->height;
		return;
	}
	f->pixels = fb->shadow;
	f->width = f->stride = fb->width;
	f->height = fb->height;
	if (fb->shown != SHOWN_BLANK) {
		memset(fb->shadow, 0, (size_t)fb->width * fb->height * sizeof(uint32_t));
		f->full = true;
	}
	fb->shown = SHOWN_BLANK;
}

/* The current frame into the shadow (frame_lock held). */
static void refresh_frame(struct fbuf *fb, struct console_frame *f)
{
	struct fbuf_mode md;
	bool complete = take_dirty(fb, &md);

	if (md.enabled)
		refresh_dispi(fb, &md, complete, f);
	else
		refresh_legacy(fb, f);
}

static void fbuf_refresh(void *arg, struct console_frame *f)
{
	struct fbuf *fb = arg;

	pthread_mutex_lock(&fb->frame_lock);
	refresh_frame(fb, f);
	if (fb->resend)
		f->full = true;
	fb->resend = false;
	pthread_mutex_unlock(&fb->frame_lock);
}

/*
 * The API's screenshot (machine_screenshot_fn): the same refresh as the
 * VNC thread's, copied out.  It takes the changes the VNC thread would
 * have sent, so that thread's next frame goes out in full; a VNC update
 * being sent while this redraws the shadow may tear, and that full frame
 * repairs it.
 */
static int fbuf_screenshot(void *arg, uint32_t **pixels, uint32_t *width, uint32_t *height)
{
	struct fbuf *fb = arg;
	struct console_frame *f = calloc(1, sizeof(*f));
	uint32_t *out = NULL;

	if (f == NULL)
		return -1;
	pthread_mutex_lock(&fb->frame_lock);
	refresh_frame(fb, f);
	fb->resend = true;
	if (f->pixels != NULL && f->width > 0 && f->height > 0 && f->stride >= f->width)
		out = malloc((size_t)f->width * f->height * sizeof(uint32_t));
	for (uint32_t y = 0; out != NULL && y < f->height; y++)
		memcpy(out + (size_t)y * f->width, f->pixels + (size_t)y * f->stride,
		       (size_t)f->width * sizeof(uint32_t));
	pthread_mutex_unlock(&fb->frame_lock);
	*pixels = out;
	*width = f->width;
	*height = f->height;
	free(f);
	return out != NULL ? 0 : -1;
}

/* ---- options ---- */

static const char *const fbuf_keys[] = {
    "device", "tcp", "rfb", "unix", "w", "h", "vga", "password", "wait", "rom", "vnc", NULL,
};

static int check_keys(struct config_node *node, char *err, size_t errlen)
{
	return devopts_check_keys(node, fbuf_keys, sizeof(fbuf_keys) / sizeof(fbuf_keys[0]) - 1,
	                          err, errlen);
}

/* A host name: letters, digits, '.', '-', not all digits and dots (that
 * would be a malformed IPv4 literal). */
static bool host_name_valid(const char *s)
{
	if (*s == '\0' || strlen(s) > 253 || strspn(s, "0123456789.") == strlen(s))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '-'))
			return false;
	return true;
}

/* "IP", "IP:PORT", "[IPv6]", "[IPv6]:PORT", "NAME[:PORT]". */
static int parse_tcp(const char *s, struct fbuf_opts *o, char *err, size_t errlen)
{
	char buf[300];
	const char *port = NULL;
	char *host = buf, *close;
	uint8_t addr[16];
	uint64_t p;

	if (strlen(s) >= sizeof(buf))
		goto bad;
	strcpy(buf, s);
	if (buf[0] == '[') {
		close = strchr(buf, ']');
		if (close == NULL || (close[1] != '\0' && close[1] != ':'))
			goto bad;
		*close = '\0';
		host = buf + 1;
		port = close[1] == ':' ? close + 2 : NULL;
		if (inet_pton(AF_INET6, host, addr) != 1)
			goto bad;
	} else {
		close = strrchr(buf, ':');
		if (close != NULL) {
			*close = '\0';
			port = close + 1;
		}
		if (*host == '\0')
			host = "127.0.0.1"; /* ":PORT" */
		else if (inet_pton(AF_INET, host, addr) != 1 && !host_name_valid(host))
			goto bad;
	}
	if (port != NULL && parse_uint(port, 1, 65535, &p) < 0)
		goto bad;
	if (strlen(host) >= sizeof(o->host))
		goto bad;
	memcpy(o->host, host, strlen(host) + 1);
	o->port = port != NULL ? (int)p : 5900;
	return 0;
bad:
	snprintf(err, errlen, "bad address '%s' (want IP:PORT, [IPv6]:PORT or unix=PATH)", s);
	return -1;
}

static int parse_size_opt(struct config_node *node, const char *key, uint32_t min, uint32_t max,
                          uint32_t def, uint32_t *out, char *err, size_t errlen)
{
	const char *v = config_node_get(node, key);
	uint64_t n;

	*out = def;
	if (v == NULL)
		return 0;
	if (parse_uint(v, min, max, &n) < 0 || n % 8 != 0) {
		snprintf(err, errlen, "bad %s=%s (want %u-%u, a multiple of 8)", key, v, min, max);
		return -1;
	}
	*out = (uint32_t)n;
	return 0;
}

static int parse_vga(const char *v, enum fbuf_vga *out, char *err, size_t errlen)
{
	if (v == NULL || strcmp(v, "on") == 0)
		*out = FBUF_VGA_ON;
	else if (strcmp(v, "io") == 0)
		*out = FBUF_VGA_IO;
	else if (strcmp(v, "off") == 0)
		*out = FBUF_VGA_OFF;
	else {
		snprintf(err, errlen, "bad vga=%s (want on, io or off)", v);
		return -1;
	}
	return 0;
}

static int parse_endpoint(struct config_node *node, struct fbuf_opts *o, char *err, size_t errlen)
{
	const char *tcp = config_node_get(node, "tcp"), *rfb = config_node_get(node, "rfb");

	o->unix_path = config_node_get(node, "unix");
	if (tcp == NULL)
		tcp = rfb;
	if (o->unix_path != NULL && tcp != NULL) {
		snprintf(err, errlen, "tcp= and unix= exclude each other");
		return -1;
	}
	if (o->unix_path != NULL &&
	    (o->unix_path[0] == '\0' ||
	     strlen(o->unix_path) >= sizeof(((struct sockaddr_un *)0)->sun_path))) {
		snprintf(err, errlen, "bad unix=%s (want a path of 1-%zu characters)", o->unix_path,
		         sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
		return -1;
	}
	return parse_tcp(tcp != NULL ? tcp : "127.0.0.1:5900", o, err, errlen);
}

static int parse_opts(struct config_node *node, struct fbuf_opts *o, char *err, size_t errlen)
{
	memset(o, 0, sizeof(*o));
	if (check_keys(node, err, errlen) < 0 || parse_endpoint(node, o, err, errlen) < 0 ||
	    parse_size_opt(node, "w", FBUF_MIN_W, FBUF_MAX_W, 1024, &o->width, err, errlen) < 0 ||
	    parse_size_opt(node, "h", FBUF_MIN_H, FBUF_MAX_H, 768, &o->height, err, errlen) < 0 ||
	    parse_vga(config_node_get(node, "vga"), &o->vga, err, errlen) < 0)
		return -1;
	o->password = config_node_get(node, "password");
	if (o->password != NULL && (o->password[0] == '\0' || strlen(o->password) > 8)) {
		snprintf(err, errlen, "bad password (want 1-8 characters, as VNC authentication)");
		return -1;
	}
	if (config_node_get_bool(node, "wait", false, &o->wait) < 0) {
		snprintf(err, errlen, "bad wait=%s (want true or false)",
		         config_node_get(node, "wait"));
		return -1;
	}
	if (config_node_get_bool(node, "vnc", true, &o->vnc) < 0) {
		snprintf(err, errlen, "bad vnc=%s (want true or false)",
		         config_node_get(node, "vnc"));
		return -1;
	}
	if (o->wait && !o->vnc) {
		snprintf(err, errlen, "wait needs the VNC server (not vnc=off)");
		return -1;
	}
	return 0;
}

/* ---- creation ---- */

static int fbuf_legacy_config(struct config_node *node, const char *conf, char *err, size_t errlen)
{
	return devopts_parse(node, conf, NULL, "fbuf", err, errlen);
}

static int attach_vgabios(struct pci_func *f, struct config_node *node, enum fbuf_vga vga)
{
	const char *path = vga == FBUF_VGA_OFF ? VGABIOS_BOCHS : VGABIOS_STDVGA;
	char why[200];
	size_t len;
	uint8_t *rom;
	int rc;

	if (config_node_get(node, "rom") != NULL)
		return 0; /* the PCI layer attaches rom=PATH */
	rom = file_read_all(path, 1u << 20, &len, why, sizeof(why));
	if (rom == NULL) {
		log_warn("fbuf: no VGA BIOS (%s): BIOS guests show nothing graphical", why);
		return 0;
	}
	rc = pci_alloc_rom(f, rom, len);
	free(rom);
	return rc;
}

static void first_client(void *arg)
{
	machine_release_start(arg);
}

static int start_vnc(struct fbuf *fb, const struct fbuf_opts *o, char *err, size_t errlen)
{
	struct vnc_config vc = {
	    .host = o->host,
	    .port = o->port,
	    .unix_path = o->unix_path,
	    .password = o->password,
	    .width = o->width,
	    .height = o->height,
	    .name = fb->m->name ? fb->m->name : "khyve",
	    .first_client = o->wait ? first_client : NULL,
	    .first_client_arg = fb->m,
	};

	if (!o->vnc)
		return 0;
	if (o->wait)
		machine_hold_start(fb->m);
	fb->vnc = vnc_start(&vc, err, errlen);
	if (fb->vnc == NULL && o->wait)
		machine_release_start(fb->m);
	if (fb->vnc != NULL && vnc_register_counters(fb->vnc) < 0)
		log_warn("vnc: no counters (a second display?)");
	return fb->vnc != NULL ? 0 : -1;
}

static int setup_pci(struct fbuf *fb, struct pci_func *f, struct config_node *node,
                     enum fbuf_vga vga)
{
	pci_set_ids(f, 0x1234, 0x1111, 0x03, vga == FBUF_VGA_OFF ? 0x80 : 0x00, 0, 2);
	pci_set_cfg(f, PCIR_SUBVEND, 2, 0x1af4);
	pci_set_cfg(f, PCIR_SUBDEV, 2, 0x1100);
	if (pci_alloc_bar(f, 0, PCI_BAR_MEM32, FBUF_VRAM_SIZE) < 0 ||
	    pci_alloc_bar(f, 2, PCI_BAR_MEM32, FBUF_MMIO_SIZE) < 0 ||
	    attach_vgabios(f, node, vga) < 0)
		return -1;
	f->bar[0].prefetch = true;
	pci_set_cfg(f, PCIR_BAR0, 4, (uint32_t)f->bar[0].addr | 0x8);
	fb->slot = vm_ram_window_add(&fb->m->vm);
	return 0;
}

/* vga=on|io: the legacy VGA, and with vga=on its memory window, which
 * must not be RAM. */
static int setup_vga(struct fbuf *fb, enum fbuf_vga vga, char *err, size_t errlen)
{
	if (vga == FBUF_VGA_OFF)
		return 0;
	if (vga == FBUF_VGA_ON && fb->m->vm.vm_fd >= 0 &&
	    vm_ram_hole(&fb->m->vm, 0xa0000, 0x20000) < 0) {
		snprintf(err, errlen, "cannot free 0xA0000-0xBFFFF for the VGA window");
		return -1;
	}
	fb->vga = vga_create(fb->m, vga == FBUF_VGA_ON, err, errlen);
	if (fb->vga == NULL)
		return -1;
	have_legacy_vga = true;
	have_vga_text = have_vga_text || vga == FBUF_VGA_ON;
	return machine_register_pio(fb->m, DISPI_PORT, 2, dispi_port, fb, "fbuf-dispi");
}

static void fbuf_free(struct fbuf *fb)
{
	if (fb->vram != NULL)
		munmap(fb->vram, FBUF_VRAM_SIZE);
	if (fb->shadow != NULL)
		munmap(fb->shadow, SHADOW_PIXELS * sizeof(uint32_t));
	pthread_mutex_destroy(&fb->lock);
	pthread_mutex_destroy(&fb->frame_lock);
	free(fb);
}

static void *map_anon(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int fbuf_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                     size_t errlen)
{
	struct fbuf_opts o;
	struct fbuf *fb;

	if (parse_opts(node, &o, err, errlen) < 0)
		return -1;
	fb = calloc(1, sizeof(*fb));
	if (fb == NULL)
		return -1;
	pthread_mutex_init(&fb->lock, NULL);
	pthread_mutex_init(&fb->frame_lock, NULL);
	fb->m = m;
	fb->f = f;
	fb->slot = -1;
	fb->width = o.width;
	fb->height = o.height;
	fb->byteorder = QEXT_LITTLE;
	fb->regs[DISPI_ID] = DISPI_ID5;
	fbuf_build_edid(fb->edid, o.width, o.height);
	fb->vram = map_anon(FBUF_VRAM_SIZE);
	fb->shadow = map_anon(SHADOW_PIXELS * sizeof(uint32_t));
	if (fb->vram == NULL || fb->shadow == NULL) {
		snprintf(err, errlen, "cannot allocate the framebuffer: %s", strerror(errno));
		fbuf_free(fb);
		return -1;
	}
	f->softc = fb;
	if (setup_pci(fb, f, node, o.vga) < 0) {
		snprintf(err, errlen, "no room for the framebuffer BARs");
		return -1; /* fb stays: the BARs point at it */
	}
	if (setup_vga(fb, o.vga, err, errlen) < 0)
		return -1;
	console_register_display(fbuf_refresh, fb);
	machine_set_screenshot(m, fbuf_screenshot, fb);
	return start_vnc(fb, &o, err, errlen);
}

/* ---- saved state (docs/design/snapshots.md section 2, "fbuf", "vga") ---- */

#define FBUF_STATE_VERSION 1

/*
 * Version, DISPI index and registers, byte order, the 8-bit palette, then
 * the VGA (a bool saying there is one, then vga_save()) and the VRAM
 * (sparse).  The display side (shadow, dirty bits, the VNC server) is
 * rebuilt by the next refresh, which restore makes a full one.
 */
static int fbuf_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	struct fbuf *fb = f->softc;

	(void)err;
	(void)errlen;
	sbuf_put_u16(out, FBUF_STATE_VERSION);
	pthread_mutex_lock(&fb->lock);
	sbuf_put_u16(out, fb->index);
	for (unsigned i = 0; i < DISPI_NREGS; i++)
		sbuf_put_u16(out, fb->regs[i]);
	sbuf_put_u32(out, fb->byteorder);
	for (unsigned i = 0; i < 256; i++)
		sbuf_put_u32(out, fb->pal[i]);
	sbuf_put_bool(out, fb->vga != NULL);
	if (fb->vga != NULL)
		vga_save(fb->vga, out);
	vga_put_pages(out, fb->vram, FBUF_VRAM_SIZE);
	pthread_mutex_unlock(&fb->lock);
	return 0;
}

/* The saved registers must be ones the guest could have made: an ID the
 * interface offers, a bank in range, and an enabled mode unchanged by the
 * clamping every register write applies (else it could point the display
 * past the VRAM). */
static void check_dispi(struct sbuf_reader *in, const uint16_t *regs, uint32_t byteorder)
{
	uint16_t fixed[DISPI_NREGS];

	memcpy(fixed, regs, sizeof(fixed));
	dispi_fixup_regs(fixed);
	if (regs[DISPI_ID] < DISPI_ID0 || regs[DISPI_ID] > DISPI_ID5)
		sbuf_fail(in, "DISPI id 0x%x unknown", regs[DISPI_ID]);
	else if (regs[DISPI_BANK] >= FBUF_VRAM_SIZE / 65536)
		sbuf_fail(in, "DISPI bank %u out of range", regs[DISPI_BANK]);
	else if (memcmp(fixed, regs, sizeof(fixed)) != 0)
		sbuf_fail(in, "DISPI mode %ux%ux%u does not fit the framebuffer", regs[DISPI_XRES],
		          regs[DISPI_YRES], regs[DISPI_BPP]);
	else if (byteorder != QEXT_BIG && byteorder != QEXT_LITTLE)
		sbuf_fail(in, "byte order 0x%x unknown", byteorder);
}

static int fbuf_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct fbuf *fb = f->softc;
	uint16_t index, regs[DISPI_NREGS];
	uint32_t byteorder, pal[256];
	bool had_vga;

	(void)err;
	(void)errlen;
	if (sbuf_get_version(in, FBUF_STATE_VERSION) == 0)
		return -1;
	index = sbuf_get_u16(in);
	for (unsigned i = 0; i < DISPI_NREGS; i++)
		regs[i] = sbuf_get_u16(in);
	byteorder = sbuf_get_u32(in);
	for (unsigned i = 0; i < 256; i++)
		pal[i] = sbuf_get_u32(in) & 0xffffff;
	had_vga = sbuf_get_bool(in);
	if (!in->failed)
		check_dispi(in, regs, byteorder);
	if (!in->failed && had_vga != (fb->vga != NULL))
		sbuf_fail(in, "saved %s legacy VGA, this fbuf has %s", had_vga ? "with" : "without",
		          fb->vga != NULL ? "one" : "none");
	if (in->failed || (fb->vga != NULL && vga_restore(fb->vga, in) < 0))
		return -1;
	pthread_mutex_lock(&fb->lock);
	if (vga_get_pages(in, fb->vram, FBUF_VRAM_SIZE, "vram") == 0) {
		fb->index = index;
		memcpy(fb->regs, regs, sizeof(regs));
		fb->byteorder = byteorder;
		memcpy(fb->pal, pal, sizeof(pal));
	}
	memset(fb->soft_dirty, 0, sizeof(fb->soft_dirty));
	fb->redraw = true; /* the shadow holds nothing of this: draw all */
	pthread_mutex_unlock(&fb->lock);
	pthread_mutex_lock(&fb->frame_lock);
	fb->shown = SHOWN_NONE;
	fb->resend = true;
	pthread_mutex_unlock(&fb->frame_lock);
	return in->failed ? -1 : 0;
}

/* The display adapter inside \_SB.PCI0 (ACPI 6.4 appendix B: video
 * extensions; only its address, so the OS ties it to the PCI function). */
static void fbuf_write_dsdt(struct pci_func *f, struct aml *a)
{
	char name[8];
	size_t dev;

	/* GFxx after the device and function number, so several fbufs differ. */
	snprintf(name, sizeof(name), "GF%02X", (unsigned)((f->slot << 3) | f->func) & 0xff);
	dev = aml_device(a, name);

	aml_name_decl(a, "_ADR");
	aml_integer(a, (uint64_t)f->slot << 16 | f->func);
	aml_close(a, dev);
}

PCI_DEVEMU(fbuf) = {
    .name = "fbuf",
    .descr = "framebuffer with VNC (QEMU stdvga: Bochs VBE, legacy VGA, EDID)",
    .usage = "  -s SLOT,fbuf[,OPTION]...\n"
             "  tcp=IP:PORT      VNC listen address (default 127.0.0.1:5900; [::1]:5900\n"
             "                   for IPv6; rfb= is the same)\n"
             "  unix=PATH        VNC on a UNIX socket instead\n"
             "  w=W,h=H          preferred (EDID) size, 640x480-3840x2160, multiples of 8\n"
             "                   (default 1024x768)\n"
             "  vga=on|io|off    legacy VGA: memory and ports (default), ports only (no\n"
             "                   text mode: BIOS text stays black), or none (class\n"
             "                   0380, QEMU's bochs-display, for UEFI)\n"
             "                   VGA BIOS: /usr/share/seabios/vgabios-stdvga.bin (vga=off:\n"
             "                   vgabios-bochs-display.bin), unless rom= names one\n"
             "  password=PW      VNC password, at most 8 characters\n"
             "  wait             start the vCPUs when the first VNC client connects\n"
             "  vnc=off          no VNC server (tests)\n",
    .keys = fbuf_keys,
    .legacy_config = fbuf_legacy_config,
    .init = fbuf_init,
    .bar_read = fbuf_bar_read,
    .bar_write = fbuf_bar_write,
    .bar_moved = fbuf_bar_moved,
    .write_dsdt = fbuf_write_dsdt,
    .save = fbuf_save,
    .restore = fbuf_restore,
};
