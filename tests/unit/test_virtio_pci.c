/*
 * Unit tests for the virtio PCI transport (src/bus/virtio_pci.h), driven
 * through a virtio-rnd function: the modern common configuration in BAR 4
 * (features, status, queue setup), ISR, device config and notify regions,
 * reset, and a request served end to end by the device's worker thread.
 *
 * There is no KVM here: the fake machine has vm_fd -1 (ioeventfd and
 * interrupt ioctls fail harmlessly) and one RAM region made from malloc()
 * so that queue rings can be validated and used.  pci_init() runs once for
 * the whole file; every test starts with a device reset (status 0).
 */
#include "unit.h"

#include <dirent.h>
#include <pthread.h>
#include <time.h>

#include "core/iobus.h"
#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "core/machine.h"
#include "lib/config.h"

/* A regression check for a bug found by these tests and since fixed. */
#define regression(cond, ...)                                                                      \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fail_msg("regression: " __VA_ARGS__);                                      \
	} while (0)

#define RAM_GPA  0x100000ull
#define RAM_SIZE 0x100000ull

/* Ring layout used by the tests. */
#define DESC_GPA  (RAM_GPA + 0x0000)
#define AVAIL_GPA (RAM_GPA + 0x1000)
#define USED_GPA  (RAM_GPA + 0x2000)
#define DATA_GPA  (RAM_GPA + 0x10000)

/* Modern region layout and common configuration (virtio 1.2 4.1.4.3). */
#define VBAR            4
#define REGION_ISR      0x1000
#define REGION_DEVICE   0x2000
#define REGION_NOTIFY   0x3000
#define CC_DFSELECT     0x00
#define CC_DF           0x04
#define CC_GFSELECT     0x08
#define CC_GF           0x0c
#define CC_MSIX_CONFIG  0x10
#define CC_NUM_QUEUES   0x12
#define CC_STATUS       0x14
#define CC_CFG_GEN      0x15
#define CC_Q_SELECT     0x16
#define CC_Q_SIZE       0x18
#define CC_Q_MSIX       0x1a
#define CC_Q_ENABLE     0x1c
#define CC_Q_NOTIFY_OFF 0x1e
#define CC_Q_DESC       0x20
#define CC_Q_DRIVER     0x28
#define CC_Q_DEVICE     0x30

#define ST_ACK          VIRTIO_STATUS_ACKNOWLEDGE
#define ST_DRV          VIRTIO_STATUS_DRIVER
#define ST_FOK          VIRTIO_STATUS_FEATURES_OK
#define ST_DOK          VIRTIO_STATUS_DRIVER_OK
#define ST_NEED         VIRTIO_STATUS_DEVICE_NEEDS_RESET

/*
 * A test-only virtio device next to virtio-rnd: two queues, a 6-byte
 * device configuration, a device feature in each word, and hooks that
 * record what the transport asks of it (no threads).
 */
struct uvirt {
	struct virtio_dev vd;
	uint8_t config[6];
	unsigned cfg_reads, cfg_writes, starts, stops, features_oks;
	unsigned max_end; /* largest off + size the config hooks saw */
};

static void uv_cfg_read(struct virtio_dev *d, unsigned off, unsigned size, void *buf)
{
	struct uvirt *u = d->softc;

	u->cfg_reads++;
	if (off + size > u->max_end)
		u->max_end = off + size;
	if (off + size <= sizeof(u->config))
		memcpy(buf, u->config + off, size);
}

static void uv_cfg_write(struct virtio_dev *d, unsigned off, unsigned size, const void *buf)
{
	struct uvirt *u = d->softc;

	u->cfg_writes++;
	if (off + size > u->max_end)
		u->max_end = off + size;
	if (off + size <= sizeof(u->config))
		memcpy(u->config + off, buf, size);
}

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
    .name = "unit-virtio",
    .device_type = 42,
    .pci_class = 0xff,
    .cfg_read = uv_cfg_read,
    .cfg_write = uv_cfg_write,
    .start = uv_start,
    .stop = uv_stop,
    .features_ok = uv_features_ok,
};

#define UV_FEATURES ((1ull << 0) | (1ull << 40))

static int uv_init(struct machine *mach, struct pci_func *pf, struct config_node *node, char *err,
                   size_t errlen)
{
	struct uvirt *u = calloc(1, sizeof(*u));

	(void)mach;
	(void)node;
	if (u == NULL)
		return -1;
	memcpy(u->config, "\x01\x02\x03\x04\x05\x06", 6);
	return virtio_pci_init(&u->vd, pf, &uv_ops, u, 2, 16, UV_FEATURES, sizeof(u->config), err,
	                       errlen);
}

PCI_DEVEMU(unit_virtio) = {
    .name = "unit-virtio",
    .init = uv_init,
    .bar_read = virtio_pci_bar_read,
    .bar_write = virtio_pci_bar_write,
    .bar_moved = virtio_pci_bar_moved,
    .vector_changed = virtio_pci_vector_changed,
};

static struct machine m;
static uint8_t *ram;
static struct pci_func *f, *uf; /* virtio-rnd at 0:3.0, unit-virtio at 0:4.0 */
static struct virtio_dev *vd;
static struct uvirt *uv;
static uint64_t bar, ubar; /* their BAR 4s */

static int group_setup(void **state)
{
	char err[256] = "";

	(void)state;
	ram = calloc(1, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "unit", ram, RAM_GPA, RAM_SIZE) < 0)
		return -1;
	config_reset();
	if (config_set("pci.0.3.0.device", "virtio-rnd") < 0 ||
	    config_set("pci.0.4.0.device", "unit-virtio") < 0)
		return -1;
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	if (pci_count() != 2)
		return -1;
	f = pci_get(0);
	vd = f->softc;
	bar = f->bar[VBAR].addr;
	uf = pci_get(1);
	uv = ((struct virtio_dev *)uf->softc)->softc;
	ubar = uf->bar[VBAR].addr;
	/* Memory decoding on: BAR 4 (and the MSI-X BAR) on the MMIO bus. */
	pci_cfg_write(0, 3, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	pci_cfg_write(0, 4, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	return f->bar[VBAR].mapped && uf->bar[VBAR].mapped && uf->slot == 4 ? 0 : -1;
}

static uint64_t rd(uint64_t off, unsigned size)
{
	uint64_t v = 0x1111;

	if (!iobus_access(&m.mmio, bar + off, size, false, &v))
		fail_msg("BAR 4 read at 0x%llx unclaimed", (unsigned long long)off);
	return v;
}

static void wr(uint64_t off, unsigned size, uint64_t val)
{
	if (!iobus_access(&m.mmio, bar + off, size, true, &val))
		fail_msg("BAR 4 write at 0x%llx unclaimed", (unsigned long long)off);
}

static uint8_t status(void)
{
	return (uint8_t)rd(CC_STATUS, 1);
}

static void set_status(uint8_t s)
{
	wr(CC_STATUS, 1, s);
}

/* Every test starts with a reset device, MSI-X off and clean RAM. */
static int reset(void **state)
{
	(void)state;
	set_status(0);
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0);
	for (unsigned v = 0; v < f->msix.table_count; v++) {
		f->msix.table[v].addr = 0;
		f->msix.table[v].data = 0;
		f->msix.table[v].ctrl = 1;
	}
	memset(f->msix.pba, 0, ((f->msix.table_count + 63) / 64) * 8);
	pci_intx_deassert(f);
	memset(ram, 0, RAM_SIZE);
	iobus_access(&m.mmio, ubar + CC_STATUS, 1, true, &(uint64_t){0});
	memcpy(uv->config, "\x01\x02\x03\x04\x05\x06", 6);
	uv->cfg_reads = uv->cfg_writes = uv->starts = uv->stops = uv->features_oks = 0;
	uv->max_end = 0;
	return status() == 0 && !vd->queue[0].enabled ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	set_status(0); /* stops a worker a failed test may have left */
	return 0;
}

/* ---- guest memory helpers ---- */

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

static uint32_t get32(uint64_t gpa)
{
	return __atomic_load_n((uint32_t *)hva(gpa), __ATOMIC_SEQ_CST);
}

static void put_desc(unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	struct vring_desc d = {.addr = addr, .len = len, .flags = flags, .next = next};

	memcpy(hva(DESC_GPA + 16ull * i), &d, sizeof(d));
}

