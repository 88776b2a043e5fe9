#include "backend/blockif.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/config.h"
#include "lib/counters.h"
#include "lib/devopts.h"
#include "lib/parse.h"
#include "lib/sandbox.h"

#define POOL_THREADS 4
/* user_data values below this are watch tags, not request pointers. */
#define WATCH_DATA_MAX 256

/*
 * What a context's requests did (blockif_register_counters()): updated by
 * the one thread that takes requests back from the context (a ring is
 * never shared), a cache line of its own per context so that queue
 * threads never share one; read by the counter registry's reader.
 */
struct disk_counts {
	uint64_t reads, writes, read_bytes, write_bytes, flushes, discards, errors;
	struct lat_hist lat;
};

struct blockif {
	int fd;
	uint64_t size;
	uint32_t sectsz, psectsz;
	bool ro, candelete, isblk;
	/* The image is in RAM (tmpfs, ramfs): its reads and writes never wait
	 * for a device, and io_uring would hand every one to a worker thread
	 * (no RWF_NOWAIT there), so they all run inline (blockif_queue). */
	bool ram_backed;
	/* counters: the live contexts, and what destroyed ones counted */
	pthread_mutex_t count_lock; /* the list and `gone`; never taken on a request's path */
	struct blockif_ctx *ctxs;
	struct disk_counts gone;
	struct counter_source src;
	bool registered;
};

struct blockif_ctx {
	struct disk_counts counts __attribute__((aligned(64)));
	struct blockif_ctx *next_ctx; /* bi->ctxs, under bi->count_lock */
	struct blockif *bi;
	unsigned depth;
	bool uring;
	int efd; /* completion eventfd (both engines) */
	/* Requests finished without reaching an engine (errors, discards). */
	struct blockif_req *quick_head, *quick_tail;
	/* io_uring */
	struct io_uring ring;
	unsigned uring_inflight; /* requests (not watches) in the ring */
	/* A read, write or flush queued with nothing in flight, held back
	 * until the submit: still alone then, it runs inline (run_held). */
	struct blockif_req *held;
	/* watched fds (blockif_ctx_watch) */
	int watch_fd[BLOCKIF_MAX_WATCH];
	uint32_t watch_tag[BLOCKIF_MAX_WATCH];
	unsigned nwatch;
	/* thread pool */
	pthread_t threads[POOL_THREADS];
	unsigned nthreads;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct blockif_req *staged_head, *staged_tail; /* owner thread only */
	struct blockif_req *pend_head, *pend_tail;
	struct blockif_req *done_head, *done_tail;
	unsigned active;
	bool stopping;
};

/* ---- options ---- */

static int parse_sectorsize(const char *v, struct blockif_opts *o)
{
	char buf[32], *slash;
	uint64_t l, p;

	if (strlen(v) >= sizeof(buf))
		return -1;
	strcpy(buf, v);
	slash = strchr(buf, '/');
	if (slash != NULL)
		*slash = '\0';
	if (parse_uint(buf, 512, 65536, &l) < 0 || (l & (l - 1)) != 0)
		return -1;
	p = l;
	if (slash != NULL && (parse_uint(slash + 1, l, 65536, &p) < 0 || (p & (p - 1)) != 0))
		return -1;
	o->sectsz = (uint32_t)l;
	o->psectsz = (uint32_t)p;
	return 0;
}

int blockif_parse_config(struct config_node *node, const char **path, struct blockif_opts *o,
                         char *err, size_t errlen)
{
	*path = config_node_get(node, "path");
	if (*path == NULL || **path == '\0') {
		memset(o, 0, sizeof(*o));
		snprintf(err, errlen, "missing disk path");
		return -1;
	}
	return blockif_parse_options(node, o, err, errlen);
}

int blockif_parse_options(struct config_node *node, struct blockif_opts *o, char *err,
                          size_t errlen)
{
	static const char *const flags[] = {"ro", "nocache", "direct", "sync", "nodelete"};
	bool val[5];
	const char *ss;

	memset(o, 0, sizeof(*o));
	for (int i = 0; i < 5; i++) {
		if (config_node_get_bool(node, flags[i], false, &val[i]) < 0) {
			snprintf(err, errlen, "%s: not a boolean", flags[i]);
			return -1;
		}
	}
	o->ro = val[0];
	o->nocache = val[1];
	o->sync = val[2] || val[3];
	o->nodelete = val[4];
	ss = config_node_get(node, "sectorsize");
	if (ss != NULL && parse_sectorsize(ss, o) < 0) {
		snprintf(err, errlen, "bad sectorsize '%s' (want L or L/P, powers of two >= 512)",
		         ss);
		return -1;
	}
	return 0;
}

