/*
 * vm import of a Proxmox VE guest: /etc/pve/qemu-server/ID.conf, as
 * qm.conf(5) describes it ("key: value" lines, '#' lines the description,
 * "[name]" starting a snapshot section) (import.h).
 */
#include "vm/import.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/mac.h"
#include "lib/parse.h"
#include "vm/switch.h"

#define PVE_LINE_MAX 8192

void imp_note(struct imp_guest *g, const char *fmt, ...)
{
	va_list ap;

	if (g->nnote >= IMP_MAX_NOTES)
		return;
	va_start(ap, fmt);
	vsnprintf(g->note[g->nnote++], IMP_NOTE_LEN, fmt, ap);
	va_end(ap);
}

void imp_caveat(struct imp_guest *g, const char *fmt, ...)
{
	va_list ap;

	if (g->nnote >= IMP_MAX_NOTES)
		return;
	g->caveat[g->nnote] = true;
	va_start(ap, fmt);
	vsnprintf(g->note[g->nnote++], IMP_NOTE_LEN, fmt, ap);
	va_end(ap);
}

void imp_passthru(struct imp_guest *g, const char *id, unsigned dom, unsigned bus, unsigned slot,
                  unsigned fn)
{
	if (dom != 0 || bus > 255 || slot > 31 || fn > 7 || g->npt >= IMP_MAX_PT) {
		imp_note(g, "%s: %04x:%02x:%02x.%x: %s", id, dom, bus, slot, fn,
		         g->npt >= IMP_MAX_PT ? "too many passthrough devices"
		                              : "not an address vm's passthruN takes (domain 0)");
		return;
	}
	snprintf(g->passthru[g->npt], sizeof(g->passthru[0]), "%u/%u/%u", bus, slot, fn);
	imp_caveat(g,
	           "%s: passthru%zu=\"%s\" (host 0000:%02x:%02x.%x): bind it to vfio-pci on this "
	           "host first",
	           id, g->npt, g->passthru[g->npt], bus, slot, fn);
	g->npt++;
}

void imp_copy(char *dst, size_t len, const char *src)
{
	size_t n = 0;

	for (; n + 1 < len && src[n]; n++)
		dst[n] = src[n];
	dst[n] = '\0';
}

int imp_locate(const char *dir, const char *path, char out[PATH_MAX])
{
	const char *base = strrchr(path, '/');
	char raw[PATH_MAX];

	if (!dir)
		return snprintf(out, PATH_MAX, "%s", path) >= PATH_MAX ? -1 : 0;
	base = base ? base + 1 : path;
	if (snprintf(out, PATH_MAX, "%s/%s", dir, base) >= PATH_MAX ||
	    snprintf(raw, sizeof(raw), "%s.raw", out) >= (int)sizeof(raw))
		return -1;
	/* An LVM volume or zvol saved as a file is often NAME.raw. */
	if (access(out, F_OK) != 0 && access(raw, F_OK) == 0)
		memcpy(out, raw, sizeof(raw));
	return 0;
}

void imp_sort_disks(struct imp_guest *g)
{
	/* A stable insertion sort: at most IMP_MAX_DISKS entries. */
	for (size_t i = 1; i < g->ndisk; i++) {
		struct imp_disk d = g->disk[i];
		unsigned key = d.boot ? d.boot : ~0u;
		size_t j = i;

		while (j > 0 && (g->disk[j - 1].boot ? g->disk[j - 1].boot : ~0u) > key) {
			g->disk[j] = g->disk[j - 1];
			j--;
		}
		g->disk[j] = d;
	}
}

/* ---- the reader's state ---- */

struct pve {
	struct imp_guest *g;
	const char *file, *dir;
	unsigned line;
	char *err;
	size_t errlen;
	char boot[256], bootdisk[24];
	bool seen_key;      /* at least one key qm.conf(5) knows */
	bool localtime_set; /* else Windows guests keep local time (Proxmox's default) */
};

static int pve_fail(struct pve *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int pve_fail(struct pve *p, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (p->line)
		snprintf(p->err, p->errlen, "%s:%u: %s", p->file, p->line, msg);
	else
		snprintf(p->err, p->errlen, "%s: %s", p->file, msg);
	return -1;
}

/* The value of option `name` in "a=1,name=v,..." (copied into `out`); false when absent. */
static bool pve_opt(const char *list, const char *name, char *out, size_t len)
{
	size_t nl = strlen(name);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
		if (strncmp(p, name, nl) == 0 && p[nl] == '=') {
			size_t vl = strcspn(p + nl + 1, ",");
			snprintf(out, len, "%.*s", (int)vl, p + nl + 1);
			return true;
		}
	}
	return false;
}

