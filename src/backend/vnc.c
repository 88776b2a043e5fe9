/* Placeholder until the VNC server lands. */
#include "backend/vnc.h"

#include <stdio.h>

struct vnc_server *vnc_start(const struct vnc_config *c, char *err, size_t errlen)
{
	(void)c;
	snprintf(err, errlen, "fbuf: the VNC server is not built yet");
	return NULL;
}

void vnc_stop(struct vnc_server *s)
{
	(void)s;
}
