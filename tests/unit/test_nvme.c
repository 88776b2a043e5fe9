/*
 * Unit tests for the NVMe controller (src/dev/nvme.c), driven through its
 * BAR 0 registers and doorbells as a guest driver would: enable, Identify,
 * features, log pages, I/O queue creation, Read/Write through PRP1/PRP2
 * and PRP lists, Flush, Dataset Management, Write Zeroes, INTx and MSI-X
 * pending bits, asynchronous events and the error log, Abort, queue
 * deletion with commands outstanding, interrupt coalescing, shutdown and
 * reset -- and malformed input (bad PRPs, bad queue ids and sizes, bad
 * opcodes, namespaces, LBAs, sizes over MDTS, doorbell garbage), each of
 * which must fail with the right status.
 *
 * No KVM: the fake machine has vm_fd -1 and one RAM region from calloc().
 * The image is a 1 MiB file in a temporary directory.  Every test starts
 * with a freshly enabled controller and clean RAM.
 */
#include "unit.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "core/iobus.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "dev/nvme.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "unit_counters.h"

#define RAM_GPA   0x100000ull
#define RAM_SIZE  0x400000ull /* 4 MiB */
#define RAM_END   (RAM_GPA + RAM_SIZE)
#define PAGE      4096ull

#define ASQ_GPA   (RAM_GPA + 0x0000)
#define ACQ_GPA   (RAM_GPA + 0x1000)
#define SQ_GPA(q) (RAM_GPA + 0x2000 * (q)) /* q = 1, 2 */
#define CQ_GPA(q) (RAM_GPA + 0x2000 * (q) + 0x1000)
#define ID_GPA    (RAM_GPA + 0x8000)
#define LIST_GPA  (RAM_GPA + 0x10000)  /* PRP list pages */
#define DATA_GPA  (RAM_GPA + 0x100000) /* 1 MiB of data buffers */
#define DATA2_GPA (RAM_GPA + 0x200000)

#define IMG_SIZE  (1u << 20)
#define NLBAS     (IMG_SIZE / 512)
#define QENTRIES  16
#define MAXQ      4
#define QSZ       64

/* Status: SCT and SC without DNR and phase (section 4.6.1.2). */
#define S(sct, sc)      (((sct) << 9) | ((sc) << 1))
#define ST_OK           0
#define ST_BAD_OPCODE   S(0, 0x01)
#define ST_BAD_FIELD    S(0, 0x02)
#define ST_CID_CONFLICT S(0, 0x03)
#define ST_DATA_XFER    S(0, 0x04)
#define ST_ABORT_REQ    S(0, 0x07)
#define ST_SQ_DELETED   S(0, 0x08)
#define ST_BAD_NS       S(0, 0x0b)
#define ST_PRP_OFFSET   S(0, 0x13)
#define ST_LBA_RANGE    S(0, 0x80)
#define ST_CQ_INVALID   S(1, 0x00)
#define ST_BAD_QID      S(1, 0x01)
#define ST_BAD_QSIZE    S(1, 0x02)
#define ST_AER_LIMIT    S(1, 0x05)
#define ST_BAD_VECTOR   S(1, 0x08)
#define ST_BAD_LOG      S(1, 0x09)
#define ST_BAD_QDELETE  S(1, 0x0c)
#define ST_TIMEOUT      0xffff

static struct machine m;
static uint8_t *ram;
static struct pci_func *f;
static uint64_t bar;
static char *dir, *img;
static int imgfd = -1;

/* The driver's view of its queues. */
struct drvq {
	uint64_t sq, cq;
	uint32_t size;
	uint32_t cqsize; /* CQ entries when not `size` */
	uint32_t tail, head;
	bool phase;
	uint16_t cid;
};
static struct drvq q[3];
static uint32_t last_dw0;

/* ---- plumbing ---- */

static uint64_t rd(uint64_t off, unsigned size)
{
	uint64_t v = 0x5555;

	if (!iobus_access(&m.mmio, bar + off, size, false, &v))
		fail_msg("BAR 0 read at 0x%llx unclaimed", (unsigned long long)off);
	return v;
}

static void wr(uint64_t off, unsigned size, uint64_t val)
{
	if (!iobus_access(&m.mmio, bar + off, size, true, &val))
		fail_msg("BAR 0 write at 0x%llx unclaimed", (unsigned long long)off);
}

static uint8_t *hva(uint64_t gpa)
{
	return ram + (gpa - RAM_GPA);
}

static void put64(uint64_t gpa, uint64_t v)
{
	memcpy(hva(gpa), &v, 8);
}

static void fill(uint64_t gpa, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		hva(gpa)[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

static int group_setup(void **state)
{
	char err[256] = "", path[512];

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
	if (config_set("pci.0.3.0.device", "nvme") < 0 || config_set("pci.0.3.0.path", img) < 0 ||
	    config_set("pci.0.3.0.maxq", "4") < 0 || config_set("pci.0.3.0.qsz", "64") < 0 ||
	    config_set("pci.0.3.0.ioslots", "8") < 0 ||
	    config_set("pci.0.3.0.ser", "unit-serial") < 0)
		return -1;
	/* A second controller: memory disk, 4 KiB sectors, no DSM. */
	if (config_set("pci.0.4.0.device", "nvme") < 0 || config_set("pci.0.4.0.ram", "2") < 0 ||
	    config_set("pci.0.4.0.sectsz", "4096") < 0 ||
	    config_set("pci.0.4.0.dsm", "disable") < 0 || config_set("pci.0.4.0.maxq", "1") < 0)
		return -1;
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	f = pci_get(0);
	bar = f->bar[0].addr;
	pci_cfg_write(0, 3, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
	pci_cfg_write(0, 4, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
	return f->bar[0].mapped && pci_count() == 2 && pci_get(1)->bar[0].mapped ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	wr(0x14, 4, 0); /* stops the queue threads */
	bar = pci_get(1)->bar[0].addr;
	wr(0x14, 4, 0);
	close(imgfd);
	unit_rmtree(dir);
	free(dir);
	free(img);
	return 0;
}

/* CC with 64-byte SQ and 16-byte CQ entries. */
#define CC_READY_BITS ((6u << 16) | (4u << 20))

static void enable(void)
{
	wr(0x24, 4, (QENTRIES - 1) | ((QENTRIES - 1) << 16));
	wr(0x28, 8, ASQ_GPA);
	wr(0x30, 8, ACQ_GPA);
	wr(0x14, 4, CC_READY_BITS | 1);
}

static int reset(void **state)
{
	(void)state;
	wr(0x14, 4, 0);
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0);
	memset(f->msix.pba, 0, 8);
	memset(ram, 0, RAM_SIZE);
	memset(q, 0, sizeof(q));
	q[0] = (struct drvq){.sq = ASQ_GPA, .cq = ACQ_GPA, .size = QENTRIES, .phase = true};
	enable();
	return rd(0x1c, 4) == 1 ? 0 : -1;
}

/* Wait (up to 5 s) for the next completion on queue `qi`; its status
 * without phase and DNR, or ST_TIMEOUT. */
static unsigned reap(unsigned qi, uint16_t *cid)
{
	struct drvq *d = &q[qi];
	uint8_t *e = hva(d->cq + 16ull * d->head);

	for (int i = 0; i < 5000; i++) {
		uint16_t sf = __atomic_load_n((uint16_t *)(e + 14), __ATOMIC_ACQUIRE);

		if ((sf & 1) == d->phase) {
			memcpy(&last_dw0, e, 4);
			if (cid != NULL)
				memcpy(cid, e + 12, 2);
			if (++d->head == (d->cqsize ? d->cqsize : d->size)) {
				d->head = 0;
				d->phase = !d->phase;
			}
			wr(0x1000 + 8 * qi + 4, 4, d->head);
			return sf & 0x7fe;
		}
		usleep(1000);
	}
	return ST_TIMEOUT;
}

/* Put `c` in queue `qi` without ringing the doorbell. */
static void queue_cmd(unsigned qi, struct nvme_sqe *c)
{
	struct drvq *d = &q[qi];

	c->cid = d->cid++;
	memcpy(hva(d->sq + 64ull * d->tail), c, sizeof(*c));
	d->tail = (d->tail + 1) % d->size;
}

static void ring(unsigned qi)
{
	wr(0x1000 + 8 * qi, 4, q[qi].tail);
}

static unsigned submit(unsigned qi, struct nvme_sqe c)
{
	queue_cmd(qi, &c);
	ring(qi);
	return reap(qi, NULL);
}

static unsigned create_cq(unsigned qid, uint32_t entries, uint16_t vector, bool ien)
{
	return submit(0, (struct nvme_sqe){.opc = 0x05,
	                                   .prp1 = CQ_GPA(qid),
	                                   .cdw10 = qid | (entries - 1) << 16,
	                                   .cdw11 = 1 | (ien ? 2 : 0) | (uint32_t)vector << 16});
}

static unsigned create_sq(unsigned qid, uint32_t entries, unsigned cqid)
{
	return submit(0, (struct nvme_sqe){.opc = 0x01,
	                                   .prp1 = SQ_GPA(qid),
	                                   .cdw10 = qid | (entries - 1) << 16,
	                                   .cdw11 = 1 | (uint32_t)cqid << 16});
}

/* An I/O queue pair `qid` (SQ and CQ) with `entries` entries. */
static void io_queue(unsigned qid, uint32_t entries)
{
	assert_int_equal(create_cq(qid, entries, (uint16_t)qid, true), ST_OK);
	assert_int_equal(create_sq(qid, entries, qid), ST_OK);
	memset(hva(CQ_GPA(qid)), 0, 16ull * entries);
	q[qid] =
	    (struct drvq){.sq = SQ_GPA(qid), .cq = CQ_GPA(qid), .size = entries, .phase = true};
}

static struct nvme_sqe rw(uint8_t opc, uint64_t slba, uint32_t nlb, uint64_t prp1, uint64_t prp2)
{
	return (struct nvme_sqe){.opc = opc,
	                         .nsid = 1,
	                         .prp1 = prp1,
	                         .prp2 = prp2,
	                         .cdw10 = (uint32_t)slba,
	                         .cdw11 = (uint32_t)(slba >> 32),
	                         .cdw12 = nlb - 1};
}

#define WRITE 0x01
#define READ  0x02

static void image_read(uint64_t off, void *buf, size_t len)
{
	assert_int_equal(pread(imgfd, buf, len, (off_t)off), (ssize_t)len);
}

/* A good read still works: the controller survived what came before. */
static void assert_alive(void)
{
	if (q[1].size == 0)
		io_queue(1, QSZ);
	assert_int_equal(submit(1, rw(READ, 0, 8, DATA2_GPA, DATA2_GPA + PAGE)), ST_OK);
}

/* ---- registers and enable ---- */

static void test_registers(void **state)
{
	uint64_t cap = rd(0x00, 8);

	(void)state;
	assert_int_equal(cap & 0xffff, QSZ - 1); /* MQES */
	assert_true(cap & (1ull << 16));         /* CQR */
	assert_true(cap & (1ull << 37));         /* CSS: NVM */
	assert_int_equal((cap >> 32) & 0xf, 0);  /* DSTRD */
	assert_int_equal((cap >> 48) & 0xff, 0); /* MPSMIN/MAX: 4 KiB */
	assert_int_equal(rd(0x00, 4), (uint32_t)cap);
	assert_int_equal(rd(0x04, 4), cap >> 32);
	assert_int_equal(rd(0x08, 4), 0x00010400);
	assert_int_equal(rd(0x14, 4), CC_READY_BITS | 1);
	assert_int_equal(rd(0x1c, 4), 1); /* RDY */
	assert_int_equal(rd(0x24, 4), 0x000f000f);
	assert_int_equal(rd(0x28, 8), ASQ_GPA);
	assert_int_equal(rd(0x30, 8), ACQ_GPA);
	/* Admin queue registers are frozen while enabled. */
	wr(0x28, 8, 0x12345000);
	assert_int_equal(rd(0x28, 8), ASQ_GPA);
	/* Doorbells read as zero; reserved registers too. */
	assert_int_equal(rd(0x1000, 4), 0);
	assert_int_equal(rd(0x38, 4), 0);
	/* PCI identity: mass storage, NVM, NVMe; MSI-X in BAR 4. */
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_CLASS, 1), 0x01);
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_SUBCLASS, 1), 0x08);
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_PROGIF, 1), 0x02);
	assert_int_equal(f->bar[0].type, PCI_BAR_MEM64);
	assert_int_equal(f->msix.table_bar, 4);
	assert_int_equal(f->msix.table_count, MAXQ + 1);
	assert_int_equal(pci_get(1)->msix.table_count, 2);
	/* Disable: RDY drops. */
	wr(0x14, 4, 0);
	assert_int_equal(rd(0x1c, 4), 0);
}

