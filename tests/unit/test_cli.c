/* Unit tests for the command line (src/cmd/cli.h). */
#include "unit.h"

#include "cmd/cli.h"
#include "lib/config.h"

/* Files the tests point linux.kernel / bootrom / -k at. */
static char *tmpdir, *kernel, *initrd, *rom, *tinyrom, *vars, *conffile, *badconf;

static char err[512];
static struct unit_capture out;

static int group_setup(void **state)
{
	(void)state;
	tmpdir = unit_mkdtemp();
	if (tmpdir == NULL)
		return -1;
	kernel = unit_write_text(tmpdir, "bzImage", "not really a kernel");
	initrd = unit_write_text(tmpdir, "initrd.img", "initrd");
	rom = unit_write_text(tmpdir, "rom.fd", "rom");
	/* The smallest ROM khyve takes: 64 KiB. */
	if (rom == NULL || truncate(rom, 64 << 10) != 0)
		return -1;
	tinyrom = unit_write_text(tmpdir, "tiny.rom", "x");
	vars = unit_write_text(tmpdir, "vars.fd", "vars");
	conffile = unit_write_text(tmpdir, "vm.conf", "# from -k\nmemory.size=1G\ncpus=2\n");
	badconf = unit_write_text(tmpdir, "bad.conf", "memory.size=1G\nnot an assignment\n");
	return (kernel && initrd && tinyrom && vars && conffile && badconf) ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	unit_rmtree(tmpdir);
	free(tmpdir);
	free(kernel);
	free(initrd);
	free(rom);
	free(tinyrom);
	free(vars);
	free(conffile);
	free(badconf);
	config_reset();
	return 0;
}

static int test_setup(void **state)
{
	(void)state;
	err[0] = '\0';
	return unit_capture_open(&out) != NULL ? 0 : -1;
}

static int test_teardown(void **state)
{
	(void)state;
	unit_capture_close(&out);
	return 0;
}

/* cli_parse() over a NULL-terminated list of arguments (argv[0] added). */
static enum cli_result run_v(const char *const *args)
{
	char *argv[64];
	int argc = 0;
	enum cli_result r;

	argv[argc++] = strdup("khyve");
	for (; *args != NULL; args++) {
		assert_true(argc < 63);
		argv[argc++] = strdup(*args);
	}
	argv[argc] = NULL;
	memset(err, 'Z', sizeof(err) - 1); /* must be overwritten, not appended to */
	err[sizeof(err) - 1] = '\0';
	r = cli_parse(argc, argv, out.f, err, sizeof(err));
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	if (r != CLI_ERROR && err[0] == 'Z')
		err[0] = '\0';
	return r;
}

#define RUN(...) run_v((const char *const[]){__VA_ARGS__, NULL})

/* A readable kernel, so validation passes. */
#define KERNEL_OPT(buf) (snprintf(buf, sizeof(buf), "linux.kernel=%s", kernel), buf)

static void expect_error(enum cli_result r, const char *needle)
{
	if (r != CLI_ERROR)
		fail_msg("expected CLI_ERROR mentioning '%s', got %d", needle, (int)r);
	assert_contains(err, needle);
	assert_null(strchr(err, '\n'));
}

static void test_defaults(void **state)
{
	char k[600];
	bool b;

	(void)state;
	assert_int_equal(RUN("-o", KERNEL_OPT(k), "vm0"), CLI_RUN);
	assert_string_equal(err, "");
	assert_string_equal(config_get("name"), "vm0");
	assert_string_equal(config_get("memory.size"), "256M");
	assert_int_equal(config_get_bool("acpi_tables", false, &b), 0);
	assert_true(b);
	assert_int_equal(config_get_bool("x86.strictmsr", false, &b), 0);
	assert_true(b);
	assert_null(config_get("cpus"));
	assert_string_equal(config_get("linux.kernel"), kernel);
	assert_int_equal(cli_validate(err, sizeof(err)), 0);
	/* Nothing printed. */
	assert_string_equal(unit_capture_text(&out), "");
}

