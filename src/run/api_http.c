/*
 * The API's socket and HTTP glue (see api.h): the socket path rules, the
 * lock file, libmicrohttpd driven by the "api" thread, and the hand-off
 * of each complete request to api_handle().  Limits: request line and
 * headers fit libmicrohttpd's per-connection memory pool (it answers 431
 * or 414 beyond), bodies are capped here (413), connections are shut
 * down API_TIMEOUT_S after they opened (idle or not), at most
 * API_MAX_CONNS at once.  vm.media-insert with `Upgrade: khyve-fd` is
 * answered 101 here and its fd received on the raw socket (unix(7)
 * SCM_RIGHTS, at most API_FD_WAIT_MS) before api_media_insert_fd().
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/machine.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/sandbox.h"
#include "run/api.h"

/* libmicrohttpd's pool per connection: the 8 KiB of headers plus its
 * buffers and bookkeeping. */
#define API_CONN_MEMORY (API_MAX_HEADERS * 2)
#define API_ROUND_MS    1000 /* the thread looks at the sandbox at least this often */

/* ---- the socket path ---- */

static bool name_fits_path(const char *name)
{
	return name != NULL && name[0] != '\0' && name[0] != '.' && strchr(name, '/') == NULL;
}

/*
 * The path of docs/api.md into a->path: 1 a path, 0 none wanted (off, or
 * no default here: warned), -1 with `err`.
 */
static int socket_path(struct api *a, char *err, size_t errlen)
{
	const char *v = config_get("api.socket"), *name = a->m->name, *xdg;
	int n;

	if (v != NULL && (strcmp(v, "off") == 0 || strcmp(v, "none") == 0))
		return 0;
	if (v != NULL && v[0] != '\0') {
		n = snprintf(a->path, sizeof(a->path), "%s", v);
	} else if (!name_fits_path(name)) {
		log_warn("api: the name '%s' cannot name a socket, so no API socket (give -o "
		         "api.socket=PATH)",
		         name != NULL ? name : "");
		return 0;
	} else if (geteuid() == 0) {
		n = snprintf(a->path, sizeof(a->path), "/run/khyve/%s.sock", name);
	} else if ((xdg = getenv("XDG_RUNTIME_DIR")) != NULL && xdg[0] == '/') {
		n = snprintf(a->path, sizeof(a->path), "%s/khyve/%s.sock", xdg, name);
	} else {
		log_warn("api: no XDG_RUNTIME_DIR, so no API socket (give -o api.socket=PATH)");
		return 0;
	}
	if (n < 0 || (size_t)n >= sizeof(a->path) - 5) { /* room for ".lock" too */
		snprintf(err, errlen, "api.socket: path longer than %d bytes", API_PATH_MAX - 6);
		if (v != NULL && v[0] != '\0')
			return -1;
		log_warn("%s; no API socket", err); /* the default: run without */
		err[0] = '\0';
		return 0;
	}
	return 1;
}

/* Split a->path into its directory (opened as a->dir_fd, created when
 * missing) and a->base. */
