/* Unit tests for the number parsers (src/lib/parse.h). */
#include "unit.h"

#include "lib/parse.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define TIB (1ull << 40)

static void test_parse_size_ok(void **state)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
	    {"0", 0},
	    {"1", 1},
	    {"4096", 4096},
	    {"1k", KIB},
	    {"1K", KIB},
	    {"1KB", KIB},
	    {"1kb", KIB},
	    {"1Kb", KIB},
	    {"512M", 512 * MIB},
	    {"512m", 512 * MIB},
	    {"512MB", 512 * MIB},
	    {"2G", 2 * GIB},
	    {"2g", 2 * GIB},
	    {"2GB", 2 * GIB},
	    {"3T", 3 * TIB},
	    {"3tb", 3 * TIB},
	    {"100B", 100},
	    {"100b", 100},
	    {"007", 7}, /* decimal, not octal */
	    {"0010M", 10 * MIB},
	    {"18446744073709551615", UINT64_MAX},
	    {"16777215T", 16777215ull << 40},
	    {"17179869183G", 17179869183ull << 30},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(ok); i++) {
		uint64_t v = 0xdead;

		if (parse_size(ok[i].s, &v) != 0)
			fail_msg("parse_size rejected '%s'", ok[i].s);
		if (v != ok[i].v)
			fail_msg("parse_size('%s') = %llu, want %llu", ok[i].s,
			         (unsigned long long)v, (unsigned long long)ok[i].v);
	}
}

static void test_parse_size_bad(void **state)
{
	static const char *const bad[] = {
	    "",
	    "K",
	    "M",
	    "-1",
	    "-1M",
	    " 1",
	    "1 ",
	    "+1",
	    "1.5G",
	    "1,5G",
	    "0x10",
	    "1Q",
	    "12Q",
	    "1P",
	    "1E",
	    "1KK",
	    "1KiB",
	    "1MBB",
	    "1BB",
	    "1 K",
	    "1G ",
	    "G1",
	    "abc",
	    "1k2",
	    "1\n",
	    "1e3",
	    "18446744073709551616", /* 2^64 */
	    "99999999999999999999999",
	    "16777216T",    /* 2^64 */
	    "17179869184G", /* 2^64 */
	    "18014398509481984K",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		uint64_t v = 0xdead;

		if (parse_size(bad[i], &v) != -1)
			fail_msg("parse_size accepted '%s' as %llu", bad[i], (unsigned long long)v);
		assert_int_equal(v, 0xdead); /* untouched */
	}
	assert_int_equal(parse_size(NULL, &(uint64_t){0}), -1);
}

static void test_parse_memsize(void **state)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
	    {"512", 512 * MIB}, /* bhyve: bare number < 1 MiB means MiB */
	    {"1", MIB},           {"4096", 4096 * MIB}, {"1048575", 1048575 * MIB},
	    {"1048576", MIB}, /* >= 1 MiB: bytes */
	    {"2097152", 2 * MIB}, {"2G", 2 * GIB},      {"256M", 256 * MIB},
	    {"256m", 256 * MIB},  {"4K", 4 * KIB},      {"8192K", 8 * MIB},
	    {"4096B", 4096}, /* with a suffix, bytes */
	    {"1T", TIB},
	};
	static const char *const bad[] = {
	    "0",
	    "0M",
	    "0G",
	    "12Q",
	    "",
	    "-512",
	    "1K",
	    "4097B",
	    "100B",
	    "1.5G",
	    "G",
	    "512 ",
	    "1048577", /* bytes, not a multiple of 4 KiB */
	    "18446744073709551615",
	    "99999999999999999999",
	    "abc",
	    "0x100",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(ok); i++) {
		uint64_t v = 0;

		if (parse_memsize(ok[i].s, &v) != 0)
			fail_msg("parse_memsize rejected '%s'", ok[i].s);
		if (v != ok[i].v)
			fail_msg("parse_memsize('%s') = %llu, want %llu", ok[i].s,
			         (unsigned long long)v, (unsigned long long)ok[i].v);
	}
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		uint64_t v = 0xdead;

		if (parse_memsize(bad[i], &v) != -1)
			fail_msg("parse_memsize accepted '%s' as %llu", bad[i],
			         (unsigned long long)v);
		assert_int_equal(v, 0xdead);
	}
	assert_int_equal(parse_memsize(NULL, &(uint64_t){0}), -1);
}

static void test_parse_is_name(void **state)
{
	(void)state;
	assert_true(parse_is_name("org.qemu.guest_agent-0", 22, 64));
	assert_true(parse_is_name("abcdef", 3, 3)); /* only the first `len` bytes */
	assert_false(parse_is_name("", 0, 64));
	assert_false(parse_is_name("abcd", 4, 3));
	assert_false(parse_is_name("a/b", 3, 64));
	assert_false(parse_is_name("a b", 3, 64));
	assert_false(parse_is_name("a,b", 3, 64));
	assert_false(parse_is_name("caf\xc3\xa9", 5, 64));
}

static void test_parse_uint(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(parse_uint("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_uint("10", 0, 10, &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(parse_uint("0x1f", 0, 255, &v), 0);
	assert_int_equal(v, 31);
	assert_int_equal(parse_uint("0X1F", 0, 255, &v), 0);
	assert_int_equal(v, 31);
	assert_int_equal(parse_uint("017", 0, 255, &v), 0); /* octal */
	assert_int_equal(v, 15);
	assert_int_equal(parse_uint("18446744073709551615", 0, UINT64_MAX, &v), 0);
	assert_int_equal(v, UINT64_MAX);
	assert_int_equal(parse_uint("288", 1, 288, &v), 0);
	assert_int_equal(v, 288);

	/* Range. */
	v = 77;
	assert_int_equal(parse_uint("0", 1, 288, &v), -1);
	assert_int_equal(parse_uint("289", 1, 288, &v), -1);
	assert_int_equal(parse_uint("11", 0, 10, &v), -1);
	assert_int_equal(v, 77);

	/* Malformed. */
	static const char *const bad[] = {
	    "",
	    "-1",
	    "-0",
	    " 1",
	    "1 ",
	    "1x",
	    "0x",
	    "08",
	    "abc",
	    "1.0",
	    "1e2",
	    "\t5",
	    "5\n",
	    "18446744073709551616",
	    "0x10000000000000000",
	    "--1",
	};
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		v = 77;
		if (parse_uint(bad[i], 0, UINT64_MAX, &v) != -1)
			fail_msg("parse_uint accepted '%s' as %llu", bad[i], (unsigned long long)v);
		assert_int_equal(v, 77);
	}
	assert_int_equal(parse_uint(NULL, 0, 10, &v), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_size_ok), cmocka_unit_test(test_parse_size_bad),
	    cmocka_unit_test(test_parse_memsize), cmocka_unit_test(test_parse_uint),
	    cmocka_unit_test(test_parse_is_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
