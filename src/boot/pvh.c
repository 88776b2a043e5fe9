#include "boot/pvh.h"

#include <elf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/file.h"

#define HVM_START_MAGIC   0x336ec578u
#define HVM_START_VERSION 1
#define PVH_MODLIST_GPA   (PVH_START_INFO_GPA + 0x100)
#define PVH_MEMMAP_GPA    (PVH_START_INFO_GPA + 0x200)
#define PVH_MAX_MEMMAP    ((0x1000 - 0x200) / 24)
#define PVH_CS            0x08
#define PVH_DS            0x10
#define PVH_TR            0x18
#define PAGE              4096ull

struct hvm_start_info {
	uint32_t magic;
	uint32_t version;
	uint32_t flags;
	uint32_t nr_modules;
	uint64_t modlist_paddr;
	uint64_t cmdline_paddr;
	uint64_t rsdp_paddr;
	uint64_t memmap_paddr;
	uint32_t memmap_entries;
	uint32_t reserved;
};

struct hvm_modlist_entry {
	uint64_t paddr;
	uint64_t size;
	uint64_t cmdline_paddr;
	uint64_t reserved;
};

struct hvm_memmap_table_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type;
	uint32_t reserved;
};

/* The parts of an ELF header (either class) the loader uses. */
struct elf_hdr {
	unsigned char cls; /* ELFCLASS32 or ELFCLASS64 */
	uint16_t machine;
	uint64_t phoff;
	uint16_t phentsize, phnum;
};

/* The parts of a program header (either class) the loader uses. */
struct elf_seg {
	uint32_t type;
	uint64_t offset, paddr, filesz, memsz;
};

/* Copy the ELF header of either class into `eh`; false when `img` is not
 * ELF (or too short for its class's header). */
static bool elf_header(const uint8_t *img, size_t len, struct elf_hdr *eh)
{
	Elf64_Ehdr e64;
	Elf32_Ehdr e32;

	if (len < EI_NIDENT || memcmp(img, ELFMAG, SELFMAG) != 0)
		return false;
	if (img[EI_CLASS] == ELFCLASS32) {
		if (len < sizeof(e32))
			return false;
		memcpy(&e32, img, sizeof(e32));
		*eh = (struct elf_hdr){ELFCLASS32, e32.e_machine, e32.e_phoff, e32.e_phentsize,
		                       e32.e_phnum};
		return true;
	}
	if (len < sizeof(e64))
		return false;
	memcpy(&e64, img, sizeof(e64));
	*eh = (struct elf_hdr){img[EI_CLASS], e64.e_machine, e64.e_phoff, e64.e_phentsize,
	                       e64.e_phnum};
	return true;
}

/* Copy program header `i` into `out`, bounds-checked against the file.
 * Copied, not pointed at: e_phoff need not be aligned (found by
 * tests/fuzz/fuzz_kernel under UBSan). */
static bool phdr(const uint8_t *img, size_t len, const struct elf_hdr *eh, unsigned i,
                 struct elf_seg *out)
{
	size_t need = eh->cls == ELFCLASS32 ? sizeof(Elf32_Phdr) : sizeof(Elf64_Phdr);
	uint64_t off = eh->phoff + (uint64_t)i * eh->phentsize;

	if (eh->phentsize < need || off > len || len - off < need)
		return false;
	if (eh->cls == ELFCLASS32) {
		Elf32_Phdr p;

		memcpy(&p, img + off, sizeof(p));
		*out = (struct elf_seg){p.p_type, p.p_offset, p.p_paddr, p.p_filesz, p.p_memsz};
	} else {
		Elf64_Phdr p;

		memcpy(&p, img + off, sizeof(p));
		*out = (struct elf_seg){p.p_type, p.p_offset, p.p_paddr, p.p_filesz, p.p_memsz};
	}
	return true;
}

/* Look for Xen's PHYS32_ENTRY note in one PT_NOTE segment (Elf32_Nhdr and
 * Elf64_Nhdr have the same layout: three 32-bit words). */
