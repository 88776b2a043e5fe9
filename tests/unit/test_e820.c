/*
 * Unit tests for the e820 map (src/boot/e820.h) and the Linux boot
 * protocol helpers (src/boot/linux.h): bzImage header parsing, the zero
 * page and initrd placement.  Offsets per Documentation/arch/x86/boot.rst
 * and zero-page.rst.
 */
#include "unit.h"

#include "boot/e820.h"
#include "boot/linux.h"
#include "lib/file.h"
#include "vmm/mem.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)

/* ---- e820 ---- */

static void expect_entry(const struct e820_map *m, unsigned i, uint64_t addr, uint64_t size,
                         uint32_t type)
{
	assert_true(i < m->nentries);
	if (m->entry[i].addr != addr || m->entry[i].size != size || m->entry[i].type != type)
		fail_msg("entry %u is [%#llx +%#llx type %u], want [%#llx +%#llx type %u]", i,
		         (unsigned long long)m->entry[i].addr, (unsigned long long)m->entry[i].size,
		         m->entry[i].type, (unsigned long long)addr, (unsigned long long)size,
		         type);
}

/* Sorted, non-empty, non-overlapping, known types. */
static void check_sane(const struct e820_map *m)
{
	assert_true(m->nentries <= E820_MAX_ENTRIES);
	for (unsigned i = 0; i < m->nentries; i++) {
		assert_true(m->entry[i].size > 0);
		assert_true(m->entry[i].addr + m->entry[i].size > m->entry[i].addr);
		assert_in_range(m->entry[i].type, E820_RAM, E820_NVS);
		if (i > 0)
			assert_true(m->entry[i - 1].addr + m->entry[i - 1].size <=
			            m->entry[i].addr);
	}
}

static void test_entry_layout(void **state)
{
	(void)state;
	/* The zero page stores 20-byte packed entries. */
	assert_int_equal(sizeof(struct e820_entry), 20);
	assert_int_equal(offsetof(struct e820_entry, size), 8);
	assert_int_equal(offsetof(struct e820_entry, type), 16);
}

static void test_default_256m(void **state)
{
	struct e820_map m;
	uint64_t low, high;

	(void)state;
	gmem_layout(256 * MIB, &low, &high);
	memset(&m, 0xa5, sizeof(m));
	assert_int_equal(e820_build_default(&m, low, high), 0);
	check_sane(&m);
	assert_int_equal(m.nentries, 4);
	expect_entry(&m, 0, 0, 0x9fc00, E820_RAM);
	expect_entry(&m, 1, 0x9fc00, 0x400, E820_RESERVED);
	expect_entry(&m, 2, 0xe0000, 0x20000, E820_RESERVED);
	expect_entry(&m, 3, MIB, 255 * MIB, E820_RAM);
	assert_int_equal(e820_total(&m, E820_RAM), 0x9fc00 + 255 * MIB);
	assert_int_equal(e820_total(&m, E820_RESERVED), 0x400 + 0x20000);
	assert_int_equal(e820_total(&m, E820_ACPI), 0);
}

static void test_default_4g(void **state)
{
	struct e820_map m;
	uint64_t low, high;

	(void)state;
	gmem_layout(4 * GIB, &low, &high);
	assert_int_equal(low, 3 * GIB);
	assert_int_equal(high, 1 * GIB);
	assert_int_equal(e820_build_default(&m, low, high), 0);
	check_sane(&m);
	assert_int_equal(m.nentries, 5);
	expect_entry(&m, 3, MIB, 3 * GIB - MIB, E820_RAM);
	expect_entry(&m, 4, 4 * GIB, 1 * GIB, E820_RAM);
	/* Nothing in the hole between 3 and 4 GiB. */
	for (unsigned i = 0; i < m.nentries; i++)
		assert_false(m.entry[i].addr < 4 * GIB &&
		             m.entry[i].addr + m.entry[i].size > 3 * GIB);
	assert_int_equal(e820_total(&m, E820_RAM), 0x9fc00 + 3 * GIB - MIB + 1 * GIB);

	/* Exactly 3 GiB: no high entry. */
	gmem_layout(3 * GIB, &low, &high);
	assert_int_equal(e820_build_default(&m, low, high), 0);
	assert_int_equal(m.nentries, 4);
	/* Lots of memory. */
	gmem_layout(64 * GIB, &low, &high);
	assert_int_equal(e820_build_default(&m, low, high), 0);
	expect_entry(&m, 4, 4 * GIB, 61 * GIB, E820_RAM);
}

