/* Unit tests for ACPI fixed-hardware power management (src/dev/pm.h). */
#include "unit.h"

#include <time.h>

#include "dev/pm.h"
#include "lib/exitcode.h"

#define PM1_STS    0xb000
#define PM1_EN     0xb002
#define PM1_CNT    0xb004
#define PM_TMR     0xb008
#define RESET      0xcf9

#define PWRBTN     0x0100
#define SLP_TYP(n) ((uint32_t)(n) << 10)

struct wire {
	bool sci;
	unsigned sci_calls;
	int exits[16];
	unsigned nexits;
};

static void fake_set_sci(void *arg, bool level)
{
	struct wire *w = arg;

	w->sci = level;
	w->sci_calls++;
}

static void fake_request_exit(void *arg, int code)
{
	struct wire *w = arg;

	if (w->nexits < ARRAY_LEN(w->exits))
		w->exits[w->nexits] = code;
	w->nexits++;
}

static const struct pm_ops ops = {fake_set_sci, fake_request_exit};

struct fixture {
	struct wire w;
	struct pm *pm;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	f->pm = pm_create(&ops, &f->w);
	if (f->pm == NULL) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	pm_free(f->pm);
	free(f);
	return 0;
}

static void test_reset_state(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(pm_read(f->pm, PM1_STS, 2), 0);
	assert_int_equal(pm_read(f->pm, PM1_EN, 2), 0);
	/* SCI_EN: always in ACPI mode. */
	assert_int_equal(pm_read(f->pm, PM1_CNT, 2), 0x0001);
	assert_int_equal(pm_read(f->pm, RESET, 1), 0);
	assert_false(f->w.sci);
	assert_int_equal(f->w.sci_calls, 0);
	assert_int_equal(f->w.nexits, 0);
	/* Unknown ports read all ones. */
	assert_int_equal(pm_read(f->pm, 0xb00c, 1), 0xffffffff);
	assert_int_equal(pm_read(f->pm, 0xb006, 2), 0xffffffff);
	/* Writes to them are ignored. */
	pm_write(f->pm, 0xb00c, 4, 0xffffffff);
	assert_int_equal(f->w.nexits, 0);
	pm_free(NULL);
}

static void test_power_button_not_enabled(void **state)
{
	struct fixture *f = *state;

	/* No ACPI OS listening: false, status latched, no SCI. */
	assert_false(pm_power_button(f->pm));
	assert_int_equal(pm_read(f->pm, PM1_STS, 2) & PWRBTN, PWRBTN);
	assert_false(f->w.sci);
	assert_int_equal(f->w.sci_calls, 0);
	/* Enabling it later raises the SCI for the latched press. */
	pm_write(f->pm, PM1_EN, 2, PWRBTN);
	assert_true(f->w.sci);
	/* Clearing the status (write 1) drops it. */
	pm_write(f->pm, PM1_STS, 2, PWRBTN);
	assert_false(f->w.sci);
	assert_int_equal(pm_read(f->pm, PM1_STS, 2), 0);
}

static void test_power_button_enabled(void **state)
{
	struct fixture *f = *state;

	pm_write(f->pm, PM1_EN, 2, PWRBTN);
	assert_int_equal(pm_read(f->pm, PM1_EN, 2), PWRBTN);
	assert_false(f->w.sci);
	assert_true(pm_power_button(f->pm));
	assert_true(f->w.sci);
	assert_int_equal(f->w.sci_calls, 1);
	/* A second press while pending: still listening, no new edge. */
	assert_true(pm_power_button(f->pm));
	assert_int_equal(f->w.sci_calls, 1);
	/* Disabling the event drops the SCI; the status stays latched. */
	pm_write(f->pm, PM1_EN, 2, 0);
	assert_false(f->w.sci);
	assert_int_equal(pm_read(f->pm, PM1_STS, 2) & PWRBTN, PWRBTN);
	pm_write(f->pm, PM1_EN, 2, PWRBTN);
	assert_true(f->w.sci);
	pm_write(f->pm, PM1_STS, 2, PWRBTN);
	assert_false(f->w.sci);
	assert_int_equal(f->w.sci_calls, 4);
}

