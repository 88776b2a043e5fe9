/* Unit tests for the host KVM probe (src/lib/hostkvm.h) and the boots that
 * need hardware KVM (cli_boot_needs_hardware_kvm in src/cmd/cli.h). */
#include "unit.h"

#include <stdlib.h>

#include "cmd/cli.h"
#include "lib/config.h"
#include "lib/hostkvm.h"

static char *tmpdir;

static int group_setup(void **state)
{
	(void)state;
	tmpdir = unit_mkdtemp();
	return tmpdir != NULL ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	unit_rmtree(tmpdir);
	free(tmpdir);
	unsetenv("KHYVE_HOST_KVM");
	unsetenv("KHYVE_KVM_DEV");
	config_reset();
	return 0;
}

static void test_override(void **state)
{
	enum host_kvm kind;

	(void)state;
	setenv("KHYVE_HOST_KVM", "pvm", 1);
	assert_int_equal(host_kvm_probe(&kind), 0);
	assert_int_equal(kind, HOST_KVM_PVM);
	setenv("KHYVE_HOST_KVM", "none", 1);
	assert_int_equal(host_kvm_probe(&kind), 0);
	assert_int_equal(kind, HOST_KVM_NONE);
	setenv("KHYVE_HOST_KVM", "hardware", 1);
	assert_int_equal(host_kvm_probe(&kind), 0);
	assert_int_equal(kind, HOST_KVM_HARDWARE);
	setenv("KHYVE_HOST_KVM", "Hardware", 1);
	assert_int_equal(host_kvm_probe(&kind), -1);
	unsetenv("KHYVE_HOST_KVM");
}

static void test_missing_device(void **state)
{
	char dev[600];
	enum host_kvm kind;

	(void)state;
	snprintf(dev, sizeof(dev), "%s/no-kvm", tmpdir);
	setenv("KHYVE_KVM_DEV", dev, 1);
	assert_string_equal(host_kvm_device(), dev);
	assert_int_equal(host_kvm_probe(&kind), 0);
	assert_int_equal(kind, HOST_KVM_NONE);
	setenv("KHYVE_KVM_DEV", "", 1);
	assert_string_equal(host_kvm_device(), "/dev/kvm");
	unsetenv("KHYVE_KVM_DEV");
}

static void test_message(void **state)
{
	char line[256], tiny[24];

	(void)state;
	host_kvm_message(line, sizeof(line), HOST_KVM_PVM, "a Linux bzImage");
	assert_contains(line, "this host's KVM cannot run a Linux bzImage (PVM");
	assert_contains(line, "); see README: nested lab");
	assert_null(strchr(line, '\n'));
	host_kvm_message(line, sizeof(line), HOST_KVM_NONE, "guests");
	assert_contains(line, "no KVM device");
	host_kvm_message(tiny, sizeof(tiny), HOST_KVM_PVM, "a Linux bzImage");
	assert_int_equal(strlen(tiny), sizeof(tiny) - 1);
}

/* A file of `size` bytes starting with `head`. */
static char *file_of(const char *name, const char *head, long size)
{
	char *path = unit_write_text(tmpdir, name, head);

	assert_non_null(path);
	assert_int_equal(truncate(path, size), 0);
	return path;
}

static void test_boot_kinds(void **state)
{
	char *bz = file_of("bzImage", "MZ not an ELF", 4096);
	char *elf = file_of("vmlinux", "\177ELF", 4096);
	char *seabios = file_of("bios-256k.bin", "", 256 << 10);
	char *ovmf = file_of("OVMF_CODE.fd", "", 2 << 20);
	char what[256];

	(void)state;
	config_reset();
	config_set("linux.kernel", bz);
	assert_true(cli_boot_needs_hardware_kvm(what, sizeof(what)));
	assert_contains(what, "a Linux bzImage");
	config_set("linux.kernel", elf);
	assert_false(cli_boot_needs_hardware_kvm(what, sizeof(what)));
	config_reset();
	config_set("lpc.bootrom", seabios);
	assert_false(cli_boot_needs_hardware_kvm(what, sizeof(what)));
	config_set("lpc.bootrom", ovmf);
	assert_true(cli_boot_needs_hardware_kvm(what, sizeof(what)));
	assert_contains(what, "larger than 1 MiB");
	/* An unreadable file is the loader's to report. */
	config_reset();
	config_set("linux.kernel", "/nonexistent/bzImage");
	assert_false(cli_boot_needs_hardware_kvm(what, sizeof(what)));
	config_reset();
	free(bz);
	free(elf);
	free(seabios);
	free(ovmf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_override),
	    cmocka_unit_test(test_missing_device),
	    cmocka_unit_test(test_message),
	    cmocka_unit_test(test_boot_kinds),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
