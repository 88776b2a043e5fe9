/* Unit tests for the I/O bus (src/core/iobus.h). */
#include "unit.h"

#include "core/iobus.h"

/* A device that records its last access and answers reads with a value
 * derived from the offset. */
struct fake_dev {
	int id;
	unsigned calls;
	uint64_t offset;
	unsigned size;
	bool is_write;
	uint64_t written;
	int rc;           /* what the handler returns */
	bool set_on_fail; /* store a read value even when failing */
};

static int fake_handler(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct fake_dev *d = arg;

	d->calls++;
	d->offset = offset;
	d->size = size;
	d->is_write = is_write;
	if (is_write)
		d->written = *val;
	else if (d->rc == 0 || d->set_on_fail)
		*val = ((uint64_t)d->id << 32) | offset;
	return d->rc;
}

static int bus_setup(void **state)
{
	struct iobus *bus = malloc(sizeof(*bus));

	if (bus == NULL)
		return -1;
	iobus_init(bus, "port");
	*state = bus;
	return 0;
}

static int bus_teardown(void **state)
{
	iobus_destroy(*state);
	free(*state);
	return 0;
}

static void test_init(void **state)
{
	struct iobus *bus = *state;
	uint64_t v = 0;

	assert_string_equal(bus->kind, "port");
	assert_int_equal(bus->nranges, 0);
	assert_false(iobus_access(bus, 0x3f8, 1, false, &v));
	assert_int_equal(iobus_unregister(bus, 0x3f8), -1);
}

static void test_register_overlap(void **state)
{
	struct iobus *bus = *state;
	struct fake_dev d = {.id = 1};

	assert_int_equal(iobus_register(bus, 0x3f8, 8, fake_handler, &d, "com1"), 0);
	/* Every kind of overlap. */
	assert_int_equal(iobus_register(bus, 0x3f8, 8, fake_handler, &d, "same"), -1);
	assert_int_equal(iobus_register(bus, 0x3f8, 1, fake_handler, &d, "first"), -1);
	assert_int_equal(iobus_register(bus, 0x3ff, 1, fake_handler, &d, "last"), -1);
	assert_int_equal(iobus_register(bus, 0x3fa, 2, fake_handler, &d, "inside"), -1);
	assert_int_equal(iobus_register(bus, 0x3f0, 9, fake_handler, &d, "tail"), -1);
	assert_int_equal(iobus_register(bus, 0x3ff, 4, fake_handler, &d, "head"), -1);
	assert_int_equal(iobus_register(bus, 0x300, 0x200, fake_handler, &d, "around"), -1);
	assert_int_equal(iobus_register(bus, 0, UINT64_MAX, fake_handler, &d, "all"), -1);
	assert_int_equal(bus->nranges, 1);
	/* Adjacent on both sides. */
	assert_int_equal(iobus_register(bus, 0x3f0, 8, fake_handler, &d, "below"), 0);
	assert_int_equal(iobus_register(bus, 0x400, 8, fake_handler, &d, "above"), 0);
	assert_int_equal(bus->nranges, 3);
	/* Still sorted. */
	for (size_t i = 1; i < bus->nranges; i++)
		assert_true(bus->ranges[i - 1].base + bus->ranges[i - 1].len <=
		            bus->ranges[i].base);
}

static void test_register_invalid(void **state)
{
	struct iobus *bus = *state;
	struct fake_dev d = {.id = 1};
	uint64_t v;

	assert_int_equal(iobus_register(bus, 0x10, 0, fake_handler, &d, "empty"), -1);
	assert_int_equal(iobus_register(bus, UINT64_MAX, 2, fake_handler, &d, "wraps"), -1);
	assert_int_equal(iobus_register(bus, UINT64_MAX - 1, UINT64_MAX, fake_handler, &d, "w"),
	                 -1);
	assert_int_equal(iobus_register(bus, 0x10, 4, NULL, &d, "nohandler"), -1);
	assert_int_equal(bus->nranges, 0);
	/* The very top of the address space is usable. */
	assert_int_equal(iobus_register(bus, UINT64_MAX, 1, fake_handler, &d, "top"), 0);
	assert_int_equal(iobus_register(bus, UINT64_MAX - 0xf, 0x10, fake_handler, &d, "top2"), -1);
	assert_true(iobus_access(bus, UINT64_MAX, 1, false, &v));
	assert_int_equal(d.offset, 0);
	/* And address 0. */
	assert_int_equal(iobus_register(bus, 0, 1, fake_handler, &d, "zero"), 0);
	assert_true(iobus_access(bus, 0, 1, false, &v));
	assert_false(iobus_access(bus, 1, 1, false, &v));
}

