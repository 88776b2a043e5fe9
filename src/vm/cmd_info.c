/*
 * Read-only commands: list, info, get (these work for members of the khyve
 * group) and set, which changes the system settings get shows
 * (vm-bhyve's core settings: console, compress, decompress).
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "vm/cgroup.h"
#include "vm/commands.h"
#include "vm/live.h"
#include "vm/state.h"
#include "vm/suspend.h"
#include "vm/util.h"

/* ---- list ---- */

#define LIST_COLS  11 /* with -v; without it the first LIST_PLAIN */
#define LIST_PLAIN 8

struct list_ctx {
	const struct vm_sys *sys;
	bool running_only;
	bool verbose; /* -v: %CPU, RSZ and UPTIME of the running khyve */
	cJSON *json;  /* --json: array of guests, else NULL */
	char *(*rows)[LIST_COLS];
	size_t n, cap;
};

/* "Yes [N]" when the guest is the Nth of vm_list, as vm-bhyve shows it. */
static void autostart(const struct vm_sys *sys, const char *name, char *out, size_t len)
{
	const char *list = rcconf_get_default(sys->conf, "vm_list", "");
	unsigned n = 0;

	snprintf(out, len, "No");
	for (const char *p = list; *p;) {
		size_t wl;
		p += strspn(p, " \t");
		wl = strcspn(p, " \t");
		if (!wl)
			break;
		n++;
		if (wl == strlen(name) && !strncmp(p, name, wl)) {
			snprintf(out, len, "Yes [%u]", n);
			return;
		}
		p += wl;
	}
}

static int add_row(struct list_ctx *c, const char *const cols[LIST_COLS])
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		void *r = realloc(c->rows, cap * sizeof(*c->rows));
		if (!r)
			return -1;
		c->rows = r;
		c->cap = cap;
	}
	for (int i = 0; i < LIST_COLS; i++)
		c->rows[c->n][i] = strdup(cols[i]);
	c->n++;
	return 0;
}

static void add_json(struct list_ctx *c, const char *const cols[LIST_COLS],
                     const struct vm_status *st)
{
	static const char *const keys[LIST_COLS] = {"name",        "datastore", "loader", "cpu",
	                                            "memory",      "vnc",       "auto",   "state",
	                                            "cpu_percent", "rsz_kib",   "uptime"};
	cJSON *o = cJSON_CreateObject();

	for (int i = 0; i < (c->verbose ? LIST_COLS : LIST_PLAIN); i++)
		cJSON_AddStringToObject(o, keys[i], cols[i]);
	cJSON_AddBoolToObject(o, "running", st->state == VM_RUNNING);
	cJSON_AddBoolToObject(o, "suspended", st->state == VM_SUSPENDED);
	if (st->live[0])
		cJSON_AddBoolToObject(o, "paused", !strcmp(st->live, "Paused"));
	if (st->supervisor)
		cJSON_AddNumberToObject(o, "pid", st->supervisor);
	cJSON_AddItemToArray(c->json, o);
}

/* -v's columns for khyve `pid` as ps prints them; "-" when none runs. */
static void usage_columns(pid_t pid, char pcpu[16], char rsz[24], char up[32])
{
	struct vm_proc_usage u;

	if (pid <= 0 || vm_proc_usage(pid, &u) < 0) {
		strcpy(pcpu, "-");
		strcpy(rsz, "-");
		strcpy(up, "-");
		return;
	}
	snprintf(pcpu, 16, "%.1f", u.cpu_percent);
	snprintf(rsz, 24, "%llu", u.rss_kib);
	vm_format_elapsed(u.uptime_s, up, 32);
}

static int list_one(struct vm_guest *g, void *arg)
{
	struct list_ctx *c = arg;
	struct vm_status st;
	char state[300], aut[32], pcpu[16], rsz[24], up[32];

	vm_status_get(c->sys, g, &st);
	if (c->running_only && st.state != VM_RUNNING)
		return 0;
	vm_status_ask_khyve(g, &st);
	vm_status_format(&st, state, sizeof(state));
	autostart(c->sys, g->name, aut, sizeof(aut));
	usage_columns(st.state == VM_RUNNING ? st.khyve : 0, pcpu, rsz, up);
	/* As vm-bhyve: the VNC address while the guest runs, else "-". */
	const char *vnc = st.state == VM_RUNNING && st.vnc[0] ? st.vnc : "-";
	const char *cols[LIST_COLS] = {g->name,
	                               g->datastore,
	                               g->conf ? rcconf_get_default(g->conf, "loader", "none")
	                                       : "(bad config)",
	                               g->conf ? rcconf_get_default(g->conf, "cpu", "-") : "-",
	                               g->conf ? rcconf_get_default(g->conf, "memory", "-") : "-",
	                               vnc,
	                               aut,
	                               state,
	                               pcpu,
	                               rsz,
	                               up};
	if (c->json)
		add_json(c, cols, &st);
	else if (add_row(c, cols) < 0)
		return vm_error("out of memory");
	return 0;
}

