/*
 * The VNC server: libvncserver driven by one thread of ours.
 *
 * The thread owns everything here.  It accepts connections on a socket we
 * bound in vnc_start() (so "address in use" is an error before the guest
 * starts), lets libvncserver read client messages and send updates
 * (rfbProcessEvents, RFC 6143 7.5 and 7.6), and about 30 times a second
 * copies the console's changed rectangles into libvncserver's frame.  Input
 * goes to the console's sinks from this thread.  No guest thread ever waits
 * on it: the worst a client can do is stall this thread until
 * VNC_CLIENT_WAIT_MS, after which it loses its connection.
 *
 * Keys: clients that offer QEMU's Extended Key Event (pseudo-encoding -258,
 * client message 255/0; QEMU docs "rfb" and the RFB community spec) send
 * the scancode itself, which reaches the guest unchanged; for the others the
 * keysym is mapped through a US layout (lib/keymap.h), with Shift pressed or
 * released around a character that needs the other Shift state.
 */
#include "backend/vnc.h"

#include "backend/console.h"
#include "lib/counters.h"
#include "lib/keymap.h"
#include "lib/log.h"
#include "lib/sandbox.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <rfb/rfb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define VNC_REFRESH_NS (1000000000L / 30) /* at most 30 frames a second */
/* A client that leaves a message unfinished, or reads nothing of what we
 * send, this long loses its connection (libvncserver's rfbMaxClientWait,
 * for reads and writes alike). */
#define VNC_CLIENT_WAIT_MS 5000
#define VNC_MAX_DIM        8192 /* larger frames from a display are ignored */
#define VNC_MAX_CLIENTS    32   /* more connections at once are refused */
#define VNC_PASSWORD_MAX   8    /* VNC authentication uses 8 DES key bytes */

/* QEMU Extended Key Event (RFB community spec, "QEMU Extended Key Event
 * Message" and "QEMU Extended Key Event Pseudo-encoding"). */
#define QEMU_MSG_TYPE        255
#define QEMU_SUBMSG_EXT_KEY  0
#define QEMU_EXT_KEY_PSEUDO  (-258)
#define QEMU_EXT_KEY_MSG_LEN 12 /* type, submessage, down-flag(2), keysym(4), keycode(4) */

/* What we keep per client (rfbClientRec.clientData). */
struct vnc_client {
	bool handshake_done;
	bool offer_pending; /* owes the client the Extended Key Event offer */
	uint8_t down[32];   /* qnums this client holds down: released when it goes */
};

struct vnc_server {
	rfbScreenInfoPtr screen;
	int listen_fd;
	int wake[2]; /* vnc_stop() writes to wake[1] */
	atomic_bool stop;
	pthread_t thread;
	bool thread_started;

	uint32_t *fb; /* libvncserver's frame: width x height XRGB8888 */
	uint32_t width, height;
	bool need_full;  /* copy the whole frame on the next refresh */
	bool new_client; /* refresh now: its first update must show the frame */
	unsigned nclients;

	bool shift_l, shift_r; /* Shift as the guest has it (keysym clients) */

	void (*first_client)(void *arg);
	void *first_client_arg;
	bool first_client_done;

	/* vnc_get_stats(): totals of clients gone, and the snapshot. */
	uint64_t gone_bytes, gone_updates;
	_Atomic uint64_t stat_bytes, stat_updates, stat_refreshes;
	_Atomic unsigned stat_clients;
	_Atomic uint64_t stat_connections;
	struct counter_source counters;

	int port; /* the bound TCP port, 0 for a UNIX socket */
	char *unix_path;
	struct stat unix_st; /* the socket we made there, removed only while it is there */
	char *passwords[2];  /* NULL-terminated, for rfbCheckPasswordByList */
	char *name;
};

static struct ratelimit vnc_rl = RATELIMIT_INIT;

/* ---- libvncserver's log: debug lines of ours (KHYVE_DEBUG=1) ---- */

