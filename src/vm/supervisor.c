/*
 * The supervisor (supervisor.h): lock, run khyve, decide from its exit
 * status whether to boot it again, log every step to DIR/vm-bhyve.log.
 *
 * khyve's exit status (bhyve's): 0 the guest rebooted, 1 powered off,
 * 2 halted, 3 triple fault, 4 error; and khyve's own 5, suspended (the
 * machine was saved into a file, suspend.h), which stops like a power-off.
 * As in vm-bhyve, a reboot restarts
 * unless on_restart is not "restart", a power-off or halt stops, and
 * anything else (a fault, khyve killed) follows on_fault, "shutdown" by
 * default.  on_fault="restart" backs off 1, 2, 4 ... 60 s and gives up
 * after FAULT_MAX faults within FAULT_WINDOW seconds.
 */
#include "vm/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/parse.h"
#include "vm/cgroup.h"
#include "vm/khyvecmd.h"
#include "vm/live.h"
#include "vm/net.h"
#include "vm/paths.h"
#include "vm/suspend.h"
#include "vm/tpm.h"
#include "vm/util.h"

#define FAULT_MAX      10  /* restarts after faults allowed ... */
#define FAULT_WINDOW   600 /* ... within this many seconds */
#define BACKOFF_MAX    60  /* seconds */
#define START_GRACE_MS 300 /* khyve failing this soon is reported to `vm start` */
#define RESTORE_GRACE_MS                                                                           \
	2000           /* a resumed khyve that ran this long keeps running: its                    \
	                * saved state is removed then, not before */
#define VM_COM_PORTS 4 /* com1 ... com4, as khyvecmd.c offers them */

/* Requests, set by the signal handler (see supervisor.h). */
static volatile sig_atomic_t stop_wanted, restart_wanted;
/* The running khyve, for the handler to forward requests to; 0 if none. */
static volatile sig_atomic_t khyve_pid;

struct supervisor {
	struct vm_sys *sys;
	struct vm_guest g;
	const struct vm_run_opts *o;
	char lock_path[PATH_MAX], state_path[PATH_MAX], log_path[PATH_MAX];
	int lock_fd;
	int ready_fd;            /* `vm start` waits on this pipe, or -1 */
	bool pending;            /* the start is not reported yet */
	const char *iso;         /* install medium for this run, or NULL */
	unsigned run;            /* 1, 2, ...: how many times khyve started */
	int nice;                /* `priority` */
	struct vm_cgroup cgroup; /* every run's khyve goes into it */
	struct vm_taps taps;
	struct vm_vnc vnc;   /* graphics: this run's VNC server ("" between runs) */
	unsigned vnc_port;   /* graphics: the port of the first run, kept across restarts */
	char grub[PATH_MAX]; /* loader=grub: this run's boot image */
	time_t faults[FAULT_MAX + 1];
	size_t nfaults;
	time_t started;
	off_t log_mark;  /* size of the log when khyve last started */
	int khyve_ready; /* read end of KHYVE_READY_FD's pipe while khyve runs, or -1 */
	unsigned long long start_ticks;
	char restore[PATH_MAX]; /* DIR/NAME.state the first run resumes from, or "" */
	bool restore_failed;    /* khyve refused it (exit 4): stop, keep the file */
	bool receiving;         /* o->receive: the first run has not taken over yet */
	bool lock_wait;         /* try_lock: a held lock is "not yet", not an error */
	bool lock_foreign_ok;   /* try_lock: take a free lock that names another host */
	struct vm_tpm tpm;      /* tpm="yes": this run's swtpm */
};

/* ---- log ---- */

static void slog(const struct supervisor *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One "Mon DD HH:MM:SS: message" line in DIR/vm-bhyve.log, as vm-bhyve logs. */
static void slog(const struct supervisor *s, const char *fmt, ...)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	va_list ap;
	int fd = vm_open_own(s->log_path, O_WRONLY | O_APPEND | O_CREAT, 0644);
	FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;

	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	strftime(stamp, sizeof(stamp), "%b %d %T", localtime_r(&now, &tm));
	fprintf(f, "%s: ", stamp);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

/*
 * Tell `vm start` how the start went, once: "ok" (error NULL) or the
 * error, which goes to stderr when nobody waits on a pipe.
 */
static void report(struct supervisor *s, const char *error)
{
	char line[1100];

	if (!s->pending)
		return;
	s->pending = false;
	if (s->ready_fd < 0) {
		if (error)
			vm_error("%s", error);
		return;
	}
	snprintf(line, sizeof(line), "%s%s\n", error ? "error " : "ok", error ? error : "");
	if (write(s->ready_fd, line, strlen(line)) < 0)
		slog(s, "warning; could not report the start: %s", strerror(errno));
	close(s->ready_fd);
	s->ready_fd = -1;
}

/* Log a fatal error and report it to `vm start` if it still waits. */
static void fatal(struct supervisor *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fatal(struct supervisor *s, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	slog(s, "fatal; %s", msg);
	report(s, msg);
}

/* ---- signals ---- */

/* Note the request (supervisor.h) and pass it on to khyve at once. */
static void on_request(int sig)
{
	int saved = errno;
	pid_t pid = (pid_t)khyve_pid;

	if (sig == SIGUSR1)
		restart_wanted = 1;
	else
		stop_wanted = 1;
	if (pid > 0)
		kill(pid, sig == SIGUSR1 || sig == SIGUSR2 ? SIGKILL : SIGTERM);
	errno = saved;
}

static void catch_requests(bool foreground)
{
	struct sigaction sa = {.sa_handler = on_request};
	int sigs[] = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2};

	/* No SA_RESTART: waitpid() and sleeps return to look at the request. */
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	/* In the foreground a hangup means the terminal is gone: stop.  In the
	 * background there is no terminal to lose. */
	if (foreground)
		sigaction(SIGHUP, &sa, NULL);
	else
		signal(SIGHUP, SIG_IGN);
	/* `vm start` may be gone when we report to it. */
	signal(SIGPIPE, SIG_IGN);
}

static void block_requests(int how)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigprocmask(how, &set, NULL);
}

