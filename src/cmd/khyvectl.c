/*
 * khyvectl: bhyvectl's counterpart for a running khyve, over the VM's API
 * socket (docs/api.md; lib/apiclient.h does the HTTP).  One action per
 * run:
 *
 *   khyvectl --vm=NAME | --socket=PATH  ACTION [--json] [--force]
 *
 * Exit status: 0 done; 1 the VM answered with an error (its message on
 * stderr) or an answer khyvectl cannot use; 2 no VM there (nothing listens
 * at the socket); 4 bad usage (one line naming the option, as khyve's).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/apiclient.h"
#include "lib/file.h"
#include "lib/parse.h"

#define EXIT_DONE     0
#define EXIT_VM_ERROR 1
#define EXIT_NO_VM    2
#define EXIT_LOCAL    3 /* the answer came but could not be kept here (--screenshot's file) */
#define EXIT_USAGE    4
#define TIMEOUT_MS    10000 /* the server drops a connection after 10 s too */
#define MAX_CHORDS    64    /* api13: at most 64 chords per send-keys */
#define MAX_COLS      48    /* columns of one stats table */
#define MAX_ROWS      1024  /* sources of one kind (khyve has at most 288 vCPUs) */

enum action {
	ACT_NONE,
	ACT_STATS,
	ACT_INFO,
	ACT_PING,
	ACT_PAUSE,
	ACT_RESUME,
	ACT_POWER_BUTTON,
	ACT_RESET,
	ACT_POWEROFF,
	ACT_SCREENSHOT,
	ACT_SEND_KEYS,
	ACT_INSERT,
	ACT_EJECT,
	ACT_CHECKPOINT,
	ACT_SUSPEND,
	ACT_MIGRATE,
	ACT_BALLOON,
};

enum value_use { NO_VALUE, VALUE, OPTIONAL_VALUE };

/* One action: its option, whether it takes =VALUE, and its request (with
 * an optional value given: PUT instead). */
struct action_def {
	const char *option;
	enum action act;
	enum value_use has_value;
	const char *method, *endpoint;
};

static const struct action_def actions[] = {
    {"--get-stats", ACT_STATS, NO_VALUE, "GET", "vm.counters"},
    {"--info", ACT_INFO, NO_VALUE, "GET", "vm.info"},
    {"--ping", ACT_PING, NO_VALUE, "GET", "vmm.ping"},
    {"--pause", ACT_PAUSE, NO_VALUE, "PUT", "vm.pause"},
    {"--resume", ACT_RESUME, NO_VALUE, "PUT", "vm.resume"},
    {"--power-button", ACT_POWER_BUTTON, NO_VALUE, "PUT", "vm.power-button"},
    {"--force-reset", ACT_RESET, NO_VALUE, "PUT", "vm.reset"},
    {"--force-poweroff", ACT_POWEROFF, NO_VALUE, "PUT", "vm.power-off"},
    {"--screenshot", ACT_SCREENSHOT, VALUE, "GET", "vm.screenshot"},
    {"--send-keys", ACT_SEND_KEYS, VALUE, "PUT", "vm.send-keys"},
    {"--insert", ACT_INSERT, VALUE, "PUT", "vm.media-insert"},
    {"--eject", ACT_EJECT, VALUE, "PUT", "vm.media-eject"},
    {"--checkpoint", ACT_CHECKPOINT, VALUE, "PUT", "vm.checkpoint"},
    {"--suspend", ACT_SUSPEND, VALUE, "PUT", "vm.suspend"},
    {"--migrate", ACT_MIGRATE, VALUE, "PUT", "vm.migrate"},
    {"--balloon", ACT_BALLOON, OPTIONAL_VALUE, "GET", "vm.balloon"},
};

#define NACTIONS (sizeof(actions) / sizeof(actions[0]))

