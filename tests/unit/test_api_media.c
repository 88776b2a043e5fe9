/*
 * vm.media-insert end to end on a real API socket (run/api_http.c and
 * lib/apiclient.c's apic_media_insert): the Upgrade to khyve-fd, the fd
 * passed by SCM_RIGHTS, the 2 s bound on a client that never sends it,
 * extra fds, errors as plain HTTP, against a fake drive (M1's ahci-cd
 * registers the real ones).
 */
#include "unit.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/machine.h"
#include "lib/apiclient.h"
#include "lib/config.h"
#include "lib/counters.h"
#include "run/api.h"

static struct machine m;
static struct api a;
static char dir[32], sock[64], image[80];

static struct fake {
	bool present, locked;
	uint64_t bytes;
	int fd, changes;
} cd;

static int fake_change(void *dev, int fd, bool force, char *err, size_t errlen)
{
	struct fake *d = dev;
	struct stat st;

	d->changes++;
	if (d->locked && !force) {
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "the guest locked the tray (force ejects anyway)");
		return -1;
	}
	if (d->fd >= 0)
		close(d->fd);
	d->fd = fd;
	d->present = fd >= 0 && fstat(fd, &st) == 0;
	d->bytes = d->present ? (uint64_t)st.st_size : 0;
	return 0;
}

static void fake_state(void *dev, bool *present, bool *locked, uint64_t *bytes)
{
	struct fake *d = dev;

	*present = d->present;
	*locked = d->locked;
	*bytes = d->bytes;
}

static int setup(void **state)
{
	struct machine_media_drive d = {.name = "cd0",
	                                .device = "ahci-cd",
	                                .slot = "4:0",
	                                .dev = &cd,
	                                .change = fake_change,
	                                .state = fake_state};
	char err[256];
	int fd;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/khyve-media.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/vm.sock", dir);
	snprintf(image, sizeof(image), "%s/cd.iso", dir);
	fd = open(image, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 6144), 0);
	close(fd);
	config_reset();
	counters_reset();
	config_set("api.socket", sock);
	memset(&cd, 0, sizeof(cd));
	cd.fd = -1;
	machine_init_detached(&m, "media", NULL, 0, 0);
	assert_int_equal(machine_add_media_drive(&m, &d), 0);
	assert_int_equal(api_init(&a, &m), 0);
	assert_int_equal(api_open(&a, err, sizeof(err)), 0);
	assert_int_equal(api_start(&a, err, sizeof(err)), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	api_close(&a);
	if (cd.fd >= 0)
		close(cd.fd);
	unlink(image);
	unlink(sock);
	snprintf(image, sizeof(image), "%s.lock", sock);
	unlink(image);
	rmdir(dir);
	config_reset();
	return 0;
}

static long insert(int fd, bool force, char *err, size_t errlen)
{
	long status = 0;

	assert_int_equal(apic_media_insert(sock, "cd0", force, fd, 5000, &status, err, errlen),
	                 API_CALL_OK);
	return status;
}

static void test_insert(void **state)
{
	char err[512];
	int fd = open(image, O_RDONLY);

	(void)state;
	assert_int_equal(insert(fd, false, err, sizeof(err)), 204);
	assert_string_equal(err, "");
	close(fd);
	assert_true(cd.present);
	assert_int_equal(cd.bytes, 6144);
	assert_int_equal(cd.changes, 1);
}

static void test_insert_errors(void **state)
{
	char err[512];
	long status = 0;
	int fd = open("/", O_RDONLY | O_DIRECTORY);

	(void)state;
	assert_int_equal(insert(fd, false, err, sizeof(err)), 400);
	assert_contains(err, "not a regular file or block device");
	close(fd);
	fd = open(image, O_RDONLY);
	assert_int_equal(apic_media_insert(sock, "cd7", false, fd, 5000, &status, err, sizeof(err)),
	                 API_CALL_OK);
	assert_int_equal(status, 404);
	assert_contains(err, "no drive cd7");
	cd.locked = true;
	assert_int_equal(insert(fd, false, err, sizeof(err)), 409);
	assert_contains(err, "the guest locked the tray");
	assert_int_equal(insert(fd, true, err, sizeof(err)), 204);
	close(fd);
	assert_int_equal(cd.changes, 2);
	/* nothing listens */
	assert_int_equal(apic_media_insert("/tmp/khyve-media-none.sock", "cd0", false, 0, 1000,
	                                   &status, err, sizeof(err)),
	                 API_CALL_NO_VM);
}