static void avail_add(uint16_t qsize, uint16_t head)
{
	uint16_t idx = get16(AVAIL_GPA + 2);

	put16(AVAIL_GPA + 4 + 2ull * (idx % qsize), head);
	put16(AVAIL_GPA + 2, (uint16_t)(idx + 1));
}

/* Wait (up to 5 s) for the used index to reach `want`. */
static bool wait_used(uint16_t want)
{
	for (int i = 0; i < 5000; i++) {
		if (get16(USED_GPA + 2) == want)
			return true;
		usleep(1000);
	}
	return false;
}

static unsigned thread_count_now(void);

/*
 * The threads of this process once the count holds still: a thread that
 * pthread_join() has returned for can stay in /proc/self/task a moment
 * longer (the kernel reaps it after it cleared its tid), so one reading
 * may count a worker an earlier test or step already stopped.  Waits for
 * `want` (if not 0) or three equal readings, at most 2 s.
 */
static unsigned thread_count_settled(unsigned want)
{
	unsigned n = thread_count_now(), same = 0;

	for (int i = 0; i < 400 && (want ? n != want : same < 3); i++) {
		unsigned now;

		usleep(5000);
		now = thread_count_now();
		same = now == n ? same + 1 : 0;
		n = now;
	}
	return n;
}

static unsigned thread_count(void)
{
	return thread_count_settled(0);
}

static unsigned thread_count_now(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Accept VERSION_1 plus `low` (feature bits 0-31); true when FEATURES_OK
 * stuck. */
static bool negotiate(uint32_t low)
{
	set_status(ST_ACK);
	set_status(ST_ACK | ST_DRV);
	wr(CC_GFSELECT, 4, 0);
	wr(CC_GF, 4, low);
	wr(CC_GFSELECT, 4, 1);
	wr(CC_GF, 4, 1); /* VERSION_1 */
	set_status(ST_ACK | ST_DRV | ST_FOK);
	return status() & ST_FOK;
}

static void setup_queue(uint16_t size, uint64_t desc, uint64_t avail, uint64_t used)
{
	wr(CC_Q_SELECT, 2, 0);
	wr(CC_Q_SIZE, 2, size);
	wr(CC_Q_DESC, 4, (uint32_t)desc);
	wr(CC_Q_DESC + 4, 4, desc >> 32);
	wr(CC_Q_DRIVER, 4, (uint32_t)avail);
	wr(CC_Q_DRIVER + 4, 4, avail >> 32);
	wr(CC_Q_DEVICE, 4, (uint32_t)used);
	wr(CC_Q_DEVICE + 4, 4, used >> 32);
}

/* ---- identity ---- */

static void test_identity(void **state)
{
	unsigned ptr, vendor_caps = 0;
	bool seen_type[6] = {false};

	(void)state;
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_VENDOR, 2), 0x1af4);
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_DEVICE, 2), 0x1040 + 4);
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_REVID, 1), 1);
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_CLASS, 1), 0xff);
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_SUBVEND, 2), 0x1af4);
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_SUBDEV, 2), 0x1100); /* >= 0x40: modern only */
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_INTPIN, 1), 1);
	assert_int_equal(f->bar[VBAR].type, PCI_BAR_MEM32);
	assert_int_equal(f->bar[VBAR].size, 0x4000);
	assert_int_equal(f->msix.table_bar, 1);
	assert_int_equal(f->msix.table_count, 2); /* one queue + config */

	/* The vendor capabilities locate the regions in BAR 4. */
	ptr = pci_cfg_read(0, 3, 0, PCIR_CAP_PTR, 1);
	for (unsigned n = 0; ptr != 0 && n < 48; n++) {
		if (pci_cfg_read(0, 3, 0, ptr, 1) == PCIY_VENDOR) {
			unsigned len = pci_cfg_read(0, 3, 0, ptr + 2, 1);
			unsigned type = pci_cfg_read(0, 3, 0, ptr + 3, 1);
			uint32_t off = pci_cfg_read(0, 3, 0, ptr + 8, 4);
			uint32_t rlen = pci_cfg_read(0, 3, 0, ptr + 12, 4);

			vendor_caps++;
			assert_true(type >= 1 && type <= 5);
			seen_type[type] = true;
			if (type != 5) {
				assert_int_equal(pci_cfg_read(0, 3, 0, ptr + 4, 1), VBAR);
				assert_true(off + rlen <= f->bar[VBAR].size);
			}
			switch (type) {
			case 1:
				assert_int_equal(len, 16);
				assert_int_equal(off, 0);
				assert_int_equal(rlen, 0x38);
				break;
			case 2:
				assert_int_equal(len, 20);
				assert_int_equal(off, REGION_NOTIFY);
				assert_int_equal(pci_cfg_read(0, 3, 0, ptr + 16, 4), 4);
				break;
			case 3:
				assert_int_equal(off, REGION_ISR);
				break;
			case 4:
				assert_int_equal(off, REGION_DEVICE);
				break;
			default:
				assert_int_equal(len, 20);
			}
		}
		ptr = pci_cfg_read(0, 3, 0, ptr + 1, 1);
	}
	assert_int_equal(ptr, 0);
	assert_int_equal(vendor_caps, 5);
	for (unsigned t = 1; t <= 5; t++)
		assert_true(seen_type[t]);
	assert_int_equal(rd(CC_NUM_QUEUES, 2), 1);
}

/* ---- features ---- */

static void test_device_features(void **state)
{
	(void)state;
	assert_int_equal(vd->device_features, (1ull << VIRTIO_F_VERSION_1) |
	                                          (1ull << VIRTIO_F_INDIRECT_DESC) |
	                                          (1ull << VIRTIO_F_EVENT_IDX));
	assert_int_equal(rd(CC_DFSELECT, 4), 0);
	assert_int_equal(rd(CC_DF, 4), (1u << 28) | (1u << 29));
	wr(CC_DFSELECT, 4, 1);
	assert_int_equal(rd(CC_DFSELECT, 4), 1);
	assert_int_equal(rd(CC_DF, 4), 1); /* VERSION_1 is bit 32 */
	wr(CC_DFSELECT, 4, 2);
	assert_int_equal(rd(CC_DF, 4), 0);
	wr(CC_DFSELECT, 4, 0xffffffffu);
	assert_int_equal(rd(CC_DFSELECT, 4), 0xffffffffu);
	assert_int_equal(rd(CC_DF, 4), 0);
	/* Device features are read-only. */
	wr(CC_DFSELECT, 4, 0);
	wr(CC_DF, 4, 0xffffffffu);
	assert_int_equal(rd(CC_DF, 4), (1u << 28) | (1u << 29));
	assert_int_equal(rd(CC_DF, 2), 0);
	assert_int_equal(rd(CC_DF + 3, 1), 0x30);
}

static void test_driver_features(void **state)
{
	(void)state;
	assert_int_equal(rd(CC_GF, 4), 0);
	wr(CC_GFSELECT, 4, 0);
	wr(CC_GF, 4, 1u << 29);
	assert_int_equal(rd(CC_GF, 4), 1u << 29);
	wr(CC_GFSELECT, 4, 1);
	assert_int_equal(rd(CC_GFSELECT, 4), 1);
	assert_int_equal(rd(CC_GF, 4), 0);
	wr(CC_GF, 4, 1);
	assert_int_equal(rd(CC_GF, 4), 1);
	assert_int_equal(vd->driver_features, (1ull << 32) | (1ull << 29));
	assert_true(virtio_has_feature(vd, VIRTIO_F_VERSION_1));
	assert_true(virtio_has_feature(vd, VIRTIO_F_EVENT_IDX));
	assert_false(virtio_has_feature(vd, VIRTIO_F_INDIRECT_DESC));
	/* Selects beyond the two words hold nothing. */
	wr(CC_GFSELECT, 4, 2);
	wr(CC_GF, 4, 0xffffffffu);
	assert_int_equal(rd(CC_GF, 4), 0);
	assert_int_equal(vd->driver_features, (1ull << 32) | (1ull << 29));
	/* Rewriting a word replaces it. */
	wr(CC_GFSELECT, 4, 0);
	wr(CC_GF, 4, 1u << 28);
	assert_int_equal(vd->driver_features, (1ull << 32) | (1ull << 28));
}

