/*
 * libFuzzer target for vm web's request handling (src/web/http_util.c and
 * the text of /metrics, src/web/metrics.c): everything a browser or any TCP
 * client sends the daemon is hostile, and these pure functions see it first
 * (paths, queries, cookies, Origin and Host, the login rate limiter's peer).
 * Each call must stay within its buffers, and what it accepts must keep the
 * promises http_util.h makes (a static path that cannot leave its root, a
 * rate limiter that locks out whoever failed five times, a table that stays
 * within WEB_RL_PEERS); the metrics text must stay valid exposition format
 * whatever counters JSON comes.
 *
 * Input: ops, each an opcode byte (n%12) and its operands.  A "string" is a
 * u8 length (255: a u16 length follows, taken %4096) and that many bytes; a
 * "size" is a u8 buffer size.
 *   0 url-decode  u8 size, string        (both modes)
 *   1 static-rel  u8 size (0-255, 255: PATH_MAX), string (the path, also
 *                 checked percent-decoded)
 *   2 query-get   u8 size, string query, string key
 *   3 cookie-get  u8 size, string header, string name
 *   4 origin      string origin, string host (also as two secrets)
 *   5 route       u8 table (bit 0: guest, else auth) and method (bits 1-2:
 *                 GET POST PUT, 3: a string), string path
 *   6 type        string file name
 *   7 rl-fail     peer, time          8 rl-wait  peer, time
 *   9 rl-burst    peer, time: five failures, then locked out for 60 s
 *  10 role        string user, u8 groups (n%8), that many strings
 *  11 metrics     u8 (bit 0: up, bit 1: guest counts: 3 u16 follow), string
 *                 vm name, string counters JSON (cJSON_ParseWithLength)
 * A peer is u8 p: p < 0xc0 picks 192.0.2.x / 2001:db8::x from u16 (%400, so
 * the table of 256 overflows), else a string (web_peer_plain() first).  A
 * time is u8 mode: 0 adds a u8, 1 subtracts a u8, 2 sets a u64, 3 keeps the
 * clock.  The metrics text is made and checked once the input ends.
 */
#include <cjson/cJSON.h>
#include <limits.h>

#include "fuzz.h"

#include "vm/state.h"
#include "web/guests.h"
#include "web/http_util.h"

/* ---- stand-ins for what only web_metrics_handler() calls (never here) ---- */

__attribute__((weak)) void web_guest_ask(const struct vm_guest *g, struct vm_status *st,
                                         struct cJSON **counters)
{
	(void)g, (void)st, (void)counters;
	abort();
}

__attribute__((weak)) int web_reply_error(struct web_resp *rs, int status, const char *fmt, ...)
{
	(void)rs, (void)status, (void)fmt;
	abort();
}

__attribute__((weak)) int vm_guest_foreach(const struct vm_sys *sys,
                                           int (*fn)(struct vm_guest *, void *), void *arg)
{
	(void)sys, (void)fn, (void)arg;
	abort();
}

__attribute__((weak)) void vm_status_get(const struct vm_sys *sys, const struct vm_guest *g,
                                         struct vm_status *st)
{
	(void)sys, (void)g, (void)st;
	abort();
}

/* ---- input ---- */

/* A malloc'd string of exactly its length + NUL (so ASan sees over-reads);
 * *len is its length (it may hold NULs when the caller wants bytes). */
static char *fz_str(struct fz *z, size_t *len)
{
	size_t n = fz_u8(z);
	char *s;

	if (n == 255)
		n = fz_u16(z) % 4096;
	s = malloc(n + 1);
	if (!s)
		abort();
	fz_bytes(z, s, n);
	s[n] = '\0';
	if (len)
		*len = n;
	return s;
}

/* A buffer of exactly `n` bytes (at least one allocated). */
static char *buf_of(size_t n)
{
	char *b = malloc(n ? n : 1);

	if (!b)
		abort();
	return b;
}

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_web: %s:%d: %s\n", __FILE__, __LINE__, #cond);       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* ---- decoding, static paths, queries, cookies, Origin ---- */