static void test_default_tiny(void **state)
{
	static const uint64_t lows[] = {4 * KIB, 512 * KIB, 0x9fc00, 0x9fe00,       0xa0000,
	                                0xc0000, 0xf0000,   MIB,     MIB + 4 * KIB, 2 * MIB};
	struct e820_map m;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(lows); i++) {
		uint64_t low = lows[i];

		assert_int_equal(e820_build_default(&m, low, 0), 0);
		check_sane(&m);
		/* All RAM below `low`, and as much of it as exists (minus the EBDA). */
		for (unsigned j = 0; j < m.nentries; j++)
			if (m.entry[j].type == E820_RAM)
				assert_true(m.entry[j].addr + m.entry[j].size <= low);
		uint64_t want = low < 0x9fc00 ? low : 0x9fc00;
		if (low > MIB)
			want += low - MIB;
		assert_int_equal(e820_total(&m, E820_RAM), want);
		/* Conventional memory always starts at 0. */
		expect_entry(&m, 0, 0, low < 0x9fc00 ? low : 0x9fc00, E820_RAM);
	}
	/* Under 640 KiB: a single entry. */
	assert_int_equal(e820_build_default(&m, 512 * KIB, 0), 0);
	assert_int_equal(m.nentries, 1);
	/* No RAM at all. */
	assert_int_equal(e820_build_default(&m, 0, 0), 0);
	assert_int_equal(m.nentries, 0);
	/* Exactly 1 MiB: no empty [1M, 1M) entry. */
	assert_int_equal(e820_build_default(&m, MIB, 0), 0);
	assert_int_equal(m.nentries, 3);
}

static void test_add_merge_sort(void **state)
{
	struct e820_map m;

	(void)state;
	memset(&m, 0, sizeof(m));
	/* Out-of-order inserts end up sorted. */
	assert_int_equal(e820_add(&m, 0x100000, 0x1000, E820_RAM), 0);
	assert_int_equal(e820_add(&m, 0x0, 0x1000, E820_RAM), 0);
	assert_int_equal(e820_add(&m, 0x50000, 0x1000, E820_ACPI), 0);
	assert_int_equal(m.nentries, 3);
	expect_entry(&m, 0, 0, 0x1000, E820_RAM);
	expect_entry(&m, 1, 0x50000, 0x1000, E820_ACPI);
	expect_entry(&m, 2, 0x100000, 0x1000, E820_RAM);
	/* Appending right after an entry of the same type merges. */
	assert_int_equal(e820_add(&m, 0x1000, 0x1000, E820_RAM), 0);
	assert_int_equal(m.nentries, 3);
	expect_entry(&m, 0, 0, 0x2000, E820_RAM);
	assert_int_equal(e820_add(&m, 0x101000, 0x3000, E820_RAM), 0);
	expect_entry(&m, 2, 0x100000, 0x4000, E820_RAM);
	/* Right after one of another type does not. */
	assert_int_equal(e820_add(&m, 0x51000, 0x1000, E820_NVS), 0);
	assert_int_equal(m.nentries, 4);
	expect_entry(&m, 2, 0x51000, 0x1000, E820_NVS);
	check_sane(&m);
	assert_int_equal(e820_total(&m, E820_RAM), 0x6000);
	assert_int_equal(e820_total(&m, E820_NVS), 0x1000);

	/* Filling a gap exactly (adjacent both sides) is accepted and the map
	 * stays sane, whether or not it also merges with the following entry. */
	assert_int_equal(e820_add(&m, 0x2000, 0x4e000, E820_RAM), 0);
	check_sane(&m);
	assert_int_equal(e820_total(&m, E820_RAM), 0x6000 + 0x4e000);
}

