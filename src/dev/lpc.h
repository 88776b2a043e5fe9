/*
 * Devices behind the LPC bridge (ISA ports and IRQs): serial ports, RTC,
 * ACPI power management, keyboard controller, boot ROM.  Each device file
 * registers itself with LPC_DEVICE(), a linker set as in bhyve
 * (DATA_SET(lpc_dev_set, ...)), so no central list has to grow.
 */
#ifndef KHYVE_LPC_H
#define KHYVE_LPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct aml;
struct machine;

struct lpc_device {
	/* Name used in logs. */
	const char *name;
	/* How -l names it ("comN" stands for com1..com4); NULL for a
	 * built-in device that -l does not configure. */
	const char *option;
	/* One line for `-l help`. */
	const char *descr;
	/* `-l NAME,help`: the synopsis and one line per option, each line
	 * ending in '\n'; NULL when it takes none. */
	const char *usage;
	/* The keys below "lpc" it reads, as devopts_key_matches() patterns
	 * ("com[1-4].path", "bootrom"), ending in NULL; NULL for none.  Any
	 * other lpc.* key is refused before the VM starts. */
	const char *const *keys;
	/* Whether it sits behind the PCI-ISA bridge, so that configuring it
	 * needs -s N,lpc (bhyve's rule for the serial ports and pc-testdev). */
	bool needs_bridge;
	/* Create the device if the configuration asks for it (built-in
	 * devices always do); NULL when another layer creates it (the boot
	 * ROM).  0, or -1 with a one-line reason in `err`. */
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

/* `-l help`: every device -l configures, with its description, sorted. */
void lpc_print_devices(FILE *out);

/* `-l NAME,help`: the usage text of device `name` (any case; com1..com4
 * all name the UART); 0, or -1 when -l has no such device. */
int lpc_print_device_usage(FILE *out, const char *name);

/*
 * Turn "-l NAME[,CONF]" into config keys, as bhyve's lpc_device_parse():
 *   comN,BACKEND            lpc.comN.path=BACKEND (N = 1..4)
 *   bootrom,ROM[,VARS]      lpc.bootrom=ROM, lpc.bootvars=VARS
 *   pc-testdev[,debugcon=F] lpc.pc-testdev=true, lpc.pc-testdev-debugcon=F
 *   debugcon,FILE           lpc.debugcon.path=FILE (firmware log, port 0x402)
 *   fwcfg[,qemu|none]       lpc.fwcfg=qemu (QEMU's fw_cfg, dev/fw_cfg.h)
 *   tpm,swtpm,PATH[,version=2.0]  lpc.tpm.type, .path, .version (dev/tpm_crb.h)
 * Returns 0, or -1 with a one-line reason in `err`.
 */
int lpc_parse_option(const char *opt, char *err, size_t errlen);

/*
 * Check the lpc.* keys before the VM starts: each must be one a registered
 * LPC device knows (lpc_device.keys); an unknown one gives -1 and one line
 * in `err` naming it, or with `warn_only` a warning and 0.  A device that
 * needs the PCI-ISA bridge (the serial ports, pc-testdev) and is
 * configured while no pci.B.S.F.device is "lpc" gives -1 too, as in bhyve.
 */
int lpc_check_config(bool warn_only, char *err, size_t errlen);

#endif
