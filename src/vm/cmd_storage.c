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
#include "vm/state.h"
#include "vm/util.h"

#define ERRLEN        (PATH_MAX + 512)
#define SNAP_NAME_MAX 64
#define MAX_DISKS     64
#define SNAP_DIR      ".snapshots"
#define SNAP_META     ".snapshot"
/* cp flags for guest data: share blocks where the filesystem can, keep holes. */
#define CP_REFLINK "--reflink=auto"
#define CP_SPARSE  "--sparse=always"

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
static void temp_done(const char *path, bool remove)
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
static int temp_file(const char *dir, const char *base, char *out, char *err, size_t errlen)
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

static bool path_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_regular(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* rename() that fails with EEXIST instead of replacing `to`. */
static int rename_noreplace(const char *from, const char *to)
{
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	/* Filesystems without RENAME_NOREPLACE: check, then rename. */
	if (path_exists(to)) {
		errno = EEXIST;
		return -1;
	}
	return rename(from, to);
}

/* rm -rf `path` (best effort: used to undo our own temporary folders). */
static void remove_tree(const char *path)
{
	if (path[0])
		vm_rmtree(path);
}

/* Join into `out` (PATH_MAX) or fail with "path too long" in `err`. */
static int join(char *out, const char *a, const char *b, char *err, size_t errlen)
{
	if (vm_path(out, a, b) == 0)
		return 0;
	snprintf(err, errlen, "%s/%s: path too long", a, b);
	return -1;
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);

	return ls > lx && !strcasecmp(s + ls - lx, suffix);
}

/* Drop `suffix` from the end of `s` when it is there; true when it was. */
static bool strip_suffix(char *s, const char *suffix)
{
	if (!has_suffix(s, suffix))
		return false;
	s[strlen(s) - strlen(suffix)] = '\0';
	return true;
}

/* ------------------------------------------------------------------ */
/* Running tools. */

static bool tool_installed(const char *name)
{
	const char *path = getenv("PATH");
	char file[PATH_MAX];

	if (!path || !*path)
		return false;
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");

		if (n &&
		    snprintf(file, sizeof(file), "%.*s/%s", (int)n, p, name) < (int)sizeof(file) &&
		    access(file, X_OK) == 0 && is_regular(file))
			return true;
		p += n;
		if (*p == ':')
			p++;
	}
	return false;
}

/* Run a tool: its stdout to `out_fd` (0: nowhere); -1 with "TOOL: why". */
static int run_tool(const char *const argv[], int out_fd, char *err, size_t errlen)
{
	return vm_tool_run(&(struct vm_tool){.argv = argv, .out_fd = out_fd}, err, errlen);
}

/* cp --reflink=auto --sparse=always --preserve=mode,timestamps SRC DST */
static int copy_file(const char *src, const char *dst, char *err, size_t errlen)
{
	const char *argv[] = {"cp", CP_REFLINK, CP_SPARSE, "--preserve=mode,timestamps",
	                      "--", src,        dst,       NULL};

	return run_tool(argv, 0, err, errlen);
}

/* ------------------------------------------------------------------ */
/* Datastores: datastore_list="a b" and path_NAME="/dir", "zfs:pool/ds",
 * "iso:/dir" or "img:/dir" in system.conf; "default" is $vm_dir. */

enum ds_type { DS_DIR, DS_ZFS, DS_ISO, DS_IMG };

static const char *const ds_type_names[] = {"directory", "zfs", "iso", "img"};

static enum ds_type spec_type(const char *spec)
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
static const char *spec_dir(const char *spec)
{
	return spec_type(spec) == DS_DIR ? spec : spec + 4;
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

static const char *ds_spec(const struct vm_sys *sys, const char *name)
{
	char key[VM_NAME_MAX + 8];

	snprintf(key, sizeof(key), "path_%s", name);
	return rcconf_get(sys->system, key);
}

static bool ds_listed(const struct vm_sys *sys, const char *name)
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

		if (!name || !strcmp(name, "default") || !(spec = ds_spec(sys, name)) || !*spec)
			continue;
		enum ds_type t = spec_type(spec);
		if (t == DS_ZFS)
			printf(fmt, name, "zfs",
			       zfs_mountpoint(spec + 4, mount, sizeof(mount)) ? mount : "-",
			       spec + 4);
		else
			printf(fmt, name, ds_type_names[t], spec_dir(spec), "-");
	}
	return 0;
}

/* Where `spec` keeps its files, checked as vm-bhyve checks it: an existing
 * absolute folder, or a mounted dataset.  0 or -1 with `err`. */
