#include "vmm/cpuid.h"

#include <stdbool.h>
#include <string.h>

#define CPUID_TOPOLOGY       0xb
#define CPUID_V2_TOPOLOGY    0x1f
#define CPUID_CACHE_PARAMS   0x4
#define CPUID_AMD_SIZES      0x80000008
#define CPUID_AMD_EXT_APICID 0x8000001e

static unsigned ceil_log2(unsigned v)
{
	unsigned bits = 0;

	while ((1u << bits) < v)
		bits++;
	return bits;
}

unsigned topo_thread_bits(const struct cpu_topology *t)
{
	return ceil_log2(t->threads);
}

unsigned topo_core_bits(const struct cpu_topology *t)
{
	return ceil_log2(t->cores);
}

uint32_t topo_apic_id(const struct cpu_topology *t, unsigned index)
{
	unsigned thread = index % t->threads;
	unsigned core = (index / t->threads) % t->cores;
	unsigned socket = index / (t->threads * t->cores);
	unsigned tb = topo_thread_bits(t), cb = topo_core_bits(t);

	return (socket << (tb + cb)) | (core << tb) | thread;
}

static struct kvm_cpuid_entry2 *find_leaf(struct kvm_cpuid_entry2 *e, unsigned n, uint32_t fn,
                                          uint32_t idx)
{
	for (unsigned i = 0; i < n; i++)
		if (e[i].function == fn && e[i].index == idx)
			return &e[i];
	return NULL;
}

static bool vendor_is_intel(struct kvm_cpuid_entry2 *e, unsigned n)
{
	struct kvm_cpuid_entry2 *l0 = find_leaf(e, n, 0, 0);

	/* "GenuineIntel": EBX="Genu", EDX="ineI", ECX="ntel". */
	return l0 != NULL && l0->ebx == 0x756e6547 && l0->edx == 0x49656e69 &&
	       l0->ecx == 0x6c65746e;
}

/* AMD and Hygon describe topology in 0x80000008/0x8000001E. */
static bool vendor_is_amd(struct kvm_cpuid_entry2 *e, unsigned n)
{
	struct kvm_cpuid_entry2 *l0 = find_leaf(e, n, 0, 0);

	/* "AuthenticAMD" / "HygonGenuine", told apart by EBX. */
	return l0 != NULL && (l0->ebx == 0x68747541 || l0->ebx == 0x6f677948);
}

/* Drop every entry of leaf `fn`; returns the new count. */
static unsigned remove_leaf(struct kvm_cpuid_entry2 *e, unsigned n, uint32_t fn)
{
	unsigned out = 0;

	for (unsigned i = 0; i < n; i++)
		if (e[i].function != fn)
			e[out++] = e[i];
	return out;
}

#define CPUID_AMD_FEATURES 0x80000001
#define CPUID_AMD_SVM      0x8000000a
#define CPUID_1_ECX_VMX    (1u << 5)
#define CPUID_AMD_ECX_SVM  (1u << 2)

static void fix_leaf1(struct kvm_cpuid_entry2 *e, uint32_t apic_id, unsigned per_pkg)
{
	unsigned count = per_pkg > 0xff ? 0xff : per_pkg; /* an 8-bit field */

	/* No nested virtualization, as bhyve: khyve saves no nested state
	 * (KVM_GET_NESTED_STATE), so a guest running its own VMs could not
	 * be checkpointed or migrated. */
	e->ecx &= ~CPUID_1_ECX_VMX;

	e->ebx = (e->ebx & 0x0000ffff) | (count << 16) | (apic_id << 24);
	if (per_pkg > 1)
		e->edx |= 1u << 28; /* HTT: more than one logical CPU per package */
	else
		e->edx &= ~(1u << 28);
	e->ecx |= 1u << 31; /* running under a hypervisor */
}

