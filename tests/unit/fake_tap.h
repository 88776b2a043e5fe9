/*
 * A fake tap for the NIC unit tests (virtio-net, e1000): a datagram socket
 * pair behind the tap_*() functions, which the Makefile wraps for these
 * tests (-Wl,--wrap=tap_open, ...).  The device gets one end; the test
 * reads what the guest sent from `host_end` and sends frames on it for
 * the guest.  Each tap_open() makes a new pair.
 */
#ifndef KHYVE_FAKE_TAP_H
#define KHYVE_FAKE_TAP_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct tap {
	int fd;
};

static int host_end = -1; /* the test's side of the pair */

struct tap *__wrap_tap_open(const char *name, unsigned vnet_hdr_len, char *err, size_t errlen);
void __wrap_tap_close(struct tap *t);
int __wrap_tap_fd(const struct tap *t);
const char *__wrap_tap_name(const struct tap *t);
int __wrap_tap_set_offload(struct tap *t, bool csum, bool tso4, bool tso6, bool ecn);
int __wrap_tap_set_mtu(struct tap *t, unsigned mtu);

struct tap *__wrap_tap_open(const char *name, unsigned vnet_hdr_len, char *err, size_t errlen)
{
	static struct tap t;
	int sv[2];

	(void)name;
	(void)vnet_hdr_len;
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		return NULL;
	}
	t.fd = sv[0];
	host_end = sv[1];
	return &t;
}

void __wrap_tap_close(struct tap *t)
{
	if (t != NULL)
		close(t->fd);
}

int __wrap_tap_fd(const struct tap *t)
{
	return t->fd;
}

const char *__wrap_tap_name(const struct tap *t)
{
	(void)t;
	return "unit0";
}

int __wrap_tap_set_offload(struct tap *t, bool csum, bool tso4, bool tso6, bool ecn)
{
	(void)t;
	(void)csum;
	(void)tso4;
	(void)tso6;
	(void)ecn;
	return 0;
}

int __wrap_tap_set_mtu(struct tap *t, unsigned mtu)
{
	(void)t;
	(void)mtu;
	return 0;
}

#endif
