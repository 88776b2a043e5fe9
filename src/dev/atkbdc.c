/*
 * i8042 keyboard controller (see atkbdc.h).  Facts from the IBM PS/2
 * Hardware Interface Technical Reference and the behaviour of bhyve's and
 * QEMU's controllers that SeaBIOS, Linux's i8042 driver and Windows rely on
 * (a byte written to a port re-enables that port's clock; 0xD3 loops a
 * byte back as if from the mouse).
 */
#include "dev/atkbdc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/console.h"
#include "core/machine.h"
#include "dev/lpc.h"
#include "dev/ps2kbd.h"
#include "dev/ps2mouse.h"
#include "lib/aml.h"
#include "lib/log.h"

/* Status register. */
#define STS_OBF      0x01
#define STS_SYS      0x04
#define STS_A2       0x08 /* last write was to the command port */
#define STS_UNLOCKED 0x10 /* keyboard not inhibited by the key lock */
#define STS_AUXB     0x20 /* the output byte is from the mouse */

/* Command byte (controller RAM byte 0). */
#define CB_KBD_INT 0x01
#define CB_AUX_INT 0x02
#define CB_SYS     0x04
#define CB_KBD_DIS 0x10
#define CB_AUX_DIS 0x20
#define CB_XLATE   0x40

/* Output port. */
#define OP_RESET   0x01 /* low: CPU in reset */
#define OP_A20     0x02
#define OP_KBD_OBF 0x10
#define OP_AUX_OBF 0x20

/* Commands to port 0x64. */
#define CMD_READ_RAM      0x20 /* 0x20-0x3f: RAM byte n & 0x1f */
#define CMD_WRITE_RAM     0x60 /* 0x60-0x7f */
#define CMD_PASSWD_TEST   0xa4
#define CMD_AUX_DISABLE   0xa7
#define CMD_AUX_ENABLE    0xa8
#define CMD_AUX_TEST      0xa9
#define CMD_SELF_TEST     0xaa
#define CMD_KBD_TEST      0xab
#define CMD_KBD_DISABLE   0xad
#define CMD_KBD_ENABLE    0xae
#define CMD_READ_INPORT   0xc0
#define CMD_READ_OUTPORT  0xd0
#define CMD_WRITE_OUTPORT 0xd1
#define CMD_WRITE_KBD_OB  0xd2
#define CMD_WRITE_AUX_OB  0xd3
#define CMD_WRITE_AUX     0xd4
#define CMD_A20_OFF       0xdd
#define CMD_A20_ON        0xdf
#define CMD_READ_TEST     0xe0
#define CMD_PULSE         0xf0 /* 0xf0-0xff: pulse output port bits 3:0 that are 0 */

#define SELF_TEST_OK      0x55
#define NO_PASSWORD       0xf1
#define RAM_SIZE          32
#define CTRL_QUEUE        4

#define IRQ_KBD_BIT       1u
#define IRQ_AUX_BIT       2u

struct ctrl_byte {
	uint8_t val;
	bool aux;
};

struct atkbdc {
	pthread_mutex_t lock;
	const struct atkbdc_ops *ops;
	void *arg;
	struct ps2kbd *kbd;
	struct ps2mouse *mouse;
	uint8_t ram[RAM_SIZE]; /* ram[0] is the command byte */
	uint8_t outport;
	uint8_t pending_cmd; /* command waiting for its data byte, or 0 */
	bool a2;
	uint8_t out; /* the output buffer */
	bool out_full, out_aux;
	bool xlate_break;                   /* translation saw 0xF0: the next byte is a release */
	struct ctrl_byte ctrlq[CTRL_QUEUE]; /* the controller's own replies */
	unsigned nctrl;
	/* Filled under the lock, acted on after it is dropped. */
	unsigned irqs;
	bool reset;
};

static struct ratelimit kbd_overrun_rl = RATELIMIT_INIT;
static struct ratelimit cmd_rl = RATELIMIT_INIT;