static int request_signal(enum vm_request r)
{
	switch (r) {
	case VM_REQ_RESET:
		return SIGUSR1;
	case VM_REQ_POWEROFF:
		return SIGUSR2;
	case VM_REQ_STOP:
		break;
	}
	return SIGTERM;
}

int vm_request_send(const struct vm_status *st, enum vm_request r, char *err, size_t errlen)
{
	int sig = request_signal(r);

	if (st->state != VM_RUNNING) {
		snprintf(err, errlen, "it is not running");
		return -1;
	}
	if (st->supervisor > 0) {
		if (kill(st->supervisor, sig) == 0)
			return 0;
	} else if (st->khyve > 0 && (r == VM_REQ_STOP || r == VM_REQ_POWEROFF)) {
		/* An orphaned khyve (its supervisor was killed): power it off directly. */
		if (kill(st->khyve, r == VM_REQ_STOP ? SIGTERM : SIGKILL) == 0)
			return 0;
	} else {
		snprintf(
		    err, errlen,
		    "its supervisor is gone, so it cannot be reset; use vm stop or vm poweroff");
		return -1;
	}
	snprintf(err, errlen, "cannot signal it: %s", strerror(errno));
	return -1;
}

/* ---- lock and state files ---- */

/* The host line of an open run.lock. */
static void lock_host(int fd, char *out, size_t len)
{
	ssize_t n = pread(fd, out, len - 1, 0);

	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
}

/* Is `fd` still the file at `path` (a previous holder may have unlinked it)? */
static bool same_file(int fd, const char *path)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static int try_lock(struct supervisor *s, const char *me)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	char host[256];
	int fd = vm_open_own(s->lock_path, O_RDWR | O_CREAT, 0644);

	if (fd < 0) {
		fatal(s, "%s: %s", s->lock_path, vm_open_own_strerror(errno));
		return -1;
	}
	if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
		close(fd);
		if (errno != EAGAIN && errno != EACCES) {
			fatal(s, "%s: cannot lock: %s", s->lock_path, strerror(errno));
			return -1;
		}
		if (s->lock_wait)
			return -3;
		fatal(s, "%s is already running", s->g.name);
		return -1;
	}
	if (!same_file(fd, s->lock_path)) {
		close(fd);
		return -2;
	}
	lock_host(fd, host, sizeof(host));
	if (host[0] && strcmp(host, me) != 0 && !s->lock_foreign_ok) {
		close(fd);
		/* Receiving: the source's file, until its supervisor removes it
		 * (or locks that do not reach across hosts let us in early). */
		if (s->lock_wait)
			return -3;
		fatal(s, "%s appears to be running on %s (locked; remove %s if it is not)",
		      s->g.name, host, s->lock_path);
		return -1;
	}
	if (ftruncate(fd, 0) < 0 || pwrite(fd, me, strlen(me), 0) < 0 ||
	    pwrite(fd, "\n", 1, (off_t)strlen(me)) < 0) {
		close(fd);
		fatal(s, "%s: %s", s->lock_path, strerror(errno));
		return -1;
	}
	s->lock_fd = fd;
	return 0;
}

/* Take run.lock and write our host name into it, as vm-bhyve's vm::lock;
 * with s->lock_wait, -3 while someone else holds it. */
static int take_lock(struct supervisor *s)
{
	char me[256];

	vm_hostname(me, sizeof(me));
	for (int tries = 0; tries < 5; tries++) {
		int rc = try_lock(s, me);
		if (rc != -2)
			return rc;
	}
	fatal(s, "%s: keeps being replaced; is another vm starting it?", s->lock_path);
	return -1;
}

/* Unlink before unlocking: a starter that opened the old file sees it go.
 * Without the lock (a receive that never took over) the files are the
 * source's: left alone. */
static void drop_lock(struct supervisor *s)
{
	if (s->lock_fd < 0)
		return;
	unlink(s->state_path);
	unlink(s->lock_path);
	close(s->lock_fd);
	s->lock_fd = -1;
}