/* A raw client: the request with the Upgrade headers, up to the 101. */
static int raw_upgrade(void)
{
	static const char req[] = "PUT /api/v1/vm.media-insert HTTP/1.1\r\nHost: x\r\n"
	                          "Connection: Upgrade\r\nUpgrade: khyve-fd\r\n"
	                          "Content-Length: 15\r\n\r\n{\"drive\":\"cd0\"}";
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char buf[1024];
	size_t len = 0;
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	assert_int_equal(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(s, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
	while (len < sizeof(buf) - 1) {
		ssize_t n = read(s, buf + len, sizeof(buf) - 1 - len);

		assert_true(n > 0);
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n") != NULL)
			break;
	}
	assert_contains(buf, "HTTP/1.1 101");
	return s;
}

static void read_line(int s, char *buf, size_t cap)
{
	size_t len = 0;
	struct pollfd p = {.fd = s, .events = POLLIN};

	buf[0] = '\0';
	while (len + 1 < cap && strchr(buf, '\n') == NULL && poll(&p, 1, 5000) > 0) {
		ssize_t n = read(s, buf + len, cap - 1 - len);

		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
	}
}

static void test_no_fd_in_time(void **state)
{
	struct apic_reply r;
	char line[256], err[256];
	int s;

	(void)state;
	s = raw_upgrade();
	read_line(s, line, sizeof(line)); /* after 2 s */
	assert_contains(line,
	                "{\"status\":400,\"error\":\"no file descriptor came within 2 s\"}\n");
	close(s);
	/* the API still answers */
	assert_int_equal(apic_call(sock, "GET", "vmm.ping", NULL, 2000, &r, err, sizeof(err)),
	                 API_CALL_OK);
	assert_int_equal(r.status, 200);
	apic_reply_free(&r);
	assert_int_equal(cd.changes, 0);
}

static void send_fds(int s, const int *fds, unsigned n)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char byte = 'x';
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;

	memset(&ctl, 0, sizeof(ctl));
	if (n > 0) {
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	}
	assert_int_equal(sendmsg(s, &msg, 0), 1);
}

static void test_fd_count(void **state)
{
	int fds[2] = {open(image, O_RDONLY), open(image, O_RDONLY)};
	char line[256];
	int s;

	(void)state;
	s = raw_upgrade();
	send_fds(s, fds, 2);
	read_line(s, line, sizeof(line));
	assert_contains(line, "{\"status\":400,\"error\":\"send exactly one file descriptor\"}");
	close(s);
	s = raw_upgrade();
	send_fds(s, fds, 0);
	read_line(s, line, sizeof(line));
	assert_contains(line,
	                "{\"status\":400,\"error\":\"no file descriptor came with the byte\"}");
	close(s);
	s = raw_upgrade();
	send_fds(s, fds, 1);
	read_line(s, line, sizeof(line));
	assert_string_equal(line, "{\"status\":204}\n");
	close(s);
	close(fds[0]);
	close(fds[1]);
	assert_int_equal(cd.changes, 1);
	assert_true(cd.present);
}

/* Without the Upgrade headers vm.media-insert is plain HTTP: 400. */
static void test_plain_put(void **state)
{
	struct apic_reply r;
	char err[256];

	(void)state;
	assert_int_equal(apic_call(sock, "PUT", "vm.media-insert", "{\"drive\":\"cd0\"}", 2000, &r,
	                           err, sizeof(err)),
	                 API_CALL_OK);
	assert_int_equal(r.status, 400);
	assert_contains(r.body, "passes the image as a file descriptor");
	apic_reply_free(&r);
	assert_int_equal(apic_call(sock, "PUT", "vm.media-eject", "{\"drive\":\"cd0\"}", 2000, &r,
	                           err, sizeof(err)),
	                 API_CALL_OK);
	assert_int_equal(r.status, 204);
	apic_reply_free(&r);
	assert_int_equal(apic_call(sock, "GET", "vm.info", NULL, 2000, &r, err, sizeof(err)),
	                 API_CALL_OK);
	assert_contains(r.body, "\"cd0\":{\"device\":\"ahci-cd\",\"slot\":\"4:0\",\"port\":0,"
	                        "\"medium\":false,\"locked\":false,\"bytes\":0}");
	apic_reply_free(&r);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_insert),   T(test_insert_errors), T(test_no_fd_in_time),
	    T(test_fd_count), T(test_plain_put),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
