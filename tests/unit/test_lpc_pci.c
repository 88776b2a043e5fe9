/*
 * Unit tests for -l and -s parsing: lpc_parse_option (src/dev/lpc.h),
 * pci_parse_slot_option and pci_parse_legacy_config (src/bus/pci_slot.h).
 */
#include "unit.h"

#include "bus/pci_slot.h"
#include "dev/lpc.h"
#include "lib/config.h"

static char err[512];

static int reset(void **state)
{
	(void)state;
	config_reset();
	memset(err, 0, sizeof(err));
	return 0;
}

static int lpc(const char *opt)
{
	memset(err, 'Z', sizeof(err) - 1);
	err[sizeof(err) - 1] = '\0';
	return lpc_parse_option(opt, err, sizeof(err));
}

static void expect_lpc_error(const char *opt, const char *needle)
{
	if (lpc(opt) != -1)
		fail_msg("-l '%s' was accepted", opt);
	assert_contains(err, needle);
	assert_true(err[0] != 'Z');
	assert_null(strchr(err, '\n'));
}

static void test_lpc_com(void **state)
{
	(void)state;
	assert_int_equal(lpc("com1,stdio"), 0);
	assert_string_equal(config_get("lpc.com1.path"), "stdio");
	assert_int_equal(lpc("com2,/dev/ttyS0"), 0);
	assert_string_equal(config_get("lpc.com2.path"), "/dev/ttyS0");
	assert_int_equal(lpc("com3,tcp=127.0.0.1:1234"), 0);
	assert_string_equal(config_get("lpc.com3.path"), "tcp=127.0.0.1:1234");
	assert_int_equal(lpc("com4,stdio"), 0);
	assert_string_equal(config_get("lpc.com4.path"), "stdio");
	/* A second -l com1 would replace the first: refused. */
	expect_lpc_error("com1,/dev/null", "twice");
	assert_string_equal(config_get("lpc.com1.path"), "stdio");
	/* Everything after the first comma is the back end. */
	config_reset();
	assert_int_equal(lpc("com1,/dev/odd,name"), 0);
	assert_string_equal(config_get("lpc.com1.path"), "/dev/odd,name");

	expect_lpc_error("com5,stdio", "com5");
	expect_lpc_error("com5", "com5");
	expect_lpc_error("com0,stdio", "com0");
	expect_lpc_error("com12,stdio", "com12");
	expect_lpc_error("com,stdio", "com");
	expect_lpc_error("comX,stdio", "comx");
	/* Device names are case-insensitive, as in bhyve. */
	config_reset();
	assert_int_equal(lpc("COM2,stdio"), 0);
	assert_string_equal(config_get("lpc.com2.path"), "stdio");
	expect_lpc_error("com1", "com1");  /* needs a back end */
	expect_lpc_error("com1,", "com1"); /* empty back end */
	assert_null(config_get("lpc.com5.path"));
	assert_null(config_find_node("lpc.com0"));
}

static void test_lpc_bootrom(void **state)
{
	(void)state;
	assert_int_equal(lpc("bootrom,/usr/share/ovmf/OVMF.fd"), 0);
	assert_string_equal(config_get("lpc.bootrom"), "/usr/share/ovmf/OVMF.fd");
	assert_null(config_get("lpc.bootvars"));
	expect_lpc_error("bootrom,a,b", "twice");
	config_reset();
	assert_int_equal(lpc("bootrom,a,b"), 0);
	assert_string_equal(config_get("lpc.bootrom"), "a");
	assert_string_equal(config_get("lpc.bootvars"), "b");
	/* The vars file may itself hold commas. */
	config_reset();
	assert_int_equal(lpc("bootrom,rom.fd,vars,1.fd"), 0);
	assert_string_equal(config_get("lpc.bootrom"), "rom.fd");
	assert_string_equal(config_get("lpc.bootvars"), "vars,1.fd");

	expect_lpc_error("bootrom", "bootrom");
	expect_lpc_error("bootrom,", "bootrom");

	/* A ROM path longer than the parser's buffer is refused, not cut. */
	char *longopt = malloc(5000 + 32);
	assert_non_null(longopt);
	strcpy(longopt, "bootrom,");
	memset(longopt + 8, 'r', 5000);
	strcpy(longopt + 8 + 5000, ",vars");
	config_reset();
	int rc = lpc(longopt);
	bool set = config_get("lpc.bootrom") != NULL;
	size_t len = set ? strlen(config_get("lpc.bootrom")) : 0;
	free(longopt);
	if (rc == 0)
		assert_int_equal(len, 5000);
	else
		assert_false(set && len != 5000);
}

