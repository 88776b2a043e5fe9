#include "run/known_keys.h"

#include <stdio.h>
#include <string.h>

#include "bus/pci_slot.h"
#include "dev/lpc.h"
#include "lib/config.h"
#include "lib/devopts.h"
#include "lib/log.h"

enum key_type { KEY_ANY, KEY_BOOL };

struct known_key {
	const char *pattern; /* devopts_key_matches(): '*' stays in one segment */
	enum key_type type;
};

/*
 * The top-level keys (bhyve_config(5) where bhyve has them).  One line per
 * key, so parts of khyve that add a key add a line.  pci.* and lpc.* are
 * checked by the buses' own lists.
 */
/* clang-format off */
static const struct known_key known_keys[] = {
    {"name",                 KEY_ANY},  /* the VM's name (the last argument) */
    {"cpus",                 KEY_ANY},  /* -c */
    {"sockets",              KEY_ANY},  /* -c sockets= */
    {"cores",                KEY_ANY},  /* -c cores= */
    {"threads",              KEY_ANY},  /* -c threads= */
    {"maxcpus",              KEY_ANY},  /* -c maxcpus= (accepted, as bhyve) */
    {"memory.size",          KEY_ANY},  /* -m */
    {"memory.wired",         KEY_BOOL}, /* -S */
    {"memory.merge",         KEY_BOOL}, /* MADV_MERGEABLE: KSM may merge guest pages */
    {"memory.hugepages",     KEY_BOOL}, /* guest RAM in hugetlbfs pages */
    {"acpi_tables",          KEY_BOOL}, /* -A */
    {"uuid",                 KEY_ANY},  /* -U */
    {"rtc.use_localtime",    KEY_BOOL}, /* -u sets false */
    {"x86.strictio",         KEY_BOOL}, /* -e */
    {"x86.strictmsr",        KEY_BOOL}, /* -w sets false */
    {"x86.vmexit_on_hlt",    KEY_BOOL}, /* -H */
    {"x86.vmexit_on_pause",  KEY_BOOL}, /* -P */
    {"x86.x2apic",           KEY_BOOL}, /* -x */
    {"linux.kernel",         KEY_ANY},  /* direct boot: bzImage or PVH ELF */
    {"linux.initrd",         KEY_ANY},
    {"linux.cmdline",        KEY_ANY},
    {"boot_probe",           KEY_BOOL}, /* port 0x80 boot timer */
    {"config.dump",          KEY_BOOL}, /* print the tree and exit */
    {"config.unknown",       KEY_ANY},  /* error (default) or warn */
    {"sandbox.enable",       KEY_BOOL}, /* -o sandbox=: seccomp and privilege drop (default on) */
    {"sandbox.selftest",     KEY_ANY},  /* tests: a role whose threads make a forbidden call */
    {"sandbox.log",          KEY_BOOL}, /* log a forbidden syscall instead of dying */
    {"api.socket",           KEY_ANY},  /* the API's unix socket: PATH, or off/none */
    {"restore.file",         KEY_ANY},  /* -r: the state file to resume from */
    {"restore.migrate",      KEY_ANY},  /* -R: receive a live migration there */
    {"migration.listen_any", KEY_BOOL}, /* -R HOST:PORT may be non-loopback */
    {"migration.downtime_ms", KEY_ANY}, /* pre-copy stops when this fits */
    {"migration.auto_converge", KEY_BOOL}, /* throttle vCPUs that dirty too fast */
    {"sandbox.user",         KEY_ANY},  /* the user to drop to when started as root */
    {"user.*",               KEY_ANY},  /* yours: values for %(user.NAME) */
    {"user.*.*",             KEY_ANY},
};
/* clang-format on */

#define NKEYS (sizeof(known_keys) / sizeof(known_keys[0]))

static const struct known_key *find_key(const char *key)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (devopts_key_matches(known_keys[i].pattern, key))
			return &known_keys[i];
	return NULL;
}

bool known_keys_top_level(const char *key)
{
	return find_key(key) != NULL;
}

struct scan {
	bool warn_only;
	char *err;
	size_t errlen;
};

static void fail_once(struct scan *s, const char *fmt, const char *key, const char *value)
{
	if (s->err[0] == '\0')
		snprintf(s->err, s->errlen, fmt, key, value);
}

/* Every value outside pci.* and lpc.* (devopts_each_unknown() with no
 * patterns hands each one over). */
static void scan_key(const char *key, void *arg)
{
	struct scan *s = arg;
	const struct known_key *k;
	bool b;

	if (strncmp(key, "pci.", 4) == 0 || strncmp(key, "lpc.", 4) == 0)
		return;
	k = find_key(key);
	if (k == NULL && s->warn_only)
		log_warn("unknown config key '%s' ignored (config.unknown=warn)", key);
	else if (k == NULL)
		fail_once(s,
		          "unknown config key '%s'%s (see khyve(8); -o config.unknown=warn "
		          "ignores it)",
		          key, "");
	else if (k->type == KEY_BOOL && config_get_bool(key, false, &b) < 0)
		fail_once(s, "%s: want true or false, not '%s'", key, config_get(key));
}

int known_keys_check(char *err, size_t errlen)
{
	const char *mode = config_get("config.unknown");
	struct scan s = {false, err, errlen};

	err[0] = '\0';
	if (mode != NULL && strcmp(mode, "warn") == 0)
		s.warn_only = true;
	else if (mode != NULL && strcmp(mode, "error") != 0) {
		snprintf(err, errlen, "config.unknown: want error or warn, not '%s'", mode);
		return -1;
	}
	devopts_each_unknown(config_root_node(), NULL, 0, scan_key, &s);
	if (err[0] != '\0' || lpc_check_config(s.warn_only, err, errlen) < 0 ||
	    pci_check_config(s.warn_only, err, errlen) < 0)
		return -1;
	return 0;
}
