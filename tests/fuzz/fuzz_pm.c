/*
 * libFuzzer target for the ACPI PM1 block and reset register
 * (src/dev/pm.c): PM1 status/enable/control, the PM timer and port 0xCF9
 * at every size and offset, including accesses that straddle the block's
 * registers, with the power button pressed in between.  A guest may ask
 * for soft-off or reset: the exit code must be one of khyve's.
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bits 1:0:
 *   0 read          u8 port (PM_BASE + n%16, or 0xCF9 when n >= 0xf0),
 *                   u8 size (1 << n%3)
 *   1 write         the same, then u32 value
 *   2 power button
 *   3 nothing
 * Each input gets a fresh PM block.
 */
#include "fuzz.h"

#include "dev/pm.h"
#include "lib/exitcode.h"

static bool sci;

static void set_sci(void *arg, bool level)
{
	(void)arg;
	sci = level;
}

static void request_exit(void *arg, int code)
{
	(void)arg;
	if (code < 0 || code > 4)
		abort();
}

static const struct pm_ops ops = {set_sci, request_exit};

static uint16_t port_of(uint8_t n)
{
	return n >= 0xf0 ? PM_RESET_PORT : (uint16_t)(PM_BASE + n % 16);
}

FUZZ_TARGET(fuzz_no_setup)

static void fuzz_one(struct fz *z)
{
	struct pm *pm = pm_create(&ops, NULL);

	if (pm == NULL)
		abort();
	sci = false;
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);

		switch (op & 3) {
		case 0:
		case 1: {
			uint16_t port = port_of(fz_u8(z));
			unsigned size = 1u << (fz_u8(z) % 3);

			if (op & 1)
				pm_write(pm, port, size, fz_u32(z));
			else
				(void)pm_read(pm, port, size);
			break;
		}
		case 2:
			(void)pm_power_button(pm);
			break;
		default:
			break;
		}
	}
	pm_free(pm);
}
