/* Unit tests for the MC146818 RTC and CMOS (src/dev/rtc.h). */
#include "unit.h"

#include <time.h>

#include "dev/rtc.h"

#define REG_SEC     0x00
#define REG_MIN     0x02
#define REG_HOUR    0x04
#define REG_WDAY    0x06
#define REG_MDAY    0x07
#define REG_MONTH   0x08
#define REG_YEAR    0x09
#define REG_A       0x0a
#define REG_B       0x0b
#define REG_C       0x0c
#define REG_D       0x0d
#define REG_CENTURY 0x32

#define B_SET       0x80
#define B_BIN       0x04
#define B_24H       0x02

static uint8_t cmos_read(struct rtc *r, uint8_t idx)
{
	rtc_write(r, 0, idx);
	return rtc_read(r, 1);
}

static void cmos_write(struct rtc *r, uint8_t idx, uint8_t val)
{
	rtc_write(r, 0, idx);
	rtc_write(r, 1, val);
}

static uint8_t bcd(unsigned v)
{
	return (uint8_t)(((v / 10) << 4) | (v % 10));
}

static int setup_utc(void **state)
{
	*state = rtc_create(false);
	return *state != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	rtc_free(*state);
	return 0;
}

/* The time the guest sets below: 2030-06-15 (a Saturday) 15:34:00 UTC. */
static time_t target(void)
{
	struct tm tm = {.tm_year = 130, .tm_mon = 5, .tm_mday = 15, .tm_hour = 15, .tm_min = 34};

	return timegm(&tm);
}

/* Set the clock the way a guest does: SET, write registers, clear SET.
 * `b` is status B without SET; values are encoded per b. */
static void set_time(struct rtc *r, uint8_t b, unsigned year, unsigned mon, unsigned mday,
                     uint8_t hour_reg, unsigned min, unsigned sec)
{
	bool bin = b & B_BIN;

	cmos_write(r, REG_B, b | B_SET);
	cmos_write(r, REG_SEC, bin ? (uint8_t)sec : bcd(sec));
	cmos_write(r, REG_MIN, bin ? (uint8_t)min : bcd(min));
	cmos_write(r, REG_HOUR, hour_reg);
	cmos_write(r, REG_MDAY, bin ? (uint8_t)mday : bcd(mday));
	cmos_write(r, REG_MONTH, bin ? (uint8_t)mon : bcd(mon));
	cmos_write(r, REG_YEAR, bin ? (uint8_t)(year % 100) : bcd(year % 100));
	cmos_write(r, REG_CENTURY, bin ? (uint8_t)(year / 100) : bcd(year / 100));
	cmos_write(r, REG_B, b);
}

static void expect_guest_time(struct rtc *r, time_t want)
{
	time_t got = rtc_guest_time(r);

	if (got < want || got > want + 2)
		fail_msg("guest time is %lld, want %lld (+2 s)", (long long)got, (long long)want);
}

static void test_status_defaults(void **state)
{
	struct rtc *r = *state;

	assert_int_equal(cmos_read(r, REG_A), 0x26);
	assert_int_equal(cmos_read(r, REG_B), 0x02); /* 24 h, BCD */
	assert_int_equal(cmos_read(r, REG_C), 0x00);
	assert_int_equal(cmos_read(r, REG_D), 0x80); /* VRT: battery fine */
	/* A fresh RTC runs on host time. */
	expect_guest_time(r, time(NULL) - 1);
}

static void test_status_registers(void **state)
{
	struct rtc *r = *state;

	/* A: update-in-progress (bit 7) is read-only. */
	cmos_write(r, REG_A, 0xa6);
	assert_int_equal(cmos_read(r, REG_A), 0x26);
	cmos_write(r, REG_A, 0x20);
	assert_int_equal(cmos_read(r, REG_A), 0x20);
	/* C and D are read-only. */
	cmos_write(r, REG_C, 0xff);
	assert_int_equal(cmos_read(r, REG_C), 0x00);
	cmos_write(r, REG_D, 0x00);
	assert_int_equal(cmos_read(r, REG_D), 0x80);
	/* B is read/write. */
	cmos_write(r, REG_B, 0x06);
	assert_int_equal(cmos_read(r, REG_B), 0x06);
}

