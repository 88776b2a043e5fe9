/*
 * vm web's HTTP layer (web13 contract, "The daemon" and "Routes"): the
 * "http" protocol of libwebsockets.  It collects a request's headers and
 * body (bounded), enforces each route's flags (session, role, CSRF token,
 * Origin, metrics token), calls the route's handler and writes its answer
 * with the contract's security headers; POST /api/isos is streamed to
 * upload.c; any other GET is a static file of web_root or novnc_root.
 *
 * One transaction at a time per connection: struct http_pss holds it, from
 * LWS_CALLBACK_HTTP to the last write of the answer.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <libwebsockets.h>

#include "web/http_util.h"
#include "web/ws.h"
#include "web/web_int.h"

#define REQUEST_TIMEOUT_S 30
#define WRITE_CHUNK       16384
#define MAX_CONNECTIONS   64

static const char CSP[] = "default-src 'self'; img-src 'self' data: blob:; connect-src 'self' "
                          "wss:; style-src 'self' 'unsafe-inline'";

struct http_pss {
	struct lws *wsi;
	char method[8];
	char path[2048]; /* as lws decoded it */
	char query[2048];
	char peer[64];
	char cookie[4096];
	char csrf[80];
	char origin[300];
	char host[256];
	char authz[160];
	bool has_length, chunked;
	unsigned long long length; /* Content-Length */
	const struct web_route *route;
	const char *arg;
	char *body;
	size_t body_len;
	bool discard; /* answered early: ignore the rest of the body */
	struct web_upload *upload;
	unsigned long long upload_got;
	char upload_name[160];
	struct web_login_job *job;
	/* the answer */
	struct web_resp resp;
	bool have_resp, headers_sent, finished, close_after;
	size_t sent;
};

void web_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "vm web: %s\n", line);
}

int web_reply_json(struct web_resp *rs, int status, struct cJSON *json)
{
	char *text = json ? cJSON_PrintUnformatted(json) : NULL;

	cJSON_Delete(json);
	free(rs->body);
	rs->content_type = NULL;
	if (!text) {
		static const char oom[] = "{\"error\":\"out of memory\"}";

		rs->status = 500;
		rs->body = strdup(oom);
		rs->len = rs->body ? strlen(oom) : 0;
		return -1;
	}
	rs->status = status;
	rs->body = text;
	rs->len = strlen(text);
	return 0;
}

int web_reply_error(struct web_resp *rs, int status, const char *fmt, ...)
{
	char msg[512];
	cJSON *o;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o = cJSON_CreateObject();
	if (o)
		cJSON_AddStringToObject(o, "error", msg);
	return web_reply_json(rs, status, o);
}

static struct web_ctx *ctx_of(struct lws *wsi)
{
	return lws_context_user(lws_get_context(wsi));
}

static void pss_release(struct web_ctx *ctx, struct http_pss *p)
{
	if (p->upload) {
		web_log("upload of %s cut off after %llu of %llu bytes: removed", p->upload_name,
		        p->upload_got, p->length);
		web_upload_abort(p->upload);
		p->upload = NULL;
	}
	if (p->job) {
		web_auth_job_cancel(ctx, p->job);
		p->job = NULL;
	}
	if (p->body) {
		explicit_bzero(p->body, p->body_len); /* may hold a password */
		free(p->body);
		p->body = NULL;
	}
	free(p->resp.body);
	p->resp.body = NULL;
}

/* ---- writing the answer ---- */

static void respond(struct http_pss *p)
{
	if (!p->resp.status)
		web_reply_error(&p->resp, 500, "internal error");
	p->have_resp = true;
	lws_callback_on_writable(p->wsi);
}

/* An answer before the body was read: the connection closes after it. */
static void respond_early(struct http_pss *p)
{
	p->discard = true;
	p->close_after = true;
	respond(p);
}

static int add_header(struct lws *wsi, const char *name, const char *value, unsigned char **pp,
                      unsigned char *end)
{
	return lws_add_http_header_by_name(wsi, (const unsigned char *)name,
	                                   (const unsigned char *)value, (int)strlen(value), pp,
	                                   end);
}

