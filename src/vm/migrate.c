/*
 * vm migrate (migrate.h): the source's side, cmd_migrate(), and the
 * hidden commands ssh runs on the target.
 */
#include "vm/migrate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/file.h"
#include "vm/khyvecmd.h"
#include "vm/live.h"
#include "vm/paths.h"
#include "vm/state.h"
#include "vm/supervisor.h"
#include "vm/switch.h"
#include "vm/util.h"

#define READY_WAIT_MS   60000 /* the target builds the machine, then listens */
#define RESULT_WAIT_MS  30000 /* the target's word after khyvectl returned */
#define STOP_WAIT_MS    10000 /* the source's supervisor stops after khyve's exit 0 */
#define FORWARD_WAIT_MS 5000  /* ssh's local end of the forward appears */
#define SOCKET_MAX      107

/* ---- shared helpers ---- */

/* $KHYVE_SSH, else migrate_ssh in khyve.conf, else "ssh". */
static const char *ssh_program(const struct vm_sys *sys)
{
	const char *e = getenv("KHYVE_SSH");

	if (e && *e)
		return e;
	return rcconf_get_default(sys->conf, "migrate_ssh", "ssh");
}

/* A host name, user@host or address for ssh: never an option, no spaces. */
static bool host_valid(const char *h)
{
	if (!*h || *h == '-' || strlen(h) > 255)
		return false;
	for (const char *p = h; *p; p++)
		if (!strchr(
		        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_@:[]%",
		        *p))
			return false;
	return true;
}

/*
 * SSH [-L LOCAL:REMOTE ...] -- HOST 'vm WORDS...' into `a`: the remote
 * shell splits the one command word, so it is quoted here.
 */
static int ssh_argv(const struct vm_sys *sys, const char *host, const char *forward,
                    const char *const *words, struct argv *a)
{
	struct argv remote = {0};
	char *line;
	int rc = argv_add(&remote, "vm");

	for (size_t i = 0; words[i]; i++)
		rc |= argv_add(&remote, words[i]);
	line = rc == 0 ? argv_to_shell(&remote) : NULL;
	argv_free(&remote);
	if (!line)
		return -1;
	rc = argv_add(a, ssh_program(sys)) | argv_add(a, "-o") | argv_add(a, "BatchMode=yes");
	if (forward)
		rc |= argv_add(a, "-o") | argv_add(a, "ExitOnForwardFailure=yes") |
		      argv_add(a, "-o") | argv_add(a, "StreamLocalBindUnlink=yes") |
		      argv_add(a, "-L") | argv_add(a, forward);
	rc |= argv_add(a, "--") | argv_add(a, host) | argv_add(a, line);
	free(line);
	return rc;
}

/* "HOST: vm: why" (vm_tool_run's line about the remote vm) as "why". */
static const char *remote_why(const char *host, const char *err)
{
	size_t hl = strlen(host);

	if (!strncmp(err, host, hl) && !strncmp(err + hl, ": ", 2))
		err += hl + 2;
	if (!strncmp(err, "vm: ", 4))
		err += 4;
	return err;
}

