/*
 * What web.c, http.c and auth.c (part A1 of vm web) share beyond web.h: the
 * "http" protocol, the authentication state's life cycle, and PAM logins
 * that finish in a worker thread while the request waits.
 */
#ifndef KHYVE_WEB_WEB_INT_H
#define KHYVE_WEB_WEB_INT_H

#include "web/web.h"

/* A handler's return value when its answer comes later (a PAM login). */
#define WEB_PENDING 1

/* http.c: the "http" protocol (web.c puts it first in the vhost's list). */
extern const struct lws_protocols web_http_protocol;

/* Log one line "vm web: MESSAGE" on stderr. */
void web_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* auth.c: the sessions, rate limiter and PAM workers; 0 or -1 (logged). */
int web_auth_init(struct web_ctx *ctx);
void web_auth_free(struct web_ctx *ctx);
/* Before the lws context goes: waits (at most 5 s) for PAM workers, and
 * keeps those still running from waking the loop after it returns. */
void web_auth_stop(struct web_ctx *ctx);

/* The valid (unexpired) session a Cookie header names, its last_used
 * refreshed; NULL when none. */
const struct web_session *web_auth_session(struct web_ctx *ctx, const char *cookie_header);

/* A PAM login a handler left pending: http.c takes it right after the handler
 * returned WEB_PENDING and binds it to its request (owner). */
struct web_login_job;
struct web_login_job *web_auth_pending_take(struct web_ctx *ctx);
void web_auth_job_bind(struct web_login_job *job, void *owner);
/* The request went away (connection closed): the job's result is dropped. */
void web_auth_job_cancel(struct web_ctx *ctx, struct web_login_job *job);
/* On LWS_CALLBACK_EVENT_WAIT_CANCELLED: each finished job's answer is handed
 * to done(owner, rs) (rs's body then belongs to the owner). */
void web_auth_collect(struct web_ctx *ctx, void (*done)(void *owner, struct web_resp *rs));

#endif
