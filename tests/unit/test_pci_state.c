/*
 * Unit tests for the saved state of PCI functions (src/bus/pci.c, "saved
 * state"; docs/design/snapshots.md section 2, "bus"): the participant each
 * function registers, the generic section (config space, BARs, INTx, MSI,
 * MSI-X) with an emulation's own part appended, and the refusals of a
 * restore (another emulation, another version, truncated or hostile data).
 *
 * pci.c keeps its functions in a process-wide table that pci_init() fills
 * once, so the two machines of a save and a restore live in two processes:
 * a child builds the source machine, programs it as a guest would (config
 * writes, MSI-X table writes through its BAR, interrupts), saves every
 * participant and sends the sections and its config space over a pipe;
 * the test process builds the same slots fresh and restores into them.
 * The refusals run first, on the still untouched machine, and check that
 * a refused restore leaves the function as it was; then the sections are
 * restored and the restored machine is checked.  No KVM: vm_fd is -1, so
 * MSI routes and irqfds fail harmlessly; the INTx line is seen through
 * machine.intx_hook.
 */
#include "unit.h"

#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "core/snapshot.h"
#include "lib/config.h"
#include "lib/sbuf.h"

/* ---- a test-only emulation with every kind of BAR, MSI, MSI-X, INTx ---- */

/* Long enough that "pci.0.3.0.NAME" is truncated to 31 bytes. */
#define SDEV_NAME "unit-state-device-long-name"
#define SDEV_VECS 70 /* two PBA words */
#define SDEV_ROM  3000

struct sdev {
	uint32_t cookie; /* the emulation's own saved state */
	unsigned restores, vchanged, moved, reads;
};

static uint8_t rom_image[SDEV_ROM];

static int sdev_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                     size_t errlen)
{
	struct sdev *sd = calloc(1, sizeof(*sd));

	(void)m;
	(void)node;
	f->softc = sd;
	for (unsigned i = 0; i < SDEV_ROM; i++)
		rom_image[i] = (uint8_t)(i * 5 + 3);
	rom_image[0] = 0x55;
	rom_image[1] = 0xaa;
	pci_set_ids(f, 0x1234, 0x5a7e, 0xff, 0x00, 0x00, 0x01);
	if (sd == NULL || pci_alloc_bar(f, 0, PCI_BAR_IO, 0x40) < 0 ||
	    pci_alloc_bar(f, 1, PCI_BAR_MEM32, 0x1000) < 0 ||
	    pci_alloc_bar(f, 2, PCI_BAR_MEM64, 0x4000) < 0 ||
	    pci_add_msix_cap(f, SDEV_VECS, 4) < 0 || pci_alloc_rom(f, rom_image, SDEV_ROM) < 0 ||
	    pci_add_msi_cap(f, 4) < 0) {
		snprintf(err, errlen, "cannot set up the test device");
		return -1;
	}
	pci_enable_intx(f);
	return 0;
}

static uint64_t sdev_bar_read(struct pci_func *f, int bar, uint64_t off, unsigned size)
{
	((struct sdev *)f->softc)->reads++;
	return 0x5d00000000000000ull | ((uint64_t)bar << 40) | (off << 8) | size;
}

static void sdev_vector_changed(struct pci_func *f)
{
	((struct sdev *)f->softc)->vchanged++;
}

static void sdev_bar_moved(struct pci_func *f, int bar)
{
	(void)bar;
	((struct sdev *)f->softc)->moved++;
}

static int sdev_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	sbuf_put_u16(out, 1);
	sbuf_put_u32(out, ((struct sdev *)f->softc)->cookie);
	return 0;
}

static int sdev_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct sdev *sd = f->softc;
	uint32_t cookie;

	(void)err;
	(void)errlen;
	if (sbuf_get_version(in, 1) == 0)
		return -1;
	cookie = sbuf_get_u32(in);
	if (in->failed)
		return -1;
	sd->cookie = cookie;
	sd->restores++;
	return 0;
}

PCI_DEVEMU(unit_state_device) = {
    .name = SDEV_NAME,
    .init = sdev_init,
    .bar_read = sdev_bar_read,
    .vector_changed = sdev_vector_changed,
    .bar_moved = sdev_bar_moved,
    .save = sdev_save,
    .restore = sdev_restore,
};