static void test_flags(void **state)
{
	char k[600];
	bool b;

	(void)state;
	assert_int_equal(
	    RUN("-A", "-H", "-P", "-S", "-e", "-x", "-u", "-w", "-o", KERNEL_OPT(k), "vm"),
	    CLI_RUN);
	assert_int_equal(config_get_bool("x86.vmexit_on_hlt", false, &b), 0);
	assert_true(b);
	assert_int_equal(config_get_bool("x86.vmexit_on_pause", false, &b), 0);
	assert_true(b);
	assert_int_equal(config_get_bool("memory.wired", false, &b), 0);
	assert_true(b);
	assert_int_equal(config_get_bool("x86.strictio", false, &b), 0);
	assert_true(b);
	assert_int_equal(config_get_bool("x86.x2apic", false, &b), 0);
	assert_true(b);
	assert_int_equal(config_get_bool("rtc.use_localtime", true, &b), 0);
	assert_false(b);
	assert_int_equal(config_get_bool("x86.strictmsr", true, &b), 0);
	assert_false(b);
	/* Grouped flags. */
	assert_int_equal(RUN("-uw", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_int_equal(config_get_bool("x86.strictmsr", true, &b), 0);
	assert_false(b);
	assert_int_equal(
	    RUN("-U", "12345678-1234-1234-1234-123456789abc", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_string_equal(config_get("uuid"), "12345678-1234-1234-1234-123456789abc");
}

static void test_reset_between_calls(void **state)
{
	char k[600];

	(void)state;
	assert_int_equal(RUN("-o", "user.key=1", "-m", "1G", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_string_equal(config_get("user.key"), "1");
	assert_int_equal(RUN("-o", KERNEL_OPT(k), "vm2"), CLI_RUN);
	assert_null(config_get("user.key"));
	assert_string_equal(config_get("memory.size"), "256M");
	assert_string_equal(config_get("name"), "vm2");
}

static void test_cpus(void **state)
{
	char k[600];

	(void)state;
	assert_int_equal(RUN("-c", "2", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_string_equal(config_get("cpus"), "2");

	assert_int_equal(RUN("-c", "cpus=4,sockets=2,cores=2", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_string_equal(config_get("cpus"), "4");
	assert_string_equal(config_get("sockets"), "2");
	assert_string_equal(config_get("cores"), "2");
	assert_null(config_get("threads"));

	assert_int_equal(RUN("-c", "8,sockets=2,cores=2,threads=2", "-o", KERNEL_OPT(k), "vm"),
	                 CLI_RUN);
	/* Without cpus the topology decides. */
	assert_int_equal(RUN("-c", "sockets=2,cores=3", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_int_equal(RUN("-c", "288", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_int_equal(RUN("-c", "maxcpus=4,cpus=2", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	/* Later -c wins. */
	assert_int_equal(RUN("-c", "2", "-c", "3", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_string_equal(config_get("cpus"), "3");
}

static void test_cpus_errors(void **state)
{
	char k[600];

	(void)state;
	expect_error(RUN("-c", "cpus=4,sockets=3", "-o", KERNEL_OPT(k), "vm"), "does not match");
	/* bhyve: an unset sockets is cpus, so 2 cpus with 2 cores is 4 vCPUs. */
	expect_error(RUN("-c", "2,cores=2", "-o", KERNEL_OPT(k), "vm"), "does not match");
	expect_error(RUN("-c", "2,sockets=1", "-o", KERNEL_OPT(k), "vm"), "does not match");
	expect_error(RUN("-c", "bogus=1", "-o", KERNEL_OPT(k), "vm"), "bogus");
	expect_error(RUN("-c", "cpus=2,memory=3", "-o", KERNEL_OPT(k), "vm"), "memory");
	expect_error(RUN("-c", "0", "-o", KERNEL_OPT(k), "vm"), "cpus");
	expect_error(RUN("-c", "289", "-o", KERNEL_OPT(k), "vm"), "cpus");
	expect_error(RUN("-c", "-1", "-o", KERNEL_OPT(k), "vm"), "cpus");
	expect_error(RUN("-c", "two", "-o", KERNEL_OPT(k), "vm"), "two");
	expect_error(RUN("-c", "cpus=", "-o", KERNEL_OPT(k), "vm"), "cpus");
	expect_error(RUN("-c", "sockets=0", "-o", KERNEL_OPT(k), "vm"), "sockets");
	expect_error(RUN("-c", "threads=x", "-o", KERNEL_OPT(k), "vm"), "threads");
	expect_error(RUN("-c", "sockets=16,cores=16,threads=2", "-o", KERNEL_OPT(k), "vm"), "288");
	expect_error(RUN("-c", "cores=200,threads=200", "-o", KERNEL_OPT(k), "vm"), "288");
	/* A -c key must not be able to set arbitrary config keys. */
	expect_error(RUN("-c", "name=evil", "-o", KERNEL_OPT(k), "vm"), "name");
}

static void test_memory(void **state)
{
	char k[600];

	(void)state;
	assert_int_equal(RUN("-m", "512", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_string_equal(config_get("memory.size"), "512");
	assert_int_equal(RUN("-m", "2G", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_string_equal(config_get("memory.size"), "2G");
	assert_int_equal(RUN("-m", "4096M", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_int_equal(RUN("-o", "memory.size=1G", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);

	expect_error(RUN("-m", "12Q", "-o", KERNEL_OPT(k), "vm"), "12Q");
	expect_error(RUN("-m", "0", "-o", KERNEL_OPT(k), "vm"), "memory size");
	expect_error(RUN("-m", "1K", "-o", KERNEL_OPT(k), "vm"), "1K");
	expect_error(RUN("-m", "", "-o", KERNEL_OPT(k), "vm"), "memory size");
	expect_error(RUN("-m", "-5", "-o", KERNEL_OPT(k), "vm"), "memory size");
	expect_error(RUN("-o", "memory.size=lots", "-o", KERNEL_OPT(k), "vm"), "lots");
}

static void test_lpc(void **state)
{
	char k[600], r[600], rv[1200];

	(void)state;
	assert_int_equal(RUN("-s", "31,lpc", "-l", "com1,stdio", "-l", "com2,tcp=127.0.0.1:4444",
	                     "-o", KERNEL_OPT(k), "vm"),
	                 CLI_RUN);
	assert_string_equal(config_get("lpc.com1.path"), "stdio");
	assert_string_equal(config_get("lpc.com2.path"), "tcp=127.0.0.1:4444");

	assert_int_equal(RUN("-s", "1,lpc", "-l", "pc-testdev", "-o", KERNEL_OPT(k), "vm"),
	                 CLI_RUN);
	assert_string_equal(config_get("lpc.pc-testdev"), "true");

	snprintf(rv, sizeof(rv), "bootrom,%s,%s", rom, vars);
	assert_int_equal(RUN("-l", rv, "vm"), CLI_RUN);
	assert_string_equal(config_get("lpc.bootrom"), rom);
	assert_string_equal(config_get("lpc.bootvars"), vars);
	assert_null(config_get("linux.kernel"));

	snprintf(r, sizeof(r), "bootrom,%s", rom);
	assert_int_equal(RUN("-l", r, "vm"), CLI_RUN);
	assert_string_equal(config_get("lpc.bootrom"), rom);
	assert_null(config_get("lpc.bootvars"));

	/* Parsing only (config.dump skips validation). */
	assert_int_equal(RUN("-l", "bootrom,a,b", "-o", "config.dump=1", "vm"), CLI_DONE);
	assert_string_equal(config_get("lpc.bootrom"), "a");
	assert_string_equal(config_get("lpc.bootvars"), "b");

	expect_error(RUN("-l", "com5,stdio", "-o", KERNEL_OPT(k), "vm"), "com5");
	expect_error(RUN("-l", "com5", "-o", KERNEL_OPT(k), "vm"), "com5");
	expect_error(RUN("-l", "com1", "-o", KERNEL_OPT(k), "vm"), "com1");
	expect_error(RUN("-l", "nosuchdev", "-o", KERNEL_OPT(k), "vm"), "nosuchdev");
	expect_error(RUN("-l", "", "-o", KERNEL_OPT(k), "vm"), "-l");
	expect_error(RUN("-l", "bootrom", "vm"), "bootrom");
}

static void test_options(void **state)
{
	char k[600], kk[600];

	(void)state;
	assert_int_equal(
	    RUN("-o", "user.b=c", "-o", "linux.cmdline=console=ttyS0", "-o", KERNEL_OPT(k), "vm"),
	    CLI_RUN);
	assert_string_equal(config_get("user.b"), "c");
	assert_string_equal(config_get("linux.cmdline"), "console=ttyS0");

	expect_error(RUN("-o", "bad", "-o", KERNEL_OPT(k), "vm"), "bad");
	expect_error(RUN("-o", "=x", "-o", KERNEL_OPT(k), "vm"), "=x");
	expect_error(RUN("-o", "a..b=1", "-o", KERNEL_OPT(k), "vm"), "a..b");
	/* memory.size is a value; it cannot grow children. */
	expect_error(RUN("-o", "memory.size.x=1", "-o", KERNEL_OPT(k), "vm"), "memory.size.x");

	/* -k file, applied in order with -o. */
	snprintf(kk, sizeof(kk), "%s", conffile);
	assert_int_equal(RUN("-k", kk, "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_string_equal(config_get("memory.size"), "1G");
	assert_string_equal(config_get("cpus"), "2");
	assert_int_equal(RUN("-k", kk, "-o", "cpus=3", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_string_equal(config_get("cpus"), "3");
	assert_int_equal(RUN("-o", "cpus=3", "-k", kk, "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	assert_string_equal(config_get("cpus"), "2");

	/* Bad -k files: FILE:LINE or the missing file's name. */
	snprintf(kk, sizeof(kk), "%s:2:", badconf);
	expect_error(RUN("-k", badconf, "-o", KERNEL_OPT(k), "vm"), kk);
	snprintf(kk, sizeof(kk), "%s/missing.conf", tmpdir);
	expect_error(RUN("-k", kk, "-o", KERNEL_OPT(k), "vm"), kk);
}

static void test_usage_errors(void **state)
{
	char k[600];

	(void)state;
	expect_error(RUN("-Z", "vm"), "-Z");
	expect_error(RUN("-Z", "vm"), "unknown option");
	expect_error(RUN("-o", KERNEL_OPT(k)), "VM name");
	expect_error(RUN("-o", KERNEL_OPT(k), "vm", "extra"), "extra");
	/* Options after the name are not options (bhyve stops at the name). */
	expect_error(RUN("-o", KERNEL_OPT(k), "vm", "-c", "2"), "-c");
	/* Missing arguments. */
	expect_error(RUN("vm", "-c"), "unexpected argument");
	expect_error(RUN("-c"), "-c");
	expect_error(RUN("-m"), "-m");
	expect_error(RUN("-o"), "-o");
	expect_error(RUN("-s"), "-s");
	expect_error(RUN("-l"), "-l");
	expect_error(RUN("-k"), "-k");
	/* No arguments at all. */
	expect_error(run_v((const char *const[]){NULL}), "VM name");
	/* Nothing to boot. */
	expect_error(RUN("vm"), "nothing to boot");
}

/*
 * Regression: when the positional VM name cannot be stored (e.g. "-o name.x=1 vm"
 * made "name" an inner node), cli_parse() returns CLI_ERROR with `err` left
 * empty, so khyve exits 4 without saying why.  Fix: in cli_parse(), fill
 * `err` when config_set("name", ...) fails, e.g. "cannot use 'vm' as the
 * VM name: config key 'name' is already a node".
 */
static void test_name_conflict_has_message(void **state)
{
	char k[600];

	(void)state;
	assert_int_equal(RUN("-o", "name.x=1", "-o", KERNEL_OPT(k), "vm"), CLI_ERROR);
	if (err[0] == '\0' || err[0] == 'Z')
		fail_msg("CLI_ERROR without a message");
}

/*
 * Regression: when a flag option (-A -H -P -S -e -u -w -x) cannot store its key
 * (here "-o memory.wired.x=1" made memory.wired a node, so -S fails),
 * cli_parse() falls back to snprintf("bad argument to -%c: '%s'", ch,
 * optarg) with optarg == NULL: undefined behaviour that glibc prints as
 * "(null)".  Fix: use a message without optarg for flags (or optarg ?
 * optarg : ""), ideally naming the conflicting key.
 */
static void test_flag_error_message(void **state)
{
	char k[600];

	(void)state;
	assert_int_equal(RUN("-o", "memory.wired.x=1", "-S", "-o", KERNEL_OPT(k), "vm"), CLI_ERROR);
	assert_true(err[0] != '\0');
	assert_contains(err, "-S");
	assert_not_contains(err, "(null)");
}

static void test_pci_slots(void **state)
{
	char k[600];

	(void)state;
	expect_error(RUN("-s", "3,no-such-emulation", "-o", KERNEL_OPT(k), "vm"),
	             "no-such-emulation");
	expect_error(RUN("-s", "32,hostbridge", "-o", KERNEL_OPT(k), "vm"), "32");
	expect_error(RUN("-s", "3", "-o", KERNEL_OPT(k), "vm"), "-s");
}

static void test_dump(void **state)
{
	const char *text;

	(void)state;
	/* config.dump prints the tree and needs no boot method. */
	assert_int_equal(
	    RUN("-c", "2", "-m", "1G", "-l", "com1,stdio", "-o", "config.dump=1", "vm0"), CLI_DONE);
	text = unit_capture_text(&out);
	assert_contains(text, "memory.size=1G\n");
	assert_contains(text, "cpus=2\n");
	assert_contains(text, "lpc.com1.path=stdio\n");
	assert_contains(text, "config.dump=1\n");
	assert_contains(text, "name=vm0\n");
	assert_contains(text, "acpi_tables=true\n");
	/* The defaults come first, in the order they were set. */
	assert_true(strncmp(text, "memory.size=1G\nacpi_tables=true\nx86.strictmsr=true\n", 50) ==
	            0);
	/* Every line is key=value. */
	for (const char *p = text; *p != '\0';) {
		const char *nl = strchr(p, '\n');

		assert_non_null(nl);
		assert_true(memchr(p, '=', (size_t)(nl - p)) != NULL);
		p = nl + 1;
	}

	/* config.dump=false runs normally; a bad boolean is an error. */
	assert_int_equal(RUN("-o", "config.dump=false", "-s", "31,lpc", "-l", "com1,stdio", "vm0"),
	                 CLI_ERROR);
	assert_contains(err, "nothing to boot");
	expect_error(RUN("-o", "config.dump=perhaps", "vm0"), "config.dump");
	/* The name is still required. */
	expect_error(RUN("-o", "config.dump=1"), "VM name");
}

static void test_help(void **state)
{
	(void)state;
	assert_int_equal(RUN("-h"), CLI_DONE);
	assert_contains(unit_capture_text(&out), "Usage: khyve");
	/* -h wins over what would be errors later on the line. */
	assert_int_equal(RUN("-c", "2", "-h", "-Z"), CLI_DONE);
	/* cli_usage on its own. */
	struct unit_capture c;
	assert_non_null(unit_capture_open(&c));
	cli_usage(c.f);
	assert_contains(unit_capture_text(&c), "-o key=value");
	unit_capture_close(&c);
}

static void test_long_help(void **state)
{
	(void)state;
	assert_int_equal(RUN("--help"), CLI_DONE);
	assert_contains(unit_capture_text(&out), "Usage: khyve");
	expect_error(RUN("--halp", "vm"), "unknown option --halp");
}

/* Every registered device has a one-line description. */
static void expect_one_line_each(const char *text, const char *const *names)
{
	for (; *names != NULL; names++)
		assert_contains(text, *names);
	for (const char *line = text; *line != '\0'; line = strchr(line, '\n') + 1) {
		const char *nl = strchr(line, '\n');

		assert_non_null(nl);
		/* "  NAME  DESCRIPTION": a description after the name column. */
		assert_true(nl - line > 20);
	}
}

static void test_device_lists(void **state)
{
	static const char *const emulations[] = {"virtio-blk", "virtio-net", "nvme",     "ahci-cd",
	                                         "hostbridge", "lpc",        "piix4-pm", NULL};
	static const char *const lpc_devices[] = {"comN",     "bootrom",    "fwcfg",
	                                          "debugcon", "pc-testdev", NULL};

	(void)state;
	assert_int_equal(RUN("-s", "help"), CLI_DONE);
	expect_one_line_each(unit_capture_text(&out), emulations);
	unit_capture_close(&out);
	assert_non_null(unit_capture_open(&out));
	assert_int_equal(RUN("-c", "2", "-l", "help"), CLI_DONE);
	expect_one_line_each(unit_capture_text(&out), lpc_devices);
	/* Built-in devices are not -l options. */
	assert_null(strstr(unit_capture_text(&out), "atkbdc"));
}

static void test_device_usage(void **state)
{
	(void)state;
	assert_int_equal(RUN("-s", "4,virtio-blk,help"), CLI_DONE);
	assert_contains(unit_capture_text(&out), "num-queues=N");
	assert_contains(unit_capture_text(&out), "rom=FILE");
	assert_int_equal(RUN("-s", "nvme,help"), CLI_DONE);
	assert_contains(unit_capture_text(&out), "ram=MiB");
	assert_int_equal(RUN("-s", "0:5:1,virtio-net,tap0,help"), CLI_DONE);
	assert_contains(unit_capture_text(&out), "mac=MAC");
	assert_int_equal(RUN("-l", "COM2,help"), CLI_DONE);
	assert_contains(unit_capture_text(&out), "tcp=IP:PORT");
	assert_int_equal(RUN("-l", "fwcfg,help"), CLI_DONE);
	assert_contains(unit_capture_text(&out), "none");
	expect_error(RUN("-s", "virtio-blkk,help"), "unknown PCI emulation 'virtio-blkk'");
	expect_error(RUN("-l", "com5,help"), "unknown LPC device 'com5'");
	expect_error(RUN("-l", "atkbdc,help"), "unknown LPC device 'atkbdc'");
	/* "help" as a device option only counts at the end. */
	expect_error(RUN("-s", "help,virtio-blk"), "bad PCI slot");
}

static void test_boot_validation(void **state)
{
	char k[600], m[600], i[600], b[600];

	(void)state;
	/* The missing kernel is named in the error. */
	snprintf(m, sizeof(m), "linux.kernel=%s/no-such-bzImage", tmpdir);
	expect_error(RUN("-o", m, "vm"), "no-such-bzImage");
	expect_error(RUN("-o", m, "vm"), "linux.kernel");

	/* Both ways to boot. */
	snprintf(b, sizeof(b), "bootrom,%s", rom);
	expect_error(RUN("-o", KERNEL_OPT(k), "-l", b, "vm"), "linux.kernel");
	expect_error(RUN("-o", KERNEL_OPT(k), "-l", b, "vm"), "bootrom");

	/* An initrd: readable is fine, missing is named. */
	snprintf(i, sizeof(i), "linux.initrd=%s", initrd);
	assert_int_equal(RUN("-o", KERNEL_OPT(k), "-o", i, "vm"), CLI_RUN);
	snprintf(i, sizeof(i), "linux.initrd=%s/gone.img", tmpdir);
	expect_error(RUN("-o", KERNEL_OPT(k), "-o", i, "vm"), "gone.img");

	/* initrd / cmdline without a kernel. */
	snprintf(i, sizeof(i), "linux.initrd=%s", initrd);
	expect_error(RUN("-l", b, "-o", i, "vm"), "linux.kernel");
	expect_error(RUN("-l", b, "-o", "linux.cmdline=quiet", "vm"), "linux.kernel");

	/* A missing ROM is named. */
	snprintf(b, sizeof(b), "bootrom,%s/no-rom.fd", tmpdir);
	expect_error(RUN("-l", b, "vm"), "no-rom.fd");

	/* The kernel path may come from an expansion. */
	snprintf(m, sizeof(m), "user.dir=%s", tmpdir);
	assert_int_equal(RUN("-o", m, "-o", "linux.kernel=%(user.dir)/bzImage", "vm"), CLI_RUN);
}

static void test_validate_direct(void **state)
{
	(void)state;
	/* cli_validate on a tree built by hand. */
	config_reset();
	assert_int_equal(config_set("memory.size", "1G"), 0);
	assert_int_equal(config_set("linux.kernel", kernel), 0);
	assert_int_equal(cli_validate(err, sizeof(err)), 0);
	config_unset("memory.size");
	assert_int_equal(cli_validate(err, sizeof(err)), -1);
	assert_contains(err, "memory");
	assert_int_equal(config_set("memory.size", "1G"), 0);
	assert_int_equal(config_set("cpus", "0"), 0);
	assert_int_equal(cli_validate(err, sizeof(err)), -1);
	assert_contains(err, "cpus");
	assert_int_equal(config_set("cpus", "1"), 0);
	/* A tiny error buffer: truncated, terminated, not overrun. */
	char tiny[6];
	config_unset("linux.kernel");
	memset(tiny, 'Z', sizeof(tiny));
	assert_int_equal(cli_validate(tiny, sizeof(tiny)), -1);
	assert_int_equal(tiny[sizeof(tiny) - 1], '\0');
}

/* Misspelled or unknown keys: one line naming the key (and the device). */
static void test_unknown_keys(void **state)
{
	char k[600], b[600], *typo;

	(void)state;
	expect_error(RUN("-o", "memory.szie=1G", "-o", KERNEL_OPT(k), "vm"), "'memory.szie'");
	expect_error(RUN("-o", "sandbox.usr=x", "-o", KERNEL_OPT(k), "vm"), "'sandbox.usr'");
	expect_error(RUN("-o", "x86.strictio=maybe", "-o", KERNEL_OPT(k), "vm"), "x86.strictio");
	expect_error(RUN("-s", "4,virtio-blk,/d.img,readonly", "-o", KERNEL_OPT(k), "vm"),
	             "virtio-blk in slot 4:0: unknown option 'readonly'");
	expect_error(RUN("-s", "4,virtio-net,tap0,macc=1", "-o", KERNEL_OPT(k), "vm"), "'macc'");
	expect_error(RUN("-s", "4,ahci,hd:/d.img,ro,serial=1", "-o", KERNEL_OPT(k), "vm"),
	             "'port.0.serial'");
	expect_error(RUN("-s", "0,hostbridge,vendr=1", "-o", KERNEL_OPT(k), "vm"), "'vendr'");
	expect_error(RUN("-s", "5,virtio-rnd,x", "-o", KERNEL_OPT(k), "vm"), "virtio-rnd");
	expect_error(RUN("-s", "31,lpc", "-o", "pci.0.31.0.foo=1", "-o", KERNEL_OPT(k), "vm"),
	             "'foo'");
	expect_error(RUN("-o", "pci.0.40.0.device=lpc", "-o", KERNEL_OPT(k), "vm"), "pci.0.40");
	expect_error(RUN("-o", "pci.0.4.0.device=nosuch", "-o", KERNEL_OPT(k), "vm"), "nosuch");
	expect_error(RUN("-o", "lpc.com1.pth=stdio", "-o", KERNEL_OPT(k), "vm"), "'lpc.com1.pth'");
	expect_error(RUN("-o", "lpc.com5.path=stdio", "-o", KERNEL_OPT(k), "vm"), "lpc.com5.path");
	/* Known keys of each kind pass. */
	assert_int_equal(RUN("-s", "4,virtio-blk,/d.img,ro,nocache,ser=S,num-queues=1,poll_us=0",
	                     "-s", "5,ahci,hd:/d.img,ro,ser=1,cd:/c.iso", "-s", "6,xhci,tablet",
	                     "-s", "0,hostbridge,vendor=1,devid=2", "-s",
	                     "7,virtio-net,tap0,mtu=1500", "-s", "8,nvme,ram=1,maxq=2", "-s",
	                     "9,virtio-rnd,rom=/r.rom", "-o", "sandbox.user=khyve", "-o",
	                     KERNEL_OPT(k), "vm"),
	                 CLI_RUN);
	/* config.unknown=warn: warnings instead (still one error for bad values). */
	assert_int_equal(RUN("-o", "config.unknown=warn", "-o", "memory.szie=1G", "-s",
	                     "4,virtio-blk,/d.img,readonly", "-o", KERNEL_OPT(k), "vm"),
	                 CLI_RUN);
	expect_error(RUN("-o", "config.unknown=maybe", "-o", KERNEL_OPT(k), "vm"),
	             "config.unknown");
	/* -k files are checked as -o. */
	typo = unit_write_text(tmpdir, "typo.conf", "memroy.size=1G\n");
	assert_non_null(typo);
	snprintf(b, sizeof(b), "%s", typo);
	free(typo);
	expect_error(RUN("-k", b, "-o", KERNEL_OPT(k), "vm"), "'memroy.size'");
}

static void test_validation(void **state)
{
	char k[600], r[600];

	(void)state;
	expect_error(RUN("-U", "not-a-uuid", "-o", KERNEL_OPT(k), "vm"), "not-a-uuid");
	expect_error(RUN("-U", "12345678123412341234123456789abc", "-o", KERNEL_OPT(k), "vm"),
	             "UUID");
	expect_error(RUN("-U", "12345678-1234-1234-1234-123456789abg", "-o", KERNEL_OPT(k), "vm"),
	             "UUID");
	expect_error(RUN("-c", "", "-o", KERNEL_OPT(k), "vm"), "-c");
	expect_error(RUN("-c", "2,", "-o", KERNEL_OPT(k), "vm"), "-c");
	expect_error(RUN("-c", "2,,cores=1", "-o", KERNEL_OPT(k), "vm"), "-c");
	expect_error(RUN("-c", "2,3", "-o", KERNEL_OPT(k), "vm"), "'3'");
	expect_error(RUN("-c", "cpus=2,cpus=3", "-o", KERNEL_OPT(k), "vm"), "twice");
	/* -l twice, or -l com1 without the PCI-ISA bridge. */
	expect_error(RUN("-l", "com1,stdio", "-l", "com1,/dev/null", "-o", KERNEL_OPT(k), "vm"),
	             "twice");
	expect_error(RUN("-l", "fwcfg", "-l", "fwcfg,none", "-o", KERNEL_OPT(k), "vm"), "twice");
	expect_error(RUN("-l", "com1,stdio", "-o", KERNEL_OPT(k), "vm"), "-s 31,lpc");
	expect_error(RUN("-l", "pc-testdev", "-o", KERNEL_OPT(k), "vm"), "-s 31,lpc");
	expect_error(RUN("-o", "lpc.com2.path=stdio", "-o", KERNEL_OPT(k), "vm"), "com2");
	assert_int_equal(RUN("-o", "lpc.pc-testdev=false", "-o", KERNEL_OPT(k), "vm"), CLI_RUN);
	/* A boot ROM is 64 KiB to 16 MiB. */
	snprintf(r, sizeof(r), "bootrom,%s", tinyrom);
	expect_error(RUN("-l", r, "vm"), "64 KiB to 16 MiB");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_defaults),
	    T(test_flags),
	    T(test_reset_between_calls),
	    T(test_cpus),
	    T(test_cpus_errors),
	    T(test_memory),
	    T(test_lpc),
	    T(test_options),
	    T(test_usage_errors),
	    T(test_name_conflict_has_message),
	    T(test_flag_error_message),
	    T(test_pci_slots),
	    T(test_dump),
	    T(test_help),
	    T(test_long_help),
	    T(test_device_lists),
	    T(test_device_usage),
	    T(test_boot_validation),
	    T(test_validate_direct),
	    T(test_unknown_keys),
	    T(test_validation),
	};
#undef T

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
