/*
 * Unit tests for the AHCI controller's saved state (ahci_quiesce, _save,
 * _restore in src/dev/ahci.c, docs/design/snapshots.md section 2): an
 * HBA's section restored into a fresh HBA on the same images gives the
 * same registers, sense data, transfer settings and tray lock; a halted
 * port keeps its slot and recovers as before; a slot left in PxCI of a
 * running port runs once on restore; a CD whose medium differs starts
 * empty with UNIT ATTENTION; hostile sections (misaligned addresses,
 * reserved bits, other ports or disk sizes, cut or padded) are refused
 * with the fresh HBA untouched.
 *
 * No KVM: one RAM region from calloc().  A (0:4.0) and B (0:5.0) have a
 * 1 MiB disk on port 0 and a 64 KiB ISO on port 1 (drives cd0, cd1); C
 * (0:6.0) a 2 MiB disk and an empty tray (cd2).  Sections are the
 * emulation's own, without the generic PCI part, so each HBA keeps its
 * BARs.
 */
#include "unit.h"

#include <fcntl.h>

#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define RAM_GPA     0x100000ull
#define RAM_SIZE    0x400000ull
#define ISO_BLOCKS  32
#define ISO2_BLOCKS 48
#define CLB(p)      (RAM_GPA + 0x0000 + (p)*0x400)
#define FB(p)       (RAM_GPA + 0x1000 + (p)*0x100)
#define CTBA(p, s)  (RAM_GPA + 0x10000 + (p)*0x10000 + (s)*0x800)
#define DATA_GPA    (RAM_GPA + 0x100000)

#define GHC         0x04
#define IS          0x08
#define PX(p, r)    (0x100 + (p)*0x80 + (r))
#define P_IE        0x14
#define P_CMD       0x18
#define P_TFD       0x20
#define P_CI        0x38
#define IS_TFES     (1u << 30)

static struct machine m;
static uint8_t *ram;
static struct pci_func *fa, *fb, *fc;
static uint64_t abar;
static char *dir, *disk_path, *disk2_path, *iso_path, *iso2_path;

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

static void use(struct pci_func *f)
{
	abar = f->bar[5].addr;
}

static char *image(const char *name, size_t len, int seed)
{
	uint8_t *d = malloc(len);
	char *path;

	if (d == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++)
		d[i] = (uint8_t)(seed + i / 512);
	path = unit_write_file(dir, name, d, len);
	free(d);
	return path;
}

static int set_hba(unsigned slot, const char *disk, const char *iso)
{
	char key[64];

	snprintf(key, sizeof(key), "pci.0.%u.0.device", slot);
	if (config_set(key, "ahci") < 0)
		return -1;
	snprintf(key, sizeof(key), "pci.0.%u.0.port.0.type", slot);
	if (config_set(key, "hd") < 0)
		return -1;
	snprintf(key, sizeof(key), "pci.0.%u.0.port.0.path", slot);
	if (config_set(key, disk) < 0)
		return -1;
	snprintf(key, sizeof(key), "pci.0.%u.0.port.1.type", slot);
	if (config_set(key, "cd") < 0)
		return -1;
	snprintf(key, sizeof(key), "pci.0.%u.0.port.1.path", slot);
	return config_set(key, iso != NULL ? iso : "");
}