static void test_index_port(void **state)
{
	struct rtc *r = *state;

	/* Bit 7 of the index (NMI mask) is not part of the register number. */
	rtc_write(r, 0, 0x80 | REG_A);
	assert_int_equal(rtc_read(r, 1), 0x26);
	assert_int_equal(rtc_read(r, 0), REG_A);
	rtc_write(r, 0, 0x80 | REG_D);
	assert_int_equal(rtc_read(r, 1), 0x80);
	/* Every index is safe, data persists in NVRAM. */
	for (unsigned i = 0x0e; i < 0x80; i++)
		if (i != REG_CENTURY)
			cmos_write(r, (uint8_t)i, (uint8_t)(i ^ 0x5a));
	for (unsigned i = 0x0e; i < 0x80; i++)
		if (i != REG_CENTURY)
			assert_int_equal(cmos_read(r, (uint8_t)i), (uint8_t)(i ^ 0x5a));
	/* Index 0xff is 0x7f. */
	cmos_write(r, 0xff, 0x42);
	assert_int_equal(cmos_read(r, 0x7f), 0x42);
	/* The data port repeats the same register until the index changes. */
	rtc_write(r, 0, 0x40);
	assert_int_equal(rtc_read(r, 1), 0x40 ^ 0x5a);
	assert_int_equal(rtc_read(r, 1), 0x40 ^ 0x5a);
}

static void test_set_time_bcd(void **state)
{
	struct rtc *r = *state;

	set_time(r, B_24H, 2030, 6, 15, bcd(15), 34, 0);
	expect_guest_time(r, target());
	/* The registers show the new time, in BCD. */
	assert_int_equal(cmos_read(r, REG_YEAR), 0x30);
	assert_int_equal(cmos_read(r, REG_CENTURY), 0x20);
	assert_int_equal(cmos_read(r, REG_MONTH), 0x06);
	assert_int_equal(cmos_read(r, REG_MDAY), 0x15);
	assert_int_equal(cmos_read(r, REG_HOUR), 0x15);
	assert_int_equal(cmos_read(r, REG_MIN), 0x34);
	assert_true(cmos_read(r, REG_SEC) <= 0x02);
	assert_int_equal(cmos_read(r, REG_WDAY), 7); /* Saturday: 1 = Sunday */

	/* And a date in the past. */
	set_time(r, B_24H, 1999, 12, 31, bcd(23), 59, 30);
	struct tm tm = {
	    .tm_year = 99, .tm_mon = 11, .tm_mday = 31, .tm_hour = 23, .tm_min = 59, .tm_sec = 30};
	expect_guest_time(r, timegm(&tm));
	assert_int_equal(cmos_read(r, REG_CENTURY), 0x19);
}

static void test_set_time_binary(void **state)
{
	struct rtc *r = *state;

	set_time(r, B_24H | B_BIN, 2030, 6, 15, 15, 34, 0);
	expect_guest_time(r, target());
	assert_int_equal(cmos_read(r, REG_YEAR), 30);
	assert_int_equal(cmos_read(r, REG_CENTURY), 20);
	assert_int_equal(cmos_read(r, REG_MONTH), 6);
	assert_int_equal(cmos_read(r, REG_MDAY), 15);
	assert_int_equal(cmos_read(r, REG_HOUR), 15);
	assert_int_equal(cmos_read(r, REG_MIN), 34);
	/* Switching to BCD re-encodes the same time. */
	cmos_write(r, REG_B, B_24H);
	assert_int_equal(cmos_read(r, REG_HOUR), 0x15);
	assert_int_equal(cmos_read(r, REG_MIN), 0x34);
	expect_guest_time(r, target());
}

