/*
 * The consoles of `vm web` in the browser: WebSockets relayed to the guest.
 *
 *   wss://HOST/ws/vnc/NAME              subprotocol "khyve-vnc"    (noVNC)
 *   wss://HOST/ws/serial/NAME?port=comN subprotocol "khyve-serial" (xterm.js)
 *
 * Both need an ADMIN session (web_auth_wsi) and a guest that runs here.
 * The guest side, a TCP connection to khyve's VNC server or the guest's
 * DIR/comN.pty link, is adopted into the same lws loop on a third, internal
 * protocol ("khyve-ws-raw"), so nothing here blocks and nothing needs a
 * thread.  A session ("relay") holds a bounded queue each way (wsq.h); when
 * a queue fills, the side feeding it is no longer read (lws_rx_flow_control)
 * until the other side drains it.  Either side closing closes the other,
 * after what the guest still had to say went out to the browser.
 *
 * Contract: /work/wt/prompts/web13.md "WebSockets" (RFC 6455 framing is lws's).
 */
#include "web/ws.h"

#include <errno.h>
#include <fcntl.h>
#include <libwebsockets.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "vm/state.h"
#include "vm/vm.h"
#include "web/web.h"
#include "web/wsq.h"

enum ws_kind { WS_VNC = 1, WS_SERIAL = 2 };

/* The most one callback hands us or we hand lws at once: the WebSocket
 * protocols' rx_buffer_size, and our frames to the browser. */
#define WS_CHUNK (16u * 1024u)
/* A side is read only while its queue has this much room: more than any
 * single read delivers (WS_CHUNK for WebSocket frames; lws's service
 * buffer, 4 KiB unless the context says more, for the raw socket). */
#define WS_HEADROOM (64u * 1024u)
/* Seconds the browser has to take the last output once the guest side
 * closed, and khyve's VNC server to accept our connection. */
#define WS_CLOSE_GRACE_S 5
#define WS_CONNECT_S     10
/* A refusal's or failure's reason: room for a path and errno's text. */
#define WS_WHY (PATH_MAX + 256)

/* What the upgrade asked for, checked (ws_resolve). */
struct ws_target {
	enum ws_kind kind;
	char guest[VM_NAME_MAX + 1];
	char user[65];
	char port[8];        /* serial: "com1".."com4" */
	char vnc[80];        /* VNC: run.state's "ADDR:PORT" */
	char link[PATH_MAX]; /* serial: DIR/comN.pty */
};

/* One console session; freed when both of its wsi are gone. */
struct relay {
	struct lws *ws;        /* the browser's WebSocket; NULL once closed */
	struct lws *raw;       /* the guest side; NULL once closed */
	struct wsq to_browser; /* guest output not yet sent */
	struct wsq to_guest;   /* browser input not yet written */
	bool raw_paused;       /* raw's rx is flow-controlled off */
	bool ws_paused;        /* ws's rx is flow-controlled off */
	bool raw_is_file;      /* the pty (written with write(2)) */
	struct ws_target t;
	unsigned char tx[LWS_PRE + WS_CHUNK]; /* a frame to the browser / bytes to the socket */
};

/* Per WebSocket connection (lws allocates it before the filter callback). */
struct ws_pss {
	struct ws_target t;
	bool checked;    /* t was resolved and allowed */
	struct relay *r; /* set once ESTABLISHED set up the guest side */
};

static void ws_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ws_log(const char *fmt, ...)
{
	char line[WS_WHY + 512];
	va_list ap;

	/* One write per line, so lines of other parts never interleave. */
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "vm web: %s\n", line);
}

static const char *kind_name(enum ws_kind k)
{
	return k == WS_VNC ? "vnc" : "serial";
}

static struct web_ctx *ws_ctx(struct lws *wsi)
{
	return lws_context_user(lws_get_context(wsi));
}

static void peer_of(struct lws *wsi, char *out, size_t len)
{
	if (!lws_get_peer_simple(wsi, out, len))
		snprintf(out, len, "?");
}

/* ---- the request: path, query, guest ---- */

/* The request path without its query: HTTP/1.1's GET URI, or an HTTP/2
 * stream's :path (WebSockets over h2, RFC 8441).  -1 when none fits. */
