#include "bus/pci.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/machine.h"
#include "core/snapshot.h"
#include "lib/config.h"
#include "lib/file.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/sbuf.h"
#include "vmm/irq.h"

#define PCI_MAX_FUNCS    256
#define CF8_PORT         0xcf8
#define CFC_PORT         0xcfc
#define CF8_ENABLE       0x80000000u

#define MSI_CTRL_ENABLE  0x0001
#define MSI_CTRL_64BIT   0x0080
#define MSIX_CTRL_FMASK  0x4000
#define MSIX_CTRL_ENABLE 0x8000
#define MSIX_ENTRY_SIZE  16
#define MSIX_VEC_MASKED  0x1

static struct pci_func *funcs[PCI_MAX_FUNCS];
static unsigned nfuncs;
static struct machine *pci_machine;
static pthread_mutex_t cf8_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t cf8;
static uint64_t io_next = PCI_IO_BASE;
static uint64_t mmio32_next = PCI_MMIO32_BASE;
static uint64_t mmio64_base, mmio64_next, mmio64_end;
static struct ratelimit pci_rl = RATELIMIT_INIT;

/* ---- config space primitives ---- */

uint32_t pci_get_cfg(const struct pci_func *f, unsigned off, unsigned size)
{
	uint32_t v = 0;

	if (off >= PCI_CFG_SIZE || size > 4 || off + size > PCI_CFG_SIZE)
		return 0xffffffffu;
	for (unsigned i = 0; i < size; i++)
		v |= (uint32_t)f->cfg[off + i] << (8 * i);
	return v;
}

void pci_set_cfg(struct pci_func *f, unsigned off, unsigned size, uint32_t val)
{
	if (off >= PCI_CFG_SIZE || size > 4 || off + size > PCI_CFG_SIZE)
		return;
	for (unsigned i = 0; i < size; i++)
		f->cfg[off + i] = (uint8_t)(val >> (8 * i));
}

void pci_set_ids(struct pci_func *f, uint16_t vendor, uint16_t device, uint8_t class,
                 uint8_t subclass, uint8_t progif, uint8_t rev)
{
	pci_set_cfg(f, PCIR_VENDOR, 2, vendor);
	pci_set_cfg(f, PCIR_DEVICE, 2, device);
	pci_set_cfg(f, PCIR_CLASS, 1, class);
	pci_set_cfg(f, PCIR_SUBCLASS, 1, subclass);
	pci_set_cfg(f, PCIR_PROGIF, 1, progif);
	pci_set_cfg(f, PCIR_REVID, 1, rev);
}

static uint64_t roundup_pow2(uint64_t v)
{
	uint64_t p = 1;

	while (p < v && p != 0)
		p <<= 1;
	return p;
}

/* ---- BAR placement and mapping ---- */

static int window_alloc(uint64_t *next, uint64_t end, uint64_t size, uint64_t *addr)
{
	uint64_t a = (*next + size - 1) & ~(size - 1);

	if (a < *next || a + size > end || a + size < a)
		return -1;
	*addr = a;
	*next = a + size;
	return 0;
}

/* I/O BARs skip PCI_IO_HOLE (the ACPI PM block). */
static int io_window_alloc(uint64_t size, uint64_t *addr)
{
	if (window_alloc(&io_next, PCI_IO_END, size, addr) < 0)
		return -1;
	if (*addr<PCI_IO_HOLE_END && * addr + size> PCI_IO_HOLE_BASE) {
		io_next = PCI_IO_HOLE_END;
		return window_alloc(&io_next, PCI_IO_END, size, addr);
	}
	return 0;
}

static uint32_t bar_type_bits(const struct pci_bar *b)
{
	switch (b->type) {
	case PCI_BAR_IO:
		return 0x1;
	case PCI_BAR_MEM64:
		return 0x4 | (b->prefetch ? 0x8 : 0);
	case PCI_BAR_MEM32:
		return b->prefetch ? 0x8 : 0;
	default:
		return 0;
	}
}

static void bar_store_register(struct pci_func *f, int idx)
{
	const struct pci_bar *b = &f->bar[idx];

	if (idx == PCI_ROM_BAR) {
		uint32_t en = pci_get_cfg(f, PCIR_ROM, 4) & 1;

		pci_set_cfg(f, PCIR_ROM, 4, (uint32_t)b->addr | en);
		return;
	}
	pci_set_cfg(f, PCIR_BAR0 + 4 * idx, 4, (uint32_t)b->addr | bar_type_bits(b));
	if (b->type == PCI_BAR_MEM64)
		pci_set_cfg(f, PCIR_BAR0 + 4 * (idx + 1), 4, (uint32_t)(b->addr >> 32));
}

int pci_alloc_bar(struct pci_func *f, int idx, enum pci_bar_type type, uint64_t size)
{
	struct pci_bar *b;
	int rc;

	if (idx < 0 || idx >= PCI_NBARS || f->bar[idx].type != PCI_BAR_NONE ||
	    (type == PCI_BAR_MEM64 &&
	     (idx == PCI_NBARS - 1 || f->bar[idx + 1].type != PCI_BAR_NONE)))
		return -1;
	b = &f->bar[idx];
	size = roundup_pow2(size < (type == PCI_BAR_IO ? 4 : 16) ? (type == PCI_BAR_IO ? 4 : 16)
	                                                         : size);
	if (type == PCI_BAR_IO)
		rc = io_window_alloc(size, &b->addr);
	else if (type == PCI_BAR_MEM32)
		rc = window_alloc(&mmio32_next, PCI_MMIO32_END, size, &b->addr);
	else if (type == PCI_BAR_MEM64)
		rc = window_alloc(&mmio64_next, mmio64_end, size, &b->addr);
	else
		return -1;
	if (rc < 0)
		return -1;
	b->type = type;
	b->size = size;
	b->prefetch = type == PCI_BAR_MEM64;
	if (type == PCI_BAR_MEM64)
		f->bar[idx + 1].type = PCI_BAR_MEM64_HI;
	bar_store_register(f, idx);
	return 0;
}

int pci_alloc_rom(struct pci_func *f, const uint8_t *rom, uint64_t len)
{
	struct pci_bar *b = &f->bar[PCI_ROM_BAR];
	uint8_t *copy;
	uint64_t size = roundup_pow2(len < 2048 ? 2048 : len);

	copy = calloc(1, size);
	if (copy == NULL || window_alloc(&mmio32_next, PCI_MMIO32_END, size, &b->addr) < 0) {
		free(copy);
		return -1;
	}
	memcpy(copy, rom, len);
	b->type = PCI_BAR_ROM;
	b->size = size;
	b->rom = copy;
	bar_store_register(f, PCI_ROM_BAR);
	return 0;
}

static uint64_t bar_access_read(struct pci_func *f, struct pci_bar *b, uint64_t off, unsigned size);
static void bar_access_write(struct pci_func *f, struct pci_bar *b, uint64_t off, unsigned size,
                             uint64_t val);

static int bar_handler(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct pci_bar *b = arg;

	if (offset >= b->size || size > b->size - offset)
		return -1;
	if (is_write)
		bar_access_write(b->owner, b, offset, size, *val);
	else
		*val = bar_access_read(b->owner, b, offset, size);
	return 0;
}

static bool bar_decoding(const struct pci_func *f, const struct pci_bar *b)
{
	uint16_t cmd = (uint16_t)pci_get_cfg(f, PCIR_COMMAND, 2);

	if (b->type == PCI_BAR_IO)
		return cmd & PCIM_CMD_IO;
	if (b->type == PCI_BAR_ROM)
		return (cmd & PCIM_CMD_MEM) && (pci_get_cfg(f, PCIR_ROM, 4) & 1);
	return b->type != PCI_BAR_NONE && b->type != PCI_BAR_MEM64_HI && (cmd & PCIM_CMD_MEM);
}

