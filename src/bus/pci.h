/*
 * The PCI bus (PCI Local Bus 3.0, PCI Express Base 4.0 for ECAM): functions
 * with a 4 KiB configuration space, reached through configuration
 * mechanism #1 (ports 0xCF8/0xCFC) and ECAM at PCI_ECAM_GPA (described by
 * the ACPI MCFG table); BAR sizing and placement (I/O, 32-bit MMIO below
 * 4 GiB, 64-bit MMIO above RAM); the capability list; INTx routed to
 * IOAPIC GSIs (described in the DSDT's _PRT); MSI and MSI-X delivered
 * through KVM (irq routing + irqfd, or KVM_SIGNAL_MSI).
 *
 * Emulations (bhyve's pci_devemu) register with PCI_DEVEMU() in bus/pci_slot.h.
 */
#ifndef KHYVE_PCI_H
#define KHYVE_PCI_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus/pci_slot.h"

#define PCI_CFG_SIZE 4096 /* PCIe extended configuration space */
#define PCI_NBARS    6
#define PCI_ROM_BAR  6 /* index used for the expansion ROM */

/* Guest-physical windows (the 3-4 GiB hole and above RAM). */
#define PCI_MMIO32_BASE 0xc0000000ull
#define PCI_MMIO32_END  0xe0000000ull /* exclusive */
#define PCI_ECAM_GPA    0xe0000000ull
#define PCI_ECAM_SIZE   0x10000000ull /* 256 buses */
#define PCI_IO_BASE     0x2000
#define PCI_IO_END      0x10000
/* Inside the I/O window but never given to a BAR: the ACPI PM block at
 * QEMU's PIIX4 address (dev/pm.h). */
#define PCI_IO_HOLE_BASE  0xb000
#define PCI_IO_HOLE_END   0xb100
#define PCI_INTX_GSI_BASE 16 /* INTx lines use IOAPIC pins 16-23 */

/* Configuration header offsets and bits (PCI 3.0 section 6.2). */
#define PCIR_VENDOR        0x00
#define PCIR_DEVICE        0x02
#define PCIR_COMMAND       0x04
#define PCIR_STATUS        0x06
#define PCIR_REVID         0x08
#define PCIR_PROGIF        0x09
#define PCIR_SUBCLASS      0x0a
#define PCIR_CLASS         0x0b
#define PCIR_HDRTYPE       0x0e
#define PCIR_BAR0          0x10
#define PCIR_SUBVEND       0x2c
#define PCIR_SUBDEV        0x2e
#define PCIR_ROM           0x30
#define PCIR_CAP_PTR       0x34
#define PCIR_INTLINE       0x3c
#define PCIR_INTPIN        0x3d

#define PCIM_CMD_IO        0x0001
#define PCIM_CMD_MEM       0x0002
#define PCIM_CMD_BUSMASTER 0x0004
#define PCIM_CMD_INTX_DIS  0x0400
#define PCIM_STATUS_INTR   0x0008
#define PCIM_STATUS_CAPS   0x0010

#define PCIY_MSI           0x05
#define PCIY_VENDOR        0x09
#define PCIY_PCIE          0x10
#define PCIY_MSIX          0x11

enum pci_bar_type {
	PCI_BAR_NONE,
	PCI_BAR_IO,
	PCI_BAR_MEM32,
	PCI_BAR_MEM64,    /* occupies this BAR and the next */
	PCI_BAR_MEM64_HI, /* the upper half of the 64-bit BAR before it */
	PCI_BAR_ROM,
};

struct pci_func;

struct pci_bar {
	struct pci_func *owner; /* back pointers: the bus handler's argument */
	int idx;
	enum pci_bar_type type;
	uint64_t addr; /* guest address (port or guest-physical) */
	uint64_t size; /* bytes, a power of two */
	bool mapped;   /* currently registered on the port-I/O or MMIO bus */
	bool prefetch;
	const uint8_t *rom; /* PCI_BAR_ROM: contents (size bytes), owned */
};