static void op_url_decode(struct fz *z)
{
	size_t outlen = fz_u8(z), len;
	char *in = fz_str(z, &len), *out = buf_of(outlen);

	for (int plus = 0; plus < 2; plus++) {
		bool plain = !memchr(in, '%', len) && (!plus || !memchr(in, '+', len));

		if (web_url_decode(in, len, out, outlen, plus) == 0) {
			size_t n = strnlen(out, outlen);

			CHECK(n < outlen && n <= len);
			CHECK(!plain || (n == len && !memcmp(out, in, len)));
		} else {
			/* Plain text that fits with no NUL in it always decodes. */
			CHECK(!plain || len + 1 > outlen || memchr(in, '\0', len));
		}
	}
	free(out);
	free(in);
}

static bool hidden_or_empty_component(const char *rel)
{
	for (const char *c = rel; c; c = strchr(c, '/'), c = c ? c + 1 : NULL)
		if (*c == '.' || *c == '/' || *c == '\0')
			return true;
	return false;
}

static void check_static_rel(const char *path, size_t rellen)
{
	char *rel = buf_of(rellen);

	if (web_static_rel(path, rel, rellen) == 0) {
		size_t n = strnlen(rel, rellen);

		CHECK(n < rellen && n > 0);
		CHECK(path[0] == '/' && rel[0] != '/');
		CHECK(!strstr(rel, "..") && !strstr(rel, "//") && !strchr(rel, '\\'));
		CHECK(!hidden_or_empty_component(rel));
		for (size_t i = 0; i < n; i++)
			CHECK((unsigned char)rel[i] >= 0x20 && rel[i] != 0x7f);
		/* It is the path without its '/', or that with index.html added. */
		CHECK(!strncmp(rel, path + 1, strlen(path + 1)));
	}
	free(rel);
}

/* The path as it comes and as percent-decoded (what libwebsockets hands
 * http.c): "%2e%2e" must be refused once decoded. */
static void op_static_rel(struct fz *z)
{
	size_t rellen = fz_u8(z), len;
	char *path, *decoded;

	if (rellen == 255)
		rellen = PATH_MAX;
	path = fz_str(z, &len);
	decoded = buf_of(len + 1);
	check_static_rel(path, rellen);
	if (web_url_decode(path, len, decoded, len + 1, false) == 0)
		check_static_rel(decoded, rellen);
	free(decoded);
	free(path);
}

static void op_query_get(struct fz *z)
{
	size_t outlen = fz_u8(z);
	char *query = fz_str(z, NULL), *key = fz_str(z, NULL), *out = buf_of(outlen);

	if (web_query_get(query, key, out, outlen) == 0) {
		CHECK(strnlen(out, outlen) < outlen);
		CHECK(strlen(out) <= strlen(query));
	}
	free(out);
	free(key);
	free(query);
}

static void op_cookie_get(struct fz *z)
{
	size_t outlen = fz_u8(z);
	char *header = fz_str(z, NULL), *name = fz_str(z, NULL), *out = buf_of(outlen);

	if (web_cookie_get(header, name, out, outlen) == 0) {
		size_t n = strnlen(out, outlen);

		CHECK(n < outlen && n <= strlen(header));
		/* The value holds no separator and came after NAME=. */
		CHECK(!strchr(out, ';'));
		CHECK(n == 0 || strstr(header, out));
	}
	free(out);
	free(name);
	free(header);
}

static void op_origin(struct fz *z)
{
	char *origin = fz_str(z, NULL), *host = fz_str(z, NULL);
	bool want = host[0] && strlen(origin) == 8 + strlen(host) &&
	            !memcmp(origin, "https://", 8) && !strcmp(origin + 8, host);

	CHECK(web_origin_ok(origin, host) == want);
	/* The same strings as a session's secret and what a client sent. */
	CHECK(web_secret_equal(origin, host) == (origin[0] && !strcmp(origin, host)));
	free(host);
	free(origin);
}

/* ---- routes ---- */

static int fake_handler(struct web_req *rq, struct web_resp *rs)
{
	(void)rq, (void)rs;
	return 0;
}

/* As auth.c and guests.c have them (those link libwebsockets and PAM), plus
 * the odd prefixes "" and "/" at the end of the guest table. */
