/* Unit tests for the legacy VGA (src/dev/vga.c): registers, the memory
 * window's read and write modes, the font loader, and rendering of known
 * text, planar and 256-colour screens to pixels. */
#include "unit.h"

#include <zlib.h>

#include "backend/console.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "dev/vga.h"
#include "lib/sbuf.h"

#define W 720
#define H 400

struct fixture {
	struct machine m;
	struct vga *v;
	uint32_t px[800 * 600];
	struct console_frame f;
};

static void out8(struct fixture *x, uint16_t port, uint8_t val)
{
	uint64_t v = val;

	assert_true(iobus_access(&x->m.pio, port, 1, true, &v));
}

static uint8_t in8(struct fixture *x, uint16_t port)
{
	uint64_t v = 0;

	assert_true(iobus_access(&x->m.pio, port, 1, false, &v));
	return (uint8_t)v;
}

static void memw(struct fixture *x, uint32_t gpa, uint8_t val)
{
	uint64_t v = val;

	assert_true(iobus_access(&x->m.mmio, gpa, 1, true, &v));
}

static uint8_t memr(struct fixture *x, uint32_t gpa)
{
	uint64_t v = 0;

	assert_true(iobus_access(&x->m.mmio, gpa, 1, false, &v));
	return (uint8_t)v;
}

static void seq(struct fixture *x, uint8_t i, uint8_t v)
{
	out8(x, 0x3c4, i);
	out8(x, 0x3c5, v);
}

static void gc(struct fixture *x, uint8_t i, uint8_t v)
{
	out8(x, 0x3ce, i);
	out8(x, 0x3cf, v);
}

static void crtc(struct fixture *x, uint8_t i, uint8_t v)
{
	out8(x, 0x3d4, i);
	out8(x, 0x3d5, v);
}

static void attr(struct fixture *x, uint8_t i, uint8_t v)
{
	(void)in8(x, 0x3da);
	out8(x, 0x3c0, i);
	out8(x, 0x3c0, v);
	out8(x, 0x3c0, 0x20);
}

static int setup(void **state)
{
	struct fixture *x = calloc(1, sizeof(*x));
	char err[256] = "";

	if (x == NULL || machine_init_detached(&x->m, "t", NULL, 0, 0) < 0)
		return -1;
	x->v = vga_create(&x->m, true, err, sizeof(err));
	if (x->v == NULL)
		return -1;
	vga_set_blink_phase(x->v, 1);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *x = *state;

	vga_destroy(x->v);
	iobus_destroy(&x->m.pio);
	iobus_destroy(&x->m.mmio);
	free(x);
	return 0;
}

/* ---- registers ---- */

static void test_attr_flipflop(void **state)
{
	struct fixture *x = *state;

	(void)in8(x, 0x3da);
	out8(x, 0x3c0, 0x05);
	out8(x, 0x3c0, 0x2a);
	assert_int_equal(in8(x, 0x3c0), 0x05);
	assert_int_equal(in8(x, 0x3c1), 0x2a);
	/* A half-done pair is reset by reading input status 1. */
	out8(x, 0x3c0, 0x06);
	(void)in8(x, 0x3da);
	out8(x, 0x3c0, 0x31); /* index 0x11 with PAS set */
	out8(x, 0x3c0, 0x07);
	assert_int_equal(in8(x, 0x3c0), 0x31);
	assert_int_equal(in8(x, 0x3c1), 0x07);
	(void)in8(x, 0x3da);
	out8(x, 0x3c0, 0x05);
	assert_int_equal(in8(x, 0x3c1), 0x2a);
}

static void test_status1_toggles(void **state)
{
	struct fixture *x = *state;
	uint8_t a = in8(x, 0x3da), b = in8(x, 0x3da);

	assert_int_not_equal(a & 0x08, b & 0x08);
	/* Colour mode: the mono block reads as absent. */
	assert_int_equal(in8(x, 0x3ba), 0xff);
	out8(x, 0x3c2, 0x66);
	assert_int_equal(in8(x, 0x3cc), 0x66);
	assert_int_equal(in8(x, 0x3da), 0xff);
	out8(x, 0x3b4, 0x0e);
	out8(x, 0x3b5, 0x12);
	assert_int_equal(in8(x, 0x3b5), 0x12);
	out8(x, 0x3c2, 0x67);
	out8(x, 0x3d4, 0x0e);
	assert_int_equal(in8(x, 0x3d5), 0x12);
}