static uint8_t cmdbyte(const struct atkbdc *k)
{
	return k->ram[0];
}

static void ctrl_reply(struct atkbdc *k, uint8_t v, bool aux)
{
	if (k->nctrl < CTRL_QUEUE)
		k->ctrlq[k->nctrl++] = (struct ctrl_byte){v, aux};
}

static bool take_ctrl(struct atkbdc *k, uint8_t *v, bool *aux)
{
	if (k->nctrl == 0)
		return false;
	*v = k->ctrlq[0].val;
	*aux = k->ctrlq[0].aux;
	for (unsigned i = 1; i < k->nctrl; i++)
		k->ctrlq[i - 1] = k->ctrlq[i];
	k->nctrl--;
	return true;
}

/* The next keyboard byte as the controller passes it on: translated to
 * set 1 when the command byte asks, a 0xF0 prefix folded into bit 7. */
static bool take_kbd(struct atkbdc *k, uint8_t *v)
{
	uint8_t b;

	/* Bounded: each round consumes a queued byte. */
	while (ps2kbd_read(k->kbd, &b)) {
		if (!(cmdbyte(k) & CB_XLATE)) {
			*v = b;
			return true;
		}
		if (b == 0xf0) {
			k->xlate_break = true;
			continue;
		}
		*v = (uint8_t)(ps2_translate(b) | (k->xlate_break ? 0x80 : 0));
		k->xlate_break = false;
		return true;
	}
	return false;
}

static void want_irq_for_out(struct atkbdc *k)
{
	if (k->out_aux && (cmdbyte(k) & CB_AUX_INT))
		k->irqs |= IRQ_AUX_BIT;
	else if (!k->out_aux && (cmdbyte(k) & CB_KBD_INT))
		k->irqs |= IRQ_KBD_BIT;
}

/* Move the next byte into an empty output buffer: the controller's own
 * replies first, then the keyboard's, then the mouse's (enabled ports only). */
static void fill_output(struct atkbdc *k)
{
	uint8_t v;
	bool aux = false;

	if (k->out_full)
		return;
	if (!take_ctrl(k, &v, &aux)) {
		if (!(cmdbyte(k) & CB_KBD_DIS) && take_kbd(k, &v))
			aux = false;
		else if (!(cmdbyte(k) & CB_AUX_DIS) && ps2mouse_read(k->mouse, &v))
			aux = true;
		else
			return;
	}
	k->out = v;
	k->out_full = true;
	k->out_aux = aux;
	want_irq_for_out(k);
}

static uint8_t read_outport(const struct atkbdc *k)
{
	uint8_t v = k->outport & ~(OP_KBD_OBF | OP_AUX_OBF);

	if (k->out_full)
		v |= k->out_aux ? OP_AUX_OBF : OP_KBD_OBF;
	return v;
}

static void write_outport(struct atkbdc *k, uint8_t v)
{
	k->outport = v | OP_RESET; /* the reset is a pulse: the line comes back */
	if (!(v & OP_RESET))
		k->reset = true;
}

static void write_cmdbyte(struct atkbdc *k, uint8_t v)
{
	uint8_t before = cmdbyte(k);

	k->ram[0] = v;
	/* A newly enabled interrupt for a byte already waiting fires now. */
	if (k->out_full && (v & ~before & (k->out_aux ? CB_AUX_INT : CB_KBD_INT)))
		want_irq_for_out(k);
}

