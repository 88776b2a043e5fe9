/*
 * PCI passthrough of a host device through VFIO (bhyve's pci_passthru.c):
 * "-s N,passthru,BUS/SLOT/FUNC" (bhyve's syntax, domain 0) or
 * "-s N,passthru,DDDD:BB:SS.F" (the sysfs address).
 *
 * The host device must be bound to vfio-pci, in a viable IOMMU group
 * (backend/vfio.c checks, with one line naming what to do); all guest RAM
 * is mapped for its DMA at IOVA = GPA.
 *
 * Config space: the header (0x00-0x3f), every capability's ID and next
 * pointer and the MSI-X capability are emulated (bus/pci.c, from a copy
 * read at start); every other byte is the device's, read and written
 * through the VFIO config region.  The command register is emulated and
 * forwarded.  With a usable MSI-X capability the MSI one is unlinked from
 * the list, so the guest uses MSI-X (or INTx); a device with MSI only
 * keeps its (64-bit) MSI capability, emulated in bus/pci.c's layout with
 * one vector and no per-vector masking, and when the guest enables it a
 * KVM route to the guest's address and data with an irqfd becomes the
 * device's MSI trigger (adopt_msi); a 32-bit-only MSI capability is
 * unlinked (INTx).  BARs get guest addresses of their own; memory
 * BARs VFIO lets us mmap become KVM memory slots at the guest's BAR
 * address (moved with it, bar_moved), except the pages holding the MSI-X
 * table and PBA, which trap and are emulated (pci_adopt_msix_cap); other
 * accesses (I/O BARs, small or unmappable BARs) are pread/pwrite on the
 * device fd.  MSI-X: when the guest enables it, every vector's irqfd
 * (pci_msix_irqfd: routed to the vector's address and data, bound while
 * unmasked) becomes the device's trigger (VFIO_DEVICE_SET_IRQS), so an
 * interrupt reaches the guest without userspace.  INTx: a resampling
 * irqfd on the slot's GSI, the EOI unmasking the host line.  The device
 * is reset (VFIO_DEVICE_RESET) before use.
 *
 * When the host takes the device back (VFIO's request interrupt: an unbind
 * or a hot-remove), one line is logged and the device is released at once:
 * the guest keeps running and reads all ones from it, as after a surprise
 * removal.  The device's expansion ROM, if it has one, is offered as a
 * copy (attach_device_rom).  A passthrough device cannot be saved:
 * checkpoints and migrations refuse while one is present.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/vfio.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "core/mevent.h"
#include "dev/passthru.h"
#include "lib/config.h"
#include "lib/log.h"
#include "vmm/irq.h"

#define PT_PAGE       4096ull
#define PT_MAX_CAPS   48 /* bound on a capability list walk */
#define PT_HEADER_END 0x40

/* A part of a memory BAR mmapped from the device and given to the guest
 * as a KVM memory slot. */
struct pt_piece {
	uint64_t off;  /* into the BAR, page-aligned */
	uint64_t size; /* bytes, whole pages */
	void *hva;     /* the mmap */
	int slot;      /* KVM slot (vm_ram_window_add) */
};

struct pt_bar {
	struct pt_piece piece[2]; /* before and after the MSI-X pages */
	unsigned npieces;
};

struct passthru {
	struct pci_func *f;
	struct vfio_dev dev;
	char name[VFIO_ADDR_STRLEN];
	/* dev.fd's users against its release when the host takes it back;
	 * taken after f->cfg_lock where both are held. */
	pthread_mutex_t lock;
	bool gone;
	uint8_t emul[PCI_CFG_SIZE / 8]; /* bit set: byte served from f->cfg */
	unsigned cfg_size;              /* bytes of the device's config space */
	struct pt_bar bar[PCI_NBARS];
	int irq_index; /* VFIO IRQ index the device now uses, -1 none */
	int intx_fd, intx_unmask_fd;
	/* MSI of a device without MSI-X: the device's capability offset (0:
	 * none), the irqfd VFIO signals and its KVM route (-1: none). */
	uint8_t msi_cap;
	int msi_fd, msi_gsi;
	int req_fd;
	bool reset; /* VFIO_DEVICE_RESET worked at start */
};

static struct ratelimit pt_rl = RATELIMIT_INIT;

int (*passthru_test_open)(struct vfio_dev *dev, const char *host, char *err, size_t errlen);

/* ---- options ---- */

static const char *const passthru_keys[] = {"host", NULL};

