/*
 * Unit tests for serial back ends (src/backend/chardev.h) on an mevent loop
 * (src/core/mevent.h): spec parsing and errors, /dev/null, a real TCP
 * round trip on 127.0.0.1, and pty=LINK with a client on the link.  stdio
 * is opened only in a child whose stdin is a pty of its own: in the test
 * process it would put the terminal running the tests into raw mode.
 */
#include "unit.h"

#include <poll.h>
#include <pty.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>

#include "backend/chardev.h"
#include "core/mevent.h"

static char err[512];

struct sink {
	struct chardev *cd;
	struct mevent_loop *loop;
	char got[64];
	size_t ngot;
	size_t want;
	unsigned calls;
};

static void on_ready(void *arg)
{
	struct sink *s = arg;
	size_t n;

	s->calls++;
	n = chardev_read(s->cd, s->got + s->ngot, sizeof(s->got) - 1 - s->ngot);
	s->ngot += n;
	s->got[s->ngot] = '\0';
	if (s->ngot >= s->want || s->calls > 1000)
		mevent_loop_stop(s->loop);
}

static int loop_setup(void **state)
{
	struct mevent_loop *loop = mevent_loop_create();

	if (loop == NULL)
		return -1;
	*state = loop;
	memset(err, 0, sizeof(err));
	alarm(20); /* a hung event loop fails the run instead of blocking it */
	return 0;
}

static int loop_teardown(void **state)
{
	alarm(0);
	mevent_loop_free(*state);
	return 0;
}

static struct chardev *open_spec(struct mevent_loop *loop, const char *spec, struct sink *s)
{
	memset(err, 'Z', sizeof(err) - 1);
	err[sizeof(err) - 1] = '\0';
	return chardev_open(spec, loop, on_ready, s, err, sizeof(err));
}

static void expect_open_error(struct mevent_loop *loop, const char *spec, const char *needle)
{
	struct sink s = {0};
	struct chardev *cd = open_spec(loop, spec, &s);

	if (cd != NULL) {
		chardev_close(cd);
		fail_msg("chardev_open('%s') succeeded", spec);
	}
	assert_true(err[0] != 'Z');
	assert_contains(err, needle);
	assert_null(strchr(err, '\n'));
}

static void test_bad_specs(void **state)
{
	struct mevent_loop *loop = *state;

	expect_open_error(loop, "tcp=nope", "nope");
	expect_open_error(loop, "tcp=nope", "tcp");
	expect_open_error(loop, "tcp=1.2.3.4:99999", "1.2.3.4:99999");
	expect_open_error(loop, "tcp=127.0.0.1:0", "127.0.0.1:0");
	expect_open_error(loop, "tcp=127.0.0.1:-1", "127.0.0.1:-1");
	expect_open_error(loop, "tcp=127.0.0.1:", "127.0.0.1:");
	expect_open_error(loop, "tcp=127.0.0.1:80x", "80x");
	expect_open_error(loop, "tcp=:4444", ":4444");
	expect_open_error(loop, "tcp=", "tcp");
	expect_open_error(loop, "tcp=300.1.1.1:4444", "300.1.1.1");
	expect_open_error(loop,
	                  "tcp=127.000000000000000000000000000000000000000000000000000000000000000"
	                  "000.0.1:4444",
	                  "tcp");
	expect_open_error(loop, "bogus", "bogus");
	expect_open_error(loop, "bogus", "back end");
	expect_open_error(loop, "", "back end");
	expect_open_error(loop, "stdio2", "stdio2");
	expect_open_error(loop, "TCP=127.0.0.1:4444", "TCP=");
	expect_open_error(loop, "dev/ttyS0", "dev/ttyS0");
}

static void test_missing_device(void **state)
{
	struct mevent_loop *loop = *state;
	char *dir = unit_mkdtemp(), path[600];

	if (dir == NULL) {
		fail_msg("cannot make a temporary directory");
		return;
	}
	snprintf(path, sizeof(path), "%s/no-such-tty", dir);
	expect_open_error(loop, path, path);
	/* A directory is not a character device either. */
	expect_open_error(loop, dir, dir);
	unit_rmtree(dir);
	free(dir);
	expect_open_error(loop, "/nonexistent/dev/ttyS9", "/nonexistent/dev/ttyS9");
}

