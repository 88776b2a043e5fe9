/*
 * Unit tests for the xHCI controller (src/dev/xhci.c) and the USB tablet
 * (src/dev/usb_tablet.c), driven through BAR 0 and real rings in fake guest
 * RAM as a driver would: reset, port reset, Enable Slot, Address Device,
 * GET_DESCRIPTOR on EP0, Configure Endpoint, a pointer event completing a
 * pending interrupt TRB -- and malformed input: ring pointers outside RAM,
 * a ring of Link TRBs, bad slot IDs, a zero-size ERST, garbage contexts.
 *
 * No KVM: a detached machine with one RAM region from calloc(); INTx goes
 * to a hook.  Every test starts from a freshly reset and started controller.
 */
#include "unit.h"

#include "backend/console.h"
#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "core/snapshot.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define RAM_GPA   0x100000ull
#define RAM_SIZE  0x100000ull
#define DCBAA     (RAM_GPA + 0x0000)
#define CMDRING   (RAM_GPA + 0x1000)
#define ERST      (RAM_GPA + 0x2000)
#define EVRING    (RAM_GPA + 0x3000)
#define INCTX     (RAM_GPA + 0x4000)
#define OUTCTX    (RAM_GPA + 0x5000)
#define EP0RING   (RAM_GPA + 0x6000)
#define EP1RING   (RAM_GPA + 0x7000)
#define DATA      (RAM_GPA + 0x8000)
#define EV_TRBS   32
#define CMD_TRBS  16

#define OP        0x40
#define PORTSC(p) (OP + 0x400 + 0x10 * ((p)-1))
#define IR0       0x1020
#define DB(n)     (0x2000 + 4 * (n))

#define T(type)   ((uint32_t)(type) << 10) /* a TRB type in the control dword */

struct trb {
	uint64_t param;
	uint32_t status, control;
};

static struct machine m;
static uint8_t *ram;
static uint64_t bar;
static unsigned intx_level;
static unsigned ev_idx, cmd_idx, ep0_idx, ep1_idx;
static bool ev_cycle, cmd_cycle;

static void hook(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	(void)gsi;
	intx_level = level;
}

static uint64_t rd(uint64_t off, unsigned size)
{
	uint64_t v = 0;

	if (!iobus_access(&m.mmio, bar + off, size, false, &v))
		fail_msg("read at 0x%llx unclaimed", (unsigned long long)off);
	return v;
}

static void wr(uint64_t off, unsigned size, uint64_t v)
{
	if (!iobus_access(&m.mmio, bar + off, size, true, &v))
		fail_msg("write at 0x%llx unclaimed", (unsigned long long)off);
}

static uint8_t *hva(uint64_t gpa)
{
	return ram + (gpa - RAM_GPA);
}

static void put_trb(uint64_t gpa, uint64_t param, uint32_t status, uint32_t control)
{
	struct trb t = {param, status, control};

	memcpy(hva(gpa), &t, sizeof(t));
}

static void put32(uint64_t gpa, uint32_t v)
{
	memcpy(hva(gpa), &v, 4);
}

static uint32_t get32(uint64_t gpa)
{
	uint32_t v;

	memcpy(&v, hva(gpa), 4);
	return v;
}

/* The next event, or false when the ring holds none; consumes it. */
static bool next_event(struct trb *t)
{
	memcpy(t, hva(EVRING + 16ull * ev_idx), sizeof(*t));
	if ((t->control & 1) != (ev_cycle ? 1u : 0))
		return false;
	if (++ev_idx == EV_TRBS) {
		ev_idx = 0;
		ev_cycle = !ev_cycle;
	}
	wr(IR0 + 0x18, 8, (EVRING + 16ull * ev_idx) | 8); /* ERDP, clear EHB */
	return true;
}

static unsigned type_of(const struct trb *t)
{
	return (t->control >> 10) & 0x3f;
}

static unsigned cc_of(const struct trb *t)
{
	return t->status >> 24;
}

/* Queue a command and ring doorbell 0. */
static void submit(uint64_t param, uint32_t status, uint32_t control)
{
	put_trb(CMDRING + 16ull * cmd_idx, param, status, control | (cmd_cycle ? 1u : 0));
	if (++cmd_idx == CMD_TRBS - 1) { /* the Link TRB: hand it over, toggle */
		put_trb(CMDRING + 16 * (CMD_TRBS - 1), CMDRING, 0, T(6) | 2 | (cmd_cycle ? 1u : 0));
		cmd_idx = 0;
		cmd_cycle = !cmd_cycle;
	}
	wr(DB(0), 4, 0);
}

/* submit(), then return the command's completion event. */
static struct trb command(uint64_t param, uint32_t status, uint32_t control)
{
	struct trb ev = {0, 0, 0};

	submit(param, status, control);
	while (next_event(&ev) && type_of(&ev) != 33)
		;
	return ev;
}

