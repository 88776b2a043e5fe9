/* Unit tests for the 16550A register model (src/dev/uart.h). */
#include "unit.h"

#include "dev/uart.h"

/* Registers. */
#define RBR 0
#define THR 0
#define DLL 0
#define IER 1
#define DLM 1
#define IIR 2
#define FCR 2
#define LCR 3
#define MCR 4
#define LSR 5
#define MSR 6
#define SCR 7

/* What the fake wiring saw. */
struct wire {
	bool irq;
	unsigned irq_calls, irq_raises;
	uint8_t tx[256];
	size_t ntx;
	unsigned rx_room_calls;
};

static void fake_set_irq(void *arg, bool level)
{
	struct wire *w = arg;

	w->irq = level;
	w->irq_calls++;
	w->irq_raises += level;
}

static void fake_tx(void *arg, uint8_t byte)
{
	struct wire *w = arg;

	if (w->ntx < sizeof(w->tx))
		w->tx[w->ntx++] = byte;
}

static void fake_rx_room(void *arg)
{
	struct wire *w = arg;

	w->rx_room_calls++;
}

static const struct uart_ops ops = {fake_set_irq, fake_tx, fake_rx_room};

struct fixture {
	struct wire w;
	struct uart *u;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	f->u = uart_create(&ops, &f->w);
	if (f->u == NULL) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	uart_free(f->u);
	free(f);
	return 0;
}

static size_t receive_str(struct uart *u, const char *s)
{
	return uart_receive(u, (const uint8_t *)s, strlen(s));
}

static void test_reset_values(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;

	assert_int_equal(uart_read(u, LSR), 0x60); /* THRE | TEMT */
	assert_int_equal(uart_read(u, IIR), 0x01); /* no interrupt, FIFOs off */
	assert_int_equal(uart_read(u, IER), 0x00);
	assert_int_equal(uart_read(u, LCR), 0x00);
	assert_int_equal(uart_read(u, MCR), 0x00);
	assert_int_equal(uart_read(u, SCR), 0x00);
	/* Not in loopback: the line looks connected (DCD, DSR, CTS), no deltas. */
	assert_int_equal(uart_read(u, MSR), 0xb0);
	assert_int_equal(uart_read(u, RBR), 0x00); /* empty */
	assert_int_equal(uart_rx_room(u), UART_FIFO_SIZE);
	assert_false(f->w.irq);
	assert_int_equal(f->w.irq_calls, 0);
	assert_int_equal(f->w.ntx, 0);
	/* Register offsets wrap at 8. */
	uart_write(u, SCR + 8, 0x5a);
	assert_int_equal(uart_read(u, SCR), 0x5a);
}

static void test_dlab_and_scratch(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;

	uart_write(u, SCR, 0xa5);
	assert_int_equal(uart_read(u, SCR), 0xa5);
	uart_write(u, IER, 0x05);

	/* DLAB: offsets 0 and 1 are the divisor latch. */
	uart_write(u, LCR, 0x83);
	assert_int_equal(uart_read(u, LCR), 0x83);
	assert_int_equal(uart_read(u, DLL), 12); /* 9600 baud at reset */
	assert_int_equal(uart_read(u, DLM), 0);
	uart_write(u, DLL, 0x01); /* 115200 */
	uart_write(u, DLM, 0x02);
	assert_int_equal(uart_read(u, DLL), 0x01);
	assert_int_equal(uart_read(u, DLM), 0x02);
	assert_int_equal(f->w.ntx, 0); /* DLL writes do not transmit */

	/* Back to normal: IER and data are visible again, unchanged. */
	uart_write(u, LCR, 0x03);
	assert_int_equal(uart_read(u, IER), 0x05);
	uart_write(u, THR, 'x');
	assert_int_equal(f->w.ntx, 1);
	assert_int_equal(f->w.tx[0], 'x');
	uart_write(u, LCR, 0x83);
	assert_int_equal(uart_read(u, DLL), 0x01);
	assert_int_equal(uart_read(u, DLM), 0x02);
	assert_int_equal(uart_read(u, SCR), 0xa5);
	uart_write(u, LCR, 0x03);

	/* Received data is not readable through DLL. */
	assert_int_equal(receive_str(u, "Q"), 1);
	uart_write(u, LCR, 0x80);
	assert_int_equal(uart_read(u, DLL), 0x01);
	uart_write(u, LCR, 0x00);
	assert_int_equal(uart_read(u, RBR), 'Q');
}