static int pve_uint(struct pve *p, const char *key, const char *v, unsigned lo, unsigned hi,
                    unsigned *out)
{
	uint64_t n;

	if (parse_uint(v, lo, hi, &n) < 0)
		return pve_fail(p, "%s: %s: want a number from %u to %u", key, v, lo, hi);
	*out = (unsigned)n;
	return 0;
}

static int pve_bool(struct pve *p, const char *key, const char *v, bool *out)
{
	if (strcmp(v, "0") && strcmp(v, "1"))
		return pve_fail(p, "%s: %s: want 0 or 1", key, v);
	*out = v[0] == '1';
	return 0;
}

/* ---- disks ---- */

/* Proxmox's paths for the storages a default install has (pvesm's local, local-lvm, local-zfs). */
static int pve_volume_path(struct pve *p, const char *key, const char *vol, char out[PATH_MAX])
{
	const char *colon = strchr(vol, ':');
	char store[64], path[PATH_MAX];
	const char *name;
	int n;

	if (vol[0] == '/')
		return imp_locate(p->dir, vol, out) < 0 ? pve_fail(p, "%s: path too long", key) : 0;
	if (!colon || colon == vol || (size_t)(colon - vol) >= sizeof(store) || !colon[1])
		return pve_fail(p, "%s: %s: want STORAGE:VOLUME or a path", key, vol);
	snprintf(store, sizeof(store), "%.*s", (int)(colon - vol), vol);
	name = colon + 1;
	if (strstr(name, "..") || name[0] == '/')
		return pve_fail(p, "%s: %s: not a volume name", key, vol);
	if (!strcmp(store, "local") && !strncmp(name, "iso/", 4))
		n = snprintf(path, sizeof(path), "/var/lib/vz/template/iso/%s", name + 4);
	else if (!strcmp(store, "local"))
		n = snprintf(path, sizeof(path), "/var/lib/vz/images/%s", name);
	else if (!strcmp(store, "local-lvm"))
		n = snprintf(path, sizeof(path), "/dev/pve/%s", name);
	else if (!strcmp(store, "local-zfs"))
		n = snprintf(path, sizeof(path), "/dev/zvol/rpool/data/%s", name);
	else if (p->dir)
		n = snprintf(path, sizeof(path), "/%s", name);
	else
		return pve_fail(p,
		                "%s: storage %s: its path is not known here (copy its images "
		                "into a folder and give it with -d DIR)",
		                key, store);
	if (n < 0 || n >= (int)sizeof(path) || imp_locate(p->dir, path, out) < 0)
		return pve_fail(p, "%s: path too long", key);
	return 0;
}

static const char *pve_format_of(const char *vol)
{
	size_t len = strlen(vol);

	if (len > 6 && !strcmp(vol + len - 6, ".qcow2"))
		return "qcow2";
	if (len > 5 && !strcmp(vol + len - 5, ".vmdk"))
		return "vmdk";
	return "raw";
}

static int pve_disk(struct pve *p, const char *key, enum imp_bus bus, const char *value)
{
	char vol[PATH_MAX], opt[64] = "";
	size_t vl = strcspn(value, ",");
	const char *opts = value[vl] ? value + vl + 1 : "";
	struct imp_disk *d;

	snprintf(vol, sizeof(vol), "%.*s", (int)vl, value);
	if (pve_opt(opts, "media", opt, sizeof(opt)) && strcmp(opt, "cdrom") && strcmp(opt, "disk"))
		return pve_fail(p, "%s: media=%s: want cdrom or disk", key, opt);
	bool cdrom = !strcmp(opt, "cdrom");
	if (!strcmp(vol, "none") || !strcmp(vol, "cdrom")) {
		imp_note(p->g, "%s: %s CD drive left out", key,
		         vol[0] == 'n' ? "an empty" : "the host's");
		return 0;
	}
	if (p->g->ndisk >= IMP_MAX_DISKS)
		return pve_fail(p, "%s: more than %d disks", key, IMP_MAX_DISKS);
	d = &p->g->disk[p->g->ndisk];
	memset(d, 0, sizeof(*d));
	imp_copy(d->id, sizeof(d->id), key);
	d->bus = bus;
	d->cdrom = cdrom;
	if (pve_volume_path(p, key, vol, d->path) < 0)
		return -1;
	if (!pve_opt(opts, "format", d->format, sizeof(d->format)))
		imp_copy(d->format, sizeof(d->format), pve_format_of(vol));
	if (strcmp(d->format, "raw") && strcmp(d->format, "qcow2") && strcmp(d->format, "vmdk"))
		return pve_fail(p, "%s: format=%s: want raw, qcow2 or vmdk", key, d->format);
	if (pve_opt(opts, "ro", opt, sizeof(opt)) && pve_bool(p, key, opt, &d->readonly) < 0)
		return -1;
	p->g->ndisk++;
	return 0;
}