static void test_dev_null(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};

	/* /dev/null cannot be watched by epoll: accepted, output discarded. */
	s.cd = open_spec(loop, "/dev/null", &s);
	assert_non_null(s.cd);
	chardev_write(s.cd, "discarded", 9);
	/* The user's escape is for a terminal on stdio only. */
	assert_false(chardev_set_escape(s.cd, '~', NULL, NULL));
	chardev_pause_input(s.cd);
	chardev_resume_input(s.cd);
	chardev_close(s.cd);
	chardev_close(NULL);
}

/* The stdio escape child: what the guest got, read `room` bytes at a time
 * (room 1: a held ~ and the byte after it must wait their turn). */
struct escape_child {
	struct sink s;
	size_t room;
	bool quit;
};

static void on_ready_room(void *arg)
{
	struct escape_child *c = arg;

	if (c->s.ngot + c->room < sizeof(c->s.got))
		c->s.ngot += chardev_read(c->s.cd, c->s.got + c->s.ngot, c->room);
	if (++c->s.calls > 1000)
		mevent_loop_stop(c->s.loop);
}

static void on_escape_quit(void *arg)
{
	struct escape_child *c = arg;

	c->quit = true;
	mevent_loop_stop(c->s.loop);
}

/* In the child: stdin a pty slave with `typed` waiting, stdout and stderr
 * /dev/null; 0 when the guest got exactly `want` and ~. called quit. */
static int escape_child_run(const char *typed, const char *want, size_t room)
{
	struct escape_child c = {{0}, room, false};
	int master, slave, null = open("/dev/null", O_WRONLY);

	alarm(10); /* fork cleared the parent's: a hung child must die too */
	if (null < 0 || openpty(&master, &slave, NULL, NULL, NULL) < 0 ||
	    dup2(slave, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
	    dup2(null, STDERR_FILENO) < 0)
		return 2;
	c.s.loop = mevent_loop_create();
	c.s.cd = chardev_open("stdio", c.s.loop, on_ready_room, &c, err, sizeof(err));
	if (c.s.cd == NULL || !chardev_set_escape(c.s.cd, '~', on_escape_quit, &c))
		return 3;
	if (write(master, typed, strlen(typed)) != (ssize_t)strlen(typed))
		return 4;
	mevent_loop_run(c.s.loop);
	c.s.got[c.s.ngot] = '\0';
	return c.quit && strcmp(c.s.got, want) == 0 ? 0 : 5;
}

/* stdio on a terminal: ~~ gives one ~, ~? only prints help, ~. stops;
 * the bytes after ~. never reach the guest. */
static void test_stdio_escape(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	for (size_t room = 1; room <= 2; room++) {
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(escape_child_run("ab\r~~c~x\r~y~?\r~?\r~.zz", "ab\r~c~x\r~y~?\r\r",
			                       room));
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
}

/* A back end epoll cannot watch: reads say "nothing" (EOF), repeatedly,
 * without touching a missing event. */
static void test_read_unwatchable(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};
	char buf[8];

	s.cd = open_spec(loop, "/dev/null", &s);
	assert_non_null(s.cd);
	assert_int_equal(chardev_read(s.cd, buf, sizeof(buf)), 0);
	assert_int_equal(chardev_read(s.cd, buf, sizeof(buf)), 0);
	assert_int_equal(chardev_read(s.cd, buf, 0), 0);
	chardev_resume_input(s.cd); /* after EOF: stays off */
	chardev_close(s.cd);
}

/* A regular file as input: its bytes arrive through `ready`, then EOF. */
static void test_regular_file_input(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};
	char *dir = unit_mkdtemp(), *file, buf[8];

	if (dir == NULL) {
		fail_msg("cannot make a temporary directory");
		return;
	}
	file = unit_write_text(dir, "input.txt", "typed ahead");
	assert_non_null(file);
	s.loop = loop;
	s.want = strlen("typed ahead");
	s.cd = open_spec(loop, file, &s);
	assert_non_null(s.cd);
	assert_int_equal(mevent_loop_run(loop), 0);
	assert_string_equal(s.got, "typed ahead");
	assert_int_equal(chardev_read(s.cd, buf, sizeof(buf)), 0);
	chardev_close(s.cd);
	free(file);
	unit_rmtree(dir);
	free(dir);
}

