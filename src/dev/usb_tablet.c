/*
 * A USB HID tablet (USB 2.0 chapter 9, HID 1.11): a full-speed device with
 * one interface (class HID, boot subclass, mouse protocol) and an interrupt
 * IN endpoint 0x81.  In the report protocol (the default, what Linux and
 * Windows use) it gives 6-byte reports: buttons (left, right, middle), X and
 * Y absolute in 0..0x7FFF, and a relative wheel.  A guest that selects the
 * boot protocol (HID 1.11 appendix B.2: OVMF's UsbMouseAbsolutePointerDxe
 * binds only boot mice and reads only that layout) gets 4-byte relative
 * reports instead: buttons, dX, dY, wheel, the deltas leading from where
 * the guest was told the pointer is to where it now is, in a 0..1023 space
 * (the range that driver reports), split into steps of at most 127.
 * Pointer events come from the console (backend/console.h) on the VNC
 * thread; reports wait in a short queue, consecutive moves with the same
 * buttons coalesced.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/console.h"
#include "dev/usb.h"
#include "lib/sbuf.h"

#define TABLET_QLEN   16
#define TABLET_REPORT 6
#define BOOT_REPORT   4
#define TABLET_MPS    8
#define HID_MAX       0x7fff
#define BOOT_MAX      1023 /* boot-protocol position space, 0..BOOT_MAX */
#define BOOT_STEP     127  /* the largest delta an 8-bit boot report holds */

struct tablet_report {
	uint8_t buttons;
	uint16_t x, y;
	int8_t wheel;
};

struct tablet {
	struct usb_device dev;
	pthread_mutex_t lock;
	struct tablet_report q[TABLET_QLEN];
	unsigned head, count;
	struct tablet_report cur; /* the latest state, for GET_REPORT */
	uint8_t rfb_buttons;
	uint8_t config, idle, protocol; /* protocol: 0 boot, 1 report */
	int boot_x, boot_y;             /* where boot reports have put the guest's pointer */
};

static const uint8_t dev_desc[18] = {
    18,   1,    0x00, 0x02, 0, 0, 0, 64, /* USB 2.0, class per interface, EP0 64 bytes */
    0x5d, 0xfb, 0x01, 0x00,              /* bhyve's vendor 0xfb5d, product 1 */
    0x00, 0x01, 1,    2,    3, 1,        /* release 1.00, strings, one configuration */
};

static const uint8_t report_desc[] = {
    0x05, 0x01, 0x09, 0x02, 0xa1, 0x01, /* Generic Desktop, Mouse, Application */
    0x09, 0x01, 0xa1, 0x00,             /* Pointer, Physical */
    0x05, 0x09, 0x19, 0x01, 0x29, 0x03, /* Buttons 1-3 */
    0x15, 0x00, 0x25, 0x01, 0x95, 0x03, 0x75, 0x01, 0x81, 0x02, /* 3 x 1 bit, Data Var Abs */
    0x95, 0x01, 0x75, 0x05, 0x81, 0x01,                         /* 5 bits padding */
    0x05, 0x01, 0x09, 0x30, 0x09, 0x31,                         /* X, Y */
    0x15, 0x00, 0x26, 0xff, 0x7f, 0x35, 0x00, 0x46, 0xff, 0x7f, /* 0..0x7fff */
    0x75, 0x10, 0x95, 0x02, 0x81, 0x02,                         /* 2 x 16 bits, Abs */
    0x09, 0x38, 0x15, 0x81, 0x25, 0x7f, 0x35, 0x00, 0x45, 0x00, /* Wheel -127..127 */
    0x75, 0x08, 0x95, 0x01, 0x81, 0x06,                         /* 8 bits, Rel */
    0xc0, 0xc0,
};

#define CONFIG_LEN 34
static const uint8_t config_desc[CONFIG_LEN] = {
    9,  2,    CONFIG_LEN, 0,    1,          1, 0,    0xa0,
    50, /* one interface, remote wakeup, 100 mA */
    9,  4,    0,          0,    1,          3, 1,    2,
    0, /* interface 0: HID, boot subclass, mouse */
    9,  0x21, 0x11,       0x01, 0,          1, 0x22, sizeof(report_desc),
    0,                                             /* HID 1.11 */
    7,  5,    0x81,       3,    TABLET_MPS, 0, 10, /* EP 1 IN interrupt, 10 ms */
};

static const char *const strings[] = {NULL, "khyve", "khyve USB tablet", "1"};