static void test_dispatch(void **state)
{
	struct iobus *bus = *state;
	struct fake_dev com1 = {.id = 1}, com2 = {.id = 2};
	uint64_t v;

	assert_int_equal(iobus_register(bus, 0x3f8, 8, fake_handler, &com1, "com1"), 0);
	assert_int_equal(iobus_register(bus, 0x2f8, 8, fake_handler, &com2, "com2"), 0);

	/* Reads: offset relative to the base; the handler's value comes back. */
	assert_true(iobus_access(bus, 0x3fd, 1, false, &v));
	assert_int_equal(com1.calls, 1);
	assert_int_equal(com1.offset, 5);
	assert_int_equal(com1.size, 1);
	assert_false(com1.is_write);
	assert_int_equal(v, (1ull << 32) | 5);
	assert_int_equal(com2.calls, 0);

	/* Writes carry the value. */
	v = 0x41;
	assert_true(iobus_access(bus, 0x2f8, 1, true, &v));
	assert_int_equal(com2.calls, 1);
	assert_int_equal(com2.offset, 0);
	assert_true(com2.is_write);
	assert_int_equal(com2.written, 0x41);
	assert_int_equal(v, 0x41); /* a write leaves *val alone */

	/* First and last byte of a range. */
	assert_true(iobus_access(bus, 0x3f8, 2, false, &v));
	assert_int_equal(com1.offset, 0);
	assert_int_equal(com1.size, 2);
	assert_true(iobus_access(bus, 0x3ff, 4, false, &v));
	assert_int_equal(com1.offset, 7);
	assert_int_equal(com1.size, 4);

	/* A read starts from zero, not from the caller's garbage. */
	v = 0xdeadbeefcafef00dull;
	assert_true(iobus_access(bus, 0x3f9, 1, false, &v));
	assert_int_equal(v, (1ull << 32) | 1);
	assert_int_equal(bus->unhandled, 0);
}

static void test_unclaimed(void **state)
{
	struct iobus *bus = *state;
	struct fake_dev d = {.id = 1};
	uint64_t v;

	assert_int_equal(iobus_register(bus, 0x3f8, 8, fake_handler, &d, "com1"), 0);
	v = 0;
	assert_false(iobus_access(bus, 0x3f7, 1, false, &v));
	assert_int_equal(v, UINT64_MAX); /* all ones */
	v = 0;
	assert_false(iobus_access(bus, 0x400, 4, false, &v));
	assert_int_equal(v, UINT64_MAX);
	v = 0x1234;
	assert_false(iobus_access(bus, 0x80, 1, true, &v)); /* dropped */
	assert_int_equal(v, 0x1234);
	assert_false(iobus_access(bus, UINT64_MAX, 8, false, &v));
	assert_int_equal(d.calls, 0);
	assert_int_equal(bus->unhandled, 4);
}

/*
 * iobus.h: "a non-zero return is logged and the access otherwise treated as
 * done (reads give all ones)".
 *
 * Regression: iobus_access() sets *val = 0 before calling the handler and keeps
 * whatever the handler left there when it fails, so a failed read gives 0
 * (e.g. the RTC's or a UART's handler refusing a 2-byte access) instead of
 * all ones.  Fix: in iobus_access(), when the handler returns non-zero on a
 * read, set *val = ~0ull.
 */