static void test_dac_cycles(void **state)
{
	struct fixture *x = *state;
	uint32_t pal[256];

	out8(x, 0x3c8, 0xff);
	out8(x, 0x3c9, 0x3f);
	out8(x, 0x3c9, 0x00);
	out8(x, 0x3c9, 0x10);
	out8(x, 0x3c9, 0x01); /* wrapped to entry 0 */
	out8(x, 0x3c9, 0x02);
	out8(x, 0x3c9, 0x03);
	assert_int_equal(in8(x, 0x3c8), 0x01);
	out8(x, 0x3c7, 0xff);
	assert_int_equal(in8(x, 0x3c7), 0x03);
	assert_int_equal(in8(x, 0x3c9), 0x3f);
	assert_int_equal(in8(x, 0x3c9), 0x00);
	assert_int_equal(in8(x, 0x3c9), 0x10);
	assert_int_equal(in8(x, 0x3c9), 0x01);
	vga_palette(x->v, pal, false);
	assert_int_equal(pal[255], 0xff0041);
	vga_palette(x->v, pal, true);
	assert_int_equal(pal[0], 0x010203);
}

static void test_index_wrap_and_protect(void **state)
{
	struct fixture *x = *state;
	uint64_t v = 0x0f02;

	/* A 16-bit write is index then data; the sequencer index has 3 bits. */
	assert_true(iobus_access(&x->m.pio, 0x3c4, 2, true, &v));
	out8(x, 0x3c4, 0x0a);
	assert_int_equal(in8(x, 0x3c5), 0x0f);
	gc(x, 0x18, 0x55);
	out8(x, 0x3ce, 0x08);
	assert_int_equal(in8(x, 0x3cf), 0x55);
	/* CR11 bit 7 protects CR0-7 except the line compare bit in CR7. */
	crtc(x, 0x11, 0x8e);
	crtc(x, 0x01, 0x27);
	crtc(x, 0x07, 0x00);
	out8(x, 0x3d4, 0x01);
	assert_int_equal(in8(x, 0x3d5), 0x4f);
	out8(x, 0x3d4, 0x07);
	assert_int_equal(in8(x, 0x3d5), 0x0f);
	crtc(x, 0x11, 0x0e);
	crtc(x, 0x01, 0x27);
	out8(x, 0x3d4, 0x01);
	assert_int_equal(in8(x, 0x3d5), 0x27);
}

/* ---- memory ---- */

static void planar_setup(struct fixture *x)
{
	seq(x, 4, 0x06); /* sequential, no chain-4 */
	gc(x, 5, 0x00);
	gc(x, 6, 0x05); /* graphics, A0000 64K */
}