int blockif_legacy_config(struct config_node *node, const char *conf, char *err, size_t errlen)
{
	if (conf == NULL || *conf == '\0') {
		snprintf(err, errlen, "missing disk path");
		return -1;
	}
	return devopts_parse(node, conf, "path", "disk", err, errlen);
}

/* ---- opening ---- */

static int probe_geometry(struct blockif *bi, const struct blockif_opts *o, char *err,
                          size_t errlen)
{
	struct stat st;
	unsigned int ss = 512, ps = 512;

	if (fstat(bi->fd, &st) < 0) {
		snprintf(err, errlen, "fstat: %s", strerror(errno));
		return -1;
	}
	bi->isblk = S_ISBLK(st.st_mode);
	if (bi->isblk) {
		if (ioctl(bi->fd, BLKGETSIZE64, &bi->size) < 0)
			return -1;
		ioctl(bi->fd, BLKSSZGET, &ss);
		ioctl(bi->fd, BLKPBSZGET, &ps);
	} else if (S_ISREG(st.st_mode)) {
		bi->size = (uint64_t)st.st_size;
	} else {
		snprintf(err, errlen, "not a regular file or block device");
		return -1;
	}
	bi->sectsz = o->sectsz ? o->sectsz : ss;
	bi->psectsz = o->psectsz ? o->psectsz : (o->sectsz ? o->sectsz : ps);
	bi->candelete = !o->nodelete && !bi->ro;
	return 0;
}

#define TMPFS_FS_MAGIC 0x01021994u /* linux/magic.h TMPFS_MAGIC */
#define RAMFS_FS_MAGIC 0x858458f6u /* linux/magic.h RAMFS_MAGIC */

/* A regular file on tmpfs or ramfs. */
static bool in_ram(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 &&
	       ((uint32_t)sf.f_type == TMPFS_FS_MAGIC || (uint32_t)sf.f_type == RAMFS_FS_MAGIC);
}

struct blockif *blockif_open(const char *path, const struct blockif_opts *o, char *err,
                             size_t errlen)
{
	struct blockif *bi = calloc(1, sizeof(*bi));
	int flags = O_CLOEXEC | (o->ro ? O_RDONLY : O_RDWR);

	if (bi == NULL)
		return NULL;
	pthread_mutex_init(&bi->count_lock, NULL);
	/* Asked now, while the disk is opened: the queue threads that use it
	 * later run sandboxed, where sysconf() may not read /sys. */
	(void)blockif_default_poll_us();
	if (o->nocache)
		flags |= O_DIRECT;
	if (o->sync)
		flags |= O_SYNC;
	bi->ro = o->ro;
	bi->fd = open(path, flags);
	if (bi->fd < 0 && !o->ro && (errno == EACCES || errno == EROFS)) {
		snprintf(err, errlen, "cannot open %s read-write: %s (add ,ro?)", path,
		         strerror(errno));
		free(bi);
		return NULL;
	}
	if (bi->fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		free(bi);
		return NULL;
	}
	if (probe_geometry(bi, o, err, errlen) < 0) {
		close(bi->fd);
		free(bi);
		return NULL;
	}
	bi->ram_backed = in_ram(bi->fd);
	return bi;
}

struct blockif *blockif_open_empty(const struct blockif_opts *o)
{
	struct blockif *bi = calloc(1, sizeof(*bi));

	if (bi == NULL)
		return NULL;
	pthread_mutex_init(&bi->count_lock, NULL);
	(void)blockif_default_poll_us(); /* as blockif_open(): before the sandbox */
	bi->fd = -1;
	bi->ro = true;
	bi->sectsz = o->sectsz ? o->sectsz : 512;
	bi->psectsz = o->psectsz ? o->psectsz : bi->sectsz;
	return bi;
}

/* The size of the image open on `fd`: a regular file's length, or a block
 * device's (lseek to the end: no ioctl, which the API thread's seccomp
 * filter need not allow).  0, or -1 with `err`. */
static int medium_size(int fd, uint64_t *size, bool *isblk, char *err, size_t errlen)
{
	struct stat st;
	off_t end;

	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "fstat: %s", strerror(errno));
		return -1;
	}
	*isblk = S_ISBLK(st.st_mode);
	if (S_ISREG(st.st_mode)) {
		*size = (uint64_t)st.st_size;
		return 0;
	}
	if (!*isblk) {
		snprintf(err, errlen, "not a regular file or block device");
		return -1;
	}
	end = lseek(fd, 0, SEEK_END);
	if (end < 0) {
		snprintf(err, errlen, "cannot size the block device: %s", strerror(errno));
		return -1;
	}
	*size = (uint64_t)end;
	return 0;
}

