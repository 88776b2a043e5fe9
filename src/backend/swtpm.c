/* swtpm's data and control sockets (see swtpm.h). */
#include "backend/swtpm.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Control commands and capability bits (swtpm-ioctls(3)). */
#define CMD_GET_CAPABILITY   0x01u
#define CMD_INIT             0x02u
#define CMD_GET_STATEBLOB    0x0cu
#define CMD_SET_STATEBLOB    0x0du
#define CMD_STOP             0x0eu
#define CAP_INIT             (1u << 0)
#define CAP_GET_STATEBLOB    (1u << 8)
#define CAP_SET_STATEBLOB    (1u << 9)
#define CAP_STOP             (1u << 10)
#define CAPS_NEEDED          (CAP_INIT | CAP_GET_STATEBLOB | CAP_SET_STATEBLOB | CAP_STOP)
#define INIT_DELETE_VOLATILE 1u
#define TPM_RETRY            0x800u /* GET_STATEBLOB: swtpm holds no such blob */

int64_t swtpm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until `fd` is ready for `events` or `deadline` passes; 0 or -1. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - swtpm_now_ms();
		struct pollfd p = {.fd = fd, .events = events};
		int rc;

		if (left <= 0)
			return errno = ETIMEDOUT, -1;
		rc = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

int swtpm_send_all(int fd, const void *buf, size_t len, int64_t deadline)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_fd(fd, POLLOUT, deadline) < 0)
				return -1;
		} else {
			return -1;
		}
	}
	return 0;
}

int swtpm_recv_all(int fd, void *buf, size_t len, int64_t deadline)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n == 0) {
			return errno = ECONNRESET, -1; /* swtpm went away */
		} else if (errno == EINTR) {
			continue;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			if (wait_fd(fd, POLLIN, deadline) < 0)
				return -1;
		} else {
			return -1;
		}
	}
	return 0;
}

