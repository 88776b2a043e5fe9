/*
 * The body of the virtio libFuzzer targets (tests/fuzz/fuzz_virtio_*.c):
 * the virtio PCI transport (src/bus/virtio_pci.c: common configuration,
 * ISR, device configuration, notifications, queue setup, feature
 * negotiation, reset) and one device behind it, in a detached machine with
 * rings and buffers in fake guest RAM, served by the device's own queue
 * threads.  One device a target: each input starts and stops the threads
 * of its device only.  The including file defines VIRTIO_FUZZ_DEVICE (the
 * emulation's name) and VIRTIO_FUZZ_OPTS (NULL-terminated key, value
 * pairs for it), and VIRTIO_FUZZ_NET for virtio-net, whose tap is then a
 * datagram socket pair (see tap_open() below).  Optional:
 * VIRTIO_FUZZ_MAXQ, the queues ops 3, 5 and 7 choose among (default 2:
 * "n%2" below is n % VIRTIO_FUZZ_MAXQ); VIRTIO_FUZZ_LOOP, an event loop
 * for the machine (made, never run: back ends register on it); an option
 * value "SOCKET" stands for a fresh socket path in a temporary folder.
 *
 * Input: a sequence of ops, each an opcode byte and its operands; the
 * device byte that ops 1-5 and 7 read is ignored (n%1: it chose among
 * three devices once, and the seeds keep it); bits 2:0:
 *   0 RAM write      u32 offset, u8 length-1, bytes
 *   1 BAR write      device, u16 offset into the modern region (0-0x3fff:
 *                    common, ISR, device config, notify), u8 size
 *                    (1 << n%4), u64 value
 *   2 BAR read       device, u16 offset, u8 size
 *   3 queue setup    device, u8 queue (n%2), u8 log2 entries (1 + n%4):
 *                    select, size, ring addresses in the queue's slot of
 *                    RAM, enable (as a driver does)
 *   4 negotiate      device, u32 low and u32 high feature masks: status
 *                    ACK|DRIVER, the device's features ANDed with them,
 *                    FEATURES_OK; opcode bit 3 also sets DRIVER_OK
 *   5 chain          device, u8 queue, u8 descriptors (1 + n%4), u8
 *                    writable mask; per descriptor u32 data offset, u16
 *                    length-1; then u8 header length (n%17) and those
 *                    bytes for the first buffer; made available, notified
 *   6 frame          u16 length (n%2048) and its bytes, into the tap
 *                    (virtio-net; elsewhere the bytes are skipped)
 *   7 wait           device, u8: up to n%8 * 50 us for the device's live
 *                    queues to use what was made available (net's receive
 *                    queue only while a frame waits in the tap); opcode
 *                    bit 3 then checkpoints (docs/design/snapshots.md): the
 *                    emulation's quiesce, save, reset, restore of the
 *                    section (which must be accepted), unquiesce; with bit
 *                    4 also u16 offset and u8 XOR mask: that byte of the
 *                    section is flipped first (a hostile section: refused
 *                    or not, nothing may break)
 * Each input starts from the device reset in zeroed RAM, and resets it
 * again at its end (which joins its threads).
 */
#ifndef KHYVE_FUZZ_VIRTIO_DRIVER_H
#define KHYVE_FUZZ_VIRTIO_DRIVER_H

#include "fuzz.h"

#include <errno.h>
#include <sched.h>
#include <sys/socket.h>

#include "backend/tap.h"
#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "core/mevent.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define RAM_GPA   0x100000ull
#define RAM_SIZE  0x80000ull /* 512 KiB */
#define SLOT_SIZE 0x1000ull  /* per queue: desc, avail at +0x400, used at +0x800 */
#define DATA_OFF  0x10000ull
#define NDEV      1
#ifndef VIRTIO_FUZZ_MAXQ
#define VIRTIO_FUZZ_MAXQ 2
#endif
#define MAXQ          VIRTIO_FUZZ_MAXQ
#define VBAR          4
#define CC_DFSELECT   0x00
#define CC_DF         0x04
#define CC_GFSELECT   0x08
#define CC_GF         0x0c
#define CC_STATUS     0x14
#define CC_Q_SELECT   0x16
#define CC_Q_SIZE     0x18
#define CC_Q_ENABLE   0x1c
#define CC_Q_DESC     0x20
#define CC_Q_DRIVER   0x28
#define CC_Q_DEVICE   0x30
#define REGION_NOTIFY 0x3000