static void test_write_modes(void **state)
{
	struct fixture *x = *state;

	planar_setup(x);
	/* Mode 0 with set/reset on planes 0 and 2 and map mask all planes. */
	seq(x, 2, 0x0f);
	gc(x, 0, 0x05);
	gc(x, 1, 0x0f);
	memw(x, 0xa0000, 0x00);
	gc(x, 1, 0x00);
	for (unsigned p = 0; p < 4; p++) {
		gc(x, 4, (uint8_t)p);
		assert_int_equal(memr(x, 0xa0000), (p & 1) ? 0x00 : 0xff);
	}
	/* Read mode 1: planes 0 and 2 set, compare colour 5. */
	gc(x, 5, 0x08);
	gc(x, 2, 0x05);
	gc(x, 7, 0x0f);
	assert_int_equal(memr(x, 0xa0000), 0xff);
	gc(x, 2, 0x04);
	assert_int_equal(memr(x, 0xa0000), 0x00);
	gc(x, 7, 0x04); /* only plane 2 counts */
	assert_int_equal(memr(x, 0xa0000), 0xff);
	/* Write mode 1 copies the latches (loaded by the read above). */
	gc(x, 5, 0x01);
	memw(x, 0xa0010, 0x12);
	gc(x, 5, 0x00);
	gc(x, 4, 2);
	assert_int_equal(memr(x, 0xa0010), 0xff);
	gc(x, 4, 1);
	assert_int_equal(memr(x, 0xa0010), 0x00);
	/* Mode 0, rotate by 4, XOR with the latches, bit mask 0x0f. */
	(void)memr(x, 0xa0000); /* latches: ff 00 ff 00 */
	gc(x, 3, 0x18 | 4);
	gc(x, 8, 0x0f);
	memw(x, 0xa0020, 0x3c); /* rotated: 0xc3 */
	gc(x, 3, 0);
	gc(x, 8, 0xff);
	gc(x, 4, 0);
	assert_int_equal(memr(x, 0xa0020), 0xf0 | (0x3c & 0x0f)); /* ff^c3=3c, masked */
	gc(x, 4, 1);
	assert_int_equal(memr(x, 0xa0020), 0x03);
	/* Mode 2: colour 0xa to planes 1 and 3 under bit mask 0x80. */
	gc(x, 5, 0x02);
	gc(x, 8, 0x80);
	(void)memr(x, 0xa0030); /* latches: zero, kept under the mask */
	memw(x, 0xa0030, 0x0a);
	gc(x, 5, 0x00);
	gc(x, 8, 0xff);
	gc(x, 4, 3);
	assert_int_equal(memr(x, 0xa0030), 0x80);
	gc(x, 4, 0);
	assert_int_equal(memr(x, 0xa0030), 0x20); /* the start-up blank text, kept */
	/* Mode 3: set/reset colour 1 under rotated data AND bit mask. */
	gc(x, 5, 0x03);
	gc(x, 0, 0x01);
	gc(x, 8, 0xf0);
	(void)memr(x, 0xa0040);
	memw(x, 0xa0040, 0x3c);
	gc(x, 5, 0x00);
	gc(x, 8, 0xff);
	gc(x, 4, 0);
	assert_int_equal(memr(x, 0xa0040), 0x30);
	/* Map mask: only plane 3. */
	seq(x, 2, 0x08);
	memw(x, 0xa0050, 0x77);
	gc(x, 4, 3);
	assert_int_equal(memr(x, 0xa0050), 0x77);
	gc(x, 4, 0);
	assert_int_equal(memr(x, 0xa0050), 0x20); /* untouched */
	/* Outside the 64K window. */
	assert_int_equal(memr(x, 0xb8000), 0xff);
}

static void test_odd_even_and_chain4(void **state)
{
	struct fixture *x = *state;

	/* Mode 3's odd/even: chars in plane 0, attributes in plane 1. */
	memw(x, 0xb8000, 'A');
	memw(x, 0xb8001, 0x1e);
	assert_int_equal(memr(x, 0xb8000), 'A');
	assert_int_equal(memr(x, 0xb8001), 0x1e);
	assert_int_equal(memr(x, 0xa0000), 0xff); /* B8000 window only */
	planar_setup(x);
	gc(x, 4, 0);
	assert_int_equal(memr(x, 0xa0000), 'A');
	gc(x, 4, 1);
	assert_int_equal(memr(x, 0xa0000), 0x1e);
	/* Chain-4: address bits 1:0 pick the plane. */
	seq(x, 4, 0x0e);
	seq(x, 2, 0x0f);
	memw(x, 0xa0007, 0x99);
	assert_int_equal(memr(x, 0xa0007), 0x99);
	seq(x, 4, 0x06);
	gc(x, 4, 3);
	assert_int_equal(memr(x, 0xa0004), 0x99);
}

/* ---- fonts ---- */

/* A PSF2 font of `n` glyphs, 16 lines, glyph g filled with byte g, and a
 * unicode table mapping glyph 1 to U+2591 (CP437 0xB0) and 'A'. */
static char *write_psf2(const char *dir)
{
	char *path;
	gzFile f;
	uint32_t hdr[8] = {0x864ab572, 0, 32, 1, 4, 16, 16, 8};

	if (asprintf(&path, "%s/t.psf.gz", dir) < 0)
		return NULL;
	f = gzopen(path, "wb");
	assert_non_null(f);
	gzwrite(f, hdr, sizeof(hdr));
	for (unsigned g = 0; g < 4; g++)
		for (unsigned l = 0; l < 16; l++)
			gzputc(f, (int)(0x10 * g + l));
	static const uint8_t table[] = {0xff, 0xe2, 0x96, 0x91, 'A', 0xff,
	                                0xfe, 'x',  'y',  0xff, 0xff};
	gzwrite(f, table, sizeof(table));
	gzclose(f);
	return path;
}

