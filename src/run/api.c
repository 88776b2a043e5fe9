/*
 * The per-VM API (see api.h): request handling (api_handle and the
 * endpoint table), the JSON it builds, and the PNG of vm.screenshot.  The
 * socket and libmicrohttpd glue are in api_http.c.
 */
#include "run/api.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/machine.h"
#include "dev/pm.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/counters.h"
#include "lib/keymap.h"
#include "lib/log.h"
#include "core/snapshot.h"
#include "run/migrate.h"
#include "run/snapshot.h"

#define API_PREFIX "/api/v1/"
#define JSON_TYPE  "application/json"
#define VERSION    "khyve 0.1"

static bool parse_body(const char *body, size_t len, cJSON **out);

/* ---- replies ---- */

static void reply_json(struct api_reply *r, int status, cJSON *obj)
{
	char *text = obj != NULL ? cJSON_PrintUnformatted(obj) : NULL;

	cJSON_Delete(obj);
	if (text == NULL) {
		r->status = 500;
		r->content_type = JSON_TYPE;
		r->body = strdup("{\"error\":\"out of memory\"}");
		r->len = r->body != NULL ? strlen(r->body) : 0;
		return;
	}
	r->status = status;
	r->content_type = JSON_TYPE;
	r->body = text;
	r->len = strlen(text);
}

static void reply_error(struct api_reply *r, int status, const char *msg)
{
	cJSON *o = cJSON_CreateObject();

	if (o != NULL)
		cJSON_AddStringToObject(o, "error", msg);
	reply_json(r, status, o);
}

void api_reply_error(struct api_reply *r, int status, const char *msg)
{
	memset(r, 0, sizeof(*r));
	r->exit_after = -1;
	reply_error(r, status, msg);
}

static void reply_empty(struct api_reply *r)
{
	r->status = 204;
	r->content_type = NULL;
	r->body = NULL;
	r->len = 0;
}

void api_reply_free(struct api_reply *r)
{
	free(r->body);
	r->body = NULL;
	r->len = 0;
}

/* ---- the config snapshot ---- */

#define CONFIG_MAX_DEPTH 16

/* Add every value below `node` as "prefix.name": value (raw, unexpanded). */
static void flatten_config(cJSON *out, struct config_node *node, const char *prefix, int depth)
{
	char path[512];

	if (depth > CONFIG_MAX_DEPTH)
		return;
	for (struct config_node *c = config_node_first(node); c != NULL; c = config_node_next(c)) {
		const char *value = config_node_value(c);
		int n = snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "",
		                 config_node_name(c));

		if (n < 0 || (size_t)n >= sizeof(path))
			continue;
		if (value != NULL)
			cJSON_AddStringToObject(out, path, value);
		else
			flatten_config(out, c, path, depth + 1);
	}
}

int api_init(struct api *a, struct machine *m)
{
	memset(a, 0, sizeof(*a));
	a->m = m;
	a->listen_fd = a->lock_fd = a->dir_fd = a->stop_fd = a->wake_fd = -1;
	a->config = cJSON_CreateObject();
	if (a->config == NULL)
		return -1;
	flatten_config(a->config, config_root_node(), "", 0);
	return 0;
}

/* ---- GET endpoints ---- */

static uint64_t uptime_ms(const struct machine *m)
{
	uint64_t now = monotonic_ns();

	return now > m->start_ns ? (now - m->start_ns) / 1000000u : 0;
}

static void on_ping(struct api *a, const cJSON *body, struct api_reply *r)
{
	cJSON *o = cJSON_CreateObject();

	(void)a;
	(void)body;
	if (o != NULL) {
		cJSON_AddStringToObject(o, "version", VERSION);
		cJSON_AddNumberToObject(o, "pid", (double)getpid());
	}
	reply_json(r, 200, o);
}

static const char *vm_state(struct machine *m)
{
	if (__atomic_load_n(&m->start_holds, __ATOMIC_SEQ_CST) > 0)
		return "Starting";
	return machine_is_paused(m) ? "Paused" : "Running";
}

