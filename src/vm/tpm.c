#include "vm/tpm.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vm/rcconf.h"
#include "vm/util.h"

#define SOCKET_WAIT_MS 5000
#define STOP_WAIT_MS   2000

bool vm_tpm_wanted(const struct vm_guest *g)
{
	const char *v = rcconf_get(g->conf, "tpm");

	return v != NULL && *v != '\0' && rcconf_get_yes(g->conf, "tpm");
}

int vm_tpm_socket(const struct vm_guest *g, char *out, char *err, size_t errlen)
{
	int n = snprintf(out, VM_TPM_SOCK_MAX, "%s/tpm/swtpm.sock", g->dir);

	if (n < 0 || n >= VM_TPM_SOCK_MAX) {
		snprintf(
		    err, errlen,
		    "tpm: the guest's folder %s is too long for swtpm's socket (%d bytes at most)",
		    g->dir, VM_TPM_SOCK_MAX - 20);
		return -1;
	}
	return 0;
}

int vm_tpm_ctrl_socket(const struct vm_guest *g, char *out, char *err, size_t errlen)
{
	/* Beside the data socket, as long: swtpm.ctrl for swtpm.sock. */
	if (vm_tpm_socket(g, out, err, errlen) < 0)
		return -1;
	memcpy(strrchr(out, '/') + 1, "swtpm.ctrl", sizeof("swtpm.ctrl"));
	return 0;
}

/* Remove a socket an earlier swtpm left (a socket only: nothing else in
 * the folder is replaced). */
static void remove_stale_socket(const char *path)
{
	struct stat st;

	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
}

static void __attribute__((noreturn)) exec_swtpm(const struct vm_tpm *t, const char *ctrl)
{
	const char *bin = getenv("SWTPM");
	char state[VM_TPM_SOCK_MAX + 16], server[VM_TPM_SOCK_MAX + 32],
	    control[VM_TPM_SOCK_MAX + 64], logf[VM_TPM_SOCK_MAX + 32];

	if (bin == NULL || *bin == '\0')
		bin = "swtpm";
	snprintf(state, sizeof(state), "dir=%s", t->dir);
	snprintf(server, sizeof(server), "type=unixio,path=%s", t->sock);
	snprintf(control, sizeof(control), "type=unixio,path=%s", ctrl);
	snprintf(logf, sizeof(logf), "file=%s/swtpm.log", t->dir);
	execlp(bin, bin, "socket", "--tpm2", "--tpmstate", state, "--server", server, "--ctrl",
	       control, "--flags", "not-need-init", "--log", logf, (char *)NULL);
	fprintf(stderr, "vm: cannot run %s: %s\n", bin, strerror(errno));
	_exit(127);
}

static bool is_socket(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* Wait for swtpm's two sockets; 0, or -1 with `err` (it exited, or took too long). */
static int wait_socket(struct vm_tpm *t, const char *ctrl, char *err, size_t errlen)
{
	struct timespec step = {0, 20 * 1000 * 1000};
	int status;

	for (long waited = 0; waited < SOCKET_WAIT_MS; waited += 20) {
		if (is_socket(t->sock) && is_socket(ctrl))
			return 0;
		if (vm_wait_child(t->pid, &status, 0) == 1) {
			t->pid = 0;
			snprintf(
			    err, errlen,
			    "tpm: swtpm exited (status %d) before it listened; see %s/swtpm.log",
			    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
			    t->dir);
			return -1;
		}
		nanosleep(&step, NULL);
	}
	snprintf(err, errlen, "tpm: swtpm made no socket %s in %d s", t->sock,
	         SOCKET_WAIT_MS / 1000);
	vm_tpm_stop(t);
	return -1;
}

int vm_tpm_start(const struct vm_guest *g, struct vm_tpm *t, char *err, size_t errlen)
{
	char ctrl[VM_TPM_SOCK_MAX + 16];

	memset(t, 0, sizeof(*t));
	if (vm_tpm_socket(g, t->sock, err, errlen) < 0)
		return -1;
	/* DIR/tpm: the socket's folder (short enough, as the socket is). */
	memcpy(t->dir, t->sock, sizeof(t->sock));
	*strrchr(t->dir, '/') = '\0';
	snprintf(ctrl, sizeof(ctrl), "%s/swtpm.ctrl", t->dir);
	if (mkdir(t->dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "tpm: cannot make %s: %s", t->dir, strerror(errno));
		return -1;
	}
	remove_stale_socket(t->sock);
	remove_stale_socket(ctrl);
	t->pid = fork();
	if (t->pid < 0) {
		t->pid = 0;
		snprintf(err, errlen, "tpm: fork: %s", strerror(errno));
		return -1;
	}
	if (t->pid == 0)
		exec_swtpm(t, ctrl);
	return wait_socket(t, ctrl, err, errlen);
}

void vm_tpm_stop(struct vm_tpm *t)
{
	char ctrl[VM_TPM_SOCK_MAX + 16];
	int status;

	if (t->pid <= 0)
		return;
	kill(t->pid, SIGTERM);
	if (vm_wait_child(t->pid, &status, STOP_WAIT_MS) != 1) {
		kill(t->pid, SIGKILL);
		vm_wait_child(t->pid, &status, -1);
	}
	t->pid = 0;
	snprintf(ctrl, sizeof(ctrl), "%s/swtpm.ctrl", t->dir);
	remove_stale_socket(t->sock);
	remove_stale_socket(ctrl);
}
