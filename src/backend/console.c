#include "backend/console.h"

#include <pthread.h>
#include <string.h>

struct kbd_sink {
	console_key_fn *fn;
	void *arg;
};

struct ptr_sink {
	console_ptr_fn *fn;
	void *arg;
};

/* Registrations happen at start-up, before the VNC thread runs; the lock
 * only guards against a late registration racing an event. */
static pthread_mutex_t console_lock = PTHREAD_MUTEX_INITIALIZER;
static console_refresh_fn *display_fn;
static void *display_arg;
static struct kbd_sink kbd_sinks[CONSOLE_MAX_SINKS];
static struct ptr_sink ptr_sinks[CONSOLE_MAX_SINKS];
static unsigned nkbd, nptr;

int console_register_display(console_refresh_fn *fn, void *arg)
{
	pthread_mutex_lock(&console_lock);
	display_fn = fn;
	display_arg = arg;
	pthread_mutex_unlock(&console_lock);
	return 0;
}

int console_register_kbd(console_key_fn *fn, void *arg)
{
	int rc = -1;

	pthread_mutex_lock(&console_lock);
	if (nkbd < CONSOLE_MAX_SINKS) {
		kbd_sinks[nkbd++] = (struct kbd_sink){fn, arg};
		rc = 0;
	}
	pthread_mutex_unlock(&console_lock);
	return rc;
}

int console_register_ptr(console_ptr_fn *fn, void *arg)
{
	int rc = -1;

	pthread_mutex_lock(&console_lock);
	if (nptr < CONSOLE_MAX_SINKS) {
		ptr_sinks[nptr++] = (struct ptr_sink){fn, arg};
		rc = 0;
	}
	pthread_mutex_unlock(&console_lock);
	return rc;
}

bool console_refresh(struct console_frame *f)
{
	console_refresh_fn *fn;
	void *arg;

	pthread_mutex_lock(&console_lock);
	fn = display_fn;
	arg = display_arg;
	pthread_mutex_unlock(&console_lock);
	if (fn == NULL)
		return false;
	fn(arg, f);
	return true;
}

void console_key_event(bool down, uint16_t qnum)
{
	struct kbd_sink sinks[CONSOLE_MAX_SINKS];
	unsigned n;

	pthread_mutex_lock(&console_lock);
	n = nkbd;
	memcpy(sinks, kbd_sinks, sizeof(sinks));
	pthread_mutex_unlock(&console_lock);
	for (unsigned i = 0; i < n; i++)
		sinks[i].fn(sinks[i].arg, down, qnum);
}

void console_ptr_event(uint8_t buttons, uint32_t x, uint32_t y, uint32_t width, uint32_t height)
{
	struct ptr_sink sinks[CONSOLE_MAX_SINKS];
	unsigned n;

	pthread_mutex_lock(&console_lock);
	n = nptr;
	memcpy(sinks, ptr_sinks, sizeof(sinks));
	pthread_mutex_unlock(&console_lock);
	for (unsigned i = 0; i < n; i++)
		sinks[i].fn(sinks[i].arg, buttons, x, y, width, height);
}

void console_reset(void)
{
	pthread_mutex_lock(&console_lock);
	display_fn = NULL;
	display_arg = NULL;
	nkbd = nptr = 0;
	pthread_mutex_unlock(&console_lock);
}