int blockif_replace_fd(struct blockif *bi, int fd, char *err, size_t errlen)
{
	uint64_t size = 0;
	bool isblk = false;

	if (!bi->ro) {
		snprintf(err, errlen, "the image is not read-only");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (fd >= 0 && medium_size(fd, &size, &isblk, err, errlen) < 0) {
		close(fd);
		return -1;
	}
	if (bi->fd >= 0)
		close(bi->fd);
	bi->fd = fd;
	bi->size = size;
	bi->isblk = isblk;
	bi->ram_backed = false; /* not asked here (the API thread's filter) */
	return 0;
}

int blockif_check_medium(int fd, uint64_t *bytes, char *err, size_t errlen)
{
	bool isblk;
	uint64_t size;

	if (medium_size(fd, &size, &isblk, err, errlen) < 0)
		return -1;
	if (bytes != NULL)
		*bytes = size;
	return 0;
}

void blockif_close(struct blockif *bi)
{
	if (bi == NULL)
		return;
	if (bi->fd >= 0)
		close(bi->fd);
	bi->fd = -1;
	if (!bi->registered) {
		pthread_mutex_destroy(&bi->count_lock);
		free(bi);
	}
}

uint64_t blockif_size(const struct blockif *bi)
{
	return bi->size;
}

uint32_t blockif_sectsz(const struct blockif *bi)
{
	return bi->sectsz;
}

uint32_t blockif_psectsz(const struct blockif *bi)
{
	return bi->psectsz;
}

bool blockif_is_ro(const struct blockif *bi)
{
	return bi->ro;
}

bool blockif_can_discard(const struct blockif *bi)
{
	return bi->candelete;
}

int blockif_flush(struct blockif *bi)
{
	if (bi->fd < 0 || bi->ro)
		return 0;
	return fdatasync(bi->fd) < 0 ? -errno : 0;
}

/* ---- helpers shared by both engines ---- */

static uint64_t iov_total(const struct iovec *iov, unsigned n)
{
	uint64_t t = 0;

	for (unsigned i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* Drop the first `n` bytes of req->iov (after a short transfer). */
static void iov_advance(struct blockif_req *req, uint64_t n)
{
	while (n > 0 && req->iovcnt > 0) {
		if (n < req->iov[0].iov_len) {
			req->iov[0].iov_base = (uint8_t *)req->iov[0].iov_base + n;
			req->iov[0].iov_len -= n;
			return;
		}
		n -= req->iov[0].iov_len;
		req->iov++;
		req->iovcnt--;
	}
}

static void list_append(struct blockif_req **head, struct blockif_req **tail, struct blockif_req *r)
{
	r->next = NULL;
	if (*tail != NULL)
		(*tail)->next = r;
	else
		*head = r;
	*tail = r;
}

static void signal_efd(struct blockif_ctx *ctx)
{
	uint64_t one = 1;

	if (write(ctx->efd, &one, sizeof(one)) < 0) {
		/* Counter overflow cannot happen with 1s; nothing to do. */
	}
}

/* A request that finished in the calling thread (inline, refused, or a
 * space op): on the quick list.  With io_uring only this thread takes from
 * it (blockif_ready, blockif_poll and blockif_wait look there before they
 * sleep), so no eventfd write: one syscall fewer per QD1 request.  The
 * thread pool's wait sleeps in poll(2) on the eventfd, so it is signalled. */
static void complete_quick(struct blockif_ctx *ctx, struct blockif_req *req)
{
	list_append(&ctx->quick_head, &ctx->quick_tail, req);
	if (!ctx->uring)
		signal_efd(ctx);
}

/* DISCARD and WRITE_ZEROES run synchronously: metadata operations. */
static int do_space_op(struct blockif *bi, const struct blockif_req *req)
{
	int mode;

	if (bi->isblk) {
		uint64_t range[2] = {req->offset, req->len};
		unsigned long cmd = req->op == BLOCKIF_DISCARD ? BLKDISCARD : BLKZEROOUT;

		return ioctl(bi->fd, cmd, range) < 0 ? -errno : 0;
	}
	if (req->op == BLOCKIF_DISCARD || req->unmap)
		mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	else
		mode = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
	if (fallocate(bi->fd, mode, (off_t)req->offset, (off_t)req->len) == 0)
		return 0;
	/* Filesystems without ZERO_RANGE still punch holes, which read as zeros. */
	if (errno == EOPNOTSUPP && mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) &&
	    fallocate(bi->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)req->offset,
	              (off_t)req->len) == 0)
		return 0;
	return -errno;
}

/* Synchronous execution of one request (thread engine). */
static int do_sync(struct blockif *bi, struct blockif_req *req)
{
	while (req->op == BLOCKIF_READ || req->op == BLOCKIF_WRITE) {
		ssize_t n;

		if (req->iovcnt == 0)
			return 0;
		n = req->op == BLOCKIF_READ ? preadv(bi->fd, req->iov, (int)req->iovcnt,
		                                     (off_t)(req->offset + req->done))
		                            : pwritev(bi->fd, req->iov, (int)req->iovcnt,
		                                      (off_t)(req->offset + req->done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		req->done += (uint64_t)n;
		iov_advance(req, (uint64_t)n);
	}
	if (req->op == BLOCKIF_FLUSH)
		return fdatasync(bi->fd) < 0 ? -errno : 0;
	return do_space_op(bi, req);
}

/* ---- io_uring engine ---- */

static void uring_prep(struct blockif_ctx *ctx, struct blockif_req *req)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ctx->ring);

	if (sqe == NULL) {
		io_uring_submit(&ctx->ring);
		sqe = io_uring_get_sqe(&ctx->ring);
	}
	if (sqe == NULL) { /* cannot happen with depth-sized rings; be safe */
		ctx->uring_inflight--;
		req->result = do_sync(ctx->bi, req);
		complete_quick(ctx, req);
		return;
	}
	if (req->op == BLOCKIF_READ)
		io_uring_prep_readv(sqe, ctx->bi->fd, req->iov, req->iovcnt,
		                    req->offset + req->done);
	else if (req->op == BLOCKIF_WRITE)
		io_uring_prep_writev(sqe, ctx->bi->fd, req->iov, req->iovcnt,
		                     req->offset + req->done);
	else {
		/* No IOSQE_IO_DRAIN: a flush covers writes already completed
		 * to the guest (virtio 1.2 5.2.6), and a drained request would
		 * also wait for the never-ending multishot polls (a hang on
		 * Linux 6.1). */
		io_uring_prep_fsync(sqe, ctx->bi->fd, IORING_FSYNC_DATASYNC);
	}
	io_uring_sqe_set_data(sqe, req);
}

/* A CQE for `req`: true when the request is finished. */
static bool uring_complete(struct blockif_ctx *ctx, struct blockif_req *req, int res)
{
	if (res < 0) {
		req->result = res;
		return true;
	}
	if (req->op != BLOCKIF_READ && req->op != BLOCKIF_WRITE) {
		req->result = 0;
		return true;
	}
	if (res == 0 && req->iovcnt > 0 && iov_total(req->iov, req->iovcnt) > 0) {
		req->result = -EIO; /* no progress: end of a shrunken image */
		return true;
	}
	req->done += (uint64_t)res;
	iov_advance(req, (uint64_t)res);
	if (req->iovcnt == 0 || iov_total(req->iov, req->iovcnt) == 0) {
		req->result = 0;
		return true;
	}
	uring_prep(ctx, req); /* short transfer: go on from where it stopped */
	io_uring_submit(&ctx->ring);
	return false;
}

/* (Re-)arm a poll for watch `i`: multishot where the kernel has it. */
static void uring_arm_watch(struct blockif_ctx *ctx, unsigned i)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ctx->ring);

	if (sqe == NULL) {
		io_uring_submit(&ctx->ring);
		sqe = io_uring_get_sqe(&ctx->ring);
		if (sqe == NULL)
			return;
	}
	io_uring_prep_poll_multishot(sqe, ctx->watch_fd[i], POLLIN);
	io_uring_sqe_set_data64(sqe, ctx->watch_tag[i]);
}