/* vm.info's "drives": each removable-medium drive and its medium now. */
static void add_drives(cJSON *o, struct machine *m)
{
	cJSON *drives = cJSON_AddObjectToObject(o, "drives");

	for (unsigned i = 0; drives != NULL && i < m->nmedia && i < MACHINE_MAX_MEDIA; i++) {
		const struct machine_media_drive *d = &m->media[i];
		cJSON *j = cJSON_AddObjectToObject(drives, d->name);
		bool present = false, locked = false;
		uint64_t bytes = 0;

		if (j == NULL)
			return;
		if (d->state != NULL)
			d->state(d->dev, &present, &locked, &bytes);
		cJSON_AddStringToObject(j, "device", d->device);
		cJSON_AddStringToObject(j, "slot", d->slot);
		cJSON_AddNumberToObject(j, "port", d->port);
		cJSON_AddBoolToObject(j, "medium", present);
		cJSON_AddBoolToObject(j, "locked", locked);
		cJSON_AddNumberToObject(j, "bytes", present ? (double)bytes : 0);
	}
}

/* The balloon's figures into `o` (vm.info's "balloon", vm.balloon),
 * statistics refreshed for up to `refresh_ms`. */
static void add_balloon(cJSON *o, struct machine *m, unsigned refresh_ms)
{
	struct machine_balloon_info bi;
	cJSON *st;

	if (o == NULL)
		return;
	m->balloon.info(m->balloon.dev, refresh_ms, &bi);
	cJSON_AddNumberToObject(o, "memory_bytes", (double)bi.ram_bytes);
	cJSON_AddNumberToObject(o, "target_bytes", (double)bi.target_bytes);
	cJSON_AddNumberToObject(o, "actual_bytes", (double)bi.actual_bytes);
	cJSON_AddNumberToObject(o, "reported_bytes", (double)bi.reported_bytes);
	cJSON_AddBoolToObject(o, "free_page_reporting", bi.reporting);
	cJSON_AddBoolToObject(o, "deflate_on_oom", bi.deflate_on_oom);
	if (!bi.stats_valid)
		return;
	cJSON_AddNumberToObject(o, "stats_age_ms", (double)bi.stats_age_ms);
	st = cJSON_AddObjectToObject(o, "stats");
	for (unsigned i = 0; st != NULL && i < bi.nstats; i++)
		cJSON_AddNumberToObject(st, bi.stat[i].name, (double)bi.stat[i].value);
}

static void on_info(struct api *a, const cJSON *body, struct api_reply *r)
{
	struct machine *m = a->m;
	cJSON *o = cJSON_CreateObject();
	cJSON *cfg = cJSON_Duplicate(a->config, true);

	(void)body;
	if (o == NULL || cfg == NULL) {
		cJSON_Delete(o);
		cJSON_Delete(cfg);
		reply_error(r, 500, "out of memory");
		return;
	}
	cJSON_AddStringToObject(o, "name", m->name != NULL ? m->name : "");
	cJSON_AddStringToObject(o, "state", vm_state(m));
	cJSON_AddNumberToObject(o, "uptime_ms", (double)uptime_ms(m));
	cJSON_AddNumberToObject(o, "vcpus", m->vm.ncpus);
	cJSON_AddNumberToObject(o, "memory_bytes",
	                        (double)(m->vm.mem.lowmem_size + m->vm.mem.highmem_size));
	cJSON_AddItemToObject(o, "config", cfg);
	add_drives(o, m);
	if (m->balloon.dev != NULL)
		add_balloon(cJSON_AddObjectToObject(o, "balloon"), m, 0);
	reply_json(r, 200, o);
}

/* A counter_out that writes into the cJSON object of one source. */
static void put_number(struct counter_out *o, const char *key, uint64_t value)
{
	cJSON_AddNumberToObject(o->ctx, key, (double)value);
}