int swtpm_connect(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		snprintf(err, errlen, "cannot connect to swtpm at %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* ---- the control channel ---- */

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* After a failed command swtpm may have sent fewer or more bytes than a
 * success would: take what has arrived, so the next command starts clean. */
static void drain(int fd)
{
	uint8_t junk[256];
	struct pollfd p = {.fd = fd, .events = POLLIN};

	while (poll(&p, 1, 100) > 0 && recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0)
		;
}

/* A command whose answer is one u32 result: 0 when swtpm says TPM_SUCCESS. */
static int ctrl_simple(int fd, const uint8_t *req, size_t len, const char *what, int timeout_ms,
                       char *err, size_t errlen)
{
	int64_t deadline = swtpm_now_ms() + timeout_ms;
	uint8_t res[4];

	if (swtpm_send_all(fd, req, len, deadline) < 0 ||
	    swtpm_recv_all(fd, res, sizeof(res), deadline) < 0) {
		snprintf(err, errlen, "swtpm control channel, %s: %s", what, strerror(errno));
		return -1;
	}
	if (get_be32(res) != 0) {
		drain(fd);
		snprintf(err, errlen, "swtpm control channel, %s: TPM result 0x%x", what,
		         get_be32(res));
		return -1;
	}
	return 0;
}

int swtpm_ctrl_check(int fd, int timeout_ms, char *err, size_t errlen)
{
	int64_t deadline = swtpm_now_ms() + timeout_ms;
	uint8_t req[4], caps[8];
	uint32_t low;

	put_be32(req, CMD_GET_CAPABILITY);
	if (swtpm_send_all(fd, req, sizeof(req), deadline) < 0 ||
	    swtpm_recv_all(fd, caps, sizeof(caps), deadline) < 0) {
		snprintf(err, errlen,
		         "no answer to GET_CAPABILITY (%s): is it swtpm's --ctrl socket?",
		         strerror(errno));
		return -1;
	}
	low = get_be32(caps + 4);
	if ((low & CAPS_NEEDED) != CAPS_NEEDED) {
		snprintf(err, errlen, "swtpm cannot move its state (capabilities 0x%x)", low);
		return -1;
	}
	return 0;
}

int swtpm_ctrl_get_blob(int fd, struct swtpm_blob *b, int timeout_ms, char *err, size_t errlen)
{
	int64_t deadline = swtpm_now_ms() + timeout_ms;
	uint8_t req[16], hdr[16];
	uint32_t result, total;

	b->data = NULL;
	b->len = 0;
	put_be32(req, CMD_GET_STATEBLOB);
	put_be32(req + 4, 0); /* the blob as stored, encrypted or not */
	put_be32(req + 8, b->type);
	put_be32(req + 12, 0); /* offset */
	/* The answer: result, flags, total length, this length, the bytes;
	 * a failure other than TPM_RETRY may be the result alone. */
	if (swtpm_send_all(fd, req, sizeof(req), deadline) < 0 ||
	    swtpm_recv_all(fd, hdr, 4, deadline) < 0)
		goto io_error;
	result = get_be32(hdr);
	if (result != 0 && result != TPM_RETRY) {
		drain(fd);
		snprintf(err, errlen, "swtpm control channel, state blob %u: TPM result 0x%x",
		         b->type, result);
		return -1;
	}
	if (swtpm_recv_all(fd, hdr + 4, 12, deadline) < 0)
		goto io_error;
	/* TPM_RETRY: no such blob (a TPM 2.0 keeps no save-state one): an empty one. */
	total = result == TPM_RETRY ? 0 : get_be32(hdr + 8);
	if (total > SWTPM_BLOB_MAX || (result == 0 && total != get_be32(hdr + 12))) {
		snprintf(err, errlen, "swtpm control channel, state blob %u: bad length %u/%u",
		         b->type, get_be32(hdr + 12), total);
		return -1;
	}
	b->flags = get_be32(hdr + 4) & SWTPM_STATE_ENCRYPTED;
	b->data = malloc(total ? total : 1);
	if (b->data == NULL) {
		snprintf(err, errlen, "swtpm control channel, state blob %u: out of memory",
		         b->type);
		return -1;
	}
	if (swtpm_recv_all(fd, b->data, total, deadline) < 0) {
		free(b->data);
		b->data = NULL;
		goto io_error;
	}
	b->len = total;
	return 0;
io_error:
	snprintf(err, errlen, "swtpm control channel, state blob %u: %s", b->type, strerror(errno));
	return -1;
}

static int set_blob(int fd, const struct swtpm_blob *b, int timeout_ms, char *err, size_t errlen)
{
	int64_t deadline = swtpm_now_ms() + timeout_ms;
	uint8_t hdr[16], res[4];

	put_be32(hdr, CMD_SET_STATEBLOB);
	put_be32(hdr + 4, b->flags & SWTPM_STATE_ENCRYPTED);
	put_be32(hdr + 8, b->type);
	put_be32(hdr + 12, b->len);
	if (swtpm_send_all(fd, hdr, sizeof(hdr), deadline) < 0 ||
	    swtpm_send_all(fd, b->data, b->len, deadline) < 0 ||
	    swtpm_recv_all(fd, res, sizeof(res), deadline) < 0) {
		snprintf(err, errlen, "swtpm control channel, setting state blob %u: %s", b->type,
		         strerror(errno));
		return -1;
	}
	if (get_be32(res) != 0) {
		snprintf(err, errlen, "swtpm refused state blob %u: TPM result 0x%x", b->type,
		         get_be32(res));
		return -1;
	}
	return 0;
}

int swtpm_ctrl_load(int fd, const struct swtpm_blob *blobs, unsigned n, int timeout_ms, char *err,
                    size_t errlen)
{
	uint8_t stop[4], init[8];

	put_be32(stop, CMD_STOP);
	/* SET_STATEBLOB is refused while the TPM runs, and the refusal would
	 * leave the blob's bytes to be read as commands: stop it first. */
	if (ctrl_simple(fd, stop, sizeof(stop), "STOP", timeout_ms, err, errlen) < 0)
		return -1;
	for (unsigned i = 0; i < n; i++)
		if (blobs[i].len > 0 && set_blob(fd, &blobs[i], timeout_ms, err, errlen) < 0)
			return -1;
	put_be32(init, CMD_INIT);
	put_be32(init + 4, INIT_DELETE_VOLATILE);
	return ctrl_simple(fd, init, sizeof(init), "INIT", timeout_ms, err, errlen);
}
