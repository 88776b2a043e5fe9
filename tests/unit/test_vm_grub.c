/* Unit tests for loader="grub" (src/vm/grub.c): the GRUB script made from
 * vm-bhyve's grub_* keys, and the boot CD built with grub-mkimage and
 * xorriso (skipped when the host lacks them).  Booting it is
 * tests/lab/vm-grub. */
#include "unit.h"

#include <sys/stat.h>

#include "vm/khyvecmd.h"

/* A guest "g" with `conf` (rc.conf text) in `dir` (may be NULL). */
static struct vm_guest *guest_new(const char *conf, const char *dir)
{
	char err[256] = "";
	struct vm_guest *g = calloc(1, sizeof(*g));

	assert_non_null(g);
	snprintf(g->name, sizeof(g->name), "g");
	snprintf(g->dir, sizeof(g->dir), "%s", dir ? dir : "/nonexistent");
	g->conf = rcconf_parse(conf, "g.conf", err, sizeof(err));
	if (g->conf == NULL)
		fail_msg("%s", err);
	return g;
}

static void guest_free(struct vm_guest *g)
{
	rcconf_free(g->conf);
	free(g);
}

/* The script for `conf`; fails the test with the error when there is none. */
static char *script(const char *conf, bool install, const char *iso)
{
	char err[256] = "";
	struct vm_guest *g = guest_new(conf, NULL);
	char *s = vm_grub_script(g, install, iso, err, sizeof(err));

	if (s == NULL)
		fail_msg("vm_grub_script: %s", err);
	guest_free(g);
	return s;
}

static void expect_error(const char *conf, bool install, const char *iso, const char *want)
{
	char err[256] = "";
	struct vm_guest *g = guest_new(conf, NULL);
	char *s = vm_grub_script(g, install, iso, err, sizeof(err));

	assert_null(s);
	assert_contains(err, want);
	assert_null(strchr(err, '\n'));
	guest_free(g);
}

#define DISK0 "disk0_type=\"virtio-blk\"\ndisk0_name=\"disk0.img\"\n"

/* vm-bhyve's alpine template: one menu entry, root hd0,1, "boot" dropped. */
static void test_run_lines(void **state)
{
	(void)state;
	char *s = script("loader=\"grub\"\n" DISK0
	                 "grub_run0=\"linux /boot/vmlinuz-vanilla root=/dev/vda3 modules=ext4\"\n"
	                 "grub_run1=\"initrd /boot/initramfs-vanilla\"\n"
	                 "grub_run2=\"boot\"\n"
	                 "grub_run4=\"echo after a gap: ignored\"\n",
	                 false, NULL);
	assert_contains(s, "serial --unit=0 --speed=115200\nterminal_input serial\n"
	                   "terminal_output serial\n");
	assert_contains(s, "set timeout=3\nmenuentry 'g (bhyve run)' {\n\troot=hd0,1\n"
	                   "\tlinux /boot/vmlinuz-vanilla root=/dev/vda3 modules=ext4\n"
	                   "\tinitrd /boot/initramfs-vanilla\n}\n");
	assert_not_contains(s, "\tboot");
	assert_not_contains(s, "gap");
	assert_not_contains(s, "configfile");
	free(s);
}

/* No lines: the guest's own grub.cfg, as grub-bhyve -r hd0,1 -d DIR -g FILE. */
static void test_run_default(void **state)
{
	(void)state;
	char *s = script(DISK0, false, NULL);
	assert_contains(s, "set root=hd0,1\nconfigfile /boot/grub/grub.cfg\n");
	assert_not_contains(s, "menuentry");
	free(s);
	s = script(DISK0 "grub_run_partition=\"msdos2\"\ngrub_run_dir=\"grub/\"\n"
	                 "grub_run_file=\"grub.conf\"\n",
	           false, NULL);
	assert_contains(s, "set root=hd0,msdos2\nconfigfile /grub/grub.conf\n");
	free(s);
	/* vm-bhyve's gentoo template: the partition applies with lines too. */
	s = script(DISK0 "grub_run_partition=\"gpt2\"\ngrub_run0=\"set root=(hd0,gpt2)\"\n"
	                 "grub_run1=\"configfile /grub/grub.cfg\"\n",
	           false, NULL);
	assert_contains(s, "\troot=hd0,gpt2\n\tset root=(hd0,gpt2)\n\tconfigfile /grub/grub.cfg\n");
	free(s);
}

/* An .iso is the second CD: (cd0) is BIOS drive 0xE1 = GRUB's (hd97);
 * hard disk names stay. */
