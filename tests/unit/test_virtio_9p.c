/*
 * Unit tests for virtio-9p (src/dev/virtio_9p.c) and its 9P2000.L server
 * (src/backend/p9fs.c): requests go through the device's queue (BAR 4,
 * tests/unit/virtio_unit.h) to a share in a temporary folder; the
 * read-only share is driven through p9fs_handle() directly.  Covered:
 * the mount tag, version and attach, walk, create, write, read, getattr,
 * readdir, mkdir, rename, symlink and readlink, unlink; the escapes (".."
 * at the root, a name with '/', an absolute symlink, a symlink leading
 * outside, made by the guest or on the host) all refused; ro; malformed
 * messages answered with Rlerror and nothing changed.
 */
#include "virtio_unit.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "backend/p9fs.h"
#include "bus/pci_slot.h"
#include "core/snapshot.h"
#include "lib/config.h"

#define MSG_MAX 8192

enum {
	RLERROR = 7,
	TSTATFS = 8,
	TLOPEN = 12,
	TLCREATE = 14,
	TSYMLINK = 16,
	TMKNOD = 18,
	TREADLINK = 22,
	TGETATTR = 24,
	TSETATTR = 26,
	TXATTRWALK = 30,
	TREADDIR = 40,
	TMKDIR = 72,
	TRENAMEAT = 74,
	TUNLINKAT = 76,
	TVERSION = 100,
	TATTACH = 104,
	TWALK = 110,
	TREAD = 116,
	TWRITE = 118,
	TCLUNK = 120,
};

struct msg {
	uint8_t b[MSG_MAX];
	size_t n;
};

static char *share, *outside;
static uint8_t reply[MSG_MAX];
static struct p9fs *rofs; /* the same folder, read-only, without a device */

static void put(struct msg *m, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		m->b[m->n++] = (uint8_t)(v >> (8 * i));
}

static void put_str(struct msg *m, const char *s)
{
	put(m, strlen(s), 2);
	memcpy(m->b + m->n, s, strlen(s));
	m->n += strlen(s);
}

static struct msg *start(uint8_t type)
{
	static struct msg m;

	m.n = 0;
	put(&m, 0, 4);
	put(&m, type, 1);
	put(&m, 0x1234, 2);
	return &m;
}

static void finish(struct msg *m)
{
	for (int i = 0; i < 4; i++)
		m->b[i] = (uint8_t)(m->n >> (8 * i));
}

