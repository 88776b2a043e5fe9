/* Unit tests for vm-bhyve settings -> khyve command line (src/vm/khyvecmd.h). */
#include "unit.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "vm/khyvecmd.h"
#include "vm/net.h"

#define KHYVE "/usr/sbin/khyve"
/* What every command ends with before bhyve_options and the name. */
#define API " -o api.socket=@/guest1/khyve.sock"

/* A scratch datastore: @/guest1/ with disks and kernels, firmware in @/. */
static char *dir; /* the scratch folder, '@' in expected lines */
static char guest_dir[PATH_MAX];
static char err[512];
static char *line;     /* argv_to_shell() of the last success */
static char *warnings; /* what the last build() wrote on stderr */
static struct argv out;

static const char *const guest_files[] = {"disk0.img", "disk1.img", "disk2.img", "vmlinuz",
                                          "initrd.img"};
static const char *const top_files[] = {
    "bios.bin", "OVMF_CODE.fd", "install.iso",          "cloud.img",
    "grub.img", "raw.img",      ".config/BHYVE_UEFI.fd"};

static int make_file(const char *folder, const char *name)
{
	char *p = unit_write_text(folder, name, "x");

	free(p);
	return p ? 0 : -1;
}

static int group_setup(void **state)
{
	char config[PATH_MAX];

	(void)state;
	if ((dir = unit_mkdtemp()) == NULL)
		return -1;
	snprintf(guest_dir, sizeof(guest_dir), "%s/guest1", dir);
	snprintf(config, sizeof(config), "%s/.config", dir);
	if (mkdir(guest_dir, 0755) < 0 || mkdir(config, 0755) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_LEN(guest_files); i++)
		if (make_file(guest_dir, guest_files[i]) < 0)
			return -1;
	for (size_t i = 0; i < ARRAY_LEN(top_files); i++)
		if (make_file(dir, top_files[i]) < 0)
			return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	unit_rmtree(dir);
	free(dir);
	return 0;
}

static int test_teardown(void **state)
{
	(void)state;
	free(line);
	free(warnings);
	line = warnings = NULL;
	argv_free(&out);
	return 0;
}

/* Read back what fd 2 got while `fd` stood in for it. */
static char *read_capture(int fd)
{
	char *text = calloc(1, 4096);
	ssize_t n;

	if (text && lseek(fd, 0, SEEK_SET) == 0 && (n = read(fd, text, 4095)) > 0)
		text[n] = '\0';
	return text;
}

/*
 * Build guest1's command line from `conf_text` (its guest1.conf) with system
 * settings `sys_text`.  Returns vm_khyve_command()'s value; sets `line` on
 * success, `err` on failure and `warnings` either way.
 */
