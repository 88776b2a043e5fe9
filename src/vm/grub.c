/*
 * loader="grub": vm-bhyve runs grub-bhyve, a GRUB that loads the guest's
 * kernel from the host side, with a device.map ((hd0) = disk0, (hd1) =
 * disk1, ..., (cd0) = the install medium) and a script made of the
 * grub_run0..N (or, for `vm install`, grub_install0..N) lines.  khyve has
 * no grub-bhyve, so we boot the real thing: Debian's GRUB for BIOS
 * (grub-pc-bin) under SeaBIOS, from a small CD made for each run.
 *
 * The image: an ISO 9660 CD (xorriso) with an El Torito no-emulation boot
 * image made by `grub-mkimage -O i386-pc-eltorito` (cdboot.img + GRUB's
 * kernel with the disk, file system and console modules), /boot/grub/
 * grub.cfg holding the script, and all of GRUB's i386-pc modules and
 * *.lst files under /boot/grub/i386-pc, as grub-mkrescue lays them out.
 * GRUB's prefix is (cd)/boot/grub, so `insmod X`, and commands and file
 * systems not built in, load GRUB's own modules of the same version
 * (grub-bhyve has every module built in; loading the guest's modules
 * could mix GRUB versions).
 *
 * Why a CD: the command builder attaches it as ahci-cd in slot 2, the
 * first entry of khyve's bootorder (slot order), so SeaBIOS boots it as
 * CD drive 0xE0.  SeaBIOS numbers hard disks in boot order from 0x80
 * and CD drives from 0xE0, so a boot CD leaves the hard disk numbers
 * alone: GRUB's (hd0) is BIOS drive 0x80, the guest's disk0, (hd1)
 * disk1, exactly grub-bhyve's device.map, and a guest's own grub.cfg
 * (`search`, `set root='hd0,msdos1'`) sees what it saw under grub-bhyve.
 * A hard-disk image in front of disk0 would become (hd0) and shift
 * every name.  (SeaBIOS could also boot a RAM floppy handed over as
 * fw_cfg file "floppyimg/NAME", but khyve cannot pass extra fw_cfg files
 * or a bootorder entry for it today, and the CD would still need the
 * trick below.)
 *
 * (cd0), the install medium: an .iso is a second ahci-cd (install_slot,
 * 3), BIOS drive 0xE1.  GRUB's biosdisk only calls the CD it booted from
 * "(cd)", but it opens any BIOS drive 0x80+N as (hdN) and takes the
 * sector size (2048) from int 13h AH=48h, which SeaBIOS answers for CD
 * drives too; so (cd0) becomes (hd97).  (GRUB's native ahci driver would
 * see the CD but switches the BIOS disks off, losing virtio-blk disks.)
 * An install medium that is not an .iso is a read-only ahci-hd in that
 * slot, in front of the disks: it is 0x80, and the disks move up by one.
 * Disks of type ahci-cd are CD drives, numbered after the install CD.
 * The lines are rewritten accordingly where they name a device: "(hdN",
 * "(cdN" followed by ')' or ',', and "root=hdN"/"root=cdN" at the start
 * of a word; when nothing moves (no install medium, or an .iso) only
 * (cd0) changes.  Other words ("-r cd0a" of knetbsd, "root=/dev/vda3")
 * are left alone.
 *
 * The script follows vm-bhyve: with lines, a menu with one entry
 * "NAME (bhyve run|install)", `timeout` = loader_timeout (default 3),
 * root = hd0,grub_run_partition (default 1) or, installing, cd0, the
 * lines, a "boot" line dropped (the entry boots at its end); without
 * lines, root as above and the configfile grub-bhyve would read:
 * (hd0,1)/boot/grub/grub.cfg (grub_run_dir, grub_run_file) or, installing,
 * (cd0)/boot/grub/grub.cfg; if that fails the GRUB prompt is left on the
 * console.  GRUB's terminal is the serial port of the first of comports
 * (com1 by default), at 115200 baud, and nothing else: with a serial
 * port SeaBIOS (etc/sercon-port) copies the BIOS screen to COM1 as well,
 * so adding "console" would print every line twice.
 */
