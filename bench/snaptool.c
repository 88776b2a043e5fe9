/*
 * snaptool: the level-1 helpers of bench/lab-snap.
 *
 *   snaptool udpgap PORT
 *     Receives the level-2 guest's datagrams (a 64-bit sequence number
 *     each, bench/l2/snapguest.c) on UDP PORT and times their arrival with
 *     the kernel's receive time stamp (SO_TIMESTAMPNS), so that a moment
 *     this process waits for the CPU does not move the times (read on
 *     arrival instead, a backlog read during the migration's pause hid the
 *     pause).  Prints "GAP-FIRST" at the first datagram.
 *     SIGUSR1 ends a window: it prints "GAP n=N max_ms=M lost=L" (datagrams
 *     in the window, the longest time between two arrivals, sequence
 *     numbers never seen) and starts the next; SIGTERM prints the window
 *     and exits.  The longest gap around a migration is the time the
 *     guest was away as its peers see it.
 *
 *   snaptool qmp SOCKET COMMAND...
 *     Connects to QEMU's QMP socket (waiting up to 60 s for it to appear),
 *     leaves capabilities negotiation, and
 *     sends each COMMAND (one JSON object) in turn, printing each answer;
 *     the word "wait-migration" instead waits for the MIGRATION event
 *     with status completed (exit 0) or failed (exit 1), for 120 s at most
 *     (QEMU never ends a pre-copy that does not converge: then
 *     migrate_cancel, "did not converge", exit 1); "retry:COMMAND"
 *     sends COMMAND every 10 ms until it succeeds, for 5 s (QEMU 7.2
 *     refuses "cont" for a moment after the completed event: "Migration
 *     is not finalized yet"); "wait-paused" asks query-status every 10 ms
 *     until the guest is paused (an incoming migration of a guest saved
 *     paused has ended; QEMU keeps it paused).  Exits 1 on an "error"
 *     answer.
 *
 *   snaptool waitfor FILE TEXT SECONDS
 *     Waits until FILE (a VMM's console log) holds TEXT (looking every
 *     10 ms, in the bytes it has not read yet); prints the
 *     CLOCK_REALTIME time it saw it in nanoseconds (the shell's
 *     `date +%s%N`), or exits 1 after SECONDS.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- udpgap ---- */

static volatile sig_atomic_t window_end, stop;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		window_end = 1;
	else
		stop = 1;
}

struct window {
	uint64_t n, lost, max_gap_ns, last_ns, next_seq;
};

static void window_print(struct window *w)
{
	printf("GAP n=%llu max_ms=%.1f lost=%llu\n", (unsigned long long)w->n,
	       (double)w->max_gap_ns / 1e6, (unsigned long long)w->lost);
	fflush(stdout);
	/* The next window's first gap is measured from this arrival. */
	w->n = w->lost = w->max_gap_ns = 0;
}

static void window_add(struct window *w, uint64_t seq, uint64_t t)
{
	if (w->last_ns == 0) {
		printf("GAP-FIRST\n");
		fflush(stdout);
	} else if (t > w->last_ns && t - w->last_ns > w->max_gap_ns) {
		w->max_gap_ns = t - w->last_ns;
	}
	if (w->last_ns != 0 && seq > w->next_seq)
		w->lost += seq - w->next_seq;
	if (seq >= w->next_seq)
		w->next_seq = seq + 1;
	w->last_ns = t;
	w->n++;
}

static int open_receiver(long port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int s = socket(AF_INET, SOCK_DGRAM, 0), on = 1;

	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) < 0 ||
	    bind(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("snaptool udpgap: bind");
		return -1;
	}
	return s;
}

/* One datagram's sequence number and kernel arrival time; -1 if none. */
static int recv_stamped(int s, uint64_t *seq, uint64_t *t)
{
	char control[CMSG_SPACE(sizeof(struct timespec))];
	struct iovec iov = {seq, sizeof(*seq)};
	struct msghdr m = {.msg_iov = &iov,
	                   .msg_iovlen = 1,
	                   .msg_control = control,
	                   .msg_controllen = sizeof(control)};
	struct cmsghdr *c;

	if (recvmsg(s, &m, 0) != (ssize_t)sizeof(*seq))
		return -1;
	*t = clock_ns(CLOCK_REALTIME);
	for (c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
			struct timespec ts;

			memcpy(&ts, CMSG_DATA(c), sizeof(ts));
			*t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		}
	return 0;
}

static int udpgap(long port)
{
	struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART */
	struct window w = {0};
	int s = open_receiver(port);

	if (s < 0)
		return 1;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!stop) {
		uint64_t seq, t;

		if (recv_stamped(s, &seq, &t) == 0)
			window_add(&w, seq, t);
		if (window_end) {
			window_end = 0;
			window_print(&w);
		}
	}
	window_print(&w);
	return 0;
}

/* ---- qmp ---- */

#define QMP_MIGRATION_S 120u

static const struct timespec qmp_step_10ms = {0, 10000000};