/* One MSI-X table entry (PCI 3.0 section 6.8.2.6). */
struct msix_entry {
	uint64_t addr;
	uint32_t data;
	uint32_t ctrl; /* bit 0: masked */
	int gsi;       /* KVM routing GSI for this vector, -1 none */
	int irqfd;     /* eventfd bound to gsi via KVM_IRQFD, -1 none */
};

struct machine;

struct pci_func {
	struct machine *m;
	uint8_t bus, slot, func;
	const struct pci_devemu *de;
	void *softc;              /* the emulation's state */
	pthread_mutex_t cfg_lock; /* config space and BAR/MSI state */
	uint8_t cfg[PCI_CFG_SIZE];
	struct pci_bar bar[PCI_NBARS + 1];
	unsigned cap_end; /* where the next capability goes (0: at 0x40) */

	/* INTx */
	int intx_gsi; /* -1 without INTx */
	bool intx_asserted;

	/* MSI (PCI 3.0 section 6.8.1) */
	struct {
		uint8_t cap; /* capability offset, 0 none */
		bool enabled;
		unsigned nvec; /* vectors enabled by the guest */
	} msi;

	/* MSI-X */
	struct {
		uint8_t cap;
		bool enabled;
		bool function_masked;
		int table_bar, pba_bar;
		uint32_t table_offset, pba_offset; /* bytes into their BARs */
		unsigned table_count;
		struct msix_entry *table;
		uint64_t *pba; /* pending bits for masked vectors */
		/* The table and PBA share BARs with the device's registers
		 * (pci_adopt_msix_cap): other offsets go to bar_read/write. */
		bool shared_bar;
	} msix;
};

/* ---- for emulations ---- */

/* Config space accessors (little-endian, offsets bounded to PCI_CFG_SIZE). */
uint32_t pci_get_cfg(const struct pci_func *f, unsigned off, unsigned size);
void pci_set_cfg(struct pci_func *f, unsigned off, unsigned size, uint32_t val);

/* Identity: vendor, device, class, subclass, prog-if, revision, subsystem. */
void pci_set_ids(struct pci_func *f, uint16_t vendor, uint16_t device, uint8_t class,
                 uint8_t subclass, uint8_t progif, uint8_t rev);

/*
 * Declare BAR `idx` of `size` bytes (rounded up to a power of two, at least
 * 16 for MMIO and 4 for I/O) and give it an address in its window.  A 64-bit
 * BAR also takes idx+1.  0, or -1 when the window is full or idx is bad.
 */
int pci_alloc_bar(struct pci_func *f, int idx, enum pci_bar_type type, uint64_t size);

/* An expansion ROM BAR holding a copy of `rom` (`len` bytes). */
int pci_alloc_rom(struct pci_func *f, const uint8_t *rom, uint64_t len);

/* Append a capability of `len` bytes (first byte its ID); returns its
 * offset, 0 when config space is full. */
uint8_t pci_add_cap(struct pci_func *f, const uint8_t *cap, unsigned len);

/* Ask for INTx pin A (the GSI comes from the slot's _PRT entry). */
void pci_enable_intx(struct pci_func *f);
void pci_intx_assert(struct pci_func *f);
void pci_intx_deassert(struct pci_func *f);

/* MSI capability with up to `nvec` (1..32, power of two) vectors; 0 or -1. */
int pci_add_msi_cap(struct pci_func *f, unsigned nvec);

/* MSI-X with `count` vectors, table and PBA placed in BAR `bar` (which the
 * caller must not also allocate); 0 or -1. */
int pci_add_msix_cap(struct pci_func *f, unsigned count, int bar);

/*
 * Emulate the MSI-X capability already present at config offset `cap`
 * (a passed-through device's): `count` vectors, the table at
 * `table_offset` bytes into BAR `table_bar`, the PBA at `pba_offset` into
 * `pba_bar`.  Those BARs are the caller's; accesses to the table and PBA
 * are served here and the rest of the BARs go to bar_read/bar_write.
 * 0, or -1 (bad values, or out of memory).
 */
int pci_adopt_msix_cap(struct pci_func *f, uint8_t cap, unsigned count, int table_bar,
                       uint32_t table_offset, int pba_bar, uint32_t pba_offset);

