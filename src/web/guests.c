/*
 * The JSON API of vm's guests for the web pages (the contract's A2 routes):
 * guests and their state, configuration, disks and NICs; actions and
 * `vm create` run as tasks (tasks.c); templates, ISOs, the host's switches
 * and datastores, and the guests' vm-bhyve.log.  Everything is read from
 * vm's files (src/vm) and the guests' API sockets with a short timeout;
 * nothing here changes a file itself: changes are `vm` commands.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "lib/apiclient.h"
#include "vm/live.h"
#include "vm/state.h"
#include "vm/storage.h"
#include "vm/switch.h"
#include "web/guests.h"

#define LOG_TAIL_MAX  (256 * 1024) /* bytes read from the end of each vm-bhyve.log */
#define LOG_LIMIT_DEF 200
#define LOG_LIMIT_MAX 2000
#define DISKS_MAX     64
#define NICS_MAX      32

/* ---- khyve's API ---- */

cJSON *web_api_get(const struct vm_guest *g, const char *endpoint)
{
	return vm_live_get(g, endpoint, WEB_API_TIMEOUT_MS);
}

void web_guest_ask(const struct vm_guest *g, struct vm_status *st, cJSON **counters)
{
	static const char *const known[] = {"Running", "Paused", "Starting"};
	cJSON *info = web_api_get(g, "vm.info");
	const cJSON *state = cJSON_GetObjectItemCaseSensitive(info, "state");

	st->live[0] = '\0';
	for (size_t i = 0; cJSON_IsString(state) && i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(state->valuestring, known[i]))
			snprintf(st->live, sizeof(st->live), "%s", known[i]);
	cJSON_Delete(info);
	if (counters)
		*counters = web_api_get(g, "vm.counters");
}

/* ---- a guest as the list shows it ---- */

/* The guest is one of vm_list (started at boot by `vm startall`). */
static bool autostart(const struct vm_sys *sys, const char *name)
{
	return vm_words_has(rcconf_get_default(sys->conf, "vm_list", ""), name);
}

static const char *state_word(const struct vm_status *st)
{
	if (st->state == VM_STOPPED)
		return "Stopped";
	if (st->state == VM_LOCKED)
		return "Locked";
	if (st->state == VM_SUSPENDED)
		return "Suspended";
	return st->live[0] ? st->live : "Running";
}

static const char *conf_or(const struct vm_guest *g, const char *key, const char *def)
{
	return g->conf ? rcconf_get_default(g->conf, key, def) : def;
}

/* The list entry of `g` (its state read now, khyve asked when it runs). */
static cJSON *guest_entry(const struct vm_sys *sys, const struct vm_guest *g, struct vm_status *st,
                          cJSON **counters)
{
	cJSON *o = cJSON_CreateObject();
	struct vm_proc_usage u;
	bool running, usage;

	vm_status_get(sys, g, st);
	running = st->state == VM_RUNNING;
	if (running)
		web_guest_ask(g, st, counters);
	usage = running && st->khyve > 0 && vm_proc_usage(st->khyve, &u) == 0;
	cJSON_AddStringToObject(o, "name", g->name);
	cJSON_AddStringToObject(o, "datastore", g->datastore);
	cJSON_AddStringToObject(o, "state", state_word(st));
	if (running && st->supervisor > 0)
		cJSON_AddNumberToObject(o, "pid", st->supervisor);
	else
		cJSON_AddNullToObject(o, "pid");
	cJSON_AddStringToObject(o, "cpus", conf_or(g, "cpu", "-"));
	cJSON_AddStringToObject(o, "memory", conf_or(g, "memory", "-"));
	cJSON_AddStringToObject(o, "vnc", running ? st->vnc : "");
	cJSON_AddBoolToObject(o, "autostart", autostart(sys, g->name));
	cJSON_AddStringToObject(o, "loader",
	                        g->conf ? conf_or(g, "loader", "none") : "(bad config)");
	if (usage) {
		cJSON_AddNumberToObject(o, "uptime_s", (double)u.uptime_s);
		cJSON_AddNumberToObject(o, "cpu_percent", u.cpu_percent);
		cJSON_AddNumberToObject(o, "rss_kib", (double)u.rss_kib);
	} else {
		cJSON_AddNullToObject(o, "uptime_s");
		cJSON_AddNullToObject(o, "cpu_percent");
		cJSON_AddNullToObject(o, "rss_kib");
	}
	return o;
}