static void test_features_ok(void **state)
{
	(void)state;
	/* Without VERSION_1: refused (the bit does not stick). */
	set_status(ST_ACK | ST_DRV);
	wr(CC_GFSELECT, 4, 0);
	wr(CC_GF, 4, 1u << 29);
	set_status(ST_ACK | ST_DRV | ST_FOK);
	assert_int_equal(status(), ST_ACK | ST_DRV);
	/* VERSION_1 with a bit the device does not offer: refused. */
	wr(CC_GF, 4, (1u << 29) | (1u << 5));
	wr(CC_GFSELECT, 4, 1);
	wr(CC_GF, 4, 1);
	set_status(ST_ACK | ST_DRV | ST_FOK);
	assert_int_equal(status(), ST_ACK | ST_DRV);
	wr(CC_GFSELECT, 4, 0);
	wr(CC_GF, 4, 1u << 29);
	wr(CC_GFSELECT, 4, 1);
	wr(CC_GF, 4, 1 | (1u << 1)); /* bit 33 */
	set_status(ST_ACK | ST_DRV | ST_FOK);
	assert_int_equal(status(), ST_ACK | ST_DRV);
	/* Fixed up: accepted. */
	wr(CC_GF, 4, 1);
	set_status(ST_ACK | ST_DRV | ST_FOK);
	assert_int_equal(status(), ST_ACK | ST_DRV | ST_FOK);
	assert_int_equal(vd->driver_features, (1ull << 32) | (1ull << 29));
	/* Once accepted, the driver features are frozen. */
	wr(CC_GF, 4, 0);
	wr(CC_GFSELECT, 4, 0);
	wr(CC_GF, 4, 0xffffffffu);
	assert_int_equal(vd->driver_features, (1ull << 32) | (1ull << 29));
	assert_int_equal(rd(CC_GF, 4), 1u << 29);

	/* Everything offered, at once. */
	set_status(0);
	assert_true(negotiate((1u << 28) | (1u << 29)));
	set_status(0);
	assert_true(negotiate(0));
	set_status(0);
	assert_false(negotiate(1u << 31));
	assert_int_equal(vd->driver_features & 0xffffffffu, 1u << 31);
}

/* ---- queue configuration ---- */

