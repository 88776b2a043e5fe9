/*
 * Unit tests for virtio-blk's saved state (src/dev/virtio_blk.c: the
 * pci_devemu quiesce/unquiesce/save/restore ops): a quiesce taken while
 * writes are in flight returns only once each one popped has its status
 * and used entry written, pops nothing more, and flushes; the unquiesce
 * serves what queued meanwhile; a second device on the same image restores
 * the first one's section and carries on with the rings, each request
 * completed exactly once and the used index continuing; a section for
 * another disk size, queue count or a cut or hostile one is refused and
 * leaves the device reset.
 *
 * Two virtio-blk functions (0:3.0 "A", 0:4.0 "B") on one image file, in a
 * detached machine (no KVM: irqfds and ioeventfds fail harmlessly) with
 * one RAM region from calloc(); the queue threads are the device's own.
 */
#include "unit.h"

#include <fcntl.h>
#include <time.h>

#include "bus/pci.h"
#include "bus/pci_slot.h"
#include "bus/virtio_pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define RAM_GPA       0x100000ull
#define RAM_SIZE      0x200000ull
#define DESC_GPA      (RAM_GPA + 0x0000)
#define AVAIL_GPA     (RAM_GPA + 0x1000)
#define USED_GPA      (RAM_GPA + 0x2000)
#define HDR_GPA       (RAM_GPA + 0x4000)
#define STATUS_GPA    (RAM_GPA + 0x5000)
#define DATA_GPA      (RAM_GPA + 0x10000)
#define QSIZE         128
#define NREQ          40 /* three descriptors each */
#define REQ_BYTES     4096
#define DISK_BYTES    (1u << 20)

#define VBAR          4
#define REGION_NOTIFY 0x3000
#define CC_GFSELECT   0x08
#define CC_GF         0x0c
#define CC_STATUS     0x14
#define CC_Q_SELECT   0x16
#define CC_Q_SIZE     0x18
#define CC_Q_MSIX     0x1a
#define CC_Q_ENABLE   0x1c
#define CC_Q_DESC     0x20
#define CC_Q_DRIVER   0x28
#define CC_Q_DEVICE   0x30

#define ST_ALL        0x0f /* ACKNOWLEDGE, DRIVER, FEATURES_OK, DRIVER_OK */
#define BLK_T_OUT     1
#define STATUS_UNSET  0xee

static struct machine m;
static uint8_t *ram;
static char *dir, *image;
static struct pci_func *fa, *fb;

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

static void wr(struct pci_func *f, uint64_t off, unsigned size, uint64_t val)
{
	if (!iobus_access(&m.mmio, f->bar[VBAR].addr + off, size, true, &val))
		fail_msg("BAR 4 write at 0x%llx unclaimed", (unsigned long long)off);
}

static uint64_t rd(struct pci_func *f, uint64_t off, unsigned size)
{
	uint64_t v = 0;

	if (!iobus_access(&m.mmio, f->bar[VBAR].addr + off, size, false, &v))
		fail_msg("BAR 4 read at 0x%llx unclaimed", (unsigned long long)off);
	return v;
}

