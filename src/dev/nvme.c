/*
 * NVMe controller with one namespace (sections cited are those of the NVM
 * Express Base Specification 2.0 and the NVM Command Set Specification
 * 1.0; the controller reports version 1.4, whose mandatory set is what it
 * implements), after bhyve's -s N,nvme,... options:
 *
 *   devpath|ram=MiB[,maxq=N][,qsz=N][,ioslots=N][,sectsz=512|4096|8192]
 *   [,ser=S][,eui64=N][,dsm=auto|enable|disable] plus the block options
 *   ro, nocache, direct, sync, nodelete (backend/blockif.h).
 *
 * BAR 0 (64-bit MMIO, 16 KiB) holds the controller registers (section 3.1)
 * and the doorbells (stride 4 bytes from 0x1000); BAR 4 the MSI-X table
 * and PBA, one vector per completion queue; INTx when MSI-X is off.
 *
 * The admin queue is served in the vCPU thread that rings its doorbell.
 * Each I/O submission queue has its own thread and blockif context: the
 * doorbell write (vCPU thread) stores the new tail and signals the
 * queue's eventfd; the thread fetches commands, maps their PRPs, submits
 * the I/O and posts completions.  A completion slot in the CQ is reserved
 * before a command is fetched, so a completion can always be posted.
 * After activity the thread busy-polls the tail for blockif_default_poll_us(), and
 * doorbell writes meanwhile skip the eventfd.
 *
 * Locks: `lock` (registers, admin queue) before `qlock` (write: queue
 * creation and deletion; read: doorbells), then a CQ's own lock, then
 * `intx_lock`.  Queue threads take only CQ locks and `intx_lock`.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend/blockif.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "dev/nvme.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/parse.h"

/* ---- limits and defaults ---- */

#define NVME_MAX_IOQ       64 /* I/O queue pairs at most (maxq) */
#define NVME_DEF_IOQ       16
#define NVME_DEF_QSZ       2048 /* entries per queue (qsz) */
#define NVME_MAX_QSZ       65536
#define NVME_DEF_IOSLOTS   128 /* commands in flight per I/O SQ (ioslots) */
#define NVME_MAX_IOSLOTS   1024
#define NVME_PAGE          4096u /* the only memory page size (CC.MPS = 0) */
#define NVME_MDTS          7     /* 2^7 pages = 512 KiB per command */
#define NVME_MAX_XFER      (NVME_PAGE << NVME_MDTS)
#define NVME_MAX_IOV       ((NVME_MAX_XFER / NVME_PAGE) + 1)
#define NVME_BAR0_SIZE     0x4000u
#define NVME_DOORBELL_BASE 0x1000u
#define NVME_MSIX_BAR      4
#define NVME_AER_MAX       4   /* AERL + 1 */
#define NVME_DSM_MAX       256 /* ranges per Dataset Management */
#define NVME_REAP_BATCH    64
#define NVME_NSID          1u

/* ---- controller registers (section 3.1) ---- */

#define REG_CAP        0x00
#define REG_VS         0x08
#define REG_INTMS      0x0c
#define REG_INTMC      0x10
#define REG_CC         0x14
#define REG_CSTS       0x1c
#define REG_NSSR       0x20
#define REG_AQA        0x24
#define REG_ASQ        0x28
#define REG_ACQ        0x30

#define CC_EN          (1u << 0)
#define CC_CSS(cc)     (((cc) >> 4) & 7)
#define CC_MPS(cc)     (((cc) >> 7) & 0xf)
#define CC_SHN(cc)     (((cc) >> 14) & 3)
#define CC_IOSQES(cc)  (((cc) >> 16) & 0xf)
#define CC_IOCQES(cc)  (((cc) >> 20) & 0xf)
#define CSTS_RDY       (1u << 0)
#define CSTS_CFS       (1u << 1)
#define CSTS_SHST_MASK (3u << 2)
#define CSTS_SHST_DONE (2u << 2)
#define NVME_VERSION   0x00010400u /* 1.4: what the command set here is */

/* ---- status codes (section 4.6.1.2): SF of the CQE without the phase ---- */

#define SCT_GENERIC          0
#define SCT_CMD              1
#define SCT_MEDIA            2
#define NVME_DNR             (1u << 15)
#define NVME_STATUS(sct, sc) ((uint16_t)(((sct) << 9) | ((sc) << 1)))
#define NVME_ERR(sct, sc)    ((uint16_t)(NVME_STATUS(sct, sc) | NVME_DNR))

#define ST_OK                0
#define ST_INVALID_OPCODE    NVME_ERR(SCT_GENERIC, 0x01)
#define ST_INVALID_FIELD     NVME_ERR(SCT_GENERIC, 0x02)
#define ST_CID_CONFLICT      NVME_ERR(SCT_GENERIC, 0x03)
#define ST_DATA_XFER         NVME_ERR(SCT_GENERIC, 0x04)
#define ST_INTERNAL          NVME_STATUS(SCT_GENERIC, 0x06)
#define ST_INVALID_NS        NVME_ERR(SCT_GENERIC, 0x0b)
#define ST_PRP_OFFSET        NVME_ERR(SCT_GENERIC, 0x13)
#define ST_NS_WRITE_PROT     NVME_ERR(SCT_GENERIC, 0x20)
#define ST_LBA_RANGE         NVME_ERR(SCT_GENERIC, 0x80)
#define ST_CQ_INVALID        NVME_ERR(SCT_CMD, 0x00)
#define ST_INVALID_QID       NVME_ERR(SCT_CMD, 0x01)
#define ST_INVALID_QSIZE     NVME_ERR(SCT_CMD, 0x02)
#define ST_AER_LIMIT         NVME_ERR(SCT_CMD, 0x05)
#define ST_INVALID_VECTOR    NVME_ERR(SCT_CMD, 0x08)
#define ST_INVALID_LOG       NVME_ERR(SCT_CMD, 0x09)
#define ST_INVALID_QDELETE   NVME_ERR(SCT_CMD, 0x0c)
#define ST_WRITE_FAULT       NVME_STATUS(SCT_MEDIA, 0x80)
#define ST_READ_ERROR        NVME_STATUS(SCT_MEDIA, 0x81)

/* ---- opcodes (sections 5 and NVM Command Set 3) ---- */

enum {
	ADM_DELETE_SQ = 0x00,
	ADM_CREATE_SQ = 0x01,
	ADM_GET_LOG = 0x02,
	ADM_DELETE_CQ = 0x04,
	ADM_CREATE_CQ = 0x05,
	ADM_IDENTIFY = 0x06,
	ADM_ABORT = 0x08,
	ADM_SET_FEATURES = 0x09,
	ADM_GET_FEATURES = 0x0a,
	ADM_AER = 0x0c,
};

enum {
	IO_FLUSH = 0x00,
	IO_WRITE = 0x01,
	IO_READ = 0x02,
	IO_WRITE_ZEROES = 0x08,
	IO_DSM = 0x09,
};

enum {
	FEAT_ARBITRATION = 0x01,
	FEAT_POWER_MGMT = 0x02,
	FEAT_TEMP_THRESHOLD = 0x04,
	FEAT_ERROR_RECOVERY = 0x05,
	FEAT_VOLATILE_WC = 0x06,
	FEAT_NUM_QUEUES = 0x07,
	FEAT_INT_COALESCING = 0x08,
	FEAT_INT_VECTOR_CFG = 0x09,
	FEAT_WRITE_ATOMICITY = 0x0a,
	FEAT_ASYNC_EVENT_CFG = 0x0b,
	FEAT_COUNT = 0x0c,
};

#define LOG_ERROR    0x01
#define LOG_SMART    0x02
#define LOG_FW_SLOT  0x03
#define LOG_PAGE_LEN 512

struct nvme_ctrl;
struct nvme_sq;

/* A completion queue; `lock` guards head, tail, phase and reservations. */
struct nvme_cq {
	pthread_mutex_t lock;
	bool created;
	bool ien;     /* interrupts enabled */
	bool stalled; /* an SQ found no room: wake its thread on a head update */
	uint16_t vector;
	uint32_t size; /* entries */
	uint8_t *ring; /* host view of the guest's queue memory */
	uint32_t head, tail;
	uint32_t reserved; /* slots promised to fetched commands */
	bool phase;
};

/* One I/O command in flight. */
struct nvme_io {
	struct blockif_req br; /* first: blockif hands this pointer back */
	struct nvme_sq *sq;
	struct nvme_io *next_free;
	uint16_t cid;
	uint8_t opc;
	struct nvme_dsm_range *dsm; /* Dataset Management: the ranges */
	unsigned dsm_count, dsm_next;
	struct iovec iov[NVME_MAX_IOV];
};

