/*
 * Guest physical memory: the regions of RAM (and ROM) the VM has, and the
 * one checked way to turn a guest-physical address into a host pointer.
 *
 * Layout (as bhyve): RAM from 0 up to the 32-bit MMIO hole at
 * GMEM_LOWMEM_LIMIT (3 GiB), the rest from 4 GiB up.  The hole holds PCI BARs,
 * the IOAPIC (0xFEC00000), the local APICs (0xFEE00000) and the boot ROM just
 * below 4 GiB.
 */
#ifndef KHYVE_MEM_H
#define KHYVE_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GMEM_LOWMEM_LIMIT (3ull << 30) /* top of RAM below the MMIO hole */
#define GMEM_HIGHMEM_BASE (4ull << 30) /* RAM above the hole starts here */
#define GMEM_MAX_REGIONS  8

/* One contiguous range of guest-physical memory backed by host memory. */
struct gmem_region {
	uint64_t gpa;  /* guest-physical start, bytes */
	uint64_t size; /* bytes */
	uint8_t *hva;  /* host-virtual start; owned by whoever added the region */
	bool readonly; /* ROM: the guest cannot write it */
	int slot;      /* the KVM memory slot backing it (vm_create's) */
	/* Pages khyve's own threads wrote while dirty tracking is on (bit i =
	 * page i of 4 KiB; atomic words); NULL until gmem_dirty_start(). */
	uint64_t *dirty;
};

struct guest_mem {
	struct gmem_region region[GMEM_MAX_REGIONS];
	unsigned nregions;
	uint64_t lowmem_size;  /* RAM bytes below the hole */
	uint64_t highmem_size; /* RAM bytes from GMEM_HIGHMEM_BASE */
	bool dirty_on;         /* gmem_mark_dirty() records (atomic) */
};

#define GMEM_DIRTY_PAGE 4096u /* bytes a dirty bit stands for */

/* Split `memsize` bytes of RAM into the part below the hole and above 4 GiB. */
void gmem_layout(uint64_t memsize, uint64_t *lowmem, uint64_t *highmem);

/*
 * Record a region.  Returns 0, or -1 when the table is full, the range wraps
 * around, or it overlaps an existing region.
 */
int gmem_add_region(struct guest_mem *gm, uint64_t gpa, uint64_t size, void *hva, bool readonly);

/*
 * The host pointer for guest-physical [gpa, gpa+len), or NULL unless the
 * whole range lies inside one region (and, when `write`, a writable one).
 * len == 0 is allowed and checks gpa alone.  Overflow-safe: gpa and len come
 * from the guest.
 */
void *gmem_ptr(const struct guest_mem *gm, uint64_t gpa, uint64_t len, bool write);

/* Copy between guest memory and a host buffer; 0, or -1 if out of range. */
int gmem_read(const struct guest_mem *gm, uint64_t gpa, void *dst, uint64_t len);
int gmem_write(const struct guest_mem *gm, uint64_t gpa, const void *src, uint64_t len);

/* True when [gpa, gpa+len) is guest RAM (not ROM, not a hole). */
bool gmem_is_ram(const struct guest_mem *gm, uint64_t gpa, uint64_t len);

/*
 * Dirty tracking of the writes khyve's own threads make into guest RAM
 * (KVM's dirty log sees only the guest's): live migration sends these
 * pages again.  gmem_dirty_start() allocates a bitmap of
 * (size / GMEM_DIRTY_PAGE + 63) / 64 words per writable region (kept
 * until gmem_dirty_free(), so a device thread never sees it vanish) and
 * switches recording on; 0 or -1 (out of memory).  gmem_dirty_stop()
 * switches it off.  Called from one thread (the migration's).
 */
int gmem_dirty_start(struct guest_mem *gm);
void gmem_dirty_stop(struct guest_mem *gm);
void gmem_dirty_free(struct guest_mem *gm);

/*
 * Record that khyve writes [gpa, gpa+len) of guest RAM (a no-op unless
 * tracking is on, or outside RAM).  Thread-safe, lock-free.  gmem_ptr()
 * with `write` and gmem_write() call it themselves, so a device need not.
 */
void gmem_mark_dirty(const struct guest_mem *gm, uint64_t gpa, uint64_t len);

/*
 * OR region `idx`'s recorded pages into `out` (same layout), word by word
 * atomically; with `clear` the marks are cleared too.  A pre-copy round
 * takes them without clearing: a mark comes when a device gets its
 * pointer, before it writes, so only the final round, after the devices
 * were quiesced, may clear them.  No-op for a region without a bitmap.
 */
void gmem_dirty_take(struct guest_mem *gm, unsigned idx, uint64_t *out, bool clear);

/*
 * From /proc/meminfo's text (NUL-terminated): HugePages_Free into
 * `*free_pages` and Hugepagesize into `*page_bytes`.  0, or -1 when either
 * line is missing or the size is 0.
 */
int gmem_parse_hugepages(const char *meminfo, uint64_t *free_pages, uint64_t *page_bytes);

/* Words of a dirty bitmap for `size` bytes. */
static inline size_t gmem_dirty_words(uint64_t size)
{
	return (size_t)((size / GMEM_DIRTY_PAGE + 63) / 64);
}

#endif