static void start(void)
{
	memset(ram, 0, RAM_SIZE);
	ev_idx = cmd_idx = ep0_idx = ep1_idx = 0;
	ev_cycle = cmd_cycle = true;
	wr(OP + 0x00, 4, 2); /* HCRST */
	wr(OP + 0x38, 4, 8); /* CONFIG: 8 slots */
	wr(OP + 0x30, 8, DCBAA);
	wr(OP + 0x18, 8, CMDRING | 1);
	put_trb(CMDRING + 16 * (CMD_TRBS - 1), CMDRING, 0, T(6) | 2); /* link, toggle */
	put32(ERST, (uint32_t)EVRING);
	put32(ERST + 8, EV_TRBS);
	wr(IR0 + 0x08, 4, 1);      /* ERSTSZ */
	wr(IR0 + 0x18, 8, EVRING); /* ERDP */
	wr(IR0 + 0x10, 8, ERST);   /* ERSTBA */
	wr(IR0 + 0x00, 4, 2);      /* IMAN.IE */
	wr(OP + 0x00, 4, 1 | 4);   /* R/S, INTE */
}

static int group_setup(void **state)
{
	char err[256] = "";

	(void)state;
	ram = calloc(1, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "unit", ram, RAM_GPA, RAM_SIZE) < 0)
		return -1;
	m.intx_hook = hook;
	console_reset();
	config_reset();
	if (config_set("pci.0.5.0.device", "xhci") < 0 ||
	    config_set("pci.0.5.0.slot.1.device", "tablet") < 0)
		return -1;
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	bar = pci_get(0)->bar[0].addr;
	pci_cfg_write(0, 5, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_BUSMASTER);
	return pci_get(0)->bar[0].mapped ? 0 : -1;
}

static int setup(void **state)
{
	(void)state;
	start();
	return 0;
}

static void test_identity_and_reset(void **state)
{
	(void)state;
	assert_int_equal(pci_cfg_read(0, 5, 0, PCIR_VENDOR, 4), 0x000d1b36);
	assert_int_equal(pci_cfg_read(0, 5, 0, PCIR_REVID, 4) >> 8, 0x0c0330);
	assert_int_equal(pci_cfg_read(0, 5, 0, 0x60, 1), 0x30); /* SBRN */
	assert_int_equal(pci_cfg_read(0, 5, 0, PCIR_CAP_PTR, 1), 0x70);
	assert_int_equal(pci_cfg_read(0, 5, 0, 0x70, 1), PCIY_MSI);
	assert_int_equal(pci_cfg_read(0, 5, 0, pci_cfg_read(0, 5, 0, 0x71, 1), 1), PCIY_MSIX);
	assert_int_equal(rd(0, 1), 0x40);
	assert_int_equal(rd(2, 2), 0x0100);
	assert_int_equal(rd(4, 4) >> 24, 4);        /* ports */
	assert_int_equal(rd(0x10, 4) & 1, 1);       /* AC64 */
	assert_int_equal(rd(0x10, 4) & 4, 0);       /* 32-byte contexts */
	assert_int_equal(rd(0x800, 4), 0x02000402); /* USB 2 protocol, next */
	assert_int_equal(rd(0x810, 4) >> 24, 3);
	wr(OP, 4, 2);
	assert_int_equal(rd(OP + 4, 4) & 0x801, 1);            /* HCH, not CNR */
	assert_int_equal(rd(PORTSC(1), 4) & 0x20203, 0x20201); /* CCS CSC PP, not PED */
	assert_int_equal(rd(PORTSC(3), 4) & 1, 0);
	start();
	assert_int_equal(rd(OP + 4, 4) & 1, 0);
}

static void port_reset(void)
{
	struct trb ev;

	wr(PORTSC(1), 4, 0x200 | 0x10 | 0x20000); /* PP, PR, clear CSC */
	assert_true(next_event(&ev));
	assert_int_equal(type_of(&ev), 34);
	assert_int_equal(ev.param >> 24, 1);
	assert_int_equal(rd(PORTSC(1), 4) & 0x203c13,
	                 0x200003 | (1u << 10)); /* PRC PED CCS, full speed */
	wr(PORTSC(1), 4, 0x200 | 0x200000);
	assert_int_equal(rd(PORTSC(1), 4) & 0x200000, 0);
}

static void test_port_reset(void **state)
{
	(void)state;
	port_reset();
	assert_int_equal(rd(OP + 4, 4) & 0x18, 0x18); /* EINT, PCD */
	assert_int_equal(intx_level, 1);              /* INTx: IP set, level high */
	assert_int_equal(rd(IR0, 4) & 3, 3);
	wr(IR0, 4, 3); /* IP is write-1-to-clear */
	assert_int_equal(intx_level, 0);
	assert_int_equal(rd(IR0, 4) & 3, 2);
}

