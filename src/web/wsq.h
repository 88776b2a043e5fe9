/*
 * A bounded byte queue (a ring) for the WebSocket relays of `vm web`
 * (src/web/ws.c): one per direction of a console session, so a side that
 * does not read only fills its queue, and the relay stops reading the
 * other side (lws_rx_flow_control) instead of buffering without end.
 *
 * Pure functions, no libwebsockets: tests/unit/test_web_wsq.c.
 */
#ifndef KHYVE_WEB_WSQ_H
#define KHYVE_WEB_WSQ_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes each way of a console session (web13.md "WebSockets"). */
#define WSQ_CAPACITY (256u * 1024u)

/* Bytes in the ring buf[0..cap): `len` of them from `head` on, wrapping. */
struct wsq {
	unsigned char *buf; /* owned; NULL before wsq_init / after wsq_free */
	size_t cap;         /* bytes */
	size_t head;        /* index of the oldest byte, < cap */
	size_t len;         /* bytes queued, <= cap */
};

/* An empty queue of `cap` bytes (1 or more); 0, or -1 (ENOMEM, or cap 0). */
int wsq_init(struct wsq *q, size_t cap);
/* Frees the buffer; the queue reads as empty with no room.  Safe twice. */
void wsq_free(struct wsq *q);

size_t wsq_used(const struct wsq *q);  /* bytes queued */
size_t wsq_space(const struct wsq *q); /* bytes that still fit */
bool wsq_empty(const struct wsq *q);
bool wsq_full(const struct wsq *q);

/* Append all `len` bytes or none: 0, or -1 when they do not fit. */
int wsq_append(struct wsq *q, const void *data, size_t len);

/* The oldest queued bytes that lie in one piece: their count, and their
 * address in *p (NULL when empty).  Consume what was used with wsq_consume. */
size_t wsq_peek(const struct wsq *q, const unsigned char **p);
/* Drop the `n` oldest bytes (at most what is queued). */
void wsq_consume(struct wsq *q, size_t n);
/* Copy up to `max` of the oldest bytes to `out` and drop them; the count. */
size_t wsq_take(struct wsq *q, void *out, size_t max);

/* The free room that lies in one piece after the newest byte, for reading
 * straight into the queue: its size, and its address in *p (NULL when full).
 * Then wsq_commit the bytes actually written there. */
size_t wsq_reserve(struct wsq *q, unsigned char **p);
/* Count `n` bytes written at wsq_reserve's address as queued (at most the
 * size it gave). */
void wsq_commit(struct wsq *q, size_t n);

/* Whether the side feeding `q` may be read: at least `chunk` bytes of room,
 * the most one read of that side delivers at once. */
bool wsq_can_accept(const struct wsq *q, size_t chunk);

#endif
