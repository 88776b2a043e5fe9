/*
 * The legacy VGA of the fbuf device: the IBM VGA register file, the
 * 0xA0000-0xBFFFF window onto four 64 KiB planes, and a scanline renderer
 * for text, 16-colour planar and 256-colour modes.  Register facts from the
 * IBM VGA technical reference (FreeVGA's register pages); the plane address
 * model is the real one (odd/even keeps A0 as plane select, chain-4 keeps
 * A1:A0), so the CRTC's byte/word/doubleword addressing reads back what the
 * CPU wrote.
 */
#include "dev/vga.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "backend/console.h"
#include "core/machine.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/sbuf.h"

#define PLANE_SIZE 0x10000u
#define PLANE_MASK 0xffffu
#define WIN_BASE   0xa0000ull
#define WIN_SIZE   0x20000u

/* Largest frame drawn (also bounds the CRTC's display-end values). */
#define VGA_MAX_W 2304
#define VGA_MAX_H 2048
#define BAND_H    16

/* Sequencer, graphics controller, attribute controller, CRTC indices. */
enum { SR_RESET, SR_CLOCK, SR_MAPMASK, SR_CHARMAP, SR_MEMMODE };
enum { GR_SR, GR_SRE, GR_CCMP, GR_ROT, GR_RMAP, GR_MODE, GR_MISC, GR_CDC, GR_MASK };
enum { AR_MODE = 0x10, AR_OVERSCAN, AR_PLANES, AR_PAN, AR_CSEL };
enum {
	CR_HDE = 0x01,
	CR_OVERFLOW = 0x07,
	CR_MAXSCAN = 0x09,
	CR_CUR_START,
	CR_CUR_END,
	CR_START_HI,
	CR_START_LO,
	CR_CUR_HI,
	CR_CUR_LO,
	CR_VRE = 0x11,
	CR_VDE = 0x12,
	CR_OFFSET,
	CR_ULINE,
	CR_MODE = 0x17,
	CR_LCMP,
	CR_LAST = 0x18,
};

struct vga_regs {
	uint8_t misc, fcr;
	uint8_t sr_idx, sr[8];
	uint8_t gr_idx, gr[16];
	uint8_t ar_idx, ar[32];
	bool ar_flip; /* true: next 0x3C0 write is data */
	uint8_t cr_idx, cr[64];
	uint8_t dac_mask, dac_ridx, dac_widx, dac_rcomp, dac_wcomp, dac_state;
	uint8_t dac_wbuf[3];
	uint8_t dac[768];
	unsigned st1_toggle;
};

struct vga {
	pthread_mutex_t lock; /* regs, vram, latch */
	struct machine *m;
	bool memory;
	struct vga_regs r;
	uint8_t latch[4];
	uint8_t vram[4][PLANE_SIZE];
	uint64_t gen; /* counts the writes to registers and vram */
	/* Render side, used by one thread at a time (render_lock). */
	pthread_mutex_t render_lock;
	bool drawn_valid; /* the caller's buffer holds the frame of: */
	uint64_t drawn_gen;
	bool drawn_blink, drawn_cursor;
	struct vga_regs snap_r;
	uint8_t snap[4][PLANE_SIZE];
	uint32_t *prev;
	uint32_t prev_w, prev_h;
	int prev_kind;
	int blink_phase; /* -1: from the clock */
};

static struct ratelimit vga_rl = RATELIMIT_INIT;

/* ---- registers ---- */

static uint32_t dac_rgb(const uint8_t *c, bool dac8)
{
	uint32_t r = c[0], g = c[1], b = c[2];

	if (!dac8) {
		r = ((r & 0x3f) << 2) | ((r & 0x3f) >> 4);
		g = ((g & 0x3f) << 2) | ((g & 0x3f) >> 4);
		b = ((b & 0x3f) << 2) | ((b & 0x3f) >> 4);
	}
	return (r << 16) | (g << 8) | b;
}

/* The mono (0x3Bx) or colour (0x3Dx) CRTC block that misc bit 0 selects. */
static bool port_is_inactive_crtc(const struct vga_regs *r, uint16_t port)
{
	bool colour = r->misc & 1;

	if (port >= 0x3b0 && port <= 0x3bf)
		return colour;
	if (port >= 0x3d0 && port <= 0x3df)
		return !colour;
	return false;
}

static void crtc_write(struct vga_regs *r, uint8_t val)
{
	uint8_t i = r->cr_idx;

	if (i > CR_LAST)
		return;
	/* Write protect (CR11 bit 7) covers 0-7, except the line compare bit 8 in CR07. */
	if ((r->cr[CR_VRE] & 0x80) && i <= 7) {
		if (i == CR_OVERFLOW)
			r->cr[i] = (uint8_t)((r->cr[i] & ~0x10) | (val & 0x10));
		return;
	}
	r->cr[i] = val;
}

static void dac_data_write(struct vga_regs *r, uint8_t val)
{
	r->dac_wbuf[r->dac_wcomp++] = val;
	if (r->dac_wcomp < 3)
		return;
	memcpy(&r->dac[r->dac_widx * 3], r->dac_wbuf, 3);
	r->dac_widx++;
	r->dac_wcomp = 0;
}

static uint8_t dac_data_read(struct vga_regs *r)
{
	uint8_t v = r->dac[r->dac_ridx * 3 + r->dac_rcomp];

	if (++r->dac_rcomp == 3) {
		r->dac_rcomp = 0;
		r->dac_ridx++;
	}
	return v;
}

static void attr_write(struct vga_regs *r, uint8_t val)
{
	if (!r->ar_flip)
		r->ar_idx = val & 0x3f; /* index and palette address source */
	else if ((r->ar_idx & 0x1f) <= AR_CSEL)
		r->ar[r->ar_idx & 0x1f] = val;
	r->ar_flip = !r->ar_flip;
}

static void reg_write(struct vga_regs *r, uint16_t port, uint8_t val)
{
	if (port_is_inactive_crtc(r, port))
		return;
	switch (port) {
	case 0x3c0:
		attr_write(r, val);
		break;
	case 0x3c2:
		r->misc = val;
		break;
	case 0x3c4:
		r->sr_idx = val & 7;
		break;
	case 0x3c5:
		r->sr[r->sr_idx] = val;
		break;
	case 0x3c6:
		r->dac_mask = val;
		break;
	case 0x3c7:
		r->dac_ridx = val;
		r->dac_rcomp = 0;
		r->dac_state = 3;
		break;
	case 0x3c8:
		r->dac_widx = val;
		r->dac_wcomp = 0;
		r->dac_state = 0;
		break;
	case 0x3c9:
		dac_data_write(r, val);
		break;
	case 0x3ce:
		r->gr_idx = val & 0xf;
		break;
	case 0x3cf:
		r->gr[r->gr_idx] = val;
		break;
	case 0x3b4:
	case 0x3d4:
		r->cr_idx = val & 0x3f;
		break;
	case 0x3b5:
	case 0x3d5:
		crtc_write(r, val);
		break;
	case 0x3ba:
	case 0x3da:
		r->fcr = val;
		break;
	default:
		break;
	}
}

