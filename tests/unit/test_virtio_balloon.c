/*
 * Unit tests for virtio-balloon (src/dev/virtio_balloon.c) driven through
 * its BAR: the features offered and the options that take them away; the
 * host's target in config num_pages and the driver's `actual`; inflated
 * pages and reported free ranges read back as zeros (they were discarded)
 * while PFNs and ranges outside RAM are skipped and the device goes on;
 * the reporting queue's index with and without the statistics queue
 * (5.5.2); statistics kept and asked for again; the saved state with the
 * statistics buffer held; discarded pages marked dirty for a migration;
 * /proc/meminfo's huge page lines.
 */
#include "virtio_unit.h"

#include "bus/pci_slot.h"
#include "lib/config.h"
#include "lib/sbuf.h"
#include "vmm/mem.h"

#define F_STATS     (1u << 1)
#define F_OOM       (1u << 2)
#define F_REPORTING (1u << 5)
#define INFLATEQ    0
#define STATSQ      2
#define PAGE_OFF    0x600000ull /* pages the tests fill and discard */
#define PAGE_GPA(i) (VU_RAM_GPA + PAGE_OFF + 0x1000ull * (i))
/* What the balloon takes as RAM: a detached machine's low RAM starts at 0. */
#define RAM_BYTES (VU_RAM_GPA + VU_RAM_SIZE)

static int group_setup(void **state)
{
	char err[256] = "";

	(void)state;
	config_reset();
	if (pci_parse_slot_option("4,virtio-balloon,deflate_on_oom=on", err, sizeof(err)) < 0 ||
	    vu_setup(NULL) < 0) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	vu_wr(VU_CC_STATUS, 1, 0);
	return 0;
}

static uint32_t device_features(void)
{
	vu_wr(0x00, 4, 0);
	return (uint32_t)vu_rd(0x04, 4);
}

static void fill_pages(unsigned first, unsigned n)
{
	memset(vu_hva(PAGE_GPA(first)), 0x5a, 0x1000ull * n);
}

static bool page_is_zero(unsigned i)
{
	const uint8_t *p = vu_hva(PAGE_GPA(i));

	for (unsigned k = 0; k < 4096; k++)
		if (p[k] != 0)
			return false;
	return true;
}

/* A chain of one writable buffer per range on queue `q`, as Linux's page
 * reporting makes; returns when the device used it. */
static void report(unsigned q, const uint64_t *gpa, const uint32_t *len, unsigned n)
{
	uint64_t avail = VU_RING(q) + 0x400;
	uint16_t a = vu_get16(avail + 2), used = vu_get16(VU_RING(q) + 0x800 + 2);
	unsigned d = (unsigned)(vu_next[q] * 4) % VU_QSIZE;

	for (unsigned i = 0; i < n; i++)
		vu_put_desc(q, d + i, gpa[i], len[i],
		            VRING_DESC_F_WRITE | (i + 1 < n ? VRING_DESC_F_NEXT : 0),
		            (uint16_t)(d + i + 1));
	vu_put16(avail + 4 + 2ull * (a % VU_QSIZE), (uint16_t)d);
	vu_put16(avail + 2, (uint16_t)(a + 1));
	vu_next[q]++;
	vu_wr(VU_NOTIFY + 4ull * q, 2, q);
	assert_true(vu_wait_used(q, (uint16_t)(used + 1)));
}

static void inflate(const uint32_t *pfn, unsigned n)
{
	uint16_t used = vu_get16(VU_RING(INFLATEQ) + 0x800 + 2);

	vu_chain(INFLATEQ, pfn, n * sizeof(pfn[0]), 0);
	assert_true(vu_wait_used(INFLATEQ, (uint16_t)(used + 1)));
}

static void info(struct machine_balloon_info *bi, unsigned refresh_ms)
{
	assert_non_null(vu_m.balloon.dev);
	vu_m.balloon.info(vu_m.balloon.dev, refresh_ms, bi);
}

