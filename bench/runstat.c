/*
 * runstat CMD ARGS...: run a command and print "WALL_SECONDS MAXRSS_KIB
 * STATUS" (wall time from fork to exit, peak resident set from wait4's
 * rusage, exit status) on stderr.  bench/startup uses it to time VMMs.
 */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct rusage ru;
	double t0;
	pid_t pid;
	int st;

	if (argc < 2) {
		fprintf(stderr, "usage: runstat CMD [ARGS...]\n");
		return 2;
	}
	t0 = now();
	pid = fork();
	if (pid == 0) {
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	if (pid < 0 || wait4(pid, &st, 0, &ru) < 0)
		return 2;
	fprintf(stderr, "%.6f %ld %d\n", now() - t0, ru.ru_maxrss,
	        WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return 0;
}
