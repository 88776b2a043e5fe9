/*
 * The power-management function of an Intel 82371AB PIIX4 (8086:7113),
 * as QEMU's pc machine has it at 0:1.3: firmware built for QEMU finds the
 * ACPI PM block through its PMBA register (0x40) and PMREGMISC (0x80,
 * bit 0: PM I/O space enabled).  OVMF reads them at 0:1.3 to find the PM
 * timer, and programs them only when PMREGMISC bit 0 is clear.  Here both
 * are read-only and describe the fixed block of dev/pm.h, which is what
 * the FADT says too, so firmware and OS agree whatever the firmware
 * writes.  QEMU's layout for UEFI guests:
 *   -s 0,i440fx -s 1,lpc -s 1:3,piix4-pm
 */
#include <stdio.h>

#include "bus/pci.h"
#include "dev/pm.h"

#define PIIX4_PMBA      0x40
#define PIIX4_PMREGMISC 0x80
#define PIIX4_PMIOSE    0x01
#define PIIX4_SMBBA     0x90

static int piix4_pm_cfg_write(struct pci_func *f, unsigned off, unsigned size, uint32_t val)
{
	(void)f;
	(void)val;
	/* Swallow writes that touch PMBA, PMREGMISC or the SMBus base. */
	if ((off < PIIX4_PMBA + 4 && off + size > PIIX4_PMBA) ||
	    (off <= PIIX4_PMREGMISC && off + size > PIIX4_PMREGMISC) ||
	    (off < PIIX4_SMBBA + 4 && off + size > PIIX4_SMBBA))
		return 0;
	return -1;
}

static int piix4_pm_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                         size_t errlen)
{
	(void)m;
	(void)node;
	if (f->bus != 0) {
		snprintf(err, errlen, "the PIIX4 PM function must be on bus 0");
		return -1;
	}
	pci_set_ids(f, 0x8086, 0x7113, 0x06, 0x80, 0x00, 0x03);
	pci_set_cfg(f, PIIX4_PMBA, 4, PM_BASE | 1);
	pci_set_cfg(f, PIIX4_PMREGMISC, 1, PIIX4_PMIOSE);
	pci_set_cfg(f, PCIR_INTLINE, 1, PM_SCI_IRQ);
	return 0;
}

PCI_DEVEMU(piix4_pm) = {
    .name = "piix4-pm",
    .descr = "PIIX4 power management function (ACPI PM timer), for OVMF",
    .usage = "  -s 1:3,piix4-pm\n",
    .init = piix4_pm_init,
    .cfg_write = piix4_pm_cfg_write,
    /* PMBA and PMREGMISC are fixed config bytes; dev/pm saves the block. */
    .save = pci_save_nothing,
    .restore = pci_restore_nothing,
};