struct opts {
	const char *vm, *socket;
	const struct action_def *action;
	const char
	    *value; /* --screenshot=FILE, --send-keys=CHORDS, --insert=DRIVE:FILE, --eject=DRIVE */
	bool json, force;
	uint64_t bytes; /* --balloon=SIZE */
};

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: khyvectl --vm=NAME | --socket=PATH ACTION [--json] [--force]\n"
	        "actions:\n"
	        "  --get-stats            counters of vCPUs, disks, NICs and VNC\n"
	        "  --info                 name, state, uptime and configuration\n"
	        "  --ping                 khyve's version and pid\n"
	        "  --pause, --resume      stop and restart the vCPUs\n"
	        "  --power-button         press the ACPI power button\n"
	        "  --force-reset          end khyve with status 0 (reboot)\n"
	        "  --force-poweroff       end khyve with status 1 (powered off)\n"
	        "  --screenshot=FILE      write the screen as PNG to a new FILE (--force "
	        "replaces one)\n"
	        "  --send-keys=CHORD,...  type key chords (ctrl-alt-del, shift-b, enter; "
	        "X keysym names)\n"
	        "  --insert=DRIVE:FILE    put the image FILE (opened here, read-only) in the "
	        "CD drive DRIVE (cd0)\n"
	        "  --eject=DRIVE          take the medium out of DRIVE (--force: even when "
	        "the guest locked it)\n"
	        "  --checkpoint=FILE      save the whole machine into a new FILE; it runs on\n"
	        "  --suspend=FILE         save it into a new FILE, then khyve exits with 5;\n"
	        "                         khyve -r FILE resumes it (--force replaces FILE)\n"
	        "  --balloon              the balloon: the guest's memory and statistics\n"
	        "  --balloon=SIZE         ask the guest to keep SIZE of its memory (512M, 2G)\n"
	        "  --migrate=unix:PATH|HOST:PORT  live-migrate to the khyve -R listening there;\n"
	        "                         this khyve exits 0 once the target runs the guest\n"
	        "--json prints the VM's JSON answer as it came.  See khyvectl(8).\n");
}

static int __attribute__((format(printf, 1, 2))) bad_usage(const char *fmt, ...)
{
	va_list ap;

	fputs("khyvectl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n", stderr);
	return EXIT_USAGE;
}

/* "--name=value" into `*value` when `arg` is `name` with a value; true on a match. */
static bool option_is(const char *arg, const char *name, const char **value)
{
	size_t n = strlen(name);

	if (strncmp(arg, name, n) != 0)
		return false;
	if (arg[n] == '\0') {
		*value = NULL;
		return true;
	}
	if (arg[n] == '=') {
		*value = arg + n + 1;
		return true;
	}
	return false;
}

static int take_action(struct opts *o, const char *arg)
{
	for (size_t i = 0; i < NACTIONS; i++) {
		const char *value;
		if (!option_is(arg, actions[i].option, &value))
			continue;
		if (actions[i].has_value == VALUE && (!value || !*value))
			return bad_usage("%s needs a value (%s=...)", actions[i].option,
			                 actions[i].option);
		if (actions[i].has_value == OPTIONAL_VALUE && value && !*value)
			return bad_usage("%s= needs a size (%s=2G)", actions[i].option,
			                 actions[i].option);
		if (actions[i].has_value == NO_VALUE && value)
			return bad_usage("%s takes no value", actions[i].option);
		if (o->action)
			return bad_usage("%s and %s: give one action", o->action->option,
			                 actions[i].option);
		o->action = &actions[i];
		o->value = value;
		return 0;
	}
	return bad_usage("unknown option '%s' (see khyvectl --help)", arg);
}

/* --vm=NAME or --socket=PATH: given once, with a value. */
static int take_target(const char **slot, const char *name, const char *value)
{
	if (!value || !*value)
		return bad_usage("%s needs a value (%s=...)", name, name);
	if (*slot)
		return bad_usage("%s given twice", name);
	*slot = value;
	return 0;
}

/* A drive's name as khyve gives them: letters, digits, '-', '_', 1..15. */
static bool valid_drive(const char *s, size_t n)
{
	if (n == 0 || n > 15)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_",
		            s[i]) ||
		    s[i] == '\0')
			return false;
	return true;
}

static bool valid_insert(const char *v)
{
	const char *colon = strchr(v, ':');

	return colon != NULL && colon[1] != '\0' && valid_drive(v, (size_t)(colon - v));
}

/* Parse argv into `o`: 0, -1 for --help (done), or EXIT_USAGE after the message. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *value;
		int rc;

		if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
			return -1;
		if (option_is(arg, "--vm", &value))
			rc = take_target(&o->vm, "--vm", value);
		else if (option_is(arg, "--socket", &value))
			rc = take_target(&o->socket, "--socket", value);
		else if (!strcmp(arg, "--json"))
			rc = (o->json = true, 0);
		else if (!strcmp(arg, "--force"))
			rc = (o->force = true, 0);
		else if (!strncmp(arg, "--", 2))
			rc = take_action(o, arg);
		else
			rc = bad_usage("unknown option '%s' (see khyvectl --help)", arg);
		if (rc)
			return rc;
	}
	if (o->vm && o->socket)
		return bad_usage("--vm and --socket: give one of them");
	if (!o->vm && !o->socket)
		return bad_usage("no VM: give --vm=NAME or --socket=PATH");
	if (!o->action)
		return bad_usage(
		    "no action: give one of --get-stats, --info, --ping, --pause, "
		    "--resume, --power-button, --force-reset, --force-poweroff, "
		    "--screenshot=FILE, --send-keys=CHORDS, --insert=DRIVE:FILE, "
		    "--eject=DRIVE, --checkpoint=FILE, --suspend=FILE, --migrate=ADDRESS, "
		    "--balloon[=SIZE]");
	if (o->force && o->action->act != ACT_SCREENSHOT && o->action->act != ACT_INSERT &&
	    o->action->act != ACT_EJECT && o->action->act != ACT_CHECKPOINT &&
	    o->action->act != ACT_SUSPEND)
		return bad_usage("--force only goes with --screenshot=FILE, --insert, --eject, "
		                 "--checkpoint or --suspend");
	if (o->action->act == ACT_INSERT && !valid_insert(o->value))
		return bad_usage("--insert=%s: want DRIVE:FILE (cd0:/path/to.iso)", o->value);
	if (o->action->act == ACT_EJECT && !valid_drive(o->value, strlen(o->value)))
		return bad_usage("--eject=%s: want a drive's name (cd0)", o->value);
	if (o->action->act == ACT_BALLOON && o->value && parse_size(o->value, &o->bytes) < 0)
		return bad_usage("--balloon=%s: want a size (512M, 2G)", o->value);
	return 0;
}

/* ---- requests ---- */