static void test_features(void **state)
{
	(void)state;
	assert_int_equal(device_features() & (F_STATS | F_OOM | F_REPORTING),
	                 F_STATS | F_OOM | F_REPORTING);
	assert_int_equal(vu_rd(0x12, 2), 4); /* num_queues: inflate, deflate, stats, reporting */
}

static void test_target_and_actual(void **state)
{
	struct machine_balloon_info bi;
	char err[256] = "";
	uint32_t actual = 256;

	(void)state;
	vu_start(F_STATS | F_OOM | F_REPORTING, 4);
	assert_int_equal(
	    vu_m.balloon.set_target(vu_m.balloon.dev, RAM_BYTES - (4u << 20), err, sizeof(err)), 0);
	assert_int_equal(vu_rd(VU_DEVICE, 4), (4u << 20) / 4096);
	vu_wr(VU_DEVICE, 4, 7); /* num_pages is the host's: ignored */
	assert_int_equal(vu_rd(VU_DEVICE, 4), (4u << 20) / 4096);
	vu_wr(VU_DEVICE + 4, 4, actual);
	info(&bi, 0);
	assert_int_equal(bi.ram_bytes, RAM_BYTES);
	assert_int_equal(bi.target_bytes, RAM_BYTES - (4u << 20));
	assert_int_equal(bi.actual_bytes, RAM_BYTES - 256 * 4096);
	assert_true(bi.reporting);
	assert_true(bi.deflate_on_oom);
	assert_int_equal(
	    vu_m.balloon.set_target(vu_m.balloon.dev, RAM_BYTES + 4096, err, sizeof(err)), -1);
	assert_contains(err, "cannot give it");
	assert_int_equal(vu_m.balloon.set_target(vu_m.balloon.dev, RAM_BYTES, err, sizeof(err)), 0);
	assert_int_equal(vu_rd(VU_DEVICE, 4), 0);
}

/* Inflated pages are discarded (zeros); a PFN outside RAM is skipped, the
 * rest of the request served and the device stays usable. */
static void test_inflate_discards(void **state)
{
	uint32_t base = (uint32_t)(PAGE_GPA(0) >> 12);
	uint32_t pfn[] = {base, base + 1, 0x7fffffff, base + 3, (uint32_t)(VU_RAM_GPA >> 12) - 1};

	(void)state;
	vu_start(F_STATS | F_OOM | F_REPORTING, 4);
	fill_pages(0, 5);
	inflate(pfn, 5);
	assert_true(page_is_zero(0));
	assert_true(page_is_zero(1));
	assert_false(page_is_zero(2)); /* not in the request */
	assert_true(page_is_zero(3));
	assert_false(page_is_zero(4));
	assert_int_equal(vu_rd(VU_CC_STATUS, 1) & 0x40, 0); /* no NEEDS_RESET */
	pfn[0] = base + 4;
	inflate(pfn, 1);
	assert_true(page_is_zero(4));
}

/* With a migration's dirty tracking on, a discarded page is marked dirty,
 * so the target gets its zeros too. */
static void test_discard_marks_dirty(void **state)
{
	uint32_t pfn[] = {(uint32_t)(PAGE_GPA(7) >> 12)};
	size_t words = gmem_dirty_words(VU_RAM_SIZE);
	uint64_t *bits = calloc(words, sizeof(uint64_t));
	unsigned page = (unsigned)((PAGE_GPA(7) - VU_RAM_GPA) / GMEM_DIRTY_PAGE);

	(void)state;
	assert_non_null(bits);
	vu_start(F_STATS | F_REPORTING, 4);
	assert_int_equal(gmem_dirty_start(&vu_m.vm.mem), 0);
	gmem_dirty_take(&vu_m.vm.mem, 0, bits, true);
	memset(bits, 0, words * sizeof(uint64_t));
	fill_pages(7, 1);
	inflate(pfn, 1);
	assert_true(page_is_zero(7));
	gmem_dirty_take(&vu_m.vm.mem, 0, bits, true);
	assert_true(bits[page / 64] & (1ull << (page % 64)));
	gmem_dirty_stop(&vu_m.vm.mem);
	gmem_dirty_free(&vu_m.vm.mem);
	free(bits);
}

