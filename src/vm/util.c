/* File and process helpers for the vm manager (util.h). */
#include "vm/util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vm/vm.h"

static void read_all(int fd, char *out, size_t outlen)
{
	size_t have = 0;
	char sink[512];

	for (;;) {
		char *dst = out && have + 1 < outlen ? out + have : sink;
		size_t room = out && have + 1 < outlen ? outlen - 1 - have : sizeof(sink);
		ssize_t n = read(fd, dst, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (dst != sink)
			have += (size_t)n;
	}
	if (out && outlen)
		out[have] = '\0';
}

int vm_spawn(char *const argv[], char *out, size_t outlen)
{
	int pfd[2], status;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		if (null >= 0)
			dup2(null, 0);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		execvp(argv[0], argv);
		fprintf(stderr, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	read_all(pfd[0], out, outlen);
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
	unsigned char b[3];

	/* vm-bhyve keeps the fourth byte below 0x10 and avoids 0:00:00. */
	do
		random_bytes(b, sizeof(b));
	while ((b[0] & 0x0f) == 0 && b[1] == 0 && b[2] == 0);
	snprintf(out, 18, "58:9c:fc:%02x:%02x:%02x", b[0] & 0x0f, b[1], b[2]);
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
	const char *rel[] = {"../share/khyve", "../../share", "../../../share", "../../../../share"};
	char dir[PATH_MAX], *slash;

	if (env && *env)
		return snprintf(out, PATH_MAX, "%s", env) < PATH_MAX ? 0 : -1;
	if (snprintf(dir, sizeof(dir), "%s", self) >= (int)sizeof(dir) || !(slash = strrchr(dir, '/')))
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
