/* vm snapshot and vm rollback (commands.h, storage.h); see storage.c for
 * how snapshots are kept on directory datastores. */
#include "lib/file.h"
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
#include "vm/snapmem.h"
#include "vm/state.h"
#include "vm/util.h"
#include "vm/storage.h"
#include "vm/suspend.h"

/* ------------------------------------------------------------------ */
/* Snapshots on directory datastores. */

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
int storage_snapshots_read(const struct vm_guest *g, struct snap_set *s)
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

		if (!storage_snap_name_valid(e->d_name) || vm_path(path, dir, e->d_name) < 0 ||
		    !(seq = snap_seq(path)))
			continue;
		struct snap_entry *v = realloc(s->v, (s->n + 1) * sizeof(*v));
		if (!v) {
			closedir(d);
			return vm_error("out of memory");
		}
		s->v = v;
		strcpy(v[s->n].name, e->d_name); /* storage_snap_name_valid(): short enough */
		v[s->n++].seq = seq;
	}
	closedir(d);
	if (s->n) /* qsort(NULL, 0, ...) is undefined */
		qsort(s->v, s->n, sizeof(*s->v), cmp_seq);
	return 0;
}

/* Index of `name` in `s`, or -1. */
long storage_snapshot_index(const struct snap_set *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i].name, name))
			return (long)i;
	return -1;
}

/* .snapshot for a new snapshot: the next seq, the time and the name of its
 * memory state file (NULL: none). */
static int write_snap_meta(const char *dir, unsigned long seq, const char *memory, char *err,
                           size_t errlen)
{
	struct rcconf *meta = rcconf_new();
	char path[PATH_MAX], num[32], when[64];
	time_t now = time(NULL);
	int rc = -1;

	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %z", localtime(&now));
	snprintf(num, sizeof(num), "%lu", seq);
	if (meta && storage_join(path, dir, SNAP_META, err, errlen) == 0 &&
	    rcconf_set(meta, "seq", num) == 0 && rcconf_set(meta, "created", when) == 0 &&
	    (!memory || rcconf_set(meta, SNAP_META_MEMORY, memory) == 0))
		rc = rcconf_save(meta, path, err, errlen);
	else if (!meta)
		snprintf(err, errlen, "out of memory");
	rcconf_free(meta);
	return rc;
}

/* A name a snapshot's .snapshot may give its memory state: a visible
 * NAME.state file of the folder itself (never one of its disks). */
static bool memory_name_valid(const char *v)
{
	return *v && *v != '.' && !strchr(v, '/') && strlen(v) <= NAME_MAX &&
	       storage_has_suffix(v, VM_STATE_SUFFIX);
}

int storage_snapshot_memory(const char *snap_dir, char *out, char *err, size_t errlen)
{
	char path[PATH_MAX];
	struct rcconf *meta;
	int rc = 0;

	out[0] = '\0';
	if (storage_join(path, snap_dir, SNAP_META, err, errlen) < 0 ||
	    !(meta = rcconf_load(path, err, errlen)))
		return -1;
	const char *v = rcconf_get_default(meta, SNAP_META_MEMORY, "");
	if (*v && !memory_name_valid(v)) {
		snprintf(err, errlen, "%s: %s=\"%s\" is not a file of the snapshot", path,
		         SNAP_META_MEMORY, v);
		rc = -1;
	} else {
		strcpy(out, v); /* memory_name_valid(): short enough */
	}
	rcconf_free(meta);
	return rc;
}

