/* Unit tests for guest memory bookkeeping (src/vmm/mem.h). */
#include "unit.h"

#include "vmm/mem.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)

static void test_layout(void **state)
{
	static const struct {
		uint64_t mem, low, high;
	} cases[] = {
	    {0, 0, 0},
	    {4 * KIB, 4 * KIB, 0},
	    {256 * MIB, 256 * MIB, 0},
	    {2 * GIB, 2 * GIB, 0},
	    {3 * GIB - 4 * KIB, 3 * GIB - 4 * KIB, 0},
	    {3 * GIB, 3 * GIB, 0},
	    {3 * GIB + 4 * KIB, 3 * GIB, 4 * KIB},
	    {4 * GIB, 3 * GIB, 1 * GIB},
	    {8 * GIB, 3 * GIB, 5 * GIB},
	    {1024 * GIB, 3 * GIB, 1021 * GIB},
	};

	(void)state;
	assert_int_equal(GMEM_LOWMEM_LIMIT, 3 * GIB);
	assert_int_equal(GMEM_HIGHMEM_BASE, 4 * GIB);
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		uint64_t low = 1, high = 1;

		gmem_layout(cases[i].mem, &low, &high);
		if (low != cases[i].low || high != cases[i].high)
			fail_msg("gmem_layout(%#llx) = %#llx + %#llx",
			         (unsigned long long)cases[i].mem, (unsigned long long)low,
			         (unsigned long long)high);
		assert_int_equal(low + high, cases[i].mem);
	}
}

/* Two small RAM regions and a ROM, backed by static buffers. */
static uint8_t ram_lo[64 * KIB], ram_hi[16 * KIB], rom[8 * KIB];
#define LO_GPA  0x0ull
#define HI_GPA  (4 * GIB)
#define ROM_GPA (4 * GIB - sizeof(rom))

static void setup_mem(struct guest_mem *gm)
{
	memset(gm, 0, sizeof(*gm));
	for (size_t i = 0; i < sizeof(ram_lo); i++)
		ram_lo[i] = (uint8_t)i;
	memset(ram_hi, 0x11, sizeof(ram_hi));
	memset(rom, 0xee, sizeof(rom));
	assert_int_equal(gmem_add_region(gm, LO_GPA, sizeof(ram_lo), ram_lo, false), 0);
	assert_int_equal(gmem_add_region(gm, HI_GPA, sizeof(ram_hi), ram_hi, false), 0);
	assert_int_equal(gmem_add_region(gm, ROM_GPA, sizeof(rom), rom, true), 0);
	assert_int_equal(gm->nregions, 3);
}

