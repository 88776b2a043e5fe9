/*
 * The level-2 half of bench/lab-snap, linked statically into the guest's
 * initramfs (bench/l2/snap-bench starts it).
 *
 *   snapguest save HB_MS TOUCH_MIB
 *     Prints "SNAP-READY", then "HB n" every HB_MS milliseconds (a sleep:
 *     the guest idles with HLT in between), so level 1 sees when a
 *     restored guest runs again.  A line "t" on stdin (the serial console)
 *     writes a non-zero pattern into TOUCH_MIB MiB of fresh memory, which
 *     stays allocated, and prints "SNAP-TOUCHED".
 *
 *   snapguest mig ADDR PORT WRITER_MBPS BUF_MIB
 *     Sends a UDP datagram with a 64-bit sequence number to ADDR:PORT
 *     every millisecond, busy-waiting on CLOCK_MONOTONIC between them (no
 *     sleep: a timer wake-up would add its own delay to the gaps level 1
 *     measures), or as often as it can where sending takes longer (the
 *     lab's nested guests manage a few hundred a second).  A line "w" on
 *     stdin starts the writer: between datagrams it writes what keeps it
 *     at WRITER_MBPS MB/s since it started (at most 1 MB at a time) into
 *     a BUF_MIB MiB buffer, going round it, so the guest dirties
 *     WRITER_MBPS MB/s of distinct pages (a small buffer rewritten would
 *     dirty only itself).  Every 5 s it prints "MIG-STAT sent=N
 *     writer_MBps=R" (what the writer managed).
 *
 * The guest's clock stops while its VMM pauses it (both VMMs restore
 * kvmclock and the TSC, they do not advance them), so this program cannot
 * see the pause itself; level 1 times the datagrams' arrival instead.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One whole line of stdin's first character, or 0 when none waits. */
static int poll_command(void)
{
	char buf[64];
	ssize_t n = read(0, buf, sizeof(buf));

	return n > 0 ? buf[0] : 0;
}

/* Fill `len` bytes with words no page of which is zero. */
static void fill_pattern(uint64_t *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len / sizeof(*p); i++)
		p[i] = (i * 0x9e3779b97f4a7c15ull) ^ seed ^ 1u;
}

static int touch_memory(size_t mib)
{
	uint64_t *p = malloc(mib * MIB);

	if (p == NULL) {
		printf("SNAP-ERROR cannot allocate %zu MiB\n", mib);
		return -1;
	}
	fill_pattern(p, mib * MIB, now_ns());
	printf("SNAP-TOUCHED %zu MiB\n", mib);
	return 0; /* p stays allocated: its pages stay in use */
}

static int run_save(long hb_ms, long touch_mib)
{
	struct timespec hb = {hb_ms / 1000, (hb_ms % 1000) * 1000000};
	unsigned long n = 0;

	fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
	printf("SNAP-READY\n");
	for (;;) {
		if (poll_command() == 't' && touch_memory((size_t)touch_mib) < 0)
			return 1;
		printf("HB %lu\n", n++);
		nanosleep(&hb, NULL);
	}
}

struct writer {
	unsigned char *buf;
	size_t size, off;
	uint64_t written, seed, start_ns, mbps;
};

static int writer_start(struct writer *w, long mbps, long buf_mib)
{
	w->size = (size_t)buf_mib * MIB;
	w->buf = malloc(w->size);
	if (w->buf == NULL) {
		printf("MIG-ERROR cannot allocate %ld MiB\n", buf_mib);
		return -1;
	}
	/* Fault the buffer in first: the rate then is writes, not faults. */
	fill_pattern((uint64_t *)w->buf, w->size, 0);
	w->mbps = (uint64_t)mbps;
	w->start_ns = now_ns();
	printf("MIG-WRITER on, %ld MB/s into %ld MiB\n", mbps, buf_mib);
	return 0;
}

/* Catch up with the rate (MB/s = 1 byte per ns / 1000), 1 MB at most. */
static void writer_tick(struct writer *w, uint64_t t)
{
	uint64_t due = (t - w->start_ns) * w->mbps / 1000u;
	size_t left = due > w->written ? (size_t)(due - w->written) : 0;

	if (left > 1000000u)
		left = 1000000u;
	w->written += left;

	while (left > 0) {
		size_t n = w->size - w->off < left ? w->size - w->off : left;

		memset(w->buf + w->off, (int)(++w->seed | 1u), n);
		w->off = (w->off + n) % w->size;
		left -= n;
	}
}

static int open_sender(const char *addr, long port, struct sockaddr_in *to)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);

	memset(to, 0, sizeof(*to));
	to->sin_family = AF_INET;
	to->sin_port = htons((uint16_t)port);
	if (s < 0 || inet_pton(AF_INET, addr, &to->sin_addr) != 1) {
		printf("MIG-ERROR socket or address %s: %s\n", addr, strerror(errno));
		return -1;
	}
	return s;
}

static int run_mig(const char *addr, long port, long mbps, long buf_mib)
{
	struct writer w = {0};
	struct sockaddr_in to;
	uint64_t seq = 0, next = now_ns(), stat_at = next, written_at = 0;
	int s = open_sender(addr, port, &to);

	if (s < 0)
		return 1;
	fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
	printf("MIG-SENDING to %s:%ld\n", addr, port);
	for (;;) {
		uint64_t t;

		while ((t = now_ns()) < next)
			;
		next = t + 1000000u;
		sendto(s, &seq, sizeof(seq), 0, (struct sockaddr *)&to, sizeof(to));
		seq++;
		if (w.buf != NULL)
			writer_tick(&w, t);
		else if (poll_command() == 'w' && writer_start(&w, mbps, buf_mib) < 0)
			return 1;
		if (t - stat_at >= 5000000000u) {
			printf("MIG-STAT sent=%llu writer_MBps=%.1f\n", (unsigned long long)seq,
			       (double)(w.written - written_at) / 1e6 /
			           ((double)(t - stat_at) / 1e9));
			stat_at = t;
			written_at = w.written;
		}
	}
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && strcmp(argv[1], "save") == 0)
		return run_save(atol(argv[2]), atol(argv[3]));
	if (argc == 6 && strcmp(argv[1], "mig") == 0)
		return run_mig(argv[2], atol(argv[3]), atol(argv[4]), atol(argv[5]));
	fprintf(stderr, "usage: snapguest save HB_MS TOUCH_MIB\n"
	                "       snapguest mig ADDR PORT WRITER_MBPS BUF_MIB\n");
	return 2;
}
