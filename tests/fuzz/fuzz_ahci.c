/*
 * libFuzzer target for the AHCI controller (src/dev/ahci.c): one ahci
 * function with a disk on port 0 and a CD-ROM on port 1, in a detached
 * machine, driven through its ABAR with command lists, command tables,
 * PRDTs and data in fake guest RAM.
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bit 6
 * "fix-up" keeps a command's PRD addresses in the data area of RAM and its
 * byte counts at most 64 KiB, so that the fuzzer gets past the DMA checks
 * without guessing RAM's address; bits 2:0:
 *   0 RAM write      u32 offset, u8 length-1, bytes
 *   1 register write u16 offset, u8 size (1 << n%3), u32 value
 *   2 register read  u16 offset, u8 size
 *   3 command        u8 port (n&1) and slot (n>>1 & 31), u16 header DW0
 *                    low half (CFL 5 added with fix-up), u8 PRDT entries
 *                    (n%9), 20-byte FIS (type 0x27 and C bit with fix-up),
 *                    16-byte ATAPI CDB, per entry u32 address and u32
 *                    byte count - 1; then PxCI (and PxSACT when the op's
 *                    bit 5 is set, for NCQ) gets the slot's bit
 *   4 port restart   u8 port: PxCMD ST and FRE off, then on
 *   5 clear status   u8 port: write-1-to-clear PxIS, PxSERR and IS
 *   6 media change   u8 n: the API's change() of cd0 (the CD port): n%3
 *                    0 eject, 1 insert the ISO, 2 insert an empty file;
 *                    bit 2 forces it past the guest's tray lock
 *   7 state          u8 patches (n%5), per patch u16 offset (n%length) and
 *                    u8 XOR mask, u16 cut (0: whole): the HBA's saved
 *                    section (ahci_save) flipped and cut, restored into the
 *                    same HBA; what a restore accepts must save and
 *                    restore again
 *
 * Every input starts from an HBA reset (GHC.HR), zeroed RAM, the ISO put
 * back in cd0 (forced: a unit attention and a media event pending) and
 * both ports started on a fixed layout, as a driver would leave them.
 */
#include "fuzz.h"

#include <fcntl.h>

#include "core/iobus.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define RAM_GPA    0x100000ull
#define RAM_SIZE   0x100000ull /* 1 MiB */
#define CLB(p)     (RAM_GPA + 0x0000 + (p)*0x400)
#define FB(p)      (RAM_GPA + 0x1000 + (p)*0x100)
#define CTBA(p, s) (RAM_GPA + 0x10000 + (p)*0x10000 + (s)*0x800)
#define DATA_OFF   0x30000ull /* data area: the rest of RAM */

#define GHC        0x04
#define IS         0x08
#define PX(p, r)   (0x100 + (p)*0x80 + (r))
#define P_CLB      0x00
#define P_CLBU     0x04
#define P_FB       0x08
#define P_FBU      0x0c
#define P_IS       0x10
#define P_IE       0x14
#define P_CMD      0x18
#define P_SERR     0x30
#define P_SACT     0x34
#define P_CI       0x38
#define ABAR_SIZE  0x1100

static struct machine m;
static uint8_t *ram;
static uint64_t abar;
static int iso_fd, blank_fd; /* media for op 6 (dup()ed: change() owns its fd) */

static void no_intx(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	(void)gsi;
	(void)level;
}

static void reg(uint64_t off, unsigned size, bool is_write, uint64_t val)
{
	(void)iobus_access(&m.mmio, abar + off, size, is_write, &val);
}

static void wr(uint64_t off, uint32_t val)
{
	reg(off, 4, true, val);
}

static void put32(uint64_t gpa, uint32_t v)
{
	memcpy(ram + (gpa - RAM_GPA), &v, 4);
}

static void setup_once(void)
{
	char err[256] = "";
	const char *disk, *iso;

	ram = calloc(1, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "fuzz", ram, RAM_GPA, RAM_SIZE) < 0)
		abort();
	m.intx_hook = no_intx;
	disk = fuzz_image(256u << 10, 0x5a);
	iso = fuzz_image(64u << 10, 0x43);
	iso_fd = open(iso, O_RDONLY | O_CLOEXEC);
	blank_fd = open(fuzz_image(0, 0), O_RDONLY | O_CLOEXEC);
	if (iso_fd < 0 || blank_fd < 0)
		abort();
	config_reset();
	if (config_set("pci.0.4.0.device", "ahci") < 0 ||
	    config_set("pci.0.4.0.port.0.type", "hd") < 0 ||
	    config_set("pci.0.4.0.port.0.path", disk) < 0 ||
	    config_set("pci.0.4.0.port.1.type", "cd") < 0 ||
	    config_set("pci.0.4.0.port.1.path", iso) < 0)
		abort();
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		abort();
	}
	fuzz_unlink_images();
	abar = pci_get(0)->bar[5].addr;
	pci_cfg_write(0, 4, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
}

static void port_start(unsigned p)
{
	wr(PX(p, P_CMD), 0);
	wr(PX(p, P_CLB), (uint32_t)CLB(p));
	wr(PX(p, P_CLBU), 0);
	wr(PX(p, P_FB), (uint32_t)FB(p));
	wr(PX(p, P_FBU), 0);
	wr(PX(p, P_IE), 0xffffffff);
	wr(PX(p, P_CMD), 1u << 4);       /* FRE */
	wr(PX(p, P_CMD), (1u << 4) | 1); /* FRE | ST */
}

