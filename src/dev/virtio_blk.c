/*
 * virtio-blk (virtio 1.2 section 5.2) with bhyve's block options
 * (-s N,virtio-blk,PATH[,nocache][,direct|sync][,ro][,sectorsize=L[/P]]
 *  [,nodelete][,ser=ID][,num-queues=N]).
 *
 * Requests: IN, OUT, FLUSH, GET_ID, DISCARD, WRITE_ZEROES.  Each queue has
 * its own thread and its own asynchronous I/O context (io_uring), so
 * queues never contend; a request's status is written only when its I/O
 * completed, and FLUSH only after fdatasync(2) succeeded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backend/blockif.h"
#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "core/machine.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/sandbox.h"
#include "lib/sbuf.h"

#define VIRTIO_ID_BLOCK           2

#define VIRTIO_BLK_F_SEG_MAX      2
#define VIRTIO_BLK_F_RO           5
#define VIRTIO_BLK_F_BLK_SIZE     6
#define VIRTIO_BLK_F_FLUSH        9
#define VIRTIO_BLK_F_TOPOLOGY     10
#define VIRTIO_BLK_F_MQ           12
#define VIRTIO_BLK_F_DISCARD      13
#define VIRTIO_BLK_F_WRITE_ZEROES 14

#define VIRTIO_BLK_T_IN           0
#define VIRTIO_BLK_T_OUT          1
#define VIRTIO_BLK_T_FLUSH        4
#define VIRTIO_BLK_T_GET_ID       8
#define VIRTIO_BLK_T_DISCARD      11
#define VIRTIO_BLK_T_WRITE_ZEROES 13

#define VIRTIO_BLK_S_OK           0
#define VIRTIO_BLK_S_IOERR        1
#define VIRTIO_BLK_S_UNSUPP       2

#define VIRTIO_BLK_ID_BYTES       20
#define BLK_SECTOR                512               /* virtio-blk addresses in 512-byte sectors */
#define BLK_SEG_MAX               126               /* data segments per request */
#define BLK_IOV_MAX               (BLK_SEG_MAX + 2) /* plus header and status */
#define BLK_QUEUE_SIZE            256
#define BLK_MAX_QUEUES            16
#define BLK_MAX_DISCARD           (1u << 22) /* sectors per DISCARD/WRITE_ZEROES: 2 GiB */
#define BLK_REAP_BATCH            64
#define BLK_POLL_US_MAX           1000

struct virtio_blk_config {
	uint64_t capacity; /* 512-byte sectors */
	uint32_t size_max;
	uint32_t seg_max;
	uint16_t cylinders;
	uint8_t heads;
	uint8_t sectors;
	uint32_t blk_size;
	uint8_t physical_block_exp;
	uint8_t alignment_offset;
	uint16_t min_io_size;
	uint32_t opt_io_size;
	uint8_t writeback;
	uint8_t unused0;
	uint16_t num_queues;
	uint32_t max_discard_sectors;
	uint32_t max_discard_seg;
	uint32_t discard_sector_alignment;
	uint32_t max_write_zeroes_sectors;
	uint32_t max_write_zeroes_seg;
	uint8_t write_zeroes_may_unmap;
	uint8_t unused1[3];
} __attribute__((packed));

struct blk_req_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
} __attribute__((packed));

struct blk_discard_seg {
	uint64_t sector;
	uint32_t num_sectors;
	uint32_t flags; /* bit 0: unmap (WRITE_ZEROES only) */
} __attribute__((packed));

struct blk_queue;

struct blk_req {
	struct blockif_req br; /* first: blockif hands this pointer back */
	uint16_t head;
	uint8_t *status;   /* the request's status byte in guest memory */
	uint32_t used_len; /* bytes written into the guest's buffers */
	struct blk_req *next_free;
	struct iovec data[BLK_IOV_MAX];
};

