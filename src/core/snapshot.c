/* State participants; see snapshot.h. */
#include "core/snapshot.h"

#include <stdio.h>
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

/* The reason participant `p` gives for never being saved, or NULL. */
static const char *never_saved(const struct state_participant *p)
{
	return p->ops != NULL && p->ops->never_saved != NULL ? p->ops->never_saved(p->arg) : NULL;
}

int machine_state_saveable(struct machine *m, char *err, size_t errlen)
{
	for (unsigned i = 0; i < m->nstates; i++)
		if (never_saved(&m->states[i]) != NULL) {
			snprintf(err, errlen, "%s cannot be saved: %s", m->states[i].name,
			         never_saved(&m->states[i]));
			return -1;
		} else if (m->states[i].ops == NULL || m->states[i].ops->save == NULL ||
		           m->states[i].ops->restore == NULL) {
			snprintf(err, errlen,
			         "%s cannot be saved yet (issue 14: not every device has its state "
			         "saved)",
			         m->states[i].name);
			return -1;
		}
	return 0;
}

static void unquiesce_from(struct machine *m, unsigned first)
{
	for (unsigned i = first; i < m->nstates; i++)
		if (m->states[i].ops != NULL && m->states[i].ops->unquiesce != NULL)
			m->states[i].ops->unquiesce(m->states[i].arg);
}

int machine_state_quiesce(struct machine *m, char *err, size_t errlen)
{
	for (unsigned i = m->nstates; i-- > 0;) {
		const struct state_participant *p = &m->states[i];
		char why[256] = "";

		if (p->ops == NULL || p->ops->quiesce == NULL)
			continue;
		if (p->ops->quiesce(p->arg, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s: %s", p->name,
			         why[0] ? why : "cannot be quiesced");
			/* Its own unquiesce too: the ops say it is called after a failure. */
			unquiesce_from(m, i);
			return -1;
		}
	}
	return 0;
}

void machine_state_unquiesce(struct machine *m)
{
	unquiesce_from(m, 0);
}

int machine_state_save_one(struct machine *m, unsigned i, struct sbuf *out, char *err,
                           size_t errlen)
{
	const struct state_participant *p = &m->states[i];
	char why[256] = "";

	sbuf_free(out);
	if (p->ops == NULL || p->ops->save == NULL) {
		snprintf(err, errlen, "%s cannot be saved yet", p->name);
		return -1;
	}
	if (p->ops->save(p->arg, out, why, sizeof(why)) < 0 || out->failed) {
		snprintf(err, errlen, "%s: %s", p->name, why[0] ? why : "cannot save its state");
		return -1;
	}
	return 0;
}

int machine_state_restore_one(struct machine *m, unsigned i, const void *data, size_t len,
                              char *err, size_t errlen)
{
	const struct state_participant *p = &m->states[i];
	struct sbuf_reader in;
	char why[256] = "";

	sbuf_reader_init(&in, data, len);
	if (p->ops == NULL || p->ops->restore == NULL) {
		snprintf(err, errlen, "%s cannot be restored", p->name);
		return -1;
	}
	if (p->ops->restore(p->arg, &in, why, sizeof(why)) < 0) {
		if (why[0] == '\0' && in.failed)
			snprintf(why, sizeof(why), "%s", in.why);
		/* A participant that names itself (the PCI layer does) is not
		 * named twice. */
		if (strncmp(why, p->name, strlen(p->name)) == 0 && why[strlen(p->name)] == ':')
			snprintf(err, errlen, "%s", why);
		else
			snprintf(err, errlen, "%s: %s", p->name,
			         why[0] ? why : "cannot restore its state");
		return -1;
	}
	return sbuf_reader_done(&in, p->name, err, errlen);
}
