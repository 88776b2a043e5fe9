/* The vCPU counters (see vcpu_stats.h). */
#include "vmm/vcpu_stats.h"

#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "lib/counters.h"
#include "vmm/kvm.h"
#include "vmm/vcpu.h"

/* KVM's statistics we show, and the keys they get. */
static const struct {
	const char *name, *key;
} wanted[] = {
    {"exits", "exits_total"},
    {"io_exits", "io_exits_total"},
    {"mmio_exits", "mmio_exits_total"},
    {"halt_exits", "halt_exits_total"},
    {"irq_exits", "irq_exits_total"},
    {"signal_exits", "signal_exits_total"},
    {"irq_window_exits", "irq_window_exits_total"},
    {"nmi_window_exits", "nmi_window_exits_total"},
    {"request_irq_exits", "request_irq_exits_total"},
    {"halt_successful_poll", "halt_successful_poll_total"},
    {"halt_attempted_poll", "halt_attempted_poll_total"},
    {"halt_poll_invalid", "halt_poll_invalid_total"},
    {"halt_wakeup", "halt_wakeup_total"},
    {"halt_wait_ns", "halt_wait_ns_total"},
    {"halt_poll_success_ns", "halt_poll_success_ns_total"},
    {"halt_poll_fail_ns", "halt_poll_fail_ns_total"},
    {"insn_emulation", "insn_emulation_total"},
    {"insn_emulation_fail", "insn_emulation_fail_total"},
    {"hypercalls", "hypercalls_total"},
    {"irq_injections", "irq_injections_total"},
    {"nmi_injections", "nmi_injections_total"},
    {"pf_taken", "pf_taken_total"},
    {"pf_fixed", "pf_fixed_total"},
    {"pf_emulate", "pf_emulate_total"},
    {"tlb_flush", "tlb_flush_total"},
};
#define NWANTED (sizeof(wanted) / sizeof(wanted[0]))

/* The most of the data block a read() fetches (one stack buffer). */
#define MAX_DATA 8192

struct vcpu_source {
	struct counter_source src;
	struct vcpu *v;
	int fd;          /* KVM's stats fd, or -1: vcpu_run()'s counts */
	off_t data_off;  /* the data block's offset in the fd */
	size_t data_len; /* bytes of it read: up to the last value shown */
	unsigned n;
	const char *key[NWANTED];
	uint32_t at[NWANTED];   /* each value's byte offset in the block */
	struct vcpu_source *up; /* every source stays reachable from `all` */
};

static struct vcpu_source *all;

/* ---- KVM's binary statistics ---- */

#ifdef KVM_GET_STATS_FD
/* Index into wanted[] of descriptor `d` (names `name_size` bytes long), or
 * -1: a plain cumulative count, in the unit its name says. */
static int wanted_index(const struct kvm_stats_desc *d, size_t name_size)
{
	size_t len = strnlen(d->name, name_size);
	bool ns;

	if ((d->flags & KVM_STATS_TYPE_MASK) != KVM_STATS_TYPE_CUMULATIVE || d->size != 1 ||
	    (d->flags & KVM_STATS_BASE_MASK) != KVM_STATS_BASE_POW10 || len == name_size)
		return -1;
	ns = len > 3 && strcmp(d->name + len - 3, "_ns") == 0;
	if (ns ? (d->flags & KVM_STATS_UNIT_MASK) != KVM_STATS_UNIT_SECONDS || d->exponent != -9
	       : (d->flags & KVM_STATS_UNIT_MASK) != KVM_STATS_UNIT_NONE || d->exponent != 0)
		return -1;
	for (unsigned i = 0; i < NWANTED; i++)
		if (strcmp(d->name, wanted[i].name) == 0)
			return (int)i;
	return -1;
}

/* Pick the values to show from the descriptors; 0, or -1 when none. */
static int pick_values(struct vcpu_source *s, const uint8_t *descs, size_t dsz, unsigned ndesc,
                       size_t name_size)
{
	size_t end = 0;

	for (unsigned i = 0; i < ndesc; i++) {
		const struct kvm_stats_desc *d = (const void *)(descs + i * dsz);
		int w = wanted_index(d, name_size);

		if (w < 0 || d->offset > MAX_DATA - sizeof(uint64_t))
			continue;
		s->key[s->n] = wanted[w].key;
		s->at[s->n++] = d->offset;
		if (d->offset + sizeof(uint64_t) > end)
			end = d->offset + sizeof(uint64_t);
	}
	s->data_len = end;
	return s->n > 0 ? 0 : -1;
}

/* Read the header and descriptors of the vCPU's stats fd (api.rst: the
 * layout is fixed for the life of the fd). */
