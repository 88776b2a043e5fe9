/*
 * The client side of khyve's per-VM API (docs/api.md, issue 13): HTTP/1.1
 * over the VM's unix socket through libcurl, and where that socket is.
 * Used by khyvectl (src/cmd/khyvectl.c) and by vm (`vm list`, `vm info`),
 * so it lives in lib/ and knows no JSON: callers parse the bodies.
 *
 * Not part of khyve itself (the Makefile keeps it out of the core): only
 * the front ends link libcurl.
 */
#ifndef KHYVE_LIB_APICLIENT_H
#define KHYVE_LIB_APICLIENT_H

#include <stddef.h>

/* Longest socket path a unix socket address holds (sun_path, with its NUL). */
#define API_SOCKET_MAX 108

/* What a call gives back. */
enum api_call_rc {
	API_CALL_OK = 0,      /* an HTTP reply came (any status: see apic_reply.status) */
	API_CALL_FAILED = -1, /* connected, but no usable reply (timeout, bad HTTP, memory) */
	API_CALL_NO_VM = -2,  /* nothing listens at the socket (missing, refused, not a socket) */
};

/* One reply; body owned by the reply, freed by apic_reply_free(). */
struct apic_reply {
	long status;           /* HTTP status, e.g. 200, 204, 409 */
	char content_type[64]; /* "application/json", "image/png", or "" */
	char *body;            /* NUL-terminated (the NUL is not counted in len); NULL when empty */
	size_t len;            /* bytes of body */
};

/*
 * `method` ("GET" or "PUT") of /api/v1/`endpoint` ("vm.info") on the unix
 * socket `socket_path`, with JSON `body` (NULL for none), within
 * `timeout_ms` milliseconds for the whole exchange.  A reply body larger
 * than 64 MiB is refused (API_CALL_FAILED).  On API_CALL_OK `r` holds the
 * reply (free it with apic_reply_free()); otherwise `err` says why in one
 * line and `r` is empty.
 */
enum api_call_rc apic_call(const char *socket_path, const char *method, const char *endpoint,
                           const char *body, long timeout_ms, struct apic_reply *r, char *err,
                           size_t errlen);

void apic_reply_free(struct apic_reply *r);

/*
 * vm.media-insert (docs/api.md): put the image open on `image_fd` (the
 * caller opened it, read-only; it stays the caller's) in drive `drive`
 * ("cd0": letters, digits, '-', '_', at most 15) of the VM at
 * `socket_path`, or with `force` even when the guest locked the tray.
 * libcurl cannot pass fds, so this speaks HTTP/1.1 itself on a plain unix
 * socket: the PUT with `Connection: Upgrade` and `Upgrade: khyve-fd`, the
 * 101, one byte carrying the fd (SCM_RIGHTS, unix(7)), then khyve's one
 * JSON line.  Everything within `timeout_ms`; replies beyond 64 KiB are
 * refused.  API_CALL_OK: `*status` is khyve's answer (204, or 400, 404,
 * 409, 500 ...) and `err` holds its JSON ({"error":"..."}; "" for 204).
 * Otherwise `err` says in one line why no answer came.
 */
enum api_call_rc apic_media_insert(const char *socket_path, const char *drive, int force,
                                   int image_fd, long timeout_ms, long *status, char *err,
                                   size_t errlen);

/*
 * The same exchange for any call that takes a file descriptor after a 101
 * (docs/api.md): PUT `endpoint` ("vm.media-insert", "vm.checkpoint",
 * "vm.suspend") with the JSON `body` (at most 384 bytes; "" for none),
 * then `fd` (the caller's; it stays open here).  Returns and fills as
 * apic_media_insert().
 */
enum api_call_rc apic_fd_call(const char *socket_path, const char *endpoint, const char *body,
                              int fd, long timeout_ms, long *status, char *err, size_t errlen);

/*
 * khyve's default socket of the VM `name` (api13: /run/khyve/NAME.sock for
 * root, else $XDG_RUNTIME_DIR/khyve/NAME.sock) into `out` (`len` bytes).
 * 0, or -1 with `err` set: no XDG_RUNTIME_DIR for a user, or too long.
 */
int api_default_socket(const char *name, char *out, size_t len, char *err, size_t errlen);

/*
 * vm's folder, read as vm reads it: the first `vm_dir=` line of
 * $KHYVE_CONF (when set and not empty) or /etc/khyve.conf, unquoted.
 * 0 with `out` (`len` bytes) an absolute path, or -1 when there is none
 * (no file, no such line, not absolute: vm-managed lookups are skipped).
 */
int api_vm_dir(char *out, size_t len);

/*
 * The socket of the VM `name` as khyvectl --vm=NAME finds it:
 * $vm_dir/NAME/khyve.sock when something is there (a guest of vm), or
 * DATASTORE/NAME/khyve.sock for a datastore of vm's
 * $vm_dir/.config/system.conf (path_X="/folder" lines), else
 * api_default_socket().  `name` must be a plain name (no '/', not "." or
 * ".."): -1 with `err` otherwise.
 */
int api_socket_for_vm(const char *name, char *out, size_t len, char *err, size_t errlen);

#endif
