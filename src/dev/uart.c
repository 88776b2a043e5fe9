#include "dev/uart.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/chardev.h"
#include "core/machine.h"
#include "dev/lpc.h"
#include "lib/aml.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/tty_escape.h"

/* Register offsets (DLAB = LCR bit 7 selects the divisor latch at 0/1). */
#define REG_DATA     0 /* RBR on read, THR on write; DLL with DLAB */
#define REG_IER      1 /* DLM with DLAB */
#define REG_IIR      2 /* IIR on read, FCR on write */
#define REG_LCR      3
#define REG_MCR      4
#define REG_LSR      5
#define REG_MSR      6
#define REG_SCR      7

#define IER_RDA      0x01 /* received data available */
#define IER_THRE     0x02 /* transmit holding register empty */
#define IER_RLS      0x04 /* receiver line status */
#define IER_MS       0x08 /* modem status */

#define IIR_NONE     0x01
#define IIR_MS       0x00
#define IIR_THRE     0x02
#define IIR_RDA      0x04
#define IIR_RLS      0x06
#define IIR_FIFO     0xc0 /* FIFOs enabled */

#define FCR_ENABLE   0x01
#define FCR_RX_RESET 0x02

#define LCR_DLAB     0x80

#define MCR_DTR      0x01
#define MCR_RTS      0x02
#define MCR_OUT1     0x04
#define MCR_OUT2     0x08
#define MCR_LOOP     0x10

#define LSR_DR       0x01
#define LSR_OE       0x02
#define LSR_THRE     0x20
#define LSR_TEMT     0x40

#define MSR_DCTS     0x01
#define MSR_DDSR     0x02
#define MSR_TERI     0x04
#define MSR_DDCD     0x08
#define MSR_CTS      0x10
#define MSR_DSR      0x20
#define MSR_RI       0x40
#define MSR_DCD      0x80
#define MSR_DELTAS   0x0f

struct uart {
	pthread_mutex_t lock;
	const struct uart_ops *ops;
	void *arg;
	uint8_t ier, lcr, mcr, lsr, msr, scr, fcr, dll, dlm;
	bool thre_pending; /* THR-empty interrupt not yet acknowledged */
	bool irq_level;
	bool rx_was_full;
	uint8_t rx[UART_FIFO_SIZE];
	unsigned rx_head, rx_count;
};

static size_t rx_room(const struct uart *u)
{
	return UART_FIFO_SIZE - u->rx_count;
}

static void rx_push(struct uart *u, uint8_t b)
{
	if (u->rx_count == UART_FIFO_SIZE) {
		u->lsr |= LSR_OE;
		return;
	}
	u->rx[(u->rx_head + u->rx_count) % UART_FIFO_SIZE] = b;
	u->rx_count++;
	if (u->rx_count == UART_FIFO_SIZE)
		u->rx_was_full = true;
}

static uint8_t rx_pop(struct uart *u)
{
	uint8_t b;

	if (u->rx_count == 0)
		return 0;
	b = u->rx[u->rx_head];
	u->rx_head = (u->rx_head + 1) % UART_FIFO_SIZE;
	u->rx_count--;
	return b;
}

/* The interrupt the UART reports in IIR, highest priority first. */
static uint8_t pending_interrupt(const struct uart *u)
{
	if ((u->ier & IER_RLS) && (u->lsr & LSR_OE))
		return IIR_RLS;
	if ((u->ier & IER_RDA) && u->rx_count > 0)
		return IIR_RDA;
	if ((u->ier & IER_THRE) && u->thre_pending)
		return IIR_THRE;
	if ((u->ier & IER_MS) && (u->msr & MSR_DELTAS))
		return IIR_MS;
	return IIR_NONE;
}

/* On a PC the UART's interrupt reaches the PIC only while MCR.OUT2 is set;
 * Linux relies on that in its IRQ probing. */
static void update_irq(struct uart *u)
{
	bool level = pending_interrupt(u) != IIR_NONE && (u->mcr & MCR_OUT2);

	if (level != u->irq_level) {
		u->irq_level = level;
		if (u->ops->set_irq != NULL)
			u->ops->set_irq(u->arg, level);
	}
}

/* Modem status lines: in loopback they follow MCR, else the line is
 * always "connected" (carrier, DSR, CTS). */
static uint8_t modem_lines(const struct uart *u)
{
	uint8_t m = 0;

	if (!(u->mcr & MCR_LOOP))
		return MSR_DCD | MSR_DSR | MSR_CTS;
	if (u->mcr & MCR_RTS)
		m |= MSR_CTS;
	if (u->mcr & MCR_DTR)
		m |= MSR_DSR;
	if (u->mcr & MCR_OUT1)
		m |= MSR_RI;
	if (u->mcr & MCR_OUT2)
		m |= MSR_DCD;
	return m;
}