static void bar_unmap(struct pci_func *f, struct pci_bar *b)
{
	if (!b->mapped)
		return;
	iobus_unregister(b->type == PCI_BAR_IO ? &f->m->pio : &f->m->mmio, b->addr);
	b->mapped = false;
	if (f->de->bar_moved != NULL)
		f->de->bar_moved(f, b->idx);
}

/* Register the BAR at its current address if decoding is on.  An address
 * the guest chose that collides with another range stays unmapped. */
static void bar_map(struct pci_func *f, struct pci_bar *b)
{
	struct iobus *bus = b->type == PCI_BAR_IO ? &f->m->pio : &f->m->mmio;

	if (b->mapped || !bar_decoding(f, b) || b->addr == 0)
		return;
	if (b->type == PCI_BAR_IO && b->addr + b->size > PCI_IO_END)
		return;
	if (iobus_register(bus, b->addr, b->size, bar_handler, b, "pci-bar") == 0) {
		b->mapped = true;
		if (f->de->bar_moved != NULL)
			f->de->bar_moved(f, b->idx);
	} else
		log_ratelimited(&pci_rl, LOG_DEBUG,
		                "%02x:%02x.%x BAR%d at 0x%llx overlaps; not mapped", f->bus,
		                f->slot, f->func, b->idx, (unsigned long long)b->addr);
}

static void bars_update(struct pci_func *f)
{
	for (int i = 0; i <= PCI_ROM_BAR; i++) {
		struct pci_bar *b = &f->bar[i];

		if (b->type == PCI_BAR_NONE || b->type == PCI_BAR_MEM64_HI)
			continue;
		if (bar_decoding(f, b))
			bar_map(f, b);
		else
			bar_unmap(f, b);
	}
}

/* A 32-bit write to BAR register `idx` (already merged from narrower writes):
 * keep only the address bits the BAR's size allows, which is also how
 * sizing (writing all ones) reads back the size. */
static void bar_register_write(struct pci_func *f, int idx, uint32_t val)
{
	struct pci_bar *b = &f->bar[idx];
	uint64_t addr;

	if (b->type == PCI_BAR_NONE)
		return; /* unimplemented BAR: reads as 0 */
	if (b->type == PCI_BAR_MEM64_HI) {
		struct pci_bar *lo = &f->bar[idx - 1];

		addr = ((uint64_t)val << 32) | (lo->addr & 0xffffffffull);
		addr &= ~(lo->size - 1);
		b = lo;
	} else if (b->type == PCI_BAR_IO) {
		/* All 32 bits, as QEMU and bhyve keep them: SeaBIOS sizes an I/O
		 * BAR as ~(readback & ~3) + 1 and takes an upper half of 0 for a
		 * 4 GiB BAR ("out of I/O address space").  An address past 64 KiB
		 * is never mapped (bar_map). */
		addr = val & ~(uint32_t)(b->size - 1) & ~0x3u;
	} else {
		addr = (b->addr & ~0xffffffffull) | (val & ~(uint32_t)(b->size - 1) & ~0xfu);
		if (b->type == PCI_BAR_MEM32)
			addr &= 0xffffffffull;
	}
	if (addr != b->addr) {
		bar_unmap(f, b);
		b->addr = addr;
		bar_store_register(f, b->idx);
		bar_map(f, b);
	} else {
		bar_store_register(f, b->idx);
	}
}

static void rom_register_write(struct pci_func *f, uint32_t val)
{
	struct pci_bar *b = &f->bar[PCI_ROM_BAR];

	if (b->type != PCI_BAR_ROM)
		return;
	bar_unmap(f, b);
	b->addr = val & ~(uint32_t)(b->size - 1) & 0xfffff800u;
	pci_set_cfg(f, PCIR_ROM, 4, (uint32_t)b->addr | (val & 1));
	bar_map(f, b);
}

/* ---- capabilities ---- */

uint8_t pci_add_cap(struct pci_func *f, const uint8_t *cap, unsigned len)
{
	unsigned off = f->cap_end ? f->cap_end : 0x40;
	uint8_t ptr;

	if (len < 2 || off + len > 256)
		return 0;
	memcpy(&f->cfg[off], cap, len);
	f->cfg[off + 1] = 0;
	/* Link it at the end of the list. */
	if (!(pci_get_cfg(f, PCIR_STATUS, 2) & PCIM_STATUS_CAPS)) {
		f->cfg[PCIR_CAP_PTR] = (uint8_t)off;
		pci_set_cfg(f, PCIR_STATUS, 2, pci_get_cfg(f, PCIR_STATUS, 2) | PCIM_STATUS_CAPS);
	} else {
		ptr = f->cfg[PCIR_CAP_PTR];
		while (f->cfg[ptr + 1] != 0)
			ptr = f->cfg[ptr + 1];
		f->cfg[ptr + 1] = (uint8_t)off;
	}
	f->cap_end = (off + len + 3) & ~3u;
	return (uint8_t)off;
}

/* ---- INTx ---- */

unsigned pci_slot_intx_gsi(unsigned slot)
{
	/* Pin A of slot s goes to GSI 16 + (s % 8): the usual swizzle. */
	return PCI_INTX_GSI_BASE + (slot % 8);
}

void pci_enable_intx(struct pci_func *f)
{
	f->intx_gsi = (int)pci_slot_intx_gsi(f->slot);
	f->cfg[PCIR_INTPIN] = 1; /* INTA# */
	f->cfg[PCIR_INTLINE] = (uint8_t)f->intx_gsi;
}

static void intx_set(struct pci_func *f, bool level)
{
	bool disabled = pci_get_cfg(f, PCIR_COMMAND, 2) & PCIM_CMD_INTX_DIS;
	bool line = level && !disabled;
	uint16_t st = (uint16_t)pci_get_cfg(f, PCIR_STATUS, 2);

	pci_set_cfg(f, PCIR_STATUS, 2, level ? st | PCIM_STATUS_INTR : st & ~PCIM_STATUS_INTR);
	if (f->intx_gsi < 0 || line == f->intx_asserted)
		return;
	f->intx_asserted = line;
	machine_intx_level(f->m, (unsigned)f->intx_gsi, line);
}

void pci_intx_assert(struct pci_func *f)
{
	pthread_mutex_lock(&f->cfg_lock);
	intx_set(f, true);
	pthread_mutex_unlock(&f->cfg_lock);
}

void pci_intx_deassert(struct pci_func *f)
{
	pthread_mutex_lock(&f->cfg_lock);
	intx_set(f, false);
	pthread_mutex_unlock(&f->cfg_lock);
}

/* ---- MSI ---- */

int pci_add_msi_cap(struct pci_func *f, unsigned nvec)
{
	uint8_t cap[14] = {PCIY_MSI};
	unsigned mmc = 0;

	if (nvec == 0 || nvec > 32 || (nvec & (nvec - 1)) != 0)
		return -1;
	while ((1u << mmc) < nvec)
		mmc++;
	cap[2] = (uint8_t)(MSI_CTRL_64BIT | (mmc << 1));
	f->msi.cap = pci_add_cap(f, cap, sizeof(cap));
	return f->msi.cap ? 0 : -1;
}

/* msi.enabled and msi.nvec from the capability's control register. */
static void msi_ctrl_decode(struct pci_func *f)
{
	uint16_t ctrl = (uint16_t)pci_get_cfg(f, f->msi.cap + 2, 2);
	unsigned mmc = (ctrl >> 1) & 7, mme = (ctrl >> 4) & 7;

	if (mme > mmc)
		mme = mmc;
	f->msi.enabled = ctrl & MSI_CTRL_ENABLE;
	f->msi.nvec = 1u << mme;
}

static void msi_ctrl_write(struct pci_func *f)
{
	msi_ctrl_decode(f);
	if (f->msi.enabled)
		intx_set(f, false);
}

