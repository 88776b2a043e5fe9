/*
 * ACPI fixed-hardware power management (ACPI 6.4 section 4.8, bhyve: pm.c):
 * the PM1a event block (status/enable) at PM1A_EVT_PORT, the PM1a control
 * block at PM1A_CNT_PORT (sleep type/enable: S5 powers off), the 32-bit
 * PM timer at PM_TMR_PORT, the SCI on IRQ 9, the fixed-feature power button,
 * and the reset control register at port 0xCF9.
 */
#ifndef KHYVE_PM_H
#define KHYVE_PM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/snapshot.h"

/* QEMU's PIIX4 layout (PMBA 0xB000), which firmware built for QEMU
 * assumes; it keeps SeaBIOS's and OVMF's debug port 0x402 free. */
#define PM_BASE              0xb000
#define PM_BLOCK_LEN         12
#define PM1A_EVT_PORT        PM_BASE       /* 4 bytes: PM1_STS (2), PM1_EN (2) */
#define PM1A_CNT_PORT        (PM_BASE + 4) /* 2 bytes */
#define PM_TMR_PORT          (PM_BASE + 8) /* 4 bytes, 3.579545 MHz */
#define PM_RESET_PORT        0xcf9         /* reset control register */
#define PM_SCI_IRQ           9
#define PM_RESET_VALUE       0x06 /* what the FADT reset register asks the OS to write */
#define PM_SLP_TYP_S5        5    /* \_S5 package value: SLP_TYP for soft-off */
#define PM_SLP_TYP_PIIX4_OFF 0    /* what QEMU's PIIX4 also takes as soft-off */

#define PM1_TMR_STS          0x0001
#define PM1_PWRBTN_STS       0x0100
#define PM1_WAK_STS          0x8000
#define PM1_SCI_EN           0x0001
#define PM1_SLP_EN           0x2000

struct pm;
struct machine;

/* Callbacks so the model runs without a machine in unit tests. */
struct pm_ops {
	void (*set_sci)(void *arg, bool level);
	void (*request_exit)(void *arg, int code); /* enum khyve_exit */
};

struct pm *pm_create(const struct pm_ops *ops, void *arg);
void pm_free(struct pm *pm);

/* Access to the PM1a event block, control block, timer, or reset register:
 * `port` is the absolute port number. */
uint32_t pm_read(struct pm *pm, uint16_t port, unsigned size);
void pm_write(struct pm *pm, uint16_t port, unsigned size, uint32_t val);

/* Press the power button (SIGTERM): sets PWRBTN_STS, raises the SCI when the
 * guest enabled it.  Returns false when the guest has not enabled the power
 * button event (no ACPI OS listening). */
bool pm_power_button(struct pm *pm);

/*
 * Saved state (docs/design/snapshots.md section 2, "dev"): `arg` is the
 * struct pm.  Version 1: PM1 status, enable and control, the reset
 * register, the SCI level and the PM timer's count at the time of the
 * save.  The restore makes the timer go on from that count (an offset from
 * this process's monotonic clock), never jump back to where the host clock
 * puts it: guests use it as a clocksource.  It re-drives the SCI.
 */
extern const struct state_ops pm_state_ops;

#endif
