/*
 * libFuzzer target for the e1000 (src/dev/e1000.c) in a detached machine:
 * register writes and reads through BAR 0 and the I/O BAR, descriptor
 * rings and buffers in fake guest RAM, frames from the tap (a socket
 * pair, tests/fake_tap.h) for the receive thread, and the saved
 * state.
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bits 2:0:
 *   0 RAM write      u32 offset, u8 length-1, bytes
 *   1 register write u16 dword index (n % 32768), u32 value; opcode bit 3:
 *                    through IOADDR/IODATA instead
 *   2 register read  u16 dword index (clear-on-read ones, ICR)
 *   3 ring set-up    u8: bit 0 transmit (else receive), bits 3:1 log2 of
 *                    the descriptors / 8; base in RAM, head and tail 0,
 *                    then TCTL.EN or RCTL.EN|BAM|UPE|SECRC (bit 4: no SECRC)
 *   4 descriptor     u8: bit 0 transmit, bits 7:1 index; 16 raw bytes;
 *                    opcode bit 3 puts its buffer address into RAM's data
 *                    area; then the ring's tail register is written with u8
 *   5 frame          u16 length (n % 2048) and its bytes, into the tap
 *   6 wait           u8: up to n%8 * 50 us for the receive thread
 *   7 checkpoint     quiesce, save, with opcode bit 3 a byte of the
 *                    section flipped (u32 offset, u8 mask), restore into
 *                    the same device (an unflipped section must be
 *                    accepted), unquiesce
 * Each input starts from CTRL.RST in zeroed RAM with the tap drained.
 */
#include "fuzz.h"

#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "dev/e1000.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#include "../fake_tap.h"

#define RAM_GPA  0x100000ull
#define RAM_SIZE 0x40000ull /* 256 KiB */
#define TX_RING  (RAM_GPA + 0x0000)
#define RX_RING  (RAM_GPA + 0x8000)
#define DATA_OFF 0x10000ull

static struct machine m;
static uint8_t *ram;
static struct pci_func *f;
static uint64_t bar0, bar2;

static void no_intx(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	(void)gsi;
	(void)level;
}

static void setup_once(void)
{
	char err[256] = "";

	ram = calloc(1, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "fuzz", ram, RAM_GPA, RAM_SIZE) < 0)
		abort();
	m.intx_hook = no_intx;
	config_reset();
	if (config_set("pci.0.3.0.device", "e1000") < 0 ||
	    config_set("pci.0.3.0.backend", "fuzz0") < 0)
		abort();
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		abort();
	}
	f = pci_get(0);
	bar0 = f->bar[0].addr;
	bar2 = f->bar[2].addr;
	pci_cfg_write(0, 3, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_IO | PCIM_CMD_BUSMASTER);
}

static void wr(unsigned off, uint32_t val)
{
	uint64_t v = val;

	(void)iobus_access(&m.mmio, bar0 + off, 4, true, &v);
}

static void wr_io(unsigned off, uint32_t val)
{
	uint64_t a = off, v = val;

	(void)iobus_access(&m.pio, bar2 + E1000_IOADDR, 4, true, &a);
	(void)iobus_access(&m.pio, bar2 + E1000_IODATA, 4, true, &v);
}

static uint32_t rd(unsigned off)
{
	uint64_t v = 0;

	(void)iobus_access(&m.mmio, bar0 + off, 4, false, &v);
	return (uint32_t)v;
}

static void tap_drain(void)
{
	static uint8_t buf[70000];

	while (recv(tap_peer, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

static void ring_setup(uint8_t arg)
{
	bool tx = arg & 1;
	unsigned base = tx ? E1000_TDBAL : E1000_RDBAL;
	uint32_t len = (8u << ((arg >> 1) & 7)) * E1000_DESC_SIZE;

	wr(base, (uint32_t)(tx ? TX_RING : RX_RING));
	wr(base + 4, 0);
	wr(base + 8, len);
	wr(base + 0x10, 0);
	wr(base + 0x18, 0);
	if (tx)
		wr(E1000_TCTL, E1000_TCTL_EN);
	else
		wr(E1000_RCTL, E1000_RCTL_EN | E1000_RCTL_BAM | E1000_RCTL_UPE |
		                   (arg & 0x10 ? 0 : E1000_RCTL_SECRC));
}

static void put_desc(struct fz *z, bool fixup)
{
	uint8_t arg = fz_u8(z), d[E1000_DESC_SIZE];
	bool tx = arg & 1;
	uint64_t gpa = (tx ? TX_RING : RX_RING) + (uint64_t)(arg >> 1) * E1000_DESC_SIZE;

	fz_bytes(z, d, sizeof(d));
	if (fixup) {
		uint64_t a;

		memcpy(&a, d, sizeof(a));
		a = RAM_GPA + DATA_OFF + a % (RAM_SIZE - DATA_OFF);
		memcpy(d, &a, sizeof(a));
	}
	memcpy(ram + (gpa - RAM_GPA), d, sizeof(d));
	wr(tx ? E1000_TDT : E1000_RDT, fz_u8(z));
}

static void frame(struct fz *z)
{
	static uint8_t buf[2048];
	size_t len = fz_u16(z) % sizeof(buf);

	fz_bytes(z, buf, len);
	(void)send(tap_peer, buf, len, MSG_DONTWAIT);
}

static void checkpoint(struct fz *z, bool flip)
{
	struct sbuf s = {0};
	struct sbuf_reader r;
	char err[256];
	uint32_t off = flip ? fz_u32(z) : 0;
	uint8_t mask = flip ? fz_u8(z) : 0;
	int rc;

	if (f->de->quiesce(f, err, sizeof(err)) == 0 && f->de->save(f, &s, err, sizeof(err)) == 0 &&
	    !s.failed && s.len > 0) {
		s.data[off % s.len] ^= mask;
		sbuf_reader_init(&r, s.data, s.len);
		rc = f->de->restore(f, &r, err, sizeof(err));
		if (mask == 0 && rc != 0)
			abort(); /* its own section refused */
	}
	f->de->unquiesce(f);
	sbuf_free(&s);
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	wr_io(E1000_CTRL, E1000_CTRL_RST);
	memset(ram, 0, RAM_SIZE);
	tap_drain();
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);

		switch (op & 7) {
		case 0:
			fz_ram_write(z, ram, RAM_SIZE, 4);
			break;
		case 1: {
			unsigned off = (fz_u16(z) % (E1000_MMIO_SIZE / 4)) * 4;
			uint32_t v = fz_u32(z);

			if (op & 8)
				wr_io(off, v);
			else
				wr(off, v);
			break;
		}
		case 2:
			rd((fz_u16(z) % (E1000_MMIO_SIZE / 4)) * 4);
			break;
		case 3:
			ring_setup(fz_u8(z));
			break;
		case 4:
			put_desc(z, op & 8);
			break;
		case 5:
			frame(z);
			break;
		case 6:
			usleep((fz_u8(z) % 8) * 50);
			break;
		default:
			checkpoint(z, op & 8);
			break;
		}
	}
	tap_drain();
}
