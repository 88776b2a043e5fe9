/* vm iso and vm img: list and fetch install media and cloud images
 * (commands.h, storage.h). */
#include "lib/file.h"
#include "vm/commands.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <mntent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vm/khyvecmd.h"
#include "vm/state.h"
#include "vm/util.h"
#include "vm/storage.h"

/* ------------------------------------------------------------------ */
/* vm iso / vm img: install media in $vm_dir/.iso and cloud images in
 * $vm_dir/.img (and "iso:"/"img:" datastores). */

enum media { MEDIA_ISO, MEDIA_IMG };

static const char *media_word(enum media m)
{
	return m == MEDIA_ISO ? "iso" : "img";
}

/* The folder of media datastore `ds` ("default": $vm_dir/.iso or .img). */
static int media_dir(const struct vm_sys *sys, enum media m, const char *ds, char *out)
{
	const char *spec;
	char sub[8];

	if (!strcmp(ds, "default")) {
		snprintf(sub, sizeof(sub), ".%s", media_word(m));
		if (vm_path(out, sys->vm_dir, sub) < 0)
			return vm_error("vm_dir is too long");
		return 0;
	}
	spec = storage_ds_listed(sys, ds) ? storage_ds_spec(sys, ds) : NULL;
	if (!spec || storage_spec_type(spec) != (m == MEDIA_ISO ? DS_ISO : DS_IMG))
		return vm_error("%s: no such %s datastore", ds, media_word(m));
	snprintf(out, PATH_MAX, "%s", storage_spec_dir(spec));
	return 0;
}

int storage_visible_entry(const struct dirent *e)
{
	return e->d_name[0] != '.';
}

/* "DATASTORE FILENAME" lines for the visible files of `dir`, in name order. */
static void media_list_dir(const char *ds, const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, storage_visible_entry, alphasort);

	for (int i = 0; i < n; i++) {
		printf("%-20s%s\n", ds, names[i]->d_name);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

static int media_list(const struct vm_sys *sys, enum media m)
{
	char dir[PATH_MAX];

	printf("%-20s%s\n", "DATASTORE", "FILENAME");
	if (media_dir(sys, m, "default", dir) == 0)
		media_list_dir("default", dir);
	for (size_t i = 1; i < vm_datastore_count(sys); i++) {
		char name[VM_NAME_MAX + 1];
		const char *n = vm_datastore_name(sys, i), *spec;

		if (!n || snprintf(name, sizeof(name), "%s", n) >= (int)sizeof(name))
			continue;
		spec = storage_ds_spec(sys, name);
		if (spec && storage_spec_type(spec) == (m == MEDIA_ISO ? DS_ISO : DS_IMG))
			media_list_dir(name, storage_spec_dir(spec));
	}
	return 0;
}

static bool is_url(const char *s)
{
	return !strncmp(s, "http://", 7) || !strncmp(s, "https://", 8) || !strncmp(s, "ftp://", 6);
}

/* The file name a URL or path ends in (no query or fragment) into `out`. */
static int source_basename(const char *src, char *out, size_t len)
{
	size_t end = is_url(src) ? strcspn(src, "?#") : strlen(src), start;

	while (end > 0 && src[end - 1] == '/')
		end--;
	start = end;
	while (start > 0 && src[start - 1] != '/')
		start--;
	if (end == start || src[start] == '.' || end - start >= len || end - start > NAME_MAX)
		return -1;
	memcpy(out, src + start, end - start);
	out[end - start] = '\0';
	return rcconf_value_valid(out) ? 0 : -1;
}

/* curl or wget URL into `dst`.  0 or -1 with `err`. */
static int download(const char *url, const char *dst, char *err, size_t errlen)
{
	if (storage_tool_installed("curl")) {
		const char *argv[] = {"curl", "-fsSL", "--proto", "=http,https,ftp", "-o", dst,
		                      "--",   url,     NULL};
		return storage_run_tool(argv, 0, err, errlen);
	}
	if (storage_tool_installed("wget")) {
		const char *argv[] = {"wget", "-q", "-O", dst, "--", url, NULL};
		return storage_run_tool(argv, 0, err, errlen);
	}
	snprintf(err, errlen,
	         "%s: downloading needs curl or wget (neither is installed); "
	         "download it yourself and pass the file",
	         url);
	return -1;
}

enum image_kind { IMAGE_RAW, IMAGE_XZ, IMAGE_GZIP, IMAGE_QCOW, IMAGE_QCOW2 };

/* What the first bytes of `path` say it is. */
static enum image_kind sniff_image(const char *path)
{
	unsigned char b[8] = {0};
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b)) : -1;

	if (fd >= 0)
		close(fd);
	if (n >= 6 && !memcmp(b,
	                      "\xfd"
	                      "7zXZ\0",
	                      6))
		return IMAGE_XZ;
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return IMAGE_GZIP;
	if (n >= 8 && !memcmp(b, "QFI\xfb", 4))
		return b[7] == 1 ? IMAGE_QCOW : IMAGE_QCOW2;
	return IMAGE_RAW;
}

