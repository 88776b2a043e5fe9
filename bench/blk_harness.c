/*
 * Host-side harness for the virtio-blk device model: no KVM, no guest.
 * A "driver" thread lays out a split virtqueue in a buffer that stands in
 * for guest RAM, negotiates like Linux would, and keeps QD requests of
 * 4 KiB random reads or writes in flight.  By default it polls the used
 * ring with interrupts suppressed, which measures the device model's own
 * cost; BLK_DRIVER=irq makes it sleep until the device's interrupt (INTx,
 * delivered to an eventfd instead of KVM) and read the ISR, as a guest
 * driver would.  The device model runs exactly as in a VM (its queue
 * thread with io_uring, notification suppression, the image).
 * Prints IOPS; bench/blk-host compares that with fio on the same file.
 *
 *   blk-harness FILE read|write QD SECONDS [nocache]
 */
#include <errno.h>
#include <sys/eventfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "core/machine.h"
#include "harness.h"
#include "lib/config.h"
#include "lib/clock.h"

#define RAM_SIZE   (64u << 20)
#define QSIZE      256
#define DESC_GPA   0x10000ull
#define AVAIL_GPA  0x20000ull
#define USED_GPA   0x30000ull
#define HDR_GPA    0x40000ull  /* 16 bytes per slot */
#define STATUS_GPA 0x50000ull  /* 1 byte per slot */
#define DATA_GPA   0x100000ull /* 4 KiB per slot */
#define BLOCK      4096

/* Modern common configuration offsets (virtio 1.2 4.1.4.3). */
#define CC_DFSELECT 0x00
#define CC_GFSELECT 0x08
#define CC_GF       0x0c
#define CC_STATUS   0x14
#define CC_Q_SELECT 0x16
#define CC_Q_SIZE   0x18
#define CC_Q_ENABLE 0x1c
#define CC_Q_DESC   0x20
#define CC_Q_DRIVER 0x28
#define CC_Q_DEVICE 0x30

struct vdesc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

static uint8_t *ram;
static struct pci_func *fn;
static int irq_fd;    /* the "interrupt": an eventfd the driver sleeps on */
static bool irq_mode; /* BLK_DRIVER=irq: sleep for interrupts, else poll */

static void intx_hook(struct machine *m, unsigned gsi, bool level)
{
	uint64_t one = 1;

	(void)m;
	(void)gsi;
	if (level && write(irq_fd, &one, sizeof(one)) < 0)
		exit(1);
}

static void *gpa(uint64_t a)
{
	return ram + a;
}

static void common_write(unsigned off, unsigned size, uint64_t v)
{
	virtio_pci_bar_write(fn, 4, off, size, v);
}

static void setup_machine(struct machine *m, const char *file, bool nocache)
{
	char err[256] = "";

	ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ram == MAP_FAILED)
		exit(1);
	machine_init_detached(m, "harness", ram, 0, RAM_SIZE);
	m->intx_hook = intx_hook;
	irq_fd = eventfd(0, EFD_CLOEXEC);
	config_reset();
	config_set("pci.0.4.0.device", "virtio-blk");
	config_set("pci.0.4.0.path", file);
	config_set("pci.0.4.0.num-queues", "1");
	if (nocache)
		config_set("pci.0.4.0.nocache", "true");
	if (getenv("BLK_POLL_US") != NULL) /* experiments: the device's poll_us */
		config_set("pci.0.4.0.poll_us", getenv("BLK_POLL_US"));
	if (pci_init(m, err, sizeof(err)) < 0) {
		fprintf(stderr, "blk-harness: %s\n", err);
		exit(1);
	}
	fn = pci_get(0);
}

/* What a Linux driver does: features (VERSION_1 only, no event index, so
 * notifications follow the flags), one queue, DRIVER_OK. */
static void negotiate(void)
{
	common_write(CC_STATUS, 1, 1 | 2);
	common_write(CC_GFSELECT, 4, 1);
	common_write(CC_GF, 4, 1); /* VERSION_1 */
	common_write(CC_GFSELECT, 4, 0);
	common_write(CC_GF, 4, 0);
	common_write(CC_STATUS, 1, 1 | 2 | 8);
	common_write(CC_Q_SELECT, 2, 0);
	common_write(CC_Q_SIZE, 2, QSIZE);
	common_write(CC_Q_DESC, 8, DESC_GPA);
	common_write(CC_Q_DRIVER, 8, AVAIL_GPA);
	common_write(CC_Q_DEVICE, 8, USED_GPA);
	common_write(CC_Q_ENABLE, 2, 1);
	if (!irq_mode) /* a polling driver wants no interrupts */
		((volatile uint16_t *)gpa(AVAIL_GPA))[0] = 1;
	common_write(CC_STATUS, 1, 1 | 2 | 8 | 4);
}

