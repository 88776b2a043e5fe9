/*
 * libFuzzer target for the i8042 controller with its PS/2 keyboard and
 * mouse (src/dev/atkbdc.c, ps2kbd.c, ps2mouse.c): guest port accesses
 * interleaved with console key and pointer events, as a guest and a VNC
 * client produce them.
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bit 2
 * of the opcode picks the port (0x64 when set, else 0x60); bits 1:0:
 *   0 port read
 *   1 port write   u8 value
 *   2 key event    u8 qnum; opcode bit 3 "down", bit 4 adds 0x100 (out of
 *                  range: must be ignored)
 *   3 pointer      u8 RFB buttons, u16 x, u16 y
 * Each input gets a fresh controller.
 */
#include "fuzz.h"

#include "dev/atkbdc.h"

static unsigned irqs, resets;

static void count_irq(void *arg, unsigned irq)
{
	(void)arg;
	if (irq != ATKBDC_KBD_IRQ && irq != ATKBDC_AUX_IRQ)
		abort();
	irqs++;
}

static void count_reset(void *arg)
{
	(void)arg;
	resets++;
}

static const struct atkbdc_ops ops = {count_irq, count_reset};

FUZZ_TARGET(fuzz_no_setup)

static void fuzz_one(struct fz *z)
{
	struct atkbdc *k;

	k = atkbdc_create(&ops, NULL);
	if (k == NULL)
		abort();
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		uint16_t port = (op & 4) ? ATKBDC_CMD_PORT : ATKBDC_DATA_PORT;

		switch (op & 3) {
		case 0:
			(void)atkbdc_read(k, port);
			break;
		case 1:
			atkbdc_write(k, port, fz_u8(z));
			break;
		case 2:
			atkbdc_key(k, op & 8, (uint16_t)(fz_u8(z) | ((op & 0x10) ? 0x100 : 0)));
			break;
		case 3: {
			uint8_t buttons = fz_u8(z);
			uint16_t x = fz_u16(z), y = fz_u16(z);

			atkbdc_pointer(k, buttons, x, y, 1024, 768);
			break;
		}
		}
	}
	atkbdc_free(k);
}
