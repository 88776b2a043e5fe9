/*
 * Unit tests for split virtqueues (src/bus/virtqueue.h): ring validation in
 * vq_init(), chain walking in vq_pop() (direct and indirect descriptors,
 * and every kind of malformed guest data it must refuse), vq_push(),
 * notification suppression (flags and event index), and the iovec copy
 * helpers.  Guest RAM is a malloc()ed buffer registered as a guest_mem
 * region, with a read-only "ROM" region right after it.
 */
#include "unit.h"

#include "bus/virtqueue.h"
#include "vmm/mem.h"

#define RAM_GPA  0x100000ull
#define RAM_SIZE 0x100000ull
#define ROM_GPA  (RAM_GPA + RAM_SIZE) /* adjacent to RAM, read-only */
#define ROM_SIZE 0x10000ull

/* Default ring layout (room for up to 256 entries each). */
#define DESC_GPA  (RAM_GPA + 0x0000)
#define AVAIL_GPA (RAM_GPA + 0x1000)
#define USED_GPA  (RAM_GPA + 0x2000)
#define IND_GPA   (RAM_GPA + 0x8000) /* indirect tables */
#define DATA_GPA  (RAM_GPA + 0x10000)
#define IOV_CAP   8
#define QSIZE     16

static struct {
	uint8_t *ram, *rom;
	struct guest_mem gm;
	struct virtqueue vq;
	uint16_t qsize;
	uint64_t desc, avail, used;
	struct iovec iov[VQ_MAX_IOV + 8];
	struct vq_elem e;
} fx;

static int setup(void **state)
{
	(void)state;
	memset(&fx, 0, sizeof(fx));
	fx.ram = calloc(1, RAM_SIZE);
	fx.rom = calloc(1, ROM_SIZE);
	if (fx.ram == NULL || fx.rom == NULL)
		return -1;
	if (gmem_add_region(&fx.gm, RAM_GPA, RAM_SIZE, fx.ram, false) < 0 ||
	    gmem_add_region(&fx.gm, ROM_GPA, ROM_SIZE, fx.rom, true) < 0)
		return -1;
	fx.e.iov = fx.iov;
	fx.e.iov_cap = IOV_CAP;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(fx.ram);
	free(fx.rom);
	fx.ram = fx.rom = NULL;
	return 0;
}

/* Host address of guest RAM or ROM (the test may write ROM: it is the host). */
static uint8_t *hva(uint64_t gpa)
{
	if (gpa >= RAM_GPA && gpa < RAM_GPA + RAM_SIZE)
		return fx.ram + (gpa - RAM_GPA);
	if (gpa >= ROM_GPA && gpa < ROM_GPA + ROM_SIZE)
		return fx.rom + (gpa - ROM_GPA);
	fail_msg("gpa 0x%llx is not test memory", (unsigned long long)gpa);
	return NULL;
}

static void put16(uint64_t gpa, uint16_t v)
{
	memcpy(hva(gpa), &v, 2);
}

static uint16_t get16(uint64_t gpa)
{
	uint16_t v;

	memcpy(&v, hva(gpa), 2);
	return v;
}

static uint32_t get32(uint64_t gpa)
{
	uint32_t v;

	memcpy(&v, hva(gpa), 4);
	return v;
}

static void put_desc_at(uint64_t table, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
                        uint16_t next)
{
	struct vring_desc d = {.addr = addr, .len = len, .flags = flags, .next = next};

	memcpy(hva(table + 16ull * i), &d, sizeof(d));
}

static void set_desc(unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	put_desc_at(fx.desc, i, addr, len, flags, next);
}

/* Rings at explicit addresses; clears them first. */
static int init_at(uint16_t size, uint64_t desc, uint64_t avail, uint64_t used, bool event_idx,
                   bool indirect)
{
	fx.qsize = size;
	fx.desc = desc;
	fx.avail = avail;
	fx.used = used;
	return vq_init(&fx.vq, &fx.gm, size, desc, avail, used, event_idx, indirect);
}

static void init_q(uint16_t size, bool event_idx, bool indirect)
{
	memset(fx.ram, 0, 0x10000);
	assert_int_equal(init_at(size, DESC_GPA, AVAIL_GPA, USED_GPA, event_idx, indirect), 0);
	assert_true(fx.vq.ready);
}

static uint16_t avail_idx(void)
{
	return get16(fx.avail + 2);
}

static void set_avail_idx(uint16_t idx)
{
	put16(fx.avail + 2, idx);
}

/* Make chain `head` available. */
static void avail_add(uint16_t head)
{
	uint16_t idx = avail_idx();

	put16(fx.avail + 4 + 2ull * (idx % fx.qsize), head);
	set_avail_idx((uint16_t)(idx + 1));
}

static void set_avail_flags(uint16_t v)
{
	put16(fx.avail, v);
}

static void set_used_event(uint16_t v)
{
	put16(fx.avail + 4 + 2ull * fx.qsize, v);
}

static uint16_t used_flags(void)
{
	return get16(fx.used);
}

static uint16_t used_idx(void)
{
	return get16(fx.used + 2);
}

static uint16_t avail_event(void)
{
	return get16(fx.used + 4 + 8ull * fx.qsize);
}

/* Pop and require an error that consumed nothing and stayed within iov_cap. */
static void expect_pop_error(const char *what)
{
	uint16_t before = fx.vq.last_avail;
	enum vq_pop_result r = vq_pop(&fx.vq, &fx.e);

	if (r != VQ_ERROR)
		fail_msg("%s: vq_pop gave %d, not VQ_ERROR", what, (int)r);
	assert_int_equal(fx.vq.last_avail, before);
	assert_true(fx.e.nread + fx.e.nwrite <= fx.e.iov_cap);
	/* A broken queue stops: the next pop finds nothing rather than
	 * spinning on the same chain. */
	assert_false(fx.vq.ready);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_EMPTY);
	fx.vq.ready = true; /* the test goes on with the same rings */
}

/* ---- vq_init ---- */

static void test_init_ok(void **state)
{
	(void)state;
	init_q(QSIZE, true, false);
	assert_ptr_equal(fx.vq.gm, &fx.gm);
	assert_int_equal(fx.vq.size, QSIZE);
	assert_true(fx.vq.event_idx);
	assert_false(fx.vq.indirect);
	assert_int_equal(fx.vq.desc_gpa, DESC_GPA);
	assert_int_equal(fx.vq.avail_gpa, AVAIL_GPA);
	assert_int_equal(fx.vq.used_gpa, USED_GPA);
	assert_ptr_equal((void *)fx.vq.desc, hva(DESC_GPA));
	assert_ptr_equal((void *)fx.vq.avail, hva(AVAIL_GPA));
	assert_ptr_equal((void *)fx.vq.used_hdr, hva(USED_GPA));
	assert_ptr_equal((void *)fx.vq.used_ring, hva(USED_GPA + 4));
	assert_ptr_equal((void *)fx.vq.avail_event, hva(USED_GPA + 4 + 8 * QSIZE));
	assert_int_equal(fx.vq.last_avail, 0);
	assert_int_equal(fx.vq.used_idx, 0);
	assert_false(vq_has_work(&fx.vq));
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_EMPTY);

	/* The extremes of the size range. */
	assert_int_equal(init_at(1, DESC_GPA, AVAIL_GPA, USED_GPA, false, true), 0);
	assert_true(fx.vq.indirect);
	assert_int_equal(
	    init_at(32768, RAM_GPA, RAM_GPA + 0x80000, RAM_GPA + 0xa0000, false, false), 0);
	assert_int_equal(fx.vq.size, 32768);

	/* vq_reset forgets everything. */
	vq_reset(&fx.vq);
	assert_false(fx.vq.ready);
	assert_null(fx.vq.desc);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_EMPTY);
	assert_false(vq_has_work(&fx.vq));
	assert_false(vq_enable_kicks(&fx.vq, true));
}

