/*
 * An xHCI host controller (eXtensible Host Controller Interface 1.2; the
 * registers report version 1.0, whose mandatory set is what is here) with
 * USB devices on its root ports, after bhyve's -s N,xhci,DEVICE[,DEVICE]:
 * `tablet` is the USB HID tablet (dev/usb_tablet.c).
 *
 * BAR 0 (64-bit MMIO, 16 KiB): capability registers at 0, operational at
 * 0x40 (ports at 0x440), Supported Protocol capabilities at 0x800 (ports
 * 1-2 USB 2.0, 3-4 USB 3.0), runtime registers at 0x1000 (one
 * interrupter), doorbells at 0x2000.  BAR 4 holds the MSI-X table; MSI and
 * INTx are the fallbacks.  32-byte contexts, 64-bit addressing.
 *
 * Threads: everything runs in the vCPU thread that writes a register or
 * doorbell, under `lock`; a device with new IN data (the tablet, on the VNC
 * thread) calls wakeup, which takes `lock` and retries the endpoint.  Every
 * guest structure (TRB, context, DCBAA entry, ERST entry) is copied out of
 * guest RAM through gmem_read() and checked before use; every ring walk is
 * bounded per doorbell (XHCI_TRB_BUDGET).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/pci.h"
#include "core/machine.h"
#include "dev/usb.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/sbuf.h"

#define XHCI_BAR_SIZE    0x4000u
#define XHCI_MSIX_BAR    4
#define XHCI_MAX_SLOTS   8
#define XHCI_NPORTS      4 /* 1-2 USB 2.0, 3-4 USB 3.0 */
#define XHCI_NPORTS_USB2 2
#define XHCI_ERST_MAX    16
#define XHCI_TRB_BUDGET  256 /* TRBs (Link TRBs included) per doorbell */
#define XHCI_XFER_MAX    4096

#define CAP_LEN          0x40
#define OP_BASE          0x40
#define PORT_BASE        (OP_BASE + 0x400)
#define XECP_BASE        0x800
#define RT_BASE          0x1000
#define IR0_BASE         (RT_BASE + 0x20)
#define DB_BASE          0x2000

/* Operational registers (section 5.4), offsets from OP_BASE. */
#define OP_USBCMD 0x00
#define OP_USBSTS 0x04
#define OP_PAGESZ 0x08
#define OP_DNCTRL 0x14
#define OP_CRCR   0x18
#define OP_DCBAAP 0x30
#define OP_CONFIG 0x38

#define CMD_RS    (1u << 0)
#define CMD_HCRST (1u << 1)
#define CMD_INTE  (1u << 2)
#define CMD_HSEE  (1u << 3)
#define STS_HCH   (1u << 0)
#define STS_HSE   (1u << 2)
#define STS_EINT  (1u << 3)
#define STS_PCD   (1u << 4)
#define STS_CNR   (1u << 11)
#define CRCR_RCS  (1u << 0)
#define CRCR_CS   (1u << 1)
#define CRCR_CA   (1u << 2)
#define CRCR_CRR  (1u << 3)

/* PORTSC (section 5.4.8). */
#define PS_CCS         (1u << 0)
#define PS_PED         (1u << 1)
#define PS_PR          (1u << 4)
#define PS_PLS_SHIFT   5
#define PS_PLS_MASK    (0xfu << 5)
#define PS_PP          (1u << 9)
#define PS_SPEED_SHIFT 10
#define PS_LWS         (1u << 16)
#define PS_CSC         (1u << 17)
#define PS_PEC         (1u << 18)
#define PS_WRC         (1u << 19)
#define PS_OCC         (1u << 20)
#define PS_PRC         (1u << 21)
#define PS_PLC         (1u << 22)
#define PS_CEC         (1u << 23)
#define PS_CHANGES     (PS_CSC | PS_PEC | PS_WRC | PS_OCC | PS_PRC | PS_PLC | PS_CEC)
#define PS_WAKE        (7u << 25)
#define PS_WPR         (1u << 31)
#define PLS_U0         0
#define PLS_U3         3
#define PLS_RXDETECT   5
#define PLS_POLLING    7
#define PLS_RESUME     15

/* Interrupter registers (section 5.5.2). */
#define IMAN_IP  (1u << 0)
#define IMAN_IE  (1u << 1)
#define ERDP_EHB (1u << 3)

/* TRB types (section 6.4.6). */
enum {
	TRB_NORMAL = 1,
	TRB_SETUP = 2,
	TRB_DATA = 3,
	TRB_STATUS = 4,
	TRB_LINK = 6,
	TRB_EVENT_DATA = 7,
	TRB_NOOP = 8,
	CMD_ENABLE_SLOT = 9,
	CMD_DISABLE_SLOT = 10,
	CMD_ADDRESS_DEV = 11,
	CMD_CONFIG_EP = 12,
	CMD_EVAL_CTX = 13,
	CMD_RESET_EP = 14,
	CMD_STOP_EP = 15,
	CMD_SET_TR_DEQ = 16,
	CMD_RESET_DEV = 17,
	CMD_NOOP = 23,
	EV_TRANSFER = 32,
	EV_CMD_COMPLETE = 33,
	EV_PORT_STATUS = 34,
	EV_HOST_CTRL = 37,
};

#define TRB_C       (1u << 0)
#define TRB_TC      (1u << 1) /* Link: toggle cycle */
#define TRB_ENT     (1u << 1)
#define TRB_ISP     (1u << 2)
#define TRB_CH      (1u << 4)
#define TRB_IOC     (1u << 5)
#define TRB_IDT     (1u << 6)
#define TRB_BEI     (1u << 9)
#define TRB_BSR     (1u << 9) /* Address Device */
#define TRB_DC      (1u << 9) /* Configure Endpoint */
#define TRB_DIR_IN  (1u << 16)
#define TRB_TYPE(c) (((c) >> 10) & 0x3f)
#define TRB_SLOT(c) (((c) >> 24) & 0xff)
#define TRB_EP(c)   (((c) >> 16) & 0x1f)

/* Completion codes (section 6.4.5). */
enum {
	CC_SUCCESS = 1,
	CC_DATA_BUFFER = 2,
	CC_TRANSACTION = 4,
	CC_TRB = 5,
	CC_STALL = 6,
	CC_NO_SLOTS = 9,
	CC_SLOT_NOT_ENABLED = 11,
	CC_EP_NOT_ENABLED = 12,
	CC_SHORT_PACKET = 13,
	CC_PARAMETER = 17,
	CC_CONTEXT_STATE = 19,
	CC_EVENT_RING_FULL = 21,
	CC_CMD_RING_STOPPED = 24,
};

/* Slot and endpoint states (sections 6.2.2, 6.2.3). */
enum { SLOT_ENABLED = 0, SLOT_DEFAULT = 1, SLOT_ADDRESSED = 2, SLOT_CONFIGURED = 3 };
enum { EP_DISABLED = 0, EP_RUNNING = 1, EP_HALTED = 2, EP_STOPPED = 3, EP_ERROR = 4 };
#define EPT_CONTROL 4

#define CTX_SIZE    32

struct trb {
	uint64_t param;
	uint32_t status;
	uint32_t control;
};
_Static_assert(sizeof(struct trb) == 16, "TRB is 16 bytes");

struct ring {
	uint64_t deq; /* guest-physical, 16-byte aligned */
	bool ccs;     /* consumer cycle state */
};

/* A control transfer between its Setup and Status stages. */
struct ctl_xfer {
	bool active;
	bool deferred; /* host-to-device with data: run at the Status stage */
	int result;    /* bytes of `buf` for IN, or USB_STALL */
	unsigned off;  /* bytes moved by Data stages so far */
	struct usb_setup setup;
	uint8_t buf[XHCI_XFER_MAX];
};

struct xhci_ep {
	uint8_t state, type;
	uint16_t mps;
	struct ring ring;
	bool nak; /* an IN TD waits for device data */
	uint32_t edtla;
};

struct xhci_slot {
	bool enabled;
	uint8_t state, addr;
	unsigned port;
	uint64_t ctx; /* output device context, guest-physical */
	struct xhci_ep ep[32];
	struct ctl_xfer *ctl;
};

struct xhci_port {
	struct usb_device *dev;
	uint32_t portsc, pmsc, li, hlpmc;
};

struct xhci {
	pthread_mutex_t lock;
	struct pci_func *f;
	struct guest_mem *mem;
	uint32_t usbcmd, usbsts, dnctrl, config;
	uint64_t crcr_ptr, crcr_pending, dcbaap;
	struct ring cmd;
	bool crr;
	bool crcr_low_written; /* since the ring last ran */
	struct {
		uint32_t iman, imod, erstsz;
		uint64_t erstba, erdp;
		bool ehb, valid, full, intx;
		struct {
			uint64_t base;
			uint32_t size;
		} seg[XHCI_ERST_MAX];
		unsigned nseg, seg_idx;
		uint32_t enq;
		bool pcs;
	} ir;
	struct xhci_port port[XHCI_NPORTS];
	struct xhci_slot slot[XHCI_MAX_SLOTS + 1];
	bool quiesced; /* a checkpoint runs: device wakeups wait (endpoints stay nak) */
};

static struct ratelimit xhci_rl = RATELIMIT_INIT;
#define guest_warn(...) log_ratelimited(&xhci_rl, LOG_WARN, "xhci: " __VA_ARGS__)

static bool port_is_usb3(unsigned p)
{
	return p > XHCI_NPORTS_USB2; /* 1-based */
}

