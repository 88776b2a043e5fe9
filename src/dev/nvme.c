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
 * Asynchronous events: invalid doorbell writes (error events, also kept in
 * the Error Information log) and the composite temperature crossing a
 * threshold set through Set Features (a SMART event, when Asynchronous
 * Event Configuration enables it).  Events wait in a short queue until an
 * AER is outstanding and their type is not masked; reading the event's log
 * page with RAE 0 unmasks the type.
 *
 * Abort can reach a command only while it is still in its submission queue:
 * its slot is marked and the command completes with Command Abort Requested
 * when fetched.  A fetched command is in the back end (io_uring) at once
 * and is left to finish.  Delete I/O SQ waits for what is in the back end
 * and posts those completions; entries not yet fetched are implicitly
 * aborted.  Interrupt coalescing applies to I/O CQs with MSI-X (the INTx
 * level simply follows the CQs' contents), per vector, with a timerfd per
 * SQ thread for the aggregation time.
 *
 * Locks: `lock` (registers, admin queue, events) before `qlock` (write:
 * queue creation and deletion; read: doorbells), then an SQ's
 * `fetch_lock` (head and abort marks), then a CQ's own lock, then
 * `intx_lock`.  Queue threads take only `fetch_lock`, CQ locks,
 * `intx_lock` and a vector's lock, which is taken with no other held.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "backend/blockif.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "dev/nvme.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/devopts.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/sandbox.h"
#include "lib/sbuf.h"

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
#define NVME_AER_MAX       4  /* AERL + 1 */
#define NVME_EVENT_MAX     8  /* asynchronous events waiting for an AER */
#define NVME_ERRLOG_MAX    16 /* Error Information log entries (ELPE + 1) */
/* Abort marks per SQ: Abort completes at once, so more than ACL (4) can
 * wait for their commands to be fetched; beyond this, "not aborted". */
#define NVME_ABORT_MAX  16
#define NVME_DSM_MAX    256 /* ranges per Dataset Management */
#define NVME_REAP_BATCH 64
#define NVME_NSID       1u

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
#define ST_ABORT_REQ         NVME_STATUS(SCT_GENERIC, 0x07) /* Command Abort Requested */
#define ST_SQ_DELETED        NVME_STATUS(SCT_GENERIC, 0x08) /* Aborted due to SQ Deletion */
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

#define LOG_ERROR     0x01
#define LOG_SMART     0x02
#define LOG_FW_SLOT   0x03
#define LOG_PAGE_LEN  512
#define LOG_ERROR_LEN (NVME_ERRLOG_MAX * sizeof(struct nvme_error_entry))
#define GET_LOG_RAE   (1u << 15) /* CDW10: retain asynchronous event */

/* Temperatures in kelvin: the composite sensor reads a steady 50 C. */
#define NVME_TEMP      323
#define NVME_WCTEMP    343 /* warning: the default over-temperature threshold */
#define NVME_CCTEMP    373
#define CW_TEMPERATURE (1u << 1) /* SMART critical warning bit */

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
	uint64_t gpa;  /* where that memory is in the guest (saved state) */
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

/* A submission queue; for I/O queues the thread owns the slots, and
 * moves head under `fetch_lock`, which also guards the abort marks. */
struct nvme_sq {
	struct nvme_ctrl *c;
	bool created;
	uint16_t qid, cqid;
	uint32_t size;
	uint8_t *ring;
	uint64_t gpa; /* guest address of the ring (saved state) */
	uint32_t head;
	uint32_t tail; /* written by the doorbell (atomic) */
	pthread_mutex_t fetch_lock;
	uint32_t abort_slot[NVME_ABORT_MAX]; /* entries Abort asked for */
	unsigned naborts;
	/* I/O queues only */
	int kick_fd, stop_fd, timer_fd;
	pthread_t thread;
	bool running, stopping;
	bool post_on_stop; /* deletion: post what finishes; reset: post nothing */
	struct blockif_ctx *ctx;
	struct nvme_io *slots, *free;
	unsigned inflight;
	uint64_t *cid_busy; /* bitmap of the 65536 command ids */
	unsigned posted;    /* completions posted since the last interrupt */
	bool posted_error;  /* one of them with an error status */
	bool polling;       /* the thread watches the tail: no eventfd needed */
	/* Checkpoint (nvme_quiesce): `hold` asks the thread to finish what
	 * it fetched and wait; it sets `parked` once it does.  park_lock
	 * guards both with park_cond; taken with no other lock held. */
	pthread_mutex_t park_lock;
	pthread_cond_t park_cond;
	bool hold, parked;
};

/* Interrupt coalescing state of one MSI-X vector (`lock` guards it). */
struct nvme_vec {
	pthread_mutex_t lock;
	unsigned pending;  /* entries posted without an interrupt yet */
	uint64_t deadline; /* monotonic ns: the interrupt is due by then */
	bool cd;           /* Interrupt Vector Configuration: coalescing disabled */
};

/* An asynchronous event waiting for an AER (section 5.2). */
struct nvme_event {
	uint8_t type, info, lid;
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
	uint32_t feat[FEAT_COUNT];      /* FEAT_INT_COALESCING: atomic */
	uint16_t temp_over, temp_under; /* Temperature Threshold (composite) */
	uint16_t aer_cid[NVME_AER_MAX]; /* held AERs, oldest first */
	unsigned naer;
	struct nvme_event events[NVME_EVENT_MAX];
	unsigned nevents;
	uint8_t ae_masked;    /* event types reported and not yet cleared */
	uint8_t crit_warning; /* SMART critical warning */
	/* The Error Information log has a lock of its own, always taken
	 * last, so that completions posted from any thread can add to it. */
	pthread_mutex_t errlog_lock;
	uint64_t media_errors; /* SMART: completions with a media status */
	struct nvme_error_entry errlog[NVME_ERRLOG_MAX]; /* ring, by error count */
	uint64_t error_count;
	uint64_t errlog_base; /* error_count at the last reset: older entries are gone */
	struct nvme_sq sq[NVME_MAX_IOQ + 1];
	struct nvme_cq cq[NVME_MAX_IOQ + 1];
	struct nvme_vec vec[NVME_MAX_IOQ + 1];
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

/* A new Error Information entry (section 5.16.1.2) for command `cid` of
 * queue `sqid` (0xffff for either: not tied to one).  The count identifies
 * the entry and survives resets (the spec keeps it across power cycles);
 * the entries do not (errlog_base).  Takes errlog_lock. */
static void errlog_add(struct nvme_ctrl *c, uint16_t sqid, uint16_t cid, uint16_t status)
{
	struct nvme_error_entry *e;

	pthread_mutex_lock(&c->errlog_lock);
	e = &c->errlog[c->error_count % NVME_ERRLOG_MAX];
	memset(e, 0, sizeof(*e));
	e->error_count = ++c->error_count;
	e->sqid = sqid;
	e->cid = cid;
	e->status = status;
	e->param_loc = 0xffff;
	if ((status >> 9 & 7) == SCT_MEDIA)
		c->media_errors++;
	pthread_mutex_unlock(&c->errlog_lock);
}

/* Aborts the host asked for (Abort, Delete I/O SQ) are not errors. */
static bool status_is_error(uint16_t status)
{
	uint16_t st = status & (uint16_t) ~(NVME_DNR | 1u);

	return st != ST_OK && st != ST_ABORT_REQ && st != ST_SQ_DELETED;
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
	/* The ring's pointer was taken at Create I/O CQ: tell a migration's
	 * dirty tracking of this entry (vmm/mem.h). */
	gmem_mark_dirty(sq->c->mem, cq->gpa + (uint64_t)cq->tail * NVME_CQE_SIZE, NVME_CQE_SIZE);
	if (cq->tail + 1 == cq->size)
		cq->phase = !cq->phase;
	__atomic_store_n(&cq->tail, (cq->tail + 1) % cq->size, __ATOMIC_RELEASE);
	cq->reserved--;
	pthread_mutex_unlock(&cq->lock);
	/* A failed command leaves an Error Information entry; its status
	 * field carries the phase tag as posted (section 5.16.1.2). */
	if (status_is_error(status))
		errlog_add(sq->c, sq->qid, cid, sf);
}

/* ---- interrupt coalescing (Set Features 08h and 09h, section 5.27.1) ---- */

/*
 * Count `n` entries just posted on I/O CQ `cq`; true when their interrupt
 * may wait until *deadline.  A vector aggregates THR + 1 entries or TIME
 * x 100 us from its first entry, whichever comes first.  Either field 0
 * turns coalescing off; it never applies to vector 0 (the admin CQ's: the
 * spec excludes the admin CQ), to a vector with CD set, to a batch with an
 * error (the spec recommends not delaying those), nor to INTx.
 */
static bool coalesce_defer(struct nvme_ctrl *c, struct nvme_cq *cq, unsigned n, bool error,
                           uint64_t *deadline)
{
	uint32_t v = __atomic_load_n(&c->feat[FEAT_INT_COALESCING], __ATOMIC_RELAXED);
	uint64_t thr = (v & 0xff) + 1, time_ns = ((v >> 8) & 0xff) * 100000ull;
	struct nvme_vec *vec = &c->vec[cq->vector];
	uint64_t now;
	bool defer;

	if (thr == 1 || time_ns == 0 || cq->vector == 0 || !pci_msix_enabled(c->f))
		return false;
	now = monotonic_ns();
	pthread_mutex_lock(&vec->lock);
	if (vec->pending == 0)
		vec->deadline = now + time_ns;
	vec->pending += n;
	defer = !vec->cd && !error && vec->pending < thr && now < vec->deadline;
	if (!defer)
		vec->pending = 0;
	*deadline = vec->deadline;
	pthread_mutex_unlock(&vec->lock);
	return defer;
}

/* Take the entries waiting on the CQ's vector: true when there were any
 * and their time is up (or `force`); else *deadline says when it will be. */
static bool coalesce_due(struct nvme_ctrl *c, struct nvme_cq *cq, bool force, uint64_t *deadline)
{
	struct nvme_vec *vec = &c->vec[cq->vector];
	uint64_t now = monotonic_ns();
	bool due;

	pthread_mutex_lock(&vec->lock);
	due = vec->pending > 0 && (force || now >= vec->deadline);
	*deadline = vec->pending > 0 && !due ? vec->deadline : 0;
	if (due)
		vec->pending = 0;
	pthread_mutex_unlock(&vec->lock);
	return due;
}

/* Wake this SQ's thread at `deadline` (monotonic ns); false on failure,
 * when the caller must interrupt now rather than lose the interrupt. */
static bool sq_timer_arm(struct nvme_sq *sq, uint64_t deadline)
{
	struct itimerspec its = {.it_value = ns_to_timespec(deadline)};

	if (timerfd_settime(sq->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		return true;
	log_ratelimited(&nvme_rl, LOG_ERR, "nvme: SQ %u: coalescing timer: %s", sq->qid,
	                strerror(errno));
	return false;
}

/* End of a round of the SQ thread: interrupt for what it posted, unless
 * coalescing holds the interrupt back (then the timer brings it). */
static void sq_signal(struct nvme_sq *sq, struct nvme_cq *cq)
{
	struct nvme_ctrl *c = sq->c;
	uint64_t deadline;

	if (sq->posted == 0)
		return;
	if (!cq->ien || !coalesce_defer(c, cq, sq->posted, sq->posted_error, &deadline) ||
	    !sq_timer_arm(sq, deadline))
		cq_notify(c, cq);
	sq->posted = 0;
	sq->posted_error = false;
}

/* The thread's coalescing timer fired. */
static void sq_coalesce_timeout(struct nvme_sq *sq, struct nvme_cq *cq)
{
	uint64_t ticks, deadline;

	if (read(sq->timer_fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		log_ratelimited(&nvme_rl, LOG_ERR, "nvme: SQ %u: coalescing timer read failed",
		                sq->qid);
	if (coalesce_due(sq->c, cq, false, &deadline))
		cq_notify(sq->c, cq);
	else if (deadline != 0 && !sq_timer_arm(sq, deadline))
		cq_notify(sq->c, cq); /* a later batch: watch its deadline too */
}

/* ---- asynchronous events (section 5.2) and the error log (5.16.1.2) ---- */

/* The admin queue runs: enabled, ready, not shut down. */
static bool admin_ready(const struct nvme_ctrl *c)
{
	return (c->csts & CSTS_RDY) && !(c->csts & CSTS_SHST_MASK);
}

/* Complete held AER `i` (`lock` held, a CQ slot reserved). */
static void aer_complete(struct nvme_ctrl *c, unsigned i, uint16_t status, uint32_t dw0)
{
	uint16_t cid = c->aer_cid[i];

	memmove(&c->aer_cid[i], &c->aer_cid[i + 1], (c->naer - i - 1) * sizeof(c->aer_cid[0]));
	c->naer--;
	cq_post(&c->cq[0], &c->sq[0], cid, status, dw0);
}

/*
 * Report waiting events whose type is not masked to held AERs, oldest
 * first; a reported type stays masked until the host reads its log page
 * with RAE 0 (section 5.2).  With the admin CQ full, the rest waits for
 * its head doorbell (cq_reserve marks it stalled).  `lock` held.
 */
static void aer_deliver(struct nvme_ctrl *c)
{
	bool posted = false;

	for (unsigned i = 0; i < c->nevents && c->naer > 0 && admin_ready(c);) {
		struct nvme_event e = c->events[i];

		if (c->ae_masked & (1u << e.type)) {
			i++;
			continue;
		}
		if (!cq_reserve(&c->cq[0]))
			break;
		aer_complete(c, 0, ST_OK, NVME_AE_DW0(e.type, e.info, e.lid));
		memmove(&c->events[i], &c->events[i + 1], (c->nevents - i - 1) * sizeof(e));
		c->nevents--;
		c->ae_masked |= (uint8_t)(1u << e.type);
		posted = true;
	}
	if (posted)
		cq_notify(c, &c->cq[0]);
}

/* Queue an event for aer_deliver(); one already waiting with the same
 * type and information says it all.  When the queue is full the event
 * is dropped (its error log entry, if any, stays).  `lock` held. */
static void ae_raise(struct nvme_ctrl *c, uint8_t type, uint8_t info, uint8_t lid)
{
	for (unsigned i = 0; i < c->nevents; i++)
		if (c->events[i].type == type && c->events[i].info == info)
			return;
	if (c->nevents == NVME_EVENT_MAX) {
		guest_warn("asynchronous event queue full: event %u/0x%02x dropped", type, info);
		return;
	}
	c->events[c->nevents++] = (struct nvme_event){.type = type, .info = info, .lid = lid};
}

/* Reading log page `lid` with RAE 0 clears its event type: unmasked, and
 * events of it not yet reported are dropped, since the host has just read
 * what they would point to (section 5.2).  `lock` held. */
static void ae_clear(struct nvme_ctrl *c, unsigned lid)
{
	unsigned kept = 0;

	for (unsigned i = 0; i < c->nevents; i++)
		if (c->events[i].lid != lid)
			c->events[kept++] = c->events[i];
	c->nevents = kept;
	if (lid == LOG_ERROR)
		c->ae_masked &= (uint8_t) ~(1u << NVME_AE_ERROR);
	else if (lid == LOG_SMART)
		c->ae_masked &= (uint8_t) ~(1u << NVME_AE_SMART);
}

/*
 * An invalid doorbell write, which is ignored: an error log entry, and an
 * error event when an AER is outstanding -- the condition the spec puts on
 * these events (Base Specification 2.1, section 3.3.1.2).  `lock` held.
 */
static void doorbell_error(struct nvme_ctrl *c, uint8_t info)
{
	if (!admin_ready(c))
		return;
	/* The status "most applicable" to an error without a command. */
	errlog_add(c, 0xffff, 0xffff,
	           info == NVME_AEI_INVALID_DB_REG ? NVME_STATUS(SCT_CMD, 0x01)
	                                           : NVME_STATUS(SCT_GENERIC, 0x02));
	if (c->naer > 0)
		ae_raise(c, NVME_AE_ERROR, info, LOG_ERROR);
	aer_deliver(c);
}

/* The same from a doorbell that does not hold `lock`. */
static void doorbell_error_unlocked(struct nvme_ctrl *c, uint8_t info)
{
	pthread_mutex_lock(&c->lock);
	doorbell_error(c, info);
	pthread_mutex_unlock(&c->lock);
}

/* SMART critical warning bit 1 follows the composite temperature against
 * the thresholds; its rising edge is an event when AEC bit 1 allows. */
static void temperature_check(struct nvme_ctrl *c)
{
	bool hot = NVME_TEMP >= c->temp_over || NVME_TEMP <= c->temp_under;
	bool was = c->crit_warning & CW_TEMPERATURE;

	if (hot)
		c->crit_warning |= CW_TEMPERATURE;
	else
		c->crit_warning &= (uint8_t)~CW_TEMPERATURE;
	if (hot && !was && (c->feat[FEAT_ASYNC_EVENT_CFG] & CW_TEMPERATURE))
		ae_raise(c, NVME_AE_SMART, NVME_AEI_TEMPERATURE, LOG_SMART);
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
	d[111] = 1;                   /* CNTRLTYPE: I/O controller */
	d[258] = 3;                   /* ACL: 4 aborts */
	d[259] = NVME_AER_MAX - 1;    /* AERL */
	d[260] = 0x03;                /* FRMW: one slot, read-only */
	d[261] = 0x00;                /* LPA */
	d[262] = NVME_ERRLOG_MAX - 1; /* ELPE */
	put_le(d + 266, NVME_WCTEMP, 2);
	put_le(d + 268, NVME_CCTEMP, 2);
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

	d[0] = c->crit_warning;
	put_le(d + 1, NVME_TEMP, 2); /* composite temperature */
	d[3] = 100;                  /* available spare, % */
	d[4] = 10;                   /* spare threshold */
	put_le(d + 32, (rd + 999) / 1000, 8);
	put_le(d + 48, (wr + 999) / 1000, 8);
	put_le(d + 64, __atomic_load_n(&c->read_cmds, __ATOMIC_RELAXED), 8);
	put_le(d + 80, __atomic_load_n(&c->write_cmds, __ATOMIC_RELAXED), 8);
	put_le(d + 112, 1, 8); /* power cycles */
	pthread_mutex_lock(&c->errlog_lock);
	put_le(d + 160, c->media_errors, 8); /* media and data integrity errors */
	put_le(d + 176, c->error_count, 8);  /* error log entries, lifetime */
	pthread_mutex_unlock(&c->errlog_lock);
}

/* The Error Information log: newest entry first, unused ones zero. */
static void error_log(struct nvme_ctrl *c, uint8_t *d)
{
	pthread_mutex_lock(&c->errlog_lock);
	for (uint64_t i = 0; i < NVME_ERRLOG_MAX && i < c->error_count - c->errlog_base; i++) {
		uint64_t n = c->error_count - 1 - i;

		memcpy(d + i * sizeof(struct nvme_error_entry), &c->errlog[n % NVME_ERRLOG_MAX],
		       sizeof(struct nvme_error_entry));
	}
	pthread_mutex_unlock(&c->errlog_lock);
}

static uint16_t admin_get_log(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	uint8_t page[LOG_ERROR_LEN > LOG_PAGE_LEN ? LOG_ERROR_LEN : LOG_PAGE_LEN] = {0}, *out;
	unsigned lid = cmd->cdw10 & 0xff;
	uint64_t numd = ((uint64_t)(cmd->cdw11 & 0xffff) << 16 | cmd->cdw10 >> 16) + 1;
	uint64_t offset = (uint64_t)cmd->cdw13 << 32 | cmd->cdw12;
	uint64_t len = numd * 4, log_len;
	uint16_t st;

	switch (lid) {
	case LOG_ERROR:
		error_log(c, page);
		log_len = LOG_ERROR_LEN;
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
	if (st == ST_OK && !(cmd->cdw10 & GET_LOG_RAE))
		ae_clear(c, lid);
	return st;
}

/* ---- features (sections 5.15 Get, 5.27 Set; 5.27.1 feature ids) ---- */

static uint32_t num_queues_value(unsigned nsq, unsigned ncq)
{
	return (uint32_t)(nsq - 1) | (uint32_t)(ncq - 1) << 16;
}

/* The Temperature Threshold that CDW11 selects: TMPSEL 0 (composite) or
 * Fh (all sensors: there is only the composite one), THSEL over or
 * under; NULL for sensors that do not exist or reserved values. */
static uint16_t *temp_threshold(struct nvme_ctrl *c, uint32_t v)
{
	unsigned tmpsel = (v >> 16) & 0xf, thsel = (v >> 20) & 3;

	if ((tmpsel != 0 && tmpsel != 0xf) || thsel > 1)
		return NULL;
	return thsel == 0 ? &c->temp_over : &c->temp_under;
}

/* Interrupt Vector Configuration: the vector must serve an I/O CQ. */
static uint16_t set_vector_config(struct nvme_ctrl *c, uint32_t v)
{
	unsigned iv = v & 0xffff;
	bool used = false;

	for (unsigned q = 1; q <= c->maxq && iv <= c->maxq; q++)
		used = used || (c->cq[q].created && c->cq[q].vector == iv);
	if (!used)
		return ST_INVALID_FIELD;
	pthread_mutex_lock(&c->vec[iv].lock);
	c->vec[iv].cd = v & (1u << 16);
	pthread_mutex_unlock(&c->vec[iv].lock);
	return ST_OK;
}

static uint16_t set_num_queues(struct nvme_ctrl *c, uint32_t v, uint32_t *dw0)
{
	unsigned nsq = (v & 0xffff) + 1, ncq = (v >> 16) + 1;

	if ((v & 0xffff) == 0xffff || (v >> 16) == 0xffff)
		return ST_INVALID_FIELD;
	nsq = nsq < c->maxq ? nsq : c->maxq;
	ncq = ncq < c->maxq ? ncq : c->maxq;
	c->feat[FEAT_NUM_QUEUES] = num_queues_value(nsq, ncq);
	*dw0 = c->feat[FEAT_NUM_QUEUES];
	return ST_OK;
}

static uint16_t admin_set_features(struct nvme_ctrl *c, const struct nvme_sqe *cmd, uint32_t *dw0)
{
	unsigned fid = cmd->cdw10 & 0xff;
	uint32_t v = cmd->cdw11;
	uint16_t *th;

	switch (fid) {
	case FEAT_NUM_QUEUES:
		return set_num_queues(c, v, dw0);
	case FEAT_TEMP_THRESHOLD:
		th = temp_threshold(c, v);
		if (th == NULL)
			return ST_INVALID_FIELD;
		*th = (uint16_t)v;
		temperature_check(c);
		return ST_OK;
	case FEAT_INT_COALESCING: /* read by the queue threads */
		__atomic_store_n(&c->feat[fid], v & 0xffff, __ATOMIC_RELAXED);
		return ST_OK;
	case FEAT_INT_VECTOR_CFG:
		return set_vector_config(c, v);
	case FEAT_POWER_MGMT:
		if ((v & 0x1f) != 0)
			return ST_INVALID_FIELD; /* only power state 0 exists */
		c->feat[fid] = v;
		return ST_OK;
	case FEAT_ARBITRATION:
	case FEAT_ERROR_RECOVERY:
	case FEAT_VOLATILE_WC:
	case FEAT_WRITE_ATOMICITY:
	case FEAT_ASYNC_EVENT_CFG: /* bit 1 (temperature) is the one used */
		c->feat[fid] = v;
		return ST_OK;
	default:
		return ST_INVALID_FIELD;
	}
}

/* Interrupt Vector Configuration of the vector CDW11 names; vector 0 is
 * the admin CQ's and never coalesced, so CD reads as set there. */
static uint16_t get_vector_config(struct nvme_ctrl *c, uint32_t v, uint32_t *dw0)
{
	unsigned iv = v & 0xffff;
	bool cd;

	if (iv > c->maxq)
		return ST_INVALID_FIELD;
	pthread_mutex_lock(&c->vec[iv].lock);
	cd = iv == 0 || c->vec[iv].cd;
	pthread_mutex_unlock(&c->vec[iv].lock);
	*dw0 = iv | (cd ? 1u << 16 : 0);
	return ST_OK;
}

static uint16_t admin_get_features(struct nvme_ctrl *c, const struct nvme_sqe *cmd, uint32_t *dw0)
{
	unsigned fid = cmd->cdw10 & 0xff, sel = (cmd->cdw10 >> 8) & 7;
	uint16_t *th;

	if (fid == 0 || fid >= FEAT_COUNT || fid == 0x03)
		return ST_INVALID_FIELD;
	if (sel == 3) { /* supported capabilities: changeable, not saveable */
		*dw0 = 0x4;
		return ST_OK;
	}
	switch (fid) {
	case FEAT_TEMP_THRESHOLD:
		th = temp_threshold(c, cmd->cdw11);
		if (th == NULL)
			return ST_INVALID_FIELD;
		*dw0 = *th;
		return ST_OK;
	case FEAT_INT_VECTOR_CFG:
		return get_vector_config(c, cmd->cdw11, dw0);
	default:
		*dw0 = __atomic_load_n(&c->feat[fid], __ATOMIC_RELAXED);
		return ST_OK;
	}
}

/* Reset values; the queue threads are gone (or not yet started). */
static void features_default(struct nvme_ctrl *c)
{
	memset(c->feat, 0, sizeof(c->feat));
	c->feat[FEAT_VOLATILE_WC] = 1;
	c->feat[FEAT_NUM_QUEUES] = num_queues_value(c->maxq, c->maxq);
	c->temp_over = NVME_WCTEMP; /* the spec's default: WCTEMP */
	c->temp_under = 0;
	temperature_check(c); /* cool again; AEC is 0, so no event */
	for (unsigned v = 0; v <= NVME_MAX_IOQ; v++) {
		c->vec[v].pending = 0;
		c->vec[v].cd = false;
	}
}

/* ---- I/O submission queue threads ---- */

#define WATCH_KICK  1
#define WATCH_STOP  2
#define WATCH_TIMER 4

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

/* Post a completion of this SQ into its reserved CQ slot. */
static void sq_post(struct nvme_sq *sq, uint16_t cid, uint16_t status)
{
	cq_post(&sq->c->cq[sq->cqid], sq, cid, status, 0);
	sq->posted++;
	sq->posted_error = sq->posted_error || status != ST_OK;
}

/* Post the completion of `io` and free its slot. */
static void io_finish(struct nvme_sq *sq, struct nvme_io *io, uint16_t status)
{
	cid_release(sq, io->cid);
	sq_post(sq, io->cid, status);
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
		sq_post(sq, cmd->cid, ST_CID_CONFLICT);
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

/* Dataset Management ranges not yet started that would deallocate. */
static bool dsm_ranges_left(const struct nvme_io *io)
{
	for (unsigned i = io->dsm_next; i < io->dsm_count; i++)
		if (io->dsm[i].nlb != 0)
			return true;
	return false;
}

/* SMART counters, or a warning for a failed request. */
static void io_account(struct nvme_ctrl *c, const struct nvme_io *io)
{
	if (io->br.result != 0)
		guest_warn("SQ %u: I/O error %d (opcode 0x%x)", io->sq->qid, io->br.result,
		           io->opc);
	else if (io->opc == IO_READ) {
		__atomic_add_fetch(&c->bytes_read, io->br.len, __ATOMIC_RELAXED);
		__atomic_add_fetch(&c->read_cmds, 1, __ATOMIC_RELAXED);
	} else if (io->opc == IO_WRITE) {
		__atomic_add_fetch(&c->bytes_written, io->br.len, __ATOMIC_RELAXED);
		__atomic_add_fetch(&c->write_cmds, 1, __ATOMIC_RELAXED);
	}
}

/*
 * A finished back-end request: continue a DSM, or complete the command.
 * While the SQ stops (`stopping`), a DSM goes no further and reports the
 * ranges it skipped as aborted by the deletion; after a reset nothing is
 * posted at all (sq->post_on_stop).
 */
static void io_done(struct nvme_sq *sq, struct nvme_io *io, bool stopping)
{
	uint16_t st;

	if (!stopping && io->opc == IO_DSM && io->br.result == 0 && io_next_dsm_range(sq, io))
		return;
	io_account(sq->c, io);
	st = io_result_status(io);
	if (st == ST_OK && io->opc == IO_DSM && dsm_ranges_left(io))
		st = ST_SQ_DELETED;
	if (!stopping || sq->post_on_stop) {
		io_finish(sq, io, st);
	} else {
		cid_release(sq, io->cid);
		io_free(sq, io);
	}
}

/* ---- Abort (section 5.1) ---- */

/* Take the abort mark of SQ slot `slot`, if any (`fetch_lock` held). */
static bool sq_take_mark(struct nvme_sq *sq, uint32_t slot)
{
	for (unsigned i = 0; i < sq->naborts; i++) {
		if (sq->abort_slot[i] == slot) {
			sq->abort_slot[i] = sq->abort_slot[--sq->naborts];
			return true;
		}
	}
	return false;
}

/*
 * Mark the first entry with command id `cid` among those the controller
 * has not fetched yet: fetching it will complete it with Command Abort
 * Requested instead of running it, so nothing of it happens after the
 * Abort completes (an immediate abort, 2.1 section 5.2.1.1).  False when no
 * such entry waits, or no mark is free.  `lock` held (the SQ stays).
 */
static bool sq_mark_abort(struct nvme_sq *sq, uint16_t cid)
{
	bool marked = false;
	uint32_t tail;

	pthread_mutex_lock(&sq->fetch_lock);
	tail = __atomic_load_n(&sq->tail, __ATOMIC_ACQUIRE);
	for (uint32_t s = sq->head; s != tail; s = (s + 1) % sq->size) {
		uint16_t ecid;

		memcpy(&ecid, sq->ring + (size_t)s * NVME_SQE_SIZE + 2, sizeof(ecid));
		if (ecid != cid)
			continue;
		for (unsigned i = 0; i < sq->naborts && !marked; i++)
			marked = sq->abort_slot[i] == s; /* asked twice */
		if (!marked && sq->naborts < NVME_ABORT_MAX) {
			sq->abort_slot[sq->naborts++] = s;
			marked = true;
		}
		break;
	}
	pthread_mutex_unlock(&sq->fetch_lock);
	return marked;
}

/* Abort a held AER with id `cid`: it completes now.  `lock` held. */
static bool aer_abort(struct nvme_ctrl *c, uint16_t cid)
{
	for (unsigned i = 0; i < c->naer; i++) {
		if (c->aer_cid[i] != cid)
			continue;
		if (!cq_reserve(&c->cq[0]))
			return false; /* no room: it stays held */
		aer_complete(c, i, ST_ABORT_REQ, 0);
		return true;
	}
	return false;
}

/*
 * Abort: a held AER, or a command still in its SQ.  A fetched command is
 * not aborted: its request is already in the back end, whose io_uring
 * cannot recall it.  DW0 bit 0 (IANP): 0 aborted, 1 not.
 */
static uint16_t admin_abort(struct nvme_ctrl *c, const struct nvme_sqe *cmd, uint32_t *dw0)
{
	unsigned sqid = cmd->cdw10 & 0xffff;
	uint16_t cid = (uint16_t)(cmd->cdw10 >> 16);
	bool aborted = false;

	if (sqid <= c->maxq && c->sq[sqid].created)
		aborted = (sqid == 0 && aer_abort(c, cid)) || sq_mark_abort(&c->sq[sqid], cid);
	*dw0 = aborted ? 0 : 1;
	return ST_OK;
}

/* ---- the I/O SQ thread ---- */

/* Fetch commands while there are free slots and completion room; an
 * entry marked by Abort completes at once. */
static void sq_fetch(struct nvme_sq *sq)
{
	struct nvme_cq *cq = &sq->c->cq[sq->cqid];

	pthread_mutex_lock(&sq->fetch_lock);
	for (uint32_t i = 0; i < sq->size && sq->free != NULL; i++) {
		uint32_t tail = __atomic_load_n(&sq->tail, __ATOMIC_ACQUIRE), slot = sq->head;
		struct nvme_sqe cmd;
		struct nvme_io *io;

		if (slot == tail || !cq_reserve(cq))
			break;
		memcpy(&cmd, sq->ring + (size_t)slot * NVME_SQE_SIZE, sizeof(cmd));
		__atomic_store_n(&sq->head, (slot + 1) % sq->size, __ATOMIC_RELEASE);
		if (sq->naborts > 0 && sq_take_mark(sq, slot)) {
			sq_post(sq, cmd.cid, ST_ABORT_REQ);
			continue;
		}
		io = sq->free;
		sq->free = io->next_free;
		sq->inflight++;
		io_start(sq, io, &cmd);
	}
	pthread_mutex_unlock(&sq->fetch_lock);
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
 * need not signal the eventfd.  When work shows up the flag stays set: the
 * busy loop looks at the tail on every round (sq_fetch), and an eventfd
 * write plus its read for each doorbell of a busy queue cost more than the
 * request (bench/nvme-host, tmpfs QD32).  It is cleared before the last
 * look (both sides use sequentially consistent accesses), so no doorbell
 * is missed once the thread sleeps.  True when work showed up.
 */
static bool sq_ready(void *arg)
{
	struct nvme_sq *sq = arg;

	return sq_has_work(sq, &sq->c->cq[sq->cqid]);
}

/* From here on a doorbell signals the thread's eventfd again. */
static void sq_stop_polling(struct nvme_sq *sq)
{
	__atomic_store_n(&sq->polling, false, __ATOMIC_SEQ_CST);
}

static bool sq_poll_for_work(struct nvme_sq *sq, struct nvme_cq *cq)
{
	__atomic_store_n(&sq->polling, true, __ATOMIC_SEQ_CST);
	if (blockif_spin(blockif_default_poll_us(), sq_ready, sq, &sq->stopping))
		return true;
	sq_stop_polling(sq);
	return sq_has_work(sq, cq);
}

/*
 * The SQ is deleted or the controller reset: wait for what is in the back
 * end.  Deletion posts those completions before its own (section 5.7),
 * and interrupts without coalescing, since no thread may be left to
 * watch the vector's deadline; entries not yet fetched are implicitly
 * aborted.  A reset posts nothing: the host has forgotten the queues.
 */
static void sq_drain(struct nvme_sq *sq, struct nvme_cq *cq, struct blockif_req **done)
{
	uint64_t deadline;

	while (sq->inflight > 0) {
		uint32_t fired = 0;
		unsigned n = blockif_wait(sq->ctx, done, NVME_REAP_BATCH, &fired);

		for (unsigned i = 0; i < n; i++)
			io_done(sq, (struct nvme_io *)done[i], true);
	}
	if (sq->post_on_stop && (coalesce_due(sq->c, cq, true, &deadline) || sq->posted > 0))
		cq_notify(sq->c, cq);
	sq->posted = 0;
}

/*
 * A checkpoint holds the queue (nvme_quiesce): fetch nothing more, let
 * every fetched command finish (a Dataset Management runs all its
 * ranges), post its completion and interrupt at once (coalescing would
 * need this thread's timer), then wait until released or stopped.
 * Entries not fetched stay in the ring for after the hold.
 */
static void sq_park(struct nvme_sq *sq, struct nvme_cq *cq, struct blockif_req **done)
{
	uint64_t deadline;

	while (sq->inflight > 0 && !__atomic_load_n(&sq->stopping, __ATOMIC_ACQUIRE)) {
		uint32_t fired = 0;
		unsigned n;
		uint64_t v;

		blockif_submit(sq->ctx); /* a DSM's next range */
		n = blockif_wait(sq->ctx, done, NVME_REAP_BATCH, &fired);
		for (unsigned i = 0; i < n; i++)
			io_done(sq, (struct nvme_io *)done[i], false);
		/* Take what woke us, or the wait returns at once again. */
		if ((fired & WATCH_KICK) && read(sq->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			guest_warn("SQ %u: doorbell eventfd read failed", sq->qid);
		if (fired & WATCH_TIMER)
			sq_coalesce_timeout(sq, cq);
	}
	if (coalesce_due(sq->c, cq, true, &deadline) || sq->posted > 0)
		cq_notify(sq->c, cq);
	sq->posted = 0;
	sq->posted_error = false;
	pthread_mutex_lock(&sq->park_lock);
	sq->parked = sq->inflight == 0;
	pthread_cond_broadcast(&sq->park_cond);
	while (__atomic_load_n(&sq->hold, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&sq->stopping, __ATOMIC_ACQUIRE))
		pthread_cond_wait(&sq->park_cond, &sq->park_lock);
	sq->parked = false;
	pthread_mutex_unlock(&sq->park_lock);
}

static void *sq_main(void *arg)
{
	struct nvme_sq *sq = arg;
	struct nvme_ctrl *c = sq->c;
	struct nvme_cq *cq = &c->cq[sq->cqid];
	struct blockif_req *done[NVME_REAP_BATCH];
	uint64_t v;

	sandbox_thread_enter(SANDBOX_NVME_SQ);
	for (bool busy = false;;) {
		uint32_t fired = 0;
		unsigned n;

		/* A thread a restore started runs before the sandbox is
		 * armed; it installs its filter on its first wake after. */
		sandbox_thread_enter(SANDBOX_NVME_SQ);
		n = busy ? blockif_poll(sq->ctx, done, NVME_REAP_BATCH, &fired)
		         : blockif_wait(sq->ctx, done, NVME_REAP_BATCH, &fired);
		/* The flag first: it also publishes post_on_stop. */
		bool stop =
		    __atomic_load_n(&sq->stopping, __ATOMIC_ACQUIRE) || (fired & WATCH_STOP);

		for (unsigned i = 0; i < n; i++)
			io_done(sq, (struct nvme_io *)done[i], stop);
		if (stop)
			break;
		if ((fired & WATCH_KICK) && read(sq->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			guest_warn("SQ %u: doorbell eventfd read failed", sq->qid);
		if (fired & WATCH_TIMER)
			sq_coalesce_timeout(sq, cq);
		if (__atomic_load_n(&sq->hold, __ATOMIC_ACQUIRE)) {
			sq_stop_polling(sq); /* the parked thread fetches nothing */
			sq_park(sq, cq, done);
			busy = false;
			continue;
		}
		sq_fetch(sq);
		blockif_submit(sq->ctx); /* before polling: the back end must see it */
		sq_signal(sq, cq);
		busy = sq_poll_for_work(sq, cq);
	}
	sq_drain(sq, cq, done);
	return NULL;
}

static void sq_wake(void *arg);

static void sq_release(struct nvme_sq *sq)
{
	sandbox_cancel_wake(sq_wake, sq);
	if (sq->ctx != NULL)
		blockif_ctx_destroy(sq->ctx);
	if (sq->kick_fd >= 0)
		close(sq->kick_fd);
	if (sq->stop_fd >= 0)
		close(sq->stop_fd);
	if (sq->timer_fd >= 0)
		close(sq->timer_fd);
	free(sq->slots);
	free(sq->cid_busy);
	sq->ctx = NULL;
	sq->kick_fd = sq->stop_fd = sq->timer_fd = -1;
	sq->slots = sq->free = NULL;
	sq->cid_busy = NULL;
}

/* Resources and thread of an I/O SQ; 0 or -1. */
static int sq_start_thread(struct nvme_sq *sq)
{
	char err[256];

	sq->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sq->stop_fd = eventfd(0, EFD_CLOEXEC);
	sq->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	sq->slots = calloc(sq->c->ioslots, sizeof(*sq->slots));
	sq->cid_busy = calloc(65536 / 64, sizeof(uint64_t));
	if (sq->kick_fd < 0 || sq->stop_fd < 0 || sq->timer_fd < 0 || sq->slots == NULL ||
	    sq->cid_busy == NULL)
		goto fail;
	sq->ctx = blockif_ctx_create(sq->c->bi, sq->c->ioslots, err, sizeof(err));
	if (sq->ctx == NULL) {
		log_ratelimited(&nvme_rl, LOG_ERR, "nvme: SQ %u: %s", sq->qid, err);
		goto fail;
	}
	if (blockif_ctx_watch(sq->ctx, sq->kick_fd, WATCH_KICK) < 0 ||
	    blockif_ctx_watch(sq->ctx, sq->stop_fd, WATCH_STOP) < 0 ||
	    blockif_ctx_watch(sq->ctx, sq->timer_fd, WATCH_TIMER) < 0)
		goto fail;
	sq->free = NULL;
	for (unsigned i = sq->c->ioslots; i-- > 0;) {
		sq->slots[i].sq = sq;
		sq->slots[i].next_free = sq->free;
		sq->free = &sq->slots[i];
	}
	sq->inflight = 0;
	sq->posted = 0;
	sq->posted_error = false;
	sq->stopping = false;
	sq->polling = false;
	sq->hold = sq->parked = false;
	if (pthread_create(&sq->thread, NULL, sq_main, sq) != 0)
		goto fail;
	sq->running = true;
	return 0;
fail:
	sq_release(sq);
	return -1;
}

/* Stop the thread once the back end is done; `post`: deletion (see
 * sq_drain). */
static void sq_stop_thread(struct nvme_sq *sq, bool post)
{
	uint64_t one = 1;

	if (sq->running) {
		sq->post_on_stop = post; /* published by the release below */
		__atomic_store_n(&sq->stopping, true, __ATOMIC_RELEASE);
		if (write(sq->stop_fd, &one, sizeof(one)) < 0)
			log_warn("nvme: cannot stop SQ %u", sq->qid);
		pthread_mutex_lock(&sq->park_lock);
		pthread_cond_broadcast(&sq->park_cond);
		pthread_mutex_unlock(&sq->park_lock);
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
	cq->gpa = cmd->prp1;
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
	sq->gpa = cmd->prp1;
	sq->size = size;
	sq->head = sq->tail = 0;
	sq->cqid = (uint16_t)cqid;
	rc = sq_start_thread(sq);
	if (rc == 0)
		sq->created = true;
	pthread_rwlock_unlock(&c->qlock);
	return rc == 0 ? ST_OK : ST_INTERNAL;
}

/* Called with qlock held for writing; `post`: see sq_drain(). */
static void sq_delete(struct nvme_sq *sq, bool post)
{
	sq_stop_thread(sq, post);
	sq->created = false;
	sq->naborts = 0;
}

static uint16_t admin_delete_sq(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	unsigned qid = cmd->cdw10 & 0xffff;

	if (!io_qid_valid(c, qid) || !c->sq[qid].created)
		return ST_INVALID_QID;
	pthread_rwlock_wrlock(&c->qlock);
	sq_delete(&c->sq[qid], true);
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

/* Asynchronous Event Request (section 5.2): held until an event comes
 * (aer_deliver(), at the end of admin_process()) or a reset drops it. */
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
		return admin_abort(c, cmd, dw0);
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
		uint32_t dw0 = 0, slot = sq->head;
		struct nvme_sqe cmd;
		bool held = false, marked;
		uint16_t st;

		if (!cq_reserve(cq))
			break;
		memcpy(&cmd, sq->ring + (size_t)slot * NVME_SQE_SIZE, sizeof(cmd));
		pthread_mutex_lock(&sq->fetch_lock);
		sq->head = (slot + 1) % sq->size;
		marked = sq->naborts > 0 && sq_take_mark(sq, slot);
		pthread_mutex_unlock(&sq->fetch_lock);
		st = marked ? ST_ABORT_REQ : admin_execute(c, &cmd, &dw0, &held);
		if (held) {
			cq_unreserve(cq);
			continue;
		}
		cq_post(cq, sq, cmd.cid, st, dw0);
		posted = true;
	}
	if (posted)
		cq_notify(c, cq);
	aer_deliver(c); /* events raised above, AERs just held, log pages read */
}

/* ---- controller state (sections 3.5 initialization, 3.6 shutdown, 3.7 reset) ---- */

/* Delete every I/O queue and forget the admin queue (lock held). */
static void controller_reset(struct nvme_ctrl *c)
{
	pthread_rwlock_wrlock(&c->qlock);
	for (unsigned q = 1; q <= c->maxq; q++)
		if (c->sq[q].created)
			sq_delete(&c->sq[q], false);
	for (unsigned q = 0; q <= c->maxq; q++)
		__atomic_store_n(&c->cq[q].created, false, __ATOMIC_RELEASE);
	c->sq[0].created = false;
	pthread_rwlock_unlock(&c->qlock);
	/* AERs are dropped without completions, pending events forgotten and
	 * the error log emptied (sections 5.2, 5.16.1.2). */
	c->naer = 0;
	c->nevents = 0;
	c->ae_masked = 0;
	pthread_mutex_lock(&c->errlog_lock);
	c->errlog_base = c->error_count;
	pthread_mutex_unlock(&c->errlog_lock);
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
	sq->gpa = c->asq;
	sq->size = sqs;
	sq->head = sq->tail = 0;
	sq->cqid = 0;
	sq->naborts = 0;
	sq->created = true;
	cq->ring = acq;
	cq->gpa = c->acq;
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

/* The admin SQ tail doorbell: run the new commands at once. */
static void admin_sq_doorbell(struct nvme_ctrl *c, uint32_t tail)
{
	pthread_mutex_lock(&c->lock);
	if (c->sq[0].created && tail < c->sq[0].size) {
		c->sq[0].tail = tail;
		admin_process(c);
	} else {
		guest_warn("bad admin SQ doorbell %u", tail);
		doorbell_error(c, NVME_AEI_INVALID_DB_VALUE);
	}
	pthread_mutex_unlock(&c->lock);
}

/* An I/O SQ tail doorbell: hand the tail to the queue's thread. */
static void sq_doorbell(struct nvme_ctrl *c, unsigned qid, uint32_t tail)
{
	struct nvme_sq *sq = &c->sq[qid];
	int err = -1;
	uint64_t one = 1;

	pthread_rwlock_rdlock(&c->qlock);
	if (!sq->created) {
		err = NVME_AEI_INVALID_DB_REG;
	} else if (tail >= sq->size) {
		err = NVME_AEI_INVALID_DB_VALUE;
	} else {
		__atomic_store_n(&sq->tail, tail, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&sq->polling, __ATOMIC_SEQ_CST) &&
		    write(sq->kick_fd, &one, sizeof(one)) < 0)
			guest_warn("SQ %u: cannot signal its thread", qid);
	}
	pthread_rwlock_unlock(&c->qlock);
	if (err >= 0) {
		guest_warn("SQ %u doorbell %u: no such queue or tail beyond it", qid, tail);
		doorbell_error_unlocked(c, (uint8_t)err);
	}
}

/* Move a CQ's head to `head`, which must lie among the entries posted and
 * not yet consumed ("remove an entry from an empty CQ" is an invalid
 * doorbell value, 2.1 section 3.3.1.2).  False when it does not. */
static bool cq_consume(struct nvme_cq *cq, uint32_t head, bool *was_stalled)
{
	bool ok;

	pthread_mutex_lock(&cq->lock);
	ok = head < cq->size &&
	     (head + cq->size - cq->head) % cq->size <= (cq->tail + cq->size - cq->head) % cq->size;
	if (ok) {
		__atomic_store_n(&cq->head, head, __ATOMIC_RELEASE);
		*was_stalled = cq->stalled;
		cq->stalled = false;
	}
	pthread_mutex_unlock(&cq->lock);
	return ok;
}

static void cq_doorbell(struct nvme_ctrl *c, unsigned qid, uint32_t head)
{
	struct nvme_cq *cq = &c->cq[qid];
	uint64_t one = 1;
	bool was_stalled = false;
	int err = -1;

	pthread_rwlock_rdlock(&c->qlock);
	if (!cq->created)
		err = NVME_AEI_INVALID_DB_REG;
	else if (!cq_consume(cq, head, &was_stalled))
		err = NVME_AEI_INVALID_DB_VALUE;
	for (unsigned s = 1; was_stalled && qid != 0 && s <= c->maxq; s++)
		if (c->sq[s].created && c->sq[s].cqid == qid &&
		    write(c->sq[s].kick_fd, &one, sizeof(one)) < 0)
			guest_warn("SQ %u: cannot signal its thread", s);
	pthread_rwlock_unlock(&c->qlock);
	if (err >= 0) {
		guest_warn("CQ %u doorbell %u: no such queue or head beyond its entries", qid,
		           head);
		doorbell_error_unlocked(c, (uint8_t)err);
		return;
	}
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

	if (size != 4 || (offset & 3)) {
		guest_warn("doorbell write at 0x%llx size %u ignored", (unsigned long long)offset,
		           size);
		return;
	}
	if (!(__atomic_load_n(&c->csts, __ATOMIC_ACQUIRE) & CSTS_RDY))
		return;
	if (idx / 2 > c->maxq) {
		guest_warn("doorbell write at 0x%llx: no such queue", (unsigned long long)offset);
		doorbell_error_unlocked(c, NVME_AEI_INVALID_DB_REG);
	} else if (idx & 1) {
		cq_doorbell(c, (unsigned)(idx / 2), val & 0xffff);
	} else if (idx == 0) {
		admin_sq_doorbell(c, val & 0xffff);
	} else {
		sq_doorbell(c, (unsigned)(idx / 2), val & 0xffff);
	}
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

/* ---- saved state (docs/design/snapshots.md section 2, "nvme") ---- */

/*
 * Section version 1, after the generic PCI part (bus/pci.h): u32 maxq,
 * qsz, sector size and u64 namespace LBAs (a restore refuses others); u32
 * CC, CSTS, AQA, INTMS, u64 ASQ, ACQ; u8 FEAT_COUNT and the features; u16
 * temperature thresholds; u8 critical warning and masked event types; u8
 * count + u16 ids of held AERs; u8 count + (u8 type, info, log page) of
 * waiting events; u64 error count, log base, media errors and the 16 log
 * entries field by field; u64 SMART counters; then per queue id 0-maxq:
 * bool vector CD, the SQ (bool created; u16 cqid, u32 size, u64 GPA, u32
 * head, tail, u8 + u32 abort marks) and the CQ (bool created; bool ien,
 * stalled, phase, u16 vector, u32 size, u64 GPA, u32 head, tail).  Not
 * saved: CQ reservations and coalescing counts, which a quiesced
 * controller does not have (every fetched command has posted and
 * interrupted).
 */
#define NVME_STATE_VERSION 1

/* Hold one I/O SQ's thread (see sq_park) until `deadline` (CLOCK_REALTIME,
 * park_cond's clock); 0, or -1 when commands are still in flight then. */
static int sq_hold(struct nvme_sq *sq, const struct timespec *deadline)
{
	uint64_t one = 1;
	int rc = 0;

	__atomic_store_n(&sq->hold, true, __ATOMIC_RELEASE);
	if (write(sq->kick_fd, &one, sizeof(one)) < 0)
		return -1;
	pthread_mutex_lock(&sq->park_lock);
	while (!sq->parked && rc == 0)
		rc = pthread_cond_timedwait(&sq->park_cond, &sq->park_lock, deadline);
	rc = sq->parked ? 0 : -1;
	pthread_mutex_unlock(&sq->park_lock);
	return rc;
}

/* Let a held SQ thread run again; it looks at its ring once (entries that
 * arrived, or were restored, while it waited). */
static void sq_release_hold(struct nvme_sq *sq)
{
	uint64_t one = 1;

	pthread_mutex_lock(&sq->park_lock);
	__atomic_store_n(&sq->hold, false, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&sq->park_cond);
	pthread_mutex_unlock(&sq->park_lock);
	if (sq->kick_fd >= 0 && write(sq->kick_fd, &one, sizeof(one)) < 0)
		log_warn("nvme: cannot wake SQ %u", sq->qid);
}

/*
 * pci_devemu.quiesce: hold every I/O SQ thread once its fetched commands
 * have completed, posted and interrupted (1 s for all of them).  The admin
 * queue runs in vCPU threads, which are paused.  Then the image is made
 * stable (blockif_flush: an fdatasync, which the API thread may make), so
 * that what the saved guest was told is written stays written.
 */
static int nvme_quiesce(struct pci_func *f, char *err, size_t errlen)
{
	struct nvme_ctrl *c = f->softc;
	struct timespec deadline;
	int rc = 0, e;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 1;
	pthread_rwlock_rdlock(&c->qlock);
	for (unsigned q = 1; q <= c->maxq; q++) {
		struct nvme_sq *sq = &c->sq[q];

		if (sq->created && sq->running && sq_hold(sq, &deadline) < 0 && rc == 0) {
			snprintf(err, errlen, "nvme: SQ %u still has commands in flight after 1 s",
			         q);
			rc = -1;
		}
	}
	pthread_rwlock_unlock(&c->qlock);
	if (rc == 0 && (e = blockif_flush(c->bi)) < 0) {
		snprintf(err, errlen, "nvme: cannot flush the image: %s", strerror(-e));
		rc = -1;
	}
	return rc;
}

static void nvme_unquiesce(struct pci_func *f)
{
	struct nvme_ctrl *c = f->softc;

	pthread_rwlock_rdlock(&c->qlock);
	for (unsigned q = 1; q <= c->maxq; q++)
		if (c->sq[q].created && c->sq[q].running)
			sq_release_hold(&c->sq[q]);
	pthread_rwlock_unlock(&c->qlock);
}

static void save_errlog(const struct nvme_ctrl *c, struct sbuf *out)
{
	sbuf_put_u64(out, c->error_count);
	sbuf_put_u64(out, c->errlog_base);
	sbuf_put_u64(out, c->media_errors);
	for (unsigned i = 0; i < NVME_ERRLOG_MAX; i++) {
		const struct nvme_error_entry *e = &c->errlog[i];

		sbuf_put_u64(out, e->error_count);
		sbuf_put_u16(out, e->sqid);
		sbuf_put_u16(out, e->cid);
		sbuf_put_u16(out, e->status);
		sbuf_put_u16(out, e->param_loc);
		sbuf_put_u64(out, e->lba);
		sbuf_put_u32(out, e->nsid);
		sbuf_put_u8(out, e->vs);
		sbuf_put_u8(out, e->trtype);
		sbuf_put_u64(out, e->csi);
		sbuf_put_u16(out, e->ttsi);
	}
}

static void save_queues(const struct nvme_ctrl *c, struct sbuf *out)
{
	for (unsigned q = 0; q <= c->maxq; q++) {
		const struct nvme_sq *sq = &c->sq[q];
		const struct nvme_cq *cq = &c->cq[q];

		sbuf_put_bool(out, c->vec[q].cd);
		sbuf_put_bool(out, sq->created);
		if (sq->created) {
			sbuf_put_u16(out, sq->cqid);
			sbuf_put_u32(out, sq->size);
			sbuf_put_u64(out, sq->gpa);
			sbuf_put_u32(out, __atomic_load_n(&sq->head, __ATOMIC_ACQUIRE));
			sbuf_put_u32(out, __atomic_load_n(&sq->tail, __ATOMIC_ACQUIRE));
			sbuf_put_u8(out, (uint8_t)sq->naborts);
			for (unsigned i = 0; i < sq->naborts; i++)
				sbuf_put_u32(out, sq->abort_slot[i]);
		}
		sbuf_put_bool(out, cq->created);
		if (cq->created) {
			sbuf_put_bool(out, cq->ien);
			sbuf_put_bool(out, cq->stalled);
			sbuf_put_bool(out, cq->phase);
			sbuf_put_u16(out, cq->vector);
			sbuf_put_u32(out, cq->size);
			sbuf_put_u64(out, cq->gpa);
			sbuf_put_u32(out, cq->head);
			sbuf_put_u32(out, cq->tail);
		}
	}
}

/* pci_devemu.save (layout above); the queues are held (nvme_quiesce). */
static int nvme_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	struct nvme_ctrl *c = f->softc;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&c->lock);
	pthread_rwlock_rdlock(&c->qlock);
	pthread_mutex_lock(&c->errlog_lock);
	sbuf_put_u16(out, NVME_STATE_VERSION);
	sbuf_put_u32(out, c->maxq);
	sbuf_put_u32(out, c->qsz);
	sbuf_put_u32(out, c->sectsz);
	sbuf_put_u64(out, c->nsze);
	sbuf_put_u32(out, c->cc);
	sbuf_put_u32(out, c->csts);
	sbuf_put_u32(out, c->aqa);
	sbuf_put_u32(out, __atomic_load_n(&c->intms, __ATOMIC_ACQUIRE));
	sbuf_put_u64(out, c->asq);
	sbuf_put_u64(out, c->acq);
	sbuf_put_u8(out, FEAT_COUNT);
	for (unsigned i = 0; i < FEAT_COUNT; i++)
		sbuf_put_u32(out, __atomic_load_n(&c->feat[i], __ATOMIC_RELAXED));
	sbuf_put_u16(out, c->temp_over);
	sbuf_put_u16(out, c->temp_under);
	sbuf_put_u8(out, c->crit_warning);
	sbuf_put_u8(out, c->ae_masked);
	sbuf_put_u8(out, (uint8_t)c->naer);
	for (unsigned i = 0; i < c->naer; i++)
		sbuf_put_u16(out, c->aer_cid[i]);
	sbuf_put_u8(out, (uint8_t)c->nevents);
	for (unsigned i = 0; i < c->nevents; i++) {
		sbuf_put_u8(out, c->events[i].type);
		sbuf_put_u8(out, c->events[i].info);
		sbuf_put_u8(out, c->events[i].lid);
	}
	save_errlog(c, out);
	sbuf_put_u64(out, __atomic_load_n(&c->bytes_read, __ATOMIC_RELAXED));
	sbuf_put_u64(out, __atomic_load_n(&c->bytes_written, __ATOMIC_RELAXED));
	sbuf_put_u64(out, __atomic_load_n(&c->read_cmds, __ATOMIC_RELAXED));
	sbuf_put_u64(out, __atomic_load_n(&c->write_cmds, __ATOMIC_RELAXED));
	save_queues(c, out);
	pthread_mutex_unlock(&c->errlog_lock);
	pthread_rwlock_unlock(&c->qlock);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* A restore reads everything into this first and applies it only when
 * all of it is in range. */
struct nvme_saved {
	uint32_t cc, csts, aqa, intms;
	uint64_t asq, acq;
	uint32_t feat[FEAT_COUNT];
	uint16_t temp_over, temp_under;
	uint8_t crit_warning, ae_masked;
	uint16_t aer_cid[NVME_AER_MAX];
	unsigned naer;
	struct nvme_event events[NVME_EVENT_MAX];
	unsigned nevents;
	uint64_t error_count, errlog_base, media_errors;
	struct nvme_error_entry errlog[NVME_ERRLOG_MAX];
	uint64_t bytes_read, bytes_written, read_cmds, write_cmds;
	bool cd[NVME_MAX_IOQ + 1];
	struct nvme_saved_sq {
		bool created;
		uint16_t cqid;
		uint32_t size, head, tail;
		uint64_t gpa;
		unsigned naborts;
		uint32_t abort_slot[NVME_ABORT_MAX];
	} sq[NVME_MAX_IOQ + 1];
	struct nvme_saved_cq {
		bool created, ien, stalled, phase;
		uint16_t vector;
		uint32_t size, head, tail;
		uint64_t gpa;
	} cq[NVME_MAX_IOQ + 1];
};

/* The options the section was made with must be this controller's. */
static void read_geometry(const struct nvme_ctrl *c, struct sbuf_reader *in)
{
	uint32_t maxq = sbuf_get_u32(in), qsz = sbuf_get_u32(in), sectsz = sbuf_get_u32(in);
	uint64_t nsze = sbuf_get_u64(in);

	if (in->failed)
		return;
	if (maxq != c->maxq || qsz != c->qsz)
		sbuf_fail(in, "maxq %u qsz %u, this controller has maxq %u qsz %u", maxq, qsz,
		          c->maxq, c->qsz);
	else if (sectsz != c->sectsz || nsze != c->nsze)
		sbuf_fail(in, "namespace of %llu %u-byte sectors, this image has %llu of %u",
		          (unsigned long long)nsze, sectsz, (unsigned long long)c->nsze, c->sectsz);
}

static void read_registers(struct nvme_saved *s, struct sbuf_reader *in)
{
	unsigned nfeat;

	s->cc = sbuf_get_u32(in);
	s->csts = sbuf_get_u32(in);
	s->aqa = sbuf_get_u32(in);
	s->intms = sbuf_get_u32(in);
	s->asq = sbuf_get_u64(in);
	s->acq = sbuf_get_u64(in);
	nfeat = sbuf_get_u8(in);
	if (!in->failed && nfeat != FEAT_COUNT)
		sbuf_fail(in, "%u features, this khyve has %u", nfeat, FEAT_COUNT);
	for (unsigned i = 0; i < FEAT_COUNT; i++)
		s->feat[i] = sbuf_get_u32(in);
	s->temp_over = sbuf_get_u16(in);
	s->temp_under = sbuf_get_u16(in);
	s->crit_warning = sbuf_get_u8(in);
	s->ae_masked = sbuf_get_u8(in);
	if (in->failed)
		return;
	if (s->csts & ~(CSTS_RDY | CSTS_CFS | CSTS_SHST_MASK))
		sbuf_fail(in, "CSTS 0x%x has reserved bits", s->csts);
	else if ((s->csts & CSTS_RDY) && !(s->cc & CC_EN))
		sbuf_fail(in, "CSTS.RDY with CC.EN clear");
	else if (s->aqa & ~0x0fff0fffu)
		sbuf_fail(in, "AQA 0x%x has reserved bits", s->aqa);
}

/* Feature values as Set Features would have left them. */
static void check_features(const struct nvme_ctrl *c, const struct nvme_saved *s,
                           struct sbuf_reader *in)
{
	uint32_t nq = s->feat[FEAT_NUM_QUEUES];

	if (in->failed)
		return;
	if ((nq & 0xffff) >= c->maxq || (nq >> 16) >= c->maxq)
		sbuf_fail(in, "Number of Queues 0x%x beyond maxq %u", nq, c->maxq);
	else if (s->feat[FEAT_POWER_MGMT] & 0x1f)
		sbuf_fail(in, "power state %u does not exist", s->feat[FEAT_POWER_MGMT] & 0x1f);
	else if (s->feat[FEAT_INT_COALESCING] & ~0xffffu)
		sbuf_fail(in, "Interrupt Coalescing 0x%x has reserved bits",
		          s->feat[FEAT_INT_COALESCING]);
}

static void read_events(struct nvme_saved *s, struct sbuf_reader *in)
{
	s->naer = sbuf_get_u8(in);
	if (!in->failed && s->naer > NVME_AER_MAX) {
		sbuf_fail(in, "%u AERs held > %u", s->naer, NVME_AER_MAX);
		return;
	}
	for (unsigned i = 0; i < s->naer && !in->failed; i++) {
		s->aer_cid[i] = sbuf_get_u16(in);
		for (unsigned j = 0; j < i; j++)
			if (s->aer_cid[j] == s->aer_cid[i])
				sbuf_fail(in, "AER command id %u held twice", s->aer_cid[i]);
	}
	s->nevents = sbuf_get_u8(in);
	if (!in->failed && s->nevents > NVME_EVENT_MAX) {
		sbuf_fail(in, "%u events waiting > %u", s->nevents, NVME_EVENT_MAX);
		return;
	}
	for (unsigned i = 0; i < s->nevents && !in->failed; i++) {
		s->events[i].type = sbuf_get_u8(in);
		s->events[i].info = sbuf_get_u8(in);
		s->events[i].lid = sbuf_get_u8(in);
		if (s->events[i].type >= 8) /* ae_masked has a bit per type */
			sbuf_fail(in, "event type %u out of range", s->events[i].type);
	}
}

static void read_errlog(struct nvme_saved *s, struct sbuf_reader *in)
{
	s->error_count = sbuf_get_u64(in);
	s->errlog_base = sbuf_get_u64(in);
	s->media_errors = sbuf_get_u64(in);
	for (unsigned i = 0; i < NVME_ERRLOG_MAX; i++) {
		struct nvme_error_entry *e = &s->errlog[i];

		e->error_count = sbuf_get_u64(in);
		e->sqid = sbuf_get_u16(in);
		e->cid = sbuf_get_u16(in);
		e->status = sbuf_get_u16(in);
		e->param_loc = sbuf_get_u16(in);
		e->lba = sbuf_get_u64(in);
		e->nsid = sbuf_get_u32(in);
		e->vs = sbuf_get_u8(in);
		e->trtype = sbuf_get_u8(in);
		e->csi = sbuf_get_u64(in);
		e->ttsi = sbuf_get_u16(in);
	}
	if (!in->failed && s->errlog_base > s->error_count)
		sbuf_fail(in, "error log base %llu beyond error count %llu",
		          (unsigned long long)s->errlog_base, (unsigned long long)s->error_count);
	s->bytes_read = sbuf_get_u64(in);
	s->bytes_written = sbuf_get_u64(in);
	s->read_cmds = sbuf_get_u64(in);
	s->write_cmds = sbuf_get_u64(in);
}

static void read_sq(struct nvme_saved_sq *sq, unsigned q, struct sbuf_reader *in)
{
	sq->created = sbuf_get_bool(in);
	if (!sq->created)
		return;
	sq->cqid = sbuf_get_u16(in);
	sq->size = sbuf_get_u32(in);
	sq->gpa = sbuf_get_u64(in);
	sq->head = sbuf_get_u32(in);
	sq->tail = sbuf_get_u32(in);
	sq->naborts = sbuf_get_u8(in);
	if (in->failed)
		return;
	if (sq->naborts > NVME_ABORT_MAX) {
		sbuf_fail(in, "SQ %u: %u abort marks > %u", q, sq->naborts, NVME_ABORT_MAX);
		return;
	}
	for (unsigned i = 0; i < sq->naborts; i++)
		sq->abort_slot[i] = sbuf_get_u32(in);
}

static void read_cq(struct nvme_saved_cq *cq, struct sbuf_reader *in)
{
	cq->created = sbuf_get_bool(in);
	if (!cq->created)
		return;
	cq->ien = sbuf_get_bool(in);
	cq->stalled = sbuf_get_bool(in);
	cq->phase = sbuf_get_bool(in);
	cq->vector = sbuf_get_u16(in);
	cq->size = sbuf_get_u32(in);
	cq->gpa = sbuf_get_u64(in);
	cq->head = sbuf_get_u32(in);
	cq->tail = sbuf_get_u32(in);
}

/* Size, position and memory of a queue, as creating it checks them; the
 * admin queues' sizes and addresses are AQA's, ASQ's and ACQ's. */
static void check_ring(const struct nvme_ctrl *c, const struct nvme_saved *s, bool is_sq,
                       unsigned q, uint32_t size, uint64_t gpa, uint32_t head, uint32_t tail,
                       struct sbuf_reader *in)
{
	const char *kind = is_sq ? "SQ" : "CQ";
	uint32_t want = is_sq ? (s->aqa & 0xfff) + 1 : ((s->aqa >> 16) & 0xfff) + 1;

	if (in->failed)
		return;
	if (q == 0 && (size != want || gpa != (is_sq ? s->asq : s->acq)))
		sbuf_fail(in, "admin %s of %u entries at 0x%llx, AQA/ASQ/ACQ say otherwise", kind,
		          size, (unsigned long long)gpa);
	else if (size < 2 || size > (q == 0 ? 4096 : c->qsz))
		sbuf_fail(in, "%s %u: size %u out of range", kind, q, size);
	else if (head >= size || tail >= size)
		sbuf_fail(in, "%s %u: head %u tail %u beyond its %u entries", kind, q, head, tail,
		          size);
	else if (queue_memory((struct nvme_ctrl *)c, gpa, size,
	                      is_sq ? NVME_SQE_SIZE : NVME_CQE_SIZE) == NULL)
		sbuf_fail(in, "%s %u at 0x%llx is not page-aligned guest RAM", kind, q,
		          (unsigned long long)gpa);
}

static void check_queue(const struct nvme_ctrl *c, const struct nvme_saved *s, unsigned q,
                        struct sbuf_reader *in)
{
	const struct nvme_saved_sq *sq = &s->sq[q];
	const struct nvme_saved_cq *cq = &s->cq[q];
	bool ready = (s->csts & CSTS_RDY) != 0;

	if (in->failed)
		return;
	if (q == 0 && (sq->created != ready || cq->created != ready)) {
		sbuf_fail(in, "admin queues %s a ready controller",
		          ready ? "missing on" : "without");
		return;
	}
	if ((sq->created || cq->created) && !ready) {
		sbuf_fail(in, "queue %u exists on a controller that is not ready", q);
		return;
	}
	if (cq->created) {
		check_ring(c, s, false, q, cq->size, cq->gpa, cq->head, cq->tail, in);
		if (q == 0 && (!cq->ien || cq->vector != 0))
			sbuf_fail(in, "admin CQ without interrupts or on vector %u", cq->vector);
		else if (q != 0 && CC_IOCQES(s->cc) != 4)
			sbuf_fail(in, "I/O CQ %u with CC.IOCQES %u", q, CC_IOCQES(s->cc));
		else if (cq->vector > c->maxq || (cq->vector != 0 && c->f->msix.cap == 0))
			sbuf_fail(in, "CQ %u: vector %u out of range", q, cq->vector);
	}
	if (sq->created) {
		check_ring(c, s, true, q, sq->size, sq->gpa, sq->head, sq->tail, in);
		if (q != 0 && CC_IOSQES(s->cc) != 6)
			sbuf_fail(in, "I/O SQ %u with CC.IOSQES %u", q, CC_IOSQES(s->cc));
		else if (q == 0 ? sq->cqid != 0
		                : sq->cqid < 1 || sq->cqid > c->maxq || !s->cq[sq->cqid].created)
			sbuf_fail(in, "SQ %u: completion queue %u does not exist", q, sq->cqid);
		for (unsigned i = 0; i < sq->naborts && !in->failed; i++)
			if (sq->abort_slot[i] >= sq->size)
				sbuf_fail(in, "SQ %u: abort mark %u beyond its %u entries", q,
				          sq->abort_slot[i], sq->size);
	}
}

/* Read and check the whole section into `s`; false when it is refused. */
static bool read_state(const struct nvme_ctrl *c, struct nvme_saved *s, struct sbuf_reader *in)
{
	if (sbuf_get_version(in, NVME_STATE_VERSION) == 0)
		return false;
	read_geometry(c, in);
	read_registers(s, in);
	check_features(c, s, in);
	read_events(s, in);
	read_errlog(s, in);
	for (unsigned q = 0; q <= c->maxq && !in->failed; q++) {
		s->cd[q] = sbuf_get_bool(in);
		read_sq(&s->sq[q], q, in);
		read_cq(&s->cq[q], in);
	}
	if (!in->failed && s->naer > 0 && !(s->csts & CSTS_RDY))
		sbuf_fail(in, "AERs held by a controller that is not ready");
	for (unsigned q = 0; q <= c->maxq && !in->failed; q++)
		check_queue(c, s, q, in);
	return !in->failed;
}

static void apply_registers(struct nvme_ctrl *c, const struct nvme_saved *s)
{
	c->cc = s->cc;
	__atomic_store_n(&c->csts, s->csts, __ATOMIC_RELEASE);
	c->aqa = s->aqa;
	__atomic_store_n(&c->intms, s->intms, __ATOMIC_RELEASE);
	c->asq = s->asq;
	c->acq = s->acq;
	for (unsigned i = 0; i < FEAT_COUNT; i++)
		__atomic_store_n(&c->feat[i], s->feat[i], __ATOMIC_RELAXED);
	c->temp_over = s->temp_over;
	c->temp_under = s->temp_under;
	c->crit_warning = s->crit_warning;
	c->ae_masked = s->ae_masked;
	memcpy(c->aer_cid, s->aer_cid, sizeof(c->aer_cid));
	c->naer = s->naer;
	memcpy(c->events, s->events, sizeof(c->events));
	c->nevents = s->nevents;
	pthread_mutex_lock(&c->errlog_lock);
	c->error_count = s->error_count;
	c->errlog_base = s->errlog_base;
	c->media_errors = s->media_errors;
	memcpy(c->errlog, s->errlog, sizeof(c->errlog));
	pthread_mutex_unlock(&c->errlog_lock);
	c->bytes_read = s->bytes_read;
	c->bytes_written = s->bytes_written;
	c->read_cmds = s->read_cmds;
	c->write_cmds = s->write_cmds;
}

static void apply_cq(struct nvme_ctrl *c, unsigned q, const struct nvme_saved_cq *s)
{
	struct nvme_cq *cq = &c->cq[q];

	cq->ring = queue_memory(c, s->gpa, s->size, NVME_CQE_SIZE);
	cq->gpa = s->gpa;
	cq->size = s->size;
	cq->head = s->head;
	cq->tail = s->tail;
	cq->reserved = 0;
	cq->phase = s->phase;
	cq->stalled = s->stalled;
	cq->ien = s->ien;
	cq->vector = s->vector;
	__atomic_store_n(&cq->created, true, __ATOMIC_RELEASE);
}

/* An SQ as Create I/O SQ (or enabling, for the admin SQ) makes it, at the
 * saved positions; 0, or -1 when its thread cannot start. */
static int apply_sq(struct nvme_ctrl *c, unsigned q, const struct nvme_saved_sq *s)
{
	struct nvme_sq *sq = &c->sq[q];

	sq->ring = queue_memory(c, s->gpa, s->size, NVME_SQE_SIZE);
	sq->gpa = s->gpa;
	sq->size = s->size;
	sq->head = s->head;
	sq->tail = s->tail;
	sq->cqid = s->cqid;
	sq->naborts = s->naborts;
	memcpy(sq->abort_slot, s->abort_slot, sizeof(sq->abort_slot));
	if (q != 0 && sq_start_thread(sq) < 0)
		return -1;
	sq->created = true;
	return 0;
}

/* Look at the ring once: sandbox_wake_at_arm() calls this for a thread
 * a restore started, so that nothing from the state file is fetched
 * before the thread has its filter. */
static void sq_wake(void *arg)
{
	struct nvme_sq *sq = arg;
	uint64_t one = 1;

	if (write(sq->kick_fd, &one, sizeof(one)) < 0)
		log_warn("nvme: cannot wake SQ %u", sq->qid);
}

/* Queues as the saved controller had them: threads started, each looking
 * at its ring once (at sandbox_arm(), when the sandbox is on).  `lock`
 * held.  0, or -1 with `err`. */
static int apply_queues(struct nvme_ctrl *c, const struct nvme_saved *s, char *err, size_t errlen)
{
	int rc = 0;

	pthread_rwlock_wrlock(&c->qlock);
	for (unsigned q = 0; q <= c->maxq; q++) {
		c->vec[q].cd = s->cd[q];
		c->vec[q].pending = 0;
		if (s->cq[q].created)
			apply_cq(c, q, &s->cq[q]);
	}
	for (unsigned q = 0; q <= c->maxq && rc == 0; q++) {
		if (s->sq[q].created && apply_sq(c, q, &s->sq[q]) < 0) {
			snprintf(err, errlen, "nvme: cannot start SQ %u", q);
			rc = -1;
		}
	}
	for (unsigned q = 1; q <= c->maxq && rc == 0; q++)
		if (c->sq[q].created &&
		    (!sandbox_enabled() || sandbox_wake_at_arm(sq_wake, &c->sq[q]) < 0))
			sq_wake(&c->sq[q]);
	pthread_rwlock_unlock(&c->qlock);
	return rc;
}

/*
 * pci_devemu.restore: check the whole section, then rebuild the
 * controller as the guest's own register writes and admin commands had
 * made it (runs before any vCPU, on a controller no guest has touched; one
 * that has is reset first).  INTx is driven from the CQs' contents; MSI-X
 * messages already sent are in the LAPICs' state, pending ones in the PBA
 * (the generic part).
 */
static int nvme_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct nvme_ctrl *c = f->softc;
	struct nvme_saved *s = calloc(1, sizeof(*s));
	int rc = -1;

	if (s == NULL) {
		snprintf(err, errlen, "nvme: out of memory");
		return -1;
	}
	if (read_state(c, s, in)) {
		pthread_mutex_lock(&c->lock);
		if (c->cc & CC_EN)
			controller_reset(c);
		apply_registers(c, s);
		rc = apply_queues(c, s, err, errlen);
		pthread_mutex_unlock(&c->lock);
		intx_update(c);
	}
	free(s);
	return rc;
}

/* ---- options and creation ---- */

static const char *const nvme_keys[] = {
    "device", "path", "ram",     "maxq",   "qsz",  "ioslots",  "sectsz",     "ser", "eui64",
    "dsm",    "ro",   "nocache", "direct", "sync", "nodelete", "sectorsize", NULL,
};

static int check_keys(struct config_node *node, char *err, size_t errlen)
{
	return devopts_check_keys(node, nvme_keys, sizeof(nvme_keys) / sizeof(nvme_keys[0]) - 1,
	                          err, errlen);
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

/*
 * The CQ and INTx locks are taken by the SQ thread for every completion
 * and by the vCPU for every CQ doorbell, each time for a few stores.  With
 * more than one CPU they spin a little before sleeping (glibc's adaptive
 * mutex): a holder on another CPU lets go within that spin, where a futex
 * sleep and wake cost more than the command (bench/nvme-host, tmpfs QD32:
 * 12-20% more reads a second).  One CPU: plain mutexes, a spin would only
 * wait for a holder that cannot run.  blockif polls exactly where there
 * is more than one CPU, and has its answer cached before the sandbox.
 */
static void shared_lock_attr(pthread_mutexattr_t *a)
{
	pthread_mutexattr_init(a);
	if (blockif_default_poll_us() > 0)
		pthread_mutexattr_settype(a, PTHREAD_MUTEX_ADAPTIVE_NP);
}

static int nvme_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                     size_t errlen)
{
	struct nvme_ctrl *c = calloc(1, sizeof(*c));
	struct blockif_opts o;
	pthread_mutexattr_t shared;
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
	pthread_mutex_init(&c->errlog_lock, NULL);
	pthread_rwlock_init(&c->qlock, NULL);
	shared_lock_attr(&shared);
	pthread_mutex_init(&c->intx_lock, &shared);
	for (unsigned q = 0; q <= NVME_MAX_IOQ; q++) {
		pthread_mutex_init(&c->cq[q].lock, &shared);
		pthread_mutex_init(&c->sq[q].fetch_lock, NULL);
		pthread_mutex_init(&c->vec[q].lock, NULL);
		pthread_mutex_init(&c->sq[q].park_lock, NULL);
		pthread_cond_init(&c->sq[q].park_cond, NULL);
		c->sq[q].c = c;
		c->sq[q].qid = (uint16_t)q;
		c->sq[q].kick_fd = c->sq[q].stop_fd = c->sq[q].timer_fd = -1;
	}
	pthread_mutexattr_destroy(&shared);
	features_default(c);
	f->softc = c;
	if (setup_pci(c, f) < 0) {
		snprintf(err, errlen, "no room for the BARs");
		return -1; /* the function is half made: khyve exits */
	}
	if (blockif_register_counters(c->bi) < 0)
		log_warn("nvme: %s: no counters", path);
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
    .descr = "NVMe 1.4 controller with one namespace",
    .usage = "  -s SLOT,nvme,PATH|ram=MiB[,OPTION]...\n"
             "  PATH             disk image or block device\n"
             "  ram=MiB          memory-backed disk of that size\n"
             "  maxq=N           I/O queue pairs (default 16)\n"
             "  qsz=N            entries per queue (default 2048)\n"
             "  ioslots=N        commands in flight per submission queue (default 128)\n"
             "  sectsz=N         sector size: 512, 4096 or 8192\n"
             "  ser=S            serial number (up to 20 characters)\n"
             "  eui64=N          namespace EUI-64\n"
             "  dsm=MODE         dataset management: auto, enable or disable\n" BLOCKIF_USAGE_FLAGS,
    .keys = nvme_keys,
    .legacy_config = blockif_legacy_config,
    .init = nvme_init,
    .bar_read = nvme_bar_read,
    .bar_write = nvme_bar_write,
    .quiesce = nvme_quiesce,
    .unquiesce = nvme_unquiesce,
    .save = nvme_save,
    .restore = nvme_restore,
};
