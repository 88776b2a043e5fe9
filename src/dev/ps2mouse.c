/*
 * PS/2 mouse (see ps2mouse.h).  Facts from the IBM PS/2 Hardware Interface
 * Technical Reference (pointing device commands, status and packet
 * formats) and Microsoft's IntelliMouse extension (the 200-100-80 sample
 * rate knock, ID 3, a fourth byte with the wheel's movement).
 */
#include "dev/ps2mouse.h"

#include <stdlib.h>

#define MS_SCALE11    0xe6
#define MS_SCALE21    0xe7
#define MS_SET_RES    0xe8
#define MS_STATUS     0xe9
#define MS_STREAM     0xea
#define MS_READ_DATA  0xeb
#define MS_RESET_WRAP 0xec
#define MS_SET_WRAP   0xee
#define MS_REMOTE     0xf0
#define MS_GET_ID     0xf2
#define MS_SET_RATE   0xf3
#define MS_ENABLE     0xf4
#define MS_DISABLE    0xf5
#define MS_DEFAULT    0xf6
#define MS_RESEND     0xfe
#define MS_RESET      0xff

#define MS_ACK        0xfa
#define MS_NAK        0xfe
#define MS_BAT_OK     0xaa

/* Packet byte 0. */
#define PKT_LEFT    0x01
#define PKT_RIGHT   0x02
#define PKT_MIDDLE  0x04
#define PKT_ALWAYS1 0x08
#define PKT_XSIGN   0x10
#define PKT_YSIGN   0x20
#define PKT_XOVFL   0x40
#define PKT_YOVFL   0x80

/* Status byte 0 of 0xE9. */
#define ST_RIGHT   0x01
#define ST_MIDDLE  0x02
#define ST_LEFT    0x04
#define ST_SCALE21 0x10
#define ST_ENABLED 0x20
#define ST_REMOTE  0x40

/* RFB button mask. */
#define RFB_LEFT     0x01
#define RFB_MIDDLE   0x02
#define RFB_RIGHT    0x04
#define RFB_WHEEL_UP 0x08
#define RFB_WHEEL_DN 0x10

#define MOVE_MAX     255 /* 9-bit two's complement: -256..255 */
#define MOVE_MIN     (-256)
#define ACCUM_LIMIT  100000 /* bound on movement not yet sent */

struct ps2mouse {
	uint8_t q[PS2MOUSE_QUEUE];
	unsigned head, count;
	uint8_t pending; /* command waiting for its argument, or 0 */
	uint8_t last_sent;
	bool enabled, remote, wrap, scale21;
	uint8_t resolution, rate, id;
	uint8_t rates[3]; /* the last three sample rates, newest last */
	uint8_t buttons;  /* RFB mask of the last event */
	bool have_pos;
	uint32_t x, y;
	int dx, dy, dz; /* movement not yet sent; dy is up-positive */
	bool dirty;     /* a button change not yet sent */
};

static void put(struct ps2mouse *ms, uint8_t b)
{
	if (ms->count == PS2MOUSE_QUEUE)
		return;
	ms->q[(ms->head + ms->count++) % PS2MOUSE_QUEUE] = b;
}

static void set_defaults(struct ps2mouse *ms)
{
	ms->enabled = false;
	ms->remote = false;
	ms->scale21 = false;
	ms->resolution = 2; /* 4 counts/mm */
	ms->rate = 100;
	ms->pending = 0;
	ms->dx = ms->dy = ms->dz = 0;
	ms->dirty = false;
}

struct ps2mouse *ps2mouse_create(void)
{
	struct ps2mouse *ms = calloc(1, sizeof(*ms));

	if (ms != NULL)
		set_defaults(ms);
	return ms;
}

void ps2mouse_free(struct ps2mouse *ms)
{
	free(ms);
}

uint8_t ps2mouse_id(const struct ps2mouse *ms)
{
	return ms->id;
}

