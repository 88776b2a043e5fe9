/*
 * Unit tests for the KVM state of vCPUs and the VM (src/vmm/vmstate.h) on
 * this host's KVM: a real-mode guest counts, OUTs the count and adds what an
 * IN returns; its state is saved at an IN exit (after vcpu_complete_io),
 * the VM destroyed, a fresh one built and restored, and the guest goes on
 * with the next count.  Also: MP states of an AP that never got SIPI, and
 * refusals of a truncated section, a bad version, a CPUID feature the host
 * lacks and a TSC rate off by 1%.
 * Skipped without a usable /dev/kvm.
 */
#include "unit.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <sys/ioctl.h>

#include "lib/sbuf.h"
#include "vmm/kvm.h"
#include "vmm/vcpu.h"
#include "vmm/vmstate.h"

#define CODE_GPA         0x1000
#define COUNT_GPA        0x2000
#define SUM_GPA          0x2002
#define OUT_PORT         0x10
#define IN_PORT          0x11
#define RAM_COPY         0x10000 /* the guest touches only the first 64 KiB */
#define SAVE_AT          5       /* OUTs before the save */
#define EVENTS_BYTES     27      /* the tail of a vCPU section after tsc_khz */
#define MSR_TSC          0x10
#define MSR_TSC_DEADLINE 0x6e0

/*
 * Real mode, DS = 0:
 * 1000: a1 00 20     mov ax, [0x2000]     ; the count
 * 1003: 40           inc ax
 * 1004: a3 00 20     mov [0x2000], ax
 * 1007: e7 10        out 0x10, ax
 * 1009: e5 11        in ax, 0x11
 * 100b: 01 06 02 20  add [0x2002], ax     ; the sum of what IN gave
 * 100f: eb ef        jmp 0x1000
 */
static const uint8_t guest[] = {0xa1, 0x00, 0x20, 0x40, 0xa3, 0x00, 0x20, 0xe7, 0x10,
                                0xe5, 0x11, 0x01, 0x06, 0x02, 0x20, 0xeb, 0xef};

/* What the test's port 0x11 returns before the n-th OUT's successor. */
static uint16_t in_value(unsigned n)
{
	return (uint16_t)(0x100 + 7 * n);
}

static void make_vm(struct vm *vm, unsigned ncpus)
{
	struct cpu_topology topo = {.sockets = 1, .cores = ncpus, .threads = 1};
	char err[256] = "";

	if (vm_create(vm, 16ull << 20, &topo, err, sizeof(err)) < 0 ||
	    vm_create_vcpus(vm, err, sizeof(err)) < 0)
		fail_msg("cannot make the VM: %s", err);
}

/* The guest's code in RAM and the BSP at 0000:1000 in real mode. */
static void load_guest(struct vm *vm)
{
	struct vcpu *v = vm->vcpus[0];
	struct kvm_sregs sr;
	struct kvm_regs r;

	assert_int_equal(gmem_write(&vm->mem, CODE_GPA, guest, sizeof(guest)), 0);
	assert_int_equal(ioctl(v->fd, KVM_GET_SREGS, &sr), 0);
	sr.cs.selector = 0;
	sr.cs.base = 0;
	assert_int_equal(ioctl(v->fd, KVM_SET_SREGS, &sr), 0);
	memset(&r, 0, sizeof(r));
	r.rip = CODE_GPA;
	r.rflags = 2;
	assert_int_equal(ioctl(v->fd, KVM_SET_REGS, &r), 0);
}

/* Run to the next port I/O exit; the 16-bit data it carries. */
static uint16_t *next_io(struct vcpu *v, uint16_t *port, bool *in)
{
	for (int i = 0; i < 100; i++) {
		if (vcpu_run(v) < 0) {
			assert_int_equal(errno, EINTR);
			continue;
		}
		if (v->run->exit_reason != KVM_EXIT_IO)
			fail_msg("exit reason %u, want KVM_EXIT_IO", v->run->exit_reason);
		assert_int_equal(v->run->io.size, 2);
		*port = v->run->io.port;
		*in = v->run->io.direction == KVM_EXIT_IO_IN;
		return (uint16_t *)((uint8_t *)v->run + v->run->io.data_offset);
	}
	fail_msg("no I/O exit");
	return NULL;
}

