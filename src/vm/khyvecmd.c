/*
 * From a guest's vm-bhyve settings to khyve's command line (khyvecmd.h),
 * in the device order of vm-bhyve's vm::run: the host bridge in slot 0,
 * the disks from start_slot on, then the network interfaces, then
 * virtio-rnd, the graphics console (fbuf, slot 29) and its USB tablet
 * (xhci, slot 30), and the LPC bridge in slot 31 with the COM ports on it.
 *
 * Where khyve differs from bhyve, and so do we:
 * - Every device gets a slot of its own.  Outside UEFI mode vm-bhyve packs
 *   disks and NICs into the functions of one slot; khyve would show them
 *   (it marks multi-function slots) but one slot each keeps the slot
 *   order the firmware boots in.
 * - UEFI guests also get the PIIX4 PM function at 0:1.3 (piix4-pm), where
 *   QEMU's OVMF looks for the ACPI PM timer.
 * - Firmware boot (bios, grub, uefi) uses the i440fx host bridge: SeaBIOS
 *   and Debian's OVMF are built for QEMU and recognise it by that bridge.
 * - khyve gives SeaBIOS a boot order that follows slot order, so the
 *   install medium (install_slot, 3) and the GRUB CD (slot 2) sit below
 *   the guest's disks and boot first.
 * - COM ports are ptys (`-l comN,pty=DIR/comN.pty`) rather than nmdm.
 * - graphics works with every loader (vm-bhyve: UEFI only), in fixed slots
 *   (vm-bhyve: the next after the NICs) and listens on 127.0.0.1 unless
 *   graphics_listen says otherwise (vm-bhyve: 0.0.0.0).
 */
#include "vm/khyvecmd.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <strings.h>
#include <sys/stat.h>

#include "lib/apiclient.h"
#include "lib/mac.h"
#include "lib/parse.h"
#include "vm/graphics.h"
#include "vm/tpm.h"
#include "vm/live.h"
#include "vm/net.h"
#include "vm/paths.h"

#define SLOT_LAST      30 /* the last slot for disks, NICs, ...; 31 is the LPC bridge */
#define SLOT_LPC       31
#define SLOT_GRUB      2   /* below install_slot (3) and start_slot (4) */
#define SLOT_FBUF      29  /* graphics: fixed slots, so a new disk or NIC never moves */
#define SLOT_XHCI      30  /* the display or the tablet (Windows would see new devices) */
#define VM_MAX_VCPUS   288 /* khyve's limit (KHYVE_MAX_VCPUS, src/vmm/topology.h) */
#define AHCI_MAX_PORTS 32

#define SEABIOS_ROM    "/usr/share/seabios/bios-256k.bin"
#define OVMF_CODE      "/usr/share/OVMF/OVMF_CODE_4M.fd"

enum loader { LOADER_BIOS, LOADER_GRUB, LOADER_UEFI, LOADER_UEFI_CUSTOM, LOADER_LINUX };

/* One command line being built. */
struct build {
	const struct vm_sys *sys;
	const struct vm_guest *g;
	const struct vm_start_opts *opts;
	struct argv *out;
	char *err;
	size_t errlen;
	bool failed; /* err holds the first error */
	enum loader loader;
	unsigned next_slot; /* where the next disk, NIC, ... goes */
	bool slot_used[SLOT_LPC + 1];
	bool fbuf, xhci; /* graphics="yes", xhci_mouse */
};

/* ---- errors ---- */

static int vfail(struct build *b, bool from_conf, const char *fmt, va_list ap)
{
	int n = 0;

	if (b->failed)
		return -1;
	b->failed = true;
	if (from_conf)
		n = snprintf(b->err, b->errlen, "%s.conf: ", b->g->name);
	if (n >= 0 && (size_t)n < b->errlen)
		vsnprintf(b->err + n, b->errlen - (size_t)n, fmt, ap);
	return -1;
}

/* An error in the guest's settings: "NAME.conf: ...".  Returns -1. */
static int __attribute__((format(printf, 2, 3))) fail(struct build *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(b, true, fmt, ap);
	va_end(ap);
	return -1;
}

/* An error about the host (a missing firmware file, ...).  Returns -1. */
static int __attribute__((format(printf, 2, 3))) fail_host(struct build *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(b, false, fmt, ap);
	va_end(ap);
	return -1;
}

static int out_of_memory(struct build *b)
{
	return fail_host(b, "out of memory");
}

/* ---- settings ---- */

/* A setting of the guest; vm-bhyve treats an empty value as unset. */
static const char *setting(const struct build *b, const char *key)
{
	const char *v = rcconf_get(b->g->conf, key);

	return v && *v ? v : NULL;
}

static bool setting_yes(const struct build *b, const char *key, bool def)
{
	return setting(b, key) ? rcconf_get_yes(b->g->conf, key) : def;
}

/* A system setting from /etc/khyve.conf. */
static const char *system_setting(const struct build *b, const char *key, const char *def)
{
	const char *v = b->sys->conf ? rcconf_get(b->sys->conf, key) : NULL;

	return v && *v ? v : def;
}

/* "PREFIX<n>SUFFIX" (disk0_type, network1_mac) into `key` (48 bytes). */
static const char *nth_key(char key[48], const char *prefix, unsigned n, const char *suffix)
{
	snprintf(key, 48, "%s%u%s", prefix, n, suffix);
	return key;
}

/* "KEY=\"VALUE\": WHY" for a value khyve cannot use.  Returns -1. */
static int bad_value(struct build *b, const char *key, const char *why)
{
	return fail(b, "%s=\"%s\": %s", key, rcconf_get_default(b->g->conf, key, ""), why);
}

/* A decimal setting in [min, max], `def` when unset. */
static int setting_uint(struct build *b, const char *key, unsigned def, unsigned min, unsigned max,
                        unsigned *out)
{
	const char *v = setting(b, key);
	char why[64];

	*out = def;
	if (v == NULL)
		return 0;
	if (v[strspn(v, "0123456789")] == '\0' && strlen(v) < 10) {
		unsigned n = (unsigned)strtoul(v, NULL, 10);

		if (n >= min && n <= max) {
			*out = n;
			return 0;
		}
	}
	snprintf(why, sizeof(why), "want a whole number from %u to %u", min, max);
	return bad_value(b, key, why);
}

/* ---- output ---- */

