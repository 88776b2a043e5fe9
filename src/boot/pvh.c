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

/* Copy program header `i` into `out`, bounds-checked against the file.
 * Copied, not pointed at: e_phoff need not be aligned (found by
 * tests/fuzz/fuzz_kernel under UBSan). */
static bool phdr(const uint8_t *img, size_t len, const Elf64_Ehdr *eh, unsigned i, Elf64_Phdr *out)
{
	uint64_t off = eh->e_phoff + (uint64_t)i * eh->e_phentsize;

	if (eh->e_phentsize < sizeof(Elf64_Phdr) || off > len || len - off < sizeof(Elf64_Phdr))
		return false;
	memcpy(out, img + off, sizeof(*out));
	return true;
}

/* Look for Xen's PHYS32_ENTRY note in one PT_NOTE segment. */
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

/* Copy the ELF header into `eh`; false when `img` is not ELF. */
static bool elf_header(const uint8_t *img, size_t len, Elf64_Ehdr *eh)
{
	if (len < sizeof(*eh) || memcmp(img, ELFMAG, SELFMAG) != 0)
		return false;
	memcpy(eh, img, sizeof(*eh));
	return true;
}

int pvh_probe(const uint8_t *img, size_t len, uint32_t *entry, char *err, size_t errlen)
{
	Elf64_Ehdr ehdr, *eh = &ehdr;
	Elf64_Phdr phd, *ph = &phd;

	if (!elf_header(img, len, eh))
		return 0;
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_machine != EM_X86_64) {
		snprintf(err, errlen, "ELF kernel is not x86-64");
		return -1;
	}
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (!phdr(img, len, eh, i, ph)) {
			snprintf(err, errlen, "ELF program headers are truncated");
			return -1;
		}
		if (ph->p_type == PT_NOTE && ph->p_offset <= len &&
		    ph->p_filesz <= len - ph->p_offset &&
		    find_entry_note(img + ph->p_offset, ph->p_filesz, entry))
			return 1;
	}
	snprintf(err, errlen, "ELF kernel has no PVH entry note (CONFIG_PVH); use the bzImage");
	return -1;
}

/* Copy the PT_LOAD segments; *end gets the highest byte they use. */
static int load_segments(const struct guest_mem *gm, const uint8_t *img, size_t len, uint64_t *end,
                         char *err, size_t errlen)
{
	Elf64_Ehdr ehdr, *eh = &ehdr;
	Elf64_Phdr phd, *ph = &phd;

	*end = 0;
	if (!elf_header(img, len, eh)) {
		snprintf(err, errlen, "kernel is not an ELF file");
		return -1;
	}
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		uint8_t *dst;

		if (!phdr(img, len, eh, i, ph) || ph->p_type != PT_LOAD)
			continue;
		if (ph->p_filesz > ph->p_memsz || ph->p_offset > len ||
		    ph->p_filesz > len - ph->p_offset ||
		    (dst = gmem_ptr(gm, ph->p_paddr, ph->p_memsz, true)) == NULL) {
			snprintf(err, errlen,
			         "kernel segment at 0x%llx (%llu bytes) does not fit in guest RAM",
			         (unsigned long long)ph->p_paddr, (unsigned long long)ph->p_memsz);
			return -1;
		}
		memcpy(dst, img + ph->p_offset, ph->p_filesz);
		memset(dst + ph->p_filesz, 0, ph->p_memsz - ph->p_filesz);
		if (ph->p_paddr + ph->p_memsz > *end)
			*end = ph->p_paddr + ph->p_memsz;
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