static void put_hist(struct counter_out *o, const char *key, unsigned n, const uint64_t *le,
                     const uint64_t *count, uint64_t sum)
{
	cJSON *h = cJSON_AddObjectToObject(o->ctx, key);
	cJSON *buckets = h != NULL ? cJSON_AddArrayToObject(h, "buckets") : NULL;

	if (buckets == NULL)
		return;
	for (unsigned i = 0; i < n; i++) {
		cJSON *pair = cJSON_CreateArray();

		if (pair == NULL)
			return;
		cJSON_AddItemToArray(pair, le[i] == UINT64_MAX ? cJSON_CreateString("+Inf")
		                                               : cJSON_CreateNumber((double)le[i]));
		cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)count[i]));
		cJSON_AddItemToArray(buckets, pair);
	}
	cJSON_AddNumberToObject(h, "sum", (double)sum);
	cJSON_AddNumberToObject(h, "count", n > 0 ? (double)count[n - 1] : 0);
}

static void add_source(struct counter_source *s, void *ctx)
{
	cJSON *groups = ctx;
	cJSON *group = cJSON_GetObjectItemCaseSensitive(groups, counter_kind_name(s->kind));
	cJSON *obj;
	struct counter_out out = {.put = put_number, .put_hist = put_hist};

	if (group == NULL)
		group = cJSON_AddObjectToObject(groups, counter_kind_name(s->kind));
	if (group == NULL || cJSON_GetObjectItemCaseSensitive(group, s->name) != NULL)
		return;
	obj = cJSON_AddObjectToObject(group, s->name);
	if (obj == NULL)
		return;
	out.ctx = obj;
	s->read(s->arg, &out);
}

static void on_counters(struct api *a, const cJSON *body, struct api_reply *r)
{
	cJSON *o = cJSON_CreateObject();

	(void)body;
	if (o == NULL) {
		reply_error(r, 500, "out of memory");
		return;
	}
	cJSON_AddNumberToObject(o, "uptime_ms", (double)uptime_ms(a->m));
	/* Every group, even without a source: {} */
	for (unsigned k = 0; k < COUNTER_KINDS; k++)
		cJSON_AddObjectToObject(o, counter_kind_name((enum counter_kind)k));
	counters_foreach(add_source, o);
	reply_json(r, 200, o);
}

/* ---- PUT endpoints ---- */

static void on_pause(struct api *a, const cJSON *body, struct api_reply *r)
{
	int rc = machine_pause(a->m, API_PAUSE_WAIT_MS);

	(void)body;
	if (rc == 0)
		reply_empty(r);
	else if (rc == -EALREADY)
		reply_error(r, 409, "already paused");
	else if (rc == -EAGAIN)
		reply_error(r, 409, "the VM is starting or stopping");
	else
		reply_error(r, 500, "a vCPU did not stop within 1 s; the VM goes on");
}

static void on_resume(struct api *a, const cJSON *body, struct api_reply *r)
{
	(void)body;
	/* The user chose this copy over a target that never confirmed. */
	if (a->migrate_held) {
		machine_state_unquiesce(a->m);
		a->migrate_held = false;
		log_warn("resumed after an unconfirmed migration: make sure the target is not "
		         "running the guest too");
	}
	if (machine_resume(a->m) == 0)
		reply_empty(r);
	else
		reply_error(r, 409, "not paused");
}

static void on_power_button(struct api *a, const cJSON *body, struct api_reply *r)
{
	(void)body;
	if (a->m->pm != NULL && pm_power_button(a->m->pm))
		reply_empty(r);
	else
		reply_error(r, 409, "the guest is not listening to the power button");
}

/* The exit comes after the reply is out (the HTTP glue requests it). */
static void on_reset(struct api *a, const cJSON *body, struct api_reply *r)
{
	(void)a;
	(void)body;
	reply_empty(r);
	r->exit_after = KHYVE_EXIT_RESET;
}

static void on_power_off(struct api *a, const cJSON *body, struct api_reply *r)
{
	(void)a;
	(void)body;
	reply_empty(r);
	r->exit_after = KHYVE_EXIT_POWEROFF;
}

/* ---- send-keys ---- */

#define CHORD_MAX_KEYS 8
#define KEY_NAME_MAX   32

struct chord {
	unsigned n;
	uint16_t qnum[CHORD_MAX_KEYS]; /* pressed in order, released in reverse */
};