static void test_font_load(void **state)
{
	struct fixture *x = *state;
	char err[256], *dir = unit_mkdtemp(), *path = write_psf2(dir);

	assert_int_equal(vga_load_font(x->v, path, err, sizeof(err)), 0);
	planar_setup(x);
	gc(x, 4, 2);
	assert_int_equal(memr(x, 0xa0000 + 0xb0 * 32 + 3), 0x13);
	assert_int_equal(memr(x, 0xa0000 + 'A' * 32 + 15), 0x1f);
	/* 0xDB (full block) is missing from the font: drawn. */
	assert_int_equal(memr(x, 0xa0000 + 0xdb * 32 + 5), 0xff);
	assert_int_equal(memr(x, 0xa0000 + 'B' * 32 + 5), 0x00);
	assert_int_equal(memr(x, 0xa0000 + 'A' * 32 + 20), 0x00);
	assert_int_equal(vga_load_font(x->v, "/nonexistent.psf", err, sizeof(err)), -1);
	assert_contains(err, "/nonexistent.psf");
	unlink(path);
	char *bad = unit_write_file(dir, "bad.psf", "garbage!", 8);
	assert_int_equal(vga_load_font(x->v, bad, err, sizeof(err)), -1);
	free(bad);
	free(path);
	unit_rmtree(dir);
	free(dir);
}

/* With console-setup-linux installed, the start-up font has real glyphs
 * ('H': two vertical strokes on its middle line) and a blank space. */
static void test_default_font(void **state)
{
	struct fixture *x = *state;

	if (access("/usr/share/consolefonts/Uni2-VGA16.psf.gz", R_OK) != 0 &&
	    access("/usr/share/consolefonts/Lat15-VGA16.psf.gz", R_OK) != 0)
		skip();
	planar_setup(x);
	gc(x, 4, 2);
	uint8_t mid = memr(x, 0xa0000 + 'H' * 32 + 7);
	assert_int_not_equal(mid, 0);
	assert_int_equal(memr(x, 0xa0000 + ' ' * 32 + 7), 0);
	unsigned set = 0;
	for (unsigned l = 0; l < 16; l++)
		set += memr(x, 0xa0000 + 'H' * 32 + l) != 0;
	assert_true(set >= 6);
}

/* ---- rendering ---- */

/* Glyph 'A' (0x41) as 16 lines of 0x81 (left and right dots), 0xC4 as a
 * line on row 8. */
static void put_glyphs(struct fixture *x)
{
	seq(x, 2, 0x04);
	seq(x, 4, 0x06);
	gc(x, 5, 0x00);
	gc(x, 6, 0x04);
	for (unsigned l = 0; l < 16; l++) {
		memw(x, 0xa0000 + 0x41 * 32 + l, 0x81);
		memw(x, 0xa0000 + 0xc4 * 32 + l, l == 8 ? 0xff : 0x00);
		memw(x, 0xa0000 + 0x20 * 32 + l, 0x00);
	}
	seq(x, 2, 0x03);
	seq(x, 4, 0x02);
	gc(x, 5, 0x10);
	gc(x, 6, 0x0e);
}

static uint32_t px(struct fixture *x, unsigned X, unsigned Y)
{
	return x->f.pixels[Y * x->f.stride + X];
}

