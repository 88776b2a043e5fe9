/*
 * Unit tests for guest CPUID topology (src/vmm/cpuid.h) on synthetic
 * KVM_GET_SUPPORTED_CPUID-like entry arrays.  Intel SDM vol. 2A "CPUID",
 * AMD APM vol. 3 appendix E.
 */
#include "unit.h"

#include "vmm/cpuid.h"

#define CAP 64

/* "GenuineIntel" / "AuthenticAMD" in EBX, EDX, ECX. */
static const uint32_t intel[3] = {0x756e6547, 0x49656e69, 0x6c65746e};
static const uint32_t amd[3] = {0x68747541, 0x69746e65, 0x444d4163};

struct cpuid_set {
	struct kvm_cpuid_entry2 e[CAP];
	unsigned n;
};

static struct kvm_cpuid_entry2 *add(struct cpuid_set *s, uint32_t fn, uint32_t idx, uint32_t eax,
                                    uint32_t ebx, uint32_t ecx, uint32_t edx)
{
	struct kvm_cpuid_entry2 *x;

	assert_true(s->n < CAP);
	x = &s->e[s->n++];
	memset(x, 0, sizeof(*x));
	x->function = fn;
	x->index = idx;
	x->eax = eax;
	x->ebx = ebx;
	x->ecx = ecx;
	x->edx = edx;
	return x;
}

static const struct kvm_cpuid_entry2 *find(const struct kvm_cpuid_entry2 *e, int n, uint32_t fn,
                                           uint32_t idx)
{
	const struct kvm_cpuid_entry2 *hit = NULL;

	for (int i = 0; i < n; i++) {
		if (e[i].function == fn && e[i].index == idx) {
			assert_null(hit); /* never duplicated */
			hit = &e[i];
		}
	}
	return hit;
}

static unsigned count_leaf(const struct kvm_cpuid_entry2 *e, int n, uint32_t fn)
{
	unsigned c = 0;

	for (int i = 0; i < n; i++)
		c += e[i].function == fn;
	return c;
}

/* Deterministic cache parameters: type (1 data, 2 instr, 3 unified), level. */
static uint32_t cache_eax(unsigned type, unsigned level)
{
	/* Self-initialising (bit 8), plus garbage in the sharing fields that
	 * cpuid_fixup must replace. */
	return type | (level << 5) | (1u << 8) | (0x3ffu << 14) | (0x3fu << 26);
}

/* A KVM-like Intel set: leaf 0 with max `max_basic`, leaf 1, leaf 4
 * subleaves, a stale leaf 0xB, extended leaves. */
static void intel_set(struct cpuid_set *s, uint32_t max_basic)
{
	memset(s, 0, sizeof(*s));
	add(s, 0, 0, max_basic, intel[0], intel[2], intel[1]);
	/* EBX[15:0]: brand index / CLFLUSH size; EDX: HTT already set. */
	add(s, 1, 0, 0x000906ea, 0xff000800 | 0x00100000, 0x7ffafbbf, 0x1f8bfbff);
	add(s, 4, 0, cache_eax(1, 1), 0x01c0003f, 0x3f, 0);
	add(s, 4, 1, cache_eax(2, 1), 0x01c0003f, 0x3f, 0);
	add(s, 4, 2, cache_eax(3, 2), 0x00c0003f, 0x3ff, 0);
	add(s, 4, 3, cache_eax(3, 3), 0x03c0003f, 0x2fff, 6);
	add(s, 4, 4, 0, 0, 0, 0); /* no more caches */
	add(s, 7, 0, 0, 0x029c6fbf, 0, 0);
	add(s, 0xb, 0, 1, 2, 0x100, 99); /* stale host topology */
	add(s, 0xb, 1, 4, 16, 0x201, 99);
	add(s, 0x1f, 0, 1, 2, 0x100, 99);
	add(s, 0x40000000, 0, 0x40000001, 0x4b4d564b, 0x564b4d56, 0x4d);
	add(s, 0x80000000, 0, 0x80000008, 0, 0, 0);
	add(s, 0x80000008, 0, 0x3027, 0, 0, 0);
}

