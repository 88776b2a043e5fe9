/*
 * A running virtual machine as the rest of khyve sees it: the KVM VM, the
 * port-I/O and MMIO buses devices register on, the main event loop, and the
 * exit request that ends the process with bhyve's exit status.
 */
#ifndef KHYVE_MACHINE_H
#define KHYVE_MACHINE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/iobus.h"
#include "lib/exitcode.h"
#include "vmm/kvm.h"

struct mevent_loop;
struct pm;
struct pflash;
struct state_participant;

/*
 * A drive with a removable medium (an ahci-cd port), as the API's
 * vm.media-insert / vm.media-eject and vm.info's "drives" see it.  The
 * device fills one at set-up and keeps `dev` alive as long as the machine.
 */
struct machine_media_drive {
	char name[16];   /* "cd0", "cd1", ... in the order the drives were added */
	char device[16]; /* "ahci-cd" */
	char slot[16];   /* PCI "slot:function" of the controller, "4:0" */
	unsigned port;   /* the controller's port (AHCI) */
	void *dev;       /* the device's state, passed back to the hooks */
	/*
	 * Put the image open on `fd` (read-only) in the drive, replacing what
	 * is there, or eject the medium (fd -1).  The drive owns `fd` from the
	 * call on, on failure too.  `force` ejects even when the guest has
	 * locked the tray (PREVENT ALLOW MEDIUM REMOVAL, MMC-6 6.14); without
	 * it a locked tray fails.  Called from the API thread: returns within
	 * about a second; 0, or -1 with one line in `err` ("the guest locked
	 * the tray", "not a regular file or block device", ...).
	 */
	int (*change)(void *dev, int fd, bool force, char *err, size_t errlen);
	/* The medium now: present, the guest's tray lock, its size in bytes. */
	void (*state)(void *dev, bool *present, bool *locked, uint64_t *bytes);
};

#define MACHINE_MAX_MEDIA      8

#define MACHINE_BALLOON_NSTATS 16

/* What the balloon says now (vm.balloon, vm.info's "balloon"). */
struct machine_balloon_info {
	uint64_t ram_bytes;      /* guest RAM */
	uint64_t target_bytes;   /* the memory the host asked the guest to keep */
	uint64_t actual_bytes;   /* what the guest keeps: RAM less the pages in its balloon */
	uint64_t reported_bytes; /* free page reporting: bytes given back to the host so far */
	uint64_t stats_age_ms;   /* since the guest's statistics came */
	bool stats_valid;        /* some came (VIRTIO_BALLOON_F_STATS_VQ) */
	bool reporting;          /* the driver accepted free page reporting */
	bool deflate_on_oom;     /* ... and deflate-on-OOM */
	unsigned nstats;
	struct {
		const char *name; /* static: "free_memory", "total_memory", ... */
		uint64_t value;   /* bytes for memory figures, else a count */
	} stat[MACHINE_BALLOON_NSTATS];
};

/*
 * The VM's virtio-balloon, if it has one (dev NULL otherwise), for the
 * API's vm.balloon.  Both hooks run on the API thread and return within
 * about a second.
 */
struct machine_balloon {
	void *dev;
	/* Ask the guest to keep `guest_bytes` of its RAM (the rest goes in
	 * the balloon); 0, or -1 with one line in `err` (more than RAM). */
	int (*set_target)(void *dev, uint64_t guest_bytes, char *err, size_t errlen);
	/* Fill `out`, first waiting up to `refresh_ms` for fresh statistics. */
	void (*info)(void *dev, unsigned refresh_ms, struct machine_balloon_info *out);
};

#define MACHINE_MAX_KEY_SINKS 2

/*
 * A display's current picture for the API's screenshot: fill *pixels with
 * a malloc()ed XRGB8888 frame (0x00RRGGBB, host order, `*width` x
 * `*height`, no padding; the caller frees it).  Any thread; must not wait
 * on a vCPU.  Returns 0, or -1 (no picture, out of memory).
 */