static uint64_t get(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Send `m` through the device's queue; the reply is in `reply`, its
 * type returned (RLERROR: the errno is rerr()). */
static uint8_t send_dev(struct msg *m)
{
	static uint16_t used;
	unsigned idx;

	finish(m);
	idx = vu_chain(0, m->b, m->n, MSG_MAX / 2);
	assert_true(vu_wait_used(0, ++used));
	memcpy(reply, vu_reply(0, idx), MSG_MAX / 2);
	assert_int_equal(get(reply, 4), vu_used_len(0, (uint16_t)(used - 1)));
	assert_int_equal(get(reply + 5, 2), 0x1234);
	return reply[4];
}

static uint8_t send_ro(struct msg *m)
{
	size_t n;

	finish(m);
	n = p9fs_handle(rofs, m->b, m->n, reply, sizeof(reply));
	assert_true(n >= 11);
	assert_int_equal(get(reply, 4), n);
	return reply[4];
}

static uint32_t rerr(void)
{
	return (uint32_t)get(reply + 7, 4);
}

/* ---- requests ---- */

static uint8_t version(uint8_t (*send)(struct msg *), uint32_t msize)
{
	struct msg *m = start(TVERSION);

	put(m, msize, 4);
	put_str(m, "9P2000.L");
	return send(m);
}

static uint8_t attach(uint8_t (*send)(struct msg *), uint32_t fid)
{
	struct msg *m = start(TATTACH);

	put(m, fid, 4);
	put(m, 0xffffffffu, 4);
	put_str(m, "root");
	put_str(m, "");
	put(m, 0, 4);
	return send(m);
}

/* Walk `fid` to `newfid` by up to four names (NULL-terminated); returns
 * the reply type; nwqid in reply + 7. */
static uint8_t walk_with(uint8_t (*send)(struct msg *), uint32_t fid, uint32_t newfid,
                         const char *const *names)
{
	struct msg *m = start(TWALK);
	unsigned n = 0;

	while (names[n] != NULL)
		n++;
	put(m, fid, 4);
	put(m, newfid, 4);
	put(m, n, 2);
	for (unsigned i = 0; i < n; i++)
		put_str(m, names[i]);
	return send(m);
}

#define WALK(fid, newfid, ...)                                                                     \
	walk_with(send_dev, fid, newfid, (const char *const[]){__VA_ARGS__, NULL})

static unsigned nwqid(void)
{
	return (unsigned)get(reply + 7, 2);
}

static uint64_t qid_path(unsigned i)
{
	return get(reply + 9 + 13 * i + 5, 8);
}

static uint8_t lopen(uint8_t (*send)(struct msg *), uint32_t fid, uint32_t flags)
{
	struct msg *m = start(TLOPEN);

	put(m, fid, 4);
	put(m, flags, 4);
	return send(m);
}

static uint8_t lcreate(uint8_t (*send)(struct msg *), uint32_t fid, const char *name)
{
	struct msg *m = start(TLCREATE);

	put(m, fid, 4);
	put_str(m, name);
	put(m, O_RDWR, 4);
	put(m, 0644, 4);
	put(m, 0, 4);
	return send(m);
}

static uint8_t write_at(uint32_t fid, uint64_t off, const char *data)
{
	struct msg *m = start(TWRITE);

	put(m, fid, 4);
	put(m, off, 8);
	put(m, strlen(data), 4);
	memcpy(m->b + m->n, data, strlen(data));
	m->n += strlen(data);
	return send_dev(m);
}

static uint8_t read_at(uint32_t fid, uint64_t off, uint32_t count)
{
	struct msg *m = start(TREAD);

	put(m, fid, 4);
	put(m, off, 8);
	put(m, count, 4);
	return send_dev(m);
}

static uint8_t clunk(uint32_t fid)
{
	struct msg *m = start(TCLUNK);

	put(m, fid, 4);
	return send_dev(m);
}

static uint8_t name_op(uint8_t type, uint32_t dfid, const char *name, uint32_t arg)
{
	struct msg *m = start(type);

	put(m, dfid, 4);
	put_str(m, name);
	put(m, arg, 4);
	if (type == TMKDIR)
		put(m, 0, 4); /* gid */
	return send_dev(m);
}

static uint8_t symlink_op(uint32_t dfid, const char *name, const char *target)
{
	struct msg *m = start(TSYMLINK);

	put(m, dfid, 4);
	put_str(m, name);
	put_str(m, target);
	put(m, 0, 4);
	return send_dev(m);
}

/* Tsetattr of the size only, to 0. */
static uint8_t truncate_to_0(uint8_t (*send)(struct msg *), uint32_t fid)
{
	struct msg *m = start(TSETATTR);

	put(m, fid, 4);
	put(m, 0x8, 4); /* valid: size */
	for (int i = 0; i < 3; i++)
		put(m, 0, 4); /* mode, uid, gid */
	for (int i = 0; i < 5; i++)
		put(m, 0, 8); /* size, times */
	return send(m);
}

static char *host_path(const char *name)
{
	static char p[512];

	snprintf(p, sizeof(p), "%s/%s", share, name);
	return p;
}

static int group_setup(void **state)
{
	char err[256] = "", *conf;
	int fd;

	(void)state;
	share = unit_mkdtemp();
	outside = unit_mkdtemp();
	if (share == NULL || outside == NULL)
		return -1;
	/* A secret outside the share, and a host-made symlink to it. */
	snprintf(err, sizeof(err), "%s/secret", outside);
	fd = open(err, O_CREAT | O_WRONLY, 0600);
	if (fd < 0 || write(fd, "secret", 6) != 6)
		return -1;
	close(fd);
	if (symlink(outside, host_path("hostlink")) < 0)
		return -1;
	config_reset();
	if (asprintf(&conf, "4,virtio-9p,hostshare=%s", share) < 0 ||
	    pci_parse_slot_option(conf, err, sizeof(err)) < 0 || vu_setup(NULL) < 0) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	free(conf);
	rofs = p9fs_open(share, true, err, sizeof(err));
	if (rofs == NULL)
		return -1;
	vu_start(1 /* MOUNT_TAG */ | VU_F_EVENT_IDX, 1);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	vu_wr(VU_CC_STATUS, 1, 0);
	p9fs_close(rofs);
	unit_rmtree(share);
	unit_rmtree(outside);
	free(share);
	free(outside);
	return 0;
}

static void test_mount_tag(void **state)
{
	(void)state;
	assert_int_equal(vu_rd(VU_DEVICE, 2), strlen("hostshare"));
	for (unsigned i = 0; i < strlen("hostshare"); i++)
		assert_int_equal(vu_rd(VU_DEVICE + 2 + i, 1), "hostshare"[i]);
	assert_string_equal(config_get("pci.0.4.0.sharename"), "hostshare");
	assert_string_equal(config_get("pci.0.4.0.path"), share);
}

static void test_options_refused(void **state)
{
	char err[256] = "";

	(void)state;
	assert_int_equal(pci_parse_slot_option("5,virtio-9p,/just/a/path", err, sizeof(err)), -1);
	assert_contains(err, "SHARENAME=PATH");
	config_unset("pci.0.5");
	assert_int_equal(pci_parse_slot_option("5,virtio-9p,t=/x,ro,rw", err, sizeof(err)), 0);
	assert_int_equal(pci_check_config(false, err, sizeof(err)), -1);
	assert_contains(err, "'rw'");
	config_unset("pci.0.5");
}

static void test_version_attach(void **state)
{
	(void)state;
	assert_int_equal(version(send_dev, 1u << 20), TVERSION + 1);
	assert_int_equal(get(reply + 7, 4), P9FS_MAX_MSIZE); /* the smaller */
	assert_int_equal(version(send_dev, MSG_MAX / 2), TVERSION + 1);
	assert_int_equal(get(reply + 7, 4), MSG_MAX / 2);
	assert_int_equal(attach(send_dev, 1), TATTACH + 1);
	assert_int_equal(reply[7], 0x80);               /* a directory */
	assert_int_equal(attach(send_dev, 1), RLERROR); /* fid in use */
	assert_int_equal(rerr(), EEXIST);
}

static void test_create_write_read(void **state)
{
	char buf[64] = "";
	int fd;

	(void)state;
	assert_int_equal(WALK(1, 2, NULL), TWALK + 1); /* a clone of the root */
	assert_int_equal(lcreate(send_dev, 2, "hello.txt"), TLCREATE + 1);
	assert_int_equal(write_at(2, 0, "hello, host"), TWRITE + 1);
	assert_int_equal(get(reply + 7, 4), 11);
	fd = open(host_path("hello.txt"), O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf)), 11);
	assert_string_equal(buf, "hello, host");
	close(fd);
	assert_int_equal(read_at(2, 7, 100), TREAD + 1);
	assert_int_equal(get(reply + 7, 4), 4);
	assert_memory_equal(reply + 11, "host", 4);
	assert_int_equal(clunk(2), TCLUNK + 1);
	assert_int_equal(clunk(2), RLERROR);
	assert_int_equal(rerr(), EBADF);

	/* And the reverse: the host writes, the guest reads. */
	fd = open(host_path("from-host"), O_CREAT | O_WRONLY, 0644);
	assert_int_equal(write(fd, "from the host", 13), 13);
	close(fd);
	assert_int_equal(WALK(1, 3, "from-host"), TWALK + 1);
	assert_int_equal(nwqid(), 1);
	assert_int_equal(lopen(send_dev, 3, O_RDONLY), TLOPEN + 1);
	assert_int_equal(read_at(3, 0, 100), TREAD + 1);
	assert_int_equal(get(reply + 7, 4), 13);
	assert_memory_equal(reply + 11, "from the host", 13);
	assert_int_equal(clunk(3), TCLUNK + 1);
}