/* "scsi3" -> IMP_BUS_SCSI; false when `key` is not a disk key. */
static bool pve_disk_key(const char *key, enum imp_bus *bus)
{
	static const struct {
		const char *prefix;
		enum imp_bus bus;
		unsigned max;
	} buses[] = {{"virtio", IMP_BUS_VIRTIO, 15},
	             {"scsi", IMP_BUS_SCSI, 30},
	             {"sata", IMP_BUS_SATA, 5},
	             {"ide", IMP_BUS_IDE, 3}};

	for (size_t i = 0; i < sizeof(buses) / sizeof(buses[0]); i++) {
		size_t pl = strlen(buses[i].prefix);
		uint64_t n;

		if (!strncmp(key, buses[i].prefix, pl) &&
		    parse_uint(key + pl, 0, buses[i].max, &n) == 0) {
			*bus = buses[i].bus;
			return true;
		}
	}
	return false;
}

/* efidisk0: OVMF's variables; only efitype=4m matches khyve's OVMF_CODE_4M. */
static int pve_efidisk(struct pve *p, const char *key, const char *value)
{
	char vol[PATH_MAX], type[16] = "2m"; /* qm.conf(5)'s default */
	size_t vl = strcspn(value, ",");
	const char *opts = value[vl] ? value + vl + 1 : "";
	struct imp_guest *g = p->g;

	snprintf(vol, sizeof(vol), "%.*s", (int)vl, value);
	pve_opt(opts, "efitype", type, sizeof(type));
	if (strcmp(type, "4m")) {
		imp_note(g, "%s: efitype %s does not fit khyve's 4 MiB OVMF: a fresh store is made",
		         key, type);
		return 0;
	}
	if (pve_volume_path(p, key, vol, g->vars_path) < 0)
		return -1;
	imp_copy(g->vars_id, sizeof(g->vars_id), key);
	if (!pve_opt(opts, "format", g->vars_format, sizeof(g->vars_format)))
		imp_copy(g->vars_format, sizeof(g->vars_format), pve_format_of(vol));
	if (strcmp(g->vars_format, "raw") && strcmp(g->vars_format, "qcow2"))
		return pve_fail(p, "%s: format=%s: want raw or qcow2", key, g->vars_format);
	return 0;
}

/* ---- network ---- */

