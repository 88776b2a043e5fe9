#include "cmd/cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bus/pci_slot.h"
#include "dev/lpc.h"
#include "lib/config.h"
#include "lib/parse.h"
#include "run/known_keys.h"
#include "vmm/topology.h"

void cli_usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: khyve [-AHPSuwxe] [-c [[cpus=]n][,sockets=n][,cores=n][,threads=n]]\n"
	    "             [-m size[K|M|G|T]] [-s slot,emulation[,conf]]... [-l lpcdev[,conf]]...\n"
	    "             [-o key=value]... [-k configfile] [-U uuid] [-r statefile] vmname\n"
	    "  -A  build ACPI tables (always on for direct Linux boot)\n"
	    "  -c  vCPUs and topology\n"
	    "  -m  guest memory (default 256M; a bare n below 1M means MiB)\n"
	    "  -s  PCI device in a slot\n"
	    "  -l  LPC device: comN,stdio|/dev/tty..|tcp=IP:PORT|pty=LINK\n"
	    "                  bootrom,ROM[,VARS]   fwcfg[,qemu|none]   debugcon,FILE\n"
	    "                  pc-testdev[,debugcon=FILE]\n"
	    "  -o  set a config key            -k  read key=value lines from a file\n"
	    "  -H  (accepted; HLT always yields)   -P  x86.vmexit_on_pause\n"
	    "  -S  wire guest memory           -u  RTC keeps UTC          -U  SMBIOS UUID\n"
	    "  -w  ignore unknown MSRs         -x  x2APIC mode\n"
	    "  -e  exit on unhandled I/O\n"
	    "  -r  resume from a state file (khyvectl --suspend, --checkpoint)\n"
	    "  -R  receive a live migration on unix:PATH or HOST:PORT (khyvectl --migrate)\n"
	    "  -h, --help  this help;  -s help / -l help: the devices;\n"
	    "              -s EMULATION,help / -l DEVICE,help: the options of one\n"
	    "Linux direct boot: -o linux.kernel=BZIMAGE [-o linux.initrd=FILE] "
	    "[-o linux.cmdline=...]\n"
	    "Print the configuration: -o config.dump=1.   Exit status: 0 reboot, 1 poweroff,\n"
	    "2 halt, 3 triple fault, 4 error, 5 suspended into a state file.\n");
}

static void set_defaults(void)
{
	config_reset();
	config_set("memory.size", "256M");
	config_set("acpi_tables", "true");
	config_set("x86.strictmsr", "true");
}

/* One item of -c: a bare count (only first) or KEY=VALUE with a key -c
 * knows, each at most once.  0, or -1 with `err` filled. */
static int topology_item(char *item, bool first, unsigned *seen, char *err, size_t errlen)
{
	static const char *const keys[] = {"cpus", "sockets", "cores", "threads", "maxcpus"};
	char *eq = strchr(item, '=');
	const char *key = eq ? item : "cpus", *value = eq ? eq + 1 : item;

	if (eq != NULL)
		*eq = '\0';
	if (*item == '\0' || (eq == NULL && !first)) {
		snprintf(err, errlen,
		         "bad -c item '%s' (want [[cpus=]n][,sockets=n][,cores=n]"
		         "[,threads=n])",
		         item);
		return -1;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strcmp(key, keys[i]) != 0)
			continue;
		if (*seen & (1u << i)) {
			snprintf(err, errlen, "-c gives %s twice", key);
			return -1;
		}
		*seen |= 1u << i;
		if (config_set(key, value) == 0)
			return 0;
		break;
	}
	snprintf(err, errlen, "bad -c option '%s'", key);
	return -1;
}

/* bhyve -c: "[[cpus=]n][,sockets=n][,cores=n][,threads=n]"; empty items
 * (and an empty -c) are refused.  A later -c replaces what it sets. */
static int parse_topology(const char *opt, char *err, size_t errlen)
{
	char *copy = strdup(opt), *item, *rest;
	unsigned seen = 0;
	int rc = 0;

	if (copy == NULL)
		return -1;
	if (*opt == '\0') {
		snprintf(err, errlen, "-c needs a vCPU count or topology, e.g. -c 2");
		rc = -1;
	}
	for (item = copy, rest = copy; rc == 0 && item != NULL; item = rest) {
		rest = strchr(item, ',');
		if (rest != NULL)
			*rest++ = '\0';
		rc = topology_item(item, item == copy, &seen, err, errlen);
	}
	free(copy);
	return rc;
}

static int set_flag(const char *key, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return config_set(key, "true");
}