static int build_sys(const char *sys_text, const char *conf_text, const struct vm_start_opts *opts)
{
	struct vm_sys sys = {0};
	struct vm_guest g = {0};
	char capture[PATH_MAX];
	int fd, saved, rc;

	snprintf(sys.conf_path, sizeof(sys.conf_path), "/etc/khyve.conf");
	snprintf(sys.khyve, sizeof(sys.khyve), KHYVE);
	snprintf(sys.vm_dir, sizeof(sys.vm_dir), "%s", dir);
	snprintf(g.name, sizeof(g.name), "guest1");
	snprintf(g.datastore, sizeof(g.datastore), "default");
	snprintf(g.dir, sizeof(g.dir), "%s", guest_dir);
	assert_true(snprintf(g.conf_path, sizeof(g.conf_path), "%s/guest1.conf", guest_dir) <
	            (int)sizeof(g.conf_path));
	sys.conf = rcconf_parse(sys_text, "khyve.conf", err, sizeof(err));
	g.conf = rcconf_parse(conf_text, "guest1.conf", err, sizeof(err));
	assert_non_null(sys.conf);
	assert_non_null(g.conf);

	assert_true(snprintf(capture, sizeof(capture), "%s/stderr", dir) < (int)sizeof(capture));
	fd = open(capture, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	err[0] = '\0';
	argv_free(&out);
	rc = vm_khyve_command(&sys, &g, opts, &out, err, sizeof(err));
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	free(warnings);
	warnings = read_capture(fd);
	close(fd);

	free(line);
	line = rc == 0 ? argv_to_shell(&out) : NULL;
	if (rc == 0)
		assert_non_null(line);
	else
		assert_int_equal(out.n, 0); /* nothing left to free on error */
	rcconf_free(sys.conf);
	rcconf_free(g.conf);
	return rc;
}

/* System settings pointing at the scratch firmware files. */
static int build(const char *conf_text, const struct vm_start_opts *opts)
{
	char sys_text[3 * PATH_MAX];

	snprintf(sys_text, sizeof(sys_text),
	         "bios_firmware=\"%s/bios.bin\"\n"
	         "uefi_firmware=\"%s/OVMF_CODE.fd\"\n",
	         dir, dir);
	return build_sys(sys_text, conf_text, opts);
}

/* `fmt` with every '@' replaced by the scratch folder. */
static char *expand(const char *fmt)
{
	size_t len = strlen(fmt) + 1;
	char *s, *o;

	for (const char *p = fmt; *p; p++)
		len += *p == '@' ? strlen(dir) : 0;
	s = o = malloc(len);
	assert_non_null(s);
	for (const char *p = fmt; *p; p++)
		o = *p == '@' ? stpcpy(o, dir) : (*o = *p, o + 1);
	*o = '\0';
	return s;
}

#define assert_line(fmt)                                                                           \
	do {                                                                                       \
		char *want_ = expand(fmt);                                                         \
		assert_string_equal(line, want_);                                                  \
		free(want_);                                                                       \
	} while (0)

#define assert_has(fmt)                                                                            \
	do {                                                                                       \
		char *want_ = expand(fmt);                                                         \
		assert_contains(line, want_);                                                      \
		free(want_);                                                                       \
	} while (0)

#define assert_err(fmt)                                                                            \
	do {                                                                                       \
		char *want_ = expand(fmt);                                                         \
		assert_string_equal(err, want_);                                                   \
		free(want_);                                                                       \
	} while (0)

static const struct vm_taps taps = {.n = 3, .name = {"tap7", "tap8", "tap9"}};
static const struct vm_start_opts started = {.taps = &taps};

/* vm-bhyve's sample-templates/ubuntu.conf as it ships, with disk and GRUB image. */
static void test_vm_bhyve_ubuntu_template(void **state)
{
	char img[PATH_MAX];
	struct vm_start_opts opts = started;

	(void)state;
	snprintf(img, sizeof(img), "%s/grub.img", dir);
	opts.grub_image = img;
	assert_int_equal(build("loader=\"grub\"\n"
	                       "cpu=1\n"
	                       "memory=1024M\n"
	                       "network0_type=\"virtio-net\"\n"
	                       "network0_switch=\"public\"\n"
	                       "disk0_type=\"virtio-blk\"\n"
	                       "disk0_name=\"disk0.img\"\n",
	                       &opts),
	                 0);
	assert_line(KHYVE " -c cpus=1 -m 1024M -A -H -P -w -u -s 0,i440fx -s 2,ahci-cd,@/grub.img"
	                  " -s 4,virtio-blk,@/guest1/disk0.img -s 5,virtio-net,tap7 -s 31,lpc"
	                  " -l bootrom,@/bios.bin -l com1,pty=@/guest1/com1.pty" API " guest1");
	assert_string_equal(warnings, "");
}

/* vm-bhyve's sample-templates/debian.conf: GRUB settings, an ahci-hd disk. */
static void test_vm_bhyve_debian_template(void **state)
{
	char img[PATH_MAX];
	struct vm_start_opts opts = started;

	(void)state;
	snprintf(img, sizeof(img), "%s/grub.img", dir);
	opts.grub_image = img;
	assert_int_equal(build("loader=\"grub\"\n"
	                       "cpu=1\n"
	                       "memory=512M\n"
	                       "network0_type=\"virtio-net\"\n"
	                       "network0_switch=\"public\"\n"
	                       "disk0_type=\"ahci-hd\"\n"
	                       "disk0_name=\"disk0.img\"\n"
	                       "grub_run_partition=\"1\"\n"
	                       "grub_run_dir=\"/boot/grub\"\n",
	                       &opts),
	                 0);
	assert_line(KHYVE " -c cpus=1 -m 512M -A -H -P -w -u -s 0,i440fx -s 2,ahci-cd,@/grub.img"
	                  " -s 4,ahci-hd,@/guest1/disk0.img -s 5,virtio-net,tap7 -s 31,lpc"
	                  " -l bootrom,@/bios.bin -l com1,pty=@/guest1/com1.pty" API " guest1");
	assert_string_equal(warnings, "");
}

/* The example in vm-bhyve's README is a FreeBSD guest: a clear refusal. */
static void test_vm_bhyve_readme_example(void **state)
{
	(void)state;
	assert_int_equal(build("guest=\"freebsd\"\n"
	                       "loader=\"bhyveload\"\n"
	                       "cpu=1\n"
	                       "memory=256M\n"
	                       "disk0_type=\"virtio-blk\"\n"
	                       "disk0_name=\"disk0.img\"\n"
	                       "network0_type=\"virtio-net\"\n"
	                       "network0_switch=\"public\"\n",
	                       &started),
	                 -1);
	assert_string_equal(err, "guest1.conf: loader bhyveload boots FreeBSD only; "
	                         "use uefi, bios, grub or linux");
	assert_string_equal(warnings, "");
}

/* The new loader="bios" with the same devices, and the defaults. */
static void test_bios(void **state)
{
	(void)state;
	assert_int_equal(build("loader=\"bios\"\n"
	                       "cpu=2\n"
	                       "memory=2G\n"
	                       "network0_type=\"virtio-net\"\n"
	                       "network0_switch=\"public\"\n"
	                       "disk0_type=\"virtio-blk\"\n"
	                       "disk0_name=\"disk0.img\"\n",
	                       &started),
	                 0);
	assert_line(KHYVE " -c cpus=2 -m 2G -A -H -P -w -u -s 0,i440fx"
	                  " -s 4,virtio-blk,@/guest1/disk0.img -s 5,virtio-net,tap7 -s 31,lpc"
	                  " -l bootrom,@/bios.bin -l com1,pty=@/guest1/com1.pty" API " guest1");

	assert_int_equal(build("loader=bios\n", NULL), 0);
	assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -u -s 0,i440fx -s 31,lpc"
	                  " -l bootrom,@/bios.bin -l com1,pty=@/guest1/com1.pty" API " guest1");
}

/* Debian's SeaBIOS unless khyve.conf says otherwise; a clear hint when absent. */
static void test_default_firmware(void **state)
{
	(void)state;
	if (access("/usr/share/seabios/bios-256k.bin", F_OK) == 0) {
		assert_int_equal(build_sys("", "loader=bios\n", NULL), 0);
		assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -u -s 0,i440fx -s 31,lpc"
		                  " -l bootrom,/usr/share/seabios/bios-256k.bin"
		                  " -l com1,pty=@/guest1/com1.pty" API " guest1");
	}
	assert_int_equal(
	    build_sys("bios_firmware=\"/nonexistent/bios.bin\"\n", "loader=bios\n", NULL), -1);
	assert_string_equal(err, "firmware /nonexistent/bios.bin: No such file or directory "
	                         "(install seabios, or set bios_firmware in /etc/khyve.conf)");
	assert_int_equal(
	    build_sys("uefi_firmware=\"/nonexistent/code.fd\"\n", "loader=uefi\n", NULL), -1);
	assert_string_equal(err, "firmware /nonexistent/code.fd: No such file or directory "
	                         "(install ovmf, or set uefi_firmware in /etc/khyve.conf)");
}

