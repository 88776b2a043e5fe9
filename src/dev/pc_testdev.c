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
