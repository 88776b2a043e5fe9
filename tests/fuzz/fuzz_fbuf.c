/*
 * libFuzzer target for the fbuf device (src/dev/fbuf.c): its BAR2 register
 * file (EDID, VGA forward, Bochs VBE DISPI, QEMU extended registers), the
 * DISPI ports, framebuffer writes through BAR0, BAR moves, and display
 * refreshes whose frames and rectangles are checked against the mode.
 *
 * Input: a sequence of ops, an opcode byte (bits 1:0 the op, bit 7 write)
 * and its operands:
 *   0 BAR2 access   u16 offset (mod 4096), u8 size (1 << n%4), u64 value
 *   1 DISPI         u8 index, u16 value: write the value at BAR2 0x500 +
 *                   2*index (bit 7 of the opcode clear: read it), and the
 *                   same through ports 0x1CE/0x1CF (claimed only with a VGA)
 *   2 BAR0 access   u32 offset (mod 16 MiB), u8 size (1 << n%4), u64 value
 *   3 refresh       (bit 7 set: move BAR0 first, u8 selects the address);
 *                   at most 2 an input: each converts a whole frame
 *
 * Each input starts from DISPI disabled, registers zeroed, index 0.
 * No KVM (vm_fd -1): BAR0 is served through the BAR handler.
 */
#include "fuzz.h"

#include "backend/console.h"
#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "dev/fbuf.h"
#include "lib/config.h"

#define SLOT 29

static struct machine m;
static struct pci_func *f;

static void setup_once(void)
{
	char err[256] = "";

	if (machine_init_detached(&m, "fuzz", NULL, 0, 0) < 0)
		abort();
	config_reset();
	if (config_set("pci.0.29.0.device", "fbuf") < 0 ||
	    config_set("pci.0.29.0.vga", "off") < 0 || config_set("pci.0.29.0.vnc", "off") < 0)
		abort();
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		abort();
	}
	f = pci_get(0);
	pci_cfg_write(0, SLOT, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_IO);
}

static void bus_access(struct iobus *bus, uint64_t addr, unsigned size, bool is_write, uint64_t val)
{
	(void)iobus_access(bus, addr, size, is_write, &val);
}

static void dispi_reset(void)
{
	uint64_t bar2 = f->bar[2].addr;

	bus_access(&m.mmio, bar2 + 0x508, 2, true, 0);
	for (unsigned i = 1; i < 10; i++)
		bus_access(&m.mmio, bar2 + 0x500 + 2 * i, 2, true, 0);
	bus_access(&m.mmio, bar2 + 0x604, 4, true, 0x1e1e1e1e);
	bus_access(&m.pio, 0x1ce, 2, true, 0);
}

/* Every rectangle inside the frame; every pixel readable (ASan). */
static void refresh_and_check(void)
{
	struct console_frame fr;
	volatile uint32_t sink = 0;

	memset(&fr, 0, sizeof(fr));
	if (!console_refresh(&fr))
		abort();
	if (fr.pixels == NULL || fr.width == 0 || fr.height == 0 || fr.stride < fr.width ||
	    fr.nrects > CONSOLE_MAX_RECTS)
		abort();
	for (unsigned i = 0; i < fr.nrects; i++) {
		const struct console_rect *r = &fr.rects[i];

		if (r->w == 0 || r->h == 0 || r->x + r->w > fr.width || r->y + r->h > fr.height)
			abort();
	}
	sink += fr.pixels[(size_t)(fr.height - 1) * fr.stride + fr.width - 1];
	(void)sink;
}

static void move_bar0(uint8_t sel)
{
	static const uint32_t where[4] = {0xc0000000u, 0xd0000000u, 0xc1000000u, 0};

	pci_cfg_write(0, SLOT, 0, PCIR_BAR0, 4, where[sel % 4]);
	if (sel & 4)
		pci_cfg_write(0, SLOT, 0, PCIR_COMMAND, 2, 0);
	pci_cfg_write(0, SLOT, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_IO);
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	unsigned refreshes = 0;

	move_bar0(0);
	dispi_reset();
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		bool wr = op & 0x80;
		uint32_t off;
		unsigned sz, idx;
		uint16_t v16;

		switch (op & 3) {
		case 0:
			off = fz_u16(z) % FBUF_MMIO_SIZE;
			sz = 1u << (fz_u8(z) % 4);
			bus_access(&m.mmio, f->bar[2].addr + off, sz, wr, fz_u64(z));
			break;
		case 1:
			idx = fz_u8(z);
			v16 = fz_u16(z);
			bus_access(&m.mmio, f->bar[2].addr + 0x500 + 2 * (idx % 16), 2, wr, v16);
			bus_access(&m.pio, 0x1ce, 2, true, idx);
			bus_access(&m.pio, 0x1cf, 2, wr, v16);
			break;
		case 2:
			off = fz_u32(z) % FBUF_VRAM_SIZE;
			sz = 1u << (fz_u8(z) % 4);
			bus_access(&m.mmio, f->bar[0].addr + off, sz, wr, fz_u64(z));
			break;
		default:
			if (wr)
				move_bar0(fz_u8(z));
			if (refreshes++ < 2)
				refresh_and_check();
			break;
		}
	}
}
