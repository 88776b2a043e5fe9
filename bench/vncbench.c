/*
 * The client half of bench/vnc: connect to a VNC server over TCP, keep
 * asking for incremental updates for SECONDS and report what arrived:
 *
 *   vncbench HOST PORT SECONDS [PID [WxH]]
 *   → "updates U frames F changes C bytes B seconds S [cpu T]"
 *
 * An update is one FramebufferUpdate, a change one that covered anything;
 * frames are the area all updates covered, in screens (a guest whose fill
 * is slower than the server's refresh is sent as partial updates, so
 * counting whole-screen updates would measure the guest).  Bytes are what the socket received after
 * the first full update (TCP_INFO's tcpi_bytes_received), so the handshake and the first picture
 * are not counted.  The same client measures every server, so the encodings (libvncclient's default
 * list: tight, zrle, ...) are the same. With PID, T is the CPU seconds the VMM process PID spent in
 * the window outside its vCPU threads (named "vcpu N" in khyve, "CPU N/KVM" in QEMU): the display
 * and VNC path, not the guest drawing.
 */
#include <netinet/in.h>
#include <linux/tcp.h> /* tcpi_bytes_received, which glibc's tcp_info lacks */
#include <rfb/rfbclient.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <dirent.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct tally {
	uint64_t area;    /* pixels in the update being received */
	unsigned updates; /* FramebufferUpdates after the first full one */
	uint64_t covered; /* pixels all of them covered */
	unsigned changes; /* of which covered anything */
	int started;      /* the first full picture has arrived */
	uint64_t bytes_at_start;
};

static struct tally tally;
static int want_w, want_h; /* 0: any size */

static uint64_t bytes_received(rfbClient *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(c->sock, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return 0;
	return ti.tcpi_bytes_received;
}

static void on_rect(rfbClient *c, int x, int y, int w, int h)
{
	(void)c;
	(void)x;
	(void)y;
	if (w > 0 && h > 0)
		tally.area += (uint64_t)w * (uint64_t)h;
}

static void on_update_done(rfbClient *c)
{
	uint64_t screen = (uint64_t)c->width * (uint64_t)c->height;

	if (!tally.started) {
		if (tally.area * 10 >= screen * 9 && (want_w == 0 || c->width == want_w) &&
		    (want_h == 0 || c->height == want_h)) {
			tally.started = 1;
			tally.bytes_at_start = bytes_received(c);
		}
	} else {
		tally.updates++;
		if (tally.area > 0)
			tally.changes++;
		tally.covered += tally.area;
	}
	tally.area = 0;
}

/* CPU seconds of process `pid`'s threads other than vCPUs. */
static double vmm_cpu_s(int pid)
{
	char path[320], line[512];
	double ticks = 0;
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		char comm[64], *close_paren;
		unsigned long ut = 0, st = 0;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", pid, e->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		if (fgets(line, sizeof(line), f) != NULL &&
		    (close_paren = strrchr(line, ')')) != NULL) {
			char *open_paren = strchr(line, '(');
			size_t n = open_paren ? (size_t)(close_paren - open_paren - 1) : 0;

			snprintf(comm, sizeof(comm), "%.*s", (int)n,
			         open_paren ? open_paren + 1 : "");
			/* fields after ")": state(3) ... utime(14) stime(15) */
			if (strncmp(comm, "vcpu ", 5) != 0 && strncmp(comm, "CPU ", 4) != 0 &&
			    sscanf(close_paren + 2,
			           "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			           &st) == 2)
				ticks += ut + st;
		}
		fclose(f);
	}
	closedir(d);
	return ticks / sysconf(_SC_CLK_TCK);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void quiet(const char *fmt, ...)
{
	(void)fmt;
}

int main(int argc, char **argv)
{
	rfbClient *c;
	double seconds, t0, t, cpu0 = 0;
	int pid = argc >= 5 ? atoi(argv[4]) : 0;

	if (argc < 4 || argc > 6 ||
	    (argc == 6 && sscanf(argv[5], "%dx%d", &want_w, &want_h) != 2)) {
		fprintf(stderr, "usage: vncbench HOST PORT SECONDS [PID [WxH]]\n");
		return 2;
	}
	seconds = atof(argv[3]);
	rfbClientLog = quiet;
	c = rfbGetClient(8, 3, 4);
	c->serverHost = strdup(argv[1]);
	c->serverPort = atoi(argv[2]);
	c->GotFrameBufferUpdate = on_rect;
	c->FinishedFrameBufferUpdate = on_update_done;
	if (!rfbInitClient(c, NULL, NULL)) {
		fprintf(stderr, "vncbench: cannot connect to %s:%s\n", argv[1], argv[2]);
		return 1;
	}
	t0 = now_s();
	/* Wait up to 60 s for the first full picture, then measure. */
	while (!tally.started && now_s() - t0 < 60)
		if (WaitForMessage(c, 100000) > 0 && !HandleRFBServerMessage(c))
			return 1;
	if (!tally.started) {
		fprintf(stderr, "vncbench: no full picture within 60 s\n");
		return 1;
	}
	t0 = now_s();
	if (pid > 0)
		cpu0 = vmm_cpu_s(pid);
	while ((t = now_s()) - t0 < seconds)
		if (WaitForMessage(c, 50000) > 0 && !HandleRFBServerMessage(c))
			return 1;
	printf("updates %u frames %.1f changes %u bytes %llu seconds %.2f", tally.updates,
	       (double)tally.covered / ((double)c->width * c->height), tally.changes,
	       (unsigned long long)(bytes_received(c) - tally.bytes_at_start), t - t0);
	if (pid > 0)
		printf(" cpu %.2f", vmm_cpu_s(pid) - cpu0);
	printf("\n");
	rfbClientCleanup(c);
	return 0;
}