static void test_text_render(void **state)
{
	struct fixture *x = *state;

	put_glyphs(x);
	for (uint32_t a = 0; a < 4000; a += 2) {
		memw(x, 0xb8000 + a, ' ');
		memw(x, 0xb8001 + a, 0x07);
	}
	memw(x, 0xb8000, 'A');
	memw(x, 0xb8001, 0x1e); /* yellow on blue */
	memw(x, 0xb8002, 0xc4);
	memw(x, 0xb8003, 0x07);
	crtc(x, 0x0e, 0);
	crtc(x, 0x0f, 81); /* cursor on row 1, column 1 */
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_true(x->f.full);
	assert_int_equal(x->f.width, W);
	assert_int_equal(x->f.height, H);
	assert_int_equal(px(x, 0, 0), 0xffff55);
	assert_int_equal(px(x, 1, 0), 0x0000aa);
	assert_int_equal(px(x, 7, 5), 0xffff55);
	assert_int_equal(px(x, 8, 5), 0x0000aa); /* 9th dot of a letter: background */
	/* 0xC4 in 9-dot mode: the line continues into the 9th dot. */
	assert_int_equal(px(x, 9 + 8, 8), 0xaaaaaa);
	assert_int_equal(px(x, 9 + 8, 7), 0x000000);
	/* Cursor lines 13-14 of the cell at row 1, column 1. */
	assert_int_equal(px(x, 9 + 3, 16 + 13), 0xaaaaaa);
	assert_int_equal(px(x, 9 + 3, 16 + 12), 0x000000);
	/* Unchanged screen: no rectangles; one cell changed: one row's band. */
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_false(x->f.full);
	assert_int_equal(x->f.nrects, 0);
	memw(x, 0xb8000 + 2 * 80 * 3 + 2 * 5, 'A');
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_int_equal(x->f.nrects, 1);
	assert_int_equal(x->f.rects[0].y, 48);
	assert_int_equal(x->f.rects[0].h, 16);
	assert_int_equal(x->f.rects[0].x, 45);
	/* Underline on scan line 15 for attribute 0x01 (mode 7 style). */
	memw(x, 0xb8000 + 2 * 80 * 4, ' ');
	memw(x, 0xb8001 + 2 * 80 * 4, 0x01);
	crtc(x, 0x14, 0x0f);
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_int_equal(px(x, 3, 64 + 15), 0x0000aa);
	assert_int_equal(px(x, 3, 64 + 14), 0x000000);
	crtc(x, 0x14, 0x1f);
	/* 8-dot characters: 640 wide; blink bit as bright background. */
	seq(x, 1, 0x01);
	attr(x, 0x10, 0x04);
	memw(x, 0xb8001, 0x9e);
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_true(x->f.full);
	assert_int_equal(x->f.width, 640);
	assert_int_equal(px(x, 1, 0), 0x5555ff);
	/* Blink enabled and in its off phase: the glyph disappears. */
	attr(x, 0x10, 0x0c);
	vga_set_blink_phase(x->v, 0);
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_int_equal(px(x, 0, 0), 0x0000aa);
	/* Too small a buffer. */
	assert_false(vga_render(x->v, x->px, 1000, &x->f));
}

