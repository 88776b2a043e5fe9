/*
 * khyve's state files and migration streams: a versioned, checksummed
 * container of named sections (floor 0: it knows nothing of VMs; the
 * callers decide what a section holds).
 *
 * Format (every integer little-endian; version 1):
 *
 *   Header, at offset 0:
 *     0   8   magic "KHYVESTA"
 *     8   4   u32 format version (SNAPFILE_VERSION)
 *     12  4   u32 flags: 0 in a state file; SNAPFILE_FLAG_STREAM (bit 0)
 *             in a live migration stream, no other bit
 *     16  32  creating khyve's version string, NUL-terminated, NUL-padded
 *     48  4   u32 configuration length C (at most SNAPFILE_MAX_CONFIG)
 *     52  4   u32 reserved, 0
 *     56  32  SHA-256 of the configuration bytes
 *     88  C   the configuration (the caller's text, no NUL)
 *
 *   Then sections, one after another:
 *     0   32  name, 1-31 printable ASCII bytes (no space), NUL-terminated,
 *             NUL-padded
 *     (32 4   only with SNAPFILE_FLAG_STREAM: u32 checksum kind, 0 SHA-256,
 *             1 the fast sum; the trailer's is 0)
 *     ..  ..  chunks: u32 length N (at most SNAPFILE_MAX_CHUNK) then N
 *             payload bytes; a chunk of length 0 ends the payload
 *     ..  8   u64 payload length (the sum of the chunks, at most
 *             SNAPFILE_MAX_SECTION)
 *     ..  32  SHA-256 of the payload; for kind 1 the fast sum: Fletcher's
 *             two u64 sums a += w, b += a over the payload as u64 words
 *             (the last one padded with zero bytes), a then b, 16 zero
 *             bytes
 *
 *   A stream's RAM sections (snapfile_write_ram*() of a writer from
 *   snapfile_create_stream()) carry the fast sum, its other sections
 *   SHA-256: RAM is nearly all of a migration's bytes, and SHA-256 of
 *   every page on both sides was most of its CPU time, with a socket that
 *   loses no byte under it.  A state file has SHA-256 everywhere, and
 *   snapfile_open() refuses a stream.
 *
 *   Chunked framing, so that a writer streams payloads of unknown length
 *   into pipes and sockets (migration) as well as files.
 *
 *   The last section is named "end" (the trailer); its 40-byte payload is a
 *   u64 count of the sections before it and the SHA-256 over the SHA-256 of
 *   the header bytes (offsets 0 to 88+C) followed by, for each section
 *   before it, its 32-byte name field, its u64 length and its 32-byte hash.
 *   A file cut anywhere lacks its trailer, and a flipped bit changes some
 *   hash, so snapfile_verify_all() refuses both.
 *
 *   A RAM section (snapfile_write_ram()) holds: u64 region length, u32 page
 *   size, u32 reserved 0; then extents in increasing offset order, each a
 *   u64 byte offset (page aligned), a u64 page count and count pages of
 *   data; an extent with page count 0 ends the list.  All-zero pages are
 *   in no extent.  A section from snapfile_write_ram_pages() has the same
 *   layout but holds the pages a bitmap names, zero ones too (a reader
 *   leaves the pages outside its extents as they were).
 *
 * Every length read from a file is hostile: each is bounded before use and
 * a bad one is an error, never an abort().  Errors are one line (no
 * newline) kept in the handle (snapfile_error()) or written to the
 * caller's `err` buffer.
 */
#ifndef KHYVE_SNAPFILE_H
#define KHYVE_SNAPFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SNAPFILE_VERSION      1u
#define SNAPFILE_NAME_LEN     32u          /* name field, NUL included */
#define SNAPFILE_CREATOR_LEN  32u          /* version string field, NUL included */
#define SNAPFILE_MAX_CONFIG   (1u << 20)   /* bytes */
#define SNAPFILE_MAX_CHUNK    (16u << 20)  /* bytes */
#define SNAPFILE_MAX_SECTION  (1ull << 40) /* bytes: 1 TiB */
#define SNAPFILE_MAX_SECTIONS 65536u       /* sections per file */
#define SNAPFILE_RAM_MIN_PAGE 512u         /* bytes */
#define SNAPFILE_RAM_MAX_PAGE (2u << 20)   /* bytes */
#define SNAPFILE_HEADER_LEN   88u          /* bytes before the configuration */
#define SNAPFILE_FLAG_STREAM  1u           /* header flag: a live migration stream */

struct snapfile_writer;
struct snapfile_reader;

/* ---- writer ---- */

/*
 * Start a state file or stream on `fd` (a file, pipe or socket; the writer
 * never seeks, and does not own or close `fd`): writes the header with
 * `version` (the creating khyve's version string, at most 31 bytes) and
 * `config` (NUL-terminated text, at most SNAPFILE_MAX_CONFIG bytes).
 * Returns a handle to pass to snapfile_finish() or snapfile_abort(), or
 * NULL with one line in `err` (`errlen` bytes).
 */
struct snapfile_writer *snapfile_create(int fd, const char *version, const char *config, char *err,
                                        size_t errlen);

/*
 * As snapfile_create(), for a live migration stream (SNAPFILE_FLAG_STREAM):
 * RAM sections carry the fast sum instead of SHA-256.  Only
 * snapfile_open_stream() reads it.
 */
struct snapfile_writer *snapfile_create_stream(int fd, const char *version, const char *config,
                                               char *err, size_t errlen);