/* "B/S/F" or a sysfs address, then generic key=value options. */
static int passthru_legacy_config(struct config_node *node, const char *conf, char *err,
                                  size_t errlen)
{
	char first[64];
	const char *comma = conf ? strchr(conf, ',') : NULL;
	size_t n = comma ? (size_t)(comma - conf) : (conf ? strlen(conf) : 0);
	struct vfio_addr a;

	if (conf == NULL || n == 0 || n >= sizeof(first)) {
		snprintf(err, errlen, "passthru: want -s SLOT,passthru,BUS/SLOT/FUNC");
		return -1;
	}
	memcpy(first, conf, n);
	first[n] = '\0';
	if (strchr(first, '=') == NULL) {
		char why[256];

		if (vfio_parse_addr(first, &a, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "passthru: %s", why);
			return -1;
		}
		config_node_set(node, "host", first);
		conf = comma ? comma + 1 : NULL;
	}
	return conf && *conf ? pci_parse_legacy_config(node, conf, err, errlen) : 0;
}

/* ---- config space ---- */

static bool byte_emulated(const struct passthru *sc, unsigned off)
{
	return off >= sc->cfg_size || (sc->emul[off / 8] & (1u << (off % 8)));
}

static void emulate_bytes(struct passthru *sc, unsigned off, unsigned len)
{
	for (unsigned i = off; i < off + len && i < PCI_CFG_SIZE; i++)
		sc->emul[i / 8] |= (uint8_t)(1u << (i % 8));
}

static int passthru_cfg_read(struct pci_func *f, unsigned off, unsigned size, uint32_t *val)
{
	struct passthru *sc = f->softc;
	uint32_t dev = 0xffffffffu, v = 0;
	bool any_device = false;

	for (unsigned i = 0; i < size; i++)
		any_device |= !byte_emulated(sc, off + i);
	if (!any_device)
		return -1;
	pthread_mutex_lock(&sc->lock);
	if (sc->gone ||
	    vfio_region_read(&sc->dev, VFIO_PCI_CONFIG_REGION_INDEX, off, &dev, size) < 0)
		dev = 0xffffffffu;
	pthread_mutex_unlock(&sc->lock);
	for (unsigned i = 0; i < size; i++) {
		uint32_t b = byte_emulated(sc, off + i) ? f->cfg[off + i] : (dev >> (8 * i)) & 0xff;

		v |= b << (8 * i);
	}
	*val = v;
	return 0;
}

static void device_cfg_write(struct passthru *sc, unsigned off, const void *buf, size_t len)
{
	pthread_mutex_lock(&sc->lock);
	if (!sc->gone &&
	    vfio_region_write(&sc->dev, VFIO_PCI_CONFIG_REGION_INDEX, off, buf, len) < 0)
		log_ratelimited(&pt_rl, LOG_WARN, "passthru %s: config write at 0x%x failed",
		                sc->name, off);
	pthread_mutex_unlock(&sc->lock);
}

/* The command register is the guest's (BAR decoding follows it) and the
 * device's (memory, I/O, bus master and INTx disable must reach it). */
static void forward_command(struct passthru *sc, unsigned off, unsigned size, uint32_t val)
{
	uint8_t cmd[2] = {sc->f->cfg[PCIR_COMMAND], sc->f->cfg[PCIR_COMMAND + 1]};

	for (unsigned i = 0; i < size; i++)
		if (off + i == PCIR_COMMAND || off + i == PCIR_COMMAND + 1)
			cmd[off + i - PCIR_COMMAND] = (uint8_t)(val >> (8 * i));
	cmd[0] &= 0x47;
	cmd[1] &= 0x05;
	device_cfg_write(sc, PCIR_COMMAND, cmd, 2);
}

static int passthru_cfg_write(struct pci_func *f, unsigned off, unsigned size, uint32_t val)
{
	struct passthru *sc = f->softc;
	bool any_emulated = false;

	for (unsigned i = 0; i < size; i++)
		any_emulated |= byte_emulated(sc, off + i);
	if (!any_emulated) {
		device_cfg_write(sc, off, &val, size);
		return 0;
	}
	if (off < PT_HEADER_END) {
		if (off < PCIR_COMMAND + 2 && off + size > PCIR_COMMAND)
			forward_command(sc, off, size, val);
		return -1; /* BARs, command, MSI-X: the bus's */
	}
	if (f->msix.cap && off + size > f->msix.cap && off < f->msix.cap + 12u)
		return -1;
	if (f->msi.cap && off + size > f->msi.cap && off < f->msi.cap + 14u)
		return -1;
	/* A capability's ID and next bytes are read-only; its other bytes in
	 * the same access still go to the device. */
	for (unsigned i = 0; i < size; i++)
		if (!byte_emulated(sc, off + i)) {
			uint8_t b = (uint8_t)(val >> (8 * i));

			device_cfg_write(sc, off + i, &b, 1);
		}
	return 0;
}