/* A free TCP port on 127.0.0.1 (racy, but fine on a test machine). */
static int free_port(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	assert_true(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

static int connect_to(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

static void test_tcp_round_trip(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};
	char spec[64], buf[64];
	int port = free_port(), client;
	ssize_t n;
	size_t got = 0;

	snprintf(spec, sizeof(spec), "tcp=127.0.0.1:%d", port);
	s.loop = loop;
	s.cd = open_spec(loop, spec, &s);
	assert_non_null(s.cd);

	/* Output before anyone connects is dropped, not queued or blocking. */
	chardev_write(s.cd, "lost", 4);

	client = connect_to(port);
	assert_int_equal(write(client, "hello", 5), 5);
	s.want = 5;
	assert_int_equal(mevent_loop_run(loop), 0);
	assert_string_equal(s.got, "hello");

	/* Output reaches the client. */
	chardev_write(s.cd, "world", 5);
	while (got < 5) {
		n = read(client, buf + got, sizeof(buf) - got);
		assert_true(n > 0);
		got += (size_t)n;
	}
	assert_memory_equal(buf, "world", 5);

	close(client);
	chardev_close(s.cd);
}

static void test_tcp_port_in_use(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};
	struct chardev *first;
	char spec[64];
	int port = free_port();

	snprintf(spec, sizeof(spec), "tcp=127.0.0.1:%d", port);
	first = open_spec(loop, spec, &s);
	assert_non_null(first);
	expect_open_error(loop, spec, "cannot listen");
	chardev_close(first);
	/* Free again once closed. */
	first = open_spec(loop, spec, &s);
	assert_non_null(first);
	chardev_close(first);
}

static void test_tcp_second_client_refused(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};
	char spec[64], c;
	int port = free_port(), a, b;

	snprintf(spec, sizeof(spec), "tcp=127.0.0.1:%d", port);
	s.loop = loop;
	s.cd = open_spec(loop, spec, &s);
	assert_non_null(s.cd);
	a = connect_to(port);
	b = connect_to(port); /* queued in the backlog, accepted and closed */
	assert_int_equal(write(a, "A", 1), 1);
	assert_int_equal(write(b, "B", 1), 1);
	s.want = 1;
	assert_int_equal(mevent_loop_run(loop), 0);
	assert_string_equal(s.got, "A");
	/* Only the first client is heard and answered. */
	chardev_write(s.cd, "x", 1);
	assert_int_equal(read(a, &c, 1), 1);
	assert_int_equal(c, 'x');
	close(a);
	close(b);
	chardev_close(s.cd);
}

/* A pty chardev at DIR/com1.pty; the directory string is the caller's. */
static struct chardev *open_pty_at(struct mevent_loop *loop, struct sink *s, char **dir, char *link,
                                   size_t len)
{
	char spec[700];

	*dir = unit_mkdtemp();
	assert_non_null(*dir);
	snprintf(link, len, "%s/com1.pty", *dir);
	snprintf(spec, sizeof(spec), "pty=%s", link);
	s->loop = loop;
	return open_spec(loop, spec, s);
}

static int open_client(const char *link)
{
	int fd = open(link, O_RDWR | O_NOCTTY);

	assert_true(fd >= 0);
	return fd;
}

/* Read exactly `len` bytes from a blocking fd. */
static void read_exactly(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		assert_true(n > 0);
		got += (size_t)n;
	}
}

static void test_pty_round_trip(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};
	char *dir, link[600], target[64], buf[16];
	ssize_t n;
	int client;

	s.cd = open_pty_at(loop, &s, &dir, link, sizeof(link));
	assert_non_null(s.cd);
	n = readlink(link, target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_contains(target, "/dev/pts/");

	client = open_client(link);
	assert_int_equal(write(client, "hello\n", 6), 6);
	s.want = 6;
	assert_int_equal(mevent_loop_run(loop), 0);
	/* Raw: the newline arrives as typed, not as CR or CR LF. */
	assert_string_equal(s.got, "hello\n");

	chardev_write(s.cd, "out\n", 4);
	read_exactly(client, buf, 4);
	assert_memory_equal(buf, "out\n", 4); /* no ONLCR: not "out\r\n" */
	close(client);

	chardev_close(s.cd);
	assert_int_equal(access(link, F_OK), -1); /* removed on close */
	unit_rmtree(dir);
	free(dir);
}

/* For the reattach test: on the first byte the client leaves; 100 ms
 * later (the loop watching the master meanwhile) a new client types the
 * second byte; a second timer ends the loop should that byte never come.
 * An mevent loop runs only once, so all of it happens inside the loop. */
