/* vm snapshot -m: pause, checkpoint, take the disks, resume (snapmem.h). */
#include "vm/snapmem.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "vm/live.h"
#include "vm/storage.h"
#include "vm/suspend.h"

/* khyve's answer to vm.pause of a paused guest, as khyvectl prints it. */
#define ALREADY_PAUSED ": already paused"

/* Pause `g`; *was_paused tells whether someone else had paused it. */
static int pause_guest(const struct vm_sys *sys, const struct vm_guest *g, bool *was_paused,
                       char *err, size_t errlen)
{
	*was_paused = false;
	if (vm_khyvectl(sys, g, "--pause", err, errlen) == 0)
		return 0;
	if (storage_has_suffix(err, ALREADY_PAUSED)) {
		*was_paused = true;
		return 0;
	}
	return -1;
}

static int checkpoint_into(const struct vm_sys *sys, const struct vm_guest *g, const char *state,
                           char *err, size_t errlen)
{
	char arg[PATH_MAX + 16];

	if (snprintf(arg, sizeof(arg), "--checkpoint=%s", state) >= (int)sizeof(arg)) {
		snprintf(err, errlen, "%s: path too long", state);
		return -1;
	}
	return vm_khyvectl(sys, g, arg, err, errlen);
}

int snapmem_take(const struct vm_sys *sys, const struct vm_guest *g, const char *state,
                 snapmem_disks_fn disks, void *arg, char *err, size_t errlen)
{
	char why[ERRLEN];
	bool was_paused;
	int rc;

	if (pause_guest(sys, g, &was_paused, err, errlen) < 0)
		return -1;
	rc = checkpoint_into(sys, g, state, err, errlen);
	if (rc == 0)
		rc = disks(arg, err, errlen);
	if (!was_paused && vm_khyvectl(sys, g, "--resume", why, sizeof(why)) < 0)
		vm_warn("%s stays paused (khyvectl --socket=%s/%s --resume lets it go on): %s",
		        g->name, g->dir, VM_API_SOCKET, why);
	return rc;
}