static void test_tx(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;
	const char *msg = "hello, world\r\n";

	for (const char *p = msg; *p; p++) {
		uart_write(u, THR, (uint8_t)*p);
		/* Transmission is instant: THR empty again. */
		assert_int_equal(uart_read(u, LSR) & 0x60, 0x60);
	}
	assert_int_equal(f->w.ntx, strlen(msg));
	assert_memory_equal(f->w.tx, msg, strlen(msg));
	/* No interrupts enabled, none raised. */
	assert_int_equal(f->w.irq_calls, 0);
	/* All 256 byte values pass through. */
	f->w.ntx = 0;
	for (unsigned b = 0; b < 256; b++)
		uart_write(u, THR, (uint8_t)b);
	assert_int_equal(f->w.ntx, 256);
	for (unsigned b = 0; b < 256; b++)
		assert_int_equal(f->w.tx[b], b);
}

static void test_thre_interrupt(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;

	uart_write(u, MCR, 0x08); /* OUT2: interrupts reach the PIC */
	assert_false(f->w.irq);
	/* Enabling THRE while the THR is empty raises it at once. */
	uart_write(u, IER, 0x02);
	assert_true(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0x02);
	/* Reading IIR acknowledged it. */
	assert_false(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0x01);
	/* Each write raises it again once the byte is "sent". */
	uart_write(u, THR, 'a');
	assert_true(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0x02);
	assert_false(f->w.irq);
	/* Disabling the source drops the line; a pending THRE is not reported. */
	uart_write(u, THR, 'b');
	assert_true(f->w.irq);
	uart_write(u, IER, 0x00);
	assert_false(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0x01);
	/* Re-enabling raises it again (THR empty). */
	uart_write(u, IER, 0x02);
	assert_true(f->w.irq);
	/* IER keeps only its four defined bits. */
	uart_write(u, IER, 0xff);
	assert_int_equal(uart_read(u, IER), 0x0f);
}

static void test_rx_fifo(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;
	uint8_t buf[40];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)('A' + i);
	assert_int_equal(uart_receive(u, buf, 0), 0);
	assert_int_equal(uart_read(u, LSR) & 0x01, 0); /* no data */
	assert_int_equal(uart_receive(u, buf, 5), 5);
	assert_int_equal(uart_read(u, LSR) & 0x01, 0x01); /* DR */
	assert_int_equal(uart_rx_room(u), UART_FIFO_SIZE - 5);
	/* Only what fits is taken. */
	assert_int_equal(uart_receive(u, buf + 5, sizeof(buf) - 5), UART_FIFO_SIZE - 5);
	assert_int_equal(uart_rx_room(u), 0);
	/* Full: nothing more fits, and that is not an overrun. */
	assert_int_equal(uart_receive(u, buf, 1), 0);
	assert_int_equal(uart_read(u, LSR) & 0x02, 0);
	/* FIFO order. */
	for (unsigned i = 0; i < UART_FIFO_SIZE; i++) {
		assert_int_equal(uart_read(u, LSR) & 0x01, 0x01);
		assert_int_equal(uart_read(u, RBR), 'A' + i);
	}
	assert_int_equal(uart_read(u, LSR) & 0x01, 0);
	assert_int_equal(uart_read(u, RBR), 0); /* empty reads 0 */
	assert_int_equal(uart_rx_room(u), UART_FIFO_SIZE);

	/* Wrap-around of the ring. */
	for (int round = 0; round < 5; round++) {
		assert_int_equal(uart_receive(u, buf, 7), 7);
		for (int i = 0; i < 7; i++)
			assert_int_equal(uart_read(u, RBR), buf[i]);
	}
}

