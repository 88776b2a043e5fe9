/*
 * libFuzzer target for port and MMIO dispatch (src/core/iobus.c) with the
 * LPC devices behind it (src/dev/lpc.c's built-ins: RTC, ACPI PM and
 * reset register, i8042, debug port): guest accesses of every size at any
 * address, including ones that start inside a device's range and run past
 * its end, while test ranges are registered and removed in windows no
 * device uses.  A model of the test ranges checks each answer of
 * iobus_register() / iobus_unregister() and each dispatch: the right
 * handler, at the right offset, or nobody.
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bit 3
 * picks the bus (MMIO when set), bit 4 a write; bits 2:0:
 *   0 access      u8 size (1 << n%4), u32 address: bit 5 makes it an
 *                 offset (n%16, minus 4) from the start of registered
 *                 range u8 (n%ranges) instead, bit 6 one from its end
 *   1 register    u16 base and u16 length-1 in the bus's test window
 *   2 unregister  u8 test range (n%held), or with bit 5 u16 base
 *   3 access a test range at u16 offset into the window, u8 size
 * Test ranges are removed at the end of each input; device state carries
 * over from input to input, as in a running guest.
 */
#include "fuzz.h"

#include "core/iobus.h"
#include "core/machine.h"
#include "dev/lpc.h"
#include "lib/config.h"

#define PIO_WINDOW  0x6000ull /* ports 0x6000-0x6fff: nothing there */
#define MMIO_WINDOW 0xf0000000ull
#define WINDOW_LEN  0x1000ull
#define MAX_TEST    16

struct test_range {
	uint64_t base, len;
	bool used;
};

struct model {
	struct iobus *bus;
	uint64_t window;
	struct test_range r[MAX_TEST];
};

static struct machine m;
static struct model model[2];
static const struct test_range *expect_hit; /* the range the access must reach */
static uint64_t expect_addr;
static bool handled;

static int test_handler(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	const struct test_range *r = arg;

	(void)size;
	/* The range the model says, at the address accessed, inside it. */
	if (r != expect_hit || offset >= r->len || r->base + offset != expect_addr)
		abort();
	if (!is_write)
		*val = offset;
	handled = true;
	return 0;
}

static void setup_once(void)
{
	char err[256] = "";

	if (machine_init_detached(&m, "fuzz", NULL, 0, 0) < 0)
		abort();
	config_reset();
	if (lpc_init_devices(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "lpc_init_devices: %s\n", err);
		abort();
	}
	model[0] = (struct model){.bus = &m.pio, .window = PIO_WINDOW};
	model[1] = (struct model){.bus = &m.mmio, .window = MMIO_WINDOW};
	/* The windows must be free, or the model's "nobody" is wrong. */
	for (unsigned b = 0; b < 2; b++)
		for (size_t i = 0; i < model[b].bus->nranges; i++) {
			const struct iobus_range *r = &model[b].bus->ranges[i];

			if (r->base < model[b].window + WINDOW_LEN &&
			    model[b].window < r->base + r->len)
				abort();
		}
}

static const struct test_range *model_find(const struct model *md, uint64_t addr)
{
	for (unsigned i = 0; i < MAX_TEST; i++)
		if (md->r[i].used && addr - md->r[i].base < md->r[i].len)
			return &md->r[i];
	return NULL;
}

static bool model_overlaps(const struct model *md, uint64_t base, uint64_t len)
{
	for (unsigned i = 0; i < MAX_TEST; i++)
		if (md->r[i].used && base < md->r[i].base + md->r[i].len &&
		    md->r[i].base < base + len)
			return true;
	return false;
}

static void model_register(struct model *md, uint64_t base, uint64_t len)
{
	struct test_range *slot = NULL;
	bool ok;

	for (unsigned i = 0; i < MAX_TEST && slot == NULL; i++)
		if (!md->r[i].used)
			slot = &md->r[i];
	if (slot == NULL)
		return;
	ok = !model_overlaps(md, base, len);
	slot->base = base;
	slot->len = len;
	if ((iobus_register(md->bus, base, len, test_handler, slot, "fuzz") == 0) != ok)
		abort();
	slot->used = ok;
}

static void model_unregister(struct model *md, uint64_t base)
{
	struct test_range *r = NULL;

	for (unsigned i = 0; i < MAX_TEST && r == NULL; i++)
		if (md->r[i].used && md->r[i].base == base)
			r = &md->r[i];
	if ((iobus_unregister(md->bus, base) == 0) != (r != NULL))
		abort();
	if (r != NULL)
		r->used = false;
}

static void bus_access(struct model *md, uint64_t addr, unsigned size, bool is_write, uint64_t val)
{
	bool in_window = addr - md->window < WINDOW_LEN, claimed;

	expect_hit = in_window ? model_find(md, addr) : NULL;
	expect_addr = addr;
	handled = false;
	claimed = iobus_access(md->bus, addr, size, is_write, &val);
	if (in_window && (claimed != (expect_hit != NULL) || handled != claimed))
		abort();
	if (!claimed && !is_write && val != ~0ull)
		abort();
}

/* An address at the start or end of one of the bus's ranges. */
static uint64_t near_range(const struct iobus *bus, uint8_t op, uint8_t which, uint8_t off)
{
	const struct iobus_range *r;

	if (bus->nranges == 0)
		return 0;
	r = &bus->ranges[which % bus->nranges];
	return ((op & 0x40) ? r->base + r->len : r->base) + off % 16 - 4;
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		struct model *md = &model[(op >> 3) & 1];
		bool wr = op & 0x10;

		switch (op & 3) {
		case 0: {
			unsigned size = 1u << (fz_u8(z) % 4);
			uint64_t addr = fz_u32(z);

			if (op & 0x60)
				addr = near_range(md->bus, op, (uint8_t)addr, (uint8_t)(addr >> 8));
			if (md->bus == &m.pio)
				addr &= 0xffff;
			bus_access(md, addr, size, wr, fz_u32(z));
			break;
		}
		case 1: {
			uint64_t base = md->window + fz_u16(z) % WINDOW_LEN;
			uint64_t len = 1 + fz_u16(z) % 0x200;

			if (base + len > md->window + WINDOW_LEN)
				len = md->window + WINDOW_LEN - base;
			model_register(md, base, len);
			break;
		}
		case 2: {
			uint16_t n = fz_u16(z);

			if (op & 0x20)
				model_unregister(md, md->window + n % WINDOW_LEN);
			else if (md->r[n % MAX_TEST].used)
				model_unregister(md, md->r[n % MAX_TEST].base);
			break;
		}
		case 3: {
			uint64_t addr = md->window + fz_u16(z) % WINDOW_LEN;

			bus_access(md, addr, 1u << (fz_u8(z) % 4), wr, 0);
			break;
		}
		}
	}
	for (unsigned b = 0; b < 2; b++)
		for (unsigned i = 0; i < MAX_TEST; i++)
			if (model[b].r[i].used)
				model_unregister(&model[b], model[b].r[i].base);
}