static uint64_t read_msr(struct vcpu *v, uint32_t index)
{
	uint64_t buf[(sizeof(struct kvm_msrs) + sizeof(struct kvm_msr_entry)) / 8] = {0};
	struct kvm_msrs *m = (struct kvm_msrs *)buf;

	m->nmsrs = 1;
	m->entries[0].index = index;
	assert_int_equal(ioctl(v->fd, KVM_GET_MSRS, m), 1);
	return m->entries[0].data;
}

static void write_msr(struct vcpu *v, uint32_t index, uint64_t value)
{
	uint64_t buf[(sizeof(struct kvm_msrs) + sizeof(struct kvm_msr_entry)) / 8] = {0};
	struct kvm_msrs *m = (struct kvm_msrs *)buf;

	m->nmsrs = 1;
	m->entries[0].index = index;
	m->entries[0].data = value;
	assert_int_equal(ioctl(v->fd, KVM_SET_MSRS, m), 1);
}

static uint64_t read_tsc(struct vcpu *v)
{
	return read_msr(v, MSR_TSC);
}

/*
 * Arm the LAPIC timer in TSC-deadline mode (masked) with a deadline far
 * ahead; the deadline it reads back, or 0 when this KVM does not offer
 * the mode.  A restore must set the deadline after the LAPIC (else KVM
 * drops it: the timer is not in deadline mode yet) and after the TSC.
 */
static uint64_t arm_tsc_deadline(struct vcpu *v)
{
	struct kvm_lapic_state lapic;
	uint32_t lvtt = 1u << 18 | 1u << 16 | 0x40; /* deadline mode, masked, vector */

	assert_int_equal(ioctl(v->fd, KVM_GET_LAPIC, &lapic), 0);
	memcpy(&lapic.regs[0x320], &lvtt, sizeof(lvtt));
	assert_int_equal(ioctl(v->fd, KVM_SET_LAPIC, &lapic), 0);
	write_msr(v, MSR_TSC_DEADLINE, read_tsc(v) + 1000000000000ull);
	return read_msr(v, MSR_TSC_DEADLINE);
}

/* Make `vm` use KVM_GET/SET_SREGS and the 4 KiB KVM_GET_XSAVE, as on a
 * kernel without SREGS2 and XSAVE2: probe first (a save does), then
 * override what the probe found. */
static void force_legacy_ioctls(struct vm *vm)
{
	struct sbuf scratch = {0};
	char err[256] = "";

	if (vcpu_state_save(vm->vcpus[0], &scratch, err, sizeof(err)) < 0)
		fail_msg("probe: %s", err);
	sbuf_free(&scratch);
	assert_true(vm->state_probed);
	vm->state_sregs2 = false;
	vm->state_xsave2 = false;
	vm->state_xsave_size = 4096;
}

static uint16_t ram_u16(struct vm *vm, uint64_t gpa)
{
	uint16_t x = 0;

	assert_int_equal(gmem_read(&vm->mem, gpa, &x, sizeof(x)), 0);
	return x;
}

/*
 * Run the guest until SAVE_AT OUTs and the IN after the last one, complete
 * that IN, and save vCPU 0, the VM and the first 64 KiB of RAM.  Returns
 * the sum the guest will have once it has added the last IN.
 */
