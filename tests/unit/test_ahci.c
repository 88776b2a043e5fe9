/*
 * Unit tests for the AHCI controller (src/dev/ahci.c), driven in-process
 * through its ABAR on the MMIO bus: one ahci function at 0:4.0 with a
 * 1 MiB disk on port 0 and a 64 KiB ISO-like file on port 1, in a fake
 * machine without KVM (one malloc()ed RAM region; INTx through intx_hook).
 *
 * Happy paths: HBA reset, port start, IDENTIFY (DEVICE and PACKET
 * DEVICE), READ/WRITE DMA EXT through multi-entry PRDTs, an NCQ read,
 * FLUSH, TRIM, ATAPI INQUIRY, READ CAPACITY, READ(10), READ TOC, REQUEST
 * SENSE.  Hostile input: command list, received-FIS area, command table
 * and PRDT outside RAM, over-long PRDTs, odd and zero byte counts, short
 * PRDTs, LBAs out of range, bad FIS types and lengths, unknown commands;
 * each must end in an error status (PxIS.TFES/HBFS, ERR in PxTFD) and the
 * port must work again after a restart.  Option parsing is tested last.
 *
 * Media change (the API's hook, machine_media_drive): port 1 is drive
 * cd0, an empty ahci-cd at 0:5.0 is cd1.  Without a medium the guest gets
 * NOT READY / MEDIUM NOT PRESENT; an insert gives one UNIT ATTENTION and
 * the new size; GET EVENT STATUS NOTIFICATION reports NewMedia and
 * MediaRemoval once each; START STOP UNIT ejects unless PREVENT ALLOW
 * MEDIUM REMOVAL locked the tray, which only a forced change overrides; a
 * directory is refused; a second thread reading while the medium changes
 * never sees the old image once change() returned.
 */
#include "unit.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "core/iobus.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "lib/config.h"

#define RAM_GPA      0x100000ull
#define RAM_SIZE     0x400000ull

#define DISK_SECTORS 2048 /* 1 MiB of 512-byte sectors */
#define ISO_BLOCKS   32   /* 64 KiB of 2048-byte blocks */

/* Guest layout: per port p, command list, FIS area, 32 command tables. */
#define CLB(p)      (RAM_GPA + 0x0000 + (p)*0x400)
#define FB(p)       (RAM_GPA + 0x1000 + (p)*0x100)
#define CTBA(p, s)  (RAM_GPA + 0x10000 + (p)*0x10000 + (s)*0x800)
#define DATA_GPA    (RAM_GPA + 0x100000)
#define DATA2_GPA   (RAM_GPA + 0x200000)
#define OUTSIDE_GPA 0x40000000ull

/* Registers (AHCI 1.3.1 section 3). */
#define CAP      0x00
#define GHC      0x04
#define IS       0x08
#define PI       0x0c
#define VS       0x10
#define PX(p, r) (0x100 + (p)*0x80 + (r))
#define P_CLB    0x00
#define P_CLBU   0x04
#define P_FB     0x08
#define P_IS     0x10
#define P_IE     0x14
#define P_CMD    0x18
#define P_TFD    0x20
#define P_SIG    0x24
#define P_SSTS   0x28
#define P_SCTL   0x2c
#define P_SACT   0x34
#define P_CI     0x38

#define IS_DHRS  (1u << 0)
#define IS_PSS   (1u << 1)
#define IS_SDBS  (1u << 3)
#define IS_OFS   (1u << 24)
#define IS_HBFS  (1u << 29)
#define IS_TFES  (1u << 30)

static struct machine m;
static uint8_t *ram;
static struct pci_func *f;
static uint64_t abar;
static char *dir, *disk_path, *iso_path, *iso2_path;

#define ISO2_BLOCKS 48 /* the second medium: 96 KiB of 'a' + block */
static int intx_level;

static void hook(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	(void)gsi;
	intx_level = level;
}

static uint8_t *hva(uint64_t gpa)
{
	return ram + (gpa - RAM_GPA);
}

static uint32_t rd(uint64_t off)
{
	uint64_t v = 0;

	if (!iobus_access(&m.mmio, abar + off, 4, false, &v))
		fail_msg("ABAR read at 0x%llx unclaimed", (unsigned long long)off);
	return (uint32_t)v;
}

static void wr(uint64_t off, uint32_t val)
{
	uint64_t v = val;

	if (!iobus_access(&m.mmio, abar + off, 4, true, &v))
		fail_msg("ABAR write at 0x%llx unclaimed", (unsigned long long)off);
}

static void disk_pattern(uint8_t *buf, uint64_t lba, unsigned n)
{
	for (unsigned s = 0; s < n; s++)
		for (unsigned i = 0; i < 512; i++)
			buf[s * 512 + i] = (uint8_t)((lba + s) * 7 + i);
}

static int write_images(void)
{
	uint8_t *d = malloc(DISK_SECTORS * 512);
	uint8_t *iso = malloc(ISO_BLOCKS * 2048);
	int rc = -1;

	if (d == NULL || iso == NULL)
		goto out;
	disk_pattern(d, 0, DISK_SECTORS);
	for (unsigned b = 0; b < ISO_BLOCKS; b++)
		memset(iso + b * 2048, 'A' + b, 2048);
	disk_path = unit_write_file(dir, "disk.img", d, DISK_SECTORS * 512);
	iso_path = unit_write_file(dir, "cd.iso", iso, ISO_BLOCKS * 2048);
	free(iso);
	iso = malloc(ISO2_BLOCKS * 2048);
	if (iso == NULL)
		goto out;
	for (unsigned b = 0; b < ISO2_BLOCKS; b++)
		memset(iso + b * 2048, 'a' + b % 26, 2048);
	iso2_path = unit_write_file(dir, "cd2.iso", iso, ISO2_BLOCKS * 2048);
	rc = disk_path && iso_path && iso2_path ? 0 : -1;
out:
	free(d);
	free(iso);
	return rc;
}

