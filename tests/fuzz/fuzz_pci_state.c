/*
 * libFuzzer target for the restore of PCI functions' saved state
 * (src/bus/pci.c, "saved state"): sections that are a real save with bytes
 * flipped and cut short, and raw bytes, restored into a host bridge, an
 * i440fx, an LPC bridge, the PIIX4 PM function, a fuzz-only emulation
 * with an I/O, a 32-bit and a 64-bit BAR, a ROM, MSI, MSI-X (irqfds made
 * by its vector_changed) and INTx, and a fuzz-only virtio device whose
 * section embeds the transport's (virtio_pci_save/restore), in a detached
 * machine; config writes, interrupts and virtio register writes in between
 * change what is saved.  Whatever a restore accepts must save again and
 * restore again (the round trip aborts otherwise).
 *
 * Input: a sequence of ops, an opcode byte and its operands; bits 1:0:
 *   0 config write  u8 function, u16 register (n%4096), u8 size (1 << n%3),
 *                   u32 value
 *   1 save+restore  u8 function, u8 patches (n%9), per patch u16 offset
 *                   (n%length) and u8 XOR mask, u16 cut (0: the whole
 *                   section, else at most n bytes of it)
 *   2 raw restore   u8 function, u16 length (n%8192), that many bytes
 *   3 interrupt     u8 function, u8 vector (pci_interrupt); with opcode
 *                   bit 2 instead a write to the virtio device's common
 *                   configuration: u8 offset (n%0x38), u8 size (1 << n%3),
 *                   u32 value (memory decoding is turned on first)
 * State carries over from input to input.
 */
#include "fuzz.h"

#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "core/snapshot.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define RAM_GPA  0x100000ull
#define RAM_SIZE 0x10000ull
#define VECS     70

static struct machine m;
static uint8_t *ram;
static unsigned nfunc;
static uint8_t rom[2500] = {0x55, 0xaa};

struct fdev {
	uint8_t regs[8];
	uint8_t nregs; /* <= 8 */
};

static void fdev_vector_changed(struct pci_func *f)
{
	for (unsigned v = 0; v < 4; v++)
		(void)pci_msix_irqfd(f, v);
}

static int fdev_init(struct machine *mm, struct pci_func *f, struct config_node *node, char *err,
                     size_t errlen)
{
	(void)mm;
	(void)node;
	f->softc = calloc(1, sizeof(struct fdev));
	pci_set_ids(f, 0x1234, 0xf022, 0xff, 0, 0, 0);
	if (f->softc == NULL || pci_alloc_bar(f, 0, PCI_BAR_IO, 0x20) < 0 ||
	    pci_alloc_bar(f, 1, PCI_BAR_MEM32, 0x1000) < 0 ||
	    pci_alloc_bar(f, 2, PCI_BAR_MEM64, 0x2000) < 0 || pci_add_msix_cap(f, VECS, 4) < 0 ||
	    pci_alloc_rom(f, rom, sizeof(rom)) < 0 || pci_add_msi_cap(f, 8) < 0) {
		snprintf(err, errlen, "cannot set up");
		return -1;
	}
	pci_enable_intx(f);
	return 0;
}

static int fdev_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	struct fdev *d = f->softc;

	(void)err;
	(void)errlen;
	sbuf_put_u16(out, 1);
	sbuf_put_u8(out, d->nregs);
	sbuf_put_bytes(out, d->regs, d->nregs);
	return 0;
}

static int fdev_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct fdev *d = f->softc;
	uint8_t n;

	(void)err;
	(void)errlen;
	if (sbuf_get_version(in, 1) == 0)
		return -1;
	n = sbuf_get_u8(in);
	if (n > sizeof(d->regs)) {
		sbuf_fail(in, "nregs %u > 8", n);
		return -1;
	}
	sbuf_get_bytes(in, d->regs, n);
	if (in->failed)
		return -1;
	d->nregs = n;
	return 0;
}

PCI_DEVEMU(fuzz_state_dev) = {
    .name = "fuzz-state-dev",
    .init = fdev_init,
    .vector_changed = fdev_vector_changed,
    .save = fdev_save,
    .restore = fdev_restore,
};

/* A virtio device with no threads: the transport's state is all it has. */
struct fvirt {
	struct virtio_dev vd;
};

static void fvirt_nop(struct virtio_dev *vd)
{
	(void)vd;
}

static const struct virtio_ops fvirt_ops = {
    .name = "fuzz-state-virtio",
    .device_type = 42,
    .pci_class = 0xff,
    .start = fvirt_nop,
    .stop = fvirt_nop,
};

static int fvirt_init(struct machine *mm, struct pci_func *f, struct config_node *node, char *err,
                      size_t errlen)
{
	struct fvirt *v = calloc(1, sizeof(*v));

	(void)mm;
	(void)node;
	if (v == NULL)
		return -1;
	return virtio_pci_init(&v->vd, f, &fvirt_ops, v, 2, 16, 1, 0, err, errlen);
}

static int fvirt_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	sbuf_put_u16(out, 1);
	virtio_pci_save(f->softc, out);
	return 0;
}

