/*
 * vncshot: the project's VNC test client (libvncclient, libpng).  It
 * connects, runs a list of actions (screenshot as PNG, typed text, keys,
 * pointer moves, waits, the frame size) and exits 0, or 1 on a connect,
 * authentication or protocol failure or the timeout, or 2 on bad usage.
 * Keys go as RFB KeyEvents (RFC 6143 7.5.4) or, when the server offers it,
 * as QEMU Extended Key Events with the US-layout scancode (lib/keymap.h).
 * The interface is the project's (tests, the lab, bench) and only grows:
 * --no-extkey sends plain KeyEvents even to a server offering the extension;
 * VNCSHOT_ENCODINGS (libvncclient's encoding list, e.g. "raw") and
 * VNCSHOT_DEBUG=1 (each update on stderr) are for benchmarks and debugging.
 */
#include "lib/keymap.h"

#include <errno.h>
#include <limits.h>
#include <png.h>
#include <poll.h>
#include <rfb/rfbclient.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: vncshot [--password PW] [--timeout SECONDS] [--scale N] [--no-extkey] ADDR ACTION...\n"
    "  ADDR: HOST:PORT or unix:PATH\n"
    "  ACTION: shot FILE.png | type TEXT | key NAME | move X Y [MASK] | sleep MS | size\n";

enum action_kind { ACT_SHOT, ACT_TYPE, ACT_KEY, ACT_MOVE, ACT_SLEEP, ACT_SIZE };

struct action {
	enum action_kind kind;
	const char *arg;    /* file (shot), text (type) */
	uint32_t keysym;    /* key */
	long x, y, mask, n; /* move; n = milliseconds (sleep) */
};

struct options {
	const char *password;
	double timeout_s;
	long scale;
	bool no_extkey;
	const char *addr;
	struct action *actions;
	int nactions;
};

static struct options opt = {.timeout_s = 30, .scale = 1};
static rfbClient *client;
static bool got_update;
static char last_log[256];

static void usage_error(const char *what, const char *arg)
{
	fprintf(stderr, "vncshot: %s%s%s\n%s", what, arg ? ": " : "", arg ? arg : "", usage_text);
	exit(2);
}

/* One line on stderr, naming the server, then exit 1. */
static void __attribute__((noreturn)) fail(const char *what)
{
	if (last_log[0])
		fprintf(stderr, "vncshot: %s: %s (%s)\n", opt.addr, what, last_log);
	else
		fprintf(stderr, "vncshot: %s: %s\n", opt.addr, what);
	exit(1);
}

/* libvncclient's log lines: keep the last one for fail(). */
static void capture_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_log, sizeof(last_log), fmt, ap);
	va_end(ap);
	size_t n = strlen(last_log);
	while (n > 0 && (last_log[n - 1] == '\n' || last_log[n - 1] == '\r'))
		last_log[--n] = '\0';
}

static void on_alarm(int sig)
{
	static const char msg[] = "vncshot: timeout\n";
	(void)sig;
	ssize_t r = write(2, msg, sizeof(msg) - 1);
	(void)r;
	_exit(1);
}

static bool parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || end == s || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

static int parse_action(char **argv, int argc, int i, struct action *a)
{
	const char *name = argv[i];
	int left = argc - i - 1;
	memset(a, 0, sizeof(*a));
	if (strcmp(name, "shot") == 0 && left >= 1) {
		a->kind = ACT_SHOT;
		a->arg = argv[i + 1];
		return 2;
	}
	if (strcmp(name, "type") == 0 && left >= 1) {
		a->kind = ACT_TYPE;
		a->arg = argv[i + 1];
		return 2;
	}
	if (strcmp(name, "key") == 0 && left >= 1) {
		a->kind = ACT_KEY;
		a->keysym = keymap_keysym_by_name(argv[i + 1]);
		if (!a->keysym)
			usage_error("unknown key name", argv[i + 1]);
		return 2;
	}
	if (strcmp(name, "move") == 0 && left >= 2) {
		a->kind = ACT_MOVE;
		if (!parse_long(argv[i + 1], 0, 65535, &a->x) ||
		    !parse_long(argv[i + 2], 0, 65535, &a->y))
			usage_error("bad pointer position", argv[i + 1]);
		if (left >= 3 && parse_long(argv[i + 3], 0, 255, &a->mask))
			return 4;
		return 3;
	}
	if (strcmp(name, "sleep") == 0 && left >= 1) {
		a->kind = ACT_SLEEP;
		if (!parse_long(argv[i + 1], 0, 3600 * 1000, &a->n))
			usage_error("bad sleep milliseconds", argv[i + 1]);
		return 2;
	}
	if (strcmp(name, "size") == 0) {
		a->kind = ACT_SIZE;
		return 1;
	}
	usage_error("unknown action or missing argument", name);
	return 0;
}

