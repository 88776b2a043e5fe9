#include "core/machine.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "vmm/coalesced.h"
#include "vmm/vcpu.h"

/* The start gate (machine_hold_start); static because there is one
 * machine per process and a zeroed struct machine must stay usable. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cond = PTHREAD_COND_INITIALIZER;

void machine_hold_start(struct machine *m)
{
	pthread_mutex_lock(&start_lock);
	m->start_holds++;
	pthread_mutex_unlock(&start_lock);
}

void machine_release_start(struct machine *m)
{
	pthread_mutex_lock(&start_lock);
	if (m->start_holds > 0 && --m->start_holds == 0)
		pthread_cond_broadcast(&start_cond);
	pthread_mutex_unlock(&start_lock);
}

void machine_wait_start(struct machine *m)
{
	pthread_mutex_lock(&start_lock);
	while (m->start_holds > 0 && !__atomic_load_n(&m->exit_requested, __ATOMIC_SEQ_CST))
		pthread_cond_wait(&start_cond, &start_lock);
	pthread_mutex_unlock(&start_lock);
}

/* The pause gate (machine_pause): static for the same reasons. */
static pthread_mutex_t pause_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pause_cond = PTHREAD_COND_INITIALIZER;  /* vCPUs wait for resume */
static pthread_cond_t paused_cond = PTHREAD_COND_INITIALIZER; /* the pauser waits for them */

static bool exit_requested(struct machine *m)
{
	return __atomic_load_n(&m->exit_requested, __ATOMIC_SEQ_CST);
}

static unsigned started_vcpus(struct machine *m)
{
	unsigned n = 0;

	for (unsigned i = 0; m->vm.vcpus != NULL && i < m->vm.ncpus; i++)
		if (m->vm.vcpus[i] != NULL &&
		    __atomic_load_n(&m->vm.vcpus[i]->thread_started, __ATOMIC_SEQ_CST))
			n++;
	return n;
}

static void kick_vcpus(struct machine *m)
{
	for (unsigned i = 0; m->vm.vcpus != NULL && i < m->vm.ncpus; i++)
		if (m->vm.vcpus[i] != NULL && m->vm.vcpus[i]->run != NULL)
			vcpu_kick(m->vm.vcpus[i]);
}

/* Wait on `c` (pause_lock held) until the deadline; false on timeout. */
static bool wait_until(pthread_cond_t *c, const struct timespec *deadline)
{
	return pthread_cond_timedwait(c, &pause_lock, deadline) != ETIMEDOUT;
}

int machine_pause(struct machine *m, unsigned timeout_ms)
{
	struct timespec deadline = realtime_deadline_after(timeout_ms);
	int rc = 0;

	pthread_mutex_lock(&pause_lock);
	if (m->pause_requested) {
		pthread_mutex_unlock(&pause_lock);
		return -EALREADY;
	}
	if (exit_requested(m) || __atomic_load_n(&m->start_holds, __ATOMIC_SEQ_CST) > 0) {
		pthread_mutex_unlock(&pause_lock);
		return -EAGAIN;
	}
	__atomic_store_n(&m->pause_requested, true, __ATOMIC_SEQ_CST);
	kick_vcpus(m);
	while (m->vcpus_paused < started_vcpus(m) && !exit_requested(m))
		if (!wait_until(&paused_cond, &deadline)) {
			rc = -ETIMEDOUT;
			break;
		}
	if (rc < 0 || exit_requested(m)) {
		/* Take the request back: a half-paused VM would be neither state. */
		__atomic_store_n(&m->pause_requested, false, __ATOMIC_SEQ_CST);
		pthread_cond_broadcast(&pause_cond);
		rc = rc < 0 ? rc : -EAGAIN;
	}
	pthread_mutex_unlock(&pause_lock);
	return rc;
}

void machine_start_paused(struct machine *m)
{
	pthread_mutex_lock(&pause_lock);
	__atomic_store_n(&m->pause_requested, true, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&pause_lock);
}

int machine_resume(struct machine *m)
{
	int rc = 0;

	pthread_mutex_lock(&pause_lock);
	if (!m->pause_requested)
		rc = -EALREADY;
	__atomic_store_n(&m->pause_requested, false, __ATOMIC_SEQ_CST);
	pthread_cond_broadcast(&pause_cond);
	pthread_mutex_unlock(&pause_lock);
	return rc;
}

bool machine_is_paused(struct machine *m)
{
	return __atomic_load_n(&m->pause_requested, __ATOMIC_SEQ_CST);
}

void machine_pause_point(struct machine *m)
{
	if (!__atomic_load_n(&m->pause_requested, __ATOMIC_SEQ_CST))
		return;
	pthread_mutex_lock(&pause_lock);
	m->vcpus_paused++;
	pthread_cond_broadcast(&paused_cond);
	while (m->pause_requested && !exit_requested(m))
		pthread_cond_wait(&pause_cond, &pause_lock);
	m->vcpus_paused--;
	pthread_mutex_unlock(&pause_lock);
}

void machine_set_throttle(struct machine *m, unsigned pct)
{
	__atomic_store_n(&m->throttle_pct, pct, __ATOMIC_SEQ_CST);
	kick_vcpus(m);
}

