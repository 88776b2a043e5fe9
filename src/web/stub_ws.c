/*
 * Stand-in for part A1's web_auth_wsi (src/web/auth.c), so the webws branch
 * links `vm` and the unit tests.  Removed at merge.
 */
#include "web/web.h"

/* Refuses every console: no sessions before auth.c. */
const struct web_session *web_auth_wsi(struct web_ctx *ctx, struct lws *wsi, enum web_role need)
{
	(void)ctx;
	(void)wsi;
	(void)need;
	return NULL;
}