#include "vm/khyvecmd.h"
#include "vm/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define GRUB_LIB_DIR  "/usr/lib/grub/i386-pc"
#define GRUB_IMAGE    ".grub-boot.iso"
#define GRUB_TMP      ".grub-boot.XXXXXX"
#define BIOS_CD_AS_HD 96 /* GRUB opens BIOS drive 0x80 + N as (hdN): 0xE0 is hd96 */
#define MAX_DISKS     256
#define MAX_LINES     1000

/* Built into the boot image: enough to read the prefix on the CD and, for
 * speed, what Linux guests use; everything else loads from the CD. */
static const char *const grub_modules[] = {
    "biosdisk",   "iso9660", "part_msdos", "part_gpt", "ext2",     "fat",   "normal",
    "configfile", "search",  "echo",       "serial",   "terminal", "linux", "test",
    "halt",       "ls",      "cat",        "gzio",     NULL,
};

/* Where grub-bhyve's names point in GRUB on khyve's BIOS. */
struct drive_map {
	unsigned ndisks;
	int disk[MAX_DISKS]; /* GRUB hd number of diskN */
	int cd0;             /* GRUB hd number of the install medium, -1 without */
};

/* An unsigned setting, or `def` when it is unset or not a number (the
 * command builder reports bad values). */
static unsigned setting_uint(const struct vm_guest *g, const char *key, unsigned def)
{
	const char *v = rcconf_get(g->conf, key);
	char *end;
	unsigned long n;

	if (v == NULL || !isdigit((unsigned char)*v))
		return def;
	errno = 0;
	n = strtoul(v, &end, 10);
	return errno || *end || n > 255 ? def : (unsigned)n;
}

/* vm-bhyve: an install medium ending in .iso is a CD, others a disk. */
static bool medium_is_cd(const char *path)
{
	size_t len = strlen(path);

	return len >= 4 && strcasecmp(path + len - 4, ".iso") == 0;
}

static bool disk_is_cd(const struct vm_guest *g, unsigned n)
{
	char key[32];
	const char *type;

	snprintf(key, sizeof(key), "disk%u_type", n);
	type = rcconf_get(g->conf, key);
	return type != NULL && strcmp(type, "ahci-cd") == 0;
}

/* disk0..N as vm-bhyve counts them: up to the first unset diskN_name. */
static unsigned count_disks(const struct vm_guest *g)
{
	char key[32];
	const char *name;
	unsigned n;

	for (n = 0; n < MAX_DISKS; n++) {
		snprintf(key, sizeof(key), "disk%u_name", n);
		name = rcconf_get(g->conf, key);
		if (name == NULL || *name == '\0')
			break;
	}
	return n;
}

/*
 * SeaBIOS numbers hard disks from 0x80 and CDs from 0xE0 in boot order,
 * which is slot order: the GRUB CD (slot 2, 0xE0), then the install
 * medium (install_slot) and the disks (start_slot up, one slot each,
 * skipping install_slot) interleaved by slot.
 */
static void plan_drives(const struct vm_guest *g, bool install, const char *iso,
                        struct drive_map *m)
{
	unsigned start = setting_uint(g, "start_slot", 4);
	unsigned islot = setting_uint(g, "install_slot", 3);
	unsigned hd = 0, cd = 1, before;
	bool medium = install && iso != NULL;

	m->ndisks = count_disks(g);
	m->cd0 = -1;
	before = islot > start ? islot - start : 0;
	if (before > m->ndisks)
		before = m->ndisks;
	for (unsigned i = 0; i <= m->ndisks; i++) {
		if (medium && i == before)
			m->cd0 = medium_is_cd(iso) ? BIOS_CD_AS_HD + (int)cd++ : (int)hd++;
		if (i == m->ndisks)
			break;
		m->disk[i] = disk_is_cd(g, i) ? BIOS_CD_AS_HD + (int)cd++ : (int)hd++;
	}
}

/* The GRUB drive for grub-bhyve's hdN ('h') or cdN ('c'); -1 when the
 * device.map had no such name (the text is then left as it is). */
static int map_drive(const struct drive_map *m, char kind, unsigned long n)
{
	if (kind == 'c')
		return n == 0 ? m->cd0 : -1;
	return n < m->ndisks ? m->disk[n] : -1;
}

/* True when a device name may start at line[p]: after '(' or after
 * "root=" (optionally quoted) at the start of a word. */
