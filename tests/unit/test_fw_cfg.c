/* Unit tests for QEMU's fw_cfg device (src/dev/fw_cfg.h) and the items
 * khyve gives firmware through it (src/boot/firmware.h). */
#include "unit.h"

#include "boot/acpi.h"
#include "boot/e820.h"
#include "boot/firmware.h"
#include "dev/fw_cfg.h"
#include "bus/pci.h"
#include "dev/lpc.h"
#include "lib/config.h"
#include "vmm/mem.h"

#define RAM_SIZE (1u << 20)
#define DESC_GPA 0x1000u
#define BUF_GPA  0x2000u

struct fixture {
	struct guest_mem gm;
	uint8_t *ram;
	struct fw_cfg *fw;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	f->ram = calloc(1, RAM_SIZE);
	if (f->ram == NULL || gmem_add_region(&f->gm, 0, RAM_SIZE, f->ram, false) < 0)
		return -1;
	f->fw = fw_cfg_create(&f->gm);
	if (f->fw == NULL)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	fw_cfg_free(f->fw);
	free(f->ram);
	free(f);
	return 0;
}

static void sel(struct fixture *f, uint16_t key)
{
	uint64_t v = key;

	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_SEL, 2, true, &v), 0);
}

static uint8_t data8(struct fixture *f)
{
	uint64_t v = 0xdead;

	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DATA, 1, false, &v), 0);
	assert_true(v <= 0xff);
	return (uint8_t)v;
}

static void read_port(struct fixture *f, uint16_t key, uint8_t *buf, size_t len)
{
	sel(f, key);
	for (size_t i = 0; i < len; i++)
		buf[i] = data8(f);
}

static uint32_t be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Write a descriptor at DESC_GPA and start it as SeaBIOS does (high half
 * 0, then the low half, both big-endian); returns the control word after. */
static uint32_t dma_at(struct fixture *f, uint64_t desc_gpa, uint32_t ctl, uint32_t len,
                       uint64_t addr)
{
	uint8_t *d = f->ram + DESC_GPA;
	uint64_t hi = __builtin_bswap32((uint32_t)(desc_gpa >> 32));
	uint64_t lo = __builtin_bswap32((uint32_t)desc_gpa);

	put_be32(d, ctl);
	put_be32(d + 4, len);
	put_be32(d + 8, (uint32_t)(addr >> 32));
	put_be32(d + 12, (uint32_t)addr);
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DMA_HI, 4, true, &hi), 0);
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DMA_LO, 4, true, &lo), 0);
	return be32(d);
}

static uint32_t dma(struct fixture *f, uint32_t ctl, uint32_t len, uint64_t addr)
{
	return dma_at(f, DESC_GPA, ctl, len, addr);
}

static void test_signature_and_id(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[8];
	uint64_t v;

	read_port(f, FW_CFG_SIGNATURE, buf, 4);
	assert_memory_equal(buf, "QEMU", 4);
	read_port(f, FW_CFG_ID, buf, 4);
	assert_int_equal(buf[0], FW_CFG_ID_TRADITIONAL | FW_CFG_ID_DMA);
	assert_int_equal(buf[1] | buf[2] | buf[3], 0);
	/* The DMA register reads "QEMU CFG". */
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DMA_HI, 4, false, &v), 0);
	assert_int_equal(v, 0x554d4551); /* "QEMU" little-endian */
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DMA_LO, 4, false, &v), 0);
	assert_int_equal(v, 0x47464320); /* " CFG" */
	/* Signature through DMA with the select bit. */
	assert_int_equal(
	    dma(f, (FW_CFG_SIGNATURE << 16) | FW_CFG_DMA_SELECT | FW_CFG_DMA_READ, 4, BUF_GPA), 0);
	assert_memory_equal(f->ram + BUF_GPA, "QEMU", 4);
}

