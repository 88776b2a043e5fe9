/*
 * Unit tests for the device option parser (src/lib/devopts.h): items,
 * the positional first item, and errors that name the bad key.
 */
#include "unit.h"

#include "lib/config.h"
#include "lib/devopts.h"

static char err[256];
static struct config_node *node;

static int fresh_node(void **state)
{
	(void)state;
	config_reset();
	node = config_create_node("pci.0.5.0");
	memset(err, 0, sizeof(err));
	return node != NULL ? 0 : -1;
}

static const char *get(const char *key)
{
	return config_node_get(node, key);
}

static void test_key_values(void **state)
{
	(void)state;
	assert_int_equal(
	    devopts_parse(node, ",a=1,,flag,,z=x=y,a=2,", NULL, "device", err, sizeof(err)), 0);
	assert_string_equal(get("a"), "2");
	assert_string_equal(get("flag"), "true");
	assert_string_equal(get("z"), "x=y");
	assert_int_equal(devopts_parse(node, "empty=", NULL, "device", err, sizeof(err)), 0);
	assert_string_equal(get("empty"), "");
	assert_int_equal(devopts_parse(node, "sub.key=v", NULL, "device", err, sizeof(err)), 0);
	assert_string_equal(get("sub.key"), "v");
}

static void test_nothing(void **state)
{
	(void)state;
	assert_int_equal(devopts_parse(node, NULL, "path", "disk", err, sizeof(err)), 0);
	assert_int_equal(devopts_parse(node, "", "path", "disk", err, sizeof(err)), 0);
	assert_null(get("path"));
	assert_string_equal(err, "");
}

static void test_positional(void **state)
{
	(void)state;
	assert_int_equal(
	    devopts_parse(node, "/tmp/d.img,ro,sectorsize=4096", "path", "disk", err, sizeof(err)),
	    0);
	assert_string_equal(get("path"), "/tmp/d.img");
	assert_string_equal(get("ro"), "true");
	assert_string_equal(get("sectorsize"), "4096");
	/* Only the first item; empty items before it do not count. */
	assert_int_equal(
	    devopts_parse(node, ",,tap3,nocache", "backend", "network", err, sizeof(err)), 0);
	assert_string_equal(get("backend"), "tap3");
	assert_string_equal(get("nocache"), "true");
	/* A first item with '=' is an ordinary key. */
	assert_int_equal(devopts_parse(node, "mac=58:9c:fc:00:00:01,tap9", "backend", "network",
	                               err, sizeof(err)),
	                 0);
	assert_string_equal(get("mac"), "58:9c:fc:00:00:01");
	assert_string_equal(get("backend"), "tap3");
	assert_string_equal(get("tap9"), "true");
	/* Without a positional key a bare first item is a flag. */
	assert_int_equal(devopts_parse(node, "bare", NULL, "device", err, sizeof(err)), 0);
	assert_string_equal(get("bare"), "true");
}

static void test_bad_keys(void **state)
{
	(void)state;
	assert_int_equal(
	    devopts_parse(node, "ok=1,bad!key=2,after=3", NULL, "network", err, sizeof(err)), -1);
	assert_string_equal(err, "bad network option 'bad!key'");
	assert_string_equal(get("ok"), "1");
	assert_null(get("after"));
	memset(err, 0, sizeof(err));
	assert_int_equal(devopts_parse(node, "x,=v", "path", "disk", err, sizeof(err)), -1);
	assert_string_equal(err, "bad disk option ''");
	/* A value cannot grow children. */
	assert_int_equal(devopts_parse(node, "ok.sub=1", NULL, "device", err, sizeof(err)), -1);
	assert_string_equal(err, "bad device option 'ok.sub'");
	assert_string_equal(get("ok"), "1");
}

static void test_key_patterns(void **state)
{
	(void)state;
	assert_true(devopts_key_matches("ro", "ro"));
	assert_false(devopts_key_matches("ro", "readonly"));
	assert_false(devopts_key_matches("ro", "r"));
	assert_true(devopts_key_matches("port.*.path", "port.0.path"));
	assert_true(devopts_key_matches("port.*.path", "port.31.path"));
	/* A wildcard stays inside one segment. */
	assert_false(devopts_key_matches("port.*.path", "port.1.x.path"));
	assert_false(devopts_key_matches("*", "a.b"));
	assert_true(devopts_key_matches("com[1-4].path", "com4.path"));
	assert_false(devopts_key_matches("com[1-4].path", "com5.path"));
}

static void count_key(const char *key, void *arg)
{
	size_t *n = arg;

	(void)key;
	(*n)++;
}

static void test_check_keys(void **state)
{
	static const char *const keys[] = {"device", "path", "ro", "port.*.type"};
	size_t seen = 0;

	(void)state;
	assert_int_equal(
	    devopts_parse(node, "/d.img,ro,port.0.type=hd", "path", "disk", err, sizeof(err)), 0);
	assert_int_equal(devopts_check_keys(node, keys, 4, err, sizeof(err)), 0);
	/* A misspelled option (bhyve users write readonly for ro). */
	assert_int_equal(devopts_parse(node, "readonly", NULL, "disk", err, sizeof(err)), 0);
	assert_int_equal(devopts_check_keys(node, keys, 4, err, sizeof(err)), -1);
	assert_string_equal(err, "unknown option 'readonly'");
	assert_int_equal(devopts_parse(node, "port.1.typo=x", NULL, "disk", err, sizeof(err)), 0);
	/* Nested values are checked too, and every unknown one is reported. */
	assert_int_equal(devopts_each_unknown(node, keys, 4, count_key, &seen), 2);
	assert_int_equal(seen, 2);
	assert_int_equal(devopts_each_unknown(NULL, keys, 4, count_key, &seen), 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, fresh_node)
	const struct CMUnitTest tests[] = {
	    T(test_key_values), T(test_nothing),      T(test_positional),
	    T(test_bad_keys),   T(test_key_patterns), T(test_check_keys),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