static void msi_send(struct pci_func *f, unsigned vec)
{
	uint64_t addr;
	uint32_t data;

	pthread_mutex_lock(&f->cfg_lock);
	addr =
	    pci_get_cfg(f, f->msi.cap + 4, 4) | ((uint64_t)pci_get_cfg(f, f->msi.cap + 8, 4) << 32);
	data = pci_get_cfg(f, f->msi.cap + 12, 2);
	/* Multiple-message MSI puts the vector in the low data bits. */
	data = (data & ~(f->msi.nvec - 1)) | (vec & (f->msi.nvec - 1));
	pthread_mutex_unlock(&f->cfg_lock);
	irq_signal_msi(&f->m->vm, addr, data);
}

/* ---- MSI-X ---- */

int pci_add_msix_cap(struct pci_func *f, unsigned count, int bar)
{
	uint8_t cap[12] = {PCIY_MSIX};
	uint64_t table_size = (uint64_t)count * MSIX_ENTRY_SIZE;
	uint64_t pba_off = (table_size + 4095) & ~4095ull;
	uint64_t pba_size = ((count + 63) / 64) * 8;

	if (count == 0 || count > 2048 || bar < 0 || bar >= PCI_NBARS)
		return -1;
	f->msix.table = calloc(count, sizeof(*f->msix.table));
	f->msix.pba = calloc((count + 63) / 64, sizeof(uint64_t));
	if (f->msix.table == NULL || f->msix.pba == NULL ||
	    pci_alloc_bar(f, bar, PCI_BAR_MEM32, pba_off + pba_size) < 0)
		return -1;
	for (unsigned i = 0; i < count; i++) {
		f->msix.table[i].ctrl = MSIX_VEC_MASKED;
		f->msix.table[i].gsi = -1;
		f->msix.table[i].irqfd = -1;
	}
	f->msix.table_bar = f->msix.pba_bar = bar;
	f->msix.table_offset = 0;
	f->msix.pba_offset = (uint32_t)pba_off;
	f->msix.table_count = count;
	cap[2] = (uint8_t)(count - 1);
	cap[3] = (uint8_t)((count - 1) >> 8);
	cap[4] = (uint8_t)bar; /* table offset 0, BIR */
	cap[8] = (uint8_t)(pba_off | (uint64_t)bar);
	cap[9] = (uint8_t)(pba_off >> 8);
	cap[10] = (uint8_t)(pba_off >> 16);
	cap[11] = (uint8_t)(pba_off >> 24);
	f->msix.cap = pci_add_cap(f, cap, sizeof(cap));
	return f->msix.cap ? 0 : -1;
}

static bool msix_vector_masked(const struct pci_func *f, unsigned vec)
{
	return f->msix.function_masked || (f->msix.table[vec].ctrl & MSIX_VEC_MASKED);
}

/* An event signalled on the unbound irqfd of `vec` (a device that had not
 * yet seen the mask) becomes its pending bit, which the guest can read. */
static void msix_drain_irqfd(struct pci_func *f, unsigned vec)
{
	uint64_t count;

	if (read(f->msix.table[vec].irqfd, &count, sizeof(count)) == sizeof(count) && count != 0)
		f->msix.pba[vec / 64] |= 1ull << (vec % 64);
}

/* Keep the irqfd of `vec` bound exactly while the vector can fire; an
 * event signalled while unbound is moved to the pending bit here, and one
 * that comes later stays in the eventfd, which KVM_IRQFD delivers when it
 * binds it again. */
static void msix_sync_irqfd(struct pci_func *f, unsigned vec)
{
	struct msix_entry *e = &f->msix.table[vec];
	bool want = f->msix.enabled && !msix_vector_masked(f, vec);

	if (e->irqfd < 0)
		return;
	if (e->gsi >= 0)
		irq_route_msi_update(&f->m->vm, e->gsi, e->addr, e->data);
	if (want && e->gsi < 0) {
		e->gsi = irq_route_msi_add(&f->m->vm, e->addr, e->data);
		if (e->gsi >= 0 && irq_irqfd_bind(&f->m->vm, e->irqfd, e->gsi) < 0) {
			irq_route_msi_del(&f->m->vm, e->gsi);
			e->gsi = -1;
		}
	} else if (!want && e->gsi >= 0) {
		irq_irqfd_unbind(&f->m->vm, e->irqfd, e->gsi);
		irq_route_msi_del(&f->m->vm, e->gsi);
		e->gsi = -1;
	}
	if (!want)
		msix_drain_irqfd(f, vec);
}

static void msix_deliver_pending(struct pci_func *f, unsigned vec)
{
	struct msix_entry *e = &f->msix.table[vec];

	if (!(f->msix.pba[vec / 64] & (1ull << (vec % 64))) || msix_vector_masked(f, vec) ||
	    !f->msix.enabled)
		return;
	f->msix.pba[vec / 64] &= ~(1ull << (vec % 64));
	irq_signal_msi(&f->m->vm, e->addr, e->data);
}

/* msix.enabled and msix.function_masked from the control register. */
static void msix_ctrl_decode(struct pci_func *f)
{
	uint16_t ctrl = (uint16_t)pci_get_cfg(f, f->msix.cap + 2, 2);

	f->msix.enabled = ctrl & MSIX_CTRL_ENABLE;
	f->msix.function_masked = ctrl & MSIX_CTRL_FMASK;
}

/* Bind or unbind every vector's irqfd and deliver what became unmasked. */
static void msix_sync_all(struct pci_func *f)
{
	for (unsigned v = 0; v < f->msix.table_count; v++) {
		msix_sync_irqfd(f, v);
		msix_deliver_pending(f, v);
	}
}

static void msix_ctrl_write(struct pci_func *f)
{
	msix_ctrl_decode(f);
	if (f->msix.enabled)
		intx_set(f, false);
	msix_sync_all(f);
}

static uint64_t msix_table_read(struct pci_func *f, uint64_t off, unsigned size)
{
	unsigned vec = (unsigned)(off / MSIX_ENTRY_SIZE), field = (unsigned)(off % MSIX_ENTRY_SIZE);
	const struct msix_entry *e;
	uint8_t raw[MSIX_ENTRY_SIZE];
	uint64_t v = 0;

	if (vec >= f->msix.table_count || field + size > MSIX_ENTRY_SIZE)
		return ~0ull;
	e = &f->msix.table[vec];
	memcpy(raw, &e->addr, 8);
	memcpy(raw + 8, &e->data, 4);
	memcpy(raw + 12, &e->ctrl, 4);
	memcpy(&v, raw + field, size);
	return v;
}

static void msix_table_write(struct pci_func *f, uint64_t off, unsigned size, uint64_t val)
{
	unsigned vec = (unsigned)(off / MSIX_ENTRY_SIZE), field = (unsigned)(off % MSIX_ENTRY_SIZE);
	struct msix_entry *e;
	uint8_t raw[MSIX_ENTRY_SIZE];

	if (vec >= f->msix.table_count || field + size > MSIX_ENTRY_SIZE)
		return;
	e = &f->msix.table[vec];
	memcpy(raw, &e->addr, 8);
	memcpy(raw + 8, &e->data, 4);
	memcpy(raw + 12, &e->ctrl, 4);
	memcpy(raw + field, &val, size);
	memcpy(&e->addr, raw, 8);
	memcpy(&e->data, raw + 8, 4);
	memcpy(&e->ctrl, raw + 12, 4);
	e->ctrl &= MSIX_VEC_MASKED; /* other control bits are reserved */
	msix_sync_irqfd(f, vec);
	msix_deliver_pending(f, vec);
}

/* Whether [off, off+size) of BAR `bar` falls in the MSI-X table / PBA. */
static bool msix_in_table(const struct pci_func *f, int bar, uint64_t off, unsigned size)
{
	return bar == f->msix.table_bar && off >= f->msix.table_offset &&
	       off - f->msix.table_offset + size <= (uint64_t)f->msix.table_count * MSIX_ENTRY_SIZE;
}

