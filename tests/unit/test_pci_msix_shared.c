/*
 * Unit tests for an MSI-X capability a device brings itself
 * (pci_adopt_msix_cap in src/bus/pci.h, as PCI passthrough uses): the
 * table and PBA share a BAR with the device's registers, so only their
 * offsets are the bus's and every other access reaches the emulation.
 * Also the refusal to save an emulation that can never be saved
 * (pci_devemu.never_saved).  Its own binary: pci.c keeps one
 * process-wide table of functions.
 */
#include "unit.h"

#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "core/snapshot.h"
#include "lib/config.h"

#define SHARED_VECS     8
#define SHARED_TABLE    0x2000
#define SHARED_PBA      0x3000
#define SHARED_BAR_SIZE 0x4000

struct sdev {
	unsigned reads, writes, vchanged;
	uint64_t off, val;
};

static int sdev_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                     size_t errlen)
{
	/* The capability as a device's config space holds it. */
	uint8_t cap[12] = {PCIY_MSIX,
	                   0,
	                   SHARED_VECS - 1,
	                   0xc0, /* enabled and masked: reset */
	                   SHARED_TABLE & 0xff,
	                   SHARED_TABLE >> 8,
	                   0,
	                   0,
	                   SHARED_PBA & 0xff,
	                   SHARED_PBA >> 8,
	                   0,
	                   0};
	uint8_t off;

	(void)m;
	(void)node;
	f->softc = calloc(1, sizeof(struct sdev));
	pci_set_ids(f, 0x1234, 0x5555, 0xff, 0, 0, 0);
	off = pci_add_cap(f, cap, sizeof(cap));
	if (f->softc == NULL || off == 0 ||
	    pci_alloc_bar(f, 0, PCI_BAR_MEM32, SHARED_BAR_SIZE) < 0 ||
	    pci_adopt_msix_cap(f, off, SHARED_VECS, 0, SHARED_TABLE, 0, SHARED_PBA) < 0) {
		snprintf(err, errlen, "cannot set up the shared-BAR device");
		return -1;
	}
	return 0;
}

static uint64_t sdev_bar_read(struct pci_func *f, int bar, uint64_t off, unsigned size)
{
	struct sdev *sd = f->softc;

	(void)bar;
	(void)size;
	sd->reads++;
	sd->off = off;
	return 0xab00 + off;
}

static void sdev_bar_write(struct pci_func *f, int bar, uint64_t off, unsigned size, uint64_t val)
{
	struct sdev *sd = f->softc;

	(void)bar;
	(void)size;
	sd->writes++;
	sd->off = off;
	sd->val = val;
}

static void sdev_vector_changed(struct pci_func *f)
{
	((struct sdev *)f->softc)->vchanged++;
}

PCI_DEVEMU(unit_shared) = {
    .name = "unit-shared",
    .init = sdev_init,
    .bar_read = sdev_bar_read,
    .bar_write = sdev_bar_write,
    .vector_changed = sdev_vector_changed,
    .save = pci_save_nothing,
    .restore = pci_restore_nothing,
};

/* A function that can never be saved, as passthru. */
static int nosave_init(struct machine *mm, struct pci_func *f, struct config_node *node, char *err,
                       size_t errlen)
{
	(void)mm;
	(void)node;
	(void)err;
	(void)errlen;
	pci_set_ids(f, 0x1234, 0x6666, 0xff, 0, 0, 0);
	return 0;
}

PCI_DEVEMU(unit_nosave) = {
    .name = "unit-nosave",
    .init = nosave_init,
    .never_saved = "its state is in the hardware",
};

static struct machine m;

static uint64_t rd(uint64_t addr, unsigned size)
{
	uint64_t v = 0x1111;

	if (!iobus_access(&m.mmio, addr, size, false, &v))
		fail_msg("read at 0x%llx unclaimed", (unsigned long long)addr);
	return v;
}

static void wr(uint64_t addr, unsigned size, uint64_t val)
{
	if (!iobus_access(&m.mmio, addr, size, true, &val))
		fail_msg("write at 0x%llx unclaimed", (unsigned long long)addr);
}

