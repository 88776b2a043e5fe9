/*
 * libFuzzer target for PCI configuration space, BARs, MSI and MSI-X
 * (src/bus/pci.c): configuration mechanism #1 (0xCF8/0xCFC) and ECAM at
 * every size and offset, BAR sizing and moves (memory and I/O decoding
 * on and off), the expansion ROM BAR, the MSI and MSI-X capabilities and
 * the MSI-X table and PBA through their BAR, with device interrupts
 * raised in between, on a host bridge, an LPC bridge, the PIIX4 PM
 * function, a virtio-rnd (MSI-X) and an xHCI controller (MSI and MSI-X) in a
 * detached machine.
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bit 3
 * makes it a write, bits 5:4 the size (1 << n; 8 is refused by config
 * space); bits 2:0:
 *   0 CF8 write     u32 value (enable bit and a function's address forced
 *                   with opcode bit 6)
 *   1 CFC access    u8 offset (n%4), u32 value
 *   2 ECAM access   u8 function (n%functions) or, with bit 6, a u16
 *                   bus/slot/function raw, u16 register, u32 value
 *   3 BAR access    u8 function, u8 BAR (n%7), u16 offset, u64 value;
 *                   reaches the bus at the BAR's current address
 *   4 capability    u8 function, u8 register offset from its MSI-X (bit 6)
 *                   or MSI capability, u32 value: a config access there
 *   5 interrupt     u8 function, u8 vector: the device raises it
 *   6 BAR program   u8 function, u8 BAR (n%6), u32 value: written as a
 *                   driver sizing and placing BARs does
 *   7 command       u8 function, u16 command register value
 * State carries over from input to input, as in a running guest.
 */
#include "fuzz.h"
#include "fuzz_pci.h"

#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "lib/config.h"

#define RAM_GPA  0x100000ull
#define RAM_SIZE 0x100000ull

static struct machine m;
static uint8_t *ram;
static unsigned nfunc;

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
	    config_set("pci.0.4.0.device", "virtio-rnd") < 0 ||
	    config_set("pci.0.5.0.device", "xhci") < 0)
		abort();
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		abort();
	}
	nfunc = pci_count();
	if (nfunc == 0)
		abort();
}

static struct pci_func *func(struct fz *z)
{
	return pci_get(fz_u8(z) % nfunc);
}

static uint32_t bdf(const struct pci_func *f)
{
	return (uint32_t)f->bus << 8 | (uint32_t)f->slot << 3 | f->func;
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		bool wr = op & 8;
		unsigned size = 1u << ((op >> 4) & 3);
		uint64_t val;

		switch (op & 7) {
		case 0:
			val = fz_u32(z);
			if (op & 0x40)
				val = 0x80000000u | (uint32_t)bdf(func(z)) << 8 | (val & 0xfc);
			(void)iobus_access(&m.pio, 0xcf8, 4, true, &val);
			break;
		case 1: {
			uint64_t port = 0xcfc + fz_u8(z) % 4;

			val = fz_u32(z);
			(void)iobus_access(&m.pio, port, size, wr, &val);
			break;
		}
		case 2: {
			uint64_t where = (op & 0x40) ? fz_u16(z) : bdf(func(z));
			uint64_t reg = fz_u16(z) % PCI_CFG_SIZE;

			val = fz_u32(z);
			(void)iobus_access(&m.mmio, PCI_ECAM_GPA + (where << 12) + reg, size, wr,
			                   &val);
			break;
		}
		case 3: {
			struct pci_func *f = func(z);
			unsigned idx = fz_u8(z) % (PCI_NBARS + 1);
			uint64_t off = fz_u16(z);

			fuzz_bar_access(&m, f, idx, off, size, wr, fz_u64(z));
			break;
		}
		case 4: {
			struct pci_func *f = func(z);
			unsigned cap = (op & 0x40) ? f->msix.cap : f->msi.cap;
			unsigned reg = cap + fz_u8(z) % 24;

			val = fz_u32(z);
			if (wr)
				pci_cfg_write(f->bus, f->slot, f->func, reg, size > 4 ? 4 : size,
				              (uint32_t)val);
			else
				(void)pci_cfg_read(f->bus, f->slot, f->func, reg,
				                   size > 4 ? 4 : size);
			break;
		}
		case 5: {
			struct pci_func *f = func(z);

			pci_interrupt(f, fz_u8(z));
			break;
		}
		case 6: {
			struct pci_func *f = func(z);
			unsigned reg = PCIR_BAR0 + 4 * (fz_u8(z) % PCI_NBARS);

			pci_cfg_write(f->bus, f->slot, f->func, reg, 4, fz_u32(z));
			break;
		}
		case 7: {
			struct pci_func *f = func(z);

			pci_cfg_write(f->bus, f->slot, f->func, PCIR_COMMAND, 2, fz_u16(z));
			break;
		}
		}
	}
}