static int find_entry_note(const uint8_t *p, uint64_t size, uint32_t *entry)
{
	uint64_t off = 0;

	while (size - off >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr n;
		uint64_t name, desc, next;

		memcpy(&n, p + off, sizeof(n)); /* a note may sit at any offset */
		name = off + sizeof(n);
		desc = name + ((n.n_namesz + 3ull) & ~3ull);
		next = desc + ((n.n_descsz + 3ull) & ~3ull);
		if (next > size || next <= off)
			return 0;
		if (n.n_type == XEN_ELFNOTE_PHYS32_ENTRY && n.n_namesz == 4 &&
		    memcmp(p + name, "Xen", 4) == 0 && n.n_descsz >= 4) {
			memcpy(entry, p + desc, 4);
			return 1;
		}
		off = next;
	}
	return 0;
}

/* An x86 kernel: ELFCLASS64 for x86-64 or ELFCLASS32 for i386 (what
 * `ld -m elf_i386` writes; QEMU's -kernel boots both through the note). */
static bool elf_is_x86(const struct elf_hdr *eh)
{
	return (eh->cls == ELFCLASS64 && eh->machine == EM_X86_64) ||
	       (eh->cls == ELFCLASS32 && eh->machine == EM_386);
}

int pvh_probe(const uint8_t *img, size_t len, uint32_t *entry, char *err, size_t errlen)
{
	struct elf_hdr eh;
	struct elf_seg ph;

	if (len < SELFMAG || memcmp(img, ELFMAG, SELFMAG) != 0)
		return 0;
	if (!elf_header(img, len, &eh)) {
		snprintf(err, errlen, "ELF header is truncated");
		return -1;
	}
	if (!elf_is_x86(&eh)) {
		snprintf(err, errlen,
		         "ELF kernel is neither x86-64 (ELFCLASS64) nor i386 (ELFCLASS32)");
		return -1;
	}
	for (unsigned i = 0; i < eh.phnum; i++) {
		if (!phdr(img, len, &eh, i, &ph)) {
			snprintf(err, errlen, "ELF program headers are truncated");
			return -1;
		}
		if (ph.type == PT_NOTE && ph.offset <= len && ph.filesz <= len - ph.offset &&
		    find_entry_note(img + ph.offset, ph.filesz, entry))
			return 1;
	}
	snprintf(err, errlen, "ELF kernel has no PVH entry note (CONFIG_PVH); use the bzImage");
	return -1;
}

/* Copy the PT_LOAD segments; *end gets the highest byte they use. */
static int load_segments(const struct guest_mem *gm, const uint8_t *img, size_t len, uint64_t *end,
                         char *err, size_t errlen)
{
	struct elf_hdr ehdr, *eh = &ehdr;
	struct elf_seg phd, *ph = &phd;

	*end = 0;
	if (!elf_header(img, len, eh)) {
		snprintf(err, errlen, "kernel is not an ELF file");
		return -1;
	}
	for (unsigned i = 0; i < eh->phnum; i++) {
		uint8_t *dst;

		if (!phdr(img, len, eh, i, ph) || ph->type != PT_LOAD)
			continue;
		if (ph->filesz > ph->memsz || ph->offset > len || ph->filesz > len - ph->offset ||
		    (dst = gmem_ptr(gm, ph->paddr, ph->memsz, true)) == NULL) {
			snprintf(err, errlen,
			         "kernel segment at 0x%llx (%llu bytes) does not fit in guest RAM",
			         (unsigned long long)ph->paddr, (unsigned long long)ph->memsz);
			return -1;
		}
		memcpy(dst, img + ph->offset, ph->filesz);
		memset(dst + ph->filesz, 0, ph->memsz - ph->filesz);
		if (ph->paddr + ph->memsz > *end)
			*end = ph->paddr + ph->memsz;
	}
	return 0;
}