/* {"keys":[CHORD,...]} from "a,shift-b,Return"; NULL after the message. */
static char *send_keys_body(const char *list, int *rc)
{
	cJSON *root = cJSON_CreateObject(), *keys = cJSON_AddArrayToObject(root, "keys");
	char *copy = strdup(list), *p = copy, *body = NULL;
	unsigned n = 0;

	*rc = EXIT_USAGE;
	if (!copy || !keys)
		goto out;
	for (;;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (!*p) {
			bad_usage("--send-keys=%s: an empty chord", list);
			goto out;
		}
		if (++n > MAX_CHORDS) {
			bad_usage("--send-keys: at most %d chords at once", MAX_CHORDS);
			goto out;
		}
		cJSON_AddItemToArray(keys, cJSON_CreateString(p));
		if (!comma)
			break;
		p = comma + 1;
	}
	body = cJSON_PrintUnformatted(root);
	*rc = body ? 0 : EXIT_VM_ERROR;
out:
	free(copy);
	cJSON_Delete(root);
	return body;
}

/* The VM's error text: {"error":"..."} or the HTTP status. */
static int vm_error(const char *target, const struct apic_reply *r)
{
	cJSON *j = r->body ? cJSON_Parse(r->body) : NULL;
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");

	if (cJSON_IsString(e))
		fprintf(stderr, "khyvectl: %s: %s\n", target, e->valuestring);
	else
		fprintf(stderr, "khyvectl: %s: HTTP status %ld\n", target, r->status);
	cJSON_Delete(j);
	return EXIT_VM_ERROR;
}

static int bad_answer(const char *target, const char *what)
{
	fprintf(stderr, "khyvectl: %s: %s\n", target, what);
	return EXIT_VM_ERROR;
}

/* ---- human output ---- */

static void print_duration_ms(double ms)
{
	unsigned long long s = (unsigned long long)(ms / 1000);

	if (s >= 86400)
		printf("%llud %02llu:%02llu:%02llu", s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
	else
		printf("%02llu:%02llu:%02llu", s / 3600, s / 60 % 60, s % 60);
}

/* 1536 -> "1.5K", as ls -h; a few digits at most. */
static void human_bytes(double v, char *out, size_t len)
{
	static const char units[] = "BKMGTPE";
	unsigned u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) - 1) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, len, "%.0f", v);
	else
		snprintf(out, len, "%.1f%c", v, units[u]);
}

/* 250 us -> "250us", 1500 -> "1.5ms", 2.5e6 -> "2.5s". */
static void human_us(double us, char *out, size_t len)
{
	if (us < 1000)
		snprintf(out, len, "%.0fus", us);
	else if (us < 1e6)
		snprintf(out, len, "%.1fms", us / 1000);
	else
		snprintf(out, len, "%.1fs", us / 1e6);
}

/* A bucket's bound: a number, or "+Inf" (UINT64_MAX). */
static bool bucket_bound(const cJSON *b, double *le)
{
	if (cJSON_IsNumber(b)) {
		*le = b->valuedouble;
		return true;
	}
	*le = INFINITY;
	return cJSON_IsString(b) && !strcmp(b->valuestring, "+Inf");
}

/*
 * Quantile `q` of a {"buckets":[[le,cumulative],...],"count":N}
 * histogram, interpolated inside its bucket as Prometheus'
 * histogram_quantile() does (the +Inf bucket gives the last finite bound).
 * "-" without observations or with a malformed histogram.
 */
