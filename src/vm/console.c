/*
 * `vm console NAME [comN]`: attach the user's terminal to a running guest's
 * serial port.  khyve runs each port as `-l comN,pty=DIR/comN.pty`, so the
 * link names a pty slave; we relay between it and stdin/stdout (the
 * terminal in raw mode, so the guest sees every key) until the user types
 * `~.` at the start of a line (as cu and ssh: `~~` sends one `~`, `~?`
 * prints the escapes, and cu's `~^D` works too; lib/tty_escape.h) or
 * khyve exits and the pty hangs up.
 *
 * console="tmux" (`vm set console=tmux`) runs the same relay inside a tmux
 * session "vm-NAME" (vm-NAME-comN for a port other than the first),
 * created on first use and re-attached later; the internal
 * `vm console --direct` is the relay itself.  A guest that `vm start` ran
 * in tmux (run.state console="tmux") has its first port on the terminal of
 * tmux session NAME, as in vm-bhyve: we attach to that instead.
 */
#include "vm/commands.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "lib/tty_escape.h"
#include "vm/state.h"

#define CONSOLE_USAGE "usage: vm console name [com1|com2]"

/* ---- the user's terminal: raw while relaying, restored on every exit ---- */

static struct termios saved_termios;
static volatile sig_atomic_t termios_saved;
static volatile sig_atomic_t output_relayed; /* guest bytes may have reached stdout */

/* Termios back, and on a terminal the modes guest output may have changed
 * (SeaBIOS turns autowrap off).  Async-signal-safe. */
static void terminal_restore(void)
{
	if (output_relayed)
		tty_write_restore(STDOUT_FILENO);
	output_relayed = 0;
	if (termios_saved)
		tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios);
	termios_saved = 0;
}

/* A signal while raw (kill, hangup of the user's terminal): put the
 * terminal back, then die of the signal as we would have. */
static void restore_and_die(int sig)
{
	terminal_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void install_signal_restore(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP};

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], restore_and_die);
	/* A closed stdout shows as EPIPE from write(), handled there. */
	signal(SIGPIPE, SIG_IGN);
}

/* Raw mode when stdin is a terminal; a pipe or file is used as it is. */
static int terminal_make_raw(void)
{
	struct termios t;

	install_signal_restore();
	atexit(terminal_restore);
	output_relayed = 1;
	if (!isatty(STDIN_FILENO))
		return 0;
	if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
		return -1;
	t = saved_termios;
	cfmakeraw(&t);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	termios_saved = 1;
	return tcsetattr(STDIN_FILENO, TCSADRAIN, &t);
}

/* ---- the relay ---- */

struct buf {
	char data[4096];
	size_t off, len;
};

/* Write what `b` holds to `fd` as far as it goes now; -1 on error. */
static int buf_flush(struct buf *b, int fd)
{
	ssize_t n = write(fd, b->data + b->off, b->len - b->off);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	b->off += (size_t)n;
	if (b->off == b->len)
		b->off = b->len = 0;
	return 0;
}

/* Before detaching: send what was typed ahead of `~.`, waiting at most a
 * second for a guest that does not read. */
static void buf_drain(struct buf *b, int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};

	while (b->len > 0 && poll(&p, 1, 1000) > 0 && !(p.revents & (POLLERR | POLLHUP)))
		if (buf_flush(b, fd) < 0)
			return;
}

enum relay_end { RELAY_CONTINUE, RELAY_DETACHED, RELAY_HANGUP, RELAY_STDOUT_GONE, RELAY_ERROR };

struct relay {
	int pty;
	bool stdin_open; /* false after EOF on stdin: guest output still flows */
	struct tty_escape esc;
	struct buf to_pty, to_out;
};

/* `~?`: the escapes, on the user's terminal (raw: CR LF by hand). */
static void escape_help(void)
{
	static const char help[] = "\r\nvm: ~. detach, ~~ send ~, ~? this help\r\n";

	if (write(STDERR_FILENO, help, sizeof(help) - 1) < 0) {
		/* stderr gone: nobody to tell */
	}
}

/* Keys typed: filter them into to_pty, acting on escapes.  Returns true on
 * detach (`~.`, `~^D`); what follows it is not sent. */