static int group_setup(void **state)
{
	char err[256] = "";

	(void)state;
	ram = calloc(1, RAM_SIZE);
	dir = unit_mkdtemp();
	if (ram == NULL || dir == NULL ||
	    machine_init_detached(&m, "unit", ram, RAM_GPA, RAM_SIZE) < 0)
		return -1;
	disk_path = image("disk.img", 1u << 20, 1);
	disk2_path = image("disk2.img", 2u << 20, 2);
	iso_path = image("cd.iso", ISO_BLOCKS * 2048, 3);
	iso2_path = image("cd2.iso", ISO2_BLOCKS * 2048, 4);
	if (!disk_path || !disk2_path || !iso_path || !iso2_path)
		return -1;
	config_reset();
	if (set_hba(4, disk_path, iso_path) < 0 || set_hba(5, disk_path, iso_path) < 0 ||
	    set_hba(6, disk2_path, NULL) < 0)
		return -1;
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	fa = pci_get(0);
	fb = pci_get(1);
	fc = pci_get(2);
	for (unsigned s = 4; s <= 6; s++)
		pci_cfg_write(0, s, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
	return pci_count() == 3 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	unit_rmtree(dir);
	free(dir);
	free(disk_path);
	free(disk2_path);
	free(iso_path);
	free(iso2_path);
	return 0;
}

static void port_start(unsigned p)
{
	wr(PX(p, 0x00), (uint32_t)CLB(p));
	wr(PX(p, 0x08), (uint32_t)FB(p));
	wr(PX(p, P_IE), 0xffffffff);
	wr(PX(p, P_CMD), (1u << 4));
	wr(PX(p, P_CMD), (1u << 4) | 1);
}

/* Change drive `name`'s medium to `path` (NULL: eject), forced. */
static void change(const char *name, const char *path)
{
	const struct machine_media_drive *d = machine_media_drive(&m, name);
	char err[128] = "";
	int fd = path != NULL ? open(path, O_RDONLY | O_CLOEXEC) : -1;

	assert_non_null(d);
	assert_int_equal(d->change(d->dev, fd, true, err, sizeof(err)), 0);
}

static void assert_tray(const char *name, bool present, bool locked)
{
	const struct machine_media_drive *d = machine_media_drive(&m, name);
	bool p = !present, l = !locked;
	uint64_t b;

	d->state(d->dev, &p, &l, &b);
	assert_int_equal(p, present);
	assert_int_equal(l, locked);
}

/* B and C reset with their options' media; A reset and running. */
static int reset(void **state)
{
	struct pci_func *all[] = {fc, fb, fa};

	(void)state;
	change("cd1", iso_path);
	change("cd2", NULL);
	for (unsigned i = 0; i < ARRAY_LEN(all); i++) {
		use(all[i]);
		wr(GHC, 1);
	}
	memset(ram, 0, RAM_SIZE);
	change("cd0", iso_path);
	wr(GHC, 1u << 1);
	port_start(0);
	port_start(1);
	return 0;
}

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
	fis[12] = (uint8_t)count;
}

/* Command header and table of `slot` (one PRD of `len` bytes at DATA_GPA
 * when len != 0), not issued. */
static void build(unsigned p, unsigned slot, const uint8_t *fis, const uint8_t *cdb, uint32_t len)
{
	uint64_t hdr = CLB(p) + slot * 32, ct = CTBA(p, slot);

	unit_put_le(hva(hdr), 5u | (cdb ? 1u << 5 : 0) | (len ? 1u : 0) << 16, 4);
	unit_put_le(hva(hdr + 8), (uint32_t)ct, 4);
	memcpy(hva(ct), fis, 20);
	if (cdb != NULL)
		memcpy(hva(ct + 0x40), cdb, 12);
	unit_put_le(hva(ct + 0x80), (uint32_t)DATA_GPA, 4);
	unit_put_le(hva(ct + 0x8c), len - 1, 4);
}

static void ata(unsigned slot, uint8_t cmd, uint64_t lba, uint16_t count, uint16_t feat,
                uint32_t len)
{
	uint8_t fis[20];

	h2d(fis, cmd, lba, count, feat);
	build(0, slot, fis, NULL, len);
	wr(PX(0, P_CI), 1u << slot);
}

static void packet(unsigned slot, const uint8_t *cdb, uint32_t len)
{
	uint8_t fis[20];

	h2d(fis, 0xa0, 0, 0, 1);
	build(1, slot, fis, cdb, len);
	wr(PX(1, P_CI), 1u << slot);
}

static void assert_ok(unsigned p, unsigned slot)
{
	assert_int_equal(rd(PX(p, P_CI)) & (1u << slot), 0);
	assert_int_equal(rd(PX(p, P_TFD)) & 0x89, 0);
}

/* The CD's next command ends in CHECK CONDITION with sense `key`/`asc`. */
static void assert_sense(uint8_t key, uint8_t asc)
{
	uint8_t rs[12] = {0x03, 0, 0, 0, 18};

	packet(30, rs, 18);
	assert_ok(1, 30);
	assert_int_equal(hva(DATA_GPA)[2], key);
	assert_int_equal(hva(DATA_GPA)[12], asc);
}

/* Stop and start a port after an error, clearing PxIS. */
static void recover(unsigned p)
{
	wr(PX(p, P_CMD), 0);
	wr(PX(p, 0x10), 0xffffffff);
	port_start(p);
}

static void save(struct pci_func *f, struct sbuf *out)
{
	char err[160] = "";

	*out = (struct sbuf){0};
	assert_int_equal(f->de->quiesce(f, err, sizeof(err)), 0);
	assert_int_equal(f->de->save(f, out, err, sizeof(err)), 0);
	assert_false(out->failed);
}

static int restore(struct pci_func *f, const void *data, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader in;

	sbuf_reader_init(&in, data, len);
	if (f->de->restore(f, &in, err, errlen) < 0) {
		if (in.failed)
			snprintf(err, errlen, "%s", in.why);
		return -1;
	}
	return sbuf_reader_done(&in, "ahci", err, errlen);
}