static void hist_quantile(const cJSON *h, double q, bool us, char *out, size_t len)
{
	const cJSON *buckets = cJSON_GetObjectItemCaseSensitive(h, "buckets"), *b;
	const cJSON *count = cJSON_GetObjectItemCaseSensitive(h, "count");
	double prev_le = 0, prev_n = 0, rank;

	snprintf(out, len, "-");
	if (!cJSON_IsArray(buckets) || !cJSON_IsNumber(count) || count->valuedouble <= 0)
		return;
	rank = q * count->valuedouble;
	cJSON_ArrayForEach(b, buckets)
	{
		double le, n, v;
		if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) != 2 ||
		    !bucket_bound(cJSON_GetArrayItem(b, 0), &le) ||
		    !cJSON_IsNumber(cJSON_GetArrayItem(b, 1)))
			return;
		n = cJSON_GetArrayItem(b, 1)->valuedouble;
		if (n < rank) {
			prev_le = le;
			prev_n = n;
			continue;
		}
		v = isinf(le) ? prev_le : prev_le + (le - prev_le) * (rank - prev_n) / (n - prev_n);
		if (us)
			human_us(v, out, len);
		else
			snprintf(out, len, "%.0f", v);
		return;
	}
}

/* A column of a stats table: a counter, or one quantile of a histogram. */
struct column {
	const char *key;
	double q; /* 0: a plain number */
	char head[64];
};

static bool has_column(const struct column *c, size_t n, const char *key, double q)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(c[i].key, key) && c[i].q == q)
			return true;
	return false;
}

/* "read_bytes_total" -> "READ_BYTES", "latency_us" + 0.99 -> "LATENCY_P99". */
static void column_head(struct column *c)
{
	size_t n = strlen(c->key), i;

	if (n > 6 && !strcmp(c->key + n - 6, "_total"))
		n -= 6;
	if (c->q > 0 && n > 3 && !strcmp(c->key + n - 3, "_us"))
		n -= 3;
	if (n >= sizeof(c->head) - 5)
		n = sizeof(c->head) - 5;
	for (i = 0; i < n; i++)
		c->head[i] =
		    (char)(c->key[i] >= 'a' && c->key[i] <= 'z' ? c->key[i] - 32 : c->key[i]);
	if (c->q > 0)
		snprintf(c->head + i, sizeof(c->head) - i, "_P%02.0f", c->q * 100);
	else
		c->head[i] = '\0';
}

/* Every key of every source, in the order they first come. */
static size_t collect_columns(const cJSON *group, struct column *cols)
{
	const cJSON *src, *v;
	size_t n = 0;

	cJSON_ArrayForEach(src, group) cJSON_ArrayForEach(v, src)
	{
		bool hist = cJSON_IsObject(v);
		for (int k = 0; k < (hist ? 2 : 1) && n < MAX_COLS; k++) {
			double q = hist ? (k ? 0.99 : 0.5) : 0;
			if ((!hist && !cJSON_IsNumber(v)) || has_column(cols, n, v->string, q))
				continue;
			cols[n].key = v->string;
			cols[n].q = q;
			column_head(&cols[n]);
			n++;
		}
	}
	return n;
}

static void cell(const cJSON *src, const struct column *c, char *out, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, c->key);

	if (c->q > 0)
		hist_quantile(v, c->q, strstr(c->key, "_us") != NULL, out, len);
	else if (!cJSON_IsNumber(v))
		snprintf(out, len, "-");
	else if (strstr(c->key, "bytes"))
		human_bytes(v->valuedouble, out, len);
	else
		snprintf(out, len, "%.0f", v->valuedouble);
}

/* More keys than this (KVM's vCPU statistics are ~30) read better as rows. */
#define WIDE_TABLE 10

/* A wide group turned round: a row per key, a column per source. */
static void print_group_rows(const char *title, const cJSON *group, const struct column *cols,
                             size_t ncols)
{
	size_t w0 = strlen(title), wsrc[MAX_ROWS], nsrc = 0;
	const cJSON *src;
	char text[32];

	for (size_t i = 0; i < ncols; i++)
		if (strlen(cols[i].head) > w0)
			w0 = strlen(cols[i].head);
	cJSON_ArrayForEach(src, group)
	{
		if (nsrc == MAX_ROWS)
			break;
		wsrc[nsrc] = strlen(src->string);
		for (size_t i = 0; i < ncols; i++) {
			cell(src, &cols[i], text, sizeof(text));
			if (strlen(text) > wsrc[nsrc])
				wsrc[nsrc] = strlen(text);
		}
		nsrc++;
	}
	printf("%-*s", (int)w0, title);
	nsrc = 0;
	cJSON_ArrayForEach(src, group)
	{
		if (nsrc == MAX_ROWS)
			break;
		printf("  %*s", (int)wsrc[nsrc++], src->string);
	}
	printf("\n");
	for (size_t i = 0; i < ncols; i++) {
		printf("%-*s", (int)w0, cols[i].head);
		nsrc = 0;
		cJSON_ArrayForEach(src, group)
		{
			if (nsrc == MAX_ROWS)
				break;
			cell(src, &cols[i], text, sizeof(text));
			printf("  %*s", (int)wsrc[nsrc++], text);
		}
		printf("\n");
	}
}

