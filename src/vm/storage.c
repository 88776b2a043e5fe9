/*
 * Storage commands (commands.h): vm datastore, iso, img, clone, snapshot
 * and rollback.
 *
 * vm-bhyve leaves snapshots, rollback and clone to ZFS.  On a directory
 * datastore we keep a snapshot as a folder of copies instead:
 *
 *   $guest/.snapshots/SNAP/NAME.conf      the settings at that time
 *   $guest/.snapshots/SNAP/disk0.img ...  every disk file (diskN_name)
 *   $guest/.snapshots/SNAP/.snapshot      seq="N" (creation order), created=
 *
 * Copies are made with `cp --reflink=auto --sparse=always`, so they cost
 * nothing on btrfs/XFS and only the allocated blocks elsewhere.  Anything
 * built in steps is built under a hidden temporary name in the folder it
 * will live in and renamed into place at the end, so a failure leaves no
 * half-made snapshot, clone or image behind.  ^C removes temporary files
 * (downloads, conversions, rollbacks); an interrupted snapshot or clone
 * leaves a hidden .NAME.XXXXXX folder, which nothing reads.
 *
 * Guests on "zfs:pool/dataset" datastores use zfs(8) as vm-bhyve does.
 */
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
#include "vm/paths.h"
#include "vm/state.h"
#include "vm/util.h"
#include "vm/storage.h"

/* ------------------------------------------------------------------ */
/* Temporary files removed on SIGINT/SIGTERM/SIGHUP (downloads can be long). */

#define MAX_TEMPS (MAX_DISKS + 4) /* a rollback has one per snapshot file */
static char temp_paths[MAX_TEMPS][PATH_MAX];

static void remove_temps_and_die(int sig)
{
	for (int i = 0; i < MAX_TEMPS; i++)
		if (temp_paths[i][0])
			unlink(temp_paths[i]);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void temp_track(const char *path)
{
	static bool handlers;

	if (!handlers) {
		signal(SIGINT, remove_temps_and_die);
		signal(SIGTERM, remove_temps_and_die);
		signal(SIGHUP, remove_temps_and_die);
		handlers = true;
	}
	for (int i = 0; i < MAX_TEMPS; i++)
		if (!temp_paths[i][0]) {
			snprintf(temp_paths[i], PATH_MAX, "%s", path);
			return;
		}
}

/* Forget `path` (it was renamed into place); unlink it too when `remove`. */
void storage_temp_done(const char *path, bool remove)
{
	if (!path[0])
		return;
	for (int i = 0; i < MAX_TEMPS; i++)
		if (!strcmp(temp_paths[i], path))
			temp_paths[i][0] = '\0';
	if (remove)
		unlink(path);
}

/*
 * Create an empty file DIR/.BASE.XXXXXX for data that will be renamed to
 * DIR/BASE; its name goes to `out` (PATH_MAX) and it is removed if we are
 * killed.  0 or -1 with `err`.
 */
int storage_temp_file(const char *dir, const char *base, char *out, char *err, size_t errlen)
{
	int fd;

	if (snprintf(out, PATH_MAX, "%s/.%s.XXXXXX", dir, base) >= PATH_MAX) {
		snprintf(err, errlen, "%s/%s: path too long", dir, base);
		return -1;
	}
	fd = mkstemp(out);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		out[0] = '\0';
		return -1;
	}
	close(fd);
	temp_track(out);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Files and folders. */

bool storage_path_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

bool storage_is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool storage_is_regular(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* rm -rf `path` (best effort: used to undo our own temporary folders). */
void storage_remove_tree(const char *path)
{
	if (path[0])
		vm_rmtree(path);
}

/* Join into `out` (PATH_MAX) or fail with "path too long" in `err`. */
int storage_join(char *out, const char *a, const char *b, char *err, size_t errlen)
{
	if (vm_path(out, a, b) == 0)
		return 0;
	snprintf(err, errlen, "%s/%s: path too long", a, b);
	return -1;
}

bool storage_has_suffix(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);

	return ls > lx && !strcasecmp(s + ls - lx, suffix);
}

/* Drop `suffix` from the end of `s` when it is there; true when it was. */
bool storage_strip_suffix(char *s, const char *suffix)
{
	if (!storage_has_suffix(s, suffix))
		return false;
	s[strlen(s) - strlen(suffix)] = '\0';
	return true;
}

/* ------------------------------------------------------------------ */
/* Running tools. */

bool storage_tool_installed(const char *name)
{
	const char *path = getenv("PATH");
	char file[PATH_MAX];

	if (!path || !*path)
		return false;
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");

		if (n &&
		    snprintf(file, sizeof(file), "%.*s/%s", (int)n, p, name) < (int)sizeof(file) &&
		    access(file, X_OK) == 0 && storage_is_regular(file))
			return true;
		p += n;
		if (*p == ':')
			p++;
	}
	return false;
}

