#include "vm/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/file.h"

#define MIB          (1024ull * 1024)
#define MEMORY_EXTRA (256 * MIB)

uint64_t vm_cgroup_memory_max(uint64_t guest_bytes)
{
	uint64_t extra = guest_bytes / 8 + MEMORY_EXTRA;

	return guest_bytes > UINT64_MAX - extra ? UINT64_MAX : guest_bytes + extra;
}

unsigned vm_cgroup_cpu_weight(int nice)
{
	/* The kernel's weight of each nice level, -20 to 19 (kernel/sched/core.c). */
	static const unsigned nice_weight[40] = {
	    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916,
	    9548,  7620,  6100,  4904,  3906,  3121,  2501,  1991,  1586,  1277,
	    1024,  820,   655,   526,   423,   335,   272,   215,   172,   137,
	    110,   87,    70,    56,    45,    36,    29,    23,    18,    15,
	};
	unsigned w;

	nice = nice < -20 ? -20 : nice > 19 ? 19 : nice;
	/* cgroup v2: weight = nice weight * 100 / 1024, rounded, in 1..10000. */
	w = (nice_weight[nice + 20] * 100 + 512) / 1024;
	return w < 1 ? 1 : w > 10000 ? 10000 : w;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/* The mount point of a mountinfo line whose file system is cgroup2, or NULL.
 * Fields: id parent dev root MOUNTPOINT options... - FSTYPE source super. */
static char *cgroup2_mount_point(char *line)
{
	char *sep = strstr(line, " - ");
	char *save = NULL, *mp = NULL;

	if (sep == NULL || strncmp(sep + 3, "cgroup2 ", 8) != 0)
		return NULL;
	*sep = '\0';
	strtok_r(line, " ", &save);
	for (int i = 1; i <= 4; i++)
		mp = strtok_r(NULL, " ", &save);
	return mp;
}

int vm_cgroup_root(char *root, size_t len)
{
	const char *forced = getenv("KHYVE_CGROUP_ROOT");
	char *line = NULL, *mp;
	size_t cap = 0;
	int rc = -1;
	FILE *f;

	if (forced != NULL && *forced != '\0') {
		struct stat st;

		if (stat(forced, &st) < 0 || !S_ISDIR(st.st_mode))
			return -1;
		return snprintf(root, len, "%s", forced) < (int)len ? 0 : -1;
	}
	f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL)
		return -1;
	while (rc < 0 && getline(&line, &cap, f) > 0) {
		if ((mp = cgroup2_mount_point(line)) == NULL)
			continue;
		unescape(mp);
		if (snprintf(root, len, "%s", mp) < (int)len)
			rc = 0;
	}
	free(line);
	fclose(f);
	return rc;
}

/* Write `value` to DIR/FILE; 0 or -1 with errno.  O_CREAT only matters to a
 * plain directory standing in for cgroupfs (KHYVE_CGROUP_ROOT, tests). */
static int write_file(const char *dir, const char *file, const char *value)
{
	char path[PATH_MAX];
	ssize_t n, len = (ssize_t)strlen(value);
	int fd, e;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	n = write(fd, value, (size_t)len);
	e = errno;
	close(fd);
	errno = e;
	return n == len ? 0 : -1;
}

/* DIR/FILE's first line into `out` ("" when unreadable). */
static void read_line(const char *dir, const char *file, char *out, size_t len)
{
	char path[PATH_MAX];

	out[0] = '\0';
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) < (int)sizeof(path))
		(void)file_first_line(path, out, len);
}

/* Whether DIR/cgroup.controllers lists `name`. */
static bool has_controller(const char *dir, const char *name)
{
	char list[512], *save = NULL;

	read_line(dir, "cgroup.controllers", list, sizeof(list));
	for (char *t = strtok_r(list, " ", &save); t != NULL; t = strtok_r(NULL, " ", &save))
		if (strcmp(t, name) == 0)
			return true;
	return false;
}

/* Hand `name` down from ROOT through PARENT (ROOT/khyve) to the guests,
 * where ROOT has it; cgroupfs refuses the write where it cannot. */
static bool enable_controller(const char *root, const char *parent, const char *name)
{
	char plus[32];

	if (!has_controller(root, name))
		return false;
	snprintf(plus, sizeof(plus), "+%s", name);
	return write_file(root, "cgroup.subtree_control", plus) == 0 &&
	       write_file(parent, "cgroup.subtree_control", plus) == 0;
}

