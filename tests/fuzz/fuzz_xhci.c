/*
 * libFuzzer target for the xHCI controller and the USB tablet
 * (src/dev/xhci.c, src/dev/usb_tablet.c): one controller with a tablet on
 * port 1 in a detached machine, driven through BAR 0 with rings and
 * contexts in fake guest RAM.
 *
 * Input: a sequence of ops, each an opcode byte (bits 2:0) and operands:
 *   0 RAM write      u32 offset, u8 length-1, bytes
 *   1 register write u16 offset (into the 16 KiB BAR), u8 size (4 << n&1), u64 value
 *   2 register read  u16 offset, u8 size (1 << n&3)
 *   3 command        16-byte TRB: written at the command ring's enqueue
 *                    slot with the ring's cycle bit, then doorbell 0
 *   4 transfer       u8 slot (1 + n%2), u8 DCI (1 + n%3), 16-byte TRB:
 *                    written at that endpoint's ring (EPRING) with cycle 1,
 *                    then its doorbell
 *   5 pointer        u8 buttons, u16 x, u16 y (in a 1024x768 frame)
 *   6 doorbell       u8 index (n%10), u32 value
 *   7 events         consume the event ring and write ERDP with EHB
 * Every input starts from a reset controller set up as a driver would:
 * DCBAA, a 16-TRB command ring ending in a Link TRB, a one-segment event
 * ring of 32 TRBs, interrupts on, running.  Command and transfer TRBs are
 * the fuzzer's own; gen-corpus seeds an enumeration (input contexts by RAM
 * writes at INCTX).
 */
#include "fuzz.h"

#include "backend/console.h"
#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "lib/config.h"

#define RAM_GPA  0x100000ull
#define RAM_SIZE 0x40000ull /* 256 KiB */
#define DCBAA    (RAM_GPA + 0x0000)
#define CMDRING  (RAM_GPA + 0x1000)
#define ERST     (RAM_GPA + 0x2000)
#define EVRING   (RAM_GPA + 0x3000)
/* Endpoint rings: slot s (1-2), DCI d (1-3), 64 TRBs each, no Link. */
#define EPRING(s, d) (RAM_GPA + 0x10000 + 0x1000 * (3 * ((s)-1) + (d)-1))
#define EV_TRBS      32
#define CMD_TRBS     16
#define EP_TRBS      64
#define OP           0x40
#define IR0          0x1020
#define DB(n)        (0x2000 + 4 * (n))

static struct machine m;
static uint8_t *ram;
static uint64_t bar;
static unsigned cmd_idx, ev_idx, ep_idx[3][4];
static bool cmd_cycle, ev_cycle;

static void no_intx(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	(void)gsi;
	(void)level;
}

static void reg(uint64_t off, unsigned size, bool is_write, uint64_t val)
{
	(void)iobus_access(&m.mmio, bar + off, size, is_write, &val);
}

static void put(uint64_t gpa, const void *p, size_t len)
{
	memcpy(ram + (gpa - RAM_GPA), p, len);
}

static void setup_once(void)
{
	char err[256] = "";

	ram = aligned_alloc(4096, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "fuzz", ram, RAM_GPA, RAM_SIZE) < 0)
		abort();
	m.intx_hook = no_intx;
	console_reset();
	config_reset();
	if (config_set("pci.0.5.0.device", "xhci") < 0 ||
	    config_set("pci.0.5.0.slot.1.device", "tablet") < 0)
		abort();
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		abort();
	}
	bar = pci_get(0)->bar[0].addr;
	pci_cfg_write(0, 5, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
}

static void reset_all(void)
{
	uint32_t erst[4] = {(uint32_t)EVRING, 0, EV_TRBS, 0};
	uint32_t link[4] = {(uint32_t)CMDRING, 0, 0, 6u << 10 | 2 | 1};

	reg(OP, 4, true, 2); /* HCRST */
	memset(ram, 0, RAM_SIZE);
	cmd_idx = ev_idx = 0;
	cmd_cycle = ev_cycle = true;
	memset(ep_idx, 0, sizeof(ep_idx));
	put(CMDRING + 16 * (CMD_TRBS - 1), link, sizeof(link));
	put(ERST, erst, sizeof(erst));
	reg(OP + 0x38, 4, true, 8);
	reg(OP + 0x30, 8, true, DCBAA);
	reg(OP + 0x18, 8, true, CMDRING | 1);
	reg(IR0 + 0x08, 4, true, 1);
	reg(IR0 + 0x18, 8, true, EVRING);
	reg(IR0 + 0x10, 8, true, ERST);
	reg(IR0, 4, true, 2);
	reg(OP, 4, true, 1 | 4);
}

static void command(struct fz *z)
{
	uint32_t t[4];

	fz_bytes(z, t, sizeof(t));
	t[3] = (t[3] & ~1u) | (cmd_cycle ? 1u : 0);
	if ((t[3] >> 10 & 0x3f) == 6) /* the harness owns the ring's Link TRB */
		t[3] ^= 1u << 10;
	put(CMDRING + 16ull * cmd_idx, t, sizeof(t));
	if (++cmd_idx == CMD_TRBS - 1) {
		uint32_t link[4] = {(uint32_t)CMDRING, 0, 0, 6u << 10 | 2 | (cmd_cycle ? 1u : 0)};

		put(CMDRING + 16 * (CMD_TRBS - 1), link, sizeof(link));
		cmd_idx = 0;
		cmd_cycle = !cmd_cycle;
	}
	reg(DB(0), 4, true, 0);
}

static void transfer(struct fz *z)
{
	unsigned s = 1 + fz_u8(z) % 2, d = 1 + fz_u8(z) % 3;
	uint32_t t[4];

	fz_bytes(z, t, sizeof(t));
	t[3] |= 1;
	if (ep_idx[s][d] < EP_TRBS)
		put(EPRING(s, d) + 16ull * ep_idx[s][d]++, t, sizeof(t));
	reg(DB(s), 4, true, d);
}

static void consume_events(void)
{
	for (unsigned n = 0; n < EV_TRBS; n++) {
		uint32_t c;

		memcpy(&c, ram + (EVRING - RAM_GPA) + 16ull * ev_idx + 12, 4);
		if ((c & 1) != (ev_cycle ? 1u : 0))
			break;
		if (++ev_idx == EV_TRBS) {
			ev_idx = 0;
			ev_cycle = !ev_cycle;
		}
	}
	reg(IR0 + 0x18, 8, true, (EVRING + 16ull * ev_idx) | 8);
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	reset_all();
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		uint64_t off, val;
		unsigned sz;

		switch (op & 7) {
		case 0:
			fz_ram_write(z, ram, RAM_SIZE, 4);
			break;
		case 1:
			off = fz_u16(z) % 0x4000;
			sz = fz_u8(z) & 1 ? 8 : 4;
			val = fz_u64(z);
			reg(off & ~3ull, sz, true, val);
			break;
		case 2:
			off = fz_u16(z) % 0x4000;
			reg(off, 1u << (fz_u8(z) & 3), false, 0);
			break;
		case 3:
			command(z);
			break;
		case 4:
			transfer(z);
			break;
		case 5: {
			uint8_t b = fz_u8(z);
			uint16_t x = fz_u16(z), y = fz_u16(z);

			console_ptr_event(b, x, y, 1024, 768);
			break;
		}
		case 6:
			off = fz_u8(z) % 10;
			reg(DB(off), 4, true, fz_u32(z));
			break;
		default:
			consume_events();
			break;
		}
	}
}