static void test_rda_interrupt_priority(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;

	uart_write(u, MCR, 0x08);
	uart_write(u, IER, 0x01); /* RDA only */
	assert_false(f->w.irq);
	assert_int_equal(receive_str(u, "xy"), 2);
	assert_true(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0x04);
	/* Reading IIR does not clear RDA; reading the data does. */
	assert_true(f->w.irq);
	assert_int_equal(uart_read(u, RBR), 'x');
	assert_true(f->w.irq);
	assert_int_equal(uart_read(u, RBR), 'y');
	assert_false(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0x01);

	/* RDA outranks THRE; THRE shows once the data is read. */
	uart_write(u, IER, 0x03);
	assert_int_equal(receive_str(u, "z"), 1);
	assert_int_equal(uart_read(u, IIR), 0x04);
	assert_int_equal(uart_read(u, IIR), 0x04); /* THRE not acknowledged by that */
	assert_int_equal(uart_read(u, RBR), 'z');
	assert_true(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0x02);
	assert_false(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0x01);
}

static void test_out2_gates_irq(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;

	uart_write(u, IER, 0x01);
	assert_int_equal(receive_str(u, "a"), 1);
	/* Pending, but OUT2 is clear: the line stays low. */
	assert_int_equal(uart_read(u, IIR), 0x04);
	assert_false(f->w.irq);
	assert_int_equal(f->w.irq_calls, 0);
	uart_write(u, MCR, 0x08);
	assert_true(f->w.irq);
	uart_write(u, MCR, 0x03); /* DTR|RTS, no OUT2 */
	assert_false(f->w.irq);
	uart_write(u, MCR, 0x0b);
	assert_true(f->w.irq);
	assert_int_equal(uart_read(u, RBR), 'a');
	assert_false(f->w.irq);
	/* The callback fires only on changes. */
	unsigned calls = f->w.irq_calls;
	uart_write(u, SCR, 1);
	(void)uart_read(u, LSR);
	assert_int_equal(f->w.irq_calls, calls);
	/* MCR keeps its five defined bits. */
	uart_write(u, MCR, 0xff);
	assert_int_equal(uart_read(u, MCR), 0x1f);
}

static void test_loopback(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;

	uart_write(u, MCR, 0x10); /* LOOP */
	/* Modem inputs follow the outputs: all clear now. */
	assert_int_equal(uart_read(u, MSR) & 0xf0, 0x00);
	uart_write(u, MCR, 0x10 | 0x02); /* RTS -> CTS */
	assert_int_equal(uart_read(u, MSR) & 0xf0, 0x10);
	uart_write(u, MCR, 0x10 | 0x01); /* DTR -> DSR */
	assert_int_equal(uart_read(u, MSR) & 0xf0, 0x20);
	uart_write(u, MCR, 0x10 | 0x04); /* OUT1 -> RI */
	assert_int_equal(uart_read(u, MSR) & 0xf0, 0x40);
	uart_write(u, MCR, 0x10 | 0x08); /* OUT2 -> DCD */
	assert_int_equal(uart_read(u, MSR) & 0xf0, 0x80);
	uart_write(u, MCR, 0x1f);
	assert_int_equal(uart_read(u, MSR) & 0xf0, 0xf0);

	/* Transmitted bytes come back as received ones, not to the back end. */
	uart_write(u, THR, 'L');
	uart_write(u, THR, 'B');
	assert_int_equal(f->w.ntx, 0);
	assert_int_equal(uart_read(u, LSR) & 0x01, 0x01);
	assert_int_equal(uart_read(u, RBR), 'L');
	assert_int_equal(uart_read(u, RBR), 'B');
	assert_int_equal(uart_read(u, LSR) & 0x01, 0);

	/* Leaving loopback: output goes out again, lines look connected. */
	uart_write(u, MCR, 0x00);
	uart_write(u, THR, 'O');
	assert_int_equal(f->w.ntx, 1);
	assert_int_equal(f->w.tx[0], 'O');
	assert_int_equal(uart_read(u, MSR) & 0xf0, 0xb0);
}

