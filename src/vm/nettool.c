/*
 * Running ip, nft and dnsmasq, and reading interfaces through `ip -j`
 * (switch.h).  Tools run with fork/execvp and memfd-backed stdio, so a
 * daemon that keeps our stderr open (dnsmasq) cannot make us wait.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vm/switch.h"

#define TOOL_ARGS_MAX 32

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
static void exec_tool(const char *const argv[])
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

/* The line of a tool's stderr worth showing: the first one that says
 * "Error", else the first non-blank one (nft adds context lines). */
static void first_error_line(const char *text, char *out, size_t len)
{
	const char *pick = strstr(text, "Error");
	size_t n;

	if (pick) {
		while (pick > text && pick[-1] != '\n')
			pick--;
	} else {
		pick = text;
		while (*pick == '\n' || *pick == ' ')
			pick++;
	}
	n = strcspn(pick, "\n");
	snprintf(out, len, "%.*s", (int)n, pick);
}

static void report_failure(int status, const char *tool, const char *stderr_text, const char *what,
                           char *err, size_t errlen)
{
	char line[512];

	first_error_line(stderr_text ? stderr_text : "", line, sizeof(line));
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

int vm_tool_run(const char *const argv[], const char *input, char **out, const char *what,
                char *err, size_t errlen)
{
	int in = memfd_with("in", input), so = memfd_with("out", NULL),
	    se = memfd_with("err", NULL);
	int status = 0, rc = -1;
	char *errtext = NULL;
	pid_t pid = -1, waited;

	if (out)
		*out = NULL;
	if (in < 0 || so < 0 || se < 0 || (pid = fork()) < 0) {
		snprintf(err, errlen, "%s: cannot run %s: %s", what, argv[0], strerror(errno));
		goto done;
	}
	if (pid == 0) {
		if (dup2(in, 0) < 0 || dup2(so, 1) < 0 || dup2(se, 2) < 0)
			_exit(126);
		reset_signals();
		exec_tool(argv);
	}
	while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	if (waited < 0) {
		snprintf(err, errlen, "%s: waiting for %s: %s", what, argv[0], strerror(errno));
		goto done;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		rc = 0;
		if (out && !(*out = memfd_read(so))) {
			snprintf(err, errlen, "%s: out of memory", what);
			rc = -1;
		}
		goto done;
	}
	errtext = memfd_read(se);
	report_failure(status, argv[0], errtext, what, err, errlen);
done:
	free(errtext);
	if (in >= 0)
		close(in);
	if (so >= 0)
		close(so);
	if (se >= 0)
		close(se);
	return rc;
}

int vm_ip(char *err, size_t errlen, const char *what, ...)
{
	const char *argv[TOOL_ARGS_MAX + 2] = {"ip"};
	size_t n = 1;
	va_list ap;

	va_start(ap, what);
	for (const char *a; (a = va_arg(ap, const char *)) && n <= TOOL_ARGS_MAX;)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	return vm_tool_run(argv, NULL, NULL, what, err, errlen);
}

/* `ip -j ARGS` parsed; NULL with `err` on failure. */
static cJSON *ip_json(const char *const args[], const char *what, char *err, size_t errlen)
{
	const char *argv[TOOL_ARGS_MAX + 3] = {"ip", "-j"};
	size_t n = 2;
	char *out;
	cJSON *json;

	for (size_t i = 0; args[i] && n < TOOL_ARGS_MAX; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	if (vm_tool_run(argv, NULL, &out, what, err, errlen) < 0)
		return NULL;
	json = cJSON_Parse(out);
	free(out);
	if (!cJSON_IsArray(json)) {
		snprintf(err, errlen, "%s: cannot parse the output of ip -j", what);
		cJSON_Delete(json);
		return NULL;
	}
	return json;
}

static void copy_json_string(const cJSON *obj, const char *key, char *out, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	snprintf(out, len, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static bool has_inet(const cJSON *link)
{
	const cJSON *addrs = cJSON_GetObjectItemCaseSensitive(link, "addr_info"), *a;

	cJSON_ArrayForEach(a, addrs)
	{
		const cJSON *fam = cJSON_GetObjectItemCaseSensitive(a, "family");
		if (cJSON_IsString(fam) && !strcmp(fam->valuestring, "inet"))
			return true;
	}
	return false;
}

int vm_link_get(const char *name, struct vm_link *l, char *err, size_t errlen)
{
	const char *args[] = {"-d", "addr", "show", "dev", name, NULL};
	char what[64];
	cJSON *json, *link;
	const cJSON *mtu;

	memset(l, 0, sizeof(*l));
	/* if_nametoindex() asks the kernel in our network namespace (/sys
	 * may show another's); a missing link is an answer, not an error. */
	if (!vm_ifname_valid(name) || if_nametoindex(name) == 0)
		return 0;
	snprintf(what, sizeof(what), "reading interface %s", name);
	if (!(json = ip_json(args, what, err, errlen)))
		return -1;
	link = cJSON_GetArrayItem(json, 0);
	if (link) {
		l->exists = true;
		copy_json_string(cJSON_GetObjectItemCaseSensitive(link, "linkinfo"), "info_kind",
		                 l->kind, sizeof(l->kind));
		copy_json_string(link, "master", l->master, sizeof(l->master));
		copy_json_string(link, "ifalias", l->alias, sizeof(l->alias));
		mtu = cJSON_GetObjectItemCaseSensitive(link, "mtu");
		l->mtu = cJSON_IsNumber(mtu) ? (unsigned)mtu->valuedouble : 0;
		l->has_ipv4 = has_inet(link);
	}
	cJSON_Delete(json);
	return 0;
}

int vm_link_ports(const char *bridge,
                  void (*fn)(const char *name, const char *kind, const char *alias, void *arg),
                  void *arg, char *err, size_t errlen)
{
	const char *args[] = {"-d", "link", "show", "master", bridge, NULL};
	char what[64], name[VM_IFNAME_MAX + 1], kind[16], alias[256];
	cJSON *json;
	const cJSON *link;

	snprintf(what, sizeof(what), "reading the ports of %s", bridge);
	if (!(json = ip_json(args, what, err, errlen)))
		return -1;
	cJSON_ArrayForEach(link, json)
	{
		copy_json_string(link, "ifname", name, sizeof(name));
		copy_json_string(cJSON_GetObjectItemCaseSensitive(link, "linkinfo"), "info_kind",
		                 kind, sizeof(kind));
		copy_json_string(link, "ifalias", alias, sizeof(alias));
		fn(name, kind, alias, arg);
	}
	cJSON_Delete(json);
	return 0;
}

static unsigned long long stat_bytes(const cJSON *stats, const char *dir)
{
	const cJSON *v =
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(stats, dir), "bytes");

	return cJSON_IsNumber(v) ? (unsigned long long)v->valuedouble : 0;
}

int vm_link_bytes(const char *name, unsigned long long *rx, unsigned long long *tx)
{
	const char *args[] = {"-s", "link", "show", "dev", name, NULL};
	char err[256];
	cJSON *json;
	const cJSON *stats;

	if (if_nametoindex(name) == 0 || !(json = ip_json(args, "stats", err, sizeof(err))))
		return -1;
	stats = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(json, 0), "stats64");
	*rx = stat_bytes(stats, "rx");
	*tx = stat_bytes(stats, "tx");
	cJSON_Delete(json);
	return stats ? 0 : -1;
}