/* Enable Slot + Address Device for the tablet: slot 1. */
static void address_device(void)
{
	struct trb ev;

	port_reset();
	ev = command(0, 0, T(9));
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(ev.control >> 24, 1);
	memset(hva(INCTX), 0, 0x400);
	put32(INCTX + 4, 3);                                  /* A0, A1 */
	put32(INCTX + 32, 1u << 27 | 1u << 20);               /* slot: 1 entry, full speed */
	put32(INCTX + 36, 1u << 16);                          /* root port 1 */
	put32(INCTX + 64 + 4, 4u << 3 | 64u << 16 | 3u << 1); /* control, MPS 64 */
	put32(INCTX + 64 + 8, (uint32_t)EP0RING | 1);
	memcpy(hva(DCBAA + 8), &(uint64_t){OUTCTX}, 8);
	ev = command(INCTX, 0, T(11) | 1u << 24);
	assert_int_equal(type_of(&ev), 33);
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(get32(OUTCTX + 12) >> 27, 2); /* Addressed */
	assert_int_equal(get32(OUTCTX + 32) & 7, 1);   /* EP0 Running */
}

/* A control transfer on EP0; returns the event of the Status stage. */
static struct trb control(uint8_t rt, uint8_t req, uint16_t val, uint16_t idx, uint16_t len)
{
	uint64_t setup = rt | (uint64_t)req << 8 | (uint64_t)val << 16 | (uint64_t)idx << 32 |
	                 (uint64_t)len << 48;
	struct trb ev = {0, 0, 0};

	put_trb(EP0RING + 16ull * ep0_idx++, setup, 8, T(2) | 1u << 6 | (len ? 3u << 16 : 0) | 1);
	if (len)
		put_trb(EP0RING + 16ull * ep0_idx++, DATA, len, T(3) | 1u << 16 | 1u << 2 | 1);
	put_trb(EP0RING + 16ull * ep0_idx++, 0, 0, T(4) | 1u << 5 | (len ? 0 : 1u << 16) | 1);
	wr(DB(1), 4, 1);
	while (next_event(&ev) && (ev.param != EP0RING + 16ull * (ep0_idx - 1)) && cc_of(&ev) != 6)
		;
	return ev;
}

static void test_enumerate(void **state)
{
	struct trb ev;

	(void)state;
	address_device();
	memset(hva(DATA), 0, 64);
	ev = control(0x80, 6, 0x100, 0, 18);
	assert_int_equal(type_of(&ev), 32);
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(hva(DATA)[0], 18);
	assert_int_equal(hva(DATA)[1], 1);
	assert_int_equal(hva(DATA)[7], 64);
	/* The configuration descriptor, asked with a large wLength: short. */
	ev = control(0x80, 6, 0x200, 0, 255);
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(hva(DATA)[2], 34);
	assert_int_equal(hva(DATA)[9 + 5], 3); /* interface class HID */
	/* An unknown request stalls and halts EP0. */
	ev = control(0x80, 0x77, 0, 0, 4);
	assert_int_equal(cc_of(&ev), 6);
	assert_int_equal(get32(OUTCTX + 32) & 7, 2);
	ev = command(0, 0, T(14) | 1u << 24 | 1u << 16); /* Reset Endpoint */
	assert_int_equal(cc_of(&ev), 1);
	ev = command((EP0RING + 16ull * ep0_idx) | 1, 0, T(16) | 1u << 24 | 1u << 16);
	assert_int_equal(cc_of(&ev), 1);
	ev = control(0x81, 6, 0x2200, 0, 128); /* report descriptor */
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(hva(DATA)[0], 0x05);
}

static void configure(void)
{
	struct trb ev;

	address_device();
	memset(hva(INCTX), 0, 0x400);
	put32(INCTX + 4, 1u << 3 | 1); /* A0, A3 (EP 1 IN) */
	put32(INCTX + 32, 3u << 27 | 1u << 20);
	put32(INCTX + 32 * 4 + 4, 7u << 3 | 8u << 16 | 3u << 1); /* interrupt IN, MPS 8 */
	put32(INCTX + 32 * 4 + 8, (uint32_t)EP1RING | 1);
	ev = command(INCTX, 0, T(12) | 1u << 24);
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(get32(OUTCTX + 12) >> 27, 3); /* Configured */
	assert_int_equal(get32(OUTCTX + 32 * 3) & 7, 1);
	ev = control(0x00, 9, 1, 0, 0); /* SET_CONFIGURATION 1 */
	assert_int_equal(cc_of(&ev), 1);
	ev = control(0x21, 0x0a, 0, 0, 0); /* SET_IDLE */
	assert_int_equal(cc_of(&ev), 1);
}