static void test_enable_bad_admin_queue(void **state)
{
	static const struct {
		uint32_t aqa;
		uint64_t asq, acq;
		uint32_t cc;
	} bad[] = {
	    {0x000f000f, ASQ_GPA + 0x10, ACQ_GPA, CC_READY_BITS | 1},      /* unaligned */
	    {0x000f000f, 0x40000000, ACQ_GPA, CC_READY_BITS | 1},          /* not RAM */
	    {0x000f000f, ASQ_GPA, RAM_END - 0x80, CC_READY_BITS | 1},      /* runs off RAM */
	    {0x00000000, ASQ_GPA, ACQ_GPA, CC_READY_BITS | 1},             /* 1-entry queues */
	    {0x000f000f, ASQ_GPA, ACQ_GPA, CC_READY_BITS | 1 | (1u << 7)}, /* MPS 8 KiB */
	    {0x000f000f, ASQ_GPA, ACQ_GPA, CC_READY_BITS | 1 | (1u << 4)}, /* CSS */
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		wr(0x14, 4, 0);
		wr(0x24, 4, bad[i].aqa);
		wr(0x28, 8, bad[i].asq);
		wr(0x30, 8, bad[i].acq);
		wr(0x14, 4, bad[i].cc);
		assert_int_equal(rd(0x1c, 4) & 3, 2); /* CFS, not RDY */
		/* Doorbells do nothing while not ready. */
		wr(0x1000, 4, 1);
	}
	wr(0x14, 4, 0);
	assert_int_equal(rd(0x1c, 4), 0);
	enable();
	assert_int_equal(rd(0x1c, 4), 1);
}

/* ---- admin commands ---- */

static unsigned identify(unsigned cns, uint32_t nsid)
{
	memset(hva(ID_GPA), 0xee, PAGE);
	return submit(0,
	              (struct nvme_sqe){.opc = 0x06, .nsid = nsid, .prp1 = ID_GPA, .cdw10 = cns});
}

static void test_identify(void **state)
{
	const uint8_t *d = hva(ID_GPA);

	(void)state;
	assert_int_equal(identify(1, 0), ST_OK);
	assert_int_equal(unit_le(d, 2), 0xfb5d);
	assert_memory_equal(d + 4, "unit-serial         ", 20);
	assert_memory_equal(d + 24, "khyve NVMe ", 11);
	assert_int_equal(d[77], 7); /* MDTS */
	assert_int_equal(unit_le(d + 80, 4), 0x00010400);
	assert_int_equal(d[512], 0x66);
	assert_int_equal(d[513], 0x44);
	assert_int_equal(unit_le(d + 516, 4), 1);           /* NN */
	assert_int_equal(unit_le(d + 520, 2) & 0x0c, 0x0c); /* ONCS: DSM, WZ */
	assert_int_equal(d[525] & 1, 1);                    /* VWC */

	assert_int_equal(identify(0, 1), ST_OK);
	assert_int_equal(unit_le(d, 8), NLBAS); /* NSZE */
	assert_int_equal(unit_le(d + 8, 8), NLBAS);
	assert_int_equal(d[26], 0);      /* FLBAS */
	assert_int_equal(d[128 + 2], 9); /* LBAF0.LBADS: 512 */
	assert_int_equal(d[120], 0x58);  /* EUI64, OUI first */

	assert_int_equal(identify(2, 0), ST_OK);
	assert_int_equal(unit_le(d, 4), 1);
	assert_int_equal(unit_le(d + 4, 4), 0);
	assert_int_equal(identify(2, 1), ST_OK);
	assert_int_equal(unit_le(d, 4), 0);
	assert_int_equal(identify(2, 0xfffffffe), ST_BAD_NS);

	assert_int_equal(identify(3, 1), ST_OK);
	assert_int_equal(d[0], 1); /* EUI64 descriptor */
	assert_int_equal(d[1], 8);
	assert_int_equal(d[4], 0x58);

	assert_int_equal(identify(0, 2), ST_BAD_NS);
	assert_int_equal(identify(0, 0), ST_BAD_NS);
	assert_int_equal(identify(3, 7), ST_BAD_NS);
	assert_int_equal(identify(6, 0), ST_OK);
	assert_int_equal(d[0], 0);
	assert_int_equal(
	    submit(0,
	           (struct nvme_sqe){.opc = 0x06, .prp1 = ID_GPA, .cdw10 = 6, .cdw11 = 2u << 24}),
	    ST_BAD_FIELD); /* zoned command set */
	assert_int_equal(identify(0x10, 0), ST_BAD_FIELD);
	assert_int_equal(identify(0xff, 0), ST_BAD_FIELD);
}

static unsigned set_feature(unsigned fid, uint32_t v)
{
	return submit(0, (struct nvme_sqe){.opc = 0x09, .cdw10 = fid, .cdw11 = v});
}

static unsigned get_feature(unsigned fid)
{
	return submit(0, (struct nvme_sqe){.opc = 0x0a, .cdw10 = fid});
}

static void test_features(void **state)
{
	(void)state;
	/* Number of Queues: granted up to maxq, 0-based. */
	assert_int_equal(set_feature(0x07, 7 | 7 << 16), ST_OK);
	assert_int_equal(last_dw0, (MAXQ - 1) | (MAXQ - 1) << 16);
	assert_int_equal(set_feature(0x07, 1 | 0 << 16), ST_OK);
	assert_int_equal(last_dw0, 1);
	assert_int_equal(get_feature(0x07), ST_OK);
	assert_int_equal(last_dw0, 1);
	assert_int_equal(set_feature(0x07, 0xffff), ST_BAD_FIELD);
	/* Volatile write cache: on by default, can be turned off. */
	assert_int_equal(get_feature(0x06), ST_OK);
	assert_int_equal(last_dw0, 1);
	assert_int_equal(set_feature(0x06, 0), ST_OK);
	assert_int_equal(get_feature(0x06), ST_OK);
	assert_int_equal(last_dw0, 0);
	/* The rest are accepted and remembered (Interrupt Vector
	 * Configuration wants an I/O CQ: test_coalescing). */
	for (unsigned fid = 0x01; fid <= 0x0b; fid++) {
		if (fid == 0x03 || fid == 0x06 || fid == 0x07 || fid == 0x09)
			continue;
		assert_int_equal(set_feature(fid, 0), ST_OK);
		assert_int_equal(get_feature(fid), ST_OK);
	}
	assert_int_equal(set_feature(0x02, 5), ST_BAD_FIELD); /* power state 5 */
	assert_int_equal(set_feature(0x04, 0x150), ST_OK);
	assert_int_equal(get_feature(0x04), ST_OK);
	assert_int_equal(last_dw0, 0x150);
	assert_int_equal(set_feature(0x00, 0), ST_BAD_FIELD);
	assert_int_equal(set_feature(0x80, 0), ST_BAD_FIELD);
	assert_int_equal(get_feature(0x03), ST_BAD_FIELD);
	assert_int_equal(get_feature(0xfe), ST_BAD_FIELD);
}

/* Get Log Page; `rae`: retain asynchronous event (CDW10 bit 15). */
static unsigned get_log_rae(unsigned lid, uint32_t dwords, uint64_t offset, bool rae)
{
	memset(hva(ID_GPA), 0xee, 2 * PAGE);
	return submit(0, (struct nvme_sqe){.opc = 0x02,
	                                   .prp1 = ID_GPA,
	                                   .prp2 = ID_GPA + PAGE,
	                                   .cdw10 = lid | (rae ? 1u << 15 : 0) | (dwords - 1) << 16,
	                                   .cdw11 = (dwords - 1) >> 16,
	                                   .cdw12 = (uint32_t)offset,
	                                   .cdw13 = (uint32_t)(offset >> 32)});
}

static unsigned get_log(unsigned lid, uint32_t dwords, uint64_t offset)
{
	return get_log_rae(lid, dwords, offset, false);
}