static const char *console_kind(const struct supervisor *s)
{
	return s->o->tmux ? "tmux" : s->o->foreground ? "stdio" : "pty";
}

/* run.state: who runs the guest, for vm_status_get(). */
static void write_state(struct supervisor *s, pid_t khyve, unsigned long long khyve_start)
{
	struct rcconf *rs;
	char err[512], v[32];

	/* Before a receive takes over, run.state is the source's. */
	if (s->lock_fd < 0 || !(rs = rcconf_new()))
		return;
	snprintf(v, sizeof(v), "%d", (int)getpid());
	rcconf_set(rs, "supervisor", v);
	snprintf(v, sizeof(v), "%llu", s->start_ticks);
	rcconf_set(rs, "supervisor_start", v);
	snprintf(v, sizeof(v), "%d", (int)khyve);
	rcconf_set(rs, "khyve", v);
	snprintf(v, sizeof(v), "%llu", khyve_start);
	rcconf_set(rs, "khyve_start", v);
	rcconf_set(rs, "console", console_kind(s));
	snprintf(v, sizeof(v), "%lld", (long long)s->started);
	rcconf_set(rs, "started", v);
	/* For vm list and info, and so that guests starting next choose other ports. */
	if (s->vnc.addr[0]) {
		rcconf_set(rs, "vnc", s->vnc.addr);
		rcconf_set(rs, "vnc_wait", s->vnc.wait ? "yes" : "no");
	}
	if (rcconf_save(rs, s->state_path, err, sizeof(err)) < 0)
		slog(s, "warning; %s", err);
	rcconf_free(rs);
}

/*
 * khyve removes its DIR/comN.pty links when it exits; one killed with
 * SIGKILL (or a host crash) leaves them pointing at a pty that is gone.
 * Only links into /dev/pts are ours to remove: anything else was made by
 * someone else.  Called only while no khyve of this guest runs.
 */
static void remove_stale_ptys(const struct supervisor *s)
{
	if (s->lock_fd < 0)
		return; /* receiving: the links there are the source's */
	for (unsigned n = 1; n <= VM_COM_PORTS; n++) {
		char link[PATH_MAX], target[64], name[16];
		ssize_t len;

		snprintf(name, sizeof(name), "com%u.pty", n);
		if (vm_path(link, s->g.dir, name) < 0)
			continue;
		len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (strncmp(target, "/dev/pts/", 9) == 0 && unlink(link) == 0)
			slog(s, "removed the stale %s (to %s)", name, target);
	}
}

/* ---- one run of khyve ---- */

/* From "bootrom,CODE,VARS" with VARS == `vars`, the VARS template of CODE. */
static bool vars_template(const char *arg, const char *vars, char *tmpl, size_t len)
{
	size_t al = strlen(arg), vl = strlen(vars), cl;
	char *base, *code;

	if (strncmp(arg, "bootrom,", 8) != 0 || al < 8 + vl + 2 ||
	    strcmp(arg + al - vl, vars) != 0 || arg[al - vl - 1] != ',')
		return false;
	cl = al - vl - 1 - 8;
	if (cl >= len)
		return false;
	memcpy(tmpl, arg + 8, cl);
	tmpl[cl] = '\0';
	base = strrchr(tmpl, '/');
	code = strstr(base ? base : tmpl, "CODE");
	if (!code)
		return false;
	memcpy(code, "VARS", 4);
	return true;
}

/*
 * uefi_vars: khyve gets "-l bootrom,CODE,DIR/uefi-vars.fd"; the first boot
 * copies the VARS template that belongs to CODE (OVMF_CODE_4M.fd ->
 * OVMF_VARS_4M.fd), so that the two always match.
 */
static int ensure_uefi_vars(struct supervisor *s, const struct argv *a)
{
	char vars[PATH_MAX], tmpl[PATH_MAX];

	/* lstat: never copy through a (dangling) link; khyvecmd.c vetted any there. */
	if (vm_path(vars, s->g.dir, VM_UEFI_VARS) < 0 || vm_exists(vars))
		return 0;
	for (size_t i = 0; i < a->n; i++) {
		if (!vars_template(a->v[i], vars, tmpl, sizeof(tmpl)))
			continue;
		const char *cp[] = {
		    "cp", "--reflink=auto", "--remove-destination", "--", tmpl, vars, NULL};
		char err[PATH_MAX + 200];
		if (vm_tool_run(&(struct vm_tool){.argv = cp}, err, sizeof(err)) < 0) {
			fatal(s, "cannot copy the UEFI variables template %s to %s (%s)", tmpl,
			      vars, err);
			return -1;
		}
		slog(s, "created %s from %s", vars, tmpl);
	}
	return 0;
}

static bool is_grub(const struct supervisor *s)
{
	return strcmp(rcconf_get_default(s->g.conf, "loader", ""), "grub") == 0;
}

/* ---- receiving a live migration (vm migrate -l on the target) ---- */