typedef int machine_screenshot_fn(void *arg, uint32_t **pixels, uint32_t *width, uint32_t *height);

struct machine {
	const char *name; /* VM name (from the command line) */
	struct vm vm;
	struct iobus pio;  /* port I/O, ports 0-0xffff */
	struct iobus mmio; /* guest-physical MMIO */
	struct mevent_loop *loop;
	int exit_fd;   /* eventfd: wakes the loop when an exit is requested */
	int exit_code; /* process exit status; first request wins */
	bool exit_requested;
	bool strict_io;       /* x86.strictio: unclaimed I/O ends the VM (-e) */
	struct pm *pm;        /* ACPI PM block: target of the power button */
	struct pflash *vars;  /* the boot ROM's variable store, or NULL */
	uint64_t start_ns;    /* CLOCK_MONOTONIC at process start */
	unsigned start_holds; /* machine_hold_start() not yet released */
	/* Where shared interrupt lines go when there is no KVM VM (the device
	 * harness in bench/ and unit tests); NULL: KVM_IRQ_LINE. */
	void (*intx_hook)(struct machine *m, unsigned gsi, bool level);
	bool pause_requested;  /* machine_pause(): vCPUs wait at their pause point */
	unsigned vcpus_paused; /* vCPU threads waiting there (under the pause lock) */
	unsigned throttle_pct; /* machine_set_throttle(): share of time vCPUs sleep */
	/* Keyboards the API's send-keys reaches (machine_add_key_sink). */
	unsigned nkey_sinks;
	struct machine_key_sink {
		void (*fn)(void *arg, bool down, uint16_t qnum);
		void *arg;
	} key_sinks[MACHINE_MAX_KEY_SINKS];
	/* The display the API's screenshot reads (machine_set_screenshot). */
	machine_screenshot_fn *screenshot;
	void *screenshot_arg;
	/* Drives whose medium the API changes (machine_add_media_drive). */
	unsigned nmedia;
	struct machine_media_drive media[MACHINE_MAX_MEDIA];
	/* The virtio-balloon (one a VM), set by the device at set-up. */
	struct machine_balloon balloon;
	/* What a checkpoint saves, in order (core/snapshot.h). */
	struct state_participant *states;
	unsigned nstates;
};

/*
 * Ask for the VM to stop with exit status `code` (enum khyve_exit, or a
 * guest-chosen status from pc-testdev).  Callable from any thread
 * (vCPU, event loop, signal handling); the first request wins.  vCPUs are
 * kicked out of KVM_RUN and the process exits once they have stopped.
 */
void machine_request_exit(struct machine *m, int code);

/*
 * Keep the vCPUs out of the guest until every hold is released: fbuf's
 * `wait` holds the start until the first VNC client connects.  Holds are
 * taken during device set-up, before vcpu_threads_start(); a release may
 * come from any thread.  An exit request lets the vCPUs go too, so a VM
 * stopped while it waits ends at once.  One machine per process.
 */
void machine_hold_start(struct machine *m);
void machine_release_start(struct machine *m);

/* For vCPU threads, before their first KVM_RUN: block while a hold
 * remains and no exit was requested. */
void machine_wait_start(struct machine *m);

/*
 * Pause the vCPUs (the API's vm.pause): each leaves KVM_RUN (kicked) and
 * waits at its pause point until machine_resume() or an exit request;
 * devices, the event loop and the API keep running.  Returns once every
 * started vCPU waits, or after `timeout_ms` (then the request is taken
 * back and the vCPUs go on).  Returns 0; -EALREADY when paused already;
 * -EAGAIN while the start is held (machine_hold_start) or an exit is
 * requested; -ETIMEDOUT when a vCPU did not stop in time.  Any thread but
 * a vCPU's.
 */
int machine_pause(struct machine *m, unsigned timeout_ms);

/*
 * Before vcpu_threads_start(): the vCPUs start paused, as if
 * machine_pause() had run (a guest migrated in that the user had paused
 * on the source), until machine_resume().  Main thread, set-up only.
 */
