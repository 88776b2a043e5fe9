/*
 * Unit tests for the self-announce schedule and frame (src/lib/announce.c):
 * QEMU's five rounds 50, 150, 250, 350 ms apart, poll(2) timeouts rounded
 * up, the quiesced receive side looking again every ANNOUNCE_PAUSED_MS,
 * and the RARP frame (RFC 903).
 */
#include "unit.h"

#include "lib/announce.h"

#define MS 1000000ull

static void test_schedule(void **state)
{
	struct announce a = {0};
	uint64_t now = 1000 * MS;
	unsigned sent = 0;

	(void)state;
	assert_false(announce_due(&a, now));
	assert_int_equal(announce_timeout_ms(&a, now), -1);
	announce_start(&a, now);
	assert_false(announce_due(&a, now));
	assert_int_equal(announce_timeout_ms(&a, now), 50);
	assert_int_equal(announce_timeout_ms(&a, now + 1), 50); /* rounded up */
	for (uint64_t t = now; t < now + 2000 * MS && sent < 10; t += MS)
		if (announce_due(&a, t)) {
			sent++;
			announce_sent(&a, t);
		}
	assert_int_equal(sent, ANNOUNCE_ROUNDS);
	assert_int_equal(announce_timeout_ms(&a, now + 2000 * MS), -1);
}

/* Regression: virtio-net and e1000 each had their own copy of this rule. */
static void test_paused(void **state)
{
	struct announce a = {0};
	uint64_t now = 5 * MS;

	(void)state;
	assert_int_equal(announce_poll_ms(&a, now, true), -1); /* nothing left */
	announce_start(&a, now);
	assert_int_equal(announce_poll_ms(&a, now, true), ANNOUNCE_PAUSED_MS);
	assert_int_equal(announce_poll_ms(&a, now, false), 50);
	assert_int_equal(announce_poll_ms(&a, now + 60 * MS, false), 0);
}

static void test_frame(void **state)
{
	static const uint8_t mac[6] = {0x58, 0x9c, 0xfc, 0x01, 0x02, 0x03};
	uint8_t f[ANNOUNCE_FRAME];

	(void)state;
	memset(f, 0xee, sizeof(f));
	assert_int_equal(announce_frame(f, mac), ANNOUNCE_FRAME);
	for (int i = 0; i < 6; i++)
		assert_int_equal(f[i], 0xff); /* broadcast */
	assert_memory_equal(f + 6, mac, 6);
	assert_int_equal(f[12] << 8 | f[13], 0x8035); /* RARP */
	assert_int_equal(f[20] << 8 | f[21], 3);      /* reverse request */
	assert_memory_equal(f + 22, mac, 6);          /* sender hardware */
	assert_memory_equal(f + 32, mac, 6);          /* target hardware */
	for (int i = 42; i < ANNOUNCE_FRAME; i++)
		assert_int_equal(f[i], 0); /* padding */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_schedule),
	    cmocka_unit_test(test_paused),
	    cmocka_unit_test(test_frame),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
