/*
 * Unit tests for the virtio transport's saved state (virtio_pci_save() and
 * virtio_pci_restore() in src/bus/virtio_pci.h): a driver's setup (features,
 * status, queues, vectors) and the rings' progress survive a save, a
 * device reset and a restore; the restore re-drives features_ok, start and
 * one kick per queue; a virtio-rnd request queued before the save completes
 * exactly once after the restore; hostile or cut sections are refused with
 * the device left as it was.
 *
 * No KVM (vm_fd -1: ioeventfds and irqfds fail harmlessly); one RAM region
 * from calloc().  pci_init() runs once; each test starts from a reset device.
 */
#include "unit.h"

#include "bus/pci.h"
#include "bus/pci_slot.h"
#include "bus/virtio_pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define RAM_GPA    0x100000ull
#define RAM_SIZE   0x100000ull

#define DESC_GPA   (RAM_GPA + 0x0000)
#define AVAIL_GPA  (RAM_GPA + 0x1000)
#define USED_GPA   (RAM_GPA + 0x2000)
#define DESC1_GPA  (RAM_GPA + 0x4000)
#define AVAIL1_GPA (RAM_GPA + 0x5000)
#define USED1_GPA  (RAM_GPA + 0x6000)
#define DATA_GPA   (RAM_GPA + 0x10000)

/* Modern region layout and common configuration (virtio 1.2 4.1.4.3). */
#define VBAR           4
#define REGION_ISR     0x1000
#define REGION_NOTIFY  0x3000
#define CC_DFSELECT    0x00
#define CC_GFSELECT    0x08
#define CC_GF          0x0c
#define CC_MSIX_CONFIG 0x10
#define CC_STATUS      0x14
#define CC_CFG_GEN     0x15
#define CC_Q_SELECT    0x16
#define CC_Q_SIZE      0x18
#define CC_Q_MSIX      0x1a
#define CC_Q_ENABLE    0x1c
#define CC_Q_DESC      0x20
#define CC_Q_DRIVER    0x28
#define CC_Q_DEVICE    0x30

#define ST_ACK         VIRTIO_STATUS_ACKNOWLEDGE
#define ST_DRV         VIRTIO_STATUS_DRIVER
#define ST_FOK         VIRTIO_STATUS_FEATURES_OK
#define ST_DOK         VIRTIO_STATUS_DRIVER_OK

/* A test-only virtio device: two queues of up to 16, hooks that count. */
struct uvirt {
	struct virtio_dev vd;
	unsigned starts, stops, features_oks;
};

static void uv_start(struct virtio_dev *d)
{
	((struct uvirt *)d->softc)->starts++;
}

static void uv_stop(struct virtio_dev *d)
{
	((struct uvirt *)d->softc)->stops++;
}

static void uv_features_ok(struct virtio_dev *d)
{
	((struct uvirt *)d->softc)->features_oks++;
}

static const struct virtio_ops uv_ops = {
    .name = "unit-virtio-state",
    .device_type = 42,
    .pci_class = 0xff,
    .start = uv_start,
    .stop = uv_stop,
    .features_ok = uv_features_ok,
};

static int uv_init(struct machine *mach, struct pci_func *pf, struct config_node *node, char *err,
                   size_t errlen)
{
	struct uvirt *u = calloc(1, sizeof(*u));

	(void)mach;
	(void)node;
	if (u == NULL)
		return -1;
	return virtio_pci_init(&u->vd, pf, &uv_ops, u, 2, 16, 1ull << 0, 0, err, errlen);
}

PCI_DEVEMU(unit_virtio_state) = {
    .name = "unit-virtio-state",
    .init = uv_init,
    .bar_read = virtio_pci_bar_read,
    .bar_write = virtio_pci_bar_write,
    .bar_moved = virtio_pci_bar_moved,
    .vector_changed = virtio_pci_vector_changed,
};

static struct machine m;
static uint8_t *ram;
static struct pci_func *rf, *uf; /* virtio-rnd at 0:3.0, the unit device at 0:4.0 */
static struct virtio_dev *rvd, *uvd;
static struct uvirt *uv;

