/*
 * Pure helpers of vm web's HTTP layer and authentication (no libwebsockets,
 * no PAM): route matching, static-path checks, percent-decoding, cookies,
 * CSRF and Origin comparison, the login rate limiter and role mapping.
 * http.c and auth.c use them; tests/unit/test_web_http.c tests them.
 */
#ifndef KHYVE_WEB_HTTP_UTIL_H
#define KHYVE_WEB_HTTP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "web/web.h"

/* Route flag private to http.c/auth.c: needs a session, the CSRF token and
 * same Origin, but any role (POST /api/logout). */
#define WEB_CSRF (1u << 8)

/*
 * The route of `table` (NULL-method-terminated) for METHOD and PATH: a prefix
 * ending in '/' matches itself and every path below (*arg = the rest), any
 * other prefix only exactly (*arg = "").  NULL when none matches.
 */
const struct web_route *web_route_match(const struct web_route *table, const char *method,
                                        const char *path, const char **arg);

/*
 * Percent-decode `in` (len bytes) into out (outlen with the NUL); '+' becomes
 * ' ' when plus_is_space (query strings).  -1 on a bad escape, an encoded NUL
 * or when out is too small.
 */
int web_url_decode(const char *in, size_t len, char *out, size_t outlen, bool plus_is_space);

/*
 * The file a static URL path names, relative to its root, into rel: "/" ->
 * "index.html", "/a/" -> "a/index.html", "/a/b.css" -> "a/b.css".  -1 (a
 * refusal, 404) for a path not starting with '/', or with ".." anywhere,
 * "//", a backslash, a control character, or a component starting with '.'.
 */
int web_static_rel(const char *path, char *rel, size_t rellen);

/* The Content-Type for a file name by its extension (html css js mjs json png
 * svg ico woff2); "application/octet-stream" for others. */
const char *web_content_type(const char *name);

/* The value of cookie NAME in a Cookie header into out; 0, or -1 when absent
 * or too long. */
int web_cookie_get(const char *header, const char *name, char *out, size_t outlen);

/* Constant-time comparison of two secrets (tokens of 64 hex digits): true only
 * when both are non-empty and equal. */
bool web_secret_equal(const char *a, const char *b);

/* An Origin header is acceptable for Host: it is exactly "https://" HOST. */
bool web_origin_ok(const char *origin, const char *host);

/* An IPv4 client of a dual-stack socket ("::ffff:192.0.2.1") as its plain
 * address, in place; other addresses stay as they are. */
void web_peer_plain(char *peer);

/* n random bytes as 2n lowercase hex digits into out (2n+1); 0 or -1. */
int web_random_hex(char *out, size_t nbytes);

/*
 * The login rate limiter: per peer address, WEB_RL_FAILS failed logins within
 * WEB_RL_WINDOW seconds lock the peer out until the window of the oldest of
 * them ends.  At most WEB_RL_PEERS peers are tracked (the stalest is
 * forgotten first).  `now` is injected (seconds) so tests need no clock.
 */
#define WEB_RL_FAILS  5
#define WEB_RL_WINDOW 60
#define WEB_RL_PEERS  256
struct web_ratelimit {
	struct {
		char peer[64];
		time_t fail[WEB_RL_FAILS]; /* ring of the last failures' times */
		unsigned n;                /* failures recorded (ring index = n % WEB_RL_FAILS) */
		time_t last;
	} e[WEB_RL_PEERS];
};
/* 0 when PEER may try to log in now, else the seconds it must wait (> 0). */
int web_rl_wait(const struct web_ratelimit *rl, const char *peer, time_t now);
/* Record a failed login of PEER at `now`. */
void web_rl_fail(struct web_ratelimit *rl, const char *peer, time_t now);

/*
 * The role of USER with the names of its groups: root, or a member of sudo or
 * wheel -> ADMIN; a member of khyve -> VIEWER; else NONE.
 */
enum web_role web_role_from_groups(const char *user, const char *const *groups, size_t n);

#endif