/* One table: the source's name, then a column per key; numbers right-aligned. */
static void print_group(const char *title, const cJSON *group)
{
	static struct column cols[MAX_COLS];
	size_t ncols, w[MAX_COLS + 1], rows = 0;
	const cJSON *src;
	char text[32];

	if (!cJSON_IsObject(group) || !group->child) {
		printf("%s: none\n", title);
		return;
	}
	ncols = collect_columns(group, cols);
	if (ncols > WIDE_TABLE) {
		print_group_rows(title, group, cols, ncols);
		return;
	}
	w[0] = strlen(title);
	for (size_t i = 0; i < ncols; i++)
		w[i + 1] = strlen(cols[i].head);
	cJSON_ArrayForEach(src, group)
	{
		if (rows++ == MAX_ROWS)
			break;
		if (strlen(src->string) > w[0])
			w[0] = strlen(src->string);
		for (size_t i = 0; i < ncols; i++) {
			cell(src, &cols[i], text, sizeof(text));
			if (strlen(text) > w[i + 1])
				w[i + 1] = strlen(text);
		}
	}
	printf("%-*s", (int)w[0], title);
	for (size_t i = 0; i < ncols; i++)
		printf("  %*s", (int)w[i + 1], cols[i].head);
	printf("\n");
	rows = 0;
	cJSON_ArrayForEach(src, group)
	{
		if (rows++ == MAX_ROWS)
			break;
		printf("%-*s", (int)w[0], src->string);
		for (size_t i = 0; i < ncols; i++) {
			cell(src, &cols[i], text, sizeof(text));
			printf("  %*s", (int)w[i + 1], text);
		}
		printf("\n");
	}
}

static int print_stats(const char *target, const cJSON *j)
{
	static const char *const groups[][2] = {
	    {"vcpu", "VCPU"}, {"disk", "DISK"}, {"nic", "NIC"}, {"vnc", "VNC"}};
	const cJSON *up = cJSON_GetObjectItemCaseSensitive(j, "uptime_ms");

	if (!cJSON_IsObject(j))
		return bad_answer(target, "vm.counters: not a JSON object");
	if (cJSON_IsNumber(up)) {
		printf("uptime: ");
		print_duration_ms(up->valuedouble);
		printf("\n");
	}
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		printf("\n");
		print_group(groups[i][1], cJSON_GetObjectItemCaseSensitive(j, groups[i][0]));
	}
	return EXIT_DONE;
}

static void print_field(const cJSON *j, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	if (cJSON_IsString(v))
		printf("%s: %s\n", key, v->valuestring);
	else if (cJSON_IsNumber(v))
		printf("%s: %.0f\n", key, v->valuedouble);
}

/* "  cd0: ahci-cd 4:0 port 0, medium 1.5G, locked" or "..., empty". */
static void print_drives(const cJSON *drives)
{
	const cJSON *d;

	if (!cJSON_IsObject(drives) || !drives->child)
		return;
	printf("drives:\n");
	cJSON_ArrayForEach(d, drives)
	{
		const cJSON *dev = cJSON_GetObjectItemCaseSensitive(d, "device");
		const cJSON *slot = cJSON_GetObjectItemCaseSensitive(d, "slot");
		const cJSON *port = cJSON_GetObjectItemCaseSensitive(d, "port");
		const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(d, "bytes");
		char size[32];

		human_bytes(cJSON_IsNumber(bytes) ? bytes->valuedouble : 0, size, sizeof(size));
		printf("  %s: %s %s port %.0f, ", d->string,
		       cJSON_IsString(dev) ? dev->valuestring : "?",
		       cJSON_IsString(slot) ? slot->valuestring : "?",
		       cJSON_IsNumber(port) ? port->valuedouble : 0);
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "medium")))
			printf("medium %s", size);
		else
			printf("empty");
		printf("%s\n", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "locked"))
		                   ? ", locked"
		                   : "");
	}
}

/* A byte count of `j`'s `key`, human-readable, or "-". */
static void balloon_bytes(const cJSON *j, const char *key, char *out, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	if (cJSON_IsNumber(v))
		human_bytes(v->valuedouble, out, len);
	else
		snprintf(out, len, "-");
}