static void wake_pause_waiters(void)
{
	pthread_mutex_lock(&pause_lock);
	pthread_cond_broadcast(&pause_cond);
	pthread_cond_broadcast(&paused_cond);
	pthread_mutex_unlock(&pause_lock);
}

int machine_add_key_sink(struct machine *m, void (*fn)(void *arg, bool down, uint16_t qnum),
                         void *arg)
{
	if (m->nkey_sinks >= MACHINE_MAX_KEY_SINKS)
		return -1;
	m->key_sinks[m->nkey_sinks].fn = fn;
	m->key_sinks[m->nkey_sinks].arg = arg;
	m->nkey_sinks++;
	return 0;
}

bool machine_key_event(struct machine *m, bool down, uint16_t qnum)
{
	for (unsigned i = 0; i < m->nkey_sinks; i++)
		m->key_sinks[i].fn(m->key_sinks[i].arg, down, qnum);
	return m->nkey_sinks > 0;
}

int machine_add_media_drive(struct machine *m, const struct machine_media_drive *d)
{
	if (m->nmedia >= MACHINE_MAX_MEDIA)
		return -1;
	m->media[m->nmedia++] = *d;
	return 0;
}

const struct machine_media_drive *machine_media_drive(struct machine *m, const char *name)
{
	for (unsigned i = 0; i < m->nmedia; i++)
		if (!strcmp(m->media[i].name, name))
			return &m->media[i];
	return NULL;
}

void machine_set_screenshot(struct machine *m, machine_screenshot_fn *fn, void *arg)
{
	m->screenshot = fn;
	m->screenshot_arg = arg;
}

static void wake_start_waiters(void)
{
	pthread_mutex_lock(&start_lock);
	pthread_cond_broadcast(&start_cond);
	pthread_mutex_unlock(&start_lock);
}

void machine_request_exit(struct machine *m, int code)
{
	uint64_t one = 1;
	bool expected = false;

	if (!__atomic_compare_exchange_n(&m->exit_requested, &expected, true, false,
	                                 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return;
	__atomic_store_n(&m->exit_code, code, __ATOMIC_SEQ_CST);
	kick_vcpus(m);
	if (m->exit_fd >= 0 && write(m->exit_fd, &one, sizeof(one)) < 0) {
		/* The loop will still see exit_requested on its next wake-up. */
	}
	wake_start_waiters();
	wake_pause_waiters();
}

int machine_irq_line(struct machine *m, unsigned gsi, int level)
{
	return vm_irq_line(&m->vm, gsi, level);
}

void machine_intx_level(struct machine *m, unsigned gsi, bool asserted)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static unsigned count[IOAPIC_NPINS];

	if (gsi >= IOAPIC_NPINS)
		return;
	pthread_mutex_lock(&lock);
	if (asserted && count[gsi]++ == 0) {
		if (m->intx_hook != NULL)
			m->intx_hook(m, gsi, true);
		else
			vm_irq_line(&m->vm, gsi, 1);
	} else if (!asserted && count[gsi] > 0 && --count[gsi] == 0) {
		if (m->intx_hook != NULL)
			m->intx_hook(m, gsi, false);
		else
			vm_irq_line(&m->vm, gsi, 0);
	}
	pthread_mutex_unlock(&lock);
}

int machine_register_pio(struct machine *m, uint16_t port, uint16_t len, iobus_handler_t fn,
                         void *arg, const char *name)
{
	return iobus_register(&m->pio, port, len, fn, arg, name);
}

bool machine_coalesce_pio(struct machine *m, uint16_t port, uint16_t len)
{
	return m->vm.vm_fd >= 0 && vm_coalesce_zone(&m->vm, port, len, true) == 0;
}

static void apply_coalesced(void *arg, uint64_t addr, unsigned len, bool pio, const uint8_t *data)
{
	struct machine *m = arg;
	uint64_t val = 0;

	memcpy(&val, data, len);
	iobus_access(pio ? &m->pio : &m->mmio, addr, len, true, &val);
}

void machine_flush_coalesced(struct machine *m)
{
	vm_coalesced_drain(&m->vm, apply_coalesced, m);
}

bool machine_coalescing(const struct machine *m)
{
	return vm_coalesced_page(&m->vm) != 0;
}

int machine_register_mmio(struct machine *m, uint64_t gpa, uint64_t len, iobus_handler_t fn,
                          void *arg, const char *name)
{
	return iobus_register(&m->mmio, gpa, len, fn, arg, name);
}

int machine_init_detached(struct machine *m, const char *name, void *ram, uint64_t ram_gpa,
                          uint64_t ram_bytes)
{
	memset(m, 0, sizeof(*m));
	m->vm.kvm_fd = -1;
	m->vm.vm_fd = -1;
	m->vm.ncpus = 1;
	m->exit_fd = -1;
	m->name = name;
	iobus_init(&m->pio, "port");
	iobus_init(&m->mmio, "mmio");
	if (ram == NULL)
		return 0;
	m->vm.mem.lowmem_size = ram_gpa + ram_bytes;
	return gmem_add_region(&m->vm.mem, ram_gpa, ram_bytes, ram, false);
}