/* An emulation without save: a checkpoint refuses it by name (virtio-rnd
 * was this one before it learnt to save). */
static int nosave_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                       size_t errlen)
{
	(void)m;
	(void)node;
	(void)err;
	(void)errlen;
	pci_set_ids(f, 0x1234, 0x5a7f, 0xff, 0x00, 0x00, 0x01);
	return 0;
}

PCI_DEVEMU(unit_nosave) = {
    .name = "unit-nosave",
    .init = nosave_init,
};

/* ---- the machines ---- */

/* Slots: A is programmed with everything, B decodes I/O only and uses MSI,
 * C only asserts INTx; unit-nosave cannot be saved. */
#define SLOT_A      3
#define SLOT_NOSAVE 4
#define SLOT_B      5
#define SLOT_C      6

/* Where the child's "guest" puts A's and B's BARs. */
#define A_IO     0x3000ull
#define A_MEM32  0xc8000000ull
#define A_MEM64  0x1000000000ull
#define A_MSIX   0xc9000000ull
#define A_ROM    0xca000000ull
#define B_IO     0x3400ull
#define B_MEM32  0xc8100000ull
#define COOKIE   0x5eed1234u
#define MSI_ADDR 0xfee00000ull

static const char *const slots[][2] = {
    {"pci.0.0.0.device", "hostbridge"},  {"pci.0.1.0.device", "i440fx"},
    {"pci.0.1.3.device", "piix4-pm"},    {"pci.0.3.0.device", SDEV_NAME},
    {"pci.0.4.0.device", "unit-nosave"}, {"pci.0.5.0.device", SDEV_NAME},
    {"pci.0.6.0.device", SDEV_NAME},     {"pci.0.31.0.device", "lpc"},
};
#define NFUNCS ARRAY_LEN(slots)

static uint8_t ram[0x10000];
static struct machine m;

static int build_machine(void)
{
	char err[256] = "";

	machine_init_detached(&m, "unit", ram, 0x100000, sizeof(ram));
	config_reset();
	for (size_t i = 0; i < NFUNCS; i++)
		if (config_set(slots[i][0], slots[i][1]) < 0)
			return -1;
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	return pci_count() == NFUNCS ? 0 : -1;
}

static struct pci_func *func_at(unsigned slot, unsigned fn)
{
	for (unsigned i = 0; i < pci_count(); i++)
		if (pci_get(i)->slot == slot && pci_get(i)->func == fn)
			return pci_get(i);
	return NULL;
}

static void cfg_wr(struct pci_func *f, unsigned off, unsigned size, uint32_t val)
{
	pci_cfg_write(f->bus, f->slot, f->func, off, size, val);
}

static void msix_entry_write(uint64_t table, unsigned v, uint64_t addr, uint32_t data,
                             uint32_t ctrl)
{
	uint64_t lo = (uint32_t)addr, hi = addr >> 32, d = data, c = ctrl;

	iobus_access(&m.mmio, table + 16 * v, 4, true, &lo);
	iobus_access(&m.mmio, table + 16 * v + 4, 4, true, &hi);
	iobus_access(&m.mmio, table + 16 * v + 8, 4, true, &d);
	iobus_access(&m.mmio, table + 16 * v + 12, 4, true, &c);
}

/* What the child's guest does to A: move every BAR, enable decoding,
 * program MSI-X (vector 2 and 66 masked, each with an interrupt pending). */