static void update_msr(struct uart *u)
{
	uint8_t old = u->msr & ~MSR_DELTAS, now = modem_lines(u), delta = 0;

	if ((old ^ now) & MSR_CTS)
		delta |= MSR_DCTS;
	if ((old ^ now) & MSR_DSR)
		delta |= MSR_DDSR;
	if ((old ^ now) & MSR_DCD)
		delta |= MSR_DDCD;
	if ((old & MSR_RI) && !(now & MSR_RI))
		delta |= MSR_TERI;
	u->msr = now | (u->msr & MSR_DELTAS) | delta;
}

static void uart_reset(struct uart *u)
{
	u->ier = u->lcr = u->mcr = u->scr = u->fcr = 0;
	u->dll = 12; /* 9600 baud */
	u->dlm = 0;
	u->lsr = LSR_THRE | LSR_TEMT;
	u->thre_pending = false;
	u->rx_count = u->rx_head = 0;
	u->msr = 0;
	update_msr(u);
	u->msr &= ~MSR_DELTAS;
}

struct uart *uart_create(const struct uart_ops *ops, void *arg)
{
	struct uart *u = calloc(1, sizeof(*u));

	if (u == NULL)
		return NULL;
	pthread_mutex_init(&u->lock, NULL);
	u->ops = ops;
	u->arg = arg;
	uart_reset(u);
	return u;
}

void uart_free(struct uart *u)
{
	if (u == NULL)
		return;
	pthread_mutex_destroy(&u->lock);
	free(u);
}

static void transmit(struct uart *u, uint8_t b)
{
	if (u->mcr & MCR_LOOP)
		rx_push(u, b);
	else if (u->ops->tx != NULL)
		u->ops->tx(u->arg, b);
	/* Transmission is instant: the holding register is empty again. */
	u->thre_pending = true;
}

static uint8_t read_reg(struct uart *u, unsigned off)
{
	uint8_t v, iir;

	switch (off) {
	case REG_DATA:
		if (u->lcr & LCR_DLAB)
			return u->dll;
		v = rx_pop(u);
		if (u->rx_was_full && u->rx_count < UART_FIFO_SIZE) {
			u->rx_was_full = false;
			if (u->ops->rx_room != NULL)
				u->ops->rx_room(u->arg);
		}
		return v;
	case REG_IER:
		return (u->lcr & LCR_DLAB) ? u->dlm : u->ier;
	case REG_IIR:
		iir = pending_interrupt(u);
		/* Reading IIR acknowledges a THR-empty interrupt. */
		if (iir == IIR_THRE)
			u->thre_pending = false;
		return iir | ((u->fcr & FCR_ENABLE) ? IIR_FIFO : 0);
	case REG_LCR:
		return u->lcr;
	case REG_MCR:
		return u->mcr;
	case REG_LSR:
		v = u->lsr | (u->rx_count > 0 ? LSR_DR : 0);
		u->lsr &= ~LSR_OE; /* error bits clear on read */
		return v;
	case REG_MSR:
		v = u->msr;
		u->msr &= ~MSR_DELTAS;
		return v;
	default:
		return u->scr;
	}
}

static void write_ier(struct uart *u, uint8_t val)
{
	/* Enabling THRE interrupts while the THR is empty raises one at once. */
	if (!(u->ier & IER_THRE) && (val & IER_THRE))
		u->thre_pending = true;
	u->ier = val & 0x0f;
}

static void write_reg(struct uart *u, unsigned off, uint8_t val)
{
	switch (off) {
	case REG_DATA:
		if (u->lcr & LCR_DLAB)
			u->dll = val;
		else
			transmit(u, val);
		break;
	case REG_IER:
		if (u->lcr & LCR_DLAB)
			u->dlm = val;
		else
			write_ier(u, val);
		break;
	case REG_IIR: /* FCR */
		if (val & FCR_RX_RESET) {
			u->rx_count = u->rx_head = 0;
			if (u->rx_was_full) {
				u->rx_was_full = false;
				if (u->ops->rx_room != NULL)
					u->ops->rx_room(u->arg);
			}
		}
		u->fcr = val & 0xc9;
		break;
	case REG_LCR:
		u->lcr = val;
		break;
	case REG_MCR:
		u->mcr = val & 0x1f;
		update_msr(u);
		break;
	case REG_LSR:
	case REG_MSR:
		break; /* read-only (factory test writes ignored) */
	default:
		u->scr = val;
		break;
	}
}