static int make_dir(const char *path)
{
	return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

static void note(struct vm_cgroup *cg, const char *fmt, const char *a, const char *b)
{
	size_t used = strlen(cg->note);

	snprintf(cg->note + used, sizeof(cg->note) - used, fmt, used ? "; " : "", a, b);
}

static bool name_ok(const char *guest)
{
	return guest[0] != '\0' && guest[0] != '.' && strchr(guest, '/') == NULL;
}

/* Where the guest's cgroup goes: ROOT/khyve into `parent`, with the
 * controllers handed down; -1 with a note when there is none. */
static int make_parent(struct vm_cgroup *cg, char *parent, size_t len, bool *mem, bool *cpu)
{
	char root[PATH_MAX];

	if (vm_cgroup_root(root, sizeof(root)) < 0) {
		note(cg, "%sno cgroup2 mounted%s%s", "", "");
		return -1;
	}
	if (snprintf(parent, len, "%s/khyve", root) >= (int)len || make_dir(parent) < 0) {
		note(cg, "%scannot make %s/khyve: %s", root, strerror(errno));
		return -1;
	}
	*mem = enable_controller(root, parent, "memory");
	*cpu = enable_controller(root, parent, "cpu");
	return 0;
}

void vm_cgroup_create(const char *guest, uint64_t guest_bytes, int nice, struct vm_cgroup *cg)
{
	char parent[PATH_MAX], value[32];
	bool mem = false, cpu = false;

	memset(cg, 0, sizeof(*cg));
	if (!name_ok(guest) || make_parent(cg, parent, sizeof(parent), &mem, &cpu) < 0)
		return;
	if (snprintf(cg->path, sizeof(cg->path), "%s/%s", parent, guest) >= (int)sizeof(cg->path) ||
	    make_dir(cg->path) < 0) {
		note(cg, "%scannot make the cgroup of %s: %s", guest, strerror(errno));
		cg->path[0] = '\0';
		return;
	}
	snprintf(value, sizeof(value), "%llu",
	         (unsigned long long)vm_cgroup_memory_max(guest_bytes));
	if (!mem)
		note(cg, "%sno memory controller in cgroup2 at %s%s (hybrid hierarchy?)", parent,
		     "");
	else if (write_file(cg->path, "memory.max", value) < 0)
		note(cg, "%smemory.max: %s%s", strerror(errno), "");
	else
		cg->memory_max = vm_cgroup_memory_max(guest_bytes);
	snprintf(value, sizeof(value), "%u", vm_cgroup_cpu_weight(nice));
	if (!cpu)
		note(cg, "%sno cpu controller in cgroup2 at %s%s", parent, "");
	else if (write_file(cg->path, "cpu.weight", value) < 0)
		note(cg, "%scpu.weight: %s%s", strerror(errno), "");
	else
		cg->cpu_weight = vm_cgroup_cpu_weight(nice);
}

int vm_cgroup_join(const struct vm_cgroup *cg)
{
	char pid[24];

	if (cg->path[0] == '\0')
		return 0;
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	return write_file(cg->path, "cgroup.procs", pid);
}

void vm_cgroup_remove(struct vm_cgroup *cg)
{
	static const char *const ours[] = {"memory.max", "cpu.weight", "cgroup.procs"};
	const struct timespec step = {0, 10 * 1000 * 1000};
	char path[PATH_MAX];

	if (cg->path[0] == '\0')
		return;
	/* cgroupfs refuses these (its files go with rmdir); a stand-in
	 * directory needs them gone. */
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (snprintf(path, sizeof(path), "%s/%s", cg->path, ours[i]) < (int)sizeof(path))
			unlink(path);
	/* The last task leaves a moment after waitpid(): EBUSY meanwhile. */
	for (int i = 0; i < 100 && rmdir(cg->path) < 0 && errno == EBUSY; i++)
		nanosleep(&step, NULL);
	cg->path[0] = '\0';
}

void vm_cgroup_describe(const char *guest, char *out, size_t len)
{
	char root[PATH_MAX], path[PATH_MAX], mem[32], cpu[32];
	struct stat st;

	/* Read only: `vm info` also runs for members of the khyve group. */
	if (vm_cgroup_root(root, sizeof(root)) < 0) {
		snprintf(out, len, "- (no cgroup2 mounted)");
		return;
	}
	if (!name_ok(guest) ||
	    snprintf(path, sizeof(path), "%s/khyve/%s", root, guest) >= (int)sizeof(path) ||
	    stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
		bool m = has_controller(root, "memory"), c = has_controller(root, "cpu");

		snprintf(out, len, "- (made while the guest runs%s%s%s%s)",
		         m && c ? "" : "; cgroup2 at ", m && c ? "" : root,
		         m ? "" : " lacks memory",
		         c   ? ""
		         : m ? " lacks cpu"
		             : " and cpu");
		return;
	}
	read_line(path, "memory.max", mem, sizeof(mem));
	read_line(path, "cpu.weight", cpu, sizeof(cpu));
	snprintf(out, len, "%s (memory.max=%s, cpu.weight=%s)", path,
	         mem[0] ? mem : "- (no memory controller in cgroup2)",
	         cpu[0] ? cpu : "- (no cpu controller in cgroup2)");
}