static uint16_t run_and_save(struct vm *vm, struct sbuf *vcpu_out, struct sbuf *vm_out,
                             uint8_t *ram, uint64_t *tsc, uint64_t *deadline)
{
	struct vcpu *v = vm->vcpus[0];
	unsigned outs = 0;
	uint16_t sum = 0, port, *data;
	struct kvm_regs r;
	char err[256] = "";
	bool in;

	load_guest(vm);
	for (;;) {
		data = next_io(v, &port, &in);
		if (!in) {
			assert_int_equal(port, OUT_PORT);
			assert_int_equal(*data, outs + 1);
			outs++;
			continue;
		}
		assert_int_equal(port, IN_PORT);
		*data = in_value(outs);
		sum = (uint16_t)(sum + *data);
		if (outs == SAVE_AT)
			break;
	}
	/* The IN is not done until KVM_RUN is entered again: a state saved
	 * now would miss the value. */
	assert_int_equal(ioctl(v->fd, KVM_GET_REGS, &r), 0);
	assert_int_not_equal(r.rax & 0xffff, in_value(SAVE_AT));
	assert_true(v->io_pending);
	assert_int_equal(vcpu_complete_io(v), 0);
	assert_false(v->io_pending);
	assert_int_equal(vcpu_complete_io(v), 0); /* nothing pending: a no-op */
	assert_int_equal(ioctl(v->fd, KVM_GET_REGS, &r), 0);
	assert_int_equal(r.rax & 0xffff, in_value(SAVE_AT));
	assert_int_equal(r.rip, CODE_GPA + 0xb); /* at the add */
	*deadline = arm_tsc_deadline(v);
	*tsc = read_tsc(v);
	if (vcpu_state_save(v, vcpu_out, err, sizeof(err)) < 0 ||
	    vm_state_save(vm, vm_out, err, sizeof(err)) < 0)
		fail_msg("save: %s", err);
	assert_int_equal(gmem_read(&vm->mem, 0, ram, RAM_COPY), 0);
	return sum;
}

static void save_one(struct sbuf *vcpu_out, struct sbuf *vm_out)
{
	static uint8_t ram[RAM_COPY];
	struct vm vm;
	uint64_t tsc, deadline;

	make_vm(&vm, 1);
	run_and_save(&vm, vcpu_out, vm_out, ram, &tsc, &deadline);
	vm_destroy(&vm);
}

/* KVM_IRQ_LINE_STATUS's answer for raising GSI 4 and lowering it again:
 * what the GSI routing table makes of the line. */
static int irq4_status(struct vm *vm)
{
	struct kvm_irq_level up = {.irq = 4, .level = 1}, down = {.irq = 4, .level = 0};

	assert_int_equal(ioctl(vm->vm_fd, KVM_IRQ_LINE_STATUS, &up), 0);
	assert_int_equal(ioctl(vm->vm_fd, KVM_IRQ_LINE_STATUS, &down), 0);
	return up.status;
}

/* Save the counting guest, destroy its VM, restore it into a fresh one
 * and check it goes on; `legacy`: both VMs use SREGS and 4 KiB XSAVE. */
static void round_trip(bool legacy)
{
	static uint8_t ram[RAM_COPY];
	struct sbuf vcpu_out = {0}, vm_out = {0};
	struct sbuf_reader r;
	struct vm vm;
	char err[256] = "";
	uint16_t sum, port, *data;
	uint64_t tsc, now, deadline;
	int fresh_irq4;
	bool in;

	make_vm(&vm, 1);
	if (legacy)
		force_legacy_ioctls(&vm);
	sum = run_and_save(&vm, &vcpu_out, &vm_out, ram, &tsc, &deadline);
	vm_destroy(&vm);

	make_vm(&vm, 1);
	fresh_irq4 = irq4_status(&vm);
	if (legacy)
		force_legacy_ioctls(&vm);
	assert_int_equal(gmem_write(&vm.mem, 0, ram, RAM_COPY), 0);
	sbuf_reader_init(&r, vm_out.data, vm_out.len);
	if (vm_state_restore(&vm, &r, err, sizeof(err)) < 0)
		fail_msg("vm restore: %s", err);
	assert_int_equal(sbuf_reader_done(&r, "vm", err, sizeof(err)), 0);
	/* KVM_SET_IRQCHIP left vmm/irq.c's routing table in place. */
	assert_int_equal(irq4_status(&vm), fresh_irq4);
	sbuf_reader_init(&r, vcpu_out.data, vcpu_out.len);
	if (vcpu_state_restore(vm.vcpus[0], &r, err, sizeof(err)) < 0)
		fail_msg("vcpu restore: %s", err);
	assert_int_equal(sbuf_reader_done(&r, "vcpu.0", err, sizeof(err)), 0);
	if (vm_state_restore_finish(&vm, err, sizeof(err)) < 0)
		fail_msg("finish: %s", err);
	/* The guest's TSC goes on from the saved value (a fresh vCPU's
	 * starts near 0): within 2 s of it at 10 GHz. */
	now = read_tsc(vm.vcpus[0]);
	assert_true(now >= tsc);
	assert_true(now - tsc < 20000000000ull);
	if (deadline != 0)
		assert_int_equal(read_msr(vm.vcpus[0], MSR_TSC_DEADLINE), deadline);
	else
		fprintf(stderr, "note: this KVM has no TSC-deadline timer; not checked\n");

	data = next_io(vm.vcpus[0], &port, &in);
	assert_false(in);
	assert_int_equal(port, OUT_PORT);
	assert_int_equal(*data, SAVE_AT + 1);
	assert_int_equal(ram_u16(&vm, COUNT_GPA), SAVE_AT + 1);
	assert_int_equal(ram_u16(&vm, SUM_GPA), sum); /* the completed IN was added */
	/* finish consumed the clock: a second call is refused */
	assert_int_equal(vm_state_restore_finish(&vm, err, sizeof(err)), -1);
	vm_destroy(&vm);
	sbuf_free(&vcpu_out);
	sbuf_free(&vm_out);
}

