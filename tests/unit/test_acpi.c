/*
 * Unit tests for the ACPI tables (src/boot/acpi.h) and the AML encoder
 * (src/lib/aml.h).  The tables are walked the way an OS does, from the RSDP
 * through guest-physical pointers; offsets per ACPI 6.4 chapter 5.
 */
#include "unit.h"

#include <sys/stat.h>

#include "boot/acpi.h"
#include "lib/aml.h"
#include "dev/lpc.h"
#include "dev/pm.h"
#include "lib/config.h"
#include "vmm/cpuid.h"
#include "vmm/kvm.h"

#define HDR 36

/* ---- walking the tables ---- */

struct image {
	uint8_t *buf;
	size_t len; /* bytes acpi_build() used */
	uint64_t base;
};

/* Host pointer for guest-physical [gpa, gpa+len) inside the image. */
static const uint8_t *at(const struct image *im, uint64_t gpa, size_t len)
{
	if (gpa < im->base || gpa - im->base > im->len || len > im->len - (gpa - im->base))
		fail_msg("gpa %#llx+%zu is outside the tables [%#llx, +%zu)",
		         (unsigned long long)gpa, len, (unsigned long long)im->base, im->len);
	return im->buf + (gpa - im->base);
}

/* A table with a standard header: signature, length inside, checksum 0. */
static const uint8_t *table(const struct image *im, uint64_t gpa, const char *sig)
{
	const uint8_t *t = at(im, gpa, HDR);
	uint32_t len = (uint32_t)unit_le(t + 4, 4);

	if (memcmp(t, sig, 4) != 0)
		fail_msg("table at %#llx is '%.4s', want '%s'", (unsigned long long)gpa, t, sig);
	assert_true(len >= HDR);
	t = at(im, gpa, len);
	if (acpi_checksum(t, len) != 0)
		fail_msg("%s checksum is off by %u", sig, acpi_checksum(t, len));
	assert_memory_equal(t + 10, "KHYVE ", 6); /* OEM ID */
	return t;
}

static uint32_t table_len(const uint8_t *t)
{
	return (uint32_t)unit_le(t + 4, 4);
}

static struct image build(const struct acpi_config *cfg, uint64_t base)
{
	struct image im = {malloc(ACPI_TABLES_SIZE), 0, base};

	assert_non_null(im.buf);
	memset(im.buf, 0xa5, ACPI_TABLES_SIZE);
	im.len = acpi_build(im.buf, ACPI_TABLES_SIZE, base, cfg);
	assert_true(im.len > 0);
	assert_true(im.len <= ACPI_TABLES_SIZE);
	return im;
}

/* The LPC devices' DSDT entries come from their own hooks, which read the
 * config tree: no serial ports until set_com(). */
static void config_n(struct acpi_config *cfg, unsigned n)
{
	memset(cfg, 0, sizeof(*cfg));
	config_reset();
	cfg->lpc_dsdt = lpc_write_dsdt;
	cfg->ncpus = n;
	for (unsigned i = 0; i < n; i++)
		cfg->apic_id[i] = i;
}

/* COM port `index` (0 = COM1) configured, as -l comN,stdio does. */
static void set_com(unsigned index)
{
	char key[32];

	snprintf(key, sizeof(key), "lpc.com%u.path", index + 1);
	assert_int_equal(config_set(key, "stdio"), 0);
}

/* The RSDP; returns the RSDT and XSDT addresses. */
static void check_rsdp(const struct image *im, uint64_t *rsdt, uint64_t *xsdt)
{
	const uint8_t *r = at(im, im->base, 36);

	assert_memory_equal(r, "RSD PTR ", 8);
	assert_int_equal(acpi_checksum(r, 20), 0);
	assert_int_equal(acpi_checksum(r, 36), 0);
	assert_memory_equal(r + 9, "KHYVE ", 6);
	assert_int_equal(r[15], 2); /* revision: ACPI 2.0+ */
	assert_int_equal(unit_le(r + 20, 4), 36);
	assert_int_equal(r[33] | r[34] | r[35], 0);
	*rsdt = unit_le(r + 16, 4);
	*xsdt = unit_le(r + 24, 8);
	/* The RSDP sits on a 16-byte boundary in 0xE0000-0xFFFFF. */
	assert_int_equal(im->base % 16, 0);
}

struct walk {
	const uint8_t *fadt, *facs, *dsdt, *madt;
};

/* RSDP -> XSDT and RSDT -> FADT -> FACS/DSDT, MADT; everything checked. */
static struct walk walk_tables(const struct image *im)
{
	struct walk w = {0};
	uint64_t rsdt_gpa, xsdt_gpa;
	const uint8_t *rsdt, *xsdt;
	unsigned n;

	check_rsdp(im, &rsdt_gpa, &xsdt_gpa);
	xsdt = table(im, xsdt_gpa, "XSDT");
	rsdt = table(im, rsdt_gpa, "RSDT");
	assert_int_equal((table_len(xsdt) - HDR) % 8, 0);
	assert_int_equal((table_len(rsdt) - HDR) % 4, 0);
	n = (table_len(xsdt) - HDR) / 8;
	assert_int_equal((table_len(rsdt) - HDR) / 4, n);
	assert_true(n >= 2);
	for (unsigned i = 0; i < n; i++) {
		uint64_t gpa = unit_le(xsdt + HDR + 8 * i, 8);
		const uint8_t *t = at(im, gpa, HDR);

		/* RSDT and XSDT list the same tables. */
		assert_int_equal(unit_le(rsdt + HDR + 4 * i, 4), gpa);
		if (memcmp(t, "FACP", 4) == 0) {
			assert_null(w.fadt);
			w.fadt = table(im, gpa, "FACP");
		} else if (memcmp(t, "APIC", 4) == 0) {
			assert_null(w.madt);
			w.madt = table(im, gpa, "APIC");
		} else {
			fail_msg("unexpected table '%.4s' in the XSDT", t);
		}
	}
	assert_non_null(w.fadt);
	assert_non_null(w.madt);

	/* FADT -> FACS (no checksum of its own) and DSDT. */
	uint64_t facs = unit_le(w.fadt + 36, 4), dsdt = unit_le(w.fadt + 40, 4);
	assert_int_equal(unit_le(w.fadt + 132, 8), facs); /* X_FIRMWARE_CTRL */
	assert_int_equal(unit_le(w.fadt + 140, 8), dsdt); /* X_DSDT */
	w.facs = at(im, facs, 64);
	assert_memory_equal(w.facs, "FACS", 4);
	assert_int_equal(unit_le(w.facs + 4, 4), 64);
	assert_int_equal(facs % 64, 0);
	w.dsdt = table(im, dsdt, "DSDT");
	assert_true(w.dsdt[8] >= 2); /* revision 2: 64-bit integers */
	return w;
}