/* Input status 1: display-disabled and vertical-retrace bits change on every
 * read, so "wait for retrace" and "wait for its end" loops both finish. */
static uint8_t status1_read(struct vga_regs *r)
{
	r->ar_flip = false;
	r->st1_toggle++;
	return (r->st1_toggle & 1) ? 0x09 : 0x00;
}

static uint8_t reg_read(struct vga_regs *r, uint16_t port)
{
	if (port_is_inactive_crtc(r, port))
		return 0xff;
	switch (port) {
	case 0x3c0:
		return r->ar_idx;
	case 0x3c1:
		return (r->ar_idx & 0x1f) <= AR_CSEL ? r->ar[r->ar_idx & 0x1f] : 0;
	case 0x3c2:
		return 0x10; /* input status 0: switch sense */
	case 0x3c4:
		return r->sr_idx;
	case 0x3c5:
		return r->sr[r->sr_idx];
	case 0x3c6:
		return r->dac_mask;
	case 0x3c7:
		return r->dac_state;
	case 0x3c8:
		return r->dac_widx;
	case 0x3c9:
		return dac_data_read(r);
	case 0x3ca:
		return r->fcr;
	case 0x3cc:
		return r->misc;
	case 0x3ce:
		return r->gr_idx;
	case 0x3cf:
		return r->gr[r->gr_idx];
	case 0x3b4:
	case 0x3d4:
		return r->cr_idx;
	case 0x3b5:
	case 0x3d5:
		return r->cr_idx <= CR_LAST ? r->cr[r->cr_idx] : 0;
	case 0x3ba:
	case 0x3da:
		return status1_read(r);
	default:
		return 0xff;
	}
}

uint32_t vga_port_read(struct vga *vga, uint16_t port, unsigned size)
{
	uint32_t v = 0;

	if (size == 0 || size > 4)
		size = 1;
	pthread_mutex_lock(&vga->lock);
	for (unsigned i = 0; i < size; i++)
		v |= (uint32_t)reg_read(&vga->r, (uint16_t)(port + i)) << (8 * i);
	pthread_mutex_unlock(&vga->lock);
	return v;
}

void vga_port_write(struct vga *vga, uint16_t port, unsigned size, uint32_t val)
{
	if (size == 0 || size > 4)
		size = 1;
	pthread_mutex_lock(&vga->lock);
	for (unsigned i = 0; i < size; i++)
		reg_write(&vga->r, (uint16_t)(port + i), (uint8_t)(val >> (8 * i)));
	vga->gen++;
	pthread_mutex_unlock(&vga->lock);
}

/* ---- video memory ---- */

/* Offset into the window the GC misc register maps, or -1 outside it. */
static long window_offset(const struct vga_regs *r, uint32_t a)
{
	static const uint32_t base[4] = {0, 0, 0x10000, 0x18000};
	static const uint32_t len[4] = {0x20000, 0x10000, 0x8000, 0x8000};
	unsigned sel = (r->gr[GR_MISC] >> 2) & 3;

	if (a < base[sel] || a - base[sel] >= len[sel])
		return -1;
	return (long)(a - base[sel]);
}

static uint8_t mem_read(struct vga *v, uint32_t a)
{
	const struct vga_regs *r = &v->r;
	long off = window_offset(r, a);
	uint32_t addr;
	unsigned plane;

	if (off < 0)
		return 0xff;
	if (r->sr[SR_MEMMODE] & 0x08) { /* chain-4 */
		plane = off & 3;
		addr = (uint32_t)off & ~3u & PLANE_MASK;
	} else if (r->gr[GR_MODE] & 0x10) { /* host odd/even */
		plane = (r->gr[GR_RMAP] & 2) | (off & 1);
		addr = (uint32_t)off & ~1u & PLANE_MASK;
	} else {
		plane = r->gr[GR_RMAP] & 3;
		addr = (uint32_t)off & PLANE_MASK;
	}
	for (unsigned p = 0; p < 4; p++)
		v->latch[p] = v->vram[p][addr];
	if (!(r->gr[GR_MODE] & 0x08))
		return v->latch[plane];
	/* Read mode 1: colour compare over the planes not marked don't care. */
	uint8_t diff = 0;
	for (unsigned p = 0; p < 4; p++) {
		if (!(r->gr[GR_CDC] & (1u << p)))
			continue;
		uint8_t want = (r->gr[GR_CCMP] & (1u << p)) ? 0xff : 0x00;
		diff |= v->latch[p] ^ want;
	}
	return (uint8_t)~diff;
}

static uint8_t rotate(uint8_t val, unsigned n)
{
	n &= 7;
	return n ? (uint8_t)((val >> n) | (val << (8 - n))) : val;
}

static uint8_t alu(const struct vga_regs *r, uint8_t val, uint8_t latch)
{
	switch ((r->gr[GR_ROT] >> 3) & 3) {
	case 1:
		return val & latch;
	case 2:
		return val | latch;
	case 3:
		return val ^ latch;
	default:
		return val;
	}
}

/* The byte write modes 0-3 put into plane `p`. */
static uint8_t plane_value(const struct vga *v, unsigned p, uint8_t val)
{
	const struct vga_regs *r = &v->r;
	uint8_t latch = v->latch[p], mask = r->gr[GR_MASK], d;
	uint8_t sr = (r->gr[GR_SR] & (1u << p)) ? 0xff : 0x00;

	switch (r->gr[GR_MODE] & 3) {
	case 1:
		return latch;
	case 2:
		d = (val & (1u << p)) ? 0xff : 0x00;
		break;
	case 3:
		mask &= rotate(val, r->gr[GR_ROT]);
		d = sr;
		break;
	default:
		d = (r->gr[GR_SRE] & (1u << p)) ? sr : rotate(val, r->gr[GR_ROT]);
		break;
	}
	d = alu(r, d, latch);
	return (uint8_t)((d & mask) | (latch & ~mask));
}

