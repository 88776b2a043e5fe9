/*
 * The per-VM API (docs/api.md, docs/openapi.yaml): HTTP/1.1 with JSON
 * bodies on a unix stream socket, in the style of Cloud Hypervisor's
 * /api/v1/vm.* endpoints.  libmicrohttpd parses HTTP; it runs without
 * threads of its own, driven by khyve's "api" thread, which carries its
 * own seccomp role (SANDBOX_API).  The request handling itself is
 * api_handle(), a pure function of (method, url, body) the unit tests and
 * the fuzz target call without sockets.
 *
 * Order (src/run/vmrun.c): api_init() and api_open() after the devices
 * exist and before jail_enter() (the socket, its lock file and the
 * directory fd need the file system); api_start() before sandbox_arm();
 * api_close() at exit.
 */
#ifndef KHYVE_RUN_API_H
#define KHYVE_RUN_API_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct machine;
struct MHD_Daemon;
struct MHD_Connection;

#define API_MAX_BODY      (64u * 1024) /* request body, bytes: 413 beyond */
#define API_MAX_HEADERS   (8u * 1024)  /* request line + headers, bytes */
#define API_TIMEOUT_S     10u          /* a connection this old (or idle) is dropped */
#define API_MAX_CONNS     16u          /* connections at once */
#define API_MAX_CHORDS    64u          /* vm.send-keys: chords per request */
#define API_PAUSE_WAIT_MS 1000u        /* vm.pause: how long the vCPUs may take */
#define API_PATH_MAX      108          /* sun_path */

/* One reply of api_handle(). */
struct api_reply {
	int status;               /* HTTP status code */
	const char *content_type; /* static string; NULL when there is no body (204) */
	char *body;               /* malloc()ed, owned by the reply; may be NULL */
	size_t len;               /* bytes in body */
	int exit_after;           /* >= 0: request this exit status once the reply is sent */
};

/* The API of one VM.  Zero it, then api_init(). */
struct api {
	struct machine *m;
	struct cJSON *config; /* the config tree, flattened at api_init() */
	int listen_fd;        /* -1: no socket */
	int lock_fd;          /* PATH.lock, held (flock) while khyve runs */
	int dir_fd;           /* the socket's directory, for unlinkat() at exit */
	int stop_fd;          /* eventfd: api_close() wakes the thread */
	int wake_fd;          /* eventfd: sandbox_arm() wakes it to install its filter */
	char path[API_PATH_MAX];
	char base[API_PATH_MAX]; /* the socket's name in dir_fd */
	struct MHD_Daemon *mhd;
	pthread_t thread;
	bool thread_started;
	bool bound; /* the socket at `path` is ours: removed at exit */
	/* A migration sent COMMIT and heard nothing back: the vCPUs stay
	 * paused and the devices quiesced until vm.resume (which unquiesces
	 * them first) or the end; no checkpoint or migration meanwhile. */
	bool migrate_held;
	/* Open connections and when each began: a connection older than
	 * API_TIMEOUT_S is shut down, however slowly it keeps sending. */
	struct api_conn {
		struct MHD_Connection *c; /* NULL: free slot */
		uint64_t since_ns;        /* CLOCK_MONOTONIC; 0 once shut down */
	} conns[API_MAX_CONNS];
};

/*
 * Prepare `a` for machine `m` (kept): snapshots the config tree (call in
 * the main thread while nothing else reads or writes it).  Opens nothing.
 * Returns 0, or -1 without memory.
 */
int api_init(struct api *a, struct machine *m);

/*
 * Whether the request path `url` (may be NULL) names the endpoint `name`
 * ("vm.info"): "/api/v1/" and `name`, then nothing, a query ("?...") or
 * a fragment ("#...").  docs/api.md, "Requests".
 */
bool api_url_names(const char *url, const char *name);