static bool msix_in_pba(const struct pci_func *f, int bar, uint64_t off, unsigned size)
{
	return bar == f->msix.pba_bar && off >= f->msix.pba_offset &&
	       off - f->msix.pba_offset + size <= ((f->msix.table_count + 63) / 64) * 8;
}

/* Whether the PCI layer serves this BAR access itself: all of a BAR it
 * made for MSI-X, only the table and PBA of a device's shared BAR. */
static bool msix_claims(const struct pci_func *f, int bar, uint64_t off, unsigned size)
{
	if (f->msix.cap == 0 || (bar != f->msix.table_bar && bar != f->msix.pba_bar))
		return false;
	return !f->msix.shared_bar || msix_in_table(f, bar, off, size) ||
	       msix_in_pba(f, bar, off, size);
}

static uint64_t msix_bar_read(struct pci_func *f, int bar, uint64_t off, unsigned size)
{
	uint64_t v = ~0ull;

	pthread_mutex_lock(&f->cfg_lock);
	if (msix_in_table(f, bar, off, size))
		v = msix_table_read(f, off - f->msix.table_offset, size);
	else if (msix_in_pba(f, bar, off, size))
		memcpy(&v, (uint8_t *)f->msix.pba + (off - f->msix.pba_offset), size);
	pthread_mutex_unlock(&f->cfg_lock);
	if (size < 8)
		v &= (1ull << (8 * size)) - 1;
	return v;
}

int pci_adopt_msix_cap(struct pci_func *f, uint8_t cap, unsigned count, int table_bar,
                       uint32_t table_offset, int pba_bar, uint32_t pba_offset)
{
	if (count == 0 || count > 2048 || table_bar < 0 || table_bar >= PCI_NBARS || pba_bar < 0 ||
	    pba_bar >= PCI_NBARS || cap < 0x40 || f->msix.cap != 0)
		return -1;
	f->msix.table = calloc(count, sizeof(*f->msix.table));
	f->msix.pba = calloc((count + 63) / 64, sizeof(uint64_t));
	if (f->msix.table == NULL || f->msix.pba == NULL)
		return -1;
	for (unsigned i = 0; i < count; i++) {
		f->msix.table[i].ctrl = MSIX_VEC_MASKED;
		f->msix.table[i].gsi = -1;
		f->msix.table[i].irqfd = -1;
	}
	f->msix.table_bar = table_bar;
	f->msix.pba_bar = pba_bar;
	f->msix.table_offset = table_offset;
	f->msix.pba_offset = pba_offset;
	f->msix.table_count = count;
	f->msix.shared_bar = true;
	f->msix.cap = cap;
	/* Disabled and unmasked at first, as after reset. */
	f->cfg[cap + 3] &= 0x3f;
	return 0;
}

bool pci_msix_enabled(const struct pci_func *f)
{
	return f->msix.cap != 0 && f->msix.enabled;
}

bool pci_msi_enabled(const struct pci_func *f)
{
	return f->msi.cap != 0 && f->msi.enabled;
}

int pci_msix_irqfd(struct pci_func *f, unsigned vec)
{
	struct msix_entry *e;
	int fd = -1;

	pthread_mutex_lock(&f->cfg_lock);
	if (!f->msix.enabled || vec >= f->msix.table_count)
		goto out;
	e = &f->msix.table[vec];
	if (e->irqfd < 0) {
		e->irqfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		msix_sync_irqfd(f, vec);
	}
	fd = e->irqfd;
out:
	pthread_mutex_unlock(&f->cfg_lock);
	return fd;
}

int pci_msix_live_irqfd(struct pci_func *f, unsigned vec)
{
	int fd = pci_msix_irqfd(f, vec);
	bool masked;

	if (fd < 0)
		return -1;
	pthread_mutex_lock(&f->cfg_lock);
	masked = msix_vector_masked(f, vec);
	pthread_mutex_unlock(&f->cfg_lock);
	return masked ? -1 : fd;
}

void pci_interrupt(struct pci_func *f, unsigned vec)
{
	struct msix_entry e;

	if (f->msix.enabled) {
		pthread_mutex_lock(&f->cfg_lock);
		if (vec >= f->msix.table_count) {
			pthread_mutex_unlock(&f->cfg_lock);
			return;
		}
		if (msix_vector_masked(f, vec)) {
			f->msix.pba[vec / 64] |= 1ull << (vec % 64);
			pthread_mutex_unlock(&f->cfg_lock);
			return;
		}
		e = f->msix.table[vec];
		pthread_mutex_unlock(&f->cfg_lock);
		irq_signal_msi(&f->m->vm, e.addr, e.data);
	} else if (f->msi.enabled) {
		msi_send(f, vec);
	} else {
		pci_intx_assert(f);
	}
}

/* ---- BAR access dispatch ---- */

static uint64_t bar_access_read(struct pci_func *f, struct pci_bar *b, uint64_t off, unsigned size)
{
	uint64_t v = 0;

	if (b->type == PCI_BAR_ROM) {
		memcpy(&v, b->rom + off, size);
		return v;
	}
	if (msix_claims(f, b->idx, off, size))
		return msix_bar_read(f, b->idx, off, size);
	return f->de->bar_read ? f->de->bar_read(f, b->idx, off, size) : ~0ull;
}

static void bar_access_write(struct pci_func *f, struct pci_bar *b, uint64_t off, unsigned size,
                             uint64_t val)
{
	if (b->type == PCI_BAR_ROM)
		return;
	if (msix_claims(f, b->idx, off, size)) {
		if (!msix_in_table(f, b->idx, off, size))
			return; /* the PBA is read-only */
		pthread_mutex_lock(&f->cfg_lock);
		msix_table_write(f, off - f->msix.table_offset, size, val);
		pthread_mutex_unlock(&f->cfg_lock);
		if (f->de->vector_changed)
			f->de->vector_changed(f);
		return;
	}
	if (f->de->bar_write)
		f->de->bar_write(f, b->idx, off, size, val);
}

/* ---- configuration space access ---- */

static struct pci_func *lookup(unsigned bus, unsigned slot, unsigned func)
{
	for (unsigned i = 0; i < nfuncs; i++)
		if (funcs[i]->bus == bus && funcs[i]->slot == slot && funcs[i]->func == func)
			return funcs[i];
	return NULL;
}

static bool in_range(unsigned off, unsigned size, unsigned start, unsigned len)
{
	return off < start + len && start < off + size;
}

