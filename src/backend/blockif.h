/*
 * Block back end for disk devices (bhyve: block_if.c), asynchronous on
 * io_uring (liburing) with a thread-pool fallback where io_uring is not
 * available (or KHYVE_BLOCK_ENGINE=threads).
 *
 * Options follow bhyve's block device syntax:
 * path[,nocache][,direct|sync][,ro][,sectorsize=L[/P]][,nodelete]:
 * nocache opens with O_DIRECT, sync/direct with O_SYNC.
 *
 * Each submitting thread owns a struct blockif_ctx (its own ring).  A flush
 * completes only after fdatasync(2) of the image succeeded; it covers every
 * write that completed before the flush was queued (what virtio 1.2 5.2.6
 * and NVMe's Flush promise), not writes still in flight beside it.
 */
#ifndef KHYVE_BLOCKIF_H
#define KHYVE_BLOCKIF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct config_node;

struct blockif_opts {
	bool ro;
	bool nocache;     /* O_DIRECT */
	bool sync;        /* O_SYNC ("sync" or "direct") */
	bool nodelete;    /* refuse DISCARD */
	uint32_t sectsz;  /* logical sector size in bytes; 0 = from the device/512 */
	uint32_t psectsz; /* physical sector size; 0 = logical */
};

/*
 * Read the block options below `node` (keys path, ro, nocache, direct,
 * sync, nodelete, sectorsize) into `o` and *path.  0, or -1 with `err`.
 */
int blockif_parse_config(struct config_node *node, const char **path, struct blockif_opts *o,
                         char *err, size_t errlen);

/* The same without the path: only the options (for a drive that may start
 * empty).  0, or -1 with `err`. */
int blockif_parse_options(struct config_node *node, struct blockif_opts *o, char *err,
                          size_t errlen);

/* The keys blockif_parse_config() reads, for a disk emulation's
 * pci_devemu.keys (each a plain name; prefix them for nested ports). */
#define BLOCKIF_KEYS "path", "ro", "nocache", "direct", "sync", "nodelete", "sectorsize"

/* Split "path,opt,opt=v" (a -s conf string) into config keys below `node`:
 * the first item is the path; the rest as key[=value]. */
int blockif_legacy_config(struct config_node *node, const char *conf, char *err, size_t errlen);

struct blockif;

struct blockif *blockif_open(const char *path, const struct blockif_opts *o, char *err,
                             size_t errlen);
void blockif_close(struct blockif *bi);

/*
 * A read-only image without a medium (an empty CD tray): size 0, fd -1,
 * sector sizes from `o` (512 by default).  Contexts and counters work as
 * for an opened one; a request on it fails with -EBADF.  NULL when out of
 * memory.
 */
struct blockif *blockif_open_empty(const struct blockif_opts *o);

/*
 * Change the medium of a read-only image (removable media, MMC-6 4.2):
 * the image open on `fd` (a regular file or block device) replaces the
 * current one, whose fd is closed; fd -1 leaves it empty (size 0).  The
 * image owns `fd` from the call on, on failure too (then the old medium
 * stays).  Opens nothing (the jail forbids open() by path) and creates no
 * thread: the contexts and their rings or threads stay.  The caller must
 * make sure no request is in flight on any context of `bi` (as a device
 * that runs its commands under its own lock does), and that requests
 * queued later are ordered after this call (that lock again).  0, or -1
 * with `err` ("not a regular file or block device", or the image is not
 * read-only).
 */
int blockif_replace_fd(struct blockif *bi, int fd, char *err, size_t errlen);

/* Whether `fd` could be a medium for blockif_replace_fd() (fstat: regular
 * file or block device) and its size in *bytes (may be NULL).  Does not
 * close `fd`.  0, or -1 with `err`. */
int blockif_check_medium(int fd, uint64_t *bytes, char *err, size_t errlen);

uint64_t blockif_size(const struct blockif *bi);    /* bytes */
uint32_t blockif_sectsz(const struct blockif *bi);  /* logical sector, bytes */
uint32_t blockif_psectsz(const struct blockif *bi); /* physical sector, bytes */
bool blockif_is_ro(const struct blockif *bi);
bool blockif_can_discard(const struct blockif *bi);

/*
 * Make every write that completed on any context of `bi` stable
 * (fdatasync(2) of the image), as a checkpoint needs before it saves a
 * disk device whose requests have all completed
 * (docs/design/snapshots.md section 2, "backend").  Synchronous, from the
 * caller's thread; nothing to do for an image without a medium or a
 * read-only one.  0, or -errno.
 */
int blockif_flush(struct blockif *bi);

enum blockif_op {
	BLOCKIF_READ,
	BLOCKIF_WRITE,
	BLOCKIF_FLUSH,
	BLOCKIF_DISCARD,      /* punch a hole: [offset, offset+len) */
	BLOCKIF_WRITE_ZEROES, /* zero [offset, offset+len); unmap when allowed */
};

/* One request.  The back end may adjust iov/iovcnt while retrying short
 * transfers; everything else is the caller's. */
