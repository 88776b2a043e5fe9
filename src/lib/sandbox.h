/*
 * The sandbox: one seccomp-BPF filter per thread role (libseccomp), in the
 * way Firecracker gives each of its threads its own filter.  Each thread
 * installs its role's filter itself (filters are per thread and inherited
 * by threads it creates), right after its setup; a system call outside the
 * role's list kills the whole process (SECCOMP_RET_KILL_PROCESS) or, with
 * `-o sandbox.log=true`, is logged with its name and the role and fails
 * with EPERM.  Config keys: `sandbox` (default on; `-o sandbox=off` is
 * stored as `sandbox.enable`), `sandbox.log`, `sandbox.selftest=ROLE`.
 *
 * Order (src/run/vmrun.c): sandbox_setup() before any device exists, so
 * threads started early know they will be filtered; sandbox_arm() after
 * every device and host resource is open (and after the jail drops
 * privileges, whose setuid() glibc broadcasts to all threads); then the
 * vCPU threads start and the main thread calls sandbox_thread_enter(MAIN).
 * A thread started before sandbox_arm() installs its filter at its next
 * sandbox_thread_enter() call after it (the VNC thread calls it in its
 * loop, blockif's pool threads when sandbox_wake_at_arm() wakes them).
 * The seccomp(2) interface: Linux
 * Documentation/userspace-api/seccomp_filter.rst.
 */
#ifndef KHYVE_SANDBOX_H
#define KHYVE_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>

/* Thread roles; each has its own allow-list (sandbox.c, role_table). */
enum sandbox_role {
	SANDBOX_MAIN,          /* the event loop (mevent) and exit path */
	SANDBOX_VCPU,          /* KVM_RUN and the exit handlers */
	SANDBOX_VIRTIO_WORKER, /* virtio_pci.c queue workers (virtio-rnd, virtio-net tx) */
	SANDBOX_BLK_QUEUE,     /* virtio-blk queue threads */
	SANDBOX_NVME_SQ,       /* NVMe submission queue threads */
	SANDBOX_BLK_POOL,      /* blockif's thread-engine pool */
	SANDBOX_NET_RX,        /* virtio-net receive thread */
	SANDBOX_VNC,           /* the VNC server thread */
	SANDBOX_API,           /* the API thread (run/api.c): HTTP on its unix socket */
	SANDBOX_CONSOLE,       /* virtio-console's queue thread: output to its sockets */
	SANDBOX_P9,            /* virtio-9p's request thread: file operations in its share */
	SANDBOX_TPM,           /* the TPM's worker: commands to swtpm's socket */
	SANDBOX_NROLES
};

/*
 * Read the sandbox keys and, when it is on, build every role's filter.
 * Call once in the main thread before any thread starts.  Returns 0, or -1
 * with a one-line message in err (an unknown sandbox.selftest role, a
 * bad boolean, libseccomp failing).
 */
int sandbox_setup(char *err, size_t errlen);

/*
 * From now on threads install their filters (see the order above).  Call in
 * the main thread after the host resources are open and privileges are
 * dropped, before the vCPU threads start.
 */
void sandbox_arm(void);

/*
 * Install `role`'s filter on the calling thread, once; a no-op with the
 * sandbox off, before sandbox_arm() (the thread is asked again later) and
 * when this thread already has its filter.  Cheap enough for a loop: one
 * thread-local test.  When the kernel refuses the filter (which cannot
 * leave the thread unfiltered silently) the process gets SIGQUIT, which the
 * main loop turns into exit status 4.
 */
void sandbox_thread_enter(enum sandbox_role role);

/*
 * Call fn(arg) from sandbox_arm(), so a thread that sleeps until there is
 * work (blockif's pool) wakes up and installs its filter.  At most
 * SANDBOX_MAX_WAKERS at once; returns 0, -1 when full (the threads then
 * install at their first request).  sandbox_cancel_wake() removes the
 * pair before `arg` goes away; both are no-ops with the sandbox off.
 */
#define SANDBOX_MAX_WAKERS 64
int sandbox_wake_at_arm(void (*fn)(void *arg), void *arg);
void sandbox_cancel_wake(void (*fn)(void *arg), void *arg);

/* Whether sandbox_setup() turned the sandbox on. */
bool sandbox_enabled(void);

/* The role's name as the config and the log spell it ("vcpu"). */
const char *sandbox_role_name(enum sandbox_role role);

/* How many system calls the role's list allows (for docs and tests). */
unsigned sandbox_role_size(enum sandbox_role role);

#endif