/* Modifiers, and short names people type for keys X spells otherwise. */
static uint16_t modifier_qnum(const char *name)
{
	static const struct {
		const char *name;
		uint16_t qnum;
	} mods[] = {{"ctrl", 0x1d}, {"alt", 0x38}, {"shift", 0x2a}, {"meta", 0xdb}};

	for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++)
		if (strcmp(mods[i].name, name) == 0)
			return mods[i].qnum;
	return 0;
}

static uint32_t keysym_of(const char *name)
{
	static const struct {
		const char *alias, *name;
	} aliases[] = {{"del", "Delete"},          {"delete", "Delete"}, {"enter", "Return"},
	               {"ret", "Return"},          {"esc", "Escape"},    {"tab", "Tab"},
	               {"backspace", "BackSpace"}, {"space", "space"},   {"up", "Up"},
	               {"down", "Down"},           {"left", "Left"},     {"right", "Right"},
	               {"home", "Home"},           {"end", "End"},       {"insert", "Insert"},
	               {"pgup", "Prior"},          {"pgdn", "Next"},     {"minus", "minus"}};

	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcmp(aliases[i].alias, name) == 0)
			return keymap_keysym_by_name(aliases[i].name);
	return keymap_keysym_by_name(name);
}

/* Add one key name to `c`; false when it is no key. */
static bool chord_add(struct chord *c, const char *name)
{
	uint16_t mod = modifier_qnum(name);
	struct keymap_key k;
	uint32_t sym;

	if (c->n + 2 > CHORD_MAX_KEYS)
		return false;
	if (mod != 0) {
		c->qnum[c->n++] = mod;
		return true;
	}
	sym = keysym_of(name);
	if (sym == 0 || !keymap_lookup(sym, &k))
		return false;
	if (k.shift == KEYMAP_SHIFT_ON)
		c->qnum[c->n++] = KEYMAP_QNUM_SHIFT_L;
	c->qnum[c->n++] = k.qnum;
	return true;
}

