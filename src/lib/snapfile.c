/*
 * khyve's state file container: writer, reader and whole-file check.  The
 * format is described in snapfile.h.
 */
#include "lib/snapfile.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* OpenSSL's SHA-256 (SHA-NI or AVX2 where the CPU has them) runs several
 * times faster than libmd's portable C, and every byte of guest RAM in a
 * state file or migration stream goes through it.  The low-level calls are
 * deprecated in OpenSSL 3 in favour of EVP, which would put each context
 * on the heap; they are kept for that. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#define MAGIC        "KHYVESTA"
#define MAGIC_LEN    8
#define HASH_LEN     SHA256_DIGEST_LENGTH
#define WBUF_LEN     (256u << 10) /* bytes the writer gathers into one chunk */
#define TRAILER_NAME "end"
#define TRAILER_LEN  (8 + HASH_LEN)
#define ERR_LEN      256

static void put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* A name a section may have: 1-31 printable ASCII bytes, no space (so an
 * error naming it stays one line). */
static bool name_ok(const char *name)
{
	size_t len;

	if (name == NULL)
		return false;
	len = strnlen(name, SNAPFILE_NAME_LEN);
	if (len == 0 || len == SNAPFILE_NAME_LEN)
		return false;
	for (size_t i = 0; i < len; i++)
		if (name[i] <= ' ' || name[i] > '~')
			return false;
	return true;
}

/* The hash every trailer covers: a section's name field, length, hash. */
static void chain_section(SHA256_CTX *all, const uint8_t name[SNAPFILE_NAME_LEN], uint64_t len,
                          const uint8_t hash[HASH_LEN])
{
	uint8_t l[8];

	put_le(l, len, 8);
	SHA256_Update(all, name, SNAPFILE_NAME_LEN);
	SHA256_Update(all, l, sizeof(l));
	SHA256_Update(all, hash, HASH_LEN);
}

/* ---- a section's checksum: SHA-256, or in a stream the fast sum ---- */

/* Checksum kinds, the u32 after a section's name in a stream. */
enum sum_kind { SUM_SHA256 = 0, SUM_FAST = 1 };

/* Fletcher's sum over 64-bit little-endian words (a partial last word
 * padded with zeros): two additions a word, so a stream's RAM costs next
 * to nothing to check where SHA-256 took most of a migration's CPU time.
 * It catches what a bug would do (bytes lost, doubled, moved, flipped),
 * not what a forger would; the transport is what a stream trusts. */
struct fast_sum {
	uint64_t a, b;
	uint8_t part[8];
	unsigned nparts; /* bytes waiting in `part` for a whole word */
};

struct sum {
	enum sum_kind kind;
	SHA256_CTX sha;
	struct fast_sum fast;
};

static void fast_words(struct fast_sum *f, const uint8_t *p, size_t words)
{
	uint64_t a = f->a, b = f->b;

	for (size_t i = 0; i < words; i++) {
		uint64_t w;

		memcpy(&w, p + 8 * i, 8); /* x86: little-endian already */
		a += w;
		b += a;
	}
	f->a = a;
	f->b = b;
}

static void fast_update(struct fast_sum *f, const uint8_t *p, size_t len)
{
	if (f->nparts > 0) {
		size_t take = 8 - f->nparts < len ? 8 - f->nparts : len;

		memcpy(f->part + f->nparts, p, take);
		f->nparts += (unsigned)take;
		p += take;
		len -= take;
		if (f->nparts < 8)
			return;
		fast_words(f, f->part, 1);
		f->nparts = 0;
	}
	fast_words(f, p, len / 8);
	memcpy(f->part, p + (len & ~(size_t)7), len & 7);
	f->nparts = (unsigned)(len & 7);
}

static void sum_init(struct sum *s, enum sum_kind kind)
{
	s->kind = kind;
	if (kind == SUM_SHA256)
		SHA256_Init(&s->sha);
	else
		memset(&s->fast, 0, sizeof(s->fast));
}

static void sum_update(struct sum *s, const uint8_t *p, size_t len)
{
	if (s->kind == SUM_SHA256)
		SHA256_Update(&s->sha, p, len);
	else
		fast_update(&s->fast, p, len);
}