static void vnc_lib_log(const char *fmt, ...)
{
	char line[256];
	va_list ap;

	if (log_max_level < LOG_DEBUG)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	line[strcspn(line, "\n")] = '\0';
	log_debug("vnc: %s", line);
}

/* ---- keys ---- */

static struct vnc_server *server_of(rfbClientPtr cl)
{
	return cl->screen->screenData;
}

/* Deliver one key to the guest and keep track of what is held down. */
static void send_qnum(struct vnc_server *s, struct vnc_client *c, bool down, uint16_t qnum)
{
	if (qnum == 0 || qnum > 0xff)
		return;
	if (qnum == KEYMAP_QNUM_SHIFT_L)
		s->shift_l = down;
	if (qnum == KEYMAP_QNUM_SHIFT_R)
		s->shift_r = down;
	if (c) {
		if (down)
			c->down[qnum / 8] |= (uint8_t)(1u << (qnum % 8));
		else
			c->down[qnum / 8] &= (uint8_t) ~(1u << (qnum % 8));
	}
	console_key_event(down, qnum);
}

/*
 * A keysym from a client without the Extended Key Event: its US-layout key,
 * with Shift made right for the character (pressed around 'A' when no Shift
 * is held, released around 'a' while one is) and put back after.
 */
static void keysym_event(struct vnc_server *s, struct vnc_client *c, bool down, uint32_t keysym)
{
	struct keymap_key k;

	if (!keymap_lookup(keysym, &k)) {
		log_ratelimited(&vnc_rl, LOG_INFO,
		                "vnc: keysym 0x%x has no key on a US layout (use a client with "
		                "QEMU's extended key event)",
		                keysym);
		return;
	}
	bool shifted = s->shift_l || s->shift_r;
	if (!down || k.shift == KEYMAP_SHIFT_ANY || shifted == (k.shift == KEYMAP_SHIFT_ON)) {
		send_qnum(s, c, down, k.qnum);
		return;
	}
	if (k.shift == KEYMAP_SHIFT_ON) {
		send_qnum(s, c, true, KEYMAP_QNUM_SHIFT_L);
		send_qnum(s, c, true, k.qnum);
		send_qnum(s, c, false, KEYMAP_QNUM_SHIFT_L);
		return;
	}
	bool l = s->shift_l, r = s->shift_r;
	if (l)
		send_qnum(s, c, false, KEYMAP_QNUM_SHIFT_L);
	if (r)
		send_qnum(s, c, false, KEYMAP_QNUM_SHIFT_R);
	send_qnum(s, c, true, k.qnum);
	if (l)
		send_qnum(s, c, true, KEYMAP_QNUM_SHIFT_L);
	if (r)
		send_qnum(s, c, true, KEYMAP_QNUM_SHIFT_R);
}

/* libvncserver's KeyEvent hook (RFC 6143 7.5.4). */
static void on_key(rfbBool down, rfbKeySym keysym, rfbClientPtr cl)
{
	keysym_event(server_of(cl), cl->clientData, down, (uint32_t)keysym);
}

/* libvncserver's PointerEvent hook (RFC 6143 7.5.5): absolute, clamped to
 * the frame the clients see. */
static void on_pointer(int mask, int x, int y, rfbClientPtr cl)
{
	struct vnc_server *s = server_of(cl);
	uint32_t px = x < 0 ? 0 : (uint32_t)x, py = y < 0 ? 0 : (uint32_t)y;

	if (px >= s->width)
		px = s->width - 1;
	if (py >= s->height)
		py = s->height - 1;
	console_ptr_event((uint8_t)mask, px, py, s->width, s->height);
}

/* ---- QEMU Extended Key Event, as a libvncserver protocol extension ---- */

static int ext_key_encodings[] = {QEMU_EXT_KEY_PSEUDO, 0};

/* Every client may send it; the offer below tells clients they may. */
static rfbBool ext_new_client(rfbClientPtr cl, void **data)
{
	(void)cl;
	*data = NULL;
	return TRUE;
}

/*
 * The offer of the Extended Key Event: an update of one pseudo-rectangle of
 * encoding -258, the frame's size as QEMU sends it.
 */
