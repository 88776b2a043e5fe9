/*
 * Unit tests for the LPC devices' saved-state participants as the machine
 * sees them (core/snapshot.h): lpc_init_devices() on a detached machine
 * registers one "lpc.NAME" section per device it creates, and the devices
 * without a test file of their own (pc-testdev, debugport, debugcon) round
 * trip through them.  The register models' round trips are in test_uart,
 * test_rtc, test_pm, test_atkbdc, test_fw_cfg and test_pflash.
 */
#include "unit.h"

#include "core/machine.h"
#include "core/mevent.h"
#include "core/snapshot.h"
#include "dev/lpc.h"
#include "lib/config.h"

#define IOMEM_GPA 0xff000000ull

/*
 * The machines live in static storage: LPC devices have no teardown (a
 * process builds one machine and exits), so what they allocate stays
 * reachable from here rather than counting as a leak.
 */
static struct machine machines[8];
static unsigned nmachines;

struct fixture {
	char *dir;
	struct machine *m;
};

/* The next unused machine (each test uses at most two). */
static struct machine *new_machine(void)
{
	return nmachines < ARRAY_LEN(machines) ? &machines[nmachines++] : NULL;
}

/* A machine with the built-in devices, pc-testdev, the firmware debug
 * console, and with `com3` COM3 on a pty (a process has at most four pty
 * links, so only the tests of the serial port ask for it). */
static int init_machine(struct fixture *f, struct machine *m, bool com3)
{
	char log[512], pty[512];
	char err[256] = "";

	snprintf(log, sizeof(log), "%s/debugcon.log", f->dir);
	snprintf(pty, sizeof(pty), "pty=%s/com3-%u", f->dir, nmachines);
	config_reset();
	if (config_set("lpc.pc-testdev", "true") < 0 || config_set("lpc.debugcon.path", log) < 0)
		return -1;
	if (com3 &&
	    (config_set("lpc.com3.path", pty) < 0 || config_set("lpc.com3.escape", "none") < 0))
		return -1;
	if (m == NULL || machine_init_detached(m, "unit", NULL, 0, 0) < 0)
		return -1;
	m->loop = mevent_loop_create(); /* the serial ports' back ends watch it */
	if (m->loop == NULL)
		return -1;
	if (lpc_init_devices(m, err, sizeof(err)) < 0) {
		fprintf(stderr, "lpc_init_devices: %s\n", err);
		return -1;
	}
	return 0;
}

static int setup_with(void **state, bool com3)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	f->dir = unit_mkdtemp();
	*state = f;
	f->m = new_machine();
	return f->dir != NULL ? init_machine(f, f->m, com3) : -1;
}

static int setup(void **state)
{
	return setup_with(state, false);
}