static void test_status_write_one_to_clear(void **state)
{
	struct fixture *f = *state;

	pm_write(f->pm, PM1_EN, 2, PWRBTN);
	assert_true(pm_power_button(f->pm));
	/* Writing zeros or other bits leaves PWRBTN_STS alone. */
	pm_write(f->pm, PM1_STS, 2, 0);
	assert_int_equal(pm_read(f->pm, PM1_STS, 2) & PWRBTN, PWRBTN);
	pm_write(f->pm, PM1_STS, 2, 0xfeff);
	assert_int_equal(pm_read(f->pm, PM1_STS, 2) & PWRBTN, PWRBTN);
	assert_true(f->w.sci);
	/* A byte write to the high status byte clears it. */
	pm_write(f->pm, PM1_STS + 1, 1, 0x01);
	assert_int_equal(pm_read(f->pm, PM1_STS, 2) & PWRBTN, 0);
	assert_false(f->w.sci);
	/* Status writes never change the enable register. */
	assert_int_equal(pm_read(f->pm, PM1_EN, 2), PWRBTN);
}

static void test_access_widths(void **state)
{
	struct fixture *f = *state;

	/* A dword write covers status (low word) and enable (high word). */
	pm_write(f->pm, PM1_STS, 4, (uint32_t)PWRBTN << 16);
	assert_int_equal(pm_read(f->pm, PM1_EN, 2), PWRBTN);
	assert_true(pm_power_button(f->pm));
	assert_int_equal(pm_read(f->pm, PM1_STS, 4), PWRBTN | ((uint32_t)PWRBTN << 16));
	/* Byte reads. */
	assert_int_equal(pm_read(f->pm, PM1_STS, 1), 0x00);
	assert_int_equal(pm_read(f->pm, PM1_STS + 1, 1), 0x01);
	assert_int_equal(pm_read(f->pm, PM1_EN, 1), 0x00);
	assert_int_equal(pm_read(f->pm, PM1_EN + 1, 1), 0x01);
	/* A word read of the enable register. */
	assert_int_equal(pm_read(f->pm, PM1_EN, 2), PWRBTN);
	/* A dword write clearing status and keeping enable. */
	pm_write(f->pm, PM1_STS, 4, PWRBTN | ((uint32_t)PWRBTN << 16));
	assert_int_equal(pm_read(f->pm, PM1_STS, 4), (uint32_t)PWRBTN << 16);
	assert_false(f->w.sci);
	/* Byte writes to the enable register touch only their byte. */
	pm_write(f->pm, PM1_EN, 1, 0x20);
	assert_int_equal(pm_read(f->pm, PM1_EN, 2), PWRBTN | 0x20);
	pm_write(f->pm, PM1_EN + 1, 1, 0x00);
	assert_int_equal(pm_read(f->pm, PM1_EN, 2), 0x20);
	/* Control block byte reads. */
	assert_int_equal(pm_read(f->pm, PM1_CNT, 1), 0x01);
	assert_int_equal(pm_read(f->pm, PM1_CNT + 1, 1), 0x00);
}

static void test_s5_poweroff(void **state)
{
	struct fixture *f = *state;

	pm_write(f->pm, PM1_CNT, 2, SLP_TYP(PM_SLP_TYP_S5) | PM1_SLP_EN);
	assert_int_equal(f->w.nexits, 1);
	assert_int_equal(f->w.exits[0], KHYVE_EXIT_POWEROFF);
	assert_int_equal(f->w.exits[0], 1);
	/* SLP_EN reads back as 0; SLP_TYP is kept; SCI_EN stays set. */
	assert_int_equal(pm_read(f->pm, PM1_CNT, 2), SLP_TYP(5) | PM1_SCI_EN);
}