static void send_key_offer(rfbClientPtr cl)
{
	struct {
		rfbFramebufferUpdateMsg msg;
		rfbFramebufferUpdateRectHeader rect;
	} __attribute__((packed)) ack;

	memset(&ack, 0, sizeof(ack));
	ack.msg.type = rfbFramebufferUpdate;
	ack.msg.nRects = htons(1);
	ack.rect.r.w = htons((uint16_t)cl->screen->width);
	ack.rect.r.h = htons((uint16_t)cl->screen->height);
	ack.rect.encoding = htonl((uint32_t)QEMU_EXT_KEY_PSEUDO);
	if (rfbWriteExact(cl, (const char *)&ack, sizeof(ack)) < 0)
		rfbCloseClient(cl);
}

/*
 * The client listed -258 in SetEncodings: offer the Extended Key Event at
 * once, as QEMU does, and again after the client's first update
 * (check_clients()): libvncclient forgets an offer when the
 * SupportedMessages pseudo-rectangle libvncserver sends with that update
 * comes after it.
 */
static rfbBool ext_enable(rfbClientPtr cl, void **data, int encoding)
{
	struct vnc_client *c = cl->clientData;

	(void)data;
	if (encoding != QEMU_EXT_KEY_PSEUDO)
		return FALSE;
	send_key_offer(cl);
	if (c)
		c->offer_pending = true;
	return TRUE;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Client message 255: submessage 0 is the Extended Key Event; any other
 * submessage has a length we do not know, so the client goes. */
static rfbBool ext_message(rfbClientPtr cl, void *data, const rfbClientToServerMsg *msg)
{
	uint8_t buf[QEMU_EXT_KEY_MSG_LEN - 1];

	(void)data;
	if (msg->type != QEMU_MSG_TYPE)
		return FALSE;
	if (rfbReadExact(cl, (char *)buf, 1) <= 0) {
		rfbCloseClient(cl);
		return TRUE;
	}
	if (buf[0] != QEMU_SUBMSG_EXT_KEY) {
		log_ratelimited(&vnc_rl, LOG_INFO, "vnc: client %s sent QEMU message %u: closed",
		                cl->host, buf[0]);
		rfbCloseClient(cl);
		return TRUE;
	}
	if (rfbReadExact(cl, (char *)buf + 1, sizeof(buf) - 1) <= 0) {
		rfbCloseClient(cl);
		return TRUE;
	}
	bool down = buf[1] || buf[2];
	uint32_t keysym = get_be32(buf + 3), keycode = get_be32(buf + 7);
	struct vnc_server *s = server_of(cl);
	/* The spec's form is the qnum (0x80 for E0); take E0 0xNN too. */
	if ((keycode >> 8) == 0xe0 && (keycode & 0xff) < 0x80)
		keycode = 0x80 | (keycode & 0x7f);
	if (keycode == 0 || keycode > 0xff)
		keysym_event(s, cl->clientData, down, keysym); /* no scancode: map it */
	else
		send_qnum(s, cl->clientData, down, (uint16_t)keycode);
	return TRUE;
}

static rfbProtocolExtension ext_key_extension = {
    .newClient = ext_new_client,
    .pseudoEncodings = ext_key_encodings,
    .enablePseudoEncoding = ext_enable,
    .handleMessage = ext_message,
};

static void register_extension(void)
{
	rfbRegisterProtocolExtension(&ext_key_extension);
}

/* ---- clients ---- */

static void on_client_gone(rfbClientPtr cl)
{
	struct vnc_server *s = server_of(cl);
	struct vnc_client *c = cl->clientData;

	s->gone_bytes += (uint64_t)rfbStatGetSentBytes(cl);
	s->gone_updates += (uint64_t)rfbStatGetMessageCountSent(cl, rfbFramebufferUpdate);
	if (c) {
		/* Keys it held would repeat in the guest forever. */
		for (unsigned q = 1; q < 256; q++) {
			if (c->down[q / 8] & (1u << (q % 8)))
				send_qnum(s, c, false, (uint16_t)q);
		}
		free(c);
		cl->clientData = NULL;
	}
	/* libvncserver 0.9.14 never frees an enabled extension's list
	 * entry (not even in rfbDisableExtension): unlink and free ours. */
	for (rfbExtensionData *e = cl->extensions; e; e = e->next) {
		if (e->extension == &ext_key_extension) {
			rfbDisableExtension(cl, &ext_key_extension);
			free(e);
			break;
		}
	}
#ifdef LIBVNCSERVER_WITH_WEBSOCKETS
	/* Nor a WebSocket client's context (one block, no pointers out). */
	free(cl->wsctx);
	cl->wsctx = NULL;
#endif
	if (s->nclients > 0)
		s->nclients--;
	atomic_store(&s->stat_clients, s->nclients);
}

static enum rfbNewClientAction on_new_client(rfbClientPtr cl)
{
	struct vnc_server *s = server_of(cl);
	struct vnc_client *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return RFB_CLIENT_REFUSE;
	cl->clientData = c;
	cl->clientGoneHook = on_client_gone;
	s->nclients++;
	atomic_store(&s->stat_clients, s->nclients);
	atomic_fetch_add(&s->stat_connections, 1);
	s->need_full = true;
	s->new_client = true;
	return RFB_CLIENT_ACCEPT;
}

static void accept_clients(struct vnc_server *s)
{
	for (int i = 0; i < 16; i++) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_ratelimited(&vnc_rl, LOG_WARN, "vnc: accept: %s",
				                strerror(errno));
			return;
		}
		/* libvncserver select()s; each client costs this thread a
		 * little time. */
		if (fd >= FD_SETSIZE || s->nclients >= VNC_MAX_CLIENTS) {
			log_ratelimited(&vnc_rl, LOG_WARN, "vnc: too many clients: one refused");
			close(fd);
			continue;
		}
		if (s->unix_path == NULL) {
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		}
		rfbNewClient(s->screen, fd);
	}
}