static void test_pointer_report(void **state)
{
	struct trb ev;

	(void)state;
	configure();
	put_trb(EP1RING, DATA, 8, T(1) | 1u << 5 | 1u << 2 | 1); /* Normal, IOC, ISP */
	wr(DB(1), 4, 3);
	assert_false(next_event(&ev)); /* NAK: the TRB waits */
	console_ptr_event(1, 512, 384, 1024, 768);
	assert_true(next_event(&ev));
	assert_int_equal(type_of(&ev), 32);
	assert_int_equal(cc_of(&ev), 13); /* short: 6 of 8 bytes */
	assert_int_equal(ev.status & 0xffffff, 2);
	assert_int_equal(ev.param, EP1RING);
	assert_int_equal((ev.control >> 16) & 0x1f, 3);
	assert_int_equal(hva(DATA)[0], 1);
	assert_int_equal(hva(DATA)[1] | hva(DATA)[2] << 8, 512u * 0x7fff / 1023);
	assert_int_equal(hva(DATA)[3] | hva(DATA)[4] << 8, 384u * 0x7fff / 767);
	/* Moves while no TRB is queued coalesce into one report. */
	console_ptr_event(0, 0, 0, 1024, 768);
	console_ptr_event(0, 1023, 767, 1024, 768);
	put_trb(EP1RING + 16, DATA, 8, T(1) | 1u << 5 | 1);
	put_trb(EP1RING + 32, DATA + 8, 8, T(1) | 1u << 5 | 1);
	wr(DB(1), 4, 3);
	assert_true(next_event(&ev));
	assert_int_equal(hva(DATA)[1] | hva(DATA)[2] << 8, 0x7fff);
	assert_false(next_event(&ev));
	/* Stop Endpoint leaves the dequeue pointer at the pending TRB. */
	ev = command(0, 0, T(15) | 1u << 24 | 3u << 16);
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(get32(OUTCTX + 32 * 3) & 7, 3);
	assert_int_equal(get32(OUTCTX + 32 * 3 + 8) & ~15u, (uint32_t)EP1RING + 32);
}

static void test_buttons_and_wheel(void **state)
{
	struct trb ev;

	(void)state;
	configure();
	for (unsigned i = 0; i < 3; i++)
		put_trb(EP1RING + 16 * i, DATA + 8 * i, 8, T(1) | 1u << 5 | 1);
	console_ptr_event(4, 0, 0, 1024, 768);     /* RFB right button: HID button 2 */
	console_ptr_event(4 | 8, 0, 0, 1024, 768); /* wheel up pressed: +1, not merged */
	console_ptr_event(4, 0, 0, 1024, 768);     /* wheel released: a move */
	wr(DB(1), 4, 3);
	for (unsigned i = 0; i < 3; i++) {
		assert_true(next_event(&ev));
		assert_int_equal(cc_of(&ev), 13);
	}
	assert_int_equal(hva(DATA)[0], 2);
	assert_int_equal(hva(DATA)[5], 0);
	assert_int_equal(hva(DATA + 8)[0], 2);
	assert_int_equal((int8_t)hva(DATA + 8)[5], 1);
	assert_int_equal((int8_t)hva(DATA + 16)[5], 0);
	/* GET_REPORT gives the current state. */
	ev = control(0xa1, 0x01, 0x0100, 0, 6);
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(hva(DATA)[0], 2);
}

/*
 * OVMF selects the boot protocol (HID 1.11 7.2.6) and reads 4-byte relative
 * reports: a move to the far corner arrives as steps of at most 127 that
 * add up to the 0..1023 position.
 */
static void test_boot_protocol(void **state)
{
	struct trb ev;
	int sx = 0, sy = 0;

	(void)state;
	configure();
	ev = control(0x80, 6, 0x200, 0, 34);
	assert_int_equal(hva(DATA)[9 + 6], 1); /* boot subclass */
	assert_int_equal(hva(DATA)[9 + 7], 2); /* mouse */
	ev = control(0x21, 0x0b, 0, 0, 0);     /* SET_PROTOCOL boot */
	assert_int_equal(cc_of(&ev), 1);
	ev = control(0xa1, 0x03, 0, 0, 1); /* GET_PROTOCOL */
	assert_int_equal(hva(DATA)[0], 0);
	console_ptr_event(1 | 8, 1023, 767, 1024, 768);
	for (unsigned i = 0; i < 9; i++) {
		put_trb(EP1RING + 16 * i, DATA + 8 * i, 8, T(1) | 1u << 5 | 1);
		wr(DB(1), 4, 3);
		assert_true(next_event(&ev));
		assert_int_equal(cc_of(&ev), 13);
		assert_int_equal(ev.status & 0xffffff, 4); /* 4 of 8 bytes */
		assert_int_equal(hva(DATA + 8 * i)[0], 1);
		assert_int_equal((int8_t)hva(DATA + 8 * i)[3], i == 0 ? 1 : 0);
		sx += (int8_t)hva(DATA + 8 * i)[1];
		sy += (int8_t)hva(DATA + 8 * i)[2];
	}
	assert_int_equal((int8_t)hva(DATA)[1], 127);
	assert_int_equal(sx, 1023);
	assert_int_equal(sy, 1023);
	put_trb(EP1RING + 16 * 9, DATA, 8, T(1) | 1u << 5 | 1);
	wr(DB(1), 4, 3);
	assert_false(next_event(&ev)); /* arrived: nothing more */
	console_ptr_event(0, 512, 384, 1024, 768);
	assert_true(next_event(&ev));
	assert_int_equal((int8_t)hva(DATA)[1], -127);
}

