#include "vmm/mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void gmem_layout(uint64_t memsize, uint64_t *lowmem, uint64_t *highmem)
{
	*lowmem = memsize < GMEM_LOWMEM_LIMIT ? memsize : GMEM_LOWMEM_LIMIT;
	*highmem = memsize - *lowmem;
}

static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

int gmem_add_region(struct guest_mem *gm, uint64_t gpa, uint64_t size, void *hva, bool readonly)
{
	struct gmem_region *r;

	if (gm->nregions >= GMEM_MAX_REGIONS || size == 0 || gpa + size < gpa)
		return -1;
	for (unsigned i = 0; i < gm->nregions; i++)
		if (ranges_overlap(gpa, size, gm->region[i].gpa, gm->region[i].size))
			return -1;
	r = &gm->region[gm->nregions++];
	r->gpa = gpa;
	r->size = size;
	r->hva = hva;
	r->readonly = readonly;
	return 0;
}

static const struct gmem_region *region_of(const struct guest_mem *gm, uint64_t gpa, uint64_t len)
{
	for (unsigned i = 0; i < gm->nregions; i++) {
		const struct gmem_region *r = &gm->region[i];

		/* Written so that no sum can overflow. */
		if (gpa >= r->gpa && gpa - r->gpa < r->size && len <= r->size - (gpa - r->gpa))
			return r;
	}
	return NULL;
}

void *gmem_ptr(const struct guest_mem *gm, uint64_t gpa, uint64_t len, bool write)
{
	const struct gmem_region *r = region_of(gm, gpa, len);

	if (r == NULL || (write && r->readonly))
		return NULL;
	/* A device asking to write is about to: while a migration tracks
	 * pages, every device path that writes guest RAM through a pointer
	 * (used rings, descriptor buffers, completion queues, FISes) is
	 * counted here, before the write; gmem_dirty_take() keeps these
	 * marks until the final round, when the devices are quiesced and
	 * every such write is done. */
	if (write)
		gmem_mark_dirty(gm, gpa, len);
	return r->hva + (gpa - r->gpa);
}

int gmem_read(const struct guest_mem *gm, uint64_t gpa, void *dst, uint64_t len)
{
	const void *p = gmem_ptr(gm, gpa, len, false);

	if (p == NULL)
		return -1;
	memcpy(dst, p, len);
	return 0;
}

int gmem_write(const struct guest_mem *gm, uint64_t gpa, const void *src, uint64_t len)
{
	void *p = gmem_ptr(gm, gpa, len, true);

	if (p == NULL)
		return -1;
	memcpy(p, src, len);
	gmem_mark_dirty(gm, gpa, len);
	return 0;
}

bool gmem_is_ram(const struct guest_mem *gm, uint64_t gpa, uint64_t len)
{
	const struct gmem_region *r = region_of(gm, gpa, len);

	return r != NULL && !r->readonly;
}

int gmem_dirty_start(struct guest_mem *gm)
{
	for (unsigned i = 0; i < gm->nregions; i++) {
		struct gmem_region *r = &gm->region[i];

		if (r->readonly || r->size == 0 || r->dirty != NULL)
			continue;
		/* mmap, not malloc: vm_destroy() frees it on the main thread,
		 * and free() of another thread's arena may open /proc files
		 * the sandbox forbids. */
		void *p = mmap(NULL, gmem_dirty_words(r->size) * sizeof(uint64_t),
		               PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return -1;
		r->dirty = p;
	}
	__atomic_store_n(&gm->dirty_on, true, __ATOMIC_SEQ_CST);
	return 0;
}

void gmem_dirty_stop(struct guest_mem *gm)
{
	__atomic_store_n(&gm->dirty_on, false, __ATOMIC_SEQ_CST);
}

void gmem_dirty_free(struct guest_mem *gm)
{
	gmem_dirty_stop(gm);
	for (unsigned i = 0; i < gm->nregions; i++) {
		if (gm->region[i].dirty != NULL)
			munmap(gm->region[i].dirty,
			       gmem_dirty_words(gm->region[i].size) * sizeof(uint64_t));
		gm->region[i].dirty = NULL;
	}
}

void gmem_mark_dirty(const struct guest_mem *gm, uint64_t gpa, uint64_t len)
{
	const struct gmem_region *r;
	uint64_t first, last;

	if (!__atomic_load_n(&gm->dirty_on, __ATOMIC_ACQUIRE) || len == 0)
		return;
	r = region_of(gm, gpa, len);
	if (r == NULL || r->readonly || r->dirty == NULL)
		return;
	first = (gpa - r->gpa) / GMEM_DIRTY_PAGE;
	last = (gpa - r->gpa + len - 1) / GMEM_DIRTY_PAGE;
	/* Bounded by the region's size: the range was checked above. */
	for (uint64_t p = first; p <= last; p++)
		__atomic_fetch_or(&r->dirty[p / 64], 1ull << (p % 64), __ATOMIC_RELEASE);
}

void gmem_dirty_take(struct guest_mem *gm, unsigned idx, uint64_t *out, bool clear)
{
	struct gmem_region *r;

	if (idx >= gm->nregions || gm->region[idx].dirty == NULL)
		return;
	r = &gm->region[idx];
	for (size_t w = 0; w < gmem_dirty_words(r->size); w++)
		out[w] |= clear ? __atomic_exchange_n(&r->dirty[w], 0, __ATOMIC_ACQ_REL)
		                : __atomic_load_n(&r->dirty[w], __ATOMIC_ACQUIRE);
}

/* The value after `key` at the start of a line of `text`, or -1. */
static int meminfo_value(const char *text, const char *key, uint64_t *out)
{
	size_t n = strlen(key);

	for (const char *p = text; p != NULL && *p != '\0';
	     p = strchr(p, '\n'), p = p ? p + 1 : p) {
		char *end;

		if (strncmp(p, key, n) != 0)
			continue;
		errno = 0;
		*out = strtoull(p + n, &end, 10);
		return errno == 0 && end != p + n ? 0 : -1;
	}
	return -1;
}

int gmem_parse_hugepages(const char *meminfo, uint64_t *free_pages, uint64_t *page_bytes)
{
	uint64_t kb;

	if (meminfo_value(meminfo, "HugePages_Free:", free_pages) < 0 ||
	    meminfo_value(meminfo, "Hugepagesize:", &kb) < 0 || kb == 0 || kb > (1ull << 30))
		return -1;
	*page_bytes = kb << 10;
	return 0;
}