static void test_add_rejects(void **state)
{
	struct e820_map m;

	(void)state;
	memset(&m, 0, sizeof(m));
	assert_int_equal(e820_add(&m, 0x10000, 0x10000, E820_RAM), 0);
	assert_int_equal(e820_add(&m, 0x30000, 0x10000, E820_RESERVED), 0);
	/* Overlaps of every shape, whatever the type. */
	assert_int_equal(e820_add(&m, 0x10000, 0x10000, E820_RAM), -1);
	assert_int_equal(e820_add(&m, 0x18000, 0x1000, E820_RAM), -1);
	assert_int_equal(e820_add(&m, 0x0, 0x10001, E820_RESERVED), -1);
	assert_int_equal(e820_add(&m, 0x1ffff, 0x2, E820_RAM), -1);
	assert_int_equal(e820_add(&m, 0x0, 0x100000, E820_RAM), -1);
	assert_int_equal(e820_add(&m, 0x20000, 0x10001, E820_RAM), -1); /* into the 2nd */
	assert_int_equal(e820_add(&m, 0x3ffff, 1, E820_ACPI), -1);
	/* Empty or wrapping. */
	assert_int_equal(e820_add(&m, 0x50000, 0, E820_RAM), -1);
	assert_int_equal(e820_add(&m, UINT64_MAX - 0xfff, 0x2000, E820_RAM), -1);
	assert_int_equal(m.nentries, 2);
	expect_entry(&m, 0, 0x10000, 0x10000, E820_RAM);
	expect_entry(&m, 1, 0x30000, 0x10000, E820_RESERVED);
}

static void test_add_full(void **state)
{
	struct e820_map m;

	(void)state;
	memset(&m, 0, sizeof(m));
	/* Alternate types so nothing merges. */
	for (unsigned i = 0; i < E820_MAX_ENTRIES; i++)
		assert_int_equal(
		    e820_add(&m, 0x1000ull * i, 0x1000, i % 2 ? E820_RESERVED : E820_RAM), 0);
	assert_int_equal(m.nentries, E820_MAX_ENTRIES);
	/* A new entry does not fit... */
	assert_int_equal(e820_add(&m, 0x1000000, 0x1000, E820_NVS), -1);
	assert_int_equal(e820_add(&m, 0x1000ull * E820_MAX_ENTRIES, 0x1000, E820_RAM), -1);
	/* ...but growing the last one (same type, adjacent) does. */
	assert_int_equal(e820_add(&m, 0x1000ull * E820_MAX_ENTRIES, 0x1000, E820_RESERVED), 0);
	assert_int_equal(m.nentries, E820_MAX_ENTRIES);
	expect_entry(&m, E820_MAX_ENTRIES - 1, 0x1000ull * (E820_MAX_ENTRIES - 1), 0x2000,
	             E820_RESERVED);
	check_sane(&m);
}

/* ---- bzImage ---- */

#define SETUP_SECTS 4
#define SETUP_SIZE  ((SETUP_SECTS + 1) * 512)
#define KERNEL_LEN  8192
#define IMG_LEN     (SETUP_SIZE + KERNEL_LEN)