/*
 * After each round: the statistics are summed, first_client fires when a client has finished the
 * handshake (ServerInit sent, RFC 6143 7.3.2: libvncserver's client state
 * is then normal), and pending Extended Key Event offers go out.
 */
static void check_clients(struct vnc_server *s)
{
	rfbClientIteratorPtr it = rfbGetClientIterator(s->screen);
	rfbClientPtr cl;
	uint64_t bytes = s->gone_bytes, updates = s->gone_updates;

	while ((cl = rfbClientIteratorNext(it)) != NULL) {
		struct vnc_client *c = cl->clientData;
		bytes += (uint64_t)rfbStatGetSentBytes(cl);
		updates += (uint64_t)rfbStatGetMessageCountSent(cl, rfbFramebufferUpdate);
		if (c == NULL || cl->state != RFB_NORMAL || cl->sock == RFB_INVALID_SOCKET)
			continue;
		if (c->offer_pending && !cl->enableSupportedMessages) {
			c->offer_pending = false;
			send_key_offer(cl);
		}
		if (c->handshake_done)
			continue;
		c->handshake_done = true;
		if (!s->first_client_done) {
			s->first_client_done = true;
			if (s->first_client)
				s->first_client(s->first_client_arg);
		}
	}
	rfbReleaseClientIterator(it);
	atomic_store(&s->stat_bytes, bytes);
	atomic_store(&s->stat_updates, updates);
}

/* ---- the frame ---- */

static void set_pixel_format(rfbScreenInfoPtr sc)
{
	/* The console's pixels are 0x00RRGGBB in host order. */
	sc->serverFormat.redShift = 16;
	sc->serverFormat.greenShift = 8;
	sc->serverFormat.blueShift = 0;
}

/* A new frame size: a new buffer; clients that support DesktopSize get it
 * (libvncserver sends the pseudo-rectangle, RFC 6143 7.8.2). */