static unsigned packet_len(const struct ps2mouse *ms)
{
	return ms->id == 3 ? 4 : 3;
}

static int clamp(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* v + d, kept within +-ACCUM_LIMIT. */
static int add_bounded(int v, int64_t d)
{
	int64_t sum = (int64_t)v + d;

	return (int)(sum < -ACCUM_LIMIT ? -ACCUM_LIMIT : sum > ACCUM_LIMIT ? ACCUM_LIMIT : sum);
}

/* Queue one packet carrying as much of the pending movement as fits;
 * `overflow`: report what does not fit with the overflow bits and drop it
 * (remote mode: the counters reset on each read). */
static void send_packet(struct ps2mouse *ms, bool overflow)
{
	int dx = clamp(ms->dx, MOVE_MIN, MOVE_MAX), dy = clamp(ms->dy, MOVE_MIN, MOVE_MAX);
	int dz = clamp(ms->dz, -8, 7);
	uint8_t b0 = PKT_ALWAYS1;

	b0 |= (ms->buttons & RFB_LEFT ? PKT_LEFT : 0) | (ms->buttons & RFB_RIGHT ? PKT_RIGHT : 0) |
	      (ms->buttons & RFB_MIDDLE ? PKT_MIDDLE : 0);
	b0 |= (dx < 0 ? PKT_XSIGN : 0) | (dy < 0 ? PKT_YSIGN : 0);
	if (overflow) {
		b0 |= (dx != ms->dx ? PKT_XOVFL : 0) | (dy != ms->dy ? PKT_YOVFL : 0);
		ms->dx = ms->dy = 0;
	} else {
		ms->dx -= dx;
		ms->dy -= dy;
	}
	ms->dz = ms->id == 3 ? ms->dz - dz : 0;
	put(ms, b0);
	put(ms, (uint8_t)dx);
	put(ms, (uint8_t)dy);
	if (ms->id == 3)
		put(ms, (uint8_t)dz);
	ms->dirty = false;
}

/* Stream mode: pack pending movement into packets while they fit. */
static void stream(struct ps2mouse *ms)
{
	if (!ms->enabled || ms->remote || ms->wrap)
		return;
	while ((ms->dirty || ms->dx != 0 || ms->dy != 0 || ms->dz != 0) &&
	       PS2MOUSE_QUEUE - ms->count >= packet_len(ms))
		send_packet(ms, false);
}

bool ps2mouse_read(struct ps2mouse *ms, uint8_t *byte)
{
	if (ms->count == 0)
		return false;
	*byte = ms->q[ms->head];
	ms->head = (ms->head + 1) % PS2MOUSE_QUEUE;
	ms->count--;
	ms->last_sent = *byte;
	stream(ms);
	return true;
}

void ps2mouse_pointer(struct ps2mouse *ms, uint8_t buttons, uint32_t x, uint32_t y)
{
	uint8_t pressed = buttons & ~ms->buttons;

	if (ms->have_pos) {
		ms->dx = add_bounded(ms->dx, (int64_t)x - ms->x);
		ms->dy = add_bounded(ms->dy, (int64_t)ms->y - y); /* PS/2's y grows upwards */
	}
	ms->have_pos = true;
	ms->x = x;
	ms->y = y;
	/* Each press of a wheel "button" is one notch: up is z = -1. */
	if (pressed & RFB_WHEEL_UP)
		ms->dz = add_bounded(ms->dz, -1);
	if (pressed & RFB_WHEEL_DN)
		ms->dz = add_bounded(ms->dz, 1);
	if ((buttons ^ ms->buttons) & (RFB_LEFT | RFB_MIDDLE | RFB_RIGHT))
		ms->dirty = true;
	ms->buttons = buttons;
	if (!ms->enabled) {
		ms->dx = ms->dy = ms->dz = 0; /* a disabled mouse reports nothing later */
		ms->dirty = false;
	}
	stream(ms);
}

static uint8_t status_byte(const struct ps2mouse *ms)
{
	return (uint8_t)((ms->remote ? ST_REMOTE : 0) | (ms->enabled ? ST_ENABLED : 0) |
	                 (ms->scale21 ? ST_SCALE21 : 0) | (ms->buttons & RFB_LEFT ? ST_LEFT : 0) |
	                 (ms->buttons & RFB_MIDDLE ? ST_MIDDLE : 0) |
	                 (ms->buttons & RFB_RIGHT ? ST_RIGHT : 0));
}

static void set_rate(struct ps2mouse *ms, uint8_t rate)
{
	ms->rate = rate;
	ms->rates[0] = ms->rates[1];
	ms->rates[1] = ms->rates[2];
	ms->rates[2] = rate;
	if (ms->rates[0] == 200 && ms->rates[1] == 100 && ms->rates[2] == 80)
		ms->id = 3;
}

static void take_argument(struct ps2mouse *ms, uint8_t b)
{
	if (ms->pending == MS_SET_RES)
		ms->resolution = b & 0x03;
	else
		set_rate(ms, b);
	ms->pending = 0;
	put(ms, MS_ACK);
}

static void reset(struct ps2mouse *ms)
{
	ms->head = ms->count = 0;
	set_defaults(ms);
	ms->wrap = false;
	ms->id = 0;
	ms->rates[0] = ms->rates[1] = ms->rates[2] = 0;
	put(ms, MS_ACK);
	put(ms, MS_BAT_OK);
	put(ms, 0x00); /* device ID after the self test */
}

static void command(struct ps2mouse *ms, uint8_t b)
{
	switch (b) {
	case MS_SCALE11:
	case MS_SCALE21:
		ms->scale21 = b == MS_SCALE21;
		put(ms, MS_ACK);
		break;
	case MS_SET_RES:
	case MS_SET_RATE:
		ms->pending = b;
		put(ms, MS_ACK);
		break;
	case MS_STATUS:
		put(ms, MS_ACK);
		put(ms, status_byte(ms));
		put(ms, ms->resolution);
		put(ms, ms->rate);
		break;
	case MS_STREAM:
	case MS_REMOTE:
		ms->remote = b == MS_REMOTE;
		ms->dx = ms->dy = ms->dz = 0;
		put(ms, MS_ACK);
		break;
	case MS_READ_DATA:
		put(ms, MS_ACK);
		if (PS2MOUSE_QUEUE - ms->count >= packet_len(ms))
			send_packet(ms, true);
		break;
	case MS_SET_WRAP:
		ms->wrap = true;
		put(ms, MS_ACK);
		break;
	case MS_GET_ID:
		put(ms, MS_ACK);
		put(ms, ms->id);
		break;
	case MS_ENABLE:
	case MS_DISABLE:
		ms->enabled = b == MS_ENABLE;
		ms->dx = ms->dy = ms->dz = 0;
		put(ms, MS_ACK);
		break;
	case MS_DEFAULT:
		set_defaults(ms);
		put(ms, MS_ACK);
		break;
	case MS_RESEND:
		put(ms, ms->last_sent);
		break;
	case MS_RESET:
		reset(ms);
		break;
	default:
		put(ms, MS_NAK);
		break;
	}
}

void ps2mouse_write(struct ps2mouse *ms, uint8_t byte)
{
	if (ms->wrap && byte != MS_RESET && byte != MS_RESET_WRAP) {
		put(ms, byte); /* wrap mode echoes */
		return;
	}
	if (byte == MS_RESET_WRAP) {
		ms->wrap = false;
		put(ms, MS_ACK);
		return;
	}
	if (ms->pending != 0) {
		take_argument(ms, byte);
		return;
	}
	command(ms, byte);
}

/* ---- saved state ---- */

void ps2mouse_save(const struct ps2mouse *ms, struct sbuf *out)
{
	sbuf_put_u16(out, (uint16_t)ms->count);
	for (unsigned i = 0; i < ms->count; i++)
		sbuf_put_u8(out, ms->q[(ms->head + i) % PS2MOUSE_QUEUE]);
	sbuf_put_u8(out, ms->pending);
	sbuf_put_u8(out, ms->last_sent);
	sbuf_put_bool(out, ms->enabled);
	sbuf_put_bool(out, ms->remote);
	sbuf_put_bool(out, ms->wrap);
	sbuf_put_bool(out, ms->scale21);
	sbuf_put_u8(out, ms->resolution);
	sbuf_put_u8(out, ms->rate);
	sbuf_put_u8(out, ms->id);
	sbuf_put_bytes(out, ms->rates, sizeof(ms->rates));
	sbuf_put_u8(out, ms->buttons);
	sbuf_put_bool(out, ms->have_pos);
	sbuf_put_u32(out, ms->x);
	sbuf_put_u32(out, ms->y);
	sbuf_put_u32(out, (uint32_t)ms->dx);
	sbuf_put_u32(out, (uint32_t)ms->dy);
	sbuf_put_u32(out, (uint32_t)ms->dz);
	sbuf_put_bool(out, ms->dirty);
}

/* A saved movement counter, which add_bounded keeps within +-ACCUM_LIMIT. */
static int load_delta(struct sbuf_reader *in, const char *what)
{
	int32_t v = (int32_t)sbuf_get_u32(in);

	if (v < -ACCUM_LIMIT || v > ACCUM_LIMIT) {
		sbuf_fail(in, "mouse %s %d out of range", what, (int)v);
		return 0;
	}
	return v;
}

static void check_loaded(struct sbuf_reader *in, const struct ps2mouse *ms)
{
	if (ms->pending != 0 && ms->pending != MS_SET_RES && ms->pending != MS_SET_RATE)
		sbuf_fail(in, "mouse pending command 0x%02x unknown", ms->pending);
	if (ms->resolution > 3)
		sbuf_fail(in, "mouse resolution %u > 3", ms->resolution);
	if (ms->id != 0 && ms->id != 3)
		sbuf_fail(in, "mouse ID %u (0 or 3)", ms->id);
}

struct ps2mouse *ps2mouse_load(struct sbuf_reader *in)
{
	struct ps2mouse *ms = calloc(1, sizeof(*ms));
	unsigned count = sbuf_get_u16(in);

	if (ms == NULL) {
		sbuf_fail(in, "out of memory");
		return NULL;
	}
	if (count > PS2MOUSE_QUEUE)
		sbuf_fail(in, "mouse queue count %u > %u", count, PS2MOUSE_QUEUE);
	else
		sbuf_get_bytes(in, ms->q, count);
	ms->count = in->failed ? 0 : count;
	ms->pending = sbuf_get_u8(in);
	ms->last_sent = sbuf_get_u8(in);
	ms->enabled = sbuf_get_bool(in);
	ms->remote = sbuf_get_bool(in);
	ms->wrap = sbuf_get_bool(in);
	ms->scale21 = sbuf_get_bool(in);
	ms->resolution = sbuf_get_u8(in);
	ms->rate = sbuf_get_u8(in);
	ms->id = sbuf_get_u8(in);
	sbuf_get_bytes(in, ms->rates, sizeof(ms->rates));
	ms->buttons = sbuf_get_u8(in);
	ms->have_pos = sbuf_get_bool(in);
	ms->x = sbuf_get_u32(in);
	ms->y = sbuf_get_u32(in);
	ms->dx = load_delta(in, "dx");
	ms->dy = load_delta(in, "dy");
	ms->dz = load_delta(in, "dz");
	ms->dirty = sbuf_get_bool(in);
	check_loaded(in, ms);
	if (in->failed) {
		free(ms);
		return NULL;
	}
	return ms;
}