static void test_screen_off(void **state)
{
	struct fixture *x = *state;

	seq(x, 1, 0x20);
	x->f.width = 12345;
	assert_false(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_int_equal(x->f.width, 12345);
	seq(x, 1, 0x00);
	(void)in8(x, 0x3da);
	out8(x, 0x3c0, 0x00); /* palette address source clear */
	assert_false(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	out8(x, 0x3c0, 0x00);
	out8(x, 0x3c0, 0x20);
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
}

static void set_regs(struct fixture *x, uint8_t misc, const uint8_t sr[5], const uint8_t cr[25],
                     const uint8_t gr[9], const uint8_t ar[21])
{
	out8(x, 0x3c2, misc);
	for (uint8_t i = 0; i < 5; i++)
		seq(x, i, sr[i]);
	crtc(x, 0x11, 0x00);
	for (uint8_t i = 0; i < 25; i++)
		crtc(x, i, cr[i]);
	for (uint8_t i = 0; i < 9; i++)
		gc(x, i, gr[i]);
	for (uint8_t i = 0; i < 21; i++)
		attr(x, i, ar[i]);
}

static void test_planar_640x480(void **state)
{
	struct fixture *x = *state;
	static const uint8_t sr[5] = {0x03, 0x01, 0x0f, 0x00, 0x06};
	static const uint8_t cr[25] = {0x5f, 0x4f, 0x50, 0x82, 0x54, 0x80, 0x0b, 0x3e, 0x00,
	                               0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xea, 0x8c,
	                               0xdf, 0x28, 0x00, 0xe7, 0x04, 0xe3, 0xff};
	static const uint8_t gr[9] = {0, 0, 0, 0, 0, 0, 0x05, 0x0f, 0xff};
	static const uint8_t ar[21] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x14,
	                               0x07, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d,
	                               0x3e, 0x3f, 0x01, 0x00, 0x0f, 0x00, 0x00};

	set_regs(x, 0xe3, sr, cr, gr, ar);
	/* Clear, then colour 4 (red) in the first 4 pixels of line 10 and
	 * colour 15 (white) in pixel 7 of line 479 via write mode 2. */
	gc(x, 5, 0x02);
	for (uint32_t a = 0; a < 80 * 480; a++)
		memw(x, 0xa0000 + a, 0);
	gc(x, 8, 0xf0);
	memw(x, 0xa0000 + 80 * 10, 4);
	gc(x, 8, 0x01);
	memw(x, 0xa0000 + 80 * 479, 15);
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_int_equal(x->f.width, 640);
	assert_int_equal(x->f.height, 480);
	assert_int_equal(px(x, 0, 10), 0xaa0000);
	assert_int_equal(px(x, 3, 10), 0xaa0000);
	assert_int_equal(px(x, 4, 10), 0x000000);
	assert_int_equal(px(x, 0, 11), 0x000000);
	assert_int_equal(px(x, 7, 479), 0xffffff);
	/* Start address moves the picture up one line. */
	crtc(x, 0x0d, 80);
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_int_equal(px(x, 0, 9), 0xaa0000);
	/* 320x200 (mode 0Dh): doubled pixels and lines. */
	seq(x, 1, 0x09);
	crtc(x, 0x11, 0x0c); /* write protect off */
	crtc(x, 0x01, 0x27);
	crtc(x, 0x13, 0x14);
	crtc(x, 0x09, 0xc0);
	crtc(x, 0x12, 0x8f);
	crtc(x, 0x07, 0x1f);
	crtc(x, 0x0d, 0);
	memw(x, 0xa0000 + 40 * 3, 0x80 | 0); /* mask still 0x01: no-op */
	gc(x, 8, 0x80);
	memw(x, 0xa0000 + 40 * 3, 2);
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_int_equal(x->f.width, 640);
	assert_int_equal(x->f.height, 400);
	assert_int_equal(px(x, 0, 6), 0x00aa00);
	assert_int_equal(px(x, 1, 7), 0x00aa00);
	assert_int_equal(px(x, 2, 6), 0x000000);
	assert_int_equal(px(x, 0, 5), 0x000000);
}

static void test_mode13h(void **state)
{
	struct fixture *x = *state;
	static const uint8_t sr[5] = {0x03, 0x01, 0x0f, 0x00, 0x0e};
	static const uint8_t cr[25] = {0x5f, 0x4f, 0x50, 0x82, 0x54, 0x80, 0xbf, 0x1f, 0x00,
	                               0x41, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9c, 0x8e,
	                               0x8f, 0x28, 0x40, 0x96, 0xb9, 0xa3, 0xff};
	static const uint8_t gr[9] = {0, 0, 0, 0, 0, 0x40, 0x05, 0x0f, 0xff};
	static const uint8_t ar[21] = {0,  1,  2,  3,  4,  5,    6, 7,    8, 9, 10,
	                               11, 12, 13, 14, 15, 0x41, 0, 0x0f, 0, 0};

	set_regs(x, 0x63, sr, cr, gr, ar);
	out8(x, 0x3c8, 200);
	out8(x, 0x3c9, 0x3f);
	out8(x, 0x3c9, 0x20);
	out8(x, 0x3c9, 0x00);
	for (uint32_t a = 0; a < 320 * 200; a++)
		memw(x, 0xa0000 + a, 0);
	memw(x, 0xa0000 + 320 * 100 + 161, 200);
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_int_equal(x->f.width, 640);
	assert_int_equal(x->f.height, 400);
	assert_int_equal(px(x, 322, 200), 0xff8200);
	assert_int_equal(px(x, 323, 201), 0xff8200);
	assert_int_equal(px(x, 321, 200), 0x000000);
	assert_int_equal(px(x, 322, 199), 0x000000);
	assert_int_equal(px(x, 322, 202), 0x000000);
	/* Line compare at 100: the bottom half starts from address 0 again. */
	memw(x, 0xa0000 + 1, 200);
	crtc(x, 0x18, 100);
	crtc(x, 0x07, 0x0f);
	crtc(x, 0x09, 0x01);
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_int_equal(px(x, 2, 100), 0xff8200);
	assert_int_equal(px(x, 2, 0), 0xff8200);
}

/* Mode 4 (CGA 320x200 4-colour): even and odd scan lines in two banks. */
static void test_cga_mode4(void **state)
{
	struct fixture *x = *state;
	static const uint8_t sr[5] = {0x03, 0x09, 0x03, 0x00, 0x02};
	static const uint8_t cr[25] = {0x2d, 0x27, 0x28, 0x90, 0x2b, 0x80, 0xbf, 0x1f, 0x00,
	                               0xc1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9c, 0x8e,
	                               0x8f, 0x14, 0x00, 0x96, 0xb9, 0xa2, 0xff};
	static const uint8_t gr[9] = {0, 0, 0, 0, 0, 0x30, 0x0f, 0x00, 0xff};
	static const uint8_t ar[21] = {0x00, 0x13, 0x15, 0x17, 0x02, 0x04, 0x06,
	                               0x07, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15,
	                               0x16, 0x17, 0x01, 0x00, 0x03, 0x00, 0x00};

	set_regs(x, 0x63, sr, cr, gr, ar);
	for (uint32_t a = 0; a < 0x4000; a++)
		memw(x, 0xb8000 + a, 0);
	memw(x, 0xb8000, 0xc0);          /* line 0, pixel 0: colour 3 */
	memw(x, 0xb8001, 0x01);          /* line 0, pixel 7: colour 1 */
	memw(x, 0xb8000 + 0x2000, 0x80); /* line 1, pixel 0: colour 2 */
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	assert_int_equal(x->f.width, 640);
	assert_int_equal(x->f.height, 400);
	assert_int_equal(px(x, 1, 1), 0xaaffaa);  /* AR 0x17 */
	assert_int_equal(px(x, 14, 0), 0x00ffaa); /* AR 0x13 */
	assert_int_equal(px(x, 12, 0), 0x000000);
	assert_int_equal(px(x, 0, 2), 0xaa55aa); /* AR 0x15 */
	assert_int_equal(px(x, 0, 4), 0x000000);
}

/* Hostile geometry never reads outside vram or the buffer. */
static void test_hostile_geometry(void **state)
{
	struct fixture *x = *state;

	crtc(x, 0x11, 0x00);
	for (uint8_t i = 0; i < 0x19; i++)
		crtc(x, i, 0xff);
	seq(x, 3, 0xff);
	(void)vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f);
	gc(x, 6, 0x01);
	(void)vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f);
	gc(x, 5, 0x40);
	(void)vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f);
	assert_false(vga_render(x->v, x->px, 16, &x->f));
}