static void test_log_pages(void **state)
{
	const uint8_t *d = hva(ID_GPA);

	(void)state;
	assert_int_equal(get_log(0x02, 128, 0), ST_OK);
	assert_int_equal(unit_le(d + 1, 2), 323); /* temperature */
	assert_int_equal(d[3], 100);
	assert_int_equal(d[512], 0xee); /* nothing beyond */
	assert_int_equal(get_log(0x03, 128, 0), ST_OK);
	assert_int_equal(d[0], 1);
	assert_memory_equal(d + 8, "1.0     ", 8);
	assert_int_equal(get_log(0x01, 16, 0), ST_OK);
	assert_int_equal(d[0], 0);
	/* Longer than the log: zero-filled. */
	assert_int_equal(get_log(0x01, 1024, 0), ST_OK);
	assert_int_equal(d[4095], 0);
	/* Offset into the log. */
	assert_int_equal(get_log(0x02, 1, 0), ST_OK);
	assert_int_equal(get_log(0x03, 2, 8), ST_OK);
	assert_memory_equal(d, "1.0     ", 8);
	assert_int_equal(get_log(0x02, 1, 512), ST_BAD_FIELD);
	assert_int_equal(get_log(0x02, 1, 2), ST_BAD_FIELD);
	assert_int_equal(get_log(0x02, 1, 1ull << 40), ST_BAD_FIELD);
	/* Over MDTS, unknown pages. */
	assert_int_equal(get_log(0x02, (512 << 10) / 4 + 1, 0), ST_BAD_FIELD);
	assert_int_equal(get_log(0x02, 0x10000000, 0), ST_BAD_FIELD);
	assert_int_equal(get_log(0x7f, 16, 0), ST_BAD_LOG);
	assert_int_equal(get_log(0x00, 16, 0), ST_BAD_LOG);
}

static void test_admin_bad_commands(void **state)
{
	(void)state;
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x7f}), ST_BAD_OPCODE);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x80}), ST_BAD_OPCODE);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0xff}), ST_BAD_OPCODE);
	/* Fused operations and SGLs are not supported. */
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x06, .flags = 1, .cdw10 = 1}),
	                 ST_BAD_FIELD);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x06, .flags = 0x40, .cdw10 = 1}),
	                 ST_BAD_FIELD);
	/* Abort: accepted, nothing aborted (dw0 bit 0). */
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x08, .cdw10 = 5}), ST_OK);
	assert_int_equal(last_dw0 & 1, 1);
	/* Identify into memory that is not RAM. */
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x06, .prp1 = 0x80000000, .cdw10 = 1}),
	                 ST_DATA_XFER);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x06,
	                                             .prp1 = RAM_END - 0x800,
	                                             .prp2 = RAM_END,
	                                             .cdw10 = 1}),
	                 ST_DATA_XFER);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x06,
	                                             .prp1 = ID_GPA + 0x802,
	                                             .prp2 = ID_GPA + PAGE,
	                                             .cdw10 = 1}),
	                 ST_PRP_OFFSET);
	assert_int_equal(identify(1, 0), ST_OK);
}

static void test_aer(void **state)
{
	uint16_t cid;

	(void)state;
	/* Four are held (AERL 3); nothing completes. */
	for (int i = 0; i < 4; i++) {
		struct nvme_sqe c = {.opc = 0x0c};

		queue_cmd(0, &c);
	}
	ring(0);
	assert_int_equal(identify(1, 0), ST_OK);
	/* A fifth is refused. */
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x0c}), ST_AER_LIMIT);
	/* A reset drops them; a CID reused while held conflicts. */
	reset(NULL);
	{
		struct nvme_sqe c = {.opc = 0x0c};

		queue_cmd(0, &c);
		q[0].cid = 0;
		queue_cmd(0, &c);
		ring(0);
		assert_int_equal(reap(0, &cid), ST_CID_CONFLICT);
		assert_int_equal(cid, 0);
	}
}

/* No completion is waiting on queue `qi`'s CQ. */
static bool cq_empty(unsigned qi)
{
	const struct drvq *d = &q[qi];

	return (hva(d->cq + 16ull * d->head)[14] & 1) != d->phase;
}

/* Submit an AER (held by the controller); its command id. */
static uint16_t post_aer(void)
{
	struct nvme_sqe c = {.opc = 0x0c};

	queue_cmd(0, &c);
	ring(0);
	return c.cid;
}

/* A failed command leaves an entry naming its queue and command id, with
 * the status field as posted (phase tag in bit 0); aborts the host asked
 * for do not count as errors. */
static void test_error_log_failed_commands(void **state)
{
	const struct nvme_error_entry *e = (const void *)hva(ID_GPA);
	struct nvme_sqe bad = {.opc = 0xff};
	uint64_t base;
	uint16_t cid;

	(void)state;
	/* The lifetime count (SMART) numbers the next entry: the log itself
	 * was emptied by the reset before this test. */
	assert_int_equal(get_log(0x02, 128, 0), ST_OK);
	base = unit_le(hva(ID_GPA) + 176, 8);
	queue_cmd(0, &bad);
	ring(0);
	assert_int_equal(reap(0, &cid), ST_BAD_OPCODE);
	assert_int_equal(get_log(0x01, 32, 0), ST_OK);
	assert_int_equal(e[0].error_count, base + 1);
	assert_int_equal(e[0].sqid, 0);
	assert_int_equal(e[0].cid, cid);
	assert_int_equal(e[0].status & 0x7fe, ST_BAD_OPCODE);
	assert_int_equal(e[0].param_loc, 0xffff);
	/* On an I/O queue too. */
	io_queue(1, QSZ);
	assert_int_equal(submit(1, (struct nvme_sqe){.opc = 0xff, .nsid = 1}), ST_BAD_OPCODE);
	assert_int_equal(get_log(0x01, 32, 0), ST_OK);
	assert_int_equal(e[0].error_count, base + 2);
	assert_int_equal(e[0].sqid, 1);
	assert_int_equal(get_log(0x02, 128, 0), ST_OK);
	assert_int_equal(unit_le(hva(ID_GPA) + 176, 8), base + 2);
}

/* Invalid doorbell writes: error log entries always, error events only
 * while an AER is outstanding; the event type stays masked until the
 * error log is read with RAE 0, which also drops what was pending. */
static void test_aer_error_events(void **state)
{
	const struct nvme_error_entry *e = (const void *)hva(ID_GPA);
	uint64_t base;
	uint16_t cid, aer;

	(void)state;
	assert_int_equal(get_log(0x01, 32, 0), ST_OK);
	assert_int_equal(e[0].error_count, 0); /* a reset empties the log */
	/* SQ 3 does not exist; no AER outstanding: just the log entry. */
	wr(0x1000 + 8 * 3, 4, 1);
	assert_true(cq_empty(0));
	assert_int_equal(get_log(0x01, 32, 0), ST_OK);
	base = e[0].error_count;
	assert_true(base != 0);
	assert_int_equal(e[0].sqid, 0xffff);
	assert_int_equal(e[0].cid, 0xffff);
	assert_int_equal(e[0].status, S(1, 0x01));
	assert_int_equal(e[0].param_loc, 0xffff);
	assert_int_equal(e[1].error_count, 0);
	assert_int_equal(get_log(0x02, 128, 0), ST_OK);
	assert_int_equal(unit_le(hva(ID_GPA) + 176, 8), base); /* SMART: lifetime count */
	assert_int_equal(unit_le(hva(ID_GPA) + 160, 8), 0);    /* no media errors */
	/* With an AER outstanding: CQ 3's doorbell completes it. */
	aer = post_aer();
	assert_true(cq_empty(0));
	wr(0x1000 + 8 * 3 + 4, 4, 1);
	assert_int_equal(reap(0, &cid), ST_OK);
	assert_int_equal(cid, aer);
	assert_int_equal(last_dw0, NVME_AE_DW0(NVME_AE_ERROR, NVME_AEI_INVALID_DB_REG, 0x01));
	/* The error type is masked now: an admin tail beyond the queue waits. */
	aer = post_aer();
	wr(0x1000, 4, QENTRIES + 3);
	assert_int_equal(identify(1, 0), ST_OK);
	assert_true(cq_empty(0));
	/* RAE 1 keeps it masked; the log has the entry, newest first. */
	assert_int_equal(get_log_rae(0x01, 32, 0, true), ST_OK);
	assert_true(cq_empty(0));
	assert_int_equal(e[0].error_count, base + 2);
	assert_int_equal(e[0].status, S(0, 0x02));
	assert_int_equal(e[1].error_count, base + 1);
	/* RAE 0 clears it, and the pending event with it: nothing comes. */
	assert_int_equal(get_log(0x01, 32, 0), ST_OK);
	assert_true(cq_empty(0));
	/* Unmasked: a CQ head beyond the entries posted (an empty CQ). */
	wr(0x1004, 4, (q[0].head + 5) % QENTRIES);
	assert_int_equal(reap(0, &cid), ST_OK);
	assert_int_equal(cid, aer);
	assert_int_equal(last_dw0, NVME_AE_DW0(NVME_AE_ERROR, NVME_AEI_INVALID_DB_VALUE, 0x01));
	/* Beyond maxq is a doorbell of no queue too; the log keeps 16. */
	for (int i = 0; i < 20; i++)
		wr(0x1000 + 8 * MAXQ + 8, 4, 1);
	assert_int_equal(get_log(0x01, 1024, 0), ST_OK);
	assert_int_equal(e[0].error_count, base + 23);
	assert_int_equal(e[15].error_count, base + 8);
	assert_int_equal(e[16].error_count, 0);
	assert_true(cq_empty(0));
	assert_alive();
}

static unsigned get_feature_dw11(unsigned fid, uint32_t dw11)
{
	return submit(0, (struct nvme_sqe){.opc = 0x0a, .cdw10 = fid, .cdw11 = dw11});
}

/* The composite temperature (323 K) against the Temperature Threshold
 * feature: SMART critical warning bit 1, and a SMART event when the
 * Asynchronous Event Configuration enables it -- kept until an AER
 * comes. */
