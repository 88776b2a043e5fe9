/* PVH boot: ELF note probing and the start info (src/boot/pvh.h). */
#include "unit.h"

#include <elf.h>

#include "boot/e820.h"
#include "boot/pvh.h"

#define IMG_SIZE 4096
#define RAM_SIZE (8u << 20)

static uint8_t img[IMG_SIZE];

/* An ELF64 with one PT_LOAD of 16 bytes at 1 MiB (memsz 32) and a PT_NOTE
 * holding the Xen PHYS32_ENTRY note (entry 0x100004). */
static size_t build_elf(bool with_note)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Phdr *ph = (Elf64_Phdr *)(img + sizeof(*eh));
	uint8_t *note = img + 0x200, *code = img + 0x300;
	uint32_t n[3] = {4, 4, XEN_ELFNOTE_PHYS32_ENTRY}, entry = 0x100004;

	memset(img, 0, sizeof(img));
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_machine = EM_X86_64;
	eh->e_phoff = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 2;
	ph[0] = (Elf64_Phdr){.p_type = PT_LOAD,
	                     .p_offset = 0x300,
	                     .p_paddr = 0x100000,
	                     .p_filesz = 16,
	                     .p_memsz = 32};
	ph[1] = (Elf64_Phdr){.p_type = PT_NOTE, .p_offset = 0x200, .p_filesz = 20};
	memcpy(note, n, sizeof(n));
	memcpy(note + 12, "Xen", 4);
	memcpy(note + 16, &entry, 4);
	if (!with_note)
		ph[1].p_type = PT_NULL;
	memset(code, 0x90, 16);
	return 0x400;
}

/* The same image as build_elf, as `ld -m elf_i386` writes it: an ELF32
 * (EM_386) with the same PT_LOAD and the same Xen note. */
static size_t build_elf32(void)
{
	Elf32_Ehdr *eh = (Elf32_Ehdr *)img;
	Elf32_Phdr *ph = (Elf32_Phdr *)(img + sizeof(*eh));
	uint8_t *note = img + 0x200, *code = img + 0x300;
	uint32_t n[3] = {4, 4, XEN_ELFNOTE_PHYS32_ENTRY}, entry = 0x100004;

	memset(img, 0, sizeof(img));
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS32;
	eh->e_machine = EM_386;
	eh->e_phoff = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 2;
	ph[0] = (Elf32_Phdr){.p_type = PT_LOAD,
	                     .p_offset = 0x300,
	                     .p_paddr = 0x100000,
	                     .p_filesz = 16,
	                     .p_memsz = 32};
	ph[1] = (Elf32_Phdr){.p_type = PT_NOTE, .p_offset = 0x200, .p_filesz = 20};
	memcpy(note, n, sizeof(n));
	memcpy(note + 12, "Xen", 4);
	memcpy(note + 16, &entry, 4);
	memset(code, 0x90, 16);
	return 0x400;
}

static void test_probe(void **state)
{
	char err[200] = "";
	uint32_t entry = 0;
	size_t len;

	(void)state;
	len = build_elf(true);
	assert_int_equal(pvh_probe(img, len, &entry, err, sizeof(err)), 1);
	assert_int_equal(entry, 0x100004);
	/* Not ELF at all: a bzImage or anything else. */
	assert_int_equal(pvh_probe((const uint8_t *)"MZ\x90\x00", 4, &entry, err, sizeof(err)), 0);
	/* ELF without the note. */
	len = build_elf(false);
	assert_int_equal(pvh_probe(img, len, &entry, err, sizeof(err)), -1);
	assert_contains(err, "PVH");
	/* Truncated program headers. */
	len = build_elf(true);
	assert_int_equal(pvh_probe(img, sizeof(Elf64_Ehdr) + 10, &entry, err, sizeof(err)), -1);
	/* An ELF64 header that claims ELFCLASS32 is read as ELF32: not i386. */
	img[EI_CLASS] = ELFCLASS32;
	assert_int_equal(pvh_probe(img, len, &entry, err, sizeof(err)), -1);
	assert_contains(err, "i386");
	/* ELF header cut short. */
	assert_int_equal(pvh_probe(img, 20, &entry, err, sizeof(err)), -1);
	assert_contains(err, "truncated");
	/* A note whose sizes run past the segment. */
	build_elf(true);
	((Elf64_Phdr *)(img + sizeof(Elf64_Ehdr)))[1].p_filesz = 8;
	assert_int_equal(pvh_probe(img, len, &entry, err, sizeof(err)), -1);
	/* A segment offset beyond the file. */
	build_elf(true);
	((Elf64_Phdr *)(img + sizeof(Elf64_Ehdr)))[1].p_offset = 1ull << 40;
	assert_int_equal(pvh_probe(img, len, &entry, err, sizeof(err)), -1);
}

/* ELFCLASS32 kernels (EM_386) probe through the same note; their program
 * headers are bounds-checked with the 32-bit sizes. */
static void test_probe_elf32(void **state)
{
	char err[200] = "";
	uint32_t entry = 0;
	size_t len = build_elf32();

	(void)state;
	assert_int_equal(pvh_probe(img, len, &entry, err, sizeof(err)), 1);
	assert_int_equal(entry, 0x100004);
	/* x32 (ELFCLASS32 for EM_X86_64) is not a PVH kernel. */
	((Elf32_Ehdr *)img)->e_machine = EM_X86_64;
	assert_int_equal(pvh_probe(img, len, &entry, err, sizeof(err)), -1);
	assert_contains(err, "neither");
	/* Program header entries smaller than Elf32_Phdr. */
	build_elf32();
	((Elf32_Ehdr *)img)->e_phentsize = sizeof(Elf32_Phdr) - 1;
	assert_int_equal(pvh_probe(img, len, &entry, err, sizeof(err)), -1);
	assert_contains(err, "truncated");
	/* Program headers past the end of the file. */
	build_elf32();
	assert_int_equal(pvh_probe(img, sizeof(Elf32_Ehdr) + 40, &entry, err, sizeof(err)), -1);
	/* No note. */
	build_elf32();
	((Elf32_Phdr *)(img + sizeof(Elf32_Ehdr)))[1].p_type = PT_NULL;
	assert_int_equal(pvh_probe(img, len, &entry, err, sizeof(err)), -1);
	assert_contains(err, "PVH");
}