static void command(struct atkbdc *k, uint8_t cmd)
{
	k->pending_cmd = 0;
	if (cmd >= CMD_READ_RAM && cmd < CMD_READ_RAM + RAM_SIZE) {
		ctrl_reply(k, k->ram[cmd - CMD_READ_RAM], false);
		return;
	}
	if (cmd >= CMD_PULSE) {
		if (!(cmd & OP_RESET))
			k->reset = true;
		return;
	}
	switch (cmd) {
	case CMD_PASSWD_TEST:
		ctrl_reply(k, NO_PASSWORD, false);
		break;
	case CMD_AUX_DISABLE:
		k->ram[0] |= CB_AUX_DIS;
		break;
	case CMD_AUX_ENABLE:
		k->ram[0] &= ~CB_AUX_DIS;
		break;
	case CMD_AUX_TEST:
	case CMD_KBD_TEST:
		ctrl_reply(k, 0x00, false); /* no clock or data line stuck */
		break;
	case CMD_SELF_TEST:
		k->ram[0] |= CB_SYS;
		ctrl_reply(k, SELF_TEST_OK, false);
		break;
	case CMD_KBD_DISABLE:
		k->ram[0] |= CB_KBD_DIS;
		break;
	case CMD_KBD_ENABLE:
		k->ram[0] &= ~CB_KBD_DIS;
		break;
	case CMD_READ_INPORT:
		ctrl_reply(k, 0x80, false); /* keyboard not inhibited */
		break;
	case CMD_READ_OUTPORT:
		ctrl_reply(k, read_outport(k), false);
		break;
	case CMD_A20_OFF:
		k->outport &= ~OP_A20;
		break;
	case CMD_A20_ON:
		k->outport |= OP_A20;
		break;
	case CMD_READ_TEST:
		ctrl_reply(k, 0x00, false);
		break;
	default:
		if ((cmd >= CMD_WRITE_RAM && cmd < CMD_WRITE_RAM + RAM_SIZE) ||
		    (cmd >= CMD_WRITE_OUTPORT && cmd <= CMD_WRITE_AUX))
			k->pending_cmd = cmd;
		else
			log_ratelimited(&cmd_rl, LOG_DEBUG, "atkbdc: unknown command 0x%02x", cmd);
		break;
	}
}

/* A byte written to the data port: the argument of a pending command, or
 * a byte for the keyboard. */
static void data(struct atkbdc *k, uint8_t v)
{
	uint8_t cmd = k->pending_cmd;

	k->pending_cmd = 0;
	if (cmd == CMD_WRITE_RAM) {
		write_cmdbyte(k, v);
	} else if (cmd > CMD_WRITE_RAM && cmd < CMD_WRITE_RAM + RAM_SIZE) {
		k->ram[cmd - CMD_WRITE_RAM] = v;
	} else if (cmd == CMD_WRITE_OUTPORT) {
		write_outport(k, v);
	} else if (cmd == CMD_WRITE_KBD_OB || cmd == CMD_WRITE_AUX_OB) {
		ctrl_reply(k, v, cmd == CMD_WRITE_AUX_OB);
	} else if (cmd == CMD_WRITE_AUX) {
		k->ram[0] &= ~CB_AUX_DIS; /* talking to a port enables its clock */
		ps2mouse_write(k->mouse, v);
	} else {
		k->ram[0] &= ~CB_KBD_DIS;
		ps2kbd_write(k->kbd, v);
	}
}

/* Drop the lock, then raise what the access asked for. */
static void unlock_and_signal(struct atkbdc *k)
{
	unsigned irqs = k->irqs;
	bool reset = k->reset;

	k->irqs = 0;
	k->reset = false;
	pthread_mutex_unlock(&k->lock);
	if ((irqs & IRQ_KBD_BIT) && k->ops->pulse_irq != NULL)
		k->ops->pulse_irq(k->arg, ATKBDC_KBD_IRQ);
	if ((irqs & IRQ_AUX_BIT) && k->ops->pulse_irq != NULL)
		k->ops->pulse_irq(k->arg, ATKBDC_AUX_IRQ);
	if (reset && k->ops->reset != NULL)
		k->ops->reset(k->arg);
}