static unsigned put_desc(uint8_t *data, unsigned max, const uint8_t *desc, unsigned len)
{
	unsigned n = len < max ? len : max;

	memcpy(data, desc, n);
	return n;
}

static int string_desc(unsigned idx, uint8_t *data, unsigned max)
{
	uint8_t buf[64];
	unsigned len;

	if (idx == 0) {
		const uint8_t lang[4] = {4, 3, 0x09, 0x04};

		return (int)put_desc(data, max, lang, 4);
	}
	if (idx >= sizeof(strings) / sizeof(strings[0]))
		return USB_STALL;
	len = 2;
	for (const char *s = strings[idx]; *s && len + 2 <= sizeof(buf); s++) {
		buf[len++] = (uint8_t)*s;
		buf[len++] = 0;
	}
	buf[0] = (uint8_t)len;
	buf[1] = 3;
	return (int)put_desc(data, max, buf, len);
}

static void encode(const struct tablet_report *r, uint8_t *out)
{
	out[0] = r->buttons;
	out[1] = (uint8_t)r->x;
	out[2] = (uint8_t)(r->x >> 8);
	out[3] = (uint8_t)r->y;
	out[4] = (uint8_t)(r->y >> 8);
	out[5] = (uint8_t)r->wheel;
}

static int boot_target(uint16_t v)
{
	return (int)(((uint32_t)v * BOOT_MAX + HID_MAX / 2) / HID_MAX);
}

static int step_towards(int from, int to)
{
	int d = to - from;

	return d > BOOT_STEP ? BOOT_STEP : d < -BOOT_STEP ? -BOOT_STEP : d;
}

/*
 * The next boot report towards `r` (HID 1.11 appendix B.2); true when it
 * reaches r's position, false when more steps are needed.  The wheel goes
 * with the first step only.
 */
static bool encode_boot(struct tablet *t, struct tablet_report *r, uint8_t *out)
{
	int tx = boot_target(r->x), ty = boot_target(r->y);
	int dx = step_towards(t->boot_x, tx), dy = step_towards(t->boot_y, ty);

	out[0] = r->buttons;
	out[1] = (uint8_t)(int8_t)dx;
	out[2] = (uint8_t)(int8_t)dy;
	out[3] = (uint8_t)r->wheel;
	r->wheel = 0;
	t->boot_x += dx;
	t->boot_y += dy;
	return t->boot_x == tx && t->boot_y == ty;
}

static int get_descriptor(struct tablet *t, const struct usb_setup *s, uint8_t *data)
{
	unsigned type = s->wValue >> 8, idx = s->wValue & 0xff;

	(void)t;
	switch (type) {
	case 1:
		return (int)put_desc(data, s->wLength, dev_desc, sizeof(dev_desc));
	case 2:
		return (int)put_desc(data, s->wLength, config_desc, CONFIG_LEN);
	case 3:
		return string_desc(idx, data, s->wLength);
	case 0x21:
		return (int)put_desc(data, s->wLength, config_desc + 18, 9);
	case 0x22:
		return (int)put_desc(data, s->wLength, report_desc, sizeof(report_desc));
	default: /* device qualifier and others: a full-speed-only device stalls */
		return USB_STALL;
	}
}

static int standard_request(struct tablet *t, const struct usb_setup *s, uint8_t *data)
{
	switch (s->bRequest) {
	case 0: /* GET_STATUS */
		if (s->wLength < 2)
			return USB_STALL;
		data[0] = data[1] = 0;
		return 2;
	case 1: /* CLEAR_FEATURE */
	case 3: /* SET_FEATURE */
	case 5: /* SET_ADDRESS */
		return 0;
	case 6:
		return get_descriptor(t, s, data);
	case 8: /* GET_CONFIGURATION */
		if (s->wLength < 1)
			return USB_STALL;
		data[0] = t->config;
		return 1;
	case 9: /* SET_CONFIGURATION */
		if ((s->wValue & 0xff) > 1)
			return USB_STALL;
		t->config = (uint8_t)s->wValue;
		return 0;
	case 10: /* GET_INTERFACE */
		if (s->wLength < 1)
			return USB_STALL;
		data[0] = 0;
		return 1;
	case 11: /* SET_INTERFACE: only alternate setting 0 */
		return s->wValue == 0 ? 0 : USB_STALL;
	default:
		return USB_STALL;
	}
}