/* `vm install`: the medium in install_slot, below the disks, so it boots first. */
static void test_install(void **state)
{
	char iso[PATH_MAX];
	struct vm_start_opts opts = {.install = true, .iso = iso, .taps = &taps};

	(void)state;
	snprintf(iso, sizeof(iso), "%s/install.iso", dir);
	assert_int_equal(build("loader=\"bios\"\n"
	                       "disk0_type=\"virtio-blk\"\n"
	                       "disk0_name=\"disk0.img\"\n",
	                       &opts),
	                 0);
	assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -u -s 0,i440fx -s 3,ahci-cd,@/install.iso"
	                  " -s 4,virtio-blk,@/guest1/disk0.img -s 31,lpc -l bootrom,@/bios.bin"
	                  " -l com1,pty=@/guest1/com1.pty" API " guest1");

	/* vm-bhyve: a medium that is not an .iso is a read-only disk. */
	snprintf(iso, sizeof(iso), "%s/raw.img", dir);
	assert_int_equal(build("loader=bios\ninstall_slot=6\n", &opts), 0);
	assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -u -s 0,i440fx -s 6,ahci-hd,@/raw.img,ro"
	                  " -s 31,lpc -l bootrom,@/bios.bin -l com1,pty=@/guest1/com1.pty" API
	                  " guest1");

	/* Without `install` the medium is not attached. */
	opts.install = false;
	assert_int_equal(build("loader=bios\n", &opts), 0);
	assert_not_contains(line, "raw.img");

	opts.install = true;
	snprintf(iso, sizeof(iso), "%s/missing.iso", dir);
	assert_int_equal(build("loader=bios\n", &opts), -1);
	assert_err("@/missing.iso: No such file or directory");
}

/* loader=grub: the GRUB image in slot 2, then the install medium, then the disks. */
static void test_grub(void **state)
{
	char iso[PATH_MAX], img[PATH_MAX];
	struct vm_start_opts opts = {.install = true, .iso = iso, .grub_image = img, .taps = &taps};

	(void)state;
	snprintf(iso, sizeof(iso), "%s/install.iso", dir);
	snprintf(img, sizeof(img), "%s/grub.img", dir);
	assert_int_equal(build("loader=\"grub\"\n"
	                       "grub_install0=\"linux /install/vmlinuz\"\n"
	                       "grub_install1=\"initrd /install/initrd.gz\"\n"
	                       "grub_run0=\"linux /vmlinuz root=/dev/vda1\"\n"
	                       "grub_run1=\"initrd /initrd.img\"\n"
	                       "disk0_type=\"virtio-blk\"\n"
	                       "disk0_name=\"disk0.img\"\n",
	                       &opts),
	                 0);
	assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -u -s 0,i440fx"
	                  " -s 2,ahci-cd,@/grub.img -s 3,ahci-cd,@/install.iso"
	                  " -s 4,virtio-blk,@/guest1/disk0.img -s 31,lpc -l bootrom,@/bios.bin"
	                  " -l com1,pty=@/guest1/com1.pty" API " guest1");
	assert_string_equal(warnings, "");

	opts.grub_image = NULL;
	assert_int_equal(build("loader=grub\n", &opts), -1);
	assert_string_equal(err, "loader grub: no GRUB boot image was made for this run");

	opts.grub_image = img;
	assert_int_equal(build("loader=grub\nstart_slot=2\n", &opts), -1);
	assert_string_equal(err, "guest1.conf: start_slot=\"2\": loader grub boots from slot 2; "
	                         "start the disks at 3 or above");
}

/* loader=linux: direct boot, paths relative to the guest's folder. */
static void test_linux(void **state)
{
	(void)state;
	assert_int_equal(build("loader=\"linux\"\n"
	                       "linux_kernel=\"vmlinuz\"\n"
	                       "linux_initrd=\"initrd.img\"\n"
	                       "linux_cmdline=\"console=ttyS0 root=/dev/vda1 ro\"\n"
	                       "disk0_type=\"virtio-blk\"\n"
	                       "disk0_name=\"disk0.img\"\n",
	                       &started),
	                 0);
	assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -u -s 0,hostbridge"
	                  " -s 4,virtio-blk,@/guest1/disk0.img -s 31,lpc"
	                  " -o linux.kernel=@/guest1/vmlinuz -o linux.initrd=@/guest1/initrd.img"
	                  " -o 'linux.cmdline=console=ttyS0 root=/dev/vda1 ro'"
	                  " -l com1,pty=@/guest1/com1.pty" API " guest1");

	/* Absolute paths stay; hostbridge amd and none as vm-bhyve has them. */
	{
		char conf[1024];

		snprintf(conf, sizeof(conf),
		         "loader=linux\nlinux_kernel=\"%s/guest1/vmlinuz\"\nhostbridge=amd\n", dir);
		assert_int_equal(build(conf, NULL), 0);
		assert_line(KHYVE
		            " -c cpus=1 -m 256M -A -H -P -w -u -s 0,amd_hostbridge -s 31,lpc"
		            " -o linux.kernel=@/guest1/vmlinuz -l com1,pty=@/guest1/com1.pty" API
		            " guest1");
	}
	assert_int_equal(build("loader=linux\nlinux_kernel=vmlinuz\nhostbridge=none\n", NULL), 0);
	assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -u -s 31,lpc"
	                  " -o linux.kernel=@/guest1/vmlinuz -l com1,pty=@/guest1/com1.pty" API
	                  " guest1");

	assert_int_equal(build("loader=linux\n", NULL), -1);
	assert_string_equal(err, "guest1.conf: loader=\"linux\" needs linux_kernel "
	                         "(and usually linux_initrd, linux_cmdline)");
	assert_int_equal(build("loader=linux\nlinux_kernel=bzImage\n", NULL), -1);
	assert_err("guest1.conf: linux_kernel=\"bzImage\": @/guest1/bzImage: "
	           "No such file or directory");
}

