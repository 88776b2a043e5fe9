#include "core/vcpu_loop.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/machine.h"
#include "core/vcpu_throttle.h"
#include "lib/hostkvm.h"
#include "lib/log.h"
#include "lib/sandbox.h"
#include "vmm/vcpu.h"
#include "vmm/vmstate.h"

static struct ratelimit unhandled_rl = RATELIMIT_INIT;

static void note_unhandled(struct machine *m, const char *kind, uint64_t addr, unsigned size,
                           bool is_write, uint64_t val)
{
	if (m->strict_io) {
		log_err("unhandled %s %s at 0x%llx (size %u), stopping (x86.strictio)", kind,
		        is_write ? "write" : "read", (unsigned long long)addr, size);
		machine_request_exit(m, KHYVE_EXIT_ERROR);
		return;
	}
	log_ratelimited(&unhandled_rl, LOG_DEBUG, "unhandled %s %s at 0x%llx size %u val 0x%llx",
	                kind, is_write ? "write" : "read", (unsigned long long)addr, size,
	                (unsigned long long)val);
}

static void handle_io(struct machine *m, struct vcpu *v)
{
	struct kvm_run *run = v->run;
	unsigned size = run->io.size;
	bool is_write = run->io.direction == KVM_EXIT_IO_OUT;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	uint64_t end = (uint64_t)run->io.data_offset + (uint64_t)run->io.count * size;

	/* KVM fills these, but stay inside the shared page regardless. */
	if (size == 0 || size > 4 || end > (uint64_t)m->vm.vcpu_mmap_size)
		return;
	for (uint32_t i = 0; i < run->io.count; i++, data += size) {
		uint64_t val = 0;

		if (is_write)
			memcpy(&val, data, size);
		if (!iobus_access(&m->pio, run->io.port, size, is_write, &val))
			note_unhandled(m, "port", run->io.port, size, is_write, val);
		if (!is_write)
			memcpy(data, &val, size);
	}
}

static void handle_mmio(struct machine *m, struct vcpu *v)
{
	struct kvm_run *run = v->run;
	unsigned size = run->mmio.len;
	uint64_t val = 0;

	if (size == 0 || size > sizeof(run->mmio.data))
		return;
	if (run->mmio.is_write)
		memcpy(&val, run->mmio.data, size);
	if (!iobus_access(&m->mmio, run->mmio.phys_addr, size, run->mmio.is_write, &val))
		note_unhandled(m, "mmio", run->mmio.phys_addr, size, run->mmio.is_write, val);
	if (!run->mmio.is_write)
		memcpy(run->mmio.data, &val, size);
}

static void handle_system_event(struct machine *m, struct vcpu *v)
{
	switch (v->run->system_event.type) {
	case KVM_SYSTEM_EVENT_SHUTDOWN:
		machine_request_exit(m, KHYVE_EXIT_POWEROFF);
		break;
	case KVM_SYSTEM_EVENT_RESET:
		machine_request_exit(m, KHYVE_EXIT_RESET);
		break;
	default:
		log_err("vCPU %u: system event %u", v->index, v->run->system_event.type);
		machine_request_exit(m, KHYVE_EXIT_TRIPLEFAULT);
		break;
	}
}

/* Probed before the vCPUs start: their sandbox opens no files. */
static bool host_is_pvm;

/* KVM's instruction emulator gave up on a PVM host: there every guest
 * instruction goes through it, and it lacks most x87 and SSE instructions
 * (OVMF stops at x87 code), so the guest cannot run here at all. */
static bool on_pvm_emulation_failure(const struct kvm_run *run)
{
	return run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION && host_is_pvm;
}

static void log_pvm_stop(const struct vcpu *v)
{
	char what[96], line[256];

	snprintf(what, sizeof(what), "this guest, whose vCPU %u stopped in KVM's emulator",
	         v->index);
	host_kvm_message(line, sizeof(line), HOST_KVM_PVM, what);
	log_err("%s", line);
}