static void test_slot_lifecycle(void **state)
{
	struct trb ev;

	(void)state;
	configure();
	/* Evaluate Context: a new EP0 max packet size reaches the output. */
	memset(hva(INCTX), 0, 0x400);
	put32(INCTX + 4, 2);
	put32(INCTX + 64 + 4, 4u << 3 | 8u << 16);
	ev = command(INCTX, 0, T(13) | 1u << 24);
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(get32(OUTCTX + 32 + 4) >> 16, 8);
	/* Reset Device: back to Default, EP 1 IN disabled. */
	ev = command(0, 0, T(17) | 1u << 24);
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(get32(OUTCTX + 12) >> 27, 1);
	assert_int_equal(get32(OUTCTX + 32 * 3) & 7, 0);
	ev = command(0, 0, T(15) | 1u << 24 | 3u << 16); /* Stop a disabled endpoint */
	assert_int_equal(cc_of(&ev), 12);
	ev = command(0, 0, T(14) | 1u << 24 | 1u << 16); /* Reset a running endpoint */
	assert_int_equal(cc_of(&ev), 19);
	ev = command(0, 0, T(10) | 1u << 24); /* Disable Slot */
	assert_int_equal(cc_of(&ev), 1);
	ev = command(0, 0, T(17) | 1u << 24);
	assert_int_equal(cc_of(&ev), 11);
	/* Every slot taken: No Slots Available. */
	for (unsigned i = 0; i < 8; i++) {
		ev = command(0, 0, T(9));
		assert_int_equal(cc_of(&ev), 1);
	}
	ev = command(0, 0, T(9));
	assert_int_equal(cc_of(&ev), 9);
}

static void test_event_ring_full(void **state)
{
	struct trb ev;
	unsigned n = 0, full = 0;

	(void)state;
	for (unsigned i = 0; i < 40; i++)
		submit(0, 0, T(23)); /* nobody reads the events */
	while (next_event(&ev)) {
		n++;
		if (type_of(&ev) == 37 && cc_of(&ev) == 21)
			full++;
	}
	assert_int_equal(n, EV_TRBS - 1); /* one TRB stays free */
	assert_int_equal(full, 1);
	ev = command(0, 0, T(23)); /* posting resumes once ERDP moved */
	assert_int_equal(type_of(&ev), 33);
	assert_int_equal(cc_of(&ev), 1);
}

static void test_msix_pending(void **state)
{
	struct pci_func *f = pci_get(0);
	struct trb ev;

	(void)state;
	pci_cfg_write(0, 5, 0, f->msix.cap + 2, 2, 0xc000); /* MSI-X on, function masked */
	f->msix.pba[0] = 0;
	ev = command(0, 0, T(23));
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(f->msix.pba[0] & 1, 1); /* the message waits in the PBA */
	assert_int_equal(rd(IR0, 4) & 1, 0);     /* IP cleared as the message went */
	assert_int_equal(intx_level, 0);
	pci_cfg_write(0, 5, 0, f->msix.cap + 2, 2, 0);
	f->msix.pba[0] = 0;
}

static void test_bad_slots(void **state)
{
	struct trb ev;

	(void)state;
	ev = command(INCTX, 0, T(11) | 7u << 24);
	assert_int_equal(cc_of(&ev), 11);
	ev = command(INCTX, 0, T(11) | 200u << 24);
	assert_int_equal(cc_of(&ev), 11);
	ev = command(0, 0, T(10) | 0u << 24);
	assert_int_equal(cc_of(&ev), 11);
	ev = command(0, 0, T(63));
	assert_int_equal(cc_of(&ev), 5);
	wr(DB(5), 4, 1);  /* a doorbell for a disabled slot is ignored */
	wr(DB(1), 4, 40); /* and a bad target */
	ev = command(0, 0, T(23));
	assert_int_equal(cc_of(&ev), 1);
	/* Command Abort as Linux writes it: CRCR read, CA ORed in, both
	 * halves written; the ring stops and resumes where it was. */
	assert_int_equal(rd(OP + 0x18, 8), 8); /* CRR */
	wr(OP + 0x18, 8, rd(OP + 0x18, 8) | 4);
	assert_true(next_event(&ev));
	assert_int_equal(cc_of(&ev), 24);
	assert_int_equal(rd(OP + 0x18, 8), 0);
	ev = command(0, 0, T(23));
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(ev.param, CMDRING + 16ull * (cmd_idx - 1));
}