static void test_12h_mode(void **state)
{
	struct rtc *r = *state;

	/* Written in 12 h mode: 3 PM. */
	set_time(r, 0, 2030, 6, 15, 0x80 | bcd(3), 34, 0);
	expect_guest_time(r, target());
	assert_int_equal(cmos_read(r, REG_HOUR), 0x83);
	/* The same instant in 24 h mode. */
	cmos_write(r, REG_B, B_24H);
	assert_int_equal(cmos_read(r, REG_HOUR), 0x15);
	/* Binary 12 h mode: PM bit plus a binary hour. */
	cmos_write(r, REG_B, B_BIN);
	assert_int_equal(cmos_read(r, REG_HOUR), 0x80 | 3);

	/* Midnight is 12 AM, noon is 12 PM. */
	set_time(r, 0, 2030, 6, 15, 0x12, 10, 0); /* 12 AM = 00:10 */
	struct tm tm = {.tm_year = 130, .tm_mon = 5, .tm_mday = 15, .tm_hour = 0, .tm_min = 10};
	expect_guest_time(r, timegm(&tm));
	assert_int_equal(cmos_read(r, REG_HOUR), 0x12);
	set_time(r, 0, 2030, 6, 15, 0x80 | 0x12, 10, 0); /* 12 PM = 12:10 */
	tm.tm_hour = 12;
	expect_guest_time(r, timegm(&tm));
	assert_int_equal(cmos_read(r, REG_HOUR), 0x92);
	cmos_write(r, REG_B, B_24H);
	assert_int_equal(cmos_read(r, REG_HOUR), 0x12);
}

static void test_set_bit_freezes(void **state)
{
	struct rtc *r = *state;
	time_t before;

	set_time(r, B_24H, 2030, 6, 15, bcd(15), 34, 0);
	before = rtc_guest_time(r);
	/* While SET, registers hold exactly what was written... */
	cmos_write(r, REG_B, B_24H | B_SET);
	cmos_write(r, REG_SEC, 0x59);
	assert_int_equal(cmos_read(r, REG_SEC), 0x59);
	assert_int_equal(cmos_read(r, REG_MIN), 0x34);
	/* ...and the clock itself is not moved until SET clears. */
	assert_true(rtc_guest_time(r) - before <= 2);
	cmos_write(r, REG_B, B_24H);
	expect_guest_time(r, target() + 59);
	/* Writing B again without SET does not commit anything. */
	cmos_write(r, REG_B, B_24H);
	expect_guest_time(r, target() + 59);
}

static void test_single_register_write(void **state)
{
	struct rtc *r = *state;

	set_time(r, B_24H, 2030, 6, 15, bcd(15), 34, 0);
	/* Without SET, a write to one time register takes effect at once. */
	cmos_write(r, REG_HOUR, bcd(17));
	expect_guest_time(r, target() + 2 * 3600);
	cmos_write(r, REG_YEAR, bcd(31));
	struct tm tm = {.tm_year = 131, .tm_mon = 5, .tm_mday = 15, .tm_hour = 17, .tm_min = 34};
	expect_guest_time(r, timegm(&tm));
}

static void test_hostile_time_values(void **state)
{
	struct rtc *r = *state;
	static const uint8_t junk[] = {0x00, 0x99, 0xff, 0x7f, 0x80, 0x3c};

	/* Nonsense in every time register must not crash; the clock stays a
	 * valid time_t and the registers stay readable. */
	for (size_t i = 0; i < ARRAY_LEN(junk); i++) {
		cmos_write(r, REG_B, B_24H | B_SET);
		for (uint8_t reg = 0; reg <= REG_YEAR; reg++)
			cmos_write(r, reg, junk[i]);
		cmos_write(r, REG_CENTURY, junk[i]);
		cmos_write(r, REG_B, junk[i] & ~B_SET);
		(void)rtc_guest_time(r);
		for (uint8_t reg = 0; reg <= REG_YEAR; reg++)
			(void)cmos_read(r, reg);
	}
}

