/*
 * Unit test for the VNC server's counters (src/backend/vnc.h, source
 * "vnc"): clients connected now and connections since the start, as
 * clients come and go on a UNIX socket.
 */
#include "unit.h"

#include <sys/socket.h>
#include <sys/un.h>

#include "backend/vnc.h"
#include "unit_counters.h"

static uint64_t vnc_counter(const char *key)
{
	struct unit_counters c;

	assert_true(unit_counters_read(COUNTER_VNC, "vnc", &c));
	assert_false(c.duplicate);
	return unit_counter(&c, key);
}

/* Wait (up to 5 s) for `key` to read `want`. */
static bool wait_for(const char *key, uint64_t want)
{
	for (int i = 0; i < 500; i++) {
		if (vnc_counter(key) == want)
			return true;
		usleep(10000);
	}
	return false;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void test_clients_and_connections(void **state)
{
	char *dir = unit_mkdtemp(), path[256], err[256] = "";
	struct vnc_config c = {.width = 64, .height = 48, .name = "unit"};
	struct vnc_server *s;
	int a, b;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/vnc.sock", dir);
	c.unix_path = path;
	counters_reset();
	s = vnc_start(&c, err, sizeof(err));
	assert_non_null(s);
	assert_int_equal(vnc_register_counters(s), 0);
	assert_int_equal(vnc_register_counters(s), -1); /* one "vnc" */
	assert_int_equal(vnc_counter("clients"), 0);
	assert_int_equal(vnc_counter("connections_total"), 0);
	assert_int_equal(vnc_counter("bytes_sent_total"), 0);
	a = connect_to(path);
	assert_true(wait_for("clients", 1));
	assert_int_equal(vnc_counter("connections_total"), 1);
	b = connect_to(path);
	assert_true(wait_for("clients", 2));
	assert_int_equal(vnc_counter("connections_total"), 2);
	close(a);
	assert_true(wait_for("clients", 1));
	close(b);
	assert_true(wait_for("clients", 0));
	assert_int_equal(vnc_counter("connections_total"), 2);
	/* Nobody reads the registry past this point. */
	counters_reset();
	vnc_stop(s);
	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_clients_and_connections),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