static void mem_write(struct vga *v, uint32_t a, uint8_t val)
{
	const struct vga_regs *r = &v->r;
	long off = window_offset(r, a);
	unsigned planes = r->sr[SR_MAPMASK] & 0xf;
	uint32_t addr;

	if (off < 0)
		return;
	if (r->sr[SR_MEMMODE] & 0x08) {
		planes &= 1u << (off & 3);
		addr = (uint32_t)off & ~3u & PLANE_MASK;
	} else if (!(r->sr[SR_MEMMODE] & 0x04)) { /* odd/even */
		planes &= (off & 1) ? 0xa : 0x5;
		addr = (uint32_t)off & ~1u & PLANE_MASK;
	} else {
		addr = (uint32_t)off & PLANE_MASK;
	}
	for (unsigned p = 0; p < 4; p++)
		if (planes & (1u << p))
			v->vram[p][addr] = plane_value(v, p, val);
}

static int vga_mmio(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct vga *v = arg;
	uint64_t out = 0;

	if (size > 8)
		size = 8;
	pthread_mutex_lock(&v->lock);
	for (unsigned i = 0; i < size && offset + i < WIN_SIZE; i++) {
		uint32_t a = (uint32_t)(offset + i);

		if (is_write)
			mem_write(v, a, (uint8_t)(*val >> (8 * i)));
		else
			out |= (uint64_t)mem_read(v, a) << (8 * i);
	}
	v->gen += is_write;
	pthread_mutex_unlock(&v->lock);
	if (!is_write)
		*val = out;
	return 0;
}

uint8_t vga_mem_read(struct vga *vga, uint32_t offset)
{
	uint64_t v = 0;

	vga_mmio(vga, offset, 1, false, &v);
	return (uint8_t)v;
}

void vga_mem_write(struct vga *vga, uint32_t offset, uint8_t val)
{
	uint64_t v = val;

	vga_mmio(vga, offset, 1, true, &v);
}

static int vga_pio(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct vga *v = arg;
	uint16_t port = (uint16_t)(0x3b0 + offset);

	if (is_write)
		vga_port_write(v, port, size, (uint32_t)*val);
	else
		*val = vga_port_read(v, port, size);
	return 0;
}

/* ---- start-up state: mode 3 as a BIOS leaves it ---- */

static const uint8_t mode3_sr[5] = {0x03, 0x00, 0x03, 0x00, 0x02};
static const uint8_t mode3_gr[9] = {0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x0e, 0x00, 0xff};
static const uint8_t mode3_cr[25] = {0x5f, 0x4f, 0x50, 0x82, 0x55, 0x81, 0xbf, 0x1f, 0x00,
                                     0x4f, 0x0d, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x9c, 0x8e,
                                     0x8f, 0x28, 0x1f, 0x96, 0xb9, 0xa3, 0xff};
static const uint8_t mode3_ar[21] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x14,
                                     0x07, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d,
                                     0x3e, 0x3f, 0x0c, 0x00, 0x0f, 0x08, 0x00};

/* DAC entries 0-63: the EGA rgbRGB colours (bits 2,1,0 at 2/3 intensity,
 * bits 5,4,3 adding 1/3), which the attribute palette above indexes. */
static void set_ega_dac(struct vga_regs *r)
{
	for (unsigned i = 0; i < 64; i++) {
		r->dac[i * 3 + 0] = (uint8_t)(((i >> 2) & 1) * 0x2a + ((i >> 5) & 1) * 0x15);
		r->dac[i * 3 + 1] = (uint8_t)(((i >> 1) & 1) * 0x2a + ((i >> 4) & 1) * 0x15);
		r->dac[i * 3 + 2] = (uint8_t)((i & 1) * 0x2a + ((i >> 3) & 1) * 0x15);
	}
}

static void reset_mode3(struct vga *v)
{
	struct vga_regs *r = &v->r;

	memset(r, 0, sizeof(*r));
	r->misc = 0x67;
	memcpy(r->sr, mode3_sr, sizeof(mode3_sr));
	memcpy(r->gr, mode3_gr, sizeof(mode3_gr));
	memcpy(r->cr, mode3_cr, sizeof(mode3_cr));
	memcpy(r->ar, mode3_ar, sizeof(mode3_ar));
	r->ar_idx = 0x20; /* palette address source: screen on */
	r->dac_mask = 0xff;
	set_ega_dac(r);
	for (uint32_t a = 0; a < 0x8000; a += 2) {
		v->vram[0][a] = ' ';
		v->vram[1][a] = 0x07;
	}
}

/* ---- the font ---- */

/* Code page 437 in Unicode, the order of the VGA's built-in character set:
 * the symbols shown for 0x00-0x1F, ASCII, 0x7F, and 0x80-0xFF. */
static const uint16_t cp437_low[32] = {
    0x0000, 0x263a, 0x263b, 0x2665, 0x2666, 0x2663, 0x2660, 0x2022, 0x25d8, 0x25cb, 0x25d9,
    0x2642, 0x2640, 0x266a, 0x266b, 0x263c, 0x25ba, 0x25c4, 0x2195, 0x203c, 0x00b6, 0x00a7,
    0x25ac, 0x21a8, 0x2191, 0x2193, 0x2192, 0x2190, 0x221f, 0x2194, 0x25b2, 0x25bc,
};

static const uint16_t cp437_high[128] = {
    0x00c7, 0x00fc, 0x00e9, 0x00e2, 0x00e4, 0x00e0, 0x00e5, 0x00e7, 0x00ea, 0x00eb, 0x00e8, 0x00ef,
    0x00ee, 0x00ec, 0x00c4, 0x00c5, 0x00c9, 0x00e6, 0x00c6, 0x00f4, 0x00f6, 0x00f2, 0x00fb, 0x00f9,
    0x00ff, 0x00d6, 0x00dc, 0x00a2, 0x00a3, 0x00a5, 0x20a7, 0x0192, 0x00e1, 0x00ed, 0x00f3, 0x00fa,
    0x00f1, 0x00d1, 0x00aa, 0x00ba, 0x00bf, 0x2310, 0x00ac, 0x00bd, 0x00bc, 0x00a1, 0x00ab, 0x00bb,
    0x2591, 0x2592, 0x2593, 0x2502, 0x2524, 0x2561, 0x2562, 0x2556, 0x2555, 0x2563, 0x2551, 0x2557,
    0x255d, 0x255c, 0x255b, 0x2510, 0x2514, 0x2534, 0x252c, 0x251c, 0x2500, 0x253c, 0x255e, 0x255f,
    0x255a, 0x2554, 0x2569, 0x2566, 0x2560, 0x2550, 0x256c, 0x2567, 0x2568, 0x2564, 0x2565, 0x2559,
    0x2558, 0x2552, 0x2553, 0x256b, 0x256a, 0x2518, 0x250c, 0x2588, 0x2584, 0x258c, 0x2590, 0x2580,
    0x03b1, 0x00df, 0x0393, 0x03c0, 0x03a3, 0x03c3, 0x00b5, 0x03c4, 0x03a6, 0x0398, 0x03a9, 0x03b4,
    0x221e, 0x03c6, 0x03b5, 0x2229, 0x2261, 0x00b1, 0x2265, 0x2264, 0x2320, 0x2321, 0x00f7, 0x2248,
    0x00b0, 0x2219, 0x00b7, 0x221a, 0x207f, 0x00b2, 0x25a0, 0x00a0,
};