/* Parse "ctrl-alt-del" into `c`; on failure `bad` names the bad key. */
static bool chord_parse(const char *text, struct chord *c, char *bad, size_t badlen)
{
	const char *p = text;

	c->n = 0;
	for (;;) {
		const char *dash = strchr(p, '-');
		size_t n = dash != NULL ? (size_t)(dash - p) : strlen(p);
		char name[KEY_NAME_MAX];

		/* "-" alone or a trailing "-": the minus key itself */
		if (n == 0 && dash != NULL && dash[1] == '\0')
			n = 1, dash = NULL;
		if (n == 0 || n >= sizeof(name)) {
			snprintf(bad, badlen, "%.*s", (int)(n < 40 ? n : 40), p);
			return false;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		if (!chord_add(c, name)) {
			snprintf(bad, badlen, "%s", name);
			return false;
		}
		if (dash == NULL)
			return true;
		p = dash + 1;
	}
}

static void press_chord(struct machine *m, const struct chord *c)
{
	for (unsigned i = 0; i < c->n; i++)
		machine_key_event(m, true, c->qnum[i]);
	for (unsigned i = c->n; i-- > 0;)
		machine_key_event(m, false, c->qnum[i]);
}

static void on_send_keys(struct api *a, const cJSON *body, struct api_reply *r)
{
	const cJSON *keys = body != NULL ? cJSON_GetObjectItemCaseSensitive(body, "keys") : NULL;
	static struct chord chords[API_MAX_CHORDS]; /* one caller at a time (api.h) */
	unsigned n = 0;
	const cJSON *k;
	char bad[48], msg[96];

	if (!cJSON_IsArray(keys)) {
		reply_error(r, 400, "want a body {\"keys\":[\"chord\",...]}");
		return;
	}
	if (cJSON_GetArraySize(keys) > (int)API_MAX_CHORDS) {
		reply_error(r, 400, "at most 64 chords a request");
		return;
	}
	cJSON_ArrayForEach(k, keys)
	{
		if (!cJSON_IsString(k) || k->valuestring == NULL) {
			reply_error(r, 400, "keys: every element must be a string");
			return;
		}
		if (!chord_parse(k->valuestring, &chords[n], bad, sizeof(bad))) {
			snprintf(msg, sizeof(msg), "unknown key '%s'", bad);
			reply_error(r, 400, msg);
			return;
		}
		n++;
	}
	if (a->m->nkey_sinks == 0) {
		reply_error(r, 409, "no keyboard");
		return;
	}
	for (unsigned i = 0; i < n; i++)
		press_chord(a->m, &chords[i]);
	reply_empty(r);
}

/* ---- media change ---- */

/*
 * The body of vm.media-eject / vm.media-insert: {"drive":"cd0"} with an
 * optional boolean "force", no other key.  The drive's index, or -1 with
 * the error reply in `r` (400 bad body, 404 no such drive).
 */
static int media_request(struct api *a, const cJSON *body, bool *force, struct api_reply *r)
{
	const cJSON *drive, *f, *k;
	char msg[96];

	*force = false;
	if (!cJSON_IsObject(body)) {
		reply_error(r, 400, "want a body {\"drive\":\"cd0\",\"force\":false}");
		return -1;
	}
	cJSON_ArrayForEach(k, body)
	{
		if (k->string == NULL ||
		    (strcmp(k->string, "drive") != 0 && strcmp(k->string, "force") != 0)) {
			snprintf(msg, sizeof(msg), "unknown key '%.40s' (want drive, force)",
			         k->string != NULL ? k->string : "");
			reply_error(r, 400, msg);
			return -1;
		}
	}
	drive = cJSON_GetObjectItemCaseSensitive(body, "drive");
	f = cJSON_GetObjectItemCaseSensitive(body, "force");
	if (!cJSON_IsString(drive) || drive->valuestring == NULL) {
		reply_error(r, 400, "drive: want a drive's name (\"cd0\", see vm.info's drives)");
		return -1;
	}
	if (f != NULL && !cJSON_IsBool(f)) {
		reply_error(r, 400, "force: want true or false");
		return -1;
	}
	*force = cJSON_IsTrue(f);
	for (unsigned i = 0; i < a->m->nmedia && i < MACHINE_MAX_MEDIA; i++)
		if (strcmp(a->m->media[i].name, drive->valuestring) == 0)
			return (int)i;
	snprintf(msg, sizeof(msg), "no drive %.40s", drive->valuestring);
	reply_error(r, 404, msg);
	return -1;
}

/* Hand `fd` (-1: eject) to drive `idx`: 204, or 409 with its reason. */
static void media_change(struct api *a, int idx, int fd, bool force, struct api_reply *r)
{
	const struct machine_media_drive *d = &a->m->media[idx];
	char err[160] = "";

	if (d->change == NULL) {
		if (fd >= 0)
			close(fd);
		reply_error(r, 500, "the drive cannot change its medium");
		return;
	}
	if (d->change(d->dev, fd, force, err, sizeof(err)) == 0)
		reply_empty(r);
	else
		reply_error(r, 409, err[0] != '\0' ? err : "the drive refused the change");
}

static void on_media_eject(struct api *a, const cJSON *body, struct api_reply *r)
{
	bool force;
	int idx = media_request(a, body, &force, r);

	if (idx >= 0)
		media_change(a, idx, -1, force, r);
}

/* Without the upgrade (api_http.c takes those), no fd can come. */
static void on_media_insert(struct api *a, const cJSON *body, struct api_reply *r)
{
	bool force;

	if (media_request(a, body, &force, r) >= 0)
		reply_error(r, 400,
		            "vm.media-insert passes the image as a file descriptor (docs/api.md)");
}

int api_media_insert_check(struct api *a, const char *body, size_t len, bool *force,
                           struct api_reply *r)
{
	cJSON *json;
	int idx;

	memset(r, 0, sizeof(*r));
	r->exit_after = -1;
	*force = false;
	if (len > API_MAX_BODY) {
		reply_error(r, 413, "request body too large (at most 64 KiB)");
		return -1;
	}
	if (!parse_body(body, len, &json)) {
		reply_error(r, 400, "the body is not valid JSON");
		return -1;
	}
	idx = media_request(a, json, force, r);
	cJSON_Delete(json);
	return idx;
}

void api_media_insert_fd(struct api *a, int idx, bool force, int fd, struct api_reply *r)
{
	struct stat st;

	memset(r, 0, sizeof(*r));
	r->exit_after = -1;
	if (idx < 0 || (unsigned)idx >= a->m->nmedia || idx >= (int)MACHINE_MAX_MEDIA) {
		if (fd >= 0)
			close(fd);
		reply_error(r, 404, "no such drive");
		return;
	}
	if (fd < 0) {
		reply_error(r, 400, "no file descriptor came with the byte");
		return;
	}
	/* Told apart from the drive's refusals (409): the client sent the
	 * wrong thing. */
	if (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
		close(fd);
		reply_error(r, 400, "not a regular file or block device");
		return;
	}
	media_change(a, idx, fd, force, r);
}

/* ---- checkpoint and suspend ---- */

/* Without the upgrade (api_http.c takes those), no fd can come. */
static void on_state_call(struct api *a, const cJSON *body, struct api_reply *r)
{
	(void)a;
	(void)body;
	reply_error(r, 400,
	            "vm.checkpoint, vm.suspend and vm.migrate pass a file or socket descriptor "
	            "(docs/api.md)");
}

int api_state_check(struct api *a, const char *body, size_t len, struct api_reply *r)
{
	cJSON *json = NULL;
	char err[256] = "";
	bool empty;

	memset(r, 0, sizeof(*r));
	r->exit_after = -1;
	if (len > API_MAX_BODY) {
		reply_error(r, 413, "request body too large (at most 64 KiB)");
		return -1;
	}
	if (!parse_body(body, len, &json)) {
		reply_error(r, 400, "the body is not valid JSON");
		return -1;
	}
	/* No options yet: no body, or an empty object. */
	empty = json == NULL || (cJSON_IsObject(json) && json->child == NULL);
	cJSON_Delete(json);
	if (!empty) {
		reply_error(r, 400, "want no body or {}");
		return -1;
	}
	if (a->migrate_held) {
		reply_error(r, 409,
		            "a migration's outcome is unknown (COMMIT unanswered): vm.resume or "
		            "power off first");
		return -1;
	}
	if (snapshot_check(a->m, err, sizeof(err)) < 0) {
		reply_error(r, 409, err);
		return -1;
	}
	return 0;
}

void api_state_fd(struct api *a, bool suspend, int fd, struct api_reply *r)
{
	char err[384] = "";
	struct stat st;
	int mode;

	memset(r, 0, sizeof(*r));
	r->exit_after = -1;
	if (fd < 0) {
		reply_error(r, 400, "no file descriptor came with the byte");
		return;
	}
	mode = fcntl(fd, F_GETFL);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || mode < 0 ||
	    (mode & O_ACCMODE) == O_RDONLY) {
		close(fd);
		reply_error(r, 400, "want a regular file open for writing");
		return;
	}
	if (snapshot_save(a->m, fd, suspend, err, sizeof(err)) < 0) {
		close(fd);
		reply_error(r, 409, err[0] ? err : "the checkpoint failed");
		return;
	}
	close(fd);
	log_info("%s into the state file khyvectl passed", suspend ? "suspended" : "checkpoint");
	reply_empty(r);
	if (suspend)
		r->exit_after = KHYVE_EXIT_SUSPENDED;
}