/* A Generic Address Structure in system I/O space. */
static void check_gas_io(const uint8_t *g, uint64_t port, unsigned bits)
{
	assert_int_equal(g[0], 1); /* SystemIO */
	assert_int_equal(g[1], bits);
	assert_int_equal(g[2], 0);
	assert_int_equal(unit_le(g + 4, 8), port);
}

static void test_fadt(void **state)
{
	struct acpi_config cfg;
	struct image im;
	struct walk w;

	(void)state;
	config_n(&cfg, 1);
	im = build(&cfg, ACPI_TABLES_GPA);
	w = walk_tables(&im);
	assert_int_equal(table_len(w.fadt), 276);
	assert_int_equal(w.fadt[8], 6);                    /* revision */
	assert_int_equal(unit_le(w.fadt + 46, 2), 9);      /* SCI_INT */
	assert_int_equal(unit_le(w.fadt + 48, 4), 0);      /* SMI_CMD: no SMM */
	assert_int_equal(unit_le(w.fadt + 56, 4), 0xb000); /* PM1a_EVT_BLK */
	assert_int_equal(unit_le(w.fadt + 60, 4), 0);      /* PM1b_EVT_BLK */
	assert_int_equal(unit_le(w.fadt + 64, 4), 0xb004); /* PM1a_CNT_BLK */
	assert_int_equal(unit_le(w.fadt + 76, 4), 0xb008); /* PM_TMR_BLK */
	assert_int_equal(w.fadt[88], 4);                   /* PM1_EVT_LEN */
	assert_int_equal(w.fadt[89], 2);                   /* PM1_CNT_LEN */
	assert_int_equal(w.fadt[91], 4);                   /* PM_TMR_LEN */
	assert_true(w.fadt[109] & 0x02);                   /* IAPC_BOOT_ARCH: an 8042 */
	uint32_t flags = (uint32_t)unit_le(w.fadt + 112, 4);
	assert_true(flags & (1u << 8));   /* TMR_VAL_EXT: 32-bit timer */
	assert_true(flags & (1u << 10));  /* RESET_REG_SUP */
	assert_false(flags & (1u << 4));  /* PWR_BUTTON 0: fixed-feature button */
	assert_false(flags & (1u << 20)); /* not HW_REDUCED_ACPI */
	/* Reset register: port 0xCF9, value 6. */
	check_gas_io(w.fadt + 116, 0xcf9, 8);
	assert_int_equal(w.fadt[128], 6);
	assert_int_equal(w.fadt[128], PM_RESET_VALUE);
	/* Extended blocks agree with the 32-bit ones. */
	check_gas_io(w.fadt + 148, 0xb000, 32); /* X_PM1a_EVT_BLK */
	check_gas_io(w.fadt + 172, 0xb004, 16); /* X_PM1a_CNT_BLK */
	check_gas_io(w.fadt + 208, 0xb008, 32); /* X_PM_TMR_BLK */
	/* And with the device model. */
	assert_int_equal(PM1A_EVT_PORT, 0xb000);
	assert_int_equal(PM1A_CNT_PORT, 0xb004);
	assert_int_equal(PM_TMR_PORT, 0xb008);
	assert_int_equal(PM_SCI_IRQ, 9);
	free(im.buf);
}

/* Walk the MADT's entries: counts, APIC IDs in vCPU order, unique UIDs. */
static void check_madt(const uint8_t *madt, const struct acpi_config *cfg)
{
	uint32_t len = table_len(madt);
	unsigned cpus = 0, ioapics = 0, overrides = 0, nmis = 0, x2 = 0;
	uint32_t *uids = calloc(cfg->ncpus + 1, sizeof(*uids));

	assert_non_null(uids);
	assert_int_equal(unit_le(madt + 36, 4), 0xfee00000); /* local APIC address */
	assert_int_equal(unit_le(madt + 36, 4), LAPIC_GPA);
	assert_true(unit_le(madt + 40, 4) & 1); /* PCAT_COMPAT */
	for (uint32_t off = 44; off < len;) {
		const uint8_t *e = madt + off;
		uint32_t id, uid, flags;

		assert_true(off + 2 <= len);
		assert_true(e[1] >= 2);
		assert_true(off + e[1] <= len);
		switch (e[0]) {
		case 0: /* processor local APIC */
			assert_int_equal(e[1], 8);
			uid = e[2];
			id = e[3];
			flags = (uint32_t)unit_le(e + 4, 4);
			assert_true(id < 0xff);
			goto cpu;
		case 9: /* processor local x2APIC */
			assert_int_equal(e[1], 16);
			assert_int_equal(e[2] | e[3], 0);
			id = (uint32_t)unit_le(e + 4, 4);
			flags = (uint32_t)unit_le(e + 8, 4);
			uid = (uint32_t)unit_le(e + 12, 4);
			assert_true(id >= 0xff);
			x2++;
		cpu:
			assert_true(cpus < cfg->ncpus);
			assert_int_equal(id, cfg->apic_id[cpus]);
			assert_int_equal(flags & 1, 1); /* enabled */
			for (unsigned j = 0; j < cpus; j++)
				assert_true(uids[j] != uid);
			uids[cpus++] = uid;
			break;
		case 1: /* I/O APIC */
			assert_int_equal(e[1], 12);
			assert_int_equal(unit_le(e + 4, 4), IOAPIC_GPA);
			assert_int_equal(unit_le(e + 8, 4), 0); /* GSI base */
			ioapics++;
			break;
		case 2: /* interrupt source override */
			assert_int_equal(e[1], 10);
			assert_int_equal(e[2], 0); /* ISA */
			if (e[3] == 9) {
				assert_int_equal(unit_le(e + 4, 4), 9);
				/* SCI: level-triggered, active high. */
				assert_int_equal(unit_le(e + 8, 2) & 0xf, 0xd);
			}
			overrides++;
			break;
		case 4: /* local APIC NMI */
			assert_int_equal(e[1], 6);
			nmis++;
			break;
		case 0xa: /* local x2APIC NMI */
			assert_int_equal(e[1], 12);
			nmis++;
			break;
		default:
			fail_msg("unexpected MADT entry type %u", e[0]);
		}
		off += e[1];
	}
	assert_int_equal(cpus, cfg->ncpus);
	assert_int_equal(ioapics, 1);
	assert_true(overrides >= 1);
	assert_true(nmis >= 1);
	unsigned want_x2 = 0;
	for (unsigned i = 0; i < cfg->ncpus; i++)
		want_x2 += cfg->apic_id[i] >= 0xff;
	assert_int_equal(x2, want_x2);
	free(uids);
}