/* HID 1.11 section 7.2. */
static int class_request(struct tablet *t, const struct usb_setup *s, uint8_t *data)
{
	uint8_t rep[TABLET_REPORT];

	switch (s->bRequest) {
	case 0x01: /* GET_REPORT: the current buttons; in boot protocol no motion */
		if (t->protocol == 0) {
			memset(rep, 0, BOOT_REPORT);
			rep[0] = t->cur.buttons;
			return (int)put_desc(data, s->wLength, rep, BOOT_REPORT);
		}
		encode(&t->cur, rep);
		return (int)put_desc(data, s->wLength, rep, TABLET_REPORT);
	case 0x02: /* GET_IDLE */
		if (s->wLength < 1)
			return USB_STALL;
		data[0] = t->idle;
		return 1;
	case 0x03: /* GET_PROTOCOL */
		if (s->wLength < 1)
			return USB_STALL;
		data[0] = t->protocol;
		return 1;
	case 0x09: /* SET_REPORT: no output reports; accepted and ignored */
		return 0;
	case 0x0a: /* SET_IDLE: reports are sent on change only */
		t->idle = (uint8_t)(s->wValue >> 8);
		return 0;
	case 0x0b: /* SET_PROTOCOL: the boot pointer starts at the origin, as its reader's */
		t->protocol = (uint8_t)(s->wValue & 1);
		t->boot_x = t->boot_y = 0;
		return 0;
	default:
		return USB_STALL;
	}
}

