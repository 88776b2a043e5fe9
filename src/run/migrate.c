/*
 * Live migration: the source's pre-copy and commit, the target's listen,
 * load and start (see migrate.h for the protocol).
 */
#include "run/migrate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/machine.h"
#include "core/snapshot.h"
#include "core/vcpu_throttle.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/snapfile.h"
#include "run/snapshot.h"
#include "vmm/kvm.h"
#include "vmm/mem.h"

#define MIGRATE_PAUSE_MS   1000u
#define MIGRATE_IO_TIMEOUT 30 /* s: a peer that stops reading or writing */

/* ---- framed lines (both directions) ---- */

static int send_line(int fd, const char *text)
{
	size_t len = strlen(text) < MIGRATE_MAX_LINE ? strlen(text) : MIGRATE_MAX_LINE;
	uint8_t buf[4 + MIGRATE_MAX_LINE];

	buf[0] = (uint8_t)len;
	buf[1] = (uint8_t)(len >> 8);
	buf[2] = (uint8_t)(len >> 16);
	buf[3] = (uint8_t)(len >> 24);
	memcpy(buf + 4, text, len);
	for (size_t off = 0; off < 4 + len;) {
		ssize_t n = send(fd, buf + off, 4 + len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/* Exactly `len` bytes before `deadline` (monotonic ns); 0, or -1 with
 * errno (ETIMEDOUT, EPIPE for end of stream). */
static int recv_exact(int fd, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *p = buf;

	while (len > 0) {
		uint64_t now = monotonic_ns();
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n;
		int rc;

		if (now >= deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		rc = poll(&pfd, 1, (int)((deadline - now) / 1000000 + 1));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -1;
		if (rc == 0)
			continue;
		n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EPIPE;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One framed line into `line` (NUL-terminated, at most MIGRATE_MAX_LINE
 * bytes), waiting at most `timeout_ms`; 0, or -1 with a reason in `err`. */
static int recv_line(int fd, char *line, unsigned timeout_ms, char *err, size_t errlen)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ms * 1000000u;
	uint8_t hdr[4];
	uint32_t len;

	if (recv_exact(fd, hdr, sizeof(hdr), deadline) < 0)
		goto fail;
	len = hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
	if (len > MIGRATE_MAX_LINE) {
		snprintf(err, errlen, "the peer sent a line of %u bytes (at most %u)", len,
		         MIGRATE_MAX_LINE);
		return -1;
	}
	if (recv_exact(fd, line, len, deadline) < 0)
		goto fail;
	line[len] = '\0';
	/* Only printable text goes into our logs. */
	for (uint32_t i = 0; i < len; i++)
		if (line[i] < 0x20 || line[i] > 0x7e)
			line[i] = '?';
	return 0;
fail:
	snprintf(err, errlen, "%s",
	         errno == ETIMEDOUT ? "the peer did not answer in time"
	         : errno == EPIPE   ? "the peer closed the connection"
	                            : strerror(errno));
	return -1;
}

static void set_io_timeouts(int fd)
{
	struct timeval tv = {.tv_sec = MIGRATE_IO_TIMEOUT};

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* ---- source ---- */

struct source {
	struct machine *m;
	int fd;
	struct snapfile_writer *w;
	uint64_t *dirty[GMEM_MAX_REGIONS]; /* pages to send, per gmem region */
	uint64_t *scratch;                 /* KVM_GET_DIRTY_LOG's buffer */
	uint64_t downtime_ms;
	double bytes_per_ms;  /* measured over the last round */
	uint64_t round_bytes; /* the last round's bytes */
	/* Auto-converge: rounds in a row whose dirty pages came to more than
	 * half the round before; the vCPUs' throttle (it only grows until
	 * release_throttle(), so it is also the migration's peak). */
	bool auto_converge;
	unsigned dirty_high, throttle_pct;
	bool logging, paused_here, quiesced;
	bool user_paused; /* paused before the migration: stays paused on the target */
	/* For the log line at the end: rounds sent, bytes of the stream,
	 * CLOCK_MONOTONIC at the start and at the pause. */
	unsigned rounds;
	uint64_t bytes, start_ns, pause_ns;
};

static int parse_downtime(uint64_t *out, char *err, size_t errlen)
{
	const char *v = config_get("migration.downtime_ms");
	char *end;

	*out = MIGRATE_DOWNTIME_MS;
	if (v == NULL)
		return 0;
	errno = 0;
	*out = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || *out > 600000) {
		snprintf(err, errlen,
		         "migration.downtime_ms: want milliseconds (0-600000), not '%s'", v);
		return -1;
	}
	return 0;
}

int migrate_check_options(char *err, size_t errlen)
{
	uint64_t ms;
	bool any, ac;

	if (parse_downtime(&ms, err, errlen) < 0)
		return -1;
	if (config_get_bool("migration.auto_converge", true, &ac) < 0) {
		snprintf(err, errlen, "migration.auto_converge: want on or off, not '%s'",
		         config_get("migration.auto_converge"));
		return -1;
	}
	if (config_get_bool("migration.listen_any", false, &any) < 0) {
		snprintf(err, errlen, "migration.listen_any: want true or false, not '%s'",
		         config_get("migration.listen_any"));
		return -1;
	}
	return 0;
}

static int alloc_bitmaps(struct source *s, char *err, size_t errlen)
{
	const struct guest_mem *gm = &s->m->vm.mem;
	size_t most = 0;

	for (unsigned i = 0; i < gm->nregions; i++) {
		size_t words = gmem_dirty_words(gm->region[i].size);

		if (gm->region[i].readonly || gm->region[i].size == 0)
			continue;
		s->dirty[i] = calloc(words, sizeof(uint64_t));
		if (s->dirty[i] == NULL)
			goto oom;
		most = words > most ? words : most;
	}
	s->scratch = calloc(most ? most : 1, sizeof(uint64_t));
	if (s->scratch != NULL)
		return 0;
oom:
	snprintf(err, errlen, "out of memory for the dirty bitmaps");
	return -1;
}

static void free_bitmaps(struct source *s)
{
	for (unsigned i = 0; i < GMEM_MAX_REGIONS; i++)
		free(s->dirty[i]);
	free(s->scratch);
}

/* KVM's dirty pages since the last call and khyve's own (kept until the
 * final round: gmem_dirty_take) into s->dirty; the number of pages now
 * marked, or -1. */
static long long collect_dirty(struct source *s, bool final, char *err, size_t errlen)
{
	struct guest_mem *gm = &s->m->vm.mem;
	long long pages = 0;

	for (unsigned i = 0; i < gm->nregions; i++) {
		if (s->dirty[i] == NULL)
			continue;
		if (vm_dirty_log_take(&s->m->vm, i, s->dirty[i], s->scratch) < 0) {
			snprintf(err, errlen, "KVM_GET_DIRTY_LOG: %s", strerror(errno));
			return -1;
		}
		gmem_dirty_take(gm, i, s->dirty[i], final);
		for (size_t w = 0; w < gmem_dirty_words(gm->region[i].size); w++)
			pages += __builtin_popcountll(s->dirty[i][w]);
	}
	return pages;
}

/* One round: every region's marked pages as "ram.pre.N" (all non-zero
 * pages when `full`); the marks are cleared; bandwidth measured. */
static int send_round(struct source *s, bool full)
{
	struct guest_mem *gm = &s->m->vm.mem;
	uint64_t t0 = monotonic_ns(), b0 = snapfile_bytes_written(s->w), ms;
	char name[SNAPFILE_NAME_LEN];
	unsigned n = 0;

	for (unsigned i = 0; i < gm->nregions; i++) {
		const struct gmem_region *r = &gm->region[i];
		int rc;

		if (r->readonly)
			continue;
		snprintf(name, sizeof(name), SNAPSHOT_RAM_ROUND "%u", n++);
		if (r->size == 0)
			continue;
		if (full) {
			/* Pages written after this look are in the dirty log
			 * (started before round 0) for the next round. */
			uint64_t *in_use = snapshot_pages_in_use(r);

			rc = snapfile_write_ram_some(s->w, name, r->hva, r->size, SNAPSHOT_PAGE,
			                             in_use);
			free(in_use);
		} else
			rc = snapfile_write_ram_pages(s->w, name, r->hva, r->size, SNAPSHOT_PAGE,
			                              s->dirty[i]);
		if (rc < 0)
			return -1;
		memset(s->dirty[i], 0, gmem_dirty_words(r->size) * sizeof(uint64_t));
	}
	ms = (monotonic_ns() - t0) / 1000000u;
	s->round_bytes = snapfile_bytes_written(s->w) - b0;
	s->bytes_per_ms = (double)s->round_bytes / (double)(ms ? ms : 1);
	s->rounds++;
	return 0;
}

/*
 * Auto-converge, as QEMU's: a guest that dirtied more than half of what
 * the last round moved, twice in a row, writes about as fast as the
 * stream goes, and the dirty set would not shrink to fit the downtime;
 * so its vCPUs are throttled, 20 % and then 10 % more each such round up
 * to VCPU_THROTTLE_MAX_PCT.  The throttle stays for the rest of the
 * migration (a guest let go would catch up at once).
 */
static void auto_converge(struct source *s, long long pages)
{
	unsigned pct;

	if (!s->auto_converge)
		return;
	if ((uint64_t)pages * SNAPSHOT_PAGE <= s->round_bytes / 2) {
		s->dirty_high = 0;
		return;
	}
	if (++s->dirty_high < 2 || s->throttle_pct >= VCPU_THROTTLE_MAX_PCT)
		return;
	pct = s->throttle_pct == 0 ? 20 : s->throttle_pct + 10;
	s->throttle_pct = pct < VCPU_THROTTLE_MAX_PCT ? pct : VCPU_THROTTLE_MAX_PCT;
	machine_set_throttle(s->m, s->throttle_pct);
	log_info("migration: the guest dirtied %llu MiB while a round moved %llu MiB: its "
	         "vCPUs are throttled to %u %% (auto-converge)",
	         (unsigned long long)((uint64_t)pages * SNAPSHOT_PAGE >> 20),
	         (unsigned long long)(s->round_bytes >> 20), s->throttle_pct);
}

static void release_throttle(struct source *s)
{
	if (s->throttle_pct == 0)
		return;
	machine_set_throttle(s->m, 0);
	s->throttle_pct = 0;
	log_info("migration: the vCPU throttle is released");
}

/* Pre-copy: round 0, then dirty rounds until the rest fits the downtime. */
static int precopy(struct source *s, char *err, size_t errlen)
{
	if (send_round(s, true) < 0)
		return -1;
	for (unsigned round = 1; round <= MIGRATE_MAX_ROUNDS; round++) {
		long long pages = collect_dirty(s, false, err, errlen);
		double est_ms;

		if (pages < 0)
			return -1;
		est_ms =
		    (double)pages * SNAPSHOT_PAGE / (s->bytes_per_ms > 1 ? s->bytes_per_ms : 1);
		log_debug(
		    "migrate: round %u: %lld dirty pages, %.0f ms at %.0f MB/s, throttle %u %%",
		    round, pages, est_ms, s->bytes_per_ms / 1000.0, s->throttle_pct);
		if (est_ms <= (double)s->downtime_ms)
			return 0;
		auto_converge(s, pages);
		if (send_round(s, false) < 0)
			return -1;
	}
	return 0;
}

static int pause_and_quiesce(struct source *s, char *err, size_t errlen)
{
	int rc = machine_pause(s->m, MIGRATE_PAUSE_MS);

	s->pause_ns = monotonic_ns();

	if (rc != 0 && rc != -EALREADY) {
		snprintf(err, errlen, "%s",
		         rc == -ETIMEDOUT ? "the vCPUs did not stop within 1 s"
		                          : "the machine is starting or stopping");
		return -1;
	}
	s->paused_here = rc == 0;
	s->user_paused = rc == -EALREADY;
	if (machine_state_quiesce(s->m, err, errlen) < 0)
		return -1;
	s->quiesced = true;
	return 0;
}

/* Paused and quiesced: the last dirty pages and every section, trailer. */
static int send_final(struct source *s, char *err, size_t errlen)
{
	struct snapfile_writer *w = s->w;

	if (collect_dirty(s, true, err, errlen) < 0 ||
	    snapshot_write_sections(s->m, w, s->dirty, err, errlen) < 0)
		return -1;
	s->bytes = snapfile_bytes_written(w);
	s->w = NULL;
	return snapfile_finish(w, err, errlen);
}

/* The target's answer must be "OK ..."; else its line goes into `err`. */
static int expect_ok(struct source *s, const char *what, unsigned ms, char *err, size_t errlen)
{
	char line[MIGRATE_MAX_LINE + 1], why[256];

	if (recv_line(s->fd, line, ms, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "target: %s (waiting for %s)", why, what);
		return -1;
	}
	if (strncmp(line, "OK", 2) == 0)
		return 0;
	snprintf(err, errlen, "target: %s", strncmp(line, "ERR ", 4) == 0 ? line + 4 : line);
	return -1;
}

static void undo(struct source *s)
{
	if (s->w != NULL)
		snapfile_abort(s->w);
	s->w = NULL;
	if (s->quiesced)
		machine_state_unquiesce(s->m);
	if (s->paused_here)
		machine_resume(s->m);
	s->quiesced = s->paused_here = false;
}

static int start_stream(struct source *s, char *err, size_t errlen)
{
	char *config = snapshot_config_text();

	if (config == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->w = snapfile_create_stream(s->fd, SNAPSHOT_CREATOR, config, err, errlen);
	free(config);
	if (s->w == NULL)
		return -1;
	if (expect_ok(s, "OK ready", MIGRATE_READY_MS, err, errlen) < 0)
		return -1;
	if (alloc_bitmaps(s, err, errlen) < 0 || gmem_dirty_start(&s->m->vm.mem) < 0) {
		if (err[0] == '\0')
			snprintf(err, errlen, "out of memory for the dirty bitmaps");
		return -1;
	}
	if (vm_dirty_log_start(&s->m->vm) < 0) {
		snprintf(err, errlen, "cannot switch KVM's dirty log on: %s", strerror(errno));
		return -1;
	}
	s->logging = true;
	return 0;
}

/* Everything up to "OK loaded"; -1 leaves the rest to undo(). */
static int migrate_until_loaded(struct source *s, char *err, size_t errlen)
{
	if (start_stream(s, err, errlen) < 0)
		return -1;
	if (precopy(s, err, errlen) < 0 || pause_and_quiesce(s, err, errlen) < 0 ||
	    send_final(s, err, errlen) < 0) {
		char line[MIGRATE_MAX_LINE + 1], why[64];

		if (err[0] == '\0' && s->w != NULL)
			snprintf(err, errlen, "%s", snapfile_writer_error(s->w));
		/* A target that refused mid-stream said why before it closed. */
		if (recv_line(s->fd, line, 200, why, sizeof(why)) == 0 &&
		    strncmp(line, "ERR ", 4) == 0)
			snprintf(err, errlen, "target: %s", line + 4);
		return -1;
	}
	return expect_ok(s, "OK loaded", MIGRATE_LOADED_MS, err, errlen);
}

enum migrate_outcome migrate_send(struct machine *m, int fd, char *err, size_t errlen)
{
	struct source s = {.m = m, .fd = fd, .start_ns = monotonic_ns()};
	enum migrate_outcome out = MIGRATE_FAILED;

	err[0] = '\0';
	if (parse_downtime(&s.downtime_ms, err, errlen) < 0 || snapshot_check(m, err, errlen) < 0)
		return MIGRATE_FAILED;
	if (config_get_bool("migration.auto_converge", true, &s.auto_converge) < 0)
		s.auto_converge = true; /* refused at start-up (migrate_check_options) */
	set_io_timeouts(fd);
	if (migrate_until_loaded(&s, err, errlen) < 0) {
		undo(&s);
	} else if (send_line(fd, s.user_paused ? MIGRATE_COMMIT_PAUSED : MIGRATE_COMMIT) < 0) {
		/* The target never saw COMMIT: it does not run the guest. */
		snprintf(err, errlen, "target: cannot send COMMIT: %s", strerror(errno));
		undo(&s);
	} else if (expect_ok(&s, "OK running", MIGRATE_RUNNING_MS, err, errlen) < 0) {
		size_t l = strlen(err);

		snprintf(err + l, errlen - l,
		         "; COMMIT was sent, so the guest stays paused here (check the target)");
		out = MIGRATE_UNCERTAIN;
	} else {
		uint64_t now = monotonic_ns();

		out = MIGRATE_DONE;
		log_info(
		    "migration: %u rounds and the final state, %llu MiB in %llu ms; the guest "
		    "was paused %llu ms (until the target's OK running); vCPU throttle at most "
		    "%u %%",
		    s.rounds, (unsigned long long)(s.bytes >> 20),
		    (unsigned long long)((now - s.start_ns) / 1000000u),
		    (unsigned long long)((now - s.pause_ns) / 1000000u), s.throttle_pct);
	}
	/* A guest that runs on here (a failure) or is resumed later runs at
	 * full speed again. */
	release_throttle(&s);
	if (s.logging)
		vm_dirty_log_stop(&m->vm);
	gmem_dirty_stop(&m->vm.mem);
	free_bitmaps(&s);
	return out;
}

/* ---- target ---- */

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >>
		        24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(
		    &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
	return false;
}

static int listen_unix(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd;

	if (path[0] == '\0' || strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "-R unix:%s: want a path of 1 to %zu bytes", path,
		         sizeof(sun.sun_path) - 1);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 1) < 0) {
		snprintf(err, errlen, "-R unix:%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int listen_tcp(const char *addr, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
	struct addrinfo *ai = NULL;
	char host[256];
	const char *colon = strrchr(addr, ':');
	bool any = false;
	int fd = -1, one = 1, rc;
	size_t hl;

	if (colon == NULL || colon == addr || colon[1] == '\0' ||
	    (size_t)(colon - addr) >= sizeof(host)) {
		snprintf(err, errlen, "-R %s: want unix:PATH or HOST:PORT", addr);
		return -1;
	}
	hl = (size_t)(colon - addr);
	if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)(hl - 2), addr + 1);
	else
		snprintf(host, sizeof(host), "%.*s", (int)hl, addr);
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "-R %s: %s", addr, gai_strerror(rc));
		return -1;
	}
	if (config_get_bool("migration.listen_any", false, &any) < 0) {
		snprintf(err, errlen, "migration.listen_any: want true or false");
	} else if (!any && !is_loopback(ai->ai_addr)) {
		snprintf(err, errlen,
		         "-R %s: not a loopback address (-o migration.listen_any=1 allows it)",
		         addr);
	} else {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0)
			(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1) < 0) {
			snprintf(err, errlen, "-R %s: %s", addr, strerror(errno));
			if (fd >= 0)
				close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	return fd;
}

static int accept_one(int lfd, const char *addr, char *err, size_t errlen)
{
	int fd;

	log_info("waiting for a migration on %s", addr);
	do
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		snprintf(err, errlen, "-R %s: accept: %s", addr, strerror(errno));
	return fd;
}

/* The stream after the connection: header, rounds, state, COMMIT (with
 * *paused set when the source's guest was paused by its user). */
static int receive_stream(struct machine *m, int fd, bool *paused, char *err, size_t errlen)
{
	struct snapfile_reader *r = snapfile_open_stream(fd, err, errlen);
	char line[MIGRATE_MAX_LINE + 1];
	int rc = -1;

	if (r == NULL)
		return -1;
	if (snapshot_check_config(r, err, errlen) < 0)
		goto out;
	if (send_line(fd, "OK ready") < 0) {
		snprintf(err, errlen, "the source went away: %s", strerror(errno));
		goto out;
	}
	if (snapshot_clear_ram(m, err, errlen) < 0 || snapshot_load_stream(m, r, err, errlen) < 0)
		goto out;
	if (send_line(fd, "OK loaded") < 0 ||
	    recv_line(fd, line, MIGRATE_LOADED_MS, err, errlen) < 0) {
		if (err[0] == '\0')
			snprintf(err, errlen, "the source went away: %s", strerror(errno));
		goto out;
	}
	*paused = strcmp(line, MIGRATE_COMMIT_PAUSED) == 0;
	if (strcmp(line, MIGRATE_COMMIT) != 0 && !*paused) {
		snprintf(err, errlen, "the source sent '%s', not COMMIT", line);
		goto out;
	}
	rc = 0;
out:
	snapfile_close(r);
	return rc;
}

int migrate_receive(struct machine *m, const char *addr, char *err, size_t errlen)
{
	bool unix_path = strncmp(addr, "unix:", 5) == 0, paused = false;
	int lfd, fd, rc;

	err[0] = '\0';
	lfd = unix_path ? listen_unix(addr + 5, err, errlen) : listen_tcp(addr, err, errlen);
	if (lfd < 0)
		return -1;
	fd = accept_one(lfd, addr, err, errlen);
	close(lfd);
	if (unix_path)
		unlink(addr + 5);
	if (fd < 0)
		return -1;
	set_io_timeouts(fd);
	rc = receive_stream(m, fd, &paused, err, errlen);
	if (rc == 0 && paused)
		machine_start_paused(m);
	if (rc < 0) {
		char line[MIGRATE_MAX_LINE];

		snprintf(line, sizeof(line), "ERR %s", err);
		(void)send_line(fd, line);
	} else if (send_line(fd, paused ? "OK paused" : "OK running") < 0) {
		/* The source stays paused when it sees no answer; running here
		 * is what COMMIT asked for. */
		log_warn("migration: could not confirm to the source: %s", strerror(errno));
	}
	close(fd);
	if (rc == 0)
		log_info("migrated in on %s%s", addr,
		         paused ? "; the guest stays paused, as it was on the source "
		                  "(khyvectl --resume lets it go on)"
		                : "");
	return rc;
}
