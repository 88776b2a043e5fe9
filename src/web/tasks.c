/*
 * Tasks: `vm` commands the web daemon runs for a user (start, stop,
 * create + install, ...), as Proxmox's task log shows them.  Each runs as
 * a child process in its own process group, stdin /dev/null, stdout and
 * stderr into a non-blocking pipe the loop drains every 200 ms
 * (web_tasks_poll), so nothing here ever waits for a child.  The last
 * TASKS_KEPT tasks are kept in memory with at most OUTPUT_MAX bytes of
 * output each.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "web/guests.h"

#define TASKS_KEPT  100
#define OUTPUT_MAX  (64 * 1024)
#define ARGS_MAX    32
#define COMMAND_MAX 1024

enum task_state { TASK_RUNNING, TASK_OK, TASK_FAILED };

struct web_task {
	int id;
	char user[65];
	char command[COMMAND_MAX]; /* "vm create -t default web1 && vm install web1 a.iso" */
	enum task_state state;
	int status; /* exit status (128 + signal when killed), once ended */
	time_t started, ended;
	pid_t pid; /* the running step's child, 0 when none */
	int fd;    /* read end of its output pipe, -1 when closed */
	char *out; /* OUTPUT_MAX + 1 bytes */
	size_t out_len;
	bool truncated;
	char **then; /* the second step's argv (after "vm"), NULL when none or started */
};

struct web_tasks {
	struct web_task *t[TASKS_KEPT]; /* oldest first */
	size_t n;
	int next_id;
};

int web_tasks_init(struct web_ctx *ctx)
{
	if (!(ctx->tasks = calloc(1, sizeof(*ctx->tasks))))
		return -1;
	ctx->tasks->next_id = 1;
	return 0;
}

static void free_argv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static void task_free(struct web_task *t)
{
	if (!t)
		return;
	if (t->fd >= 0)
		close(t->fd);
	free(t->out);
	free_argv(t->then);
	free(t);
}

void web_tasks_free(struct web_ctx *ctx)
{
	if (!ctx->tasks)
		return;
	/* Running children are left to finish: a `vm start` cut short helps no one. */
	for (size_t i = 0; i < ctx->tasks->n; i++)
		task_free(ctx->tasks->t[i]);
	free(ctx->tasks);
	ctx->tasks = NULL;
}

/* A malloc'd copy of a NULL-terminated argv (at most ARGS_MAX), or NULL. */
static char **copy_argv(char *const v[])
{
	size_t n = 0;
	char **c;

	while (v[n])
		if (++n > ARGS_MAX)
			return NULL;
	if (!(c = calloc(n + 1, sizeof(*c))))
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(c[i] = strdup(v[i]))) {
			free_argv(c);
			return NULL;
		}
	return c;
}

/* Append " WORD..." of argv to the task's command line. */
static void append_command(struct web_task *t, const char *sep, char *const argv[])
{
	size_t len = strlen(t->command);

	len += (size_t)snprintf(t->command + len, sizeof(t->command) - len, "%svm", sep);
	for (size_t i = 0; argv[i] && len < sizeof(t->command); i++)
		len += (size_t)snprintf(t->command + len, sizeof(t->command) - len, " %s", argv[i]);
}

/*
 * fork + execv `self ARGV...` with its output into a new pipe; the pid,
 * or -1 with err.  The child gets default signal handling, an empty
 * signal mask, its own process group and no fd of ours but 0-2.
 */
static pid_t spawn(const char *self, char *const argv[], int *out_fd, char *err, size_t errlen)
{
	char *full[ARGS_MAX + 2];
	size_t n = 0;
	int p[2], null;
	pid_t pid;

	full[n++] = (char *)self;
	while (argv[n - 1] && n <= ARGS_MAX)
		full[n] = argv[n - 1], n++;
	full[n] = NULL;
	if ((null = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "/dev/null: %s", strerror(errno));
		return -1;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		close(null);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		sigset_t none;
		/* The loop's signal handling (SIGTERM, SIGPIPE ignored) is not the command's. */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		for (int s = 1; s < NSIG; s++)
			signal(s, SIG_DFL);
		setpgid(0, 0);
		if (dup2(null, 0) < 0 || dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0)
			_exit(127);
		/* No fd of ours but 0-2 (the TLS sockets, PAM's) reaches the command. */
		if (close_range(3, ~0U, 0) < 0)
			for (int fd = 3; fd < 65536; fd++)
				close(fd);
		execv(self, full);
		/* Only async-signal-safe calls after fork (PAM runs threads). */
		static const char msg[] = "vm web: cannot run the vm binary\n";
		(void)!write(2, msg, sizeof(msg) - 1);
		_exit(127);
	}
	close(null);
	close(p[1]);
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(p[0]);
		return -1;
	}
	setpgid(pid, pid); /* also here: no race with the child's own call */
	fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
	*out_fd = p[0];
	return pid;
}

/* Room for a new task: drop the oldest ended one when the list is full. */
static int make_room(struct web_tasks *ts)
{
	if (ts->n < TASKS_KEPT)
		return 0;
	for (size_t i = 0; i < ts->n; i++)
		if (ts->t[i]->state != TASK_RUNNING) {
			task_free(ts->t[i]);
			memmove(&ts->t[i], &ts->t[i + 1], (ts->n - i - 1) * sizeof(ts->t[0]));
			ts->n--;
			return 0;
		}
	return -1;
}

