/*
 * The firmware debug console, QEMU's isa-debugcon at port 0x402 (its
 * "-debugcon file:F -global isa-debugcon.iobase=0x402"): SeaBIOS and OVMF
 * write their debug log there, one byte per OUT.  With -l debugcon,FILE
 * the bytes are appended to FILE; reads return 0xe9, which is how SeaBIOS
 * tells that a debug console is present.  Without the option the port is
 * left unclaimed, and the firmware keeps quiet.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/machine.h"
#include "core/snapshot.h"
#include "dev/lpc.h"
#include "lib/config.h"
#include "lib/file.h"

#define FW_DEBUGCON_PORT     0x402
#define FW_DEBUGCON_READBACK 0xe9

static int fw_debugcon_port(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	int *fd = arg;
	uint8_t b = (uint8_t)*val;

	(void)offset;
	(void)size;
	if (!is_write)
		*val = FW_DEBUGCON_READBACK;
	else if (*fd >= 0 && write(*fd, &b, 1) < 0)
		*fd = -1; /* a full disk stops the log, never the guest */
	return 0;
}

/*
 * Saved state, section "lpc.debugcon": only the version (1).  The port
 * has no state the guest sees (the file is reopened from the options); a
 * checkpoint lists it so that every device is accounted for.
 */
#define FW_DEBUGCON_STATE_VERSION 1

static int fw_debugcon_save(void *arg, struct sbuf *out, char *err, size_t errlen)
{
	(void)arg;
	(void)err;
	(void)errlen;
	sbuf_put_u16(out, FW_DEBUGCON_STATE_VERSION);
	return 0;
}

static int fw_debugcon_restore(void *arg, struct sbuf_reader *in, char *err, size_t errlen)
{
	(void)arg;
	if (sbuf_get_version(in, FW_DEBUGCON_STATE_VERSION) == 0)
		return snprintf(err, errlen, "%s", in->why), -1;
	return 0;
}

static const struct state_ops fw_debugcon_state_ops = {
    .save = fw_debugcon_save,
    .restore = fw_debugcon_restore,
};

static int fw_debugcon_init(struct machine *m, char *err, size_t errlen)
{
	const char *path = config_get("lpc.debugcon.path");
	static int fd = -1;

	if (path == NULL)
		return 0;
	fd = file_open_append(path, err, errlen);
	if (fd < 0)
		return -1;
	if (machine_add_state(m, "lpc.debugcon", &fw_debugcon_state_ops, &fd) < 0) {
		snprintf(err, errlen, "debugcon: cannot register its saved state");
		return -1;
	}
	return machine_register_pio(m, FW_DEBUGCON_PORT, 1, fw_debugcon_port, &fd, "debugcon");
}

static const char *const debugcon_keys[] = {"debugcon.path", NULL};

LPC_DEVICE(fw_debugcon) = {
    .name = "debugcon",
    .option = "debugcon",
    .keys = debugcon_keys,
    .descr = "firmware debug port 0x402 (SeaBIOS, OVMF) to a file",
    .usage = "  -l debugcon,FILE\n"
             "  FILE             what the firmware writes is appended to it\n",
    .init = fw_debugcon_init,
};
