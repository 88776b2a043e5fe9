/* The vm manager's system settings, datastores and guest lookup (vm.h). */
#include "vm/vm.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/strescape.h"

/* One message on one line: a guest name or path with a newline or an
 * escape sequence in it is printed escaped (lib/strescape.h). */
static void print_line(const char *prefix, const char *fmt, va_list ap)
{
	char line[2048], safe[4096];

	vsnprintf(line, sizeof(line), fmt, ap);
	fprintf(stderr, "%s%s\n", prefix, str_escape_controls(safe, sizeof(safe), line));
}

int vm_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	print_line("vm: ", fmt, ap);
	va_end(ap);
	return 1;
}

void vm_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	print_line("vm: warning: ", fmt, ap);
	va_end(ap);
}

int vm_path(char *out, const char *a, const char *b)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", a, b);

	return n < 0 || n >= PATH_MAX ? -1 : 0;
}

static int copy_str(char *dst, size_t len, const char *src)
{
	int n = snprintf(dst, len, "%s", src);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* A tool of khyve's (khyve, khyvectl) lives beside vm (build/bin,
 * /usr/local/sbin) unless $ENV says. */
static void find_tool(const struct vm_sys *sys, const char *tool, const char *env_name, char *out,
                      size_t len)
{
	const char *env = getenv(env_name);
	char *slash;

	if (env && *env) {
		copy_str(out, len, env);
		return;
	}
	if (sys->self[0]) {
		copy_str(out, len, sys->self);
		slash = strrchr(out, '/');
		if (slash && (size_t)(slash - out) + 1 + strlen(tool) < len) {
			strcpy(slash + 1, tool);
			if (access(out, X_OK) == 0)
				return;
		}
	}
	copy_str(out, len, tool);
}

static struct rcconf *load_or_empty(const char *path, char *err, size_t errlen)
{
	struct rcconf *rc = rcconf_load(path, err, errlen);

	if (!rc && errno == ENOENT)
		rc = rcconf_new();
	return rc;
}

int vm_sys_load(struct vm_sys *sys, char *err, size_t errlen)
{
	const char *env = getenv("KHYVE_CONF"), *dir;
	ssize_t n;

	memset(sys, 0, sizeof(*sys));
	n = readlink("/proc/self/exe", sys->self, sizeof(sys->self) - 1);
	if (n > 0)
		sys->self[n] = '\0';
	find_tool(sys, "khyve", "KHYVE", sys->khyve, sizeof(sys->khyve));
	find_tool(sys, "khyvectl", "KHYVECTL", sys->khyvectl, sizeof(sys->khyvectl));
	if (copy_str(sys->conf_path, sizeof(sys->conf_path), env && *env ? env : VM_DEFAULT_CONF)) {
		snprintf(err, errlen, "KHYVE_CONF is too long");
		return -1;
	}
	sys->conf = load_or_empty(sys->conf_path, err, errlen);
	if (!sys->conf)
		return -1;
	dir = rcconf_get(sys->conf, "vm_dir");
	if (!dir || !*dir)
		return 0;
	if (!strncmp(dir, "zfs:", 4)) {
		snprintf(err, errlen,
		         "%s: vm_dir=\"%s\": ZFS datasets are not supported yet; use a folder",
		         sys->conf_path, dir);
		return -1;
	}
	if (dir[0] != '/' || copy_str(sys->vm_dir, sizeof(sys->vm_dir), dir) ||
	    vm_path(sys->config_dir, sys->vm_dir, ".config")) {
		snprintf(err, errlen, "%s: vm_dir must be an absolute path", sys->conf_path);
		return -1;
	}
	char path[PATH_MAX];
	if (vm_path(path, sys->config_dir, "system.conf")) {
		snprintf(err, errlen, "vm_dir is too long");
		return -1;
	}
	sys->system = load_or_empty(path, err, errlen);
	return sys->system ? 0 : -1;
}

void vm_sys_free(struct vm_sys *sys)
{
	rcconf_free(sys->conf);
	rcconf_free(sys->system);
	sys->conf = sys->system = NULL;
}