/* cp -a (or --preserve=mode,timestamps) --reflink --sparse SRC/f... DST/ */
int storage_copy_into(const char *src_dir, char names[][NAME_MAX + 1], size_t n, const char *extra,
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
	rc = storage_run_tool((const char *const *)a.v, 0, err, errlen);
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
	if (storage_guest_disk_files(g, f, err, errlen) < 0)
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

/* A folder, not a link to one. */
static bool real_dir(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* What a snapshot keeps besides the configuration and the disks. */
enum snap_memory {
	MEM_NONE,
	MEM_CHECKPOINT, /* running: its khyve saves the memory into the snapshot */
	MEM_SUSPENDED,  /* Suspended: its NAME.state is copied with the disks */
};

/* One snapshot being made in its temporary folder. */
struct snap_job {
	const struct vm_guest *g;
	struct disk_files *f; /* NAME.conf, the disks (and NAME.state) */
	const char *tmp;      /* .snapshots/.SNAP.XXXXXX */
	unsigned long seq;
	const char *memory; /* the state file's name in the snapshot, or NULL */
};

/* Copy the files and write .snapshot (snapmem_disks_fn). */
static int take_files(void *arg, char *err, size_t errlen)
{
	const struct snap_job *j = arg;

	if (storage_copy_into(j->g->dir, j->f->name, j->f->n, "--preserve=mode,timestamps", j->tmp,
	                      err, errlen) < 0)
		return -1;
	return write_snap_meta(j->tmp, j->seq, j->memory, err, errlen);
}

/* Fill `tmp` with the snapshot: for MEM_CHECKPOINT with the guest paused. */
static int take_into(const struct vm_sys *sys, struct snap_job *j, enum snap_memory mem, char *err,
                     size_t errlen)
{
	char state[PATH_MAX], name[NAME_MAX + 1];

	if (mem == MEM_NONE)
		return take_files(j, err, errlen);
	if (snprintf(name, sizeof(name), "%s%s", j->g->name, VM_STATE_SUFFIX) >=
	        (int)sizeof(name) ||
	    (mem == MEM_SUSPENDED && j->f->n == MAX_DISKS)) {
		snprintf(err, errlen, "%s: too many files", j->g->name);
		return -1;
	}
	j->memory = name;
	if (mem == MEM_SUSPENDED) {
		strcpy(j->f->name[j->f->n++], name);
		return take_files(j, err, errlen);
	}
	if (storage_join(state, j->tmp, name, err, errlen) < 0)
		return -1;
	return snapmem_take(sys, j->g, state, take_files, j, err, errlen);
}

/* Copy the files into .snapshots/.SNAP.XXXXXX, then rename it to SNAP. */
static int snapshot_make(const struct vm_sys *sys, const struct vm_guest *g, const char *snap,
                         unsigned long seq, enum snap_memory mem, char *err, size_t errlen)
{
	char dir[PATH_MAX], tmp[PATH_MAX], final[PATH_MAX];
	struct disk_files *f = calloc(1, sizeof(*f));
	int rc = -1;

	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (snapshot_files(g, f, err, errlen) < 0 ||
	    storage_join(dir, g->dir, SNAP_DIR, err, errlen) < 0 ||
	    storage_join(final, dir, snap, err, errlen) < 0)
		goto out;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	if (!real_dir(dir)) { /* a link there would take the copies elsewhere */
		snprintf(err, errlen, "%s: not a folder of its own (a symbolic link?)", dir);
		goto out;
	}
	if (snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, snap) >= (int)sizeof(tmp) ||
	    !mkdtemp(tmp)) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	struct snap_job job = {.g = g, .f = f, .tmp = tmp, .seq = seq};
	if (take_into(sys, &job, mem, err, errlen) == 0) {
		rc = file_rename_noreplace(tmp, final);
		if (rc < 0)
			snprintf(err, errlen, "%s@%s: %s", g->name, snap,
			         errno == EEXIST || errno == ENOTEMPTY ? "already exists"
			                                               : strerror(errno));
	}
	if (rc < 0) {
		storage_remove_tree(tmp);
		rmdir(dir); /* only goes when empty, i.e. when we just made it */
	}
out:
	free(f);
	return rc;
}

/*
 * What -m keeps of `g` now: a running guest's memory through its khyve, a
 * Suspended one's saved state; MEM_NONE after the one-line refusal for a
 * guest that has none (stopped) or does not run here.
 */
static enum snap_memory memory_source(const struct vm_sys *sys, const struct vm_guest *g)
{
	struct vm_status st;

	vm_status_get(sys, g, &st);
	if (st.state == VM_RUNNING)
		return MEM_CHECKPOINT;
	if (st.state == VM_SUSPENDED)
		return MEM_SUSPENDED;
	if (st.state == VM_LOCKED)
		vm_error("%s is locked by host %s, not running here", g->name, st.host);
	else
		vm_error("%s is not running: a stopped guest has no memory state to keep (vm "
		         "snapshot without -m takes its disks)",
		         g->name);
	return MEM_NONE;
}

/* -f and -m against the guest's state: 0 with *mem set, or 1 after the
 * one-line refusal. */
static int snapshot_allowed(const struct vm_sys *sys, const struct vm_guest *g, bool force,
                            bool memory, enum snap_memory *mem)
{
	*mem = MEM_NONE;
	if (memory)
		return (*mem = memory_source(sys, g)) == MEM_NONE;
	if (!force && !storage_guest_stopped(sys, g))
		return vm_error("%s must be powered off first (use -f to override, or -m to keep "
		                "its memory state too)",
		                g->name);
	return 0;
}

static int snapshot_files_guest(const struct vm_sys *sys, struct vm_guest *g, const char *snap,
                                bool force, bool memory)
{
	enum snap_memory mem;
	struct snap_set s;
	char err[ERRLEN];
	unsigned long seq;

	if (snapshot_allowed(sys, g, force, memory, &mem))
		return 1;
	if (storage_snapshots_read(g, &s) != 0)
		return 1;
	seq = s.n ? s.v[s.n - 1].seq + 1 : 1;
	bool taken = storage_snapshot_index(&s, snap) >= 0;
	free(s.v);
	if (taken)
		return vm_error("%s@%s: already exists", g->name, snap);
	if (snapshot_make(sys, g, snap, seq, mem, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	return 0;
}

/* ZFS: the state goes into the dataset as DIR/NAME.state.snap for the
 * snapshot to take, and out of the live dataset at once. */
struct zfs_snap_job {
	const char *dataset, *snap;
};

/* snapmem_disks_fn: zfs snapshot (which prints its own line). */
static int zfs_take(void *arg, char *err, size_t errlen)
{
	const struct zfs_snap_job *j = arg;

	(void)errlen;
	err[0] = '\0';
	return storage_zfs_snapshot(j->dataset, j->snap) ? -1 : 0;
}

static int zfs_snapshot_memory(const struct vm_sys *sys, const struct vm_guest *g,
                               const char *dataset, const char *snap)
{
	struct zfs_snap_job j = {dataset, snap};
	char state[PATH_MAX], err[ERRLEN];
	int rc;

	if (snprintf(state, sizeof(state), "%s/%s%s", g->dir, g->name, VM_SNAP_STATE_SUFFIX) >=
	    (int)sizeof(state))
		return vm_error("%s: path too long", g->dir);
	if (storage_path_exists(state)) /* not ours to replace or remove */
		return vm_error("%s is in the way (left by an interrupted vm snapshot -m?); remove "
		                "it first",
		                state);
	rc = snapmem_take(sys, g, state, zfs_take, &j, err, sizeof(err));
	unlink(state);
	if (rc < 0)
		return err[0] ? vm_error("%s", err) : 1;
	return 0;
}

/* zfs snapshot of the guest's dataset; with -m of a running guest, its
 * memory too (a Suspended guest's NAME.state is in the dataset already). */
static int snapshot_zfs(const struct vm_sys *sys, struct vm_guest *g, const char *dataset,
                        const char *snap, bool force, bool memory)
{
	enum snap_memory mem;

	if (snapshot_allowed(sys, g, force, memory, &mem) || storage_need_zfs())
		return 1;
	if (mem == MEM_CHECKPOINT)
		return zfs_snapshot_memory(sys, g, dataset, snap);
	return storage_zfs_snapshot(dataset, snap);
}

int cmd_snapshot(struct vm_sys *sys, int argc, char **argv)
{
	static const char usage[] = "usage: vm snapshot [-f] [-m] name[@snapshot]";
	char name[VM_NAME_MAX + 1], snap[SNAP_NAME_MAX + 1], err[ERRLEN], dataset[PATH_MAX];
	struct vm_guest g;
	bool force = false, memory = false;
	int opt, rc;

	optind = 0;
	while ((opt = getopt(argc, argv, "+:fm")) != -1) {
		if (opt == 'f')
			force = true;
		else if (opt == 'm')
			memory = true;
		else
			return vm_error("%s", usage);
	}
	if (argc - optind != 1)
		return vm_error("%s", usage);
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (storage_split_target(argv[optind], name, snap) < 0 ||
	    vm_require_write(sys, "snapshot") || storage_find_guest(sys, name, &g) < 0)
		return 1;
	if (!snap[0]) {
		time_t now = time(NULL);
		strftime(snap, sizeof(snap), "%Y-%m-%d-%H:%M:%S", localtime(&now));
	}
	if (storage_guest_dataset(sys, &g, dataset, sizeof(dataset)))
		rc = snapshot_zfs(sys, &g, dataset, snap, force, memory);
	else
		rc = snapshot_files_guest(sys, &g, snap, force, memory);
	vm_guest_free(&g);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Rollback. */

/* Visible file names of snapshot folder `dir` (not .snapshot). */
static int snapshot_contents(const char *dir, struct disk_files *f, char *err, size_t errlen)
{
	struct dirent **names;
	int n = scandir(dir, &names, storage_visible_entry, alphasort);

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

/* A plain file, not a link to one. */
static bool plain_file(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Where file `name` of a snapshot goes back to: its own name, but the
 * memory state `memory` becomes NAME.state (the guest's name now). */
static int restore_name(const struct vm_guest *g, const char *name, const char *memory, char *out,
                        size_t len)
{
	if (*memory && !strcmp(name, memory))
		return snprintf(out, len, "%s%s", g->name, VM_STATE_SUFFIX) < (int)len ? 0 : -1;
	return snprintf(out, len, "%s", name) < (int)len ? 0 : -1;
}

/* Copy every file of the snapshot to a temporary name beside the file it
 * replaces; only when all copies are made are they renamed over, in the
 * order of `f` (the memory state, which makes the guest Suspended, last). */
static int restore_files(const struct vm_guest *g, const char *snap_dir, const struct disk_files *f,
                         const char *memory, char *err, size_t errlen)
{
	char(*base)[NAME_MAX + 1] = calloc(f->n + 1, NAME_MAX + 1);
	char(*tmp)[PATH_MAX] = calloc(f->n + 1, PATH_MAX);
	char src[PATH_MAX], dst[PATH_MAX];
	size_t i, made = 0;
	int rc = 0;

	if (!tmp || !base) {
		free(tmp);
		free(base);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < f->n && rc == 0; i++) {
		rc = storage_join(src, snap_dir, f->name[i], err, errlen);
		if (rc == 0 &&
		    (rc = restore_name(g, f->name[i], memory, base[i], NAME_MAX + 1)) < 0)
			snprintf(err, errlen, "%s: name too long", g->name);
		if (rc == 0 && !plain_file(src)) { /* a link could bring in any host file */
			snprintf(err, errlen, "%s: not a plain file", src);
			rc = -1;
		}
		if (rc == 0 &&
		    (rc = storage_temp_file(g->dir, base[i], tmp[i], err, errlen)) == 0) {
			made++;
			rc = storage_copy_file(src, tmp[i], err, errlen);
		}
	}
	for (i = 0; i < made; i++) {
		if (rc == 0 && (rc = storage_join(dst, g->dir, base[i], err, errlen)) == 0 &&
		    rename(tmp[i], dst) < 0) {
			snprintf(err, errlen, "%s: %s", dst, strerror(errno));
			rc = -1;
		}
		storage_temp_done(tmp[i], rc < 0);
	}
	free(tmp);
	free(base);
	return rc;
}

/* Disk files the guest has now that the snapshot does not: left alone. */
static void warn_new_disks(const struct vm_guest *g, const struct disk_files *snap_files,
                           const char *snap)
{
	struct disk_files *now = calloc(1, sizeof(*now));
	char err[ERRLEN];

	if (now && storage_guest_disk_files(g, now, err, sizeof(err)) == 0)
		for (size_t i = 0; i < now->n; i++)
			if (!storage_disk_listed(snap_files, now->name[i]))
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
		storage_remove_tree(hidden);
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

/* A rollback that put a memory state back says what it means. */
static void say_suspended(const struct vm_guest *g, const char *snap)
{
	printf("%s is Suspended in the state of %s@%s (vm start %s resumes it there)\n", g->name,
	       g->name, snap, g->name);
}

/* Move the memory state `memory` (when the snapshot has one) to the end of
 * its files, so that it is put back after the disks it belongs to. */
static int memory_last(struct disk_files *f, const char *memory, const char *dir, char *err,
                       size_t errlen)
{
	char keep[NAME_MAX + 1];
	size_t i;

	if (!*memory)
		return 0;
	for (i = 0; i < f->n && strcmp(f->name[i], memory); i++)
		;
	if (i == f->n) {
		snprintf(err, errlen, "%s: its memory state %s is missing", dir, memory);
		return -1;
	}
	strcpy(keep, f->name[i]);
	memmove(&f->name[i], &f->name[i + 1], (f->n - i - 1) * sizeof(f->name[0]));
	strcpy(f->name[f->n - 1], keep);
	return 0;
}

static int rollback_files(struct vm_guest *g, const char *snap, bool recursive)
{
	struct snap_set s;
	struct disk_files *f = NULL;
	char base[PATH_MAX], dir[PATH_MAX], err[ERRLEN], newer[ERRLEN], memory[NAME_MAX + 1];
	long i;
	int rc = 1;

	if (storage_snapshots_read(g, &s) != 0)
		return 1;
	if ((i = storage_snapshot_index(&s, snap)) < 0) {
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
	         storage_snapshot_memory(dir, memory, err, sizeof(err)) == 0 &&
	         memory_last(f, memory, dir, err, sizeof(err)) == 0 &&
	         restore_files(g, dir, f, memory, err, sizeof(err)) == 0)
		rc = 0;
	if (rc) {
		vm_error("%s", err);
		goto out;
	}
	warn_new_disks(g, f, snap);
	if (*memory)
		say_suspended(g, snap);
	for (size_t k = (size_t)i + 1; k < s.n; k++)
		snapshot_destroy(g, s.v[k].name);
out:
	free(f);
	free(s.v);
	return rc;
}

/* After a zfs rollback: a memory state the snapshot brought back becomes
 * DIR/NAME.state (the guest Suspended).  0, or 1 after one line. */
static int zfs_memory_back(const struct vm_guest *g, const char *snap)
{
	char from[PATH_MAX], to[PATH_MAX];
	struct stat st;

	if (snprintf(from, sizeof(from), "%s/%s%s", g->dir, g->name, VM_SNAP_STATE_SUFFIX) >=
	        (int)sizeof(from) ||
	    vm_state_path(g, to) < 0)
		return vm_error("%s: path too long", g->dir);
	if (lstat(from, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	if (rename(from, to) < 0)
		return vm_error("%s: %s", to, strerror(errno));
	say_suspended(g, snap);
	return 0;
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
	if (storage_split_target(argv[optind], name, snap) < 0)
		return 1;
	if (!snap[0])
		return vm_error("a snapshot must be given as name@snapshot");
	if (vm_require_write(sys, "rollback") || storage_find_guest(sys, name, &g) < 0)
		return 1;
	if (!storage_guest_stopped(sys, &g)) {
		rc = vm_error("%s must be powered off first", g.name);
	} else if (vm_state_present(&g)) {
		/* Its saved memory belongs to the disks as they are now. */
		rc = vm_error("%s is suspended: its saved state would not match the rolled back "
		              "disks (vm start -d %s discards it)",
		              g.name, g.name);
	} else if (storage_guest_dataset(sys, &g, dataset, sizeof(dataset))) {
		struct zfs_rollback_arg a = {snap, recursive};
		rc = storage_need_zfs() ? 1
		                        : storage_zfs_each(dataset, storage_zfs_rollback_one, &a);
		if (rc == 0)
			rc = zfs_memory_back(&g, snap);
	} else {
		rc = rollback_files(&g, snap, recursive);
	}
	vm_guest_free(&g);
	return rc;
}