static void test_localtime(void **state)
{
	const char *old = getenv("TZ");
	char *saved = old ? strdup(old) : NULL;
	struct rtc *r;

	(void)state;
	/* A fixed zone 5 hours west of UTC, no DST. */
	setenv("TZ", "XST5", 1);
	tzset();
	r = rtc_create(true);
	assert_non_null(r);
	/* 15:34 local is 20:34 UTC. */
	set_time(r, B_24H, 2030, 6, 15, bcd(15), 34, 0);
	expect_guest_time(r, target() + 5 * 3600);
	assert_int_equal(cmos_read(r, REG_HOUR), 0x15);
	rtc_free(r);

	/* In UTC mode the same registers mean 15:34 UTC. */
	r = rtc_create(false);
	set_time(r, B_24H, 2030, 6, 15, bcd(15), 34, 0);
	expect_guest_time(r, target());
	rtc_free(r);

	if (saved) {
		setenv("TZ", saved, 1);
		free(saved);
	} else {
		unsetenv("TZ");
	}
	tzset();
}

static void test_reads_host_clock(void **state)
{
	struct rtc *r = *state;
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	/* Unless within a second of a minute change, the minute matches. */
	if (tm.tm_sec < 58) {
		assert_int_equal(cmos_read(r, REG_MIN), bcd((unsigned)tm.tm_min));
		assert_int_equal(cmos_read(r, REG_HOUR), bcd((unsigned)tm.tm_hour));
		assert_int_equal(cmos_read(r, REG_YEAR), bcd((unsigned)tm.tm_year % 100));
	}
}

static void test_memory(void **state)
{
	struct rtc *r = *state;

	/* 3 GiB below the hole, 5 GiB above, 4 vCPUs. */
	rtc_set_memory(r, 3ull << 30, 5ull << 30, 4);
	assert_int_equal(cmos_read(r, 0x15) | cmos_read(r, 0x16) << 8, 640);
	assert_int_equal(cmos_read(r, 0x17) | cmos_read(r, 0x18) << 8, 0xffff);
	assert_int_equal(cmos_read(r, 0x30) | cmos_read(r, 0x31) << 8, 0xffff);
	/* 64 KiB units from 16 MiB to 3 GiB. */
	assert_int_equal(cmos_read(r, 0x34) | cmos_read(r, 0x35) << 8,
	                 ((3ull << 30) - (16ull << 20)) >> 16);
	/* 64 KiB units above 4 GiB, three bytes. */
	assert_int_equal(cmos_read(r, 0x5b) | cmos_read(r, 0x5c) << 8 | cmos_read(r, 0x5d) << 16,
	                 (5ull << 30) >> 16);
	assert_int_equal(cmos_read(r, 0x5f), 3);

	/* 256 MiB, one vCPU. */
	rtc_set_memory(r, 256ull << 20, 0, 1);
	assert_int_equal(cmos_read(r, 0x34) | cmos_read(r, 0x35) << 8, 240 * 16);
	assert_int_equal(cmos_read(r, 0x5b) | cmos_read(r, 0x5c) | cmos_read(r, 0x5d), 0);
	assert_int_equal(cmos_read(r, 0x5f), 0);
	assert_int_equal(cmos_read(r, 0x17) | cmos_read(r, 0x18) << 8, 0xffff);

	/* 8 MiB: below 16 MiB, extended memory in KiB fits 16 bits. */
	rtc_set_memory(r, 8ull << 20, 0, 2);
	assert_int_equal(cmos_read(r, 0x34) | cmos_read(r, 0x35) << 8, 0);
	assert_int_equal(cmos_read(r, 0x17) | cmos_read(r, 0x18) << 8, 7 * 1024);
	assert_int_equal(cmos_read(r, 0x30) | cmos_read(r, 0x31) << 8, 7 * 1024);
	assert_int_equal(cmos_read(r, 0x5f), 1);

	/* 255 vCPUs, the most high memory three bytes can say (1 TiB - 64 KiB).
	 * (1 TiB or more wraps to 0 in src: not capped like 0x17/0x30/0x34.) */
	rtc_set_memory(r, 3ull << 30, (1ull << 40) - (1ull << 16), 255);
	assert_int_equal(cmos_read(r, 0x5b) | cmos_read(r, 0x5c) << 8 | cmos_read(r, 0x5d) << 16,
	                 0xffffff);
	assert_int_equal(cmos_read(r, 0x5f), 254);
}

/* ---- saved state (rtc_state_ops) ---- */

#define RTC_STATE_LEN (2 + 1 + 128 + 8)