/* Apply one option; 0, or -1 with `err` filled. */
static int apply_option(int ch, const char *arg, char *err, size_t errlen)
{
	switch (ch) {
	case 'A':
		return set_flag("acpi_tables", err, errlen);
	case 'H':
		return set_flag("x86.vmexit_on_hlt", err, errlen);
	case 'P':
		return set_flag("x86.vmexit_on_pause", err, errlen);
	case 'S':
		return set_flag("memory.wired", err, errlen);
	case 'e':
		return set_flag("x86.strictio", err, errlen);
	case 'x':
		return set_flag("x86.x2apic", err, errlen);
	case 'u':
		return config_set("rtc.use_localtime", "false");
	case 'w':
		return config_set("x86.strictmsr", "false");
	case 'c':
		return parse_topology(arg, err, errlen);
	case 'm':
		return config_set("memory.size", arg);
	case 'U':
		return config_set("uuid", arg);
	case 's':
		return pci_parse_slot_option(arg, err, errlen);
	case 'l':
		return lpc_parse_option(arg, err, errlen);
	case 'o':
		return config_parse_assignment(arg, err, errlen);
	case 'k':
		return config_load_file(arg, err, errlen);
	case 'r':
		return config_set("restore.file", arg);
	case 'R':
		return config_set("restore.migrate", arg);
	default:
		return -1;
	}
}

/* NAME of "NAME,help" or "SLOT,NAME[,...],help" (-s) / "NAME,help" (-l),
 * copied to `name`; false when `arg` asks for no device's options. */
static bool help_target(int ch, const char *arg, char *name, size_t len)
{
	size_t n = strlen(arg);
	const char *start = arg, *end;

	if (n < 5 || strcmp(arg + n - 5, ",help") != 0)
		return false;
	end = strchr(arg, ',');
	/* -s SLOT,NAME,...: the emulation is the second field. */
	if (ch == 's' && end < arg + n - 5) {
		start = end + 1;
		end = strchr(start, ',');
	}
	if ((size_t)(end - start) >= len)
		return false;
	memcpy(name, start, (size_t)(end - start));
	name[end - start] = '\0';
	return true;
}

/* -s help, -l help, -s NAME,help, -l NAME,help (bhyve prints and exits 0):
 * 1 when printed, 0 when `arg` is no help request, -1 with `err` filled when
 * it names an unknown device. */
static int print_device_help(int ch, const char *arg, FILE *out, char *err, size_t errlen)
{
	char name[64];

	if ((ch != 's' && ch != 'l') || arg == NULL)
		return 0;
	if (strcmp(arg, "help") == 0) {
		if (ch == 's')
			pci_print_emulations(out);
		else
			lpc_print_devices(out);
		return 1;
	}
	if (!help_target(ch, arg, name, sizeof(name)))
		return 0;
	if ((ch == 's' ? pci_print_emulation_usage(out, name)
	               : lpc_print_device_usage(out, name)) == 0)
		return 1;
	snprintf(err, errlen, "unknown %s '%s' (see khyve -%c help)",
	         ch == 's' ? "PCI emulation" : "LPC device", name, ch);
	return -1;
}

static enum cli_result finish(FILE *out, char *err, size_t errlen)
{
	bool dump = false;

	if (config_get("name") == NULL) {
		snprintf(err, errlen, "missing VM name (see khyve -h)");
		return CLI_ERROR;
	}
	if (config_get_bool("config.dump", false, &dump) < 0) {
		snprintf(err, errlen, "config.dump: not a boolean");
		return CLI_ERROR;
	}
	if (dump) {
		config_dump(out);
		return CLI_DONE;
	}
	if (cli_validate(err, errlen) < 0)
		return CLI_ERROR;
	return CLI_RUN;
}

/* getopt's complaint about argv[optind - 1] as one line in `err`. */
static void option_error(char **argv, char *err, size_t errlen)
{
	if (optopt == 0) /* an unknown --long option */
		snprintf(err, errlen, "unknown option %s (see khyve -h)", argv[optind - 1]);
	else if (strchr("cmslokU", optopt) != NULL)
		snprintf(err, errlen, "option -%c needs an argument", optopt);
	else
		snprintf(err, errlen, "unknown option -%c (see khyve -h)", optopt);
}

enum cli_result cli_parse(int argc, char **argv, FILE *out, char *err, size_t errlen)
{
	static const struct option long_options[] = {{"help", no_argument, NULL, 'h'},
	                                             {NULL, 0, NULL, 0}};
	int ch, help;

	set_defaults();
	err[0] = '\0';
	optind = 0; /* reset getopt (GNU: 0 also re-reads POSIXLY_CORRECT) */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+AHPSeuwxhc:m:s:l:o:k:U:r:R:", long_options, NULL)) !=
	       -1) {
		if (ch == 'h') {
			cli_usage(out);
			return CLI_DONE;
		}
		if (ch == '?' || ch == ':') {
			option_error(argv, err, errlen);
			return CLI_ERROR;
		}
		help = print_device_help(ch, optarg, out, err, errlen);
		if (help != 0)
			return help > 0 ? CLI_DONE : CLI_ERROR;
		if (apply_option(ch, optarg, err, errlen) < 0) {
			if (err[0] == '\0' && optarg != NULL)
				snprintf(err, errlen, "bad argument to -%c: '%s'", ch, optarg);
			else if (err[0] == '\0')
				snprintf(err, errlen,
				         "cannot apply -%c: a config key it sets is taken", ch);
			return CLI_ERROR;
		}
	}
	if (argc - optind > 1) {
		snprintf(err, errlen, "unexpected argument '%s' after the VM name",
		         argv[optind + 1]);
		return CLI_ERROR;
	}
	if (argc - optind == 1 && config_set("name", argv[optind]) < 0) {
		snprintf(err, errlen, "cannot set the VM name '%s'", argv[optind]);
		return CLI_ERROR;
	}
	return finish(out, err, errlen);
}

