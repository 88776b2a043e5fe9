/*
 * The supervisor of a running guest (`vm _run NAME`, vm-bhyve's vm::run):
 * one process per guest that holds DIR/run.lock, runs khyve, restarts it
 * when the guest reboots and records its state in DIR/run.state.
 *
 * The lock is an open-file-description (OFD) write lock on run.lock, whose
 * content is this host's name as vm-bhyve writes it.  khyve inherits the
 * locked descriptor, so the guest reads as running for as long as either
 * the supervisor or khyve lives; a lock file that nobody holds (the host
 * crashed) is stale.
 *
 * `vm` commands talk to a supervisor with signals (vm_request_send()):
 *   SIGTERM, SIGINT  stop: ACPI power button to khyve, then no restart
 *   SIGUSR1          reset: kill khyve, then boot again at once
 *   SIGUSR2          poweroff: kill khyve, then no restart
 */
#ifndef KHYVE_VM_SUPERVISOR_H
#define KHYVE_VM_SUPERVISOR_H

#include <stdbool.h>
#include <sys/types.h>

#include "vm/state.h"
#include "vm/vm.h"

#define VM_RUN_LOCK  "run.lock"
#define VM_RUN_STATE "run.state"
#define VM_RUN_LOG   "vm-bhyve.log"
/* Written by `vm migrate -l` on the source while khyvectl --migrate runs:
 * the source supervisor's pid.  khyve's exit 0 then means "the guest runs
 * on the target now": that supervisor stops instead of rebooting it. */
#define VM_RUN_MIGRATING "run.migrating"
/* Present while Pacemaker's resource agent (share/ocf/vm) manages the
 * guest; it names the cluster resource.  `vm start` then refuses unless -H. */
#define VM_HA_MARK "ha.resource"

struct vm_run_opts {
	bool foreground;     /* com1 on this process's stdio (-f, tmux) */
	bool tmux;           /* running inside the guest's tmux session */
	const char *iso;     /* install medium for the first boot only, or NULL */
	int ready_fd;        /* -1, or where to write "ok\n" / "error MESSAGE\n"
	                      * once khyve runs or could not be started */
	const char *receive; /* `vm migrate -l`'s target: the first run is
	                      * `khyve -R ADDR` (migrate.h), or NULL */
};

/*
 * Supervise guest `name` until it stops.  With o->receive (`vm migrate
 * -l` on the target, migrate.h) the first run receives the guest: the
 * source still holds run.lock, its API socket and its pty links in the
 * shared folder, so khyve gets those under a ".mig" suffix, and once the
 * guest runs here and the source has let go of run.lock, the supervisor
 * takes the lock and renames them into place; only then does it report
 * "ok".  A receive that fails touches none of the source's files.  Returns khyve's last exit status
 * (128+N when killed by signal N), or 1 when it could not be started; the
 * reason is logged to DIR/vm-bhyve.log and sent to ready_fd (or, without
 * one, printed as a "vm: ..." line).
 */
int vm_supervise(struct vm_sys *sys, const char *name, const struct vm_run_opts *o);

enum vm_request {
	VM_REQ_STOP,     /* ACPI power-off request; no restart */
	VM_REQ_RESET,    /* hard reset: kill khyve, boot again */
	VM_REQ_POWEROFF, /* hard power-off: kill khyve; no restart */
};

/*
 * Deliver `r` to the supervisor of a running guest; when the supervisor is
 * gone but khyve still runs, STOP and POWEROFF go to khyve itself.  0, or
 * -1 with a one-line reason in `err`.
 */
int vm_request_send(const struct vm_status *st, enum vm_request r, char *err, size_t errlen);

/*
 * When process `pid` started, in clock ticks since boot (field 22 of
 * /proc/PID/stat); 0 when there is no such process.  Recorded next to each
 * pid in run.state so a recycled pid is not taken for ours.
 */
unsigned long long vm_proc_start(pid_t pid);

/*
 * A guest's `priority` (vm-bhyve: a nice(1) value, -20 highest to 20) in
 * `nice`, 0 when unset.  0, or -1 with a one-line reason in `err`.
 */
int vm_guest_priority(const struct vm_guest *g, int *nice, char *err, size_t errlen);

/* This host's name as run.lock records it; "" when unknown. */
void vm_hostname(char *out, size_t len);

#endif