static int parse_stats(struct vcpu_source *s, int fd)
{
	struct kvm_stats_header h;
	uint8_t *descs;
	size_t dsz;
	int rc = -1;

	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.name_size == 0 ||
	    h.name_size > 1024 || h.num_desc == 0 || h.num_desc > 4096)
		return -1;
	dsz = sizeof(struct kvm_stats_desc) + h.name_size;
	descs = malloc(dsz * h.num_desc);
	if (descs != NULL &&
	    pread(fd, descs, dsz * h.num_desc, h.desc_offset) == (ssize_t)(dsz * h.num_desc))
		rc = pick_values(s, descs, dsz, h.num_desc, h.name_size);
	free(descs);
	s->data_off = h.data_offset;
	return rc;
}

static int open_stats(struct vcpu_source *s)
{
	int fd = ioctl(s->v->fd, KVM_GET_STATS_FD, NULL);

	if (fd < 0)
		return -1;
	if (parse_stats(s, fd) < 0) {
		close(fd);
		s->n = 0;
		return -1;
	}
	s->fd = fd;
	return 0;
}
#else
static int open_stats(struct vcpu_source *s)
{
	(void)s;
	return -1; /* headers older than Linux 5.14 */
}
#endif

/* ---- the sources ---- */

static uint64_t exits(const struct vcpu *v, enum vcpu_exit_kind k)
{
	return __atomic_load_n(&v->exits[k], __ATOMIC_RELAXED);
}

static uint64_t userspace_total(const struct vcpu *v)
{
	uint64_t total = 0;

	for (unsigned k = 0; k < VCPU_EXIT_KINDS; k++)
		total += exits(v, k);
	return total;
}

/* Always there: what came back to khyve, whatever KVM counts itself (a
 * PVM host's KVM, for one, leaves io_exits at 0). */
static void put_userspace_exits(const struct vcpu *v, struct counter_out *o)
{
	o->put(o, "userspace_exits_total", userspace_total(v));
	o->put(o, "userspace_io_exits_total", exits(v, VCPU_EXIT_IO));
	o->put(o, "userspace_mmio_exits_total", exits(v, VCPU_EXIT_MMIO));
	o->put(o, "userspace_signal_exits_total", exits(v, VCPU_EXIT_SIGNAL));
	o->put(o, "userspace_halt_exits_total", exits(v, VCPU_EXIT_HLT));
	o->put(o, "userspace_system_event_exits_total", exits(v, VCPU_EXIT_SYSTEM_EVENT));
	o->put(o, "userspace_other_exits_total", exits(v, VCPU_EXIT_OTHER));
}

/* Without KVM's statistics, the keys every vCPU has, from the same counts. */
static void put_fallback(const struct vcpu *v, struct counter_out *o)
{
	o->put(o, "exits_total", userspace_total(v));
	o->put(o, "io_exits_total", exits(v, VCPU_EXIT_IO));
	o->put(o, "mmio_exits_total", exits(v, VCPU_EXIT_MMIO));
	o->put(o, "signal_exits_total", exits(v, VCPU_EXIT_SIGNAL));
	o->put(o, "halt_exits_total", exits(v, VCPU_EXIT_HLT));
}

/* On the API thread: one pread of the data block, no lock. */
static void read_source(void *arg, struct counter_out *o)
{
	struct vcpu_source *s = arg;
	uint64_t block[MAX_DATA / sizeof(uint64_t)];

	if (s->fd >= 0 && pread(s->fd, block, s->data_len, s->data_off) == (ssize_t)s->data_len) {
		for (unsigned i = 0; i < s->n; i++) {
			uint64_t v;

			memcpy(&v, (const uint8_t *)block + s->at[i], sizeof(v));
			o->put(o, s->key[i], v);
		}
	} else {
		put_fallback(s->v, o);
	}
	put_userspace_exits(s->v, o);
}

int vcpu_stats_register(struct vm *vm, bool kvm_stats)
{
	int used = 0;

	for (unsigned i = 0; i < vm->ncpus; i++) {
		struct vcpu_source *s = calloc(1, sizeof(*s));

		if (s == NULL)
			return -1;
		s->up = all;
		all = s;
		s->v = vm->vcpus[i];
		s->fd = -1;
		if (kvm_stats && open_stats(s) == 0)
			used++;
		s->src.kind = COUNTER_VCPU;
		snprintf(s->src.name, sizeof(s->src.name), "%u", s->v->index);
		s->src.read = read_source;
		s->src.arg = s;
		if (counters_register(&s->src) < 0)
			return -1;
	}
	return used;
}
