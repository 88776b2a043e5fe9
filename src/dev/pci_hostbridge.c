/*
 * The PCI host bridge at 0:0.0 (bhyve: pci_hostb.c), class 06/00.  bhyve
 * identifies it as NetApp 0x1275:0x1275; "-s 0,hostbridge,vendor=V,devid=D"
 * overrides that (bhyve's amd_hostbridge is AMD's IDs).
 */
#include <stdio.h>

#include "bus/pci.h"
#include "lib/config.h"
#include "lib/parse.h"

static int id_option(struct config_node *node, const char *key, uint16_t def, uint16_t *out,
		     char *err, size_t errlen)
{
	const char *v = config_node_get(node, key);
	uint64_t n;

	*out = def;
	if (v == NULL)
		return 0;
	if (parse_uint(v, 0, 0xffff, &n) < 0) {
		snprintf(err, errlen, "%s: want a 16-bit number, not '%s'", key, v);
		return -1;
	}
	*out = (uint16_t)n;
	return 0;
}

static int hostbridge_init(struct machine *m, struct pci_func *f, struct config_node *node,
			   char *err, size_t errlen)
{
	uint16_t vendor, device;

	(void)m;
	if (id_option(node, "vendor", 0x1275, &vendor, err, errlen) < 0 ||
	    id_option(node, "devid", 0x1275, &device, err, errlen) < 0)
		return -1;
	pci_set_ids(f, vendor, device, 0x06, 0x00, 0x00, 0x00);
	return 0;
}

static int amd_hostbridge_init(struct machine *m, struct pci_func *f, struct config_node *node,
			       char *err, size_t errlen)
{
	int rc = hostbridge_init(m, f, node, err, errlen);

	if (rc == 0 && config_node_get(node, "vendor") == NULL)
		pci_set_ids(f, 0x1022, 0x7432, 0x06, 0x00, 0x00, 0x00);
	return rc;
}

PCI_DEVEMU(hostbridge) = {
	.name = "hostbridge",
	.init = hostbridge_init,
};

PCI_DEVEMU(amd_hostbridge) = {
	.name = "amd_hostbridge",
	.init = amd_hostbridge_init,
};
