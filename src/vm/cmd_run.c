/*
 * Commands that start and stop guests: start, install, stop, restart,
 * poweroff, reset, startall, stopall and the hidden `_run` (the supervisor,
 * supervisor.c), with vm-bhyve's options and output.
 *
 * `vm start NAME` checks the guest and builds its khyve command line once
 * (so config errors reach the terminal), then starts a detached supervisor
 * (`vm _run NAME`, output appended to DIR/vm-bhyve.log) and returns once
 * khyve runs.  With console="tmux" (vm set console=tmux) the supervisor
 * runs in a tmux session named after the guest instead; -f runs it in this
 * process with com1 on stdio.
 *
 * Settings in /etc/khyve.conf: vm_list and vm_delay (startall, and between
 * several guests given to start), vm_enable, vm_stop_timeout (khyve's:
 * how long stop and stopall wait, 60 s by default) and vm_stop_mode
 * (khyve's: "suspend" makes stopall suspend the guests and startall resume
 * them, suspend.h).  A Suspended guest's start resumes it (-d: boots afresh).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vm/commands.h"
#include "vm/migrate.h"
#include "vm/hostkvm.h"
#include "vm/khyvecmd.h"
#include "vm/paths.h"
#include "vm/state.h"
#include "vm/stopwait.h"
#include "vm/supervisor.h"
#include "vm/suspend.h"
#include "vm/util.h"

#define DEFAULT_DELAY        5             /* vm_delay: vm.8 says 5 (vm-core's code uses 2) */
#define DEFAULT_STOP_TIMEOUT 60            /* vm_stop_timeout, seconds */
#define POWEROFF_WAIT        10            /* seconds poweroff waits for the supervisor */
#define TMUX_START_WAIT      5             /* seconds start waits for a tmux-run guest */
#define LOG_ROTATE_SIZE      (1024 * 1024) /* as vm-bhyve's util::log_rotate */

/* How `vm start` runs the supervisor. */
enum start_mode {
	START_BACKGROUND,  /* detached; or in a detached tmux session when console=tmux */
	START_FOREGROUND,  /* -f: in this process, com1 on stdio */
	START_INTERACTIVE, /* -i: in an attached tmux session (console=tmux), else as -f */
};

struct start_args {
	enum start_mode mode;
	bool dry_run;      /* -n: print the khyve command only */
	const char *iso;   /* `vm install`: absolute path of the medium */
	bool skip_running; /* startall: a guest that runs already is fine */
	bool discard;      /* -d: a Suspended guest's saved state is set aside, it boots */
	bool cluster;      /* -H: started by the cluster (or forced): DIR/ha.resource is no bar,
	                    * and another host's run.lock that nobody holds is taken over */
};

/* ---- small helpers ---- */

/* A space-separated list (vm_list) as words; free with free_words(). */
static char **split_words(const char *list, size_t *n)
{
	char **v = calloc(strlen(list) / 2 + 2, sizeof(*v));
	size_t k = 0;

	if (!v)
		return NULL;
	for (const char *p = list; *p;) {
		size_t wl;
		p += strspn(p, " \t");
		wl = strcspn(p, " \t");
		if (!wl)
			break;
		if (!(v[k] = strndup(p, wl)))
			break;
		k++;
		p += wl;
	}
	*n = k;
	return v;
}

static void free_words(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* A whole number of seconds from khyve.conf; -1 with a message when malformed. */
static int conf_seconds(const struct vm_sys *sys, const char *key, int def)
{
	const char *v = rcconf_get(sys->conf, key);
	char *end;
	long n;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || n < 0 || n > 86400) {
		vm_error("%s: %s=\"%s\": use a number of seconds", sys->conf_path, key, v);
		return -1;
	}
	return (int)n;
}

/* vm-bhyve's util::yesno: "no", "false", "off" and "0" are no. */
static bool is_no(const char *v)
{
	return !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off") ||
	       !strcmp(v, "0");
}

static void sleep_seconds(int s)
{
	struct timespec t = {s, 0};

	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

static void sleep_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&t, NULL);
}

/* Commands that change guests need an initialised vm_dir and write access. */
static int require_write(struct vm_sys *sys, const char *command)
{
	char err[512];

	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	return vm_require_write(sys, command) < 0 ? 1 : 0;
}

/* Find `name` and read its state; 1 after a message when it is missing. */
static int find_guest(const struct vm_sys *sys, const char *name, struct vm_guest *g,
                      struct vm_status *st)
{
	char err[512];

	if (vm_guest_find(sys, name, g, err, sizeof(err)) < 0) {
		vm_guest_free(g);
		return vm_error("%s", err);
	}
	vm_status_get(sys, g, st);
	return 0;
}

/* 1 after a message unless `g` runs here. */
static int require_running(const struct vm_guest *g, const struct vm_status *st)
{
	if (st->state == VM_LOCKED)
		return vm_error("%s is locked by host %s, not running here", g->name, st->host);
	if (st->state != VM_RUNNING)
		return vm_error("%s is not running", g->name);
	return 0;
}

