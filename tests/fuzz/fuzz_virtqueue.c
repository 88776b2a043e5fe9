/*
 * libFuzzer target for split virtqueues (src/bus/virtqueue.c, virtio 1.2
 * section 2.7): descriptor chains, indirect tables, the available and used
 * rings and event-index suppression, in 64 KiB of fake guest RAM followed
 * by 4 KiB of ROM (buffers the device must not write), driven as a device
 * model drives a queue: pop, push, unpop, notify checks, kick control.
 * Every chain vq_pop() returns is checked: its buffers lie in guest
 * memory (writable ones in RAM), its counts fit the caller's iovec array
 * and add up to the lengths it reports.
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bits 2:0:
 *   0 RAM write      u16 offset, u8 length-1, bytes
 *   1 queue init     u8 log2 size (n%10; 1 << 9 is refused, ...), u16
 *                    desc, avail and used offsets (opcode bit 3: aligned
 *                    into the layout RAM[0x0000/0x4000/0x6000]), opcode
 *                    bit 4 event index, bit 5 indirect descriptors
 *   2 descriptor     u16 index, u16 offset of the buffer (bit 6: in ROM),
 *                    u16 len, u16 flags (n&7), u16 next: written into the
 *                    table at its layout address
 *   3 make available u16 head: put into the avail ring, idx + 1
 *   4 pop            u8 iovec capacity (1 + n%64)
 *   5 push           u8 which popped chain (n%held), u32 length written
 *   6 unpop          u8 n (n%4)
 *   7 notify/kicks   opcode bit 3: vq_should_notify(), else
 *                    vq_enable_kicks(bit 4), then vq_has_work(); bit 5
 *                    copies into and out of the last chain (u16 skip)
 * Each input starts from zeroed RAM and a queue reset.
 */
#include "fuzz.h"

#include "bus/virtqueue.h"

#define RAM_GPA   0x10000ull
#define RAM_SIZE  0x10000ull /* 64 KiB */
#define ROM_GPA   (RAM_GPA + RAM_SIZE)
#define ROM_SIZE  0x1000ull
#define DESC_OFF  0x0000
#define AVAIL_OFF 0x4000
#define USED_OFF  0x6000
#define MAX_HELD  64
#define IOV_MAX   64

static struct guest_mem gm;
static uint8_t *ram, *rom;
static struct virtqueue vq;
static struct iovec iov[MAX_HELD][IOV_MAX];
static struct vq_elem held[MAX_HELD];
static unsigned nheld;

static void setup_once(void)
{
	ram = calloc(1, RAM_SIZE);
	rom = calloc(1, ROM_SIZE);
	if (ram == NULL || rom == NULL || gmem_add_region(&gm, RAM_GPA, RAM_SIZE, ram, false) < 0 ||
	    gmem_add_region(&gm, ROM_GPA, ROM_SIZE, rom, true) < 0)
		abort();
}

static bool in_mem(const void *p, size_t len, bool writable)
{
	const uint8_t *b = p;

	if (b >= ram && b <= ram + RAM_SIZE && len <= (size_t)(ram + RAM_SIZE - b))
		return true;
	return !writable && b >= rom && b <= rom + ROM_SIZE && len <= (size_t)(rom + ROM_SIZE - b);
}

/* What vq_pop() promises about a chain it returns. */
static void check_elem(const struct vq_elem *e)
{
	uint64_t rd = 0, wr = 0;

	if (e->nread + e->nwrite > e->iov_cap || e->nread + e->nwrite == 0 || e->head >= vq.size)
		abort();
	for (unsigned i = 0; i < e->nread + e->nwrite; i++) {
		bool w = i >= e->nread;

		if (e->iov[i].iov_len == 0 || !in_mem(e->iov[i].iov_base, e->iov[i].iov_len, w))
			abort();
		*(w ? &wr : &rd) += e->iov[i].iov_len;
	}
	if (rd != e->read_len || wr != e->write_len)
		abort();
}

