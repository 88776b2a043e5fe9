/*
 * Host paths that a guest's config names, and files that vm creates.
 *
 * A guest folder may come from another host (vm-bhyve's layout invites
 * copying one), so nothing in NAME.conf may make khyve open a host file
 * outside that folder: every file a config names is resolved here, each
 * symbolic link followed by hand, and must end up inside the folder it
 * belongs to.  `..` components are refused outright.  The opt-outs (for
 * host paths the user means) are explicit keys: diskN_dev="custom",
 * linux_kernel_dev="custom", linux_initrd_dev="custom".
 *
 * Files vm creates in a guest's folder (logs, locks, edits) are opened
 * with vm_open_own(), which never follows a symbolic link, never blocks on
 * a FIFO and never writes into something that is not a plain file of its
 * own (a hard link to another file counts as someone else's).
 */
#ifndef KHYVE_VM_PATHS_H
#define KHYVE_VM_PATHS_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

/* The UEFI variable store of a guest with uefi_vars="yes", in its folder. */
#define VM_UEFI_VARS "uefi-vars.fd"

/*
 * Resolve `path` (absolute) as the kernel would, following every symbolic
 * link (at most 40), but allowing the last components not to exist (as
 * `realpath -m`).  `out` (PATH_MAX) gets an absolute path without links,
 * `.` or `..`.  0, or -1 with errno (ELOOP, ENAMETOOLONG, EACCES, EINVAL
 * for a relative path, ...).
 */
int vm_path_resolve(const char *path, char out[PATH_MAX]);

/*
 * `name` as the config gives it, relative to `root` (the guest's folder,
 * a datastore) or absolute, must stay inside `root` once every link is
 * followed.  0 with `out` (PATH_MAX) = ROOT/NAME (or NAME when absolute),
 * which is what khyve is given; -1 with a reason in `why` (no key, no
 * path: the caller names them): "'..' is not allowed", "it is outside
 * ROOT", "it leads outside ROOT through a symbolic link", or errno's text.
 */
int vm_path_confine(const char *root, const char *name, char out[PATH_MAX], char *why,
                    size_t whylen);

/*
 * open(path, flags | O_NOFOLLOW | O_CLOEXEC, mode) for a file vm owns,
 * such as DIR/vm-bhyve.log or DIR/run.lock: a symbolic link there fails
 * with ELOOP; a FIFO, device, folder or a file with another hard link
 * fails with EPERM (nothing is written or truncated: O_TRUNC is applied
 * only after the check).  The fd, or -1 with errno.
 */
int vm_open_own(const char *path, int flags, mode_t mode);

/*
 * What vm_open_own() checks first, without opening anything: 0 when
 * nothing is at `path` or a plain file of its own; else -1 with ELOOP (a
 * link) or EPERM.
 */
int vm_own_file_ok(const char *path);

/* Text for vm_open_own()'s errno: a plainer word for ELOOP and EPERM. */
const char *vm_open_own_strerror(int err);

#endif
