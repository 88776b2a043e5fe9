/*
 * Listings for `-s help` and `-l help`: a name and a one-line description
 * per entry, sorted by name, the descriptions in one column; and the usage
 * text of one entry for `-s NAME,help` / `-l NAME,help`.
 */
#ifndef KHYVE_HELP_H
#define KHYVE_HELP_H

#include <stddef.h>
#include <stdio.h>

struct help_line {
	const char *name;  /* as the user writes it: "virtio-blk", "comN" */
	const char *descr; /* one line without '\n'; NULL prints none */
};

/* Sort `lines` (n entries, reordered in place) by name and print them to
 * `out`, one entry a line. */
void help_print_lines(FILE *out, struct help_line *lines, size_t n);

/* Print "NAME: DESCR" and then `usage` (lines ending in '\n'), or a line
 * saying that NAME takes no options when `usage` is NULL. */
void help_print_usage(FILE *out, const char *name, const char *descr, const char *usage);

#endif