static void test_install_iso(void **state)
{
	(void)state;
	char *s = script(DISK0 "grub_install0=\"linux (cd0)/isolinux/vmlinuz root=cd0\"\n"
	                       "grub_install1=\"initrd /isolinux/initrd.img\"\n"
	                       "grub_install2=\"ls (cd0,1) (hd0) (hd0,msdos1) (hd7) (cd1)\"\n"
	                       "grub_install3=\"knetbsd -h -r cd0a /netbsd\"\n"
	                       "grub_install4=\"set root='cd0'\"\n"
	                       "grub_run0=\"not used\"\n",
	                 true, "/isos/x.ISO");
	assert_contains(s, "menuentry 'g (bhyve install)' {\n\troot=hd97\n");
	/* "root=cd0" inside the kernel's command line is a word start too:
	 * rewritten, as harmless as it is rare. */
	assert_contains(s, "\tlinux (hd97)/isolinux/vmlinuz root=hd97\n");
	assert_contains(s, "\tls (hd97,1) (hd0) (hd0,msdos1) (hd7) (cd1)\n");
	assert_contains(s, "\tknetbsd -h -r cd0a /netbsd\n");
	assert_contains(s, "\tset root='hd97'\n");
	assert_not_contains(s, "not used");
	free(s);
	s = script(DISK0, true, "/isos/x.iso");
	assert_contains(s, "set root=hd97\nconfigfile /boot/grub/grub.cfg\n");
	free(s);
}

/* A disk image as install medium is an ahci-hd in front of the disks:
 * it is hd0 and diskN becomes hd(N+1). */
static void test_install_disk_image(void **state)
{
	(void)state;
	char *s = script(DISK0 "disk1_type=\"nvme\"\ndisk1_name=\"d1.img\"\n"
	                       "grub_install0=\"ls (cd0) (hd0,msdos1) (hd1)\"\n"
	                       "grub_install1=\"set root=hd1,gpt2\"\n"
	                       "grub_install2=\"linux /vmlinuz root=/dev/vda3\"\n",
	                 true, "/imgs/installer.img");
	assert_contains(s, "\troot=hd0\n");
	assert_contains(s, "\tls (hd0) (hd1,msdos1) (hd2)\n");
	assert_contains(s, "\tset root=hd2,gpt2\n");
	assert_contains(s, "\tlinux /vmlinuz root=/dev/vda3\n");
	free(s);
	/* install_slot above the first disk's slot: disk0 stays in front. */
	s = script(DISK0 "disk1_type=\"nvme\"\ndisk1_name=\"d1.img\"\ninstall_slot=\"5\"\n"
	                 "grub_install0=\"ls (cd0) (hd0) (hd1)\"\n",
	           true, "/imgs/installer.img");
	assert_contains(s, "\tls (hd1) (hd0) (hd2)\n");
	free(s);
}

/* Disks of type ahci-cd are CD drives: after the boot CD (and install CD). */
static void test_cd_disks(void **state)
{
	(void)state;
	char *s = script(DISK0 "disk1_type=\"ahci-cd\"\ndisk1_name=\"/x/data.iso\"\n"
	                       "disk2_type=\"ahci-hd\"\ndisk2_name=\"d2.img\"\n"
	                       "grub_run0=\"ls (hd0) (hd1) (hd2)\"\n",
	                 false, NULL);
	assert_contains(s, "\tls (hd0) (hd97) (hd1)\n");
	free(s);
	s = script(DISK0 "disk1_type=\"ahci-cd\"\ndisk1_name=\"/x/data.iso\"\n"
	                 "grub_install0=\"ls (cd0) (hd1)\"\n",
	           true, "/x/inst.iso");
	assert_contains(s, "\tls (hd97) (hd98)\n");
	free(s);
}

/* loader_timeout, and the console on the first of comports. */
static void test_timeout_and_console(void **state)
{
	(void)state;
	char *s = script(DISK0 "loader_timeout=\"0\"\ncomports=\"com2 com1\"\n"
	                       "grub_run0=\"echo hi\"\n",
	                 false, NULL);
	assert_contains(s, "serial --unit=1 --speed=115200\n");
	assert_contains(s, "set timeout=0\n");
	free(s);
}

