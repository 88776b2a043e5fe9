/*
 * Unit tests for PCI passthrough's device model (src/dev/passthru.c)
 * without a host device: passthru_test_open stands in for VFIO with a
 * file whose bytes play the device (config space at offset 0, BAR 0 at
 * 64 KiB, the I/O BAR 2 at 128 KiB), so what the guest's accesses reach
 * is checked in the file.  Config space: the header and MSI-X emulated,
 * the other bytes the device's, MSI unlinked, the command register
 * forwarded; BARs at guest addresses of their own, trapped accesses
 * forwarded, the MSI-X table kept from the device.  A second function (slot
 * 6, its own file) has MSI and no MSI-X: its capability stays, in khyve's
 * one-vector layout, emulated.  The first has an expansion ROM (offered
 * as a copy in a ROM BAR); the second's ROM region holds no signature
 * (none offered).
 */
#include "unit.h"

#include <fcntl.h>

#include "backend/vfio.h"
#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "dev/passthru.h"
#include "lib/config.h"

#define BAR0_OFF  0x10000u
#define BAR0_SIZE 0x4000u
#define BAR2_OFF  0x20000u
#define BAR2_SIZE 0x20u
#define ROM_OFF   0x30000u /* the expansion ROM region (VFIO's ROM index) */
#define ROM_SIZE  0x800u
#define MSIX_CAP  0x60u
#define NVEC      8

static char path[64];
static int devfd = -1, msifd = -1; /* the NVMe-like device; the MSI-only one */
static struct machine m;
static struct pci_func *f, *f6;

static void put(uint64_t off, const void *buf, size_t len)
{
	assert_int_equal(pwrite(devfd, buf, len, (off_t)off), (ssize_t)len);
}

static uint32_t get(uint64_t off, unsigned size)
{
	uint32_t v = 0;

	assert_int_equal(pread(devfd, &v, size, (off_t)off), (ssize_t)size);
	return v;
}

/* An NVMe-like function: PM, MSI, MSI-X (table and PBA in BAR 0), PCIe. */
static void make_device(void)
{
	uint8_t cfg[256] = {0};
	uint32_t v;

	cfg[0] = 0x36, cfg[1] = 0x1b, cfg[2] = 0x10, cfg[3] = 0x00; /* 1b36:0010 */
	cfg[0x06] = PCIM_STATUS_CAPS;
	cfg[0x09] = 0x02, cfg[0x0a] = 0x08, cfg[0x0b] = 0x01;
	v = 0xfebf0000u | 0x4; /* the host's address, 64-bit */
	memcpy(&cfg[PCIR_BAR0], &v, 4);
	v = 0xc001; /* I/O */
	memcpy(&cfg[PCIR_BAR0 + 8], &v, 4);
	cfg[PCIR_CAP_PTR] = 0x40;
	cfg[PCIR_INTPIN] = 1;
	/* PM at 0x40: PMC, PMCSR at 0x44 */
	cfg[0x40] = 0x01, cfg[0x41] = 0x50, cfg[0x42] = 0x03, cfg[0x44] = 0x08;
	/* MSI at 0x50, 64-bit */
	cfg[0x50] = PCIY_MSI, cfg[0x51] = MSIX_CAP, cfg[0x52] = 0x80;
	/* MSI-X at 0x60: 8 vectors, table at BAR0+0x2000, PBA at BAR0+0x3000 */
	cfg[0x60] = PCIY_MSIX, cfg[0x61] = 0x80, cfg[0x62] = NVEC - 1, cfg[0x63] = 0x80;
	cfg[0x64] = 0x00, cfg[0x65] = 0x20;
	cfg[0x68] = 0x00, cfg[0x69] = 0x30;
	/* PCIe at 0x80, the end of the list */
	cfg[0x80] = PCIY_PCIE, cfg[0x81] = 0, cfg[0x82] = 0x02;
	cfg[0x90] = 0x5a; /* device-specific */
	put(0, cfg, sizeof(cfg));
	for (uint32_t off = 0; off < BAR0_SIZE; off += 4) {
		v = 0xb0000000u | off;
		put(BAR0_OFF + off, &v, 4);
	}
	for (uint32_t off = 0; off < BAR2_SIZE; off += 4) {
		v = 0x10000000u | off;
		put(BAR2_OFF + off, &v, 4);
	}
	/* An option ROM: 55 AA, its length in 512-byte units, a pattern. */
	for (uint32_t off = 0; off < ROM_SIZE; off += 4) {
		v = off == 0 ? 0x0004aa55u : 0x20000000u | off;
		put(ROM_OFF + off, &v, 4);
	}
}