/* Program headers and the note at odd offsets are read, not dereferenced
 * misaligned (UBSan found it through tests/fuzz/fuzz_kernel). */
static void test_probe_unaligned(void **state)
{
	static uint8_t odd[IMG_SIZE + 16];
	Elf64_Ehdr eh;
	char err[200] = "";
	uint32_t entry = 0;
	size_t len = build_elf(true);
	Elf64_Phdr ph[2];

	(void)state;
	memcpy(&eh, img, sizeof(eh));
	memcpy(ph, img + eh.e_phoff, sizeof(ph));
	eh.e_phoff = 0x101;
	ph[1].p_offset = 0x203;
	memset(odd, 0, sizeof(odd));
	memcpy(odd, &eh, sizeof(eh));
	memcpy(odd + 0x101, ph, sizeof(ph));
	memcpy(odd + 0x203, img + 0x200, 20);
	memcpy(odd + 0x300, img + 0x300, 16);
	assert_int_equal(pvh_probe(odd, len, &entry, err, sizeof(err)), 1);
	assert_int_equal(entry, 0x100004);
}

static void test_load(void **state)
{
	struct guest_mem gm;
	struct e820_map map;
	struct boot_cpu_state cpu;
	struct linux_boot lb = {.kernel = "unused", .cmdline = "console=ttyS0"};
	uint8_t *ram = calloc(1, RAM_SIZE);
	char err[200] = "";
	uint32_t si[14];
	size_t len = build_elf(true);

	(void)state;
	memset(&gm, 0, sizeof(gm));
	assert_int_equal(gmem_add_region(&gm, 0, RAM_SIZE, ram, false), 0);
	gm.lowmem_size = RAM_SIZE;
	assert_int_equal(e820_build_default(&map, RAM_SIZE, 0), 0);
	assert_int_equal(pvh_load(&gm, img, len, &lb, &map, 0xe0000, &cpu, err, sizeof(err)), 0);
	assert_int_equal(cpu.mode, BOOT_FLAT32);
	assert_int_equal(cpu.rip, 0x100004);
	assert_int_equal(cpu.rbx, PVH_START_INFO_GPA);
	assert_int_equal(ram[0x100000], 0x90);
	assert_int_equal(ram[0x100010], 0); /* memsz beyond filesz is zeroed */
	memcpy(si, ram + PVH_START_INFO_GPA, sizeof(si));
	assert_int_equal(si[0], 0x336ec578); /* magic */
	assert_int_equal(si[1], 1);          /* version */
	assert_int_equal(si[3], 0);          /* no modules */
	assert_string_equal((char *)ram + LINUX_CMDLINE_GPA, "console=ttyS0");
	assert_int_equal(si[12], map.nentries); /* memmap entries */
	/* A segment outside RAM is refused. */
	((Elf64_Phdr *)(img + sizeof(Elf64_Ehdr)))[0].p_paddr = RAM_SIZE - 8;
	assert_int_equal(pvh_load(&gm, img, len, &lb, &map, 0, &cpu, err, sizeof(err)), -1);
	assert_contains(err, "does not fit");
	free(ram);
}

static void test_load_elf32(void **state)
{
	struct guest_mem gm;
	struct e820_map map;
	struct boot_cpu_state cpu;
	struct linux_boot lb = {.kernel = "unused", .cmdline = ""};
	uint8_t *ram = calloc(1, RAM_SIZE);
	char err[200] = "";
	size_t len = build_elf32();

	(void)state;
	memset(&gm, 0, sizeof(gm));
	assert_int_equal(gmem_add_region(&gm, 0, RAM_SIZE, ram, false), 0);
	gm.lowmem_size = RAM_SIZE;
	assert_int_equal(e820_build_default(&map, RAM_SIZE, 0), 0);
	memset(ram + 0x100010, 0xcc, 16); /* memsz beyond filesz must be zeroed */
	assert_int_equal(pvh_load(&gm, img, len, &lb, &map, 0xe0000, &cpu, err, sizeof(err)), 0);
	assert_int_equal(cpu.mode, BOOT_FLAT32);
	assert_int_equal(cpu.rip, 0x100004);
	assert_int_equal(cpu.rbx, PVH_START_INFO_GPA);
	assert_int_equal(ram[0x100000], 0x90);
	assert_int_equal(ram[0x10001f], 0);
	/* A segment whose file part runs past the image. */
	((Elf32_Phdr *)(img + sizeof(Elf32_Ehdr)))[0].p_filesz = 0x200;
	((Elf32_Phdr *)(img + sizeof(Elf32_Ehdr)))[0].p_memsz = 0x200;
	assert_int_equal(pvh_load(&gm, img, len, &lb, &map, 0, &cpu, err, sizeof(err)), -1);
	free(ram);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_probe),           cmocka_unit_test(test_probe_elf32),
	    cmocka_unit_test(test_probe_unaligned), cmocka_unit_test(test_load),
	    cmocka_unit_test(test_load_elf32),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
