/*
 * libFuzzer target for virtio-balloon (src/dev/virtio_balloon.c) behind
 * the virtio PCI transport: inflate and deflate PFN lists (inside and
 * outside the fake RAM, the rings' own pages among them), free page
 * reports, the statistics buffer the device holds, the reporting queue's
 * index under each feature set, config writes, checkpoints with the
 * statistics buffer held.  Op encoding: tests/fuzz/virtio_driver.h; the
 * four queues are inflate, deflate, stats and reporting.
 */
#define VIRTIO_FUZZ_DEVICE "virtio-balloon"
#define VIRTIO_FUZZ_OPTS   NULL
#define VIRTIO_FUZZ_MAXQ   4

#include "virtio_driver.h"
