#include "backend/chardev.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "core/mevent.h"
#include "lib/log.h"
#include "lib/tty_escape.h"

enum chardev_kind { CHARDEV_STDIO, CHARDEV_DEVICE, CHARDEV_TCP, CHARDEV_PTY };

struct chardev {
	enum chardev_kind kind;
	int in_fd;     /* where input comes from; -1 when none (no TCP client) */
	int out_fd;    /* where output goes; -1 when none */
	int listen_fd; /* TCP only */
	int always_fd; /* eventfd standing in for a regular file epoll cannot watch */
	int slave_fd;  /* PTY only: our own open slave, so the master never hangs up */
	int link_slot; /* PTY only: index in pty_links, -1 when none */
	bool paused;
	bool eof;
	pthread_mutex_t lock; /* guards in_fd/out_fd against TCP reconnects */
	struct mevent_loop *loop;
	struct mevent *in_ev;
	struct mevent *listen_ev;
	chardev_ready_cb ready;
	void *arg;
	/* stdio on a terminal only: the user's escape (chardev_set_escape) */
	bool escape_on;
	struct tty_escape esc;
	chardev_escape_cb on_quit;
	void *quit_arg;
	bool spilled; /* `spill` holds a byte filtered out beyond the caller's room */
	char spill;
};

/* Terminals khyve switched to raw mode, restored on exit. */
#define MAX_RAW_TTYS 4
static struct {
	int fd;
	struct termios saved;
} raw_ttys[MAX_RAW_TTYS];
static int nraw_ttys;

/* stdout of a stdio back end, when a terminal: guest output reached it and
 * may have changed its modes; -1 when none or already restored. */
static volatile sig_atomic_t guest_output_tty = -1;

void chardev_restore_terminals(void)
{
	int out = guest_output_tty;

	guest_output_tty = -1;
	if (out >= 0)
		tty_write_restore(out);
	for (int i = 0; i < nraw_ttys; i++)
		tcsetattr(raw_ttys[i].fd, TCSAFLUSH, &raw_ttys[i].saved);
}

/* Symlinks to our pty slaves (pty=LINK), removed when khyve exits.  Fixed
 * arrays, because removal also runs from a fatal-signal handler. */
#define MAX_PTY_LINKS 4
static struct {
	bool used;
	char link[PATH_MAX];
	char target[64]; /* /dev/pts/N */
} pty_links[MAX_PTY_LINKS];

/* Remove `link` only while it still names our slave: a newer khyve may
 * have taken the name over.  Async-signal-safe (readlink, unlink). */
static void pty_link_remove(int slot)
{
	char now[sizeof(pty_links[0].target)];
	ssize_t n;

	if (slot < 0 || !pty_links[slot].used)
		return;
	n = readlink(pty_links[slot].link, now, sizeof(now));
	if (n > 0 && (size_t)n == strlen(pty_links[slot].target) &&
	    memcmp(now, pty_links[slot].target, (size_t)n) == 0)
		unlink(pty_links[slot].link);
	pty_links[slot].used = false;
}

static void pty_links_remove_all(void)
{
	for (int i = 0; i < MAX_PTY_LINKS; i++)
		pty_link_remove(i);
}

static void fatal_signal_restore(int sig)
{
	chardev_restore_terminals();
	pty_links_remove_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void install_restore_handlers(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
	static bool done;

	if (done)
		return;
	done = true;
	atexit(chardev_restore_terminals);
	atexit(pty_links_remove_all);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old;

		/* Leave handlers others (sanitizers) installed alone. */
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
			signal(sigs[i], fatal_signal_restore);
	}
}

/* Raw mode: no echo, no line editing, no signals from ^C, no output
 * post-processing; the guest's console driver does all of that. */
static int tty_make_raw(int fd)
{
	struct termios t;

	if (!isatty(fd) || nraw_ttys >= MAX_RAW_TTYS || tcgetattr(fd, &t) < 0)
		return 0;
	raw_ttys[nraw_ttys].fd = fd;
	raw_ttys[nraw_ttys].saved = t;
	nraw_ttys++;
	install_restore_handlers();
	cfmakeraw(&t);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	return tcsetattr(fd, TCSANOW, &t);
}

static void on_input(int fd, uint32_t events, void *arg)
{
	struct chardev *cd = arg;

	(void)fd;
	(void)events;
	cd->ready(cd->arg);
}

static void tcp_drop_client(struct chardev *cd)
{
	pthread_mutex_lock(&cd->lock);
	if (cd->in_fd >= 0)
		close(cd->in_fd);
	cd->in_fd = cd->out_fd = -1;
	mevent_delete(cd->in_ev);
	cd->in_ev = NULL;
	pthread_mutex_unlock(&cd->lock);
}