static bool device_position(const char *line, size_t p)
{
	size_t q = p;

	if (p > 0 && line[p - 1] == '(')
		return true;
	if (q > 0 && (line[q - 1] == '\'' || line[q - 1] == '"'))
		q--;
	if (q < 5 || strncmp(line + q - 5, "root=", 5) != 0)
		return false;
	return q == 5 || isspace((unsigned char)line[q - 6]);
}

/*
 * If line[p] starts "hdN"/"cdN" (at a device position, ended by ')', ',',
 * a quote, a blank or the end), write its GRUB name to `f` and return its
 * length; 0 when there is nothing to rewrite there.
 */
static size_t rewrite_device(FILE *f, const char *line, size_t p, const struct drive_map *m)
{
	const char *s = line + p;
	unsigned long n;
	char *end;
	int drive;

	if ((s[0] != 'h' && s[0] != 'c') || s[1] != 'd' || !isdigit((unsigned char)s[2]) ||
	    !device_position(line, p))
		return 0;
	errno = 0;
	n = strtoul(s + 2, &end, 10);
	if (errno || !(*end == ')' || *end == ',' || *end == '\'' || *end == '"' || *end == '\0' ||
	               isspace((unsigned char)*end)))
		return 0;
	drive = map_drive(m, s[0], n);
	if (drive < 0)
		return 0;
	fprintf(f, "hd%d", drive);
	return (size_t)(end - s);
}

/* Write `line` with grub-bhyve's device names turned into GRUB's. */
static void put_line(FILE *f, const char *line, const struct drive_map *m)
{
	for (size_t p = 0; line[p];) {
		size_t n = rewrite_device(f, line, p, m);

		if (n == 0)
			fputc(line[p++], f);
		else
			p += n;
	}
	fputc('\n', f);
}

/* grub_run_partition: a GRUB partition name such as 1, msdos1, gpt2. */
static bool partition_valid(const char *s)
{
	return *s && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789,") == strlen(s);
}

/* A path on the guest's disk for grub_run_dir/grub_run_file. */
static bool path_valid(const char *s)
{
	for (; *s; s++)
		if (!isgraph((unsigned char)*s) || strchr("\"'$\\;{}()", *s))
			return false;
	return true;
}

/* The serial unit of the first of comports (com1 = unit 0). */
static int serial_unit(const struct vm_guest *g, char *err, size_t errlen)
{
	const char *ports = rcconf_get_default(g->conf, "comports", "com1");

	ports += strspn(ports, " ");
	if (*ports == '\0')
		return 0;
	if (strncmp(ports, "com", 3) == 0 && ports[3] >= '1' && ports[3] <= '4' &&
	    (ports[4] == '\0' || strchr(" \t,", ports[4])))
		return ports[3] - '1';
	snprintf(err, errlen, "comports: '%s' is not a list of com1..com4",
	         rcconf_get(g->conf, "comports"));
	return -1;
}

/* The root device of the script: hd0,PART (run) or cd0 (install), mapped. */
static int script_root(const struct vm_guest *g, bool install, const struct drive_map *m,
                       char *root, size_t len, char *err, size_t errlen)
{
	const char *part = rcconf_get_default(g->conf, "grub_run_partition", "1");
	int drive;

	if (install) {
		if (m->cd0 < 0) {
			snprintf(err, errlen, "loader grub: installing needs an install medium");
			return -1;
		}
		snprintf(root, len, "hd%d", m->cd0);
		return 0;
	}
	if (*part == '\0')
		part = "1";
	if (!partition_valid(part)) {
		snprintf(err, errlen,
		         "grub_run_partition: '%s' is not a partition such as 1 or msdos1", part);
		return -1;
	}
	drive = map_drive(m, 'h', 0);
	if (drive < 0) {
		snprintf(err, errlen, "loader grub: the guest has no disk0 to boot from");
		return -1;
	}
	snprintf(root, len, "hd%d,%s", drive, part);
	return 0;
}

