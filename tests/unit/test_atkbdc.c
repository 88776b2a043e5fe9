/* Unit tests for the i8042 controller with its PS/2 keyboard and mouse
 * (src/dev/atkbdc.h, ps2kbd.h, ps2mouse.h), driven through the ports and
 * the console sinks as a guest and the VNC server drive them. */
#include "unit.h"

#include "backend/console.h"
#include "dev/atkbdc.h"
#include "dev/ps2kbd.h"

#define DATA    0x60
#define CMD     0x64

#define ST_OBF  0x01
#define ST_SYS  0x04
#define ST_AUXB 0x20

struct wire {
	unsigned irq1, irq12, resets;
};

static void fake_irq(void *arg, unsigned irq)
{
	struct wire *w = arg;

	if (irq == 1)
		w->irq1++;
	else if (irq == 12)
		w->irq12++;
}

static void fake_reset(void *arg)
{
	((struct wire *)arg)->resets++;
}

static const struct atkbdc_ops ops = {fake_irq, fake_reset};

struct fixture {
	struct wire w;
	struct atkbdc *k;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	f->k = atkbdc_create(&ops, &f->w);
	console_reset();
	console_register_kbd(atkbdc_key, f->k);
	console_register_ptr(atkbdc_pointer, f->k);
	*state = f;
	return f->k != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	console_reset();
	atkbdc_free(f->k);
	free(f);
	return 0;
}

/* Read every waiting byte (bounded), checking AUXB says where each is from. */
static unsigned drain(struct atkbdc *k, uint8_t *out, unsigned max, bool aux)
{
	unsigned n = 0;

	for (unsigned i = 0; i < 4 * PS2KBD_QUEUE && (atkbdc_read(k, CMD) & ST_OBF); i++) {
		uint8_t st = atkbdc_read(k, CMD);

		assert_int_equal(!!(st & ST_AUXB), aux);
		uint8_t v = atkbdc_read(k, DATA);
		if (n < max)
			out[n++] = v;
	}
	return n;
}

static void expect_bytes(struct atkbdc *k, bool aux, const uint8_t *want, unsigned n)
{
	uint8_t got[64];
	unsigned len = drain(k, got, sizeof(got), aux);

	assert_int_equal(len, n);
	assert_memory_equal(got, want, n);
}

static void command(struct atkbdc *k, uint8_t cmd)
{
	atkbdc_write(k, CMD, cmd);
}

static void set_cmdbyte(struct atkbdc *k, uint8_t v)
{
	command(k, 0x60);
	atkbdc_write(k, DATA, v);
}

static void test_self_test_and_cmdbyte(void **state)
{
	struct fixture *f = *state;
	uint8_t v;

	set_cmdbyte(f->k, 0x30); /* everything off, SYS clear */
	assert_false(atkbdc_read(f->k, CMD) & ST_SYS);
	command(f->k, 0xaa);
	expect_bytes(f->k, false, (const uint8_t[]){0x55}, 1);
	assert_true(atkbdc_read(f->k, CMD) & ST_SYS);
	command(f->k, 0xab);
	expect_bytes(f->k, false, (const uint8_t[]){0x00}, 1);
	command(f->k, 0xa9);
	expect_bytes(f->k, false, (const uint8_t[]){0x00}, 1);

	set_cmdbyte(f->k, 0x47);
	command(f->k, 0x20);
	expect_bytes(f->k, false, (const uint8_t[]){0x47}, 1);
	command(f->k, 0xa8); /* aux on: bit 5 stays clear */
	command(f->k, 0xad); /* keyboard off: bit 4 */
	command(f->k, 0x20);
	assert_int_equal(drain(f->k, &v, 1, false), 1);
	assert_int_equal(v, 0x57);
	command(f->k, 0xae);
	command(f->k, 0xa7);
	command(f->k, 0x20);
	assert_int_equal(drain(f->k, &v, 1, false), 1);
	assert_int_equal(v, 0x67);
	/* Controller replies raise IRQ 1 when it is enabled (0x47 has bit 0). */
	assert_true(f->w.irq1 >= 2);
	assert_int_equal(f->w.irq12, 0);
}