static bool relay_stdin(struct relay *r)
{
	char in[sizeof(r->to_pty.data) / 2];
	ssize_t n = read(STDIN_FILENO, in, sizeof(in));
	size_t off = 0, used;
	enum tty_escape_cmd cmd;

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return false;
	if (n <= 0) {
		r->stdin_open = false;
		return false;
	}
	r->to_pty.off = r->to_pty.len = 0;
	while (off < (size_t)n) {
		r->to_pty.len += tty_escape_filter(&r->esc, in + off, (size_t)n - off,
		                                   r->to_pty.data + r->to_pty.len, &used, &cmd);
		off += used;
		if (cmd == TTY_ESCAPE_QUIT)
			return true;
		if (cmd == TTY_ESCAPE_HELP)
			escape_help();
	}
	return false;
}

/* Guest output into to_out.  Returns false when khyve has gone (EOF/EIO). */
static bool relay_pty(struct relay *r)
{
	ssize_t n = read(r->pty, r->to_out.data, sizeof(r->to_out.data));

	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	if (n == 0)
		return false;
	r->to_out.off = 0;
	r->to_out.len = (size_t)n;
	return true;
}

/* One poll round: read a side only when what it sent before is gone. */
static enum relay_end relay_step(struct relay *r)
{
	struct pollfd p[3] = {
	    {.fd = r->stdin_open && !r->to_pty.len ? STDIN_FILENO : -1, .events = POLLIN},
	    {.fd = r->pty,
	     .events = (short)((r->to_out.len ? 0 : POLLIN) | (r->to_pty.len ? POLLOUT : 0))},
	    {.fd = r->to_out.len ? STDOUT_FILENO : -1, .events = POLLOUT},
	};

	if (poll(p, 3, -1) < 0)
		return errno == EINTR ? RELAY_CONTINUE : RELAY_ERROR;
	if (p[2].revents && buf_flush(&r->to_out, STDOUT_FILENO) < 0)
		return RELAY_STDOUT_GONE;
	if ((p[1].revents & POLLOUT) && buf_flush(&r->to_pty, r->pty) < 0)
		return RELAY_HANGUP;
	if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && !r->to_out.len && !relay_pty(r))
		return RELAY_HANGUP;
	if (p[0].revents && relay_stdin(r)) {
		buf_drain(&r->to_pty, r->pty);
		return RELAY_DETACHED;
	}
	return RELAY_CONTINUE;
}

static enum relay_end relay_run(int pty)
{
	struct relay r = {.pty = pty, .stdin_open = true};
	enum relay_end end;

	tty_escape_init(&r.esc, TTY_ESCAPE_DEFAULT);
	do
		end = relay_step(&r);
	while (end == RELAY_CONTINUE);
	if (end == RELAY_HANGUP) /* guest output still queued for the user */
		buf_drain(&r.to_out, STDOUT_FILENO);
	return end;
}

/* ---- finding the port ---- */

/* comN is a port khyve offers (com1..com4). */
static bool port_name_valid(const char *port)
{
	return strlen(port) == 4 && !strncmp(port, "com", 3) && port[3] >= '1' && port[3] <= '4';
}

/* The guest's comports ("com1" when unset or empty, as vm-bhyve). */
static const char *guest_comports(const struct vm_guest *g)
{
	const char *ports = rcconf_get(g->conf, "comports");

	return ports && ports[strspn(ports, " \t")] ? ports : "com1";
}

/* Word `port` in the blank-separated `list`? */
static bool list_has(const char *list, const char *port)
{
	size_t len = strlen(port);

	for (const char *p = list; *p;) {
		size_t wl;

		p += strspn(p, " \t");
		wl = strcspn(p, " \t");
		if (wl == len && !strncmp(p, port, len))
			return true;
		p += wl;
	}
	return false;
}

/* The port to attach: `asked`, or the first of comports. */
static int choose_port(const struct vm_guest *g, const char *asked, char port[8])
{
	const char *ports = guest_comports(g);

	if (asked) {
		if (!port_name_valid(asked))
			return vm_error("%s: no such serial port (com1..com4)", asked);
		if (!list_has(ports, asked))
			return vm_error("%s has no %s (comports=\"%s\")", g->name, asked, ports);
		snprintf(port, 8, "%s", asked);
		return 0;
	}
	ports += strspn(ports, " \t");
	snprintf(port, 8, "%.*s", (int)strcspn(ports, " \t"), ports);
	if (!port_name_valid(port))
		return vm_error("%s: comports=\"%s\": %s is not a serial port", g->name, ports,
		                port);
	return 0;
}

/* The first of comports: the port `vm start -f` and tmux mode put on the
 * supervisor's terminal instead of a pty. */
static bool first_port(const struct vm_guest *g, const char *port)
{
	const char *ports = guest_comports(g);

	ports += strspn(ports, " \t");
	return strcspn(ports, " \t") == strlen(port) && !strncmp(ports, port, strlen(port));
}