static void test_file_dir(void **state)
{
	struct fixture *f = *state;
	uint8_t dir[4 + 3 * 64];

	assert_int_equal(fw_cfg_add_file(f->fw, "etc/zz", "zzz", 3), 0);
	assert_int_equal(fw_cfg_add_file(f->fw, "bootorder", "", 0), 0);
	assert_int_equal(fw_cfg_add_file(f->fw, "etc/aa", "0123456789", 10), 0);
	/* Regression: replacing a file left its old size in the directory. */
	assert_int_equal(fw_cfg_add_file(f->fw, "etc/aa", "01234", 5), 0);
	read_port(f, FW_CFG_FILE_DIR, dir, sizeof(dir));
	assert_int_equal(be32(dir), 3);
	/* name order, selectors from 0x20, big-endian size and select */
	assert_string_equal((char *)dir + 4 + 8, "bootorder");
	assert_int_equal(be32(dir + 4), 0);
	assert_int_equal((dir[4 + 4] << 8) | dir[4 + 5], 0x20);
	assert_string_equal((char *)dir + 68 + 8, "etc/aa");
	assert_int_equal(be32(dir + 68), 5);
	assert_int_equal((dir[68 + 4] << 8) | dir[68 + 5], 0x21);
	assert_string_equal((char *)dir + 132 + 8, "etc/zz");
	assert_int_equal((dir[132 + 4] << 8) | dir[132 + 5], 0x22);
	/* the file itself, then zeros past its end */
	uint8_t buf[7];
	read_port(f, 0x21, buf, sizeof(buf));
	assert_memory_equal(buf, "01234\0\0", 7);
	/* bad names */
	char longname[80];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(fw_cfg_add_file(f->fw, longname, "", 0), -1);
	assert_int_equal(fw_cfg_add_file(f->fw, "", "", 0), -1);
	assert_int_equal(fw_cfg_add_item(f->fw, 0x20, "", 0), -1);
	assert_int_equal(fw_cfg_add_item(f->fw, FW_CFG_SIGNATURE, "", 0), -1);
}

static void fill_acpi(struct acpi_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->ncpus = 2;
	cfg->apic_id[1] = 1;
	config_set("lpc.com1.path", "stdio");
	cfg->ecam_base = 0xe0000000;
	cfg->ecam_size = 0x10000000;
	cfg->mmio32_base = 0xc0000000;
	cfg->mmio32_end = 0xe0000000;
	cfg->io_base = 0x2000;
	cfg->io_end = 0xffff;
}

static void test_items_and_e820(void **state)
{
	struct fixture *f = *state;
	struct acpi_config *cfg = malloc(sizeof(*cfg));
	char err[128] = "";
	uint8_t buf[8];
	size_t len;
	const uint8_t *p;
	struct e820_entry e[3];

	assert_non_null(cfg);
	fill_acpi(cfg);
	assert_int_equal(
	    firmware_fill_fw_cfg(f->fw, 256u << 20, 1ull << 30, 2, cfg, err, sizeof(err)), 0);
	free(cfg);
	read_port(f, FW_CFG_RAM_SIZE, buf, 8);
	assert_true(buf[3] == 0x50 && (buf[0] | buf[1] | buf[2] | buf[4] | buf[5]) == 0);
	read_port(f, FW_CFG_NB_CPUS, buf, 2);
	assert_int_equal(buf[0] | (buf[1] << 8), 2);
	read_port(f, FW_CFG_MAX_CPUS, buf, 2);
	assert_int_equal(buf[0] | (buf[1] << 8), 2);

	p = fw_cfg_file(f->fw, "etc/e820", &len);
	assert_non_null(p);
	assert_int_equal(len, 3 * 20);
	memcpy(e, p, sizeof(e));
	assert_true(e[0].addr == 0 && e[0].size == (256u << 20) && e[0].type == E820_RAM);
	assert_true(e[1].addr == 0xe0000000 && e[1].size == 0x10000000 &&
	            e[1].type == E820_RESERVED);
	assert_true(e[2].addr == (1ull << 32) && e[2].size == (1ull << 30) &&
	            e[2].type == E820_RAM);
	p = fw_cfg_file(f->fw, "etc/sercon-port", &len);
	assert_non_null(p);
	assert_int_equal(len, 2);
	assert_int_equal(p[0] | (p[1] << 8), 0x3f8);
	assert_non_null(fw_cfg_file(f->fw, "bootorder", NULL));

	/* etc/e820 through DMA, by its directory selector */
	uint8_t dir[4 + 64 * FW_CFG_MAX_FILES];
	uint16_t key = 0;
	read_port(f, FW_CFG_FILE_DIR, dir, sizeof(dir));
	for (unsigned i = 0; i < be32(dir); i++)
		if (strcmp((char *)dir + 4 + 64 * i + 8, "etc/e820") == 0)
			key = (uint16_t)((dir[4 + 64 * i + 4] << 8) | dir[4 + 64 * i + 5]);
	assert_int_not_equal(key, 0);
	assert_int_equal(
	    dma(f, ((uint32_t)key << 16) | FW_CFG_DMA_SELECT | FW_CFG_DMA_READ, 60, BUF_GPA), 0);
	assert_memory_equal(f->ram + BUF_GPA, e, sizeof(e));
}

