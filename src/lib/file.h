/*
 * Whole-file reads for what the user names on the command line: kernels,
 * initrds, boot ROMs, option ROMs; log files khyve creates; and the last
 * step of writing a file through a temporary name (khyvectl's state files,
 * vm web's ISO uploads, vm's snapshots and imports).
 */
#ifndef KHYVE_FILE_H
#define KHYVE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Read the regular file `path` (1 byte to `max` bytes) into a malloc()ed
 * buffer the caller frees; `*len` gets its size in bytes.  Returns NULL
 * with a one-line reason naming the file in `err` when it cannot be
 * opened, is not a regular file, is empty or larger than `max`, or cannot
 * be read whole.
 */
uint8_t *file_read_all(const char *path, size_t max, size_t *len, char *err, size_t errlen);

/*
 * Open `path` to append to (a log such as -l debugcon,FILE), creating it
 * with mode 0644 when missing.  khyve never follows a symlink when it
 * creates or writes a file (a guest folder copied from another host must
 * not make it append to whatever a link there points at): a symlink at
 * `path` is followed only to something that is not a regular file (a
 * terminal, a pipe: /dev/stderr), and that fd is non-blocking, so a reader
 * that stalls stops the log (writes fail) rather than the vCPU.  Returns
 * the fd (O_CLOEXEC), or -1 with a one-line reason naming `path` in `err`.
 */
int file_open_append(const char *path, char *err, size_t errlen);

/*
 * rename(from, to) that fails with EEXIST instead of replacing `to`, also
 * on file systems without RENAME_NOREPLACE (there: a check, then the
 * rename).  0, or -1 with errno.
 */
int file_rename_noreplace(const char *from, const char *to);

/*
 * The last step of writing a file through a temporary name: the caller
 * has written the temporary file `tmp` whole and fsync'ed it; this renames
 * it to `path` (replacing a file there only when `replace`, else failing
 * with EEXIST), then fsyncs `path`'s folder, so that the new name survives
 * a crash.  Returns 0; -1 with errno when the rename failed (`tmp` is
 * still there, for the caller to remove); -2 with errno when only the
 * folder's fsync failed (the file is at `path`).
 */
int file_rename_durable(const char *tmp, const char *path, bool replace);

/*
 * The first line of the text file `path` into `out` (`len` bytes with the
 * NUL, the newline left off, cut at `len` - 1 bytes): a small state file
 * (cgroup's memory.max) or a tool's saved stderr.  Returns 0; -1 with
 * errno and `out` empty when `path` cannot be opened or is empty.
 */
int file_first_line(const char *path, char *out, size_t len);

#endif