static int load_initrd(const struct guest_mem *gm, const char *path, uint64_t kernel_end,
                       struct hvm_modlist_entry *mod, char *err, size_t errlen)
{
	uint64_t top = gm->lowmem_size < (4ull << 30) ? gm->lowmem_size : (4ull << 30);
	size_t len;
	uint8_t *data = file_read_all(path, LOADER_INITRD_MAX, &len, err, errlen);
	uint64_t addr;

	if (data == NULL)
		return -1;
	addr = len < top ? (top - len) & ~(PAGE - 1) : 0;
	if (addr < kernel_end || gmem_write(gm, addr, data, len) < 0) {
		snprintf(err, errlen, "initrd %s does not fit in guest memory with the kernel",
		         path);
		free(data);
		return -1;
	}
	free(data);
	*mod = (struct hvm_modlist_entry){addr, len, 0, 0};
	return 0;
}

static int write_start_info(const struct guest_mem *gm, const struct e820_map *map,
                            uint64_t rsdp_gpa, unsigned nmods)
{
	struct hvm_start_info si = {
	    .magic = HVM_START_MAGIC,
	    .version = HVM_START_VERSION,
	    .nr_modules = nmods,
	    .modlist_paddr = nmods ? PVH_MODLIST_GPA : 0,
	    .cmdline_paddr = LINUX_CMDLINE_GPA,
	    .rsdp_paddr = rsdp_gpa,
	    .memmap_paddr = PVH_MEMMAP_GPA,
	    .memmap_entries = map->nentries < PVH_MAX_MEMMAP ? map->nentries : PVH_MAX_MEMMAP,
	};

	for (unsigned i = 0; i < si.memmap_entries; i++) {
		struct hvm_memmap_table_entry e = {map->entry[i].addr, map->entry[i].size,
		                                   map->entry[i].type, 0};

		if (gmem_write(gm, PVH_MEMMAP_GPA + i * sizeof(e), &e, sizeof(e)) < 0)
			return -1;
	}
	return gmem_write(gm, PVH_START_INFO_GPA, &si, sizeof(si));
}

/* Flat 32-bit code and data, and a TSS descriptor (the ABI wants TR set). */
static int write_gdt(const struct guest_mem *gm)
{
	const uint64_t gdt[4] = {0, 0x00cf9b000000ffffull, 0x00cf93000000ffffull,
	                         0x00008b0000000067ull};

	return gmem_write(gm, LINUX_GDT_GPA, gdt, sizeof(gdt));
}

int pvh_load(const struct guest_mem *gm, const uint8_t *img, size_t len,
             const struct linux_boot *lb, const struct e820_map *map, uint64_t rsdp_gpa,
             struct boot_cpu_state *cpu, char *err, size_t errlen)
{
	struct hvm_modlist_entry mod;
	uint64_t end;
	uint32_t entry;

	if (pvh_probe(img, len, &entry, err, errlen) != 1 ||
	    load_segments(gm, img, len, &end, err, errlen) < 0)
		return -1;
	if (loader_write_cmdline(gm, lb->cmdline, LINUX_CMDLINE_MAX - 1, err, errlen) < 0)
		return -1;
	if (lb->initrd != NULL && (load_initrd(gm, lb->initrd, end, &mod, err, errlen) < 0 ||
	                           gmem_write(gm, PVH_MODLIST_GPA, &mod, sizeof(mod)) < 0))
		return -1;
	if (write_start_info(gm, map, rsdp_gpa, lb->initrd ? 1 : 0) < 0 || write_gdt(gm) < 0) {
		snprintf(err, errlen, "guest memory too small for the PVH start info");
		return -1;
	}
	*cpu = (struct boot_cpu_state){
	    .mode = BOOT_FLAT32,
	    .rip = entry,
	    .rbx = PVH_START_INFO_GPA,
	    .gdt_base = LINUX_GDT_GPA,
	    .gdt_limit = 4 * 8 - 1,
	    .cs = PVH_CS,
	    .ds = PVH_DS,
	    .tr = PVH_TR,
	};
	return 0;
}