static void program_a(struct pci_func *a)
{
	cfg_wr(a, PCIR_BAR0, 4, (uint32_t)A_IO);
	cfg_wr(a, PCIR_BAR0 + 4, 4, (uint32_t)A_MEM32);
	cfg_wr(a, PCIR_BAR0 + 8, 4, (uint32_t)A_MEM64);
	cfg_wr(a, PCIR_BAR0 + 12, 4, (uint32_t)(A_MEM64 >> 32));
	cfg_wr(a, PCIR_BAR0 + 16, 4, (uint32_t)A_MSIX);
	cfg_wr(a, PCIR_ROM, 4, (uint32_t)A_ROM | 1);
	cfg_wr(a, 0x0c, 1, 0x10); /* cache line size */
	cfg_wr(a, PCIR_COMMAND, 2, PCIM_CMD_IO | PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
	for (unsigned v = 0; v < 4; v++)
		msix_entry_write(A_MSIX, v, MSI_ADDR + 0x1000 * v, 0x40 + v, v == 2);
	msix_entry_write(A_MSIX, 65, MSI_ADDR, 0x99, 0);
	msix_entry_write(A_MSIX, 66, MSI_ADDR, 0x9a, 1);
	cfg_wr(a, a->msix.cap + 3, 1, 0x80); /* MSI-X enable */
	pci_interrupt(a, 2);
	pci_interrupt(a, 66);
	((struct sdev *)a->softc)->cookie = COOKIE;
}

/* B: I/O decoding only, BAR1 moved (it must stay unmapped), MSI with two
 * vectors.  C: INTx asserted.  i440fx: a PAM byte. */
static void program_others(void)
{
	struct pci_func *b = func_at(SLOT_B, 0), *c = func_at(SLOT_C, 0);

	cfg_wr(b, PCIR_BAR0, 4, (uint32_t)B_IO);
	cfg_wr(b, PCIR_BAR0 + 4, 4, (uint32_t)B_MEM32);
	cfg_wr(b, PCIR_COMMAND, 2, PCIM_CMD_IO);
	cfg_wr(b, b->msi.cap + 4, 4, (uint32_t)MSI_ADDR);
	cfg_wr(b, b->msi.cap + 12, 2, 0x55);
	cfg_wr(b, b->msi.cap + 2, 2, 0x11); /* enable, MME = 1: two vectors */
	pci_intx_assert(c);
	cfg_wr(func_at(1, 0), 0x5a, 1, 0x33);
}

/* ---- the child's sections, as received ---- */

struct section {
	char name[STATE_NAME_LEN];
	uint8_t *data;
	size_t len;
};

static struct section sections[NFUNCS];
static unsigned nsections;
static uint8_t src_cfg[NFUNCS][PCI_CFG_SIZE]; /* in pci_get() order */
static uint8_t pristine_a[PCI_CFG_SIZE];      /* A's config space before any restore */

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n > 0) {
		ssize_t w = write(fd, b, n);

		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	uint8_t *b = p;

	while (n > 0) {
		ssize_t r = read(fd, b, n);

		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/* The child: build, program, save every participant that can be saved,
 * send "name, length, bytes" records, then every function's config space
 * as the guest reads it.  Exit status 0 when all of it went out. */
static void child_main(int fd)
{
	char err[256] = "";
	uint32_t n = 0;

	if (build_machine() < 0)
		_exit(2);
	program_a(func_at(SLOT_A, 0));
	program_others();
	for (unsigned i = 0; i < m.nstates; i++)
		n += m.states[i].ops->save != NULL;
	if (write_all(fd, &n, sizeof(n)) < 0)
		_exit(3);
	for (unsigned i = 0; i < m.nstates; i++) {
		struct sbuf out = {0};
		uint32_t len;

		if (m.states[i].ops->save == NULL)
			continue;
		if (m.states[i].ops->save(m.states[i].arg, &out, err, sizeof(err)) < 0) {
			fprintf(stderr, "save %s: %s\n", m.states[i].name, err);
			_exit(4);
		}
		len = (uint32_t)out.len;
		if (write_all(fd, m.states[i].name, STATE_NAME_LEN) < 0 ||
		    write_all(fd, &len, sizeof(len)) < 0 || write_all(fd, out.data, out.len) < 0)
			_exit(5);
		sbuf_free(&out);
	}
	for (unsigned i = 0; i < pci_count(); i++) {
		struct pci_func *f = pci_get(i);
		uint8_t cfg[PCI_CFG_SIZE];

		for (unsigned off = 0; off < PCI_CFG_SIZE; off += 4) {
			uint32_t v = pci_cfg_read(f->bus, f->slot, f->func, off, 4);

			memcpy(cfg + off, &v, 4);
		}
		if (write_all(fd, cfg, sizeof(cfg)) < 0)
			_exit(6);
	}
	_exit(0);
}

static int receive(int fd)
{
	uint32_t n, len;

	if (read_all(fd, &n, sizeof(n)) < 0 || n > NFUNCS)
		return -1;
	for (nsections = 0; nsections < n; nsections++) {
		struct section *s = &sections[nsections];

		if (read_all(fd, s->name, STATE_NAME_LEN) < 0 || read_all(fd, &len, 4) < 0 ||
		    len > (1u << 20) || (s->data = malloc(len ? len : 1)) == NULL ||
		    read_all(fd, s->data, len) < 0)
			return -1;
		s->name[STATE_NAME_LEN - 1] = '\0';
		s->len = len;
	}
	for (unsigned i = 0; i < NFUNCS; i++)
		if (read_all(fd, src_cfg[i], PCI_CFG_SIZE) < 0)
			return -1;
	return 0;
}

static unsigned intx_calls;
static unsigned intx_gsi_seen;
static bool intx_level_seen;

static void intx_hook(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	intx_calls++;
	intx_gsi_seen = gsi;
	intx_level_seen = level;
}

static int group_setup(void **state)
{
	int fds[2], status;
	pid_t pid;
	int rc;

	(void)state;
	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(fds[0]);
		child_main(fds[1]);
	}
	close(fds[1]);
	rc = receive(fds[0]);
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "the saving child failed (status 0x%x)\n", status);
		return -1;
	}
	if (rc < 0 || build_machine() < 0)
		return -1;
	m.intx_hook = intx_hook;
	memcpy(pristine_a, func_at(SLOT_A, 0)->cfg, PCI_CFG_SIZE);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	for (unsigned i = 0; i < nsections; i++)
		free(sections[i].data);
	return 0;
}

