/*
 * Whether a guest runs: its supervisor (`vm _run`) holds run.lock (which
 * names the host, as in vm-bhyve) and records its pid and khyve's pid in
 * run.state.  A lock whose supervisor is gone (host crash, kill -9) is
 * stale and reads as Stopped.
 */
#ifndef KHYVE_VM_STATE_H
#define KHYVE_VM_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "vm/vm.h"

enum vm_run_state {
	VM_STOPPED,
	VM_RUNNING,   /* supervisor alive on this host */
	VM_LOCKED,    /* run.lock names another host */
	VM_SUSPENDED, /* not running, and its saved state DIR/NAME.state is there (suspend.h) */
};

struct vm_status {
	enum vm_run_state state;
	pid_t supervisor; /* 0 when not running */
	pid_t khyve;      /* 0 between restarts */
	char host[256];   /* from run.lock */
	bool held;        /* VM_LOCKED: some process (there or here) holds run.lock's OFD lock */
	char console[16]; /* "pty" or "tmux" */
	char vnc[80];     /* graphics: "ADDR:PORT" of khyve's VNC server, else "" */
	bool vnc_wait;    /* khyve was told to wait for the first VNC client */
	char live[16];    /* vm.info's state ("Running", "Paused") when asked, else "" */
};

/* Read the state of `g`.  Never fails: unreadable files read as Stopped
 * (or Suspended, when the saved state is there). */
void vm_status_get(const struct vm_sys *sys, const struct vm_guest *g, struct vm_status *st);

/* What ps(1) shows of a process, for `vm list -v`. */
struct vm_proc_usage {
	double cpu_percent;          /* CPU time over time since start, as ps's %CPU */
	unsigned long long rss_kib;  /* resident set size, KiB (ps's RSZ) */
	unsigned long long uptime_s; /* seconds since it started */
};

/* Read /proc/PID/stat; 0, or -1 when the process is gone. */
int vm_proc_usage(pid_t pid, struct vm_proc_usage *u);

/* "[[D-]HH:]MM:SS" as ps's ELAPSED column writes `seconds`. */
void vm_format_elapsed(unsigned long long seconds, char *out, size_t len);

/* Fill st->live from the guest's API socket (vm/live.h) when it runs;
 * "" when khyve does not answer. */
void vm_status_ask_khyve(const struct vm_guest *g, struct vm_status *st);

/* "Running (PID)", "Stopped", "Suspended", "Locked (HOST)" as vm list prints it; with
 * st->live set, that word in place of Running ("Paused (PID)"). */
void vm_status_format(const struct vm_status *st, char *out, size_t len);

#endif