static void test_key_set2_raw(void **state)
{
	struct fixture *f = *state;

	set_cmdbyte(f->k, 0x01); /* IRQ 1, no translation */
	f->w.irq1 = 0;
	console_key_event(true, 0x1e); /* A */
	console_key_event(false, 0x1e);
	expect_bytes(f->k, false, (const uint8_t[]){0x1c, 0xf0, 0x1c}, 3);
	assert_int_equal(f->w.irq1, 3);
	console_key_event(true, 0x9d); /* right Ctrl */
	console_key_event(false, 0x9d);
	expect_bytes(f->k, false, (const uint8_t[]){0xe0, 0x14, 0xe0, 0xf0, 0x14}, 5);
	console_key_event(true, 0xc6); /* Pause */
	console_key_event(false, 0xc6);
	expect_bytes(f->k, false, (const uint8_t[]){0xe1, 0x14, 0x77, 0xe1, 0xf0, 0x14, 0xf0, 0x77},
	             8);
	console_key_event(true, 0xb7); /* Print Screen */
	expect_bytes(f->k, false, (const uint8_t[]){0xe0, 0x12, 0xe0, 0x7c}, 4);
	console_key_event(false, 0xb7);
	expect_bytes(f->k, false, (const uint8_t[]){0xe0, 0xf0, 0x7c, 0xe0, 0xf0, 0x12}, 6);
	console_key_event(true, 0x41); /* F7 is 0x83 in set 2 */
	expect_bytes(f->k, false, (const uint8_t[]){0x83}, 1);
	console_key_event(true, 0x54); /* SysRq 0x84 */
	expect_bytes(f->k, false, (const uint8_t[]){0x84}, 1);
	console_key_event(true, 0x1d); /* Ctrl+Pause is Break */
	console_key_event(true, 0xc6);
	console_key_event(false, 0x1d);
	expect_bytes(f->k, false, (const uint8_t[]){0x14, 0xe0, 0x7e, 0xe0, 0xf0, 0x7e, 0xf0, 0x14},
	             8);
}

static void test_key_translated(void **state)
{
	struct fixture *f = *state;

	set_cmdbyte(f->k, 0x41); /* IRQ 1, translation */
	f->w.irq1 = 0;
	console_key_event(true, 0x1e);
	console_key_event(false, 0x1e);
	expect_bytes(f->k, false, (const uint8_t[]){0x1e, 0x9e}, 2);
	assert_int_equal(f->w.irq1, 2);
	console_key_event(true, 0xc8); /* Up */
	console_key_event(false, 0xc8);
	expect_bytes(f->k, false, (const uint8_t[]){0xe0, 0x48, 0xe0, 0xc8}, 4);
	console_key_event(true, 0xc6);
	expect_bytes(f->k, false, (const uint8_t[]){0xe1, 0x1d, 0x45, 0xe1, 0x9d, 0xc5}, 6);
	console_key_event(true, 0x41);
	expect_bytes(f->k, false, (const uint8_t[]){0x41}, 1);
	/* The ID comes out translated too, as Linux's atkbd expects. */
	atkbdc_write(f->k, DATA, 0xf2);
	expect_bytes(f->k, false, (const uint8_t[]){0xfa, 0xab, 0x41}, 3);
}

/* Every set-1 code survives set 2 and the 8042's translation. */
static void test_translation_round_trip(void **state)
{
	struct fixture *f = *state;

	set_cmdbyte(f->k, 0x40);
	for (unsigned q = 1; q < 0x80; q++) {
		uint8_t got[4];

		console_key_event(true, (uint16_t)q);
		console_key_event(false, (uint16_t)q);
		assert_int_equal(drain(f->k, got, sizeof(got), false), 2);
		assert_int_equal(got[0], q);
		assert_int_equal(got[1], q | 0x80);
	}
	assert_int_equal(ps2_translate(0x00), 0xff);
}