/* grub_run_dir/grub_run_file (run) or /boot/grub/grub.cfg (install). */
static int default_config(const struct vm_guest *g, bool install, char *path, size_t len, char *err,
                          size_t errlen)
{
	const char *dir = "/boot/grub", *file = "grub.cfg";

	if (!install) {
		dir = rcconf_get_default(g->conf, "grub_run_dir", dir);
		file = rcconf_get_default(g->conf, "grub_run_file", file);
		if (*dir == '\0')
			dir = "/boot/grub";
		if (*file == '\0')
			file = "grub.cfg";
	}
	if (!path_valid(dir) || !path_valid(file) || strchr(file, '/')) {
		snprintf(err, errlen,
		         "grub_run_dir/grub_run_file: '%s', '%s' are not a folder and "
		         "a file name",
		         dir, file);
		return -1;
	}
	snprintf(path, len, "%s%s%s%s", *dir == '/' ? "" : "/", dir,
	         dir[strlen(dir) - 1] == '/' ? "" : "/", file);
	return 0;
}

/* loader_timeout in seconds (vm-bhyve's default 3). */
static int loader_timeout(const struct vm_guest *g, char *err, size_t errlen)
{
	const char *v = rcconf_get_default(g->conf, "loader_timeout", "3");
	char *end;
	long n;

	if (*v == '\0')
		return 3;
	errno = 0;
	n = isdigit((unsigned char)*v) ? strtol(v, &end, 10) : -1;
	if (n < 0 || errno || *end || n > 86400) {
		snprintf(err, errlen, "loader_timeout: '%s' is not a number of seconds", v);
		return -1;
	}
	return (int)n;
}

/* The script with the grub_TYPE0..N lines, or with the default configfile
 * when there are none. */
static void put_script(FILE *f, const struct vm_guest *g, bool install, const struct drive_map *m,
                       const char *root, const char *config, int unit, int timeout)
{
	const char *type = install ? "install" : "run";
	char key[32];
	const char *line;
	unsigned i = 0;

	fprintf(f, "# made by vm for guest %s (loader=\"grub\", %s)\n", g->name, type);
	fprintf(f,
	        "serial --unit=%d --speed=115200\nterminal_input serial\n"
	        "terminal_output serial\n",
	        unit);
	snprintf(key, sizeof(key), "grub_%s0", type);
	line = rcconf_get(g->conf, key);
	if (line == NULL || *line == '\0') {
		fprintf(f, "set root=%s\nconfigfile %s\n", root, config);
		fprintf(f, "echo \"vm: no GRUB configuration at (%s)%s; this is GRUB's prompt\"\n",
		        root, config);
		return;
	}
	fprintf(f, "set timeout=%d\nmenuentry '%s (bhyve %s)' {\n\troot=%s\n", timeout, g->name,
	        type, root);
	while (line != NULL && *line != '\0' && i < MAX_LINES) {
		if (strcmp(line, "boot") != 0) {
			fputc('\t', f);
			put_line(f, line, m);
		}
		snprintf(key, sizeof(key), "grub_%s%u", type, ++i);
		line = rcconf_get(g->conf, key);
	}
	fputs("}\n", f);
}

char *vm_grub_script(const struct vm_guest *g, bool install, const char *iso, char *err,
                     size_t errlen)
{
	struct drive_map *m = calloc(1, sizeof(*m));
	char root[64], config[PATH_MAX];
	char *text = NULL;
	size_t len = 0;
	int unit, timeout;
	FILE *f;

	if (m == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	plan_drives(g, install, iso, m);
	if ((unit = serial_unit(g, err, errlen)) < 0 ||
	    (timeout = loader_timeout(g, err, errlen)) < 0 ||
	    script_root(g, install, m, root, sizeof(root), err, errlen) < 0 ||
	    default_config(g, install, config, sizeof(config), err, errlen) < 0) {
		free(m);
		return NULL;
	}
	f = open_memstream(&text, &len);
	if (f != NULL) {
		put_script(f, g, install, m, root, config, unit, timeout);
		if (fclose(f) != 0) {
			free(text);
			text = NULL;
		}
	}
	free(m);
	if (text == NULL)
		snprintf(err, errlen, "out of memory");
	return text;
}

/* ---- building the CD ---- */

/* Run argv in folder `cwd`, its output into `log`; 0 when it exits 0. */
static int run_tool(char *const argv[], const char *cwd, const char *log, char *err, size_t errlen)
{
	const struct vm_tool t = {
	    .argv = (const char *const *)argv, .cwd = cwd, .log = log, .what = "loader grub"};

	return vm_tool_run(&t, err, errlen);
}

/* Write `text` to `path`; 0 or -1 with `err`. */
static int write_file(const char *path, const char *text, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");

	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (f != NULL)
			fclose(f);
		return -1;
	}
	return 0;
}

