/*
 * The KVM state of the vCPUs and of the VM (irqchip, PIT, clock), saved
 * field by field with lib/sbuf.h for snapshots, suspend/resume and
 * migration (docs/design/snapshots.md, section 2 "vmm").  The order of the
 * ioctls follows Documentation/virt/kvm/api.rst's rules (the same order
 * Firecracker uses): see vmstate.c.  Knows no devices.
 *
 * What KVM offers (SREGS2, XSAVE2's size, TSC_CONTROL) and the MSRs a vCPU
 * saves are probed once per VM, on the first save or restore, and cached
 * in struct vm (vm->state_*).  Save and restore are called with every vCPU
 * thread parked (or before any vCPU ran); the caller serialises them.
 */
#ifndef KHYVE_VMSTATE_H
#define KHYVE_VMSTATE_H

#include <stddef.h>

#include "lib/sbuf.h"

struct vcpu;
struct vm;

/*
 * Save one vCPU's state into `out`: a u16 version (1), then CPUID
 * (KVM_GET_CPUID2), MP state, regs, sregs (KVM_GET_SREGS2 where KVM has it,
 * else KVM_GET_SREGS; always written in SREGS2's field set), XSAVE
 * (KVM_GET_XSAVE2 with KVM_CAP_XSAVE2's size, else the 4 KiB KVM_GET_XSAVE),
 * XCRs, debug registers, LAPIC, MSRs ((index, value) pairs: the
 * KVM_GET_MSR_INDEX_LIST entries KVM_GET_MSRS accepts, plus MSR_IA32_TSC and
 * the MTRRs), TSC kHz and vCPU events.  KVM_GET_MP_STATE comes first
 * (it runs kvm_apic_accept_events, which may change the LAPIC) and
 * KVM_GET_VCPU_EVENTS last.  The vCPU must not be running: its thread is
 * parked after vcpu_complete_io().  Refuses a guest that turned on VMX
 * or SVM (CR4.VMXE, EFER.SVME): its nested state is not saved.  0, or -1
 * with one line in `err` ("vCPU 1: KVM_GET_XSAVE2: Invalid argument").
 */
int vcpu_state_save(struct vcpu *v, struct sbuf *out, char *err, size_t errlen);

/*
 * Restore what vcpu_state_save() wrote onto a freshly created vCPU that has
 * not run (vm_create_vcpus() done, vm_state_restore() done).  The section is
 * hostile: it is read and range-checked as a whole before any ioctl, then
 * applied as KVM_SET_CPUID2 (the saved entries) → KVM_SET_TSC_KHZ (only if
 * it differs and KVM has TSC_CONTROL) → MP_STATE → REGS → SREGS2/SREGS →
 * XSAVE → XCRS → DEBUGREGS → LAPIC → MSRS (after LAPIC, or TSC_DEADLINE
 * does not take) → VCPU_EVENTS (after REGS, which clears pending
 * exceptions).  Refuses, with -1 and one line in `err`: a CPUID feature bit
 * of leaves 1, 7.0, 7.1, 0xd.0, 0xd.1, 0x80000001, 0x80000007 or 0x80000008
 * that this host's KVM_GET_SUPPORTED_CPUID lacks ("host lacks CPU feature
 * avx512f (leaf 7.0 ebx bit 16) the guest saw"), an XSAVE area larger than
 * this host's, a TSC rate more than 250 ppm off this host's without TSC
 * scaling, an MSR KVM_SET_MSRS does not take ("MSR 0x... refused by KVM"),
 * a truncated section, an unknown version or any value out of range.
 * Reads the section to its end (the caller's sbuf_reader_done() then finds
 * nothing left over).
 */
int vcpu_state_restore(struct vcpu *v, struct sbuf_reader *in, char *err, size_t errlen);

/*
 * Save the VM-wide state after every vCPU's: a u16 version (1), then
 * KVM_GET_CLOCK (clock ns, flags, realtime ns, host TSC), KVM_GET_IRQCHIP
 * of chips 0 (PIC master), 1 (PIC slave) and 2 (IOAPIC), KVM_GET_PIT2.
 * 0, or -1 with one line in `err`.
 */
int vm_state_save(struct vm *vm, struct sbuf *out, char *err, size_t errlen);

/*
 * Restore the VM-wide state before any vCPU's: KVM_SET_IRQCHIP for the three
 * chips, KVM_SET_PIT2 (the PIT's count restarts from its saved value; the
 * host time a count was loaded at is not carried over).  The clock is kept
 * in struct vm for vm_state_restore_finish().  The GSI routing of
 * vmm/irq.c stays installed (KVM_SET_IRQCHIP copies chip state only).
 * Refuses a truncated or out-of-range section with -1 and one line.
 */
int vm_state_restore(struct vm *vm, struct sbuf_reader *in, char *err, size_t errlen);

/*
 * After every vCPU was restored, before any runs: KVM_SET_CLOCK with the
 * saved clock (flags 0: the guest sees the pause as no time) and
 * KVM_KVMCLOCK_CTRL on each vCPU, so a kvmclock guest does not report soft
 * lockups for the pause (EINVAL is ignored: the guest may not use
 * kvmclock).  0, or -1 with one line in `err` (also when
 * vm_state_restore() did not run first).
 */
int vm_state_restore_finish(struct vm *vm, char *err, size_t errlen);

/*
 * Probe now what saving needs (the capabilities and vCPU 0's MSR list),
 * so that a checkpoint from a sandboxed thread later issues only the
 * GET ioctls (lib/sandbox.c's API role).  Call after vm_create_vcpus(),
 * before the sandbox is armed.  0, or -1 with one line in `err`.
 */
int vm_state_probe(struct vm *vm, char *err, size_t errlen);

/*
 * Called by a vCPU's own thread, kick signal blocked (vcpu_block_kick()),
 * when a save is about to happen: if the last KVM_RUN returned
 * KVM_EXIT_IO or KVM_EXIT_MMIO, the instruction is not complete until
 * KVM_RUN is entered again (api.rst, notes under KVM_EXIT_IO/MMIO), and a
 * state saved now would lose an IN's data.  Enters KVM_RUN once with
 * run->immediate_exit = 1 (it completes the instruction and returns EINTR
 * without running the guest further), then clears immediate_exit and eats
 * pending kicks (vcpu_eat_kicks()).  Does nothing when no exit is pending.
 * 0, or -1 with errno: EAGAIN when completing it made another exit (a
 * string I/O instruction's next chunk): dispatch that exit and call again.
 */
int vcpu_complete_io(struct vcpu *v);

#endif
