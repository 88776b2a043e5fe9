/*
 * A CFI parallel flash holding the firmware's variable store (bhyve's
 * -l bootrom,ROM,VARFILE), with the Intel/Sharp command set (CFI command
 * set 0001) as QEMU's pflash_cfi01 offers it to OVMF:
 *   0xFF read array          0x10/0x40 program one byte (next write)
 *   0x20 then 0xD0 erase a 4 KiB block   0x50 clear status
 *   0x70 read status         0x90 read identifier (Intel 0x89, 0x18)
 * After a program or erase, reads return the status register (bit 7:
 * ready) until 0xFF; after clear status they return the array, which is
 * how OVMF tells flash from ROM and RAM.  The file is mapped shared, so
 * the guest's writes land in it; it is msync()ed when the guest returns
 * to read-array mode, after an erase, and when khyve exits.
 * Without a read-only window (pflash_set_array_hook) every access is an
 * MMIO exit; with one, only writes and non-array reads are.
 */
#ifndef KHYVE_PFLASH_H
#define KHYVE_PFLASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/snapshot.h"

#define PFLASH_BLOCK_SIZE 4096u       /* bytes: OVMF's and QEMU's sector */
#define PFLASH_MAX_SIZE   (16u << 20) /* bytes */

struct machine;
struct pflash;

/* Open `path` (its size a multiple of PFLASH_BLOCK_SIZE, at most
 * PFLASH_MAX_SIZE) read-write and map it.  NULL with a one-line reason in
 * `err`.  The caller frees it with pflash_close(). */
struct pflash *pflash_open(const char *path, char *err, size_t errlen);
void pflash_close(struct pflash *pf);

/* Size of the flash in bytes. */
uint64_t pflash_size(const struct pflash *pf);

/* A guest access at byte `offset` of the flash (size 1, 2, 4 or 8): an
 * iobus handler.  Offsets past the end read as all ones; returns 0. */
int pflash_access(void *pf, uint64_t offset, unsigned size, bool is_write, uint64_t *val);

/* Write the guest's changes to the file (msync); 0 or -1. */
int pflash_sync(struct pflash *pf);

/* The flash's contents (pflash_size() bytes, page-aligned): what a
 * read-only window shows in read-array mode. */
void *pflash_data(struct pflash *pf);

/* Call `fn(arg, on)` whenever reads stop (on = false) or start again
 * (on = true) returning the array, so the caller can switch a read-only
 * window (vm_rom_window_set) that serves array reads without exits.  Called
 * with the flash's lock held, before the access that changed the mode
 * returns. */
void pflash_set_array_hook(struct pflash *pf, void (*fn)(void *arg, bool on), void *arg);

/*
 * Saved state (docs/design/snapshots.md section 2, "dev"): `arg` is the
 * struct pflash.  Version 1: the command mode and the status register.
 * The store's contents are not in it: they live in the vars file, which
 * the checkpoint's caller writes back with pflash_sync() (the machine's
 * flash is machine.vars) before the state file counts as complete.  The
 * restore re-applies the mode through the array hook (the read-only
 * window mapped in read-array mode, unmapped otherwise).
 */
extern const struct state_ops pflash_state_ops;

/* Register `pf`'s section "lpc.pflash" with machine `m`; 0 or -1. */
int pflash_add_state(struct machine *m, struct pflash *pf);

#endif
