/*
 * Host paths a guest's config names, confined to its folder, and files vm
 * creates without following links (paths.h).
 *
 * The resolver walks the path one component at a time with lstat() and
 * readlink(), as the kernel's path walk does (path_resolution(7)), rather
 * than calling realpath(3): realpath fails on a path whose end does not
 * exist yet, and a dangling link to /etc/... is exactly what it must see
 * through.  Where the walk meets a missing component it stops following
 * links: nothing below a missing folder can be a link.
 */
#include "vm/paths.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vm/vm.h"

#define MAX_LINKS 40 /* as the kernel's MAXSYMLINKS */

/* Append "/COMP" (n bytes) to out (*len bytes); -1 ENAMETOOLONG. */
static int push(char out[PATH_MAX], size_t *len, const char *comp, size_t n)
{
	if (*len + 1 + n >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	out[(*len)++] = '/';
	memcpy(out + *len, comp, n);
	*len += n;
	out[*len] = '\0';
	return 0;
}

/* Drop the last component of out ("" is the root folder). */
static void pop(char *out, size_t *len)
{
	while (*len > 0 && out[--*len] != '/')
		;
	out[*len] = '\0';
}

/* Replace the walk's work list by TARGET/REST (a link's target, then what follows it). */
static int requeue(char *todo, size_t size, const char *target, const char *rest)
{
	char next[2 * PATH_MAX];
	int n = snprintf(next, sizeof(next), "%s/%s", target, rest);

	if (n < 0 || (size_t)n >= size) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(todo, next, (size_t)n + 1);
	return 0;
}

/* out (len bytes) is a link: continue the walk at its target. */
static int follow(char out[PATH_MAX], size_t *len, char *todo, size_t size, size_t *pos)
{
	char target[PATH_MAX];
	ssize_t n = readlink(out, target, sizeof(target) - 1);

	if (n < 0)
		return -1;
	target[n] = '\0';
	pop(out, len);
	if (target[0] == '/')
		*len = 0, out[0] = '\0';
	if (requeue(todo, size, target, todo + *pos) < 0)
		return -1;
	*pos = 0;
	return 0;
}

int vm_path_resolve(const char *path, char out[PATH_MAX])
{
	char todo[2 * PATH_MAX];
	size_t len = 0, pos = 0;
	unsigned links = 0;
	bool missing = false;

	if (path[0] != '/') {
		errno = EINVAL;
		return -1;
	}
	if (strlen(path) >= sizeof(todo)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(todo, path);
	out[0] = '\0';
	for (;;) {
		struct stat st;
		const char *comp;
		size_t n;

		pos += strspn(todo + pos, "/");
		comp = todo + pos;
		if ((n = strcspn(comp, "/")) == 0)
			break;
		pos += n;
		if (n == 1 && comp[0] == '.')
			continue;
		if (n == 2 && comp[0] == '.' && comp[1] == '.') {
			if (missing) { /* the kernel fails here too */
				errno = ENOENT;
				return -1;
			}
			pop(out, &len);
			continue;
		}
		if (push(out, &len, comp, n) < 0)
			return -1;
		if (missing)
			continue;
		if (lstat(out, &st) < 0) {
			if (errno != ENOENT)
				return -1;
			missing = true;
			continue;
		}
		if (!S_ISLNK(st.st_mode))
			continue;
		if (++links > MAX_LINKS) {
			errno = ELOOP;
			return -1;
		}
		if (follow(out, &len, todo, sizeof(todo), &pos) < 0)
			return -1;
	}
	if (len == 0)
		strcpy(out, "/");
	return 0;
}

/* A ".." component anywhere in `name`. */
static bool has_dotdot(const char *name)
{
	for (const char *p = name; *p;) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return true;
		p += n;
		p += strspn(p, "/");
	}
	return false;
}

/* `path` (resolved) is strictly below `root` (resolved). */
static bool is_below(const char *path, const char *root)
{
	size_t rl = strlen(root);

	if (strcmp(root, "/") == 0)
		return strcmp(path, "/") != 0;
	return strncmp(path, root, rl) == 0 && path[rl] == '/' && path[rl + 1] != '\0';
}

/* `root` made absolute (against the current folder) and resolved. */
static int resolve_root(const char *root, char out[PATH_MAX])
{
	char cwd[PATH_MAX], abs[PATH_MAX];

	if (root[0] == '/')
		return vm_path_resolve(root, out);
	if (getcwd(cwd, sizeof(cwd)) == NULL || vm_path(abs, cwd, root) < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return vm_path_resolve(abs, out);
}

int vm_path_confine(const char *root, const char *name, char out[PATH_MAX], char *why,
                    size_t whylen)
{
	char root_real[PATH_MAX], real[PATH_MAX], abs[PATH_MAX];
	bool absolute = name[0] == '/';

	if (has_dotdot(name)) {
		snprintf(why, whylen, "'..' is not allowed");
		return -1;
	}
	if (absolute ? snprintf(out, PATH_MAX, "%s", name) >= PATH_MAX
	             : vm_path(out, root, name) < 0) {
		snprintf(why, whylen, "path too long");
		return -1;
	}
	if (resolve_root(root, root_real) < 0) {
		snprintf(why, whylen, "%s: %s", root, strerror(errno));
		return -1;
	}
	if (snprintf(abs, sizeof(abs), "%s%s%s", out[0] == '/' ? "" : root_real,
	             out[0] == '/' ? "" : "/", out[0] == '/' ? out : name) >= (int)sizeof(abs) ||
	    vm_path_resolve(abs, real) < 0) {
		snprintf(why, whylen, "%s: %s", out, strerror(errno));
		return -1;
	}
	if (is_below(real, root_real))
		return 0;
	if (strcmp(real, root_real) == 0)
		snprintf(why, whylen, "it names %s itself, not a file in it", root);
	else if (absolute)
		snprintf(why, whylen, "it is outside %s", root);
	else
		snprintf(why, whylen, "it leads outside %s through a symbolic link (to %s)", root,
		         real);
	return -1;
}

/* lstat() says `path` is something other than a plain file of its own. */
static bool foreign(const struct stat *st)
{
	return !S_ISREG(st->st_mode) || st->st_nlink > 1;
}

/* The fd just opened is a plain file of its own; then blocking and O_TRUNC as asked. */
static int settle(int fd, int flags)
{
	struct stat st;
	int fl;

	if (fstat(fd, &st) < 0)
		return -1;
	if (foreign(&st)) {
		errno = EPERM;
		return -1;
	}
	if (!(flags & O_NONBLOCK) &&
	    ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0))
		return -1;
	return (flags & O_TRUNC) && ftruncate(fd, 0) < 0 ? -1 : 0;
}

int vm_own_file_ok(const char *path)
{
	struct stat st;

	if (lstat(path, &st) == 0 && (S_ISLNK(st.st_mode) || foreign(&st))) {
		errno = S_ISLNK(st.st_mode) ? ELOOP : EPERM;
		return -1;
	}
	return 0;
}

int vm_open_own(const char *path, int flags, mode_t mode)
{
	int fd;

	/* Look first: opening a device or FIFO can have effects of its own. */
	if (vm_own_file_ok(path) < 0)
		return -1;
	fd = open(path, (flags & ~O_TRUNC) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
	if (fd < 0) {
		if (errno == ENXIO) /* a FIFO put there since */
			errno = EPERM;
		return -1;
	}
	if (settle(fd, flags) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

const char *vm_open_own_strerror(int err)
{
	if (err == ELOOP)
		return "a symbolic link is there (vm does not follow it; remove it)";
	if (err == EPERM)
		return "something other than vm's own plain file is there (remove it)";
	return strerror(err);
}
