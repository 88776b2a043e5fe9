#include "boot/linux.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dev/fbuf.h"
#include "lib/file.h"

/* Setup header fields, as offsets into the bzImage / zero page. */
#define HDR_SETUP_SECTS     0x1f1
#define HDR_BOOT_FLAG       0x1fe
#define HDR_JUMP            0x200
#define HDR_MAGIC           0x202
#define HDR_VERSION         0x206
#define HDR_TYPE_OF_LOADER  0x210
#define HDR_LOADFLAGS       0x211
#define HDR_RAMDISK_IMAGE   0x218
#define HDR_RAMDISK_SIZE    0x21c
#define HDR_HEAP_END_PTR    0x224
#define HDR_CMD_LINE_PTR    0x228
#define HDR_INITRD_ADDR_MAX 0x22c
#define HDR_RELOCATABLE     0x234
#define HDR_XLOADFLAGS      0x236
#define HDR_CMDLINE_SIZE    0x238
#define HDR_PREF_ADDRESS    0x258
#define HDR_INIT_SIZE       0x260

/* Zero page fields outside the setup header. */
/* struct screen_info at the start of the zero page (Linux
 * include/uapi/linux/screen_info.h). */
#define ZP_ORIG_X              0x00
#define ZP_ORIG_Y              0x01
#define ZP_ORIG_VIDEO_MODE     0x06
#define ZP_ORIG_VIDEO_COLS     0x07
#define ZP_ORIG_VIDEO_EGA_BX   0x0a
#define ZP_ORIG_VIDEO_LINES    0x0e
#define ZP_ORIG_VIDEO_ISVGA    0x0f
#define ZP_ORIG_VIDEO_POINTS   0x10
#define VIDEO_TYPE_VGAC        0x22
#define ZP_ACPI_RSDP_ADDR      0x070
#define ZP_EXT_RAMDISK_IMAGE   0x0c0
#define ZP_EXT_RAMDISK_SIZE    0x0c4
#define ZP_EXT_CMD_LINE_PTR    0x0c8
#define ZP_E820_ENTRIES        0x1e8
#define ZP_E820_TABLE          0x2d0
#define ZP_SIZE                4096

#define LOADFLAGS_CAN_USE_HEAP 0x80
#define XLF_KERNEL_64          0x0001
#define BOOT_FLAG_MAGIC        0xaa55
#define HDRS_MAGIC             0x53726448 /* "HdrS" */
#define LOADER_UNDEFINED       0xff
#define MIN_PROTOCOL_64BIT     0x020c

#define PAGE_SIZE              4096ull
#define PTE_PRESENT            0x1ull
#define PTE_RW                 0x2ull
#define PTE_PS                 0x80ull /* 2 MiB page in a PD entry */

static uint64_t get_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void set_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int bzimage_parse(const uint8_t *img, size_t len, struct bzimage_info *info, char *err,
                  size_t errlen)
{
	unsigned setup_sects;

	if (len < HDR_INIT_SIZE + 4 || get_le(img + HDR_BOOT_FLAG, 2) != BOOT_FLAG_MAGIC ||
	    get_le(img + HDR_MAGIC, 4) != HDRS_MAGIC) {
		snprintf(err, errlen, "not a Linux bzImage (no boot protocol header)");
		return -1;
	}
	memset(info, 0, sizeof(*info));
	info->version = (uint16_t)get_le(img + HDR_VERSION, 2);
	info->xloadflags = (uint16_t)get_le(img + HDR_XLOADFLAGS, 2);
	if (info->version < MIN_PROTOCOL_64BIT || !(info->xloadflags & XLF_KERNEL_64)) {
		snprintf(err, errlen,
		         "kernel boot protocol %u.%02u lacks the 64-bit entry (need 2.12+)",
		         info->version >> 8, info->version & 0xff);
		return -1;
	}
	setup_sects = img[HDR_SETUP_SECTS] ? img[HDR_SETUP_SECTS] : 4;
	info->setup_size = (size_t)(setup_sects + 1) * 512;
	if (info->setup_size >= len) {
		snprintf(err, errlen, "bzImage is truncated");
		return -1;
	}
	info->kernel_size = len - info->setup_size;
	info->init_size = (uint32_t)get_le(img + HDR_INIT_SIZE, 4);
	info->pref_address = get_le(img + HDR_PREF_ADDRESS, 8);
	info->initrd_addr_max = (uint32_t)get_le(img + HDR_INITRD_ADDR_MAX, 4);
	info->cmdline_size = (uint32_t)get_le(img + HDR_CMDLINE_SIZE, 4);
	info->relocatable = img[HDR_RELOCATABLE];
	return 0;
}

