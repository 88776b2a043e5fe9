/*
 * A minimal i8042 keyboard controller at ports 0x60/0x64: enough for the
 * reset line (command 0xFE, or the output port written with bit 0 clear) and
 * for probes to get sane answers.  There is no keyboard behind it; the FADT
 * tells ACPI guests no 8042 is present, so only reboot code touches it.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/machine.h"
#include "dev/lpc.h"

#define KBC_DATA_PORT         0x60
#define KBC_CMD_PORT          0x64

#define KBC_STS_OBF           0x01
#define KBC_STS_SYS           0x04

#define KBC_CMD_READ_CMDBYTE  0x20
#define KBC_CMD_WRITE_CMDBYTE 0x60
#define KBC_CMD_SELF_TEST     0xaa
#define KBC_CMD_IFACE_TEST    0xab
#define KBC_CMD_WRITE_OUTPORT 0xd1
#define KBC_CMD_PULSE_RESET   0xfe

struct atkbdc;

/* One per port, so the handler knows which of the two it serves. */
struct kbc_port {
	struct atkbdc *kbc;
	bool is_cmd;
};

struct atkbdc {
	pthread_mutex_t lock;
	struct kbc_port data_port, cmd_port;
	struct machine *m;
	uint8_t cmdbyte;
	uint8_t pending_cmd; /* command waiting for its data byte, or 0 */
	uint8_t out;         /* output buffer */
	bool out_full;
};

static void kbc_reply(struct atkbdc *k, uint8_t v)
{
	k->out = v;
	k->out_full = true;
}

static void kbc_command(struct atkbdc *k, uint8_t cmd)
{
	switch (cmd) {
	case KBC_CMD_PULSE_RESET:
		machine_request_exit(k->m, KHYVE_EXIT_RESET);
		break;
	case KBC_CMD_SELF_TEST:
		kbc_reply(k, 0x55);
		break;
	case KBC_CMD_IFACE_TEST:
		kbc_reply(k, 0x00);
		break;
	case KBC_CMD_READ_CMDBYTE:
		kbc_reply(k, k->cmdbyte);
		break;
	case KBC_CMD_WRITE_CMDBYTE:
	case KBC_CMD_WRITE_OUTPORT:
		k->pending_cmd = cmd;
		break;
	default:
		break; /* enable/disable ports and the like: nothing behind them */
	}
}

static void kbc_data(struct atkbdc *k, uint8_t v)
{
	uint8_t cmd = k->pending_cmd;

	k->pending_cmd = 0;
	if (cmd == KBC_CMD_WRITE_CMDBYTE)
		k->cmdbyte = v;
	else if (cmd == KBC_CMD_WRITE_OUTPORT && !(v & 0x01))
		machine_request_exit(k->m, KHYVE_EXIT_RESET); /* reset line low */
	else if (cmd == 0)
		kbc_reply(k, 0xfe); /* no keyboard: "resend" */
}

static int kbc_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct kbc_port *port = arg;
	struct atkbdc *k = port->kbc;
	bool cmd_port = port->is_cmd;

	(void)offset;
	if (size != 1)
		return -1;
	pthread_mutex_lock(&k->lock);
	if (is_write && cmd_port)
		kbc_command(k, (uint8_t)*val);
	else if (is_write)
		kbc_data(k, (uint8_t)*val);
	else if (cmd_port)
		*val = KBC_STS_SYS | (k->out_full ? KBC_STS_OBF : 0);
	else {
		*val = k->out;
		k->out_full = false;
	}
	pthread_mutex_unlock(&k->lock);
	return 0;
}

static int atkbdc_init(struct machine *m, char *err, size_t errlen)
{
	struct atkbdc *k = calloc(1, sizeof(*k));

	(void)err;
	(void)errlen;
	if (k == NULL)
		return -1;
	pthread_mutex_init(&k->lock, NULL);
	k->m = m;
	k->cmdbyte = 0x30; /* both ports disabled, no interrupts */
	k->data_port = (struct kbc_port){k, false};
	k->cmd_port = (struct kbc_port){k, true};
	/* Two registrations: 0x61 between them is the in-kernel PIT's speaker port. */
	if (machine_register_pio(m, KBC_DATA_PORT, 1, kbc_access, &k->data_port, "atkbdc") < 0)
		return -1;
	return machine_register_pio(m, KBC_CMD_PORT, 1, kbc_access, &k->cmd_port, "atkbdc");
}

LPC_DEVICE(atkbdc) = {
    .name = "atkbdc",
    .descr = "8042 keyboard controller, for its reset line (built in)",
    .init = atkbdc_init,
};