/* Columns as column(1) -t lays them out: two blanks between columns. */
static void print_table(struct list_ctx *c)
{
	static const char *const head[LIST_COLS] = {"NAME",   "DATASTORE", "LOADER", "CPU",
	                                            "MEMORY", "VNC",       "AUTO",   "STATE",
	                                            "%CPU",   "RSZ",       "UPTIME"};
	int ncols = c->verbose ? LIST_COLS : LIST_PLAIN;
	size_t w[LIST_COLS];

	for (int i = 0; i < ncols; i++) {
		w[i] = strlen(head[i]);
		for (size_t r = 0; r < c->n; r++)
			if (c->rows[r][i] && strlen(c->rows[r][i]) > w[i])
				w[i] = strlen(c->rows[r][i]);
	}
	for (size_t r = 0; r <= c->n; r++) {
		for (int i = 0; i < ncols; i++) {
			const char *s = r == 0 ? head[i] : c->rows[r - 1][i];
			if (i == ncols - 1)
				printf("%s\n", s ? s : "");
			else
				printf("%-*s  ", (int)w[i], s ? s : "");
		}
	}
}

int cmd_list(struct vm_sys *sys, int argc, char **argv)
{
	struct list_ctx c = {.sys = sys};
	char err[512];
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			c.json = cJSON_CreateArray();
		else if (!strcmp(argv[i], "-r"))
			c.running_only = true;
		else if (!strcmp(argv[i], "-v"))
			c.verbose = true;
		else
			return vm_error("usage: vm list [-r] [-v] [--json]");
	}
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0) {
		cJSON_Delete(c.json);
		return vm_error("%s", err);
	}
	rc = vm_guest_foreach(sys, list_one, &c);
	if (rc == 0 && c.json) {
		char *text = cJSON_Print(c.json);
		if (text)
			printf("%s\n", text);
		free(text);
	} else if (rc == 0) {
		print_table(&c);
	}
	for (size_t r = 0; r < c.n; r++)
		for (int i = 0; i < LIST_COLS; i++)
			free(c.rows[r][i]);
	free(c.rows);
	cJSON_Delete(c.json);
	return rc;
}

/* ---- info ---- */

static void show(const struct vm_guest *g, const char *indent, const char *key, const char *title,
                 const char *def)
{
	const char *v = rcconf_get(g->conf, key);

	if (v || def)
		printf("%s%s: %s\n", indent, title ? title : key, v ? v : def);
}

static void show_disks(const struct vm_guest *g)
{
	for (unsigned n = 0; n < 64; n++) {
		char key[32], path[PATH_MAX];
		const char *name;
		struct stat st;

		snprintf(key, sizeof(key), "disk%u_name", n);
		if (!(name = rcconf_get(g->conf, key)))
			break;
		printf("\n  virtual-disk\n    number: %u\n", n);
		snprintf(key, sizeof(key), "disk%u_dev", n);
		show(g, "    ", key, "device-type", "file");
		snprintf(key, sizeof(key), "disk%u_type", n);
		show(g, "    ", key, "emulation", "-");
		snprintf(key, sizeof(key), "disk%u_opts", n);
		show(g, "    ", key, "options", "-");
		if (name[0] == '/')
			snprintf(path, sizeof(path), "%s", name);
		else if (vm_path(path, g->dir, name))
			continue;
		printf("    system-path: %s\n", path);
		if (stat(path, &st) == 0) {
			printf("    bytes-size: %lld\n", (long long)st.st_size);
			printf("    bytes-used: %lld\n", (long long)st.st_blocks * 512);
		}
	}
}

static void show_networks(const struct vm_guest *g)
{
	for (unsigned n = 0; n < 32; n++) {
		char key[32];

		snprintf(key, sizeof(key), "network%u_type", n);
		if (!rcconf_get(g->conf, key))
			break;
		printf("\n  network-interface\n    number: %u\n", n);
		show(g, "    ", key, "emulation", NULL);
		snprintf(key, sizeof(key), "network%u_switch", n);
		show(g, "    ", key, "virtual-switch", "-");
		snprintf(key, sizeof(key), "network%u_mac", n);
		show(g, "    ", key, "fixed-mac-address", "-");
		snprintf(key, sizeof(key), "network%u_device", n);
		show(g, "    ", key, "fixed-device", "-");
	}
}

/* "vnc: ADDR" of a running guest's VNC server and whether khyve was started
 * with wait (the flag in run.state: it does not say whether a client has
 * come since); "-" for a guest without graphics. */
static void show_vnc(const struct vm_guest *g, const struct vm_status *st)
{
	if (st->state == VM_RUNNING && st->vnc[0])
		printf("  vnc: %s%s\n", st->vnc,
		       st->vnc_wait ? " (wait: the guest starts at the first VNC client)" : "");
	else if (rcconf_get_yes(g->conf, "graphics"))
		printf("  vnc: - (graphics=\"yes\"; shown while it runs)\n");
	else
		printf("  vnc: -\n");
}