static uint16_t cp437_unicode(unsigned c)
{
	if (c < 0x20)
		return cp437_low[c];
	if (c < 0x7f)
		return (uint16_t)c;
	if (c == 0x7f)
		return 0x2302;
	return cp437_high[(c - 0x80) & 0x7f];
}

/* Shade and block glyphs many console fonts lack, drawn from their shape. */
static bool synth_block(unsigned c, unsigned line, unsigned h, uint8_t *row)
{
	switch (c) {
	case 0xb0:
		*row = (line & 1) ? 0x22 : 0x88;
		return true;
	case 0xb1:
		*row = (line & 1) ? 0x55 : 0xaa;
		return true;
	case 0xb2:
		*row = (line & 1) ? 0xdd : 0x77;
		return true;
	case 0xdb:
		*row = 0xff;
		return true;
	case 0xdc:
		*row = line >= h / 2 ? 0xff : 0x00;
		return true;
	case 0xdd:
		*row = 0xf0;
		return true;
	case 0xde:
		*row = 0x0f;
		return true;
	case 0xdf:
		*row = line < h / 2 ? 0xff : 0x00;
		return true;
	default:
		return false;
	}
}

struct psf {
	uint8_t *data;
	size_t len;
	uint32_t nglyphs, height, bytes_per_glyph, glyph_off, table_off;
	bool utf8; /* PSF2 table in UTF-8; PSF1 uses UCS-2 */
};

static int psf_parse(struct psf *p)
{
	const uint8_t *d = p->data;

	if (p->len >= 4 && d[0] == 0x36 && d[1] == 0x04) {
		p->nglyphs = (d[2] & 1) ? 512 : 256;
		p->height = d[3];
		p->bytes_per_glyph = d[3];
		p->glyph_off = 4;
		p->table_off = (d[2] & 2) ? 4 + p->nglyphs * p->height : 0;
		p->utf8 = false;
	} else if (p->len >= 32 && d[0] == 0x72 && d[1] == 0xb5 && d[2] == 0x4a && d[3] == 0x86) {
		uint32_t w[8];

		memcpy(w, d, sizeof(w));
		p->glyph_off = w[2];
		p->nglyphs = w[4];
		p->bytes_per_glyph = w[5];
		p->height = w[6];
		if (w[7] > 8 || p->nglyphs > 65536 || p->bytes_per_glyph != p->height)
			return -1;
		p->table_off = (w[3] & 1) ? p->glyph_off + p->nglyphs * p->bytes_per_glyph : 0;
		p->utf8 = true;
	} else {
		return -1;
	}
	if (p->height == 0 || p->height > 32 || p->glyph_off > p->len ||
	    (uint64_t)p->nglyphs * p->bytes_per_glyph > p->len - p->glyph_off)
		return -1;
	if (p->table_off > p->len)
		p->table_off = 0;
	return 0;
}

/* One code point of the unicode table at *i, or -1 at a terminator
 * (0xFFFF / 0xFF), -2 at a sequence start (0xFFFE / 0xFE), -3 at the end. */
static long psf_next(const struct psf *p, size_t *i)
{
	const uint8_t *d = p->data;

	if (!p->utf8) {
		if (*i + 2 > p->len)
			return -3;
		unsigned u = d[*i] | (d[*i + 1] << 8);
		*i += 2;
		return u == 0xffff ? -1 : u == 0xfffe ? -2 : (long)u;
	}
	if (*i >= p->len)
		return -3;
	uint8_t b = d[(*i)++];
	if (b == 0xff)
		return -1;
	if (b == 0xfe)
		return -2;
	unsigned n = b >= 0xf0 ? 3 : b >= 0xe0 ? 2 : b >= 0xc0 ? 1 : 0;
	long u = n ? (b & (0x3f >> n)) : b;
	for (unsigned k = 0; k < n && *i < p->len; k++)
		u = (u << 6) | (d[(*i)++] & 0x3f);
	return u;
}

/* Glyph index for each CP437 character: from the unicode table (first
 * glyph naming the code point), else the identity. */
static void psf_map(const struct psf *p, uint32_t map[256])
{
	for (unsigned c = 0; c < 256; c++)
		map[c] = p->table_off ? UINT32_MAX : (c < p->nglyphs ? c : UINT32_MAX);
	if (!p->table_off)
		return;
	size_t i = p->table_off;
	for (uint32_t g = 0; g < p->nglyphs; g++) {
		bool in_seq = false;
		long u;

		while ((u = psf_next(p, &i)) != -1) {
			if (u == -3)
				return;
			if (u == -2)
				in_seq = true;
			if (u < 0 || in_seq)
				continue;
			for (unsigned c = 0; c < 256; c++)
				if (map[c] == UINT32_MAX && cp437_unicode(c) == u &&
				    (c != 0 || u == 0))
					map[c] = g;
		}
	}
}

static int read_gz(const char *path, uint8_t **out, size_t *len)
{
	gzFile f = gzopen(path, "rb");
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf;
	int got;

	if (f == NULL)
		return -1;
	buf = malloc(cap);
	while (buf != NULL && (got = gzread(f, buf + n, (unsigned)(cap - n))) > 0) {
		n += (size_t)got;
		if (n == cap && cap < (4u << 20)) {
			uint8_t *nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		} else if (n == cap) {
			break;
		}
	}
	gzclose(f);
	if (buf == NULL)
		return -1;
	*out = buf;
	*len = n;
	return 0;
}

int vga_load_font(struct vga *vga, const char *path, char *err, size_t errlen)
{
	struct psf p = {0};
	uint32_t map[256];

	if (read_gz(path, &p.data, &p.len) < 0) {
		snprintf(err, errlen, "cannot read font %s", path);
		return -1;
	}
	if (psf_parse(&p) < 0) {
		snprintf(err, errlen, "%s: not a PSF font with 8-dot glyphs", path);
		free(p.data);
		return -1;
	}
	psf_map(&p, map);
	pthread_mutex_lock(&vga->lock);
	for (unsigned c = 0; c < 256; c++) {
		for (unsigned l = 0; l < 32; l++) {
			uint8_t row = 0;

			if (l >= p.height)
				row = 0;
			else if (map[c] != UINT32_MAX)
				row = p.data[p.glyph_off + map[c] * p.bytes_per_glyph + l];
			else
				(void)synth_block(c, l, p.height, &row);
			vga->vram[2][c * 32 + l] = row;
		}
	}
	vga->gen++;
	pthread_mutex_unlock(&vga->lock);
	free(p.data);
	return 0;
}