/* Run etc/table-loader as firmware would, then check the tables. */
static void test_acpi_table_loader(void **state)
{
	struct fixture *f = *state;
	struct acpi_config *cfg = malloc(sizeof(*cfg));
	char err[128];
	size_t llen, rlen, tlen;
	const uint8_t *loader, *rsdp0, *tables0;
	uint8_t *rsdp, *tables;
	const uint64_t rsdp_gpa = 0xf0000, tables_gpa = 0x7f000000;

	assert_non_null(cfg);
	fill_acpi(cfg);
	assert_int_equal(firmware_fill_fw_cfg(f->fw, 256u << 20, 0, 2, cfg, err, sizeof(err)), 0);
	free(cfg);
	loader = fw_cfg_file(f->fw, "etc/table-loader", &llen);
	rsdp0 = fw_cfg_file(f->fw, "etc/acpi/rsdp", &rlen);
	tables0 = fw_cfg_file(f->fw, "etc/acpi/tables", &tlen);
	assert_non_null(loader);
	assert_non_null(rsdp0);
	assert_non_null(tables0);
	assert_int_equal(rlen, 36);
	assert_int_equal(llen % LOADER_ENTRY_LEN, 0);
	rsdp = malloc(rlen);
	tables = malloc(tlen);
	memcpy(rsdp, rsdp0, rlen);
	memcpy(tables, tables0, tlen);
	for (size_t off = 0; off < llen; off += LOADER_ENTRY_LEN) {
		const uint8_t *e = loader + off;
		uint32_t cmd = e[0] | (e[1] << 8);
		const char *file = (const char *)e + 4;
		uint8_t *blob = strcmp(file, "etc/acpi/rsdp") == 0 ? rsdp : tables;
		size_t blen = blob == rsdp ? rlen : tlen;

		if (cmd == LOADER_ALLOCATE) {
			assert_true(e[64] == (blob == rsdp ? LOADER_ZONE_FSEG : LOADER_ZONE_HIGH));
		} else if (cmd == LOADER_ADD_POINTER) {
			uint32_t at;
			uint8_t size = e[120];
			uint64_t v = 0;

			memcpy(&at, e + 116, 4);
			assert_string_equal((const char *)e + 60, "etc/acpi/tables");
			assert_true(at + size <= blen);
			memcpy(&v, blob + at, size);
			v += tables_gpa;
			memcpy(blob + at, &v, size);
		} else if (cmd == LOADER_ADD_CHECKSUM) {
			uint32_t at, start, length;

			memcpy(&at, e + 60, 4);
			memcpy(&start, e + 64, 4);
			memcpy(&length, e + 68, 4);
			assert_true(start + length <= blen && at < blen);
			blob[at] = (uint8_t)(blob[at] - acpi_checksum(blob + start, length));
		} else {
			fail_msg("unknown loader command %u", cmd);
		}
	}
	(void)rsdp_gpa;
	assert_memory_equal(rsdp, "RSD PTR ", 8);
	assert_int_equal(acpi_checksum(rsdp, 20), 0);
	assert_int_equal(acpi_checksum(rsdp, 36), 0);
	uint64_t xsdt;
	memcpy(&xsdt, rsdp + 24, 8);
	assert_true(xsdt >= tables_gpa && xsdt < tables_gpa + tlen);
	const uint8_t *x = tables + (xsdt - tables_gpa);
	uint32_t xlen;
	memcpy(&xlen, x + 4, 4);
	assert_memory_equal(x, "XSDT", 4);
	assert_int_equal(acpi_checksum(x, xlen), 0);
	for (uint32_t i = 36; i < xlen; i += 8) {
		uint64_t t;
		uint32_t len;

		memcpy(&t, x + i, 8);
		assert_true(t >= tables_gpa && t + 36 <= tables_gpa + tlen);
		memcpy(&len, tables + (t - tables_gpa) + 4, 4);
		assert_int_equal(acpi_checksum(tables + (t - tables_gpa), len), 0);
		if (memcmp(tables + (t - tables_gpa), "FACP", 4) == 0) {
			uint64_t dsdt;

			memcpy(&dsdt, tables + (t - tables_gpa) + 140, 8);
			assert_memory_equal(tables + (dsdt - tables_gpa), "DSDT", 4);
		}
	}
	free(rsdp);
	free(tables);
}