#ifdef VIRTIO_FUZZ_NET
#include "../fake_tap.h"
#else
/* No tap in the other virtio targets: frame() and drain_tap() do nothing. */
static const int tap_peer = -1, tap_dev_end = -1;
#endif

/* ---- the driver side ---- */

struct queue {
	uint16_t size;      /* 0: not set up by op 3 */
	uint16_t avail_idx; /* what this driver published */
	uint16_t next_desc;
};

struct dev {
	struct pci_func *pf;
	struct virtio_dev *vd;
	uint64_t bar;
	unsigned slot0; /* first queue slot in RAM */
	struct queue q[MAXQ];
};

static struct machine m;
static uint8_t *ram;
static struct dev devs[NDEV];

static void no_intx(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	(void)gsi;
	(void)level;
}

static void reg(struct dev *d, uint64_t off, unsigned size, bool is_write, uint64_t val)
{
	(void)iobus_access(&m.mmio, d->bar + off, size, is_write, &val);
}

static uint64_t reg_read(struct dev *d, uint64_t off, unsigned size)
{
	uint64_t val = 0;

	(void)iobus_access(&m.mmio, d->bar + off, size, false, &val);
	return val;
}

/* "SOCKET": a path nothing is at, in a folder removed at exit (after
 * chardev's own exit handler, registered later, removed the socket). */
static char fuzz_sock_dir[128], fuzz_sock_path[160];

static void fuzz_sock_dir_remove(void)
{
	unlink(fuzz_sock_path);
	rmdir(fuzz_sock_dir);
}

static const char *fuzz_socket(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(fuzz_sock_dir, sizeof(fuzz_sock_dir), "%s/khyve-fuzz-sock.XXXXXX",
	         base && *base ? base : "/tmp");
	if (mkdtemp(fuzz_sock_dir) == NULL)
		abort();
	snprintf(fuzz_sock_path, sizeof(fuzz_sock_path), "%s/s", fuzz_sock_dir);
	atexit(fuzz_sock_dir_remove);
	return fuzz_sock_path;
}

static void setup_once(void)
{
	static const char *const opts[] = {VIRTIO_FUZZ_OPTS};
	char err[256] = "";

	ram = aligned_alloc(4096, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "fuzz", ram, RAM_GPA, RAM_SIZE) < 0)
		abort();
	m.intx_hook = no_intx;
#ifdef VIRTIO_FUZZ_LOOP
	m.loop = mevent_loop_create();
	if (m.loop == NULL)
		abort();
#endif
	config_reset();
	if (config_set("pci.0.4.0.device", VIRTIO_FUZZ_DEVICE) < 0)
		abort();
	for (const char *const *kv = opts; kv[0] != NULL; kv += 2) {
		char key[64];

		snprintf(key, sizeof(key), "pci.0.4.0.%s", kv[0]);
		/* "IMAGE" stands for a scratch disk image. */
		if (config_set(key, strcmp(kv[1], "IMAGE") == 0    ? fuzz_image(256u << 10, 0x3c)
		                    : strcmp(kv[1], "SOCKET") == 0 ? fuzz_socket()
		                                                   : kv[1]) < 0)
			abort();
	}
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		abort();
	}
	fuzz_unlink_images();
	for (unsigned i = 0; i < NDEV; i++) {
		struct dev *d = &devs[i];

		d->pf = pci_get(i);
		d->vd = d->pf->softc;
		d->bar = d->pf->bar[VBAR].addr;
		d->slot0 = i * MAXQ;
		pci_cfg_write(0, 4 + i, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
	}
}

static uint64_t slot_gpa(const struct dev *d, unsigned q)
{
	return RAM_GPA + (d->slot0 + q) * SLOT_SIZE;
}

static void drain_tap(void)
{
	uint8_t buf[2048];

	if (tap_peer < 0)
		return;
	while (recv(tap_peer, buf, sizeof(buf), 0) > 0)
		;
	/* Frames the device did not take: read them from its end. */
	while (recv(tap_dev_end, buf, sizeof(buf), 0) > 0)
		;
}

