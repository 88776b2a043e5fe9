/*
 * The 9P2000.L server (see p9fs.h).  Message layouts follow the 9P2000.L
 * list in diod's protocol.md and Linux's include/net/9p/9p.h; integers are
 * little-endian, strings a u16 length and that many bytes.
 */
#include "backend/p9fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Message types (T; the R is T + 1). */
enum {
	P9_TLERROR = 6,
	P9_RLERROR = 7,
	P9_TSTATFS = 8,
	P9_TLOPEN = 12,
	P9_TLCREATE = 14,
	P9_TSYMLINK = 16,
	P9_TMKNOD = 18,
	P9_TRENAME = 20,
	P9_TREADLINK = 22,
	P9_TGETATTR = 24,
	P9_TSETATTR = 26,
	P9_TXATTRWALK = 30,
	P9_TXATTRCREATE = 32,
	P9_TREADDIR = 40,
	P9_TFSYNC = 50,
	P9_TLOCK = 52,
	P9_TGETLOCK = 54,
	P9_TLINK = 70,
	P9_TMKDIR = 72,
	P9_TRENAMEAT = 74,
	P9_TUNLINKAT = 76,
	P9_TVERSION = 100,
	P9_TAUTH = 102,
	P9_TATTACH = 104,
	P9_TFLUSH = 108,
	P9_TWALK = 110,
	P9_TREAD = 116,
	P9_TWRITE = 118,
	P9_TCLUNK = 120,
	P9_TREMOVE = 122,
};

#define P9_QTDIR             0x80
#define P9_QTSYMLINK         0x02
#define P9_GETATTR_BASIC     0x7ffull
#define P9_MAXWELEM          16
#define P9_NAME_MAX          255
#define P9_MIN_MSIZE         4096
#define P9_DEFAULT_MSIZE     8192
#define P9_LOCK_SUCCESS      0
#define P9_LOCK_TYPE_UNLCK   2
#define P9_DOTL_AT_REMOVEDIR 0x200

/* Tsetattr valid bits. */
#define P9_ATTR_MODE      0x001
#define P9_ATTR_UID       0x002
#define P9_ATTR_GID       0x004
#define P9_ATTR_SIZE      0x008
#define P9_ATTR_ATIME     0x010
#define P9_ATTR_MTIME     0x020
#define P9_ATTR_ATIME_SET 0x080
#define P9_ATTR_MTIME_SET 0x100

#define NO_FID            0xffffffffu
#define FID_BUCKETS       1024

struct p9_fid {
	uint32_t fid;
	int next;   /* index of the next fid in the bucket, -1 none */
	char *path; /* relative to the share: "." or "a/b" */
	int fd;     /* opened by Tlopen/Tlcreate, -1 before */
	bool used;
};

struct p9fs {
	int root; /* the share, O_RDONLY | O_DIRECTORY */
	bool ro;
	uint32_t msize;
	unsigned nfids;
	int bucket[FID_BUCKETS];
	int free_head;
	struct p9_fid fids[P9FS_MAX_FIDS];
};

/* ---- message reading and writing ---- */

struct rd {
	const uint8_t *p;
	size_t len, off;
	bool bad; /* a field ran past the end, or a string held a NUL */
};

struct wr {
	uint8_t *p;
	size_t cap, off;
	bool over; /* the reply did not fit */
};

static const uint8_t *rd_take(struct rd *r, size_t n)
{
	const uint8_t *at = r->p + r->off;

	if (r->bad || n > r->len - r->off) {
		r->bad = true;
		return NULL;
	}
	r->off += n;
	return at;
}

