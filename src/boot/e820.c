#include "boot/e820.h"

#include <string.h>

#include "vmm/mem.h"

#define EBDA_START 0x9fc00ull
#define BIOS_START 0xe0000ull
#define HIGH_START 0x100000ull

int e820_add(struct e820_map *map, uint64_t addr, uint64_t size, enum e820_type type)
{
	unsigned i;

	if (size == 0 || addr + size < addr)
		return -1;
	for (i = 0; i < map->nentries; i++) {
		const struct e820_entry *e = &map->entry[i];

		if (addr < e->addr + e->size && e->addr < addr + size)
			return -1;
		if (e->addr > addr)
			break;
	}
	/* Merge with the entry before when it ends exactly here. */
	if (i > 0 && map->entry[i - 1].type == (uint32_t)type &&
	    map->entry[i - 1].addr + map->entry[i - 1].size == addr) {
		map->entry[i - 1].size += size;
		return 0;
	}
	if (map->nentries == E820_MAX_ENTRIES)
		return -1;
	memmove(&map->entry[i + 1], &map->entry[i], (map->nentries - i) * sizeof(map->entry[0]));
	map->entry[i] = (struct e820_entry){addr, size, (uint32_t)type};
	map->nentries++;
	return 0;
}

/* Add the part of [start, end) that lies below `limit`. */
static int add_clipped(struct e820_map *map, uint64_t start, uint64_t end, uint64_t limit,
                       enum e820_type type)
{
	if (end > limit)
		end = limit;
	if (start >= end)
		return 0;
	return e820_add(map, start, end - start, type);
}

int e820_build_default(struct e820_map *map, uint64_t lowmem, uint64_t highmem)
{
	memset(map, 0, sizeof(*map));
	if (add_clipped(map, 0, EBDA_START, lowmem, E820_RAM) < 0 ||
	    add_clipped(map, EBDA_START, 0xa0000, lowmem, E820_RESERVED) < 0 ||
	    add_clipped(map, BIOS_START, HIGH_START, lowmem, E820_RESERVED) < 0 ||
	    add_clipped(map, HIGH_START, lowmem, lowmem, E820_RAM) < 0)
		return -1;
	if (highmem > 0 && e820_add(map, GMEM_HIGHMEM_BASE, highmem, E820_RAM) < 0)
		return -1;
	return 0;
}

uint64_t e820_total(const struct e820_map *map, enum e820_type type)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < map->nentries; i++)
		if (map->entry[i].type == (uint32_t)type)
			sum += map->entry[i].size;
	return sum;
}