uint8_t atkbdc_read(struct atkbdc *k, uint16_t port)
{
	uint8_t v = 0xff;

	pthread_mutex_lock(&k->lock);
	if (port == ATKBDC_CMD_PORT) {
		v = STS_UNLOCKED | (cmdbyte(k) & CB_SYS ? STS_SYS : 0) | (k->a2 ? STS_A2 : 0);
		if (k->out_full)
			v |= STS_OBF | (k->out_aux ? STS_AUXB : 0);
	} else if (port == ATKBDC_DATA_PORT) {
		/* An empty buffer reads its last byte again, as the chip does. */
		v = k->out;
		k->out_full = false;
		fill_output(k);
	}
	unlock_and_signal(k);
	return v;
}

void atkbdc_write(struct atkbdc *k, uint16_t port, uint8_t val)
{
	pthread_mutex_lock(&k->lock);
	if (port == ATKBDC_CMD_PORT) {
		k->a2 = true;
		command(k, val);
	} else if (port == ATKBDC_DATA_PORT) {
		k->a2 = false;
		data(k, val);
	}
	fill_output(k);
	unlock_and_signal(k);
}

void atkbdc_key(void *arg, bool down, uint16_t qnum)
{
	struct atkbdc *k = arg;
	bool ok;

	pthread_mutex_lock(&k->lock);
	ok = ps2kbd_key(k->kbd, down, qnum);
	fill_output(k);
	unlock_and_signal(k);
	if (!ok)
		log_ratelimited(&kbd_overrun_rl, LOG_WARN,
		                "atkbdc: keyboard queue full (guest not reading), key dropped");
}

void atkbdc_pointer(void *arg, uint8_t buttons, uint32_t x, uint32_t y, uint32_t width,
                    uint32_t height)
{
	struct atkbdc *k = arg;

	(void)width;
	(void)height;
	pthread_mutex_lock(&k->lock);
	ps2mouse_pointer(k->mouse, buttons, x, y);
	fill_output(k);
	unlock_and_signal(k);
}

uint8_t atkbdc_leds(struct atkbdc *k)
{
	uint8_t v;

	pthread_mutex_lock(&k->lock);
	v = ps2kbd_leds(k->kbd);
	pthread_mutex_unlock(&k->lock);
	return v;
}

struct atkbdc *atkbdc_create(const struct atkbdc_ops *ops, void *arg)
{
	struct atkbdc *k = calloc(1, sizeof(*k));

	if (k == NULL)
		return NULL;
	k->kbd = ps2kbd_create();
	k->mouse = ps2mouse_create();
	if (k->kbd == NULL || k->mouse == NULL) {
		atkbdc_free(k);
		return NULL;
	}
	pthread_mutex_init(&k->lock, NULL);
	k->ops = ops;
	k->arg = arg;
	/* Firmware sets its own; this is what a BIOS leaves behind. */
	k->ram[0] = CB_KBD_INT | CB_SYS | CB_XLATE | CB_AUX_DIS;
	k->outport = OP_RESET | OP_A20;
	return k;
}

void atkbdc_free(struct atkbdc *k)
{
	if (k == NULL)
		return;
	ps2kbd_free(k->kbd);
	ps2mouse_free(k->mouse);
	free(k);
}

/* ---- saved state ---- */

#define ATKBDC_STATE_VERSION 1

/* The controller's own fields of a section, checked before any is applied. */
struct atkbdc_saved {
	uint8_t ram[RAM_SIZE];
	uint8_t outport, pending_cmd, out;
	bool a2, out_full, out_aux, xlate_break;
	struct ctrl_byte ctrlq[CTRL_QUEUE];
	unsigned nctrl;
};