static void fix_cache_leaf(struct kvm_cpuid_entry2 *e, const struct cpu_topology *t)
{
	unsigned level = (e->eax >> 5) & 7;
	unsigned sharing = level >= 3 ? t->threads * t->cores : t->threads;

	if ((e->eax & 0x1f) == 0) /* no more caches */
		return;
	e->eax &= 0x3fff;
	e->eax |= ((sharing - 1) & 0xfff) << 14;
	e->eax |= (((1u << topo_core_bits(t)) - 1) & 0x3f) << 26;
}

/* Append the extended-topology subleaves 0..2 of leaf `fn`. */
static int add_topology_leaf(struct kvm_cpuid_entry2 *e, unsigned *n, unsigned cap, uint32_t fn,
                             const struct cpu_topology *t, uint32_t apic_id)
{
	unsigned tb = topo_thread_bits(t), cb = topo_core_bits(t);
	const uint32_t eax[3] = {tb, tb + cb, 0};
	const uint32_t ebx[3] = {t->threads, t->threads * t->cores, 0};
	const uint32_t type[3] = {1 /* SMT */, 2 /* core */, 0 /* invalid */};

	if (*n + 3 > cap)
		return -1;
	for (uint32_t i = 0; i < 3; i++) {
		struct kvm_cpuid_entry2 *x = &e[(*n)++];

		memset(x, 0, sizeof(*x));
		x->function = fn;
		x->index = i;
		x->flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX;
		x->eax = eax[i];
		x->ebx = ebx[i];
		x->ecx = (type[i] << 8) | i;
		x->edx = apic_id;
	}
	return 0;
}

static void fix_amd_leaves(struct kvm_cpuid_entry2 *e, unsigned n, const struct cpu_topology *t,
                           uint32_t apic_id, unsigned index)
{
	unsigned per_pkg = t->threads * t->cores;
	struct kvm_cpuid_entry2 *x = find_leaf(e, n, CPUID_AMD_SIZES, 0);

	if (x != NULL) {
		x->ecx &= ~0xf0ffu;
		x->ecx |= (per_pkg - 1) & 0xff;
		x->ecx |= ((topo_thread_bits(t) + topo_core_bits(t)) & 0xf) << 12;
	}
	x = find_leaf(e, n, CPUID_AMD_EXT_APICID, 0);
	if (x != NULL) {
		x->eax = apic_id;
		x->ebx = ((t->threads - 1) << 8) | ((index / t->threads) % t->cores);
		x->ecx = index / per_pkg; /* node id = socket, one node per socket */
		x->edx = 0;
	}
}

int cpuid_fixup(struct kvm_cpuid_entry2 *e, unsigned nent, unsigned cap,
                const struct cpu_topology *t, unsigned index)
{
	uint32_t apic_id = topo_apic_id(t, index);
	unsigned per_pkg = 1u << (topo_thread_bits(t) + topo_core_bits(t));
	struct kvm_cpuid_entry2 *l0 = find_leaf(e, nent, 0, 0);
	uint32_t max_basic = l0 ? l0->eax : 0;
	unsigned n = nent;

	for (unsigned i = 0; i < n; i++) {
		if (e[i].function == 1)
			fix_leaf1(&e[i], apic_id, per_pkg);
		else if (e[i].function == CPUID_CACHE_PARAMS && vendor_is_intel(e, n))
			fix_cache_leaf(&e[i], t);
		else if (e[i].function == CPUID_AMD_FEATURES)
			e[i].ecx &= ~CPUID_AMD_ECX_SVM; /* as VMX in leaf 1 */
	}
	n = remove_leaf(e, n, CPUID_AMD_SVM);
	n = remove_leaf(e, n, CPUID_TOPOLOGY);
	n = remove_leaf(e, n, CPUID_V2_TOPOLOGY);
	if (max_basic >= CPUID_TOPOLOGY &&
	    add_topology_leaf(e, &n, cap, CPUID_TOPOLOGY, t, apic_id) < 0)
		return -1;
	if (max_basic >= CPUID_V2_TOPOLOGY &&
	    add_topology_leaf(e, &n, cap, CPUID_V2_TOPOLOGY, t, apic_id) < 0)
		return -1;
	if (vendor_is_amd(e, n))
		fix_amd_leaves(e, n, t, apic_id, index);
	return (int)n;
}
