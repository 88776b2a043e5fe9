/*
 * 16550A UART (NS16550A data sheet; the register set every PC serial driver
 * expects): COM1 at 0x3F8/IRQ 4, COM2 at 0x2F8/IRQ 3, COM3 0x3E8/IRQ 4,
 * COM4 0x2E8/IRQ 3, configured with bhyve's -l comN,BACKEND
 * (config key lpc.comN.path).
 *
 * The register model is separate from its wiring so it can be unit-tested:
 * uart_create() needs only two callbacks.
 */
#ifndef KHYVE_UART_H
#define KHYVE_UART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/snapshot.h"

#define UART_NREGS     8
#define UART_FIFO_SIZE 16

struct uart;

struct uart_ops {
	/* Drive the interrupt line; called with the UART lock held. */
	void (*set_irq)(void *arg, bool level);
	/* Transmit one byte; called with the UART lock held, so it must not
	 * block (the ISA wiring queues it: chardev_queue()). */
	void (*tx)(void *arg, uint8_t byte);
	/* The receive FIFO has room again after being full. */
	void (*rx_room)(void *arg);
};

/* Create a UART in its reset state; NULL when out of memory. */
struct uart *uart_create(const struct uart_ops *ops, void *arg);
void uart_free(struct uart *u);

/* Guest access to register `offset` (0-7); 8-bit registers only. */
uint8_t uart_read(struct uart *u, unsigned offset);
void uart_write(struct uart *u, unsigned offset, uint8_t val);

/* Offer received bytes; returns how many fit in the receive FIFO. */
size_t uart_receive(struct uart *u, const uint8_t *buf, size_t len);

/* Free space in the receive FIFO. */
size_t uart_rx_room(struct uart *u);

/*
 * Saved state (docs/design/snapshots.md section 2, "dev"): `arg` is the
 * struct uart.  Save writes version 1 and the registers, the THR-empty and
 * interrupt state and the receive FIFO's bytes in order; restore checks
 * each value, applies them under the UART's lock and drives the interrupt
 * line to the level the registers give.  The back end is not state: it is
 * reopened from the options.
 */
extern const struct state_ops uart_state_ops;

/* Wire COM port `index` (0 = COM1 .. 3 = COM4) to the machine, with the
 * back end from config key lpc.comN.path.  0, or -1 with `err` filled. */
struct machine;
int uart_isa_init(struct machine *m, unsigned index, const char *backend, char *err, size_t errlen);

/* The I/O port of COM1 when it is configured (lpc.com1.path), else 0:
 * where firmware should put its text console (fw_cfg etc/sercon-port). */
uint16_t uart_console_port(void);

#endif
