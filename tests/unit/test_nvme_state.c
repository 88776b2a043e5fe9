/*
 * Unit tests for the NVMe controller's saved state (nvme_quiesce, _save,
 * _restore in src/dev/nvme.c, docs/design/snapshots.md section 2): I/O in
 * flight is finished and posted by quiesce and nothing more is fetched
 * while held; a controller's section restored into a fresh controller on
 * the same image carries on where the first stopped (registers, features,
 * a held AER, the CQ's head and phase, commands still in the SQ, each
 * completing exactly once); hostile sections (bad queue ids, sizes, GPAs
 * outside RAM, other geometry, cut or padded) are refused with the fresh
 * controller untouched.
 *
 * No KVM: vm_fd -1, one RAM region from calloc().  Three controllers: A
 * (slot 3) and B (slot 5) on the same 1 MiB image with the same options,
 * C (slot 6) a 2 MiB memory disk.  The state sections are the emulation's
 * own (pci_devemu.save/restore), without the generic PCI part, so B keeps
 * its own BARs.
 */
#include "unit.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "dev/nvme.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define RAM_GPA   0x100000ull
#define RAM_SIZE  0x400000ull
#define RAM_END   (RAM_GPA + RAM_SIZE)
#define PAGE      4096ull
#define ASQ_GPA   (RAM_GPA + 0x0000)
#define ACQ_GPA   (RAM_GPA + 0x1000)
#define SQ1_GPA   (RAM_GPA + 0x2000)
#define CQ1_GPA   (RAM_GPA + 0x3000)
#define DATA_GPA  (RAM_GPA + 0x100000)
#define IMG_SIZE  (1u << 20)
#define QENTRIES  16
#define IOENTRIES 16
#define CC_BITS   ((6u << 16) | (4u << 20))
#define ST_OK     0
#define ST_NONE   0xffff

static struct machine m;
static uint8_t *ram;
static struct pci_func *fa, *fb, *fc;
static uint64_t bar;
static char *dir, *img;
static int imgfd = -1;

struct drvq {
	uint64_t sq, cq;
	uint32_t size, tail, head;
	bool phase;
	uint16_t cid;
};
static struct drvq q[2];
static uint32_t last_dw0;

static uint64_t rd(uint64_t off)
{
	uint64_t v = 0;

	if (!iobus_access(&m.mmio, bar + off, 4, false, &v))
		fail_msg("read at 0x%llx unclaimed", (unsigned long long)off);
	return v;
}

static void wr(uint64_t off, unsigned size, uint64_t val)
{
	if (!iobus_access(&m.mmio, bar + off, size, true, &val))
		fail_msg("write at 0x%llx unclaimed", (unsigned long long)off);
}

static uint8_t *hva(uint64_t gpa)
{
	return ram + (gpa - RAM_GPA);
}

static void use(struct pci_func *f)
{
	bar = f->bar[0].addr;
}

