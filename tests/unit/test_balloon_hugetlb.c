/*
 * virtio-balloon on hugetlbfs guest RAM (-o memory.hugepages=true): free
 * page reporting gives whole 2 MiB pages back to the host's pool, and a
 * range that covers no whole huge page discards nothing (its data stays).
 * The fake RAM is a private MAP_HUGETLB mapping placed so guest-physical
 * 2 MiB boundaries are huge page boundaries, as they are in khyve's RAM.
 * Needs the host to lend 5 huge pages (root writes nr_hugepages, put back
 * afterwards; a lock file keeps the plain and the sanitizer build from
 * changing it at once); the tests are skipped where it cannot.
 */
#include "virtio_unit.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bus/pci_slot.h"
#include "lib/config.h"
#include "vmm/mem.h"

#define F_REPORTING (1u << 5)
#define REPORTQ     2 /* without the statistics queue */
#define HUGE        0x200000ull
#define MAP_BYTES   (VU_RAM_SIZE + HUGE) /* VU_RAM_GPA is 1 MiB: one extra page */
#define NR_PATH     "/proc/sys/vm/nr_hugepages"
#define LOCK_PATH   "/tmp/khyve-unit-hugetlb.lock"

static uint8_t *map_base;
static long nr_before = -1;
static bool have_pool;

static long read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f != NULL) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static bool write_long(const char *path, long v)
{
	FILE *f = fopen(path, "w");
	bool ok = f != NULL && fprintf(f, "%ld\n", v) > 0;

	if (f != NULL && fclose(f) != 0)
		ok = false;
	return ok;
}

static uint64_t free_huge_pages(void)
{
	static char buf[8192];
	uint64_t free_pages = 0, size = 0;
	FILE *f = fopen("/proc/meminfo", "r");
	size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f != NULL)
		fclose(f);
	buf[n] = '\0';
	return gmem_parse_hugepages(buf, &free_pages, &size) == 0 && size == HUGE ? free_pages : 0;
}

/* Borrow 5 huge pages and map them; false where the host will not. */
static bool borrow_pool(void)
{
	int lock = open(LOCK_PATH, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	/* Held until exit: the other build waits, then sees our count back. */
	if (lock < 0 || flock(lock, LOCK_EX) < 0)
		return false;
	nr_before = read_long(NR_PATH);
	if (nr_before < 0 || !write_long(NR_PATH, nr_before + 5) || free_huge_pages() < 5)
		return false;
	map_base = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE,
	                MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (map_base == MAP_FAILED) {
		map_base = NULL;
		return false;
	}
	return true;
}

static int group_setup(void **state)
{
	char err[256] = "";

	(void)state;
	have_pool = borrow_pool();
	if (!have_pool)
		return 0;
	config_reset();
	/* GPA 1 MiB at 1 MiB into the mapping: GPA 2 MiB is page-aligned. */
	vu_ram = map_base + (VU_RAM_GPA % HUGE);
	if (pci_parse_slot_option("4,virtio-balloon", err, sizeof(err)) < 0 ||
	    machine_init_detached(&vu_m, "unit", vu_ram, VU_RAM_GPA, VU_RAM_SIZE) < 0) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	vu_m.vm.ram_page_size = HUGE; /* as check_hugepages() sets it */
	if (pci_init(&vu_m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	vu_f = pci_get(0);
	vu_bar = vu_f->bar[VU_BAR].addr;
	pci_cfg_write(0, 4, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	return vu_f->bar[VU_BAR].mapped ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	if (have_pool)
		vu_wr(VU_CC_STATUS, 1, 0);
	if (map_base != NULL)
		munmap(map_base, MAP_BYTES);
	if (nr_before >= 0)
		write_long(NR_PATH, nr_before);
	return 0;
}

/* One reporting chain of n ranges; returns when the device used it. */
static void report(const uint64_t *gpa, const uint32_t *len, unsigned n)
{
	uint64_t avail = VU_RING(REPORTQ) + 0x400;
	uint16_t a = vu_get16(avail + 2), used = vu_get16(VU_RING(REPORTQ) + 0x800 + 2);
	unsigned d = (unsigned)(vu_next[REPORTQ] * 4) % VU_QSIZE;

	for (unsigned i = 0; i < n; i++)
		vu_put_desc(REPORTQ, d + i, gpa[i], len[i],
		            VRING_DESC_F_WRITE | (i + 1 < n ? VRING_DESC_F_NEXT : 0),
		            (uint16_t)(d + i + 1));
	vu_put16(avail + 4 + 2ull * (a % VU_QSIZE), (uint16_t)d);
	vu_put16(avail + 2, (uint16_t)(a + 1));
	vu_next[REPORTQ]++;
	vu_wr(VU_NOTIFY + 4ull * REPORTQ, 2, REPORTQ);
	assert_true(vu_wait_used(REPORTQ, (uint16_t)(used + 1)));
}

static bool byte_is(uint64_t gpa, uint8_t v)
{
	return *vu_hva(gpa) == v;
}

/* Linux reports 2 MiB blocks (pageblock order): each is one huge page
 * back in the pool, read back as zeros. */
static void test_whole_huge_page_returns(void **state)
{
	uint64_t gpa[] = {0x400000};
	uint32_t len[] = {0x200000};
	uint64_t before;

	(void)state;
	if (!have_pool)
		skip();
	vu_start(F_REPORTING, 3); /* touches every page of the RAM */
	memset(vu_hva(0x400000), 0x5a, HUGE);
	before = free_huge_pages();
	report(gpa, len, 1);
	assert_int_equal(free_huge_pages(), before + 1);
	assert_true(byte_is(0x400000, 0));
	assert_true(byte_is(0x5fffff, 0));
	assert_int_equal(vu_rd(VU_CC_STATUS, 1) & 0x40, 0); /* no NEEDS_RESET */
}

/* A range covering no whole huge page keeps its data; one straddling two
 * gives back only the page inside it. */
static void test_partial_ranges_keep_data(void **state)
{
	uint64_t gpa[] = {0x600000, 0x300000};
	uint32_t len[] = {0x100000, 0x300000};
	uint64_t before;

	(void)state;
	if (!have_pool)
		skip();
	vu_start(F_REPORTING, 3);
	memset(vu_hva(0x200000), 0x5a, 0x600000);
	before = free_huge_pages();
	report(gpa, len, 2);
	assert_int_equal(free_huge_pages(), before + 1); /* [4 MiB, 6 MiB) only */
	assert_true(byte_is(0x600000, 0x5a));
	assert_true(byte_is(0x3fffff, 0x5a));
	assert_true(byte_is(0x400000, 0));
	assert_true(byte_is(0x5fffff, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_whole_huge_page_returns),
	    cmocka_unit_test(test_partial_ranges_keep_data),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
