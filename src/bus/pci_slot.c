#include "bus/pci_slot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config.h"
#include "lib/devopts.h"
#include "lib/help.h"
#include "lib/log.h"
#include "lib/parse.h"

/* GNU ld defines these for the section, possibly empty. */
extern const struct pci_devemu *const __start_pci_devemus[] __attribute__((weak));
extern const struct pci_devemu *const __stop_pci_devemus[] __attribute__((weak));

const struct pci_devemu *pci_devemu_find(const char *name)
{
	for (const struct pci_devemu *const *d = __start_pci_devemus; d < __stop_pci_devemus; d++)
		if (strcmp((*d)->name, name) == 0)
			return *d;
	return NULL;
}

void pci_print_emulations(FILE *out)
{
	struct help_line lines[64]; /* far more than are registered */
	size_t n = 0;

	for (const struct pci_devemu *const *d = __start_pci_devemus;
	     d < __stop_pci_devemus && n < sizeof(lines) / sizeof(lines[0]); d++)
		lines[n++] = (struct help_line){(*d)->name, (*d)->descr};
	help_print_lines(out, lines, n);
}

int pci_print_emulation_usage(FILE *out, const char *name)
{
	const struct pci_devemu *de = pci_devemu_find(name);

	if (de == NULL)
		return -1;
	help_print_usage(out, de->name, de->descr, de->usage);
	/* bus/pci.c reads rom= for every function, whatever its emulation. */
	fprintf(out, "  rom=FILE         option ROM (55 AA) in the expansion ROM BAR\n");
	return 0;
}

int pci_parse_legacy_config(struct config_node *node, const char *conf, char *err, size_t errlen)
{
	return devopts_parse(node, conf, NULL, "device", err, errlen);
}

/* "slot", "slot:func" or "bus:slot:func" (bhyve's forms); every field
 * must be present: "3::1" and "3:" are errors. */
static int parse_bdf(const char *s, unsigned *bus, unsigned *slot, unsigned *func)
{
	uint64_t v[3];
	unsigned n = 0;
	char field[16];

	for (;;) {
		const char *colon = strchr(s, ':');
		size_t len = colon ? (size_t)(colon - s) : strlen(s);

		if (n == 3 || len == 0 || len >= sizeof(field))
			return -1;
		memcpy(field, s, len);
		field[len] = '\0';
		if (parse_uint(field, 0, 255, &v[n++]) < 0)
			return -1;
		if (colon == NULL)
			break;
		s = colon + 1;
	}
	*bus = n == 3 ? (unsigned)v[0] : 0;
	*slot = (unsigned)v[n == 3 ? 1 : 0];
	*func = n == 1 ? 0 : (unsigned)v[n - 1];
	return (*slot > 31 || *func > 7) ? -1 : 0;
}

int pci_parse_slot_option(const char *opt, char *err, size_t errlen)
{
	char slotstr[32], emul[64], path[64];
	const char *c1 = strchr(opt, ','), *c2, *conf;
	const struct pci_devemu *de;
	struct config_node *node;
	unsigned bus, slot, func;
	size_t elen;

	if (c1 == NULL || (size_t)(c1 - opt) >= sizeof(slotstr)) {
		snprintf(err, errlen, "bad -s argument '%s' (want slot,emulation[,conf])", opt);
		return -1;
	}
	memcpy(slotstr, opt, (size_t)(c1 - opt));
	slotstr[c1 - opt] = '\0';
	c2 = strchr(c1 + 1, ',');
	elen = c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1);
	conf = c2 ? c2 + 1 : NULL;
	if (parse_bdf(slotstr, &bus, &slot, &func) < 0) {
		snprintf(err, errlen, "bad PCI slot '%s' (want slot[:func] or bus:slot:func)",
		         slotstr);
		return -1;
	}
	if (elen == 0 || elen >= sizeof(emul)) {
		snprintf(err, errlen, "missing emulation in -s '%s'", opt);
		return -1;
	}
	memcpy(emul, c1 + 1, elen);
	emul[elen] = '\0';
	de = pci_devemu_find(emul);
	if (de == NULL) {
		snprintf(err, errlen, "unknown PCI emulation '%s' in -s %s (see khyve -s help)",
		         emul, opt);
		return -1;
	}
	snprintf(path, sizeof(path), "pci.%u.%u.%u", bus, slot, func);
	if (config_find_node(path) != NULL) {
		snprintf(err, errlen, "PCI slot %u:%u:%u is used twice", bus, slot, func);
		return -1;
	}
	node = config_create_node(path);
	if (node == NULL || config_node_set(node, "device", emul) < 0) {
		snprintf(err, errlen, "cannot record -s %s", opt);
		return -1;
	}
	if (de->legacy_config != NULL)
		return de->legacy_config(node, conf, err, errlen);
	return pci_parse_legacy_config(node, conf, err, errlen);
}