/* Every register of the HBA and of ports 0 and 1, 0x00-0x3c. */
static void regs(struct pci_func *f, uint32_t *out)
{
	use(f);
	out[0] = rd(GHC);
	out[1] = rd(IS);
	for (unsigned p = 0; p < 2; p++)
		for (unsigned r = 0; r < 16; r++)
			out[2 + p * 16 + r] = rd(PX(p, r * 4));
}

/* ---- round trips ---- */

static void test_registers_match(void **state)
{
	uint8_t lock[12] = {0x1e, 0, 0, 0, 1}, eject[12] = {0x1b, 0, 0, 0, 2};
	uint8_t rd10[12] = {0x28, 0, 0, 0, 0, ISO_BLOCKS, 0, 0, 1};
	uint32_t ra[34], rb[34];
	char err[160] = "";
	struct sbuf s;

	(void)state;
	ata(0, 0x35, 8, 1, 0, 512); /* WRITE DMA EXT of zeroes at LBA 8 */
	assert_ok(0, 0);
	ata(1, 0xef, 0, 0, 0x82, 0); /* write cache off */
	assert_ok(0, 1);
	packet(2, (uint8_t[12]){0x03, 0, 0, 0, 18}, 18); /* takes the UNIT ATTENTION */
	packet(3, lock, 0);
	assert_ok(1, 3);
	packet(4, rd10, 2048); /* LBA out of range: sense data, TFES */
	assert_true(rd(PX(1, 0x10)) & IS_TFES);
	recover(1);
	save(fa, &s);
	regs(fa, ra);
	assert_int_equal(restore(fb, s.data, s.len, err, sizeof(err)), 0);
	regs(fb, rb);
	assert_memory_equal(ra, rb, sizeof(ra));
	assert_tray("cd1", true, true);
	/* B answers with A's sense data, keeps the lock, reads the disk. */
	use(fb);
	assert_sense(0x05, 0x21);
	packet(5, eject, 0);
	assert_true(rd(PX(1, 0x10)) & IS_TFES);
	recover(1);
	assert_sense(0x05, 0x53); /* MEDIUM REMOVAL PREVENTED */
	memset(hva(DATA_GPA), 0xee, 512);
	ata(6, 0x25, 8, 1, 0, 512); /* READ DMA EXT: A's zeroes */
	assert_ok(0, 6);
	assert_int_equal(hva(DATA_GPA)[0], 0);
	assert_int_equal(hva(DATA_GPA)[511], 0);
	sbuf_free(&s);
}

/* A halted port keeps its failed slot and recovers as before; a slot in
 * PxCI of a running port (not yet run) runs once on restore. */
static void test_ci_rescan(void **state)
{
	uint8_t fis[20];
	char err[160] = "";
	struct sbuf s;
	uint32_t ci;

	(void)state;
	ata(0, 0xff, 0, 0, 0, 0); /* unknown command: halts port 0 */
	assert_true(rd(PX(0, 0x10)) & IS_TFES);
	ci = rd(PX(0, P_CI));
	assert_int_not_equal(ci, 0);
	h2d(fis, 0xa1, 0, 0, 0); /* IDENTIFY PACKET in slot 3 of the CD port, not issued */
	build(1, 3, fis, NULL, 512);
	save(fa, &s);
	/* Port 1's PxCI in the section: slot 3 issued. */
	unit_put_le(s.data + 19 + 78 + 67, 1u << 3, 4);
	assert_int_equal(restore(fb, s.data, s.len, err, sizeof(err)), 0);
	use(fb);
	assert_int_equal(rd(PX(0, P_CI)), ci);
	assert_true(rd(PX(0, 0x10)) & IS_TFES);
	assert_ok(1, 3);
	assert_int_equal(unit_le(hva(CLB(1) + 3 * 32 + 4), 4), 512); /* PRDBC */
	recover(0);
	ata(7, 0xec, 0, 0, 0, 512);
	assert_ok(0, 7);
	sbuf_free(&s);
}

/* The medium the options give is not the saved one: empty tray, one
 * UNIT ATTENTION, a removal event; a saved empty tray stays empty. */