static void amd_set(struct cpuid_set *s, uint32_t max_basic)
{
	memset(s, 0, sizeof(*s));
	add(s, 0, 0, max_basic, amd[0], amd[2], amd[1]);
	add(s, 1, 0, 0x00a20f10, 0x00000800, 0x7ed8320b, 0x178bfbff);
	add(s, 4, 0, cache_eax(1, 1), 0x01c0003f, 0x3f, 0); /* must stay untouched */
	add(s, 0x80000000, 0, 0x80000021, amd[0], amd[2], amd[1]);
	add(s, 0x80000008, 0, 0x3030, 0, 0xf0ff0f0fu | 0x00010000, 0);
	add(s, 0x8000001e, 0, 0xdead, 0xbeef, 0xcafe, 0xf00d);
}

static struct cpu_topology topo(unsigned sockets, unsigned cores, unsigned threads)
{
	return (struct cpu_topology){sockets, cores, threads};
}

static void test_bits(void **state)
{
	struct cpu_topology t;

	(void)state;
	t = topo(1, 1, 1);
	assert_int_equal(topo_thread_bits(&t), 0);
	assert_int_equal(topo_core_bits(&t), 0);
	t = topo(1, 2, 2);
	assert_int_equal(topo_thread_bits(&t), 1);
	assert_int_equal(topo_core_bits(&t), 1);
	t = topo(1, 3, 3);
	assert_int_equal(topo_thread_bits(&t), 2);
	assert_int_equal(topo_core_bits(&t), 2);
	t = topo(1, 4, 4);
	assert_int_equal(topo_core_bits(&t), 2);
	t = topo(1, 5, 8);
	assert_int_equal(topo_core_bits(&t), 3);
	assert_int_equal(topo_thread_bits(&t), 3);
	t = topo(1, 288, 1);
	assert_int_equal(topo_core_bits(&t), 9);
}

static void test_apic_ids(void **state)
{
	struct cpu_topology t;

	(void)state;
	t = topo(1, 1, 1);
	assert_int_equal(topo_apic_id(&t, 0), 0);

	/* 2 sockets x 2 cores x 2 threads: one bit each, IDs are dense. */
	t = topo(2, 2, 2);
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(topo_apic_id(&t, i), i);

	/* Sockets only: one ID per socket. */
	t = topo(4, 1, 1);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(topo_apic_id(&t, i), i);

	/* 3 cores need 2 bits: ID 3 is skipped in each socket. */
	t = topo(2, 3, 1);
	static const uint32_t want3[] = {0, 1, 2, 4, 5, 6};
	for (unsigned i = 0; i < ARRAY_LEN(want3); i++)
		assert_int_equal(topo_apic_id(&t, i), want3[i]);

	/* 3 cores x 2 threads: thread bit 0, core bits 1-2, socket from bit 3. */
	t = topo(2, 3, 2);
	static const uint32_t want32[] = {0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13};
	for (unsigned i = 0; i < ARRAY_LEN(want32); i++)
		assert_int_equal(topo_apic_id(&t, i), want32[i]);

	/* 3 threads: thread field of 2 bits. */
	t = topo(1, 2, 3);
	static const uint32_t want23[] = {0, 1, 2, 4, 5, 6};
	for (unsigned i = 0; i < ARRAY_LEN(want23); i++)
		assert_int_equal(topo_apic_id(&t, i), want23[i]);

	/* All IDs distinct for a big odd topology. */
	t = topo(3, 6, 2);
	for (unsigned i = 0; i < 36; i++)
		for (unsigned j = 0; j < i; j++)
			assert_true(topo_apic_id(&t, i) != topo_apic_id(&t, j));
}

/* Leaf 0xB / 0x1F subleaves 0..2 for a topology and vCPU. */
static void check_topology_leaf(const struct kvm_cpuid_entry2 *e, int n, uint32_t fn,
                                const struct cpu_topology *t, uint32_t apic_id)
{
	unsigned tb = topo_thread_bits(t), cb = topo_core_bits(t);
	const struct kvm_cpuid_entry2 *x;

	assert_int_equal(count_leaf(e, n, fn), 3);
	x = find(e, n, fn, 0); /* SMT level */
	assert_non_null(x);
	assert_int_equal(x->eax & 0x1f, tb);
	assert_int_equal(x->ebx & 0xffff, t->threads);
	assert_int_equal(x->ecx & 0xffff, (1u << 8) | 0);
	assert_int_equal(x->edx, apic_id);
	assert_true(x->flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX);
	x = find(e, n, fn, 1); /* core level */
	assert_non_null(x);
	assert_int_equal(x->eax & 0x1f, tb + cb);
	assert_int_equal(x->ebx & 0xffff, t->threads * t->cores);
	assert_int_equal(x->ecx & 0xffff, (2u << 8) | 1);
	assert_int_equal(x->edx, apic_id);
	assert_true(x->flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX);
	x = find(e, n, fn, 2); /* invalid level: ends the enumeration */
	assert_non_null(x);
	assert_int_equal(x->eax, 0);
	assert_int_equal(x->ebx, 0);
	assert_int_equal((x->ecx >> 8) & 0xff, 0);
	assert_int_equal(x->ecx & 0xff, 2);
	assert_int_equal(x->edx, apic_id);
}

