/*
 * Unit tests for virtio-console (src/dev/virtio_console.c) driven through
 * its BAR: bhyve's NAME=PATH options, the multiport control handshake
 * (DEVICE_READY -> DEVICE_ADD per port, PORT_READY -> PORT_NAME and
 * PORT_OPEN), data both ways between a port's queues and a client of its
 * unix socket, and the socket paths khyve refuses to replace.
 *
 * Regression: the console thread once never re-armed its queues' kicks,
 * so a driver with EVENT_IDX (Linux) kicked only once per queue and spun
 * for ever on its second control message; the driver here kicks as
 * avail_event says (VU_F_EVENT_IDX).
 */
#include "virtio_unit.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "backend/chardev.h"
#include "bus/pci_slot.h"
#include "core/mevent.h"
#include "core/snapshot.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define CTRL_RXQ  2
#define CTRL_TXQ  3
#define MULTIPORT (1u << 1)

struct ctrl {
	uint32_t id;
	uint16_t event;
	uint16_t value;
} __attribute__((packed));

static char *dir;
static char sock0[256], sock1[256];
static pthread_t loop_thread;

static void *loop_main(void *arg)
{
	mevent_loop_run(arg);
	return NULL;
}

static int group_setup(void **state)
{
	struct mevent_loop *loop = mevent_loop_create();
	char *conf, err[256] = "";

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	dir = unit_mkdtemp();
	if (dir == NULL)
		return -1;
	snprintf(sock0, sizeof(sock0), "%s/s0", dir);
	snprintf(sock1, sizeof(sock1), "%s/s1", dir);
	config_reset();
	if (asprintf(&conf, "4,virtio-console,org.test.zero=%s,one=%s", sock0, sock1) < 0)
		return -1;
	if (loop == NULL || pci_parse_slot_option(conf, err, sizeof(err)) < 0 ||
	    vu_setup(loop) < 0) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	free(conf);
	/* The loop runs from now on, as khyve's after pci_init. */
	return pthread_create(&loop_thread, NULL, loop_main, loop) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	vu_wr(VU_CC_STATUS, 1, 0);
	unit_rmtree(dir);
	free(dir);
	return 0;
}

static void test_config_keys(void **state)
{
	(void)state;
	assert_string_equal(config_get("pci.0.4.0.device"), "virtio-console");
	assert_string_equal(config_get("pci.0.4.0.port.0.name"), "org.test.zero");
	assert_string_equal(config_get("pci.0.4.0.port.0.path"), sock0);
	assert_string_equal(config_get("pci.0.4.0.port.1.name"), "one");
	assert_string_equal(config_get("pci.0.4.0.port.1.path"), sock1);
}

static void test_config_refused(void **state)
{
	char err[256] = "";

	(void)state;
	assert_int_equal(pci_parse_slot_option("5,virtio-console,justapath", err, sizeof(err)), -1);
	assert_contains(err, "want NAME=PATH");
	config_unset("pci.0.5");
	assert_int_equal(pci_parse_slot_option("5,virtio-console,a/b=/tmp/x", err, sizeof(err)),
	                 -1);
	assert_contains(err, "bad port 'a/b=/tmp/x'");
	config_unset("pci.0.5");
	assert_int_equal(pci_parse_slot_option("5,virtio-console,a=", err, sizeof(err)), -1);
	assert_contains(err, "bad port 'a='");
	config_unset("pci.0.5");
	assert_int_equal(config_set("pci.0.4.0.port.0.speed", "9600"), 0);
	assert_int_equal(pci_check_config(false, err, sizeof(err)), -1);
	assert_contains(err, "port.0.speed");
	config_unset("pci.0.4.0.port.0.speed");
}

/* A regular file, a directory or a live socket at PATH is never replaced;
 * a socket nobody listens on (a killed khyve's) is. */
