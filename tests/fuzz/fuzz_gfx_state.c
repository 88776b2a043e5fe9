/*
 * libFuzzer target for the saved state of the graphics and USB devices
 * (src/dev/fbuf.c with its VGA, src/dev/xhci.c with a USB tablet): the
 * guest drives them through their registers, then their sections are saved
 * with bytes flipped and cut, or replaced by raw bytes, and restored.  A
 * restore either refuses (one line) or leaves a device that keeps working
 * under more register writes, pointer events and display refreshes, and
 * whose state saves and restores again (the round trip aborts otherwise).
 *
 * Input: a sequence of ops, an opcode byte and its operands; bits 2:0:
 *   0 xHCI write     u16 offset (n%0x4000, dword aligned), u32 value
 *   1 save+restore   u8 participant, u8 patches (n%9), per patch u16 offset
 *                    (n%length) and u8 XOR mask, u16 cut (0: all)
 *   2 raw restore    u8 participant, u16 length (n%8192), that many bytes
 *   3 fbuf BAR2      u16 offset (n%4096), u8 size (1 << n%3), u32 value
 *   4 VGA port       u8 port (0x3B0 + n%0x30), u8 value
 *   5 VRAM           u8 where (bit 0: VGA window, else BAR0), u32 offset,
 *                    u8 value
 *   6 pointer        u8 buttons, u16 x, u16 y (on 1024x768)
 *   7 RAM and draw   the guest RAM write of fuzz.h (u16 offset), then one
 *                    display refresh
 * Each input starts from the devices as set up (their first saved state
 * restored) and zeroed RAM.
 */
#include "fuzz.h"

#include "backend/console.h"
#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "core/snapshot.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define RAM_GPA  0x100000ull
#define RAM_SIZE 0x10000ull

static struct machine m;
static uint8_t *ram;
static struct pci_func *xhci, *fbuf;
static struct sbuf pristine[2];

static void no_intx(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	(void)gsi;
	(void)level;
}

/* Restore `len` bytes as core does; true when accepted whole. */
static bool restore(const struct state_participant *p, const uint8_t *data, size_t len)
{
	struct sbuf_reader in;
	char err[256] = "";

	sbuf_reader_init(&in, data, len);
	if (p->ops->restore(p->arg, &in, err, sizeof(err)) < 0)
		return false;
	return sbuf_reader_done(&in, p->name, err, sizeof(err)) == 0;
}

static void save(const struct state_participant *p, struct sbuf *out)
{
	char err[256] = "";

	if (p->ops->quiesce(p->arg, err, sizeof(err)) < 0 ||
	    p->ops->save(p->arg, out, err, sizeof(err)) < 0 || out->failed) {
		fprintf(stderr, "%s: cannot save: %s\n", p->name, err);
		abort();
	}
	p->ops->unquiesce(p->arg);
}

static void setup_once(void)
{
	char err[256] = "";

	ram = calloc(1, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "fuzz", ram, RAM_GPA, RAM_SIZE) < 0)
		abort();
	m.intx_hook = no_intx;
	console_reset();
	config_reset();
	if (config_set("pci.0.5.0.device", "xhci") < 0 ||
	    config_set("pci.0.5.0.slot.1.device", "tablet") < 0 ||
	    config_set("pci.0.29.0.device", "fbuf") < 0 || config_set("pci.0.29.0.vnc", "off") < 0)
		abort();
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		abort();
	}
	xhci = pci_get(0);
	fbuf = pci_get(1);
	if (m.nstates != 2 || xhci == NULL || fbuf == NULL || fbuf->slot != 29)
		abort();
	pci_cfg_write(0, 5, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
	pci_cfg_write(0, 29, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	for (unsigned i = 0; i < 2; i++)
		save(&m.states[i], &pristine[i]);
}

FUZZ_TARGET(setup_once)

static const struct state_participant *participant(struct fz *z)
{
	return &m.states[fz_u8(z) % m.nstates];
}

/* What was accepted is a state the device can be in: it saves again and
 * that restores again. */
static void round_trip(const struct state_participant *p)
{
	struct sbuf again = {0};

	save(p, &again);
	if (!restore(p, again.data, again.len)) {
		fprintf(stderr, "%s: an accepted restore does not round-trip\n", p->name);
		abort();
	}
	sbuf_free(&again);
}

static void save_patch_restore(struct fz *z)
{
	const struct state_participant *p = participant(z);
	struct sbuf out = {0};
	unsigned npatch = fz_u8(z) % 9;
	size_t len, cut;

	save(p, &out);
	for (unsigned i = 0; i < npatch; i++) {
		size_t off = fz_u16(z) % out.len;

		out.data[off] ^= fz_u8(z);
	}
	cut = fz_u16(z);
	len = cut != 0 && cut < out.len ? cut : out.len;
	if (restore(p, out.data, len))
		round_trip(p);
	sbuf_free(&out);
}

static void raw_restore(struct fz *z)
{
	const struct state_participant *p = participant(z);
	size_t len = fz_u16(z) % 8192;
	uint8_t *buf = malloc(len ? len : 1);

	if (buf == NULL)
		abort();
	fz_bytes(z, buf, len);
	if (restore(p, buf, len))
		round_trip(p);
	free(buf);
}

static void mmio(uint64_t addr, unsigned size, uint64_t val)
{
	(void)iobus_access(&m.mmio, addr, size, true, &val);
}

static void vram_write(struct fz *z)
{
	bool window = fz_u8(z) & 1;
	uint32_t off = fz_u32(z);
	uint8_t val = fz_u8(z);

	if (window)
		mmio(0xa0000 + off % 0x20000, 1, val);
	else if (fbuf->bar[0].mapped)
		mmio(fbuf->bar[0].addr + off % fbuf->bar[0].size, 1, val);
}

static void refresh(void)
{
	struct console_frame *f = calloc(1, sizeof(*f));

	if (f == NULL)
		abort();
	(void)console_refresh(f);
	free(f);
}

static void fuzz_one(struct fz *z)
{
	memset(ram, 0, RAM_SIZE);
	for (unsigned i = 0; i < 2; i++)
		if (!restore(&m.states[i], pristine[i].data, pristine[i].len))
			abort();
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		uint64_t off;

		switch (op & 7) {
		case 0:
			off = fz_u16(z) % 0x4000 & ~3u;
			if (xhci->bar[0].mapped)
				mmio(xhci->bar[0].addr + off, 4, fz_u32(z));
			break;
		case 1:
			save_patch_restore(z);
			break;
		case 2:
			raw_restore(z);
			break;
		case 3: {
			unsigned size = 1u << (fz_u8(z) % 3);

			off = fz_u16(z) % 4096 & ~(uint64_t)(size - 1);
			if (fbuf->bar[2].mapped)
				mmio(fbuf->bar[2].addr + off, size, fz_u32(z));
			break;
		}
		case 4: {
			uint64_t port = 0x3b0 + fz_u8(z) % 0x30, val = fz_u8(z);

			(void)iobus_access(&m.pio, port, 1, true, &val);
			break;
		}
		case 5:
			vram_write(z);
			break;
		case 6: {
			uint8_t b = fz_u8(z);
			uint16_t x = fz_u16(z), y = fz_u16(z);

			console_ptr_event(b, x, y, 1024, 768);
			break;
		}
		case 7:
			fz_ram_write(z, ram, RAM_SIZE, 2);
			refresh();
			break;
		}
	}
}