/* A minimal bzImage: a setup header and a protected-mode "kernel". */
static uint8_t *make_bzimage(size_t len)
{
	uint8_t *img = calloc(1, len);

	assert_non_null(img);
	for (size_t i = 0; i < len; i++)
		img[i] = (uint8_t)(i * 13 + 7); /* noise everywhere, header fields set below */
	img[0x1ef] = 0x5a;                      /* not part of the header */
	img[0x1f0] = 0x5b;
	img[0x1f1] = SETUP_SECTS;
	unit_put_le(img + 0x1fe, 0xaa55, 2);
	img[0x200] = 0xeb; /* jmp short */
	img[0x201] = 0x6a; /* header ends at 0x202 + 0x6a = 0x26c */
	memcpy(img + 0x202, "HdrS", 4);
	unit_put_le(img + 0x206, 0x020f, 2);
	img[0x210] = 0x00;                       /* type_of_loader */
	img[0x211] = 0x01;                       /* loadflags: LOADED_HIGH */
	unit_put_le(img + 0x218, 0, 4);          /* ramdisk_image */
	unit_put_le(img + 0x21c, 0, 4);          /* ramdisk_size */
	unit_put_le(img + 0x228, 0, 4);          /* cmd_line_ptr */
	unit_put_le(img + 0x22c, 0x7fffffff, 4); /* initrd_addr_max */
	img[0x234] = 1;                          /* relocatable_kernel */
	unit_put_le(img + 0x236, 0x0003, 2);    /* xloadflags: KERNEL_64 | CAN_BE_LOADED_ABOVE_4G */
	unit_put_le(img + 0x238, 2047, 4);      /* cmdline_size */
	unit_put_le(img + 0x258, 0x1000000, 8); /* pref_address: 16 MiB */
	unit_put_le(img + 0x260, 0x2000000, 4); /* init_size: 32 MiB */
	memset(img + 0x26c, 0xee, 0x10);        /* past the header */
	return img;
}

static void test_bzimage_parse_ok(void **state)
{
	struct bzimage_info info;
	char err[256] = "";
	uint8_t *img = make_bzimage(IMG_LEN);

	(void)state;
	memset(&info, 0xa5, sizeof(info));
	assert_int_equal(bzimage_parse(img, IMG_LEN, &info, err, sizeof(err)), 0);
	assert_int_equal(info.version, 0x020f);
	assert_int_equal(info.setup_size, SETUP_SIZE);
	assert_int_equal(info.kernel_size, KERNEL_LEN);
	assert_int_equal(info.init_size, 0x2000000);
	assert_int_equal(info.pref_address, 0x1000000);
	assert_int_equal(info.initrd_addr_max, 0x7fffffff);
	assert_int_equal(info.cmdline_size, 2047);
	assert_int_equal(info.xloadflags, 0x0003);
	assert_int_equal(info.relocatable, 1);

	/* setup_sects 0 means 4. */
	img[0x1f1] = 0;
	assert_int_equal(bzimage_parse(img, IMG_LEN, &info, err, sizeof(err)), 0);
	assert_int_equal(info.setup_size, SETUP_SIZE);
	/* Protocol 2.12 is the oldest with the 64-bit entry. */
	unit_put_le(img + 0x206, 0x020c, 2);
	assert_int_equal(bzimage_parse(img, IMG_LEN, &info, err, sizeof(err)), 0);
	/* A bigger setup. */
	img[0x1f1] = 15;
	assert_int_equal(bzimage_parse(img, IMG_LEN, &info, err, sizeof(err)), 0);
	assert_int_equal(info.setup_size, 16 * 512);
	assert_int_equal(info.kernel_size, IMG_LEN - 16 * 512);
	free(img);
}

static void expect_parse_error(const uint8_t *img, size_t len, const char *needle)
{
	struct bzimage_info info;
	char err[256];

	memset(err, 0, sizeof(err));
	assert_int_equal(bzimage_parse(img, len, &info, err, sizeof(err)), -1);
	assert_true(err[0] != '\0');
	if (needle != NULL)
		assert_contains(err, needle);
}

