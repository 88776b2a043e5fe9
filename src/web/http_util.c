/*
 * Pure helpers of vm web (http_util.h): nothing here touches a socket.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "web/http_util.h"

const struct web_route *web_route_match(const struct web_route *table, const char *method,
                                        const char *path, const char **arg)
{
	for (const struct web_route *r = table; r && r->method; r++) {
		size_t n = strlen(r->prefix);

		if (strcmp(r->method, method))
			continue;
		if (n && r->prefix[n - 1] == '/') {
			if (!strncmp(path, r->prefix, n)) {
				*arg = path + n;
				return r;
			}
			/* "/api/guests/" also matches "/api/guests" (the list itself). */
			if (!strncmp(path, r->prefix, n - 1) && path[n - 1] == '\0') {
				*arg = "";
				return r;
			}
		} else if (!strcmp(path, r->prefix)) {
			*arg = "";
			return r;
		}
	}
	return NULL;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int web_url_decode(const char *in, size_t len, char *out, size_t outlen, bool plus_is_space)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		char c = in[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return -1;
			hi = hex_value(in[i + 1]);
			lo = hi < 0 ? -1 : hex_value(in[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			c = (char)(hi << 4 | lo);
			i += 2;
		} else if (c == '+' && plus_is_space) {
			c = ' ';
		} else if (c == '\0') {
			return -1;
		}
		if (o + 1 >= outlen)
			return -1;
		out[o++] = c;
	}
	if (o >= outlen)
		return -1;
	out[o] = '\0';
	return 0;
}

int web_query_get(const char *query, const char *key, char *out, size_t len)
{
	size_t klen = strlen(key);
	const char *p = query;

	while (p && *p) {
		const char *end = strchr(p, '&');
		size_t plen = end ? (size_t)(end - p) : strlen(p);

		if (plen > klen && !strncmp(p, key, klen) && p[klen] == '=')
			return web_url_decode(p + klen + 1, plen - klen - 1, out, len, true);
		if (plen == klen && !strncmp(p, key, klen))
			return web_url_decode("", 0, out, len, true);
		p = end ? end + 1 : NULL;
	}
	return -1;
}

int web_static_rel(const char *path, char *rel, size_t rellen)
{
	const char *p;
	size_t n;

	if (path[0] != '/' || strstr(path, ".."))
		return -1;
	for (p = path; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c < 0x20 || c == 0x7f || c == '\\')
			return -1;
		/* Every component: non-empty (no "//") and not hidden ("." ".." ".x"). */
		if (c == '/' && (p[1] == '/' || p[1] == '.'))
			return -1;
	}
	n = strlen(path + 1);
	if (n == 0 || path[n] == '/') {
		if (snprintf(rel, rellen, "%sindex.html", path + 1) >= (int)rellen)
			return -1;
		return 0;
	}
	if (n + 1 > rellen)
		return -1;
	memcpy(rel, path + 1, n + 1);
	return 0;
}

const char *web_content_type(const char *name)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
	    {".html", "text/html; charset=utf-8"},
	    {".css", "text/css; charset=utf-8"},
	    {".js", "text/javascript; charset=utf-8"},
	    {".mjs", "text/javascript; charset=utf-8"},
	    {".json", "application/json"},
	    {".png", "image/png"},
	    {".svg", "image/svg+xml"},
	    {".ico", "image/x-icon"},
	    {".woff2", "font/woff2"},
	};
	const char *dot = strrchr(name, '.');

	if (dot && !strchr(dot, '/'))
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
			if (!strcmp(dot, types[i].ext))
				return types[i].type;
	return "application/octet-stream";
}

int web_cookie_get(const char *header, const char *name, char *out, size_t outlen)
{
	size_t nlen = strlen(name);
	const char *p = header;

	while (p && *p) {
		const char *end;
		size_t vlen;

		while (*p == ' ' || *p == ';')
			p++;
		end = strchr(p, ';');
		if (!strncmp(p, name, nlen) && p[nlen] == '=') {
			p += nlen + 1;
			vlen = end ? (size_t)(end - p) : strlen(p);
			while (vlen && p[vlen - 1] == ' ')
				vlen--;
			if (vlen + 1 > outlen)
				return -1;
			memcpy(out, p, vlen);
			out[vlen] = '\0';
			return 0;
		}
		p = end;
	}
	return -1;
}

