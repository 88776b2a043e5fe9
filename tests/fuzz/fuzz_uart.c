/*
 * libFuzzer target for the 16550A UART register model (src/dev/uart.c):
 * guest register accesses interleaved with bytes arriving from the back
 * end, as a guest driver and a console produce them.  The interrupt line
 * and transmitted bytes are checked for what the model promises: a byte
 * goes out only on a THR write, the line is driven only when it changes.
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bits 2:0
 * of the opcode are the register offset, bits 4:3 pick:
 *   0 register read
 *   1 register write  u8 value
 *   2 receive         u8 length (n%32), that many bytes
 *   3 ask for room    (uart_rx_room; must not exceed the FIFO)
 * Each input gets a fresh UART.
 */
#include "fuzz.h"

#include "dev/uart.h"

static bool irq_level, writing;
static unsigned tx_bytes;

static void set_irq(void *arg, bool level)
{
	(void)arg;
	irq_level = level;
}

static void tx(void *arg, uint8_t byte)
{
	(void)arg;
	(void)byte;
	/* Transmission happens on the guest's THR write, nowhere else. */
	if (!writing)
		abort();
	tx_bytes++;
}

static void rx_room(void *arg)
{
	(void)arg;
}

static const struct uart_ops ops = {set_irq, tx, rx_room};

FUZZ_TARGET(fuzz_no_setup)

static void fuzz_one(struct fz *z)
{
	struct uart *u = uart_create(&ops, NULL);
	uint8_t buf[32];

	if (u == NULL)
		abort();
	irq_level = false;
	tx_bytes = 0;
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		unsigned reg = op & 7;

		switch ((op >> 3) & 3) {
		case 0:
			(void)uart_read(u, reg);
			break;
		case 1:
			writing = true;
			uart_write(u, reg, fz_u8(z));
			writing = false;
			break;
		case 2: {
			size_t len = fz_u8(z) % sizeof(buf);

			fz_bytes(z, buf, len);
			if (uart_receive(u, buf, len) > len)
				abort();
			break;
		}
		case 3:
			if (uart_rx_room(u) > UART_FIFO_SIZE)
				abort();
			break;
		}
	}
	uart_free(u);
}