/* The kernel decompresses to max(pref_address, load address) and needs
 * init_size bytes there; nothing else may live in that range. */
static uint64_t kernel_end(const struct bzimage_info *info)
{
	uint64_t start =
	    info->pref_address > LINUX_KERNEL_GPA ? info->pref_address : LINUX_KERNEL_GPA;
	uint64_t loaded = LINUX_KERNEL_GPA + info->kernel_size;
	uint64_t run_end = start + info->init_size;

	return run_end > loaded ? run_end : loaded;
}

uint64_t linux_initrd_addr(const struct bzimage_info *info, uint64_t lowmem, uint64_t size)
{
	uint64_t top = lowmem;
	uint64_t addr;

	if (info->initrd_addr_max != 0 && (uint64_t)info->initrd_addr_max + 1 < top)
		top = (uint64_t)info->initrd_addr_max + 1;
	if (size == 0 || size > top)
		return 0;
	addr = (top - size) & ~(PAGE_SIZE - 1);
	return addr >= kernel_end(info) ? addr : 0;
}

static void zp_store_e820(uint8_t *zp, const struct e820_map *map)
{
	unsigned n = map->nentries < E820_MAX_ENTRIES ? map->nentries : E820_MAX_ENTRIES;

	zp[ZP_E820_ENTRIES] = (uint8_t)n;
	memcpy(zp + ZP_E820_TABLE, map->entry, n * sizeof(struct e820_entry));
}

void linux_build_zero_page(uint8_t *zp, const uint8_t *img, const struct bzimage_info *info,
                           uint64_t cmdline_gpa, uint64_t initrd_gpa, uint64_t initrd_size,
                           const struct e820_map *map, uint64_t rsdp_gpa)
{
	/* The header runs from 0x1f1 to 0x202 plus the jump's offset byte. */
	size_t hdr_end = HDR_MAGIC + img[HDR_JUMP + 1];

	memset(zp, 0, ZP_SIZE);
	if (hdr_end > info->setup_size)
		hdr_end = info->setup_size;
	if (hdr_end > ZP_SIZE)
		hdr_end = ZP_SIZE;
	memcpy(zp + HDR_SETUP_SECTS, img + HDR_SETUP_SECTS, hdr_end - HDR_SETUP_SECTS);
	zp[HDR_TYPE_OF_LOADER] = LOADER_UNDEFINED;
	zp[HDR_LOADFLAGS] |= LOADFLAGS_CAN_USE_HEAP;
	set_le(zp + HDR_HEAP_END_PTR, 0xfe00, 2);
	set_le(zp + HDR_CMD_LINE_PTR, (uint32_t)cmdline_gpa, 4);
	set_le(zp + ZP_EXT_CMD_LINE_PTR, (uint32_t)(cmdline_gpa >> 32), 4);
	set_le(zp + HDR_RAMDISK_IMAGE, (uint32_t)initrd_gpa, 4);
	set_le(zp + HDR_RAMDISK_SIZE, (uint32_t)initrd_size, 4);
	set_le(zp + ZP_EXT_RAMDISK_IMAGE, (uint32_t)(initrd_gpa >> 32), 4);
	set_le(zp + ZP_EXT_RAMDISK_SIZE, (uint32_t)(initrd_size >> 32), 4);
	set_le(zp + ZP_ACPI_RSDP_ADDR, rsdp_gpa, 8);
	zp_store_e820(zp, map);
}

void linux_zp_vga_text(uint8_t *zp)
{
	zp[ZP_ORIG_X] = 0;
	zp[ZP_ORIG_Y] = 0; /* nothing written yet: the cursor on the first line */
	zp[ZP_ORIG_VIDEO_MODE] = 3;
	zp[ZP_ORIG_VIDEO_COLS] = 80;
	set_le(zp + ZP_ORIG_VIDEO_EGA_BX, 0x0003, 2); /* int 10h AH=12h BL=10h: colour, 256K */
	zp[ZP_ORIG_VIDEO_LINES] = 25;
	zp[ZP_ORIG_VIDEO_ISVGA] = VIDEO_TYPE_VGAC;
	set_le(zp + ZP_ORIG_VIDEO_POINTS, 16, 2);
}