static void test_getattr_readdir(void **state)
{
	struct msg *m;
	bool seen = false;

	(void)state;
	assert_int_equal(WALK(1, 4, "hello.txt"), TWALK + 1);
	m = start(TGETATTR);
	put(m, 4, 4);
	put(m, 0x7ff, 8);
	assert_int_equal(send_dev(m), TGETATTR + 1);
	assert_int_equal(get(reply + 7 + 8 + 13, 4) & 0777, 0644);            /* mode */
	assert_int_equal(get(reply + 7 + 8 + 13 + 4 + 4 + 4 + 8 + 8, 8), 11); /* size */
	clunk(4);

	assert_int_equal(WALK(1, 5, NULL), TWALK + 1);
	assert_int_equal(lopen(send_dev, 5, O_RDONLY | O_DIRECTORY), TLOPEN + 1);
	m = start(TREADDIR);
	put(m, 5, 4);
	put(m, 0, 8);
	put(m, 4000, 4);
	assert_int_equal(send_dev(m), TREADDIR + 1);
	for (size_t at = 11; at < 11 + get(reply + 7, 4);) {
		size_t nlen = get(reply + at + 22, 2);

		if (nlen == 9 && memcmp(reply + at + 24, "hello.txt", 9) == 0)
			seen = true;
		at += 24 + nlen;
	}
	assert_true(seen);
	clunk(5);
}