static void test_s5_byte_writes(void **state)
{
	struct fixture *f = *state;

	/* Low byte first (nothing happens), then the high byte with SLP_EN. */
	pm_write(f->pm, PM1_CNT, 1, 0x01);
	assert_int_equal(f->w.nexits, 0);
	pm_write(f->pm, PM1_CNT + 1, 1, (SLP_TYP(5) | PM1_SLP_EN) >> 8);
	assert_int_equal(f->w.nexits, 1);
	assert_int_equal(f->w.exits[0], KHYVE_EXIT_POWEROFF);
}

static void test_other_sleep_types(void **state)
{
	struct fixture *f = *state;

	/* SLP_TYP 5 without SLP_EN: nothing. */
	pm_write(f->pm, PM1_CNT, 2, SLP_TYP(5));
	assert_int_equal(f->w.nexits, 0);
	/* Other sleep states are not supported: no exit (logged instead). */
	for (unsigned t = 0; t < 8; t++) {
		if (t == PM_SLP_TYP_S5 || t == PM_SLP_TYP_PIIX4_OFF)
			continue;
		pm_write(f->pm, PM1_CNT, 2, SLP_TYP(t) | PM1_SLP_EN);
	}
	assert_int_equal(f->w.nexits, 0);
	/* Type 0 is soft-off as on QEMU's PIIX4 (OVMF's shutdown writes it). */
	pm_write(f->pm, PM1_CNT, 2, SLP_TYP(0) | PM1_SLP_EN);
	assert_int_equal(f->w.nexits, 1);
	assert_int_equal(f->w.exits[0], KHYVE_EXIT_POWEROFF);
	f->w.nexits = 0;
	/* SCI_EN cannot be cleared. */
	pm_write(f->pm, PM1_CNT, 2, 0);
	assert_int_equal(pm_read(f->pm, PM1_CNT, 2) & PM1_SCI_EN, PM1_SCI_EN);
}

static void test_reset_register(void **state)
{
	struct fixture *f = *state;

	/* Linux: 0x02 (reset type) then 0x06 (with RST_CPU): one reset. */
	pm_write(f->pm, RESET, 1, 0x02);
	assert_int_equal(f->w.nexits, 0);
	assert_int_equal(pm_read(f->pm, RESET, 1), 0x02);
	pm_write(f->pm, RESET, 1, 0x06);
	assert_int_equal(f->w.nexits, 1);
	assert_int_equal(f->w.exits[0], KHYVE_EXIT_RESET);
	assert_int_equal(f->w.exits[0], 0);
	/* RST_CPU itself does not stick. */
	assert_int_equal(pm_read(f->pm, RESET, 1) & 0x04, 0);
	/* Other bits alone do not reset. */
	pm_write(f->pm, RESET, 1, 0x0a);
	pm_write(f->pm, RESET, 1, 0x00);
	assert_int_equal(f->w.nexits, 1);
}

static void test_reset_register_bit2_only(void **state)
{
	struct fixture *f = *state;

	/* The FADT's value (6) written once resets once. */
	pm_write(f->pm, RESET, 1, PM_RESET_VALUE);
	assert_int_equal(f->w.nexits, 1);
	assert_int_equal(f->w.exits[0], KHYVE_EXIT_RESET);
	/* Only the low byte matters on a wider write. */
	pm_write(f->pm, RESET, 1, 0x100);
	assert_int_equal(f->w.nexits, 1);
}

static uint32_t tmr(struct pm *pm)
{
	return pm_read(pm, PM_TMR, 4);
}