int vm_sys_require_init(const struct vm_sys *sys, char *err, size_t errlen)
{
	struct stat st;

	if (!sys->vm_dir[0]) {
		if (access(sys->conf_path, F_OK) != 0)
			snprintf(err, errlen,
			         "%s does not exist: write vm_dir=\"/path\" into it, then "
			         "run vm init",
			         sys->conf_path);
		else
			snprintf(err, errlen,
			         "vm_dir is not set in %s (vm_dir=\"/path\"), then run "
			         "vm init",
			         sys->conf_path);
		return -1;
	}
	if (stat(sys->config_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not initialised; run vm init", sys->vm_dir);
		return -1;
	}
	return 0;
}

int vm_sys_save_system(struct vm_sys *sys, char *err, size_t errlen)
{
	char path[PATH_MAX];

	if (vm_path(path, sys->config_dir, "system.conf")) {
		snprintf(err, errlen, "vm_dir is too long");
		return -1;
	}
	return rcconf_save(sys->system, path, err, errlen);
}

/* datastore_list="a b c" holds the extra datastores; "default" is vm_dir. */
static int datastore_word(const struct vm_sys *sys, size_t i, char *out, size_t len)
{
	const char *list = rcconf_get_default(sys->system, "datastore_list", "");
	size_t k = 0;

	for (const char *p = list; *p;) {
		size_t wl;
		while (isspace((unsigned char)*p))
			p++;
		wl = strcspn(p, " \t");
		if (!wl)
			break;
		if (k++ == i) {
			if (wl >= len)
				return -1;
			memcpy(out, p, wl);
			out[wl] = '\0';
			return 0;
		}
		p += wl;
	}
	return -1;
}

size_t vm_datastore_count(const struct vm_sys *sys)
{
	char w[VM_NAME_MAX + 1];
	size_t n = 0;

	while (datastore_word(sys, n, w, sizeof(w)) == 0)
		n++;
	return n + 1;
}

const char *vm_datastore_name(const struct vm_sys *sys, size_t i)
{
	static char name[VM_NAME_MAX + 1];

	if (i == 0)
		return "default";
	return datastore_word(sys, i - 1, name, sizeof(name)) == 0 ? name : NULL;
}

const char *vm_datastore_path(const struct vm_sys *sys, const char *name)
{
	char key[VM_NAME_MAX + 8];

	if (!strcmp(name, "default"))
		return sys->vm_dir;
	const char *path;

	if (snprintf(key, sizeof(key), "path_%s", name) >= (int)sizeof(key))
		return NULL;
	path = rcconf_get(sys->system, key);
	/* "iso:/x", "img:/x" (media stores) and "zfs:..." hold no guests here. */
	return path && path[0] == '/' ? path : NULL;
}

bool vm_name_valid(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > VM_NAME_MAX || !isalnum((unsigned char)name[0]))
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return false;
	return true;
}

static int guest_paths(struct vm_guest *g, const char *ds, const char *ds_path, const char *name)
{
	char file[VM_NAME_MAX + 8];

	memset(g, 0, sizeof(*g));
	snprintf(file, sizeof(file), "%s.conf", name);
	if (copy_str(g->name, sizeof(g->name), name) ||
	    copy_str(g->datastore, sizeof(g->datastore), ds) || vm_path(g->dir, ds_path, name) ||
	    vm_path(g->conf_path, g->dir, file))
		return -1;
	return 0;
}

int vm_guest_find(const struct vm_sys *sys, const char *name, struct vm_guest *g, char *err,
                  size_t errlen)
{
	memset(g, 0, sizeof(*g)); /* vm_guest_free() is safe after a failure */
	if (!vm_name_valid(name)) {
		snprintf(err, errlen, "%s: not a valid virtual machine name", name);
		return -1;
	}
	for (size_t i = 0; i < vm_datastore_count(sys); i++) {
		const char *ds = vm_datastore_name(sys, i);
		const char *path = ds ? vm_datastore_path(sys, ds) : NULL;
		char dsname[VM_NAME_MAX + 1];

		if (!path || copy_str(dsname, sizeof(dsname), ds) ||
		    guest_paths(g, dsname, path, name))
			continue;
		if (access(g->conf_path, F_OK) != 0)
			continue;
		g->conf = rcconf_load(g->conf_path, err, errlen);
		return g->conf ? 0 : -1;
	}
	snprintf(err, errlen, "%s: no such virtual machine", name);
	return -1;
}

void vm_guest_free(struct vm_guest *g)
{
	rcconf_free(g->conf);
	g->conf = NULL;
}

int vm_guest_save(struct vm_guest *g, char *err, size_t errlen)
{
	return rcconf_save(g->conf, g->conf_path, err, errlen);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Call fn for each guest folder of one datastore, sorted by name. */
static int foreach_in(const char *ds, const char *path, int (*fn)(struct vm_guest *, void *),
                      void *arg)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !vm_name_valid(e->d_name))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			char **nn = realloc(names, cap * sizeof(*nn));
			if (!nn)
				break;
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name)))
			break;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		struct vm_guest g;
		char err[512];

		if (rc == 0 && guest_paths(&g, ds, path, names[i]) == 0 &&
		    access(g.conf_path, F_OK) == 0) {
			g.conf = rcconf_load(g.conf_path, err, sizeof(err));
			rc = fn(&g, arg);
			vm_guest_free(&g);
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int vm_guest_foreach(const struct vm_sys *sys, int (*fn)(struct vm_guest *g, void *arg), void *arg)
{
	for (size_t i = 0; i < vm_datastore_count(sys); i++) {
		char ds[VM_NAME_MAX + 1];
		const char *name = vm_datastore_name(sys, i), *path;
		int rc;

		if (!name || copy_str(ds, sizeof(ds), name))
			continue;
		path = vm_datastore_path(sys, ds);
		if (path && (rc = foreach_in(ds, path, fn, arg)) != 0)
			return rc;
	}
	return 0;
}

int vm_require_write(const struct vm_sys *sys, const char *command)
{
	if (geteuid() == 0 || (sys->vm_dir[0] && access(sys->vm_dir, W_OK) == 0))
		return 0;
	vm_error("%s changes virtual machines and needs root (run it with sudo)", command);
	return -1;
}

int vm_parse_size(const char *s, unsigned long long *bytes)
{
	char *end;
	unsigned long long v, mul = 1;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (toupper((unsigned char)*end)) {
	case 'T':
		mul <<= 10; /* fall through */
	case 'G':
		mul <<= 10; /* fall through */
	case 'M':
		mul <<= 10; /* fall through */
	case 'K':
		mul <<= 10;
		end++;
		break;
	case '\0':
		break;
	default:
		return -1;
	}
	if (toupper((unsigned char)*end) == 'B')
		end++;
	if (*end || v == 0 || v > ~0ULL / mul)
		return -1;
	*bytes = v * mul;
	return 0;
}