struct reattach {
	struct sink s;
	const char *link;
	int client;
	int timer;
	bool reopened;
};

static void arm_timer(int fd, long ms)
{
	struct itimerspec its = {.it_value = {ms / 1000, (ms % 1000) * 1000000}};

	assert_int_equal(timerfd_settime(fd, 0, &its, NULL), 0);
}

static void on_ready_reattach(void *arg)
{
	struct reattach *r = arg;
	size_t before = r->s.ngot;

	on_ready(&r->s);
	if (before == 0 && r->s.ngot == 1) {
		close(r->client);
		r->client = -1;
		arm_timer(r->timer, 100);
	}
}

static void on_reattach_timer(int fd, uint32_t events, void *arg)
{
	struct reattach *r = arg;
	uint64_t ticks;

	(void)events;
	assert_int_equal(read(fd, &ticks, sizeof(ticks)), sizeof(ticks));
	if (r->reopened) { /* the second byte never arrived */
		mevent_loop_stop(r->s.loop);
		return;
	}
	r->reopened = true;
	r->client = open_client(r->link);
	assert_int_equal(write(r->client, "b", 1), 1);
	arm_timer(r->timer, 2000);
}

/* Regression guard: a client leaving must not hang up the master (EIO,
 * input switched off for good) nor make the loop spin; the next client is
 * heard as the first was. */
static void test_pty_client_reattach(void **state)
{
	struct mevent_loop *loop = *state;
	struct reattach r = {0};
	char *dir = unit_mkdtemp(), link[600], spec[700];
	struct mevent *tev;

	assert_non_null(dir);
	snprintf(link, sizeof(link), "%s/com1.pty", dir);
	snprintf(spec, sizeof(spec), "pty=%s", link);
	r.link = link;
	r.s.loop = loop;
	r.s.want = 2;
	r.timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	assert_true(r.timer >= 0);
	tev = mevent_add(loop, r.timer, 0x001 /* EPOLLIN */, on_reattach_timer, &r);
	assert_non_null(tev);
	r.s.cd = chardev_open(spec, loop, on_ready_reattach, &r, err, sizeof(err));
	assert_non_null(r.s.cd);
	r.client = open_client(link);
	assert_int_equal(write(r.client, "a", 1), 1);
	assert_int_equal(mevent_loop_run(loop), 0);
	assert_string_equal(r.s.got, "ab");
	assert_true(r.s.calls <= 4);
	close(r.client);
	mevent_delete(tev);
	close(r.timer);
	chardev_close(r.s.cd);
	unit_rmtree(dir);
	free(dir);
}

/* With nobody attached, output fills the pty's buffer; then the oldest is
 * discarded so chardev_write() never blocks (alarm() catches a hang) and a
 * client attaching later reads the newest output, ending with the last
 * line written. */
static void test_pty_output_without_client(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};
	char *dir, link[600], chunk[4096], buf[4096], last[8] = "";
	int client;
	size_t total = 0;

	s.cd = open_pty_at(loop, &s, &dir, link, sizeof(link));
	assert_non_null(s.cd);
	memset(chunk, 'x', sizeof(chunk));
	for (int i = 0; i < 256; i++) /* 1 MiB: far more than a pty holds */
		chardev_write(s.cd, chunk, sizeof(chunk));
	chardev_write(s.cd, "END!", 4);
	client = open_client(link);
	for (;;) {
		struct pollfd p = {.fd = client, .events = POLLIN};
		ssize_t n;
		if (poll(&p, 1, 200) <= 0 || (n = read(client, buf, sizeof(buf))) <= 0)
			break;
		total += (size_t)n;
		if (n >= 4)
			memcpy(last, buf + n - 4, 4);
	}
	assert_true(total > 4);
	assert_string_equal(last, "END!");
	close(client);
	chardev_close(s.cd);
	unit_rmtree(dir);
	free(dir);
}

/* A stale link a killed khyve left (to a /dev/pts/N that is gone) is
 * replaced; a LINK.tmp beside it is none of khyve's business. */
