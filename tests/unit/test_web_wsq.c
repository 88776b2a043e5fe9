/* Unit tests for the WebSocket relays' bounded queue (src/web/wsq.h). */
#include "unit.h"

#include "web/wsq.h"

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

static void test_wsq_init_bounds(void **state)
{
	struct wsq q;

	(void)state;
	assert_int_equal(wsq_init(&q, 0), -1);
	assert_int_equal(wsq_init(&q, 8), 0);
	assert_true(wsq_empty(&q));
	assert_false(wsq_full(&q));
	assert_int_equal(wsq_used(&q), 0);
	assert_int_equal(wsq_space(&q), 8);
	wsq_free(&q);
	wsq_free(&q); /* twice is safe */
	assert_int_equal(wsq_space(&q), 0);
	assert_int_equal(wsq_append(&q, "x", 1), -1);
}

/* A longer append than the room is refused whole: nothing half-queued. */
static void test_wsq_append_all_or_nothing(void **state)
{
	struct wsq q;
	unsigned char out[16];

	(void)state;
	assert_int_equal(wsq_init(&q, 8), 0);
	assert_int_equal(wsq_append(&q, "abcde", 5), 0);
	assert_int_equal(wsq_append(&q, "fghij", 5), -1);
	assert_int_equal(wsq_used(&q), 5);
	assert_int_equal(wsq_append(&q, "fgh", 3), 0);
	assert_true(wsq_full(&q));
	assert_int_equal(wsq_append(&q, "", 0), 0);
	assert_int_equal(wsq_append(&q, "z", 1), -1);
	assert_int_equal(wsq_take(&q, out, sizeof(out)), 8);
	assert_memory_equal(out, "abcdefgh", 8);
	assert_true(wsq_empty(&q));
	wsq_free(&q);
}

/* Bytes that wrap around the end come out in order, in two pieces. */
static void test_wsq_wrap(void **state)
{
	struct wsq q;
	const unsigned char *p;
	unsigned char out[8];

	(void)state;
	assert_int_equal(wsq_init(&q, 8), 0);
	assert_int_equal(wsq_append(&q, "012345", 6), 0);
	assert_int_equal(wsq_take(&q, out, 4), 4);
	assert_memory_equal(out, "0123", 4);
	assert_int_equal(wsq_append(&q, "6789ab", 6), 0); /* 45 6789ab: wraps */
	assert_true(wsq_full(&q));
	assert_int_equal(wsq_peek(&q, &p), 4); /* "4567" up to the end */
	assert_memory_equal(p, "4567", 4);
	wsq_consume(&q, 3);
	assert_int_equal(wsq_peek(&q, &p), 1);
	assert_memory_equal(p, "7", 1);
	wsq_consume(&q, 1);
	assert_int_equal(wsq_peek(&q, &p), 4);
	assert_memory_equal(p, "89ab", 4);
	wsq_consume(&q, 100); /* more than queued: clamped */
	assert_true(wsq_empty(&q));
	assert_int_equal(wsq_peek(&q, &p), 0);
	assert_null(p);
	wsq_free(&q);
}

/* Reading straight into the queue: reserve gives the room in one piece,
 * commit never counts more than it gave. */
static void test_wsq_reserve_commit(void **state)
{
	struct wsq q;
	unsigned char *w;
	unsigned char out[8];

	(void)state;
	assert_int_equal(wsq_init(&q, 8), 0);
	assert_int_equal(wsq_reserve(&q, &w), 8);
	memcpy(w, "abc", 3);
	wsq_commit(&q, 3);
	assert_int_equal(wsq_take(&q, out, 2), 2);
	assert_int_equal(wsq_reserve(&q, &w), 5); /* tail to end */
	memcpy(w, "defgh", 5);
	wsq_commit(&q, 5);
	assert_int_equal(wsq_reserve(&q, &w), 2); /* wrapped: up to head */
	wsq_commit(&q, 50);                       /* clamped to 2 */
	assert_true(wsq_full(&q));
	assert_int_equal(wsq_reserve(&q, &w), 0);
	assert_null(w);
	wsq_commit(&q, 1); /* nothing to commit into */
	assert_int_equal(wsq_used(&q), 8);
	assert_int_equal(wsq_take(&q, out, 6), 6);
	assert_memory_equal(out, "cdefgh", 6);
	wsq_free(&q);
}

/* Once empty, the room is one piece again (head goes back to 0). */
static void test_wsq_empty_resets(void **state)
{
	struct wsq q;
	unsigned char *w;
	unsigned char out[8];

	(void)state;
	assert_int_equal(wsq_init(&q, 8), 0);
	assert_int_equal(wsq_append(&q, "abcde", 5), 0);
	assert_int_equal(wsq_take(&q, out, 5), 5);
	assert_int_equal(wsq_reserve(&q, &w), 8);
	wsq_free(&q);
}

static void test_wsq_can_accept(void **state)
{
	struct wsq q;

	(void)state;
	assert_int_equal(wsq_init(&q, 100), 0);
	assert_true(wsq_can_accept(&q, 100));
	assert_int_equal(wsq_append(&q, "0123456789", 10), 0);
	assert_false(wsq_can_accept(&q, 100));
	assert_true(wsq_can_accept(&q, 90));
	wsq_free(&q);
}

/* A long random mix of appends, takes, reserves and commits against a
 * plain model: the bytes come out in order and the counts stay in bounds. */
static void test_wsq_model(void **state)
{
	enum { CAP = 1000, TOTAL = 200000 };
	static unsigned char in[TOTAL], got[TOTAL];
	size_t put = 0, taken = 0;
	unsigned seed = 12345;
	struct wsq q;

	(void)state;
	fill_pattern(in, TOTAL, 3);
	assert_int_equal(wsq_init(&q, CAP), 0);
	while (taken < TOTAL) {
		size_t n;

		seed = seed * 1103515245u + 12345u;
		n = (seed >> 16) % 400;
		if ((seed >> 8) & 1) {
			if (n > TOTAL - put)
				n = TOTAL - put;
			if ((seed >> 9) & 1) {
				unsigned char *w;
				size_t room = wsq_reserve(&q, &w);

				n = n < room ? n : room;
				if (n) /* w is NULL when full */
					memcpy(w, in + put, n);
				wsq_commit(&q, n);
				put += n;
			} else if (wsq_append(&q, in + put, n) == 0) {
				put += n;
			} else {
				assert_true(n > wsq_space(&q));
			}
		} else {
			taken += wsq_take(&q, got + taken, n);
		}
		assert_int_equal(wsq_used(&q), put - taken);
		assert_true(wsq_used(&q) <= CAP);
		assert_int_equal(wsq_used(&q) + wsq_space(&q), CAP);
	}
	assert_memory_equal(in, got, TOTAL);
	wsq_free(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wsq_init_bounds),
	    cmocka_unit_test(test_wsq_append_all_or_nothing),
	    cmocka_unit_test(test_wsq_wrap),
	    cmocka_unit_test(test_wsq_reserve_commit),
	    cmocka_unit_test(test_wsq_empty_resets),
	    cmocka_unit_test(test_wsq_can_accept),
	    cmocka_unit_test(test_wsq_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