/* ---- helpers ---- */

static const struct section *section_named(const char *name)
{
	for (unsigned i = 0; i < nsections; i++)
		if (strcmp(sections[i].name, name) == 0)
			return &sections[i];
	fail_msg("no section %s was saved", name);
	return NULL;
}

static const struct state_participant *participant(unsigned slot, unsigned fn)
{
	char name[STATE_NAME_LEN];
	const struct state_participant *p;

	pci_state_name(func_at(slot, fn), name, sizeof(name));
	p = machine_state_find(&m, name);
	if (p == NULL)
		fail_msg("no participant %s", name);
	return p;
}

/* Restore `len` bytes into `p` as core would: the op, then the end check. */
static int restore_bytes(const struct state_participant *p, const uint8_t *data, size_t len,
                         char *err, size_t errlen)
{
	struct sbuf_reader in;

	sbuf_reader_init(&in, data, len);
	err[0] = '\0';
	if (p->ops->restore(p->arg, &in, err, errlen) < 0)
		return -1;
	return sbuf_reader_done(&in, p->name, err, errlen);
}

/* Offsets into the generic part of A's section. */
#define OFF_CFG   (3 + strlen(SDEV_NAME))
#define OFF_BARS  (OFF_CFG + PCI_CFG_SIZE)
#define OFF_INTX  (OFF_BARS + 7 * 17)
#define OFF_NVEC  (OFF_INTX + 2)
#define OFF_COUNT (OFF_NVEC + 4)
#define OFF_TABLE (OFF_COUNT + 6)
#define OFF_PBA   (OFF_TABLE + 16 * SDEV_VECS)

/* Restore A's section with `n` bytes at `off` replaced by `bytes`: it must
 * be refused with `why` in the error, and leave A as it was. */
static void refuse_patched(size_t off, const void *bytes, size_t n, const char *why)
{
	const struct section *s = section_named(participant(SLOT_A, 0)->name);
	struct pci_func *a = func_at(SLOT_A, 0);
	uint8_t *copy = malloc(s->len);
	char err[256];

	assert_non_null(copy);
	memcpy(copy, s->data, s->len);
	memcpy(copy + off, bytes, n);
	assert_int_equal(restore_bytes(participant(SLOT_A, 0), copy, s->len, err, sizeof(err)), -1);
	assert_contains(err, why);
	assert_memory_equal(a->cfg, pristine_a, PCI_CFG_SIZE);
	for (int b = 0; b <= PCI_ROM_BAR; b++)
		assert_false(a->bar[b].mapped);
	assert_int_equal(((struct sdev *)a->softc)->restores, 0);
	free(copy);
}

