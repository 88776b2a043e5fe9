/*
 * The LPC (PCI-to-ISA) bridge function, bhyve's "-s 31,lpc" (pci_lpc.c):
 * Intel 82371SB PIIX3 IDs, class 06/01.  The legacy devices themselves
 * (UARTs, RTC, PM, bootrom) are LPC devices (dev/lpc.c) and exist whether
 * or not this function is configured; this is the PCI face guests and
 * firmware look for.  Only one may exist.
 */
#include <stdio.h>

#include "bus/pci.h"

static int lpc_bridge_init(struct machine *m, struct pci_func *f, struct config_node *node,
                           char *err, size_t errlen)
{
	static bool created;

	(void)m;
	(void)node;
	if (created) {
		snprintf(err, errlen, "only one LPC bridge is allowed");
		return -1;
	}
	if (f->bus != 0) {
		snprintf(err, errlen, "the LPC bridge must be on bus 0");
		return -1;
	}
	created = true;
	pci_set_ids(f, 0x8086, 0x7000, 0x06, 0x01, 0x00, 0x00);
	/* Multi-function header bit off; PIRQ route registers 0x60-0x63
	 * read "disabled" (0x80): interrupts are routed by ACPI _PRT. */
	for (unsigned r = 0x60; r < 0x64; r++)
		pci_set_cfg(f, r, 1, 0x80);
	return 0;
}

PCI_DEVEMU(lpc) = {
    .name = "lpc",
    .descr = "LPC bridge: the -l devices (COM ports, RTC, ...) hang off it",
    .usage = "  -s SLOT,lpc\n",
    .init = lpc_bridge_init,
    /* The PIRQ route bytes are read-only config bytes; the -l devices save
     * their own sections. */
    .save = pci_save_nothing,
    .restore = pci_restore_nothing,
};