static const struct web_route auth_routes[] = {
    {"POST", "/api/login", WEB_PUBLIC, 4096, fake_handler},
    {"POST", "/api/logout", WEB_CSRF, 1024, fake_handler},
    {"GET", "/api/session", WEB_PUBLIC, 0, fake_handler},
    {NULL, NULL, 0, 0, NULL},
};
static const struct web_route guest_routes[] = {
    {"GET", "/api/guests", 0, 0, fake_handler},
    {"POST", "/api/guests", WEB_CHANGE, 16 * 1024, fake_handler},
    {"GET", "/api/guests/", 0, 0, fake_handler},
    {"POST", "/api/guests/", WEB_CHANGE, 1024, fake_handler},
    {"GET", "/api/tasks", 0, 0, fake_handler},
    {"GET", "/api/templates", 0, 0, fake_handler},
    {"GET", "/api/isos", 0, 0, fake_handler},
    {"POST", "/api/isos", WEB_CHANGE, 16 * 1024, fake_handler},
    {"GET", "/api/host", 0, 0, fake_handler},
    {"GET", "/api/log", 0, 0, fake_handler},
    {"GET", "/metrics", WEB_METRICS_TOKEN, 0, fake_handler},
    {"PUT", "", 0, 0, fake_handler},
    {"PUT", "/", 0, 0, fake_handler},
    {NULL, NULL, 0, 0, NULL},
};

/* Route r's answer for PATH by http_util.h's words: arg, or NULL. */
static const char *route_model(const struct web_route *r, const char *path)
{
	size_t n = strlen(r->prefix);

	if (n && r->prefix[n - 1] == '/') {
		if (!strncmp(path, r->prefix, n))
			return path + n;
		return strlen(path) == n - 1 && !memcmp(path, r->prefix, n - 1) ? "" : NULL;
	}
	return strcmp(path, r->prefix) ? NULL : "";
}

static void op_route(struct fz *z)
{
	static const char *const methods[] = {"GET", "POST", "PUT"};
	uint8_t sel = fz_u8(z);
	const struct web_route *table = sel & 1 ? guest_routes : auth_routes, *r, *want = NULL;
	char *mstr = (sel >> 1 & 3) == 3 ? fz_str(z, NULL) : NULL, *path = fz_str(z, NULL);
	const char *method = mstr ? mstr : methods[sel >> 1 & 3], *arg = NULL, *want_arg = NULL;

	for (const struct web_route *t = table; t->method && !want; t++)
		if (!strcmp(t->method, method) && (want_arg = route_model(t, path)))
			want = t;
	r = web_route_match(table, method, path, &arg);
	CHECK(r == want);
	if (r) {
		CHECK(arg && !strcmp(arg, want_arg));
		CHECK(!*arg || (arg > path && arg <= path + strlen(path)));
	}
	free(path);
	free(mstr);
}

static void op_type(struct fz *z)
{
	char *name = fz_str(z, NULL);
	const char *type = web_content_type(name), *dot = strrchr(name, '.');

	CHECK(type && *type);
	if (!dot || strchr(dot, '/'))
		CHECK(!strcmp(type, "application/octet-stream"));
	else if (!strcmp(dot, ".html"))
		CHECK(!strcmp(type, "text/html; charset=utf-8"));
	free(name);
}

/* ---- the login rate limiter ---- */

static struct web_ratelimit rl;
static time_t now;

static char *fz_peer(struct fz *z)
{
	uint8_t p = fz_u8(z);
	char *s;

	if (p >= 0xc0)
		return fz_str(z, NULL);
	s = buf_of(48);
	if (p & 1)
		snprintf(s, 48, "2001:db8::%x", fz_u16(z) % 400);
	else
		snprintf(s, 48, "192.0.2.%u", fz_u16(z) % 400);
	return s;
}

/* Times wrap as unsigned: a fuzz-chosen clock may jump anywhere. */
static void fz_time(struct fz *z)
{
	switch (fz_u8(z) % 4) {
	case 0:
		now = (time_t)((uint64_t)now + fz_u8(z));
		break;
	case 1:
		now = (time_t)((uint64_t)now - fz_u8(z));
		break;
	case 2:
		now = (time_t)fz_u64(z);
		break;
	default:
		break;
	}
}

