/*
 * Unit tests for coalesced I/O's ring (src/vmm/coalesced.h), on a ring page
 * filled the way KVM fills it: queued writes come out oldest first, across
 * the ring's end, with their lengths bounded; the ring's first index
 * follows; a damaged index or no ring applies nothing.
 */
#include "unit.h"

#include <linux/kvm.h>

#include "vmm/coalesced.h"
#include "vmm/kvm.h"
#include "vmm/vcpu.h"

#define PAGE 4096u
#define ENTRIES                                                                                    \
	((PAGE - sizeof(struct kvm_coalesced_mmio_ring)) / sizeof(struct kvm_coalesced_mmio))

struct seen {
	unsigned n;
	uint64_t addr[8];
	unsigned len[8];
	bool pio[8];
	uint64_t val[8];
};

static void record(void *arg, uint64_t addr, unsigned len, bool pio, const uint8_t *data)
{
	struct seen *s = arg;

	if (s->n >= 8)
		fail_msg("more writes than queued");
	s->addr[s->n] = addr;
	s->len[s->n] = len;
	s->pio[s->n] = pio;
	s->val[s->n] = 0;
	memcpy(&s->val[s->n], data, len);
	s->n++;
}

struct fake {
	struct vm vm;
	struct vcpu vcpu;
	struct vcpu *vcpus[1];
	uint8_t pages[3 * PAGE] __attribute__((aligned(4096)));
};

static struct kvm_coalesced_mmio_ring *fake_vm(struct fake *f)
{
	memset(f, 0, sizeof(*f));
	f->vcpu.run = (struct kvm_run *)f->pages;
	f->vcpus[0] = &f->vcpu;
	f->vm.vcpus = f->vcpus;
	f->vm.ncpus = 1;
	f->vm.coalesced_page = 2; /* where x86 KVM puts it */
	return (struct kvm_coalesced_mmio_ring *)(f->pages + 2 * PAGE);
}

static void queue(struct kvm_coalesced_mmio_ring *r, uint64_t addr, uint32_t len, bool pio,
                  uint32_t val)
{
	struct kvm_coalesced_mmio *e = &r->coalesced_mmio[r->last];

	e->phys_addr = addr;
	e->len = len;
	e->pio = pio;
	memcpy(e->data, &val, sizeof(val));
	r->last = (r->last + 1) % ENTRIES;
}

/* Three writes queued across the ring's end come out in order. */
static void test_order_and_wrap(void **state)
{
	static struct fake f;
	struct kvm_coalesced_mmio_ring *r = fake_vm(&f);
	struct seen s = {0};

	(void)state;
	r->first = r->last = ENTRIES - 2;
	queue(r, 0xcf8, 4, true, 0x80000000);
	queue(r, 0xcf8, 4, true, 0x80000800);
	queue(r, 0xfed00000, 2, false, 0xbeef);
	vm_coalesced_drain(&f.vm, record, &s);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.val[0], 0x80000000);
	assert_int_equal(s.val[1], 0x80000800);
	assert_true(s.pio[0] && s.pio[1] && !s.pio[2]);
	assert_int_equal(s.addr[2], 0xfed00000);
	assert_int_equal(s.len[2], 2);
	assert_int_equal(r->first, 1);
	assert_int_equal(r->first, r->last);
	s.n = 0;
	vm_coalesced_drain(&f.vm, record, &s); /* empty: nothing */
	assert_int_equal(s.n, 0);
}

/* A length of 0 is skipped, one past the entry's 8 data bytes is cut. */
static void test_lengths(void **state)
{
	static struct fake f;
	struct kvm_coalesced_mmio_ring *r = fake_vm(&f);
	struct seen s = {0};

	(void)state;
	queue(r, 0xcf8, 0, true, 1);
	queue(r, 0xcf8, 200, true, 2);
	vm_coalesced_drain(&f.vm, record, &s);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.len[0], 8);
	assert_int_equal(r->first, 2);
}

/* An index past the ring, or no ring page: nothing is applied. */
static void test_damaged_or_none(void **state)
{
	static struct fake f;
	struct kvm_coalesced_mmio_ring *r = fake_vm(&f);
	struct seen s = {0};

	(void)state;
	queue(r, 0xcf8, 4, true, 1);
	r->first = ENTRIES + 5;
	vm_coalesced_drain(&f.vm, record, &s);
	assert_int_equal(s.n, 0);
	r->first = 0;
	f.vm.coalesced_page = 0;
	vm_coalesced_drain(&f.vm, record, &s);
	assert_int_equal(s.n, 0);
	assert_int_equal(vm_coalesced_page(&f.vm), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_order_and_wrap),
	    cmocka_unit_test(test_lengths),
	    cmocka_unit_test(test_damaged_or_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