/* ---- the check of pci.B.S.F before the VM starts ---- */

struct key_report {
	const char *emul; /* the emulation, for the message */
	unsigned slot, func;
	bool warn_only;
	char *err;
	size_t errlen;
};

static void report_unknown_key(const char *key, void *arg)
{
	struct key_report *r = arg;

	if (r->warn_only)
		log_warn("%s in slot %u:%u: unknown option '%s' ignored (config.unknown=warn)",
		         r->emul, r->slot, r->func, key);
	else if (r->err[0] == '\0')
		snprintf(r->err, r->errlen,
		         "%s in slot %u:%u: unknown option '%s' (see khyve -s %s,help)", r->emul,
		         r->slot, r->func, key, r->emul);
}

/* The keys of function `node` (pci.B.S.F) against its emulation's list. */
static int check_function(struct config_node *node, unsigned slot, unsigned func, bool warn_only,
                          char *err, size_t errlen)
{
	static const char *const common[] = {"device", "rom"};
	const char *emul = config_node_get(node, "device");
	const struct pci_devemu *de = emul ? pci_devemu_find(emul) : NULL;
	struct key_report r = {emul, slot, func, warn_only, err, errlen};
	const char *keys[64];
	size_t n = 0;

	if (de == NULL) {
		snprintf(err, errlen, "PCI slot %u:%u: unknown emulation '%s' (see khyve -s help)",
		         slot, func, emul ? emul : "");
		return -1;
	}
	for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
		keys[n++] = common[i];
	for (const char *const *k = de->keys; k && *k && n < sizeof(keys) / sizeof(keys[0]); k++)
		keys[n++] = *k;
	err[0] = '\0';
	if (devopts_each_unknown(node, keys, n, report_unknown_key, &r) > 0 && !warn_only)
		return -1;
	return 0;
}

/* A child of a pci.* level that is an inner node named by a number up to
 * `max`; -1 with `err` otherwise. */
static int numbered_level(struct config_node *c, const char *prefix, unsigned max, uint64_t *v,
                          char *err, size_t errlen)
{
	if (config_node_value(c) == NULL && parse_uint(config_node_name(c), 0, max, v) == 0)
		return 0;
	snprintf(err, errlen,
	         "bad PCI config key '%s%s' (want pci.BUS.SLOT.FUNC.KEY, slot 0-31, "
	         "function 0-7)",
	         prefix, config_node_name(c));
	return -1;
}

int pci_check_config(bool warn_only, char *err, size_t errlen)
{
	struct config_node *pci = config_find_node("pci");
	char prefix[64];
	uint64_t b, s, f;

	for (struct config_node *bn = pci ? config_node_first(pci) : NULL; bn;
	     bn = config_node_next(bn)) {
		if (numbered_level(bn, "pci.", 255, &b, err, errlen) < 0)
			return -1;
		for (struct config_node *sn = config_node_first(bn); sn;
		     sn = config_node_next(sn)) {
			snprintf(prefix, sizeof(prefix), "pci.%u.", (unsigned)b);
			if (numbered_level(sn, prefix, 31, &s, err, errlen) < 0)
				return -1;
			for (struct config_node *fn = config_node_first(sn); fn;
			     fn = config_node_next(fn)) {
				snprintf(prefix, sizeof(prefix), "pci.%u.%u.", (unsigned)b,
				         (unsigned)s);
				if (numbered_level(fn, prefix, 7, &f, err, errlen) < 0 ||
				    check_function(fn, (unsigned)s, (unsigned)f, warn_only, err,
				                   errlen) < 0)
					return -1;
			}
		}
	}
	return 0;
}
