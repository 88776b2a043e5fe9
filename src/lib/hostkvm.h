/*
 * What this host's KVM can run.  On a PVM host (the kvm_pvm module: KVM
 * for guests of a cloud VM without VMX or SVM) guest code runs in KVM's
 * instruction emulator: tiny guests, SeaBIOS and GRUB run (slowly), but a
 * Linux bzImage hangs and OVMF stops with "KVM internal error, suberror 1"
 * at its first x87 instruction.  khyve and vm say so in one line instead.
 * Only reads /sys and /proc; lib/ so that src/vm uses it too.
 */
#ifndef KHYVE_HOSTKVM_H
#define KHYVE_HOSTKVM_H

#include <stddef.h>

enum host_kvm {
	HOST_KVM_HARDWARE, /* VMX or SVM: every guest runs */
	HOST_KVM_PVM,      /* no VMX or SVM: only guests the emulator handles */
	HOST_KVM_NONE,     /* no KVM device at all */
};

/* The KVM device: $KHYVE_KVM_DEV when set and not empty, else /dev/kvm. */
const char *host_kvm_device(void);

/*
 * Classify this host into `*kind`.  KHYVE_HOST_KVM=hardware|pvm|none in the
 * environment decides instead (for tests).  none: the device does not
 * exist; pvm: /sys/module/kvm_pvm exists or /proc/cpuinfo's flags have
 * neither vmx nor svm; hardware otherwise, also when a file cannot be read
 * (KVM's own errors then speak).  0, or -1 when KHYVE_HOST_KVM has another
 * value (`*kind` is then hardware).  The files are read once per device
 * path, so that the answer holds after the jail (src/run/jail.h).
 */
int host_kvm_probe(enum host_kvm *kind);

/*
 * The one line for a guest this host cannot run, without a program prefix:
 * "this host's KVM cannot run WHAT (REASON); see README: nested lab",
 * written to `buf` (truncated to `len`).  `what` e.g. "a Linux bzImage".
 */
void host_kvm_message(char *buf, size_t len, enum host_kvm kind, const char *what);

#endif