static void test_aer_temperature(void **state)
{
	const uint8_t *d = hva(ID_GPA);
	struct nvme_sqe sf = {.opc = 0x09, .cdw10 = 0x04, .cdw11 = 300};
	uint16_t cid, aer;

	(void)state;
	assert_int_equal(get_feature(0x04), ST_OK);
	assert_int_equal(last_dw0, 343); /* WCTEMP */
	assert_int_equal(set_feature(0x0b, 0x02), ST_OK);
	assert_int_equal(get_log_rae(0x02, 128, 0, true), ST_OK);
	assert_int_equal(d[0], 0);
	/* Over threshold below it: no AER yet, so the event waits. */
	assert_int_equal(set_feature(0x04, 300), ST_OK);
	assert_true(cq_empty(0));
	assert_int_equal(get_log_rae(0x02, 128, 0, true), ST_OK);
	assert_int_equal(d[0], 0x02);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x0c}), ST_OK);
	assert_int_equal(last_dw0, NVME_AE_DW0(NVME_AE_SMART, NVME_AEI_TEMPERATURE, 0x02));
	/* Cool, then hot again: masked (the SMART log was not read). */
	assert_int_equal(set_feature(0x04, 343), ST_OK);
	assert_int_equal(get_log_rae(0x02, 128, 0, true), ST_OK);
	assert_int_equal(d[0], 0);
	aer = post_aer();
	assert_int_equal(set_feature(0x04, 300), ST_OK);
	assert_true(cq_empty(0));
	/* Reading the log with RAE 0 clears the event: it is not reported. */
	assert_int_equal(get_log(0x02, 128, 0), ST_OK);
	assert_int_equal(d[0], 0x02);
	assert_true(cq_empty(0));
	/* Unmasked now: the next rising edge completes the AER, after the
	 * Set Features that caused it. */
	assert_int_equal(set_feature(0x04, 343), ST_OK);
	queue_cmd(0, &sf);
	ring(0);
	assert_int_equal(reap(0, &cid), ST_OK);
	assert_int_equal(cid, sf.cid);
	assert_int_equal(reap(0, &cid), ST_OK);
	assert_int_equal(cid, aer);
	assert_int_equal(last_dw0, NVME_AE_DW0(NVME_AE_SMART, NVME_AEI_TEMPERATURE, 0x02));
	/* The under threshold (THSEL 1) counts too; other sensors do not exist. */
	assert_int_equal(set_feature(0x04, 343), ST_OK);
	assert_int_equal(set_feature(0x04, 330 | 1u << 20), ST_OK);
	assert_int_equal(get_feature_dw11(0x04, 1u << 20), ST_OK);
	assert_int_equal(last_dw0, 330);
	assert_int_equal(get_log(0x02, 128, 0), ST_OK);
	assert_int_equal(d[0], 0x02);
	assert_int_equal(set_feature(0x04, 300 | 1u << 16), ST_BAD_FIELD); /* sensor 1 */
	assert_int_equal(set_feature(0x04, 300 | 2u << 20), ST_BAD_FIELD); /* THSEL 2 */
	assert_int_equal(get_feature_dw11(0x04, 9u << 16), ST_BAD_FIELD);
	/* AEC bit 1 clear: the warning, no event. */
	assert_int_equal(set_feature(0x04, 0 | 1u << 20), ST_OK);
	assert_int_equal(set_feature(0x0b, 0), ST_OK);
	aer = post_aer();
	assert_int_equal(set_feature(0x04, 300), ST_OK);
	assert_true(cq_empty(0));
	/* A reset drops the AER and restores the thresholds. */
	reset(NULL);
	assert_int_equal(get_log(0x02, 128, 0), ST_OK);
	assert_int_equal(d[0], 0);
	assert_true(cq_empty(0));
}

/* ---- Abort ---- */

static unsigned abort_cmd(unsigned sqid, uint16_t cid)
{
	return submit(0, (struct nvme_sqe){.opc = 0x08, .cdw10 = sqid | (uint32_t)cid << 16});
}

static void test_abort_admin(void **state)
{
	struct nvme_sqe a = {.opc = 0x08}, id = {.opc = 0x06, .prp1 = ID_GPA, .cdw10 = 1};
	uint16_t cid, aer;

	(void)state;
	/* The command after the Abort in the same doorbell is still in the
	 * SQ: it completes with Command Abort Requested and never runs. */
	a.cdw10 = (uint32_t)(q[0].cid + 1) << 16;
	memset(hva(ID_GPA), 0xee, PAGE);
	queue_cmd(0, &a);
	queue_cmd(0, &id);
	ring(0);
	assert_int_equal(reap(0, &cid), ST_OK);
	assert_int_equal(cid, a.cid);
	assert_int_equal(last_dw0 & 1, 0);
	assert_int_equal(reap(0, &cid), ST_ABORT_REQ);
	assert_int_equal(cid, id.cid);
	assert_int_equal(hva(ID_GPA)[0], 0xee);
	/* A held AER completes as aborted, before the Abort does. */
	aer = post_aer();
	a = (struct nvme_sqe){.opc = 0x08, .cdw10 = (uint32_t)aer << 16};
	queue_cmd(0, &a);
	ring(0);
	assert_int_equal(reap(0, &cid), ST_ABORT_REQ);
	assert_int_equal(cid, aer);
	assert_int_equal(reap(0, &cid), ST_OK);
	assert_int_equal(cid, a.cid);
	assert_int_equal(last_dw0 & 1, 0);
	/* Nothing to abort: finished, unknown, or no such queue. */
	assert_int_equal(abort_cmd(0, aer), ST_OK);
	assert_int_equal(last_dw0 & 1, 1);
	assert_int_equal(abort_cmd(1, 0), ST_OK);
	assert_int_equal(last_dw0 & 1, 1);
	assert_int_equal(abort_cmd(MAXQ + 1, 0), ST_OK);
	assert_int_equal(last_dw0 & 1, 1);
	assert_int_equal(abort_cmd(0xffff, 0xffff), ST_OK);
	assert_int_equal(last_dw0 & 1, 1);
	assert_int_equal(identify(1, 0), ST_OK);
}

/* I/O queue 1 with a 4-entry CQ and 16-entry SQ, and 8 reads rung at
 * once: the CQ takes 3, the thread stalls, 5 commands stay in the SQ. */
static void stalled_queue(void)
{
	assert_int_equal(create_cq(1, 4, 1, true), ST_OK);
	assert_int_equal(create_sq(1, 16, 1), ST_OK);
	q[1] =
	    (struct drvq){.sq = SQ_GPA(1), .cq = CQ_GPA(1), .size = 16, .cqsize = 4, .phase = true};
	for (unsigned i = 0; i < 8; i++) {
		struct nvme_sqe c = rw(READ, i, 1, DATA_GPA, 0);

		queue_cmd(1, &c);
	}
	ring(1);
	for (int i = 0; i < 5000 && !(hva(CQ_GPA(1))[2 * 16 + 14] & 1); i++)
		usleep(1000);
	assert_true(hva(CQ_GPA(1))[2 * 16 + 14] & 1);
	usleep(10000);
	assert_false(hva(CQ_GPA(1))[3 * 16 + 14] & 1);
}

static void test_abort_io(void **state)
{
	unsigned st[8];
	uint16_t cid;

	(void)state;
	stalled_queue();
	/* Command 6 waits in the SQ: aborted (twice is still aborted). */
	assert_int_equal(abort_cmd(1, 6), ST_OK);
	assert_int_equal(last_dw0 & 1, 0);
	assert_int_equal(abort_cmd(1, 6), ST_OK);
	assert_int_equal(last_dw0 & 1, 0);
	/* Command 1 has completed; 99 was never submitted. */
	assert_int_equal(abort_cmd(1, 1), ST_OK);
	assert_int_equal(last_dw0 & 1, 1);
	assert_int_equal(abort_cmd(1, 99), ST_OK);
	assert_int_equal(last_dw0 & 1, 1);
	/* Consuming the CQ lets the rest through; 6 reports the abort. */
	for (unsigned i = 0; i < 8; i++) {
		unsigned s = reap(1, &cid);

		assert_true(cid < 8);
		st[cid] = s;
	}
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(st[i], i == 6 ? ST_ABORT_REQ : ST_OK);
	assert_true(cq_empty(1));
	/* Slot 6 is free again: a new command there (after a wrap) runs. */
	for (unsigned i = 0; i < 16; i++)
		assert_int_equal(submit(1, rw(READ, i, 1, DATA_GPA, 0)), ST_OK);
}

/* ---- queue deletion with commands outstanding ---- */

/* Delete SQ 1 while its CQ is full: the completions posted stay, the
 * commands still in the SQ are implicitly aborted, nothing hangs, and
 * nothing is posted after the Delete completes. */
static void test_sq_delete_stalled(void **state)
{
	(void)state;
	stalled_queue();
	assert_int_equal(abort_cmd(1, 5), ST_OK);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x00, .cdw10 = 1}), ST_OK);
	usleep(10000);
	assert_false(hva(CQ_GPA(1))[3 * 16 + 14] & 1);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(reap(1, NULL), ST_OK);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x04, .cdw10 = 1}), ST_OK);
	memset(hva(CQ_GPA(1)), 0, PAGE);
	io_queue(1, 16);
	assert_alive();
}

/* Delete SQ 1 with reads and DSMs in the back end: each fetched command
 * gets exactly one completion (its result, or Aborted due to SQ
 * Deletion for a DSM stopped between ranges) before the Delete's own. */
static void test_sq_delete_inflight(void **state)
{
	struct nvme_dsm_range *r = (void *)hva(ID_GPA);
	unsigned posted = 0, max_sqhd = 0;

	(void)state;
	io_queue(1, QSZ);
	for (unsigned i = 0; i < 15; i++)
		put64(LIST_GPA + 8ull * i, DATA2_GPA + (i + 1) * PAGE);
	for (unsigned i = 0; i < 256; i++)
		r[i] = (struct nvme_dsm_range){.nlb = 1, .slba = 1024 + 2 * i};
	for (unsigned i = 0; i < 48; i++) {
		struct nvme_sqe c = rw(READ, (i * 128) % (NLBAS - 128), 128, DATA2_GPA, LIST_GPA);

		if (i % 4 == 3)
			c = (struct nvme_sqe){
			    .opc = 0x09, .nsid = 1, .prp1 = ID_GPA, .cdw10 = 255, .cdw11 = 4};
		queue_cmd(1, &c);
	}
	ring(1);
	for (int i = 0; i < 5000 && !(hva(CQ_GPA(1))[14] & 1); i++)
		usleep(100);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x00, .cdw10 = 1}), ST_OK);
	for (const uint8_t *e = hva(CQ_GPA(1)); posted < QSZ && (e[14] & 1); e += 16) {
		uint16_t sf, sqhd;

		memcpy(&sf, e + 14, 2);
		memcpy(&sqhd, e + 8, 2);
		assert_true((sf & 0x7fe) == ST_OK || (sf & 0x7fe) == ST_SQ_DELETED);
		max_sqhd = sqhd > max_sqhd ? sqhd : max_sqhd;
		posted++;
	}
	/* The last head reported is how many were fetched. */
	assert_true(posted > 0);
	assert_int_equal(posted, max_sqhd);
	usleep(20000);
	assert_false(hva(CQ_GPA(1) + 16ull * posted)[14] & 1);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x04, .cdw10 = 1}), ST_OK);
	memset(hva(CQ_GPA(1)), 0, PAGE);
	q[1].size = 0;
	assert_alive();
}