/* The headers of every answer (contract: "Headers on every reply"). */
static int add_security_headers(struct lws *wsi, bool api, unsigned char **pp, unsigned char *end)
{
	if (add_header(wsi, "content-security-policy:", CSP, pp, end) ||
	    add_header(wsi, "x-content-type-options:", "nosniff", pp, end) ||
	    add_header(wsi, "x-frame-options:", "DENY", pp, end) ||
	    add_header(wsi, "referrer-policy:", "no-referrer", pp, end))
		return -1;
	return api ? add_header(wsi, "cache-control:", "no-store", pp, end) : 0;
}

static bool is_api_path(const char *path)
{
	return !strncmp(path, "/api/", 5) || !strcmp(path, "/api") || !strcmp(path, "/metrics");
}

static int write_headers(struct http_pss *p)
{
	unsigned char buf[LWS_PRE + 2048], *start = buf + LWS_PRE, *pp = start,
	                                   *end = buf + sizeof(buf) - 1;
	const struct web_resp *rs = &p->resp;
	char num[24];

	if (lws_add_http_common_headers(p->wsi, (unsigned)rs->status,
	                                rs->content_type ? rs->content_type : "application/json",
	                                rs->len, &pp, end) ||
	    add_security_headers(p->wsi, is_api_path(p->path), &pp, end))
		return -1;
	if (rs->set_cookie[0] && add_header(p->wsi, "set-cookie:", rs->set_cookie, &pp, end))
		return -1;
	if (rs->retry_after > 0) {
		snprintf(num, sizeof(num), "%d", rs->retry_after);
		if (add_header(p->wsi, "retry-after:", num, &pp, end))
			return -1;
	}
	if (p->close_after && add_header(p->wsi, "connection:", "close", &pp, end))
		return -1;
	return lws_finalize_write_http_header(p->wsi, start, &pp, end) ? -1 : 0;
}

/* LWS_CALLBACK_HTTP_WRITEABLE: headers, then the body in chunks. */
static int write_answer(struct http_pss *p)
{
	static unsigned char chunk[LWS_PRE + WRITE_CHUNK];
	size_t n;

	if (p->finished) /* the last bytes are out: now close */
		return -1;
	if (!p->have_resp)
		return 0;
	if (!p->headers_sent) {
		if (write_headers(p) < 0)
			return -1;
		p->headers_sent = true;
		if (p->resp.len) {
			lws_callback_on_writable(p->wsi);
			return 0;
		}
	}
	n = p->resp.len - p->sent;
	if (n > WRITE_CHUNK)
		n = WRITE_CHUNK;
	if (n) {
		bool last = p->sent + n == p->resp.len;

		memcpy(chunk + LWS_PRE, p->resp.body + p->sent, n);
		if (lws_write(p->wsi, chunk + LWS_PRE, n,
		              last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) != (int)n)
			return -1;
		p->sent += n;
		if (!last) {
			lws_callback_on_writable(p->wsi);
			return 0;
		}
	}
	p->have_resp = false;
	free(p->resp.body);
	p->resp = (struct web_resp){0};
	if (p->close_after) {
		p->finished = true;
		lws_callback_on_writable(p->wsi);
		return 0;
	}
	return lws_http_transaction_completed(p->wsi) ? -1 : 0;
}

/* ---- access ---- */

static bool bearer_ok(struct web_ctx *ctx, const char *authz)
{
	return !strncmp(authz, "Bearer ", 7) && ctx->metrics_token[0] &&
	       web_secret_equal(authz + 7, ctx->metrics_token);
}

/*
 * The route's flags against the request (contract: WEB_CHANGE routes, "every
 * /api/ route except login/session needs a session").  0 when allowed, with
 * *session set (NULL for a public route without one, or the metrics token);
 * -1 with p->resp filled and logged.
 */