static int pve_net(struct pve *p, const char *key, const char *value)
{
	static const char *const models[] = {"virtio", "e1000", "e1000e", "rtl8139", "vmxnet3"};
	char model[16] = "", mac[32] = "", opt[64];
	struct imp_nic *n;
	uint8_t bytes[MAC_LEN];

	/* "virtio=MAC" (the current form) or "model=virtio,macaddr=MAC". */
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]) && !model[0]; i++)
		if (pve_opt(value, models[i], mac, sizeof(mac)))
			imp_copy(model, sizeof(model), models[i]);
	if (!model[0] && pve_opt(value, "model", model, sizeof(model)))
		pve_opt(value, "macaddr", mac, sizeof(mac));
	bool known = false;
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
		known |= !strcmp(model, models[i]);
	if (!known)
		return pve_fail(p,
		                "%s: want MODEL=MAC with a model of virtio, e1000, e1000e, "
		                "rtl8139 or vmxnet3",
		                key);
	if (mac[0] && (mac_parse(mac, bytes) < 0 || !mac_is_unicast(bytes)))
		return pve_fail(p, "%s: %s: not a unicast MAC address", key, mac);
	if (p->g->nnic >= IMP_MAX_NICS)
		return pve_fail(p, "%s: more than %d network interfaces", key, IMP_MAX_NICS);
	n = &p->g->nic[p->g->nnic++];
	memset(n, 0, sizeof(*n));
	imp_copy(n->id, sizeof(n->id), key);
	for (size_t i = 0; mac[i] && i + 1 < sizeof(n->mac); i++) /* vm writes them so */
		n->mac[i] = (char)tolower((unsigned char)mac[i]);
	imp_copy(n->type, sizeof(n->type), !strcmp(model, "virtio") ? "virtio-net" : "e1000");
	if (strcmp(model, "virtio") && strcmp(model, "e1000"))
		imp_note(p->g, "%s: model %s became e1000", key, model);
	if (!pve_opt(value, "bridge", n->sw, sizeof(n->sw))) {
		snprintf(n->sw, sizeof(n->sw), "public");
		imp_note(p->g, "%s: no bridge (user-mode network): on switch public", key);
	} else if (!vm_switch_name_valid(n->sw)) {
		return pve_fail(p, "%s: bridge=%s: not a name vm's switches can have", key, n->sw);
	}
	if (pve_opt(value, "tag", opt, sizeof(opt)))
		imp_note(p->g, "%s: tag=%s: set the VLAN on the switch (vm switch vlan)", key, opt);
	if (pve_opt(value, "firewall", opt, sizeof(opt)) && !strcmp(opt, "1"))
		imp_note(p->g, "%s: firewall=1: Proxmox's firewall rules are not imported", key);
	static const char *const others[] = {"rate", "mtu", "queues", "link_down", "trunks"};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		if (pve_opt(value, others[i], opt, sizeof(opt)))
			imp_note(p->g, "%s: %s=%s not mapped", key, others[i], opt);
	return 0;
}

/* ---- the other keys ---- */

static int pve_memory(struct pve *p, const char *v)
{
	char cur[32];
	unsigned mib = 0;

	if (pve_opt(v, "current", cur, sizeof(cur)))
		v = cur;
	if (pve_uint(p, "memory", v, 16, 4u << 20, &mib) < 0)
		return -1;
	p->g->memory_mib = mib;
	return 0;
}

