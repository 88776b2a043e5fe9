#include "boot/acpi.h"

#include <string.h>

#include "lib/aml.h"
#include "dev/pm.h"
#include "vmm/kvm.h"

#define OEM_ID       "KHYVE "
#define OEM_TABLE_ID "KHYVEVM "
#define CREATOR_ID   "KHYV"

#define HDR_LEN      36 /* the common System Description Table header */

/* Generic Address Structure space IDs (ACPI 6.4 section 5.2.3.2). */
#define GAS_SYSTEM_IO 1

/* FADT flags (ACPI 6.4 table 5.10). */
#define FADT_WBINVD        (1u << 0)
#define FADT_PROC_C1       (1u << 2)
#define FADT_SLP_BUTTON    (1u << 5) /* no fixed-feature sleep button */
#define FADT_TMR_VAL_EXT   (1u << 8) /* 32-bit PM timer */
#define FADT_RESET_REG_SUP (1u << 10)

/* IA-PC boot architecture flags: no VGA, no CMOS RTC quirks; an 8042. */
#define IAPC_8042            (1u << 1)
#define IAPC_VGA_NOT_PRESENT (1u << 2)

/* MADT structure types. */
#define MADT_LAPIC       0
#define MADT_IOAPIC      1
#define MADT_OVERRIDE    2
#define MADT_LAPIC_NMI   4
#define MADT_X2APIC      9
#define MADT_X2APIC_NMI  10
#define MADT_PCAT_COMPAT 1u

/* A little-endian writer over the output buffer. */
struct tbuf {
	uint8_t *buf;
	size_t cap;
	size_t len;
	uint64_t base; /* guest-physical address of buf[0] */
	bool overflow;
	struct acpi_links *links; /* optional: where pointers and checksums are */
};

static void put(struct tbuf *t, size_t off, uint64_t v, unsigned n)
{
	if (off + n > t->cap) {
		t->overflow = true;
		return;
	}
	for (unsigned i = 0; i < n; i++)
		t->buf[off + i] = (uint8_t)(v >> (8 * i));
}

static void put_bytes(struct tbuf *t, size_t off, const void *p, size_t n)
{
	if (off + n > t->cap) {
		t->overflow = true;
		return;
	}
	memcpy(t->buf + off, p, n);
}

/* Reserve `len` zeroed bytes aligned to `align`; returns their offset. */
static size_t alloc(struct tbuf *t, size_t len, size_t align)
{
	size_t off = (t->len + align - 1) & ~(align - 1);

	if (off + len > t->cap) {
		t->overflow = true;
		return 0;
	}
	memset(t->buf + off, 0, len);
	t->len = off + len;
	return off;
}

static uint64_t gpa_of(const struct tbuf *t, size_t off)
{
	return t->base + off;
}

/* Store the address of buf[target] in the `n`-byte field at `off`, and
 * remember the field for a firmware linker (acpi_build_linked). */
static void put_ptr(struct tbuf *t, size_t off, size_t target, unsigned n)
{
	struct acpi_links *l = t->links;

	put(t, off, gpa_of(t, target), n);
	if (l == NULL)
		return;
	if (l->nptr == ACPI_MAX_LINKS) {
		t->overflow = true;
		return;
	}
	l->ptr[l->nptr].offset = (uint32_t)off;
	l->ptr[l->nptr].size = (uint8_t)n;
	l->nptr++;
}

/* Remember that the byte at `off` makes [start, start+len) sum to 0. */
static void note_checksum(struct tbuf *t, size_t off, size_t start, size_t len)
{
	struct acpi_links *l = t->links;

	if (l == NULL)
		return;
	if (l->nck == ACPI_MAX_LINKS) {
		t->overflow = true;
		return;
	}
	l->ck[l->nck].offset = (uint32_t)off;
	l->ck[l->nck].start = (uint32_t)start;
	l->ck[l->nck].length = (uint32_t)len;
	l->nck++;
}

