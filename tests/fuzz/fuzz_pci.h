/*
 * For the fuzz targets that drive PCI functions (fuzz_pci.c,
 * fuzz_passthru.c): a guest's access to BAR `idx` of `f`, reaching the
 * bus at the BAR's current address (offset wrapped into the BAR).
 */
#ifndef KHYVE_FUZZ_PCI_H
#define KHYVE_FUZZ_PCI_H

#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"

static inline void fuzz_bar_access(struct machine *m, struct pci_func *f, unsigned idx,
                                   uint64_t off, unsigned size, bool wr, uint64_t val)
{
	const struct pci_bar *b = &f->bar[idx];

	if (b->type == PCI_BAR_NONE || b->type == PCI_BAR_MEM64_HI || b->size == 0)
		return;
	(void)iobus_access(b->type == PCI_BAR_IO ? &m->pio : &m->mmio, b->addr + off % b->size,
	                   size, wr, &val);
}

#endif