static void test_round_trip_continues_the_count(void **state)
{
	(void)state;
	if (!kvm_available())
		skip();
	round_trip(false);
}

static void test_round_trip_without_sregs2_and_xsave2(void **state)
{
	(void)state;
	if (!kvm_available())
		skip();
	round_trip(true);
}

static void test_msr_list_has_the_tsc(void **state)
{
	struct sbuf out = {0};
	struct vm vm;
	char err[256] = "";
	bool tsc = false;

	(void)state;
	if (!kvm_available())
		skip();
	make_vm(&vm, 1);
	assert_null(vm.state_msrs);
	if (vcpu_state_save(vm.vcpus[0], &out, err, sizeof(err)) < 0)
		fail_msg("save: %s", err);
	assert_non_null(vm.state_msrs);
	assert_true(vm.state_nmsrs > 1);
	for (unsigned i = 0; i < vm.state_nmsrs; i++) {
		tsc |= vm.state_msrs[i] == 0x10;
		for (unsigned j = 0; j < i; j++)
			assert_int_not_equal(vm.state_msrs[i], vm.state_msrs[j]);
	}
	assert_true(tsc);
	vm_destroy(&vm);
	sbuf_free(&out);
}

static uint32_t mp_state_of(struct vcpu *v)
{
	struct kvm_mp_state mp;

	assert_int_equal(ioctl(v->fd, KVM_GET_MP_STATE, &mp), 0);
	return mp.mp_state;
}

/* Save both vCPUs of `src` and restore them into a fresh 2-vCPU VM; the
 * AP's MP state there. */
static uint32_t restored_ap_state(struct vm *src)
{
	struct sbuf out[3] = {{0}, {0}, {0}};
	struct sbuf_reader r;
	char err[256] = "";
	struct vm dst;
	uint32_t got;

	for (unsigned i = 0; i < 2; i++)
		if (vcpu_state_save(src->vcpus[i], &out[i], err, sizeof(err)) < 0)
			fail_msg("save vCPU %u: %s", i, err);
	if (vm_state_save(src, &out[2], err, sizeof(err)) < 0)
		fail_msg("save vm: %s", err);
	make_vm(&dst, 2);
	sbuf_reader_init(&r, out[2].data, out[2].len);
	if (vm_state_restore(&dst, &r, err, sizeof(err)) < 0)
		fail_msg("restore vm: %s", err);
	for (unsigned i = 0; i < 2; i++) {
		sbuf_reader_init(&r, out[i].data, out[i].len);
		if (vcpu_state_restore(dst.vcpus[i], &r, err, sizeof(err)) < 0)
			fail_msg("restore vCPU %u: %s", i, err);
	}
	if (vm_state_restore_finish(&dst, err, sizeof(err)) < 0)
		fail_msg("finish: %s", err);
	assert_int_equal(mp_state_of(dst.vcpus[0]), KVM_MP_STATE_RUNNABLE);
	got = mp_state_of(dst.vcpus[1]);
	vm_destroy(&dst);
	for (unsigned i = 0; i < 3; i++)
		sbuf_free(&out[i]);
	return got;
}