static void test_garbage_contexts(void **state)
{
	struct trb ev;

	(void)state;
	port_reset();
	ev = command(0, 0, T(9));
	assert_int_equal(cc_of(&ev), 1);
	ev = command(0xfff00000ull, 0, T(11) | 1u << 24); /* input context outside RAM */
	assert_int_equal(cc_of(&ev), 17);
	memset(hva(INCTX), 0xff, 0x400); /* all garbage */
	ev = command(INCTX, 0, T(11) | 1u << 24);
	assert_int_equal(cc_of(&ev), 17);
	memset(hva(INCTX), 0, 0x400);
	put32(INCTX + 4, 3);
	put32(INCTX + 36, 1u << 16);
	put32(INCTX + 64 + 4, 2u << 3 | 64u << 16); /* not a control endpoint */
	put32(INCTX + 64 + 8, (uint32_t)EP0RING | 1);
	ev = command(INCTX, 0, T(11) | 1u << 24);
	assert_int_equal(cc_of(&ev), 17);
	put32(INCTX + 64 + 4, 4u << 3 | 64u << 16);
	memcpy(hva(DCBAA + 8), &(uint64_t){0x7ff00000ull}, 8); /* output context outside RAM */
	ev = command(INCTX, 0, T(11) | 1u << 24);
	assert_int_equal(cc_of(&ev), 17);
	put32(INCTX + 36, 9u << 16); /* no such root port */
	memcpy(hva(DCBAA + 8), &(uint64_t){OUTCTX}, 8);
	ev = command(INCTX, 0, T(11) | 1u << 24);
	assert_int_equal(cc_of(&ev), 5);
	ev = command(INCTX, 0, T(12) | 1u << 24); /* Configure before Address */
	assert_int_equal(cc_of(&ev), 19);
}

static void test_link_loop(void **state)
{
	struct trb ev;

	(void)state;
	put_trb(CMDRING, CMDRING + 16, 0, T(6) | 1); /* two Link TRBs pointing at each other */
	put_trb(CMDRING + 16, CMDRING, 0, T(6) | 1);
	wr(DB(0), 4, 0); /* returns: the walk is bounded */
	assert_false(next_event(&ev));
	assert_int_equal(rd(OP + 4, 4) & 4, 0);
	/* A transfer ring of Link TRBs too. */
	start();
	address_device();
	put_trb(EP0RING, EP0RING, 0, T(6) | 1);
	wr(DB(1), 4, 1);
	assert_false(next_event(&ev));
}

static void test_ring_outside_ram(void **state)
{
	(void)state;
	wr(OP + 0x00, 4, 0);
	wr(OP + 0x18, 8, 0x40000000ull | 1); /* command ring outside RAM */
	wr(OP + 0x00, 4, 1);
	wr(DB(0), 4, 0);
	assert_int_equal(rd(OP + 4, 4) & 5, 5); /* HSE, halted */
}

static void test_zero_erst(void **state)
{
	(void)state;
	wr(IR0 + 0x08, 4, 0);
	wr(IR0 + 0x10, 8, ERST);
	put_trb(CMDRING, 0, 0, T(23) | 1);
	wr(DB(0), 4, 0);
	assert_int_equal(rd(OP + 4, 4) & 4, 4);
	/* An ERST entry pointing outside RAM as well. */
	start();
	put32(ERST, 0x7fff0000u);
	wr(IR0 + 0x10, 8, ERST);
	put_trb(CMDRING, 0, 0, T(23) | 1);
	wr(DB(0), 4, 0);
	assert_int_equal(rd(OP + 4, 4) & 4, 4);
}

static void test_options(void **state)
{
	char err[128] = "";
	const struct pci_devemu *de = pci_devemu_find("xhci");

	(void)state;
	assert_non_null(de);
	assert_int_equal(
	    de->legacy_config(config_create_node("t.x"), "tablet,mouse", err, sizeof(err)), -1);
	assert_contains(err, "mouse");
	assert_int_equal(de->legacy_config(config_create_node("t.y"), "tablet", err, sizeof(err)),
	                 0);
	assert_string_equal(config_get("t.y.slot.1.device"), "tablet");
}

/* ---- saved state ---- */

/* Offsets into the controller's own part (one event ring segment). */
#define ST_CONFIG              14
#define ST_NSEG                85
#define ST_SEGSIZE             97
#define ST_ENQ                 105
#define ST_PORT1               110
#define ST_SLOT1               178
#define ST_EP0                 (ST_SLOT1 + 12)
#define ST_CTL1                (ST_EP0 + 31 * 18)
#define ST_TABLET(len, queued) ((len)-17 - 6 * (queued)) /* the tablet's part */

