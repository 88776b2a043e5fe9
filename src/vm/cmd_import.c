/*
 * vm import [-d DIR] FILE [NAME]: a Proxmox VE or libvirt guest as a vm
 * guest (import.h).  Everything is read and checked first; the guest's
 * folder is then built under a temporary name (qcow2 and vmdk disks
 * converted to raw by qemu-img into it) and renamed into place last, so a
 * failing or interrupted import leaves nothing behind.  Raw images and
 * block devices (LVM, zvols) are referenced where they are
 * (diskN_dev="custom"), never copied nor changed by the import.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/file.h"
#include "vm/commands.h"
#include "vm/import.h"
#include "vm/switch.h"
#include "vm/util.h"

#define IMPORT_USAGE "usage: vm import [-d dir] file [name]"
/* OVMF_VARS_4M.fd: the variable store of khyve's OVMF_CODE_4M.fd, a firmware volume. */
#define VARS_SIZE 540672
#define VARS_FILE "uefi-vars.fd" /* VM_UEFI_VARS (vm/paths.h) */

/* The file as text (NUL-terminated, malloc'd), or NULL after a message. */
static char *read_import_file(const char *path, size_t *len)
{
	char err[PATH_MAX + 128];
	uint8_t *data = file_read_all(path, IMP_MAX_FILE, len, err, sizeof(err));
	char *text;

	if (!data) {
		vm_error("%s", err);
		return NULL;
	}
	if (!(text = malloc(*len + 1))) {
		free(data);
		vm_error("out of memory");
		return NULL;
	}
	memcpy(text, data, *len);
	text[*len] = '\0';
	free(data);
	return text;
}

/* libvirt's XML starts with '<' (after blanks and a UTF-8 BOM); a qm.conf never does. */
static bool looks_like_xml(const char *text)
{
	if (!strncmp(text, "\xef\xbb\xbf", 3))
		text += 3;
	text += strspn(text, " \t\r\n");
	return *text == '<';
}

static int read_guest(const char *file, const char *dir, struct imp_guest *g)
{
	char err[1024];
	size_t len;
	char *text = read_import_file(file, &len);
	int rc;

	if (!text)
		return 1;
	if (looks_like_xml(text))
		rc = imp_read_libvirt(text, len, file, dir, g, err, sizeof(err));
	else
		rc = imp_read_pve(text, len, file, dir, g, err, sizeof(err));
	free(text);
	return rc < 0 ? vm_error("%s", err) : 0;
}

/* ---- checks before anything is written ---- */

/* The disks' images: there, of a kind vm can use; missing CD images are left out. */
static int check_disks(struct imp_guest *g)
{
	size_t kept = 0;

	for (size_t i = 0; i < g->ndisk; i++) {
		struct imp_disk *d = &g->disk[i];
		struct stat st;

		if (strchr(d->path, ',') || !rcconf_value_valid(d->path))
			return vm_error("%s: %s: khyve cannot use a path with ',' or quotes in it",
			                d->id, d->path);
		if (stat(d->path, &st) < 0 && d->cdrom) {
			imp_note(g, "%s: %s: %s (CD drive left out)", d->id, d->path,
			         strerror(errno));
			continue;
		}
		if (stat(d->path, &st) < 0)
			return vm_error("%s: %s: %s%s", d->id, d->path, strerror(errno),
			                errno == ENOENT ? " (its folder: vm import -d DIR)" : "");
		if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
			return vm_error("%s: %s: not a file or block device", d->id, d->path);
		if (S_ISBLK(st.st_mode) && strcmp(d->format, "raw"))
			return vm_error("%s: %s: a block device holding %s is not supported", d->id,
			                d->path, d->format);
		if (access(d->path, R_OK) < 0)
			return vm_error("%s: %s: %s", d->id, d->path, strerror(errno));
		g->disk[kept++] = *d;
	}
	g->ndisk = kept;
	return 0;
}

/* The UEFI variables are carried over only into a uefi guest of a 4 MiB OVMF, when they are there.
 */