static void test_bzimage_parse_bad(void **state)
{
	uint8_t *img = make_bzimage(IMG_LEN), *copy;

	(void)state;
	/* Bad boot flag. */
	unit_put_le(img + 0x1fe, 0x55aa, 2);
	expect_parse_error(img, IMG_LEN, "bzImage");
	unit_put_le(img + 0x1fe, 0xaa55, 2);
	/* Bad magic. */
	memcpy(img + 0x202, "HdrZ", 4);
	expect_parse_error(img, IMG_LEN, "bzImage");
	memcpy(img + 0x202, "HdrS", 4);
	/* Old protocol. */
	unit_put_le(img + 0x206, 0x020b, 2);
	expect_parse_error(img, IMG_LEN, "2.11");
	unit_put_le(img + 0x206, 0x0200, 2);
	expect_parse_error(img, IMG_LEN, "2.12");
	unit_put_le(img + 0x206, 0x020f, 2);
	/* No 64-bit entry. */
	unit_put_le(img + 0x236, 0x0002, 2);
	expect_parse_error(img, IMG_LEN, "64-bit");
	unit_put_le(img + 0x236, 0x0001, 2);
	/* Truncated: setup claims more than the file has. */
	img[0x1f1] = 200;
	expect_parse_error(img, IMG_LEN, "truncated");
	img[0x1f1] = SETUP_SECTS;
	/* Nothing after the setup. */
	expect_parse_error(img, SETUP_SIZE, "truncated");
	/* Shorter than the header; exact-size copies so ASan sees over-reads. */
	for (size_t len = 0; len < 0x264; len += (len < 0x200 ? 0x80 : 1)) {
		copy = malloc(len ? len : 1);
		assert_non_null(copy);
		memcpy(copy, img, len);
		expect_parse_error(copy, len, NULL);
		free(copy);
	}
	/* Still good after all that. */
	struct bzimage_info info;
	char err[64];
	assert_int_equal(bzimage_parse(img, IMG_LEN, &info, err, sizeof(err)), 0);
	free(img);
}

/* ---- zero page ---- */

static void fill_map(struct e820_map *m)
{
	assert_int_equal(e820_build_default(m, 256 * MIB, 0), 0);
}

static void test_zero_page(void **state)
{
	struct bzimage_info info;
	struct e820_map map;
	char err[128];
	uint8_t *img = make_bzimage(IMG_LEN), *zp = malloc(4096);

	(void)state;
	assert_non_null(zp);
	assert_int_equal(bzimage_parse(img, IMG_LEN, &info, err, sizeof(err)), 0);
	fill_map(&map);
	memset(zp, 0xcc, 4096);
	linux_build_zero_page(zp, img, &info, LINUX_CMDLINE_GPA, 0x0a000000, 0x123456, &map,
	                      0xe0000);

	/* Outside the header: zero, including the sentinel at 0x1ef. */
	assert_int_equal(zp[0x1ef], 0);
	assert_int_equal(zp[0x1f0], 0);
	for (size_t i = 0; i < 0x70; i++)
		assert_int_equal(zp[i], 0);
	/* The setup header is copied up to its end at 0x26c... */
	assert_int_equal(zp[0x1f1], SETUP_SECTS);
	assert_int_equal(unit_le(zp + 0x1fe, 2), 0xaa55);
	assert_memory_equal(zp + 0x202, "HdrS", 4);
	assert_int_equal(unit_le(zp + 0x206, 2), 0x020f);
	assert_int_equal(unit_le(zp + 0x236, 2), 0x0003);
	assert_int_equal(unit_le(zp + 0x238, 4), 2047);
	assert_int_equal(unit_le(zp + 0x258, 8), 0x1000000);
	assert_int_equal(unit_le(zp + 0x260, 4), 0x2000000);
	assert_memory_equal(zp + 0x264, img + 0x264, 8);
	/* ...and not beyond. */
	for (size_t i = 0x26c; i < 0x2d0; i++)
		assert_int_equal(zp[i], 0);

	/* Loader fields. */
	assert_int_equal(zp[0x210], 0xff);        /* type_of_loader: undefined */
	assert_int_equal(zp[0x211], 0x01 | 0x80); /* loadflags kept, CAN_USE_HEAP */
	assert_int_equal(unit_le(zp + 0x224, 2), 0xfe00);
	assert_int_equal(unit_le(zp + 0x228, 4), LINUX_CMDLINE_GPA);
	assert_int_equal(unit_le(zp + 0xc8, 4), 0); /* ext_cmd_line_ptr */
	assert_int_equal(unit_le(zp + 0x218, 4), 0x0a000000);
	assert_int_equal(unit_le(zp + 0x21c, 4), 0x123456);
	assert_int_equal(unit_le(zp + 0xc0, 4), 0);
	assert_int_equal(unit_le(zp + 0xc4, 4), 0);
	assert_int_equal(unit_le(zp + 0x70, 8), 0xe0000); /* acpi_rsdp_addr */

	/* e820: count at 0x1e8, 20-byte entries at 0x2d0. */
	assert_int_equal(zp[0x1e8], map.nentries);
	for (unsigned i = 0; i < map.nentries; i++) {
		const uint8_t *e = zp + 0x2d0 + 20 * i;

		assert_int_equal(unit_le(e, 8), map.entry[i].addr);
		assert_int_equal(unit_le(e + 8, 8), map.entry[i].size);
		assert_int_equal(unit_le(e + 16, 4), map.entry[i].type);
	}
	for (size_t i = 0x2d0 + 20 * map.nentries; i < 4096; i++)
		assert_int_equal(zp[i], 0);
	free(zp);
	free(img);
}