static int tablet_control(struct usb_device *d, const struct usb_setup *s, uint8_t *data)
{
	struct tablet *t = d->priv;
	int rc;

	pthread_mutex_lock(&t->lock);
	switch ((s->bmRequestType >> 5) & 3) {
	case 0:
		rc = standard_request(t, s, data);
		break;
	case 1:
		rc = class_request(t, s, data);
		break;
	default:
		rc = USB_STALL;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

static int tablet_transfer(struct usb_device *d, uint8_t epaddr, uint8_t *buf, unsigned len)
{
	struct tablet *t = d->priv;
	uint8_t rep[TABLET_REPORT];
	int rc = USB_NAK;

	if (epaddr != 0x81)
		return USB_STALL;
	pthread_mutex_lock(&t->lock);
	if (t->count > 0) {
		bool done = true;
		unsigned n = TABLET_REPORT;

		if (t->protocol == 0) {
			done = encode_boot(t, &t->q[t->head], rep);
			n = BOOT_REPORT;
		} else {
			encode(&t->q[t->head], rep);
		}
		if (done) {
			t->head = (t->head + 1) % TABLET_QLEN;
			t->count--;
		}
		rc = (int)put_desc(buf, len, rep, n);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

static void tablet_reset(struct usb_device *d)
{
	struct tablet *t = d->priv;

	pthread_mutex_lock(&t->lock);
	t->config = 0;
	t->idle = 0;
	t->protocol = 1; /* report protocol */
	t->boot_x = t->boot_y = 0;
	t->count = 0;
	pthread_mutex_unlock(&t->lock);
}

/* ---- saved state: config, idle, protocol, the report queue, buttons and
 * the boot-protocol position ---- */

#define TABLET_STATE_VERSION 1

static void put_report(struct sbuf *out, const struct tablet_report *r)
{
	sbuf_put_u8(out, r->buttons);
	sbuf_put_u16(out, r->x);
	sbuf_put_u16(out, r->y);
	sbuf_put_u8(out, (uint8_t)r->wheel);
}

static void get_report(struct sbuf_reader *in, struct tablet_report *r)
{
	r->buttons = sbuf_get_u8(in);
	r->x = sbuf_get_u16(in);
	r->y = sbuf_get_u16(in);
	r->wheel = (int8_t)sbuf_get_u8(in);
	if (!in->failed && (r->buttons > 7 || r->x > HID_MAX || r->y > HID_MAX))
		sbuf_fail(in, "tablet: report (buttons 0x%x, %u,%u) out of range", r->buttons, r->x,
		          r->y);
}

static void tablet_save(struct usb_device *d, struct sbuf *out)
{
	struct tablet *t = d->priv;

	sbuf_put_u16(out, TABLET_STATE_VERSION);
	pthread_mutex_lock(&t->lock);
	sbuf_put_u8(out, t->config);
	sbuf_put_u8(out, t->idle);
	sbuf_put_u8(out, t->protocol);
	sbuf_put_u8(out, t->rfb_buttons);
	sbuf_put_u16(out, (uint16_t)t->boot_x);
	sbuf_put_u16(out, (uint16_t)t->boot_y);
	put_report(out, &t->cur);
	sbuf_put_u8(out, (uint8_t)t->count);
	for (unsigned i = 0; i < t->count; i++) /* oldest first */
		put_report(out, &t->q[(t->head + i) % TABLET_QLEN]);
	pthread_mutex_unlock(&t->lock);
}

static int tablet_restore(struct usb_device *d, struct sbuf_reader *in)
{
	struct tablet *t = d->priv;
	struct tablet_report q[TABLET_QLEN], cur;
	uint8_t config, idle, protocol, rfb_buttons, count;
	uint16_t bx, by;

	if (sbuf_get_version(in, TABLET_STATE_VERSION) == 0)
		return -1;
	config = sbuf_get_u8(in);
	idle = sbuf_get_u8(in);
	protocol = sbuf_get_u8(in);
	rfb_buttons = sbuf_get_u8(in);
	bx = sbuf_get_u16(in);
	by = sbuf_get_u16(in);
	get_report(in, &cur);
	count = sbuf_get_u8(in);
	if (!in->failed && (config > 1 || protocol > 1 || bx > BOOT_MAX || by > BOOT_MAX))
		sbuf_fail(in, "tablet: config %u, protocol %u or boot position %u,%u out of range",
		          config, protocol, bx, by);
	if (!in->failed && count > TABLET_QLEN)
		sbuf_fail(in, "tablet: %u reports queued > %u", count, TABLET_QLEN);
	for (unsigned i = 0; i < count && !in->failed; i++)
		get_report(in, &q[i]);
	if (in->failed)
		return -1;
	pthread_mutex_lock(&t->lock);
	t->config = config;
	t->idle = idle;
	t->protocol = protocol;
	t->rfb_buttons = rfb_buttons;
	t->boot_x = bx;
	t->boot_y = by;
	t->cur = cur;
	memcpy(t->q, q, count * sizeof(q[0]));
	t->head = 0;
	t->count = count;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static const struct usb_device_ops tablet_ops = {
    .control = tablet_control,
    .transfer = tablet_transfer,
    .reset = tablet_reset,
    .save = tablet_save,
    .restore = tablet_restore,
};

static uint16_t scale(uint32_t v, uint32_t size)
{
	if (size <= 1)
		return 0;
	if (v >= size)
		v = size - 1;
	return (uint16_t)(((uint64_t)v * HID_MAX) / (size - 1));
}

/* Queue a report; a move with unchanged buttons replaces a move still queued. */
static void enqueue(struct tablet *t, const struct tablet_report *r)
{
	struct tablet_report *last;

	if (t->count > 0) {
		last = &t->q[(t->head + t->count - 1) % TABLET_QLEN];
		if (last->buttons == r->buttons && last->wheel == 0 && r->wheel == 0) {
			*last = *r;
			return;
		}
	}
	if (t->count == TABLET_QLEN) { /* the guest is not reading: drop the oldest */
		t->head = (t->head + 1) % TABLET_QLEN;
		t->count--;
	}
	t->q[(t->head + t->count) % TABLET_QLEN] = *r;
	t->count++;
}

/* console_ptr_fn: RFB buttons (bit 0 left, 1 middle, 2 right, 3/4 wheel). */
static void tablet_pointer(void *arg, uint8_t buttons, uint32_t x, uint32_t y, uint32_t width,
                           uint32_t height)
{
	struct tablet *t = arg;
	struct tablet_report r;
	uint8_t pressed;
	bool configured;

	pthread_mutex_lock(&t->lock);
	pressed = buttons & ~t->rfb_buttons;
	t->rfb_buttons = buttons;
	r.buttons = (uint8_t)((buttons & 1) | ((buttons >> 1) & 2) | ((buttons << 1) & 4));
	r.x = scale(x, width);
	r.y = scale(y, height);
	r.wheel = (int8_t)((pressed & 8 ? 1 : 0) - (pressed & 16 ? 1 : 0));
	configured = t->config != 0;
	if (configured)
		enqueue(t, &r);
	t->cur = r;
	t->cur.wheel = 0;
	pthread_mutex_unlock(&t->lock);
	if (configured && t->dev.wakeup != NULL)
		t->dev.wakeup(&t->dev, 0x81);
}

struct usb_device *usb_tablet_create(char *err, size_t errlen)
{
	struct tablet *t = calloc(1, sizeof(*t));

	if (t == NULL) {
		snprintf(err, errlen, "tablet: out of memory");
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->dev.ops = &tablet_ops;
	t->dev.speed = USB_SPEED_FULL;
	t->dev.priv = t;
	t->protocol = 1;
	if (console_register_ptr(tablet_pointer, t) < 0) {
		snprintf(err, errlen, "tablet: too many pointer devices");
		free(t);
		return NULL;
	}
	return &t->dev;
}