static void uring_watch_fired(struct blockif_ctx *ctx, const struct io_uring_cqe *cqe,
                              uint32_t *fired)
{
	uint32_t tag = (uint32_t)io_uring_cqe_get_data64(cqe);

	if (fired != NULL)
		*fired |= tag;
	/* Not (or no longer) multishot: arm it again. */
	if (!(cqe->flags & IORING_CQE_F_MORE)) {
		for (unsigned i = 0; i < ctx->nwatch; i++)
			if (ctx->watch_tag[i] == tag)
				uring_arm_watch(ctx, i);
	}
}

static unsigned uring_drain(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max,
                            uint32_t *fired)
{
	struct io_uring_cqe *cqe;
	unsigned n = 0;

	while (n < max && io_uring_peek_cqe(&ctx->ring, &cqe) == 0) {
		uint64_t data = io_uring_cqe_get_data64(cqe);
		struct io_uring_cqe copy = *cqe;

		io_uring_cqe_seen(&ctx->ring, cqe);
		if (data < WATCH_DATA_MAX)
			uring_watch_fired(ctx, &copy, fired);
		else if (uring_complete(ctx, (struct blockif_req *)(uintptr_t)data, copy.res)) {
			ctx->uring_inflight--;
			out[n++] = (struct blockif_req *)(uintptr_t)data;
		}
	}
	return n;
}

static unsigned uring_reap(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max)
{
	return uring_drain(ctx, out, max, NULL);
}