uint8_t uart_read(struct uart *u, unsigned offset)
{
	uint8_t v;

	pthread_mutex_lock(&u->lock);
	v = read_reg(u, offset & 7);
	update_irq(u);
	pthread_mutex_unlock(&u->lock);
	return v;
}

void uart_write(struct uart *u, unsigned offset, uint8_t val)
{
	pthread_mutex_lock(&u->lock);
	write_reg(u, offset & 7, val);
	update_irq(u);
	pthread_mutex_unlock(&u->lock);
}

size_t uart_receive(struct uart *u, const uint8_t *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(&u->lock);
	n = len < rx_room(u) ? len : rx_room(u);
	for (size_t i = 0; i < n; i++)
		rx_push(u, buf[i]);
	update_irq(u);
	pthread_mutex_unlock(&u->lock);
	return n;
}

size_t uart_rx_room(struct uart *u)
{
	size_t n;

	pthread_mutex_lock(&u->lock);
	n = rx_room(u);
	pthread_mutex_unlock(&u->lock);
	return n;
}

/* ---- saved state ---- */

#define UART_STATE_VERSION 1

/* The registers of a section, read and checked before any is applied. */
struct uart_saved {
	uint8_t ier, lcr, mcr, lsr, msr, scr, fcr, dll, dlm;
	bool thre_pending, irq_level, rx_was_full;
	uint8_t rx_count;
	uint8_t rx[UART_FIFO_SIZE];
};

static int uart_save(void *arg, struct sbuf *out, char *err, size_t errlen)
{
	struct uart *u = arg;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&u->lock);
	sbuf_put_u16(out, UART_STATE_VERSION);
	sbuf_put_u8(out, u->ier);
	sbuf_put_u8(out, u->lcr);
	sbuf_put_u8(out, u->mcr);
	sbuf_put_u8(out, u->lsr);
	sbuf_put_u8(out, u->msr);
	sbuf_put_u8(out, u->scr);
	sbuf_put_u8(out, u->fcr);
	sbuf_put_u8(out, u->dll);
	sbuf_put_u8(out, u->dlm);
	sbuf_put_bool(out, u->thre_pending);
	sbuf_put_bool(out, u->irq_level);
	sbuf_put_bool(out, u->rx_was_full);
	/* The FIFO oldest byte first, so the restore needs no head index. */
	sbuf_put_u8(out, (uint8_t)u->rx_count);
	for (unsigned i = 0; i < u->rx_count; i++)
		sbuf_put_u8(out, u->rx[(u->rx_head + i) % UART_FIFO_SIZE]);
	pthread_mutex_unlock(&u->lock);
	return 0;
}

static void uart_read_saved(struct sbuf_reader *in, struct uart_saved *s)
{
	s->ier = sbuf_get_u8(in);
	s->lcr = sbuf_get_u8(in);
	s->mcr = sbuf_get_u8(in);
	s->lsr = sbuf_get_u8(in);
	s->msr = sbuf_get_u8(in);
	s->scr = sbuf_get_u8(in);
	s->fcr = sbuf_get_u8(in);
	s->dll = sbuf_get_u8(in);
	s->dlm = sbuf_get_u8(in);
	s->thre_pending = sbuf_get_bool(in);
	s->irq_level = sbuf_get_bool(in);
	s->rx_was_full = sbuf_get_bool(in);
	s->rx_count = sbuf_get_u8(in);
	if (s->rx_count > UART_FIFO_SIZE) {
		sbuf_fail(in, "rx_count %u > %u", s->rx_count, UART_FIFO_SIZE);
		return;
	}
	sbuf_get_bytes(in, s->rx, s->rx_count);
	/* Bits the register model never sets are a foreign or damaged file. */
	if (s->ier & ~0x0f)
		sbuf_fail(in, "ier 0x%02x has reserved bits", s->ier);
	if (s->mcr & ~0x1f)
		sbuf_fail(in, "mcr 0x%02x has reserved bits", s->mcr);
	if (s->fcr & ~0xc9)
		sbuf_fail(in, "fcr 0x%02x has reserved bits", s->fcr);
	if (s->lsr & ~(LSR_OE | LSR_THRE | LSR_TEMT))
		sbuf_fail(in, "lsr 0x%02x has bits the UART derives", s->lsr);
}