static void test_msr_deltas(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;
	uint8_t msr;

	/* Entering loopback with all outputs low drops CTS, DSR and DCD. */
	uart_write(u, MCR, 0x10);
	msr = uart_read(u, MSR);
	assert_int_equal(msr & 0x0f, 0x01 | 0x02 | 0x08); /* DCTS, DDSR, DDCD */
	/* Deltas clear on read. */
	assert_int_equal(uart_read(u, MSR) & 0x0f, 0);
	/* RI trailing edge sets TERI; the leading edge does not. */
	uart_write(u, MCR, 0x14);
	assert_int_equal(uart_read(u, MSR) & 0x0f, 0);
	uart_write(u, MCR, 0x10);
	assert_int_equal(uart_read(u, MSR) & 0x0f, 0x04);
	/* A modem-status interrupt when enabled. */
	uart_write(u, IER, 0x08);
	uart_write(u, MCR, 0x1a); /* loop, RTS, OUT2: CTS and DCD change */
	assert_true(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0x00);
	(void)uart_read(u, MSR);
	assert_false(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0x01);
}

static void test_fcr(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;

	uart_write(u, FCR, 0x01); /* enable FIFOs */
	assert_int_equal(uart_read(u, IIR), 0xc1);
	uart_write(u, MCR, 0x08);
	uart_write(u, IER, 0x01);
	assert_int_equal(receive_str(u, "abc"), 3);
	assert_int_equal(uart_read(u, IIR), 0xc4);
	assert_true(f->w.irq);
	/* RX reset empties the FIFO and drops the interrupt. */
	uart_write(u, FCR, 0x03);
	assert_int_equal(uart_read(u, LSR) & 0x01, 0);
	assert_int_equal(uart_rx_room(u), UART_FIFO_SIZE);
	assert_false(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0xc1);
	/* FIFOs off again. */
	uart_write(u, FCR, 0x00);
	assert_int_equal(uart_read(u, IIR), 0x01);
	/* A TX reset alone does not touch received data. */
	assert_int_equal(receive_str(u, "d"), 1);
	uart_write(u, FCR, 0x05);
	assert_int_equal(uart_read(u, RBR), 'd');
	/* FCR is write-only: writing it does not change what LCR/IER read. */
	assert_int_equal(uart_read(u, IER), 0x01);
}

static void test_rx_room_callback(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;
	uint8_t buf[UART_FIFO_SIZE];

	memset(buf, 'r', sizeof(buf));
	/* Not full yet: no callback when reading. */
	assert_int_equal(uart_receive(u, buf, 4), 4);
	(void)uart_read(u, RBR);
	assert_int_equal(f->w.rx_room_calls, 0);
	/* Fill it up; the first read after that says there is room. */
	assert_int_equal(uart_receive(u, buf, sizeof(buf)), UART_FIFO_SIZE - 3);
	assert_int_equal(uart_rx_room(u), 0);
	assert_int_equal(f->w.rx_room_calls, 0);
	(void)uart_read(u, RBR);
	assert_int_equal(f->w.rx_room_calls, 1);
	assert_int_equal(uart_rx_room(u), 1);
	/* Only once per full episode. */
	(void)uart_read(u, RBR);
	(void)uart_read(u, RBR);
	assert_int_equal(f->w.rx_room_calls, 1);
	/* Full again: another callback. */
	assert_int_equal(uart_receive(u, buf, sizeof(buf)), 3);
	assert_int_equal(uart_rx_room(u), 0);
	(void)uart_read(u, RBR);
	assert_int_equal(f->w.rx_room_calls, 2);
	/* Reading LSR or IIR is not reading data. */
	while (uart_rx_room(u) < UART_FIFO_SIZE)
		(void)uart_read(u, RBR);
	assert_int_equal(uart_receive(u, buf, sizeof(buf)), UART_FIFO_SIZE);
	(void)uart_read(u, LSR);
	(void)uart_read(u, IIR);
	assert_int_equal(f->w.rx_room_calls, 2);
}

