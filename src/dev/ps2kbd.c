/*
 * PS/2 keyboard (see ps2kbd.h).  Facts from the IBM PS/2 Hardware
 * Interface Technical Reference (keyboard commands and replies) and the
 * scancode set 1/2 tables every PC keyboard follows; the set-2 code of each
 * set-1 code is the one the 8042's translation turns back into it.
 */
#include "dev/ps2kbd.h"

#include <stdlib.h>
#include <string.h>

/* Host commands. */
#define KBD_SET_LEDS    0xed
#define KBD_ECHO        0xee
#define KBD_SCANCODE    0xf0
#define KBD_GET_ID      0xf2
#define KBD_TYPEMATIC   0xf3
#define KBD_ENABLE      0xf4
#define KBD_DEFAULT_DIS 0xf5
#define KBD_DEFAULT     0xf6
#define KBD_SET3_FIRST  0xf7 /* 0xf7-0xfd: set-3 key types, acknowledged */
#define KBD_SET3_LAST   0xfd
#define KBD_RESEND      0xfe
#define KBD_RESET       0xff

/* Replies. */
#define KBD_ACK           0xfa
#define KBD_BAT_OK        0xaa
#define KBD_NAK           0xfe
#define KBD_ID0           0xab
#define KBD_ID1           0x83

#define KBD_BREAK         0xf0 /* set 2: prefix of a release */
#define KBD_EXT           0xe0
#define QNUM_EXT          0x80 /* qnum bit: the key has an E0 prefix */
#define QNUM_PAUSE        0xc6
#define QNUM_PRINT        0xb7
#define QNUM_LCTRL        0x1d
#define QNUM_RCTRL        0x9d

#define TYPEMATIC_DEFAULT 0x2b /* 10.9 characters/s after 500 ms */

struct ps2kbd {
	uint8_t q[PS2KBD_QUEUE];
	unsigned head, count;
	bool overrun;      /* the overrun code is queued; cleared when drained */
	uint8_t pending;   /* command waiting for its argument, or 0 */
	uint8_t last_sent; /* for the host's resend */
	uint8_t set;       /* scancode set 1, 2 or 3 (3 sends set-2 codes) */
	bool scanning;
	uint8_t leds;
	uint8_t typematic;
	uint8_t ctrl_down; /* bit 0 left, bit 1 right Ctrl: Pause becomes Break */
};

/*
 * Set-2 make code of each set-1 make code 0x00-0x7f (keys with an E0 prefix
 * use the same code after E0 in both sets).
 */
static const uint8_t set2_of_set1[128] = {
    0x00, 0x76, 0x16, 0x1e, 0x26, 0x25, 0x2e, 0x36, 0x3d, 0x3e, 0x46, 0x45, 0x4e, 0x55, 0x66, 0x0d,
    0x15, 0x1d, 0x24, 0x2d, 0x2c, 0x35, 0x3c, 0x43, 0x44, 0x4d, 0x54, 0x5b, 0x5a, 0x14, 0x1c, 0x1b,
    0x23, 0x2b, 0x34, 0x33, 0x3b, 0x42, 0x4b, 0x4c, 0x52, 0x0e, 0x12, 0x5d, 0x1a, 0x22, 0x21, 0x2a,
    0x32, 0x31, 0x3a, 0x41, 0x49, 0x4a, 0x59, 0x7c, 0x11, 0x29, 0x58, 0x05, 0x06, 0x04, 0x0c, 0x03,
    0x0b, 0x83, 0x0a, 0x01, 0x09, 0x77, 0x7e, 0x6c, 0x75, 0x7d, 0x7b, 0x6b, 0x73, 0x74, 0x79, 0x69,
    0x72, 0x7a, 0x70, 0x71, 0x84, 0x60, 0x61, 0x78, 0x07, 0x0f, 0x17, 0x1f, 0x27, 0x2f, 0x37, 0x3f,
    0x47, 0x4f, 0x56, 0x5e, 0x08, 0x10, 0x18, 0x20, 0x28, 0x30, 0x38, 0x40, 0x48, 0x50, 0x57, 0x6f,
    0x13, 0x19, 0x39, 0x51, 0x53, 0x5c, 0x5f, 0x62, 0x63, 0x64, 0x65, 0x67, 0x68, 0x6a, 0x6d, 0x6e,
};

uint8_t ps2_translate(uint8_t set2)
{
	if (set2 == 0x00)
		return 0xff; /* overrun */
	if (set2 == 0x02 || set2 == 0x83)
		return 0x41; /* F7: both codes the 8042 knows */
	if (set2 == 0x7f || set2 == 0x84)
		return 0x54; /* SysRq (Alt+Print Screen), likewise */
	if (set2 >= 0x80)
		return set2; /* replies and prefixes pass unchanged */
	for (unsigned i = 1; i < 128; i++)
		if (set2_of_set1[i] == set2)
			return (uint8_t)i;
	return set2;
}

static unsigned room(const struct ps2kbd *kb)
{
	return PS2KBD_QUEUE - kb->count;
}

