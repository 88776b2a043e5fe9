/*
 * vm web's authentication (web13 contract, "The daemon"): PAM log-in in
 * worker threads, sessions in memory, roles from the user's groups, the
 * login rate limiter, and the routes /api/login, /api/logout, /api/session.
 *
 * Threads: only login_worker() runs outside the lws loop.  It touches its
 * job and, under auth->lock, the `done` list and `active` count; it wakes
 * the loop with lws_cancel_service(), whose LWS_CALLBACK_EVENT_WAIT_CANCELLED
 * (http.c) calls web_auth_collect() to answer the waiting request.
 */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <security/pam_appl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <libwebsockets.h>

#include "web/http_util.h"
#include "web/web_int.h"

#define MAX_SESSIONS    256
#define MAX_LOGINS      4 /* PAM workers at once */
#define SESSION_LIFE_S  (12 * 3600)
#define SESSION_IDLE_S  3600
#define MAX_PASSWORD    512
#define MAX_GROUPS      256
#define COOKIE_ATTRS    "Path=/; HttpOnly; Secure; SameSite=Strict"
#define DEFAULT_SERVICE "khyve"

enum login_outcome { LOGIN_OK, LOGIN_WRONG, LOGIN_NO_ROLE, LOGIN_ERROR };

struct web_login_job {
	struct web_login_job *next; /* on auth->done once finished */
	struct web_ctx *ctx;
	char service[64];
	char user[65];
	char password[MAX_PASSWORD]; /* wiped by the worker once PAM has it */
	char peer[64];
	enum login_outcome outcome;
	enum web_role role;
	void *owner;    /* the waiting request (loop thread only) */
	bool cancelled; /* its connection closed (loop thread only) */
};

struct web_auth {
	struct web_session sessions[MAX_SESSIONS]; /* id[0] == 0: free */
	struct web_ratelimit rl;
	pthread_mutex_t lock;
	struct web_login_job *done; /* under lock */
	int active;                 /* running workers, under lock */
	bool stopping;              /* under lock: the lws context is going away */
	struct web_login_job *pending;
	char service[64];
};

/* ---- sessions ---- */

static bool session_expired(const struct web_session *s, time_t now)
{
	return now - s->created >= SESSION_LIFE_S || now - s->last_used >= SESSION_IDLE_S ||
	       now < s->created;
}

static struct web_session *session_new(struct web_auth *a, const char *user, enum web_role role)
{
	time_t now = time(NULL);
	struct web_session *s = NULL;

	for (int i = 0; i < MAX_SESSIONS && !s; i++)
		if (!a->sessions[i].id[0] || session_expired(&a->sessions[i], now))
			s = &a->sessions[i];
	if (!s) { /* full: the longest unused goes */
		s = &a->sessions[0];
		for (int i = 1; i < MAX_SESSIONS; i++)
			if (a->sessions[i].last_used < s->last_used)
				s = &a->sessions[i];
	}
	memset(s, 0, sizeof(*s));
	if (web_random_hex(s->id, 32) < 0 || web_random_hex(s->csrf, 32) < 0) {
		memset(s, 0, sizeof(*s));
		return NULL;
	}
	snprintf(s->user, sizeof(s->user), "%s", user);
	s->role = role;
	s->created = s->last_used = now;
	return s;
}

const struct web_session *web_auth_session(struct web_ctx *ctx, const char *cookie_header)
{
	struct web_auth *a = ctx->auth;
	struct web_session *found = NULL;
	char id[80];
	time_t now = time(NULL);

	if (!cookie_header || web_cookie_get(cookie_header, "khyve_session", id, sizeof(id)) < 0)
		return NULL;
	/* Compare with every slot, so the time taken does not say which matched. */
	for (int i = 0; i < MAX_SESSIONS; i++)
		if (a->sessions[i].id[0] && web_secret_equal(a->sessions[i].id, id))
			found = &a->sessions[i];
	if (!found)
		return NULL;
	if (session_expired(found, now)) {
		memset(found, 0, sizeof(*found));
		return NULL;
	}
	found->last_used = now;
	return found;
}

