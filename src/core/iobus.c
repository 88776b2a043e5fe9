#include "core/iobus.h"

#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

void iobus_init(struct iobus *bus, const char *kind)
{
	memset(bus, 0, sizeof(*bus));
	bus->kind = kind;
	pthread_rwlock_init(&bus->lock, NULL);
}

void iobus_destroy(struct iobus *bus)
{
	free(bus->ranges);
	pthread_rwlock_destroy(&bus->lock);
	memset(bus, 0, sizeof(*bus));
}

/* Index of the first range whose base is greater than `addr`. */
static size_t upper_bound(const struct iobus *bus, uint64_t addr)
{
	size_t lo = 0, hi = bus->nranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (bus->ranges[mid].base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const struct iobus_range *find_range(const struct iobus *bus, uint64_t addr)
{
	size_t i = upper_bound(bus, addr);
	const struct iobus_range *r;

	if (i == 0)
		return NULL;
	r = &bus->ranges[i - 1];
	return addr - r->base < r->len ? r : NULL;
}

static int grow(struct iobus *bus)
{
	size_t cap = bus->cap ? bus->cap * 2 : 32;
	struct iobus_range *nr = realloc(bus->ranges, cap * sizeof(*nr));

	if (nr == NULL)
		return -1;
	bus->ranges = nr;
	bus->cap = cap;
	return 0;
}

int iobus_register(struct iobus *bus, uint64_t base, uint64_t len, iobus_handler_t handler,
                   void *arg, const char *name)
{
	struct iobus_range r = {base, len, handler, arg, name};
	size_t i;
	int rc = -1;

	if (len == 0 || base + len - 1 < base || handler == NULL)
		return -1;
	pthread_rwlock_wrlock(&bus->lock);
	i = upper_bound(bus, base);
	/* Overlap with the range before (which starts at or below base) or
	 * the one after (which starts above base). */
	if (i > 0 && base - bus->ranges[i - 1].base < bus->ranges[i - 1].len)
		goto out;
	if (i < bus->nranges && bus->ranges[i].base <= base + len - 1)
		goto out;
	if (bus->nranges == bus->cap && grow(bus) < 0)
		goto out;
	memmove(&bus->ranges[i + 1], &bus->ranges[i], (bus->nranges - i) * sizeof(r));
	bus->ranges[i] = r;
	bus->nranges++;
	rc = 0;
out:
	pthread_rwlock_unlock(&bus->lock);
	return rc;
}

int iobus_unregister(struct iobus *bus, uint64_t base)
{
	size_t i;
	int rc = -1;

	pthread_rwlock_wrlock(&bus->lock);
	i = upper_bound(bus, base);
	if (i > 0 && bus->ranges[i - 1].base == base) {
		memmove(&bus->ranges[i - 1], &bus->ranges[i],
		        (bus->nranges - i) * sizeof(bus->ranges[0]));
		bus->nranges--;
		rc = 0;
	}
	pthread_rwlock_unlock(&bus->lock);
	return rc;
}

bool iobus_access(struct iobus *bus, uint64_t addr, unsigned size, bool is_write, uint64_t *val)
{
	static struct ratelimit rl = RATELIMIT_INIT;
	const struct iobus_range *r;
	struct iobus_range hit;

	pthread_rwlock_rdlock(&bus->lock);
	r = find_range(bus, addr);
	if (r != NULL)
		hit = *r;
	pthread_rwlock_unlock(&bus->lock);

	if (r == NULL) {
		__atomic_add_fetch(&bus->unhandled, 1, __ATOMIC_RELAXED);
		if (!is_write)
			*val = ~0ull;
		return false;
	}
	if (!is_write)
		*val = 0;
	if (hit.handler(hit.arg, addr - hit.base, size, is_write, val) != 0) {
		if (!is_write)
			*val = ~0ull;
		log_ratelimited(&rl, LOG_WARN, "%s %s failed at 0x%llx (size %u)", hit.name,
		                is_write ? "write" : "read", (unsigned long long)addr, size);
	}
	return true;
}