/* Read the device's config space into f->cfg; 0 or -1. */
static int copy_config(struct passthru *sc, char *err, size_t errlen)
{
	uint64_t size = sc->dev.region[VFIO_PCI_CONFIG_REGION_INDEX].size;

	sc->cfg_size = size >= PCI_CFG_SIZE ? PCI_CFG_SIZE : 256;
	if (vfio_region_read(&sc->dev, VFIO_PCI_CONFIG_REGION_INDEX, 0, sc->f->cfg, sc->cfg_size) <
	    0) {
		snprintf(err, errlen, "%s: cannot read its config space", sc->name);
		return -1;
	}
	if ((sc->f->cfg[PCIR_HDRTYPE] & 0x7f) != 0) {
		snprintf(err, errlen, "%s: not a type 0 (endpoint) function", sc->name);
		return -1;
	}
	emulate_bytes(sc, 0, PT_HEADER_END);
	sc->f->cfg[PCIR_HDRTYPE] &= 0x7f; /* one function in this slot */
	return 0;
}

/* ---- BARs ---- */

/* Give each of the device's BARs (sizes from VFIO) an address in the
 * guest's windows. */
static int setup_bars(struct passthru *sc, char *err, size_t errlen)
{
	struct pci_func *f = sc->f;
	uint32_t raw[PCI_NBARS];

	memcpy(raw, &f->cfg[PCIR_BAR0], sizeof(raw));
	memset(&f->cfg[PCIR_BAR0], 0, sizeof(raw));
	memset(&f->cfg[PCIR_ROM], 0, 4); /* the device's ROM, if any: attach_device_rom */
	for (int i = 0; i < PCI_NBARS; i++) {
		uint64_t size = sc->dev.region[VFIO_PCI_BAR0_REGION_INDEX + i].size;
		enum pci_bar_type type = PCI_BAR_MEM32;

		if (size == 0 || f->bar[i].type == PCI_BAR_MEM64_HI)
			continue;
		if (raw[i] & 1)
			type = PCI_BAR_IO;
		else if (((raw[i] >> 1) & 3) == 2)
			type = PCI_BAR_MEM64;
		if (pci_alloc_bar(f, i, type, size) < 0) {
			snprintf(err, errlen, "%s: no room for BAR%d (%llu bytes)", sc->name, i,
			         (unsigned long long)size);
			return -1;
		}
	}
	return 0;
}

#define PT_ROM_MAX (16u << 20) /* bytes: the largest ROM BAR PCI allows */

/*
 * The device's expansion ROM (PCI 3.0 section 6.2.5.2), read once through
 * VFIO's ROM region and offered to the guest as a ROM BAR of its own copy
 * (bus/pci.c), so firmware in the guest can run it (a GPU's video BIOS or
 * GOP driver, a NIC's PXE ROM), as QEMU's vfio-pci does.  rom=FILE
 * replaces it (bus/pci.c attaches that after init).  A region that does
 * not read back or lacks the 55 AA signature offers none: many devices
 * decode a ROM BAR with nothing behind it.
 */
static void attach_device_rom(struct passthru *sc, struct config_node *node)
{
	uint64_t size = sc->dev.region[VFIO_PCI_ROM_REGION_INDEX].size;
	uint8_t *rom;

	if (size == 0 || config_node_get(node, "rom") != NULL)
		return;
	if (size > PT_ROM_MAX) {
		log_warn("passthru %s: a %llu-byte ROM is more than PCI allows: not offered",
		         sc->name, (unsigned long long)size);
		return;
	}
	rom = malloc(size);
	if (rom == NULL)
		return;
	if (vfio_region_read(&sc->dev, VFIO_PCI_ROM_REGION_INDEX, 0, rom, size) < 0 ||
	    rom[0] != 0x55 || rom[1] != 0xaa)
		log_info("passthru %s: its ROM BAR holds no option ROM: none offered", sc->name);
	else if (pci_alloc_rom(sc->f, rom, size) < 0)
		log_warn("passthru %s: no room for its %llu-byte ROM: not offered", sc->name,
		         (unsigned long long)size);
	free(rom);
}

/* The page-aligned part [lo, hi) of BAR `bar` that must trap: the MSI-X
 * table and PBA where they lie in it; lo == hi when none. */