static int check_access(struct web_ctx *ctx, struct http_pss *p, unsigned flags,
                        const struct web_session **session)
{
	const struct web_session *s = web_auth_session(ctx, p->cookie);

	*session = s;
	if (flags & WEB_PUBLIC)
		return 0;
	if (!s) {
		if ((flags & WEB_METRICS_TOKEN) && bearer_ok(ctx, p->authz))
			return 0;
		web_log("refused 401: %s %s from %s without a session", p->method, p->path,
		        p->peer);
		return web_reply_error(&p->resp, 401, "not logged in"), -1;
	}
	if (!(flags & (WEB_CHANGE | WEB_CSRF)))
		return 0;
	if ((flags & WEB_CHANGE) && s->role != WEB_ROLE_ADMIN) {
		web_log("refused 403: %s %s by %s (viewer) from %s", p->method, p->path, s->user,
		        p->peer);
		return web_reply_error(&p->resp, 403, "%s may only look, not change", s->user), -1;
	}
	if (!web_secret_equal(s->csrf, p->csrf)) {
		web_log("refused 403: %s %s by %s from %s: missing or wrong CSRF token", p->method,
		        p->path, s->user, p->peer);
		return web_reply_error(&p->resp, 403, "missing or wrong CSRF token"), -1;
	}
	if (p->origin[0] && !web_origin_ok(p->origin, p->host)) {
		web_log("refused 403: %s %s by %s from %s: Origin %s", p->method, p->path, s->user,
		        p->peer, p->origin);
		return web_reply_error(&p->resp, 403, "cross-origin request"), -1;
	}
	return 0;
}

/* ---- routes ---- */

static void dispatch(struct web_ctx *ctx, struct http_pss *p)
{
	struct web_req rq = {
	    .ctx = ctx,
	    .method = p->method,
	    .path = p->path,
	    .query = p->query,
	    .body = p->body ? p->body : "",
	    .body_len = p->body_len,
	    .peer = p->peer,
	    .arg = p->arg,
	};
	int rc;

	lws_set_timeout(p->wsi, NO_PENDING_TIMEOUT, 0);
	/* Looked up again: the session may have ended while the body came. */
	if (check_access(ctx, p, p->route->flags, &rq.session) < 0) {
		respond(p);
		return;
	}
	rc = p->route->fn(&rq, &p->resp);
	if (p->body) {
		explicit_bzero(p->body, p->body_len);
		free(p->body);
		p->body = NULL;
	}
	if (rc == WEB_PENDING) {
		p->job = web_auth_pending_take(ctx);
		if (p->job) {
			web_auth_job_bind(p->job, p);
			return;
		}
		web_reply_error(&p->resp, 500, "lost the pending answer");
	}
	/* The public routes (login, session) log their own refusals. */
	if (!(p->route->flags & WEB_PUBLIC) && (p->resp.status == 401 || p->resp.status == 403 ||
	                                        p->resp.status == 413 || p->resp.status == 429))
		web_log("refused %d: %s %s from %s", p->resp.status, p->method, p->path, p->peer);
	respond(p);
}

/* web_auth_collect's callback: a PAM login's answer for its request. */
static void login_done(void *owner, struct web_resp *rs)
{
	struct http_pss *p = owner;

	p->job = NULL;
	free(p->resp.body);
	p->resp = *rs;
	respond(p);
}

static const struct web_route *find_route(const char *method, const char *path, const char **arg)
{
	const struct web_route *r = web_route_match(web_auth_routes, method, path, arg);

	return r ? r : web_route_match(web_guest_routes, method, path, arg);
}

/* ---- uploads (POST /api/isos?name=NAME.iso) ---- */

static void upload_start(struct web_ctx *ctx, struct http_pss *p)
{
	const struct web_session *s;
	char err[256] = "";
	int status = 500;

	if (check_access(ctx, p, WEB_CHANGE, &s) < 0)
		return respond_early(p);
	if (!p->has_length) {
		web_reply_error(&p->resp, 411, "an upload needs a Content-Length");
		return respond_early(p);
	}
	if (web_query_get(p->query, "name", p->upload_name, sizeof(p->upload_name)) < 0) {
		web_reply_error(&p->resp, 400, "name: missing or too long");
		return respond_early(p);
	}
	p->upload = web_upload_begin(ctx, p->upload_name, p->length, &status, err, sizeof(err));
	if (!p->upload) {
		web_log("upload of %s (%llu bytes) by %s refused: %s", p->upload_name, p->length,
		        s->user, err);
		web_reply_error(&p->resp, status, "%s", err[0] ? err : "upload refused");
		return respond_early(p);
	}
	web_log("upload of %s (%llu bytes) by %s from %s", p->upload_name, p->length, s->user,
	        p->peer);
	lws_set_timeout(p->wsi, PENDING_TIMEOUT_HTTP_CONTENT, REQUEST_TIMEOUT_S);
}