static bool resize(struct vnc_server *s, uint32_t w, uint32_t h)
{
	uint32_t *fb = calloc((size_t)w * h, sizeof(uint32_t));
	rfbClientIteratorPtr it;
	rfbClientPtr cl;

	if (fb == NULL) {
		log_ratelimited(&vnc_rl, LOG_WARN, "vnc: no memory for a %ux%u frame", w, h);
		return false;
	}
	rfbNewFramebuffer(s->screen, (char *)fb, (int)w, (int)h, 8, 3, 4);
	set_pixel_format(s->screen);
	it = rfbGetClientIterator(s->screen);
	while ((cl = rfbClientIteratorNext(it)) != NULL)
		s->screen->setTranslateFunction(cl);
	rfbReleaseClientIterator(it);
	free(s->fb);
	s->fb = fb;
	s->width = w;
	s->height = h;
	return true;
}

static void copy_rect(struct vnc_server *s, const struct console_frame *f, uint32_t x, uint32_t y,
                      uint32_t w, uint32_t h)
{
	if (x >= f->width || y >= f->height || w == 0 || h == 0)
		return;
	if (w > f->width - x)
		w = f->width - x;
	if (h > f->height - y)
		h = f->height - y;
	for (uint32_t row = y; row < y + h; row++)
		memcpy(s->fb + (size_t)row * s->width + x, f->pixels + (size_t)row * f->stride + x,
		       (size_t)w * sizeof(uint32_t));
	rfbMarkRectAsModified(s->screen, (int)x, (int)y, (int)(x + w), (int)(y + h));
}

static bool frame_valid(const struct console_frame *f)
{
	return f->pixels != NULL && f->width > 0 && f->height > 0 && f->width <= VNC_MAX_DIM &&
	       f->height <= VNC_MAX_DIM && f->stride >= f->width && f->nrects <= CONSOLE_MAX_RECTS;
}

/* Bring libvncserver's frame up to date with the console's. */
static void refresh(struct vnc_server *s)
{
	struct console_frame f;

	memset(&f, 0, sizeof(f));
	if (!console_refresh(&f))
		return; /* no display: the frame stays as it is (black) */
	if (!frame_valid(&f)) {
		log_ratelimited(&vnc_rl, LOG_WARN, "vnc: display handed a bad frame (%ux%u)",
		                f.width, f.height);
		return;
	}
	bool full = f.full || s->need_full;
	if (f.width != s->width || f.height != s->height) {
		if (!resize(s, f.width, f.height))
			return;
		full = true;
	}
	s->need_full = false;
	if (full || f.nrects > 0)
		atomic_fetch_add(&s->stat_refreshes, 1);
	if (full) {
		copy_rect(s, &f, 0, 0, f.width, f.height);
		return;
	}
	for (unsigned i = 0; i < f.nrects; i++)
		copy_rect(s, &f, f.rects[i].x, f.rects[i].y, f.rects[i].w, f.rects[i].h);
}

/* ---- the thread ---- */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool fd_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

static void *vnc_main(void *arg)
{
	struct vnc_server *s = arg;
	int64_t next_refresh = now_ns();

	while (!atomic_load(&s->stop)) {
		int64_t now = now_ns();
		sandbox_thread_enter(SANDBOX_VNC); /* started before the sandbox is armed */
		if (now >= next_refresh) {
			if (s->nclients > 0)
				refresh(s);
			next_refresh = now + VNC_REFRESH_NS;
		}
		long wait_us = (long)((next_refresh - now_ns()) / 1000);
		if (wait_us < 0)
			wait_us = 0;
		/* select()s on the clients, the listening socket and the wake
		 * pipe (both in allFds, unknown to libvncserver as clients),
		 * then sends pending updates. */
		rfbProcessEvents(s->screen, wait_us);
		if (fd_readable(s->listen_fd))
			accept_clients(s);
		if (s->new_client) {
			s->new_client = false;
			refresh(s);
		}
		check_clients(s);
	}
	return NULL;
}

/* ---- listening ---- */

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return false;
}

