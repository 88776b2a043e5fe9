#include "bus/pci_slot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config.h"
#include "lib/devopts.h"
#include "lib/help.h"
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
