/* Unit tests for rc.conf-style files (src/vm/rcconf.h). */
#include "unit.h"

#include <stdlib.h>
#include <unistd.h>

#include "vm/rcconf.h"

static struct rcconf *parse_ok(const char *text)
{
	char err[256] = "";
	struct rcconf *rc = rcconf_parse(text, "t.conf", err, sizeof(err));

	if (!rc)
		fail_msg("parse failed: %s", err);
	return rc;
}

/* vm-bhyve's documented forms: quotes of both kinds, bare words,
 * '#' comments anywhere, indented lines ignored. */
static void test_forms(void **state)
{
	(void)state;
	struct rcconf *rc = parse_ok("# a comment\n"
	                             "loader=\"uefi\"\n"
	                             "cpu=2\n"
	                             "memory='4G'\n"
	                             "network0_switch=\"public\" # trailing comment\n"
	                             "  disk0_name=\"ignored.img\"\n"
	                             "graphics=\"yes#no\"\n"
	                             "\n"
	                             "cpu=4\n");
	assert_string_equal(rcconf_get(rc, "loader"), "uefi");
	assert_string_equal(rcconf_get(rc, "cpu"), "2"); /* the first wins, as in vm-bhyve */
	assert_string_equal(rcconf_get(rc, "memory"), "4G");
	assert_string_equal(rcconf_get(rc, "network0_switch"), "public");
	assert_null(rcconf_get(rc, "disk0_name"));
	assert_string_equal(rcconf_get(rc, "graphics"), "yes");
	assert_int_equal(rcconf_count(rc), 5);
	assert_string_equal(rcconf_key_at(rc, 0), "loader");
	assert_string_equal(rcconf_key_at(rc, 1), "cpu");
	rcconf_free(rc);
}

static void test_escapes_and_empty(void **state)
{
	(void)state;
	struct rcconf *rc = parse_ok("a=\"x\\\"y\"\nb=\"\"\nc=\n");
	assert_string_equal(rcconf_get(rc, "a"), "x\"y");
	assert_string_equal(rcconf_get(rc, "b"), "");
	assert_string_equal(rcconf_get(rc, "c"), "");
	assert_string_equal(rcconf_get_default(rc, "d", "def"), "def");
	rcconf_free(rc);
}

static void expect_error(const char *text, const char *want)
{
	char err[256] = "";
	struct rcconf *rc = rcconf_parse(text, "bad.conf", err, sizeof(err));

	assert_null(rc);
	if (!strstr(err, want))
		fail_msg("error '%s' lacks '%s'", err, want);
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("cpu=1\nno equals here\n", "bad.conf:2:");
	expect_error("1cpu=1\n", "bad setting name");
	expect_error("cpu=\"1\n", "missing closing");
	expect_error("cpu=1 2\n", "text after the value");
	expect_error("cpu=$(reboot)\n", "unquoted special");
	expect_error("cpu='x\n", "missing closing");
}

static void test_yes(void **state)
{
	(void)state;
	struct rcconf *rc = parse_ok("a=YES\nb=on\nc=no\nd=1\ne=maybe\n");
	assert_true(rcconf_get_yes(rc, "a"));
	assert_true(rcconf_get_yes(rc, "b"));
	assert_false(rcconf_get_yes(rc, "c"));
	assert_true(rcconf_get_yes(rc, "d"));
	assert_false(rcconf_get_yes(rc, "e"));
	assert_false(rcconf_get_yes(rc, "missing"));
	rcconf_free(rc);
}

/* Setting keeps comments and the other lines exactly. */
static void test_set_keeps_lines(void **state)
{
	(void)state;
	struct rcconf *rc = parse_ok("# head\ncpu=1\n  odd line\nmemory=\"1G\"\n");
	char *text;

	assert_int_equal(rcconf_set(rc, "cpu", "2"), 0);
	assert_int_equal(rcconf_set(rc, "uuid", "abc"), 0);
	assert_int_equal(rcconf_set(rc, "memory", NULL), 0);
	assert_int_equal(rcconf_set(rc, "bad key", "x"), -1);
	assert_int_equal(rcconf_set(rc, "cpu", "a\"b"), -1);
	assert_int_equal(rcconf_set(rc, "cpu", "$(x)"), -1);
	text = rcconf_format(rc);
	assert_string_equal(text, "# head\ncpu=\"2\"\n  odd line\nuuid=\"abc\"\n");
	free(text);
	rcconf_free(rc);
}

/* Setting a key given twice keeps one line, where the first was. */
static void test_set_duplicate(void **state)
{
	(void)state;
	struct rcconf *rc = parse_ok("memory=1G\ncpu=1\nmemory=2G\n");
	char *text;

	assert_string_equal(rcconf_get(rc, "memory"), "1G");
	assert_int_equal(rcconf_set(rc, "memory", "4G"), 0);
	text = rcconf_format(rc);
	assert_string_equal(text, "memory=\"4G\"\ncpu=1\n");
	free(text);
	rcconf_free(rc);
}

static void test_save_and_load(void **state)
{
	(void)state;
	char dir[] = "/tmp/rcconf.XXXXXX", path[64], err[256];
	struct rcconf *rc = parse_ok("a=\"1\"\n"), *back;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/x.conf", dir);
	assert_int_equal(rcconf_save(rc, path, err, sizeof(err)), 0);
	back = rcconf_load(path, err, sizeof(err));
	assert_non_null(back);
	assert_string_equal(rcconf_get(back, "a"), "1");
	rcconf_free(back);
	unlink(path);
	assert_null(rcconf_load(path, err, sizeof(err)));
	assert_non_null(strstr(err, "No such file"));
	snprintf(path, sizeof(path), "%s/missing/x.conf", dir);
	assert_int_equal(rcconf_save(rc, path, err, sizeof(err)), -1);
	rmdir(dir);
	rcconf_free(rc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_forms),           cmocka_unit_test(test_escapes_and_empty),
	    cmocka_unit_test(test_errors),          cmocka_unit_test(test_yes),
	    cmocka_unit_test(test_set_keeps_lines), cmocka_unit_test(test_set_duplicate),
	    cmocka_unit_test(test_save_and_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