/* GDT with __BOOT_CS (64-bit code) and __BOOT_DS, as boot.rst requires. */
static int write_gdt(const struct guest_mem *gm)
{
	const uint64_t gdt[4] = {0, 0, 0x00af9b000000ffffull, 0x00cf93000000ffffull};

	return gmem_write(gm, LINUX_GDT_GPA, gdt, sizeof(gdt));
}

/* Identity map of the first 4 GiB with 2 MiB pages: PML4, one PDPT, four PDs. */
static int write_page_tables(const struct guest_mem *gm)
{
	uint64_t pdpt = LINUX_PML4_GPA + PAGE_SIZE, pd = pdpt + PAGE_SIZE;
	uint64_t *t = gmem_ptr(gm, LINUX_PML4_GPA, 6 * PAGE_SIZE, true);

	if (t == NULL)
		return -1;
	memset(t, 0, 6 * PAGE_SIZE);
	t[0] = pdpt | PTE_PRESENT | PTE_RW;
	for (uint64_t i = 0; i < 4; i++)
		t[512 + i] = (pd + i * PAGE_SIZE) | PTE_PRESENT | PTE_RW;
	for (uint64_t i = 0; i < 4 * 512; i++)
		t[1024 + i] = (i << 21) | PTE_PRESENT | PTE_RW | PTE_PS;
	return 0;
}

static int load_initrd(const struct guest_mem *gm, const struct bzimage_info *info,
                       const char *path, uint64_t *gpa, uint64_t *size, char *err, size_t errlen)
{
	size_t len;
	uint8_t *data;

	*gpa = *size = 0;
	if (path == NULL)
		return 0;
	data = file_read_all(path, LOADER_INITRD_MAX, &len, err, errlen);
	if (data == NULL)
		return -1;
	*gpa = linux_initrd_addr(info, gm->lowmem_size, len);
	if (*gpa == 0 || gmem_write(gm, *gpa, data, len) < 0) {
		snprintf(err, errlen,
		         "initrd %s (%zu MiB) does not fit in guest memory with the kernel", path,
		         len >> 20);
		free(data);
		return -1;
	}
	*size = len;
	free(data);
	return 0;
}

static int load_kernel(const struct guest_mem *gm, const uint8_t *img,
                       const struct bzimage_info *info, const char *path, char *err, size_t errlen)
{
	if (kernel_end(info) > gm->lowmem_size ||
	    gmem_write(gm, LINUX_KERNEL_GPA, img + info->setup_size, info->kernel_size) < 0) {
		snprintf(err, errlen, "%s needs %llu MiB of guest memory below 3 GiB", path,
		         (unsigned long long)(kernel_end(info) >> 20) + 1);
		return -1;
	}
	return 0;
}

int bzimage_load(const struct guest_mem *gm, const uint8_t *img, size_t len,
                 const struct linux_boot *lb, const struct e820_map *map, uint64_t rsdp_gpa,
                 struct boot_cpu_state *cpu, char *err, size_t errlen)
{
	struct bzimage_info info;
	uint64_t initrd_gpa, initrd_size;
	uint8_t *zp;

	if (bzimage_parse(img, len, &info, err, errlen) < 0 ||
	    load_kernel(gm, img, &info, lb->kernel, err, errlen) < 0 ||
	    loader_write_cmdline(gm, lb->cmdline, info.cmdline_size, err, errlen) < 0 ||
	    load_initrd(gm, &info, lb->initrd, &initrd_gpa, &initrd_size, err, errlen) < 0)
		return -1;
	zp = gmem_ptr(gm, LINUX_ZERO_PAGE_GPA, ZP_SIZE, true);
	if (zp == NULL || write_gdt(gm) < 0 || write_page_tables(gm) < 0) {
		snprintf(err, errlen, "guest memory too small for the boot structures");
		return -1;
	}
	linux_build_zero_page(zp, img, &info, LINUX_CMDLINE_GPA, initrd_gpa, initrd_size, map,
	                      rsdp_gpa);
	if (fbuf_vga_text())
		linux_zp_vga_text(zp);
	*cpu = (struct boot_cpu_state){
	    .mode = BOOT_LONG64,
	    .rip = LINUX_KERNEL_GPA + 0x200, /* startup_64 */
	    .rsp = LINUX_STACK_GPA,
	    .rsi = LINUX_ZERO_PAGE_GPA,
	    .gdt_base = LINUX_GDT_GPA,
	    .gdt_limit = 4 * 8 - 1,
	    .cs = LINUX_BOOT_CS,
	    .ds = LINUX_BOOT_DS,
	    .cr3 = LINUX_PML4_GPA,
	};
	return 0;
}
