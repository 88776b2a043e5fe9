/*
 * Stand-ins for the symbols parts A2 (guests.c, metrics.c, tasks.c,
 * upload.c) and A3 (ws.c) of vm web define, so that branch websrv links on
 * its own.  Removed at merge.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include <libwebsockets.h>

#include "web/web.h"

static int stub_metrics(struct web_req *rq, struct web_resp *rs)
{
	(void)rq;
	rs->status = 200;
	rs->content_type = "text/plain; version=0.0.4";
	rs->body = strdup("# HELP khyve_guests Guests.\n# TYPE khyve_guests gauge\n");
	rs->len = rs->body ? strlen(rs->body) : 0;
	return 0;
}

/* A change that changes nothing: the access checks and body limits apply. */
static int stub_guest_action(struct web_req *rq, struct web_resp *rs)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "arg", rq->arg);
	cJSON_AddNumberToObject(o, "body_len", (double)rq->body_len);
	return web_reply_json(rs, 202, o);
}

const struct web_route web_guest_routes[] = {
    {"GET", "/metrics", WEB_METRICS_TOKEN, 0, stub_metrics},
    {"POST", "/api/guests/", WEB_CHANGE, 16384, stub_guest_action},
    {NULL, NULL, 0, 0, NULL},
};

int web_task_start(struct web_ctx *ctx, const char *user, char *const argv[], char *err,
                   size_t errlen)
{
	(void)ctx, (void)user, (void)argv;
	snprintf(err, errlen, "tasks are not built in");
	return -1;
}

void web_tasks_poll(struct web_ctx *ctx)
{
	(void)ctx;
}

int web_tasks_init(struct web_ctx *ctx)
{
	(void)ctx;
	return 0;
}

void web_tasks_free(struct web_ctx *ctx)
{
	(void)ctx;
}

/* An upload that counts bytes and keeps none. */
struct web_upload {
	unsigned long long length, got;
};

struct web_upload *web_upload_begin(struct web_ctx *ctx, const char *name,
                                    unsigned long long length, int *status, char *err,
                                    size_t errlen)
{
	struct web_upload *u = calloc(1, sizeof(*u));

	(void)ctx, (void)name;
	if (!u) {
		*status = 500;
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	u->length = length;
	return u;
}

int web_upload_write(struct web_upload *u, const void *buf, size_t len)
{
	(void)buf;
	u->got += len;
	return 0;
}

int web_upload_finish(struct web_upload *u, char *err, size_t errlen)
{
	int rc = u->got == u->length ? 0 : -1;

	if (rc)
		snprintf(err, errlen, "short upload");
	free(u);
	return rc;
}

void web_upload_abort(struct web_upload *u)
{
	free(u);
}

static int stub_ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                            size_t len)
{
	(void)user, (void)in, (void)len;
	/* Only the upgrade's check (web_auth_wsi, A1's) is real here. */
	if (reason == LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION)
		return !web_auth_wsi(lws_context_user(lws_get_context(wsi)), wsi, WEB_ROLE_ADMIN);
	return 0;
}

const struct lws_protocols web_ws_vnc_protocol = {"khyve-vnc", stub_ws_callback, 0, 0, 0, NULL, 0};
const struct lws_protocols web_ws_serial_protocol = {
    "khyve-serial", stub_ws_callback, 0, 0, 0, NULL, 0};