static int add(struct build *b, const char *s)
{
	return argv_add(b->out, s) < 0 ? out_of_memory(b) : 0;
}

static int __attribute__((format(printf, 2, 3))) addf(struct build *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = argv_vaddf(b->out, fmt, ap);
	va_end(ap);
	return rc < 0 ? out_of_memory(b) : 0;
}

/* `-s SLOT,CONF` */
static int add_device(struct build *b, unsigned slot, const char *conf)
{
	return add(b, "-s") < 0 ? -1 : addf(b, "%u,%s", slot, conf);
}

/* The next free slot at or after start_slot. */
static int take_slot(struct build *b, unsigned *slot)
{
	*slot = 0;
	while (b->next_slot <= SLOT_LAST && b->slot_used[b->next_slot])
		b->next_slot++;
	if (b->next_slot > SLOT_LAST)
		return fail(b, "too many devices: khyve has PCI slots up to %d for them",
		            SLOT_LAST);
	*slot = b->next_slot++;
	b->slot_used[*slot] = true;
	return 0;
}

/* ---- paths ---- */

/* `path` as khyve should see it: relative paths are relative to the guest's folder. */
static int guest_path(struct build *b, const char *key, const char *path, char out[PATH_MAX])
{
	if (path[0] == '/' ? snprintf(out, PATH_MAX, "%s", path) >= PATH_MAX
	                   : vm_path(out, b->g->dir, path) < 0)
		return bad_value(b, key, "path too long");
	return 0;
}

/*
 * A file that `key` names: inside the guest's folder once every link is
 * followed (paths.h), or refused with what `dev_key`="custom" would allow.
 * A folder copied from another host must not reach the host's files.
 */
static int confined_path(struct build *b, const char *key, const char *dev_key, char out[PATH_MAX])
{
	char why[2 * PATH_MAX];

	if (vm_path_confine(b->g->dir, setting(b, key), out, why, sizeof(why)) == 0)
		return 0;
	return fail(b, "%s=\"%s\": %s (set %s=\"custom\" to use a host path)", key,
	            rcconf_get_default(b->g->conf, key, ""), why, dev_key);
}

/* KEY as a file for khyve: KEY_dev="custom" takes it as given, else it is confined. */
static int file_setting(struct build *b, const char *key, const char *dev_key, char out[PATH_MAX])
{
	const char *dev = setting(b, dev_key);

	if (dev == NULL || strcmp(dev, "file") == 0)
		return confined_path(b, key, dev_key, out);
	if (strcmp(dev, "custom") == 0)
		return guest_path(b, key, setting(b, key), out);
	return bad_value(b, dev_key, "want file or custom");
}

/*
 * khyve splits -s and -l arguments at commas, so a path holding one would
 * turn into options.  `key` names the setting the path came from (NULL:
 * not from the guest's settings).
 */
static int comma_free(struct build *b, const char *key, const char *path)
{
	if (strchr(path, ',') == NULL)
		return 0;
	if (key)
		return fail(b, "%s=\"%s\": khyve cannot use a path containing ',' (%s)", key,
		            rcconf_get_default(b->g->conf, key, ""), path);
	return fail_host(b, "%s: khyve cannot use a path containing ','", path);
}

/* A file khyve will open must be there; saying so now beats a failed start. */
static int must_exist(struct build *b, const char *key, const char *path)
{
	struct stat st;

	if (b->opts->settings_only || stat(path, &st) == 0)
		return 0;
	if (key)
		return fail(b, "%s=\"%s\": %s: %s", key, rcconf_get_default(b->g->conf, key, ""),
		            path, strerror(errno));
	return fail_host(b, "%s: %s", path, strerror(errno));
}

static int usable_path(struct build *b, const char *key, const char *path)
{
	return comma_free(b, key, path) < 0 ? -1 : must_exist(b, key, path);
}

/* ---- loader ---- */

static int read_loader(struct build *b)
{
	static const struct {
		const char *name;
		enum loader loader;
	} loaders[] = {
	    {"bios", LOADER_BIOS},       {"uefi-csm", LOADER_BIOS}, /* CSM boots the BIOS way */
	    {"grub", LOADER_GRUB},       {"uefi", LOADER_UEFI},
	    {"uefi-devel", LOADER_UEFI}, {"uefi-custom", LOADER_UEFI_CUSTOM},
	    {"linux", LOADER_LINUX},
	};
	const char *v = setting(b, "loader");

	if (v == NULL)
		return fail(b, "loader is not set (use uefi, bios, grub or linux)");
	if (strcmp(v, "bhyveload") == 0)
		return fail(b,
		            "loader bhyveload boots FreeBSD only; use uefi, bios, grub or linux");
	for (size_t i = 0; i < sizeof(loaders) / sizeof(loaders[0]); i++) {
		if (strcmp(v, loaders[i].name) == 0) {
			b->loader = loaders[i].loader;
			return 0;
		}
	}
	return bad_value(b, "loader", "want uefi, uefi-custom, bios, grub or linux");
}

/* SeaBIOS and Debian's OVMF are QEMU firmware (see the top of the file). */
static bool firmware_from_qemu(enum loader l)
{
	return l == LOADER_BIOS || l == LOADER_GRUB || l == LOADER_UEFI;
}

/* `-l bootrom,ROM[,VARS]`; `hint` says how to get a missing ROM. */
static int add_bootrom(struct build *b, const char *rom, const char *vars, const char *hint)
{
	struct stat st;

	if (!b->opts->settings_only && stat(rom, &st) != 0)
		return fail_host(b, "firmware %s: %s (%s)", rom, strerror(errno), hint);
	if (comma_free(b, NULL, rom) < 0 || (vars && comma_free(b, NULL, vars) < 0) ||
	    add(b, "-l") < 0)
		return -1;
	return vars ? addf(b, "bootrom,%s,%s", rom, vars) : addf(b, "bootrom,%s", rom);
}

static int add_seabios(struct build *b)
{
	char hint[PATH_MAX + 64];

	snprintf(hint, sizeof(hint), "install seabios, or set bios_firmware in %s",
	         b->sys->conf_path);
	return add_bootrom(b, system_setting(b, "bios_firmware", SEABIOS_ROM), NULL, hint);
}

