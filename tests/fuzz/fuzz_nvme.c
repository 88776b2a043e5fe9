/*
 * libFuzzer target for the NVMe controller (src/dev/nvme.c): two
 * controllers (a file-backed one with two I/O queues and INTx, a 4
 * KiB-sector memory disk with one and MSI-X, every vector masked so that
 * interrupts only set pending bits) in a detached machine, driven through
 * BAR 0 as a guest driver would, with queues, PRP lists and data in fake
 * guest RAM.
 *
 * Input: a sequence of ops, each an opcode byte and its operands:
 *   bit 7 picks the controller; bit 6 "fix-up" masks the guest addresses
 *   in a command into RAM (page-aligned PRP1 with a small offset), so that
 *   the fuzzer gets past PRP checks without having to guess RAM's address;
 *   bits 2:0:
 *   0 RAM write      u32 offset, u8 length-1, bytes
 *   1 register write u16 offset, u8 size (1 << n&3), u64 value
 *   2 register read  u16 offset, u8 size
 *   3 admin command  64-byte SQE, put at the admin SQ tail; rings SQ0, then
 *                    CQ0 past the completions posted (a held AER posts none,
 *                    and a head beyond them is an invalid doorbell write)
 *   4 I/O command    u8 queue (1 + n%2), 64-byte SQE; rings that SQ
 *   5 I/O queue pair u8 queue (1 + n%2), u8 entries (2 + n%15), u8 CQ flags:
 *                    Create I/O CQ then Create I/O SQ through the admin queue
 *   6 CQ doorbell    u8 queue (n%3), u16 head
 *   7 wait           u8: up to n%8 * 50 us for the queue threads to
 *                    complete what was submitted to the I/O queues made by
 *                    op 5; it consumes their completions and rings the CQ
 *                    head doorbells as a driver does, and returns as soon
 *                    as nothing is outstanding (a sleep here made the
 *                    target 10 times slower)
 *   with bit 3 set instead, the state op: u8 patches (n%5), per patch u16
 *   offset (n%length) and u8 XOR mask, u16 cut (0: whole): the
 *   controller's saved section (quiesced, nvme_save) flipped and cut,
 *   restored into the same controller; what a restore accepts must save
 *   and restore again
 *
 * Every input starts from controllers reset (CC.EN 0, which stops their
 * queue threads) and re-enabled with a 16-entry admin queue, in zeroed RAM.
 *
 * Speed: what an input costs is mostly the queue threads it starts and the
 * waits for them (op 7), so the cost grows with its length; `make
 * fuzz-long` caps inputs at 1 KiB (tests/fuzz/nvme.flags): room for a
 * queue pair and about a dozen 64-byte commands with their PRP lists.
 */
#include "fuzz.h"

#include "core/iobus.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "dev/nvme.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#include <sched.h>

#define RAM_GPA    0x100000ull
#define RAM_SIZE   0x40000ull /* 256 KiB: zeroed for every input */
#define PAGE       4096ull
#define ASQ_GPA    (RAM_GPA + 0x0000)
#define ACQ_GPA    (RAM_GPA + 0x1000)
#define SQ_GPA(q)  (RAM_GPA + 0x2000 * (q))
#define CQ_GPA(q)  (RAM_GPA + 0x2000 * (q) + 0x1000)
#define AQ_ENTRIES 16
#define IMG_SIZE   (256u << 10)
#define NCTRL      2
#define MAXQ       2
#define DB(q, cq)  (0x1000 + 8 * (q) + 4 * (cq))

static struct machine m;
static uint8_t *ram;

struct ctl {
	uint64_t bar;
	uint32_t sq_tail[MAXQ + 1];
	uint32_t sq_size[MAXQ + 1];
	uint32_t cq0_head; /* the admin CQ as a driver consumes it */
	bool cq0_phase;
	/* The I/O CQs made by op 5 as a driver consumes them: next entry,
	 * its phase, and commands submitted but not seen completed. */
	uint32_t cq_head[MAXQ + 1];
	bool cq_phase[MAXQ + 1];
	unsigned pending[MAXQ + 1];
};
static struct ctl ctl[NCTRL];

static void no_intx(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	(void)gsi;
	(void)level;
}

static void reg(struct ctl *c, uint64_t off, unsigned size, bool is_write, uint64_t val)
{
	/* Unclaimed accesses (past the BAR) are part of the game. */
	(void)iobus_access(&m.mmio, c->bar + off, size, is_write, &val);
}