static void reset_all(void)
{
	for (unsigned i = 0; i < NDEV; i++) {
		reg(&devs[i], CC_STATUS, 1, true, 0);
		memset(devs[i].q, 0, sizeof(devs[i].q));
	}
	drain_tap();
}

static void queue_setup(struct dev *d, unsigned q, unsigned entries)
{
	uint64_t base = slot_gpa(d, q);

	reg(d, CC_Q_SELECT, 2, true, q);
	reg(d, CC_Q_SIZE, 2, true, entries);
	reg(d, CC_Q_DESC, 8, true, base);
	reg(d, CC_Q_DRIVER, 8, true, base + 0x400);
	reg(d, CC_Q_DEVICE, 8, true, base + 0x800);
	reg(d, CC_Q_ENABLE, 2, true, 1);
	d->q[q] = (struct queue){.size = (uint16_t)entries};
}

static void negotiate(struct dev *d, uint64_t mask, bool driver_ok)
{
	uint64_t features;

	reg(d, CC_STATUS, 1, true, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	reg(d, CC_DFSELECT, 4, true, 0);
	features = reg_read(d, CC_DF, 4);
	reg(d, CC_DFSELECT, 4, true, 1);
	features |= reg_read(d, CC_DF, 4) << 32;
	features &= mask | (1ull << VIRTIO_F_VERSION_1);
	reg(d, CC_GFSELECT, 4, true, 0);
	reg(d, CC_GF, 4, true, (uint32_t)features);
	reg(d, CC_GFSELECT, 4, true, 1);
	reg(d, CC_GF, 4, true, features >> 32);
	reg(d, CC_STATUS, 1, true,
	    VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK);
	if (driver_ok)
		reg(d, CC_STATUS, 1, true,
		    VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
		        VIRTIO_STATUS_DRIVER_OK);
}

static void put_desc(const struct dev *d, unsigned q, uint16_t i, const struct vring_desc *desc)
{
	memcpy(ram + (slot_gpa(d, q) - RAM_GPA) + 16u * i, desc, sizeof(*desc));
}

static void chain(struct fz *z, struct dev *d, unsigned q)
{
	struct queue *qq = &d->q[q];
	unsigned n = 1 + fz_u8(z) % 4, hdr_len;
	uint8_t writable = fz_u8(z);
	uint16_t head = qq->size ? qq->next_desc % qq->size : 0;
	uint64_t first = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t off = DATA_OFF + fz_u32(z) % (RAM_SIZE - DATA_OFF);
		struct vring_desc desc = {
		    .addr = RAM_GPA + off,
		    .len = 1u + fz_u16(z) % 0x1000,
		    .flags = (uint16_t)(((writable >> i) & 1) ? VRING_DESC_F_WRITE : 0),
		};

		if (off + desc.len > RAM_SIZE)
			desc.len = (uint32_t)(RAM_SIZE - off);
		if (i == 0)
			first = off;
		if (i + 1 < n) {
			desc.flags |= VRING_DESC_F_NEXT;
			desc.next = qq->size ? (uint16_t)((qq->next_desc + 1) % qq->size) : 0;
		}
		if (qq->size)
			put_desc(d, q, qq->next_desc % qq->size, &desc);
		qq->next_desc++;
	}
	hdr_len = fz_u8(z) % 17;
	if (first + hdr_len > RAM_SIZE)
		hdr_len = (unsigned)(RAM_SIZE - first);
	fz_bytes(z, ram + first, hdr_len);
	if (qq->size == 0)
		return;
	{
		uint8_t *avail = ram + (slot_gpa(d, q) - RAM_GPA) + 0x400;
		uint16_t idx = qq->avail_idx;

		memcpy(avail + 4 + 2u * (idx % qq->size), &head, 2);
		idx++;
		__atomic_store_n((uint16_t *)(avail + 2), idx, __ATOMIC_RELEASE);
		qq->avail_idx = idx;
	}
	reg(d, REGION_NOTIFY + 4u * q, 2, true, q);
}

static void frame(struct fz *z)
{
	uint8_t buf[2048];
	size_t len = fz_u16(z) % sizeof(buf);

	fz_bytes(z, buf, len);
	if (tap_peer >= 0)
		(void)send(tap_peer, buf, len, 0);
}

static uint16_t used_idx(const struct dev *d, unsigned q)
{
	const uint8_t *used = ram + (slot_gpa(d, q) - RAM_GPA) + 0x800;

	return __atomic_load_n((const uint16_t *)(used + 2), __ATOMIC_ACQUIRE);
}

