/*
 * vm web's pure request handling (src/web/http_util.c): route matching,
 * static paths against traversal, percent-decoding and query strings,
 * cookies, CSRF and Origin comparison, the login rate limiter with an
 * injected clock, and roles from group lists.
 */
#include "unit.h"

#include "web/http_util.h"

static int fake_handler(struct web_req *rq, struct web_resp *rs)
{
	(void)rq, (void)rs;
	return 0;
}

static const struct web_route table[] = {
    {"POST", "/api/login", WEB_PUBLIC, 4096, fake_handler},
    {"GET", "/api/guests/", 0, 0, fake_handler},
    {"POST", "/api/guests/", WEB_CHANGE, 16384, fake_handler},
    {"GET", "/metrics", WEB_METRICS_TOKEN, 0, fake_handler},
    {NULL, NULL, 0, 0, NULL},
};

static void test_route_exact(void **state)
{
	const char *arg = "unset";

	(void)state;
	assert_ptr_equal(web_route_match(table, "POST", "/api/login", &arg), &table[0]);
	assert_string_equal(arg, "");
	assert_null(web_route_match(table, "GET", "/api/login", &arg));
	assert_null(web_route_match(table, "POST", "/api/login/x", &arg));
	assert_null(web_route_match(table, "POST", "/api/loginx", &arg));
	assert_ptr_equal(web_route_match(table, "GET", "/metrics", &arg), &table[3]);
	assert_null(web_route_match(table, "GET", "/metrics/", &arg));
}

static void test_route_prefix(void **state)
{
	const char *arg = NULL;

	(void)state;
	assert_ptr_equal(web_route_match(table, "GET", "/api/guests/web1", &arg), &table[1]);
	assert_string_equal(arg, "web1");
	assert_ptr_equal(web_route_match(table, "POST", "/api/guests/web1/start", &arg), &table[2]);
	assert_string_equal(arg, "web1/start");
	/* The list itself: the prefix without its '/'. */
	assert_ptr_equal(web_route_match(table, "GET", "/api/guests", &arg), &table[1]);
	assert_string_equal(arg, "");
	assert_ptr_equal(web_route_match(table, "GET", "/api/guests/", &arg), &table[1]);
	assert_string_equal(arg, "");
	assert_null(web_route_match(table, "GET", "/api/guestsx", &arg));
	assert_null(web_route_match(table, "GET", "/api/guest", &arg));
	assert_null(web_route_match(table, "PUT", "/api/guests/x", &arg));
	assert_null(web_route_match(NULL, "GET", "/", &arg));
}

static void test_static_paths(void **state)
{
	static const char *const hostile[] = {
	    "/../etc/passwd",
	    "/..",
	    "/a/../b",
	    "/a//b",
	    "//etc/passwd",
	    "/.hidden",
	    "/a/.git/config",
	    "/a\\b",
	    "/a\\..\\b",
	    "/./a",
	    "/a\x01",
	    "a/b",
	    "",
	    "/a\x7f",
	};
	char rel[PATH_MAX];

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(hostile); i++)
		if (web_static_rel(hostile[i], rel, sizeof(rel)) == 0)
			fail_msg("'%s' was accepted as '%s'", hostile[i], rel);
	assert_int_equal(web_static_rel("/", rel, sizeof(rel)), 0);
	assert_string_equal(rel, "index.html");
	assert_int_equal(web_static_rel("/core/rfb.js", rel, sizeof(rel)), 0);
	assert_string_equal(rel, "core/rfb.js");
	assert_int_equal(web_static_rel("/vendor/", rel, sizeof(rel)), 0);
	assert_string_equal(rel, "vendor/index.html");
	assert_int_equal(web_static_rel("/a.b.c", rel, sizeof(rel)), 0);
	assert_string_equal(rel, "a.b.c");
	/* ".." anywhere, even inside a name, is refused (the contract's rule). */
	assert_int_equal(web_static_rel("/a.b..c", rel, sizeof(rel)), -1);
	/* Too long for rel. */
	assert_int_equal(web_static_rel("/abcdefgh", rel, 8), -1);
	assert_int_equal(web_static_rel("/", rel, 10), -1);
}