static void setup_once(void)
{
	char err[256] = "";
	const char *img;

	ram = aligned_alloc(PAGE, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "fuzz", ram, RAM_GPA, RAM_SIZE) < 0)
		abort();
	m.intx_hook = no_intx;
	img = fuzz_image(IMG_SIZE, 0xa5);
	config_reset();
	if (config_set("pci.0.3.0.device", "nvme") < 0 || config_set("pci.0.3.0.path", img) < 0 ||
	    config_set("pci.0.3.0.maxq", "2") < 0 || config_set("pci.0.3.0.qsz", "16") < 0 ||
	    config_set("pci.0.3.0.ioslots", "4") < 0 ||
	    config_set("pci.0.4.0.device", "nvme") < 0 || config_set("pci.0.4.0.ram", "1") < 0 ||
	    config_set("pci.0.4.0.sectsz", "4096") < 0 || config_set("pci.0.4.0.maxq", "1") < 0)
		abort();
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		abort();
	}
	fuzz_unlink_images();
	for (unsigned i = 0; i < NCTRL; i++) {
		ctl[i].bar = pci_get(i)->bar[0].addr;
		pci_cfg_write(0, 3 + i, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
	}
	/* MSI-X on the second: interrupt coalescing applies only there. */
	pci_cfg_write(0, 4, 0, pci_get(1)->msix.cap + 2, 2, 0x8000);
}

static void reset_all(void)
{
	/* Disable first: that joins the queue threads, which may still be
	 * writing completions into RAM. */
	for (unsigned i = 0; i < NCTRL; i++)
		reg(&ctl[i], 0x14, 4, true, 0);
	memset(ram, 0, RAM_SIZE);
	for (unsigned i = 0; i < NCTRL; i++) {
		struct ctl *c = &ctl[i];

		memset(c->sq_tail, 0, sizeof(c->sq_tail));
		memset(c->sq_size, 0, sizeof(c->sq_size));
		memset(c->pending, 0, sizeof(c->pending));
		c->sq_size[0] = AQ_ENTRIES;
		c->cq0_head = 0;
		c->cq0_phase = true;
		/* Controller i uses the RAM's i-th half for its queues. */
		reg(c, 0x24, 4, true, (AQ_ENTRIES - 1) | ((AQ_ENTRIES - 1) << 16));
		reg(c, 0x28, 8, true, ASQ_GPA + i * 0x8000);
		reg(c, 0x30, 8, true, ACQ_GPA + i * 0x8000);
		reg(c, 0x14, 4, true, (6u << 16) | (4u << 20) | 1);
	}
}

static uint64_t in_ram(uint64_t gpa, uint64_t align)
{
	return RAM_GPA + ((gpa % RAM_SIZE) & ~(align - 1));
}

static void fixup(struct nvme_sqe *e)
{
	/* A PRP1 offset must be dword aligned; keep it small so PRP2 matters. */
	e->prp1 = in_ram(e->prp1 & ~0xfc0ull, 4);
	/* PRP2 is a page, or (odd values) a qword-aligned PRP list pointer
	 * that may start inside its page. */
	e->prp2 = in_ram(e->prp2, (e->prp2 & 1) ? 8 : PAGE);
	if (e->mptr != 0)
		e->mptr = in_ram(e->mptr, 4);
}

/* Consume the admin completions controller `i` has posted. */
static void consume_cq0(struct ctl *c, unsigned i)
{
	const uint8_t *cq = ram + (ACQ_GPA - RAM_GPA) + i * 0x8000;

	for (unsigned n = 0; n < AQ_ENTRIES; n++) {
		uint8_t p =
		    __atomic_load_n(&cq[c->cq0_head * NVME_CQE_SIZE + 14], __ATOMIC_ACQUIRE);

		if ((p & 1) != c->cq0_phase)
			break;
		c->cq0_head = (c->cq0_head + 1) % AQ_ENTRIES;
		if (c->cq0_head == 0)
			c->cq0_phase = !c->cq0_phase;
	}
	reg(c, DB(0, 1), 4, true, c->cq0_head);
}

static void submit(struct ctl *c, unsigned i, unsigned q, struct nvme_sqe *e)
{
	uint64_t base = (q == 0 ? ASQ_GPA : SQ_GPA(q)) + i * 0x8000;
	uint32_t size = c->sq_size[q] ? c->sq_size[q] : 2;
	uint32_t tail = c->sq_tail[q] % size;

	memcpy(ram + (base - RAM_GPA) + tail * NVME_SQE_SIZE, e, sizeof(*e));
	c->sq_tail[q] = (tail + 1) % size;
	reg(c, DB(q, 0), 4, true, c->sq_tail[q]);
	if (q == 0)
		consume_cq0(c, i);
	else if (c->sq_size[q] != 0)
		c->pending[q]++; /* a queue op 5 made: its completion is awaited */
}

