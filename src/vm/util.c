/* File and process helpers for the vm manager (util.h). */
#include "vm/util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/mac.h"
#include "vm/vm.h"

/* A memfd holding `text` (or empty), rewound for reading; -1 on error. */
static int memfd_with(const char *name, const char *text)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	size_t len = text ? strlen(text) : 0, done = 0;

	while (fd >= 0 && done < len) {
		ssize_t w = write(fd, text + done, len - done);
		if (w < 0 && errno != EINTR) {
			close(fd);
			return -1;
		}
		done += w > 0 ? (size_t)w : 0;
	}
	if (fd >= 0 && lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Everything written to `fd` as a malloc'd string (NULL when out of memory). */
static char *memfd_read(int fd)
{
	off_t size = lseek(fd, 0, SEEK_END);
	char *buf;
	size_t done = 0;

	if (size < 0 || lseek(fd, 0, SEEK_SET) < 0 || !(buf = malloc((size_t)size + 1)))
		return NULL;
	while (done < (size_t)size) {
		ssize_t r = read(fd, buf + done, (size_t)size - done);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			break;
		}
		done += (size_t)r;
	}
	buf[done] = '\0';
	return buf;
}

/*
 * In the child: the supervisor blocks or ignores signals for its own
 * reasons, and both survive exec; a dnsmasq started from it must still
 * stop on SIGTERM.
 */
static void reset_signals(void)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD, SIGQUIT};
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
}

/* In the child: exec argv[0] from PATH, else from the sbin folders that a
 * minimal PATH (cron, some sudo setups) leaves out. */
static void __attribute__((noreturn)) exec_tool(const char *const argv[])
{
	static const char *const dirs[] = {"/usr/sbin/", "/sbin/", "/usr/bin/"};
	char path[256];

	execvp(argv[0], (char *const *)argv);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && !strchr(argv[0], '/'); i++) {
		snprintf(path, sizeof(path), "%s%s", dirs[i], argv[0]);
		execv(path, (char *const *)argv);
	}
	dprintf(2, "%s: command not found\n", argv[0]);
	_exit(127);
}

/* In the child: stdin, stdout and stderr as `t` says, then the tool. */
static void __attribute__((noreturn)) child_run(const struct vm_tool *t, int in, int so, int se)
{
	int logfd = -1;

	if (t->log && (logfd = open(t->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
	                            0644)) < 0)
		_exit(126);
	if (logfd >= 0)
		so = se = logfd;
	else if (!t->out)
		so = t->out_fd > 0 ? t->out_fd : open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (so < 0 || dup2(in, 0) < 0 || dup2(so, 1) < 0 || dup2(se, 2) < 0)
		_exit(126);
	if (t->cwd && chdir(t->cwd) < 0)
		_exit(126);
	reset_signals();
	exec_tool(t->argv);
}

/* The line of a tool's stderr worth showing: the first one that says
 * "Error", else the first non-blank one (nft adds context lines), less a
 * leading "TOOL: " when the message names the tool anyway. */
static void error_line(const char *text, const char *tool, char *out, size_t len)
{
	const char *pick = strstr(text, "Error");
	size_t n, tl = strlen(tool);

	if (pick) {
		while (pick > text && pick[-1] != '\n')
			pick--;
	} else {
		pick = text;
		while (*pick == '\n' || *pick == ' ' || *pick == '\t')
			pick++;
	}
	if (tool[0] && !strncmp(pick, tool, tl) && pick[tl] == ':')
		for (pick += tl + 1; *pick == ' ';)
			pick++;
	n = strcspn(pick, "\n");
	snprintf(out, len, "%.*s", (int)n, pick);
}

/* The last non-empty line of the log `path`, as "TOOL failed: LINE". */
static void log_error_line(const char *path, const char *tool, char *out, size_t len)
{
	char line[512], last[400] = "";
	FILE *f = fopen(path, "re");

	while (f && fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\r\n");

		if (n)
			snprintf(last, sizeof(last), "%.*s", (int)n, line);
	}
	if (f)
		fclose(f);
	snprintf(out, len, "%s failed%s%s", tool, last[0] ? ": " : "", last);
}

static void report_failure(const struct vm_tool *t, int status, int se, char *err, size_t errlen)
{
	const char *tool = t->argv[0], *what = t->what ? t->what : tool;
	char line[640] = "", *text = NULL;

	if (t->log)
		log_error_line(t->log, tool, line, sizeof(line));
	else if ((text = memfd_read(se)))
		error_line(text, t->what ? "" : tool, line, sizeof(line));
	free(text);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && strstr(line, "command not found"))
		snprintf(err, errlen, "%s: %s is not installed", what, tool);
	else if (line[0])
		snprintf(err, errlen, "%s: %s", what, line);
	else if (WIFEXITED(status))
		snprintf(err, errlen, "%s: %s exited with status %d", what, tool,
		         WEXITSTATUS(status));
	else
		snprintf(err, errlen, "%s: %s was killed by signal %d", what, tool,
		         WTERMSIG(status));
}