static void msix_pages(const struct pci_func *f, int bar, uint64_t *lo, uint64_t *hi)
{
	uint64_t tlen = (uint64_t)f->msix.table_count * 16,
	         plen = ((f->msix.table_count + 63) / 64) * 8;

	*lo = UINT64_MAX;
	*hi = 0;
	if (f->msix.cap && f->msix.table_bar == bar) {
		*lo = f->msix.table_offset;
		*hi = f->msix.table_offset + tlen;
	}
	if (f->msix.cap && f->msix.pba_bar == bar) {
		*lo = f->msix.pba_offset < *lo ? f->msix.pba_offset : *lo;
		*hi = f->msix.pba_offset + plen > *hi ? f->msix.pba_offset + plen : *hi;
	}
	if (*hi == 0) {
		*lo = *hi = 0;
		return;
	}
	*lo &= ~(PT_PAGE - 1);
	*hi = (*hi + PT_PAGE - 1) & ~(PT_PAGE - 1);
}

static void add_piece(struct passthru *sc, int bar, uint64_t off, uint64_t size)
{
	const struct vfio_region *r = &sc->dev.region[VFIO_PCI_BAR0_REGION_INDEX + bar];
	struct pt_bar *pb = &sc->bar[bar];
	struct pt_piece *p = &pb->piece[pb->npieces];
	void *hva;
	int slot;

	if (size == 0)
		return;
	hva = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, sc->dev.fd,
	           (off_t)(r->offset + off));
	if (hva == MAP_FAILED) {
		log_debug("passthru %s: BAR%d +0x%llx not mmapped (%s); it traps", sc->name, bar,
		          (unsigned long long)off, strerror(errno));
		return;
	}
	slot = vm_ram_window_add(&sc->f->m->vm);
	if (slot < 0) {
		munmap(hva, size);
		return;
	}
	*p = (struct pt_piece){off, size, hva, slot};
	pb->npieces++;
}

/* mmap what VFIO allows of each memory BAR; the rest traps. */
static void map_bars(struct passthru *sc)
{
	for (int i = 0; i < PCI_NBARS; i++) {
		const struct vfio_region *r = &sc->dev.region[VFIO_PCI_BAR0_REGION_INDEX + i];
		const struct pci_bar *b = &sc->f->bar[i];
		uint64_t lo, hi;

		if ((b->type != PCI_BAR_MEM32 && b->type != PCI_BAR_MEM64) ||
		    !(r->flags & VFIO_REGION_INFO_FLAG_MMAP) || r->size < PT_PAGE ||
		    (r->size & (PT_PAGE - 1)) != 0)
			continue;
		msix_pages(sc->f, i, &lo, &hi);
		if (lo == hi) {
			add_piece(sc, i, 0, r->size);
			continue;
		}
		add_piece(sc, i, 0, lo);
		if (hi < r->size)
			add_piece(sc, i, hi, r->size - hi);
	}
}

/* Called with f->cfg_lock held when the guest maps, unmaps or moves a BAR. */
static void passthru_bar_moved(struct pci_func *f, int bar)
{
	struct passthru *sc = f->softc;
	const struct pci_bar *b = &f->bar[bar];
	struct pt_bar *pb;

	if (bar < 0 || bar >= PCI_NBARS)
		return; /* the ROM BAR: the bus serves its copy (attach_device_rom) */
	pb = &sc->bar[bar];
	pthread_mutex_lock(&sc->lock);
	for (unsigned i = 0; i < pb->npieces; i++) {
		struct pt_piece *p = &pb->piece[i];
		bool on = b->mapped && !sc->gone;

		if (vm_device_window_set(&f->m->vm, p->slot, b->addr + p->off, p->size, p->hva,
		                         on) < 0 &&
		    on)
			log_ratelimited(&pt_rl, LOG_WARN,
			                "passthru %s: BAR%d at 0x%llx cannot be mapped; it traps",
			                sc->name, bar, (unsigned long long)(b->addr + p->off));
	}
	pthread_mutex_unlock(&sc->lock);
}

static uint64_t passthru_bar_read(struct pci_func *f, int bar, uint64_t off, unsigned size)
{
	struct passthru *sc = f->softc;
	uint64_t v = ~0ull;

	pthread_mutex_lock(&sc->lock);
	if (!sc->gone && vfio_region_read(&sc->dev, VFIO_PCI_BAR0_REGION_INDEX + (unsigned)bar, off,
	                                  &v, size) < 0) {
		v = ~0ull;
		log_ratelimited(&pt_rl, LOG_WARN, "passthru %s: BAR%d read at 0x%llx failed",
		                sc->name, bar, (unsigned long long)off);
	}
	pthread_mutex_unlock(&sc->lock);
	if (size < 8)
		v &= (1ull << (8 * size)) - 1;
	return v;
}