/* vm.balloon's answer (or vm.info's "balloon"), `indent` before each line. */
static void print_balloon_fields(const cJSON *j, const char *indent)
{
	static const char *const rows[][2] = {
	    {"memory_bytes", "memory"},
	    {"target_bytes", "target"},
	    {"actual_bytes", "guest keeps"},
	    {"reported_bytes", "reported free"},
	};
	const cJSON *stats = cJSON_GetObjectItemCaseSensitive(j, "stats"), *s;
	char v[32];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		balloon_bytes(j, rows[i][0], v, sizeof(v));
		printf("%s%s: %s\n", indent, rows[i][1], v);
	}
	printf("%sfree page reporting: %s, deflate on OOM: %s\n", indent,
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "free_page_reporting")) ? "yes"
	                                                                                : "no",
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "deflate_on_oom")) ? "yes" : "no");
	if (!cJSON_IsObject(stats))
		return;
	printf("%sguest statistics:\n", indent);
	cJSON_ArrayForEach(s, stats) if (cJSON_IsNumber(s))
	{
		bool bytes = strstr(s->string, "memory") || strstr(s->string, "caches") ||
		             strstr(s->string, "swap");

		if (bytes)
			human_bytes(s->valuedouble, v, sizeof(v));
		else
			snprintf(v, sizeof(v), "%.0f", s->valuedouble);
		printf("%s  %s: %s\n", indent, s->string, v);
	}
}

static int print_balloon(const char *target, const cJSON *j)
{
	if (!cJSON_IsObject(j))
		return bad_answer(target, "vm.balloon: not a JSON object");
	print_balloon_fields(j, "");
	return EXIT_DONE;
}

static int print_info(const char *target, const cJSON *j)
{
	const cJSON *up = cJSON_GetObjectItemCaseSensitive(j, "uptime_ms");
	const cJSON *config = cJSON_GetObjectItemCaseSensitive(j, "config"), *kv;

	if (!cJSON_IsObject(j))
		return bad_answer(target, "vm.info: not a JSON object");
	print_field(j, "name");
	print_field(j, "state");
	if (cJSON_IsNumber(up)) {
		printf("uptime: ");
		print_duration_ms(up->valuedouble);
		printf("\n");
	}
	print_field(j, "vcpus");
	print_field(j, "memory_bytes");
	print_drives(cJSON_GetObjectItemCaseSensitive(j, "drives"));
	if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "balloon"))) {
		printf("balloon:\n");
		print_balloon_fields(cJSON_GetObjectItemCaseSensitive(j, "balloon"), "  ");
	}
	if (cJSON_IsObject(config)) {
		printf("config:\n");
		cJSON_ArrayForEach(kv, config) if (cJSON_IsString(kv))
		    printf("  %s=%s\n", kv->string, kv->valuestring);
	}
	return EXIT_DONE;
}

static int print_ping(const char *target, const cJSON *j)
{
	const cJSON *version = cJSON_GetObjectItemCaseSensitive(j, "version");
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "pid");

	if (!cJSON_IsString(version))
		return bad_answer(target, "vmm.ping: no version in the answer");
	printf("%s", version->valuestring);
	if (cJSON_IsNumber(pid))
		printf(", pid %.0f", pid->valuedouble);
	printf("\n");
	return EXIT_DONE;
}

/* ---- screenshot ---- */

static int check_new_file(const struct opts *o)
{
	struct stat st;

	if (!o->force && lstat(o->value, &st) == 0)
		return bad_usage("--screenshot=%s: the file exists (--force replaces it)",
		                 o->value);
	return 0;
}