uint8_t acpi_checksum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint8_t sum = 0;

	for (size_t i = 0; i < len; i++)
		sum = (uint8_t)(sum + b[i]);
	return sum;
}

static void header(struct tbuf *t, size_t off, const char *sig, uint32_t len, uint8_t rev)
{
	put_bytes(t, off, sig, 4);
	put(t, off + 4, len, 4);
	put(t, off + 8, rev, 1);
	put_bytes(t, off + 10, OEM_ID, 6);
	put_bytes(t, off + 16, OEM_TABLE_ID, 8);
	put(t, off + 24, 1, 4);
	put_bytes(t, off + 28, CREATOR_ID, 4);
	put(t, off + 32, 1, 4);
}

static void finish(struct tbuf *t, size_t off, size_t len)
{
	if (t->overflow)
		return;
	t->buf[off + 9] = 0;
	t->buf[off + 9] = (uint8_t)(0 - acpi_checksum(t->buf + off, len));
	note_checksum(t, off + 9, off, len);
}

/* A Generic Address Structure for `bits` bits at I/O `port`; access size 0
 * (legacy: the OS picks), 1 = byte. */
static void gas_io(struct tbuf *t, size_t off, uint16_t port, uint8_t bits, uint8_t access)
{
	put(t, off, GAS_SYSTEM_IO, 1);
	put(t, off + 1, bits, 1);
	put(t, off + 2, 0, 1);
	put(t, off + 3, access, 1);
	put(t, off + 4, port, 8);
}

static size_t build_facs(struct tbuf *t)
{
	size_t off = alloc(t, 64, 64);

	put_bytes(t, off, "FACS", 4);
	put(t, off + 4, 64, 4);
	put(t, off + 32, 2, 1); /* version */
	return off;
}

/* FADT revision 6 (276 bytes), ACPI 6.4 section 5.2.9. */
static size_t build_fadt(struct tbuf *t, size_t facs, size_t dsdt, bool legacy_vga)
{
	const uint32_t len = 276;
	size_t off = alloc(t, len, 16);

	header(t, off, "FACP", len, 6);
	put_ptr(t, off + 36, facs, 4);
	put_ptr(t, off + 40, dsdt, 4);
	put(t, off + 45, 0, 1);             /* preferred PM profile: unspecified */
	put(t, off + 46, PM_SCI_IRQ, 2);    /* SCI_INT */
	put(t, off + 48, 0, 4);             /* SMI_CMD 0: always in ACPI mode */
	put(t, off + 56, PM1A_EVT_PORT, 4); /* PM1a_EVT_BLK */
	put(t, off + 64, PM1A_CNT_PORT, 4); /* PM1a_CNT_BLK */
	put(t, off + 76, PM_TMR_PORT, 4);   /* PM_TMR_BLK */
	put(t, off + 88, 4, 1);             /* PM1_EVT_LEN */
	put(t, off + 89, 2, 1);             /* PM1_CNT_LEN */
	put(t, off + 91, 4, 1);             /* PM_TMR_LEN */
	put(t, off + 96, 0xffff, 2);        /* P_LVL2_LAT: C2 not supported */
	put(t, off + 98, 0xffff, 2);        /* P_LVL3_LAT: C3 not supported */
	put(t, off + 108, 0x32, 1);         /* CENTURY register in CMOS */
	put(t, off + 109, IAPC_8042 | (legacy_vga ? 0 : IAPC_VGA_NOT_PRESENT), 2);
	put(t, off + 112,
	    FADT_WBINVD | FADT_PROC_C1 | FADT_SLP_BUTTON | FADT_TMR_VAL_EXT | FADT_RESET_REG_SUP,
	    4);
	gas_io(t, off + 116, PM_RESET_PORT, 8, 1); /* RESET_REG */
	put(t, off + 128, PM_RESET_VALUE, 1);
	put(t, off + 131, 4, 1);        /* FADT minor version: 6.4 */
	put_ptr(t, off + 132, facs, 8); /* X_FIRMWARE_CTRL */
	put_ptr(t, off + 140, dsdt, 8); /* X_DSDT */
	gas_io(t, off + 148, PM1A_EVT_PORT, 32, 0);
	gas_io(t, off + 172, PM1A_CNT_PORT, 16, 0);
	gas_io(t, off + 208, PM_TMR_PORT, 32, 0);
	put_bytes(t, off + 268, "KHYVE\0\0\0", 8); /* hypervisor vendor identity */
	finish(t, off, len);
	return off;
}