/* Frames in the tap that the device has not read. */
#ifdef VIRTIO_FUZZ_NET
static bool tap_has_frames(void)
{
	uint8_t b;

	return recv(tap_dev_end, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
}
#endif

/* Queue `q` of `d` has chains the device has not used and will: it runs,
 * the queue is live, and (net's receive queue) a frame waits for them. */
static bool outstanding(const struct dev *d, unsigned q)
{
	const struct queue *qq = &d->q[q];
	const struct virtio_queue *vq = &d->vd->queue[q];
	uint8_t status = __atomic_load_n(&d->vd->status, __ATOMIC_ACQUIRE);

	if (qq->size == 0 || (status & VIRTIO_STATUS_DEVICE_NEEDS_RESET) ||
	    !(status & VIRTIO_STATUS_DRIVER_OK) ||
	    !__atomic_load_n(&vq->vq.ready, __ATOMIC_ACQUIRE) || used_idx(d, q) == qq->avail_idx)
		return false;
#ifdef VIRTIO_FUZZ_NET
	return q != 0 || tap_has_frames(); /* queue 0 is receive */
#else
	return true;
#endif
}

static void wait_used(struct dev *d, unsigned us)
{
	uint64_t deadline = monotonic_ns() + us * 1000ull;

	for (;;) {
		bool busy = false;

		for (unsigned q = 0; q < MAXQ && q < d->vd->nqueues; q++)
			busy |= outstanding(d, q);
		if (!busy || monotonic_ns() >= deadline)
			return;
		sched_yield();
	}
}

/* Op 7 with bit 3: a checkpoint and a restore into the same device. */
static void checkpoint(struct fz *z, struct dev *d, bool flip)
{
	const struct pci_devemu *de = d->pf->de;
	uint16_t at = flip ? fz_u16(z) : 0;
	uint8_t mask = flip ? fz_u8(z) : 0;
	struct sbuf out = {0};
	struct sbuf_reader in;
	char err[256];
	int rc;

	if (de->quiesce(d->pf, err, sizeof(err)) < 0) {
		de->unquiesce(d->pf);
		return;
	}
	if (de->save(d->pf, &out, err, sizeof(err)) < 0 || out.failed)
		abort();
	if (flip && out.len > 0)
		out.data[at % out.len] ^= mask;
	reg(d, CC_STATUS, 1, true, 0); /* a new process starts from a reset device */
	sbuf_reader_init(&in, out.data, out.len);
	rc = de->restore(d->pf, &in, err, sizeof(err));
	if (rc == 0)
		rc = sbuf_reader_done(&in, "fuzz", err, sizeof(err));
	if (rc != 0 && !(flip && mask != 0)) {
		fprintf(stderr, "a saved section was refused: %s\n", in.failed ? in.why : err);
		abort();
	}
	de->unquiesce(d->pf);
	sbuf_free(&out);
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	memset(ram, 0, RAM_SIZE);
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		struct dev *d = (op & 7) == 0 || (op & 7) == 6 ? NULL : &devs[fz_u8(z) % NDEV];

		switch (op & 7) {
		case 0:
			fz_ram_write(z, ram, RAM_SIZE, 4);
			break;
		case 1:
		case 2: {
			uint16_t off = fz_u16(z) % 0x4000;
			unsigned size = 1u << (fz_u8(z) % 4);
			uint64_t val = (op & 7) == 1 ? fz_u64(z) : 0;

			reg(d, off, size, (op & 7) == 1, val);
			break;
		}
		case 3: {
			unsigned q = fz_u8(z) % MAXQ;

			queue_setup(d, q, 1u << (1 + fz_u8(z) % 4));
			break;
		}
		case 4: {
			uint64_t mask = fz_u32(z);

			mask |= (uint64_t)fz_u32(z) << 32;
			negotiate(d, mask, op & 8);
			break;
		}
		case 5:
			chain(z, d, fz_u8(z) % MAXQ);
			break;
		case 6:
			frame(z);
			break;
		case 7:
			wait_used(d, 50u * (fz_u8(z) % 8));
			if (op & 8)
				checkpoint(z, d, op & 16);
			break;
		}
	}
	reset_all();
}

#endif