static void test_keyboard_commands(void **state)
{
	struct fixture *f = *state;

	set_cmdbyte(f->k, 0x00);
	atkbdc_write(f->k, DATA, 0xed);
	atkbdc_write(f->k, DATA, 0x06);
	expect_bytes(f->k, false, (const uint8_t[]){0xfa, 0xfa}, 2);
	assert_int_equal(atkbdc_leds(f->k), 0x06);
	atkbdc_write(f->k, DATA, 0xee);
	expect_bytes(f->k, false, (const uint8_t[]){0xee}, 1);
	atkbdc_write(f->k, DATA, 0xf0);
	atkbdc_write(f->k, DATA, 0x00);
	expect_bytes(f->k, false, (const uint8_t[]){0xfa, 0xfa, 0x02}, 3);
	atkbdc_write(f->k, DATA, 0xf0); /* set 1: keys sent as set 1 */
	atkbdc_write(f->k, DATA, 0x01);
	expect_bytes(f->k, false, (const uint8_t[]){0xfa, 0xfa}, 2);
	console_key_event(true, 0x1e);
	console_key_event(false, 0x1e);
	expect_bytes(f->k, false, (const uint8_t[]){0x1e, 0x9e}, 2);
	atkbdc_write(f->k, DATA, 0xf3);
	atkbdc_write(f->k, DATA, 0x20);
	expect_bytes(f->k, false, (const uint8_t[]){0xfa, 0xfa}, 2);
	atkbdc_write(f->k, DATA, 0xf5); /* disabled: keys are dropped */
	expect_bytes(f->k, false, (const uint8_t[]){0xfa}, 1);
	console_key_event(true, 0x1e);
	expect_bytes(f->k, false, NULL, 0);
	atkbdc_write(f->k, DATA, 0xf4);
	expect_bytes(f->k, false, (const uint8_t[]){0xfa}, 1);
	atkbdc_write(f->k, DATA, 0xff);
	expect_bytes(f->k, false, (const uint8_t[]){0xfa, 0xaa}, 2);
	assert_int_equal(atkbdc_leds(f->k), 0);
	atkbdc_write(f->k, DATA, 0xfe); /* resend: the last byte again */
	expect_bytes(f->k, false, (const uint8_t[]){0xaa}, 1);
	/* A write to the keyboard re-enables its port. */
	command(f->k, 0xad);
	atkbdc_write(f->k, DATA, 0xee);
	expect_bytes(f->k, false, (const uint8_t[]){0xee}, 1);
}

static void test_keyboard_overrun(void **state)
{
	struct fixture *f = *state;
	uint8_t got[PS2KBD_QUEUE + 8];
	unsigned n;

	set_cmdbyte(f->k, 0x01); /* raw set 2; nobody reads */
	for (unsigned i = 0; i < PS2KBD_QUEUE + 100; i++)
		console_key_event(true, 0x1e);
	n = drain(f->k, got, sizeof(got), false);
	assert_true(n <= PS2KBD_QUEUE + 1); /* the queue plus the output buffer */
	assert_int_equal(got[n - 1], 0x00);
	for (unsigned i = 0; i + 1 < n; i++)
		assert_int_equal(got[i], 0x1c);
	/* Once drained, keys flow again. */
	console_key_event(false, 0x1e);
	expect_bytes(f->k, false, (const uint8_t[]){0xf0, 0x1c}, 2);
}

static void aux(struct atkbdc *k, uint8_t v)
{
	command(k, 0xd4);
	atkbdc_write(k, DATA, v);
}

