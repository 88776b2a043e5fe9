/* Unit tests for the state file container (src/lib/snapfile.h). */
#include "unit.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include "lib/snapfile.h"

#define PAGE     4096u
#define RAM_LEN  (64u << 20)
#define STREAMED (300u << 10) /* more than one writer chunk */
#define CONFIG   "-c 2 -m 64M -s 0,hostbridge -s 3,virtio-blk,disk.img"

static int memfd(void)
{
	int fd = memfd_create("snapfile", 0);

	assert_true(fd >= 0);
	return fd;
}

/* Byte i of the streamed section. */
static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 9));
}

/* A 64 MiB RAM with three touched pages (two adjacent, one at the end). */
static uint8_t *make_ram(void)
{
	uint8_t *ram =
	    mmap(NULL, RAM_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(ram != MAP_FAILED);
	ram[5 * PAGE + 1] = 0x11;
	ram[6 * PAGE + PAGE - 1] = 0x22;
	ram[RAM_LEN - 1] = 0x33;
	return ram;
}

/* The test file: "cpu" (small), "stream" (written in odd pieces), "ram". */
static void write_file(int fd, const uint8_t *ram)
{
	char err[256];
	struct snapfile_writer *w = snapfile_create(fd, "khyve 0.14", CONFIG, err, sizeof(err));
	uint8_t buf[1000];

	assert_non_null(w);
	assert_int_equal(snapfile_section_begin(w, "cpu0"), 0);
	assert_int_equal(snapfile_write(w, "regs", 4), 0);
	assert_int_equal(snapfile_section_end(w), 0);
	assert_int_equal(snapfile_section_begin(w, "stream"), 0);
	for (size_t off = 0; off < STREAMED;) {
		size_t n = (off / 997) % 3 == 0 ? 997 : sizeof(buf);

		if (n > STREAMED - off)
			n = STREAMED - off;
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(off + i);
		assert_int_equal(snapfile_write(w, buf, n), 0);
		off += n;
	}
	assert_int_equal(snapfile_section_end(w), 0);
	assert_int_equal(snapfile_section_begin(w, "empty"), 0);
	assert_int_equal(snapfile_section_end(w), 0);
	if (ram != NULL)
		assert_int_equal(snapfile_write_ram(w, "ram", ram, RAM_LEN, PAGE), 0);
	assert_int_equal(snapfile_finish(w, err, sizeof(err)), 0);
}

/* Read back what write_file() wrote, through `fd`. */
static void read_file(int fd, bool with_ram)
{
	char err[256], name[SNAPFILE_NAME_LEN];
	struct snapfile_reader *r = snapfile_open(fd, err, sizeof(err));
	uint8_t buf[4096], *ram;
	size_t len, total = 0;
	ssize_t n;

	if (r == NULL)
		fail_msg("%s", err);
	assert_string_equal(snapfile_creator(r), "khyve 0.14");
	assert_string_equal(snapfile_config(r, &len), CONFIG);
	assert_int_equal(len, strlen(CONFIG));
	assert_int_equal(snapfile_next(r, name), 1);
	assert_string_equal(name, "cpu0");
	assert_int_equal(snapfile_read(r, buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "regs", 4);
	assert_int_equal(snapfile_read(r, buf, sizeof(buf)), 0);
	assert_int_equal(snapfile_next(r, name), 1);
	assert_string_equal(name, "stream");
	while ((n = snapfile_read(r, buf, 333)) > 0) {
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pattern(total + (size_t)i))
				fail_msg("stream byte %zu differs", total + (size_t)i);
		total += (size_t)n;
	}
	assert_int_equal(n, 0);
	assert_int_equal(total, STREAMED);
	assert_int_equal(snapfile_next(r, name), 1);
	assert_string_equal(name, "empty");
	if (with_ram) {
		assert_int_equal(snapfile_next(r, name), 1);
		assert_string_equal(name, "ram");
		ram = malloc(RAM_LEN);
		assert_non_null(ram);
		memset(ram, 0xee, RAM_LEN);
		if (snapfile_read_ram(r, ram, RAM_LEN, true) != 0)
			fail_msg("%s", snapfile_reader_error(r));
		for (size_t i = 0; i < RAM_LEN; i++) {
			uint8_t want = i == 5 * PAGE + 1   ? 0x11
			               : i == 7 * PAGE - 1 ? 0x22
			               : i == RAM_LEN - 1  ? 0x33
			                                   : 0;
			if (ram[i] != want)
				fail_msg("RAM byte %zu is %#x, not %#x", i, ram[i], want);
		}
		free(ram);
	}
	if (snapfile_next(r, name) != 0)
		fail_msg("%s", snapfile_reader_error(r));
	assert_int_equal(snapfile_next(r, name), 0);
	snapfile_close(r);
}

static void test_snapfile_round_trip(void **state)
{
	uint8_t *ram = make_ram();
	char err[256];
	struct stat st;
	int fd = memfd();

	(void)state;
	write_file(fd, ram);
	munmap(ram, RAM_LEN);
	/* 3 pages of RAM data, the stream, and little else. */
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(st.st_size > (off_t)(STREAMED + 3 * PAGE));
	assert_true(st.st_size < (off_t)(STREAMED + 3 * PAGE + 2048));
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	if (snapfile_verify_all(fd, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
	read_file(fd, true);
	close(fd);
}

/* The writer and reader on the two ends of a pipe, in two processes. */
static void test_snapfile_pipe(void **state)
{
	int p[2];
	pid_t pid;
	int status;

	(void)state;
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		write_file(p[1], NULL);
		_exit(0);
	}
	close(p[1]);
	read_file(p[0], false);
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A small valid file in `buf` ("a", "ram", the trailer), or a stream
 * (its "ram" with the fast sum); its length. */
static size_t small_made(uint8_t *buf, size_t cap, bool stream)
{
	int fd = memfd();
	char err[256];
	struct snapfile_writer *w = stream
	                                ? snapfile_create_stream(fd, "v1", "cfg", err, sizeof(err))
	                                : snapfile_create(fd, "v1", "cfg", err, sizeof(err));
	uint8_t ram[2 * 512] = {0};
	ssize_t n;

	ram[600] = 9;
	assert_non_null(w);
	assert_int_equal(snapfile_section_begin(w, "a"), 0);
	assert_int_equal(snapfile_write(w, "hello", 5), 0);
	assert_int_equal(snapfile_section_end(w), 0);
	assert_int_equal(snapfile_write_ram(w, "ram", ram, sizeof(ram), 512), 0);
	assert_int_equal(snapfile_finish(w, err, sizeof(err)), 0);
	n = pread(fd, buf, cap, 0);
	assert_true(n > 0 && (size_t)n < cap);
	close(fd);
	return (size_t)n;
}

static size_t small_file(uint8_t *buf, size_t cap)
{
	return small_made(buf, cap, false);
}

static int verify_bytes(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
	int fd = memfd(), rc;

	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	rc = snapfile_verify_all(fd, err, errlen);
	close(fd);
	return rc;
}

static void test_snapfile_truncated(void **state)
{
	uint8_t buf[4096];
	size_t len = small_file(buf, sizeof(buf));
	char err[256];

	(void)state;
	assert_int_equal(verify_bytes(buf, len, err, sizeof(err)), 0);
	for (size_t cut = 0; cut < len; cut++)
		if (verify_bytes(buf, cut, err, sizeof(err)) != -1)
			fail_msg("cut at %zu of %zu accepted", cut, len);
	/* A byte after the trailer too. */
	buf[len] = 0;
	assert_int_equal(verify_bytes(buf, len + 1, err, sizeof(err)), -1);
	assert_contains(err, "after the trailer");
}

static void test_snapfile_bit_flips(void **state)
{
	uint8_t buf[4096];
	size_t len = small_file(buf, sizeof(buf));
	char err[256];

	(void)state;
	for (size_t i = 0; i < len; i++)
		for (unsigned bit = 0; bit < 8; bit++) {
			buf[i] ^= (uint8_t)(1u << bit);
			if (verify_bytes(buf, len, err, sizeof(err)) != -1)
				fail_msg("bit %u of byte %zu flipped, accepted", bit, i);
			assert_null(strchr(err, '\n'));
			buf[i] ^= (uint8_t)(1u << bit);
		}
}

static void expect_open_refused(const uint8_t *buf, size_t len, const char *why)
{
	int fd = memfd();
	char err[256];

	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_null(snapfile_open(fd, err, sizeof(err)));
	assert_contains(err, why);
	close(fd);
}

static void test_snapfile_bad_header(void **state)
{
	uint8_t buf[4096], bad[4096];
	size_t len = small_file(buf, sizeof(buf));

	(void)state;
	memcpy(bad, buf, len);
	bad[0] = 'X';
	expect_open_refused(bad, len, "magic");
	memcpy(bad, buf, len);
	bad[8] = 2;
	expect_open_refused(bad, len, "version 2");
	memcpy(bad, buf, len);
	bad[56] ^= 1;
	expect_open_refused(bad, len, "configuration does not match");
	memcpy(bad, buf, len);
	bad[88] = 'C';
	expect_open_refused(bad, len, "configuration does not match");
	memcpy(bad, buf, len);
	bad[12] = 2;
	expect_open_refused(bad, len, "flags");
	memcpy(bad, buf, len);
	bad[12] = SNAPFILE_FLAG_STREAM;
	expect_open_refused(bad, len, "migration stream");
	memcpy(bad, buf, len);
	bad[48] = 0xff, bad[49] = 0xff, bad[50] = 0xff, bad[51] = 0xff;
	expect_open_refused(bad, len, "more than");
	memset(bad + 16, 'v', 32);
	expect_open_refused(bad, len, "not terminated");
}

/* Sections written by hand: over-long names, chunk and RAM lengths. */
static void test_snapfile_hostile_lengths(void **state)
{
	uint8_t buf[4096], bad[4096];
	size_t len = small_file(buf, sizeof(buf)), sec = SNAPFILE_HEADER_LEN + 3;
	char err[256];

	(void)state;
	/* Name with no NUL in its 32 bytes. */
	memcpy(bad, buf, len);
	memset(bad + sec, 'n', SNAPFILE_NAME_LEN);
	assert_int_equal(verify_bytes(bad, len, err, sizeof(err)), -1);
	assert_contains(err, "name");
	/* A chunk of 16 MiB + 1. */
	memcpy(bad, buf, len);
	bad[sec + 32] = 1, bad[sec + 33] = 0, bad[sec + 34] = 0, bad[sec + 35] = 1;
	assert_int_equal(verify_bytes(bad, len, err, sizeof(err)), -1);
	assert_contains(err, "chunk of");
	/* The writer refuses bad names. */
	{
		int fd = memfd();
		struct snapfile_writer *w = snapfile_create(fd, "v", "", err, sizeof(err));

		assert_int_equal(snapfile_section_begin(w, "0123456789abcdef0123456789abcdef"), -1);
		assert_contains(snapfile_writer_error(w), "name");
		snapfile_abort(w);
		w = snapfile_create(fd, "v", "", err, sizeof(err));
		assert_int_equal(snapfile_section_begin(w, "end"), -1);
		assert_int_equal(snapfile_finish(w, err, sizeof(err)), -1);
		assert_null(
		    snapfile_create(fd, "0123456789abcdef0123456789abcdef", "", err, sizeof(err)));
		close(fd);
	}
}

/* A RAM section read into a buffer of another size, or with an extent
 * outside it, is refused. */
static void test_snapfile_ram_bounds(void **state)
{
	uint8_t buf[4096], ram[1024];
	size_t len = small_file(buf, sizeof(buf));
	char err[256], name[SNAPFILE_NAME_LEN];
	struct snapfile_reader *r;
	int fd = memfd();

	(void)state;
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	r = snapfile_open(fd, err, sizeof(err));
	assert_non_null(r);
	assert_int_equal(snapfile_next(r, name), 1);
	assert_int_equal(snapfile_next(r, name), 1);
	assert_string_equal(name, "ram");
	assert_int_equal(snapfile_read_ram(r, ram, 512, true), -1);
	assert_contains(snapfile_reader_error(r), "holds 1024 bytes");
	snapfile_close(r);
	close(fd);
}

/* A hand-made RAM section over a 1 KiB region in 512-byte pages: each
 * extent (offset, pages) is refused when outside it or out of order. */
static void expect_ram_refused(const uint64_t (*ext)[2], size_t n)
{
	uint8_t hdr[16] = {0}, page[512] = {0}, ram[1024];
	char err[256], name[SNAPFILE_NAME_LEN];
	int fd = memfd();
	struct snapfile_writer *w = snapfile_create(fd, "v", "", err, sizeof(err));
	struct snapfile_reader *r;

	hdr[1] = 4; /* 1024 bytes */
	hdr[9] = 2; /* 512-byte pages */
	assert_int_equal(snapfile_section_begin(w, "ram"), 0);
	assert_int_equal(snapfile_write(w, hdr, sizeof(hdr)), 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(snapfile_write(w, ext[i], 16), 0);
		for (uint64_t p = 0; p < ext[i][1] && p < 4; p++)
			assert_int_equal(snapfile_write(w, page, sizeof(page)), 0);
	}
	memset(hdr, 0, sizeof(hdr));
	assert_int_equal(snapfile_write(w, hdr, sizeof(hdr)), 0);
	assert_int_equal(snapfile_section_end(w), 0);
	assert_int_equal(snapfile_finish(w, err, sizeof(err)), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(snapfile_verify_all(fd, err, sizeof(err)), 0);
	r = snapfile_open(fd, err, sizeof(err));
	assert_int_equal(snapfile_next(r, name), 1);
	assert_int_equal(snapfile_read_ram(r, ram, sizeof(ram), true), -1);
	assert_contains(snapfile_reader_error(r), "outside");
	snapfile_close(r);
	close(fd);
}

static void test_snapfile_ram_extents(void **state)
{
	static const uint64_t past_end[][2] = {{1024, 1}};
	static const uint64_t too_long[][2] = {{512, 2}};
	static const uint64_t overflow[][2] = {{512, 1ull << 63}};
	static const uint64_t unaligned[][2] = {{100, 1}};
	static const uint64_t backwards[][2] = {{512, 1}, {0, 1}};

	(void)state;
	expect_ram_refused(past_end, 1);
	expect_ram_refused(too_long, 1);
	expect_ram_refused(overflow, 1);
	expect_ram_refused(unaligned, 1);
	expect_ram_refused(backwards, 2);
}

/* A migration round: the pages a bitmap names, zero ones included; the
 * reader overwrites those and leaves the others as they were. */
static void test_snapfile_ram_pages(void **state)
{
	enum { NPAGES = 130 };
	static uint8_t ram[NPAGES * 512] __attribute__((aligned(8)));
	static uint8_t back[NPAGES * 512] __attribute__((aligned(8)));
	uint64_t bitmap[3] = {0};
	char err[256], name[SNAPFILE_NAME_LEN];
	int fd = memfd();
	struct snapfile_writer *w;
	struct snapfile_reader *r;

	(void)state;
	for (size_t i = 0; i < sizeof(ram); i++)
		ram[i] = (uint8_t)(i / 512 + 1);
	memset(ram + 3 * 512, 0, 512); /* a marked zero page must go too */
	/* pages 0, 3-5, 64 (second word), 129 (the last) */
	bitmap[0] = 1u | 1u << 3 | 1u << 4 | 1u << 5;
	bitmap[1] = 1u;
	bitmap[2] = 1u << 1;
	w = snapfile_create(fd, "khyve 0.14", CONFIG, err, sizeof(err));
	assert_non_null(w);
	assert_int_equal(snapfile_write_ram_pages(w, "ram.pre.0", ram, sizeof(ram), 512, bitmap),
	                 0);
	assert_true(snapfile_bytes_written(w) > 5 * 512);
	assert_int_equal(snapfile_write_ram_pages(w, "bad", ram, 100, 512, bitmap), -1);
	snapfile_abort(w);

	w = snapfile_create(fd = (close(fd), memfd()), "khyve 0.14", CONFIG, err, sizeof(err));
	assert_int_equal(snapfile_write_ram_pages(w, "ram.pre.0", ram, sizeof(ram), 512, bitmap),
	                 0);
	assert_int_equal(snapfile_finish(w, err, sizeof(err)), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	memset(back, 0xee, sizeof(back));
	r = snapfile_open(fd, err, sizeof(err));
	assert_non_null(r);
	assert_int_equal(snapfile_next(r, name), 1);
	assert_string_equal(name, "ram.pre.0");
	assert_int_equal(snapfile_read_ram(r, back, sizeof(back), false), 0);
	for (size_t p = 0; p < NPAGES; p++) {
		bool marked = (bitmap[p / 64] >> (p % 64)) & 1;

		if (marked)
			assert_memory_equal(back + p * 512, ram + p * 512, 512);
		else
			assert_int_equal(back[p * 512 + 7], 0xee);
	}
	assert_int_equal(snapfile_next(r, name), 0);
	snapfile_close(r);
	close(fd);
}

/* One write larger than a chunk (16 MiB) goes out as several; misuse of
 * the writer is an error, not a crash. */
static void test_snapfile_big_write(void **state)
{
	size_t big = SNAPFILE_MAX_CHUNK + 4096 + 3;
	uint8_t *buf = malloc(big), *back = malloc(big);
	char err[256], name[SNAPFILE_NAME_LEN];
	int fd = memfd();
	struct snapfile_writer *w;
	struct snapfile_reader *r;

	(void)state;
	assert_non_null(buf);
	assert_non_null(back);
	for (size_t i = 0; i < big; i++)
		buf[i] = pattern(i);
	w = snapfile_create(fd, "v", "", err, sizeof(err));
	assert_int_equal(snapfile_section_begin(w, "big"), 0);
	assert_int_equal(snapfile_write(w, buf, 5), 0);
	assert_int_equal(snapfile_write(w, buf + 5, big - 5), 0);
	assert_int_equal(snapfile_section_end(w), 0);
	assert_int_equal(snapfile_finish(w, err, sizeof(err)), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(snapfile_verify_all(fd, err, sizeof(err)), 0);
	r = snapfile_open(fd, err, sizeof(err));
	assert_int_equal(snapfile_next(r, name), 1);
	assert_int_equal(snapfile_read(r, back, big), (ssize_t)big);
	assert_memory_equal(back, buf, big);
	assert_int_equal(snapfile_next(r, name), 0);
	snapfile_close(r);
	free(buf);
	free(back);

	w = snapfile_create(fd, "v", "", err, sizeof(err));
	assert_int_equal(snapfile_write(w, "x", 1), -1);
	assert_contains(snapfile_writer_error(w), "outside a section");
	snapfile_abort(w);
	w = snapfile_create(fd, "v", "", err, sizeof(err));
	assert_int_equal(snapfile_section_begin(w, "open"), 0);
	assert_int_equal(snapfile_section_begin(w, "nested"), -1);
	assert_int_equal(snapfile_finish(w, err, sizeof(err)), -1);
	assert_contains(err, "inside another");
	close(fd);
}

/* Read a stream through snapfile_open_stream(), each section in pieces of
 * `piece` bytes (odd ones reach the fast sum's partial words); 0 when
 * every section and the trailer matched. */
static int read_stream_bytes(const uint8_t *buf, size_t len, size_t piece, char *err, size_t errlen)
{
	char name[SNAPFILE_NAME_LEN];
	struct snapfile_reader *r;
	uint8_t data[4096];
	int fd = memfd(), rc;

	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	r = snapfile_open_stream(fd, err, errlen);
	if (r == NULL) {
		close(fd);
		return -1;
	}
	while ((rc = snapfile_next(r, name)) == 1) {
		ssize_t n;

		while ((n = snapfile_read(r, data, piece)) > 0)
			;
		if (n < 0) {
			rc = -1;
			break;
		}
	}
	if (rc < 0)
		snprintf(err, errlen, "%s", snapfile_reader_error(r));
	snapfile_close(r);
	close(fd);
	return rc;
}

/* A stream: its RAM sections have the fast sum, its others SHA-256; it
 * reads back through snapfile_open_stream() in any piece size, not
 * through snapfile_open() (a state file is always SHA-256), and every
 * flipped bit and every cut is refused. */
static void test_snapfile_stream(void **state)
{
	uint8_t buf[4096], file[4096];
	size_t len = small_made(buf, sizeof(buf), true), flen = small_file(file, sizeof(file));
	char err[256];

	(void)state;
	/* One u32 kind a section (a, ram, end) and nothing else differs. */
	assert_int_equal(len, flen + 3 * 4);
	assert_int_equal(buf[12], SNAPFILE_FLAG_STREAM);
	for (size_t piece = 1; piece <= 17; piece += 4)
		if (read_stream_bytes(buf, len, piece, err, sizeof(err)) != 0)
			fail_msg("pieces of %zu: %s", piece, err);
	expect_open_refused(buf, len, "migration stream");
	for (size_t i = 0; i < len; i++)
		for (unsigned bit = 0; bit < 8; bit++) {
			buf[i] ^= (uint8_t)(1u << bit);
			if (read_stream_bytes(buf, len, 4096, err, sizeof(err)) != -1)
				fail_msg("bit %u of byte %zu flipped, accepted", bit, i);
			assert_null(strchr(err, '\n'));
			buf[i] ^= (uint8_t)(1u << bit);
		}
	for (size_t cut = 0; cut < len; cut++)
		if (read_stream_bytes(buf, cut, 4096, err, sizeof(err)) != -1)
			fail_msg("cut at %zu of %zu accepted", cut, len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_snapfile_round_trip),
	    cmocka_unit_test(test_snapfile_pipe),
	    cmocka_unit_test(test_snapfile_truncated),
	    cmocka_unit_test(test_snapfile_bit_flips),
	    cmocka_unit_test(test_snapfile_bad_header),
	    cmocka_unit_test(test_snapfile_hostile_lengths),
	    cmocka_unit_test(test_snapfile_ram_bounds),
	    cmocka_unit_test(test_snapfile_ram_extents),
	    cmocka_unit_test(test_snapfile_big_write),
	    cmocka_unit_test(test_snapfile_ram_pages),
	    cmocka_unit_test(test_snapfile_stream),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