static void passthru_bar_write(struct pci_func *f, int bar, uint64_t off, unsigned size,
                               uint64_t val)
{
	struct passthru *sc = f->softc;

	pthread_mutex_lock(&sc->lock);
	if (!sc->gone && vfio_region_write(&sc->dev, VFIO_PCI_BAR0_REGION_INDEX + (unsigned)bar,
	                                   off, &val, size) < 0)
		log_ratelimited(&pt_rl, LOG_WARN, "passthru %s: BAR%d write at 0x%llx failed",
		                sc->name, bar, (unsigned long long)off);
	pthread_mutex_unlock(&sc->lock);
}

/* ---- capabilities and interrupts ---- */

static void adopt_msix(struct passthru *sc, uint8_t cap)
{
	struct pci_func *f = sc->f;
	uint16_t ctrl = (uint16_t)pci_get_cfg(f, cap + 2, 2);
	uint32_t table = pci_get_cfg(f, cap + 4, 4), pba = pci_get_cfg(f, cap + 8, 4);
	unsigned count = (ctrl & 0x7ffu) + 1;

	if (sc->dev.irq_count[VFIO_PCI_MSIX_IRQ_INDEX] < count ||
	    pci_adopt_msix_cap(f, cap, count, (int)(table & 7), table & ~7u, (int)(pba & 7),
	                       pba & ~7u) < 0) {
		log_warn("passthru %s: its MSI-X capability is not usable; INTx only", sc->name);
		return;
	}
	emulate_bytes(sc, cap, 12);
}

#define PT_MSI_64BIT 0x0080u /* MSI control: 64-bit address (PCI 3.0 6.8.1.3) */
#define PT_MSI_PVM   0x0100u /* MSI control: per-vector masking */

/*
 * A device with MSI and no usable MSI-X: its MSI capability back at the
 * head of the list, in bus/pci.c's layout (64-bit address at +4, data at
 * +12, one vector, no masking: the same offsets as the device's own 64-bit
 * layout, so nothing beyond the capability is covered).  The guest's
 * writes stay in the copy; VFIO programs the device's real capability
 * when passthru_msi_changed() hands it the irqfd.  A 32-bit-only
 * capability has the data where bus/pci.c has the upper address: left
 * unlinked, the device uses INTx.
 */
static void adopt_msi(struct passthru *sc)
{
	struct pci_func *f = sc->f;
	uint8_t cap = sc->msi_cap;
	uint16_t ctrl;

	if (cap == 0 || f->msix.cap != 0)
		return;
	ctrl = (uint16_t)pci_get_cfg(f, cap + 2, 2);
	if (!(ctrl & PT_MSI_64BIT) || sc->dev.irq_count[VFIO_PCI_MSI_IRQ_INDEX] == 0) {
		log_warn("passthru %s: its MSI capability is not usable (%s); INTx only", sc->name,
		         ctrl & PT_MSI_64BIT ? "VFIO offers no MSI" : "32-bit addresses only");
		sc->msi_cap = 0;
		return;
	}
	sc->msi_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sc->msi_fd < 0) {
		sc->msi_cap = 0;
		return;
	}
	memset(f->cfg + cap + 2, 0, (ctrl & PT_MSI_PVM) ? 22 : 12);
	pci_set_cfg(f, cap + 2, 2, PT_MSI_64BIT);
	f->cfg[cap + 1] = f->cfg[PCIR_CAP_PTR];
	f->cfg[PCIR_CAP_PTR] = cap;
	f->msi.cap = cap;
}

/* Walk the capability list: emulate every ID and next byte, adopt MSI-X;
 * MSI is unlinked, and put back by adopt_msi() when there is no MSI-X. */
static void setup_caps(struct passthru *sc)
{
	struct pci_func *f = sc->f;
	unsigned prev = PCIR_CAP_PTR, off = f->cfg[PCIR_CAP_PTR] & 0xfc;

	if (!(pci_get_cfg(f, PCIR_STATUS, 2) & PCIM_STATUS_CAPS))
		return;
	for (unsigned n = 0; n < PT_MAX_CAPS && off >= PT_HEADER_END && off < 255; n++) {
		uint8_t id = f->cfg[off], next = f->cfg[off + 1] & 0xfc;

		emulate_bytes(sc, off, 2);
		if (id == PCIY_MSI) {
			emulate_bytes(sc, off, 24);
			if (sc->msi_cap == 0 && off <= PCI_CFG_SIZE - 24)
				sc->msi_cap = (uint8_t)off;
			f->cfg[prev == PCIR_CAP_PTR ? PCIR_CAP_PTR : prev + 1] = next;
		} else {
			if (id == PCIY_MSIX && f->msix.cap == 0)
				adopt_msix(sc, (uint8_t)off);
			prev = off;
		}
		off = next;
	}
	adopt_msi(sc);
}

