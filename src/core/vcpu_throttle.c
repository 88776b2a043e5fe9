/* vCPU throttling for auto-converge; see vcpu_throttle.h. */
#include "core/vcpu_throttle.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "core/machine.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "vmm/vcpu.h"

#define SLICE_NS ((uint64_t)VCPU_THROTTLE_SLICE_MS * 1000000u)

/* Older glibc headers do not name the thread-id member (sigevent(3type)). */
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* A timer that sends this thread the kick signal: KVM_RUN unblocks that
 * signal (vcpu_block_kick), so it ends the run with EINTR. */
static bool make_timer(struct vcpu_throttle *t)
{
	struct sigevent sev;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = vcpu_kick_signal();
	sev.sigev_notify_thread_id = gettid();
	if (timer_create(CLOCK_MONOTONIC, &sev, &t->timer) < 0) {
		/* Without it a guest that never exits is throttled only at
		 * its exits: slower convergence, still correct. */
		log_warn("vCPU throttle: timer_create: %s", strerror(errno));
		return false;
	}
	t->have_timer = true;
	return true;
}

static void arm_slice(struct vcpu_throttle *t)
{
	struct itimerspec its = {.it_value = ns_to_timespec(SLICE_NS)};

	t->slice_end = monotonic_ns() + SLICE_NS;
	if (t->have_timer || make_timer(t))
		(void)timer_settime(t->timer, 0, &its, NULL);
}

static bool throttle_wanted(struct machine *m, unsigned pct)
{
	return __atomic_load_n(&m->throttle_pct, __ATOMIC_SEQ_CST) == pct &&
	       !__atomic_load_n(&m->pause_requested, __ATOMIC_SEQ_CST) &&
	       !__atomic_load_n(&m->exit_requested, __ATOMIC_SEQ_CST);
}

/* Sleep `ns`, waking early for a kick after which the sleep is no longer
 * wanted (a pause, an exit, another percentage). */
static void throttle_sleep(struct machine *m, unsigned pct, uint64_t ns)
{
	uint64_t end = monotonic_ns() + ns, now;
	sigset_t kick;

	sigemptyset(&kick);
	sigaddset(&kick, vcpu_kick_signal());
	while (throttle_wanted(m, pct) && (now = monotonic_ns()) < end) {
		struct timespec left = ns_to_timespec(end - now);

		(void)sigtimedwait(&kick, NULL, &left);
	}
}

void vcpu_throttle_point(struct machine *m, struct vcpu_throttle *t)
{
	unsigned pct = __atomic_load_n(&m->throttle_pct, __ATOMIC_SEQ_CST);

	if (pct == 0) {
		if (t->slice_end != 0)
			vcpu_throttle_end(t);
		return;
	}
	if (pct > VCPU_THROTTLE_MAX_PCT)
		pct = VCPU_THROTTLE_MAX_PCT;
	if (t->slice_end != 0 && monotonic_ns() < t->slice_end)
		return; /* an exit inside the slice: the timer still runs */
	if (t->slice_end != 0)
		throttle_sleep(m, pct, SLICE_NS * pct / (100u - pct));
	arm_slice(t);
}

void vcpu_throttle_end(struct vcpu_throttle *t)
{
	if (t->have_timer)
		(void)timer_delete(t->timer);
	t->have_timer = false;
	t->slice_end = 0;
}