static FILE *qmp_connect(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int s = socket(AF_UNIX, SOCK_STREAM, 0), rc = -1;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	for (int i = 0; s >= 0 && rc < 0 && i < 6000; i++)
		if ((rc = connect(s, (struct sockaddr *)&a, sizeof(a))) < 0)
			nanosleep(&qmp_step_10ms, NULL);
	if (rc < 0) {
		fprintf(stderr, "snaptool qmp: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	return fdopen(s, "r+");
}

/* The next line that answers a command (events skipped), or NULL. */
static char *qmp_answer(FILE *f, char **line, size_t *cap)
{
	while (getline(line, cap, f) > 0)
		if (strstr(*line, "\"return\"") != NULL || strstr(*line, "\"error\"") != NULL)
			return *line;
	return NULL;
}

static int qmp_command(FILE *f, const char *json, char **line, size_t *cap)
{
	char *a;

	fprintf(f, "%s\n", json);
	fflush(f);
	a = qmp_answer(f, line, cap);
	if (a == NULL) {
		fprintf(stderr, "snaptool qmp: no answer to %s\n", json);
		return -1;
	}
	fputs(a, stdout);
	return strstr(a, "\"error\"") != NULL ? -1 : 0;
}

static volatile sig_atomic_t qmp_late;

static void on_alarm(int sig)
{
	(void)sig;
	qmp_late = 1;
}

static int qmp_cancel(FILE *f)
{
	clearerr(f);
	fprintf(f, "{\"execute\":\"migrate_cancel\"}\n");
	fflush(f);
	fprintf(stderr, "snaptool qmp: the migration did not converge in %u s (cancelled)\n",
	        QMP_MIGRATION_S);
	return -1;
}

static int qmp_wait_migration(FILE *f, char **line, size_t *cap)
{
	struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */

	sigaction(SIGALRM, &sa, NULL);
	alarm(QMP_MIGRATION_S);
	while (getline(line, cap, f) > 0) {
		if (strstr(*line, "\"MIGRATION\"") == NULL)
			continue;
		if (strstr(*line, "\"completed\"") != NULL) {
			alarm(0);
			return 0;
		}
		if (strstr(*line, "\"failed\"") != NULL || strstr(*line, "\"cancelled\"") != NULL) {
			fputs(*line, stderr);
			return -1;
		}
	}
	if (qmp_late)
		return qmp_cancel(f);
	fprintf(stderr, "snaptool qmp: the monitor closed during the migration\n");
	return -1;
}

static int qmp_retry(FILE *f, const char *json, char **line, size_t *cap)
{
	for (int i = 0; i < 500; i++) {
		if (qmp_command(f, json, line, cap) == 0)
			return 0;
		nanosleep(&qmp_step_10ms, NULL);
	}
	return -1;
}

static int qmp_wait_paused(FILE *f, char **line, size_t *cap)
{
	for (int i = 0; i < 12000; i++) {
		if (qmp_command(f, "{\"execute\":\"query-status\"}", line, cap) < 0)
			return -1;
		if (strstr(*line, "\"paused\"") != NULL)
			return 0;
		nanosleep(&qmp_step_10ms, NULL);
	}
	fprintf(stderr, "snaptool qmp: the guest did not pause in 120 s\n");
	return -1;
}

static int qmp_step(FILE *f, const char *cmd, char **line, size_t *cap)
{
	if (strcmp(cmd, "wait-migration") == 0)
		return qmp_wait_migration(f, line, cap);
	if (strcmp(cmd, "wait-paused") == 0)
		return qmp_wait_paused(f, line, cap);
	if (strncmp(cmd, "retry:", 6) == 0)
		return qmp_retry(f, cmd + 6, line, cap);
	return qmp_command(f, cmd, line, cap);
}

static int qmp(const char *path, char **cmds, int n)
{
	FILE *f = qmp_connect(path);
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;

	if (f == NULL || getline(&line, &cap, f) <= 0 ||
	    qmp_command(f, "{\"execute\":\"qmp_capabilities\"}", &line, &cap) < 0)
		return 1;
	for (int i = 0; i < n && rc == 0; i++)
		rc = qmp_step(f, cmds[i], &line, &cap);
	free(line);
	fclose(f);
	return rc < 0 ? 1 : 0;
}

/* ---- waitfor ---- */

/*
 * A file read on as it grows, so that TEXT is looked for in new bytes only
 * (with the end of the old ones: TEXT may straddle two reads).
 */
struct follow {
	off_t off;
	size_t keep;
	char buf[1 << 16];
};

static int follow_has(struct follow *f, const char *path, const char *text)
{
	size_t tl = strlen(text);
	int fd = open(path, O_RDONLY), found = 0;
	ssize_t n;

	if (fd < 0)
		return 0;
	while (!found &&
	       (n = pread(fd, f->buf + f->keep, sizeof(f->buf) - 1 - f->keep, f->off)) > 0) {
		size_t len = f->keep + (size_t)n;

		f->off += n;
		found = memmem(f->buf, len, text, tl) != NULL;
		f->keep = len < tl ? len : tl - 1;
		memmove(f->buf, f->buf + len - f->keep, f->keep);
	}
	close(fd);
	return found;
}

static int waitfor(const char *path, const char *text, long seconds)
{
	uint64_t end = clock_ns(CLOCK_MONOTONIC) + (uint64_t)seconds * 1000000000u;
	struct timespec step = {0, 10000000};
	static struct follow f;

	if (text[0] == '\0' || strlen(text) >= sizeof(f.buf) / 2)
		return 2;
	while (clock_ns(CLOCK_MONOTONIC) < end) {
		if (follow_has(&f, path, text)) {
			printf("%llu\n", (unsigned long long)clock_ns(CLOCK_REALTIME));
			return 0;
		}
		nanosleep(&step, NULL);
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "udpgap") == 0)
		return udpgap(atol(argv[2]));
	if (argc >= 3 && strcmp(argv[1], "qmp") == 0)
		return qmp(argv[2], argv + 3, argc - 3);
	if (argc == 5 && strcmp(argv[1], "waitfor") == 0)
		return waitfor(argv[2], argv[3], atol(argv[4]));
	fprintf(stderr, "usage: snaptool udpgap PORT\n"
	                "       snaptool qmp SOCKET COMMAND...\n"
	                "       snaptool waitfor FILE TEXT SECONDS\n");
	return 2;
}
