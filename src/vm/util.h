/* Small file and process helpers for the vm manager. */
#ifndef KHYVE_VM_UTIL_H
#define KHYVE_VM_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* How vm_tool_run() runs one tool; zero-initialise, then fill in. */
struct vm_tool {
	const char *const *argv; /* NULL-terminated; argv[0] from PATH, then /usr/sbin, /sbin */
	const char *input;       /* text for its stdin; NULL: an empty stdin */
	char **out;              /* receives its stdout, malloc'd (caller frees); or NULL */
	int out_fd;              /* without `out`: stdout goes here; 0 or -1: /dev/null */
	const char *cwd;         /* the folder it runs in; NULL: ours */
	const char *log;         /* append stdout and stderr to this file instead */
	const char *what;        /* what the error line starts with; NULL: argv[0] */
};

/*
 * Run a tool and wait for it; its signal mask and dispositions are reset
 * and none of our other fds reach it.  stdin and stderr are memory files,
 * so a daemon that keeps them open cannot make us wait.  0 when it exits
 * 0; else -1 with one line in `err`: "WHAT: " and the first line of its
 * stderr that says "Error" (else its first non-blank one; with `log`, the
 * log's last line), or "TOOL is not installed", "TOOL exited with status
 * N", "TOOL was killed by signal N".
 */
int vm_tool_run(const struct vm_tool *t, char *err, size_t errlen);

/* Remove `path` and everything below it (no symlinks followed); 0 or -1. */
int vm_rmtree(const char *path);

/* Create an empty sparse file of `bytes` (mode 0600); 0 or -1 (errno). */
int vm_make_sparse(const char *path, unsigned long long bytes);

/* A random RFC 4122 version-4 UUID in `out` (37 bytes). */
void vm_uuid(char out[37]);

/* A static MAC under bhyve's OUI 58:9c:fc, as vm-bhyve generates. */
void vm_mac(char out[18]);

/*
 * Ask "QUESTION (y/n)? " on stdout as vm-bhyve's util::confirm and read
 * lines until one starts with y or n: 1 for yes, 0 for no or end of input.
 * When stdin is not a terminal nothing is read (an EOF is no answer): -1
 * after the one-line error "COMMAND: stdin is not a terminal ...; use -f".
 */
int vm_confirm(const char *question, const char *command);

/* Where templates and other shared files are: $KHYVE_SHARE, then next to
 * the binary (../share/khyve installed, ../../share in the build tree). */
int vm_share_dir(const char *self, char *out);

/* True when the path exists (lstat). */
bool vm_exists(const char *path);

/*
 * Wait for the child `pid` to end: up to `ms` milliseconds (checking every
 * 10 ms), or for as long as it takes when `ms` is negative.  Returns 1
 * when it ended (its waitpid(2) status in `*status` when not NULL), 0 when
 * `ms` passed first, -1 with errno when it is not our child.
 */
int vm_wait_child(pid_t pid, int *status, long ms);

#endif