static void test_mkdir_rename_unlink(void **state)
{
	struct stat st;
	struct msg *m;

	(void)state;
	assert_int_equal(name_op(TMKDIR, 1, "sub", 0755), TMKDIR + 1);
	assert_int_equal(stat(host_path("sub"), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(WALK(1, 6, "hello.txt"), TWALK + 1);
	assert_int_equal(WALK(1, 7, "sub"), TWALK + 1);
	m = start(TRENAMEAT);
	put(m, 1, 4);
	put_str(m, "hello.txt");
	put(m, 7, 4);
	put_str(m, "moved.txt");
	assert_int_equal(send_dev(m), TRENAMEAT + 1);
	assert_int_equal(stat(host_path("sub/moved.txt"), &st), 0);
	/* fid 6 followed the file */
	assert_int_equal(lopen(send_dev, 6, O_RDONLY), TLOPEN + 1);
	assert_int_equal(read_at(6, 0, 5), TREAD + 1);
	assert_memory_equal(reply + 11, "hello", 5);
	clunk(6);
	assert_int_equal(name_op(TUNLINKAT, 7, "moved.txt", 0), TUNLINKAT + 1);
	assert_int_equal(stat(host_path("sub/moved.txt"), &st), -1);
	clunk(7);
}

static void test_symlink_readlink(void **state)
{
	struct msg *m;
	char target[64] = "";

	(void)state;
	assert_int_equal(symlink_op(1, "abs", "/"), TSYMLINK + 1);
	assert_int_equal(readlink(host_path("abs"), target, sizeof(target)), 1);
	assert_int_equal(WALK(1, 8, "abs"), TWALK + 1);
	assert_int_equal(reply[9], 0x02); /* a symlink's qid */
	m = start(TREADLINK);
	put(m, 8, 4);
	assert_int_equal(send_dev(m), TREADLINK + 1);
	assert_int_equal(get(reply + 7, 2), 1);
	assert_int_equal(reply[9], '/');
	/* never followed: opening it fails, so does anything below it */
	assert_int_equal(lopen(send_dev, 8, O_RDONLY), RLERROR);
	assert_int_equal(rerr(), ELOOP);
	clunk(8);
}

/* The escapes: none reaches outside the share. */
static void test_escapes(void **state)
{
	uint64_t root;

	(void)state;
	assert_int_equal(WALK(1, 9, NULL), TWALK + 1);
	assert_int_equal(WALK(1, 10, "sub"), TWALK + 1);
	assert_int_equal(WALK(1, 11, ".."), TWALK + 1); /* '..' at the root: the root */
	root = qid_path(0);
	assert_int_equal(WALK(1, 12, "sub", "..", "..", ".."), TWALK + 1);
	assert_int_equal(nwqid(), 4);
	assert_int_equal(qid_path(3), root);
	clunk(11);
	clunk(12);

	/* through the guest's absolute symlink: a partial walk, no fid */
	assert_int_equal(WALK(1, 13, "abs", "etc"), TWALK + 1);
	assert_int_equal(nwqid(), 1);
	assert_int_equal(clunk(13), RLERROR);
	/* through a symlink leading out, the guest's and the host's */
	assert_int_equal(symlink_op(1, "up", "../../../.."), TSYMLINK + 1);
	assert_int_equal(WALK(1, 13, "up", "etc"), TWALK + 1);
	assert_int_equal(nwqid(), 1);
	assert_int_equal(WALK(1, 13, "hostlink", "secret"), TWALK + 1);
	assert_int_equal(nwqid(), 1);
	assert_int_equal(clunk(13), RLERROR);
	assert_int_equal(WALK(1, 13, "hostlink"), TWALK + 1);
	assert_int_equal(lopen(send_dev, 13, O_RDONLY | O_DIRECTORY), RLERROR);
	clunk(13);
	/* a name with '/', or a name that is '..', for a new file */
	assert_int_equal(WALK(1, 14, "sub/../.."), RLERROR);
	assert_int_equal(rerr(), ENOENT);
	assert_int_equal(lcreate(send_dev, 9, ".."), RLERROR);
	assert_int_equal(rerr(), EINVAL);
	assert_int_equal(lcreate(send_dev, 9, "../escape"), RLERROR);
	assert_int_equal(name_op(TMKDIR, 1, "..", 0755), RLERROR);
	assert_int_equal(symlink_op(1, "a/b", "x"), RLERROR);
	clunk(9);
	clunk(10);
}

/* A FIFO the host put in the share: opening it neither blocks the request
 * thread nor is served; nor is truncating it. */
static void test_fifo_refused(void **state)
{
	(void)state;
	assert_int_equal(mkfifo(host_path("fifo"), 0666), 0);
	assert_int_equal(WALK(1, 40, "fifo"), TWALK + 1);
	assert_int_equal(lopen(send_dev, 40, O_RDONLY), RLERROR);
	assert_int_equal(rerr(), EACCES);
	assert_int_equal(lopen(send_dev, 40, O_WRONLY), RLERROR);
	assert_int_equal(lcreate(send_dev, 1, "fifo"), RLERROR);
	assert_int_equal(truncate_to_0(send_dev, 40), RLERROR);
	clunk(40);
	unlink(host_path("fifo"));
}

static void test_read_only(void **state)
{
	struct stat st;
	struct msg *m;

	(void)state;
	assert_int_equal(version(send_ro, 8192), TVERSION + 1);
	assert_int_equal(attach(send_ro, 1), TATTACH + 1);
	assert_int_equal(walk_with(send_ro, 1, 2, (const char *const[]){"from-host", NULL}),
	                 TWALK + 1);
	assert_int_equal(lopen(send_ro, 2, O_RDWR), RLERROR);
	assert_int_equal(rerr(), EROFS);
	assert_int_equal(lopen(send_ro, 2, O_RDONLY), TLOPEN + 1);
	assert_int_equal(lcreate(send_ro, 1, "new"), RLERROR);
	assert_int_equal(rerr(), EROFS);
	m = start(TUNLINKAT);
	put(m, 1, 4);
	put_str(m, "from-host");
	put(m, 0, 4);
	assert_int_equal(send_ro(m), RLERROR);
	assert_int_equal(rerr(), EROFS);
	assert_int_equal(stat(host_path("from-host"), &st), 0);
	assert_int_equal(truncate_to_0(send_ro, 2), RLERROR);
	assert_int_equal(rerr(), EROFS);
	assert_int_equal(stat(host_path("from-host"), &st), 0);
	assert_int_equal(st.st_size, 13);
}

/* Malformed messages: Rlerror EINVAL (or the fid's error), nothing made. */
static void test_malformed(void **state)
{
	struct msg *m;
	struct stat st;
	size_t n;

	(void)state;
	/* a size larger than the buffer */
	m = start(TCLUNK);
	put(m, 1, 4);
	finish(m);
	m->b[0] = 200;
	n = p9fs_handle(rofs, m->b, m->n, reply, sizeof(reply));
	assert_int_equal(reply[4], RLERROR);
	assert_int_equal(n, 11);
	/* a string running past the end */
	m = start(TLCREATE);
	put(m, 1, 4);
	put(m, 200, 2);
	memcpy(m->b + m->n, "abc", 3);
	m->n += 3;
	assert_int_equal(send_dev(m), RLERROR);
	assert_int_equal(rerr(), EINVAL);
	/* a name with a NUL in it */
	m = start(TMKDIR);
	put(m, 1, 4);
	put(m, 3, 2);
	memcpy(m->b + m->n, "a\0b", 3);
	m->n += 3;
	put(m, 0755, 4);
	put(m, 0, 4);
	assert_int_equal(send_dev(m), RLERROR);
	assert_int_equal(stat(host_path("a"), &st), -1);
	/* an unknown fid, a missing field, an unknown type, mknod, xattrs */
	assert_int_equal(clunk(999), RLERROR);
	assert_int_equal(rerr(), EBADF);
	m = start(TREAD);
	put(m, 1, 4);
	assert_int_equal(send_dev(m), RLERROR);
	assert_int_equal(rerr(), EINVAL);
	assert_int_equal(send_dev(start(99)), RLERROR);
	m = start(TMKNOD);
	put(m, 1, 4);
	put_str(m, "dev");
	for (int i = 0; i < 4; i++)
		put(m, 0, 4);
	assert_int_equal(send_dev(m), RLERROR);
	assert_int_equal(rerr(), EPERM);
	m = start(TXATTRWALK);
	put(m, 1, 4);
	put(m, 20, 4);
	put_str(m, "user.x");
	assert_int_equal(send_dev(m), RLERROR);
	assert_int_equal(rerr(), EOPNOTSUPP);
	/* a walk of more than 16 names */
	m = start(TWALK);
	put(m, 1, 4);
	put(m, 30, 4);
	put(m, 17, 2);
	for (int i = 0; i < 17; i++)
		put_str(m, "sub");
	assert_int_equal(send_dev(m), RLERROR);
	/* the device is fine afterwards */
	assert_int_equal(vu_rd(VU_CC_STATUS, 1) & VIRTIO_STATUS_DEVICE_NEEDS_RESET, 0);
	assert_int_equal(WALK(1, 31, "sub"), TWALK + 1);
	clunk(31);
}

static void test_statfs(void **state)
{
	struct msg *m = start(TSTATFS);

	(void)state;
	put(m, 1, 4);
	assert_int_equal(send_dev(m), TSTATFS + 1);
	assert_true(get(reply + 11, 4) > 0); /* bsize */
}

/* No saved state yet: a checkpoint refuses the machine with one line. */
static void test_checkpoint_refused(void **state)
{
	char err[256] = "";

	(void)state;
	assert_int_equal(machine_state_saveable(&vu_m, err, sizeof(err)), -1);
	assert_contains(err, "pci.0.4.0.virtio-9p cannot be saved");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_checkpoint_refused),
	    cmocka_unit_test(test_mount_tag),
	    cmocka_unit_test(test_options_refused),
	    cmocka_unit_test(test_version_attach),
	    cmocka_unit_test(test_create_write_read),
	    cmocka_unit_test(test_getattr_readdir),
	    cmocka_unit_test(test_mkdir_rename_unlink),
	    cmocka_unit_test(test_symlink_readlink),
	    cmocka_unit_test(test_escapes),
	    cmocka_unit_test(test_fifo_refused),
	    cmocka_unit_test(test_read_only),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_statfs),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
