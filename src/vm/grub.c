/* stub: replaced by its owner */
#include "vm/khyvecmd.h"

#include <stdio.h>

int vm_grub_image(const struct vm_sys *sys, const struct vm_guest *g, bool install,
		  const char *iso, char *out, char *err, size_t errlen)
{
	(void)sys, (void)g, (void)install, (void)iso, (void)out;
	snprintf(err, errlen, "loader=\"grub\" is not implemented yet");
	return -1;
}
