/*
 * `vm migrate [-l] [-k] NAME HOST` (issue 14): move a guest to another
 * host over ssh, as libvirt's qemu+ssh does; no TCP port is opened.
 *
 * Both kinds first run `vm _migrate-check` on HOST over ssh, which refuses
 * with one line, before anything starts or is copied there: `vm` not
 * initialised there, a switch of the guest's NICs missing there, the
 * guest running there; and for a live migration a vm_dir other than
 * ours, or a guest folder that is not the same one (shared storage is
 * proven with a random token file written into the folder here and read
 * there: "disks are not on storage both hosts see").
 *
 * Live (-l, the guest runs here): `vm _migrate-receive NAME` on HOST starts
 * the guest under its supervisor as `vm start` does, but as `khyve -R
 * unix:DIR/NAME.mig`, and says "ready" once that socket is there; ssh
 * forwards a private local socket to it (-L, stream-local), and
 * `khyvectl --migrate` sends the guest.  DIR/run.migrating tells this
 * host's supervisor that khyve's exit 0 means "moved", not "reboot".
 * Any failure before the target confirms leaves the guest running here.
 *
 * Cold (the guest is stopped here): the folder goes to HOST's vm_dir as a
 * sparse tar stream through ssh into `vm _migrate-unpack NAME` (which never
 * replaces a guest or folder there), then the folder here is removed, as
 * vm-bhyve's migrate does, unless -k keeps it.  A folder that HOST sees
 * already (shared storage) is not copied, nor removed.
 *
 * The ssh command is $KHYVE_SSH, else migrate_ssh in khyve.conf, else
 * "ssh"; it always runs with BatchMode=yes (a missing key fails with one
 * line instead of a password prompt).
 */
#ifndef KHYVE_VM_MIGRATE_H
#define KHYVE_VM_MIGRATE_H

#include "vm/vm.h"

/* The token file `vm migrate` leaves in the guest's folder while checking
 * (VM_MIGRATE_TOKEN + 36 characters of a random UUID). */
#define VM_MIGRATE_TOKEN ".khyve-migrate-"

/* The unix socket the target's khyve -R listens on: DIR/NAME + this. */
#define VM_MIGRATE_SOCKET_SUFFIX ".mig"

/* vm migrate [-l] [-k] name host */
int cmd_migrate(struct vm_sys *sys, int argc, char **argv);

/* Hidden, run by cmd_migrate on the target over ssh (see above):
 *   vm _migrate-check [-c] NAME VM_DIR GUEST_DIR TOKEN SOURCE_HOST SUPERVISOR_PID [SWITCH...]
 *     prints "ok shared" or "ok copy" (-c: cold), else one line, status 1;
 *   vm _migrate-receive NAME
 *     prints "ready", then "running" or "error MESSAGE";
 *   vm _migrate-unpack NAME
 *     reads a tar stream of folder NAME on stdin into vm_dir/NAME; "ok". */
int cmd_migrate_check(struct vm_sys *sys, int argc, char **argv);
int cmd_migrate_receive(struct vm_sys *sys, int argc, char **argv);
int cmd_migrate_unpack(struct vm_sys *sys, int argc, char **argv);

/*
 * cmd_run.c: start guest `g`'s supervisor detached, as `vm start` does,
 * with its first run receiving on `addr` ("unix:PATH").  The read end of
 * the supervisor's report pipe ("ok" once the guest runs here and the
 * lock is ours, "error MESSAGE"), or -1 after the one-line error.
 */
int vm_launch_receiver(const struct vm_sys *sys, const struct vm_guest *g, const char *addr);

#endif
