#include "boot/firmware.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot/acpi.h"
#include "boot/e820.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "dev/fw_cfg.h"
#include "dev/uart.h"
#include "lib/config.h"

#define FILE_RSDP   "etc/acpi/rsdp"
#define FILE_TABLES "etc/acpi/tables"
#define RSDP_LEN    36
#define TABLES_CAP  (128u << 10)
#define FOUR_GIB    (1ull << 32)

static void le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static int add_le(struct fw_cfg *fw, uint16_t key, uint64_t v, unsigned n)
{
	uint8_t b[8];

	le(b, v, n);
	return fw_cfg_add_item(fw, key, b, n);
}

static int add_file_le(struct fw_cfg *fw, const char *name, uint64_t v, unsigned n)
{
	uint8_t b[8];

	le(b, v, n);
	return fw_cfg_add_file(fw, name, b, n);
}

static int add_e820(struct fw_cfg *fw, uint64_t lowmem, uint64_t highmem,
                    const struct acpi_config *acpi)
{
	struct e820_map *map = calloc(1, sizeof(*map));
	int rc = -1;

	if (map == NULL)
		return -1;
	if (e820_add(map, 0, lowmem, E820_RAM) < 0)
		goto out;
	if (acpi != NULL && acpi->ecam_size > 0 &&
	    e820_add(map, acpi->ecam_base, acpi->ecam_size, E820_RESERVED) < 0)
		goto out;
	if (highmem > 0 && e820_add(map, FOUR_GIB, highmem, E820_RAM) < 0)
		goto out;
	rc = fw_cfg_add_file(fw, "etc/e820", map->entry, map->nentries * sizeof(map->entry[0]));
out:
	free(map);
	return rc;
}

/* One "bootorder" line: PREFIX@SLOT[,FUNC] and SUFFIX; -1 when full. */
static int bootorder_line(char *buf, size_t cap, size_t *len, const char *node,
                          const struct pci_func *f, const char *suffix)
{
	int n;

	if (f->func == 0)
		n = snprintf(buf + *len, cap - *len, "/pci@i0cf8/%s@%x%s\n", node, f->slot, suffix);
	else
		n = snprintf(buf + *len, cap - *len, "/pci@i0cf8/%s@%x,%x%s\n", node, f->slot,
		             f->func, suffix);
	if (n < 0 || (size_t)n >= cap - *len)
		return -1;
	*len += (size_t)n;
	return 0;
}

/* A NIC given a boot ROM (rom=, an iPXE image): the user asked for
 * network boot from it. */
static bool boot_nic(const struct pci_func *f)
{
	return (strcmp(f->de->name, "e1000") == 0 || strcmp(f->de->name, "virtio-net") == 0) &&
	       f->bar[PCI_NBARS].type == PCI_BAR_ROM;
}

/* The "bootorder" lines of function `f`: its disks (nics false) or, for a
 * NIC with a boot ROM, the NIC (nics true); -1 when the buffer is full. */
static int bootorder_lines(char *buf, size_t cap, size_t *len, const struct pci_func *f, bool nics)
{
	const char *name = f->de->name;

	if (nics)
		return boot_nic(f) ? bootorder_line(buf, cap, len, "ethernet", f, "") : 0;
	if (strcmp(name, "virtio-blk") == 0)
		return bootorder_line(buf, cap, len, "scsi", f, "");
	if (strcmp(name, "nvme") == 0)
		return bootorder_line(buf, cap, len, "nvme", f, "");
	if (strcmp(name, "ahci") != 0 && strcmp(name, "ahci-hd") != 0 &&
	    strcmp(name, "ahci-cd") != 0)
		return 0;
	for (unsigned port = 0; port < 32; port++) {
		char key[64], suffix[32];

		snprintf(key, sizeof(key), "pci.0.%u.%u.port.%u.type", f->slot, f->func, port);
		if (config_get(key) == NULL)
			continue;
		snprintf(suffix, sizeof(suffix), "/drive@%x/disk@0", port);
		if (bootorder_line(buf, cap, len, "sata", f, suffix) < 0)
			return -1;
	}
	return 0;
}