/* ---- queues ---- */

static void test_queue_create_errors(void **state)
{
	(void)state;
	/* CQ: bad ids, sizes, flags, vectors, memory. */
	assert_int_equal(create_cq(0, 16, 0, true), ST_BAD_QID);
	assert_int_equal(create_cq(MAXQ + 1, 16, 0, true), ST_BAD_QID);
	assert_int_equal(create_cq(0xffff, 16, 0, true), ST_BAD_QID);
	assert_int_equal(create_cq(1, 1, 0, true), ST_BAD_QSIZE);
	assert_int_equal(create_cq(1, QSZ + 1, 0, true), ST_BAD_QSIZE);
	assert_int_equal(create_cq(1, 0x10000, 0, true), ST_BAD_QSIZE);
	assert_int_equal(create_cq(1, 16, MAXQ + 1, true), ST_BAD_VECTOR);
	assert_int_equal(create_cq(1, 16, 0xffff, true), ST_BAD_VECTOR);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x05,
	                                             .prp1 = CQ_GPA(1),
	                                             .cdw10 = 1 | 15 << 16,
	                                             .cdw11 = 2}),
	                 ST_BAD_FIELD); /* not physically contiguous */
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x05,
	                                             .prp1 = CQ_GPA(1) + 8,
	                                             .cdw10 = 1 | 15 << 16,
	                                             .cdw11 = 3}),
	                 ST_BAD_FIELD);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x05,
	                                             .prp1 = RAM_END - PAGE,
	                                             .cdw10 = 1 | 511 << 16,
	                                             .cdw11 = 3}),
	                 ST_BAD_QSIZE); /* (over qsz first) */
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x05,
	                                             .prp1 = RAM_END - 0x200,
	                                             .cdw10 = 1 | 63 << 16,
	                                             .cdw11 = 3}),
	                 ST_BAD_FIELD); /* runs off the end of RAM */
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x05,
	                                             .prp1 = 0xfffffffffffff000ull,
	                                             .cdw10 = 1 | 63 << 16,
	                                             .cdw11 = 3}),
	                 ST_BAD_FIELD);
	assert_int_equal(create_cq(1, 16, 1, true), ST_OK);
	assert_int_equal(create_cq(1, 16, 1, true), ST_BAD_QID); /* exists */

	/* SQ: bad ids, missing CQ, sizes. */
	assert_int_equal(create_sq(0, 16, 1), ST_BAD_QID);
	assert_int_equal(create_sq(MAXQ + 1, 16, 1), ST_BAD_QID);
	assert_int_equal(create_sq(1, 16, 0), ST_CQ_INVALID);
	assert_int_equal(create_sq(1, 16, 2), ST_CQ_INVALID);
	assert_int_equal(create_sq(1, 16, 0xffff), ST_CQ_INVALID);
	assert_int_equal(create_sq(1, 1, 1), ST_BAD_QSIZE);
	assert_int_equal(create_sq(1, QSZ + 1, 1), ST_BAD_QSIZE);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x01,
	                                             .prp1 = 0x40000000,
	                                             .cdw10 = 1 | 15 << 16,
	                                             .cdw11 = 1 | 1 << 16}),
	                 ST_BAD_FIELD);
	assert_int_equal(create_sq(1, 16, 1), ST_OK);
	assert_int_equal(create_sq(1, 16, 1), ST_BAD_QID);

	/* Deletion: the CQ only after its SQs; unknown ids. */
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x04, .cdw10 = 1}), ST_BAD_QDELETE);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x00, .cdw10 = 2}), ST_BAD_QID);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x00, .cdw10 = 0}), ST_BAD_QID);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x04, .cdw10 = 0}), ST_BAD_QID);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x04, .cdw10 = 0xffff}), ST_BAD_QID);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x00, .cdw10 = 1}), ST_OK);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x00, .cdw10 = 1}), ST_BAD_QID);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x04, .cdw10 = 1}), ST_OK);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x04, .cdw10 = 1}), ST_BAD_QID);
	/* And again from scratch. */
	io_queue(1, 16);
	assert_alive();
}

/* ---- I/O ---- */

static void test_read_write_prp(void **state)
{
	uint8_t buf[3 * PAGE];

	(void)state;
	io_queue(1, QSZ);
	/* 8 LBAs from PRP1 with an offset, the rest through PRP2. */
	fill(DATA_GPA + 0x200, PAGE, 1);
	memcpy(buf, hva(DATA_GPA + 0x200), PAGE);
	assert_int_equal(submit(1, rw(WRITE, 16, 8, DATA_GPA + 0x200, DATA_GPA + 0x3000)), ST_OK);
	/* PRP2 holds the tail: move it there as the device reads it. */
	memset(hva(DATA_GPA), 0, 4 * PAGE);
	fill(DATA_GPA + 0x200, PAGE - 0x200, 2);
	fill(DATA_GPA + 0x3000, 0x200, 3);
	memcpy(buf, hva(DATA_GPA + 0x200), PAGE - 0x200);
	memcpy(buf + PAGE - 0x200, hva(DATA_GPA + 0x3000), 0x200);
	assert_int_equal(submit(1, rw(WRITE, 16, 8, DATA_GPA + 0x200, DATA_GPA + 0x3000)), ST_OK);
	{
		uint8_t got[PAGE];

		image_read(16 * 512, got, PAGE);
		assert_memory_equal(got, buf, PAGE);
	}
	/* Read it back through a single page and PRP1 only. */
	assert_int_equal(submit(1, rw(READ, 16, 8, DATA2_GPA, 0)), ST_OK);
	assert_memory_equal(hva(DATA2_GPA), buf, PAGE);
	/* 12 KiB + offset through a PRP list: 4 pages. */
	fill(DATA_GPA + 0x400, 3 * PAGE, 4);
	put64(LIST_GPA, DATA_GPA + 1 * PAGE);
	put64(LIST_GPA + 8, DATA_GPA + 2 * PAGE);
	put64(LIST_GPA + 16, DATA_GPA + 3 * PAGE);
	memcpy(buf, hva(DATA_GPA + 0x400), 3 * PAGE);
	assert_int_equal(submit(1, rw(WRITE, 100, 24, DATA_GPA + 0x400, LIST_GPA)), ST_OK);
	{
		uint8_t got[3 * PAGE];

		image_read(100 * 512, got, sizeof(got));
		assert_memory_equal(got, buf, sizeof(got));
	}
	/* Read into scattered pages (a list starting mid-page). */
	put64(LIST_GPA + 0x808, DATA2_GPA + 5 * PAGE);
	put64(LIST_GPA + 0x810, DATA2_GPA + 2 * PAGE);
	put64(LIST_GPA + 0x818, DATA2_GPA + 7 * PAGE);
	assert_int_equal(submit(1, rw(READ, 100, 24, DATA2_GPA + 0x100, LIST_GPA + 0x808)), ST_OK);
	assert_memory_equal(hva(DATA2_GPA + 0x100), buf, PAGE - 0x100);
	assert_memory_equal(hva(DATA2_GPA + 5 * PAGE), buf + PAGE - 0x100, PAGE);
	assert_memory_equal(hva(DATA2_GPA + 2 * PAGE), buf + 2 * PAGE - 0x100, PAGE);
	assert_memory_equal(hva(DATA2_GPA + 7 * PAGE), buf + 3 * PAGE - 0x100, 0x100);
	/* Flush, also with the broadcast namespace id. */
	assert_int_equal(submit(1, (struct nvme_sqe){.opc = 0x00, .nsid = 1}), ST_OK);
	assert_int_equal(submit(1, (struct nvme_sqe){.opc = 0x00, .nsid = 0xffffffff}), ST_OK);
	/* Last LBA. */
	assert_int_equal(submit(1, rw(READ, NLBAS - 1, 1, DATA2_GPA, 0)), ST_OK);
	/* SMART counts it. */
	assert_int_equal(get_log(0x02, 128, 0), ST_OK);
	assert_true(unit_le(hva(ID_GPA) + 64, 8) >= 4); /* reads */
	assert_true(unit_le(hva(ID_GPA) + 80, 8) >= 3); /* writes */
}

/* A 512 KiB (MDTS) transfer through a PRP list that chains to a second
 * list page. */
static void test_prp_list_chain(void **state)
{
	const unsigned pages = 128;
	uint64_t list2 = LIST_GPA + 2 * PAGE;
	uint8_t *got = malloc(512 << 10);

	(void)state;
	assert_non_null(got);
	io_queue(1, QSZ);
	fill(DATA_GPA, pages * PAGE, 9);
	/* PRP2 points at the last two entries of the first list page: one
	 * data page, then the link to list2 with the rest. */
	put64(LIST_GPA + 0xff0, DATA_GPA + PAGE);
	put64(LIST_GPA + 0xff8, list2);
	for (unsigned i = 2; i < pages; i++)
		put64(list2 + 8ull * (i - 2), DATA_GPA + i * PAGE);
	assert_int_equal(submit(1, rw(WRITE, 0, 1024, DATA_GPA, LIST_GPA + 0xff0)), ST_OK);
	image_read(0, got, 512 << 10);
	assert_memory_equal(got, hva(DATA_GPA), 512 << 10);
	free(got);
	/* One byte more is over MDTS. */
	assert_int_equal(submit(1, rw(WRITE, 0, 1025, DATA_GPA, LIST_GPA + 0xff0)), ST_BAD_FIELD);
	assert_int_equal(submit(1, rw(READ, 0, NLBAS, DATA_GPA, LIST_GPA)), ST_BAD_FIELD);
	/* The link itself must be qword aligned, and in RAM. */
	put64(LIST_GPA + 0xff8, RAM_END);
	assert_int_equal(submit(1, rw(READ, 0, 1024, DATA_GPA, LIST_GPA + 0xff0)), ST_DATA_XFER);
	put64(LIST_GPA + 0xff8, list2 + 4);
	assert_int_equal(submit(1, rw(READ, 0, 1024, DATA_GPA, LIST_GPA + 0xff0)), ST_PRP_OFFSET);
	/* A list that links to itself ends when the transfer is mapped. */
	for (unsigned i = 0; i < 511; i++)
		put64(LIST_GPA + 8ull * i, DATA_GPA);
	put64(LIST_GPA + 0xff8, LIST_GPA);
	assert_int_equal(submit(1, rw(READ, 0, 1024, DATA_GPA, LIST_GPA)), ST_OK);
	assert_int_equal(submit(1, rw(READ, 0, 1024, DATA_GPA, LIST_GPA + 0xff8)), ST_OK);
	assert_alive();
}