static void test_lpc_testdev(void **state)
{
	(void)state;
	assert_int_equal(lpc("pc-testdev"), 0);
	assert_string_equal(config_get("lpc.pc-testdev"), "true");
	assert_null(config_get("lpc.pc-testdev-debugcon"));
	expect_lpc_error("pc-testdev", "twice");
	config_reset();
	assert_int_equal(lpc("pc-testdev,debugcon=/tmp/out.log"), 0);
	assert_string_equal(config_get("lpc.pc-testdev-debugcon"), "/tmp/out.log");
	config_reset();
	assert_int_equal(lpc("pc-testdev,"), 0);
	config_reset();

	expect_lpc_error("pc-testdev,debugcon=", "debugcon");
	expect_lpc_error("pc-testdev,verbose", "verbose");
}

static void test_lpc_malformed(void **state)
{
	(void)state;
	expect_lpc_error("", "-l");
	expect_lpc_error(",stdio", "-l");
	expect_lpc_error("nosuchdevice", "nosuchdevice");
	expect_lpc_error("nosuchdevice,x", "nosuchdevice");
	expect_lpc_error("hostbridge", "hostbridge");
	/* A device name too long for the parser. */
	char name[100];
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	expect_lpc_error(name, "-l");
	/* Nothing was recorded by any of these. */
	struct unit_capture c;
	assert_non_null(unit_capture_open(&c));
	config_dump(c.f);
	assert_string_equal(unit_capture_text(&c), "");
	unit_capture_close(&c);
	/* A tiny error buffer is truncated, not overrun. */
	char tiny[4];
	memset(tiny, 'Z', sizeof(tiny));
	assert_int_equal(lpc_parse_option("com9,stdio", tiny, sizeof(tiny)), -1);
	assert_int_equal(tiny[3], '\0');
}

/* ---- -s ---- */

static int slot(const char *opt)
{
	memset(err, 'Z', sizeof(err) - 1);
	err[sizeof(err) - 1] = '\0';
	return pci_parse_slot_option(opt, err, sizeof(err));
}

/* With no emulation registered, a well-formed slot gets as far as the
 * emulation lookup; a bad one is refused before it. */
static void expect_slot_ok_emul_unknown(const char *opt, const char *emul)
{
	if (slot(opt) != -1)
		fail_msg("-s '%s' accepted an unknown emulation", opt);
	if (strstr(err, "unknown PCI emulation") == NULL)
		fail_msg("-s '%s': slot refused: %s", opt, err);
	assert_contains(err, emul);
}

static void expect_slot_bad(const char *opt)
{
	if (slot(opt) != -1)
		fail_msg("-s '%s' was accepted", opt);
	assert_true(err[0] != 'Z');
	if (strstr(err, "unknown PCI emulation") != NULL)
		fail_msg("-s '%s': the bad slot got through: %s", opt, err);
}

static void test_slot_forms(void **state)
{
	(void)state;
	expect_slot_ok_emul_unknown("3,no-such-emul", "no-such-emul");
	expect_slot_ok_emul_unknown("3:1,no-such-emul", "no-such-emul");
	expect_slot_ok_emul_unknown("0:3:1,no-such-emul", "no-such-emul");
	expect_slot_ok_emul_unknown("0,no-such-emul", "no-such-emul");
	expect_slot_ok_emul_unknown("31:7,no-such-emul", "no-such-emul");
	expect_slot_ok_emul_unknown("255:31:7,no-such-emul", "no-such-emul");
	expect_slot_ok_emul_unknown("0x1f,no-such-emul", "no-such-emul");
	expect_slot_ok_emul_unknown("3,other,conf=1", "other");
	assert_null(config_find_node("pci"));
}

