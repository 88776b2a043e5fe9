/*
 * Interrupt routing in KVM (KVM_SET_GSI_ROUTING): the default routes for the
 * PIC and IOAPIC pins (GSIs 0-23, as KVM sets them up) plus one MSI route
 * per vector that is delivered by irqfd.  KVM only accepts whole tables, so
 * khyve keeps the table and sends it after every change.  Thread-safe.
 */
#ifndef KHYVE_IRQ_H
#define KHYVE_IRQ_H

#include <stdint.h>

struct vm;

/* Install the default table; 0 or -1 (errno). */
int irq_routing_init(struct vm *vm);

/* Add an MSI route; returns its GSI (>= 24) or -1. */
int irq_route_msi_add(struct vm *vm, uint64_t addr, uint32_t data);

/* Change / remove the MSI route of `gsi`; 0 or -1. */
int irq_route_msi_update(struct vm *vm, int gsi, uint64_t addr, uint32_t data);
int irq_route_msi_del(struct vm *vm, int gsi);

/* Deliver one MSI directly (KVM_SIGNAL_MSI); 0 or -1. */
int irq_signal_msi(struct vm *vm, uint64_t addr, uint32_t data);

/* Bind / unbind eventfd `fd` to `gsi` (KVM_IRQFD); 0 or -1. */
int irq_irqfd_bind(struct vm *vm, int fd, int gsi);
int irq_irqfd_unbind(struct vm *vm, int fd, int gsi);

/* A level-triggered irqfd (KVM_IRQFD_FLAG_RESAMPLE, api.rst 4.75): an
 * event on `fd` raises IOAPIC pin `gsi`; the guest's EOI lowers it and
 * signals `resamplefd` (a passed-through device's INTx unmask).  0 or -1. */
int irq_irqfd_bind_resample(struct vm *vm, int fd, int gsi, int resamplefd);

#endif
