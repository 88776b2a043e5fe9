/*
 * Shared plumbing for khyve's libFuzzer targets (tests/fuzz/fuzz_*.c).
 *
 * Each target reads its input as a little program: an opcode byte, then
 * the operands that opcode needs.  Input that runs out reads as zeros, so
 * every byte string is a valid program and a truncated one still runs.
 * The encodings are the targets' own; tests/fuzz/gen-corpus writes seeds
 * in them.
 */
#ifndef KHYVE_FUZZ_H
#define KHYVE_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"

/* Bounds per input, so that one input cannot take seconds or pile up work. */
#define FUZZ_MAX_OPS 256

struct fz {
	const uint8_t *p;
	size_t n;
};

static inline bool fz_more(const struct fz *z)
{
	return z->n > 0;
}

static inline uint64_t fz_le(struct fz *z, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++) {
		if (z->n == 0)
			break;
		v |= (uint64_t)*z->p << (8 * i);
		z->p++;
		z->n--;
	}
	return v;
}

static inline uint8_t fz_u8(struct fz *z)
{
	return (uint8_t)fz_le(z, 1);
}

static inline uint16_t fz_u16(struct fz *z)
{
	return (uint16_t)fz_le(z, 2);
}

static inline uint32_t fz_u32(struct fz *z)
{
	return (uint32_t)fz_le(z, 4);
}

static inline uint64_t fz_u64(struct fz *z)
{
	return fz_le(z, 8);
}

/* Copy `len` input bytes to `dst`, zero-filling what the input lacks. */
static inline void fz_bytes(struct fz *z, void *dst, size_t len)
{
	size_t take = len < z->n ? len : z->n;

	memcpy(dst, z->p, take);
	memset((uint8_t *)dst + take, 0, len - take);
	z->p += take;
	z->n -= take;
}

/* The "write guest RAM" operation every target has: an offset (read with
 * `off_bytes` input bytes, taken modulo `ram_size`), a length of 1-256 and
 * that many bytes, clipped at the end of RAM. */
static inline void fz_ram_write(struct fz *z, uint8_t *ram, size_t ram_size, unsigned off_bytes)
{
	size_t off = (size_t)(fz_le(z, off_bytes) % ram_size);
	size_t len = (size_t)fz_u8(z) + 1;

	if (len > ram_size - off)
		len = ram_size - off;
	fz_bytes(z, ram + off, len);
}

/*
 * A sparse image file of `bytes` in $TMPDIR, unlinked again once the
 * caller's devices have opened it (fuzz_unlink_images()), so that a killed
 * fuzzer leaves nothing behind.  Returns a path that lives until exit.
 */
#define FUZZ_MAX_IMAGES 4
static char *fuzz_images[FUZZ_MAX_IMAGES];

static inline const char *fuzz_image(size_t bytes, uint8_t fill)
{
	const char *base = getenv("TMPDIR");
	char *path;
	uint8_t buf[4096];
	unsigned slot = 0;
	int fd;

	while (slot < FUZZ_MAX_IMAGES && fuzz_images[slot] != NULL)
		slot++;
	if (base == NULL || *base == '\0')
		base = "/tmp";
	if (slot == FUZZ_MAX_IMAGES || asprintf(&path, "%s/khyve-fuzz.XXXXXX", base) < 0)
		abort();
	fd = mkstemp(path);
	if (fd < 0)
		abort();
	/* A non-zero pattern, so that reads of stale or wrong sectors differ
	 * from reads of nothing at all. */
	memset(buf, fill, sizeof(buf));
	for (size_t off = 0; off < bytes; off += sizeof(buf))
		if (pwrite(fd, buf, sizeof(buf), (off_t)off) != (ssize_t)sizeof(buf))
			abort();
	close(fd);
	fuzz_images[slot] = path;
	return path;
}

static inline void fuzz_unlink_images(void)
{
	for (unsigned i = 0; i < FUZZ_MAX_IMAGES && fuzz_images[i] != NULL; i++)
		unlink(fuzz_images[i]);
}

/* Hostile input makes the devices warn on every other op; printing that
 * would cost more than the fuzzing. */
static inline void fuzz_quiet(void)
{
	log_max_level = LOG_ERR;
}

/* For FUZZ_TARGET() when a target needs nothing set up. */
static inline void fuzz_no_setup(void)
{
}

/*
 * The libFuzzer entry point every target has: `setup` (void (void)) runs
 * once, before the first input and after fuzz_quiet(); then each input is
 * handed to the target's `static void fuzz_one(struct fz *z)`, which the
 * target defines after this macro.
 */
#define FUZZ_TARGET(setup)                                                                         \
	static void fuzz_one(struct fz *z);                                                        \
	int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);                              \
	int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)                               \
	{                                                                                          \
		static bool ready;                                                                 \
		struct fz z = {data, size};                                                        \
                                                                                                   \
		if (!ready) {                                                                      \
			fuzz_quiet();                                                              \
			setup();                                                                   \
			ready = true;                                                              \
		}                                                                                  \
		fuzz_one(&z);                                                                      \
		return 0;                                                                          \
	}

/* The op loop: at most FUZZ_MAX_OPS ops, while input is left. */
#define FUZZ_EACH_OP(z) for (unsigned fz_op_n = 0; fz_op_n < FUZZ_MAX_OPS && fz_more(z); fz_op_n++)

#endif
