#include "run/jail.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/config.h"
#include "lib/log.h"

/* LeakSanitizer stops the world with ptrace and reads /proc/self/maps at
 * exit: sanitizer builds keep /proc in the jail and stay dumpable. */
#if defined(__SANITIZE_ADDRESS__)
#define JAIL_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JAIL_SANITIZER 1
#endif
#endif
#ifndef JAIL_SANITIZER
#define JAIL_SANITIZER 0
#endif

/* What jail_prepare() decided, for jail_enter(). */
static struct {
	bool on;   /* sandbox on */
	bool root; /* started as root: namespace and user drop */
	bool ready;
	uid_t uid;
	gid_t gid;
	char user[64];
} jail;

/* capset(2)/capget(2) have no glibc wrapper; version 3 carries 64 bits. */
static int caps_set(bool keep_effective)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data) < 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		data[i].inheritable = 0;
		if (!keep_effective)
			data[i].effective = data[i].permitted = 0;
	}
	return (int)syscall(SYS_capset, &hdr, data);
}

/* Empty the bounding set: capabilities beyond the last one give EINVAL. */
static int drop_bounding_set(void)
{
	for (int cap = 0; cap < 64; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL)
			return 0;
		return -1;
	}
	return 0;
}

/* The user to become: sandbox.user, else khyve, else nobody. */
static int find_user(char *err, size_t errlen)
{
	const char *name = config_get("sandbox.user");
	const char *tries[2] = {name, NULL};
	struct passwd *pw = NULL;

	if (name == NULL) {
		tries[0] = "khyve";
		tries[1] = "nobody";
	}
	for (int i = 0; i < 2 && tries[i] != NULL && pw == NULL; i++)
		pw = getpwnam(tries[i]);
	if (pw == NULL) {
		snprintf(err, errlen,
		         name ? "sandbox.user=%s: no such user"
		              : "sandbox: no user khyve or nobody%s: set -o sandbox.user=NAME",
		         name ? name : "");
		return -1;
	}
	if (pw->pw_uid == 0) {
		snprintf(err, errlen, "sandbox.user=%s is root: use -o sandbox=off to keep root",
		         pw->pw_name);
		return -1;
	}
	jail.uid = pw->pw_uid;
	jail.gid = pw->pw_gid;
	snprintf(jail.user, sizeof(jail.user), "%s", pw->pw_name);
	return 0;
}

/* Per-thread limits, set while there is one thread so that all inherit them. */
static int limit_this_thread(char *err, size_t errlen)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "sandbox: PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}
	if (!jail.root)
		return 0;
	/* Old kernels lack ambient capabilities: nothing to clear then. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) {
		snprintf(err, errlen, "sandbox: clearing ambient capabilities: %s",
		         strerror(errno));
		return -1;
	}
	if (drop_bounding_set() < 0 || caps_set(true) < 0) {
		snprintf(err, errlen, "sandbox: dropping the bounding set: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int jail_prepare(char *err, size_t errlen)
{
	/* -o sandbox=off: the seccomp half (src/lib/sandbox.c) files it as
	 * sandbox.enable, beside sandbox.user; a plain "sandbox" also counts. */
	const char *key = config_get("sandbox.enable") != NULL ? "sandbox.enable" : "sandbox";
	bool on = true;

	if (config_get_bool(key, true, &on) < 0) {
		snprintf(err, errlen, "sandbox=%s: want on or off", config_get(key));
		return -1;
	}
	jail.on = on;
	jail.root = geteuid() == 0;
	if (!on) {
		if (config_get("sandbox.user") != NULL)
			log_warn("sandbox=off: sandbox.user=%s is ignored",
			         config_get("sandbox.user"));
		return 0;
	}
	if (jail.root && find_user(err, errlen) < 0)
		return -1;
	/* Log timestamps read /etc/localtime once; after the jail it is gone. */
	tzset();
	if (limit_this_thread(err, errlen) < 0)
		return -1;
	/* A private copy of the mounts; nothing changes in it until jail_enter(). */
	if (jail.root &&
	    (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)) {
		snprintf(err, errlen, "sandbox: own mount namespace: %s (or -o sandbox=off)",
		         strerror(errno));
		return -1;
	}
	jail.ready = true;
	return 0;
}

/* Some directory to mount the new root on: any will do, the namespace is ours. */
static const char *mount_point(void)
{
	static const char *const dirs[] = {"/tmp", "/mnt", "/run", "/dev"};
	struct stat st;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (stat(dirs[i], &st) == 0 && S_ISDIR(st.st_mode))
			return dirs[i];
	return NULL;
}

/* Make the tmpfs at `dir` the root.  pivot_root(2) unmounts the host's
 * tree; where the root is an initramfs (pivot_root refuses it) chroot(2)
 * leaves it mounted but out of reach, as no capability is left to escape. */
static int change_root(const char *dir)
{
	if (chdir(dir) < 0)
		return -1;
	if (syscall(SYS_pivot_root, ".", ".") == 0) {
		if (umount2(".", MNT_DETACH) < 0)
			return -1;
	} else if (errno != EINVAL || chroot(".") < 0) {
		return -1;
	}
	return chdir("/");
}

static int empty_root(char *err, size_t errlen)
{
	const char *dir = mount_point();
	const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;

	if (dir == NULL) {
		snprintf(err, errlen, "sandbox: no directory to mount the jail on");
		return -1;
	}
	if (mount("khyve-jail", dir, "tmpfs", flags, "size=16k,nr_inodes=16,mode=0555") < 0 ||
	    change_root(dir) < 0) {
		snprintf(err, errlen, "sandbox: entering an empty root: %s (or -o sandbox=off)",
		         strerror(errno));
		return -1;
	}
	if (JAIL_SANITIZER &&
	    (mkdir("/proc", 0555) < 0 || mount("proc", "/proc", "proc", flags, NULL) < 0)) {
		snprintf(err, errlen, "sandbox: /proc for the sanitizer: %s", strerror(errno));
		return -1;
	}
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, NULL) < 0) {
		snprintf(err, errlen, "sandbox: read-only root: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* glibc runs setgroups, setresgid and setresuid in every thread; the kernel
 * clears each thread's permitted and effective sets as its uid leaves 0. */
static int become_user(char *err, size_t errlen)
{
	uid_t r, e, s;

	if (setgroups(0, NULL) < 0 || setresgid(jail.gid, jail.gid, jail.gid) < 0 ||
	    setresuid(jail.uid, jail.uid, jail.uid) < 0 || caps_set(false) < 0) {
		snprintf(err, errlen, "sandbox: becoming %s: %s", jail.user, strerror(errno));
		return -1;
	}
	/* Paranoia, as the jailer: no way back to root. */
	if (getresuid(&r, &e, &s) < 0 || r == 0 || e == 0 || s == 0 || setuid(0) == 0) {
		snprintf(err, errlen, "sandbox: still root after becoming %s", jail.user);
		return -1;
	}
	if (JAIL_SANITIZER)
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	return 0;
}

int jail_enter(char *err, size_t errlen)
{
	if (!jail.on || !jail.root)
		return 0;
	if (!jail.ready) {
		snprintf(err, errlen, "sandbox: jail_enter() without jail_prepare()");
		return -1;
	}
	if (empty_root(err, errlen) < 0 || become_user(err, errlen) < 0)
		return -1;
	log_debug("sandbox: running as %s (uid %u) in an empty root", jail.user,
	          (unsigned)jail.uid);
	return 0;
}