/* In the work folder `tmp`: iso/boot/grub/{grub.cfg,eltorito.img}, then
 * boot.iso from that tree and GRUB's module folder.  The tools run in
 * `tmp` so that only fixed relative paths appear in their arguments. */
static int build_cd(const char *tmp, const char *script, char *err, size_t errlen)
{
	static const char *const dirs[] = {"iso", "iso/boot", "iso/boot/grub"};
	char path[PATH_MAX + 32], log[PATH_MAX + 8];
	char *mkimage[40] = {"grub-mkimage", "-O",         "i386-pc-eltorito",
	                     "-d",           GRUB_LIB_DIR, "-p",
	                     "/boot/grub",   "-o",         "iso/boot/grub/eltorito.img"};
	char *xorriso[] = {"xorriso",
	                   "-no_rc",
	                   "-as",
	                   "mkisofs",
	                   "-quiet",
	                   "-R",
	                   "-V",
	                   "KHYVE_GRUB",
	                   "-graft-points",
	                   "-b",
	                   "boot/grub/eltorito.img",
	                   "-no-emul-boot",
	                   "-boot-load-size",
	                   "4",
	                   "-boot-info-table",
	                   "-o",
	                   "boot.iso",
	                   "iso",
	                   "/boot/grub/i386-pc=" GRUB_LIB_DIR,
	                   NULL};
	size_t n = 9;

	for (size_t i = 0; grub_modules[i]; i++)
		mkimage[n++] = (char *)grub_modules[i];
	mkimage[n] = NULL;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmp, dirs[i]);
		if (mkdir(path, 0755) < 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			return -1;
		}
	}
	snprintf(log, sizeof(log), "%s/log", tmp);
	snprintf(path, sizeof(path), "%s/iso/boot/grub/grub.cfg", tmp);
	if (write_file(path, script, err, errlen) < 0 ||
	    run_tool(mkimage, tmp, log, err, errlen) < 0)
		return -1;
	return run_tool(xorriso, tmp, log, err, errlen);
}

/* GRUB for BIOS is a package the host may lack: say which. */
static int check_grub_files(char *err, size_t errlen)
{
	if (access(GRUB_LIB_DIR "/cdboot.img", R_OK) == 0 &&
	    access(GRUB_LIB_DIR "/kernel.img", R_OK) == 0)
		return 0;
	snprintf(err, errlen, "loader grub needs GRUB for BIOS in %s (Debian package grub-pc-bin)",
	         GRUB_LIB_DIR);
	return -1;
}

/* The image's path and a fresh work folder beside it (same file system,
 * so the finished CD can be renamed into place). */
static int make_paths(const struct vm_guest *g, char *out, char *tmp, char *err, size_t errlen)
{
	if (vm_path(out, g->dir, GRUB_IMAGE) < 0 || vm_path(tmp, g->dir, GRUB_TMP) < 0) {
		snprintf(err, errlen, "%s: path too long", g->dir);
		return -1;
	}
	if (mkdtemp(tmp) == NULL) {
		snprintf(err, errlen, "%s: %s", g->dir, strerror(errno));
		return -1;
	}
	return 0;
}

int vm_grub_image(const struct vm_sys *sys, const struct vm_guest *g, bool install, const char *iso,
                  char *out, char *err, size_t errlen)
{
	char tmp[PATH_MAX], built[PATH_MAX + 16];
	char *script;
	int rc = -1;

	(void)sys;
	script = vm_grub_script(g, install, iso, err, errlen);
	if (script == NULL)
		return -1;
	if (check_grub_files(err, errlen) == 0 && make_paths(g, out, tmp, err, errlen) == 0) {
		snprintf(built, sizeof(built), "%s/boot.iso", tmp);
		if (build_cd(tmp, script, err, errlen) == 0) {
			rc = rename(built, out);
			if (rc < 0)
				snprintf(err, errlen, "%s: %s", out, strerror(errno));
		}
		vm_rmtree(tmp);
	}
	free(script);
	return rc;
}
