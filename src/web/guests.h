/*
 * Part A2 of `vm web` (docs/web.md, the contract in web.h): the JSON views
 * of vm's guests (guests.c), the Prometheus text of /metrics (metrics.c),
 * tasks (tasks.c) and ISO uploads (upload.c).  What is declared here is
 * shared by those files and reached by tests/unit/test_web_guests.c; the
 * route table itself is web_guest_routes in web.h.
 */
#ifndef KHYVE_WEB_GUESTS_H
#define KHYVE_WEB_GUESTS_H

#include <stdbool.h>
#include <stddef.h>

#include "web/web.h"

struct cJSON;

/* khyve API calls made by the daemon are bounded by this (contract: 500 ms). */
#define WEB_API_TIMEOUT_MS 500

/* ---- metrics.c: the Prometheus text exposition format (version 0.0.4) ---- */

/*
 * A set of metric families being collected (opaque).  Samples of one family
 * stay together under one HELP and TYPE line whatever order guests come in,
 * as the exposition format requires.  Not thread-safe.
 */
struct web_metrics;

/* A new empty set; NULL when out of memory. */
struct web_metrics *web_metrics_new(void);
void web_metrics_free(struct web_metrics *m);

/* khyve_guests{state="running"|"stopped"|"paused"}: the host's guest counts. */
void web_metrics_guest_counts(struct web_metrics *m, unsigned running, unsigned stopped,
                              unsigned paused);

/*
 * The series of guest `vm`: khyve_guest_up{vm} (`up` 0/1) and, when
 * `counters` (vm.counters of docs/api.md, borrowed) is an object,
 * khyve_guest_uptime_seconds from uptime_ms and one family per counter key
 * of each source: vcpu -> khyve_vcpu_K{vm,vcpu}, disk -> khyve_block_K{vm,
 * disk}, nic -> khyve_net_K{vm,nic}, vnc -> khyve_vnc_K{vm}.  Keys ending
 * _total are counters, others gauges, {"buckets","sum","count"} objects
 * histograms; a unit suffix _ns/_us/_ms becomes _seconds (values scaled).
 * Keys that are not [a-z0-9_] names, and values that are not numbers, are
 * skipped.  Label values are escaped (\\, \", \n).
 */
void web_metrics_guest(struct web_metrics *m, const char *vm, bool up,
                       const struct cJSON *counters);

/* The whole text (malloc'd, NUL-terminated; caller frees), its length in
 * *len; NULL when out of memory. */
char *web_metrics_text(struct web_metrics *m, size_t *len);

/* GET /metrics (a route of web_guest_routes). */
int web_metrics_handler(struct web_req *rq, struct web_resp *rs);

/* ---- guests.c ---- */

struct vm_guest;
struct vm_status;

/* GET /api/v1/`endpoint` of guest `g`'s khyve (DIR/khyve.sock) within
 * WEB_API_TIMEOUT_MS: the parsed 200 reply (caller frees), or NULL. */
struct cJSON *web_api_get(const struct vm_guest *g, const char *endpoint);

/* For a running guest: vm.info's state into st->live ("" when khyve does
 * not answer) and, when `counters` is not NULL, vm.counters into it (NULL
 * when none; caller frees). */
void web_guest_ask(const struct vm_guest *g, struct vm_status *st, struct cJSON **counters);

/* A `vm create` (+ `vm install`) request of POST /api/guests, checked. */
struct web_create {
	char name[VM_NAME_MAX + 1];
	char template[VM_NAME_MAX + 1];
	char datastore[VM_NAME_MAX + 1]; /* "" for the default */
	char size[32], memory[32], cpus[8];
	char iso[129];    /* a file of $vm_dir/.iso, "" for none */
	char *argv[16];   /* create's arguments after "vm", NULL-terminated (into the fields) */
	char *install[4]; /* "install" NAME ISO NULL, or install[0] NULL */
};

/*
 * Check every field of `body` (POST /api/guests JSON) against ctx's vm_dir
 * before anything runs: name (vm_name_valid, not existing), template (in
 * $vm_dir/.templates), datastore (known), size and memory (vm_parse_size),
 * cpus (1..288), iso (a plain name of $vm_dir/.iso).  0 with `c` filled, or
 * -1 with "FIELD: reason" in `err` (for a 400).
 */
int web_create_check(const struct web_ctx *ctx, const char *body, struct web_create *c, char *err,
                     size_t errlen);

/* The handlers, reachable from unit tests. */
int web_guests_list(struct web_req *rq, struct web_resp *rs);
int web_guests_get_or_action(struct web_req *rq, struct web_resp *rs);

/* ---- media.c: a running guest's CD/DVD drives (docs/web.md) ---- */

/* vm.info's "drives" object of `info` (NULL: none) as the detail's array
 * [{"name","device","medium","locked","bytes"}] (a new cJSON array). */
struct cJSON *web_guest_drives_json(const struct cJSON *info);

/* A POST /api/guests/NAME/media body: {"drive":D,"iso":NAME.iso|null,"force"?:bool}. */
struct web_media_req {
	char drive[16]; /* cd0: letters, digits, '-', '_' */
	char iso[160];  /* an ISO of $vm_dir/.iso (web_iso_name_valid), "" to eject */
	bool force;     /* even when the guest locked the tray */
};

/* Parse and check `body`: 0, or -1 with `err` (the 400's message). */
int web_media_parse(const char *body, struct web_media_req *m, char *err, size_t errlen);

/* POST /api/guests/NAME/media for the guest `g`: 204, or khyve's status
 * and message (404 no drive, 409 locked or not running, 400 bad body or
 * ISO name, 404 no such ISO); one log line per change.  Each khyve call
 * waits at most WEB_API_TIMEOUT_MS. */
int web_guest_media(struct web_req *rq, struct web_resp *rs, const struct vm_guest *g);
int web_guests_create(struct web_req *rq, struct web_resp *rs);
int web_tasks_list(struct web_req *rq, struct web_resp *rs);
int web_templates_list(struct web_req *rq, struct web_resp *rs);
int web_isos_list(struct web_req *rq, struct web_resp *rs);
int web_isos_upload(struct web_req *rq, struct web_resp *rs);
int web_host_get(struct web_req *rq, struct web_resp *rs);
int web_log_get(struct web_req *rq, struct web_resp *rs);

/* ---- tasks.c ---- */

/* The tasks as GET /api/tasks lists them, newest first (a new cJSON array). */
struct cJSON *web_tasks_json(struct web_ctx *ctx);

/*
 * web_task_start() with a second command `then` (arguments after "vm",
 * NULL for none) run when the first exits 0, as one task (create + install).
 */
int web_task_start2(struct web_ctx *ctx, const char *user, char *const argv[], char *const then[],
                    char *err, size_t errlen);

/* ---- upload.c ---- */

/* An ISO name the upload accepts: [A-Za-z0-9][A-Za-z0-9._+-]*, ends ".iso", at most 128. */
bool web_iso_name_valid(const char *name);

/* The HTTP status for web_upload_write()'s failure `err` (its errno): 507
 * for ENOSPC/EDQUOT, 413 for EFBIG (more than Content-Length), else 500. */
int web_upload_status(int err);

/* The 201 reply of a finished upload: {"name":NAME,"size_bytes":SIZE}. */
int web_upload_reply(struct web_resp *rs, const char *name, unsigned long long size);

#endif