struct blk_queue {
	struct virtio_blk *blk;
	unsigned qi;
	pthread_t thread;
	int stop_fd;
	bool running;
	bool stopping;
	/* A checkpoint's quiesce (under the queue lock): pop nothing, only
	 * complete what is in flight. */
	bool quiesced;
	struct blockif_ctx *ctx;
	struct blk_req *reqs;
	struct blk_req *free;
	unsigned inflight;
	struct vq_elem elem;
	struct iovec elem_iov[BLK_IOV_MAX];
};

struct virtio_blk {
	struct virtio_dev vd;
	struct blockif *bi;
	char *path; /* the image, for messages */
	unsigned nqueues;
	char ident[VIRTIO_BLK_ID_BYTES];
	struct virtio_blk_config cfg;
	unsigned poll_us; /* busy-poll window after activity, microseconds */
	struct blk_queue q[BLK_MAX_QUEUES];
};

static struct ratelimit blk_rl = RATELIMIT_INIT;

/* ---- request parsing ---- */

/* Copy the part of e->iov[first .. first+n) after `skip` bytes, minus
 * `drop_tail` bytes at the end, into out[]; returns the entry count. */
static unsigned iov_slice(const struct iovec *iov, unsigned n, size_t skip, size_t drop_tail,
                          struct iovec *out, uint64_t *bytes)
{
	uint64_t total = 0, want;
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		total += iov[i].iov_len;
	want = total > skip + drop_tail ? total - skip - drop_tail : 0;
	*bytes = want;
	for (unsigned i = 0; i < n && want > 0; i++) {
		size_t l = iov[i].iov_len;
		uint8_t *b = iov[i].iov_base;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		b += skip;
		l -= skip;
		skip = 0;
		if (l > want)
			l = want;
		out[k].iov_base = b;
		out[k].iov_len = l;
		k++;
		want -= l;
	}
	return k;
}

/* Is [sector, sector+bytes) inside the disk? (overflow-safe) */
static bool in_bounds(const struct virtio_blk *blk, uint64_t sector, uint64_t bytes)
{
	uint64_t cap = blockif_size(blk->bi);

	return sector <= cap / BLK_SECTOR && bytes <= cap - sector * BLK_SECTOR;
}

static void finish_now(struct blk_queue *bq, struct blk_req *r, uint8_t status);

static int prepare_rw(struct blk_queue *bq, struct blk_req *r, const struct blk_req_hdr *h,
                      struct vq_elem *e)
{
	struct virtio_blk *blk = bq->blk;
	bool in = h->type == VIRTIO_BLK_T_IN;
	uint64_t bytes;
	unsigned n;

	if (in)
		n = iov_slice(e->iov + e->nread, e->nwrite, 0, 1, r->data, &bytes);
	else
		n = iov_slice(e->iov, e->nread, sizeof(*h), 0, r->data, &bytes);
	if (bytes % BLK_SECTOR != 0 || !in_bounds(blk, h->sector, bytes))
		return -1;
	r->br.op = in ? BLOCKIF_READ : BLOCKIF_WRITE;
	r->br.offset = h->sector * BLK_SECTOR;
	r->br.iov = r->data;
	r->br.iovcnt = n;
	r->used_len = in ? (uint32_t)bytes + 1 : 1;
	return 0;
}

static int prepare_space_op(struct blk_queue *bq, struct blk_req *r, const struct blk_req_hdr *h,
                            struct vq_elem *e)
{
	struct blk_discard_seg seg;
	bool zeroes = h->type == VIRTIO_BLK_T_WRITE_ZEROES;

	/* One segment per request, as max_*_seg says. */
	if (e->read_len != sizeof(*h) + sizeof(seg) ||
	    iov_to_buf(e->iov, e->nread, sizeof(*h), &seg, sizeof(seg)) != sizeof(seg))
		return -1;
	if (seg.num_sectors == 0 || seg.num_sectors > BLK_MAX_DISCARD ||
	    (!zeroes && (seg.flags & 1)) || (seg.flags & ~1u) ||
	    !in_bounds(bq->blk, seg.sector, (uint64_t)seg.num_sectors * BLK_SECTOR))
		return -1;
	r->br.op = zeroes ? BLOCKIF_WRITE_ZEROES : BLOCKIF_DISCARD;
	r->br.offset = seg.sector * BLK_SECTOR;
	r->br.len = (uint64_t)seg.num_sectors * BLK_SECTOR;
	r->br.unmap = zeroes && (seg.flags & 1);
	r->br.iov = NULL;
	r->br.iovcnt = 0;
	r->used_len = 1;
	return 0;
}