static void test_malformed_port_access(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[16];
	uint64_t v;

	/* unknown selectors read as zeros, as does the write channel of one */
	read_port(f, 0x7fff, buf, 4);
	assert_int_equal(buf[0] | buf[1] | buf[2] | buf[3], 0);
	read_port(f, 0xffff, buf, 4);
	assert_int_equal(buf[0] | buf[1] | buf[2] | buf[3], 0);
	read_port(f, 0x20 + FW_CFG_MAX_FILES, buf, 4);
	assert_int_equal(buf[0] | buf[1] | buf[2] | buf[3], 0);
	/* reading far past the end keeps returning zeros */
	sel(f, FW_CFG_SIGNATURE);
	for (unsigned i = 0; i < 10000; i++)
		v = data8(f);
	assert_int_equal(v, 0);
	/* writes to the data port, odd sizes and offsets: ignored */
	v = 0x41;
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DATA, 1, true, &v), 0);
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DMA_LO, 1, true, &v), 0);
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DMA_HI, 2, true, &v), 0);
	assert_int_equal(fw_cfg_access(f->fw, 2, 2, false, &v), 0);
	assert_int_equal(fw_cfg_access(f->fw, 11, 4, false, &v), 0);
	assert_int_equal(fw_cfg_access(f->fw, 12, 4, false, &v), 0);
	read_port(f, FW_CFG_SIGNATURE, buf, 4);
	assert_memory_equal(buf, "QEMU", 4);
}