struct list_arg {
	const struct vm_sys *sys;
	cJSON *guests;
	unsigned running, total;
};

static int list_one(struct vm_guest *g, void *arg)
{
	struct list_arg *a = arg;
	struct vm_status st;

	cJSON_AddItemToArray(a->guests, guest_entry(a->sys, g, &st, NULL));
	a->total++;
	a->running += st.state == VM_RUNNING;
	return 0;
}

int web_guests_list(struct web_req *rq, struct web_resp *rs)
{
	struct list_arg a = {.sys = rq->ctx->sys, .guests = cJSON_CreateArray()};
	cJSON *o = cJSON_CreateObject(), *host = cJSON_CreateObject();
	char name[256] = "";

	vm_guest_foreach(a.sys, list_one, &a);
	gethostname(name, sizeof(name) - 1);
	cJSON_AddStringToObject(host, "name", name);
	cJSON_AddNumberToObject(host, "guests_running", a.running);
	cJSON_AddNumberToObject(host, "guests_total", a.total);
	cJSON_AddItemToObject(o, "host", host);
	cJSON_AddItemToObject(o, "guests", a.guests);
	return web_reply_json(rs, 200, o);
}

/* ---- one guest ---- */

static cJSON *config_json(const struct vm_guest *g)
{
	cJSON *o = cJSON_CreateObject();

	for (size_t i = 0; g->conf && i < rcconf_count(g->conf); i++)
		cJSON_AddStringToObject(o, rcconf_key_at(g->conf, i), rcconf_value_at(g->conf, i));
	return o;
}

static cJSON *disks_json(const struct vm_guest *g)
{
	cJSON *a = cJSON_CreateArray();

	for (unsigned n = 0; g->conf && n < DISKS_MAX; n++) {
		char key[32], path[PATH_MAX];
		const char *name;
		struct stat sb;
		cJSON *d;

		snprintf(key, sizeof(key), "disk%u_name", n);
		if (!(name = rcconf_get(g->conf, key)))
			break;
		d = cJSON_CreateObject();
		cJSON_AddNumberToObject(d, "index", n);
		snprintf(key, sizeof(key), "disk%u_type", n);
		cJSON_AddStringToObject(d, "type", rcconf_get_default(g->conf, key, "virtio-blk"));
		cJSON_AddStringToObject(d, "name", name);
		if (name[0] == '/')
			snprintf(path, sizeof(path), "%s", name);
		else if (vm_path(path, g->dir, name))
			path[0] = '\0';
		if (path[0] && stat(path, &sb) == 0)
			cJSON_AddNumberToObject(d, "size_bytes", (double)sb.st_size);
		else
			cJSON_AddNullToObject(d, "size_bytes");
		cJSON_AddItemToArray(a, d);
	}
	return a;
}

static cJSON *nics_json(const struct vm_guest *g)
{
	cJSON *a = cJSON_CreateArray();

	for (unsigned n = 0; g->conf && n < NICS_MAX; n++) {
		char key[32];
		const char *type;
		cJSON *d;

		snprintf(key, sizeof(key), "network%u_type", n);
		if (!(type = rcconf_get(g->conf, key)))
			break;
		d = cJSON_CreateObject();
		cJSON_AddNumberToObject(d, "index", n);
		cJSON_AddStringToObject(d, "type", type);
		snprintf(key, sizeof(key), "network%u_switch", n);
		cJSON_AddStringToObject(d, "switch", rcconf_get_default(g->conf, key, ""));
		snprintf(key, sizeof(key), "network%u_mac", n);
		cJSON_AddStringToObject(d, "mac", rcconf_get_default(g->conf, key, ""));
		cJSON_AddItemToArray(a, d);
	}
	return a;
}

static cJSON *snapshots_json(const struct vm_guest *g)
{
	cJSON *a = cJSON_CreateArray();
	struct snap_set s = {0};

	if (storage_snapshots_read(g, &s) == 0)
		for (size_t i = 0; i < s.n; i++)
			cJSON_AddItemToArray(a, cJSON_CreateString(s.v[i].name));
	free(s.v);
	return a;
}

