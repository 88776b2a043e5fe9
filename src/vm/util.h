/* Small file and process helpers for the vm manager. */
#ifndef KHYVE_VM_UTIL_H
#define KHYVE_VM_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Run argv[0] (PATH search) with stdin from /dev/null and its stdout and
 * stderr captured into `out` (NUL-terminated, cut at outlen-1 bytes; may be
 * NULL to discard).  Returns the exit status, or -1 when it could not be
 * started or was killed by a signal.
 */
int vm_spawn(char *const argv[], char *out, size_t outlen);

/* Remove `path` and everything below it (no symlinks followed); 0 or -1. */
int vm_rmtree(const char *path);

/* Create an empty sparse file of `bytes` (mode 0600); 0 or -1 (errno). */
int vm_make_sparse(const char *path, unsigned long long bytes);

/* A random RFC 4122 version-4 UUID in `out` (37 bytes). */
void vm_uuid(char out[37]);

/* A static MAC under bhyve's OUI 58:9c:fc, as vm-bhyve generates. */
void vm_mac(char out[18]);

/*
 * Ask "QUESTION (y/n)? " on stdout as vm-bhyve's util::confirm and read
 * lines until one starts with y or n: 1 for yes, 0 for no or end of input.
 * When stdin is not a terminal nothing is read (an EOF is no answer): -1
 * after the one-line error "COMMAND: stdin is not a terminal ...; use -f".
 */
int vm_confirm(const char *question, const char *command);

/* Where templates and other shared files are: $KHYVE_SHARE, then next to
 * the binary (../share/khyve installed, ../../share in the build tree). */
int vm_share_dir(const char *self, char *out);

/* True when the path exists (lstat). */
bool vm_exists(const char *path);

#endif
