/*
 * One cgroup v2 per running guest (Documentation/admin-guide/cgroup-v2.rst):
 * ROOT/khyve/NAME, made by the supervisor before it starts khyve and
 * removed when the guest stops.  ROOT is the first cgroup2 mount in
 * /proc/self/mountinfo (KHYVE_CGROUP_ROOT overrides it, for tests).
 *
 *   memory.max  the guest's memory plus a margin for khyve itself
 *               (vm_cgroup_memory_max())
 *   cpu.weight  from `priority`, the nice value vm-bhyve gives bhyve, as
 *               the kernel weighs nice levels (vm_cgroup_cpu_weight())
 *
 * Where cgroup2 or a controller is missing (a hybrid hierarchy keeps memory
 * on cgroup v1) the limit is left out and a note says why: a guest always
 * starts.
 */
#ifndef KHYVE_VM_CGROUP_H
#define KHYVE_VM_CGROUP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

struct vm_cgroup {
	char path[PATH_MAX]; /* the guest's cgroup, "" when none was made */
	uint64_t memory_max; /* bytes written to memory.max, 0 when not set */
	unsigned cpu_weight; /* written to cpu.weight, 0 when not set */
	char note[256];      /* why a limit or the cgroup is missing, "" if none */
};

/* memory.max for a guest of `guest_bytes`: plus 1/8 and 256 MiB for
 * khyve's own memory (device queues, the frame buffer, VNC), saturating. */
uint64_t vm_cgroup_memory_max(uint64_t guest_bytes);

/* cpu.weight (1-10000, 100 at nice 0) for a nice value -20..20, from the
 * kernel's sched_prio_to_weight table scaled as cgroup v2 does. */
unsigned vm_cgroup_cpu_weight(int nice);

/* The cgroup2 mount point into `root`; 0, or -1 when none is mounted. */
int vm_cgroup_root(char *root, size_t len);

/*
 * Make ROOT/khyve/`guest` with the limits for `guest_bytes` of memory and
 * the nice value `nice` (enabling the memory and cpu controllers on the way
 * where they exist).  Never fails: `cg->path` is "" when no cgroup was made
 * and `cg->note` says what is missing.
 */
void vm_cgroup_create(const char *guest, uint64_t guest_bytes, int nice, struct vm_cgroup *cg);

/* Move the calling process into `cg` (in the child, before exec: all of
 * khyve's threads follow).  0, or -1 with errno; 0 when `cg` has no path. */
int vm_cgroup_join(const struct vm_cgroup *cg);

/* Remove the cgroup once its processes have been waited for. */
void vm_cgroup_remove(struct vm_cgroup *cg);

/* One line for `vm info`: "PATH (memory.max=N, cpu.weight=N)", or "-" and
 * why there is none. */
void vm_cgroup_describe(const char *guest, char *out, size_t len);

#endif
