/*
 * libFuzzer target for virtio-9p's 9P2000.L server (src/backend/p9fs.c),
 * the part of the device that parses guest messages: each input is a
 * sequence of messages handed to p9fs_handle() on a share in a fresh
 * temporary folder, with a sentinel beside it.  Besides the sanitizers,
 * an oracle checks after every input that nothing outside the share was
 * touched (the folder beside it holds the one file it had, unchanged, and
 * nothing new appeared next to the share) and that no reply ever carried
 * the sentinel's bytes: an escape from the share is a crash.  The
 * sentinel is new random bytes for each input, so the fuzzer cannot learn
 * it (from the comparison) and echo it back in a message of its own.
 *
 * Input: ops of u8 flags, u16 length (n % 4096), that many message bytes;
 * unless flags bit 0 is set, the message's size field is made its length
 * (so mutations hit the fields, not the framing); bit 1 makes the reply
 * room small (n % 64 bytes, from the next byte).  The share holds, at the
 * start of each input: data (a file), sub/inner, abs -> /, up ->
 * ../outside, fifo (a FIFO); each input starts with no fids (p9fs_reset()).
 * Seeds: tests/fuzz/gen-corpus ("virtio_9p").
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "backend/p9fs.h"

#define SENTINEL_LEN 16
#define MSG_MAX      4096

static char top[256], share_dir[300], outside_dir[300];
static struct p9fs *fs;
static uint8_t reply[P9FS_MAX_MSIZE];
static uint8_t sentinel[SENTINEL_LEN];

/* Remove everything below the directory `fd` (closed). */
static void clear_dir(int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;

	if (d == NULL)
		abort();
	while ((e = readdir(d)) != NULL) {
		int sub;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			continue;
		/* A directory the input made unreadable: readable again (as
		 * root this changes nothing; a failure shows at the open). */
		if (fchmodat(dirfd(d), e->d_name, 0700, 0) < 0 && errno != EPERM)
			abort();
		sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
		if (sub < 0)
			abort();
		clear_dir(sub);
		if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) < 0)
			abort();
		rewinddir(d);
	}
	closedir(d);
}

static void write_bytes(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);

	if (fd < 0 || write(fd, data, len) != (ssize_t)len)
		abort();
	close(fd);
}

static void write_file(const char *path, const char *text)
{
	write_bytes(path, text, strlen(text));
}

/* A new sentinel, unknown to the input about to run. */
static void new_sentinel(void)
{
	char p[400];

	if (getrandom(sentinel, sizeof(sentinel), 0) != (ssize_t)sizeof(sentinel))
		abort();
	snprintf(p, sizeof(p), "%s/secret", outside_dir);
	write_bytes(p, sentinel, sizeof(sentinel));
}

static void fresh_share(void)
{
	char p[400];
	int fd = open(share_dir, O_RDONLY | O_DIRECTORY);

	if (fd < 0)
		abort();
	if (chmod(share_dir, 0755) < 0)
		abort();
	clear_dir(fd);
	snprintf(p, sizeof(p), "%s/data", share_dir);
	write_file(p, "some data in the share");
	snprintf(p, sizeof(p), "%s/sub", share_dir);
	if (mkdir(p, 0755) < 0)
		abort();
	snprintf(p, sizeof(p), "%s/sub/inner", share_dir);
	write_file(p, "inner");
	snprintf(p, sizeof(p), "%s/abs", share_dir);
	if (symlink("/", p) < 0)
		abort();
	snprintf(p, sizeof(p), "%s/up", share_dir);
	if (symlink("../outside", p) < 0)
		abort();
	snprintf(p, sizeof(p), "%s/fifo", share_dir); /* opening it must not block */
	if (mkfifo(p, 0666) < 0)
		abort();
}

/* At exit: the temporary folder goes (a crash leaves it for a look). */
static void remove_top(void)
{
	int fd = open(top, O_RDONLY | O_DIRECTORY);

	if (fd >= 0) {
		clear_dir(fd);
		rmdir(top);
	}
}

static void setup(void)
{
	const char *base = getenv("TMPDIR");
	char err[256];

	snprintf(top, sizeof(top), "%s/khyve-fuzz-9p.XXXXXX", base && *base ? base : "/tmp");
	if (mkdtemp(top) == NULL)
		abort();
	snprintf(share_dir, sizeof(share_dir), "%s/share", top);
	snprintf(outside_dir, sizeof(outside_dir), "%s/outside", top);
	if (mkdir(share_dir, 0755) < 0 || mkdir(outside_dir, 0755) < 0)
		abort();
	atexit(remove_top);
	new_sentinel();
	fs = p9fs_open(share_dir, false, err, sizeof(err));
	if (fs == NULL) {
		fprintf(stderr, "p9fs_open: %s\n", err);
		abort();
	}
}

static unsigned entries(const char *dir)
{
	DIR *d = opendir(dir);
	unsigned n = 0;
	struct dirent *e;

	if (d == NULL)
		abort();
	while ((e = readdir(d)) != NULL)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

/* Nothing outside the share changed. */
static void check_outside(void)
{
	char p[400];
	uint8_t buf[SENTINEL_LEN + 1];
	int fd;

	snprintf(p, sizeof(p), "%s/secret", outside_dir);
	fd = open(p, O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf)) != SENTINEL_LEN ||
	    memcmp(buf, sentinel, SENTINEL_LEN) != 0 || entries(outside_dir) != 1 ||
	    entries(top) != 2) {
		fprintf(stderr, "fuzz_virtio_9p: something outside the share changed\n");
		abort();
	}
	close(fd);
}

FUZZ_TARGET(setup)

static void fuzz_one(struct fz *z)
{
	static uint8_t msg[MSG_MAX];

	fresh_share();
	new_sentinel();
	p9fs_reset(fs);
	FUZZ_EACH_OP (z) {
		uint8_t flags = fz_u8(z);
		size_t len = fz_u16(z) % MSG_MAX, cap = sizeof(reply), n;

		fz_bytes(z, msg, len);
		if (!(flags & 1) && len >= 4) {
			msg[0] = (uint8_t)len;
			msg[1] = (uint8_t)(len >> 8);
			msg[2] = msg[3] = 0;
		}
		if (flags & 2)
			cap = fz_u8(z) % 64;
		n = p9fs_handle(fs, msg, len, reply, cap);
		if (n > cap || (n > 0 && n < P9FS_HDR))
			abort();
		if (memmem(reply, n, sentinel, SENTINEL_LEN) != NULL) {
			fprintf(stderr, "fuzz_virtio_9p: a reply carried the sentinel\n");
			abort();
		}
	}
	check_outside();
}
