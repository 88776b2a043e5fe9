/*
 * The block back end (src/backend/blockif.h) on a temporary image, with
 * both engines: writes, reads and flushes come back with the right results
 * and data, a flush with nothing in flight completes without a trip through
 * the ring, and a flush queued beside a write still completes.  Its
 * counters (blockif_register_counters) count each kind, bytes, errors and
 * latencies, and keep what a destroyed context counted.  A read-only image
 * changes its medium in place (blockif_replace_fd: an empty one takes an
 * fd, the context reads it, -1 empties it again; a directory and a
 * read-write image are refused, and the fd given is closed either way).
 */
#include "unit.h"

#include <liburing.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/blockif.h"
#include "unit_counters.h"

#define IMG_BYTES (1u << 20)
#define BLOCK     4096u

struct fixture {
	char *dir;
	struct blockif *bi;
	struct blockif_ctx *ctx;
};

static int open_engine(void **state, const char *engine)
{
	static uint8_t zeros[IMG_BYTES];
	struct fixture *fx = calloc(1, sizeof(*fx));
	struct blockif_opts o = {0};
	char err[256] = "";
	char *path;

	if (fx == NULL || setenv("KHYVE_BLOCK_ENGINE", engine, 1) < 0)
		return -1;
	fx->dir = unit_mkdtemp();
	path = fx->dir ? unit_write_file(fx->dir, "disk.img", zeros, sizeof(zeros)) : NULL;
	fx->bi = path ? blockif_open(path, &o, err, sizeof(err)) : NULL;
	fx->ctx = fx->bi ? blockif_ctx_create(fx->bi, 8, err, sizeof(err)) : NULL;
	free(path);
	*state = fx;
	return fx->ctx ? 0 : -1;
}

static int setup_uring(void **state)
{
	return open_engine(state, "io_uring");
}

static int setup_threads(void **state)
{
	return open_engine(state, "threads");
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	blockif_ctx_destroy(fx->ctx);
	blockif_close(fx->bi);
	unit_rmtree(fx->dir);
	free(fx->dir);
	free(fx);
	unsetenv("KHYVE_BLOCK_ENGINE");
	return 0;
}

/* Submit what is queued and wait until `n` requests have finished. */
static void finish(struct blockif_ctx *ctx, unsigned n)
{
	struct blockif_req *done[8];
	unsigned got = 0;
	uint32_t fired = 0;

	while (got < n)
		got += blockif_wait(ctx, done, 8, &fired);
	assert_int_equal(got, n);
}

static void test_write_flush_read(void **state)
{
	struct fixture *fx = *state;
	static uint8_t out[BLOCK], in[BLOCK];
	struct iovec wiov = {out, BLOCK}, riov = {in, BLOCK};
	struct blockif_req w = {
	    .op = BLOCKIF_WRITE, .offset = 3 * BLOCK, .iov = &wiov, .iovcnt = 1};
	struct blockif_req f = {.op = BLOCKIF_FLUSH};
	struct blockif_req r = {.op = BLOCKIF_READ, .offset = 3 * BLOCK, .iov = &riov, .iovcnt = 1};

	for (unsigned i = 0; i < BLOCK; i++)
		out[i] = (uint8_t)(i * 7 + 1);
	/* A flush beside an unfinished write goes through the engine. */
	blockif_queue(fx->ctx, &w);
	blockif_queue(fx->ctx, &f);
	finish(fx->ctx, 2);
	assert_int_equal(w.result, 0);
	assert_int_equal(f.result, 0);
	/* Alone, it completes at once (io_uring: no ring trip). */
	f.result = -1;
	blockif_queue(fx->ctx, &f);
	finish(fx->ctx, 1);
	assert_int_equal(f.result, 0);
	blockif_queue(fx->ctx, &r);
	finish(fx->ctx, 1);
	assert_int_equal(r.result, 0);
	assert_memory_equal(in, out, BLOCK);
}

static void test_read_past_end(void **state)
{
	struct fixture *fx = *state;
	static uint8_t in[BLOCK];
	struct iovec iov = {in, BLOCK};
	struct blockif_req r = {.op = BLOCKIF_READ, .offset = IMG_BYTES, .iov = &iov, .iovcnt = 1};

	blockif_queue(fx->ctx, &r);
	finish(fx->ctx, 1);
	assert_int_equal(r.result, -EIO);
}