static void on_accept(int fd, uint32_t events, void *arg)
{
	struct chardev *cd = arg;
	int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	(void)events;
	if (c < 0)
		return;
	if (cd->in_fd >= 0) { /* one client at a time, as bhyve */
		close(c);
		return;
	}
	pthread_mutex_lock(&cd->lock);
	cd->in_fd = cd->out_fd = c;
	cd->in_ev = mevent_add(cd->loop, c, EPOLLIN, on_input, cd);
	if (cd->paused && cd->in_ev != NULL)
		mevent_enable(cd->in_ev, false);
	pthread_mutex_unlock(&cd->lock);
}

static int parse_tcp_spec(const char *addr, struct sockaddr_in *sin)
{
	char host[64];
	const char *colon = strrchr(addr, ':');
	char *end;
	long port;

	if (colon == NULL || (size_t)(colon - addr) >= sizeof(host))
		return -1;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (*end != '\0' || port <= 0 || port > 65535)
		return -1;
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &sin->sin_addr) == 1 ? 0 : -1;
}

static int open_tcp(struct chardev *cd, const char *addr, char *err, size_t errlen)
{
	struct sockaddr_in sin;
	int one = 1;

	if (parse_tcp_spec(addr, &sin) < 0) {
		snprintf(err, errlen, "bad tcp address '%s' (want tcp=IP:PORT)", addr);
		return -1;
	}
	cd->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (cd->listen_fd < 0)
		goto fail;
	setsockopt(cd->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(cd->listen_fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(cd->listen_fd, 1) < 0)
		goto fail;
	cd->listen_ev = mevent_add(cd->loop, cd->listen_fd, EPOLLIN, on_accept, cd);
	if (cd->listen_ev == NULL)
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(errno));
	return -1;
}

static int open_device(struct chardev *cd, const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	tty_make_raw(fd);
	cd->in_fd = cd->out_fd = fd;
	return 0;
}

/* A fresh pty master (nonblocking: a full buffer drops output instead of
 * stalling the vCPU) and its slave's name. */
