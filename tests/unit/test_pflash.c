/* Unit tests for the CFI flash variable store (src/dev/pflash.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/machine.h"
#include "dev/pflash.h"
#include "unit.h"

#define BLOCKS 4
#define SIZE   (BLOCKS * PFLASH_BLOCK_SIZE)

struct fixture {
	char *dir;
	char *path;
	struct pflash *pf;
};

static uint64_t rd(struct pflash *pf, uint64_t off, unsigned size)
{
	uint64_t v = 0;

	pflash_access(pf, off, size, false, &v);
	return v;
}

static void wr(struct pflash *pf, uint64_t off, unsigned size, uint64_t v)
{
	pflash_access(pf, off, size, true, &v);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	static uint8_t image[SIZE];
	char err[256];

	for (size_t i = 0; i < sizeof(image); i++)
		image[i] = (uint8_t)(i * 7 + 1);
	f->dir = unit_mkdtemp();
	f->path = unit_write_file(f->dir, "vars.fd", image, sizeof(image));
	f->pf = pflash_open(f->path, err, sizeof(err));
	if (f->pf == NULL)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	pflash_close(f->pf);
	unit_rmtree(f->dir);
	free(f->path);
	free(f->dir);
	free(f);
	return 0;
}

/* OVMF's QemuFlashDetected(): clear status must leave the array readable,
 * and read status must then give 0 (not the written command, as RAM would,
 * nor the old contents, as ROM would). */
static void test_detection_as_ovmf_does(void **state)
{
	struct pflash *pf = ((struct fixture *)*state)->pf;
	uint8_t orig = (uint8_t)rd(pf, 0x10, 1);

	assert_int_equal(pflash_size(pf), SIZE);
	wr(pf, 0x10, 1, 0x50);
	assert_int_equal(rd(pf, 0x10, 1), orig);
	wr(pf, 0x10, 1, 0x70);
	assert_int_equal(rd(pf, 0x10, 1), 0x00);
	wr(pf, 0x10, 1, 0xff);
	assert_int_equal(rd(pf, 0x10, 1), orig);
}

static void test_program_and_status(void **state)
{
	struct pflash *pf = ((struct fixture *)*state)->pf;

	/* QemuFlashWrite(): 0x10 then the byte, per byte; 0xFF at the end. */
	for (unsigned i = 0; i < 4; i++) {
		wr(pf, 0x100 + i, 1, 0x10);
		wr(pf, 0x100 + i, 1, 0xa0 + i);
		assert_int_equal(rd(pf, 0x100, 1) & 0x80, 0x80); /* status: ready */
	}
	wr(pf, 0x103, 1, 0xff);
	assert_int_equal(rd(pf, 0x100, 4), 0xa3a2a1a0);
	/* A wide read in array mode is little-endian; past the end: ones. */
	assert_int_equal(rd(pf, SIZE - 1, 2) >> 8, 0xff);
	assert_int_equal(rd(pf, SIZE + 8, 8), ~0ull);
}

static void test_erase(void **state)
{
	struct pflash *pf = ((struct fixture *)*state)->pf;
	uint64_t next = rd(pf, 2 * PFLASH_BLOCK_SIZE, 8);

	wr(pf, PFLASH_BLOCK_SIZE + 123, 1, 0x20);
	wr(pf, PFLASH_BLOCK_SIZE + 123, 1, 0xd0);
	assert_int_equal(rd(pf, 0, 1), 0x80); /* status until read array */
	wr(pf, 0, 1, 0xff);
	for (unsigned i = 0; i < PFLASH_BLOCK_SIZE; i += 8)
		assert_int_equal(rd(pf, PFLASH_BLOCK_SIZE + i, 8), ~0ull);
	assert_int_equal(rd(pf, 2 * PFLASH_BLOCK_SIZE, 8), next);
	/* Erase without the confirmation: an error, nothing erased. */
	wr(pf, 0x50, 1, 0x50);
	wr(pf, 0, 1, 0x20);
	wr(pf, 0, 1, 0x11);
	assert_int_equal(rd(pf, 0, 1) & 0x30, 0x30);
	wr(pf, 0, 1, 0xff);
	assert_int_not_equal(rd(pf, 0, 8), ~0ull);
}

static void test_identifier_and_unknown_commands(void **state)
{
	struct pflash *pf = ((struct fixture *)*state)->pf;
	uint8_t orig = (uint8_t)rd(pf, 0x20, 1);

	wr(pf, 0, 1, 0x90);
	assert_int_equal(rd(pf, 0, 1), 0x89);
	assert_int_equal(rd(pf, 1, 1), 0x18);
	wr(pf, 0, 1, 0xe8); /* buffered program: not offered, back to array */
	assert_int_equal(rd(pf, 0x20, 1), orig);
	/* Programming past the end is an error, not a write. */
	wr(pf, SIZE - 1, 1, 0x10);
	wr(pf, SIZE - 1, 4, 0x11223344);
	assert_int_equal(rd(pf, 0, 1) & 0x10, 0x10);
	wr(pf, 0, 1, 0xff);
	assert_int_not_equal(rd(pf, SIZE - 1, 1), 0x44);
}

/* Changes reach the file: a new open sees them. */
static void test_persistence(void **state)
{
	struct fixture *f = *state;
	struct pflash *again;
	char err[256];

	wr(f->pf, 0x200, 1, 0x40);
	wr(f->pf, 0x200, 1, 0x5a);
	wr(f->pf, 0x200, 1, 0xff);
	assert_int_equal(pflash_sync(f->pf), 0);
	again = pflash_open(f->path, err, sizeof(err));
	assert_non_null(again);
	assert_int_equal(rd(again, 0x200, 1), 0x5a);
	pflash_close(again);
}