static int restore_emul(const uint8_t *data, size_t len, char *err, size_t errlen)
{
	struct pci_func *f = pci_get(0);
	struct sbuf_reader in;

	sbuf_reader_init(&in, data, len);
	err[0] = '\0';
	if (f->de->restore(f, &in, err, errlen) < 0 && !in.failed)
		return -1;
	return sbuf_reader_done(&in, "xhci", err, errlen);
}

static void save_emul(struct sbuf *out)
{
	struct pci_func *f = pci_get(0);
	char err[128];

	memset(out, 0, sizeof(*out));
	assert_int_equal(f->de->save(f, out, err, sizeof(err)), 0);
	assert_false(out->failed);
}

static void assert_state_is(const struct sbuf *want)
{
	struct sbuf got;

	save_emul(&got);
	assert_int_equal(got.len, want->len);
	assert_memory_equal(got.data, want->data, want->len);
	sbuf_free(&got);
}

static void refuse_patched(const struct sbuf *good, size_t off, uint32_t val, size_t n,
                           const char *why)
{
	uint8_t *bad = malloc(good->len);
	char err[160];

	assert_non_null(bad);
	memcpy(bad, good->data, good->len);
	memcpy(bad + off, &val, n);
	assert_int_equal(restore_emul(bad, good->len, err, sizeof(err)), -1);
	assert_contains(err, why);
	assert_state_is(good); /* untouched */
	free(bad);
}

static void refuse_hostile(const struct sbuf *good)
{
	static const size_t cuts[] = {1, 2, 53, ST_SLOT1, ST_CTL1 + 3};
	char err[160];

	refuse_patched(good, 0, 2, 2, "version");
	refuse_patched(good, ST_CONFIG, 9, 4, "CONFIG");
	refuse_patched(good, 2, 4, 4, "says running"); /* USBCMD: R/S off, HCH clear */
	refuse_patched(good, ST_NSEG, 17, 4, "segments");
	refuse_patched(good, ST_SEGSIZE, 8, 4, "not guest RAM");
	refuse_patched(good, ST_ENQ, EV_TRBS, 4, "event ring position");
	refuse_patched(good, ST_PORT1, 0, 1, "port 1");
	refuse_patched(good, ST_SLOT1 + 1, 4, 1, "slot 1");
	refuse_patched(good, ST_EP0, 5, 1, "endpoint 1");
	refuse_patched(good, ST_CTL1 + 6, 19, 4, "control transfer"); /* offset past the data */
	refuse_patched(good, ST_CTL1 + 1, 1, 1, "control transfer");  /* IN marked deferred */
	refuse_patched(good, ST_TABLET(good->len, 2) + 2, 2, 1, "tablet: config");
	refuse_patched(good, ST_TABLET(good->len, 2) + 16, 17, 1, "reports queued");
	refuse_patched(good, ST_TABLET(good->len, 2) + 17, 8, 1, "tablet: report");
	for (unsigned i = 0; i < ARRAY_LEN(cuts); i++) {
		assert_int_equal(restore_emul(good->data, cuts[i], err, sizeof(err)), -1);
		assert_state_is(good);
	}
	assert_int_equal(restore_emul(good->data, good->len - 1, err, sizeof(err)), -1);
	assert_contains(err, "truncated");
	assert_state_is(good);
}

/*
 * An enumerated tablet with two reports queued and a GET_DESCRIPTOR
 * between its two Data TRBs: the whole section saved (quiesced), the
 * controller reset, the section restored.  Registers read back the same,
 * the control transfer finishes with the right bytes, the next interrupt
 * TRBs get the queued reports, the command ring goes on with its cycle.
 */
