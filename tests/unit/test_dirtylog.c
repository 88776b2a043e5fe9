/*
 * Unit tests for KVM's dirty log on the RAM slots (vm_dirty_log_*, live
 * migration) on this host's KVM: a real-mode guest writes one page and
 * OUTs; the log names that page and not the one the guest only reads,
 * nor what khyve itself wrote (gmem_mark_dirty's bitmap has that), and a
 * take clears it.  Skipped without a usable /dev/kvm.
 */
#include "unit.h"

#include <errno.h>
#include <sys/ioctl.h>

#include "vmm/kvm.h"
#include "vmm/vcpu.h"

#define CODE_GPA  0x1000
#define COUNT_GPA 0x2000
#define OUT_PORT  0x10

/*
 * 1000: a1 00 20   mov ax, [0x2000]
 * 1003: 40         inc ax
 * 1004: a3 00 20   mov [0x2000], ax
 * 1007: e7 10      out 0x10, ax
 * 1009: eb f5      jmp 0x1000
 */
static const uint8_t guest[] = {0xa1, 0x00, 0x20, 0x40, 0xa3, 0x00, 0x20, 0xe7, 0x10, 0xeb, 0xf5};

static void make_guest(struct vm *vm)
{
	struct cpu_topology topo = {.sockets = 1, .cores = 1, .threads = 1};
	struct kvm_sregs sr;
	struct kvm_regs r = {.rip = CODE_GPA, .rflags = 2};
	char err[256] = "";
	struct vcpu *v;

	if (vm_create(vm, 16ull << 20, &topo, err, sizeof(err)) < 0 ||
	    vm_create_vcpus(vm, err, sizeof(err)) < 0)
		fail_msg("cannot make the VM: %s", err);
	v = vm->vcpus[0];
	assert_int_equal(gmem_write(&vm->mem, CODE_GPA, guest, sizeof(guest)), 0);
	assert_int_equal(ioctl(v->fd, KVM_GET_SREGS, &sr), 0);
	sr.cs.selector = 0;
	sr.cs.base = 0;
	assert_int_equal(ioctl(v->fd, KVM_SET_SREGS, &sr), 0);
	assert_int_equal(ioctl(v->fd, KVM_SET_REGS, &r), 0);
}

static void run_to_out(struct vcpu *v)
{
	for (int i = 0; i < 100; i++) {
		if (vcpu_run(v) < 0) {
			assert_int_equal(errno, EINTR);
			continue;
		}
		assert_int_equal(v->run->exit_reason, KVM_EXIT_IO);
		assert_int_equal(v->run->io.port, OUT_PORT);
		return;
	}
	fail_msg("no OUT");
}

static bool page_set(const uint64_t *bits, uint64_t gpa)
{
	return (bits[gpa / 4096 / 64] >> (gpa / 4096 % 64)) & 1;
}

static void test_dirty_log_names_the_guests_writes(void **state)
{
	static struct vm vm;
	uint64_t *bits, *scratch;
	size_t words;
	unsigned r0;

	(void)state;
	if (!kvm_available())
		skip();
	make_guest(&vm);
	r0 = 0; /* RAM from 0 is the first region */
	assert_false(vm.mem.region[r0].readonly);
	words = gmem_dirty_words(vm.mem.region[r0].size);
	bits = calloc(words, sizeof(*bits));
	scratch = calloc(words, sizeof(*scratch));
	assert_non_null(bits);
	assert_non_null(scratch);

	assert_int_equal(vm_dirty_log_start(&vm), 0);
	assert_int_equal(gmem_dirty_start(&vm.mem), 0);
	run_to_out(vm.vcpus[0]);
	vm.mem.region[r0].hva[0x5000] = 1;                        /* behind KVM's back */
	assert_int_equal(gmem_write(&vm.mem, 0x6000, "x", 1), 0); /* recorded by khyve */
	assert_int_equal(vm_dirty_log_take(&vm, r0, bits, scratch), 0);
	assert_true(page_set(bits, COUNT_GPA));
	assert_false(page_set(bits, CODE_GPA));
	assert_false(page_set(bits, 0x5000));
	assert_false(page_set(bits, 0x6000));
	gmem_dirty_take(&vm.mem, r0, bits, true);
	assert_true(page_set(bits, 0x6000));

	/* Taken means cleared: nothing new until the guest writes again. */
	memset(bits, 0, words * sizeof(*bits));
	assert_int_equal(vm_dirty_log_take(&vm, r0, bits, scratch), 0);
	gmem_dirty_take(&vm.mem, r0, bits, true);
	assert_false(page_set(bits, COUNT_GPA));
	assert_false(page_set(bits, 0x6000));
	run_to_out(vm.vcpus[0]);
	assert_int_equal(vm_dirty_log_take(&vm, r0, bits, scratch), 0);
	assert_true(page_set(bits, COUNT_GPA));

	/* Off again: the guest runs on; a region that is ROM or absent is refused. */
	vm_dirty_log_stop(&vm);
	gmem_dirty_stop(&vm.mem);
	run_to_out(vm.vcpus[0]);
	assert_int_equal(vm_dirty_log_take(&vm, GMEM_MAX_REGIONS, bits, scratch), -1);
	free(bits);
	free(scratch);
	vm_destroy(&vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dirty_log_names_the_guests_writes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