static int group_setup(void **state)
{
	static const char *const slots[] = {"3", "5"};
	char err[256] = "", key[64], path[512];

	(void)state;
	ram = calloc(1, RAM_SIZE);
	dir = unit_mkdtemp();
	if (ram == NULL || dir == NULL ||
	    machine_init_detached(&m, "unit", ram, RAM_GPA, RAM_SIZE) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/disk.img", dir);
	img = strdup(path);
	imgfd = open(img, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (imgfd < 0 || ftruncate(imgfd, IMG_SIZE) < 0)
		return -1;
	config_reset();
	for (unsigned i = 0; i < 2; i++) {
		static const char *const kv[][2] = {{"device", "nvme"},
		                                    {"maxq", "4"},
		                                    {"qsz", "64"},
		                                    {"ioslots", "4"},
		                                    {"ser", "s"}};

		for (unsigned k = 0; k < ARRAY_LEN(kv); k++) {
			snprintf(key, sizeof(key), "pci.0.%s.0.%s", slots[i], kv[k][0]);
			if (config_set(key, kv[k][1]) < 0)
				return -1;
		}
		snprintf(key, sizeof(key), "pci.0.%s.0.path", slots[i]);
		if (config_set(key, img) < 0)
			return -1;
	}
	if (config_set("pci.0.6.0.device", "nvme") < 0 || config_set("pci.0.6.0.ram", "2") < 0 ||
	    config_set("pci.0.6.0.maxq", "4") < 0 || config_set("pci.0.6.0.qsz", "64") < 0)
		return -1;
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	fa = pci_get(0);
	fb = pci_get(1);
	fc = pci_get(2);
	for (unsigned s = 3; s <= 6; s++)
		pci_cfg_write(0, s, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
	return pci_count() == 3 && fb->slot == 5 ? 0 : -1;
}

static int group_teardown(void **state)
{
	struct pci_func *all[] = {fa, fb, fc};

	(void)state;
	for (unsigned i = 0; i < ARRAY_LEN(all); i++) {
		use(all[i]);
		wr(0x14, 4, 0);
	}
	close(imgfd);
	unit_rmtree(dir);
	free(dir);
	free(img);
	return 0;
}

/* Every controller disabled, RAM clean, A enabled as the driver's. */
static int reset(void **state)
{
	struct pci_func *all[] = {fc, fb, fa};

	(void)state;
	for (unsigned i = 0; i < ARRAY_LEN(all); i++) {
		use(all[i]);
		wr(0x14, 4, 0);
		pci_cfg_write(0, all[i]->slot, 0, all[i]->msix.cap + 2, 2, 0); /* MSI-X off */
		memset(all[i]->msix.pba, 0, 8);
	}
	memset(ram, 0, RAM_SIZE);
	memset(q, 0, sizeof(q));
	q[0] = (struct drvq){.sq = ASQ_GPA, .cq = ACQ_GPA, .size = QENTRIES, .phase = true};
	wr(0x24, 4, (QENTRIES - 1) | ((QENTRIES - 1) << 16));
	wr(0x28, 8, ASQ_GPA);
	wr(0x30, 8, ACQ_GPA);
	wr(0x14, 4, CC_BITS | 1);
	return rd(0x1c) == 1 ? 0 : -1;
}

/* The next completion of queue `qi` within `ms` milliseconds: its status
 * (no phase, no DNR) and cid, or ST_NONE. */
static unsigned reap_within(unsigned qi, uint16_t *cid, int ms)
{
	struct drvq *d = &q[qi];
	uint8_t *e = hva(d->cq + 16ull * d->head);

	for (int i = 0; i <= ms; i++) {
		uint16_t sf = __atomic_load_n((uint16_t *)(e + 14), __ATOMIC_ACQUIRE);

		if ((sf & 1) == d->phase) {
			memcpy(&last_dw0, e, 4);
			if (cid != NULL)
				memcpy(cid, e + 12, 2);
			if (++d->head == d->size) {
				d->head = 0;
				d->phase = !d->phase;
			}
			wr(0x1000 + 8 * qi + 4, 4, d->head);
			return sf & 0x7fe;
		}
		usleep(1000);
	}
	return ST_NONE;
}

static unsigned reap(unsigned qi, uint16_t *cid)
{
	return reap_within(qi, cid, 5000);
}

/* Entries posted on queue `qi`'s CQ that the driver has not reaped. */
static unsigned posted(unsigned qi)
{
	struct drvq *d = &q[qi];
	unsigned n = 0;
	uint32_t h = d->head;
	bool ph = d->phase;

	while (n < d->size && (hva(d->cq + 16ull * h)[14] & 1) == ph) {
		n++;
		if (++h == d->size) {
			h = 0;
			ph = !ph;
		}
	}
	return n;
}

static void queue_cmd(unsigned qi, struct nvme_sqe c)
{
	struct drvq *d = &q[qi];

	c.cid = d->cid++;
	memcpy(hva(d->sq + 64ull * d->tail), &c, sizeof(c));
	d->tail = (d->tail + 1) % d->size;
}

static void ring(unsigned qi)
{
	wr(0x1000 + 8 * qi, 4, q[qi].tail);
}

static unsigned submit(unsigned qi, struct nvme_sqe c)
{
	queue_cmd(qi, c);
	ring(qi);
	return reap(qi, NULL);
}

static void io_queue(void)
{
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x05,
	                                             .prp1 = CQ1_GPA,
	                                             .cdw10 = 1 | (IOENTRIES - 1) << 16,
	                                             .cdw11 = 1 | 2 | 1u << 16}),
	                 ST_OK);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x01,
	                                             .prp1 = SQ1_GPA,
	                                             .cdw10 = 1 | (IOENTRIES - 1) << 16,
	                                             .cdw11 = 1 | 1u << 16}),
	                 ST_OK);
	q[1] = (struct drvq){.sq = SQ1_GPA, .cq = CQ1_GPA, .size = IOENTRIES, .phase = true};
}

