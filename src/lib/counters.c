/* The registry of live counters (see counters.h). */
#include "lib/counters.h"

#include <stddef.h>
#include <string.h>

static struct counter_source *head, *tail;

const char *counter_kind_name(enum counter_kind k)
{
	static const char *const names[COUNTER_KINDS] = {"vcpu", "disk", "nic", "vnc"};

	return (unsigned)k < COUNTER_KINDS ? names[k] : "other";
}

int counters_register(struct counter_source *s)
{
	for (struct counter_source *p = head; p != NULL; p = p->next)
		if (p->kind == s->kind && strcmp(p->name, s->name) == 0)
			return -1;
	s->next = NULL;
	if (tail != NULL)
		tail->next = s;
	else
		head = s;
	tail = s;
	return 0;
}

void counters_foreach(void (*fn)(struct counter_source *s, void *ctx), void *ctx)
{
	for (struct counter_source *p = head; p != NULL; p = p->next)
		fn(p, ctx);
}

unsigned counters_count(enum counter_kind kind)
{
	unsigned n = 0;

	for (struct counter_source *p = head; p != NULL; p = p->next)
		n += p->kind == kind;
	return n;
}

void counters_reset(void)
{
	head = tail = NULL;
}

void lat_hist_add(struct lat_hist *h, uint64_t ns)
{
	unsigned i = 0;

	/* Bucket i ends at 2^(i+4) us = 16000 << i ns, compared in ns so that
	 * 16.001 us lands above 16 us: the first i with ns <= 16000 << i is
	 * the bit length of (ns - 1) / 16000. */
	if (ns > 16000) {
		i = 64 - (unsigned)__builtin_clzll((ns - 1) / 16000);
		if (i > LAT_HIST_BUCKETS - 1)
			i = LAT_HIST_BUCKETS - 1;
	}
	__atomic_fetch_add(&h->count[i], 1, __ATOMIC_RELAXED);
	/* Rounded, so that many short requests do not sum to too little. */
	__atomic_fetch_add(&h->sum_us, ns / 1000 + (ns % 1000 >= 500), __ATOMIC_RELAXED);
}

void counter_put_lat(struct counter_out *o, const char *key, const struct lat_hist *h)
{
	uint64_t le[LAT_HIST_BUCKETS], count[LAT_HIST_BUCKETS], total = 0;

	for (unsigned i = 0; i < LAT_HIST_BUCKETS; i++) {
		total += __atomic_load_n(&h->count[i], __ATOMIC_RELAXED);
		le[i] = i == LAT_HIST_BUCKETS - 1 ? UINT64_MAX : 16ull << i;
		count[i] = total;
	}
	o->put_hist(o, key, LAT_HIST_BUCKETS, le, count,
	            __atomic_load_n(&h->sum_us, __ATOMIC_RELAXED));
}
