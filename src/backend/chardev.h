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
 *                      symlink to its slave (/dev/pts/N).  LINK must not
 *                      exist, or be a stale link a khyve left (to a
 *                      /dev/pts/N that is gone); anything else there (a
 *                      file, a directory, someone's symlink) is refused,
 *                      never replaced.  LINK is removed when khyve exits
 *                      if it still points there.  Clients (`vm console`,
 *                      cu, screen) open LINK and may come and go: khyve
 *                      holds the slave open itself, so the master never
 *                      hangs up.
 *   unix=PATH          listen on a new unix socket at PATH, one client at
 *                      a time (virtio-console ports).  Only nothing, or a
 *                      stale socket nobody listens on (connect refused),
 *                      may be at PATH; anything else is refused, never
 *                      replaced.  Removed when khyve exits if PATH still
 *                      names the socket it made and khyve can still see
 *                      it (not from inside the jail, run/jail.h, whose
 *                      mount namespace hides PATH: the socket stays, and
 *                      the next khyve takes the stale socket over).
 *
 * Input: when bytes are readable the owner's `ready` callback runs on the
 * event-loop thread and pulls them with chardev_read().  An owner with no
 * room pauses input and resumes it later (from any thread).
 *
 * Output never blocks the caller (a vCPU): every back end writes
 * non-blocking, and what the reader does not take at once waits in a ring
 * of CHARDEV_OUT_MAX bytes that the event loop writes out when the fd has
 * room.  When the ring is full, newer output is dropped and counted (the
 * first drop of a run is logged, rate-limited; the total when khyve exits).
 * A pty whose buffer is full because no client reads it discards its
 * oldest bytes instead, so a late client sees the newest output; a TCP
 * back end without a client drops output, as on a real serial line.  On
 * exit, waiting output is flushed for as long as the reader takes some
 * within CHARDEV_EXIT_WAIT_MS.  stdio does not set O_NONBLOCK on the file
 * description it shares with the shell but writes to its own reopened
 * one (stdio_output_fd() says why; only without /proc is the shared flag
 * set, and put back on exit).
 */
#ifndef KHYVE_CHARDEV_H
#define KHYVE_CHARDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct chardev;
struct mevent_loop;

typedef void (*chardev_ready_cb)(void *arg);
typedef void (*chardev_escape_cb)(void *arg);

/*
 * Open the back end described by `spec` and watch it on `loop`.  Returns
 * NULL with a one-line reason in `err` on failure.  Back ends still open
 * when khyve exits are flushed then (atexit), as chardev_close() does.
 */
struct chardev *chardev_open(const char *spec, struct mevent_loop *loop, chardev_ready_cb ready,
                             void *arg, char *err, size_t errlen);

/* Write out waiting output (CHARDEV_EXIT_WAIT_MS at most without
 * progress), log the total dropped, stop watching and free `cd`.  Only
 * while the loop is not running. */
void chardev_close(struct chardev *cd);

/* Read up to `len` pending bytes without blocking; returns the count (0 when
 * none).  Event-loop thread only. */
size_t chardev_read(struct chardev *cd, void *buf, size_t len);

/* Output bounds: the ring per back end, the batch from which the writing
 * thread flushes itself, the event loop's flush tick while queued output
 * flows (ms: the most it delays a byte), and how long exit waits for a
 * reader taking nothing (ms). */
#define CHARDEV_OUT_MAX      (64 * 1024)
#define CHARDEV_OUT_BATCH    4096
#define CHARDEV_TICK_MS      1
#define CHARDEV_EXIT_WAIT_MS 1000

/* Send `len` bytes now: written at once as far as the fd takes them, the
 * rest buffered or dropped (above).  Never blocks; any thread. */
void chardev_write(struct chardev *cd, const void *buf, size_t len);

/* Send `len` bytes soon: they join the ring and the event loop writes
 * them within CHARDEV_TICK_MS, or this call once CHARDEV_OUT_BATCH bytes
 * wait; so a device that produces one byte per guest exit (a UART) costs
 * no system call per byte.
 * Never blocks; any thread. */
void chardev_queue(struct chardev *cd, const void *buf, size_t len);

/* Name the back end in logs ("com1"); copied, at most 15 characters.
 * The default is "serial". */
void chardev_set_name(struct chardev *cd, const char *name);

/* Bytes of output dropped so far (ring full or output gone). */
uint64_t chardev_dropped(struct chardev *cd);

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

/* Put back every terminal khyve changed (and stdout's O_NONBLOCK where
 * it had to set it).  Safe to call more than once and from a signal
 * handler. */
void chardev_restore_terminals(void);

#endif