static int group_setup(void **state)
{
	char err[256] = "";

	(void)state;
	ram = calloc(1, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "unit", ram, RAM_GPA, RAM_SIZE) < 0)
		return -1;
	config_reset();
	if (config_set("pci.0.3.0.device", "virtio-rnd") < 0 ||
	    config_set("pci.0.4.0.device", "unit-virtio-state") < 0)
		return -1;
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	rf = pci_get(0);
	uf = pci_get(1);
	if (rf == NULL || uf == NULL)
		return -1;
	rvd = rf->softc;
	uvd = uf->softc;
	uv = uvd->softc;
	pci_cfg_write(0, 3, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	pci_cfg_write(0, 4, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	return rf->bar[VBAR].mapped && uf->bar[VBAR].mapped ? 0 : -1;
}

static uint64_t rd(struct pci_func *f, uint64_t off, unsigned size)
{
	uint64_t v = 0;

	if (!iobus_access(&m.mmio, f->bar[VBAR].addr + off, size, false, &v))
		fail_msg("BAR 4 read at 0x%llx unclaimed", (unsigned long long)off);
	return v;
}

static void wr(struct pci_func *f, uint64_t off, unsigned size, uint64_t val)
{
	if (!iobus_access(&m.mmio, f->bar[VBAR].addr + off, size, true, &val))
		fail_msg("BAR 4 write at 0x%llx unclaimed", (unsigned long long)off);
}

static void drain_kicks(struct virtio_dev *vd)
{
	uint64_t v;

	for (unsigned q = 0; q < vd->nqueues; q++)
		while (read(vd->queue[q].kick_fd, &v, sizeof(v)) > 0)
			;
}

static unsigned kicks(struct virtio_dev *vd, unsigned q)
{
	uint64_t v = 0;

	return read(vd->queue[q].kick_fd, &v, sizeof(v)) == sizeof(v) ? (unsigned)v : 0;
}

static int reset(void **state)
{
	(void)state;
	wr(rf, CC_STATUS, 1, 0);
	wr(uf, CC_STATUS, 1, 0);
	memset(ram, 0, RAM_SIZE);
	drain_kicks(rvd);
	drain_kicks(uvd);
	uv->starts = uv->stops = uv->features_oks = 0;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	wr(rf, CC_STATUS, 1, 0); /* stops virtio-rnd's worker */
	return 0;
}

static uint8_t *hva(uint64_t gpa)
{
	return ram + (gpa - RAM_GPA);
}

static uint16_t get16(uint64_t gpa)
{
	return __atomic_load_n((uint16_t *)hva(gpa), __ATOMIC_SEQ_CST);
}

static void put16(uint64_t gpa, uint16_t v)
{
	__atomic_store_n((uint16_t *)hva(gpa), v, __ATOMIC_SEQ_CST);
}

/* ACK, DRIVER, features VERSION_1 plus `low`, FEATURES_OK. */
static void negotiate(struct pci_func *f, uint32_t low)
{
	wr(f, CC_STATUS, 1, ST_ACK);
	wr(f, CC_STATUS, 1, ST_ACK | ST_DRV);
	wr(f, CC_GFSELECT, 4, 0);
	wr(f, CC_GF, 4, low);
	wr(f, CC_GFSELECT, 4, 1);
	wr(f, CC_GF, 4, 1);
	wr(f, CC_STATUS, 1, ST_ACK | ST_DRV | ST_FOK);
	assert_true(rd(f, CC_STATUS, 1) & ST_FOK);
}

static void setup_queue(struct pci_func *f, unsigned q, uint16_t size, uint16_t vec, uint64_t desc,
                        uint64_t avail, uint64_t used)
{
	wr(f, CC_Q_SELECT, 2, q);
	wr(f, CC_Q_SIZE, 2, size);
	wr(f, CC_Q_MSIX, 2, vec);
	wr(f, CC_Q_DESC, 4, (uint32_t)desc);
	wr(f, CC_Q_DRIVER, 4, (uint32_t)avail);
	wr(f, CC_Q_DEVICE, 4, (uint32_t)used);
	wr(f, CC_Q_ENABLE, 2, 1);
}

/* The unit device as a driver leaves it, rings part-way through. */
static void program_unit(void)
{
	negotiate(uf, (1u << 0) | (1u << VIRTIO_F_EVENT_IDX));
	setup_queue(uf, 0, 8, 1, DESC_GPA, AVAIL_GPA, USED_GPA);
	setup_queue(uf, 1, 16, VIRTIO_MSI_NO_VECTOR, DESC1_GPA, AVAIL1_GPA, USED1_GPA);
	wr(uf, CC_MSIX_CONFIG, 2, 0);
	wr(uf, CC_STATUS, 1, ST_ACK | ST_DRV | ST_FOK | ST_DOK);
	wr(uf, CC_DFSELECT, 4, 1);
	wr(uf, CC_Q_SELECT, 2, 1);
	uvd->queue[0].vq.last_avail = 5;
	uvd->queue[0].vq.used_idx = 4;
	uvd->queue[0].vq.signalled_used = 3;
	uvd->queue[0].vq.signalled_valid = true;
	uvd->queue[1].vq.last_avail = 0xfffe; /* indices wrap */
	uvd->queue[1].vq.used_idx = 0xfffe;
	uvd->isr = 1;
	uvd->config_generation = 7;
}

static void save(struct virtio_dev *vd, struct sbuf *out)
{
	memset(out, 0, sizeof(*out));
	virtio_pci_save(vd, out);
	assert_false(out->failed);
}

static int restore(struct virtio_dev *vd, const uint8_t *p, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader in;

	sbuf_reader_init(&in, p, len);
	if (virtio_pci_restore(vd, &in) < 0) {
		snprintf(err, errlen, "%s", in.why);
		return -1;
	}
	return sbuf_reader_done(&in, "virtio", err, errlen);
}

/* Section layout (virtio_pci.h): offsets of the fields the tests patch. */
#define OFF_NQUEUES 2
#define OFF_DEVF    6
#define OFF_DRVF    14
#define OFF_STATUS  30
#define OFF_ISR     32
#define OFF_MSIXCFG 36
#define OFF_Q(q)    (38 + 37 * (q))
#define Q_SIZE      0
#define Q_VEC       2
#define Q_ENABLED   4
#define Q_DESC      6
#define SECTION_LEN (38 + 37 * 2)

/* ---- tests ---- */

static void test_round_trip(void **state)
{
	struct sbuf out;
	char err[128] = "";
	uint64_t isr;

	(void)state;
	program_unit();
	save(uvd, &out);
	assert_int_equal(out.len, SECTION_LEN);
	wr(uf, CC_STATUS, 1, 0); /* reset: everything forgotten */
	assert_int_equal(uv->stops, 1);
	assert_false(uvd->queue[0].vq.ready);
	drain_kicks(uvd);
	uv->starts = uv->features_oks = 0;

	assert_int_equal(restore(uvd, out.data, out.len, err, sizeof(err)), 0);
	/* what the driver reads back */
	assert_int_equal(rd(uf, CC_STATUS, 1), ST_ACK | ST_DRV | ST_FOK | ST_DOK);
	assert_int_equal(rd(uf, CC_DFSELECT, 4), 1);
	assert_int_equal(rd(uf, CC_Q_SELECT, 2), 1);
	assert_int_equal(rd(uf, CC_Q_SIZE, 2), 16);
	assert_int_equal(rd(uf, CC_Q_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
	assert_int_equal(rd(uf, CC_Q_ENABLE, 2), 1);
	assert_int_equal(rd(uf, CC_Q_DESC, 8), DESC1_GPA);
	assert_int_equal(rd(uf, CC_MSIX_CONFIG, 2), 0);
	assert_int_equal(rd(uf, CC_CFG_GEN, 1), 7);
	wr(uf, CC_Q_SELECT, 2, 0);
	assert_int_equal(rd(uf, CC_Q_SIZE, 2), 8);
	assert_int_equal(rd(uf, CC_Q_MSIX, 2), 1);
	assert_int_equal(rd(uf, CC_Q_DRIVER, 8), AVAIL_GPA);
	assert_int_equal(rd(uf, CC_Q_DEVICE, 8), USED_GPA);
	isr = rd(uf, REGION_ISR, 1);
	assert_int_equal(isr, 1);
	assert_true(virtio_has_feature(uvd, 0));
	assert_true(virtio_has_feature(uvd, VIRTIO_F_VERSION_1));
	/* the rings, mapped again with their progress */
	assert_true(uvd->queue[0].vq.ready);
	assert_true(uvd->queue[0].vq.event_idx);
	assert_false(uvd->queue[0].vq.indirect);
	assert_ptr_equal(uvd->queue[0].vq.desc, hva(DESC_GPA));
	assert_ptr_equal((void *)uvd->queue[1].vq.used_hdr, hva(USED1_GPA));
	assert_int_equal(uvd->queue[0].vq.last_avail, 5);
	assert_int_equal(uvd->queue[0].vq.used_idx, 4);
	assert_int_equal(uvd->queue[0].vq.signalled_used, 3);
	assert_true(uvd->queue[0].vq.signalled_valid);
	assert_int_equal(uvd->queue[1].vq.last_avail, 0xfffe);
	/* re-driven: features_ok, start, one kick per ready queue */
	assert_int_equal(uv->features_oks, 1);
	assert_int_equal(uv->starts, 1);
	assert_true(uvd->started);
	assert_int_equal(kicks(uvd, 0), 1);
	assert_int_equal(kicks(uvd, 1), 1);
	sbuf_free(&out);
}

/* A device the driver has not started restores as not started. */
static void test_round_trip_idle(void **state)
{
	struct sbuf out;
	char err[128] = "";

	(void)state;
	negotiate(uf, 1);
	setup_queue(uf, 0, 4, 0, DESC_GPA, AVAIL_GPA, USED_GPA);
	save(uvd, &out);
	wr(uf, CC_STATUS, 1, 0);
	uv->features_oks = 0;
	assert_int_equal(restore(uvd, out.data, out.len, err, sizeof(err)), 0);
	assert_int_equal(rd(uf, CC_STATUS, 1), ST_ACK | ST_DRV | ST_FOK);
	assert_false(uvd->started);
	assert_int_equal(uv->starts, 0);
	assert_int_equal(uv->features_oks, 1);
	assert_true(uvd->queue[0].vq.ready);
	assert_false(uvd->queue[1].enabled);
	assert_int_equal(uvd->queue[1].size, 16);
	sbuf_free(&out);
}

/* A driver may write features the device does not offer (FEATURES_OK
 * then stays clear): such a state restores (found by fuzz_virtio_rnd). */
static void test_round_trip_unoffered_features(void **state)
{
	struct sbuf out;
	char err[128] = "";

	(void)state;
	wr(uf, CC_STATUS, 1, ST_ACK | ST_DRV);
	wr(uf, CC_GFSELECT, 4, 0);
	wr(uf, CC_GF, 4, 0xc);
	wr(uf, CC_STATUS, 1, ST_ACK | ST_DRV | ST_FOK);
	assert_int_equal(rd(uf, CC_STATUS, 1), ST_ACK | ST_DRV);
	save(uvd, &out);
	wr(uf, CC_STATUS, 1, 0);
	assert_int_equal(restore(uvd, out.data, out.len, err, sizeof(err)), 0);
	assert_int_equal(rd(uf, CC_STATUS, 1), ST_ACK | ST_DRV);
	assert_int_equal(rd(uf, CC_GF, 4), 0xc);
	sbuf_free(&out);
}

/* Refuse `out` with `n` bytes at `off` replaced; the device stays reset. */
static void refuse(const struct sbuf *out, size_t off, const void *bytes, size_t n, const char *why)
{
	uint8_t *copy = malloc(out->len);
	char err[128] = "";

	assert_non_null(copy);
	memcpy(copy, out->data, out->len);
	memcpy(copy + off, bytes, n);
	assert_int_equal(restore(uvd, copy, out->len, err, sizeof(err)), -1);
	assert_contains(err, why);
	assert_int_equal(rd(uf, CC_STATUS, 1), 0);
	assert_false(uvd->started);
	assert_false(uvd->queue[0].enabled);
	assert_int_equal(uv->starts, 0);
	free(copy);
}

static void test_refusals(void **state)
{
	struct sbuf out;
	char err[128];
	uint64_t q;
	uint32_t u;
	uint16_t h;
	uint8_t b;

	(void)state;
	program_unit();
	save(uvd, &out);
	wr(uf, CC_STATUS, 1, 0);
	uv->starts = 0;

	h = 2;
	refuse(&out, 0, &h, 2, "version 2");
	u = 3;
	refuse(&out, OFF_NQUEUES, &u, 4, "3 queues, this device has 2");
	q = 0;
	refuse(&out, OFF_DEVF, &q, 8, "device features 0x0");
	q = (1ull << VIRTIO_F_VERSION_1) | (1ull << 5);
	refuse(&out, OFF_DRVF, &q, 8, "driver features 0x100000020 not offered");
	b = ST_DOK | VIRTIO_STATUS_DEVICE_NEEDS_RESET;
	refuse(&out, OFF_STATUS, &b, 1, "NEEDS_RESET");
	b = 4;
	refuse(&out, OFF_ISR, &b, 1, "ISR 0x04");
	h = 3; /* 2 queues + config: vectors 0-2 */
	refuse(&out, OFF_MSIXCFG, &h, 2, "config MSI-X vector 3");
	h = 12;
	refuse(&out, OFF_Q(0) + Q_SIZE, &h, 2, "queue 0 size 12");
	h = 32;
	refuse(&out, OFF_Q(1) + Q_SIZE, &h, 2, "queue 1 size 32");
	h = 0;
	refuse(&out, OFF_Q(1) + Q_SIZE, &h, 2, "queue 1 size 0");
	h = 7;
	refuse(&out, OFF_Q(0) + Q_VEC, &h, 2, "queue 0 MSI-X vector 7");
	b = 0;
	refuse(&out, OFF_Q(0) + Q_ENABLED, &b, 1, "queue 0 ready but not enabled");
	q = 0x5000; /* below RAM */
	refuse(&out, OFF_Q(1) + Q_DESC, &q, 8, "queue 1 rings are outside guest RAM");
	q = DESC_GPA + 8; /* misaligned */
	refuse(&out, OFF_Q(0) + Q_DESC, &q, 8, "queue 0 rings");
	for (size_t len = 0; len < out.len; len++) {
		if (restore(uvd, out.data, len, err, sizeof(err)) != -1)
			fail_msg("a section cut to %zu of %zu bytes was accepted", len, out.len);
		assert_false(uvd->started);
	}
	sbuf_free(&out);
}

/*
 * virtio-rnd end to end: one request served, a second one queued, save,
 * reset, restore: the second is served exactly once, the first not again.
 */
static void test_rnd_request_after_restore(void **state)
{
	struct vring_desc d0 = {.addr = DATA_GPA, .len = 16, .flags = VRING_DESC_F_WRITE};
	struct vring_desc d1 = {.addr = DATA_GPA + 64, .len = 16, .flags = VRING_DESC_F_WRITE};
	static const uint8_t zero[16];
	struct sbuf out;
	char err[128] = "";

	(void)state;
	negotiate(rf, 0);
	setup_queue(rf, 0, 8, VIRTIO_MSI_NO_VECTOR, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(rf, CC_STATUS, 1, ST_ACK | ST_DRV | ST_FOK | ST_DOK);
	memcpy(hva(DESC_GPA), &d0, sizeof(d0));
	memcpy(hva(DESC_GPA + 16), &d1, sizeof(d1));
	put16(AVAIL_GPA + 4, 0);
	put16(AVAIL_GPA + 2, 1);
	wr(rf, REGION_NOTIFY, 2, 0);
	for (int i = 0; i < 5000 && get16(USED_GPA + 2) != 1; i++)
		usleep(1000);
	assert_int_equal(get16(USED_GPA + 2), 1);
	/* quiesced: the worker is idle; the second request is queued after */
	save(rvd, &out);
	put16(AVAIL_GPA + 6, 1);
	put16(AVAIL_GPA + 2, 2);
	wr(rf, CC_STATUS, 1, 0); /* stops the worker; nothing served */
	assert_int_equal(get16(USED_GPA + 2), 1);
	assert_memory_equal(hva(DATA_GPA + 64), zero, 16);

	assert_int_equal(restore(rvd, out.data, out.len, err, sizeof(err)), 0);
	for (int i = 0; i < 5000 && get16(USED_GPA + 2) != 2; i++)
		usleep(1000);
	assert_int_equal(get16(USED_GPA + 2), 2);
	assert_int_equal(__atomic_load_n((uint32_t *)hva(USED_GPA + 4 + 8), __ATOMIC_SEQ_CST), 1);
	assert_memory_not_equal(hva(DATA_GPA + 64), zero, 16);
	usleep(50 * 1000);
	assert_int_equal(get16(USED_GPA + 2), 2); /* and nothing more */
	sbuf_free(&out);
}

/*
 * virtio-rnd's own ops (pci_devemu quiesce/unquiesce/save/restore):
 * quiesced, a kicked request waits; unquiesced, it is served; a section
 * saved quiesced with one waiting restores (after a reset) and serves it
 * once.  The section is the version, then the transport.
 */
static void test_rnd_quiesce_save_restore(void **state)
{
	struct vring_desc d = {.addr = DATA_GPA, .len = 16, .flags = VRING_DESC_F_WRITE};
	struct sbuf out = {0};
	struct sbuf_reader in;
	char err[128] = "";

	(void)state;
	negotiate(rf, 0);
	setup_queue(rf, 0, 8, VIRTIO_MSI_NO_VECTOR, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(rf, CC_STATUS, 1, ST_ACK | ST_DRV | ST_FOK | ST_DOK);
	for (unsigned i = 0; i < 3; i++)
		memcpy(hva(DESC_GPA + 16 * i), &d, sizeof(d));
	assert_int_equal(rf->de->quiesce(rf, err, sizeof(err)), 0);
	put16(AVAIL_GPA + 4, 0);
	put16(AVAIL_GPA + 2, 1);
	wr(rf, REGION_NOTIFY, 2, 0);
	usleep(50 * 1000);
	assert_int_equal(get16(USED_GPA + 2), 0);
	rf->de->unquiesce(rf);
	for (int i = 0; i < 5000 && get16(USED_GPA + 2) != 1; i++)
		usleep(1000);
	assert_int_equal(get16(USED_GPA + 2), 1);

	assert_int_equal(rf->de->quiesce(rf, err, sizeof(err)), 0);
	put16(AVAIL_GPA + 6, 1);
	put16(AVAIL_GPA + 2, 2);
	wr(rf, REGION_NOTIFY, 2, 0);
	assert_int_equal(rf->de->save(rf, &out, err, sizeof(err)), 0);
	assert_int_equal(unit_le(out.data, 2), 1);
	assert_int_equal(unit_le(out.data + 2, 2), 1); /* the transport's version */
	wr(rf, CC_STATUS, 1, 0);
	rf->de->unquiesce(rf); /* a stopped worker: nothing to do */
	assert_int_equal(get16(USED_GPA + 2), 1);
	sbuf_reader_init(&in, out.data, out.len);
	assert_int_equal(rf->de->restore(rf, &in, err, sizeof(err)), 0);
	assert_int_equal(sbuf_reader_done(&in, "virtio-rnd", err, sizeof(err)), 0);
	for (int i = 0; i < 5000 && get16(USED_GPA + 2) != 2; i++)
		usleep(1000);
	assert_int_equal(get16(USED_GPA + 2), 2);
	usleep(50 * 1000);
	assert_int_equal(get16(USED_GPA + 2), 2);
	/* version 2 is refused */
	out.data[0] = 2;
	sbuf_reader_init(&in, out.data, out.len);
	assert_int_equal(rf->de->restore(rf, &in, err, sizeof(err)), -1);
	assert_contains(in.why, "version 2");
	sbuf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_round_trip, reset),
	    cmocka_unit_test_setup(test_round_trip_idle, reset),
	    cmocka_unit_test_setup(test_round_trip_unoffered_features, reset),
	    cmocka_unit_test_setup(test_refusals, reset),
	    cmocka_unit_test_setup(test_rnd_request_after_restore, reset),
	    cmocka_unit_test_setup(test_rnd_quiesce_save_restore, reset),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