/* UEFI variables live beside the guest's config (the start code makes them). */
static int add_uefi(struct build *b, const char *rom, const char *hint)
{
	char vars[PATH_MAX], why[2 * PATH_MAX];

	if (!setting_yes(b, "uefi_vars", false))
		return add_bootrom(b, rom, NULL, hint);
	if (vm_path_confine(b->g->dir, VM_UEFI_VARS, vars, why, sizeof(why)) < 0)
		return fail(b, "uefi_vars=\"yes\": %s/%s: %s", b->g->dir, VM_UEFI_VARS, why);
	return add_bootrom(b, rom, vars, hint);
}

static int add_ovmf(struct build *b)
{
	char hint[PATH_MAX + 64];

	snprintf(hint, sizeof(hint), "install ovmf, or set uefi_firmware in %s", b->sys->conf_path);
	return add_uefi(b, system_setting(b, "uefi_firmware", OVMF_CODE), hint);
}

/* vm-bhyve keeps uefi-custom's firmware in the guest's datastore, .config/. */
static int add_uefi_custom(struct build *b)
{
	char rom[PATH_MAX], ds[PATH_MAX], why[2 * PATH_MAX];
	const char *slash = strrchr(b->g->dir, '/');
	int dslen = slash ? (int)(slash - b->g->dir) : 0;

	if (snprintf(ds, sizeof(ds), "%.*s", dslen, b->g->dir) >= (int)sizeof(ds))
		return fail_host(b, "%s: path too long", b->g->dir);
	/* A datastore copied from elsewhere may hold it too: it stays in there. */
	if (vm_path_confine(ds[0] ? ds : "/", ".config/BHYVE_UEFI.fd", rom, why, sizeof(why)) < 0)
		return fail_host(b, "loader uefi-custom: %s/.config/BHYVE_UEFI.fd: %s", ds, why);
	return add_uefi(b, rom, "loader uefi-custom wants it there");
}

static int add_linux_file(struct build *b, const char *key, const char *option)
{
	char path[PATH_MAX], dev_key[48];

	snprintf(dev_key, sizeof(dev_key), "%s_dev", key);
	if (file_setting(b, key, dev_key, path) < 0 || must_exist(b, key, path) < 0 ||
	    add(b, "-o") < 0)
		return -1;
	return addf(b, "%s=%s", option, path);
}

static int add_linux(struct build *b)
{
	const char *cmdline = setting(b, "linux_cmdline");

	if (!setting(b, "linux_kernel"))
		return fail(b, "loader=\"linux\" needs linux_kernel (and usually linux_initrd, "
		               "linux_cmdline)");
	if (add_linux_file(b, "linux_kernel", "linux.kernel") < 0)
		return -1;
	if (setting(b, "linux_initrd") && add_linux_file(b, "linux_initrd", "linux.initrd") < 0)
		return -1;
	if (cmdline && (add(b, "-o") < 0 || addf(b, "linux.cmdline=%s", cmdline) < 0))
		return -1;
	return 0;
}

static int add_boot(struct build *b)
{
	switch (b->loader) {
	case LOADER_BIOS:
	case LOADER_GRUB:
		return add_seabios(b);
	case LOADER_UEFI:
		return add_ovmf(b);
	case LOADER_UEFI_CUSTOM:
		return add_uefi_custom(b);
	case LOADER_LINUX:
		return add_linux(b);
	}
	return 0;
}

/* ---- cpu, memory, flags ---- */

static int add_cpu(struct build *b)
{
	unsigned cpus, sockets, cores, threads;

	if (setting_uint(b, "cpu", 1, 1, VM_MAX_VCPUS, &cpus) < 0)
		return -1;
	if (!setting(b, "cpu_sockets") && !setting(b, "cpu_cores") && !setting(b, "cpu_threads"))
		return add(b, "-c") < 0 ? -1 : addf(b, "cpus=%u", cpus);
	if (setting_uint(b, "cpu_cores", 1, 1, VM_MAX_VCPUS, &cores) < 0 ||
	    setting_uint(b, "cpu_threads", 1, 1, VM_MAX_VCPUS, &threads) < 0)
		return -1;
	/* Unlike bhyve (sockets defaults to cpu), fill in the sockets the rest imply. */
	if (setting_uint(b, "cpu_sockets", cpus / (cores * threads), 1, VM_MAX_VCPUS, &sockets) < 0)
		return -1;
	if (sockets == 0 || (unsigned long long)sockets * cores * threads != cpus)
		return fail(b, "cpu=\"%u\": %u sockets x %u cores x %u threads is not %u vCPUs",
		            cpus, sockets, cores, threads, cpus);
	if (add(b, "-c") < 0)
		return -1;
	return addf(b, "cpus=%u,sockets=%u,cores=%u,threads=%u", cpus, sockets, cores, threads);
}

static int add_memory(struct build *b)
{
	const char *v = setting(b, "memory");
	uint64_t bytes;

	if (v == NULL)
		v = "256M";
	else if (parse_memsize(v, &bytes) < 0)
		return bad_value(b, "memory", "want a size such as 512M or 2G");
	return add(b, "-m") < 0 ? -1 : add(b, v);
}

/* 8-4-4-4-12 hex digits: what khyve's -U takes (RFC 4122's form). */
static bool uuid_valid(const char *s)
{
	static const char layout[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";

	if (strlen(s) != sizeof(layout) - 1)
		return false;
	for (size_t i = 0; layout[i] != '\0'; i++)
		if (layout[i] == '-' ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i]))
			return false;
	return true;
}

/* vm-bhyve's -AHPw (ACPI tables, HLT and PAUSE exits, ignore unknown MSRs). */
static int add_flags(struct build *b)
{
	const char *uuid = setting(b, "uuid");

	if (add(b, "-A") < 0 || add(b, "-H") < 0 || add(b, "-P") < 0 || add(b, "-w") < 0)
		return -1;
	/* vm-bhyve wires the memory of a guest with passthrough devices. */
	if ((setting_yes(b, "wired_memory", false) || setting(b, "passthru0") != NULL) &&
	    add(b, "-S") < 0)
		return -1;
	/* memory_merge="yes": KSM may merge the guest's pages (khyve(8)'s caveat). */
	if (setting_yes(b, "memory_merge", false) &&
	    (add(b, "-o") < 0 || add(b, "memory.merge=true") < 0))
		return -1;
	if (setting_yes(b, "utctime", true) && add(b, "-u") < 0)
		return -1;
	if (uuid == NULL)
		return 0;
	if (!uuid_valid(uuid))
		return bad_value(b, "uuid", "not a UUID");
	return add(b, "-U") < 0 ? -1 : add(b, uuid);
}

