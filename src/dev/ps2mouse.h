/*
 * A PS/2 mouse (with the IntelliMouse wheel extension): the device behind
 * the i8042's auxiliary port.  Console pointer events are absolute; the
 * mouse sends the differences between them as 3- or 4-byte movement
 * packets (IBM PS/2 Technical Reference, "Pointing Device"; Microsoft
 * IntelliMouse: sample rates 200, 100, 80 switch to ID 3 and a wheel byte).
 * No locking: the controller (atkbdc.c) owns the lock around every call.
 */
#ifndef KHYVE_PS2MOUSE_H
#define KHYVE_PS2MOUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/sbuf.h"

struct ps2mouse;

/* Bytes the mouse can hold for the controller. */
#define PS2MOUSE_QUEUE 128

/* A mouse after reset (stream mode, reporting disabled, ID 0); NULL
 * without memory.  Free with ps2mouse_free() (NULL is fine). */
struct ps2mouse *ps2mouse_create(void);
void ps2mouse_free(struct ps2mouse *ms);

/* A byte from the host (through the controller's 0xD4). */
void ps2mouse_write(struct ps2mouse *ms, uint8_t byte);

/* The next byte for the controller: true and *byte, or false when none.
 * Movement that did not fit the queue is packed as room frees up. */
bool ps2mouse_read(struct ps2mouse *ms, uint8_t *byte);

/* A pointer event (console_ptr_fn's arguments): (x, y) absolute in a frame
 * of width x height pixels, RFB's button mask. */
void ps2mouse_pointer(struct ps2mouse *ms, uint8_t buttons, uint32_t x, uint32_t y);

/* The device ID the mouse reports to 0xF2: 0, or 3 after the knock. */
uint8_t ps2mouse_id(const struct ps2mouse *ms);

/*
 * Saved state, inside the controller's section (dev/atkbdc.h): append the
 * mouse's fields (queue bytes oldest first, pending command, last byte
 * sent, modes, resolution, rate, ID, the rate history, buttons, the last
 * position and the movement not yet sent).  The caller holds the
 * controller's lock.
 */
void ps2mouse_save(const struct ps2mouse *ms, struct sbuf *out);

/* Read what ps2mouse_save wrote into a new mouse, checking each value;
 * NULL when the reader failed (it says why). */
struct ps2mouse *ps2mouse_load(struct sbuf_reader *in);

#endif