static void check_vars(const struct vm_sys *sys, struct imp_guest *g)
{
	const char *fw = sys->conf ? rcconf_get(sys->conf, "uefi_firmware") : NULL;
	struct stat st;

	if (!g->vars_path[0])
		return;
	if (!g->uefi)
		g->vars_path[0] = '\0';
	else if (fw && *fw && !strstr(fw, "_4M"))
		imp_note(g, "%s: uefi_firmware=%s is not a 4 MiB OVMF: a fresh store is made",
		         g->vars_id, fw);
	else if (stat(g->vars_path, &st) < 0)
		imp_note(g, "%s: %s: %s (a fresh store is made)", g->vars_id, g->vars_path,
		         strerror(errno));
	else if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		imp_note(g, "%s: %s: not a file (a fresh store is made)", g->vars_id, g->vars_path);
	else
		return;
	g->vars_path[0] = '\0';
}

static int check_target(const struct vm_sys *sys, const char *name, char final[PATH_MAX])
{
	struct vm_guest found;
	char err[512];

	if (!vm_name_valid(name))
		return vm_error("invalid virtual machine name - '%s'", name);
	if (vm_guest_find(sys, name, &found, err, sizeof(err)) == 0) {
		vm_guest_free(&found);
		return vm_error("virtual machine %s already exists in %s", name, found.dir);
	}
	if (vm_path(final, sys->vm_dir, name))
		return vm_error("path too long");
	if (vm_exists(final))
		return vm_error("%s already exists", final);
	return 0;
}

/* ---- the settings ---- */

static void set_key(struct rcconf *rc, const char *fmt, unsigned n, const char *value)
{
	char key[48];

	snprintf(key, sizeof(key), fmt, n);
	rcconf_set(rc, key, value);
}

static const char *disk_type(const struct imp_guest *g, const struct imp_disk *d)
{
	if (d->cdrom)
		return "ahci-cd";
	if (d->bus == IMP_BUS_VIRTIO)
		return "virtio-blk";
	/* Windows has no virtio-blk driver of its own, but AHCI's. */
	if (d->bus == IMP_BUS_SCSI && !g->windows)
		return "virtio-blk";
	return "ahci-hd";
}

static bool disk_converted(const struct imp_disk *d)
{
	return strcmp(d->format, "raw") != 0;
}

static void set_cpu(struct rcconf *rc, const struct imp_guest *g)
{
	char v[16];

	snprintf(v, sizeof(v), "%u", g->cpus);
	rcconf_set(rc, "cpu", v);
	if (!g->sockets || (g->sockets == 1 && g->threads <= 1))
		return;
	snprintf(v, sizeof(v), "%u", g->sockets);
	rcconf_set(rc, "cpu_sockets", v);
	snprintf(v, sizeof(v), "%u", g->cores);
	rcconf_set(rc, "cpu_cores", v);
	if (g->threads > 1) {
		snprintf(v, sizeof(v), "%u", g->threads);
		rcconf_set(rc, "cpu_threads", v);
	}
}

static struct rcconf *make_settings(const struct vm_sys *sys, struct imp_guest *g)
{
	struct rcconf *rc = rcconf_new();
	char v[32];

	if (!rc)
		return NULL;
	rcconf_set(rc, "loader", g->uefi ? "uefi" : "bios");
	set_cpu(rc, g);
	snprintf(v, sizeof(v), "%lluM", g->memory_mib);
	rcconf_set(rc, "memory", v);
	if (g->uuid[0])
		rcconf_set(rc, "uuid", g->uuid);
	if (g->localtime)
		rcconf_set(rc, "utctime", "no");
	if (g->uefi)
		rcconf_set(rc, "uefi_vars", "yes");
	if (g->graphics)
		rcconf_set(rc, "graphics", "yes");
	if (g->graphics && g->tablet)
		rcconf_set(rc, "xhci_mouse", "yes");
	if (g->rng)
		rcconf_set(rc, "virt_random", "yes");
	if (g->tpm)
		rcconf_set(rc, "tpm", "yes");
	if (g->balloon)
		rcconf_set(rc, "balloon", "yes");
	for (unsigned n = 0; n < g->npt; n++)
		set_key(rc, "passthru%u", n, g->passthru[n]);
	for (unsigned n = 0; n < g->ndisk; n++) {
		const struct imp_disk *d = &g->disk[n];
		char file[32];

		snprintf(file, sizeof(file), "disk%u.img", n);
		set_key(rc, "disk%u_type", n, disk_type(g, d));
		set_key(rc, "disk%u_name", n, disk_converted(d) ? file : d->path);
		if (!disk_converted(d))
			set_key(rc, "disk%u_dev", n, "custom");
		if (d->readonly)
			set_key(rc, "disk%u_opts", n, "ro");
	}
	for (unsigned n = 0; n < g->nnic; n++) {
		const struct imp_nic *nic = &g->nic[n];
		char mac[18];

		set_key(rc, "network%u_type", n, nic->type);
		set_key(rc, "network%u_switch", n, nic->sw);
		if (!nic->mac[0])
			vm_mac(mac);
		set_key(rc, "network%u_mac", n, nic->mac[0] ? nic->mac : mac);
		if (!vm_switch_listed(sys, nic->sw))
			imp_note(g,
			         "%s: there is no switch %s yet (vm switch create -t manual -b "
			         "BRIDGE %s)",
			         nic->id, nic->sw, nic->sw);
	}
	return rc;
}