#define MIG_SUFFIX      ".mig" /* the receiving khyve's socket and pty names, until it takes over */
#define TAKEOVER_MS     30000 /* the source supervisor stops within ms of its khyve: 30 s is stale */
#define SOCKET_PATH_MAX 107

/* DIR/khyve.sock or DIR/comN.pty (the runtime names a receive renames): `p` names one? */
static bool runtime_name(const struct supervisor *s, const char *p)
{
	size_t dl = strlen(s->g.dir);
	const char *base = p + dl + 1;

	if (strncmp(p, s->g.dir, dl) != 0 || p[dl] != '/')
		return false;
	if (!strcmp(base, VM_API_SOCKET))
		return true;
	return !strncmp(base, "com", 3) && base[3] >= '1' && base[3] <= '0' + VM_COM_PORTS &&
	       !strcmp(base + 4, ".pty");
}

/* The path in "api.socket=PATH" or "comN,pty=PATH", else NULL. */
static const char *runtime_arg_path(const char *v)
{
	const char *p;

	if (!strncmp(v, "api.socket=", 11))
		return v + 11;
	if (!strncmp(v, "com", 3) && (p = strstr(v, ",pty=")))
		return p + 5;
	return NULL;
}

/*
 * The first run of a receive: "-R ADDR", and the API socket and pty links
 * under MIG_SUFFIX names, since the source's khyve still has the plain
 * ones (and khyve's lock on the socket) in the shared folder.
 */
static int receive_args(struct supervisor *s, struct argv *a, char *err, size_t errlen)
{
	for (size_t i = 0; i < a->n; i++) {
		const char *p = runtime_arg_path(a->v[i]);
		char *v;

		if (!p || !runtime_name(s, p))
			continue;
		if (!strncmp(a->v[i], "api.", 4) &&
		    strlen(p) + strlen(MIG_SUFFIX) > SOCKET_PATH_MAX) {
			snprintf(err, errlen,
			         "%s: the folder is too long for the migration's API socket",
			         s->g.name);
			return -1;
		}
		if (asprintf(&v, "%s%s", a->v[i], MIG_SUFFIX) < 0)
			return snprintf(err, errlen, "out of memory"), -1;
		free(a->v[i]);
		a->v[i] = v;
	}
	if (vm_argv_add_option(a, "-R", s->o->receive) < 0)
		return snprintf(err, errlen, "out of memory"), -1;
	return 0;
}

/* Once the lock is ours: the received khyve's names become the plain ones. */
static void receive_rename(const struct supervisor *s)
{
	char name[16], to[PATH_MAX], from[PATH_MAX + 8];

	for (unsigned n = 0; n <= VM_COM_PORTS; n++) {
		if (n == 0)
			snprintf(name, sizeof(name), "%s", VM_API_SOCKET);
		else
			snprintf(name, sizeof(name), "com%u.pty", n);
		if (vm_path(to, s->g.dir, name) < 0)
			continue;
		snprintf(from, sizeof(from), "%s%s", to, MIG_SUFFIX);
		if (vm_exists(from) && rename(from, to) < 0)
			slog(s, "warning; cannot rename %s to %s: %s", from, name, strerror(errno));
	}
}

/* Taps, GRUB image, command line: everything this run of khyve needs. */
static int prepare_run(struct supervisor *s, struct argv *a)
{
	struct vm_start_opts opts = {.install = s->iso != NULL,
	                             .iso = s->iso,
	                             .taps = &s->taps,
	                             .foreground = s->o->foreground,
	                             .vnc_port = s->vnc_port,
	                             .vnc = &s->vnc};
	char err[1024];

	memset(&s->taps, 0, sizeof(s->taps));
	memset(&s->vnc, 0, sizeof(s->vnc));
	if (vm_net_prepare(s->sys, &s->g, &s->taps, err, sizeof(err)) < 0) {
		fatal(s, "%s", err);
		return -1;
	}
	if (is_grub(s)) {
		if (vm_grub_image(s->sys, &s->g, s->iso != NULL, s->iso, s->grub, err,
		                  sizeof(err)) < 0)
			goto fail;
		opts.grub_image = s->grub;
	}
	if (vm_khyve_command(s->sys, &s->g, &opts, a, err, sizeof(err)) < 0)
		goto fail;
	if (s->restore[0] && vm_argv_add_restore(a, s->restore) < 0) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	if (s->receiving && receive_args(s, a, err, sizeof(err)) < 0)
		goto fail;
	if (ensure_uefi_vars(s, a) < 0) {
		vm_net_release(s->sys, &s->g, &s->taps);
		return -1;
	}
	s->vnc_port = s->vnc.port;
	return 0;
fail:
	fatal(s, "%s", err);
	vm_net_release(s->sys, &s->g, &s->taps);
	return -1;
}