/*
 * The ring may only run what blockif submits (uring_prep, uring_arm_watch):
 * io_uring works outside seccomp, so a ring open to every opcode would let
 * OPENAT and friends past the sandbox (lib/sandbox.c).  Registered while
 * the ring is still disabled (IORING_SETUP_R_DISABLED, Linux 5.10); no
 * register opcode stays allowed once it is enabled.
 */
static int uring_restrict(struct io_uring *ring)
{
	static const uint8_t ops[] = {IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_FSYNC,
	                              IORING_OP_POLL_ADD};
	struct io_uring_restriction res[sizeof(ops)];

	memset(res, 0, sizeof(res));
	for (size_t i = 0; i < sizeof(ops); i++) {
		res[i].opcode = IORING_RESTRICTION_SQE_OP;
		res[i].sqe_op = ops[i];
	}
	/* Raw calls: Debian 12's liburing 2.3 declares the wrappers but its
	 * library lacks them. */
	if (syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_RESTRICTIONS, res,
	            sizeof(ops)) < 0)
		return -1;
	return syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL,
	               0) < 0
	           ? -1
	           : 0;
}

static int uring_setup(struct blockif_ctx *ctx)
{
	struct io_uring_params p;

	if (getenv("KHYVE_BLOCK_ENGINE") && strcmp(getenv("KHYVE_BLOCK_ENGINE"), "threads") == 0)
		return -1;
	/* No COOP_TASKRUN/SINGLE_ISSUER: with them, a 2-vCPU guest under
	 * the nested lab's 6.1 kernel froze the whole host (see docs/lab.md). */
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_R_DISABLED;
	if (io_uring_queue_init_params(ctx->depth * 2, &ctx->ring, &p) < 0)
		return -1;
	if (io_uring_register_eventfd(&ctx->ring, ctx->efd) < 0 || uring_restrict(&ctx->ring) < 0) {
		io_uring_queue_exit(&ctx->ring);
		return -1;
	}
	return 0;
}

/* ---- thread engine ---- */

static void *pool_main(void *arg)
{
	struct blockif_ctx *ctx = arg;

	pthread_mutex_lock(&ctx->lock);
	for (;;) {
		struct blockif_req *req = ctx->pend_head;

		/* Started before the sandbox is armed: pool_wake() wakes us then. */
		sandbox_thread_enter(SANDBOX_BLK_POOL);

		/* A flush waits until nothing before it is still running. */
		if (ctx->stopping)
			break;
		if (req == NULL || (req->op == BLOCKIF_FLUSH && ctx->active > 0)) {
			pthread_cond_wait(&ctx->cond, &ctx->lock);
			continue;
		}
		ctx->pend_head = req->next;
		if (ctx->pend_head == NULL)
			ctx->pend_tail = NULL;
		ctx->active++;
		pthread_mutex_unlock(&ctx->lock);
		req->result = do_sync(ctx->bi, req);
		pthread_mutex_lock(&ctx->lock);
		ctx->active--;
		list_append(&ctx->done_head, &ctx->done_tail, req);
		signal_efd(ctx);
		pthread_cond_broadcast(&ctx->cond);
	}
	pthread_mutex_unlock(&ctx->lock);
	return NULL;
}

static void pool_wake(void *arg)
{
	struct blockif_ctx *ctx = arg;

	pthread_mutex_lock(&ctx->lock);
	pthread_cond_broadcast(&ctx->cond);
	pthread_mutex_unlock(&ctx->lock);
}

static int pool_setup(struct blockif_ctx *ctx)
{
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_cond_init(&ctx->cond, NULL);
	sandbox_wake_at_arm(pool_wake, ctx);
	for (unsigned i = 0; i < POOL_THREADS; i++) {
		if (pthread_create(&ctx->threads[i], NULL, pool_main, ctx) != 0)
			return -1;
		ctx->nthreads++;
	}
	return 0;
}

static unsigned pool_reap(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max)
{
	unsigned n = 0;

	pthread_mutex_lock(&ctx->lock);
	while (n < max && ctx->done_head != NULL) {
		out[n++] = ctx->done_head;
		ctx->done_head = ctx->done_head->next;
	}
	if (ctx->done_head == NULL)
		ctx->done_tail = NULL;
	pthread_mutex_unlock(&ctx->lock);
	return n;
}

/* ---- counters (blockif_register_counters) ---- */

static void counts_add(struct disk_counts *to, const struct disk_counts *from)
{
#define ADD(f) (to->f += __atomic_load_n(&from->f, __ATOMIC_RELAXED))
	ADD(reads);
	ADD(writes);
	ADD(read_bytes);
	ADD(write_bytes);
	ADD(flushes);
	ADD(discards);
	ADD(errors);
	for (unsigned i = 0; i < LAT_HIST_BUCKETS; i++)
		ADD(lat.count[i]);
	ADD(lat.sum_us);
#undef ADD
}