static void test_malformed_dma(void **state)
{
	struct fixture *f = *state;
	const uint32_t rd = (FW_CFG_SIGNATURE << 16) | FW_CFG_DMA_SELECT | FW_CFG_DMA_READ;
	uint64_t v;

	/* buffer outside RAM, straddling its end, wrapping around */
	assert_int_equal(dma(f, rd, 4, 0x80000000ull), FW_CFG_DMA_ERROR);
	assert_int_equal(dma(f, rd, 16, RAM_SIZE - 8), FW_CFG_DMA_ERROR);
	assert_int_equal(dma(f, rd, 0xffffffffu, BUF_GPA), FW_CFG_DMA_ERROR);
	assert_int_equal(dma(f, rd, 0x200, 0xffffffffffffff00ull), FW_CFG_DMA_ERROR);
	/* a huge read that fits RAM: the item, then zeros */
	memset(f->ram + BUF_GPA, 0xaa, 64);
	assert_int_equal(dma(f, rd, RAM_SIZE - BUF_GPA, BUF_GPA), 0);
	assert_memory_equal(f->ram + BUF_GPA, "QEMU\0\0\0\0", 8);
	/* unknown control bits, a preset error bit, writes */
	assert_int_equal(dma(f, FW_CFG_DMA_READ | 0x20, 4, BUF_GPA), FW_CFG_DMA_ERROR);
	assert_int_equal(dma(f, FW_CFG_DMA_READ | 0x8000, 4, BUF_GPA), FW_CFG_DMA_ERROR);
	assert_int_equal(dma(f, FW_CFG_DMA_READ | FW_CFG_DMA_ERROR, 4, BUF_GPA), FW_CFG_DMA_ERROR);
	assert_int_equal(
	    dma(f, (FW_CFG_ID << 16) | FW_CFG_DMA_SELECT | FW_CFG_DMA_WRITE, 4, BUF_GPA),
	    FW_CFG_DMA_ERROR);
	/* skip past the end then read: zeros; a zero-length read is fine */
	assert_int_equal(
	    dma(f, (FW_CFG_SIGNATURE << 16) | FW_CFG_DMA_SELECT | FW_CFG_DMA_SKIP, 0xffffffffu, 0),
	    0);
	memset(f->ram + BUF_GPA, 0xaa, 4);
	assert_int_equal(dma(f, FW_CFG_DMA_READ, 4, BUF_GPA), 0);
	assert_memory_equal(f->ram + BUF_GPA, "\0\0\0\0", 4);
	assert_int_equal(dma(f, rd, 0, 0xffffffffffff0000ull), 0);
	/* the descriptor itself outside RAM or across its end: ignored */
	v = __builtin_bswap32(0x7ffffff0u);
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DMA_LO, 4, true, &v), 0);
	v = __builtin_bswap32(RAM_SIZE - 8);
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DMA_LO, 4, true, &v), 0);
	v = __builtin_bswap32(0xffffffffu);
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DMA_HI, 4, true, &v), 0);
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DMA_LO, 4, true, &v), 0);
	/* the high half is consumed by each transfer */
	assert_int_equal(dma_at(f, DESC_GPA, rd, 4, BUF_GPA), 0);
	/* a 64-bit write of the whole address starts a transfer too */
	memset(f->ram + BUF_GPA, 0, 4);
	put_be32(f->ram + DESC_GPA, rd);
	v = __builtin_bswap64(DESC_GPA);
	assert_int_equal(fw_cfg_access(f->fw, FW_CFG_OFF_DMA_HI, 8, true, &v), 0);
	assert_int_equal(be32(f->ram + DESC_GPA), 0);
	assert_memory_equal(f->ram + BUF_GPA, "QEMU", 4);
}

/* SMBIOS fields and -U. */
static void test_smbios_and_uuid(void **state)
{
	struct fixture *f = *state;
	char err[128] = "";
	uint8_t buf[64];

	config_reset();
	assert_int_equal(config_set("uuid", "12345678-9abc-DEF0-1234-56789abcdef0"), 0);
	assert_int_equal(firmware_fill_fw_cfg(f->fw, 64u << 20, 0, 1, NULL, err, sizeof(err)), 0);
	read_port(f, FW_CFG_UUID, buf, 16);
	assert_memory_equal(buf, "\x12\x34\x56\x78\x9a\xbc\xde\xf0\x12\x34\x56\x78\x9a\xbc\xde\xf0",
	                    16);
	/* count 2; first: length 12, field, type 1, offset 4, "khyve\0" */
	read_port(f, FW_CFG_SMBIOS_ENTRIES, buf, 14);
	assert_int_equal(buf[0] | (buf[1] << 8), 2);
	assert_int_equal(buf[2] | (buf[3] << 8), 12);
	assert_int_equal(buf[4], 0);
	assert_int_equal(buf[5], 1);
	assert_int_equal(buf[6] | (buf[7] << 8), 4);
	assert_memory_equal(buf + 8, "khyve", 6);
	assert_int_equal(config_set("uuid", "12345678-9abc-def0-1234-56789abcdef"), 0);
	assert_int_equal(firmware_fill_fw_cfg(f->fw, 64u << 20, 0, 1, NULL, err, sizeof(err)), -1);
	assert_contains(err, "uuid");
	assert_int_equal(config_set("uuid", "12345678-9abc-def0-1234-56789abcdef0a"), 0);
	assert_int_equal(firmware_fill_fw_cfg(f->fw, 64u << 20, 0, 1, NULL, err, sizeof(err)), -1);
	assert_int_equal(config_set("uuid", "g2345678-9abc-def0-1234-56789abcdef0"), 0);
	assert_int_equal(firmware_fill_fw_cfg(f->fw, 64u << 20, 0, 1, NULL, err, sizeof(err)), -1);
	config_reset();
}