/* ---- guest memory ---- */

static bool read_trb(struct xhci *x, uint64_t gpa, struct trb *t)
{
	return (gpa & 15) == 0 && gmem_read(x->mem, gpa, t, sizeof(*t)) == 0;
}

static bool read_ctx(struct xhci *x, uint64_t gpa, uint32_t ctx[8])
{
	return gpa != 0 && gmem_read(x->mem, gpa, ctx, CTX_SIZE) == 0;
}

static bool write_ctx(struct xhci *x, uint64_t gpa, const uint32_t ctx[8])
{
	return gpa != 0 && gmem_write(x->mem, gpa, ctx, CTX_SIZE) == 0;
}

/* Host System Error (section 4.10.2.6): stop and tell the guest. */
static void host_system_error(struct xhci *x, const char *why)
{
	guest_warn("host system error: %s", why);
	x->usbsts |= STS_HSE | STS_HCH;
	x->usbcmd &= ~CMD_RS;
	x->crr = false;
}

static bool running(const struct xhci *x)
{
	return !(x->usbsts & STS_HCH);
}

/* ---- event ring and interrupter 0 (sections 4.9.4, 4.17) ---- */

static void intx_update(struct xhci *x)
{
	bool level = (x->ir.iman & IMAN_IP) && (x->ir.iman & IMAN_IE) && (x->usbcmd & CMD_INTE);

	if (pci_msix_enabled(x->f) || pci_msi_enabled(x->f))
		level = false;
	if (level != x->ir.intx) {
		x->ir.intx = level;
		if (level)
			pci_intx_assert(x->f);
		else
			pci_intx_deassert(x->f);
	}
}

static uint64_t enq_gpa(const struct xhci *x)
{
	return x->ir.seg[x->ir.seg_idx].base + 16ull * x->ir.enq;
}

static bool ring_empty(const struct xhci *x)
{
	return !x->ir.valid || (x->ir.erdp & ~15ull) == enq_gpa(x);
}

/* Raise the interrupt unless the handler is still busy (EHB). */
static void maybe_interrupt(struct xhci *x)
{
	if (x->ir.ehb || ring_empty(x))
		return;
	x->ir.iman |= IMAN_IP;
	x->ir.ehb = true;
	x->usbsts |= STS_EINT;
	if (!(x->ir.iman & IMAN_IE) || !(x->usbcmd & CMD_INTE))
		return;
	if (pci_msix_enabled(x->f) || pci_msi_enabled(x->f)) {
		x->ir.iman &= ~IMAN_IP; /* cleared when the message is sent (5.5.2.1) */
		pci_interrupt(x->f, 0);
	}
	intx_update(x);
}

static void erst_load(struct xhci *x)
{
	uint32_t e[4];

	x->ir.valid = false;
	x->ir.full = false;
	x->ir.nseg = 0;
	if (x->ir.erstsz == 0 || x->ir.erstsz > XHCI_ERST_MAX || (x->ir.erstba & 63)) {
		guest_warn("bad event ring segment table (size %u at 0x%llx)", x->ir.erstsz,
		           (unsigned long long)x->ir.erstba);
		return;
	}
	for (unsigned i = 0; i < x->ir.erstsz; i++) {
		if (gmem_read(x->mem, x->ir.erstba + 16ull * i, e, sizeof(e)) < 0)
			return;
		x->ir.seg[i].base = ((uint64_t)e[1] << 32 | e[0]) & ~63ull;
		x->ir.seg[i].size = e[2] & 0xffff;
		if (x->ir.seg[i].size < 16 || x->ir.seg[i].size > 4096 ||
		    gmem_ptr(x->mem, x->ir.seg[i].base, 16ull * x->ir.seg[i].size, true) == NULL) {
			guest_warn("event ring segment %u (0x%llx, %u TRBs) is not guest RAM", i,
			           (unsigned long long)x->ir.seg[i].base, x->ir.seg[i].size);
			return;
		}
	}
	x->ir.nseg = x->ir.erstsz;
	x->ir.seg_idx = 0;
	x->ir.enq = 0;
	x->ir.pcs = true;
	x->ir.valid = true;
}

static void advance_enq(struct xhci *x)
{
	if (++x->ir.enq < x->ir.seg[x->ir.seg_idx].size)
		return;
	x->ir.enq = 0;
	if (++x->ir.seg_idx == x->ir.nseg) {
		x->ir.seg_idx = 0;
		x->ir.pcs = !x->ir.pcs;
	}
}

/* Whether the TRB `ahead` places after the enqueue pointer is the one
 * the guest reads next (ERDP). */
static bool dequeue_ahead(struct xhci *x, unsigned ahead)
{
	unsigned idx = x->ir.seg_idx, enq = x->ir.enq;

	for (unsigned i = 0; i < ahead; i++) {
		if (++enq == x->ir.seg[idx].size) {
			enq = 0;
			idx = (idx + 1) % x->ir.nseg;
		}
	}
	return x->ir.seg[idx].base + 16ull * enq == (x->ir.erdp & ~15ull);
}

/*
 * Post one event.  One TRB always stays free, so that a full ring (enqueue
 * right behind ERDP) differs from an empty one (enqueue at ERDP); the last
 * usable TRB gets an Event Ring Full Error and further events are dropped
 * until the guest moves ERDP on (section 4.9.4).
 */
static void put_event(struct xhci *x, struct trb ev, bool interrupt)
{
	if (!running(x))
		return;
	if (!x->ir.valid) {
		host_system_error(x, "event posted without a valid event ring");
		return;
	}
	if (x->ir.full && dequeue_ahead(x, 1))
		return;
	x->ir.full = false;
	if (dequeue_ahead(x, 2)) {
		ev = (struct trb){0, (uint32_t)CC_EVENT_RING_FULL << 24, EV_HOST_CTRL << 10};
		x->ir.full = true;
		guest_warn("event ring full");
	}
	ev.control = (ev.control & ~TRB_C) | (x->ir.pcs ? TRB_C : 0);
	if (gmem_write(x->mem, enq_gpa(x), &ev, sizeof(ev)) < 0) {
		host_system_error(x, "event ring is not guest RAM");
		return;
	}
	advance_enq(x);
	if (interrupt)
		maybe_interrupt(x);
}

static void cmd_complete(struct xhci *x, uint64_t trb_gpa, unsigned cc, unsigned slot)
{
	put_event(
	    x,
	    (struct trb){trb_gpa, (uint32_t)cc << 24, (uint32_t)slot << 24 | EV_CMD_COMPLETE << 10},
	    true);
}

static void xfer_event(struct xhci *x, unsigned slot, unsigned dci, uint64_t ptr, unsigned cc,
                       uint32_t residual, bool ed, bool bei)
{
	put_event(x,
	          (struct trb){ptr, (uint32_t)cc << 24 | (residual & 0xffffff),
	                       (uint32_t)slot << 24 | (uint32_t)dci << 16 | EV_TRANSFER << 10 |
	                           (ed ? 4u : 0)},
	          !bei);
}

/* ---- ports (section 4.19) ---- */

static void port_change(struct xhci *x, unsigned p, uint32_t bits)
{
	struct xhci_port *pt = &x->port[p - 1];

	if ((pt->portsc & bits) == bits)
		return;
	pt->portsc |= bits;
	if (running(x)) {
		x->usbsts |= STS_PCD;
		put_event(x,
		          (struct trb){(uint64_t)p << 24, CC_SUCCESS << 24, EV_PORT_STATUS << 10},
		          true);
	}
}

static void port_init(struct xhci *x, unsigned p)
{
	struct xhci_port *pt = &x->port[p - 1];

	pt->pmsc = pt->li = pt->hlpmc = 0;
	pt->portsc = PS_PP;
	if (pt->dev != NULL)
		pt->portsc |= PS_CCS | PS_CSC | (uint32_t)PLS_POLLING << PS_PLS_SHIFT |
		              pt->dev->speed << PS_SPEED_SHIFT;
	else
		pt->portsc |= (uint32_t)PLS_RXDETECT << PS_PLS_SHIFT;
}

static void port_reset(struct xhci *x, unsigned p, bool warm)
{
	struct xhci_port *pt = &x->port[p - 1];

	pt->portsc &= ~(PS_PR | PS_WPR);
	if (pt->dev != NULL) {
		pt->dev->ops->reset(pt->dev);
		pt->portsc =
		    (pt->portsc & ~PS_PLS_MASK) | PS_PED | (uint32_t)PLS_U0 << PS_PLS_SHIFT;
	}
	port_change(x, p, PS_PRC | (warm && port_is_usb3(p) ? PS_WRC : 0));
}

static void portsc_write(struct xhci *x, unsigned p, uint32_t v)
{
	struct xhci_port *pt = &x->port[p - 1];
	unsigned pls = (v & PS_PLS_MASK) >> PS_PLS_SHIFT;

	pt->portsc &= ~(v & PS_CHANGES);
	if (v & PS_PED)
		pt->portsc &= ~PS_PED;
	pt->portsc = (pt->portsc & ~PS_WAKE) | (v & PS_WAKE);
	if ((v & PS_LWS) && (pt->portsc & PS_PED)) {
		if (pls == PLS_RESUME ||
		    (pls == PLS_U0 && ((pt->portsc & PS_PLS_MASK) >> PS_PLS_SHIFT) == PLS_U3)) {
			pt->portsc = (pt->portsc & ~PS_PLS_MASK) | (uint32_t)PLS_U0 << PS_PLS_SHIFT;
			port_change(x, p, PS_PLC);
		} else if (pls == PLS_U0 || pls == PLS_U3) {
			pt->portsc = (pt->portsc & ~PS_PLS_MASK) | pls << PS_PLS_SHIFT;
		}
	}
	if (v & (PS_PR | PS_WPR))
		port_reset(x, p, (v & PS_WPR) != 0);
}

