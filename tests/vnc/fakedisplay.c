/*
 * A fake display for the VNC server's tests (tests/vnc/run) and benchmark
 * (bench/vnc): it registers a console display that shows a known pattern,
 * a keyboard sink and a pointer sink that print what arrives, and starts
 * the VNC server (backend/vnc.c) on the address given.
 *
 *   vnc-fakedisplay [--password PW] [--wait] [--host H] [--port N | --unix PATH]
 *                   [--size WxH]
 *
 * stdout, one line each, flushed: "ready PORT" once listening, "first-client",
 * "key down|up 0xQQ", "ptr BUTTONS X Y WIDTH HEIGHT", and on "stats"
 * "stats refreshes=N changed=N updates=N bytes=N cpu_ms=N" (vnc_get_stats()
 * and this process's CPU time).  stdin takes commands, one a line: "size W H"
 * (a new frame size, pattern redrawn), "line Y" (one text-like line of 16
 * rows changes), "full" (every pixel changes), "animate 1|0" (every refresh
 * changes every pixel), "stats", "quit".  A start-up error prints
 * vnc_start()'s line on stderr and exits 4.
 *
 * The pattern, for generation g (0 at start, +1 on each "full"):
 * pixel(x, y) = (x & 255) << 16 | (y & 255) << 8 | ((x >> 8) + 16 * (y >> 8) + 64 * g) & 255.
 */
#include "backend/console.h"
#include "backend/vnc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fake {
	pthread_mutex_t lock;
	uint32_t *pixels; /* handed to the VNC thread; changed only in refresh */
	uint32_t width, height;
	/* Pending changes, applied on the next refresh. */
	uint32_t want_w, want_h;
	unsigned gen, want_gen;
	int line_y;   /* -1: none */
	bool animate; /* every refresh changes every pixel (bench/vnc) */
	unsigned line_count;
	unsigned long refreshes;
};

static struct fake fake = {.lock = PTHREAD_MUTEX_INITIALIZER, .line_y = -1};

static uint32_t pattern(uint32_t x, uint32_t y, unsigned gen)
{
	return (x & 255) << 16 | (y & 255) << 8 | (((x >> 8) + 16 * (y >> 8) + 64 * gen) & 255);
}

static void draw_all(struct fake *f)
{
	for (uint32_t y = 0; y < f->height; y++)
		for (uint32_t x = 0; x < f->width; x++)
			f->pixels[(size_t)y * f->width + x] = pattern(x, y, f->gen);
}

/* A 16-pixel-high band across 3/4 of the width: like one changed text line. */
static void draw_line(struct fake *f, uint32_t y0, struct console_frame *fr)
{
	uint32_t h = 16, w = f->width * 3 / 4;
	if (y0 >= f->height)
		return;
	if (h > f->height - y0)
		h = f->height - y0;
	f->line_count++;
	for (uint32_t y = y0; y < y0 + h; y++)
		for (uint32_t x = 0; x < w; x++)
			f->pixels[(size_t)y * f->width + x] =
			    ((x / 8 + f->line_count) % 3) ? 0x00c0c0c0 : 0x00000000;
	if (fr->nrects < CONSOLE_MAX_RECTS)
		fr->rects[fr->nrects++] = (struct console_rect){0, y0, w, h};
}

static void on_refresh(void *arg, struct console_frame *fr)
{
	struct fake *f = arg;

	pthread_mutex_lock(&f->lock);
	f->refreshes++;
	if (f->animate)
		f->want_gen++;
	if (f->want_w != f->width || f->want_h != f->height || f->want_gen != f->gen) {
		uint32_t *p = realloc(f->pixels, (size_t)f->want_w * f->want_h * 4);
		if (p) {
			f->pixels = p;
			f->width = f->want_w;
			f->height = f->want_h;
			f->gen = f->want_gen;
			draw_all(f);
			fr->full = true;
		}
	}
	if (f->line_y >= 0) {
		draw_line(f, (uint32_t)f->line_y, fr);
		f->line_y = -1;
	}
	fr->pixels = f->pixels;
	fr->width = f->width;
	fr->height = f->height;
	fr->stride = f->width;
	pthread_mutex_unlock(&f->lock);
}