static void show_guest(const struct vm_sys *sys, const struct vm_guest *g)
{
	struct vm_status st;
	char state[300];

	vm_status_get(sys, g, &st);
	vm_status_ask_khyve(g, &st);
	vm_status_format(&st, state, sizeof(state));
	for (char *p = state; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
	printf("------------------------\nVirtual Machine: %s\n------------------------\n",
	       g->name);
	printf("  state: %s\n  datastore: %s\n", state, g->datastore);
	if (st.state == VM_SUSPENDED)
		printf("  saved-state: %s/%s%s (vm start resumes it)\n", g->dir, g->name,
		       VM_STATE_SUFFIX);
	show(g, "  ", "loader", NULL, "none");
	show(g, "  ", "uuid", NULL, "auto");
	show(g, "  ", "cpu", NULL, "-");
	if (rcconf_get(g->conf, "cpu_sockets"))
		printf("  cpu-topology: sockets=%s, cores=%s, threads=%s\n",
		       rcconf_get(g->conf, "cpu_sockets"),
		       rcconf_get_default(g->conf, "cpu_cores", "1"),
		       rcconf_get_default(g->conf, "cpu_threads", "1"));
	show(g, "  ", "memory", NULL, "-");
	char cgroup[PATH_MAX + 128];
	vm_cgroup_describe(g->name, cgroup, sizeof(cgroup));
	printf("  cgroup: %s\n", cgroup);
	show_vnc(g, &st);
	if (st.state == VM_RUNNING)
		printf("\n  console-ports\n    com1: %s/com1.pty\n", g->dir);
	show_networks(g);
	show_disks(g);
	if (st.state == VM_RUNNING) {
		vm_live_show_memory(g);
		vm_live_show_counters(g);
	}
	printf("\n");
}

static int info_one(struct vm_guest *g, void *arg)
{
	if (g->conf)
		show_guest(arg, g);
	return 0;
}

int cmd_info(struct vm_sys *sys, int argc, char **argv)
{
	char err[512];
	int rc = 0;

	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (argc < 2)
		return vm_guest_foreach(sys, info_one, sys);
	for (int i = 1; i < argc; i++) {
		struct vm_guest g;
		if (vm_guest_find(sys, argv[i], &g, err, sizeof(err)) < 0) {
			rc = vm_error("%s", err);
			continue;
		}
		show_guest(sys, &g);
		vm_guest_free(&g);
	}
	return rc;
}

/* ---- get / set: the system settings of $vm_dir/.config/system.conf ---- */

static const char *const user_settings[] = {"console", "compress", "decompress"};

static bool user_setting(const char *key)
{
	for (size_t i = 0; i < sizeof(user_settings) / sizeof(user_settings[0]); i++)
		if (!strcmp(key, user_settings[i]))
			return true;
	return false;
}

int cmd_get(struct vm_sys *sys, int argc, char **argv)
{
	char err[512];

	if (argc < 2)
		return vm_error("usage: vm get all|setting...");
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "all") && !user_setting(argv[i]))
			return vm_error("invalid configuration setting - '%s'", argv[i]);
	printf("%-20s%s\n", "SETTING", "VALUE");
	for (int i = 1; i < argc; i++) {
		bool all = !strcmp(argv[i], "all");
		for (size_t k = 0; k < sizeof(user_settings) / sizeof(user_settings[0]); k++)
			if (all || !strcmp(argv[i], user_settings[k]))
				printf("%-20s%s\n", user_settings[k],
				       rcconf_get_default(sys->system, user_settings[k], "-"));
	}
	return 0;
}

/* Check one setting=value; the console must be one khyve can offer. */
static int check_setting(const char *pair, char *key, size_t klen, const char **value)
{
	const char *eq = strchr(pair, '=');

	if (!eq || (size_t)(eq - pair) >= klen)
		return vm_error("usage: vm set setting=value...");
	memcpy(key, pair, (size_t)(eq - pair));
	key[eq - pair] = '\0';
	*value = eq + 1;
	if (!user_setting(key))
		return vm_error("invalid configuration setting - '%s'", key);
	if (!rcconf_value_valid(*value))
		return vm_error("%s: the value may not hold quotes, '#', '$', '\\' or '`'", key);
	if (!strcmp(key, "console") && strcmp(*value, "nmdm") && strcmp(*value, "tmux") &&
	    strcmp(*value, "pty") && **value)
		return vm_error("console=%s: use pty (nmdm is accepted as its bhyve name) or tmux",
		                *value);
	return 0;
}

int cmd_set(struct vm_sys *sys, int argc, char **argv)
{
	char err[512], key[64];
	const char *value;

	if (argc < 2)
		return vm_error("usage: vm set setting=value...");
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (vm_require_write(sys, "set") < 0)
		return 1;
	for (int i = 1; i < argc; i++)
		if (check_setting(argv[i], key, sizeof(key), &value))
			return 1;
	for (int i = 1; i < argc; i++) {
		check_setting(argv[i], key, sizeof(key), &value);
		rcconf_set(sys->system, key, *value ? value : NULL);
	}
	return vm_sys_save_system(sys, err, sizeof(err)) < 0 ? vm_error("%s", err) : 0;
}