static bool claimed(struct iobus *bus, uint64_t addr)
{
	uint64_t v;

	return iobus_access(bus, addr, 1, false, &v);
}

static uint64_t bus_rd(struct iobus *bus, uint64_t addr, unsigned size)
{
	uint64_t v = 0;

	if (!iobus_access(bus, addr, size, false, &v))
		fail_msg("%s read at 0x%llx unclaimed", bus->kind, (unsigned long long)addr);
	return size < 8 ? v & ((1ull << (8 * size)) - 1) : v;
}

/* ---- tests ---- */

/* One participant per function, named pci.B.S.F.EMUL (truncated), in slot
 * order; unit-nosave has no save, so a checkpoint refuses it by name. */
static void test_participants(void **state)
{
	static const char *const saveable[] = {"pci.0.0.0.hostbridge",
	                                       "pci.0.1.0.i440fx",
	                                       "pci.0.1.3.piix4-pm",
	                                       "pci.0.3.0.unit-state-device-lon",
	                                       "pci.0.5.0.unit-state-device-lon",
	                                       "pci.0.6.0.unit-state-device-lon",
	                                       "pci.0.31.0.lpc"};
	const struct state_participant *rnd = machine_state_find(&m, "pci.0.4.0.unit-nosave");

	(void)state;
	assert_int_equal(m.nstates, NFUNCS);
	assert_non_null(rnd);
	assert_null(rnd->ops->save);
	assert_ptr_equal(rnd->arg, func_at(SLOT_NOSAVE, 0));
	assert_int_equal(nsections, ARRAY_LEN(saveable));
	for (size_t i = 0; i < ARRAY_LEN(saveable); i++) {
		const struct state_participant *p = machine_state_find(&m, saveable[i]);

		assert_non_null(p);
		assert_non_null(p->ops->save);
		assert_non_null(p->ops->restore);
		assert_string_equal(sections[i].name, saveable[i]);
	}
	assert_int_equal(strlen(saveable[3]), STATE_NAME_LEN - 1);
}

/* Every section starts with version 1 and the emulation's name; the ones
 * without state of their own (bridges, PM) end right after the generic part. */
static void test_section_layout(void **state)
{
	const struct section *hb = section_named("pci.0.0.0.hostbridge");
	const struct section *a = section_named("pci.0.3.0.unit-state-device-lon");

	(void)state;
	assert_int_equal(hb->data[0] | hb->data[1] << 8, 1);
	assert_int_equal(hb->data[2], strlen("hostbridge"));
	assert_memory_equal(hb->data + 3, "hostbridge", strlen("hostbridge"));
	/* no MSI-X: count 0, two flags, then the version-only tail */
	assert_int_equal(hb->len, 3 + 10 + PCI_CFG_SIZE + 7 * 17 + 2 + 4 + 4 + 2 + 2);
	assert_int_equal(a->len, OFF_PBA + 16 + 2 + 4);
	assert_int_equal(unit_le(a->data + OFF_COUNT, 4), SDEV_VECS);
	assert_int_equal(unit_le(a->data + a->len - 4, 4), COOKIE);
}

static void test_refuse_name_version(void **state)
{
	const struct section *hb = section_named("pci.0.0.0.hostbridge");
	const struct section *i440 = section_named("pci.0.1.0.i440fx");
	uint8_t v2[2] = {2, 0}, v0[2] = {0, 0};
	char err[256];

	(void)state;
	/* another emulation's section */
	assert_int_equal(restore_bytes(participant(31, 0), hb->data, hb->len, err, sizeof(err)),
	                 -1);
	assert_contains(err, "pci.0.31.0.lpc: saved from a hostbridge, this function is a lpc");
	assert_int_equal(restore_bytes(participant(0, 0), i440->data, i440->len, err, sizeof(err)),
	                 -1);
	assert_contains(err, "saved from a i440fx");
	/* versions */
	refuse_patched(0, v2, 2, "version 2, this khyve reads 1-1");
	refuse_patched(0, v0, 2, "version 0");
	/* a name of another length */
	refuse_patched(2, "\x05", 1, "saved from a unit-");
}

