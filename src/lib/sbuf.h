/*
 * Field-by-field encoding of saved state (floor 0): a growable buffer that
 * takes little-endian integers and bytes, and a bounded reader for them.
 * Devices and the KVM layer write their state sections with these, never as
 * raw structs, so a section's layout is fixed by its code and its version
 * (docs/design/snapshots.md, section 1), not by the compiler.
 *
 * Both sides are sticky on error: after one failure (out of memory on the
 * writer, reading past the end or a bad value on the reader) every later
 * call does nothing (a get returns 0), and the caller checks once at the
 * end.  The data a reader walks comes from a state file: hostile, bounded.
 */
#ifndef KHYVE_SBUF_H
#define KHYVE_SBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SBUF_MAX (64u << 20) /* bytes: the largest buffer a writer grows to */

/* A writer.  Zero-initialised ({0}) is an empty, valid buffer. */
struct sbuf {
	uint8_t *data; /* malloc()ed, `len` bytes used of `cap`; owned */
	size_t len, cap;
	bool failed; /* out of memory or past SBUF_MAX */
};

void sbuf_put_u8(struct sbuf *b, uint8_t v);
void sbuf_put_u16(struct sbuf *b, uint16_t v);
void sbuf_put_u32(struct sbuf *b, uint32_t v);
void sbuf_put_u64(struct sbuf *b, uint64_t v);
void sbuf_put_bool(struct sbuf *b, bool v); /* one byte, 0 or 1 */
void sbuf_put_bytes(struct sbuf *b, const void *p, size_t n);

/* Free the data and reset `b` to empty. */
void sbuf_free(struct sbuf *b);

/* A reader over `len` bytes at `p` (not owned, not copied). */
struct sbuf_reader {
	const uint8_t *p;
	size_t len, off;
	bool failed;  /* read past the end, or sbuf_fail() */
	char why[96]; /* what failed first, for the caller's error line */
};

void sbuf_reader_init(struct sbuf_reader *r, const void *p, size_t len);

uint8_t sbuf_get_u8(struct sbuf_reader *r);
uint16_t sbuf_get_u16(struct sbuf_reader *r);
uint32_t sbuf_get_u32(struct sbuf_reader *r);
uint64_t sbuf_get_u64(struct sbuf_reader *r);
/* A byte that must be 0 or 1; anything else fails the reader. */
bool sbuf_get_bool(struct sbuf_reader *r);
/* `n` bytes into `dst` (zero-filled when they are not there). */
void sbuf_get_bytes(struct sbuf_reader *r, void *dst, size_t n);

/*
 * Fail the reader with a reason (printf-style, e.g. "rx_head 70 out of
 * range"), as a restore does for a value out of its range; only the first
 * reason is kept.
 */
void sbuf_fail(struct sbuf_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Read the leading u16 section version and check 1 <= version <= `max`;
 * returns it, or 0 (the reader failed: "version 7, this khyve reads 1-2").
 */
unsigned sbuf_get_version(struct sbuf_reader *r, unsigned max);

/*
 * The end of a restore: 0 when nothing failed and every byte was read;
 * otherwise -1 with "NAME: WHY" in `err` ("NAME: 3 bytes left over",
 * "NAME: truncated").
 */
int sbuf_reader_done(const struct sbuf_reader *r, const char *name, char *err, size_t errlen);

#endif