/* The read-only window is switched off before the first non-array read
 * and on again by read array (and by clear status, which returns there). */
static unsigned hook_calls;
static bool hook_on = true;

static void array_hook(void *arg, bool on)
{
	(void)arg;
	assert_int_not_equal(on, hook_on); /* only real changes are reported */
	hook_on = on;
	hook_calls++;
}

static void test_array_hook(void **state)
{
	struct pflash *pf = ((struct fixture *)*state)->pf;

	hook_calls = 0;
	hook_on = true;
	pflash_set_array_hook(pf, array_hook, NULL);
	(void)rd(pf, 0, 8);
	assert_int_equal(hook_calls, 0);
	wr(pf, 0x300, 1, 0x10);
	assert_false(hook_on);
	wr(pf, 0x300, 1, 0x77); /* data, then status mode: still off */
	wr(pf, 0x301, 1, 0x10);
	wr(pf, 0x301, 1, 0x66);
	assert_int_equal(hook_calls, 1);
	wr(pf, 0x301, 1, 0xff);
	assert_true(hook_on);
	assert_int_equal(hook_calls, 2);
	assert_int_equal(((uint8_t *)pflash_data(pf))[0x300], 0x77);
	wr(pf, 0, 1, 0x70);
	wr(pf, 0, 1, 0x50);
	assert_true(hook_on);
	assert_int_equal(hook_calls, 4);
}

static void test_open_errors(void **state)
{
	struct fixture *f = *state;
	char err[256], *odd;

	assert_null(pflash_open("/nonexistent/vars.fd", err, sizeof(err)));
	assert_contains(err, "/nonexistent/vars.fd");
	odd = unit_write_text(f->dir, "odd.fd", "not a multiple of 4 KiB");
	assert_null(pflash_open(odd, err, sizeof(err)));
	assert_contains(err, "multiple of 4096");
	free(odd);
}

/* ---- saved state (pflash_state_ops) ---- */

static int restore_pf(struct pflash *pf, const uint8_t *p, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader r;

	sbuf_reader_init(&r, p, len);
	if (pflash_state_ops.restore(pf, &r, err, errlen) < 0)
		return -1;
	return sbuf_reader_done(&r, "lpc.pflash", err, errlen);
}

static void test_state_round_trip(void **state)
{
	struct fixture *f = *state;
	struct pflash *pf2;
	struct machine m;
	struct sbuf b = {0};
	char err[256] = "";

	/* Registered under its name on a machine. */
	assert_int_equal(machine_init_detached(&m, "unit", NULL, 0, 0), 0);
	assert_int_equal(pflash_add_state(&m, f->pf), 0);
	assert_non_null(machine_state_find(&m, "lpc.pflash"));
	assert_ptr_equal(machine_state_find(&m, "lpc.pflash")->ops, &pflash_state_ops);
	assert_ptr_equal(machine_state_find(&m, "lpc.pflash")->arg, f->pf);
	free(m.states);

	/* Programmed: reads give the status register until read-array. */
	wr(f->pf, 0x10, 1, 0x40);
	wr(f->pf, 0x10, 1, 0xab);
	assert_int_equal(rd(f->pf, 0x10, 1), 0x80);
	assert_int_equal(pflash_state_ops.save(f->pf, &b, err, sizeof(err)), 0);
	assert_int_equal(b.len, 4);
	/* The caller flushes the store: the new process maps the same file. */
	assert_int_equal(pflash_sync(f->pf), 0);
	pf2 = pflash_open(f->path, err, sizeof(err));
	assert_non_null(pf2);
	hook_calls = 0;
	hook_on = true;
	pflash_set_array_hook(pf2, array_hook, NULL);
	assert_int_equal(restore_pf(pf2, b.data, b.len, err, sizeof(err)), 0);
	/* Status mode: the read window is switched off, reads give status. */
	assert_int_equal(hook_calls, 1);
	assert_false(hook_on);
	assert_int_equal(rd(pf2, 0x10, 1), 0x80);
	wr(pf2, 0, 1, 0xff);
	assert_true(hook_on);
	assert_int_equal(rd(pf2, 0x10, 1), 0xab);
	/* Restoring array mode onto array mode switches nothing. */
	b.data[2] = 0; /* MODE_ARRAY */
	assert_int_equal(restore_pf(pf2, b.data, b.len, err, sizeof(err)), 0);
	assert_int_equal(hook_calls, 2);
	sbuf_free(&b);
	pflash_close(pf2);
}

static void test_state_hostile(void **state)
{
	struct fixture *f = *state;
	struct sbuf b = {0};
	uint8_t bad[8];
	char err[256];

	assert_int_equal(pflash_state_ops.save(f->pf, &b, err, sizeof(err)), 0);
	hook_calls = 0;
	pflash_set_array_hook(f->pf, array_hook, NULL);
	for (size_t n = 0; n < b.len; n++)
		assert_int_equal(restore_pf(f->pf, b.data, n, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	bad[0] = 3;
	assert_int_equal(restore_pf(f->pf, bad, b.len, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	bad[2] = 5; /* past MODE_ERASE */
	assert_int_equal(restore_pf(f->pf, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "flash mode 5");
	memcpy(bad, b.data, b.len);
	bad[3] = 0x01;
	assert_int_equal(restore_pf(f->pf, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "status");
	assert_int_equal(hook_calls, 0);
	assert_int_equal(rd(f->pf, 0, 1), 1); /* still the array */
	sbuf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_detection_as_ovmf_does, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_program_and_status, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_erase, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_identifier_and_unknown_commands, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_persistence, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_array_hook, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_hostile, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