/* The 32-byte hash field: the digest, or the fast sum's a and b then
 * zeros. */
static void sum_final(struct sum *s, uint8_t out[HASH_LEN])
{
	struct fast_sum *f = &s->fast;

	if (s->kind == SUM_SHA256) {
		SHA256_Final(out, &s->sha);
		return;
	}
	if (f->nparts > 0) {
		memset(f->part + f->nparts, 0, 8 - f->nparts);
		fast_words(f, f->part, 1);
	}
	memset(out, 0, HASH_LEN);
	put_le(out, f->a, 8);
	put_le(out + 8, f->b, 8);
}

/* ---- writer ---- */

struct snapfile_writer {
	int fd;
	bool failed, in_section;
	bool stream; /* SNAPFILE_FLAG_STREAM: RAM sections get the fast sum */
	uint8_t name[SNAPFILE_NAME_LEN];
	uint64_t sec_len, nsections;
	uint64_t bytes; /* written to fd so far */
	struct sum sec_hash;
	SHA256_CTX all;
	size_t buf_used;
	char err[ERR_LEN];
	uint8_t buf[WBUF_LEN];
};

#define WFAIL_PREFIX "state file: "

static int wfail(struct snapfile_writer *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int wfail(struct snapfile_writer *w, const char *fmt, ...)
{
	va_list ap;

	if (!w->failed) {
		char msg[ERR_LEN];
		size_t plen = strlen(WFAIL_PREFIX);

		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		/* The messages name a file; a stream goes to a migration's target. */
		if (w->stream && strncmp(msg, WFAIL_PREFIX, plen) == 0)
			snprintf(w->err, sizeof(w->err), "migration stream: %.*s",
			         (int)(sizeof(w->err) - 20), msg + plen);
		else
			memcpy(w->err, msg, sizeof(msg));
	}
	w->failed = true;
	return -1;
}

/* A write(2) that returned `n` (errno set when negative) did not go through. */
static int write_failed(struct snapfile_writer *w, ssize_t n)
{
	if (n < 0 && w->stream && (errno == EPIPE || errno == ECONNRESET))
		return wfail(w, "state file: the target closed the connection (%s)",
		             strerror(errno));
	return wfail(w, "state file: write: %s", n < 0 ? strerror(errno) : "wrote nothing");
}

/* All `len` bytes to the fd, through short writes and EINTR. */
static int write_full(struct snapfile_writer *w, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(w->fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return write_failed(w, n);
		p += n;
		len -= (size_t)n;
		w->bytes += (uint64_t)n;
	}
	return 0;
}

/* A chunk's length and payload, in one writev() where it takes all. */
static int write_chunk(struct snapfile_writer *w, const void *data, size_t len)
{
	uint8_t hdr[4];
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)(uintptr_t)data, len}};
	ssize_t n;

	put_le(hdr, len, 4);
	do
		n = writev(w->fd, iov, len > 0 ? 2 : 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return write_failed(w, n);
	w->bytes += (uint64_t)n;
	if ((size_t)n < sizeof(hdr))
		return write_full(w, hdr + n, sizeof(hdr) - (size_t)n) < 0
		           ? -1
		           : write_full(w, data, len);
	return write_full(w, (const uint8_t *)data + ((size_t)n - sizeof(hdr)),
	                  len - ((size_t)n - sizeof(hdr)));
}

static int flush_buf(struct snapfile_writer *w)
{
	if (w->buf_used == 0)
		return 0;
	if (write_chunk(w, w->buf, w->buf_used) < 0)
		return -1;
	w->buf_used = 0;
	return 0;
}

