/* vm datastore list|add|remove (commands.h, storage.h). */
#include "vm/commands.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <mntent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vm/khyvecmd.h"
#include "vm/state.h"
#include "vm/util.h"
#include "vm/storage.h"

/* ------------------------------------------------------------------ */
/* Datastores: datastore_list="a b" and path_NAME="/dir", "zfs:pool/ds",
 * "iso:/dir" or "img:/dir" in system.conf; "default" is $vm_dir. */

static const char *const ds_type_names[] = {"directory", "zfs", "iso", "img"};

enum ds_type storage_spec_type(const char *spec)
{
	if (!strncmp(spec, "zfs:", 4))
		return DS_ZFS;
	if (!strncmp(spec, "iso:", 4))
		return DS_ISO;
	if (!strncmp(spec, "img:", 4))
		return DS_IMG;
	return DS_DIR;
}

/* Where a spec's files are: the folder, or the folder after "iso:"/"img:". */
const char *storage_spec_dir(const char *spec)
{
	return storage_spec_type(spec) == DS_DIR ? spec : spec + 4;
}

/*
 * Datastore names become part of the key path_NAME, so unlike vm-bhyve we
 * allow only what a key may hold: letters, digits and '_'.
 */
static bool ds_name_valid(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > VM_NAME_MAX || !isalnum((unsigned char)name[0]))
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return false;
	return true;
}

const char *storage_ds_spec(const struct vm_sys *sys, const char *name)
{
	char key[VM_NAME_MAX + 8];

	snprintf(key, sizeof(key), "path_%s", name);
	return rcconf_get(sys->system, key);
}

bool storage_ds_listed(const struct vm_sys *sys, const char *name)
{
	for (size_t i = 1; i < vm_datastore_count(sys); i++) {
		const char *n = vm_datastore_name(sys, i);
		if (n && !strcmp(n, name))
			return true;
	}
	return false;
}

/* A mounted ZFS dataset's mount point from /proc/self/mounts (as vm-bhyve
 * greps mount(8)); false when it is not mounted. */
static bool zfs_mountpoint(const char *dataset, char *out, size_t len)
{
	FILE *f = setmntent("/proc/self/mounts", "r");
	struct mntent *m;
	bool found = false;

	if (!f)
		return false;
	while (!found && (m = getmntent(f)))
		if (!strcmp(m->mnt_type, "zfs") && !strcmp(m->mnt_fsname, dataset))
			found = snprintf(out, len, "%s", m->mnt_dir) < (int)len;
	endmntent(f);
	return found;
}

static int ds_list(const struct vm_sys *sys)
{
	const char *fmt = "%-15s %-11s %-25s %s\n";

	printf(fmt, "NAME", "TYPE", "PATH", "ZFS DATASET");
	printf(fmt, "default", "directory", sys->vm_dir, "-");
	for (size_t i = 1; i < vm_datastore_count(sys); i++) {
		const char *name = vm_datastore_name(sys, i), *spec;
		char mount[PATH_MAX];

		if (!name || !strcmp(name, "default") || !(spec = storage_ds_spec(sys, name)) ||
		    !*spec)
			continue;
		enum ds_type t = storage_spec_type(spec);
		if (t == DS_ZFS)
			printf(fmt, name, "zfs",
			       zfs_mountpoint(spec + 4, mount, sizeof(mount)) ? mount : "-",
			       spec + 4);
		else
			printf(fmt, name, ds_type_names[t], storage_spec_dir(spec), "-");
	}
	return 0;
}

/* Where `spec` keeps its files, checked as vm-bhyve checks it: an existing
 * absolute folder, or a mounted dataset.  0 or -1 with `err`. */
static int spec_resolve(const char *spec, char *mount, char *err, size_t errlen)
{
	const char *dir = storage_spec_dir(spec);

	if (storage_spec_type(spec) == DS_ZFS) {
		if (!storage_tool_installed("zfs")) {
			snprintf(err, errlen,
			         "%s: ZFS datastores need the zfs tool, which is not installed",
			         spec);
			return -1;
		}
		if (!zfs_mountpoint(spec + 4, mount, PATH_MAX)) {
			snprintf(err, errlen, "%s: not a mounted ZFS dataset", spec);
			return -1;
		}
		return 0;
	}
	if (dir[0] != '/') {
		snprintf(err, errlen, "%s: a datastore path must be absolute", dir);
		return -1;
	}
	if (!storage_is_dir(dir)) {
		snprintf(err, errlen, "%s: no such directory (create it first)", dir);
		return -1;
	}
	if (snprintf(mount, PATH_MAX, "%s", dir) >= PATH_MAX) {
		snprintf(err, errlen, "%s: path too long", dir);
		return -1;
	}
	return 0;
}

