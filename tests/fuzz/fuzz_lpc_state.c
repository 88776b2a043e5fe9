/*
 * libFuzzer target for the restore of the LPC devices' saved state
 * (the state_ops of src/dev/uart.c, rtc.c, pm.c, atkbdc.c with ps2kbd.c
 * and ps2mouse.c, fw_cfg.c, pflash.c): a state file is hostile, so any
 * section must either be refused or give a device that works.  What a
 * restore accepts, a save must give back byte for byte (the PM timer's
 * count aside, which moves), and the restored device is then driven
 * through its ports.
 *
 * Input: byte 0 picks the device (bits 6:0 % 6: uart, rtc, pm, atkbdc,
 * fw_cfg, pflash); bit 7 set: start from the section a device with some
 * state saves, then apply the rest as edits: u16 position (modulo the
 * length), u8 value to XOR there, and a last byte, if any, that truncates
 * the section to it when below the length.  Bit 7 clear: the rest is the section.
 * Each input gets fresh devices (the flash is reopened on one memfd).
 */
#include "fuzz.h"

#include <sys/mman.h>

#include "dev/atkbdc.h"
#include "dev/fw_cfg.h"
#include "dev/pflash.h"
#include "dev/pm.h"
#include "dev/rtc.h"
#include "dev/uart.h"
#include "vmm/mem.h"

#define NDEVICES   6
#define STORE_SIZE PFLASH_BLOCK_SIZE
#define MAX_EDITS  64

static int store_fd = -1;
static char store_path[64];
static struct guest_mem no_ram; /* fw_cfg's DMA finds nothing: not what this tests */

static void setup_once(void)
{
	store_fd = memfd_create("khyve-fuzz-lpc-state", MFD_CLOEXEC);
	if (store_fd < 0 || ftruncate(store_fd, STORE_SIZE) < 0)
		abort();
	snprintf(store_path, sizeof(store_path), "/proc/self/fd/%d", store_fd);
}

FUZZ_TARGET(setup_once)

static void uart_irq(void *arg, bool level)
{
	(void)arg;
	(void)level;
}

static void uart_tx(void *arg, uint8_t byte)
{
	(void)arg;
	(void)byte;
}

static const struct uart_ops uart_ops = {uart_irq, uart_tx, NULL};

static void pm_sci(void *arg, bool level)
{
	(void)arg;
	(void)level;
}

static void pm_exit(void *arg, int code)
{
	(void)arg;
	if (code < 0 || code > 4)
		abort();
}

static const struct pm_ops pm_ops = {pm_sci, pm_exit};

static void kbc_irq(void *arg, unsigned irq)
{
	(void)arg;
	if (irq != 1 && irq != 12)
		abort();
}

static const struct atkbdc_ops kbc_ops = {kbc_irq, NULL};

/* One device under test, its state ops, and how to drive it. */
struct dut {
	void *dev;
	const struct state_ops *ops;
	unsigned moving_tail; /* trailing bytes a re-save may change (the PM timer) */
};

static void drive(unsigned kind, void *dev)
{
	uint64_t v = 0;

	switch (kind) {
	case 0:
		for (unsigned off = 0; off < 8; off++)
			(void)uart_read(dev, off);
		uart_receive(dev, (const uint8_t *)"xy", 2);
		uart_write(dev, 0, 'z');
		break;
	case 1:
		for (unsigned idx = 0; idx < 0x80; idx++) {
			rtc_write(dev, 0, (uint8_t)idx);
			(void)rtc_read(dev, 1);
		}
		break;
	case 2:
		for (uint16_t port = PM_BASE; port < PM_BASE + PM_BLOCK_LEN; port++)
			(void)pm_read(dev, port, 4);
		pm_power_button(dev);
		break;
	case 3:
		for (unsigned i = 0; i < 64; i++)
			(void)atkbdc_read(dev, i % 2 ? ATKBDC_DATA_PORT : ATKBDC_CMD_PORT);
		atkbdc_key(dev, true, 0x1e);
		atkbdc_pointer(dev, 1, 10, 10, 100, 100);
		atkbdc_write(dev, ATKBDC_DATA_PORT, 0xf4);
		break;
	case 4:
		for (unsigned i = 0; i < 16; i++)
			fw_cfg_access(dev, FW_CFG_OFF_DATA, 1, false, &v);
		break;
	default:
		for (uint64_t off = 0; off < STORE_SIZE; off += 512)
			pflash_access(dev, off, 8, false, &v);
		break;
	}
}