/*
 * uart.h: rx_room is called when "the receive FIFO has room again after
 * being full"; the back end stops reading input until then.
 *
 * Regression: an FCR write with RX reset (bit 1) empties a full FIFO without
 * calling rx_room, so the back end stays paused.  A driver that then polls
 * LSR.DR before reading RBR (as firmware and polled consoles do) never reads
 * RBR, and serial input is stuck for good.  Fix: in write_reg(), case
 * REG_IIR, after resetting the FIFO: if (u->rx_was_full) { u->rx_was_full =
 * false; call ops->rx_room }.
 */
static void test_fcr_reset_resumes_input(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;
	uint8_t buf[UART_FIFO_SIZE];

	memset(buf, 'r', sizeof(buf));
	assert_int_equal(uart_receive(u, buf, sizeof(buf)), UART_FIFO_SIZE);
	assert_int_equal(uart_rx_room(u), 0);
	uart_write(u, FCR, 0x03); /* enable + RX reset */
	assert_int_equal(uart_rx_room(u), UART_FIFO_SIZE);
	assert_int_equal(uart_read(u, LSR) & 0x01, 0); /* nothing to read: no RBR read */
	assert_int_equal(f->w.rx_room_calls, 1);
}

static void test_overrun(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;
	uint8_t lsr;

	/* uart_receive never overruns: it takes what fits. */
	for (int i = 0; i < UART_FIFO_SIZE; i++)
		assert_int_equal(receive_str(u, "x"), 1);
	assert_int_equal(receive_str(u, "y"), 0);
	assert_int_equal(uart_read(u, LSR) & 0x02, 0);

	/* Loopback can overrun the full FIFO: OE, RLS interrupt. */
	uart_write(u, MCR, 0x18); /* LOOP | OUT2 */
	uart_write(u, IER, 0x05); /* RLS | RDA */
	uart_write(u, THR, 'z');
	assert_true(f->w.irq);
	assert_int_equal(uart_read(u, IIR), 0x06); /* RLS outranks RDA */
	lsr = uart_read(u, LSR);
	assert_int_equal(lsr & 0x03, 0x03); /* OE | DR */
	/* Reading LSR cleared OE. */
	assert_int_equal(uart_read(u, LSR) & 0x02, 0);
	assert_int_equal(uart_read(u, IIR), 0x04);
	/* The overrun byte was lost; the old ones are intact. */
	for (int i = 0; i < UART_FIFO_SIZE; i++)
		assert_int_equal(uart_read(u, RBR), 'x');
	assert_int_equal(uart_read(u, LSR) & 0x01, 0);
}

static void test_readonly_registers(void **state)
{
	struct fixture *f = *state;
	struct uart *u = f->u;

	uart_write(u, LSR, 0x00);
	assert_int_equal(uart_read(u, LSR), 0x60);
	uart_write(u, MSR, 0x0f);
	assert_int_equal(uart_read(u, MSR), 0xb0);
	/* Writes to every register with every value never crash or transmit
	 * outside THR. */
	for (unsigned reg = 1; reg < 8; reg++)
		for (unsigned v = 0; v < 256; v++)
			if (reg != LCR)
				uart_write(u, reg, (uint8_t)v);
	assert_int_equal(f->w.ntx, 0);
}