/* Writes to the standard header and to the MSI/MSI-X capabilities. */
static bool generic_cfg_write(struct pci_func *f, unsigned off, unsigned size, uint32_t val,
                              bool *vectors_changed)
{
	unsigned dw = off & ~3u;
	uint32_t old = pci_get_cfg(f, dw, 4), merged = old;

	for (unsigned i = 0; i < size; i++) {
		unsigned shift = 8 * ((off + i) & 3);

		merged = (merged & ~(0xffu << shift)) | (((val >> (8 * i)) & 0xff) << shift);
	}
	if (dw >= PCIR_BAR0 && dw < PCIR_BAR0 + 4 * PCI_NBARS) {
		bar_register_write(f, (int)(dw - PCIR_BAR0) / 4, merged);
	} else if (dw == PCIR_ROM) {
		rom_register_write(f, merged);
	} else if (dw == PCIR_COMMAND) {
		/* Command is writable; status bits are read-only or
		 * write-one-to-clear, and khyve reports no errors. */
		pci_set_cfg(f, PCIR_COMMAND, 2, merged & 0x0547);
		bars_update(f);
		intx_set(f, (pci_get_cfg(f, PCIR_STATUS, 2) & PCIM_STATUS_INTR) != 0);
	} else if (dw == 0x0c || dw == PCIR_INTLINE) {
		/* cache line size, latency timer / interrupt line */
		pci_set_cfg(f, dw, 1, merged & 0xff);
		if (dw == 0x0c)
			pci_set_cfg(f, 0x0d, 1, (merged >> 8) & 0xff);
	} else if (f->msi.cap && in_range(off, size, f->msi.cap + 2, 12)) {
		/* address and data are writable; of control only the enable bit
		 * and Multiple Message Enable (bits 6:4) */
		unsigned s = off < f->msi.cap + 2u ? f->msi.cap + 2u : off;
		uint16_t ctrl = (uint16_t)pci_get_cfg(f, f->msi.cap + 2, 2);

		for (; s < off + size && s < f->msi.cap + 14u; s++)
			f->cfg[s] = (uint8_t)(val >> (8 * (s - off)));
		ctrl =
		    (uint16_t)((ctrl & ~0x0071u) | (pci_get_cfg(f, f->msi.cap + 2, 2) & 0x0071u));
		pci_set_cfg(f, f->msi.cap + 2, 2, ctrl);
		msi_ctrl_write(f);
		*vectors_changed = true;
	} else if (f->msix.cap && in_range(off, size, f->msix.cap + 3, 1)) {
		/* only the enable and function-mask bits of control */
		uint8_t hi = (uint8_t)(val >> (8 * (f->msix.cap + 3 - off)));

		f->cfg[f->msix.cap + 3] = (uint8_t)((f->cfg[f->msix.cap + 3] & 0x07) | (hi & 0xc0));
		msix_ctrl_write(f);
		*vectors_changed = true;
	} else {
		return false;
	}
	return true;
}

uint32_t pci_cfg_read(unsigned bus, unsigned slot, unsigned func, unsigned off, unsigned size)
{
	struct pci_func *f = lookup(bus, slot, func);
	uint32_t v;

	if (f == NULL || off >= PCI_CFG_SIZE || size == 0 || size > 4 || size > PCI_CFG_SIZE - off)
		return size >= 4 ? 0xffffffffu : (1u << (8 * size)) - 1;
	pthread_mutex_lock(&f->cfg_lock);
	if (f->de->cfg_read == NULL || f->de->cfg_read(f, off, size, &v) != 0)
		v = pci_get_cfg(f, off, size);
	pthread_mutex_unlock(&f->cfg_lock);
	return v;
}

void pci_cfg_write(unsigned bus, unsigned slot, unsigned func, unsigned off, unsigned size,
                   uint32_t val)
{
	struct pci_func *f = lookup(bus, slot, func);
	bool changed = false;

	if (f == NULL || off >= PCI_CFG_SIZE || size == 0 || size > 4 || size > PCI_CFG_SIZE - off)
		return;
	/* Accesses never straddle a dword on real hardware; drop those that do. */
	if ((off & 3) + size > 4)
		return;
	pthread_mutex_lock(&f->cfg_lock);
	if (f->de->cfg_write == NULL || f->de->cfg_write(f, off, size, val) != 0)
		generic_cfg_write(f, off, size, val, &changed);
	pthread_mutex_unlock(&f->cfg_lock);
	if (changed && f->de->vector_changed)
		f->de->vector_changed(f);
}

/* ---- mechanism #1 and ECAM ---- */

static int cf8_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	(void)arg;
	(void)offset;
	if (size != 4) {
		if (!is_write)
			*val = ~0ull;
		return 0; /* byte access to 0xCF8 is some other device's; ignore */
	}
	pthread_mutex_lock(&cf8_lock);
	if (is_write)
		cf8 = (uint32_t)*val & 0x8fffffffu;
	else
		*val = cf8;
	pthread_mutex_unlock(&cf8_lock);
	return 0;
}

static int cfc_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	uint32_t a;
	unsigned bus, slot, func, reg;

	(void)arg;
	pthread_mutex_lock(&cf8_lock);
	a = cf8;
	pthread_mutex_unlock(&cf8_lock);
	if (!(a & CF8_ENABLE) || (offset & 3) + size > 4) {
		if (!is_write)
			*val = ~0ull;
		return 0;
	}
	bus = (a >> 16) & 0xff;
	slot = (a >> 11) & 0x1f;
	func = (a >> 8) & 7;
	/* Bits 27:24 extend the register number (AMD's extended config access). */
	reg = ((a >> 16) & 0xf00) | (a & 0xfc) | (unsigned)(offset & 3);
	if (is_write)
		pci_cfg_write(bus, slot, func, reg, size, (uint32_t)*val);
	else
		*val = pci_cfg_read(bus, slot, func, reg, size);
	return 0;
}

static int ecam_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	unsigned bus = (unsigned)(offset >> 20) & 0xff, slot = (unsigned)(offset >> 15) & 0x1f;
	unsigned func = (unsigned)(offset >> 12) & 7, reg = (unsigned)offset & 0xfff;

	(void)arg;
	if (size > 4 || (reg & 3) + size > 4) {
		if (!is_write)
			*val = ~0ull;
		return 0;
	}
	if (is_write)
		pci_cfg_write(bus, slot, func, reg, size, (uint32_t)*val);
	else
		*val = pci_cfg_read(bus, slot, func, reg, size);
	return 0;
}

/* ---- saved state (docs/design/snapshots.md section 2, "bus") ---- */

#define PCI_STATE_VERSION 1
#define PCI_CMD_WRITABLE  0x0547 /* command bits a guest can set */

void pci_state_name(const struct pci_func *f, char *buf, size_t len)
{
	snprintf(buf, len, "pci.%u.%u.%u.%s", f->bus, f->slot, f->func, f->de->name);
}

int pci_save_nothing(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	(void)f;
	(void)err;
	(void)errlen;
	sbuf_put_u16(out, 1);
	return 0;
}

int pci_restore_nothing(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	(void)f;
	if (sbuf_get_version(in, 1) != 0)
		return 0;
	snprintf(err, errlen, "%s", in->why);
	return -1;
}

/*
 * The generic part of a section, read and checked whole before any of it
 * is applied, so that a refused restore leaves the function as it was.
 */
struct pci_saved {
	uint8_t cfg[PCI_CFG_SIZE];
	struct {
		uint8_t type;
		uint64_t addr, size;
	} bar[PCI_NBARS + 1];
	bool intx_asserted;
	bool msi_enabled;
	uint32_t msi_nvec;
	bool msix_enabled, msix_fmask;
	struct msix_entry *table; /* msix.table_count entries (addr/data/ctrl), owned */
	uint64_t *pba;            /* (table_count + 63) / 64 words, owned */
};

static unsigned msix_pba_words(const struct pci_func *f)
{
	return (f->msix.table_count + 63) / 64;
}

/* Events sent on an unbound irqfd (a masked vector) are pending interrupts
 * that live in the eventfd, not in saved state: move them to the PBA. */
static void msix_drain_unbound(struct pci_func *f)
{
	for (unsigned v = 0; v < f->msix.table_count; v++)
		if (f->msix.table[v].irqfd >= 0 && f->msix.table[v].gsi < 0)
			msix_drain_irqfd(f, v);
}