/* ---- PCI devices ---- */

static int add_hostbridge(struct build *b)
{
	const char *hb = setting(b, "hostbridge");

	if (hb && strncmp(hb, "no", 2) == 0) /* vm-bhyve: no* means none */
		return 0;
	if (firmware_from_qemu(b->loader))
		return add_device(b, 0, "i440fx");
	return add_device(b, 0, hb && strcmp(hb, "amd") == 0 ? "amd_hostbridge" : "hostbridge");
}

/* start_slot, install_slot and the GRUB image's slot; the boot media go first. */
static int plan_slots(struct build *b, unsigned *install_slot)
{
	unsigned start;

	if (setting_uint(b, "start_slot", 4, 1, SLOT_LAST, &start) < 0 ||
	    setting_uint(b, "install_slot", 3, 1, SLOT_LAST, install_slot) < 0)
		return -1;
	b->slot_used[0] = b->slot_used[SLOT_LPC] = true;
	if (b->loader == LOADER_GRUB) {
		if (start <= SLOT_GRUB)
			return bad_value(b, "start_slot",
			                 "loader grub boots from slot 2; "
			                 "start the disks at 3 or above");
		/* The install medium must follow the GRUB CD in the boot order
		 * (slot order), or GRUB's drive numbers shift (grub.c). */
		if (b->opts->install && b->opts->iso && *install_slot <= SLOT_GRUB)
			return bad_value(b, "install_slot",
			                 "loader grub boots from slot 2; use 3 or above");
		b->slot_used[SLOT_GRUB] = true;
	}
	if (b->opts->install && b->opts->iso &&
	    ((b->fbuf && *install_slot == SLOT_FBUF) || (b->xhci && *install_slot == SLOT_XHCI)))
		return bad_value(b, "install_slot",
		                 "slots 29 and 30 hold the graphics console and its tablet");
	b->slot_used[SLOT_FBUF] |= b->fbuf;
	b->slot_used[SLOT_XHCI] |= b->xhci;
	if (b->opts->install && b->opts->iso)
		b->slot_used[*install_slot] = true;
	b->next_slot = start;
	return 0;
}

/*
 * loader=grub: the CD image made for this run, first in the boot order.  A
 * CD rather than a disk keeps SeaBIOS's hard disk numbers, so GRUB's (hd0)
 * is still disk0 as in grub-bhyve's device.map (see grub.c).
 */
static int add_grub_image(struct build *b)
{
	const char *img = b->opts->grub_image;

	if (b->loader != LOADER_GRUB)
		return 0;
	if (img == NULL)
		return fail_host(b, "loader grub: no GRUB boot image was made for this run");
	if (usable_path(b, NULL, img) < 0 || add(b, "-s") < 0)
		return -1;
	return addf(b, "%u,ahci-cd,%s", SLOT_GRUB, img);
}

/* vm-bhyve: an .iso is a CD, anything else (a disk image) a read-only disk. */
static int add_install_media(struct build *b, unsigned slot)
{
	const char *iso = b->opts->iso;
	size_t len;

	if (!b->opts->install || iso == NULL)
		return 0;
	if (usable_path(b, NULL, iso) < 0 || add(b, "-s") < 0)
		return -1;
	len = strlen(iso);
	if (len >= 4 && strcasecmp(iso + len - 4, ".iso") == 0)
		return addf(b, "%u,ahci-cd,%s", slot, iso);
	return addf(b, "%u,ahci-hd,%s,ro", slot, iso);
}

static bool disk_type_known(const char *type)
{
	return !strcmp(type, "virtio-blk") || !strcmp(type, "ahci-hd") ||
	       !strcmp(type, "ahci-cd") || !strcmp(type, "nvme");
}

/* Where diskN is: diskN_dev file (default, in the guest's folder) or custom. */
static int disk_path(struct build *b, unsigned n, char path[PATH_MAX])
{
	char name_key[48], dev_key[48];
	const char *name = setting(b, nth_key(name_key, "disk", n, "_name"));
	const char *dev = setting(b, nth_key(dev_key, "disk", n, "_dev"));

	if (dev == NULL || strcmp(dev, "file") == 0) {
		if (confined_path(b, name_key, dev_key, path) < 0)
			return -1;
	} else if (strcmp(dev, "custom") == 0) {
		if (snprintf(path, PATH_MAX, "%s", name) >= PATH_MAX)
			return bad_value(b, name_key, "path too long");
	} else if (strcmp(dev, "zvol") == 0 || strcmp(dev, "sparse-zvol") == 0) {
		return bad_value(b, dev_key, "ZFS volumes are not supported");
	} else if (strcmp(dev, "iscsi") == 0) {
		return bad_value(b, dev_key, "iSCSI disks are not supported");
	} else {
		return bad_value(b, dev_key, "want file or custom");
	}
	return usable_path(b, name_key, path);
}

/* vm-bhyve's ahci_device_limit: disks of one AHCI controller, ",hd:P,cd:P". */
struct ahci_group {
	unsigned limit, count;
	char *ports;
};

static int ahci_flush(struct build *b, struct ahci_group *a)
{
	unsigned slot;
	int rc = 0;

	if (a->count == 0)
		return 0;
	if (take_slot(b, &slot) < 0 || add(b, "-s") < 0 || addf(b, "%u,ahci%s", slot, a->ports) < 0)
		rc = -1;
	free(a->ports);
	a->ports = NULL;
	a->count = 0;
	return rc;
}

static int ahci_add(struct build *b, struct ahci_group *a, const char *type, const char *path,
                    const char *opts)
{
	char *ports;

	if (asprintf(&ports, "%s,%s:%s%s%s", a->ports ? a->ports : "",
	             strcmp(type, "ahci-cd") == 0 ? "cd" : "hd", path, opts ? "," : "",
	             opts ? opts : "") < 0)
		return out_of_memory(b);
	free(a->ports);
	a->ports = ports;
	return ++a->count == a->limit ? ahci_flush(b, a) : 0;
}

