/*
 * libFuzzer target for virtio-console (src/dev/virtio_console.c) behind
 * the virtio PCI transport: one port on a unix socket nobody connects to,
 * so the control queues (2 and 3: DEVICE_READY, PORT_READY, short and
 * odd messages, control receive buffers), the port's transmit queue (to a
 * socket without a client) and its checkpoints (quiesce, save, restore of
 * a hostile section) are what is fuzzed.  Op encoding:
 * tests/fuzz/virtio_driver.h, with four queues.
 */
#define VIRTIO_FUZZ_DEVICE "virtio-console"
#define VIRTIO_FUZZ_OPTS   "port.0.name", "p0", "port.0.path", "SOCKET", NULL
#define VIRTIO_FUZZ_MAXQ   4
#define VIRTIO_FUZZ_LOOP   1

#include "virtio_driver.h"