/* Write 8 sectors at `lba` from a page filled with `seed`. */
static struct nvme_sqe write_cmd(unsigned lba, unsigned seed)
{
	uint64_t buf = DATA_GPA + PAGE * (lba / 8 % 64);

	memset(hva(buf), (int)seed, PAGE);
	return (struct nvme_sqe){.opc = 0x01, .nsid = 1, .prp1 = buf, .cdw10 = lba, .cdw12 = 7};
}

static void assert_image(unsigned lba, unsigned seed)
{
	uint8_t buf[PAGE], want[PAGE];

	memset(want, (int)seed, sizeof(want));
	assert_int_equal(pread(imgfd, buf, sizeof(buf), (off_t)lba * 512), (ssize_t)sizeof(buf));
	assert_memory_equal(buf, want, sizeof(buf));
}

static void save(struct pci_func *f, struct sbuf *out)
{
	char err[160] = "";

	*out = (struct sbuf){0};
	assert_int_equal(f->de->save(f, out, err, sizeof(err)), 0);
	assert_false(out->failed);
}

/* Restore `len` bytes into `f` as the PCI layer does: its restore, then
 * the check that every byte was read.  0, or -1 with the reason. */
static int restore(struct pci_func *f, const void *data, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader in;

	sbuf_reader_init(&in, data, len);
	if (f->de->restore(f, &in, err, errlen) < 0) {
		if (in.failed)
			snprintf(err, errlen, "%s", in.why);
		return -1;
	}
	return sbuf_reader_done(&in, "nvme", err, errlen);
}

/* Offsets in a section of a controller with admin queues and I/O queue
 * pair 1 (maxq 4): the queue records are at the end, 51 bytes for a
 * created pair, 3 for an absent one. */
#define OFF_MAXQ  2
#define OFF_NSZE  14
#define OFF_CSTS  26
#define OFF_NAER  109
#define QREC      51
#define Q1(len)   ((len)-3 * 3 - QREC)
#define SQ_CQID   2
#define SQ_SIZE   4
#define SQ_GPA    8
#define SQ_HEAD   16
#define SQ_NABORT 24
#define CQ_VECTOR 29
#define CQ_SIZE   31
#define CQ_GPA    35
#define CQ_HEAD   43

/* ---- quiesce ---- */

/* Held commands are not fetched; the fetched ones have all posted; after
 * unquiesce the rest completes, each once. */
static void test_quiesce_holds(void **state)
{
	char err[160] = "";
	bool seen[IOENTRIES] = {false};
	unsigned before;
	uint32_t head;
	struct sbuf s;

	(void)state;
	io_queue();
	for (unsigned i = 0; i < 12; i++)
		queue_cmd(1, write_cmd(i * 8, 0x40 + i));
	ring(1);
	for (int i = 0; i < 5000 && posted(1) == 0; i++)
		usleep(100); /* the thread is busy: some I/O is in flight */
	assert_int_equal(fa->de->quiesce(fa, err, sizeof(err)), 0);
	before = posted(1);
	/* Every command fetched (the saved SQ head) has posted. */
	save(fa, &s);
	memcpy(&head, s.data + Q1(s.len) + SQ_HEAD, 4);
	assert_int_equal(head, before);
	sbuf_free(&s);
	usleep(30000);
	assert_int_equal(posted(1), before); /* nothing moves while held */
	fa->de->unquiesce(fa);
	for (unsigned i = 0; i < 12; i++) {
		uint16_t cid = 0xffff;

		assert_int_equal(reap(1, &cid), ST_OK);
		assert_true(cid < 12 && !seen[cid]);
		seen[cid] = true;
	}
	assert_int_equal(reap_within(1, NULL, 20), ST_NONE);
	for (unsigned i = 0; i < 12; i++)
		assert_image(i * 8, 0x40 + i);
}

/* A completion whose interrupt coalescing holds back (THR 3, TIME 25.5
 * ms; MSI-X on, vectors masked: an interrupt sets its pending bit) is
 * signalled by quiesce at once. */