static int add_disk(struct build *b, struct ahci_group *a, unsigned n, const char *type)
{
	char path[PATH_MAX], key[48];
	const char *opts = setting(b, nth_key(key, "disk", n, "_opts"));
	unsigned slot;

	if (!disk_type_known(type))
		return bad_value(b, nth_key(key, "disk", n, "_type"),
		                 "want virtio-blk, ahci-hd, ahci-cd or nvme");
	if (disk_path(b, n, path) < 0)
		return -1;
	if (a->limit > 1 && strncmp(type, "ahci-", 5) == 0)
		return ahci_add(b, a, type, path, opts);
	if (take_slot(b, &slot) < 0 || add(b, "-s") < 0)
		return -1;
	return addf(b, "%u,%s,%s%s%s", slot, type, path, opts ? "," : "", opts ? opts : "");
}

/* disk0, disk1, ... up to the first without diskN_name or diskN_type. */
static int add_disks(struct build *b)
{
	struct ahci_group a = {0};
	char name_key[48], type_key[48];
	int rc = 0;

	if (setting_uint(b, "ahci_device_limit", 1, 1, AHCI_MAX_PORTS, &a.limit) < 0)
		return -1;
	for (unsigned n = 0; rc == 0; n++) {
		const char *name = setting(b, nth_key(name_key, "disk", n, "_name"));
		const char *type = setting(b, nth_key(type_key, "disk", n, "_type"));

		if (name == NULL || type == NULL)
			break;
		rc = add_disk(b, &a, n, type);
	}
	if (rc == 0)
		rc = ahci_flush(b, &a);
	free(a.ports);
	return rc;
}

/* What khyve's virtio-net mac= takes, checked before the guest starts. */
static bool mac_valid(const char *s)
{
	uint8_t mac[MAC_LEN];

	return mac_parse(s, mac) == 0 && mac_is_unicast(mac);
}

/* The tap of networkN: made by vm_net_prepare(), or predicted for a dry run. */
static int nic_tap(struct build *b, unsigned n, char tap[16])
{
	const struct vm_taps *taps = b->opts->taps;

	if (n >= VM_MAX_NICS)
		return fail(b, "too many networks (at most %d)", VM_MAX_NICS);
	if (taps == NULL) {
		vm_net_tap_name(b->g, n, tap);
		return 0;
	}
	if (n >= taps->n || taps->name[n][0] == '\0')
		return fail_host(b, "network%u: no tap interface was made for it", n);
	snprintf(tap, 16, "%s", taps->name[n]);
	return 0;
}

static int add_nic(struct build *b, unsigned n, const char *type)
{
	char key[48], tap[16];
	const char *mac = setting(b, nth_key(key, "network", n, "_mac"));
	unsigned slot;

	/* vm-bhyve's two types, passed to the emulation of that name. */
	if (strcmp(type, "virtio-net") != 0 && strcmp(type, "e1000") != 0)
		return bad_value(b, nth_key(key, "network", n, "_type"),
		                 "want virtio-net or e1000");
	if (mac && !mac_valid(mac))
		return bad_value(b, key, "want a MAC address such as 58:9c:fc:00:00:01");
	if (nic_tap(b, n, tap) < 0 || take_slot(b, &slot) < 0 || add(b, "-s") < 0)
		return -1;
	return mac ? addf(b, "%u,%s,%s,mac=%s", slot, type, tap, mac)
	           : addf(b, "%u,%s,%s", slot, type, tap);
}

/* network0, network1, ... up to the first without networkN_type. */
static int add_nics(struct build *b)
{
	char key[48];

	for (unsigned n = 0;; n++) {
		const char *type = setting(b, nth_key(key, "network", n, "_type"));

		if (type == NULL)
			return 0;
		if (add_nic(b, n, type) < 0)
			return -1;
	}
}

static int add_random(struct build *b)
{
	unsigned slot;

	if (!setting_yes(b, "virt_random", false))
		return 0;
	return take_slot(b, &slot) < 0 ? -1 : add_device(b, slot, "virtio-rnd");
}

/* balloon="yes": a virtio-balloon (khyvectl --balloon, free page reporting). */
static int add_balloon(struct build *b)
{
	unsigned slot;

	if (!setting_yes(b, "balloon", false))
		return 0;
	return take_slot(b, &slot) < 0 ? -1 : add_device(b, slot, "virtio-balloon");
}

/* "B/S/F" with bus <= 255, slot <= 31, func <= 7 (decimal, as bhyve). */
static bool bsf_valid(const char *v, unsigned *bus, unsigned *slot)
{
	unsigned fn;
	char tail;

	return sscanf(v, "%u/%u/%u%c", bus, slot, &fn, &tail) == 3 && *bus <= 255 && *slot <= 31 &&
	       fn <= 7 && strspn(v, "0123456789/") == strlen(v);
}

/*
 * vm-bhyve's passthruN="B/S/F": each host device in a slot of its own,
 * but functions of one host slot (passthru0="2/0/0", passthru1="2/0/1")
 * share a guest slot as functions 0, 1, ..., as vm-bhyve does (add_flags
 * wires the guest's memory, -S, as vm-bhyve does for them).
 */
static int add_passthru(struct build *b)
{
	unsigned slot = 0, func = 0, last_bus = 256, last_slot = 32;
	char key[48];

	for (unsigned n = 0;; n++) {
		const char *v = setting(b, nth_key(key, "passthru", n, ""));
		unsigned bus, hslot;

		if (v == NULL)
			break;
		if (!bsf_valid(v, &bus, &hslot))
			return bad_value(b, key, "want BUS/SLOT/FUNCTION, e.g. 2/0/0");
		if (bus == last_bus && hslot == last_slot && func < 7)
			func++;
		else if (take_slot(b, &slot) < 0)
			return -1;
		else
			func = 0;
		last_bus = bus;
		last_slot = hslot;
		if (add(b, "-s") < 0 || addf(b, "%u:%u,passthru,%s", slot, func, v) < 0)
			return -1;
	}
	return 0;
}

/* ---- graphics ---- */

/* One of vm-bhyve's checkyesno words, any case: true with *out set. */
static bool yesno_word(const char *v, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(v, yes[i]) == 0 || strcasecmp(v, no[i]) == 0) {
			*out = strcasecmp(v, yes[i]) == 0;
			return true;
		}
	}
	return false;
}