static int fvirt_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	if (sbuf_get_version(in, 1) == 0)
		return -1;
	return virtio_pci_restore(f->softc, in);
}

PCI_DEVEMU(fuzz_state_virtio) = {
    .name = "fuzz-state-virtio",
    .init = fvirt_init,
    .bar_read = virtio_pci_bar_read,
    .bar_write = virtio_pci_bar_write,
    .bar_moved = virtio_pci_bar_moved,
    .vector_changed = virtio_pci_vector_changed,
    .save = fvirt_save,
    .restore = fvirt_restore,
};

static struct pci_func *virtio_func;

static void virtio_common_write(struct fz *z)
{
	struct pci_func *f = virtio_func;
	unsigned off = fz_u8(z) % 0x38, size = 1u << (fz_u8(z) % 3);
	uint64_t val = fz_u32(z);

	pci_cfg_write(f->bus, f->slot, f->func, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	if (f->bar[4].mapped)
		(void)iobus_access(&m.mmio, f->bar[4].addr + (off & ~(size - 1)), size, true, &val);
}

static void no_intx(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	(void)gsi;
	(void)level;
}

static void setup_once(void)
{
	char err[256] = "";

	ram = calloc(1, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "fuzz", ram, RAM_GPA, RAM_SIZE) < 0)
		abort();
	m.intx_hook = no_intx;
	config_reset();
	if (config_set("pci.0.0.0.device", "hostbridge") < 0 ||
	    config_set("pci.0.1.0.device", "lpc") < 0 ||
	    config_set("pci.0.1.3.device", "piix4-pm") < 0 ||
	    config_set("pci.0.2.0.device", "i440fx") < 0 ||
	    config_set("pci.0.5.0.device", "fuzz-state-dev") < 0 ||
	    config_set("pci.0.6.0.device", "fuzz-state-dev") < 0 ||
	    config_set("pci.0.7.0.device", "fuzz-state-virtio") < 0)
		abort();
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		abort();
	}
	nfunc = pci_count();
	virtio_func = pci_get(nfunc - 1);
	if (nfunc == 0 || m.nstates != nfunc || virtio_func->slot != 7)
		abort();
}

FUZZ_TARGET(setup_once)

static const struct state_participant *participant(struct fz *z)
{
	return &m.states[fz_u8(z) % m.nstates];
}

/* Restore `len` bytes as core does; true when accepted whole. */
static bool restore(const struct state_participant *p, const uint8_t *data, size_t len)
{
	struct sbuf_reader in;
	char err[256] = "";

	sbuf_reader_init(&in, data, len);
	if (p->ops->restore(p->arg, &in, err, sizeof(err)) < 0)
		return false;
	return sbuf_reader_done(&in, p->name, err, sizeof(err)) == 0;
}

/* What was accepted is a state the function can be in: it saves again
 * and that restores again. */
static void round_trip(const struct state_participant *p)
{
	struct sbuf again = {0};
	char err[256] = "";

	if (p->ops->save(p->arg, &again, err, sizeof(err)) < 0 || again.failed ||
	    !restore(p, again.data, again.len)) {
		fprintf(stderr, "%s: an accepted restore does not round-trip: %s\n", p->name, err);
		abort();
	}
	sbuf_free(&again);
}

static void save_patch_restore(struct fz *z)
{
	const struct state_participant *p = participant(z);
	struct sbuf out = {0};
	char err[256] = "";
	unsigned npatch = fz_u8(z) % 9;
	size_t len, cut;

	if (p->ops->save == NULL)
		return;
	if (p->ops->save(p->arg, &out, err, sizeof(err)) < 0 || out.failed || out.len == 0)
		abort(); /* every function here can be saved */
	for (unsigned i = 0; i < npatch; i++) {
		size_t off = fz_u16(z) % out.len;

		out.data[off] ^= fz_u8(z);
	}
	cut = fz_u16(z);
	len = cut != 0 && cut < out.len ? cut : out.len;
	if (restore(p, out.data, len))
		round_trip(p);
	sbuf_free(&out);
}

static void raw_restore(struct fz *z)
{
	const struct state_participant *p = participant(z);
	size_t len = fz_u16(z) % 8192;
	uint8_t *buf = malloc(len ? len : 1);

	if (buf == NULL)
		abort();
	fz_bytes(z, buf, len);
	if (p->ops->restore != NULL && restore(p, buf, len))
		round_trip(p);
	free(buf);
}

static void fuzz_one(struct fz *z)
{
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);

		switch (op & 3) {
		case 0: {
			struct pci_func *f = pci_get(fz_u8(z) % nfunc);
			unsigned reg = fz_u16(z) % PCI_CFG_SIZE, size = 1u << (fz_u8(z) % 3);

			pci_cfg_write(f->bus, f->slot, f->func, reg & ~(size - 1), size, fz_u32(z));
			break;
		}
		case 1:
			save_patch_restore(z);
			break;
		case 2:
			raw_restore(z);
			break;
		case 3: {
			if (op & 4) {
				virtio_common_write(z);
				break;
			}
			pci_interrupt(pci_get(fz_u8(z) % nfunc), fz_u8(z));
			break;
		}
		}
	}
}