/* "bootorder": the disks and CD drives in slot order (AHCI ports in port
 * order), as QEMU names them, then the NICs that have a boot ROM
 * ("ethernet", as QEMU names a NIC with a bootindex).  SeaBIOS looks up
 * "/pci@i0cf8/ *@SLOT" for virtio-blk, NVMe and a ROM's boot entry and
 * "/pci@i0cf8/ *@SLOT/drive@PORT/disk@0" for AHCI ports; a pattern
 * matches a line it is a prefix of (up to a '/').  OVMF, once a line
 * matched, drops the boot options of the PCI devices the file does not
 * name (OvmfPkg QemuBootOrderLib, BootOrderComplete): without its line a
 * NIC's PXE option (iPXE's EFI driver from efi-e1000.rom) would be gone. */
static int add_bootorder(struct fw_cfg *fw)
{
	char buf[2048];
	size_t len = 0;
	int rc = 0;

	for (int nics = 0; nics < 2 && rc == 0; nics++)
		for (unsigned i = 0; i < pci_count() && rc == 0; i++) {
			const struct pci_func *f = pci_get(i);

			if (f != NULL && f->bus == 0 && f->de != NULL)
				rc = bootorder_lines(buf, sizeof(buf), &len, f, nics != 0);
		}
	return fw_cfg_add_file(fw, "bootorder", buf, len);
}

/* FW_CFG_SMBIOS_ENTRIES: le16 count, then per entry { le16 length (with
 * this 6-byte header), u8 0 = field, u8 SMBIOS type, le16 field offset }
 * and the field's bytes; SeaBIOS builds its own SMBIOS 2.x tables with
 * these fields overriding its defaults ("Bochs"). */
static int add_smbios_fields(struct fw_cfg *fw)
{
	static const struct {
		uint8_t type, offset;
		const char *str;
	} fields[] = {
	    {1, 4, "khyve"}, /* system manufacturer */
	    {1, 5, "khyve"}, /* product name */
	};
	uint8_t buf[128];
	size_t len = 2;

	le(buf, sizeof(fields) / sizeof(fields[0]), 2);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		size_t n = strlen(fields[i].str) + 1;

		le(buf + len, 6 + n, 2);
		buf[len + 2] = 0;
		buf[len + 3] = fields[i].type;
		le(buf + len + 4, fields[i].offset, 2);
		memcpy(buf + len + 6, fields[i].str, n);
		len += 6 + n;
	}
	return fw_cfg_add_item(fw, FW_CFG_SMBIOS_ENTRIES, buf, len);
}

/* FW_CFG_UUID from -U (bhyve's config key "uuid"): the 16 bytes in the
 * order the string writes them.  0, or -1 when it is not a UUID. */
static int add_uuid(struct fw_cfg *fw, const char *s)
{
	uint8_t uuid[16];
	unsigned n = 0;

	if (s == NULL)
		return 0;
	for (; *s != '\0'; s++) {
		int v;

		if (*s == '-')
			continue;
		if (*s >= '0' && *s <= '9')
			v = *s - '0';
		else if ((*s | 0x20) >= 'a' && (*s | 0x20) <= 'f')
			v = (*s | 0x20) - 'a' + 10;
		else
			return -1;
		if (n == 32)
			return -1;
		uuid[n / 2] = (uint8_t)((n % 2) ? (uuid[n / 2] | v) : v << 4);
		n++;
	}
	return n == 32 ? fw_cfg_add_item(fw, FW_CFG_UUID, uuid, sizeof(uuid)) : -1;
}

static uint8_t *loader_entry(uint8_t *loader, size_t *n, uint32_t cmd)
{
	uint8_t *e = loader + *n * LOADER_ENTRY_LEN;

	(*n)++;
	le(e, cmd, 4);
	return e;
}

static void loader_name(uint8_t *p, const char *name)
{
	memcpy(p, name, strlen(name)); /* NUL-padded: the entry is zeroed */
}

/* ACPI through QEMU's linker: both blobs come from one buffer built at
 * base 0, the RSDP (offset 0) going to its own FSEG blob. */
