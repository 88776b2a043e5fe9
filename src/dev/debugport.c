/*
 * Port 0x80, the POST/debug port, as a boot-time probe (Firecracker's boot
 * timer, Cloud Hypervisor's debug port): with -o boot_probe=true, every
 * byte the guest writes there is logged with the wall time since khyve
 * started and the CPU time khyve has used so far.  Off by default: Linux
 * also writes 0x80 for I/O delays.  Without it the port is a silent sink.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/machine.h"
#include "core/snapshot.h"
#include "dev/lpc.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/clock.h"

#define DEBUG_PORT 0x80

struct debugport {
	struct machine *m;
	bool log;
};

static double ms_since(uint64_t start_ns)
{
	return (double)(monotonic_ns() - start_ns) / 1e6;
}

static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int debugport_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct debugport *d = arg;

	(void)offset;
	(void)size;
	if (!is_write) {
		*val = 0xff;
		return 0;
	}
	if (d->log)
		log_info("boot probe 0x%02x: %.3f ms since start, %.3f ms CPU",
		         (unsigned)(*val & 0xff), ms_since(d->m->start_ns), cpu_ms());
	return 0;
}

/*
 * Saved state, section "lpc.debugport": only the version (1).  The port
 * keeps nothing the guest sees (boot_probe is an option), but a checkpoint
 * lists it so that every device is accounted for.
 */
#define DEBUGPORT_STATE_VERSION 1

static int debugport_save(void *arg, struct sbuf *out, char *err, size_t errlen)
{
	(void)arg;
	(void)err;
	(void)errlen;
	sbuf_put_u16(out, DEBUGPORT_STATE_VERSION);
	return 0;
}

static int debugport_restore(void *arg, struct sbuf_reader *in, char *err, size_t errlen)
{
	(void)arg;
	if (sbuf_get_version(in, DEBUGPORT_STATE_VERSION) == 0)
		return snprintf(err, errlen, "%s", in->why), -1;
	return 0;
}

static const struct state_ops debugport_state_ops = {
    .save = debugport_save,
    .restore = debugport_restore,
};

static int debugport_init(struct machine *m, char *err, size_t errlen)
{
	struct debugport *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return -1;
	d->m = m;
	if (config_get_bool("boot_probe", false, &d->log) < 0) {
		snprintf(err, errlen, "boot_probe: not a boolean");
		return -1;
	}
	if (machine_add_state(m, "lpc.debugport", &debugport_state_ops, d) < 0) {
		snprintf(err, errlen, "debugport: cannot register its saved state");
		return -1;
	}
	return machine_register_pio(m, DEBUG_PORT, 1, debugport_access, d, "debugport");
}

LPC_DEVICE(debugport) = {
    .name = "debugport",
    .descr = "port 0x80 POST codes and boot_probe (built in)",
    .init = debugport_init,
};