static void madt_lapic(struct tbuf *t, unsigned uid, uint32_t apic_id)
{
	size_t e;

	if (apic_id < 0xff) {
		e = alloc(t, 8, 1);
		put(t, e, MADT_LAPIC, 1);
		put(t, e + 1, 8, 1);
		put(t, e + 2, uid, 1);
		put(t, e + 3, apic_id, 1);
		put(t, e + 4, 1, 4); /* enabled */
		return;
	}
	e = alloc(t, 16, 1);
	put(t, e, MADT_X2APIC, 1);
	put(t, e + 1, 16, 1);
	put(t, e + 4, apic_id, 4);
	put(t, e + 8, 1, 4);
	put(t, e + 12, uid, 4);
}

static void madt_override(struct tbuf *t, uint8_t irq, uint32_t gsi, uint16_t flags)
{
	size_t e = alloc(t, 10, 1);

	put(t, e, MADT_OVERRIDE, 1);
	put(t, e + 1, 10, 1);
	put(t, e + 2, 0, 1); /* ISA bus */
	put(t, e + 3, irq, 1);
	put(t, e + 4, gsi, 4);
	put(t, e + 8, flags, 2);
}

/* MADT, ACPI 6.4 section 5.2.12: one local APIC per vCPU, the IOAPIC,
 * the SCI override and LINT1 as NMI on every processor. */
static size_t build_madt(struct tbuf *t, const struct acpi_config *cfg)
{
	size_t off = alloc(t, 44, 16), e;

	put(t, off + 36, LAPIC_GPA, 4);
	put(t, off + 40, MADT_PCAT_COMPAT, 4);
	for (unsigned i = 0; i < cfg->ncpus; i++)
		madt_lapic(t, i, cfg->apic_id[i]);
	e = alloc(t, 12, 1);
	put(t, e, MADT_IOAPIC, 1);
	put(t, e + 1, 12, 1);
	put(t, e + 2, 0, 1); /* IOAPIC id */
	put(t, e + 4, IOAPIC_GPA, 4);
	put(t, e + 8, 0, 4); /* GSI base */
	/* SCI: level-triggered (3 << 2), active high (1). */
	madt_override(t, PM_SCI_IRQ, PM_SCI_IRQ, (3 << 2) | 1);
	e = alloc(t, 6, 1);
	put(t, e, MADT_LAPIC_NMI, 1);
	put(t, e + 1, 6, 1);
	put(t, e + 2, 0xff, 1); /* all processors */
	put(t, e + 3, 0, 2);
	put(t, e + 5, 1, 1); /* LINT1 */
	if (cfg->apic_id[cfg->ncpus - 1] >= 0xff) {
		/* Processors described by x2APIC entries need their own. */
		e = alloc(t, 12, 1);
		put(t, e, MADT_X2APIC_NMI, 1);
		put(t, e + 1, 12, 1);
		put(t, e + 4, 0xffffffffu, 4); /* all processors */
		put(t, e + 8, 1, 1);           /* LINT1 */
	}
	header(t, off, "APIC", (uint32_t)(t->len - off), 5);
	finish(t, off, t->len - off);
	return off;
}

/* _PRT: every slot's INTA-D on IOAPIC GSIs 16-23, swizzled by slot, the
 * same rule as pci_slot_intx_gsi(). */
