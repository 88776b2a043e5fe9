/*
 * A small virtio driver for unit tests of one virtio PCI device at
 * pci.0.4.0 in a detached machine (no KVM): BAR 4 accesses, feature
 * negotiation, queues at fixed places in fake guest RAM, and chains of
 * one readable and/or one writable buffer.  Queue q's rings lie at
 * VU_RING(q) (descriptors, available ring at +0x400, used ring at
 * +0x800); its buffers come from VU_BUF(q, i).
 */
#ifndef KHYVE_VIRTIO_UNIT_H
#define KHYVE_VIRTIO_UNIT_H

#include "unit.h"

#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "core/iobus.h"
#include "core/machine.h"

#define VU_RAM_GPA     0x100000ull
#define VU_RAM_SIZE    0x800000ull
#define VU_QSIZE       16
#define VU_RING(q)     (VU_RAM_GPA + 0x1000ull * (q))
#define VU_BUF(q, i)   (VU_RAM_GPA + 0x100000ull + 0x40000ull * (q) + 0x4000ull * ((i) % VU_QSIZE))
#define VU_BUF_MAX     0x4000
#define VU_BAR         4
#define VU_DEVICE      0x2000
#define VU_NOTIFY      0x3000
#define VU_CC_GFSELECT 0x08
#define VU_CC_GF       0x0c
#define VU_CC_STATUS   0x14
#define VU_CC_Q_SELECT 0x16
#define VU_CC_Q_SIZE   0x18
#define VU_CC_Q_ENABLE 0x1c
#define VU_CC_Q_DESC   0x20
#define VU_CC_Q_DRIVER 0x28
#define VU_CC_Q_DEVICE 0x30

static struct machine vu_m;
static uint8_t *vu_ram;
static struct pci_func *vu_f;
static uint64_t vu_bar;
static uint16_t vu_next[VIRTIO_MAX_QUEUES]; /* next descriptor / avail entry */
static bool vu_event_idx;                   /* VIRTIO_F_EVENT_IDX accepted */

#define VU_F_EVENT_IDX (1u << 29)

static inline void vu_wr(uint64_t off, unsigned size, uint64_t val)
{
	if (!iobus_access(&vu_m.mmio, vu_bar + off, size, true, &val))
		fail_msg("BAR 4 write at 0x%llx unclaimed", (unsigned long long)off);
}

static inline uint64_t vu_rd(uint64_t off, unsigned size)
{
	uint64_t v = 0;

	if (!iobus_access(&vu_m.mmio, vu_bar + off, size, false, &v))
		fail_msg("BAR 4 read at 0x%llx unclaimed", (unsigned long long)off);
	return v;
}

static inline uint8_t *vu_hva(uint64_t gpa)
{
	return vu_ram + (gpa - VU_RAM_GPA);
}

static inline uint16_t vu_get16(uint64_t gpa)
{
	return __atomic_load_n((uint16_t *)vu_hva(gpa), __ATOMIC_SEQ_CST);
}

static inline void vu_put16(uint64_t gpa, uint16_t v)
{
	__atomic_store_n((uint16_t *)vu_hva(gpa), v, __ATOMIC_SEQ_CST);
}

/* The machine (its event loop `loop`, may be NULL) and the device from the
 * config already set (pci.0.4.0). */
