/*
 * A running guest as its khyve tells it, through the API socket in the
 * guest's folder (DIR/khyve.sock, passed by khyvecmd.c; docs/api.md):
 * the state `vm list` shows (Running, Paused) and the counters of
 * `vm info`.  Every call is bounded by a short timeout, so a khyve that
 * does not answer only costs that much; its absence changes nothing.
 */
#ifndef KHYVE_VM_LIVE_H
#define KHYVE_VM_LIVE_H

#include <stddef.h>

#include "vm/vm.h"

/* The API socket's name in the guest's folder. */
#define VM_API_SOCKET "khyve.sock"

struct cJSON;

/*
 * GET /api/v1/`endpoint` ("vm.info") of the guest `g` through its socket,
 * the whole exchange within `timeout_ms`: the reply's JSON (the caller
 * frees it with cJSON_Delete), or NULL when the socket does not answer in
 * time or the answer is not a 200 with JSON.
 */
struct cJSON *vm_live_get(const struct vm_guest *g, const char *endpoint, long timeout_ms);

/*
 * vm.info's "state" of the running guest `g` ("Running", "Paused",
 * "Starting") into `out` (`len` bytes).  0, or -1 when the socket does not
 * answer in time or the answer has no state (`out` is then "").
 */
int vm_live_state(const struct vm_guest *g, char *out, size_t len);

/*
 * Print vm info's "counters" section from vm.counters (per vCPU exits,
 * per disk reads/writes and bytes, per NIC packets and bytes), indented
 * as vm info's sections; prints nothing when the socket does not answer.
 */
void vm_live_show_counters(const struct vm_guest *g);

/*
 * Print vm info's "memory" section from vm.balloon (the guest's RAM, the
 * balloon's target, what the guest keeps, the free memory it reported,
 * and the memory figures it reports, in MiB); nothing when the guest has
 * no virtio-balloon or the socket does not answer.
 */
void vm_live_show_memory(const struct vm_guest *g);

#endif