/* Route INTx from VFIO to the slot's GSI; the EOI unmasks the host line. */
static void setup_intx(struct passthru *sc)
{
	struct pci_func *f = sc->f;

	if (sc->dev.irq_count[VFIO_PCI_INTX_IRQ_INDEX] == 0 || f->cfg[PCIR_INTPIN] == 0) {
		f->cfg[PCIR_INTPIN] = 0;
		return;
	}
	pci_enable_intx(f);
	sc->intx_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sc->intx_unmask_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sc->intx_fd < 0 || sc->intx_unmask_fd < 0 || f->intx_gsi < 0 ||
	    irq_irqfd_bind_resample(&f->m->vm, sc->intx_fd, f->intx_gsi, sc->intx_unmask_fd) < 0 ||
	    vfio_set_irq_eventfds(&sc->dev, VFIO_PCI_INTX_IRQ_INDEX, &sc->intx_fd, 1) < 0 ||
	    vfio_set_intx_unmask_fd(&sc->dev, sc->intx_unmask_fd) < 0) {
		log_warn("passthru %s: INTx not routed: %s", sc->name, strerror(errno));
		return;
	}
	sc->irq_index = VFIO_PCI_INTX_IRQ_INDEX;
}

/* Switch the device between INTx and MSI-X as the guest did; the lock held. */
static void use_msix(struct passthru *sc, const int *fds, unsigned count)
{
	if (sc->irq_index == VFIO_PCI_INTX_IRQ_INDEX)
		vfio_set_irq_eventfds(&sc->dev, VFIO_PCI_INTX_IRQ_INDEX, NULL, 0);
	sc->irq_index = -1;
	if (vfio_set_irq_eventfds(&sc->dev, VFIO_PCI_MSIX_IRQ_INDEX, fds, count) < 0)
		log_ratelimited(&pt_rl, LOG_WARN, "passthru %s: MSI-X not enabled: %s", sc->name,
		                strerror(errno));
	else
		sc->irq_index = VFIO_PCI_MSIX_IRQ_INDEX;
}

static void use_intx(struct passthru *sc)
{
	vfio_set_irq_eventfds(
	    &sc->dev, sc->msi_cap ? VFIO_PCI_MSI_IRQ_INDEX : VFIO_PCI_MSIX_IRQ_INDEX, NULL, 0);
	sc->irq_index = -1;
	if (sc->intx_fd >= 0 &&
	    vfio_set_irq_eventfds(&sc->dev, VFIO_PCI_INTX_IRQ_INDEX, &sc->intx_fd, 1) == 0 &&
	    vfio_set_intx_unmask_fd(&sc->dev, sc->intx_unmask_fd) == 0)
		sc->irq_index = VFIO_PCI_INTX_IRQ_INDEX;
}

/* The MSI route: to the guest's address and data while MSI is enabled,
 * bound to the irqfd; none otherwise.  sc->lock held. */
static void msi_route(struct passthru *sc, bool want, uint64_t addr, uint32_t data)
{
	struct vm *vm = &sc->f->m->vm;

	if (want && sc->msi_gsi >= 0) {
		irq_route_msi_update(vm, sc->msi_gsi, addr, data);
	} else if (want) {
		sc->msi_gsi = irq_route_msi_add(vm, addr, data);
		if (sc->msi_gsi >= 0 && irq_irqfd_bind(vm, sc->msi_fd, sc->msi_gsi) < 0) {
			irq_route_msi_del(vm, sc->msi_gsi);
			sc->msi_gsi = -1;
		}
	} else if (sc->msi_gsi >= 0) {
		irq_irqfd_unbind(vm, sc->msi_fd, sc->msi_gsi);
		irq_route_msi_del(vm, sc->msi_gsi);
		sc->msi_gsi = -1;
	}
}

