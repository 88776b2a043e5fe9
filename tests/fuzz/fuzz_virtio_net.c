/*
 * libFuzzer target for virtio-net (src/dev/virtio_net.c) behind the virtio
 * PCI transport: the transmit path (header and frame chains to the tap)
 * and received frames put into the guest's receive chains with their
 * virtio-net header, mergeable or not.  The tap is a socket pair, so no
 * host interface is made.  Op encoding: tests/fuzz/virtio_driver.h.
 */
#define VIRTIO_FUZZ_DEVICE "virtio-net"
#define VIRTIO_FUZZ_OPTS   "backend", "fuzz0", NULL
#define VIRTIO_FUZZ_NET

#include "virtio_driver.h"
