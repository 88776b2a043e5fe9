/*
 * Stand-ins for part A1's http.c (web_reply_json, web_reply_error,
 * web_query_get) so that `vm` and the unit tests link on the webguest
 * branch.  Removed at merge: http.c defines the real ones.
 */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "web/web.h"

int web_reply_json(struct web_resp *rs, int status, struct cJSON *json)
{
	rs->status = status;
	rs->content_type = "application/json";
	rs->body = json ? cJSON_PrintUnformatted(json) : NULL;
	rs->len = rs->body ? strlen(rs->body) : 0;
	cJSON_Delete(json);
	if (json && !rs->body) {
		rs->status = 500;
		return -1;
	}
	return 0;
}

int web_reply_error(struct web_resp *rs, int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	cJSON *o = cJSON_CreateObject();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddStringToObject(o, "error", msg);
	return web_reply_json(rs, status, o);
}

static int hex(int c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

int web_query_get(const char *query, const char *key, char *out, size_t len)
{
	size_t kl = strlen(key);

	for (const char *p = query; p && *p;) {
		const char *end = p + strcspn(p, "&");
		if ((size_t)(end - p) > kl && !strncmp(p, key, kl) && p[kl] == '=') {
			size_t n = 0;
			for (const char *s = p + kl + 1; s < end; s++) {
				int c = (unsigned char)*s;
				if (c == '+')
					c = ' ';
				else if (c == '%' && s + 2 < end && hex(s[1]) >= 0 &&
				         hex(s[2]) >= 0) {
					c = hex(s[1]) * 16 + hex(s[2]);
					s += 2;
				}
				if (c == 0 || n + 1 >= len)
					return -1;
				out[n++] = (char)c;
			}
			out[n] = '\0';
			return 0;
		}
		if ((size_t)(end - p) == kl && !strncmp(p, key, kl)) {
			if (len == 0)
				return -1;
			out[0] = '\0';
			return 0;
		}
		p = *end ? end + 1 : end;
	}
	return -1;
}