static int write_png(const struct opts *o, const char *target, const struct apic_reply *r)
{
	static const unsigned char magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (o->force ? O_TRUNC : O_EXCL);
	size_t done = 0;
	int fd;

	if (r->len < sizeof(magic) || memcmp(r->body, magic, sizeof(magic)) != 0)
		return bad_answer(target, "vm.screenshot: the answer is not a PNG image");
	if ((fd = open(o->value, flags, 0644)) < 0) {
		fprintf(stderr, "khyvectl: %s: %s\n", o->value, strerror(errno));
		return EXIT_LOCAL;
	}
	while (done < r->len) {
		ssize_t n = write(fd, r->body + done, r->len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	if (done < r->len || close(fd) < 0) {
		fprintf(stderr, "khyvectl: %s: %s\n", o->value, strerror(errno ? errno : EIO));
		unlink(o->value);
		return EXIT_LOCAL;
	}
	return EXIT_DONE;
}

/* ---- media ---- */

/* {"drive":"cd0","force":false} for --eject. */
static char *eject_body(const struct opts *o)
{
	char *body = malloc(64);

	if (body != NULL)
		snprintf(body, 64, "{\"drive\":\"%s\",\"force\":%s}", o->value,
		         o->force ? "true" : "false");
	return body;
}

/*
 * The end of a call that passed a descriptor after the 101 (--insert,
 * --checkpoint, --suspend, --migrate) and did not succeed: `rc` and
 * `status` as the call gave them, `err` the VM's answer or why the call
 * failed.  Says why on stderr, but under --json the VM's answer goes to
 * stdout instead (when `echo_json`: --insert printed it already), and
 * returns the exit status.
 */
static int fd_call_failed(const struct opts *o, const char *sock, const char *target, int rc,
                          long status, char *err, bool echo_json)
{
	if (rc == API_CALL_NO_VM) {
		fprintf(stderr, "khyvectl: no VM at %s (%s)\n", sock, err);
		return EXIT_NO_VM;
	}
	if (rc != API_CALL_OK) {
		fprintf(stderr, "khyvectl: %s\n", err);
		return EXIT_VM_ERROR;
	}
	if (o->json) {
		if (echo_json)
			printf("%s\n", err);
		return EXIT_VM_ERROR;
	}
	struct apic_reply r = {.status = status, .body = err, .len = strlen(err)};
	return vm_error(target, &r);
}

/* --insert=DRIVE:FILE: FILE is opened here, with the caller's rights. */
static int run_insert(const struct opts *o, const char *sock, const char *target)
{
	const char *colon = strchr(o->value, ':');
	char drive[16], err[4200];
	long status = 0;
	int fd, rc;

	snprintf(drive, sizeof(drive), "%.*s", (int)(colon - o->value), o->value);
	fd = open(colon + 1, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		fprintf(stderr, "khyvectl: %s: %s\n", colon + 1, strerror(errno));
		return EXIT_LOCAL;
	}
	rc = apic_media_insert(sock, drive, o->force, fd, TIMEOUT_MS, &status, err, sizeof(err));
	close(fd);
	if (rc == API_CALL_OK && o->json && err[0] != '\0')
		printf("%s\n", err);
	if (rc == API_CALL_OK && status >= 200 && status <= 299)
		return EXIT_DONE;
	return fd_call_failed(o, sock, target, rc, status, err, false);
}

/* ---- checkpoint and suspend ---- */

#define STATE_TIMEOUT_MS 600000 /* writing a big guest's RAM takes a while */

/* Put the finished temporary file at FILE (replacing one only with --force). */
static int keep_state_file(const struct opts *o, int fd, const char *tmp)
{
	if (fsync(fd) < 0 || file_rename_durable(tmp, o->value, o->force) != 0) {
		fprintf(stderr, "khyvectl: %s: %s\n", o->value,
		        errno == EEXIST ? "the file exists (--force replaces it)"
		                        : strerror(errno));
		unlink(tmp);
		return EXIT_LOCAL;
	}
	return EXIT_DONE;
}

/*
 * --checkpoint=FILE / --suspend=FILE: khyve writes the state into a new
 * file this process creates (with the caller's rights, mode 0600) beside
 * FILE, which becomes FILE once khyve says it is complete: a failed or
 * interrupted save never leaves a FILE that looks whole.
 */
static int run_state(const struct opts *o, const char *sock, const char *target)
{
	char tmp[4200], err[4200];
	long status = 0;
	int fd, rc;
	struct stat st;

	if (!o->force && lstat(o->value, &st) == 0)
		return bad_usage("%s=%s: the file exists (--force replaces it)", o->action->option,
		                 o->value);
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", o->value);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "khyvectl: %s: %s\n", o->value, strerror(errno));
		return EXIT_LOCAL;
	}
	rc = apic_fd_call(sock, o->action->endpoint, "", fd, STATE_TIMEOUT_MS, &status, err,
	                  sizeof(err));
	if (rc == API_CALL_OK && status >= 200 && status <= 299) {
		rc = keep_state_file(o, fd, tmp);
		close(fd);
		return rc;
	}
	close(fd);
	unlink(tmp);
	return fd_call_failed(o, sock, target, rc, status, err, true);
}

/* ---- migrate ---- */

/* A stream socket connected to `addr` (unix:PATH or HOST:PORT), or -1
 * with errno. */
static int connect_target(const char *addr)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char host[256];
	const char *colon = strrchr(addr, ':');
	int fd = -1;

	if (strncmp(addr, "unix:", 5) == 0) {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};

		if (strlen(addr + 5) >= sizeof(sun.sun_path) || addr[5] == '\0') {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(sun.sun_path, addr + 5, strlen(addr + 5));
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
			int e = errno;

			close(fd);
			errno = e;
			return -1;
		}
		return fd;
	}
	if (colon == NULL || colon == addr || (size_t)(colon - addr) >= sizeof(host)) {
		errno = EINVAL;
		return -1;
	}
	if (addr[0] == '[' && colon[-1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)(colon - addr - 2), addr + 1);
	else
		snprintf(host, sizeof(host), "%.*s", (int)(colon - addr), addr);
	if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) {
		errno = EINVAL;
		return -1;
	}
	for (struct addrinfo *p = ai; p != NULL && fd < 0; p = p->ai_next) {
		fd = socket(p->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, p->ai_addr, p->ai_addrlen) < 0) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	return fd;
}

