/*
 * A reader for the counter registry (src/lib/counters.h) in unit tests:
 * unit_counters_read() finds a source by kind and name and records what
 * its read() put, unit_counter() and unit_counter_hist() look a key up.
 */
#ifndef KHYVE_UNIT_COUNTERS_H
#define KHYVE_UNIT_COUNTERS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "lib/counters.h"

#define UNIT_COUNTERS_MAX 128

struct unit_hist {
	const char *key;
	unsigned n;
	uint64_t le[64], count[64], sum;
};

struct unit_counters {
	struct counter_out out;
	unsigned n, nhist;
	const char *key[UNIT_COUNTERS_MAX];
	uint64_t value[UNIT_COUNTERS_MAX];
	struct unit_hist hist[4];
	bool duplicate; /* a key was put twice */
};

static inline bool unit_counters_seen(const struct unit_counters *c, const char *key)
{
	for (unsigned i = 0; i < c->n; i++)
		if (strcmp(c->key[i], key) == 0)
			return true;
	for (unsigned i = 0; i < c->nhist; i++)
		if (strcmp(c->hist[i].key, key) == 0)
			return true;
	return false;
}

static inline void unit_counters_put(struct counter_out *o, const char *key, uint64_t value)
{
	struct unit_counters *c = o->ctx;

	if (unit_counters_seen(c, key))
		c->duplicate = true;
	if (c->n < UNIT_COUNTERS_MAX) {
		c->key[c->n] = key;
		c->value[c->n++] = value;
	}
}

static inline void unit_counters_put_hist(struct counter_out *o, const char *key, unsigned n,
                                          const uint64_t *le, const uint64_t *count, uint64_t sum)
{
	struct unit_counters *c = o->ctx;
	struct unit_hist *h;

	if (unit_counters_seen(c, key))
		c->duplicate = true;
	if (c->nhist == 4 || n > 64)
		return;
	h = &c->hist[c->nhist++];
	h->key = key;
	h->n = n;
	memcpy(h->le, le, n * sizeof(*le));
	memcpy(h->count, count, n * sizeof(*count));
	h->sum = sum;
}

static inline void unit_counters_init(struct unit_counters *c)
{
	memset(c, 0, sizeof(*c));
	c->out.put = unit_counters_put;
	c->out.put_hist = unit_counters_put_hist;
	c->out.ctx = c;
}

struct unit_counters_find {
	enum counter_kind kind;
	const char *name;
	struct counter_source *found;
};

static inline void unit_counters_match(struct counter_source *s, void *ctx)
{
	struct unit_counters_find *f = ctx;

	if (s->kind == f->kind && strcmp(s->name, f->name) == 0)
		f->found = s;
}

/* The source of `kind` named `name`, or NULL. */
static inline struct counter_source *unit_counters_find(enum counter_kind kind, const char *name)
{
	struct unit_counters_find f = {kind, name, NULL};

	counters_foreach(unit_counters_match, &f);
	return f.found;
}

/* Read that source into `c`; false when there is none. */
static inline bool unit_counters_read(enum counter_kind kind, const char *name,
                                      struct unit_counters *c)
{
	struct counter_source *s = unit_counters_find(kind, name);

	unit_counters_init(c);
	if (s == NULL)
		return false;
	s->read(s->arg, &c->out);
	return true;
}

/* The value put under `key`, or UINT64_MAX when it was not put. */
static inline uint64_t unit_counter(const struct unit_counters *c, const char *key)
{
	for (unsigned i = 0; i < c->n; i++)
		if (strcmp(c->key[i], key) == 0)
			return c->value[i];
	return UINT64_MAX;
}

static inline const struct unit_hist *unit_counter_hist(const struct unit_counters *c,
                                                        const char *key)
{
	for (unsigned i = 0; i < c->nhist; i++)
		if (strcmp(c->hist[i].key, key) == 0)
			return &c->hist[i];
	return NULL;
}

#endif