static void test_uefi(void **state)
{
	(void)state;
	assert_int_equal(build("loader=\"uefi\"\nuefi_vars=\"yes\"\n", NULL), 0);
	assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -u -s 0,i440fx -s 31,lpc -s 1:3,piix4-pm"
	                  " -l bootrom,@/OVMF_CODE.fd,@/guest1/uefi-vars.fd"
	                  " -l com1,pty=@/guest1/com1.pty" API " guest1");

	/* uefi-custom: bhyve's firmware from the datastore, bhyve's host bridge. */
	assert_int_equal(build("loader=\"uefi-custom\"\n", NULL), 0);
	assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -u -s 0,hostbridge -s 31,lpc"
	                  " -l bootrom,@/.config/BHYVE_UEFI.fd -l com1,pty=@/guest1/com1.pty" API
	                  " guest1");

	/* uefi-csm boots the BIOS way. */
	assert_int_equal(build("loader=\"uefi-csm\"\n", NULL), 0);
	assert_contains(line, "-l bootrom,");
	assert_contains(line, "/bios.bin ");
}

static void test_cpu_topology(void **state)
{
	(void)state;
	assert_int_equal(
	    build("loader=bios\ncpu=8\ncpu_sockets=2\ncpu_cores=2\ncpu_threads=2\n", NULL), 0);
	assert_contains(line, " -c cpus=8,sockets=2,cores=2,threads=2 ");
	assert_int_equal(build("loader=bios\ncpu=4\ncpu_cores=2\n", NULL), 0);
	assert_contains(line, " -c cpus=4,sockets=2,cores=2,threads=1 ");
	assert_int_equal(build("loader=bios\ncpu=4\ncpu_sockets=3\n", NULL), -1);
	assert_string_equal(
	    err, "guest1.conf: cpu=\"4\": 3 sockets x 1 cores x 1 threads is not 4 vCPUs");
}

/* Flags: wired memory, local time, UUID; bhyve_options last before the name. */
static void test_options(void **state)
{
	(void)state;
	assert_int_equal(build("loader=bios\n"
	                       "wired_memory=\"yes\"\n"
	                       "utctime=\"no\"\n"
	                       "uuid=\"0f6e1fd2-6bb4-11ee-8a5c-00a098000001\"\n"
	                       "bhyve_options=\"-x  -o\tboot_probe=true\"\n"
	                       "bhyve_options_dev=\"custom\"\n",
	                       NULL),
	                 0);
	assert_line(KHYVE
	            " -c cpus=1 -m 256M -A -H -P -w -S -U 0f6e1fd2-6bb4-11ee-8a5c-00a098000001"
	            " -s 0,i440fx -s 31,lpc -l bootrom,@/bios.bin -l com1,pty=@/guest1/com1.pty" API
	            " -x -o boot_probe=true guest1");
	/* Options that can name host files want bhyve_options_dev="custom" (paths.h). */
	assert_int_equal(build("loader=bios\nbhyve_options=\"-x -e\"\n", NULL), 0);
	assert_has(" -x -e guest1");
	assert_int_equal(
	    build("loader=bios\nbhyve_options=\"-x -s 9,virtio-blk,/etc/passwd\"\n", NULL), -1);
	assert_string_equal(err,
	                    "guest1.conf: bhyve_options=\"-x -s 9,virtio-blk,/etc/passwd\": -s "
	                    "can name a host file (set bhyve_options_dev=\"custom\" to pass it)");
	assert_int_equal(build("loader=bios\nbhyve_options=\"-wo lpc.bootrom=/x\"\n", NULL), -1);
	assert_contains(err, ": -o can name a host file");
	assert_int_equal(build("loader=bios\nbhyve_options=\"-c 2 -k\"\n", NULL), -1);
	assert_int_equal(build("loader=bios\nbhyve_options=-x\nbhyve_options_dev=zvol\n", NULL),
	                 -1);
	assert_contains(err, "bhyve_options_dev=\"zvol\": want file or custom");
	assert_int_equal(build("loader=bios\nuuid=\"not-a-uuid\"\n", NULL), -1);
	assert_string_equal(err, "guest1.conf: uuid=\"not-a-uuid\": not a UUID");
	/* khyve's -U wants the 8-4-4-4-12 form: refused here, not at start. */
	assert_int_equal(build("loader=bios\nuuid=\"0f6e1fd26bb411ee8a5c00a098000001\"\n", NULL),
	                 -1);
	assert_contains(err, "not a UUID");
}