static void test_mouse_reset_id_knock(void **state)
{
	struct fixture *f = *state;

	set_cmdbyte(f->k, 0x02); /* IRQ 12; aux enabled */
	aux(f->k, 0xff);
	expect_bytes(f->k, true, (const uint8_t[]){0xfa, 0xaa, 0x00}, 3);
	assert_int_equal(f->w.irq12, 3);
	aux(f->k, 0xf2);
	expect_bytes(f->k, true, (const uint8_t[]){0xfa, 0x00}, 2);
	const uint8_t knock[] = {200, 100, 80};
	for (unsigned i = 0; i < 3; i++) {
		aux(f->k, 0xf3);
		aux(f->k, knock[i]);
	}
	expect_bytes(f->k, true, (const uint8_t[]){0xfa, 0xfa, 0xfa, 0xfa, 0xfa, 0xfa}, 6);
	aux(f->k, 0xf2);
	expect_bytes(f->k, true, (const uint8_t[]){0xfa, 0x03}, 2);
	aux(f->k, 0xe8);
	aux(f->k, 0x03);
	aux(f->k, 0xe7);
	aux(f->k, 0xe9);
	expect_bytes(f->k, true, (const uint8_t[]){0xfa, 0xfa, 0xfa, 0xfa, 0x10, 0x03, 80}, 7);
	aux(f->k, 0x42); /* unknown: resend */
	expect_bytes(f->k, true, (const uint8_t[]){0xfe}, 1);
	/* 0xD3 loops a byte back as from the mouse, 0xD2 as from the keyboard. */
	command(f->k, 0xd3);
	atkbdc_write(f->k, DATA, 0x5a);
	expect_bytes(f->k, true, (const uint8_t[]){0x5a}, 1);
	command(f->k, 0xd2);
	atkbdc_write(f->k, DATA, 0xa5);
	expect_bytes(f->k, false, (const uint8_t[]){0xa5}, 1);
}

static void test_mouse_moves(void **state)
{
	struct fixture *f = *state;
	uint8_t got[64];

	set_cmdbyte(f->k, 0x02);
	aux(f->k, 0xf4);
	expect_bytes(f->k, true, (const uint8_t[]){0xfa}, 1);
	console_ptr_event(0, 100, 100, 1024, 768); /* first position: nothing to send */
	expect_bytes(f->k, true, NULL, 0);
	f->w.irq12 = 0;
	console_ptr_event(1, 110, 95, 1024, 768); /* right 10, up 5, left button */
	expect_bytes(f->k, true, (const uint8_t[]){0x09, 10, 5}, 3);
	assert_int_equal(f->w.irq12, 3);
	console_ptr_event(0, 100, 105, 1024, 768); /* left 10, down 10 */
	expect_bytes(f->k, true, (const uint8_t[]){0x38, 0xf6, 0xf6}, 3);
	/* A large move: several packets adding up to it. */
	console_ptr_event(0, 900, 105, 1024, 768);
	unsigned n = drain(f->k, got, sizeof(got), true);
	int sum = 0;
	assert_true(n == 12);
	for (unsigned i = 0; i < n; i += 3) {
		assert_true(got[i] & 0x08);
		assert_false(got[i] & 0xd0);
		sum += got[i + 1];
	}
	assert_int_equal(sum, 800);
	/* IntelliMouse: four bytes, wheel up is -1. */
	const uint8_t knock[] = {200, 100, 80};
	for (unsigned i = 0; i < 3; i++) {
		aux(f->k, 0xf3);
		aux(f->k, knock[i]);
	}
	drain(f->k, got, sizeof(got), true);
	console_ptr_event(8, 900, 105, 1024, 768);
	console_ptr_event(0, 900, 105, 1024, 768);
	expect_bytes(f->k, true, (const uint8_t[]){0x08, 0, 0, 0xff}, 4);
	/* Remote mode: only 0xEB reads, with overflow bits for what is lost. */
	aux(f->k, 0xf0);
	expect_bytes(f->k, true, (const uint8_t[]){0xfa}, 1);
	console_ptr_event(0, 0, 105, 1024, 768);
	expect_bytes(f->k, true, NULL, 0);
	aux(f->k, 0xeb);
	expect_bytes(f->k, true, (const uint8_t[]){0xfa, 0x58, 0x00, 0x00, 0x00}, 5);
	command(f->k, 0xa7);
	aux(f->k, 0xf2); /* D4 enables the port again */
	expect_bytes(f->k, true, (const uint8_t[]){0xfa, 0x03}, 2);
}

static void test_reset_line(void **state)
{
	struct fixture *f = *state;

	command(f->k, 0xfe);
	assert_int_equal(f->w.resets, 1);
	command(f->k, 0xff); /* pulses no line */
	assert_int_equal(f->w.resets, 1);
	command(f->k, 0xd0);
	expect_bytes(f->k, false, (const uint8_t[]){0x03}, 1);
	command(f->k, 0xd1);
	atkbdc_write(f->k, DATA, 0x02); /* bit 0 low: reset */
	assert_int_equal(f->w.resets, 2);
	command(f->k, 0xd1);
	atkbdc_write(f->k, DATA, 0x03);
	assert_int_equal(f->w.resets, 2);
}

