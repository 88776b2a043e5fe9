#include "backend/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

struct tap {
	int fd;
	char name[IFNAMSIZ];
};

/* Bring the interface up (and set its MTU) through an AF_INET socket. */
static int if_ioctl(const char *name, unsigned long req, struct ifreq *ifr)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (s < 0)
		return -1;
	snprintf(ifr->ifr_name, IFNAMSIZ, "%s", name);
	rc = ioctl(s, req, ifr);
	close(s);
	return rc;
}

static int if_up(const char *name)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	if (if_ioctl(name, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	if (ifr.ifr_flags & IFF_UP)
		return 0;
	ifr.ifr_flags |= IFF_UP;
	return if_ioctl(name, SIOCSIFFLAGS, &ifr);
}

struct tap *tap_open(const char *name, unsigned vnet_hdr_len, char *err, size_t errlen)
{
	struct tap *t = calloc(1, sizeof(*t));
	struct ifreq ifr;
	int hdr = (int)vnet_hdr_len;

	if (t == NULL)
		return NULL;
	t->fd = -1;
	if (strlen(name) >= IFNAMSIZ) {
		snprintf(err, errlen, "interface name '%s' is too long", name);
		goto fail;
	}
	t->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (t->fd < 0) {
		snprintf(err, errlen, "cannot open /dev/net/tun: %s", strerror(errno));
		goto fail;
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	if (ioctl(t->fd, TUNSETIFF, &ifr) < 0) {
		snprintf(err, errlen, "cannot attach to %s: %s%s", name, strerror(errno),
		         errno == EPERM ? " (creating a tap needs CAP_NET_ADMIN)" : "");
		goto fail;
	}
	snprintf(t->name, sizeof(t->name), "%s", ifr.ifr_name);
	if (ioctl(t->fd, TUNSETVNETHDRSZ, &hdr) < 0) {
		snprintf(err, errlen, "%s: TUNSETVNETHDRSZ: %s", name, strerror(errno));
		goto fail;
	}
	tap_set_offload(t, false, false, false, false);
	if (if_up(t->name) < 0) {
		snprintf(err, errlen, "cannot bring %s up: %s", name, strerror(errno));
		goto fail;
	}
	return t;
fail:
	tap_close(t);
	return NULL;
}

void tap_close(struct tap *t)
{
	if (t == NULL)
		return;
	if (t->fd >= 0)
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
	unsigned long f = 0;

	if (csum) {
		f |= TUN_F_CSUM;
		if (tso4)
			f |= TUN_F_TSO4;
		if (tso6)
			f |= TUN_F_TSO6;
		if ((tso4 || tso6) && ecn)
			f |= TUN_F_TSO_ECN;
	}
	return ioctl(t->fd, TUNSETOFFLOAD, f);
}

int tap_set_mtu(struct tap *t, unsigned mtu)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_mtu = (int)mtu;
	return if_ioctl(t->name, SIOCSIFMTU, &ifr);
}

bool tap_name_valid(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (len == 0 || len >= IFNAMSIZ || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (const char *p = name; *p; p++)
		if (*p == '/' || *p == ':' || *p <= ' ' || *p == 0x7f)
			return false;
	return true;
}