static void test_quiesce_interrupts(void **state)
{
	char err[160] = "";
	uint64_t t0;

	(void)state;
	pci_cfg_write(0, 3, 0, fa->msix.cap + 2, 2, 0x8000);
	assert_true(pci_msix_enabled(fa));
	io_queue();
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x09, .cdw10 = 0x08, .cdw11 = 0xff03}),
	                 ST_OK);
	memset(fa->msix.pba, 0, 8);
	t0 = monotonic_ns();
	queue_cmd(1, write_cmd(0, 0x33));
	ring(1);
	for (int i = 0; i < 5000 && posted(1) == 0; i++)
		usleep(100);
	assert_int_equal(posted(1), 1);
	assert_int_equal(fa->de->quiesce(fa, err, sizeof(err)), 0);
	assert_true(fa->msix.pba[0] & 2); /* vector 1 */
	/* Before the aggregation time could have run out by itself (a
	 * machine this slow proves nothing either way). */
	if (monotonic_ns() - t0 >= 25000000ull)
		fprintf(stderr, "test_quiesce_interrupts: too slow to tell\n");
	fa->de->unquiesce(fa);
	assert_int_equal(reap(1, NULL), ST_OK);
}

/* ---- save, restore into a fresh controller ---- */

static void check_registers_equal(uint32_t cc, uint32_t aqa, uint64_t asq, uint64_t acq)
{
	assert_int_equal(rd(0x14), cc);
	assert_int_equal(rd(0x1c), 1);
	assert_int_equal(rd(0x24), aqa);
	assert_int_equal(rd(0x28) | rd(0x2c) << 32, asq);
	assert_int_equal(rd(0x30) | rd(0x34) << 32, acq);
}

static void test_restore_continues(void **state)
{
	char err[160] = "";
	bool seen[32] = {false};
	struct sbuf s;
	uint16_t aer_cid, cid;
	unsigned done = 0;

	(void)state;
	io_queue();
	/* Arbitration (a feature the guest set) and a held AER. */
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x09, .cdw10 = 0x01, .cdw11 = 0x0302}),
	                 ST_OK);
	aer_cid = q[0].cid;
	queue_cmd(0, (struct nvme_sqe){.opc = 0x0c});
	ring(0);
	/* 10 done before, so that the rest wraps the rings (phase flips). */
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(submit(1, write_cmd(i * 8, 0x10 + i)), ST_OK);
	for (unsigned i = 10; i < 25; i++)
		queue_cmd(1, write_cmd(i * 8, 0x10 + i));
	ring(1);
	assert_int_equal(fa->de->quiesce(fa, err, sizeof(err)), 0);
	save(fa, &s);
	/* A forgets everything (its held thread stops); B takes over. */
	wr(0x14, 4, 0);
	use(fb);
	assert_int_equal(restore(fb, s.data, s.len, err, sizeof(err)), 0);
	check_registers_equal(CC_BITS | 1, (QENTRIES - 1) | ((QENTRIES - 1) << 16), ASQ_GPA,
	                      ACQ_GPA);
	/* The rest of the writes: each once, CQ head and phase continuing. */
	for (unsigned n = 0; n < 25 && done < 15; n++) {
		cid = 0xffff;
		if (reap(1, &cid) != ST_OK)
			break;
		assert_true(cid >= 10 && cid < 25 && !seen[cid]);
		seen[cid] = true;
		done++;
	}
	assert_int_equal(done, 15);
	assert_int_equal(reap_within(1, NULL, 20), ST_NONE);
	/* The next command completes once. */
	assert_int_equal(submit(1, write_cmd(200, 0x77)), ST_OK);
	assert_int_equal(reap_within(1, NULL, 20), ST_NONE);
	for (unsigned i = 0; i < 25; i++)
		assert_image(i * 8, 0x10 + i);
	assert_image(200, 0x77);
	/* Features and the admin queue carry on; the held AER answers an
	 * event B raises (a doorbell for a queue that does not exist). */
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x0a, .cdw10 = 0x01}), ST_OK);
	assert_int_equal(last_dw0, 0x0302);
	wr(0x1000 + 8 * 3, 4, 1);
	assert_int_equal(reap(0, &cid), ST_OK);
	assert_int_equal(cid, aer_cid);
	assert_int_equal(last_dw0 & 7, 0); /* error event */
	sbuf_free(&s);
}

/* A section from a controller that was never enabled restores as such. */
static void test_restore_disabled(void **state)
{
	char err[160] = "";
	struct sbuf s;

	(void)state;
	wr(0x14, 4, 0);
	save(fa, &s);
	use(fb);
	assert_int_equal(restore(fb, s.data, s.len, err, sizeof(err)), 0);
	assert_int_equal(rd(0x14), 0);
	assert_int_equal(rd(0x1c), 0);
	sbuf_free(&s);
}

/* ---- hostile sections ---- */

