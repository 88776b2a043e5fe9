#include "core/machine.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

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
	for (unsigned i = 0; m->vm.vcpus != NULL && i < m->vm.ncpus; i++)
		if (m->vm.vcpus[i] != NULL && m->vm.vcpus[i]->run != NULL)
			vcpu_kick(m->vm.vcpus[i]);
	if (m->exit_fd >= 0 && write(m->exit_fd, &one, sizeof(one)) < 0) {
		/* The loop will still see exit_requested on its next wake-up. */
	}
	wake_start_waiters();
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
