/* The API client: libcurl on a unix socket, and socket lookup (apiclient.h). */
#include "lib/apiclient.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPLY_MAX    (64u << 20) /* a 4K screen's PNG fits many times over */
#define CONF_DEFAULT "/etc/khyve.conf"

static void __attribute__((format(printf, 3, 4)))
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The body as it arrives, capped at REPLY_MAX. */
struct sink {
	char *buf;
	size_t len, cap;
	bool too_big;
};

static size_t sink_write(char *data, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t add = size * n;

	if (add > REPLY_MAX - s->len) {
		s->too_big = true;
		return 0; /* makes curl stop with CURLE_WRITE_ERROR */
	}
	if (s->len + add + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		char *p;
		while (cap < s->len + add + 1)
			cap *= 2;
		if (!(p = realloc(s->buf, cap)))
			return 0;
		s->buf = p;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, add);
	s->len += add;
	s->buf[s->len] = '\0';
	return add;
}

/* Errors that mean "no khyve listens there" rather than "it misbehaved". */
static bool no_vm(CURLcode rc)
{
	return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
	       rc == CURLE_COULDNT_RESOLVE_PROXY;
}

static enum api_call_rc finish(CURL *c, CURLcode rc, struct sink *s, const char *socket_path,
                               struct apic_reply *r, char *err, size_t errlen)
{
	char *type = NULL;

	if (rc != CURLE_OK) {
		if (s->too_big)
			set_err(err, errlen, "%s: the reply is larger than %u MiB", socket_path,
			        REPLY_MAX >> 20);
		else
			set_err(err, errlen, "%s: %s", socket_path, curl_easy_strerror(rc));
		free(s->buf);
		return no_vm(rc) ? API_CALL_NO_VM : API_CALL_FAILED;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type) == CURLE_OK && type)
		snprintf(r->content_type, sizeof(r->content_type), "%.*s", (int)strcspn(type, "; "),
		         type);
	r->body = s->buf;
	r->len = s->len;
	return API_CALL_OK;
}

enum api_call_rc apic_call(const char *socket_path, const char *method, const char *endpoint,
                           const char *body, long timeout_ms, struct apic_reply *r, char *err,
                           size_t errlen)
{
	struct curl_slist *headers = NULL;
	struct sink s = {0};
	char url[256];
	enum api_call_rc out;
	CURLcode rc;
	CURL *c;

	memset(r, 0, sizeof(*r));
	if (strlen(socket_path) >= API_SOCKET_MAX) {
		set_err(err, errlen, "%s: a unix socket path holds at most %d bytes", socket_path,
		        API_SOCKET_MAX - 1);
		return API_CALL_FAILED;
	}
	if ((size_t)snprintf(url, sizeof(url), "http://localhost/api/v1/%s", endpoint) >=
	        sizeof(url) ||
	    !(c = curl_easy_init())) {
		set_err(err, errlen, "%s: cannot set up the request", socket_path);
		return API_CALL_FAILED;
	}
	/* "Expect:" off: a small PUT body goes at once, no 100-continue round. */
	headers = curl_slist_append(headers, "Content-Type: application/json");
	headers = curl_slist_append(headers, "Expect:");
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, socket_path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
	}
	rc = curl_easy_perform(c);
	out = finish(c, rc, &s, socket_path, r, err, errlen);
	curl_easy_cleanup(c);
	curl_slist_free_all(headers);
	return out;
}

void apic_reply_free(struct apic_reply *r)
{
	free(r->body);
	memset(r, 0, sizeof(*r));
}

int api_default_socket(const char *name, char *out, size_t len, char *err, size_t errlen)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (geteuid() == 0)
		n = snprintf(out, len, "/run/khyve/%s.sock", name);
	else if (xdg && xdg[0] == '/')
		n = snprintf(out, len, "%s/khyve/%s.sock", xdg, name);
	else {
		set_err(err, errlen,
		        "no default API socket: XDG_RUNTIME_DIR is not set (use --socket=PATH)");
		return -1;
	}
	if (n < 0 || (size_t)n >= len) {
		set_err(err, errlen, "the API socket path of '%s' is too long", name);
		return -1;
	}
	return 0;
}

/* `value` of a `key=value` line as rc.conf reads it: quotes stripped, a
 * '#' ends it (vm's rcconf.c rule), into `out`.  0, or -1 when too long. */
static int unquote(const char *value, char *out, size_t len)
{
	char quote = (*value == '"' || *value == '\'') ? *value++ : 0;
	size_t n = 0;

	for (; *value && *value != '\n' && *value != '#'; value++) {
		if (quote && *value == quote)
			break;
		if (!quote && (*value == ' ' || *value == '\t'))
			break;
		if (n + 1 >= len)
			return -1;
		out[n++] = *value;
	}
	out[n] = '\0';
	return 0;
}

/*
 * Call `fn` with the value of each line of `path` that sets a key starting
 * with `prefix` (rc.conf style, unquoted), until it returns true.  True
 * when one did.
 */
static bool each_setting(const char *path, const char *prefix,
                         bool (*fn)(const char *value, void *arg), void *arg)
{
	char line[4096], value[4096], *eq;
	bool found = false;
	FILE *f;

	if (!(f = fopen(path, "re")))
		return false;
	/* An indented line is no setting (rcconf.h). */
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, prefix, strlen(prefix)) != 0 || !(eq = strchr(line, '=')))
			continue;
		if (unquote(eq + 1, value, sizeof(value)) == 0 && value[0] == '/')
			found = fn(value, arg);
	}
	fclose(f);
	return found;
}

struct found_dir {
	char *out;
	size_t len;
};

static bool take_dir(const char *value, void *arg)
{
	struct found_dir *d = arg;
	size_t n = strlen(value);

	if (n >= d->len)
		return false;
	memcpy(d->out, value, n + 1);
	return true;
}

int api_vm_dir(char *out, size_t len)
{
	const char *env = getenv("KHYVE_CONF");
	struct found_dir d = {out, len};

	/* The first assignment wins: the first line of vm_dir= decides. */
	return each_setting(env && *env ? env : CONF_DEFAULT, "vm_dir=", take_dir, &d) ? 0 : -1;
}

/* `name`'s socket in one datastore folder, when something is there. */
struct vm_lookup {
	const char *name;
	char *out;
	size_t len;
};

static bool socket_in(const char *folder, void *arg)
{
	struct vm_lookup *l = arg;
	struct stat st;
	int n = snprintf(l->out, l->len, "%s/%s/khyve.sock", folder, l->name);

	return n >= 0 && (size_t)n < l->len && lstat(l->out, &st) == 0;
}

static bool plain_name(const char *name)
{
	return name[0] && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int api_socket_for_vm(const char *name, char *out, size_t len, char *err, size_t errlen)
{
	struct vm_lookup l = {name, out, len};
	char dir[4096];

	if (!plain_name(name)) {
		set_err(err, errlen, "--vm=%s: want a VM's name, not a path (see --socket=PATH)",
		        name);
		return -1;
	}
	/* vm's guests: in vm_dir, or in a datastore that system.conf names
	 * (path_NAME="/folder"). */
	if (api_vm_dir(dir, sizeof(dir)) == 0) {
		char system[sizeof(dir) + 32];
		if (socket_in(dir, &l))
			return 0;
		snprintf(system, sizeof(system), "%s/.config/system.conf", dir);
		if (each_setting(system, "path_", socket_in, &l))
			return 0;
	}
	return api_default_socket(name, out, len, err, errlen);
}
