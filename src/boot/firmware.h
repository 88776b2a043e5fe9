/*
 * What firmware booted from a ROM (SeaBIOS, OVMF) gets through QEMU's fw_cfg
 * (dev/fw_cfg.h): the legacy items FW_CFG_RAM_SIZE (0x03, le64 bytes),
 * FW_CFG_NB_CPUS (0x05, le16), FW_CFG_MAX_CPUS (0x0f, le16),
 * FW_CFG_BOOT_MENU (0x0e, 0: no menu), FW_CFG_NUMA (0x0d, no nodes),
 * FW_CFG_IRQ0_OVERRIDE, FW_CFG_UUID (0x02, 16 bytes, from -U / "uuid"),
 * FW_CFG_SMBIOS_ENTRIES (0x8001: legacy SMBIOS fields, manufacturer and
 * product "khyve", which SeaBIOS puts into the SMBIOS tables it builds),
 * and the files
 *   etc/e820          the memory map, 20-byte little-endian entries
 *                     {u64 address, u64 length, u32 type}: RAM below the
 *                     hole, the ECAM window reserved, RAM above 4 GiB
 *   etc/boot-cpus     le16, the vCPUs SeaBIOS waits for
 *   bootorder         one OpenFirmware path per line for the disks and
 *                     CD drives (virtio-blk, nvme, ahci*, each AHCI port
 *                     as .../drive@PORT/disk@0) in slot order
 *   etc/sercon-port   le16 0x3f8 when com1 is configured: SeaBIOS's
 *                     text console (int 10h) goes to COM1
 *   etc/acpi/rsdp, etc/acpi/tables, etc/table-loader
 *                     the tables of boot/acpi.c (FADT, FACS, DSDT, MADT,
 *                     MCFG, RSDT, XSDT) and QEMU's BIOS linker script
 *                     (ALLOCATE / ADD_POINTER / ADD_CHECKSUM, 128-byte
 *                     commands) so the firmware places and links them
 */
#ifndef KHYVE_FIRMWARE_H
#define KHYVE_FIRMWARE_H

#include <stddef.h>
#include <stdint.h>

struct acpi_config;
struct fw_cfg;
struct machine;

/* Table-loader commands and zones (QEMU hw/acpi/bios-linker-loader.c). */
#define LOADER_ALLOCATE     1
#define LOADER_ADD_POINTER  2
#define LOADER_ADD_CHECKSUM 3
#define LOADER_ZONE_HIGH    1
#define LOADER_ZONE_FSEG    2
#define LOADER_ENTRY_LEN    128
#define LOADER_FILE_LEN     56

/*
 * Fill `fw` for a VM with `memsize` bytes of RAM split `lowmem`/`highmem`,
 * `ncpus` vCPUs and the ACPI description `acpi`.  0, or -1 with a one-line
 * reason in `err`.
 */
int firmware_fill_fw_cfg(struct fw_cfg *fw, uint64_t lowmem, uint64_t highmem, unsigned ncpus,
                         const struct acpi_config *acpi, char *err, size_t errlen);

/* firmware_fill_fw_cfg() for the running VM's fw_cfg device, when it has
 * one (lpc.fwcfg); 0 or -1. */
int firmware_setup(struct machine *m, const struct acpi_config *acpi, char *err, size_t errlen);

#endif