static void save_generic(struct pci_func *f, struct sbuf *out)
{
	size_t nlen = strlen(f->de->name);

	if (nlen > UINT8_MAX)
		nlen = UINT8_MAX;
	sbuf_put_u16(out, PCI_STATE_VERSION);
	sbuf_put_u8(out, (uint8_t)nlen);
	sbuf_put_bytes(out, f->de->name, nlen);
	pthread_mutex_lock(&f->cfg_lock);
	msix_drain_unbound(f);
	sbuf_put_bytes(out, f->cfg, PCI_CFG_SIZE);
	for (int i = 0; i <= PCI_ROM_BAR; i++) {
		sbuf_put_u8(out, (uint8_t)f->bar[i].type);
		sbuf_put_u64(out, f->bar[i].addr);
		sbuf_put_u64(out, f->bar[i].size);
	}
	sbuf_put_bool(out, f->intx_asserted);
	sbuf_put_bool(out, f->msi.enabled);
	sbuf_put_u32(out, f->msi.nvec);
	sbuf_put_u32(out, f->msix.table_count);
	sbuf_put_bool(out, f->msix.enabled);
	sbuf_put_bool(out, f->msix.function_masked);
	for (unsigned v = 0; v < f->msix.table_count; v++) {
		sbuf_put_u64(out, f->msix.table[v].addr);
		sbuf_put_u32(out, f->msix.table[v].data);
		sbuf_put_u32(out, f->msix.table[v].ctrl);
	}
	for (unsigned w = 0; w < msix_pba_words(f); w++)
		sbuf_put_u64(out, f->msix.pba[w]);
	pthread_mutex_unlock(&f->cfg_lock);
}

