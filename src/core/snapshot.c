/* State participants; see snapshot.h. */
#include "core/snapshot.h"

#include <stdlib.h>
#include <string.h>

#include "core/machine.h"
#include "lib/log.h"

static bool state_name_ok(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len >= STATE_NAME_LEN)
		return false;
	for (size_t i = 0; i < len; i++)
		if (name[i] <= ' ' || name[i] > '~')
			return false;
	return strcmp(name, "end") != 0;
}

int machine_add_state(struct machine *m, const char *name, const struct state_ops *ops, void *arg)
{
	struct state_participant *p;

	if (!state_name_ok(name) || machine_state_find(m, name) != NULL) {
		log_err("state participant '%s': bad or repeated name", name);
		return -1;
	}
	p = realloc(m->states, (m->nstates + 1) * sizeof(*p));
	if (p == NULL)
		return -1;
	m->states = p;
	p += m->nstates++;
	memset(p, 0, sizeof(*p));
	memcpy(p->name, name, strlen(name) + 1);
	p->ops = ops;
	p->arg = arg;
	return 0;
}

const struct state_participant *machine_state_find(struct machine *m, const char *name)
{
	for (unsigned i = 0; i < m->nstates; i++)
		if (!strcmp(m->states[i].name, name))
			return &m->states[i];
	return NULL;
}