static int group_setup(void **state)
{
	char err[256] = "", zero[4096] = {0};
	int fd;

	(void)state;
	dir = unit_mkdtemp();
	image = malloc(strlen(dir) + 16);
	ram = calloc(1, RAM_SIZE);
	if (dir == NULL || image == NULL || ram == NULL)
		return -1;
	sprintf(image, "%s/disk.img", dir);
	fd = open(image, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	for (unsigned i = 0; fd >= 0 && i < DISK_BYTES / sizeof(zero); i++)
		if (write(fd, zero, sizeof(zero)) != (ssize_t)sizeof(zero))
			return -1;
	if (fd < 0 || close(fd) < 0)
		return -1;
	if (machine_init_detached(&m, "unit", ram, RAM_GPA, RAM_SIZE) < 0)
		return -1;
	config_reset();
	for (unsigned s = 3; s <= 4; s++) {
		char key[64];

		snprintf(key, sizeof(key), "pci.0.%u.0.device", s);
		config_set(key, "virtio-blk");
		snprintf(key, sizeof(key), "pci.0.%u.0.path", s);
		config_set(key, image);
		snprintf(key, sizeof(key), "pci.0.%u.0.num-queues", s);
		config_set(key, "1");
		snprintf(key, sizeof(key), "pci.0.%u.0.poll_us", s);
		config_set(key, "0");
	}
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	fa = pci_get(0);
	fb = pci_get(1);
	if (fa == NULL || fb == NULL)
		return -1;
	pci_cfg_write(0, 3, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	pci_cfg_write(0, 4, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	return fa->bar[VBAR].mapped && fb->bar[VBAR].mapped ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	wr(fa, CC_STATUS, 1, 0); /* stops the queue threads */
	wr(fb, CC_STATUS, 1, 0);
	unit_rmtree(dir);
	return 0;
}

static int reset(void **state)
{
	(void)state;
	wr(fa, CC_STATUS, 1, 0);
	wr(fb, CC_STATUS, 1, 0);
	memset(ram, 0, RAM_SIZE);
	return 0;
}

/* A driver's setup of device `f`: VERSION_1 only, one queue of QSIZE. */
static void start_device(struct pci_func *f)
{
	wr(f, CC_STATUS, 1, 0x01);
	wr(f, CC_STATUS, 1, 0x03);
	wr(f, CC_GFSELECT, 4, 1);
	wr(f, CC_GF, 4, 1); /* VIRTIO_F_VERSION_1 */
	wr(f, CC_STATUS, 1, 0x0b);
	wr(f, CC_Q_SELECT, 2, 0);
	wr(f, CC_Q_SIZE, 2, QSIZE);
	wr(f, CC_Q_MSIX, 2, VIRTIO_MSI_NO_VECTOR);
	wr(f, CC_Q_DESC, 8, DESC_GPA);
	wr(f, CC_Q_DRIVER, 8, AVAIL_GPA);
	wr(f, CC_Q_DEVICE, 8, USED_GPA);
	wr(f, CC_Q_ENABLE, 2, 1);
	wr(f, CC_STATUS, 1, ST_ALL);
	assert_int_equal(rd(f, CC_STATUS, 1), ST_ALL);
}

/* Request k: write REQ_BYTES of byte k+1 at sector k*8, descriptors
 * 3k..3k+2 (header, data, status), published in the available ring. */
static void post_write(unsigned k)
{
	struct vring_desc d[3] = {
	    {.addr = HDR_GPA + 16 * k, .len = 16, .flags = VRING_DESC_F_NEXT, .next = 3 * k + 1},
	    {.addr = DATA_GPA + REQ_BYTES * k,
	     .len = REQ_BYTES,
	     .flags = VRING_DESC_F_NEXT,
	     .next = 3 * k + 2},
	    {.addr = STATUS_GPA + k, .len = 1, .flags = VRING_DESC_F_WRITE},
	};
	uint32_t hdr[4] = {BLK_T_OUT, 0, k * 8, 0};
	uint16_t idx = get16(AVAIL_GPA + 2);

	memcpy(hva(HDR_GPA + 16 * k), hdr, sizeof(hdr));
	memset(hva(DATA_GPA + REQ_BYTES * k), (int)(k + 1), REQ_BYTES);
	*hva(STATUS_GPA + k) = STATUS_UNSET;
	memcpy(hva(DESC_GPA + 16 * 3 * k), d, sizeof(d));
	put16(AVAIL_GPA + 4 + 2 * (idx % QSIZE), (uint16_t)(3 * k));
	put16(AVAIL_GPA + 2, (uint16_t)(idx + 1));
}

static void kick(struct pci_func *f)
{
	wr(f, REGION_NOTIFY, 2, 0);
}

static uint16_t used_idx(void)
{
	return get16(USED_GPA + 2);
}

static void wait_used(uint16_t want)
{
	for (int i = 0; i < 5000 && used_idx() != want; i++)
		usleep(1000);
	assert_int_equal(used_idx(), want);
}

static struct virtqueue *vq_of(struct pci_func *f)
{
	return &((struct virtio_dev *)f->softc)->queue[0].vq;
}

/* Every used entry names a distinct request of ours, with status OK. */
static void check_used_once(uint16_t n)
{
	bool seen[NREQ] = {false};

	for (uint16_t i = 0; i < n; i++) {
		uint32_t id;

		memcpy(&id, hva(USED_GPA + 4 + 8 * (i % QSIZE)), 4);
		assert_int_equal(id % 3, 0);
		assert_true(id / 3 < NREQ);
		if (seen[id / 3])
			fail_msg("request %u completed twice", id / 3);
		seen[id / 3] = true;
		assert_int_equal(*hva(STATUS_GPA + id / 3), 0);
	}
}

/* The image holds request k's bytes for each k < n. */
static void check_image(unsigned n)
{
	uint8_t buf[REQ_BYTES], want[REQ_BYTES];
	int fd = open(image, O_RDONLY);

	assert_true(fd >= 0);
	for (unsigned k = 0; k < n; k++) {
		memset(want, (int)(k + 1), sizeof(want));
		assert_int_equal(pread(fd, buf, sizeof(buf), (off_t)k * 8 * 512), sizeof(buf));
		assert_memory_equal(buf, want, sizeof(buf));
	}
	close(fd);
}

static void quiesce(struct pci_func *f)
{
	char err[256] = "";

	if (f->de->quiesce(f, err, sizeof(err)) < 0)
		fail_msg("quiesce: %s", err);
}

static void save(struct pci_func *f, struct sbuf *out)
{
	char err[256] = "";

	memset(out, 0, sizeof(*out));
	assert_int_equal(f->de->save(f, out, err, sizeof(err)), 0);
	assert_false(out->failed);
}

static int restore(struct pci_func *f, const void *p, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader in;

	sbuf_reader_init(&in, p, len);
	if (f->de->restore(f, &in, err, errlen) < 0) {
		if (in.failed)
			snprintf(err, errlen, "%s", in.why);
		return -1;
	}
	return sbuf_reader_done(&in, "virtio-blk", err, errlen);
}

/* ---- tests ---- */

/* Quiesced with writes in flight: everything popped is complete, the rest
 * untouched, even when kicked; the unquiesce serves the rest. */
static void test_quiesce_in_flight(void **state)
{
	uint16_t done;

	(void)state;
	start_device(fa);
	for (unsigned k = 0; k < NREQ / 2; k++)
		post_write(k);
	kick(fa);
	/* Once the thread has begun popping, some are in flight. */
	for (int i = 0;
	     i < 100000 && __atomic_load_n(&vq_of(fa)->last_avail, __ATOMIC_RELAXED) == 0; i++)
		usleep(10);
	assert_int_not_equal(__atomic_load_n(&vq_of(fa)->last_avail, __ATOMIC_RELAXED), 0);
	quiesce(fa);
	done = used_idx();
	assert_int_equal(done, vq_of(fa)->last_avail);
	assert_int_equal(vq_of(fa)->used_idx, done);
	check_used_once(done);
	for (unsigned k = 0; k < NREQ / 2; k++)
		if (k >= done)
			assert_int_equal(*hva(STATUS_GPA + k), STATUS_UNSET);
	check_image(done);
	/* Quiesced: new requests and kicks are not taken. */
	for (unsigned k = NREQ / 2; k < NREQ; k++)
		post_write(k);
	kick(fa);
	usleep(50 * 1000);
	assert_int_equal(used_idx(), done);
	fa->de->unquiesce(fa);
	wait_used(NREQ);
	check_used_once(NREQ);
	check_image(NREQ);
	usleep(20 * 1000);
	assert_int_equal(used_idx(), NREQ);
}

/*
 * Checkpoint on A with requests part-way through, then A forgets (reset)
 * and B, on the same image, restores A's section: B serves what A had not
 * popped, each once, and the used index carries on.
 */
static void test_restore_on_fresh_device(void **state)
{
	struct sbuf out;
	char err[256] = "";
	uint16_t done;

	(void)state;
	start_device(fa);
	for (unsigned k = 0; k < NREQ / 2; k++)
		post_write(k);
	kick(fa);
	wait_used(NREQ / 2);
	for (unsigned k = NREQ / 2; k < NREQ; k++)
		post_write(k);
	kick(fa);
	quiesce(fa);
	done = used_idx();
	save(fa, &out);
	/* The section: version, queues, disk size, sector size, writeback. */
	assert_int_equal(unit_le(out.data, 2), 1);
	assert_int_equal(unit_le(out.data + 2, 4), 1);
	assert_int_equal(unit_le(out.data + 6, 8), DISK_BYTES);
	assert_int_equal(unit_le(out.data + 14, 4), 512);
	assert_int_equal(out.data[18], 0);
	/* A suspend: A goes away quiesced (its reset stops the threads). */
	wr(fa, CC_STATUS, 1, 0);
	assert_int_equal(used_idx(), done);

	assert_int_equal(restore(fb, out.data, out.len, err, sizeof(err)), 0);
	assert_int_equal(rd(fb, CC_STATUS, 1), ST_ALL);
	assert_int_equal(vq_of(fb)->last_avail, done);
	wait_used(NREQ);
	check_used_once(NREQ);
	check_image(NREQ);
	usleep(20 * 1000);
	assert_int_equal(used_idx(), NREQ);
	/* And it goes on: one more request (reusing request 0's slots). */
	post_write(0);
	kick(fb);
	wait_used(NREQ + 1);
	sbuf_free(&out);
}

/* Refuse `out` with `n` bytes at `off` replaced; B stays reset. */
static void refuse(const struct sbuf *out, size_t off, const void *bytes, size_t n, const char *why)
{
	uint8_t *copy = malloc(out->len);
	char err[256] = "";

	assert_non_null(copy);
	memcpy(copy, out->data, out->len);
	memcpy(copy + off, bytes, n);
	assert_int_equal(restore(fb, copy, out->len, err, sizeof(err)), -1);
	assert_contains(err, why);
	assert_int_equal(rd(fb, CC_STATUS, 1), 0);
	free(copy);
}

static void test_refusals(void **state)
{
	struct sbuf out;
	char err[256];
	uint64_t q;
	uint32_t u;
	uint16_t h;
	uint8_t b;

	(void)state;
	start_device(fa);
	quiesce(fa);
	save(fa, &out);
	fa->de->unquiesce(fa);
	wr(fa, CC_STATUS, 1, 0);

	h = 2;
	refuse(&out, 0, &h, 2, "version 2");
	u = 2;
	refuse(&out, 2, &u, 4, "2 queues, this disk has 1");
	q = DISK_BYTES * 2ull;
	refuse(&out, 6, &q, 8, "is 1048576 bytes, the saved machine's was 2097152");
	u = 4096;
	refuse(&out, 14, &u, 4, "has 512-byte sectors, the saved machine's had 4096");
	b = 2;
	refuse(&out, 18, &b, 1, "writeback 2");
	b = 0x44; /* the transport's status: NEEDS_RESET */
	refuse(&out, 19 + 30, &b, 1, "NEEDS_RESET");
	for (size_t len = 0; len < out.len; len++) {
		if (restore(fb, out.data, len, err, sizeof(err)) != -1)
			fail_msg("a section cut to %zu of %zu bytes was accepted", len, out.len);
		assert_int_equal(rd(fb, CC_STATUS, 1), 0);
	}
	/* Unharmed by all that: the section still restores. */
	assert_int_equal(restore(fb, out.data, out.len, err, sizeof(err)), 0);
	assert_int_equal(rd(fb, CC_STATUS, 1), ST_ALL);
	sbuf_free(&out);
}

/* A queue enabled whose rings are not live (a malformed chain killed it)
 * restores as such: its thread then must not look at rings it does not
 * have (found by fuzz_virtio_blk's checkpoint op: a NULL dereference). */
static void test_restore_dead_queue(void **state)
{
	struct sbuf out;
	char err[256] = "";

	(void)state;
	start_device(fa);
	quiesce(fa);
	save(fa, &out);
	fa->de->unquiesce(fa);
	wr(fa, CC_STATUS, 1, 0);
	out.data[19 + 38 + 5] = 0; /* queue 0: enabled, not ready */
	assert_int_equal(restore(fb, out.data, out.len, err, sizeof(err)), 0);
	assert_int_equal(rd(fb, CC_STATUS, 1), ST_ALL);
	assert_false(vq_of(fb)->ready);
	post_write(0);
	kick(fb);
	usleep(20 * 1000);
	assert_int_equal(used_idx(), 0);
	sbuf_free(&out);
}

/* A device the driver never started quiesces and saves too. */
static void test_idle_device(void **state)
{
	struct sbuf out;
	char err[256] = "";

	(void)state;
	quiesce(fa);
	save(fa, &out);
	fa->de->unquiesce(fa);
	assert_int_equal(restore(fb, out.data, out.len, err, sizeof(err)), 0);
	assert_int_equal(rd(fb, CC_STATUS, 1), 0);
	sbuf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_quiesce_in_flight, reset),
	    cmocka_unit_test_setup(test_restore_on_fresh_device, reset),
	    cmocka_unit_test_setup(test_refusals, reset),
	    cmocka_unit_test_setup(test_restore_dead_queue, reset),
	    cmocka_unit_test_setup(test_idle_device, reset),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