static void on_key(void *arg, bool down, uint16_t qnum)
{
	(void)arg;
	printf("key %s 0x%02x\n", down ? "down" : "up", qnum);
	fflush(stdout);
}

static void on_ptr(void *arg, uint8_t buttons, uint32_t x, uint32_t y, uint32_t w, uint32_t h)
{
	(void)arg;
	printf("ptr %u %u %u %u %u\n", buttons, x, y, w, h);
	fflush(stdout);
}

static void on_first_client(void *arg)
{
	(void)arg;
	printf("first-client\n");
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr, "usage: vnc-fakedisplay [--password PW] [--wait] [--host H] "
	                "[--port N | --unix PATH] [--size WxH]\n");
	exit(2);
}

static struct vnc_server *server;

/* One line: the server's counters and this process's CPU time. */
static void print_stats(void)
{
	struct vnc_stats st;
	struct timespec cpu;

	vnc_get_stats(server, &st);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
	printf("stats refreshes=%lu changed=%llu updates=%llu bytes=%llu cpu_ms=%lld\n",
	       fake.refreshes, (unsigned long long)st.changed_refreshes,
	       (unsigned long long)st.updates_sent, (unsigned long long)st.bytes_sent,
	       (long long)cpu.tv_sec * 1000 + cpu.tv_nsec / 1000000);
	fflush(stdout);
}

static void run_commands(void)
{
	char line[128];
	unsigned a, b;

	while (fgets(line, sizeof(line), stdin)) {
		pthread_mutex_lock(&fake.lock);
		if (sscanf(line, "size %u %u", &a, &b) == 2 && a > 0 && b > 0 && a <= 8192 &&
		    b <= 8192) {
			fake.want_w = a;
			fake.want_h = b;
		} else if (sscanf(line, "line %u", &a) == 1) {
			fake.line_y = (int)a;
		} else if (strncmp(line, "full", 4) == 0) {
			fake.want_gen++;
		} else if (sscanf(line, "animate %u", &a) == 1) {
			fake.animate = a != 0;
		} else if (strncmp(line, "stats", 5) == 0) {
			print_stats();
		} else if (strncmp(line, "quit", 4) == 0) {
			pthread_mutex_unlock(&fake.lock);
			return;
		}
		pthread_mutex_unlock(&fake.lock);
	}
}

int main(int argc, char **argv)
{
	struct vnc_config c = {.host = "127.0.0.1", .width = 640, .height = 480, .name = "fake"};
	bool wait = false;
	char err[256];

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		if (strcmp(o, "--wait") == 0) {
			wait = true;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];
		if (strcmp(o, "--password") == 0)
			c.password = v;
		else if (strcmp(o, "--host") == 0)
			c.host = v;
		else if (strcmp(o, "--port") == 0)
			c.port = atoi(v);
		else if (strcmp(o, "--unix") == 0)
			c.unix_path = v;
		else if (strcmp(o, "--size") == 0) {
			if (sscanf(v, "%ux%u", &c.width, &c.height) != 2)
				usage();
		} else
			usage();
	}
	fake.want_w = c.width;
	fake.want_h = c.height;
	console_register_display(on_refresh, &fake);
	console_register_kbd(on_key, NULL);
	console_register_ptr(on_ptr, NULL);
	if (wait)
		c.first_client = on_first_client;
	struct vnc_server *s = server = vnc_start(&c, err, sizeof(err));
	if (s == NULL) {
		fprintf(stderr, "%s\n", err);
		return 4;
	}
	printf("ready %d\n", vnc_port(s));
	fflush(stdout);
	run_commands();
	vnc_stop(s);
	free(fake.pixels);
	console_reset();
	return 0;
}