/* Reporting is queue 3 with statistics; ranges are discarded and counted. */
static void test_reporting_with_stats(void **state)
{
	struct machine_balloon_info bi, before;
	uint64_t gpa[] = {PAGE_GPA(0), PAGE_GPA(4)};
	uint32_t len[] = {0x2000, 0x1000};

	(void)state;
	vu_start(F_STATS | F_REPORTING, 4);
	info(&before, 0);
	fill_pages(0, 6);
	report(3, gpa, len, 2);
	assert_true(page_is_zero(0));
	assert_true(page_is_zero(1));
	assert_false(page_is_zero(2));
	assert_true(page_is_zero(4));
	assert_false(page_is_zero(5));
	info(&bi, 0);
	assert_int_equal(bi.reported_bytes - before.reported_bytes, 0x3000);
}

/* Without statistics, reporting_vq is queue 2 (the queues that exist). */
static void test_reporting_without_stats(void **state)
{
	uint64_t gpa[] = {PAGE_GPA(1)};
	uint32_t len[] = {0x1000};

	(void)state;
	vu_start(F_REPORTING, 3);
	fill_pages(0, 3);
	report(2, gpa, len, 1);
	assert_false(page_is_zero(0));
	assert_true(page_is_zero(1));
	assert_false(page_is_zero(2));
}

/* A range that is not whole pages of RAM (a ROM-less hole here): skipped,
 * one line, the device goes on. */
static void test_report_unaligned_skipped(void **state)
{
	uint64_t gpa[] = {PAGE_GPA(0) + 0x800};
	uint32_t len[] = {0x1000};

	(void)state;
	vu_start(F_STATS | F_REPORTING, 4);
	fill_pages(0, 2);
	report(3, gpa, len, 1);
	assert_false(page_is_zero(0));
	assert_false(page_is_zero(1));
	assert_int_equal(vu_rd(VU_CC_STATUS, 1) & 0x40, 0);
}

struct stat_entry {
	uint16_t tag;
	uint64_t val;
} __attribute__((packed));

/* The statistics buffer is kept; asking again gives it back (used), the
 * driver refills it, and the new figures are seen. */
static void test_stats(void **state)
{
	struct stat_entry st[] = {{4, 1000 * 4096}, {5, 2048 * 4096}, {99, 1}};
	struct machine_balloon_info bi;

	(void)state;
	vu_start(F_STATS | F_REPORTING, 4);
	vu_chain(STATSQ, st, sizeof(st), 0);
	for (int i = 0; i < 5000; i++) {
		info(&bi, 0);
		if (bi.stats_valid)
			break;
		usleep(1000);
	}
	assert_true(bi.stats_valid);
	assert_int_equal(bi.nstats, 2); /* tag 99 is not one of 5.5.6.3's */
	assert_string_equal(bi.stat[0].name, "free_memory");
	assert_int_equal(bi.stat[0].value, 1000 * 4096);
	assert_string_equal(bi.stat[1].name, "total_memory");
	assert_int_equal(vu_get16(VU_RING(STATSQ) + 0x800 + 2), 0); /* held */
	/* asking gives it back; no new buffer within the wait */
	info(&bi, 20);
	assert_int_equal(vu_get16(VU_RING(STATSQ) + 0x800 + 2), 1);
	st[0].val = 5;
	vu_chain(STATSQ, st, sizeof(st), 0);
	for (int i = 0; i < 5000; i++) {
		info(&bi, 0);
		if (bi.stat[0].value == 5)
			break;
		usleep(1000);
	}
	assert_int_equal(bi.stat[0].value, 5);
	/* a second buffer while one is held: the older one comes back */
	vu_chain(STATSQ, st, sizeof(st), 0);
	assert_true(vu_wait_used(STATSQ, 2));
}

/* Saved with the statistics buffer held: it goes back to the ring, and the
 * restored device takes it again; target and actual survive. */
