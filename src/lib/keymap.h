/*
 * X keysyms to PC keys on a US keyboard layout: what a VNC client that lacks
 * QEMU's Extended Key Event sends (RFC 6143 7.5.4 KeyEvent carries only the
 * keysym) turned into the key a US keyboard would press.  Keys are QEMU
 * "qnum" numbers (see backend/console.h): the XT (scancode set 1) make code,
 * plus 0x80 for keys with an E0 prefix.  Keysym values are X11's
 * (keysymdef.h); Latin-1 printable characters are their own keysym.
 */
#ifndef KHYVE_KEYMAP_H
#define KHYVE_KEYMAP_H

#include <stdbool.h>
#include <stdint.h>

/* What the Shift key must be for a keysym to come out of its key. */
enum keymap_shift {
	KEYMAP_SHIFT_ANY, /* the key means the same either way (Tab, F1, Up) */
	KEYMAP_SHIFT_OFF, /* the unshifted character ('a', '1', '-') */
	KEYMAP_SHIFT_ON,  /* the shifted character ('A', '!', '_') */
};

/* A keysym's key on a US layout. */
struct keymap_key {
	uint16_t qnum; /* 1..0xff */
	enum keymap_shift shift;
};

/* Some qnums the VNC server needs by name. */
#define KEYMAP_QNUM_SHIFT_L 0x2a
#define KEYMAP_QNUM_SHIFT_R 0x36

/* X keysyms of the Shift keys. */
#define KEYMAP_KEYSYM_SHIFT_L 0xffe1
#define KEYMAP_KEYSYM_SHIFT_R 0xffe2

/*
 * The US-layout key for `keysym`: true and *k filled, or false when no key
 * of a US PC keyboard produces it (a client's non-US character: such a
 * client must use the Extended Key Event).
 */
bool keymap_lookup(uint32_t keysym, struct keymap_key *k);

/*
 * The keysym for an X keysym name ("Return", "F1", "BackSpace", "a",
 * "space", "KP_Enter", ...), or a single printable ASCII character as
 * itself; 0 when unknown.  Names as in X11's keysymdef.h without "XK_".
 */
uint32_t keymap_keysym_by_name(const char *name);

/* The keysym of a character typed as text: '\n' is Return, '\t' Tab,
 * printable ASCII itself; 0 for anything else. */
uint32_t keymap_keysym_of_char(unsigned char c);

#endif