static void test_add_region(void **state)
{
	struct guest_mem gm;
	uint8_t buf[16];

	(void)state;
	setup_mem(&gm);
	/* Overlaps of every shape are refused. */
	assert_int_equal(gmem_add_region(&gm, LO_GPA, sizeof(ram_lo), buf, false), -1);
	assert_int_equal(gmem_add_region(&gm, 0x1000, 0x10, buf, false), -1);          /* inside */
	assert_int_equal(gmem_add_region(&gm, sizeof(ram_lo) - 1, 2, buf, false), -1); /* end */
	assert_int_equal(gmem_add_region(&gm, HI_GPA - 1, 2, buf, false), -1);         /* start */
	assert_int_equal(gmem_add_region(&gm, HI_GPA - 0x100000, 0x200000, buf, false), -1);
	assert_int_equal(gmem_add_region(&gm, 0, UINT64_MAX, buf, false), -1); /* covers all */
	assert_int_equal(gm.nregions, 3);
	/* Empty and wrapping ranges are refused. */
	assert_int_equal(gmem_add_region(&gm, 0x100000, 0, buf, false), -1);
	assert_int_equal(gmem_add_region(&gm, UINT64_MAX - 0xfff, 0x2000, buf, false), -1);
	assert_int_equal(gmem_add_region(&gm, UINT64_MAX, 2, buf, false), -1);
	assert_int_equal(gm.nregions, 3);
	/* Adjacent on both sides is fine. */
	assert_int_equal(gmem_add_region(&gm, sizeof(ram_lo), sizeof(buf), buf, false), 0);
	assert_int_equal(gmem_add_region(&gm, HI_GPA + sizeof(ram_hi), sizeof(buf), buf, false), 0);
	assert_int_equal(gmem_add_region(&gm, ROM_GPA - sizeof(buf), sizeof(buf), buf, false), 0);
	assert_int_equal(gm.nregions, 6);
	/* The table is full at GMEM_MAX_REGIONS. */
	assert_int_equal(gmem_add_region(&gm, 0x10000000, 16, buf, false), 0);
	assert_int_equal(gmem_add_region(&gm, 0x20000000, 16, buf, false), 0);
	assert_int_equal(gm.nregions, GMEM_MAX_REGIONS);
	assert_int_equal(gmem_add_region(&gm, 0x30000000, 16, buf, false), -1);
	assert_int_equal(gm.nregions, GMEM_MAX_REGIONS);
	/* Recorded as given. */
	assert_int_equal(gm.region[2].gpa, ROM_GPA);
	assert_int_equal(gm.region[2].size, sizeof(rom));
	assert_ptr_equal(gm.region[2].hva, rom);
	assert_true(gm.region[2].readonly);
	assert_false(gm.region[0].readonly);
}

static void test_ptr_bounds(void **state)
{
	struct guest_mem gm;

	(void)state;
	setup_mem(&gm);
	/* Inside. */
	assert_ptr_equal(gmem_ptr(&gm, 0, 1, false), ram_lo);
	assert_ptr_equal(gmem_ptr(&gm, 0x1234, 8, true), ram_lo + 0x1234);
	assert_ptr_equal(gmem_ptr(&gm, 0, sizeof(ram_lo), true), ram_lo);
	assert_ptr_equal(gmem_ptr(&gm, sizeof(ram_lo) - 4, 4, true), ram_lo + sizeof(ram_lo) - 4);
	assert_ptr_equal(gmem_ptr(&gm, HI_GPA + 0x10, 0x10, true), ram_hi + 0x10);
	/* One byte too far. */
	assert_null(gmem_ptr(&gm, sizeof(ram_lo) - 4, 5, false));
	assert_null(gmem_ptr(&gm, 0, sizeof(ram_lo) + 1, false));
	assert_null(gmem_ptr(&gm, sizeof(ram_lo), 1, false));
	assert_null(gmem_ptr(&gm, HI_GPA - 1, 2, false));
	assert_null(gmem_ptr(&gm, HI_GPA + sizeof(ram_hi) - 1, 2, false));
	/* In the hole. */
	assert_null(gmem_ptr(&gm, 3 * GIB, 1, false));
	assert_null(gmem_ptr(&gm, 0x100000, 4, false));
	/* Spanning two regions (ROM then RAM at 4 GiB) is refused. */
	assert_null(gmem_ptr(&gm, HI_GPA - 4, 8, false));

	/* Overflow: gpa + len wraps. */
	assert_null(gmem_ptr(&gm, UINT64_MAX - 1, 4, false));
	assert_null(gmem_ptr(&gm, UINT64_MAX, 1, false));
	assert_null(gmem_ptr(&gm, UINT64_MAX, 0, false));
	assert_null(gmem_ptr(&gm, 0x10, UINT64_MAX, false));
	assert_null(gmem_ptr(&gm, 0x10, UINT64_MAX - 0xf, false));
	assert_null(gmem_ptr(&gm, 0x10, UINT64_MAX - 0x8, false));
	assert_null(gmem_ptr(&gm, HI_GPA + 0x10, UINT64_MAX - HI_GPA, false));
	assert_null(gmem_ptr(&gm, 1ull << 63, 1ull << 63, false));

	/* len 0 checks gpa alone. */
	assert_ptr_equal(gmem_ptr(&gm, 0, 0, false), ram_lo);
	assert_ptr_equal(gmem_ptr(&gm, sizeof(ram_lo) - 1, 0, true), ram_lo + sizeof(ram_lo) - 1);
	assert_null(gmem_ptr(&gm, sizeof(ram_lo), 0, false));
	assert_null(gmem_ptr(&gm, 3 * GIB, 0, false));

	/* An empty table. */
	struct guest_mem empty;
	memset(&empty, 0, sizeof(empty));
	assert_null(gmem_ptr(&empty, 0, 0, false));
	assert_null(gmem_ptr(&empty, 0, 1, false));
	assert_false(gmem_is_ram(&empty, 0, 1));
}

