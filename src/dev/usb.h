/*
 * The interface between a USB host controller model (dev/xhci.c) and the
 * USB devices behind its root ports (dev/usb_tablet.c), after USB 2.0
 * chapter 9: the controller hands each device its control requests and
 * the data of its other endpoints; the device answers synchronously.
 */
#ifndef KHYVE_USB_H
#define KHYVE_USB_H

#include <stddef.h>
#include <stdint.h>

/* A SETUP packet (USB 2.0 section 9.3), host byte order. */
struct usb_setup {
	uint8_t bmRequestType; /* bit 7: device to host; 6:5 type; 4:0 recipient */
	uint8_t bRequest;
	uint16_t wValue, wIndex, wLength;
};

/* Device speeds, as xHCI's default Protocol Speed IDs (xHCI 1.2 7.2.2.1). */
#define USB_SPEED_FULL 1
#define USB_SPEED_LOW  2
#define USB_SPEED_HIGH 3

/* Returns of the device hooks besides a byte count. */
#define USB_NAK   (-1) /* no data now: the controller keeps the transfer pending */
#define USB_STALL (-2) /* request error / halted endpoint */

struct sbuf;
struct sbuf_reader;
struct usb_device;

struct usb_device_ops {
	/* A control transfer on endpoint 0.  `data` holds wLength bytes: for
	 * a device-to-host request the device fills up to wLength of them and
	 * returns how many; for host-to-device it reads them and returns 0.
	 * USB_STALL for a request it does not support. */
	int (*control)(struct usb_device *d, const struct usb_setup *s, uint8_t *data);
	/* Data on endpoint `epaddr` (number, | 0x80 for IN): IN fills up to
	 * `len` bytes of `buf`, OUT consumes `len`.  Bytes, USB_NAK or
	 * USB_STALL. */
	int (*transfer)(struct usb_device *d, uint8_t epaddr, uint8_t *buf, unsigned len);
	/* A bus reset (port reset): address 0, not configured. */
	void (*reset)(struct usb_device *d);
	/* Saved state (docs/design/snapshots.md section 2), inside the
	 * controller's section: save appends the device's fields (with a u16
	 * version of its own); restore reads them back, checks every value
	 * first (sbuf_fail) and changes nothing when one is out of range.
	 * 0, or -1 with the reader failed. */
	void (*save)(struct usb_device *d, struct sbuf *out);
	int (*restore)(struct usb_device *d, struct sbuf_reader *in);
};

/*
 * One device.  The controller sets `wakeup` and `hc` when it attaches the
 * device; the device calls wakeup (from any thread, holding none of its own
 * locks) when an IN endpoint that answered USB_NAK has data.
 */
struct usb_device {
	const struct usb_device_ops *ops;
	unsigned speed; /* USB_SPEED_* */
	void *priv;     /* the device model's state */
	void (*wakeup)(struct usb_device *d, uint8_t epaddr);
	void *hc;
	unsigned port; /* root port number, 1-based, set by the controller */
};

/* The USB HID tablet (absolute pointer fed by the console's pointer
 * events); NULL with `err` when no console pointer sink is free. */
struct usb_device *usb_tablet_create(char *err, size_t errlen);

#endif