static int pci_state_save(void *arg, struct sbuf *out, char *err, size_t errlen)
{
	struct pci_func *f = arg;
	char name[STATE_NAME_LEN];

	save_generic(f, out);
	if (f->de->save(f, out, err, errlen) < 0)
		return -1;
	if (out->failed) {
		pci_state_name(f, name, sizeof(name));
		snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	return 0;
}

/* The saved emulation name must be this function's (a state file made
 * with another device in the slot is refused, not misread). */
static int read_emulation_name(const struct pci_func *f, struct sbuf_reader *in)
{
	char name[UINT8_MAX + 1];
	uint8_t nlen = sbuf_get_u8(in);

	sbuf_get_bytes(in, name, nlen);
	name[nlen] = '\0';
	if (in->failed)
		return -1;
	for (unsigned i = 0; i < nlen; i++)
		if (name[i] < '!' || name[i] > '~')
			name[i] = '?'; /* it goes into an error line */
	if (strcmp(name, f->de->name) != 0) {
		sbuf_fail(in, "saved from a %.40s, this function is a %s", name, f->de->name);
		return -1;
	}
	return 0;
}

static int read_msix(const struct pci_func *f, struct sbuf_reader *in, struct pci_saved *s)
{
	uint32_t count = sbuf_get_u32(in);
	unsigned nw = msix_pba_words(f);

	s->msix_enabled = sbuf_get_bool(in);
	s->msix_fmask = sbuf_get_bool(in);
	if (in->failed)
		return -1;
	if (count != f->msix.table_count) {
		sbuf_fail(in, "MSI-X table of %u vectors, this function has %u", count,
		          f->msix.table_count);
		return -1;
	}
	if (count == 0)
		return 0;
	s->table = calloc(count, sizeof(*s->table));
	s->pba = calloc(nw, sizeof(*s->pba));
	if (s->table == NULL || s->pba == NULL) {
		sbuf_fail(in, "out of memory");
		return -1;
	}
	for (unsigned v = 0; v < count && !in->failed; v++) {
		s->table[v].addr = sbuf_get_u64(in);
		s->table[v].data = sbuf_get_u32(in);
		s->table[v].ctrl = sbuf_get_u32(in);
		if (s->table[v].ctrl & ~(uint32_t)MSIX_VEC_MASKED)
			sbuf_fail(in, "MSI-X vector %u control 0x%x has reserved bits", v,
			          s->table[v].ctrl);
	}
	for (unsigned w = 0; w < nw; w++)
		s->pba[w] = sbuf_get_u64(in);
	if (!in->failed && count % 64 != 0 && (s->pba[nw - 1] >> (count % 64)) != 0)
		sbuf_fail(in, "MSI-X pending bits past vector %u", count - 1);
	return in->failed ? -1 : 0;
}

static int read_generic(const struct pci_func *f, struct sbuf_reader *in, struct pci_saved *s)
{
	if (sbuf_get_version(in, PCI_STATE_VERSION) == 0 || read_emulation_name(f, in) < 0)
		return -1;
	sbuf_get_bytes(in, s->cfg, PCI_CFG_SIZE);
	for (int i = 0; i <= PCI_ROM_BAR; i++) {
		s->bar[i].type = sbuf_get_u8(in);
		s->bar[i].addr = sbuf_get_u64(in);
		s->bar[i].size = sbuf_get_u64(in);
	}
	s->intx_asserted = sbuf_get_bool(in);
	s->msi_enabled = sbuf_get_bool(in);
	s->msi_nvec = sbuf_get_u32(in);
	if (in->failed)
		return -1;
	return read_msix(f, in, s);
}

/* One past the highest address a BAR of `type` can hold; 0: all of 64 bits. */
static uint64_t bar_addr_limit(enum pci_bar_type type)
{
	switch (type) {
	case PCI_BAR_IO:
		return PCI_IO_END;
	case PCI_BAR_MEM32:
	case PCI_BAR_ROM:
		return 1ull << 32;
	case PCI_BAR_MEM64:
		return 0;
	default:
		return 1; /* no BAR, or the upper half of one: address 0 */
	}
}

/* A BAR must be the kind and size this function declares, at an address
 * a guest could have written (aligned, inside its address space). */
static int check_bar(const struct pci_func *f, int i, const struct pci_saved *s,
                     struct sbuf_reader *in)
{
	const struct pci_bar *b = &f->bar[i];
	uint64_t addr = s->bar[i].addr, size = s->bar[i].size;
	uint64_t limit = bar_addr_limit(b->type);

	if (s->bar[i].type != b->type || size != b->size) {
		sbuf_fail(in,
		          "BAR%d is type %u of 0x%llx bytes, this function's is type %u of 0x%llx",
		          i, s->bar[i].type, (unsigned long long)size, (unsigned)b->type,
		          (unsigned long long)b->size);
		return -1;
	}
	if ((size != 0 && (addr & (size - 1)) != 0) || (limit != 0 && addr >= limit) ||
	    (limit == 0 && addr > UINT64_MAX - size)) {
		sbuf_fail(in, "BAR%d address 0x%llx is not one a guest can set", i,
		          (unsigned long long)addr);
		return -1;
	}
	return 0;
}

/* Offsets of the header that no guest write changes (PCI 3.0 6.2.1). */
static const uint8_t pci_fixed_header[] = {0x00, 0x01, 0x02, 0x03, 0x08, 0x09, 0x0a, 0x0b,
                                           0x0e, 0x2c, 0x2d, 0x2e, 0x2f, 0x34, 0x3d};

static int fixed_byte_matches(const struct pci_func *f, const struct pci_saved *s, unsigned off,
                              uint8_t mask, struct sbuf_reader *in)
{
	if (((s->cfg[off] ^ f->cfg[off]) & mask) == 0)
		return 0;
	sbuf_fail(in, "config byte 0x%03x is 0x%02x, this function's is 0x%02x", off, s->cfg[off],
	          f->cfg[off]);
	return -1;
}

/* The bits of capability byte `off` that no guest write changes
 * (generic_cfg_write()): MSI's enable and MME, address and data, and
 * MSI-X's enable and function mask are the writable ones. */
static uint8_t cap_fixed_mask(const struct pci_func *f, unsigned off)
{
	if (f->msi.cap && off == f->msi.cap + 2u)
		return (uint8_t)~0x71u;
	if (f->msi.cap && off >= f->msi.cap + 4u && off < f->msi.cap + 14u)
		return 0;
	if (f->msix.cap && off == f->msix.cap + 3u)
		return (uint8_t)~0xc0u;
	return 0xff;
}

/*
 * Identity, header type, capability links and the read-only capability
 * fields: a saved image that differs there was made by another kind or
 * configuration of device.
 */
static int check_fixed_cfg(const struct pci_func *f, const struct pci_saved *s,
                           struct sbuf_reader *in)
{
	unsigned cmd = s->cfg[PCIR_COMMAND] | (unsigned)s->cfg[PCIR_COMMAND + 1] << 8;
	int bad = 0;

	for (size_t i = 0; i < sizeof(pci_fixed_header); i++)
		bad |= fixed_byte_matches(f, s, pci_fixed_header[i], 0xff, in);
	/* An emulation with its own cfg_write may make more bytes writable;
	 * without one, the capability list changes only where cap_fixed_mask()
	 * says. */
	for (unsigned off = 0x40; f->de->cfg_write == NULL && off < f->cap_end; off++)
		bad |= fixed_byte_matches(f, s, off, cap_fixed_mask(f, off), in);
	if (!bad && (cmd & ~PCI_CMD_WRITABLE) != 0) {
		sbuf_fail(in, "command register 0x%04x has bits a guest cannot set", cmd);
		bad = -1;
	}
	return bad ? -1 : 0;
}

/* The derived flags must agree with the control registers they come from. */
static int check_vectors(const struct pci_func *f, const struct pci_saved *s,
                         struct sbuf_reader *in)
{
	unsigned msi_ctrl = f->msi.cap ? s->cfg[f->msi.cap + 2u] : 0;
	unsigned msix_ctrl = f->msix.cap ? s->cfg[f->msix.cap + 3u] : 0;
	bool msi_on = msi_ctrl & MSI_CTRL_ENABLE;

	if (s->msi_enabled != msi_on || s->msi_nvec > 32 ||
	    (s->msi_nvec & (s->msi_nvec - 1)) != 0) {
		sbuf_fail(in, "MSI enabled %d with %u vectors disagrees with its capability",
		          s->msi_enabled, s->msi_nvec);
		return -1;
	}
	if (s->msix_enabled != ((msix_ctrl & (MSIX_CTRL_ENABLE >> 8)) != 0) ||
	    s->msix_fmask != ((msix_ctrl & (MSIX_CTRL_FMASK >> 8)) != 0)) {
		sbuf_fail(in, "MSI-X enabled %d masked %d disagrees with its capability",
		          s->msix_enabled, s->msix_fmask);
		return -1;
	}
	if (s->intx_asserted && f->intx_gsi < 0) {
		sbuf_fail(in, "INTx asserted on a function without INTx");
		return -1;
	}
	return 0;
}

static int check_generic(const struct pci_func *f, const struct pci_saved *s,
                         struct sbuf_reader *in)
{
	for (int i = 0; i <= PCI_ROM_BAR; i++)
		if (check_bar(f, i, s, in) < 0)
			return -1;
	if (check_fixed_cfg(f, s, in) < 0)
		return -1;
	return check_vectors(f, s, in);
}

/*
 * Put checked state in place and re-drive what follows from it, through
 * the paths a guest's own writes take: BARs unmapped, moved and mapped
 * again where the command register decodes them (bar_moved on each),
 * MSI-X routes and irqfds rebound, pending vectors that are unmasked
 * delivered, the INTx line driven to its saved level.  cfg_lock held.
 */
static void apply_generic(struct pci_func *f, const struct pci_saved *s)
{
	for (int i = 0; i <= PCI_ROM_BAR; i++)
		bar_unmap(f, &f->bar[i]);
	memcpy(f->cfg, s->cfg, PCI_CFG_SIZE);
	for (int i = 0; i <= PCI_ROM_BAR; i++) {
		if (f->bar[i].type == PCI_BAR_NONE || f->bar[i].type == PCI_BAR_MEM64_HI)
			continue;
		f->bar[i].addr = s->bar[i].addr;
		bar_store_register(f, i);
	}
	bars_update(f);
	f->msi.enabled = s->msi_enabled;
	f->msi.nvec = s->msi_nvec;
	if (f->msix.cap) {
		for (unsigned v = 0; v < f->msix.table_count; v++) {
			f->msix.table[v].addr = s->table[v].addr;
			f->msix.table[v].data = s->table[v].data;
			f->msix.table[v].ctrl = s->table[v].ctrl;
		}
		memcpy(f->msix.pba, s->pba, msix_pba_words(f) * sizeof(*f->msix.pba));
		f->msix.enabled = s->msix_enabled;
		f->msix.function_masked = s->msix_fmask;
		msix_sync_all(f);
	}
	if (f->intx_gsi >= 0 && s->intx_asserted != f->intx_asserted) {
		f->intx_asserted = s->intx_asserted;
		machine_intx_level(f->m, (unsigned)f->intx_gsi, s->intx_asserted);
	}
}

static int pci_state_restore(void *arg, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct pci_func *f = arg;
	struct pci_saved *s = calloc(1, sizeof(*s));
	char name[STATE_NAME_LEN];
	int rc = -1;

	pci_state_name(f, name, sizeof(name));
	if (s == NULL) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	if (read_generic(f, in, s) == 0 && check_generic(f, s, in) == 0) {
		pthread_mutex_lock(&f->cfg_lock);
		apply_generic(f, s);
		pthread_mutex_unlock(&f->cfg_lock);
		if (f->de->vector_changed != NULL)
			f->de->vector_changed(f);
		rc = f->de->restore(f, in, err, errlen);
	}
	if (in->failed)
		rc = sbuf_reader_done(in, name, err, errlen);
	free(s->table);
	free(s->pba);
	free(s);
	return rc;
}

static int pci_state_quiesce(void *arg, char *err, size_t errlen)
{
	struct pci_func *f = arg;

	return f->de->quiesce != NULL ? f->de->quiesce(f, err, errlen) : 0;
}

static void pci_state_unquiesce(void *arg)
{
	struct pci_func *f = arg;

	if (f->de->unquiesce != NULL)
		f->de->unquiesce(f);
}

static const struct state_ops pci_state_ops = {
    .quiesce = pci_state_quiesce,
    .unquiesce = pci_state_unquiesce,
    .save = pci_state_save,
    .restore = pci_state_restore,
};

/* An emulation without save/restore: save NULL makes a checkpoint refuse
 * it up front, and there is no section of it to restore. */
static const char *pci_never_saved(void *arg)
{
	const struct pci_func *f = arg;

	return f->de->never_saved;
}

static const struct state_ops pci_unsaveable_ops = {
    .quiesce = pci_state_quiesce,
    .unquiesce = pci_state_unquiesce,
    .never_saved = pci_never_saved,
};

static int register_state(struct pci_func *f, char *err, size_t errlen)
{
	bool saveable = f->de->save != NULL && f->de->restore != NULL;
	char name[STATE_NAME_LEN];

	pci_state_name(f, name, sizeof(name));
	if (machine_add_state(f->m, name, saveable ? &pci_state_ops : &pci_unsaveable_ops, f) < 0) {
		snprintf(err, errlen, "%s: cannot register its saved state", name);
		return -1;
	}
	return 0;
}

/* ---- creation ---- */

void pci_mmio64_window(uint64_t *base, uint64_t *size)
{
	*base = mmio64_base;
	*size = mmio64_end - mmio64_base;
}

static void choose_mmio64_window(struct machine *m)
{
	const uint64_t gib = 1ull << 30;
	uint64_t top = GMEM_HIGHMEM_BASE + m->vm.mem.highmem_size;

	mmio64_base = (top + gib - 1) & ~(gib - 1);
	mmio64_next = mmio64_base;
	mmio64_end = mmio64_base + 64 * gib;
}

void pci_write_dsdt(struct aml *a, void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < nfuncs; i++)
		if (funcs[i]->de->write_dsdt != NULL)
			funcs[i]->de->write_dsdt(funcs[i], a);
}

unsigned pci_count(void)
{
	return nfuncs;
}

struct pci_func *pci_get(unsigned i)
{
	return i < nfuncs ? funcs[i] : NULL;
}

/*
 * rom=FILE on any -s device (bhyve's passthru "rom=", QEMU's "romfile="):
 * an expansion ROM image that firmware such as SeaBIOS copies and runs
 * (PCI 3.0 section 6.3.1).  It must start with the 55 AA signature.
 */