static void test_ap_waiting_for_sipi_keeps_its_mp_state(void **state)
{
	struct kvm_mp_state init = {.mp_state = KVM_MP_STATE_INIT_RECEIVED};
	struct vm vm;

	(void)state;
	if (!kvm_available())
		skip();
	make_vm(&vm, 2);
	assert_int_equal(mp_state_of(vm.vcpus[1]), KVM_MP_STATE_UNINITIALIZED);
	assert_int_equal(restored_ap_state(&vm), KVM_MP_STATE_UNINITIALIZED);
	assert_int_equal(ioctl(vm.vcpus[1]->fd, KVM_SET_MP_STATE, &init), 0);
	assert_int_equal(restored_ap_state(&vm), KVM_MP_STATE_INIT_RECEIVED);
	vm_destroy(&vm);
}

/* cli; hlt; jmp back to the hlt (real mode, at CODE_GPA) */
static const uint8_t halt_guest[] = {0xfa, 0xf4, 0xeb, 0xfd};

struct halter {
	struct vcpu *v;
	bool halted; /* written by the thread before it ends */
};

/* The vCPU's thread: run until a kick finds the vCPU halted in KVM. */
static void *halter_thread(void *arg)
{
	struct halter *h = arg;
	struct kvm_mp_state mp;

	if (vcpu_block_kick(h->v) < 0)
		return NULL;
	vcpu_mark_kickable(h->v);
	for (int i = 0; i < 100; i++) {
		h->v->run->immediate_exit = 0;
		if (vcpu_run(h->v) == 0)
			return NULL; /* an exit: not what the guest does */
		vcpu_eat_kicks();
		if (ioctl(h->v->fd, KVM_GET_MP_STATE, &mp) == 0 &&
		    mp.mp_state == KVM_MP_STATE_HALTED) {
			__atomic_store_n(&h->halted, true, __ATOMIC_SEQ_CST);
			return NULL;
		}
	}
	return NULL;
}

/* Hazard (f) of the design: a vCPU halted inside KVM (interrupts off)
 * must come back HALTED, not RUNNABLE, or it wakes early. */
static void test_halted_vcpu_restores_halted(void **state)
{
	const struct timespec tick = {0, 20 * 1000 * 1000};
	struct sbuf out[2] = {{0}, {0}};
	struct halter h = {0};
	struct sbuf_reader r;
	struct kvm_regs regs;
	pthread_t t;
	struct vm vm;
	char err[256] = "";

	(void)state;
	if (!kvm_available())
		skip();
	assert_int_equal(vcpu_kick_init(), 0);
	make_vm(&vm, 1);
	load_guest(&vm);
	assert_int_equal(gmem_write(&vm.mem, CODE_GPA, halt_guest, sizeof(halt_guest)), 0);
	h.v = vm.vcpus[0];
	assert_int_equal(pthread_create(&t, NULL, halter_thread, &h), 0);
	for (int i = 0; i < 50 && !__atomic_load_n(&h.halted, __ATOMIC_SEQ_CST); i++) {
		nanosleep(&tick, NULL);
		if (__atomic_load_n(&h.v->kickable, __ATOMIC_SEQ_CST))
			vcpu_kick(h.v);
	}
	pthread_join(t, NULL);
	assert_true(h.halted);
	if (vcpu_state_save(vm.vcpus[0], &out[0], err, sizeof(err)) < 0 ||
	    vm_state_save(&vm, &out[1], err, sizeof(err)) < 0)
		fail_msg("save: %s", err);
	vm_destroy(&vm);

	make_vm(&vm, 1);
	sbuf_reader_init(&r, out[1].data, out[1].len);
	if (vm_state_restore(&vm, &r, err, sizeof(err)) < 0)
		fail_msg("vm restore: %s", err);
	sbuf_reader_init(&r, out[0].data, out[0].len);
	if (vcpu_state_restore(vm.vcpus[0], &r, err, sizeof(err)) < 0 ||
	    vm_state_restore_finish(&vm, err, sizeof(err)) < 0)
		fail_msg("restore: %s", err);
	assert_int_equal(mp_state_of(vm.vcpus[0]), KVM_MP_STATE_HALTED);
	assert_int_equal(ioctl(vm.vcpus[0]->fd, KVM_GET_REGS, &regs), 0);
	assert_int_equal(regs.rip, CODE_GPA + 2); /* after the hlt */
	vm_destroy(&vm);
	sbuf_free(&out[0]);
	sbuf_free(&out[1]);
}