static void counts_link(struct blockif_ctx *ctx)
{
	pthread_mutex_lock(&ctx->bi->count_lock);
	ctx->next_ctx = ctx->bi->ctxs;
	ctx->bi->ctxs = ctx;
	pthread_mutex_unlock(&ctx->bi->count_lock);
}

/* A context goes: what it counted stays with its image. */
static void counts_unlink(struct blockif_ctx *ctx)
{
	struct blockif *bi = ctx->bi;

	pthread_mutex_lock(&bi->count_lock);
	for (struct blockif_ctx **p = &bi->ctxs; *p != NULL; p = &(*p)->next_ctx) {
		if (*p == ctx) {
			*p = ctx->next_ctx;
			counts_add(&bi->gone, &ctx->counts);
			break;
		}
	}
	pthread_mutex_unlock(&bi->count_lock);
}

/* One writer: a relaxed load and store, no locked add, and the reader
 * still never sees a torn value. */
static void bump(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

static void count_one(struct disk_counts *c, const struct blockif_req *req, uint64_t now)
{
	bool ok = req->result >= 0;

	switch (req->op) {
	case BLOCKIF_READ:
		bump(&c->reads, 1);
		if (ok)
			bump(&c->read_bytes, req->done);
		break;
	case BLOCKIF_WRITE:
	case BLOCKIF_WRITE_ZEROES:
		bump(&c->writes, 1);
		if (ok)
			bump(&c->write_bytes, req->op == BLOCKIF_WRITE ? req->done : req->len);
		break;
	case BLOCKIF_FLUSH:
		bump(&c->flushes, 1);
		break;
	case BLOCKIF_DISCARD:
		bump(&c->discards, 1);
		break;
	}
	if (!ok)
		bump(&c->errors, 1);
	lat_hist_add(&c->lat, now > req->queued_ns ? now - req->queued_ns : 0);
}

/* Count the `n` requests going back to the caller; returns `n`. */
static unsigned count_done(struct blockif_ctx *ctx, struct blockif_req **out, unsigned n)
{
	uint64_t now;

	if (n == 0)
		return 0;
	now = monotonic_ns();
	for (unsigned i = 0; i < n; i++)
		count_one(&ctx->counts, out[i], now);
	return n;
}

/* The registry's reader (the API thread): no system call but an
 * uncontended futex at worst, since the lock is only taken when a
 * context comes or goes. */
static void read_counters(void *arg, struct counter_out *o)
{
	struct blockif *bi = arg;
	struct disk_counts sum;

	pthread_mutex_lock(&bi->count_lock);
	sum = bi->gone;
	for (struct blockif_ctx *c = bi->ctxs; c != NULL; c = c->next_ctx)
		counts_add(&sum, &c->counts);
	pthread_mutex_unlock(&bi->count_lock);
	o->put(o, "reads_total", sum.reads);
	o->put(o, "writes_total", sum.writes);
	o->put(o, "read_bytes_total", sum.read_bytes);
	o->put(o, "write_bytes_total", sum.write_bytes);
	o->put(o, "flushes_total", sum.flushes);
	o->put(o, "discards_total", sum.discards);
	o->put(o, "errors_total", sum.errors);
	counter_put_lat(o, "latency_us", &sum.lat);
}

int blockif_register_counters(struct blockif *bi)
{
	bi->src.kind = COUNTER_DISK;
	snprintf(bi->src.name, sizeof(bi->src.name), "disk%u", counters_count(COUNTER_DISK));
	bi->src.read = read_counters;
	bi->src.arg = bi;
	if (counters_register(&bi->src) < 0)
		return -1;
	bi->registered = true;
	return 0;
}

/* ---- public context API ---- */

struct blockif_ctx *blockif_ctx_create(struct blockif *bi, unsigned depth, char *err, size_t errlen)
{
	/* Aligned: its counters share no cache line with other data. */
	struct blockif_ctx *ctx = aligned_alloc(64, sizeof(*ctx));

	if (ctx == NULL)
		return NULL;
	memset(ctx, 0, sizeof(*ctx));
	ctx->bi = bi;
	ctx->depth = depth ? depth : 1;
	ctx->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctx->efd < 0)
		goto fail;
	if (uring_setup(ctx) == 0) {
		ctx->uring = true;
		counts_link(ctx);
		return ctx;
	}
	if (pool_setup(ctx) == 0) {
		counts_link(ctx);
		return ctx;
	}
fail:
	snprintf(err, errlen, "cannot set up disk I/O: %s", strerror(errno));
	blockif_ctx_destroy(ctx);
	return NULL;
}