static int group_setup(void **state)
{
	char err[256] = "";

	(void)state;
	ram = calloc(1, RAM_SIZE);
	dir = unit_mkdtemp();
	if (ram == NULL || dir == NULL ||
	    machine_init_detached(&m, "unit", ram, RAM_GPA, RAM_SIZE) < 0 || write_images() < 0)
		return -1;
	m.intx_hook = hook;
	config_reset();
	if (config_set("pci.0.4.0.device", "ahci") < 0 ||
	    config_set("pci.0.4.0.port.0.type", "hd") < 0 ||
	    config_set("pci.0.4.0.port.0.path", disk_path) < 0 ||
	    config_set("pci.0.4.0.port.0.nmrr", "1") < 0 ||
	    config_set("pci.0.4.0.port.0.ser", "UNIT-SERIAL-1") < 0 ||
	    config_set("pci.0.4.0.port.1.type", "cd") < 0 ||
	    config_set("pci.0.4.0.port.1.path", iso_path) < 0 ||
	    pci_parse_slot_option("5,ahci-cd", err, sizeof(err)) < 0)
		return -1;
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	f = pci_get(0);
	abar = f->bar[5].addr;
	pci_cfg_write(0, 4, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
	return f->bar[5].mapped ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	unit_rmtree(dir);
	free(dir);
	free(disk_path);
	free(iso_path);
	free(iso2_path);
	return 0;
}

/* Every test starts from an HBA reset with clean RAM and both ports running. */
static void port_start(unsigned p)
{
	wr(PX(p, P_CLB), (uint32_t)CLB(p));
	wr(PX(p, P_CLBU), 0);
	wr(PX(p, P_FB), (uint32_t)FB(p));
	wr(PX(p, P_IE), 0xffffffff);
	wr(PX(p, P_CMD), (1u << 4));     /* FRE */
	wr(PX(p, P_CMD), (1u << 4) | 1); /* FRE | ST */
}

static void port_stop(unsigned p)
{
	wr(PX(p, P_CMD), 0);
}

static int reset(void **state)
{
	(void)state;
	memset(ram, 0, RAM_SIZE);
	wr(GHC, 1);       /* HR */
	wr(GHC, 1u << 1); /* IE */
	port_start(0);
	port_start(1);
	return 0;
}

/* ---- building commands ---- */

struct prd {
	uint64_t gpa;
	uint32_t len; /* bytes; written as len - 1 */
};

static void put32(uint64_t gpa, uint32_t v)
{
	unit_put_le(hva(gpa), v, 4);
}

static uint32_t get32(uint64_t gpa)
{
	return (uint32_t)unit_le(hva(gpa), 4);
}

/* Command header of `slot` and its table: FIS, optional CDB, PRDT. */
static void build(unsigned p, unsigned slot, const uint8_t *fis, const uint8_t *cdb,
                  const struct prd *prd, unsigned nprd)
{
	uint64_t hdr = CLB(p) + slot * 32, ct = CTBA(p, slot);

	put32(hdr, 5u | (cdb ? 1u << 5 : 0) | nprd << 16);
	put32(hdr + 4, 0xdeadbeef); /* PRDBC: the HBA overwrites it */
	put32(hdr + 8, (uint32_t)ct);
	put32(hdr + 12, (uint32_t)(ct >> 32));
	memcpy(hva(ct), fis, 20);
	if (cdb != NULL)
		memcpy(hva(ct + 0x40), cdb, 16);
	for (unsigned i = 0; i < nprd; i++) {
		put32(ct + 0x80 + i * 16, (uint32_t)prd[i].gpa);
		put32(ct + 0x84 + i * 16, (uint32_t)(prd[i].gpa >> 32));
		put32(ct + 0x8c + i * 16, prd[i].len - 1);
	}
}

/* An H2D register FIS with a 48-bit LBA and 16-bit count and features. */
static void h2d(uint8_t *fis, uint8_t cmd, uint64_t lba, uint16_t count, uint16_t feat)
{
	memset(fis, 0, 20);
	fis[0] = 0x27;
	fis[1] = 0x80;
	fis[2] = cmd;
	fis[3] = (uint8_t)feat;
	fis[4] = (uint8_t)lba;
	fis[5] = (uint8_t)(lba >> 8);
	fis[6] = (uint8_t)(lba >> 16);
	fis[7] = 0x40;
	fis[8] = (uint8_t)(lba >> 24);
	fis[9] = (uint8_t)(lba >> 32);
	fis[10] = (uint8_t)(lba >> 40);
	fis[11] = (uint8_t)(feat >> 8);
	fis[12] = (uint8_t)count;
	fis[13] = (uint8_t)(count >> 8);
}

static void issue(unsigned p, unsigned slot)
{
	wr(PX(p, P_CI), 1u << slot);
}

static void ata(unsigned p, unsigned slot, uint8_t cmd, uint64_t lba, uint16_t count,
                const struct prd *prd, unsigned nprd)
{
	uint8_t fis[20];

	h2d(fis, cmd, lba, count, 0);
	build(p, slot, fis, NULL, prd, nprd);
	issue(p, slot);
}

/* A PACKET command on port 1 with `cdb` and one data buffer of `len`. */
static void packet(unsigned slot, const uint8_t *cdb12, uint32_t len)
{
	uint8_t fis[20], cdb[16] = {0};
	struct prd prd = {DATA_GPA, len};

	memcpy(cdb, cdb12, 12);
	h2d(fis, 0xa0, 0, 0, 1); /* DMA */
	build(1, slot, fis, cdb, &prd, len ? 1 : 0);
	issue(1, slot);
}

static void assert_ok(unsigned p, unsigned slot)
{
	assert_int_equal(rd(PX(p, P_CI)) & (1u << slot), 0);
	assert_int_equal(rd(PX(p, P_TFD)) & 0x89, 0); /* no BSY, DRQ, ERR */
	assert_int_equal(rd(PX(p, P_IS)) & (IS_TFES | IS_HBFS), 0);
}

/* The port stopped with an error: `bits` in PxIS, ERR in PxTFD (HBFS aside). */
static void assert_failed(unsigned p, uint32_t bits)
{
	uint32_t is = rd(PX(p, P_IS));

	if ((is & bits) != bits)
		fail_msg("PxIS 0x%08x lacks 0x%08x", is, bits);
	if (!(bits & IS_HBFS))
		assert_true(rd(PX(p, P_TFD)) & 0x01);
}

/* After an error, clearing ST and setting it again must give a working port. */
static void assert_recovers(unsigned p)
{
	struct prd prd = {DATA2_GPA, 512};

	port_stop(p);
	assert_int_equal(rd(PX(p, P_CI)), 0);
	wr(PX(p, P_IS), 0xffffffff);
	port_start(p);
	ata(p, 7, p == 0 ? 0xec : 0xa1, 0, 0, &prd, 1);
	assert_ok(p, 7);
}

static uint32_t prdbc(unsigned p, unsigned slot)
{
	return get32(CLB(p) + slot * 32 + 4);
}

static void pread_disk(void *buf, uint64_t off, size_t len)
{
	int fd = open(disk_path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

/* ---- happy paths ---- */

static void test_hba_registers(void **state)
{
	uint32_t cap = rd(CAP);

	(void)state;
	assert_int_equal(cap & 0x1f, 1);         /* two ports */
	assert_int_equal((cap >> 8) & 0x1f, 31); /* 32 slots */
	assert_true(cap & (1u << 30));           /* NCQ */
	assert_true(cap & (1u << 31));           /* 64-bit */
	assert_int_equal(rd(PI), 3);
	assert_int_equal(rd(VS), 0x00010301);
	assert_int_equal(rd(GHC), 0x80000002);
	assert_int_equal(rd(PX(0, P_SSTS)), 0x133);
	assert_int_equal(rd(PX(0, P_SIG)), 0x00000101);
	assert_int_equal(rd(PX(1, P_SIG)), 0xeb140101);
	assert_int_equal(rd(PX(0, P_CMD)) & 0xc011, 0xc011); /* CR FR FRE ST */
	assert_int_equal(rd(PX(2, P_SSTS)), 0);              /* not implemented */
	/* HBA reset stops the ports and clears GHC.IE. */
	wr(GHC, 1);
	assert_int_equal(rd(GHC), 0x80000000);
	assert_int_equal(rd(PX(0, P_CMD)) & 0xc011, 0);
	assert_int_equal(rd(PX(1, P_CMD)) & (1u << 24), 1u << 24); /* ATAPI */
	/* Sub-dword writes are ignored, sub-dword reads work. */
	iobus_access(&m.mmio, abar + GHC, 1, true, &(uint64_t){2});
	assert_int_equal(rd(GHC), 0x80000000);
	{
		uint64_t v = 0;

		iobus_access(&m.mmio, abar + PX(1, P_SIG) + 2, 2, false, &v);
		assert_int_equal(v, 0xeb14);
	}
}

static void test_comreset(void **state)
{
	(void)state;
	wr(PX(0, P_SCTL), 1);
	assert_int_equal(rd(PX(0, P_SSTS)) & 0xf, 0);
	wr(PX(0, P_SCTL), 0);
	assert_int_equal(rd(PX(0, P_SSTS)), 0x133);
	assert_int_equal(rd(PX(0, P_TFD)) & 0xff, 0x50);
	/* The signature FIS landed in the received-FIS area. */
	assert_int_equal(hva(FB(0) + 0x40)[0], 0x34);
	assert_int_equal(hva(FB(0) + 0x40)[12], 1);
}

static void test_identify(void **state)
{
	struct prd prd[2] = {{DATA_GPA, 256}, {DATA_GPA + 0x1000, 256}};
	uint16_t id[256];
	uint8_t sum = 0, raw[512];
	char model[41];

	(void)state;
	ata(0, 0, 0xec, 0, 0, prd, 2);
	assert_ok(0, 0);
	assert_int_equal(prdbc(0, 0), 512);
	memcpy(raw, hva(DATA_GPA), 256);
	memcpy(raw + 256, hva(DATA_GPA + 0x1000), 256);
	for (unsigned i = 0; i < 256; i++)
		id[i] = (uint16_t)unit_le(raw + 2 * i, 2);
	for (unsigned i = 0; i < 512; i++)
		sum = (uint8_t)(sum + raw[i]);
	assert_int_equal(sum, 0);
	assert_int_equal(id[255] & 0xff, 0xa5);
	/* serial: byte-swapped words, space padded */
	assert_int_equal(id[10], ('U' << 8) | 'N');
	for (unsigned i = 0; i < 20; i++) {
		model[2 * i] = (char)(id[27 + i] >> 8);
		model[2 * i + 1] = (char)id[27 + i];
	}
	model[40] = '\0';
	assert_contains(model, "KHYVE SATA DISK");
	assert_int_equal(id[100], DISK_SECTORS);
	assert_int_equal(id[60], DISK_SECTORS);
	assert_true(id[83] & (1u << 10)); /* LBA48 */
	assert_true(id[76] & (1u << 8));  /* NCQ */
	assert_int_equal(id[75], 31);
	assert_true(id[169] & 1);        /* TRIM */
	assert_true(id[85] & (1u << 5)); /* write cache on */
	assert_int_equal(id[217], 1);    /* nmrr=1: solid state */
	/* PIO setup FIS with the ending status, then the D2H FIS. */
	assert_int_equal(hva(FB(0) + 0x20)[0], 0x5f);
	assert_int_equal(hva(FB(0) + 0x20)[15], 0x50);
	assert_int_equal(hva(FB(0) + 0x40)[0], 0x34);
	assert_int_equal(hva(FB(0) + 0x40)[2], 0x50);
	assert_int_equal(rd(PX(0, P_IS)) & (IS_DHRS | IS_PSS), IS_DHRS | IS_PSS);
	/* INTx follows IS while MSI is off; clearing PxIS then IS drops it. */
	assert_int_equal(rd(IS), 1);
	assert_int_equal(intx_level, 1);
	wr(PX(0, P_IS), 0xffffffff);
	wr(IS, 1);
	assert_int_equal(rd(IS), 0);
	assert_int_equal(intx_level, 0);
	/* The CD-ROM answers IDENTIFY PACKET DEVICE, the disk does not. */
	ata(1, 0, 0xa1, 0, 0, prd, 2);
	assert_ok(1, 0);
	assert_int_equal(unit_le(hva(DATA_GPA), 2), 0x85c0);
	ata(0, 1, 0xa1, 0, 0, prd, 2);
	assert_failed(0, IS_TFES);
	assert_int_equal(rd(PX(0, P_CI)), 2); /* the failed slot stays issued */
	assert_recovers(0);
	/* IDENTIFY DEVICE on the CD-ROM aborts with the ATAPI signature. */
	ata(1, 2, 0xec, 0, 0, prd, 2);
	assert_failed(1, IS_TFES);
	assert_int_equal(hva(FB(1) + 0x40)[5], 0x14);
	assert_int_equal(hva(FB(1) + 0x40)[6], 0xeb);
	assert_recovers(1);
}

static void test_interrupt_modes(void **state)
{
	struct prd prd = {DATA_GPA, 512};
	uint16_t ctrl;

	(void)state;
	/* GHC.IE off: IS still records the port, the line stays low. */
	wr(GHC, 0);
	ata(0, 0, 0xec, 0, 0, &prd, 1);
	assert_ok(0, 0);
	assert_int_equal(rd(IS), 1);
	assert_int_equal(intx_level, 0);
	wr(GHC, 1u << 1);
	assert_int_equal(intx_level, 1);
	wr(PX(0, P_IS), 0xffffffff);
	wr(IS, 0xffffffff);
	assert_int_equal(intx_level, 0);
	/* With MSI on, INTx is never used (the message itself needs KVM). */
	assert_true(f->msi.cap != 0);
	ctrl = (uint16_t)pci_cfg_read(0, 4, 0, f->msi.cap + 2, 2);
	pci_cfg_write(0, 4, 0, f->msi.cap + 2, 2, ctrl | 1);
	assert_true(pci_msi_enabled(f));
	ata(0, 1, 0xec, 0, 0, &prd, 1);
	assert_ok(0, 1);
	assert_int_equal(rd(IS), 1);
	assert_int_equal(intx_level, 0);
	pci_cfg_write(0, 4, 0, f->msi.cap + 2, 2, ctrl & ~1u);
	/* Back on INTx, the still-pending port raises the line at the next IS write. */
	wr(IS, 1);
	assert_int_equal(intx_level, 1);
}

static void test_rw_dma_ext(void **state)
{
	struct prd wprd[2] = {{DATA_GPA, 1024}, {DATA_GPA + 0x3000, 3072}};
	struct prd rprd[3] = {
	    {DATA2_GPA, 512}, {DATA2_GPA + 0x800, 2048}, {DATA2_GPA + 0x2000, 1536}};
	uint8_t buf[4096], file[4096];

	(void)state;
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 13 + 5);
	memcpy(hva(DATA_GPA), buf, 1024);
	memcpy(hva(DATA_GPA + 0x3000), buf + 1024, 3072);
	ata(0, 2, 0x35, 100, 8, wprd, 2); /* WRITE DMA EXT */
	assert_ok(0, 2);
	assert_int_equal(prdbc(0, 2), 4096);
	pread_disk(file, 100 * 512, sizeof(file));
	assert_memory_equal(file, buf, sizeof(buf));
	ata(0, 3, 0x25, 100, 8, rprd, 3); /* READ DMA EXT */
	assert_ok(0, 3);
	assert_memory_equal(hva(DATA2_GPA), buf, 512);
	assert_memory_equal(hva(DATA2_GPA + 0x800), buf + 512, 2048);
	assert_memory_equal(hva(DATA2_GPA + 0x2000), buf + 2560, 1536);
	/* 28-bit READ DMA of the untouched pattern, FLUSH CACHE EXT. */
	ata(0, 4, 0xc8, 5, 2, rprd + 1, 1);
	assert_ok(0, 4);
	disk_pattern(buf, 5, 2);
	assert_memory_equal(hva(DATA2_GPA + 0x800), buf, 1024);
	ata(0, 5, 0xea, 0, 0, NULL, 0);
	assert_ok(0, 5);
	ata(0, 6, 0x42, DISK_SECTORS - 1, 1, NULL, 0); /* READ VERIFY EXT */
	assert_ok(0, 6);
}

static void test_ncq_read(void **state)
{
	struct prd prd = {DATA_GPA, 4 * 512};
	uint8_t fis[20], want[4 * 512];

	(void)state;
	h2d(fis, 0x60, 300, 3 << 3, 4); /* READ FPDMA QUEUED, tag 3, 4 sectors */
	build(0, 3, fis, NULL, &prd, 1);
	wr(PX(0, P_SACT), 1u << 3);
	assert_int_equal(rd(PX(0, P_SACT)), 1u << 3);
	issue(0, 3);
	assert_ok(0, 3);
	assert_int_equal(rd(PX(0, P_SACT)), 0);
	assert_true(rd(PX(0, P_IS)) & IS_SDBS);
	assert_int_equal(hva(FB(0) + 0x58)[0], 0xa1);
	assert_int_equal(unit_le(hva(FB(0) + 0x5c), 4), 1u << 3);
	disk_pattern(want, 300, 4);
	assert_memory_equal(hva(DATA_GPA), want, sizeof(want));
	/* An NCQ read past the end fails with the tag still active. */
	h2d(fis, 0x60, DISK_SECTORS - 2, 5 << 3, 4);
	build(0, 5, fis, NULL, &prd, 1);
	wr(PX(0, P_SACT), 1u << 5);
	issue(0, 5);
	assert_failed(0, IS_TFES);
	assert_int_equal(rd(PX(0, P_SACT)), 1u << 5);
	assert_recovers(0);
	assert_int_equal(rd(PX(0, P_SACT)), 0);
}

static void test_trim(void **state)
{
	struct prd prd = {DATA_GPA, 512};
	uint8_t fis[20], got[8 * 512], zero[8 * 512] = {0};

	(void)state;
	unit_put_le(hva(DATA_GPA), 16 | (8ull << 48), 8); /* LBA 16, 8 sectors */
	h2d(fis, 0x06, 0, 1, 1);                          /* DSM, TRIM, 1 block */
	build(0, 0, fis, NULL, &prd, 1);
	issue(0, 0);
	assert_ok(0, 0);
	pread_disk(got, 16 * 512, sizeof(got));
	assert_memory_equal(got, zero, sizeof(got));
	/* A range past the end is refused. */
	unit_put_le(hva(DATA_GPA), (DISK_SECTORS - 1) | (2ull << 48), 8);
	issue(0, 0);
	assert_failed(0, IS_TFES);
	assert_recovers(0);
	/* TRIM without the TRIM bit, or with 0 or too many blocks, aborts. */
	h2d(fis, 0x06, 0, 0, 1);
	build(0, 1, fis, NULL, &prd, 1);
	issue(0, 1);
	assert_failed(0, IS_TFES);
	assert_recovers(0);
}

static void test_set_features_and_noops(void **state)
{
	uint8_t fis[20];

	(void)state;
	h2d(fis, 0xef, 0, 0x46, 0x03); /* transfer mode UDMA 6 */
	build(0, 0, fis, NULL, NULL, 0);
	issue(0, 0);
	assert_ok(0, 0);
	h2d(fis, 0xef, 0, 0, 0x82); /* write cache off */
	build(0, 1, fis, NULL, NULL, 0);
	issue(0, 1);
	assert_ok(0, 1);
	ata(0, 2, 0xe1, 0, 0, NULL, 0); /* IDLE IMMEDIATE */
	assert_ok(0, 2);
	ata(0, 3, 0xe0, 0, 0, NULL, 0); /* STANDBY IMMEDIATE */
	assert_ok(0, 3);
	h2d(fis, 0xef, 0, 0, 0x7e); /* unknown subcommand */
	build(0, 4, fis, NULL, NULL, 0);
	issue(0, 4);
	assert_failed(0, IS_TFES);
	assert_recovers(0);
}

static void test_several_slots_at_once(void **state)
{
	struct prd prd[3] = {{DATA_GPA, 512}, {DATA_GPA + 0x1000, 512}, {DATA_GPA + 0x2000, 512}};
	uint8_t fis[20], want[512];

	(void)state;
	for (unsigned s = 0; s < 3; s++) {
		h2d(fis, 0x25, 40 + s, 1, 0);
		build(0, s + 10, fis, NULL, &prd[s], 1);
	}
	wr(PX(0, P_CI), 7u << 10);
	assert_int_equal(rd(PX(0, P_CI)), 0);
	for (unsigned s = 0; s < 3; s++) {
		disk_pattern(want, 40 + s, 1);
		assert_memory_equal(hva(DATA_GPA + s * 0x1000), want, 512);
	}
}

/* ---- ATAPI ---- */

static void test_atapi_inquiry_read(void **state)
{
	uint8_t inq[12] = {0x12, 0, 0, 0, 96}, rd10[12] = {0x28, 0, 0, 0, 0, 2, 0, 0, 3};
	uint8_t cap[12] = {0x25}, tur[12] = {0};
	uint8_t want[3 * 2048];

	(void)state;
	packet(0, tur, 0);
	assert_ok(1, 0);
	packet(1, inq, 96);
	assert_ok(1, 1);
	assert_int_equal(prdbc(1, 1), 36);
	assert_int_equal(hva(DATA_GPA)[0], 0x05); /* CD/DVD */
	assert_int_equal(hva(DATA_GPA)[1], 0x80); /* removable */
	assert_memory_equal(hva(DATA_GPA + 8), "KHYVE   ", 8);
	packet(2, cap, 8);
	assert_ok(1, 2);
	assert_int_equal(hva(DATA_GPA)[3], ISO_BLOCKS - 1);
	assert_int_equal(hva(DATA_GPA)[6], 0x08); /* 2048 */
	packet(3, rd10, 3 * 2048);
	assert_ok(1, 3);
	for (unsigned b = 0; b < 3; b++)
		memset(want + b * 2048, 'A' + 2 + b, 2048);
	assert_memory_equal(hva(DATA_GPA), want, sizeof(want));
	assert_int_equal(prdbc(1, 3), 3 * 2048);
	/* The D2H FIS says: command done, data in. */
	assert_int_equal(hva(FB(1) + 0x40)[12], 3);
}

static void test_atapi_toc_and_friends(void **state)
{
	uint8_t toc[12] = {0x43, 0, 0, 0, 0, 0, 0, 0, 100};
	uint8_t toc_msf[12] = {0x43, 2, 0, 0, 0, 0, 0, 0, 100};
	uint8_t sess[12] = {0x43, 0, 1, 0, 0, 0, 0, 0, 100};
	uint8_t mode[12] = {0x5a, 0, 0x2a, 0, 0, 0, 0, 0, 100};
	uint8_t conf[12] = {0x46, 0, 0, 0, 0, 0, 0, 0, 100};
	uint8_t event[12] = {0x4a, 1, 0, 0, 0x10, 0, 0, 0, 8};
	uint8_t ssu[12] = {0x1b, 0, 0, 0, 1}, pam[12] = {0x1e, 0, 0, 0, 1};
	uint8_t *d = hva(DATA_GPA);

	(void)state;
	packet(0, toc, 100);
	assert_ok(1, 0);
	assert_int_equal(unit_le(d, 1) << 8 | d[1], 18); /* 2 descriptors + 2 */
	assert_int_equal(d[6], 1);                       /* track 1 */
	assert_int_equal(d[14], 0xaa);                   /* lead-out */
	assert_int_equal(d[19], ISO_BLOCKS);             /* at LBA 32 */
	packet(1, toc_msf, 100);
	assert_ok(1, 1);
	assert_int_equal(d[10], 2); /* track 1 at 00:02:00 */
	assert_int_equal(d[18], 2); /* lead-out at 150 + 32 = 00:02:32 */
	assert_int_equal(d[19], 32);
	packet(2, sess, 100);
	assert_ok(1, 2);
	assert_int_equal(d[1], 10);
	packet(3, mode, 100);
	assert_ok(1, 3);
	assert_int_equal(d[8], 0x2a);
	packet(4, conf, 100);
	assert_ok(1, 4);
	assert_int_equal(d[7], 0x08); /* current profile CD-ROM */
	packet(5, event, 8);
	assert_ok(1, 5);
	assert_int_equal(d[5], 0x02); /* medium present */
	packet(6, ssu, 0);
	assert_ok(1, 6);
	packet(7, pam, 0);
	assert_ok(1, 7);
}

static void request_sense(unsigned slot, uint8_t key, uint8_t asc)
{
	uint8_t rs[12] = {0x03, 0, 0, 0, 18};

	packet(slot, rs, 18);
	assert_ok(1, slot);
	assert_int_equal(hva(DATA_GPA)[0], 0x70);
	assert_int_equal(hva(DATA_GPA)[2], key);
	assert_int_equal(hva(DATA_GPA)[12], asc);
}

static void test_atapi_errors(void **state)
{
	uint8_t bad[12] = {0xff}, rd10[12] = {0x28, 0, 0, 0, 0, ISO_BLOCKS - 1, 0, 0, 2};
	uint8_t rd12[12] = {0xa8, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	uint8_t mode[12] = {0x5a, 0, 0x3e, 0, 0, 0, 0, 0, 100};

	(void)state;
	packet(0, bad, 0);
	assert_failed(1, IS_TFES);
	assert_int_equal(rd(PX(1, P_TFD)) >> 12, 5); /* sense key in ERR[7:4] */
	assert_recovers(1);
	request_sense(1, 0x05, 0x20); /* INVALID COMMAND OPERATION CODE */
	packet(2, rd10, 4096);
	assert_failed(1, IS_TFES);
	assert_recovers(1);
	request_sense(3, 0x05, 0x21); /* LBA OUT OF RANGE */
	packet(4, rd12, 4096);
	assert_failed(1, IS_TFES);
	assert_recovers(1);
	request_sense(5, 0x05, 0x21);
	packet(6, mode, 100);
	assert_failed(1, IS_TFES);
	assert_recovers(1);
	request_sense(8, 0x05, 0x24); /* INVALID FIELD IN CDB */
	/* ATA reads are not for the CD-ROM. */
	ata(1, 9, 0x25, 0, 1, &(struct prd){DATA_GPA, 512}, 1);
	assert_failed(1, IS_TFES);
	assert_recovers(1);
}

/* ---- hostile input ---- */

static void test_bad_command_list(void **state)
{
	(void)state;
	port_stop(0);
	wr(PX(0, P_CLB), (uint32_t)OUTSIDE_GPA);
	wr(PX(0, P_CMD), (1u << 4) | 1);
	issue(0, 0);
	assert_failed(0, IS_HBFS);
	port_stop(0);
	wr(PX(0, P_CLBU), 0xffffffff); /* wraps around 2^64 */
	wr(PX(0, P_CMD), (1u << 4) | 1);
	issue(0, 31);
	assert_failed(0, IS_HBFS);
	wr(PX(0, P_CLBU), 0);
	assert_recovers(0);
}

static void test_bad_command_table(void **state)
{
	uint8_t fis[20];

	(void)state;
	ata(0, 0, 0xec, 0, 0, NULL, 0);
	put32(CLB(0) + 8, (uint32_t)OUTSIDE_GPA);
	issue(0, 0);
	assert_failed(0, IS_HBFS);
	assert_recovers(0);
	/* A table whose PRDT runs off the end of RAM. */
	h2d(fis, 0xec, 0, 0, 0);
	build(0, 1, fis, NULL, NULL, 0);
	put32(CLB(0) + 32 + 8, (uint32_t)(RAM_GPA + RAM_SIZE - 0x80));
	put32(CLB(0) + 32, 5u | 4u << 16);
	memcpy(hva(RAM_GPA + RAM_SIZE - 0x80), fis, 20);
	issue(0, 1);
	assert_failed(0, IS_HBFS);
	assert_recovers(0);
}

static void test_bad_fis_area(void **state)
{
	struct prd prd = {DATA_GPA, 512};

	(void)state;
	port_stop(0);
	wr(PX(0, P_FB), (uint32_t)(RAM_GPA + RAM_SIZE));
	wr(PX(0, P_CMD), (1u << 4) | 1);
	ata(0, 0, 0xec, 0, 0, &prd, 1);
	/* The command still completes; the FIS could not be delivered. */
	assert_int_equal(rd(PX(0, P_CI)), 0);
	assert_true(rd(PX(0, P_IS)) & IS_HBFS);
	port_stop(0);
	wr(PX(0, P_FB), (uint32_t)FB(0));
	assert_recovers(0);
}

static void test_bad_prdt(void **state)
{
	struct prd outside = {OUTSIDE_GPA, 512}, odd = {DATA_GPA, 511}, one = {DATA_GPA, 1};
	struct prd straddle = {RAM_GPA + RAM_SIZE - 256, 512};
	struct prd small[2] = {{DATA_GPA, 256}, {DATA_GPA + 0x1000, 128}};
	struct prd rom = {DATA_GPA, 512};
	uint8_t fis[20];

	(void)state;
	ata(0, 0, 0x25, 0, 1, &outside, 1);
	assert_failed(0, IS_HBFS);
	assert_recovers(0);
	ata(0, 0, 0x25, 0, 1, &straddle, 1);
	assert_failed(0, IS_HBFS);
	assert_recovers(0);
	ata(0, 0, 0x25, 0, 1, &odd, 1);
	assert_failed(0, IS_TFES);
	assert_recovers(0);
	ata(0, 0, 0x25, 0, 1, &one, 1); /* DBC field 0: one byte */
	assert_failed(0, IS_TFES);
	assert_recovers(0);
	ata(0, 0, 0x25, 0, 2, small, 2); /* 384 bytes for 1024 */
	assert_failed(0, IS_TFES | IS_OFS);
	assert_recovers(0);
	/* Zero entries for a read that has data. */
	ata(0, 0, 0x25, 0, 1, NULL, 0);
	assert_failed(0, IS_TFES);
	assert_recovers(0);
	/* PRDTL over the limit: refused before any entry is read. */
	h2d(fis, 0x25, 0, 1, 0);
	build(0, 0, fis, NULL, &rom, 1);
	put32(CLB(0), 5u | 0xffffu << 16);
	issue(0, 0);
	assert_failed(0, IS_TFES);
	assert_recovers(0);
}

static void test_lba_out_of_range(void **state)
{
	struct prd prd = {DATA_GPA, 1024};

	(void)state;
	ata(0, 0, 0x25, DISK_SECTORS - 1, 2, &prd, 1);
	assert_failed(0, IS_TFES);
	assert_int_equal((rd(PX(0, P_TFD)) >> 8) & 0x10, 0x10); /* IDNF */
	assert_recovers(0);
	ata(0, 0, 0x35, 0xffffffffffffull, 0, &prd, 1); /* count 0 = 65536, LBA max */
	assert_failed(0, IS_TFES);
	assert_recovers(0);
	ata(0, 0, 0xca, 0x0fffffff, 1, &prd, 1); /* 28-bit */
	assert_failed(0, IS_TFES);
	assert_recovers(0);
	ata(0, 0, 0x40, DISK_SECTORS, 1, NULL, 0); /* READ VERIFY */
	assert_failed(0, IS_TFES);
	assert_recovers(0);
}

static void test_bad_fis(void **state)
{
	uint8_t fis[20];

	(void)state;
	h2d(fis, 0xec, 0, 0, 0);
	fis[0] = 0x34; /* a D2H FIS type from the host */
	build(0, 0, fis, NULL, NULL, 0);
	issue(0, 0);
	assert_failed(0, IS_TFES);
	assert_recovers(0);
	h2d(fis, 0xec, 0, 0, 0);
	build(0, 0, fis, NULL, NULL, 0);
	put32(CLB(0), 0); /* CFL 0 */
	issue(0, 0);
	assert_failed(0, IS_TFES);
	assert_recovers(0);
	ata(0, 0, 0xff, 0, 0, NULL, 0); /* unknown command */
	assert_failed(0, IS_TFES);
	assert_int_equal((rd(PX(0, P_TFD)) >> 8) & 0x04, 0x04); /* ABRT */
	assert_recovers(0);
	ata(0, 0, 0x00, 0, 0, NULL, 0); /* NOP aborts */
	assert_failed(0, IS_TFES);
	assert_recovers(0);
	ata(0, 0, 0xa0, 0, 0, NULL, 0); /* PACKET on a disk */
	assert_failed(0, IS_TFES);
	assert_recovers(0);
}

static void test_no_commands_while_stopped(void **state)
{
	struct prd prd = {DATA_GPA, 512};

	(void)state;
	port_stop(0);
	ata(0, 0, 0xec, 0, 0, &prd, 1);
	assert_int_equal(rd(PX(0, P_CI)), 0); /* CI only takes bits while ST */
	assert_int_equal(get32(CLB(0) + 4), 0xdeadbeef);
	/* A halted port takes no more commands until ST is cleared. */
	port_start(0);
	ata(0, 0, 0xff, 0, 0, NULL, 0);
	assert_failed(0, IS_TFES);
	ata(0, 1, 0xec, 0, 0, &prd, 1);
	assert_int_equal(rd(PX(0, P_CI)), 3);
	assert_int_equal(prdbc(0, 1), 0xdeadbeef);
	assert_recovers(0);
}

static void test_software_reset(void **state)
{
	uint8_t fis[20] = {0x27, 0, 0, 0};

	(void)state;
	fis[15] = 0x04; /* SRST */
	build(1, 0, fis, NULL, NULL, 0);
	issue(1, 0);
	assert_int_equal(rd(PX(1, P_CI)), 0);
	assert_int_equal(rd(PX(1, P_TFD)) & 0x80, 0x80);
	fis[15] = 0;
	build(1, 1, fis, NULL, NULL, 0);
	issue(1, 1);
	assert_int_equal(rd(PX(1, P_TFD)) & 0xff, 0x50);
	assert_int_equal(hva(FB(1) + 0x40)[5], 0x14);
	assert_int_equal(hva(FB(1) + 0x40)[6], 0xeb);
}

/* ---- media change ---- */

static const struct machine_media_drive *drive(const char *name)
{
	const struct machine_media_drive *d = machine_media_drive(&m, name);

	assert_non_null(d);
	return d;
}

/* Change cd0's medium to `path` (NULL: eject); the change()'s return. */
static int change(const char *path, bool force, char *err, size_t errlen)
{
	const struct machine_media_drive *d = drive("cd0");
	int fd = -1;

	if (path != NULL) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
	}
	return d->change(d->dev, fd, force, err, errlen);
}

static void assert_state(const char *name, bool present, bool locked, uint64_t bytes)
{
	const struct machine_media_drive *d = drive(name);
	bool p = !present, l = !locked;
	uint64_t b = ~bytes;

	d->state(d->dev, &p, &l, &b);
	assert_int_equal(p, present);
	assert_int_equal(l, locked);
	assert_int_equal(b, bytes);
}

/* The packet on port 1 ended in CHECK CONDITION with `key`/`asc`/`ascq`. */
static void assert_check_condition(unsigned slot, uint8_t key, uint8_t asc, uint8_t ascq)
{
	uint8_t rs[12] = {0x03, 0, 0, 0, 18};

	(void)slot;
	assert_failed(1, IS_TFES);
	assert_int_equal(rd(PX(1, P_TFD)) >> 12, key); /* sense key in ERR[7:4] */
	assert_recovers(1);
	packet(30, rs, 18);
	assert_ok(1, 30);
	assert_int_equal(hva(DATA_GPA)[2], key);
	assert_int_equal(hva(DATA_GPA)[12], asc);
	assert_int_equal(hva(DATA_GPA)[13], ascq);
}

/* GESN media class: the event code and the media-present bit. */
static void assert_media_event(unsigned slot, uint8_t event, bool present)
{
	uint8_t gesn[12] = {0x4a, 1, 0, 0, 0x10, 0, 0, 0, 8};

	packet(slot, gesn, 8);
	assert_ok(1, slot);
	assert_int_equal(hva(DATA_GPA)[2], 4); /* media class */
	assert_int_equal(hva(DATA_GPA)[4] & 0x0f, event);
	assert_int_equal(hva(DATA_GPA)[5] & 2, present ? 2 : 0);
}

/* HBA reset, then cd0 holds cd.iso again, its unit attention and event heard. */
static int media_reset(void **state)
{
	char err[128] = "";
	uint8_t rs[12] = {0x03, 0, 0, 0, 18};

	reset(state);
	if (change(iso_path, true, err, sizeof(err)) < 0)
		return -1;
	packet(0, rs, 18); /* takes the unit attention */
	assert_media_event(1, 2, true);
	return 0;
}

static void test_media_drives(void **state)
{
	const struct machine_media_drive *d0 = drive("cd0"), *d1 = drive("cd1");

	(void)state;
	assert_int_equal(m.nmedia, 2);
	assert_string_equal(d0->device, "ahci-cd");
	assert_string_equal(d0->slot, "4:0");
	assert_int_equal(d0->port, 1);
	assert_string_equal(d1->slot, "5:0");
	assert_int_equal(d1->port, 0);
	assert_null(machine_media_drive(&m, "cd2"));
	assert_state("cd0", true, false, ISO_BLOCKS * 2048);
	assert_state("cd1", false, false, 0); /* -s 5,ahci-cd: an empty tray */
}

static void test_media_empty(void **state)
{
	uint8_t tur[12] = {0}, cap[12] = {0x25}, inq[12] = {0x12, 0, 0, 0, 36};
	uint8_t rd10[12] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1}, rs[12] = {0x03, 0, 0, 0, 18};
	uint8_t conf[12] = {0x46, 0, 0, 0, 0, 0, 0, 0, 100};
	char err[128] = "";

	(void)state;
	assert_int_equal(change(NULL, false, err, sizeof(err)), 0);
	assert_state("cd0", false, false, 0);
	assert_media_event(0, 3, false); /* MediaRemoval, once */
	assert_media_event(1, 0, false);
	packet(2, tur, 0);
	assert_check_condition(2, 0x02, 0x3a, 0); /* NOT READY, MEDIUM NOT PRESENT */
	packet(3, cap, 8);
	assert_check_condition(3, 0x02, 0x3a, 0);
	packet(4, rd10, 2048);
	assert_check_condition(4, 0x02, 0x3a, 0);
	packet(5, inq, 36); /* still a drive */
	assert_ok(1, 5);
	packet(6, conf, 100);
	assert_ok(1, 6);
	assert_int_equal(hva(DATA_GPA)[7], 0); /* no current profile */
	packet(7, rs, 18);                     /* nothing pending: the condition now */
	assert_ok(1, 7);
	assert_int_equal(hva(DATA_GPA)[2], 0x02);
	assert_int_equal(hva(DATA_GPA)[12], 0x3a);
	/* Ejecting an empty tray is fine. */
	assert_int_equal(change(NULL, false, err, sizeof(err)), 0);
}

static void test_media_insert(void **state)
{
	uint8_t tur[12] = {0}, cap[12] = {0x25}, inq[12] = {0x12, 0, 0, 0, 36};
	uint8_t rd10[12] = {0x28, 0, 0, 0, 0, 40, 0, 0, 2};
	uint8_t want[2 * 2048];
	char err[128] = "";

	(void)state;
	assert_int_equal(change(iso2_path, false, err, sizeof(err)), 0);
	assert_state("cd0", true, false, ISO2_BLOCKS * 2048);
	packet(0, inq, 36); /* INQUIRY passes a unit attention */
	assert_ok(1, 0);
	assert_media_event(1, 2, true); /* NewMedia, once */
	assert_media_event(2, 0, true);
	packet(3, tur, 0);
	assert_check_condition(3, 0x06, 0x28, 0); /* UNIT ATTENTION, MEDIUM MAY HAVE CHANGED */
	packet(4, tur, 0);                        /* once */
	assert_ok(1, 4);
	packet(5, cap, 8);
	assert_ok(1, 5);
	assert_int_equal(unit_le(hva(DATA_GPA) + 2, 1) << 8 | hva(DATA_GPA)[3], ISO2_BLOCKS - 1);
	packet(6, rd10, sizeof(want));
	assert_ok(1, 6);
	memset(want, 'a' + 40 % 26, 2048);
	memset(want + 2048, 'a' + 41 % 26, 2048);
	assert_memory_equal(hva(DATA_GPA), want, sizeof(want));
	/* The empty drive cd1 takes a medium too. */
	{
		const struct machine_media_drive *d1 = drive("cd1");

		assert_int_equal(
		    d1->change(d1->dev, open(iso_path, O_RDONLY), false, err, sizeof(err)), 0);
		assert_state("cd1", true, false, ISO_BLOCKS * 2048);
		assert_int_equal(d1->change(d1->dev, -1, false, err, sizeof(err)), 0);
		assert_state("cd1", false, false, 0);
	}
}

static void test_media_locked(void **state)
{
	uint8_t lock[12] = {0x1e, 0, 0, 0, 1}, unlock[12] = {0x1e};
	uint8_t mode[12] = {0x5a, 0, 0x2a, 0, 0, 0, 0, 0, 100};
	char err[128] = "";
	int fd;

	(void)state;
	packet(0, lock, 0);
	assert_ok(1, 0);
	assert_state("cd0", true, true, ISO_BLOCKS * 2048);
	packet(5, mode, 100); /* the capabilities page shows the lock */
	assert_ok(1, 5);
	assert_int_equal(hva(DATA_GPA)[8 + 6], 0x2b);
	assert_int_equal(change(NULL, false, err, sizeof(err)), -1);
	assert_string_equal(err, "the guest locked the tray (force ejects anyway)");
	fd = open(iso2_path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(drive("cd0")->change(drive("cd0")->dev, fd, false, err, sizeof(err)), -1);
	assert_int_equal(fcntl(fd, F_GETFD), -1); /* the drive closed it */
	assert_state("cd0", true, true, ISO_BLOCKS * 2048);
	assert_media_event(1, 0, true); /* nothing happened */
	assert_int_equal(change(NULL, true, err, sizeof(err)), 0);
	assert_state("cd0", false, true, 0);
	packet(2, unlock, 0);
	assert_ok(1, 2);
	assert_state("cd0", false, false, 0);
	/* An HBA reset unlocks too. */
	assert_int_equal(change(iso_path, false, err, sizeof(err)), 0);
	packet(3, lock, 0);
	assert_check_condition(3, 0x06, 0x28, 0); /* the insert's unit attention first */
	packet(4, lock, 0);
	assert_ok(1, 4);
	assert_state("cd0", true, true, ISO_BLOCKS * 2048);
	wr(GHC, 1);
	assert_state("cd0", true, false, ISO_BLOCKS * 2048);
}

static void test_media_guest_eject(void **state)
{
	uint8_t eject[12] = {0x1b, 0, 0, 0, 2}, load[12] = {0x1b, 0, 0, 0, 3};
	uint8_t lock[12] = {0x1e, 0, 0, 0, 1}, unlock[12] = {0x1e}, tur[12] = {0};

	(void)state;
	packet(0, lock, 0);
	assert_ok(1, 0);
	packet(1, eject, 0);
	assert_check_condition(1, 0x05, 0x53, 0x02); /* MEDIUM REMOVAL PREVENTED */
	assert_state("cd0", true, true, ISO_BLOCKS * 2048);
	packet(2, unlock, 0);
	assert_ok(1, 2);
	packet(3, load, 0); /* LoEj with Start: load, nothing to do */
	assert_ok(1, 3);
	assert_state("cd0", true, false, ISO_BLOCKS * 2048);
	packet(4, eject, 0);
	assert_ok(1, 4);
	assert_state("cd0", false, false, 0);
	assert_media_event(5, 3, false);
	packet(6, tur, 0);
	assert_check_condition(6, 0x02, 0x3a, 0);
	packet(7, eject, 0); /* again: still fine */
	assert_ok(1, 7);
}

static void test_media_refuses_directory(void **state)
{
	const struct machine_media_drive *d = drive("cd0");
	char err[128] = "";
	int fd = open(dir, O_RDONLY | O_DIRECTORY);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(d->change(d->dev, fd, false, err, sizeof(err)), -1);
	assert_string_equal(err, "not a regular file or block device");
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_state("cd0", true, false, ISO_BLOCKS * 2048);
	assert_media_event(0, 0, true);
}

/*
 * A second thread reads block 0 of cd0 (as a vCPU would) while this one
 * swaps cd.iso ('A') and cd2.iso ('a') in.  `changes_begun` and
 * `changes_done` count the changes that were called and that returned.
 * A read that began with no change under way and saw none begin before
 * it ended must show the image of the last change that returned.  (A
 * change under way may already have swapped the image, so a read that
 * overlaps one can show either.)
 */
#define RACE_CHANGES 200

static atomic_uint changes_begun, changes_done;
static atomic_bool race_stop;
static unsigned race_reads, race_stale, race_attention;

static void *race_reader(void *arg)
{
	uint8_t rd10[12] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1};

	(void)arg;
	while (!atomic_load(&race_stop)) {
		unsigned done = atomic_load(&changes_done);
		unsigned begun = atomic_load(&changes_begun);
		bool quiet;
		uint8_t got;

		hva(DATA_GPA)[0] = 0;
		packet(0, rd10, 2048);
		quiet = begun == done && atomic_load(&changes_begun) == begun;
		if (rd(PX(1, P_IS)) & IS_TFES) { /* the unit attention of an insert */
			race_attention++;
			port_stop(1);
			wr(PX(1, P_IS), 0xffffffff);
			port_start(1);
			continue;
		}
		got = hva(DATA_GPA)[0];
		race_reads++;
		if (quiet && got != (done % 2 ? 'a' : 'A'))
			race_stale++;
	}
	return NULL;
}

static void test_media_change_races_read(void **state)
{
	pthread_t t;
	char err[128] = "";

	(void)state;
	atomic_store(&changes_begun, 0);
	atomic_store(&changes_done, 0);
	atomic_store(&race_stop, false);
	race_reads = race_stale = race_attention = 0;
	assert_int_equal(pthread_create(&t, NULL, race_reader, NULL), 0);
	for (unsigned i = 1; i <= RACE_CHANGES; i++) {
		atomic_store(&changes_begun, i);
		assert_int_equal(change(i % 2 ? iso2_path : iso_path, false, err, sizeof(err)), 0);
		atomic_store(&changes_done, i);
		if (i % 8 == 0)
			usleep(200);
	}
	atomic_store(&race_stop, true);
	pthread_join(t, NULL);
	assert_int_equal(race_stale, 0);
	assert_true(race_reads + race_attention > 0);
	assert_state("cd0", true, false, ISO_BLOCKS * 2048);
}

/* ---- options ---- */

static int config_setup(void **state)
{
	(void)state;
	config_reset();
	return 0;
}

static void test_parse_options(void **state)
{
	char err[256] = "";

	(void)state;
	assert_int_equal(pci_parse_slot_option("4,ahci,hd:/a.img,nmrr=1,ser=XY,ro,cd:/b.iso,"
	                                       "model=M,hd:/c.img",
	                                       err, sizeof(err)),
	                 0);
	assert_string_equal(config_get("pci.0.4.0.port.0.type"), "hd");
	assert_string_equal(config_get("pci.0.4.0.port.0.path"), "/a.img");
	assert_string_equal(config_get("pci.0.4.0.port.0.nmrr"), "1");
	assert_string_equal(config_get("pci.0.4.0.port.0.ser"), "XY");
	assert_string_equal(config_get("pci.0.4.0.port.0.ro"), "true");
	assert_string_equal(config_get("pci.0.4.0.port.1.type"), "cd");
	assert_string_equal(config_get("pci.0.4.0.port.1.path"), "/b.iso");
	assert_string_equal(config_get("pci.0.4.0.port.1.model"), "M");
	assert_string_equal(config_get("pci.0.4.0.port.2.path"), "/c.img");
	assert_int_equal(
	    pci_parse_slot_option("5,ahci-hd,/d.img,sectorsize=4096", err, sizeof(err)), 0);
	assert_string_equal(config_get("pci.0.5.0.port.0.type"), "hd");
	assert_string_equal(config_get("pci.0.5.0.port.0.sectorsize"), "4096");
	assert_int_equal(pci_parse_slot_option("6,ahci-cd,/e.iso", err, sizeof(err)), 0);
	assert_string_equal(config_get("pci.0.6.0.port.0.type"), "cd");
	assert_int_equal(pci_parse_slot_option("7,ahci", err, sizeof(err)), -1);
	assert_int_equal(pci_parse_slot_option("8,ahci,/x.img", err, sizeof(err)), -1);
	assert_contains(err, "hd:PATH");
	assert_int_equal(pci_parse_slot_option("9,ahci,hd:", err, sizeof(err)), -1);
	assert_int_equal(pci_parse_slot_option("10,ahci-hd", err, sizeof(err)), -1);
	/* CD ports without a path: empty trays. */
	assert_int_equal(pci_parse_slot_option("11,ahci-cd", err, sizeof(err)), 0);
	assert_string_equal(config_get("pci.0.11.0.port.0.type"), "cd");
	assert_null(config_get("pci.0.11.0.port.0.path"));
	assert_int_equal(pci_parse_slot_option("12,ahci,hd:/a.img,cd:,cd:/b.iso", err, sizeof(err)),
	                 0);
	assert_string_equal(config_get("pci.0.12.0.port.1.type"), "cd");
	assert_null(config_get("pci.0.12.0.port.1.path"));
	assert_string_equal(config_get("pci.0.12.0.port.2.path"), "/b.iso");
	assert_int_equal(pci_parse_slot_option("13,ahci-cd,,model=M", err, sizeof(err)), 0);
	assert_null(config_get("pci.0.13.0.port.0.path"));
	assert_string_equal(config_get("pci.0.13.0.port.0.model"), "M");
	assert_int_equal(pci_parse_slot_option("14,ahci,cd:,hd:", err, sizeof(err)), -1);
}

/* init() refuses bad port options before touching the function. */
static void init_error(const char *key, const char *val, const char *want)
{
	const struct pci_devemu *de = pci_devemu_find("ahci");
	struct pci_func pf;
	char err[256] = "", path[64];

	config_reset();
	config_set("pci.0.4.0.device", "ahci");
	config_set("pci.0.4.0.port.0.type", "hd");
	config_set("pci.0.4.0.port.0.path", disk_path);
	snprintf(path, sizeof(path), "pci.0.4.0.port.%s", key);
	config_set(path, val);
	memset(&pf, 0, sizeof(pf));
	assert_int_equal(de->init(&m, &pf, config_find_node("pci.0.4.0"), err, sizeof(err)), -1);
	assert_contains(err, want);
}

static void test_init_errors(void **state)
{
	(void)state;
	init_error("0.nmrr", "5", "nmrr");
	init_error("0.nmrr", "70000", "nmrr");
	init_error("0.ser", "012345678901234567890", "ser");
	init_error("0.model", "bad\001", "model");
	init_error("0.rev", "123456789", "rev");
	init_error("0.type", "tape", "type");
	init_error("40.type", "hd", "port number");
	init_error("0.path", "/nonexistent/disk.img", "");
	init_error("0.sectorsize", "1000", "sectorsize");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup(fn, reset)
	const struct CMUnitTest tests[] = {
	    T(test_hba_registers),
	    T(test_comreset),
	    T(test_identify),
	    T(test_interrupt_modes),
	    T(test_rw_dma_ext),
	    T(test_ncq_read),
	    T(test_trim),
	    T(test_set_features_and_noops),
	    T(test_several_slots_at_once),
	    T(test_atapi_inquiry_read),
	    T(test_atapi_toc_and_friends),
	    T(test_atapi_errors),
	    T(test_bad_command_list),
	    T(test_bad_command_table),
	    T(test_bad_fis_area),
	    T(test_bad_prdt),
	    T(test_lba_out_of_range),
	    T(test_bad_fis),
	    T(test_no_commands_while_stopped),
	    T(test_software_reset),
	    cmocka_unit_test_setup(test_media_drives, media_reset),
	    cmocka_unit_test_setup(test_media_empty, media_reset),
	    cmocka_unit_test_setup(test_media_insert, media_reset),
	    cmocka_unit_test_setup(test_media_locked, media_reset),
	    cmocka_unit_test_setup(test_media_guest_eject, media_reset),
	    cmocka_unit_test_setup(test_media_refuses_directory, media_reset),
	    cmocka_unit_test_setup(test_media_change_races_read, media_reset),
	    cmocka_unit_test_setup(test_parse_options, config_setup),
	    cmocka_unit_test_setup(test_init_errors, config_setup),
	};
#undef T

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