/* In the child: become khyve, keeping the lock so the guest stays locked. */
static void __attribute__((noreturn))
exec_khyve(const struct supervisor *s, const struct argv *a, int errfd, int readyfd)
{
	char num[16];
	int e;

	signal(SIGHUP, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	block_requests(SIG_UNBLOCK);
	/* Before exec, so that every thread khyve makes inherits it. */
	if (s->nice && setpriority(PRIO_PROCESS, 0, s->nice) < 0)
		fprintf(stderr, "vm: warning: priority %d: %s\n", s->nice, strerror(errno));
	if (vm_cgroup_join(&s->cgroup) < 0)
		fprintf(stderr, "vm: warning: cgroup %s: %s\n", s->cgroup.path, strerror(errno));
	/* khyve writes a byte there once its vCPUs run (src/run/vmrun.c). */
	snprintf(num, sizeof(num), "%d", readyfd);
	if (readyfd >= 0 && fcntl(readyfd, F_SETFD, 0) == 0)
		setenv("KHYVE_READY_FD", num, 1);
	/* A receive has no lock yet: it takes it once the guest is here. */
	if (s->lock_fd < 0 || fcntl(s->lock_fd, F_SETFD, 0) == 0)
		execvp(a->v[0], a->v);
	e = errno;
	/* The parent reads why from the pipe; nothing more can be done here. */
	if (write(errfd, &e, sizeof(e)) != (ssize_t)sizeof(e))
		_exit(126);
	_exit(127);
}

static void close_pair(int fd[2])
{
	close(fd[0]);
	close(fd[1]);
}

/*
 * Fork and exec khyve; its pid, 0 when a stop came first, or -1 (logged).
 * s->khyve_ready gets the read end of the pipe khyve reports on once its
 * guest runs (KHYVE_READY_FD).
 */
static pid_t spawn_khyve(struct supervisor *s, const struct argv *a)
{
	int pfd[2], rfd[2], e = 0;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0) {
		fatal(s, "pipe: %s", strerror(errno));
		return -1;
	}
	if (pipe2(rfd, O_CLOEXEC) < 0) {
		fatal(s, "pipe: %s", strerror(errno));
		close_pair(pfd);
		return -1;
	}
	/* Blocked until khyve_pid is set, so no request falls between. */
	block_requests(SIG_BLOCK);
	if (stop_wanted) {
		/* Asked to stop while the taps or the GRUB image were made. */
		block_requests(SIG_UNBLOCK);
		close_pair(pfd);
		close_pair(rfd);
		return 0;
	}
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		close(rfd[0]);
		exec_khyve(s, a, pfd[1], rfd[1]);
	}
	close(pfd[1]);
	close(rfd[1]);
	if (pid > 0)
		khyve_pid = pid;
	block_requests(SIG_UNBLOCK);
	if (pid < 0) {
		close(pfd[0]);
		close(rfd[0]);
		fatal(s, "fork: %s", strerror(errno));
		return -1;
	}
	ssize_t n;
	while ((n = read(pfd[0], &e, sizeof(e))) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	if (n == (ssize_t)sizeof(e)) {
		close(rfd[0]);
		waitpid(pid, NULL, 0);
		khyve_pid = 0;
		fatal(s, "cannot run %s: %s", a->v[0], strerror(e));
		return -1;
	}
	s->khyve_ready = rfd[0];
	return pid;
}

/*
 * The start-up grace: wait up to grace_ms for khyve to end (1, with
 * *status) or to report on s->khyve_ready that its guest runs (0); -1 when
 * the child is lost.  A khyve that never reports is waited for the whole
 * grace, as before KHYVE_READY_FD.
 */
static int wait_start(struct supervisor *s, pid_t pid, int *status, long grace_ms)
{
	int fd = s->khyve_ready;

	for (long left = grace_ms;; left -= 10) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		pid_t r = waitpid(pid, status, WNOHANG);
		char c;

		if (r == pid)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
		if (left <= 0)
			return 0;
		/* A negative fd only sleeps: poll(2) ignores it. */
		if (poll(&p, 1, 10) == 1) {
			if (read(fd, &c, 1) == 1)
				return 0;
			fd = -1; /* closed unreported: khyve is ending, or does not report */
		}
	}
}

static bool exited_with(int status, int code)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == code;
}

/*
 * A resumed khyve: wait up to RESTORE_GRACE_MS.  One that ends with 4 in
 * that time refused the state (a changed configuration, a corrupt file:
 * its one line is in the log), which stays for another try; otherwise the
 * guest ran from it and the file is removed, so that no later start can
 * put that memory back over disks that have moved on.  As wait_start().
 */
static int wait_restore(struct supervisor *s, pid_t pid, int *status)
{
	int ended = vm_wait_child(pid, status, RESTORE_GRACE_MS);

	if (ended == 1 && exited_with(*status, 4)) {
		s->restore_failed = true;
		slog(s,
		     "khyve refused to resume from %s; the file stays for another try (vm "
		     "start -d %s discards it and boots afresh)",
		     s->restore, s->g.name);
	} else if (ended == 1 && exited_with(*status, VM_EXIT_SUSPENDED)) {
		/* Suspended again at once: the file there may be the new state. */
	} else if (ended >= 0) {
		if (unlink(s->restore) < 0 && errno != ENOENT)
			slog(s, "warning; cannot remove %s: %s", s->restore, strerror(errno));
		else
			slog(s, "resumed from %s; removed it", s->restore);
	}
	s->restore[0] = '\0';
	return ended;
}

