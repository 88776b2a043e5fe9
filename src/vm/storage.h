/*
 * Helpers shared by the storage commands (storage.c, cmd_datastore.c,
 * cmd_iso_img.c, cmd_snapshot.c, cmd_clone.c): temporary files, tools,
 * datastores, guests' disk files, ZFS and the snapshot list.  Errors are
 * one line in `err` (ERRLEN bytes do) or, where no `err` is taken, printed
 * with vm_error().
 */
#ifndef KHYVE_VM_STORAGE_H
#define KHYVE_VM_STORAGE_H

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "vm/vm.h"

#define ERRLEN        (PATH_MAX + 512)
#define SNAP_NAME_MAX 64
#define MAX_DISKS     64
#define SNAP_DIR      ".snapshots"
#define SNAP_META     ".snapshot"
/* cp flags for guest data: share blocks where the filesystem can, keep holes. */
#define CP_REFLINK "--reflink=auto"
#define CP_SPARSE  "--sparse=always"

/* Datastore kinds (path_NAME specs). */
enum ds_type { DS_DIR, DS_ZFS, DS_ISO, DS_IMG };

/* Disk files (diskN_name in the guest's folder) of a guest. */
struct disk_files {
	size_t n;
	char name[MAX_DISKS][NAME_MAX + 1];
};

/* What storage_zfs_rollback_one() rolls back to. */
struct zfs_rollback_arg {
	const char *snap;
	bool recursive;
};

/* What storage_zfs_clone_one() clones, and from where to where. */
struct zfs_clone_arg {
	const char *old_ds, *new_ds, *snap;
	bool check_only; /* only check that fs@snap exists */
};

/* One snapshot folder: its name and creation order. */
struct snap_entry {
	char name[SNAP_NAME_MAX + 1];
	unsigned long seq;
};

/* A guest's snapshots (storage_snapshots_read(); free v). */
struct snap_set {
	size_t n;
	struct snap_entry *v;
};

/* Forget `path` (it was renamed into place); unlink it too when `remove`. */
void storage_temp_done(const char *path, bool remove);

/*
 * Create an empty file DIR/.BASE.XXXXXX for data that will be renamed to
 * DIR/BASE; its name goes to `out` (PATH_MAX) and it is removed if we are
 * killed.  0 or -1 with `err`.
 */
int storage_temp_file(const char *dir, const char *base, char *out, char *err, size_t errlen);

/* lstat() finds it (a dangling link counts). */
bool storage_path_exists(const char *path);

/* A folder (links followed). */
bool storage_is_dir(const char *path);

/* A plain file (links followed). */
bool storage_is_regular(const char *path);

/* rm -rf `path` (best effort: used to undo our own temporary folders). */
void storage_remove_tree(const char *path);

/* Join into `out` (PATH_MAX) or fail with "path too long" in `err`. */
int storage_join(char *out, const char *a, const char *b, char *err, size_t errlen);

/* `s` ends in `suffix`. */
bool storage_has_suffix(const char *s, const char *suffix);

/* Drop `suffix` from the end of `s` when it is there; true when it was. */
bool storage_strip_suffix(char *s, const char *suffix);

/* `name` is an executable file in a PATH folder. */
bool storage_tool_installed(const char *name);

/* Run a tool: its stdout to `out_fd` (0: nowhere); -1 with "TOOL: why". */
int storage_run_tool(const char *const argv[], int out_fd, char *err, size_t errlen);

/* cp --reflink=auto --sparse=always --preserve=mode,timestamps SRC DST */
int storage_copy_file(const char *src, const char *dst, char *err, size_t errlen);

/* The kind of a datastore spec: "zfs:", "iso:", "img:" or a folder. */
enum ds_type storage_spec_type(const char *spec);

/* Where a spec's files are: the folder, or the folder after "iso:"/"img:". */
const char *storage_spec_dir(const char *spec);

/* path_NAME of datastore `name` from system.conf, or NULL when unset. */
const char *storage_ds_spec(const struct vm_sys *sys, const char *name);

/* `name` is one of datastore_list (not "default"). */
bool storage_ds_listed(const struct vm_sys *sys, const char *name);

/* scandir() filter: entries not starting with a dot. */
int storage_visible_entry(const struct dirent *e);

/* Snapshot names: what ZFS allows, less spaces: [A-Za-z0-9][A-Za-z0-9._:-]*. */
bool storage_snap_name_valid(const char *s);

/*
 * Split "NAME" or "NAME@SNAP" into `name` and `snap` ("" when none).  -1
 * after printing one line for a bad guest or snapshot name.
 */
int storage_split_target(const char *arg, char *name, char *snap);

/* vm_guest_find() printing its error; 0 or -1. Free g after either. */
int storage_find_guest(const struct vm_sys *sys, const char *name, struct vm_guest *g);

/* The guest is neither running here nor locked by another host (a
 * Suspended guest's disks are still: it may be snapshotted and cloned). */
bool storage_guest_stopped(const struct vm_sys *sys, const struct vm_guest *g);

/* `name` is one of `d`'s files. */
bool storage_disk_listed(const struct disk_files *d, const char *name);

/* The guest's disk files, as vm-bhyve counts disks: disk0, disk1, ...
 * up to the first diskN_name that is unset. */
int storage_guest_disk_files(const struct vm_guest *g, struct disk_files *d, char *err,
                             size_t errlen);

/* Guest `g`'s dataset into `out` when its datastore is "zfs:...". */
bool storage_guest_dataset(const struct vm_sys *sys, const struct vm_guest *g, char *out,
                           size_t len);

/* 0 when zfs(8) is installed, else 1 after one line. */
int storage_need_zfs(void);

/* Call fn on the guest's dataset and every dataset or zvol below it. */
int storage_zfs_each(const char *dataset, int (*fn)(const char *fs, void *arg), void *arg);

/* zfs snapshot -r DATASET@SNAP; 0, or 1 after one line. */
int storage_zfs_snapshot(const char *dataset, const char *snap);

/* storage_zfs_each() callback: roll `fs` back (arg: struct zfs_rollback_arg). */
int storage_zfs_rollback_one(const char *fs, void *arg);

/* storage_zfs_each() callback: clone `fs` (arg: struct zfs_clone_arg). */
int storage_zfs_clone_one(const char *fs, void *arg);

/* The guest's snapshots, oldest first.  Hidden folders are ours, half made. */
int storage_snapshots_read(const struct vm_guest *g, struct snap_set *s);

/*
 * The name of snapshot folder `snap_dir`'s memory state file (vm snapshot
 * -m; its .snapshot's memory=) into `out` (NAME_MAX + 1 bytes), "" when it
 * has none.  0, or -1 with one line in `err` (an unreadable .snapshot, a
 * name that is not a visible file of the folder).
 */
int storage_snapshot_memory(const char *snap_dir, char *out, char *err, size_t errlen);

/* Index of `name` in `s`, or -1. */
long storage_snapshot_index(const struct snap_set *s, const char *name);

/* cp -a (or --preserve=mode,timestamps) --reflink --sparse SRC/f... DST/ */
int storage_copy_into(const char *src_dir, char names[][NAME_MAX + 1], size_t n, const char *extra,
                      const char *dst_dir, char *err, size_t errlen);

#endif