static int listen_tcp(struct vnc_server *s, const char *host, int port, bool warn_open, char *err,
                      size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
	struct addrinfo *res = NULL;
	char portstr[16];
	int rc, fd = -1, saved = 0;

	if (port < 0 || port > 65535) {
		snprintf(err, errlen, "VNC port %d is out of range (0-65535)", port);
		return -1;
	}
	snprintf(portstr, sizeof(portstr), "%d", port);
	rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "VNC address %s: %s", host, gai_strerror(rc));
		return -1;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int one = 1;
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0) {
			if (warn_open && !is_loopback(ai->ai_addr))
				log_warn("fbuf: VNC on %s port %d has no password: anyone who can "
				         "reach it controls the guest's console",
				         host, port);
			break;
		}
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(err, errlen, "cannot listen for VNC on %s port %d: %s", host, port,
		         strerror(saved));
		return -1;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
		                                         : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

/* A socket file nobody listens on is left from an earlier run: remove it.
 * Only a socket itself: lstat, so a symlink (to anything) stays, and
 * bind() then refuses the path. */
static void remove_stale_socket(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;

	if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
		return;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 && errno == ECONNREFUSED)
		unlink(path);
	close(fd);
}

/* bind() never follows or replaces what is at `path` (EADDRINUSE);
 * `made` gets the socket file it created. */
static int listen_unix(const char *path, struct stat *made, char *err, size_t errlen)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};

	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "VNC socket path too long (at most %zu bytes): %s",
		         sizeof(sun.sun_path) - 1, path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	remove_stale_socket(path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 || listen(fd, 16) != 0) {
		snprintf(err, errlen, "cannot listen for VNC on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (lstat(path, made) != 0)
		memset(made, 0, sizeof(*made));
	return fd;
}

/* ---- start and stop ---- */

/* Whether unix_path still is the socket we bound (not a file someone put
 * there since). */
static bool socket_still_ours(const struct vnc_server *s)
{
	struct stat st;

	return lstat(s->unix_path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	       st.st_dev == s->unix_st.st_dev && st.st_ino == s->unix_st.st_ino;
}

static void server_free(struct vnc_server *s)
{
	if (s->screen) {
		rfbShutdownServer(s->screen, TRUE);
		rfbScreenCleanup(s->screen);
	}
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->unix_path && s->listen_fd >= 0 && socket_still_ours(s))
		unlink(s->unix_path);
	for (int i = 0; i < 2; i++) {
		if (s->wake[i] >= 0)
			close(s->wake[i]);
	}
	free(s->fb);
	free(s->unix_path);
	free(s->passwords[0]);
	free(s->name);
	free(s);
}

static bool check_config(const struct vnc_config *c, char *err, size_t errlen)
{
	if (c->password && (c->password[0] == '\0' || strlen(c->password) > VNC_PASSWORD_MAX)) {
		snprintf(err, errlen, "password must be 1 to %d characters (VNC authentication)",
		         VNC_PASSWORD_MAX);
		return false;
	}
	if (c->width == 0 || c->height == 0 || c->width > VNC_MAX_DIM || c->height > VNC_MAX_DIM) {
		snprintf(err, errlen, "bad VNC frame size %ux%u", c->width, c->height);
		return false;
	}
	return true;
}

static bool setup_screen(struct vnc_server *s, const struct vnc_config *c)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	int argc = 0;

	pthread_once(&once, register_extension);
	rfbLog = vnc_lib_log;
	rfbErr = vnc_lib_log;
	rfbMaxClientWait = VNC_CLIENT_WAIT_MS;
	s->width = c->width;
	s->height = c->height;
	s->fb = calloc((size_t)c->width * c->height, sizeof(uint32_t));
	s->name = strdup(c->name ? c->name : "khyve");
	s->screen = rfbGetScreen(&argc, NULL, (int)c->width, (int)c->height, 8, 3, 4);
	if (s->fb == NULL || s->name == NULL || s->screen == NULL)
		return false;
	rfbScreenInfoPtr sc = s->screen;
	sc->screenData = s;
	sc->frameBuffer = (char *)s->fb;
	set_pixel_format(sc);
	sc->desktopName = s->name;
	sc->port = 0; /* we listen ourselves: libvncserver binds nothing */
	sc->ipv6port = 0;
	sc->autoPort = FALSE;
	sc->httpPort = 0;
	sc->httpDir = NULL;
	sc->alwaysShared = TRUE; /* several clients at once */
	sc->deferUpdateTime = 0; /* we pace refreshes ourselves */
	sc->maxClientWait = 0;   /* use rfbMaxClientWait */
	sc->cursor = NULL;       /* the guest draws its own pointer */
	sc->newClientHook = on_new_client;
	sc->kbdAddEvent = on_key;
	sc->ptrAddEvent = on_pointer;
	if (c->password) {
		s->passwords[0] = strdup(c->password);
		if (s->passwords[0] == NULL)
			return false;
		sc->authPasswdData = s->passwords;
		sc->passwordCheck = rfbCheckPasswordByList;
	}
	rfbInitServer(sc);
	FD_SET(s->listen_fd, &sc->allFds);
	FD_SET(s->wake[0], &sc->allFds);
	sc->maxFd = s->listen_fd > s->wake[0] ? s->listen_fd : s->wake[0];
	return true;
}