static void check_cpus(unsigned n)
{
	struct acpi_config cfg;
	struct image im;
	struct walk w;

	config_n(&cfg, n);
	im = build(&cfg, ACPI_TABLES_GPA);
	w = walk_tables(&im);
	check_madt(w.madt, &cfg);
	free(im.buf);
}

static void test_madt_1(void **state)
{
	(void)state;
	check_cpus(1);
}

static void test_madt_2(void **state)
{
	(void)state;
	check_cpus(2);
}

static void test_madt_255(void **state)
{
	(void)state;
	check_cpus(255); /* IDs 0..254: all local APIC entries */
}

static void test_madt_256(void **state)
{
	(void)state;
	check_cpus(256); /* ID 255 needs an x2APIC entry */
}

static void test_madt_288(void **state)
{
	(void)state;
	check_cpus(ACPI_MAX_CPUS);
}

/* APIC IDs from a real topology: gaps when cores is not a power of two. */
static void test_madt_topology(void **state)
{
	const struct cpu_topology topo = {.sockets = 4, .cores = 3, .threads = 2};
	struct acpi_config cfg;
	struct image im;
	struct walk w;

	(void)state;
	memset(&cfg, 0, sizeof(cfg));
	cfg.ncpus = topo.sockets * topo.cores * topo.threads;
	for (unsigned i = 0; i < cfg.ncpus; i++)
		cfg.apic_id[i] = topo_apic_id(&topo, i);
	im = build(&cfg, ACPI_TABLES_GPA);
	w = walk_tables(&im);
	check_madt(w.madt, &cfg);
	free(im.buf);

	/* Many sockets: IDs beyond 255 even with fewer than 255 vCPUs. */
	const struct cpu_topology wide = {.sockets = 9, .cores = 17, .threads = 1};
	cfg.ncpus = wide.sockets * wide.cores;
	for (unsigned i = 0; i < cfg.ncpus; i++)
		cfg.apic_id[i] = topo_apic_id(&wide, i);
	assert_true(cfg.apic_id[cfg.ncpus - 1] > 255);
	im = build(&cfg, ACPI_TABLES_GPA);
	w = walk_tables(&im);
	check_madt(w.madt, &cfg);
	free(im.buf);
}

/* Every pointer is relative to `base`. */
static void test_other_base(void **state)
{
	struct acpi_config cfg;
	struct image im;
	struct walk w;

	(void)state;
	config_n(&cfg, 4);
	im = build(&cfg, 0xf0000);
	w = walk_tables(&im);
	check_madt(w.madt, &cfg);
	free(im.buf);
	im = build(&cfg, 0x7fff0000);
	w = walk_tables(&im);
	free(im.buf);
}

/* The table with signature `sig` in the XSDT, or NULL. */
static const uint8_t *xsdt_find(const struct image *im, const char *sig)
{
	uint64_t rsdt, xsdt_gpa;
	const uint8_t *xsdt;

	check_rsdp(im, &rsdt, &xsdt_gpa);
	xsdt = table(im, xsdt_gpa, "XSDT");
	for (unsigned i = 0; i < (table_len(xsdt) - HDR) / 8; i++) {
		uint64_t gpa = unit_le(xsdt + HDR + 8 * i, 8);

		if (memcmp(at(im, gpa, HDR), sig, 4) == 0)
			return table(im, gpa, sig);
	}
	return NULL;
}

/* PCI0's WordBusNumber descriptor in the DSDT: its _MIN and _MAX. */
static void dsdt_bus_range(const uint8_t *dsdt, unsigned *min, unsigned *max)
{
	static const uint8_t tag[] = {0x88, 0x0d, 0x00, 0x02}; /* word address, bus */
	uint32_t len = table_len(dsdt);

	for (uint32_t i = HDR; i + 16 <= len; i++) {
		if (memcmp(dsdt + i, tag, sizeof(tag)) == 0) {
			*min = (unsigned)unit_le(dsdt + i + 8, 2);
			*max = (unsigned)unit_le(dsdt + i + 10, 2);
			assert_int_equal(unit_le(dsdt + i + 14, 2), *max - *min + 1);
			return;
		}
	}
	fail_msg("no bus number range in the DSDT");
}

/* MCFG and PCI0's _CRS end at the last bus in use, not at the end of the
 * ECAM window: Linux probes every bus up to MCFG's last one for peer host
 * bridges (8192 config reads for 256 buses). */
static void test_mcfg_last_bus(void **state)
{
	static const struct {
		uint64_t ecam_size;
		uint8_t last_bus;
		unsigned want;
	} cases[] = {{256u << 20, 0, 0}, {256u << 20, 7, 7}, {2u << 20, 9, 1}};
	struct acpi_config cfg;

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct image im;
		const uint8_t *mcfg, *fadt;
		unsigned min = 99, max = 99;

		config_n(&cfg, 1);
		cfg.ecam_base = 0xe0000000;
		cfg.ecam_size = cases[c].ecam_size;
		cfg.pci_last_bus = cases[c].last_bus;
		cfg.mmio32_base = 0xc0000000;
		cfg.mmio32_end = 0xe0000000;
		cfg.io_base = 0x2000;
		cfg.io_end = 0xffff;
		im = build(&cfg, ACPI_TABLES_GPA);
		mcfg = xsdt_find(&im, "MCFG");
		assert_non_null(mcfg);
		assert_int_equal(table_len(mcfg), 60);
		assert_int_equal(unit_le(mcfg + 44, 8), 0xe0000000);
		assert_int_equal(unit_le(mcfg + 52, 2), 0); /* segment */
		assert_int_equal(mcfg[54], 0);              /* first bus */
		assert_int_equal(mcfg[55], cases[c].want);  /* last bus */
		fadt = xsdt_find(&im, "FACP");
		assert_non_null(fadt);
		dsdt_bus_range(table(&im, unit_le(fadt + 40, 4), "DSDT"), &min, &max);
		assert_int_equal(min, 0);
		assert_int_equal(max, cases[c].want);
		free(im.buf);
	}
}

/* ---- a small AML reader, to check the DSDT's structure ---- */