static void test_queue_select(void **state)
{
	(void)state;
	assert_int_equal(rd(CC_Q_SELECT, 2), 0);
	assert_int_equal(rd(CC_Q_SIZE, 2), 64);
	assert_int_equal(rd(CC_Q_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
	assert_int_equal(rd(CC_Q_ENABLE, 2), 0);
	assert_int_equal(rd(CC_Q_NOTIFY_OFF, 2), 0);
	assert_int_equal(rd(CC_Q_DESC, 8), 0);
	/* A queue that does not exist has size 0 and ignores writes. */
	for (unsigned q = 1; q < 3; q++) {
		wr(CC_Q_SELECT, 2, q);
		assert_int_equal(rd(CC_Q_SELECT, 2), q);
		assert_int_equal(rd(CC_Q_SIZE, 2), 0);
		wr(CC_Q_SIZE, 2, 16);
		wr(CC_Q_MSIX, 2, 0);
		wr(CC_Q_DESC, 4, DESC_GPA);
		wr(CC_Q_ENABLE, 2, 1);
		assert_int_equal(rd(CC_Q_SIZE, 2), 0);
		assert_int_equal(rd(CC_Q_ENABLE, 2), 0);
	}
	wr(CC_Q_SELECT, 2, 0xffff);
	assert_int_equal(rd(CC_Q_SIZE, 2), 0);
	assert_int_equal(status() & ST_NEED, 0);
	wr(CC_Q_SELECT, 2, 0);
	assert_int_equal(rd(CC_Q_SIZE, 2), 64);
	assert_int_equal(rd(CC_Q_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
	assert_int_equal(rd(CC_Q_DESC, 8), 0);
	/* The number of queues is read-only. */
	wr(CC_NUM_QUEUES, 2, 5);
	assert_int_equal(rd(CC_NUM_QUEUES, 2), 1);
}

static void test_queue_size(void **state)
{
	(void)state;
	wr(CC_Q_SIZE, 2, 32);
	assert_int_equal(rd(CC_Q_SIZE, 2), 32);
	/* Not a power of two, zero, or above the maximum: ignored. */
	static const uint16_t bad[] = {48, 3, 63, 0, 128, 256, 0x8000, 0xffff};
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		wr(CC_Q_SIZE, 2, bad[i]);
		assert_int_equal(rd(CC_Q_SIZE, 2), 32);
	}
	wr(CC_Q_SIZE, 2, 1);
	assert_int_equal(rd(CC_Q_SIZE, 2), 1);
	wr(CC_Q_SIZE, 2, 64);
	assert_int_equal(rd(CC_Q_SIZE, 2), 64);
	assert_int_equal(vd->queue[0].max_size, 64);
}

static void test_queue_msix_vector(void **state)
{
	(void)state;
	/* Valid vectors are those of the MSI-X table (2 here). */
	wr(CC_Q_MSIX, 2, 0);
	assert_int_equal(rd(CC_Q_MSIX, 2), 0);
	wr(CC_Q_MSIX, 2, 1);
	assert_int_equal(rd(CC_Q_MSIX, 2), 1);
	static const uint16_t bad[] = {2, 3, 0x100, 0x7fff, 0xfffe};
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		wr(CC_Q_MSIX, 2, 1);
		wr(CC_Q_MSIX, 2, bad[i]);
		assert_int_equal(rd(CC_Q_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
	}
	wr(CC_Q_MSIX, 2, VIRTIO_MSI_NO_VECTOR);
	assert_int_equal(rd(CC_Q_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
	/* The same rule for the configuration vector. */
	assert_int_equal(rd(CC_MSIX_CONFIG, 2), VIRTIO_MSI_NO_VECTOR);
	wr(CC_MSIX_CONFIG, 2, 1);
	assert_int_equal(rd(CC_MSIX_CONFIG, 2), 1);
	wr(CC_MSIX_CONFIG, 2, 2);
	assert_int_equal(rd(CC_MSIX_CONFIG, 2), VIRTIO_MSI_NO_VECTOR);
	wr(CC_MSIX_CONFIG, 2, 0);
	assert_int_equal(rd(CC_MSIX_CONFIG, 2), 0);
	wr(CC_MSIX_CONFIG, 2, 0x8000);
	assert_int_equal(rd(CC_MSIX_CONFIG, 2), VIRTIO_MSI_NO_VECTOR);
}

static void test_queue_addresses(void **state)
{
	(void)state;
	wr(CC_Q_DESC, 4, 0x12345000u);
	wr(CC_Q_DESC + 4, 4, 0x9);
	wr(CC_Q_DRIVER, 8, 0x0000000a12346000ull);
	wr(CC_Q_DEVICE + 4, 4, 0xb);
	wr(CC_Q_DEVICE, 4, 0x12347000u);
	assert_int_equal(rd(CC_Q_DESC, 8), 0x912345000ull);
	assert_int_equal(rd(CC_Q_DESC, 4), 0x12345000u);
	assert_int_equal(rd(CC_Q_DESC + 4, 4), 9);
	assert_int_equal(rd(CC_Q_DRIVER, 8), 0xa12346000ull);
	assert_int_equal(rd(CC_Q_DEVICE, 8), 0xb12347000ull);
	/* Narrow writes change only their bytes. */
	wr(CC_Q_DESC + 1, 1, 0x66);
	wr(CC_Q_DESC + 6, 2, 0x8000);
	assert_int_equal(rd(CC_Q_DESC, 8), 0x8000000912346600ull);
	assert_int_equal(vd->queue[0].desc, 0x8000000912346600ull);
	assert_int_equal(rd(CC_Q_DEVICE + 4, 4), 0xb);
	assert_int_equal(rd(CC_Q_DEVICE + 7, 1), 0);
	/* Reads past the common configuration, or running off its end,
	 * give 0. */
	assert_int_equal(rd(0x38, 4), 0);
	assert_int_equal(rd(0x34, 8), 0);
	assert_int_equal(rd(0x37, 2), 0);
	assert_int_equal(rd(0xffc, 4), 0);
	assert_int_equal(rd(0xfff, 1), 0);
	/* Writes there do nothing. */
	wr(0x38, 8, ~0ull);
	wr(0x34, 8, ~0ull);
	wr(0xff8, 8, ~0ull);
	assert_int_equal(rd(CC_Q_DEVICE, 8), 0xb12347000ull);
}

static void test_queue_enable_bad_rings(void **state)
{
	static const struct {
		uint16_t size;
		uint64_t desc, avail, used;
	} bad[] = {
	    {16, 0x5000, AVAIL_GPA, USED_GPA}, /* not RAM */
	    {16, DESC_GPA, 0x5000, USED_GPA},
	    {16, DESC_GPA, AVAIL_GPA, 0x5000},
	    {16, DESC_GPA + 8, AVAIL_GPA, USED_GPA}, /* misaligned */
	    {16, DESC_GPA, AVAIL_GPA + 1, USED_GPA},
	    {16, DESC_GPA, AVAIL_GPA, USED_GPA + 2},
	    {64, RAM_GPA + RAM_SIZE - 16 * 32, AVAIL_GPA, USED_GPA}, /* runs off the end */
	    {16, DESC_GPA, AVAIL_GPA, RAM_GPA + RAM_SIZE - 4},
	    {16, DESC_GPA, AVAIL_GPA, 0xfffffffffffffff0ull},
	    {16, 0, 0, 0}, /* never set */
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		set_status(0);
		assert_true(negotiate(0));
		setup_queue(bad[i].size, bad[i].desc, bad[i].avail, bad[i].used);
		wr(CC_Q_ENABLE, 2, 1);
		if (rd(CC_Q_ENABLE, 2) != 0)
			fail_msg("case %zu: queue enabled", i);
		assert_int_equal(status(), ST_ACK | ST_DRV | ST_FOK | ST_NEED);
		assert_false(vd->queue[0].vq.ready);
		/* Still not enabled on a second try; the fields can be fixed. */
		wr(CC_Q_ENABLE, 2, 1);
		assert_int_equal(rd(CC_Q_ENABLE, 2), 0);
		wr(CC_Q_SIZE, 2, 8);
		assert_int_equal(rd(CC_Q_SIZE, 2), 8);
	}
	/* The same rings fit with 32 entries. */
	set_status(0);
	assert_int_equal(status(), 0);
	assert_true(negotiate(0));
	setup_queue(32, RAM_GPA + RAM_SIZE - 16 * 32, AVAIL_GPA, USED_GPA);
	wr(CC_Q_ENABLE, 2, 1);
	assert_int_equal(rd(CC_Q_ENABLE, 2), 1);
	assert_int_equal(status() & ST_NEED, 0);
	/* Writing anything but 1 to queue_enable does nothing. */
	set_status(0);
	setup_queue(16, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(CC_Q_ENABLE, 2, 0);
	wr(CC_Q_ENABLE, 2, 2);
	wr(CC_Q_ENABLE, 2, 0xffff);
	assert_int_equal(rd(CC_Q_ENABLE, 2), 0);
	assert_int_equal(status(), 0);
}

static void test_queue_enable_frozen(void **state)
{
	struct virtqueue *q = &vd->queue[0].vq;

	(void)state;
	assert_true(negotiate(1u << VIRTIO_F_EVENT_IDX));
	setup_queue(16, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(CC_Q_MSIX, 2, 1);
	wr(CC_Q_ENABLE, 2, 1);
	assert_int_equal(rd(CC_Q_ENABLE, 2), 1);
	assert_true(q->ready);
	assert_int_equal(q->size, 16);
	assert_int_equal(q->desc_gpa, DESC_GPA);
	assert_int_equal(q->avail_gpa, AVAIL_GPA);
	assert_int_equal(q->used_gpa, USED_GPA);
	assert_true(q->event_idx);
	assert_false(q->indirect);
	assert_ptr_equal(q->gm, &m.vm.mem);
	assert_int_equal(status() & ST_NEED, 0);
	/* Nothing about an enabled queue changes. */
	wr(CC_Q_SIZE, 2, 32);
	wr(CC_Q_MSIX, 2, 0);
	wr(CC_Q_DESC, 4, DESC_GPA + 0x100);
	wr(CC_Q_DESC + 4, 4, 1);
	wr(CC_Q_DRIVER, 8, 0);
	wr(CC_Q_DEVICE + 1, 1, 0x55);
	wr(CC_Q_ENABLE, 2, 1);
	assert_int_equal(rd(CC_Q_SIZE, 2), 16);
	assert_int_equal(rd(CC_Q_MSIX, 2), 1);
	assert_int_equal(rd(CC_Q_DESC, 8), DESC_GPA);
	assert_int_equal(rd(CC_Q_DRIVER, 8), AVAIL_GPA);
	assert_int_equal(rd(CC_Q_DEVICE, 8), USED_GPA);
	assert_int_equal(q->size, 16);
	assert_int_equal(q->desc_gpa, DESC_GPA);
	/* Indirect descriptors when negotiated. */
	set_status(0);
	assert_true(negotiate(1u << VIRTIO_F_INDIRECT_DESC));
	setup_queue(8, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(CC_Q_ENABLE, 2, 1);
	assert_true(q->ready);
	assert_true(q->indirect);
	assert_false(q->event_idx);
	assert_int_equal(q->size, 8);
}

static void test_reset(void **state)
{
	uint64_t drain;

	(void)state;
	wr(CC_DFSELECT, 4, 1);
	assert_true(negotiate(1u << VIRTIO_F_EVENT_IDX));
	wr(CC_MSIX_CONFIG, 2, 1);
	setup_queue(16, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(CC_Q_MSIX, 2, 0);
	wr(CC_Q_ENABLE, 2, 1);
	assert_int_equal(rd(CC_Q_ENABLE, 2), 1);
	virtio_config_changed(vd);
	virtio_needs_reset(vd, "unit test");
	wr(REGION_NOTIFY, 2, 0); /* a kick nobody serves yet */
	wr(CC_Q_SELECT, 2, 7);
	assert_int_equal(status(), ST_ACK | ST_DRV | ST_FOK | ST_NEED);

	set_status(0);
	assert_int_equal(status(), 0);
	assert_int_equal(rd(CC_DFSELECT, 4), 0);
	assert_int_equal(rd(CC_GFSELECT, 4), 0);
	assert_int_equal(rd(CC_GF, 4), 0);
	assert_int_equal(vd->driver_features, 0);
	assert_int_equal(rd(CC_MSIX_CONFIG, 2), VIRTIO_MSI_NO_VECTOR);
	assert_int_equal(rd(CC_Q_SELECT, 2), 0);
	assert_int_equal(rd(CC_Q_SIZE, 2), 64);
	assert_int_equal(rd(CC_Q_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
	assert_int_equal(rd(CC_Q_ENABLE, 2), 0);
	assert_int_equal(rd(CC_Q_DESC, 8), 0);
	assert_int_equal(rd(CC_Q_DRIVER, 8), 0);
	assert_int_equal(rd(CC_Q_DEVICE, 8), 0);
	assert_false(vd->queue[0].vq.ready);
	assert_int_equal(rd(REGION_ISR, 1), 0);
	assert_false(f->intx_asserted);
	/* The pending kick was dropped. */
	assert_true(read(vd->queue[0].kick_fd, &drain, sizeof(drain)) < 0);
	/* A second reset is harmless; the device offers the same again. */
	set_status(0);
	assert_int_equal(rd(CC_DF, 4), (1u << 28) | (1u << 29));
	assert_true(negotiate(0));
}

static void test_isr(void **state)
{
	uint8_t gen = (uint8_t)rd(CC_CFG_GEN, 1);

	(void)state;
	assert_int_equal(rd(REGION_ISR, 1), 0);
	/* Configuration change: bit 1, a new generation, INTx. */
	virtio_config_changed(vd);
	assert_int_equal(rd(CC_CFG_GEN, 1), (uint8_t)(gen + 1));
	assert_true(f->intx_asserted);
	assert_true(pci_cfg_read(0, 3, 0, PCIR_STATUS, 2) & PCIM_STATUS_INTR);
	/* Other ISR offsets read 0 and do not acknowledge. */
	assert_int_equal(rd(REGION_ISR + 1, 1), 0);
	assert_int_equal(rd(REGION_ISR + 4, 4), 0);
	assert_int_equal(rd(REGION_DEVICE - 1, 1), 0);
	assert_true(f->intx_asserted);
	/* Reading acknowledges: the value, then 0; INTx drops. */
	assert_int_equal(rd(REGION_ISR, 1), 2);
	assert_false(f->intx_asserted);
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_STATUS, 2) & PCIM_STATUS_INTR, 0);
	assert_int_equal(rd(REGION_ISR, 1), 0);
	/* Queue interrupt: bit 0; both together: 3; a 4-byte read works. */
	virtio_queue_interrupt(vd, 0);
	assert_int_equal(rd(REGION_ISR, 4), 1);
	virtio_queue_interrupt(vd, 0);
	virtio_config_changed(vd);
	assert_int_equal(rd(REGION_ISR, 1), 3);
	assert_int_equal(rd(REGION_ISR, 1), 0);
	/* Writes to the ISR are ignored. */
	virtio_queue_interrupt(vd, 0);
	wr(REGION_ISR, 1, 0);
	assert_int_equal(rd(REGION_ISR, 1), 1);
	/* Queues that do not exist raise nothing. */
	virtio_queue_interrupt(vd, 1);
	virtio_queue_interrupt(vd, 1000);
	assert_int_equal(rd(REGION_ISR, 1), 0);
	assert_false(f->intx_asserted);
}

/* MSI-X table and PBA of virtio-rnd (BAR 1), written as the guest does so
 * that the PCI layer's vector_changed hook runs. */
#define MSIX_BAR 1

static void msix_set_masked(unsigned vec, bool masked)
{
	uint64_t ctrl = masked;

	if (!iobus_access(&m.mmio, f->bar[MSIX_BAR].addr + 16ull * vec + 12, 4, true, &ctrl))
		fail_msg("MSI-X table write unclaimed");
}

static uint64_t msix_pba(void)
{
	uint64_t v = 0;

	if (!iobus_access(&m.mmio, f->bar[MSIX_BAR].addr + f->msix.pba_offset, 8, false, &v))
		fail_msg("PBA read unclaimed");
	return v;
}

/* MSI-X on with vectors 0 and 1 unmasked, as a driver leaves them. */
static void msix_on(void)
{
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0x8000);
	assert_true(pci_msix_enabled(f));
	msix_set_masked(0, false);
	msix_set_masked(1, false);
}

/* One event waiting in `fd`, and none after it. */
static void assert_one_event(int fd)
{
	uint64_t cnt = 0;

	assert_int_equal(read(fd, &cnt, sizeof(cnt)), sizeof(cnt));
	assert_int_equal(cnt, 1);
	assert_true(read(fd, &cnt, sizeof(cnt)) < 0);
}

static void test_msix_interrupts(void **state)
{
	uint64_t cnt = 0;
	int fd0, fd1;

	(void)state;
	wr(CC_Q_MSIX, 2, 0);
	wr(CC_MSIX_CONFIG, 2, 1);
	msix_on();
	fd0 = pci_msix_irqfd(f, 0);
	fd1 = pci_msix_irqfd(f, 1);
	assert_true(fd0 >= 0 && fd1 >= 0 && fd0 != fd1);
	/* Queue 0 signals vector 0's eventfd; no ISR, no INTx. */
	virtio_queue_interrupt(vd, 0);
	assert_int_equal(read(fd0, &cnt, sizeof(cnt)), sizeof(cnt));
	assert_int_equal(cnt, 1);
	assert_true(read(fd1, &cnt, sizeof(cnt)) < 0);
	virtio_config_changed(vd);
	assert_int_equal(read(fd1, &cnt, sizeof(cnt)), sizeof(cnt));
	assert_int_equal(cnt, 1);
	assert_int_equal(rd(REGION_ISR, 1), 0);
	assert_false(f->intx_asserted);
	/* NO_VECTOR: nothing at all. */
	wr(CC_Q_MSIX, 2, VIRTIO_MSI_NO_VECTOR);
	virtio_queue_interrupt(vd, 0);
	assert_true(read(fd0, &cnt, sizeof(cnt)) < 0);
	assert_int_equal(rd(REGION_ISR, 1), 0);
	assert_false(f->intx_asserted);
	/* MSI-X off again: back to ISR and INTx. */
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0);
	virtio_queue_interrupt(vd, 0);
	assert_true(f->intx_asserted);
	assert_int_equal(rd(REGION_ISR, 1), 1);
}

/* A masked vector's interrupt waits in the PBA and goes out on unmask
 * (PCI 3.0 6.8.2.9); the cached irqfd follows the mask. */
static void test_msix_mask_pending(void **state)
{
	uint64_t cnt = 0, one = 1;
	int fd0;

	(void)state;
	wr(CC_Q_MSIX, 2, 0);
	msix_on();
	fd0 = pci_msix_irqfd(f, 0);
	assert_int_equal(vd->queue[0].irqfd, fd0);
	/* Masked: no fd in the cache, the interrupt sets pending bit 0. */
	msix_set_masked(0, true);
	assert_int_equal(vd->queue[0].irqfd, -1);
	virtio_queue_interrupt(vd, 0);
	assert_int_equal(msix_pba(), 1);
	assert_true(read(fd0, &cnt, sizeof(cnt)) < 0);
	/* Unmasked: delivered (the bit clears), the cache is back. */
	msix_set_masked(0, false);
	assert_int_equal(msix_pba(), 0);
	assert_int_equal(vd->queue[0].irqfd, fd0);
	virtio_queue_interrupt(vd, 0);
	assert_one_event(fd0);
	assert_int_equal(msix_pba(), 0);
	/* The function mask holds it back the same way. */
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0xc000);
	assert_int_equal(vd->queue[0].irqfd, -1);
	virtio_queue_interrupt(vd, 0);
	assert_int_equal(msix_pba(), 1);
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0x8000);
	assert_int_equal(msix_pba(), 0);
	/* An event a thread sent through its copy of the fd just before the
	 * mask (no KVM here to take it) becomes the pending bit. */
	assert_int_equal(write(fd0, &one, sizeof(one)), sizeof(one));
	msix_set_masked(0, true);
	assert_int_equal(msix_pba(), 1);
	assert_true(read(fd0, &cnt, sizeof(cnt)) < 0);
	msix_set_masked(0, false);
	assert_int_equal(msix_pba(), 0);
	/* MSI-X off: the cache empties, interrupts go to ISR and INTx. */
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0);
	assert_int_equal(vd->queue[0].irqfd, -1);
	virtio_queue_interrupt(vd, 0);
	assert_true(f->intx_asserted);
	assert_int_equal(rd(REGION_ISR, 1), 1);
}

/* A new vector for a queue (or the configuration) takes the next interrupt. */
static void test_msix_vector_redirect(void **state)
{
	int fd0, fd1;

	(void)state;
	msix_on();
	fd0 = pci_msix_irqfd(f, 0);
	fd1 = pci_msix_irqfd(f, 1);
	wr(CC_Q_MSIX, 2, 0);
	virtio_queue_interrupt(vd, 0);
	assert_one_event(fd0);
	wr(CC_Q_MSIX, 2, 1);
	virtio_queue_interrupt(vd, 0);
	assert_one_event(fd1);
	assert_true(read(fd0, &(uint64_t){0}, 8) < 0);
	wr(CC_MSIX_CONFIG, 2, 0);
	virtio_config_changed(vd);
	assert_one_event(fd0);
	wr(CC_MSIX_CONFIG, 2, 1);
	virtio_config_changed(vd);
	assert_one_event(fd1);
	/* A reset forgets the vectors and the cache. */
	set_status(0);
	assert_int_equal(vd->queue[0].irqfd, -1);
	assert_int_equal(vd->config_irqfd, -1);
	virtio_queue_interrupt(vd, 0);
	assert_true(read(fd0, &(uint64_t){0}, 8) < 0);
	assert_true(read(fd1, &(uint64_t){0}, 8) < 0);
}

static void test_other_regions(void **state)
{
	uint64_t cnt = 0;

	(void)state;
	/* virtio-rnd has no device configuration: reads 0, writes dropped. */
	assert_int_equal(vd->config_size, 0);
	assert_int_equal(rd(REGION_DEVICE, 1), 0);
	assert_int_equal(rd(REGION_DEVICE, 4), 0);
	assert_int_equal(rd(REGION_DEVICE + 0xffc, 4), 0);
	wr(REGION_DEVICE, 4, 0xffffffffu);
	wr(REGION_DEVICE + 0xff8, 8, ~0ull);
	assert_int_equal(rd(REGION_DEVICE, 8), 0);
	/* The notify region reads 0; a write for queue 0 kicks it. */
	assert_int_equal(rd(REGION_NOTIFY, 2), 0);
	assert_int_equal(rd(0x3ffc, 4), 0);
	wr(REGION_NOTIFY, 2, 0);
	assert_int_equal(read(vd->queue[0].kick_fd, &cnt, sizeof(cnt)), sizeof(cnt));
	assert_int_equal(cnt, 1);
	wr(REGION_NOTIFY + 4, 2, 1); /* queue 1: none */
	wr(0x3ffc, 4, 0);
	wr(REGION_NOTIFY + 2, 2, 0); /* inside queue 0's slot */
	assert_int_equal(read(vd->queue[0].kick_fd, &cnt, sizeof(cnt)), sizeof(cnt));
	assert_int_equal(cnt, 1);
	/* Past the BAR: refused before the transport sees it. */
	assert_int_equal(rd(0x3ffe, 4), ~0ull);
	/* Other BARs are not the transport's. */
	assert_int_equal(virtio_pci_bar_read(f, 0, 0, 4), ~0ull);
	assert_int_equal(virtio_pci_bar_read(f, 1, 0, 4), ~0ull);
	virtio_pci_bar_write(f, 2, CC_STATUS, 1, ST_ACK);
	assert_int_equal(status(), 0);
	/* Direct calls behave as the bus does. */
	virtio_pci_bar_write(f, VBAR, CC_STATUS, 1, ST_ACK);
	assert_int_equal(virtio_pci_bar_read(f, VBAR, CC_STATUS, 1), ST_ACK);
	/* Read-only fields of the common configuration. */
	uint8_t gen = (uint8_t)rd(CC_CFG_GEN, 1);
	wr(CC_CFG_GEN, 1, (uint8_t)(gen + 5));
	assert_int_equal(rd(CC_CFG_GEN, 1), gen);
	wr(CC_Q_NOTIFY_OFF, 2, 5);
	assert_int_equal(rd(CC_Q_NOTIFY_OFF, 2), 0);
}

static void test_needs_reset(void **state)
{
	(void)state;
	/* The driver cannot set DEVICE_NEEDS_RESET... */
	set_status(ST_ACK | ST_NEED);
	assert_int_equal(status(), ST_ACK);
	/* ... nor clear it. */
	virtio_needs_reset(vd, "unit test");
	assert_int_equal(status(), ST_ACK | ST_NEED);
	set_status(ST_ACK | ST_DRV);
	assert_int_equal(status(), ST_ACK | ST_DRV | ST_NEED);
	/* Without DRIVER_OK there is no configuration interrupt. */
	assert_int_equal(rd(REGION_ISR, 1), 0);
	set_status(0);
	assert_int_equal(status(), 0);
}

/* ---- a device with configuration space and two queues ---- */

static uint64_t urd(uint64_t off, unsigned size)
{
	uint64_t v = 0x1111;

	if (!iobus_access(&m.mmio, ubar + off, size, false, &v))
		fail_msg("unit-virtio read at 0x%llx unclaimed", (unsigned long long)off);
	return v;
}

static void uwr(uint64_t off, unsigned size, uint64_t val)
{
	if (!iobus_access(&m.mmio, ubar + off, size, true, &val))
		fail_msg("unit-virtio write at 0x%llx unclaimed", (unsigned long long)off);
}

static void test_device_config(void **state)
{
	(void)state;
	assert_int_equal(pci_cfg_read(0, 4, 0, PCIR_DEVICE, 2), 0x1040 + 42);
	/* In bounds: the device's bytes. */
	assert_int_equal(urd(REGION_DEVICE, 1), 0x01);
	assert_int_equal(urd(REGION_DEVICE + 5, 1), 0x06);
	assert_int_equal(urd(REGION_DEVICE + 1, 2), 0x0302);
	assert_int_equal(urd(REGION_DEVICE, 4), 0x04030201);
	assert_int_equal(urd(REGION_DEVICE + 2, 4), 0x06050403);
	assert_int_equal(uv->cfg_reads, 5);
	/* Running past config_size: 0, and the device is not asked. */
	assert_int_equal(urd(REGION_DEVICE + 4, 4), 0);
	assert_int_equal(urd(REGION_DEVICE + 5, 2), 0);
	assert_int_equal(urd(REGION_DEVICE + 6, 1), 0);
	assert_int_equal(urd(REGION_DEVICE, 8), 0);
	assert_int_equal(urd(REGION_DEVICE + 0xffc, 4), 0);
	assert_int_equal(uv->cfg_reads, 5);
	/* Writes, bounded the same way. */
	uwr(REGION_DEVICE + 1, 2, 0xaabb);
	assert_int_equal(uv->cfg_writes, 1);
	assert_memory_equal(uv->config, "\x01\xbb\xaa\x04\x05\x06", 6);
	uwr(REGION_DEVICE + 5, 2, 0xffff);
	uwr(REGION_DEVICE + 3, 4, 0xffffffffu);
	uwr(REGION_DEVICE, 8, ~0ull);
	uwr(REGION_DEVICE + 0xfff, 1, 0xff);
	assert_int_equal(uv->cfg_writes, 1);
	assert_memory_equal(uv->config, "\x01\xbb\xaa\x04\x05\x06", 6);
	assert_true(uv->max_end <= sizeof(uv->config));
	/* The capability says 6 bytes. */
	for (unsigned p = pci_cfg_read(0, 4, 0, PCIR_CAP_PTR, 1), n = 0; p != 0 && n < 48;
	     p = pci_cfg_read(0, 4, 0, p + 1, 1), n++)
		if (pci_cfg_read(0, 4, 0, p, 1) == PCIY_VENDOR &&
		    pci_cfg_read(0, 4, 0, p + 3, 1) == 4)
			assert_int_equal(pci_cfg_read(0, 4, 0, p + 12, 4), 6);
}

static void test_two_queues_and_hooks(void **state)
{
	struct virtio_dev *u = &uv->vd;
	uint64_t cnt = 0;

	(void)state;
	assert_int_equal(urd(CC_NUM_QUEUES, 2), 2);
	assert_int_equal(uf->msix.table_count, 3);
	/* Device features: bit 0 and bit 40 besides the transport's. */
	assert_int_equal(urd(CC_DF, 4), 1u | (1u << 28) | (1u << 29));
	uwr(CC_DFSELECT, 4, 1);
	assert_int_equal(urd(CC_DF, 4), 1u | (1u << 8));
	/* Queue 1: its own size, vector range and notify offset. */
	uwr(CC_Q_SELECT, 2, 1);
	assert_int_equal(urd(CC_Q_SIZE, 2), 16);
	assert_int_equal(urd(CC_Q_NOTIFY_OFF, 2), 1);
	uwr(CC_Q_MSIX, 2, 2);
	assert_int_equal(urd(CC_Q_MSIX, 2), 2);
	uwr(CC_Q_MSIX, 2, 3);
	assert_int_equal(urd(CC_Q_MSIX, 2), VIRTIO_MSI_NO_VECTOR);
	uwr(CC_Q_SELECT, 2, 2);
	assert_int_equal(urd(CC_Q_SIZE, 2), 0);
	/* Notify offsets 0 and 4 kick queues 0 and 1. */
	uwr(REGION_NOTIFY + 4, 2, 1);
	assert_int_equal(read(u->queue[1].kick_fd, &cnt, sizeof(cnt)), sizeof(cnt));
	assert_true(read(u->queue[0].kick_fd, &cnt, sizeof(cnt)) < 0);
	uwr(REGION_NOTIFY + 8, 2, 2); /* no queue 2 */
	assert_true(read(u->queue[1].kick_fd, &cnt, sizeof(cnt)) < 0);
	/* Its device features can be accepted; features_ok is told. */
	uwr(CC_STATUS, 1, ST_ACK | ST_DRV);
	uwr(CC_GFSELECT, 4, 0);
	uwr(CC_GF, 4, 1);
	uwr(CC_GFSELECT, 4, 1);
	uwr(CC_GF, 4, 1u | (1u << 8));
	uwr(CC_STATUS, 1, ST_ACK | ST_DRV | ST_FOK);
	assert_int_equal(urd(CC_STATUS, 1), ST_ACK | ST_DRV | ST_FOK);
	assert_int_equal(uv->features_oks, 1);
	assert_true(virtio_has_feature(u, 0));
	assert_true(virtio_has_feature(u, 40));
	/* Writing FEATURES_OK again is not a new acceptance. */
	uwr(CC_STATUS, 1, ST_ACK | ST_DRV | ST_FOK);
	assert_int_equal(uv->features_oks, 1);
	/* DRIVER_OK starts the device once; reset stops it once. */
	uwr(CC_STATUS, 1, ST_ACK | ST_DRV | ST_FOK | ST_DOK);
	uwr(CC_STATUS, 1, ST_ACK | ST_DRV | ST_FOK | ST_DOK);
	assert_int_equal(uv->starts, 1);
	assert_int_equal(uv->stops, 0);
	/* A configuration change while running: generation and ISR. */
	uint8_t gen = (uint8_t)urd(CC_CFG_GEN, 1);
	virtio_config_changed(u);
	assert_int_equal(urd(CC_CFG_GEN, 1), (uint8_t)(gen + 1));
	assert_int_equal(urd(REGION_ISR, 1), 2);
	/* DEVICE_NEEDS_RESET while running also interrupts. */
	virtio_needs_reset(u, "unit test");
	assert_int_equal(urd(REGION_ISR, 1), 2);
	assert_int_equal(urd(CC_STATUS, 1), ST_ACK | ST_DRV | ST_FOK | ST_DOK | ST_NEED);
	uwr(CC_STATUS, 1, 0);
	assert_int_equal(uv->stops, 1);
	uwr(CC_STATUS, 1, 0);
	assert_int_equal(uv->stops, 1);
	assert_int_equal(urd(CC_STATUS, 1), 0);
	/* The two devices do not share state. */
	assert_int_equal(status(), 0);
	assert_int_equal(vd->driver_features, 0);
}

static void test_init_geometry(void **state)
{
	struct virtio_dev *tmp = calloc(1, sizeof(*tmp));
	char err[128];

	(void)state;
	assert_non_null(tmp);
	err[0] = '\0';
	assert_int_equal(virtio_pci_init(tmp, f, &uv_ops, NULL, 0, 16, 0, 0, err, sizeof(err)), -1);
	assert_contains(err, "geometry");
	assert_int_equal(virtio_pci_init(tmp, f, &uv_ops, NULL, VIRTIO_MAX_QUEUES + 1, 16, 0, 0,
	                                 err, sizeof(err)),
	                 -1);
	assert_int_equal(virtio_pci_init(tmp, f, &uv_ops, NULL, 1, 16, 0, 0x1001, err, sizeof(err)),
	                 -1);
	/* The existing function was not touched. */
	assert_ptr_equal(f->softc, vd);
	free(tmp);
}

/* ---- the worker, end to end ---- */

static void test_request_end_to_end(void **state)
{
	static const uint8_t zero[100] = {0};
	unsigned threads = thread_count();

	(void)state;
	assert_true(negotiate(0));
	setup_queue(8, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(CC_Q_ENABLE, 2, 1);
	assert_int_equal(rd(CC_Q_ENABLE, 2), 1);
	/* A request queued before DRIVER_OK: two writable buffers. */
	put_desc(0, DATA_GPA, 64, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	put_desc(1, DATA_GPA + 0x1000, 100, VRING_DESC_F_WRITE, 0);
	avail_add(8, 0);
	set_status(ST_ACK | ST_DRV | ST_FOK | ST_DOK);
	assert_int_equal(status(), ST_ACK | ST_DRV | ST_FOK | ST_DOK);
	assert_int_equal(thread_count_settled(threads + 1), threads + 1);
	assert_true(wait_used(1));
	assert_int_equal(get32(USED_GPA + 4), 0);
	assert_int_equal(get32(USED_GPA + 8), 164);
	assert_memory_not_equal(hva(DATA_GPA), zero, 64);
	assert_memory_not_equal(hva(DATA_GPA + 0x1000), zero, 100);
	assert_int_equal(hva(DATA_GPA + 64)[0], 0); /* only the buffer */
	/* It interrupted through the ISR and INTx. */
	for (int i = 0; i < 1000 && !f->intx_asserted; i++)
		usleep(1000);
	assert_int_equal(rd(REGION_ISR, 1), 1);

	/* A second request, announced through the notify region. */
	put_desc(2, DATA_GPA + 0x2000, 16, VRING_DESC_F_WRITE, 0);
	avail_add(8, 2);
	wr(REGION_NOTIFY, 2, 0);
	assert_true(wait_used(2));
	assert_int_equal(get32(USED_GPA + 12), 2);
	assert_int_equal(get32(USED_GPA + 16), 16);
	/* Readable buffers get nothing written. */
	put_desc(3, DATA_GPA + 0x3000, 32, VRING_DESC_F_NEXT, 4);
	put_desc(4, DATA_GPA + 0x4000, 8, VRING_DESC_F_WRITE, 0);
	avail_add(8, 3);
	wr(REGION_NOTIFY, 2, 0);
	assert_true(wait_used(3));
	assert_int_equal(get32(USED_GPA + 20), 3);
	assert_int_equal(get32(USED_GPA + 24), 8);
	assert_memory_equal(hva(DATA_GPA + 0x3000), zero, 32);
	assert_int_equal(status() & ST_NEED, 0);

	/* Reset stops (and joins) the worker. */
	set_status(0);
	assert_int_equal(thread_count_settled(threads), threads);
	assert_false(vd->queue[0].vq.ready);
}

static void test_request_msix_event_idx(void **state)
{
	unsigned threads = thread_count();
	uint64_t cnt = 0;
	int fd;

	(void)state;
	assert_true(negotiate((1u << VIRTIO_F_EVENT_IDX) | (1u << VIRTIO_F_INDIRECT_DESC)));
	pci_cfg_write(0, 3, 0, f->msix.cap + 2, 2, 0x8000);
	setup_queue(4, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(CC_Q_MSIX, 2, 0);
	wr(CC_Q_ENABLE, 2, 1);
	msix_set_masked(0, false);
	fd = pci_msix_irqfd(f, 0);
	assert_true(fd >= 0);
	set_status(ST_ACK | ST_DRV | ST_FOK | ST_DOK);
	assert_int_equal(thread_count_settled(threads + 1), threads + 1);
	/* An indirect request with 3 writable buffers. */
	struct vring_desc table[3] = {
	    {DATA_GPA, 10, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 2},
	    {DATA_GPA + 0x100, 30, VRING_DESC_F_WRITE, 0},
	    {DATA_GPA + 0x80, 20, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1},
	};
	memcpy(hva(DATA_GPA + 0x8000), table, sizeof(table));
	put_desc(1, DATA_GPA + 0x8000, sizeof(table), VRING_DESC_F_INDIRECT, 0);
	avail_add(4, 1);
	wr(REGION_NOTIFY, 2, 0);
	assert_true(wait_used(1));
	assert_int_equal(get32(USED_GPA + 4), 1);
	assert_int_equal(get32(USED_GPA + 8), 60);
	/* The interrupt went to vector 0's eventfd, not the ISR. */
	for (int i = 0; i < 1000; i++) {
		if (read(fd, &cnt, sizeof(cnt)) == sizeof(cnt))
			break;
		usleep(1000);
	}
	assert_int_equal(cnt, 1);
	assert_int_equal(rd(REGION_ISR, 1), 0);
	/* The device asks for the next kick through avail_event (once the
	 * worker is back from serving). */
	for (int i = 0; i < 1000 && get16(USED_GPA + 4 + 8 * 4) != 1; i++)
		usleep(1000);
	assert_int_equal(get16(USED_GPA + 4 + 8 * 4), 1);
	set_status(0);
	assert_int_equal(thread_count_settled(threads), threads);
}

/* ---- checks that can crash or hang, in a child process ---- */

/* Run `body` in a child; false (and the reason in `why`) when it failed,
 * crashed or ran for more than 20 seconds. */
static bool run_child(const char *(*body)(void), char *why, size_t len)
{
	int p[2], st;
	pid_t pid;
	size_t n = 0;
	ssize_t r;

	why[0] = '\0';
	fflush(NULL);
	if (pipe(p) < 0)
		fail_msg("pipe failed");
	pid = fork();
	if (pid < 0)
		fail_msg("fork failed");
	if (pid == 0) {
		const char *msg;

		close(p[0]);
		alarm(20);
		msg = body();
		if (msg != NULL) {
			if (write(p[1], msg, strlen(msg)) < 0)
				_exit(2);
			_exit(1);
		}
		_exit(0);
	}
	close(p[1]);
	while (n + 1 < len && (r = read(p[0], why + n, len - 1 - n)) > 0)
		n += (size_t)r;
	why[n] = '\0';
	close(p[0]);
	if (waitpid(pid, &st, 0) != pid)
		fail_msg("waitpid failed");
	if (WIFSIGNALED(st))
		snprintf(why + n, len - n, "%schild killed by signal %d", n ? "; " : "",
		         WTERMSIG(st));
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static volatile int reset_done;

static void *reset_thread(void *arg)
{
	(void)arg;
	set_status(0);
	__atomic_store_n(&reset_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static const char *malformed_chain_body(void)
{
	pthread_t t;

	if (!negotiate(0))
		return "negotiation failed";
	setup_queue(8, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(CC_Q_ENABLE, 2, 1);
	put_desc(0, DATA_GPA, 0, VRING_DESC_F_WRITE, 0); /* zero length: malformed */
	avail_add(8, 0);
	set_status(ST_ACK | ST_DRV | ST_FOK | ST_DOK);
	for (int i = 0; i < 3000 && !(status() & ST_NEED); i++)
		usleep(1000);
	if (!(status() & ST_NEED))
		return "DEVICE_NEEDS_RESET was not set";
	/* The guest resets the device, as DEVICE_NEEDS_RESET asks. */
	if (pthread_create(&t, NULL, reset_thread, NULL) != 0)
		return "pthread_create failed";
	for (int i = 0; i < 3000 && !__atomic_load_n(&reset_done, __ATOMIC_SEQ_CST); i++)
		usleep(1000);
	if (!__atomic_load_n(&reset_done, __ATOMIC_SEQ_CST))
		return "the reset did not finish within 3 s (worker stuck on the malformed chain)";
	pthread_join(t, NULL);
	return status() == 0 ? NULL : "status not 0 after reset";
}

/*
 * Regression: worker_main() in src/bus/virtio_pci.c loops
 *     while (more && q->vq.ready) { ...; w->fn(); more = vq_enable_kicks(); }
 * with the queue lock held.  When fn (rnd_serve) hits a malformed chain,
 * vq_pop() returns VQ_ERROR without consuming it, so vq_enable_kicks()
 * keeps reporting work and the thread spins forever at 100% CPU; it never
 * returns to poll(), so the reset the driver then does (status 0 ->
 * ops->stop -> virtio_worker_stop -> pthread_join) hangs the vCPU thread
 * for good.  Any guest can do this to virtio-rnd (and the same loop serves
 * the other devices).
 */
static void test_malformed_chain_reset(void **state)
{
	char why[256];
	bool ok;

	(void)state;
	ok = run_child(malformed_chain_body, why, sizeof(why));
	regression(ok, "malformed chain, then reset: %s", why);
}

static const char *driver_ok_cleared_body(void)
{
	unsigned threads = thread_count();

	if (!negotiate(0))
		return "negotiation failed";
	set_status(ST_ACK | ST_DRV | ST_FOK | ST_DOK);
	if (thread_count_settled(threads + 1) != threads + 1)
		return "no worker thread after DRIVER_OK";
	/* A (misbehaving) driver clears DRIVER_OK without a reset... */
	set_status(ST_ACK | ST_DRV | ST_FOK);
	/* ... then resets: the worker must be gone afterwards. */
	set_status(0);
	if (thread_count_settled(threads) != threads)
		return "the worker thread survived the reset";
	return NULL;
}

/*
 * Regression: status_write() in src/bus/virtio_pci.c lets the driver clear
 * DRIVER_OK with a non-zero status write, without stopping the device;
 * device_reset() only calls ops->stop when DRIVER_OK is still set, so the
 * worker thread (and its stop eventfd) leaks and keeps serving the queue
 * after the reset; a second DRIVER_OK starts another worker in the same
 * struct virtio_worker.  Fix: ignore attempts to clear status bits
 * (virtio 1.2 2.1.2: the driver MUST NOT clear them), or track "started"
 * separately from the status byte.
 */
static void test_driver_ok_cleared(void **state)
{
	char why[256];
	bool ok;

	(void)state;
	ok = run_child(driver_ok_cleared_body, why, sizeof(why));
	regression(ok, "DRIVER_OK cleared, then reset: %s", why);
}

static const char *straddling_write_body(void)
{
	uint64_t desc, driver;

	wr(CC_Q_DESC, 8, 0x1000);
	wr(CC_Q_DRIVER, 8, 0x2000);
	/* 8 bytes at desc+4: the high half of desc and the low half of
	 * driver. */
	wr(CC_Q_DESC + 4, 8, 0x1111111122222222ull);
	wr(CC_Q_DRIVER + 6, 4, 0x33334444u);
	desc = vd->queue[0].desc;
	driver = vd->queue[0].driver;
	/* Either ignored, or split across the two fields. */
	if (desc == 0x1000 && driver == 0x2000)
		return NULL;
	if (desc == 0x2222222200001000ull && driver == 0x4444000011111111ull)
		return NULL;
	return "the write went somewhere else";
}

/*
 * Regression: queue_field_write() in src/bus/virtio_pci.c accepts any
 * access with off >= 0x20 and off + size <= 0x38 and hands set_addr_part()
 * the offset within the 8-byte field, which then does
 *     memcpy(b + off_in_field, &val, size)
 * on `uint8_t b[8]`: an 8-byte write at 0x24 (or a 4-byte one at 0x26, ...)
 * writes past the end of the stack buffer (ASan: stack-buffer-overflow;
 * without ASan the bytes land on the stack).  Guest-triggerable with one
 * MMIO write.  Fix: refuse (or split) writes with off_in_field + size > 8.
 */
static void test_queue_addr_straddling_write(void **state)
{
	char why[512];
	bool ok;

	(void)state;
	ok = run_child(straddling_write_body, why, sizeof(why));
	regression(ok, "straddling write to queue_desc/queue_driver: %s", why);
}

/* With the device and PCI locks held elsewhere, an MSI-X interrupt still
 * goes out: the path takes neither (a lock would hang the child). */
static const char *lockless_interrupt_body(void)
{
	int fd0 = pci_msix_irqfd(f, 0);
	uint64_t cnt = 0;

	pthread_mutex_lock(&vd->lock);
	pthread_mutex_lock(&f->cfg_lock);
	virtio_queue_interrupt(vd, 0);
	if (read(fd0, &cnt, sizeof(cnt)) != sizeof(cnt) || cnt != 1)
		return "no event on vector 0's irqfd";
	return NULL;
}

static void test_msix_interrupt_takes_no_lock(void **state)
{
	char why[256];

	(void)state;
	wr(CC_Q_MSIX, 2, 0);
	msix_on();
	if (!run_child(lockless_interrupt_body, why, sizeof(why)))
		fail_msg("%s", why);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, reset)
	const struct CMUnitTest tests[] = {
	    T(test_identity),
	    T(test_device_features),
	    T(test_driver_features),
	    T(test_features_ok),
	    T(test_queue_select),
	    T(test_queue_size),
	    T(test_queue_msix_vector),
	    T(test_queue_addresses),
	    T(test_queue_enable_bad_rings),
	    T(test_queue_enable_frozen),
	    T(test_reset),
	    T(test_isr),
	    T(test_msix_interrupts),
	    T(test_msix_mask_pending),
	    T(test_msix_vector_redirect),
	    T(test_other_regions),
	    T(test_needs_reset),
	    T(test_device_config),
	    T(test_two_queues_and_hooks),
	    T(test_init_geometry),
	    T(test_request_end_to_end),
	    T(test_request_msix_event_idx),
	    T(test_malformed_chain_reset),
	    T(test_driver_ok_cleared),
	    T(test_queue_addr_straddling_write),
	    T(test_msix_interrupt_takes_no_lock),
	};
#undef T

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