/* The table: NUL-terminated names, each peer at most once. */
static void check_table(void)
{
	for (int i = 0; i < WEB_RL_PEERS; i++) {
		CHECK(memchr(rl.e[i].peer, '\0', sizeof(rl.e[i].peer)));
		for (int j = 0; rl.e[i].peer[0] && j < i; j++)
			CHECK(strcmp(rl.e[i].peer, rl.e[j].peer));
	}
}

static void check_wait(const char *peer)
{
	int w = web_rl_wait(&rl, peer, now);

	CHECK(w >= 0 && w <= WEB_RL_WINDOW);
}

static void op_rl(struct fz *z, unsigned op)
{
	char *peer = fz_peer(z);
	size_t len = strlen(peer);

	/* As http.c names a client of a dual-stack socket. */
	web_peer_plain(peer);
	CHECK(strlen(peer) == len || (strlen(peer) == len - 7 && !strchr(peer, ':')));
	fz_time(z);
	if (op == 7) {
		web_rl_fail(&rl, peer, now);
	} else if (op == 9) {
		for (int i = 0; i < WEB_RL_FAILS; i++)
			web_rl_fail(&rl, peer, now);
		/* Five failures at one time lock the peer out for the whole window,
		 * however long or odd its name is. */
		CHECK(web_rl_wait(&rl, peer, now) == WEB_RL_WINDOW);
		if (now <= LLONG_MAX - WEB_RL_WINDOW)
			CHECK(web_rl_wait(&rl, peer, now + WEB_RL_WINDOW) == 0);
	}
	check_wait(peer);
	check_table();
	free(peer);
}

/* ---- roles ---- */

static void op_role(struct fz *z)
{
	char *user = fz_str(z, NULL), *groups[8];
	size_t n = fz_u8(z) % 8;
	enum web_role want = WEB_ROLE_NONE;

	for (size_t i = 0; i < n; i++)
		groups[i] = fz_str(z, NULL);
	if (!strcmp(user, "root"))
		want = WEB_ROLE_ADMIN;
	for (size_t i = 0; i < n && want != WEB_ROLE_ADMIN; i++)
		if (!strcmp(groups[i], "sudo") || !strcmp(groups[i], "wheel"))
			want = WEB_ROLE_ADMIN;
		else if (!strcmp(groups[i], "khyve"))
			want = WEB_ROLE_VIEWER;
	CHECK(web_role_from_groups(user, (const char *const *)groups, n) == want);
	for (size_t i = 0; i < n; i++)
		free(groups[i]);
	free(user);
}

/* ---- metrics ---- */

static struct web_metrics *metrics;

static void op_metrics(struct fz *z)
{
	uint8_t flags = fz_u8(z);
	char *vm, *json;
	size_t len;
	cJSON *counters;

	if (flags & 2) {
		unsigned r = fz_u16(z), s = fz_u16(z), p = fz_u16(z);

		web_metrics_guest_counts(metrics, r, s, p);
	}
	vm = fz_str(z, NULL);
	json = fz_str(z, &len);
	counters = cJSON_ParseWithLength(json, len);
	web_metrics_guest(metrics, vm, flags & 1, counters);
	cJSON_Delete(counters);
	free(json);
	free(vm);
}

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

/* A metric or label name at *p: its length (0: none). */
static size_t name_len(const char *p, const char *end)
{
	size_t n = 0;

	while (p + n < end && name_char(p[n], n == 0))
		n++;
	return n;
}

/* {name="value",...} at *p (escapes only \\ \" \n, no raw newline: the
 * line ends at one); advances *p past it.  false when malformed. */
static bool labels_ok(const char **p, const char *end)
{
	const char *s = *p;

	if (s == end || *s != '{')
		return true;
	s++;
	while (s < end && *s != '}') {
		size_t n = name_len(s, end);

		if (!n || s + n + 1 >= end || s[n] != '=' || s[n + 1] != '"')
			return false;
		for (s += n + 2; s < end && *s != '"'; s++)
			if (*s == '\\' && (++s == end || (*s != '\\' && *s != '"' && *s != 'n')))
				return false;
		if (s == end)
			return false;
		s++;
		if (s < end && *s == ',')
			s++;
	}
	if (s == end)
		return false;
	*p = s + 1;
	return true;
}

