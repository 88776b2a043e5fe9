/*
 * CPUID for guest vCPUs: start from what KVM supports
 * (KVM_GET_SUPPORTED_CPUID, which includes the KVM paravirt leaves
 * 0x40000000/0x40000001 that make guests use kvm-clock) and rewrite the leaves
 * that describe this vCPU's place in the topology.
 *
 * Intel SDM vol. 2A "CPUID" (leaves 1, 4, 0xB, 0x1F); AMD APM vol. 3
 * (0x80000008, 0x8000001E).
 */
#ifndef KHYVE_CPUID_H
#define KHYVE_CPUID_H

#include <linux/kvm.h>
#include <stdint.h>

/* Guest CPU topology: sockets x cores per socket x threads per core. */
struct cpu_topology {
	unsigned sockets;
	unsigned cores;
	unsigned threads;
};

/* Bits of the APIC ID used for the thread and the core number. */
unsigned topo_thread_bits(const struct cpu_topology *t);
unsigned topo_core_bits(const struct cpu_topology *t);

/* APIC ID of vCPU `index` (0-based, socket-major): socket, core and thread
 * numbers packed into their bit fields, as real CPUs do. */
uint32_t topo_apic_id(const struct cpu_topology *t, unsigned index);

/*
 * Rewrite `entries` (nent used, room for cap) for vCPU `index`: APIC IDs in
 * leaf 1, 0xB, 0x1F and 0x8000001E, logical counts in 1, 4 and 0x80000008,
 * the hypervisor bit; VMX (leaf 1) and SVM (0x80000001, leaf 0x8000000A)
 * hidden, as bhyve offers no nested virtualization.  Returns the new entry
 * count, or -1 if cap is too small.
 */
int cpuid_fixup(struct kvm_cpuid_entry2 *entries, unsigned nent, unsigned cap,
                const struct cpu_topology *t, unsigned index);

#endif
