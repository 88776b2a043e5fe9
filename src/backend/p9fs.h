/*
 * A 9P2000.L file server on one host folder (the share), for virtio-9p
 * (dev/virtio_9p.c).  The protocol: Linux Documentation/filesystems/9p.rst
 * and the 9P2000.L message list (diod's protocol.md); the messages a
 * Linux v9fs mount uses are served: Tversion, Tattach, Twalk, Tgetattr,
 * Tsetattr, Tlopen, Tlcreate, Tread, Twrite, Tclunk, Tremove, Treaddir,
 * Tmkdir, Tunlinkat, Trenameat, Trename, Tsymlink, Treadlink, Tstatfs,
 * Tfsync, Tlink, Tlock and Tgetlock (always granted: locks are the
 * guest's business), Tflush; Tmknod is refused (EPERM), xattrs and Tauth
 * are not supported (EOPNOTSUPP), anything else gets Rlerror EOPNOTSUPP.
 *
 * Confinement: a fid is a path relative to the share, and every path is
 * opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS) from the share's descriptor, so no component
 * (not even one the host changes meanwhile) may be a symlink or lead out;
 * operations on a name (create, mkdir, unlink, rename, link, symlink) use
 * the *at calls on the opened parent with a single component, never '/',
 * "." or "..".  Walking ".." at the share's root stays there.  Symlinks
 * are made and read, never followed: the guest resolves them in its own
 * namespace.  With `ro`, every change is refused with EROFS.
 *
 * Files are made with khyve's own credentials (as QEMU's
 * security_model=none): the guest's uid and gid are not applied, except
 * through Tsetattr, which the host may refuse.
 *
 * Bounds: messages at most the negotiated msize (<= P9FS_MAX_MSIZE),
 * at most P9FS_MAX_FIDS fids, walks of at most 16 names, names of at
 * most 255 bytes, paths of at most PATH_MAX.  Malformed messages (a size
 * that is not the buffer's, fields past the end, a string with a NUL)
 * get Rlerror EINVAL and change nothing.
 */
#ifndef KHYVE_P9FS_H
#define KHYVE_P9FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define P9FS_MAX_MSIZE (512 * 1024)
#define P9FS_MAX_FIDS  4096
#define P9FS_HDR       7 /* size[4] type[1] tag[2] */

struct p9fs;

/*
 * Serve the folder `path` (which must exist and be a directory; it is
 * opened now, so a later rename of it on the host does not matter),
 * read-only when `ro`.  NULL with one line in `err` on failure.
 */
struct p9fs *p9fs_open(const char *path, bool ro, char *err, size_t errlen);

/* Close every fid and the share; `fs` may be NULL. */
void p9fs_close(struct p9fs *fs);

/* Forget every fid and the negotiated msize (a device reset). */
void p9fs_reset(struct p9fs *fs);

/*
 * Handle one request, `req` of `len` bytes (the caller's own copy), and
 * write the reply into `resp` (room for `cap` bytes).  Returns the
 * reply's length, or 0 when `cap` cannot hold even an Rlerror (11 bytes)
 * or `len` holds no header: nothing is then answered.  Never blocks on
 * anything but the host's file system.
 */
size_t p9fs_handle(struct p9fs *fs, const uint8_t *req, size_t len, uint8_t *resp, size_t cap);

/* The largest request the server accepts now (the negotiated msize). */
uint32_t p9fs_msize(const struct p9fs *fs);

#endif
