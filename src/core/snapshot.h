/*
 * The machine's saved state, as core sees it: an ordered list of state
 * participants (every device registers one, and the PCI layer one per
 * function), each saving and restoring one section of a state file
 * (lib/snapfile.h) with lib/sbuf.h's field encoding.  Checkpoint, suspend
 * and the restore of `khyve -r` run over that list; the KVM state of the
 * vCPUs and the VM, and guest RAM, are written by run/snapshot.c around
 * it.  docs/design/snapshots.md has the order and what each device saves.
 */
#ifndef KHYVE_SNAPSHOT_H
#define KHYVE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/sbuf.h"

struct machine;

/*
 * What a participant does.  `arg` is the pointer it registered with.
 * Called with the vCPUs paused (machine_pause), from the thread that runs
 * the checkpoint (the API thread) or, for restore, the main thread before
 * any vCPU has run.
 */
struct state_ops {
	/*
	 * Optional: stop taking new work and wait until every request in
	 * flight has completed and posted its completion (used ring, CQ,
	 * interrupt), so that the saved state holds nothing half-done.
	 * Bounded: give up after about a second.  0, or -1 with one line in
	 * `err`; unquiesce is then still called.
	 */
	int (*quiesce)(void *arg, char *err, size_t errlen);
	/* Optional: undo quiesce (after a checkpoint, or a failed one). */
	void (*unquiesce)(void *arg);
	/*
	 * Write the state, starting with a u16 section version.  NULL marks
	 * a device that cannot be saved yet: a checkpoint then refuses
	 * ("device NAME cannot be saved") before anything is written.
	 * 0, or -1 with one line in `err`.
	 */
	int (*save)(void *arg, struct sbuf *out, char *err, size_t errlen);
	/*
	 * Load what save wrote (hostile: check every value against its range
	 * and fail the reader with sbuf_fail rather than trust it), and
	 * re-drive what follows from it (interrupt lines, mappings, timers).
	 * The caller checks sbuf_reader_done() afterwards.  0, or -1 with one
	 * line in `err`.
	 */
	int (*restore)(void *arg, struct sbuf_reader *in, char *err, size_t errlen);
	/*
	 * Optional, with save NULL: why the device can never be saved (a
	 * passed-through host device), for the refusal's line; NULL or no
	 * hook: it is only not saved yet.
	 */
	const char *(*never_saved)(void *arg);
};

#define STATE_NAME_LEN 32 /* section names, NUL included (SNAPFILE_NAME_LEN) */

/* One participant: its section's name, ops and argument. */
struct state_participant {
	char name[STATE_NAME_LEN];
	const struct state_ops *ops;
	void *arg;
};

/*
 * Add a participant (set-up only, before the vCPUs start): `name` is its
 * section's name, unique in the machine, 1-31 printable ASCII bytes with
 * no space ("lpc.com1", "pci.0.31.0", "lpc.rtc").  Sections are saved in
 * the order participants were added and restored in that order too.
 * 0, or -1 (out of memory, a bad or repeated name: a bug, logged).
 */
int machine_add_state(struct machine *m, const char *name, const struct state_ops *ops, void *arg);

/* The participant called `name`, or NULL. */
const struct state_participant *machine_state_find(struct machine *m, const char *name);

/*
 * Whether every participant can be saved: 0, or -1 with "NAME cannot be
 * saved yet" in `err` for the first that cannot (its ops->save is NULL).
 */
int machine_state_saveable(struct machine *m, char *err, size_t errlen);

/*
 * Quiesce every participant, in reverse order of registration (the
 * devices added last sit on top of those added first).  On failure the
 * ones already quiesced are unquiesced again and -1 comes back with the
 * participant's line in `err`.  The vCPUs must be paused.
 */
int machine_state_quiesce(struct machine *m, char *err, size_t errlen);

/* Undo machine_state_quiesce(), in registration order. */
void machine_state_unquiesce(struct machine *m);

/*
 * Participant `i`'s state into `out` (emptied first).  0, or -1 with one
 * line in `err` naming it.
 */
int machine_state_save_one(struct machine *m, unsigned i, struct sbuf *out, char *err,
                           size_t errlen);

/*
 * Restore participant `i` from the `len` bytes at `data` (a section's
 * whole payload): its restore, then a check that every byte was read.
 * 0, or -1 with "NAME: why" in `err`.
 */
int machine_state_restore_one(struct machine *m, unsigned i, const void *data, size_t len,
                              char *err, size_t errlen);

#endif