static uint64_t rd_uint(struct rd *r, unsigned n)
{
	const uint8_t *b = rd_take(r, n);
	uint64_t v = 0;

	for (unsigned i = 0; b != NULL && i < n; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

/* A field the server does not use. */
static void rd_skip(struct rd *r, size_t n)
{
	rd_take(r, n);
}

#define rd8(r)  ((uint8_t)rd_uint(r, 1))
#define rd16(r) ((uint16_t)rd_uint(r, 2))
#define rd32(r) ((uint32_t)rd_uint(r, 4))
#define rd64(r) rd_uint(r, 8)

/* A string into `out` (room for `cap` bytes with its NUL): its length, or
 * -1 when too long (ENAMETOOLONG), and r->bad when malformed. */
static int rd_str(struct rd *r, char *out, size_t cap)
{
	uint16_t n = rd16(r);
	const uint8_t *b = rd_take(r, n);

	out[0] = '\0';
	if (b == NULL)
		return 0;
	if (memchr(b, '\0', n) != NULL) {
		r->bad = true;
		return 0;
	}
	if ((size_t)n >= cap)
		return -1;
	memcpy(out, b, n);
	out[n] = '\0';
	return n;
}

static uint8_t *wr_take(struct wr *w, size_t n)
{
	uint8_t *at = w->p + w->off;

	if (w->over || n > w->cap - w->off) {
		w->over = true;
		return NULL;
	}
	w->off += n;
	return at;
}

static void wr_uint(struct wr *w, uint64_t v, unsigned n)
{
	uint8_t *b = wr_take(w, n);

	for (unsigned i = 0; b != NULL && i < n; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

#define wr8(w, v)  wr_uint(w, v, 1)
#define wr16(w, v) wr_uint(w, v, 2)
#define wr32(w, v) wr_uint(w, v, 4)
#define wr64(w, v) wr_uint(w, v, 8)

static void wr_str(struct wr *w, const char *s, size_t n)
{
	uint8_t *b;

	wr16(w, n);
	b = wr_take(w, n);
	if (b != NULL)
		memcpy(b, s, n);
}

static void wr_qid(struct wr *w, const struct stat *st)
{
	uint8_t type = S_ISDIR(st->st_mode) ? P9_QTDIR : S_ISLNK(st->st_mode) ? P9_QTSYMLINK : 0;

	wr8(w, type);
	wr32(w, 0); /* version: no cache consistency promised */
	wr64(w, st->st_ino);
}

/* ---- fids ---- */

static struct p9_fid *fid_find(struct p9fs *fs, uint32_t fid)
{
	for (int i = fs->bucket[fid % FID_BUCKETS]; i >= 0; i = fs->fids[i].next)
		if (fs->fids[i].fid == fid)
			return &fs->fids[i];
	return NULL;
}

/* A new fid with `path` (taken over: freed on failure); NULL when the
 * table is full, `fid` is NOFID or already in use. */
static struct p9_fid *fid_add(struct p9fs *fs, uint32_t fid, char *path)
{
	struct p9_fid *f;
	int i = fs->free_head;

	if (i < 0 || fid == NO_FID || fid_find(fs, fid) != NULL) {
		free(path);
		return NULL;
	}
	f = &fs->fids[i];
	fs->free_head = f->next;
	*f = (struct p9_fid){.fid = fid,
	                     .next = fs->bucket[fid % FID_BUCKETS],
	                     .path = path,
	                     .fd = -1,
	                     .used = true};
	fs->bucket[fid % FID_BUCKETS] = i;
	fs->nfids++;
	return f;
}

static void fid_del(struct p9fs *fs, struct p9_fid *f)
{
	int idx = (int)(f - fs->fids);
	int *link = &fs->bucket[f->fid % FID_BUCKETS];

	while (*link != idx)
		link = &fs->fids[*link].next;
	*link = f->next;
	if (f->fd >= 0)
		close(f->fd);
	free(f->path);
	*f = (struct p9_fid){.next = fs->free_head, .fd = -1};
	fs->free_head = idx;
	fs->nfids--;
}

void p9fs_reset(struct p9fs *fs)
{
	for (int i = 0; i < P9FS_MAX_FIDS; i++)
		if (fs->fids[i].used)
			fid_del(fs, &fs->fids[i]);
	fs->msize = P9_DEFAULT_MSIZE;
}

uint32_t p9fs_msize(const struct p9fs *fs)
{
	return fs->msize;
}

/* ---- paths, always beneath the share ---- */

/* `path` (relative to the share) opened with `flags`, no symlink on the
 * way and nothing outside: a descriptor or -errno. */
static int open_beneath(const struct p9fs *fs, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
	    .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
	    .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, fs->root, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

/* One path component a guest may name: not empty, "." or "..", no '/'. */
static bool name_ok(const char *name)
{
	return name[0] != '\0' && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
	       strchr(name, '/') == NULL;
}

/* `dir`/`name` as a new string, or NULL (ENAMETOOLONG, out of memory). */
static char *path_join(const char *dir, const char *name)
{
	char *p;

	if (strcmp(dir, ".") == 0)
		p = strdup(name);
	else if (asprintf(&p, "%s/%s", dir, name) < 0)
		p = NULL;
	if (p != NULL && strlen(p) >= PATH_MAX) {
		free(p);
		p = NULL;
	}
	return p;
}

/* The parent of `path` ("." for a top-level name), a new string. */
static char *path_parent(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash == NULL ? strdup(".") : strndup(path, (size_t)(slash - path));
}

static const char *path_base(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash == NULL ? path : slash + 1;
}

static bool is_root(const char *path)
{
	return strcmp(path, ".") == 0;
}

/* The directory `path` for *at calls (O_PATH): a descriptor or -errno. */
static int open_dir(const struct p9fs *fs, const char *path)
{
	return open_beneath(fs, path, O_PATH | O_DIRECTORY, 0);
}

/* The parent directory of a fid's (non-root) path: a descriptor or -errno. */
static int open_parent(const struct p9fs *fs, const char *path)
{
	char *parent = path_parent(path);
	int fd;

	if (parent == NULL)
		return -ENOMEM;
	fd = open_dir(fs, parent);
	free(parent);
	return fd;
}

static int stat_path(const struct p9fs *fs, const char *path, struct stat *st)
{
	int fd = open_beneath(fs, path, O_PATH, 0), rc;

	if (fd < 0)
		return fd;
	rc = fstat(fd, st) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

/* After a rename of `from` to `to`: every fid at or below `from` follows. */
static void fids_renamed(struct p9fs *fs, const char *from, const char *to)
{
	size_t n = strlen(from);

	for (int i = 0; i < P9FS_MAX_FIDS; i++) {
		struct p9_fid *f = &fs->fids[i];
		char *p;

		if (!f->used || strncmp(f->path, from, n) != 0 ||
		    (f->path[n] != '\0' && f->path[n] != '/'))
			continue;
		if (asprintf(&p, "%s%s", to, f->path + n) < 0 || strlen(p) >= PATH_MAX) {
			free(p);
			continue; /* keeps the old path: its next use fails, no harm */
		}
		free(f->path);
		f->path = p;
	}
}

/* ---- requests ---- */

/* One request being answered: its reader, the reply and the error. */
struct req {
	struct p9fs *fs;
	struct rd in;
	struct wr out;
	int err; /* errno for Rlerror, 0 for success */
};

static struct p9_fid *req_fid(struct req *q)
{
	uint32_t fid = rd32(&q->in);
	struct p9_fid *f = q->in.bad ? NULL : fid_find(q->fs, fid);

	if (f == NULL && q->err == 0)
		q->err = q->in.bad ? EINVAL : EBADF;
	return f;
}

/* A name field: valid, else q->err (EINVAL, ENAMETOOLONG). */
static bool req_name(struct req *q, char *name)
{
	int n = rd_str(&q->in, name, P9_NAME_MAX + 1);

	if (q->err == 0 && (q->in.bad || n < 0 || !name_ok(name)))
		q->err = q->in.bad ? EINVAL : n < 0 ? ENAMETOOLONG : EINVAL;
	return q->err == 0;
}

static bool refuse_ro(struct req *q)
{
	if (q->err == 0 && q->fs->ro)
		q->err = EROFS;
	return q->err != 0;
}

static void set_err(struct req *q, int rc)
{
	if (rc < 0 && q->err == 0)
		q->err = -rc;
}

static void do_version(struct req *q)
{
	uint32_t msize = rd32(&q->in);
	char version[32];
	int n = rd_str(&q->in, version, sizeof(version));

	if (q->in.bad) {
		q->err = EINVAL;
		return;
	}
	p9fs_reset(q->fs);
	if (msize < P9_MIN_MSIZE) {
		q->err = EINVAL;
		return;
	}
	q->fs->msize = msize < P9FS_MAX_MSIZE ? msize : P9FS_MAX_MSIZE;
	wr32(&q->out, q->fs->msize);
	if (n > 0 && strcmp(version, "9P2000.L") == 0)
		wr_str(&q->out, "9P2000.L", 8);
	else
		wr_str(&q->out, "unknown", 7);
}

static void do_attach(struct req *q)
{
	uint32_t fid = rd32(&q->in);
	struct stat st;
	struct p9_fid *f;
	char *root;

	rd_skip(&q->in, 4); /* afid: no authentication */
	if (q->in.bad) {
		q->err = EINVAL;
		return;
	}
	set_err(q, stat_path(q->fs, ".", &st));
	if (q->err != 0)
		return;
	root = strdup(".");
	f = root != NULL ? fid_add(q->fs, fid, root) : NULL;
	if (f == NULL) {
		q->err = root == NULL ? ENOMEM : fid_find(q->fs, fid) ? EEXIST : ENFILE;
		return;
	}
	wr_qid(&q->out, &st);
}

/* One walk step from `path` by `name`: the new path (a new string) or
 * NULL with *err. */
static char *walk_step(const char *path, const char *name, int *err)
{
	char *p = NULL;

	if (strcmp(name, "..") == 0)
		p = is_root(path) ? strdup(".") : path_parent(path); /* the root stays */
	else if (strcmp(name, ".") == 0)
		p = strdup(path);
	else if (name_ok(name))
		p = path_join(path, name);
	else
		*err = ENOENT;
	if (p == NULL && *err == 0)
		*err = ENAMETOOLONG;
	return p;
}

static void do_walk(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	uint32_t newfid = rd32(&q->in);
	uint16_t n = rd16(&q->in), done = 0;
	uint8_t *count;
	char *path, name[P9_NAME_MAX + 1];

	if (q->err == 0 && (q->in.bad || n > P9_MAXWELEM))
		q->err = EINVAL;
	if (q->err == 0 && newfid != f->fid && fid_find(q->fs, newfid) != NULL)
		q->err = EEXIST;
	if (q->err != 0)
		return;
	path = strdup(f->path);
	count = wr_take(&q->out, 2);
	for (; path != NULL && done < n; done++) {
		struct stat st;
		int err = 0, len = rd_str(&q->in, name, sizeof(name));
		char *next = len < 0 ? (err = ENAMETOOLONG, NULL) : walk_step(path, name, &err);

		if (q->in.bad)
			err = EINVAL;
		if (next != NULL && err == 0)
			err = -stat_path(q->fs, next, &st);
		if (next == NULL || err != 0) {
			free(next);
			if (done == 0)
				q->err = err ? err : ENOENT;
			break;
		}
		free(path);
		path = next;
		wr_qid(&q->out, &st);
		/* A file (or symlink) ends the walk: nothing is below it. */
		if (!S_ISDIR(st.st_mode) && done + 1 < n) {
			done++;
			break;
		}
	}
	if (path == NULL && q->err == 0)
		q->err = ENOMEM;
	if (q->err == 0 && done == n) {
		if (newfid == f->fid) {
			free(f->path);
			f->path = path;
			path = NULL;
		} else if (fid_add(q->fs, newfid, path) == NULL) {
			q->err = ENFILE;
		}
		path = NULL;
	}
	free(path);
	if (count != NULL) {
		count[0] = (uint8_t)done;
		count[1] = (uint8_t)(done >> 8);
	}
}

static void put_attr(struct wr *w, const struct stat *st)
{
	wr64(w, P9_GETATTR_BASIC);
	wr_qid(w, st);
	wr32(w, st->st_mode);
	wr32(w, st->st_uid);
	wr32(w, st->st_gid);
	wr64(w, st->st_nlink);
	wr64(w, st->st_rdev);
	wr64(w, (uint64_t)st->st_size);
	wr64(w, (uint64_t)st->st_blksize);
	wr64(w, (uint64_t)st->st_blocks);
	wr64(w, (uint64_t)st->st_atim.tv_sec);
	wr64(w, (uint64_t)st->st_atim.tv_nsec);
	wr64(w, (uint64_t)st->st_mtim.tv_sec);
	wr64(w, (uint64_t)st->st_mtim.tv_nsec);
	wr64(w, (uint64_t)st->st_ctim.tv_sec);
	wr64(w, (uint64_t)st->st_ctim.tv_nsec);
	for (int i = 0; i < 4; i++)
		wr64(w, 0); /* btime, gen, data_version: not given */
}

static void do_getattr(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	struct stat st;

	rd_skip(&q->in, 8); /* request mask: the basic set is always returned */
	if (q->err == 0 && q->in.bad)
		q->err = EINVAL;
	if (q->err != 0)
		return;
	set_err(q,
	        f->fd >= 0 ? (fstat(f->fd, &st) < 0 ? -errno : 0) : stat_path(q->fs, f->path, &st));
	if (q->err == 0)
		put_attr(&q->out, &st);
}

/* Tsetattr's size: through the open file when it is writable, else
 * opened for writing now. */
static int set_size(struct req *q, struct p9_fid *f, uint64_t size)
{
	int fd, rc;

	if (size > (uint64_t)INT64_MAX)
		return -EINVAL;
	if (f->fd >= 0 && ftruncate(f->fd, (off_t)size) == 0)
		return 0;
	fd = open_beneath(q->fs, f->path, O_WRONLY | O_NONBLOCK, 0);
	if (fd < 0)
		return fd;
	rc = ftruncate(fd, (off_t)size) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static struct timespec attr_time(uint32_t valid, uint32_t is, uint32_t set, uint64_t sec,
                                 uint64_t nsec)
{
	if (!(valid & is))
		return (struct timespec){.tv_nsec = UTIME_OMIT};
	if (!(valid & set))
		return (struct timespec){.tv_nsec = UTIME_NOW};
	return (struct timespec){.tv_sec = (time_t)sec, .tv_nsec = (long)(nsec % 1000000000)};
}

/* Mode, owner and times of the share's root (no parent to name it in). */
static int set_root_attr(struct req *q, uint32_t valid, uint32_t mode, uint32_t uid, uint32_t gid,
                         const struct timespec ts[2])
{
	int root = q->fs->root;

	if ((valid & P9_ATTR_MODE) && fchmod(root, mode & 07777) < 0)
		return -errno;
	if ((valid & (P9_ATTR_UID | P9_ATTR_GID)) &&
	    fchown(root, (valid & P9_ATTR_UID) ? uid : (uid_t)-1,
	           (valid & P9_ATTR_GID) ? gid : (gid_t)-1) < 0)
		return -errno;
	if ((valid & (P9_ATTR_ATIME | P9_ATTR_MTIME)) && futimens(root, ts) < 0)
		return -errno;
	return 0;
}

/* Mode, owner and times by name in the parent, never through a symlink
 * (a symlink's mode means nothing: left alone). */
static int set_named_attr(struct req *q, const char *path, uint32_t valid, uint32_t mode,
                          uint32_t uid, uint32_t gid, const struct timespec ts[2])
{
	int dir = open_parent(q->fs, path), rc = 0;
	const char *base = path_base(path);
	struct stat st;

	if (dir < 0)
		return dir;
	if (fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	else if ((valid & P9_ATTR_MODE) && !S_ISLNK(st.st_mode) &&
	         fchmodat(dir, base, mode & 07777, 0) < 0)
		rc = -errno;
	else if ((valid & (P9_ATTR_UID | P9_ATTR_GID)) &&
	         fchownat(dir, base, (valid & P9_ATTR_UID) ? uid : (uid_t)-1,
	                  (valid & P9_ATTR_GID) ? gid : (gid_t)-1, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	else if ((valid & (P9_ATTR_ATIME | P9_ATTR_MTIME)) &&
	         utimensat(dir, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	close(dir);
	return rc;
}

static void do_setattr(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	uint32_t valid = rd32(&q->in), mode = rd32(&q->in), uid = rd32(&q->in), gid = rd32(&q->in);
	uint64_t size = rd64(&q->in), as = rd64(&q->in), an = rd64(&q->in), ms = rd64(&q->in),
	         mn = rd64(&q->in);
	struct timespec ts[2] = {attr_time(valid, P9_ATTR_ATIME, P9_ATTR_ATIME_SET, as, an),
	                         attr_time(valid, P9_ATTR_MTIME, P9_ATTR_MTIME_SET, ms, mn)};

	if (q->err == 0 && q->in.bad)
		q->err = EINVAL;
	if (refuse_ro(q))
		return;
	if (valid & P9_ATTR_SIZE)
		set_err(q, set_size(q, f, size));
	if (q->err == 0 && is_root(f->path))
		set_err(q, set_root_attr(q, valid, mode, uid, gid, ts));
	else if (q->err == 0)
		set_err(q, set_named_attr(q, f->path, valid, mode, uid, gid, ts));
}

/* The open(2) flags of a Tlopen/Tlcreate (Linux's P9_DOTL_* values are
 * x86's O_*): access mode, truncation, sync and directory only; append is
 * the guest's (it sends the offsets), the rest means nothing here.  Always
 * O_NONBLOCK: opening a FIFO the host put there must not wait for its
 * other end (reply_open() then refuses it); regular files ignore it. */
static int open_flags(uint32_t dotl)
{
	return (int)(dotl & (O_ACCMODE | O_TRUNC | O_DSYNC | O_SYNC | O_DIRECTORY | O_EXCL)) |
	       O_NONBLOCK;
}

static bool flags_write(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

/*
 * Answer an open (Tlopen, Tlcreate) of `fd`: only regular files and
 * directories are served.  A FIFO or device node the host put in the
 * share would block the request thread (and, through the queue lock, a
 * vCPU resetting the device) or reach a host device: refused, and `fd`
 * closed.  Returns whether the fid may keep `fd`.
 */
static bool reply_open(struct req *q, int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		q->err = errno;
	else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		q->err = EACCES;
	if (q->err != 0) {
		close(fd);
		return false;
	}
	wr_qid(&q->out, &st);
	wr32(&q->out, 0); /* iounit: the client uses msize */
	return true;
}

static void do_lopen(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	int flags = open_flags(rd32(&q->in)) & ~O_EXCL, fd;
	struct stat st;

	if (q->err == 0 && q->in.bad)
		q->err = EINVAL;
	if (q->err == 0 && f->fd >= 0)
		q->err = EBUSY;
	if (q->err == 0 && flags_write(flags))
		refuse_ro(q);
	if (q->err == 0)
		set_err(q, stat_path(q->fs, f->path, &st));
	if (q->err != 0)
		return;
	if (S_ISDIR(st.st_mode))
		flags = O_RDONLY | O_DIRECTORY;
	fd = open_beneath(q->fs, f->path, flags, 0);
	set_err(q, fd);
	if (q->err == 0 && reply_open(q, fd))
		f->fd = fd;
}

static void do_lcreate(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	char name[P9_NAME_MAX + 1], *path;
	int flags, dir, fd;
	uint32_t mode;

	if (!req_name(q, name))
		return;
	flags = open_flags(rd32(&q->in));
	mode = rd32(&q->in);
	rd_skip(&q->in, 4); /* gid: files are khyve's */
	if (q->in.bad)
		q->err = EINVAL;
	if (q->err == 0 && f->fd >= 0)
		q->err = EBUSY;
	if (refuse_ro(q))
		return;
	path = path_join(f->path, name);
	dir = open_dir(q->fs, f->path);
	if (path == NULL || dir < 0) {
		q->err = path == NULL ? ENAMETOOLONG : -dir;
		free(path);
		if (dir >= 0)
			close(dir);
		return;
	}
	fd = openat(dir, name, flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode & 07777);
	close(dir);
	if (fd < 0) {
		q->err = errno;
		free(path);
		return;
	}
	if (!reply_open(q, fd)) {
		free(path);
		return;
	}
	free(f->path);
	f->path = path; /* the fid is now the new file, opened */
	f->fd = fd;
}

/* Reply with the qid of `name` in the directory `dir`. */
static void reply_qid_at(struct req *q, int dir, const char *name)
{
	struct stat st;

	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		q->err = errno;
	else
		wr_qid(&q->out, &st);
}

/* A directory fid's descriptor for a name operation, or -1 with q->err. */
static int req_dir(struct req *q, struct p9_fid *f)
{
	int dir;

	if (q->err != 0)
		return -1;
	dir = open_dir(q->fs, f->path);
	set_err(q, dir);
	return dir;
}

static void do_mkdir(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	char name[P9_NAME_MAX + 1];
	uint32_t mode;
	int dir;

	if (!req_name(q, name))
		return;
	mode = rd32(&q->in);
	rd_skip(&q->in, 4); /* gid */
	if (q->in.bad)
		q->err = EINVAL;
	if (refuse_ro(q) || (dir = req_dir(q, f)) < 0)
		return;
	if (mkdirat(dir, name, mode & 07777) < 0)
		q->err = errno;
	else
		reply_qid_at(q, dir, name);
	close(dir);
}

static void do_symlink(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	char name[P9_NAME_MAX + 1], *target = malloc(PATH_MAX);
	int dir, n;

	if (target == NULL) {
		q->err = ENOMEM;
		return;
	}
	if (req_name(q, name)) {
		n = rd_str(&q->in, target, PATH_MAX);
		rd_skip(&q->in, 4); /* gid */
		if (q->in.bad || n == 0)
			q->err = EINVAL;
		else if (n < 0)
			q->err = ENAMETOOLONG;
	}
	if (!refuse_ro(q) && (dir = req_dir(q, f)) >= 0) {
		/* The target is only text: the guest resolves it, never khyve. */
		if (symlinkat(target, dir, name) < 0)
			q->err = errno;
		else
			reply_qid_at(q, dir, name);
		close(dir);
	}
	free(target);
}

static void do_readlink(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	char *buf;
	ssize_t n;
	int fd;

	if (q->err != 0)
		return;
	fd = open_beneath(q->fs, f->path, O_PATH, 0);
	if (fd < 0) {
		q->err = -fd;
		return;
	}
	buf = malloc(PATH_MAX);
	n = buf != NULL ? readlinkat(fd, "", buf, PATH_MAX) : -1;
	if (n < 0)
		q->err = buf != NULL ? errno : ENOMEM;
	else
		wr_str(&q->out, buf, (size_t)n);
	free(buf);
	close(fd);
}

static void do_unlinkat(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	char name[P9_NAME_MAX + 1];
	uint32_t flags;
	int dir;

	if (!req_name(q, name))
		return;
	flags = rd32(&q->in);
	if (q->in.bad)
		q->err = EINVAL;
	if (refuse_ro(q) || (dir = req_dir(q, f)) < 0)
		return;
	if (unlinkat(dir, name, (flags & P9_DOTL_AT_REMOVEDIR) ? AT_REMOVEDIR : 0) < 0)
		q->err = errno;
	close(dir);
}

static void do_remove(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	struct stat st;
	int dir;

	if (q->err != 0)
		return;
	if (q->fs->ro)
		q->err = EROFS;
	else if (is_root(f->path))
		q->err = EBUSY;
	else if ((dir = open_parent(q->fs, f->path)) < 0)
		q->err = -dir;
	else {
		const char *base = path_base(f->path);

		if (fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    unlinkat(dir, base, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
			q->err = errno;
		close(dir);
	}
	fid_del(q->fs, f); /* clunked even when the removal failed (9P) */
}

/* Rename `odir`/`oname` (paths of the fids) to `ndir`/`nname`. */
static void rename_in(struct req *q, const char *odir, const char *oname, const char *ndir,
                      const char *nname)
{
	char *from = path_join(odir, oname), *to = path_join(ndir, nname);
	int od = open_dir(q->fs, odir), nd = open_dir(q->fs, ndir);

	if (from == NULL || to == NULL)
		q->err = ENAMETOOLONG;
	else if (od < 0 || nd < 0)
		q->err = od < 0 ? -od : -nd;
	else if (renameat(od, oname, nd, nname) < 0)
		q->err = errno;
	else
		fids_renamed(q->fs, from, to);
	if (od >= 0)
		close(od);
	if (nd >= 0)
		close(nd);
	free(from);
	free(to);
}

static void do_renameat(struct req *q)
{
	struct p9_fid *of = req_fid(q), *nf;
	char oname[P9_NAME_MAX + 1], nname[P9_NAME_MAX + 1];

	if (!req_name(q, oname))
		return;
	nf = req_fid(q);
	if (!req_name(q, nname) || refuse_ro(q))
		return;
	rename_in(q, of->path, oname, nf->path, nname);
}

static void do_rename(struct req *q)
{
	struct p9_fid *f = req_fid(q), *df = req_fid(q);
	char nname[P9_NAME_MAX + 1], *odir;

	if (!req_name(q, nname) || refuse_ro(q))
		return;
	if (is_root(f->path)) {
		q->err = EBUSY;
		return;
	}
	odir = path_parent(f->path);
	if (odir == NULL) {
		q->err = ENOMEM;
		return;
	}
	rename_in(q, odir, path_base(f->path), df->path, nname);
	free(odir);
}

static void do_link(struct req *q)
{
	struct p9_fid *df = req_fid(q), *f = req_fid(q);
	char name[P9_NAME_MAX + 1];
	int dir, src;

	if (!req_name(q, name) || refuse_ro(q))
		return;
	if (is_root(f->path)) {
		q->err = EPERM;
		return;
	}
	if ((dir = req_dir(q, df)) < 0)
		return;
	src = open_parent(q->fs, f->path);
	if (src < 0)
		q->err = -src;
	else if (linkat(src, path_base(f->path), dir, name, 0) < 0)
		q->err = errno;
	if (src >= 0)
		close(src);
	close(dir);
}

static void do_read(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	uint64_t off = rd64(&q->in);
	uint32_t count = rd32(&q->in);
	size_t room;
	uint8_t *data;
	ssize_t n;

	if (q->err == 0 && q->in.bad)
		q->err = EINVAL;
	if (q->err == 0 && f->fd < 0)
		q->err = EBADF;
	if (q->err == 0 && off > (uint64_t)INT64_MAX)
		q->err = EINVAL;
	if (q->err != 0)
		return;
	room = q->out.cap - q->out.off - 4;
	if (count > room)
		count = (uint32_t)room;
	data = q->out.p + q->out.off + 4;
	n = pread(f->fd, data, count, (off_t)off);
	if (n < 0) {
		q->err = errno;
		return;
	}
	wr32(&q->out, (uint32_t)n);
	wr_take(&q->out, (size_t)n);
}

static void do_write(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	uint64_t off = rd64(&q->in);
	uint32_t count = rd32(&q->in);
	const uint8_t *data = rd_take(&q->in, count);
	ssize_t n;

	if (q->err == 0 && (q->in.bad || data == NULL || off > (uint64_t)INT64_MAX))
		q->err = EINVAL;
	if (q->err == 0 && f->fd < 0)
		q->err = EBADF;
	if (refuse_ro(q))
		return;
	n = pwrite(f->fd, data, count, (off_t)off);
	if (n < 0)
		q->err = errno;
	else
		wr32(&q->out, (uint32_t)n);
}

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Encode the entries of buf[0 .. len) while they fit in `room` bytes;
 * returns the bytes written. */
static size_t put_dirents(struct wr *w, const uint8_t *buf, size_t len, size_t room)
{
	size_t used = 0;

	const size_t name_at = offsetof(struct linux_dirent64, d_name);

	for (size_t at = 0; at + name_at < len;) {
		const struct linux_dirent64 *d = (const void *)(buf + at);
		size_t nlen, need;

		if (d->d_reclen <= name_at || d->d_reclen > len - at)
			break; /* the kernel's records are never so: stop rather than trust */
		nlen = strnlen(d->d_name, d->d_reclen - name_at);
		need = 13 + 8 + 1 + 2 + nlen;
		if (used + need > room)
			break;
		wr8(w, d->d_type == DT_DIR ? P9_QTDIR : d->d_type == DT_LNK ? P9_QTSYMLINK : 0);
		wr32(w, 0);
		wr64(w, d->d_ino);
		wr64(w, (uint64_t)d->d_off);
		wr8(w, d->d_type);
		wr_str(w, d->d_name, nlen);
		used += need;
		at += d->d_reclen;
	}
	return used;
}

static void do_readdir(struct req *q)
{
	struct p9_fid *f = req_fid(q);
	uint64_t off = rd64(&q->in);
	uint32_t count = rd32(&q->in);
	uint8_t *countp, *buf;
	size_t room;
	long n;

	if (q->err == 0 && q->in.bad)
		q->err = EINVAL;
	if (q->err == 0 && f->fd < 0)
		q->err = EBADF;
	if (q->err != 0)
		return;
	room = q->out.cap - q->out.off - 4;
	if (count < room)
		room = count;
	if (lseek(f->fd, (off_t)off, SEEK_SET) < 0) {
		q->err = errno;
		return;
	}
	buf = malloc(room + 1);
	n = buf != NULL ? syscall(SYS_getdents64, f->fd, buf, room + 1) : -1;
	if (n < 0) {
		q->err = buf != NULL ? errno : ENOMEM;
		free(buf);
		return;
	}
	countp = wr_take(&q->out, 4);
	n = (long)put_dirents(&q->out, buf, (size_t)n, room);
	free(buf);
	for (int i = 0; i < 4; i++)
		countp[i] = (uint8_t)((uint32_t)n >> (8 * i));
}

static void do_statfs(struct req *q)
{
	struct statfs s;
	uint64_t fsid;

	req_fid(q);
	if (q->err != 0)
		return;
	if (fstatfs(q->fs->root, &s) < 0) {
		q->err = errno;
		return;
	}
	memcpy(&fsid, &s.f_fsid, sizeof(fsid));
	wr32(&q->out, (uint32_t)s.f_type);
	wr32(&q->out, (uint32_t)s.f_bsize);
	wr64(&q->out, s.f_blocks);
	wr64(&q->out, s.f_bfree);
	wr64(&q->out, s.f_bavail);
	wr64(&q->out, s.f_files);
	wr64(&q->out, s.f_ffree);
	wr64(&q->out, fsid);
	wr32(&q->out, (uint32_t)s.f_namelen);
}

static void do_fsync(struct req *q)
{
	struct p9_fid *f = req_fid(q);

	if (q->err == 0 && f->fd >= 0 && fsync(f->fd) < 0)
		q->err = errno;
}

static void do_clunk(struct req *q)
{
	struct p9_fid *f = req_fid(q);

	if (q->err == 0)
		fid_del(q->fs, f);
}

/* Tlock: granted (the guest's own processes are all that share it). */
static void do_lock(struct req *q)
{
	req_fid(q);
	if (q->err == 0)
		wr8(&q->out, P9_LOCK_SUCCESS);
}

/* Tgetlock: nobody holds a conflicting lock. */
static void do_getlock(struct req *q)
{
	char client[256];
	uint64_t start, length;
	uint32_t proc;
	int n;

	req_fid(q);
	rd_skip(&q->in, 1);
	start = rd64(&q->in);
	length = rd64(&q->in);
	proc = rd32(&q->in);
	n = rd_str(&q->in, client, sizeof(client));
	if (q->err == 0 && (q->in.bad || n < 0))
		q->err = EINVAL;
	if (q->err != 0)
		return;
	wr8(&q->out, P9_LOCK_TYPE_UNLCK);
	wr64(&q->out, start);
	wr64(&q->out, length);
	wr32(&q->out, proc);
	wr_str(&q->out, client, (size_t)n);
}

/* Tmknod: device nodes and FIFOs are not made in a share. */
static void do_mknod(struct req *q)
{
	q->err = q->fs->ro ? EROFS : EPERM;
}

/* Tflush: requests are answered in order, so the old one is done. */
static void do_flush(struct req *q)
{
	(void)q;
}

typedef void (*p9_handler)(struct req *q);

/* Anything missing (Tauth, xattrs, 9P2000's own messages) gets
 * EOPNOTSUPP. */
static const p9_handler handlers[128] = {
    [P9_TVERSION] = do_version, [P9_TATTACH] = do_attach,     [P9_TWALK] = do_walk,
    [P9_TGETATTR] = do_getattr, [P9_TSETATTR] = do_setattr,   [P9_TLOPEN] = do_lopen,
    [P9_TLCREATE] = do_lcreate, [P9_TREAD] = do_read,         [P9_TWRITE] = do_write,
    [P9_TCLUNK] = do_clunk,     [P9_TREMOVE] = do_remove,     [P9_TREADDIR] = do_readdir,
    [P9_TMKDIR] = do_mkdir,     [P9_TUNLINKAT] = do_unlinkat, [P9_TRENAMEAT] = do_renameat,
    [P9_TRENAME] = do_rename,   [P9_TSYMLINK] = do_symlink,   [P9_TREADLINK] = do_readlink,
    [P9_TSTATFS] = do_statfs,   [P9_TFSYNC] = do_fsync,       [P9_TLINK] = do_link,
    [P9_TLOCK] = do_lock,       [P9_TGETLOCK] = do_getlock,   [P9_TFLUSH] = do_flush,
    [P9_TMKNOD] = do_mknod,
};

static void dispatch(struct req *q, uint8_t type)
{
	if (type < sizeof(handlers) / sizeof(handlers[0]) && handlers[type] != NULL)
		handlers[type](q);
	else
		q->err = EOPNOTSUPP;
}

static void put_header(uint8_t *p, uint32_t size, uint8_t type, uint16_t tag)
{
	const uint8_t h[P9FS_HDR] = {
	    (uint8_t)size, (uint8_t)(size >> 8), (uint8_t)(size >> 16), (uint8_t)(size >> 24),
	    type,          (uint8_t)tag,         (uint8_t)(tag >> 8)};

	memcpy(p, h, sizeof(h));
}

size_t p9fs_handle(struct p9fs *fs, const uint8_t *req, size_t len, uint8_t *resp, size_t cap)
{
	struct req q = {.fs = fs, .in = {.p = req, .len = len}};
	uint32_t size;
	uint8_t type;
	uint16_t tag;

	if (cap > fs->msize && !(len > 4 && req[4] == P9_TVERSION))
		cap = fs->msize;
	if (len < P9FS_HDR || cap < P9FS_HDR + 4)
		return 0;
	size = rd32(&q.in);
	type = rd8(&q.in);
	tag = rd16(&q.in);
	q.out = (struct wr){.p = resp, .cap = cap, .off = P9FS_HDR};
	/* The buffer may be longer than the message (the rest is ignored),
	 * never shorter. */
	if (size < P9FS_HDR || size > len || size > P9FS_MAX_MSIZE ||
	    (type != P9_TVERSION && size > fs->msize) || (type & 1))
		q.err = EINVAL; /* a size past the buffer, or an R-message */
	else {
		q.in.len = size;
		dispatch(&q, type);
	}
	if (q.err == 0 && q.in.bad)
		q.err = EINVAL;
	if (q.err == 0 && q.out.over)
		q.err = EMSGSIZE;
	if (q.err != 0) {
		q.out.off = P9FS_HDR;
		q.out.over = false;
		wr32(&q.out, (uint32_t)q.err);
		type = P9_TLERROR;
	}
	put_header(resp, (uint32_t)q.out.off, (uint8_t)(type + 1), tag);
	return q.out.off;
}

struct p9fs *p9fs_open(const char *path, bool ro, char *err, size_t errlen)
{
	struct p9fs *fs = calloc(1, sizeof(*fs));
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
	struct stat st;
	long probe;

	if (fs == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	fs->root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->root < 0 || fstat(fs->root, &st) < 0) {
		snprintf(err, errlen, "shared folder %s: %s", path, strerror(errno));
		goto fail;
	}
	/* Confinement rests on openat2 (Linux 5.6): refuse to serve without it. */
	probe = syscall(SYS_openat2, fs->root, ".", &how, sizeof(how));
	if (probe < 0) {
		snprintf(err, errlen, "shared folder %s: openat2: %s (needs Linux 5.6 or later)",
		         path, strerror(errno));
		goto fail;
	}
	close((int)probe);
	fs->ro = ro;
	fs->msize = P9_DEFAULT_MSIZE;
	for (int i = 0; i < FID_BUCKETS; i++)
		fs->bucket[i] = -1;
	fs->free_head = -1;
	for (int i = P9FS_MAX_FIDS - 1; i >= 0; i--) {
		fs->fids[i] = (struct p9_fid){.next = fs->free_head, .fd = -1};
		fs->free_head = i;
	}
	return fs;
fail:
	if (fs->root >= 0)
		close(fs->root);
	free(fs);
	return NULL;
}

void p9fs_close(struct p9fs *fs)
{
	if (fs == NULL)
		return;
	p9fs_reset(fs);
	close(fs->root);
	free(fs);
}
