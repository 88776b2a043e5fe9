/*
 * tap(4)-style network back end on Linux's TUN/TAP driver
 * (Documentation/networking/tuntap.rst): "tapN" as in bhyve; the interface
 * is created when it does not exist (CAP_NET_ADMIN) and brought up.  Frames
 * carry a virtio-net header (TUNSETVNETHDRSZ) so checksum and segmentation
 * offloads pass between guest and host untouched.
 */
#ifndef KHYVE_TAP_H
#define KHYVE_TAP_H

#include <stdbool.h>
#include <stddef.h>

struct tap;

/* Open or create interface `name` with `vnet_hdr_len` bytes of virtio-net
 * header per frame; the fd is non-blocking.  NULL with `err` filled. */
/*
 * bhyve names taps tapN or vmnetN; on Linux any interface name works (vm
 * names a guest's taps vmt-NAME-N).  True for a usable name: 1-15 bytes,
 * no '/', ':', blanks or control characters, not "." or "..".
 */
bool tap_name_valid(const char *name);

struct tap *tap_open(const char *name, unsigned vnet_hdr_len, char *err, size_t errlen);
void tap_close(struct tap *t);

int tap_fd(const struct tap *t);
const char *tap_name(const struct tap *t);

/* Which offloads the guest can receive (TUNSETOFFLOAD); 0 or -1. */
int tap_set_offload(struct tap *t, bool csum, bool tso4, bool tso6, bool ecn);

/* Set the interface MTU; 0 or -1. */
int tap_set_mtu(struct tap *t, unsigned mtu);

#endif