/* Take the completions I/O queue `q` of controller `i` has posted. */
static void consume_io_cq(struct ctl *c, unsigned i, unsigned q)
{
	const uint8_t *cq = ram + (CQ_GPA(q) - RAM_GPA) + i * 0x8000;
	uint32_t size = c->sq_size[q];
	bool moved = false;

	while (c->pending[q] > 0 && size > 0) {
		uint8_t p =
		    __atomic_load_n(&cq[c->cq_head[q] * NVME_CQE_SIZE + 14], __ATOMIC_ACQUIRE);

		if ((p & 1) != c->cq_phase[q])
			break;
		c->pending[q]--;
		c->cq_head[q] = (c->cq_head[q] + 1) % size;
		if (c->cq_head[q] == 0)
			c->cq_phase[q] = !c->cq_phase[q];
		moved = true;
	}
	if (moved)
		reg(c, DB(q, 1), 4, true, c->cq_head[q]);
}

/* Op 7: yield to the queue threads until the I/O queues have completed
 * what was submitted, or `us` microseconds have passed. */
static void wait_io(struct ctl *c, unsigned i, unsigned us)
{
	uint64_t deadline = monotonic_ns() + us * 1000ull;

	for (;;) {
		unsigned left = 0;

		for (unsigned q = 1; q <= MAXQ; q++) {
			consume_io_cq(c, i, q);
			left += c->pending[q];
		}
		if (left == 0 || monotonic_ns() >= deadline)
			return;
		sched_yield();
	}
}

static void queue_pair(struct ctl *c, unsigned i, unsigned q, unsigned entries, uint8_t flags)
{
	struct nvme_sqe e = {.opc = 0x05, .cid = (uint16_t)(0x100 + q)};

	e.prp1 = CQ_GPA(q) + i * 0x8000;
	e.cdw10 = q | ((entries - 1) << 16);
	e.cdw11 = (flags & 3) | ((uint32_t)(flags >> 2) << 16); /* PC, IEN, IV */
	submit(c, i, 0, &e);
	e.opc = 0x01;
	e.cid++;
	e.prp1 = SQ_GPA(q) + i * 0x8000;
	e.cdw11 = 1 | (q << 16);
	submit(c, i, 0, &e);
	c->sq_size[q] = entries;
	c->sq_tail[q] = 0;
	c->cq_head[q] = 0;
	c->cq_phase[q] = true;
	c->pending[q] = 0;
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
	struct nvme_sqe e;

	reset_all();
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		unsigned i = op >> 7;
		struct ctl *c = &ctl[i];
		bool fix = op & 0x40;

		if (op & 0x08) {
			state_op(pci_get(i), z);
			continue;
		}
		switch (op & 7) {
		case 0:
			fz_ram_write(z, ram, RAM_SIZE, 4);
			break;
		case 1:
		case 2: {
			uint16_t off = fz_u16(z);
			unsigned sz = 1u << (fz_u8(z) & 3);
			uint64_t val = (op & 7) == 1 ? fz_u64(z) : 0;

			reg(c, off, sz, (op & 7) == 1, val);
			break;
		}
		case 3:
		case 4: {
			unsigned q = (op & 7) == 3 ? 0 : 1 + fz_u8(z) % MAXQ;

			fz_bytes(z, &e, sizeof(e));
			if (fix)
				fixup(&e);
			submit(c, i, q, &e);
			break;
		}
		case 5: {
			unsigned q = 1 + fz_u8(z) % MAXQ;
			unsigned entries = 2 + fz_u8(z) % 15;

			queue_pair(c, i, q, entries, fz_u8(z));
			break;
		}
		case 6: {
			unsigned q = fz_u8(z) % (MAXQ + 1);

			reg(c, DB(q, 1), 4, true, fz_u16(z));
			break;
		}
		case 7:
			wait_io(c, i, 50u * (fz_u8(z) % 8));
			break;
		}
	}
	/* Stop the queue threads and free what the input made, so that each
	 * input frees what it allocates: libFuzzer re-runs an input under
	 * LeakSanitizer whenever it does not, which cost half the speed. */
	for (unsigned i = 0; i < NCTRL; i++)
		reg(&ctl[i], 0x14, 4, true, 0);
}
