/*
 * libFuzzer target for PCI passthrough's config and BAR paths
 * (src/dev/passthru.c) without a host device: passthru_test_open hands
 * each function a memfd that plays the VFIO device (config space at
 * offset 0, BAR 0 at 64 KiB, the I/O BAR 2 at 128 KiB).  Function 0 is
 * NVMe-like (PM, MSI, MSI-X with its table and PBA in BAR 0, PCIe), function
 * 1 has MSI and no MSI-X.  The guest's config reads and writes at every
 * offset and size, BAR programming, the command register, the MSI and
 * MSI-X capabilities and BAR accesses through the bus; and the device
 * changing its own bytes underneath (a device is hostile too: what it
 * returns is data, never trusted as a length or an index).
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bit 3
 * makes it a write, bits 5:4 the size (1 << n; 8 becomes 4 in config
 * space); bits 2:0:
 *   0 config access  u8 function (n%2), u16 register (n%4096), u32 value
 *   1 BAR access     u8 function, u8 BAR (n%7), u16 offset, u64 value
 *   2 device change  u8 function, u32 byte offset into the device (n%its
 *                    size), u8 value: written to the device's file
 *   3 BAR program    u8 function, u8 BAR (n%6), u32 value
 *   4 capability     u8 function, u8 register offset from its MSI-X (bit 6)
 *                    or MSI capability (n%24), u32 value
 *   5 command        u8 function, u16 command register value
 * State carries over from input to input, as in a running guest.
 */
#include "fuzz.h"
#include "fuzz_pci.h"

#include <sys/mman.h>

#include "backend/vfio.h"
#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "dev/passthru.h"
#include "lib/config.h"

#define RAM_GPA   0x100000ull
#define RAM_SIZE  0x100000ull
#define BAR0_OFF  0x10000u
#define BAR0_SIZE 0x4000u
#define BAR2_OFF  0x20000u
#define BAR2_SIZE 0x20u
#define DEV_SIZE  (BAR2_OFF + BAR2_SIZE)

static struct machine m;
static uint8_t *ram;
static int devfd[2] = {-1, -1};
static struct pci_func *fn[2];

static void no_intx(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	(void)gsi;
	(void)level;
}

/* The device's config space: function 0 with MSI-X, 1 with MSI only. */
static void make_config(uint8_t *cfg, bool msix)
{
	uint32_t bar0 = 0xfebf0000u | 0x4, bar2 = 0xc001;

	memset(cfg, 0, 256);
	cfg[0] = 0x36, cfg[1] = 0x1b, cfg[2] = msix ? 0x10 : 0x11;
	cfg[0x06] = PCIM_STATUS_CAPS;
	cfg[0x09] = 0x02, cfg[0x0a] = 0x08, cfg[0x0b] = 0x01;
	memcpy(&cfg[PCIR_BAR0], &bar0, 4);
	memcpy(&cfg[PCIR_BAR0 + 8], &bar2, 4);
	cfg[PCIR_CAP_PTR] = 0x40;
	cfg[PCIR_INTPIN] = 1;
	cfg[0x40] = 0x01, cfg[0x41] = 0x50, cfg[0x42] = 0x03;
	cfg[0x50] = PCIY_MSI, cfg[0x51] = msix ? 0x60 : 0x80, cfg[0x52] = 0x80; /* 64-bit */
	cfg[0x53] = 0x01; /* per-vector masking */
	cfg[0x60] = PCIY_MSIX, cfg[0x61] = 0x80, cfg[0x62] = 7, cfg[0x63] = 0x80;
	cfg[0x65] = 0x20, cfg[0x69] = 0x30;
	cfg[0x80] = PCIY_PCIE, cfg[0x82] = 0x02;
}