/* comports ("com1" when unset, as vm-bhyve), only com1..com4. */
static cJSON *console_ports_json(const struct vm_guest *g)
{
	const char *list = conf_or(g, "comports", "");
	cJSON *a = cJSON_CreateArray();
	char word[16];

	for (size_t i = 0; vm_words_at(list, i, word, sizeof(word)) == 0; i++)
		if (strlen(word) == 4 && !strncmp(word, "com", 3) && word[3] >= '1' &&
		    word[3] <= '4')
			cJSON_AddItemToArray(a, cJSON_CreateString(word));
	if (!cJSON_GetArraySize(a))
		cJSON_AddItemToArray(a, cJSON_CreateString("com1"));
	return a;
}

static int guest_detail(struct web_req *rq, struct web_resp *rs, const struct vm_guest *g)
{
	struct vm_status st;
	cJSON *counters = NULL, *o = guest_entry(rq->ctx->sys, g, &st, &counters);

	cJSON_AddItemToObject(o, "config", config_json(g));
	cJSON_AddItemToObject(o, "disks", disks_json(g));
	cJSON_AddItemToObject(o, "nics", nics_json(g));
	cJSON_AddItemToObject(o, "snapshots", snapshots_json(g));
	cJSON_AddItemToObject(o, "console_ports", console_ports_json(g));
	cJSON_AddItemToObject(o, "counters", counters ? counters : cJSON_CreateNull());
	if (st.state == VM_RUNNING) {
		cJSON *info = web_api_get(g, "vm.info");
		cJSON_AddItemToObject(o, "drives", web_guest_drives_json(info));
		cJSON_Delete(info);
	} else {
		cJSON_AddItemToObject(o, "drives", cJSON_CreateArray());
	}
	return web_reply_json(rs, 200, o);
}

/* 202 {"task":ID} for a started task, or 500 with why not. */
static int reply_task(struct web_resp *rs, int id, const char *err)
{
	cJSON *o;

	if (id < 0)
		return web_reply_error(rs, 500, "%s", err);
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "task", id);
	return web_reply_json(rs, 202, o);
}

static const char *user_of(const struct web_req *rq)
{
	return rq->session ? rq->session->user : "";
}

static int guest_action(struct web_req *rq, struct web_resp *rs, const struct vm_guest *g,
                        const char *action)
{
	const char *name = g->name;
	static const struct {
		const char *action, *cmd;
		bool force;
	} actions[] = {{"start", "start", false},
	               {"stop", "stop", false},
	               {"restart", "restart", false},
	               {"poweroff", "poweroff", true},
	               {"reset", "reset", true}};
	char err[256];

	if (!strcmp(action, "media"))
		return web_guest_media(rq, rs, g);
	for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++) {
		if (strcmp(action, actions[i].action))
			continue;
		char *argv[] = {(char *)actions[i].cmd, actions[i].force ? "-f" : (char *)name,
		                actions[i].force ? (char *)name : NULL, NULL};
		return reply_task(rs, web_task_start(rq->ctx, user_of(rq), argv, err, sizeof(err)),
		                  err);
	}
	return web_reply_error(rs, 404, "no such action: %s", action);
}

int web_guests_get_or_action(struct web_req *rq, struct web_resp *rs)
{
	char name[VM_NAME_MAX + 1], err[PATH_MAX + 128];
	const char *slash = strchr(rq->arg, '/');
	size_t nl = slash ? (size_t)(slash - rq->arg) : strlen(rq->arg);
	struct vm_guest g;
	int rc;

	if (nl == 0 || nl > VM_NAME_MAX)
		return web_reply_error(rs, 404, "no such guest");
	memcpy(name, rq->arg, nl);
	name[nl] = '\0';
	if (!vm_name_valid(name) || vm_guest_find(rq->ctx->sys, name, &g, err, sizeof(err)) < 0) {
		vm_guest_free(&g);
		return web_reply_error(rs, 404, "%s: no such guest", name);
	}
	if (!strcmp(rq->method, "GET"))
		rc = slash ? web_reply_error(rs, 404, "no such page") : guest_detail(rq, rs, &g);
	else
		rc = slash && !strchr(slash + 1, '/') ? guest_action(rq, rs, &g, slash + 1)
		                                      : web_reply_error(rs, 404, "no such action");
	vm_guest_free(&g);
	return rc;
}