static void test_pty_link_stale_replaced(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};
	char *dir = unit_mkdtemp(), link[600], spec[700], tmp[620];
	struct stat st;

	assert_non_null(dir);
	snprintf(link, sizeof(link), "%s/com1.pty", dir);
	snprintf(spec, sizeof(spec), "pty=%s", link);
	snprintf(tmp, sizeof(tmp), "%s.tmp", link);

	assert_int_equal(symlink("/dev/pts/999999", link), 0);
	assert_int_equal(symlink("/dev/null", tmp), 0);
	s.cd = open_spec(loop, spec, &s);
	assert_non_null(s.cd);
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(stat(link, &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	assert_int_equal(lstat(tmp, &st), 0); /* left alone */
	chardev_close(s.cd);
	assert_int_equal(lstat(link, &st), -1); /* ours: removed */
	unit_rmtree(dir);
	free(dir);
}

/* open_spec() on `spec` fails naming `link` and `why`. */
static void expect_link_refused(struct mevent_loop *loop, const char *spec, const char *link,
                                const char *why)
{
	expect_open_error(loop, spec, link);
	assert_contains(err, why);
}

/* Anything else at LINK is refused (and left as it was): a file, a
 * directory, a symlink to a file, a dangling symlink elsewhere, a link
 * to a pty that is alive and not ours. */
static void test_pty_link_refused(void **state)
{
	struct mevent_loop *loop = *state;
	char *dir = unit_mkdtemp(), link[600], spec[700], victim[620], buf[16] = "";
	char *file, slave[64];
	int master, slave_fd, fd;
	struct stat st;

	assert_non_null(dir);
	snprintf(link, sizeof(link), "%s/com1.pty", dir);
	snprintf(spec, sizeof(spec), "pty=%s", link);

	file = unit_write_text(dir, "com1.pty", "precious");
	assert_non_null(file);
	expect_link_refused(loop, spec, link, "regular file");
	fd = open(link, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf) - 1), 8);
	close(fd);
	assert_string_equal(buf, "precious");
	assert_int_equal(unlink(link), 0);
	free(file);

	assert_int_equal(mkdir(link, 0755), 0);
	expect_link_refused(loop, spec, link, "directory");
	assert_int_equal(rmdir(link), 0);

	free(unit_write_text(dir, "victim", "x"));
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	assert_int_equal(symlink(victim, link), 0);
	expect_link_refused(loop, spec, link, "not a stale khyve pty");
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(stat(victim, &st), 0);
	assert_int_equal(unlink(link), 0);

	assert_int_equal(symlink("/nonexistent/elsewhere", link), 0);
	expect_link_refused(loop, spec, link, "/nonexistent/elsewhere");
	assert_int_equal(unlink(link), 0);

	assert_int_equal(openpty(&master, &slave_fd, slave, NULL, NULL), 0);
	assert_int_equal(symlink(slave, link), 0);
	expect_link_refused(loop, spec, link, slave);
	close(master);
	close(slave_fd);
	assert_int_equal(unlink(link), 0);
	unit_rmtree(dir);
	free(dir);
}

/* Close leaves LINK alone once it names something else (a newer khyve). */
static void test_pty_link_taken_over(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};
	char *dir, link[600], target[64];
	ssize_t n;

	s.cd = open_pty_at(loop, &s, &dir, link, sizeof(link));
	assert_non_null(s.cd);
	assert_int_equal(unlink(link), 0);
	assert_int_equal(symlink("/dev/pts/other", link), 0);
	chardev_close(s.cd);
	n = readlink(link, target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_string_equal(target, "/dev/pts/other");
	unit_rmtree(dir);
	free(dir);
}

static void test_pty_bad_links(void **state)
{
	struct mevent_loop *loop = *state;

	expect_open_error(loop, "pty=", "pty=");
	expect_open_error(loop, "pty=/nonexistent/dir/com1.pty", "/nonexistent/dir/com1.pty");
}

/* Run `loop` for about `ms` milliseconds (a loop runs only once). */
static void on_stop_timer(int fd, uint32_t events, void *arg)
{
	uint64_t ticks;

	(void)events;
	assert_int_equal(read(fd, &ticks, sizeof(ticks)), sizeof(ticks));
	mevent_loop_stop(arg);
}

static void run_loop_for(struct mevent_loop *loop, long ms)
{
	int t = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	struct mevent *ev;

	assert_true(t >= 0);
	arm_timer(t, ms);
	ev = mevent_add(loop, t, 0x001 /* EPOLLIN */, on_stop_timer, loop);
	assert_non_null(ev);
	assert_int_equal(mevent_loop_run(loop), 0);
	mevent_delete(ev);
	close(t);
}