static void test_url_decode(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(web_url_decode("a%2e%2E%2fb", 11, out, sizeof(out), false), 0);
	assert_string_equal(out, "a../b");
	/* An encoded NUL, a bad or cut escape. */
	assert_int_equal(web_url_decode("a%00b", 5, out, sizeof(out), false), -1);
	assert_int_equal(web_url_decode("a%zzb", 5, out, sizeof(out), false), -1);
	assert_int_equal(web_url_decode("a%2", 3, out, sizeof(out), false), -1);
	assert_int_equal(web_url_decode("a%", 2, out, sizeof(out), false), -1);
	assert_int_equal(web_url_decode("a+b", 3, out, sizeof(out), true), 0);
	assert_string_equal(out, "a b");
	assert_int_equal(web_url_decode("a+b", 3, out, sizeof(out), false), 0);
	assert_string_equal(out, "a+b");
	assert_int_equal(web_url_decode("abcd", 4, out, 4, false), -1);
	assert_int_equal(web_url_decode("abc", 3, out, 4, false), 0);
	assert_int_equal(web_url_decode("", 0, out, 1, false), 0);
	assert_string_equal(out, "");
}

static void test_query_get(void **state)
{
	char out[16];

	(void)state;
	assert_int_equal(web_query_get("name=a.iso&x=1", "name", out, sizeof(out)), 0);
	assert_string_equal(out, "a.iso");
	assert_int_equal(web_query_get("x=1&name=b%2Biso", "name", out, sizeof(out)), 0);
	assert_string_equal(out, "b+iso");
	assert_int_equal(web_query_get("q=two+words", "q", out, sizeof(out)), 0);
	assert_string_equal(out, "two words");
	assert_int_equal(web_query_get("flag&x=1", "flag", out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(web_query_get("names=a", "name", out, sizeof(out)), -1);
	assert_int_equal(web_query_get("xname=a", "name", out, sizeof(out)), -1);
	assert_int_equal(web_query_get("", "name", out, sizeof(out)), -1);
	assert_int_equal(web_query_get("name=%00", "name", out, sizeof(out)), -1);
	assert_int_equal(web_query_get("name=0123456789abcdef", "name", out, sizeof(out)), -1);
}

static void test_cookie(void **state)
{
	char out[70];

	(void)state;
	assert_int_equal(
	    web_cookie_get("a=1; khyve_session=abc; b=2", "khyve_session", out, sizeof(out)), 0);
	assert_string_equal(out, "abc");
	assert_int_equal(web_cookie_get("khyve_session=xyz", "khyve_session", out, sizeof(out)), 0);
	assert_string_equal(out, "xyz");
	assert_int_equal(
	    web_cookie_get("xkhyve_session=1; khyve_sessionx=2", "khyve_session", out, sizeof(out)),
	    -1);
	assert_int_equal(web_cookie_get("", "khyve_session", out, sizeof(out)), -1);
	assert_int_equal(web_cookie_get("khyve_session=abcdef", "khyve_session", out, 4), -1);
}

static void test_secret_and_origin(void **state)
{
	(void)state;
	assert_true(web_secret_equal("abc", "abc"));
	assert_false(web_secret_equal("abc", "abd"));
	assert_false(web_secret_equal("abc", "ab"));
	assert_false(web_secret_equal("", ""));
	assert_false(web_secret_equal("abc", ""));
	assert_true(web_origin_ok("https://127.0.0.1:8006", "127.0.0.1:8006"));
	assert_false(web_origin_ok("http://127.0.0.1:8006", "127.0.0.1:8006"));
	assert_false(web_origin_ok("https://evil.example", "127.0.0.1:8006"));
	assert_false(web_origin_ok("https://127.0.0.1:8006.evil", "127.0.0.1:8006"));
	assert_false(web_origin_ok("https://", ""));
	assert_false(web_origin_ok("null", "127.0.0.1:8006"));
}

static void test_peer_plain(void **state)
{
	char a[64] = "::ffff:127.0.0.1", b[64] = "::1", c[64] = "::ffff:1:2", d[64] = "10.0.0.1";

	(void)state;
	web_peer_plain(a);
	web_peer_plain(b);
	web_peer_plain(c);
	web_peer_plain(d);
	assert_string_equal(a, "127.0.0.1");
	assert_string_equal(b, "::1");
	assert_string_equal(c, "::ffff:1:2");
	assert_string_equal(d, "10.0.0.1");
}

static void test_random_hex(void **state)
{
	char a[65], b[65];

	(void)state;
	assert_int_equal(web_random_hex(a, 32), 0);
	assert_int_equal(web_random_hex(b, 32), 0);
	assert_int_equal(strlen(a), 64);
	assert_int_equal(strspn(a, "0123456789abcdef"), 64);
	assert_string_not_equal(a, b);
}

static void test_ratelimit(void **state)
{
	struct web_ratelimit *rl = calloc(1, sizeof(*rl));
	time_t t0 = 1000000;

	(void)state;
	assert_non_null(rl);
	for (int i = 0; i < WEB_RL_FAILS - 1; i++) {
		web_rl_fail(rl, "10.0.0.1", t0 + i);
		assert_int_equal(web_rl_wait(rl, "10.0.0.1", t0 + i), 0);
	}
	web_rl_fail(rl, "10.0.0.1", t0 + 10);
	/* Five failures within a minute: locked until the first's minute ends. */
	assert_int_equal(web_rl_wait(rl, "10.0.0.1", t0 + 10), 50);
	assert_int_equal(web_rl_wait(rl, "10.0.0.1", t0 + 59), 1);
	assert_int_equal(web_rl_wait(rl, "10.0.0.2", t0 + 10), 0);
	/* The window slides: at t0+60 the oldest failure has aged out. */
	assert_int_equal(web_rl_wait(rl, "10.0.0.1", t0 + 60), 0);
	web_rl_fail(rl, "10.0.0.1", t0 + 61);
	assert_int_equal(web_rl_wait(rl, "10.0.0.1", t0 + 61), 0);
	for (int i = 1; i < WEB_RL_FAILS; i++)
		web_rl_fail(rl, "10.0.0.1", t0 + 61 + i);
	assert_int_equal(web_rl_wait(rl, "10.0.0.1", t0 + 65), 56);
	/* A clock that went back locks no one out for long. */
	assert_int_equal(web_rl_wait(rl, "10.0.0.1", t0 - 100), 0);
	free(rl);
}

static void test_ratelimit_many_peers(void **state)
{
	struct web_ratelimit *rl = calloc(1, sizeof(*rl));
	char peer[32];

	(void)state;
	assert_non_null(rl);
	for (int i = 0; i < WEB_RL_FAILS; i++)
		web_rl_fail(rl, "192.0.2.1", 100);
	assert_true(web_rl_wait(rl, "192.0.2.1", 100) > 0);
	/* More peers than slots: the stalest is forgotten, the table stays bounded. */
	for (int i = 0; i < WEB_RL_PEERS; i++) {
		snprintf(peer, sizeof(peer), "198.51.100.%d", i);
		web_rl_fail(rl, peer, 101 + i);
	}
	assert_int_equal(web_rl_wait(rl, "192.0.2.1", 110), 0);
	free(rl);
}

/* Regression (found by fuzz_web): an empty peer name (an empty name marked a free entry)
 * and one longer than an entry holds (stored cut, looked up whole) were never
 * found again, so never locked out, and each failure took a new entry; a
 * clock that jumped far overflowed now - oldest. */
static void test_ratelimit_odd_peers(void **state)
{
	struct web_ratelimit *rl = calloc(1, sizeof(*rl));
	char longpeer[200];
	int used = 0;

	(void)state;
	assert_non_null(rl);
	memset(longpeer, 'a', sizeof(longpeer) - 1);
	longpeer[sizeof(longpeer) - 1] = '\0';
	for (int i = 0; i < WEB_RL_FAILS; i++) {
		web_rl_fail(rl, "", 100);
		web_rl_fail(rl, longpeer, 100);
	}
	assert_int_equal(web_rl_wait(rl, "", 100), WEB_RL_WINDOW);
	assert_int_equal(web_rl_wait(rl, longpeer, 100), WEB_RL_WINDOW);
	for (int i = 0; i < WEB_RL_PEERS; i++)
		used += rl->e[i].peer[0] != '\0';
	assert_int_equal(used, 2);
	/* Failures near the ends of time_t: no overflow, no lock-out from the past. */
	for (int i = 0; i < WEB_RL_FAILS; i++)
		web_rl_fail(rl, "192.0.2.9", (time_t)INT64_MIN);
	assert_int_equal(web_rl_wait(rl, "192.0.2.9", (time_t)INT64_MAX), 0);
	assert_int_equal(web_rl_wait(rl, "192.0.2.9", (time_t)INT64_MIN + 1), WEB_RL_WINDOW - 1);
	free(rl);
}

static void test_roles(void **state)
{
	const char *admin[] = {"users", "sudo"};
	const char *wheel[] = {"wheel"};
	const char *viewer[] = {"khyve", "users"};
	const char *both[] = {"khyve", "sudo"};
	const char *none[] = {"users", "khyvex", "sudoers"};

	(void)state;
	assert_int_equal(web_role_from_groups("root", NULL, 0), WEB_ROLE_ADMIN);
	assert_int_equal(web_role_from_groups("ann", admin, 2), WEB_ROLE_ADMIN);
	assert_int_equal(web_role_from_groups("ann", wheel, 1), WEB_ROLE_ADMIN);
	assert_int_equal(web_role_from_groups("ann", viewer, 2), WEB_ROLE_VIEWER);
	assert_int_equal(web_role_from_groups("ann", both, 2), WEB_ROLE_ADMIN);
	assert_int_equal(web_role_from_groups("ann", none, 3), WEB_ROLE_NONE);
	assert_int_equal(web_role_from_groups("ann", NULL, 0), WEB_ROLE_NONE);
}

static void test_content_types(void **state)
{
	(void)state;
	assert_string_equal(web_content_type("/x/index.html"), "text/html; charset=utf-8");
	assert_string_equal(web_content_type("a.mjs"), "text/javascript; charset=utf-8");
	assert_string_equal(web_content_type("a.js"), "text/javascript; charset=utf-8");
	assert_string_equal(web_content_type("a.woff2"), "font/woff2");
	assert_string_equal(web_content_type("a.svg"), "image/svg+xml");
	assert_string_equal(web_content_type("a.d/b"), "application/octet-stream");
	assert_string_equal(web_content_type("README"), "application/octet-stream");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_route_exact),
	    cmocka_unit_test(test_route_prefix),
	    cmocka_unit_test(test_static_paths),
	    cmocka_unit_test(test_url_decode),
	    cmocka_unit_test(test_query_get),
	    cmocka_unit_test(test_cookie),
	    cmocka_unit_test(test_secret_and_origin),
	    cmocka_unit_test(test_peer_plain),
	    cmocka_unit_test(test_random_hex),
	    cmocka_unit_test(test_ratelimit),
	    cmocka_unit_test(test_ratelimit_many_peers),
	    cmocka_unit_test(test_ratelimit_odd_peers),
	    cmocka_unit_test(test_roles),
	    cmocka_unit_test(test_content_types),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
