/*
 * durable-rec: the numbered-record writer and checker of tests/lab/durable.
 *
 *   durable-rec write DEV TAG FIRST   (in the level-2 guest, static)
 *       Writes record FIRST, FIRST+1, ... to DEV, record N as one 512-byte
 *       sector at byte N*512, each with O_DIRECT|O_DSYNC and then fsync(2),
 *       and after both returned prints "DUR-ACK TAG N HASH" on stdout: a
 *       promise that the record is on the disk.  HASH (8 hex digits of the
 *       record's own hash) tells a whole line from one cut short by the
 *       kill or garbled on the console.  Runs until killed, or until the
 *       device ends (then "DUR-FULL TAG N").
 *   durable-rec acks TAG               (on level 1)
 *       Reads a console log on stdin and prints the numbers of the whole,
 *       valid "DUR-ACK TAG" lines, one a line; "N garbled DUR-ACK lines"
 *       (of any tag, not counting a last line the kill cut short) on
 *       stderr if some were not: a console that loses bytes.
 *   durable-rec check IMG TAG          (on level 1, after khyve was killed)
 *       Reads acknowledged numbers, one a line, on stdin and checks that
 *       record N sits intact at byte N*512 of the image IMG.  Prints
 *       "DUR-CHECK TAG acked=A verified=V lost=L" and exits 1 if L > 0,
 *       with the first few lost numbers on stderr.
 *   durable-rec cut LISTEN TARGET BYTES (on level 1)
 *       A migration stream broken mid-way: listens on the unix socket
 *       LISTEN, accepts one source, connects to the unix socket TARGET (a
 *       khyve -R) and relays both ways until BYTES went from the source to
 *       the target; then prints "DUR-CUT after N bytes" and exits, which
 *       closes both connections in the middle of the RAM.  Exits 1 if a
 *       side closed first.
 *
 * Record layout (little-endian): magic "KHYVDUR1" (8 bytes), tag (8, NUL
 * padded), sequence number (8), then filler derived from the number up to
 * byte 508, then an FNV-1a hash of bytes 0..507 (4).  A torn, stale or
 * misplaced sector fails the magic, the number or the hash.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define REC_SIZE  512
#define HASH_OFF  (REC_SIZE - 4)
#define MAGIC     "KHYVDUR1"
#define SHOW_LOST 5

static uint32_t fnv1a(const unsigned char *p, size_t n)
{
	uint32_t h = 2166136261u;

	while (n--)
		h = (h ^ *p++) * 16777619u;
	return h;
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* The record that must sit at sector `seq` of the disk tagged `tag`; its hash. */
static uint32_t make_record(unsigned char *r, const char *tag, uint64_t seq)
{
	uint32_t h;

	memset(r, 0, REC_SIZE);
	memcpy(r, MAGIC, 8);
	strncpy((char *)r + 8, tag, 8);
	put64(r + 16, seq);
	for (size_t i = 24; i < HASH_OFF; i++)
		r[i] = (unsigned char)(seq * 131 + i);
	h = fnv1a(r, HASH_OFF);
	for (int i = 0; i < 4; i++)
		r[HASH_OFF + i] = (unsigned char)(h >> (8 * i));
	return h;
}

static int do_write(const char *dev, const char *tag, uint64_t first)
{
	unsigned char *rec;
	char line[64];
	int fd = open(dev, O_WRONLY | O_DIRECT | O_DSYNC);

	if (fd < 0 || posix_memalign((void **)&rec, 4096, REC_SIZE) != 0) {
		fprintf(stderr, "durable-rec: %s: %s\n", dev, strerror(errno));
		return 1;
	}
	for (uint64_t seq = first;; seq++) {
		uint32_t h = make_record(rec, tag, seq);
		ssize_t n = pwrite(fd, rec, REC_SIZE, (off_t)(seq * REC_SIZE));
		if (n == 0 || (n < 0 && errno == ENOSPC)) {
			printf("DUR-FULL %s %llu\n", tag, (unsigned long long)seq);
			return 0;
		}
		if (n != REC_SIZE || fsync(fd) < 0) {
			printf("DUR-ERROR %s %llu %s\n", tag, (unsigned long long)seq,
			       n < 0 ? strerror(errno) : "short write or fsync");
			return 1;
		}
		/* One write(2) a line: the line is either wholly out or not. */
		int len = snprintf(line, sizeof(line), "DUR-ACK %s %llu %08x\n", tag,
		                   (unsigned long long)seq, h);
		if (write(STDOUT_FILENO, line, (size_t)len) != len)
			return 1;
	}
}