/* ---- saved state (atkbdc_state_ops, with the keyboard and mouse) ---- */

static void save_kbc(struct atkbdc *k, struct sbuf *b)
{
	char err[128] = "";

	*b = (struct sbuf){0};
	assert_int_equal(atkbdc_state_ops.save(k, b, err, sizeof(err)), 0);
	assert_false(b->failed);
}

static int restore_kbc(struct atkbdc *k, const uint8_t *p, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader r;

	sbuf_reader_init(&r, p, len);
	if (atkbdc_state_ops.restore(k, &r, err, errlen) < 0)
		return -1;
	return sbuf_reader_done(&r, "lpc.atkbdc", err, errlen);
}

/* Every byte waiting in `k`, each with its status (bounded). */
static unsigned take_all(struct atkbdc *k, uint8_t *st, uint8_t *val, unsigned max)
{
	unsigned n = 0;

	for (unsigned i = 0; i < 4 * PS2KBD_QUEUE && (atkbdc_read(k, CMD) & ST_OBF); i++) {
		uint8_t s = atkbdc_read(k, CMD), v = atkbdc_read(k, DATA);

		if (n < max) {
			st[n] = s;
			val[n++] = v;
		}
	}
	return n;
}

/* Both controllers give the same bytes from here on, from the same sources. */
static void expect_same_output(struct atkbdc *a, struct atkbdc *b, unsigned want)
{
	uint8_t sa[64], va[64], sb[64], vb[64];
	unsigned na = take_all(a, sa, va, 64), nb = take_all(b, sb, vb, 64);

	assert_int_equal(na, want);
	assert_int_equal(nb, want);
	assert_memory_equal(sa, sb, na);
	assert_memory_equal(va, vb, na);
}

/* Keyboard LEDs and typematic set, the mouse an IntelliMouse in stream
 * mode with a known position, then a key and a move left queued. */
static void drive_kbc(struct atkbdc *k)
{
	uint8_t got[64];
	const uint8_t knock[] = {200, 100, 80};

	set_cmdbyte(k, 0x03); /* both IRQs, both ports, no translation */
	atkbdc_write(k, DATA, 0xed);
	atkbdc_write(k, DATA, 0x05);
	atkbdc_write(k, DATA, 0xf3);
	atkbdc_write(k, DATA, 0x20);
	expect_bytes(k, false, (const uint8_t[]){0xfa, 0xfa, 0xfa, 0xfa}, 4);
	for (unsigned i = 0; i < 3; i++) {
		aux(k, 0xf3);
		aux(k, knock[i]);
	}
	aux(k, 0xe8);
	aux(k, 0x01);
	aux(k, 0xf4);
	drain(k, got, sizeof(got), true);
	atkbdc_pointer(k, 0, 100, 100, 1024, 768);
	atkbdc_pointer(k, 1, 90, 100, 1024, 768); /* left 10, left button */
	atkbdc_key(k, true, 0x1e);                /* A */
	atkbdc_key(k, false, 0x1e);               /* released */
}