/* Run a tool: its stdout to `out_fd` (0: nowhere); -1 with "TOOL: why". */
int storage_run_tool(const char *const argv[], int out_fd, char *err, size_t errlen)
{
	return vm_tool_run(&(struct vm_tool){.argv = argv, .out_fd = out_fd}, err, errlen);
}

/* cp --reflink=auto --sparse=always --preserve=mode,timestamps SRC DST */
int storage_copy_file(const char *src, const char *dst, char *err, size_t errlen)
{
	const char *argv[] = {"cp", CP_REFLINK, CP_SPARSE, "--preserve=mode,timestamps",
	                      "--", src,        dst,       NULL};

	return storage_run_tool(argv, 0, err, errlen);
}

/* ------------------------------------------------------------------ */
/* Guests: NAME[@SNAP] arguments, disk files, state. */

/* Snapshot names: what ZFS allows, less spaces: [A-Za-z0-9][A-Za-z0-9._:-]*. */
bool storage_snap_name_valid(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > SNAP_NAME_MAX || !isalnum((unsigned char)s[0]))
		return false;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._:-", *p))
			return false;
	return true;
}

/*
 * Split "NAME" or "NAME@SNAP" into `name` and `snap` ("" when none).  -1
 * after printing one line for a bad guest or snapshot name.
 */
int storage_split_target(const char *arg, char *name, char *snap)
{
	const char *at = strchr(arg, '@');
	size_t nl = at ? (size_t)(at - arg) : strlen(arg);

	if (nl == 0 || nl > VM_NAME_MAX) {
		vm_error("%s: not a valid virtual machine name", arg);
		return -1;
	}
	memcpy(name, arg, nl);
	name[nl] = '\0';
	snap[0] = '\0';
	if (at && !at[1]) {
		vm_error("%s: no snapshot name after '@'", arg);
		return -1;
	}
	if (at && !storage_snap_name_valid(at + 1)) {
		vm_error("%s: not a valid snapshot name (letters, digits and ._:-)", at + 1);
		return -1;
	}
	if (at)
		strcpy(snap, at + 1);
	return 0;
}

int storage_find_guest(const struct vm_sys *sys, const char *name, struct vm_guest *g)
{
	char err[ERRLEN];

	if (vm_guest_find(sys, name, g, err, sizeof(err)) < 0) {
		vm_error("%s", err);
		return -1;
	}
	return 0;
}

bool storage_guest_stopped(const struct vm_sys *sys, const struct vm_guest *g)
{
	struct vm_status st;

	vm_status_get(sys, g, &st);
	return st.state == VM_STOPPED || st.state == VM_SUSPENDED;
}

bool storage_disk_listed(const struct disk_files *d, const char *name)
{
	for (size_t i = 0; i < d->n; i++)
		if (!strcmp(d->name[i], name))
			return true;
	return false;
}

/* One diskN: a plain file in the guest's folder, or -1 with `err`. */
static int disk_file(const struct vm_guest *g, unsigned n, const char *file, char *err,
                     size_t errlen)
{
	char key[32], path[PATH_MAX], why[2 * PATH_MAX];
	const char *dev;

	snprintf(key, sizeof(key), "disk%u_dev", n);
	dev = rcconf_get_default(g->conf, key, "file");
	if (*dev && strcmp(dev, "file") && strcmp(dev, "sparse")) {
		snprintf(err, errlen,
		         "%s: disk%u is a %s device; only disk files can be snapshotted "
		         "or cloned outside ZFS",
		         g->name, n, dev);
		return -1;
	}
	if (!*file || file[0] == '.' || strchr(file, '/') || strlen(file) > NAME_MAX ||
	    (!strncmp(file, g->name, strlen(g->name)) &&
	     !strcmp(file + strlen(g->name), ".conf"))) {
		snprintf(err, errlen,
		         "%s: disk%u_name=\"%s\" must name a file in the guest's folder", g->name,
		         n, file);
		return -1;
	}
	if (vm_path(path, g->dir, file) < 0 || !storage_is_regular(path)) {
		snprintf(err, errlen, "%s/%s: disk%u is missing", g->dir, file, n);
		return -1;
	}
	/* A link may point at another file of the folder, never outside it. */
	if (vm_path_confine(g->dir, file, path, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: disk%u_name=\"%s\": %s", g->name, n, file, why);
		return -1;
	}
	return 0;
}

