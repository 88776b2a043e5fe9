/*
 * Waiting for guests to stop after `vm stop`, `restart`, `poweroff` or
 * `stopall`, and telling the user what happens meanwhile: a countdown, and
 * at once when a guest did not hear the ACPI power button.
 *
 * khyve logs "SIGTERM: power button pressed, but the guest is not
 * listening" when the guest has not enabled the power button (it sits in
 * its firmware or a boot loader such as GRUB, or has no ACPI); its stderr
 * goes to DIR/vm-bhyve.log, so the wait reads the log from where it stood
 * before the request was sent.
 */
#ifndef KHYVE_VM_STOPWAIT_H
#define KHYVE_VM_STOPWAIT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "vm/vm.h"

/* One guest being waited for. */
struct vm_stop_watch {
	const char *name;   /* borrowed from the caller's names */
	char log[PATH_MAX]; /* DIR/vm-bhyve.log, "" when the guest is unknown */
	off_t mark;         /* the log's size before the request was sent */
	bool settled;       /* stopped, or reported as not listening */
};

/* True when guest `name` runs on this host. */
bool vm_still_running(const struct vm_sys *sys, const char *name);

/*
 * Note where each guest's log ends; call before sending the requests.
 * calloc'd array of n (free() it), or NULL when out of memory.
 */
struct vm_stop_watch *vm_stop_watch_begin(const struct vm_sys *sys, char *const names[], size_t n);

/*
 * Wait up to `timeout` seconds for every watched guest to stop, showing the
 * seconds left on stdout (one line updated in place on a terminal, else a
 * line every few seconds).  A guest whose khyve logged that the guest is
 * not listening is given up at once with a one-line error suggesting `vm
 * poweroff`; one still running at the end gets "... still running after N
 * s" and `hint`.  0 when all stopped, else 1.
 */
int vm_stop_wait(const struct vm_sys *sys, struct vm_stop_watch *w, size_t n, int timeout,
                 const char *hint);

#endif