static int pty_open_master(char *slave, size_t len)
{
	int fd = posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (grantpt(fd) < 0 || unlockpt(fd) < 0 || ptsname_r(fd, slave, len) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Open the slave ourselves and make it raw: the guest's and the client's
 * bytes pass untouched, whatever client (vm console, cu, screen) attaches. */
static int pty_open_slave(const char *slave)
{
	int fd = open(slave, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	struct termios t;

	if (fd < 0)
		return -1;
	if (tcgetattr(fd, &t) == 0) {
		cfmakeraw(&t);
		tcsetattr(fd, TCSANOW, &t);
	}
	return fd;
}

/* Point `link` at `target`, replacing a symlink or stale file atomically
 * (symlink LINK.tmp, rename).  A directory is refused: rename would fail
 * or, worse, succeed on an empty one. */
static int pty_make_link(const char *link, const char *target, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	struct stat st;

	if (lstat(link, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "pty link %s is a directory", link);
		return -1;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", link) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "pty link %s: name too long", link);
		return -1;
	}
	unlink(tmp); /* left over from a khyve that died here */
	if (symlink(target, tmp) < 0 || rename(tmp, link) < 0) {
		snprintf(err, errlen, "cannot link %s to %s: %s", link, target, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Remember `link` for removal at exit; the slot number, or -1 when full. */
static int pty_link_register(const char *link, const char *target)
{
	for (int i = 0; i < MAX_PTY_LINKS; i++) {
		if (pty_links[i].used)
			continue;
		snprintf(pty_links[i].link, sizeof(pty_links[i].link), "%s", link);
		snprintf(pty_links[i].target, sizeof(pty_links[i].target), "%s", target);
		pty_links[i].used = true;
		install_restore_handlers();
		return i;
	}
	return -1;
}

/* pty=LINK: a new pty whose slave LINK names, for `vm console` or cu. */
static int open_pty(struct chardev *cd, const char *link, char *err, size_t errlen)
{
	char slave[sizeof(pty_links[0].target)];

	if (link[0] == '\0') {
		snprintf(err, errlen, "pty= needs a path for the link (pty=/path/com1.pty)");
		return -1;
	}
	if (strlen(link) + sizeof(".tmp") > PATH_MAX) {
		snprintf(err, errlen, "pty link %s: name too long", link);
		return -1;
	}
	cd->in_fd = cd->out_fd = pty_open_master(slave, sizeof(slave));
	if (cd->in_fd < 0 || (cd->slave_fd = pty_open_slave(slave)) < 0) {
		snprintf(err, errlen, "cannot open a pty: %s", strerror(errno));
		return -1;
	}
	if (pty_make_link(link, slave, err, errlen) < 0)
		return -1;
	cd->link_slot = pty_link_register(link, slave);
	if (cd->link_slot < 0) {
		unlink(link);
		snprintf(err, errlen, "too many pty links (at most %d)", MAX_PTY_LINKS);
		return -1;
	}
	log_debug("%s -> %s", link, slave);
	return 0;
}

static int open_stdio(struct chardev *cd, char *err, size_t errlen)
{
	cd->in_fd = STDIN_FILENO;
	cd->out_fd = STDOUT_FILENO;
	if (isatty(STDOUT_FILENO)) {
		guest_output_tty = STDOUT_FILENO;
		install_restore_handlers();
	}
	if (tty_make_raw(STDIN_FILENO) < 0) {
		snprintf(err, errlen, "cannot set the terminal to raw mode: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int open_kind(struct chardev *cd, const char *spec, char *err, size_t errlen)
{
	if (strcmp(spec, "stdio") == 0) {
		cd->kind = CHARDEV_STDIO;
		return open_stdio(cd, err, errlen);
	}
	if (strncmp(spec, "tcp=", 4) == 0) {
		cd->kind = CHARDEV_TCP;
		return open_tcp(cd, spec + 4, err, errlen);
	}
	if (strncmp(spec, "pty=", 4) == 0) {
		cd->kind = CHARDEV_PTY;
		return open_pty(cd, spec + 4, err, errlen);
	}
	if (spec[0] == '/') {
		cd->kind = CHARDEV_DEVICE;
		return open_device(cd, spec, err, errlen);
	}
	snprintf(err, errlen,
	         "unknown serial back end '%s' (want stdio, /dev/PATH, tcp=IP:PORT or pty=LINK)",
	         spec);
	return -1;
}

/* Watch in_fd.  epoll refuses regular files (stdin redirected from a file),
 * which are always readable anyway: watch an eventfd that always is. */
static int watch_input(struct chardev *cd)
{
	cd->in_ev = mevent_add(cd->loop, cd->in_fd, EPOLLIN, on_input, cd);
	if (cd->in_ev != NULL)
		return 0;
	if (errno != EPERM)
		return -1;
	cd->always_fd = eventfd(1, EFD_CLOEXEC);
	if (cd->always_fd < 0)
		return -1;
	cd->in_ev = mevent_add(cd->loop, cd->always_fd, EPOLLIN, on_input, cd);
	return cd->in_ev != NULL ? 0 : -1;
}

struct chardev *chardev_open(const char *spec, struct mevent_loop *loop, chardev_ready_cb ready,
                             void *arg, char *err, size_t errlen)
{
	struct chardev *cd = calloc(1, sizeof(*cd));

	if (cd == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	cd->in_fd = cd->out_fd = cd->listen_fd = cd->always_fd = cd->slave_fd = -1;
	cd->link_slot = -1;
	cd->loop = loop;
	cd->ready = ready;
	cd->arg = arg;
	pthread_mutex_init(&cd->lock, NULL);
	if (open_kind(cd, spec, err, errlen) < 0) {
		chardev_close(cd);
		return NULL;
	}
	if (cd->kind != CHARDEV_TCP && watch_input(cd) < 0) {
		snprintf(err, errlen, "cannot watch %s: %s", spec, strerror(errno));
		chardev_close(cd);
		return NULL;
	}
	return cd;
}

void chardev_close(struct chardev *cd)
{
	if (cd == NULL)
		return;
	mevent_delete(cd->in_ev);
	mevent_delete(cd->listen_ev);
	if (cd->kind != CHARDEV_STDIO && cd->in_fd >= 0)
		close(cd->in_fd);
	if (cd->listen_fd >= 0)
		close(cd->listen_fd);
	if (cd->always_fd >= 0)
		close(cd->always_fd);
	pty_link_remove(cd->link_slot);
	if (cd->slave_fd >= 0)
		close(cd->slave_fd);
	pthread_mutex_destroy(&cd->lock);
	free(cd);
}

/* End of input (or a read error): stop watching, or wait for the next TCP
 * client. */
static void input_ended(struct chardev *cd)
{
	if (cd->kind == CHARDEV_TCP) {
		tcp_drop_client(cd);
	} else if (!cd->eof) {
		cd->eof = true;
		mevent_enable(cd->in_ev, false);
	}
}

static size_t read_raw(struct chardev *cd, void *buf, size_t len)
{
	ssize_t n = read(cd->in_fd, buf, len);

	if (n > 0)
		return (size_t)n;
	if (n == 0 || (errno != EAGAIN && errno != EINTR))
		input_ended(cd);
	return 0;
}

/* `~?`: the escapes, on the user's terminal (raw: CR LF by hand). */
static void escape_help(const struct chardev *cd)
{
	char help[128];
	int n = snprintf(help, sizeof(help),
	                 "\r\nkhyve: %c. power off (exit 1), %c%c send %c, %c? this help\r\n",
	                 cd->esc.ch, cd->esc.ch, cd->esc.ch, cd->esc.ch, cd->esc.ch);

	if (write(STDERR_FILENO, help, (size_t)n) < 0) {
		/* stderr gone: nobody to tell */
	}
}

/* `~.`: no more input; the owner stops the machine. */
static void escape_quit(struct chardev *cd)
{
	cd->eof = true;
	mevent_enable(cd->in_ev, false);
	cd->on_quit(cd->quit_arg);
}

/* Keys typed on a stdio terminal, escapes taken out.  Filtering can give
 * one byte more than was read (a held `~` and the byte after it), so a
 * held `~` reads one byte less; only with room for one byte does the
 * second wait in `spill` for the next call. */
static size_t read_escaped(struct chardev *cd, char *buf, size_t len)
{
	char in[256], out[sizeof(in) + 1];
	size_t n, k = 0, off = 0, used, want = len < sizeof(in) ? len : sizeof(in);
	enum tty_escape_cmd cmd = TTY_ESCAPE_NONE;

	if (cd->spilled) {
		cd->spilled = false;
		buf[0] = cd->spill;
		return 1;
	}
	if (cd->esc.held && want > 1)
		want--;
	n = read_raw(cd, in, want);
	while (off < n && cmd != TTY_ESCAPE_QUIT) {
		k += tty_escape_filter(&cd->esc, in + off, n - off, out + k, &used, &cmd);
		off += used;
		if (cmd == TTY_ESCAPE_HELP)
			escape_help(cd);
	}
	if (cmd == TTY_ESCAPE_QUIT)
		escape_quit(cd);
	if (k > len) {
		cd->spill = out[len];
		cd->spilled = true;
		k = len;
	}
	memcpy(buf, out, k);
	return k;
}

size_t chardev_read(struct chardev *cd, void *buf, size_t len)
{
	if (cd->in_fd < 0 || len == 0)
		return 0;
	if (cd->escape_on)
		return read_escaped(cd, buf, len);
	return read_raw(cd, buf, len);
}

bool chardev_set_escape(struct chardev *cd, int ch, chardev_escape_cb quit, void *arg)
{
	cd->escape_on = cd->kind == CHARDEV_STDIO && ch >= 0 && isatty(cd->in_fd);
	tty_escape_init(&cd->esc, ch);
	cd->on_quit = quit;
	cd->quit_arg = arg;
	return cd->escape_on;
}

/*
 * A full pty: nobody attached (or a stalled client).  Discard the oldest
 * output through our own slave fd so the buffer keeps the newest, and a
 * client attaching late sees the current prompt rather than old boot text.
 */
static bool pty_discard_oldest(struct chardev *cd)
{
	char sink[4096];
	ssize_t n;

	if (cd->slave_fd < 0)
		return false;
	n = read(cd->slave_fd, sink, sizeof(sink));
	return n > 0;
}

void chardev_write(struct chardev *cd, const void *buf, size_t len)
{
	const char *p = buf;
	bool discarded = false;

	pthread_mutex_lock(&cd->lock);
	while (len > 0 && cd->out_fd >= 0) {
		ssize_t n = cd->kind == CHARDEV_TCP
		                ? send(cd->out_fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
		                : write(cd->out_fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && !discarded && pty_discard_oldest(cd)) {
			discarded = true;
			continue;
		}
		if (n <= 0)
			break; /* nobody reading fast enough: drop, like a serial line */
		p += n;
		len -= (size_t)n;
	}
	pthread_mutex_unlock(&cd->lock);
}

void chardev_pause_input(struct chardev *cd)
{
	pthread_mutex_lock(&cd->lock);
	cd->paused = true;
	if (cd->in_ev != NULL)
		mevent_enable(cd->in_ev, false);
	pthread_mutex_unlock(&cd->lock);
}

void chardev_resume_input(struct chardev *cd)
{
	pthread_mutex_lock(&cd->lock);
	cd->paused = false;
	if (cd->in_ev != NULL && !cd->eof)
		mevent_enable(cd->in_ev, true);
	pthread_mutex_unlock(&cd->lock);
}