/*
 * A receiving khyve: wait until its guest runs (khyve reports once the
 * source's COMMIT came and the vCPUs go), then until the source's
 * supervisor lets go of run.lock (its khyve exits 0 once we confirmed),
 * then take the lock and the runtime names over.  As wait_start().
 */
static int wait_received(struct supervisor *s, pid_t pid, int *status)
{
	struct timespec step = {0, 20 * 1000 * 1000};
	int ended = wait_start(s, pid, status, LONG_MAX / 2), rc;

	if (ended != 0)
		return ended;
	slog(s, "migrated in; waiting for the source to let go of %s", VM_RUN_LOCK);
	s->lock_wait = true;
	for (int waited = 0; (rc = take_lock(s)) == -3; waited += 20) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 1;
		/* A free lock naming the source long after it exited is stale. */
		if (waited == TAKEOVER_MS)
			s->lock_foreign_ok = true;
		nanosleep(&step, NULL);
	}
	s->lock_wait = s->lock_foreign_ok = false;
	if (rc < 0) {
		/* The guest runs here now, whatever the lock file says: keep it. */
		slog(s, "warning; the guest runs without %s", VM_RUN_LOCK);
		return 0;
	}
	receive_rename(s);
	s->receiving = false;
	write_state(s, pid, vm_proc_start(pid));
	slog(s, "took over %s; the guest runs here", VM_RUN_LOCK);
	return 0;
}

/* The last line since khyve started that begins with `prefix` into `out`
 * ("" when none); true when there is one. */
static bool khyve_last_line(const struct supervisor *s, const char *prefix, char *out, size_t len)
{
	char line[512];
	FILE *f = fopen(s->log_path, "re");

	out[0] = '\0';
	if (!f)
		return false;
	if (fseeko(f, s->log_mark, SEEK_SET) == 0)
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, prefix, strlen(prefix)) == 0) {
				line[strcspn(line, "\n")] = '\0';
				snprintf(out, len, "%s", line);
			}
	fclose(f);
	return out[0] != '\0';
}

/*
 * khyve's exit 0 after `vm migrate -l` here: DIR/run.migrating names us
 * and khyve logged that the target runs the guest.  A marker that a killed
 * `vm migrate` left is removed either way, so a later reboot reboots.
 */