static void test_readonly(void **state)
{
	struct guest_mem gm;
	uint8_t buf[8], pattern[8] = {1, 2, 3, 4, 5, 6, 7, 8};

	(void)state;
	setup_mem(&gm);
	assert_ptr_equal(gmem_ptr(&gm, ROM_GPA, 16, false), rom);
	assert_null(gmem_ptr(&gm, ROM_GPA, 16, true));
	assert_null(gmem_ptr(&gm, ROM_GPA + 100, 0, true));
	assert_int_equal(gmem_write(&gm, ROM_GPA, pattern, sizeof(pattern)), -1);
	assert_int_equal(rom[0], 0xee); /* unchanged */
	assert_int_equal(gmem_read(&gm, ROM_GPA + 8, buf, sizeof(buf)), 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0xee);
}

static void test_read_write(void **state)
{
	struct guest_mem gm;
	uint8_t buf[32], pattern[32];

	(void)state;
	setup_mem(&gm);
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(0xa0 + i);
	assert_int_equal(gmem_write(&gm, 0x2000, pattern, sizeof(pattern)), 0);
	assert_memory_equal(ram_lo + 0x2000, pattern, sizeof(pattern));
	assert_int_equal(ram_lo[0x1fff], (uint8_t)0x1fff); /* neighbours untouched */
	assert_int_equal(ram_lo[0x2000 + sizeof(pattern)], (uint8_t)(0x2000 + sizeof(pattern)));
	memset(buf, 0, sizeof(buf));
	assert_int_equal(gmem_read(&gm, 0x2000, buf, sizeof(buf)), 0);
	assert_memory_equal(buf, pattern, sizeof(pattern));

	assert_int_equal(
	    gmem_write(&gm, HI_GPA + sizeof(ram_hi) - sizeof(pattern), pattern, sizeof(pattern)),
	    0);
	assert_memory_equal(ram_hi + sizeof(ram_hi) - sizeof(pattern), pattern, sizeof(pattern));

	/* Out of range: -1 and nothing copied. */
	memset(buf, 0x55, sizeof(buf));
	assert_int_equal(gmem_read(&gm, sizeof(ram_lo) - 8, buf, 16), -1);
	assert_int_equal(buf[0], 0x55);
	assert_int_equal(gmem_write(&gm, sizeof(ram_lo) - 8, pattern, 16), -1);
	assert_int_equal(ram_lo[sizeof(ram_lo) - 8], (uint8_t)(sizeof(ram_lo) - 8));
	assert_int_equal(gmem_read(&gm, UINT64_MAX - 1, buf, 4), -1);
	assert_int_equal(gmem_write(&gm, UINT64_MAX - 1, pattern, 4), -1);
	/* Zero-length copies inside are fine. */
	assert_int_equal(gmem_read(&gm, 0x10, buf, 0), 0);
	assert_int_equal(gmem_write(&gm, 0x10, pattern, 0), 0);
}

/* khyve's own writes into guest RAM are recorded while tracking is on,
 * page by page, and taken once. */
