/*
 * A fake tap for the NIC fuzz targets (virtio-net, e1000), linked in place
 * of src/backend/tap.c (the Makefile's FUZZ_LINK_OUT): a datagram socket
 * pair, so that no host interface is made.  The device gets tap_dev_end;
 * the target injects frames and reads what was sent on tap_peer.
 */
#ifndef KHYVE_FUZZ_FAKE_TAP_H
#define KHYVE_FUZZ_FAKE_TAP_H

#include <errno.h>
#include <sys/socket.h>

#include "backend/tap.h"

/* The fake tap's ends: frames to inject and frames sent / the device's. */
static int tap_peer = -1, tap_dev_end = -1;

struct tap {
	int fd;
	char name[16];
};

bool tap_name_valid(const char *name)
{
	return name != NULL && *name != '\0' && strlen(name) < 16;
}

struct tap *tap_open(const char *name, unsigned vnet_hdr_len, char *err, size_t errlen)
{
	struct tap *t = calloc(1, sizeof(*t));
	int sv[2];

	(void)vnet_hdr_len;
	if (t == NULL || socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sv) < 0) {
		snprintf(err, errlen, "fake tap: %s", strerror(errno));
		free(t);
		return NULL;
	}
	t->fd = tap_dev_end = sv[0];
	tap_peer = sv[1];
	snprintf(t->name, sizeof(t->name), "%s", name);
	return t;
}

void tap_close(struct tap *t)
{
	if (t != NULL)
		close(t->fd);
	free(t);
}

int tap_fd(const struct tap *t)
{
	return t->fd;
}

const char *tap_name(const struct tap *t)
{
	return t->name;
}

int tap_set_offload(struct tap *t, bool csum, bool tso4, bool tso6, bool ecn)
{
	(void)t;
	(void)csum;
	(void)tso4;
	(void)tso6;
	(void)ecn;
	return 0;
}

int tap_set_mtu(struct tap *t, unsigned mtu)
{
	(void)t;
	(void)mtu;
	return 0;
}

#endif