/* Copy a checked section into the register model (the lock is the caller's). */
static void uart_apply_saved(struct uart *u, const struct uart_saved *s)
{
	u->ier = s->ier;
	u->lcr = s->lcr;
	u->mcr = s->mcr;
	u->lsr = s->lsr;
	u->msr = s->msr;
	u->scr = s->scr;
	u->fcr = s->fcr;
	u->dll = s->dll;
	u->dlm = s->dlm;
	u->thre_pending = s->thre_pending;
	u->rx_was_full = s->rx_was_full;
	memcpy(u->rx, s->rx, s->rx_count);
	u->rx_head = 0;
	u->rx_count = s->rx_count;
}

/* The interrupt level the registers of `s` give. */
static bool uart_saved_level(const struct uart_saved *s)
{
	struct uart probe = {0}; /* registers only: its lock is never taken */

	uart_apply_saved(&probe, s);
	return pending_interrupt(&probe) != IIR_NONE && (probe.mcr & MCR_OUT2);
}

static int uart_restore(void *arg, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct uart *u = arg;
	struct uart_saved s;

	if (sbuf_get_version(in, UART_STATE_VERSION) == 0)
		return snprintf(err, errlen, "%s", in->why), -1;
	uart_read_saved(in, &s);
	if (!in->failed && uart_saved_level(&s) != s.irq_level)
		sbuf_fail(in, "irq_level %d does not follow from the registers", s.irq_level);
	if (in->failed)
		return snprintf(err, errlen, "%s", in->why), -1;
	pthread_mutex_lock(&u->lock);
	uart_apply_saved(u, &s);
	/* Re-drive the line: the new process's PIC/IOAPIC input starts low. */
	u->irq_level = s.irq_level;
	if (u->ops->set_irq != NULL)
		u->ops->set_irq(u->arg, s.irq_level);
	pthread_mutex_unlock(&u->lock);
	return 0;
}

const struct state_ops uart_state_ops = {
    .save = uart_save,
    .restore = uart_restore,
};

/* ---- ISA wiring: ports, IRQ line and character back end ---- */

struct uart_isa {
	struct machine *m;
	struct uart *uart;
	struct chardev *cd;
	unsigned irq;
	char name[8];
};

static const struct {
	uint16_t port;
	unsigned irq;
} com_ports[] = {{0x3f8, 4}, {0x2f8, 3}, {0x3e8, 4}, {0x2e8, 3}};

static void isa_set_irq(void *arg, bool level)
{
	struct uart_isa *ui = arg;

	machine_irq_line(ui->m, ui->irq, level ? 1 : 0);
}

/* THR bytes join the back end's ring; the event loop writes them in
 * batches (a page-sized `rep outsb` exit is one write), so the vCPU
 * makes no write(2) per byte and never waits for the reader. */
static void isa_tx(void *arg, uint8_t byte)
{
	struct uart_isa *ui = arg;

	chardev_queue(ui->cd, &byte, 1);
}

static void isa_rx_room(void *arg)
{
	struct uart_isa *ui = arg;

	chardev_resume_input(ui->cd);
}

static const struct uart_ops isa_ops = {isa_set_irq, isa_tx, isa_rx_room};

/* Event loop: the back end has input; move what fits into the FIFO. */
static void isa_input_ready(void *arg)
{
	struct uart_isa *ui = arg;
	uint8_t buf[UART_FIFO_SIZE];
	size_t room = uart_rx_room(ui->uart), n;

	if (room == 0) {
		chardev_pause_input(ui->cd);
		return;
	}
	n = chardev_read(ui->cd, buf, room);
	if (n > 0)
		uart_receive(ui->uart, buf, n);
}

static int isa_port_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct uart_isa *ui = arg;

	if (size != 1)
		return -1;
	if (is_write)
		uart_write(ui->uart, (unsigned)offset, (uint8_t)*val);
	else
		*val = uart_read(ui->uart, (unsigned)offset);
	return 0;
}

/* The user typed `~.` on stdio: stop at once, as pulling the plug. */
static void isa_escape_quit(void *arg)
{
	struct uart_isa *ui = arg;

	log_info("%s: escape typed: powering off", ui->name);
	machine_request_exit(ui->m, KHYVE_EXIT_POWEROFF);
}

/* lpc.comN.escape: the stdio escape character, or none. */
static int isa_setup_escape(struct uart_isa *ui, char *err, size_t errlen)
{
	char key[32];
	const char *value;
	int ch;

	snprintf(key, sizeof(key), "lpc.%s.escape", ui->name);
	value = config_get(key);
	ch = value != NULL ? tty_escape_parse(value) : TTY_ESCAPE_DEFAULT;
	if (ch < -1) {
		snprintf(err, errlen, "bad %s '%s' (want none or one character, e.g. ~)", key,
		         value);
		return -1;
	}
	chardev_set_escape(ui->cd, ch, isa_escape_quit, ui);
	return 0;
}