static void dsdt_prt(struct aml *a)
{
	size_t prt;

	aml_name_decl(a, "_PRT");
	prt = aml_package(a, 32 * 4);
	for (unsigned slot = 0; slot < 32; slot++) {
		for (unsigned pin = 0; pin < 4; pin++) {
			size_t e = aml_package(a, 4);

			aml_integer(a, ((uint64_t)slot << 16) | 0xffff);
			aml_integer(a, pin);
			aml_integer(a, 0);
			aml_integer(a, 16 + (slot + pin) % 8);
			aml_close(a, e);
		}
	}
	aml_close(a, prt);
}

static void dsdt_pci0(struct aml *a, const struct acpi_config *cfg)
{
	size_t dev = aml_device(a, "PCI0"), res;

	aml_name_decl(a, "_HID");
	aml_eisaid(a, "PNP0A08"); /* PCI Express root bridge */
	aml_name_decl(a, "_CID");
	aml_eisaid(a, "PNP0A03");
	aml_name_decl(a, "_ADR");
	aml_integer(a, 0);
	aml_name_decl(a, "_UID");
	aml_integer(a, 0);
	aml_name_decl(a, "_BBN");
	aml_integer(a, 0);
	aml_name_decl(a, "_SEG");
	aml_integer(a, 0);
	aml_name_decl(a, "_CRS");
	res = aml_resource_template(a);
	aml_res_word_bus(a, 0, (uint16_t)((cfg->ecam_size >> 20) - 1));
	aml_res_io(a, 0xcf8, 8);
	aml_res_word_io(a, 0x0000, 0x0cf7);
	aml_res_word_io(a, 0x0d00, (uint16_t)(cfg->io_end - 1));
	aml_res_dword_mem(a, cfg->mmio32_base, cfg->mmio32_end - 1);
	if (cfg->mmio64_size > 0)
		aml_res_qword_mem(a, cfg->mmio64_base, cfg->mmio64_base + cfg->mmio64_size - 1);
	aml_resource_end(a, res);
	dsdt_prt(a);
	if (cfg->pci_dsdt != NULL)
		cfg->pci_dsdt(a, cfg->pci_dsdt_arg);
	aml_close(a, dev);
}

static void dsdt_body(struct aml *a, const struct acpi_config *cfg)
{
	size_t sb, pkg;

	sb = aml_scope(a, "\\_SB_");
	if (cfg->lpc_dsdt != NULL)
		cfg->lpc_dsdt(a, cfg->lpc_dsdt_arg);
	if (cfg->ecam_size > 0)
		dsdt_pci0(a, cfg);
	aml_close(a, sb);

	/* \_S5: SLP_TYP values for PM1a and PM1b, then two reserved. */
	aml_name_decl(a, "\\_S5_");
	pkg = aml_package(a, 4);
	aml_integer(a, PM_SLP_TYP_S5);
	aml_integer(a, PM_SLP_TYP_S5);
	aml_integer(a, 0);
	aml_integer(a, 0);
	aml_close(a, pkg);
}

static size_t build_dsdt(struct tbuf *t, const struct acpi_config *cfg)
{
	struct aml a;
	size_t off = 0;

	aml_init(&a);
	dsdt_body(&a, cfg);
	if (!a.failed) {
		off = alloc(t, HDR_LEN + a.len, 16);
		put_bytes(t, off + HDR_LEN, a.data, a.len);
		header(t, off, "DSDT", (uint32_t)(HDR_LEN + a.len), 2);
		finish(t, off, HDR_LEN + a.len);
	} else {
		t->overflow = true;
	}
	aml_free(&a);
	return off;
}

/* MCFG (PCI Firmware 3.2 section 4.1.2): one ECAM range for segment 0. */
static size_t build_mcfg(struct tbuf *t, const struct acpi_config *cfg)
{
	const uint32_t len = 36 + 8 + 16;
	size_t off = alloc(t, len, 16);

	put(t, off + 44, cfg->ecam_base, 8);
	put(t, off + 52, 0, 2);                          /* segment */
	put(t, off + 54, 0, 1);                          /* first bus */
	put(t, off + 55, (cfg->ecam_size >> 20) - 1, 1); /* last bus */
	header(t, off, "MCFG", len, 1);
	finish(t, off, len);
	return off;
}

