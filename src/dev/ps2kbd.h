/*
 * A PS/2 (MF2) keyboard: the device behind the i8042's first port.  It
 * turns console key events (QEMU qnums, backend/console.h) into scancode
 * set 2 (or set 1) bytes and answers the host commands of the IBM PS/2
 * Technical Reference "Keyboard and Auxiliary Device Controller" chapter
 * (0xED LEDs ... 0xFF reset).  No locking: the controller (atkbdc.c) owns
 * the lock around every call.
 */
#ifndef KHYVE_PS2KBD_H
#define KHYVE_PS2KBD_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/sbuf.h"

struct ps2kbd;

/* Bytes the keyboard can hold for the controller (a real one holds 16;
 * more here, so that a VNC client's burst of keys fits: a pasted line
 * reaches OVMF, which polls the 8042 only every few milliseconds). */
#define PS2KBD_QUEUE 1024

/* A keyboard after power-on (set 2, scanning enabled); NULL without memory.
 * Free with ps2kbd_free() (NULL is fine). */
struct ps2kbd *ps2kbd_create(void);
void ps2kbd_free(struct ps2kbd *kb);

/* A byte from the host (a command or a command's argument). */
void ps2kbd_write(struct ps2kbd *kb, uint8_t byte);

/* The next byte for the controller: true and *byte, or false when none. */
bool ps2kbd_read(struct ps2kbd *kb, uint8_t *byte);

/* A key event (console_key_fn's arguments); dropped while scanning is
 * disabled; on a full queue the event is dropped and the overrun code
 * sent instead.  Returns false when it overran. */
bool ps2kbd_key(struct ps2kbd *kb, bool down, uint16_t qnum);

/* The LED bits last set by 0xED (bit 0 Scroll, 1 Num, 2 Caps Lock). */
uint8_t ps2kbd_leds(const struct ps2kbd *kb);

/* The typematic byte last set by 0xF3 (bits 4:0 rate, 6:5 delay). */
uint8_t ps2kbd_typematic(const struct ps2kbd *kb);

/*
 * Saved state, inside the controller's section (dev/atkbdc.h): append the
 * keyboard's fields (queue bytes oldest first, overrun, the pending
 * command, last byte sent, set, scanning, LEDs, typematic, Ctrl keys).
 * The caller holds the controller's lock.
 */
void ps2kbd_save(const struct ps2kbd *kb, struct sbuf *out);

/*
 * Read what ps2kbd_save wrote into a new keyboard, checking each value
 * (hostile data); NULL when the reader failed (it says why).  The caller
 * swaps it in under its lock and frees the old one.
 */
struct ps2kbd *ps2kbd_load(struct sbuf_reader *in);

/* The 8042's set-2 to set-1 translation of one byte (the 0xF0 break
 * prefix is the controller's business, not this table's). */
uint8_t ps2_translate(uint8_t set2);

#endif