/* A submission queue; for I/O queues the thread owns head and the slots. */
struct nvme_sq {
	struct nvme_ctrl *c;
	bool created;
	uint16_t qid, cqid;
	uint32_t size;
	uint8_t *ring;
	uint32_t head;
	uint32_t tail; /* written by the doorbell (atomic) */
	/* I/O queues only */
	int kick_fd, stop_fd;
	pthread_t thread;
	bool running, stopping;
	struct blockif_ctx *ctx;
	struct nvme_io *slots, *free;
	unsigned inflight;
	uint64_t *cid_busy; /* bitmap of the 65536 command ids */
	bool posted;        /* completions posted since the last interrupt */
	bool polling;       /* the thread watches the tail: no eventfd needed */
};

/* The controller (one per PCI function). */
struct nvme_ctrl {
	struct pci_func *f;
	struct guest_mem *mem;
	struct blockif *bi;
	/* namespace 1 */
	uint32_t sectsz;
	uint8_t lbads; /* log2(sectsz) */
	uint64_t nsze; /* LBAs */
	bool dsm;      /* Dataset Management advertised */
	bool ro;
	/* options */
	unsigned maxq;
	uint32_t qsz;
	unsigned ioslots;
	char serial[20];
	uint64_t eui64;
	/* state */
	pthread_mutex_t lock;
	pthread_rwlock_t qlock;
	pthread_mutex_t intx_lock;
	uint32_t cc, csts, aqa, intms;
	uint64_t asq, acq;
	uint32_t feat[FEAT_COUNT];
	uint16_t aer_cid[NVME_AER_MAX];
	unsigned naer;
	struct nvme_sq sq[NVME_MAX_IOQ + 1];
	struct nvme_cq cq[NVME_MAX_IOQ + 1];
	/* SMART counters (atomic) */
	uint64_t bytes_read, bytes_written, read_cmds, write_cmds;
};

static struct ratelimit nvme_rl = RATELIMIT_INIT;

#define guest_warn(...) log_ratelimited(&nvme_rl, LOG_WARN, "nvme: " __VA_ARGS__)

/* ---- PRP walking (section 4.1.1) ---- */

/* Append [hva, hva+len) to iov[], merging with the previous entry when
 * contiguous in host memory. */
static void iov_append(struct iovec *iov, unsigned *n, uint8_t *hva, size_t len)
{
	if (*n > 0) {
		struct iovec *last = &iov[*n - 1];

		if ((uint8_t *)last->iov_base + last->iov_len == hva) {
			last->iov_len += len;
			return;
		}
	}
	iov[*n].iov_base = hva;
	iov[*n].iov_len = len;
	(*n)++;
}

/* Map one data page chunk; a PRP entry after the first must be page
 * aligned. */
static uint16_t map_chunk(struct nvme_ctrl *c, uint64_t gpa, size_t len, bool to_guest,
                          struct iovec *iov, unsigned *n)
{
	uint8_t *p = gmem_ptr(c->mem, gpa, len, to_guest);

	if (p == NULL) {
		guest_warn("PRP entry 0x%llx (+%zu) is not guest RAM", (unsigned long long)gpa,
		           len);
		return ST_DATA_XFER;
	}
	iov_append(iov, n, p, len);
	return ST_OK;
}

/* The entries of a PRP list (from `list`, a qword-aligned guest address),
 * chained through the last entry of each page, for `left` more bytes. */
static uint16_t map_prp_list(struct nvme_ctrl *c, uint64_t list, uint64_t left, bool to_guest,
                             struct iovec *iov, unsigned *n)
{
	unsigned budget = NVME_MAX_IOV * 2; /* data pages plus chain pointers */

	if (list & 7) {
		guest_warn("PRP list pointer 0x%llx not qword aligned", (unsigned long long)list);
		return ST_PRP_OFFSET;
	}
	while (left > 0 && budget-- > 0) {
		const uint64_t *entry = gmem_ptr(c->mem, list, 8, false);
		uint64_t e, chunk = left < NVME_PAGE ? left : NVME_PAGE;
		bool last_in_page = ((list + 8) & (NVME_PAGE - 1)) == 0;
		uint16_t st;

		if (entry == NULL) {
			guest_warn("PRP list at 0x%llx is not guest RAM", (unsigned long long)list);
			return ST_DATA_XFER;
		}
		e = __atomic_load_n(entry, __ATOMIC_RELAXED);
		if (e & (NVME_PAGE - 1)) {
			guest_warn("PRP list entry 0x%llx not page aligned", (unsigned long long)e);
			return ST_PRP_OFFSET;
		}
		if (last_in_page && left > NVME_PAGE) {
			list = e; /* the next page of the list */
			continue;
		}
		st = map_chunk(c, e, chunk, to_guest, iov, n);
		if (st != ST_OK)
			return st;
		left -= chunk;
		list += 8;
	}
	return left == 0 ? ST_OK : ST_DATA_XFER;
}

/*
 * Map the data buffer of a command (PRP1, PRP2; `len` bytes, at most
 * NVME_MAX_XFER) to host iovecs.  to_guest: the device writes the buffer.
 * Returns ST_OK, ST_PRP_OFFSET or ST_DATA_XFER.
 */
static uint16_t map_prps(struct nvme_ctrl *c, uint64_t prp1, uint64_t prp2, uint64_t len,
                         bool to_guest, struct iovec *iov, unsigned *n)
{
	uint64_t first = NVME_PAGE - (prp1 & (NVME_PAGE - 1));
	uint16_t st;

	*n = 0;
	if (len == 0)
		return ST_OK;
	if (len > NVME_MAX_XFER)
		return ST_INVALID_FIELD;
	if (prp1 & 3) {
		guest_warn("PRP1 0x%llx not dword aligned", (unsigned long long)prp1);
		return ST_PRP_OFFSET;
	}
	if (first > len)
		first = len;
	st = map_chunk(c, prp1, first, to_guest, iov, n);
	if (st != ST_OK || first == len)
		return st;
	len -= first;
	if (len <= NVME_PAGE) {
		if (prp2 & (NVME_PAGE - 1)) {
			guest_warn("PRP2 0x%llx not page aligned", (unsigned long long)prp2);
			return ST_PRP_OFFSET;
		}
		return map_chunk(c, prp2, len, to_guest, iov, n);
	}
	return map_prp_list(c, prp2, len, to_guest, iov, n);
}

/* Copy `len` bytes of `buf` into the guest buffer the command names. */
static uint16_t copy_to_prps(struct nvme_ctrl *c, const struct nvme_sqe *cmd, const void *buf,
                             size_t len)
{
	struct iovec iov[NVME_MAX_IOV];
	unsigned n;
	uint16_t st = map_prps(c, cmd->prp1, cmd->prp2, len, true, iov, &n);
	const uint8_t *src = buf;

	for (unsigned i = 0; st == ST_OK && i < n; i++) {
		memcpy(iov[i].iov_base, src, iov[i].iov_len);
		src += iov[i].iov_len;
	}
	return st;
}

/* ---- completion queues and interrupts ---- */

static bool cq_has_entries(struct nvme_cq *cq)
{
	return __atomic_load_n(&cq->head, __ATOMIC_ACQUIRE) !=
	       __atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE);
}

/* INTx (pin-based interrupts): the pin is asserted while an
 * interrupt-enabled CQ holds entries the host has not consumed and vector
 * 0 is not masked through INTMS. */
static void intx_update(struct nvme_ctrl *c)
{
	bool level = false;

	if (pci_msix_enabled(c->f))
		return;
	pthread_mutex_lock(&c->intx_lock);
	if (!(__atomic_load_n(&c->intms, __ATOMIC_ACQUIRE) & 1)) {
		for (unsigned q = 0; q <= c->maxq && !level; q++) {
			struct nvme_cq *cq = &c->cq[q];

			level = __atomic_load_n(&cq->created, __ATOMIC_ACQUIRE) && cq->ien &&
			        cq_has_entries(cq);
		}
	}
	if (level)
		pci_intx_assert(c->f);
	else
		pci_intx_deassert(c->f);
	pthread_mutex_unlock(&c->intx_lock);
}

/* Raise the CQ's interrupt (MSI-X vector, else INTx) if it has entries. */
static void cq_notify(struct nvme_ctrl *c, struct nvme_cq *cq)
{
	if (!cq->ien)
		return;
	if (pci_msix_enabled(c->f))
		pci_interrupt(c->f, cq->vector);
	else
		intx_update(c);
}

/* Promise one completion slot; false (and the CQ marked stalled) when
 * the CQ is full of entries and promises. */
static bool cq_reserve(struct nvme_cq *cq)
{
	bool ok;

	pthread_mutex_lock(&cq->lock);
	ok = (cq->tail + cq->size - cq->head) % cq->size + cq->reserved + 1 < cq->size;
	if (ok)
		cq->reserved++;
	else
		cq->stalled = true;
	pthread_mutex_unlock(&cq->lock);
	return ok;
}

static void cq_unreserve(struct nvme_cq *cq)
{
	pthread_mutex_lock(&cq->lock);
	cq->reserved--;
	pthread_mutex_unlock(&cq->lock);
}