void api_migrate_fd(struct api *a, int fd, struct api_reply *r)
{
	char err[512] = "";
	struct stat st;
	enum migrate_outcome out;

	memset(r, 0, sizeof(*r));
	r->exit_after = -1;
	if (fd < 0) {
		reply_error(r, 400, "no file descriptor came with the byte");
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(fd);
		reply_error(r, 400, "want a stream socket connected to khyve -R");
		return;
	}
	out = migrate_send(a->m, fd, err, sizeof(err));
	close(fd);
	a->migrate_held = out == MIGRATE_UNCERTAIN;
	if (out != MIGRATE_DONE) {
		log_warn("migration failed: %s", err);
		reply_error(r, 409, err[0] ? err : "the migration failed");
		return;
	}
	log_info("migrated out: the target runs the guest");
	reply_empty(r);
	r->exit_after = 0;
}

/* ---- screenshot ---- */

struct png_buf {
	char *data;
	size_t len, cap;
	bool failed;
};

static void png_buf_write(png_structp png, png_bytep data, png_size_t len)
{
	struct png_buf *b = png_get_io_ptr(png);

	if (b->failed)
		return;
	if (b->len + len > b->cap) {
		size_t cap = (b->cap ? b->cap * 2 : 65536) + len;
		char *p = realloc(b->data, cap);

		if (p == NULL) {
			b->failed = true;
			return;
		}
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
}

static void png_buf_flush(png_structp png)
{
	(void)png;
}

/* Encode XRGB pixels as an 8-bit RGB PNG (fast zlib level: it is a
 * screenshot, not an archive).  0, or -1. */
static int encode_png(const uint32_t *px, uint32_t w, uint32_t h, struct png_buf *out)
{
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png != NULL ? png_create_info_struct(png) : NULL;
	uint8_t *row = malloc((size_t)w * 3);
	volatile int rc = -1;

	if (png == NULL || info == NULL || row == NULL)
		goto done;
	if (setjmp(png_jmpbuf(png)))
		goto done;
	png_set_write_fn(png, out, png_buf_write, png_buf_flush);
	png_set_compression_level(png, 1);
	png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
	             PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	for (uint32_t y = 0; y < h; y++) {
		const uint32_t *p = px + (size_t)y * w;

		for (uint32_t x = 0; x < w; x++) {
			row[3 * x] = (uint8_t)(p[x] >> 16);
			row[3 * x + 1] = (uint8_t)(p[x] >> 8);
			row[3 * x + 2] = (uint8_t)p[x];
		}
		png_write_row(png, row);
	}
	png_write_end(png, NULL);
	rc = out->failed ? -1 : 0;
done:
	png_destroy_write_struct(png != NULL ? &png : NULL, info != NULL ? &info : NULL);
	free(row);
	return rc;
}

static void on_screenshot(struct api *a, const cJSON *body, struct api_reply *r)
{
	struct machine *m = a->m;
	struct png_buf out = {0};
	uint32_t *px = NULL, w = 0, h = 0;

	(void)body;
	if (m->screenshot == NULL) {
		reply_error(r, 404, "no display");
		return;
	}
	if (m->screenshot(m->screenshot_arg, &px, &w, &h) < 0 || w == 0 || h == 0) {
		free(px);
		reply_error(r, 500, "the display has no picture");
		return;
	}
	if (encode_png(px, w, h, &out) < 0) {
		free(px);
		free(out.data);
		reply_error(r, 500, "cannot encode the PNG");
		return;
	}
	free(px);
	r->status = 200;
	r->content_type = "image/png";
	r->body = out.data;
	r->len = out.len;
}

/* ---- balloon ---- */

#define API_BALLOON_REFRESH_MS 500u /* vm.balloon waits this long for fresh statistics */

static void on_balloon_get(struct api *a, const cJSON *body, struct api_reply *r)
{
	cJSON *o;

	(void)body;
	if (a->m->balloon.dev == NULL) {
		reply_error(r, 409, "the VM has no virtio-balloon");
		return;
	}
	o = cJSON_CreateObject();
	add_balloon(o, a->m, API_BALLOON_REFRESH_MS);
	reply_json(r, 200, o);
}

/* {"memory_bytes": N}: the memory the guest is to keep. */
static void on_balloon_put(struct api *a, const cJSON *body, struct api_reply *r)
{
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(body, "memory_bytes");
	char err[256];

	if (a->m->balloon.dev == NULL) {
		reply_error(r, 409, "the VM has no virtio-balloon");
		return;
	}
	if (!cJSON_IsObject(body) || cJSON_GetArraySize(body) != 1 || !cJSON_IsNumber(mem) ||
	    mem->valuedouble < 0 || mem->valuedouble > 9007199254740992.0 ||
	    mem->valuedouble != (double)(uint64_t)mem->valuedouble) {
		reply_error(r, 400, "want a body {\"memory_bytes\":N}, N a whole number of bytes");
		return;
	}
	if (a->m->balloon.set_target(a->m->balloon.dev, (uint64_t)mem->valuedouble, err,
	                             sizeof(err)) < 0) {
		reply_error(r, 400, err);
		return;
	}
	r->status = 204;
}

/* ---- routing ---- */

struct endpoint {
	const char *name; /* after API_PREFIX */
	const char *method;
	void (*fn)(struct api *a, const cJSON *body, struct api_reply *r);
};

static const struct endpoint endpoints[] = {
    {"vmm.ping", "GET", on_ping},
    {"vm.info", "GET", on_info},
    {"vm.counters", "GET", on_counters},
    {"vm.screenshot", "GET", on_screenshot},
    {"vm.pause", "PUT", on_pause},
    {"vm.resume", "PUT", on_resume},
    {"vm.power-button", "PUT", on_power_button},
    {"vm.reset", "PUT", on_reset},
    {"vm.power-off", "PUT", on_power_off},
    {"vm.send-keys", "PUT", on_send_keys},
    {"vm.media-eject", "PUT", on_media_eject},
    {"vm.media-insert", "PUT", on_media_insert},
    {"vm.balloon", "GET", on_balloon_get},
    {"vm.balloon", "PUT", on_balloon_put},
    {"vm.checkpoint", "PUT", on_state_call},
    {"vm.suspend", "PUT", on_state_call},
    {"vm.migrate", "PUT", on_state_call},
};

bool api_url_names(const char *url, const char *name)
{
	size_t plen = strlen(API_PREFIX), n = strlen(name);

	return url != NULL && strncmp(url, API_PREFIX, plen) == 0 &&
	       strncmp(url + plen, name, n) == 0 && strchr("?#", url[plen + n]) != NULL;
}

/* The endpoint named by `url` (query string ignored) for `method`, else
 * one of that name for another method (405), or NULL. */
static const struct endpoint *find_endpoint(const char *url, const char *method)
{
	const struct endpoint *named = NULL;

	for (size_t i = 0; i < sizeof(endpoints) / sizeof(endpoints[0]); i++)
		if (api_url_names(url, endpoints[i].name)) {
			if (method != NULL && strcmp(method, endpoints[i].method) == 0)
				return &endpoints[i];
			if (named == NULL)
				named = &endpoints[i];
		}
	return named;
}

/* A body that is there must be one JSON value (and nothing after it). */
static bool parse_body(const char *body, size_t len, cJSON **out)
{
	const char *end = NULL;

	*out = NULL;
	if (len == 0)
		return true;
	if (memchr(body, '\0', len) != NULL)
		return false;
	*out = cJSON_ParseWithLengthOpts(body, len, &end, false);
	if (*out == NULL)
		return false;
	while (end != NULL && end < body + len && strchr(" \t\r\n", *end) != NULL && *end != '\0')
		end++;
	if (end != body + len) {
		cJSON_Delete(*out);
		*out = NULL;
		return false;
	}
	return true;
}

void api_handle(struct api *a, const char *method, const char *url, const char *body, size_t len,
                struct api_reply *r)
{
	const struct endpoint *e = find_endpoint(url, method);
	cJSON *json;

	memset(r, 0, sizeof(*r));
	r->exit_after = -1;
	if (e == NULL) {
		reply_error(r, 404, "no such endpoint");
		return;
	}
	if (method == NULL || strcmp(method, e->method) != 0) {
		reply_error(r, 405, strcmp(e->method, "GET") == 0 ? "use GET" : "use PUT");
		return;
	}
	if (len > API_MAX_BODY) {
		reply_error(r, 413, "request body too large (at most 64 KiB)");
		return;
	}
	if (!parse_body(body, len, &json)) {
		reply_error(r, 400, "the body is not valid JSON");
		return;
	}
	e->fn(a, json, r);
	cJSON_Delete(json);
}