static bool open_dut(unsigned kind, struct dut *d)
{
	static const uint8_t ncpus[2] = {1, 0};
	char err[256];

	d->moving_tail = 0;
	switch (kind) {
	case 0:
		d->dev = uart_create(&uart_ops, NULL);
		d->ops = &uart_state_ops;
		break;
	case 1:
		d->dev = rtc_create(false);
		d->ops = &rtc_state_ops;
		break;
	case 2:
		d->dev = pm_create(&pm_ops, NULL);
		d->ops = &pm_state_ops;
		d->moving_tail = 4;
		break;
	case 3:
		d->dev = atkbdc_create(&kbc_ops, NULL);
		d->ops = &atkbdc_state_ops;
		break;
	case 4:
		d->dev = fw_cfg_create(&no_ram);
		d->ops = &fw_cfg_state_ops;
		if (d->dev != NULL && (fw_cfg_add_file(d->dev, "etc/x", "hello", 5) < 0 ||
		                       fw_cfg_add_item(d->dev, FW_CFG_NB_CPUS, ncpus, 2) < 0))
			abort();
		break;
	default:
		d->dev = pflash_open(store_path, err, sizeof(err));
		d->ops = &pflash_state_ops;
		break;
	}
	return d->dev != NULL;
}

static void close_dut(unsigned kind, struct dut *d)
{
	switch (kind) {
	case 0:
		uart_free(d->dev);
		break;
	case 1:
		rtc_free(d->dev);
		break;
	case 2:
		pm_free(d->dev);
		break;
	case 3:
		atkbdc_free(d->dev);
		break;
	case 4:
		fw_cfg_free(d->dev);
		break;
	default:
		pflash_close(d->dev);
		break;
	}
}

/* The section a device with some state saves, edited by the input. */
static bool edited_section(unsigned kind, struct fz *z, struct sbuf *out)
{
	struct dut src;
	char err[128];
	uint8_t cut;

	if (!open_dut(kind, &src))
		abort();
	drive(kind, src.dev);
	if (src.ops->save(src.dev, out, err, sizeof(err)) < 0 || out->failed || out->len == 0)
		abort();
	close_dut(kind, &src);
	for (unsigned i = 0; i < MAX_EDITS && z->n > 1; i++) {
		uint16_t pos = fz_u16(z);

		out->data[pos % out->len] ^= fz_u8(z);
	}
	if (fz_more(z) && (cut = fz_u8(z)) < out->len)
		out->len = cut;
	return true;
}

static void fuzz_one(struct fz *z)
{
	uint8_t head = fz_u8(z);
	unsigned kind = (head & 0x7f) % NDEVICES;
	struct sbuf in = {0}, again = {0};
	struct sbuf_reader r;
	struct dut d;
	char err[128];
	const uint8_t *sec = z->p;
	size_t len = z->n;

	if (head & 0x80) {
		edited_section(kind, z, &in);
		sec = in.data;
		len = in.len;
	}
	if (!open_dut(kind, &d))
		abort();
	sbuf_reader_init(&r, sec, len);
	if (d.ops->restore(d.dev, &r, err, sizeof(err)) == 0 &&
	    sbuf_reader_done(&r, "lpc", err, sizeof(err)) == 0) {
		/* Accepted: saving gives the same section back. */
		if (d.ops->save(d.dev, &again, err, sizeof(err)) < 0 || again.len != len ||
		    memcmp(again.data, sec, len - d.moving_tail) != 0)
			abort();
		drive(kind, d.dev);
	} else if (!r.failed && r.off == r.len) {
		abort(); /* a refusal must say why */
	}
	close_dut(kind, &d);
	sbuf_free(&in);
	sbuf_free(&again);
}