static void test_init_bad_size(void **state)
{
	static const uint16_t bad[] = {0,   3,   5,    6,     7,     12,    100,
	                               255, 257, 1000, 32767, 32769, 0xffff};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		fx.vq.ready = true;
		if (init_at(bad[i], DESC_GPA, AVAIL_GPA, USED_GPA, false, false) != -1)
			fail_msg("size %u accepted", bad[i]);
		assert_false(fx.vq.ready);
	}
}

static void test_init_misaligned(void **state)
{
	(void)state;
	/* desc: 16 bytes, avail: 2, used: 4 (virtio 1.2 section 2.7). */
	for (uint64_t d = 1; d < 16; d++)
		assert_int_equal(init_at(QSIZE, DESC_GPA + d, AVAIL_GPA, USED_GPA, false, false),
		                 -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA + 16, AVAIL_GPA, USED_GPA, false, false), 0);
	assert_int_equal(init_at(QSIZE, DESC_GPA, AVAIL_GPA + 1, USED_GPA, false, false), -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA, AVAIL_GPA + 3, USED_GPA, false, false), -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA, AVAIL_GPA + 2, USED_GPA, false, false), 0);
	assert_int_equal(init_at(QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA + 1, false, false), -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA + 2, false, false), -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA + 3, false, false), -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA + 4, false, false), 0);
	assert_int_equal(init_at(QSIZE, DESC_GPA + 8, AVAIL_GPA, USED_GPA, false, false), -1);
	assert_false(fx.vq.ready);
}

static void test_init_outside_ram(void **state)
{
	const uint64_t end = RAM_GPA + RAM_SIZE;
	const uint64_t dlen = 16 * QSIZE, alen = 6 + 2 * QSIZE, ulen = 6 + 8 * QSIZE;

	(void)state;
	/* Nothing below RAM, nothing far above, nothing near the top of the
	 * address space (where gpa + len overflows). */
	assert_int_equal(init_at(QSIZE, 0, AVAIL_GPA, USED_GPA, false, false), -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA, 0x1000, USED_GPA, false, false), -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA, AVAIL_GPA, 0x1000, false, false), -1);
	assert_int_equal(init_at(QSIZE, 0x10000000, AVAIL_GPA, USED_GPA, false, false), -1);
	assert_int_equal(init_at(QSIZE, 0xfffffffffffffff0ull, AVAIL_GPA, USED_GPA, false, false),
	                 -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA, 0xfffffffffffffffeull, USED_GPA, false, false),
	                 -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA, AVAIL_GPA, 0xfffffffffffffffcull, false, false),
	                 -1);

	/* Each ring ending exactly at the end of RAM is fine; one entry (or
	 * the event word) further is not.  Past RAM is the read-only region,
	 * so spilling into it is refused as well. */
	assert_int_equal(init_at(QSIZE, end - dlen, AVAIL_GPA, USED_GPA, false, false), 0);
	assert_int_equal(init_at(QSIZE, end - dlen + 16, AVAIL_GPA, USED_GPA, false, false), -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA, end - alen, USED_GPA, false, false), 0);
	assert_int_equal(init_at(QSIZE, DESC_GPA, end - alen + 2, USED_GPA, false, false), -1);
	assert_int_equal(init_at(QSIZE, DESC_GPA, AVAIL_GPA, (end - ulen) & ~3ull, false, false),
	                 0);
	assert_int_equal(
	    init_at(QSIZE, DESC_GPA, AVAIL_GPA, ((end - ulen) & ~3ull) + 4, false, false), -1);
	/* A ring ending at the end of the ROM region (nothing after it). */
	assert_int_equal(
	    init_at(QSIZE, ROM_GPA + ROM_SIZE - dlen + 16, AVAIL_GPA, USED_GPA, false, false), -1);

	/* The device writes the used ring: not in ROM.  It only reads the
	 * descriptor table, which may be read-only. */
	assert_int_equal(init_at(QSIZE, DESC_GPA, AVAIL_GPA, ROM_GPA, false, false), -1);
	assert_int_equal(init_at(QSIZE, ROM_GPA, AVAIL_GPA, USED_GPA, false, false), 0);
	/* A size that makes the rings bigger than RAM. */
	assert_int_equal(init_at(32768, RAM_GPA + 0x80010, AVAIL_GPA, USED_GPA, false, false), -1);
	assert_false(fx.vq.ready);
}

/* ---- vq_pop: good chains ---- */

static void test_pop_chain(void **state)
{
	(void)state;
	init_q(QSIZE, false, false);
	/* 3 -> 7 -> 1 -> 9: two readable, then two writable. */
	set_desc(3, DATA_GPA, 16, VRING_DESC_F_NEXT, 7);
	set_desc(7, DATA_GPA + 0x100, 100, VRING_DESC_F_NEXT, 1);
	set_desc(1, DATA_GPA + 0x1000, 512, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 9);
	set_desc(9, DATA_GPA + 0x3000, 1, VRING_DESC_F_WRITE, 0xffff); /* next ignored */
	avail_add(3);
	assert_true(vq_has_work(&fx.vq));
	memset(&fx.e.nread, 0xee, sizeof(fx.e.nread));
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.head, 3);
	assert_int_equal(fx.e.nread, 2);
	assert_int_equal(fx.e.nwrite, 2);
	assert_int_equal(fx.e.read_len, 116);
	assert_int_equal(fx.e.write_len, 513);
	assert_ptr_equal(fx.iov[0].iov_base, hva(DATA_GPA));
	assert_int_equal(fx.iov[0].iov_len, 16);
	assert_ptr_equal(fx.iov[1].iov_base, hva(DATA_GPA + 0x100));
	assert_int_equal(fx.iov[1].iov_len, 100);
	assert_ptr_equal(fx.iov[2].iov_base, hva(DATA_GPA + 0x1000));
	assert_int_equal(fx.iov[2].iov_len, 512);
	assert_ptr_equal(fx.iov[3].iov_base, hva(DATA_GPA + 0x3000));
	assert_int_equal(fx.iov[3].iov_len, 1);
	assert_int_equal(fx.vq.last_avail, 1);
	assert_false(vq_has_work(&fx.vq));
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_EMPTY);

	/* Only readable, only writable, a single descriptor. */
	set_desc(0, DATA_GPA, 8, 0, 0);
	set_desc(2, DATA_GPA + 8, 8, VRING_DESC_F_WRITE, 0);
	avail_add(0);
	avail_add(2);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.head, 0);
	assert_int_equal(fx.e.nread, 1);
	assert_int_equal(fx.e.nwrite, 0);
	assert_int_equal(fx.e.write_len, 0);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.head, 2);
	assert_int_equal(fx.e.nread, 0);
	assert_int_equal(fx.e.nwrite, 1);
	assert_int_equal(fx.e.read_len, 0);
	assert_int_equal(fx.e.write_len, 8);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_EMPTY);

	/* A buffer that ends exactly at the end of RAM, and a readable one in
	 * the read-only region. */
	set_desc(4, RAM_GPA + RAM_SIZE - 32, 32, VRING_DESC_F_NEXT, 5);
	set_desc(5, ROM_GPA + 16, 64, VRING_DESC_F_NEXT, 6);
	set_desc(6, RAM_GPA + RAM_SIZE - 1, 1, VRING_DESC_F_WRITE, 0);
	avail_add(4);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.nread, 2);
	assert_int_equal(fx.e.nwrite, 1);
	assert_ptr_equal(fx.iov[1].iov_base, hva(ROM_GPA + 16));
	assert_ptr_equal(fx.iov[2].iov_base, fx.ram + RAM_SIZE - 1);
}

