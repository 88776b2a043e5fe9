/* stub: replaced by its owner */
#include "vm/state.h"

#include <stdio.h>
#include <string.h>

void vm_status_get(const struct vm_sys *sys, const struct vm_guest *g, struct vm_status *st)
{
	(void)sys, (void)g;
	memset(st, 0, sizeof(*st));
}

void vm_status_format(const struct vm_status *st, char *out, size_t len)
{
	if (st->state == VM_RUNNING)
		snprintf(out, len, "Running (%d)", (int)st->supervisor);
	else if (st->state == VM_LOCKED)
		snprintf(out, len, "Locked (%s)", st->host);
	else
		snprintf(out, len, "Stopped");
}