/* Bytes readable on `fd` within `ms`, up to `len`. */
static size_t read_for(int fd, char *buf, size_t len, int ms)
{
	size_t got = 0;
	struct pollfd p = {.fd = fd, .events = POLLIN};

	while (got < len && poll(&p, 1, ms) > 0) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

/* chardev_queue(): single bytes wait for the loop's tick (no write per
 * byte); a batch of CHARDEV_OUT_BATCH goes out at once. */
static void test_queue_batches(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};
	static char big[CHARDEV_OUT_BATCH], got[CHARDEV_OUT_BATCH + 8];
	char *dir, link[600];
	int client;

	s.cd = open_pty_at(loop, &s, &dir, link, sizeof(link));
	assert_non_null(s.cd);
	client = open_client(link);
	chardev_queue(s.cd, "a", 1);
	chardev_queue(s.cd, "b", 1);
	chardev_queue(s.cd, "c", 1);
	assert_int_equal(read_for(client, got, sizeof(got), 50), 0);
	run_loop_for(loop, 30);
	assert_int_equal(read_for(client, got, sizeof(got), 50), 3);
	assert_memory_equal(got, "abc", 3);
	memset(big, 'y', sizeof(big));
	chardev_queue(s.cd, big, sizeof(big));
	assert_int_equal(read_for(client, got, sizeof(got), 500), sizeof(big));
	assert_int_equal(chardev_dropped(s.cd), 0);
	close(client);
	chardev_close(s.cd);
	unit_rmtree(dir);
	free(dir);
}

/* Fork a child whose stdout is a pipe (stdin, stderr /dev/null) and run `fn`
 * there; the parent gets the pipe's read end in *rd and the child's pid. */
static pid_t fork_with_stdout_pipe(int (*fn)(void), int *rd, bool close_read)
{
	int p[2];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	if (close_read) {
		close(p[0]);
		p[0] = -1;
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		alarm(20); /* a write that blocks fails the test instead of hanging it */
		if (p[0] >= 0)
			close(p[0]);
		if (null < 0 || dup2(p[1], STDOUT_FILENO) < 0 || dup2(null, STDERR_FILENO) < 0 ||
		    dup2(null, STDIN_FILENO) < 0)
			_exit(2);
		_exit(fn());
	}
	close(p[1]);
	*rd = p[0];
	return pid;
}