static void put(struct ps2kbd *kb, uint8_t b)
{
	if (kb->count == PS2KBD_QUEUE)
		return; /* a host flooding commands without reading: drop */
	kb->q[(kb->head + kb->count++) % PS2KBD_QUEUE] = b;
}

static void clear_queue(struct ps2kbd *kb)
{
	kb->head = kb->count = 0;
	kb->overrun = false;
}

static void set_defaults(struct ps2kbd *kb)
{
	kb->set = 2;
	kb->typematic = TYPEMATIC_DEFAULT;
	kb->leds = 0;
	kb->pending = 0;
}

struct ps2kbd *ps2kbd_create(void)
{
	struct ps2kbd *kb = calloc(1, sizeof(*kb));

	if (kb == NULL)
		return NULL;
	set_defaults(kb);
	kb->scanning = true;
	return kb;
}

void ps2kbd_free(struct ps2kbd *kb)
{
	free(kb);
}

bool ps2kbd_read(struct ps2kbd *kb, uint8_t *byte)
{
	if (kb->count == 0)
		return false;
	*byte = kb->q[kb->head];
	kb->head = (kb->head + 1) % PS2KBD_QUEUE;
	if (--kb->count == 0)
		kb->overrun = false;
	kb->last_sent = *byte;
	return true;
}

uint8_t ps2kbd_leds(const struct ps2kbd *kb)
{
	return kb->leds;
}

uint8_t ps2kbd_typematic(const struct ps2kbd *kb)
{
	return kb->typematic;
}

/* The argument of a pending command; false when `b` is a new command
 * instead (a keyboard aborts the old one then). */
static bool take_argument(struct ps2kbd *kb, uint8_t b)
{
	uint8_t cmd = kb->pending;

	if (b >= KBD_SET_LEDS)
		return false;
	kb->pending = 0;
	if (cmd == KBD_SET_LEDS) {
		kb->leds = b & 0x07;
	} else if (cmd == KBD_TYPEMATIC) {
		kb->typematic = b & 0x7f;
	} else if (b == 0) { /* KBD_SCANCODE: report the current set */
		put(kb, KBD_ACK);
		put(kb, kb->set);
		return true;
	} else if (b <= 3) {
		kb->set = b;
	} else {
		put(kb, KBD_NAK);
		return true;
	}
	put(kb, KBD_ACK);
	return true;
}

static void command(struct ps2kbd *kb, uint8_t b)
{
	kb->pending = 0;
	switch (b) {
	case KBD_SET_LEDS:
	case KBD_SCANCODE:
	case KBD_TYPEMATIC:
		kb->pending = b;
		put(kb, KBD_ACK);
		break;
	case KBD_ECHO:
		put(kb, KBD_ECHO);
		break;
	case KBD_GET_ID:
		put(kb, KBD_ACK);
		put(kb, KBD_ID0);
		put(kb, KBD_ID1);
		break;
	case KBD_ENABLE:
		clear_queue(kb);
		kb->scanning = true;
		put(kb, KBD_ACK);
		break;
	case KBD_DEFAULT_DIS:
	case KBD_DEFAULT:
		clear_queue(kb);
		set_defaults(kb);
		kb->scanning = b == KBD_DEFAULT;
		put(kb, KBD_ACK);
		break;
	case KBD_RESEND:
		put(kb, kb->last_sent);
		break;
	case KBD_RESET:
		clear_queue(kb);
		set_defaults(kb);
		kb->scanning = true;
		put(kb, KBD_ACK);
		put(kb, KBD_BAT_OK);
		break;
	default:
		put(kb, b >= KBD_SET3_FIRST && b <= KBD_SET3_LAST ? KBD_ACK : KBD_NAK);
		break;
	}
}

void ps2kbd_write(struct ps2kbd *kb, uint8_t byte)
{
	if (kb->pending != 0 && take_argument(kb, byte))
		return;
	command(kb, byte);
}

