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

#endif