/* Disk types, options, custom paths and vm-bhyve's AHCI controller grouping. */
static void test_disks(void **state)
{
	char conf[2048];

	(void)state;
	snprintf(conf, sizeof(conf),
	         "loader=uefi\n"
	         "disk0_type=\"nvme\"\n"
	         "disk0_name=\"disk0.img\"\n"
	         "disk0_opts=\"maxq=4,ser=ABC\"\n"
	         "disk1_type=\"ahci-hd\"\n"
	         "disk1_name=\"disk1.img\"\n"
	         "disk2_type=\"virtio-blk\"\n"
	         "disk2_dev=\"custom\"\n"
	         "disk2_name=\"%s/raw.img\"\n"
	         "disk3_type=\"ahci-cd\"\n"
	         "disk3_name=\"disk2.img\"\n"
	         "disk5_type=\"virtio-blk\"\n"
	         "disk5_name=\"after-the-gap.img\"\n",
	         dir);
	assert_int_equal(build(conf, NULL), 0);
	assert_line(KHYVE
	            " -c cpus=1 -m 256M -A -H -P -w -u -s 0,i440fx"
	            " -s 4,nvme,@/guest1/disk0.img,maxq=4,ser=ABC -s 5,ahci-hd,@/guest1/disk1.img"
	            " -s 6,virtio-blk,@/raw.img -s 7,ahci-cd,@/guest1/disk2.img -s 31,lpc"
	            " -s 1:3,piix4-pm -l bootrom,@/OVMF_CODE.fd -l com1,pty=@/guest1/com1.pty" API
	            " guest1");

	/* ahci_device_limit: ahci disks share one controller, after the others. */
	assert_int_equal(build("loader=bios\n"
	                       "ahci_device_limit=\"8\"\n"
	                       "disk0_type=\"ahci-hd\"\n"
	                       "disk0_name=\"disk0.img\"\n"
	                       "disk0_opts=\"nocache\"\n"
	                       "disk1_type=\"virtio-blk\"\n"
	                       "disk1_name=\"disk1.img\"\n"
	                       "disk2_type=\"ahci-cd\"\n"
	                       "disk2_name=\"disk2.img\"\n",
	                       NULL),
	                 0);
	assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -u -s 0,i440fx"
	                  " -s 4,virtio-blk,@/guest1/disk1.img"
	                  " -s 5,ahci,hd:@/guest1/disk0.img,nocache,cd:@/guest1/disk2.img -s 31,lpc"
	                  " -l bootrom,@/bios.bin -l com1,pty=@/guest1/com1.pty" API " guest1");

	/* A full controller is closed and the next one opened. */
	assert_int_equal(build("loader=bios\nahci_device_limit=2\nstart_slot=10\n"
	                       "disk0_type=ahci-hd\ndisk0_name=disk0.img\n"
	                       "disk1_type=ahci-hd\ndisk1_name=disk1.img\n"
	                       "disk2_type=ahci-hd\ndisk2_name=disk2.img\n",
	                       NULL),
	                 0);
	assert_has(" -s 10,ahci,hd:@/guest1/disk0.img,hd:@/guest1/disk1.img"
	           " -s 11,ahci,hd:@/guest1/disk2.img ");
}

/* Files the config names stay in the guest's folder unless it says "custom" (paths.h). */
static void test_host_paths(void **state)
{
	(void)state;
	assert_int_equal(build("loader=bios\ndisk0_type=nvme\ndisk0_name=\"../raw.img\"\n", NULL),
	                 -1);
	assert_err("guest1.conf: disk0_name=\"../raw.img\": '..' is not allowed"
	           " (set disk0_dev=\"custom\" to use a host path)");
	char *abs = expand("loader=bios\ndisk0_type=nvme\ndisk0_name=\"@/raw.img\"\n");
	assert_int_equal(build(abs, NULL), -1);
	free(abs);
	assert_contains(err, "disk0_name=");
	assert_contains(err, ": it is outside ");
	/* vm configure's check (settings only) refuses the same */
	struct vm_start_opts check = {.settings_only = true};
	assert_int_equal(build("loader=bios\ndisk0_type=nvme\ndisk0_name=a/../../x\n", &check), -1);
	assert_contains(err, "'..' is not allowed");
	assert_int_equal(build("loader=linux\nlinux_kernel=../bios.bin\n", NULL), -1);
	assert_err("guest1.conf: linux_kernel=\"../bios.bin\": '..' is not allowed"
	           " (set linux_kernel_dev=\"custom\" to use a host path)");
	assert_int_equal(
	    build("loader=linux\nlinux_kernel=vmlinuz\nlinux_initrd=../raw.img\n", NULL), -1);
	assert_contains(err, "linux_initrd=\"../raw.img\": '..' is not allowed");
	assert_int_equal(build("loader=linux\nlinux_kernel=../bios.bin\nlinux_kernel_dev=custom\n"
	                       "linux_initrd=../raw.img\nlinux_initrd_dev=custom\n",
	                       NULL),
	                 0);
	assert_has(" -o linux.kernel=@/guest1/../bios.bin -o linux.initrd=@/guest1/../raw.img ");
	assert_string_equal(warnings, ""); /* the _dev keys are known */
	assert_int_equal(build("loader=linux\nlinux_kernel=vmlinuz\nlinux_kernel_dev=zvol\n", NULL),
	                 -1);
	assert_err("guest1.conf: linux_kernel_dev=\"zvol\": want file or custom");
}

static void test_disk_errors(void **state)
{
	(void)state;
	assert_int_equal(
	    build("loader=bios\ndisk0_type=\"virtio-blk\"\ndisk0_name=\"nope.img\"\n", NULL), -1);
	assert_err(
	    "guest1.conf: disk0_name=\"nope.img\": @/guest1/nope.img: No such file or directory");
	assert_int_equal(
	    build("loader=bios\ndisk0_type=\"scsi\"\ndisk0_name=\"disk0.img\"\n", NULL), -1);
	assert_string_equal(err,
	                    "guest1.conf: disk0_type=\"scsi\": want virtio-blk, ahci-hd, ahci-cd "
	                    "or nvme");
	assert_int_equal(build("loader=bios\ndisk0_type=virtio-blk\ndisk0_name=disk0\n"
	                       "disk0_dev=\"sparse-zvol\"\n",
	                       NULL),
	                 -1);
	assert_string_equal(
	    err, "guest1.conf: disk0_dev=\"sparse-zvol\": ZFS volumes are not supported");
	assert_int_equal(
	    build("loader=bios\ndisk0_type=virtio-blk\ndisk0_name=\"a,b.img\"\n", NULL), -1);
	assert_err("guest1.conf: disk0_name=\"a,b.img\": khyve cannot use a path containing ',' "
	           "(@/guest1/a,b.img)");
	assert_int_equal(build("loader=bios\nahci_device_limit=\"lots\"\n", NULL), -1);
	assert_string_equal(err, "guest1.conf: ahci_device_limit=\"lots\": want a whole number "
	                         "from 1 to 32");
}

