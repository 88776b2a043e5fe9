/*
 * The user's side of a serial console on a terminal (khyve -l comN,stdio
 * and `vm console`): the escape typed at the start of a line, as in cu and
 * ssh, and the sequence that puts back what guest output may have changed.
 *
 *   ~.  or ~^D   the command (khyve: power off; vm console: detach)
 *   ~?           a one-line help for the user
 *   ~~           one ~ for the guest
 *   ~ then any other byte: both bytes pass unchanged
 *
 * A `~` counts as an escape only as the first byte typed or right after a
 * CR or LF; elsewhere it passes like any byte.
 */
#ifndef KHYVE_TTY_ESCAPE_H
#define KHYVE_TTY_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* The default escape character. */
#define TTY_ESCAPE_DEFAULT '~'

/* What the user asked for with the escape (none: plain bytes only). */
enum tty_escape_cmd { TTY_ESCAPE_NONE, TTY_ESCAPE_QUIT, TTY_ESCAPE_HELP };

/* Escape state of one input stream; set up with tty_escape_init(). */
struct tty_escape {
	int ch;          /* the escape character (0..255), or -1: escapes off */
	bool line_start; /* the last byte ended a line, or nothing came yet */
	bool held;       /* an escape character at line start, not yet passed on */
};

/* Start a stream with escape character `ch` (-1: every byte passes). */
void tty_escape_init(struct tty_escape *e, int ch);

/*
 * Copy the typed bytes in[0..n) to `out`, which has room for n + 1 bytes
 * (a held escape character may come out ahead of them), removing escapes.
 * Stops right after the first escape command: *used is the number of input
 * bytes consumed, *cmd the command (TTY_ESCAPE_NONE when all of `in` was
 * consumed without one).  Returns the number of bytes stored in `out`.
 */
size_t tty_escape_filter(struct tty_escape *e, const char *in, size_t n, char *out, size_t *used,
                         enum tty_escape_cmd *cmd);

/*
 * The escape character a setting names: "none" gives -1, one printable
 * ASCII character (not a blank, '.' or '?') gives that character;
 * anything else -2.
 */
int tty_escape_parse(const char *value);

/*
 * Undo what a guest may have left on the terminal at `fd`: autowrap on
 * (SeaBIOS turns it off), the ASCII set in G0 and shifted in, attributes
 * reset, the cursor shown.  The screen is not cleared.  Nothing is written
 * when `fd` is not a terminal.  Async-signal-safe.
 */
void tty_write_restore(int fd);

#endif
