/*
 * A fake tap for the NIC tests (virtio-net, e1000): a datagram socket pair
 * behind the tap_*() functions, so that no host interface is made.  The
 * device gets one end (tap_dev_end); the test reads what the guest sent
 * from tap_peer and sends frames there for the guest.  Each tap_open()
 * makes a new pair.
 *
 * The unit tests define FAKE_TAP_WRAPPED first: the Makefile links them
 * with -Wl,--wrap=tap_open,... so these are __wrap_tap_open() and so on.
 * The fuzz targets link this in place of src/backend/tap.c (the Makefile's
 * FUZZ_LINK_OUT), under the real names, tap_name_valid() included.
 */
#ifndef KHYVE_FAKE_TAP_H
#define KHYVE_FAKE_TAP_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/tap.h"

#ifdef FAKE_TAP_WRAPPED
#define FAKE_TAP(fn) __wrap_##fn
#else
#define FAKE_TAP(fn) fn
#endif

struct tap {
	int fd;
	char name[16];
};

/* The test's end of the newest pair, and the device's. */
static int tap_peer = -1, tap_dev_end = -1;

struct tap *FAKE_TAP(tap_open)(const char *name, unsigned vnet_hdr_len, char *err, size_t errlen);
void FAKE_TAP(tap_close)(struct tap *t);
int FAKE_TAP(tap_fd)(const struct tap *t);
const char *FAKE_TAP(tap_name)(const struct tap *t);
int FAKE_TAP(tap_set_offload)(struct tap *t, bool csum, bool tso4, bool tso6, bool ecn);
int FAKE_TAP(tap_set_mtu)(struct tap *t, unsigned mtu);

#ifndef FAKE_TAP_WRAPPED
bool tap_name_valid(const char *name)
{
	return name != NULL && *name != '\0' && strlen(name) < 16;
}
#endif

struct tap *FAKE_TAP(tap_open)(const char *name, unsigned vnet_hdr_len, char *err, size_t errlen)
{
	/* Static, so that a device the test never closes leaks nothing
	 * (LeakSanitizer in the san builds). */
	static struct tap pool[8];
	static unsigned next;
	struct tap *t = &pool[next++ % 8];
	int sv[2];

	(void)vnet_hdr_len;
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "fake tap: %s", strerror(errno));
		return NULL;
	}
	t->fd = tap_dev_end = sv[0];
	tap_peer = sv[1];
	snprintf(t->name, sizeof(t->name), "%s", name != NULL ? name : "fake0");
	return t;
}

void FAKE_TAP(tap_close)(struct tap *t)
{
	if (t != NULL)
		close(t->fd);
}

int FAKE_TAP(tap_fd)(const struct tap *t)
{
	return t->fd;
}

const char *FAKE_TAP(tap_name)(const struct tap *t)
{
	return t->name;
}

int FAKE_TAP(tap_set_offload)(struct tap *t, bool csum, bool tso4, bool tso6, bool ecn)
{
	(void)t;
	(void)csum;
	(void)tso4;
	(void)tso6;
	(void)ecn;
	return 0;
}

int FAKE_TAP(tap_set_mtu)(struct tap *t, unsigned mtu)
{
	(void)t;
	(void)mtu;
	return 0;
}

#endif
