#include "vmm/mem.h"

#include <string.h>

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
	return 0;
}

bool gmem_is_ram(const struct guest_mem *gm, uint64_t gpa, uint64_t len)
{
	const struct gmem_region *r = region_of(gm, gpa, len);

	return r != NULL && !r->readonly;
}