#define PCI_ROM_MAX (16u << 20) /* bytes: the largest ROM BAR PCI allows */

/*
 * A ROM made for another device of the same vendor (Debian's iPXE
 * pxe-e1000.rom names QEMU's 82540EM, 8086:100e) is given this device's
 * ID in its first image's PCI data structure (PCI Firmware 3.0 section
 * 5.1.2), since SeaBIOS runs only a ROM whose IDs match; the checksum byte
 * at offset 6, where iPXE and Etherboot keep it, takes up the difference,
 * as QEMU's pci_patch_ids() does.  Any other ROM is left as it is.
 */
static void rom_patch_ids(const struct pci_func *f, uint8_t *rom, size_t len)
{
	uint16_t vendor = (uint16_t)pci_get_cfg(f, PCIR_VENDOR, 2);
	uint16_t device = (uint16_t)pci_get_cfg(f, PCIR_DEVICE, 2);
	size_t pcir = len >= 0x20 ? (size_t)rom[0x18] | (size_t)rom[0x19] << 8 : len;
	uint16_t old;

	if (pcir + 8 > len || memcmp(rom + pcir, "PCIR", 4) != 0 ||
	    (uint16_t)(rom[pcir + 4] | rom[pcir + 5] << 8) != vendor)
		return;
	old = (uint16_t)(rom[pcir + 6] | rom[pcir + 7] << 8);
	if (old == device)
		return;
	rom[pcir + 6] = (uint8_t)device;
	rom[pcir + 7] = (uint8_t)(device >> 8);
	/* The bytes' sum stays what it was. */
	rom[6] = (uint8_t)(rom[6] + (old & 0xff) + (old >> 8) - (device & 0xff) - (device >> 8));
	log_info("%02x:%02x.%x: option ROM for %04x:%04x given this device's ID %04x:%04x", f->bus,
	         f->slot, f->func, vendor, old, vendor, device);
}

static int attach_romfile(struct pci_func *f, const char *path, char *err, size_t errlen)
{
	char why[200];
	size_t len = 0;
	uint8_t *buf = file_read_all(path, PCI_ROM_MAX, &len, why, sizeof(why));
	int rc = -1;

	if (buf == NULL) {
		snprintf(err, errlen, "rom: %s", why);
		return -1;
	}
	if (len < 3 || buf[0] != 0x55 || buf[1] != 0xaa) {
		snprintf(err, errlen, "rom=%s: not an option ROM (no 55 AA signature)", path);
	} else if (f->bar[PCI_ROM_BAR].type != PCI_BAR_NONE) {
		snprintf(err, errlen, "rom=%s: this device has its own ROM", path);
	} else {
		rom_patch_ids(f, buf, len);
		rc = pci_alloc_rom(f, buf, (uint64_t)len);
		if (rc < 0)
			snprintf(err, errlen, "rom=%s: no room for a %zu-byte ROM BAR", path, len);
	}
	free(buf);
	return rc;
}

static int create_func(struct machine *m, unsigned bus, unsigned slot, unsigned func,
                       struct config_node *node, char *err, size_t errlen)
{
	const char *emul = config_node_get(node, "device");
	const struct pci_devemu *de = emul ? pci_devemu_find(emul) : NULL;
	struct pci_func *f;
	char why[256] = "";

	if (de == NULL) {
		snprintf(err, errlen, "pci.%u.%u.%u: unknown device '%s'", bus, slot, func,
		         emul ? emul : "");
		return -1;
	}
	if (bus != 0 || nfuncs == PCI_MAX_FUNCS) {
		snprintf(err, errlen, "pci.%u.%u.%u: only bus 0 is supported", bus, slot, func);
		return -1;
	}
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -1;
	f->m = m;
	f->bus = (uint8_t)bus;
	f->slot = (uint8_t)slot;
	f->func = (uint8_t)func;
	f->de = de;
	f->intx_gsi = -1;
	pthread_mutex_init(&f->cfg_lock, NULL);
	for (int i = 0; i <= PCI_ROM_BAR; i++) {
		f->bar[i].owner = f;
		f->bar[i].idx = i;
	}
	funcs[nfuncs++] = f;
	if (de->init(m, f, node, why, sizeof(why)) < 0 ||
	    (config_node_get(node, "rom") != NULL &&
	     attach_romfile(f, config_node_get(node, "rom"), why, sizeof(why)) < 0)) {
		snprintf(err, errlen, "%s in slot %u:%u: %s", emul, slot, func,
		         why[0] ? why : "cannot create");
		return -1;
	}
	return register_state(f, err, errlen);
}

/* Config children are named by number; visit them in numeric order. */
static struct config_node *nth_child(struct config_node *parent, unsigned n)
{
	for (struct config_node *c = config_node_first(parent); c; c = config_node_next(c)) {
		uint64_t v;

		if (parse_uint(config_node_name(c), 0, 255, &v) == 0 && v == n)
			return c;
	}
	return NULL;
}

/* Function 0 of a slot with more functions says so in its header type
 * (PCI 3.0 section 6.2.1), or firmware and OSes never look past it. */
static void mark_multifunction_slots(void)
{
	for (unsigned i = 0; i < nfuncs; i++) {
		struct pci_func *f0 = funcs[i];

		if (f0->func != 0)
			continue;
		for (unsigned j = 0; j < nfuncs; j++)
			if (funcs[j]->bus == f0->bus && funcs[j]->slot == f0->slot &&
			    funcs[j]->func != 0)
				pci_set_cfg(f0, PCIR_HDRTYPE, 1,
				            pci_get_cfg(f0, PCIR_HDRTYPE, 1) | 0x80);
	}
}

static int create_all(struct machine *m, char *err, size_t errlen)
{
	struct config_node *pci = config_find_node("pci");

	for (unsigned b = 0; pci != NULL && b < 256; b++) {
		struct config_node *bn = nth_child(pci, b);

		for (unsigned s = 0; bn != NULL && s < 32; s++) {
			struct config_node *sn = nth_child(bn, s);

			for (unsigned fn = 0; sn != NULL && fn < 8; fn++) {
				struct config_node *node = nth_child(sn, fn);

				if (node != NULL && create_func(m, b, s, fn, node, err, errlen) < 0)
					return -1;
			}
		}
	}
	mark_multifunction_slots();
	return 0;
}

int pci_init(struct machine *m, char *err, size_t errlen)
{
	pci_machine = m;
	choose_mmio64_window(m);
	/* One port each: 0xCF9 between them is the reset register, and a
	 * 32-bit access is dispatched by its first port. */
	if (machine_register_pio(m, CF8_PORT, 1, cf8_access, NULL, "pci-cf8") < 0 ||
	    machine_register_pio(m, CFC_PORT, 4, cfc_access, NULL, "pci-cfc") < 0 ||
	    machine_register_mmio(m, PCI_ECAM_GPA, PCI_ECAM_SIZE, ecam_access, NULL, "pci-ecam") <
	        0) {
		snprintf(err, errlen, "PCI configuration ports are taken");
		return -1;
	}
	/* CONFIG_ADDRESS takes effect at the next CONFIG_DATA access, which
	 * exits anyway: queued, its write costs no exit, halving the exits of
	 * a type-1 configuration access (Linux's early scans make 8192 at
	 * boot: the AGP aperture search reads every bus and slot).  The zone
	 * holds 0xCF9 too, so a reset written there takes effect at the
	 * vCPU's next exit to khyve (its next port or MMIO access: Linux,
	 * SeaBIOS and OVMF all try the keyboard controller next), as in
	 * QEMU, which queues the same four ports. */
	if (machine_coalesce_pio(m, CF8_PORT, 4))
		log_debug("pci: CONFIG_ADDRESS writes are queued (coalesced port I/O)");
	return create_all(m, err, errlen);
}