static int request_path(struct lws *wsi, char *out, int len)
{
	int n = lws_hdr_copy(wsi, out, len, WSI_TOKEN_GET_URI);

	if (n <= 0)
		n = lws_hdr_copy(wsi, out, len, WSI_TOKEN_HTTP_COLON_PATH);
	if (n <= 0)
		return -1;
	out[strcspn(out, "?")] = '\0';
	return 0;
}

/* The serial port the query names ("port=com1".."com4"), com1 when it
 * names none; -1 for any other value. */
static int request_port(struct lws *wsi, char *out, size_t len)
{
	char frag[64];

	if (len < 5)
		return -1;
	snprintf(out, len, "com1");
	for (int i = 0; i < 16; i++) {
		if (lws_hdr_copy_fragment(wsi, frag, sizeof(frag), WSI_TOKEN_HTTP_URI_ARGS, i) < 0)
			break;
		if (strncmp(frag, "port=", 5) != 0)
			continue;
		if (strlen(frag + 5) != 4 || strncmp(frag + 5, "com", 3) != 0 || frag[8] < '1' ||
		    frag[8] > '4')
			return -1;
		memcpy(out, frag + 5, 5); /* "comN" and its NUL */
	}
	return 0;
}

/* The guest name after "/ws/vnc/" or "/ws/serial/"; the kind in *kind. */
static int path_target(const char *path, enum ws_kind *kind, char *name, size_t len)
{
	static const struct {
		const char *prefix;
		enum ws_kind kind;
	} routes[] = {{"/ws/vnc/", WS_VNC}, {"/ws/serial/", WS_SERIAL}};

	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		size_t n = strlen(routes[i].prefix);

		if (strncmp(path, routes[i].prefix, n) != 0)
			continue;
		if (!vm_name_valid(path + n) || strlen(path + n) >= len)
			return -1;
		snprintf(name, len, "%s", path + n);
		*kind = routes[i].kind;
		return 0;
	}
	return -1;
}

/* khyve's comN.pty links point into /dev/pts (as `vm console` insists):
 * a link to anything else, in a folder copied from elsewhere, is refused. */
static bool pty_link_ok(const char *link)
{
	char target[64];
	ssize_t n = readlink(link, target, sizeof(target) - 1);

	if (n <= 9)
		return false;
	target[n] = '\0';
	return strncmp(target, "/dev/pts/", 9) == 0 &&
	       target[9 + strspn(target + 9, "0123456789")] == '\0';
}

/* Whether the guest's serial port may be opened: it runs here, or khyve was
 * started by hand (no run.lock ever) and its link is there, as `vm console`
 * allows. */
static int serial_ready(const struct vm_guest *g, const struct vm_status *st, struct ws_target *t,
                        char *why, size_t whylen)
{
	char lock[PATH_MAX], file[16];
	struct stat sb;

	snprintf(file, sizeof(file), "%s.pty", t->port);
	if (vm_path(t->link, g->dir, file) < 0 || vm_path(lock, g->dir, "run.lock") < 0) {
		snprintf(why, whylen, "path too long");
		return 404;
	}
	if (st->state != VM_RUNNING && !(lstat(lock, &sb) < 0 && lstat(t->link, &sb) == 0)) {
		snprintf(why, whylen, "%s is not running", g->name);
		return 404;
	}
	/* The link outlives a khyve killed without cleaning up: its pty must
	 * still be there. */
	if (!pty_link_ok(t->link) || stat(t->link, &sb) < 0) {
		snprintf(why, whylen, "%s has no %s pty", g->name, t->port);
		return 404;
	}
	return 0;
}

/*
 * Everything a console upgrade must pass, in the order that says least to
 * whoever is not allowed: the session (ADMIN, Origin), the route, the
 * guest and its state.  0 with *t filled, or an HTTP status with why.
 */