/*
 * --migrate=ADDRESS: connect to the target here (with the caller's
 * rights) and hand the socket to khyve, which runs the migration over it
 * and answers once the target runs the guest or the migration failed
 * (the guest then runs on, or, after COMMIT without an answer, stays
 * paused: khyve's line says which).
 */
static int run_migrate(const struct opts *o, const char *sock, const char *target)
{
	char err[4200];
	long status = 0;
	int fd = connect_target(o->value), rc;

	if (fd < 0) {
		fprintf(stderr, "khyvectl: --migrate=%s: %s\n", o->value, strerror(errno));
		return EXIT_VM_ERROR;
	}
	rc = apic_fd_call(sock, o->action->endpoint, "", fd, STATE_TIMEOUT_MS, &status, err,
	                  sizeof(err));
	close(fd);
	if (rc == API_CALL_OK && status >= 200 && status <= 299)
		return EXIT_DONE;
	return fd_call_failed(o, sock, target, rc, status, err, true);
}

/* ---- all together ---- */

static int show_reply(const struct opts *o, const char *target, const struct apic_reply *r)
{
	cJSON *j;
	int rc;

	if (o->action->act == ACT_SCREENSHOT)
		return write_png(o, target, r);
	if (o->json) {
		if (r->len)
			printf("%s%s", r->body, r->body[r->len - 1] == '\n' ? "" : "\n");
		return EXIT_DONE;
	}
	if (o->action->act != ACT_STATS && o->action->act != ACT_INFO &&
	    o->action->act != ACT_PING && !(o->action->act == ACT_BALLOON && !o->value))
		return EXIT_DONE;
	if (!(j = r->body ? cJSON_Parse(r->body) : NULL))
		return bad_answer(target, "the answer is not JSON");
	if (o->action->act == ACT_STATS)
		rc = print_stats(target, j);
	else if (o->action->act == ACT_INFO)
		rc = print_info(target, j);
	else if (o->action->act == ACT_BALLOON)
		rc = print_balloon(target, j);
	else
		rc = print_ping(target, j);
	cJSON_Delete(j);
	return rc;
}

static int run(const struct opts *o)
{
	char sock[4096], err[4200], *body = NULL;
	const char *target = o->vm ? o->vm : o->socket;
	const char *method = o->action->method;
	struct apic_reply r;
	int rc = 0;

	if (o->socket)
		snprintf(sock, sizeof(sock), "%s", o->socket);
	else if (api_socket_for_vm(o->vm, sock, sizeof(sock), err, sizeof(err)) < 0)
		return bad_usage("%s", err);
	if (strlen(sock) >= API_SOCKET_MAX)
		return bad_usage("%s: a unix socket path holds at most %d bytes", sock,
		                 API_SOCKET_MAX - 1);
	if (o->action->act == ACT_INSERT)
		return run_insert(o, sock, target);
	if (o->action->act == ACT_CHECKPOINT || o->action->act == ACT_SUSPEND)
		return run_state(o, sock, target);
	if (o->action->act == ACT_MIGRATE)
		return run_migrate(o, sock, target);
	if (o->action->act == ACT_SEND_KEYS && !(body = send_keys_body(o->value, &rc)))
		return rc;
	if (o->action->act == ACT_EJECT && !(body = eject_body(o)))
		return EXIT_VM_ERROR;
	if (o->action->act == ACT_SCREENSHOT && (rc = check_new_file(o)) != 0)
		return rc;
	if (o->action->act == ACT_BALLOON && o->value) {
		method = "PUT";
		if (!(body = malloc(64)))
			return EXIT_VM_ERROR;
		snprintf(body, 64, "{\"memory_bytes\":%" PRIu64 "}", o->bytes);
	}
	switch (
	    apic_call(sock, method, o->action->endpoint, body, TIMEOUT_MS, &r, err, sizeof(err))) {
	case API_CALL_NO_VM:
		/* connect() needs write permission on the socket: say so, not "no VM". */
		if (access(sock, F_OK) == 0 && access(sock, W_OK) < 0 && errno == EACCES)
			fprintf(stderr,
			        "khyvectl: %s: permission denied (the group khyve may connect)\n",
			        sock);
		else
			fprintf(stderr, "khyvectl: no VM at %s (%s)\n", sock, err);
		free(body);
		return EXIT_NO_VM;
	case API_CALL_FAILED:
		fprintf(stderr, "khyvectl: %s\n", err);
		free(body);
		return EXIT_VM_ERROR;
	case API_CALL_OK:
		break;
	}
	free(body);
	if (r.status < 200 || r.status > 299)
		rc = vm_error(target, &r);
	else
		rc = show_reply(o, target, &r);
	apic_reply_free(&r);
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	int rc = parse_args(argc, argv, &o);

	if (rc < 0) {
		usage(stdout);
		return EXIT_DONE;
	}
	return rc ? rc : run(&o);
}