/* Post a completion into a reserved slot (section 4.6): the phase tag is
 * stored last so the host never sees a half-written entry. */
static void cq_post(struct nvme_cq *cq, const struct nvme_sq *sq, uint16_t cid, uint16_t status,
                    uint32_t dw0)
{
	struct nvme_cqe e = {.dw0 = dw0, .sqid = sq->qid, .cid = cid};
	uint8_t *slot;
	uint16_t sf;

	pthread_mutex_lock(&cq->lock);
	e.sqhd = (uint16_t)__atomic_load_n(&sq->head, __ATOMIC_RELAXED);
	slot = cq->ring + (size_t)cq->tail * NVME_CQE_SIZE;
	sf = (uint16_t)(status | (cq->phase ? 1 : 0));
	memcpy(slot, &e, 12);
	__atomic_store_n((uint16_t *)(slot + 12), e.cid, __ATOMIC_RELAXED);
	__atomic_store_n((uint16_t *)(slot + 14), sf, __ATOMIC_RELEASE);
	if (cq->tail + 1 == cq->size)
		cq->phase = !cq->phase;
	__atomic_store_n(&cq->tail, (cq->tail + 1) % cq->size, __ATOMIC_RELEASE);
	cq->reserved--;
	pthread_mutex_unlock(&cq->lock);
}

/* ---- namespace data (NVM Command Set section 4.1.5.1) ---- */