static void test_bad_prps(void **state)
{
	(void)state;
	io_queue(1, QSZ);
	/* PRP1 not dword aligned. */
	assert_int_equal(submit(1, rw(READ, 0, 1, DATA_GPA + 2, 0)), ST_PRP_OFFSET);
	assert_int_equal(submit(1, rw(WRITE, 0, 1, DATA_GPA + 1, 0)), ST_PRP_OFFSET);
	/* PRP2 as a data pointer must be page aligned. */
	assert_int_equal(submit(1, rw(READ, 0, 8, DATA_GPA + 0x200, DATA_GPA + 0x10)),
	                 ST_PRP_OFFSET);
	/* Outside RAM, or running off its end. */
	assert_int_equal(submit(1, rw(READ, 0, 1, 0x40000000, 0)), ST_DATA_XFER);
	assert_int_equal(submit(1, rw(READ, 0, 1, 0xfffffffffffffe00ull, 0)), ST_DATA_XFER);
	assert_int_equal(submit(1, rw(READ, 0, 1, 0, 0)), ST_DATA_XFER);
	assert_int_equal(submit(1, rw(READ, 0, 8, RAM_END - 0x200, RAM_END)), ST_DATA_XFER);
	assert_int_equal(submit(1, rw(READ, 0, 8, RAM_END - 0x200, 0)), ST_DATA_XFER);
	/* PRP list pointer outside RAM or not qword aligned. */
	assert_int_equal(submit(1, rw(READ, 0, 24, DATA_GPA, 0x40000000)), ST_DATA_XFER);
	assert_int_equal(submit(1, rw(READ, 0, 24, DATA_GPA, RAM_END - 8)), ST_DATA_XFER);
	assert_int_equal(submit(1, rw(READ, 0, 24, DATA_GPA, LIST_GPA + 4)), ST_PRP_OFFSET);
	/* List entries: unaligned, outside RAM, zero. */
	put64(LIST_GPA, DATA_GPA + PAGE);
	put64(LIST_GPA + 8, DATA_GPA + 2 * PAGE + 0x200);
	assert_int_equal(submit(1, rw(READ, 0, 24, DATA_GPA, LIST_GPA)), ST_PRP_OFFSET);
	put64(LIST_GPA + 8, RAM_END);
	assert_int_equal(submit(1, rw(READ, 0, 24, DATA_GPA, LIST_GPA)), ST_DATA_XFER);
	put64(LIST_GPA + 8, 0);
	assert_int_equal(submit(1, rw(READ, 0, 24, DATA_GPA, LIST_GPA)), ST_DATA_XFER);
	put64(LIST_GPA + 8, RAM_END - PAGE);
	assert_int_equal(submit(1, rw(READ, 0, 24, DATA_GPA, LIST_GPA)), ST_OK);
	/* The list runs off the end of RAM (its last entry links beyond). */
	put64(RAM_END - 8, RAM_END);
	assert_int_equal(submit(1, rw(READ, 0, 24, DATA_GPA, RAM_END - 8)), ST_DATA_XFER);
	assert_alive();
}

static void test_io_bad_commands(void **state)
{
	struct nvme_sqe c;

	(void)state;
	io_queue(1, QSZ);
	assert_int_equal(submit(1, (struct nvme_sqe){.opc = 0x55, .nsid = 1}), ST_BAD_OPCODE);
	assert_int_equal(submit(1, (struct nvme_sqe){.opc = 0xff, .nsid = 1}), ST_BAD_OPCODE);
	assert_int_equal(submit(1, (struct nvme_sqe){.opc = 0x04, .nsid = 1}), ST_BAD_OPCODE);
	/* Namespaces. */
	c = rw(READ, 0, 1, DATA_GPA, 0);
	c.nsid = 2;
	assert_int_equal(submit(1, c), ST_BAD_NS);
	c.nsid = 0;
	assert_int_equal(submit(1, c), ST_BAD_NS);
	c.nsid = 0xffffffff;
	assert_int_equal(submit(1, c), ST_BAD_NS);
	assert_int_equal(submit(1, (struct nvme_sqe){.opc = 0x00, .nsid = 3}), ST_BAD_NS);
	/* LBA ranges, with overflow. */
	assert_int_equal(submit(1, rw(READ, NLBAS, 1, DATA_GPA, 0)), ST_LBA_RANGE);
	assert_int_equal(submit(1, rw(READ, NLBAS - 1, 2, DATA_GPA, DATA_GPA + PAGE)),
	                 ST_LBA_RANGE);
	assert_int_equal(submit(1, rw(WRITE, ~0ull, 1, DATA_GPA, 0)), ST_LBA_RANGE);
	assert_int_equal(submit(1, rw(WRITE, ~0ull - 2, 8, DATA_GPA, DATA_GPA + PAGE)),
	                 ST_LBA_RANGE);
	/* Over MDTS. */
	assert_int_equal(submit(1, rw(READ, 0, 1025, DATA_GPA, LIST_GPA)), ST_BAD_FIELD);
	/* Fused / SGL. */
	c = rw(READ, 0, 1, DATA_GPA, 0);
	c.flags = 2;
	assert_int_equal(submit(1, c), ST_BAD_FIELD);
	c.flags = 0x80;
	assert_int_equal(submit(1, c), ST_BAD_FIELD);
	/* A command id reused while the first is in flight: both are fetched
	 * in one pass, before any I/O is submitted, so the second conflicts. */
	{
		struct nvme_sqe a = rw(READ, 0, 8, DATA_GPA, 0), b = rw(READ, 8, 8, DATA2_GPA, 0);
		uint16_t cid1, cid2;
		unsigned st1, st2;

		queue_cmd(1, &a);
		q[1].cid--;
		queue_cmd(1, &b);
		ring(1);
		st1 = reap(1, &cid1);
		st2 = reap(1, &cid2);
		assert_int_equal(cid1, cid2);
		assert_true((st1 == ST_OK && st2 == ST_CID_CONFLICT) ||
		            (st1 == ST_CID_CONFLICT && st2 == ST_OK));
	}
	/* Write Zeroes / DSM out of range. */
	c = rw(0x08, NLBAS - 4, 8, 0, 0);
	assert_int_equal(submit(1, c), ST_LBA_RANGE);
	assert_alive();
}

static void test_dsm_write_zeroes(void **state)
{
	uint8_t got[16 * 512], zero[8 * 512] = {0};
	struct stat st1, st2;

	(void)state;
	io_queue(1, QSZ);
	/* 64 KiB of data, then deallocate the first 32 KiB. */
	fill(DATA_GPA, 16 * PAGE, 5);
	for (unsigned i = 0; i < 15; i++)
		put64(LIST_GPA + 8ull * i, DATA_GPA + (i + 1) * PAGE);
	assert_int_equal(submit(1, rw(WRITE, 256, 128, DATA_GPA, LIST_GPA)), ST_OK);
	assert_int_equal(submit(1, (struct nvme_sqe){.opc = 0x00, .nsid = 1}), ST_OK);
	assert_int_equal(fstat(imgfd, &st1), 0);
	/* Two ranges, one empty. */
	memset(hva(ID_GPA), 0, 48);
	put64(ID_GPA + 4, 8);        /* NLB */
	put64(ID_GPA + 8, 256);      /* SLBA */
	put64(ID_GPA + 16 + 8, 400); /* second range: nlb 0 */
	assert_int_equal(
	    submit(
	        1,
	        (struct nvme_sqe){.opc = 0x09, .nsid = 1, .prp1 = ID_GPA, .cdw10 = 1, .cdw11 = 4}),
	    ST_OK);
	image_read(256 * 512, got, sizeof(got));
	assert_memory_equal(got, zero, sizeof(zero));
	assert_memory_equal(got + 8 * 512, hva(DATA_GPA) + 8 * 512, 8 * 512);
	assert_int_equal(fstat(imgfd, &st2), 0);
	assert_true(st2.st_blocks < st1.st_blocks);
	/* Without the deallocate attribute: a hint, nothing changes. */
	assert_int_equal(
	    submit(
	        1,
	        (struct nvme_sqe){.opc = 0x09, .nsid = 1, .prp1 = ID_GPA, .cdw10 = 0, .cdw11 = 1}),
	    ST_OK);
	/* A range beyond the namespace, a list outside RAM. */
	put64(ID_GPA + 8, NLBAS - 1);
	assert_int_equal(
	    submit(1, (struct nvme_sqe){.opc = 0x09, .nsid = 1, .prp1 = ID_GPA, .cdw11 = 4}),
	    ST_LBA_RANGE);
	put64(ID_GPA + 8, ~0ull);
	assert_int_equal(
	    submit(1, (struct nvme_sqe){.opc = 0x09, .nsid = 1, .prp1 = ID_GPA, .cdw11 = 4}),
	    ST_LBA_RANGE);
	assert_int_equal(
	    submit(1,
	           (struct nvme_sqe){
	               .opc = 0x09, .nsid = 1, .prp1 = RAM_END - 16, .cdw10 = 255, .cdw11 = 4}),
	    ST_DATA_XFER);
	/* Write Zeroes, with and without deallocate. */
	assert_int_equal(submit(1, rw(0x08, 256 + 64, 32, 0, 0)), ST_OK);
	{
		struct nvme_sqe c = rw(0x08, 256 + 96, 32, 0, 0);

		c.cdw12 |= 1u << 25;
		assert_int_equal(submit(1, c), ST_OK);
	}
	image_read(256 * 512 + 64 * 512, got, sizeof(got));
	assert_memory_equal(got, zero, sizeof(zero));
	assert_memory_equal(got + sizeof(zero), zero, sizeof(zero));
	/* Read of deallocated blocks returns zeros. */
	memset(hva(DATA2_GPA), 0xaa, PAGE);
	assert_int_equal(submit(1, rw(READ, 256, 8, DATA2_GPA, 0)), ST_OK);
	assert_memory_equal(hva(DATA2_GPA), zero, PAGE);
}