struct vnc_server *vnc_start(const struct vnc_config *c, char *err, size_t errlen)
{
	struct vnc_server *s;
	sigset_t all, old;

	if (!check_config(c, err, errlen))
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory for the VNC server");
		return NULL;
	}
	s->listen_fd = s->wake[0] = s->wake[1] = -1;
	s->first_client = c->first_client;
	s->first_client_arg = c->first_client_arg;
	if (c->unix_path) {
		s->unix_path = strdup(c->unix_path);
		s->listen_fd =
		    s->unix_path ? listen_unix(c->unix_path, &s->unix_st, err, errlen) : -1;
	} else {
		s->listen_fd = listen_tcp(s, c->host ? c->host : "127.0.0.1", c->port,
		                          c->password == NULL, err, errlen);
	}
	if (s->listen_fd < 0) {
		server_free(s);
		return NULL;
	}
	if (s->listen_fd >= FD_SETSIZE || pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0 ||
	    s->wake[0] >= FD_SETSIZE || !setup_screen(s, c)) {
		snprintf(err, errlen, "cannot set up the VNC server");
		server_free(s);
		return NULL;
	}
	/* Signals belong to the main loop and the vCPUs, not to this thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&s->thread, NULL, vnc_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the VNC thread: %s", strerror(rc));
		server_free(s);
		return NULL;
	}
	s->thread_started = true;
	return s;
}

int vnc_port(const struct vnc_server *s)
{
	return s->port;
}

void vnc_get_stats(struct vnc_server *s, struct vnc_stats *st)
{
	st->bytes_sent = atomic_load(&s->stat_bytes);
	st->updates_sent = atomic_load(&s->stat_updates);
	st->changed_refreshes = atomic_load(&s->stat_refreshes);
	st->clients = atomic_load(&s->stat_clients);
	st->connections = atomic_load(&s->stat_connections);
}

static void read_counters(void *arg, struct counter_out *o)
{
	struct vnc_stats st;

	vnc_get_stats(arg, &st);
	o->put(o, "clients", st.clients);
	o->put(o, "connections_total", st.connections);
	o->put(o, "bytes_sent_total", st.bytes_sent);
	o->put(o, "updates_sent_total", st.updates_sent);
}

int vnc_register_counters(struct vnc_server *s)
{
	s->counters.kind = COUNTER_VNC;
	snprintf(s->counters.name, sizeof(s->counters.name), "vnc");
	s->counters.read = read_counters;
	s->counters.arg = s;
	return counters_register(&s->counters);
}

void vnc_stop(struct vnc_server *s)
{
	if (s == NULL)
		return;
	if (s->thread_started) {
		atomic_store(&s->stop, true);
		ssize_t n = write(s->wake[1], "x", 1);
		(void)n;
		pthread_join(s->thread, NULL);
	}
	server_free(s);
}
