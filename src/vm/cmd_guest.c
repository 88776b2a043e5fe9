/*
 * Guest life-cycle commands that only touch files: init, create, add,
 * configure, rename, destroy (vm-bhyve's lib/vm-core equivalents).
 * Each checks everything first and builds new things under a temporary
 * name, so a failing command leaves no file changed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/parse.h"
#include "vm/commands.h"
#include "vm/khyvecmd.h"
#include "vm/paths.h"
#include "vm/state.h"
#include "vm/util.h"

#define DEFAULT_DISK_SIZE "20G"
#define MAX_DISKS         64

/* ---- init ---- */

static int make_dir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) == 0 || errno == EEXIST)
		return 0;
	return vm_error("%s: %s", path, strerror(errno));
}

/* Copy the shipped templates that $vm_dir/.templates does not have yet. */
static void install_templates(const struct vm_sys *sys, const char *dst)
{
	char share[PATH_MAX], src[PATH_MAX];
	struct dirent *e;
	DIR *d;

	if (vm_share_dir(sys->self, share) < 0 || vm_path(src, share, "templates") < 0 ||
	    !(d = opendir(src)))
		return;
	while ((e = readdir(d))) {
		char from[PATH_MAX], to[PATH_MAX], err[512];
		size_t len = strlen(e->d_name);
		struct rcconf *t;

		if (len < 6 || strcmp(e->d_name + len - 5, ".conf") ||
		    vm_path(from, src, e->d_name) || vm_path(to, dst, e->d_name) || vm_exists(to))
			continue;
		t = rcconf_load(from, err, sizeof(err));
		if (!t || rcconf_save(t, to, err, sizeof(err)) < 0)
			vm_warn("%s", err);
		rcconf_free(t);
	}
	closedir(d);
}

/* Read-only commands work for the khyve group: give it the folder. */
static void share_with_group(const char *dir)
{
	struct group *gr = getgrnam("khyve");

	if (gr && chown(dir, (uid_t)-1, gr->gr_gid) == 0)
		chmod(dir, 0750);
}