/* ---- create ---- */

/* A string field of the request: absent (NULL: ok), or a string no longer than max. */
static int field(const cJSON *body, const char *key, size_t max, char *out, bool required,
                 char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);

	out[0] = '\0';
	if (!v || cJSON_IsNull(v) || (cJSON_IsString(v) && !v->valuestring[0] && !required)) {
		if (!required)
			return 0;
		snprintf(err, errlen, "%s: missing", key);
		return -1;
	}
	if (cJSON_IsNumber(v) && !strcmp(key, "cpus") && v->valuedouble >= 0 &&
	    v->valuedouble < 1000) {
		snprintf(out, max, "%d", (int)v->valuedouble);
		return 0;
	}
	if (!cJSON_IsString(v) || strlen(v->valuestring) >= max) {
		snprintf(err, errlen, "%s: want a string of at most %zu characters", key, max - 1);
		return -1;
	}
	snprintf(out, max, "%s", v->valuestring);
	return 0;
}

/* Every key of the body is one we know: a misspelled key is refused. */
static int known_fields(const cJSON *body, char *err, size_t errlen)
{
	static const char *const keys[] = {"name",   "template", "datastore", "size",
	                                   "memory", "cpus",     "iso"};
	const cJSON *v;

	cJSON_ArrayForEach(v, body)
	{
		size_t i = 0;
		while (i < sizeof(keys) / sizeof(keys[0]) && strcmp(v->string, keys[i]))
			i++;
		if (i == sizeof(keys) / sizeof(keys[0])) {
			snprintf(err, errlen, "%.64s: unknown field", v->string);
			return -1;
		}
	}
	return 0;
}

/* Each field's value, checked as `vm create` and `vm install` would. */
static int check_values(const struct web_ctx *ctx, struct web_create *c, char *err, size_t errlen)
{
	const struct vm_sys *sys = ctx->sys;
	char path[PATH_MAX], e[PATH_MAX + 128];
	unsigned long long bytes;
	struct vm_guest g;
	struct stat sb;

	if (!vm_name_valid(c->name)) {
		snprintf(err, errlen, "name: '%s' is not a guest name ([A-Za-z0-9][A-Za-z0-9._-]*)",
		         c->name);
		return -1;
	}
	if (vm_guest_find(sys, c->name, &g, e, sizeof(e)) == 0) {
		vm_guest_free(&g);
		snprintf(err, errlen, "name: %s exists already", c->name);
		return -1;
	}
	vm_guest_free(&g);
	if (!vm_name_valid(c->template) ||
	    snprintf(path, sizeof(path), "%s/.templates/%s.conf", sys->vm_dir, c->template) >=
	        PATH_MAX ||
	    stat(path, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "template: no such template: %s", c->template);
		return -1;
	}
	if (c->datastore[0] && !vm_datastore_path(sys, c->datastore)) {
		snprintf(err, errlen, "datastore: no such datastore: %s", c->datastore);
		return -1;
	}
	if (c->size[0] && vm_parse_size(c->size, &bytes) < 0) {
		snprintf(err, errlen, "size: '%s' is not a size (e.g. 20G, 512M)", c->size);
		return -1;
	}
	if (c->memory[0] && (vm_parse_size(c->memory, &bytes) < 0 || bytes == 0)) {
		snprintf(err, errlen, "memory: '%s' is not a memory size (e.g. 2G, 512M)",
		         c->memory);
		return -1;
	}
	if (c->cpus[0] && (strspn(c->cpus, "0123456789") != strlen(c->cpus) ||
	                   strlen(c->cpus) > 3 || atoi(c->cpus) < 1 || atoi(c->cpus) > 288)) {
		snprintf(err, errlen, "cpus: want a number of CPUs from 1 to 288");
		return -1;
	}
	if (c->iso[0] &&
	    (!web_iso_name_valid(c->iso) ||
	     snprintf(path, sizeof(path), "%s/.iso/%s", sys->vm_dir, c->iso) >= PATH_MAX ||
	     lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode))) {
		snprintf(err, errlen, "iso: no such ISO in %s/.iso: %s", sys->vm_dir, c->iso);
		return -1;
	}
	return 0;
}