static const char *const font_paths[] = {
    "/usr/share/consolefonts/Uni2-VGA16.psf.gz",
    "/usr/share/consolefonts/Lat15-VGA16.psf.gz",
    "/usr/share/consolefonts/default8x16.psf.gz",
};

/* The default font, read once per process: plane 2's first 8 KiB. */
static pthread_mutex_t font_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t font_cache[256 * 32];
static int font_cache_state; /* 0 not tried, 1 loaded, -1 none found */

static void load_default_font(struct vga *v)
{
	char err[256];

	pthread_mutex_lock(&font_cache_lock);
	for (size_t i = 0; font_cache_state == 0 && i < sizeof(font_paths) / sizeof(font_paths[0]);
	     i++) {
		if (vga_load_font(v, font_paths[i], err, sizeof(err)) == 0) {
			memcpy(font_cache, v->vram[2], sizeof(font_cache));
			font_cache_state = 1;
		}
	}
	if (font_cache_state == 0) {
		font_cache_state = -1;
		log_info(
		    "vga: no console font found (install console-setup-linux); text shows blank");
	}
	if (font_cache_state == 1)
		memcpy(v->vram[2], font_cache, sizeof(font_cache));
	pthread_mutex_unlock(&font_cache_lock);
}

/* ---- create ---- */

struct vga *vga_create(struct machine *m, bool memory, char *err, size_t errlen)
{
	struct vga *v = calloc(1, sizeof(*v));

	if (v == NULL) {
		snprintf(err, errlen, "vga: out of memory");
		return NULL;
	}
	pthread_mutex_init(&v->lock, NULL);
	pthread_mutex_init(&v->render_lock, NULL);
	v->m = m;
	v->memory = memory;
	v->blink_phase = -1;
	reset_mode3(v);
	load_default_font(v);
	if (m != NULL && (machine_register_pio(m, 0x3b0, 0x30, vga_pio, v, "vga") < 0 ||
	                  (memory && machine_register_mmio(m, WIN_BASE, WIN_SIZE, vga_mmio, v,
	                                                   "vga-window") < 0))) {
		snprintf(err, errlen, "vga: ports 0x3b0-0x3df or 0xa0000-0xbffff already taken");
		vga_destroy(v);
		return NULL;
	}
	return v;
}

void vga_destroy(struct vga *vga)
{
	if (vga == NULL)
		return;
	if (vga->m != NULL) {
		(void)iobus_unregister(&vga->m->pio, 0x3b0);
		if (vga->memory)
			(void)iobus_unregister(&vga->m->mmio, WIN_BASE);
	}
	pthread_mutex_destroy(&vga->lock);
	pthread_mutex_destroy(&vga->render_lock);
	free(vga->prev);
	free(vga);
}

void vga_set_blink_phase(struct vga *vga, int phase)
{
	pthread_mutex_lock(&vga->render_lock);
	vga->blink_phase = phase < 0 ? -1 : (phase & 1);
	pthread_mutex_unlock(&vga->render_lock);
}

uint64_t vga_write_count(struct vga *vga)
{
	uint64_t gen;

	pthread_mutex_lock(&vga->lock);
	gen = vga->gen;
	pthread_mutex_unlock(&vga->lock);
	return gen;
}

void vga_forget_frame(struct vga *vga)
{
	pthread_mutex_lock(&vga->render_lock);
	vga->drawn_valid = false;
	pthread_mutex_unlock(&vga->render_lock);
}

void vga_palette(struct vga *vga, uint32_t pal[256], bool dac8)
{
	pthread_mutex_lock(&vga->lock);
	for (unsigned i = 0; i < 256; i++)
		pal[i] = dac_rgb(&vga->r.dac[i * 3], dac8);
	pthread_mutex_unlock(&vga->lock);
}

/* ---- rendering ---- */

struct scan {
	const struct vga_regs *r;
	const uint8_t (*vram)[PLANE_SIZE];
	uint32_t width, height;
	uint32_t pal16[16]; /* attribute colour -> XRGB */
	uint32_t pal256[256];
	unsigned shift;     /* CRTC address: MA << shift */
	uint32_t line_step; /* MA added per character row */
	unsigned maxscan;   /* scan lines per character row - 1 */
	bool dscan;
	uint32_t lcmp;
	bool blink_on, cursor_on;
};

static uint32_t crtc_addr(const struct scan *s, uint32_t ma, unsigned rsc)
{
	uint32_t a = (ma << s->shift);

	if (!(s->r->cr[CR_MODE] & 1))
		a = (a & ~0x2000u) | ((rsc & 1u) << 13);
	if (!(s->r->cr[CR_MODE] & 2))
		a = (a & ~0x4000u) | ((rsc & 2u) << 13);
	return a & PLANE_MASK;
}

static uint32_t vde_lines(const struct vga_regs *r)
{
	return (r->cr[CR_VDE] | ((r->cr[CR_OVERFLOW] & 0x02u) << 7) |
	        ((r->cr[CR_OVERFLOW] & 0x40u) << 3)) +
	       1;
}

static void make_palettes(struct scan *s)
{
	const struct vga_regs *r = s->r;

	for (unsigned i = 0; i < 256; i++) {
		unsigned d = i & r->dac_mask;
		s->pal256[i] = dac_rgb(&r->dac[d * 3], false);
	}
	for (unsigned i = 0; i < 16; i++) {
		unsigned c = r->ar[i & r->ar[AR_PLANES] & 0xf] & 0x3f;

		if (r->ar[AR_MODE] & 0x80)
			c = (c & 0x0f) | ((r->ar[AR_CSEL] & 3u) << 4);
		c |= (r->ar[AR_CSEL] & 0x0cu) << 4;
		s->pal16[i] = s->pal256[c & r->dac_mask];
	}
}