/* Hostile values in the generic part are refused before anything is
 * applied. */
static void test_refuse_hostile(void **state)
{
	struct pci_func *a = func_at(SLOT_A, 0);
	uint8_t b;
	uint32_t u;
	uint64_t q;

	(void)state;
	q = A_IO + 4; /* BAR0 (I/O, 64 bytes) not aligned */
	refuse_patched(OFF_BARS + 1, &q, 8, "BAR0 address 0x3004 is not one a guest can set");
	q = 0x10000; /* past the I/O space */
	refuse_patched(OFF_BARS + 1, &q, 8, "BAR0 address 0x10000");
	q = 0x100000000ull; /* a 32-bit BAR above 4 GiB */
	refuse_patched(OFF_BARS + 17 + 1, &q, 8, "BAR1 address");
	b = PCI_BAR_MEM32; /* BAR0 was I/O */
	refuse_patched(OFF_BARS, &b, 1, "BAR0 is type 2 of 0x40 bytes, this function's is type 1");
	q = 0x80; /* another size */
	refuse_patched(OFF_BARS + 9, &q, 8, "BAR0 is type 1 of 0x80 bytes");
	q = 0x1000; /* an address in BAR3, the upper half of BAR2 */
	refuse_patched(OFF_BARS + 3 * 17 + 1, &q, 8, "BAR3 address");
	u = SDEV_VECS + 1;
	refuse_patched(OFF_COUNT, &u, 4, "MSI-X table of 71 vectors, this function has 70");
	u = 0x3;
	refuse_patched(OFF_TABLE + 16 * 5 + 12, &u, 4, "MSI-X vector 5 control 0x3");
	q = 1ull << 6; /* vector 70 of 70 */
	refuse_patched(OFF_PBA + 8, &q, 8, "MSI-X pending bits past vector 69");
	b = 2;
	refuse_patched(OFF_INTX, &b, 1, "a flag holds 2");
	b = 0; /* MSI-X disabled, but its control register says enabled */
	refuse_patched(OFF_COUNT + 4, &b, 1, "MSI-X enabled 0 masked 0 disagrees");
	u = 3;
	refuse_patched(OFF_NVEC, &u, 4, "MSI enabled 0 with 3 vectors");
	b = 0x35; /* vendor ID byte */
	refuse_patched(OFF_CFG, &b, 1, "config byte 0x000 is 0x35, this function's is 0x34");
	b = 0xff; /* the MSI-X table size */
	refuse_patched(OFF_CFG + a->msix.cap + 2, &b, 1, "config byte");
	b = (uint8_t)(pristine_a[a->msi.cap + 2] ^ 0x02); /* MSI's Multiple Message Capable */
	refuse_patched(OFF_CFG + a->msi.cap + 2, &b, 1, "config byte");
	b = 0x08; /* command: special cycles */
	refuse_patched(OFF_CFG + PCIR_COMMAND, &b, 1, "command register 0x0008");
	/* INTx asserted on a function without it: piix4-pm has none */
	{
		const struct section *pm = section_named("pci.0.1.3.piix4-pm");
		uint8_t *copy = malloc(pm->len);
		char err[256];

		assert_non_null(copy);
		memcpy(copy, pm->data, pm->len);
		copy[3 + strlen("piix4-pm") + PCI_CFG_SIZE + 7 * 17] = 1;
		assert_int_equal(restore_bytes(participant(1, 3), copy, pm->len, err, sizeof(err)),
		                 -1);
		assert_contains(err, "INTx asserted on a function without INTx");
		free(copy);
	}
}

/* Every cut of a section is refused: in the generic part before anything
 * is applied, in the emulation's part by its restore. */