/* An MSI-only function: MSI at 0x50 (64-bit, per-vector masking, 4
 * vectors, its mask bits at 0x60), PCIe at 0x70; BAR 0 of 4 KiB. */
static void make_msi_device(void)
{
	uint8_t cfg[256] = {0};
	uint32_t v = 0xfeb00000u;

	cfg[0] = 0x86, cfg[1] = 0x80, cfg[2] = 0x22, cfg[3] = 0x29; /* 8086:2922 */
	cfg[0x06] = PCIM_STATUS_CAPS;
	cfg[0x09] = 0x01, cfg[0x0a] = 0x06, cfg[0x0b] = 0x01;
	memcpy(&cfg[PCIR_BAR0], &v, 4);
	cfg[PCIR_CAP_PTR] = 0x50;
	cfg[PCIR_INTPIN] = 1;
	cfg[0x50] = PCIY_MSI, cfg[0x51] = 0x70, cfg[0x52] = 0x84, cfg[0x53] = 0x01;
	cfg[0x60] = 0x0f; /* the device's mask bits */
	cfg[0x70] = PCIY_PCIE, cfg[0x72] = 0x02;
	assert_int_equal(pwrite(msifd, cfg, sizeof(cfg), 0), (ssize_t)sizeof(cfg));
	assert_int_equal(ftruncate(msifd, BAR0_OFF + 0x1000), 0);
}

static int fake_open(struct vfio_dev *d, const char *host, char *err, size_t errlen)
{
	if (strcmp(host, "0000:00:06.0") == 0) {
		memset(d, 0, sizeof(*d));
		d->container = d->group = -1;
		d->fd = dup(msifd);
		d->flags = VFIO_DEVICE_FLAGS_PCI;
		d->region[VFIO_PCI_CONFIG_REGION_INDEX] = (struct vfio_region){256, 0, 3};
		d->region[VFIO_PCI_BAR0_REGION_INDEX] = (struct vfio_region){0x1000, BAR0_OFF, 3};
		/* A ROM region of zeros: no 55 AA, nothing offered. */
		d->region[VFIO_PCI_ROM_REGION_INDEX] = (struct vfio_region){0x800, BAR0_OFF, 1};
		d->irq_count[VFIO_PCI_INTX_IRQ_INDEX] = 1;
		d->irq_count[VFIO_PCI_MSI_IRQ_INDEX] = 1;
		return 0;
	}
	if (strcmp(host, "0000:00:05.0") != 0) {
		snprintf(err, errlen, "unexpected host %s", host);
		return -1;
	}
	memset(d, 0, sizeof(*d));
	d->container = d->group = -1;
	d->fd = dup(devfd);
	d->flags = VFIO_DEVICE_FLAGS_PCI;
	d->region[VFIO_PCI_CONFIG_REGION_INDEX] = (struct vfio_region){256, 0, 3};
	d->region[VFIO_PCI_BAR0_REGION_INDEX] = (struct vfio_region){BAR0_SIZE, BAR0_OFF, 3};
	d->region[VFIO_PCI_BAR2_REGION_INDEX] = (struct vfio_region){BAR2_SIZE, BAR2_OFF, 3};
	d->region[VFIO_PCI_ROM_REGION_INDEX] = (struct vfio_region){ROM_SIZE, ROM_OFF, 1};
	d->irq_count[VFIO_PCI_INTX_IRQ_INDEX] = 1;
	d->irq_count[VFIO_PCI_MSIX_IRQ_INDEX] = NVEC;
	return 0;
}

