/*
 * Printing strings a user or a guest chose (VM names, paths, option
 * values) inside one-line messages: a newline, an escape sequence or any
 * other control character in them must not start a new line or reach the
 * terminal raw, so those bytes are written as C escapes.
 */
#ifndef KHYVE_STRESCAPE_H
#define KHYVE_STRESCAPE_H

#include <stddef.h>

/*
 * Copy `src` to `dst` (`dstlen` bytes, always NUL-terminated when dstlen
 * > 0, truncated at a whole escape) with every control byte (0x00-0x1f and
 * 0x7f) written as \n, \r, \t, \e or \xHH and a backslash before such an
 * escape kept as it is; bytes from 0x20 up (UTF-8 included) pass unchanged.
 * Returns `dst`.
 */
char *str_escape_controls(char *dst, size_t dstlen, const char *src);

#endif
