/* Unit tests for the VNC port choice of the vm manager (src/vm/graphics.h). */
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "vm/graphics.h"

static void test_addr_port(void **state)
{
	(void)state;
	assert_int_equal(vm_vnc_addr_port("127.0.0.1:5900"), 5900);
	assert_int_equal(vm_vnc_addr_port("[::1]:5901"), 5901);
	assert_int_equal(vm_vnc_addr_port("0.0.0.0:65535"), 65535);
	assert_int_equal(vm_vnc_addr_port("127.0.0.1:65536"), 0);
	assert_int_equal(vm_vnc_addr_port("127.0.0.1:"), 0);
	assert_int_equal(vm_vnc_addr_port("127.0.0.1:59x0"), 0);
	assert_int_equal(vm_vnc_addr_port("127.0.0.1"), 0);
	assert_int_equal(vm_vnc_addr_port(""), 0);
}

/* The first free port from 5900, within 200 ports and below 65536. */
static void test_first_free(void **state)
{
	static struct vm_ports taken;
	unsigned port = 0;

	(void)state;
	memset(&taken, 0, sizeof(taken));
	assert_int_equal(vm_port_first_free(&taken, 5900, &port), 0);
	assert_int_equal(port, 5900);
	for (unsigned p = 5900; p < 5905; p++)
		taken.bit[p / 8] |= (unsigned char)(1u << (p % 8));
	assert_true(vm_port_in(&taken, 5904));
	assert_false(vm_port_in(&taken, 5905));
	assert_false(vm_port_in(&taken, 70000));
	assert_int_equal(vm_port_first_free(&taken, 5900, &port), 0);
	assert_int_equal(port, 5905);
	memset(taken.bit, 0xff, sizeof(taken.bit));
	assert_int_equal(vm_port_first_free(&taken, 5900, &port), -1);
	memset(&taken, 0, sizeof(taken));
	assert_int_equal(vm_port_first_free(&taken, 65535, &port), 0);
	assert_int_equal(port, 65535);
	taken.bit[65535 / 8] = 0x80;
	assert_int_equal(vm_port_first_free(&taken, 65535, &port), -1);
}

/* A socket listening here shows in /proc/net/tcp and is taken. */
static void test_listener_taken(void **state)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	static struct vm_ports taken;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)state;
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0 || access("/proc/net/tcp", R_OK)) {
		if (fd >= 0)
			close(fd);
		skip();
	}
	vm_ports_taken(NULL, NULL, &taken);
	assert_true(vm_port_in(&taken, ntohs(a.sin_port)));
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_addr_port),
	    cmocka_unit_test(test_first_free),
	    cmocka_unit_test(test_listener_taken),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
