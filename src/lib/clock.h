/*
 * Monotonic time in nanoseconds (CLOCK_MONOTONIC), for boot probes, poll
 * windows, rate limits and benchmarks.
 */
#ifndef KHYVE_CLOCK_H
#define KHYVE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* `ns` nanoseconds as a struct timespec (a duration for ppoll(2), or a
 * CLOCK_MONOTONIC moment for timerfd_settime(2) and timer_settime(2)). */
static inline struct timespec ns_to_timespec(uint64_t ns)
{
	return (struct timespec){.tv_sec = (time_t)(ns / 1000000000u),
	                         .tv_nsec = (long)(ns % 1000000000u)};
}

/*
 * The moment `ms` milliseconds from now on CLOCK_REALTIME, the clock
 * pthread_cond_timedwait() counts by default: a deadline for it.
 */
static inline struct timespec realtime_deadline_after(unsigned ms)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

#endif
