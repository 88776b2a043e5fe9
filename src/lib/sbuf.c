/* Saved-state field encoding; see sbuf.h. */
#include "lib/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grow(struct sbuf *b, size_t n)
{
	size_t want, cap;
	uint8_t *p;

	if (b->failed)
		return false;
	if (n > SBUF_MAX - b->len) {
		b->failed = true;
		return false;
	}
	want = b->len + n;
	if (want <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < want)
		cap = cap > SBUF_MAX / 2 ? SBUF_MAX : cap * 2;
	p = realloc(b->data, cap);
	if (p == NULL) {
		b->failed = true;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

static void put_le(struct sbuf *b, uint64_t v, unsigned bytes)
{
	if (!grow(b, bytes))
		return;
	for (unsigned i = 0; i < bytes; i++)
		b->data[b->len++] = (uint8_t)(v >> (8 * i));
}

void sbuf_put_u8(struct sbuf *b, uint8_t v)
{
	put_le(b, v, 1);
}

void sbuf_put_u16(struct sbuf *b, uint16_t v)
{
	put_le(b, v, 2);
}

void sbuf_put_u32(struct sbuf *b, uint32_t v)
{
	put_le(b, v, 4);
}

void sbuf_put_u64(struct sbuf *b, uint64_t v)
{
	put_le(b, v, 8);
}

void sbuf_put_bool(struct sbuf *b, bool v)
{
	put_le(b, v ? 1 : 0, 1);
}

void sbuf_put_bytes(struct sbuf *b, const void *p, size_t n)
{
	if (n == 0 || !grow(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void sbuf_free(struct sbuf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void sbuf_reader_init(struct sbuf_reader *r, const void *p, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->p = p;
	r->len = p != NULL ? len : 0;
}

void sbuf_fail(struct sbuf_reader *r, const char *fmt, ...)
{
	va_list ap;

	if (r->failed)
		return;
	r->failed = true;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
}

static bool take(struct sbuf_reader *r, size_t n)
{
	if (r->failed)
		return false;
	if (n > r->len - r->off) {
		sbuf_fail(r, "truncated");
		return false;
	}
	return true;
}

static uint64_t get_le(struct sbuf_reader *r, unsigned bytes)
{
	uint64_t v = 0;

	if (!take(r, bytes))
		return 0;
	for (unsigned i = 0; i < bytes; i++)
		v |= (uint64_t)r->p[r->off++] << (8 * i);
	return v;
}

uint8_t sbuf_get_u8(struct sbuf_reader *r)
{
	return (uint8_t)get_le(r, 1);
}

uint16_t sbuf_get_u16(struct sbuf_reader *r)
{
	return (uint16_t)get_le(r, 2);
}

uint32_t sbuf_get_u32(struct sbuf_reader *r)
{
	return (uint32_t)get_le(r, 4);
}

uint64_t sbuf_get_u64(struct sbuf_reader *r)
{
	return get_le(r, 8);
}

bool sbuf_get_bool(struct sbuf_reader *r)
{
	uint8_t v = sbuf_get_u8(r);

	if (v > 1)
		sbuf_fail(r, "a flag holds %u, not 0 or 1", v);
	return v == 1;
}

void sbuf_get_bytes(struct sbuf_reader *r, void *dst, size_t n)
{
	if (n == 0)
		return;
	if (!take(r, n)) {
		memset(dst, 0, n);
		return;
	}
	memcpy(dst, r->p + r->off, n);
	r->off += n;
}

unsigned sbuf_get_version(struct sbuf_reader *r, unsigned max)
{
	unsigned v = sbuf_get_u16(r);

	if (r->failed)
		return 0;
	if (v < 1 || v > max) {
		sbuf_fail(r, "version %u, this khyve reads 1-%u", v, max);
		return 0;
	}
	return v;
}

int sbuf_reader_done(const struct sbuf_reader *r, const char *name, char *err, size_t errlen)
{
	if (!r->failed && r->off == r->len)
		return 0;
	if (r->failed)
		snprintf(err, errlen, "%s: %s", name, r->why);
	else
		snprintf(err, errlen, "%s: %zu bytes left over", name, r->len - r->off);
	return -1;
}