static int setup_com3(void **state)
{
	return setup_with(state, true);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	config_reset();
	unit_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void save_section(struct machine *m, const char *name, struct sbuf *b)
{
	const struct state_participant *p = machine_state_find(m, name);
	char err[128] = "";

	assert_non_null(p);
	assert_non_null(p->ops->save);
	*b = (struct sbuf){0};
	assert_int_equal(p->ops->save(p->arg, b, err, sizeof(err)), 0);
	assert_false(b->failed);
	assert_true(b->len >= 2);
	assert_int_equal(unit_le(b->data, 2), 1); /* every section starts with version 1 */
}

static int restore_section(struct machine *m, const char *name, const uint8_t *data, size_t len,
                           char *err, size_t errlen)
{
	const struct state_participant *p = machine_state_find(m, name);
	struct sbuf_reader r;

	assert_non_null(p);
	sbuf_reader_init(&r, data, len);
	if (p->ops->restore(p->arg, &r, err, errlen) < 0)
		return -1;
	return sbuf_reader_done(&r, name, err, errlen);
}

static void test_every_device_registers(void **state)
{
	struct fixture *f = *state;
	static const char *const names[] = {"lpc.com3",    "lpc.rtc",        "lpc.pm",
	                                    "lpc.atkbdc",  "lpc.pc-testdev", "lpc.debugport",
	                                    "lpc.debugcon"};

	for (size_t i = 0; i < ARRAY_LEN(names); i++) {
		const struct state_participant *p = machine_state_find(f->m, names[i]);
		struct sbuf b;

		if (p == NULL)
			fail_msg("no participant %s", names[i]);
		assert_non_null(p->ops->restore);
		save_section(f->m, names[i], &b);
		sbuf_free(&b);
	}
	/* Not configured: no section (a serial port, fw_cfg without a ROM). */
	assert_null(machine_state_find(f->m, "lpc.com1"));
	assert_null(machine_state_find(f->m, "lpc.fw_cfg"));
	assert_null(machine_state_find(f->m, "lpc.pflash"));
}

static uint64_t iomem_read(struct machine *m, uint64_t off)
{
	uint64_t v = 0;

	assert_true(iobus_access(&m->mmio, IOMEM_GPA + off, 8, false, &v));
	return v;
}

static void iomem_write(struct machine *m, uint64_t off, uint64_t v)
{
	assert_true(iobus_access(&m->mmio, IOMEM_GPA + off, 8, true, &v));
}

static void test_testdev_round_trip(void **state)
{
	struct fixture *f = *state;
	struct machine *m2 = new_machine();
	struct sbuf b;
	uint8_t *bad;
	char err[128] = "";

	iomem_write(f->m, 0, 0x1122334455667788ull);
	iomem_write(f->m, 0xfff8, 0xcafef00dull);
	save_section(f->m, "lpc.pc-testdev", &b);
	assert_int_equal(b.len, 2 + 4 + 0x10000);
	/* A second machine, as a new process builds it from the same options. */
	assert_int_equal(init_machine(f, m2, false), 0);
	assert_int_equal(iomem_read(m2, 0), 0);
	assert_int_equal(restore_section(m2, "lpc.pc-testdev", b.data, b.len, err, sizeof(err)), 0);
	assert_int_equal(iomem_read(m2, 0), 0x1122334455667788ull);
	assert_int_equal(iomem_read(m2, 0xfff8), 0xcafef00dull);
	/* Hostile: short of the scratch memory, another size, another version;
	 * none of them touches it. */
	iomem_write(m2, 0, 42);
	assert_int_equal(restore_section(m2, "lpc.pc-testdev", b.data, b.len - 1, err, sizeof(err)),
	                 -1);
	assert_contains(err, "truncated");
	bad = malloc(b.len);
	assert_non_null(bad);
	memcpy(bad, b.data, b.len);
	unit_put_le(bad + 2, 0x1000, 4);
	assert_int_equal(restore_section(m2, "lpc.pc-testdev", bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "scratch memory of 4096 bytes");
	memcpy(bad, b.data, b.len);
	bad[0] = 2;
	assert_int_equal(restore_section(m2, "lpc.pc-testdev", bad, b.len, err, sizeof(err)), -1);
	assert_int_equal(iomem_read(m2, 0), 42);
	free(bad);
	sbuf_free(&b);
}

static uint8_t port_read(struct machine *m, uint16_t port)
{
	uint64_t v = 0;

	assert_true(iobus_access(&m->pio, port, 1, false, &v));
	return (uint8_t)v;
}

static void port_write(struct machine *m, uint16_t port, uint8_t v)
{
	uint64_t val = v;

	assert_true(iobus_access(&m->pio, port, 1, true, &val));
}

/* COM3 at 0x3e8 and the RTC through the machine's port bus: each section
 * restores into the device of the same name in a second machine only. */
static void test_ports_round_trip(void **state)
{
	struct fixture *f = *state;
	struct machine *m2 = new_machine();
	struct sbuf com3, rtc;
	char err[128] = "";

	port_write(f->m, 0x3e8 + 7, 0x5a); /* COM3's scratch register */
	port_write(f->m, 0x3e8 + 3, 0x1b); /* LCR */
	port_write(f->m, 0x70, 0x40);
	port_write(f->m, 0x71, 0x99); /* CMOS NVRAM byte 0x40 */
	save_section(f->m, "lpc.com3", &com3);
	save_section(f->m, "lpc.rtc", &rtc);
	assert_int_equal(init_machine(f, m2, true), 0);
	assert_int_equal(restore_section(m2, "lpc.com3", com3.data, com3.len, err, sizeof(err)), 0);
	assert_int_equal(restore_section(m2, "lpc.rtc", rtc.data, rtc.len, err, sizeof(err)), 0);
	assert_int_equal(port_read(m2, 0x3e8 + 7), 0x5a);
	assert_int_equal(port_read(m2, 0x3e8 + 3), 0x1b);
	assert_int_equal(port_read(m2, 0x70), 0x40);
	assert_int_equal(port_read(m2, 0x71), 0x99);
	/* Another device's section is refused by this one's checks. */
	assert_int_equal(restore_section(m2, "lpc.com3", rtc.data, rtc.len, err, sizeof(err)), -1);
	sbuf_free(&com3);
	sbuf_free(&rtc);
}

/* Version-only sections: accepted as saved, refused with any other
 * version, truncated, or with bytes after the version. */
static void test_version_only_sections(void **state)
{
	struct fixture *f = *state;
	static const char *const names[] = {"lpc.debugport", "lpc.debugcon"};

	for (size_t i = 0; i < ARRAY_LEN(names); i++) {
		struct sbuf b;
		uint8_t bad[3] = {2, 0, 0};
		char err[128] = "";

		save_section(f->m, names[i], &b);
		assert_int_equal(b.len, 2);
		assert_int_equal(restore_section(f->m, names[i], b.data, b.len, err, sizeof(err)),
		                 0);
		assert_int_equal(restore_section(f->m, names[i], bad, 2, err, sizeof(err)), -1);
		assert_contains(err, "version 2");
		assert_int_equal(restore_section(f->m, names[i], b.data, 1, err, sizeof(err)), -1);
		bad[0] = 1;
		assert_int_equal(restore_section(f->m, names[i], bad, 3, err, sizeof(err)), -1);
		assert_contains(err, "left over");
		sbuf_free(&b);
	}
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_every_device_registers, setup_com3, teardown),
	    T(test_testdev_round_trip),
	    cmocka_unit_test_setup_teardown(test_ports_round_trip, setup_com3, teardown),
	    T(test_version_only_sections),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
