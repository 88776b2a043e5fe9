/*
 * Suspend and resume (suspend.h): the saved state's file, khyvectl
 * --suspend, vm_stop_mode, and `vm suspend`.
 */
#include "vm/suspend.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vm/commands.h"
#include "vm/live.h"
#include "vm/paths.h"
#include "vm/state.h"
#include "vm/stopwait.h"
#include "vm/supervisor.h"
#include "vm/util.h"

#define SUSPEND_STOP_WAIT_MS 10000 /* khyve exits right after the file is complete */

int vm_state_path(const struct vm_guest *g, char *out)
{
	int n = snprintf(out, PATH_MAX, "%s/%s%s", g->dir, g->name, VM_STATE_SUFFIX);

	return n < 0 || n >= PATH_MAX ? -1 : 0;
}

bool vm_state_present(const struct vm_guest *g)
{
	char path[PATH_MAX];
	struct stat st;

	return vm_state_path(g, path) == 0 && lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int vm_argv_add_option(struct argv *a, const char *opt, const char *value)
{
	char *name;

	if (a->n == 0)
		return -1;
	/* Append two words, then move the name back behind them. */
	name = a->v[a->n - 1];
	a->v[a->n - 1] = NULL;
	a->n--;
	if (argv_add(a, opt) < 0 || argv_add(a, value) < 0) {
		a->v[a->n++] = name;
		a->v[a->n] = NULL;
		return -1;
	}
	a->v[a->n++] = name;
	a->v[a->n] = NULL;
	return 0;
}

int vm_argv_add_restore(struct argv *a, const char *path)
{
	return vm_argv_add_option(a, "-r", path);
}

int vm_state_discard(const struct vm_guest *g, char *err, size_t errlen)
{
	char from[PATH_MAX], to[PATH_MAX];

	if (vm_state_path(g, from) < 0 || snprintf(to, sizeof(to), "%s/%s%s", g->dir, g->name,
	                                           VM_DISCARDED_SUFFIX) >= (int)sizeof(to)) {
		snprintf(err, errlen, "%s: path too long", g->dir);
		return -1;
	}
	if (rename(from, to) < 0) {
		snprintf(err, errlen, "%s: cannot discard the saved state: %s", g->name,
		         strerror(errno));
		return -1;
	}
	return 0;
}

int vm_stop_mode_get(const struct vm_sys *sys, enum vm_stop_mode *mode)
{
	const char *v = rcconf_get_default(sys->conf, "vm_stop_mode", "");

	*mode = VM_STOP_SHUTDOWN;
	if (!*v || !strcmp(v, "shutdown"))
		return 0;
	if (!strcmp(v, "suspend")) {
		*mode = VM_STOP_SUSPEND;
		return 0;
	}
	return vm_error("%s: vm_stop_mode=\"%s\": use \"shutdown\" or \"suspend\"", sys->conf_path,
	                v);
}

int vm_khyvectl(const struct vm_sys *sys, const struct vm_guest *g, const char *action, char *err,
                size_t errlen)
{
	char sock[PATH_MAX], sock_arg[PATH_MAX + 16], why[1024];

	if (vm_path(sock, g->dir, VM_API_SOCKET) < 0) {
		snprintf(err, errlen, "%s: path too long", g->dir);
		return -1;
	}
	snprintf(sock_arg, sizeof(sock_arg), "--socket=%s", sock);
	const char *argv[] = {sys->khyvectl, sock_arg, action, NULL};
	if (vm_tool_run(&(struct vm_tool){.argv = argv, .what = "khyvectl"}, why, sizeof(why)) <
	    0) {
		/* khyvectl's own lines start with its name already. */
		const char *line = why;
		if (!strncmp(line, "khyvectl: khyvectl: ", 20))
			line += 10;
		snprintf(err, errlen, "%s", line);
		return -1;
	}
	return 0;
}

int vm_suspend_request(const struct vm_sys *sys, const struct vm_guest *g, char *err, size_t errlen)
{
	char state[PATH_MAX], state_arg[PATH_MAX + 16];

	if (vm_state_path(g, state) < 0) {
		snprintf(err, errlen, "%s: path too long", g->dir);
		return -1;
	}
	snprintf(state_arg, sizeof(state_arg), "--suspend=%s", state);
	return vm_khyvectl(sys, g, state_arg, err, errlen);
}

void vm_guest_log(const struct vm_guest *g, const char *fmt, ...)
{
	char path[PATH_MAX], stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	va_list ap;
	int fd;
	FILE *f;

	if (vm_path(path, g->dir, VM_RUN_LOG) < 0 ||
	    (fd = vm_open_own(path, O_WRONLY | O_APPEND | O_CREAT, 0644)) < 0)
		return;
	if (!(f = fdopen(fd, "a"))) {
		close(fd);
		return;
	}
	strftime(stamp, sizeof(stamp), "%b %d %T", localtime_r(&now, &tm));
	fprintf(f, "%s: ", stamp);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

/* Wait for the supervisor to see khyve's exit 5 and let go of the lock. */
static int wait_suspended(const struct vm_sys *sys, const struct vm_guest *g)
{
	struct timespec step = {0, 50 * 1000 * 1000};

	for (int waited = 0; waited < SUSPEND_STOP_WAIT_MS; waited += 50) {
		if (!vm_still_running(sys, g->name))
			return 0;
		nanosleep(&step, NULL);
	}
	return vm_error("%s: the state is saved, but the guest still runs after %d s; see %s/%s",
	                g->name, SUSPEND_STOP_WAIT_MS / 1000, g->dir, VM_RUN_LOG);
}

/* Why `g` cannot be suspended now (1 after the message), or 0. */
static int check_suspendable(const struct vm_guest *g, const struct vm_status *st)
{
	if (st->state == VM_SUSPENDED)
		return vm_error("%s is already suspended (vm start %s resumes it)", g->name,
		                g->name);
	if (st->state == VM_LOCKED)
		return vm_error("%s is locked by host %s, not running here", g->name, st->host);
	if (st->state != VM_RUNNING)
		return vm_error("%s is not running", g->name);
	/* The state it resumed from goes once it has run a moment (supervisor.c);
	 * khyvectl would not replace it, and the supervisor would remove the new one. */
	if (vm_state_present(g))
		return vm_error("%s is still resuming from %s%s; try again in a few seconds",
		                g->name, g->name, VM_STATE_SUFFIX);
	return 0;
}

static int suspend_one(const struct vm_sys *sys, const char *name)
{
	struct vm_guest g;
	struct vm_status st;
	char err[1200], path[PATH_MAX];
	int rc;

	if (vm_guest_find(sys, name, &g, err, sizeof(err)) < 0) {
		vm_guest_free(&g);
		return vm_error("%s", err);
	}
	vm_status_get(sys, &g, &st);
	rc = check_suspendable(&g, &st);
	if (rc == 0 && vm_state_path(&g, path) < 0)
		rc = vm_error("%s: path too long", g.dir);
	if (rc == 0) {
		printf("Suspending %s into %s\n", g.name, path);
		fflush(stdout);
		if (vm_suspend_request(sys, &g, err, sizeof(err)) < 0)
			rc = vm_error("%s: cannot suspend: %s", g.name, err);
		else
			rc = wait_suspended(sys, &g);
	}
	if (rc == 0)
		printf("%s is suspended (vm start %s resumes it)\n", g.name, g.name);
	vm_guest_free(&g);
	return rc;
}

int cmd_suspend(struct vm_sys *sys, int argc, char **argv)
{
	char err[512];
	int rc = 0;

	if (argc < 2 || argv[1][0] == '-')
		return vm_error("usage: vm suspend name...");
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (vm_require_write(sys, "suspend") < 0)
		return 1;
	for (int i = 1; i < argc; i++)
		if (suspend_one(sys, argv[i]))
			rc = 1;
	return rc;
}
