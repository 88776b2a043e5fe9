/* Waiting for guests to stop, with a countdown (stopwait.h). */
#include "vm/stopwait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vm/state.h"
#include "vm/supervisor.h"

#define DEAF_LINE      "power button pressed, but the guest is not listening"
#define STEP_MS        100
#define FIRST_STEP_MS  10    /* most guests stop within a second: look often then */
#define PLAIN_EVERY_MS 10000 /* without a terminal: one line every 10 s */

bool vm_still_running(const struct vm_sys *sys, const char *name)
{
	struct vm_guest g;
	struct vm_status st;
	char err[512];
	bool running;

	if (vm_guest_find(sys, name, &g, err, sizeof(err)) < 0) {
		vm_guest_free(&g);
		return false;
	}
	vm_status_get(sys, &g, &st);
	running = st.state == VM_RUNNING;
	vm_guest_free(&g);
	return running;
}

struct vm_stop_watch *vm_stop_watch_begin(const struct vm_sys *sys, char *const names[], size_t n)
{
	struct vm_stop_watch *w = calloc(n ? n : 1, sizeof(*w));

	for (size_t i = 0; w && i < n; i++) {
		struct vm_guest g;
		struct stat st;
		char err[512];

		w[i].name = names[i];
		if (vm_guest_find(sys, names[i], &g, err, sizeof(err)) == 0 &&
		    vm_path(w[i].log, g.dir, VM_RUN_LOG) == 0 && stat(w[i].log, &st) == 0)
			w[i].mark = st.st_size;
		vm_guest_free(&g);
	}
	return w;
}

/* Whether khyve logged, since the mark, that the guest ignored the button. */
static bool not_listening(const struct vm_stop_watch *w)
{
	char line[512];
	bool deaf = false;
	FILE *f;

	if (!w->log[0] || !(f = fopen(w->log, "re")))
		return false;
	if (fseeko(f, w->mark, SEEK_SET) == 0)
		while (!deaf && fgets(line, sizeof(line), f))
			deaf = strstr(line, DEAF_LINE) != NULL;
	fclose(f);
	return deaf;
}

/* Whether a countdown line stands unfinished on the terminal. */
static bool countdown_open;

/* End the countdown line so that what follows starts on a line of its own. */
static void clear_countdown(void)
{
	if (!countdown_open)
		return;
	printf("\r\033[K");
	fflush(stdout);
	countdown_open = false;
}

/* Settle the guests that stopped or cannot hear; how many still wait. */
static size_t check_guests(const struct vm_sys *sys, struct vm_stop_watch *w, size_t n, int *rc)
{
	size_t left = 0;

	for (size_t i = 0; i < n; i++) {
		if (w[i].settled)
			continue;
		if (!vm_still_running(sys, w[i].name)) {
			w[i].settled = true;
		} else if (not_listening(&w[i])) {
			w[i].settled = true;
			clear_countdown();
			*rc = vm_error(
			    "%s did not hear the ACPI power button (it is in its firmware or "
			    "boot loader, or has no ACPI); use vm poweroff %s",
			    w[i].name, w[i].name);
		} else {
			left++;
		}
	}
	return left;
}

static void show_countdown(bool tty, size_t left, long ms_left)
{
	long s = (ms_left + 999) / 1000;

	if (tty)
		printf("\rWaiting for %zu guest(s) to stop: %ld s left \033[K", left, s);
	else
		printf("Waiting for %zu guest(s) to stop: %ld s left\n", left, s);
	countdown_open = tty;
	fflush(stdout);
}

static void sleep_step(long waited_ms)
{
	long ms = waited_ms < 1000 ? FIRST_STEP_MS : STEP_MS;
	struct timespec t = {0, ms * 1000L * 1000L};

	nanosleep(&t, NULL);
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

int vm_stop_wait(const struct vm_sys *sys, struct vm_stop_watch *w, size_t n, int timeout,
                 const char *hint)
{
	bool tty = isatty(STDOUT_FILENO);
	long start = now_ms(), limit = timeout * 1000L, waited;
	/* A guest that stops within a second needs no countdown. */
	long next_show = 1000;
	size_t left;
	int rc = 0;

	fflush(stdout);
	for (;;) {
		left = check_guests(sys, w, n, &rc);
		waited = now_ms() - start;
		if (!left || waited >= limit)
			break;
		if (waited >= next_show) {
			show_countdown(tty, left, limit - waited);
			next_show += tty ? 1000 : PLAIN_EVERY_MS;
		}
		sleep_step(waited);
	}
	clear_countdown();
	fflush(stdout);
	for (size_t i = 0; left && i < n; i++)
		if (!w[i].settled)
			rc = vm_error("%s is still running after %d s%s", w[i].name, timeout, hint);
	return rc;
}