static int group_setup(void **state)
{
	char err[256] = "";

	(void)state;
	snprintf(path, sizeof(path), "/tmp/khyve-pt-XXXXXX");
	devfd = mkstemp(path);
	if (devfd < 0)
		return -1;
	unlink(path);
	snprintf(path, sizeof(path), "/tmp/khyve-pt-XXXXXX");
	msifd = mkstemp(path);
	if (msifd < 0)
		return -1;
	unlink(path);
	make_device();
	make_msi_device();
	passthru_test_open = fake_open;
	machine_init_detached(&m, "unit", NULL, 0, 0);
	config_reset();
	if (pci_parse_slot_option("5,passthru,0000:00:05.0", err, sizeof(err)) < 0 ||
	    pci_parse_slot_option("6,passthru,0000:00:06.0", err, sizeof(err)) < 0 ||
	    pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "set-up: %s\n", err);
		return -1;
	}
	f = pci_get(0);
	f6 = pci_get(1);
	return f == NULL || f6 == NULL || f6->slot != 6 ? -1 : 0;
}

static uint32_t cfg_rd(unsigned off, unsigned size)
{
	return pci_cfg_read(0, 5, 0, off, size);
}

static void cfg_wr(unsigned off, unsigned size, uint32_t val)
{
	pci_cfg_write(0, 5, 0, off, size, val);
}

static void test_header(void **state)
{
	uint64_t addr;

	(void)state;
	assert_int_equal(cfg_rd(0, 4), 0x00101b36);
	assert_int_equal(cfg_rd(0x08, 4) >> 8, 0x010802);
	/* BARs hold guest addresses, not the host's. */
	assert_int_equal(f->bar[0].type, PCI_BAR_MEM64);
	assert_int_equal(f->bar[0].size, BAR0_SIZE);
	assert_int_equal(cfg_rd(PCIR_BAR0, 4), (uint32_t)f->bar[0].addr | 0xc);
	assert_true(f->bar[0].addr != 0xfebf0000u);
	assert_int_equal(f->bar[2].type, PCI_BAR_IO);
	assert_int_equal(f->bar[2].size, BAR2_SIZE);
	/* Sizing reads back the size the device's region has. */
	addr = f->bar[2].addr;
	cfg_wr(PCIR_BAR0 + 8, 4, 0xffffffffu);
	assert_int_equal(cfg_rd(PCIR_BAR0 + 8, 4), (uint32_t) ~(BAR2_SIZE - 1) | 1);
	cfg_wr(PCIR_BAR0 + 8, 4, (uint32_t)addr);
	assert_int_equal(f->bar[2].addr, addr);
	/* INTx pin A. */
	assert_int_equal(cfg_rd(PCIR_INTPIN, 1), 1);
}

/* The device's ROM is a ROM BAR of its own (PCI 3.0 6.2.5.2): a guest
 * address, sizing, the copy's bytes; the second device has none. */
