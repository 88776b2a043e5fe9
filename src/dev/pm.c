#include "dev/pm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bus/pci.h"
#include "core/machine.h"
#include "dev/lpc.h"
#include "lib/log.h"
#include "lib/clock.h"

#define PM_TIMER_HZ 3579545ull

_Static_assert(PM_BASE >= PCI_IO_HOLE_BASE && PM_BASE + PM_BLOCK_LEN <= PCI_IO_HOLE_END,
               "the PM block must stay in the hole of the PCI I/O window");

struct pm {
	pthread_mutex_t lock;
	const struct pm_ops *ops;
	void *arg;
	uint16_t sts;
	uint16_t en;
	uint16_t cnt;
	uint8_t reset_reg;
	bool sci_level;
	uint32_t tmr_offset; /* added to the host-derived count (mod 2^32): a restore sets it */
};

/* The timer as the host's monotonic clock gives it. */
static uint32_t pm_timer_host(void)
{
	uint64_t ns = monotonic_ns();

	/* Split to avoid overflow: whole seconds, then the remainder. */
	return (uint32_t)((ns / 1000000000ull) * PM_TIMER_HZ +
	                  (ns % 1000000000ull) * PM_TIMER_HZ / 1000000000ull);
}

/* The guest's PM timer count; 32 bits wrap, as TMR_VAL_EXT's do. */
static uint32_t pm_timer_now(const struct pm *pm)
{
	return pm_timer_host() + pm->tmr_offset;
}

static void update_sci(struct pm *pm)
{
	bool level = (pm->sts & pm->en & PM1_PWRBTN_STS) != 0 && (pm->cnt & PM1_SCI_EN);

	if (level != pm->sci_level) {
		pm->sci_level = level;
		pm->ops->set_sci(pm->arg, level);
	}
}

/* Read `size` bytes at byte `off` of a little-endian register image. */
static uint32_t extract(uint64_t image, unsigned off, unsigned size)
{
	uint64_t v = image >> (8 * off);

	return size >= 4 ? (uint32_t)v : (uint32_t)(v & ((1ull << (8 * size)) - 1));
}

/* Bytes [off, off+size) of a 32-bit write, as a mask and shifted value. */
static void lanes(unsigned off, unsigned size, uint32_t val, uint32_t *mask, uint32_t *shifted)
{
	uint64_t m = size >= 4 ? 0xffffffffull : ((1ull << (8 * size)) - 1);

	*mask = (uint32_t)(m << (8 * off));
	*shifted = (uint32_t)(((uint64_t)val & m) << (8 * off));
}

static void evt_write(struct pm *pm, unsigned off, unsigned size, uint32_t val)
{
	uint32_t mask, v;

	lanes(off, size, val, &mask, &v);
	/* Status bits are write-one-to-clear; enable bits are plain. */
	pm->sts &= (uint16_t) ~(v & mask);
	if (mask & 0xffff0000u)
		pm->en = (uint16_t)((pm->en & ~(mask >> 16)) | (v >> 16));
}

static void cnt_write(struct pm *pm, unsigned off, unsigned size, uint32_t val)
{
	static struct ratelimit rl = RATELIMIT_INIT;
	uint32_t mask, v;
	unsigned slp_typ;

	lanes(off, size, val, &mask, &v);
	v = (pm->cnt & ~mask) | (v & mask);
	/* SCI_EN stays set: khyve has no legacy (SMM) mode to return to. */
	pm->cnt = (uint16_t)((v & ~PM1_SLP_EN) | PM1_SCI_EN);
	if (!(v & PM1_SLP_EN))
		return;
	slp_typ = (v >> 10) & 7;
	/* Type 0 too: QEMU's PIIX4 powers off on it, and firmware built for
	 * QEMU (OVMF's ResetSystem) writes it rather than the DSDT's \_S5. */
	if (slp_typ == PM_SLP_TYP_S5 || slp_typ == PM_SLP_TYP_PIIX4_OFF)
		pm->ops->request_exit(pm->arg, KHYVE_EXIT_POWEROFF);
	else
		log_ratelimited(&rl, LOG_WARN,
		                "guest asked for sleep type %u; only S5 is supported", slp_typ);
}

static void reset_write(struct pm *pm, uint8_t val)
{
	/* Setting bit 2 (RST_CPU) resets; Linux writes 0x02 (choose a full
	 * reset) then 0x06.  The bit reads back as zero, as on the ICH. */
	if (val & 0x04)
		pm->ops->request_exit(pm->arg, KHYVE_EXIT_RESET);
	pm->reset_reg = val & ~0x04;
}

uint32_t pm_read(struct pm *pm, uint16_t port, unsigned size)
{
	uint32_t v = 0xffffffffu;

	pthread_mutex_lock(&pm->lock);
	if (port >= PM1A_EVT_PORT && port < PM1A_EVT_PORT + 4)
		v = extract(pm->sts | ((uint64_t)pm->en << 16), port - PM1A_EVT_PORT, size);
	else if (port >= PM1A_CNT_PORT && port < PM1A_CNT_PORT + 2)
		v = extract(pm->cnt, port - PM1A_CNT_PORT, size);
	else if (port >= PM_TMR_PORT && port < PM_TMR_PORT + 4)
		v = extract(pm_timer_now(pm), port - PM_TMR_PORT, size);
	else if (port == PM_RESET_PORT)
		v = pm->reset_reg;
	pthread_mutex_unlock(&pm->lock);
	return v;
}