struct aml_reader {
	const uint8_t *p, *end;
	unsigned devices, names;
	char found[16][5]; /* device names seen */
};

static bool rd_pkglen(struct aml_reader *r, const uint8_t **pkg_end)
{
	const uint8_t *start = r->p;
	unsigned n;
	uint32_t len;

	if (r->p >= r->end)
		return false;
	n = *r->p >> 6;
	if (n == 0) {
		len = *r->p & 0x3f;
	} else {
		if (*r->p & 0x30)
			return false; /* bits 4-5 must be zero in multi-byte form */
		len = *r->p & 0x0f;
		if (r->p + n >= r->end)
			return false;
		for (unsigned i = 1; i <= n; i++)
			len |= (uint32_t)r->p[i] << (4 + 8 * (i - 1));
	}
	r->p += n + 1;
	*pkg_end = start + len;
	return *pkg_end >= r->p && *pkg_end <= r->end;
}

static bool rd_nameseg(struct aml_reader *r, char *out)
{
	if (r->end - r->p < 4)
		return false;
	for (int i = 0; i < 4; i++) {
		uint8_t c = r->p[i];

		if (!((c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9')))
			return false;
		if (out != NULL)
			out[i] = (char)c;
	}
	if (out != NULL)
		out[4] = '\0';
	r->p += 4;
	return true;
}

static bool rd_namestring(struct aml_reader *r, char *last)
{
	unsigned n;

	if (r->p < r->end && *r->p == '\\')
		r->p++;
	else
		while (r->p < r->end && *r->p == '^')
			r->p++;
	if (r->p >= r->end)
		return false;
	switch (*r->p) {
	case 0x00:
		r->p++;
		return true;
	case 0x2e:
		r->p++;
		return rd_nameseg(r, NULL) && rd_nameseg(r, last);
	case 0x2f:
		if (r->end - r->p < 2 || r->p[1] == 0)
			return false;
		n = r->p[1];
		r->p += 2;
		for (unsigned i = 0; i < n; i++)
			if (!rd_nameseg(r, i + 1 == n ? last : NULL))
				return false;
		return true;
	default:
		return rd_nameseg(r, last);
	}
}

static bool rd_data(struct aml_reader *r);

/* Resource descriptors up to the end tag, exactly filling [p, end). */
static bool rd_resources(const uint8_t *p, const uint8_t *end)
{
	while (p < end) {
		if (*p & 0x80) { /* large */
			if (end - p < 3)
				return false;
			p += 3 + unit_le(p + 1, 2);
		} else if (((*p >> 3) & 0xf) == 0xf) { /* end tag */
			return (*p & 7) == 1 && end - p == 2;
		} else {
			p += 1 + (*p & 7);
		}
	}
	return false;
}

static bool rd_data(struct aml_reader *r)
{
	const uint8_t *pkg_end, *size_start;
	uint64_t size;

	if (r->p >= r->end)
		return false;
	switch (*r->p++) {
	case 0x00:
	case 0x01:
	case 0xff:
		return true;
	case 0x0a:
		r->p += 1;
		return r->p <= r->end;
	case 0x0b:
		r->p += 2;
		return r->p <= r->end;
	case 0x0c:
		r->p += 4;
		return r->p <= r->end;
	case 0x0e:
		r->p += 8;
		return r->p <= r->end;
	case 0x0d:
		while (r->p < r->end && *r->p != 0) {
			if (*r->p > 0x7f)
				return false;
			r->p++;
		}
		if (r->p >= r->end)
			return false;
		r->p++;
		return true;
	case 0x11: /* Buffer: PkgLength BufferSize ByteList */
		if (!rd_pkglen(r, &pkg_end))
			return false;
		size_start = r->p;
		{
			struct aml_reader sub = {r->p, pkg_end, 0, 0, {{0}}};

			if (!rd_data(&sub))
				return false;
			switch (*size_start) {
			case 0x0a:
				size = size_start[1];
				break;
			case 0x0b:
				size = unit_le(size_start + 1, 2);
				break;
			case 0x0c:
				size = unit_le(size_start + 1, 4);
				break;
			default:
				return false;
			}
			if (size != (uint64_t)(pkg_end - sub.p))
				return false;
			if (!rd_resources(sub.p, pkg_end))
				return false;
		}
		r->p = pkg_end;
		return true;
	case 0x12: /* Package: PkgLength NumElements PackageElementList */
		if (!rd_pkglen(r, &pkg_end) || r->p >= pkg_end)
			return false;
		{
			struct aml_reader sub = {r->p + 1, pkg_end, 0, 0, {{0}}};
			unsigned count = 0;

			while (sub.p < sub.end) {
				if (!rd_data(&sub))
					return false;
				count++;
			}
			if (count != *r->p || sub.p != pkg_end)
				return false;
		}
		r->p = pkg_end;
		return true;
	default:
		return false;
	}
}

/* TermList of Scope / Device / Name, exactly filling [p, end). */
static bool rd_terms(struct aml_reader *r)
{
	const uint8_t *pkg_end;
	char name[5];

	while (r->p < r->end) {
		switch (*r->p) {
		case 0x08: /* Name */
			r->p++;
			if (!rd_namestring(r, name) || !rd_data(r))
				return false;
			r->names++;
			break;
		case 0x10: /* Scope */
			r->p++;
			if (!rd_pkglen(r, &pkg_end))
				return false;
			{
				struct aml_reader sub = *r;

				sub.end = pkg_end;
				if (!rd_namestring(&sub, name) || !rd_terms(&sub))
					return false;
				sub.end = r->end;
				*r = sub;
			}
			break;
		case 0x5b: /* Device */
			if (r->end - r->p < 2 || r->p[1] != 0x82)
				return false;
			r->p += 2;
			if (!rd_pkglen(r, &pkg_end))
				return false;
			{
				struct aml_reader sub = *r;

				sub.end = pkg_end;
				if (!rd_namestring(&sub, name))
					return false;
				if (sub.devices < ARRAY_LEN(sub.found))
					memcpy(sub.found[sub.devices], name, 5);
				sub.devices++;
				if (!rd_terms(&sub))
					return false;
				sub.end = r->end;
				*r = sub;
			}
			break;
		default:
			return false;
		}
	}
	return r->p == r->end;
}

static bool has_device(const struct aml_reader *r, const char *name)
{
	for (unsigned i = 0; i < r->devices && i < ARRAY_LEN(r->found); i++)
		if (strcmp(r->found[i], name) == 0)
			return true;
	return false;
}

static bool contains(const uint8_t *p, size_t len, const void *needle, size_t nlen)
{
	return memmem(p, len, needle, nlen) != NULL;
}

static void test_dsdt(void **state)
{
	static const uint8_t s5[] = {0x08, '\\', '_',  'S',  '5',  '_',  0x12, 0x08,
	                             0x04, 0x0a, 0x05, 0x0a, 0x05, 0x00, 0x00};
	static const uint8_t com1_hid[] = {0x08, '_', 'H', 'I', 'D', 0x0c, 0x41, 0xd0, 0x05, 0x01};
	static const uint8_t com1_io[] = {0x47, 0x01, 0xf8, 0x03, 0xf8, 0x03, 0x01, 0x08};
	static const uint8_t com3_io[] = {0x47, 0x01, 0xe8, 0x03, 0xe8, 0x03, 0x01, 0x08};
	static const uint8_t irq4[] = {0x22, 0x10, 0x00};
	static const uint8_t rtc_hid[] = {0x08, '_', 'H', 'I', 'D', 0x0c, 0x41, 0xd0, 0x0b, 0x00};
	static const uint8_t kbd_hid[] = {0x08, '_', 'H', 'I', 'D', 0x0c, 0x41, 0xd0, 0x03, 0x03};
	static const uint8_t mou_hid[] = {0x08, '_', 'H', 'I', 'D', 0x0c, 0x41, 0xd0, 0x0f, 0x13};
	static const uint8_t kbd_res[] = {0x47, 0x01, 0x60, 0x00, 0x60, 0x00, 0x01,
	                                  0x01, 0x47, 0x01, 0x64, 0x00, 0x64, 0x00,
	                                  0x01, 0x01, 0x22, 0x02, 0x00};
	struct acpi_config cfg;
	struct image im;
	struct walk w;
	struct aml_reader r;
	uint32_t len;

	(void)state;
	/* No serial ports. */
	config_n(&cfg, 1);
	im = build(&cfg, ACPI_TABLES_GPA);
	w = walk_tables(&im);
	len = table_len(w.dsdt);
	assert_true(contains(w.dsdt, len, s5, sizeof(s5)));
	assert_true(contains(w.dsdt, len, rtc_hid, sizeof(rtc_hid)));
	assert_false(contains(w.dsdt, len, "COM", 3));
	r = (struct aml_reader){w.dsdt + HDR, w.dsdt + len, 0, 0, {{0}}};
	assert_true(rd_terms(&r));
	assert_true(has_device(&r, "RTC_"));
	/* The i8042's keyboard (PNP0303: 0x60, 0x64, IRQ 1) and mouse (PNP0F13). */
	assert_true(has_device(&r, "KBD_"));
	assert_true(has_device(&r, "MOU_"));
	assert_true(contains(w.dsdt, len, kbd_hid, sizeof(kbd_hid)));
	assert_true(contains(w.dsdt, len, mou_hid, sizeof(mou_hid)));
	assert_true(contains(w.dsdt, len, kbd_res, sizeof(kbd_res)));
	assert_int_equal(r.devices, 3);
	free(im.buf);

	/* COM1 and COM3. */
	set_com(0);
	set_com(2);
	im = build(&cfg, ACPI_TABLES_GPA);
	w = walk_tables(&im);
	len = table_len(w.dsdt);
	assert_true(contains(w.dsdt, len, s5, sizeof(s5)));
	assert_true(contains(w.dsdt, len, "COM1", 4));
	assert_true(contains(w.dsdt, len, "COM3", 4));
	assert_false(contains(w.dsdt, len, "COM2", 4));
	assert_false(contains(w.dsdt, len, "COM4", 4));
	assert_true(contains(w.dsdt, len, com1_hid, sizeof(com1_hid)));
	assert_true(contains(w.dsdt, len, com1_io, sizeof(com1_io)));
	assert_true(contains(w.dsdt, len, com3_io, sizeof(com3_io)));
	assert_true(contains(w.dsdt, len, irq4, sizeof(irq4)));
	r = (struct aml_reader){w.dsdt + HDR, w.dsdt + len, 0, 0, {{0}}};
	assert_true(rd_terms(&r));
	assert_true(has_device(&r, "COM1"));
	assert_true(has_device(&r, "COM3"));
	assert_int_equal(r.devices, 5);
	free(im.buf);

	/* All four. */
	for (int i = 0; i < 4; i++)
		set_com(i);
	im = build(&cfg, ACPI_TABLES_GPA);
	w = walk_tables(&im);
	r = (struct aml_reader){w.dsdt + HDR, w.dsdt + table_len(w.dsdt), 0, 0, {{0}}};
	assert_true(rd_terms(&r));
	assert_int_equal(r.devices, 7);
	assert_true(has_device(&r, "COM2"));
	assert_true(has_device(&r, "COM4"));
	free(im.buf);
}

static void test_build_rejects(void **state)
{
	struct acpi_config cfg;
	uint8_t *buf = malloc(ACPI_TABLES_SIZE);

	(void)state;
	assert_non_null(buf);
	config_n(&cfg, 0);
	assert_int_equal(acpi_build(buf, ACPI_TABLES_SIZE, ACPI_TABLES_GPA, &cfg), 0);
	config_n(&cfg, ACPI_MAX_CPUS);
	cfg.ncpus = ACPI_MAX_CPUS + 1;
	assert_int_equal(acpi_build(buf, ACPI_TABLES_SIZE, ACPI_TABLES_GPA, &cfg), 0);
	cfg.ncpus = UINT32_MAX;
	assert_int_equal(acpi_build(buf, ACPI_TABLES_SIZE, ACPI_TABLES_GPA, &cfg), 0);
	free(buf);
}

/* Every capacity short of what is needed fails cleanly, without writing past
 * the buffer (exact-size allocations: ASan sees any overrun). */
static void test_build_small_buffers(void **state)
{
	struct acpi_config cfg;
	size_t need;
	uint8_t *buf = malloc(ACPI_TABLES_SIZE);

	(void)state;
	assert_non_null(buf);
	config_n(&cfg, 3);
	set_com(0);
	need = acpi_build(buf, ACPI_TABLES_SIZE, ACPI_TABLES_GPA, &cfg);
	assert_true(need > 0);
	free(buf);
	for (size_t cap = 0; cap < need; cap++) {
		buf = malloc(cap ? cap : 1);
		assert_non_null(buf);
		if (acpi_build(buf, cap, ACPI_TABLES_GPA, &cfg) != 0)
			fail_msg("acpi_build succeeded in %zu of %zu bytes", cap, need);
		free(buf);
	}
	buf = malloc(need);
	assert_non_null(buf);
	assert_int_equal(acpi_build(buf, need, ACPI_TABLES_GPA, &cfg), need);
	free(buf);
}

static void test_deterministic(void **state)
{
	struct acpi_config cfg;
	struct image a, b;

	(void)state;
	config_n(&cfg, 8);
	set_com(1);
	a = build(&cfg, ACPI_TABLES_GPA);
	b = build(&cfg, ACPI_TABLES_GPA);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.buf, b.buf, a.len);
	free(a.buf);
	free(b.buf);
}

/* ---- iasl (acpica-tools), when installed ---- */

static bool have_iasl(void)
{
	return system("command -v iasl >/dev/null 2>&1") == 0;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *s = NULL;
	size_t len = 0;

	if (f == NULL)
		return NULL;
	if (getdelim(&s, &len, '\0', f) < 0) {
		free(s);
		s = NULL;
	}
	fclose(f);
	return s;
}

/* Disassemble one table; returns the .dsl text (malloc()ed). */
static char *iasl_disassemble(const char *dir, const char *name, const uint8_t *t)
{
	char *path, *cmd, *dsl, *text;
	int rc;

	path = unit_write_file(dir, name, t, table_len(t));
	assert_non_null(path);
	assert_true(asprintf(&cmd, "cd '%s' && iasl -d '%s' >'%s.log' 2>&1", dir, name, name) > 0);
	rc = system(cmd);
	if (rc != 0) {
		char *logname, *log;

		assert_true(asprintf(&logname, "%s.log", path) > 0);
		log = slurp(logname);
		fail_msg("iasl -d %s failed (%d):\n%s", name, rc, log ? log : "(no log)");
	}
	assert_true(asprintf(&dsl, "%s", path) > 0);
	strcpy(strrchr(dsl, '.'), ".dsl");
	text = slurp(dsl);
	assert_non_null(text);
	free(cmd);
	free(path);
	free(dsl);
	return text;
}

static void test_iasl(void **state)
{
	struct acpi_config cfg;
	struct image im;
	struct walk w;
	char *dir, *dsl;

	(void)state;
	if (!have_iasl()) {
		print_message("iasl not installed (acpica-tools): skipping\n");
		skip();
	}
	config_n(&cfg, 4);
	set_com(0);
	set_com(1);
	im = build(&cfg, ACPI_TABLES_GPA);
	w = walk_tables(&im);
	dir = unit_mkdtemp();
	assert_non_null(dir);

	dsl = iasl_disassemble(dir, "dsdt.dat", w.dsdt);
	assert_contains(dsl, "_S5_");
	assert_contains(dsl, "COM1");
	assert_contains(dsl, "COM2");
	assert_contains(dsl, "PNP0501");
	assert_contains(dsl, "PNP0B00");
	assert_contains(dsl, "0x03F8");
	assert_not_contains(dsl, "Error");
	free(dsl);

	/* The data tables decode too, with no complaints about them. */
	dsl = iasl_disassemble(dir, "facp.dat", w.fadt);
	assert_contains(dsl, "Fixed ACPI Description Table");
	assert_not_contains(dsl, "Invalid");
	assert_not_contains(dsl, "Incorrect");
	free(dsl);
	dsl = iasl_disassemble(dir, "apic.dat", w.madt);
	assert_contains(dsl, "Multiple APIC Description Table");
	assert_not_contains(dsl, "Invalid");
	assert_not_contains(dsl, "Incorrect");
	free(dsl);

	unit_rmtree(dir);
	free(dir);
	free(im.buf);
}

/* ---- AML encoder ---- */

static void expect_bytes(const struct aml *a, const uint8_t *want, size_t n)
{
	assert_false(a->failed);
	if (a->len != n)
		fail_msg("encoded %zu bytes, want %zu", a->len, n);
	assert_memory_equal(a->data, want, n);
}

#define EXPECT(a, ...)                                                                             \
	do {                                                                                       \
		static const uint8_t want_[] = {__VA_ARGS__};                                      \
		expect_bytes((a), want_, sizeof(want_));                                           \
	} while (0)

/* Scope op, `body` bytes of payload, close: check the PkgLength bytes. */
static void check_pkglen(size_t body, const uint8_t *enc, size_t nenc)
{
	static const uint8_t op = 0x10;
	struct aml a;
	size_t mark;
	uint8_t *payload = malloc(body ? body : 1);
	uint32_t total;

	assert_non_null(payload);
	for (size_t i = 0; i < body; i++)
		payload[i] = (uint8_t)(i * 31 + 1);
	aml_init(&a);
	mark = aml_open(&a, &op, 1);
	assert_int_equal(mark, 1);
	aml_bytes(&a, payload, body);
	aml_close(&a, mark);
	assert_false(a.failed);
	assert_int_equal(a.len, 1 + nenc + body);
	assert_int_equal(a.data[0], 0x10);
	if (memcmp(a.data + 1, enc, nenc) != 0)
		fail_msg("PkgLength for a %zu-byte body is %02x %02x %02x %02x", body, a.data[1],
		         nenc > 1 ? a.data[2] : 0, nenc > 2 ? a.data[3] : 0,
		         nenc > 3 ? a.data[4] : 0);
	/* Decodes to its own length plus the body. */
	total = nenc == 1 ? a.data[1] & 0x3f : a.data[1] & 0x0f;
	for (size_t i = 1; i < nenc; i++)
		total |= (uint32_t)a.data[1 + i] << (4 + 8 * (i - 1));
	assert_int_equal(total, nenc + body);
	assert_int_equal(a.data[1] >> 6, nenc - 1);
	/* The body moved intact. */
	assert_memory_equal(a.data + 1 + nenc, payload, body);
	aml_free(&a);
	free(payload);
}

static void test_aml_pkglen(void **state)
{
	(void)state;
	check_pkglen(0, (const uint8_t[]){0x01}, 1);
	check_pkglen(1, (const uint8_t[]){0x02}, 1);
	check_pkglen(62, (const uint8_t[]){0x3f}, 1);               /* 63: the largest 1-byte */
	check_pkglen(63, (const uint8_t[]){0x41, 0x04}, 2);         /* 65 */
	check_pkglen(64, (const uint8_t[]){0x42, 0x04}, 2);         /* 66 */
	check_pkglen(4093, (const uint8_t[]){0x4f, 0xff}, 2);       /* 4095: largest 2-byte */
	check_pkglen(4094, (const uint8_t[]){0x81, 0x00, 0x01}, 3); /* 4097 */
	check_pkglen(4095, (const uint8_t[]){0x82, 0x00, 0x01}, 3); /* 4098 */
	check_pkglen(0xffffc, (const uint8_t[]){0x8f, 0xff, 0xff}, 3);
	check_pkglen(0xffffd, (const uint8_t[]){0xc1, 0x00, 0x00, 0x01}, 4);
}

static void test_aml_nested(void **state)
{
	static const uint8_t scope = 0x10, dev[] = {0x5b, 0x82};
	struct aml a;
	size_t outer, inner;

	(void)state;
	aml_init(&a);
	outer = aml_open(&a, &scope, 1);
	aml_name(&a, "\\_SB_");
	inner = aml_open(&a, dev, 2);
	aml_name(&a, "DEV0");
	aml_close(&a, inner);
	aml_close(&a, outer);
	EXPECT(&a, 0x10, 0x0d, '\\', '_', 'S', 'B', '_', 0x5b, 0x82, 0x05, 'D', 'E', 'V', '0');
	aml_free(&a);

	/* The helpers do the same. */
	aml_init(&a);
	outer = aml_scope(&a, "\\_SB_");
	inner = aml_device(&a, "DEV0");
	aml_close(&a, inner);
	aml_close(&a, outer);
	EXPECT(&a, 0x10, 0x0d, '\\', '_', 'S', 'B', '_', 0x5b, 0x82, 0x05, 'D', 'E', 'V', '0');
	aml_free(&a);
}

static void check_integer(uint64_t v, const uint8_t *want, size_t n)
{
	struct aml a;

	aml_init(&a);
	aml_integer(&a, v);
	if (a.len != n || memcmp(a.data, want, n) != 0)
		fail_msg("aml_integer(%#llx) encoded wrongly (%zu bytes)", (unsigned long long)v,
		         a.len);
	aml_free(&a);
}

static void test_aml_integer(void **state)
{
	(void)state;
	check_integer(0, (const uint8_t[]){0x00}, 1);
	check_integer(1, (const uint8_t[]){0x01}, 1);
	check_integer(2, (const uint8_t[]){0x0a, 0x02}, 2);
	check_integer(0xff, (const uint8_t[]){0x0a, 0xff}, 2);
	check_integer(0x100, (const uint8_t[]){0x0b, 0x00, 0x01}, 3);
	check_integer(0xffff, (const uint8_t[]){0x0b, 0xff, 0xff}, 3);
	check_integer(0x10000, (const uint8_t[]){0x0c, 0x00, 0x00, 0x01, 0x00}, 5);
	check_integer(0xffffffff, (const uint8_t[]){0x0c, 0xff, 0xff, 0xff, 0xff}, 5);
	check_integer(1ull << 32, (const uint8_t[]){0x0e, 0, 0, 0, 0, 1, 0, 0, 0}, 9);
	check_integer(UINT64_MAX,
	              (const uint8_t[]){0x0e, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 9);
}

static void test_aml_eisaid(void **state)
{
	struct aml a;

	(void)state;
	assert_int_equal(aml_eisaid_value("PNP0501"), 0x0105D041);
	assert_int_equal(aml_eisaid_value("PNP0B00"), 0x000BD041);
	assert_int_equal(aml_eisaid_value("PNP0303"), 0x0303D041);
	assert_int_equal(aml_eisaid_value("PNP0A03"), 0x030AD041);
	/* Wrong length. */
	assert_int_equal(aml_eisaid_value(""), 0);
	assert_int_equal(aml_eisaid_value("PNP050"), 0);
	assert_int_equal(aml_eisaid_value("PNP05011"), 0);
	aml_init(&a);
	aml_eisaid(&a, "PNP0501");
	EXPECT(&a, 0x0c, 0x41, 0xd0, 0x05, 0x01);
	aml_free(&a);
}

static void test_aml_names(void **state)
{
	struct aml a;

	(void)state;
	aml_init(&a);
	aml_name(&a, "COM1");
	EXPECT(&a, 'C', 'O', 'M', '1');
	aml_free(&a);

	aml_init(&a);
	aml_name(&a, "RTC"); /* padded */
	EXPECT(&a, 'R', 'T', 'C', '_');
	aml_free(&a);

	aml_init(&a);
	aml_name(&a, "\\_SB_");
	EXPECT(&a, '\\', '_', 'S', 'B', '_');
	aml_free(&a);

	aml_init(&a);
	aml_name(&a, "\\_SB.PCI0"); /* dual */
	EXPECT(&a, '\\', 0x2e, '_', 'S', 'B', '_', 'P', 'C', 'I', '0');
	aml_free(&a);

	aml_init(&a);
	aml_name(&a, "_SB.PCI0.ISA"); /* multi */
	EXPECT(&a, 0x2f, 0x03, '_', 'S', 'B', '_', 'P', 'C', 'I', '0', 'I', 'S', 'A', '_');
	aml_free(&a);

	aml_init(&a);
	aml_name(&a, "^^FOO");
	EXPECT(&a, '^', '^', 'F', 'O', 'O', '_');
	aml_free(&a);

	aml_init(&a);
	aml_name(&a, "\\");
	EXPECT(&a, '\\', 0x00); /* the root: NullName */
	aml_free(&a);

	aml_init(&a);
	aml_name_decl(&a, "_UID");
	aml_integer(&a, 3);
	EXPECT(&a, 0x08, '_', 'U', 'I', 'D', 0x0a, 0x03);
	aml_free(&a);

	aml_init(&a);
	aml_string(&a, "hi");
	EXPECT(&a, 0x0d, 'h', 'i', 0x00);
	aml_free(&a);
}

static void test_aml_invalid_names(void **state)
{
	static const char *const bad[] = {
	    "com1",
	    "TOOLONG",
	    "1ABC",
	    "A..B",
	    "A.",
	    ".A",
	    "A-B",
	    "AB CD",
	    "\\a",
	    "_SB.pci0",
	    "FO*",
	    "\\_SB.FIVEC",
	    "A.B.C.D.E.F.toolong",
	};
	struct aml a;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		aml_init(&a);
		aml_name(&a, bad[i]);
		if (!a.failed)
			fail_msg("aml_name('%s') did not set failed", bad[i]);
		/* Once failed, nothing more is written and close is harmless. */
		size_t len = a.len;
		aml_integer(&a, 0x1234);
		aml_bytes(&a, "xyz", 3);
		assert_int_equal(a.len, len);
		aml_close(&a, 0);
		assert_true(a.failed);
		aml_free(&a);
	}
	/* A failed object inside a scope poisons the whole buffer. */
	aml_init(&a);
	size_t sb = aml_scope(&a, "\\_SB_");
	size_t dev = aml_device(&a, "bad");
	aml_close(&a, dev);
	aml_close(&a, sb);
	assert_true(a.failed);
	aml_free(&a);
}

/*
 * Regression: aml_name() writes the MultiNamePath segment count as (uint8_t)nsegs,
 * so a path of 256 segments is encoded with a count of 0 (and 300 as 44)
 * without setting `failed`: malformed AML that still checksums fine.  Fix:
 * in aml_name(), set a->failed when nsegs > 255.
 */
static void test_aml_name_too_many_segments(void **state)
{
	char path[256 * 2 + 1];
	struct aml a;

	(void)state;
	for (int i = 0; i < 256; i++) {
		path[2 * i] = 'A';
		path[2 * i + 1] = '.';
	}
	path[2 * 256 - 1] = '\0'; /* 256 segments "A.A....A" */
	aml_init(&a);
	aml_name(&a, path);
	bool failed = a.failed;
	size_t len = a.len;
	unsigned op = len > 0 ? a.data[0] : 0, count = len > 1 ? a.data[1] : 0;
	aml_free(&a);
	if (!failed) {
		/* Then it must at least be a correct encoding. */
		assert_int_equal(op, 0x2f);
		if (count == 0 || (size_t)count * 4 + 2 != len)
			fail_msg("256-segment name encoded with count %u in %zu bytes", count, len);
	}
}

static void test_aml_package(void **state)
{
	struct aml a;
	size_t pkg;

	(void)state;
	aml_init(&a);
	pkg = aml_package(&a, 4);
	aml_integer(&a, 5);
	aml_integer(&a, 5);
	aml_integer(&a, 0);
	aml_integer(&a, 0);
	aml_close(&a, pkg);
	EXPECT(&a, 0x12, 0x08, 0x04, 0x0a, 0x05, 0x0a, 0x05, 0x00, 0x00);
	aml_free(&a);
}

static void test_aml_resource_template(void **state)
{
	struct aml a;
	size_t res;

	(void)state;
	aml_init(&a);
	res = aml_resource_template(&a);
	aml_res_io(&a, 0x3f8, 8);
	aml_res_irq(&a, 4);
	aml_res_mem32_fixed(&a, 0xfec00000, 0x1000, true);
	aml_resource_end(&a, res);
	/* Buffer(PkgLength, DWord size) { IO, IRQNoFlags, Memory32Fixed, End } */
	EXPECT(&a, 0x11, 0x1f, 0x0c, 0x19, 0x00, 0x00, 0x00,                           /* size 25 */
	       0x47, 0x01, 0xf8, 0x03, 0xf8, 0x03, 0x01, 0x08,                         /* IO */
	       0x22, 0x10, 0x00,                                                       /* IRQ 4 */
	       0x86, 0x09, 0x00, 0x01, 0x00, 0x00, 0xc0, 0xfe, 0x00, 0x10, 0x00, 0x00, /* mem */
	       0x79, 0x00);                                                            /* end tag */
	aml_free(&a);

	/* Empty template: just the end tag. */
	aml_init(&a);
	res = aml_resource_template(&a);
	aml_resource_end(&a, res);
	EXPECT(&a, 0x11, 0x08, 0x0c, 0x02, 0x00, 0x00, 0x00, 0x79, 0x00);
	aml_free(&a);

	/* Read-only memory, IRQ 15. */
	aml_init(&a);
	res = aml_resource_template(&a);
	aml_res_irq(&a, 15);
	aml_res_mem32_fixed(&a, 0x1000, 0x2000, false);
	aml_resource_end(&a, res);
	assert_false(a.failed);
	assert_int_equal(a.data[7], 0x22);
	assert_int_equal(unit_le(a.data + 8, 2), 0x8000);
	assert_int_equal(a.data[10], 0x86);
	assert_int_equal(a.data[13], 0x00); /* not writable */
	aml_free(&a);
}

static void test_aml_large(void **state)
{
	struct aml a;
	size_t sb;
	char name[16];

	(void)state;
	/* Enough devices to need a 3-byte PkgLength and several reallocs. */
	aml_init(&a);
	sb = aml_scope(&a, "\\_SB_");
	for (int i = 0; i < 500; i++) {
		size_t dev, res;

		snprintf(name, sizeof(name), "D%03d", i);
		dev = aml_device(&a, name);
		aml_name_decl(&a, "_HID");
		aml_eisaid(&a, "PNP0501");
		aml_name_decl(&a, "_CRS");
		res = aml_resource_template(&a);
		aml_res_io(&a, (uint16_t)(0x1000 + 8 * i), 8);
		aml_resource_end(&a, res);
		aml_close(&a, dev);
	}
	aml_close(&a, sb);
	assert_false(a.failed);
	struct aml_reader r = {a.data, a.data + a.len, 0, 0, {{0}}};
	assert_true(rd_terms(&r));
	assert_int_equal(r.devices, 500);
	assert_int_equal(a.data[1] >> 6, 2); /* 3-byte PkgLength */
	aml_free(&a);
	aml_free(&a); /* freeing twice is harmless */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fadt),
	    cmocka_unit_test(test_madt_1),
	    cmocka_unit_test(test_madt_2),
	    cmocka_unit_test(test_madt_255),
	    cmocka_unit_test(test_madt_256),
	    cmocka_unit_test(test_madt_288),
	    cmocka_unit_test(test_madt_topology),
	    cmocka_unit_test(test_other_base),
	    cmocka_unit_test(test_mcfg_last_bus),
	    cmocka_unit_test(test_dsdt),
	    cmocka_unit_test(test_build_rejects),
	    cmocka_unit_test(test_build_small_buffers),
	    cmocka_unit_test(test_deterministic),
	    cmocka_unit_test(test_iasl),
	    cmocka_unit_test(test_aml_pkglen),
	    cmocka_unit_test(test_aml_nested),
	    cmocka_unit_test(test_aml_integer),
	    cmocka_unit_test(test_aml_eisaid),
	    cmocka_unit_test(test_aml_names),
	    cmocka_unit_test(test_aml_invalid_names),
	    cmocka_unit_test(test_aml_name_too_many_segments),
	    cmocka_unit_test(test_aml_package),
	    cmocka_unit_test(test_aml_resource_template),
	    cmocka_unit_test(test_aml_large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