static void test_socket_paths(void **state)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char err[256] = "", path[300], spec[320];
	struct chardev *cd;
	struct stat st;
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	snprintf(spec, sizeof(spec), "unix=%s", path);
	assert_null(chardev_open(spec, vu_m.loop, NULL, NULL, err, sizeof(err)));
	assert_contains(err, "a regular file: not replacing it");
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));

	snprintf(spec, sizeof(spec), "unix=%s", sock0); /* the device's, live */
	assert_null(chardev_open(spec, vu_m.loop, NULL, NULL, err, sizeof(err)));
	assert_contains(err, "in use");

	snprintf(path, sizeof(path), "%s/stale", dir);
	assert_true(strlen(path) < sizeof(sun.sun_path));
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd); /* bound, never listened: connect is refused */
	snprintf(spec, sizeof(spec), "unix=%s", path);
	cd = chardev_open(spec, vu_m.loop, NULL, NULL, err, sizeof(err));
	assert_non_null(cd);
	chardev_close(cd);
	assert_int_equal(lstat(path, &st), -1); /* ours, removed on close */
}

/* Post `n` control receive buffers. */
static void post_ctrl_rx(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		vu_chain(CTRL_RXQ, NULL, 0, 64);
}

static void send_ctrl(uint32_t id, uint16_t event, uint16_t value)
{
	struct ctrl c = {id, event, value};

	vu_chain(CTRL_TXQ, &c, sizeof(c), 0);
}

static struct ctrl ctrl_at(unsigned n)
{
	struct ctrl c;

	memcpy(&c, vu_reply(CTRL_RXQ, n), sizeof(c));
	return c;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(strlen(path) < sizeof(sun.sun_path));
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		fail_msg("connect %s: %s", path, strerror(errno));
	return fd;
}

static void test_handshake_and_data(void **state)
{
	char buf[64] = "";
	struct ctrl c;
	unsigned rx;
	int cl;

	(void)state;
	vu_start(MULTIPORT | VU_F_EVENT_IDX, 6);
	assert_int_equal(vu_rd(VU_DEVICE + 4, 4), 2); /* max_nr_ports */
	post_ctrl_rx(8);
	send_ctrl(0, 0 /* DEVICE_READY */, 1);
	assert_true(vu_wait_used(CTRL_RXQ, 2));
	assert_int_equal(ctrl_at(0).event, 1); /* DEVICE_ADD */
	assert_int_equal(ctrl_at(0).id, 0);
	assert_int_equal(ctrl_at(1).id, 1);

	send_ctrl(1, 3 /* PORT_READY */, 1);
	assert_true(vu_wait_used(CTRL_RXQ, 4));
	c = ctrl_at(2);
	assert_int_equal(c.event, 7); /* PORT_NAME, the name after the header */
	assert_int_equal(c.id, 1);
	assert_int_equal(vu_used_len(CTRL_RXQ, 2), sizeof(c) + 3);
	assert_memory_equal(vu_reply(CTRL_RXQ, 2) + sizeof(c), "one", 3);
	c = ctrl_at(3);
	assert_int_equal(c.event, 6); /* PORT_OPEN */
	assert_int_equal(c.value, 1);

	/* Port 1 (queues 4 and 5): the socket's bytes into a receive
	 * buffer, the guest's out to the socket. */
	cl = connect_to(sock1);
	usleep(20000); /* the loop accepts */
	rx = vu_chain(4, NULL, 0, 32);
	assert_int_equal(write(cl, "hello", 5), 5);
	assert_true(vu_wait_used(4, 1));
	assert_int_equal(vu_used_len(4, 0), 5);
	assert_memory_equal(vu_reply(4, rx), "hello", 5);
	vu_chain(5, "world", 5, 0);
	assert_true(vu_wait_used(5, 1));
	assert_int_equal(read(cl, buf, sizeof(buf)), 5);
	assert_memory_equal(buf, "world", 5);

	/* No receive buffer: input waits in the socket, and arrives whole
	 * with the guest's next buffer. */
	assert_int_equal(write(cl, "later", 5), 5);
	usleep(20000);
	assert_int_equal(vu_get16(VU_RING(4) + 0x800 + 2), 1);
	rx = vu_chain(4, NULL, 0, 32);
	assert_true(vu_wait_used(4, 2));
	assert_memory_equal(vu_reply(4, rx), "later", 5);
	close(cl);
}

/* Output with no client, or a client that never reads, is dropped: the
 * transmit queue keeps moving. */