static void test_networks(void **state)
{
	char want[256], tap0[16], tap1[16];
	struct vm_guest g = {.name = "guest1"};

	(void)state;
	assert_int_equal(build("loader=bios\n"
	                       "network0_type=\"virtio-net\"\n"
	                       "network0_switch=\"public\"\n"
	                       "network0_mac=\"58:9c:fc:0a:bc:de\"\n"
	                       "network1_type=\"virtio-net\"\n"
	                       "network1_switch=\"private\"\n",
	                       &started),
	                 0);
	assert_contains(line, " -s 4,virtio-net,tap7,mac=58:9c:fc:0a:bc:de -s 5,virtio-net,tap8 ");

	/* A dry run predicts the taps' names. */
	assert_int_equal(
	    build("loader=bios\nnetwork0_type=virtio-net\nnetwork1_type=virtio-net\n", NULL), 0);
	vm_net_tap_name(&g, 0, tap0);
	vm_net_tap_name(&g, 1, tap1);
	snprintf(want, sizeof(want), " -s 4,virtio-net,%s -s 5,virtio-net,%s ", tap0, tap1);
	assert_contains(line, want);

	/* vm-bhyve's e1000 is khyve's e1000, with the same tap and MAC. */
	assert_int_equal(build("loader=bios\nnetwork0_type=\"e1000\"\n"
	                       "network0_mac=\"58:9c:fc:0a:bc:de\"\n",
	                       &started),
	                 0);
	assert_contains(line, " -s 4,e1000,tap7,mac=58:9c:fc:0a:bc:de ");
	assert_int_equal(build("loader=bios\nnetwork0_type=\"rtl8139\"\n", &started), -1);
	assert_string_equal(err,
	                    "guest1.conf: network0_type=\"rtl8139\": want virtio-net or e1000");
	assert_int_equal(
	    build("loader=bios\nnetwork0_type=virtio-net\nnetwork0_mac=\"58:9c\"\n", &started), -1);
	assert_string_equal(err, "guest1.conf: network0_mac=\"58:9c\": want a MAC address such as "
	                         "58:9c:fc:00:00:01");
	assert_int_equal(build("loader=bios\nnetwork0_type=virtio-net\nnetwork1_type=virtio-net\n"
	                       "network2_type=virtio-net\nnetwork3_type=virtio-net\n",
	                       &started),
	                 -1);
	assert_string_equal(err, "network3: no tap interface was made for it");
}

/* balloon="yes": a virtio-balloon after virtio-rnd; memory_merge="yes":
 * -o memory.merge=true. */
static void test_balloon_and_merge(void **state)
{
	(void)state;
	assert_int_equal(build("loader=bios\nvirt_random=\"yes\"\nballoon=\"yes\"\n"
	                       "memory_merge=\"yes\"\nstart_slot=\"7\"\n",
	                       &started),
	                 0);
	assert_has(" -o memory.merge=true ");
	assert_has(" -s 7,virtio-rnd -s 8,virtio-balloon -s 31,lpc ");
	assert_int_equal(build("loader=bios\nballoon=\"no\"\n", &started), 0);
	assert_null(strstr(line, "virtio-balloon"));
	assert_null(strstr(line, "memory.merge"));
}

/* virtio-rnd after the NICs; slots run out at 30. */
static void test_slots(void **state)
{
	char conf[4096];
	size_t len;

	(void)state;
	assert_int_equal(build("loader=bios\nvirt_random=\"yes\"\nstart_slot=\"7\"\n"
	                       "disk0_type=virtio-blk\ndisk0_name=disk0.img\n"
	                       "network0_type=virtio-net\n",
	                       &started),
	                 0);
	assert_has(" -s 7,virtio-blk,@/guest1/disk0.img -s 8,virtio-net,tap7"
	           " -s 9,virtio-rnd -s 31,lpc ");

	len = (size_t)snprintf(conf, sizeof(conf), "loader=bios\n");
	for (int n = 0; n < 28; n++)
		len += (size_t)snprintf(conf + len, sizeof(conf) - len,
		                        "network%d_type=virtio-net\n", n);
	assert_int_equal(build(conf, NULL), -1);
	assert_string_equal(err,
	                    "guest1.conf: too many devices: khyve has PCI slots up to 30 for them");

	assert_int_equal(build("loader=bios\nstart_slot=31\n", NULL), -1);
	assert_string_equal(err,
	                    "guest1.conf: start_slot=\"31\": want a whole number from 1 to 30");
}

static void test_comports(void **state)
{
	struct vm_start_opts fg = {.foreground = true};

	(void)state;
	assert_int_equal(build("loader=bios\ncomports=\"com1 com2\"\n", NULL), 0);
	assert_has(" -l com1,pty=@/guest1/com1.pty -l com2,pty=@/guest1/com2.pty" API " guest1");
	assert_int_equal(build("loader=bios\ncomports=\"com2 com1\"\n", &fg), 0);
	assert_has(" -l com2,stdio -l com1,pty=@/guest1/com1.pty" API " guest1");
	assert_int_equal(build("loader=bios\n", &fg), 0);
	assert_has(" -l com1,stdio" API " guest1");
	assert_int_equal(build("loader=bios\ncomports=\"com1 com5\"\n", NULL), -1);
	assert_string_equal(err,
	                    "guest1.conf: comports=\"com1 com5\": want com1 to com4, each once, "
	                    "separated by blanks");
}