/* Two queue pairs in flight at once, each with its own thread. */
static void test_two_queues(void **state)
{
	uint8_t got[PAGE];
	uint16_t cid;

	(void)state;
	io_queue(1, QSZ);
	io_queue(2, QSZ);
	for (unsigned i = 0; i < 16; i++) {
		struct nvme_sqe c = rw(WRITE, 512 + 8 * i, 8, DATA_GPA + i * PAGE, 0);

		fill(DATA_GPA + i * PAGE, PAGE, 20 + i);
		queue_cmd(1 + i % 2, &c);
	}
	ring(1);
	ring(2);
	for (unsigned i = 0; i < 16; i++)
		assert_int_equal(reap(1 + i % 2, &cid), ST_OK);
	for (unsigned i = 0; i < 16; i++) {
		image_read((512 + 8 * i) * 512ull, got, PAGE);
		assert_memory_equal(got, hva(DATA_GPA + i * PAGE), PAGE);
	}
	/* A wrapped queue (more commands than entries) keeps working. */
	for (unsigned i = 0; i < QSZ + 10; i++)
		assert_int_equal(submit(2, rw(READ, 8 * (i % 64), 8, DATA2_GPA, 0)), ST_OK);
}

/* ---- doorbells, interrupts, shutdown, reset ---- */

static void test_doorbell_garbage(void **state)
{
	(void)state;
	io_queue(1, 16);
	wr(0x1000 + 8 * 3, 4, 1); /* SQ 3 does not exist */
	wr(0x1000 + 8 * 3 + 4, 4, 1);
	wr(0x1000 + 8 * MAXQ + 8, 4, 1); /* beyond maxq */
	wr(0x3ffc, 4, 0xffffffff);       /* end of the BAR */
	wr(0x1008, 4, 16);               /* tail == size */
	wr(0x1008, 4, 0xffff);
	wr(0x100c, 4, 100);          /* CQ head beyond the queue */
	wr(0x1000, 4, QENTRIES + 3); /* admin SQ tail beyond */
	wr(0x1004, 4, QENTRIES);
	wr(0x1008, 2, 1); /* narrow and unaligned writes */
	wr(0x1009, 1, 1);
	wr(0x1002, 2, 1);
	wr(0x14, 1, 0); /* narrow CC write: ignored */
	wr(0x15, 2, 0);
	assert_int_equal(rd(0x1c, 4), 1);
	assert_int_equal(identify(1, 0), ST_OK);
	assert_alive();
}

static bool intx_pending(void)
{
	return pci_cfg_read(0, 3, 0, PCIR_STATUS, 2) & PCIM_STATUS_INTR;
}

static void test_intx(void **state)
{
	struct nvme_sqe c = {.opc = 0x06, .prp1 = ID_GPA, .cdw10 = 1};

	(void)state;
	assert_false(intx_pending());
	queue_cmd(0, &c);
	ring(0);
	assert_true(intx_pending());
	/* Masked through INTMS, unmasked through INTMC. */
	wr(0x0c, 4, 1);
	assert_int_equal(rd(0x0c, 4), 1);
	assert_false(intx_pending());
	wr(0x10, 4, 1);
	assert_int_equal(rd(0x10, 4), 0);
	assert_true(intx_pending());
	/* The CQ head doorbell consumes the entry: deasserted. */
	assert_int_equal(reap(0, NULL), ST_OK);
	assert_false(intx_pending());
	/* An I/O CQ without IEN never interrupts. */
	assert_int_equal(create_cq(1, 16, 0, false), ST_OK);
	assert_int_equal(create_sq(1, 16, 1), ST_OK);
	q[1] = (struct drvq){.sq = SQ_GPA(1), .cq = CQ_GPA(1), .size = 16, .phase = true};
	c = rw(READ, 0, 1, DATA_GPA, 0);
	queue_cmd(1, &c);
	ring(1);
	for (int i = 0; i < 5000 && !(hva(CQ_GPA(1))[14] & 1); i++)
		usleep(1000);
	assert_false(intx_pending());
	assert_int_equal(reap(1, NULL), ST_OK);
}

/* Milliseconds until MSI-X vector `vec`'s pending bit is set (5000 when
 * it never is), counted from `t0` (monotonic ns). */
static uint64_t pba_wait_ms(unsigned vec, uint64_t t0)
{
	for (int i = 0;
	     i < 5000 && !(__atomic_load_n(&f->msix.pba[0], __ATOMIC_ACQUIRE) & (1ull << vec)); i++)
		usleep(200);
	if (!(__atomic_load_n(&f->msix.pba[0], __ATOMIC_ACQUIRE) & (1ull << vec)))
		return 5000;
	return (monotonic_ns() - t0) / 1000000;
}

static void clear_pba(void)
{
	__atomic_store_n(&f->msix.pba[0], 0, __ATOMIC_RELEASE);
}

/* MSI-X on with every vector masked: a completion sets its pending bit. */
static void test_msix_pending(void **state)
{
	(void)state;
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0x8000);
	assert_true(pci_msix_enabled(f));
	io_queue(2, 16);
	assert_int_equal(submit(2, rw(READ, 0, 1, DATA_GPA, 0)), ST_OK);
	/* The interrupt follows the completion at the end of the thread's round. */
	assert_true(pba_wait_ms(2, monotonic_ns()) < 5000);
	assert_true(f->msix.pba[0] & 1); /* admin CQ: vector 0 */
	assert_false(intx_pending());
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0);
}

/*
 * Interrupt coalescing with MSI-X (every vector masked, so an interrupt
 * sets its pending bit): THR 3 (4 entries), TIME 255 (25.5 ms).  Being
 * late is never a failure here; an interrupt before the aggregation time
 * is, where it should wait; where it should not wait, it must come well
 * before that time.
 */
static void test_coalescing(void **state)
{
	struct nvme_sqe c;
	uint64_t t0;

	(void)state;
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0x8000);
	io_queue(1, QSZ); /* vector 1 */
	/* Interrupt Vector Configuration: vectors of I/O CQs only; the
	 * admin vector reads as coalescing disabled. */
	assert_int_equal(set_feature(0x09, 2), ST_BAD_FIELD);
	assert_int_equal(set_feature(0x09, MAXQ + 1), ST_BAD_FIELD);
	assert_int_equal(set_feature(0x09, 0xffff), ST_BAD_FIELD);
	assert_int_equal(get_feature_dw11(0x09, 0), ST_OK);
	assert_int_equal(last_dw0, 1u << 16);
	assert_int_equal(get_feature_dw11(0x09, 1), ST_OK);
	assert_int_equal(last_dw0, 1);
	assert_int_equal(get_feature_dw11(0x09, MAXQ + 1), ST_BAD_FIELD);
	assert_int_equal(set_feature(0x08, 3 | 255u << 8), ST_OK);
	assert_int_equal(get_feature(0x08), ST_OK);
	assert_int_equal(last_dw0, 0xff03);
	/* One completion: its interrupt waits for the aggregation time. */
	clear_pba();
	t0 = monotonic_ns();
	assert_int_equal(submit(1, rw(READ, 0, 1, DATA_GPA, 0)), ST_OK);
	assert_true(pba_wait_ms(1, t0) >= 25);
	/* Four at once reach the threshold. */
	clear_pba();
	t0 = monotonic_ns();
	for (unsigned i = 0; i < 4; i++) {
		c = rw(READ, i, 1, DATA_GPA, 0);
		queue_cmd(1, &c);
	}
	ring(1);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(reap(1, NULL), ST_OK);
	assert_true(pba_wait_ms(1, t0) < 20);
	/* An error is not held back. */
	usleep(30000); /* the first batch's timer has fired */
	clear_pba();
	t0 = monotonic_ns();
	assert_int_equal(submit(1, (struct nvme_sqe){.opc = 0x55, .nsid = 1}), ST_BAD_OPCODE);
	assert_true(pba_wait_ms(1, t0) < 20);
	/* The admin CQ is never coalesced. */
	clear_pba();
	t0 = monotonic_ns();
	assert_int_equal(identify(1, 0), ST_OK);
	assert_true(pba_wait_ms(0, t0) < 20);
	/* Coalescing Disable on vector 1. */
	assert_int_equal(set_feature(0x09, 1 | 1u << 16), ST_OK);
	assert_int_equal(get_feature_dw11(0x09, 1), ST_OK);
	assert_int_equal(last_dw0, 1 | 1u << 16);
	clear_pba();
	t0 = monotonic_ns();
	assert_int_equal(submit(1, rw(READ, 0, 1, DATA_GPA, 0)), ST_OK);
	assert_true(pba_wait_ms(1, t0) < 20);
	/* Held entries are signalled when their SQ is deleted. */
	assert_int_equal(set_feature(0x09, 1), ST_OK);
	clear_pba();
	assert_int_equal(submit(1, rw(READ, 0, 1, DATA_GPA, 0)), ST_OK);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x00, .cdw10 = 1}), ST_OK);
	t0 = monotonic_ns();
	assert_true(pba_wait_ms(1, t0) < 20);
	/* A reset restores the defaults. */
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0);
	reset(NULL);
	assert_int_equal(get_feature(0x08), ST_OK);
	assert_int_equal(last_dw0, 0);
}

static void test_shutdown_and_reset(void **state)
{
	(void)state;
	io_queue(1, 16);
	fill(DATA_GPA, PAGE, 33);
	assert_int_equal(submit(1, rw(WRITE, 40, 8, DATA_GPA, 0)), ST_OK);
	/* Normal shutdown: flushed, SHST complete; the admin queue stops. */
	wr(0x14, 4, CC_READY_BITS | 1 | (1u << 14));
	assert_int_equal(rd(0x1c, 4) & 0xc, 0x8);
	/* Disable: everything goes; ids are free again after enabling. */
	wr(0x14, 4, 0);
	assert_int_equal(rd(0x1c, 4), 0);
	memset(q, 0, sizeof(q));
	q[0] = (struct drvq){.sq = ASQ_GPA, .cq = ACQ_GPA, .size = QENTRIES, .phase = true};
	memset(hva(ACQ_GPA), 0, PAGE);
	enable();
	assert_int_equal(rd(0x1c, 4), 1);
	assert_int_equal(submit(0, (struct nvme_sqe){.opc = 0x00, .cdw10 = 1}), ST_BAD_QID);
	io_queue(1, 16);
	assert_int_equal(submit(1, rw(READ, 40, 8, DATA2_GPA, 0)), ST_OK);
	assert_memory_equal(hva(DATA2_GPA), hva(DATA_GPA), PAGE);
	/* Reset with I/O queues live, and abrupt shutdown. */
	wr(0x14, 4, CC_READY_BITS | 1 | (2u << 14));
	assert_int_equal(rd(0x1c, 4) & 0xc, 0x8);
	wr(0x14, 4, CC_READY_BITS | 1);
	assert_int_equal(rd(0x1c, 4) & 0xc, 0);
}