static void upload_end(struct http_pss *p)
{
	char err[256] = "";
	struct web_upload *u = p->upload;
	cJSON *o;

	p->upload = NULL;
	lws_set_timeout(p->wsi, NO_PENDING_TIMEOUT, 0);
	if (p->upload_got != p->length) {
		web_upload_abort(u);
		web_reply_error(&p->resp, 400, "the body was not Content-Length bytes");
	} else if (web_upload_finish(u, err, sizeof(err)) < 0) {
		web_log("upload of %s failed: %s", p->upload_name, err);
		web_reply_error(&p->resp, 500, "%s", err[0] ? err : "upload failed");
	} else {
		web_log("upload of %s done (%llu bytes)", p->upload_name, p->length);
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", p->upload_name);
		cJSON_AddNumberToObject(o, "size_bytes", (double)p->length);
		web_reply_json(&p->resp, 201, o);
	}
	respond(p);
}

static void upload_chunk(struct http_pss *p, const void *in, size_t len)
{
	if (p->upload_got + len > p->length || web_upload_write(p->upload, in, len) < 0) {
		int nospace = errno == ENOSPC || errno == EDQUOT;

		web_log("upload of %s failed after %llu bytes: %s", p->upload_name, p->upload_got,
		        nospace ? "no space left" : "write error");
		web_upload_abort(p->upload);
		p->upload = NULL;
		if (nospace)
			web_reply_error(&p->resp, 507, "no space left for %s", p->upload_name);
		else
			web_reply_error(&p->resp, 500, "cannot write %s", p->upload_name);
		return respond_early(p);
	}
	p->upload_got += len;
	lws_set_timeout(p->wsi, PENDING_TIMEOUT_HTTP_CONTENT, REQUEST_TIMEOUT_S);
}

/* ---- static files ---- */

static void not_found_page(struct http_pss *p)
{
	static const char page[] = "<!doctype html><title>Not found</title><h1>Not found</h1>\n";

	p->resp.status = 404;
	p->resp.content_type = "text/html; charset=utf-8";
	p->resp.body = strdup(page);
	p->resp.len = p->resp.body ? strlen(page) : 0;
	respond(p);
}

/* ROOT/REL when it resolves to a regular file inside ROOT; 0 or -1. */
static int resolve_in_root(const char *root, const char *rel, char *out)
{
	char real_root[PATH_MAX], full[PATH_MAX];
	size_t n;
	struct stat st;

	if (!realpath(root, real_root) ||
	    snprintf(full, sizeof(full), "%s/%s", real_root, rel) >= (int)sizeof(full) ||
	    !realpath(full, out))
		return -1;
	n = strlen(real_root);
	if (strncmp(out, real_root, n) || out[n] != '/')
		return -1;
	return stat(out, &st) == 0 && S_ISREG(st.st_mode) ? 0 : -1;
}

static int serve_static(struct web_ctx *ctx, struct http_pss *p)
{
	unsigned char hdrs[1024], *pp = hdrs, *end = hdrs + sizeof(hdrs);
	const char *root = ctx->web_root, *path = p->path;
	char rel[PATH_MAX], file[PATH_MAX];
	int n;

	if (!strncmp(path, "/novnc/", 7)) {
		root = ctx->novnc_root;
		path += 6;
	}
	if (web_static_rel(path, rel, sizeof(rel)) < 0) {
		web_log("refused 404: %s from %s (a hidden, empty or '..' component)", p->path,
		        p->peer);
		not_found_page(p);
		return 0;
	}
	if (resolve_in_root(root, rel, file) < 0) {
		not_found_page(p);
		return 0;
	}
	if (add_security_headers(p->wsi, false, &pp, end))
		return -1;
	n = lws_serve_http_file(p->wsi, file, web_content_type(file), (const char *)hdrs,
	                        (int)(pp - hdrs));
	if (n < 0 || (n > 0 && lws_http_transaction_completed(p->wsi)))
		return -1;
	return 0;
}

/* ---- the connection limit ---- */

/* The port of a TCP socket's local address, or -1. */
static int local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -1;
}