/* A chain may use every descriptor once, and may be exactly iov_cap long. */
static void test_pop_longest_chain(void **state)
{
	(void)state;
	init_q(QSIZE, false, false);
	fx.e.iov_cap = QSIZE;
	for (unsigned i = 0; i < QSIZE; i++)
		set_desc(i, DATA_GPA + 64 * i, 64, i + 1 < QSIZE ? VRING_DESC_F_NEXT : 0,
		         (uint16_t)(i + 1));
	avail_add(0);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.nread, QSIZE);
	assert_int_equal(fx.e.read_len, 64 * QSIZE);
	for (unsigned i = 0; i < QSIZE; i++)
		assert_ptr_equal(fx.iov[i].iov_base, hva(DATA_GPA + 64 * i));

	/* iov_cap entries fit; one more does not. */
	fx.e.iov_cap = 4;
	set_desc(3, DATA_GPA, 64, 0, 0); /* 0 -> 1 -> 2 -> 3 */
	avail_add(0);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.nread, 4);
	set_desc(3, DATA_GPA, 64, VRING_DESC_F_NEXT, 4); /* 0 -> ... -> 4 */
	set_desc(4, DATA_GPA, 64, 0, 0);
	avail_add(0);
	expect_pop_error("chain longer than iov_cap");
	fx.e.iov_cap = 0;
	set_desc(0, DATA_GPA, 64, 0, 0);
	expect_pop_error("iov_cap 0");
}

/* The avail index wraps at 65536; the ring position is idx % size. */
static void test_pop_index_wrap(void **state)
{
	(void)state;
	init_q(4, false, false);
	fx.vq.last_avail = 0xfffe;
	fx.vq.used_idx = 0xfffe;
	set_avail_idx(0xfffe);
	for (unsigned i = 0; i < 4; i++)
		set_desc(i, DATA_GPA + 16 * i, 16, VRING_DESC_F_WRITE, 0);
	avail_add(3); /* ring[2] */
	avail_add(1); /* ring[3] */
	avail_add(2); /* ring[0], idx wraps to 1 */
	assert_int_equal(avail_idx(), 1);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.head, 3);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.head, 1);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.head, 2);
	assert_int_equal(fx.vq.last_avail, 1);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_EMPTY);

	vq_push(&fx.vq, 3, 10);
	vq_push(&fx.vq, 1, 11);
	vq_push(&fx.vq, 2, 12);
	assert_int_equal(used_idx(), 1);
	assert_int_equal(get32(fx.used + 4 + 8 * 2), 3); /* 0xfffe % 4 */
	assert_int_equal(get32(fx.used + 4 + 8 * 3), 1);
	assert_int_equal(get32(fx.used + 4 + 8 * 0), 2);
	assert_int_equal(get32(fx.used + 4 + 8 * 0 + 4), 12);

	/* Exactly `size` entries ahead is a full ring, not an error. */
	for (unsigned i = 0; i < 4; i++)
		avail_add((uint16_t)i);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
		assert_int_equal(fx.e.head, i);
	}
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_EMPTY);
}

static void test_unpop(void **state)
{
	(void)state;
	init_q(QSIZE, false, false);
	for (unsigned i = 0; i < 3; i++) {
		set_desc(i, DATA_GPA + 32 * i, 32, VRING_DESC_F_WRITE, 0);
		avail_add((uint16_t)i);
	}
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.head, 1);
	vq_unpop(&fx.vq, 2);
	assert_int_equal(fx.vq.last_avail, 0);
	assert_true(vq_has_work(&fx.vq));
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
		assert_int_equal(fx.e.head, i);
	}
	vq_unpop(&fx.vq, 1);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.head, 2);
	vq_unpop(&fx.vq, 0);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_EMPTY);

	/* Unpopping across the 16-bit wrap. */
	init_q(4, false, false);
	fx.vq.last_avail = 0xffff;
	set_avail_idx(0xffff);
	set_desc(0, DATA_GPA, 8, 0, 0);
	avail_add(0);
	avail_add(0);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.vq.last_avail, 1);
	vq_unpop(&fx.vq, 2);
	assert_int_equal(fx.vq.last_avail, 0xffff);
}

/* ---- indirect descriptors ---- */

static void test_indirect_ok(void **state)
{
	(void)state;
	init_q(QSIZE, false, true);
	/* Table of 4, chained 0 -> 2 -> 3 -> 1 (not in table order). */
	put_desc_at(IND_GPA, 0, DATA_GPA, 10, VRING_DESC_F_NEXT, 2);
	put_desc_at(IND_GPA, 2, DATA_GPA + 0x10, 20, VRING_DESC_F_NEXT, 3);
	put_desc_at(IND_GPA, 3, DATA_GPA + 0x100, 300, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	put_desc_at(IND_GPA, 1, DATA_GPA + 0x400, 40, VRING_DESC_F_WRITE, 0);
	/* The write flag of the referring descriptor does not matter. */
	set_desc(5, IND_GPA, 4 * 16, VRING_DESC_F_INDIRECT, 0);
	avail_add(5);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.head, 5);
	assert_int_equal(fx.e.nread, 2);
	assert_int_equal(fx.e.nwrite, 2);
	assert_int_equal(fx.e.read_len, 30);
	assert_int_equal(fx.e.write_len, 340);
	assert_ptr_equal(fx.iov[0].iov_base, hva(DATA_GPA));
	assert_ptr_equal(fx.iov[1].iov_base, hva(DATA_GPA + 0x10));
	assert_ptr_equal(fx.iov[2].iov_base, hva(DATA_GPA + 0x100));
	assert_int_equal(fx.iov[2].iov_len, 300);
	assert_ptr_equal(fx.iov[3].iov_base, hva(DATA_GPA + 0x400));
	assert_int_equal(fx.vq.last_avail, 1);

	/* A table of one, a table in the read-only region, a table that ends
	 * exactly at the end of RAM, and entries that stop before the end of
	 * the table. */
	put_desc_at(IND_GPA + 0x100, 0, DATA_GPA, 1, VRING_DESC_F_WRITE, 0);
	set_desc(6, IND_GPA + 0x100, 16, VRING_DESC_F_INDIRECT | VRING_DESC_F_WRITE, 0);
	avail_add(6);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.nwrite, 1);
	put_desc_at(ROM_GPA, 0, DATA_GPA, 7, 0, 0);
	set_desc(7, ROM_GPA, 3 * 16, VRING_DESC_F_INDIRECT, 0);
	avail_add(7);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.nread, 1);
	assert_int_equal(fx.e.read_len, 7);
	put_desc_at(RAM_GPA + RAM_SIZE - 32, 0, DATA_GPA, 5, VRING_DESC_F_NEXT, 1);
	put_desc_at(RAM_GPA + RAM_SIZE - 32, 1, DATA_GPA, 6, VRING_DESC_F_WRITE, 0);
	set_desc(8, RAM_GPA + RAM_SIZE - 32, 32, VRING_DESC_F_INDIRECT, 0);
	avail_add(8);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.read_len, 5);
	assert_int_equal(fx.e.write_len, 6);

	/* The longest table accepted (VQ_MAX_IOV entries, all used). */
	fx.e.iov_cap = VQ_MAX_IOV;
	for (unsigned i = 0; i < VQ_MAX_IOV; i++)
		put_desc_at(DATA_GPA, i, RAM_GPA + 0x80000 + i, 1,
		            i + 1 < VQ_MAX_IOV ? VRING_DESC_F_NEXT : 0, (uint16_t)(i + 1));
	set_desc(9, DATA_GPA, VQ_MAX_IOV * 16, VRING_DESC_F_INDIRECT, 0);
	avail_add(9);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_int_equal(fx.e.nread, VQ_MAX_IOV);
	assert_ptr_equal(fx.iov[VQ_MAX_IOV - 1].iov_base, hva(RAM_GPA + 0x80000 + VQ_MAX_IOV - 1));
}

