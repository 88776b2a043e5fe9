/*
 * Devices behind the LPC bridge (ISA ports and IRQs): serial ports, RTC,
 * ACPI power management, keyboard controller, boot ROM.  Each device file
 * registers itself with LPC_DEVICE(), a linker set as in bhyve
 * (DATA_SET(lpc_dev_set, ...)), so no central list has to grow.
 */
#ifndef KHYVE_LPC_H
#define KHYVE_LPC_H

#include <stddef.h>

struct aml;
struct machine;

struct lpc_device {
	/* Name used in logs. */
	const char *name;
	/* Create the device if the configuration asks for it (built-in
	 * devices always do).  0, or -1 with a one-line reason in `err`. */
	int (*init)(struct machine *m, char *err, size_t errlen);
	/* Optional: describe the device to the OS, as bhyve's LPC_DSDT():
	 * append its Device() objects (ACPI 6.4 section 6.1) to the DSDT's
	 * \_SB scope, from the same configuration `init` reads. */
	void (*write_dsdt)(struct aml *a);
};

#define LPC_DEVICE(id)                                                                             \
	static const struct lpc_device lpc_device_##id;                                            \
	static const struct lpc_device *const lpc_device_ptr_##id                                  \
	    __attribute__((section("lpc_devices"), used)) = &lpc_device_##id;                      \
	static const struct lpc_device lpc_device_##id

/* Initialise every registered LPC device; 0, or -1 with `err` filled. */
int lpc_init_devices(struct machine *m, char *err, size_t errlen);

/* Let every registered LPC device add its AML (the write_dsdt hooks, in
 * link order); the signature of acpi_config.lpc_dsdt, `arg` unused. */
void lpc_write_dsdt(struct aml *a, void *arg);

/*
 * Turn "-l NAME[,CONF]" into config keys, as bhyve's lpc_device_parse():
 *   comN,BACKEND            lpc.comN.path=BACKEND (N = 1..4)
 *   bootrom,ROM[,VARS]      lpc.bootrom=ROM, lpc.bootvars=VARS
 *   pc-testdev[,debugcon=F] lpc.pc-testdev=true, lpc.pc-testdev-debugcon=F
 *   debugcon,FILE           lpc.debugcon.path=FILE (firmware log, port 0x402)
 *   fwcfg[,qemu|none]       lpc.fwcfg=qemu (QEMU's fw_cfg, dev/fw_cfg.h)
 * Returns 0, or -1 with a one-line reason in `err`.
 */
int lpc_parse_option(const char *opt, char *err, size_t errlen);

#endif