static void test_pm_timer(void **state)
{
	struct fixture *f = *state;
	struct timespec ts = {0, 2 * 1000 * 1000}; /* 2 ms */
	uint32_t a, b, c;

	a = tmr(f->pm);
	nanosleep(&ts, NULL);
	b = tmr(f->pm);
	/* 3.579545 MHz: 2 ms is about 7159 ticks; allow for a slow host.
	 * Differences are modulo 2^32 (TMR_VAL_EXT: 32-bit counter). */
	assert_true((uint32_t)(b - a) >= 7000);
	assert_true((uint32_t)(b - a) < 3579545u * 5); /* < 5 s */
	/* Monotonic across many reads. */
	for (int i = 0; i < 1000; i++) {
		c = tmr(f->pm);
		assert_true((uint32_t)(c - b) < 0x80000000u);
		b = c;
	}
	/* Narrow reads are slices of the same counter. */
	uint32_t lo = pm_read(f->pm, PM_TMR, 2), full = tmr(f->pm);
	assert_true(lo <= 0xffff);
	assert_true(pm_read(f->pm, PM_TMR + 3, 1) <= 0xff);
	/* Read back to back: the low 16 bits moved by much less than a wrap. */
	assert_true((uint16_t)(full - lo) < 0x4000);
	/* The timer is read-only. */
	pm_write(f->pm, PM_TMR, 4, 0);
	assert_true((uint32_t)(tmr(f->pm) - full) < 3579545u * 5);
}

/* ---- saved state (pm_state_ops) ---- */

#define TICKS_PER_S 3579545u

static void save_pm(struct pm *pm, struct sbuf *b)
{
	char err[128] = "";

	*b = (struct sbuf){0};
	assert_int_equal(pm_state_ops.save(pm, b, err, sizeof(err)), 0);
	assert_false(b->failed);
}

static int restore_pm(struct pm *pm, const uint8_t *p, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader r;

	sbuf_reader_init(&r, p, len);
	if (pm_state_ops.restore(pm, &r, err, errlen) < 0)
		return -1;
	return sbuf_reader_done(&r, "lpc.pm", err, errlen);
}

/* The timer count in a saved section (its last four bytes). */
static uint32_t saved_count(const struct sbuf *b)
{
	return (uint32_t)unit_le(b->data + b->len - 4, 4);
}

static void test_state_round_trip(void **state)
{
	struct fixture *f = *state;
	struct wire w2 = {0};
	struct pm *pm2 = pm_create(&ops, &w2);
	struct sbuf b;
	char err[128] = "";
	uint32_t t;

	assert_non_null(pm2);
	pm_write(f->pm, PM1_EN, 2, PWRBTN);
	assert_true(pm_power_button(f->pm));
	pm_write(f->pm, RESET, 1, 0x02);
	assert_true(f->w.sci);
	save_pm(f->pm, &b);
	assert_int_equal(restore_pm(pm2, b.data, b.len, err, sizeof(err)), 0);
	/* The SCI is driven to the saved level. */
	assert_true(w2.sci);
	assert_int_equal(w2.sci_calls, 1);
	assert_int_equal(pm_read(pm2, PM1_STS, 2), PWRBTN);
	assert_int_equal(pm_read(pm2, PM1_EN, 2), PWRBTN);
	assert_int_equal(pm_read(pm2, PM1_CNT, 2), pm_read(f->pm, PM1_CNT, 2));
	assert_int_equal(pm_read(pm2, RESET, 1), 0x02);
	/* The timer goes on from the saved count. */
	t = tmr(pm2);
	assert_true((uint32_t)(t - saved_count(&b)) < TICKS_PER_S);
	/* It behaves as before: acknowledging drops the SCI, S5 powers off. */
	pm_write(pm2, PM1_STS, 2, PWRBTN);
	assert_false(w2.sci);
	pm_write(pm2, PM1_CNT, 2, SLP_TYP(5) | 0x2000);
	assert_int_equal(w2.nexits, 1);
	assert_int_equal(w2.exits[0], KHYVE_EXIT_POWEROFF);
	sbuf_free(&b);
	pm_free(pm2);
}

/* The distance from a to b on the 32-bit counter's circle. */
static uint32_t tick_distance(uint32_t a, uint32_t b)
{
	uint32_t d = b - a;

	return d < 0x80000000u ? d : (uint32_t)-d;
}

/* Regression for the clocksource: a restored timer neither restarts at 0
 * nor jumps to where this host's clock puts a fresh one. */