static int atkbdc_save(void *arg, struct sbuf *out, char *err, size_t errlen)
{
	struct atkbdc *k = arg;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&k->lock);
	sbuf_put_u16(out, ATKBDC_STATE_VERSION);
	sbuf_put_bytes(out, k->ram, RAM_SIZE);
	sbuf_put_u8(out, k->outport);
	sbuf_put_u8(out, k->pending_cmd);
	sbuf_put_bool(out, k->a2);
	sbuf_put_u8(out, k->out);
	sbuf_put_bool(out, k->out_full);
	sbuf_put_bool(out, k->out_aux);
	sbuf_put_bool(out, k->xlate_break);
	sbuf_put_u8(out, (uint8_t)k->nctrl);
	for (unsigned i = 0; i < k->nctrl; i++) {
		sbuf_put_u8(out, k->ctrlq[i].val);
		sbuf_put_bool(out, k->ctrlq[i].aux);
	}
	ps2kbd_save(k->kbd, out);
	ps2mouse_save(k->mouse, out);
	pthread_mutex_unlock(&k->lock);
	return 0;
}

/* A command that waits for a data byte (see command()), or 0. */
static bool pending_cmd_ok(uint8_t cmd)
{
	return cmd == 0 || (cmd > CMD_WRITE_RAM && cmd < CMD_WRITE_RAM + RAM_SIZE) ||
	       cmd == CMD_WRITE_RAM || (cmd >= CMD_WRITE_OUTPORT && cmd <= CMD_WRITE_AUX);
}

static void atkbdc_read_saved(struct sbuf_reader *in, struct atkbdc_saved *s)
{
	sbuf_get_bytes(in, s->ram, RAM_SIZE);
	s->outport = sbuf_get_u8(in);
	s->pending_cmd = sbuf_get_u8(in);
	s->a2 = sbuf_get_bool(in);
	s->out = sbuf_get_u8(in);
	s->out_full = sbuf_get_bool(in);
	s->out_aux = sbuf_get_bool(in);
	s->xlate_break = sbuf_get_bool(in);
	s->nctrl = sbuf_get_u8(in);
	if (s->nctrl > CTRL_QUEUE) {
		sbuf_fail(in, "controller queue count %u > %u", s->nctrl, CTRL_QUEUE);
		return;
	}
	for (unsigned i = 0; i < s->nctrl; i++) {
		s->ctrlq[i].val = sbuf_get_u8(in);
		s->ctrlq[i].aux = sbuf_get_bool(in);
	}
	if (!pending_cmd_ok(s->pending_cmd))
		sbuf_fail(in, "pending command 0x%02x takes no data", s->pending_cmd);
	if (!(s->outport & OP_RESET))
		sbuf_fail(in, "output port 0x%02x holds the CPU in reset", s->outport);
}

static int atkbdc_restore(void *arg, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct atkbdc *k = arg;
	struct atkbdc_saved s;
	struct ps2kbd *kbd = NULL, *old_kbd;
	struct ps2mouse *mouse = NULL, *old_mouse;

	if (sbuf_get_version(in, ATKBDC_STATE_VERSION) == 0)
		return snprintf(err, errlen, "%s", in->why), -1;
	atkbdc_read_saved(in, &s);
	if (!in->failed)
		kbd = ps2kbd_load(in);
	if (!in->failed)
		mouse = ps2mouse_load(in);
	if (in->failed) {
		ps2kbd_free(kbd);
		ps2mouse_free(mouse);
		return snprintf(err, errlen, "%s", in->why), -1;
	}
	pthread_mutex_lock(&k->lock);
	memcpy(k->ram, s.ram, RAM_SIZE);
	k->outport = s.outport;
	k->pending_cmd = s.pending_cmd;
	k->a2 = s.a2;
	k->out = s.out;
	k->out_full = s.out_full;
	k->out_aux = s.out_aux;
	k->xlate_break = s.xlate_break;
	memcpy(k->ctrlq, s.ctrlq, sizeof(s.ctrlq));
	k->nctrl = s.nctrl;
	old_kbd = k->kbd;
	old_mouse = k->mouse;
	k->kbd = kbd;
	k->mouse = mouse;
	k->irqs = 0;
	k->reset = false;
	pthread_mutex_unlock(&k->lock);
	ps2kbd_free(old_kbd);
	ps2mouse_free(old_mouse);
	return 0;
}