/* ---- writing ---- */

static int convert_disk(const struct imp_disk *d, const char *dir, unsigned n)
{
	char out[PATH_MAX], file[32], what[PATH_MAX + 64], err[PATH_MAX + 600];
	bool tty = isatty(STDOUT_FILENO);
	const char *argv[] = {"qemu-img", "convert",         "-f",    d->format, "-O",
	                      "raw",      tty ? "-p" : "-q", d->path, out,       NULL};

	snprintf(file, sizeof(file), "disk%u.img", n);
	if (vm_path(out, dir, file))
		return vm_error("path too long");
	if (tty)
		printf("%s: converting %s (%s) to %s\n", d->id, d->path, d->format, file);
	fflush(stdout);
	snprintf(what, sizeof(what), "%s: qemu-img convert %s failed", d->id, d->path);
	if (vm_tool_run(
	        &(struct vm_tool){.argv = argv, .out_fd = tty ? STDOUT_FILENO : -1, .what = what},
	        err, sizeof(err)) < 0)
		return vm_error("%s", err);
	return chmod(out, 0600) == 0 ? 0 : vm_error("%s: %s", out, strerror(errno));
}

/* The first VARS_SIZE bytes of `src`, when they are OVMF's variable store; false if not. */
static bool read_vars(const char *src, uint8_t *buf)
{
	int fd = open(src, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	uint64_t fv_len;

	if (fd < 0)
		return false;
	while (got < VARS_SIZE) {
		ssize_t n = pread(fd, buf + got, VARS_SIZE - got, (off_t)got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	/* EFI_FIRMWARE_VOLUME_HEADER (PI spec vol. 3, 3.2.1): FvLength at 32, "_FVH" at 40. */
	memcpy(&fv_len, buf + 32, sizeof(fv_len));
	return got == VARS_SIZE && !memcmp(buf + 40, "_FVH", 4) && fv_len == VARS_SIZE;
}

static int write_vars(const char *dir, const uint8_t *buf)
{
	char path[PATH_MAX];
	int fd;

	if (vm_path(path, dir, VARS_FILE))
		return vm_error("path too long");
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, buf, VARS_SIZE) != VARS_SIZE || fsync(fd) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return vm_error("%s: %s", path, strerror(e));
	}
	return close(fd) == 0 ? 0 : vm_error("%s: %s", path, strerror(errno));
}

/* efidisk0 or <nvram> into DIR/uefi-vars.fd (a qcow2 one through qemu-img first). */
static int carry_vars(struct imp_guest *g, const char *dir)
{
	char raw[PATH_MAX], err[PATH_MAX + 600];
	const char *src = g->vars_path;
	uint8_t *buf;
	int rc = 0;

	if (!g->vars_path[0])
		return 0;
	if (vm_path(raw, dir, ".vars.raw"))
		return vm_error("path too long");
	if (!strcmp(g->vars_format, "qcow2")) {
		const char *argv[] = {"qemu-img", "convert", "-q", "-f", "qcow2",
		                      "-O",       "raw",     src,  raw,  NULL};
		if (vm_tool_run(&(struct vm_tool){.argv = argv, .what = g->vars_id}, err,
		                sizeof(err)) < 0)
			return vm_error("%s", err);
		src = raw;
	}
	if (!(buf = malloc(VARS_SIZE)))
		return vm_error("out of memory");
	if (read_vars(src, buf)) {
		rc = write_vars(dir, buf);
		g->vars_carried = rc == 0;
	} else {
		imp_note(g, "%s: %s: not OVMF's 4 MiB variable store (a fresh store is made)",
		         g->vars_id, g->vars_path);
	}
	free(buf);
	unlink(raw);
	return rc;
}

static int build_folder(struct imp_guest *g, const struct rcconf *rc, const char *tmp,
                        const char *name)
{
	char path[PATH_MAX], file[VM_NAME_MAX + 8], err[PATH_MAX + 128];

	for (unsigned n = 0; n < g->ndisk; n++)
		if (disk_converted(&g->disk[n]) && convert_disk(&g->disk[n], tmp, n))
			return 1;
	if (carry_vars(g, tmp))
		return 1;
	snprintf(file, sizeof(file), "%s.conf", name);
	if (vm_path(path, tmp, file))
		return vm_error("path too long");
	if (rcconf_save(rc, path, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	return 0;
}

/* Build in a hidden folder beside `final`, then rename it there; on any failure nothing stays. */
static int write_guest(struct imp_guest *g, const struct rcconf *settings, const char *name,
                       const char *final)
{
	const char *slash = strrchr(final, '/');
	struct sigaction ign = {.sa_handler = SIG_IGN}, old[3];
	const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	char tmp[PATH_MAX];
	int status = 1;

	/* Hidden, as vm create's: no listing takes it for a guest. */
	if (snprintf(tmp, sizeof(tmp), "%.*s/.%s.importing.%ld", (int)(slash - final), final,
	             slash + 1, (long)getpid()) >= PATH_MAX)
		return vm_error("path too long");
	/* Ctrl-C stops qemu-img (vm_tool_run resets the signals there); we stay to clean up. */
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &ign, &old[i]);
	if (mkdir(tmp, 0755) < 0) {
		vm_error("%s: %s", tmp, strerror(errno));
	} else if (build_folder(g, settings, tmp, name) == 0) {
		/* -2: renamed, only the folder's fsync failed: the guest is there. */
		if (file_rename_durable(tmp, final, false) == -1)
			vm_error("%s: %s", final, strerror(errno));
		else
			status = 0;
	}
	if (status && vm_exists(tmp))
		vm_rmtree(tmp);
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	return status;
}

static void report(const struct imp_guest *g, const char *name, const char *final)
{
	printf("imported %s guest %s into %s\n", g->kind, name, final);
	if (g->vars_carried)
		printf("UEFI variables: %s (%s) as %s\n", g->vars_id, g->vars_path, VARS_FILE);
	for (size_t i = 0; i < g->nnote; i++)
		printf("%s: %s\n", g->caveat[i] ? "note" : "not mapped", g->note[i]);
	if (g->nnote == IMP_MAX_NOTES)
		printf("not mapped: (more lines left out)\n");
}

int cmd_import(struct vm_sys *sys, int argc, char **argv)
{
	const char *dir = NULL, *name;
	char err[512], final[PATH_MAX], absdir[PATH_MAX];
	struct imp_guest *g;
	struct rcconf *rc;
	struct stat st;
	int c, status;

	optind = 1;
	while ((c = getopt(argc, argv, "+d:")) != -1) {
		if (c != 'd')
			return vm_error(IMPORT_USAGE);
		dir = optarg;
	}
	if (optind != argc - 1 && optind != argc - 2)
		return vm_error(IMPORT_USAGE);
	if (dir && stat(dir, &st) < 0)
		return vm_error("-d %s: %s", dir, strerror(errno));
	if (dir && !S_ISDIR(st.st_mode))
		return vm_error("-d %s: not a folder", dir);
	/* khyve opens custom disk paths as given: they must not depend on our cwd. */
	if (dir && !realpath(dir, absdir))
		return vm_error("-d %s: %s", dir, strerror(errno));
	if (dir)
		dir = absdir;
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (vm_require_write(sys, "import") < 0)
		return 1;
	if (!(g = calloc(1, sizeof(*g))))
		return vm_error("out of memory");
	if (read_guest(argv[optind], dir, g) || check_disks(g)) {
		free(g);
		return 1;
	}
	name = optind == argc - 2 ? argv[optind + 1] : g->name;
	if (!name[0]) {
		free(g);
		return vm_error("%s: its guest name is not one vm takes: give one (vm import %s "
		                "NAME)",
		                argv[optind], argv[optind]);
	}
	check_vars(sys, g);
	if (check_target(sys, name, final)) {
		free(g);
		return 1;
	}
	if (!(rc = make_settings(sys, g))) {
		free(g);
		return vm_error("out of memory");
	}
	status = write_guest(g, rc, name, final);
	if (status == 0)
		report(g, name, final);
	rcconf_free(rc);
	free(g);
	return status;
}