static int wait_exit_status(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* In the child: 2 MiB into a pipe nobody reads, by single queued bytes and
 * by 4 KiB writes.  Nothing blocks; what neither the pipe nor the ring
 * holds is counted as dropped; stdout's shared description stays blocking. */
static int unread_pipe_child(void)
{
	struct mevent_loop *loop = mevent_loop_create();
	static struct sink s;
	struct chardev *cd = chardev_open("stdio", loop, on_ready, &s, err, sizeof(err));
	static char chunk[4096];
	uint64_t dropped;

	if (cd == NULL)
		return 3;
	for (int i = 0; i < 1024 * 1024; i++)
		chardev_queue(cd, "q", 1);
	memset(chunk, 'w', sizeof(chunk));
	for (int i = 0; i < 256; i++)
		chardev_write(cd, chunk, sizeof(chunk));
	dropped = chardev_dropped(cd);
	if (dropped < 2 * 1024 * 1024 - 2 * CHARDEV_OUT_MAX - 1024 * 1024 ||
	    dropped > 2 * 1024 * 1024 - CHARDEV_OUT_MAX)
		return 4;
	if (fcntl(STDOUT_FILENO, F_GETFL) & O_NONBLOCK)
		return 5;
	chardev_close(cd); /* waits CHARDEV_EXIT_WAIT_MS for a reader, in vain */
	mevent_loop_free(loop);
	return 0;
}

static void test_stdio_unread_pipe(void **state)
{
	int rd;
	pid_t pid;

	(void)state;
	pid = fork_with_stdout_pipe(unread_pipe_child, &rd, false);
	assert_int_equal(wait_exit_status(pid), 0);
	close(rd);
}

/* In the child: the pipe's reader is gone (EPIPE; SIGPIPE is ignored, as
 * in khyve): output is dropped and counted, and the loop does not spin on
 * the error epoll keeps reporting. */
static int reader_gone_child(void)
{
	struct mevent_loop *loop = mevent_loop_create();
	static struct sink s;
	struct chardev *cd = chardev_open("stdio", loop, on_ready, &s, err, sizeof(err));

	if (cd == NULL)
		return 3;
	s.cd = cd;
	s.loop = loop;
	s.want = 1;
	chardev_write(cd, "lost", 4);
	chardev_queue(cd, "more", 4);
	run_loop_for(loop, 50);
	if (chardev_dropped(cd) != 8)
		return 4;
	chardev_close(cd);
	mevent_loop_free(loop);
	return 0;
}

static void test_stdio_reader_gone(void **state)
{
	int rd;
	pid_t pid;

	(void)state;
	pid = fork_with_stdout_pipe(reader_gone_child, &rd, true);
	assert_int_equal(wait_exit_status(pid), 0);
}

/* In the child: queued output the loop never wrote is flushed at exit. */
static int exit_flush_child(void)
{
	struct mevent_loop *loop = mevent_loop_create();
	static struct sink s;
	struct chardev *cd = chardev_open("stdio", loop, on_ready, &s, err, sizeof(err));

	if (cd == NULL)
		return 3;
	for (int i = 0; i < 3000; i++)
		chardev_queue(cd, "e", 1);
	exit(0); /* atexit: the last flush */
}

static void test_exit_flush(void **state)
{
	static char buf[8192];
	int rd;
	pid_t pid;

	(void)state;
	pid = fork_with_stdout_pipe(exit_flush_child, &rd, false);
	assert_int_equal(read_for(rd, buf, sizeof(buf), 5000), 3000);
	assert_int_equal(wait_exit_status(pid), 0);
	close(rd);
}

/* A tty device whose other side goes away: input ends, and the hang-up
 * epoll keeps reporting neither spins the loop nor is written to. */
static void test_device_hangup(void **state)
{
	struct mevent_loop *loop = *state;
	struct sink s = {0};
	char slave[64];
	int master, slave_fd;

	assert_int_equal(openpty(&master, &slave_fd, slave, NULL, NULL), 0);
	s.loop = loop;
	s.want = 1000000; /* never: the timer ends the loop */
	s.cd = open_spec(loop, slave, &s);
	assert_non_null(s.cd);
	close(slave_fd);
	close(master);
	run_loop_for(loop, 200);
	assert_true(s.calls < 10);
	chardev_write(s.cd, "gone", 4);
	assert_true(chardev_dropped(s.cd) >= 4);
	chardev_close(s.cd);
}

static void test_loop_basics(void **state)
{
	struct mevent_loop *loop = *state;
	struct mevent *ev;
	int fds[2];

	(void)loop;
	assert_int_equal(pipe(fds), 0);
	/* A regular fd can be watched, paused and removed. */
	ev = mevent_add(loop, fds[0], 0x001 /* EPOLLIN */, NULL, NULL);
	assert_non_null(ev);
	assert_int_equal(mevent_enable(ev, false), 0);
	assert_int_equal(mevent_enable(ev, true), 0);
	mevent_delete(ev);
	mevent_delete(NULL);
	/* Adding the same fd twice or a closed fd fails. */
	ev = mevent_add(loop, fds[0], 0x001, NULL, NULL);
	assert_non_null(ev);
	assert_null(mevent_add(loop, fds[0], 0x001, NULL, NULL));
	mevent_delete(ev);
	close(fds[0]);
	close(fds[1]);
	assert_null(mevent_add(loop, fds[0], 0x001, NULL, NULL));
	mevent_loop_free(NULL);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, loop_setup, loop_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_bad_specs),
	    T(test_missing_device),
	    T(test_dev_null),
	    T(test_read_unwatchable),
	    T(test_regular_file_input),
	    T(test_tcp_round_trip),
	    T(test_tcp_port_in_use),
	    T(test_tcp_second_client_refused),
	    T(test_pty_round_trip),
	    T(test_pty_client_reattach),
	    T(test_pty_output_without_client),
	    T(test_pty_link_stale_replaced),
	    T(test_pty_link_refused),
	    T(test_pty_link_taken_over),
	    T(test_pty_bad_links),
	    T(test_queue_batches),
	    T(test_stdio_unread_pipe),
	    T(test_stdio_reader_gone),
	    T(test_exit_flush),
	    T(test_device_hangup),
	    T(test_loop_basics),
	    T(test_stdio_escape),
	};
#undef T

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