static void test_refuse_truncated(void **state)
{
	const struct state_participant *p = participant(SLOT_A, 0);
	const struct section *s = section_named(p->name);
	char err[256];

	(void)state;
	for (size_t len = 0; len < s->len; len++) {
		if (restore_bytes(p, s->data, len, err, sizeof(err)) != -1)
			fail_msg("a section cut to %zu of %zu bytes was accepted", len, s->len);
		if (len < OFF_PBA + 16)
			assert_memory_equal(func_at(SLOT_A, 0)->cfg, pristine_a, PCI_CFG_SIZE);
	}
	assert_contains(err, "truncated");
}

/* A byte too many: the op succeeds and core's end check refuses. */
static void test_refuse_left_over(void **state)
{
	const struct state_participant *p = participant(31, 0);
	const struct section *s = section_named(p->name);
	uint8_t *copy = calloc(1, s->len + 1);
	char err[256];

	(void)state;
	assert_non_null(copy);
	memcpy(copy, s->data, s->len);
	assert_int_equal(restore_bytes(p, copy, s->len + 1, err, sizeof(err)), -1);
	assert_string_equal(err, "pci.0.31.0.lpc: 1 bytes left over");
	free(copy);
}

static void restore_all(void)
{
	char err[256];

	for (unsigned i = 0; i < nsections; i++) {
		const struct state_participant *p = machine_state_find(&m, sections[i].name);

		assert_non_null(p);
		if (restore_bytes(p, sections[i].data, sections[i].len, err, sizeof(err)) != 0)
			fail_msg("restore %s: %s", sections[i].name, err);
	}
}

/* The restored machine reads back the config space the source had. */
static void test_restore_cfg(void **state)
{
	(void)state;
	intx_calls = 0;
	restore_all();
	for (unsigned i = 0; i < pci_count(); i++) {
		struct pci_func *f = pci_get(i);

		if (f->slot == SLOT_NOSAVE)
			continue; /* not saved */
		for (unsigned off = 0; off < PCI_CFG_SIZE; off += 4) {
			uint32_t v = pci_cfg_read(f->bus, f->slot, f->func, off, 4);

			if (memcmp(&v, src_cfg[i] + off, 4) != 0)
				fail_msg("%02x.%x config 0x%03x reads 0x%08x, saved 0x%08x",
				         f->slot, f->func, off, v,
				         (uint32_t)unit_le(src_cfg[i] + off, 4));
		}
	}
	assert_int_equal(pci_cfg_read(0, 1, 0, 0x5a, 1), 0x33); /* i440fx PAM1 */
}

/* BARs decode where the source's guest put them, as its command register
 * says; nothing answers at the addresses pci_init() chose. */
static void test_restore_bars(void **state)
{
	struct pci_func *a = func_at(SLOT_A, 0), *b = func_at(SLOT_B, 0), *c = func_at(SLOT_C, 0);
	struct sdev *sa = a->softc;

	(void)state;
	assert_int_equal(bus_rd(&m.pio, A_IO + 8, 2), 0x5d00000000000802ull & 0xffff);
	assert_int_equal(bus_rd(&m.mmio, A_MEM32 + 0x10, 4),
	                 (0x5d00000000000000ull | (1ull << 40) | (0x10 << 8) | 4) & 0xffffffff);
	assert_int_equal(bus_rd(&m.mmio, A_MEM64 + 0x20, 8),
	                 0x5d00000000000000ull | (2ull << 40) | (0x20 << 8) | 8);
	assert_int_equal(bus_rd(&m.mmio, A_ROM + 100, 1), rom_image[100]);
	assert_int_equal(a->bar[0].addr, A_IO);
	assert_int_equal(a->bar[2].addr, A_MEM64);
	assert_true(a->bar[4].mapped);
	assert_true(sa->moved >= 5); /* each BAR mapped through bar_map */
	/* B decodes I/O only: its moved memory BAR stays unmapped */
	assert_true(claimed(&m.pio, B_IO));
	assert_false(claimed(&m.mmio, B_MEM32));
	assert_int_equal(b->bar[1].addr, B_MEM32);
	assert_false(b->bar[1].mapped);
	/* C decodes nothing */
	for (int i = 0; i <= PCI_ROM_BAR; i++)
		assert_false(c->bar[i].mapped);
}