/*
 * Interrupt vector `vec` of the function: MSI-X when enabled, else MSI, else
 * INTx (assert; the emulation deasserts on acknowledgement).  MSI-X
 * vectors that are masked set their pending bit instead.
 */
void pci_interrupt(struct pci_func *f, unsigned vec);

/* True when MSI-X (or MSI) is enabled, i.e. INTx is not in use. */
bool pci_msix_enabled(const struct pci_func *f);
bool pci_msi_enabled(const struct pci_func *f);

/*
 * An eventfd that raises vector `vec` from inside KVM (irqfd on a routed
 * GSI), or -1 when MSI-X is disabled or `vec` is past the table.  The fd is
 * owned by the PCI layer, stays the same for the function's life, and is
 * bound to KVM only while the vector is unmasked (an event sent while masked
 * waits); the vector_changed hook runs when that may have changed.
 */
int pci_msix_irqfd(struct pci_func *f, unsigned vec);

/*
 * pci_msix_irqfd(), but -1 also while `vec` or the whole function is masked,
 * so that an interrupt sent through pci_interrupt() instead sets the pending
 * bit.  For callers that cache the fd per interrupt source and refresh the
 * cache from the vector_changed hook: the PCI layer never closes the fd, so
 * a write through a stale copy is safe (it stays in the eventfd, becomes
 * the pending bit at the next mask, or is delivered by the next bind).
 */
int pci_msix_live_irqfd(struct pci_func *f, unsigned vec);

/* ---- saved state (docs/design/snapshots.md section 2, "bus") ---- */

struct sbuf;
struct sbuf_reader;

/*
 * Every function gets a state participant (core/snapshot.h) when pci_init()
 * creates it, named "pci.B.S.F.EMUL" (truncated to STATE_NAME_LEN - 1
 * bytes).  Its section, version 1: u8 length + the emulation's name, the
 * 4096 config bytes, per BAR 0-5 and the ROM: u8 type, u64 addr, u64 size;
 * intx_asserted, msi.enabled, u32 msi.nvec, u32 MSI-X table_count,
 * msix.enabled, msix.function_masked, per vector u64 addr, u32 data, u32
 * ctrl, then the PBA words; then what pci_devemu.save wrote.  A restore
 * refuses another emulation, another table size, BAR kinds or sizes, or
 * read-only config bytes other than this function's, then maps the BARs,
 * rebinds MSI-X and drives INTx as guest writes would.  An emulation
 * without save and restore registers with state_ops.save == NULL.
 */

/* The participant name of `f` into `buf` (`len` bytes, STATE_NAME_LEN). */
void pci_state_name(const struct pci_func *f, char *buf, size_t len);

/* pci_devemu.save/restore for an emulation whose state is all in the
 * generic part (config space, BARs, vectors): a u16 version 1 and nothing
 * else.  0, or -1 with the reason in `err`. */
int pci_save_nothing(struct pci_func *f, struct sbuf *out, char *err, size_t errlen);
int pci_restore_nothing(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen);

/* ---- for the machine ---- */

/* Create every function the config tree lists (pci.B.S.F.device), in slot
 * order, and claim the config ports and ECAM.  0, or -1 with `err`. */
int pci_init(struct machine *m, char *err, size_t errlen);

/* Iterate over created functions (for ACPI). */
unsigned pci_count(void);
struct pci_func *pci_get(unsigned i);

/* The GSI of INTx pin A of a function in `slot` (bus 0). */
unsigned pci_slot_intx_gsi(unsigned slot);

/* Let every function add its AML inside \_SB.PCI0 (acpi_config.pci_dsdt). */
void pci_write_dsdt(struct aml *a, void *arg);

/* The 64-bit MMIO window (guest-physical) chosen for this VM. */
void pci_mmio64_window(uint64_t *base, uint64_t *size);

/* Config access from mechanism #1 / ECAM, exported for tests and fuzzers. */
uint32_t pci_cfg_read(unsigned bus, unsigned slot, unsigned func, unsigned off, unsigned size);
void pci_cfg_write(unsigned bus, unsigned slot, unsigned func, unsigned off, unsigned size,
                   uint32_t val);

#endif
