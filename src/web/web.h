/*
 * `vm web`: the web daemon (issue 13; docs/web.md).  One HTTPS origin
 * (libwebsockets 4.1 with OpenSSL) serving the pages of share/web, a JSON
 * API under /api/ for them, Prometheus text at /metrics, and two WebSocket
 * relays: noVNC to a guest's VNC server and xterm.js to its serial pty.
 * Everything runs in one thread, the lws event loop, except PAM
 * authentication (auth.c runs it in worker threads, so pam_faildelay's
 * pause after a wrong password stalls no other client).
 *
 * Files: web.c (the command, TLS, the loop), http.c (requests, routes,
 * static files), auth.c (PAM, sessions, CSRF, rate limits), guests.c and
 * metrics.c (the JSON and text views of vm's guests), tasks.c (`vm`
 * commands run as tasks), upload.c (ISO uploads), ws.c (the relays).
 */
#ifndef KHYVE_WEB_WEB_H
#define KHYVE_WEB_WEB_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>
#include "vm/vm.h"
struct lws;
struct lws_context;
struct lws_protocols;

enum web_role { WEB_ROLE_NONE = 0, WEB_ROLE_VIEWER = 1, WEB_ROLE_ADMIN = 2 };

struct web_session {   /* auth.c owns these */
	char id[65];   /* cookie value: 64 hex digits from getrandom() */
	char csrf[65]; /* 64 hex digits, sent back in X-CSRF-Token */
	char user[65];
	enum web_role role;
	time_t created, last_used; /* expires 12 h after created or 1 h after last_used */
};

struct web_auth;  /* auth.c */
struct web_tasks; /* tasks.c (A2) */

struct web_ctx {
	struct vm_sys *sys; /* loaded, vm_sys_require_init() passed */
	struct lws_context *lws;
	char listen[80];           /* "127.0.0.1:8006" */
	char web_root[PATH_MAX];   /* the pages: $KHYVE_WEB_ROOT, else
	                              dirname(self)/../share/khyve/web */
	char novnc_root[PATH_MAX]; /* $KHYVE_NOVNC_DIR, else /usr/share/novnc */
	char state_dir[PATH_MAX];  /* $vm_dir/.config/web (0700): cert.pem key.pem metrics.token */
	char metrics_token[65]; /* contents of state_dir/metrics.token (created on first start) */
	struct web_auth *auth;
	struct web_tasks *tasks;
};

/* A complete request as the HTTP layer (http.c, A1) hands it to a route handler. */
struct web_req {
	struct web_ctx *ctx;
	const char *method; /* "GET", "POST" */
	const char *path;   /* URL path, percent-decoded, no query: "/api/guests/web1/start" */
	const char *query;  /* raw query after '?', "" when none */
	const char *body;   /* NUL-terminated; "" when none; at most the route's max_body */
	size_t body_len;
	const struct web_session *session; /* NULL when not logged in (only for public routes) */
	const char *peer;                  /* client IP address text */
	const char *arg; /* the path part after the route's prefix: "web1/start" */
};

/* A handler's answer.  body is malloc'd; the HTTP layer frees it after sending. */
struct web_resp {
	int status; /* 200, 201, 202, 204, 400, 401, 403, 404, 409, 413, 429, 500, 507 */
	const char *content_type; /* static string, "application/json" when NULL */
	char *body;
	size_t len;
	char set_cookie[512]; /* one Set-Cookie header value, or "" */
	int retry_after;      /* seconds for a Retry-After header, 0 for none */
};

/* web_resp helpers (http.c): JSON from cJSON (takes ownership of `json`), and {"error":"MESSAGE"}.
 */
struct cJSON;
int web_reply_json(struct web_resp *rs, int status, struct cJSON *json);
int web_reply_error(struct web_resp *rs, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A query parameter's value (percent-decoded) into out; 0, or -1 when absent/too long. */
int web_query_get(const char *query, const char *key, char *out, size_t len);

typedef int (*web_handler_fn)(struct web_req *rq, struct web_resp *rs);
enum web_route_flags {
	WEB_PUBLIC = 1 << 0, /* no session needed (login, session) */
	WEB_CHANGE =
	    1 << 1, /* changes something: needs ADMIN, a valid X-CSRF-Token and same Origin */
	WEB_METRICS_TOKEN = 1 << 2 /* also accepts "Authorization: Bearer <metrics_token>" */
};
struct web_route {
	const char *method; /* "GET" or "POST" */
	const char *prefix; /* "/api/guests/" matches that path and everything below (rq->arg =
	                       rest); a prefix without a trailing '/' matches only exactly */
	unsigned flags;     /* web_route_flags; without WEB_PUBLIC: any logged-in role may GET */
	size_t max_body;    /* bytes; a longer body gets 413 before the handler runs */
	web_handler_fn fn;
};
/* Route tables, NULL-method-terminated; http.c tries auth_routes, then guest_routes. */
extern const struct web_route web_auth_routes[];  /* auth.c (A1) */
extern const struct web_route web_guest_routes[]; /* guests.c, metrics.c (A2): see "Routes" */

/* auth.c (A1): the session of a WebSocket upgrade or HTTP request, checked (cookie khyve_session,
 * and for WebSockets the Origin header must be https://<Host header>); NULL when none, expired,
 * role below `need`, or wrong Origin (logged). */
const struct web_session *web_auth_wsi(struct web_ctx *ctx, struct lws *wsi, enum web_role need);

/* tasks.c (A2): start `vm ARGV...` (ctx->sys->self as argv[0]) as a task; output captured (64 KiB
 * max). Returns the task id (> 0) or -1 with err.  web_tasks_poll() is called by the loop every 200
 * ms (A1 schedules it) to read output and reap children without blocking. */
int web_task_start(struct web_ctx *ctx, const char *user, char *const argv[], char *err,
                   size_t errlen);
void web_tasks_poll(struct web_ctx *ctx);
int web_tasks_init(struct web_ctx *ctx);
void web_tasks_free(struct web_ctx *ctx);

/* upload.c (A2): POST /api/isos?name=NAME.iso streams its body here, never buffered whole.
 * begin: checks the name (a plain name [A-Za-z0-9][A-Za-z0-9._+-]*, ends ".iso", at most 128) and
 * that Content-Length fits the free space of $vm_dir/.iso (statvfs, keep 64 MiB spare), refuses an
 * existing name (409); writes $vm_dir/.iso/.NAME.part (O_CREAT|O_EXCL, 0644). finish: fsync, then
 * rename to NAME only when exactly Content-Length bytes came. abort (cut-off connection, write
 * error): unlink the part. begin returns a handle or NULL with an HTTP status in *status and a
 * message in err. */
struct web_upload;
struct web_upload *web_upload_begin(struct web_ctx *ctx, const char *name,
                                    unsigned long long length, int *status, char *err,
                                    size_t errlen);
int web_upload_write(struct web_upload *u, const void *buf, size_t len); /* 0, or -1 (507 or 500) */
int web_upload_finish(struct web_upload *u, char *err, size_t errlen);   /* 0 = renamed; frees u */
void web_upload_abort(struct web_upload *u);                             /* unlinks; frees u */

/* ws.c (A3): the WebSocket protocols, appended by web.c after its "http" protocol. */
extern const struct lws_protocols web_ws_vnc_protocol;    /* name "khyve-vnc"   */
extern const struct lws_protocols web_ws_serial_protocol; /* name "khyve-serial" */

/* web.c (A1): `vm web` */
int cmd_web(struct vm_sys *sys, int argc, char **argv);

#endif