/* Turn a popped chain into an I/O or an immediate answer. */
static void start_request(struct blk_queue *bq, struct blk_req *r, struct vq_elem *e)
{
	struct virtio_blk *blk = bq->blk;
	struct iovec *last = &e->iov[e->nread + e->nwrite - 1];
	struct blk_req_hdr h;
	size_t idlen;

	r->head = e->head;
	if (e->nwrite == 0 || e->read_len < sizeof(h)) {
		/* Nowhere to put a status: hand the buffer back untouched. */
		vq_push(&blk->vd.queue[bq->qi].vq, e->head, 0);
		r->next_free = bq->free;
		bq->free = r;
		log_ratelimited(&blk_rl, LOG_WARN, "virtio-blk: request without header or status");
		return;
	}
	r->status = (uint8_t *)last->iov_base + last->iov_len - 1;
	iov_to_buf(e->iov, e->nread, 0, &h, sizeof(h));
	switch (h.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		if (prepare_rw(bq, r, &h, e) < 0)
			return finish_now(bq, r, VIRTIO_BLK_S_IOERR);
		break;
	case VIRTIO_BLK_T_FLUSH:
		r->br.op = BLOCKIF_FLUSH;
		r->br.iov = NULL;
		r->br.iovcnt = 0;
		r->used_len = 1;
		break;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		if (prepare_space_op(bq, r, &h, e) < 0)
			return finish_now(bq, r, VIRTIO_BLK_S_IOERR);
		break;
	case VIRTIO_BLK_T_GET_ID:
		idlen = buf_to_iov(e->iov + e->nread, e->nwrite, 0, blk->ident,
		                   e->write_len > VIRTIO_BLK_ID_BYTES ? VIRTIO_BLK_ID_BYTES
		                                                      : e->write_len - 1);
		r->used_len = (uint32_t)idlen + 1;
		return finish_now(bq, r, VIRTIO_BLK_S_OK);
	default:
		r->used_len = 1;
		return finish_now(bq, r, VIRTIO_BLK_S_UNSUPP);
	}
	bq->inflight++;
	blockif_queue(bq->ctx, &r->br);
}

/* ---- completion ---- */

static void complete(struct blk_queue *bq, struct blk_req *r, uint8_t status)
{
	struct virtqueue *vq = &bq->blk->vd.queue[bq->qi].vq;

	*r->status = status;
	vq_push(vq, r->head, r->used_len);
	r->next_free = bq->free;
	bq->free = r;
}

static void finish_now(struct blk_queue *bq, struct blk_req *r, uint8_t status)
{
	complete(bq, r, status);
}

static uint8_t status_of(int result)
{
	if (result == 0)
		return VIRTIO_BLK_S_OK;
	return result == -EOPNOTSUPP ? VIRTIO_BLK_S_UNSUPP : VIRTIO_BLK_S_IOERR;
}

/* Return finished requests to the guest (or only count them when the
 * rings are going away). */
static void finish_batch(struct blk_queue *bq, struct blockif_req **done, unsigned n, bool push)
{
	for (unsigned i = 0; i < n; i++) {
		struct blk_req *r = (struct blk_req *)done[i];

		bq->inflight--;
		if (push)
			complete(bq, r, status_of(r->br.result));
		else {
			r->next_free = bq->free;
			bq->free = r;
		}
	}
}

/* ---- the queue thread ---- */

