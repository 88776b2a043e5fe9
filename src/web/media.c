/*
 * A running guest's CD/DVD drives for the web pages (docs/web.md, "the
 * drives card"): the drives as vm.info lists them, and POST
 * /api/guests/NAME/media, which puts an ISO of $vm_dir/.iso in a drive or
 * takes the medium out.  khyve runs jailed and cannot open the ISO itself:
 * the daemon opens it and passes the descriptor (apic_media_insert(),
 * docs/api.md "Changing a CD's medium").  Every call to khyve is bounded by
 * WEB_API_TIMEOUT_MS, as the event loop waits for it.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/apiclient.h"
#include "vm/live.h"
#include "vm/state.h"
#include "web/guests.h"

#define DRIVE_NAME_MAX 15 /* docs/api.md: letters, digits, '-', '_' */

cJSON *web_guest_drives_json(const cJSON *info)
{
	const cJSON *drives = cJSON_GetObjectItemCaseSensitive(info, "drives"), *d;
	cJSON *a = cJSON_CreateArray();

	cJSON_ArrayForEach(d, drives)
	{
		const cJSON *dev = cJSON_GetObjectItemCaseSensitive(d, "device");
		const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(d, "bytes");
		cJSON *o;

		if (!d->string || !cJSON_IsObject(d))
			continue;
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", d->string);
		cJSON_AddStringToObject(o, "device", cJSON_IsString(dev) ? dev->valuestring : "");
		cJSON_AddBoolToObject(o, "medium",
		                      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "medium")));
		cJSON_AddBoolToObject(o, "locked",
		                      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "locked")));
		cJSON_AddNumberToObject(o, "bytes", cJSON_IsNumber(bytes) ? bytes->valuedouble : 0);
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

static bool drive_name_valid(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= DRIVE_NAME_MAX &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == n;
}

int web_media_parse(const char *body, struct web_media_req *m, char *err, size_t errlen)
{
	cJSON *j = cJSON_Parse(body), *v;
	const cJSON *drive, *iso, *force;
	int rc = -1;

	memset(m, 0, sizeof(*m));
	if (!cJSON_IsObject(j)) {
		snprintf(err, errlen, "body: want {\"drive\":\"cd0\",\"iso\":NAME.iso|null}");
		goto out;
	}
	cJSON_ArrayForEach(v, j)
	{
		if (strcmp(v->string, "drive") && strcmp(v->string, "iso") &&
		    strcmp(v->string, "force")) {
			snprintf(err, errlen, "%.64s: unknown field", v->string);
			goto out;
		}
	}
	drive = cJSON_GetObjectItemCaseSensitive(j, "drive");
	iso = cJSON_GetObjectItemCaseSensitive(j, "iso");
	force = cJSON_GetObjectItemCaseSensitive(j, "force");
	if (!cJSON_IsString(drive) || !drive_name_valid(drive->valuestring)) {
		snprintf(err, errlen, "drive: want a drive name such as cd0");
		goto out;
	}
	if (!iso || !(cJSON_IsNull(iso) || cJSON_IsString(iso))) {
		snprintf(err, errlen, "iso: want the name of an ISO, or null to eject");
		goto out;
	}
	if (cJSON_IsString(iso) && !web_iso_name_valid(iso->valuestring)) {
		snprintf(err, errlen,
		         "iso: '%.128s' is not an ISO name ([A-Za-z0-9][A-Za-z0-9._+-]*.iso)",
		         iso->valuestring);
		goto out;
	}
	if (force && !cJSON_IsBool(force)) {
		snprintf(err, errlen, "force: want true or false");
		goto out;
	}
	snprintf(m->drive, sizeof(m->drive), "%s", drive->valuestring);
	if (cJSON_IsString(iso))
		snprintf(m->iso, sizeof(m->iso), "%s", iso->valuestring);
	m->force = cJSON_IsTrue(force);
	rc = 0;
out:
	cJSON_Delete(j);
	return rc;
}