int web_task_start2(struct web_ctx *ctx, const char *user, char *const argv[], char *const then[],
                    char *err, size_t errlen)
{
	struct web_tasks *ts = ctx->tasks;
	struct web_task *t;

	if (!ts) {
		snprintf(err, errlen, "tasks are not set up");
		return -1;
	}
	if (make_room(ts) < 0) {
		snprintf(err, errlen, "%d tasks are running; try again later", TASKS_KEPT);
		return -1;
	}
	if (!(t = calloc(1, sizeof(*t))) || !(t->out = malloc(OUTPUT_MAX + 1)) ||
	    (then && !(t->then = copy_argv(then)))) {
		snprintf(err, errlen, "out of memory");
		task_free(t);
		return -1;
	}
	t->fd = -1;
	snprintf(t->user, sizeof(t->user), "%s", user ? user : "");
	append_command(t, "", argv);
	if (then)
		append_command(t, " && ", then);
	t->pid = spawn(ctx->sys->self, argv, &t->fd, err, errlen);
	if (t->pid < 0) {
		task_free(t);
		return -1;
	}
	t->id = ts->next_id++;
	t->started = time(NULL);
	t->state = TASK_RUNNING;
	ts->t[ts->n++] = t;
	fprintf(stderr, "vm web: task %d started by %s: %s\n", t->id, t->user, t->command);
	return t->id;
}

int web_task_start(struct web_ctx *ctx, const char *user, char *const argv[], char *err,
                   size_t errlen)
{
	return web_task_start2(ctx, user, argv, NULL, err, errlen);
}

/* Read what the pipe has now (never blocks); closes it at EOF. */
static void drain(struct web_task *t)
{
	char buf[4096];

	while (t->fd >= 0) {
		ssize_t n = read(t->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			close(t->fd);
			t->fd = -1;
			return;
		}
		size_t keep =
		    OUTPUT_MAX - t->out_len < (size_t)n ? OUTPUT_MAX - t->out_len : (size_t)n;
		for (size_t i = 0; i < keep; i++) /* a NUL would cut the JSON string short */
			t->out[t->out_len + i] = buf[i] ? buf[i] : '?';
		t->out_len += keep;
		t->truncated |=
		    keep < (size_t)n; /* the rest is read and dropped: the child never stalls */
	}
}

static void task_end(struct web_task *t, int status)
{
	t->status = status;
	t->state = status == 0 ? TASK_OK : TASK_FAILED;
	t->ended = time(NULL);
	fprintf(stderr, "vm web: task %d ended: %s (status %d): %s\n", t->id,
	        status == 0 ? "ok" : "failed", status, t->command);
}

/* One running task: its output, and whether its step has exited. */
static void poll_task(struct web_ctx *ctx, struct web_task *t)
{
	int ws, status;
	pid_t r;

	drain(t);
	r = waitpid(t->pid, &ws, WNOHANG);
	if (r == 0 || (r < 0 && errno == EINTR))
		return;
	/* Exited (or reaped by someone else: ECHILD, status unknown). */
	drain(t);
	if (t->fd >= 0) { /* a daemon it left behind may hold the pipe: stop reading */
		close(t->fd);
		t->fd = -1;
	}
	t->pid = 0;
	status = r < 0 ? 127 : WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	if (status == 0 && t->then) {
		char err[256];
		char **then = t->then;
		t->then = NULL;
		t->pid = spawn(ctx->sys->self, then, &t->fd, err, sizeof(err));
		free_argv(then);
		if (t->pid > 0)
			return;
		t->pid = 0;
		fprintf(stderr, "vm web: task %d: %s\n", t->id, err);
		status = 127;
	}
	task_end(t, status);
}

void web_tasks_poll(struct web_ctx *ctx)
{
	if (!ctx->tasks)
		return;
	for (size_t i = 0; i < ctx->tasks->n; i++)
		if (ctx->tasks->t[i]->state == TASK_RUNNING)
			poll_task(ctx, ctx->tasks->t[i]);
}

cJSON *web_tasks_json(struct web_ctx *ctx)
{
	static const char *const states[] = {"running", "ok", "failed"};
	cJSON *a = cJSON_CreateArray();

	for (size_t i = ctx->tasks ? ctx->tasks->n : 0; a && i-- > 0;) {
		const struct web_task *t = ctx->tasks->t[i];
		cJSON *o = cJSON_CreateObject();
		char *out = malloc(t->out_len + 32);

		if (!o || !out) {
			cJSON_Delete(o);
			free(out);
			cJSON_Delete(a);
			return NULL;
		}
		memcpy(out, t->out, t->out_len);
		strcpy(out + t->out_len, t->truncated ? "\n[output cut at 64 KiB]\n" : "");
		cJSON_AddNumberToObject(o, "id", t->id);
		cJSON_AddStringToObject(o, "user", t->user);
		cJSON_AddStringToObject(o, "command", t->command);
		cJSON_AddStringToObject(o, "state", states[t->state]);
		if (t->state == TASK_RUNNING)
			cJSON_AddNullToObject(o, "status");
		else
			cJSON_AddNumberToObject(o, "status", t->status);
		cJSON_AddNumberToObject(o, "started", (double)t->started);
		if (t->state == TASK_RUNNING)
			cJSON_AddNullToObject(o, "ended");
		else
			cJSON_AddNumberToObject(o, "ended", (double)t->ended);
		cJSON_AddStringToObject(o, "output", out);
		free(out);
		cJSON_AddItemToArray(a, o);
	}
	return a;
}
