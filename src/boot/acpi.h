/*
 * ACPI tables for direct (firmware-less) boot, ACPI 6.4: RSDP, XSDT, RSDT,
 * FADT (revision 6), FACS, MADT and a DSDT holding \_S5 and the legacy
 * devices.  The power button is the FADT's fixed-feature button (bhyve does
 * the same); the SCI is IRQ 9, level-triggered, active high.
 */
#ifndef KHYVE_ACPI_H
#define KHYVE_ACPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ACPI_TABLES_GPA  0xe0000ull /* RSDP must be in 0xE0000-0xFFFFF */
#define ACPI_TABLES_SIZE 0x20000ull

#define ACPI_MAX_CPUS    288

struct aml;

struct acpi_config {
	unsigned ncpus;
	uint32_t apic_id[ACPI_MAX_CPUS]; /* per vCPU, in vCPU order */
	/* Optional: the legacy (LPC/ISA) devices' AML inside \_SB
	 * (lpc_write_dsdt: serial ports, RTC). */
	void (*lpc_dsdt)(struct aml *a, void *arg);
	void *lpc_dsdt_arg;
	/* The PCI root bridge \_SB.PCI0 and the MCFG table. */
	uint64_t ecam_base, ecam_size;    /* guest-physical; size 0: no PCI */
	uint32_t mmio32_base, mmio32_end; /* [base, end) */
	uint64_t mmio64_base, mmio64_size;
	uint16_t io_base, io_end; /* [base, end) */
	/* Optional: more AML inside PCI0 (device-specific objects). */
	void (*pci_dsdt)(struct aml *a, void *arg);
	void *pci_dsdt_arg;
	/* A legacy VGA exists (fbuf vga=on|io): the FADT's IAPC_BOOT_ARCH
	 * then clears "VGA Not Present" (ACPI 6.4 table 5.11). */
	bool legacy_vga;
	/* A TPM 2.0 behind the CRB interface (dev/tpm_crb.h): the guest-
	 * physical address of its control area, for the TPM2 table; 0 for
	 * none. */
	uint64_t tpm2_control_area;
};

/*
 * Build all tables into `buf` (`cap` bytes) as they will sit in guest memory
 * at guest-physical `base`.  The RSDP comes first, at `base`.  Returns the
 * number of bytes used, or 0 when `cap` is too small or building failed.
 */
size_t acpi_build(uint8_t *buf, size_t cap, uint64_t base, const struct acpi_config *cfg);

/*
 * What a firmware linker needs to place the tables anywhere (QEMU's
 * "etc/table-loader" ADD_POINTER / ADD_CHECKSUM commands): every pointer
 * field (`size` bytes, little-endian, holding an offset into the buffer
 * until the loader adds the buffer's address) and every checksum byte.
 */
#define ACPI_MAX_LINKS 32

struct acpi_links {
	struct {
		uint32_t offset; /* of the pointer field in the buffer, bytes */
		uint8_t size;    /* 4 or 8 */
	} ptr[ACPI_MAX_LINKS];
	unsigned nptr;
	struct {
		uint32_t offset;        /* of the checksum byte */
		uint32_t start, length; /* the bytes that must sum to 0 */
	} ck[ACPI_MAX_LINKS];
	unsigned nck;
};

/*
 * As acpi_build() at base 0 (the RSDP at offset 0, so every pointer is an
 * offset into `buf`), recording pointers and checksums in `links`.
 * Returns the bytes used, or 0.
 */
size_t acpi_build_linked(uint8_t *buf, size_t cap, const struct acpi_config *cfg,
                         struct acpi_links *links);

/* Sum of `len` bytes mod 256 (a valid table sums to 0). */
uint8_t acpi_checksum(const void *p, size_t len);

#endif