/* A guest with VMX or SVM on is refused at save (its nested state would
 * be lost); skipped where KVM offers neither (PVM). */
static void test_guest_using_vmx_or_svm_is_not_saved(void **state)
{
	struct sbuf out = {0};
	struct kvm_sregs sr;
	struct vm vm;
	char err[256] = "";
	bool on;

	(void)state;
	if (!kvm_available())
		skip();
	make_vm(&vm, 1);
	assert_int_equal(ioctl(vm.vcpus[0]->fd, KVM_GET_SREGS, &sr), 0);
	sr.cr4 |= 1ull << 13; /* VMXE */
	on = ioctl(vm.vcpus[0]->fd, KVM_SET_SREGS, &sr) == 0;
	if (!on) {
		sr.cr4 &= ~(1ull << 13);
		sr.efer |= 1ull << 12; /* SVME */
		on = ioctl(vm.vcpus[0]->fd, KVM_SET_SREGS, &sr) == 0;
	}
	if (on) {
		assert_int_equal(vcpu_state_save(vm.vcpus[0], &out, err, sizeof(err)), -1);
		assert_contains(err, "cannot save nested state");
	}
	vm_destroy(&vm);
	sbuf_free(&out);
	if (!on)
		skip();
}

/* Restore `len` bytes of `data` onto a fresh vCPU: the error line, or ""
 * when it was taken. */
static void restore_edited(const uint8_t *data, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader r;
	struct vm vm;

	make_vm(&vm, 1);
	err[0] = '\0';
	sbuf_reader_init(&r, data, len);
	if (vcpu_state_restore(vm.vcpus[0], &r, err, errlen) == 0)
		err[0] = '\0';
	else
		assert_true(err[0] != '\0');
	vm_destroy(&vm);
}

static void test_truncated_and_bad_version_are_refused(void **state)
{
	struct sbuf vcpu_out = {0}, vm_out = {0};
	struct sbuf_reader r;
	struct vm vm;
	char err[256];

	(void)state;
	if (!kvm_available())
		skip();
	save_one(&vcpu_out, &vm_out);
	restore_edited(vcpu_out.data, vcpu_out.len - 5, err, sizeof(err));
	assert_contains(err, "truncated");
	restore_edited(vcpu_out.data, 100, err, sizeof(err));
	assert_contains(err, "truncated");
	vcpu_out.data[0] = 7;
	restore_edited(vcpu_out.data, vcpu_out.len, err, sizeof(err));
	assert_contains(err, "version 7");

	make_vm(&vm, 1);
	sbuf_reader_init(&r, vm_out.data, vm_out.len - 1);
	assert_int_equal(vm_state_restore(&vm, &r, err, sizeof(err)), -1);
	assert_contains(err, "truncated");
	vm_out.data[0] = 2;
	sbuf_reader_init(&r, vm_out.data, vm_out.len);
	assert_int_equal(vm_state_restore(&vm, &r, err, sizeof(err)), -1);
	assert_contains(err, "version 2");
	assert_int_equal(vm_state_restore_finish(&vm, err, sizeof(err)), -1);
	vm_destroy(&vm);
	sbuf_free(&vcpu_out);
	sbuf_free(&vm_out);
}

/* The bytes of leaf `fn`.`idx`'s entry in a vCPU section (version u16,
 * APIC ID u32, count u32, then 7 u32 per entry). */
static uint8_t *cpuid_entry_in(struct sbuf *b, uint32_t fn, uint32_t idx)
{
	uint32_t n, f, i;

	memcpy(&n, b->data + 6, 4);
	for (uint32_t k = 0; k < n; k++) {
		uint8_t *e = b->data + 10 + 28 * k;

		memcpy(&f, e, 4);
		memcpy(&i, e + 4, 4);
		if (f == fn && i == idx)
			return e;
	}
	return NULL;
}

