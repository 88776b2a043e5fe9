#include "dev/lpc.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/config.h"
#include "lib/devopts.h"
#include "lib/help.h"
#include "lib/log.h"

extern const struct lpc_device *const __start_lpc_devices[];
extern const struct lpc_device *const __stop_lpc_devices[];

int lpc_init_devices(struct machine *m, char *err, size_t errlen)
{
	for (const struct lpc_device *const *d = __start_lpc_devices; d < __stop_lpc_devices; d++) {
		char why[256] = "";

		if ((*d)->init != NULL && (*d)->init(m, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s: %s", (*d)->name, why[0] ? why : "init failed");
			return -1;
		}
	}
	return 0;
}

void lpc_write_dsdt(struct aml *a, void *arg)
{
	(void)arg;
	for (const struct lpc_device *const *d = __start_lpc_devices; d < __stop_lpc_devices; d++)
		if ((*d)->write_dsdt != NULL)
			(*d)->write_dsdt(a);
}

static const char *const bootrom_keys[] = {"bootrom", "bootvars", NULL};

/* bootrom is parsed here and loaded by boot/bootrom.c; this entry only
 * lists it for `-l help` and names its keys. */
LPC_DEVICE(bootrom) = {
    .name = "bootrom",
    .option = "bootrom",
    .keys = bootrom_keys,
    .descr = "firmware image mapped below 4 GiB, started at the reset vector",
    .usage = "  -l bootrom,ROM[,VARS]\n"
             "  ROM              firmware file (SeaBIOS, OVMF_CODE), ends at 4 GiB\n"
             "  VARS             variable store, a CFI flash below ROM; guest writes\n"
             "                   reach the file\n",
};

/* "comN" in `option` matches com1..com4; anything else matches itself. */
static bool option_matches(const char *option, const char *name)
{
	size_t len = strlen(option);

	if (len > 0 && option[len - 1] == 'N')
		return strncasecmp(name, option, len - 1) == 0 && name[len - 1] >= '1' &&
		       name[len - 1] <= '4' && name[len] == '\0';
	return strcasecmp(name, option) == 0;
}

void lpc_print_devices(FILE *out)
{
	struct help_line lines[32]; /* far more than are registered */
	size_t n = 0;

	for (const struct lpc_device *const *d = __start_lpc_devices;
	     d < __stop_lpc_devices && n < sizeof(lines) / sizeof(lines[0]); d++)
		if ((*d)->option != NULL)
			lines[n++] = (struct help_line){(*d)->option, (*d)->descr};
	help_print_lines(out, lines, n);
}

int lpc_print_device_usage(FILE *out, const char *name)
{
	for (const struct lpc_device *const *d = __start_lpc_devices; d < __stop_lpc_devices; d++)
		if ((*d)->option != NULL && option_matches((*d)->option, name)) {
			help_print_usage(out, (*d)->option, (*d)->descr, (*d)->usage);
			return 0;
		}
	return -1;
}

static int parse_com(const char *name, const char *conf, char *err, size_t errlen)
{
	char key[48];

	if (strlen(name) != 4 || name[3] < '1' || name[3] > '4') {
		snprintf(err, errlen, "unknown LPC device '%s' (serial ports are com1..com4)",
		         name);
		return -1;
	}
	if (conf == NULL || *conf == '\0') {
		snprintf(err, errlen, "-l %s needs a back end, e.g. -l %s,stdio", name, name);
		return -1;
	}
	snprintf(key, sizeof(key), "lpc.%s.path", name);
	return config_set(key, conf);
}

static int parse_bootrom(const char *conf, char *err, size_t errlen)
{
	char rom[4096];
	const char *comma;

	if (conf == NULL || *conf == '\0') {
		snprintf(err, errlen, "-l bootrom needs a ROM file: -l bootrom,FILE[,VARFILE]");
		return -1;
	}
	comma = strchr(conf, ',');
	if (comma == NULL)
		return config_set("lpc.bootrom", conf);
	if ((size_t)(comma - conf) >= sizeof(rom)) {
		snprintf(err, errlen, "bootrom path too long");
		return -1;
	}
	memcpy(rom, conf, (size_t)(comma - conf));
	rom[comma - conf] = '\0';
	if (config_set("lpc.bootrom", rom) < 0 || config_set("lpc.bootvars", comma + 1) < 0)
		return -1;
	return 0;
}

static int parse_testdev(const char *conf, char *err, size_t errlen)
{
	if (conf != NULL && *conf != '\0') {
		if (strncmp(conf, "debugcon=", 9) != 0 || conf[9] == '\0') {
			snprintf(err, errlen,
			         "pc-testdev: unknown option '%s' (want debugcon=FILE)", conf);
			return -1;
		}
		if (config_set("lpc.pc-testdev-debugcon", conf + 9) < 0)
			return -1;
	}
	return config_set("lpc.pc-testdev", "true");
}

static int parse_debugcon(const char *conf, char *err, size_t errlen)
{
	if (conf == NULL || *conf == '\0') {
		snprintf(err, errlen, "-l debugcon needs a file: -l debugcon,FILE");
		return -1;
	}
	return config_set("lpc.debugcon.path", conf);
}

/* bhyve 14: -l tpm,swtpm,PATH[,version=2.0], and khyve's ctrl=CTRL; the
 * path may hold commas, so only a trailing ,version= and ,ctrl= (in either
 * order) are split off. */
static int parse_tpm(const char *conf, char *err, size_t errlen)
{
	char buf[4200];
	char *path, *version, *ctrl;

	if (conf == NULL || strlen(conf) >= sizeof(buf) || strchr(conf, ',') == NULL) {
		snprintf(err, errlen, "-l tpm needs a type and swtpm's socket: -l tpm,swtpm,PATH");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", conf);
	path = strchr(buf, ',');
	*path++ = '\0';
	version = strstr(path, ",version=");
	ctrl = strstr(path, ",ctrl=");
	if (version != NULL)
		*version = '\0';
	if (ctrl != NULL)
		*ctrl = '\0';
	if (version != NULL && config_set("lpc.tpm.version", version + 9) < 0)
		return -1;
	if (ctrl != NULL && config_set("lpc.tpm.ctrl", ctrl + 6) < 0)
		return -1;
	if (config_set("lpc.tpm.type", buf) < 0 || config_set("lpc.tpm.path", path) < 0)
		return -1;
	return 0;
}

/* The key that -l NAME sets first, so a second -l NAME can be refused
 * (it would silently replace the first). */
static const char *main_key(const char *name, char *buf, size_t len)
{
	if (strncmp(name, "com", 3) == 0)
		snprintf(buf, len, "lpc.%s.path", name);
	else if (strcmp(name, "debugcon") == 0)
		snprintf(buf, len, "lpc.debugcon.path");
	else if (strcmp(name, "tpm") == 0)
		snprintf(buf, len, "lpc.tpm.type");
	else
		snprintf(buf, len, "lpc.%s", name);
	return buf;
}

int lpc_parse_option(const char *opt, char *err, size_t errlen)
{
	char name[32], key[64];
	const char *comma = strchr(opt, ',');
	const char *conf = comma ? comma + 1 : NULL;
	size_t len = comma ? (size_t)(comma - opt) : strlen(opt);
	int rc;

	err[0] = '\0';
	if (len == 0 || len >= sizeof(name)) {
		snprintf(err, errlen, "bad -l argument '%s'", opt);
		return -1;
	}
	/* bhyve accepts COM1 as well as com1. */
	for (size_t i = 0; i < len; i++)
		name[i] = (char)tolower((unsigned char)opt[i]);
	name[len] = '\0';
	if (config_get(main_key(name, key, sizeof(key))) != NULL) {
		snprintf(err, errlen, "-l %s is given twice (or also set with -o %s)", name, key);
		return -1;
	}
	if (strncmp(name, "com", 3) == 0)
		rc = parse_com(name, conf, err, errlen);
	else if (strcmp(name, "bootrom") == 0)
		rc = parse_bootrom(conf, err, errlen);
	else if (strcmp(name, "pc-testdev") == 0)
		rc = parse_testdev(conf, err, errlen);
	else if (strcmp(name, "debugcon") == 0)
		rc = parse_debugcon(conf, err, errlen);
	else if (strcmp(name, "tpm") == 0)
		rc = parse_tpm(conf, err, errlen);
	else if (strcmp(name, "fwcfg") == 0) /* bhyve: -l fwcfg,qemu */
		rc = config_set("lpc.fwcfg", conf != NULL && *conf != '\0' ? conf : "qemu");
	else {
		snprintf(err, errlen, "unknown LPC device '%s' (see khyve -l help)", name);
		return -1;
	}
	if (rc < 0 && err[0] == '\0')
		snprintf(err, errlen, "bad -l argument '%s'", opt);
	return rc;
}

/* ---- the check of lpc.* before the VM starts ---- */

struct lpc_scan {
	bool warn_only;
	char *err;
	size_t errlen;
	char bridged[32]; /* the first configured device that needs the bridge */
};

/* The registered device that knows lpc.KEY (`key` relative to lpc), or NULL. */
static const struct lpc_device *key_owner(const char *key)
{
	for (const struct lpc_device *const *d = __start_lpc_devices; d < __stop_lpc_devices; d++)
		for (const char *const *k = (*d)->keys; k && *k; k++)
			if (devopts_key_matches(*k, key))
				return *d;
	return NULL;
}

/* Whether lpc.KEY turns its device on: any value but a false boolean
 * (lpc.pc-testdev=false leaves it off). */
static bool key_turns_on(const char *key)
{
	char full[96];
	bool on = true;

	snprintf(full, sizeof(full), "lpc.%s", key);
	if (config_get_bool(full, true, &on) < 0)
		return true; /* a path, a back end */
	return on;
}

/* Called for every value below lpc (devopts_each_unknown() with no
 * patterns reports them all). */
static void scan_lpc_key(const char *key, void *arg)
{
	struct lpc_scan *s = arg;
	const struct lpc_device *d = key_owner(key);

	if (d == NULL && s->warn_only)
		log_warn("unknown LPC option 'lpc.%s' ignored (config.unknown=warn)", key);
	else if (d == NULL && s->err[0] == '\0')
		snprintf(s->err, s->errlen, "unknown LPC option 'lpc.%s' (see khyve -l help)", key);
	/* A device's first key is the one that creates it. */
	if (d != NULL && d->needs_bridge && devopts_key_matches(d->keys[0], key) &&
	    key_turns_on(key) && s->bridged[0] == '\0')
		snprintf(s->bridged, sizeof(s->bridged), "%.*s", (int)strcspn(key, "."), key);
}

/* Whether some pci.B.S.F.device is "lpc" (the PCI-ISA bridge). */
static bool have_bridge(void)
{
	struct config_node *pci = config_find_node("pci");

	for (struct config_node *b = pci ? config_node_first(pci) : NULL; b;
	     b = config_node_next(b))
		for (struct config_node *s = config_node_first(b); s; s = config_node_next(s))
			for (struct config_node *f = config_node_first(s); f;
			     f = config_node_next(f)) {
				const char *dev = config_node_get(f, "device");

				if (dev != NULL && strcmp(dev, "lpc") == 0)
					return true;
			}
	return false;
}

int lpc_check_config(bool warn_only, char *err, size_t errlen)
{
	struct lpc_scan s = {.warn_only = warn_only, .err = err, .errlen = errlen};

	err[0] = '\0';
	devopts_each_unknown(config_find_node("lpc"), NULL, 0, scan_lpc_key, &s);
	if (err[0] != '\0')
		return -1;
	if (s.bridged[0] != '\0' && !have_bridge()) {
		snprintf(err, errlen,
		         "-l %s needs the PCI-ISA bridge: add -s 31,lpc (as bhyve does)",
		         s.bridged);
		return -1;
	}
	return 0;
}