static void parse_args(int argc, char **argv)
{
	int i = 1;
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		const char *o = argv[i];
		if (strcmp(o, "--no-extkey") == 0) {
			opt.no_extkey = true;
			continue;
		}
		if (i + 1 >= argc)
			usage_error("option needs a value", o);
		const char *v = argv[++i];
		if (strcmp(o, "--password") == 0) {
			opt.password = v;
		} else if (strcmp(o, "--timeout") == 0) {
			char *end;
			opt.timeout_s = strtod(v, &end);
			if (end == v || *end || !(opt.timeout_s > 0) || opt.timeout_s > 86400)
				usage_error("bad timeout", v);
		} else if (strcmp(o, "--scale") == 0) {
			if (!parse_long(v, 1, 16, &opt.scale))
				usage_error("bad scale (1..16)", v);
		} else {
			usage_error("unknown option", o);
		}
	}
	if (i >= argc)
		usage_error("no address", NULL);
	opt.addr = argv[i++];
	if (i >= argc)
		usage_error("no action", NULL);
	opt.actions = calloc((size_t)(argc - i), sizeof(*opt.actions));
	if (!opt.actions)
		exit(1);
	while (i < argc)
		i += parse_action(argv, argc, i, &opt.actions[opt.nactions++]);
}

static char *get_password(rfbClient *c)
{
	(void)c;
	return strdup(opt.password ? opt.password : "");
}

static int update_rects;
static bool had_extkey;

static void on_got_rect(rfbClient *c, int x, int y, int w, int h)
{
	(void)c;
	(void)x;
	(void)y;
	(void)w;
	(void)h;
	if (getenv("VNCSHOT_DEBUG"))
		fprintf(stderr, "rect %d,%d %dx%d\n", x, y, w, h);
	if (w > 0 && h > 0)
		update_rects++;
}

/*
 * An update ended.  The server's Extended Key Event offer is an update of
 * one pseudo-rectangle (QEMU gives it the frame's size, libvncclient
 * reports it as a rectangle): that one, and updates without pixels, do not
 * count.
 */
static void on_update_done(rfbClient *c)
{
	bool extkey = SupportsClient2Server(c, rfbQemuEvent);
	bool offer_only = update_rects == 1 && extkey && !had_extkey;

	had_extkey = had_extkey || extkey;
	if (getenv("VNCSHOT_DEBUG"))
		fprintf(stderr, "update done: %d rects%s\n", update_rects,
		        offer_only ? " (offer)" : "");
	if (update_rects > 0 && !offer_only)
		got_update = true;
	update_rects = 0;
}

/* Set host and port from ADDR (HOST:PORT, [IPV6]:PORT or unix:PATH). */
static void set_address(rfbClient *c, const char *addr)
{
	if (strncmp(addr, "unix:", 5) == 0) {
		if (!addr[5])
			usage_error("empty UNIX socket path", addr);
		c->serverHost = strdup(addr + 5);
		c->serverPort = 0;
		return;
	}
	const char *colon = strrchr(addr, ':');
	long port;
	if (!colon || colon == addr || !parse_long(colon + 1, 1, 65535, &port))
		usage_error("bad address (HOST:PORT or unix:PATH)", addr);
	const char *host = addr;
	size_t len = (size_t)(colon - addr);
	if (addr[0] == '[' && colon[-1] == ']') {
		host++;
		len -= 2;
	}
	c->serverHost = strndup(host, len);
	c->serverPort = (int)port;
}

