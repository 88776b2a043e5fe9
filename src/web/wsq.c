/* The bounded byte queue of the WebSocket relays (see wsq.h). */
#include "web/wsq.h"

#include <stdlib.h>
#include <string.h>

int wsq_init(struct wsq *q, size_t cap)
{
	*q = (struct wsq){0};
	if (cap == 0)
		return -1;
	q->buf = malloc(cap);
	if (!q->buf)
		return -1;
	q->cap = cap;
	return 0;
}

void wsq_free(struct wsq *q)
{
	free(q->buf);
	*q = (struct wsq){0};
}

size_t wsq_used(const struct wsq *q)
{
	return q->len;
}

size_t wsq_space(const struct wsq *q)
{
	return q->cap - q->len;
}

bool wsq_empty(const struct wsq *q)
{
	return q->len == 0;
}

bool wsq_full(const struct wsq *q)
{
	return q->len == q->cap;
}

/* Index of the first free byte (where the next append goes). */
static size_t tail_index(const struct wsq *q)
{
	size_t t = q->head + q->len;

	return t >= q->cap ? t - q->cap : t;
}

int wsq_append(struct wsq *q, const void *data, size_t len)
{
	const unsigned char *src = data;

	if (len > wsq_space(q))
		return -1;
	while (len) {
		unsigned char *dst;
		size_t n = wsq_reserve(q, &dst);

		if (n > len)
			n = len;
		memcpy(dst, src, n);
		wsq_commit(q, n);
		src += n;
		len -= n;
	}
	return 0;
}

size_t wsq_peek(const struct wsq *q, const unsigned char **p)
{
	size_t n = q->cap - q->head;

	if (q->len == 0) {
		*p = NULL;
		return 0;
	}
	*p = q->buf + q->head;
	return n < q->len ? n : q->len;
}

void wsq_consume(struct wsq *q, size_t n)
{
	if (n > q->len)
		n = q->len;
	q->head += n;
	if (q->head >= q->cap)
		q->head -= q->cap;
	q->len -= n;
	if (q->len == 0)
		q->head = 0; /* keep the free room in one piece */
}

size_t wsq_take(struct wsq *q, void *out, size_t max)
{
	unsigned char *dst = out;
	size_t done = 0;

	while (done < max && q->len) {
		const unsigned char *src;
		size_t n = wsq_peek(q, &src);

		if (n > max - done)
			n = max - done;
		memcpy(dst + done, src, n);
		wsq_consume(q, n);
		done += n;
	}
	return done;
}

size_t wsq_reserve(struct wsq *q, unsigned char **p)
{
	size_t t, n;

	if (wsq_full(q) || !q->buf) {
		*p = NULL;
		return 0;
	}
	t = tail_index(q);
	/* Free room runs from the tail to the end of the buffer, or, when
	 * the queued bytes wrap, from the tail up to head. */
	n = t >= q->head ? q->cap - t : q->head - t;
	*p = q->buf + t;
	return n;
}

void wsq_commit(struct wsq *q, size_t n)
{
	unsigned char *p;
	size_t room = wsq_reserve(q, &p);

	q->len += n < room ? n : room;
}

bool wsq_can_accept(const struct wsq *q, size_t chunk)
{
	return wsq_space(q) >= chunk;
}
