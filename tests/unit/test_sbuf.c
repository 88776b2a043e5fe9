/* Unit tests for the saved-state field encoding (src/lib/sbuf.h). */
#include "unit.h"

#include "lib/sbuf.h"

static void test_round_trip_little_endian(void **state)
{
	struct sbuf b = {0};
	struct sbuf_reader r;
	uint8_t raw[3];
	char err[128];

	(void)state;
	sbuf_put_u16(&b, 2);
	sbuf_put_u8(&b, 0xab);
	sbuf_put_u32(&b, 0x01020304);
	sbuf_put_u64(&b, 0x1122334455667788ull);
	sbuf_put_bool(&b, true);
	sbuf_put_bytes(&b, "xyz", 3);
	assert_false(b.failed);
	assert_int_equal(b.len, 2 + 1 + 4 + 8 + 1 + 3);
	assert_int_equal(b.data[3], 0x04); /* little-endian on every host */
	sbuf_reader_init(&r, b.data, b.len);
	assert_int_equal(sbuf_get_version(&r, 2), 2);
	assert_int_equal(sbuf_get_u8(&r), 0xab);
	assert_int_equal(sbuf_get_u32(&r), 0x01020304);
	assert_true(sbuf_get_u64(&r) == 0x1122334455667788ull);
	assert_true(sbuf_get_bool(&r));
	sbuf_get_bytes(&r, raw, 3);
	assert_memory_equal(raw, "xyz", 3);
	assert_int_equal(sbuf_reader_done(&r, "t", err, sizeof(err)), 0);
	sbuf_free(&b);
	assert_null(b.data);
}

static void test_reader_failures_are_sticky_and_named(void **state)
{
	const uint8_t data[] = {7, 0, 2, 1};
	struct sbuf_reader r;
	uint8_t dst[4] = {1, 1, 1, 1};
	char err[128];

	(void)state;
	sbuf_reader_init(&r, data, 2);
	assert_int_equal(sbuf_get_version(&r, 3), 0);
	assert_int_equal(sbuf_reader_done(&r, "lpc.rtc", err, sizeof(err)), -1);
	assert_string_equal(err, "lpc.rtc: version 7, this khyve reads 1-3");
	/* Past the end: zeros, and the first reason is kept. */
	sbuf_reader_init(&r, data, sizeof(data));
	assert_int_equal(sbuf_get_u16(&r), 7);
	assert_false(sbuf_get_bool(&r)); /* 2 is no flag */
	assert_int_equal(sbuf_get_u8(&r), 0);
	sbuf_get_bytes(&r, dst, sizeof(dst));
	assert_int_equal(dst[0], 0);
	assert_int_equal(sbuf_reader_done(&r, "x", err, sizeof(err)), -1);
	assert_string_equal(err, "x: a flag holds 2, not 0 or 1");
	sbuf_reader_init(&r, data, sizeof(data));
	sbuf_get_u64(&r);
	assert_int_equal(sbuf_reader_done(&r, "x", err, sizeof(err)), -1);
	assert_string_equal(err, "x: truncated");
	sbuf_reader_init(&r, data, sizeof(data));
	sbuf_get_u16(&r);
	assert_int_equal(sbuf_reader_done(&r, "x", err, sizeof(err)), -1);
	assert_string_equal(err, "x: 2 bytes left over");
	sbuf_reader_init(&r, data, sizeof(data));
	sbuf_fail(&r, "rx_count %u > 16", 300u);
	sbuf_fail(&r, "second");
	assert_int_equal(sbuf_reader_done(&r, "lpc.com1", err, sizeof(err)), -1);
	assert_string_equal(err, "lpc.com1: rx_count 300 > 16");
}

static void test_writer_stops_at_its_limit(void **state)
{
	struct sbuf b = {0};
	static uint8_t chunk[1 << 20];

	(void)state;
	for (unsigned i = 0; i < SBUF_MAX / sizeof(chunk); i++)
		sbuf_put_bytes(&b, chunk, sizeof(chunk));
	assert_false(b.failed);
	sbuf_put_u8(&b, 1);
	assert_true(b.failed);
	assert_int_equal(b.len, SBUF_MAX);
	sbuf_put_u32(&b, 1); /* sticky */
	assert_int_equal(b.len, SBUF_MAX);
	sbuf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip_little_endian),
	    cmocka_unit_test(test_reader_failures_are_sticky_and_named),
	    cmocka_unit_test(test_writer_stops_at_its_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