struct patch {
	const char *what;
	int off; /* >= 0: from the start; < 0: into queue 1's record, -1 - off */
	unsigned size;
	uint64_t val;
	const char *why;
};

static void test_hostile(void **state)
{
	static const struct patch patches[] = {
	    {"version", 0, 2, 7, "version"},
	    {"maxq", OFF_MAXQ, 4, 8, "maxq"},
	    {"namespace", OFF_NSZE, 8, 4096, "namespace"},
	    {"CSTS", OFF_CSTS, 4, 0x100, "CSTS"},
	    {"AERs", OFF_NAER, 1, 200, "AERs"},
	    {"SQ cqid", -1 - SQ_CQID, 2, 9, "completion queue 9"},
	    {"SQ cqid 0", -1 - SQ_CQID, 2, 0, "completion queue 0"},
	    {"SQ size", -1 - SQ_SIZE, 4, 65, "size 65"},
	    {"SQ size 1", -1 - SQ_SIZE, 4, 1, "size 1"},
	    {"SQ GPA", -1 - SQ_GPA, 8, RAM_END, "not page-aligned guest RAM"},
	    {"SQ GPA odd", -1 - SQ_GPA, 8, SQ1_GPA + 8, "not page-aligned guest RAM"},
	    {"SQ GPA end", -1 - SQ_GPA, 8, RAM_END - PAGE / 2, "not page-aligned guest RAM"},
	    {"SQ head", -1 - SQ_HEAD, 4, IOENTRIES, "beyond"},
	    {"abort marks", -1 - SQ_NABORT, 1, 17, "abort marks"},
	    {"CQ vector", -1 - CQ_VECTOR, 2, 7, "vector 7"},
	    {"CQ size", -1 - CQ_SIZE, 4, 100000, "size 100000"},
	    {"CQ GPA", -1 - CQ_GPA, 8, 0x10000000000ull, "not page-aligned guest RAM"},
	    {"CQ head", -1 - CQ_HEAD, 4, 99, "beyond"},
	};
	char err[160];
	struct sbuf s;
	uint8_t *buf;

	(void)state;
	io_queue();
	assert_int_equal(fa->de->quiesce(fa, err, sizeof(err)), 0);
	save(fa, &s);
	fa->de->unquiesce(fa);
	buf = malloc(s.len + 1);
	assert_non_null(buf);
	use(fb);
	for (unsigned i = 0; i < ARRAY_LEN(patches); i++) {
		const struct patch *p = &patches[i];
		size_t off = p->off >= 0 ? (size_t)p->off : Q1(s.len) + (size_t)(-1 - p->off);

		memcpy(buf, s.data, s.len);
		memcpy(buf + off, &p->val, p->size); /* little-endian host */
		err[0] = '\0';
		if (restore(fb, buf, s.len, err, sizeof(err)) == 0)
			fail_msg("%s: accepted", p->what);
		if (strstr(err, p->why) == NULL)
			fail_msg("%s: \"%s\" lacks \"%s\"", p->what, err, p->why);
		assert_int_equal(rd(0x14), 0); /* B untouched */
	}
	/* Every cut is refused; a byte too many too. */
	for (size_t len = 0; len < s.len; len++) {
		err[0] = '\0';
		if (restore(fb, s.data, len, err, sizeof(err)) == 0)
			fail_msg("cut at %zu: accepted", len);
		assert_int_equal(rd(0x14), 0);
	}
	memcpy(buf, s.data, s.len);
	buf[s.len] = 0;
	assert_int_not_equal(restore(fb, buf, s.len + 1, err, sizeof(err)), 0);
	assert_contains(err, "left over");
	wr(0x14, 4, 0);
	/* Another image (2 MiB, other geometry) refuses A's section. */
	use(fc);
	assert_int_not_equal(restore(fc, s.data, s.len, err, sizeof(err)), 0);
	assert_contains(err, "namespace");
	assert_int_equal(rd(0x14), 0);
	/* The untouched section still restores. */
	use(fa);
	wr(0x14, 4, 0);
	use(fb);
	assert_int_equal(restore(fb, s.data, s.len, err, sizeof(err)), 0);
	assert_int_equal(rd(0x1c), 1);
	free(buf);
	sbuf_free(&s);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup(fn, reset)
	const struct CMUnitTest tests[] = {
	    T(test_quiesce_holds),     T(test_quiesce_interrupts),
	    T(test_restore_continues), T(test_restore_disabled),
	    T(test_hostile),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