/* A yes/no setting, checked: vm-bhyve's checkyesno words, any case. */
static int setting_yesno(struct build *b, const char *key, bool def, bool *out)
{
	const char *v = setting(b, key);

	*out = def;
	if (v == NULL || yesno_word(v, out))
		return 0;
	return bad_value(b, key, "want yes or no");
}

/* graphics and xhci_mouse (vm-bhyve adds the tablet whenever it is asked for). */
static int read_graphics(struct build *b)
{
	if (setting_yesno(b, "graphics", false, &b->fbuf) < 0)
		return -1;
	return setting_yesno(b, "xhci_mouse", b->fbuf, &b->xhci);
}

/* The frame buffer sizes khyve's fbuf takes (its w= and h=). */
#define RES_MIN_W 640
#define RES_MIN_H 480
#define RES_MAX_W 3840
#define RES_MAX_H 2160

static bool res_ok(unsigned long n, unsigned min, unsigned max)
{
	return n >= min && n <= max && n % 8 == 0;
}

/* graphics_res="WxH", 1024x768 when unset. */
static int graphics_res(struct build *b, unsigned *w, unsigned *h)
{
	const char *v = setting(b, "graphics_res");
	unsigned long pw, ph;
	char *end;

	*w = 1024;
	*h = 768;
	if (v == NULL)
		return 0;
	if (!isdigit((unsigned char)v[0]))
		goto bad;
	pw = strtoul(v, &end, 10);
	if (*end != 'x' || !isdigit((unsigned char)end[1]))
		goto bad;
	ph = strtoul(end + 1, &end, 10);
	if (*end || !res_ok(pw, RES_MIN_W, RES_MAX_W) || !res_ok(ph, RES_MIN_H, RES_MAX_H))
		goto bad;
	*w = (unsigned)pw;
	*h = (unsigned)ph;
	return 0;
bad:
	return bad_value(b, "graphics_res",
	                 "want WIDTHxHEIGHT from 640x480 to 3840x2160, each a multiple of 8");
}

/* graphics_wait: yes, no, or auto (the default): wait while installing. */
static int graphics_wait(struct build *b, bool *wait)
{
	const char *v = setting(b, "graphics_wait");

	if (v && strcasecmp(v, "auto") != 0)
		return yesno_word(v, wait) ? 0
		                           : bad_value(b, "graphics_wait", "want yes, no or auto");
	/* As vm-bhyve: only the install's first boot waits (the supervisor
	 * drops the medium, so `install`, for later boots). */
	*wait = b->opts->install && b->opts->iso;
	return 0;
}

/* graphics_vga: bhyve's io, on or off; unset leaves khyve's default. */
static int graphics_vga(struct build *b, const char **vga)
{
	*vga = setting(b, "graphics_vga");
	if (*vga == NULL || !strcmp(*vga, "io") || !strcmp(*vga, "on") || !strcmp(*vga, "off"))
		return 0;
	return bad_value(b, "graphics_vga", "want io, on or off");
}

/* vnc_password: VNC authentication uses 8 characters at most, as bhyve. */
static int vnc_password(struct build *b, const char **pw)
{
	size_t len;

	*pw = setting(b, "vnc_password");
	if (*pw == NULL)
		return 0;
	len = strlen(*pw);
	for (size_t i = 0; i < len; i++)
		if ((*pw)[i] <= ' ' || (*pw)[i] > '~' || (*pw)[i] == ',')
			return fail(b, "vnc_password: want printable characters without blanks "
			               "or commas");
	if (len > 8)
		return fail(b, "vnc_password: at most 8 characters (VNC authentication "
		               "uses no more)");
	return 0;
}

/*
 * graphics_listen as khyve's tcp= takes it: "ADDR" or "[V6ADDR]".  The
 * default is the loopback address, not vm-bhyve's 0.0.0.0: khyve listens
 * nowhere else unless told to (reach it through an SSH tunnel).
 */
static int graphics_listen(struct build *b, char *out, size_t len)
{
	const char *v = setting(b, "graphics_listen");
	unsigned char addr[16];

	if (v == NULL)
		v = "127.0.0.1";
	if (inet_pton(AF_INET, v, addr) == 1)
		snprintf(out, len, "%s", v);
	else if (inet_pton(AF_INET6, v, addr) == 1)
		snprintf(out, len, "[%s]", v);
	else
		return bad_value(b, "graphics_listen",
		                 "want an IP address such as 127.0.0.1, 0.0.0.0 or ::1");
	return 0;
}

/*
 * The VNC port: the caller's (a restart keeps its port), graphics_port as
 * given (vm-bhyve: the user keeps them apart; khyve refuses a port in use),
 * or the first from 5900 that nothing on this host listens on and no
 * other running guest has taken.
 */
static int graphics_port(struct build *b, unsigned *port)
{
	struct vm_ports *taken;
	int rc;

	if (setting_uint(b, "graphics_port", VM_VNC_PORT_FIRST, 1, 65535, port) < 0)
		return -1;
	if (b->opts->vnc_port)
		*port = b->opts->vnc_port;
	if (b->opts->vnc_port || setting(b, "graphics_port") || b->opts->settings_only)
		return 0;
	if ((taken = malloc(sizeof(*taken))) == NULL)
		return out_of_memory(b);
	vm_ports_taken(b->sys, b->g->name, taken);
	rc = vm_port_first_free(taken, VM_VNC_PORT_FIRST, port);
	free(taken);
	if (rc < 0)
		return fail(b,
		            "graphics: no free TCP port from %u to %u for VNC; set graphics_port",
		            VM_VNC_PORT_FIRST, VM_VNC_PORT_FIRST + VM_VNC_PORT_SEARCH - 1);
	return 0;
}

/* `-s 29,fbuf,tcp=ADDR:PORT,w=W,h=H[,vga=V][,password=PW][,wait]` */
static int add_fbuf(struct build *b)
{
	char listen[64], conf[256];
	const char *vga, *pw;
	unsigned w, h, port;
	bool wait;
	int n;

	if (!b->fbuf)
		return 0;
	if (graphics_listen(b, listen, sizeof(listen)) < 0 || graphics_res(b, &w, &h) < 0 ||
	    graphics_wait(b, &wait) < 0 || graphics_vga(b, &vga) < 0 || vnc_password(b, &pw) < 0 ||
	    graphics_port(b, &port) < 0)
		return -1;
	n = snprintf(conf, sizeof(conf), "fbuf,tcp=%s:%u,w=%u,h=%u%s%s%s%s%s", listen, port, w, h,
	             vga ? ",vga=" : "", vga ? vga : "", pw ? ",password=" : "", pw ? pw : "",
	             wait ? ",wait" : "");
	if (n < 0 || (size_t)n >= sizeof(conf))
		return out_of_memory(b);
	if (b->opts->vnc) {
		snprintf(b->opts->vnc->addr, sizeof(b->opts->vnc->addr), "%s:%u", listen, port);
		b->opts->vnc->port = port;
		b->opts->vnc->wait = wait;
	}
	return add_device(b, SLOT_FBUF, conf);
}