static int add_acpi(struct fw_cfg *fw, const struct acpi_config *acpi)
{
	uint8_t *tables = calloc(1, TABLES_CAP), *loader = NULL;
	struct acpi_links *links = calloc(1, sizeof(*links));
	uint8_t rsdp[RSDP_LEN];
	size_t used, n = 0;
	int rc = -1;

	if (tables == NULL || links == NULL)
		goto out;
	used = acpi_build_linked(tables, TABLES_CAP, acpi, links);
	if (used <= RSDP_LEN)
		goto out;
	loader = calloc(2 + links->nptr + links->nck, LOADER_ENTRY_LEN);
	if (loader == NULL)
		goto out;
	memcpy(rsdp, tables, RSDP_LEN);
	memset(tables, 0, RSDP_LEN);

	uint8_t *e = loader_entry(loader, &n, LOADER_ALLOCATE);
	loader_name(e + 4, FILE_RSDP);
	le(e + 60, 16, 4);
	e[64] = LOADER_ZONE_FSEG;
	e = loader_entry(loader, &n, LOADER_ALLOCATE);
	loader_name(e + 4, FILE_TABLES);
	le(e + 60, 64, 4); /* the FACS wants 64-byte alignment */
	e[64] = LOADER_ZONE_HIGH;
	for (unsigned i = 0; i < links->nptr; i++) {
		uint32_t off = links->ptr[i].offset;

		e = loader_entry(loader, &n, LOADER_ADD_POINTER);
		loader_name(e + 4, off < RSDP_LEN ? FILE_RSDP : FILE_TABLES);
		loader_name(e + 4 + LOADER_FILE_LEN, FILE_TABLES);
		le(e + 116, off, 4);
		e[120] = links->ptr[i].size;
	}
	for (unsigned i = 0; i < links->nck; i++) {
		e = loader_entry(loader, &n, LOADER_ADD_CHECKSUM);
		loader_name(e + 4, links->ck[i].start < RSDP_LEN ? FILE_RSDP : FILE_TABLES);
		le(e + 60, links->ck[i].offset, 4);
		le(e + 64, links->ck[i].start, 4);
		le(e + 68, links->ck[i].length, 4);
	}
	if (fw_cfg_add_file(fw, FILE_RSDP, rsdp, RSDP_LEN) == 0 &&
	    fw_cfg_add_file(fw, FILE_TABLES, tables, used) == 0 &&
	    fw_cfg_add_file(fw, "etc/table-loader", loader, n * LOADER_ENTRY_LEN) == 0)
		rc = 0;
out:
	free(loader);
	free(links);
	free(tables);
	return rc;
}

int firmware_fill_fw_cfg(struct fw_cfg *fw, uint64_t lowmem, uint64_t highmem, unsigned ncpus,
                         const struct acpi_config *acpi, char *err, size_t errlen)
{
	if (add_le(fw, FW_CFG_RAM_SIZE, lowmem + highmem, 8) < 0 ||
	    add_le(fw, FW_CFG_NB_CPUS, ncpus, 2) < 0 || add_le(fw, FW_CFG_MAX_CPUS, ncpus, 2) < 0 ||
	    add_le(fw, FW_CFG_BOOT_MENU, 0, 2) < 0 || add_le(fw, FW_CFG_NUMA, 0, 8) < 0 ||
	    add_le(fw, FW_CFG_IRQ0_OVERRIDE, 1, 4) < 0 ||
	    add_file_le(fw, "etc/boot-cpus", ncpus, 2) < 0 ||
	    add_e820(fw, lowmem, highmem, acpi) < 0 || add_bootorder(fw) < 0) {
		snprintf(err, errlen, "fw_cfg: cannot add the memory map and boot items");
		return -1;
	}
	if (add_smbios_fields(fw) < 0) {
		snprintf(err, errlen, "fw_cfg: cannot add the SMBIOS fields");
		return -1;
	}
	if (add_uuid(fw, config_get("uuid")) < 0) {
		snprintf(err, errlen, "uuid: '%s' is not a UUID", config_get("uuid"));
		return -1;
	}
	if (uart_console_port() != 0 &&
	    add_file_le(fw, "etc/sercon-port", uart_console_port(), 2) < 0) {
		snprintf(err, errlen, "fw_cfg: cannot add etc/sercon-port");
		return -1;
	}
	if (acpi != NULL && add_acpi(fw, acpi) < 0) {
		snprintf(err, errlen, "fw_cfg: cannot build the ACPI tables");
		return -1;
	}
	return 0;
}

int firmware_setup(struct machine *m, const struct acpi_config *acpi, char *err, size_t errlen)
{
	struct fw_cfg *fw = fw_cfg_machine_device();

	if (fw == NULL)
		return 0;
	return firmware_fill_fw_cfg(fw, m->vm.mem.lowmem_size, m->vm.mem.highmem_size, m->vm.ncpus,
	                            acpi, err, errlen);
}