static unsigned log2u(uint64_t v)
{
	unsigned l = 0;

	while ((1ull << l) < v)
		l++;
	return l;
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* An ASCII identify field: space padded, not NUL terminated. */
static void put_str(uint8_t *p, const char *s, size_t n)
{
	size_t l = strnlen(s, n);

	memset(p, ' ', n);
	memcpy(p, s, l);
}

static void identify_namespace(const struct nvme_ctrl *c, uint8_t *d)
{
	put_le(d + 0, c->nsze, 8);  /* NSZE */
	put_le(d + 8, c->nsze, 8);  /* NCAP */
	put_le(d + 16, c->nsze, 8); /* NUSE */
	d[24] = c->dsm ? 1 : 0;     /* NSFEAT: thin provisioning (deallocate) */
	d[25] = 0;                  /* NLBAF: one format */
	d[26] = 0;                  /* FLBAS: format 0 */
	/* DLFEAT: deallocated blocks read as zeros, Write Zeroes may deallocate */
	d[33] = c->dsm && blockif_can_discard(c->bi) ? 0x09 : 0x00;
	for (int i = 0; i < 8; i++)
		d[120 + i] = (uint8_t)(c->eui64 >> (56 - 8 * i));
	/* EUI64 at 120, most significant byte first */
	d[128 + 2] = c->lbads; /* LBAF0: LBADS, no metadata, best performance */
}

static void identify_controller(const struct nvme_ctrl *c, uint8_t *d)
{
	put_le(d + 0, 0xfb5d, 2);      /* VID */
	put_le(d + 2, 0xfb5d, 2);      /* SSVID */
	put_str(d + 4, c->serial, 20); /* SN */
	put_str(d + 24, "khyve NVMe", 40);
	put_str(d + 64, "1.0", 8);                /* FR */
	d[72] = 6;                                /* RAB */
	d[73] = 0x58, d[74] = 0x9c, d[75] = 0xfc; /* IEEE OUI (FreeBSD's) */
	d[77] = NVME_MDTS;
	put_le(d + 80, NVME_VERSION, 4);
	d[111] = 1;                                     /* CNTRLTYPE: I/O controller */
	d[258] = 3;                                     /* ACL: 4 aborts */
	d[259] = NVME_AER_MAX - 1;                      /* AERL */
	d[260] = 0x03;                                  /* FRMW: one slot, read-only */
	d[261] = 0x00;                                  /* LPA */
	d[262] = 0;                                     /* ELPE: one error log entry */
	put_le(d + 266, 0x0157, 2);                     /* WCTEMP: 343 K */
	put_le(d + 268, 0x0175, 2);                     /* CCTEMP: 373 K */
	d[512] = 0x66;                                  /* SQES: 64 bytes */
	d[513] = 0x44;                                  /* CQES: 16 bytes */
	put_le(d + 516, 1, 4);                          /* NN */
	put_le(d + 520, (c->dsm ? 0x04 : 0) | 0x08, 2); /* ONCS: DSM, Write Zeroes */
	d[525] = 1;                                     /* VWC present */
	snprintf((char *)d + 768, 256, "nqn.2014-08.org.nvmexpress:uuid:khyve-%.20s", c->serial);
	put_le(d + 2048, 2500, 2); /* PSD0 MP: 25 W */
}

static void identify_ns_descriptors(const struct nvme_ctrl *c, uint8_t *d)
{
	d[0] = 1; /* NIDT: IEEE EUI-64 */
	d[1] = 8;
	for (int i = 0; i < 8; i++)
		d[4 + i] = (uint8_t)(c->eui64 >> (56 - 8 * i));
	d[12] = 3; /* NIDT: UUID, derived from the EUI-64 */
	d[13] = 16;
	for (int i = 0; i < 8; i++) {
		d[16 + i] = (uint8_t)(c->eui64 >> (56 - 8 * i));
		d[24 + i] = (uint8_t) ~(c->eui64 >> (8 * i));
	}
	d[16 + 6] = (uint8_t)((d[16 + 6] & 0x0f) | 0x40); /* version 4 */
	d[16 + 8] = (uint8_t)((d[16 + 8] & 0x3f) | 0x80); /* variant */
}

/* Identify (section 5.17): CNS 0, 1, 2, 3, and 6 for the NVM command set. */
static uint16_t admin_identify(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	uint8_t d[4096] = {0};
	unsigned cns = cmd->cdw10 & 0xff;

	switch (cns) {
	case 0x00:
		if (cmd->nsid != NVME_NSID)
			return ST_INVALID_NS;
		identify_namespace(c, d);
		break;
	case 0x01:
		identify_controller(c, d);
		break;
	case 0x02:
		if (cmd->nsid >= 0xfffffffeu)
			return ST_INVALID_NS;
		if (cmd->nsid < NVME_NSID)
			put_le(d, NVME_NSID, 4);
		break;
	case 0x03:
		if (cmd->nsid != NVME_NSID)
			return ST_INVALID_NS;
		identify_ns_descriptors(c, d);
		break;
	case 0x06:
		/* NVM Command Set controller data: all zero, no extra limits */
		if ((cmd->cdw11 >> 24) != 0)
			return ST_INVALID_FIELD;
		break;
	default:
		return ST_INVALID_FIELD;
	}
	return copy_to_prps(c, cmd, d, sizeof(d));
}

/* ---- log pages (section 5.16) ---- */

static void smart_log(struct nvme_ctrl *c, uint8_t *d)
{
	/* Data units are thousands of 512-byte units, rounded up. */
	uint64_t rd = __atomic_load_n(&c->bytes_read, __ATOMIC_RELAXED) / 512;
	uint64_t wr = __atomic_load_n(&c->bytes_written, __ATOMIC_RELAXED) / 512;

	put_le(d + 1, 323, 2); /* composite temperature, K */
	d[3] = 100;            /* available spare, % */
	d[4] = 10;             /* spare threshold */
	put_le(d + 32, (rd + 999) / 1000, 8);
	put_le(d + 48, (wr + 999) / 1000, 8);
	put_le(d + 64, __atomic_load_n(&c->read_cmds, __ATOMIC_RELAXED), 8);
	put_le(d + 80, __atomic_load_n(&c->write_cmds, __ATOMIC_RELAXED), 8);
	put_le(d + 112, 1, 8); /* power cycles */
}

static uint16_t admin_get_log(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	uint8_t page[LOG_PAGE_LEN] = {0}, *out;
	unsigned lid = cmd->cdw10 & 0xff;
	uint64_t numd = ((uint64_t)(cmd->cdw11 & 0xffff) << 16 | cmd->cdw10 >> 16) + 1;
	uint64_t offset = (uint64_t)cmd->cdw13 << 32 | cmd->cdw12;
	uint64_t len = numd * 4, log_len;
	uint16_t st;

	switch (lid) {
	case LOG_ERROR:
		log_len = 64; /* one zeroed entry: no errors recorded */
		break;
	case LOG_SMART:
		smart_log(c, page);
		log_len = LOG_PAGE_LEN;
		break;
	case LOG_FW_SLOT:
		page[0] = 1; /* AFI: slot 1 active */
		put_str(page + 8, "1.0", 8);
		log_len = LOG_PAGE_LEN;
		break;
	default:
		return ST_INVALID_LOG;
	}
	if (len > NVME_MAX_XFER || offset >= log_len || (offset & 3))
		return ST_INVALID_FIELD;
	out = calloc(1, len);
	if (out == NULL)
		return ST_INTERNAL;
	memcpy(out, page + offset, len < log_len - offset ? len : log_len - offset);
	st = copy_to_prps(c, cmd, out, len);
	free(out);
	return st;
}

/* ---- features (sections 5.15 Get, 5.27 Set; 5.27.1 feature ids) ---- */

static uint32_t num_queues_value(unsigned nsq, unsigned ncq)
{
	return (uint32_t)(nsq - 1) | (uint32_t)(ncq - 1) << 16;
}

static uint16_t admin_set_features(struct nvme_ctrl *c, const struct nvme_sqe *cmd, uint32_t *dw0)
{
	unsigned fid = cmd->cdw10 & 0xff;
	uint32_t v = cmd->cdw11;

	switch (fid) {
	case FEAT_NUM_QUEUES: {
		unsigned nsq = (v & 0xffff) + 1, ncq = (v >> 16) + 1;

		if ((v & 0xffff) == 0xffff || (v >> 16) == 0xffff)
			return ST_INVALID_FIELD;
		nsq = nsq < c->maxq ? nsq : c->maxq;
		ncq = ncq < c->maxq ? ncq : c->maxq;
		c->feat[fid] = num_queues_value(nsq, ncq);
		*dw0 = c->feat[fid];
		return ST_OK;
	}
	case FEAT_ARBITRATION:
	case FEAT_POWER_MGMT:
	case FEAT_TEMP_THRESHOLD:
	case FEAT_ERROR_RECOVERY:
	case FEAT_VOLATILE_WC:
	case FEAT_INT_COALESCING:
	case FEAT_INT_VECTOR_CFG:
	case FEAT_WRITE_ATOMICITY:
	case FEAT_ASYNC_EVENT_CFG:
		if (fid == FEAT_POWER_MGMT && (v & 0x1f) != 0)
			return ST_INVALID_FIELD; /* only power state 0 exists */
		c->feat[fid] = v;
		return ST_OK;
	default:
		return ST_INVALID_FIELD;
	}
}

static uint16_t admin_get_features(struct nvme_ctrl *c, const struct nvme_sqe *cmd, uint32_t *dw0)
{
	unsigned fid = cmd->cdw10 & 0xff, sel = (cmd->cdw10 >> 8) & 7;

	if (fid == 0 || fid >= FEAT_COUNT || fid == 0x03)
		return ST_INVALID_FIELD;
	if (sel == 3) { /* supported capabilities: changeable, not saveable */
		*dw0 = 0x4;
		return ST_OK;
	}
	*dw0 = c->feat[fid];
	if (fid == FEAT_INT_VECTOR_CFG)
		*dw0 = cmd->cdw11 & 0xffff; /* the vector asked about; CD clear */
	return ST_OK;
}

static void features_default(struct nvme_ctrl *c)
{
	memset(c->feat, 0, sizeof(c->feat));
	c->feat[FEAT_TEMP_THRESHOLD] = 0x0157;
	c->feat[FEAT_VOLATILE_WC] = 1;
	c->feat[FEAT_NUM_QUEUES] = num_queues_value(c->maxq, c->maxq);
}

/* ---- I/O submission queue threads ---- */

#define WATCH_KICK 1
#define WATCH_STOP 2

static uint16_t io_result_status(const struct nvme_io *io)
{
	if (io->br.result == 0)
		return ST_OK;
	if (io->opc == IO_READ)
		return ST_READ_ERROR;
	return io->opc == IO_FLUSH ? ST_INTERNAL : ST_WRITE_FAULT;
}

static void cid_release(struct nvme_sq *sq, uint16_t cid)
{
	sq->cid_busy[cid / 64] &= ~(1ull << (cid % 64));
}

static void io_free(struct nvme_sq *sq, struct nvme_io *io)
{
	free(io->dsm);
	io->dsm = NULL;
	io->next_free = sq->free;
	sq->free = io;
	sq->inflight--;
}

/* Complete `io` at once with `status` (it never reached the back end). */
static void io_finish(struct nvme_sq *sq, struct nvme_io *io, uint16_t status)
{
	struct nvme_ctrl *c = sq->c;

	cid_release(sq, io->cid);
	cq_post(&c->cq[sq->cqid], sq, io->cid, status, 0);
	sq->posted = true;
	io_free(sq, io);
}

/* Is [slba, slba+nlb) inside the namespace? (overflow-safe) */
static bool lba_in_range(const struct nvme_ctrl *c, uint64_t slba, uint64_t nlb)
{
	return slba < c->nsze && nlb <= c->nsze - slba;
}

static uint16_t io_prepare_rw(struct nvme_sq *sq, struct nvme_io *io, const struct nvme_sqe *cmd)
{
	struct nvme_ctrl *c = sq->c;
	uint64_t slba = (uint64_t)cmd->cdw11 << 32 | cmd->cdw10;
	uint64_t nlb = (cmd->cdw12 & 0xffff) + 1;
	uint64_t len = nlb * c->sectsz;
	bool read = cmd->opc == IO_READ;
	unsigned n;
	uint16_t st;

	if (!lba_in_range(c, slba, nlb))
		return ST_LBA_RANGE;
	if (len > NVME_MAX_XFER)
		return ST_INVALID_FIELD;
	if (!read && c->ro)
		return ST_NS_WRITE_PROT;
	st = map_prps(c, cmd->prp1, cmd->prp2, len, read, io->iov, &n);
	if (st != ST_OK)
		return st;
	io->br.op = read ? BLOCKIF_READ : BLOCKIF_WRITE;
	io->br.offset = slba * c->sectsz;
	io->br.len = len;
	io->br.iov = io->iov;
	io->br.iovcnt = n;
	return ST_OK;
}

static uint16_t io_prepare_write_zeroes(struct nvme_sq *sq, struct nvme_io *io,
                                        const struct nvme_sqe *cmd)
{
	struct nvme_ctrl *c = sq->c;
	uint64_t slba = (uint64_t)cmd->cdw11 << 32 | cmd->cdw10;
	uint64_t nlb = (cmd->cdw12 & 0xffff) + 1;

	if (!lba_in_range(c, slba, nlb))
		return ST_LBA_RANGE;
	if (c->ro)
		return ST_NS_WRITE_PROT;
	io->br.op = BLOCKIF_WRITE_ZEROES;
	io->br.offset = slba * c->sectsz;
	io->br.len = nlb * c->sectsz;
	io->br.unmap = c->dsm && blockif_can_discard(c->bi) && (cmd->cdw12 & (1u << 25));
	return ST_OK;
}

/* Queue the next non-empty Dataset Management range; false when none is
 * left. */
static bool io_next_dsm_range(struct nvme_sq *sq, struct nvme_io *io)
{
	struct nvme_ctrl *c = sq->c;

	while (io->dsm_next < io->dsm_count) {
		const struct nvme_dsm_range *r = &io->dsm[io->dsm_next++];

		if (r->nlb == 0)
			continue;
		io->br.op = BLOCKIF_DISCARD;
		io->br.offset = r->slba * c->sectsz;
		io->br.len = (uint64_t)r->nlb * c->sectsz;
		io->br.iov = NULL;
		io->br.iovcnt = 0;
		blockif_queue(sq->ctx, &io->br);
		return true;
	}
	return false;
}

/* Dataset Management (NVM Command Set section 3.2.3): deallocate punches
 * holes, one range at a time; other attributes are hints. */
static uint16_t io_prepare_dsm(struct nvme_sq *sq, struct nvme_io *io, const struct nvme_sqe *cmd,
                               bool *queued)
{
	struct nvme_ctrl *c = sq->c;
	unsigned nr = (cmd->cdw10 & 0xff) + 1;
	struct iovec iov[NVME_MAX_IOV];
	unsigned n;
	uint8_t *dst;
	uint16_t st;

	*queued = false;
	if (c->ro)
		return ST_NS_WRITE_PROT;
	if (!(cmd->cdw11 & 4) || !blockif_can_discard(c->bi))
		return ST_OK; /* no deallocate, or nothing to do it with: advisory */
	st = map_prps(c, cmd->prp1, cmd->prp2, (uint64_t)nr * sizeof(*io->dsm), false, iov, &n);
	if (st != ST_OK)
		return st;
	io->dsm = malloc((size_t)nr * sizeof(*io->dsm));
	if (io->dsm == NULL)
		return ST_INTERNAL;
	dst = (uint8_t *)io->dsm;
	for (unsigned i = 0; i < n; i++) {
		memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
	for (unsigned i = 0; i < nr; i++)
		if (!lba_in_range(c, io->dsm[i].slba, io->dsm[i].nlb))
			return ST_LBA_RANGE;
	io->dsm_count = nr;
	io->dsm_next = 0;
	*queued = io_next_dsm_range(sq, io);
	return ST_OK;
}

/* Validate one I/O command and hand it to the back end, or complete it. */
static void io_start(struct nvme_sq *sq, struct nvme_io *io, const struct nvme_sqe *cmd)
{
	struct nvme_ctrl *c = sq->c;
	uint16_t st = ST_OK;
	bool queued = true;

	io->cid = cmd->cid;
	io->opc = cmd->opc;
	io->br.iov = NULL;
	io->br.iovcnt = 0;
	io->br.unmap = false;
	if (sq->cid_busy[cmd->cid / 64] & (1ull << (cmd->cid % 64))) {
		guest_warn("SQ %u: command id %u already in flight", sq->qid, cmd->cid);
		cq_post(&c->cq[sq->cqid], sq, cmd->cid, ST_CID_CONFLICT, 0);
		sq->posted = true;
		io_free(sq, io);
		return;
	}
	sq->cid_busy[cmd->cid / 64] |= 1ull << (cmd->cid % 64);
	if (cmd->flags != 0)
		st = ST_INVALID_FIELD; /* fused operations, SGLs */
	else if (cmd->nsid != NVME_NSID && !(cmd->opc == IO_FLUSH && cmd->nsid == 0xffffffffu))
		st = ST_INVALID_NS;
	else {
		switch (cmd->opc) {
		case IO_READ:
		case IO_WRITE:
			st = io_prepare_rw(sq, io, cmd);
			break;
		case IO_FLUSH:
			io->br.op = BLOCKIF_FLUSH;
			break;
		case IO_WRITE_ZEROES:
			st = io_prepare_write_zeroes(sq, io, cmd);
			break;
		case IO_DSM:
			if (c->dsm)
				st = io_prepare_dsm(sq, io, cmd, &queued);
			else
				st = ST_INVALID_OPCODE;
			if (st != ST_OK || !queued)
				return io_finish(sq, io, st);
			return;
		default:
			st = ST_INVALID_OPCODE;
		}
	}
	if (st != ST_OK)
		return io_finish(sq, io, st);
	blockif_queue(sq->ctx, &io->br);
}

/* A finished back-end request: continue a DSM, or post the completion. */
static void io_done(struct nvme_sq *sq, struct nvme_io *io, bool post)
{
	struct nvme_ctrl *c = sq->c;

	if (post && io->opc == IO_DSM && io->br.result == 0 && io_next_dsm_range(sq, io))
		return;
	if (io->br.result != 0)
		guest_warn("SQ %u: I/O error %d (opcode 0x%x)", sq->qid, io->br.result, io->opc);
	else if (io->opc == IO_READ) {
		__atomic_add_fetch(&c->bytes_read, io->br.len, __ATOMIC_RELAXED);
		__atomic_add_fetch(&c->read_cmds, 1, __ATOMIC_RELAXED);
	} else if (io->opc == IO_WRITE) {
		__atomic_add_fetch(&c->bytes_written, io->br.len, __ATOMIC_RELAXED);
		__atomic_add_fetch(&c->write_cmds, 1, __ATOMIC_RELAXED);
	}
	if (post) {
		io_finish(sq, io, io_result_status(io));
	} else {
		cid_release(sq, io->cid);
		io_free(sq, io);
	}
}

/* Fetch commands while there are free slots and completion room. */
static void sq_fetch(struct nvme_sq *sq)
{
	struct nvme_cq *cq = &sq->c->cq[sq->cqid];

	for (uint32_t i = 0; i < sq->size && sq->free != NULL; i++) {
		uint32_t tail = __atomic_load_n(&sq->tail, __ATOMIC_ACQUIRE);
		struct nvme_sqe cmd;
		struct nvme_io *io;

		if (sq->head == tail || !cq_reserve(cq))
			break;
		memcpy(&cmd, sq->ring + (size_t)sq->head * NVME_SQE_SIZE, sizeof(cmd));
		__atomic_store_n(&sq->head, (sq->head + 1) % sq->size, __ATOMIC_RELEASE);
		io = sq->free;
		sq->free = io->next_free;
		sq->inflight++;
		io_start(sq, io, &cmd);
	}
}

/* New commands the thread could start now, or finished I/O to reap. */
static bool sq_has_work(struct nvme_sq *sq, struct nvme_cq *cq)
{
	bool fetchable = __atomic_load_n(&sq->tail, __ATOMIC_SEQ_CST) != sq->head &&
	                 sq->free != NULL && !__atomic_load_n(&cq->stalled, __ATOMIC_RELAXED);

	return fetchable || blockif_ready(sq->ctx);
}

/*
 * Adaptive polling (as virtio-blk): after activity, watch the tail and the
 * back end for blockif_default_poll_us() before sleeping; meanwhile doorbell writes
 * need not signal the eventfd.  The flag is cleared before the last look
 * (both sides use sequentially consistent accesses), so no doorbell is
 * missed.  True when work showed up.
 */
static bool sq_ready(void *arg)
{
	struct nvme_sq *sq = arg;

	return sq_has_work(sq, &sq->c->cq[sq->cqid]);
}

static bool sq_poll_for_work(struct nvme_sq *sq, struct nvme_cq *cq)
{
	bool ready;

	__atomic_store_n(&sq->polling, true, __ATOMIC_SEQ_CST);
	ready = blockif_spin(blockif_default_poll_us(), sq_ready, sq, &sq->stopping);
	__atomic_store_n(&sq->polling, false, __ATOMIC_SEQ_CST);
	return ready || sq_has_work(sq, cq);
}

static void *sq_main(void *arg)
{
	struct nvme_sq *sq = arg;
	struct nvme_ctrl *c = sq->c;
	struct nvme_cq *cq = &c->cq[sq->cqid];
	struct blockif_req *done[NVME_REAP_BATCH];
	uint64_t v;

	for (bool busy = false;;) {
		uint32_t fired = 0;
		unsigned n = busy ? blockif_poll(sq->ctx, done, NVME_REAP_BATCH, &fired)
		                  : blockif_wait(sq->ctx, done, NVME_REAP_BATCH, &fired);
		bool stop =
		    (fired & WATCH_STOP) || __atomic_load_n(&sq->stopping, __ATOMIC_ACQUIRE);

		for (unsigned i = 0; i < n; i++)
			io_done(sq, (struct nvme_io *)done[i], !stop);
		if (stop)
			break;
		if ((fired & WATCH_KICK) && read(sq->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			guest_warn("SQ %u: doorbell eventfd read failed", sq->qid);
		sq_fetch(sq);
		blockif_submit(sq->ctx); /* before polling: the back end must see it */
		if (sq->posted)
			cq_notify(c, cq);
		sq->posted = false;
		busy = sq_poll_for_work(sq, cq);
	}
	/* Deleted or reset: let what is in flight finish, post nothing. */
	while (sq->inflight > 0) {
		uint32_t fired = 0;
		unsigned n = blockif_wait(sq->ctx, done, NVME_REAP_BATCH, &fired);

		for (unsigned i = 0; i < n; i++)
			io_done(sq, (struct nvme_io *)done[i], false);
	}
	return NULL;
}

static void sq_release(struct nvme_sq *sq)
{
	if (sq->ctx != NULL)
		blockif_ctx_destroy(sq->ctx);
	if (sq->kick_fd >= 0)
		close(sq->kick_fd);
	if (sq->stop_fd >= 0)
		close(sq->stop_fd);
	free(sq->slots);
	free(sq->cid_busy);
	sq->ctx = NULL;
	sq->kick_fd = sq->stop_fd = -1;
	sq->slots = sq->free = NULL;
	sq->cid_busy = NULL;
}

/* Resources and thread of an I/O SQ; 0 or -1. */
static int sq_start_thread(struct nvme_sq *sq)
{
	char err[256];

	sq->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sq->stop_fd = eventfd(0, EFD_CLOEXEC);
	sq->slots = calloc(sq->c->ioslots, sizeof(*sq->slots));
	sq->cid_busy = calloc(65536 / 64, sizeof(uint64_t));
	if (sq->kick_fd < 0 || sq->stop_fd < 0 || sq->slots == NULL || sq->cid_busy == NULL)
		goto fail;
	sq->ctx = blockif_ctx_create(sq->c->bi, sq->c->ioslots, err, sizeof(err));
	if (sq->ctx == NULL) {
		log_ratelimited(&nvme_rl, LOG_ERR, "nvme: SQ %u: %s", sq->qid, err);
		goto fail;
	}
	if (blockif_ctx_watch(sq->ctx, sq->kick_fd, WATCH_KICK) < 0 ||
	    blockif_ctx_watch(sq->ctx, sq->stop_fd, WATCH_STOP) < 0)
		goto fail;
	sq->free = NULL;
	for (unsigned i = sq->c->ioslots; i-- > 0;) {
		sq->slots[i].sq = sq;
		sq->slots[i].next_free = sq->free;
		sq->free = &sq->slots[i];
	}
	sq->inflight = 0;
	sq->stopping = false;
	sq->polling = false;
	if (pthread_create(&sq->thread, NULL, sq_main, sq) != 0)
		goto fail;
	sq->running = true;
	return 0;
fail:
	sq_release(sq);
	return -1;
}

static void sq_stop_thread(struct nvme_sq *sq)
{
	uint64_t one = 1;

	if (sq->running) {
		__atomic_store_n(&sq->stopping, true, __ATOMIC_RELEASE);
		if (write(sq->stop_fd, &one, sizeof(one)) < 0)
			log_warn("nvme: cannot stop SQ %u", sq->qid);
		pthread_join(sq->thread, NULL);
		sq->running = false;
	}
	sq_release(sq);
}

/* ---- queue creation and deletion (sections 5.4, 5.5, 5.6, 5.7) ---- */

/* Host view of a queue's contiguous guest memory, or NULL. */
static uint8_t *queue_memory(struct nvme_ctrl *c, uint64_t gpa, uint32_t entries, size_t esize)
{
	if (gpa & (NVME_PAGE - 1))
		return NULL;
	return gmem_ptr(c->mem, gpa, (uint64_t)entries * esize, true);
}

static bool io_qid_valid(const struct nvme_ctrl *c, unsigned qid)
{
	return qid >= 1 && qid <= c->maxq;
}

static uint16_t admin_create_cq(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	unsigned qid = cmd->cdw10 & 0xffff;
	uint32_t size = (cmd->cdw10 >> 16) + 1;
	unsigned vector = cmd->cdw11 >> 16;
	struct nvme_cq *cq;
	uint8_t *ring;

	if (!io_qid_valid(c, qid) || c->cq[qid].created)
		return ST_INVALID_QID;
	if (size < 2 || size > c->qsz)
		return ST_INVALID_QSIZE;
	if (!(cmd->cdw11 & 1) || CC_IOCQES(c->cc) != 4)
		return ST_INVALID_FIELD; /* only physically contiguous, 16-byte entries */
	if (vector >= c->maxq + 1u || (vector != 0 && c->f->msix.cap == 0))
		return ST_INVALID_VECTOR;
	ring = queue_memory(c, cmd->prp1, size, NVME_CQE_SIZE);
	if (ring == NULL) {
		guest_warn("CQ %u at 0x%llx is not page-aligned guest RAM", qid,
		           (unsigned long long)cmd->prp1);
		return ST_INVALID_FIELD;
	}
	cq = &c->cq[qid];
	pthread_rwlock_wrlock(&c->qlock);
	cq->ring = ring;
	cq->size = size;
	cq->head = cq->tail = cq->reserved = 0;
	cq->phase = true;
	cq->stalled = false;
	cq->ien = cmd->cdw11 & 2;
	cq->vector = (uint16_t)vector;
	__atomic_store_n(&cq->created, true, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&c->qlock);
	return ST_OK;
}

static uint16_t admin_create_sq(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	unsigned qid = cmd->cdw10 & 0xffff, cqid = cmd->cdw11 >> 16;
	uint32_t size = (cmd->cdw10 >> 16) + 1;
	struct nvme_sq *sq;
	uint8_t *ring;
	int rc;

	if (!io_qid_valid(c, qid) || c->sq[qid].created)
		return ST_INVALID_QID;
	if (!io_qid_valid(c, cqid) || !c->cq[cqid].created)
		return ST_CQ_INVALID;
	if (size < 2 || size > c->qsz)
		return ST_INVALID_QSIZE;
	if (!(cmd->cdw11 & 1) || CC_IOSQES(c->cc) != 6)
		return ST_INVALID_FIELD;
	ring = queue_memory(c, cmd->prp1, size, NVME_SQE_SIZE);
	if (ring == NULL) {
		guest_warn("SQ %u at 0x%llx is not page-aligned guest RAM", qid,
		           (unsigned long long)cmd->prp1);
		return ST_INVALID_FIELD;
	}
	sq = &c->sq[qid];
	pthread_rwlock_wrlock(&c->qlock);
	sq->ring = ring;
	sq->size = size;
	sq->head = sq->tail = 0;
	sq->cqid = (uint16_t)cqid;
	rc = sq_start_thread(sq);
	if (rc == 0)
		sq->created = true;
	pthread_rwlock_unlock(&c->qlock);
	return rc == 0 ? ST_OK : ST_INTERNAL;
}

/* Called with qlock held for writing. */
static void sq_delete(struct nvme_sq *sq)
{
	sq_stop_thread(sq);
	sq->created = false;
}

static uint16_t admin_delete_sq(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	unsigned qid = cmd->cdw10 & 0xffff;

	if (!io_qid_valid(c, qid) || !c->sq[qid].created)
		return ST_INVALID_QID;
	pthread_rwlock_wrlock(&c->qlock);
	sq_delete(&c->sq[qid]);
	pthread_rwlock_unlock(&c->qlock);
	return ST_OK;
}

static uint16_t admin_delete_cq(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	unsigned qid = cmd->cdw10 & 0xffff;

	if (!io_qid_valid(c, qid) || !c->cq[qid].created)
		return ST_INVALID_QID;
	for (unsigned s = 1; s <= c->maxq; s++)
		if (c->sq[s].created && c->sq[s].cqid == qid)
			return ST_INVALID_QDELETE;
	pthread_rwlock_wrlock(&c->qlock);
	__atomic_store_n(&c->cq[qid].created, false, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&c->qlock);
	intx_update(c);
	return ST_OK;
}

/* ---- the admin queue ---- */

/* Asynchronous Event Request (section 5.2): held; no events are ever
 * reported, so it completes only by being dropped at reset. */
static uint16_t admin_aer(struct nvme_ctrl *c, const struct nvme_sqe *cmd, bool *held)
{
	for (unsigned i = 0; i < c->naer; i++)
		if (c->aer_cid[i] == cmd->cid)
			return ST_CID_CONFLICT;
	if (c->naer == NVME_AER_MAX)
		return ST_AER_LIMIT;
	c->aer_cid[c->naer++] = cmd->cid;
	*held = true;
	return ST_OK;
}

static uint16_t admin_execute(struct nvme_ctrl *c, const struct nvme_sqe *cmd, uint32_t *dw0,
                              bool *held)
{
	if (cmd->flags != 0)
		return ST_INVALID_FIELD;
	switch (cmd->opc) {
	case ADM_DELETE_SQ:
		return admin_delete_sq(c, cmd);
	case ADM_CREATE_SQ:
		return admin_create_sq(c, cmd);
	case ADM_GET_LOG:
		return admin_get_log(c, cmd);
	case ADM_DELETE_CQ:
		return admin_delete_cq(c, cmd);
	case ADM_CREATE_CQ:
		return admin_create_cq(c, cmd);
	case ADM_IDENTIFY:
		return admin_identify(c, cmd);
	case ADM_ABORT:
		*dw0 = 1; /* not aborted: commands finish on their own */
		return ST_OK;
	case ADM_SET_FEATURES:
		return admin_set_features(c, cmd, dw0);
	case ADM_GET_FEATURES:
		return admin_get_features(c, cmd, dw0);
	case ADM_AER:
		return admin_aer(c, cmd, held);
	default:
		guest_warn("unsupported admin opcode 0x%02x", cmd->opc);
		return ST_INVALID_OPCODE;
	}
}

/* Run the admin commands up to the tail (called with `lock` held). */
static void admin_process(struct nvme_ctrl *c)
{
	struct nvme_sq *sq = &c->sq[0];
	struct nvme_cq *cq = &c->cq[0];
	bool posted = false;

	if (!(c->csts & CSTS_RDY) || (c->csts & CSTS_SHST_MASK))
		return;
	for (uint32_t i = 0; i < sq->size && sq->head != sq->tail; i++) {
		struct nvme_sqe cmd;
		uint32_t dw0 = 0;
		bool held = false;
		uint16_t st;

		if (!cq_reserve(cq))
			break;
		memcpy(&cmd, sq->ring + (size_t)sq->head * NVME_SQE_SIZE, sizeof(cmd));
		sq->head = (sq->head + 1) % sq->size;
		st = admin_execute(c, &cmd, &dw0, &held);
		if (held) {
			cq_unreserve(cq);
			continue;
		}
		cq_post(cq, sq, cmd.cid, st, dw0);
		posted = true;
	}
	if (posted)
		cq_notify(c, cq);
}

/* ---- controller state (sections 3.5 initialization, 3.6 shutdown, 3.7 reset) ---- */

/* Delete every I/O queue and forget the admin queue (lock held). */
static void controller_reset(struct nvme_ctrl *c)
{
	pthread_rwlock_wrlock(&c->qlock);
	for (unsigned q = 1; q <= c->maxq; q++)
		if (c->sq[q].created)
			sq_delete(&c->sq[q]);
	for (unsigned q = 0; q <= c->maxq; q++)
		__atomic_store_n(&c->cq[q].created, false, __ATOMIC_RELEASE);
	c->sq[0].created = false;
	pthread_rwlock_unlock(&c->qlock);
	c->naer = 0;
	c->csts = 0;
	c->intms = 0;
	features_default(c);
	intx_update(c);
}

/* CC.EN 0 -> 1: check the admin queue set-up; RDY, or CFS when bad. */
static void controller_enable(struct nvme_ctrl *c)
{
	uint32_t sqs = (c->aqa & 0xfff) + 1, cqs = ((c->aqa >> 16) & 0xfff) + 1;
	uint8_t *asq = queue_memory(c, c->asq, sqs, NVME_SQE_SIZE);
	uint8_t *acq = queue_memory(c, c->acq, cqs, NVME_CQE_SIZE);
	struct nvme_cq *cq = &c->cq[0];
	struct nvme_sq *sq = &c->sq[0];

	if (asq == NULL || acq == NULL || sqs < 2 || cqs < 2 || CC_MPS(c->cc) != 0 ||
	    CC_CSS(c->cc) != 0) {
		guest_warn("bad admin queue set-up or CC 0x%x; controller fatal status", c->cc);
		c->csts = CSTS_CFS;
		return;
	}
	pthread_rwlock_wrlock(&c->qlock);
	sq->ring = asq;
	sq->size = sqs;
	sq->head = sq->tail = 0;
	sq->cqid = 0;
	sq->created = true;
	cq->ring = acq;
	cq->size = cqs;
	cq->head = cq->tail = cq->reserved = 0;
	cq->phase = true;
	cq->stalled = false;
	cq->ien = true;
	cq->vector = 0;
	__atomic_store_n(&cq->created, true, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&c->qlock);
	c->csts = CSTS_RDY;
}

/* CC.SHN (section 3.6): make the image durable, report shutdown done. */
static void controller_shutdown(struct nvme_ctrl *c)
{
	struct blockif_req req = {.op = BLOCKIF_FLUSH}, *done[1];
	struct blockif_ctx *ctx;
	char err[256];
	uint32_t fired;

	ctx = blockif_ctx_create(c->bi, 1, err, sizeof(err));
	if (ctx != NULL) {
		blockif_queue(ctx, &req);
		while (blockif_wait(ctx, done, 1, &fired) == 0)
			;
		blockif_ctx_destroy(ctx);
	}
	if (ctx == NULL || req.result != 0)
		log_ratelimited(&nvme_rl, LOG_ERR, "nvme: flush at shutdown failed");
	c->csts = (c->csts & ~CSTS_SHST_MASK) | CSTS_SHST_DONE;
}

static void cc_write(struct nvme_ctrl *c, uint32_t val)
{
	uint32_t old = c->cc;

	c->cc = val;
	if ((old & CC_EN) && !(val & CC_EN)) {
		controller_reset(c);
	} else if (!(old & CC_EN) && (val & CC_EN)) {
		controller_enable(c);
	}
	if (CC_SHN(val) != 0 && CC_SHN(old) == 0)
		controller_shutdown(c);
	else if (CC_SHN(val) == 0)
		c->csts &= ~CSTS_SHST_MASK;
}

/* ---- doorbells (section 3.1: SQyTDBL, CQyHDBL; CAP.DSTRD 0: stride 4 bytes) ---- */

static void sq_doorbell(struct nvme_ctrl *c, unsigned qid, uint32_t tail)
{
	uint64_t one = 1;

	if (qid == 0) {
		pthread_mutex_lock(&c->lock);
		if (c->sq[0].created && tail < c->sq[0].size) {
			c->sq[0].tail = tail;
			admin_process(c);
		} else
			guest_warn("bad admin SQ doorbell %u", tail);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	pthread_rwlock_rdlock(&c->qlock);
	if (qid <= c->maxq && c->sq[qid].created && tail < c->sq[qid].size) {
		__atomic_store_n(&c->sq[qid].tail, tail, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&c->sq[qid].polling, __ATOMIC_SEQ_CST) &&
		    write(c->sq[qid].kick_fd, &one, sizeof(one)) < 0)
			guest_warn("SQ %u: cannot signal its thread", qid);
	} else
		guest_warn("SQ %u doorbell %u: no such queue or tail beyond it", qid, tail);
	pthread_rwlock_unlock(&c->qlock);
}

static void cq_doorbell(struct nvme_ctrl *c, unsigned qid, uint32_t head)
{
	struct nvme_cq *cq = &c->cq[qid];
	uint64_t one = 1;
	bool was_stalled = false;

	pthread_rwlock_rdlock(&c->qlock);
	if (qid > c->maxq || !cq->created || head >= cq->size) {
		guest_warn("CQ %u doorbell %u: no such queue or head beyond it", qid, head);
		pthread_rwlock_unlock(&c->qlock);
		return;
	}
	pthread_mutex_lock(&cq->lock);
	__atomic_store_n(&cq->head, head, __ATOMIC_RELEASE);
	was_stalled = cq->stalled;
	cq->stalled = false;
	pthread_mutex_unlock(&cq->lock);
	for (unsigned s = 1; was_stalled && qid != 0 && s <= c->maxq; s++)
		if (c->sq[s].created && c->sq[s].cqid == qid &&
		    write(c->sq[s].kick_fd, &one, sizeof(one)) < 0)
			guest_warn("SQ %u: cannot signal its thread", s);
	pthread_rwlock_unlock(&c->qlock);
	intx_update(c);
	if (was_stalled && qid == 0) {
		pthread_mutex_lock(&c->lock);
		admin_process(c);
		pthread_mutex_unlock(&c->lock);
	}
}

static void doorbell_write(struct nvme_ctrl *c, uint64_t offset, unsigned size, uint32_t val)
{
	uint64_t idx = (offset - NVME_DOORBELL_BASE) / 4;

	if (size != 4 || (offset & 3) || idx / 2 > c->maxq) {
		guest_warn("doorbell write at 0x%llx size %u ignored", (unsigned long long)offset,
		           size);
		return;
	}
	if (!(__atomic_load_n(&c->csts, __ATOMIC_ACQUIRE) & CSTS_RDY))
		return;
	if (idx & 1)
		cq_doorbell(c, (unsigned)(idx / 2), val & 0xffff);
	else
		sq_doorbell(c, (unsigned)(idx / 2), val & 0xffff);
}

/* ---- register access ---- */

static uint64_t cap_value(const struct nvme_ctrl *c)
{
	return (uint64_t)(c->qsz - 1) | /* MQES */
	       (1ull << 16) |           /* CQR: contiguous queues required */
	       (30ull << 24) |          /* TO: 15 s in 500 ms units */
	       (1ull << 37);            /* CSS: NVM command set */
}

/* The 32-bit register at `off` (a multiple of 4); 0 when reserved. */
static uint32_t reg_read32(struct nvme_ctrl *c, uint64_t off)
{
	switch (off) {
	case REG_CAP:
		return (uint32_t)cap_value(c);
	case REG_CAP + 4:
		return (uint32_t)(cap_value(c) >> 32);
	case REG_VS:
		return NVME_VERSION;
	case REG_INTMS:
	case REG_INTMC:
		return c->intms;
	case REG_CC:
		return c->cc;
	case REG_CSTS:
		return c->csts;
	case REG_AQA:
		return c->aqa;
	case REG_ASQ:
		return (uint32_t)c->asq;
	case REG_ASQ + 4:
		return (uint32_t)(c->asq >> 32);
	case REG_ACQ:
		return (uint32_t)c->acq;
	case REG_ACQ + 4:
		return (uint32_t)(c->acq >> 32);
	default:
		return 0;
	}
}

static void reg_write32(struct nvme_ctrl *c, uint64_t off, uint32_t val)
{
	bool en = c->cc & CC_EN;

	switch (off) {
	case REG_INTMS:
		__atomic_or_fetch(&c->intms, val, __ATOMIC_RELEASE);
		intx_update(c);
		break;
	case REG_INTMC:
		__atomic_and_fetch(&c->intms, ~val, __ATOMIC_RELEASE);
		intx_update(c);
		break;
	case REG_CC:
		cc_write(c, val);
		break;
	case REG_AQA:
		if (!en)
			c->aqa = val & 0x0fff0fffu;
		break;
	case REG_ASQ:
	case REG_ASQ + 4:
	case REG_ACQ:
	case REG_ACQ + 4: {
		uint64_t *r = off < REG_ACQ ? &c->asq : &c->acq;
		unsigned shift = (off & 4) ? 32 : 0;

		if (!en)
			*r = (*r & ~(0xffffffffull << shift)) | ((uint64_t)val << shift);
		break;
	}
	case REG_NSSR: /* CAP.NSSRS is 0: subsystem reset is not supported */
	default:
		break;
	}
}

static uint64_t nvme_bar_read(struct pci_func *f, int bar, uint64_t offset, unsigned size)
{
	struct nvme_ctrl *c = f->softc;
	uint64_t v;

	if (bar != 0 || offset >= NVME_DOORBELL_BASE)
		return 0; /* doorbells are write-only */
	pthread_mutex_lock(&c->lock);
	v = reg_read32(c, offset & ~3ull) | (uint64_t)reg_read32(c, (offset & ~3ull) + 4) << 32;
	pthread_mutex_unlock(&c->lock);
	v >>= 8 * (offset & 3);
	return size >= 8 ? v : v & ((1ull << (8 * size)) - 1);
}

static void nvme_bar_write(struct pci_func *f, int bar, uint64_t offset, unsigned size,
                           uint64_t val)
{
	struct nvme_ctrl *c = f->softc;

	if (bar != 0)
		return;
	if (offset >= NVME_DOORBELL_BASE) {
		doorbell_write(c, offset, size, (uint32_t)val);
		return;
	}
	if ((offset & 3) || (size != 4 && size != 8)) {
		guest_warn("register write at 0x%llx size %u ignored", (unsigned long long)offset,
		           size);
		return;
	}
	pthread_mutex_lock(&c->lock);
	reg_write32(c, offset, (uint32_t)val);
	if (size == 8)
		reg_write32(c, offset + 4, (uint32_t)(val >> 32));
	pthread_mutex_unlock(&c->lock);
}

/* ---- options and creation ---- */

static const char *const nvme_keys[] = {
    "device", "path", "ram", "maxq",    "qsz",    "ioslots", "sectsz",   "ser",
    "eui64",  "dsm",  "ro",  "nocache", "direct", "sync",    "nodelete", "sectorsize",
};

static int check_keys(struct config_node *node, char *err, size_t errlen)
{
	for (struct config_node *k = config_node_first(node); k; k = config_node_next(k)) {
		bool known = false;

		for (size_t i = 0; i < sizeof(nvme_keys) / sizeof(nvme_keys[0]); i++)
			known = known || strcmp(config_node_name(k), nvme_keys[i]) == 0;
		if (!known) {
			snprintf(err, errlen, "unknown option '%s'", config_node_name(k));
			return -1;
		}
	}
	return 0;
}

static int get_uint(struct config_node *node, const char *key, uint64_t min, uint64_t max,
                    uint64_t def, uint64_t *out, char *err, size_t errlen)
{
	const char *v = config_node_get(node, key);

	*out = def;
	if (v != NULL && parse_uint(v, min, max, out) < 0) {
		snprintf(err, errlen, "%s: want %llu-%llu, not '%s'", key, (unsigned long long)min,
		         (unsigned long long)max, v);
		return -1;
	}
	return 0;
}

/* ram=MiB: an anonymous memory file standing in for the image. */
static int make_ram_disk(struct config_node *node, const char *mib, int *fd, char *err,
                         size_t errlen)
{
	char path[64];
	uint64_t n;

	if (parse_uint(mib, 1, 1u << 20, &n) < 0) {
		snprintf(err, errlen, "ram: want a size in MiB (1-1048576), not '%s'", mib);
		return -1;
	}
	*fd = memfd_create("khyve-nvme", MFD_CLOEXEC);
	if (*fd < 0 || ftruncate(*fd, (off_t)(n << 20)) < 0) {
		snprintf(err, errlen, "ram: cannot make a %llu MiB memory disk: %s",
		         (unsigned long long)n, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", *fd);
	return config_node_set(node, "path", path);
}

static int parse_dsm(struct nvme_ctrl *c, struct config_node *node, char *err, size_t errlen)
{
	const char *v = config_node_get(node, "dsm");

	if (v == NULL || strcmp(v, "auto") == 0)
		c->dsm = blockif_can_discard(c->bi);
	else if (strcmp(v, "enable") == 0)
		c->dsm = true;
	else if (strcmp(v, "disable") == 0)
		c->dsm = false;
	else {
		snprintf(err, errlen, "dsm: want auto, enable or disable, not '%s'", v);
		return -1;
	}
	return 0;
}

static uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

/* Everything the options say; 0, or -1 with `err`. */
static int parse_options(struct nvme_ctrl *c, struct config_node *node, struct blockif_opts *o,
                         const char **path, int *ramfd, char *err, size_t errlen)
{
	const char *ram = config_node_get(node, "ram"), *ser = config_node_get(node, "ser");
	uint64_t maxq, qsz, slots, sectsz, eui;

	if (check_keys(node, err, errlen) < 0 ||
	    get_uint(node, "maxq", 1, NVME_MAX_IOQ, NVME_DEF_IOQ, &maxq, err, errlen) < 0 ||
	    get_uint(node, "qsz", 2, NVME_MAX_QSZ, NVME_DEF_QSZ, &qsz, err, errlen) < 0 ||
	    get_uint(node, "ioslots", 1, NVME_MAX_IOSLOTS, NVME_DEF_IOSLOTS, &slots, err, errlen) <
	        0 ||
	    get_uint(node, "sectsz", 512, 8192, 0, &sectsz, err, errlen) < 0 ||
	    get_uint(node, "eui64", 0, UINT64_MAX, 0, &eui, err, errlen) < 0)
		return -1;
	if (sectsz != 0 && sectsz != 512 && sectsz != 4096 && sectsz != 8192) {
		snprintf(err, errlen, "sectsz: want 512, 4096 or 8192, not %llu",
		         (unsigned long long)sectsz);
		return -1;
	}
	if (ram != NULL && config_node_get(node, "path") != NULL) {
		snprintf(err, errlen, "give a disk path or ram=MiB, not both");
		return -1;
	}
	if (ser != NULL && strlen(ser) > sizeof(c->serial)) {
		snprintf(err, errlen, "ser: at most 20 characters");
		return -1;
	}
	if (ram != NULL && make_ram_disk(node, ram, ramfd, err, errlen) < 0)
		return -1;
	if (blockif_parse_config(node, path, o, err, errlen) < 0)
		return -1;
	if (sectsz != 0)
		o->sectsz = o->psectsz = (uint32_t)sectsz;
	c->maxq = (unsigned)maxq;
	c->qsz = (uint32_t)qsz;
	c->ioslots = (unsigned)slots;
	if (ser != NULL)
		memcpy(c->serial, ser, strlen(ser));
	else
		snprintf(c->serial, sizeof(c->serial), "KHYVE%08X", fnv1a(*path));
	/* Default EUI-64: FreeBSD's OUI (as bhyve) and a hash of the serial. */
	c->eui64 = eui != 0 ? eui : (0x589cfcull << 40) | (fnv1a(c->serial) & 0xffffffffull);
	return 0;
}

static int setup_pci(struct nvme_ctrl *c, struct pci_func *f)
{
	pci_set_ids(f, 0xfb5d, 0x0a0a, 0x01, 0x08, 0x02, 0); /* mass storage, NVM, NVMe */
	pci_set_cfg(f, PCIR_SUBVEND, 2, 0xfb5d);
	pci_set_cfg(f, PCIR_SUBDEV, 2, 0x0a0a);
	if (pci_alloc_bar(f, 0, PCI_BAR_MEM64, NVME_BAR0_SIZE) < 0 ||
	    pci_add_msix_cap(f, c->maxq + 1, NVME_MSIX_BAR) < 0)
		return -1;
	pci_enable_intx(f);
	return 0;
}

static int nvme_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                     size_t errlen)
{
	struct nvme_ctrl *c = calloc(1, sizeof(*c));
	struct blockif_opts o;
	const char *path;
	int ramfd = -1;

	if (c == NULL)
		return -1;
	if (parse_options(c, node, &o, &path, &ramfd, err, errlen) < 0)
		goto fail;
	c->bi = blockif_open(path, &o, err, errlen);
	if (ramfd >= 0)
		close(ramfd);
	ramfd = -1;
	if (c->bi == NULL || parse_dsm(c, node, err, errlen) < 0)
		goto fail;
	c->sectsz = blockif_sectsz(c->bi);
	c->lbads = (uint8_t)log2u(c->sectsz);
	c->nsze = blockif_size(c->bi) / c->sectsz;
	c->ro = blockif_is_ro(c->bi);
	if (c->nsze == 0) {
		snprintf(err, errlen, "%s is smaller than one %u-byte sector", path, c->sectsz);
		goto fail;
	}
	c->f = f;
	c->mem = &m->vm.mem;
	pthread_mutex_init(&c->lock, NULL);
	pthread_rwlock_init(&c->qlock, NULL);
	pthread_mutex_init(&c->intx_lock, NULL);
	for (unsigned q = 0; q <= NVME_MAX_IOQ; q++) {
		pthread_mutex_init(&c->cq[q].lock, NULL);
		c->sq[q].c = c;
		c->sq[q].qid = (uint16_t)q;
		c->sq[q].kick_fd = c->sq[q].stop_fd = -1;
	}
	features_default(c);
	f->softc = c;
	if (setup_pci(c, f) < 0) {
		snprintf(err, errlen, "no room for the BARs");
		return -1; /* the function is half made: khyve exits */
	}
	return 0;
fail:
	if (ramfd >= 0)
		close(ramfd);
	if (c->bi != NULL)
		blockif_close(c->bi);
	free(c);
	return -1;
}

PCI_DEVEMU(nvme) = {
    .name = "nvme",
    .legacy_config = blockif_legacy_config,
    .init = nvme_init,
    .bar_read = nvme_bar_read,
    .bar_write = nvme_bar_write,
};
