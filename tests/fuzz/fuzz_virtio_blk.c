/*
 * libFuzzer target for virtio-blk (src/dev/virtio_blk.c) behind the virtio
 * PCI transport: requests (read, write, flush, get ID, discard, write
 * zeroes) on a scratch image, with the request header, data and status
 * buffers in guest-made chains.  Op encoding: tests/fuzz/virtio_driver.h.
 */
#define VIRTIO_FUZZ_DEVICE "virtio-blk"
/* No busy polling: it would only burn the fuzzer's CPU. */
#define VIRTIO_FUZZ_OPTS "path", "IMAGE", "poll_us", "0", NULL

#include "virtio_driver.h"