/* ---- contexts ---- */

static struct xhci_slot *get_slot(struct xhci *x, unsigned id)
{
	if (id == 0 || id > XHCI_MAX_SLOTS || id > (x->config & 0xff) || !x->slot[id].enabled)
		return NULL;
	return &x->slot[id];
}

static struct usb_device *slot_dev(struct xhci *x, struct xhci_slot *s)
{
	return s->port >= 1 && s->port <= XHCI_NPORTS ? x->port[s->port - 1].dev : NULL;
}

/* Write the endpoint's state and dequeue pointer to its output context. */
static void ep_writeback(struct xhci *x, struct xhci_slot *s, unsigned dci)
{
	struct xhci_ep *ep = &s->ep[dci];
	uint32_t c[8];
	uint64_t gpa = s->ctx + CTX_SIZE * dci;

	if (!read_ctx(x, gpa, c)) {
		guest_warn("output context 0x%llx is not guest RAM", (unsigned long long)gpa);
		return;
	}
	c[0] = (c[0] & ~7u) | ep->state;
	c[2] = (uint32_t)(ep->ring.deq & ~15ull) | (ep->ring.ccs ? 1u : 0);
	c[3] = (uint32_t)(ep->ring.deq >> 32);
	(void)write_ctx(x, gpa, c);
}

static void slot_writeback(struct xhci *x, struct xhci_slot *s, int entries)
{
	uint32_t c[8];

	if (!read_ctx(x, s->ctx, c))
		return;
	c[3] = (uint32_t)s->state << 27 | s->addr;
	if (entries > 0)
		c[0] = (c[0] & ~(0x1fu << 27)) | (uint32_t)entries << 27;
	(void)write_ctx(x, s->ctx, c);
}

static void ep_set_ring(struct xhci_ep *ep, const uint32_t c[8])
{
	ep->ring.deq = ((uint64_t)c[3] << 32 | c[2]) & ~15ull;
	ep->ring.ccs = c[2] & 1;
	ep->type = (c[1] >> 3) & 7;
	ep->mps = (uint16_t)(c[1] >> 16);
	ep->nak = false;
	ep->edtla = 0;
}

static bool ep_ctx_valid(struct xhci *x, const uint32_t c[8])
{
	uint64_t deq = ((uint64_t)c[3] << 32 | c[2]) & ~15ull;

	return ((c[1] >> 3) & 7) != 0 && (c[1] >> 16) != 0 && deq != 0 &&
	       gmem_ptr(x->mem, deq, 16, false) != NULL;
}

/* ---- commands (section 4.6) ---- */

static unsigned cmd_enable_slot(struct xhci *x, unsigned *slot)
{
	for (unsigned i = 1; i <= XHCI_MAX_SLOTS && i <= (x->config & 0xff); i++) {
		if (!x->slot[i].enabled) {
			struct ctl_xfer *ctl = x->slot[i].ctl;

			memset(&x->slot[i], 0, sizeof(x->slot[i]));
			x->slot[i].ctl = ctl;
			x->slot[i].enabled = true;
			*slot = i;
			return CC_SUCCESS;
		}
	}
	return CC_NO_SLOTS;
}

static unsigned cmd_address_device(struct xhci *x, struct xhci_slot *s, unsigned id,
                                   const struct trb *t)
{
	uint32_t icc[8], sc[8], ep0[8];
	uint64_t in = t->param & ~15ull, out;
	bool bsr = t->control & TRB_BSR;
	unsigned port;
	struct usb_device *dev;

	if (s->state != SLOT_ENABLED && !(s->state == SLOT_DEFAULT && !bsr))
		return CC_CONTEXT_STATE;
	if (!read_ctx(x, in, icc) || !read_ctx(x, in + CTX_SIZE, sc) ||
	    !read_ctx(x, in + 2 * CTX_SIZE, ep0))
		return CC_PARAMETER;
	if ((icc[1] & 3) != 3 || ((ep0[1] >> 3) & 7) != EPT_CONTROL || !ep_ctx_valid(x, ep0))
		return CC_PARAMETER;
	if (gmem_read(x->mem, x->dcbaap + 8ull * id, &out, 8) < 0 || (out & 63) || out == 0 ||
	    gmem_ptr(x->mem, out, 32ull * CTX_SIZE, true) == NULL)
		return CC_PARAMETER;
	port = (sc[1] >> 16) & 0xff;
	if (port < 1 || port > XHCI_NPORTS)
		return CC_TRB;
	dev = x->port[port - 1].dev;
	if (dev == NULL || !(x->port[port - 1].portsc & PS_PED))
		return CC_TRANSACTION;
	s->ctx = out;
	s->port = port;
	if (bsr) {
		s->state = SLOT_DEFAULT;
		s->addr = 0;
	} else {
		struct usb_setup set_addr = {0, 5, (uint16_t)id, 0, 0};

		s->state = SLOT_ADDRESSED;
		s->addr = (uint8_t)id;
		(void)dev->ops->control(dev, &set_addr, NULL);
	}
	sc[3] = (uint32_t)s->state << 27 | s->addr;
	ep0[0] = (ep0[0] & ~7u) | EP_RUNNING;
	if (!write_ctx(x, out, sc) || !write_ctx(x, out + CTX_SIZE, ep0))
		return CC_PARAMETER;
	ep_set_ring(&s->ep[1], ep0);
	s->ep[1].state = EP_RUNNING;
	if (s->ctl != NULL)
		s->ctl->active = false;
	return CC_SUCCESS;
}

static void disable_eps(struct xhci *x, struct xhci_slot *s)
{
	for (unsigned dci = 2; dci < 32; dci++) {
		if (s->ep[dci].state != EP_DISABLED) {
			s->ep[dci].state = EP_DISABLED;
			ep_writeback(x, s, dci);
		}
	}
}

static unsigned cmd_configure_ep(struct xhci *x, struct xhci_slot *s, const struct trb *t)
{
	uint32_t icc[8], c[8];
	uint64_t in = t->param & ~15ull;
	bool any = false;

	if (s->state != SLOT_ADDRESSED && s->state != SLOT_CONFIGURED)
		return CC_CONTEXT_STATE;
	if (t->control & TRB_DC) {
		disable_eps(x, s);
		s->state = SLOT_ADDRESSED;
		slot_writeback(x, s, 1);
		return CC_SUCCESS;
	}
	if (!read_ctx(x, in, icc))
		return CC_PARAMETER;
	for (unsigned dci = 2; dci < 32; dci++) /* validate everything first */
		if ((icc[1] & (1u << dci)) &&
		    (!read_ctx(x, in + CTX_SIZE * (dci + 1), c) || !ep_ctx_valid(x, c)))
			return CC_PARAMETER;
	for (unsigned dci = 2; dci < 32; dci++) {
		if ((icc[0] & (1u << dci)) && s->ep[dci].state != EP_DISABLED) {
			s->ep[dci].state = EP_DISABLED;
			ep_writeback(x, s, dci);
		}
		if (icc[1] & (1u << dci)) {
			if (!read_ctx(x, in + CTX_SIZE * (dci + 1), c))
				return CC_PARAMETER;
			c[0] = (c[0] & ~7u) | EP_RUNNING;
			(void)write_ctx(x, s->ctx + CTX_SIZE * dci, c);
			ep_set_ring(&s->ep[dci], c);
			s->ep[dci].state = EP_RUNNING;
		}
	}
	for (unsigned dci = 2; dci < 32; dci++)
		any = any || s->ep[dci].state != EP_DISABLED;
	s->state = any ? SLOT_CONFIGURED : SLOT_ADDRESSED;
	if ((icc[1] & 1) && read_ctx(x, in + CTX_SIZE, c))
		slot_writeback(x, s, (int)(c[0] >> 27));
	else
		slot_writeback(x, s, 0);
	return CC_SUCCESS;
}

static unsigned cmd_evaluate_ctx(struct xhci *x, struct xhci_slot *s, const struct trb *t)
{
	uint32_t icc[8], in_c[8], out_c[8];
	uint64_t in = t->param & ~15ull;

	if (s->state == SLOT_ENABLED)
		return CC_CONTEXT_STATE;
	if (!read_ctx(x, in, icc))
		return CC_PARAMETER;
	if ((icc[1] & 1) && read_ctx(x, in + CTX_SIZE, in_c) && read_ctx(x, s->ctx, out_c)) {
		out_c[1] = (out_c[1] & ~0xffffu) | (in_c[1] & 0xffff); /* max exit latency */
		out_c[2] = (out_c[2] & 0x003fffffu) | (in_c[2] & 0xffc00000u); /* interrupter */
		(void)write_ctx(x, s->ctx, out_c);
	}
	if ((icc[1] & 2) && read_ctx(x, in + 2 * CTX_SIZE, in_c) &&
	    read_ctx(x, s->ctx + CTX_SIZE, out_c)) {
		out_c[1] = (out_c[1] & 0xffffu) | (in_c[1] & 0xffff0000u);
		s->ep[1].mps = (uint16_t)(in_c[1] >> 16);
		(void)write_ctx(x, s->ctx + CTX_SIZE, out_c);
	}
	return CC_SUCCESS;
}