/* MSI-X table, pending bits and flags, MSI, INTx, the emulation's part. */
static void test_restore_vectors(void **state)
{
	struct pci_func *a = func_at(SLOT_A, 0), *b = func_at(SLOT_B, 0), *c = func_at(SLOT_C, 0);
	struct sdev *sa = a->softc;

	(void)state;
	for (unsigned v = 0; v < 4; v++) {
		assert_int_equal(bus_rd(&m.mmio, A_MSIX + 16 * v, 8), MSI_ADDR + 0x1000 * v);
		assert_int_equal(bus_rd(&m.mmio, A_MSIX + 16 * v + 8, 4), 0x40 + v);
		assert_int_equal(bus_rd(&m.mmio, A_MSIX + 16 * v + 12, 4), v == 2);
	}
	assert_int_equal(bus_rd(&m.mmio, A_MSIX + 16 * 65 + 8, 4), 0x99);
	assert_int_equal(bus_rd(&m.mmio, A_MSIX + 16 * 69 + 12, 4), 1);
	assert_int_equal(bus_rd(&m.mmio, A_MSIX + a->msix.pba_offset, 8), 1ull << 2);
	assert_int_equal(bus_rd(&m.mmio, A_MSIX + a->msix.pba_offset + 8, 8), 1ull << 2);
	assert_true(pci_msix_enabled(a));
	assert_false(a->msix.function_masked);
	assert_true(sa->vchanged >= 1);
	assert_int_equal(sa->cookie, COOKIE);
	assert_int_equal(sa->restores, 1);
	assert_true(pci_msi_enabled(b));
	assert_int_equal(b->msi.nvec, 2);
	assert_false(pci_msix_enabled(b));
	/* C's INTx line was driven up once, and only C's */
	assert_true(c->intx_asserted);
	assert_false(a->intx_asserted);
	assert_int_equal(intx_calls, 1);
	assert_int_equal(intx_gsi_seen, pci_slot_intx_gsi(SLOT_C));
	assert_true(intx_level_seen);
}

/* Restoring the same state again changes nothing: the INTx line is not
 * asserted a second time, the BARs decode where they did. */
static void test_restore_twice(void **state)
{
	(void)state;
	intx_calls = 0;
	restore_all();
	assert_int_equal(intx_calls, 0);
	assert_true(claimed(&m.pio, A_IO));
	assert_true(claimed(&m.mmio, A_MEM64));
	assert_false(claimed(&m.mmio, B_MEM32));
	assert_int_equal(((struct sdev *)func_at(SLOT_A, 0)->softc)->restores, 2);
}

/* pci_save_nothing/pci_restore_nothing: a version and nothing else. */
static void test_save_nothing(void **state)
{
	struct sbuf out = {0};
	struct sbuf_reader in;
	char err[128] = "";
	static const uint8_t v3[2] = {3, 0};

	(void)state;
	assert_int_equal(pci_save_nothing(NULL, &out, err, sizeof(err)), 0);
	assert_int_equal(out.len, 2);
	sbuf_reader_init(&in, out.data, out.len);
	assert_int_equal(pci_restore_nothing(NULL, &in, err, sizeof(err)), 0);
	assert_int_equal(sbuf_reader_done(&in, "x", err, sizeof(err)), 0);
	sbuf_reader_init(&in, v3, sizeof(v3));
	assert_int_equal(pci_restore_nothing(NULL, &in, err, sizeof(err)), -1);
	assert_contains(err, "version 3");
	sbuf_free(&out);
}

int main(void)
{
	/* In this order: the refusals need the machine untouched. */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_participants),        cmocka_unit_test(test_section_layout),
	    cmocka_unit_test(test_refuse_name_version), cmocka_unit_test(test_refuse_hostile),
	    cmocka_unit_test(test_refuse_truncated),    cmocka_unit_test(test_refuse_left_over),
	    cmocka_unit_test(test_restore_cfg),         cmocka_unit_test(test_restore_bars),
	    cmocka_unit_test(test_restore_vectors),     cmocka_unit_test(test_restore_twice),
	    cmocka_unit_test(test_save_nothing),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
