/*
 * The vCPU counters the API shows (lib/counters.h, kind COUNTER_VCPU, one
 * source per vCPU named by its index: "0", "1", ...).
 *
 * Where KVM has binary statistics (KVM_GET_STATS_FD, Linux 5.14;
 * Documentation/virt/kvm/api.rst, "KVM_GET_STATS_FD"), each vCPU's stats
 * fd is opened and its header and descriptors read once, here, before the
 * sandbox is armed; a read() of the source is then one pread(2) of the
 * data block (the API thread's sandbox needs pread64).  Exported, when the
 * kernel has them, as `<name>_total`: exits, io_exits, mmio_exits,
 * halt_exits, irq_exits, signal_exits, irq_window_exits, nmi_window_exits,
 * request_irq_exits, halt_successful_poll, halt_attempted_poll,
 * halt_poll_invalid, halt_wakeup, halt_wait_ns, halt_poll_success_ns,
 * halt_poll_fail_ns, insn_emulation, insn_emulation_fail, hypercalls,
 * irq_injections, nmi_injections, pf_taken, pf_fixed, pf_emulate,
 * tlb_flush (KVM's own counts: exits_total is every exit from the guest,
 * most of them handled inside KVM).
 *
 * Without them (an older kernel, or the fd refused), exits_total,
 * io_exits_total, mmio_exits_total, signal_exits_total and
 * halt_exits_total are what vcpu_run() counted of KVM_RUN's returns to
 * khyve.  Those counts are always shown too, as userspace_exits_total,
 * userspace_io_exits_total, userspace_mmio_exits_total,
 * userspace_signal_exits_total (kicks, KVM_EXIT_INTR),
 * userspace_halt_exits_total, userspace_system_event_exits_total and
 * userspace_other_exits_total: on a PVM host KVM's io_exits stays 0 while
 * port I/O comes to khyve.
 */
#ifndef KHYVE_VCPU_STATS_H
#define KHYVE_VCPU_STATS_H

#include <stdbool.h>

struct vm;

/*
 * Register a source for each vCPU of `vm` (after vm_create_vcpus(), once
 * per VM, before the sandbox).  `kvm_stats` false skips KVM's statistics
 * (tests of the fallback).  Sources and stats fds live until the process
 * exits; they must not be read once `vm` is destroyed.  Returns how many
 * vCPUs use KVM's statistics, or -1 when a name was taken or memory ran
 * out (the vCPUs registered so far stay).
 */
int vcpu_stats_register(struct vm *vm, bool kvm_stats);

#endif
