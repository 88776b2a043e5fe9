/*
 * Unit tests for virtio-net's counters (src/dev/virtio_net.c, source
 * "net0"): a frame sent by the guest counts as a transmitted packet and
 * its bytes, one the tap refuses as a transmit drop; a frame received
 * counts as a received packet, one too big for the guest's buffer as a
 * receive drop, and running out of buffers as rx_no_buffer.
 *
 * The device runs behind the virtio PCI transport in a detached machine
 * (no KVM), with its own threads.  The tap is a datagram socket pair:
 * tap_open() and friends are wrapped (-Wl,--wrap, see the Makefile), so no
 * host interface is made and the test plays the host's side.
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>

#include "backend/tap.h"
#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "lib/config.h"

#define FAKE_TAP_WRAPPED /* the Makefile wraps tap_*() for this test */
#include "../fake_tap.h" /* the tap: a socket pair */
#include "unit_counters.h"

#define RAM_GPA       0x100000ull
#define RAM_SIZE      0x100000ull
#define RX_DESC       (RAM_GPA + 0x0000)
#define RX_AVAIL      (RAM_GPA + 0x1000)
#define RX_USED       (RAM_GPA + 0x2000)
#define TX_DESC       (RAM_GPA + 0x3000)
#define TX_AVAIL      (RAM_GPA + 0x4000)
#define TX_USED       (RAM_GPA + 0x5000)
#define RX_BUF        (RAM_GPA + 0x10000)
#define TX_BUF        (RAM_GPA + 0x20000)
#define RX_BUF_LEN    2048
#define QSIZE         8
#define HDR           12 /* virtio_net_hdr_v1 */

#define VBAR          4
#define REGION_NOTIFY 0x3000
#define CC_GFSELECT   0x08
#define CC_GF         0x0c
#define CC_STATUS     0x14
#define CC_Q_SELECT   0x16
#define CC_Q_SIZE     0x18
#define CC_Q_ENABLE   0x1c
#define CC_Q_DESC     0x20
#define CC_Q_DRIVER   0x28
#define CC_Q_DEVICE   0x30

/* ---- the driver's side ---- */

static struct machine m;
static uint8_t *ram;
static struct pci_func *f;
static uint64_t bar;

static void wr(uint64_t off, unsigned size, uint64_t val)
{
	if (!iobus_access(&m.mmio, bar + off, size, true, &val))
		fail_msg("BAR 4 write at 0x%llx unclaimed", (unsigned long long)off);
}

static uint64_t rd(uint64_t off, unsigned size)
{
	uint64_t v = 0;

	if (!iobus_access(&m.mmio, bar + off, size, false, &v))
		fail_msg("BAR 4 read at 0x%llx unclaimed", (unsigned long long)off);
	return v;
}

static uint8_t *hva(uint64_t gpa)
{
	return ram + (gpa - RAM_GPA);
}

static void put16(uint64_t gpa, uint16_t v)
{
	__atomic_store_n((uint16_t *)hva(gpa), v, __ATOMIC_SEQ_CST);
}

static uint16_t get16(uint64_t gpa)
{
	return __atomic_load_n((uint16_t *)hva(gpa), __ATOMIC_SEQ_CST);
}

static void put_desc(uint64_t table, unsigned i, uint64_t addr, uint32_t len, uint16_t flags)
{
	struct vring_desc d = {.addr = addr, .len = len, .flags = flags, .next = 0};

	memcpy(hva(table + 16ull * i), &d, sizeof(d));
}

static void avail_add(uint64_t avail, uint16_t head)
{
	uint16_t idx = get16(avail + 2);

	put16(avail + 4 + 2ull * (idx % QSIZE), head);
	put16(avail + 2, (uint16_t)(idx + 1));
}

static bool wait_used(uint64_t used, uint16_t want)
{
	for (int i = 0; i < 5000; i++) {
		if (get16(used + 2) == want)
			return true;
		usleep(1000);
	}
	return false;
}

static void setup_queue(unsigned qi, uint64_t desc, uint64_t avail, uint64_t used)
{
	wr(CC_Q_SELECT, 2, qi);
	wr(CC_Q_SIZE, 2, QSIZE);
	wr(CC_Q_DESC, 4, (uint32_t)desc);
	wr(CC_Q_DESC + 4, 4, desc >> 32);
	wr(CC_Q_DRIVER, 4, (uint32_t)avail);
	wr(CC_Q_DRIVER + 4, 4, avail >> 32);
	wr(CC_Q_DEVICE, 4, (uint32_t)used);
	wr(CC_Q_DEVICE + 4, 4, used >> 32);
	wr(CC_Q_ENABLE, 2, 1);
}

static int group_setup(void **state)
{
	char err[256] = "";

	(void)state;
	signal(SIGPIPE, SIG_IGN); /* the transmit-drop test shuts the tap's sending side */
	ram = calloc(1, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "unit", ram, RAM_GPA, RAM_SIZE) < 0)
		return -1;
	config_reset();
	counters_reset();
	if (config_set("pci.0.4.0.device", "virtio-net") < 0 ||
	    config_set("pci.0.4.0.backend", "unit0") < 0)
		return -1;
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	f = pci_get(0);
	bar = f->bar[VBAR].addr;
	pci_cfg_write(0, 4, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	return f->bar[VBAR].mapped && tap_peer >= 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	wr(CC_STATUS, 1, 0); /* joins the device's threads */
	close(tap_peer);
	return 0;
}