static void test_state_round_trip(void **state)
{
	struct fixture *f = *state;
	struct wire w2 = {0};
	struct atkbdc *k2 = atkbdc_create(&ops, &w2);
	struct sbuf b;
	char err[128] = "";

	assert_non_null(k2);
	drive_kbc(f->k);
	assert_true(atkbdc_read(f->k, CMD) & ST_OBF); /* a byte in the output buffer */
	save_kbc(f->k, &b);
	assert_int_equal(restore_kbc(k2, b.data, b.len, err, sizeof(err)), 0);
	/* Edges were delivered before the save: the restore raises none. */
	assert_int_equal(w2.irq1 + w2.irq12 + w2.resets, 0);
	assert_int_equal(atkbdc_leds(k2), 0x05);
	assert_int_equal(atkbdc_read(k2, CMD), atkbdc_read(f->k, CMD));
	/* The key's three set-2 bytes, then the mouse's four-byte packet. */
	expect_same_output(f->k, k2, 3 + 4);
	assert_true(w2.irq1 >= 2 && w2.irq12 >= 3);
	/* Both go on alike: the mouse's ID and resolution, the keyboard's set. */
	aux(f->k, 0xf2);
	aux(k2, 0xf2);
	aux(f->k, 0xe9);
	aux(k2, 0xe9);
	expect_same_output(f->k, k2, 2 + 4);
	atkbdc_write(f->k, DATA, 0xf0);
	atkbdc_write(f->k, DATA, 0x00);
	atkbdc_write(k2, DATA, 0xf0);
	atkbdc_write(k2, DATA, 0x00);
	expect_same_output(f->k, k2, 3);
	/* The mouse's last position came along: a move is relative to it. */
	atkbdc_pointer(f->k, 1, 95, 100, 1024, 768);
	atkbdc_pointer(k2, 1, 95, 100, 1024, 768);
	expect_same_output(f->k, k2, 4);
	sbuf_free(&b);
	atkbdc_free(k2);
}

static void test_state_hostile(void **state)
{
	struct fixture *f = *state;
	struct wire w2 = {0};
	struct atkbdc *k2 = atkbdc_create(&ops, &w2);
	struct sbuf b;
	uint8_t bad[128], v;
	char err[128];

	assert_non_null(k2);
	set_cmdbyte(f->k, 0x03);
	aux(f->k, 0xf4);
	expect_bytes(f->k, true, (const uint8_t[]){0xfa}, 1);
	/* Queues empty: controller 42 bytes, keyboard 10, mouse 37. */
	save_kbc(f->k, &b);
	assert_int_equal(b.len, 42 + 10 + 37);
	for (size_t n = 0; n < b.len; n++)
		assert_int_equal(restore_kbc(k2, b.data, n, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	bad[0] = 2;
	assert_int_equal(restore_kbc(k2, bad, b.len, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	bad[41] = 5; /* the controller's queue holds 4 */
	assert_int_equal(restore_kbc(k2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "controller queue count 5 > 4");
	memcpy(bad, b.data, b.len);
	bad[35] = 0x20; /* a pending command that takes no data */
	assert_int_equal(restore_kbc(k2, bad, b.len, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	bad[34] = 0x00; /* output port holding the CPU in reset */
	assert_int_equal(restore_kbc(k2, bad, b.len, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	unit_put_le(bad + 42, 0xffff, 2); /* keyboard queue count */
	assert_int_equal(restore_kbc(k2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "keyboard queue count 65535");
	memcpy(bad, b.data, b.len);
	bad[42 + 5] = 4; /* scancode set 4 */
	assert_int_equal(restore_kbc(k2, bad, b.len, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	unit_put_le(bad + 52, 129, 2); /* mouse queue count */
	assert_int_equal(restore_kbc(k2, bad, b.len, err, sizeof(err)), -1);
	memcpy(bad, b.data, b.len);
	bad[62] = 4; /* mouse ID */
	assert_int_equal(restore_kbc(k2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "mouse ID 4");
	memcpy(bad, b.data, b.len);
	unit_put_le(bad + 76, 200000, 4); /* dx past the accumulation bound */
	assert_int_equal(restore_kbc(k2, bad, b.len, err, sizeof(err)), -1);
	assert_contains(err, "dx");
	/* Nothing was applied: the power-on command byte, no output. */
	assert_false(atkbdc_read(k2, CMD) & ST_OBF);
	command(k2, 0x20);
	assert_int_equal(drain(k2, &v, 1, false), 1);
	assert_int_equal(v, 0x65);
	assert_int_equal(w2.resets, 0);
	sbuf_free(&b);
	atkbdc_free(k2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_self_test_and_cmdbyte, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_key_set2_raw, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_key_translated, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_translation_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_keyboard_commands, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_keyboard_overrun, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mouse_reset_id_knock, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mouse_moves, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reset_line, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_hostile, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