static void test_rom(void **state)
{
	struct pci_bar *b = &f->bar[PCI_ROM_BAR];
	uint64_t val;
	uint32_t v;

	(void)state;
	assert_int_equal(b->type, PCI_BAR_ROM);
	assert_int_equal(b->size, ROM_SIZE);
	assert_int_equal(cfg_rd(PCIR_ROM, 4), (uint32_t)b->addr); /* not enabled */
	assert_true(b->addr != 0);
	cfg_wr(PCIR_ROM, 4, 0xfffffffeu);
	assert_int_equal(cfg_rd(PCIR_ROM, 4), (uint32_t) ~(ROM_SIZE - 1));
	/* Enabled with memory decoding on: the guest reads the copy there
	 * (and the device model's BAR hook is not asked to map it). */
	cfg_wr(PCIR_COMMAND, 2, PCIM_CMD_MEM);
	cfg_wr(PCIR_ROM, 4, 0x80000000u | 1);
	assert_int_equal(cfg_rd(PCIR_ROM, 4), 0x80000001u);
	val = 0;
	assert_true(iobus_access(&m.mmio, 0x80000000u, 2, false, &val));
	assert_int_equal(val, 0xaa55);
	assert_true(iobus_access(&m.mmio, 0x80000100u, 4, false, &val));
	assert_int_equal(val, 0x20000100u);
	memcpy(&v, b->rom + 0x100, 4);
	assert_int_equal(v, 0x20000100u);
	cfg_wr(PCIR_ROM, 4, 0);
	cfg_wr(PCIR_COMMAND, 2, 0);
	assert_int_equal(f6->bar[PCI_ROM_BAR].type, PCI_BAR_NONE);
	assert_int_equal(pci_cfg_read(0, 6, 0, PCIR_ROM, 4), 0);
}

static void test_cap_list(void **state)
{
	unsigned ids[8], n = 0;

	(void)state;
	for (unsigned off = cfg_rd(PCIR_CAP_PTR, 1); off != 0 && n < 8; off = cfg_rd(off + 1, 1))
		ids[n++] = cfg_rd(off, 1);
	/* MSI is unlinked: PM, MSI-X, PCIe. */
	assert_int_equal(n, 3);
	assert_int_equal(ids[0], 0x01);
	assert_int_equal(ids[1], PCIY_MSIX);
	assert_int_equal(ids[2], PCIY_PCIE);
	assert_int_equal(f->msix.cap, MSIX_CAP);
	assert_int_equal(f->msix.table_count, NVEC);
}

static void test_device_bytes(void **state)
{
	(void)state;
	/* Read from the device as it is now. */
	assert_int_equal(cfg_rd(0x90, 1), 0x5a);
	put(0x90, "\x77", 1);
	assert_int_equal(cfg_rd(0x90, 1), 0x77);
	/* PMCSR: written through. */
	cfg_wr(0x44, 2, 0x0003);
	assert_int_equal(get(0x44, 2), 0x0003);
	/* A dword over the PM header: its ID and next stay, PMC is written. */
	cfg_wr(0x40, 4, 0xabcd1122);
	assert_int_equal(get(0x40, 2), 0x5001);
	assert_int_equal(get(0x42, 2), 0xabcd);
	assert_int_equal(cfg_rd(0x40, 2), 0x6001); /* MSI skipped */
}

static void test_command_and_bars(void **state)
{
	uint64_t v = 0;

	(void)state;
	cfg_wr(PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_IO | PCIM_CMD_BUSMASTER);
	assert_int_equal(get(PCIR_COMMAND, 2), 0x0007);
	assert_int_equal(cfg_rd(PCIR_COMMAND, 2), 0x0007);
	assert_true(f->bar[0].mapped);
	assert_true(f->bar[2].mapped);
	/* Trapped BAR accesses reach the device at the region's offset. */
	assert_true(iobus_access(&m.mmio, f->bar[0].addr + 0x10, 4, false, &v));
	assert_int_equal(v, 0xb0000010u);
	v = 0x1234;
	assert_true(iobus_access(&m.mmio, f->bar[0].addr + 0x20, 4, true, &v));
	assert_int_equal(get(BAR0_OFF + 0x20, 4), 0x1234);
	assert_true(iobus_access(&m.pio, f->bar[2].addr + 4, 4, false, &v));
	assert_int_equal(v, 0x10000004u);
	v = 0x99;
	assert_true(iobus_access(&m.pio, f->bar[2].addr + 8, 1, true, &v));
	assert_int_equal(get(BAR2_OFF + 8, 1), 0x99);
	/* The command register's reserved bits never reach the device. */
	cfg_wr(PCIR_COMMAND, 2, 0xffff);
	assert_int_equal(get(PCIR_COMMAND, 2), 0x0547);
	cfg_wr(PCIR_COMMAND, 2, 0);
	assert_int_equal(get(PCIR_COMMAND, 2), 0);
	assert_false(f->bar[0].mapped);
}

