/*
 * pc-testdev, as bhyve's -l pc-testdev and QEMU's pc-testdev/isa-debug-exit
 * conventions, so the same tiny test guests run under khyve and QEMU:
 *   port 0xf4 (4 bytes)  a write of v ends khyve with status (v << 1) | 1
 *   port 0xe9            debug console: bytes discarded, or appended to
 *                        lpc.pc-testdev-debugcon=FILE; reads return 0xe9
 *   MMIO 0xff000000      64 KiB of scratch memory: writes are kept and read
 *                        back, so MMIO dispatch can be checked end to end
 * A post/debug port sink at 0x80 is always present (see the boot probe).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/machine.h"
#include "core/snapshot.h"
#include "dev/lpc.h"
#include "lib/config.h"
#include "lib/file.h"

#define TESTDEV_EXIT_PORT  0xf4
#define TESTDEV_DEBUGCON   0xe9
#define TESTDEV_IOMEM_GPA  0xff000000ull
#define TESTDEV_IOMEM_SIZE 0x10000u

struct testdev {
	struct machine *m;
	int debugcon_fd; /* -1: discard */
	pthread_mutex_t lock;
	uint8_t iomem[TESTDEV_IOMEM_SIZE];
};

static int exit_port(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct testdev *t = arg;

	(void)offset;
	(void)size;
	if (is_write)
		machine_request_exit(t->m, (int)((((uint32_t)*val) << 1) | 1) & 0xff);
	return 0;
}

static int debugcon_port(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct testdev *t = arg;
	uint8_t b = (uint8_t)*val;

	(void)offset;
	(void)size;
	if (!is_write)
		*val = TESTDEV_DEBUGCON; /* QEMU's "is a debugcon there?" answer */
	else if (t->debugcon_fd >= 0 && write(t->debugcon_fd, &b, 1) < 0)
		t->debugcon_fd = -1; /* stop trying; the guest must not notice */
	return 0;
}

static int iomem_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct testdev *t = arg;

	if (offset + size > TESTDEV_IOMEM_SIZE)
		return -1;
	pthread_mutex_lock(&t->lock);
	if (is_write)
		memcpy(&t->iomem[offset], val, size);
	else
		memcpy(val, &t->iomem[offset], size);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/*
 * Saved state, section "lpc.pc-testdev", version 1: the MMIO scratch
 * memory, which the guest reads back.  The exit and debug console ports
 * have none (the console's file is reopened from the options).
 */
#define TESTDEV_STATE_VERSION 1

static int testdev_save(void *arg, struct sbuf *out, char *err, size_t errlen)
{
	struct testdev *t = arg;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&t->lock);
	sbuf_put_u16(out, TESTDEV_STATE_VERSION);
	sbuf_put_u32(out, TESTDEV_IOMEM_SIZE);
	sbuf_put_bytes(out, t->iomem, TESTDEV_IOMEM_SIZE);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static int testdev_restore(void *arg, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct testdev *t = arg;
	uint32_t len;

	if (sbuf_get_version(in, TESTDEV_STATE_VERSION) == 0)
		return snprintf(err, errlen, "%s", in->why), -1;
	len = sbuf_get_u32(in);
	if (!in->failed && len != TESTDEV_IOMEM_SIZE)
		sbuf_fail(in, "scratch memory of %u bytes, not %u", len, TESTDEV_IOMEM_SIZE);
	/* Whole or not at all: check the length is there before copying. */
	if (!in->failed && in->len - in->off < TESTDEV_IOMEM_SIZE)
		sbuf_fail(in, "truncated");
	if (in->failed)
		return snprintf(err, errlen, "%s", in->why), -1;
	pthread_mutex_lock(&t->lock);
	sbuf_get_bytes(in, t->iomem, TESTDEV_IOMEM_SIZE);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static const struct state_ops testdev_state_ops = {
    .save = testdev_save,
    .restore = testdev_restore,
};

static int testdev_open_debugcon(struct testdev *t, char *err, size_t errlen)
{
	const char *path = config_get("lpc.pc-testdev-debugcon");
	char why[200];

	t->debugcon_fd = -1;
	if (path == NULL)
		return 0;
	t->debugcon_fd = file_open_append(path, why, sizeof(why));
	if (t->debugcon_fd < 0) {
		snprintf(err, errlen, "debugcon file: %s", why);
		return -1;
	}
	return 0;
}

static int testdev_init(struct machine *m, char *err, size_t errlen)
{
	struct testdev *t;
	bool on;

	if (config_get_bool("lpc.pc-testdev", false, &on) < 0) {
		snprintf(err, errlen, "lpc.pc-testdev: not a boolean");
		return -1;
	}
	if (!on)
		return 0;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return -1;
	t->m = m;
	pthread_mutex_init(&t->lock, NULL);
	if (testdev_open_debugcon(t, err, errlen) < 0) {
		pthread_mutex_destroy(&t->lock);
		free(t); /* nothing refers to it yet */
		return -1;
	}
	if (machine_register_pio(m, TESTDEV_EXIT_PORT, 4, exit_port, t, "isa-debug-exit") < 0 ||
	    machine_register_pio(m, TESTDEV_DEBUGCON, 1, debugcon_port, t, "debugcon") < 0 ||
	    machine_register_mmio(m, TESTDEV_IOMEM_GPA, TESTDEV_IOMEM_SIZE, iomem_access, t,
	                          "pc-testdev-iomem") < 0) {
		snprintf(err, errlen, "pc-testdev ports are already taken");
		return -1;
	}
	if (machine_add_state(m, "lpc.pc-testdev", &testdev_state_ops, t) < 0) {
		snprintf(err, errlen, "pc-testdev: cannot register its saved state");
		return -1;
	}
	return 0;
}

static const char *const testdev_keys[] = {"pc-testdev", "pc-testdev-debugcon", NULL};

LPC_DEVICE(pc_testdev) = {
    .name = "pc-testdev",
    .option = "pc-testdev",
    .keys = testdev_keys,
    .needs_bridge = true,
    .descr = "QEMU's test devices: exit port 0xf4, debug port 0xe9, MMIO scratch",
    .usage = "  -l pc-testdev[,debugcon=FILE]\n"
             "  debugcon=FILE    append what the guest writes to port 0xe9 to FILE\n",
    .init = testdev_init,
};