/* khyve's answer `status` with its {"error":...} body `json` passed on. */
static int reply_api(struct web_resp *rs, long status, const char *json)
{
	cJSON *j;
	const cJSON *e;
	int rc;

	if (status == 204) {
		rs->status = 204;
		return 0;
	}
	j = json ? cJSON_Parse(json) : NULL;
	e = cJSON_GetObjectItemCaseSensitive(j, "error");
	rc = web_reply_error(rs, status >= 400 && status < 600 ? (int)status : 500, "%s",
	                     cJSON_IsString(e) ? e->valuestring : "khyve answered no reason");
	cJSON_Delete(j);
	return rc;
}

/* The ISO `name` of $vm_dir/.iso opened read-only (a plain file, no link
 * followed, never blocking), or -1 with the HTTP status in *status. */
static int open_iso(const struct vm_sys *sys, const char *name, int *status, char *err,
                    size_t errlen)
{
	char dir[PATH_MAX];
	struct stat sb;
	int dfd, fd = -1, flags;

	*status = 404;
	if (snprintf(dir, sizeof(dir), "%s/.iso", sys->vm_dir) >= (int)sizeof(dir) ||
	    (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "iso: no ISO folder %s", dir);
		return -1;
	}
	/* O_NONBLOCK: a FIFO put there would block the event loop's open. */
	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	close(dfd);
	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "iso: no such ISO in %s: %s", dir, name);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
		*status = 500;
		snprintf(err, errlen, "iso: %s: %s", name, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int media_insert(struct web_req *rq, struct web_resp *rs, const char *sock,
                        const struct web_media_req *m)
{
	char err[PATH_MAX + 256];
	long status = 0;
	int fd, code;
	enum api_call_rc rc;

	if ((fd = open_iso(rq->ctx->sys, m->iso, &code, err, sizeof(err))) < 0)
		return web_reply_error(rs, code, "%s", err);
	rc = apic_media_insert(sock, m->drive, m->force, fd, WEB_API_TIMEOUT_MS, &status, err,
	                       sizeof(err));
	close(fd);
	if (rc == API_CALL_NO_VM)
		return web_reply_error(rs, 409, "the guest is not running");
	if (rc != API_CALL_OK)
		return web_reply_error(rs, 500, "khyve: %s", err);
	return reply_api(rs, status, err[0] ? err : NULL);
}

static int media_eject(struct web_resp *rs, const char *sock, const struct web_media_req *m)
{
	char body[96], err[PATH_MAX + 128];
	struct apic_reply r;
	enum api_call_rc rc;
	int ret;

	snprintf(body, sizeof(body), "{\"drive\":\"%s\",\"force\":%s}", m->drive,
	         m->force ? "true" : "false");
	rc = apic_call(sock, "PUT", "vm.media-eject", body, WEB_API_TIMEOUT_MS, &r, err,
	               sizeof(err));
	if (rc == API_CALL_NO_VM)
		return web_reply_error(rs, 409, "the guest is not running");
	if (rc != API_CALL_OK)
		return web_reply_error(rs, 500, "khyve: %s", err);
	ret = reply_api(rs, r.status, r.body);
	apic_reply_free(&r);
	return ret;
}

int web_guest_media(struct web_req *rq, struct web_resp *rs, const struct vm_guest *g)
{
	struct web_media_req m;
	char sock[PATH_MAX], err[512];
	int rc;

	if (web_media_parse(rq->body, &m, err, sizeof(err)) < 0)
		return web_reply_error(rs, 400, "%s", err);
	if (snprintf(sock, sizeof(sock), "%s/%s", g->dir, VM_API_SOCKET) >= API_SOCKET_MAX)
		return web_reply_error(rs, 500, "%s: the API socket's path is too long", g->name);
	rc = m.iso[0] ? media_insert(rq, rs, sock, &m) : media_eject(rs, sock, &m);
	fprintf(stderr, "vm web: %s: %s %s %s%s%s%s -> %d\n", rq->session ? rq->session->user : "",
	        g->name, m.iso[0] ? "insert" : "eject", m.drive, m.iso[0] ? " " : "", m.iso,
	        m.force ? " (force)" : "", rs->status);
	return rc;
}