static inline int vu_setup(struct mevent_loop *loop)
{
	char err[256] = "";

	/* Page-aligned, as guest RAM is (virtio-balloon discards pages). */
	vu_ram = aligned_alloc(4096, VU_RAM_SIZE);
	if (vu_ram != NULL)
		memset(vu_ram, 0, VU_RAM_SIZE);
	if (vu_ram == NULL ||
	    machine_init_detached(&vu_m, "unit", vu_ram, VU_RAM_GPA, VU_RAM_SIZE) < 0)
		return -1;
	vu_m.loop = loop;
	if (pci_init(&vu_m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	vu_f = pci_get(0);
	vu_bar = vu_f->bar[VU_BAR].addr;
	pci_cfg_write(0, 4, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	return vu_f->bar[VU_BAR].mapped ? 0 : -1;
}

static inline void vu_setup_queue(unsigned q)
{
	uint64_t desc = VU_RING(q), avail = desc + 0x400, used = desc + 0x800;

	vu_next[q] = 0;
	vu_wr(VU_CC_Q_SELECT, 2, q);
	vu_wr(VU_CC_Q_SIZE, 2, VU_QSIZE);
	vu_wr(VU_CC_Q_DESC, 4, (uint32_t)desc);
	vu_wr(VU_CC_Q_DESC + 4, 4, desc >> 32);
	vu_wr(VU_CC_Q_DRIVER, 4, (uint32_t)avail);
	vu_wr(VU_CC_Q_DRIVER + 4, 4, avail >> 32);
	vu_wr(VU_CC_Q_DEVICE, 4, (uint32_t)used);
	vu_wr(VU_CC_Q_DEVICE + 4, 4, used >> 32);
	vu_wr(VU_CC_Q_ENABLE, 2, 1);
}

/* Reset, accept VERSION_1 and the device features `low` (with
 * VU_F_EVENT_IDX, the driver kicks only as the device's avail_event asks,
 * as Linux does), set up queues 0 .. nq-1, DRIVER_OK. */
static inline void vu_start(uint32_t low, unsigned nq)
{
	vu_event_idx = (low & VU_F_EVENT_IDX) != 0;
	vu_wr(VU_CC_STATUS, 1, 0);
	memset(vu_ram, 0, VU_RAM_SIZE);
	vu_wr(VU_CC_STATUS, 1, 0x01);
	vu_wr(VU_CC_STATUS, 1, 0x03);
	vu_wr(VU_CC_GFSELECT, 4, 0);
	vu_wr(VU_CC_GF, 4, low);
	vu_wr(VU_CC_GFSELECT, 4, 1);
	vu_wr(VU_CC_GF, 4, 1);
	vu_wr(VU_CC_STATUS, 1, 0x0b);
	for (unsigned q = 0; q < nq; q++)
		vu_setup_queue(q);
	vu_wr(VU_CC_STATUS, 1, 0x0f);
	assert_int_equal(vu_rd(VU_CC_STATUS, 1), 0x0f);
}

static inline void vu_put_desc(unsigned q, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
                               uint16_t next)
{
	struct vring_desc d = {.addr = addr, .len = len, .flags = flags, .next = next};

	memcpy(vu_hva(VU_RING(q) + 16ull * (i % VU_QSIZE)), &d, sizeof(d));
}

/*
 * Make a chain available on queue `q` and notify: `out` (`outlen` bytes,
 * copied into the chain's readable buffer; none when 0) then a writable
 * buffer of `inlen` bytes (none when 0).  Returns the chain's buffer
 * index, whose writable buffer is at VU_BUF(q, idx) + VU_BUF_MAX / 2.
 */
static inline unsigned vu_chain(unsigned q, const void *out, size_t outlen, size_t inlen)
{
	unsigned idx = vu_next[q], d = (2 * idx) % VU_QSIZE;
	uint64_t buf = VU_BUF(q, idx), avail = VU_RING(q) + 0x400;
	uint16_t a = vu_get16(avail + 2);

	assert_true(outlen <= VU_BUF_MAX / 2 && inlen <= VU_BUF_MAX / 2);
	if (outlen > 0) {
		memcpy(vu_hva(buf), out, outlen);
		vu_put_desc(q, d, buf, (uint32_t)outlen, inlen > 0 ? VRING_DESC_F_NEXT : 0,
		            (uint16_t)(d + 1));
		if (inlen > 0)
			vu_put_desc(q, d + 1, buf + VU_BUF_MAX / 2, (uint32_t)inlen,
			            VRING_DESC_F_WRITE, 0);
	} else {
		vu_put_desc(q, d, buf + VU_BUF_MAX / 2, (uint32_t)inlen, VRING_DESC_F_WRITE, 0);
	}
	memset(vu_hva(buf + VU_BUF_MAX / 2), 0xee, inlen);
	vu_put16(avail + 4 + 2ull * (a % VU_QSIZE), (uint16_t)d);
	vu_put16(avail + 2, (uint16_t)(a + 1));
	vu_next[q] = (uint16_t)(idx + 1);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!vu_event_idx || (uint16_t)(a - vu_get16(VU_RING(q) + 0x800 + 4 + 8 * VU_QSIZE)) < 1)
		vu_wr(VU_NOTIFY + 4ull * q, 2, q);
	return idx;
}

static inline uint8_t *vu_reply(unsigned q, unsigned idx)
{
	return vu_hva(VU_BUF(q, idx) + VU_BUF_MAX / 2);
}

/* The used ring's index of queue `q`, waited for to reach `want` (5 s). */
static inline bool vu_wait_used(unsigned q, uint16_t want)
{
	for (int i = 0; i < 5000; i++) {
		if (vu_get16(VU_RING(q) + 0x800 + 2) == want)
			return true;
		usleep(1000);
	}
	return false;
}

/* The length the device wrote into used entry `n` of queue `q`. */
static inline uint32_t vu_used_len(unsigned q, unsigned n)
{
	uint32_t len;

	memcpy(&len, vu_hva(VU_RING(q) + 0x800 + 4 + 8ull * (n % VU_QSIZE) + 4), 4);
	return len;
}

#endif