static void queue_init(struct fz *z, uint8_t op)
{
	unsigned lg = fz_u8(z) % 10;
	uint16_t size = (uint16_t)(1u << lg);
	uint64_t d = fz_u16(z), a = fz_u16(z), u = fz_u16(z);

	if (op & 8) {
		d = DESC_OFF + (d & 0xf) * 16;
		a = AVAIL_OFF + (a & 0xf) * 2;
		u = USED_OFF + (u & 0xf) * 4;
	}
	if (lg == 9)
		size = 3; /* not a power of two */
	nheld = 0;
	(void)vq_init(&vq, &gm, size, RAM_GPA + d, RAM_GPA + a, RAM_GPA + u, op & 0x10, op & 0x20);
}

static void put_desc(struct fz *z)
{
	uint16_t idx = fz_u16(z), off = fz_u16(z);
	struct vring_desc d;

	d.addr = (off & 0x4000) ? ROM_GPA + off % ROM_SIZE : RAM_GPA + off % RAM_SIZE;
	d.len = fz_u16(z);
	d.flags = fz_u16(z) & 7;
	d.next = fz_u16(z);
	memcpy(ram + DESC_OFF + (idx % 512) * sizeof(d), &d, sizeof(d));
}

static void make_available(struct fz *z)
{
	uint16_t head = fz_u16(z), idx, size = vq.size ? vq.size : 1;

	memcpy(&idx, ram + AVAIL_OFF + 2, 2);
	memcpy(ram + AVAIL_OFF + 4 + (idx % size) * 2, &head, 2);
	idx++;
	memcpy(ram + AVAIL_OFF + 2, &idx, 2);
}

static void pop(struct fz *z)
{
	struct vq_elem *e;
	unsigned slot = nheld < MAX_HELD ? nheld : MAX_HELD - 1;
	unsigned cap = 1 + fz_u8(z) % IOV_MAX;

	if (!vq.ready)
		return;
	e = &held[slot];
	memset(e, 0, sizeof(*e));
	e->iov = iov[slot];
	e->iov_cap = cap;
	switch (vq_pop(&vq, e)) {
	case VQ_GOT:
		check_elem(e);
		if (nheld < MAX_HELD)
			nheld++;
		break;
	case VQ_EMPTY:
		/* Empty while chains wait would make a device spin. */
		if (vq_has_work(&vq))
			abort();
		break;
	case VQ_ERROR:
		/* A broken queue is never retried. */
		if (vq.ready)
			abort();
		break;
	}
}

static void copy_last(struct fz *z)
{
	const struct vq_elem *e;
	uint8_t buf[512];
	uint16_t skip = fz_u16(z);

	if (nheld == 0)
		return;
	e = &held[nheld - 1];
	if (iov_to_buf(e->iov, e->nread, skip, buf, sizeof(buf)) > sizeof(buf))
		abort();
	memset(buf, 0x5a, sizeof(buf));
	if (buf_to_iov(e->iov + e->nread, e->nwrite, skip, buf, sizeof(buf)) > sizeof(buf))
		abort();
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	memset(ram, 0, RAM_SIZE);
	vq_reset(&vq);
	nheld = 0;
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);

		switch (op & 7) {
		case 0:
			fz_ram_write(z, ram, RAM_SIZE, 2);
			break;
		case 1:
			queue_init(z, op);
			break;
		case 2:
			put_desc(z);
			break;
		case 3:
			make_available(z);
			break;
		case 4:
			pop(z);
			break;
		case 5: {
			uint8_t which = fz_u8(z);
			uint32_t len = fz_u32(z);

			if (nheld > 0 && vq.ready)
				vq_push(&vq, held[which % nheld].head, len);
			break;
		}
		case 6: {
			unsigned n = fz_u8(z) % 4;

			if (vq.ready && n <= nheld) {
				vq_unpop(&vq, n);
				nheld -= n;
			}
			break;
		}
		case 7:
			if (!vq.ready)
				break;
			if (op & 8)
				(void)vq_should_notify(&vq);
			else
				(void)vq_enable_kicks(&vq, op & 0x10);
			(void)vq_has_work(&vq);
			if (op & 0x20)
				copy_last(z);
			break;
		}
	}
}