struct blockif_req {
	enum blockif_op op;
	uint64_t offset; /* bytes into the image */
	uint64_t len;    /* DISCARD/WRITE_ZEROES: bytes */
	struct iovec *iov;
	unsigned iovcnt;
	bool unmap; /* WRITE_ZEROES may deallocate */
	int result; /* on completion: 0, or -errno */
	/* private */
	uint64_t done;
	uint64_t seq;
	uint64_t queued_ns; /* monotonic_ns() at blockif_queue(), for latency_us */
	struct blockif_req *next;
};

struct blockif_ctx;

/* A context for up to `depth` requests in flight; NULL with `err`. */
struct blockif_ctx *blockif_ctx_create(struct blockif *bi, unsigned depth, char *err,
                                       size_t errlen);
void blockif_ctx_destroy(struct blockif_ctx *ctx);

/* An fd that polls readable when completions may be waiting: io_uring's
 * or the worker threads'.  With io_uring, a request that finished inside
 * blockif_queue() or blockif_submit() (an image in RAM, a lone request
 * run inline) does not make it readable: blockif_ready() and the reaping
 * calls see it. */
int blockif_ctx_fd(struct blockif_ctx *ctx);

/* Queue `req` (at most `depth` outstanding); sent by blockif_submit(). */
void blockif_queue(struct blockif_ctx *ctx, struct blockif_req *req);
void blockif_submit(struct blockif_ctx *ctx);

/* Move up to `max` finished requests to `out`; returns how many.  Clears
 * the readiness of blockif_ctx_fd() when it returns fewer than `max`. */
unsigned blockif_reap(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max);

/*
 * Event-driven use, for a thread that serves one queue: also wake
 * blockif_wait() when `fd` is readable and report `tag` (1-255, one bit per
 * watch: use powers of two).  At most BLOCKIF_MAX_WATCH watches.  0 or -1.
 */
#define BLOCKIF_MAX_WATCH 4
int blockif_ctx_watch(struct blockif_ctx *ctx, int fd, uint32_t tag);

/*
 * Submit what is queued, then sleep until a request finishes or a watched
 * fd is readable (unless something is already waiting).  Finished requests
 * go to `out` (at most `max`), the tags of readable watches are OR-ed into
 * *fired.  Returns the number of finished requests.  With io_uring this
 * is one io_uring_enter(2) per round trip; completions and wake-ups need no
 * eventfd hops.
 */
unsigned blockif_wait(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max,
                      uint32_t *fired);

/* The same without sleeping: submit, then take what is already there. */
unsigned blockif_poll(struct blockif_ctx *ctx, struct blockif_req **out, unsigned max,
                      uint32_t *fired);

/* True when blockif_poll() would return something (cheap: no syscall with
 * io_uring). */
bool blockif_ready(struct blockif_ctx *ctx);

/*
 * Show this image's requests in the counter registry (lib/counters.h) as
 * disk "diskN", N the number of disks registered before it: a disk device
 * calls it once, at the end of a successful init, so that the names follow
 * PCI slot order (and port order within an AHCI controller).  Keys:
 * reads_total, writes_total, read_bytes_total, write_bytes_total,
 * flushes_total, discards_total, errors_total and the histogram latency_us
 * (from blockif_queue() to the request's return by blockif_reap(),
 * blockif_wait() or blockif_poll()).  A write-zeroes request counts as a
 * write of its length (as QEMU's block accounting does); bytes count only
 * for requests that succeeded; a failed request counts as its kind and as
 * an error.  A registered image outlives blockif_close(), which then only
 * closes its file: the registry keeps pointing at it.  0, or -1 when the
 * registry refused the name.
 */
int blockif_register_counters(struct blockif *bi);

/* Name of the engine in use: "io_uring" or "threads". */
const char *blockif_ctx_engine(const struct blockif_ctx *ctx);

/*
 * The busy-poll window, in microseconds, a queue thread should use after
 * activity when the user set none: 32 (as QEMU's iothread poll-max-ns)
 * when this host has more than one online CPU, else 0, since on one CPU
 * the polling thread only delays the vCPU that would produce the work.
 */
unsigned blockif_default_poll_us(void);

/*
 * Busy-wait (with PAUSE) for up to `us` microseconds until ready(arg) is
 * true or *stop becomes true; ready() is asked every 64 pauses' worth of
 * spinning, so it must be cheap (no syscalls).  Returns whether ready()
 * said so; with `us` 0 it returns false at once, leaving the caller's own
 * last look (after it re-armed its notifications) to decide.
 */
bool blockif_spin(unsigned us, bool (*ready)(void *arg), void *arg, const bool *stop);

/* Lines of `-s EMULATION,help` for the options every disk emulation passes
 * to blockif_opts_from_config(), and for sectorsize=, which nvme replaces
 * with its own sectsz=. */
#define BLOCKIF_USAGE_FLAGS                                                                        \
	"  ro               read-only: the guest cannot write the image\n"                         \
	"  nocache          open with O_DIRECT (bypass the host page cache)\n"                     \
	"  direct, sync     open with O_SYNC: a write completes once on disk\n"                    \
	"  nodelete         never punch holes for discard/TRIM\n"
#define BLOCKIF_USAGE_SECTORSIZE                                                                   \
	"  sectorsize=L[/P] logical and physical sector size (powers of two >= 512)\n"

#endif