/*
 * LWS_CALLBACK_FILTER_NETWORK_CONNECTION: refuse a client beyond the 64th.
 * lws keeps no count we can read, and an upgraded connection leaves this
 * protocol, so the clients are counted from the descriptors themselves:
 * connected sockets on the listening port (a relay's own connection to a
 * guest has another local port; ptys and pipes are no sockets).
 */
static int connection_allowed(struct web_ctx *ctx, int fd)
{
	static int high_fd;
	static time_t last_log;
	const char *colon = strrchr(ctx->listen, ':');
	int port = colon ? atoi(colon + 1) : -1, n = 0;
	struct sockaddr_storage peer;
	socklen_t len;

	if (fd > high_fd)
		high_fd = fd;
	for (int i = 0; i <= high_fd; i++) {
		len = sizeof(peer);
		if (i != fd && local_port(i) == port &&
		    getpeername(i, (struct sockaddr *)&peer, &len) == 0)
			n++;
	}
	if (n < MAX_CONNECTIONS)
		return 1;
	if (time(NULL) != last_log) /* one line a second, however many knock */
		web_log("refused a connection: %d clients already", n);
	last_log = time(NULL);
	return 0;
}

/* ---- a new request ---- */

static void hdr(struct lws *wsi, char *out, int len, enum lws_token_indexes t)
{
	out[0] = '\0';
	if (lws_hdr_total_length(wsi, t) >= len || lws_hdr_copy(wsi, out, len, t) < 0)
		out[0] = '\0';
}

/*
 * The query as the client sent it, "a=1&b=2".  libwebsockets 4.1 keeps each
 * argument as a fragment of WSI_TOKEN_HTTP_URI_ARGS and lws_hdr_copy()
 * joins them without the '&' (so "guest=a&limit=2" read as one argument
 * "guest=alimit=2"): copy them one by one.  Too long: "" (no arguments).
 */
static void read_query(struct lws *wsi, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < 64; i++) {
		int n = lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_URI_ARGS, i);

		if (n <= 0)
			break;
		if (used + (used > 0) + (size_t)n + 1 > len) {
			out[0] = '\0';
			return;
		}
		if (used > 0)
			out[used++] = '&';
		if (lws_hdr_copy_fragment(wsi, out + used, (int)(len - used),
		                          WSI_TOKEN_HTTP_URI_ARGS, i) != n) {
			out[0] = '\0';
			return;
		}
		used += (size_t)n;
	}
}

static void read_headers(struct http_pss *p, struct lws *wsi)
{
	char len[32];

	hdr(wsi, p->cookie, sizeof(p->cookie), WSI_TOKEN_HTTP_COOKIE);
	hdr(wsi, p->origin, sizeof(p->origin), WSI_TOKEN_ORIGIN);
	hdr(wsi, p->host, sizeof(p->host), WSI_TOKEN_HOST);
	hdr(wsi, p->authz, sizeof(p->authz), WSI_TOKEN_HTTP_AUTHORIZATION);
	read_query(wsi, p->query, sizeof(p->query));
	if (lws_hdr_custom_length(wsi, "x-csrf-token:", 13) < (int)sizeof(p->csrf) &&
	    lws_hdr_custom_copy(wsi, p->csrf, sizeof(p->csrf), "x-csrf-token:", 13) < 0)
		p->csrf[0] = '\0';
	hdr(wsi, len, sizeof(len), WSI_TOKEN_HTTP_CONTENT_LENGTH);
	p->has_length = len[0] != '\0';
	p->length = strtoull(len, NULL, 10);
	p->chunked = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0;
	lws_get_peer_simple(wsi, p->peer, sizeof(p->peer));
	web_peer_plain(p->peer);
}

static int request_method(struct lws *wsi, char *out, size_t len)
{
	if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI))
		snprintf(out, len, "GET");
	else if (lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI))
		snprintf(out, len, "POST");
	else
		return -1;
	return 0;
}