/*
 * Open a section named `name` (1-31 printable ASCII bytes, no space,
 * not "end"); at most one is open at a time.  0, or -1
 * (snapfile_writer_error() says why; every later call then fails too).
 */
int snapfile_section_begin(struct snapfile_writer *w, const char *name);

/*
 * Append `len` bytes at `buf` to the open section's payload (buffered:
 * chunks go out as they fill).  0, or -1 (write error, no section open, or
 * the section would pass SNAPFILE_MAX_SECTION).
 */
int snapfile_write(struct snapfile_writer *w, const void *buf, size_t len);

/* Close the open section: its last chunk, the end chunk, its length and
 * hash.  0 or -1. */
int snapfile_section_end(struct snapfile_writer *w);

/*
 * A whole section `name` holding the `len` bytes of RAM at `base` in pages
 * of `page_size` bytes (a power of two, SNAPFILE_RAM_MIN_PAGE to
 * SNAPFILE_RAM_MAX_PAGE; `len` a multiple of it), all-zero pages left out.
 * No section may be open.  0 or -1.
 */
int snapfile_write_ram(struct snapfile_writer *w, const char *name, const void *base, size_t len,
                       size_t page_size);

/*
 * As snapfile_write_ram(), when the caller knows some pages are zero
 * without reading them: bit i of `maybe` (one bit a page, lowest bit
 * first, len / page_size bits) clear says page i is zero; pages with the
 * bit set are read and left out when all-zero as there.  `maybe` NULL:
 * every page is read.  Not owned.  0 or -1.
 */
int snapfile_write_ram_some(struct snapfile_writer *w, const char *name, const void *base,
                            size_t len, size_t page_size, const uint64_t *maybe);

/*
 * A whole RAM section `name` (same layout as snapfile_write_ram(), read
 * by snapfile_read_ram(..., zero_skipped = false)) holding only the pages
 * whose bit is set in `bitmap` (bit i of word i / 64 = page i; at least
 * (len / page_size + 63) / 64 words), zero pages included: a live
 * migration's round of dirty pages.  Same rules as snapfile_write_ram().
 * 0 or -1.
 */
int snapfile_write_ram_pages(struct snapfile_writer *w, const char *name, const void *base,
                             size_t len, size_t page_size, const uint64_t *bitmap);

/*
 * Write the trailer, fsync `fd` when it is a regular file, and free `w`.
 * 0, or -1 with one line in `err` (also for an earlier failed call).
 */
int snapfile_finish(struct snapfile_writer *w, char *err, size_t errlen);

/* Free `w` without a trailer: what was written is refused by any reader.
 * NULL is ignored. */
void snapfile_abort(struct snapfile_writer *w);

/* Bytes the writer has handed to its fd so far (header included). */
uint64_t snapfile_bytes_written(const struct snapfile_writer *w);

/* The writer's last error (a line; "" when none).  Owned by `w`. */
const char *snapfile_writer_error(const struct snapfile_writer *w);

/* ---- reader ---- */

/*
 * Read and check the header from `fd` (not owned, read sequentially, so a
 * pipe or socket works): magic, a supported version, no unknown flag, the
 * configuration's length and SHA-256.  A handle, or NULL with one line in
 * `err`.  Free with snapfile_close().
 */
struct snapfile_reader *snapfile_open(int fd, char *err, size_t errlen);

/* As snapfile_open(), accepting a live migration stream too (a header
 * with SNAPFILE_FLAG_STREAM; each section is checked with its kind). */
struct snapfile_reader *snapfile_open_stream(int fd, char *err, size_t errlen);

/* The creating khyve's version string, and the configuration text
 * (NUL-terminated; its length in `*len` when not NULL).  Owned by `r`. */
const char *snapfile_creator(const struct snapfile_reader *r);
const char *snapfile_config(const struct snapfile_reader *r, size_t *len);

/*
 * Go to the next section, skipping (and checking) the rest of the current
 * one: 1 with its name in `name`, 0 after the trailer was read and matched
 * (no more sections), -1 on error (snapfile_reader_error()).
 */
int snapfile_next(struct snapfile_reader *r, char name[SNAPFILE_NAME_LEN]);

/*
 * Read up to `len` bytes of the current section's payload into `buf`.
 * Returns the count, short only at the end of the payload (whose length
 * and hash are then checked); 0 once it is over; -1 on error.
 */
ssize_t snapfile_read(struct snapfile_reader *r, void *buf, size_t len);

/*
 * Read the current section as written by snapfile_write_ram() into the
 * `len` bytes at `base`: the file's region length must be `len`, every
 * extent lies inside it.  Skipped (zero) pages are zeroed only when
 * `zero_skipped`, so a caller with fresh anonymous memory saves the
 * writes.  0 or -1; on error `base` may be partly written.
 */
int snapfile_read_ram(struct snapfile_reader *r, void *base, size_t len, bool zero_skipped);

/* The reader's last error (a line; "" when none).  Owned by `r`. */
const char *snapfile_reader_error(const struct snapfile_reader *r);

/* Free `r` (not its fd).  NULL is ignored. */
void snapfile_close(struct snapfile_reader *r);

/*
 * Read the whole file on `fd` from its current offset once and check the
 * header, every section's framing, length and hash, the trailer, and that
 * nothing follows it, before a restore touches anything.  Then seek `fd`
 * back to offset 0 (a file must be seekable).  0, or -1 with one line in
 * `err`.
 */
int snapfile_verify_all(int fd, char *err, size_t errlen);

#endif