/* The bytes of one key event in the current set; returns their count. */
static unsigned encode_key(const struct ps2kbd *kb, bool down, uint8_t qnum, uint8_t *out)
{
	static const uint8_t pause2[] = {0xe1, 0x14, 0x77, 0xe1, 0xf0, 0x14, 0xf0, 0x77};
	static const uint8_t pause1[] = {0xe1, 0x1d, 0x45, 0xe1, 0x9d, 0xc5};
	static const uint8_t print2_make[] = {0xe0, 0x12, 0xe0, 0x7c};
	static const uint8_t print2_break[] = {0xe0, 0xf0, 0x7c, 0xe0, 0xf0, 0x12};
	static const uint8_t print1_make[] = {0xe0, 0x2a, 0xe0, 0x37};
	static const uint8_t print1_break[] = {0xe0, 0xb7, 0xe0, 0xaa};
	static const uint8_t break2[] = {0xe0, 0x7e, 0xe0, 0xf0, 0x7e};
	static const uint8_t break1[] = {0xe0, 0x46, 0xe0, 0xc6};
	const uint8_t *seq = NULL;
	unsigned n = 0, len = 0;
	uint8_t code = qnum & 0x7f;
	bool set1 = kb->set == 1;

	if (qnum == QNUM_PAUSE) {
		if (!down)
			return 0;    /* Pause has no release */
		if (kb->ctrl_down) { /* Ctrl+Pause is Break */
			seq = set1 ? break1 : break2;
			len = set1 ? sizeof(break1) : sizeof(break2);
		} else {
			seq = set1 ? pause1 : pause2;
			len = set1 ? sizeof(pause1) : sizeof(pause2);
		}
	} else if (qnum == QNUM_PRINT) {
		seq = set1 ? (down ? print1_make : print1_break)
		           : (down ? print2_make : print2_break);
		len = set1 ? 4 : (down ? sizeof(print2_make) : sizeof(print2_break));
	}
	if (seq != NULL) {
		memcpy(out, seq, len);
		return len;
	}
	if (code == 0)
		return 0;
	if (qnum & QNUM_EXT)
		out[n++] = KBD_EXT;
	if (set1) {
		out[n++] = down ? code : (uint8_t)(code | 0x80);
		return n;
	}
	if (!down)
		out[n++] = KBD_BREAK;
	out[n++] = set2_of_set1[code];
	return n;
}

bool ps2kbd_key(struct ps2kbd *kb, bool down, uint16_t qnum)
{
	uint8_t seq[8];
	unsigned n;

	if (qnum == QNUM_LCTRL || qnum == QNUM_RCTRL) {
		uint8_t bit = qnum == QNUM_LCTRL ? 1 : 2;

		kb->ctrl_down = down ? kb->ctrl_down | bit : kb->ctrl_down & ~bit;
	}
	if (!kb->scanning || qnum > 0xff)
		return true;
	n = encode_key(kb, down, (uint8_t)qnum, seq);
	if (n == 0)
		return true;
	/* One byte stays free for the overrun code. */
	if (kb->overrun || n + 1 > room(kb)) {
		if (!kb->overrun && room(kb) > 0) {
			put(kb, kb->set == 1 ? 0xff : 0x00);
			kb->overrun = true;
		}
		return false;
	}
	for (unsigned i = 0; i < n; i++)
		put(kb, seq[i]);
	return true;
}

/* ---- saved state ---- */

void ps2kbd_save(const struct ps2kbd *kb, struct sbuf *out)
{
	sbuf_put_u16(out, (uint16_t)kb->count);
	for (unsigned i = 0; i < kb->count; i++)
		sbuf_put_u8(out, kb->q[(kb->head + i) % PS2KBD_QUEUE]);
	sbuf_put_bool(out, kb->overrun);
	sbuf_put_u8(out, kb->pending);
	sbuf_put_u8(out, kb->last_sent);
	sbuf_put_u8(out, kb->set);
	sbuf_put_bool(out, kb->scanning);
	sbuf_put_u8(out, kb->leds);
	sbuf_put_u8(out, kb->typematic);
	sbuf_put_u8(out, kb->ctrl_down);
}

/* The ranges the command handlers keep each field in. */
static void check_loaded(struct sbuf_reader *in, const struct ps2kbd *kb)
{
	if (kb->pending != 0 && kb->pending != KBD_SET_LEDS && kb->pending != KBD_SCANCODE &&
	    kb->pending != KBD_TYPEMATIC)
		sbuf_fail(in, "keyboard pending command 0x%02x unknown", kb->pending);
	if (kb->set < 1 || kb->set > 3)
		sbuf_fail(in, "keyboard scancode set %u", kb->set);
	if (kb->leds > 7)
		sbuf_fail(in, "keyboard LEDs 0x%02x", kb->leds);
	if (kb->typematic > 0x7f)
		sbuf_fail(in, "keyboard typematic 0x%02x", kb->typematic);
	if (kb->ctrl_down > 3)
		sbuf_fail(in, "keyboard ctrl_down 0x%02x", kb->ctrl_down);
}

struct ps2kbd *ps2kbd_load(struct sbuf_reader *in)
{
	struct ps2kbd *kb = calloc(1, sizeof(*kb));
	unsigned count = sbuf_get_u16(in);

	if (kb == NULL) {
		sbuf_fail(in, "out of memory");
		return NULL;
	}
	if (count > PS2KBD_QUEUE)
		sbuf_fail(in, "keyboard queue count %u > %u", count, PS2KBD_QUEUE);
	else
		sbuf_get_bytes(in, kb->q, count);
	kb->count = in->failed ? 0 : count;
	kb->overrun = sbuf_get_bool(in);
	kb->pending = sbuf_get_u8(in);
	kb->last_sent = sbuf_get_u8(in);
	kb->set = sbuf_get_u8(in);
	kb->scanning = sbuf_get_bool(in);
	kb->leds = sbuf_get_u8(in);
	kb->typematic = sbuf_get_u8(in);
	kb->ctrl_down = sbuf_get_u8(in);
	check_loaded(in, kb);
	if (in->failed) {
		free(kb);
		return NULL;
	}
	return kb;
}