/* The endpoint a command names, or NULL with *cc set. */
static struct xhci_ep *cmd_ep(struct xhci_slot *s, const struct trb *t, unsigned *cc)
{
	unsigned dci = TRB_EP(t->control);

	if (dci == 0) {
		*cc = CC_TRB;
		return NULL;
	}
	if (s->ep[dci].state == EP_DISABLED) {
		*cc = CC_EP_NOT_ENABLED;
		return NULL;
	}
	return &s->ep[dci];
}

static unsigned cmd_endpoint(struct xhci *x, struct xhci_slot *s, unsigned type,
                             const struct trb *t)
{
	unsigned cc = CC_SUCCESS, dci = TRB_EP(t->control);
	struct xhci_ep *ep = cmd_ep(s, t, &cc);
	uint64_t deq = t->param & ~15ull;

	if (ep == NULL)
		return cc;
	switch (type) {
	case CMD_RESET_EP:
		if (ep->state != EP_HALTED)
			return CC_CONTEXT_STATE;
		ep->state = EP_STOPPED;
		break;
	case CMD_STOP_EP:
		if (ep->state != EP_RUNNING)
			return CC_CONTEXT_STATE;
		ep->state = EP_STOPPED;
		break;
	case CMD_SET_TR_DEQ:
		if (ep->state != EP_STOPPED && ep->state != EP_ERROR)
			return CC_CONTEXT_STATE;
		if (deq == 0 || gmem_ptr(x->mem, deq, 16, false) == NULL)
			return CC_PARAMETER;
		ep->ring.deq = deq;
		ep->ring.ccs = t->param & 1;
		ep->nak = false;
		ep->edtla = 0;
		if (dci == 1 && s->ctl != NULL)
			s->ctl->active = false;
		break;
	}
	ep_writeback(x, s, dci);
	return CC_SUCCESS;
}

static unsigned cmd_reset_device(struct xhci *x, struct xhci_slot *s)
{
	if (s->state == SLOT_ENABLED)
		return CC_CONTEXT_STATE;
	disable_eps(x, s);
	s->state = SLOT_DEFAULT;
	s->addr = 0;
	slot_writeback(x, s, 1);
	return CC_SUCCESS;
}

static void run_command(struct xhci *x, const struct trb *t, uint64_t gpa)
{
	unsigned type = TRB_TYPE(t->control), id = TRB_SLOT(t->control), cc;
	struct xhci_slot *s = NULL;

	if (type == CMD_ENABLE_SLOT) {
		id = 0;
		cc = cmd_enable_slot(x, &id);
		cmd_complete(x, gpa, cc, id);
		return;
	}
	if (type == CMD_NOOP) {
		cmd_complete(x, gpa, CC_SUCCESS, 0);
		return;
	}
	if (type < CMD_DISABLE_SLOT || type > CMD_RESET_DEV) {
		cmd_complete(x, gpa, CC_TRB, 0);
		return;
	}
	s = get_slot(x, id);
	if (s == NULL) {
		cmd_complete(x, gpa, CC_SLOT_NOT_ENABLED, id);
		return;
	}
	switch (type) {
	case CMD_DISABLE_SLOT:
		s->enabled = false;
		cc = CC_SUCCESS;
		break;
	case CMD_ADDRESS_DEV:
		cc = cmd_address_device(x, s, id, t);
		break;
	case CMD_CONFIG_EP:
		cc = cmd_configure_ep(x, s, t);
		break;
	case CMD_EVAL_CTX:
		cc = cmd_evaluate_ctx(x, s, t);
		break;
	case CMD_RESET_DEV:
		cc = cmd_reset_device(x, s);
		break;
	default:
		cc = cmd_endpoint(x, s, type, t);
		break;
	}
	cmd_complete(x, gpa, cc, id);
}

/*
 * The next TRB the consumer owns on `r`, following Link TRBs; false when
 * the ring is empty (cycle bit), the budget ran out, or the TRB is not in
 * guest RAM (*bad).
 */
static bool ring_next(struct xhci *x, struct ring *r, struct trb *t, unsigned *budget, bool *bad)
{
	*bad = false;
	while (*budget > 0) {
		(*budget)--;
		if (!read_trb(x, r->deq, t)) {
			*bad = true;
			return false;
		}
		if ((t->control & TRB_C) != (r->ccs ? 1u : 0))
			return false;
		if (TRB_TYPE(t->control) != TRB_LINK)
			return true;
		if (t->control & TRB_TC)
			r->ccs = !r->ccs;
		r->deq = t->param & ~15ull;
	}
	return false;
}

static void ring_commands(struct xhci *x)
{
	unsigned budget = XHCI_TRB_BUDGET;
	struct trb t;
	bool bad;

	x->crr = true;
	x->crcr_low_written = false;
	while (running(x) && ring_next(x, &x->cmd, &t, &budget, &bad)) {
		uint64_t gpa = x->cmd.deq;

		x->cmd.deq += 16;
		run_command(x, &t, gpa);
	}
	if (bad)
		host_system_error(x, "command ring is not guest RAM");
}

/* ---- transfers (section 4.11) ---- */

static bool xfer_copy(struct xhci *x, const struct trb *t, uint8_t *buf, unsigned len, bool in)
{
	if (len == 0)
		return true;
	if (t->control & TRB_IDT) { /* immediate data: at most 8 bytes in the TRB */
		if (len > 8 || in)
			return false;
		memcpy(buf, &t->param, len);
		return true;
	}
	return in ? gmem_write(x->mem, t->param, buf, len) == 0
	          : gmem_read(x->mem, t->param, buf, len) == 0;
}

static void ep_halt(struct xhci *x, unsigned id, unsigned dci, uint64_t ptr, unsigned cc)
{
	struct xhci_slot *s = &x->slot[id];

	s->ep[dci].state = EP_HALTED;
	if (dci == 1 && s->ctl != NULL)
		s->ctl->active = false;
	ep_writeback(x, s, dci);
	xfer_event(x, id, dci, ptr, cc, 0, false, false);
}

/* One TRB of a control transfer; false when the endpoint halted. */
static bool control_trb(struct xhci *x, unsigned id, struct usb_device *dev, const struct trb *t,
                        uint64_t gpa)
{
	struct xhci_slot *s = &x->slot[id];
	struct ctl_xfer *c = s->ctl;
	unsigned type = TRB_TYPE(t->control), len = t->status & 0x1ffff, n;
	bool in = c->setup.bmRequestType & 0x80;

	if (type == TRB_SETUP) {
		if (!(t->control & TRB_IDT) || (t->status & 0x1ffff) != 8) {
			ep_halt(x, id, 1, gpa, CC_TRB);
			return false;
		}
		memset(c, 0, offsetof(struct ctl_xfer, buf));
		memcpy(&c->setup, &t->param, 8);
		c->active = true;
		if (c->setup.wLength > XHCI_XFER_MAX) {
			ep_halt(x, id, 1, gpa, CC_STALL);
			return false;
		}
		in = c->setup.bmRequestType & 0x80;
		c->deferred = !in && c->setup.wLength > 0;
		if (!c->deferred)
			c->result = dev->ops->control(dev, &c->setup, c->buf);
		if (c->result == USB_STALL || c->result == USB_NAK) {
			ep_halt(x, id, 1, gpa, CC_STALL);
			return false;
		}
		if (t->control & TRB_IOC)
			xfer_event(x, id, 1, gpa, CC_SUCCESS, 0, false, false);
		return true;
	}
	if (!c->active) {
		ep_halt(x, id, 1, gpa, CC_TRB);
		return false;
	}
	if (type == TRB_DATA || type == TRB_NORMAL) {
		unsigned avail = in ? (unsigned)c->result - c->off : c->setup.wLength - c->off;

		n = len < avail ? len : avail;
		if (!xfer_copy(x, t, c->buf + c->off, n, in)) {
			ep_halt(x, id, 1, gpa, CC_DATA_BUFFER);
			return false;
		}
		c->off += n;
		s->ep[1].edtla += n;
		if (n < len && (t->control & (TRB_ISP | TRB_IOC)))
			xfer_event(x, id, 1, gpa, CC_SHORT_PACKET, len - n, false, false);
		else if (t->control & TRB_IOC)
			xfer_event(x, id, 1, gpa, CC_SUCCESS, 0, false, false);
		return true;
	}
	if (type == TRB_EVENT_DATA) {
		if (t->control & TRB_IOC)
			xfer_event(x, id, 1, t->param, CC_SUCCESS, s->ep[1].edtla, true, false);
		s->ep[1].edtla = 0;
		return true;
	}
	if (type == TRB_STATUS) {
		if (c->deferred && dev->ops->control(dev, &c->setup, c->buf) < 0) {
			ep_halt(x, id, 1, gpa, CC_STALL);
			return false;
		}
		c->active = false;
		s->ep[1].edtla = 0;
		if (t->control & TRB_IOC)
			xfer_event(x, id, 1, gpa, CC_SUCCESS, 0, false, false);
		return true;
	}
	ep_halt(x, id, 1, gpa, CC_TRB);
	return false;
}

/*
 * A TD of Normal TRBs on a non-control endpoint starting at the ring's
 * dequeue pointer.  Returns 1 when done (dequeue advanced past it), 0 when
 * the device NAKed or the TD is not complete yet (dequeue unchanged), -1
 * when the endpoint halted.
 */
