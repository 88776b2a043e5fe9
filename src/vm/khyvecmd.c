/* stub: replaced by its owner (minimal so that callers can be tested) */
#include "vm/khyvecmd.h"

#include <stdio.h>

int vm_khyve_command(const struct vm_sys *sys, const struct vm_guest *g,
		     const struct vm_start_opts *opts, struct argv *out, char *err, size_t errlen)
{
	(void)opts;
	if (argv_add(out, sys->khyve) || argv_add(out, "-m") ||
	    argv_add(out, rcconf_get_default(g->conf, "memory", "256M")) || argv_add(out, g->name)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}