static void api_request(struct web_ctx *ctx, struct http_pss *p)
{
	const struct web_session *s;

	if (!strcmp(p->method, "POST") && !strcmp(p->path, "/api/isos"))
		return upload_start(ctx, p);
	p->route = find_route(p->method, p->path, &p->arg);
	if (!p->route) {
		web_reply_error(&p->resp, 404, "no such API endpoint: %s %s", p->method, p->path);
		return respond_early(p);
	}
	/* Refused before the body is read. */
	if (check_access(ctx, p, p->route->flags, &s) < 0)
		return respond_early(p);
	if (strcmp(p->method, "POST") || !p->length) {
		if (p->chunked) {
			web_reply_error(&p->resp, 411, "a body needs a Content-Length");
			return respond_early(p);
		}
		return dispatch(ctx, p);
	}
	if (p->length > p->route->max_body) {
		web_log("refused 413: %s %s from %s: %llu bytes (at most %zu)", p->method, p->path,
		        p->peer, p->length, p->route->max_body);
		web_reply_error(&p->resp, 413, "the body is larger than %zu bytes",
		                p->route->max_body);
		return respond_early(p);
	}
	p->body = calloc(1, (size_t)p->length + 1);
	if (!p->body) {
		web_reply_error(&p->resp, 500, "out of memory");
		return respond_early(p);
	}
	lws_set_timeout(p->wsi, PENDING_TIMEOUT_HTTP_CONTENT, REQUEST_TIMEOUT_S);
}

static int new_request(struct web_ctx *ctx, struct http_pss *p, struct lws *wsi, const char *uri,
                       size_t len)
{
	pss_release(ctx, p);
	memset(p, 0, sizeof(*p));
	p->wsi = wsi;
	read_headers(p, wsi);
	if (len >= sizeof(p->path) || memchr(uri, '\0', len)) {
		snprintf(p->path, sizeof(p->path), "/");
		web_reply_error(&p->resp, 404, "no such path");
		respond_early(p);
		return 0;
	}
	memcpy(p->path, uri, len);
	p->path[len] = '\0';
	if (request_method(wsi, p->method, sizeof(p->method)) < 0) {
		snprintf(p->method, sizeof(p->method), "?");
		web_reply_error(&p->resp, 405, "only GET and POST");
		respond_early(p);
		return 0;
	}
	if (is_api_path(p->path)) {
		api_request(ctx, p);
		return 0;
	}
	if (strcmp(p->method, "GET")) {
		web_reply_error(&p->resp, 405, "pages are read with GET");
		respond_early(p);
		return 0;
	}
	return serve_static(ctx, p);
}

static void body_chunk(struct http_pss *p, const void *in, size_t len)
{
	if (p->discard)
		return;
	if (p->upload)
		return upload_chunk(p, in, len);
	if (!p->body)
		return;
	if (p->body_len + len > p->length) {
		web_reply_error(&p->resp, 413, "the body is longer than its Content-Length");
		return respond_early(p);
	}
	memcpy(p->body + p->body_len, in, len);
	p->body_len += len;
}

static void body_done(struct web_ctx *ctx, struct http_pss *p)
{
	if (p->discard)
		return;
	if (p->upload)
		return upload_end(p);
	if (p->route && p->body)
		dispatch(ctx, p);
}

static int http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                         size_t len)
{
	struct http_pss *p = user;
	struct web_ctx *ctx;

	switch (reason) {
	case LWS_CALLBACK_HTTP:
		return new_request(ctx_of(wsi), p, wsi, in, len);
	case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
		return web_ws_confirm_upgrade(wsi);
	case LWS_CALLBACK_HTTP_BODY:
		body_chunk(p, in, len);
		return 0;
	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		body_done(ctx_of(wsi), p);
		return 0;
	case LWS_CALLBACK_HTTP_WRITEABLE:
		return p ? write_answer(p) : 0;
	case LWS_CALLBACK_HTTP_FILE_COMPLETION:
		return lws_http_transaction_completed(wsi) ? -1 : 0;
	case LWS_CALLBACK_CLOSED_HTTP:
		if (p)
			pss_release(ctx_of(wsi), p);
		return 0;
	case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
		ctx = wsi ? ctx_of(wsi) : NULL;
		return ctx && !connection_allowed(ctx, (int)(intptr_t)in);
	case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
		ctx = wsi ? ctx_of(wsi) : NULL;
		if (ctx && ctx->auth)
			web_auth_collect(ctx, login_done);
		return 0;
	default:
		break;
	}
	return lws_callback_http_dummy(wsi, reason, user, in, len);
}

const struct lws_protocols web_http_protocol = {
    .name = "http",
    .callback = http_callback,
    .per_session_data_size = sizeof(struct http_pss),
    .rx_buffer_size = 0,
};
