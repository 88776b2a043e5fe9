/* `vm start` on a host whose KVM cannot run the guest (lib/hostkvm.h). */
#ifndef KHYVE_VM_HOSTKVM_H
#define KHYVE_VM_HOSTKVM_H

#include <stdio.h>

#include "vm/vm.h"

/*
 * Refuse guest `g` when its loader cannot run on this host's KVM: on PVM or
 * without a KVM device, loader linux, uefi and uefi-custom (a bzImage hangs
 * there, OVMF stops in KVM's emulator).  0 to go on, or 1 after one
 * vm_error() line.
 */
int vm_check_host_kvm(const struct vm_guest *g);

/*
 * For a guest that starts anyway (bios, grub): on PVM or without a KVM
 * device, print one "  * note: ..." line to `out` (stdout, beside
 * "booting...", so that stderr keeps one line per error).
 */
void vm_note_host_kvm(FILE *out);

#endif