/* Pop and start as many requests as there are free slots. */
static void process_avail(struct blk_queue *bq)
{
	struct virtio_queue *q = &bq->blk->vd.queue[bq->qi];
	bool more = true;

	if (bq->quiesced)
		return;
	while (more && bq->free != NULL) {
		enum vq_pop_result res = VQ_EMPTY;

		vq_enable_kicks(&q->vq, false);
		while (bq->free != NULL && (res = vq_pop(&q->vq, &bq->elem)) == VQ_GOT) {
			struct blk_req *r = bq->free;

			bq->free = r->next_free;
			start_request(bq, r, &bq->elem);
		}
		blockif_submit(bq->ctx);
		if (res == VQ_ERROR) {
			virtio_needs_reset(&bq->blk->vd, "malformed descriptor chain");
			return;
		}
		more = vq_enable_kicks(&q->vq, true);
	}
}

static void notify_if_needed(struct blk_queue *bq)
{
	struct virtio_queue *q = &bq->blk->vd.queue[bq->qi];

	/* A dead queue (a malformed chain, or restored so: enabled, its rings
	 * not mapped) has no ring to look at. */
	if (q->vq.ready && vq_should_notify(&q->vq))
		virtio_queue_interrupt(&bq->blk->vd, bq->qi);
}

/* On stop: let in-flight I/O finish before the rings go away. */
static void drain(struct blk_queue *bq)
{
	struct blockif_req *done[BLK_REAP_BATCH];
	uint32_t fired;

	while (bq->inflight > 0)
		finish_batch(bq, done, blockif_wait(bq->ctx, done, BLK_REAP_BATCH, &fired), false);
}

#define WATCH_KICK 1
#define WATCH_STOP 2

/*
 * Adaptive polling: after activity, watch the available ring and the
 * completion queue for up to poll_us before sleeping, with guest kicks
 * suppressed meanwhile.  A busy guest then needs no notification exit and
 * the thread no wake-up.  Returns true when work showed up.
 */
static bool queue_ready(void *arg)
{
	struct blk_queue *bq = arg;

	return vq_has_work(&bq->blk->vd.queue[bq->qi].vq) || blockif_ready(bq->ctx);
}

static bool poll_for_work(struct blk_queue *bq, struct virtqueue *vq)
{
	if (bq->blk->poll_us == 0)
		return vq_enable_kicks(vq, true);
	vq_enable_kicks(vq, false);
	if (blockif_spin(bq->blk->poll_us, queue_ready, bq, &bq->stopping))
		return true;
	return vq_enable_kicks(vq, true);
}

/*
 * The queue thread: one blockif_wait() per round submits what was queued
 * and sleeps until I/O completes, the guest kicks or the device stops.
 */