static int wait_tool(const struct vm_tool *t, pid_t pid, int so, int se, char *err, size_t errlen)
{
	const char *what = t->what ? t->what : t->argv[0];
	int status = 0;
	pid_t waited;

	while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	if (waited < 0) {
		snprintf(err, errlen, "%s: waiting for %s: %s", what, t->argv[0], strerror(errno));
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		report_failure(t, status, se, err, errlen);
		return -1;
	}
	if (t->out && !(*t->out = memfd_read(so))) {
		snprintf(err, errlen, "%s: out of memory", what);
		return -1;
	}
	return 0;
}

int vm_tool_run(const struct vm_tool *t, char *err, size_t errlen)
{
	int in = memfd_with("in", t->input), so = memfd_with("out", NULL),
	    se = memfd_with("err", NULL);
	int rc = -1;
	pid_t pid = -1;

	if (t->out)
		*t->out = NULL;
	/* Our buffered output must not be written twice by the child. */
	fflush(NULL);
	if (in < 0 || so < 0 || se < 0 || (pid = fork()) < 0)
		snprintf(err, errlen, "%s: cannot run %s: %s", t->what ? t->what : t->argv[0],
		         t->argv[0], strerror(errno));
	else if (pid == 0)
		child_run(t, in, so, se);
	else
		rc = wait_tool(t, pid, so, se, err, errlen);
	if (in >= 0)
		close(in);
	if (so >= 0)
		close(so);
	if (se >= 0)
		close(se);
	return rc;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)ftw;
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

int vm_rmtree(const char *path)
{
	return nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS) == 0 || errno == ENOENT ? 0 : -1;
}

int vm_make_sparse(const char *path, unsigned long long bytes)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600), e;

	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)bytes) < 0 || close(fd) < 0) {
		e = errno;
		close(fd);
		unlink(path);
		errno = e;
		return -1;
	}
	return 0;
}

static void random_bytes(unsigned char *b, size_t n)
{
	if (getrandom(b, n, 0) != (ssize_t)n)
		for (size_t i = 0; i < n; i++) /* never on Linux >= 3.17 */
			b[i] = (unsigned char)(rand() ^ getpid());
}

void vm_uuid(char out[37])
{
	unsigned char b[16];

	random_bytes(b, sizeof(b));
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
	         b[13], b[14], b[15]);
}

void vm_mac(char out[18])
{
	uint8_t mac[MAC_LEN];

	mac_random_guest(mac);
	mac_format(mac, out);
}

int vm_confirm(const char *question, const char *command)
{
	char line[64];

	if (!isatty(STDIN_FILENO)) {
		vm_error("%s: stdin is not a terminal, so nobody can answer \"%s\"; use -f",
		         command, question);
		return -1;
	}
	for (;;) {
		printf("%s (y/n)? ", question);
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 0;
		if (line[0] == 'y' || line[0] == 'Y')
			return 1;
		if (line[0] == 'n' || line[0] == 'N')
			return 0;
	}
}

bool vm_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

int vm_share_dir(const char *self, char *out)
{
	const char *env = getenv("KHYVE_SHARE");
	/* Installed (sbin/../share/khyve), then the source tree seen from
	 * build/bin, build/NAME/bin or build/NAME/san/bin. */
	const char *rel[] = {"../share/khyve", "../../share", "../../../share",
	                     "../../../../share"};
	char dir[PATH_MAX], *slash;

	if (env && *env)
		return snprintf(out, PATH_MAX, "%s", env) < PATH_MAX ? 0 : -1;
	if (snprintf(dir, sizeof(dir), "%s", self) >= (int)sizeof(dir) ||
	    !(slash = strrchr(dir, '/')))
		return -1;
	*slash = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char probe[PATH_MAX];
		if (snprintf(out, PATH_MAX, "%s/%s", dir, rel[i]) >= PATH_MAX ||
		    snprintf(probe, sizeof(probe), "%s/templates", out) >= (int)sizeof(probe))
			continue;
		if (access(probe, R_OK) == 0)
			return 0;
	}
	return -1;
}

int vm_wait_child(pid_t pid, int *status, long ms)
{
	struct timespec step = {0, 10 * 1000 * 1000};

	for (long waited = 0;; waited += 10) {
		pid_t r = waitpid(pid, status, ms >= 0 ? WNOHANG : 0);

		if (r == pid)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
		if (ms >= 0 && r == 0) {
			if (waited >= ms)
				return 0;
			nanosleep(&step, NULL);
		}
	}
}