static void test_intel_fixup(void **state)
{
	const struct cpu_topology t = topo(2, 3, 2);
	struct cpuid_set s;
	const struct kvm_cpuid_entry2 *x;
	int n;

	(void)state;
	for (unsigned idx = 0; idx < 12; idx++) {
		uint32_t id = topo_apic_id(&t, idx);

		intel_set(&s, 0x1f);
		n = cpuid_fixup(s.e, s.n, CAP, &t, idx);
		assert_true(n > 0);
		/* The stale 0xB (2) and 0x1F (1) entries were replaced by 3 + 3. */
		assert_int_equal(n, (int)s.n - 3 + 6);

		/* Leaf 1. */
		x = find(s.e, n, 1, 0);
		assert_non_null(x);
		assert_int_equal(x->ebx >> 24, id);
		assert_int_equal((x->ebx >> 16) & 0xff, 1u << (1 + 2)); /* 2^(thread+core bits) */
		assert_int_equal(x->ebx & 0xffff, 0x0800);              /* kept */
		assert_true(x->ecx & (1u << 31));                       /* hypervisor */
		assert_true(x->edx & (1u << 28));                       /* HTT */
		assert_int_equal(x->eax, 0x000906ea);

		/* Leaf 4: sharing and cores-per-package rewritten, the rest kept. */
		for (unsigned sub = 0; sub < 4; sub++) {
			x = find(s.e, n, 4, sub);
			assert_non_null(x);
			unsigned level = (x->eax >> 5) & 7;
			unsigned sharing = level >= 3 ? 6 : 2;
			assert_int_equal(((x->eax >> 14) & 0xfff) + 1, sharing);
			assert_int_equal((x->eax >> 26) + 1, 4); /* 2 core bits */
			assert_int_equal(x->eax & 0x3fff, cache_eax(x->eax & 0x1f, level) & 0x3fff);
		}
		x = find(s.e, n, 4, 4);
		assert_non_null(x);
		assert_int_equal(x->eax, 0); /* the terminator is left alone */

		check_topology_leaf(s.e, n, 0xb, &t, id);
		check_topology_leaf(s.e, n, 0x1f, &t, id);

		/* Untouched leaves. */
		x = find(s.e, n, 0x40000000, 0);
		assert_non_null(x);
		assert_int_equal(x->ebx, 0x4b4d564b);
		x = find(s.e, n, 7, 0);
		assert_non_null(x);
		assert_int_equal(x->ebx, 0x029c6fbf);
		x = find(s.e, n, 0, 0);
		assert_int_equal(x->eax, 0x1f);
	}
}

static void test_single_cpu(void **state)
{
	const struct cpu_topology t = topo(1, 1, 1);
	struct cpuid_set s;
	const struct kvm_cpuid_entry2 *x;
	int n;

	(void)state;
	intel_set(&s, 0x16); /* no 0x1F */
	n = cpuid_fixup(s.e, s.n, CAP, &t, 0);
	assert_true(n > 0);
	x = find(s.e, n, 1, 0);
	assert_int_equal(x->ebx >> 24, 0);
	assert_int_equal((x->ebx >> 16) & 0xff, 1);
	assert_false(x->edx & (1u << 28)); /* HTT cleared: one logical CPU */
	assert_true(x->ecx & (1u << 31));
	check_topology_leaf(s.e, n, 0xb, &t, 0);
	/* max < 0x1f: no 0x1F leaf, and the stale one is gone. */
	assert_int_equal(count_leaf(s.e, n, 0x1f), 0);
	assert_int_equal(n, (int)s.n - 3 + 3);
	/* Leaf 4 for one core, one thread: nothing shared. */
	x = find(s.e, n, 4, 3);
	assert_int_equal((x->eax >> 14) & 0xfff, 0);
	assert_int_equal(x->eax >> 26, 0);
}

