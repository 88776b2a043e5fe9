/*
 * A USB HID tablet (USB 2.0 chapter 9, HID 1.11): a full-speed device with
 * one interface (class HID, no boot protocol) and an interrupt IN endpoint
 * 0x81 giving 6-byte reports: buttons (left, right, middle), X and Y
 * absolute in 0..0x7FFF, and a relative wheel.  Pointer events come from
 * the console (backend/console.h) on the VNC thread; reports wait in a
 * short queue, consecutive moves with the same buttons coalesced.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/console.h"
#include "dev/usb.h"

#define TABLET_QLEN   16
#define TABLET_REPORT 6
#define TABLET_MPS    8
#define HID_MAX       0x7fff

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
	uint8_t config, idle, protocol;
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
    9,  4,    0,          0,    1,          3, 0,    0,
    0, /* interface 0: HID, no boot subclass */
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
	case 0x01: /* GET_REPORT */
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
	case 0x0b: /* SET_PROTOCOL */
		t->protocol = (uint8_t)(s->wValue & 1);
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
		encode(&t->q[t->head], rep);
		t->head = (t->head + 1) % TABLET_QLEN;
		t->count--;
		rc = (int)put_desc(buf, len, rep, TABLET_REPORT);
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
	t->count = 0;
	pthread_mutex_unlock(&t->lock);
}

static const struct usb_device_ops tablet_ops = {
    .control = tablet_control,
    .transfer = tablet_transfer,
    .reset = tablet_reset,
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
