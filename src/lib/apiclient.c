/* The API client: libcurl on a unix socket, and socket lookup (apiclient.h). */
#include "lib/apiclient.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
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

/* ---- vm.media-insert: HTTP by hand, for the fd ---- */

#define MEDIA_REPLY_MAX (64u << 10)

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until `fd` is ready for `events` or `deadline` (ms) passed: 0, -1. */
static int wait_fd(int fd, short events, long long deadline)
{
	for (;;) {
		long long left = deadline - now_ms();
		struct pollfd p = {.fd = fd, .events = events};
		int rc;

		if (left <= 0)
			return -1;
		rc = poll(&p, 1, (int)left);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

static int send_all(int fd, const char *buf, size_t len, long long deadline)
{
	while (len > 0) {
		ssize_t n;

		if (wait_fd(fd, POLLOUT, deadline) < 0)
			return -1;
		n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read more into buf (cap bytes, NUL kept): bytes read, 0 at the end, -1. */
static ssize_t recv_some(int fd, char *buf, size_t *len, size_t cap, long long deadline)
{
	for (;;) {
		ssize_t n;

		if (*len + 1 >= cap || wait_fd(fd, POLLIN, deadline) < 0)
			return -1;
		n = recv(fd, buf + *len, cap - *len - 1, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return -1;
		*len += (size_t)n;
		buf[*len] = '\0';
		return n;
	}
}

static bool plain_drive(const char *drive)
{
	size_t n = strlen(drive);

	if (n == 0 || n > 15)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = drive[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
	}
	return true;
}

/* Connect to `path`: the fd, or -1 (`*no_vm` when nothing listens). */
static int connect_unix(const char *path, bool *no_vm, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	*no_vm = false;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		set_err(err, errlen, "%s: a unix socket path holds at most %zu bytes", path,
		        sizeof(sa.sun_path) - 1);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		set_err(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		*no_vm = errno == ENOENT || errno == ECONNREFUSED || errno == ENOTSOCK ||
		         errno == ENOTDIR;
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* One byte carrying `image_fd` (SCM_RIGHTS). */
static int send_fd(int sock, int image_fd, long long deadline)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char byte = 'F';
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
	                     .msg_iovlen = 1,
	                     .msg_control = ctl.buf,
	                     .msg_controllen = sizeof(ctl.buf)};
	struct cmsghdr *cm;

	memset(ctl.buf, 0, sizeof(ctl.buf));
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &image_fd, sizeof(int));
	if (wait_fd(sock, POLLOUT, deadline) < 0)
		return -1;
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* The HTTP error after the headers in buf: its body into err. */
static void read_error_body(int sock, char *buf, size_t len, size_t cap, long long deadline,
                            char *err, size_t errlen)
{
	char *end = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "\r\nContent-Length:");
	size_t want = cl != NULL && cl < end ? strtoul(cl + 17, NULL, 10) : 0, head;

	head = (size_t)(end - buf) + 4;
	while (len - head < want && recv_some(sock, buf, &len, cap, deadline) > 0) {
	}
	set_err(err, errlen, "%.*s", (int)(len - head < want ? len - head : want), buf + head);
}

enum api_call_rc apic_media_insert(const char *socket_path, const char *drive, int force,
                                   int image_fd, long timeout_ms, long *status, char *err,
                                   size_t errlen)
{
	char body[96];

	*status = 0;
	if (!plain_drive(drive)) {
		set_err(err, errlen, "'%s' is no drive's name (cd0, ...)", drive);
		return API_CALL_FAILED;
	}
	snprintf(body, sizeof(body), "{\"drive\":\"%s\",\"force\":%s}", drive,
	         force ? "true" : "false");
	return apic_fd_call(socket_path, "vm.media-insert", body, image_fd, timeout_ms, status, err,
	                    errlen);
}

enum api_call_rc apic_fd_call(const char *socket_path, const char *endpoint, const char *body,
                              int fd, long timeout_ms, long *status, char *err, size_t errlen)
{
	long long deadline = now_ms() + timeout_ms;
	char req[512], *buf = NULL, *end;
	size_t len = 0;
	bool no_vm;
	int sock, n;
	enum api_call_rc rc = API_CALL_FAILED;
	int image_fd = fd;

	*status = 0;
	n = snprintf(req, sizeof(req),
	             "PUT /api/v1/%s HTTP/1.1\r\nHost: localhost\r\n"
	             "Connection: Upgrade\r\nUpgrade: khyve-fd\r\n"
	             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
	             endpoint, strlen(body), body);
	if (n < 0 || (size_t)n >= sizeof(req)) {
		set_err(err, errlen, "request too long");
		return API_CALL_FAILED;
	}
	sock = connect_unix(socket_path, &no_vm, err, errlen);
	if (sock < 0)
		return no_vm ? API_CALL_NO_VM : API_CALL_FAILED;
	buf = malloc(MEDIA_REPLY_MAX);
	if (buf == NULL || send_all(sock, req, (size_t)n, deadline) < 0) {
		set_err(err, errlen, "%s: cannot send the request", socket_path);
		goto out;
	}
	buf[0] = '\0';
	while ((end = strstr(buf, "\r\n\r\n")) == NULL)
		if (recv_some(sock, buf, &len, MEDIA_REPLY_MAX, deadline) <= 0) {
			set_err(err, errlen, "%s: no HTTP reply", socket_path);
			goto out;
		}
	if (sscanf(buf, "HTTP/1.%*1[01] %ld", status) != 1) {
		set_err(err, errlen, "%s: not an HTTP reply", socket_path);
		goto out;
	}
	if (*status != 101) {
		read_error_body(sock, buf, len, MEDIA_REPLY_MAX, deadline, err, errlen);
		rc = API_CALL_OK;
		goto out;
	}
	if (send_fd(sock, image_fd, deadline) < 0) {
		set_err(err, errlen, "%s: cannot pass the file descriptor: %s", socket_path,
		        strerror(errno));
		goto out;
	}
	len = 0;
	buf[0] = '\0';
	while (strchr(buf, '\n') == NULL)
		if (recv_some(sock, buf, &len, MEDIA_REPLY_MAX, deadline) <= 0)
			break;
	if (strncmp(buf, "{\"status\":", 10) != 0 || (*status = strtol(buf + 10, NULL, 10)) < 100) {
		set_err(err, errlen, "%s: no outcome after the file descriptor", socket_path);
		*status = 0;
		goto out;
	}
	buf[strcspn(buf, "\r\n")] = '\0';
	if (*status == 204)
		set_err(err, errlen, "%s", "");
	else /* {"status":409,"error":"..."} -> {"error":"..."} */
		set_err(err, errlen, "{%s", strchr(buf, ',') ? strchr(buf, ',') + 1 : "}");
	rc = API_CALL_OK;
out:
	free(buf);
	close(sock);
	return rc;
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