bool web_secret_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char diff = 0;

	if (!la || la != lb)
		return false;
	for (size_t i = 0; i < la; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

bool web_origin_ok(const char *origin, const char *host)
{
	return host[0] && !strncmp(origin, "https://", 8) && !strcmp(origin + 8, host);
}

void web_peer_plain(char *peer)
{
	if (!strncmp(peer, "::ffff:", 7) && strchr(peer + 7, '.') && !strchr(peer + 7, ':'))
		memmove(peer, peer + 7, strlen(peer + 7) + 1);
}

int web_random_hex(char *out, size_t nbytes)
{
	unsigned char buf[64];

	if (nbytes > sizeof(buf) || getrandom(buf, nbytes, 0) != (ssize_t)nbytes)
		return -1;
	for (size_t i = 0; i < nbytes; i++)
		snprintf(out + 2 * i, 3, "%02x", buf[i]);
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

#define RL_KEY_LEN sizeof(((struct web_ratelimit *)0)->e[0].peer)

/* The table's name for PEER: cut to what an entry holds, and "?" for "" (an
 * empty name marks a free entry), so that a long or empty peer is found
 * again and locked out like any other. */
static void rl_key(const char *peer, char key[RL_KEY_LEN])
{
	snprintf(key, RL_KEY_LEN, "%s", peer[0] ? peer : "?");
}

static int rl_find(const struct web_ratelimit *rl, const char *key)
{
	for (int i = 0; i < WEB_RL_PEERS; i++)
		if (rl->e[i].peer[0] && !strcmp(rl->e[i].peer, key))
			return i;
	return -1;
}

int web_rl_wait(const struct web_ratelimit *rl, const char *peer, time_t now)
{
	char key[RL_KEY_LEN];
	int i;
	time_t oldest;
	uint64_t age;

	rl_key(peer, key);
	i = rl_find(rl, key);
	if (i < 0 || rl->e[i].n < WEB_RL_FAILS)
		return 0;
	/* The ring's next slot holds the oldest of the last WEB_RL_FAILS failures. */
	oldest = rl->e[i].fail[rl->e[i].n % WEB_RL_FAILS];
	if (now < oldest)
		return 0;
	/* Unsigned: now - oldest overflows time_t when the clock jumped far. */
	age = (uint64_t)now - (uint64_t)oldest;
	return age >= WEB_RL_WINDOW ? 0 : (int)(WEB_RL_WINDOW - age);
}

void web_rl_fail(struct web_ratelimit *rl, const char *peer, time_t now)
{
	char key[RL_KEY_LEN];
	int i;

	rl_key(peer, key);
	i = rl_find(rl, key);
	if (i < 0) {
		i = 0;
		for (int j = 0; j < WEB_RL_PEERS; j++) {
			if (!rl->e[j].peer[0]) {
				i = j;
				break;
			}
			if (rl->e[j].last < rl->e[i].last)
				i = j;
		}
		memset(&rl->e[i], 0, sizeof(rl->e[i]));
		memcpy(rl->e[i].peer, key, sizeof(key));
	}
	rl->e[i].fail[rl->e[i].n % WEB_RL_FAILS] = now;
	rl->e[i].n++;
	rl->e[i].last = now;
}

enum web_role web_role_from_groups(const char *user, const char *const *groups, size_t n)
{
	enum web_role role = WEB_ROLE_NONE;

	if (!strcmp(user, "root"))
		return WEB_ROLE_ADMIN;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(groups[i], "sudo") || !strcmp(groups[i], "wheel"))
			return WEB_ROLE_ADMIN;
		if (!strcmp(groups[i], "khyve"))
			role = WEB_ROLE_VIEWER;
	}
	return role;
}