/* -l fwcfg[,MODE] as bhyve: lpc.fwcfg=qemu by default. */
static void test_lpc_option(void **state)
{
	char err[256];

	(void)state;
	config_reset();
	assert_int_equal(lpc_parse_option("fwcfg", err, sizeof(err)), 0);
	assert_string_equal(config_get("lpc.fwcfg"), "qemu");
	/* A second -l fwcfg is refused (it would replace the first). */
	assert_int_equal(lpc_parse_option("fwcfg,none", err, sizeof(err)), -1);
	config_reset();
	assert_int_equal(lpc_parse_option("fwcfg,none", err, sizeof(err)), 0);
	assert_string_equal(config_get("lpc.fwcfg"), "none");
	config_reset();
}

/* -s 0,i440fx: the IDs SeaBIOS looks for, PAM bytes kept, the rest generic. */
static void test_i440fx(void **state)
{
	const struct pci_devemu *de = pci_devemu_find("i440fx");
	struct pci_func *f = calloc(1, sizeof(*f));
	char err[128];

	(void)state;
	assert_non_null(de);
	assert_non_null(f);
	f->de = de;
	assert_int_equal(de->init(NULL, f, NULL, err, sizeof(err)), 0);
	assert_int_equal(pci_get_cfg(f, PCIR_VENDOR, 2), 0x8086);
	assert_int_equal(pci_get_cfg(f, PCIR_DEVICE, 2), 0x1237);
	assert_int_equal(pci_get_cfg(f, PCIR_SUBVEND, 2), 0x1af4);
	assert_int_equal(pci_get_cfg(f, PCIR_SUBDEV, 2), 0x1100);
	/* SeaBIOS writes PAM0-6 as two dwords from 0x58 */
	assert_int_equal(de->cfg_write(f, 0x58, 4, 0x33333055), 0);
	assert_int_equal(de->cfg_write(f, 0x5c, 4, 0x33333333), 0);
	assert_int_equal(pci_get_cfg(f, 0x58, 4), 0x33333000);
	assert_int_equal(pci_get_cfg(f, 0x5c, 4), 0x33333333);
	assert_int_equal(de->cfg_write(f, 0x60, 4, 0x12345678), -1);
	assert_int_equal(de->cfg_write(f, PCIR_COMMAND, 2, 0x7), -1);
	free(f);
}

/* ---- saved state (fw_cfg_state_ops) ---- */

/* The same items as a machine built from the same options would have. */
static struct fw_cfg *items_like(struct fixture *f, const char *a_text)
{
	struct fw_cfg *fw = fw_cfg_create(&f->gm);
	uint8_t ncpus[2] = {2, 0};

	assert_non_null(fw);
	assert_int_equal(fw_cfg_add_file(fw, "etc/b", "xyz", 3), 0);
	assert_int_equal(fw_cfg_add_file(fw, "etc/a", a_text, strlen(a_text)), 0);
	assert_int_equal(fw_cfg_add_item(fw, FW_CFG_NB_CPUS, ncpus, sizeof(ncpus)), 0);
	return fw;
}

static void save_fw(struct fw_cfg *fw, struct sbuf *b)
{
	char err[128] = "";

	*b = (struct sbuf){0};
	assert_int_equal(fw_cfg_state_ops.save(fw, b, err, sizeof(err)), 0);
	assert_false(b->failed);
	assert_int_equal(b->len, 2 + 2 + 4 + 4 + 32);
}

static int restore_fw(struct fw_cfg *fw, const uint8_t *p, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader r;

	sbuf_reader_init(&r, p, len);
	if (fw_cfg_state_ops.restore(fw, &r, err, errlen) < 0)
		return -1;
	return sbuf_reader_done(&r, "lpc.fw_cfg", err, errlen);
}