/*
 * The guest must run here (vm_status_get).  A guest that no supervisor
 * ever locked (no run.lock: khyve started by hand with
 * -l comN,pty=DIR/comN.pty) counts as running while the link is there:
 * khyve removes it when it exits.
 */
static int check_running(const struct vm_guest *g, const struct vm_status *st, const char *link,
                         const char *port)
{
	char lock[PATH_MAX];
	struct stat lst;
	bool have_link = lstat(link, &lst) == 0;
	bool unmanaged = vm_path(lock, g->dir, "run.lock") == 0 && lstat(lock, &lst) < 0;

	if (st->state == VM_LOCKED)
		return vm_error("%s is running on host %s", g->name, st->host);
	if (st->state != VM_RUNNING && !(unmanaged && have_link))
		return vm_error("%s is not running", g->name);
	if (!have_link)
		return vm_error("%s %s: %s is missing (was it started by this vm?)", g->name, port,
		                link);
	return 0;
}

/*
 * khyve's comN.pty links point into /dev/pts; a link to anything else (a
 * host terminal or file, in a folder copied from elsewhere) is not opened.
 */
static bool pty_link(const char *link)
{
	char target[64];
	ssize_t n = readlink(link, target, sizeof(target) - 1);

	if (n <= 0)
		return false;
	target[n] = '\0';
	return strncmp(target, "/dev/pts/", 9) == 0 && target[9] &&
	       target[9 + strspn(target + 9, "0123456789")] == '\0';
}

/* Open the slave behind `link`; raw, because a previous client (screen,
 * cu) may have left it cooked.  -1 after printing why. */
static int open_console(const struct vm_guest *g, const char *link, const char *port)
{
	int fd = pty_link(link) ? open(link, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC) : -2;
	struct termios t;

	if (fd == -2) {
		vm_error("%s %s: %s does not point into /dev/pts (not made by khyve)", g->name,
		         port, link);
		return -1;
	}
	if (fd < 0) {
		vm_error("%s %s: cannot open %s: %s (is it still running?)", g->name, port, link,
		         strerror(errno));
		return -1;
	}
	if (!isatty(fd)) {
		close(fd);
		vm_error("%s %s: %s is not a terminal", g->name, port, link);
		return -1;
	}
	if (tcgetattr(fd, &t) == 0) {
		cfmakeraw(&t);
		tcsetattr(fd, TCSANOW, &t);
	}
	return fd;
}

/* ---- tmux ---- */

/* console="tmux" in the guest's config or, as vm-bhyve keeps it, in
 * system.conf (`vm set console=tmux`). */
static bool console_is_tmux(const struct vm_sys *sys, const struct vm_guest *g)
{
	const char *c = rcconf_get(g->conf, "console");

	if (!c || !*c)
		c = rcconf_get(sys->system, "console");
	return c && !strcmp(c, "tmux");
}

/* tmux turns '.' and ':' in session names into '_'; do it first so -A and
 * -t find the session we made.  One session per port; the first port's
 * is plain vm-NAME. */
static void tmux_session_name(const struct vm_guest *g, const char *port, char *out, size_t len)
{
	if (first_port(g, port))
		snprintf(out, len, "vm-%s", g->name);
	else
		snprintf(out, len, "vm-%s-%s", g->name, port);
	for (char *p = out; *p; p++)
		if (*p == '.' || *p == ':')
			*p = '_';
}