/* The USB tablet: the guest's pointer follows the VNC client's. */
static int add_xhci(struct build *b)
{
	return b->xhci ? add_device(b, SLOT_XHCI, "xhci,tablet") : 0;
}

/* ---- COM ports ---- */

/* "com1 com2": each comN once, N from 1 to 4; the first is the console. */
static int add_comports(struct build *b)
{
	const char *list = setting(b, "comports");
	char copy[128], *save = NULL, *port;
	bool seen[5] = {false}, first = true;
	int rc;

	snprintf(copy, sizeof(copy), "%s", list ? list : "com1");
	if (comma_free(b, NULL, b->g->dir) < 0)
		return -1;
	for (port = strtok_r(copy, " \t", &save); port; port = strtok_r(NULL, " \t", &save)) {
		unsigned n = strlen(port) == 4 && strncmp(port, "com", 3) == 0 ? port[3] - '0' : 0;

		if (n < 1 || n > 4 || seen[n])
			return bad_value(b, "comports",
			                 "want com1 to com4, each once, "
			                 "separated by blanks");
		seen[n] = true;
		if (add(b, "-l") < 0)
			return -1;
		/* vm-bhyve: in the foreground the first port is the terminal. */
		if (first && b->opts->foreground)
			rc = addf(b, "com%u,stdio", n);
		else
			rc = addf(b, "com%u,pty=%s/com%u.pty", n, b->g->dir, n);
		if (rc < 0)
			return -1;
		first = false;
	}
	return 0;
}

/* ---- the API socket ---- */

/*
 * `-o api.socket=DIR/khyve.sock`: khyve's API (docs/api.md) in the guest's
 * folder, where `vm list`, `vm info` and `khyvectl --vm=NAME` look for it.
 * A folder too deep for a unix socket's 107 bytes gets `api.socket=off`
 * and a warning rather than a socket in khyve's default place, which vm
 * would not find.
 */
static int add_api_socket(struct build *b)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", b->g->dir, VM_API_SOCKET) >= API_SOCKET_MAX) {
		if (!b->opts->settings_only)
			vm_warn("%s: the folder is too long for the API socket (at most %d bytes): "
			        "no vm list state, vm info counters or khyvectl --vm",
			        b->g->name, API_SOCKET_MAX - 1 - (int)strlen("/" VM_API_SOCKET));
		return add(b, "-o") < 0 ? -1 : add(b, "api.socket=off");
	}
	return add(b, "-o") < 0 ? -1 : addf(b, "api.socket=%s", path);
}

/*
 * The khyve option a word of bhyve_options gives that can name a host
 * file: -s (a device's image), -l (a port's link, the boot ROM), -o (any
 * config key, paths included) or -k (a config file); 0 for none.  Flags
 * cluster as getopt takes them ("-ws"); -c, -m and -U end a cluster.
 */
static char file_option(const char *word)
{
	if (word[0] != '-' || word[1] == '-')
		return 0;
	for (const char *p = word + 1; *p; p++) {
		if (strchr("slok", *p))
			return *p;
		if (strchr("cmU", *p))
			return 0;
	}
	return 0;
}

/*
 * bhyve_options, split at blanks as vm-bhyve's unquoted expansion does.
 * Options that can name host files need bhyve_options_dev="custom", as
 * diskN_name does: a folder from elsewhere must not reach them unasked.
 */
static int add_bhyve_options(struct build *b)
{
	const char *v = setting(b, "bhyve_options"), *dev = setting(b, "bhyve_options_dev");
	bool custom = dev && strcmp(dev, "custom") == 0;
	char *copy, *save = NULL, *word, opt;
	int rc = 0;

	if (v == NULL)
		return 0;
	if (dev && !custom && strcmp(dev, "file") != 0)
		return bad_value(b, "bhyve_options_dev", "want file or custom");
	if ((copy = strdup(v)) == NULL)
		return out_of_memory(b);
	for (word = strtok_r(copy, " \t\n", &save); word && rc == 0;
	     word = strtok_r(NULL, " \t\n", &save)) {
		if (!custom && (opt = file_option(word)) != 0)
			rc = fail(b,
			          "bhyve_options=\"%s\": -%c can name a host file "
			          "(set bhyve_options_dev=\"custom\" to pass it)",
			          v, opt);
		else
			rc = add(b, word);
	}
	free(copy);
	return rc;
}

/* ---- settings we do not use ---- */

/* "PREFIX<digits>SUFFIX" for one of `suffixes` (NULL-terminated). */
static bool numbered_key(const char *key, const char *prefix, const char *const *suffixes)
{
	size_t plen = strlen(prefix), digits;

	if (strncmp(key, prefix, plen) != 0)
		return false;
	key += plen;
	digits = strspn(key, "0123456789");
	if (digits == 0)
		return false;
	for (; *suffixes; suffixes++)
		if (strcmp(key + digits, *suffixes) == 0)
			return true;
	return false;
}

