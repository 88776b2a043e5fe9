/*
 * ISO uploads (POST /api/isos?name=NAME.iso): the body is streamed into
 * $vm_dir/.iso/.NAME.part and renamed to NAME only once exactly
 * Content-Length bytes are on disk (fsync first), so no partial ISO ever
 * has the final name; a cut-off or failed upload removes the part file.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "lib/file.h"
#include "vm/storage.h"
#include "web/guests.h"

#define ISO_NAME_MAX 128
#define SPARE_BYTES  (64ULL << 20) /* free space an upload must leave */

struct web_upload {
	char dir[PATH_MAX];   /* $vm_dir/.iso */
	char part[PATH_MAX];  /* dir/.NAME.part */
	char final[PATH_MAX]; /* dir/NAME */
	int fd;
	unsigned long long length, written;
};

bool web_iso_name_valid(const char *name)
{
	static const char first[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	size_t n = strlen(name);

	return n > 4 && n <= ISO_NAME_MAX && strchr(first, name[0]) && name[0] &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+-") ==
	           n &&
	       !strcmp(name + n - 4, ".iso");
}

/* begin's refusal: NULL with `status` and the message. */
static struct web_upload *refuse(struct web_upload *u, int *status, int code, char *err,
                                 size_t errlen, const char *fmt, const char *arg)
{
	free(u);
	*status = code;
	snprintf(err, errlen, fmt, arg);
	return NULL;
}

struct web_upload *web_upload_begin(struct web_ctx *ctx, const char *name,
                                    unsigned long long length, int *status, char *err,
                                    size_t errlen)
{
	struct web_upload *u = calloc(1, sizeof(*u));
	struct statvfs vfs;
	unsigned long long avail;

	if (!u)
		return refuse(u, status, 500, err, errlen, "%s", "out of memory");
	if (!web_iso_name_valid(name))
		return refuse(u, status, 400, err, errlen,
		              "%s: not an ISO name ([A-Za-z0-9][A-Za-z0-9._+-]*.iso, at most 128)",
		              name);
	if (vm_path(u->dir, ctx->sys->vm_dir, ".iso") < 0 ||
	    snprintf(u->part, sizeof(u->part), "%s/.%s.part", u->dir, name) >= PATH_MAX ||
	    vm_path(u->final, u->dir, name) < 0)
		return refuse(u, status, 400, err, errlen, "%s: path too long", name);
	if (mkdir(u->dir, 0755) < 0 && errno != EEXIST)
		return refuse(u, status, 500, err, errlen, "cannot create %s", u->dir);
	if (storage_path_exists(u->final))
		return refuse(u, status, 409, err, errlen, "%s exists already", name);
	if (statvfs(u->dir, &vfs) < 0)
		return refuse(u, status, 500, err, errlen, "%s: cannot read its free space",
		              u->dir);
	avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
	if (length > avail || avail - length < SPARE_BYTES)
		return refuse(u, status, 507, err, errlen,
		              "%s does not fit: the ISO store has too little free space", name);
	u->fd = open(u->part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (u->fd < 0)
		return refuse(u, status, errno == EEXIST ? 409 : 500, err, errlen,
		              errno == EEXIST ? "%s is being uploaded already"
		                              : "%s: cannot create it",
		              name);
	u->length = length;
	*status = 0;
	return u;
}

/* -1 with errno: EFBIG past Content-Length, ENOSPC/EDQUOT, EIO, ... */
int web_upload_write(struct web_upload *u, const void *buf, size_t len)
{
	const char *p = buf;

	if (len > u->length - u->written) {
		errno = EFBIG; /* more than Content-Length: a confused client */
		return -1;
	}
	while (len) {
		ssize_t n = write(u->fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = ENOSPC;
			return -1;
		}
		p += n;
		len -= (size_t)n;
		u->written += (unsigned long long)n;
	}
	return 0;
}

/* Drop the part file and the handle. */
void web_upload_abort(struct web_upload *u)
{
	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	unlink(u->part);
	free(u);
}

int web_upload_finish(struct web_upload *u, char *err, size_t errlen)
{
	const char *name = strrchr(u->final, '/') + 1;

	if (u->written != u->length) {
		snprintf(err, errlen, "%s: cut off after %llu of %llu bytes", name, u->written,
		         u->length);
		web_upload_abort(u);
		return -1;
	}
	if (fsync(u->fd) < 0 || close(u->fd) < 0) {
		u->fd = -1;
		snprintf(err, errlen, "%s: cannot write it: %s", name, strerror(errno));
		web_upload_abort(u);
		return -1;
	}
	u->fd = -1;
	/* A folder that cannot be synced leaves the ISO in place all the same. */
	if (file_rename_durable(u->part, u->final, false) == -1) {
		snprintf(err, errlen,
		         errno == EEXIST ? "%s exists already" : "%s: cannot rename it", name);
		web_upload_abort(u);
		return -1;
	}
	free(u);
	return 0;
}

int web_upload_status(int err)
{
	return err == ENOSPC || err == EDQUOT ? 507 : err == EFBIG ? 413 : 500;
}

int web_upload_reply(struct web_resp *rs, const char *name, unsigned long long size)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "name", name);
	cJSON_AddNumberToObject(o, "size_bytes", (double)size);
	return web_reply_json(rs, 201, o);
}
