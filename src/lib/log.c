#include "lib/log.h"

#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/exitcode.h"
#include "lib/clock.h"
#include "lib/strescape.h"

enum log_level log_max_level = LOG_INFO;

/*
 * Whether stderr is a terminal, asked once: isatty() is an ioctl (TCGETS)
 * that the sandboxed device threads may not make (lib/sandbox.c), and a
 * guest can make any of them log.  -1: not asked yet (tools that never
 * call log_init_from_env() ask on their first line).
 */
static int stderr_is_tty = -1;

static bool stderr_tty(void)
{
	if (__atomic_load_n(&stderr_is_tty, __ATOMIC_RELAXED) < 0)
		__atomic_store_n(&stderr_is_tty, isatty(STDERR_FILENO) ? 1 : 0, __ATOMIC_RELAXED);
	return __atomic_load_n(&stderr_is_tty, __ATOMIC_RELAXED) == 1;
}

void log_init_from_env(void)
{
	const char *v = getenv("KHYVE_DEBUG");

	(void)stderr_tty();

	if (v != NULL && *v != '\0' && strcmp(v, "0") != 0)
		log_max_level = LOG_DEBUG;
}

/*
 * stderr may be a pipe nobody reads (`khyve ... 2>&1 | sleep`) or a
 * stopped terminal, and the thread logging may be a vCPU or the event
 * loop: a line waits at most LOG_WAIT_MS for room, and once one was
 * dropped the next ones do not wait until stderr takes a line again
 * (which then says how many were lost).  One writer at a time, so the
 * room poll() found is still there for the write.
 */
#define LOG_WAIT_MS 100
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long lines_dropped;

static bool stderr_has_room(void)
{
	struct pollfd p = {.fd = STDERR_FILENO, .events = POLLOUT};

	return poll(&p, 1, lines_dropped > 0 ? 0 : LOG_WAIT_MS) == 1 &&
	       !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

static void write_line(const char *line, const char *eol)
{
	char lost[64];

	pthread_mutex_lock(&write_lock);
	if (!stderr_has_room()) {
		lines_dropped++;
	} else {
		if (lines_dropped > 0) {
			snprintf(lost, sizeof(lost), "khyve: %lu log lines lost (stderr full)%s",
			         lines_dropped, eol);
			lines_dropped = 0;
			fputs(lost, stderr);
		}
		fprintf(stderr, "%s%s", line, eol);
	}
	pthread_mutex_unlock(&write_lock);
}

static void log_vprint(const char *fmt, va_list ap)
{
	char line[1024], safe[1024];
	size_t n;
	int len;

	len = snprintf(line, sizeof(line), "khyve: ");
	vsnprintf(line + len, sizeof(line) - (size_t)len, fmt, ap);
	n = strlen(line);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	/* One message, one line: a name, path or guest string with a newline
	 * or an escape sequence in it is shown escaped, never raw. */
	str_escape_controls(safe, sizeof(safe), line);
	/* A raw-mode terminal does not turn \n into \r\n. */
	write_line(safe, stderr_tty() ? "\r\n" : "\n");
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_max_level)
		return;
	va_start(ap, fmt);
	log_vprint(fmt, ap);
	va_end(ap);
}

/* Returns true when the message may be printed; reports a pending
 * suppression count when a new window starts. */
static bool ratelimit_admit(struct ratelimit *rl)
{
	uint64_t now = monotonic_ns();
	uint32_t suppressed = 0;
	bool admit;

	while (__atomic_exchange_n(&rl->lock, 1, __ATOMIC_ACQUIRE))
		;
	if (now - rl->window_start_ns > (uint64_t)rl->interval_s * 1000000000ull) {
		suppressed = rl->suppressed;
		rl->window_start_ns = now;
		rl->printed = 0;
		rl->suppressed = 0;
	}
	admit = rl->printed < rl->burst;
	if (admit)
		rl->printed++;
	else
		rl->suppressed++;
	__atomic_store_n(&rl->lock, 0, __ATOMIC_RELEASE);
	if (suppressed > 0)
		log_warn("%u similar messages suppressed", suppressed);
	return admit;
}

void log_ratelimited(struct ratelimit *rl, enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_max_level || !ratelimit_admit(rl))
		return;
	va_start(ap, fmt);
	log_vprint(fmt, ap);
	va_end(ap);
}

void fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vprint(fmt, ap);
	va_end(ap);
	exit(KHYVE_EXIT_ERROR);
}
