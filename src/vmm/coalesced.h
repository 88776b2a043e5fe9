/*
 * Coalesced I/O (KVM api.rst, KVM_REGISTER_COALESCED_MMIO and
 * KVM_CAP_COALESCED_PIO): guest writes to a registered zone do not exit to
 * userspace; KVM appends them (address, length, data) to a ring page it
 * shares with every vCPU mapping, and the VMM applies them, in order,
 * before it handles the next exit.  For registers whose writes have no
 * effect the guest can see until a later access (PCI's CONFIG_ADDRESS at
 * 0xCF8, read back only through 0xCFC): one exit saved per pair.
 */
#ifndef KHYVE_VMM_COALESCED_H
#define KHYVE_VMM_COALESCED_H

#include <stdbool.h>
#include <stdint.h>

struct vm;

/*
 * Queue the guest's writes to [addr, addr + size) (ports when `pio`)
 * instead of exiting.  0, or -1 when this KVM cannot (no
 * KVM_CAP_COALESCED_MMIO / _PIO, or no ring page in the vCPU mapping):
 * the writes then exit as before, nothing is lost.  Set-up only.
 */
int vm_coalesce_zone(struct vm *vm, uint64_t addr, uint32_t size, bool pio);

/* One queued write: `len` 1-8 bytes of `data` (guest order) to `addr`. */
typedef void (*vm_coalesced_fn)(void *arg, uint64_t addr, unsigned len, bool pio,
                                const uint8_t *data);

/*
 * Hand every queued write to `fn`, oldest first, and free its ring slot.
 * Called by each vCPU after KVM_RUN returns (any reason) and before it
 * handles the exit; a lock keeps vCPUs from applying the same entry twice
 * or out of order.  Cheap when the ring is empty (two loads).
 */
void vm_coalesced_drain(struct vm *vm, vm_coalesced_fn fn, void *arg);

/* The ring's first page offset in a vCPU mapping when zones are on, else 0. */
unsigned vm_coalesced_page(const struct vm *vm);

#endif