static int ws_resolve(struct lws *wsi, struct ws_target *t, char *why, size_t whylen)
{
	struct web_ctx *ctx = ws_ctx(wsi);
	const struct web_session *s;
	struct vm_guest g = {0};
	struct vm_status st;
	char path[256], err[256];
	int status = 0;

	memset(t, 0, sizeof(*t));
	if (!ctx || !(s = web_auth_wsi(ctx, wsi, WEB_ROLE_ADMIN))) {
		snprintf(why, whylen, "no admin session (or a cross-origin upgrade)");
		return 403;
	}
	snprintf(t->user, sizeof(t->user), "%s", s->user);
	if (request_path(wsi, path, sizeof(path)) < 0 ||
	    path_target(path, &t->kind, t->guest, sizeof(t->guest)) < 0) {
		snprintf(why, whylen, "no console at this path");
		return 404;
	}
	if (t->kind == WS_SERIAL && request_port(wsi, t->port, sizeof(t->port)) < 0) {
		snprintf(why, whylen, "port must be com1..com4");
		return 400;
	}
	if (vm_guest_find(ctx->sys, t->guest, &g, err, sizeof(err)) < 0) {
		vm_guest_free(&g);
		snprintf(why, whylen, "%s", err);
		return 404;
	}
	vm_status_get(ctx->sys, &g, &st);
	if (st.state == VM_LOCKED) {
		snprintf(why, whylen, "%s runs on host %s", g.name, st.host);
		status = 404;
	} else if (t->kind == WS_VNC && (st.state != VM_RUNNING || !st.vnc[0])) {
		snprintf(why, whylen, "%s is not running with graphics", g.name);
		status = 404;
	} else if (t->kind == WS_VNC) {
		snprintf(t->vnc, sizeof(t->vnc), "%s", st.vnc);
	} else {
		status = serial_ready(&g, &st, t, why, whylen);
	}
	vm_guest_free(&g);
	return status;
}

/* The subprotocol list of the upgrade names `want`. */
static bool asks_protocol(struct lws *wsi, const char *want)
{
	char list[256];
	size_t n = strlen(want);

	if (lws_hdr_copy(wsi, list, sizeof(list), WSI_TOKEN_PROTOCOL) <= 0)
		return false;
	for (char *p = list; *p;) {
		p += strspn(p, " \t,");
		if (!strncmp(p, want, n) && (p[n] == '\0' || strchr(" \t,", p[n])))
			return true;
		p += strcspn(p, ",");
	}
	return false;
}

int web_ws_confirm_upgrade(struct lws *wsi)
{
	static const char *const wanted[] = {[WS_VNC] = "khyve-vnc", [WS_SERIAL] = "khyve-serial"};
	struct ws_target t;
	char why[WS_WHY], peer[64];
	int status = ws_resolve(wsi, &t, why, sizeof(why));

	if (status == 0 && !asks_protocol(wsi, wanted[t.kind])) {
		snprintf(why, sizeof(why), "subprotocol %s missing", wanted[t.kind]);
		status = 400;
	}
	if (status == 0)
		return 0;
	peer_of(wsi, peer, sizeof(peer));
	ws_log("refused console upgrade from %s: %d %s", peer, status, why);
	lws_return_http_status(wsi, (unsigned)status, NULL);
	return 1;
}

/* ---- the guest side ---- */

/* Connect (non-blocking) to run.state's "HOST:PORT" or "[V6]:PORT".  The
 * address is numeric as khyve writes it (a name would need a resolver,
 * which blocks); a wildcard listen address is reached on loopback.
 * The socket, or -1 with why. */