static struct snapfile_writer *create(int fd, uint32_t flags, const char *version,
                                      const char *config, char *err, size_t errlen)
{
	struct snapfile_writer *w;
	uint8_t hdr[SNAPFILE_HEADER_LEN] = {0}, hh[HASH_LEN];
	size_t clen = config != NULL ? strlen(config) : 0;
	SHA256_CTX c;

	if (version == NULL || strlen(version) >= SNAPFILE_CREATOR_LEN) {
		set_err(err, errlen, "state file: version string longer than %u bytes",
		        SNAPFILE_CREATOR_LEN - 1);
		return NULL;
	}
	if (clen > SNAPFILE_MAX_CONFIG) {
		set_err(err, errlen, "state file: configuration of %zu bytes, more than %u", clen,
		        SNAPFILE_MAX_CONFIG);
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		set_err(err, errlen, "state file: out of memory");
		return NULL;
	}
	w->fd = fd;
	w->stream = (flags & SNAPFILE_FLAG_STREAM) != 0;
	memcpy(hdr, MAGIC, MAGIC_LEN);
	put_le(hdr + 8, SNAPFILE_VERSION, 4);
	put_le(hdr + 12, flags, 4);
	memcpy(hdr + 16, version, strlen(version));
	put_le(hdr + 48, clen, 4);
	SHA256_Init(&c);
	SHA256_Update(&c, (const uint8_t *)config, clen);
	SHA256_Final(hdr + 56, &c);
	SHA256_Init(&c);
	SHA256_Update(&c, hdr, sizeof(hdr));
	SHA256_Update(&c, (const uint8_t *)config, clen);
	SHA256_Final(hh, &c);
	SHA256_Init(&w->all);
	SHA256_Update(&w->all, hh, sizeof(hh));
	if (write_full(w, hdr, sizeof(hdr)) < 0 || write_full(w, config, clen) < 0) {
		set_err(err, errlen, "%s", w->err);
		free(w);
		return NULL;
	}
	return w;
}

struct snapfile_writer *snapfile_create(int fd, const char *version, const char *config, char *err,
                                        size_t errlen)
{
	return create(fd, 0, version, config, err, errlen);
}

struct snapfile_writer *snapfile_create_stream(int fd, const char *version, const char *config,
                                               char *err, size_t errlen)
{
	return create(fd, SNAPFILE_FLAG_STREAM, version, config, err, errlen);
}

/* The name field (and in a stream the checksum kind) of a new section. */
static int section_open(struct snapfile_writer *w, const char *name, enum sum_kind kind)
{
	uint8_t field[SNAPFILE_NAME_LEN + 4] = {0};

	if (w->failed)
		return -1;
	if (w->in_section)
		return wfail(w, "state file: section '%s' begun inside another", name);
	memset(w->name, 0, sizeof(w->name));
	memcpy(w->name, name, strlen(name));
	memcpy(field, w->name, sizeof(w->name));
	put_le(field + SNAPFILE_NAME_LEN, kind, 4);
	if (write_full(w, field, w->stream ? sizeof(field) : sizeof(w->name)) < 0)
		return -1;
	sum_init(&w->sec_hash, kind);
	w->sec_len = 0;
	w->in_section = true;
	return 0;
}

static int section_begin(struct snapfile_writer *w, const char *name, enum sum_kind kind)
{
	if (!name_ok(name) || strcmp(name, TRAILER_NAME) == 0)
		return wfail(w, "state file: bad section name (1-%u printable bytes, not '%s')",
		             SNAPFILE_NAME_LEN - 1, TRAILER_NAME);
	if (w->nsections >= SNAPFILE_MAX_SECTIONS)
		return wfail(w, "state file: more than %u sections", SNAPFILE_MAX_SECTIONS);
	return section_open(w, name, kind);
}

int snapfile_section_begin(struct snapfile_writer *w, const char *name)
{
	return section_begin(w, name, SUM_SHA256);
}

int snapfile_write(struct snapfile_writer *w, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	if (w->failed)
		return -1;
	if (!w->in_section)
		return wfail(w, "state file: write outside a section");
	if (len > SNAPFILE_MAX_SECTION - w->sec_len)
		return wfail(w, "state file: section '%s' over %llu bytes", (const char *)w->name,
		             (unsigned long long)SNAPFILE_MAX_SECTION);
	w->sec_len += len;
	while (len > 0) {
		size_t take = WBUF_LEN - w->buf_used;

		/* Copied first, then hashed and sent from the copy: during a
		 * live migration's pre-copy the guest writes `buf` (its RAM)
		 * while it is read, and the hash must be of the bytes sent. */
		if (take > len)
			take = len;
		memcpy(w->buf + w->buf_used, p, take);
		sum_update(&w->sec_hash, w->buf + w->buf_used, take);
		w->buf_used += take;
		if (w->buf_used == WBUF_LEN && flush_buf(w) < 0)
			return -1;
		p += take;
		len -= take;
	}
	return 0;
}