/* TPM2 (TCG ACPI Specification 1.3, section 8.3), revision 4: a client
 * platform's TPM 2.0 with the start method "command response buffer" (7)
 * and its 12 bytes of start method parameters (none for it); no event log
 * area (LAML and LASA 0), as there is no firmware measuring the boot. */
#define TPM2_START_METHOD_CRB 7

static size_t build_tpm2(struct tbuf *t, uint64_t control_area)
{
	const uint32_t len = 76;
	size_t off = alloc(t, len, 16);

	put(t, off + 36, 0, 2); /* platform class: client */
	put(t, off + 40, control_area, 8);
	put(t, off + 48, TPM2_START_METHOD_CRB, 4);
	header(t, off, "TPM2", len, 4);
	finish(t, off, len);
	return off;
}

static size_t build_xsdt(struct tbuf *t, const size_t *tables, unsigned n, bool wide)
{
	unsigned esz = wide ? 8 : 4;
	uint32_t len = HDR_LEN + n * esz;
	size_t off = alloc(t, len, 16);

	for (unsigned i = 0; i < n; i++)
		put_ptr(t, off + HDR_LEN + i * esz, tables[i], esz);
	header(t, off, wide ? "XSDT" : "RSDT", len, 1);
	finish(t, off, len);
	return off;
}

static void build_rsdp(struct tbuf *t, size_t off, size_t rsdt, size_t xsdt)
{
	put_bytes(t, off, "RSD PTR ", 8);
	put_bytes(t, off + 9, OEM_ID, 6);
	put(t, off + 15, 2, 1); /* revision: ACPI 2.0+ */
	put_ptr(t, off + 16, rsdt, 4);
	put(t, off + 20, 36, 4);
	put_ptr(t, off + 24, xsdt, 8);
	if (t->overflow)
		return;
	t->buf[off + 8] = (uint8_t)(0 - acpi_checksum(t->buf + off, 20));
	t->buf[off + 32] = (uint8_t)(0 - acpi_checksum(t->buf + off, 36));
	note_checksum(t, off + 8, off, 20);
	note_checksum(t, off + 32, off, 36);
}

static size_t build_all(struct tbuf *t0, const struct acpi_config *cfg);

size_t acpi_build(uint8_t *buf, size_t cap, uint64_t base, const struct acpi_config *cfg)
{
	struct tbuf t = {buf, cap, 0, base, false, NULL};

	return build_all(&t, cfg);
}

size_t acpi_build_linked(uint8_t *buf, size_t cap, const struct acpi_config *cfg,
                         struct acpi_links *links)
{
	struct tbuf t = {buf, cap, 0, 0, false, links};

	memset(links, 0, sizeof(*links));
	return build_all(&t, cfg);
}

static size_t build_all(struct tbuf *t0, const struct acpi_config *cfg)
{
	struct tbuf t = *t0;
	size_t rsdp, facs, dsdt, fadt, madt, rsdt, xsdt, tables[4];
	unsigned ntables = 2;

	if (cfg->ncpus == 0 || cfg->ncpus > ACPI_MAX_CPUS)
		return 0;
	rsdp = alloc(&t, 36, 16);
	facs = build_facs(&t);
	dsdt = build_dsdt(&t, cfg);
	fadt = build_fadt(&t, facs, dsdt, cfg->legacy_vga);
	madt = build_madt(&t, cfg);
	tables[0] = fadt;
	tables[1] = madt;
	if (cfg->ecam_size > 0)
		tables[ntables++] = build_mcfg(&t, cfg);
	if (cfg->tpm2_control_area != 0)
		tables[ntables++] = build_tpm2(&t, cfg->tpm2_control_area);
	rsdt = build_xsdt(&t, tables, ntables, false);
	xsdt = build_xsdt(&t, tables, ntables, true);
	build_rsdp(&t, rsdp, rsdt, xsdt);
	return t.overflow ? 0 : t.len;
}
