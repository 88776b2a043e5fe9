/*
 * vm import of a libvirt guest: its domain XML (`virsh dumpxml NAME`, or
 * /etc/libvirt/qemu/NAME.xml), read with libxml2 (import.h).  The parser
 * never touches the network and a DTD is refused, so no entity is expanded.
 */
#include "vm/import.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/mac.h"
#include "lib/parse.h"
#include "vm/switch.h"

struct lv {
	struct imp_guest *g;
	const char *file, *dir;
	char *err;
	size_t errlen;
	bool any_boot_order; /* a device has <boot order='N'/> */
	unsigned next_place;
};

static int lv_fail(struct lv *l, const xmlNode *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int lv_fail(struct lv *l, const xmlNode *n, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(l->err, l->errlen, "%s:%ld: %s", l->file, n ? (long)xmlGetLineNo(n) : 0L, msg);
	return -1;
}

static bool is(const xmlNode *n, const char *name)
{
	return n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

static const xmlNode *child(const xmlNode *n, const char *name)
{
	for (const xmlNode *c = n ? n->children : NULL; c; c = c->next)
		if (is(c, name))
			return c;
	return NULL;
}

/* Attribute `name` of `n` copied into `out` ("" when absent); false when absent or too long. */
static bool attr(const xmlNode *n, const char *name, char *out, size_t len)
{
	xmlChar *v = n ? xmlGetProp(n, (const xmlChar *)name) : NULL;
	bool ok = v && strlen((const char *)v) < len;

	snprintf(out, len, "%s", ok ? (const char *)v : "");
	xmlFree(v);
	return ok;
}

/* The text of `n` with blanks trimmed into `out`; false when absent or too long. */
static bool text(const xmlNode *n, char *out, size_t len)
{
	xmlChar *v = n ? xmlNodeGetContent(n) : NULL;
	const char *s = (const char *)v;
	size_t sl;
	bool ok;

	out[0] = '\0';
	if (!v)
		return false;
	s += strspn(s, " \t\r\n");
	sl = strlen(s);
	while (sl && strchr(" \t\r\n", s[sl - 1]))
		sl--;
	ok = sl < len;
	if (ok)
		snprintf(out, len, "%.*s", (int)sl, s);
	xmlFree(v);
	return ok;
}

/* ---- memory, vCPUs, firmware ---- */

static int lv_memory(struct lv *l, const xmlNode *n)
{
	static const struct {
		const char *unit;
		unsigned long long bytes;
	} units[] = {{"b", 1},          {"bytes", 1},        {"KB", 1000},
	             {"k", 1024},       {"KiB", 1024},       {"MB", 1000000},
	             {"M", 1 << 20},    {"MiB", 1 << 20},    {"GB", 1000000000},
	             {"G", 1ULL << 30}, {"GiB", 1ULL << 30}, {"TB", 1000000000000ULL},
	             {"T", 1ULL << 40}, {"TiB", 1ULL << 40}};
	char unit[16], v[32];
	unsigned long long mul = 0;
	uint64_t num;

	if (!attr(n, "unit", unit, sizeof(unit)))
		snprintf(unit, sizeof(unit), "KiB");
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(unit, units[i].unit))
			mul = units[i].bytes;
	if (!mul)
		return lv_fail(l, n, "<memory unit='%s'>: not a unit libvirt knows", unit);
	if (!text(n, v, sizeof(v)) || parse_uint(v, 1, UINT64_MAX / mul, &num) < 0 ||
	    num * mul / (1 << 20) < 16 || num * mul / (1 << 20) > (4ULL << 20))
		return lv_fail(l, n, "<memory>%s</memory>: want 16 MiB to 4 TiB", v);
	l->g->memory_mib = num * mul / (1 << 20);
	return 0;
}

static int lv_topology(struct lv *l, const xmlNode *cpu)
{
	const xmlNode *t = child(cpu, "topology");
	const char *names[] = {"sockets", "cores", "threads"};
	unsigned *vals[] = {&l->g->sockets, &l->g->cores, &l->g->threads};
	char v[16];
	uint64_t n;

	if (!t)
		return 0;
	for (size_t i = 0; i < 3; i++) {
		if (!attr(t, names[i], v, sizeof(v)))
			return lv_fail(l, t, "<topology>: no %s", names[i]);
		if (parse_uint(v, 1, IMP_MAX_VCPUS, &n) < 0)
			return lv_fail(l, t, "<topology %s='%s'>: want 1 to %d", names[i], v,
			               IMP_MAX_VCPUS);
		*vals[i] = (unsigned)n;
	}
	return 0;
}

/* <nvram>PATH</nvram>: OVMF's variables, carried over when they fit (cmd_import.c). */
static int lv_nvram(struct lv *l, const xmlNode *n)
{
	struct imp_guest *g = l->g;
	char path[PATH_MAX];

	if (!text(n, path, sizeof(path)) || !path[0])
		return 0; /* libvirt makes one from its template: so will vm */
	if (path[0] != '/')
		return lv_fail(l, n, "<nvram>%s</nvram>: not an absolute path", path);
	if (imp_locate(l->dir, path, g->vars_path) < 0)
		return lv_fail(l, n, "<nvram>: path too long");
	imp_copy(g->vars_id, sizeof(g->vars_id), "nvram");
	if (!attr(n, "format", g->vars_format, sizeof(g->vars_format)))
		imp_copy(g->vars_format, sizeof(g->vars_format), "raw");
	if (strcmp(g->vars_format, "raw") && strcmp(g->vars_format, "qcow2"))
		return lv_fail(l, n, "<nvram format='%s'>: want raw or qcow2", g->vars_format);
	return 0;
}

static int lv_os(struct lv *l, const xmlNode *os)
{
	char v[PATH_MAX], arch[32], machine[64];
	const xmlNode *type = child(os, "type");

	if (!type || !text(type, v, sizeof(v)) || strcmp(v, "hvm"))
		return lv_fail(l, os, "<os><type>: want hvm (a full virtual machine)");
	if (attr(type, "arch", arch, sizeof(arch)) && strcmp(arch, "x86_64") &&
	    strcmp(arch, "i686"))
		return lv_fail(l, type, "<type arch='%s'>: khyve runs x86 guests", arch);
	if (attr(type, "machine", machine, sizeof(machine)) && strstr(machine, "q35"))
		imp_note(l->g,
		         "machine %s: khyve's board is its own (i440FX-like): the guest "
		         "sees new hardware",
		         machine);
	if (attr(os, "firmware", v, sizeof(v)) && !strcmp(v, "efi"))
		l->g->uefi = true;
	const xmlNode *loader = child(os, "loader");
	if (loader && text(loader, v, sizeof(v)) &&
	    (strstr(v, "OVMF") || strstr(v, "ovmf") || strstr(v, "edk2")))
		l->g->uefi = true;
	else if (loader && v[0])
		return lv_fail(l, loader,
		               "<loader>%s</loader>: not OVMF (khyve has SeaBIOS and OVMF)", v);
	if (child(os, "nvram") && lv_nvram(l, child(os, "nvram")) < 0)
		return -1;
	if (child(os, "kernel"))
		imp_note(l->g, "os/kernel: direct kernel boot not mapped (the guest boots its "
		               "disk)");
	return 0;
}

/* os/boot dev='hd|cdrom|network' in order: places for the disks without <boot order>. */
static void lv_boot_devs(struct lv *l, const xmlNode *os)
{
	struct imp_guest *g = l->g;
	bool any = false;

	for (const xmlNode *b = os ? os->children : NULL; b; b = b->next) {
		char dev[16];

		if (!is(b, "boot") || !attr(b, "dev", dev, sizeof(dev)))
			continue;
		any = true;
		if (!strcmp(dev, "network") && l->next_place == 0)
			imp_note(g,
			         "os/boot dev=network first: network boot is not in khyve's boot "
			         "order");
		for (size_t i = 0; i < g->ndisk; i++)
			if (!g->disk[i].boot && ((!strcmp(dev, "hd") && !g->disk[i].cdrom) ||
			                         (!strcmp(dev, "cdrom") && g->disk[i].cdrom)))
				g->disk[i].boot = ++l->next_place;
	}
	for (size_t i = 0; i < g->ndisk && !any; i++) /* libvirt's default: hd */
		if (!g->disk[i].cdrom)
			g->disk[i].boot = ++l->next_place;
}

/* ---- devices ---- */

static int lv_boot_order(struct lv *l, const xmlNode *dev, unsigned *place)
{
	const xmlNode *b = child(dev, "boot");
	char v[16];
	uint64_t n;

	*place = 0;
	if (!b)
		return 0;
	if (!attr(b, "order", v, sizeof(v)) || parse_uint(v, 1, 1000, &n) < 0)
		return lv_fail(l, b, "<boot order='%s'>: want a number from 1", v);
	*place = (unsigned)n;
	l->any_boot_order = true;
	return 0;
}

static int lv_disk_bus(struct lv *l, const xmlNode *target, struct imp_disk *d, bool *skip)
{
	char bus[16];

	if (!attr(target, "dev", d->id, sizeof(d->id)) || !d->id[0])
		return lv_fail(l, target, "<disk>: no <target dev='...'/>");
	if (!attr(target, "bus", bus, sizeof(bus)))
		imp_copy(bus, sizeof(bus), d->cdrom ? "ide" : "virtio");
	if (!strcmp(bus, "virtio"))
		d->bus = IMP_BUS_VIRTIO;
	else if (!strcmp(bus, "scsi"))
		d->bus = IMP_BUS_SCSI;
	else if (!strcmp(bus, "sata"))
		d->bus = IMP_BUS_SATA;
	else if (!strcmp(bus, "ide"))
		d->bus = IMP_BUS_IDE;
	else {
		imp_note(l->g, "disk %s: bus %s not mapped (left out)", d->id, bus);
		*skip = true;
	}
	return 0;
}

static int lv_disk(struct lv *l, const xmlNode *n)
{
	struct imp_disk d = {0};
	char type[16], device[16], src[PATH_MAX];
	const xmlNode *source = child(n, "source");
	bool skip = false;

	attr(n, "type", type, sizeof(type));
	if (!attr(n, "device", device, sizeof(device)))
		snprintf(device, sizeof(device), "disk");
	if (strcmp(device, "disk") && strcmp(device, "cdrom")) {
		imp_note(l->g, "disk device=%s: not mapped (left out)", device);
		return 0;
	}
	d.cdrom = !strcmp(device, "cdrom");
	if (lv_disk_bus(l, child(n, "target"), &d, &skip) < 0 || skip)
		return skip ? 0 : -1;
	if (strcmp(type, "file") && strcmp(type, "block")) {
		imp_note(l->g, "disk %s: type %s not mapped (left out)", d.id, type);
		return 0;
	}
	if (!attr(source, !strcmp(type, "file") ? "file" : "dev", src, sizeof(src)) || !src[0]) {
		if (d.cdrom) {
			imp_note(l->g, "disk %s: an empty CD drive left out", d.id);
			return 0;
		}
		return lv_fail(l, n, "disk %s: no <source %s='...'/>", d.id,
		               !strcmp(type, "file") ? "file" : "dev");
	}
	if (src[0] != '/')
		return lv_fail(l, n, "disk %s: %s: not an absolute path", d.id, src);
	if (imp_locate(l->dir, src, d.path) < 0)
		return lv_fail(l, n, "disk %s: path too long", d.id);
	if (!attr(child(n, "driver"), "type", d.format, sizeof(d.format)))
		snprintf(d.format, sizeof(d.format), "raw");
	if (strcmp(d.format, "raw") && strcmp(d.format, "qcow2") && strcmp(d.format, "vmdk"))
		return lv_fail(l, n, "disk %s: driver type %s: want raw, qcow2 or vmdk", d.id,
		               d.format);
	d.readonly = child(n, "readonly") != NULL && !d.cdrom;
	if (lv_boot_order(l, n, &d.boot) < 0)
		return -1;
	if (l->g->ndisk >= IMP_MAX_DISKS)
		return lv_fail(l, n, "more than %d disks", IMP_MAX_DISKS);
	l->g->disk[l->g->ndisk++] = d;
	return 0;
}

static int lv_interface(struct lv *l, const xmlNode *n)
{
	char type[16], model[16], mac[32], sw[64];
	struct imp_nic *nic;
	unsigned place;
	uint8_t bytes[MAC_LEN];

	attr(n, "type", type, sizeof(type));
	if (strcmp(type, "bridge") && strcmp(type, "network")) {
		imp_note(l->g, "interface type=%s: not mapped (left out)", type);
		return 0;
	}
	if (!attr(child(n, "source"), type, sw, sizeof(sw)) || !sw[0])
		return lv_fail(l, n, "<interface type='%s'>: no <source %s='...'/>", type, type);
	if (!vm_switch_name_valid(sw))
		return lv_fail(l, n, "<source %s='%s'>: not a name vm's switches can have", type,
		               sw);
	if (attr(child(n, "mac"), "address", mac, sizeof(mac)) &&
	    (mac_parse(mac, bytes) < 0 || !mac_is_unicast(bytes)))
		return lv_fail(l, n, "<mac address='%s'>: not a unicast MAC address", mac);
	if (!attr(child(n, "model"), "type", model, sizeof(model)))
		snprintf(model, sizeof(model), "rtl8139"); /* libvirt's default for QEMU */
	if (l->g->nnic >= IMP_MAX_NICS)
		return lv_fail(l, n, "more than %d network interfaces", IMP_MAX_NICS);
	nic = &l->g->nic[l->g->nnic];
	memset(nic, 0, sizeof(*nic));
	snprintf(nic->id, sizeof(nic->id), "interface %zu", l->g->nnic);
	l->g->nnic++;
	for (size_t i = 0; mac[i] && i + 1 < sizeof(nic->mac); i++) /* vm writes them so */
		nic->mac[i] = (char)tolower((unsigned char)mac[i]);
	imp_copy(nic->sw, sizeof(nic->sw), sw);
	imp_copy(nic->type, sizeof(nic->type), !strcmp(model, "virtio") ? "virtio-net" : "e1000");
	if (strcmp(model, "virtio") && strcmp(model, "e1000"))
		imp_note(l->g, "%s: model %s became e1000", nic->id, model);
	if (lv_boot_order(l, n, &place) < 0)
		return -1;
	if (place == 1)
		imp_note(l->g, "%s: boot order 1: network boot is not in khyve's boot order",
		         nic->id);
	return 0;
}

/* Devices taken in silence: khyve gives every guest its own of these. */
static bool lv_device_implied(const xmlNode *n)
{
	static const char *const names[] = {"emulator", "controller", "video", "serial",
	                                    "console",  "channel",    "input", NULL};

	for (const char *const *p = names; *p; p++)
		if (is(n, *p))
			return true;
	return false;
}

/* One attribute of a PCI <address> ("0x01"); false when absent or not a number. */
static bool lv_hex(const xmlNode *a, const char *name, unsigned *out)
{
	char v[16], *end;
	unsigned long n;

	if (!attr(a, name, v, sizeof(v)) || !v[0])
		return false;
	errno = 0;
	n = strtoul(v, &end, 0);
	if (errno || *end || v[0] == '-' || n > 0xffff)
		return false;
	*out = (unsigned)n;
	return true;
}

/* <hostdev type='pci'> with its source address becomes passthruN. */
static int lv_hostdev(struct lv *l, const xmlNode *n)
{
	const xmlNode *a = child(child(n, "source"), "address");
	unsigned dom = 0, bus, slot, fn;
	char type[16], id[32];

	attr(n, "type", type, sizeof(type));
	snprintf(id, sizeof(id), "<hostdev type=%s>", type[0] ? type : "?");
	if (strcmp(type, "pci")) {
		imp_note(l->g, "%s: only PCI devices pass through", id);
		return 0;
	}
	if (!lv_hex(a, "bus", &bus) || !lv_hex(a, "slot", &slot) || !lv_hex(a, "function", &fn) ||
	    (attr(a, "domain", type, sizeof(type)) && !lv_hex(a, "domain", &dom))) {
		imp_note(l->g, "%s: no usable source address", id);
		return 0;
	}
	imp_passthru(l->g, id, dom, bus, slot, fn);
	return 0;
}

/* An emulated TPM 2.0 becomes vm's swtpm (new state); a host TPM stays. */
static int lv_tpm(struct lv *l, const xmlNode *n)
{
	const xmlNode *backend = child(n, "backend");
	char type[16], version[8];

	attr(backend, "type", type, sizeof(type));
	if (!attr(backend, "version", version, sizeof(version)))
		snprintf(version, sizeof(version), "2.0"); /* libvirt's default */
	if (strcmp(type, "emulator") || strcmp(version, "2.0")) {
		imp_note(l->g, "<tpm> backend %s version %s: only an emulated TPM 2.0 maps",
		         type[0] ? type : "(none)", version);
		return 0;
	}
	l->g->tpm = true;
	imp_caveat(l->g, "<tpm>: the guest gets a new TPM (tpm=\"yes\"): what libvirt's swtpm "
	                 "sealed (BitLocker) needs its recovery key");
	return 0;
}

static int lv_device(struct lv *l, const xmlNode *n)
{
	char type[16];

	if (is(n, "disk"))
		return lv_disk(l, n);
	if (is(n, "interface"))
		return lv_interface(l, n);
	if (is(n, "graphics")) {
		attr(n, "type", type, sizeof(type));
		l->g->graphics = true;
		if (strcmp(type, "vnc"))
			imp_note(l->g, "graphics type=%s: the guest gets khyve's VNC console",
			         type);
		return 0;
	}
	if (is(n, "input") && attr(n, "type", type, sizeof(type)) && !strcmp(type, "tablet"))
		l->g->tablet = true;
	if (is(n, "rng")) {
		l->g->rng = true;
		return 0;
	}
	if (is(n, "tpm"))
		return lv_tpm(l, n);
	if (is(n, "hostdev"))
		return lv_hostdev(l, n);
	if (is(n, "memballoon")) {
		attr(n, "model", type, sizeof(type));
		l->g->balloon = !strcmp(type, "virtio");
		return 0;
	}
	if (!lv_device_implied(n))
		imp_note(l->g, "<%s>: not mapped", (const char *)n->name);
	return 0;
}

/* ---- the domain ---- */

static bool lv_top_implied(const xmlNode *n)
{
	static const char *const names[] = {
	    "name", "uuid",     "title",    "description", "metadata",      "memory",    "vcpu",
	    "os",   "features", "cpu",      "clock",       "on_poweroff",   "on_reboot", "on_crash",
	    "pm",   "devices",  "resource", "seclabel",    "currentMemory", NULL};

	for (const char *const *p = names; *p; p++)
		if (is(n, *p))
			return true;
	return false;
}

/* Windows: Hyper-V enlightenments, or virt-install's libosinfo id for it. */
static bool lv_windows(const xmlNode *dom)
{
	const xmlNode *meta = child(dom, "metadata");
	char id[128];

	if (child(child(dom, "features"), "hyperv"))
		return true;
	for (const xmlNode *o = meta ? meta->children : NULL; o; o = o->next)
		if (is(o, "libosinfo") && attr(child(o, "os"), "id", id, sizeof(id)) &&
		    strstr(id, "microsoft.com/win"))
			return true;
	return false;
}

static int lv_simple(struct lv *l, const xmlNode *dom)
{
	struct imp_guest *g = l->g;
	char v[64];
	uint64_t n;

	if (text(child(dom, "name"), v, sizeof(v)) && vm_name_valid(v))
		imp_copy(g->name, sizeof(g->name), v);
	if (text(child(dom, "uuid"), v, sizeof(v))) {
		size_t len = strlen(v);
		if (len != 36 || strspn(v, "0123456789abcdefABCDEF-") != len)
			return lv_fail(l, child(dom, "uuid"), "<uuid>%s</uuid>: not a UUID", v);
		imp_copy(g->uuid, sizeof(g->uuid), v);
	}
	if (!child(dom, "memory"))
		return lv_fail(l, dom, "<domain>: no <memory>");
	if (lv_memory(l, child(dom, "memory")) < 0)
		return -1;
	if (!text(child(dom, "vcpu"), v, sizeof(v)) || parse_uint(v, 1, IMP_MAX_VCPUS, &n) < 0)
		return lv_fail(l, child(dom, "vcpu") ? child(dom, "vcpu") : dom,
		               "<vcpu>%s</vcpu>: want 1 to %d", v, IMP_MAX_VCPUS);
	g->cpus = (unsigned)n;
	if (lv_topology(l, child(dom, "cpu")) < 0)
		return -1;
	if (g->sockets && (unsigned long long)g->sockets * g->cores * g->threads != g->cpus) {
		imp_note(g,
		         "cpu topology: %u sockets x %u cores x %u threads is not %u vCPUs: "
		         "left out",
		         g->sockets, g->cores, g->threads, g->cpus);
		g->sockets = g->cores = g->threads = 0;
	}
	if (attr(child(dom, "clock"), "offset", v, sizeof(v)) && !strcmp(v, "localtime"))
		g->localtime = true;
	g->windows = lv_windows(dom);
	return 0;
}

static int lv_domain(struct lv *l, const xmlNode *dom)
{
	const xmlNode *os = child(dom, "os"), *devs = child(dom, "devices");

	if (!os)
		return lv_fail(l, dom, "<domain>: no <os>");
	if (lv_simple(l, dom) < 0 || lv_os(l, os) < 0)
		return -1;
	for (const xmlNode *n = devs ? devs->children : NULL; n; n = n->next)
		if (n->type == XML_ELEMENT_NODE && lv_device(l, n) < 0)
			return -1;
	for (const xmlNode *n = dom->children; n; n = n->next)
		if (n->type == XML_ELEMENT_NODE && !lv_top_implied(n))
			imp_note(l->g, "<%s>: not mapped", (const char *)n->name);
	if (!l->any_boot_order)
		lv_boot_devs(l, os);
	imp_sort_disks(l->g);
	return 0;
}

int imp_read_libvirt(const char *text_in, size_t len, const char *file, const char *dir,
                     struct imp_guest *g, char *err, size_t errlen)
{
	struct lv l = {.g = g, .file = file, .dir = dir, .err = err, .errlen = errlen};
	xmlParserCtxtPtr ctx;
	xmlDocPtr doc;
	int rc = -1;

	g->kind = "libvirt";
	if (len > INT_MAX || memchr(text_in, '\0', len)) {
		snprintf(err, errlen, "%s: not a libvirt domain XML (binary data)", file);
		return -1;
	}
	if (!(ctx = xmlNewParserCtxt())) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	doc = xmlCtxtReadMemory(ctx, text_in, (int)len, NULL, NULL,
	                        XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!doc) {
		const xmlError *e = xmlCtxtGetLastError(ctx);
		char msg[256];
		imp_copy(msg, sizeof(msg), e && e->message ? e->message : "not XML");
		msg[strcspn(msg, "\n")] = '\0';
		snprintf(err, errlen, "%s:%d: not a libvirt domain XML: %s", file, e ? e->line : 0,
		         msg);
	} else if (doc->intSubset || doc->extSubset) {
		snprintf(err, errlen, "%s: not a libvirt domain XML (it has a DTD)", file);
	} else if (!xmlDocGetRootElement(doc) || !is(xmlDocGetRootElement(doc), "domain")) {
		snprintf(err, errlen, "%s: not a libvirt domain XML (no <domain>)", file);
	} else {
		rc = lv_domain(&l, xmlDocGetRootElement(doc));
	}
	xmlFreeDoc(doc);
	xmlFreeParserCtxt(ctx);
	return rc;
}