static void session_drop(struct web_auth *a, const struct web_session *s)
{
	for (int i = 0; i < MAX_SESSIONS; i++)
		if (&a->sessions[i] == s)
			explicit_bzero(&a->sessions[i], sizeof(a->sessions[i]));
}

static const char *role_name(enum web_role r)
{
	return r == WEB_ROLE_ADMIN ? "admin" : r == WEB_ROLE_VIEWER ? "viewer" : "none";
}

static int reply_session(struct web_resp *rs, int status, const struct web_session *s)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "user", s->user);
	cJSON_AddStringToObject(o, "role", role_name(s->role));
	cJSON_AddStringToObject(o, "csrf", s->csrf);
	return web_reply_json(rs, status, o);
}

/* ---- PAM, in worker threads ---- */

static int pam_conv_fn(int n, const struct pam_message **msg, struct pam_response **resp,
                       void *data)
{
	struct web_login_job *job = data;
	struct pam_response *r;

	if (n <= 0 || n > PAM_MAX_NUM_MSG)
		return PAM_CONV_ERR;
	r = calloc((size_t)n, sizeof(*r));
	if (!r)
		return PAM_BUF_ERR;
	for (int i = 0; i < n; i++) {
		const char *answer = NULL;

		if (msg[i]->msg_style == PAM_PROMPT_ECHO_OFF)
			answer = job->password;
		else if (msg[i]->msg_style == PAM_PROMPT_ECHO_ON)
			answer = job->user;
		if (answer && !(r[i].resp = strdup(answer))) {
			for (int j = 0; j < i; j++)
				if (r[j].resp) {
					explicit_bzero(r[j].resp, strlen(r[j].resp));
					free(r[j].resp);
				}
			free(r);
			return PAM_BUF_ERR;
		}
	}
	*resp = r;
	return PAM_SUCCESS;
}

static enum login_outcome pam_check(struct web_login_job *job)
{
	struct pam_conv conv = {pam_conv_fn, job};
	pam_handle_t *h = NULL;
	int rc;

	rc = pam_start(job->service, job->user, &conv, &h);
	if (rc != PAM_SUCCESS)
		return LOGIN_ERROR;
	rc = pam_authenticate(h, PAM_DISALLOW_NULL_AUTHTOK);
	if (rc == PAM_SUCCESS)
		rc = pam_acct_mgmt(h, PAM_DISALLOW_NULL_AUTHTOK);
	pam_end(h, rc);
	return rc == PAM_SUCCESS ? LOGIN_OK : LOGIN_WRONG;
}

/* The user's role from its groups (getgrouplist, then each group's name). */
static enum web_role user_role(const char *user)
{
	char buf[16384], gbuf[16384];
	struct passwd pw, *pwp = NULL;
	gid_t gids[MAX_GROUPS];
	char names[MAX_GROUPS][32];
	const char *namep[MAX_GROUPS];
	int n = MAX_GROUPS;
	size_t k = 0;

	if (getpwnam_r(user, &pw, buf, sizeof(buf), &pwp) || !pwp)
		return WEB_ROLE_NONE;
	if (getgrouplist(user, pw.pw_gid, gids, &n) < 0)
		n = MAX_GROUPS; /* more than we look at: the first MAX_GROUPS */
	for (int i = 0; i < n; i++) {
		struct group gr, *grp = NULL;

		if (getgrgid_r(gids[i], &gr, gbuf, sizeof(gbuf), &grp) || !grp)
			continue;
		snprintf(names[k], sizeof(names[k]), "%s", grp->gr_name);
		namep[k] = names[k];
		k++;
	}
	return web_role_from_groups(pw.pw_name, namep, k);
}

