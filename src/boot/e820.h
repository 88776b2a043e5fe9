/*
 * The BIOS e820 memory map (ACPI 6.4 chapter 15), as handed to Linux in the
 * zero page (Documentation/arch/x86/zero-page.rst) and later to firmware.
 */
#ifndef KHYVE_E820_H
#define KHYVE_E820_H

#include <stdint.h>

#define E820_MAX_ENTRIES 128 /* what the zero page holds */

enum e820_type {
	E820_RAM = 1,
	E820_RESERVED = 2,
	E820_ACPI = 3,
	E820_NVS = 4,
};

/* One entry exactly as the zero page stores it: 20 packed bytes. */
struct e820_entry {
	uint64_t addr; /* guest-physical start, bytes */
	uint64_t size; /* bytes */
	uint32_t type; /* enum e820_type */
} __attribute__((packed));

struct e820_map {
	struct e820_entry entry[E820_MAX_ENTRIES];
	unsigned nentries;
};

/* Add [addr, addr+size) of `type`, keeping entries sorted and merging
 * with the entry just before it when that one has the same type and ends
 * at `addr`.  0, or -1 when the map is full,
 * the range is empty/wraps, or it overlaps an existing entry. */
int e820_add(struct e820_map *map, uint64_t addr, uint64_t size, enum e820_type type);

/*
 * The standard PC map for `lowmem` bytes of RAM below the hole and
 * `highmem` above 4 GiB: conventional memory up to the EBDA (0x9FC00), the
 * EBDA and the BIOS area 0xE0000-0xFFFFF reserved (ACPI tables live there),
 * RAM from 1 MiB to `lowmem`, RAM from 4 GiB.  0 or -1.
 */
int e820_build_default(struct e820_map *map, uint64_t lowmem, uint64_t highmem);

/* Total bytes of type `type`. */
uint64_t e820_total(const struct e820_map *map, enum e820_type type);

#endif