/* c->argv = create [-d D] -t T [-s S] [-m M] [-c C] NAME; c->install. */
static void build_argv(struct web_create *c)
{
	size_t n = 0;

	c->argv[n++] = "create";
	if (c->datastore[0])
		c->argv[n++] = "-d", c->argv[n++] = c->datastore;
	c->argv[n++] = "-t", c->argv[n++] = c->template;
	if (c->size[0])
		c->argv[n++] = "-s", c->argv[n++] = c->size;
	if (c->memory[0])
		c->argv[n++] = "-m", c->argv[n++] = c->memory;
	if (c->cpus[0])
		c->argv[n++] = "-c", c->argv[n++] = c->cpus;
	c->argv[n++] = c->name;
	c->argv[n] = NULL;
	c->install[0] = NULL;
	if (c->iso[0]) {
		c->install[0] = "install";
		c->install[1] = c->name;
		c->install[2] = c->iso;
		c->install[3] = NULL;
	}
}

int web_create_check(const struct web_ctx *ctx, const char *body, struct web_create *c, char *err,
                     size_t errlen)
{
	cJSON *j = cJSON_Parse(body);
	int rc = -1;

	memset(c, 0, sizeof(*c));
	if (!cJSON_IsObject(j))
		snprintf(err, errlen, "body: want a JSON object");
	else if (known_fields(j, err, errlen) == 0 &&
	         field(j, "name", sizeof(c->name), c->name, true, err, errlen) == 0 &&
	         field(j, "template", sizeof(c->template), c->template, true, err, errlen) == 0 &&
	         field(j, "datastore", sizeof(c->datastore), c->datastore, false, err, errlen) ==
	             0 &&
	         field(j, "size", sizeof(c->size), c->size, false, err, errlen) == 0 &&
	         field(j, "memory", sizeof(c->memory), c->memory, false, err, errlen) == 0 &&
	         field(j, "cpus", sizeof(c->cpus), c->cpus, false, err, errlen) == 0 &&
	         field(j, "iso", sizeof(c->iso), c->iso, false, err, errlen) == 0 &&
	         check_values(ctx, c, err, errlen) == 0) {
		build_argv(c);
		rc = 0;
	}
	cJSON_Delete(j);
	return rc;
}

int web_guests_create(struct web_req *rq, struct web_resp *rs)
{
	struct web_create c;
	char err[PATH_MAX + 256];
	int id;

	if (web_create_check(rq->ctx, rq->body, &c, err, sizeof(err)) < 0)
		return web_reply_error(rs, 400, "%s", err);
	id = web_task_start2(rq->ctx, user_of(rq), c.argv, c.install[0] ? c.install : NULL, err,
	                     sizeof(err));
	return reply_task(rs, id, err);
}

/* ---- tasks, templates, ISOs ---- */

int web_tasks_list(struct web_req *rq, struct web_resp *rs)
{
	cJSON *o = cJSON_CreateObject(), *a = web_tasks_json(rq->ctx);

	if (!o || !a) {
		cJSON_Delete(o);
		cJSON_Delete(a);
		return web_reply_error(rs, 500, "out of memory");
	}
	cJSON_AddItemToObject(o, "tasks", a);
	return web_reply_json(rs, 200, o);
}

/* The visible plain files of $vm_dir/SUB ending in `suffix`, sorted. */
static int list_files(const struct vm_sys *sys, const char *sub, const char *suffix,
                      struct dirent ***names)
{
	char dir[PATH_MAX];

	if (vm_path(dir, sys->vm_dir, sub) < 0)
		return -1;
	int n = scandir(dir, names, storage_visible_entry, alphasort);
	int kept = 0;
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct stat sb;
		struct dirent *e = (*names)[i];
		if (storage_has_suffix(e->d_name, suffix) && vm_path(path, dir, e->d_name) == 0 &&
		    stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
			(*names)[kept++] = e;
		else
			free(e);
	}
	return n < 0 ? -1 : kept;
}