static int pve_smbios(struct pve *p, const char *v)
{
	char uuid[64];

	if (pve_opt(v, "uuid", uuid, sizeof(uuid))) {
		size_t len = strlen(uuid);
		if (len != 36 || strspn(uuid, "0123456789abcdefABCDEF-") != len || uuid[8] != '-' ||
		    uuid[13] != '-' || uuid[18] != '-' || uuid[23] != '-')
			return pve_fail(p, "smbios1: uuid=%s: not a UUID", uuid);
		imp_copy(p->g->uuid, sizeof(p->g->uuid), uuid);
	}
	for (const char *s = v; s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
		if (strncmp(s, "uuid=", 5)) {
			imp_note(p->g, "smbios1: only the uuid is kept (%.*s...)",
			         (int)strcspn(s, "=,"), s);
			break;
		}
	return 0;
}

static int pve_vga(struct pve *p, const char *v)
{
	char type[32];

	if (!pve_opt(v, "type", type, sizeof(type)))
		snprintf(type, sizeof(type), "%.*s", (int)strcspn(v, ","), v);
	if (!strncmp(type, "serial", 6) || !strcmp(type, "none")) {
		p->g->graphics = false;
		return 0;
	}
	if (strcmp(type, "std") && strcmp(type, "cirrus") && strcmp(type, "qxl") &&
	    strncmp(type, "virtio", 6) && strcmp(type, "vmware") && strncmp(type, "qxl", 3))
		return pve_fail(p, "vga: %s: not a display type", type);
	if (strcmp(type, "std"))
		imp_note(p->g, "vga: %s: the guest gets khyve's framebuffer (VNC) instead", type);
	return 0;
}

/* Keys taken in silence: Proxmox's own bookkeeping. */
static bool pve_bookkeeping(const char *key)
{
	static const char *const keys[] = {"digest", "meta",   "vmgenid", "description",
	                                   "parent", "ostype", "name",    NULL};

	for (const char *const *k = keys; *k; k++)
		if (!strcmp(key, *k))
			return true;
	return false;
}

/* hostpciN: "[DOMAIN:]BUS:SLOT[.FUNC][,options]" in hex; without .FUNC
 * Proxmox passes every function, which vm wants named one by one. */
static void pve_hostpci(struct pve *p, const char *key, const char *v)
{
	unsigned dom = 0, bus, slot, fn;
	int n = 0;
	char rest;

	if (sscanf(v, "%x:%x:%x.%x%n", &dom, &bus, &slot, &fn, &n) == 4 ||
	    (dom = 0, sscanf(v, "%x:%x.%x%n", &bus, &slot, &fn, &n) == 3)) {
		if (v[n] == '\0' || v[n] == ',') {
			imp_passthru(p->g, key, dom, bus, slot, fn);
			return;
		}
	}
	if (sscanf(v, "%x:%x%c", &bus, &slot, &rest) >= 2 && !strchr(v, '.'))
		imp_note(p->g,
		         "%s: %s: every function of a device: name each as passthruN=\"B/S/F\"",
		         key, v);
	else
		imp_note(p->g, "%s: %s: not a PCI address (mapped devices are not)", key, v);
}

/* Why a key with no vm setting is left out (NULL: just "not mapped"). */
static const char *pve_why(const char *key)
{
	/* Each is the key or, numbered, the key and digits (usb0, hostpci1). */
	static const struct {
		const char *name, *why;
	} why[] = {
	    {"usb", "USB passthrough is not supported"},
	    {"scsihw", "SCSI disks become virtio-blk (ahci-hd for Windows)"},
	    {"machine", "khyve's board is its own (i440FX-like): the guest sees new hardware"},
	    {"serial", "vm's com1 is the serial console"},
	    {"unused", "an unused disk is not imported"},
	    {"agent", "no guest agent channel"},
	    {"onboot", "add the guest to vm_list in khyve.conf to start it at boot"},
	    {"audio", "no sound device"},
	    {"numa", "no NUMA topology"},
	    {"cpu", "khyve gives the guest the host's CPU model"},
	};

	for (size_t i = 0; i < sizeof(why) / sizeof(why[0]); i++) {
		size_t len = strlen(why[i].name);
		if (!strncmp(key, why[i].name, len) &&
		    strspn(key + len, "0123456789") == strlen(key + len))
			return why[i].why;
	}
	return NULL;
}

/* The keys pve_key() maps (besides those pve_why() explains). */
static bool pve_key_known(const char *key)
{
	static const char *const keys[] = {"memory",    "cores",  "sockets",  "vcpus",
	                                   "bios",      "boot",   "bootdisk", "smbios1",
	                                   "localtime", "tablet", "vga",      NULL};
	enum imp_bus bus;

	for (const char *const *k = keys; *k; k++)
		if (!strcmp(key, *k))
			return true;
	return pve_disk_key(key, &bus) ||
	       (!strncmp(key, "net", 3) && isdigit((unsigned char)key[3])) ||
	       !strncmp(key, "rng", 3);
}

static int pve_key(struct pve *p, const char *key, const char *v)
{
	struct imp_guest *g = p->g;
	enum imp_bus bus;
	unsigned u = 0;

	if (!strcmp(key, "name")) {
		if (vm_name_valid(v)) /* else vm import FILE NAME gives one */
			imp_copy(g->name, sizeof(g->name), v);
	} else if (!strcmp(key, "ostype")) {
		g->windows = !strncmp(v, "win", 3) || !strcmp(v, "wxp") || !strcmp(v, "w2k");
	} else if (!strcmp(key, "memory")) {
		return pve_memory(p, v);
	} else if (!strcmp(key, "cores")) {
		return pve_uint(p, key, v, 1, IMP_MAX_VCPUS, &g->cores);
	} else if (!strcmp(key, "sockets")) {
		return pve_uint(p, key, v, 1, IMP_MAX_VCPUS, &g->sockets);
	} else if (!strcmp(key, "vcpus")) {
		if (pve_uint(p, key, v, 1, IMP_MAX_VCPUS, &u) < 0)
			return -1;
		imp_note(g, "vcpus: %u: all of sockets x cores are present at boot", u);
	} else if (!strcmp(key, "bios")) {
		if (strcmp(v, "seabios") && strcmp(v, "ovmf"))
			return pve_fail(p, "bios: %s: want seabios or ovmf", v);
		g->uefi = !strcmp(v, "ovmf");
	} else if (!strcmp(key, "boot")) {
		imp_copy(p->boot, sizeof(p->boot), v);
	} else if (!strcmp(key, "bootdisk")) {
		imp_copy(p->bootdisk, sizeof(p->bootdisk), v);
	} else if (!strcmp(key, "smbios1")) {
		return pve_smbios(p, v);
	} else if (!strcmp(key, "localtime")) {
		p->localtime_set = true;
		return pve_bool(p, key, v, &g->localtime);
	} else if (!strcmp(key, "tablet")) {
		return pve_bool(p, key, v, &g->tablet);
	} else if (!strcmp(key, "vga")) {
		return pve_vga(p, v);
	} else if (!strncmp(key, "rng", 3)) {
		g->rng = true;
	} else if (!strcmp(key, "efidisk0")) {
		return pve_efidisk(p, key, v);
	} else if (!strncmp(key, "hostpci", 7) && isdigit((unsigned char)key[7])) {
		pve_hostpci(p, key, v);
	} else if (!strcmp(key, "balloon")) {
		/* Proxmox's balloon is the guest's minimum in MiB; 0 turns it off. */
		if (pve_uint(p, key, v, 0, UINT_MAX, &u) < 0)
			return -1;
		g->balloon = u != 0;
		if (u != 0)
			imp_caveat(g,
			           "balloon: %u: the balloon is there (balloon=\"yes\"); "
			           "khyvectl --balloon=SIZE sets its size, nothing keeps %u MiB as "
			           "the floor",
			           u, u);
	} else if (!strncmp(key, "tpmstate", 8)) {
		g->tpm = true;
		imp_caveat(g,
		           "%s: the guest gets a new TPM (tpm=\"yes\"): what Proxmox's TPM "
		           "sealed (BitLocker) needs its recovery key",
		           key);
	} else if (!strcmp(key, "scsihw") || !strcmp(key, "machine")) {
		imp_note(g, "%s: %s", key, pve_why(key));
	} else if (pve_disk_key(key, &bus)) {
		return pve_disk(p, key, bus, v);
	} else if (!strncmp(key, "net", 3) && isdigit((unsigned char)key[3])) {
		return pve_net(p, key, v);
	} else if (!pve_bookkeeping(key)) {
		const char *why = pve_why(key);
		imp_note(g, "%s: %s", key, why ? why : "not mapped");
		return 0;
	}
	return 0;
}

/* ---- the boot order ---- */

/* The disks' places: "order=scsi0;ide2;net0" or the old "cdn" with bootdisk. */
static int pve_boot_order(struct pve *p)
{
	struct imp_guest *g = p->g;
	unsigned place = 1;

	if (!strncmp(p->boot, "order=", 6)) {
		char list[256], *save, *tok;
		imp_copy(list, sizeof(list), p->boot + 6);
		for (tok = strtok_r(list, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
			bool found = false;
			for (size_t i = 0; i < g->ndisk; i++)
				if (!strcmp(g->disk[i].id, tok) && !g->disk[i].boot) {
					g->disk[i].boot = place++;
					found = true;
				}
			/* Only a network boot before the disks changes how the guest boots. */
			if (!found && !strncmp(tok, "net", 3) && place == 1)
				imp_note(
				    g, "boot: %s first: network boot is not in khyve's boot order",
				    tok);
		}
		return 0;
	}
	if (strspn(p->boot, "acdn") != strlen(p->boot))
		return pve_fail(p, "boot: %s: want order=DEVICE;... or letters of acdn", p->boot);
	for (const char *c = p->boot; *c; c++) {
		for (size_t i = 0; i < g->ndisk; i++) {
			struct imp_disk *d = &g->disk[i];
			if (!d->boot &&
			    ((*c == 'c' && !strcmp(d->id, p->bootdisk)) || (*c == 'd' && d->cdrom)))
				d->boot = place++;
		}
		if (*c == 'n' && place == 1 && g->nnic)
			imp_note(g, "boot: n first: network boot is not in khyve's boot order");
	}
	return 0;
}

/* ---- lines ---- */

static bool pve_key_valid(const char *key, size_t len)
{
	if (len == 0 || len > 32 || !islower((unsigned char)key[0]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!islower((unsigned char)key[i]) && !isdigit((unsigned char)key[i]) &&
		    key[i] != '_' && key[i] != '-')
			return false;
	return true;
}

/* One line: 1 when it starts a snapshot section, 0 when done, -1 on error. */
static int pve_line(struct pve *p, char *line)
{
	size_t klen = strcspn(line, ":");
	char *v;

	if (line[0] == '#' || line[0] == '\0')
		return 0;
	if (line[0] == '[') {
		if (line[strlen(line) - 1] != ']' || strlen(line) < 3)
			return pve_fail(p, "not a Proxmox guest config (qm.conf) line");
		imp_note(p->g, "%s: snapshots and pending changes are not imported", line);
		return 1;
	}
	if (!line[klen] || line[klen + 1] != ' ' || !pve_key_valid(line, klen))
		return pve_fail(p, "not a Proxmox guest config (qm.conf) line");
	line[klen] = '\0';
	v = line + klen + 2;
	if (!*v || strlen(v) >= 4096)
		return pve_fail(p, "%s: the value is %s", line, *v ? "too long" : "empty");
	/* A file of names, bookkeeping and keys qm.conf lacks is no guest config. */
	p->seen_key |= pve_key_known(line) || pve_why(line);
	return pve_key(p, line, v);
}

int imp_read_pve(const char *text, size_t len, const char *file, const char *dir,
                 struct imp_guest *g, char *err, size_t errlen)
{
	struct pve p = {.g = g, .file = file, .dir = dir, .err = err, .errlen = errlen};
	char line[PVE_LINE_MAX];

	g->kind = "Proxmox";
	g->graphics = g->tablet = true; /* Proxmox's defaults: vga std, tablet 1 */
	if (memchr(text, '\0', len))
		return pve_fail(&p, "not a Proxmox guest config (binary data)");
	for (const char *s = text; *s;) {
		size_t ll = strcspn(s, "\n");
		int rc;

		p.line++;
		if (ll >= sizeof(line))
			return pve_fail(&p, "line too long for a Proxmox guest config");
		memcpy(line, s, ll);
		line[ll] = '\0';
		if (ll && line[ll - 1] == '\r')
			line[ll - 1] = '\0';
		s += ll + (s[ll] == '\n');
		for (char *c = line; *c; c++)
			if (iscntrl((unsigned char)*c) && *c != '\t')
				return pve_fail(&p,
				                "not a Proxmox guest config (control characters)");
		if ((rc = pve_line(&p, line)) < 0)
			return -1;
		if (rc == 1) {
			/* Snapshot sections repeat the keys; their names only go to the report. */
			for (; *s; s += strcspn(s, "\n") + (s[strcspn(s, "\n")] == '\n'))
				if (*s == '[')
					imp_note(g,
					         "%.*s: snapshots and pending changes are not "
					         "imported",
					         (int)strcspn(s, "\r\n"), s);
			break;
		}
	}
	if (!p.seen_key) {
		p.line = 0;
		snprintf(err, errlen, "%s: not a Proxmox guest config (no settings qm.conf knows)",
		         file);
		return -1;
	}
	if (!g->cores)
		g->cores = 1;
	if (!g->sockets)
		g->sockets = 1;
	if ((unsigned long long)g->cores * g->sockets > IMP_MAX_VCPUS) {
		snprintf(err, errlen, "%s: sockets x cores is more than %d vCPUs", file,
		         IMP_MAX_VCPUS);
		return -1;
	}
	g->cpus = g->cores * g->sockets;
	if (!p.localtime_set)
		g->localtime = g->windows;
	if (!g->memory_mib)
		g->memory_mib = 512; /* qm.conf(5)'s default */
	p.line = 0;
	if (!p.boot[0])
		snprintf(p.boot, sizeof(p.boot), "cdn"); /* qm.conf(5)'s default */
	for (size_t i = 0; i < g->ndisk && !p.bootdisk[0]; i++)
		if (!g->disk[i].cdrom)
			imp_copy(p.bootdisk, sizeof(p.bootdisk), g->disk[i].id);
	if (pve_boot_order(&p) < 0) {
		snprintf(err, errlen, "%s: boot: %s: want order=DEVICE;... or letters of acdn",
		         file, p.boot);
		return -1;
	}
	imp_sort_disks(g);
	return 0;
}
