/*
 * Logging for khyve: one line per message on stderr, prefixed with "khyve: ".
 *
 * Messages caused by the guest go through log_ratelimited() so a hostile or
 * broken guest cannot flood the host's logs.
 */
#ifndef KHYVE_LOG_H
#define KHYVE_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Messages above this level are dropped.  Default LOG_INFO; KHYVE_DEBUG=1 in
 * the environment raises it to LOG_DEBUG. */
extern enum log_level log_max_level;

void log_init_from_env(void);

/* Print one message.  A trailing newline is added when missing.  Because
 * stdio may be a raw terminal, lines end in "\r\n" when stderr is a tty. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/*
 * A rate limit: at most `burst` messages per `interval_s` seconds; when a
 * window ends, the count of suppressed messages is reported once.
 * Zero-initialise with RATELIMIT_INIT.  Thread-safe.
 */
struct ratelimit {
	uint32_t interval_s;
	uint32_t burst;
	uint64_t window_start_ns;
	uint32_t printed;
	uint32_t suppressed;
	int lock; /* spinlock word; 0 = free */
};

#define RATELIMIT_INIT                                                                             \
	{                                                                                          \
		.interval_s = 5, .burst = 10                                                       \
	}

/* Log at `level` unless `rl` says too many were printed recently. */
void log_ratelimited(struct ratelimit *rl, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Fatal start-up error: print "khyve: <message>" and exit with status 4
 * (bhyve's error status).  atexit handlers run, so the terminal is restored.
 * Never call this on guest input: a guest must not be able to kill khyve.
 */
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
