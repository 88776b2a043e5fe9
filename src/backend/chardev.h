/*
 * Character back ends for serial ports, named as in bhyve(8) -l comN,...:
 *   stdio              khyve's own stdin/stdout; a terminal is put in raw mode
 *                      and always restored when khyve exits (termios, and
 *                      on a terminal stdout autowrap, character set,
 *                      attributes and cursor: lib/tty_escape.h); the user's
 *                      escape `~.` is chardev_set_escape()
 *   /dev/PATH          a tty or other character device
 *   tcp=IP:PORT        listen on IP:PORT, one client at a time
 *   pty=LINK           a new pseudo-terminal in raw mode; LINK becomes a
 *                      symlink to its slave (/dev/pts/N), replacing a file
 *                      or symlink there (never a directory), and is removed
 *                      when khyve exits if it still points there.  Clients
 *                      (`vm console`, cu, screen) open LINK and may come and
 *                      go: khyve holds the slave open itself, so the master
 *                      never hangs up.
 *
 * Input: when bytes are readable the owner's `ready` callback runs on the
 * event-loop thread and pulls them with chardev_read().  An owner with no
 * room pauses input and resumes it later (from any thread).
 * Output: chardev_write() from any thread; bytes are dropped when nobody
 * listens (no TCP client), as on a real serial line; a pty whose buffer is
 * full because no client reads it discards its oldest bytes instead, so a
 * late client sees the newest output.  Writes never block.
 */
#ifndef KHYVE_CHARDEV_H
#define KHYVE_CHARDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct chardev;
struct mevent_loop;

typedef void (*chardev_ready_cb)(void *arg);
typedef void (*chardev_escape_cb)(void *arg);

/*
 * Open the back end described by `spec` and watch it on `loop`.  Returns
 * NULL with a one-line reason in `err` on failure.
 */
struct chardev *chardev_open(const char *spec, struct mevent_loop *loop, chardev_ready_cb ready,
                             void *arg, char *err, size_t errlen);
void chardev_close(struct chardev *cd);

/* Read up to `len` pending bytes without blocking; returns the count (0 when
 * none).  Event-loop thread only. */
size_t chardev_read(struct chardev *cd, void *buf, size_t len);

/* Send `len` bytes; never fails from the caller's point of view. */
void chardev_write(struct chardev *cd, const void *buf, size_t len);

/* Stop / restart calling `ready` (flow control).  Thread-safe. */
void chardev_pause_input(struct chardev *cd);
void chardev_resume_input(struct chardev *cd);

/*
 * The user's escape on a stdio back end whose stdin is a terminal: `ch`
 * (TTY_ESCAPE_DEFAULT, or -1 for none) at the start of a line, then `.`
 * (or ^D) calls `quit` on the event-loop thread and ends input; `?` prints
 * the escapes on stderr; the character twice sends it once.  Other back
 * ends and stdin from a pipe or file pass every byte.  Returns whether the
 * escape is active.  Call once, before input arrives.
 */
bool chardev_set_escape(struct chardev *cd, int ch, chardev_escape_cb quit, void *arg);

/* Put back every terminal khyve changed.  Safe to call more than once and
 * from a signal handler. */
void chardev_restore_terminals(void);

#endif