static void test_null_callbacks(void **state)
{
	static const struct uart_ops none = {NULL, NULL, NULL};
	struct uart *u = uart_create(&none, NULL);

	(void)state;
	assert_non_null(u);
	uart_write(u, MCR, 0x08);
	uart_write(u, IER, 0x0f);
	uart_write(u, THR, 'x');
	for (int i = 0; i < 20; i++)
		(void)receive_str(u, "y");
	for (int i = 0; i < 20; i++)
		(void)uart_read(u, RBR);
	(void)uart_read(u, IIR);
	uart_free(u);
	uart_free(NULL);
}

/* ---- saved state (uart_state_ops) ---- */

/* Save `u` into `b` (freed by the caller). */
static void save_uart(struct uart *u, struct sbuf *b)
{
	char err[128] = "";

	*b = (struct sbuf){0};
	assert_int_equal(uart_state_ops.save(u, b, err, sizeof(err)), 0);
	assert_false(b->failed);
}

/* Restore `len` bytes into `u`: the participant's result, with the
 * caller's end check folded in (trailing bytes fail too). */
static int restore_uart(struct uart *u, const uint8_t *p, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader r;

	sbuf_reader_init(&r, p, len);
	if (uart_state_ops.restore(u, &r, err, errlen) < 0)
		return -1;
	return sbuf_reader_done(&r, "lpc.com1", err, errlen);
}

/* A UART driven into a state with something in each register. */
static void drive_uart(struct uart *u)
{
	uart_write(u, LCR, 0x83);
	uart_write(u, DLL, 0x01);
	uart_write(u, DLM, 0x00);
	uart_write(u, LCR, 0x03);
	uart_write(u, FCR, 0x01);
	uart_write(u, IER, 0x01);
	uart_write(u, MCR, 0x0b); /* DTR, RTS, OUT2 */
	uart_write(u, SCR, 0x5a);
	assert_int_equal(receive_str(u, "hello"), 5);
	assert_int_equal(uart_read(u, RBR), 'h'); /* the FIFO's head is not at 0 */
}

static void test_state_round_trip(void **state)
{
	struct fixture *f = *state;
	struct wire w2 = {0};
	struct uart *u2 = uart_create(&ops, &w2);
	struct sbuf b;
	char err[128] = "";

	assert_non_null(u2);
	drive_uart(f->u);
	assert_true(f->w.irq);
	save_uart(f->u, &b);
	assert_int_equal(restore_uart(u2, b.data, b.len, err, sizeof(err)), 0);
	/* The interrupt line of the new UART is driven high at once. */
	assert_true(w2.irq);
	assert_int_equal(w2.irq_raises, 1);
	/* Both answer every register alike, the queued bytes come out. */
	assert_int_equal(uart_read(u2, LCR), 0x03);
	assert_int_equal(uart_read(u2, IER), 0x01);
	assert_int_equal(uart_read(u2, MCR), 0x0b);
	assert_int_equal(uart_read(u2, SCR), 0x5a);
	assert_int_equal(uart_read(u2, MSR), uart_read(f->u, MSR));
	assert_int_equal(uart_read(u2, IIR), 0xc4); /* data available, FIFOs on */
	assert_int_equal(uart_read(u2, LSR), uart_read(f->u, LSR));
	for (const char *c = "ello"; *c != '\0'; c++) {
		assert_int_equal(uart_read(f->u, RBR), *c);
		assert_int_equal(uart_read(u2, RBR), *c);
	}
	assert_false(w2.irq); /* drained */
	assert_int_equal(uart_rx_room(u2), UART_FIFO_SIZE);
	uart_write(u2, LCR, 0x83);
	assert_int_equal(uart_read(u2, DLL), 0x01);
	uart_write(u2, LCR, 0x03);
	uart_write(u2, THR, '!');
	assert_int_equal(w2.ntx, 1);
	assert_int_equal(w2.tx[0], '!');
	sbuf_free(&b);
	uart_free(u2);
}