static int spec_resolve(const char *spec, char *mount, char *err, size_t errlen)
{
	const char *dir = spec_dir(spec);

	if (spec_type(spec) == DS_ZFS) {
		if (!tool_installed("zfs")) {
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
	if (!is_dir(dir)) {
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
	if (!strcmp(name, "default") || ds_listed(sys, name))
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
	if (spec_type(spec) != DS_ISO && spec_type(spec) != DS_IMG && same_dir(mount, sys->vm_dir))
		return vm_error("%s is already the default datastore", mount);
	return ds_save(sys, name, spec);
}

static int ds_remove(struct vm_sys *sys, const char *name)
{
	if (!strcmp(name, "default"))
		return vm_error("the default datastore cannot be removed");
	if (!ds_listed(sys, name))
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

/* ------------------------------------------------------------------ */
/* vm iso / vm img: install media in $vm_dir/.iso and cloud images in
 * $vm_dir/.img (and "iso:"/"img:" datastores). */

enum media { MEDIA_ISO, MEDIA_IMG };

static const char *media_word(enum media m)
{
	return m == MEDIA_ISO ? "iso" : "img";
}

/* The folder of media datastore `ds` ("default": $vm_dir/.iso or .img). */
static int media_dir(const struct vm_sys *sys, enum media m, const char *ds, char *out)
{
	const char *spec;
	char sub[8];

	if (!strcmp(ds, "default")) {
		snprintf(sub, sizeof(sub), ".%s", media_word(m));
		if (vm_path(out, sys->vm_dir, sub) < 0)
			return vm_error("vm_dir is too long");
		return 0;
	}
	spec = ds_listed(sys, ds) ? ds_spec(sys, ds) : NULL;
	if (!spec || spec_type(spec) != (m == MEDIA_ISO ? DS_ISO : DS_IMG))
		return vm_error("%s: no such %s datastore", ds, media_word(m));
	snprintf(out, PATH_MAX, "%s", spec_dir(spec));
	return 0;
}

static int visible_entry(const struct dirent *e)
{
	return e->d_name[0] != '.';
}

/* "DATASTORE FILENAME" lines for the visible files of `dir`, in name order. */
static void media_list_dir(const char *ds, const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, visible_entry, alphasort);

	for (int i = 0; i < n; i++) {
		printf("%-20s%s\n", ds, names[i]->d_name);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

static int media_list(const struct vm_sys *sys, enum media m)
{
	char dir[PATH_MAX];

	printf("%-20s%s\n", "DATASTORE", "FILENAME");
	if (media_dir(sys, m, "default", dir) == 0)
		media_list_dir("default", dir);
	for (size_t i = 1; i < vm_datastore_count(sys); i++) {
		char name[VM_NAME_MAX + 1];
		const char *n = vm_datastore_name(sys, i), *spec;

		if (!n || snprintf(name, sizeof(name), "%s", n) >= (int)sizeof(name))
			continue;
		spec = ds_spec(sys, name);
		if (spec && spec_type(spec) == (m == MEDIA_ISO ? DS_ISO : DS_IMG))
			media_list_dir(name, spec_dir(spec));
	}
	return 0;
}

static bool is_url(const char *s)
{
	return !strncmp(s, "http://", 7) || !strncmp(s, "https://", 8) || !strncmp(s, "ftp://", 6);
}

/* The file name a URL or path ends in (no query or fragment) into `out`. */
static int source_basename(const char *src, char *out, size_t len)
{
	size_t end = is_url(src) ? strcspn(src, "?#") : strlen(src), start;

	while (end > 0 && src[end - 1] == '/')
		end--;
	start = end;
	while (start > 0 && src[start - 1] != '/')
		start--;
	if (end == start || src[start] == '.' || end - start >= len || end - start > NAME_MAX)
		return -1;
	memcpy(out, src + start, end - start);
	out[end - start] = '\0';
	return rcconf_value_valid(out) ? 0 : -1;
}

/* curl or wget URL into `dst`.  0 or -1 with `err`. */
static int download(const char *url, const char *dst, char *err, size_t errlen)
{
	if (tool_installed("curl")) {
		const char *argv[] = {"curl", "-fsSL", "--proto", "=http,https,ftp", "-o", dst,
		                      "--",   url,     NULL};
		return run_tool(argv, 0, err, errlen);
	}
	if (tool_installed("wget")) {
		const char *argv[] = {"wget", "-q", "-O", dst, "--", url, NULL};
		return run_tool(argv, 0, err, errlen);
	}
	snprintf(err, errlen,
	         "%s: downloading needs curl or wget (neither is installed); "
	         "download it yourself and pass the file",
	         url);
	return -1;
}

enum image_kind { IMAGE_RAW, IMAGE_XZ, IMAGE_GZIP, IMAGE_QCOW, IMAGE_QCOW2 };

/* What the first bytes of `path` say it is. */
static enum image_kind sniff_image(const char *path)
{
	unsigned char b[8] = {0};
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b)) : -1;

	if (fd >= 0)
		close(fd);
	if (n >= 6 && !memcmp(b,
	                      "\xfd"
	                      "7zXZ\0",
	                      6))
		return IMAGE_XZ;
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return IMAGE_GZIP;
	if (n >= 8 && !memcmp(b, "QFI\xfb", 4))
		return b[7] == 1 ? IMAGE_QCOW : IMAGE_QCOW2;
	return IMAGE_RAW;
}

/* An import in progress: the data so far (`cur`) and the name it will get. */
struct import {
	char dir[PATH_MAX];      /* where it goes */
	char name[NAME_MAX + 1]; /* its final name there */
	char cur[PATH_MAX];      /* the data as it stands */
	bool cur_is_temp;        /* cur is our temporary file (else the user's) */
};

/* Replace imp->cur by the new temporary file `next`. */
static void import_advance(struct import *imp, const char *next)
{
	if (imp->cur_is_temp)
		temp_done(imp->cur, true);
	snprintf(imp->cur, sizeof(imp->cur), "%s", next);
	imp->cur_is_temp = true;
}

/* Run `argv` (which reads imp->cur) into a new temporary file. */
static int import_step(struct import *imp, const char **argv, int dst_arg, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	int fd = -1, rc;

	if (temp_file(imp->dir, imp->name, tmp, err, errlen) < 0)
		return -1;
	if (dst_arg >= 0)
		argv[dst_arg] = tmp;
	else if ((fd = open(tmp, O_WRONLY | O_TRUNC | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		temp_done(tmp, true);
		return -1;
	}
	rc = run_tool(argv, fd, err, errlen);
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		temp_done(tmp, true);
		return -1;
	}
	import_advance(imp, tmp);
	return 0;
}

/* xz/gzip -dc: compressed cloud images (vm-bhyve unpacks .xz and .gz). */
static int import_decompress(struct import *imp, enum image_kind kind, char *err, size_t errlen)
{
	const char *tool = kind == IMAGE_XZ ? "xz" : "gzip";
	const char *argv[] = {tool, "-dc", "--", imp->cur, NULL};

	if (!tool_installed(tool)) {
		snprintf(err, errlen, "%s: unpacking it needs %s, which is not installed",
		         imp->name, tool);
		return -1;
	}
	if (!strip_suffix(imp->name, kind == IMAGE_XZ ? ".xz" : ".gz") &&
	    strip_suffix(imp->name, ".tgz"))
		strcat(imp->name, ".tar");
	if (has_suffix(imp->name, ".tar")) {
		snprintf(err, errlen, "%s: tar archives are not supported; unpack the image first",
		         imp->name);
		return -1;
	}
	return import_step(imp, argv, -1, err, errlen);
}

/* qemu-img convert -O raw: khyve's disks are raw files. */
static int import_to_raw(struct import *imp, enum image_kind kind, char *err, size_t errlen)
{
	const char *argv[] = {"qemu-img", "convert", "-f", kind == IMAGE_QCOW ? "qcow" : "qcow2",
	                      "-O",       "raw",     "--", imp->cur,
	                      NULL,       NULL};

	if (!tool_installed("qemu-img")) {
		snprintf(err, errlen,
		         "%s: converting a qcow2 image needs qemu-img, which is not installed",
		         imp->name);
		return -1;
	}
	if (!strip_suffix(imp->name, ".qcow2") && !strip_suffix(imp->name, ".qcow"))
		strip_suffix(imp->name, ".img");
	if (strlen(imp->name) + 4 > NAME_MAX) {
		snprintf(err, errlen, "%s: name too long", imp->name);
		return -1;
	}
	strcat(imp->name, ".img");
	return import_step(imp, argv, 8, err, errlen);
}

/* img: unpack, then make raw, whatever the download was. */
static int import_image(struct import *imp, char *err, size_t errlen)
{
	enum image_kind kind = sniff_image(imp->cur);

	if (kind == IMAGE_XZ || kind == IMAGE_GZIP) {
		if (import_decompress(imp, kind, err, errlen) < 0)
			return -1;
		kind = sniff_image(imp->cur);
	}
	if (kind == IMAGE_RAW &&
	    (has_suffix(imp->name, ".qcow2") || has_suffix(imp->name, ".qcow")))
		kind = IMAGE_QCOW2; /* let qemu-img say what is wrong with it */
	if (kind == IMAGE_QCOW || kind == IMAGE_QCOW2)
		return import_to_raw(imp, kind, err, errlen);
	return 0;
}

/* The name an import of `name` would most likely end up with. */
static void predict_name(enum media m, char *name)
{
	if (m == MEDIA_ISO)
		return;
	if (!strip_suffix(name, ".xz"))
		strip_suffix(name, ".gz");
	if (strip_suffix(name, ".qcow2") || strip_suffix(name, ".qcow"))
		strcat(name, ".img");
}

/* Fetch or copy `src`, process it, and rename it into place. */
static int import_run(struct import *imp, enum media m, const char *src, char *err, size_t errlen)
{
	char dest[PATH_MAX];
	mode_t mask;

	if (is_url(src)) {
		const char *url = src;
		char tmp[PATH_MAX];

		if (temp_file(imp->dir, imp->name, tmp, err, errlen) < 0)
			return -1;
		import_advance(imp, tmp);
		if (download(url, imp->cur, err, errlen) < 0)
			return -1;
	} else {
		snprintf(imp->cur, sizeof(imp->cur), "%s", src);
	}
	if (m == MEDIA_IMG && import_image(imp, err, errlen) < 0)
		return -1;
	if (join(dest, imp->dir, imp->name, err, errlen) < 0)
		return -1;
	if (!imp->cur_is_temp) {
		const char *argv[] = {"cp", CP_REFLINK, CP_SPARSE, "--", imp->cur, NULL, NULL};
		if (import_step(imp, argv, 5, err, errlen) < 0)
			return -1;
	}
	mask = umask(0);
	umask(mask);
	chmod(imp->cur, 0666 & ~mask);
	if (rename_noreplace(imp->cur, dest) < 0) {
		snprintf(err, errlen, "%s: %s", dest,
		         errno == EEXIST ? "already exists" : strerror(errno));
		return -1;
	}
	temp_done(imp->cur, false);
	imp->cur_is_temp = false;
	printf("%s\n", dest);
	return 0;
}

static int media_import(const struct vm_sys *sys, enum media m, const char *ds, const char *src)
{
	struct import imp = {0};
	char err[ERRLEN], dest[PATH_MAX], guess[NAME_MAX + 1];
	int rc;

	if (media_dir(sys, m, ds, imp.dir) != 0)
		return 1;
	if (source_basename(src, imp.name, sizeof(imp.name)) < 0)
		return vm_error("%s: cannot tell a file name from it", src);
	if (!is_url(src) && !is_regular(src))
		return vm_error("%s: no such file (or an unsupported URL: use http, https or ftp)",
		                src);
	if (!is_dir(imp.dir) && (strcmp(ds, "default") || mkdir(imp.dir, 0755) < 0))
		return vm_error("%s: no such directory", imp.dir);
	snprintf(guess, sizeof(guess), "%s", imp.name);
	predict_name(m, guess);
	if (join(dest, imp.dir, guess, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (path_exists(dest))
		return vm_error("%s: already exists", dest);
	rc = import_run(&imp, m, src, err, sizeof(err));
	if (imp.cur_is_temp)
		temp_done(imp.cur, true);
	return rc < 0 ? vm_error("%s", err) : 0;
}

static int media_cmd(struct vm_sys *sys, enum media m, int argc, char **argv)
{
	const char *ds = "default";
	char err[ERRLEN];
	int opt;

	optind = 0;
	while ((opt = getopt(argc, argv, "+:d:")) != -1) {
		if (opt != 'd')
			return vm_error("usage: vm %s [-d datastore] [url|file]", media_word(m));
		ds = optarg;
	}
	if (argc - optind > 1)
		return vm_error("usage: vm %s [-d datastore] [url|file]", media_word(m));
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (optind == argc)
		return media_list(sys, m);
	if (vm_require_write(sys, media_word(m)))
		return 1;
	return media_import(sys, m, ds, argv[optind]);
}

int cmd_iso(struct vm_sys *sys, int argc, char **argv)
{
	return media_cmd(sys, MEDIA_ISO, argc, argv);
}

int cmd_img(struct vm_sys *sys, int argc, char **argv)
{
	return media_cmd(sys, MEDIA_IMG, argc, argv);
}

/* ------------------------------------------------------------------ */
/* Guests: NAME[@SNAP] arguments, disk files, state. */

/* Snapshot names: what ZFS allows, less spaces: [A-Za-z0-9][A-Za-z0-9._:-]*. */
static bool snap_name_valid(const char *s)
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
static int split_target(const char *arg, char *name, char *snap)
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
	if (at && !snap_name_valid(at + 1)) {
		vm_error("%s: not a valid snapshot name (letters, digits and ._:-)", at + 1);
		return -1;
	}
	if (at)
		strcpy(snap, at + 1);
	return 0;
}

static int find_guest(const struct vm_sys *sys, const char *name, struct vm_guest *g)
{
	char err[ERRLEN];

	if (vm_guest_find(sys, name, g, err, sizeof(err)) < 0) {
		vm_error("%s", err);
		return -1;
	}
	return 0;
}

static bool guest_stopped(const struct vm_sys *sys, const struct vm_guest *g)
{
	struct vm_status st;

	vm_status_get(sys, g, &st);
	return st.state == VM_STOPPED;
}

/* Disk files (diskN_name in the guest's folder) of a guest. */
struct disk_files {
	size_t n;
	char name[MAX_DISKS][NAME_MAX + 1];
};

static bool disk_listed(const struct disk_files *d, const char *name)
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
	char key[32], path[PATH_MAX];
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
	if (vm_path(path, g->dir, file) < 0 || !is_regular(path)) {
		snprintf(err, errlen, "%s/%s: disk%u is missing", g->dir, file, n);
		return -1;
	}
	return 0;
}

/* The guest's disk files, as vm-bhyve counts disks: disk0, disk1, ...
 * up to the first diskN_name that is unset. */
static int guest_disk_files(const struct vm_guest *g, struct disk_files *d, char *err,
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
		if (!disk_listed(d, file))
			strcpy(d->name[d->n++], file);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* ZFS datastores: vm-bhyve's own approach, through zfs(8). */

/* Guest `g`'s dataset into `out` when its datastore is "zfs:...". */
static bool guest_dataset(const struct vm_sys *sys, const struct vm_guest *g, char *out, size_t len)
{
	const char *spec = strcmp(g->datastore, "default") ? ds_spec(sys, g->datastore) : NULL;

	if (!spec || spec_type(spec) != DS_ZFS)
		return false;
	return snprintf(out, len, "%s/%s", spec + 4, g->name) < (int)len;
}

static int need_zfs(void)
{
	if (tool_installed("zfs"))
		return 0;
	return vm_error("this guest lives on a ZFS datastore, and the zfs tool is not installed");
}

/* Call fn on the guest's dataset and every dataset or zvol below it. */
static int zfs_each(const char *dataset, int (*fn)(const char *fs, void *arg), void *arg)
{
	const char *argv[] = {"zfs",   "list", "-o", "name", "-rHt", "filesystem,volume",
	                      dataset, NULL};
	char err[ERRLEN], line[PATH_MAX];
	FILE *out = tmpfile();
	int rc = 0;

	if (!out)
		return vm_error("tmpfile: %s", strerror(errno));
	if (run_tool(argv, fileno(out), err, sizeof(err)) < 0)
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

	return run_tool(argv, 0, err, sizeof(err)) < 0 ? vm_error("%s", err) : 0;
}

static int zfs_snapshot(const char *dataset, const char *snap)
{
	char full[PATH_MAX];
	const char *argv[] = {"zfs", "snapshot", "-r", full, NULL};

	snprintf(full, sizeof(full), "%s@%s", dataset, snap);
	return zfs_run(argv);
}

struct zfs_rollback_arg {
	const char *snap;
	bool recursive;
};

static int zfs_rollback_one(const char *fs, void *arg)
{
	const struct zfs_rollback_arg *a = arg;
	char full[PATH_MAX];
	const char *plain[] = {"zfs", "rollback", full, NULL};
	const char *recursive[] = {"zfs", "rollback", "-r", full, NULL};

	snprintf(full, sizeof(full), "%s@%s", fs, a->snap);
	return zfs_run(a->recursive ? recursive : plain);
}

struct zfs_clone_arg {
	const char *old_ds, *new_ds, *snap;
	bool check_only; /* only check that fs@snap exists */
};

static int zfs_clone_one(const char *fs, void *arg)
{
	const struct zfs_clone_arg *a = arg;
	char from[PATH_MAX], to[PATH_MAX];
	const char *clone[] = {"zfs", "clone", from, to, NULL};
	const char *check[] = {"zfs", "get", "creation", from, NULL};

	snprintf(from, sizeof(from), "%s@%s", fs, a->snap);
	snprintf(to, sizeof(to), "%s%s", a->new_ds, fs + strlen(a->old_ds));
	return zfs_run(a->check_only ? check : clone);
}

/* ------------------------------------------------------------------ */
/* Snapshots on directory datastores. */

struct snap_entry {
	char name[SNAP_NAME_MAX + 1];
	unsigned long seq;
};

struct snap_set {
	size_t n;
	struct snap_entry *v;
};

static int cmp_seq(const void *a, const void *b)
{
	const struct snap_entry *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* seq of snapshot folder `dir`, or 0 when it is not a finished snapshot. */
static unsigned long snap_seq(const char *dir)
{
	char path[PATH_MAX], err[ERRLEN], *end;
	struct rcconf *meta;
	unsigned long seq = 0;

	if (vm_path(path, dir, SNAP_META) < 0 || !(meta = rcconf_load(path, err, sizeof(err))))
		return 0;
	const char *v = rcconf_get_default(meta, "seq", "");
	seq = strtoul(v, &end, 10);
	if (*end)
		seq = 0;
	rcconf_free(meta);
	return seq;
}

/* The guest's snapshots, oldest first.  Hidden folders are ours, half made. */
static int snapshots_read(const struct vm_guest *g, struct snap_set *s)
{
	char dir[PATH_MAX], path[PATH_MAX];
	DIR *d;
	struct dirent *e;

	s->n = 0;
	s->v = NULL;
	if (vm_path(dir, g->dir, SNAP_DIR) < 0 || !(d = opendir(dir)))
		return 0;
	while ((e = readdir(d))) {
		unsigned long seq;

		if (!snap_name_valid(e->d_name) || vm_path(path, dir, e->d_name) < 0 ||
		    !(seq = snap_seq(path)))
			continue;
		struct snap_entry *v = realloc(s->v, (s->n + 1) * sizeof(*v));
		if (!v) {
			closedir(d);
			return vm_error("out of memory");
		}
		s->v = v;
		strcpy(v[s->n].name, e->d_name); /* snap_name_valid(): short enough */
		v[s->n++].seq = seq;
	}
	closedir(d);
	qsort(s->v, s->n, sizeof(*s->v), cmp_seq);
	return 0;
}

/* Index of `name` in `s`, or -1. */
static long snapshot_index(const struct snap_set *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i].name, name))
			return (long)i;
	return -1;
}

/* .snapshot for a new snapshot: the next seq and the time. */
static int write_snap_meta(const char *dir, unsigned long seq, char *err, size_t errlen)
{
	struct rcconf *meta = rcconf_new();
	char path[PATH_MAX], num[32], when[64];
	time_t now = time(NULL);
	int rc = -1;

	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %z", localtime(&now));
	snprintf(num, sizeof(num), "%lu", seq);
	if (meta && join(path, dir, SNAP_META, err, errlen) == 0 &&
	    rcconf_set(meta, "seq", num) == 0 && rcconf_set(meta, "created", when) == 0)
		rc = rcconf_save(meta, path, err, errlen);
	else if (!meta)
		snprintf(err, errlen, "out of memory");
	rcconf_free(meta);
	return rc;
}

/* cp -a (or --preserve=mode,timestamps) --reflink --sparse SRC/f... DST/ */
static int copy_into(const char *src_dir, char names[][NAME_MAX + 1], size_t n, const char *extra,
                     const char *dst_dir, char *err, size_t errlen)
{
	struct argv a = {0};
	int rc = -1;

	if (argv_add(&a, "cp") || argv_add(&a, extra) || argv_add(&a, CP_REFLINK) ||
	    argv_add(&a, CP_SPARSE) || argv_add(&a, "--"))
		goto oom;
	for (size_t i = 0; i < n; i++)
		if (argv_addf(&a, "%s/%s", src_dir, names[i]))
			goto oom;
	if (argv_addf(&a, "%s/", dst_dir))
		goto oom;
	rc = run_tool((const char *const *)a.v, 0, err, errlen);
	argv_free(&a);
	return rc;
oom:
	argv_free(&a);
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* The files to snapshot: NAME.conf then the disks. */
static int snapshot_files(const struct vm_guest *g, struct disk_files *f, char *err, size_t errlen)
{
	if (guest_disk_files(g, f, err, errlen) < 0)
		return -1;
	if (f->n == MAX_DISKS) {
		snprintf(err, errlen, "%s: too many disks", g->name);
		return -1;
	}
	memmove(&f->name[1], &f->name[0], f->n * sizeof(f->name[0]));
	snprintf(f->name[0], sizeof(f->name[0]), "%s.conf", g->name);
	f->n++;
	return 0;
}

/* Copy the files into .snapshots/.SNAP.XXXXXX, then rename it to SNAP. */
static int snapshot_make(const struct vm_guest *g, const char *snap, unsigned long seq, char *err,
                         size_t errlen)
{
	char dir[PATH_MAX], tmp[PATH_MAX], final[PATH_MAX];
	struct disk_files *f = calloc(1, sizeof(*f));
	int rc = -1;

	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (snapshot_files(g, f, err, errlen) < 0 || join(dir, g->dir, SNAP_DIR, err, errlen) < 0 ||
	    join(final, dir, snap, err, errlen) < 0)
		goto out;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	if (snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, snap) >= (int)sizeof(tmp) ||
	    !mkdtemp(tmp)) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	if (copy_into(g->dir, f->name, f->n, "--preserve=mode,timestamps", tmp, err, errlen) == 0 &&
	    write_snap_meta(tmp, seq, err, errlen) == 0) {
		rc = rename_noreplace(tmp, final);
		if (rc < 0)
			snprintf(err, errlen, "%s@%s: %s", g->name, snap,
			         errno == EEXIST || errno == ENOTEMPTY ? "already exists"
			                                               : strerror(errno));
	}
	if (rc < 0) {
		remove_tree(tmp);
		rmdir(dir); /* only goes when empty, i.e. when we just made it */
	}
out:
	free(f);
	return rc;
}

static int snapshot_files_guest(const struct vm_sys *sys, struct vm_guest *g, const char *snap,
                                bool force)
{
	struct snap_set s;
	char err[ERRLEN];
	unsigned long seq;

	if (!force && !guest_stopped(sys, g))
		return vm_error("%s must be powered off first (use -f to override)", g->name);
	if (snapshots_read(g, &s) != 0)
		return 1;
	seq = s.n ? s.v[s.n - 1].seq + 1 : 1;
	bool taken = snapshot_index(&s, snap) >= 0;
	free(s.v);
	if (taken)
		return vm_error("%s@%s: already exists", g->name, snap);
	if (snapshot_make(g, snap, seq, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	return 0;
}

int cmd_snapshot(struct vm_sys *sys, int argc, char **argv)
{
	char name[VM_NAME_MAX + 1], snap[SNAP_NAME_MAX + 1], err[ERRLEN], dataset[PATH_MAX];
	struct vm_guest g;
	bool force = false;
	int opt, rc;

	optind = 0;
	while ((opt = getopt(argc, argv, "+:f")) != -1) {
		if (opt != 'f')
			return vm_error("usage: vm snapshot [-f] name[@snapshot]");
		force = true;
	}
	if (argc - optind != 1)
		return vm_error("usage: vm snapshot [-f] name[@snapshot]");
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (split_target(argv[optind], name, snap) < 0 || vm_require_write(sys, "snapshot") ||
	    find_guest(sys, name, &g) < 0)
		return 1;
	if (!snap[0]) {
		time_t now = time(NULL);
		strftime(snap, sizeof(snap), "%Y-%m-%d-%H:%M:%S", localtime(&now));
	}
	if (guest_dataset(sys, &g, dataset, sizeof(dataset))) {
		if (!force && !guest_stopped(sys, &g))
			rc = vm_error("%s must be powered off first (use -f to override)", g.name);
		else
			rc = need_zfs() ? 1 : zfs_snapshot(dataset, snap);
	} else {
		rc = snapshot_files_guest(sys, &g, snap, force);
	}
	vm_guest_free(&g);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Rollback. */

/* Visible file names of snapshot folder `dir` (not .snapshot). */
static int snapshot_contents(const char *dir, struct disk_files *f, char *err, size_t errlen)
{
	struct dirent **names;
	int n = scandir(dir, &names, visible_entry, alphasort);

	f->n = 0;
	if (n < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (f->n < MAX_DISKS && strlen(names[i]->d_name) <= NAME_MAX)
			strcpy(f->name[f->n++], names[i]->d_name);
		free(names[i]);
	}
	free(names);
	return 0;
}

/* Copy every file of the snapshot to a temporary name beside the file it
 * replaces; only when all copies are made are they renamed over. */
static int restore_files(const struct vm_guest *g, const char *snap_dir, const struct disk_files *f,
                         char *err, size_t errlen)
{
	char(*tmp)[PATH_MAX] = calloc(f->n + 1, PATH_MAX);
	char src[PATH_MAX], dst[PATH_MAX];
	size_t i, made = 0;
	int rc = 0;

	if (!tmp) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < f->n && rc == 0; i++) {
		rc = join(src, snap_dir, f->name[i], err, errlen);
		if (rc == 0 && (rc = temp_file(g->dir, f->name[i], tmp[i], err, errlen)) == 0) {
			made++;
			rc = copy_file(src, tmp[i], err, errlen);
		}
	}
	for (i = 0; i < made; i++) {
		if (rc == 0 && (rc = join(dst, g->dir, f->name[i], err, errlen)) == 0 &&
		    rename(tmp[i], dst) < 0) {
			snprintf(err, errlen, "%s: %s", dst, strerror(errno));
			rc = -1;
		}
		temp_done(tmp[i], rc < 0);
	}
	free(tmp);
	return rc;
}

/* Disk files the guest has now that the snapshot does not: left alone. */
static void warn_new_disks(const struct vm_guest *g, const struct disk_files *snap_files,
                           const char *snap)
{
	struct disk_files *now = calloc(1, sizeof(*now));
	char err[ERRLEN];

	if (now && guest_disk_files(g, now, err, sizeof(err)) == 0)
		for (size_t i = 0; i < now->n; i++)
			if (!disk_listed(snap_files, now->name[i]))
				vm_warn("%s/%s is not in snapshot %s; left in place", g->dir,
				        now->name[i], snap);
	free(now);
}

/* Remove snapshot folder NAME: first hide it, so that it is never seen
 * half deleted. */
static void snapshot_destroy(const struct vm_guest *g, const char *snap)
{
	char dir[PATH_MAX], from[PATH_MAX], hidden[PATH_MAX];

	if (vm_path(dir, g->dir, SNAP_DIR) < 0 || vm_path(from, dir, snap) < 0 ||
	    snprintf(hidden, sizeof(hidden), "%s/.%s.destroy", dir, snap) >= (int)sizeof(hidden))
		return;
	if (rename(from, hidden) == 0)
		remove_tree(hidden);
	else
		vm_warn("%s: %s", from, strerror(errno));
}

/* One line naming the snapshots after index `i`. */
static void newer_names(const struct snap_set *s, size_t i, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (size_t k = i + 1; k < s->n && used < len; k++)
		used += (size_t)snprintf(out + used, len - used, "%s%s", k > i + 1 ? ", " : "",
		                         s->v[k].name);
}

static int rollback_files(struct vm_guest *g, const char *snap, bool recursive)
{
	struct snap_set s;
	struct disk_files *f = NULL;
	char base[PATH_MAX], dir[PATH_MAX], err[ERRLEN], newer[ERRLEN];
	long i;
	int rc = 1;

	if (snapshots_read(g, &s) != 0)
		return 1;
	if ((i = snapshot_index(&s, snap)) < 0) {
		vm_error("%s@%s: no such snapshot", g->name, snap);
		goto out;
	}
	newer_names(&s, (size_t)i, newer, sizeof(newer));
	if (*newer && !recursive) {
		vm_error(
		    "%s@%s is not the most recent snapshot; use -r to destroy the newer ones: %s",
		    g->name, snap, newer);
		goto out;
	}
	if (!(f = calloc(1, sizeof(*f)))) {
		vm_error("out of memory");
		goto out;
	}
	if (vm_path(base, g->dir, SNAP_DIR) < 0 || vm_path(dir, base, snap) < 0)
		snprintf(err, sizeof(err), "%s: path too long", g->dir);
	else if (snapshot_contents(dir, f, err, sizeof(err)) == 0 &&
	         restore_files(g, dir, f, err, sizeof(err)) == 0)
		rc = 0;
	if (rc) {
		vm_error("%s", err);
		goto out;
	}
	warn_new_disks(g, f, snap);
	for (size_t k = (size_t)i + 1; k < s.n; k++)
		snapshot_destroy(g, s.v[k].name);
out:
	free(f);
	free(s.v);
	return rc;
}

int cmd_rollback(struct vm_sys *sys, int argc, char **argv)
{
	char name[VM_NAME_MAX + 1], snap[SNAP_NAME_MAX + 1], err[ERRLEN], dataset[PATH_MAX];
	struct vm_guest g;
	bool recursive = false;
	int opt, rc;

	optind = 0;
	while ((opt = getopt(argc, argv, "+:r")) != -1) {
		if (opt != 'r')
			return vm_error("usage: vm rollback [-r] name@snapshot");
		recursive = true;
	}
	if (argc - optind != 1)
		return vm_error("usage: vm rollback [-r] name@snapshot");
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (split_target(argv[optind], name, snap) < 0)
		return 1;
	if (!snap[0])
		return vm_error("a snapshot must be given as name@snapshot");
	if (vm_require_write(sys, "rollback") || find_guest(sys, name, &g) < 0)
		return 1;
	if (!guest_stopped(sys, &g)) {
		rc = vm_error("%s must be powered off first", g.name);
	} else if (guest_dataset(sys, &g, dataset, sizeof(dataset))) {
		struct zfs_rollback_arg a = {snap, recursive};
		rc = need_zfs() ? 1 : zfs_each(dataset, zfs_rollback_one, &a);
	} else {
		rc = rollback_files(&g, snap, recursive);
	}
	vm_guest_free(&g);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Clone. */

/* What a clone leaves behind: run state, logs, consoles, snapshots and
 * anything hidden (our own temporary files among them). */
static bool clone_skips(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	if (name[0] == '.' || !strcmp(name, "run.lock") || !strcmp(name, "run.state") ||
	    !strncmp(name, "vm-bhyve.log", 12) || has_suffix(name, ".pty") ||
	    has_suffix(name, ".log"))
		return true;
	if (vm_path(path, dir, name) < 0 || lstat(path, &st) < 0)
		return true;
	return !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode);
}

/* Entries of the guest's folder (or of a snapshot of it) that a clone takes. */
static int clone_sources(const char *dir, bool from_snapshot, struct disk_files *f, char *err,
                         size_t errlen)
{
	struct dirent **names;
	int n = scandir(dir, &names, visible_entry, alphasort);

	f->n = 0;
	if (n < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const char *e = names[i]->d_name;
		bool take = (from_snapshot || !clone_skips(dir, e)) && strlen(e) <= NAME_MAX;

		if (take && f->n == MAX_DISKS)
			snprintf(err, errlen, "%s: too many files to clone", dir);
		else if (take)
			strcpy(f->name[f->n++], e);
		free(names[i]);
	}
	free(names);
	return err[0] ? -1 : 0;
}

/* Give the clone what must be unique to a guest, as vm-bhyve does: a new
 * uuid and new fixed MACs for its network interfaces. */
static int generalise(const char *conf_path, char *err, size_t errlen)
{
	struct rcconf *rc = rcconf_load(conf_path, err, errlen);
	char keys[64][64];
	size_t n = 0;
	int ret;

	if (!rc)
		return -1;
	for (size_t i = 0; i < rcconf_count(rc) && n < 64; i++) {
		const char *k = rcconf_key_at(rc, i);
		unsigned num;
		int end = 0;

		if (strlen(k) >= sizeof(keys[0]))
			continue;
		if (!strcmp(k, "uuid") ||
		    (sscanf(k, "network%u_mac%n", &num, &end) == 1 && end && !k[end]))
			snprintf(keys[n++], sizeof(keys[0]), "%s", k);
	}
	for (size_t i = 0; i < n; i++) {
		char fresh[40];
		if (!strcmp(keys[i], "uuid"))
			vm_uuid(fresh);
		else
			vm_mac(fresh);
		rcconf_set(rc, keys[i], fresh);
	}
	if (!rcconf_get(rc, "uuid")) {
		char fresh[40];
		vm_uuid(fresh);
		rcconf_set(rc, "uuid", fresh);
	}
	ret = rcconf_save(rc, conf_path, err, errlen);
	rcconf_free(rc);
	return ret;
}

/* OLD.conf -> NEW.conf in the clone's folder, generalised. */
static int clone_rename_conf(const char *dir, const char *old, const char *new_name, char *err,
                             size_t errlen)
{
	char from[PATH_MAX], to[PATH_MAX];

	if (snprintf(from, sizeof(from), "%s/%s.conf", dir, old) >= (int)sizeof(from) ||
	    snprintf(to, sizeof(to), "%s/%s.conf", dir, new_name) >= (int)sizeof(to)) {
		snprintf(err, errlen, "%s: path too long", dir);
		return -1;
	}
	if (rename(from, to) < 0) {
		snprintf(err, errlen, "%s: %s", from, strerror(errno));
		return -1;
	}
	return generalise(to, err, errlen);
}

struct clone_job {
	const struct vm_guest *src;
	const char *snap; /* "" for the guest as it is now */
	const char *new_name;
	char dest[PATH_MAX]; /* the new guest's folder */
};

/* Copy into DATASTORE/.NEW.XXXXXX, fix it up, rename it to DATASTORE/NEW. */
static int clone_files(struct clone_job *job, char *err, size_t errlen)
{
	char snaps[PATH_MAX], from[PATH_MAX], tmp[PATH_MAX], *slash;
	struct stat st;
	struct disk_files *f = calloc(1, sizeof(*f));
	int rc = -1;

	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(from, sizeof(from), "%s", job->src->dir);
	if (job->snap[0] && (join(snaps, job->src->dir, SNAP_DIR, err, errlen) < 0 ||
	                     join(from, snaps, job->snap, err, errlen) < 0))
		goto out;
	err[0] = '\0';
	if (clone_sources(from, job->snap[0], f, err, errlen) < 0)
		goto out;
	snprintf(tmp, sizeof(tmp), "%s", job->dest);
	slash = strrchr(tmp, '/');
	if (!slash ||
	    snprintf(slash + 1, sizeof(tmp) - (size_t)(slash + 1 - tmp), ".%s.XXXXXX",
	             job->new_name) >= (int)(sizeof(tmp) - (size_t)(slash + 1 - tmp)) ||
	    !mkdtemp(tmp)) {
		snprintf(err, errlen, "%s: cannot make a temporary folder: %s", job->dest,
		         strerror(errno));
		goto out;
	}
	/* mkdtemp() made it 0700; the clone's folder looks like its source's. */
	if (stat(job->src->dir, &st) == 0)
		chmod(tmp, st.st_mode & 07777);
	if (copy_into(from, f->name, f->n, "-a", tmp, err, errlen) == 0 &&
	    clone_rename_conf(tmp, job->src->name, job->new_name, err, errlen) == 0) {
		rc = rename_noreplace(tmp, job->dest);
		if (rc < 0)
			snprintf(err, errlen, "%s: %s", job->dest,
			         errno == EEXIST || errno == ENOTEMPTY ? "already exists"
			                                               : strerror(errno));
	}
	if (rc < 0)
		remove_tree(tmp);
out:
	free(f);
	return rc;
}

/* Check a clone can be made: stopped or from a snapshot that exists, and
 * its disks are files. */
static int clone_check(const struct vm_sys *sys, const struct clone_job *job)
{
	struct disk_files *f;
	struct snap_set s;
	char err[ERRLEN];
	int rc = 0;

	if (job->snap[0]) {
		if (snapshots_read(job->src, &s) != 0)
			return 1;
		if (snapshot_index(&s, job->snap) < 0)
			rc = vm_error("%s@%s: no such snapshot", job->src->name, job->snap);
		free(s.v);
		return rc;
	}
	if (!guest_stopped(sys, job->src))
		return vm_error("%s must be powered off first (or clone a snapshot: %s@SNAPSHOT)",
		                job->src->name, job->src->name);
	if (!(f = calloc(1, sizeof(*f))))
		return vm_error("out of memory");
	if (guest_disk_files(job->src, f, err, sizeof(err)) < 0)
		rc = vm_error("%s", err);
	free(f);
	return rc;
}

/* The zfs way: snapshot (unless given one), clone every dataset, fix up. */
static int clone_zfs(const struct vm_sys *sys, struct clone_job *job, const char *dataset)
{
	char new_ds[PATH_MAX], snap[SNAP_NAME_MAX + 1], err[ERRLEN], log[PATH_MAX];
	struct zfs_clone_arg a = {dataset, new_ds, snap, true};
	unsigned int r;

	if (need_zfs())
		return 1;
	snprintf(new_ds, sizeof(new_ds), "%.*s/%s", (int)(strrchr(dataset, '/') - dataset), dataset,
	         job->new_name);
	snprintf(snap, sizeof(snap), "%s", job->snap);
	if (!snap[0]) {
		if (!guest_stopped(sys, job->src))
			return vm_error("%s must be powered off first", job->src->name);
		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (unsigned)time(NULL) ^ (unsigned)getpid();
		snprintf(snap, sizeof(snap), "%08x", r);
		if (zfs_snapshot(dataset, snap))
			return 1;
	} else if (zfs_each(dataset, zfs_clone_one, &a)) {
		return 1;
	}
	a.check_only = false;
	if (zfs_each(dataset, zfs_clone_one, &a))
		return 1;
	if (vm_path(log, job->dest, "vm-bhyve.log") == 0)
		unlink(log);
	if (clone_rename_conf(job->dest, job->src->name, job->new_name, err, sizeof(err)) < 0)
		return vm_error("%s (the clone %s needs fixing by hand)", err, new_ds);
	return 0;
}

static int clone_guest(const struct vm_sys *sys, struct vm_guest *src, const char *snap,
                       const char *new_name)
{
	struct clone_job job = {src, snap, new_name, ""};
	char err[ERRLEN], dataset[PATH_MAX], *slash;

	snprintf(job.dest, sizeof(job.dest), "%s", src->dir);
	slash = strrchr(job.dest, '/');
	if (!slash || (size_t)(slash - job.dest) + strlen(new_name) + 2 > sizeof(job.dest))
		return vm_error("%s: path too long", src->dir);
	strcpy(slash + 1, new_name);
	if (path_exists(job.dest))
		return vm_error("%s: already exists", job.dest);
	if (guest_dataset(sys, src, dataset, sizeof(dataset)))
		return clone_zfs(sys, &job, dataset);
	if (clone_check(sys, &job))
		return 1;
	if (clone_files(&job, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	return 0;
}

int cmd_clone(struct vm_sys *sys, int argc, char **argv)
{
	char name[VM_NAME_MAX + 1], snap[SNAP_NAME_MAX + 1], err[ERRLEN];
	struct vm_guest src, other;
	int rc;

	if (argc != 3 || argv[1][0] == '-')
		return vm_error("usage: vm clone name[@snapshot] new-name");
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (split_target(argv[1], name, snap) < 0)
		return 1;
	if (!vm_name_valid(argv[2]))
		return vm_error("%s: not a valid virtual machine name", argv[2]);
	if (vm_require_write(sys, "clone"))
		return 1;
	if (vm_guest_find(sys, argv[2], &other, err, sizeof(err)) == 0) {
		vm_guest_free(&other);
		return vm_error("%s: a virtual machine of that name already exists", argv[2]);
	}
	if (find_guest(sys, name, &src) < 0)
		return 1;
	rc = clone_guest(sys, &src, snap, argv[2]);
	vm_guest_free(&src);
	return rc;
}
