/*
 * Unit tests for virtio-net's saved state (src/dev/virtio_net.c: the
 * pci_devemu quiesce/unquiesce/save/restore ops): quiesced, the device
 * sends nothing the guest queues and delivers nothing the tap brings (the
 * frame waits in the tap), and the unquiesce catches up on both; the
 * section holds the MAC, status and MTU; a restore after a reset gives the
 * guest its saved MAC back and the rings carry on (used index continuing,
 * nothing sent twice); a hostile or cut section is refused and leaves the
 * device reset.
 *
 * As tests/unit/test_net_counters.c: a detached machine (no KVM), the
 * tap a datagram socket pair behind wrapped tap_*() (see the Makefile).
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>

#include "backend/tap.h"
#include "bus/pci.h"
#include "bus/pci_slot.h"
#include "bus/virtio_pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define FAKE_TAP_WRAPPED /* the Makefile wraps tap_*() for this test */
#include "../fake_tap.h" /* the tap: a socket pair */

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
#define REGION_DEVICE 0x2000
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
#define ST_ALL        0x0f

static const uint8_t test_mac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};

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
	signal(SIGPIPE, SIG_IGN);
	ram = calloc(1, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "unit", ram, RAM_GPA, RAM_SIZE) < 0)
		return -1;
	config_reset();
	if (config_set("pci.0.4.0.device", "virtio-net") < 0 ||
	    config_set("pci.0.4.0.backend", "unit0") < 0 ||
	    config_set("pci.0.4.0.mac", "02:11:22:33:44:55") < 0 ||
	    config_set("pci.0.4.0.mtu", "1500") < 0)
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

