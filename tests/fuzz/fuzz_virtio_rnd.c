/*
 * libFuzzer target for virtio-rnd (src/dev/virtio_rnd.c) behind the virtio
 * PCI transport; with the fewest device threads of the three, it is where
 * the transport itself (common configuration, feature negotiation, queue
 * setup, reset, ISR) is fuzzed fastest.  Op encoding:
 * tests/fuzz/virtio_driver.h.
 */
#define VIRTIO_FUZZ_DEVICE "virtio-rnd"
#define VIRTIO_FUZZ_OPTS   NULL

#include "virtio_driver.h"