/* The COM port's section, "lpc.com1" .. "lpc.com4". */
static int uart_add_state(struct machine *m, struct uart_isa *ui, char *err, size_t errlen)
{
	char name[STATE_NAME_LEN];

	snprintf(name, sizeof(name), "lpc.%s", ui->name);
	if (machine_add_state(m, name, &uart_state_ops, ui->uart) < 0) {
		snprintf(err, errlen, "%s: cannot register its saved state", ui->name);
		return -1;
	}
	return 0;
}

int uart_isa_init(struct machine *m, unsigned index, const char *backend, char *err, size_t errlen)
{
	struct uart_isa *ui = calloc(1, sizeof(*ui));

	if (ui == NULL || index >= sizeof(com_ports) / sizeof(com_ports[0])) {
		snprintf(err, errlen, "cannot create com%u", index + 1);
		free(ui);
		return -1;
	}
	ui->m = m;
	ui->irq = com_ports[index].irq;
	snprintf(ui->name, sizeof(ui->name), "com%u", index + 1);
	ui->uart = uart_create(&isa_ops, ui);
	ui->cd = chardev_open(backend, m->loop, isa_input_ready, ui, err, errlen);
	if (ui->cd == NULL) { /* nothing refers to ui yet: free it (LeakSanitizer) */
		if (err[0] == '\0')
			snprintf(err, errlen, "cannot create %s", ui->name);
		uart_free(ui->uart);
		free(ui);
		return -1;
	}
	chardev_set_name(ui->cd, ui->name);
	if (isa_setup_escape(ui, err, errlen) < 0)
		return -1;
	if (ui->uart == NULL || ui->cd == NULL ||
	    machine_register_pio(m, com_ports[index].port, UART_NREGS, isa_port_access, ui,
	                         ui->name) < 0) {
		if (ui->cd == NULL && err[0] == '\0')
			snprintf(err, errlen, "cannot create %s", ui->name);
		return -1;
	}
	return uart_add_state(m, ui, err, errlen);
}

/* The back end of COM port `index` (0 = COM1), or NULL when not configured. */
static const char *com_backend(unsigned index)
{
	char key[32];

	snprintf(key, sizeof(key), "lpc.com%u.path", index + 1);
	return config_get(key);
}

uint16_t uart_console_port(void)
{
	return com_backend(0) != NULL ? com_ports[0].port : 0;
}

/* COMn as PNP0501 devices with their port and IRQ (ACPI 6.4 section 6.1.5). */
static void uart_write_dsdt(struct aml *a)
{
	for (unsigned i = 0; i < sizeof(com_ports) / sizeof(com_ports[0]); i++) {
		char name[5] = "COM0";

		if (com_backend(i) == NULL)
			continue;
		name[3] = (char)('1' + i);
		aml_isa_device(a, name, "PNP0501", i + 1, com_ports[i].port, UART_NREGS,
		               (int)com_ports[i].irq);
	}
}

/* -l comN,BACKEND: the LPC device hook. */
static int uart_lpc_init(struct machine *m, char *err, size_t errlen)
{
	for (unsigned i = 0; i < sizeof(com_ports) / sizeof(com_ports[0]); i++) {
		char why[200] = "";
		const char *path = com_backend(i);

		if (path == NULL)
			continue;
		if (uart_isa_init(m, i, path, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "com%u: %s", i + 1, why);
			return -1;
		}
	}
	return 0;
}

static const char *const uart_keys[] = {"com[1-4].path", "com[1-4].escape", NULL};

LPC_DEVICE(uart) = {
    .name = "com",
    .option = "comN",
    .keys = uart_keys,
    .needs_bridge = true,
    .descr = "16550A UART COM1-COM4 (ports 0x3f8, 0x2f8, 0x3e8, 0x2e8)",
    .usage = "  -l comN,BACKEND  (N = 1..4)\n"
             "  stdio            khyve's terminal (raw mode, restored on exit)\n"
             "  /dev/...         a tty device\n"
             "  tcp=IP:PORT      listen on a TCP port\n"
             "  pty=LINK         a new pty; LINK links to its slave\n"
             "  -o lpc.comN.escape=none|C  stdio's escape character (default ~;\n"
             "                   ~. powers off, ~? lists the escapes)\n",
    .init = uart_lpc_init,
    .write_dsdt = uart_write_dsdt,
};