int snapfile_section_end(struct snapfile_writer *w)
{
	uint8_t tail[8 + HASH_LEN];

	if (w->failed)
		return -1;
	if (!w->in_section)
		return wfail(w, "state file: section end without a section");
	if (flush_buf(w) < 0 || write_chunk(w, NULL, 0) < 0)
		return -1;
	put_le(tail, w->sec_len, 8);
	sum_final(&w->sec_hash, tail + 8);
	if (write_full(w, tail, sizeof(tail)) < 0)
		return -1;
	chain_section(&w->all, w->name, w->sec_len, tail + 8);
	w->nsections++;
	w->in_section = false;
	return 0;
}

static bool page_is_zero(const uint8_t *p, size_t page_size)
{
	const uint64_t *q = (const uint64_t *)(const void *)p;

	for (size_t i = 0; i < page_size / 8; i++)
		if (q[i] != 0)
			return false;
	return true;
}

static int write_extent(struct snapfile_writer *w, const uint8_t *base, size_t first, size_t count,
                        size_t page_size)
{
	uint8_t rec[16];

	put_le(rec, (uint64_t)first * page_size, 8);
	put_le(rec + 8, count, 8);
	if (snapfile_write(w, rec, sizeof(rec)) < 0)
		return -1;
	return snapfile_write(w, base + first * page_size, count * page_size);
}

static bool page_marked(const uint64_t *bitmap, size_t i)
{
	return (bitmap[i / 64] >> (i % 64)) & 1;
}

static bool ram_args_ok(const void *base, size_t len, size_t page_size)
{
	return page_size >= SNAPFILE_RAM_MIN_PAGE && page_size <= SNAPFILE_RAM_MAX_PAGE &&
	       (page_size & (page_size - 1)) == 0 && len % page_size == 0 &&
	       ((uintptr_t)base & 7) == 0;
}

/* A whole RAM section: the pages `bitmap` marks (every page when NULL),
 * those that are all-zero left out too when `skip_zero`. */
static int write_ram_section(struct snapfile_writer *w, const char *name, const void *base,
                             size_t len, size_t page_size, const uint64_t *bitmap, bool skip_zero)
{
	const uint8_t *ram = base;
	size_t pages, run = 0, i;
	uint8_t hdr[16] = {0};

	if (!ram_args_ok(base, len, page_size))
		return wfail(w, "state file: RAM section '%s': bad page size %zu for %zu bytes",
		             name ? name : "", page_size, len);
	if (section_begin(w, name, w->stream ? SUM_FAST : SUM_SHA256) < 0)
		return -1;
	put_le(hdr, len, 8);
	put_le(hdr + 8, page_size, 4);
	if (snapfile_write(w, hdr, sizeof(hdr)) < 0)
		return -1;
	pages = len / page_size;
	for (i = 0; i < pages; i++) {
		if ((bitmap == NULL || page_marked(bitmap, i)) &&
		    !(skip_zero && page_is_zero(ram + i * page_size, page_size))) {
			run++;
			continue;
		}
		if (run > 0 && write_extent(w, ram, i - run, run, page_size) < 0)
			return -1;
		run = 0;
	}
	if (run > 0 && write_extent(w, ram, i - run, run, page_size) < 0)
		return -1;
	memset(hdr, 0, sizeof(hdr));
	if (snapfile_write(w, hdr, sizeof(hdr)) < 0)
		return -1;
	return snapfile_section_end(w);
}

int snapfile_write_ram(struct snapfile_writer *w, const char *name, const void *base, size_t len,
                       size_t page_size)
{
	return write_ram_section(w, name, base, len, page_size, NULL, true);
}

int snapfile_write_ram_some(struct snapfile_writer *w, const char *name, const void *base,
                            size_t len, size_t page_size, const uint64_t *maybe)
{
	return write_ram_section(w, name, base, len, page_size, maybe, true);
}