/* The guest sees no VMX or SVM: its nested state could not be saved. */
static void test_no_nested_virtualization(void **state)
{
	const struct cpu_topology t = topo(1, 1, 1);
	struct cpuid_set s;
	const struct kvm_cpuid_entry2 *x;
	int n;

	(void)state;
	intel_set(&s, 0x16);
	s.e[1].ecx |= 1u << 5;
	n = cpuid_fixup(s.e, s.n, CAP, &t, 0);
	x = find(s.e, n, 1, 0);
	assert_false(x->ecx & (1u << 5));
	amd_set(&s, 0x10);
	add(&s, 0x80000001, 0, 0, 0, 0x35c233ff, 0x2fd3fbff); /* SVM: ecx bit 2 */
	add(&s, 0x8000000a, 0, 1, 0x8000, 0, 0x1ebfbcff);
	n = cpuid_fixup(s.e, s.n, CAP, &t, 0);
	x = find(s.e, n, 0x80000001, 0);
	assert_false(x->ecx & (1u << 2));
	assert_true(x->ecx & 1u); /* the other bits stay */
	assert_int_equal(count_leaf(s.e, n, 0x8000000a), 0);
}

static void test_high_apic_ids(void **state)
{
	/* 288 vCPUs as 2 x 144: core bits 8, APIC IDs up to 0x18f. */
	const struct cpu_topology t = topo(2, 144, 1);
	struct cpuid_set s;
	const struct kvm_cpuid_entry2 *x;
	uint32_t id;
	int n;

	(void)state;
	id = topo_apic_id(&t, 287);
	assert_int_equal(id, (1u << 8) | 143);
	intel_set(&s, 0x1f);
	n = cpuid_fixup(s.e, s.n, CAP, &t, 287);
	assert_true(n > 0);
	/* The full x2APIC ID is in 0xB/0x1F; leaf 1 has its low 8 bits. */
	check_topology_leaf(s.e, n, 0xb, &t, id);
	check_topology_leaf(s.e, n, 0x1f, &t, id);
	x = find(s.e, n, 1, 0);
	assert_int_equal(x->ebx >> 24, id & 0xff);
}

static void test_old_cpu_no_topology_leaf(void **state)
{
	const struct cpu_topology t = topo(1, 2, 1);
	struct cpuid_set s;
	int n;

	(void)state;
	/* max basic leaf 0xA: neither 0xB nor 0x1F may be reported. */
	intel_set(&s, 0xa);
	n = cpuid_fixup(s.e, s.n, s.n, &t, 1); /* no room needed */
	assert_int_equal(n, (int)s.n - 3);
	assert_int_equal(count_leaf(s.e, n, 0xb), 0);
	assert_int_equal(count_leaf(s.e, n, 0x1f), 0);
	assert_int_equal(find(s.e, n, 1, 0)->ebx >> 24, 1);

	/* No leaf 0 at all: treated as max 0. */
	memset(&s, 0, sizeof(s));
	add(&s, 1, 0, 0, 0, 0, 0);
	n = cpuid_fixup(s.e, s.n, s.n, &t, 0);
	assert_int_equal(n, 1);
	assert_true(s.e[0].ecx & (1u << 31));

	/* An empty array. */
	n = cpuid_fixup(s.e, 0, CAP, &t, 0);
	assert_int_equal(n, 0);
}

static void test_cap_too_small(void **state)
{
	const struct cpu_topology t = topo(1, 4, 2);
	struct cpuid_set s;
	unsigned base;

	(void)state;
	/* 0x1F as well: needs 6 new entries after dropping 3 stale ones. */
	intel_set(&s, 0x1f);
	base = s.n - 3;
	assert_int_equal(cpuid_fixup(s.e, s.n, base + 2, &t, 0), -1);
	intel_set(&s, 0x1f);
	assert_int_equal(cpuid_fixup(s.e, s.n, base + 5, &t, 0), -1);
	intel_set(&s, 0x1f);
	assert_int_equal(cpuid_fixup(s.e, s.n, base + 6, &t, 0), (int)base + 6);
	/* Only 0xB: 3 new entries. */
	intel_set(&s, 0x1e);
	assert_int_equal(cpuid_fixup(s.e, s.n, base + 2, &t, 0), -1);
	intel_set(&s, 0x1e);
	assert_int_equal(cpuid_fixup(s.e, s.n, base + 3, &t, 0), (int)base + 3);
}