static void test_cd_medium_differs(void **state)
{
	uint8_t tur[12] = {0}, gesn[12] = {0x4a, 1, 0, 0, 0x10, 0, 0, 0, 8};
	char err[160] = "";
	struct sbuf s;

	(void)state;
	packet(0, (uint8_t[12]){0x03, 0, 0, 0, 18}, 18); /* takes the UNIT ATTENTION */
	packet(1, gesn, 8);                              /* and the NewMedia event */
	save(fa, &s);
	change("cd1", iso2_path);
	assert_int_equal(restore(fb, s.data, s.len, err, sizeof(err)), 0);
	assert_tray("cd1", false, false);
	use(fb);
	wr(GHC, 1u << 1);
	packet(2, tur, 0);
	assert_true(rd(PX(1, 0x10)) & IS_TFES);
	recover(1);
	assert_sense(0x06, 0x28); /* UNIT ATTENTION */
	packet(4, tur, 0);
	assert_true(rd(PX(1, 0x10)) & IS_TFES);
	recover(1);
	assert_sense(0x02, 0x3a); /* NOT READY, MEDIUM NOT PRESENT */
	packet(5, gesn, 8);
	assert_ok(1, 5);
	assert_int_equal(hva(DATA_GPA)[4] & 0x0f, 3); /* MediaRemoval */
	sbuf_free(&s);
	/* A saved empty tray: B's medium goes, no attention. */
	use(fa);
	change("cd0", NULL);
	packet(6, gesn, 8);
	save(fa, &s);
	change("cd1", iso_path);
	assert_int_equal(restore(fb, s.data, s.len, err, sizeof(err)), 0);
	assert_tray("cd1", false, false);
	use(fb);
	packet(7, tur, 0);
	recover(1);
	assert_sense(0x02, 0x3a);
	sbuf_free(&s);
}

/* ---- hostile sections ---- */

/* Offsets: header 19 bytes, port 0 (disk) 78, port 1 (CD) 82. */
#define P0 19
#define P1 (19 + 78)

static void test_hostile(void **state)
{
	static const struct {
		size_t off;
		unsigned size;
		uint32_t val;
		const char *why;
	} patches[] = {
	    {0, 2, 9, "version"},
	    {2, 4, 0x12345678, "CAP"},
	    {6, 4, 7, "PI"},
	    {10, 4, 0x80000004, "GHC"},
	    {14, 4, 0x10, "IS"},
	    {18, 1, 2, ""},
	    {P0, 1, 1, "was a CD"},
	    {P0 + 1, 4, 4096, "disk of 4096"},
	    {P0 + 13, 2, 7200, "nmrr"},
	    {P0 + 15, 4, (uint32_t)CLB(0) + 0x20, "misaligned"},
	    {P0 + 23, 4, (uint32_t)FB(0) + 0x10, "misaligned"},
	    {P0 + 35, 4, 0x02000000, "reserved"},
	    {P0 + 39, 4, 1u << 5, "reserved"},
	    {P0 + 55, 4, 0x1000, "reserved"},
	    {P0 + 71, 1, 3, ""},
	    {P1 + 78, 1, 2, ""},
	    {P1 + 81, 1, 9, "media event 9"},
	};
	uint32_t before[34], after[34];
	char err[160];
	struct sbuf s;
	uint8_t *buf;

	(void)state;
	save(fa, &s);
	assert_int_equal(s.len, P1 + 82);
	buf = malloc(s.len + 1);
	assert_non_null(buf);
	regs(fb, before);
	for (unsigned i = 0; i < ARRAY_LEN(patches); i++) {
		memcpy(buf, s.data, s.len);
		unit_put_le(buf + patches[i].off, patches[i].val, patches[i].size);
		err[0] = '\0';
		if (restore(fb, buf, s.len, err, sizeof(err)) == 0)
			fail_msg("patch %u at %zu: accepted", i, patches[i].off);
		if (strstr(err, patches[i].why) == NULL)
			fail_msg("patch %u: \"%s\" lacks \"%s\"", i, err, patches[i].why);
	}
	for (size_t len = 0; len < s.len; len++)
		if (restore(fb, s.data, len, err, sizeof(err)) == 0)
			fail_msg("cut at %zu: accepted", len);
	regs(fb, after);
	assert_memory_equal(before, after, sizeof(before));
	assert_tray("cd1", true, false);
	/* A byte too many is found after the restore (the caller's check):
	 * the restore as a whole fails. */
	memcpy(buf, s.data, s.len);
	buf[s.len] = 0;
	assert_int_not_equal(restore(fb, buf, s.len + 1, err, sizeof(err)), 0);
	assert_contains(err, "left over");
	/* C's disk is 2 MiB. */
	assert_int_not_equal(restore(fc, s.data, s.len, err, sizeof(err)), 0);
	assert_contains(err, "disk of 2048");
	free(buf);
	sbuf_free(&s);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup(fn, reset)
	const struct CMUnitTest tests[] = {
	    T(test_registers_match),
	    T(test_ci_rescan),
	    T(test_cd_medium_differs),
	    T(test_hostile),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