/* One sample line of family `fam` (of type `type`). */
static void check_sample(const char *line, const char *end, const char *fam, const char *type)
{
	size_t n = name_len(line, end), fl = strlen(fam);
	const char *p = line + n, *suffix = line + fl;
	char value[64];

	CHECK(n > 0 && fl > 0 && n >= fl && !memcmp(line, fam, fl));
	CHECK(n == fl ||
	      (!strcmp(type, "histogram") && ((n == fl + 7 && !memcmp(suffix, "_bucket", 7)) ||
	                                      (n == fl + 4 && !memcmp(suffix, "_sum", 4)) ||
	                                      (n == fl + 6 && !memcmp(suffix, "_count", 6)))));
	CHECK(labels_ok(&p, end));
	CHECK(p < end && *p == ' ' && end - p - 1 < (long)sizeof(value) && end - p > 1);
	memcpy(value, p + 1, (size_t)(end - p - 1));
	value[end - p - 1] = '\0';
	/* Go's strconv.ParseFloat reads what strtod does (inf, nan too). */
	{
		char *e;
		(void)strtod(value, &e);
		CHECK(*e == '\0' && e != value);
	}
}

/* The text is lines of HELP, TYPE and samples; each family's TYPE once,
 * before its samples, which stay together. */
static void check_metrics_text(const char *text, size_t len)
{
	char fam[256] = "", type[16] = "";
	const char *line = text, *end;
	char **seen = NULL;
	size_t nseen = 0;

	CHECK(strlen(text) == len);
	CHECK(len == 0 || text[len - 1] == '\n');
	for (; line < text + len; line = end + 1) {
		end = strchr(line, '\n');
		CHECK(end);
		if (!strncmp(line, "# HELP ", 7)) {
			size_t n = name_len(line + 7, end);

			CHECK(n > 0 && line[7 + n] == ' ');
		} else if (!strncmp(line, "# TYPE ", 7)) {
			size_t n = name_len(line + 7, end), tl = (size_t)(end - line) - 8 - n;

			CHECK(n > 0 && n < sizeof(fam) && line[7 + n] == ' ' && tl < sizeof(type));
			memcpy(fam, line + 7, n);
			fam[n] = '\0';
			memcpy(type, line + 8 + n, tl);
			type[tl] = '\0';
			CHECK(!strcmp(type, "counter") || !strcmp(type, "gauge") ||
			      !strcmp(type, "histogram"));
			for (size_t i = 0; i < nseen; i++)
				CHECK(strcmp(seen[i], fam));
			seen = realloc(seen, (nseen + 1) * sizeof(*seen));
			CHECK(seen && (seen[nseen++] = strdup(fam)));
		} else {
			CHECK(fam[0]);
			check_sample(line, end, fam, type);
		}
	}
	for (size_t i = 0; i < nseen; i++)
		free(seen[i]);
	free(seen);
}

FUZZ_TARGET(fuzz_no_setup)

static void fuzz_one(struct fz *z)
{
	char *text;
	size_t len = 0;

	memset(&rl, 0, sizeof(rl));
	now = 1700000000;
	metrics = web_metrics_new();
	CHECK(metrics);
	FUZZ_EACH_OP (z) {
		unsigned op = fz_u8(z) % 12;

		switch (op) {
		case 0:
			op_url_decode(z);
			break;
		case 1:
			op_static_rel(z);
			break;
		case 2:
			op_query_get(z);
			break;
		case 3:
			op_cookie_get(z);
			break;
		case 4:
			op_origin(z);
			break;
		case 5:
			op_route(z);
			break;
		case 6:
			op_type(z);
			break;
		case 7:
		case 8:
		case 9:
			op_rl(z, op);
			break;
		case 10:
			op_role(z);
			break;
		default:
			op_metrics(z);
			break;
		}
	}
	text = web_metrics_text(metrics, &len);
	CHECK(text);
	check_metrics_text(text, len);
	free(text);
	web_metrics_free(metrics);
}
