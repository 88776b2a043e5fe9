/*
 * virtio-net (virtio 1.2 section 5.1): the part of its receive path that
 * unit tests drive without a tap (see virtio_net.c for the device).
 */
#ifndef KHYVE_VIRTIO_NET_H
#define KHYVE_VIRTIO_NET_H

#include <stdbool.h>
#include <stddef.h>

#include "bus/virtqueue.h"

/*
 * Hand one received frame to the guest: `len` bytes (the 12-byte
 * virtio_net_hdr_v1 first) already written across the device-writable
 * buffers of chains[0..nchains), popped in that order from `vq`.  Writes
 * the header's num_buffers (the chains the frame fills with `mergeable`,
 * VIRTIO_NET_F_MRG_RXBUF; else 1) BEFORE pushing those chains to the used
 * ring, so the used index never moves ahead of a complete header
 * (section 5.1.6.4), then gives the chains it did not need back.  The
 * caller holds the queue's lock and decides about the interrupt.
 */
void virtio_net_rx_publish(struct virtqueue *vq, const struct vq_elem *chains, int nchains,
                           size_t len, bool mergeable);

#endif