/*
 * Answer one request: `method` ("GET", "PUT", ...), `url` the path
 * ("/api/v1/vm.info"; a query string is ignored), `body` of `len` bytes
 * (need not be NUL-terminated; NULL when len is 0).  Fills `r`; the
 * caller frees it with api_reply_free().  Never fails: every error is a
 * 4xx/5xx reply with a {"error":"..."} body.  Thread-safe against the
 * vCPUs and devices; one caller at a time.
 */
void api_handle(struct api *a, const char *method, const char *url, const char *body, size_t len,
                struct api_reply *r);
void api_reply_free(struct api_reply *r);

/* Fill `r` (overwritten, not freed) with `status` and {"error":msg}. */
void api_reply_error(struct api_reply *r, int status, const char *msg);

#define API_FD_WAIT_MS 2000u /* vm.media-insert: how long the fd may take after the 101 */

/*
 * vm.media-insert with `Upgrade: khyve-fd` (docs/api.md), in two steps
 * for the HTTP glue.  First api_media_insert_check() reads the body
 * ({"drive":"cd0","force":false}): the drive's index (>= 0, *force set)
 * when the fd may come, or -1 with the error reply (400, 404, 413) in `r`
 * to send as plain HTTP.  After the 101 and the fd (SCM_RIGHTS, unix(7)),
 * api_media_insert_fd() hands `fd` (owned from the call on; -1: none
 * came) to the drive's change() and fills `r` with the outcome (204, 400,
 * 404, 409 with the drive's reason, 500), which goes back as one JSON
 * line.  Same threading as api_handle().
 */
int api_media_insert_check(struct api *a, const char *body, size_t len, bool *force,
                           struct api_reply *r);
void api_media_insert_fd(struct api *a, int idx, bool force, int fd, struct api_reply *r);

/*
 * vm.checkpoint and vm.suspend with `Upgrade: khyve-fd` (docs/api.md), in
 * the same two steps: api_state_check() takes the body (none, or {}) and
 * checks that the machine can be saved (0; or -1 with 400, 409, 413 in
 * `r`); after the 101 and the fd, api_state_fd() writes the state file
 * into `fd` (owned from the call on: a regular file open for writing, at
 * its start) through snapshot_save() and fills `r` (204, 400, or 409 with
 * the reason).  With `suspend` the vCPUs stay stopped and r->exit_after
 * is KHYVE_EXIT_SUSPENDED: the caller ends khyve after sending `r`.
 */
int api_state_check(struct api *a, const char *body, size_t len, struct api_reply *r);
void api_state_fd(struct api *a, bool suspend, int fd, struct api_reply *r);

/*
 * vm.migrate with `Upgrade: khyve-fd` (docs/api.md): api_state_check()
 * first, then after the 101 the fd of a stream socket connected to a
 * `khyve -R` target; api_migrate_fd() runs the whole migration on the API
 * thread (other calls wait; run/migrate.h) and fills `r`: 204 with
 * r->exit_after 0 once the target runs the guest, else 409 and the
 * reason (the guest runs on here, or stays paused when COMMIT went out
 * unanswered: the reason says so, and a->migrate_held is set).  Takes
 * `fd`.
 */
void api_migrate_fd(struct api *a, int fd, struct api_reply *r);

/*
 * Work out the socket path (-o api.socket=PATH|off, else the default of
 * docs/api.md), take PATH.lock, remove a stale socket, bind and listen.
 * With no socket wanted (off, or no default for this user: a warning),
 * returns 0 with a->listen_fd -1.  Returns -1 with a one-line reason in
 * `err` (another khyve holds the lock, PATH is not a socket, bind fails).
 */
int api_open(struct api *a, char *err, size_t errlen);

/* Start libmicrohttpd on the socket and the "api" thread.  0, or -1 with
 * the reason in `err`.  A no-op without a socket. */
int api_start(struct api *a, char *err, size_t errlen);

/* Stop the thread, remove the socket (through dir_fd) and free everything.
 * The lock file stays (it is never deleted; its lock ends with khyve). */
void api_close(struct api *a);

#endif