static void test_handler_error_reads_all_ones(void **state)
{
	struct iobus *bus = *state;
	struct fake_dev d = {.id = 1, .rc = -1};
	uint64_t v;

	assert_int_equal(iobus_register(bus, 0x70, 2, fake_handler, &d, "failing"), 0);
	/* Still claimed: the caller must not treat it as unhandled. */
	v = 0x5555;
	assert_true(iobus_access(bus, 0x71, 1, true, &v));
	assert_int_equal(d.calls, 1);
	assert_int_equal(bus->unhandled, 0);

	v = 0;
	assert_true(iobus_access(bus, 0x70, 2, false, &v));
	assert_int_equal(d.calls, 2);
	assert_int_equal(v & 0xffff, 0xffff);
	/* Even when the failing handler scribbled a value. */
	d.set_on_fail = true;
	v = 0;
	assert_true(iobus_access(bus, 0x70, 1, false, &v));
	assert_int_equal(v & 0xff, 0xff);
}

static void test_unregister(void **state)
{
	struct iobus *bus = *state;
	struct fake_dev a = {.id = 1}, b = {.id = 2};
	uint64_t v;

	assert_int_equal(iobus_register(bus, 0x60, 1, fake_handler, &a, "a"), 0);
	assert_int_equal(iobus_register(bus, 0x64, 1, fake_handler, &b, "b"), 0);
	/* Only the base address names a range. */
	assert_int_equal(iobus_unregister(bus, 0x61), -1);
	assert_int_equal(iobus_unregister(bus, 0x63), -1);
	assert_int_equal(iobus_unregister(bus, 0x65), -1);
	assert_int_equal(bus->nranges, 2);
	assert_int_equal(iobus_unregister(bus, 0x60), 0);
	assert_int_equal(iobus_unregister(bus, 0x60), -1);
	assert_false(iobus_access(bus, 0x60, 1, false, &v));
	assert_true(iobus_access(bus, 0x64, 1, false, &v));
	assert_int_equal(v, 2ull << 32);
	/* The space can be claimed again, by someone else. */
	assert_int_equal(iobus_register(bus, 0x5f, 4, fake_handler, &b, "b2"), 0);
	assert_true(iobus_access(bus, 0x60, 1, false, &v));
	assert_int_equal(b.offset, 1);
	assert_int_equal(iobus_unregister(bus, 0x64), 0);
	assert_int_equal(iobus_unregister(bus, 0x5f), 0);
	assert_int_equal(bus->nranges, 0);
}

/* Many ranges in scrambled order: the table grows and stays searchable. */
static void test_many_ranges(void **state)
{
	struct iobus *bus = *state;
	static struct fake_dev devs[300];
	uint64_t v;
	const unsigned n = ARRAY_LEN(devs);

	for (unsigned i = 0; i < n; i++) {
		unsigned k =
		    (i * 7919u) % n; /* a permutation: 7919 is prime, n is not a multiple */

		devs[k] = (struct fake_dev){.id = (int)k};
		assert_int_equal(iobus_register(bus, 0x1000 + 0x10 * (uint64_t)k, 0x8, fake_handler,
		                                &devs[k], "dev"),
		                 0);
	}
	assert_int_equal(bus->nranges, n);
	for (unsigned k = 0; k < n; k++) {
		assert_true(iobus_access(bus, 0x1000 + 0x10 * (uint64_t)k + 3, 1, false, &v));
		assert_int_equal(v, ((uint64_t)k << 32) | 3);
		/* The gaps between ranges are unclaimed. */
		assert_false(iobus_access(bus, 0x1000 + 0x10 * (uint64_t)k + 8, 1, false, &v));
	}
	/* Remove every other one. */
	for (unsigned k = 0; k < n; k += 2)
		assert_int_equal(iobus_unregister(bus, 0x1000 + 0x10 * (uint64_t)k), 0);
	for (unsigned k = 0; k < n; k++)
		assert_int_equal(iobus_access(bus, 0x1000 + 0x10 * (uint64_t)k, 1, false, &v),
		                 k % 2 == 1);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, bus_setup, bus_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_init),       T(test_register_overlap), T(test_register_invalid),
	    T(test_dispatch),   T(test_unclaimed),        T(test_handler_error_reads_all_ones),
	    T(test_unregister), T(test_many_ranges),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