int cmd_init(struct vm_sys *sys, int argc, char **argv)
{
	const char *sub[] = {".config", ".templates", ".iso", ".img"};
	char path[PATH_MAX], err[512];

	(void)argv;
	if (argc > 1)
		return vm_error("usage: vm init");
	if (!sys->vm_dir[0])
		return vm_error("vm_dir is not set in %s (add vm_dir=\"/path\")", sys->conf_path);
	if (geteuid() != 0 && access(sys->vm_dir, W_OK) != 0 && errno != ENOENT)
		return vm_error("init changes virtual machines and needs root (run it with sudo)");
	if (make_dir(sys->vm_dir, 0755))
		return 1;
	share_with_group(sys->vm_dir);
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++)
		if (vm_path(path, sys->vm_dir, sub[i]) || make_dir(path, 0755))
			return 1;
	if (vm_path(path, sys->config_dir, "system.conf") == 0 && !vm_exists(path) &&
	    rcconf_save(sys->system, path, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (vm_path(path, sys->vm_dir, ".templates") == 0)
		install_templates(sys, path);
	return 0;
}

/* ---- create ---- */

struct create_opts {
	const char *datastore, *template, *size, *memory, *cpu, *image, *pubkey, *netconf;
	bool cloud_init;
};

static int parse_create(int argc, char **argv, struct create_opts *o, const char **name)
{
	int c;

	*o = (struct create_opts){.datastore = "default", .template = "default"};
	optind = 1;
	while ((c = getopt(argc, argv, "+d:t:s:m:c:i:Ck:n:")) != -1) {
		switch (c) {
		case 'd':
			o->datastore = optarg;
			break;
		case 't':
			o->template = optarg;
			break;
		case 's':
			o->size = optarg;
			break;
		case 'm':
			o->memory = optarg;
			break;
		case 'c':
			o->cpu = optarg;
			break;
		case 'i':
			o->image = optarg;
			break;
		case 'C':
			o->cloud_init = true;
			break;
		case 'k':
			o->pubkey = optarg;
			break;
		case 'n':
			o->netconf = optarg;
			break;
		default:
			return vm_error("usage: vm create [-d datastore] [-t template] [-s size] "
			                "[-m memory] [-c cpus] [-i image] [-C -k pubkey] name");
		}
	}
	if (optind != argc - 1)
		return vm_error(
		    "usage: vm create [-d datastore] [-t template] [-s size] [-m memory] "
		    "[-c cpus] [-i image] [-C -k pubkey] name");
	*name = argv[optind];
	return 0;
}

/* Every check `vm create` can make before it writes anything. */
static int check_create(const struct vm_sys *sys, const struct create_opts *o, const char *name)
{
	unsigned long long bytes;
	uint64_t mem, cpus;
	struct vm_guest g;
	char err[512];

	if (!vm_name_valid(name))
		return vm_error("invalid virtual machine name - '%s'", name);
	if (vm_guest_find(sys, name, &g, err, sizeof(err)) == 0) {
		vm_guest_free(&g);
		return vm_error("virtual machine already exists in %s", g.dir);
	}
	if (!vm_datastore_path(sys, o->datastore))
		return vm_error("unable to load datastore - '%s'", o->datastore);
	if (o->size && vm_parse_size(o->size, &bytes) < 0)
		return vm_error("-s %s: not a size (e.g. 20G, 512M)", o->size);
	if (o->memory && parse_memsize(o->memory, &mem) < 0)
		return vm_error("-m %s: not a memory size (e.g. 2G, 512M)", o->memory);
	if (o->cpu && parse_uint(o->cpu, 1, 288, &cpus) < 0)
		return vm_error("-c %s: want a number of CPUs from 1 to 288", o->cpu);
	if (o->pubkey && !o->cloud_init)
		return vm_error("cloud-init is required for injecting a public key; use -C");
	if (o->pubkey && access(o->pubkey, R_OK) < 0)
		return vm_error("%s: %s", o->pubkey, strerror(errno));
	return 0;
}

/* The image for -i: a name in $vm_dir/.img or a path. */
/* An image found by name in $vm_dir/.img stays in there (no link out of it). */
static int image_in_store(const struct vm_sys *sys, char *path)
{
	char store[PATH_MAX], why[2 * PATH_MAX], name[PATH_MAX];
	const char *base = strrchr(path, '/') + 1;

	snprintf(name, sizeof(name), "%s", base);
	if (vm_path(store, sys->vm_dir, ".img") < 0 ||
	    vm_path_confine(store, name, path, why, sizeof(why)) < 0)
		return vm_error("img %s in %s/.img: %s", name, sys->vm_dir, why);
	return 0;
}

static int find_image(const struct vm_sys *sys, const char *image, char *out)
{
	if (strchr(image, '/'))
		snprintf(out, PATH_MAX, "%s", image);
	else if (snprintf(out, PATH_MAX, "%s/.img/%s", sys->vm_dir, image) >= PATH_MAX)
		return vm_error("-i %s: name too long", image);
	/* vm img stores a converted qcow2 image as NAME.img. */
	size_t len = strlen(out);
	if (access(out, R_OK) < 0 && len > 6 && !strcmp(out + len - 6, ".qcow2"))
		strcpy(out + len - 6, ".img");
	if (access(out, R_OK) < 0)
		return vm_error("unable to locate img file - '%s'", image);
	return strchr(image, '/') ? 0 : image_in_store(sys, out);
}

/* Write the cloud image into disk0 (raw) and grow it to the disk size. */
static int write_image(const char *img, const char *disk, unsigned long long bytes)
{
	char size[32], what[PATH_MAX + 64], err[PATH_MAX + 600];
	const char *conv[] = {"qemu-img", "convert", "-O", "raw", img, disk, NULL};
	const char *grow[] = {"qemu-img", "resize", "-f", "raw", disk, size, NULL};

	snprintf(size, sizeof(size), "%llu", bytes);
	unlink(disk);
	snprintf(what, sizeof(what), "qemu-img convert %s failed", img);
	if (vm_tool_run(&(struct vm_tool){.argv = conv, .what = what}, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	snprintf(what, sizeof(what),
	         "qemu-img resize to %s bytes failed (an image larger than the disk?)", size);
	if (vm_tool_run(&(struct vm_tool){.argv = grow, .what = what}, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	return chmod(disk, 0600) == 0 ? 0 : vm_error("%s: %s", disk, strerror(errno));
}

/* Create the diskN files the template names; drop the diskN_size keys. */
static int create_disks(const struct vm_sys *sys, struct rcconf *conf, const char *dir,
                        const struct create_opts *o)
{
	for (unsigned n = 0; n < MAX_DISKS; n++) {
		char key[32], path[PATH_MAX], img[PATH_MAX];
		const char *name, *dev, *size;
		unsigned long long bytes;

		snprintf(key, sizeof(key), "disk%u_name", n);
		if (!(name = rcconf_get(conf, key)))
			break;
		snprintf(key, sizeof(key), "disk%u_dev", n);
		dev = rcconf_get_default(conf, key, "file");
		snprintf(key, sizeof(key), "disk%u_size", n);
		size =
		    n == 0 && o->size ? o->size : rcconf_get_default(conf, key, DEFAULT_DISK_SIZE);
		if (vm_parse_size(size, &bytes) < 0)
			return vm_error("disk%u_size=\"%s\": not a size", n, size);
		rcconf_set(conf, key, NULL); /* frees `size` */
		if (!strcmp(dev, "custom") || !strcmp(dev, "iscsi"))
			continue;
		if (strcmp(dev, "file") && strcmp(dev, "sparse"))
			return vm_error(
			    "disk%u_dev=\"%s\": ZFS volumes are not supported; use file", n, dev);
		if (strchr(name, '/') || vm_path(path, dir, name) ||
		    vm_make_sparse(path, bytes) < 0)
			return vm_error("disk%u_name=\"%s\": cannot create the image: %s", n, name,
			                strerror(errno));
		if (n == 0 && o->image &&
		    (find_image(sys, o->image, img) || write_image(img, path, bytes)))
			return 1;
	}
	return 0;
}

/* Fixed MACs for each networkN, so the guest keeps them across starts. */
static void assign_macs(struct rcconf *conf)
{
	for (unsigned n = 0; n < 32; n++) {
		char key[32], mac[18];

		snprintf(key, sizeof(key), "network%u_type", n);
		if (!rcconf_get(conf, key))
			break;
		snprintf(key, sizeof(key), "network%u_mac", n);
		if (!rcconf_get(conf, key)) {
			vm_mac(mac);
			rcconf_set(conf, key, mac);
		}
	}
}

static int write_text(const char *dir, const char *file, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	if (vm_path(path, dir, file) || !(f = fopen(path, "w")))
		return vm_error("%s/%s: %s", dir, file, strerror(errno));
	fputs(text, f);
	return fclose(f) == 0 ? 0 : vm_error("%s: %s", path, strerror(errno));
}

/* Append the lines of `file` as "  - KEY" list items. */
static void append_keys(FILE *f, const char *file)
{
	FILE *k = fopen(file, "r");
	char line[8192];

	if (!k)
		return;
	fputs("ssh_authorized_keys:\n", f);
	while (fgets(line, sizeof(line), k)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] && line[0] != '#')
			fprintf(f, "  - %s\n", line);
	}
	fclose(k);
}

/* cloud-init NoCloud seed (meta-data, user-data) as an ISO labelled cidata. */
static int create_cloud_init(struct rcconf *conf, const char *dir, const char *name,
                             const struct create_opts *o)
{
	char ci[PATH_MAX], iso[PATH_MAX], meta[512], *user = NULL, out[1024], key[32];
	size_t ulen = 0;
	FILE *f;
	unsigned n = 0;

	if (vm_path(ci, dir, ".cloud-init") || vm_path(iso, dir, "seed.iso") || make_dir(ci, 0700))
		return 1;
	snprintf(meta, sizeof(meta), "instance-id: %s\nlocal-hostname: %s\n",
	         rcconf_get_default(conf, "uuid", name), name);
	if (!(f = open_memstream(&user, &ulen)))
		return vm_error("out of memory");
	fputs("#cloud-config\nresize_rootfs: True\nmanage_etc_hosts: localhost\n", f);
	if (o->pubkey)
		append_keys(f, o->pubkey);
	fclose(f);
	int rc = write_text(ci, "meta-data", meta) || write_text(ci, "user-data", user);
	free(user);
	if (rc)
		return 1;
	const char *mk[] = {"xorriso", "-as",    "mkisofs", "-quiet", "-output", iso,
	                    "-volid",  "cidata", "-joliet", "-rock",  ci,        NULL};
	const struct vm_tool t = {.argv = mk,
	                          .what = "cannot write seed.iso for cloud-init (xorriso)"};
	if (vm_tool_run(&t, out, sizeof(out)) < 0)
		return vm_error("%s", out);
	do
		snprintf(key, sizeof(key), "disk%u_name", n);
	while (rcconf_get(conf, key) && ++n < MAX_DISKS);
	snprintf(key, sizeof(key), "disk%u_type", n);
	rcconf_set(conf, key, "ahci-cd");
	snprintf(key, sizeof(key), "disk%u_name", n);
	rcconf_set(conf, key, "seed.iso");
	snprintf(key, sizeof(key), "disk%u_dev", n);
	rcconf_set(conf, key, "file");
	return 0;
}

/* Build the guest in `tmpdir`; the caller renames it into place. */
static int build_guest(const struct vm_sys *sys, const struct create_opts *o, const char *name,
                       const char *tmpdir)
{
	char tpath[PATH_MAX], cpath[PATH_MAX], file[VM_NAME_MAX + 8], err[512], uuid[37];
	struct rcconf *conf;
	int rc = 1;

	if (!vm_name_valid(o->template))
		return vm_error("-t %s: not a template name", o->template);
	if (snprintf(tpath, sizeof(tpath), "%s/.templates/%s.conf", sys->vm_dir, o->template) >=
	    (int)sizeof(tpath))
		return vm_error("template name too long");
	if (!(conf = rcconf_load(tpath, err, sizeof(err)))) {
		if (errno == ENOENT)
			return vm_error("unable to find template %s", tpath);
		return vm_error("%s", err);
	}
	if (!rcconf_get(conf, "disk0_name")) {
		rcconf_free(conf);
		return vm_error("template %s has no disk0_name", tpath);
	}
	vm_uuid(uuid);
	rcconf_set(conf, "uuid", uuid);
	if (o->cpu)
		rcconf_set(conf, "cpu", o->cpu);
	if (o->memory)
		rcconf_set(conf, "memory", o->memory);
	assign_macs(conf);
	if (create_disks(sys, conf, tmpdir, o) ||
	    (o->cloud_init && create_cloud_init(conf, tmpdir, name, o)))
		goto out;
	snprintf(file, sizeof(file), "%s.conf", name);
	if (vm_path(cpath, tmpdir, file) || rcconf_save(conf, cpath, err, sizeof(err)) < 0) {
		vm_error("%s", err);
		goto out;
	}
	rc = 0;
out:
	rcconf_free(conf);
	return rc;
}

int cmd_create(struct vm_sys *sys, int argc, char **argv)
{
	char err[512], final[PATH_MAX], tmp[PATH_MAX];
	struct create_opts o;
	const char *name = NULL, *ds;

	if (parse_create(argc, argv, &o, &name))
		return 1;
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (vm_require_write(sys, "create") < 0 || check_create(sys, &o, name))
		return 1;
	ds = vm_datastore_path(sys, o.datastore);
	if (vm_path(final, ds, name) ||
	    snprintf(tmp, sizeof(tmp), "%s/.%s.creating.%ld", ds, name, (long)getpid()) >= PATH_MAX)
		return vm_error("path too long");
	if (vm_exists(final))
		return vm_error("%s already exists", final);
	if (mkdir(tmp, 0755) < 0)
		return vm_error("unable to create virtual machine directory %s: %s", tmp,
		                strerror(errno));
	if (build_guest(sys, &o, name, tmp)) {
		vm_rmtree(tmp);
		return 1;
	}
	if (rename(tmp, final) < 0) {
		int e = errno;
		vm_rmtree(tmp);
		return vm_error("%s: %s", final, strerror(e));
	}
	return 0;
}

/* ---- guests that must be stopped ---- */

/* `g` of `name`, stopped (or, with `suspended_ok`, Suspended: destroy takes
 * its saved state with it); 1 after a message otherwise. */
static int load_stopped(const struct vm_sys *sys, const char *name, struct vm_guest *g,
                        bool suspended_ok)
{
	struct vm_status st;
	char err[512], state[300];

	if (vm_guest_find(sys, name, g, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	vm_status_get(sys, g, &st);
	if (st.state == VM_SUSPENDED && !suspended_ok) {
		vm_guest_free(g);
		return vm_error("%s is suspended (vm start %s resumes it; vm start -d %s discards "
		                "its saved state)",
		                name, name, name);
	}
	if (st.state != VM_STOPPED && st.state != VM_SUSPENDED) {
		vm_status_format(&st, state, sizeof(state));
		vm_guest_free(g);
		return vm_error("%s is not stopped (%s)", name, state);
	}
	return 0;
}

/* ---- destroy ---- */

/* NAME@SNAP: a snapshot is the folder .snapshots/SNAP in the guest's. */
static int destroy_snapshot(const struct vm_sys *sys, const char *spec)
{
	char name[VM_NAME_MAX + 1], path[PATH_MAX], err[512];
	const char *snap = strchr(spec, '@') + 1;
	struct vm_guest g;
	int len = (int)(snap - 1 - spec);

	if (len > VM_NAME_MAX || !*snap || snap[0] == '.' || strchr(snap, '/'))
		return vm_error("%s: not a valid snapshot name", spec);
	snprintf(name, sizeof(name), "%.*s", len, spec);
	if (vm_require_write(sys, "destroy") < 0)
		return 1;
	if (vm_guest_find(sys, name, &g, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	vm_guest_free(&g);
	if (snprintf(path, sizeof(path), "%s/.snapshots/%s", g.dir, snap) >= (int)sizeof(path) ||
	    !vm_exists(path))
		return vm_error("%s: no such snapshot", spec);
	return vm_rmtree(path) < 0 ? vm_error("%s: %s", path, strerror(errno)) : 0;
}

int cmd_destroy(struct vm_sys *sys, int argc, char **argv)
{
	bool force = false;
	struct vm_guest g;
	int c;

	optind = 1;
	while ((c = getopt(argc, argv, "+f")) != -1) {
		if (c != 'f')
			return vm_error("usage: vm destroy [-f] name");
		force = true;
	}
	if (optind != argc - 1)
		return vm_error("usage: vm destroy [-f] name[@snapshot]");
	if (strchr(argv[optind], '@'))
		return destroy_snapshot(sys, argv[optind]);
	if (vm_require_write(sys, "destroy") < 0 || load_stopped(sys, argv[optind], &g, true))
		return 1;
	if (!force &&
	    (c = vm_confirm("Are you sure you want to completely remove this virtual machine",
	                    "destroy")) <= 0) {
		vm_guest_free(&g);
		return c < 0;
	}
	int rc = vm_rmtree(g.dir) < 0 ? vm_error("%s: %s", g.dir, strerror(errno)) : 0;
	vm_guest_free(&g);
	return rc;
}

/* ---- rename ---- */

int cmd_rename(struct vm_sys *sys, int argc, char **argv)
{
	char err[512], newdir[PATH_MAX], oldconf[PATH_MAX], newconf[PATH_MAX],
	    file[VM_NAME_MAX + 8];
	struct vm_guest g, other;
	const char *newname;

	if (argc != 3)
		return vm_error("usage: vm rename name new-name");
	newname = argv[2];
	if (!vm_name_valid(newname))
		return vm_error("invalid virtual machine name - '%s'", newname);
	if (vm_guest_find(sys, newname, &other, err, sizeof(err)) == 0) {
		vm_guest_free(&other);
		return vm_error("%s already exists", other.dir);
	}
	if (vm_require_write(sys, "rename") < 0 || load_stopped(sys, argv[1], &g, false))
		return 1;
	vm_guest_free(&g);
	snprintf(file, sizeof(file), "%s.conf", g.name);
	/* The new folder is a sibling in the same datastore. */
	int parent = (int)(strrchr(g.dir, '/') - g.dir);
	if (snprintf(newdir, sizeof(newdir), "%.*s/%s", parent, g.dir, newname) >=
	        (int)sizeof(newdir) ||
	    vm_path(oldconf, newdir, file))
		return vm_error("path too long");
	snprintf(file, sizeof(file), "%s.conf", newname);
	if (vm_path(newconf, newdir, file))
		return vm_error("path too long");
	if (vm_exists(newdir))
		return vm_error("directory %s already exists", newdir);
	if (rename(g.dir, newdir) < 0)
		return vm_error("failed to rename %s: %s", g.dir, strerror(errno));
	if (rename(oldconf, newconf) < 0) {
		int e = errno;
		rename(newdir, g.dir);
		return vm_error("failed to rename the configuration file: %s", strerror(e));
	}
	return 0;
}

/* ---- configure ---- */

/* Whether khyve could run the guest with the edited settings `conf`. */
static int check_edit(const struct vm_sys *sys, const struct vm_guest *g, struct rcconf *conf,
                      char *err, size_t errlen)
{
	struct vm_guest edited = *g;

	edited.conf = conf;
	return vm_check_settings(sys, &edited, err, errlen);
}

/* Edit a copy; install it only when it parses and its values are usable,
 * else keep it for the user. */
int cmd_configure(struct vm_sys *sys, int argc, char **argv)
{
	char err[512], tmp[PATH_MAX], *cmd, *text;
	const char *editor = getenv("EDITOR");
	struct vm_guest g;
	struct rcconf *edited;
	int status;

	if (argc != 2)
		return vm_error("usage: vm configure name");
	if (vm_guest_find(sys, argv[1], &g, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (vm_require_write(sys, "configure") < 0 || !(text = rcconf_format(g.conf)))
		goto fail;
	if (snprintf(tmp, sizeof(tmp), "%s.edit", g.conf_path) >= (int)sizeof(tmp)) {
		vm_error("path too long");
		goto fail;
	}
	/* NAME.conf.edit is ours (an edit kept from last time): never a link. */
	int fd = vm_open_own(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		if (!f && fd >= 0)
			close(fd);
		free(text);
		vm_error("%s: %s", tmp, vm_open_own_strerror(errno));
		goto fail;
	}
	free(text);
	if (asprintf(&cmd, "%s \"$1\"", editor && *editor ? editor : "vi") < 0)
		goto fail;
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, "sh", tmp, (char *)NULL);
		_exit(127);
	}
	free(cmd);
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		vm_error("the editor failed; your edit is kept in %s", tmp);
		goto fail;
	}
	if (!(edited = rcconf_load(tmp, err, sizeof(err)))) {
		vm_error("%s (not saved; your edit is kept there)", err);
		goto fail;
	}
	if (check_edit(sys, &g, edited, err, sizeof(err)) < 0) {
		rcconf_free(edited);
		vm_error("%s (not saved; your edit is kept in %s)", err, tmp);
		goto fail;
	}
	rcconf_free(edited);
	if (rename(tmp, g.conf_path) < 0) {
		vm_error("%s: %s; your edit is kept in %s", g.conf_path, strerror(errno), tmp);
		goto fail;
	}
	vm_guest_free(&g);
	return 0;
fail:
	vm_guest_free(&g);
	return 1;
}

/* ---- add ---- */

/* Index of the first unused `prefix`N`suffix` key. */
static unsigned next_index(const struct rcconf *conf, const char *prefix, const char *suffix)
{
	char key[48];
	unsigned n = 0;

	for (;; n++) {
		snprintf(key, sizeof(key), "%s%u%s", prefix, n, suffix);
		if (!rcconf_get(conf, key) || n >= 255)
			return n;
	}
}

static int add_disk(struct vm_guest *g, const char *type, const char *size)
{
	unsigned n = next_index(g->conf, "disk", "_name");
	char key[32], name[32], path[PATH_MAX], err[512];
	const char *emul = "virtio-blk";
	unsigned long long bytes;

	if (type && strcmp(type, "file"))
		return vm_error("-t %s: only file disks are supported (zvols need ZFS)", type);
	if (!size || vm_parse_size(size, &bytes) < 0)
		return vm_error("-s %s: not a size (e.g. 20G)", size ? size : "(missing)");
	if (n > 0) {
		snprintf(key, sizeof(key), "disk%u_type", n - 1);
		emul = rcconf_get_default(g->conf, key, emul);
	}
	snprintf(name, sizeof(name), "disk%u.img", n);
	if (vm_path(path, g->dir, name) || vm_make_sparse(path, bytes) < 0)
		return vm_error("%s/%s: %s", g->dir, name, strerror(errno));
	snprintf(key, sizeof(key), "disk%u_name", n);
	rcconf_set(g->conf, key, name);
	snprintf(key, sizeof(key), "disk%u_type", n);
	rcconf_set(g->conf, key, emul);
	snprintf(key, sizeof(key), "disk%u_dev", n);
	rcconf_set(g->conf, key, "file");
	if (vm_guest_save(g, err, sizeof(err)) < 0) {
		unlink(path);
		return vm_error("%s", err);
	}
	return 0;
}

static int add_network(struct vm_guest *g, const char *sw)
{
	unsigned n = next_index(g->conf, "network", "_type");
	char key[32], err[512], mac[18];
	const char *emul = "virtio-net";

	if (!sw || !rcconf_value_valid(sw) || !*sw)
		return vm_error("usage: vm add -d network -s switch name");
	if (n > 0) {
		snprintf(key, sizeof(key), "network%u_type", n - 1);
		emul = rcconf_get_default(g->conf, key, emul);
	}
	snprintf(key, sizeof(key), "network%u_type", n);
	rcconf_set(g->conf, key, emul);
	snprintf(key, sizeof(key), "network%u_switch", n);
	rcconf_set(g->conf, key, sw);
	snprintf(key, sizeof(key), "network%u_mac", n);
	vm_mac(mac);
	rcconf_set(g->conf, key, mac);
	return vm_guest_save(g, err, sizeof(err)) < 0 ? vm_error("%s", err) : 0;
}

int cmd_add(struct vm_sys *sys, int argc, char **argv)
{
	const char *device = NULL, *type = NULL, *sopt = NULL;
	char err[512];
	struct vm_guest g;
	int c, rc;

	optind = 1;
	while ((c = getopt(argc, argv, "+d:t:s:")) != -1) {
		switch (c) {
		case 'd':
			device = optarg;
			break;
		case 't':
			type = optarg;
			break;
		case 's':
			sopt = optarg;
			break;
		default:
			return vm_error(
			    "usage: vm add [-d disk|network] [-t type] [-s size|switch] name");
		}
	}
	if (optind != argc - 1 || !device)
		return vm_error("usage: vm add [-d disk|network] [-t type] [-s size|switch] name");
	if (strcmp(device, "disk") && strcmp(device, "network"))
		return vm_error("device must be one of the following: disk network");
	if (vm_require_write(sys, "add") < 0)
		return 1;
	if (vm_guest_find(sys, argv[optind], &g, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	rc = !strcmp(device, "disk") ? add_disk(&g, type, sopt) : add_network(&g, sopt);
	vm_guest_free(&g);
	return rc;
}