static int fake_open(struct vfio_dev *d, const char *host, char *err, size_t errlen)
{
	int i = strcmp(host, "0000:00:05.0") == 0 ? 0 : strcmp(host, "0000:00:06.0") == 0 ? 1 : -1;

	if (i < 0) {
		snprintf(err, errlen, "unexpected host %s", host);
		return -1;
	}
	memset(d, 0, sizeof(*d));
	d->container = d->group = -1;
	d->fd = dup(devfd[i]);
	d->flags = VFIO_DEVICE_FLAGS_PCI;
	d->region[VFIO_PCI_CONFIG_REGION_INDEX] = (struct vfio_region){256, 0, 3};
	d->region[VFIO_PCI_BAR0_REGION_INDEX] = (struct vfio_region){BAR0_SIZE, BAR0_OFF, 3};
	d->region[VFIO_PCI_BAR2_REGION_INDEX] = (struct vfio_region){BAR2_SIZE, BAR2_OFF, 3};
	d->irq_count[VFIO_PCI_INTX_IRQ_INDEX] = 1;
	d->irq_count[VFIO_PCI_MSI_IRQ_INDEX] = 1;
	d->irq_count[VFIO_PCI_MSIX_IRQ_INDEX] = i == 0 ? 8 : 0;
	return 0;
}

static void setup_once(void)
{
	char err[256] = "";
	uint8_t cfg[256];

	for (int i = 0; i < 2; i++) {
		devfd[i] = memfd_create("fuzz-passthru", 0);
		make_config(cfg, i == 0);
		if (devfd[i] < 0 || ftruncate(devfd[i], DEV_SIZE) < 0 ||
		    pwrite(devfd[i], cfg, sizeof(cfg), 0) != (ssize_t)sizeof(cfg))
			abort();
	}
	ram = calloc(1, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "fuzz", ram, RAM_GPA, RAM_SIZE) < 0)
		abort();
	m.intx_hook = no_intx;
	passthru_test_open = fake_open;
	config_reset();
	if (pci_parse_slot_option("5,passthru,0000:00:05.0", err, sizeof(err)) < 0 ||
	    pci_parse_slot_option("6,passthru,0000:00:06.0", err, sizeof(err)) < 0 ||
	    pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "set-up: %s\n", err);
		abort();
	}
	fn[0] = pci_get(0);
	fn[1] = pci_get(1);
	if (fn[0] == NULL || fn[1] == NULL)
		abort();
}

static void cfg_access(struct pci_func *f, unsigned reg, unsigned size, bool wr, uint32_t val)
{
	if (size > 4)
		size = 4;
	if (wr)
		pci_cfg_write(f->bus, f->slot, f->func, reg, size, val);
	else
		(void)pci_cfg_read(f->bus, f->slot, f->func, reg, size);
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		bool wr = op & 8;
		unsigned size = 1u << ((op >> 4) & 3);
		int i = fz_u8(z) % 2;
		struct pci_func *f = fn[i];

		switch (op & 7) {
		case 0: {
			unsigned reg = fz_u16(z) % PCI_CFG_SIZE;

			cfg_access(f, reg, size, wr, fz_u32(z));
			break;
		}
		case 1: {
			unsigned idx = fz_u8(z) % (PCI_NBARS + 1);
			uint64_t off = fz_u16(z);

			fuzz_bar_access(&m, f, idx, off, size, wr, fz_u64(z));
			break;
		}
		case 2: {
			uint32_t off = fz_u32(z) % DEV_SIZE;
			uint8_t b = fz_u8(z);

			if (pwrite(devfd[i], &b, 1, off) != 1)
				abort();
			break;
		}
		case 3:
			cfg_access(f, PCIR_BAR0 + 4 * (fz_u8(z) % PCI_NBARS), 4, true, fz_u32(z));
			break;
		case 4: {
			unsigned cap = (op & 0x40) ? f->msix.cap : f->msi.cap;
			unsigned reg = cap + fz_u8(z) % 24;

			cfg_access(f, reg, size, wr, fz_u32(z));
			break;
		}
		case 5:
			cfg_access(f, PCIR_COMMAND, 2, true, fz_u16(z));
			break;
		default:
			break;
		}
	}
}