void pm_write(struct pm *pm, uint16_t port, unsigned size, uint32_t val)
{
	pthread_mutex_lock(&pm->lock);
	if (port >= PM1A_EVT_PORT && port < PM1A_EVT_PORT + 4)
		evt_write(pm, port - PM1A_EVT_PORT, size, val);
	else if (port >= PM1A_CNT_PORT && port < PM1A_CNT_PORT + 2)
		cnt_write(pm, port - PM1A_CNT_PORT, size, val);
	else if (port == PM_RESET_PORT)
		reset_write(pm, (uint8_t)val);
	update_sci(pm);
	pthread_mutex_unlock(&pm->lock);
}

bool pm_power_button(struct pm *pm)
{
	bool listening;

	pthread_mutex_lock(&pm->lock);
	pm->sts |= PM1_PWRBTN_STS;
	listening = (pm->en & PM1_PWRBTN_STS) != 0;
	update_sci(pm);
	pthread_mutex_unlock(&pm->lock);
	return listening;
}

struct pm *pm_create(const struct pm_ops *ops, void *arg)
{
	struct pm *pm = calloc(1, sizeof(*pm));

	if (pm == NULL)
		return NULL;
	pthread_mutex_init(&pm->lock, NULL);
	pm->ops = ops;
	pm->arg = arg;
	pm->cnt = PM1_SCI_EN;
	return pm;
}

void pm_free(struct pm *pm)
{
	if (pm == NULL)
		return;
	pthread_mutex_destroy(&pm->lock);
	free(pm);
}

/* ---- saved state ---- */

#define PM_STATE_VERSION 1

static int pm_save(void *arg, struct sbuf *out, char *err, size_t errlen)
{
	struct pm *pm = arg;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&pm->lock);
	sbuf_put_u16(out, PM_STATE_VERSION);
	sbuf_put_u16(out, pm->sts);
	sbuf_put_u16(out, pm->en);
	sbuf_put_u16(out, pm->cnt);
	sbuf_put_u8(out, pm->reset_reg);
	sbuf_put_bool(out, pm->sci_level);
	sbuf_put_u32(out, pm_timer_now(pm));
	pthread_mutex_unlock(&pm->lock);
	return 0;
}

static int pm_restore(void *arg, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct pm *pm = arg;
	uint16_t sts, en, cnt;
	uint8_t reset_reg;
	bool sci;
	uint32_t count;

	if (sbuf_get_version(in, PM_STATE_VERSION) == 0)
		return snprintf(err, errlen, "%s", in->why), -1;
	sts = sbuf_get_u16(in);
	en = sbuf_get_u16(in);
	cnt = sbuf_get_u16(in);
	reset_reg = sbuf_get_u8(in);
	sci = sbuf_get_bool(in);
	count = sbuf_get_u32(in);
	/* What cnt_write and reset_write never leave behind. */
	if ((cnt & PM1_SLP_EN) || !(cnt & PM1_SCI_EN))
		sbuf_fail(in, "PM1 control 0x%04x: SLP_EN set or SCI_EN clear", cnt);
	if (reset_reg & 0x04)
		sbuf_fail(in, "reset register 0x%02x has RST_CPU set", reset_reg);
	if (sci != ((sts & en & PM1_PWRBTN_STS) != 0))
		sbuf_fail(in, "sci_level %d does not follow from status and enable", sci);
	if (in->failed)
		return snprintf(err, errlen, "%s", in->why), -1;
	pthread_mutex_lock(&pm->lock);
	pm->sts = sts;
	pm->en = en;
	pm->cnt = cnt;
	pm->reset_reg = reset_reg;
	pm->tmr_offset = count - pm_timer_host();
	/* The new process's SCI input starts low: drive it to the saved level. */
	pm->sci_level = sci;
	pm->ops->set_sci(pm->arg, sci);
	pthread_mutex_unlock(&pm->lock);
	return 0;
}

const struct state_ops pm_state_ops = {
    .save = pm_save,
    .restore = pm_restore,
};

/* ---- wiring ---- */

static void machine_set_sci(void *arg, bool level)
{
	machine_irq_line(arg, PM_SCI_IRQ, level ? 1 : 0);
}

static void machine_exit(void *arg, int code)
{
	machine_request_exit(arg, code);
}

static const struct pm_ops machine_pm_ops = {machine_set_sci, machine_exit};

struct pm_port {
	struct pm *pm;
	uint16_t base;
};

static int pm_port_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct pm_port *pp = arg;
	uint16_t port = (uint16_t)(pp->base + offset);

	if (is_write)
		pm_write(pp->pm, port, size, (uint32_t)*val);
	else
		*val = pm_read(pp->pm, port, size);
	return 0;
}

static int pm_lpc_init(struct machine *m, char *err, size_t errlen)
{
	static struct pm_port blk, reset;

	(void)err;
	(void)errlen;
	m->pm = pm_create(&machine_pm_ops, m);
	if (m->pm == NULL || machine_add_state(m, "lpc.pm", &pm_state_ops, m->pm) < 0)
		return -1;
	blk = (struct pm_port){m->pm, PM1A_EVT_PORT};
	reset = (struct pm_port){m->pm, PM_RESET_PORT};
	if (machine_register_pio(m, PM1A_EVT_PORT, PM_BLOCK_LEN, pm_port_access, &blk, "acpi-pm") <
	        0 ||
	    machine_register_pio(m, PM_RESET_PORT, 1, pm_port_access, &reset, "reset") < 0)
		return -1;
	return 0;
}

LPC_DEVICE(pm) = {
    .name = "acpi-pm",
    .descr = "ACPI PM1 registers and timer (built in)",
    .init = pm_lpc_init,
};