/* MSI enable, address or data writes (a device without MSI-X). */
static void passthru_msi_changed(struct passthru *sc)
{
	struct pci_func *f = sc->f;
	uint8_t cap = sc->msi_cap;
	uint64_t addr;
	uint32_t data;
	bool want;

	pthread_mutex_lock(&f->cfg_lock);
	want = pci_msi_enabled(f);
	addr = pci_get_cfg(f, cap + 4, 4) | (uint64_t)pci_get_cfg(f, cap + 8, 4) << 32;
	data = pci_get_cfg(f, cap + 12, 2);
	pthread_mutex_unlock(&f->cfg_lock);
	pthread_mutex_lock(&sc->lock);
	if (!sc->gone) {
		msi_route(sc, want, addr, data);
		if (want && sc->irq_index != VFIO_PCI_MSI_IRQ_INDEX) {
			if (sc->irq_index == VFIO_PCI_INTX_IRQ_INDEX)
				vfio_set_irq_eventfds(&sc->dev, VFIO_PCI_INTX_IRQ_INDEX, NULL, 0);
			sc->irq_index = -1;
			if (sc->msi_gsi < 0)
				log_ratelimited(&pt_rl, LOG_WARN,
				                "passthru %s: MSI not enabled: no KVM route for it",
				                sc->name);
			else if (vfio_set_irq_eventfds(&sc->dev, VFIO_PCI_MSI_IRQ_INDEX,
			                               &sc->msi_fd, 1) < 0)
				log_ratelimited(&pt_rl, LOG_WARN,
				                "passthru %s: MSI not enabled: %s", sc->name,
				                strerror(errno));
			else
				sc->irq_index = VFIO_PCI_MSI_IRQ_INDEX;
		} else if (!want && sc->irq_index == VFIO_PCI_MSI_IRQ_INDEX) {
			use_intx(sc);
		}
	}
	pthread_mutex_unlock(&sc->lock);
}

/* MSI-X enable, mask or table writes: the device's triggers follow only
 * the enable bit; masking is the irqfds' business (bus/pci.c).  MSI
 * writes of a device without MSI-X: passthru_msi_changed(). */
static void passthru_vector_changed(struct pci_func *f)
{
	struct passthru *sc = f->softc;
	unsigned count = f->msix.table_count;
	int *fds = NULL;
	bool want = pci_msix_enabled(f);

	if (sc->msi_cap != 0) {
		passthru_msi_changed(sc);
		return;
	}

	/* The vectors' fds first: pci_msix_irqfd takes the config lock,
	 * which comes before ours.  They stay the same for the function's
	 * life, so a second vCPU doing the same finds the same fds. */
	if (want) {
		fds = calloc(count, sizeof(*fds));
		if (fds == NULL)
			return;
		for (unsigned v = 0; v < count; v++)
			fds[v] = pci_msix_irqfd(f, v);
	}
	pthread_mutex_lock(&sc->lock);
	want = pci_msix_enabled(f);
	if (!sc->gone && want != (sc->irq_index == VFIO_PCI_MSIX_IRQ_INDEX)) {
		if (want && fds != NULL)
			use_msix(sc, fds, count);
		else if (!want)
			use_intx(sc);
	}
	pthread_mutex_unlock(&sc->lock);
	free(fds);
}

/* ---- the host taking the device back ---- */

static void release_device(struct passthru *sc)
{
	struct pci_func *f = sc->f;

	pthread_mutex_lock(&f->cfg_lock);
	pthread_mutex_lock(&sc->lock);
	sc->gone = true;
	for (int i = 0; i < PCI_NBARS; i++)
		for (unsigned j = 0; j < sc->bar[i].npieces; j++) {
			struct pt_piece *p = &sc->bar[i].piece[j];

			vm_device_window_set(&f->m->vm, p->slot, 0, p->size, p->hva, false);
			munmap(p->hva, p->size);
		}
	if (sc->irq_index >= 0)
		vfio_set_irq_eventfds(&sc->dev, (unsigned)sc->irq_index, NULL, 0);
	sc->irq_index = -1;
	close(sc->dev.fd);
	sc->dev.fd = -1;
	pthread_mutex_unlock(&sc->lock);
	pthread_mutex_unlock(&f->cfg_lock);
}

static void request_cb(int fd, uint32_t events, void *arg)
{
	struct passthru *sc = arg;
	uint64_t n;

	(void)events;
	if (read(fd, &n, sizeof(n)) != sizeof(n) || sc->gone)
		return;
	log_err("passthru %s: the host takes the device back (unbound or removed); released, "
	        "the guest goes on without it",
	        sc->name);
	release_device(sc);
}

static void watch_requests(struct passthru *sc)
{
	if (sc->dev.irq_count[VFIO_PCI_REQ_IRQ_INDEX] == 0 || sc->f->m->loop == NULL)
		return;
	sc->req_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sc->req_fd < 0 ||
	    vfio_set_irq_eventfds(&sc->dev, VFIO_PCI_REQ_IRQ_INDEX, &sc->req_fd, 1) < 0 ||
	    mevent_add(sc->f->m->loop, sc->req_fd, EPOLLIN, request_cb, sc) == NULL)
		log_warn("passthru %s: no removal requests from the host: %s", sc->name,
		         strerror(errno));
}