/* Each case: a fresh queue (indirect on unless said), one chain at head 0. */
static void indirect_case(bool feature, uint16_t ref_flags, uint64_t table, uint32_t len)
{
	init_q(QSIZE, false, feature);
	set_desc(0, table, len, ref_flags, 1);
	set_desc(1, DATA_GPA, 16, 0, 0);
	avail_add(0);
}

static void test_indirect_rejected(void **state)
{
	(void)state;
	/* A good table, for reference. */
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, 32);
	put_desc_at(IND_GPA, 0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	put_desc_at(IND_GPA, 1, DATA_GPA, 8, VRING_DESC_F_WRITE, 0);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);

#define GOOD_TABLE()                                                                               \
	do {                                                                                       \
		put_desc_at(IND_GPA, 0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);                        \
		put_desc_at(IND_GPA, 1, DATA_GPA, 8, VRING_DESC_F_WRITE, 0);                       \
	} while (0)

	/* Feature not negotiated. */
	indirect_case(false, VRING_DESC_F_INDIRECT, IND_GPA, 32);
	GOOD_TABLE();
	expect_pop_error("indirect without the feature");
	/* The referring descriptor also has NEXT. */
	indirect_case(true, VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT, IND_GPA, 32);
	GOOD_TABLE();
	expect_pop_error("indirect with NEXT");
	/* Not the first descriptor of its chain. */
	init_q(QSIZE, false, true);
	GOOD_TABLE();
	set_desc(0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	set_desc(1, IND_GPA, 32, VRING_DESC_F_INDIRECT, 0);
	avail_add(0);
	expect_pop_error("indirect after a direct descriptor");
	/* Nested: an entry of the table is itself indirect. */
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, 32);
	put_desc_at(IND_GPA, 0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	put_desc_at(IND_GPA, 1, IND_GPA, 32, VRING_DESC_F_INDIRECT, 0);
	expect_pop_error("nested indirect");
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, 16);
	put_desc_at(IND_GPA, 0, IND_GPA, 16, VRING_DESC_F_INDIRECT, 0);
	expect_pop_error("self-referencing indirect");
	/* Table length zero or not a multiple of 16. */
	static const uint32_t badlen[] = {0, 1, 8, 15, 17, 31, 33, 40, 0xfffffff0u + 1};
	for (size_t i = 0; i < ARRAY_LEN(badlen); i++) {
		indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, badlen[i]);
		/* Entry 0 alone would make a good chain. */
		put_desc_at(IND_GPA, 0, DATA_GPA, 8, 0, 0);
		expect_pop_error("indirect table length");
	}
	/* More entries than VQ_MAX_IOV. */
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, (VQ_MAX_IOV + 1) * 16);
	GOOD_TABLE();
	fx.e.iov_cap = VQ_MAX_IOV + 8;
	expect_pop_error("indirect table too long");
	fx.e.iov_cap = IOV_CAP;
	/* Table outside RAM, straddling its end, or overflowing. */
	static const uint64_t badaddr[] = {0,
	                                   0x1000,
	                                   RAM_GPA - 16,
	                                   RAM_GPA + RAM_SIZE + ROM_SIZE,
	                                   ROM_GPA + ROM_SIZE - 16,
	                                   0xfffffffffffffff0ull,
	                                   0x8000000000000000ull};
	for (size_t i = 0; i < ARRAY_LEN(badaddr); i++) {
		indirect_case(true, VRING_DESC_F_INDIRECT, badaddr[i], 32);
		expect_pop_error("indirect table outside memory");
	}
	/* RAM then ROM: contiguous in guest-physical space, but two regions. */
	indirect_case(true, VRING_DESC_F_INDIRECT, RAM_GPA + RAM_SIZE - 16, 32);
	expect_pop_error("indirect table across two regions");
	/* next out of the table. */
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, 32);
	put_desc_at(IND_GPA, 0, DATA_GPA, 8, VRING_DESC_F_NEXT, 2);
	put_desc_at(IND_GPA, 2, DATA_GPA, 8, 0, 0); /* exists in memory, not in the table */
	expect_pop_error("indirect next beyond the table");
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, 32);
	put_desc_at(IND_GPA, 0, DATA_GPA, 8, VRING_DESC_F_NEXT, 0xffff);
	expect_pop_error("indirect next 0xffff");
	/* Loops inside the table. */
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, 16);
	put_desc_at(IND_GPA, 0, DATA_GPA, 8, VRING_DESC_F_NEXT, 0);
	expect_pop_error("indirect self loop");
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, 48);
	put_desc_at(IND_GPA, 0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	put_desc_at(IND_GPA, 1, DATA_GPA, 8, VRING_DESC_F_NEXT, 2);
	put_desc_at(IND_GPA, 2, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	expect_pop_error("indirect cycle");
	/* Bad buffers inside a table are as bad as direct ones. */
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, 32);
	put_desc_at(IND_GPA, 0, DATA_GPA, 0, VRING_DESC_F_NEXT, 1);
	put_desc_at(IND_GPA, 1, DATA_GPA, 8, 0, 0);
	expect_pop_error("indirect zero-length buffer");
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, 32);
	put_desc_at(IND_GPA, 0, DATA_GPA, 8, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	put_desc_at(IND_GPA, 1, DATA_GPA, 8, 0, 0);
	expect_pop_error("indirect readable after writable");
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, 16);
	put_desc_at(IND_GPA, 0, ROM_GPA, 8, VRING_DESC_F_WRITE, 0);
	expect_pop_error("indirect writable buffer in ROM");
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, 16);
	put_desc_at(IND_GPA, 0, 0xfffffffffffffff8ull, 16, 0, 0);
	expect_pop_error("indirect buffer overflowing");
	/* A table longer than iov_cap, all of it chained. */
	indirect_case(true, VRING_DESC_F_INDIRECT, IND_GPA, (IOV_CAP + 1) * 16);
	for (unsigned i = 0; i <= IOV_CAP; i++)
		put_desc_at(IND_GPA, i, DATA_GPA, 8, i < IOV_CAP ? VRING_DESC_F_NEXT : 0,
		            (uint16_t)(i + 1));
	expect_pop_error("indirect chain longer than iov_cap");