static void connect_server(void)
{
	rfbClientLog = capture_log;
	rfbClientErr = capture_log;
	client = rfbGetClient(8, 3, 4);
	if (!client)
		fail("out of memory");
	client->canHandleNewFBSize = TRUE;
	client->GetPassword = get_password;
	client->FinishedFrameBufferUpdate = on_update_done;
	client->GotFrameBufferUpdate = on_got_rect;
	client->appData.useRemoteCursor = FALSE;
	/* VNCSHOT_ENCODINGS (libvncclient's -encodings list, e.g. "raw")
	 * checks one encoding of a server at a time. */
	/* Lossless: tests compare pixels (tight would use JPEG). */
	client->appData.enableJPEG = FALSE;
	if (getenv("VNCSHOT_ENCODINGS"))
		client->appData.encodingsString = getenv("VNCSHOT_ENCODINGS");
	set_address(client, opt.addr);
	if (!rfbInitClient(client, NULL, NULL)) {
		client = NULL; /* rfbInitClient freed it */
		fail("connect or authentication failed");
	}
}

/* Handle server messages for up to `usec`; returns whether one came. */
static bool pump(long usec)
{
	int n = WaitForMessage(client, (unsigned)usec);
	if (n < 0)
		fail("connection lost");
	if (n == 0)
		return false;
	if (!HandleRFBServerMessage(client))
		fail("protocol error or connection closed");
	return true;
}

static void wait_first_update(void)
{
	while (!got_update)
		pump(100000);
}

/* Whatever the server has already sent. */
static void drain(void)
{
	while (pump(0))
		;
}

/* Before keys: a server that offers the Extended Key Event sends the offer
 * right after the first update (khyve's) or before it (QEMU's). */