/* ---- saved state ---- */

#define VGA_OFF_SR_IDX   2
#define VGA_OFF_DAC_RCMP 130
#define VGA_OFF_CR       63
#define VGA_OFF_RUNS     912

/* A restore of `len` bytes of `data` into `v`, as a participant's would end. */
static int restore_bytes(struct vga *v, const uint8_t *data, size_t len, char *err, size_t n)
{
	struct sbuf_reader in;

	sbuf_reader_init(&in, data, len);
	err[0] = '\0';
	(void)vga_restore(v, &in);
	return sbuf_reader_done(&in, "vga", err, n);
}

static void assert_saves(struct vga *v, const struct sbuf *want)
{
	struct sbuf got = {0};

	vga_save(v, &got);
	assert_false(got.failed);
	assert_int_equal(got.len, want->len);
	assert_memory_equal(got.data, want->data, want->len);
	sbuf_free(&got);
}

/* Mode 3 text with characters written, a sequencer index and a DAC write
 * cycle left half-way, the attribute flip-flop on data: all come back in a
 * fresh VGA, which then draws the same picture; hostile images are refused
 * and change nothing. */
static void test_state_round_trip(void **state)
{
	struct fixture *x = *state;
	static uint32_t px2[800 * 600];
	struct console_frame f2;
	struct sbuf out = {0};
	uint8_t *bad;
	struct vga *v2;
	char err[160];
	uint32_t pal1[256], pal2[256];

	for (unsigned i = 0; i < 80; i++) {
		memw(x, 0xb8000 + 2 * i, (uint8_t)('A' + i % 26));
		memw(x, 0xb8000 + 2 * i + 1, 0x1e);
	}
	crtc(x, 0x0e, 0x00);
	crtc(x, 0x0f, 0x05); /* cursor at 5 */
	seq(x, 2, 0x03);
	out8(x, 0x3c8, 7);
	out8(x, 0x3c9, 0x3f);
	out8(x, 0x3c9, 0x10); /* two of three components written */
	(void)in8(x, 0x3da);
	out8(x, 0x3c0, 0x21);   /* flip-flop now on data */
	(void)memr(x, 0xb8000); /* latches */
	assert_true(vga_render(x->v, x->px, ARRAY_LEN(x->px), &x->f));
	vga_save(x->v, &out);
	assert_false(out.failed);
	assert_true(out.len < VGA_VRAM_SIZE / 2); /* sparse: the text, attributes and font */

	v2 = vga_create(NULL, true, err, sizeof(err));
	assert_non_null(v2);
	vga_set_blink_phase(v2, 1);
	vga_port_write(v2, 0x3c4, 1, 4); /* something else selected */
	assert_int_equal(restore_bytes(v2, out.data, out.len, err, sizeof(err)), 0);
	assert_saves(v2, &out);
	assert_int_equal(vga_port_read(v2, 0x3c4, 1), 2);
	assert_int_equal(vga_port_read(v2, 0x3d4, 1), 0x0f);
	assert_int_equal(vga_mem_read(v2, 0x18000 + 2), 'B');
	assert_int_equal(memr(x, 0xb8000 + 2), 'B'); /* the same latches in both */
	assert_true(vga_render(v2, px2, ARRAY_LEN(px2), &f2));
	assert_int_equal(f2.width, x->f.width);
	assert_int_equal(f2.height, x->f.height);
	assert_memory_equal(px2, x->px, (size_t)f2.width * f2.height * 4);
	/* The DAC cycle and the flip-flop go on where they were. */
	out8(x, 0x3c9, 0x05);
	vga_port_write(v2, 0x3c9, 1, 0x05);
	out8(x, 0x3c0, 0x01);
	vga_port_write(v2, 0x3c0, 1, 0x01);
	vga_palette(x->v, pal1, false);
	vga_palette(v2, pal2, false);
	assert_memory_equal(pal1, pal2, sizeof(pal1));
	assert_int_equal(vga_port_read(v2, 0x3c1, 1), 0x01);
	sbuf_free(&out);
	vga_save(v2, &out);
	assert_saves(x->v, &out); /* the same writes since: the same state */

	bad = malloc(out.len);
	assert_non_null(bad);
	memcpy(bad, out.data, out.len);
	bad[VGA_OFF_SR_IDX] = 9;
	assert_int_equal(restore_bytes(v2, bad, out.len, err, sizeof(err)), -1);
	assert_contains(err, "index out of range");
	memcpy(bad, out.data, out.len);
	bad[VGA_OFF_DAC_RCMP] = 3;
	assert_int_equal(restore_bytes(v2, bad, out.len, err, sizeof(err)), -1);
	assert_contains(err, "DAC component");
	memcpy(bad, out.data, out.len);
	bad[VGA_OFF_CR + 0x19] = 1; /* past CR18: no port write reaches it */
	assert_int_equal(restore_bytes(v2, bad, out.len, err, sizeof(err)), -1);
	assert_contains(err, "no guest can write");
	memcpy(bad, out.data, out.len);
	bad[VGA_OFF_RUNS + 4] = 64; /* the first run starts past the planes */
	assert_int_equal(restore_bytes(v2, bad, out.len, err, sizeof(err)), -1);
	assert_contains(err, "out of range");
	memcpy(bad, out.data, out.len);
	bad[VGA_OFF_RUNS] = 65; /* more runs than pages */
	assert_int_equal(restore_bytes(v2, bad, out.len, err, sizeof(err)), -1);
	assert_int_equal(restore_bytes(v2, out.data, VGA_OFF_RUNS - 1, err, sizeof(err)), -1);
	assert_contains(err, "truncated");
	memcpy(bad, out.data, out.len);
	assert_int_equal(restore_bytes(v2, bad, out.len, err, sizeof(err)), 0);
	assert_saves(v2, &out);
	free(bad);
	sbuf_free(&out);
	vga_destroy(v2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_attr_flipflop, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_status1_toggles, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dac_cycles, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_index_wrap_and_protect, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_write_modes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_odd_even_and_chain4, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_font_load, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_default_font, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_text_render, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_screen_off, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_planar_640x480, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mode13h, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cga_mode4, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hostile_geometry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_round_trip, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