static void test_state_round_trip(void **state)
{
	const struct state_participant *p = machine_state_find(&m, "pci.0.5.0.xhci");
	static const uint8_t dev_desc_tail[10] = {0x5d, 0xfb, 0x01, 0x00, 0x00, 0x01, 1, 2, 3, 1};
	struct sbuf whole = {0}, good;
	struct sbuf_reader in;
	uint64_t regs[6];
	char err[160];
	struct trb ev;

	(void)state;
	assert_non_null(p);
	configure();
	console_ptr_event(1, 100, 200, 1024, 768);
	console_ptr_event(0, 300, 400, 1024, 768);
	memset(hva(DATA), 0, 32);
	put_trb(EP0RING + 16ull * ep0_idx++, 0x0012000001000680ull, 8,
	        T(2) | 1u << 6 | 3u << 16 | 1);
	put_trb(EP0RING + 16ull * ep0_idx++, DATA, 8, T(3) | 1u << 16 | 1);
	wr(DB(1), 4, 1);
	assert_false(next_event(&ev));
	assert_int_equal(hva(DATA)[0], 18);
	regs[0] = rd(OP + 4, 4);
	regs[1] = rd(PORTSC(1), 4);
	regs[2] = rd(IR0, 4);
	regs[3] = rd(IR0 + 0x18, 8);
	regs[4] = rd(OP + 0x30, 8);
	regs[5] = rd(OP + 0x38, 4);

	assert_int_equal(p->ops->quiesce(p->arg, err, sizeof(err)), 0);
	assert_int_equal(p->ops->save(p->arg, &whole, err, sizeof(err)), 0);
	p->ops->unquiesce(p->arg);
	save_emul(&good);
	assert_true(whole.len > good.len);
	assert_memory_equal(whole.data + whole.len - good.len, good.data, good.len);

	wr(OP, 4, 2); /* HCRST: controller and tablet start over */
	assert_int_equal(rd(OP + 0x38, 4), 0);
	sbuf_reader_init(&in, whole.data, whole.len);
	assert_int_equal(p->ops->restore(p->arg, &in, err, sizeof(err)), 0);
	assert_int_equal(sbuf_reader_done(&in, p->name, err, sizeof(err)), 0);
	assert_int_equal(rd(OP + 4, 4), regs[0]);
	assert_int_equal(rd(PORTSC(1), 4), regs[1]);
	assert_int_equal(rd(IR0, 4), regs[2]);
	assert_int_equal(rd(IR0 + 0x18, 8), regs[3]);
	assert_int_equal(rd(OP + 0x30, 8), regs[4]);
	assert_int_equal(rd(OP + 0x38, 4), regs[5]);
	assert_state_is(&good);
	refuse_hostile(&good);

	/* The rest of the descriptor comes from the restored transfer buffer. */
	put_trb(EP0RING + 16ull * ep0_idx++, DATA + 8, 10, T(1) | 1u << 16 | 1);
	put_trb(EP0RING + 16ull * ep0_idx++, 0, 0, T(4) | 1u << 5 | 1);
	wr(DB(1), 4, 1);
	assert_true(next_event(&ev));
	assert_int_equal(type_of(&ev), 32);
	assert_int_equal(cc_of(&ev), 1);
	assert_int_equal(ev.param, EP0RING + 16ull * (ep0_idx - 1));
	assert_memory_equal(hva(DATA + 8), dev_desc_tail, sizeof(dev_desc_tail));
	/* The queued reports, oldest first, then a NAK. */
	for (unsigned i = 0; i < 3; i++)
		put_trb(EP1RING + 16 * i, DATA + 8 * i, 8, T(1) | 1u << 5 | 1);
	wr(DB(1), 4, 3);
	assert_true(next_event(&ev));
	assert_int_equal(ev.param, EP1RING);
	assert_int_equal(hva(DATA)[0], 1);
	assert_int_equal(hva(DATA)[1] | hva(DATA)[2] << 8, 100u * 0x7fff / 1023);
	assert_true(next_event(&ev));
	assert_int_equal(ev.param, EP1RING + 16);
	assert_int_equal(hva(DATA + 8)[0], 0);
	assert_int_equal(hva(DATA + 8)[1] | hva(DATA + 8)[2] << 8, 300u * 0x7fff / 1023);
	assert_false(next_event(&ev));
	/* While quiesced a pointer event waits; unquiesce delivers it. */
	assert_int_equal(p->ops->quiesce(p->arg, err, sizeof(err)), 0);
	console_ptr_event(2, 500, 500, 1024, 768);
	assert_false(next_event(&ev));
	p->ops->unquiesce(p->arg);
	assert_true(next_event(&ev));
	assert_int_equal(ev.param, EP1RING + 32);
	assert_int_equal(hva(DATA + 16)[0], 4);
	ev = command(0, 0, T(23)); /* the command ring's position and cycle */
	assert_int_equal(cc_of(&ev), 1);
	sbuf_free(&whole);
	sbuf_free(&good);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_identity_and_reset, setup),
	    cmocka_unit_test_setup(test_port_reset, setup),
	    cmocka_unit_test_setup(test_enumerate, setup),
	    cmocka_unit_test_setup(test_pointer_report, setup),
	    cmocka_unit_test_setup(test_buttons_and_wheel, setup),
	    cmocka_unit_test_setup(test_boot_protocol, setup),
	    cmocka_unit_test_setup(test_slot_lifecycle, setup),
	    cmocka_unit_test_setup(test_event_ring_full, setup),
	    cmocka_unit_test_setup(test_msix_pending, setup),
	    cmocka_unit_test_setup(test_bad_slots, setup),
	    cmocka_unit_test_setup(test_garbage_contexts, setup),
	    cmocka_unit_test_setup(test_link_loop, setup),
	    cmocka_unit_test_setup(test_ring_outside_ram, setup),
	    cmocka_unit_test_setup(test_zero_erst, setup),
	    cmocka_unit_test_setup(test_state_round_trip, setup),
	    cmocka_unit_test(test_options),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
