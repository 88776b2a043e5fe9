/*
 * Auto-converge's vCPU throttle (docs/snapshots.md "Live migration"): while
 * machine_set_throttle() asks for pct > 0, each vCPU thread runs its
 * guest for VCPU_THROTTLE_SLICE_MS, then sleeps pct / (100 - pct) of that
 * (20 %: 2.5 ms, 99 %: 990 ms), as QEMU's cpu-throttle does, so that a
 * guest dirtying memory faster than a migration moves it slows down
 * enough for the dirty set to fit.  A POSIX timer of the thread's own
 * (CLOCK_MONOTONIC, SIGEV_THREAD_ID with the kick signal) ends a KVM_RUN
 * that would outlast its slice; a kick (a pause, an exit, a new
 * percentage) ends a sleep at once.
 */
#ifndef KHYVE_CORE_VCPU_THROTTLE_H
#define KHYVE_CORE_VCPU_THROTTLE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct machine;

#define VCPU_THROTTLE_SLICE_MS 10u
#define VCPU_THROTTLE_MAX_PCT  99u

/* One vCPU thread's throttle; zeroed before its first vcpu_throttle_point(). */
struct vcpu_throttle {
	timer_t timer;
	bool have_timer;    /* timer_create() succeeded and timer_delete() is due */
	uint64_t slice_end; /* CLOCK_MONOTONIC ns the running slice ends; 0: none */
};

/*
 * Called by the vCPU thread before each KVM_RUN: nothing while the
 * machine's throttle is 0 (the timer is deleted when it went back to 0);
 * else sleep once the slice has run out, and start the next slice.
 */
void vcpu_throttle_point(struct machine *m, struct vcpu_throttle *t);

/* The thread is ending: delete its timer. */
void vcpu_throttle_end(struct vcpu_throttle *t);

#endif