static void test_output_never_blocks(void **state)
{
	static char big[VU_BUF_MAX / 2];
	int cl;

	(void)state;
	vu_start(MULTIPORT | VU_F_EVENT_IDX, 6);
	for (unsigned i = 0; i < 4; i++)
		vu_chain(1, "x", 1, 0);
	assert_true(vu_wait_used(1, 4));
	cl = connect_to(sock0);
	usleep(20000);
	memset(big, 'y', sizeof(big));
	for (unsigned i = 0; i < 64; i++) {
		vu_chain(1, big, sizeof(big), 0);
		assert_true(vu_wait_used(1, (uint16_t)(5 + i)));
	}
	close(cl);
}

/* A short control message is skipped; the device goes on. */
static void test_short_control(void **state)
{
	(void)state;
	vu_start(MULTIPORT | VU_F_EVENT_IDX, 6);
	post_ctrl_rx(4);
	vu_chain(CTRL_TXQ, "ab", 2, 0);
	send_ctrl(0, 0, 1);
	assert_true(vu_wait_used(CTRL_TXQ, 2));
	assert_true(vu_wait_used(CTRL_RXQ, 2));
	assert_int_equal(vu_rd(VU_CC_STATUS, 1) & VIRTIO_STATUS_DEVICE_NEEDS_RESET, 0);
}

static int restore(const struct sbuf *out, char *err, size_t errlen)
{
	struct sbuf_reader in;

	sbuf_reader_init(&in, out->data, out->len);
	if (vu_f->de->restore(vu_f, &in, err, errlen) < 0) {
		if (in.failed)
			snprintf(err, errlen, "%s", in.why);
		return -1;
	}
	return sbuf_reader_done(&in, "virtio-console", err, errlen);
}

/* Saved with two DEVICE_ADDs waiting for control buffers; reset (a new
 * process starts from nothing); restored: the driver gets both once the
 * buffers come.  A section for other ports is refused. */
static void test_save_restore(void **state)
{
	char err[256] = "";
	struct sbuf out = {0};
	uint16_t txused;

	(void)state;
	assert_int_equal(machine_state_saveable(&vu_m, err, sizeof(err)), 0);
	vu_start(MULTIPORT | VU_F_EVENT_IDX, 6);
	send_ctrl(0, 0 /* DEVICE_READY */, 1);
	assert_true(vu_wait_used(CTRL_TXQ, 1));
	assert_int_equal(vu_f->de->quiesce(vu_f, err, sizeof(err)), 0);
	assert_int_equal(vu_f->de->save(vu_f, &out, err, sizeof(err)), 0);
	assert_false(out.failed);
	/* version, 2 ports by name, 2 messages waiting */
	assert_int_equal(out.data[0] | out.data[1] << 8, 1);
	assert_int_equal(out.data[2], 2);
	assert_int_equal(out.data[3], strlen("org.test.zero"));
	assert_memory_equal(out.data + 4, "org.test.zero", 13);
	assert_int_equal(out.data[4 + 13 + 1 + 3], 2);
	vu_wr(VU_CC_STATUS, 1, 0);
	vu_f->de->unquiesce(vu_f);

	out.data[2] = 3; /* another console's */
	assert_int_equal(restore(&out, err, sizeof(err)), -1);
	assert_contains(err, "3 ports");
	out.data[2] = 2;
	assert_int_equal(restore(&out, err, sizeof(err)), 0);
	assert_int_equal(vu_rd(VU_CC_STATUS, 1), 0x0f);
	post_ctrl_rx(4);
	assert_true(vu_wait_used(CTRL_RXQ, 2));
	assert_int_equal(ctrl_at(0).event, 1);
	assert_int_equal(ctrl_at(1).id, 1);
	/* and the control queue goes on */
	txused = vu_get16(VU_RING(CTRL_TXQ) + 0x800 + 2);
	send_ctrl(0, 3 /* PORT_READY */, 1);
	assert_true(vu_wait_used(CTRL_TXQ, (uint16_t)(txused + 1)));
	assert_true(vu_wait_used(CTRL_RXQ, 4));
	assert_int_equal(ctrl_at(2).event, 7);
	sbuf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_save_restore),       cmocka_unit_test(test_config_keys),
	    cmocka_unit_test(test_config_refused),     cmocka_unit_test(test_socket_paths),
	    cmocka_unit_test(test_handshake_and_data), cmocka_unit_test(test_output_never_blocks),
	    cmocka_unit_test(test_short_control),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
