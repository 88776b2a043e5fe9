/* Unit tests for the US-layout keysym table (src/lib/keymap.h). */
#include "unit.h"

#include "lib/keymap.h"

/* Every printable ASCII character has a key, with the Shift state a US
 * keyboard needs for it. */
static void test_keymap_ascii(void **state)
{
	static const struct {
		char c;
		uint16_t qnum;
		enum keymap_shift shift;
	} want[] = {
	    {'a', 0x1e, KEYMAP_SHIFT_OFF}, {'A', 0x1e, KEYMAP_SHIFT_ON},
	    {'z', 0x2c, KEYMAP_SHIFT_OFF}, {'q', 0x10, KEYMAP_SHIFT_OFF},
	    {'1', 0x02, KEYMAP_SHIFT_OFF}, {'!', 0x02, KEYMAP_SHIFT_ON},
	    {'0', 0x0b, KEYMAP_SHIFT_OFF}, {')', 0x0b, KEYMAP_SHIFT_ON},
	    {'-', 0x0c, KEYMAP_SHIFT_OFF}, {'_', 0x0c, KEYMAP_SHIFT_ON},
	    {'~', 0x29, KEYMAP_SHIFT_ON},  {'|', 0x2b, KEYMAP_SHIFT_ON},
	    {'"', 0x28, KEYMAP_SHIFT_ON},  {'?', 0x35, KEYMAP_SHIFT_ON},
	    {' ', 0x39, KEYMAP_SHIFT_ANY},
	};
	struct keymap_key k;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(want); i++) {
		if (!keymap_lookup((unsigned char)want[i].c, &k))
			fail_msg("no key for '%c'", want[i].c);
		assert_int_equal(k.qnum, want[i].qnum);
		assert_int_equal(k.shift, want[i].shift);
	}
	for (uint32_t c = 0x20; c < 0x7f; c++) {
		if (!keymap_lookup(c, &k) || k.qnum == 0 || k.qnum > 0xff)
			fail_msg("printable 0x%x has no key", c);
	}
}

static void test_keymap_special(void **state)
{
	static const struct {
		const char *name;
		uint16_t qnum;
	} want[] = {
	    {"Return", 0x1c},    {"Escape", 0x01}, {"Up", 0xc8},        {"Right", 0xcd},
	    {"F1", 0x3b},        {"F12", 0x58},    {"KP_Enter", 0x9c},  {"Control_R", 0x9d},
	    {"Pause", 0xc6},     {"Delete", 0xd3}, {"KP_0", 0x52},      {"Shift_L", 0x2a},
	    {"BackSpace", 0x0e}, {"Tab", 0x0f},    {"Page_Down", 0xd1}, {"Super_L", 0xdb},
	};
	struct keymap_key k;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(want); i++) {
		uint32_t ks = keymap_keysym_by_name(want[i].name);
		if (ks == 0 || !keymap_lookup(ks, &k))
			fail_msg("no key for %s", want[i].name);
		assert_int_equal(k.qnum, want[i].qnum);
		assert_int_equal(k.shift, KEYMAP_SHIFT_ANY);
	}
}

static void test_keymap_unknown(void **state)
{
	struct keymap_key k;

	(void)state;
	assert_false(keymap_lookup(0xe9, &k));   /* eacute: not on a US layout */
	assert_false(keymap_lookup(0x20ac, &k)); /* EuroSign */
	assert_false(keymap_lookup(0, &k));
	assert_false(keymap_lookup(0xffffffff, &k));
	assert_int_equal(keymap_keysym_by_name("NoSuchKey"), 0);
	assert_int_equal(keymap_keysym_by_name(""), 0);
	assert_int_equal(keymap_keysym_by_name("space"), ' ');
	assert_int_equal(keymap_keysym_by_name("a"), 'a');
	assert_int_equal(keymap_keysym_of_char('\n'), 0xff0d);
	assert_int_equal(keymap_keysym_of_char(0x80), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keymap_ascii),
	    cmocka_unit_test(test_keymap_special),
	    cmocka_unit_test(test_keymap_unknown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