static void test_msix(void **state)
{
	uint64_t v = 0;

	(void)state;
	/* Adopted disabled (the device's enable bit was set in its copy). */
	assert_int_equal(cfg_rd(MSIX_CAP + 2, 2), NVEC - 1);
	assert_int_equal(cfg_rd(MSIX_CAP + 4, 4), 0x2000);
	assert_int_equal(cfg_rd(MSIX_CAP + 8, 4), 0x3000);
	cfg_wr(PCIR_COMMAND, 2, PCIM_CMD_MEM);
	/* The table traps and is the bus's: the device's bytes stay. */
	assert_true(iobus_access(&m.mmio, f->bar[0].addr + 0x2000 + 12, 4, false, &v));
	assert_int_equal(v, 1);
	v = 0xfee00000u;
	assert_true(iobus_access(&m.mmio, f->bar[0].addr + 0x2000, 4, true, &v));
	assert_int_equal(f->msix.table[0].addr, 0xfee00000u);
	assert_int_equal(get(BAR0_OFF + 0x2000, 4), 0xb0002000u);
	/* Enabling is emulated (not written to the device: VFIO does that). */
	cfg_wr(MSIX_CAP + 2, 2, 0x8000);
	assert_true(pci_msix_enabled(f));
	cfg_wr(MSIX_CAP + 2, 2, 0);
	assert_false(pci_msix_enabled(f));
	assert_int_equal(get(MSIX_CAP + 3, 1), 0x80); /* the device's bytes as they were */
	cfg_wr(PCIR_COMMAND, 2, 0);
}

/* MSI only: the capability stays linked, one vector, 64-bit, no masking;
 * enabling it is emulated (VFIO programs the device), the device's bytes
 * stay as they were. */
static void test_msi_only(void **state)
{
	unsigned ids[4], n = 0;

	(void)state;
	for (unsigned off = pci_cfg_read(0, 6, 0, PCIR_CAP_PTR, 1); off != 0 && n < 4;
	     off = pci_cfg_read(0, 6, 0, off + 1, 1))
		ids[n++] = pci_cfg_read(0, 6, 0, off, 1);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], PCIY_MSI);
	assert_int_equal(ids[1], PCIY_PCIE);
	assert_int_equal(f6->msi.cap, 0x50);
	assert_int_equal(f6->msix.cap, 0);
	assert_int_equal(pci_cfg_read(0, 6, 0, 0x52, 2), 0x0080);
	assert_int_equal(pci_cfg_read(0, 6, 0, 0x60, 4), 0); /* no mask bits shown */
	pci_cfg_write(0, 6, 0, 0x54, 4, 0xfee01000u);
	pci_cfg_write(0, 6, 0, 0x58, 4, 0);
	pci_cfg_write(0, 6, 0, 0x5c, 2, 0x4041);
	pci_cfg_write(0, 6, 0, 0x52, 2, 0x0071); /* enable, asking for 8 vectors */
	assert_true(pci_msi_enabled(f6));
	assert_int_equal(f6->msi.nvec, 1);
	assert_int_equal(pci_cfg_read(0, 6, 0, 0x54, 4), 0xfee01000u);
	assert_int_equal(pci_cfg_read(0, 6, 0, 0x5c, 2), 0x4041);
	pci_cfg_write(0, 6, 0, 0x52, 2, 0);
	assert_false(pci_msi_enabled(f6));
	assert_int_equal(pread(msifd, &n, 2, 0x52), 2);
	assert_int_equal(n & 0xffff, 0x0184); /* not written to the device */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_header),           cmocka_unit_test(test_rom),
	    cmocka_unit_test(test_cap_list),         cmocka_unit_test(test_device_bytes),
	    cmocka_unit_test(test_command_and_bars), cmocka_unit_test(test_msix),
	    cmocka_unit_test(test_msi_only),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