static void text_line(const struct scan *s, uint32_t *out, uint32_t ma, unsigned rsc)
{
	const struct vga_regs *r = s->r;
	unsigned cols = r->cr[CR_HDE] + 1u;
	unsigned cw = (r->sr[SR_CLOCK] & 1) ? 8 : 9;
	unsigned dd = (r->sr[SR_CLOCK] & 8) ? 2 : 1;
	unsigned sa = r->sr[SR_CHARMAP], mapa = ((sa >> 5) & 1) << 2 | ((sa >> 2) & 3);
	unsigned mapb = ((sa >> 4) & 1) << 2 | (sa & 3);
	uint32_t cur = (uint32_t)r->cr[CR_CUR_HI] << 8 | r->cr[CR_CUR_LO];
	unsigned cs = r->cr[CR_CUR_START] & 0x1f, ce = r->cr[CR_CUR_END] & 0x1f;
	bool cur_line = !(r->cr[CR_CUR_START] & 0x20) && s->cursor_on && rsc >= cs && rsc <= ce;

	for (unsigned col = 0; col < cols; col++) {
		uint32_t a = crtc_addr(s, ma + col, 0);
		uint8_t ch = s->vram[0][a], at = s->vram[1][a];
		unsigned map = (at & 8) ? mapa : mapb;
		uint32_t font = ((map & 3u) << 14) | ((map >> 2) << 13);
		uint8_t bits = s->vram[2][(font + ch * 32u + (rsc & 31)) & PLANE_MASK];
		unsigned fg = at & 0xf, bg = at >> 4;

		if (r->ar[AR_MODE] & 0x08) {
			bg &= 7;
			if ((at & 0x80) && !s->blink_on)
				bits = 0;
		}
		/* Underline: blue-on-black style attributes (x001 x000) on the
		 * CRTC's underline scan line; mode 3 puts that line below the cell. */
		if ((at & 0x77) == 0x01 && rsc == (r->cr[CR_ULINE] & 0x1fu))
			bits = 0xff;
		if (cur_line && ((ma + col) & 0xffff) == cur)
			bits = 0xff;
		uint32_t fgc = s->pal16[fg], bgc = s->pal16[bg];
		bool ninth = cw == 9 && (r->ar[AR_MODE] & 0x04) && ch >= 0xc0 && ch <= 0xdf;
		for (unsigned x = 0; x < cw; x++) {
			bool on = x < 8 ? (bits >> (7 - x)) & 1 : (ninth && (bits & 1));
			for (unsigned k = 0; k < dd; k++)
				*out++ = on ? fgc : bgc;
		}
	}
}

static void planar_line(const struct scan *s, uint32_t *out, uint32_t ma, unsigned rsc)
{
	unsigned chars = s->r->cr[CR_HDE] + 1u;
	unsigned dd = (s->r->sr[SR_CLOCK] & 8) ? 2 : 1;

	for (unsigned c = 0; c < chars; c++) {
		uint32_t a = crtc_addr(s, ma + c, rsc);
		uint8_t p0 = s->vram[0][a], p1 = s->vram[1][a], p2 = s->vram[2][a],
		        p3 = s->vram[3][a];

		for (int b = 7; b >= 0; b--) {
			unsigned idx = ((p0 >> b) & 1) | (((p1 >> b) & 1) << 1) |
			               (((p2 >> b) & 1) << 2) | (((p3 >> b) & 1) << 3);
			for (unsigned k = 0; k < dd; k++)
				*out++ = s->pal16[idx];
		}
	}
}

/* CGA 4-colour shift mode (modes 4/5): 2 bits a pixel, the even byte in
 * plane 0 then the odd byte in plane 1. */
static void cga_line(const struct scan *s, uint32_t *out, uint32_t ma, unsigned rsc)
{
	unsigned chars = s->r->cr[CR_HDE] + 1u;
	unsigned dd = (s->r->sr[SR_CLOCK] & 8) ? 2 : 1;

	for (unsigned c = 0; c < chars; c++) {
		uint32_t a = crtc_addr(s, ma + c, rsc);

		for (unsigned p = 0; p < 2; p++) {
			uint8_t b = s->vram[p][a];

			for (int sh = 6; sh >= 0; sh -= 2)
				for (unsigned k = 0; k < dd; k++)
					*out++ = s->pal16[(b >> sh) & 3];
		}
	}
}

static void vga256_line(const struct scan *s, uint32_t *out, uint32_t ma, unsigned rsc)
{
	unsigned chars = s->r->cr[CR_HDE] + 1u;

	for (unsigned c = 0; c < chars; c++) {
		uint32_t a = crtc_addr(s, ma + c, rsc);

		for (unsigned p = 0; p < 4; p++) {
			uint32_t px = s->pal256[s->vram[p][a]];
			*out++ = px;
			*out++ = px;
		}
	}
}

enum vga_kind { KIND_OFF, KIND_TEXT, KIND_PLANAR, KIND_CGA, KIND_256 };

static enum vga_kind frame_geometry(struct scan *s)
{
	const struct vga_regs *r = s->r;
	unsigned chars = r->cr[CR_HDE] + 1u;
	enum vga_kind k;

	if ((r->sr[SR_CLOCK] & 0x20) || (r->sr[SR_RESET] & 3) != 3 || !(r->ar_idx & 0x20))
		return KIND_OFF;
	if (!(r->gr[GR_MISC] & 1)) {
		k = KIND_TEXT;
		s->width = chars * ((r->sr[SR_CLOCK] & 1) ? 8u : 9u);
	} else if (r->gr[GR_MODE] & 0x40) {
		k = KIND_256;
		s->width = chars * 8u;
		return s->width <= VGA_MAX_W ? (s->height = vde_lines(r), k) : KIND_OFF;
	} else if (r->gr[GR_MODE] & 0x20) {
		k = KIND_CGA;
		s->width = chars * 8u;
	} else {
		k = KIND_PLANAR;
		s->width = chars * 8u;
	}
	if (r->sr[SR_CLOCK] & 8)
		s->width *= 2;
	s->height = vde_lines(r);
	if (s->width > VGA_MAX_W || s->height > VGA_MAX_H)
		return KIND_OFF;
	return k;
}

static void draw(struct scan *s, enum vga_kind kind, uint32_t *pixels)
{
	const struct vga_regs *r = s->r;
	uint32_t start = (uint32_t)r->cr[CR_START_HI] << 8 | r->cr[CR_START_LO];
	uint32_t ma = start;
	unsigned rsc = 0;
	bool second = false;

	for (uint32_t y = 0; y < s->height; y++) {
		uint32_t *out = pixels + (size_t)y * s->width;

		if (y == s->lcmp) {
			ma = 0;
			rsc = 0;
			second = false;
		}
		if (kind == KIND_TEXT)
			text_line(s, out, ma, rsc);
		else if (kind == KIND_PLANAR)
			planar_line(s, out, ma, rsc);
		else if (kind == KIND_CGA)
			cga_line(s, out, ma, rsc);
		else
			vga256_line(s, out, ma, rsc);
		if (s->dscan && !second) {
			second = true;
			continue;
		}
		second = false;
		if (++rsc > s->maxscan) {
			rsc = 0;
			ma = (ma + s->line_step) & PLANE_MASK;
		}
	}
}