/* Run `vm WORDS` on `host`; its stdout in *out (malloc'd). 0, or -1 with `err`. */
static int run_remote(const struct vm_sys *sys, const char *host, const char *const *words,
                      char **out, char *err, size_t errlen)
{
	struct argv a = {0};
	char why[1024];
	int rc;

	if (ssh_argv(sys, host, NULL, words, &a) < 0) {
		argv_free(&a);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = vm_tool_run(
	    &(struct vm_tool){.argv = (const char *const *)a.v, .out = out, .what = host}, why,
	    sizeof(why));
	argv_free(&a);
	if (rc < 0)
		snprintf(err, errlen, "%s", remote_why(host, why));
	return rc;
}

/* The switches the guest's NICs are on, space-separated, into `words` from `i`. */
static size_t guest_switches(const struct vm_guest *g, const char **words, size_t i, size_t max)
{
	for (unsigned n = 0; n < VM_MAX_NICS && i < max; n++) {
		char key[32];
		const char *sw;

		snprintf(key, sizeof(key), "network%u_switch", n);
		sw = rcconf_get(g->conf, key);
		if (sw && *sw)
			words[i++] = sw;
	}
	return i;
}

/* ---- the checks (source: ask; target: _migrate-check) ---- */

struct token {
	char value[37];
	char path[PATH_MAX];
};

/* DIR/.khyve-migrate-UUID holding UUID: what the target must see. */
static int token_write(const struct vm_guest *g, struct token *t)
{
	int fd;

	vm_uuid(t->value);
	if (snprintf(t->path, sizeof(t->path), "%s/%s%s", g->dir, VM_MIGRATE_TOKEN, t->value) >=
	    (int)sizeof(t->path))
		return vm_error("%s: path too long", g->dir);
	fd = vm_open_own(t->path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || write(fd, t->value, strlen(t->value)) != (ssize_t)strlen(t->value)) {
		int e = errno;
		if (fd >= 0) {
			close(fd);
			unlink(t->path);
		}
		return vm_error("%s: %s", t->path, strerror(e));
	}
	close(fd);
	return 0;
}

/*
 * Ask `host` whether `g` can go there (migrate.h).  1 when its folder is
 * shared (the target sees it), 0 when it must be copied, -1 after the
 * one-line error.
 */
static int ask_target(const struct vm_sys *sys, const struct vm_guest *g, const char *host,
                      bool cold, pid_t supervisor)
{
	const char *words[VM_MAX_NICS + 16];
	char me[256], pid[16], err[1100];
	struct token t;
	char *out = NULL;
	size_t n = 0;
	int rc;

	if (token_write(g, &t))
		return -1;
	vm_hostname(me, sizeof(me));
	snprintf(pid, sizeof(pid), "%d", (int)supervisor);
	words[n++] = "_migrate-check";
	if (cold)
		words[n++] = "-c";
	words[n++] = g->name;
	words[n++] = sys->vm_dir;
	words[n++] = g->dir;
	words[n++] = t.value;
	words[n++] = me[0] ? me : "-";
	words[n++] = pid;
	n = guest_switches(g, words, n, VM_MAX_NICS + 15);
	words[n] = NULL;
	rc = run_remote(sys, host, words, &out, err, sizeof(err));
	unlink(t.path);
	if (rc < 0) {
		free(out);
		vm_error("%s: cannot migrate to %s: %s", g->name, host, err);
		return -1;
	}
	rc = out && !strncmp(out, "ok shared", 9) ? 1 : out && !strncmp(out, "ok copy", 7) ? 0 : -1;
	if (rc < 0)
		vm_error("%s: cannot migrate to %s: it answered '%.60s', not ok", g->name, host,
		         out ? out : "");
	free(out);
	return rc;
}

struct check_args {
	bool cold;
	const char *name, *vm_dir, *dir, *token, *src_host;
	long src_pid;
	char **switches;
	int nswitches;
};

/* Does GUEST_DIR here hold the token the source wrote (the same storage)? */
static bool token_seen(const struct check_args *c)
{
	char path[PATH_MAX], buf[64];
	ssize_t n;
	int fd;

	if (strlen(c->token) != 36 || strchr(c->token, '/') ||
	    snprintf(path, sizeof(path), "%s/%s%s", c->dir, VM_MIGRATE_TOKEN, c->token) >=
	        (int)sizeof(path) ||
	    (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return !strcmp(buf, c->token);
}

/* Running here, and not as the source itself (the folder is shared). */
static int check_not_running(const struct vm_sys *sys, const struct check_args *c,
                             const struct vm_guest *g)
{
	struct vm_status st;
	char me[256];

	vm_status_get(sys, g, &st);
	vm_hostname(me, sizeof(me));
	if (st.state != VM_RUNNING || (!strcmp(st.host, c->src_host) &&
	                               st.supervisor == c->src_pid && strcmp(c->src_host, me) == 0))
		return 0;
	return vm_error("%s is already running on %s", c->name, me[0] ? me : "this host");
}

static int check_live(const struct vm_sys *sys, const struct check_args *c, bool shared)
{
	struct vm_guest g;
	char err[1100];
	int rc = 0;

	if (!shared)
		return vm_error("disks are not on storage both hosts see (%s here is not the "
		                "source's folder)",
		                c->dir);
	if (strcmp(sys->vm_dir, c->vm_dir) != 0)
		return vm_error("vm_dir is %s here, not %s as on the source", sys->vm_dir,
		                c->vm_dir);
	if (vm_guest_find(sys, c->name, &g, err, sizeof(err)) < 0)
		rc = vm_error("%s", err);
	else if (strcmp(g.dir, c->dir) != 0)
		rc = vm_error("%s is in %s here, not in %s", c->name, g.dir, c->dir);
	else
		rc = check_not_running(sys, c, &g);
	vm_guest_free(&g);
	return rc;
}

static int check_cold(const struct vm_sys *sys, const struct check_args *c, bool shared)
{
	struct vm_guest g;
	char err[1100], dest[PATH_MAX];
	int found;

	if (shared)
		return 0;
	found = vm_guest_find(sys, c->name, &g, err, sizeof(err)) == 0;
	vm_guest_free(&g);
	if (found)
		return vm_error("a guest named %s exists here already (not replacing it)", c->name);
	if (vm_path(dest, sys->vm_dir, c->name) < 0)
		return vm_error("%s: path too long", sys->vm_dir);
	if (vm_exists(dest))
		return vm_error("%s exists here already (not replacing it)", dest);
	return 0;
}

static int parse_check(int argc, char **argv, struct check_args *c)
{
	char *end;
	int i = 1;

	memset(c, 0, sizeof(*c));
	if (i < argc && !strcmp(argv[i], "-c")) {
		c->cold = true;
		i++;
	}
	if (argc - i < 6)
		return vm_error("usage: vm _migrate-check [-c] name vm_dir dir token host pid "
		                "[switch...]");
	c->name = argv[i];
	c->vm_dir = argv[i + 1];
	c->dir = argv[i + 2];
	c->token = argv[i + 3];
	c->src_host = argv[i + 4];
	c->src_pid = strtol(argv[i + 5], &end, 10);
	if (*end || !vm_name_valid(c->name))
		return vm_error("_migrate-check: bad arguments");
	c->switches = argv + i + 6;
	c->nswitches = argc - i - 6;
	return 0;
}

int cmd_migrate_check(struct vm_sys *sys, int argc, char **argv)
{
	struct check_args c;
	char err[512], me[256];
	bool shared;
	int rc;

	if (parse_check(argc, argv, &c))
		return 1;
	vm_hostname(me, sizeof(me));
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	for (int i = 0; i < c.nswitches; i++)
		if (!vm_switch_listed(sys, c.switches[i]))
			return vm_error("switch %s (of %s's networks) does not exist on %s",
			                c.switches[i], c.name, me[0] ? me : "this host");
	shared = token_seen(&c);
	rc = c.cold ? check_cold(sys, &c, shared) : check_live(sys, &c, shared);
	if (rc == 0)
		printf("ok %s\n", shared ? "shared" : "copy");
	return rc;
}

/* ---- processes with pipes ---- */

struct child {
	pid_t pid;
	int in;  /* write end of its stdin, or -1 */
	int out; /* read end of its stdout, or -1 */
};

/* Start argv with stdin and stdout on pipes, stderr into `errfile`. */
static int child_start(char *const *argv, const char *errfile, struct child *c)
{
	int in[2], out[2], ef;

	c->pid = -1;
	c->in = c->out = -1;
	if (pipe2(in, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(out, O_CLOEXEC) < 0) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	fflush(NULL);
	c->pid = fork();
	if (c->pid == 0) {
		ef = open(errfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		signal(SIGPIPE, SIG_DFL);
		if (ef < 0 || dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(ef, 2) < 0)
			_exit(127);
		execvp(argv[0], argv);
		fprintf(stderr, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->in = in[1];
	c->out = out[0];
	return c->pid < 0 ? -1 : 0;
}

/* Close its stdin (the target's side ends), wait up to `ms`, then kill it. */
static void child_end(struct child *c, int ms)
{
	if (c->in >= 0)
		close(c->in);
	c->in = -1;
	if (c->pid > 0 && vm_wait_child(c->pid, NULL, ms) == 0) {
		kill(c->pid, SIGTERM);
		if (vm_wait_child(c->pid, NULL, 2000) == 0) {
			kill(c->pid, SIGKILL);
			vm_wait_child(c->pid, NULL, -1);
		}
	}
	c->pid = -1;
	if (c->out >= 0)
		close(c->out);
	c->out = -1;
}

/* One line from `fd` within `ms` into `line` (without the newline); 0, or -1 at EOF/timeout. */
static int read_line(int fd, char *line, size_t len, int ms)
{
	size_t n = 0;

	for (int left = ms; left > 0 && n < len - 1;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (poll(&p, 1, 100) <= 0) {
			left -= 100;
			continue;
		}
		r = read(fd, line + n, 1);
		if (r <= 0)
			break;
		if (line[n] == '\n') {
			line[n] = '\0';
			return 0;
		}
		n++;
	}
	line[n] = '\0';
	return -1;
}

/* The first line of `path` (a tool's stderr), or `def`. */
static void first_line(const char *path, char *out, size_t len, const char *def)
{
	if (file_first_line(path, out, len) < 0 || !out[0])
		snprintf(out, len, "%s", def);
}

/* ---- live: the source ---- */

struct live {
	const struct vm_sys *sys;
	const struct vm_guest *g;
	const char *host;
	struct vm_status st;
	char tmp[64]; /* our private folder: the forward's local end, ssh's stderr */
	char local[96], errfile[96];
	char remote[PATH_MAX]; /* DIR/NAME.mig on the target */
	char marker[PATH_MAX]; /* DIR/run.migrating */
	struct child ssh;
};

static int wait_socket(const char *path, int ms)
{
	struct timespec step = {0, 20 * 1000 * 1000};
	struct stat st;

	for (int waited = 0;; waited += 20) {
		if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode))
			return 0;
		if (waited >= ms)
			return -1;
		nanosleep(&step, NULL);
	}
}

/* ssh to the target's `vm _migrate-receive`, the stream forwarded; wait for "ready". */
static int start_receiver(struct live *l)
{
	const char *words[] = {"_migrate-receive", l->g->name, NULL};
	char fwd[PATH_MAX + 100], line[1100], why[1100];
	struct argv a = {0};
	int rc;

	snprintf(fwd, sizeof(fwd), "%s:%s", l->local, l->remote);
	rc = ssh_argv(l->sys, l->host, fwd, words, &a);
	if (rc == 0)
		rc = child_start(a.v, l->errfile, &l->ssh);
	argv_free(&a);
	if (rc < 0)
		return vm_error("%s: cannot run %s: %s", l->g->name, ssh_program(l->sys),
		                strerror(errno));
	if (read_line(l->ssh.out, line, sizeof(line), READY_WAIT_MS) == 0 &&
	    !strcmp(line, "ready")) {
		if (wait_socket(l->local, FORWARD_WAIT_MS) == 0)
			return 0;
		return vm_error("%s: %s made no local end of the forward (%s)", l->g->name,
		                ssh_program(l->sys), l->local);
	}
	child_end(&l->ssh, 2000);
	if (!strncmp(line, "error ", 6))
		snprintf(why, sizeof(why), "%s", line + 6);
	else
		first_line(l->errfile, why, sizeof(why), "no answer");
	return vm_error("%s: cannot migrate to %s: %s", l->g->name, l->host,
	                remote_why(l->host, why));
}

/* DIR/run.migrating: our supervisor's pid (supervisor.h). */
static int write_marker(struct live *l)
{
	char pid[24];
	int fd = vm_open_own(l->marker, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int n = snprintf(pid, sizeof(pid), "%d\n", (int)l->st.supervisor);

	if (fd < 0 || write(fd, pid, (size_t)n) != n) {
		if (fd >= 0)
			close(fd);
		return vm_error("%s: %s", l->marker, strerror(errno));
	}
	close(fd);
	return 0;
}

static int send_guest(struct live *l, char *err, size_t errlen)
{
	char sock[PATH_MAX + 16], to[128];

	if (snprintf(sock, sizeof(sock), "--socket=%s/%s", l->g->dir, VM_API_SOCKET) >=
	        (int)sizeof(sock) ||
	    snprintf(to, sizeof(to), "--migrate=unix:%s", l->local) >= (int)sizeof(to)) {
		snprintf(err, errlen, "the folder's path is too long");
		return -1;
	}
	const char *argv[] = {l->sys->khyvectl, sock, to, NULL};
	if (vm_tool_run(&(struct vm_tool){.argv = argv, .what = "khyvectl"}, err, errlen) < 0) {
		/* khyvectl's own lines start with its name already. */
		if (!strncmp(err, "khyvectl: khyvectl: ", 20))
			memmove(err, err + 10, strlen(err + 10) + 1);
		return -1;
	}
	return 0;
}

/* After khyvectl's success: the target's word, and our supervisor gone. */
static int finish_live(struct live *l)
{
	struct timespec step = {0, 20 * 1000 * 1000};
	char line[1100];
	int waited = 0;

	if (read_line(l->ssh.out, line, sizeof(line), RESULT_WAIT_MS) < 0 ||
	    strcmp(line, "running"))
		vm_warn("%s: the target did not confirm its supervisor (%s); see its %s",
		        l->g->name, line[0] ? line : "no answer", VM_RUN_LOG);
	while (waited < STOP_WAIT_MS && vm_proc_start(l->st.supervisor) != 0) {
		nanosleep(&step, NULL);
		waited += 20;
	}
	if (waited >= STOP_WAIT_MS)
		return vm_error("%s moved to %s, but its supervisor here still runs", l->g->name,
		                l->host);
	return 0;
}

/*
 * khyvectl failed.  Before COMMIT the source runs on as before; after a
 * COMMIT without an answer it stays paused (never two copies running).
 */
static int report_failure(struct live *l, const char *why)
{
	struct vm_status now = l->st;

	vm_status_ask_khyve(l->g, &now);
	if (!strcmp(now.live, "Paused"))
		return vm_error(
		    "%s: the migration to %s failed: %s; %s is paused here (see whether "
		    "%s runs it, then vm poweroff it on one side, or khyvectl --resume)",
		    l->g->name, l->host, why, l->g->name, l->host);
	return vm_error("%s: the migration to %s failed: %s; %s keeps running here", l->g->name,
	                l->host, why, l->g->name);
}

static int live_paths(struct live *l)
{
	snprintf(l->tmp, sizeof(l->tmp), "/tmp/khyve-migrate.XXXXXX");
	if (!mkdtemp(l->tmp))
		return vm_error("mkdtemp %s: %s", l->tmp, strerror(errno));
	snprintf(l->local, sizeof(l->local), "%s/stream.sock", l->tmp);
	snprintf(l->errfile, sizeof(l->errfile), "%s/ssh.err", l->tmp);
	if (snprintf(l->remote, sizeof(l->remote), "%s/%s%s", l->g->dir, l->g->name,
	             VM_MIGRATE_SOCKET_SUFFIX) > SOCKET_MAX ||
	    vm_path(l->marker, l->g->dir, VM_RUN_MIGRATING) < 0)
		return vm_error("%s: the folder is too long for the migration's socket (at most %d "
		                "bytes)",
		                l->g->name, SOCKET_MAX);
	return 0;
}

static int migrate_live(const struct vm_sys *sys, const struct vm_guest *g, const char *host,
                        const struct vm_status *st)
{
	struct live l = {.sys = sys, .g = g, .host = host, .st = *st, .ssh = {.pid = -1}};
	char err[1100];
	int rc;

	if (live_paths(&l) || ask_target(sys, g, host, false, st->supervisor) < 0 ||
	    start_receiver(&l)) {
		rc = 1;
		goto out;
	}
	printf("Migrating %s to %s\n", g->name, host);
	fflush(stdout);
	if (write_marker(&l)) {
		rc = 1;
	} else if (send_guest(&l, err, sizeof(err)) < 0) {
		unlink(l.marker);
		rc = report_failure(&l, err);
	} else {
		rc = finish_live(&l);
		if (rc == 0)
			printf("%s runs on %s now\n", g->name, host);
	}
out:
	if (l.ssh.pid > 0)
		child_end(&l.ssh, 10000);
	if (l.tmp[0] == '/')
		vm_rmtree(l.tmp);
	return rc;
}

/* ---- live: the target ---- */

/* The source gave up (ssh's stdin closed): make the waiting khyve -R give up too. */
static void poke_receiver(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (strlen(path) >= sizeof(sun.sun_path)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	memcpy(sun.sun_path, path, strlen(path));
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
		shutdown(fd, SHUT_RDWR);
	if (fd >= 0)
		close(fd);
}

/* Relay the supervisor's report ("ok", "error MESSAGE") as "running"/"error ...". */
static int relay_report(int fd, const char *sock)
{
	char line[1200];
	bool ready = false, gone = false, poked = false;

	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
		                      {.fd = gone ? -1 : 0, .events = POLLIN}};
		char c;

		if (!ready && wait_socket(sock, 0) == 0) {
			printf("ready\n");
			fflush(stdout);
			ready = true;
		}
		if (poll(p, 2, 50) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			int rc = read_line(fd, line, sizeof(line), 100);
			if (rc == 0 && !strcmp(line, "ok")) {
				printf("running\n");
				return 0;
			}
			printf("error %s\n", rc == 0 && !strncmp(line, "error ", 6)
			                         ? line + 6
			                         : "the supervisor ended; see its log");
			return 1;
		}
		if (p[1].revents && read(0, &c, 1) <= 0)
			gone = true;
		/* Once the socket is there: a receiver nobody will talk to must not wait. */
		if (gone && !poked && ready) {
			poke_receiver(sock);
			poked = true;
		}
	}
	printf("error poll: %s\n", strerror(errno));
	return 1;
}

int cmd_migrate_receive(struct vm_sys *sys, int argc, char **argv)
{
	struct vm_guest g;
	char err[1100], sock[PATH_MAX], addr[PATH_MAX + 8];
	struct stat st;
	int fd, rc;

	if (argc != 2)
		return vm_error("usage: vm _migrate-receive name");
	if (vm_require_write(sys, "migrate") < 0)
		return 1;
	if (vm_guest_find(sys, argv[1], &g, err, sizeof(err)) < 0) {
		vm_guest_free(&g);
		printf("error %s\n", err);
		return 1;
	}
	if (snprintf(sock, sizeof(sock), "%s/%s%s", g.dir, g.name, VM_MIGRATE_SOCKET_SUFFIX) >=
	        (int)sizeof(sock) ||
	    snprintf(addr, sizeof(addr), "unix:%s", sock) >= (int)sizeof(addr)) {
		printf("error %s: path too long\n", g.dir);
		vm_guest_free(&g);
		return 1;
	}
	/* A socket left by an earlier try is stale; anything else is not ours. */
	if (lstat(sock, &st) == 0 && (!S_ISSOCK(st.st_mode) || unlink(sock) < 0)) {
		printf("error %s exists and is not a stale socket (not replacing it)\n", sock);
		vm_guest_free(&g);
		return 1;
	}
	fd = vm_launch_receiver(sys, &g, addr);
	vm_guest_free(&g);
	if (fd < 0) {
		printf("error cannot start the supervisor\n");
		return 1;
	}
	rc = relay_report(fd, sock);
	close(fd);
	return rc;
}

/* ---- cold ---- */

/* tar -cS of DIR's folder through ssh into the target's _migrate-unpack. */
static int copy_folder(const struct vm_sys *sys, const struct vm_guest *g, const char *host)
{
	const char *words[] = {"_migrate-unpack", g->name, NULL};
	struct argv a = {0}, tar = {0}, pipeline = {0};
	char parent[PATH_MAX], why[1100];
	char *left = NULL, *right = NULL, *cmd = NULL;
	int rc;

	snprintf(parent, sizeof(parent), "%s", g->dir);
	*strrchr(parent, '/') = '\0';
	rc = ssh_argv(sys, host, NULL, words, &a) | argv_add(&tar, "tar") | argv_add(&tar, "-C") |
	     argv_add(&tar, parent[0] ? parent : "/");
	/* The files of a run here mean nothing there. */
	const char *skip[] = {VM_RUN_LOCK,       VM_RUN_STATE,    VM_RUN_MIGRATING,
	                      VM_API_SOCKET "*", "com[1-4].pty*", VM_MIGRATE_TOKEN "*"};
	for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		rc |= argv_addf(&tar, "--exclude=%s/%s", g->name, skip[i]);
	rc |= argv_add(&tar, "-cSf") | argv_add(&tar, "-") | argv_add(&tar, g->name);
	if (rc == 0 && (left = argv_to_shell(&tar)) && (right = argv_to_shell(&a)) &&
	    asprintf(&cmd, "set -e; %s | %s", left, right) >= 0)
		rc = argv_add(&pipeline, "sh") | argv_add(&pipeline, "-c") |
		     argv_add(&pipeline, cmd);
	else
		rc = -1;
	if (rc == 0)
		rc = vm_tool_run(
		    &(struct vm_tool){.argv = (const char *const *)pipeline.v, .what = host}, why,
		    sizeof(why));
	else
		snprintf(why, sizeof(why), "out of memory");
	free(left);
	free(right);
	free(cmd);
	argv_free(&a);
	argv_free(&tar);
	argv_free(&pipeline);
	if (rc < 0)
		return vm_error("%s: cannot copy it to %s: %s", g->name, host,
		                remote_why(host, why));
	return 0;
}

static int migrate_cold(const struct vm_sys *sys, const struct vm_guest *g, const char *host,
                        bool keep)
{
	int shared = ask_target(sys, g, host, true, 0);

	if (shared < 0)
		return 1;
	if (shared) {
		printf("%s: %s sees the same folder (shared storage): nothing to copy\n", g->name,
		       host);
		return 0;
	}
	printf("Copying %s to %s\n", g->name, host);
	fflush(stdout);
	if (copy_folder(sys, g, host))
		return 1;
	if (keep) {
		printf("%s is on %s now; the copy here is kept (-k)\n", g->name, host);
		return 0;
	}
	if (vm_rmtree(g->dir) < 0)
		return vm_error("%s is on %s now, but %s here could not be removed: %s", g->name,
		                host, g->dir, strerror(errno));
	printf("%s is on %s now; removed it here\n", g->name, host);
	return 0;
}

/* Into a fresh folder beside vm_dir/NAME, then renamed into place: never over one. */
static int unpack_into(const struct vm_sys *sys, const char *name, const char *tmp)
{
	char from[PATH_MAX], conf[PATH_MAX + 80], dest[PATH_MAX], why[1100];
	const char *argv[] = {"tar", "-C", tmp, "--no-same-owner", "-xSf", "-", name, NULL};
	struct stat st;
	struct child c;
	int status = -1;

	if (child_start((char *const *)argv, "/dev/null", &c) < 0)
		return vm_error("cannot run tar: %s", strerror(errno));
	/* tar reads our stdin: give it the stream. */
	char buf[65536];
	ssize_t n;
	while ((n = read(0, buf, sizeof(buf))) > 0)
		if (write(c.in, buf, (size_t)n) != n)
			break;
	close(c.in);
	close(c.out);
	waitpid(c.pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return vm_error("tar could not unpack the stream of %s", name);
	if (snprintf(from, sizeof(from), "%s/%s", tmp, name) >= (int)sizeof(from) ||
	    snprintf(conf, sizeof(conf), "%s/%s.conf", from, name) >= (int)sizeof(conf))
		return vm_error("%s: path too long", tmp);
	if (lstat(conf, &st) < 0 || !S_ISREG(st.st_mode))
		return vm_error("the stream held no %s/%s.conf", name, name);
	if (vm_path(dest, sys->vm_dir, name) < 0)
		return vm_error("%s: path too long", sys->vm_dir);
	if (renameat2(AT_FDCWD, from, AT_FDCWD, dest, RENAME_NOREPLACE) < 0) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
		return vm_error("%s: %s (not replacing it)", dest, why);
	}
	return 0;
}

int cmd_migrate_unpack(struct vm_sys *sys, int argc, char **argv)
{
	char err[1100], tmp[PATH_MAX];
	struct vm_guest g;
	int rc, found;

	if (argc != 2 || !vm_name_valid(argv[1]))
		return vm_error("usage: vm _migrate-unpack name");
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (vm_require_write(sys, "migrate") < 0)
		return 1;
	found = vm_guest_find(sys, argv[1], &g, err, sizeof(err)) == 0;
	vm_guest_free(&g);
	if (found)
		return vm_error("a guest named %s exists here already (not replacing it)", argv[1]);
	if (snprintf(tmp, sizeof(tmp), "%s/.%s.incoming.XXXXXX", sys->vm_dir, argv[1]) >=
	        (int)sizeof(tmp) ||
	    !mkdtemp(tmp))
		return vm_error("%s: cannot make a folder: %s", sys->vm_dir, strerror(errno));
	rc = unpack_into(sys, argv[1], tmp);
	vm_rmtree(tmp);
	if (rc == 0)
		printf("ok\n");
	return rc;
}

/* ---- vm migrate ---- */

static int migrate_one(struct vm_sys *sys, const char *name, const char *host, bool live, bool keep)
{
	struct vm_guest g;
	struct vm_status st;
	char err[1100];
	int rc;

	if (vm_guest_find(sys, name, &g, err, sizeof(err)) < 0) {
		vm_guest_free(&g);
		return vm_error("%s", err);
	}
	vm_status_get(sys, &g, &st);
	if (st.state == VM_LOCKED)
		rc = vm_error("%s is locked by host %s, not running here", g.name, st.host);
	else if (live && st.state != VM_RUNNING)
		rc = vm_error("%s is not running (vm migrate without -l copies a stopped guest)",
		              g.name);
	else if (live && st.supervisor <= 0)
		rc = vm_error("%s has no supervisor here; restart it with vm start first", g.name);
	else if (!live && st.state == VM_RUNNING)
		rc = vm_error("%s is running: stop it first, or migrate it live with vm migrate -l",
		              g.name);
	else
		rc = live ? migrate_live(sys, &g, host, &st) : migrate_cold(sys, &g, host, keep);
	vm_guest_free(&g);
	return rc;
}

int cmd_migrate(struct vm_sys *sys, int argc, char **argv)
{
	const char *usage = "usage: vm migrate [-l] [-k] name host";
	bool live = false, keep = false;
	char err[512];
	int c;

	optind = 0;
	while ((c = getopt(argc, argv, "+lk")) != -1) {
		if (c == 'l')
			live = true;
		else if (c == 'k')
			keep = true;
		else
			return vm_error("vm migrate: unknown option -%c (%s)", optopt, usage);
	}
	if (argc - optind != 2)
		return vm_error("%s", usage);
	if (live && keep)
		return vm_error("vm migrate: -k is for a cold migration (a live one leaves nothing "
		                "here to keep)");
	if (!host_valid(argv[optind + 1]))
		return vm_error("vm migrate: %s: not a host name", argv[optind + 1]);
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (vm_require_write(sys, "migrate") < 0)
		return 1;
	return migrate_one(sys, argv[optind], argv[optind + 1], live, keep);
}