static void test_bad_values(void **state)
{
	(void)state;
	expect_error(DISK0 "grub_run_partition=\"1;halt\"\n", false, NULL, "grub_run_partition");
	expect_error(DISK0 "loader_timeout=\"soon\"\n", false, NULL, "loader_timeout: 'soon'");
	expect_error(DISK0 "loader_timeout=\"-1\"\n", false, NULL, "loader_timeout");
	expect_error(DISK0 "comports=\"com9\"\n", false, NULL, "comports: 'com9'");
	expect_error(DISK0 "grub_run_dir=\"/boot/gr ub\"\n", false, NULL, "grub_run_dir");
	expect_error(DISK0 "grub_run_file=\"a/b.cfg\"\n", false, NULL, "grub_run_file");
	expect_error(DISK0, true, NULL, "install medium");
	expect_error("loader=\"grub\"\n", false, NULL, "no disk0");
}

/* True when the file `path` contains `needle`. */
static bool file_contains(const char *path, const char *needle)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 16 << 20, len;
	char *buf = malloc(cap);
	bool found;

	assert_non_null(f);
	assert_non_null(buf);
	len = fread(buf, 1, cap, f);
	fclose(f);
	found = memmem(buf, len, needle, strlen(needle)) != NULL;
	free(buf);
	return found;
}

static bool have_tools(void)
{
	return access("/usr/lib/grub/i386-pc/cdboot.img", R_OK) == 0 &&
	       system("command -v grub-mkimage >/dev/null && command -v xorriso >/dev/null") == 0;
}

/* The CD: ISO 9660 with an El Torito record, the script on it, nothing
 * left behind in the guest's folder but the image. */
static void test_image(void **state)
{
	(void)state;
	char err[256] = "", out[PATH_MAX] = "", want[PATH_MAX + 32];
	char *dir = unit_mkdtemp(), *s, *cmd;
	struct vm_guest *g;
	struct stat st;
	FILE *f;
	char vd[2][8];

	if (!have_tools()) {
		fprintf(stderr, "skipped: no grub-pc-bin or xorriso\n");
		unit_rmtree(dir);
		free(dir);
		skip();
	}
	assert_non_null(dir);
	g = guest_new(DISK0 "grub_run0=\"echo KHYVE-UNIT-MARKER\"\n", dir);
	assert_int_equal(vm_grub_image(NULL, g, false, NULL, out, err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "%s/.grub-boot.iso", dir);
	assert_string_equal(out, want);
	assert_int_equal(stat(out, &st), 0);
	assert_true(st.st_size > 1 << 20);
	f = fopen(out, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 16 * 2048 + 1, SEEK_SET), 0);
	assert_int_equal(fread(vd[0], 1, 5, f), 5);
	assert_int_equal(fseek(f, 17 * 2048 + 7, SEEK_SET), 0);
	assert_int_equal(fread(vd[1], 1, 7, f), 7);
	fclose(f);
	assert_memory_equal(vd[0], "CD001", 5);
	assert_memory_equal(vd[1], "EL TORI", 7);
	s = vm_grub_script(g, false, NULL, err, sizeof(err));
	assert_non_null(s);
	assert_true(file_contains(out, s));
	free(s);
	/* A second run replaces the image; only it is left in the folder. */
	assert_int_equal(vm_grub_image(NULL, g, false, NULL, out, err, sizeof(err)), 0);
	assert_true(asprintf(&cmd, "test \"$(ls -A '%s')\" = .grub-boot.iso", dir) > 0);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	guest_free(g);
	unit_rmtree(dir);
	free(dir);
}

/* Errors leave nothing behind: a bad key before any tool runs, a missing
 * folder. */
static void test_image_errors(void **state)
{
	(void)state;
	char err[256] = "", out[PATH_MAX];
	char *dir = unit_mkdtemp(), *cmd;
	struct vm_guest *g;

	assert_non_null(dir);
	g = guest_new(DISK0 "loader_timeout=\"x\"\n", dir);
	assert_int_equal(vm_grub_image(NULL, g, false, NULL, out, err, sizeof(err)), -1);
	assert_contains(err, "loader_timeout");
	assert_true(asprintf(&cmd, "test -z \"$(ls -A '%s')\"", dir) > 0);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	guest_free(g);
	if (have_tools()) {
		char missing[PATH_MAX + 16];

		snprintf(missing, sizeof(missing), "%s/gone", dir);
		g = guest_new(DISK0, missing);
		err[0] = '\0';
		assert_int_equal(vm_grub_image(NULL, g, false, NULL, out, err, sizeof(err)), -1);
		assert_contains(err, "gone");
		guest_free(g);
	}
	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_run_lines),    cmocka_unit_test(test_run_default),
	    cmocka_unit_test(test_install_iso),  cmocka_unit_test(test_install_disk_image),
	    cmocka_unit_test(test_cd_disks),     cmocka_unit_test(test_timeout_and_console),
	    cmocka_unit_test(test_bad_values),   cmocka_unit_test(test_image),
	    cmocka_unit_test(test_image_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