/* Changed areas against the previous frame, one rectangle per band that
 * differs (its changed columns); `full` when too many or a new size. */
static void diff_frame(struct vga *v, int kind, const uint32_t *px, uint32_t w, uint32_t h,
                       unsigned band, struct console_frame *f)
{
	size_t n = (size_t)w * h;

	if (v->prev == NULL || v->prev_w != w || v->prev_h != h || v->prev_kind != kind) {
		v->prev_kind = kind;
		free(v->prev);
		v->prev = malloc(n * sizeof(*px));
		v->prev_w = v->prev ? w : 0;
		v->prev_h = v->prev ? h : 0;
		f->full = true;
	} else {
		for (uint32_t y0 = 0; y0 < h && !f->full; y0 += band) {
			uint32_t y1 = y0 + band < h ? y0 + band : h, x0 = w, x1 = 0;

			for (uint32_t y = y0; y < y1; y++) {
				const uint32_t *a = px + (size_t)y * w,
				               *b = v->prev + (size_t)y * w;
				if (memcmp(a, b, w * sizeof(*a)) == 0)
					continue;
				uint32_t l = 0, rr = w;
				while (a[l] == b[l])
					l++;
				while (a[rr - 1] == b[rr - 1])
					rr--;
				x0 = l < x0 ? l : x0;
				x1 = rr > x1 ? rr : x1;
			}
			if (x1 <= x0)
				continue;
			if (f->nrects == CONSOLE_MAX_RECTS) {
				f->full = true;
				break;
			}
			f->rects[f->nrects++] = (struct console_rect){x0, y0, x1 - x0, y1 - y0};
		}
	}
	if (f->full)
		f->nrects = 0;
	if (v->prev != NULL)
		memcpy(v->prev, px, n * sizeof(*px));
}

/* Nothing the picture depends on changed since the frame in the caller's
 * buffer: no vram or register write, the same blink and cursor phase. */
static bool frame_unchanged(const struct vga *vga, uint64_t gen, bool blink_on, bool cursor_on)
{
	return vga->drawn_valid && vga->prev != NULL && gen == vga->drawn_gen &&
	       blink_on == vga->drawn_blink && cursor_on == vga->drawn_cursor;
}

static void frame_header(struct console_frame *f, uint32_t *pixels, const struct scan *s)
{
	memset(f, 0, sizeof(*f));
	f->pixels = pixels;
	f->width = s->width;
	f->height = s->height;
	f->stride = s->width;
}

bool vga_render(struct vga *vga, uint32_t *pixels, size_t cap, struct console_frame *f)
{
	struct scan s = {0};
	enum vga_kind kind;
	bool ok = false, unchanged = false;
	uint64_t gen;

	pthread_mutex_lock(&vga->render_lock);
	uint64_t t = monotonic_ns() / 1000000ull;
	s.blink_on = vga->blink_phase >= 0 ? vga->blink_phase == 1 : ((t / 533) & 1) != 0;
	s.cursor_on = vga->blink_phase >= 0 ? vga->blink_phase == 1 : ((t / 266) & 1) != 0;
	pthread_mutex_lock(&vga->lock);
	gen = vga->gen;
	vga->snap_r = vga->r;
	s.r = &vga->snap_r;
	kind = frame_geometry(&s);
	unchanged = frame_unchanged(vga, gen, s.blink_on, s.cursor_on);
	if (!unchanged && kind != KIND_OFF && (size_t)s.width * s.height <= cap)
		memcpy(vga->snap, vga->vram, sizeof(vga->snap));
	pthread_mutex_unlock(&vga->lock);
	if (kind == KIND_OFF || s.width == 0 || (size_t)s.width * s.height > cap)
		goto out;
	if (unchanged) { /* an idle text screen costs no copy and no drawing */
		frame_header(f, pixels, &s);
		ok = true;
		goto out;
	}

	const struct vga_regs *r = s.r;
	s.vram = (const uint8_t(*)[PLANE_SIZE])vga->snap;
	s.shift = (r->cr[CR_ULINE] & 0x40) ? 2 : (r->cr[CR_MODE] & 0x40) ? 0 : 1;
	s.line_step = r->cr[CR_OFFSET] * 2u;
	s.maxscan = r->cr[CR_MAXSCAN] & 0x1f;
	s.dscan = r->cr[CR_MAXSCAN] & 0x80;
	s.lcmp = (r->cr[CR_LCMP] | ((r->cr[CR_OVERFLOW] & 0x10u) << 4) |
	          ((r->cr[CR_MAXSCAN] & 0x40u) << 3));
	make_palettes(&s);
	draw(&s, kind, pixels);

	frame_header(f, pixels, &s);
	diff_frame(vga, (int)kind, pixels, s.width, s.height,
	           kind == KIND_TEXT ? (s.maxscan + 1) * (s.dscan ? 2 : 1) : BAND_H, f);
	vga->drawn_valid = true;
	vga->drawn_gen = gen;
	vga->drawn_blink = s.blink_on;
	vga->drawn_cursor = s.cursor_on;
	ok = true;
out:
	if (!ok)
		vga->drawn_valid = false;
	pthread_mutex_unlock(&vga->render_lock);
	if (!ok && kind != KIND_OFF)
		log_ratelimited(&vga_rl, LOG_DEBUG, "vga: %ux%u frame does not fit the buffer",
		                s.width, s.height);
	return ok;
}

/* ---- saved state (docs/design/snapshots.md section 2, "vga") ---- */

#define STATE_PAGE 4096u

/* A page is zero when its first byte is and every byte equals the next
 * (memcmp: the library's speed, sanitizers included). */
static bool page_is_zero(const uint8_t *p)
{
	return p[0] == 0 && memcmp(p, p + 1, STATE_PAGE - 1) == 0;
}

/* Runs of non-zero pages: [*first, *first + return) from page `from` on;
 * 0 when none is left. */
static size_t next_run(const uint8_t *mem, size_t npages, size_t from, size_t *first)
{
	size_t p = from, n = 0;

	while (p < npages && page_is_zero(mem + p * STATE_PAGE))
		p++;
	*first = p;
	while (p + n < npages && !page_is_zero(mem + (p + n) * STATE_PAGE))
		n++;
	return n;
}

void vga_put_pages(struct sbuf *out, const uint8_t *mem, size_t len)
{
	size_t npages = len / STATE_PAGE, first, n, at = out->len;
	uint32_t runs = 0;

	sbuf_put_u32(out, 0); /* the run count, filled in below */
	for (size_t p = 0; (n = next_run(mem, npages, p, &first)) > 0; p = first + n) {
		sbuf_put_u32(out, (uint32_t)first);
		sbuf_put_u32(out, (uint32_t)n);
		sbuf_put_bytes(out, mem + first * STATE_PAGE, n * STATE_PAGE);
		runs++;
	}
	for (unsigned i = 0; !out->failed && i < 4; i++)
		out->data[at + i] = (uint8_t)(runs >> (8 * i)); /* little-endian, as sbuf */
}