void blockif_ctx_destroy(struct blockif_ctx *ctx)
{
	if (ctx == NULL)
		return;
	counts_unlink(ctx);
	sandbox_cancel_wake(pool_wake, ctx);
	if (ctx->uring) {
		io_uring_queue_exit(&ctx->ring);
	} else if (ctx->nthreads > 0) {
		pthread_mutex_lock(&ctx->lock);
		ctx->stopping = true;
		pthread_cond_broadcast(&ctx->cond);
		pthread_mutex_unlock(&ctx->lock);
		for (unsigned i = 0; i < ctx->nthreads; i++)
			pthread_join(ctx->threads[i], NULL);
	}
	if (ctx->efd >= 0)
		close(ctx->efd);
	free(ctx);
}

int blockif_ctx_fd(struct blockif_ctx *ctx)
{
	return ctx->efd;
}

const char *blockif_ctx_engine(const struct blockif_ctx *ctx)
{
	return ctx->uring ? "io_uring" : "threads";
}

unsigned blockif_default_poll_us(void)
{
	/* sysconf() reads /sys: ask once (a race only repeats the question). */
	static int cached = -1;
	int us = __atomic_load_n(&cached, __ATOMIC_RELAXED);

	if (us < 0) {
		us = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 32 : 0;
		__atomic_store_n(&cached, us, __ATOMIC_RELAXED);
	}
	return (unsigned)us;
}

bool blockif_spin(unsigned us, bool (*ready)(void *arg), void *arg, const bool *stop)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)us * 1000;

	if (us == 0)
		return false;
	do {
		for (int i = 0; i < 64; i++) {
			if (ready(arg))
				return true;
			__builtin_ia32_pause();
		}
	} while (monotonic_ns() < deadline && !__atomic_load_n(stop, __ATOMIC_ACQUIRE));
	return false;
}

static bool inline_op(const struct blockif_req *req)
{
	return req->op == BLOCKIF_READ || req->op == BLOCKIF_WRITE || req->op == BLOCKIF_FLUSH;
}

/* A second request came: the held one goes into the ring first, in order. */
static void release_held(struct blockif_ctx *ctx)
{
	struct blockif_req *req = ctx->held;

	if (req == NULL)
		return;
	ctx->held = NULL;
	ctx->uring_inflight++;
	uring_prep(ctx, req);
}

/*
 * At the submit, the held request is still the only one (QD1, the
 * fsync-after-each-write pattern of databases): it runs here, sparing the
 * hop through one of io_uring's worker threads (a wake-up and two context
 * switches) that an fsync always takes, and a read or write does wherever
 * the file cannot try it without blocking (RWF_NOWAIT: tmpfs, ext4's
 * buffered writes, O_DIRECT writes that must wait).  With one request
 * there is nothing to overlap it with; a batch of two or more goes to
 * io_uring whole.
 */
static void run_held(struct blockif_ctx *ctx)
{
	struct blockif_req *req = ctx->held;

	if (req == NULL)
		return;
	ctx->held = NULL;
	req->result = do_sync(ctx->bi, req);
	complete_quick(ctx, req);
}

void blockif_queue(struct blockif_ctx *ctx, struct blockif_req *req)
{
	req->done = 0;
	req->result = 0;
	req->queued_ns = monotonic_ns();
	if ((req->op == BLOCKIF_WRITE || req->op == BLOCKIF_DISCARD ||
	     req->op == BLOCKIF_WRITE_ZEROES) &&
	    ctx->bi->ro)
		req->result = -EROFS;
	else if (req->op == BLOCKIF_DISCARD && !ctx->bi->candelete)
		req->result = -EOPNOTSUPP;
	else if (req->op == BLOCKIF_DISCARD || req->op == BLOCKIF_WRITE_ZEROES)
		req->result = do_space_op(ctx->bi, req);
	else if (ctx->uring && ctx->bi->ram_backed && inline_op(req))
		/* An image in RAM (tmpfs, ramfs): io_uring would hand every
		 * read and write to a worker thread (no RWF_NOWAIT there), which
		 * costs more than the copy (bench/blk-host: 3-5x the QD1 IOPS). */
		req->result = do_sync(ctx->bi, req);
	else if (ctx->uring && inline_op(req) && ctx->uring_inflight == 0 && ctx->held == NULL) {
		ctx->held = req; /* alone so far: see run_held() */
		return;
	} else if (ctx->uring) {
		release_held(ctx);
		ctx->uring_inflight++;
		uring_prep(ctx, req);
		return;
	} else {
		list_append(&ctx->staged_head, &ctx->staged_tail, req);
		return;
	}
	complete_quick(ctx, req);
}