static bool key_known(const char *key)
{
	/* vm-bhyve's settings (vm.8, config.sample) and the new ones for khyve. */
	/* clang-format off */
	static const char *const plain[] = {
	    "loader", "cpu", "cpu_sockets", "cpu_cores", "cpu_threads", "memory", "wired_memory",
	    "hostbridge", "comports", "utctime", "uuid", "debug", "bhyve_options", "ignore_msr",
	    "ignore_bad_msr", "uefi_vars", "start_slot", "install_slot", "ahci_device_limit",
	    "virt_random", "graphics", "graphics_listen", "graphics_port", "graphics_res",
	    "graphics_vga", "graphics_wait", "vnc_password", "xhci_mouse", "sound", "sound_play",
	    "sound_rec", "priority", "on_restart", "on_fault", "prestart", "loader_timeout",
	    "grub_run_dir", "grub_run_file", "grub_run_partition", "bhyveload_args",
	    "bhyveload_loader", "linux_kernel", "linux_initrd", "linux_cmdline", "linux_kernel_dev",
	    "linux_initrd_dev", "bhyve_options_dev", "console", "guest", "nulliso_fix", "zfs_dataset_opts",
	    "zfs_zvol_opts", "tpm", "limit_pcpu", "limit_rbps", "limit_riops", "limit_wbps", "limit_wiops",
	    "balloon", "memory_merge", NULL};
	/* clang-format on */
	static const char *const disk[] = {"_type", "_name", "_dev", "_opts", "_size", NULL};
	static const char *const nic[] = {"_type", "_switch", "_mac", "_device",
	                                  "_name", "_span",   NULL};
	static const char *const bare[] = {"", NULL};

	for (const char *const *p = plain; *p; p++)
		if (strcmp(key, *p) == 0)
			return true;
	return numbered_key(key, "disk", disk) || numbered_key(key, "network", nic) ||
	       numbered_key(key, "passthru", bare) || numbered_key(key, "virt_console", bare) ||
	       numbered_key(key, "grub_install", bare) || numbered_key(key, "grub_run", bare);
}

/* Features khyve lacks: the feature's name when `key` asks for one. */
static const char *unsupported_feature(const struct build *b, const char *key)
{
	static const char *const bare[] = {"", NULL};

	if (strcmp(key, "sound") == 0 && setting_yes(b, key, false))
		return "sound";
	if (numbered_key(key, "virt_console", bare) && setting(b, key))
		return "virt_console";
	if (strncmp(key, "limit_", 6) == 0 && setting(b, key))
		return "limit_* (rctl)";
	return NULL;
}

/* Warn about unknown keys and unsupported features, once each. */
static void warn_settings(const struct build *b)
{
	const char *warned[8] = {NULL};
	size_t nwarned = 0;

	for (size_t i = 0; i < rcconf_count(b->g->conf); i++) {
		const char *key = rcconf_key_at(b->g->conf, i), *feature;
		bool seen = false;

		if (!key_known(key)) {
			vm_warn("%s.conf: unknown setting %s ignored", b->g->name, key);
			continue;
		}
		if ((feature = unsupported_feature(b, key)) == NULL)
			continue;
		for (size_t j = 0; j < nwarned; j++)
			seen |= strcmp(warned[j], feature) == 0;
		if (seen || nwarned == sizeof(warned) / sizeof(warned[0]))
			continue;
		warned[nwarned++] = feature;
		vm_warn("%s.conf: %s is not supported yet, ignored", b->g->name, feature);
	}
}

/* ---- all together ---- */

/* OVMF (built for QEMU's pc machine) finds the ACPI PM timer through the
 * PIIX4 PM function at 0:1.3 and hangs without it. */
static int add_pm_function(struct build *b)
{
	if (b->loader != LOADER_UEFI) /* uefi-custom: bhyve's firmware, bhyve's layout */
		return 0;
	return add(b, "-s") < 0 ? -1 : add(b, "1:3,piix4-pm");
}

/* tpm="yes": the TPM 2.0 on the swtpm the supervisor starts (vm/tpm.h). */
static int add_tpm(struct build *b)
{
	char sock[VM_TPM_SOCK_MAX], ctrl[VM_TPM_SOCK_MAX];
	bool on;

	if (setting_yesno(b, "tpm", false, &on) < 0)
		return -1;
	if (!on)
		return 0;
	/* khyve's -l tpm takes a path with commas (only ",ctrl=" and
	 * ",version=" end it). */
	if (vm_tpm_socket(b->g, sock, b->err, b->errlen) < 0 ||
	    vm_tpm_ctrl_socket(b->g, ctrl, b->err, b->errlen) < 0 || add(b, "-l") < 0)
		return -1;
	return addf(b, "tpm,swtpm,%s,ctrl=%s", sock, ctrl);
}

static int build_command(struct build *b)
{
	unsigned install_slot;

	if (read_loader(b) < 0 || add(b, b->sys->khyve) < 0 || add_cpu(b) < 0 ||
	    add_memory(b) < 0 || add_flags(b) < 0 || read_graphics(b) < 0 ||
	    plan_slots(b, &install_slot) < 0)
		return -1;
	if (add_hostbridge(b) < 0 || add_grub_image(b) < 0 ||
	    add_install_media(b, install_slot) < 0 || add_disks(b) < 0 || add_nics(b) < 0 ||
	    add_random(b) < 0 || add_balloon(b) < 0 || add_passthru(b) < 0 || add_fbuf(b) < 0 ||
	    add_xhci(b) < 0 || add_device(b, SLOT_LPC, "lpc") < 0 || add_pm_function(b) < 0)
		return -1;
	if (add_boot(b) < 0 || add_comports(b) < 0 || add_tpm(b) < 0 || add_api_socket(b) < 0 ||
	    add_bhyve_options(b) < 0)
		return -1;
	return add(b, b->g->name);
}

/*
 * See khyvecmd.h.  `opts` may be NULL (a plain start).  On error `out` is
 * left empty (freed), so the caller only frees it after success.  Checks
 * that the disks, install medium, GRUB image, firmware and kernel exist.
 * loader=grub needs opts->grub_image.
 */
int vm_khyve_command(const struct vm_sys *sys, const struct vm_guest *g,
                     const struct vm_start_opts *opts, struct argv *out, char *err, size_t errlen)
{
	static const struct vm_start_opts plain_start;
	struct build b = {
	    .sys = sys,
	    .g = g,
	    .opts = opts ? opts : &plain_start,
	    .out = out,
	    .err = err,
	    .errlen = errlen,
	};

	warn_settings(&b);
	if (build_command(&b) < 0) {
		argv_free(out);
		return -1;
	}
	return 0;
}

int vm_check_settings(const struct vm_sys *sys, const struct vm_guest *g, char *err, size_t errlen)
{
	/* A stand-in GRUB image: the check must not build a real one. */
	const struct vm_start_opts check = {.settings_only = true, .grub_image = "grub.iso"};
	struct argv a = {0};

	if (vm_khyve_command(sys, g, &check, &a, err, errlen) < 0)
		return -1;
	argv_free(&a);
	return 0;
}
