/*
 * libFuzzer target for the legacy VGA (src/dev/vga.c): its ports and the
 * 0xA0000-0xBFFFF window on a detached machine's buses, with renders in
 * between and at the end.  Every render's buffer ends where its allocation
 * does, so a frame drawn past `cap` is an ASan error, as is any read
 * outside video RAM.
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bits 2:0:
 *   0 port write   u8 port (0x3B0 + n%0x30), u8 size (1 + n%2), u16 value
 *   1 port read    u8 port, u8 size
 *   2 register     u8 block (n%4: sequencer, graphics, attribute, CRTC),
 *                  u8 index, u8 value: index then data, as a driver does
 *   3 memory fill  u32 offset (n % 0x20000), u8 length-1, bytes
 *   4 memory read  u32 offset, u8 size (1 << n%4)
 *   5 memory write u32 offset, u8 size (1 << n%4), u64 value
 *   6 render       u8: 0 full buffer, else a cap of n*n*64 pixels (at most
 *                  4 renders per input: each costs milliseconds under ASan)
 *   7 blink        u8 phase (n%3 - 1)
 * Each input starts from a fresh VGA in mode 3; a full render ends it.
 */
#include "fuzz.h"

#include "backend/console.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "dev/vga.h"

#define BUF_PIXELS (2304u * 2048u)

static struct machine m;
static uint32_t *buf;

static void setup_once(void)
{
	buf = malloc(BUF_PIXELS * sizeof(*buf));
	if (buf == NULL || machine_init_detached(&m, "fuzz", NULL, 0, 0) < 0)
		abort();
}

static void port(uint16_t p, unsigned size, bool is_write, uint64_t val)
{
	(void)iobus_access(&m.pio, p, size, is_write, &val);
}

static void render(struct vga *v, size_t cap)
{
	struct console_frame f;

	if (cap == 0 || cap > BUF_PIXELS)
		cap = BUF_PIXELS;
	if (!vga_render(v, buf + (BUF_PIXELS - cap), cap, &f))
		return;
	/* What it reports stays inside what it drew. */
	if ((size_t)f.stride * f.height > cap || f.width > f.stride || f.nrects > CONSOLE_MAX_RECTS)
		abort();
	for (unsigned i = 0; i < f.nrects; i++)
		if (f.rects[i].x + f.rects[i].w > f.width || f.rects[i].y + f.rects[i].h > f.height)
			abort();
}

static void reg(struct fz *z)
{
	static const uint16_t idx_port[4] = {0x3c4, 0x3ce, 0x3c0, 0x3d4};
	unsigned block = fz_u8(z) % 4;
	uint8_t index = fz_u8(z), val = fz_u8(z);

	if (block == 2) {
		port(0x3da, 1, false, 0);
		port(0x3c0, 1, true, index);
		port(0x3c0, 1, true, val);
		return;
	}
	port(idx_port[block], 1, true, index);
	port((uint16_t)(idx_port[block] + 1), 1, true, val);
}

static void fill(struct fz *z)
{
	uint32_t off = fz_u32(z) % 0x20000u;
	unsigned len = fz_u8(z) + 1u;

	for (unsigned i = 0; i < len && off + i < 0x20000u; i++) {
		uint64_t b = fz_u8(z);
		(void)iobus_access(&m.mmio, 0xa0000u + off + i, 1, true, &b);
	}
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	char err[256];
	struct vga *v;
	unsigned renders = 0;

	v = vga_create(&m, true, err, sizeof(err));
	if (v == NULL)
		abort();
	for (unsigned op = 0; op < FUZZ_MAX_OPS && fz_more(z); op++) {
		uint8_t code = fz_u8(z);
		uint64_t val;
		uint32_t off;
		unsigned sz;

		switch (code & 7) {
		case 0:
			off = fz_u8(z) % 0x30u;
			sz = 1 + fz_u8(z) % 2u;
			port((uint16_t)(0x3b0 + off), sz, true, fz_u16(z));
			break;
		case 1:
			off = fz_u8(z) % 0x30u;
			port((uint16_t)(0x3b0 + off), 1 + fz_u8(z) % 2u, false, 0);
			break;
		case 2:
			reg(z);
			break;
		case 3:
			fill(z);
			break;
		case 4:
			off = fz_u32(z) % 0x20000u;
			val = 0;
			(void)iobus_access(&m.mmio, 0xa0000u + off, 1u << (fz_u8(z) % 4), false,
			                   &val);
			break;
		case 5:
			off = fz_u32(z) % 0x20000u;
			sz = 1u << (fz_u8(z) % 4);
			val = fz_u64(z);
			(void)iobus_access(&m.mmio, 0xa0000u + off, sz, true, &val);
			break;
		case 6:
			sz = fz_u8(z);
			if (renders++ < 4)
				render(v, (size_t)sz * sz * 64);
			break;
		default:
			vga_set_blink_phase(v, (int)(fz_u8(z) % 3) - 1);
			break;
		}
	}
	render(v, 0);
	vga_destroy(v);
}