void machine_start_paused(struct machine *m);

/* Let paused vCPUs go on.  0, or -EALREADY when not paused. */
int machine_resume(struct machine *m);

bool machine_is_paused(struct machine *m);

/* For vCPU threads, between two KVM_RUNs: wait while a pause is
 * requested and no exit is. */
void machine_pause_point(struct machine *m);

/*
 * Throttle every vCPU to sleep `pct` percent of its time (0: run freely;
 * above VCPU_THROTTLE_MAX_PCT counts as that; core/vcpu_throttle.h):
 * auto-converge of a live migration.  The vCPUs are kicked, so the new
 * share applies at once.  Any thread.
 */
void machine_set_throttle(struct machine *m, unsigned pct);

/* A keyboard the API's send-keys types on (a PS/2 keyboard, the USB
 * tablet's): `fn` takes QEMU qnums (backend/console.h's console_key_fn)
 * and must not block.  Set-up only; 0, or -1 when the table is full. */
int machine_add_key_sink(struct machine *m, void (*fn)(void *arg, bool down, uint16_t qnum),
                         void *arg);

/* Send one key event to every key sink; false when there is none. */
bool machine_key_event(struct machine *m, bool down, uint16_t qnum);

/* Add a removable-medium drive (set-up only); the name is the caller's
 * (cdN, N = the count of drives before it).  0, or -1 when full. */
int machine_add_media_drive(struct machine *m, const struct machine_media_drive *d);

/* The drive called `name`, or NULL. */
const struct machine_media_drive *machine_media_drive(struct machine *m, const char *name);

/* The display the API's screenshot takes its picture from (one). */
void machine_set_screenshot(struct machine *m, machine_screenshot_fn *fn, void *arg);

/* Set interrupt line `gsi` to `level` (see vm_irq_line). */
int machine_irq_line(struct machine *m, unsigned gsi, int level);

/*
 * A machine without a KVM VM, for unit tests and the in-process device
 * harnesses in bench/: zeroed, no KVM or exit fds, empty port and MMIO
 * buses, one vCPU.  When `ram` is not NULL it becomes guest RAM of
 * `ram_bytes` at guest-physical `ram_gpa` (the caller keeps owning it) and
 * low RAM is taken to end where it ends.  Returns 0, or -1 when the RAM
 * region cannot be added.
 */
int machine_init_detached(struct machine *m, const char *name, void *ram, uint64_t ram_gpa,
                          uint64_t ram_bytes);

/* A level-triggered line shared by several sources (PCI INTx): the line is
 * high while any source asserts it.  Each source calls this only on
 * changes of its own level. */
void machine_intx_level(struct machine *m, unsigned gsi, bool asserted);

/* Register a handler for `len` ports from `port` / for MMIO [gpa, gpa+len). */
int machine_register_pio(struct machine *m, uint16_t port, uint16_t len, iobus_handler_t fn,
                         void *arg, const char *name);
int machine_register_mmio(struct machine *m, uint64_t gpa, uint64_t len, iobus_handler_t fn,
                          void *arg, const char *name);

/*
 * Let the guest's writes to `len` ports from `port` go without an exit
 * (vmm/coalesced.h): the vCPUs hand them to the port's handler, in order,
 * before their next exit is handled.  Only for ports whose writes nothing
 * observes until a later exit; best effort (false where KVM cannot, or on
 * a detached machine), the writes then exit as before.
 */
bool machine_coalesce_pio(struct machine *m, uint16_t port, uint16_t len);

/*
 * Apply the queued writes now, oldest first: each vCPU after KVM_RUN
 * returns, and the main loop a few times a second (a guest that writes
 * the reset register 0xCF9 and halts makes no further exit).
 */
void machine_flush_coalesced(struct machine *m);

/* Whether machine_coalesce_pio() queued anything: the loop's flush tick. */
bool machine_coalescing(const struct machine *m);

#endif