int web_templates_list(struct web_req *rq, struct web_resp *rs)
{
	struct dirent **e = NULL;
	int n = list_files(rq->ctx->sys, ".templates", ".conf", &e);
	cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "templates");

	for (int i = 0; i < n; i++) {
		storage_strip_suffix(e[i]->d_name, ".conf");
		if (vm_name_valid(e[i]->d_name))
			cJSON_AddItemToArray(a, cJSON_CreateString(e[i]->d_name));
		free(e[i]);
	}
	free(e);
	return web_reply_json(rs, 200, o);
}

/* statvfs of `dir`: free (for unprivileged users) and total bytes; -1 when unreadable. */
static int space(const char *dir, double *free_b, double *total_b)
{
	struct statvfs v;

	if (statvfs(dir, &v) < 0)
		return -1;
	*free_b = (double)v.f_bavail * (double)v.f_frsize;
	*total_b = (double)v.f_blocks * (double)v.f_frsize;
	return 0;
}

int web_isos_list(struct web_req *rq, struct web_resp *rs)
{
	const struct vm_sys *sys = rq->ctx->sys;
	struct dirent **e = NULL;
	int n = list_files(sys, ".iso", ".iso", &e);
	cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "isos");
	char dir[PATH_MAX];
	double fb = 0, tb;

	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct stat sb;
		if (snprintf(path, sizeof(path), "%s/.iso/%s", sys->vm_dir, e[i]->d_name) <
		        PATH_MAX &&
		    stat(path, &sb) == 0) {
			cJSON *iso = cJSON_CreateObject();
			cJSON_AddStringToObject(iso, "name", e[i]->d_name);
			cJSON_AddNumberToObject(iso, "size_bytes", (double)sb.st_size);
			cJSON_AddItemToArray(a, iso);
		}
		free(e[i]);
	}
	free(e);
	if (vm_path(dir, sys->vm_dir, ".iso") == 0)
		space(dir, &fb, &tb);
	cJSON_AddNumberToObject(o, "free_bytes", fb);
	return web_reply_json(rs, 200, o);
}

/*
 * POST /api/isos?name=NAME.iso with the whole body in hand: the HTTP layer
 * streams large uploads through web_upload_*() itself and answers as this
 * does (201 {"name","size_bytes"}); this handler serves a buffered body.
 */
int web_isos_upload(struct web_req *rq, struct web_resp *rs)
{
	char name[160], err[PATH_MAX + 128];
	struct web_upload *u;
	int status;

	if (web_query_get(rq->query, "name", name, sizeof(name)) < 0)
		return web_reply_error(rs, 400, "name: missing (POST /api/isos?name=NAME.iso)");
	if (!(u = web_upload_begin(rq->ctx, name, rq->body_len, &status, err, sizeof(err))))
		return web_reply_error(rs, status, "%s", err);
	if (web_upload_write(u, rq->body, rq->body_len) < 0) {
		int e = errno;
		web_upload_abort(u);
		return web_reply_error(rs, web_upload_status(e), "%s: %s", name, strerror(e));
	}
	if (web_upload_finish(u, err, sizeof(err)) < 0)
		return web_reply_error(rs, 500, "%s", err);
	fprintf(stderr, "vm web: %s uploaded %s (%zu bytes)\n", user_of(rq), name, rq->body_len);
	return web_upload_reply(rs, name, rq->body_len);
}

/* ---- host ---- */