/* Slot s uses descriptors 3s..3s+2: header, data, status. */
static void fill_slot(unsigned s, bool write, uint64_t nblocks)
{
	struct vdesc *d = gpa(DESC_GPA);
	uint32_t *hdr = gpa(HDR_GPA + 16 * s);
	uint64_t sector = (harness_rnd() % nblocks) * (BLOCK / 512);

	hdr[0] = write ? 1 : 0;
	hdr[1] = 0;
	memcpy(&hdr[2], &sector, 8);
	d[3 * s] = (struct vdesc){HDR_GPA + 16 * s, 16, 1, (uint16_t)(3 * s + 1)};
	d[3 * s + 1] = (struct vdesc){DATA_GPA + (uint64_t)BLOCK * s, BLOCK,
	                              (uint16_t)(1 | (write ? 0 : 2)), (uint16_t)(3 * s + 2)};
	d[3 * s + 2] = (struct vdesc){STATUS_GPA + s, 1, 2, 0};
}

static void kick(void)
{
	struct virtio_dev *vd = fn->softc;
	volatile uint16_t *used = gpa(USED_GPA);
	uint64_t one = 1;

	if (!(__atomic_load_n(&used[0], __ATOMIC_ACQUIRE) & 1) &&
	    write(vd->queue[0].kick_fd, &one, sizeof(one)) < 0)
		exit(1);
}

/* Each request takes three descriptors. */
static bool qd_fits(unsigned qd)
{
	return qd * 3 <= QSIZE;
}

int main(int argc, char **argv)
{
	struct machine m;
	volatile uint16_t *avail, *used;
	uint16_t avail_idx = 0, used_seen = 0;
	struct harness_args a;
	uint64_t done = 0, errors = 0, t0, t_end;
	int rc;

	rc = harness_parse(argc, argv, "blk-harness", BLOCK, qd_fits, &a);
	if (rc != 0)
		return rc;
	irq_mode = getenv("BLK_DRIVER") != NULL && strcmp(getenv("BLK_DRIVER"), "irq") == 0;
	setup_machine(&m, a.path, a.nocache);
	negotiate();
	harness_pin_driver(); /* after the queue thread started, which keeps every CPU */
	avail = gpa(AVAIL_GPA);
	used = gpa(USED_GPA);
	for (unsigned s = 0; s < a.qd; s++) {
		fill_slot(s, a.write, a.nblocks);
		avail[2 + (avail_idx % QSIZE)] = (uint16_t)(3 * s);
		avail_idx++;
	}
	__atomic_store_n(&avail[1], avail_idx, __ATOMIC_RELEASE);
	kick();
	t0 = monotonic_ns();
	t_end = t0 + (uint64_t)(a.secs * 1e9);
	while (monotonic_ns() < t_end) {
		uint16_t u = __atomic_load_n(&used[1], __ATOMIC_ACQUIRE);
		uint64_t v;

		if (u == used_seen) {
			if (!irq_mode)
				continue; /* polling driver: the device model's own cost */
			/* Sleep until the device interrupts (INTx), then
			 * acknowledge through the ISR as a driver does. */
			if (read(irq_fd, &v, sizeof(v)) < 0)
				exit(1);
			virtio_pci_bar_read(fn, 4, 0x1000, 1);
			continue;
		}
		for (; used_seen != u; used_seen++) {
			uint32_t head =
			    *(volatile uint32_t *)gpa(USED_GPA + 4 + 8 * (used_seen % QSIZE));
			unsigned s = head / 3;

			errors += *(uint8_t *)gpa(STATUS_GPA + s) != 0;
			done++;
			fill_slot(s, a.write, a.nblocks);
			avail[2 + (avail_idx % QSIZE)] = (uint16_t)(3 * s);
			avail_idx++;
		}
		__atomic_store_n(&avail[1], avail_idx, __ATOMIC_RELEASE);
		kick();
	}
	printf("%.0f\n", (double)done / ((double)(monotonic_ns() - t0) / 1e9));
	if (errors > 0)
		fprintf(stderr, "blk-harness: %llu requests failed\n", (unsigned long long)errors);
	common_write(CC_STATUS, 1, 0); /* reset: stops the queue thread */
	return errors > 0;
}