static int normal_td(struct xhci *x, unsigned id, unsigned dci, struct usb_device *dev,
                     unsigned *budget)
{
	struct xhci_ep *ep = &x->slot[id].ep[dci];
	uint8_t buf[XHCI_XFER_MAX];
	uint8_t epaddr = (uint8_t)(dci / 2 | (dci & 1 ? 0x80 : 0));
	struct ring r = ep->ring;
	struct trb t;
	bool bad, in = dci & 1, more = true, shorted = false;
	int got = 0;
	unsigned off = 0, edtla = 0;

	if (in) {
		unsigned want = ep->mps && ep->mps < XHCI_XFER_MAX ? ep->mps : XHCI_XFER_MAX;

		/* Look before asking the device, so no data is lost on an
		 * empty ring. */
		if (!ring_next(x, &r, &t, budget, &bad))
			goto empty;
		got = dev->ops->transfer(dev, epaddr, buf, want);
		if (got == USB_NAK) {
			ep->nak = true;
			ep->ring = r; /* Link TRBs before the TD are consumed */
			return 0;
		}
		if (got == USB_STALL) {
			ep->ring = r;
			ep_halt(x, id, dci, r.deq, CC_STALL);
			return -1;
		}
		r = ep->ring;
	}
	while (more) {
		uint64_t gpa;
		unsigned len, n;

		if (!ring_next(x, &r, &t, budget, &bad))
			goto empty;
		gpa = r.deq;
		r.deq += 16;
		more = t.control & TRB_CH;
		if (TRB_TYPE(t.control) == TRB_EVENT_DATA) {
			if (t.control & TRB_IOC)
				xfer_event(x, id, dci, t.param, CC_SUCCESS, edtla, true,
				           t.control & TRB_BEI);
			continue;
		}
		if (TRB_TYPE(t.control) != TRB_NORMAL) {
			ep->ring = r;
			ep_halt(x, id, dci, gpa, CC_TRB);
			return -1;
		}
		len = t.status & 0x1ffff;
		if (in) {
			n = shorted ? 0 : ((unsigned)got - off < len ? (unsigned)got - off : len);
		} else {
			n = len <= XHCI_XFER_MAX - off ? len : 0;
			if (n < len) {
				ep->ring = r;
				ep_halt(x, id, dci, gpa, CC_TRB);
				return -1;
			}
		}
		if (!xfer_copy(x, &t, buf + off, n, in)) {
			ep->ring = r;
			ep_halt(x, id, dci, gpa, CC_DATA_BUFFER);
			return -1;
		}
		off += n;
		edtla += n;
		if (shorted)
			continue;
		if (in && n < len) {
			shorted = true;
			if (t.control & (TRB_ISP | TRB_IOC))
				xfer_event(x, id, dci, gpa, CC_SHORT_PACKET, len - n, false,
				           t.control & TRB_BEI);
		} else if (t.control & TRB_IOC) {
			xfer_event(x, id, dci, gpa, CC_SUCCESS, 0, false, t.control & TRB_BEI);
		}
	}
	ep->ring = r;
	if (!in && dev->ops->transfer(dev, epaddr, buf, off) == USB_STALL) {
		ep_halt(x, id, dci, r.deq, CC_STALL);
		return -1;
	}
	return 1;
empty:
	if (bad) {
		guest_warn("slot %u endpoint %u: transfer ring 0x%llx is not guest RAM", id, dci,
		           (unsigned long long)r.deq);
		ep_halt(x, id, dci, r.deq, CC_TRB);
		return -1;
	}
	if (in && got > 0) /* data taken from the device but the TD ended early */
		guest_warn("slot %u endpoint %u: incomplete TD, data dropped", id, dci);
	return 0;
}

static void ep_run(struct xhci *x, unsigned id, unsigned dci)
{
	struct xhci_slot *s = &x->slot[id];
	struct xhci_ep *ep = &s->ep[dci];
	struct usb_device *dev = slot_dev(x, s);
	unsigned budget = XHCI_TRB_BUDGET;

	if (!running(x) || dev == NULL)
		return;
	if (ep->state == EP_STOPPED)
		ep->state = EP_RUNNING; /* a doorbell restarts a stopped endpoint */
	if (ep->state != EP_RUNNING)
		return;
	ep->nak = false;
	if (dci == 1) {
		struct trb t;
		bool bad;

		if (s->ctl == NULL && (s->ctl = calloc(1, sizeof(*s->ctl))) == NULL)
			return;
		while (ring_next(x, &ep->ring, &t, &budget, &bad)) {
			uint64_t gpa = ep->ring.deq;

			if (!control_trb(x, id, dev, &t, gpa))
				return;
			ep->ring.deq += 16;
		}
		if (bad) {
			guest_warn("slot %u: control ring 0x%llx is not guest RAM", id,
			           (unsigned long long)ep->ring.deq);
			ep_halt(x, id, 1, ep->ring.deq, CC_TRB);
		}
		return;
	}
	while (budget > 0 && normal_td(x, id, dci, dev, &budget) == 1)
		;
}

static void doorbell(struct xhci *x, unsigned db, uint32_t v)
{
	unsigned target = v & 0xff;

	if (!running(x))
		return;
	if (db == 0) {
		if (target == 0)
			ring_commands(x);
		return;
	}
	if (get_slot(x, db) == NULL || target < 1 || target > 31 ||
	    x->slot[db].ep[target].state == EP_DISABLED) {
		guest_warn("doorbell %u target %u: no such endpoint", db, target);
		return;
	}
	ep_run(x, db, target);
}

/* usb_device.wakeup: an IN endpoint that NAKed has data. */
static void xhci_wakeup(struct usb_device *d, uint8_t epaddr)
{
	struct xhci *x = d->hc;
	unsigned dci = (epaddr & 0xf) * 2 + (epaddr & 0x80 ? 1 : 0);

	if (dci < 2 || dci > 31)
		return;
	pthread_mutex_lock(&x->lock);
	for (unsigned id = 1; id <= XHCI_MAX_SLOTS && !x->quiesced; id++) {
		struct xhci_slot *s = &x->slot[id];

		if (s->enabled && s->port == d->port && s->ep[dci].state == EP_RUNNING &&
		    s->ep[dci].nak)
			ep_run(x, id, dci);
	}
	pthread_mutex_unlock(&x->lock);
}

/* Run every endpoint that waits for device data (after a checkpoint or a
 * restore: a wakeup may have come meanwhile).  `lock` held. */
static void retry_naks(struct xhci *x)
{
	for (unsigned id = 1; id <= XHCI_MAX_SLOTS; id++)
		for (unsigned dci = 2; dci < 32; dci++)
			if (x->slot[id].enabled && x->slot[id].ep[dci].state == EP_RUNNING &&
			    x->slot[id].ep[dci].nak)
				ep_run(x, id, dci);
}

/* ---- registers ---- */

static void controller_reset(struct xhci *x)
{
	for (unsigned i = 1; i <= XHCI_MAX_SLOTS; i++) {
		struct ctl_xfer *ctl = x->slot[i].ctl;

		memset(&x->slot[i], 0, sizeof(x->slot[i]));
		x->slot[i].ctl = ctl;
	}
	x->usbcmd = 0;
	x->usbsts = STS_HCH;
	x->dnctrl = x->config = 0;
	x->crcr_ptr = x->crcr_pending = x->dcbaap = 0;
	x->cmd = (struct ring){0, false};
	x->crr = x->crcr_low_written = false;
	memset(&x->ir, 0, sizeof(x->ir));
	pci_intx_deassert(x->f);
	for (unsigned p = 1; p <= XHCI_NPORTS; p++) {
		if (x->port[p - 1].dev != NULL)
			x->port[p - 1].dev->ops->reset(x->port[p - 1].dev);
		port_init(x, p);
	}
}

static void usbcmd_write(struct xhci *x, uint32_t v)
{
	if (v & CMD_HCRST) {
		controller_reset(x);
		return;
	}
	x->usbcmd = v & 0x3f0d; /* R/S, INTE, HSEE, CSS, CRS, EWE, EU3S, ... */
	if (v & CMD_RS) {
		if (!(x->usbsts & STS_HSE))
			x->usbsts &= ~STS_HCH;
	} else {
		x->usbsts |= STS_HCH;
		x->crr = false;
	}
	intx_update(x);
}

/*
 * CRCR (section 5.4.5): while the ring runs only CS and CA act; while it
 * is stopped a low-dword write (without CS/CA) sets the dequeue pointer
 * and RCS, and the high-dword write that follows completes it.  A bare
 * high-dword write (the second half of an abort) leaves the pointer alone.
 */
static void crcr_write(struct xhci *x, unsigned half, uint32_t v)
{
	if (half == 0 && (v & (CRCR_CS | CRCR_CA))) {
		if (x->crr) {
			x->crr = false;
			cmd_complete(x, x->cmd.deq, CC_CMD_RING_STOPPED, 0);
		}
		return;
	}
	if (x->crr)
		return;
	if (half == 0) {
		x->crcr_pending = (x->crcr_pending & ~0xffffffffull) | (v & ~63u);
		x->cmd.deq = x->crcr_pending;
		x->cmd.ccs = v & CRCR_RCS;
		x->crcr_low_written = true;
	} else {
		x->crcr_pending = (x->crcr_pending & 0xffffffffull) | (uint64_t)v << 32;
		if (x->crcr_low_written)
			x->cmd.deq = x->crcr_pending;
	}
}

