/*
 * An I/O bus: a table of address ranges, each with one handler, as bhyve's
 * register_inout() (port I/O) and register_mem() (MMIO).  khyve has two
 * instances per VM, the port-I/O bus (16-bit port numbers) and the MMIO bus
 * (guest-physical addresses); vCPU exits are dispatched through them.
 *
 * Registration may happen while vCPUs run (PCI BARs move when the guest
 * reprograms them), so lookups take a read lock.
 */
#ifndef KHYVE_IOBUS_H
#define KHYVE_IOBUS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Handle one access of `size` bytes (1, 2, 4 or 8) at `offset` bytes from
 * the start of the registered range.  On a read, store the value in *val
 * (low `size` bytes); on a write, *val holds it.  Return 0; a non-zero return
 * is logged and the access otherwise treated as done (reads give all ones).
 */
typedef int (*iobus_handler_t)(void *arg, uint64_t offset, unsigned size, bool is_write,
                               uint64_t *val);

struct iobus_range {
	uint64_t base;
	uint64_t len;
	iobus_handler_t handler;
	void *arg;
	const char *name; /* for logs; not copied, must outlive the range */
};

struct iobus {
	const char *kind; /* "port" or "mmio", for logs */
	pthread_rwlock_t lock;
	struct iobus_range *ranges; /* sorted by base, never overlapping */
	size_t nranges;
	size_t cap;
	uint64_t unhandled; /* count of accesses nobody claimed */
};

void iobus_init(struct iobus *bus, const char *kind);
void iobus_destroy(struct iobus *bus);

/* Claim [base, base+len).  Returns 0, or -1 if len is 0, the range wraps,
 * or it overlaps a registered range. */
int iobus_register(struct iobus *bus, uint64_t base, uint64_t len, iobus_handler_t handler,
                   void *arg, const char *name);

/* Release the range starting at `base`; -1 when none starts there. */
int iobus_unregister(struct iobus *bus, uint64_t base);

/*
 * Dispatch one access.  Returns true when a handler claimed it; false when
 * the address is unclaimed, in which case reads yield all ones and writes are
 * dropped (the caller decides whether to log).
 */
bool iobus_access(struct iobus *bus, uint64_t addr, unsigned size, bool is_write, uint64_t *val);

#endif