static cJSON *switches_json(const struct vm_sys *sys)
{
	const char *list = rcconf_get_default(sys->system, "switch_list", "");
	cJSON *a = cJSON_CreateArray();
	char name[64], port[VM_IFNAME_MAX + 8], err[256];

	for (size_t i = 0; i < 256 && vm_words_at(list, i, name, sizeof(name)) == 0; i++) {
		struct vm_switch sw;
		cJSON *o, *ports;
		if (vm_switch_get(sys, name, &sw, err, sizeof(err)) < 0)
			continue;
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", sw.name);
		cJSON_AddStringToObject(o, "type", sw.type_name);
		ports = cJSON_AddArrayToObject(o, "interfaces");
		for (size_t p = 0; p < 256 && vm_words_at(sw.ports, p, port, sizeof(port)) == 0;
		     p++)
			cJSON_AddItemToArray(ports, cJSON_CreateString(port));
		cJSON_AddStringToObject(o, "address", sw.has_addr ? sw.addr_text : "");
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

static cJSON *datastores_json(const struct vm_sys *sys)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; i < vm_datastore_count(sys); i++) {
		const char *name = vm_datastore_name(sys, i), *path = vm_datastore_path(sys, name);
		double fb, tb;
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "name", name);
		cJSON_AddStringToObject(o, "path", path ? path : "");
		if (path && space(path, &fb, &tb) == 0) {
			cJSON_AddNumberToObject(o, "free_bytes", fb);
			cJSON_AddNumberToObject(o, "total_bytes", tb);
		} else {
			cJSON_AddNullToObject(o, "free_bytes");
			cJSON_AddNullToObject(o, "total_bytes");
		}
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

int web_host_get(struct web_req *rq, struct web_resp *rs)
{
	cJSON *o = cJSON_CreateObject();
	char name[256] = "";

	gethostname(name, sizeof(name) - 1);
	cJSON_AddStringToObject(o, "name", name);
	cJSON_AddItemToObject(o, "switches", switches_json(rq->ctx->sys));
	cJSON_AddItemToObject(o, "datastores", datastores_json(rq->ctx->sys));
	return web_reply_json(rs, 200, o);
}

/* ---- vm-bhyve.log ---- */

struct log_line {
	char guest[VM_NAME_MAX + 1];
	char time[16]; /* "Dec 01 22:54:13", or "" */
	char *text;
	unsigned long key; /* for ordering: seconds within the year, else the previous line's */
	size_t seq;
};

struct log_arg {
	const char *only; /* a guest's name, or NULL for all */
	char q[256];      /* the filter, "" for none */
	struct log_line *v;
	size_t n, cap;
};

/* "Mon DD HH:MM:SS" as supervisor.c writes it: seconds into the year, or -1. */
static long stamp_key(const char *s)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	unsigned d, h, m, sec;
	char mon[4];
	const char *p;

	if (strlen(s) < 15 || sscanf(s, "%3s %2u %2u:%2u:%2u", mon, &d, &h, &m, &sec) != 5 ||
	    !(p = strstr(months, mon)) || (p - months) % 3)
		return -1;
	return (long)((((p - months) / 3 * 31 + d) * 24 + h) * 60 + m) * 60 + (long)sec;
}

/* The last LOG_TAIL_MAX bytes of `path`, from the first whole line (malloc'd). */
static char *log_tail(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat sb;
	char *buf = NULL;
	ssize_t n;
	off_t off;

	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	off = sb.st_size > LOG_TAIL_MAX ? sb.st_size - LOG_TAIL_MAX : 0;
	if ((buf = malloc(LOG_TAIL_MAX + 1)) && (n = pread(fd, buf, LOG_TAIL_MAX, off)) >= 0) {
		buf[n] = '\0';
		if (off > 0) { /* the first line is cut: drop it */
			char *nl = memchr(buf, '\n', (size_t)n);
			memmove(buf, nl ? nl + 1 : buf + n, nl ? (size_t)(buf + n - nl) : 1);
		}
	} else {
		free(buf);
		buf = NULL;
	}
	close(fd);
	return buf;
}

static int log_add(struct log_arg *a, const char *guest, const char *line, unsigned long *last)
{
	struct log_line *l;
	long k = stamp_key(line);

	if (a->q[0] && !strcasestr(line, a->q))
		return 0;
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 256;
		void *v = realloc(a->v, cap * sizeof(*a->v));
		if (!v)
			return -1;
		a->v = v;
		a->cap = cap;
	}
	l = &a->v[a->n];
	memset(l, 0, sizeof(*l));
	snprintf(l->guest, sizeof(l->guest), "%s", guest);
	if (k >= 0 && line[15] == ':') {
		memcpy(l->time, line, 15);
		*last = (unsigned long)k;
		line += line[16] == ' ' ? 17 : 16;
	}
	l->key = *last;
	l->seq = a->n;
	if (!(l->text = strdup(line)))
		return -1;
	a->n++;
	return 0;
}