/* VERSION_1 only (no mergeable buffers), both queues, DRIVER_OK: the
 * device's threads run from here. */
static void start_device(void)
{
	wr(CC_STATUS, 1, 0);
	memset(ram, 0, RAM_SIZE);
	wr(CC_STATUS, 1, VIRTIO_STATUS_ACKNOWLEDGE);
	wr(CC_STATUS, 1, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	wr(CC_GFSELECT, 4, 0);
	wr(CC_GF, 4, 0);
	wr(CC_GFSELECT, 4, 1);
	wr(CC_GF, 4, 1);
	wr(CC_STATUS, 1,
	   VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	assert_true(rd(CC_STATUS, 1) & VIRTIO_STATUS_FEATURES_OK);
	setup_queue(0, RX_DESC, RX_AVAIL, RX_USED);
	setup_queue(1, TX_DESC, TX_AVAIL, TX_USED);
	wr(CC_STATUS, 1,
	   VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
	       VIRTIO_STATUS_DRIVER_OK);
}

static uint64_t net0(const char *key)
{
	struct unit_counters c;

	assert_true(unit_counters_read(COUNTER_NIC, "net0", &c));
	assert_false(c.duplicate);
	return unit_counter(&c, key);
}

/* Wait (up to 5 s) until `key` reaches `want`. */
static bool wait_counter(const char *key, uint64_t want)
{
	for (int i = 0; i < 5000; i++) {
		if (net0(key) >= want)
			return net0(key) == want;
		usleep(1000);
	}
	return false;
}

/* The guest sends one frame of `len` bytes (after the header) in
 * descriptor `i` of the transmit queue. */
static void guest_send(unsigned i, unsigned len)
{
	memset(hva(TX_BUF), 0, HDR);
	memset(hva(TX_BUF) + HDR, 0x5a, len);
	put_desc(TX_DESC, i, TX_BUF, HDR + len, 0);
	avail_add(TX_AVAIL, (uint16_t)i);
	wr(REGION_NOTIFY + 4, 2, 1);
}

static void host_send(unsigned len)
{
	static uint8_t frame[4096];

	memset(frame, 0, HDR);
	memset(frame + HDR, 0xa5, len - HDR);
	assert_int_equal(send(tap_peer, frame, len, 0), (ssize_t)len);
}

static void test_counters_start_at_zero(void **state)
{
	static const char *const keys[] = {
	    "rx_packets_total", "rx_bytes_total", "tx_packets_total",  "tx_bytes_total",
	    "rx_drops_total",   "tx_drops_total", "rx_no_buffer_total"};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(keys); i++)
		assert_int_equal(net0(keys[i]), 0);
	assert_false(unit_counters_read(COUNTER_NIC, "net1", &(struct unit_counters){0}));
}

static void test_tx_counts_and_drops(void **state)
{
	uint8_t got[256];

	(void)state;
	start_device();
	guest_send(0, 60);
	assert_true(wait_used(TX_USED, 1));
	assert_int_equal(recv(tap_peer, got, sizeof(got), 0), HDR + 60);
	assert_true(wait_counter("tx_packets_total", 1));
	assert_int_equal(net0("tx_bytes_total"), 60);
	assert_int_equal(net0("tx_drops_total"), 0);
	/* The tap refuses the next one (the host stopped reading: EPIPE). */
	assert_int_equal(shutdown(tap_peer, SHUT_RD), 0);
	guest_send(1, 100);
	assert_true(wait_used(TX_USED, 2));
	assert_true(wait_counter("tx_drops_total", 1));
	assert_int_equal(net0("tx_packets_total"), 1);
	assert_int_equal(net0("tx_bytes_total"), 60);
}

static void test_rx_counts_and_drops(void **state)
{
	uint64_t rx0 = net0("rx_packets_total"), bytes0 = net0("rx_bytes_total");

	(void)state;
	/* One 2 KiB buffer. */
	start_device();
	put_desc(RX_DESC, 0, RX_BUF, RX_BUF_LEN, VRING_DESC_F_WRITE);
	avail_add(RX_AVAIL, 0);
	wr(REGION_NOTIFY, 2, 0);
	/* Too big for it: dropped, the buffer stays the guest's. */
	host_send(3000);
	assert_true(wait_counter("rx_drops_total", 1));
	assert_int_equal(get16(RX_USED + 2), 0);
	/* This one fits; then the buffers have run out. */
	host_send(HDR + 100);
	assert_true(wait_used(RX_USED, 1));
	assert_true(wait_counter("rx_packets_total", rx0 + 1));
	assert_int_equal(net0("rx_bytes_total"), bytes0 + 100);
	assert_int_equal(net0("rx_drops_total"), 1);
	for (int i = 0; i < 5000 && net0("rx_no_buffer_total") == 0; i++)
		usleep(1000);
	assert_true(net0("rx_no_buffer_total") >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counters_start_at_zero),
	    cmocka_unit_test(test_tx_counts_and_drops),
	    cmocka_unit_test(test_rx_counts_and_drops),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