static void test_state_full_fifo(void **state)
{
	struct fixture *f = *state;
	struct wire w2 = {0};
	struct uart *u2 = uart_create(&ops, &w2);
	struct sbuf b;
	char err[128] = "";

	assert_non_null(u2);
	assert_int_equal(receive_str(f->u, "0123456789abcdefXYZ"), UART_FIFO_SIZE);
	save_uart(f->u, &b);
	assert_int_equal(restore_uart(u2, b.data, b.len, err, sizeof(err)), 0);
	assert_false(w2.irq); /* IER and OUT2 are off */
	assert_int_equal(w2.irq_calls, 1);
	assert_int_equal(uart_rx_room(u2), 0);
	/* rx_was_full came along: the first read asks the back end for more. */
	assert_int_equal(uart_read(u2, RBR), '0');
	assert_int_equal(w2.rx_room_calls, 1);
	sbuf_free(&b);
	uart_free(u2);
}

static void test_state_hostile(void **state)
{
	struct fixture *f = *state;
	struct wire w2 = {0};
	struct uart *u2 = uart_create(&ops, &w2);
	struct sbuf b;
	uint8_t bad[64];
	char err[128];

	assert_non_null(u2);
	drive_uart(f->u);
	save_uart(f->u, &b);
	assert_true(b.len <= sizeof(bad));
	/* Every truncation fails and changes nothing. */
	for (size_t n = 0; n < b.len; n++) {
		err[0] = '\0';
		assert_int_equal(restore_uart(u2, b.data, n, err, sizeof(err)), -1);
		assert_true(err[0] != '\0');
	}
	assert_int_equal(uart_read(u2, SCR), 0);
	assert_int_equal(w2.irq_calls, 0);
	/* A newer version. */
	memcpy(bad, b.data, b.len);
	bad[0] = 2;
	assert_int_equal(restore_uart(u2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "version");
	/* rx_count past the FIFO (offset 14). */
	memcpy(bad, b.data, b.len);
	bad[14] = 17;
	assert_int_equal(restore_uart(u2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "rx_count 17 > 16");
	/* An interrupt level the registers do not give (irq_level, offset 12). */
	memcpy(bad, b.data, b.len);
	bad[12] = 0;
	assert_int_equal(restore_uart(u2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "irq_level");
	/* A bool that is not 0 or 1, reserved IER bits. */
	memcpy(bad, b.data, b.len);
	bad[11] = 7;
	assert_int_equal(restore_uart(u2, bad, b.len, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	bad[2] = 0xff;
	assert_int_equal(restore_uart(u2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "ier");
	/* Nothing of it was applied; the UART still works. */
	assert_int_equal(uart_read(u2, SCR), 0);
	assert_int_equal(uart_read(u2, LSR), 0x60);
	assert_int_equal(w2.irq_calls, 0);
	/* A byte left over: the caller's end check refuses the section (the
	 * restore as a whole then fails; the fields may have been applied). */
	memcpy(bad, b.data, b.len);
	bad[b.len] = 0;
	assert_int_equal(restore_uart(u2, bad, b.len + 1, err, sizeof(err)), -1);
	assert_contains(err, "left over");
	sbuf_free(&b);
	uart_free(u2);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_reset_values),
	    T(test_dlab_and_scratch),
	    T(test_tx),
	    T(test_thre_interrupt),
	    T(test_rx_fifo),
	    T(test_rda_interrupt_priority),
	    T(test_out2_gates_irq),
	    T(test_loopback),
	    T(test_msr_deltas),
	    T(test_fcr),
	    T(test_rx_room_callback),
	    T(test_fcr_reset_resumes_input),
	    T(test_overrun),
	    T(test_readonly_registers),
	    T(test_state_round_trip),
	    T(test_state_full_fifo),
	    T(test_state_hostile),
	    cmocka_unit_test(test_null_callbacks),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