static uint32_t op_read(struct xhci *x, unsigned off)
{
	if (off >= 0x400) {
		unsigned p = (off - 0x400) / 16 + 1;

		if (p > XHCI_NPORTS)
			return 0;
		switch (off & 15) {
		case 0:
			return x->port[p - 1].portsc;
		case 4:
			return x->port[p - 1].pmsc;
		case 8:
			return x->port[p - 1].li;
		default:
			return x->port[p - 1].hlpmc;
		}
	}
	switch (off) {
	case OP_USBCMD:
		return x->usbcmd;
	case OP_USBSTS:
		return x->usbsts;
	case OP_PAGESZ:
		return 1; /* 4 KiB pages */
	case OP_DNCTRL:
		return x->dnctrl;
	case OP_CRCR:
		return x->crr ? CRCR_CRR : 0;
	case OP_DCBAAP:
		return (uint32_t)x->dcbaap;
	case OP_DCBAAP + 4:
		return (uint32_t)(x->dcbaap >> 32);
	case OP_CONFIG:
		return x->config;
	default:
		return 0;
	}
}

static void op_write(struct xhci *x, unsigned off, uint32_t v)
{
	if (off >= 0x400) {
		unsigned p = (off - 0x400) / 16 + 1;

		if (p > XHCI_NPORTS)
			return;
		if ((off & 15) == 0)
			portsc_write(x, p, v);
		else if ((off & 15) == 4)
			x->port[p - 1].pmsc = v;
		else if ((off & 15) == 12)
			x->port[p - 1].hlpmc = v;
		return;
	}
	switch (off) {
	case OP_USBCMD:
		usbcmd_write(x, v);
		break;
	case OP_USBSTS:
		x->usbsts &= ~(v & (STS_HSE | STS_EINT | STS_PCD | (1u << 10)));
		break;
	case OP_DNCTRL:
		x->dnctrl = v & 0xffff;
		break;
	case OP_CRCR:
	case OP_CRCR + 4:
		crcr_write(x, (off - OP_CRCR) / 4, v);
		break;
	case OP_DCBAAP:
		x->dcbaap = (x->dcbaap & ~0xffffffffull) | (v & ~63u);
		break;
	case OP_DCBAAP + 4:
		x->dcbaap = (x->dcbaap & 0xffffffffull) | (uint64_t)v << 32;
		break;
	case OP_CONFIG:
		x->config = (v & 0xff) <= XHCI_MAX_SLOTS ? v & 0x3ff : XHCI_MAX_SLOTS;
		break;
	}
}

static uint32_t cap_read(unsigned off)
{
	switch (off) {
	case 0x00:
		return CAP_LEN | 0x0100u << 16; /* CAPLENGTH, HCIVERSION 1.0 */
	case 0x04:
		return XHCI_MAX_SLOTS | 1u << 8 | (uint32_t)XHCI_NPORTS << 24; /* HCSPARAMS1 */
	case 0x08:
		return 4u << 4; /* HCSPARAMS2: ERST Max 2^4, no scratchpads */
	case 0x0c:
		return 0; /* HCSPARAMS3 */
	case 0x10:        /* HCCPARAMS1: AC64, NSS, xECP */
		return 1u | 1u << 7 | (uint32_t)(XECP_BASE / 4) << 16;
	case 0x14:
		return DB_BASE;
	case 0x18:
		return RT_BASE;
	default:
		return 0;
	}
}

/* Supported Protocol capabilities (section 7.2): USB 2.0 then USB 3.0. */
static uint32_t xecp_read(unsigned off)
{
	static const uint32_t caps[8] = {
	    0x02000402u,
	    0x20425355u,
	    1u | XHCI_NPORTS_USB2 << 8,
	    0,
	    0x03000002u,
	    0x20425355u,
	    (XHCI_NPORTS_USB2 + 1) | (XHCI_NPORTS - XHCI_NPORTS_USB2) << 8,
	    0,
	};

	return off / 4 < 8 ? caps[off / 4] : 0;
}

static uint32_t rt_read(struct xhci *x, unsigned off)
{
	switch (off) {
	case 0x00:
		return (uint32_t)(monotonic_ns() / 125000) & 0x3fff; /* MFINDEX */
	case 0x20:
		return x->ir.iman;
	case 0x24:
		return x->ir.imod;
	case 0x28:
		return x->ir.erstsz;
	case 0x30:
		return (uint32_t)x->ir.erstba;
	case 0x34:
		return (uint32_t)(x->ir.erstba >> 32);
	case 0x38:
		return (uint32_t)(x->ir.erdp & ~15ull) | (x->ir.ehb ? ERDP_EHB : 0);
	case 0x3c:
		return (uint32_t)(x->ir.erdp >> 32);
	default:
		return 0;
	}
}

static void rt_write(struct xhci *x, unsigned off, uint32_t v)
{
	switch (off) {
	case 0x20:
		x->ir.iman = (x->ir.iman & ~(v & IMAN_IP) & ~IMAN_IE) | (v & IMAN_IE);
		intx_update(x);
		break;
	case 0x24:
		x->ir.imod = v;
		break;
	case 0x28:
		x->ir.erstsz = v & 0xffff;
		break;
	case 0x30:
	case 0x34:
		if (off == 0x30)
			x->ir.erstba = (x->ir.erstba & ~0xffffffffull) | (v & ~63u);
		else
			x->ir.erstba = (x->ir.erstba & 0xffffffffull) | (uint64_t)v << 32;
		erst_load(x);
		break;
	case 0x38:
		x->ir.erdp = (x->ir.erdp & ~0xffffffffull) | (v & ~15u);
		if (v & ERDP_EHB)
			x->ir.ehb = false;
		maybe_interrupt(x);
		break;
	case 0x3c:
		x->ir.erdp = (x->ir.erdp & 0xffffffffull) | (uint64_t)v << 32;
		maybe_interrupt(x);
		break;
	}
}

static uint32_t reg_read32(struct xhci *x, unsigned off)
{
	if (off < CAP_LEN)
		return cap_read(off);
	if (off >= OP_BASE && off < XECP_BASE)
		return op_read(x, off - OP_BASE);
	if (off >= XECP_BASE && off < RT_BASE)
		return xecp_read(off - XECP_BASE);
	if (off >= RT_BASE && off < DB_BASE)
		return rt_read(x, off - RT_BASE);
	return 0; /* doorbells read as 0 */
}

static void reg_write32(struct xhci *x, unsigned off, uint32_t v)
{
	if (off >= OP_BASE && off < XECP_BASE)
		op_write(x, off - OP_BASE, v);
	else if (off >= RT_BASE && off < DB_BASE)
		rt_write(x, off - RT_BASE, v);
	else if (off >= DB_BASE && off < DB_BASE + 4 * (XHCI_MAX_SLOTS + 1))
		doorbell(x, (off - DB_BASE) / 4, v);
}

static uint64_t xhci_bar_read(struct pci_func *f, int bar, uint64_t offset, unsigned size)
{
	struct xhci *x = f->softc;
	unsigned off = (unsigned)(offset & ~3ull);
	uint64_t v;

	if (bar != 0 || offset >= XHCI_BAR_SIZE)
		return ~0ull;
	pthread_mutex_lock(&x->lock);
	v = reg_read32(x, off) | (uint64_t)reg_read32(x, off + 4) << 32;
	pthread_mutex_unlock(&x->lock);
	v >>= 8 * (offset & 3);
	return size >= 8 ? v : v & ((1ull << (8 * size)) - 1);
}

static void xhci_bar_write(struct pci_func *f, int bar, uint64_t offset, unsigned size,
                           uint64_t val)
{
	struct xhci *x = f->softc;

	if (bar != 0 || offset >= XHCI_BAR_SIZE)
		return;
	if ((offset & 3) || (size != 4 && size != 8)) {
		guest_warn("register write at 0x%llx size %u ignored", (unsigned long long)offset,
		           size);
		return;
	}
	pthread_mutex_lock(&x->lock);
	reg_write32(x, (unsigned)offset, (uint32_t)val);
	if (size == 8)
		reg_write32(x, (unsigned)offset + 4, (uint32_t)(val >> 32));
	pthread_mutex_unlock(&x->lock);
}

/* ---- saved state (docs/design/snapshots.md section 2, "xhci") ---- */

#define XHCI_STATE_VERSION 1

/*
 * Quiesce: every transfer runs to its end inside the register write or
 * wakeup that starts it (under `lock`), so nothing is in flight once the
 * vCPUs are paused.  A control transfer between its Setup and Status
 * stages is state like any other (saved with its data).  Only device
 * wakeups (the tablet, on the VNC thread) could still write guest RAM and
 * post events: they are held until unquiesce, which runs what they woke.
 */
static int xhci_quiesce(struct pci_func *f, char *err, size_t errlen)
{
	struct xhci *x = f->softc;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&x->lock);
	x->quiesced = true;
	pthread_mutex_unlock(&x->lock);
	return 0;
}

static void xhci_unquiesce(struct pci_func *f)
{
	struct xhci *x = f->softc;

	pthread_mutex_lock(&x->lock);
	x->quiesced = false;
	retry_naks(x);
	pthread_mutex_unlock(&x->lock);
}

static void put_ring(struct sbuf *out, const struct ring *r)
{
	sbuf_put_u64(out, r->deq);
	sbuf_put_bool(out, r->ccs);
}

static void get_ring(struct sbuf_reader *in, struct ring *r)
{
	r->deq = sbuf_get_u64(in);
	r->ccs = sbuf_get_bool(in);
}