/* Whether `line` is one whole "DUR-ACK TAG N HASH" line with the right hash. */
static bool valid_ack(const char *line, char *tag, unsigned long long *seq)
{
	unsigned char rec[REC_SIZE];
	unsigned h;
	int end = 0;

	if (sscanf(line, "DUR-ACK %7[a-z] %llu %8x%n", tag, seq, &h, &end) != 3 || end == 0 ||
	    line[end] != '\0')
		return false;
	return make_record(rec, tag, *seq) == h;
}

static int do_acks(const char *tag)
{
	char line[256], t[8];
	unsigned long long seq, garbled = 0;

	while (fgets(line, sizeof(line), stdin)) {
		/* The kill may cut the last line short: that one is no garble. */
		bool whole = strchr(line, '\n') != NULL;

		line[strcspn(line, "\r\n")] = '\0';
		if (strstr(line, "DUR-ACK") == NULL)
			continue;
		if (!valid_ack(line, t, &seq))
			garbled += whole;
		else if (strcmp(t, tag) == 0)
			printf("%llu\n", seq);
	}
	if (garbled)
		fprintf(stderr, "(%llu garbled DUR-ACK lines on the console, not counted)\n",
		        garbled);
	return 0;
}

static int do_check(const char *img, const char *tag)
{
	unsigned char want[REC_SIZE], got[REC_SIZE];
	unsigned long long seq, acked = 0, verified = 0, lost = 0;
	FILE *f = fopen(img, "rb");

	if (!f) {
		fprintf(stderr, "durable-rec: %s: %s\n", img, strerror(errno));
		return 2;
	}
	while (scanf("%llu", &seq) == 1) {
		acked++;
		make_record(want, tag, seq);
		if (fseeko(f, (off_t)(seq * REC_SIZE), SEEK_SET) == 0 &&
		    fread(got, 1, REC_SIZE, f) == REC_SIZE && memcmp(got, want, REC_SIZE) == 0) {
			verified++;
			continue;
		}
		if (lost++ < SHOW_LOST)
			fprintf(stderr, "durable-rec: %s: acknowledged record %llu is not in %s\n",
			        tag, seq, img);
	}
	fclose(f);
	printf("DUR-CHECK %s acked=%llu verified=%llu lost=%llu\n", tag, acked, verified, lost);
	return lost ? 1 : 0;
}

/* A unix stream socket on `path`, listening (`server`) or connected; -1. */
static int unix_socket(const char *path, bool server)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	if (fd < 0 || strlen(path) >= sizeof(sun.sun_path))
		return -1;
	memcpy(sun.sun_path, path, strlen(path));
	if (server ? bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 1) < 0
	           : connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Up to `max` bytes from `from` to `to`; how many (0: end), or -1. */
static ssize_t relay(int from, int to, size_t max)
{
	static char buf[65536];
	ssize_t n = read(from, buf, max < sizeof(buf) ? max : sizeof(buf));

	for (ssize_t off = 0; n > 0 && off < n;) {
		ssize_t w = write(to, buf + off, (size_t)(n - off));

		if (w <= 0)
			return -1;
		off += w;
	}
	return n;
}

static int do_cut(const char *listen_path, const char *target_path, unsigned long long budget)
{
	int l = unix_socket(listen_path, true), s = l < 0 ? -1 : accept(l, NULL, NULL);
	int t = s < 0 ? -1 : unix_socket(target_path, false);
	unsigned long long sent = 0;

	if (t < 0) {
		fprintf(stderr, "durable-rec cut: %s\n", strerror(errno));
		return 2;
	}
	while (sent < budget) {
		struct pollfd p[2] = {{.fd = s, .events = POLLIN}, {.fd = t, .events = POLLIN}};
		ssize_t n = 1;

		if (poll(p, 2, -1) < 0)
			return 2;
		if (p[0].revents) {
			n = relay(s, t, (size_t)(budget - sent));
			sent += n > 0 ? (unsigned long long)n : 0;
		}
		if (n > 0 && p[1].revents)
			n = relay(t, s, SIZE_MAX);
		if (n <= 0) {
			printf("DUR-CUT a side closed after %llu bytes\n", sent);
			return 1;
		}
	}
	printf("DUR-CUT after %llu bytes\n", sent);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "write") == 0)
		return do_write(argv[2], argv[3], strtoull(argv[4], NULL, 10));
	if (argc == 3 && strcmp(argv[1], "acks") == 0)
		return do_acks(argv[2]);
	if (argc == 4 && strcmp(argv[1], "check") == 0)
		return do_check(argv[2], argv[3]);
	if (argc == 5 && strcmp(argv[1], "cut") == 0)
		return do_cut(argv[2], argv[3], strtoull(argv[4], NULL, 10));
	fprintf(stderr, "usage: durable-rec write DEV TAG FIRST | acks TAG | check IMG TAG | "
	                "cut LISTEN TARGET BYTES\n");
	return 2;
}