/* Catch a missing or unreadable file before any KVM work. */
static int check_readable(const char *key, char *err, size_t errlen)
{
	const char *path = config_get(key);

	if (path == NULL || access(path, R_OK) == 0)
		return 0;
	snprintf(err, errlen, "%s: cannot read %s: %s", key, path, strerror(errno));
	return -1;
}

/* A real boot ROM (SeaBIOS 128 or 256 KiB, OVMF 2-4 MiB) is 64 KiB to
 * 16 MiB; a smaller file cannot hold a reset vector and real-mode code
 * where firmware has them, and would end in a KVM internal error. */
#define BOOTROM_MIN (64u << 10)
#define BOOTROM_MAX (16u << 20)

static int check_rom_size(char *err, size_t errlen)
{
	const char *rom = config_get("lpc.bootrom");
	struct stat st;

	if (rom == NULL || stat(rom, &st) != 0 || !S_ISREG(st.st_mode))
		return 0; /* unreadable: check_readable says so; a device: the loader */
	if (st.st_size >= BOOTROM_MIN && st.st_size <= BOOTROM_MAX)
		return 0;
	snprintf(err, errlen, "lpc.bootrom: %s is %lld bytes; a boot ROM is 64 KiB to 16 MiB", rom,
	         (long long)st.st_size);
	return -1;
}

static int validate_boot(char *err, size_t errlen)
{
	const char *kernel = config_get("linux.kernel");
	const char *rom = config_get("lpc.bootrom");

	if (kernel != NULL && rom != NULL) {
		snprintf(err, errlen,
		         "choose one boot method: linux.kernel or -l bootrom, not both");
		return -1;
	}
	if (kernel == NULL && rom == NULL) {
		snprintf(err, errlen,
		         "nothing to boot: give -l bootrom,FIRMWARE or -o linux.kernel=BZIMAGE");
		return -1;
	}
	if (kernel == NULL && (config_get("linux.initrd") || config_get("linux.cmdline"))) {
		snprintf(err, errlen, "linux.initrd/linux.cmdline need linux.kernel");
		return -1;
	}
	if (check_readable("linux.kernel", err, errlen) < 0 ||
	    check_readable("linux.initrd", err, errlen) < 0 ||
	    check_readable("lpc.bootrom", err, errlen) < 0 || check_rom_size(err, errlen) < 0 ||
	    check_readable("restore.file", err, errlen) < 0)
		return -1;
	if (config_get("restore.file") != NULL && config_get("restore.migrate") != NULL) {
		snprintf(err, errlen, "choose one of -r FILE and -R ADDRESS");
		return -1;
	}
	return 0;
}

/* -U / uuid: 8-4-4-4-12 hex digits (RFC 4122 section 3), as bhyve's
 * uuid_from_string() wants it. */
static bool uuid_valid(const char *s)
{
	static const char layout[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";

	if (strlen(s) != sizeof(layout) - 1)
		return false;
	for (size_t i = 0; layout[i] != '\0'; i++)
		if (layout[i] == '-' ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

int cli_validate(char *err, size_t errlen)
{
	struct cpu_topology topo;
	const char *mem = config_get("memory.size");
	uint64_t bytes;

	if (known_keys_check(err, errlen) < 0 || topology_from_config(&topo, err, errlen) < 0)
		return -1;
	if (config_get("uuid") != NULL && !uuid_valid(config_get("uuid"))) {
		snprintf(err, errlen,
		         "-U / uuid: '%s' is not a UUID (want 8-4-4-4-12 hex digits, e.g. "
		         "0b3a3c8e-1111-2222-3333-444455556666)",
		         config_get("uuid"));
		return -1;
	}
	if (mem == NULL || parse_memsize(mem, &bytes) < 0) {
		snprintf(err, errlen, "invalid memory size '%s' (want e.g. 512M or 2G)",
		         mem ? mem : "");
		return -1;
	}
	return validate_boot(err, errlen);
}

static bool file_is_elf(const char *path)
{
	unsigned char magic[4] = {0};
	FILE *f = fopen(path, "rbe");
	bool elf;

	if (f == NULL)
		return false;
	elf =
	    fread(magic, 1, sizeof(magic), f) == sizeof(magic) && memcmp(magic, "\177ELF", 4) == 0;
	fclose(f);
	return elf;
}

bool cli_boot_needs_hardware_kvm(char *what, size_t len)
{
	const char *kernel = config_get("linux.kernel");
	const char *rom = config_get("lpc.bootrom");
	struct stat st;

	if (kernel != NULL && access(kernel, R_OK) == 0 && !file_is_elf(kernel)) {
		snprintf(what, len, "a Linux bzImage (%s)", kernel);
		return true;
	}
	if (rom != NULL && stat(rom, &st) == 0 && st.st_size > (1 << 20)) {
		snprintf(what, len, "a boot ROM larger than 1 MiB like OVMF (%s)", rom);
		return true;
	}
	return false;
}
