/*
 * Live counters a running VM shows through its API (run/api.c): each
 * source (a vCPU, a disk, a NIC, the VNC server) registers once during
 * set-up, before the vCPUs start, and is read on demand from the API
 * thread.  A source keeps its own counters (relaxed atomics on its hot
 * path, no lock shared with the reader); its read() copies them out
 * through a struct counter_out the reader provides.
 *
 * Names follow Prometheus' conventions so that the web daemon can turn
 * them into series without a table: monotonic counts end in `_total`
 * (`read_bytes_total`), levels do not (`clients`), and a histogram is one
 * put_hist() of cumulative buckets (`le` upper bounds).
 */
#ifndef KHYVE_LIB_COUNTERS_H
#define KHYVE_LIB_COUNTERS_H

#include <stdint.h>

/* What a source counts for; the API groups sources by it. */
enum counter_kind {
	COUNTER_VCPU, /* name: the vCPU's index, "0", "1", ... */
	COUNTER_DISK, /* name: "disk0", "disk1", ... in PCI slot order */
	COUNTER_NIC,  /* name: "net0", "net1", ... in PCI slot order */
	COUNTER_VNC,  /* name: "vnc" */
	COUNTER_KINDS
};

/* The JSON group name of a kind: "vcpu", "disk", "nic", "vnc". */
const char *counter_kind_name(enum counter_kind k);

/*
 * Where a source's read() puts its values; the reader (the API) fills in
 * the callbacks.  `key` is a static string in snake_case.  put_hist():
 * `n` buckets, `le[i]` the inclusive upper bound of bucket i in the unit
 * the key names (e.g. "latency_us"), the last bound UINT64_MAX for +Inf;
 * `count[i]` cumulative (every observation <= le[i]); `sum` the sum of
 * all observations in that unit.
 */
struct counter_out {
	void (*put)(struct counter_out *o, const char *key, uint64_t value);
	void (*put_hist)(struct counter_out *o, const char *key, unsigned n, const uint64_t *le,
	                 const uint64_t *count, uint64_t sum);
	void *ctx; /* the reader's */
};

/*
 * One source.  The caller owns it and keeps it alive until the process
 * exits (sources are never unregistered: a device lives as long as the
 * VM).  read() runs on the API thread while the VM runs: it must not
 * block, take a lock a vCPU may hold for long, or make system calls other
 * than read/pread on descriptors it opened before the sandbox was armed.
 */
struct counter_source {
	enum counter_kind kind;
	char name[32];
	void (*read)(void *arg, struct counter_out *o);
	void *arg;
	struct counter_source *next; /* the registry's */
};

/* Add `s` (kind, name, read, arg filled in).  Not thread-safe: call
 * during set-up only.  Returns 0, or -1 when the name is already taken
 * within its kind. */
int counters_register(struct counter_source *s);

/* Call `fn` for each source, in registration order.  Safe from any thread
 * once set-up is over (the list no longer changes). */
void counters_foreach(void (*fn)(struct counter_source *s, void *ctx), void *ctx);

/* How many sources of `kind` are registered: the N of the next one's
 * "diskN" / "netN" name (sources register in PCI slot order). */
unsigned counters_count(enum counter_kind kind);

/* Forget every source (unit tests, fuzz targets). */
void counters_reset(void);

/*
 * A latency histogram a hot path can update without a lock: bucket i
 * holds observations up to 2^(i+4) us (16 us, 32 us, ... 32 s), the last
 * one the rest.  Fill with lat_hist_add(); counter_put_lat() hands it to
 * a struct counter_out as cumulative buckets with key `key`.
 */
#define LAT_HIST_BUCKETS 23
struct lat_hist {
	uint64_t count[LAT_HIST_BUCKETS]; /* not cumulative; relaxed atomics */
	uint64_t sum_us;
};
void lat_hist_add(struct lat_hist *h, uint64_t ns);
void counter_put_lat(struct counter_out *o, const char *key, const struct lat_hist *h);

#endif