const struct state_ops atkbdc_state_ops = {
    .save = atkbdc_save,
    .restore = atkbdc_restore,
};

/* ---- the LPC device: ports, interrupts, reset, console, DSDT ---- */

static void lpc_pulse_irq(void *arg, unsigned irq)
{
	struct machine *m = arg;

	machine_irq_line(m, irq, 1);
	machine_irq_line(m, irq, 0);
}

static void lpc_reset(void *arg)
{
	machine_request_exit(arg, KHYVE_EXIT_RESET);
}

static const struct atkbdc_ops lpc_ops = {lpc_pulse_irq, lpc_reset};

static int kbc_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val,
                      uint16_t port)
{
	(void)offset;
	if (size != 1)
		return -1;
	if (is_write)
		atkbdc_write(arg, port, (uint8_t)*val);
	else
		*val = atkbdc_read(arg, port);
	return 0;
}

static int data_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	return kbc_access(arg, offset, size, is_write, val, ATKBDC_DATA_PORT);
}

static int cmd_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	return kbc_access(arg, offset, size, is_write, val, ATKBDC_CMD_PORT);
}

static int atkbdc_init(struct machine *m, char *err, size_t errlen)
{
	struct atkbdc *k = atkbdc_create(&lpc_ops, m);

	if (k == NULL) {
		snprintf(err, errlen, "atkbdc: out of memory");
		return -1;
	}
	if (machine_add_state(m, "lpc.atkbdc", &atkbdc_state_ops, k) < 0) {
		snprintf(err, errlen, "atkbdc: cannot register its saved state");
		return -1;
	}
	/* Two registrations: 0x61 between them is the in-kernel PIT's speaker port. */
	if (machine_register_pio(m, ATKBDC_DATA_PORT, 1, data_access, k, "atkbdc") < 0 ||
	    machine_register_pio(m, ATKBDC_CMD_PORT, 1, cmd_access, k, "atkbdc") < 0)
		return -1;
	if (console_register_kbd(atkbdc_key, k) < 0 || console_register_ptr(atkbdc_pointer, k) < 0)
		log_warn("atkbdc: console has no room for the PS/2 keyboard or mouse");
	if (machine_add_key_sink(m, atkbdc_key, k) < 0)
		log_warn("atkbdc: the API's send-keys cannot reach the PS/2 keyboard");
	return 0;
}

/* PNP0303 (keyboard: both ports, IRQ 1) and PNP0F13 (mouse: IRQ 12), ACPI
 * 6.4 sections 6.1.5 and 6.4.2. */
static void atkbdc_write_dsdt(struct aml *a)
{
	size_t dev = aml_device(a, "KBD"), res;

	aml_name_decl(a, "_HID");
	aml_eisaid(a, "PNP0303");
	aml_name_decl(a, "_CRS");
	res = aml_resource_template(a);
	aml_res_io(a, ATKBDC_DATA_PORT, 1);
	aml_res_io(a, ATKBDC_CMD_PORT, 1);
	aml_res_irq(a, ATKBDC_KBD_IRQ);
	aml_resource_end(a, res);
	aml_close(a, dev);

	dev = aml_device(a, "MOU");
	aml_name_decl(a, "_HID");
	aml_eisaid(a, "PNP0F13");
	aml_name_decl(a, "_CRS");
	res = aml_resource_template(a);
	aml_res_irq(a, ATKBDC_AUX_IRQ);
	aml_resource_end(a, res);
	aml_close(a, dev);
}

LPC_DEVICE(atkbdc) = {
    .name = "atkbdc",
    .descr = "8042 keyboard controller with PS/2 keyboard and mouse (built in)",
    .init = atkbdc_init,
    .write_dsdt = atkbdc_write_dsdt,
};