static int open_dir(struct api *a, char *err, size_t errlen)
{
	char dir[API_PATH_MAX];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", a->path);
	slash = strrchr(dir, '/');
	if (slash == NULL) {
		snprintf(dir, sizeof(dir), ".");
		snprintf(a->base, sizeof(a->base), "%s", a->path);
	} else {
		snprintf(a->base, sizeof(a->base), "%s", slash + 1);
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	if (a->base[0] == '\0') {
		snprintf(err, errlen, "api.socket: '%s' names a directory", a->path);
		return -1;
	}
	if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "api.socket: cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	a->dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (a->dir_fd < 0) {
		snprintf(err, errlen, "api.socket: %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* One khyve per name: an exclusive lock on PATH.lock (never deleted). */
static int take_lock(struct api *a, char *err, size_t errlen)
{
	char lock[API_PATH_MAX + 8];

	snprintf(lock, sizeof(lock), "%s.lock", a->base);
	a->lock_fd = openat(a->dir_fd, lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (a->lock_fd < 0) {
		snprintf(err, errlen, "api.socket: %s.lock: %s", a->path, strerror(errno));
		return -1;
	}
	if (flock(a->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			/* The holder's name is not known here: it may differ from
			 * ours when the socket was given with -o api.socket. */
			snprintf(err, errlen, "another khyve runs with the API socket %s", a->path);
		else
			snprintf(err, errlen, "api.socket: lock %s.lock: %s", a->path,
			         strerror(errno));
		return -1;
	}
	return 0;
}

/* With the lock held: a socket left behind is stale; anything else stays. */
static int clear_stale(struct api *a, char *err, size_t errlen)
{
	struct stat st;

	if (fstatat(a->dir_fd, a->base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT
		           ? 0
		           : (snprintf(err, errlen, "api.socket: %s: %s", a->path, strerror(errno)),
		              -1);
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen,
		         "api.socket: %s exists and is not a socket (not replacing it)", a->path);
		return -1;
	}
	if (unlinkat(a->dir_fd, a->base, 0) < 0) {
		snprintf(err, errlen, "api.socket: cannot remove the stale %s: %s", a->path,
		         strerror(errno));
		return -1;
	}
	return 0;
}

static int bind_socket(struct api *a, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct group *g;
	mode_t old;
	int fd, rc;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", a->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "api.socket: socket: %s", strerror(errno));
		return -1;
	}
	old = umask(0117); /* the socket is born 0660 */
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, (int)API_MAX_CONNS) < 0) {
		snprintf(err, errlen, "api.socket: %s: %s", a->path, strerror(errno));
		close(fd);
		return -1;
	}
	g = getgrnam("khyve");
	if (g != NULL && fchownat(a->dir_fd, a->base, (uid_t)-1, g->gr_gid, 0) < 0)
		log_warn("api.socket: cannot give %s to group khyve: %s", a->path, strerror(errno));
	a->listen_fd = fd;
	a->bound = true;
	return 0;
}

int api_open(struct api *a, char *err, size_t errlen)
{
	int want = socket_path(a, err, errlen);

	if (want <= 0)
		return want;
	if (open_dir(a, err, errlen) < 0 && config_get("api.socket") == NULL) {
		/* The default place is not this user's to use: run without. */
		log_warn("%s; no API socket (give -o api.socket=PATH)", err);
		err[0] = '\0';
		return 0;
	}
	if (a->dir_fd < 0 || take_lock(a, err, errlen) < 0 || clear_stale(a, err, errlen) < 0 ||
	    bind_socket(a, err, errlen) < 0)
		return -1;
	return 0;
}

/* ---- libmicrohttpd ---- */

/* What one request has gathered so far. */
/* The calls whose file descriptor comes after a 101 (docs/api.md). */
enum fd_call { FD_CALL_NONE, FD_CALL_MEDIA, FD_CALL_CHECKPOINT, FD_CALL_SUSPEND, FD_CALL_MIGRATE };

struct request {
	char *body;
	size_t len;
	bool too_big;
	int exit_after; /* from the reply: requested once it is sent */
	int media_idx;  /* vm.media-insert: the drive the fd goes to */
	bool media_force;
	enum fd_call fd_call; /* which call the fd after the 101 is for */
};

static void free_request(struct request *rq)
{
	if (rq != NULL)
		free(rq->body);
	free(rq);
}

/* Content-Length beyond the cap is refused before the body comes. */
static bool declared_too_big(struct MHD_Connection *c)
{
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	char *end;
	unsigned long long n;

	if (v == NULL)
		return false;
	errno = 0;
	n = strtoull(v, &end, 10);
	return errno != 0 || n > API_MAX_BODY;
}

static void append_body(struct request *rq, const char *data, size_t n)
{
	char *p;

	if (rq->too_big || n > API_MAX_BODY - rq->len) {
		rq->too_big = true;
		return;
	}
	p = realloc(rq->body, rq->len + n);
	if (p == NULL) {
		rq->too_big = true;
		return;
	}
	memcpy(p + rq->len, data, n);
	rq->body = p;
	rq->len += n;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, struct request *rq, struct api_reply *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		api_reply_free(r);
		return MHD_NO;
	}
	r->body = NULL; /* the response owns it now */
	if (r->content_type != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
	rq->exit_after = r->exit_after;
	ret = MHD_queue_response(c, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* ---- vm.media-insert: the fd after the 101 (docs/api.md) ---- */

#define MEDIA_MAX_FDS 4 /* room to see (and close) more fds than the one wanted */

static void close_fds(const int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* The fds of one control message into fds[] (at most MEDIA_MAX_FDS in all). */
static void collect_fds(struct cmsghdr *cm, int *fds, unsigned *n)
{
	size_t bytes;
	int fd;

	if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
	    cm->cmsg_len < CMSG_LEN(0))
		return;
	bytes = cm->cmsg_len - CMSG_LEN(0);
	for (size_t off = 0; off + sizeof(int) <= bytes; off += sizeof(int)) {
		memcpy(&fd, CMSG_DATA(cm) + off, sizeof(int));
		if (*n < MEDIA_MAX_FDS)
			fds[(*n)++] = fd;
		else
			close(fd);
	}
}

/*
 * Wait (at most API_FD_WAIT_MS) for one byte carrying exactly one fd on
 * `sock`.  The fd, or -1 with `why` set (nothing came, the client closed,
 * no fd, several fds).  Extra fds are closed.
 */
static int receive_fd(int sock, const char **why)
{
	union {
		char buf[CMSG_SPACE(MEDIA_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	uint64_t deadline = monotonic_ns() + (uint64_t)API_FD_WAIT_MS * 1000000u;
	char byte;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	int fds[MEDIA_MAX_FDS];
	unsigned n = 0;
	ssize_t got;

	for (;;) {
		uint64_t now = monotonic_ns();
		struct pollfd p = {.fd = sock, .events = POLLIN};

		if (now >= deadline) {
			*why = "no file descriptor came within 2 s";
			return -1;
		}
		if (poll(&p, 1, (int)((deadline - now) / 1000000u) + 1) < 0 && errno != EINTR) {
			*why = "cannot wait for the file descriptor";
			return -1;
		}
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		got = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		break;
	}
	if (got <= 0) {
		*why = "the client closed before sending the file descriptor";
		return -1;
	}
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm))
		collect_fds(cm, fds, &n);
	if (n == 1 && !(msg.msg_flags & MSG_CTRUNC))
		return fds[0];
	close_fds(fds, n);
	*why =
	    n == 0 ? "no file descriptor came with the byte" : "send exactly one file descriptor";
	return -1;
}

/* The outcome as ONE line: {"status":204} or {"status":N,"error":"..."}. */
static void send_outcome(int sock, const struct api_reply *r)
{
	char line[512];
	int n;

	if (r->body != NULL && r->len > 2 && r->body[0] == '{')
		n = snprintf(line, sizeof(line), "{\"status\":%d,%.*s\n", r->status,
		             (int)(r->len - 1 < 400 ? r->len - 1 : 400), r->body + 1);
	else
		n = snprintf(line, sizeof(line), "{\"status\":%d}\n", r->status);
	if (n > 0 && (size_t)n < sizeof(line) &&
	    send(sock, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("api: vm.media-insert: cannot send the outcome: %s", strerror(errno));
}

static void on_upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in,
                        size_t extra_in_size, MHD_socket sock,
                        struct MHD_UpgradeResponseHandle *urh)
{
	struct api *a = cls;
	struct request *rq = con_cls;
	struct api_reply r;
	const char *why = NULL;
	int fd = -1;

	(void)c;
	(void)extra_in;
	/* Bytes read with the request lost their fd: the client did not wait
	 * for the 101. */
	if (extra_in_size > 0)
		why = "send the file descriptor after the 101, not with the request";
	else
		fd = receive_fd(sock, &why);
	if (fd < 0)
		api_reply_error(&r, 400, why);
	else if (rq != NULL && rq->fd_call == FD_CALL_MEDIA)
		api_media_insert_fd(a, rq->media_idx, rq->media_force, fd, &r);
	else if (rq != NULL && rq->fd_call == FD_CALL_MIGRATE)
		api_migrate_fd(a, fd, &r);
	else if (rq != NULL)
		api_state_fd(a, rq->fd_call == FD_CALL_SUSPEND, fd, &r);
	else
		api_media_insert_fd(a, -1, false, fd, &r);
	send_outcome(sock, &r);
	MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
	/* A suspend ends khyve once the client has its outcome. */
	if (r.exit_after >= 0)
		machine_request_exit(a->m, r.exit_after);
	api_reply_free(&r);
}

/* PUT vm.media-insert, vm.checkpoint, vm.suspend or vm.migrate with Upgrade: khyve-fd. */
static enum fd_call wants_fd_upgrade(struct MHD_Connection *c, const char *url, const char *method)
{
	const char *up = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_UPGRADE);

	if (url == NULL || method == NULL || strcmp(method, "PUT") != 0 || up == NULL ||
	    strcasecmp(up, "khyve-fd") != 0)
		return FD_CALL_NONE;
	if (api_url_names(url, "vm.media-insert"))
		return FD_CALL_MEDIA;
	if (api_url_names(url, "vm.checkpoint"))
		return FD_CALL_CHECKPOINT;
	if (api_url_names(url, "vm.suspend"))
		return FD_CALL_SUSPEND;
	if (api_url_names(url, "vm.migrate"))
		return FD_CALL_MIGRATE;
	return FD_CALL_NONE;
}

/* Check the request, then 101. */
static enum MHD_Result start_fd_upgrade(struct api *a, struct MHD_Connection *c, struct request *rq)
{
	const char *body = rq->too_big ? NULL : rq->body;
	size_t len = rq->too_big ? API_MAX_BODY + 1 : rq->len;
	struct MHD_Response *resp;
	struct api_reply r;
	enum MHD_Result ret;
	int ok;

	if (rq->fd_call == FD_CALL_MEDIA) {
		rq->media_idx = api_media_insert_check(a, body, len, &rq->media_force, &r);
		ok = rq->media_idx >= 0;
	} else {
		ok = api_state_check(a, body, len, &r) == 0;
	}
	if (!ok)
		return send_reply(c, rq, &r);
	api_reply_free(&r);
	resp = MHD_create_response_for_upgrade(on_upgraded, a);
	if (resp == NULL)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "khyve-fd");
	ret = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
	struct api *a = cls;
	struct request *rq = *con_cls;
	struct api_reply r;

	(void)version;
	if (rq == NULL) {
		rq = calloc(1, sizeof(*rq));
		if (rq == NULL)
			return MHD_NO;
		rq->exit_after = -1;
		rq->too_big = declared_too_big(c);
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_size > 0) {
		append_body(rq, upload_data, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	rq->fd_call = wants_fd_upgrade(c, url, method);
	if (rq->fd_call != FD_CALL_NONE)
		return start_fd_upgrade(a, c, rq);
	if (rq->too_big)
		api_handle(a, method, url, NULL, API_MAX_BODY + 1, &r);
	else
		api_handle(a, method, url, rq->body, rq->len, &r);
	return send_reply(c, rq, &r);
}

/* After the reply went out (or the connection broke): reset and power-off
 * take effect here, so the client sees its 204 first. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct api *a = cls;
	struct request *rq = *con_cls;

	(void)c;
	if (rq != NULL && rq->exit_after >= 0 && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		machine_request_exit(a->m, rq->exit_after);
	free_request(rq);
	*con_cls = NULL;
}

/* Keep track of each connection's age (MHD_OPTION_NOTIFY_CONNECTION). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
	struct api *a = cls;

	(void)socket_context;
	for (unsigned i = 0; i < API_MAX_CONNS; i++) {
		struct api_conn *k = &a->conns[i];

		if (toe == MHD_CONNECTION_NOTIFY_STARTED && k->c == NULL) {
			k->c = c;
			k->since_ns = monotonic_ns();
			return;
		}
		if (toe == MHD_CONNECTION_NOTIFY_CLOSED && k->c == c) {
			k->c = NULL;
			return;
		}
	}
}

/* libmicrohttpd's timeout counts idle time only: a client that sends a
 * byte every few seconds would keep its connection for hours.  Shut such
 * connections down once API_TIMEOUT_S old; libmicrohttpd then sees the end
 * of the stream and closes them. */
static void drop_old_connections(struct api *a)
{
	uint64_t now = monotonic_ns(), limit = (uint64_t)API_TIMEOUT_S * 1000000000u;

	for (unsigned i = 0; i < API_MAX_CONNS; i++) {
		struct api_conn *k = &a->conns[i];
		const union MHD_ConnectionInfo *info;

		if (k->c == NULL || k->since_ns == 0 || now - k->since_ns < limit)
			continue;
		info = MHD_get_connection_info(k->c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (info != NULL)
			shutdown(info->connect_fd, SHUT_RDWR);
		k->since_ns = 0;
	}
}

static void log_mhd(void *cls, const char *fmt, va_list ap)
{
	static struct ratelimit rl = RATELIMIT_INIT;
	char line[256];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_ratelimited(&rl, LOG_DEBUG, "api: %s", line);
}

/* ---- the thread ---- */

static int round_timeout_ms(struct api *a)
{
	MHD_UNSIGNED_LONG_LONG t;

	if (MHD_get_timeout(a->mhd, &t) == MHD_YES && t < API_ROUND_MS)
		return (int)t;
	return API_ROUND_MS;
}

static void *api_main(void *arg)
{
	struct api *a = arg;
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	struct pollfd p[3] = {{.fd = info != NULL ? info->epoll_fd : -1, .events = POLLIN},
	                      {.fd = a->stop_fd, .events = POLLIN},
	                      {.fd = a->wake_fd, .events = POLLIN}};
	uint64_t v;

	pthread_setname_np(pthread_self(), "api");
	for (;;) {
		/* started before the sandbox is armed: installs its filter here,
		 * woken by sandbox_arm() (wake_at_arm) */
		sandbox_thread_enter(SANDBOX_API);
		if (poll(p, 3, round_timeout_ms(a)) < 0 && errno != EINTR)
			break;
		if (p[1].revents != 0)
			break;
		if (p[2].revents != 0 && read(a->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			p[2].fd = -1;
		MHD_run(a->mhd);
		drop_old_connections(a);
	}
	return NULL;
}

static void wake_api(void *arg)
{
	struct api *a = arg;
	uint64_t one = 1;

	if (write(a->wake_fd, &one, sizeof(one)) < 0) {
		/* it installs its filter at its next round anyway */
	}
}

int api_start(struct api *a, char *err, size_t errlen)
{
	if (a->listen_fd < 0)
		return 0;
	a->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	a->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (a->stop_fd < 0 || a->wake_fd < 0) {
		snprintf(err, errlen, "api: eventfd: %s", strerror(errno));
		return -1;
	}
	a->mhd = MHD_start_daemon(
	    MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE, 0, NULL, NULL, on_request, a,
	    MHD_OPTION_LISTEN_SOCKET, (MHD_socket)a->listen_fd, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)API_CONN_MEMORY, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)API_TIMEOUT_S,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)API_MAX_CONNS, MHD_OPTION_NOTIFY_COMPLETED,
	    on_completed, a, MHD_OPTION_NOTIFY_CONNECTION, on_connection, a,
	    MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL, MHD_OPTION_END);
	if (a->mhd == NULL) {
		snprintf(err, errlen, "api: cannot start the HTTP server on %s", a->path);
		return -1;
	}
	a->listen_fd = -1; /* libmicrohttpd closes it */
	if (pthread_create(&a->thread, NULL, api_main, a) != 0) {
		snprintf(err, errlen, "api: cannot start its thread");
		return -1;
	}
	a->thread_started = true;
	if (sandbox_wake_at_arm(wake_api, a) < 0)
		log_debug("api: no room to be woken at sandbox_arm()");
	return 0;
}

void api_close(struct api *a)
{
	uint64_t one = 1;

	if (a->m == NULL) /* never initialised */
		return;
	if (a->thread_started)
		sandbox_cancel_wake(wake_api, a);
	if (a->thread_started && write(a->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(a->thread, NULL);
	a->thread_started = false;
	if (a->mhd != NULL)
		MHD_stop_daemon(a->mhd);
	a->mhd = NULL;
	if (a->listen_fd >= 0)
		close(a->listen_fd);
	/* The jail's user may lack write access to the directory (root's
	 * /run/khyve): the socket then stays, and the next start, holding the
	 * lock, replaces it.  Not worth a warning at every exit. */
	if (a->bound && unlinkat(a->dir_fd, a->base, 0) < 0 && errno != ENOENT)
		log_debug("api: cannot remove %s: %s (the next start replaces it)", a->path,
		          strerror(errno));
	if (a->dir_fd >= 0)
		close(a->dir_fd);
	if (a->stop_fd >= 0)
		close(a->stop_fd);
	if (a->wake_fd >= 0)
		close(a->wake_fd);
	/* lock_fd stays open: the lock ends with the process */
	a->listen_fd = a->dir_fd = a->stop_fd = a->wake_fd = -1;
	a->bound = false;
	cJSON_Delete(a->config);
	a->config = NULL;
}