static int log_one(struct vm_guest *g, void *arg)
{
	struct log_arg *a = arg;
	char path[PATH_MAX], *text, *save = NULL;
	unsigned long last = 0;

	if ((a->only && strcmp(a->only, g->name)) || vm_path(path, g->dir, "vm-bhyve.log") < 0 ||
	    !(text = log_tail(path)))
		return 0;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (log_add(a, g->name, line, &last) < 0)
			break;
	free(text);
	return 0;
}

static int cmp_lines(const void *x, const void *y)
{
	const struct log_line *a = x, *b = y;

	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Query parameter `key` into `out`: 0 ("" when absent), or -1 when it is
 * there but too long or undecodable (a filter silently dropped would show
 * more than was asked for). */
static int query_param(const char *query, const char *key, char *out, size_t len)
{
	size_t kl = strlen(key);

	if (web_query_get(query, key, out, len) == 0)
		return 0;
	out[0] = '\0';
	for (const char *p = query; p && *p; p += strcspn(p, "&"), p += *p == '&')
		if (!strncmp(p, key, kl) && (p[kl] == '=' || p[kl] == '&' || !p[kl]))
			return -1;
	return 0;
}

int web_log_get(struct web_req *rq, struct web_resp *rs)
{
	struct log_arg a = {0};
	char guest[VM_NAME_MAX + 2], lim[16];
	long limit = LOG_LIMIT_DEF;
	cJSON *o, *lines;

	if (query_param(rq->query, "guest", guest, sizeof(guest)) < 0 ||
	    (guest[0] && !vm_name_valid(guest)))
		return web_reply_error(rs, 400, "guest: not a guest name");
	a.only = guest[0] ? guest : NULL;
	if (query_param(rq->query, "q", a.q, sizeof(a.q)) < 0)
		return web_reply_error(rs, 400, "q: at most %zu bytes", sizeof(a.q) - 1);
	if (query_param(rq->query, "limit", lim, sizeof(lim)) < 0)
		return web_reply_error(rs, 400, "limit: want 1 to %d", LOG_LIMIT_MAX);
	if (lim[0]) {
		char *end;
		limit = strtol(lim, &end, 10);
		if (*end || limit < 1 || limit > LOG_LIMIT_MAX)
			return web_reply_error(rs, 400, "limit: want 1 to %d", LOG_LIMIT_MAX);
	}
	vm_guest_foreach(rq->ctx->sys, log_one, &a);
	if (a.n)
		qsort(a.v, a.n, sizeof(*a.v), cmp_lines);
	o = cJSON_CreateObject();
	lines = cJSON_AddArrayToObject(o, "lines");
	for (size_t i = 0; i < a.n; i++) {
		if (i + (size_t)limit >= a.n) {
			cJSON *l = cJSON_CreateObject();
			cJSON_AddStringToObject(l, "guest", a.v[i].guest);
			cJSON_AddStringToObject(l, "time", a.v[i].time);
			cJSON_AddStringToObject(l, "text", a.v[i].text);
			cJSON_AddItemToArray(lines, l);
		}
		free(a.v[i].text);
	}
	free(a.v);
	return web_reply_json(rs, 200, o);
}

/* ---- the routes ---- */

const struct web_route web_guest_routes[] = {
    {"GET", "/api/guests", 0, 0, web_guests_list},
    {"POST", "/api/guests", WEB_CHANGE, 16 * 1024, web_guests_create},
    {"GET", "/api/guests/", 0, 0, web_guests_get_or_action},
    {"POST", "/api/guests/", WEB_CHANGE, 1024, web_guests_get_or_action},
    {"GET", "/api/tasks", 0, 0, web_tasks_list},
    {"GET", "/api/templates", 0, 0, web_templates_list},
    {"GET", "/api/isos", 0, 0, web_isos_list},
    /* The HTTP layer streams this body through upload.c; max_body bounds a buffered one. */
    {"POST", "/api/isos", WEB_CHANGE, 16 * 1024, web_isos_upload},
    {"GET", "/api/host", 0, 0, web_host_get},
    {"GET", "/api/log", 0, 0, web_log_get},
    {"GET", "/metrics", WEB_METRICS_TOKEN, 0, web_metrics_handler},
    {NULL, NULL, 0, 0, NULL},
};