static void put_interrupter(struct sbuf *out, const struct xhci *x)
{
	sbuf_put_u32(out, x->ir.iman);
	sbuf_put_u32(out, x->ir.imod);
	sbuf_put_u32(out, x->ir.erstsz);
	sbuf_put_u64(out, x->ir.erstba);
	sbuf_put_u64(out, x->ir.erdp);
	sbuf_put_bool(out, x->ir.ehb);
	sbuf_put_bool(out, x->ir.valid);
	sbuf_put_bool(out, x->ir.full);
	sbuf_put_bool(out, x->ir.intx);
	sbuf_put_u32(out, x->ir.nseg);
	for (unsigned i = 0; i < x->ir.nseg; i++) {
		sbuf_put_u64(out, x->ir.seg[i].base);
		sbuf_put_u32(out, x->ir.seg[i].size);
	}
	sbuf_put_u32(out, x->ir.seg_idx);
	sbuf_put_u32(out, x->ir.enq);
	sbuf_put_bool(out, x->ir.pcs);
}

static void put_ctl(struct sbuf *out, const struct ctl_xfer *c)
{
	bool active = c != NULL && c->active;

	sbuf_put_bool(out, active);
	if (!active)
		return;
	sbuf_put_bool(out, c->deferred);
	sbuf_put_u32(out, (uint32_t)c->result);
	sbuf_put_u32(out, c->off);
	sbuf_put_u8(out, c->setup.bmRequestType);
	sbuf_put_u8(out, c->setup.bRequest);
	sbuf_put_u16(out, c->setup.wValue);
	sbuf_put_u16(out, c->setup.wIndex);
	sbuf_put_u16(out, c->setup.wLength);
	sbuf_put_bytes(out, c->buf, c->setup.wLength);
}

static void put_slot(struct sbuf *out, const struct xhci_slot *s)
{
	sbuf_put_bool(out, s->enabled);
	sbuf_put_u8(out, s->state);
	sbuf_put_u8(out, s->addr);
	sbuf_put_u8(out, (uint8_t)s->port);
	sbuf_put_u64(out, s->ctx);
	for (unsigned dci = 1; dci < 32; dci++) {
		const struct xhci_ep *ep = &s->ep[dci];

		sbuf_put_u8(out, ep->state);
		sbuf_put_u8(out, ep->type);
		sbuf_put_u16(out, ep->mps);
		put_ring(out, &ep->ring);
		sbuf_put_bool(out, ep->nak);
		sbuf_put_u32(out, ep->edtla);
	}
	put_ctl(out, s->ctl);
}

/*
 * Version, the operational registers and command ring, interrupter 0 with
 * its event ring position, per port its registers, per slot its state,
 * endpoints (state, ring dequeue pointer and cycle, NAK wait) and a
 * control transfer under way, then each attached device's own state.
 */
static int xhci_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	struct xhci *x = f->softc;

	(void)err;
	(void)errlen;
	sbuf_put_u16(out, XHCI_STATE_VERSION);
	pthread_mutex_lock(&x->lock);
	sbuf_put_u32(out, x->usbcmd);
	sbuf_put_u32(out, x->usbsts);
	sbuf_put_u32(out, x->dnctrl);
	sbuf_put_u32(out, x->config);
	sbuf_put_u64(out, x->crcr_ptr);
	sbuf_put_u64(out, x->crcr_pending);
	sbuf_put_u64(out, x->dcbaap);
	put_ring(out, &x->cmd);
	sbuf_put_bool(out, x->crr);
	sbuf_put_bool(out, x->crcr_low_written);
	put_interrupter(out, x);
	for (unsigned p = 0; p < XHCI_NPORTS; p++) {
		sbuf_put_bool(out, x->port[p].dev != NULL);
		sbuf_put_u32(out, x->port[p].portsc);
		sbuf_put_u32(out, x->port[p].pmsc);
		sbuf_put_u32(out, x->port[p].li);
		sbuf_put_u32(out, x->port[p].hlpmc);
	}
	for (unsigned id = 1; id <= XHCI_MAX_SLOTS; id++)
		put_slot(out, &x->slot[id]);
	for (unsigned p = 0; p < XHCI_NPORTS; p++)
		if (x->port[p].dev != NULL)
			x->port[p].dev->ops->save(x->port[p].dev, out);
	pthread_mutex_unlock(&x->lock);
	return 0;
}

/* What a restore reads, checked before any of it is applied. */
struct xhci_saved {
	struct xhci x;                           /* registers, ports, slots */
	struct ctl_xfer ctl[XHCI_MAX_SLOTS + 1]; /* active ones */
	bool ctl_active[XHCI_MAX_SLOTS + 1];
};

static void get_interrupter(struct sbuf_reader *in, struct xhci *x, const struct guest_mem *mem)
{
	x->ir.iman = sbuf_get_u32(in);
	x->ir.imod = sbuf_get_u32(in);
	x->ir.erstsz = sbuf_get_u32(in);
	x->ir.erstba = sbuf_get_u64(in);
	x->ir.erdp = sbuf_get_u64(in);
	x->ir.ehb = sbuf_get_bool(in);
	x->ir.valid = sbuf_get_bool(in);
	x->ir.full = sbuf_get_bool(in);
	x->ir.intx = sbuf_get_bool(in);
	x->ir.nseg = sbuf_get_u32(in);
	if (x->ir.nseg > XHCI_ERST_MAX) {
		sbuf_fail(in, "%u event ring segments > %u", x->ir.nseg, XHCI_ERST_MAX);
		return;
	}
	for (unsigned i = 0; i < x->ir.nseg; i++) {
		x->ir.seg[i].base = sbuf_get_u64(in);
		x->ir.seg[i].size = sbuf_get_u32(in);
		if (!in->failed && x->ir.valid &&
		    (x->ir.seg[i].size < 16 || x->ir.seg[i].size > 4096 ||
		     (x->ir.seg[i].base & 63) ||
		     gmem_ptr(mem, x->ir.seg[i].base, 16ull * x->ir.seg[i].size, true) == NULL))
			sbuf_fail(in, "event ring segment %u (%u TRBs) is not guest RAM", i,
			          x->ir.seg[i].size);
	}
	x->ir.seg_idx = sbuf_get_u32(in);
	x->ir.enq = sbuf_get_u32(in);
	x->ir.pcs = sbuf_get_bool(in);
	if (in->failed)
		return;
	if (x->ir.erstsz > 0xffff || x->ir.seg_idx >= XHCI_ERST_MAX ||
	    (x->ir.valid && (x->ir.nseg == 0 || x->ir.seg_idx >= x->ir.nseg ||
	                     x->ir.enq >= x->ir.seg[x->ir.seg_idx].size)))
		sbuf_fail(in, "event ring position (segment %u of %u, TRB %u) out of range",
		          x->ir.seg_idx, x->ir.nseg, x->ir.enq);
}

static void get_ctl(struct sbuf_reader *in, struct ctl_xfer *c, bool *active)
{
	bool dir_in;

	*active = sbuf_get_bool(in);
	if (!*active || in->failed)
		return;
	c->active = true;
	c->deferred = sbuf_get_bool(in);
	c->result = (int)sbuf_get_u32(in);
	c->off = sbuf_get_u32(in);
	c->setup.bmRequestType = sbuf_get_u8(in);
	c->setup.bRequest = sbuf_get_u8(in);
	c->setup.wValue = sbuf_get_u16(in);
	c->setup.wIndex = sbuf_get_u16(in);
	c->setup.wLength = sbuf_get_u16(in);
	dir_in = c->setup.bmRequestType & 0x80;
	if (in->failed)
		return;
	if (c->setup.wLength > XHCI_XFER_MAX || c->result < 0 || c->result > c->setup.wLength ||
	    c->off > (dir_in ? (unsigned)c->result : c->setup.wLength) ||
	    c->deferred != (!dir_in && c->setup.wLength > 0)) {
		sbuf_fail(in, "control transfer (wLength %u, result %d, offset %u) out of range",
		          c->setup.wLength, c->result, c->off);
		return;
	}
	sbuf_get_bytes(in, c->buf, c->setup.wLength);
}

static void get_saved_slot(struct sbuf_reader *in, unsigned id, struct xhci_slot *s,
                           struct xhci_saved *sv)
{
	s->enabled = sbuf_get_bool(in);
	s->state = sbuf_get_u8(in);
	s->addr = sbuf_get_u8(in);
	s->port = sbuf_get_u8(in);
	s->ctx = sbuf_get_u64(in);
	if (!in->failed && (s->state > SLOT_CONFIGURED || s->port > XHCI_NPORTS))
		sbuf_fail(in, "slot %u: state %u or port %u out of range", id, s->state, s->port);
	for (unsigned dci = 1; dci < 32 && !in->failed; dci++) {
		struct xhci_ep *ep = &s->ep[dci];

		ep->state = sbuf_get_u8(in);
		ep->type = sbuf_get_u8(in);
		ep->mps = sbuf_get_u16(in);
		get_ring(in, &ep->ring);
		ep->nak = sbuf_get_bool(in);
		ep->edtla = sbuf_get_u32(in);
		if (!in->failed && (ep->state > EP_ERROR || ep->type > 7))
			sbuf_fail(in, "slot %u endpoint %u: state %u or type %u out of range", id,
			          dci, ep->state, ep->type);
	}
	if (!in->failed)
		get_ctl(in, &sv->ctl[id], &sv->ctl_active[id]);
}