/* A full CQ holds further commands back until the host frees entries. */
static void test_cq_full(void **state)
{
	unsigned seen = 0;
	uint16_t cid;

	(void)state;
	assert_int_equal(create_cq(1, 4, 1, true), ST_OK);
	assert_int_equal(create_sq(1, 16, 1), ST_OK);
	q[1] = (struct drvq){.sq = SQ_GPA(1), .cq = CQ_GPA(1), .size = 16, .phase = true};
	for (unsigned i = 0; i < 8; i++) {
		struct nvme_sqe c = rw(READ, i, 1, DATA_GPA, 0);

		queue_cmd(1, &c);
	}
	ring(1);
	usleep(100000);
	/* At most size - 1 entries are posted. */
	assert_int_equal(hva(CQ_GPA(1))[3 * 16 + 14] & 1, 0);
	/* Consume them as a host does (the CQ is 4 entries). */
	q[1].cq = CQ_GPA(1);
	for (unsigned i = 0; i < 8; i++) {
		struct drvq *d = &q[1];
		uint8_t *e;
		int n;

		for (n = 0; n < 5000; n++) {
			e = hva(d->cq + 16ull * d->head);
			if ((e[14] & 1) == d->phase)
				break;
			usleep(1000);
		}
		assert_true(n < 5000);
		memcpy(&cid, e + 12, 2);
		assert_true(cid < 8);
		seen |= 1u << cid; /* completions may come in any order */
		d->head = (d->head + 1) % 4;
		if (d->head == 0)
			d->phase = !d->phase;
		wr(0x100c, 4, d->head);
	}
	assert_int_equal(seen, 0xff);
}

/* The second controller: ram=2,sectsz=4096,dsm=disable,maxq=1. */
static void test_ram_4k_no_dsm(void **state)
{
	const uint8_t *d = hva(ID_GPA);
	uint64_t bar1 = bar;

	(void)state;
	wr(0x14, 4, 0); /* the first controller rests */
	bar = pci_get(1)->bar[0].addr;
	reset(NULL);
	assert_int_equal(identify(0, 1), ST_OK);
	assert_int_equal(unit_le(d, 8), (2u << 20) / 4096);
	assert_int_equal(d[128 + 2], 12); /* LBADS: 4 KiB */
	assert_int_equal(d[33], 0);       /* DLFEAT */
	assert_int_equal(identify(1, 0), ST_OK);
	assert_int_equal(unit_le(d + 520, 2) & 0x04, 0); /* ONCS: no DSM */
	assert_int_equal(set_feature(0x07, 7 | 7 << 16), ST_OK);
	assert_int_equal(last_dw0, 0); /* maxq=1 */
	assert_int_equal(create_cq(2, 16, 1, true), ST_BAD_QID);
	io_queue(1, 16);
	/* 8 KiB = two LBAs through PRP1 + PRP2, read back. */
	fill(DATA_GPA, 2 * PAGE, 44);
	assert_int_equal(submit(1, rw(WRITE, 511, 2, DATA_GPA, DATA_GPA + PAGE)), ST_LBA_RANGE);
	assert_int_equal(submit(1, rw(WRITE, 510, 2, DATA_GPA, DATA_GPA + PAGE)), ST_OK);
	assert_int_equal(submit(1, rw(READ, 510, 2, DATA2_GPA, DATA2_GPA + PAGE)), ST_OK);
	assert_memory_equal(hva(DATA2_GPA), hva(DATA_GPA), 2 * PAGE);
	/* 128 LBAs of 4 KiB is 512 KiB (MDTS); 129 is over. */
	assert_int_equal(submit(1, rw(READ, 0, 129, DATA_GPA, LIST_GPA)), ST_BAD_FIELD);
	/* Dataset Management is not offered. */
	assert_int_equal(
	    submit(1, (struct nvme_sqe){.opc = 0x09, .nsid = 1, .prp1 = ID_GPA, .cdw11 = 4}),
	    ST_BAD_OPCODE);
	wr(0x14, 4, 0);
	bar = bar1;
	reset(NULL);
}

/* ---- counters ---- */

/* The controllers' disks are named in slot order: disk0 is 0:3.0's file,
 * disk1 0:4.0's memory disk.  A read, a write and a flush move disk0's
 * counters by one each, and the bytes by the transfers. */
static void test_counters(void **state)
{
	struct unit_counters before, after, other0, other1;
	const struct unit_hist *lat0, *lat1;

	(void)state;
	io_queue(1, QSZ);
	assert_true(unit_counters_read(COUNTER_DISK, "disk0", &before));
	assert_true(unit_counters_read(COUNTER_DISK, "disk1", &other0));
	assert_false(unit_counters_read(COUNTER_DISK, "disk2", &other1));
	fill(DATA_GPA, 2 * PAGE, 9);
	assert_int_equal(submit(1, rw(WRITE, 40, 16, DATA_GPA, DATA_GPA + PAGE)), ST_OK);
	assert_int_equal(submit(1, rw(READ, 40, 8, DATA2_GPA, 0)), ST_OK);
	assert_int_equal(submit(1, (struct nvme_sqe){.opc = 0x00, .nsid = 1}), ST_OK);
	assert_true(unit_counters_read(COUNTER_DISK, "disk0", &after));
	assert_false(after.duplicate);
#define DELTA(key) (unit_counter(&after, key) - unit_counter(&before, key))
	assert_int_equal(DELTA("reads_total"), 1);
	assert_int_equal(DELTA("writes_total"), 1);
	assert_int_equal(DELTA("flushes_total"), 1);
	assert_int_equal(DELTA("read_bytes_total"), 8 * 512);
	assert_int_equal(DELTA("write_bytes_total"), 16 * 512);
	assert_int_equal(DELTA("errors_total"), 0);
	assert_int_equal(DELTA("discards_total"), 0);
#undef DELTA
	lat0 = unit_counter_hist(&before, "latency_us");
	lat1 = unit_counter_hist(&after, "latency_us");
	assert_non_null(lat0);
	assert_non_null(lat1);
	assert_int_equal(lat1->count[LAT_HIST_BUCKETS - 1] - lat0->count[LAT_HIST_BUCKETS - 1], 3);
	/* The other disk saw nothing of it. */
	assert_true(unit_counters_read(COUNTER_DISK, "disk1", &other1));
	assert_int_equal(unit_counter(&other1, "reads_total"),
	                 unit_counter(&other0, "reads_total"));
	assert_int_equal(unit_counter(&other1, "writes_total"),
	                 unit_counter(&other0, "writes_total"));
}

/* ---- options ---- */

static int try_options(const char *conf, char *err, size_t errlen)
{
	static struct pci_func funcs[32];
	static unsigned used;
	const struct pci_devemu *de = pci_devemu_find("nvme");
	struct config_node *node;
	char path[64];
	struct pci_func *pf;

	if (used == ARRAY_LEN(funcs))
		return -2;
	pf = &funcs[used++];
	snprintf(path, sizeof(path), "unit.nvme%u", used);
	node = config_create_node(path);
	if (de == NULL || node == NULL || de->legacy_config(node, conf, err, errlen) < 0)
		return -1;
	pf->m = &m;
	pf->de = de;
	pf->intx_gsi = -1;
	pf->slot = 9;
	pthread_mutex_init(&pf->cfg_lock, NULL);
	for (int i = 0; i <= PCI_ROM_BAR; i++) {
		pf->bar[i].owner = pf;
		pf->bar[i].idx = i;
	}
	return de->init(&m, pf, node, err, errlen);
}

static void test_options(void **state)
{
	static const struct {
		const char *conf, *msg;
	} bad[] = {
	    {"ram=4,maxq=0", "maxq"},
	    {"ram=4,maxq=65", "maxq"},
	    {"ram=4,qsz=1", "qsz"},
	    {"ram=4,qsz=65537", "qsz"},
	    {"ram=4,ioslots=0", "ioslots"},
	    {"ram=4,sectsz=1024", "sectsz"},
	    {"ram=4,sectsz=abc", "sectsz"},
	    {"ram=4,dsm=maybe", "dsm"},
	    {"ram=4,eui64=x", "eui64"},
	    {"ram=4,ser=123456789012345678901", "ser"},
	    {"ram=4,bogus=1", "unknown option 'bogus'"},
	    {"ram=0", "ram"},
	    {"ram=lots", "ram"},
	    {"/nonexistent/disk.img", "cannot open"},
	    {"/dev/null,ram=4", "not both"},
	};
	char err[256];

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		err[0] = '\0';
		assert_int_equal(try_options(bad[i].conf, err, sizeof(err)), -1);
		assert_contains(err, bad[i].msg);
		assert_null(strchr(err, '\n'));
	}
	err[0] = '\0';
	assert_int_equal(try_options("ram=4,maxq=2,qsz=32,ioslots=4,sectsz=4096,ser=S1,"
	                             "eui64=0x1122334455667788,dsm=disable",
	                             err, sizeof(err)),
	                 0);
	assert_int_equal(try_options("ram=1,sectsz=8192,dsm=enable", err, sizeof(err)), 0);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup(fn, reset)
	const struct CMUnitTest tests[] = {
	    T(test_registers),
	    T(test_enable_bad_admin_queue),
	    T(test_identify),
	    T(test_features),
	    T(test_log_pages),
	    T(test_admin_bad_commands),
	    T(test_aer),
	    T(test_aer_error_events),
	    T(test_error_log_failed_commands),
	    T(test_aer_temperature),
	    T(test_abort_admin),
	    T(test_abort_io),
	    T(test_sq_delete_stalled),
	    T(test_sq_delete_inflight),
	    T(test_queue_create_errors),
	    T(test_read_write_prp),
	    T(test_prp_list_chain),
	    T(test_bad_prps),
	    T(test_io_bad_commands),
	    T(test_dsm_write_zeroes),
	    T(test_two_queues),
	    T(test_doorbell_garbage),
	    T(test_intx),
	    T(test_msix_pending),
	    T(test_coalescing),
	    T(test_shutdown_and_reset),
	    T(test_cq_full),
	    T(test_ram_4k_no_dsm),
	    T(test_counters),
	    T(test_options),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