static int vnc_connect(const char *addr, char *why, size_t whylen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char host[80];
	const char *port;
	int fd, rc;

	snprintf(host, sizeof(host), "%s", addr);
	if (host[0] == '[') {
		char *end = strchr(host, ']');

		if (!end || end[1] != ':') {
			snprintf(why, whylen, "bad VNC address %s", addr);
			return -1;
		}
		*end = '\0';
		port = end + 2;
		memmove(host, host + 1, strlen(host + 1) + 1);
	} else {
		char *colon = strrchr(host, ':');

		if (!colon) {
			snprintf(why, whylen, "bad VNC address %s", addr);
			return -1;
		}
		*colon = '\0';
		port = colon + 1;
	}
	if (!strcmp(host, "0.0.0.0") || !strcmp(host, "localhost") || !host[0])
		snprintf(host, sizeof(host), "127.0.0.1");
	else if (!strcmp(host, "::"))
		snprintf(host, sizeof(host), "::1");
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		snprintf(why, whylen, "bad VNC address %s: %s", addr, gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS)) {
		snprintf(why, whylen, "cannot connect to %s: %s", addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* Open the pty slave behind the link, raw.  khyve makes the slave raw when
 * it creates it, but a client before us (screen, cu) may have left it
 * cooked, and then the guest's bytes would not pass unchanged (as `vm
 * console` does, for the same reason).  The fd, or -1 with why. */
static int serial_open(const char *link, char *why, size_t whylen)
{
	int fd = open(link, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	struct termios tio;

	if (fd < 0) {
		snprintf(why, whylen, "cannot open %s: %s", link, strerror(errno));
		return -1;
	}
	if (!isatty(fd)) {
		close(fd);
		snprintf(why, whylen, "%s is not a terminal", link);
		return -1;
	}
	if (tcgetattr(fd, &tio) == 0) {
		cfmakeraw(&tio);
		tcsetattr(fd, TCSANOW, &tio);
	}
	return fd;
}

static void relay_free(struct relay *r)
{
	wsq_free(&r->to_browser);
	wsq_free(&r->to_guest);
	free(r);
}

/*
 * The guest side of a new session, adopted on web_ws_raw_protocol with the
 * relay as its opaque user data.
 *
 * Why adoption of our own descriptor rather than lws_client_connect_via_info
 * with method "RAW": in 4.1 the client path resolves the address itself
 * (its async DNS or a blocking getaddrinfo) and reports failure through
 * LWS_CALLBACK_CLIENT_CONNECTION_ERROR on a wsi without our state, while
 * the adopted socket is a numeric connect we made, non-blocking, and a
 * refused connection shows up as a plain close of the raw wsi.  The pty is
 * a file, for which adoption (LWS_ADOPT_RAW_FILE_DESC) is the only way.
 * LWS_ADOPT_FLAG_RAW_PROXY needs the raw-proxy role, which Debian's 4.1
 * does not build.
 */
static int relay_open_guest(struct lws *wsi, struct relay *r, char *why, size_t whylen)
{
	lws_adopt_desc_t ad = {
	    .vh = lws_get_vhost(wsi), .vh_prot_name = "khyve-ws-raw", .opaque = r};
	int fd;

	if (r->t.kind == WS_VNC) {
		fd = vnc_connect(r->t.vnc, why, whylen);
		ad.type = LWS_ADOPT_SOCKET; /* raw: no HTTP, no TLS */
		ad.fd.sockfd = fd;
	} else {
		fd = serial_open(r->t.link, why, whylen);
		ad.type = LWS_ADOPT_RAW_FILE_DESC;
		ad.fd.filefd = fd;
		r->raw_is_file = true;
	}
	if (fd < 0)
		return -1;
	r->raw = lws_adopt_descriptor_vhost_via_info(&ad); /* closes fd on failure */
	if (!r->raw) {
		snprintf(why, whylen, "lws did not adopt the guest side");
		return -1;
	}
	if (r->t.kind == WS_VNC) /* khyve's server speaks first: its banner ends this */
		lws_set_timeout(r->raw, PENDING_TIMEOUT_AWAITING_SERVER_RESPONSE, WS_CONNECT_S);
	return 0;
}

static struct relay *relay_new(struct lws *wsi, const struct ws_target *t, char *why, size_t whylen)
{
	struct relay *r = calloc(1, sizeof(*r));

	if (!r || wsq_init(&r->to_browser, WSQ_CAPACITY) < 0 ||
	    wsq_init(&r->to_guest, WSQ_CAPACITY) < 0) {
		if (r)
			relay_free(r);
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	r->ws = wsi;
	r->t = *t;
	if (relay_open_guest(wsi, r, why, whylen) < 0) {
		relay_free(r);
		return NULL;
	}
	return r;
}

/* Flow control follows the room in the queue each side feeds. */
static void relay_update_flow(struct relay *r)
{
	bool raw_ok = wsq_can_accept(&r->to_browser, WS_HEADROOM);
	bool ws_ok = wsq_can_accept(&r->to_guest, WS_HEADROOM);

	if (r->raw && r->raw_paused == raw_ok) {
		r->raw_paused = !raw_ok;
		lws_rx_flow_control(r->raw, raw_ok);
	}
	if (r->ws && r->ws_paused == ws_ok) {
		r->ws_paused = !ws_ok;
		lws_rx_flow_control(r->ws, ws_ok);
	}
}

/* ---- callbacks ---- */

/* Bytes from the guest: queue them for the browser. */
static int guest_bytes(struct relay *r, const void *in, size_t len)
{
	if (wsq_append(&r->to_browser, in, len) < 0) {
		ws_log("%s console of %s: guest output overran its queue; closing",
		       kind_name(r->t.kind), r->t.guest);
		return -1;
	}
	if (r->ws)
		lws_callback_on_writable(r->ws);
	relay_update_flow(r);
	return 0;
}

/* The pty is readable: read straight into the queue's free room. */
static int pty_readable(struct lws *wsi, struct relay *r)
{
	unsigned char *p;
	size_t room = wsq_reserve(&r->to_browser, &p);
	ssize_t n;

	if (room == 0) {
		relay_update_flow(r);
		return 0;
	}
	n = read(lws_get_socket_fd(wsi), p, room);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) /* EIO: khyve closed the master (the guest stopped) */
		return -1;
	wsq_commit(&r->to_browser, (size_t)n);
	if (r->ws)
		lws_callback_on_writable(r->ws);
	relay_update_flow(r);
	return 0;
}

/* The guest side may take bytes: hand it what the browser sent. */
static int guest_writable(struct lws *wsi, struct relay *r)
{
	if (wsq_empty(&r->to_guest))
		return 0;
	if (r->raw_is_file) {
		const unsigned char *p;
		size_t len = wsq_peek(&r->to_guest, &p);
		ssize_t n = write(lws_get_socket_fd(wsi), p, len);

		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (n > 0)
			wsq_consume(&r->to_guest, (size_t)n);
	} else {
		/* lws keeps what the socket did not take and sends it before
		 * it calls us writable again, so one chunk at a time is bounded. */
		size_t len = wsq_take(&r->to_guest, r->tx + LWS_PRE, WS_CHUNK);

		if (lws_write(wsi, r->tx + LWS_PRE, len, LWS_WRITE_RAW) < (int)len)
			return -1;
	}
	if (!wsq_empty(&r->to_guest))
		lws_callback_on_writable(wsi);
	relay_update_flow(r);
	return 0;
}

/* The guest side closed: the browser gets what is left, then a close. */
static void guest_closed(struct lws *wsi, struct relay *r)
{
	lws_set_opaque_user_data(wsi, NULL);
	r->raw = NULL;
	if (!r->ws) {
		relay_free(r);
		return;
	}
	ws_log("%s console of %s: the guest side closed", kind_name(r->t.kind), r->t.guest);
	lws_set_timeout(r->ws, PENDING_TIMEOUT_CLOSE_SEND, WS_CLOSE_GRACE_S);
	lws_callback_on_writable(r->ws);
}

static int callback_raw(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                        size_t len)
{
	struct relay *r = lws_get_opaque_user_data(wsi);

	(void)user;
	switch (reason) {
	case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION: {
		char peer[64];

		peer_of(wsi, peer, sizeof(peer));
		ws_log("refused console from %s: 400 khyve-ws-raw is internal", peer);
		return 1; /* never a browser's subprotocol */
	}
	case LWS_CALLBACK_RAW_RX:
		if (!r || !r->ws)
			return -1;
		lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
		return guest_bytes(r, in, len);
	case LWS_CALLBACK_RAW_RX_FILE:
		return r && r->ws ? pty_readable(wsi, r) : -1;
	case LWS_CALLBACK_RAW_WRITEABLE:
	case LWS_CALLBACK_RAW_WRITEABLE_FILE:
		return r && r->ws ? guest_writable(wsi, r) : -1;
	case LWS_CALLBACK_RAW_CLOSE:
	case LWS_CALLBACK_RAW_CLOSE_FILE:
		if (r)
			guest_closed(wsi, r);
		return 0;
	default:
		return 0;
	}
}

/* The browser may take a frame: the next chunk of guest output, or the
 * close once the guest side is gone and everything went out. */
static int browser_writable(struct lws *wsi, struct relay *r)
{
	size_t len = wsq_take(&r->to_browser, r->tx + LWS_PRE, WS_CHUNK);

	if (len && lws_write(wsi, r->tx + LWS_PRE, len, LWS_WRITE_BINARY) < (int)len)
		return -1;
	if (!wsq_empty(&r->to_browser))
		lws_callback_on_writable(wsi);
	else if (!r->raw) {
		lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, (unsigned char *)"guest closed", 12);
		return -1;
	}
	relay_update_flow(r);
	return 0;
}

/* A frame (or part of one) from the browser, text or binary alike. */
static int browser_bytes(struct relay *r, const void *in, size_t len)
{
	if (!r->raw)
		return 0; /* closing: the guest is gone */
	if (wsq_append(&r->to_guest, in, len) < 0) {
		/* Only when lws cannot hold the browser back: WebSockets over
		 * HTTP/2 ignore rx flow control in lws 4.1. */
		ws_log("%s console of %s: input overran its queue; closing", kind_name(r->t.kind),
		       r->t.guest);
		return -1;
	}
	lws_callback_on_writable(r->raw);
	relay_update_flow(r);
	return 0;
}

static int ws_established(struct lws *wsi, struct ws_pss *pss)
{
	char why[WS_WHY], peer[64];

	peer_of(wsi, peer, sizeof(peer));
	if (!pss->checked)
		return -1;
	pss->r = relay_new(wsi, &pss->t, why, sizeof(why));
	if (!pss->r) {
		ws_log("%s console of %s for %s (%s) failed: %s", kind_name(pss->t.kind),
		       pss->t.guest, pss->t.user, peer, why);
		return -1;
	}
	ws_log("%s console of %s%s%s opened by %s (%s)", kind_name(pss->t.kind), pss->t.guest,
	       pss->t.kind == WS_SERIAL ? " " : "", pss->t.kind == WS_SERIAL ? pss->t.port : "",
	       pss->t.user, peer);
	return 0;
}

static void ws_closed(struct ws_pss *pss)
{
	struct relay *r = pss->r;

	pss->r = NULL;
	if (!r)
		return;
	ws_log("%s console of %s closed", kind_name(r->t.kind), r->t.guest);
	r->ws = NULL;
	if (r->raw)
		lws_set_timeout(r->raw, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
	else
		relay_free(r);
}

static int ws_filter(struct lws *wsi, struct ws_pss *pss, enum ws_kind want)
{
	char why[WS_WHY], peer[64];
	int status = ws_resolve(wsi, &pss->t, why, sizeof(why));

	if (status == 0 && pss->t.kind != want) {
		snprintf(why, sizeof(why), "subprotocol does not match the path");
		status = 400;
	}
	if (status == 0) {
		pss->checked = true;
		return 0;
	}
	peer_of(wsi, peer, sizeof(peer));
	ws_log("refused console from %s: %d %s", peer, status, why);
	return 1;
}

static int callback_console(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                            size_t len)
{
	struct ws_pss *pss = user;
	const struct lws_protocols *p = lws_get_protocol(wsi);
	enum ws_kind kind = p && p->id == WS_SERIAL ? WS_SERIAL : WS_VNC;

	switch (reason) {
	case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
		return pss ? ws_filter(wsi, pss, kind) : 1;
	case LWS_CALLBACK_ESTABLISHED:
		return pss ? ws_established(wsi, pss) : -1;
	case LWS_CALLBACK_RECEIVE:
		return pss && pss->r ? browser_bytes(pss->r, in, len) : -1;
	case LWS_CALLBACK_SERVER_WRITEABLE:
		return pss && pss->r ? browser_writable(wsi, pss->r) : 0;
	case LWS_CALLBACK_CLOSED:
		if (pss)
			ws_closed(pss);
		return 0;
	default:
		return 0;
	}
}

const struct lws_protocols web_ws_vnc_protocol = {
    .name = "khyve-vnc",
    .callback = callback_console,
    .per_session_data_size = sizeof(struct ws_pss),
    .rx_buffer_size = WS_CHUNK,
    .id = WS_VNC,
};

const struct lws_protocols web_ws_serial_protocol = {
    .name = "khyve-serial",
    .callback = callback_console,
    .per_session_data_size = sizeof(struct ws_pss),
    .rx_buffer_size = WS_CHUNK,
    .id = WS_SERIAL,
};

const struct lws_protocols web_ws_raw_protocol = {
    .name = "khyve-ws-raw",
    .callback = callback_raw,
    .per_session_data_size = 0,
    .rx_buffer_size = 0,
};