static void test_state_timer_resumes(void **state)
{
	struct fixture *f = *state;
	struct wire w2 = {0};
	struct pm *pm2 = pm_create(&ops, &w2);
	struct timespec ts = {0, 2 * 1000 * 1000};
	struct sbuf b, b2;
	char err[128] = "";
	uint32_t host = tmr(f->pm), target = host + 0x55555555u, t;

	assert_non_null(pm2);
	if (tick_distance(target, 0) < 0x10000000u)
		target = host + 0xaaaaaaaau;
	/* A section from another machine whose timer stood at `target`. */
	save_pm(f->pm, &b);
	unit_put_le(b.data + b.len - 4, target, 4);
	assert_int_equal(restore_pm(f->pm, b.data, b.len, err, sizeof(err)), 0);
	t = tmr(f->pm);
	assert_true((uint32_t)(t - target) < TICKS_PER_S);
	assert_true(tick_distance(t, host) > 0x10000000u); /* not the old base */
	assert_true(tick_distance(t, 0) > 0x10000000u);    /* not from 0 */
	/* Saved again and restored into a fresh device: still continuous. */
	nanosleep(&ts, NULL);
	save_pm(f->pm, &b2);
	assert_true((uint32_t)(saved_count(&b2) - t) >= 7000); /* it kept counting */
	assert_int_equal(restore_pm(pm2, b2.data, b2.len, err, sizeof(err)), 0);
	t = tmr(pm2);
	assert_true((uint32_t)(t - saved_count(&b2)) < TICKS_PER_S);
	/* Monotonic over reads after the restore. */
	for (int i = 0; i < 100; i++) {
		uint32_t n = tmr(pm2);

		assert_true((uint32_t)(n - t) < 0x80000000u);
		t = n;
	}
	sbuf_free(&b);
	sbuf_free(&b2);
	pm_free(pm2);
}

static void test_state_hostile(void **state)
{
	struct fixture *f = *state;
	struct wire w2 = {0};
	struct pm *pm2 = pm_create(&ops, &w2);
	struct sbuf b;
	uint8_t bad[32];
	char err[128];

	assert_non_null(pm2);
	pm_write(f->pm, PM1_EN, 2, PWRBTN);
	save_pm(f->pm, &b);
	assert_int_equal(b.len, 14);
	for (size_t n = 0; n < b.len; n++)
		assert_int_equal(restore_pm(pm2, b.data, n, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	bad[0] = 9;
	assert_int_equal(restore_pm(pm2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "version 9");
	/* SLP_EN in the control word (offset 6): never left set. */
	memcpy(bad, b.data, b.len);
	bad[7] |= 0x20;
	assert_int_equal(restore_pm(pm2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "SLP_EN");
	/* An SCI level that status and enable do not give (offset 9). */
	memcpy(bad, b.data, b.len);
	bad[9] = 1;
	assert_int_equal(restore_pm(pm2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "sci_level");
	/* RST_CPU in the reset register (offset 8). */
	memcpy(bad, b.data, b.len);
	bad[8] = 0x06;
	assert_int_equal(restore_pm(pm2, bad, b.len, err, sizeof(err)), -1);
	/* Nothing was applied. */
	assert_int_equal(pm_read(pm2, PM1_EN, 2), 0);
	assert_int_equal(w2.sci_calls, 0);
	assert_int_equal(w2.nexits, 0);
	sbuf_free(&b);
	pm_free(pm2);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_reset_state),
	    T(test_power_button_not_enabled),
	    T(test_power_button_enabled),
	    T(test_status_write_one_to_clear),
	    T(test_access_widths),
	    T(test_s5_poweroff),
	    T(test_s5_byte_writes),
	    T(test_other_sleep_types),
	    T(test_reset_register),
	    T(test_reset_register_bit2_only),
	    T(test_pm_timer),
	    T(test_state_round_trip),
	    T(test_state_timer_resumes),
	    T(test_state_hostile),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