static void test_dirty(void **state)
{
	static uint8_t low[70 * 4096] __attribute__((aligned(4096)));
	static uint8_t romp[4096] __attribute__((aligned(4096)));
	struct guest_mem gm = {0};
	uint64_t bits[2] = {0};
	uint8_t x[8] = {1};

	(void)state;
	assert_int_equal(gmem_add_region(&gm, 0, sizeof(low), low, false), 0);
	assert_int_equal(gmem_add_region(&gm, 0xfffff000, sizeof(romp), romp, true), 0);
	gmem_mark_dirty(&gm, 0, 4096); /* off: nothing recorded, no bitmap */
	assert_null(gm.region[0].dirty);
	assert_int_equal(gmem_dirty_start(&gm), 0);
	assert_non_null(gm.region[0].dirty);
	assert_null(gm.region[1].dirty);
	assert_int_equal(gmem_dirty_words(sizeof(low)), 2);
	assert_int_equal(gmem_write(&gm, 4096 + 4090, x, 8), 0); /* pages 1 and 2 */
	gmem_mark_dirty(&gm, 65 * 4096, 1);                      /* page 65 */
	gmem_mark_dirty(&gm, 69 * 4096, 8192);                   /* past the end: ignored */
	gmem_mark_dirty(&gm, 0xfffff000, 16);                    /* ROM: ignored */
	gmem_mark_dirty(&gm, ~0ull - 2, 8);                      /* wraps: ignored */
	/* A pre-copy round's take keeps the marks: the write behind a
	 * pointer may still be under way. */
	gmem_dirty_take(&gm, 0, bits, false);
	assert_int_equal(bits[0], 6);
	assert_int_equal(bits[1], 2);
	memset(bits, 0, sizeof(bits));
	gmem_dirty_take(&gm, 0, bits, true);
	assert_int_equal(bits[0], 6);
	assert_int_equal(bits[1], 2);
	memset(bits, 0, sizeof(bits));
	gmem_dirty_take(&gm, 0, bits, true);
	gmem_dirty_take(&gm, 1, bits, true); /* no bitmap: nothing */
	gmem_dirty_take(&gm, 9, bits, true); /* no region: nothing */
	assert_int_equal(bits[0] | bits[1], 0);
	/* Asking for a pointer to write counts as a write. */
	assert_non_null(gmem_ptr(&gm, 3 * 4096, 16, true));
	assert_non_null(gmem_ptr(&gm, 5 * 4096, 16, false));
	gmem_dirty_take(&gm, 0, bits, true);
	assert_int_equal(bits[0], 1u << 3);
	memset(bits, 0, sizeof(bits));
	gmem_dirty_stop(&gm);
	gmem_mark_dirty(&gm, 0, 1);
	gmem_dirty_take(&gm, 0, bits, true);
	assert_int_equal(bits[0], 0);
	gmem_dirty_free(&gm);
	assert_null(gm.region[0].dirty);
}

static void test_is_ram(void **state)
{
	struct guest_mem gm;

	(void)state;
	setup_mem(&gm);
	assert_true(gmem_is_ram(&gm, 0, sizeof(ram_lo)));
	assert_true(gmem_is_ram(&gm, 0x100, 0x100));
	assert_true(gmem_is_ram(&gm, HI_GPA, 1));
	assert_false(gmem_is_ram(&gm, 0, sizeof(ram_lo) + 1));
	assert_false(gmem_is_ram(&gm, ROM_GPA, 1));    /* ROM */
	assert_false(gmem_is_ram(&gm, 3 * GIB, 1));    /* hole */
	assert_false(gmem_is_ram(&gm, HI_GPA - 1, 2)); /* ROM + RAM */
	assert_false(gmem_is_ram(&gm, UINT64_MAX - 1, 4));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_layout),     cmocka_unit_test(test_add_region),
	    cmocka_unit_test(test_ptr_bounds), cmocka_unit_test(test_readonly),
	    cmocka_unit_test(test_read_write), cmocka_unit_test(test_is_ram),
	    cmocka_unit_test(test_dirty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
