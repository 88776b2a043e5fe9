/*
 * apilat: the latency of khyve's API calls next to the floor of a plain
 * HTTP round trip over a unix socket, measured in the same run (bench/api).
 *
 *   apilat SOCKET CALLS PATH...
 *
 * Each call is what khyvectl does: connect, one HTTP/1.1 GET with
 * "Connection: close", read the reply to EOF.  The floor is the same call
 * against a server in this process (a thread) that reads the request's
 * headers and writes a fixed 2-byte JSON reply: no parsing, no JSON, no
 * HTTP library.  The calls alternate between the floor and each PATH in
 * rounds of 10, CALLS of each in all; prints the median and the 99th
 * percentile per target in microseconds and the median's ratio to the
 * floor's.  Exit 1 when a call fails (a reply that is not 200).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGETS 8
#define ROUND       10

static const char floor_reply[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                  "Content-Length: 2\r\nConnection: close\r\n\r\n{}";

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int unix_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -1;
	strcpy(sa->sun_path, path);
	return 0;
}

/* The floor's server: read to the blank line, answer, close. */
static void *floor_main(void *arg)
{
	int lfd = *(int *)arg;

	for (;;) {
		char buf[4096];
		size_t got = 0;
		int c = accept(lfd, NULL, NULL);

		if (c < 0)
			continue;
		while (got < sizeof(buf) - 1) {
			ssize_t n = read(c, buf + got, sizeof(buf) - 1 - got);

			if (n <= 0)
				break;
			got += (size_t)n;
			buf[got] = '\0';
			if (strstr(buf, "\r\n\r\n") != NULL)
				break;
		}
		if (write(c, floor_reply, sizeof(floor_reply) - 1) < 0)
			perror("apilat: floor write");
		close(c);
	}
	return NULL;
}

/* One call; its time in us, or -1 when it failed or was not a 200. */
static double call(const char *sock, const char *path)
{
	static char sink[65536];
	char req[512], head[12];
	struct sockaddr_un sa;
	size_t got = 0;
	double t0 = now_us();
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int n = snprintf(req, sizeof(req),
	                 "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path);

	if (fd < 0 || unix_addr(sock, &sa) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || write(fd, req, n) != n) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/* The status line's start, then the rest to EOF. */
	for (;;) {
		ssize_t r = got < sizeof(head) ? read(fd, head + got, sizeof(head) - got)
		                               : read(fd, sink, sizeof(sink));

		if (r <= 0)
			break;
		if (got < sizeof(head))
			got += (size_t)r;
	}
	close(fd);
	if (got < sizeof(head) || memcmp(head, "HTTP/1.1 200", sizeof(head)) != 0)
		return -1;
	return now_us() - t0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[(int)(p * (n - 1) + 0.5)];
}

int main(int argc, char **argv)
{
	static char floor_path[108];
	const char *names[MAX_TARGETS + 1] = {"floor"};
	double *t[MAX_TARGETS + 1];
	struct sockaddr_un sa;
	pthread_t th;
	int ntargets, calls, lfd;

	if (argc < 4 || (calls = atoi(argv[2])) < ROUND || argc - 3 > MAX_TARGETS) {
		fprintf(stderr, "usage: apilat SOCKET CALLS PATH... (CALLS >= %d)\n", ROUND);
		return 4;
	}
	calls -= calls % ROUND;
	ntargets = argc - 3 + 1;
	snprintf(floor_path, sizeof(floor_path), "/tmp/apilat-%d.sock", (int)getpid());
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || unix_addr(floor_path, &sa) < 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 64) < 0 ||
	    pthread_create(&th, NULL, floor_main, &lfd) != 0) {
		perror("apilat: floor server");
		return 1;
	}
	for (int k = 0; k < ntargets; k++) {
		t[k] = calloc(calls, sizeof(double));
		if (k > 0)
			names[k] = argv[2 + k];
	}
	for (int done = 0; done < calls; done += ROUND)
		for (int k = 0; k < ntargets; k++)
			for (int i = 0; i < ROUND; i++) {
				double us = call(k ? argv[1] : floor_path, k ? names[k] : "/");

				if (us < 0) {
					fprintf(stderr, "apilat: %s failed\n", names[k]);
					unlink(floor_path);
					return 1;
				}
				t[k][done + i] = us;
			}
	unlink(floor_path);
	printf("%-28s %8s %8s %10s\n", "call", "median us", "p99 us", "x floor");
	double floor_med = pct(t[0], calls, 0.5);
	for (int k = 0; k < ntargets; k++) {
		double med = pct(t[k], calls, 0.5), p99 = pct(t[k], calls, 0.99);

		printf("%-28s %8.1f %8.1f %10.2f\n", names[k], med, p99, med / floor_med);
	}
	printf("(%d calls each, alternating in rounds of %d)\n", calls, ROUND);
	return 0;
}