static void save_rtc(struct rtc *r, struct sbuf *b)
{
	char err[128] = "";

	*b = (struct sbuf){0};
	assert_int_equal(rtc_state_ops.save(r, b, err, sizeof(err)), 0);
	assert_false(b->failed);
	assert_int_equal(b->len, RTC_STATE_LEN);
}

static int restore_rtc(struct rtc *r, const uint8_t *p, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader rd;

	sbuf_reader_init(&rd, p, len);
	if (rtc_state_ops.restore(r, &rd, err, errlen) < 0)
		return -1;
	return sbuf_reader_done(&rd, "lpc.rtc", err, errlen);
}

static void test_state_round_trip(void **state)
{
	struct rtc *r = *state, *r2 = rtc_create(false);
	struct sbuf b;
	char err[128] = "";

	assert_non_null(r2);
	rtc_set_memory(r, 512u << 20, 0, 2);
	set_time(r, B_24H | B_BIN, 2030, 6, 15, 15, 34, 0);
	cmos_write(r, 0x40, 0x77);
	rtc_write(r, 0, 0x41); /* the index the guest left behind */
	save_rtc(r, &b);
	assert_int_equal(restore_rtc(r2, b.data, b.len, err, sizeof(err)), 0);
	/* The index, the NVRAM, the mode and the firmware facts came along. */
	assert_int_equal(rtc_read(r2, 0), 0x41);
	assert_int_equal(cmos_read(r2, 0x40), 0x77);
	assert_int_equal(cmos_read(r2, REG_B), B_24H | B_BIN);
	assert_int_equal(cmos_read(r2, 0x5f), 1); /* vCPUs - 1 */
	assert_int_equal(cmos_read(r2, 0x34), cmos_read(r, 0x34));
	/* The clock is host time plus the guest's offset: it still reads the
	 * time the guest set, in the registers' binary mode. */
	expect_guest_time(r2, target());
	assert_int_equal(cmos_read(r2, REG_YEAR), 30);
	assert_int_equal(cmos_read(r2, REG_CENTURY), 20);
	assert_int_equal(cmos_read(r2, REG_HOUR), 15);
	sbuf_free(&b);
	rtc_free(r2);
}

static void test_state_hostile(void **state)
{
	struct rtc *r = *state, *r2 = rtc_create(false);
	struct sbuf b;
	uint8_t bad[RTC_STATE_LEN + 1];
	char err[128];

	assert_non_null(r2);
	set_time(r, B_24H, 2030, 6, 15, bcd(15), 34, 0);
	cmos_write(r, 0x40, 0x77);
	save_rtc(r, &b);
	for (size_t n = 0; n < b.len; n++)
		assert_int_equal(restore_rtc(r2, b.data, n, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	bad[0] = 0;
	assert_int_equal(restore_rtc(r2, bad, b.len, err, sizeof(err)), -1);
	/* An index past the 128 bytes of CMOS (offset 2). */
	memcpy(bad, b.data, b.len);
	bad[2] = 0x80;
	assert_int_equal(restore_rtc(r2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "index 128");
	/* A clock offset of thousands of millennia (offset 131). */
	memcpy(bad, b.data, b.len);
	unit_put_le(bad + 131, 1ull << 62, 8);
	assert_int_equal(restore_rtc(r2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "offset");
	unit_put_le(bad + 131, (uint64_t) - (1ll << 62), 8);
	assert_int_equal(restore_rtc(r2, bad, b.len, err, sizeof(err)), -1);
	/* Nothing was applied: the fresh clock reads the host's time. */
	assert_int_equal(cmos_read(r2, 0x40), 0);
	assert_true(llabs((long long)(rtc_guest_time(r2) - time(NULL))) <= 2);
	sbuf_free(&b);
	rtc_free(r2);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup_utc, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_status_defaults),     T(test_status_registers),
	    T(test_index_port),          T(test_set_time_bcd),
	    T(test_set_time_binary),     T(test_12h_mode),
	    T(test_set_bit_freezes),     T(test_single_register_write),
	    T(test_hostile_time_values), cmocka_unit_test(test_localtime),
	    T(test_reads_host_clock),    T(test_memory),
	    T(test_state_round_trip),    T(test_state_hostile),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