static void wait_key_offer(void)
{
	wait_first_update();
	drain();
	for (int i = 0; i < 4 && !had_extkey && !opt.no_extkey; i++)
		pump(50000);
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static void do_sleep(long ms)
{
	long end = now_ms() + ms;
	for (long left = ms; left > 0; left = end - now_ms())
		pump(left > 100 ? 100000 : left * 1000);
}

static void write_png(const char *path)
{
	int w = client->width, h = client->height, s = (int)opt.scale;
	FILE *f = fopen(path, "wb");
	if (!f) {
		fprintf(stderr, "vncshot: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	png_bytep row = malloc((size_t)w * s * 3);
	if (!png || !info || !row || setjmp(png_jmpbuf(png))) {
		fprintf(stderr, "vncshot: %s: cannot write PNG\n", path);
		exit(1);
	}
	png_init_io(png, f);
	png_set_IHDR(png, info, (png_uint_32)(w * s), (png_uint_32)(h * s), 8, PNG_COLOR_TYPE_RGB,
	             PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	/* The client's frame is 32 bpp with red in the lowest byte (the
	 * pixel format rfbGetClient(8, 3, 4) asks for on this host). */
	for (int y = 0; y < h; y++) {
		const uint8_t *src = client->frameBuffer + (size_t)y * w * 4;
		for (int x = 0; x < w; x++) {
			for (int k = 0; k < s; k++) {
				png_bytep p = row + ((size_t)x * s + k) * 3;
				p[0] = src[x * 4 + 0];
				p[1] = src[x * 4 + 1];
				p[2] = src[x * 4 + 2];
			}
		}
		for (int k = 0; k < s; k++)
			png_write_row(png, row);
	}
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	free(row);
	if (fclose(f) != 0) {
		fprintf(stderr, "vncshot: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

/* The server offered the Extended Key Event.  Remembered here: libvncclient
 * forgets it when a SupportedMessages pseudo-rectangle follows. */
static bool use_extkey(void)
{
	return !opt.no_extkey && had_extkey;
}

/* QEMU Extended Key Event: type 255, submessage 0, down (16 bits), keysym,
 * keycode (the qnum), big-endian. */
static bool send_ext_key(uint32_t keysym, uint16_t qnum, bool down)
{
	uint8_t m[12] = {255, 0, 0, down ? 1 : 0};
	for (int i = 0; i < 4; i++) {
		m[4 + i] = (uint8_t)(keysym >> (24 - 8 * i));
		m[8 + i] = (uint8_t)((uint32_t)qnum >> (24 - 8 * i));
	}
	return WriteToRFBServer(client, (const char *)m, sizeof(m));
}

static void send_key(uint32_t keysym, uint16_t qnum, bool down)
{
	bool ok;
	if (qnum && use_extkey())
		ok = send_ext_key(keysym, qnum, down);
	else
		ok = SendKeyEvent(client, keysym, down);
	if (!ok)
		fail("sending a key failed");
}

/*
 * One key press and release.  With the Extended Key Event the server takes
 * the scancode as it is, so a shifted character is typed as a US keyboard
 * would: Shift around its key.  Without it the server maps the keysym.
 */
static void press_release(uint32_t keysym)
{
	struct keymap_key k = {0, KEYMAP_SHIFT_ANY};
	if (!keymap_lookup(keysym, &k))
		k.qnum = 0;
	bool shift = k.qnum && k.shift == KEYMAP_SHIFT_ON && use_extkey();
	if (shift)
		send_key(KEYMAP_KEYSYM_SHIFT_L, KEYMAP_QNUM_SHIFT_L, true);
	send_key(keysym, k.qnum, true);
	send_key(keysym, k.qnum, false);
	if (shift)
		send_key(KEYMAP_KEYSYM_SHIFT_L, KEYMAP_QNUM_SHIFT_L, false);
}

static void type_text(const char *text)
{
	for (const char *p = text; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '\\' && (p[1] == 'n' || p[1] == 't' || p[1] == '\\')) {
			c = p[1] == 'n' ? '\n' : p[1] == 't' ? '\t' : '\\';
			p++;
		}
		uint32_t keysym = keymap_keysym_of_char(c);
		if (!keysym) {
			fprintf(stderr, "vncshot: cannot type character 0x%02x\n", c);
			exit(2);
		}
		press_release(keysym);
	}
}

static void run_action(const struct action *a)
{
	switch (a->kind) {
	case ACT_SHOT:
		wait_first_update();
		drain();
		write_png(a->arg);
		break;
	case ACT_TYPE:
		wait_key_offer();
		type_text(a->arg);
		break;
	case ACT_KEY:
		wait_key_offer();
		press_release(a->keysym);
		break;
	case ACT_MOVE:
		if (!SendPointerEvent(client, (int)a->x, (int)a->y, (int)a->mask))
			fail("sending a pointer event failed");
		break;
	case ACT_SLEEP:
		do_sleep(a->n);
		break;
	case ACT_SIZE:
		drain();
		printf("%dx%d\n", client->width, client->height);
		fflush(stdout);
		break;
	}
}

/*
 * Leave so that the server reads everything sent: half-close, then read
 * (and drop) what it still sends until it closes too.  Closing at once
 * with its updates unread would reset the connection, and the server
 * would lose the last keys still queued.
 */
static void close_gracefully(void)
{
	char buf[4096];
	long end = now_ms() + 2000;

	shutdown(client->sock, SHUT_WR);
	while (now_ms() < end) {
		struct pollfd p = {.fd = client->sock, .events = POLLIN};
		if (poll(&p, 1, 100) < 0)
			break;
		if (p.revents && read(client->sock, buf, sizeof(buf)) <= 0)
			break;
	}
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	struct itimerval it = {0};
	it.it_value.tv_sec = (time_t)opt.timeout_s;
	it.it_value.tv_usec = (suseconds_t)((opt.timeout_s - (double)it.it_value.tv_sec) * 1e6);
	setitimer(ITIMER_REAL, &it, NULL);
	connect_server();
	for (int i = 0; i < opt.nactions; i++)
		run_action(&opt.actions[i]);
	close_gracefully();
	rfbClientCleanup(client);
	free(opt.actions);
	return 0;
}
