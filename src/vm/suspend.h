/*
 * Suspend and resume of a guest (issue 14, docs/design/snapshots.md section
 * 3 "vm tool"): `vm suspend NAME` has the guest's khyve save the whole
 * machine into DIR/NAME.state (khyvectl --suspend, which writes the file
 * atomically), after which khyve exits with status 5 (KHYVE_EXIT_SUSPENDED)
 * and the supervisor stops without a restart.  A guest that is not running
 * and has that file is Suspended (state.h); `vm start` resumes it with
 * `khyve -r DIR/NAME.state`, and `vm start -d` discards the file (renamed
 * to NAME.state.discarded) and boots afresh.  vm_stop_mode="suspend" in
 * khyve.conf makes stopall suspend instead of pressing the power button.
 */
#ifndef KHYVE_VM_SUSPEND_H
#define KHYVE_VM_SUSPEND_H

#include <stdbool.h>
#include <stddef.h>

#include "vm/khyvecmd.h"
#include "vm/vm.h"

/* Suffixes of the saved state in the guest's folder: NAME.state, and where
 * `vm start -d` moves it. */
#define VM_STATE_SUFFIX     ".state"
#define VM_DISCARDED_SUFFIX ".state.discarded"

/* khyve's exit status after a suspend (src/lib/exitcode.h). */
#define VM_EXIT_SUSPENDED 5

/* DIR/NAME.state of `g` into `out` (PATH_MAX bytes); 0, or -1 when too long. */
int vm_state_path(const struct vm_guest *g, char *out);

/* True when DIR/NAME.state is a regular file (a link or anything else is
 * not a saved state: lstat). */
bool vm_state_present(const struct vm_guest *g);

/*
 * Put "-r PATH" in the khyve command `a` before its last word (the VM
 * name, as khyve's usage has it).  0, or -1 when out of memory or `a` is
 * empty.
 */
int vm_argv_add_restore(struct argv *a, const char *path);

/* Put "OPT VALUE" in `a` before its last word, as vm_argv_add_restore()
 * puts "-r PATH" (`vm migrate -l` adds "-R unix:PATH").  0 or -1. */
int vm_argv_add_option(struct argv *a, const char *opt, const char *value);

/*
 * `vm start -d`: rename DIR/NAME.state to DIR/NAME.state.discarded
 * (replacing an older one).  0, or -1 with one line in `err`.
 */
int vm_state_discard(const struct vm_guest *g, char *err, size_t errlen);

/* vm_stop_mode in khyve.conf: what stopall does to a running guest. */
enum vm_stop_mode {
	VM_STOP_SHUTDOWN, /* "shutdown" or unset: the ACPI power button */
	VM_STOP_SUSPEND,  /* "suspend": vm suspend, the power button where that fails */
};

/*
 * Read vm_stop_mode from `sys`'s khyve.conf into `*mode`.  0, or 1 after
 * the one-line error naming the unknown value.
 */
int vm_stop_mode_get(const struct vm_sys *sys, enum vm_stop_mode *mode);

/*
 * Run `khyvectl --socket=DIR/khyve.sock ACTION` (sys->khyvectl) for the
 * running guest `g` and wait for it; `action` is one of khyvectl's options
 * ("--pause", "--checkpoint=FILE").  0, or -1 with khyvectl's one line in
 * `err`.
 */
int vm_khyvectl(const struct vm_sys *sys, const struct vm_guest *g, const char *action, char *err,
                size_t errlen);

/*
 * Ask the running guest `g`'s khyve to suspend into DIR/NAME.state: runs
 * `khyvectl --socket=DIR/khyve.sock --suspend=DIR/NAME.state` (sys->khyvectl)
 * and waits for it (khyvectl returns once the file is complete; khyve
 * then exits with status 5).  0, or -1 with khyvectl's one line in `err`.
 * Does not wait for the guest to stop (vm_suspend_wait()).
 */
int vm_suspend_request(const struct vm_sys *sys, const struct vm_guest *g, char *err,
                       size_t errlen);

/*
 * Append "Mon DD HH:MM:SS: MESSAGE" to `g`'s DIR/vm-bhyve.log, as the
 * supervisor logs, for what a vm command did to a guest (stopall's
 * fallback from suspend to the power button).
 */
void vm_guest_log(const struct vm_guest *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