int snapfile_write_ram_pages(struct snapfile_writer *w, const char *name, const void *base,
                             size_t len, size_t page_size, const uint64_t *bitmap)
{
	if (bitmap == NULL)
		return wfail(w, "state file: RAM section '%s': bad page size %zu for %zu bytes",
		             name ? name : "", page_size, len);
	return write_ram_section(w, name, base, len, page_size, bitmap, false);
}

int snapfile_finish(struct snapfile_writer *w, char *err, size_t errlen)
{
	uint8_t trailer[TRAILER_LEN];
	struct stat st;
	int rc = -1;

	if (w->in_section)
		wfail(w, "state file: finished inside section '%s'", (const char *)w->name);
	if (!w->failed) {
		put_le(trailer, w->nsections, 8);
		SHA256_Final(trailer + 8, &w->all);
		/* The trailer must not chain itself: section_open() does not touch
		 * `all`, and it is final by now. */
		if (section_open(w, TRAILER_NAME, SUM_SHA256) == 0 &&
		    snapfile_write(w, trailer, sizeof(trailer)) == 0 && flush_buf(w) == 0) {
			uint8_t tail[8 + HASH_LEN];

			put_le(tail, w->sec_len, 8);
			sum_final(&w->sec_hash, tail + 8);
			if (write_chunk(w, NULL, 0) == 0 && write_full(w, tail, sizeof(tail)) == 0)
				rc = 0;
		}
	}
	if (rc == 0 && fstat(w->fd, &st) == 0 && S_ISREG(st.st_mode) && fsync(w->fd) < 0)
		rc = wfail(w, "state file: fsync: %s", strerror(errno));
	if (rc < 0)
		set_err(err, errlen, "%s", w->err);
	free(w);
	return rc;
}

void snapfile_abort(struct snapfile_writer *w)
{
	free(w);
}

uint64_t snapfile_bytes_written(const struct snapfile_writer *w)
{
	return w->bytes;
}

const char *snapfile_writer_error(const struct snapfile_writer *w)
{
	return w->err;
}

/* ---- reader ---- */

struct snapfile_reader {
	int fd;
	bool failed, in_section, sec_over, done;
	bool stream_ok; /* opened by snapfile_open_stream() */
	bool stream;    /* the header has SNAPFILE_FLAG_STREAM */
	uint8_t name[SNAPFILE_NAME_LEN];
	uint64_t sec_len, nsections;
	uint32_t chunk_left;
	struct sum sec_hash;
	SHA256_CTX all;
	char creator[SNAPFILE_CREATOR_LEN];
	char *config;
	size_t config_len;
	char err[ERR_LEN];
};