/* One line naming the key and its value for what khyve cannot use. */
static void test_bad_values(void **state)
{
	(void)state;
	assert_int_equal(build("loader=bios\ncpu=\"two\"\n", NULL), -1);
	assert_string_equal(err, "guest1.conf: cpu=\"two\": want a whole number from 1 to 288");
	assert_int_equal(build("loader=bios\ncpu=0\n", NULL), -1);
	assert_string_equal(err, "guest1.conf: cpu=\"0\": want a whole number from 1 to 288");
	assert_int_equal(build("loader=bios\nmemory=\"lots\"\n", NULL), -1);
	assert_string_equal(err, "guest1.conf: memory=\"lots\": want a size such as 512M or 2G");
	assert_int_equal(build("cpu=1\n", NULL), -1);
	assert_string_equal(err, "guest1.conf: loader is not set (use uefi, bios, grub or linux)");
	assert_int_equal(build("loader=\"pxe\"\n", NULL), -1);
	assert_string_equal(err, "guest1.conf: loader=\"pxe\": want uefi, uefi-custom, bios, grub "
	                         "or linux");
	assert_string_equal(warnings, "");
}

/* Unknown keys and missing features: a warning each, never an error. */
static void test_warnings(void **state)
{
	(void)state;
	assert_int_equal(build("loader=bios\n"
	                       "favourite_colour=\"blue\"\n"
	                       "graphics=\"no\"\n"
	                       "graphics_res=\"1024x768\"\n"
	                       "xhci_mouse=\"no\"\n"
	                       "passthru0=\"2/0/0\"\n"
	                       "passthru1=\"3/0/0\"\n"
	                       "disk0_size=\"20G\"\n"
	                       "priority=\"10\"\n"
	                       "on_fault=\"restart\"\n"
	                       "loader_timeout=\"3\"\n"
	                       "network0_device=\"\"\n"
	                       "network_type=\"virtio-net\"\n",
	                       NULL),
	                 0);
	assert_string_equal(warnings,
	                    "vm: warning: guest1.conf: unknown setting favourite_colour ignored\n"
	                    "vm: warning: guest1.conf: unknown setting network_type ignored\n");
	/* passthruN is supported (issue 16): each in a slot, memory wired. */
	assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -S -u -s 0,i440fx"
	                  " -s 4:0,passthru,2/0/0 -s 5:0,passthru,3/0/0 -s 31,lpc"
	                  " -l bootrom,@/bios.bin -l com1,pty=@/guest1/com1.pty" API " guest1");
}

/* graphics: fbuf in slot 29, the tablet in 30, whatever else the guest has. */
static void test_graphics(void **state)
{
	struct vm_vnc vnc = {0};
	struct vm_start_opts opts = {.taps = &taps, .vnc_port = 5903, .vnc = &vnc};

	(void)state;
	assert_int_equal(build("loader=bios\ngraphics=yes\nnetwork0_type=virtio-net\n", &opts), 0);
	assert_line(KHYVE " -c cpus=1 -m 256M -A -H -P -w -u -s 0,i440fx -s 4,virtio-net,tap7"
	                  " -s 29,fbuf,tcp=127.0.0.1:5903,w=1024,h=768 -s 30,xhci,tablet -s 31,lpc"
	                  " -l bootrom,@/bios.bin -l com1,pty=@/guest1/com1.pty" API " guest1");
	assert_string_equal(vnc.addr, "127.0.0.1:5903");
	assert_int_equal(vnc.port, 5903);
	assert_false(vnc.wait);
	assert_string_equal(warnings, "");

	/* The caller's port (a restart) wins over graphics_port; every option. */
	assert_int_equal(build("loader=bios\ngraphics=on\ngraphics_port=6000\n"
	                       "graphics_listen=\"::\"\ngraphics_res=800x600\n"
	                       "graphics_vga=io\nvnc_password=8chars!!\ngraphics_wait=yes\n"
	                       "xhci_mouse=no\n",
	                       &opts),
	                 0);
	assert_has(" -s '29,fbuf,tcp=[::]:5903,w=800,h=600,vga=io,password=8chars!!,wait'"
	           " -s 31,lpc ");
	assert_string_equal(vnc.addr, "[::]:5903");
	assert_true(vnc.wait);
	opts.vnc_port = 0;
	assert_int_equal(build("loader=bios\ngraphics=yes\ngraphics_port=6000\n", &opts), 0);
	assert_has(" -s 29,fbuf,tcp=127.0.0.1:6000,w=1024,h=768 -s 30,xhci,tablet ");

	/* The slots are skipped by disks and NICs from start_slot on. */
	opts.vnc_port = 5900;
	assert_int_equal(build("loader=bios\ngraphics=yes\nstart_slot=28\n"
	                       "network0_type=virtio-net\nnetwork1_type=virtio-net\n",
	                       &opts),
	                 -1);
	assert_string_equal(err, "guest1.conf: too many devices: khyve has PCI slots up to 30 "
	                         "for them");
	/* A tablet without graphics, as vm-bhyve. */
	assert_int_equal(build("loader=bios\nxhci_mouse=yes\n", &opts), 0);
	assert_has(" -s 30,xhci,tablet -s 31,lpc ");
	assert_false(strstr(line, "fbuf"));
}