/* Run argv and wait; its exit status, or -1. */
static int run_wait(char *const argv[])
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execvp(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Show tmux session `target` ("=NAME") on this terminal: attach, or, inside
 * tmux already ($TMUX, where tmux refuses to nest), switch this client. */
static int tmux_show(const char *target)
{
	char *attach[] = {"tmux", "attach-session", "-t", (char *)target, NULL};
	char *sw[] = {"tmux", "switch-client", "-t", (char *)target, NULL};
	const char *inside = getenv("TMUX");

	execvp("tmux", inside && *inside ? sw : attach);
	return vm_error("cannot run tmux: %s", strerror(errno));
}

/*
 * The relay in tmux session vm-NAME: created the first time (the relay
 * runs as its command, so ~. ends it), attached again later.  tmux's
 * server may have been started with another environment, so KHYVE_CONF is
 * passed explicitly.  Inside tmux ($TMUX), which refuses to nest, the
 * session is made detached and this client switched to it.
 */
static int console_in_tmux(const struct vm_sys *sys, const struct vm_guest *g, const char *port)
{
	char session[VM_NAME_MAX + 16], target[VM_NAME_MAX + 17], conf[PATH_MAX + 16];
	char *self = (char *)sys->self, *n = (char *)g->name, *p = (char *)port;
	char *has[] = {"tmux", "has-session", "-t", target, NULL};
	char *make[] = {"tmux",    "new-session", "-d", "-s", session, "/usr/bin/env", conf, self,
	                "console", "--direct",    n,    p,    NULL};
	const char *inside = getenv("TMUX");

	if (!sys->self[0])
		return vm_error("console=tmux: cannot find this vm binary (/proc/self/exe)");
	tmux_session_name(g, port, session, sizeof(session));
	snprintf(target, sizeof(target), "=%s", session);
	snprintf(conf, sizeof(conf), "KHYVE_CONF=%s", sys->conf_path);
	if (!inside || !*inside) {
		make[2] = "-A"; /* new-session -A -s S ...: attach when S exists */
		execvp(make[0], make);
		return vm_error("cannot run tmux: %s", strerror(errno));
	}
	if (run_wait(has) != 0 && run_wait(make) != 0)
		return vm_error("tmux new-session -s %s failed", session);
	return tmux_show(target);
}

/* A guest started with console=tmux has its first port on the terminal of
 * tmux session NAME ('.' as '~', as vm-bhyve names it). */
static int attach_supervisor_tmux(const struct vm_guest *g)
{
	char target[VM_NAME_MAX + 2];

	snprintf(target, sizeof(target), "=%s", g->name);
	for (char *p = target; *p; p++)
		if (*p == '.')
			*p = '~';
	return tmux_show(target);
}

/* ---- the command ---- */

static int console_direct(const struct vm_guest *g, const char *link, const char *port)
{
	int pty = open_console(g, link, port);
	enum relay_end end;
	int relay_errno;

	if (pty < 0)
		return 1;
	fprintf(stderr, "vm: connected to %s %s; ~. detaches\n", g->name, port);
	if (terminal_make_raw() < 0) {
		close(pty);
		return vm_error("cannot put the terminal in raw mode: %s", strerror(errno));
	}
	end = relay_run(pty);
	relay_errno = errno;
	close(pty);
	terminal_restore();
	if (isatty(STDERR_FILENO) && (end == RELAY_DETACHED || end == RELAY_HANGUP))
		fputc('\n', stderr); /* the guest may have left the cursor mid-line */
	switch (end) {
	case RELAY_HANGUP:
		fprintf(stderr, "vm: %s %s: khyve has exited, console closed\n", g->name, port);
		return 0;
	case RELAY_ERROR:
		return vm_error("%s %s: console relay failed: %s", g->name, port,
		                strerror(relay_errno));
	default: /* detached, or the reader of stdout went away */
		return 0;
	}
}

/* Attach `port` of guest `g`, however it was started. */
static int console_port(const struct vm_sys *sys, const struct vm_guest *g, const char *port,
                        bool direct)
{
	char link[PATH_MAX], file[16];
	struct vm_status st;
	int rc;

	vm_status_get(sys, g, &st);
	if (st.state == VM_RUNNING && first_port(g, port)) {
		if (!strcmp(st.console, "tmux"))
			return attach_supervisor_tmux(g);
		if (!strcmp(st.console, "stdio"))
			return vm_error("%s %s is on the terminal of `vm start -f`", g->name, port);
	}
	snprintf(file, sizeof(file), "%s.pty", port);
	if (vm_path(link, g->dir, file) < 0)
		return vm_error("%s: path too long", g->dir);
	rc = check_running(g, &st, link, port);
	if (rc == 0)
		rc = !direct && console_is_tmux(sys, g) ? console_in_tmux(sys, g, port)
		                                        : console_direct(g, link, port);
	return rc;
}

int cmd_console(struct vm_sys *sys, int argc, char **argv)
{
	struct vm_guest g;
	char err[512], port[8];
	bool direct = argc > 1 && !strcmp(argv[1], "--direct");
	int rc;

	argc -= direct, argv += direct;
	if (argc < 2 || argc > 3 || argv[1][0] == '-')
		return vm_error(CONSOLE_USAGE);
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0 ||
	    vm_guest_find(sys, argv[1], &g, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	rc = choose_port(&g, argc > 2 ? argv[2] : NULL, port);
	if (rc == 0)
		rc = console_port(sys, &g, port, direct);
	vm_guest_free(&g);
	return rc;
}