static void get_controller(struct sbuf_reader *in, const struct xhci *x, struct xhci_saved *sv)
{
	struct xhci *t = &sv->x;

	t->usbcmd = sbuf_get_u32(in);
	t->usbsts = sbuf_get_u32(in);
	t->dnctrl = sbuf_get_u32(in);
	t->config = sbuf_get_u32(in);
	t->crcr_ptr = sbuf_get_u64(in);
	t->crcr_pending = sbuf_get_u64(in);
	t->dcbaap = sbuf_get_u64(in);
	get_ring(in, &t->cmd);
	t->crr = sbuf_get_bool(in);
	t->crcr_low_written = sbuf_get_bool(in);
	if (!in->failed &&
	    ((t->config & 0xff) > XHCI_MAX_SLOTS || t->config > 0x3ff || (t->usbcmd & ~0x3f0du)))
		sbuf_fail(in, "CONFIG 0x%x or USBCMD 0x%x out of range", t->config, t->usbcmd);
	if (!in->failed && !(t->usbcmd & CMD_RS) && !(t->usbsts & STS_HCH))
		sbuf_fail(in, "USBSTS 0x%x says running, USBCMD 0x%x stopped", t->usbsts,
		          t->usbcmd);
	if (!in->failed)
		get_interrupter(in, t, x->mem);
	for (unsigned p = 0; p < XHCI_NPORTS && !in->failed; p++) {
		bool has = sbuf_get_bool(in);

		t->port[p].portsc = sbuf_get_u32(in);
		t->port[p].pmsc = sbuf_get_u32(in);
		t->port[p].li = sbuf_get_u32(in);
		t->port[p].hlpmc = sbuf_get_u32(in);
		if (!in->failed && has != (x->port[p].dev != NULL))
			sbuf_fail(in, "port %u: saved %s a device, this one has %s", p + 1,
			          has ? "with" : "without", x->port[p].dev ? "one" : "none");
	}
	for (unsigned id = 1; id <= XHCI_MAX_SLOTS && !in->failed; id++)
		get_saved_slot(in, id, &t->slot[id], sv);
}

/* Apply a checked image (`lock` held); the ctl buffers stay the slots'. */
static int apply_saved(struct xhci *x, const struct xhci_saved *sv)
{
	const struct xhci *t = &sv->x;

	x->usbcmd = t->usbcmd;
	x->usbsts = t->usbsts;
	x->dnctrl = t->dnctrl;
	x->config = t->config;
	x->crcr_ptr = t->crcr_ptr;
	x->crcr_pending = t->crcr_pending;
	x->dcbaap = t->dcbaap;
	x->cmd = t->cmd;
	x->crr = t->crr;
	x->crcr_low_written = t->crcr_low_written;
	x->ir = t->ir;
	for (unsigned p = 0; p < XHCI_NPORTS; p++) {
		x->port[p].portsc = t->port[p].portsc;
		x->port[p].pmsc = t->port[p].pmsc;
		x->port[p].li = t->port[p].li;
		x->port[p].hlpmc = t->port[p].hlpmc;
	}
	for (unsigned id = 1; id <= XHCI_MAX_SLOTS; id++) {
		struct ctl_xfer *ctl = x->slot[id].ctl;

		if (sv->ctl_active[id] && ctl == NULL && (ctl = calloc(1, sizeof(*ctl))) == NULL)
			return -1;
		x->slot[id] = t->slot[id];
		x->slot[id].ctl = ctl;
		if (ctl != NULL && sv->ctl_active[id])
			*ctl = sv->ctl[id];
		else if (ctl != NULL)
			ctl->active = false;
	}
	x->quiesced = false;
	intx_update(x); /* from the saved level to what the registers say */
	return 0;
}

static int xhci_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct xhci *x = f->softc;
	struct xhci_saved *sv;
	int rc = -1;

	if (sbuf_get_version(in, XHCI_STATE_VERSION) == 0)
		return -1;
	if ((sv = calloc(1, sizeof(*sv))) == NULL) {
		snprintf(err, errlen, "xhci: out of memory");
		return -1;
	}
	get_controller(in, x, sv);
	for (unsigned p = 0; p < XHCI_NPORTS && !in->failed; p++)
		if (x->port[p].dev != NULL)
			(void)x->port[p].dev->ops->restore(x->port[p].dev, in);
	if (!in->failed) {
		pthread_mutex_lock(&x->lock);
		rc = apply_saved(x, sv);
		if (rc == 0 && running(x))
			retry_naks(x); /* reports queued before the save */
		pthread_mutex_unlock(&x->lock);
		if (rc < 0)
			snprintf(err, errlen, "xhci: out of memory");
	}
	free(sv);
	return rc;
}

/* ---- options and creation ---- */

/* "tablet[,tablet]": bhyve's device list becomes slot.N.device=NAME. */
static int xhci_legacy_config(struct config_node *node, const char *conf, char *err, size_t errlen)
{
	char key[32], item[64];
	unsigned n = 0;

	while (conf != NULL && *conf != '\0') {
		const char *comma = strchr(conf, ',');
		size_t len = comma ? (size_t)(comma - conf) : strlen(conf);

		if (len >= sizeof(item)) {
			snprintf(err, errlen, "xhci: unknown device '%.*s'", 32, conf);
			return -1;
		}
		memcpy(item, conf, len);
		item[len] = '\0';
		conf = comma ? comma + 1 : NULL;
		if (len == 0)
			continue;
		if (strncmp(item, "rom=", 4) == 0) { /* the generic PCI option */
			if (config_node_set(node, "rom", item + 4) < 0) {
				snprintf(err, errlen, "xhci: bad rom option");
				return -1;
			}
			continue;
		}
		if (strcmp(item, "tablet") != 0) {
			snprintf(err, errlen, "xhci: unknown device '%s' (known: tablet)", item);
			return -1;
		}
		snprintf(key, sizeof(key), "slot.%u.device", ++n);
		if (config_node_set(node, key, item) < 0) {
			snprintf(err, errlen, "xhci: cannot record device '%s'", item);
			return -1;
		}
	}
	return 0;
}

static int attach_devices(struct xhci *x, struct config_node *node, char *err, size_t errlen)
{
	struct config_node *slots = NULL;
	unsigned port = 1;

	for (struct config_node *k = config_node_first(node); k; k = config_node_next(k)) {
		const char *name = config_node_name(k);

		if (strcmp(name, "slot") == 0 && config_node_value(k) == NULL)
			slots = k;
		else if (strcmp(name, "device") != 0 && strcmp(name, "rom") != 0) {
			snprintf(err, errlen, "unknown option '%s'", name);
			return -1;
		}
	}
	for (struct config_node *s = slots ? config_node_first(slots) : NULL; s;
	     s = config_node_next(s)) {
		const char *dev = config_node_get(s, "device");
		struct usb_device *d;

		if (dev == NULL || strcmp(dev, "tablet") != 0) {
			snprintf(err, errlen, "unknown device '%s' in slot %s",
			         dev ? dev : "(none)", config_node_name(s));
			return -1;
		}
		if (port > XHCI_NPORTS_USB2) {
			snprintf(err, errlen, "at most %u devices", XHCI_NPORTS_USB2);
			return -1;
		}
		if ((d = usb_tablet_create(err, errlen)) == NULL)
			return -1;
		d->hc = x;
		d->port = port;
		d->wakeup = xhci_wakeup;
		x->port[port - 1].dev = d;
		port++;
	}
	return 0;
}

static int xhci_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                     size_t errlen)
{
	struct xhci *x = calloc(1, sizeof(*x));

	if (x == NULL)
		return -1;
	x->f = f;
	x->mem = &m->vm.mem;
	pthread_mutex_init(&x->lock, NULL);
	/* Before the devices: on an error khyve exits without freeing what was
	 * made, which the function (and so the bus) still refers to. */
	f->softc = x;
	if (attach_devices(x, node, err, errlen) < 0)
		return -1;
	pci_set_ids(f, 0x1b36, 0x000d, 0x0c, 0x03, 0x30, 1); /* QEMU's qemu-xhci, class 0C0330 */
	pci_set_cfg(f, PCIR_SUBVEND, 2, 0x1af4);
	pci_set_cfg(f, PCIR_SUBDEV, 2, 0x1100);
	pci_set_cfg(f, 0x60, 1, 0x30); /* SBRN: USB 3.0 */
	pci_set_cfg(f, 0x61, 1, 0x20); /* FLADJ: the default 60000 bit times */
	f->cap_end = 0x70;             /* capabilities after SBRN/FLADJ */
	if (pci_alloc_bar(f, 0, PCI_BAR_MEM64, XHCI_BAR_SIZE) < 0 || pci_add_msi_cap(f, 1) < 0 ||
	    pci_add_msix_cap(f, 1, XHCI_MSIX_BAR) < 0) {
		snprintf(err, errlen, "no room for the BARs");
		return -1;
	}
	pci_enable_intx(f);
	controller_reset(x);
	return 0;
}

static const char *const xhci_keys[] = {"slot.*.device", NULL};

PCI_DEVEMU(xhci) = {
    .name = "xhci",
    .descr = "xHCI USB controller (USB 2.0 and 3.0 ports) with USB devices",
    .usage = "  -s SLOT,xhci,DEVICE[,DEVICE]\n"
             "  tablet           USB HID tablet: an absolute pointer fed by the VNC pointer\n",
    .keys = xhci_keys,
    .legacy_config = xhci_legacy_config,
    .init = xhci_init,
    .bar_read = xhci_bar_read,
    .bar_write = xhci_bar_write,
    .quiesce = xhci_quiesce,
    .unquiesce = xhci_unquiesce,
    .save = xhci_save,
    .restore = xhci_restore,
};