static bool same_dir(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* datastore_list plus or minus `name` (malloc'd; NULL when out of memory). */
static char *ds_list_with(const struct vm_sys *sys, const char *add, const char *drop)
{
	size_t len =
	    strlen(rcconf_get_default(sys->system, "datastore_list", "")) + VM_NAME_MAX + 2;
	char *out = calloc(1, len);

	if (!out)
		return NULL;
	for (size_t i = 1; i < vm_datastore_count(sys); i++) {
		const char *n = vm_datastore_name(sys, i);
		if (!n || (drop && !strcmp(n, drop)))
			continue;
		if (*out)
			strcat(out, " ");
		strcat(out, n);
	}
	if (add) {
		if (*out)
			strcat(out, " ");
		strcat(out, add);
	}
	return out;
}

/* Set datastore_list and path_NAME (NULL: remove) and save system.conf. */
static int ds_save(struct vm_sys *sys, const char *name, const char *spec)
{
	char key[VM_NAME_MAX + 8], err[ERRLEN];
	char *list = spec ? ds_list_with(sys, name, NULL) : ds_list_with(sys, NULL, name);
	int rc;

	if (!list)
		return vm_error("out of memory");
	snprintf(key, sizeof(key), "path_%s", name);
	rc = rcconf_set(sys->system, "datastore_list", *list ? list : NULL);
	if (rc == 0)
		rc = rcconf_set(sys->system, key, spec);
	free(list);
	if (rc < 0)
		return vm_error("%s: cannot be stored in system.conf", spec ? spec : name);
	if (vm_sys_save_system(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	return 0;
}

static int ds_add(struct vm_sys *sys, const char *name, const char *spec_in)
{
	char spec[PATH_MAX + 8], mount[PATH_MAX];
	size_t len;
	char err[ERRLEN];

	if (!ds_name_valid(name))
		return vm_error("%s: not a valid datastore name (letters, digits and _)", name);
	if (!strcmp(name, "default") || storage_ds_listed(sys, name))
		return vm_error("datastore %s already exists", name);
	if (snprintf(spec, sizeof(spec), "%s", spec_in) >= (int)sizeof(spec))
		return vm_error("%s: path too long", spec_in);
	len = strlen(spec);
	while (len > 1 && spec[len - 1] == '/' && spec[len - 2] != ':')
		spec[--len] = '\0';
	if (!rcconf_value_valid(spec))
		return vm_error("%s: a datastore path cannot hold \" # \\ $ or `", spec);
	if (spec_resolve(spec, mount, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (storage_spec_type(spec) != DS_ISO && storage_spec_type(spec) != DS_IMG &&
	    same_dir(mount, sys->vm_dir))
		return vm_error("%s is already the default datastore", mount);
	return ds_save(sys, name, spec);
}

static int ds_remove(struct vm_sys *sys, const char *name)
{
	if (!strcmp(name, "default"))
		return vm_error("the default datastore cannot be removed");
	if (!storage_ds_listed(sys, name))
		return vm_error("%s: no such datastore", name);
	return ds_save(sys, name, NULL);
}

/* "iso:" or "img:" in front of a plain folder, for `vm datastore iso|img`. */
static int ds_add_media(struct vm_sys *sys, const char *kind, const char *name, const char *dir)
{
	char spec[PATH_MAX + 8];

	if (snprintf(spec, sizeof(spec), "%s:%s", kind, dir) >= (int)sizeof(spec))
		return vm_error("%s: path too long", dir);
	return ds_add(sys, name, spec);
}

int cmd_datastore(struct vm_sys *sys, int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : "";
	char err[ERRLEN];

	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (!strcmp(sub, "list") && argc == 2)
		return ds_list(sys);
	if (!strcmp(sub, "add") && argc == 4)
		return vm_require_write(sys, "datastore add") ? 1 : ds_add(sys, argv[2], argv[3]);
	if (!strcmp(sub, "remove") && argc == 3)
		return vm_require_write(sys, "datastore remove") ? 1 : ds_remove(sys, argv[2]);
	if ((!strcmp(sub, "iso") || !strcmp(sub, "img")) && argc == 4)
		return vm_require_write(sys, "datastore add")
		           ? 1
		           : ds_add_media(sys, sub, argv[2], argv[3]);
	return vm_error("usage: vm datastore list | add NAME PATH|zfs:DATASET | remove NAME | "
	                "iso|img NAME PATH");
}