static void test_save_restore(void **state)
{
	struct stat_entry st[] = {{4, 77}};
	struct machine_balloon_info bi = {0};
	struct sbuf out = {0};
	struct sbuf_reader in;
	char err[256] = "";

	(void)state;
	vu_start(F_STATS | F_REPORTING, 4);
	assert_int_equal(
	    vu_m.balloon.set_target(vu_m.balloon.dev, RAM_BYTES - 0x10000, err, sizeof(err)), 0);
	vu_wr(VU_DEVICE + 4, 4, 16);
	vu_chain(STATSQ, st, sizeof(st), 0);
	for (int i = 0; i < 5000 && !bi.stats_valid; i++) {
		info(&bi, 0);
		usleep(1000);
	}
	assert_int_equal(vu_f->de->quiesce(vu_f, err, sizeof(err)), 0);
	assert_int_equal(vu_f->de->save(vu_f, &out, err, sizeof(err)), 0);
	assert_int_equal(unit_le(out.data, 2), 1);
	assert_int_equal(unit_le(out.data + 2, 4), 16);
	assert_int_equal(unit_le(out.data + 6, 4), 16);
	vu_f->de->unquiesce(vu_f);
	vu_wr(VU_CC_STATUS, 1, 0);
	assert_int_equal(vu_rd(VU_DEVICE + 4, 4), 0);
	sbuf_reader_init(&in, out.data, out.len);
	assert_int_equal(vu_f->de->restore(vu_f, &in, err, sizeof(err)), 0);
	assert_int_equal(sbuf_reader_done(&in, "virtio-balloon", err, sizeof(err)), 0);
	assert_int_equal(vu_rd(VU_DEVICE, 4), 16);
	assert_int_equal(vu_rd(VU_DEVICE + 4, 4), 16);
	/* the held buffer was popped again: asking gives it back */
	usleep(20 * 1000);
	info(&bi, 20);
	assert_true(vu_wait_used(STATSQ, 1));
	/* a target beyond RAM is refused */
	out.data[2] = 0xff, out.data[3] = 0xff, out.data[4] = 0xff;
	sbuf_reader_init(&in, out.data, out.len);
	assert_int_equal(vu_f->de->restore(vu_f, &in, err, sizeof(err)), -1);
	assert_contains(in.why, "target");
	sbuf_free(&out);
}

static void test_hugepages_parse(void **state)
{
	uint64_t free_pages = 9, size = 9;

	(void)state;
	assert_int_equal(
	    gmem_parse_hugepages("MemTotal: 1 kB\nHugePages_Total:       4\n"
	                         "HugePages_Free:        3\nHugepagesize:       2048 kB\n",
	                         &free_pages, &size),
	    0);
	assert_int_equal(free_pages, 3);
	assert_int_equal(size, 2ull << 20);
	assert_int_equal(gmem_parse_hugepages("HugePages_Free: 3\n", &free_pages, &size), -1);
	assert_int_equal(
	    gmem_parse_hugepages("HugePages_Free: 3\nHugepagesize: 0 kB\n", &free_pages, &size),
	    -1);
	assert_int_equal(gmem_parse_hugepages("", &free_pages, &size), -1);
}

/* A misspelled option is refused before the VM starts. */
static void test_unknown_option(void **state)
{
	char err[256] = "";

	(void)state;
	assert_int_equal(pci_check_config(false, err, sizeof(err)), 0);
	assert_int_equal(config_set("pci.0.4.0.free_page_reportin", "off"), 0);
	assert_int_equal(pci_check_config(false, err, sizeof(err)), -1);
	assert_contains(err, "free_page_reportin");
	config_unset("pci.0.4.0.free_page_reportin");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_features),
	    cmocka_unit_test(test_target_and_actual),
	    cmocka_unit_test(test_inflate_discards),
	    cmocka_unit_test(test_discard_marks_dirty),
	    cmocka_unit_test(test_reporting_with_stats),
	    cmocka_unit_test(test_reporting_without_stats),
	    cmocka_unit_test(test_report_unaligned_skipped),
	    cmocka_unit_test(test_stats),
	    cmocka_unit_test(test_save_restore),
	    cmocka_unit_test(test_hugepages_parse),
	    cmocka_unit_test(test_unknown_option),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
