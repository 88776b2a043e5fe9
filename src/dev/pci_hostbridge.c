/*
 * The PCI host bridge at 0:0.0 (bhyve: pci_hostb.c), class 06/00.  bhyve
 * identifies it as NetApp 0x1275:0x1275; "-s 0,hostbridge,vendor=V,devid=D"
 * overrides that (bhyve's amd_hostbridge is AMD's IDs).
 *
 * "-s 0,i440fx" is the host bridge firmware built for QEMU's "pc" machine
 * looks for: Intel 82441FX (8086:1237, revision 2) with QEMU's subsystem
 * IDs (1af4:1100), by which SeaBIOS recognises QEMU, and the PAM registers
 * (config 0x59-0x5f, Intel 82441FX datasheet section 3.2.18) and SMRAM
 * (0x72) as plain read/write bytes.  The shadow areas 0xC0000-0xFFFFF stay
 * writable RAM whatever PAM says (firmware only needs them writable while
 * it sets up; bhyve has no PAM at all).
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

static const char *const hostbridge_keys[] = {"vendor", "devid", NULL};

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
    .descr = "host bridge, bhyve's IDs (1275:1275)",
    .usage = "  -s SLOT,hostbridge[,vendor=V][,devid=D]\n"
             "  vendor=V         PCI vendor ID (16 bits)\n"
             "  devid=D          PCI device ID (16 bits)\n",
    .keys = hostbridge_keys,
    .init = hostbridge_init,
    .save = pci_save_nothing,
    .restore = pci_restore_nothing,
};

PCI_DEVEMU(amd_hostbridge) = {
    .name = "amd_hostbridge",
    .descr = "host bridge with AMD's IDs (1022:7432)",
    .usage = "  -s SLOT,amd_hostbridge[,vendor=V][,devid=D]\n"
             "  vendor=V         PCI vendor ID (16 bits)\n"
             "  devid=D          PCI device ID (16 bits)\n",
    .keys = hostbridge_keys,
    .init = amd_hostbridge_init,
    .save = pci_save_nothing,
    .restore = pci_restore_nothing,
};

#define I440FX_PAM0  0x59
#define I440FX_PAM6  0x5f
#define I440FX_SMRAM 0x72

static int i440fx_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                       size_t errlen)
{
	(void)m;
	(void)node;
	(void)err;
	(void)errlen;
	pci_set_ids(f, 0x8086, 0x1237, 0x06, 0x00, 0x00, 0x02);
	pci_set_cfg(f, PCIR_SUBVEND, 2, 0x1af4);
	pci_set_cfg(f, PCIR_SUBDEV, 2, 0x1100);
	pci_set_cfg(f, I440FX_SMRAM, 1, 0x02);
	return 0;
}

/* PAM and SMRAM bytes are stored; the rest of the header is generic. */
static int i440fx_cfg_write(struct pci_func *f, unsigned off, unsigned size, uint32_t val)
{
	bool ours = false;

	for (unsigned i = 0; i < size; i++) {
		unsigned r = off + i;

		if ((r >= I440FX_PAM0 && r <= I440FX_PAM6) || r == I440FX_SMRAM) {
			f->cfg[r] = (uint8_t)(val >> (8 * i));
			ours = true;
		}
	}
	return ours ? 0 : -1;
}

PCI_DEVEMU(i440fx) = {
    .name = "i440fx",
    .descr = "Intel 82441FX host bridge with QEMU's IDs, for SeaBIOS and OVMF",
    .usage = "  -s SLOT,i440fx\n",
    .init = i440fx_init,
    .cfg_write = i440fx_cfg_write,
    /* PAM and SMRAM are config bytes: the generic part saves them. */
    .save = pci_save_nothing,
    .restore = pci_restore_nothing,
};