static void test_slot_bad(void **state)
{
	static const char *const bad[] = {
	    "32,x",
	    "3:8,x",
	    "a,x",
	    "1:2:3:4,x",
	    "-1,x",
	    "3:-1,x",
	    "256:0:0,x",
	    "3a,x",
	    "3 ,x",
	    " 3,x",
	    "0:32:0,x",
	    "0:0:8,x",
	    "99999999999,x",
	    "1.5,x",
	    "0123456789012345678901234567890123456789,x", /* longer than the slot buffer */
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		expect_slot_bad(bad[i]);
	/* No comma at all, or no emulation. */
	assert_int_equal(slot("3"), -1);
	assert_contains(err, "3");
	assert_int_equal(slot("3,"), -1);
	assert_contains(err, "emulation");
	assert_int_equal(slot("3,,conf"), -1);
	assert_contains(err, "emulation");
	assert_int_equal(slot(""), -1);
	assert_null(config_find_node("pci"));
}

/*
 * Regression: parse_bdf() in src/bus/pci_slot.c reads v[n - 1] and v[0] before it
 * checks n == 0, so a slot with no number in it ("-s ,x", "-s :,x",
 * "-s ::,x") reads v[UINT_MAX] (n is unsigned) and an uninitialised v[0]:
 * an out-of-bounds stack read that UBSan aborts on.  The result is
 * discarded (n == 0 returns -1), so the normal build happens to work.  Fix:
 * return -1 right after the strtok_r loop when n == 0, before indexing v[].
 */
static const char *empty_bdf_body(void)
{
	static const char *const opts[] = {",x", ":,x", "::,x", ":::,x"};
	char buf[256];

	for (size_t i = 0; i < ARRAY_LEN(opts); i++) {
		buf[0] = '\0';
		ISO_CHECK(pci_parse_slot_option(opts[i], buf, sizeof(buf)) == -1);
		ISO_CHECK(strstr(buf, "bad PCI slot") != NULL);
	}
	return NULL;
}

static void test_slot_without_numbers(void **state)
{
	(void)state;
	unit_run_isolated(empty_bdf_body); /* UBSan aborts: run in a child */
}

static void test_unknown_emulation(void **state)
{
	char longemul[200];

	(void)state;
	assert_null(pci_devemu_find("no-such-emul"));
	assert_null(pci_devemu_find(""));
	assert_int_equal(slot("4,virtio-bogus"), -1);
	assert_contains(err, "virtio-bogus");
	assert_null(config_get("pci.0.4.0.device"));
	/* An over-long emulation name is refused. */
	memset(longemul, 'e', sizeof(longemul));
	memcpy(longemul, "4,", 2);
	longemul[sizeof(longemul) - 1] = '\0';
	assert_int_equal(slot(longemul), -1);
	assert_true(err[0] != 'Z');
}

/* When an emulation is registered (e.g. hostbridge), the -s path records
 * pci.B.S.F.device and refuses duplicates. */
static void test_registered_emulation(void **state)
{
	static const char *const names[] = {"hostbridge", "lpc",        "virtio-blk",
	                                    "virtio-net", "virtio-rnd", "virtio-console"};
	const char *name = NULL;
	char opt[64];

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(names) && name == NULL; i++)
		if (pci_devemu_find(names[i]) != NULL)
			name = names[i];
	if (name == NULL) {
		print_message("no PCI emulation registered yet: skipping\n");
		skip();
	}
	snprintf(opt, sizeof(opt), "0:5:0,%s", name);
	assert_int_equal(slot(opt), 0);
	assert_string_equal(config_get("pci.0.5.0.device"), name);
	snprintf(opt, sizeof(opt), "5,%s", name);
	assert_int_equal(slot(opt), -1);
	assert_contains(err, "twice");
	snprintf(opt, sizeof(opt), "6:2,%s", name);
	assert_int_equal(slot(opt), 0);
	assert_string_equal(config_get("pci.0.6.2.device"), name);
}

static void test_legacy_config(void **state)
{
	struct config_node *n;

	(void)state;
	n = config_create_node("pci.0.3.0");
	assert_non_null(n);
	assert_int_equal(pci_parse_legacy_config(n, "a=b,c", err, sizeof(err)), 0);
	assert_string_equal(config_get("pci.0.3.0.a"), "b");
	assert_string_equal(config_get("pci.0.3.0.c"), "true");

	/* Empty and NULL are nothing. */
	assert_int_equal(pci_parse_legacy_config(n, "", err, sizeof(err)), 0);
	assert_int_equal(pci_parse_legacy_config(n, NULL, err, sizeof(err)), 0);
	/* Empty items are skipped; '=' splits once; later wins. */
	assert_int_equal(pci_parse_legacy_config(n, ",x=1,,y,,z=a=b,x=2,", err, sizeof(err)), 0);
	assert_string_equal(config_get("pci.0.3.0.x"), "2");
	assert_string_equal(config_get("pci.0.3.0.y"), "true");
	assert_string_equal(config_get("pci.0.3.0.z"), "a=b");
	/* An empty value. */
	assert_int_equal(pci_parse_legacy_config(n, "path=", err, sizeof(err)), 0);
	assert_string_equal(config_get("pci.0.3.0.path"), "");
	/* Dotted keys make nodes below the function. */
	assert_int_equal(pci_parse_legacy_config(n, "opt.ro=yes", err, sizeof(err)), 0);
	assert_string_equal(config_get("pci.0.3.0.opt.ro"), "yes");

	/* Bad keys name themselves. */
	memset(err, 0, sizeof(err));
	assert_int_equal(pci_parse_legacy_config(n, "ok=1,bad!key=2", err, sizeof(err)), -1);
	assert_contains(err, "bad!key");
	assert_string_equal(config_get("pci.0.3.0.ok"), "1");
	memset(err, 0, sizeof(err));
	assert_int_equal(pci_parse_legacy_config(n, "=v", err, sizeof(err)), -1);
	assert_true(err[0] != '\0');
	/* A value cannot grow children. */
	memset(err, 0, sizeof(err));
	assert_int_equal(pci_parse_legacy_config(n, "a.sub=1", err, sizeof(err)), -1);
	assert_contains(err, "a.sub");
	assert_string_equal(config_get("pci.0.3.0.a"), "b");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, reset)
	const struct CMUnitTest tests[] = {
	    T(test_lpc_com),
	    T(test_lpc_bootrom),
	    T(test_lpc_testdev),
	    T(test_lpc_malformed),
	    T(test_slot_forms),
	    T(test_slot_bad),
	    T(test_slot_without_numbers),
	    T(test_unknown_emulation),
	    T(test_registered_emulation),
	    T(test_legacy_config),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, reset);
}