/* The guest's disk files, as vm-bhyve counts disks: disk0, disk1, ...
 * up to the first diskN_name that is unset. */
int storage_guest_disk_files(const struct vm_guest *g, struct disk_files *d, char *err,
                             size_t errlen)
{
	char key[32];
	const char *file;

	d->n = 0;
	for (unsigned n = 0; n < MAX_DISKS; n++) {
		snprintf(key, sizeof(key), "disk%u_name", n);
		if (!(file = rcconf_get(g->conf, key)))
			break;
		if (disk_file(g, n, file, err, errlen) < 0)
			return -1;
		if (!storage_disk_listed(d, file))
			strcpy(d->name[d->n++], file);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* ZFS datastores: vm-bhyve's own approach, through zfs(8). */

/* Guest `g`'s dataset into `out` when its datastore is "zfs:...". */
bool storage_guest_dataset(const struct vm_sys *sys, const struct vm_guest *g, char *out,
                           size_t len)
{
	const char *spec =
	    strcmp(g->datastore, "default") ? storage_ds_spec(sys, g->datastore) : NULL;

	if (!spec || storage_spec_type(spec) != DS_ZFS)
		return false;
	return snprintf(out, len, "%s/%s", spec + 4, g->name) < (int)len;
}

int storage_need_zfs(void)
{
	if (storage_tool_installed("zfs"))
		return 0;
	return vm_error("this guest lives on a ZFS datastore, and the zfs tool is not installed");
}

/* Call fn on the guest's dataset and every dataset or zvol below it. */
int storage_zfs_each(const char *dataset, int (*fn)(const char *fs, void *arg), void *arg)
{
	const char *argv[] = {"zfs",   "list", "-o", "name", "-rHt", "filesystem,volume",
	                      dataset, NULL};
	char err[ERRLEN], line[PATH_MAX];
	FILE *out = tmpfile();
	int rc = 0;

	if (!out)
		return vm_error("tmpfile: %s", strerror(errno));
	if (storage_run_tool(argv, fileno(out), err, sizeof(err)) < 0)
		rc = vm_error("%s", err);
	rewind(out);
	while (rc == 0 && fgets(line, sizeof(line), out)) {
		line[strcspn(line, "\n")] = '\0';
		if (*line)
			rc = fn(line, arg);
	}
	fclose(out);
	return rc;
}

static int zfs_run(const char **argv)
{
	char err[ERRLEN];

	return storage_run_tool(argv, 0, err, sizeof(err)) < 0 ? vm_error("%s", err) : 0;
}

int storage_zfs_snapshot(const char *dataset, const char *snap)
{
	char full[PATH_MAX];
	const char *argv[] = {"zfs", "snapshot", "-r", full, NULL};

	snprintf(full, sizeof(full), "%s@%s", dataset, snap);
	return zfs_run(argv);
}

int storage_zfs_rollback_one(const char *fs, void *arg)
{
	const struct zfs_rollback_arg *a = arg;
	char full[PATH_MAX];
	const char *plain[] = {"zfs", "rollback", full, NULL};
	const char *recursive[] = {"zfs", "rollback", "-r", full, NULL};

	snprintf(full, sizeof(full), "%s@%s", fs, a->snap);
	return zfs_run(a->recursive ? recursive : plain);
}

int storage_zfs_clone_one(const char *fs, void *arg)
{
	const struct zfs_clone_arg *a = arg;
	char from[PATH_MAX], to[PATH_MAX];
	const char *clone[] = {"zfs", "clone", from, to, NULL};
	const char *check[] = {"zfs", "get", "creation", from, NULL};

	snprintf(from, sizeof(from), "%s@%s", fs, a->snap);
	snprintf(to, sizeof(to), "%s%s", a->new_ds, fs + strlen(a->old_ds));
	return zfs_run(a->check_only ? check : clone);
}