void blockif_submit(struct blockif_ctx *ctx)
{
	if (ctx->uring) {
		run_held(ctx);
		io_uring_submit(&ctx->ring);
		return;
	}
	if (ctx->staged_head == NULL)
		return;
	pthread_mutex_lock(&ctx->lock);
	if (ctx->pend_tail != NULL)
		ctx->pend_tail->next = ctx->staged_head;
	else
		ctx->pend_head = ctx->staged_head;
	ctx->pend_tail = ctx->staged_tail;
	pthread_cond_broadcast(&ctx->cond);
	pthread_mutex_unlock(&ctx->lock);
	ctx->staged_head = ctx->staged_tail = NULL;
}

int blockif_ctx_watch(struct blockif_ctx *ctx, int fd, uint32_t tag)
{
	unsigned i = ctx->nwatch;

	if (i == BLOCKIF_MAX_WATCH || tag == 0 || tag >= WATCH_DATA_MAX)
		return -1;
	ctx->watch_fd[i] = fd;
	ctx->watch_tag[i] = tag;
	ctx->nwatch++;
	if (ctx->uring)
		uring_arm_watch(ctx, i);
	return 0;
}

static unsigned take_quick(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max)
{
	unsigned n = 0;

	while (n < max && ctx->quick_head != NULL) {
		out[n++] = ctx->quick_head;
		ctx->quick_head = ctx->quick_head->next;
	}
	if (ctx->quick_head == NULL)
		ctx->quick_tail = NULL;
	return n;
}

static unsigned uring_wait(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max,
                           uint32_t *fired)
{
	unsigned n;

	run_held(ctx);
	n = take_quick(ctx, out, max);
	/* Sleep only when nothing is ready yet. */
	if (n == 0 && io_uring_cq_ready(&ctx->ring) == 0)
		io_uring_submit_and_wait(&ctx->ring, 1);
	else
		io_uring_submit(&ctx->ring);
	return n + uring_drain(ctx, out + n, max - n, fired);
}

static unsigned reap(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max);

static unsigned pool_wait(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max,
                          uint32_t *fired)
{
	struct pollfd pfd[BLOCKIF_MAX_WATCH + 1];
	unsigned n;

	blockif_submit(ctx);
	n = reap(ctx, out, max);
	pfd[0] = (struct pollfd){ctx->efd, POLLIN, 0};
	for (unsigned i = 0; i < ctx->nwatch; i++)
		pfd[i + 1] = (struct pollfd){ctx->watch_fd[i], POLLIN, 0};
	if (poll(pfd, ctx->nwatch + 1, n > 0 ? 0 : -1) < 0)
		return n;
	for (unsigned i = 0; i < ctx->nwatch; i++)
		if (pfd[i + 1].revents)
			*fired |= ctx->watch_tag[i];
	if (n == 0 && pfd[0].revents)
		n = reap(ctx, out, max);
	return n;
}

unsigned blockif_wait(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max,
                      uint32_t *fired)
{
	return count_done(ctx, out,
	                  ctx->uring ? uring_wait(ctx, out, max, fired)
	                             : pool_wait(ctx, out, max, fired));
}

unsigned blockif_poll(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max,
                      uint32_t *fired)
{
	unsigned n;

	if (!ctx->uring) {
		blockif_submit(ctx);
		return count_done(ctx, out, reap(ctx, out, max));
	}
	run_held(ctx);
	n = take_quick(ctx, out, max);
	io_uring_submit(&ctx->ring);
	return count_done(ctx, out, n + uring_drain(ctx, out + n, max - n, fired));
}

bool blockif_ready(struct blockif_ctx *ctx)
{
	if (ctx->quick_head != NULL || ctx->held != NULL)
		return true;
	if (ctx->uring)
		return io_uring_cq_ready(&ctx->ring) > 0;
	return __atomic_load_n(&ctx->done_head, __ATOMIC_ACQUIRE) != NULL;
}

/* blockif_reap() without the counting, for the engines' wait paths. */
static unsigned reap(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max)
{
	uint64_t v;
	unsigned n = 0;

	/* Clear readiness first, so a completion racing with us re-arms it. */
	if (read(ctx->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing signalled; completions may still be queued. */
	}
	while (n < max && ctx->quick_head != NULL) {
		out[n++] = ctx->quick_head;
		ctx->quick_head = ctx->quick_head->next;
	}
	if (ctx->quick_head == NULL)
		ctx->quick_tail = NULL;
	if (n < max)
		n += ctx->uring ? uring_reap(ctx, out + n, max - n)
		                : pool_reap(ctx, out + n, max - n);
	if (n == max)
		signal_efd(ctx); /* more may be waiting: stay readable */
	return n;
}

unsigned blockif_reap(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max)
{
	return count_done(ctx, out, reap(ctx, out, max));
}