/* ---- set-up ---- */

/* Where the host's /sys and /dev are: "" but for tests. */
static const char *host_root(void)
{
	const char *r = getenv("KHYVE_VFIO_ROOT");

	return r ? r : "";
}

static int open_host_device(struct passthru *sc, struct config_node *node, char *err, size_t errlen)
{
	const char *host = config_node_get(node, "host");
	struct vfio_addr a;
	int group;

	if (host == NULL) {
		snprintf(err, errlen, "no host device (want -s SLOT,passthru,B/S/F)");
		return -1;
	}
	if (vfio_parse_addr(host, &a, err, errlen) < 0)
		return -1;
	vfio_addr_str(&a, sc->name, sizeof(sc->name));
	if (passthru_test_open != NULL)
		return passthru_test_open(&sc->dev, host, err, errlen);
	if (vfio_check_host(host_root(), &a, &group, err, errlen) < 0 ||
	    vfio_open(&sc->dev, host_root(), &a, group, &sc->f->m->vm.mem, err, errlen) < 0)
		return -1;
	sc->reset = vfio_reset(&sc->dev) == 0;
	return 0;
}

/* BARs the device has, or (mapped) those with a part mmapped as a slot. */
static unsigned count_bars(const struct passthru *sc, bool mapped)
{
	unsigned n = 0;

	for (int i = 0; i < PCI_NBARS; i++) {
		const struct pci_bar *b = &sc->f->bar[i];

		if (b->type != PCI_BAR_NONE && b->type != PCI_BAR_MEM64_HI &&
		    (!mapped || sc->bar[i].npieces > 0))
			n++;
	}
	return n;
}

static int passthru_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                         size_t errlen)
{
	struct passthru *sc = calloc(1, sizeof(*sc));

	(void)m;
	if (sc == NULL) {
		snprintf(err, errlen, "passthru: out of memory");
		return -1;
	}
	sc->f = f;
	sc->irq_index = -1;
	sc->intx_fd = sc->intx_unmask_fd = sc->req_fd = sc->msi_fd = sc->msi_gsi = -1;
	sc->dev.fd = sc->dev.group = sc->dev.container = -1;
	pthread_mutex_init(&sc->lock, NULL);
	f->softc = sc;
	if (open_host_device(sc, node, err, errlen) < 0 || copy_config(sc, err, errlen) < 0 ||
	    setup_bars(sc, err, errlen) < 0) {
		vfio_close(&sc->dev);
		return -1;
	}
	attach_device_rom(sc, node);
	setup_caps(sc);
	map_bars(sc);
	setup_intx(sc);
	watch_requests(sc);
	log_info("passthru %s: %04x:%04x in slot %u, %u of %u BARs mapped into the guest, MSI-X "
	         "%u vectors, MSI %s, INTx %s, ROM %s, %s",
	         sc->name, pci_get_cfg(f, PCIR_VENDOR, 2), pci_get_cfg(f, PCIR_DEVICE, 2), f->slot,
	         count_bars(sc, true), count_bars(sc, false), f->msix.table_count,
	         f->msi.cap ? "on" : "off",
	         sc->intx_fd >= 0 && sc->irq_index == VFIO_PCI_INTX_IRQ_INDEX ? "on" : "off",
	         f->bar[PCI_ROM_BAR].type == PCI_BAR_ROM ? "offered" : "none",
	         sc->reset ? "reset" : "not reset (no function-level reset)");
	return 0;
}

PCI_DEVEMU(passthru) = {
    .name = "passthru",
    .descr = "a host PCI device through VFIO (bound to vfio-pci, with an IOMMU)",
    .usage = "  -s SLOT,passthru,BUS/SLOT/FUNC   (bhyve's form, PCI domain 0)\n"
             "  -s SLOT,passthru,DDDD:BB:SS.F    (the sysfs address)\n"
             "  host=ADDR        the host device, either form\n",
    .keys = passthru_keys,
    .legacy_config = passthru_legacy_config,
    .init = passthru_init,
    .bar_read = passthru_bar_read,
    .bar_write = passthru_bar_write,
    .cfg_read = passthru_cfg_read,
    .cfg_write = passthru_cfg_write,
    .vector_changed = passthru_vector_changed,
    .bar_moved = passthru_bar_moved,
    /* No save: the device's state is in the hardware and cannot be read
     * out, so a checkpoint, a suspend or a migration refuses. */
    .never_saved = "a passed-through host device's state is in the hardware (no checkpoint, "
                   "suspend or migration while one is present)",
};
