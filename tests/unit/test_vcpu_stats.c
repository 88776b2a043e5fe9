/*
 * Unit tests for the vCPU counters (src/vmm/vcpu_stats.h) on this host's
 * KVM: a flat 32-bit guest loops over an OUT and an MMIO store, and each
 * KVM_RUN return shows in the counters, through KVM's binary statistics
 * (where the kernel has them) and through vcpu_run()'s own counts (the
 * fallback, and the userspace_* keys).
 * Skipped without a usable /dev/kvm.
 */
#include "unit.h"

#include "lib/counters.h"
#include "unit_counters.h"
#include "vmm/kvm.h"
#include "vmm/vcpu.h"
#include "vmm/vcpu_stats.h"

#define RUNS 10

static struct vm vm;
static bool have_vm;

/* outb %al, $0x80; movl %eax, 0xd0000000 (no memory there); jmp back */
static const uint8_t code[] = {0xe6, 0x80, 0xa3, 0x00, 0x00, 0x00, 0xd0, 0xeb, 0xf7};

static int setup(void **state)
{
	static const uint64_t gdt[4] = {0, 0x00cf9b000000ffffull, 0x00cf93000000ffffull,
	                                0x00008b0000000067ull};
	struct boot_cpu_state st = {.mode = BOOT_FLAT32,
	                            .rip = 0x8000,
	                            .rsp = 0x7000,
	                            .gdt_base = 0x5000,
	                            .gdt_limit = sizeof(gdt) - 1,
	                            .cs = 0x08,
	                            .ds = 0x10,
	                            .tr = 0x18};
	struct cpu_topology topo = {.sockets = 1, .cores = 1, .threads = 1};
	char err[256];

	(void)state;
	counters_reset();
	have_vm = false;
	if (!kvm_available())
		return 0;
	if (vm_create(&vm, 16ull << 20, &topo, err, sizeof(err)) < 0 ||
	    vm_create_vcpus(&vm, err, sizeof(err)) < 0 ||
	    gmem_write(&vm.mem, 0x5000, gdt, sizeof(gdt)) < 0 ||
	    gmem_write(&vm.mem, 0x8000, code, sizeof(code)) < 0 ||
	    vcpu_set_boot_state(vm.vcpus[0], &st) < 0) {
		fprintf(stderr, "cannot make the VM: %s\n", err);
		return -1;
	}
	have_vm = true;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	/* The sources point at the vCPUs: forget them first. */
	counters_reset();
	if (have_vm)
		vm_destroy(&vm);
	return 0;
}

/* RUNS returns from KVM_RUN, alternately port I/O and MMIO. */
static void run_guest(void)
{
	for (int i = 0; i < RUNS; i++) {
		assert_int_equal(vcpu_run(vm.vcpus[0]), 0);
		assert_int_equal(vm.vcpus[0]->run->exit_reason,
		                 i % 2 == 0 ? KVM_EXIT_IO : KVM_EXIT_MMIO);
	}
}

static void read_vcpu0(struct unit_counters *c)
{
	assert_true(unit_counters_read(COUNTER_VCPU, "0", c));
	assert_false(c->duplicate);
}

static void test_fallback_counts_userspace_exits(void **state)
{
	struct unit_counters c;

	(void)state;
	if (!have_vm)
		skip();
	assert_int_equal(vcpu_stats_register(&vm, false), 0);
	assert_int_equal(vcpu_stats_register(&vm, false), -1); /* "0" is taken */
	read_vcpu0(&c);
	assert_int_equal(unit_counter(&c, "exits_total"), 0);
	run_guest();
	read_vcpu0(&c);
	assert_int_equal(unit_counter(&c, "exits_total"), RUNS);
	assert_int_equal(unit_counter(&c, "io_exits_total"), RUNS / 2);
	assert_int_equal(unit_counter(&c, "mmio_exits_total"), RUNS / 2);
	assert_int_equal(unit_counter(&c, "signal_exits_total"), 0);
	assert_int_equal(unit_counter(&c, "halt_exits_total"), 0);
	assert_int_equal(unit_counter(&c, "userspace_exits_total"), RUNS);
	assert_int_equal(unit_counter(&c, "userspace_system_event_exits_total"), 0);
	assert_int_equal(unit_counter(&c, "userspace_other_exits_total"), 0);
	assert_int_equal(unit_counter(&c, "irq_exits_total"), UINT64_MAX); /* KVM's only */
	/* A kick before KVM_RUN: it returns EINTR, counted as a signal. */
	vm.vcpus[0]->run->immediate_exit = 1;
	assert_int_equal(vcpu_run(vm.vcpus[0]), -1);
	vm.vcpus[0]->run->immediate_exit = 0;
	read_vcpu0(&c);
	assert_int_equal(unit_counter(&c, "signal_exits_total"), 1);
	assert_int_equal(unit_counter(&c, "userspace_signal_exits_total"), 1);
	assert_int_equal(unit_counter(&c, "exits_total"), RUNS + 1);
}

static void test_kvm_stats(void **state)
{
	/* The keys the API contract names; the last three only KVM has. */
	static const char *const kvm_keys[] = {
	    "exits_total",        "io_exits_total",
	    "mmio_exits_total",   "halt_exits_total",
	    "signal_exits_total", "irq_exits_total",
	    "halt_wakeup_total",  "halt_successful_poll_total",
	};
	struct unit_counters before, after;
	int used;

	(void)state;
	if (!have_vm)
		skip();
	used = vcpu_stats_register(&vm, true);
	assert_true(used == 0 || used == 1);
	if (used == 0)
		skip(); /* a kernel without KVM_GET_STATS_FD: the fallback above */
	read_vcpu0(&before);
	for (size_t i = 0; i < ARRAY_LEN(kvm_keys); i++)
		if (unit_counter(&before, kvm_keys[i]) == UINT64_MAX)
			fail_msg("KVM's statistics lack %s", kvm_keys[i]);
	assert_int_equal(unit_counter(&before, "userspace_other_exits_total"), 0);
	run_guest();
	read_vcpu0(&after);
	/* KVM counts every exit; those that came to khyve are I/O or MMIO for
	 * KVM too (a PVM host's KVM counts port I/O as emulation, not
	 * io_exits). */
#define DELTA(key) (unit_counter(&after, key) - unit_counter(&before, key))
	assert_true(DELTA("exits_total") >= RUNS);
	assert_true(DELTA("io_exits_total") + DELTA("mmio_exits_total") >= RUNS / 2);
	assert_int_equal(DELTA("userspace_exits_total"), RUNS);
	assert_int_equal(DELTA("userspace_io_exits_total"), RUNS / 2);
	assert_int_equal(DELTA("userspace_mmio_exits_total"), RUNS / 2);
#undef DELTA
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_fallback_counts_userspace_exits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_kvm_stats, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
