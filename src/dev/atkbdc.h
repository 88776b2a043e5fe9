/*
 * The i8042 keyboard controller at ports 0x60 (data) and 0x64 (status and
 * command), with a PS/2 keyboard (dev/ps2kbd.h) on its first port and a
 * PS/2 mouse (dev/ps2mouse.h) on its auxiliary port; IBM PS/2 Hardware
 * Interface Technical Reference, "Keyboard/Auxiliary Device Controller".
 * Its output buffer holds one byte; each device queues the rest.  A byte
 * entering the buffer pulses IRQ 1 (keyboard) or IRQ 12 (mouse) when the
 * command byte enables it.
 *
 * Threads: port accesses come from vCPUs, input events from the VNC
 * thread; one lock guards the controller and both devices, and nothing
 * waits while holding it (interrupts and the reset are signalled after it
 * is dropped).
 */
#ifndef KHYVE_ATKBDC_H
#define KHYVE_ATKBDC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/snapshot.h"

#define ATKBDC_DATA_PORT 0x60
#define ATKBDC_CMD_PORT  0x64
#define ATKBDC_KBD_IRQ   1
#define ATKBDC_AUX_IRQ   12

/* The controller's wiring to the machine. */
struct atkbdc_ops {
	/* Pulse ISA interrupt `irq` (1 or 12): an edge. */
	void (*pulse_irq)(void *arg, unsigned irq);
	/* The guest pulled the CPU reset line (command 0xFE, or the output
	 * port written with bit 0 clear). */
	void (*reset)(void *arg);
};

struct atkbdc;

/* A controller after power-on, wired through `ops` (kept, with `arg`);
 * NULL without memory.  Free with atkbdc_free() (NULL is fine). */
struct atkbdc *atkbdc_create(const struct atkbdc_ops *ops, void *arg);
void atkbdc_free(struct atkbdc *k);

/* A guest access to ATKBDC_DATA_PORT or ATKBDC_CMD_PORT (other ports read
 * 0xff and ignore writes). */
uint8_t atkbdc_read(struct atkbdc *k, uint16_t port);
void atkbdc_write(struct atkbdc *k, uint16_t port, uint8_t val);

/* Console sinks (backend/console.h), `arg` the controller: a key for the
 * keyboard, a pointer event for the mouse.  Never block. */
void atkbdc_key(void *arg, bool down, uint16_t qnum);
void atkbdc_pointer(void *arg, uint8_t buttons, uint32_t x, uint32_t y, uint32_t width,
                    uint32_t height);

/* The keyboard's LED bits (bit 0 Scroll, 1 Num, 2 Caps Lock). */
uint8_t atkbdc_leds(struct atkbdc *k);

/*
 * Saved state (docs/design/snapshots.md section 2, "dev"), one section
 * "lpc.atkbdc" for the controller and both devices: `arg` is the struct
 * atkbdc.  Version 1: controller RAM, output port, the pending command,
 * the output buffer and the controller's reply queue, then the keyboard's
 * (ps2kbd_save) and the mouse's (ps2mouse_save) fields.  Interrupts are
 * edges already delivered (the in-kernel PIC's saved state holds what is
 * pending), so a restore raises none; a byte waiting in the output buffer
 * is read by the guest's handler as before.
 */
extern const struct state_ops atkbdc_state_ops;

#endif
