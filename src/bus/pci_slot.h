/*
 * -s slot,emulation[,conf] parsing and the registry of PCI device
 * emulations, as bhyve's pci_emul.c: each emulation registers a struct
 * pci_devemu with PCI_DEVEMU(); the option becomes config keys
 * pci.BUS.SLOT.FUNC.device=EMULATION plus whatever the emulation's
 * legacy_config() makes of `conf` (by default "a=b,c" sets a=b and c=true
 * below that node).
 */
#ifndef KHYVE_PCI_SLOT_H
#define KHYVE_PCI_SLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct aml;
struct config_node;
struct machine;
struct pci_func;
struct sbuf;
struct sbuf_reader;

struct pci_devemu {
	const char *name; /* as written after the slot: "virtio-blk", "lpc" */
	/* One line for `-s help`: what the guest sees. */
	const char *descr;
	/* `-s NAME,help`: the synopsis and one line per option, each line
	 * ending in '\n'; NULL when the emulation takes none. */
	const char *usage;
	/* The keys below the function's node that the emulation reads, as
	 * devopts_key_matches() patterns ("ro", "port.*.path"), ending in
	 * NULL; NULL when it reads none.  "device" and "rom" are every
	 * function's.  Any other key is refused before the VM starts
	 * (pci_check_config()). */
	const char *const *keys;
	/* Turn the -s conf string into keys below `node`; NULL = generic
	 * key=value parsing.  0, or -1 with `err` filled. */
	int (*legacy_config)(struct config_node *node, const char *conf, char *err, size_t errlen);
	/* Create the function from its config node: set IDs, BARs,
	 * capabilities, state.  0, or -1 with `err`. */
	int (*init)(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
	            size_t errlen);
	/* Guest access to the emulation's own BAR `bar` at `offset` bytes;
	 * `size` is 1, 2, 4 or 8.  NULL when the function has no such BARs. */
	uint64_t (*bar_read)(struct pci_func *f, int bar, uint64_t offset, unsigned size);
	void (*bar_write)(struct pci_func *f, int bar, uint64_t offset, unsigned size,
	                  uint64_t val);
	/* Optional: take over a config access; return 0 when handled, -1
	 * for the generic behaviour. */
	int (*cfg_read)(struct pci_func *f, unsigned off, unsigned size, uint32_t *val);
	int (*cfg_write)(struct pci_func *f, unsigned off, unsigned size, uint32_t val);
	/* Optional: MSI/MSI-X was enabled, disabled, masked or reprogrammed,
	 * so pci_msix_irqfd() may give a different answer. */
	void (*vector_changed)(struct pci_func *f);
	/* Optional: BAR `bar` was mapped, unmapped or moved (the guest
	 * reprogrammed it or toggled decoding); called with the function's
	 * config lock held. */
	void (*bar_moved)(struct pci_func *f, int bar);
	/* Optional: add AML for the function inside \_SB.PCI0 (bhyve's
	 * pe_write_dsdt). */
	void (*write_dsdt)(struct pci_func *f, struct aml *a);

	/*
	 * Saved state (docs/design/snapshots.md section 2, "dev").  The PCI
	 * layer registers one state participant per function, "pci.B.S.F.EMUL"
	 * (bus/pci.c), whose section holds the generic part (config space,
	 * BARs, INTx, MSI, MSI-X) followed by what these ops write.  Called
	 * with the vCPUs paused and without the function's cfg_lock; take the
	 * emulation's own lock.
	 */
	/* Optional: stop taking work and wait (bounded, about a second) until
	 * every request in flight has posted its completion.  0, or -1 with
	 * one line in `err` (unquiesce still follows). */
	int (*quiesce)(struct pci_func *f, char *err, size_t errlen);
	/* Optional: undo quiesce. */
	void (*unquiesce)(struct pci_func *f);
	/* Write the emulation's own state, starting with its u16 version, field
	 * by field (never pointers, fds, locks or threads).  NULL (with or
	 * without restore) marks an emulation that cannot be saved: a
	 * checkpoint then refuses "pci.B.S.F.EMUL cannot be saved".  One with
	 * nothing of its own writes only the version (pci_save_nothing).
	 * 0, or -1 with one line in `err`. */
	int (*save)(struct pci_func *f, struct sbuf *out, char *err, size_t errlen);
	/* Read what save wrote: hostile data, check every value (sbuf_fail),
	 * then re-drive what follows from it.  Runs after the generic part is
	 * restored (BARs mapped, MSI-X table loaded, vector_changed called).
	 * 0, or -1 with one line in `err`. */
	int (*restore)(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen);
	/* With save NULL: why the emulation can never be saved, for the
	 * checkpoint's (and migration's) refusal; NULL: not saved yet. */
	const char *never_saved;
};

#define PCI_DEVEMU(id)                                                                             \
	static const struct pci_devemu pci_devemu_##id;                                            \
	static const struct pci_devemu *const pci_devemu_ptr_##id                                  \
	    __attribute__((section("pci_devemus"), used)) = &pci_devemu_##id;                      \
	static const struct pci_devemu pci_devemu_##id

/* Look an emulation up by name; NULL when unknown. */
const struct pci_devemu *pci_devemu_find(const char *name);

/* `-s help`: every emulation with its description, one a line, sorted. */
void pci_print_emulations(FILE *out);

/* `-s NAME,help`: the usage text of emulation `name`; 0, or -1 when no
 * emulation has that name (nothing printed). */
int pci_print_emulation_usage(FILE *out, const char *name);

/* Parse one -s argument into config keys; 0, or -1 with a one-line
 * reason in `err`. */
int pci_parse_slot_option(const char *opt, char *err, size_t errlen);

/*
 * Check every pci.B.S.F node of the config tree before the VM starts: it
 * names a known emulation (device=) and sets only the keys that emulation
 * knows (pci_devemu.keys).  An unknown key is refused with -1 and one line
 * in `err` naming the key, the emulation and the slot; when `warn_only`,
 * each is logged as a warning instead and the key ignored.  0 when all is
 * well (or only warned about).
 */
int pci_check_config(bool warn_only, char *err, size_t errlen);

/* Generic "a=b,c" parsing below `node` (c becomes c=true). */
int pci_parse_legacy_config(struct config_node *node, const char *conf, char *err, size_t errlen);

#endif