static void *queue_main(void *arg)
{
	struct blk_queue *bq = arg;
	struct virtio_queue *q = &bq->blk->vd.queue[bq->qi];
	struct blockif_req *done[BLK_REAP_BATCH];
	char err[256];
	uint64_t v;

	sandbox_thread_enter(SANDBOX_BLK_QUEUE);
	/* The ring belongs to the thread that submits to it, so it is made here. */
	bq->ctx = blockif_ctx_create(bq->blk->bi, BLK_QUEUE_SIZE, err, sizeof(err));
	if (bq->ctx == NULL || blockif_ctx_watch(bq->ctx, q->kick_fd, WATCH_KICK) < 0 ||
	    blockif_ctx_watch(bq->ctx, bq->stop_fd, WATCH_STOP) < 0) {
		virtio_needs_reset(&bq->blk->vd, bq->ctx ? "cannot watch the queue" : err);
		blockif_ctx_destroy(bq->ctx);
		bq->ctx = NULL;
		return NULL;
	}
	pthread_mutex_lock(&q->lock);
	process_avail(bq); /* requests queued before DRIVER_OK */
	pthread_mutex_unlock(&q->lock);
	for (bool busy = false;;) {
		uint32_t fired = 0;
		unsigned n = busy ? blockif_poll(bq->ctx, done, BLK_REAP_BATCH, &fired)
		                  : blockif_wait(bq->ctx, done, BLK_REAP_BATCH, &fired);

		/* Started by a restore, before sandbox_arm(): the filter goes on
		 * at the first wake after it, before the guest's next request. */
		sandbox_thread_enter(SANDBOX_BLK_QUEUE);

		if ((fired & WATCH_STOP) || __atomic_load_n(&bq->stopping, __ATOMIC_ACQUIRE)) {
			finish_batch(bq, done, n, false);
			break;
		}
		pthread_mutex_lock(&q->lock);
		finish_batch(bq, done, n, true);
		if ((fired & WATCH_KICK) && read(q->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			log_ratelimited(&blk_rl, LOG_WARN, "virtio-blk: kick read failed");
		process_avail(bq);
		notify_if_needed(bq);
		busy = !bq->quiesced && q->vq.ready && poll_for_work(bq, &q->vq);
		pthread_mutex_unlock(&q->lock);
	}
	drain(bq);
	blockif_ctx_destroy(bq->ctx);
	bq->ctx = NULL;
	return NULL;
}

static int queue_start(struct blk_queue *bq)
{
	bq->reqs = calloc(BLK_QUEUE_SIZE, sizeof(*bq->reqs));
	bq->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (bq->reqs == NULL || bq->stop_fd < 0)
		return -1;
	bq->free = NULL;
	for (int i = BLK_QUEUE_SIZE - 1; i >= 0; i--) {
		bq->reqs[i].next_free = bq->free;
		bq->free = &bq->reqs[i];
	}
	bq->inflight = 0;
	bq->stopping = false;
	bq->quiesced = false;
	bq->elem.iov = bq->elem_iov;
	bq->elem.iov_cap = BLK_IOV_MAX;
	if (pthread_create(&bq->thread, NULL, queue_main, bq) != 0)
		return -1;
	bq->running = true;
	return 0;
}

static void queue_stop(struct blk_queue *bq)
{
	uint64_t one = 1;

	if (bq->running) {
		__atomic_store_n(&bq->stopping, true, __ATOMIC_RELEASE);
		if (write(bq->stop_fd, &one, sizeof(one)) < 0)
			log_warn("virtio-blk: cannot stop queue %u", bq->qi);
		pthread_join(bq->thread, NULL);
		bq->running = false;
	}
	if (bq->stop_fd >= 0)
		close(bq->stop_fd);
	bq->stop_fd = -1;
	free(bq->reqs);
	bq->reqs = NULL;
}

static void blk_start(struct virtio_dev *vd)
{
	struct virtio_blk *blk = vd->softc;

	for (unsigned i = 0; i < blk->nqueues; i++) {
		if (!vd->queue[i].enabled)
			continue;
		if (queue_start(&blk->q[i]) < 0) {
			virtio_needs_reset(vd, "cannot start an I/O queue");
			return;
		}
	}
}

static void blk_stop(struct virtio_dev *vd)
{
	struct virtio_blk *blk = vd->softc;

	for (unsigned i = 0; i < blk->nqueues; i++)
		queue_stop(&blk->q[i]);
}

static void blk_cfg_read(struct virtio_dev *vd, unsigned off, unsigned size, void *buf)
{
	struct virtio_blk *blk = vd->softc;

	if (off + size <= sizeof(blk->cfg))
		memcpy(buf, (uint8_t *)&blk->cfg + off, size);
}

static const struct virtio_ops blk_ops = {
    .name = "virtio-blk",
    .device_type = VIRTIO_ID_BLOCK,
    .pci_class = 0x01, /* mass storage */
    .pci_subclass = 0x00,
    .cfg_read = blk_cfg_read,
    .start = blk_start,
    .stop = blk_stop,
};

/* ---- creation ---- */

static unsigned log2u(uint32_t v)
{
	unsigned l = 0;

	while ((1u << l) < v)
		l++;
	return l;
}

static void fill_config(struct virtio_blk *blk)
{
	struct virtio_blk_config *c = &blk->cfg;
	uint32_t ss = blockif_sectsz(blk->bi), ps = blockif_psectsz(blk->bi);

	memset(c, 0, sizeof(*c));
	c->capacity = blockif_size(blk->bi) / BLK_SECTOR;
	c->seg_max = BLK_SEG_MAX;
	c->blk_size = ss;
	c->physical_block_exp = (uint8_t)log2u(ps / ss);
	c->min_io_size = 1;
	c->num_queues = (uint16_t)blk->nqueues;
	c->max_discard_sectors = BLK_MAX_DISCARD;
	c->max_discard_seg = 1;
	c->discard_sector_alignment = ss / BLK_SECTOR;
	c->max_write_zeroes_sectors = BLK_MAX_DISCARD;
	c->max_write_zeroes_seg = 1;
	c->write_zeroes_may_unmap = blockif_can_discard(blk->bi);
}

/* bhyve-style serial: ser=ID, else derived from the path. */
static void make_ident(struct virtio_blk *blk, const char *path, const char *ser)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	if (ser != NULL) {
		size_t n = strlen(ser);

		/* Up to 20 bytes, NUL-padded, not necessarily terminated. */
		memcpy(blk->ident, ser, n < sizeof(blk->ident) ? n : sizeof(blk->ident));
		return;
	}
	for (const char *p = path; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	snprintf(blk->ident, sizeof(blk->ident), "KHYVE-%04X-%04X", h >> 16, h & 0xffff);
}

/* poll_us=N: the busy-poll window (0 turns polling off). */
static int parse_poll(struct config_node *node, unsigned *us, char *err, size_t errlen)
{
	const char *v = config_node_get(node, "poll_us");
	uint64_t n;

	*us = blockif_default_poll_us();
	if (v == NULL)
		return 0;
	if (parse_uint(v, 0, BLK_POLL_US_MAX, &n) < 0) {
		snprintf(err, errlen, "poll_us: want 0-%d, not '%s'", BLK_POLL_US_MAX, v);
		return -1;
	}
	*us = (unsigned)n;
	return 0;
}

static int parse_nqueues(struct machine *m, struct config_node *node, unsigned *n, char *err,
                         size_t errlen)
{
	const char *v = config_node_get(node, "num-queues");
	uint64_t q;

	*n = m->vm.ncpus < BLK_MAX_QUEUES ? m->vm.ncpus : BLK_MAX_QUEUES;
	if (v == NULL)
		return 0;
	if (parse_uint(v, 1, BLK_MAX_QUEUES, &q) < 0) {
		snprintf(err, errlen, "num-queues: want 1-%d, not '%s'", BLK_MAX_QUEUES, v);
		return -1;
	}
	*n = (unsigned)q;
	return 0;
}

static uint64_t blk_features(const struct virtio_blk *blk)
{
	uint64_t f = (1ull << VIRTIO_BLK_F_SEG_MAX) | (1ull << VIRTIO_BLK_F_BLK_SIZE) |
	             (1ull << VIRTIO_BLK_F_FLUSH) | (1ull << VIRTIO_BLK_F_TOPOLOGY) |
	             (1ull << VIRTIO_BLK_F_MQ);

	if (blockif_is_ro(blk->bi))
		f |= 1ull << VIRTIO_BLK_F_RO;
	else
		f |= 1ull << VIRTIO_BLK_F_WRITE_ZEROES;
	if (blockif_can_discard(blk->bi))
		f |= 1ull << VIRTIO_BLK_F_DISCARD;
	return f;
}

static int blk_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                    size_t errlen)
{
	struct virtio_blk *blk = calloc(1, sizeof(*blk));
	struct blockif_opts o;
	const char *path;

	if (blk == NULL || blockif_parse_config(node, &path, &o, err, errlen) < 0 ||
	    parse_nqueues(m, node, &blk->nqueues, err, errlen) < 0 ||
	    parse_poll(node, &blk->poll_us, err, errlen) < 0)
		goto fail;
	if (config_node_get(node, "ser") != NULL &&
	    strlen(config_node_get(node, "ser")) > sizeof(blk->ident)) {
		/* GET_ID has room for 20 bytes: refused rather than cut. */
		snprintf(err, errlen, "ser: at most %zu characters, not '%s'", sizeof(blk->ident),
		         config_node_get(node, "ser"));
		goto fail;
	}
	blk->bi = blockif_open(path, &o, err, errlen);
	if (blk->bi == NULL)
		goto fail;
	for (unsigned i = 0; i < blk->nqueues; i++) {
		blk->q[i].blk = blk;
		blk->q[i].qi = i;
		blk->q[i].stop_fd = -1;
	}
	blk->path = strdup(path);
	if (blk->path == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	make_ident(blk, path, config_node_get(node, "ser"));
	fill_config(blk);
	if (virtio_pci_init(&blk->vd, f, &blk_ops, blk, blk->nqueues, BLK_QUEUE_SIZE,
	                    blk_features(blk), sizeof(blk->cfg), err, errlen) < 0)
		return -1;
	if (blockif_register_counters(blk->bi) < 0)
		log_warn("virtio-blk: %s: no counters", path);
	return 0;
fail:
	free(blk);
	return -1;
}

/* ---- saved state (docs/design/snapshots.md section 2, "virtio-blk") ---- */

#define BLK_STATE_VERSION 1
#define BLK_QUIESCE_MS    1000

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Requests of queue `bq` still in flight, or -1 when its lock stayed
 * busy past `deadline` (now_ms()). */
static int queue_inflight(struct blk_queue *bq, uint64_t deadline)
{
	struct virtio_queue *q = &bq->blk->vd.queue[bq->qi];
	uint64_t now = now_ms();
	unsigned n;

	if (virtio_queue_lock_timed(q, deadline > now ? (unsigned)(deadline - now) : 0) < 0)
		return -1;
	n = bq->inflight;
	pthread_mutex_unlock(&q->lock);
	return (int)n;
}

/* Stop queue `bq` popping requests (its thread tests the flag under the
 * queue lock before each pop).  0, or -1 when the lock stayed busy. */
static int queue_quiesce(struct blk_queue *bq, uint64_t deadline)
{
	struct virtio_queue *q = &bq->blk->vd.queue[bq->qi];
	uint64_t now = now_ms();

	if (virtio_queue_lock_timed(q, deadline > now ? (unsigned)(deadline - now) : 0) < 0)
		return -1;
	bq->quiesced = true;
	pthread_mutex_unlock(&q->lock);
	return 0;
}

/* Wait until every running queue has completed, and posted (used ring,
 * interrupt: the queue thread does both under the lock it decrements
 * `inflight` under), each request it started. */
static int blk_wait_idle(struct virtio_blk *blk, uint64_t deadline, char *err, size_t errlen)
{
	for (unsigned i = 0; i < blk->nqueues; i++) {
		struct blk_queue *bq = &blk->q[i];
		int n;

		if (!bq->running)
			continue;
		while ((n = queue_inflight(bq, deadline)) != 0) {
			if (n < 0 || now_ms() >= deadline) {
				snprintf(err, errlen, "disk %s: queue %u still busy after %d ms",
				         blk->path, i, BLK_QUIESCE_MS);
				return -1;
			}
			usleep(1000);
		}
	}
	return 0;
}

static int blk_quiesce(struct pci_func *f, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_blk *blk = vd->softc;
	uint64_t deadline = now_ms() + BLK_QUIESCE_MS;
	int rc = 0, e;

	pthread_mutex_lock(&vd->lock);
	for (unsigned i = 0; i < blk->nqueues && rc == 0; i++)
		if (blk->q[i].running && queue_quiesce(&blk->q[i], deadline) < 0) {
			snprintf(err, errlen, "disk %s: queue %u busy for %d ms", blk->path, i,
			         BLK_QUIESCE_MS);
			rc = -1;
		}
	if (rc == 0)
		rc = blk_wait_idle(blk, deadline, err, errlen);
	pthread_mutex_unlock(&vd->lock);
	/* Acknowledged writes go to stable storage before the state that
	 * says they were done is saved. */
	if (rc == 0 && (e = blockif_flush(blk->bi)) < 0) {
		snprintf(err, errlen, "disk %s: fdatasync: %s", blk->path, strerror(-e));
		rc = -1;
	}
	return rc;
}

static void blk_unquiesce(struct pci_func *f)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_blk *blk = vd->softc;
	uint64_t one = 1;

	pthread_mutex_lock(&vd->lock);
	for (unsigned i = 0; i < blk->nqueues; i++) {
		struct blk_queue *bq = &blk->q[i];
		struct virtio_queue *q = &vd->queue[i];

		if (!bq->running)
			continue;
		pthread_mutex_lock(&q->lock);
		bq->quiesced = false;
		pthread_mutex_unlock(&q->lock);
		/* Kicks consumed while quiesced are made up for. */
		if (write(q->kick_fd, &one, sizeof(one)) < 0)
			log_warn("virtio-blk %s: cannot resume queue %u", blk->path, i);
	}
	pthread_mutex_unlock(&vd->lock);
}

/* u16 version, u32 queues, u64 disk bytes, u32 logical sector bytes, u8
 * writeback; then the transport (virtio_pci_save). */
static int blk_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_blk *blk = vd->softc;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&vd->lock);
	sbuf_put_u16(out, BLK_STATE_VERSION);
	sbuf_put_u32(out, blk->nqueues);
	sbuf_put_u64(out, blockif_size(blk->bi));
	sbuf_put_u32(out, blockif_sectsz(blk->bi));
	sbuf_put_u8(out, blk->cfg.writeback);
	pthread_mutex_unlock(&vd->lock);
	virtio_pci_save(vd, out);
	return 0;
}