/* Zero pages [from, to) of `mem`, writing only those that are not zero
 * already (untouched anonymous memory stays unallocated). */
static void zero_pages(uint8_t *mem, size_t from, size_t to)
{
	for (size_t p = from; p < to; p++)
		if (!page_is_zero(mem + p * STATE_PAGE))
			memset(mem + p * STATE_PAGE, 0, STATE_PAGE);
}

int vga_get_pages(struct sbuf_reader *in, uint8_t *mem, size_t len, const char *what)
{
	size_t npages = len / STATE_PAGE, next = 0;
	uint32_t runs = sbuf_get_u32(in);

	if (runs > npages)
		sbuf_fail(in, "%s: %u runs of pages, at most %zu", what, runs, npages);
	for (uint32_t i = 0; i < runs && !in->failed; i++) {
		uint32_t first = sbuf_get_u32(in), n = sbuf_get_u32(in);

		if (in->failed)
			break;
		if (n == 0 || first < next || first > npages || n > npages - first) {
			sbuf_fail(in, "%s: run of %u pages at page %u out of range", what, n,
			          first);
			break;
		}
		zero_pages(mem, next, first);
		sbuf_get_bytes(in, mem + (size_t)first * STATE_PAGE, (size_t)n * STATE_PAGE);
		next = (size_t)first + n;
	}
	if (in->failed)
		return -1;
	zero_pages(mem, next, npages);
	return 0;
}

static void put_regs(struct sbuf *out, const struct vga_regs *r)
{
	sbuf_put_u8(out, r->misc);
	sbuf_put_u8(out, r->fcr);
	sbuf_put_u8(out, r->sr_idx);
	sbuf_put_bytes(out, r->sr, sizeof(r->sr));
	sbuf_put_u8(out, r->gr_idx);
	sbuf_put_bytes(out, r->gr, sizeof(r->gr));
	sbuf_put_u8(out, r->ar_idx);
	sbuf_put_bytes(out, r->ar, sizeof(r->ar));
	sbuf_put_bool(out, r->ar_flip);
	sbuf_put_u8(out, r->cr_idx);
	sbuf_put_bytes(out, r->cr, sizeof(r->cr));
	sbuf_put_u8(out, r->dac_mask);
	sbuf_put_u8(out, r->dac_ridx);
	sbuf_put_u8(out, r->dac_widx);
	sbuf_put_u8(out, r->dac_rcomp);
	sbuf_put_u8(out, r->dac_wcomp);
	sbuf_put_u8(out, r->dac_state);
	sbuf_put_bytes(out, r->dac_wbuf, sizeof(r->dac_wbuf));
	sbuf_put_bytes(out, r->dac, sizeof(r->dac));
	sbuf_put_u32(out, r->st1_toggle);
}

static void get_regs(struct sbuf_reader *in, struct vga_regs *r)
{
	r->misc = sbuf_get_u8(in);
	r->fcr = sbuf_get_u8(in);
	r->sr_idx = sbuf_get_u8(in);
	sbuf_get_bytes(in, r->sr, sizeof(r->sr));
	r->gr_idx = sbuf_get_u8(in);
	sbuf_get_bytes(in, r->gr, sizeof(r->gr));
	r->ar_idx = sbuf_get_u8(in);
	sbuf_get_bytes(in, r->ar, sizeof(r->ar));
	r->ar_flip = sbuf_get_bool(in);
	r->cr_idx = sbuf_get_u8(in);
	sbuf_get_bytes(in, r->cr, sizeof(r->cr));
	r->dac_mask = sbuf_get_u8(in);
	r->dac_ridx = sbuf_get_u8(in);
	r->dac_widx = sbuf_get_u8(in);
	r->dac_rcomp = sbuf_get_u8(in);
	r->dac_wcomp = sbuf_get_u8(in);
	r->dac_state = sbuf_get_u8(in);
	sbuf_get_bytes(in, r->dac_wbuf, sizeof(r->dac_wbuf));
	sbuf_get_bytes(in, r->dac, sizeof(r->dac));
	r->st1_toggle = sbuf_get_u32(in);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

/* The indices the port handlers mask, the DAC cycle positions, and the
 * registers past the last the port handlers store (always 0). */
static void check_regs(struct sbuf_reader *in, const struct vga_regs *r)
{
	if (in->failed)
		return;
	if (r->sr_idx > 7 || r->gr_idx > 0xf || r->ar_idx > 0x3f || r->cr_idx > 0x3f)
		sbuf_fail(in, "vga: index out of range (sr %u gr %u ar %u cr %u)", r->sr_idx,
		          r->gr_idx, r->ar_idx, r->cr_idx);
	else if (r->dac_rcomp > 2 || r->dac_wcomp > 2)
		sbuf_fail(in, "vga: DAC component %u/%u > 2", r->dac_rcomp, r->dac_wcomp);
	else if (!all_zero(r->cr + CR_LAST + 1, sizeof(r->cr) - CR_LAST - 1) ||
	         !all_zero(r->ar + AR_CSEL + 1, sizeof(r->ar) - AR_CSEL - 1))
		sbuf_fail(in, "vga: CRTC or attribute register no guest can write is set");
}

void vga_save(struct vga *vga, struct sbuf *out)
{
	pthread_mutex_lock(&vga->lock);
	put_regs(out, &vga->r);
	sbuf_put_bytes(out, vga->latch, sizeof(vga->latch));
	vga_put_pages(out, &vga->vram[0][0], sizeof(vga->vram));
	pthread_mutex_unlock(&vga->lock);
}

int vga_restore(struct vga *vga, struct sbuf_reader *in)
{
	struct vga_regs r;
	uint8_t latch[4];
	int rc = -1;

	memset(&r, 0, sizeof(r));
	get_regs(in, &r);
	sbuf_get_bytes(in, latch, sizeof(latch));
	check_regs(in, &r);
	if (in->failed)
		return -1;
	pthread_mutex_lock(&vga->lock);
	if (vga_get_pages(in, &vga->vram[0][0], sizeof(vga->vram), "vga planes") == 0) {
		vga->r = r;
		memcpy(vga->latch, latch, sizeof(latch));
		rc = 0;
	}
	vga->gen++; /* the picture changed under the renderer */
	pthread_mutex_unlock(&vga->lock);
	vga_forget_frame(vga);
	return rc;
}
