/*
 * Whether a guest runs (state.h): run.lock locked by a live process on this
 * host, run.state naming the supervisor and khyve (see supervisor.h).
 */
#include "vm/state.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vm/live.h"
#include "vm/supervisor.h"
#include "vm/suspend.h"

void vm_hostname(char *out, size_t len)
{
	if (gethostname(out, len) < 0)
		out[0] = '\0';
	out[len - 1] = '\0';
}

unsigned long long vm_proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ticks = 0;
	FILE *f;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	/* The command name (field 2) may hold blanks and ')': skip past the last ')'. */
	if (!p || !(p = strrchr(buf, ')')))
		return 0;
	/* A zombie (its parent, say a container's init, has not reaped it) is gone. */
	if (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
		return 0;
	/* Step to the blank before field 22 (starttime). */
	for (int field = 3; field <= 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (p)
		ticks = strtoull(p + 1, NULL, 10);
	return ticks;
}

/* True when another open file description holds a lock on `fd`'s file. */
static bool lock_held(int fd)
{
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};

	/* An OFD query, unlike flock(), takes nothing, so it cannot make a
	 * supervisor that is starting at this moment fail to lock. */
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return false;
	return fl.l_type != F_UNLCK;
}

static bool plain_file(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

/* The first line of run.lock: the host that locked the guest. */
static void read_host(int fd, char *out, size_t len)
{
	ssize_t n = pread(fd, out, len - 1, 0);

	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
}

/* A pid recorded in run.state, or 0 when that process is gone (or recycled). */
static pid_t live_pid(const struct rcconf *rs, const char *pid_key, const char *start_key)
{
	long pid = strtol(rcconf_get_default(rs, pid_key, "0"), NULL, 10);
	unsigned long long start = strtoull(rcconf_get_default(rs, start_key, "0"), NULL, 10);

	if (pid <= 0 || pid > 0x7fffffff || start == 0)
		return 0;
	return vm_proc_start((pid_t)pid) == start ? (pid_t)pid : 0;
}

static void read_run_state(const struct vm_guest *g, struct vm_status *st)
{
	char path[PATH_MAX], err[256];
	struct rcconf *rs;

	if (vm_path(path, g->dir, VM_RUN_STATE) < 0 || !(rs = rcconf_load(path, err, sizeof(err))))
		return;
	st->supervisor = live_pid(rs, "supervisor", "supervisor_start");
	st->khyve = live_pid(rs, "khyve", "khyve_start");
	snprintf(st->console, sizeof(st->console), "%s", rcconf_get_default(rs, "console", ""));
	snprintf(st->vnc, sizeof(st->vnc), "%s", rcconf_get_default(rs, "vnc", ""));
	st->vnc_wait = rcconf_get_yes(rs, "vnc_wait");
	rcconf_free(rs);
}

static void read_lock(const struct vm_guest *g, struct vm_status *st)
{
	char path[PATH_MAX], me[sizeof(st->host)];
	int fd;

	/* O_NONBLOCK | O_NOFOLLOW: a FIFO or link planted there must not hang vm list. */
	if (vm_path(path, g->dir, VM_RUN_LOCK) < 0 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
		return;
	if (!plain_file(fd)) {
		close(fd);
		return;
	}
	read_host(fd, st->host, sizeof(st->host));
	vm_hostname(me, sizeof(me));
	/* Another host's name: locked there (vm-bhyve's rule), whether or not
	 * its lock reaches us (shared storage).  Ours: running while held,
	 * else stale (we crashed). */
	if (st->host[0] && strcmp(st->host, me) != 0) {
		st->state = VM_LOCKED;
		st->held = lock_held(fd);
	} else if (lock_held(fd)) {
		st->state = VM_RUNNING;
		read_run_state(g, st);
	}
	close(fd);
}

void vm_status_get(const struct vm_sys *sys, const struct vm_guest *g, struct vm_status *st)
{
	(void)sys;
	memset(st, 0, sizeof(*st));
	read_lock(g, st);
	/* A guest that runs (resuming from it, for a moment) is Running. */
	if (st->state == VM_STOPPED && vm_state_present(g))
		st->state = VM_SUSPENDED;
}

void vm_status_ask_khyve(const struct vm_guest *g, struct vm_status *st)
{
	st->live[0] = '\0';
	if (st->state == VM_RUNNING && st->khyve)
		vm_live_state(g, st->live, sizeof(st->live));
}

void vm_status_format(const struct vm_status *st, char *out, size_t len)
{
	pid_t pid = st->supervisor ? st->supervisor : st->khyve;
	const char *running = st->live[0] ? st->live : "Running";

	if (st->state == VM_RUNNING && pid)
		snprintf(out, len, "%s (%d)", running, (int)pid);
	else if (st->state == VM_RUNNING)
		snprintf(out, len, "%s", running);
	else if (st->state == VM_LOCKED)
		snprintf(out, len, "Locked (%s)", st->host);
	else if (st->state == VM_SUSPENDED)
		snprintf(out, len, "Suspended");
	else
		snprintf(out, len, "Stopped");
}

/* Fields 3 ... of /proc/PID/stat (field 2, the name, may hold blanks). */
#define STAT_FIELDS 24

static int read_stat_fields(pid_t pid, unsigned long long f[STAT_FIELDS + 1])
{
	char path[64], buf[1024], *p;
	FILE *file;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (pid <= 0 || !(file = fopen(path, "re")))
		return -1;
	p = fgets(buf, sizeof(buf), file);
	fclose(file);
	if (!p || !(p = strrchr(buf, ')')))
		return -1;
	p += 2; /* at field 3, the state letter */
	for (int i = 4; i <= STAT_FIELDS; i++) {
		if (!(p = strchr(p, ' ')))
			return -1;
		f[i] = strtoull(++p, NULL, 10);
	}
	return 0;
}

int vm_proc_usage(pid_t pid, struct vm_proc_usage *u)
{
	unsigned long long f[STAT_FIELDS + 1] = {0};
	long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	struct timespec now;
	double up, age;

	memset(u, 0, sizeof(*u));
	if (read_stat_fields(pid, f) < 0 || hz <= 0 || page <= 0)
		return -1;
	/* starttime counts clock ticks since boot, as CLOCK_BOOTTIME does. */
	clock_gettime(CLOCK_BOOTTIME, &now);
	up = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
	age = up - (double)f[22] / (double)hz;
	if (age < 0)
		age = 0;
	u->uptime_s = (unsigned long long)age;
	u->cpu_percent = age > 0 ? 100.0 * (double)(f[14] + f[15]) / (double)hz / age : 0;
	u->rss_kib = f[24] * (unsigned long long)page / 1024;
	return 0;
}

void vm_format_elapsed(unsigned long long seconds, char *out, size_t len)
{
	unsigned long long d = seconds / 86400, h = seconds / 3600 % 24, m = seconds / 60 % 60,
	                   s = seconds % 60;

	if (d)
		snprintf(out, len, "%llu-%02llu:%02llu:%02llu", d, h, m, s);
	else if (h)
		snprintf(out, len, "%02llu:%02llu:%02llu", h, m, s);
	else
		snprintf(out, len, "%02llu:%02llu", m, s);
}