/* The API changing cd0's medium: 0 eject, 1 the ISO, 2 an empty file. */
static void media_change(unsigned what, bool force)
{
	const struct machine_media_drive *d = machine_media_drive(&m, "cd0");
	int fd = what == 0 ? -1 : dup(what == 1 ? iso_fd : blank_fd);
	char err[128];

	if (d == NULL || (what != 0 && fd < 0))
		abort();
	(void)d->change(d->dev, fd, force, err, sizeof(err));
}

static void reset_all(void)
{
	/* Commands complete synchronously under the HBA's lock, so after the
	 * reset nothing touches RAM any more. */
	wr(GHC, 1);
	memset(ram, 0, RAM_SIZE);
	wr(GHC, 1u << 1);
	media_change(1, true);
	port_start(0);
	port_start(1);
}

static void command(struct fz *z, uint8_t op)
{
	bool fix = op & 0x40, ncq = op & 0x20;
	uint8_t ps = fz_u8(z);
	unsigned p = ps & 1, slot = (ps >> 1) & 31, nprd;
	uint32_t dw0 = fz_u16(z);
	uint64_t hdr = CLB(p) + slot * 32, ct = CTBA(p, slot);
	uint8_t *fis = ram + (ct - RAM_GPA);

	nprd = fz_u8(z) % 9;
	if (fix)
		dw0 = (dw0 & ~0x1fu) | 5;
	put32(hdr, dw0 | nprd << 16);
	put32(hdr + 4, 0);
	put32(hdr + 8, (uint32_t)ct);
	put32(hdr + 12, 0);
	fz_bytes(z, fis, 20);
	if (fix) {
		fis[0] = 0x27;
		fis[1] |= 0x80;
	}
	fz_bytes(z, fis + 0x40, 16);
	for (unsigned i = 0; i < nprd; i++) {
		uint32_t addr = fz_u32(z), dbc = fz_u32(z);

		if (fix) {
			addr = (uint32_t)(RAM_GPA + DATA_OFF + (addr % (RAM_SIZE - DATA_OFF)));
			dbc &= 0xffff;
			if (addr + (uint64_t)dbc + 1 > RAM_GPA + RAM_SIZE)
				dbc = (uint32_t)(RAM_GPA + RAM_SIZE - addr - 1);
		}
		put32(ct + 0x80 + i * 16, addr);
		put32(ct + 0x84 + i * 16, 0);
		put32(ct + 0x88 + i * 16, 0);
		put32(ct + 0x8c + i * 16, dbc);
	}
	if (ncq)
		wr(PX(p, P_SACT), 1u << slot);
	wr(PX(p, P_CI), 1u << slot);
}

/*
 * The state op: save the function's own section (quiesced, as a
 * checkpoint does), flip bytes and cut it as the input says, restore it
 * into the same function.  Whatever a restore accepts must save and
 * restore again (abort otherwise).
 */
static bool state_restore(struct pci_func *f, const uint8_t *p, size_t len)
{
	struct sbuf_reader in;
	char err[256] = "";

	sbuf_reader_init(&in, p, len);
	return f->de->restore(f, &in, err, sizeof(err)) == 0 &&
	       sbuf_reader_done(&in, f->de->name, err, sizeof(err)) == 0;
}

static void state_save(struct pci_func *f, struct sbuf *s)
{
	char err[256] = "";

	if (f->de->quiesce == NULL || f->de->quiesce(f, err, sizeof(err)) == 0)
		(void)f->de->save(f, s, err, sizeof(err));
	if (f->de->unquiesce != NULL)
		f->de->unquiesce(f);
}

static void state_op(struct pci_func *f, struct fz *z)
{
	struct sbuf s = {0}, again = {0};
	unsigned npatch = fz_u8(z) % 5;
	size_t len;

	state_save(f, &s);
	if (s.failed || s.len == 0)
		abort();
	for (unsigned i = 0; i < npatch; i++) {
		size_t off = fz_u16(z) % s.len;

		s.data[off] ^= fz_u8(z);
	}
	len = fz_u16(z);
	if (len == 0 || len > s.len)
		len = s.len;
	if (state_restore(f, s.data, len)) {
		state_save(f, &again);
		if (again.failed || !state_restore(f, again.data, again.len)) {
			fprintf(stderr, "%s: a restored state does not restore again\n",
			        f->de->name);
			abort();
		}
	}
	sbuf_free(&s);
	sbuf_free(&again);
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	reset_all();
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);

		switch (op & 7) {
		case 0:
			fz_ram_write(z, ram, RAM_SIZE, 4);
			break;
		case 1:
		case 2: {
			uint16_t off = fz_u16(z) % ABAR_SIZE;
			unsigned sz = 1u << (fz_u8(z) % 3);
			uint64_t val = (op & 7) == 1 ? fz_u32(z) : 0;

			reg(off, sz, (op & 7) == 1, val);
			break;
		}
		case 3:
			command(z, op);
			break;
		case 4: {
			unsigned p = fz_u8(z) & 1;

			wr(PX(p, P_CMD), 0);
			wr(PX(p, P_CMD), 1u << 4);
			wr(PX(p, P_CMD), (1u << 4) | 1);
			break;
		}
		case 5: {
			unsigned p = fz_u8(z) & 1;

			wr(PX(p, P_IS), 0xffffffff);
			wr(PX(p, P_SERR), 0xffffffff);
			wr(IS, 0xffffffff);
			break;
		}
		case 6: {
			uint8_t n = fz_u8(z);

			media_change(n % 3, n & 4);
			break;
		}
		default:
			state_op(pci_get(0), z);
			break;
		}
	}
}
