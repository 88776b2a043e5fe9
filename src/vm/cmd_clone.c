/* vm clone (commands.h, storage.h). */
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
#include "vm/state.h"
#include "vm/util.h"
#include "vm/storage.h"

/* ------------------------------------------------------------------ */
/* Clone. */

/* What a clone leaves behind: run state, logs, consoles, snapshots and
 * anything hidden (our own temporary files among them). */
static bool clone_skips(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	if (name[0] == '.' || !strcmp(name, "run.lock") || !strcmp(name, "run.state") ||
	    !strcmp(name, "ha.resource") || !strncmp(name, "vm-bhyve.log", 12) ||
	    storage_has_suffix(name, ".pty") || storage_has_suffix(name, ".log"))
		return true;
	if (vm_path(path, dir, name) < 0 || lstat(path, &st) < 0)
		return true;
	return !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode);
}

/* Entries of the guest's folder (or of a snapshot of it) that a clone takes. */
static int clone_sources(const char *dir, bool from_snapshot, struct disk_files *f, char *err,
                         size_t errlen)
{
	char memory[NAME_MAX + 1] = "";
	struct dirent **names;
	int n;

	/* A snapshot's memory state is not the clone's: it has new MACs and boots. */
	if (from_snapshot && storage_snapshot_memory(dir, memory, err, errlen) < 0)
		return -1;
	n = scandir(dir, &names, storage_visible_entry, alphasort);
	f->n = 0;
	if (n < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const char *e = names[i]->d_name;
		bool take = (from_snapshot ? strcmp(e, memory) != 0 : !clone_skips(dir, e)) &&
		            strlen(e) <= NAME_MAX;

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
	if (job->snap[0] && (storage_join(snaps, job->src->dir, SNAP_DIR, err, errlen) < 0 ||
	                     storage_join(from, snaps, job->snap, err, errlen) < 0))
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
	if (storage_copy_into(from, f->name, f->n, "-a", tmp, err, errlen) == 0 &&
	    clone_rename_conf(tmp, job->src->name, job->new_name, err, errlen) == 0) {
		rc = file_rename_noreplace(tmp, job->dest);
		if (rc < 0)
			snprintf(err, errlen, "%s: %s", job->dest,
			         errno == EEXIST || errno == ENOTEMPTY ? "already exists"
			                                               : strerror(errno));
	}
	if (rc < 0)
		storage_remove_tree(tmp);
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
		if (storage_snapshots_read(job->src, &s) != 0)
			return 1;
		if (storage_snapshot_index(&s, job->snap) < 0)
			rc = vm_error("%s@%s: no such snapshot", job->src->name, job->snap);
		free(s.v);
		return rc;
	}
	if (!storage_guest_stopped(sys, job->src))
		return vm_error("%s must be powered off first (or clone a snapshot: %s@SNAPSHOT)",
		                job->src->name, job->src->name);
	if (!(f = calloc(1, sizeof(*f))))
		return vm_error("out of memory");
	if (storage_guest_disk_files(job->src, f, err, sizeof(err)) < 0)
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

	if (storage_need_zfs())
		return 1;
	snprintf(new_ds, sizeof(new_ds), "%.*s/%s", (int)(strrchr(dataset, '/') - dataset), dataset,
	         job->new_name);
	snprintf(snap, sizeof(snap), "%s", job->snap);
	if (!snap[0]) {
		if (!storage_guest_stopped(sys, job->src))
			return vm_error("%s must be powered off first", job->src->name);
		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (unsigned)time(NULL) ^ (unsigned)getpid();
		snprintf(snap, sizeof(snap), "%08x", r);
		if (storage_zfs_snapshot(dataset, snap))
			return 1;
	} else if (storage_zfs_each(dataset, storage_zfs_clone_one, &a)) {
		return 1;
	}
	a.check_only = false;
	if (storage_zfs_each(dataset, storage_zfs_clone_one, &a))
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
	if (storage_path_exists(job.dest))
		return vm_error("%s: already exists", job.dest);
	if (storage_guest_dataset(sys, src, dataset, sizeof(dataset)))
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
	if (storage_split_target(argv[1], name, snap) < 0)
		return 1;
	if (!vm_name_valid(argv[2]))
		return vm_error("%s: not a valid virtual machine name", argv[2]);
	if (vm_require_write(sys, "clone"))
		return 1;
	if (vm_guest_find(sys, argv[2], &other, err, sizeof(err)) == 0) {
		vm_guest_free(&other);
		return vm_error("%s: a virtual machine of that name already exists", argv[2]);
	}
	if (storage_find_guest(sys, name, &src) < 0)
		return 1;
	rc = clone_guest(sys, &src, snap, argv[2]);
	vm_guest_free(&src);
	return rc;
}