/* An import in progress: the data so far (`cur`) and the name it will get. */
struct import {
	char dir[PATH_MAX];      /* where it goes */
	char name[NAME_MAX + 1]; /* its final name there */
	char cur[PATH_MAX];      /* the data as it stands */
	bool cur_is_temp;        /* cur is our temporary file (else the user's) */
};

/* Replace imp->cur by the new temporary file `next`. */
static void import_advance(struct import *imp, const char *next)
{
	if (imp->cur_is_temp)
		storage_temp_done(imp->cur, true);
	snprintf(imp->cur, sizeof(imp->cur), "%s", next);
	imp->cur_is_temp = true;
}

/* Run `argv` (which reads imp->cur) into a new temporary file. */
static int import_step(struct import *imp, const char **argv, int dst_arg, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	int fd = -1, rc;

	if (storage_temp_file(imp->dir, imp->name, tmp, err, errlen) < 0)
		return -1;
	if (dst_arg >= 0)
		argv[dst_arg] = tmp;
	else if ((fd = open(tmp, O_WRONLY | O_TRUNC | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		storage_temp_done(tmp, true);
		return -1;
	}
	rc = storage_run_tool(argv, fd, err, errlen);
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		storage_temp_done(tmp, true);
		return -1;
	}
	import_advance(imp, tmp);
	return 0;
}

/* xz/gzip -dc: compressed cloud images (vm-bhyve unpacks .xz and .gz). */
static int import_decompress(struct import *imp, enum image_kind kind, char *err, size_t errlen)
{
	const char *tool = kind == IMAGE_XZ ? "xz" : "gzip";
	const char *argv[] = {tool, "-dc", "--", imp->cur, NULL};

	if (!storage_tool_installed(tool)) {
		snprintf(err, errlen, "%s: unpacking it needs %s, which is not installed",
		         imp->name, tool);
		return -1;
	}
	if (!storage_strip_suffix(imp->name, kind == IMAGE_XZ ? ".xz" : ".gz") &&
	    storage_strip_suffix(imp->name, ".tgz"))
		strcat(imp->name, ".tar");
	if (storage_has_suffix(imp->name, ".tar")) {
		snprintf(err, errlen, "%s: tar archives are not supported; unpack the image first",
		         imp->name);
		return -1;
	}
	return import_step(imp, argv, -1, err, errlen);
}

/* qemu-img convert -O raw: khyve's disks are raw files. */
static int import_to_raw(struct import *imp, enum image_kind kind, char *err, size_t errlen)
{
	const char *argv[] = {"qemu-img", "convert", "-f", kind == IMAGE_QCOW ? "qcow" : "qcow2",
	                      "-O",       "raw",     "--", imp->cur,
	                      NULL,       NULL};

	if (!storage_tool_installed("qemu-img")) {
		snprintf(err, errlen,
		         "%s: converting a qcow2 image needs qemu-img, which is not installed",
		         imp->name);
		return -1;
	}
	if (!storage_strip_suffix(imp->name, ".qcow2") && !storage_strip_suffix(imp->name, ".qcow"))
		storage_strip_suffix(imp->name, ".img");
	if (strlen(imp->name) + 4 > NAME_MAX) {
		snprintf(err, errlen, "%s: name too long", imp->name);
		return -1;
	}
	strcat(imp->name, ".img");
	return import_step(imp, argv, 8, err, errlen);
}

/* img: unpack, then make raw, whatever the download was. */
static int import_image(struct import *imp, char *err, size_t errlen)
{
	enum image_kind kind = sniff_image(imp->cur);

	if (kind == IMAGE_XZ || kind == IMAGE_GZIP) {
		if (import_decompress(imp, kind, err, errlen) < 0)
			return -1;
		kind = sniff_image(imp->cur);
	}
	if (kind == IMAGE_RAW &&
	    (storage_has_suffix(imp->name, ".qcow2") || storage_has_suffix(imp->name, ".qcow")))
		kind = IMAGE_QCOW2; /* let qemu-img say what is wrong with it */
	if (kind == IMAGE_QCOW || kind == IMAGE_QCOW2)
		return import_to_raw(imp, kind, err, errlen);
	return 0;
}

/* The name an import of `name` would most likely end up with. */
static void predict_name(enum media m, char *name)
{
	if (m == MEDIA_ISO)
		return;
	if (!storage_strip_suffix(name, ".xz"))
		storage_strip_suffix(name, ".gz");
	if (storage_strip_suffix(name, ".qcow2") || storage_strip_suffix(name, ".qcow"))
		strcat(name, ".img");
}

/* Fetch or copy `src`, process it, and rename it into place. */
static int import_run(struct import *imp, enum media m, const char *src, char *err, size_t errlen)
{
	char dest[PATH_MAX];
	mode_t mask;

	if (is_url(src)) {
		const char *url = src;
		char tmp[PATH_MAX];

		if (storage_temp_file(imp->dir, imp->name, tmp, err, errlen) < 0)
			return -1;
		import_advance(imp, tmp);
		if (download(url, imp->cur, err, errlen) < 0)
			return -1;
	} else {
		snprintf(imp->cur, sizeof(imp->cur), "%s", src);
	}
	if (m == MEDIA_IMG && import_image(imp, err, errlen) < 0)
		return -1;
	if (storage_join(dest, imp->dir, imp->name, err, errlen) < 0)
		return -1;
	if (!imp->cur_is_temp) {
		const char *argv[] = {"cp", CP_REFLINK, CP_SPARSE, "--", imp->cur, NULL, NULL};
		if (import_step(imp, argv, 5, err, errlen) < 0)
			return -1;
	}
	mask = umask(0);
	umask(mask);
	chmod(imp->cur, 0666 & ~mask);
	if (file_rename_noreplace(imp->cur, dest) < 0) {
		snprintf(err, errlen, "%s: %s", dest,
		         errno == EEXIST ? "already exists" : strerror(errno));
		return -1;
	}
	storage_temp_done(imp->cur, false);
	imp->cur_is_temp = false;
	printf("%s\n", dest);
	return 0;
}

static int media_import(const struct vm_sys *sys, enum media m, const char *ds, const char *src)
{
	struct import imp = {0};
	char err[ERRLEN], dest[PATH_MAX], guess[NAME_MAX + 1];
	int rc;

	if (media_dir(sys, m, ds, imp.dir) != 0)
		return 1;
	if (source_basename(src, imp.name, sizeof(imp.name)) < 0)
		return vm_error("%s: cannot tell a file name from it", src);
	if (!is_url(src) && !storage_is_regular(src))
		return vm_error("%s: no such file (or an unsupported URL: use http, https or ftp)",
		                src);
	if (!storage_is_dir(imp.dir) && (strcmp(ds, "default") || mkdir(imp.dir, 0755) < 0))
		return vm_error("%s: no such directory", imp.dir);
	snprintf(guess, sizeof(guess), "%s", imp.name);
	predict_name(m, guess);
	if (storage_join(dest, imp.dir, guess, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (storage_path_exists(dest))
		return vm_error("%s: already exists", dest);
	rc = import_run(&imp, m, src, err, sizeof(err));
	if (imp.cur_is_temp)
		storage_temp_done(imp.cur, true);
	return rc < 0 ? vm_error("%s", err) : 0;
}

static int media_cmd(struct vm_sys *sys, enum media m, int argc, char **argv)
{
	const char *ds = "default";
	char err[ERRLEN];
	int opt;

	optind = 0;
	while ((opt = getopt(argc, argv, "+:d:")) != -1) {
		if (opt != 'd')
			return vm_error("usage: vm %s [-d datastore] [url|file]", media_word(m));
		ds = optarg;
	}
	if (argc - optind > 1)
		return vm_error("usage: vm %s [-d datastore] [url|file]", media_word(m));
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (optind == argc)
		return media_list(sys, m);
	if (vm_require_write(sys, media_word(m)))
		return 1;
	return media_import(sys, m, ds, argv[optind]);
}

int cmd_iso(struct vm_sys *sys, int argc, char **argv)
{
	return media_cmd(sys, MEDIA_ISO, argc, argv);
}

int cmd_img(struct vm_sys *sys, int argc, char **argv)
{
	return media_cmd(sys, MEDIA_IMG, argc, argv);
}