static void test_cpu_feature_the_host_lacks_is_refused(void **state)
{
	struct sbuf vcpu_out = {0}, vm_out = {0};
	struct kvm_cpuid2 *vc = calloc(1, sizeof(*vc) + 512 * sizeof(vc->entries[0]));
	uint32_t ebx, has = 0;
	uint8_t *e;
	struct vm vm;
	char err[256], want[64];
	int bit = -1;

	(void)state;
	if (!kvm_available())
		skip();
	/* A bit neither KVM's supported list nor a fresh vCPU has (PVM's
	 * vCPUs show host features beyond the list). */
	make_vm(&vm, 1);
	for (uint32_t i = 0; i < vm.supported_cpuid->nent; i++)
		if (vm.supported_cpuid->entries[i].function == 7 &&
		    vm.supported_cpuid->entries[i].index == 0)
			has |= vm.supported_cpuid->entries[i].ebx;
	assert_non_null(vc);
	vc->nent = 512;
	assert_int_equal(ioctl(vm.vcpus[0]->fd, KVM_GET_CPUID2, vc), 0);
	for (uint32_t i = 0; i < vc->nent; i++)
		if (vc->entries[i].function == 7 && vc->entries[i].index == 0)
			has |= vc->entries[i].ebx;
	free(vc);
	for (int b = 0; b < 32 && bit < 0; b++)
		if (!(has & (1u << b)))
			bit = b;
	vm_destroy(&vm);
	if (bit < 0)
		skip(); /* the host has every bit of leaf 7.0 ebx */
	save_one(&vcpu_out, &vm_out);
	e = cpuid_entry_in(&vcpu_out, 7, 0);
	assert_non_null(e);
	memcpy(&ebx, e + 16, 4);
	ebx |= 1u << bit;
	memcpy(e + 16, &ebx, 4);
	restore_edited(vcpu_out.data, vcpu_out.len, err, sizeof(err));
	snprintf(want, sizeof(want), "(leaf 0x7.0 ebx bit %d) the guest saw", bit);
	assert_contains(err, "host lacks CPU feature");
	assert_contains(err, want);
	sbuf_free(&vcpu_out);
	sbuf_free(&vm_out);
}

static void test_tsc_rate_off_by_one_percent_is_refused(void **state)
{
	struct sbuf vcpu_out = {0}, vm_out = {0};
	uint8_t *p;
	uint32_t khz;
	struct vm vm;
	char err[256];
	bool scaling;

	(void)state;
	if (!kvm_available())
		skip();
	make_vm(&vm, 1);
	scaling = ioctl(vm.vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_CONTROL) > 0;
	vm_destroy(&vm);
	save_one(&vcpu_out, &vm_out);
	p = vcpu_out.data + vcpu_out.len - EVENTS_BYTES - 4;
	memcpy(&khz, p, 4);
	khz += khz / 1000 * 10 + 1;
	memcpy(p, &khz, 4);
	restore_edited(vcpu_out.data, vcpu_out.len, err, sizeof(err));
	if (scaling)
		assert_string_equal(err, ""); /* KVM_SET_TSC_KHZ takes it */
	else
		assert_contains(err, "no TSC scaling");
	sbuf_free(&vcpu_out);
	sbuf_free(&vm_out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip_continues_the_count),
	    cmocka_unit_test(test_round_trip_without_sregs2_and_xsave2),
	    cmocka_unit_test(test_msr_list_has_the_tsc),
	    cmocka_unit_test(test_ap_waiting_for_sipi_keeps_its_mp_state),
	    cmocka_unit_test(test_halted_vcpu_restores_halted),
	    cmocka_unit_test(test_guest_using_vmx_or_svm_is_not_saved),
	    cmocka_unit_test(test_truncated_and_bad_version_are_refused),
	    cmocka_unit_test(test_cpu_feature_the_host_lacks_is_refused),
	    cmocka_unit_test(test_tsc_rate_off_by_one_percent_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
