/*
 * The memory state of a snapshot (`vm snapshot -m`, issue 14): the running
 * guest is paused, so that its memory and its disks agree; its khyve
 * checkpoints the whole machine into a state file (khyvectl --checkpoint,
 * which leaves a paused guest paused); the disks are copied (or zfs
 * snapshotted); then the guest goes on.  `vm rollback` of such a snapshot
 * puts the file back as DIR/NAME.state, which makes the guest Suspended,
 * so that `vm start` resumes it in the state the snapshot saw.
 */
#ifndef KHYVE_VM_SNAPMEM_H
#define KHYVE_VM_SNAPMEM_H

#include <stddef.h>

#include "vm/vm.h"

/* The key of a snapshot folder's .snapshot that names its memory state
 * (a file of the folder: NAME.state as the guest was called then). */
#define SNAP_META_MEMORY "memory"

/* On a ZFS datastore the state is written into the guest's dataset as
 * DIR/NAME.state.snap, so that zfs snapshot takes it with the disks; it is
 * removed from the live dataset at once, and a rollback that brings it
 * back renames it to DIR/NAME.state. */
#define VM_SNAP_STATE_SUFFIX ".state.snap"

/* What is done while the guest is paused: take its disks.  0, or -1 with
 * one line in `err`. */
typedef int (*snapmem_disks_fn)(void *arg, char *err, size_t errlen);

/*
 * Pause the running guest `g` (unless it is paused already), have its
 * khyve checkpoint it into the new file `state`, call `disks(arg)`, then
 * resume the guest unless it was paused before, on failures too: vm never
 * leaves a guest paused.  0 when the state and the disks were taken (a
 * resume that fails then is one warning line: the snapshot is whole); -1
 * with one line in `err` otherwise.  A `state` file made before a failure
 * stays: the caller removes it (with its temporary folder).
 */
int snapmem_take(const struct vm_sys *sys, const struct vm_guest *g, const char *state,
                 snapmem_disks_fn disks, void *arg, char *err, size_t errlen);

#endif