static int blk_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_blk *blk = vd->softc;
	uint32_t nqueues, sectsz;
	uint64_t size;
	uint8_t writeback;

	(void)err;
	(void)errlen;
	if (sbuf_get_version(in, BLK_STATE_VERSION) == 0)
		return -1;
	nqueues = sbuf_get_u32(in);
	size = sbuf_get_u64(in);
	sectsz = sbuf_get_u32(in);
	writeback = sbuf_get_u8(in);
	if (in->failed)
		return -1;
	if (nqueues != blk->nqueues)
		sbuf_fail(in, "%u queues, this disk has %u", nqueues, blk->nqueues);
	else if (size != blockif_size(blk->bi))
		sbuf_fail(in, "disk %s is %llu bytes, the saved machine's was %llu", blk->path,
		          (unsigned long long)blockif_size(blk->bi), (unsigned long long)size);
	else if (sectsz != blockif_sectsz(blk->bi))
		sbuf_fail(in, "disk %s has %u-byte sectors, the saved machine's had %u", blk->path,
		          blockif_sectsz(blk->bi), sectsz);
	else if (writeback > 1)
		sbuf_fail(in, "writeback %u is not 0 or 1", writeback);
	if (in->failed || virtio_pci_restore(vd, in) < 0)
		return -1;
	/* Applied once the transport took the rest: a refusal leaves the
	 * device as it was.  No queue thread reads it. */
	pthread_mutex_lock(&vd->lock);
	blk->cfg.writeback = writeback;
	pthread_mutex_unlock(&vd->lock);
	return 0;
}

static const char *const blk_keys[] = {BLOCKIF_KEYS, "ser", "num-queues", "poll_us", NULL};

PCI_DEVEMU(virtio_blk) = {
    .name = "virtio-blk",
    .descr = "virtio 1.2 block device on a file or block device",
    .usage = "  -s SLOT,virtio-blk,PATH[,OPTION]...\n"
             "  PATH             disk image or block device\n" BLOCKIF_USAGE_FLAGS
                 BLOCKIF_USAGE_SECTORSIZE
             "  ser=ID           serial number (GET_ID, up to 20 characters)\n"
             "  num-queues=N     virtqueues (default: one per vCPU)\n"
             "  poll_us=N        busy-poll window in microseconds (0: off)\n",
    .keys = blk_keys,
    .legacy_config = blockif_legacy_config,
    .init = blk_init,
    .bar_read = virtio_pci_bar_read,
    .bar_write = virtio_pci_bar_write,
    .bar_moved = virtio_pci_bar_moved,
    .vector_changed = virtio_pci_vector_changed,
    .quiesce = blk_quiesce,
    .unquiesce = blk_unquiesce,
    .save = blk_save,
    .restore = blk_restore,
};