#undef GOOD_TABLE
}

/* ---- malformed direct chains ---- */

static void test_chain_malformed(void **state)
{
	(void)state;
	/* Loops. */
	init_q(QSIZE, false, false);
	set_desc(0, DATA_GPA, 8, VRING_DESC_F_NEXT, 0);
	avail_add(0);
	expect_pop_error("descriptor pointing to itself");
	init_q(QSIZE, false, false);
	fx.e.iov_cap = VQ_MAX_IOV;
	set_desc(0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	set_desc(1, DATA_GPA, 8, VRING_DESC_F_NEXT, 2);
	set_desc(2, DATA_GPA, 8, VRING_DESC_F_NEXT, 0);
	avail_add(0);
	expect_pop_error("cycle 0 -> 1 -> 2 -> 0");
	init_q(QSIZE, false, false);
	fx.e.iov_cap = VQ_MAX_IOV;
	for (unsigned i = 0; i < QSIZE; i++)
		set_desc(i, DATA_GPA, 8, VRING_DESC_F_NEXT, (uint16_t)((i + 1) % QSIZE));
	avail_add(5);
	expect_pop_error("cycle through the whole table");
	fx.e.iov_cap = IOV_CAP;

	/* next index out of range. */
	init_q(QSIZE, false, false);
	set_desc(0, DATA_GPA, 8, VRING_DESC_F_NEXT, QSIZE);
	avail_add(0);
	expect_pop_error("next == size");
	init_q(QSIZE, false, false);
	set_desc(0, DATA_GPA, 8, VRING_DESC_F_NEXT, 0xffff);
	avail_add(0);
	expect_pop_error("next == 0xffff");

	/* Head index out of range. */
	init_q(QSIZE, false, false);
	avail_add(QSIZE);
	expect_pop_error("head == size");
	init_q(QSIZE, false, false);
	avail_add(0xffff);
	expect_pop_error("head == 0xffff");

	/* Buffers outside RAM, straddling its end, overflowing. */
	static const struct {
		uint64_t addr;
		uint32_t len;
	} bad[] = {
	    {0, 8},
	    {RAM_GPA - 8, 8},
	    {RAM_GPA - 8, 16},
	    {RAM_GPA + RAM_SIZE + ROM_SIZE, 8},
	    {0x100000000ull, 8},
	    {RAM_GPA + RAM_SIZE - 8, 9},
	    {RAM_GPA + RAM_SIZE - 8, 16}, /* RAM into ROM: two regions */
	    {ROM_GPA + ROM_SIZE - 8, 16},
	    {RAM_GPA, 0xffffffffu},
	    {0xffffffffffffff00ull, 0x200}, /* addr + len wraps */
	    {0xffffffffffffffffull, 1},
	    {0xffffffffffffffffull, 0xffffffffu},
	    {0x8000000000000000ull + RAM_GPA, 8},
	};
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		for (int w = 0; w < 2; w++) {
			init_q(QSIZE, false, false);
			set_desc(0, bad[i].addr, bad[i].len, w ? VRING_DESC_F_WRITE : 0, 0);
			avail_add(0);
			expect_pop_error("buffer outside RAM");
			/* Also as the second descriptor of a chain. */
			init_q(QSIZE, false, false);
			set_desc(0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
			set_desc(1, bad[i].addr, bad[i].len, w ? VRING_DESC_F_WRITE : 0, 0);
			avail_add(0);
			expect_pop_error("second buffer outside RAM");
		}
	}

	/* Zero-length buffers, readable or writable, first or later. */
	init_q(QSIZE, false, false);
	set_desc(0, DATA_GPA, 0, 0, 0);
	avail_add(0);
	expect_pop_error("zero-length buffer");
	init_q(QSIZE, false, false);
	set_desc(0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	set_desc(1, DATA_GPA, 0, VRING_DESC_F_WRITE, 0);
	avail_add(0);
	expect_pop_error("zero-length writable buffer");

	/* Readable after writable. */
	init_q(QSIZE, false, false);
	set_desc(0, DATA_GPA, 8, VRING_DESC_F_NEXT, 1);
	set_desc(1, DATA_GPA, 8, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
	set_desc(2, DATA_GPA, 8, 0, 0);
	avail_add(0);
	expect_pop_error("readable after writable");

	/* Writable buffer in the read-only region (readable there is fine). */
	init_q(QSIZE, false, false);
	set_desc(0, ROM_GPA, 8, VRING_DESC_F_WRITE, 0);
	avail_add(0);
	expect_pop_error("writable buffer in ROM");
	init_q(QSIZE, false, false);
	set_desc(0, ROM_GPA, 8, VRING_DESC_F_NEXT, 1);
	set_desc(1, ROM_GPA + 8, 8, VRING_DESC_F_WRITE, 0);
	avail_add(0);
	expect_pop_error("writable buffer in ROM after a readable one");

	/* The avail index more than a ring ahead. */
	init_q(QSIZE, false, false);
	set_desc(0, DATA_GPA, 8, 0, 0);
	set_avail_idx(QSIZE + 1);
	expect_pop_error("avail idx size+1 ahead");
	set_avail_idx(0x8000);
	expect_pop_error("avail idx half the index space ahead");
	set_avail_idx(0xffff); /* "behind" by one: also more than a ring ahead */
	expect_pop_error("avail idx moved backwards");
	/* ... and a driver that fixes it is served again. */
	set_avail_idx(1);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);

	/* An error does not consume the entry: popping again fails again. */
	init_q(QSIZE, false, false);
	set_desc(0, DATA_GPA, 0, 0, 0);
	avail_add(0);
	expect_pop_error("first try");
	expect_pop_error("second try");
	assert_true(vq_has_work(&fx.vq));
}

/* ---- used ring and notifications ---- */

static void test_push(void **state)
{
	(void)state;
	init_q(4, false, false);
	vq_push(&fx.vq, 3, 100);
	assert_int_equal(used_idx(), 1);
	assert_int_equal(get32(fx.used + 4), 3);
	assert_int_equal(get32(fx.used + 8), 100);
	vq_push(&fx.vq, 1, 0);
	assert_int_equal(used_idx(), 2);
	assert_int_equal(get32(fx.used + 12), 1);
	assert_int_equal(get32(fx.used + 16), 0);
	/* The ring wraps: entry 4 goes to slot 0. */
	vq_push(&fx.vq, 2, 7);
	vq_push(&fx.vq, 0, 8);
	vq_push(&fx.vq, 1, 0xffffffffu);
	assert_int_equal(used_idx(), 5);
	assert_int_equal(get32(fx.used + 4), 1);
	assert_int_equal(get32(fx.used + 8), 0xffffffffu);
	assert_int_equal(fx.vq.used_idx, 5);
	/* Nothing was written past the used ring's event word. */
	assert_int_equal(get16(fx.used + 4 + 8 * 4), 0);
	assert_int_equal(get16(fx.used + 4 + 8 * 4 + 2), 0);
	/* The used flags are the device's and untouched by pushes. */
	assert_int_equal(used_flags(), 0);
}

static void test_notify_flags(void **state)
{
	(void)state;
	init_q(QSIZE, false, false);
	vq_push(&fx.vq, 0, 1);
	assert_true(vq_should_notify(&fx.vq));
	set_avail_flags(VRING_AVAIL_F_NO_INTERRUPT);
	vq_push(&fx.vq, 0, 1);
	assert_false(vq_should_notify(&fx.vq));
	assert_false(vq_should_notify(&fx.vq));
	/* Other flag bits do not suppress. */
	set_avail_flags(0xfffe);
	assert_true(vq_should_notify(&fx.vq));
	set_avail_flags(0);
	assert_true(vq_should_notify(&fx.vq));
	/* used_event is ignored without the event index. */
	set_used_event(100);
	vq_push(&fx.vq, 0, 1);
	assert_true(vq_should_notify(&fx.vq));
}

static void test_notify_event_idx(void **state)
{
	(void)state;
	init_q(QSIZE, true, false);
	/* The first call always notifies, whatever used_event says. */
	set_used_event(50);
	vq_push(&fx.vq, 0, 1); /* used idx 1 */
	assert_true(vq_should_notify(&fx.vq));
	/* used_event = 1: notify once entry 1 is used (idx 1 -> 2). */
	set_used_event(1);
	vq_push(&fx.vq, 0, 1);
	assert_true(vq_should_notify(&fx.vq));
	/* Nothing new since the last interrupt. */
	assert_false(vq_should_notify(&fx.vq));
	/* used_event 5: idx 3 and 4 do not cross it... */
	set_used_event(5);
	vq_push(&fx.vq, 0, 1);
	assert_false(vq_should_notify(&fx.vq));
	vq_push(&fx.vq, 0, 1);
	assert_false(vq_should_notify(&fx.vq));
	/* ... and 4 -> 6 in one go does. */
	vq_push(&fx.vq, 0, 1);
	vq_push(&fx.vq, 0, 1);
	assert_true(vq_should_notify(&fx.vq));
	assert_int_equal(fx.vq.signalled_used, 6);
	/* An event already passed long ago does not notify again. */
	set_used_event(2);
	vq_push(&fx.vq, 0, 1);
	assert_false(vq_should_notify(&fx.vq));
	/* NO_INTERRUPT is ignored with the event index. */
	set_avail_flags(VRING_AVAIL_F_NO_INTERRUPT);
	set_used_event(fx.vq.used_idx);
	vq_push(&fx.vq, 0, 1);
	assert_true(vq_should_notify(&fx.vq));
	set_avail_flags(0);

	/* Across the 16-bit wrap. */
	fx.vq.used_idx = 0xfffe;
	fx.vq.signalled_used = 0xfffe;
	set_used_event(0xffff);
	vq_push(&fx.vq, 0, 1); /* 0xffff: event not yet passed */
	assert_false(vq_should_notify(&fx.vq));
	vq_push(&fx.vq, 0, 1); /* 0: passed */
	assert_int_equal(fx.vq.used_idx, 0);
	assert_true(vq_should_notify(&fx.vq));
	set_used_event(0);
	vq_push(&fx.vq, 0, 1);
	assert_true(vq_should_notify(&fx.vq));

	/* A reset queue starts again with "first call notifies". */
	init_q(QSIZE, true, false);
	set_used_event(1000);
	assert_false(fx.vq.signalled_valid);
	vq_push(&fx.vq, 0, 1);
	assert_true(vq_should_notify(&fx.vq));
	vq_push(&fx.vq, 0, 1);
	assert_false(vq_should_notify(&fx.vq));
}

static void test_enable_kicks(void **state)
{
	(void)state;
	/* Without the event index: the used ring's flags. */
	init_q(QSIZE, false, false);
	assert_false(vq_enable_kicks(&fx.vq, false));
	assert_int_equal(used_flags(), VRING_USED_F_NO_NOTIFY);
	assert_int_equal(avail_event(), 0);
	assert_false(vq_enable_kicks(&fx.vq, true));
	assert_int_equal(used_flags(), 0);
	set_desc(0, DATA_GPA, 8, 0, 0);
	avail_add(0);
	assert_false(vq_enable_kicks(&fx.vq, false)); /* disabling never reports work */
	assert_int_equal(used_flags(), VRING_USED_F_NO_NOTIFY);
	assert_true(vq_enable_kicks(&fx.vq, true));
	assert_int_equal(used_flags(), 0);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_false(vq_enable_kicks(&fx.vq, true));

	/* With the event index: avail_event after the used ring; the flags
	 * stay alone. */
	init_q(QSIZE, true, false);
	put16(fx.used + 4 + 8 * QSIZE, 0x1234);
	assert_false(vq_enable_kicks(&fx.vq, false));
	assert_int_equal(used_flags(), 0);
	assert_false(vq_enable_kicks(&fx.vq, true));
	assert_int_equal(avail_event(), 0);
	assert_int_equal(used_flags(), 0);
	set_desc(0, DATA_GPA, 8, 0, 0);
	avail_add(0);
	avail_add(0);
	assert_true(vq_enable_kicks(&fx.vq, true));
	assert_int_equal(avail_event(), 0);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_true(vq_enable_kicks(&fx.vq, true));
	assert_int_equal(avail_event(), 1);
	assert_int_equal(vq_pop(&fx.vq, &fx.e), VQ_GOT);
	assert_false(vq_enable_kicks(&fx.vq, true));
	assert_int_equal(avail_event(), 2);
	assert_int_equal(used_flags(), 0);
	/* Nothing was written before the event word either. */
	assert_int_equal(get32(fx.used + 4 + 8 * (QSIZE - 1)), 0);
}

/* ---- iovec copies ---- */

static void test_iov_copy(void **state)
{
	uint8_t a[3], b[5], c[2], out[16];
	const uint8_t src[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
	struct iovec iov[3] = {{a, sizeof(a)}, {b, sizeof(b)}, {c, sizeof(c)}};

	(void)state;
	memset(a, 0xaa, sizeof(a));
	memset(b, 0xbb, sizeof(b));
	memset(c, 0xcc, sizeof(c));
	/* buf_to_iov: all, then with skip and partial lengths. */
	assert_int_equal(buf_to_iov(iov, 3, 0, src, 10), 10);
	assert_memory_equal(a, src, 3);
	assert_memory_equal(b, src + 3, 5);
	assert_memory_equal(c, src + 8, 2);
	memset(a, 0xaa, sizeof(a));
	memset(b, 0xbb, sizeof(b));
	memset(c, 0xcc, sizeof(c));
	assert_int_equal(buf_to_iov(iov, 3, 2, src, 4), 4); /* bytes 2..5 */
	assert_int_equal(a[0], 0xaa);
	assert_int_equal(a[1], 0xaa);
	assert_int_equal(a[2], 0);
	assert_int_equal(b[0], 1);
	assert_int_equal(b[1], 2);
	assert_int_equal(b[2], 3);
	assert_int_equal(b[3], 0xbb);
	assert_int_equal(c[0], 0xcc);
	/* More than there is room for: bounded by the iovecs. */
	assert_int_equal(buf_to_iov(iov, 3, 7, src, 10), 3);
	assert_int_equal(b[4], 0);
	assert_int_equal(c[0], 1);
	assert_int_equal(c[1], 2);
	assert_int_equal(buf_to_iov(iov, 3, 10, src, 10), 0);
	assert_int_equal(buf_to_iov(iov, 3, 1000, src, 10), 0);
	assert_int_equal(buf_to_iov(iov, 3, 0, src, 0), 0);
	assert_int_equal(buf_to_iov(iov, 0, 0, src, 10), 0);
	assert_int_equal(buf_to_iov(iov, 1, 0, src, 10), 3);

	/* iov_to_buf. */
	memcpy(a, "abc", 3);
	memcpy(b, "defgh", 5);
	memcpy(c, "ij", 2);
	memset(out, 0, sizeof(out));
	assert_int_equal(iov_to_buf(iov, 3, 0, out, sizeof(out)), 10);
	assert_string_equal((char *)out, "abcdefghij");
	memset(out, 0, sizeof(out));
	assert_int_equal(iov_to_buf(iov, 3, 3, out, 5), 5); /* skip exactly one iovec */
	assert_string_equal((char *)out, "defgh");
	memset(out, 0, sizeof(out));
	assert_int_equal(iov_to_buf(iov, 3, 2, out, 2), 2);
	assert_string_equal((char *)out, "cd");
	memset(out, 0, sizeof(out));
	assert_int_equal(iov_to_buf(iov, 3, 9, out, 5), 1);
	assert_string_equal((char *)out, "j");
	assert_int_equal(iov_to_buf(iov, 3, 10, out, 5), 0);
	assert_int_equal(iov_to_buf(iov, 3, SIZE_MAX, out, 5), 0);
	assert_int_equal(iov_to_buf(iov, 3, 0, out, 0), 0);
	assert_int_equal(iov_to_buf(iov, 2, 0, out, sizeof(out)), 8);

	/* Zero-length iovecs are skipped over. */
	struct iovec holes[4] = {{a, 0}, {b, 2}, {c, 0}, {a, 1}};
	memset(out, 0, sizeof(out));
	assert_int_equal(iov_to_buf(holes, 4, 1, out, sizeof(out)), 2);
	assert_string_equal((char *)out, "ea");
}

/* ---- randomised ---- */

static uint64_t rng;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static uint64_t rnd_addr(void)
{
	switch (rnd() % 8) {
	case 0:
		return rnd();
	case 1:
		return RAM_GPA + RAM_SIZE - rnd() % 128; /* around the end of RAM */
	case 2:
		return ROM_GPA + rnd() % ROM_SIZE;
	case 3:
		return ROM_GPA + ROM_SIZE - rnd() % 64;
	case 4:
		return IND_GPA + 16 * (rnd() % 64); /* where the tables are */
	case 5:
		return RAM_GPA - rnd() % 64;
	default:
		return RAM_GPA + rnd() % RAM_SIZE;
	}
}

static uint32_t rnd_len(void)
{
	switch (rnd() % 6) {
	case 0:
		return (uint32_t)rnd();
	case 1:
		return 0;
	case 2:
		return 16 * (uint32_t)(rnd() % 10);
	case 3:
		return (uint32_t)(rnd() % 0x10000);
	default:
		return 1 + (uint32_t)(rnd() % 256);
	}
}

static void rnd_desc_table(uint64_t table, unsigned n, unsigned next_range)
{
	for (unsigned i = 0; i < n; i++) {
		uint16_t flags = rnd() % 16 == 0 ? (uint16_t)rnd() : (uint16_t)(rnd() % 8);
		uint16_t next = rnd() % 16 == 0 ? (uint16_t)rnd() : (uint16_t)(rnd() % next_range);

		if (rnd() % 16 == 0) {
			for (unsigned k = 0; k < 16; k++)
				hva(table + 16ull * i)[k] = (uint8_t)rnd();
			continue;
		}
		put_desc_at(table, i, rnd_addr(), rnd_len(), flags, next);
	}
}

static bool inside(const struct iovec *v, const uint8_t *base, uint64_t size)
{
	const uint8_t *p = v->iov_base;

	return p >= base && p < base + size && v->iov_len > 0 && v->iov_len <= size &&
	       (uint64_t)(p - base) + v->iov_len <= size;
}

/* A plausible data buffer: inside RAM, past the rings and tables. */
static void rnd_buffer(uint64_t *addr, uint32_t *len)
{
	*len = 1 + (uint32_t)(rnd() % 4096);
	*addr = DATA_GPA + rnd() % (RAM_SIZE - 0x10000 - 4096);
}

/*
 * Well-formed work: `count` chains of 1-4 descriptors (readable ones
 * first), some of them indirect tables of 1-6 entries in shuffled order,
 * using each descriptor once.  Returns how many chains were made available.
 */
static unsigned rnd_valid_chains(uint16_t size, uint16_t start, bool indirect)
{
	uint16_t perm[256];
	unsigned used = 0, ind_used = 0, count = (unsigned)(rnd() % (size + 1u)), made = 0;

	for (unsigned i = 0; i < size; i++)
		perm[i] = (uint16_t)i;
	for (unsigned i = size; i > 1; i--) {
		unsigned j = (unsigned)(rnd() % i);
		uint16_t t = perm[i - 1];

		perm[i - 1] = perm[j];
		perm[j] = t;
	}
	for (; made < count && used < size; made++) {
		unsigned left = size - used, len = 1 + (unsigned)(rnd() % (left < 4 ? left : 4));
		uint16_t head = perm[used];

		if (indirect && rnd() % 3 == 0 && ind_used + 6 <= 64) {
			unsigned c = 1 + (unsigned)(rnd() % 6), r = (unsigned)(rnd() % (c + 1));
			uint16_t order[6];
			uint64_t table = IND_GPA + 16ull * ind_used;

			for (unsigned i = 0; i < c; i++)
				order[i] = (uint16_t)i;
			for (unsigned i = c; i > 1; i--) {
				unsigned j = (unsigned)(rnd() % i);
				uint16_t t = order[i - 1];

				order[i - 1] = order[j];
				order[j] = t;
			}
			for (unsigned k = 0; k < c; k++) {
				uint64_t addr;
				uint32_t blen;
				uint16_t flags = (k >= r ? VRING_DESC_F_WRITE : 0) |
				                 (k + 1 < c ? VRING_DESC_F_NEXT : 0);

				rnd_buffer(&addr, &blen);
				put_desc_at(table, order[k], addr, blen, flags,
				            k + 1 < c ? order[k + 1] : 0);
			}
			set_desc(head, table, 16 * c, VRING_DESC_F_INDIRECT, 0);
			ind_used += c;
			used++;
		} else {
			unsigned r = (unsigned)(rnd() % (len + 1));

			for (unsigned k = 0; k < len; k++) {
				uint64_t addr;
				uint32_t blen;
				uint16_t flags = (k >= r ? VRING_DESC_F_WRITE : 0) |
				                 (k + 1 < len ? VRING_DESC_F_NEXT : 0);

				rnd_buffer(&addr, &blen);
				set_desc(perm[used + k], addr, blen, flags,
				         k + 1 < len ? perm[used + k + 1] : (uint16_t)rnd());
			}
			used += len;
		}
		put16(AVAIL_GPA + 4 + 2ull * ((uint16_t)(start + made) % size), head);
	}
	return made;
}

/* Corrupt `n` random bytes of the descriptor table, the indirect tables or
 * the avail ring. */
static void rnd_mutate(uint16_t size, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		switch (rnd() % 3) {
		case 0:
			hva(DESC_GPA)[rnd() % (16ull * size)] = (uint8_t)rnd();
			break;
		case 1:
			hva(IND_GPA)[rnd() % (16ull * 64)] = (uint8_t)rnd();
			break;
		default:
			hva(AVAIL_GPA)[rnd() % (6ull + 2ull * size)] = (uint8_t)rnd();
			break;
		}
	}
}

static const char *fuzz_body(void)
{
	static struct iovec iov[VQ_MAX_IOV + 8];
	struct vq_elem e = {.iov = iov};
	unsigned got = 0, errors = 0, got_indirect = 0;

	rng = 0x6b687976655f7671ull; /* fixed seed */
	for (unsigned it = 0; it < 4000; it++) {
		uint16_t size = (uint16_t)(1u << (rnd() % 9)); /* 1 .. 256 */
		uint16_t start = rnd() % 4 == 0 ? (uint16_t)rnd() : 0;
		bool indirect = rnd() & 1;
		unsigned mode = (unsigned)(rnd() % 4);

		memset(fx.ram, 0, 0x10000);
		fx.qsize = size;
		fx.desc = DESC_GPA;
		fx.avail = AVAIL_GPA;
		fx.used = USED_GPA;
		ISO_CHECK(vq_init(&fx.vq, &fx.gm, size, DESC_GPA, AVAIL_GPA, USED_GPA, rnd() & 1,
		                  indirect) == 0);
		fx.vq.last_avail = fx.vq.used_idx = start;
		put16(USED_GPA + 2, start);
		if (mode == 0) {
			/* Garbage everywhere. */
			rnd_desc_table(DESC_GPA, size, size + 2u);
			rnd_desc_table(IND_GPA, 64, 66);
			for (unsigned i = 0; i <= size; i++) /* ring and used_event */
				put16(AVAIL_GPA + 4 + 2ull * i,
				      rnd() % 8 == 0 ? (uint16_t)rnd()
				                     : (uint16_t)(rnd() % (size + 1u)));
			put16(AVAIL_GPA, (uint16_t)rnd());
			put16(AVAIL_GPA + 2, rnd() % 8 == 0
			                         ? (uint16_t)rnd()
			                         : (uint16_t)(start + rnd() % (size + 2u)));
		} else {
			/* Good chains, then (modes 2, 3) a few corrupted bytes.
			 * The feature bit may disagree with the tables. */
			unsigned n =
			    rnd_valid_chains(size, start, rnd() % 8 ? indirect : !indirect);

			put16(AVAIL_GPA + 2, (uint16_t)(start + n));
			rnd_mutate(size,
			           mode == 1 ? 0 : 1 + (unsigned)(rnd() % (mode == 2 ? 2 : 8)));
		}
		e.iov_cap = rnd() % 4 == 0 ? VQ_MAX_IOV : 1 + (unsigned)(rnd() % 16);
		/* Canary beyond iov_cap. */
		for (unsigned i = e.iov_cap; i < ARRAY_LEN(iov); i++)
			iov[i] = (struct iovec){(void *)0x5a5a, 0x5a5a};

		for (unsigned n = 0; n < size + 4u; n++) {
			uint16_t slot = fx.vq.last_avail % size;
			uint16_t want_head = get16(AVAIL_GPA + 4 + 2ull * slot);
			bool was_indirect;
			enum vq_pop_result r = vq_pop(&fx.vq, &e);
			uint64_t rl = 0, wl = 0;

			if (r == VQ_EMPTY)
				break;
			if (r == VQ_ERROR) {
				errors++;
				break;
			}
			ISO_CHECK(r == VQ_GOT);
			got++;
			ISO_CHECK(e.head == want_head);
			ISO_CHECK(e.head < size);
			was_indirect =
			    get16(DESC_GPA + 16ull * e.head + 12) & VRING_DESC_F_INDIRECT;
			ISO_CHECK(!was_indirect || indirect);
			got_indirect += was_indirect;
			ISO_CHECK(e.nread + e.nwrite >= 1);
			ISO_CHECK(e.nread + e.nwrite <= e.iov_cap);
			for (unsigned i = 0; i < e.nread + e.nwrite; i++) {
				bool w = i >= e.nread;

				/* Writable buffers only in RAM; readable in RAM or ROM. */
				ISO_CHECK(inside(&iov[i], fx.ram, RAM_SIZE) ||
				          (!w && inside(&iov[i], fx.rom, ROM_SIZE)));
				if (w)
					wl += iov[i].iov_len;
				else
					rl += iov[i].iov_len;
			}
			ISO_CHECK(rl == e.read_len && wl == e.write_len);
			/* Writable buffers can be written (ASan checks the host side). */
			for (unsigned i = e.nread; i < e.nread + e.nwrite; i++) {
				uint8_t *p = iov[i].iov_base;

				p[0] = 1;
				p[iov[i].iov_len - 1] = 2;
			}
			vq_push(&fx.vq, e.head, (uint32_t)e.write_len);
			(void)vq_should_notify(&fx.vq);
			(void)vq_enable_kicks(&fx.vq, rnd() & 1);
			/* The driver keeps scribbling while the device works. */
			if (mode != 1 && rnd() % 4 == 0)
				rnd_mutate(size, 1);
		}
		for (unsigned i = e.iov_cap; i < ARRAY_LEN(iov); i++)
			ISO_CHECK(iov[i].iov_base == (void *)0x5a5a && iov[i].iov_len == 0x5a5a);
		ISO_CHECK(used_idx() == fx.vq.used_idx);
	}
	/* The generator must exercise every outcome. */
	ISO_CHECK(got > 1000);
	ISO_CHECK(got_indirect > 100);
	ISO_CHECK(errors > 500);
	return NULL;
}

static void test_fuzz_pop(void **state)
{
	(void)state;
	/* In a child so that a crash fails only this test. */
	unit_run_isolated(fuzz_body);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_init_ok),         T(test_init_bad_size),
	    T(test_init_misaligned), T(test_init_outside_ram),
	    T(test_pop_chain),       T(test_pop_longest_chain),
	    T(test_pop_index_wrap),  T(test_unpop),
	    T(test_indirect_ok),     T(test_indirect_rejected),
	    T(test_chain_malformed), T(test_push),
	    T(test_notify_flags),    T(test_notify_event_idx),
	    T(test_enable_kicks),    T(test_iov_copy),
	    T(test_fuzz_pop),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
