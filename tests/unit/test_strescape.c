/* Unit tests for escaping user strings in messages (src/lib/strescape.h). */
#include "unit.h"

#include "lib/log.h"
#include "lib/strescape.h"

static void test_escapes(void **state)
{
	char buf[64];

	(void)state;
	assert_string_equal(str_escape_controls(buf, sizeof(buf), "plain vm-1"), "plain vm-1");
	assert_string_equal(str_escape_controls(buf, sizeof(buf), "a\nb\r\tc"), "a\\nb\\r\\tc");
	assert_string_equal(str_escape_controls(buf, sizeof(buf), "\033[31mred"), "\\e[31mred");
	assert_string_equal(str_escape_controls(buf, sizeof(buf), "\001\177"), "\\x01\\x7f");
	/* UTF-8 passes unchanged. */
	assert_string_equal(str_escape_controls(buf, sizeof(buf), "gr\xc3\xbc\xc3\x9f"),
	                    "gr\xc3\xbc\xc3\x9f");
}

static void test_truncation(void **state)
{
	char buf[6];

	(void)state;
	/* Never half an escape: "abcd\\n" would need 6 bytes and a NUL. */
	assert_string_equal(str_escape_controls(buf, sizeof(buf), "abcd\ne"), "abcd");
	assert_string_equal(str_escape_controls(buf, sizeof(buf), "abc\nd"), "abc\\n");
	assert_string_equal(str_escape_controls(buf, 1, "abc"), "");
	assert_ptr_equal(str_escape_controls(buf, 0, "abc"), buf);
}

/* khyve's messages: one line whatever the name in them holds. */
static void test_log_line(void **state)
{
	char path[] = "/tmp/khyve-log-XXXXXX", buf[256] = "";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	FILE *f;

	(void)state;
	assert_true(fd >= 0 && saved >= 0);
	fflush(stderr);
	dup2(fd, STDERR_FILENO);
	log_err("cannot set the VM name '%s'", "a\nb\033[2J");
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	f = fdopen(fd, "r");
	assert_non_null(f);
	rewind(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	assert_string_equal(buf, "khyve: cannot set the VM name 'a\\nb\\e[2J'\n");
	assert_null(fgets(buf, sizeof(buf), f)); /* nothing after the one line */
	fclose(f);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_escapes),
	    cmocka_unit_test(test_truncation),
	    cmocka_unit_test(test_log_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