/* graphics_wait=auto (the default): only `vm install` waits. */
static void test_graphics_wait(void **state)
{
	char iso[PATH_MAX];
	struct vm_vnc vnc = {0};
	struct vm_start_opts opts = {.install = true, .iso = iso, .vnc_port = 5900, .vnc = &vnc};

	(void)state;
	snprintf(iso, sizeof(iso), "%s/install.iso", dir);
	assert_int_equal(build("loader=bios\ngraphics=yes\n", &opts), 0);
	assert_has(" -s 3,ahci-cd,@/install.iso -s 29,fbuf,tcp=127.0.0.1:5900,w=1024,h=768,wait ");
	assert_true(vnc.wait);
	assert_int_equal(build("loader=bios\ngraphics=yes\ngraphics_wait=no\n", &opts), 0);
	assert_false(strstr(line, "wait"));
	assert_false(vnc.wait);
	assert_int_equal(build("loader=bios\ngraphics=yes\ninstall_slot=29\n", &opts), -1);
	assert_string_equal(err, "guest1.conf: install_slot=\"29\": slots 29 and 30 hold the "
	                         "graphics console and its tablet");
}

/* Bad graphics values: one line naming the key. */
static void test_graphics_errors(void **state)
{
	static const struct {
		const char *conf, *err;
	} cases[] = {
	    {"graphics=maybe", "graphics=\"maybe\": want yes or no"},
	    {"xhci_mouse=2", "xhci_mouse=\"2\": want yes or no"},
	    {"graphics_res=1024x767",
	     "graphics_res=\"1024x767\": want WIDTHxHEIGHT from 640x480 to 3840x2160, each a "
	     "multiple of 8"},
	    {"graphics_res=632x480",
	     "graphics_res=\"632x480\": want WIDTHxHEIGHT from 640x480 to 3840x2160, each a "
	     "multiple of 8"},
	    {"graphics_res=3848x2160",
	     "graphics_res=\"3848x2160\": want WIDTHxHEIGHT from 640x480 to 3840x2160, each a "
	     "multiple of 8"},
	    {"graphics_res=1024x768x32",
	     "graphics_res=\"1024x768x32\": want WIDTHxHEIGHT from 640x480 to 3840x2160, each a "
	     "multiple of 8"},
	    {"graphics_port=0", "graphics_port=\"0\": want a whole number from 1 to 65535"},
	    {"graphics_listen=localhost",
	     "graphics_listen=\"localhost\": want an IP address such as 127.0.0.1, 0.0.0.0 or ::1"},
	    {"graphics_wait=sometimes", "graphics_wait=\"sometimes\": want yes, no or auto"},
	    {"graphics_vga=yes", "graphics_vga=\"yes\": want io, on or off"},
	    {"vnc_password=toolongpw",
	     "vnc_password: at most 8 characters (VNC authentication uses no more)"},
	    {"vnc_password=\"a,b\"",
	     "vnc_password: want printable characters without blanks or commas"},
	};
	struct vm_start_opts opts = {.vnc_port = 5900};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		char conf[128], want[256];

		snprintf(conf, sizeof(conf), "loader=bios\n%s\ngraphics=yes\n", cases[i].conf);
		snprintf(want, sizeof(want), "guest1.conf: %s", cases[i].err);
		assert_int_equal(build(conf, &opts), -1);
		assert_string_equal(err, want);
	}
}

/* Every template in share/templates maps cleanly (run from the repository root). */
static void test_templates(void **state)
{
	static const char *const names[] = {
	    "default", "bios", "linux", "linux-grub", "debian", "alpine", "linux-uefi-graphics",
	    "windows"};
	char img[PATH_MAX];
	struct vm_start_opts opts = started;

	opts.vnc_port = 5900; /* no search: it depends on the host */
	(void)state;
	if (access("share/templates/default.conf", F_OK) != 0)
		skip();
	snprintf(img, sizeof(img), "%s/grub.img", dir);
	opts.grub_image = img;
	for (size_t i = 0; i < ARRAY_LEN(names); i++) {
		char path[128], *text;
		FILE *f;
		long size;

		snprintf(path, sizeof(path), "share/templates/%s.conf", names[i]);
		f = fopen(path, "r");
		assert_non_null(f);
		fseek(f, 0, SEEK_END);
		size = ftell(f);
		rewind(f);
		text = calloc(1, (size_t)size + 1);
		assert_non_null(text);
		assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
		fclose(f);
		if (build(text, &opts) != 0)
			fail_msg("%s: %s", path, err);
		assert_string_equal(warnings, "");
		free(text);
	}
	/* windows.conf, the last: its disks share the controller in slot 4;
	 * its TPM on the swtpm the supervisor starts in the guest's folder. */
	assert_line(KHYVE " -c cpus=2 -m 2G -A -H -P -w -s 0,i440fx -s 4,ahci,hd:@/guest1/disk0.img"
	                  " -s 5,virtio-net,tap7 -s 29,fbuf,tcp=127.0.0.1:5900,w=1024,h=768"
	                  " -s 30,xhci,tablet -s 31,lpc -s 1:3,piix4-pm"
	                  " -l bootrom,@/OVMF_CODE.fd,@/guest1/uefi-vars.fd"
	                  " -l com1,pty=@/guest1/com1.pty -l "
	                  "tpm,swtpm,@/guest1/tpm/swtpm.sock,ctrl=@/guest1/tpm/swtpm.ctrl" API
	                  " guest1");
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, test_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_vm_bhyve_ubuntu_template),
	    T(test_vm_bhyve_debian_template),
	    T(test_vm_bhyve_readme_example),
	    T(test_bios),
	    T(test_default_firmware),
	    T(test_install),
	    T(test_grub),
	    T(test_linux),
	    T(test_uefi),
	    T(test_cpu_topology),
	    T(test_options),
	    T(test_disks),
	    T(test_disk_errors),
	    T(test_host_paths),
	    T(test_networks),
	    T(test_slots),
	    T(test_balloon_and_merge),
	    T(test_comports),
	    T(test_bad_values),
	    T(test_warnings),
	    T(test_graphics),
	    T(test_graphics_wait),
	    T(test_graphics_errors),
	    T(test_templates),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
