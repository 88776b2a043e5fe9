#include "backend/chardev.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
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
#include <sys/sysmacros.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include "core/mevent.h"
#include "lib/log.h"
#include "lib/tty_escape.h"

enum chardev_kind { CHARDEV_STDIO, CHARDEV_DEVICE, CHARDEV_TCP, CHARDEV_PTY, CHARDEV_UNIX };

/* TCP and unix sockets: one client at a time, who may come and go. */
#define HAS_CLIENTS(cd) ((cd)->kind == CHARDEV_TCP || (cd)->kind == CHARDEV_UNIX)

/* Output: a ring of CHARDEV_OUT_MAX bytes per back end (chardev.h). */
struct outring {
	char *data;  /* CHARDEV_OUT_MAX bytes */
	size_t head; /* oldest byte */
	size_t len;  /* bytes waiting */
};

struct chardev {
	enum chardev_kind kind;
	char name[16];      /* for logs: "com1" (chardev_set_name), else "serial" */
	int in_fd;          /* where input comes from; -1 when none (no TCP client) */
	int out_fd;         /* where output goes; -1 when none */
	int listen_fd;      /* TCP only */
	int always_fd;      /* eventfd standing in for a regular file epoll cannot watch */
	int slave_fd;       /* PTY only: our own open slave, so the master never hangs up */
	int link_slot;      /* PTY only: index in pty_links, -1 when none */
	int sock_slot;      /* UNIX only: index in unix_socks, -1 when none */
	bool owns_out_fd;   /* stdio: out_fd is our own reopened stdout */
	bool out_is_socket; /* send(MSG_DONTWAIT): no flag to flip on a socket */
	bool paused;
	bool eof;
	pthread_mutex_t lock; /* guards in_fd/out_fd, the ring and the watch state */
	struct mevent_loop *loop;
	struct mevent *in_ev;  /* input; also output where out_ev is NULL */
	struct mevent *out_ev; /* stdio only: stdout is another fd than stdin */
	int out_always_fd;     /* stdio: eventfd standing in for an unwatchable stdout */
	struct mevent *listen_ev;
	uint32_t in_mask, out_mask; /* what in_ev / out_ev watch now */
	/* Output state, all under `lock`. */
	struct outring ring;
	int tick_fd; /* timerfd: the loop flushes every CHARDEV_TICK_MS */
	struct mevent *tick_ev;
	bool out_armed;   /* output waits and the loop will flush it */
	bool out_blocked; /* the last write found the fd full: wait for room */
	bool out_dead;    /* a write failed for good (EPIPE, EIO): output is lost */
	bool dropping;    /* in a run of dropped output, already logged */
	bool closing;     /* at exit: the event loop is gone, do not arm */
	uint64_t dropped; /* bytes of output dropped since open */
	struct ratelimit drop_rl;
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

/* Every open back end, for the last flush when khyve exits. */
#define MAX_CHARDEVS 32
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct chardev *open_chardevs[MAX_CHARDEVS];

/* stdout's file status flags when khyve had to set O_NONBLOCK on the
 * shared description itself (no /proc); put back on exit. */
static volatile sig_atomic_t stdout_flags_saved = -1;

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
	if (stdout_flags_saved >= 0) {
		fcntl(STDOUT_FILENO, F_SETFL, (int)stdout_flags_saved);
		stdout_flags_saved = -1;
	}
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

/* Unix sockets khyve made (unix=PATH), removed when khyve exits while the
 * path still names the socket it bound (same device and inode). */
#define MAX_UNIX_SOCKS 32
static struct {
	bool used;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t dev;
	ino_t ino;
} unix_socks[MAX_UNIX_SOCKS];

/* Async-signal-safe (lstat, unlink). */
static void unix_sock_remove(int slot)
{
	struct stat st;

	if (slot < 0 || !unix_socks[slot].used)
		return;
	if (lstat(unix_socks[slot].path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    st.st_dev == unix_socks[slot].dev && st.st_ino == unix_socks[slot].ino)
		unlink(unix_socks[slot].path);
	unix_socks[slot].used = false;
}

static void unix_socks_remove_all(void)
{
	for (int i = 0; i < MAX_UNIX_SOCKS; i++)
		unix_sock_remove(i);
}

static void fatal_signal_restore(int sig)
{
	chardev_restore_terminals();
	pty_links_remove_all();
	unix_socks_remove_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void flush_all_at_exit(void);

/* On exit: flush what the guest wrote, then remove our pty links and put
 * the terminals back (atexit runs these in reverse order); on a fatal
 * signal: only the last two, which are async-signal-safe. */
static void install_exit_handlers(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
	static bool done;

	if (done)
		return;
	done = true;
	atexit(chardev_restore_terminals);
	atexit(pty_links_remove_all);
	atexit(unix_socks_remove_all);
	atexit(flush_all_at_exit);
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
	cfmakeraw(&t);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	return tcsetattr(fd, TCSANOW, &t);
}

/* ---- what the event loop watches ---- */

/* Make the loop watch for input (unless paused or at its end) and for room
 * to write (while output waits), changing the registration only when its
 * mask changes.  Called with `lock` held. */
static void update_watch_locked(struct chardev *cd)
{
	uint32_t in = (!cd->paused && !cd->eof) ? EPOLLIN : 0;
	uint32_t out = cd->out_blocked && cd->out_armed ? EPOLLOUT : 0;

	if (cd->closing)
		return;                  /* at exit the loop is gone */
	if (cd->kind == CHARDEV_STDIO) { /* stdout is not stdin: its own event */
		if (cd->out_ev != NULL && cd->out_mask != out) {
			cd->out_mask = out;
			mevent_set_events(cd->out_ev, out);
		}
		out = 0;
	}
	if (cd->in_ev != NULL && cd->in_mask != (in | out)) {
		cd->in_mask = in | out;
		mevent_set_events(cd->in_ev, in | out);
	}
}

/* ---- output: a bounded ring, written without blocking ---- */

/* The log name, "com1" or the like. */
void chardev_set_name(struct chardev *cd, const char *name)
{
	snprintf(cd->name, sizeof(cd->name), "%s", name);
}

static void ring_drop(struct chardev *cd, size_t n)
{
	if (n == 0)
		return;
	cd->dropped += n;
	if (!cd->dropping) {
		cd->dropping = true;
		log_ratelimited(&cd->drop_rl, LOG_WARN,
		                "%s: output is not being read: dropping what exceeds %u KiB",
		                cd->name, CHARDEV_OUT_MAX / 1024);
	}
}

/* Append what fits; the rest is dropped and counted. */
static void ring_append(struct chardev *cd, const char *p, size_t len)
{
	struct outring *r = &cd->ring;
	size_t room = CHARDEV_OUT_MAX - r->len, n = len < room ? len : room;

	for (size_t done = 0; done < n;) {
		size_t tail = (r->head + r->len) % CHARDEV_OUT_MAX;
		size_t chunk = CHARDEV_OUT_MAX - tail;

		if (chunk > n - done)
			chunk = n - done;
		memcpy(r->data + tail, p + done, chunk);
		r->len += chunk;
		done += chunk;
	}
	ring_drop(cd, len - n);
}

static void ring_consume(struct outring *r, size_t n)
{
	r->head = (r->head + n) % CHARDEV_OUT_MAX;
	r->len -= n;
	if (r->len == 0)
		r->head = 0;
}

/* One non-blocking write.  A socket gets MSG_DONTWAIT|MSG_NOSIGNAL; other
 * fds were opened (or reopened) non-blocking, see stdio_output_fd(). */
static ssize_t out_send(const struct chardev *cd, const char *p, size_t len)
{
	if (cd->out_is_socket)
		return send(cd->out_fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	return write(cd->out_fd, p, len);
}

/* The output is gone for good (the reader of a pipe left, a tty hung up,
 * a disk is full): drop what waits and all that follows. */
static void out_lost(struct chardev *cd, int err)
{
	if (HAS_CLIENTS(cd)) { /* the client left; the next one starts afresh */
		cd->ring.len = cd->ring.head = 0;
		return;
	}
	log_ratelimited(&cd->drop_rl, LOG_WARN, "%s: cannot write output (%s): dropping it",
	                cd->name, strerror(err));
	cd->out_dead = true;
	cd->dropping = true;
	cd->dropped += cd->ring.len;
	cd->ring.len = cd->ring.head = 0;
}

/*
 * A full pty: nobody attached (or a stalled client).  Discard the oldest
 * output through our own slave fd so the buffer keeps the newest, and a
 * client attaching late sees the current prompt rather than old boot text.
 * So a pty never holds output back in the ring for long.
 */
#define CHARDEV_PTY_DISCARDS 16 /* 4 KiB reads per flush: 64 KiB */
static bool pty_discard_oldest(struct chardev *cd)
{
	char sink[4096];
	ssize_t n;

	if (cd->slave_fd < 0)
		return false;
	n = read(cd->slave_fd, sink, sizeof(sink));
	return n > 0;
}

/* Write the ring out until it is empty or the fd is full (out_blocked).
 * Never blocks.  Called with `lock` held, from any thread. */
static void flush_locked(struct chardev *cd)
{
	struct outring *r = &cd->ring;
	unsigned discards = 0;

	while (r->len > 0 && cd->out_fd >= 0 && !cd->out_dead) {
		size_t chunk = CHARDEV_OUT_MAX - r->head;
		ssize_t n = out_send(cd, r->data + r->head, chunk < r->len ? chunk : r->len);

		if (n > 0) {
			ring_consume(r, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (discards++ < CHARDEV_PTY_DISCARDS && pty_discard_oldest(cd))
				continue;
			cd->out_blocked = true;
			return;
		}
		out_lost(cd, n < 0 ? errno : EIO);
	}
	if (r->len == 0)
		cd->dropping = false; /* a later run of drops is logged again */
}

/* Run or stop the loop's flush tick (periodic while output flows). */
static void tick_set(struct chardev *cd, bool on)
{
	struct itimerspec its = {{0, 0}, {0, 0}};

	if (on)
		its.it_value.tv_nsec = its.it_interval.tv_nsec = CHARDEV_TICK_MS * 1000000L;
	if (cd->tick_fd >= 0 && !cd->closing)
		timerfd_settime(cd->tick_fd, 0, &its, NULL);
}

/*
 * After adding to the ring: write now (`now`, or a batch has gathered)
 * unless the fd is known to be full; leave the rest to the loop, which
 * flushes on a tick every CHARDEV_TICK_MS while output keeps coming (a
 * byte per guest exit then costs no system call at all) and, once the fd
 * is full, when it has room again (EPOLLOUT).
 */
static void output_kick_locked(struct chardev *cd, bool now)
{
	if (!cd->out_blocked && (now || cd->ring.len >= CHARDEV_OUT_BATCH))
		flush_locked(cd);
	if (cd->ring.len > 0 && !cd->out_armed && !cd->out_dead) {
		cd->out_armed = true;
		if (cd->out_blocked)
			update_watch_locked(cd);
		else
			tick_set(cd, true);
	}
}

static void output(struct chardev *cd, const void *buf, size_t len, bool now)
{
	pthread_mutex_lock(&cd->lock);
	if (cd->out_dead)
		cd->dropped += len;
	else if (cd->out_fd >= 0) { /* no TCP client: lost, as on a serial line */
		ring_append(cd, buf, len);
		output_kick_locked(cd, now);
	}
	pthread_mutex_unlock(&cd->lock);
}

void chardev_write(struct chardev *cd, const void *buf, size_t len)
{
	output(cd, buf, len, true);
}

void chardev_queue(struct chardev *cd, const void *buf, size_t len)
{
	output(cd, buf, len, false);
}

/* The fd was full: from now on wait for room (EPOLLOUT), not ticks. */
static void wait_for_room_locked(struct chardev *cd)
{
	tick_set(cd, false);
	update_watch_locked(cd);
}

/* Event loop: the output fd has room again. */
static void on_writable(struct chardev *cd)
{
	pthread_mutex_lock(&cd->lock);
	cd->out_blocked = false;
	flush_locked(cd);
	if (!cd->out_blocked) {
		cd->out_armed = false; /* all written: the next output arms again */
		update_watch_locked(cd);
	}
	pthread_mutex_unlock(&cd->lock);
}

/* Event loop, every CHARDEV_TICK_MS while output is armed: write what
 * gathered; stop ticking at the first tick with nothing new. */
static void on_tick(int fd, uint32_t events, void *arg)
{
	struct chardev *cd = arg;
	uint64_t ticks;

	(void)events;
	if (read(fd, &ticks, sizeof(ticks)) < 0) {
		/* EAGAIN: a tick stopped after it fired */
	}
	pthread_mutex_lock(&cd->lock);
	if (cd->out_armed) {
		bool idle = cd->ring.len == 0;

		if (!cd->out_blocked)
			flush_locked(cd);
		/* Full here or on a writer's own flush since the last tick. */
		if (cd->out_blocked) {
			wait_for_room_locked(cd);
		} else if (idle || cd->out_dead) {
			cd->out_armed = false;
			tick_set(cd, false);
		}
	}
	pthread_mutex_unlock(&cd->lock);
}

/* Event loop, stdio's stdout: room to write, or the reader is gone. */
static void on_stdout_event(int fd, uint32_t events, void *arg)
{
	struct chardev *cd = arg;

	(void)fd;
	if (events & (EPOLLERR | EPOLLHUP)) {
		/* epoll reports these even unasked: stop watching, or the
		 * loop would spin on a pipe whose reader left. */
		pthread_mutex_lock(&cd->lock);
		if (!cd->out_dead)
			out_lost(cd, EPIPE);
		mevent_delete(cd->out_ev);
		cd->out_ev = NULL;
		cd->out_armed = false;
		tick_set(cd, false);
		pthread_mutex_unlock(&cd->lock);
		return;
	}
	on_writable(cd);
}

/* A device that hung up for good (a tty whose other side closed): its
 * input has ended and epoll would report the hang-up forever, so stop
 * watching it, and its output is lost.  Called from in_ev's callback. */
static void device_gone(struct chardev *cd)
{
	pthread_mutex_lock(&cd->lock);
	if (!cd->out_dead)
		out_lost(cd, EIO);
	mevent_delete(cd->in_ev);
	cd->in_ev = NULL;
	cd->out_armed = false;
	tick_set(cd, false);
	pthread_mutex_unlock(&cd->lock);
}

static void on_event(int fd, uint32_t events, void *arg)
{
	struct chardev *cd = arg;

	(void)fd;
	if ((events & (EPOLLHUP | EPOLLERR)) && cd->eof && cd->kind == CHARDEV_DEVICE) {
		device_gone(cd);
		return;
	}
	if (events & EPOLLOUT)
		on_writable(cd);
	if (events & ~(uint32_t)EPOLLOUT)
		cd->ready(cd->arg);
}

/* The last flush, at exit or close: wait for the reader while it makes
 * progress, at most CHARDEV_EXIT_WAIT_MS with none; what is left then is
 * dropped and the whole count logged once. */
static void flush_final(struct chardev *cd)
{
	int idle_ms = 0;

	pthread_mutex_lock(&cd->lock);
	cd->closing = true; /* the loop may be gone: never arm it again */
	while (cd->ring.len > 0 && cd->out_fd >= 0 && !cd->out_dead &&
	       idle_ms < CHARDEV_EXIT_WAIT_MS) {
		struct pollfd p = {.fd = cd->out_fd, .events = POLLOUT};
		size_t before = cd->ring.len;

		cd->out_blocked = false;
		flush_locked(cd);
		if (!cd->out_blocked)
			break;
		pthread_mutex_unlock(&cd->lock);
		if (poll(&p, 1, 100) <= 0)
			idle_ms += 100;
		pthread_mutex_lock(&cd->lock);
		if (cd->ring.len < before)
			idle_ms = 0;
	}
	cd->dropped += cd->ring.len;
	cd->ring.len = cd->ring.head = 0;
	if (cd->dropped > 0)
		log_warn("%s: %llu bytes of output dropped: nobody read them", cd->name,
		         (unsigned long long)cd->dropped);
	cd->dropped = 0;
	pthread_mutex_unlock(&cd->lock);
}

static void flush_all_at_exit(void)
{
	pthread_mutex_lock(&open_lock);
	for (int i = 0; i < MAX_CHARDEVS; i++)
		if (open_chardevs[i] != NULL)
			flush_final(open_chardevs[i]);
	pthread_mutex_unlock(&open_lock);
}

static int register_open(struct chardev *cd)
{
	int rc = -1;

	pthread_mutex_lock(&open_lock);
	for (int i = 0; i < MAX_CHARDEVS && rc < 0; i++)
		if (open_chardevs[i] == NULL) {
			open_chardevs[i] = cd;
			rc = 0;
		}
	pthread_mutex_unlock(&open_lock);
	return rc;
}

static void unregister_open(struct chardev *cd)
{
	pthread_mutex_lock(&open_lock);
	for (int i = 0; i < MAX_CHARDEVS; i++)
		if (open_chardevs[i] == cd)
			open_chardevs[i] = NULL;
	pthread_mutex_unlock(&open_lock);
}

/* ---- back ends ---- */

/* The client left: its output is dropped; wait for the next one. */
static void tcp_drop_client(struct chardev *cd)
{
	pthread_mutex_lock(&cd->lock);
	if (cd->in_fd >= 0)
		close(cd->in_fd);
	cd->in_fd = cd->out_fd = -1;
	mevent_delete(cd->in_ev);
	cd->in_ev = NULL;
	cd->ring.len = cd->ring.head = 0;
	cd->out_armed = cd->out_blocked = cd->out_dead = false;
	tick_set(cd, false);
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
	cd->in_ev = mevent_add(cd->loop, c, EPOLLIN, on_event, cd);
	cd->in_mask = EPOLLIN;
	update_watch_locked(cd);
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
	cd->out_is_socket = true;
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
	struct stat st;

	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	tty_make_raw(fd);
	cd->in_fd = cd->out_fd = fd;
	cd->out_is_socket = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
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

/* What `mode` is, for the refusal. */
static const char *file_kind(mode_t mode)
{
	if (S_ISREG(mode))
		return "a regular file";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISFIFO(mode))
		return "a FIFO";
	return "a device";
}

/* Whether a symlink to `target` is one a khyve left behind: it names
 * /dev/pts/N and that slave is gone (killed khyve), or it is the slave we
 * just opened (the number was free again). */
static bool pty_link_is_stale(const char *target, const char *slave)
{
	const char *n = target + strlen("/dev/pts/");
	struct stat st;

	if (strcmp(target, slave) == 0)
		return true;
	if (strncmp(target, "/dev/pts/", strlen("/dev/pts/")) != 0 || *n == '\0' ||
	    strspn(n, "0123456789") != strlen(n))
		return false;
	return lstat(target, &st) < 0 && errno == ENOENT;
}

/*
 * Point `link` at `target`.  Only nothing, or a stale link of a khyve
 * (pty_link_is_stale), may be at LINK: a file, a directory or a symlink
 * someone else made is never replaced (a guest folder copied from another
 * host must not make khyve delete a file).  symlink(2) never follows LINK,
 * and fails if something appears there in the meantime.
 */
static int pty_make_link(const char *link, const char *target, char *err, size_t errlen)
{
	char old[64];
	struct stat st;
	ssize_t n;

	if (lstat(link, &st) == 0) {
		if (!S_ISLNK(st.st_mode)) {
			snprintf(err, errlen, "pty link %s exists and is %s: not replacing it",
			         link, file_kind(st.st_mode));
			return -1;
		}
		n = readlink(link, old, sizeof(old) - 1);
		old[n > 0 ? n : 0] = '\0';
		if (n <= 0 || (size_t)n >= sizeof(old) - 1 || !pty_link_is_stale(old, target)) {
			snprintf(err, errlen,
			         "pty link %s exists and points to %s, not a stale khyve pty: "
			         "not replacing it",
			         link, n > 0 ? old : "?");
			return -1;
		}
		if (unlink(link) < 0 && errno != ENOENT) {
			snprintf(err, errlen, "cannot remove the stale pty link %s: %s", link,
			         strerror(errno));
			return -1;
		}
	} else if (errno != ENOENT) {
		snprintf(err, errlen, "cannot check pty link %s: %s", link, strerror(errno));
		return -1;
	}
	if (symlink(target, link) < 0) {
		snprintf(err, errlen, "cannot link %s to %s: %s", link, target, strerror(errno));
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
	if (strlen(link) >= PATH_MAX) {
		snprintf(err, errlen, "pty link %s: name too long", link);
		return -1;
	}
	cd->in_fd = cd->out_fd = pty_open_master(slave, sizeof(slave));
	if (cd->in_fd < 0 || (cd->slave_fd = pty_open_slave(slave)) < 0) {
		snprintf(err, errlen, "cannot open a pty: %s", strerror(errno));
		return -1;
	}
	cd->link_slot = pty_link_register(link, slave);
	if (cd->link_slot < 0) {
		snprintf(err, errlen, "too many pty links (at most %d)", MAX_PTY_LINKS);
		return -1;
	}
	if (pty_make_link(link, slave, err, errlen) < 0) {
		pty_links[cd->link_slot].used = false; /* not ours: never remove it */
		cd->link_slot = -1;
		return -1;
	}
	log_debug("%s -> %s", link, slave);
	return 0;
}

/*
 * Whether the socket at `path` is one nobody listens on any more (a khyve
 * that was killed left it): connecting is refused.  A live one (someone
 * accepts, or the connection is pending) is not stale.
 */
static bool unix_sock_is_stale(const struct sockaddr_un *sun)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	bool stale;

	if (fd < 0)
		return false;
	stale =
	    connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) < 0 && errno == ECONNREFUSED;
	close(fd);
	return stale;
}

/* Make room at `sun`'s path: nothing there, or a stale socket (removed).
 * Anything else (a file, a directory, a socket in use) is never replaced. */
static int unix_sock_clear(const struct sockaddr_un *sun, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(sun->sun_path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "cannot check socket %s: %s", sun->sun_path, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "socket path %s exists and is %s: not replacing it",
		         sun->sun_path, S_ISLNK(st.st_mode) ? "a symlink" : file_kind(st.st_mode));
		return -1;
	}
	if (!unix_sock_is_stale(sun)) {
		snprintf(err, errlen, "socket %s is in use by another program: not replacing it",
		         sun->sun_path);
		return -1;
	}
	if (unlink(sun->sun_path) < 0 && errno != ENOENT) {
		snprintf(err, errlen, "cannot remove the stale socket %s: %s", sun->sun_path,
		         strerror(errno));
		return -1;
	}
	return 0;
}

static int unix_sock_register(const char *path, int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || lstat(path, &st) < 0)
		return -1;
	for (int i = 0; i < MAX_UNIX_SOCKS; i++) {
		if (unix_socks[i].used)
			continue;
		snprintf(unix_socks[i].path, sizeof(unix_socks[i].path), "%s", path);
		unix_socks[i].dev = st.st_dev;
		unix_socks[i].ino = st.st_ino;
		unix_socks[i].used = true;
		return i;
	}
	return -1;
}

/* unix=PATH: listen on a new unix socket at PATH, one client at a time. */
static int open_unix(struct chardev *cd, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};

	if (path[0] == '\0' || strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "unix socket path '%s': want 1-%zu characters", path,
		         sizeof(sun.sun_path) - 1);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (unix_sock_clear(&sun, err, errlen) < 0)
		return -1;
	cd->out_is_socket = true;
	cd->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (cd->listen_fd < 0 || bind(cd->listen_fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		snprintf(err, errlen, "cannot make socket %s: %s", path, strerror(errno));
		return -1;
	}
	cd->sock_slot = unix_sock_register(path, cd->listen_fd);
	if (cd->sock_slot < 0) {
		unlink(path); /* just bound: ours */
		snprintf(err, errlen, "too many unix sockets (at most %d)", MAX_UNIX_SOCKS);
		return -1;
	}
	if (listen(cd->listen_fd, 1) < 0 ||
	    (cd->listen_ev = mevent_add(cd->loop, cd->listen_fd, EPOLLIN, on_accept, cd)) == NULL) {
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Set O_NONBLOCK on stdout's own description, to be put back on exit. */
static int stdout_set_nonblock(void)
{
	int fl = fcntl(STDOUT_FILENO, F_GETFL);

	if (fl >= 0 && !(fl & O_NONBLOCK) && fcntl(STDOUT_FILENO, F_SETFL, fl | O_NONBLOCK) == 0)
		stdout_flags_saved = fl;
	return STDOUT_FILENO;
}

/*
 * The fd guest output goes to on stdio, one that never blocks.  stdout is
 * often one open file description with stdin and the user's shell (a
 * terminal), or shared with other processes (a pipe): O_NONBLOCK set on it
 * would stay after khyve exits, or is killed, and make the shell's reads
 * fail with EAGAIN.  poll() before write() is no way out either: a tty or
 * a pipe with some room still blocks a write larger than that room.  So a
 * pipe, FIFO or terminal is opened again through /proc/self/fd/1: a new
 * description of the same pipe or tty, with O_NONBLOCK of its own.  A
 * socket takes MSG_DONTWAIT per send; a regular file or /dev/null does
 * not block.  Only where /proc cannot reopen it is O_NONBLOCK set on the
 * shared description, and put back on exit (chardev_restore_terminals).
 */
static int stdio_output_fd(struct chardev *cd)
{
	struct stat st, again;
	int fd;

	if (fstat(STDOUT_FILENO, &st) < 0)
		return -1; /* closed: output goes nowhere */
	if (S_ISSOCK(st.st_mode)) {
		cd->out_is_socket = true;
		return STDOUT_FILENO;
	}
	if (!S_ISFIFO(st.st_mode) && !isatty(STDOUT_FILENO))
		return STDOUT_FILENO;
	/* A pty master (ptmx) would open a new pty instead. */
	if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(5, 2))
		return stdout_set_nonblock();
	fd = open("/proc/self/fd/1", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &again) == 0 && again.st_dev == st.st_dev &&
	    again.st_ino == st.st_ino && again.st_rdev == st.st_rdev) {
		cd->owns_out_fd = true;
		return fd;
	}
	if (fd >= 0)
		close(fd);
	return stdout_set_nonblock();
}

static int open_stdio(struct chardev *cd, char *err, size_t errlen)
{
	cd->in_fd = STDIN_FILENO;
	cd->out_fd = stdio_output_fd(cd);
	if (isatty(STDOUT_FILENO))
		guest_output_tty = STDOUT_FILENO;
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
	if (strncmp(spec, "unix=", 5) == 0) {
		cd->kind = CHARDEV_UNIX;
		return open_unix(cd, spec + 5, err, errlen);
	}
	if (spec[0] == '/') {
		cd->kind = CHARDEV_DEVICE;
		return open_device(cd, spec, err, errlen);
	}
	snprintf(err, errlen,
	         "unknown serial back end '%s' (want stdio, /dev/PATH, tcp=IP:PORT, pty=LINK or "
	         "unix=PATH)",
	         spec);
	return -1;
}

/* Watch `fd` for `events`; epoll refuses regular files and /dev/null,
 * which are always ready anyway: then an eventfd that always is (readable
 * once written, writable always) stands in, kept in *always. */
static struct mevent *watch_fd(struct chardev *cd, int fd, uint32_t events, mevent_cb_t cb,
                               int *always)
{
	struct mevent *ev = mevent_add(cd->loop, fd, events, cb, cd);

	if (ev != NULL || errno != EPERM)
		return ev;
	*always = eventfd(1, EFD_CLOEXEC);
	if (*always < 0)
		return NULL;
	return mevent_add(cd->loop, *always, events, cb, cd);
}

/* The loop's registrations: input (and output where it is the same fd);
 * stdio's stdout has one of its own, watched only while output waits. */
static int watch(struct chardev *cd)
{
	cd->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (cd->tick_fd < 0 ||
	    (cd->tick_ev = mevent_add(cd->loop, cd->tick_fd, EPOLLIN, on_tick, cd)) == NULL)
		return -1;
	if (HAS_CLIENTS(cd))
		return 0; /* input and output come with each client */
	cd->in_mask = EPOLLIN;
	cd->in_ev = watch_fd(cd, cd->in_fd, EPOLLIN, on_event, &cd->always_fd);
	if (cd->in_ev == NULL)
		return -1;
	if (cd->kind != CHARDEV_STDIO || cd->out_fd < 0)
		return 0;
	cd->out_ev = watch_fd(cd, cd->out_fd, 0, on_stdout_event, &cd->out_always_fd);
	return cd->out_ev != NULL ? 0 : -1;
}

struct chardev *chardev_open(const char *spec, struct mevent_loop *loop, chardev_ready_cb ready,
                             void *arg, char *err, size_t errlen)
{
	struct chardev *cd = calloc(1, sizeof(*cd));

	if (cd == NULL || (cd->ring.data = malloc(CHARDEV_OUT_MAX)) == NULL) {
		free(cd);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	cd->in_fd = cd->out_fd = cd->listen_fd = cd->always_fd = cd->slave_fd = -1;
	cd->out_always_fd = cd->link_slot = cd->sock_slot = cd->tick_fd = -1;
	cd->loop = loop;
	cd->ready = ready;
	cd->arg = arg;
	cd->drop_rl = (struct ratelimit)RATELIMIT_INIT;
	chardev_set_name(cd, "serial");
	pthread_mutex_init(&cd->lock, NULL);
	install_exit_handlers();
	if (register_open(cd) < 0) {
		snprintf(err, errlen, "too many serial back ends (at most %d)", MAX_CHARDEVS);
		chardev_close(cd);
		return NULL;
	}
	if (open_kind(cd, spec, err, errlen) < 0) {
		chardev_close(cd);
		return NULL;
	}
	if (watch(cd) < 0) {
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
	unregister_open(cd);
	flush_final(cd);
	mevent_delete(cd->in_ev);
	mevent_delete(cd->out_ev);
	mevent_delete(cd->listen_ev);
	mevent_delete(cd->tick_ev);
	if (cd->tick_fd >= 0)
		close(cd->tick_fd);
	if (cd->kind != CHARDEV_STDIO && cd->in_fd >= 0)
		close(cd->in_fd);
	if (cd->owns_out_fd)
		close(cd->out_fd);
	if (cd->listen_fd >= 0)
		close(cd->listen_fd);
	if (cd->always_fd >= 0)
		close(cd->always_fd);
	if (cd->out_always_fd >= 0)
		close(cd->out_always_fd);
	pty_link_remove(cd->link_slot);
	unix_sock_remove(cd->sock_slot);
	if (cd->slave_fd >= 0)
		close(cd->slave_fd);
	pthread_mutex_destroy(&cd->lock);
	free(cd->ring.data);
	free(cd);
}

/* ---- input ---- */

/* End of input (or a read error): stop watching, or wait for the next TCP
 * client. */
static void input_ended(struct chardev *cd)
{
	if (HAS_CLIENTS(cd)) {
		tcp_drop_client(cd);
		return;
	}
	pthread_mutex_lock(&cd->lock);
	cd->eof = true;
	if (cd->kind == CHARDEV_STDIO) {
		/* epoll reports a hang-up even unasked: a stdin pipe at its
		 * end would wake the loop forever.  in_ev watches input only
		 * here, and this runs in its callback (or with no loop). */
		mevent_delete(cd->in_ev);
		cd->in_ev = NULL;
	}
	update_watch_locked(cd);
	pthread_mutex_unlock(&cd->lock);
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
	input_ended(cd);
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
	if (cd->in_fd < 0 || len == 0 || cd->eof)
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

void chardev_pause_input(struct chardev *cd)
{
	pthread_mutex_lock(&cd->lock);
	cd->paused = true;
	update_watch_locked(cd);
	pthread_mutex_unlock(&cd->lock);
}

void chardev_resume_input(struct chardev *cd)
{
	pthread_mutex_lock(&cd->lock);
	cd->paused = false;
	update_watch_locked(cd);
	pthread_mutex_unlock(&cd->lock);
}

uint64_t chardev_dropped(struct chardev *cd)
{
	uint64_t n;

	pthread_mutex_lock(&cd->lock);
	n = cd->dropped;
	pthread_mutex_unlock(&cd->lock);
	return n;
}
