/* Unit tests for the tap back end's name check (src/backend/tap.h). */
#include "unit.h"

#include "backend/tap.h"

static void test_tap_names(void **state)
{
	(void)state;
	assert_true(tap_name_valid("tap0"));
	assert_true(tap_name_valid("vmnet3"));
	assert_true(tap_name_valid("vmt-newbie-0"));
	assert_true(tap_name_valid("123456789012345")); /* 15: IFNAMSIZ - 1 */
	assert_false(tap_name_valid("1234567890123456"));
	assert_false(tap_name_valid(NULL));
	assert_false(tap_name_valid(""));
	assert_false(tap_name_valid("."));
	assert_false(tap_name_valid(".."));
	assert_false(tap_name_valid("a/b"));
	assert_false(tap_name_valid("netmap:vale0"));
	assert_false(tap_name_valid("tap 0"));
	assert_false(tap_name_valid("tap\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tap_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
