/*
 * evdev-read: a tiny static reader for the lab's level-2 graphics guest.
 * Prints each absolute-axis and key event of one Linux input device
 * (/dev/input/eventN, struct input_event of linux/input.h) as
 * "KHYVE-EV type=T code=C value=V" on stdout, until COUNT such events or
 * SECONDS have passed.  Built statically by tests/lab/graphics.
 *   evdev-read /dev/input/event3 COUNT SECONDS
 */
#include <fcntl.h>
#include <linux/input.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: evdev-read DEVICE COUNT SECONDS\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	int want = atoi(argv[2]);
	double end = now_seconds() + atof(argv[3]);
	int seen = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (seen < want && now_seconds() < end) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 500) <= 0)
			continue;
		struct input_event ev;
		if (read(fd, &ev, sizeof ev) != (ssize_t)sizeof ev)
			return 1;
		if (ev.type != EV_ABS && ev.type != EV_KEY && ev.type != EV_REL)
			continue;
		printf("KHYVE-EV type=%u code=%u value=%d\n", ev.type, ev.code, ev.value);
		seen++;
	}
	return seen >= want ? 0 : 1;
}