static void test_zero_page_64bit_fields(void **state)
{
	struct bzimage_info info;
	struct e820_map map;
	char err[128];
	uint8_t *img = make_bzimage(IMG_LEN), *zp = malloc(4096);

	(void)state;
	assert_non_null(zp);
	assert_int_equal(bzimage_parse(img, IMG_LEN, &info, err, sizeof(err)), 0);
	memset(&map, 0, sizeof(map));
	/* High addresses split into the low and ext_ fields; no initrd is 0. */
	linux_build_zero_page(zp, img, &info, 0x123456789ull, 0, 0, &map, 0);
	assert_int_equal(unit_le(zp + 0x228, 4), 0x23456789);
	assert_int_equal(unit_le(zp + 0xc8, 4), 0x1);
	assert_int_equal(unit_le(zp + 0x218, 4), 0);
	assert_int_equal(unit_le(zp + 0x21c, 4), 0);
	assert_int_equal(unit_le(zp + 0x70, 8), 0);
	assert_int_equal(zp[0x1e8], 0);

	linux_build_zero_page(zp, img, &info, 0x20000, 0x2badc0de000ull, 0x100000123ull, &map,
	                      0xfedcba9876543210ull);
	assert_int_equal(unit_le(zp + 0x218, 4), 0xdc0de000);
	assert_int_equal(unit_le(zp + 0xc0, 4), 0x2ba);
	assert_int_equal(unit_le(zp + 0x21c, 4), 0x123);
	assert_int_equal(unit_le(zp + 0xc4, 4), 0x1);
	assert_int_equal(unit_le(zp + 0x70, 8), 0xfedcba9876543210ull);
	free(zp);
	free(img);
}

static void test_zero_page_full_e820(void **state)
{
	struct bzimage_info info;
	struct e820_map map;
	char err[128];
	uint8_t *img = make_bzimage(IMG_LEN), *zp = malloc(4096);

	(void)state;
	assert_non_null(zp);
	assert_int_equal(bzimage_parse(img, IMG_LEN, &info, err, sizeof(err)), 0);
	memset(&map, 0, sizeof(map));
	for (unsigned i = 0; i < E820_MAX_ENTRIES; i++)
		assert_int_equal(e820_add(&map, 0x2000ull * i, 0x1000, E820_RAM), 0);
	linux_build_zero_page(zp, img, &info, 0x20000, 0, 0, &map, 0);
	assert_int_equal(zp[0x1e8], E820_MAX_ENTRIES);
	assert_int_equal(unit_le(zp + 0x2d0 + 20 * 127, 8), 0x2000ull * 127);
	free(zp);
	free(img);
}