static void test_shared_bar(void **state)
{
	struct pci_func *f;
	struct sdev *sd;
	uint64_t base;
	char err[256] = "";

	(void)state;
	machine_init_detached(&m, "unit", NULL, 0, 0);
	config_reset();
	assert_int_equal(config_set("pci.0.3.0.device", "unit-shared"), 0);
	assert_int_equal(config_set("pci.0.4.0.device", "unit-nosave"), 0);
	if (pci_init(&m, err, sizeof(err)) < 0)
		fail_msg("pci_init: %s", err);
	f = pci_get(0);
	sd = f->softc;
	assert_int_equal(f->msix.table_count, SHARED_VECS);
	/* Adopted disabled and unmasked; the table and PBA offsets kept. */
	assert_int_equal(pci_cfg_read(0, 3, 0, f->msix.cap + 2, 2), SHARED_VECS - 1);
	assert_int_equal(pci_cfg_read(0, 3, 0, f->msix.cap + 4, 4), SHARED_TABLE);
	assert_int_equal(pci_cfg_read(0, 3, 0, f->msix.cap + 8, 4), SHARED_PBA);
	pci_cfg_write(0, 3, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	base = f->bar[0].addr;
	assert_true(f->bar[0].mapped);

	/* Registers below, between and above the table: the device's. */
	assert_int_equal(rd(base + 0x10, 4), 0xab10);
	assert_int_equal(rd(base + SHARED_TABLE + SHARED_VECS * 16, 4),
	                 0xab00 + SHARED_TABLE + SHARED_VECS * 16);
	assert_int_equal(rd(base + SHARED_PBA + 8, 4), 0xab00 + SHARED_PBA + 8);
	assert_int_equal(sd->reads, 3);
	wr(base + 0x1000, 4, 0x77);
	assert_int_equal(sd->writes, 1);
	assert_int_equal(sd->off, 0x1000);

	/* The table: masked at first, fields read back, the device never sees it. */
	assert_int_equal(rd(base + SHARED_TABLE + 12, 4), 1);
	wr(base + SHARED_TABLE + 16, 4, 0xfee00000u);
	wr(base + SHARED_TABLE + 24, 4, 0x41);
	wr(base + SHARED_TABLE + 28, 4, 0);
	assert_int_equal(rd(base + SHARED_TABLE + 16, 4), 0xfee00000u);
	assert_int_equal(rd(base + SHARED_TABLE + 24, 4), 0x41);
	assert_int_equal(f->msix.table[1].data, 0x41);
	assert_int_equal(f->msix.table[1].ctrl, 0);
	assert_true(sd->vchanged >= 3);
	/* The PBA reads as the bus's (nothing pending) and ignores writes. */
	assert_int_equal(rd(base + SHARED_PBA, 8), 0);
	wr(base + SHARED_PBA, 8, ~0ull);
	assert_int_equal(rd(base + SHARED_PBA, 8), 0);
	assert_int_equal(sd->reads, 3);
	assert_int_equal(sd->writes, 1);

	/* Enabling through the capability reaches the vector_changed hook. */
	sd->vchanged = 0;
	pci_cfg_write(0, 3, 0, f->msix.cap + 3, 1, 0x80);
	assert_true(pci_msix_enabled(f));
	assert_int_equal(sd->vchanged, 1);

	/* Bad adoptions are refused. */
	assert_int_equal(pci_adopt_msix_cap(f, f->msix.cap, 4, 0, 0, 0, 0x1000), -1);
	assert_int_equal(pci_adopt_msix_cap(pci_get(0), 0x20, 4, 0, 0, 0, 0x1000), -1);

	/* A checkpoint or migration refuses with the emulation's reason. */
	assert_int_equal(machine_state_saveable(&m, err, sizeof(err)), -1);
	assert_string_equal(err,
	                    "pci.0.4.0.unit-nosave cannot be saved: its state is in the hardware");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shared_bar),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
