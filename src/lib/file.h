/*
 * Whole-file reads for what the user names on the command line: kernels,
 * initrds, boot ROMs, option ROMs.
 */
#ifndef KHYVE_FILE_H
#define KHYVE_FILE_H

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

#endif