/* Read one block at `off` through `ctx`; the request's result. */
static int read_block(struct blockif_ctx *ctx, uint64_t off, uint8_t *buf)
{
	struct iovec iov = {buf, BLOCK};
	struct blockif_req r = {.op = BLOCKIF_READ, .offset = off, .iov = &iov, .iovcnt = 1};

	blockif_queue(ctx, &r);
	finish(ctx, 1);
	return r.result;
}

static void test_replace_fd(void **state)
{
	struct fixture *fx = *state;
	struct blockif_opts o = {.ro = true};
	static uint8_t img[3 * BLOCK], in[BLOCK];
	struct blockif *bi = blockif_open_empty(&o);
	struct blockif_ctx *ctx;
	char err[256] = "", *path;
	int fd;

	assert_non_null(bi);
	ctx = blockif_ctx_create(bi, 2, err, sizeof(err));
	assert_non_null(ctx);
	assert_int_equal(blockif_size(bi), 0);
	assert_true(blockif_is_ro(bi));
	memset(img + 2 * BLOCK, 0x5a, BLOCK);
	path = unit_write_file(fx->dir, "medium.iso", img, sizeof(img));
	assert_non_null(path);
	fd = open(path, O_RDONLY);
	assert_int_equal(blockif_check_medium(fd, NULL, err, sizeof(err)), 0);
	assert_int_equal(blockif_replace_fd(bi, fd, err, sizeof(err)), 0);
	assert_int_equal(blockif_size(bi), sizeof(img));
	assert_int_equal(read_block(ctx, 2 * BLOCK, in), 0);
	assert_memory_equal(in, img + 2 * BLOCK, BLOCK);
	/* A directory is refused, closed, and the medium stays. */
	fd = open(fx->dir, O_RDONLY | O_DIRECTORY);
	assert_int_equal(blockif_replace_fd(bi, fd, err, sizeof(err)), -1);
	assert_string_equal(err, "not a regular file or block device");
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_int_equal(blockif_size(bi), sizeof(img));
	/* Empty again: no size, reads fail. */
	assert_int_equal(blockif_replace_fd(bi, -1, err, sizeof(err)), 0);
	assert_int_equal(blockif_size(bi), 0);
	assert_int_equal(read_block(ctx, 0, in), -EBADF);
	blockif_ctx_destroy(ctx);
	blockif_close(bi);
	/* A writable image keeps its fd. */
	fd = open(path, O_RDONLY);
	assert_int_equal(blockif_replace_fd(fx->bi, fd, err, sizeof(err)), -1);
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	free(path);
}

struct find_arg {
	const void *arg;
	struct counter_source *found;
};

static void match_arg(struct counter_source *s, void *ctx)
{
	struct find_arg *f = ctx;

	if (s->arg == f->arg)
		f->found = s;
}

/* What the registry shows for `bi`. */
static void read_disk(struct blockif *bi, struct unit_counters *c)
{
	struct find_arg f = {bi, NULL};

	counters_foreach(match_arg, &f);
	assert_non_null(f.found);
	assert_int_equal(f.found->kind, COUNTER_DISK);
	assert_memory_equal(f.found->name, "disk", 4);
	unit_counters_init(c);
	f.found->read(f.found->arg, &c->out);
	assert_false(c->duplicate);
}