static uint8_t data8_of(struct fw_cfg *fw)
{
	uint64_t v = 0;

	assert_int_equal(fw_cfg_access(fw, FW_CFG_OFF_DATA, 1, false, &v), 0);
	return (uint8_t)v;
}

static void test_state_round_trip(void **state)
{
	struct fixture *f = *state;
	struct fw_cfg *src = items_like(f, "hello world"), *dst = items_like(f, "hello world");
	struct fw_cfg *other = items_like(f, "hello worle"), *fewer = fw_cfg_create(&f->gm);
	uint64_t v = FW_CFG_FILE_FIRST; /* etc/a: files are in name order */
	struct sbuf b;
	char err[128] = "";

	assert_non_null(fewer);
	assert_int_equal(fw_cfg_access(src, FW_CFG_OFF_SEL, 2, true, &v), 0);
	for (int i = 0; i < 4; i++)
		(void)data8_of(src); /* a guest caught mid-read: "hell" */
	save_fw(src, &b);
	assert_int_equal(restore_fw(dst, b.data, b.len, err, sizeof(err)), 0);
	/* The read goes on where it was, in both. */
	for (const char *c = "o world"; *c != '\0'; c++) {
		assert_int_equal(data8_of(src), *c);
		assert_int_equal(data8_of(dst), *c);
	}
	assert_int_equal(data8_of(dst), 0); /* past the end */
	/* Other items (one byte of a file, or no files at all): refused. */
	assert_int_equal(restore_fw(other, b.data, b.len, err, sizeof(err)), -1);
	assert_contains(err, "fw_cfg items differ from the saved machine");
	assert_int_equal(restore_fw(fewer, b.data, b.len, err, sizeof(err)), -1);
	assert_contains(err, "fw_cfg items differ");
	/* The refused device was left as it was: selector 0, the signature. */
	assert_int_equal(data8_of(other), 'Q');
	sbuf_free(&b);
	fw_cfg_free(src);
	fw_cfg_free(dst);
	fw_cfg_free(other);
	fw_cfg_free(fewer);
}

static void test_state_hostile(void **state)
{
	struct fixture *f = *state;
	struct fw_cfg *src = items_like(f, "hello world"), *dst = items_like(f, "hello world");
	uint64_t v = FW_CFG_FILE_FIRST + 1; /* etc/b, 3 bytes */
	struct sbuf b;
	uint8_t bad[64];
	char err[128];

	assert_int_equal(fw_cfg_access(src, FW_CFG_OFF_SEL, 2, true, &v), 0);
	(void)data8_of(src);
	save_fw(src, &b);
	for (size_t n = 0; n < b.len; n++)
		assert_int_equal(restore_fw(dst, b.data, n, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	bad[1] = 1; /* version 257 */
	assert_int_equal(restore_fw(dst, bad, b.len, err, sizeof(err)), -1);
	/* An offset past the selected item's 3 bytes (offset 4 of the section). */
	memcpy(bad, b.data, b.len);
	unit_put_le(bad + 4, 4, 4);
	assert_int_equal(restore_fw(dst, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "offset 4 past the end of item 0x0021");
	/* An unknown selector reads as empty: only offset 0 fits it. */
	unit_put_le(bad + 2, 0x1234, 2);
	assert_int_equal(restore_fw(dst, bad, b.len, err, sizeof(err)), -1);
	unit_put_le(bad + 4, 0, 4);
	assert_int_equal(restore_fw(dst, bad, b.len, err, sizeof(err)), 0);
	assert_int_equal(data8_of(dst), 0);
	sbuf_free(&b);
	fw_cfg_free(src);
	fw_cfg_free(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_signature_and_id, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_file_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_items_and_e820, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_acpi_table_loader, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_malformed_port_access, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_malformed_dma, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_smbios_and_uuid, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_hostile, setup, teardown),
	    cmocka_unit_test(test_lpc_option),
	    cmocka_unit_test(test_i440fx),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