static bool migrated_away(const struct supervisor *s)
{
	char path[PATH_MAX], buf[32], said[512];
	int fd;
	ssize_t n;

	if (vm_path(path, s->g.dir, VM_RUN_MIGRATING) < 0 ||
	    (fd = vm_open_own(path, O_RDONLY, 0)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if (strtol(buf, NULL, 10) != (long)getpid())
		return false;
	unlink(path);
	return khyve_last_line(s, "khyve: migrated out", said, sizeof(said));
}

static void describe_exit(int status, char *out, size_t len)
{
	if (WIFEXITED(status))
		snprintf(out, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, len, "was killed by signal %d", WTERMSIG(status));
	else
		snprintf(out, len, "ended (wait status %#x)", status);
}

/*
 * Start khyve once and wait for it: its wait status, -1 when it could not
 * be started (logged, reported), -2 when a stop request came first.
 */
static int run_once(struct supervisor *s)
{
	struct argv a = {0};
	char how[64];
	int status = 0;
	pid_t pid;

	if (prepare_run(s, &a) < 0) {
		argv_free(&a);
		return -1;
	}
	/* The VNC port is taken from now on, before khyve listens on it. */
	if (s->vnc.addr[0]) {
		slog(s, "vnc on %s%s", s->vnc.addr, s->vnc.wait ? " (waits for a client)" : "");
		write_state(s, 0, 0);
	}
	char *line = argv_to_shell(&a);
	slog(s, " [khyve command: %s]", line ? line : "?");
	free(line);
	if (vm_tpm_wanted(&s->g)) {
		char err[PATH_MAX + 128];

		if (vm_tpm_start(&s->g, &s->tpm, err, sizeof(err)) < 0) {
			argv_free(&a);
			fatal(s, "%s", err);
			vm_net_release(s->sys, &s->g, &s->taps);
			return -1;
		}
		slog(s, "swtpm started (pid %d, state in %s)", (int)s->tpm.pid, s->tpm.dir);
	}
	slog(s, "starting khyve (run %u)", s->run);
	struct stat lst;
	s->log_mark = stat(s->log_path, &lst) == 0 ? lst.st_size : 0;
	/* A reset asked for between two runs is done by this one. */
	restart_wanted = 0;
	pid = spawn_khyve(s, &a);
	argv_free(&a);
	if (pid <= 0) {
		vm_tpm_stop(&s->tpm);
		memset(&s->vnc, 0, sizeof(s->vnc));
		vm_net_release(s->sys, &s->g, &s->taps);
		return pid < 0 ? -1 : -2;
	}
	write_state(s, pid, vm_proc_start(pid));
	int ended = 0;
	/* A khyve that fails at once is worth telling `vm start` about. */
	if (s->receiving)
		ended = wait_received(s, pid, &status);
	else if (s->restore[0])
		ended = wait_restore(s, pid, &status);
	else if (s->pending && s->ready_fd >= 0)
		ended = wait_start(s, pid, &status, START_GRACE_MS);
	if (ended == 0) {
		report(s, NULL);
		ended = vm_wait_child(pid, &status, -1);
	}
	if (ended < 0)
		status = 4 << 8; /* lost our own child (cannot happen): an error */
	close(s->khyve_ready);
	s->khyve_ready = -1;
	khyve_pid = 0;
	if (s->tpm.pid > 0) {
		vm_tpm_stop(&s->tpm);
		slog(s, "swtpm stopped");
	}
	memset(&s->vnc, 0, sizeof(s->vnc));
	write_state(s, 0, 0);
	remove_stale_ptys(s);
	vm_net_release(s->sys, &s->g, &s->taps);
	describe_exit(status, how, sizeof(how));
	slog(s, "khyve %s", how);
	return status;
}

/* ---- what next ---- */

enum next { NEXT_STOP, NEXT_RESTART, NEXT_BACKOFF };

/* on_fault="restart": count this fault; the back-off in seconds, or -1 to give up. */
static int fault_backoff(struct supervisor *s)
{
	time_t now = time(NULL);
	size_t kept = 0;

	for (size_t i = 0; i < s->nfaults; i++)
		if (now - s->faults[i] < FAULT_WINDOW)
			s->faults[kept++] = s->faults[i];
	s->nfaults = kept;
	if (s->nfaults >= FAULT_MAX)
		return -1;
	s->faults[s->nfaults++] = now;
	return s->nfaults > 6 ? BACKOFF_MAX : 1 << (s->nfaults - 1);
}

static enum next decide(struct supervisor *s, int status, int *delay)
{
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;

	if (s->receiving) {
		/* Never boot afresh what the source still runs. */
		slog(s, "the migration did not arrive; not starting");
		return NEXT_STOP;
	}
	if (code == 0 && migrated_away(s)) {
		slog(s, "migrated away; stopped here (the guest runs on the target)");
		return NEXT_STOP;
	}
	if (code == VM_EXIT_SUSPENDED) {
		/* khyvectl may still be renaming the file: do not look for it. */
		slog(s,
		     "suspended; not restarting (vm start %s resumes it from %s%s, when the "
		     "state was saved there)",
		     s->g.name, s->g.name, VM_STATE_SUFFIX);
		return NEXT_STOP;
	}
	if (s->restore_failed)
		return NEXT_STOP;
	if (stop_wanted) {
		slog(s, "stop requested");
		return NEXT_STOP;
	}
	if (restart_wanted) {
		slog(s, "reset requested");
		restart_wanted = 0;
		return NEXT_RESTART;
	}
	if (code == 0) {
		const char *v = rcconf_get_default(s->g.conf, "on_restart", "restart");
		return strcmp(v, "restart") == 0 ? NEXT_RESTART : NEXT_STOP;
	}
	if (code == 1 || code == 2)
		return NEXT_STOP;
	if (strcmp(rcconf_get_default(s->g.conf, "on_fault", "shutdown"), "restart") != 0)
		return NEXT_STOP;
	*delay = fault_backoff(s);
	if (*delay < 0) {
		slog(s, "%d faults within %d seconds; not restarting", FAULT_MAX, FAULT_WINDOW);
		return NEXT_STOP;
	}
	return NEXT_BACKOFF;
}

/* Sleep `seconds` unless a stop is requested first. */
static void backoff(int seconds)
{
	struct timespec left = {seconds, 0};

	while (!stop_wanted && !restart_wanted && nanosleep(&left, &left) < 0 && errno == EINTR)
		;
}

static int exit_code(int status)
{
	if (status < 0)
		return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* khyve's last "khyve: ..." line in the log since it started, or "". */
static void khyve_said(const struct supervisor *s, char *out, size_t len)
{
	khyve_last_line(s, "khyve: ", out, len);
}

/* khyve failed within the grace period and will not be restarted: say why. */
static void report_early_fault(struct supervisor *s, int status)
{
	char how[64], said[512];

	describe_exit(status, how, sizeof(how));
	khyve_said(s, said, sizeof(said));
	if (said[0])
		fatal(s, "%s: %s (khyve %s; see %s)", s->g.name, said, how, s->log_path);
	else
		fatal(s, "%s: khyve %s; see %s", s->g.name, how, s->log_path);
}

static bool is_fault(int status)
{
	return !WIFEXITED(status) ||
	       (WEXITSTATUS(status) > 2 && WEXITSTATUS(status) != VM_EXIT_SUSPENDED);
}

static int supervise_loop(struct supervisor *s)
{
	int status = -1, delay = 0;

	for (s->run = 1; !stop_wanted; s->run++) {
		status = run_once(s);
		if (status == -2)
			status = 0;
		if (status < 0)
			break;
		enum next n = decide(s, status, &delay);
		if (s->pending && n == NEXT_STOP && is_fault(status))
			report_early_fault(s, status);
		report(s, NULL);
		if (n == NEXT_STOP)
			break;
		if (n == NEXT_BACKOFF) {
			slog(s, "fault; restarting in %d second(s)", delay);
			backoff(delay);
			restart_wanted = 0;
			if (stop_wanted)
				break;
		}
		slog(s, "restarting");
		/* As in vm-bhyve, only the first boot is an install. */
		s->iso = NULL;
	}
	return exit_code(status);
}

/* ---- setup ---- */

int vm_guest_priority(const struct vm_guest *g, int *nice, char *err, size_t errlen)
{
	const char *v = rcconf_get(g->conf, "priority");
	char *end;
	long n;

	*nice = 0;
	if (!v || !*v)
		return 0;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || end == v || n < -20 || n > 20) {
		snprintf(err, errlen, "%s: priority=\"%s\": use a nice value from -20 to 20",
		         g->name, v);
		return -1;
	}
	*nice = (int)n;
	return 0;
}

static int setup(struct supervisor *s, struct vm_sys *sys, const char *name,
                 const struct vm_run_opts *o)
{
	char err[1024];

	memset(s, 0, sizeof(*s));
	s->sys = sys;
	s->o = o;
	s->iso = o->iso;
	s->lock_fd = -1;
	s->khyve_ready = -1;
	s->pending = true;
	s->ready_fd = o->ready_fd;
	/* Neither khyve nor the helpers may keep `vm start` waiting. */
	if (s->ready_fd >= 0)
		fcntl(s->ready_fd, F_SETFD, FD_CLOEXEC);
	if (vm_guest_find(sys, name, &s->g, err, sizeof(err)) < 0) {
		fatal(s, "%s", err);
		return -1;
	}
	if (vm_path(s->lock_path, s->g.dir, VM_RUN_LOCK) < 0 ||
	    vm_path(s->state_path, s->g.dir, VM_RUN_STATE) < 0 ||
	    vm_path(s->log_path, s->g.dir, VM_RUN_LOG) < 0) {
		fatal(s, "%s: path too long", s->g.dir);
		return -1;
	}
	if (vm_guest_priority(&s->g, &s->nice, err, sizeof(err)) < 0) {
		fatal(s, "%s", err);
		return -1;
	}
	/* A suspended guest: the first run resumes (`vm start -d` moved the
	 * file away to boot afresh). */
	s->receiving = o->receive != NULL;
	if (!s->receiving && vm_state_present(&s->g) && vm_state_path(&s->g, s->restore) < 0)
		s->restore[0] = '\0';
	return 0;
}

/* The guest's cgroup v2 (src/vm/cgroup.h), for every run of khyve. */
static void make_cgroup(struct supervisor *s)
{
	const char *mem = rcconf_get_default(s->g.conf, "memory", "256M");
	uint64_t bytes = 256ull << 20;

	/* A bad memory= stops khyvecmd.c later with its own message. */
	if (parse_memsize(mem, &bytes) < 0)
		bytes = 256ull << 20;
	vm_cgroup_create(s->g.name, bytes, s->nice, &s->cgroup);
	if (s->cgroup.path[0])
		slog(s, "cgroup %s [memory.max: %llu] [cpu.weight: %u]", s->cgroup.path,
		     (unsigned long long)s->cgroup.memory_max, s->cgroup.cpu_weight);
	if (s->cgroup.note[0])
		slog(s, "cgroup: %s", s->cgroup.note);
}

int vm_supervise(struct vm_sys *sys, const char *name, const struct vm_run_opts *o)
{
	struct supervisor s;
	int rc;

	stop_wanted = restart_wanted = 0;
	khyve_pid = 0;
	if (setup(&s, sys, name, o) < 0) {
		vm_guest_free(&s.g);
		return 1;
	}
	catch_requests(o->foreground);
	/* A receive takes the lock once the guest has moved (wait_received). */
	if (!s.receiving && take_lock(&s) < 0) {
		vm_guest_free(&s.g);
		return 1;
	}
	remove_stale_ptys(&s);
	make_cgroup(&s);
	s.started = time(NULL);
	s.start_ticks = vm_proc_start(getpid());
	write_state(&s, 0, 0);
	slog(&s,
	     "initialising [loader: %s] [cpu: %s] [memory: %s] [console: %s] [install media: %s]",
	     rcconf_get_default(s.g.conf, "loader", "-"), rcconf_get_default(s.g.conf, "cpu", "-"),
	     rcconf_get_default(s.g.conf, "memory", "-"), console_kind(&s), s.iso ? s.iso : "none");
	if (s.restore[0])
		slog(&s, "resuming from %s", s.restore);
	else if (s.receiving)
		slog(&s, "receiving a live migration on %s", o->receive);
	else
		slog(&s, "booting");
	rc = supervise_loop(&s);
	report(&s, NULL);
	slog(&s, "stopped");
	vm_cgroup_remove(&s.cgroup);
	drop_lock(&s);
	vm_guest_free(&s.g);
	return rc;
}