/* The header length comes from the guest's file: a hostile jump offset must
 * not make linux_build_zero_page read past the setup or write past 4 KiB. */
static void test_zero_page_hostile_header(void **state)
{
	struct bzimage_info info;
	struct e820_map map;
	char err[128];
	uint8_t *img, *zp = malloc(4096);
	const size_t len = 2 * 512 + 16; /* setup_sects = 1: 1 KiB of setup */

	(void)state;
	assert_non_null(zp);
	img = make_bzimage(IMG_LEN);
	img[0x1f1] = 1;
	img[0x201] = 0xff; /* header "ends" at 0x301 */
	uint8_t *small = malloc(len);
	assert_non_null(small);
	memcpy(small, img, len);
	assert_int_equal(bzimage_parse(small, len, &info, err, sizeof(err)), 0);
	assert_int_equal(info.setup_size, 1024);
	memset(&map, 0, sizeof(map));
	linux_build_zero_page(zp, small, &info, 0x20000, 0, 0, &map, 0);
	assert_int_equal(zp[0x210], 0xff);
	assert_memory_equal(zp + 0x202, "HdrS", 4);
	free(small);
	free(img);
	free(zp);
}

/* ---- initrd placement ---- */

static struct bzimage_info kernel_info(void)
{
	struct bzimage_info info;

	memset(&info, 0, sizeof(info));
	info.version = 0x020f;
	info.setup_size = SETUP_SIZE;
	info.kernel_size = 10 * MIB;
	info.pref_address = 16 * MIB;
	info.init_size = 32 * MIB; /* runs at [16M, 48M) */
	info.initrd_addr_max = 0x7fffffff;
	return info;
}

static void check_initrd(const struct bzimage_info *info, uint64_t lowmem, uint64_t size,
                         uint64_t kernel_end)
{
	uint64_t top = lowmem, a = linux_initrd_addr(info, lowmem, size);

	if (info->initrd_addr_max != 0 && (uint64_t)info->initrd_addr_max + 1 < top)
		top = (uint64_t)info->initrd_addr_max + 1;
	if (a == 0)
		fail_msg("initrd of %#llx bytes not placed in %#llx of low memory",
		         (unsigned long long)size, (unsigned long long)lowmem);
	assert_int_equal(a & 0xfff, 0);
	assert_true(a + size <= top);
	assert_true(a >= kernel_end);
	/* As high as possible: the next page up would not fit. */
	assert_true(a + 0x1000 + size > top);
}

static void test_initrd_addr(void **state)
{
	struct bzimage_info info = kernel_info();

	(void)state;
	check_initrd(&info, 256 * MIB, 10 * MIB, 48 * MIB);
	check_initrd(&info, 256 * MIB, 10 * MIB + 123, 48 * MIB);
	check_initrd(&info, 256 * MIB, 1, 48 * MIB);
	check_initrd(&info, 3 * GIB, 100 * MIB, 48 * MIB);
	check_initrd(&info, 256 * MIB, 208 * MIB, 48 * MIB); /* exactly fits */
	assert_int_equal(linux_initrd_addr(&info, 256 * MIB, 208 * MIB), 48 * MIB);
	/* Odd lowmem: still page-aligned and below it. */
	check_initrd(&info, 256 * MIB - 100, 5 * MIB + 1, 48 * MIB);

	/* initrd_addr_max below lowmem (older kernels: 0x37ffffff). */
	info.initrd_addr_max = 0x37ffffff;
	check_initrd(&info, 3 * GIB, 64 * MIB, 48 * MIB);
	assert_true(linux_initrd_addr(&info, 3 * GIB, 64 * MIB) + 64 * MIB <= 0x38000000);
	/* 0 means no limit of its own. */
	info.initrd_addr_max = 0;
	check_initrd(&info, 512 * MIB, 64 * MIB, 48 * MIB);
	info.initrd_addr_max = 0x7fffffff;

	/* A kernel that wants to run low (pref_address below 1 MiB). */
	info.pref_address = 0;
	info.init_size = 8 * MIB;
	info.kernel_size = 2 * MIB;
	check_initrd(&info, 64 * MIB, 55 * MIB, MIB + 8 * MIB);
	/* A loaded image bigger than init_size: its end counts. */
	info.kernel_size = 20 * MIB;
	check_initrd(&info, 64 * MIB, 43 * MIB, MIB + 20 * MIB);
	assert_int_equal(linux_initrd_addr(&info, 64 * MIB, 44 * MIB), 0);
}