static void *login_worker(void *arg)
{
	struct web_login_job *job = arg;
	struct web_auth *a = job->ctx->auth;

	job->outcome = pam_check(job);
	explicit_bzero(job->password, sizeof(job->password));
	if (job->outcome == LOGIN_OK) {
		job->role = user_role(job->user);
		if (job->role == WEB_ROLE_NONE)
			job->outcome = LOGIN_NO_ROLE;
	}
	pthread_mutex_lock(&a->lock);
	job->next = a->done;
	a->done = job;
	a->active--;
	/* Under the lock, so web_auth_stop() knows no worker touches lws after it. */
	if (!a->stopping)
		lws_cancel_service(job->ctx->lws);
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* ---- the loop's side of logins ---- */

struct web_login_job *web_auth_pending_take(struct web_ctx *ctx)
{
	struct web_login_job *job = ctx->auth->pending;

	ctx->auth->pending = NULL;
	return job;
}

void web_auth_job_bind(struct web_login_job *job, void *owner)
{
	job->owner = owner;
}

void web_auth_job_cancel(struct web_ctx *ctx, struct web_login_job *job)
{
	(void)ctx;
	job->cancelled = true;
	job->owner = NULL;
}

static void login_answer(struct web_ctx *ctx, struct web_login_job *job, struct web_resp *rs)
{
	struct web_auth *a = ctx->auth;
	struct web_session *s;

	switch (job->outcome) {
	case LOGIN_OK:
		s = session_new(a, job->user, job->role);
		if (!s) {
			web_reply_error(rs, 500, "cannot make a session");
			return;
		}
		web_log("login ok: %s (%s) from %s", job->user, role_name(job->role), job->peer);
		snprintf(rs->set_cookie, sizeof(rs->set_cookie),
		         "khyve_session=%s; " COOKIE_ATTRS "; Max-Age=%d", s->id, SESSION_LIFE_S);
		reply_session(rs, 200, s);
		return;
	case LOGIN_NO_ROLE:
		web_log(
		    "login refused: %s from %s is in none of the groups root, sudo, wheel, khyve",
		    job->user, job->peer);
		web_reply_error(rs, 403, "%s may not use khyve's web interface", job->user);
		return;
	case LOGIN_WRONG:
	case LOGIN_ERROR:
		break;
	}
	web_rl_fail(&a->rl, job->peer, time(NULL));
	web_log("login failed: %s from %s%s", job->user, job->peer,
	        job->outcome == LOGIN_ERROR ? " (PAM could not start)" : "");
	web_reply_error(rs, 401, "wrong user name or password");
}

void web_auth_collect(struct web_ctx *ctx, void (*done)(void *owner, struct web_resp *rs))
{
	struct web_auth *a = ctx->auth;
	struct web_login_job *list, *next;

	pthread_mutex_lock(&a->lock);
	list = a->done;
	a->done = NULL;
	pthread_mutex_unlock(&a->lock);
	for (; list; list = next) {
		struct web_resp rs = {0};

		next = list->next;
		/* A cancelled success makes no session; a cancelled failure still counts. */
		if (list->cancelled && list->outcome != LOGIN_WRONG && list->outcome != LOGIN_ERROR)
			web_log("login of %s from %s: the connection closed first", list->user,
			        list->peer);
		else
			login_answer(ctx, list, &rs);
		if (!list->cancelled && list->owner)
			done(list->owner, &rs);
		else
			free(rs.body);
		explicit_bzero(list, sizeof(*list));
		free(list);
	}
}

/* ---- routes ---- */

static bool user_name_ok(const char *u)
{
	size_t n = strlen(u);

	if (n == 0 || n > 64 || u[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(u[i] == '.' || u[i] == '_' || u[i] == '-' || u[i] == '$' ||
		      (u[i] >= 'a' && u[i] <= 'z') || (u[i] >= 'A' && u[i] <= 'Z') ||
		      (u[i] >= '0' && u[i] <= '9')))
			return false;
	return true;
}

static void wipe_json_string(cJSON *item)
{
	if (cJSON_IsString(item) && item->valuestring)
		explicit_bzero(item->valuestring, strlen(item->valuestring));
}

static int start_login(struct web_req *rq, struct web_resp *rs, const char *user,
                       const char *password)
{
	struct web_auth *a = rq->ctx->auth;
	struct web_login_job *job;
	pthread_attr_t attr;
	pthread_t t;
	int busy, rc;

	pthread_mutex_lock(&a->lock);
	busy = a->active >= MAX_LOGINS;
	if (!busy)
		a->active++;
	pthread_mutex_unlock(&a->lock);
	if (busy) {
		web_log("login refused: %d logins already under way (%s from %s)", MAX_LOGINS, user,
		        rq->peer);
		rs->retry_after = 1;
		return web_reply_error(rs, 429, "too many logins at once; try again");
	}
	job = calloc(1, sizeof(*job));
	if (job) {
		job->ctx = rq->ctx;
		snprintf(job->service, sizeof(job->service), "%s", a->service);
		snprintf(job->user, sizeof(job->user), "%s", user);
		snprintf(job->password, sizeof(job->password), "%s", password);
		snprintf(job->peer, sizeof(job->peer), "%s", rq->peer);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &attr, login_worker, job);
		pthread_attr_destroy(&attr);
		if (rc == 0) {
			a->pending = job;
			return WEB_PENDING;
		}
		explicit_bzero(job, sizeof(*job));
		free(job);
	}
	pthread_mutex_lock(&a->lock);
	a->active--;
	pthread_mutex_unlock(&a->lock);
	return web_reply_error(rs, 500, "cannot start the log-in");
}

static int route_login(struct web_req *rq, struct web_resp *rs)
{
	struct web_auth *a = rq->ctx->auth;
	int wait = web_rl_wait(&a->rl, rq->peer, time(NULL));
	cJSON *j, *user, *pass;
	int rc;

	if (wait > 0) {
		web_log("login refused: too many failures from %s (retry in %d s)", rq->peer, wait);
		rs->retry_after = wait;
		return web_reply_error(rs, 429, "too many failed logins; try again in %d s", wait);
	}
	j = cJSON_ParseWithLength(rq->body, rq->body_len);
	user = cJSON_GetObjectItemCaseSensitive(j, "user");
	pass = cJSON_GetObjectItemCaseSensitive(j, "password");
	if (!cJSON_IsString(user) || !cJSON_IsString(pass))
		rc = web_reply_error(rs, 400,
		                     "the body must be {\"user\":\"..\",\"password\":\"..\"}");
	else if (!user_name_ok(user->valuestring) || strlen(pass->valuestring) >= MAX_PASSWORD ||
	         !pass->valuestring[0])
		rc = web_reply_error(rs, 401, "wrong user name or password");
	else
		rc = start_login(rq, rs, user->valuestring, pass->valuestring);
	wipe_json_string(pass);
	cJSON_Delete(j);
	return rc;
}

static int route_logout(struct web_req *rq, struct web_resp *rs)
{
	web_log("logout: %s from %s", rq->session->user, rq->peer);
	session_drop(rq->ctx->auth, rq->session);
	rs->status = 204;
	snprintf(rs->set_cookie, sizeof(rs->set_cookie),
	         "khyve_session=; " COOKIE_ATTRS "; Max-Age=0");
	return 0;
}

static int route_session(struct web_req *rq, struct web_resp *rs)
{
	if (!rq->session)
		return web_reply_error(rs, 401, "not logged in");
	return reply_session(rs, 200, rq->session);
}

const struct web_route web_auth_routes[] = {
    {"POST", "/api/login", WEB_PUBLIC, 4096, route_login},
    {"POST", "/api/logout", WEB_CSRF, 1024, route_logout},
    {"GET", "/api/session", WEB_PUBLIC, 0, route_session},
    {NULL, NULL, 0, 0, NULL},
};

/* ---- WebSockets ---- */

static void hdr_copy(struct lws *wsi, char *out, int len, enum lws_token_indexes t)
{
	if (lws_hdr_total_length(wsi, t) >= len || lws_hdr_copy(wsi, out, len, t) < 0)
		out[0] = '\0';
}

const struct web_session *web_auth_wsi(struct web_ctx *ctx, struct lws *wsi, enum web_role need)
{
	char cookie[4096], origin[300], host[256], peer[64];
	const struct web_session *s;

	hdr_copy(wsi, cookie, sizeof(cookie), WSI_TOKEN_HTTP_COOKIE);
	hdr_copy(wsi, origin, sizeof(origin), WSI_TOKEN_ORIGIN);
	hdr_copy(wsi, host, sizeof(host), WSI_TOKEN_HOST);
	lws_get_peer_simple(wsi, peer, sizeof(peer));
	web_peer_plain(peer);
	if (!web_origin_ok(origin, host)) {
		web_log("refused: WebSocket from %s with Origin '%s' for host '%s'", peer, origin,
		        host);
		return NULL;
	}
	s = web_auth_session(ctx, cookie);
	if (!s) {
		web_log("refused: WebSocket from %s without a session", peer);
		return NULL;
	}
	if (s->role < need) {
		web_log("refused: WebSocket from %s: %s is a %s", peer, s->user,
		        role_name(s->role));
		return NULL;
	}
	return s;
}

/* ---- life cycle ---- */

/* Without its file PAM quietly uses the service "other": say so once. */
static void warn_missing_service(const char *service)
{
	char etc[300], lib[300];

	snprintf(etc, sizeof(etc), "/etc/pam.d/%s", service);
	snprintf(lib, sizeof(lib), "/usr/lib/pam.d/%s", service);
	if (access(etc, F_OK) < 0 && access(lib, F_OK) < 0)
		web_log("warning: no %s: PAM checks log-ins with its service 'other' "
		        "(make install puts khyve's there)",
		        etc);
}

int web_auth_init(struct web_ctx *ctx)
{
	const char *svc = getenv("KHYVE_PAM_SERVICE");
	struct web_auth *a = calloc(1, sizeof(*a));

	if (!a) {
		web_log("out of memory");
		return -1;
	}
	pthread_mutex_init(&a->lock, NULL);
	snprintf(a->service, sizeof(a->service), "%s", svc && *svc ? svc : DEFAULT_SERVICE);
	warn_missing_service(a->service);
	ctx->auth = a;
	return 0;
}

void web_auth_stop(struct web_ctx *ctx)
{
	struct web_auth *a = ctx->auth;
	int active = 1;

	if (!a)
		return;
	/* A login in PAM ends within pam_faildelay (2 s): wait a little for it. */
	for (int i = 0; i < 100 && active; i++) {
		pthread_mutex_lock(&a->lock);
		active = a->active;
		pthread_mutex_unlock(&a->lock);
		if (active)
			usleep(50 * 1000);
	}
	pthread_mutex_lock(&a->lock);
	a->stopping = true;
	pthread_mutex_unlock(&a->lock);
}

void web_auth_free(struct web_ctx *ctx)
{
	struct web_auth *a = ctx->auth;
	int active;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	active = a->active;
	pthread_mutex_unlock(&a->lock);
	/* A worker still in PAM owns its job and the lock: leave them to exit(). */
	if (active)
		return;
	for (struct web_login_job *j = a->done, *next; j; j = next) {
		next = j->next;
		free(j);
	}
	explicit_bzero(a->sessions, sizeof(a->sessions));
	pthread_mutex_destroy(&a->lock);
	free(a);
	ctx->auth = NULL;
}
