#include "lib/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* How to say `max` to the user: MiB when it is a whole number of them. */
static void describe_max(size_t max, char *buf, size_t buflen)
{
	if (max >= (1u << 20) && (max & ((1u << 20) - 1)) == 0)
		snprintf(buf, buflen, "%zu MiB", max >> 20);
	else
		snprintf(buf, buflen, "%zu bytes", max);
}

uint8_t *file_read_all(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *buf = NULL;
	char limit[32];

	if (f == NULL) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > max) {
		describe_max(max, limit, sizeof(limit));
		snprintf(err, errlen, "%s: not a regular file of 1 byte to %s", path, limit);
		goto out;
	}
	buf = malloc((size_t)st.st_size);
	if (buf == NULL || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		snprintf(err, errlen, "cannot read %s", path);
		free(buf);
		buf = NULL;
		goto out;
	}
	*len = (size_t)st.st_size;
out:
	fclose(f);
	return buf;
}

int file_open_append(const char *path, char *err, size_t errlen)
{
	const int flags = O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	int fd = open(path, flags | O_CREAT | O_NOFOLLOW, 0644);
	struct stat st;

	if (fd >= 0)
		return fd; /* O_NONBLOCK means nothing to a regular file */
	if (errno != ELOOP) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	fd = open(path, flags); /* a symlink: never creates, checked below */
	if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode))
		return fd;
	if (fd >= 0)
		close(fd);
	snprintf(err, errlen, "%s is a symlink%s: khyve does not write through symlinks to files",
	         path, fd >= 0 ? " to a regular file" : "");
	return -1;
}

int file_rename_noreplace(const char *from, const char *to)
{
	struct stat st;

	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	/* File systems without RENAME_NOREPLACE: check, then rename. */
	if (lstat(to, &st) == 0) {
		errno = EEXIST;
		return -1;
	}
	return rename(from, to);
}

/* fsync the folder `path` is in (".", or "/" for a file right below it). */
static int sync_parent(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd, rc;

	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (snprintf(dir, sizeof(dir), "%.*s", (int)(slash == path ? 1 : slash - path),
	                  path) >= (int)sizeof(dir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

int file_rename_durable(const char *tmp, const char *path, bool replace)
{
	if ((replace ? rename(tmp, path) : file_rename_noreplace(tmp, path)) < 0)
		return -1;
	return sync_parent(path) < 0 ? -2 : 0;
}

int file_first_line(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "re");
	int e;

	out[0] = '\0';
	if (f == NULL)
		return -1;
	if (fgets(out, (int)len, f) == NULL) {
		e = ferror(f) ? errno : ENODATA;
		out[0] = '\0';
		fclose(f);
		errno = e;
		return -1;
	}
	out[strcspn(out, "\n")] = '\0';
	fclose(f);
	return 0;
}