static void test_counters(void **state)
{
	struct fixture *fx = *state;
	static uint8_t buf[2 * BLOCK];
	struct iovec iov = {buf, sizeof(buf)}, iov2 = {buf, BLOCK};
	struct blockif_req w = {.op = BLOCKIF_WRITE, .offset = 0, .iov = &iov, .iovcnt = 1};
	struct blockif_req r = {.op = BLOCKIF_READ, .offset = BLOCK, .iov = &iov2, .iovcnt = 1};
	struct blockif_req f = {.op = BLOCKIF_FLUSH};
	struct blockif_req d = {.op = BLOCKIF_DISCARD, .offset = 0, .len = BLOCK};
	struct blockif_req z = {.op = BLOCKIF_WRITE_ZEROES, .offset = BLOCK, .len = BLOCK};
	struct blockif_req bad = {
	    .op = BLOCKIF_READ, .offset = IMG_BYTES, .iov = &iov2, .iovcnt = 1};
	const struct unit_hist *lat;
	struct unit_counters c;
	char err[256];

	assert_int_equal(blockif_register_counters(fx->bi), 0);
	read_disk(fx->bi, &c);
	assert_int_equal(unit_counter(&c, "reads_total"), 0);
	assert_int_equal(unit_counter(&c, "errors_total"), 0);
	blockif_queue(fx->ctx, &w);
	finish(fx->ctx, 1);
	blockif_queue(fx->ctx, &r);
	blockif_queue(fx->ctx, &f);
	finish(fx->ctx, 2);
	blockif_queue(fx->ctx, &d);
	blockif_queue(fx->ctx, &z);
	blockif_queue(fx->ctx, &bad);
	finish(fx->ctx, 3);
	assert_int_equal(bad.result, -EIO);
	read_disk(fx->bi, &c);
	assert_int_equal(unit_counter(&c, "reads_total"), 2);
	assert_int_equal(unit_counter(&c, "read_bytes_total"), BLOCK); /* not the failed one */
	assert_int_equal(unit_counter(&c, "writes_total"), 2);         /* write-zeroes is one */
	assert_int_equal(unit_counter(&c, "write_bytes_total"), 3 * BLOCK);
	assert_int_equal(unit_counter(&c, "flushes_total"), 1);
	assert_int_equal(unit_counter(&c, "discards_total"), 1);
	assert_int_equal(unit_counter(&c, "errors_total"), 1);
	lat = unit_counter_hist(&c, "latency_us");
	assert_non_null(lat);
	assert_int_equal(lat->n, LAT_HIST_BUCKETS);
	assert_int_equal(lat->count[LAT_HIST_BUCKETS - 1], 6);
	assert_int_equal(lat->le[LAT_HIST_BUCKETS - 1], UINT64_MAX);
	/* A context that goes leaves its counts behind; a new one adds. */
	blockif_ctx_destroy(fx->ctx);
	fx->ctx = blockif_ctx_create(fx->bi, 8, err, sizeof(err));
	assert_non_null(fx->ctx);
	read_disk(fx->bi, &c);
	assert_int_equal(unit_counter(&c, "reads_total"), 2);
	iov2 = (struct iovec){buf, BLOCK}; /* the back end moved them */
	r.iov = &iov2;
	r.iovcnt = 1;
	blockif_queue(fx->ctx, &r);
	finish(fx->ctx, 1);
	read_disk(fx->bi, &c);
	assert_int_equal(unit_counter(&c, "reads_total"), 3);
	assert_int_equal(unit_counter(&c, "read_bytes_total"), 2 * BLOCK);
	assert_int_equal(unit_counter_hist(&c, "latency_us")->count[LAT_HIST_BUCKETS - 1], 7);
	/* The registry keeps pointing at the image: closing it keeps it. */
}

/* The ring is made disabled, restricted to blockif's opcodes and enabled
 * (uring_restrict): that must not push a kernel with io_uring onto the
 * thread engine.  Skipped where io_uring is off (sysctl
 * kernel.io_uring_disabled, seccomp in a container). */
static void test_uring_engine_restricted(void **state)
{
	struct fixture *fx = *state;
	struct io_uring probe;

	if (io_uring_queue_init(1, &probe, 0) < 0)
		skip();
	io_uring_queue_exit(&probe);
	assert_string_equal(blockif_ctx_engine(fx->ctx), "io_uring");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_write_flush_read, setup_uring, teardown),
	    cmocka_unit_test_setup_teardown(test_uring_engine_restricted, setup_uring, teardown),
	    cmocka_unit_test_setup_teardown(test_read_past_end, setup_uring, teardown),
	    cmocka_unit_test_setup_teardown(test_write_flush_read, setup_threads, teardown),
	    cmocka_unit_test_setup_teardown(test_read_past_end, setup_threads, teardown),
	    cmocka_unit_test_setup_teardown(test_counters, setup_uring, teardown),
	    cmocka_unit_test_setup_teardown(test_counters, setup_threads, teardown),
	    cmocka_unit_test_setup_teardown(test_replace_fd, setup_uring, teardown),
	    cmocka_unit_test_setup_teardown(test_replace_fd, setup_threads, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
