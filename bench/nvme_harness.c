/*
 * Host-side harness for the NVMe device model: no KVM, no guest.  A
 * "driver" thread enables the controller through its BAR 0 registers as
 * Linux does, creates one I/O queue pair (its CQ without interrupts: the
 * driver polls the phase tags, which measures the device model's own
 * cost) and keeps QD 4 KiB random reads or writes in flight, each with
 * PRP1 only.  The device model runs exactly as in a VM: doorbell writes
 * go through the BAR handler, which signals the SQ thread's eventfd; the
 * SQ thread uses io_uring on the image.  Prints IOPS; bench/nvme-host
 * compares that with fio on the same file.
 *
 *   nvme-harness FILE read|write QD SECONDS [nocache]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bus/pci.h"
#include "core/machine.h"
#include "harness.h"
#include "dev/nvme.h"
#include "lib/config.h"
#include "lib/clock.h"

#define RAM_SIZE (64u << 20)
#define ASQ_GPA  0x10000ull
#define ACQ_GPA  0x11000ull
#define SQ_GPA   0x20000ull /* 256 entries of 64 bytes */
#define CQ_GPA   0x30000ull /* 256 entries of 16 bytes */
#define ID_GPA   0x40000ull
#define DATA_GPA 0x100000ull /* 4 KiB per command id */
#define QSIZE    256
#define AQSIZE   16
#define BLOCK    4096

static uint8_t *ram;
static struct pci_func *fn;

static void reg_write(uint64_t off, unsigned size, uint64_t v)
{
	fn->de->bar_write(fn, 0, off, size, v);
}

static uint64_t reg_read(uint64_t off, unsigned size)
{
	return fn->de->bar_read(fn, 0, off, size);
}

static void setup_machine(struct machine *m, const char *file, bool nocache)
{
	char err[256] = "";

	ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ram == MAP_FAILED)
		exit(1);
	machine_init_detached(m, "harness", ram, 0, RAM_SIZE);
	config_reset();
	config_set("pci.0.4.0.device", "nvme");
	config_set("pci.0.4.0.path", file);
	if (nocache)
		config_set("pci.0.4.0.nocache", "true");
	if (pci_init(m, err, sizeof(err)) < 0) {
		fprintf(stderr, "nvme-harness: %s\n", err);
		exit(1);
	}
	fn = pci_get(0);
}

/* The admin queue is served synchronously in the doorbell write. */
static unsigned admin_tail, admin_head;

static uint16_t admin(struct nvme_sqe c)
{
	uint8_t *e = ram + ACQ_GPA + 16 * admin_head;
	uint16_t sf;

	c.cid = (uint16_t)admin_tail;
	memcpy(ram + ASQ_GPA + 64 * admin_tail, &c, sizeof(c));
	admin_tail = (admin_tail + 1) % AQSIZE;
	reg_write(0x1000, 4, admin_tail);
	memcpy(&sf, e + 14, 2);
	admin_head = (admin_head + 1) % AQSIZE;
	reg_write(0x1004, 4, admin_head);
	return sf >> 1;
}

/* Enable, Identify, one I/O queue pair without interrupts. */
static void bring_up(void)
{
	reg_write(0x24, 4, (AQSIZE - 1) | (AQSIZE - 1) << 16);
	reg_write(0x28, 8, ASQ_GPA);
	reg_write(0x30, 8, ACQ_GPA);
	reg_write(0x14, 4, 1 | 6 << 16 | 4 << 20);
	if (!(reg_read(0x1c, 4) & 1) ||
	    admin((struct nvme_sqe){.opc = 0x06, .prp1 = ID_GPA, .cdw10 = 1}) != 0 ||
	    admin((struct nvme_sqe){
	        .opc = 0x05, .prp1 = CQ_GPA, .cdw10 = 1 | (QSIZE - 1) << 16, .cdw11 = 1}) != 0 ||
	    admin((struct nvme_sqe){.opc = 0x01,
	                            .prp1 = SQ_GPA,
	                            .cdw10 = 1 | (QSIZE - 1) << 16,
	                            .cdw11 = 1 | 1 << 16}) != 0) {
		fprintf(stderr, "nvme-harness: controller bring-up failed\n");
		exit(1);
	}
}

static unsigned sq_tail;

/* Queue a 4 KiB random command with id `cid` (its own data page). */
static void queue_io(uint16_t cid, bool write, uint64_t nblocks, uint32_t lbas_per_block)
{
	struct nvme_sqe c = {.opc = write ? 0x01 : 0x02,
	                     .cid = cid,
	                     .nsid = 1,
	                     .prp1 = DATA_GPA + (uint64_t)BLOCK * cid};
	uint64_t slba = (harness_rnd() % nblocks) * lbas_per_block;

	c.cdw10 = (uint32_t)slba;
	c.cdw11 = (uint32_t)(slba >> 32);
	c.cdw12 = lbas_per_block - 1;
	memcpy(ram + SQ_GPA + 64 * sq_tail, &c, sizeof(c));
	sq_tail = (sq_tail + 1) % QSIZE;
}

/* A full queue holds QSIZE - 1 commands. */
static bool qd_fits(unsigned qd)
{
	return qd < QSIZE;
}

int main(int argc, char **argv)
{
	struct machine m;
	struct harness_args a;
	unsigned cq_head = 0;
	bool phase = true;
	uint64_t done = 0, errors = 0, t0, t_end;
	int rc;

	rc = harness_parse(argc, argv, "nvme-harness", BLOCK, qd_fits, &a);
	if (rc != 0)
		return rc;
	setup_machine(&m, a.path, a.nocache);
	bring_up();
	harness_pin_driver(); /* after the queue thread started, which keeps every CPU */
	for (unsigned i = 0; i < a.qd; i++)
		queue_io((uint16_t)i, a.write, a.nblocks, BLOCK / 512);
	reg_write(0x1008, 4, sq_tail);
	t0 = monotonic_ns();
	t_end = t0 + (uint64_t)(a.secs * 1e9);
	while (monotonic_ns() < t_end) {
		unsigned n = 0;

		for (;;) {
			uint8_t *e = ram + CQ_GPA + 16 * cq_head;
			uint16_t sf = __atomic_load_n((uint16_t *)(e + 14), __ATOMIC_ACQUIRE), cid;

			if ((sf & 1) != phase)
				break;
			memcpy(&cid, e + 12, 2);
			errors += (sf >> 1) != 0;
			done++;
			n++;
			queue_io(cid, a.write, a.nblocks, BLOCK / 512);
			if (++cq_head == QSIZE) {
				cq_head = 0;
				phase = !phase;
			}
		}
		if (n == 0)
			continue; /* polling driver: the device model's own cost */
		reg_write(0x100c, 4, cq_head);
		reg_write(0x1008, 4, sq_tail);
	}
	printf("%.0f\n", (double)done / ((double)(monotonic_ns() - t0) / 1e9));
	if (errors > 0)
		fprintf(stderr, "nvme-harness: %llu commands failed\n", (unsigned long long)errors);
	reg_write(0x14, 4, 0); /* reset: stops the SQ thread */
	return errors > 0;
}