/* ---- start ---- */

/* vm-bhyve keeps its log under 1 MiB: the old one becomes vm-bhyve.log.0. */
static void rotate_log(const struct vm_guest *g)
{
	char log[PATH_MAX], old[PATH_MAX + 2];
	struct stat st;

	if (vm_path(log, g->dir, VM_RUN_LOG) < 0 || stat(log, &st) < 0 ||
	    st.st_size < LOG_ROTATE_SIZE)
		return;
	snprintf(old, sizeof(old), "%s.0", log);
	rename(log, old);
}

/* console="tmux" in $vm_dir/.config/system.conf (vm set console=tmux). */
static bool tmux_console(const struct vm_sys *sys)
{
	return strcmp(rcconf_get_default(sys->system, "console", ""), "tmux") == 0;
}

/* Is `prog` on $PATH? */
static bool on_path(const char *prog)
{
	char *copy = strdup(getenv("PATH") ? getenv("PATH") : ""), *save = NULL;
	bool found = false;

	for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !found;
	     dir = strtok_r(NULL, ":", &save)) {
		char p[PATH_MAX];
		found = vm_path(p, dir, prog) == 0 && access(p, X_OK) == 0;
	}
	free(copy);
	return found;
}

/* The command khyve would get (no taps yet), for -n and as a config check. */
static int build_command(const struct vm_sys *sys, const struct vm_guest *g,
                         const struct start_args *a, struct argv *out)
{
	struct vm_start_opts opts = {.install = a->iso != NULL,
	                             .iso = a->iso,
	                             .foreground =
	                                 a->mode != START_BACKGROUND || tmux_console(sys)};
	char err[1024], grub[PATH_MAX];

	/* loader=grub: the command names this run's GRUB CD, so make it (the
	 * supervisor makes a fresh one for each boot). */
	if (!strcmp(rcconf_get_default(g->conf, "loader", ""), "grub")) {
		if (vm_grub_image(sys, g, a->iso != NULL, a->iso, grub, err, sizeof(err)) < 0)
			return vm_error("%s", err);
		opts.grub_image = grub;
	}
	if (vm_khyve_command(sys, g, &opts, out, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	/* As the supervisor will run it (supervisor.c). */
	if (!a->discard && vm_state_present(g)) {
		char state[PATH_MAX];
		if (vm_state_path(g, state) < 0 || vm_argv_add_restore(out, state) < 0)
			return vm_error("%s: path too long or out of memory", g->name);
	}
	return 0;
}

/* The supervisor's log, when there, must be vm's own file (not a link to elsewhere). */
static int check_log(const struct vm_guest *g)
{
	char log[PATH_MAX];

	if (vm_path(log, g->dir, VM_RUN_LOG) < 0)
		return vm_error("%s: path too long", g->dir);
	if (vm_own_file_ok(log) < 0)
		return vm_error("%s: %s", log, vm_open_own_strerror(errno));
	return 0;
}

/* The cluster resource named in DIR/ha.resource, or "" when the file is absent. */
static void ha_resource(const struct vm_guest *g, char *out, size_t len)
{
	char path[PATH_MAX];
	ssize_t n = -1;
	int fd;

	out[0] = '\0';
	if (vm_path(path, g->dir, VM_HA_MARK) < 0 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
		return;
	n = read(fd, out, len - 1);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	for (char *p = out; *p; p++)
		if (!isprint((unsigned char)*p))
			*p = '?';
	if (!out[0])
		snprintf(out, len, "?");
}

/*
 * A guest Pacemaker manages is started by its resource agent (vm start -H),
 * not by hand: two starters would fight.  With -H, another host's run.lock
 * is a bar only while someone holds its lock (on shared storage that honours
 * OFD locks, the other host still runs it); a lock nobody holds is the
 * remains of a host that was fenced, and is taken over in start_one().
 */
static int check_cluster(const struct vm_guest *g, const struct vm_status *st,
                         const struct start_args *a)
{
	char res[128];

	if (!a->cluster) {
		ha_resource(g, res, sizeof(res));
		if (res[0])
			return vm_error("%s is managed by Pacemaker (resource %s, %s/%s): use pcs "
			                "resource enable %s, or vm start -H %s to start it anyway",
			                g->name, res, g->dir, VM_HA_MARK, res, g->name);
		return 0;
	}
	if (st->state == VM_LOCKED && st->held)
		return vm_error("%s runs on %s: %s/%s is locked there", g->name, st->host, g->dir,
		                VM_RUN_LOCK);
	return 0;
}

/* -H: remove another host's run.lock that nobody holds (check_cluster()). */
static int take_over_lock(const struct vm_guest *g, const struct vm_status *st,
                          const struct start_args *a)
{
	char path[PATH_MAX];

	if (!a->cluster || st->state != VM_LOCKED)
		return 0;
	if (vm_path(path, g->dir, VM_RUN_LOCK) < 0 || (unlink(path) < 0 && errno != ENOENT))
		return vm_error("%s: cannot remove the stale lock: %s", path, strerror(errno));
	printf("  * %s names host %s but nobody holds it: taken over\n", VM_RUN_LOCK, st->host);
	return 0;
}

/* Everything `vm start` can check before the guest goes to the background. */
static int check_startable(const struct vm_sys *sys, const struct vm_guest *g,
                           const struct vm_status *st, const struct start_args *a)
{
	struct argv cmd = {0};
	char err[512];
	int nice, rc;

	if (st->state == VM_RUNNING)
		return vm_error("%s is already running", g->name);
	if (check_cluster(g, st, a) != 0)
		return 1;
	if (st->state == VM_LOCKED && !a->cluster)
		return vm_error(
		    "%s appears to be running on %s (locked; remove %s/%s if it is not)", g->name,
		    st->host, g->dir, VM_RUN_LOCK);
	if (st->state == VM_SUSPENDED && a->iso && !a->discard)
		return vm_error("%s is suspended: vm start %s resumes it, vm start -d %s discards "
		                "its saved state (then it can be installed)",
		                g->name, g->name, g->name);
	if (vm_guest_priority(g, &nice, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (a->mode != START_FOREGROUND && tmux_console(sys) && !on_path("tmux"))
		return vm_error("console=tmux is set but tmux is not installed");
	if (!sys->self[0])
		return vm_error("cannot find the vm binary (/proc/self/exe)");
	if (check_log(g) != 0)
		return 1;
	rc = build_command(sys, g, a, &cmd);
	argv_free(&cmd);
	return rc != 0 ? rc : vm_check_host_kvm(g);
}

/* The supervisor's arguments: SELF _run [-t] [-R FD] [-I ISO] [-M ADDR] NAME. */
static int supervisor_argv(const struct vm_sys *sys, const struct vm_guest *g, const char *iso,
                           bool tmux, int ready_fd, const char *receive, struct argv *a)
{
	int rc = argv_add(a, sys->self) | argv_add(a, "_run");

	if (receive)
		rc |= argv_add(a, "-M") | argv_add(a, receive);

	if (tmux)
		rc |= argv_add(a, "-t");
	if (ready_fd >= 0)
		rc |= argv_add(a, "-R") | argv_addf(a, "%d", ready_fd);
	if (iso)
		rc |= argv_add(a, "-I") | argv_add(a, iso);
	return rc | argv_add(a, g->name);
}

/* In the forked child: detach (new session, parent gone) and exec `_run`. */
static void __attribute__((noreturn))
exec_detached(const struct vm_sys *sys, const struct vm_guest *g, const char *iso, int ready_fd,
              const char *receive)
{
	struct argv a = {0};
	char log[PATH_MAX];
	int null, out;

	setsid();
	/* Fork again so the supervisor is nobody's child but init's. */
	if (fork() != 0)
		_exit(0);
	null = open("/dev/null", O_RDONLY);
	if (vm_path(log, g->dir, VM_RUN_LOG) < 0 || null < 0 ||
	    (out = vm_open_own(log, O_WRONLY | O_APPEND | O_CREAT, 0644)) < 0)
		_exit(1);
	if (dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 ||
	    fcntl(ready_fd, F_SETFD, 0) < 0)
		_exit(1);
	/* Nothing else of the caller's (a pipe of a shell's $(...), a
	 * terminal) may stay open in the supervisor and in khyve. */
	close_range(3, (unsigned)ready_fd - 1, 0);
	close_range((unsigned)ready_fd + 1, ~0u, 0);
	if (supervisor_argv(sys, g, iso, false, ready_fd, receive, &a) == 0)
		execv(a.v[0], a.v);
	fprintf(stderr, "vm: cannot run %s _run: %s\n", sys->self, strerror(errno));
	_exit(1);
}

/* Read the supervisor's one-line report: "ok" or "error MESSAGE". */
static int read_report(int fd, const struct vm_guest *g)
{
	char buf[1200];
	size_t len = 0;
	ssize_t n;

	while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
		if (memchr(buf, '\n', len))
			break;
	}
	buf[len] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (!strcmp(buf, "ok"))
		return 0;
	if (!strncmp(buf, "error ", 6))
		return vm_error("%s", buf + 6);
	return vm_error("%s: the supervisor ended at once; see %s/%s", g->name, g->dir, VM_RUN_LOG);
}

/* Fork the detached supervisor; the read end of its report pipe, or -1. */
static int fork_supervisor(const struct vm_sys *sys, const struct vm_guest *g, const char *iso,
                           const char *receive)
{
	int pfd[2];
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return vm_error("pipe: %s", strerror(errno)), -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		exec_detached(sys, g, iso, pfd[1], receive);
	}
	close(pfd[1]);
	if (pid < 0) {
		close(pfd[0]);
		return vm_error("fork: %s", strerror(errno)), -1;
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return pfd[0];
}

int vm_launch_receiver(const struct vm_sys *sys, const struct vm_guest *g, const char *addr)
{
	return fork_supervisor(sys, g, NULL, addr);
}

/* Start the detached supervisor; return once it reports that khyve runs. */
static int launch_background(const struct vm_sys *sys, const struct vm_guest *g, const char *iso)
{
	int fd = fork_supervisor(sys, g, iso, NULL), rc;

	if (fd < 0)
		return 1;
	rc = read_report(fd, g);
	close(fd);
	return rc;
}

/* Run argv and wait; its exit status, or -1 when it could not run. */
static int run_wait(char *const argv[], bool quiet)
{
	int st;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		if (quiet) {
			int null = open("/dev/null", O_RDWR);
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * console="tmux": the supervisor runs in tmux session NAME (dots become
 * '~', as vm-bhyve names it), attached with -i.  tmux's server may have an
 * older environment, so KHYVE_CONF and KHYVE are passed explicitly.
 */
static int launch_tmux(const struct vm_sys *sys, const struct vm_guest *g, const char *iso,
                       bool attach)
{
	struct argv a = {0};
	char session[VM_NAME_MAX + 1];
	int rc;

	snprintf(session, sizeof(session), "%s", g->name);
	for (char *p = session; *p; p++)
		if (*p == '.')
			*p = '~';
	rc = argv_add(&a, "tmux") | argv_add(&a, "new-session");
	if (!attach)
		rc |= argv_add(&a, "-d");
	rc |= argv_add(&a, "-s") | argv_add(&a, session) | argv_add(&a, "/usr/bin/env") |
	      argv_addf(&a, "KHYVE_CONF=%s", sys->conf_path) |
	      argv_addf(&a, "KHYVE=%s", sys->khyve);
	if (rc || supervisor_argv(sys, g, iso, true, -1, NULL, &a)) {
		argv_free(&a);
		return vm_error("out of memory");
	}
	rc = run_wait(a.v, !attach);
	argv_free(&a);
	if (attach)
		return 0;
	if (rc != 0)
		return vm_error("%s: tmux new-session -s %s failed (is that session taken?)",
		                g->name, session);
	for (int i = 0; i < TMUX_START_WAIT * 10 && !vm_still_running(sys, g->name); i++)
		sleep_ms(100);
	if (!vm_still_running(sys, g->name))
		return vm_error("%s did not start; see %s/%s", g->name, g->dir, VM_RUN_LOG);
	return 0;
}

/* -f: be the supervisor; a guest that powers off or halts is a success. */
static int run_foreground(struct vm_sys *sys, const struct vm_guest *g, const char *iso)
{
	struct vm_run_opts o = {.foreground = true, .iso = iso, .ready_fd = -1};
	int rc = vm_supervise(sys, g->name, &o);

	return rc == 1 || rc == 2 || rc == VM_EXIT_SUSPENDED ? 0 : rc;
}

static int launch(struct vm_sys *sys, const struct vm_guest *g, const struct start_args *a)
{
	rotate_log(g);
	if (a->mode == START_FOREGROUND || (a->mode == START_INTERACTIVE && !tmux_console(sys)))
		return run_foreground(sys, g, a->iso);
	if (tmux_console(sys))
		return launch_tmux(sys, g, a->iso, a->mode == START_INTERACTIVE);
	return launch_background(sys, g, a->iso);
}

/* -n: print the khyve command line. */
static int print_command(const struct vm_sys *sys, const struct vm_guest *g,
                         const struct start_args *a)
{
	struct argv cmd = {0};
	char *line;

	if (build_command(sys, g, a, &cmd)) {
		argv_free(&cmd);
		return 1;
	}
	line = argv_to_shell(&cmd);
	argv_free(&cmd);
	if (!line)
		return vm_error("out of memory");
	printf("%s\n", line);
	free(line);
	return 0;
}

/* -d of a Suspended guest: its saved state goes to NAME.state.discarded. */
static int set_aside_state(const struct vm_guest *g, const struct vm_status *st,
                           const struct start_args *a)
{
	char err[PATH_MAX + 128];

	if (st->state != VM_SUSPENDED || !a->discard)
		return 0;
	if (vm_state_discard(g, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	printf("  * discarded the saved state of %s (kept as %s%s)\n", g->name, g->name,
	       VM_DISCARDED_SUFFIX);
	return 0;
}

/* Start one guest; *launched tells whether a supervisor was started. */
static int start_one(struct vm_sys *sys, const char *name, const struct start_args *a,
                     bool *launched)
{
	struct vm_guest g;
	struct vm_status st;
	int rc;

	*launched = false;
	if (find_guest(sys, name, &g, &st))
		return 1;
	if (a->dry_run) {
		rc = print_command(sys, &g, a);
	} else if (a->skip_running && st.state == VM_RUNNING) {
		printf("%s is already running\n", g.name);
		rc = 0;
	} else if ((rc = check_startable(sys, &g, &st, a)) == 0) {
		printf("Starting %s\n  * found guest in %s\n", g.name, g.dir);
		if ((rc = take_over_lock(&g, &st, a)) != 0 ||
		    (rc = set_aside_state(&g, &st, a)) != 0) {
			vm_guest_free(&g);
			return rc;
		}
		vm_note_host_kvm(stdout);
		if (st.state == VM_SUSPENDED && !a->discard)
			printf("  * resuming from %s%s...\n", g.name, VM_STATE_SUFFIX);
		else
			printf("  * booting...\n");
		fflush(stdout);
		rc = launch(sys, &g, a);
		*launched = true;
	}
	vm_guest_free(&g);
	return rc;
}

/* Start guests in order, vm_delay seconds apart, as vm-bhyve's core::start. */
static int start_many(struct vm_sys *sys, char **names, size_t n, const struct start_args *a)
{
	int delay = conf_seconds(sys, "vm_delay", DEFAULT_DELAY), rc = 0;
	bool waiting = false;

	if (delay < 0)
		return 1;
	for (size_t i = 0; i < n; i++) {
		bool launched;
		if (waiting && delay > 0) {
			printf("Waiting %d second(s)\n", delay);
			fflush(stdout);
			sleep_seconds(delay);
		}
		if (start_one(sys, names[i], a, &launched))
			rc = 1;
		waiting = launched;
	}
	return rc;
}

/* Options of start and install: -f foreground, -i interactive, -n dry run,
 * -d discard a suspended guest's saved state, -H started by the cluster. */
static int parse_start_opts(int argc, char **argv, struct start_args *a)
{
	bool fg = false, inter = false;
	int c;

	optind = 0;
	while ((c = getopt(argc, argv, "+fdinH")) != -1) {
		switch (c) {
		case 'H':
			a->cluster = true;
			break;
		case 'f':
			fg = true;
			break;
		case 'd':
			a->discard = true;
			break;
		case 'i':
			inter = true;
			break;
		case 'n':
			a->dry_run = true;
			break;
		default:
			return -1;
		}
	}
	if (fg && inter) {
		vm_error("foreground and interactive mode are mutually exclusive");
		return -2;
	}
	a->mode = fg ? START_FOREGROUND : inter ? START_INTERACTIVE : START_BACKGROUND;
	return 0;
}

/* A dry run only reads; starting needs write access. */
static int check_access(struct vm_sys *sys, bool dry_run, const char *command)
{
	char err[512];

	if (!dry_run)
		return require_write(sys, command);
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	return 0;
}

int cmd_start(struct vm_sys *sys, int argc, char **argv)
{
	struct start_args a = {0};
	int rc = parse_start_opts(argc, argv, &a);

	if (rc == -2)
		return 1;
	if (rc < 0 || optind >= argc)
		return vm_error("usage: vm start [-f|-i] [-d] [-n] [-H] name...");
	if (check_access(sys, a.dry_run, "start"))
		return 1;
	/* As vm-bhyve: several guests always start in the background. */
	if (argc - optind > 1)
		a.mode = START_BACKGROUND;
	return start_many(sys, argv + optind, (size_t)(argc - optind), &a);
}

/*
 * `file` in the ISO store `dir`: 0 with `out`, -1 when it is not there, 1
 * after a message when it is there but leads outside the store (a
 * symbolic link, `..`): a store's names stay in the store.
 */
static int iso_in_store(const char *dir, const char *file, char *out)
{
	char why[2 * PATH_MAX];

	if (vm_path(out, dir, file) < 0 || access(out, R_OK) != 0)
		return -1;
	if (vm_path_confine(dir, file, out, why, sizeof(why)) == 0)
		return 0;
	return vm_error("iso %s in %s: %s", file, dir, why);
}

/*
 * vm-bhyve's datastore::iso_find: a path, a file here (both typed by the
 * user, so taken as given), in .iso, in an iso store.  0, -1 when not
 * found, 1 after a message.
 */
static int find_iso(const struct vm_sys *sys, const char *file, char *out)
{
	char cwd[PATH_MAX], dir[PATH_MAX];
	int rc;

	if (file[0] == '/')
		return access(file, R_OK) == 0 && snprintf(out, PATH_MAX, "%s", file) < PATH_MAX
		           ? 0
		           : -1;
	if (getcwd(cwd, sizeof(cwd)) && vm_path(out, cwd, file) == 0 && access(out, R_OK) == 0)
		return 0;
	if (vm_path(dir, sys->vm_dir, ".iso") == 0 && (rc = iso_in_store(dir, file, out)) >= 0)
		return rc;
	for (size_t i = 1; i < vm_datastore_count(sys); i++) {
		char key[VM_NAME_MAX + 8];
		const char *ds = vm_datastore_name(sys, i), *spec;
		snprintf(key, sizeof(key), "path_%s", ds ? ds : "");
		spec = rcconf_get(sys->system, key);
		if (spec && !strncmp(spec, "iso:", 4) &&
		    (rc = iso_in_store(spec + 4, file, out)) >= 0)
			return rc;
	}
	return -1;
}

int cmd_install(struct vm_sys *sys, int argc, char **argv)
{
	struct start_args a = {0};
	char iso[PATH_MAX];
	int rc = parse_start_opts(argc, argv, &a);

	if (rc == -2)
		return 1;
	if (rc < 0 || argc - optind != 2)
		return vm_error("usage: vm install [-f|-i] [-d] [-n] name iso");
	if (check_access(sys, a.dry_run, "install"))
		return 1;
	if ((rc = find_iso(sys, argv[optind + 1], iso)) < 0)
		return vm_error("unable to locate iso file - '%s'", argv[optind + 1]);
	if (rc > 0)
		return 1;
	a.iso = iso;
	return start_many(sys, argv + optind, 1, &a);
}

/* ---- stop, restart, poweroff, reset ---- */

/* Send `r` to each running guest in names; `say` (may be NULL) for each reached. */
static int request_each(const struct vm_sys *sys, char **names, size_t n, enum vm_request r,
                        const char *say)
{
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		struct vm_guest g;
		struct vm_status st;
		char err[512];

		if (find_guest(sys, names[i], &g, &st)) {
			rc = 1;
			continue;
		}
		if (require_running(&g, &st)) {
			rc = 1;
		} else if (vm_request_send(&st, r, err, sizeof(err)) < 0) {
			rc = vm_error("%s: %s", g.name, err);
		} else {
			if (say)
				printf(say, g.name);
		}
		vm_guest_free(&g);
	}
	fflush(stdout);
	return rc;
}

/* Press the power button of each guest in `names` and wait for them. */
static int stop_and_wait(const struct vm_sys *sys, char **names, size_t n)
{
	int timeout = conf_seconds(sys, "vm_stop_timeout", DEFAULT_STOP_TIMEOUT), rc;
	struct vm_stop_watch *watch;

	if (timeout < 0)
		return 1;
	if (!(watch = vm_stop_watch_begin(sys, names, n)))
		return vm_error("out of memory");
	rc = request_each(sys, names, n, VM_REQ_STOP, "Sending ACPI shutdown to %s\n");
	rc |= vm_stop_wait(sys, watch, n, timeout, " (vm poweroff forces it off)");
	free(watch);
	return rc;
}

int cmd_stop(struct vm_sys *sys, int argc, char **argv)
{
	if (argc < 2)
		return vm_error("usage: vm stop name...");
	if (require_write(sys, "stop"))
		return 1;
	return stop_and_wait(sys, argv + 1, (size_t)argc - 1);
}

/* Stop, then start: the guest boots with its current configuration. */
int cmd_restart(struct vm_sys *sys, int argc, char **argv)
{
	struct start_args a = {.mode = START_BACKGROUND};

	if (argc != 2)
		return vm_error("usage: vm restart name");
	if (require_write(sys, "restart") || stop_and_wait(sys, argv + 1, 1))
		return 1;
	return start_many(sys, argv + 1, 1, &a);
}

/* poweroff and reset: -f skips vm-bhyve's "Are you sure" question. */
static int hard_request(struct vm_sys *sys, int argc, char **argv, enum vm_request r,
                        const char *what)
{
	bool force = false;
	char question[128];
	char *name;
	int c, rc;

	optind = 0;
	while ((c = getopt(argc, argv, "+f")) != -1) {
		if (c != 'f')
			return vm_error("usage: vm %s [-f] name", argv[0]);
		force = true;
	}
	if (argc - optind != 1)
		return vm_error("usage: vm %s [-f] name", argv[0]);
	if (require_write(sys, argv[0]))
		return 1;
	name = argv[optind];
	if (!vm_still_running(sys, name))
		return request_each(sys, &name, 1, r, NULL);
	snprintf(question, sizeof(question),
	         "Are you sure you want to forcefully %s this virtual machine", what);
	if (!force && (c = vm_confirm(question, argv[0])) <= 0)
		return c < 0;
	rc = request_each(sys, &name, 1, r, NULL);
	if (rc == 0 && r == VM_REQ_POWEROFF) {
		struct vm_stop_watch *watch = vm_stop_watch_begin(sys, &name, 1);

		if (!watch)
			return vm_error("out of memory");
		rc = vm_stop_wait(sys, watch, 1, POWEROFF_WAIT, "");
		free(watch);
	}
	return rc;
}

int cmd_poweroff(struct vm_sys *sys, int argc, char **argv)
{
	return hard_request(sys, argc, argv, VM_REQ_POWEROFF, "poweroff");
}

int cmd_reset(struct vm_sys *sys, int argc, char **argv)
{
	return hard_request(sys, argc, argv, VM_REQ_RESET, "reset");
}

/* ---- startall, stopall ---- */

struct name_list {
	const struct vm_sys *sys;
	char ***names;
	size_t *n;
};

static bool listed(char **names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

static int add_if_suspended(struct vm_guest *g, void *arg)
{
	struct name_list *l = arg;
	struct vm_status st;
	char **v;

	vm_status_get(l->sys, g, &st);
	if (st.state != VM_SUSPENDED || listed(*l->names, *l->n, g->name))
		return 0;
	if (!(v = realloc(*l->names, (*l->n + 1) * sizeof(*v))))
		return -1;
	*l->names = v;
	if (!(v[*l->n] = strdup(g->name)))
		return -1;
	(*l->n)++;
	return 0;
}

/* Append the Suspended guests that `names` (vm_list's) lacks; 0 or -1. */
static int add_suspended(const struct vm_sys *sys, char ***names, size_t *n)
{
	struct name_list l = {sys, names, n};

	return vm_guest_foreach(sys, add_if_suspended, &l) != 0 ? -1 : 0;
}

int cmd_startall(struct vm_sys *sys, int argc, char **argv)
{
	struct start_args a = {.mode = START_BACKGROUND, .skip_running = true};
	const char *enable = rcconf_get(sys->conf, "vm_enable");
	enum vm_stop_mode mode;
	char **names;
	size_t n;
	int rc;

	(void)argv;
	if (argc != 1)
		return vm_error("usage: vm startall");
	if (enable && is_no(enable)) {
		printf("vm_enable=\"%s\" in %s: not starting any guest\n", enable, sys->conf_path);
		return 0;
	}
	if (require_write(sys, "startall"))
		return 1;
	if (vm_stop_mode_get(sys, &mode))
		return 1;
	names = split_words(rcconf_get_default(sys->conf, "vm_list", ""), &n);
	if (!names)
		return vm_error("out of memory");
	/* stopall suspended every running guest: resume those outside vm_list too. */
	if (mode == VM_STOP_SUSPEND && add_suspended(sys, &names, &n) < 0) {
		free_words(names, n);
		return vm_error("out of memory");
	}
	rc = start_many(sys, names, n, &a);
	free_words(names, n);
	return rc;
}

struct running_set {
	const struct vm_sys *sys;
	char **names;
	size_t n, cap;
};

static int collect_running(struct vm_guest *g, void *arg)
{
	struct running_set *r = arg;
	struct vm_status st;

	vm_status_get(r->sys, g, &st);
	if (st.state != VM_RUNNING)
		return 0;
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		char **v = realloc(r->names, cap * sizeof(*v));
		if (!v)
			return -1;
		r->names = v;
		r->cap = cap;
	}
	if (!(r->names[r->n] = strdup(g->name)))
		return -1;
	r->n++;
	return 0;
}

/*
 * Move `name` behind the first run->n names (those stopped in parallel):
 * it is stopped in order.  The name, or NULL when it does not run.
 */
static char *take_running(struct running_set *r, const char *name)
{
	for (size_t i = 0; i < r->n; i++) {
		char *t = r->names[i];
		if (strcmp(t, name) != 0)
			continue;
		r->names[i] = r->names[--r->n];
		r->names[r->n] = t;
		return t;
	}
	return NULL;
}

/* vm_list in reverse, only those running: the ordered part of stopall. */
static size_t ordered_stops(const struct vm_sys *sys, struct running_set *run, char **out)
{
	size_t n, k = 0;
	char **list = split_words(rcconf_get_default(sys->conf, "vm_list", ""), &n);

	for (size_t i = n; list && i-- > 0;)
		if ((out[k] = take_running(run, list[i])))
			k++;
	free_words(list, n);
	return k;
}

/*
 * vm_stop_mode="suspend": suspend each guest in turn (each is saved before
 * the next begins, so the order holds without vm_delay); one whose suspend
 * fails gets the power button instead, said here and in its log.
 */
static void suspend_each(const struct vm_sys *sys, char **names, size_t n, const char *say)
{
	for (size_t i = 0; i < n; i++) {
		struct vm_guest g;
		struct vm_status st;
		char err[1200];

		if (find_guest(sys, names[i], &g, &st))
			continue;
		if (st.state == VM_RUNNING) {
			if (say)
				printf(say, g.name);
			fflush(stdout);
			if (vm_suspend_request(sys, &g, err, sizeof(err)) < 0) {
				vm_warn("%s: cannot suspend (%s); pressing its ACPI power button "
				        "instead",
				        g.name, err);
				vm_guest_log(
				    &g,
				    "stopall: cannot suspend (%s); pressing the ACPI power "
				    "button instead",
				    err);
				request_each(sys, &names[i], 1, VM_REQ_STOP, NULL);
			}
		}
		vm_guest_free(&g);
	}
}

static void stop_parallel(const struct vm_sys *sys, const struct running_set *run,
                          enum vm_stop_mode mode)
{
	if (!run->n)
		return;
	printf("  * %s of non-ordered guests:",
	       mode == VM_STOP_SUSPEND ? "suspend" : "parallel shutdown");
	for (size_t i = 0; i < run->n; i++)
		printf(" %s", run->names[i]);
	printf("\n");
	if (mode == VM_STOP_SUSPEND)
		suspend_each(sys, run->names, run->n, NULL);
	else
		request_each(sys, run->names, run->n, VM_REQ_STOP, NULL);
}

static void stop_ordered(const struct vm_sys *sys, char **names, size_t n, int delay,
                         enum vm_stop_mode mode)
{
	if (mode == VM_STOP_SUSPEND) {
		suspend_each(sys, names, n, "  * suspending %s\n");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (i && delay > 0) {
			printf("  * waiting %d second(s)\n", delay);
			fflush(stdout);
			sleep_seconds(delay);
		}
		request_each(sys, &names[i], 1, VM_REQ_STOP, "  * stopping %s\n");
	}
}

/* Stop every guest in `run` (stopall), then wait for all of them. */
static int stop_all(const struct vm_sys *sys, struct running_set *run, bool force, int delay,
                    int timeout, enum vm_stop_mode mode)
{
	size_t total = run->n, nord = 0;
	char **ordered = calloc(total, sizeof(*ordered));
	struct vm_stop_watch *watch = NULL;
	int rc;

	if (!ordered || !(watch = vm_stop_watch_begin(sys, run->names, total))) {
		free(ordered);
		return vm_error("out of memory");
	}
	if (!force)
		nord = ordered_stops(sys, run, ordered);
	printf("Beginning shutdown process\n");
	stop_parallel(sys, run, mode);
	stop_ordered(sys, ordered, nord, delay, mode);
	rc = vm_stop_wait(sys, watch, total, timeout, " (vm poweroff forces it off)");
	free(watch);
	free(ordered);
	run->n = total;
	return rc;
}

/*
 * As vm-bhyve's core::stopall: guests outside vm_list first, all at once,
 * then vm_list's in reverse order vm_delay apart (-f: everything at once);
 * then wait for all of them.
 */
int cmd_stopall(struct vm_sys *sys, int argc, char **argv)
{
	struct running_set run = {.sys = sys};
	int delay = conf_seconds(sys, "vm_delay", DEFAULT_DELAY);
	int timeout = conf_seconds(sys, "vm_stop_timeout", DEFAULT_STOP_TIMEOUT), c, rc;
	bool force = false;
	enum vm_stop_mode mode;

	optind = 0;
	while ((c = getopt(argc, argv, "+f")) != -1) {
		if (c != 'f')
			return vm_error("usage: vm stopall [-f]");
		force = true;
	}
	if (optind != argc)
		return vm_error("usage: vm stopall [-f]");
	if (delay < 0 || timeout < 0 || vm_stop_mode_get(sys, &mode) ||
	    require_write(sys, "stopall"))
		return 1;
	if (vm_guest_foreach(sys, collect_running, &run) != 0)
		rc = vm_error("out of memory");
	else
		rc = run.n ? stop_all(sys, &run, force, delay, timeout, mode) : 0;
	free_words(run.names, run.n);
	return rc;
}

/* ---- _run ---- */

/* vm _run [-f|-t] [-R FD] [-I ISO] [-M ADDR] NAME: the supervisor (supervisor.h). */
int cmd_run_supervisor(struct vm_sys *sys, int argc, char **argv)
{
	struct vm_run_opts o = {.ready_fd = -1};
	char *end;
	int c;

	optind = 0;
	while ((c = getopt(argc, argv, "+ftR:I:M:")) != -1) {
		switch (c) {
		case 'M':
			o.receive = optarg;
			break; /* vm migrate -l's target (migrate.h) */
		case 't':
			o.tmux = o.foreground = true;
			break; /* com1 on tmux's terminal */
		case 'f':
			o.foreground = true;
			break;
		case 'I':
			o.iso = optarg;
			break;
		case 'R':
			o.ready_fd = (int)strtol(optarg, &end, 10);
			if (*end || o.ready_fd < 3)
				return vm_error("_run: -R %s: not a descriptor", optarg);
			break;
		default:
			return vm_error("usage: vm _run [-f|-t] [-R fd] [-I iso] name");
		}
	}
	if (argc - optind != 1)
		return vm_error("usage: vm _run [-f|-t] [-R fd] [-I iso] name");
	/* As vm-bhyve: a background supervisor keeps no directory busy. */
	if (!o.foreground && chdir("/") < 0)
		return vm_error("chdir /: %s", strerror(errno));
	return vm_supervise(sys, argv[optind], &o);
}