static void handle_fatal_exit(struct machine *m, struct vcpu *v)
{
	struct kvm_run *run = v->run;

	if (run->exit_reason == KVM_EXIT_INTERNAL_ERROR && on_pvm_emulation_failure(run))
		log_pvm_stop(v);
	else if (run->exit_reason == KVM_EXIT_INTERNAL_ERROR)
		log_err("vCPU %u: KVM internal error, suberror %u", v->index,
		        run->internal.suberror);
	else if (run->exit_reason == KVM_EXIT_FAIL_ENTRY)
		log_err("vCPU %u: VM entry failed, reason 0x%llx", v->index,
		        (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
	else
		log_err("vCPU %u: unexpected exit reason %u", v->index, run->exit_reason);
	machine_request_exit(m, KHYVE_EXIT_ERROR);
}

/* Handle one exit; the vCPU keeps running unless an exit was requested. */
static void vcpu_dispatch_exit(struct machine *m, struct vcpu *v)
{
	switch (v->run->exit_reason) {
	case KVM_EXIT_IO:
		handle_io(m, v);
		break;
	case KVM_EXIT_MMIO:
		handle_mmio(m, v);
		break;
	case KVM_EXIT_INTR:
		break;
	case KVM_EXIT_SHUTDOWN:
		/* A triple fault: KVM reports it as a shutdown. */
		machine_request_exit(m, KHYVE_EXIT_TRIPLEFAULT);
		break;
	case KVM_EXIT_HLT:
		machine_request_exit(m, KHYVE_EXIT_HALT);
		break;
	case KVM_EXIT_SYSTEM_EVENT:
		handle_system_event(m, v);
		break;
	default:
		handle_fatal_exit(m, v);
		break;
	}
}

/*
 * A pause may be for a checkpoint: an IN or MMIO read the guest is in the
 * middle of completes only on the next KVM_RUN (api.rst, KVM_EXIT_IO), so
 * enter it once with immediate_exit before parking, and the saved
 * registers hold the finished instruction.
 */
#define COMPLETE_IO_TRIES 64 /* a string I/O instruction exits once per chunk */

static void complete_io_before_pause(struct machine *m, struct vcpu *v)
{
	for (unsigned i = 0; i < COMPLETE_IO_TRIES; i++) {
		if (vcpu_complete_io(v) == 0)
			return;
		if (errno != EAGAIN)
			break;
		vcpu_dispatch_exit(m, v);
	}
	log_err("vCPU %u: cannot complete its I/O before the pause: %s", v->index, strerror(errno));
	machine_request_exit(m, KHYVE_EXIT_ERROR);
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	struct machine *m = (struct machine *)((char *)v->vm - offsetof(struct machine, vm));
	struct vcpu_throttle throttle = {0};
	char name[16];
	int rc;

	snprintf(name, sizeof(name), "vcpu %u", v->index);
	pthread_setname_np(pthread_self(), name);
	if (vcpu_block_kick(v) < 0) {
		log_err("vCPU %u: KVM_SET_SIGNAL_MASK: %s", v->index, strerror(errno));
		machine_request_exit(m, KHYVE_EXIT_ERROR);
		return NULL;
	}
	vcpu_mark_kickable(v);
	sandbox_thread_enter(SANDBOX_VCPU);
	machine_wait_start(m);
	while (!__atomic_load_n(&m->exit_requested, __ATOMIC_SEQ_CST)) {
		/* First: a throttle's sleep ends early for a pause or an exit,
		 * which the lines below then see. */
		vcpu_throttle_point(m, &throttle);
		/* machine_pause() kicks us out of KVM_RUN; the kick stays pending
		 * while we wait here, so the first KVM_RUN after resume may end
		 * at once with EINTR, which is harmless. */
		if (__atomic_load_n(&m->pause_requested, __ATOMIC_SEQ_CST))
			complete_io_before_pause(m, v);
		machine_pause_point(m);
		/* An exit requested while paused (a suspend) must not let the
		 * guest run once more past its saved state. */
		if (__atomic_load_n(&m->exit_requested, __ATOMIC_SEQ_CST))
			break;
		rc = vcpu_run(v);
		/* Queued writes first: the exit may read what they wrote. */
		machine_flush_coalesced(m);
		if (rc == 0) {
			vcpu_dispatch_exit(m, v);
			continue;
		}
		if (errno == EINTR || errno == EAGAIN) {
			vcpu_eat_kicks();
			if (!__atomic_load_n(&m->exit_requested, __ATOMIC_SEQ_CST))
				v->run->immediate_exit = 0;
			continue;
		}
		log_err("vCPU %u: KVM_RUN failed: %s", v->index, strerror(errno));
		machine_request_exit(m, KHYVE_EXIT_ERROR);
	}
	vcpu_throttle_end(&throttle);
	return NULL;
}

int vcpu_threads_start(struct machine *m)
{
	enum host_kvm kind;
	sigset_t kick;

	host_is_pvm = host_kvm_probe(&kind) == 0 && kind == HOST_KVM_PVM;
	sigemptyset(&kick);
	sigaddset(&kick, vcpu_kick_signal());
	for (unsigned i = 0; i < m->vm.ncpus; i++) {
		struct vcpu *v = m->vm.vcpus[i];

		if (pthread_create(&v->thread, NULL, vcpu_thread, v) != 0)
			return -1;
		__atomic_store_n(&v->thread_started, true, __ATOMIC_SEQ_CST);
	}
	/* The kick signal must reach vCPU threads; the main thread leaves it
	 * unblocked too so a kick racing thread start cannot be lost. */
	pthread_sigmask(SIG_UNBLOCK, &kick, NULL);
	return 0;
}

void vcpu_threads_join(struct machine *m)
{
	for (unsigned i = 0; i < m->vm.ncpus; i++) {
		struct vcpu *v = m->vm.vcpus[i];

		if (v != NULL && v->thread_started)
			pthread_join(v->thread, NULL);
	}
}