static void test_amd_fixup(void **state)
{
	const struct cpu_topology t = topo(2, 3, 2);
	struct cpuid_set s;
	const struct kvm_cpuid_entry2 *x;
	int n;

	(void)state;
	for (unsigned idx = 0; idx < 12; idx++) {
		uint32_t id = topo_apic_id(&t, idx);

		amd_set(&s, 0x10);
		n = cpuid_fixup(s.e, s.n, CAP, &t, idx);
		assert_true(n > 0);
		assert_int_equal(n, (int)s.n + 3); /* 0xB added (max >= 0xB) */

		x = find(s.e, n, 1, 0);
		assert_int_equal(x->ebx >> 24, id);
		assert_true(x->ecx & (1u << 31));
		assert_true(x->edx & (1u << 28));

		/* Leaf 4 is Intel's: left alone on AMD. */
		x = find(s.e, n, 4, 0);
		assert_int_equal(x->eax, cache_eax(1, 1));

		/* 0x80000008 ECX: NC = logical CPUs per package - 1 in [7:0],
		 * ApicIdCoreIdSize in [15:12]; other bits kept. */
		x = find(s.e, n, 0x80000008, 0);
		assert_non_null(x);
		assert_int_equal(x->ecx & 0xff, 6 - 1);
		assert_int_equal((x->ecx >> 12) & 0xf, 1 + 2);
		assert_int_equal(x->ecx & ~0xf0ffu, (0xf0ff0f0fu | 0x00010000) & ~0xf0ffu);
		assert_int_equal(x->eax, 0x3030);

		/* 0x8000001E: extended APIC ID, core (compute unit) ID, threads
		 * per core - 1, node ID = socket. */
		x = find(s.e, n, 0x8000001e, 0);
		assert_non_null(x);
		assert_int_equal(x->eax, id);
		assert_int_equal(x->ebx & 0xff, (idx / 2) % 3);
		assert_int_equal((x->ebx >> 8) & 0xff, 1);
		assert_int_equal(x->ecx & 0xff, idx / 6);
		assert_int_equal(x->edx, 0);

		check_topology_leaf(s.e, n, 0xb, &t, id);
	}
}

/* The same entries for every vCPU except the per-vCPU fields. */
static void test_per_vcpu_only(void **state)
{
	const struct cpu_topology t = topo(1, 4, 1);
	struct cpuid_set a, b;
	int na, nb;

	(void)state;
	intel_set(&a, 0x1f);
	intel_set(&b, 0x1f);
	na = cpuid_fixup(a.e, a.n, CAP, &t, 0);
	nb = cpuid_fixup(b.e, b.n, CAP, &t, 3);
	assert_int_equal(na, nb);
	for (int i = 0; i < na; i++) {
		assert_int_equal(a.e[i].function, b.e[i].function);
		assert_int_equal(a.e[i].index, b.e[i].index);
		assert_int_equal(a.e[i].eax, b.e[i].eax);
		assert_int_equal(a.e[i].ecx, b.e[i].ecx);
		if (a.e[i].function == 1) {
			assert_int_equal(a.e[i].ebx & 0xffffff, b.e[i].ebx & 0xffffff);
			assert_int_equal(b.e[i].ebx >> 24, 3);
		} else if (a.e[i].function == 0xb || a.e[i].function == 0x1f) {
			assert_int_equal(b.e[i].edx, 3);
		} else {
			assert_int_equal(a.e[i].ebx, b.e[i].ebx);
			assert_int_equal(a.e[i].edx, b.e[i].edx);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bits),
	    cmocka_unit_test(test_apic_ids),
	    cmocka_unit_test(test_intel_fixup),
	    cmocka_unit_test(test_single_cpu),
	    cmocka_unit_test(test_high_apic_ids),
	    cmocka_unit_test(test_no_nested_virtualization),
	    cmocka_unit_test(test_old_cpu_no_topology_leaf),
	    cmocka_unit_test(test_cap_too_small),
	    cmocka_unit_test(test_amd_fixup),
	    cmocka_unit_test(test_per_vcpu_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