static int rfail(struct snapfile_reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int rfail(struct snapfile_reader *r, const char *fmt, ...)
{
	va_list ap;

	if (!r->failed) {
		va_start(ap, fmt);
		vsnprintf(r->err, sizeof(r->err), fmt, ap);
		va_end(ap);
	}
	r->failed = true;
	return -1;
}

/* Exactly `len` bytes, or -1 (end of file counts as truncation). */
static int read_full(struct snapfile_reader *r, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = read(r->fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return rfail(r, "state file: read: %s", strerror(errno));
		if (n == 0)
			return rfail(r, "state file: truncated");
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_header(struct snapfile_reader *r)
{
	uint8_t hdr[SNAPFILE_HEADER_LEN], hash[HASH_LEN];
	uint32_t version, flags, clen;
	SHA256_CTX c;

	if (read_full(r, hdr, sizeof(hdr)) < 0)
		return -1;
	if (memcmp(hdr, MAGIC, MAGIC_LEN) != 0)
		return rfail(r, "state file: not a khyve state file (bad magic)");
	version = (uint32_t)get_le(hdr + 8, 4);
	flags = (uint32_t)get_le(hdr + 12, 4);
	clen = (uint32_t)get_le(hdr + 48, 4);
	if (version != SNAPFILE_VERSION)
		return rfail(r, "state file: format version %u, this khyve reads %u", version,
		             SNAPFILE_VERSION);
	if ((flags & ~SNAPFILE_FLAG_STREAM) != 0 || get_le(hdr + 52, 4) != 0)
		return rfail(r, "state file: unknown flags %#x", flags);
	if (flags != 0 && !r->stream_ok)
		return rfail(r, "state file: a live migration stream (fast checksums), not a state "
		                "file");
	r->stream = flags != 0;
	if (memchr(hdr + 16, '\0', SNAPFILE_CREATOR_LEN) == NULL)
		return rfail(r, "state file: creator version not terminated");
	memcpy(r->creator, hdr + 16, SNAPFILE_CREATOR_LEN);
	if (clen > SNAPFILE_MAX_CONFIG)
		return rfail(r, "state file: configuration of %u bytes, more than %u", clen,
		             SNAPFILE_MAX_CONFIG);
	r->config = malloc((size_t)clen + 1);
	if (r->config == NULL)
		return rfail(r, "state file: out of memory");
	if (read_full(r, r->config, clen) < 0)
		return -1;
	r->config[clen] = '\0';
	r->config_len = clen;
	SHA256_Init(&c);
	SHA256_Update(&c, (const uint8_t *)r->config, clen);
	SHA256_Final(hash, &c);
	if (memcmp(hash, hdr + 56, HASH_LEN) != 0)
		return rfail(r, "state file: configuration does not match its hash");
	if (memchr(r->config, '\0', clen) != NULL)
		return rfail(r, "state file: configuration holds a NUL byte");
	SHA256_Init(&c);
	SHA256_Update(&c, hdr, sizeof(hdr));
	SHA256_Update(&c, (const uint8_t *)r->config, clen);
	SHA256_Final(hash, &c);
	SHA256_Init(&r->all);
	SHA256_Update(&r->all, hash, sizeof(hash));
	return 0;
}

static struct snapfile_reader *open_reader(int fd, bool stream_ok, char *err, size_t errlen)
{
	struct snapfile_reader *r = calloc(1, sizeof(*r));

	if (r == NULL) {
		set_err(err, errlen, "state file: out of memory");
		return NULL;
	}
	r->fd = fd;
	r->stream_ok = stream_ok;
	if (read_header(r) < 0) {
		set_err(err, errlen, "%s", r->err);
		snapfile_close(r);
		return NULL;
	}
	return r;
}

struct snapfile_reader *snapfile_open(int fd, char *err, size_t errlen)
{
	return open_reader(fd, false, err, errlen);
}

struct snapfile_reader *snapfile_open_stream(int fd, char *err, size_t errlen)
{
	return open_reader(fd, true, err, errlen);
}

const char *snapfile_creator(const struct snapfile_reader *r)
{
	return r->creator;
}

const char *snapfile_config(const struct snapfile_reader *r, size_t *len)
{
	if (len != NULL)
		*len = r->config_len;
	return r->config;
}

/* The end chunk was read: the section's length and hash must match. */
static int end_payload(struct snapfile_reader *r)
{
	uint8_t tail[8 + HASH_LEN], hash[HASH_LEN];

	if (read_full(r, tail, sizeof(tail)) < 0)
		return -1;
	sum_final(&r->sec_hash, hash);
	if (get_le(tail, 8) != r->sec_len)
		return rfail(r, "state file: section '%s' length does not match",
		             (const char *)r->name);
	if (memcmp(hash, tail + 8, HASH_LEN) != 0)
		return rfail(r, "state file: section '%s' is corrupt (hash mismatch)",
		             (const char *)r->name);
	if (strcmp((const char *)r->name, TRAILER_NAME) != 0)
		chain_section(&r->all, r->name, r->sec_len, hash);
	r->sec_over = true;
	return 0;
}

/* Make the next chunk current; 0 also at the end of the payload (then
 * `sec_over`). */
static int next_chunk(struct snapfile_reader *r)
{
	uint8_t hdr[4];
	uint32_t n;

	if (read_full(r, hdr, sizeof(hdr)) < 0)
		return -1;
	n = (uint32_t)get_le(hdr, 4);
	if (n == 0)
		return end_payload(r);
	if (n > SNAPFILE_MAX_CHUNK)
		return rfail(r, "state file: chunk of %u bytes in section '%s'", n,
		             (const char *)r->name);
	if (n > SNAPFILE_MAX_SECTION - r->sec_len)
		return rfail(r, "state file: section '%s' over %llu bytes", (const char *)r->name,
		             (unsigned long long)SNAPFILE_MAX_SECTION);
	r->chunk_left = n;
	return 0;
}

ssize_t snapfile_read(struct snapfile_reader *r, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t got = 0;

	if (r->failed)
		return -1;
	if (!r->in_section)
		return rfail(r, "state file: read outside a section");
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	while (got < len && !r->sec_over) {
		size_t take;

		if (r->chunk_left == 0) {
			if (next_chunk(r) < 0)
				return -1;
			continue;
		}
		take = len - got < r->chunk_left ? len - got : r->chunk_left;
		if (read_full(r, p + got, take) < 0)
			return -1;
		sum_update(&r->sec_hash, p + got, take);
		r->chunk_left -= (uint32_t)take;
		r->sec_len += take;
		got += take;
	}
	return (ssize_t)got;
}

/* Read and check the rest of the current section, dropping the bytes. */
static int skip_section(struct snapfile_reader *r)
{
	uint8_t scratch[16384];
	ssize_t n;

	do
		n = snapfile_read(r, scratch, sizeof(scratch));
	while (n > 0);
	return n < 0 ? -1 : 0;
}

static int check_trailer(struct snapfile_reader *r)
{
	uint8_t t[TRAILER_LEN + 1], hash[HASH_LEN];
	ssize_t n = snapfile_read(r, t, sizeof(t));

	if (n < 0)
		return -1;
	if (n != TRAILER_LEN || !r->sec_over)
		return rfail(r, "state file: trailer of %zd bytes", n);
	SHA256_Final(hash, &r->all);
	if (get_le(t, 8) != r->nsections)
		return rfail(r, "state file: trailer counts %llu sections, file has %llu",
		             (unsigned long long)get_le(t, 8), (unsigned long long)r->nsections);
	if (memcmp(hash, t + 8, HASH_LEN) != 0)
		return rfail(r, "state file: trailer hash does not match the sections");
	r->done = true;
	r->in_section = false;
	return 0;
}

/* A stream's checksum kind after the name (a file's is SHA-256): the
 * trailer's must be SHA-256, as it vouches for the rest. */
static int read_sum_kind(struct snapfile_reader *r, enum sum_kind *kind)
{
	uint8_t k[4];
	uint32_t v;

	*kind = SUM_SHA256;
	if (!r->stream)
		return 0;
	if (read_full(r, k, sizeof(k)) < 0)
		return -1;
	v = (uint32_t)get_le(k, 4);
	if (v > SUM_FAST || (v != SUM_SHA256 && strcmp((const char *)r->name, TRAILER_NAME) == 0))
		return rfail(r, "state file: section '%s' has checksum kind %u",
		             (const char *)r->name, v);
	*kind = (enum sum_kind)v;
	return 0;
}

int snapfile_next(struct snapfile_reader *r, char name[SNAPFILE_NAME_LEN])
{
	uint8_t field[SNAPFILE_NAME_LEN];
	enum sum_kind kind;
	size_t nlen;

	if (r->failed)
		return -1;
	if (r->done)
		return 0;
	if (r->in_section && skip_section(r) < 0)
		return -1;
	if (read_full(r, field, sizeof(field)) < 0)
		return -1;
	if (!name_ok((const char *)field))
		return rfail(r, "state file: bad section name");
	nlen = strlen((const char *)field);
	for (size_t i = nlen; i < sizeof(field); i++)
		if (field[i] != 0)
			return rfail(r, "state file: section name not NUL-padded");
	memcpy(r->name, field, sizeof(field));
	if (read_sum_kind(r, &kind) < 0)
		return -1;
	r->in_section = true;
	r->sec_over = false;
	r->sec_len = 0;
	r->chunk_left = 0;
	sum_init(&r->sec_hash, kind);
	if (strcmp((const char *)field, TRAILER_NAME) == 0)
		return check_trailer(r) < 0 ? -1 : 0;
	if (r->nsections >= SNAPFILE_MAX_SECTIONS)
		return rfail(r, "state file: more than %u sections", SNAPFILE_MAX_SECTIONS);
	r->nsections++;
	memcpy(name, field, sizeof(field));
	return 1;
}

/* Exactly `len` payload bytes of the current section. */
static int read_exact(struct snapfile_reader *r, void *buf, size_t len)
{
	ssize_t n = snapfile_read(r, buf, len);

	if (n < 0)
		return -1;
	if ((size_t)n != len)
		return rfail(r, "state file: section '%s' ends early", (const char *)r->name);
	return 0;
}

static int ram_extent(struct snapfile_reader *r, uint8_t *base, size_t len, size_t page,
                      const uint8_t rec[16], size_t *next)
{
	uint64_t off = get_le(rec, 8), count = get_le(rec + 8, 8);

	if (off % page != 0 || off < *next || off > len || count > (len - off) / page)
		return rfail(r,
		             "state file: RAM section '%s': extent at %#llx (%llu pages) outside "
		             "the region or out of order",
		             (const char *)r->name, (unsigned long long)off,
		             (unsigned long long)count);
	if (read_exact(r, base + off, (size_t)(count * page)) < 0)
		return -1;
	*next = (size_t)(off + count * page);
	return 0;
}

int snapfile_read_ram(struct snapfile_reader *r, void *base, size_t len, bool zero_skipped)
{
	uint8_t hdr[16], rec[16], extra;
	uint8_t *ram = base;
	uint64_t flen;
	size_t page, next = 0;

	if (read_exact(r, hdr, sizeof(hdr)) < 0)
		return -1;
	flen = get_le(hdr, 8);
	page = (size_t)get_le(hdr + 8, 4);
	if (flen != len)
		return rfail(r, "state file: RAM section '%s' holds %llu bytes, not %zu",
		             (const char *)r->name, (unsigned long long)flen, len);
	if (page < SNAPFILE_RAM_MIN_PAGE || page > SNAPFILE_RAM_MAX_PAGE ||
	    (page & (page - 1)) != 0 || len % page != 0 || get_le(hdr + 12, 4) != 0)
		return rfail(r, "state file: RAM section '%s': bad page size %zu",
		             (const char *)r->name, page);
	/* Each extent holds at least one page, so this ends after at most
	 * len / page extents. */
	for (;;) {
		size_t from = next;

		if (read_exact(r, rec, sizeof(rec)) < 0)
			return -1;
		if (get_le(rec + 8, 8) == 0)
			break;
		if (ram_extent(r, ram, len, page, rec, &next) < 0)
			return -1;
		if (zero_skipped) {
			size_t off = (size_t)get_le(rec, 8);

			memset(ram + from, 0, off - from);
		}
	}
	if (zero_skipped)
		memset(ram + next, 0, len - next);
	if (snapfile_read(r, &extra, 1) != 0 || !r->sec_over)
		return rfail(r, "state file: RAM section '%s' has bytes after its extents",
		             (const char *)r->name);
	return 0;
}

const char *snapfile_reader_error(const struct snapfile_reader *r)
{
	return r->err;
}

void snapfile_close(struct snapfile_reader *r)
{
	if (r == NULL)
		return;
	free(r->config);
	free(r);
}

int snapfile_verify_all(int fd, char *err, size_t errlen)
{
	struct snapfile_reader *r = snapfile_open(fd, err, errlen);
	char name[SNAPFILE_NAME_LEN];
	uint8_t extra;
	int rc;

	if (r == NULL)
		return -1;
	while ((rc = snapfile_next(r, name)) == 1)
		;
	if (rc == 0) {
		ssize_t n = read(fd, &extra, 1);

		if (n != 0)
			rc = rfail(r, "state file: %s after the trailer",
			           n > 0 ? "bytes" : "read error");
		else if (lseek(fd, 0, SEEK_SET) < 0)
			rc = rfail(r, "state file: seek: %s", strerror(errno));
	}
	if (rc < 0)
		set_err(err, errlen, "%s", r->err);
	snapfile_close(r);
	return rc < 0 ? -1 : 0;
}