/* Nothing left in the host's end of the tap from an earlier test. */
static void host_drain(void)
{
	uint8_t buf[4096];

	while (recv(tap_peer, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

/* VERSION_1 only (no mergeable buffers), both queues, DRIVER_OK. */
static void start_device(void)
{
	wr(CC_STATUS, 1, 0);
	memset(ram, 0, RAM_SIZE);
	host_drain();
	wr(CC_STATUS, 1, 0x01);
	wr(CC_STATUS, 1, 0x03);
	wr(CC_GFSELECT, 4, 0);
	wr(CC_GF, 4, 0);
	wr(CC_GFSELECT, 4, 1);
	wr(CC_GF, 4, 1);
	wr(CC_STATUS, 1, 0x0b);
	setup_queue(0, RX_DESC, RX_AVAIL, RX_USED);
	setup_queue(1, TX_DESC, TX_AVAIL, TX_USED);
	wr(CC_STATUS, 1, ST_ALL);
	assert_int_equal(rd(CC_STATUS, 1), ST_ALL);
}

/* The guest sends one frame of `len` bytes in transmit descriptor `i`. */
static void guest_send(unsigned i, unsigned len)
{
	memset(hva(TX_BUF + 256 * i), 0, HDR);
	memset(hva(TX_BUF + 256 * i) + HDR, (int)(0x50 + i), len);
	put_desc(TX_DESC, i, TX_BUF + 256 * i, HDR + len, 0);
	avail_add(TX_AVAIL, (uint16_t)i);
	wr(REGION_NOTIFY + 4, 2, 1);
}

/* The guest posts receive buffer `i` (RX_BUF_LEN bytes). */
static void guest_post_rx(unsigned i)
{
	put_desc(RX_DESC, i, RX_BUF + RX_BUF_LEN * i, RX_BUF_LEN, VRING_DESC_F_WRITE);
	avail_add(RX_AVAIL, (uint16_t)i);
	wr(REGION_NOTIFY, 2, 0);
}

static void host_send(unsigned len)
{
	static uint8_t frame[4096];

	memset(frame, 0, HDR);
	memset(frame + HDR, 0xa5, len - HDR);
	assert_int_equal(send(tap_peer, frame, len, 0), (ssize_t)len);
}

/* RARP announcements the host has seen since the last reset to 0. */
static unsigned rarps_seen;

/* A restore's self-announce: a broadcast RARP reverse request naming the
 * NIC's MAC as sender and target, padded to 60 bytes. */
static bool is_rarp(const uint8_t *buf, ssize_t n)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	const uint8_t *e = buf + HDR;

	if (n < HDR + 14 || e[12] != 0x80 || e[13] != 0x35)
		return false;
	assert_int_equal(n, HDR + 60);
	assert_memory_equal(e, bcast, 6);
	assert_memory_equal(e + 6, test_mac, 6);
	assert_int_equal(e[21], 3); /* op: reverse request */
	assert_memory_equal(e + 22, test_mac, 6);
	assert_memory_equal(e + 32, test_mac, 6);
	return true;
}

/* Frames the host received within `ms`, announcements left out: how many. */
static unsigned host_frames(unsigned ms)
{
	uint8_t buf[4096];
	unsigned n = 0;
	ssize_t got;

	for (unsigned t = 0; t < ms; t++) {
		while ((got = recv(tap_peer, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
			if (is_rarp(buf, got))
				rarps_seen++;
			else
				n++;
		}
		usleep(1000);
	}
	return n;
}

static void quiesce(void)
{
	char err[256] = "";

	if (f->de->quiesce(f, err, sizeof(err)) < 0)
		fail_msg("quiesce: %s", err);
}

static void save(struct sbuf *out)
{
	char err[256] = "";

	memset(out, 0, sizeof(*out));
	assert_int_equal(f->de->save(f, out, err, sizeof(err)), 0);
	assert_false(out->failed);
}

static int restore(const void *p, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader in;

	sbuf_reader_init(&in, p, len);
	if (f->de->restore(f, &in, err, errlen) < 0) {
		if (in.failed)
			snprintf(err, errlen, "%s", in.why);
		return -1;
	}
	return sbuf_reader_done(&in, "virtio-net", err, errlen);
}

/* ---- tests ---- */

static void test_quiesce_holds_both_directions(void **state)
{
	(void)state;
	start_device();
	guest_send(0, 60);
	assert_true(wait_used(TX_USED, 1));
	assert_int_equal(host_frames(20), 1);
	guest_post_rx(0);
	quiesce();
	/* queued and arriving while quiesced: neither moves */
	guest_send(1, 70);
	host_send(HDR + 80);
	assert_int_equal(host_frames(50), 0);
	assert_int_equal(get16(TX_USED + 2), 1);
	assert_int_equal(get16(RX_USED + 2), 0);
	f->de->unquiesce(f);
	assert_true(wait_used(TX_USED, 2));
	assert_true(wait_used(RX_USED, 1));
	assert_int_equal(host_frames(20), 1);
	assert_int_equal(*(uint32_t *)hva(RX_USED + 4 + 4), HDR + 80);
}

/* Saved quiesced with a transmit queued and a frame waiting; reset (a new
 * process would start from nothing); restored: each moves once. */
static void test_save_restore(void **state)
{
	uint8_t mac[6];
	struct sbuf out;
	char err[256] = "";

	(void)state;
	start_device();
	guest_send(0, 60);
	assert_true(wait_used(TX_USED, 1));
	assert_int_equal(host_frames(20), 1);
	quiesce();
	guest_send(1, 61);
	guest_post_rx(0);
	host_send(HDR + 90);
	save(&out);
	/* version, MAC, status (link up), mtu; then the transport */
	assert_int_equal(unit_le(out.data, 2), 1);
	assert_memory_equal(out.data + 2, test_mac, 6);
	assert_int_equal(unit_le(out.data + 8, 2), 1);
	assert_int_equal(unit_le(out.data + 10, 2), 1500);
	wr(CC_STATUS, 1, 0); /* A suspend: the device goes away quiesced. */
	f->de->unquiesce(f); /* (harmless on a stopped device) */
	assert_int_equal(get16(TX_USED + 2), 1);

	assert_int_equal(restore(out.data, out.len, err, sizeof(err)), 0);
	assert_int_equal(rd(CC_STATUS, 1), ST_ALL);
	for (unsigned i = 0; i < 6; i++)
		mac[i] = (uint8_t)rd(REGION_DEVICE + i, 1);
	assert_memory_equal(mac, test_mac, 6);
	assert_true(wait_used(TX_USED, 2));
	assert_true(wait_used(RX_USED, 1));
	assert_int_equal(host_frames(30), 1); /* frame 1 once, frame 0 not again */
	assert_int_equal(get16(TX_USED + 2), 2);
	/* and it goes on */
	guest_send(2, 62);
	assert_true(wait_used(TX_USED, 3));
	assert_int_equal(host_frames(20), 1);
	sbuf_free(&out);
}

/* After a restore the NIC announces its MAC five times (50 ms, then 100,
 * 200, 300 and 400 ms apart, as QEMU's self-announce), then no more. */
static void test_restore_announces(void **state)
{
	struct sbuf out;
	char err[256] = "";

	(void)state;
	start_device();
	quiesce();
	save(&out);
	wr(CC_STATUS, 1, 0);
	f->de->unquiesce(f);
	host_drain();
	rarps_seen = 0;
	assert_int_equal(restore(out.data, out.len, err, sizeof(err)), 0);
	assert_int_equal(host_frames(30), 0);
	assert_int_equal(rarps_seen, 0); /* the first waits 50 ms */
	for (unsigned t = 0; t < 3000 && rarps_seen < 5; t += 100)
		host_frames(100);
	assert_int_equal(rarps_seen, 5);
	host_frames(600);
	assert_int_equal(rarps_seen, 5);
	sbuf_free(&out);
}

static void refuse(const struct sbuf *out, size_t off, const void *bytes, size_t n, const char *why)
{
	uint8_t *copy = malloc(out->len);
	char err[256] = "";

	assert_non_null(copy);
	memcpy(copy, out->data, out->len);
	memcpy(copy + off, bytes, n);
	assert_int_equal(restore(copy, out->len, err, sizeof(err)), -1);
	assert_contains(err, why);
	assert_int_equal(rd(CC_STATUS, 1), 0);
	assert_int_equal(rd(REGION_DEVICE, 1), test_mac[0]);
	free(copy);
}

static void test_refusals(void **state)
{
	static const uint8_t multicast[6] = {0x03, 0, 0, 0, 0, 1};
	struct sbuf out;
	char err[256];
	uint16_t h;
	uint8_t b;

	(void)state;
	start_device();
	quiesce();
	save(&out);
	f->de->unquiesce(f);
	wr(CC_STATUS, 1, 0);

	h = 2;
	refuse(&out, 0, &h, 2, "version 2");
	refuse(&out, 2, multicast, 6, "MAC 03:00:00:00:00:01 is not unicast");
	h = 0x8;
	refuse(&out, 8, &h, 2, "status 0x8");
	h = 9000;
	refuse(&out, 10, &h, 2, "mtu 9000, this device has 1500");
	b = 0x44; /* the transport's status: NEEDS_RESET */
	refuse(&out, 12 + 30, &b, 1, "NEEDS_RESET");
	for (size_t len = 0; len < out.len; len++) {
		if (restore(out.data, len, err, sizeof(err)) != -1)
			fail_msg("a section cut to %zu of %zu bytes was accepted", len, out.len);
		assert_int_equal(rd(CC_STATUS, 1), 0);
	}
	sbuf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quiesce_holds_both_directions),
	    cmocka_unit_test(test_save_restore),
	    cmocka_unit_test(test_restore_announces),
	    cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