static void test_initrd_addr_no_fit(void **state)
{
	struct bzimage_info info = kernel_info();

	(void)state;
	/* Would overlap the kernel's decompression area [16M, 48M). */
	assert_int_equal(linux_initrd_addr(&info, 64 * MIB, 20 * MIB), 0);
	assert_int_equal(linux_initrd_addr(&info, 256 * MIB, 208 * MIB + 1), 0);
	/* Bigger than memory. */
	assert_int_equal(linux_initrd_addr(&info, 64 * MIB, 65 * MIB), 0);
	assert_int_equal(linux_initrd_addr(&info, 64 * MIB, UINT64_MAX), 0);
	/* Nothing to place. */
	assert_int_equal(linux_initrd_addr(&info, 256 * MIB, 0), 0);
	/* Memory smaller than the kernel's needs. */
	assert_int_equal(linux_initrd_addr(&info, 32 * MIB, 4096), 0);
	/* initrd_addr_max too low to clear the kernel. */
	info.initrd_addr_max = 40 * MIB - 1;
	assert_int_equal(linux_initrd_addr(&info, 3 * GIB, 4096), 0);
}

static void test_file_read_all(void **state)
{
	char err[512], *dir, *path, missing[600];
	uint8_t *buf;
	size_t len = 0;

	(void)state;
	dir = unit_mkdtemp();
	assert_non_null(dir);
	path = unit_write_text(dir, "k", "0123456789");
	assert_non_null(path);
	buf = file_read_all(path, 1 << 20, &len, err, sizeof(err));
	assert_non_null(buf);
	assert_int_equal(len, 10);
	assert_memory_equal(buf, "0123456789", 10);
	free(buf);
	/* Too big for `max`. */
	assert_null(file_read_all(path, 9, &len, err, sizeof(err)));
	assert_contains(err, path);
	free(path);
	/* Empty. */
	path = unit_write_text(dir, "empty", "");
	assert_null(file_read_all(path, 1 << 20, &len, err, sizeof(err)));
	assert_contains(err, path);
	free(path);
	/* Missing / a directory. */
	snprintf(missing, sizeof(missing), "%s/missing", dir);
	assert_null(file_read_all(missing, 1 << 20, &len, err, sizeof(err)));
	assert_contains(err, missing);
	assert_null(file_read_all(dir, 1 << 20, &len, err, sizeof(err)));
	assert_contains(err, dir);
	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_entry_layout),
	    cmocka_unit_test(test_default_256m),
	    cmocka_unit_test(test_default_4g),
	    cmocka_unit_test(test_default_tiny),
	    cmocka_unit_test(test_add_merge_sort),
	    cmocka_unit_test(test_add_rejects),
	    cmocka_unit_test(test_add_full),
	    cmocka_unit_test(test_bzimage_parse_ok),
	    cmocka_unit_test(test_bzimage_parse_bad),
	    cmocka_unit_test(test_zero_page),
	    cmocka_unit_test(test_zero_page_64bit_fields),
	    cmocka_unit_test(test_zero_page_full_e820),
	    cmocka_unit_test(test_zero_page_hostile_header),
	    cmocka_unit_test(test_initrd_addr),
	    cmocka_unit_test(test_initrd_addr_no_fit),
	    cmocka_unit_test(test_file_read_all),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
