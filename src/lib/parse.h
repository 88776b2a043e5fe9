/* Parsers for user-supplied numbers (command line, config). */
#ifndef KHYVE_PARSE_H
#define KHYVE_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Parse a size with an optional suffix K, M, G, T (binary multiples, any
 * case, optional trailing 'B').  Returns 0 and the size in bytes, or -1 on
 * malformed input or overflow.
 */
int parse_size(const char *s, uint64_t *bytes);

/*
 * Parse a guest memory size the way bhyve(8) -m does: a plain number below
 * 1 MiB is taken as MiB ("-m 512" = 512 MiB), anything else as parse_size().
 * The result must be a non-zero multiple of 4 KiB.  Returns 0 or -1.
 */
int parse_memsize(const char *s, uint64_t *bytes);

/* Parse an unsigned decimal/hex/octal integer in [min, max]; 0 or -1. */
int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/*
 * Whether the `len` bytes at `s` are a name a guest may be shown (a
 * virtio-console port, a virtio-9p mount tag): 1 to `max` characters of
 * A-Z, a-z, 0-9, '.', '_' and '-', so never a path, a space or a comma.
 */
bool parse_is_name(const char *s, size_t len, size_t max);

#endif
