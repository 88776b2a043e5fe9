/*
 * The graphical console: where the display device (fbuf), the input devices
 * (PS/2 keyboard and mouse, USB tablet) and the VNC server meet, as bhyve's
 * console.c.  One display, a few keyboard and pointer sinks; the VNC server
 * is the only caller of console_refresh() and of the event functions.
 *
 * Threads: console_refresh() runs on the VNC thread (at most about 30 times
 * a second); the sinks are called on that thread too.  Sinks and the
 * display lock their own state and never block (no waiting on a vCPU), so
 * a slow or hostile VNC client cannot stall the guest and the guest cannot
 * stall the VNC thread for long.
 */
#ifndef KHYVE_CONSOLE_H
#define KHYVE_CONSOLE_H

#include <stdbool.h>
#include <stdint.h>

/* A changed area, in pixels of the frame it belongs to. */
struct console_rect {
	uint32_t x, y, w, h;
};

#define CONSOLE_MAX_RECTS 64

/*
 * What the display hands the VNC server on each refresh.  `pixels` is
 * XRGB8888 in host byte order (0x00RRGGBB per uint32_t), `height` rows of
 * `stride` pixels of which the first `width` are shown; it is owned by the
 * display and stays valid and unchanged until the next console_refresh().
 * `full` means everything may have changed (first frame, mode or size
 * change): the rectangles are then ignored.  Otherwise `nrects` rectangles
 * cover every pixel changed since the previous refresh (a display with more
 * changed areas than CONSOLE_MAX_RECTS merges them or sets `full`).
 */
struct console_frame {
	const uint32_t *pixels;
	uint32_t width, height, stride;
	bool full;
	unsigned nrects;
	struct console_rect rects[CONSOLE_MAX_RECTS];
};

/* Fill `f` (zeroed by the caller) with the current frame. */
typedef void console_refresh_fn(void *arg, struct console_frame *f);

/*
 * Keys, as QEMU's "qnum" numbers (also the keycode of the RFB QEMU Extended
 * Key Event): the PC XT (scancode set 1) make code, plus 0x80 for keys sent
 * with an E0 prefix (right Ctrl 0x9d, Up 0xc8, keypad Enter 0x9c).  Pause
 * is 0xc6.  `down` false is the release.
 */
typedef void console_key_fn(void *arg, bool down, uint16_t qnum);

/*
 * The pointer, absolute: (x, y) in pixels of a frame of `width` x `height`
 * (the size last shown to clients), `buttons` as RFB's button mask: bit 0
 * left, 1 middle, 2 right, 3 wheel up, 4 wheel down.  Relative devices (the
 * PS/2 mouse) take differences between calls.
 */
typedef void console_ptr_fn(void *arg, uint8_t buttons, uint32_t x, uint32_t y, uint32_t width,
                            uint32_t height);

#define CONSOLE_MAX_SINKS 4

/* Register the display (one; a second registration replaces the first).
 * Returns 0. */
int console_register_display(console_refresh_fn *fn, void *arg);

/* Register a keyboard or pointer sink; every registered sink gets every
 * event.  0, or -1 when CONSOLE_MAX_SINKS are taken. */
int console_register_kbd(console_key_fn *fn, void *arg);
int console_register_ptr(console_ptr_fn *fn, void *arg);

/* For the VNC server: the current frame; false (f untouched) when no
 * display is registered. */
bool console_refresh(struct console_frame *f);

/* For the VNC server: deliver an input event to every sink. */
void console_key_event(bool down, uint16_t qnum);
void console_ptr_event(uint8_t buttons, uint32_t x, uint32_t y, uint32_t width, uint32_t height);

/* Forget every registration (unit tests). */
void console_reset(void);

#endif
