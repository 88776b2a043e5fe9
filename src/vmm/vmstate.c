/*
 * Saving and restoring the KVM state of vCPUs and of the VM.  The order of
 * the ioctls and why: docs/design/snapshots.md, section 2 "vmm", from
 * Documentation/virt/kvm/api.rst.  A restore reads the whole section into a
 * struct vcpu_image, checks it, and only then touches KVM, so a refused
 * state leaves the fresh vCPU as it was.
 */
#include "vmm/vmstate.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "vmm/kvm.h"
#include "vmm/vcpu.h"

#define VMSTATE_VERSION       1
#define VMSTATE_MAX_CPUID     512        /* entries, as kvm.c's KVM_CPUID_MAX_ENTRIES */
#define VMSTATE_MAX_MSRS      1024       /* saved MSRs per vCPU */
#define VMSTATE_MAX_XSAVE     (1u << 16) /* bytes: AMX needs ~11 KiB */
#define VMSTATE_MIN_XSAVE     4096u      /* struct kvm_xsave */
#define VMSTATE_MAX_XCRS      16         /* struct kvm_xcrs */
#define TSC_TOLERANCE_PPM     250

#define MSR_IA32_TSC          0x10u
#define MSR_IA32_TSC_DEADLINE 0x6e0u
#define MSR_MTRR_CAP          0xfeu
#define MSR_MTRR_PHYS_BASE0   0x200u
#define MSR_MTRR_FIX64K       0x250u
#define MSR_MTRR_FIX16K_0     0x258u
#define MSR_MTRR_FIX16K_1     0x259u
#define MSR_MTRR_FIX4K_0      0x268u /* to 0x26f */
#define MSR_MTRR_DEF_TYPE     0x2ffu
#define X86_CR4_VMXE          (1ull << 13)
#define X86_EFER_SVME         (1ull << 12)
#define MTRR_MAX_VAR          16u /* variable ranges we save at most */

/* Event flags this khyve saves and sets (it enables neither exception
 * payloads nor triple-fault events). */
#define EVENTS_FLAGS                                                                               \
	(KVM_VCPUEVENT_VALID_NMI_PENDING | KVM_VCPUEVENT_VALID_SIPI_VECTOR |                       \
	 KVM_VCPUEVENT_VALID_SHADOW | KVM_VCPUEVENT_VALID_SMM)

/* One vCPU's state as the section carries it. */
struct vcpu_image {
	uint32_t apic_id;
	uint32_t ncpuid;
	struct kvm_cpuid_entry2 cpuid[VMSTATE_MAX_CPUID];
	uint32_t mp_state;
	struct kvm_regs regs;
	struct kvm_sregs2 sregs; /* SREGS2's fields, whichever ioctl read them */
	uint32_t xsave_size;
	uint8_t xsave[VMSTATE_MAX_XSAVE];
	struct kvm_xcrs xcrs;
	struct kvm_debugregs dbg;
	struct kvm_lapic_state lapic;
	uint32_t nmsrs;
	struct kvm_msr_entry msrs[VMSTATE_MAX_MSRS];
	uint32_t tsc_khz;
	struct kvm_vcpu_events events;
};

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- probing ---- */

static int check_ext(struct vm *vm, long cap)
{
	int r = ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, cap);

	return r < 0 ? 0 : r;
}

/* The capabilities saving and restoring need; once per VM. */
static int probe_caps(struct vm *vm, char *err, size_t errlen)
{
	static const struct {
		long cap;
		const char *name;
	} need[] = {
	    {KVM_CAP_XSAVE, "XSAVE"},
	    {KVM_CAP_XCRS, "XCRS"},
	    {KVM_CAP_DEBUGREGS, "DEBUGREGS"},
	    {KVM_CAP_VCPU_EVENTS, "VCPU_EVENTS"},
	    {KVM_CAP_MP_STATE, "MP_STATE"},
	    {KVM_CAP_GET_TSC_KHZ, "GET_TSC_KHZ"},
	    {KVM_CAP_ADJUST_CLOCK, "ADJUST_CLOCK"},
	};
	int xsave2;

	pthread_mutex_lock(&probe_lock);
	if (vm->state_probed) {
		pthread_mutex_unlock(&probe_lock);
		return 0;
	}
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		if (check_ext(vm, need[i].cap) <= 0) {
			pthread_mutex_unlock(&probe_lock);
			snprintf(err, errlen, "KVM lacks KVM_CAP_%s: cannot save or restore vCPUs",
			         need[i].name);
			return -1;
		}
	}
	vm->state_sregs2 = check_ext(vm, KVM_CAP_SREGS2) > 0;
	vm->state_tsc_control = check_ext(vm, KVM_CAP_TSC_CONTROL) > 0;
	xsave2 = check_ext(vm, KVM_CAP_XSAVE2);
	if (xsave2 > (int)VMSTATE_MAX_XSAVE) {
		/* KVM would write past vcpu_image.xsave: stay unprobed, refuse. */
		pthread_mutex_unlock(&probe_lock);
		snprintf(err, errlen, "KVM's XSAVE area of %d bytes exceeds khyve's %u", xsave2,
		         VMSTATE_MAX_XSAVE);
		return -1;
	}
	vm->state_xsave2 = xsave2 > 0;
	vm->state_xsave_size =
	    xsave2 > (int)VMSTATE_MIN_XSAVE ? (uint32_t)xsave2 : VMSTATE_MIN_XSAVE;
	vm->state_probed = true;
	pthread_mutex_unlock(&probe_lock);
	return 0;
}

/* Read one MSR with KVM_GET_MSRS; 0, or -1 when KVM refuses it. */
static int msr_read(struct vcpu *v, uint32_t index, uint64_t *value)
{
	uint64_t buf[(sizeof(struct kvm_msrs) + sizeof(struct kvm_msr_entry)) / 8] = {0};
	struct kvm_msrs *m = (struct kvm_msrs *)buf;

	m->nmsrs = 1;
	m->entries[0].index = index;
	if (ioctl(v->fd, KVM_GET_MSRS, m) != 1)
		return -1;
	*value = m->entries[0].data;
	return 0;
}

static void msr_list_add(uint32_t *list, unsigned *n, unsigned cap, uint32_t index)
{
	for (unsigned i = 0; i < *n; i++)
		if (list[i] == index)
			return;
	if (*n < cap)
		list[(*n)++] = index;
}

/* MSR_IA32_TSC and the MTRRs, which KVM's list may lack (PVM's does) but a
 * guest's memory types depend on (QEMU saves the same set). */
static void msr_list_add_extras(struct vcpu *v, uint32_t *list, unsigned *n, unsigned cap)
{
	uint64_t mtrrcap = 0;
	unsigned nvar;

	msr_list_add(list, n, cap, MSR_IA32_TSC);
	msr_list_add(list, n, cap, MSR_MTRR_DEF_TYPE);
	msr_list_add(list, n, cap, MSR_MTRR_FIX64K);
	msr_list_add(list, n, cap, MSR_MTRR_FIX16K_0);
	msr_list_add(list, n, cap, MSR_MTRR_FIX16K_1);
	for (uint32_t i = 0; i < 8; i++)
		msr_list_add(list, n, cap, MSR_MTRR_FIX4K_0 + i);
	if (msr_read(v, MSR_MTRR_CAP, &mtrrcap) < 0)
		return;
	nvar = (unsigned)(mtrrcap & 0xff);
	if (nvar > MTRR_MAX_VAR)
		nvar = MTRR_MAX_VAR;
	for (uint32_t i = 0; i < nvar; i++) {
		msr_list_add(list, n, cap, MSR_MTRR_PHYS_BASE0 + 2 * i);
		msr_list_add(list, n, cap, MSR_MTRR_PHYS_BASE0 + 2 * i + 1);
	}
}

/* KVM_GET_MSR_INDEX_LIST (system fd); NULL on error, count in *n. */
static struct kvm_msr_list *msr_index_list(struct vm *vm)
{
	struct kvm_msr_list probe = {.nmsrs = 0};
	struct kvm_msr_list *l;

	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG)
		return NULL;
	if (probe.nmsrs > VMSTATE_MAX_MSRS)
		probe.nmsrs = VMSTATE_MAX_MSRS;
	l = calloc(1, sizeof(*l) + (probe.nmsrs + 1) * sizeof(uint32_t));
	if (l == NULL)
		return NULL;
	l->nmsrs = probe.nmsrs;
	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, l) < 0) {
		free(l);
		return NULL;
	}
	return l;
}

/*
 * The MSRs a vCPU saves, derived at run time (KVM's list differs by host:
 * 41 on PVM, more on VMX/SVM): KVM's index list plus the extras, each kept
 * only when KVM_GET_MSRS reads it on `v`.  Once per VM; 0 or -1.
 */
static int probe_msrs(struct vm *vm, struct vcpu *v, char *err, size_t errlen)
{
	struct kvm_msr_list *l;
	uint32_t *cand, *keep;
	unsigned ncand = 0, nkeep = 0;
	uint64_t value;

	pthread_mutex_lock(&probe_lock);
	if (vm->state_msrs != NULL) {
		pthread_mutex_unlock(&probe_lock);
		return 0;
	}
	l = msr_index_list(vm);
	cand = calloc(VMSTATE_MAX_MSRS, sizeof(*cand));
	keep = calloc(VMSTATE_MAX_MSRS, sizeof(*keep));
	if (l == NULL || cand == NULL || keep == NULL) {
		pthread_mutex_unlock(&probe_lock);
		snprintf(err, errlen, "KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
		free(l);
		free(cand);
		free(keep);
		return -1;
	}
	for (uint32_t i = 0; i < l->nmsrs; i++)
		msr_list_add(cand, &ncand, VMSTATE_MAX_MSRS, l->indices[i]);
	msr_list_add_extras(v, cand, &ncand, VMSTATE_MAX_MSRS);
	for (unsigned i = 0; i < ncand; i++)
		if (msr_read(v, cand[i], &value) == 0)
			keep[nkeep++] = cand[i];
	vm->state_msrs = keep;
	vm->state_nmsrs = nkeep;
	pthread_mutex_unlock(&probe_lock);
	free(l);
	free(cand);
	return 0;
}

/* ---- reading a vCPU out of KVM ---- */

static int vcpu_ioctl(struct vcpu *v, unsigned long req, void *arg, const char *name, char *err,
                      size_t errlen)
{
	if (ioctl(v->fd, req, arg) >= 0)
		return 0;
	snprintf(err, errlen, "vCPU %u: %s: %s", v->index, name, strerror(errno));
	return -1;
}

/*
 * How many CPUID entries the vCPU has.  KVM_GET_CPUID2 cannot be trusted
 * to say: Linux 6.1 (the lab's) leaves the caller's `nent` as it was after
 * a successful call, so asking with room for 512 reads 512 entries, zeros
 * past the real ones, and neither 6.1 nor later copy the count back on
 * E2BIG.  A call succeeds exactly when `nent` is at least the count, so
 * find the smallest that does (nine calls).  0 on error.
 */
static unsigned cpuid_count(struct vcpu *v)
{
	struct kvm_cpuid2 *c =
	    calloc(1, sizeof(*c) + VMSTATE_MAX_CPUID * sizeof(struct kvm_cpuid_entry2));
	unsigned lo = 1, hi = VMSTATE_MAX_CPUID;

	if (c == NULL)
		return 0;
	c->nent = hi;
	if (ioctl(v->fd, KVM_GET_CPUID2, c) < 0) {
		free(c);
		return 0;
	}
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		c->nent = mid;
		if (ioctl(v->fd, KVM_GET_CPUID2, c) == 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	free(c);
	return lo;
}

static int get_cpuid(struct vcpu *v, struct vcpu_image *s, char *err, size_t errlen)
{
	struct kvm_cpuid2 *c =
	    calloc(1, sizeof(*c) + VMSTATE_MAX_CPUID * sizeof(struct kvm_cpuid_entry2));
	unsigned n;
	int rc;

	if (c == NULL) {
		snprintf(err, errlen, "vCPU %u: out of memory", v->index);
		return -1;
	}
	n = cpuid_count(v);
	if (n == 0) {
		snprintf(err, errlen, "vCPU %u: KVM_GET_CPUID2: %s", v->index, strerror(errno));
		free(c);
		return -1;
	}
	c->nent = n;
	rc = vcpu_ioctl(v, KVM_GET_CPUID2, c, "KVM_GET_CPUID2", err, errlen);
	if (rc == 0) {
		s->ncpuid = c->nent > VMSTATE_MAX_CPUID ? VMSTATE_MAX_CPUID : c->nent;
		memcpy(s->cpuid, c->entries, s->ncpuid * sizeof(s->cpuid[0]));
	}
	free(c);
	return rc;
}

static int get_sregs(struct vcpu *v, struct vcpu_image *s, char *err, size_t errlen)
{
	struct kvm_sregs old;

	if (v->vm->state_sregs2)
		return vcpu_ioctl(v, KVM_GET_SREGS2, &s->sregs, "KVM_GET_SREGS2", err, errlen);
	if (vcpu_ioctl(v, KVM_GET_SREGS, &old, "KVM_GET_SREGS", err, errlen) < 0)
		return -1;
	/* interrupt_bitmap is always empty with the in-kernel irqchip. */
	memset(&s->sregs, 0, sizeof(s->sregs));
	s->sregs.cs = old.cs;
	s->sregs.ds = old.ds;
	s->sregs.es = old.es;
	s->sregs.fs = old.fs;
	s->sregs.gs = old.gs;
	s->sregs.ss = old.ss;
	s->sregs.tr = old.tr;
	s->sregs.ldt = old.ldt;
	s->sregs.gdt = old.gdt;
	s->sregs.idt = old.idt;
	s->sregs.cr0 = old.cr0;
	s->sregs.cr2 = old.cr2;
	s->sregs.cr3 = old.cr3;
	s->sregs.cr4 = old.cr4;
	s->sregs.cr8 = old.cr8;
	s->sregs.efer = old.efer;
	s->sregs.apic_base = old.apic_base;
	return 0;
}

static int get_xsave(struct vcpu *v, struct vcpu_image *s, char *err, size_t errlen)
{
	bool two = v->vm->state_xsave2;

	s->xsave_size = v->vm->state_xsave_size;
	return vcpu_ioctl(v, two ? KVM_GET_XSAVE2 : KVM_GET_XSAVE, s->xsave,
	                  two ? "KVM_GET_XSAVE2" : "KVM_GET_XSAVE", err, errlen);
}

static int get_msrs(struct vcpu *v, struct vcpu_image *s, char *err, size_t errlen)
{
	struct vm *vm = v->vm;
	struct kvm_msrs *m = calloc(1, sizeof(*m) + vm->state_nmsrs * sizeof(m->entries[0]));
	int got;

	if (m == NULL) {
		snprintf(err, errlen, "vCPU %u: out of memory", v->index);
		return -1;
	}
	m->nmsrs = vm->state_nmsrs;
	for (unsigned i = 0; i < vm->state_nmsrs; i++)
		m->entries[i].index = vm->state_msrs[i];
	got = ioctl(v->fd, KVM_GET_MSRS, m);
	if (got != (int)vm->state_nmsrs) {
		if (got < 0)
			snprintf(err, errlen, "vCPU %u: KVM_GET_MSRS: %s", v->index,
			         strerror(errno));
		else
			snprintf(err, errlen, "vCPU %u: KVM_GET_MSRS: MSR 0x%x unreadable",
			         v->index, m->entries[got].index);
		free(m);
		return -1;
	}
	s->nmsrs = m->nmsrs;
	memcpy(s->msrs, m->entries, s->nmsrs * sizeof(s->msrs[0]));
	free(m);
	return 0;
}

static int get_tsc_khz(struct vcpu *v, struct vcpu_image *s, char *err, size_t errlen)
{
	int khz = ioctl(v->fd, KVM_GET_TSC_KHZ, 0);

	if (khz <= 0) {
		snprintf(err, errlen, "vCPU %u: KVM_GET_TSC_KHZ: %s", v->index,
		         khz < 0 ? strerror(errno) : "0 kHz");
		return -1;
	}
	s->tsc_khz = (uint32_t)khz;
	return 0;
}

/* A guest that turned on VMX or SVM has nested state this khyve does not
 * save (KVM_GET_NESTED_STATE): a restore would lose its own guests. */
static bool nested_in_use(struct vcpu *v, const struct vcpu_image *s, char *err, size_t errlen)
{
	const char *what = NULL;

	if (s->sregs.cr4 & X86_CR4_VMXE)
		what = "VMX (CR4.VMXE)";
	else if (s->sregs.efer & X86_EFER_SVME)
		what = "SVM (EFER.SVME)";
	if (what == NULL)
		return false;
	snprintf(err, errlen, "vCPU %u: the guest uses %s; khyve cannot save nested state",
	         v->index, what);
	return true;
}

/* The save order (design section 2): MP state first, events last. */
static int vcpu_read(struct vcpu *v, struct vcpu_image *s, char *err, size_t errlen)
{
	struct kvm_mp_state mp;

	s->apic_id = v->apic_id;
	if (get_cpuid(v, s, err, errlen) < 0 ||
	    vcpu_ioctl(v, KVM_GET_MP_STATE, &mp, "KVM_GET_MP_STATE", err, errlen) < 0 ||
	    vcpu_ioctl(v, KVM_GET_REGS, &s->regs, "KVM_GET_REGS", err, errlen) < 0 ||
	    get_sregs(v, s, err, errlen) < 0 || get_xsave(v, s, err, errlen) < 0 ||
	    vcpu_ioctl(v, KVM_GET_XCRS, &s->xcrs, "KVM_GET_XCRS", err, errlen) < 0 ||
	    vcpu_ioctl(v, KVM_GET_DEBUGREGS, &s->dbg, "KVM_GET_DEBUGREGS", err, errlen) < 0 ||
	    vcpu_ioctl(v, KVM_GET_LAPIC, &s->lapic, "KVM_GET_LAPIC", err, errlen) < 0 ||
	    get_msrs(v, s, err, errlen) < 0 || get_tsc_khz(v, s, err, errlen) < 0 ||
	    vcpu_ioctl(v, KVM_GET_VCPU_EVENTS, &s->events, "KVM_GET_VCPU_EVENTS", err, errlen) < 0)
		return -1;
	s->mp_state = mp.mp_state;
	if (nested_in_use(v, s, err, errlen))
		return -1;
	if (s->xcrs.nr_xcrs > VMSTATE_MAX_XCRS)
		s->xcrs.nr_xcrs = VMSTATE_MAX_XCRS;
	s->events.flags &= EVENTS_FLAGS;
	return 0;
}

/* ---- the section's encoding ---- */

static void put_segment(struct sbuf *b, const struct kvm_segment *g)
{
	sbuf_put_u64(b, g->base);
	sbuf_put_u32(b, g->limit);
	sbuf_put_u16(b, g->selector);
	sbuf_put_u8(b, g->type);
	sbuf_put_u8(b, g->present);
	sbuf_put_u8(b, g->dpl);
	sbuf_put_u8(b, g->db);
	sbuf_put_u8(b, g->s);
	sbuf_put_u8(b, g->l);
	sbuf_put_u8(b, g->g);
	sbuf_put_u8(b, g->avl);
	sbuf_put_u8(b, g->unusable);
}

static void put_dtable(struct sbuf *b, const struct kvm_dtable *t)
{
	sbuf_put_u64(b, t->base);
	sbuf_put_u16(b, t->limit);
}

static void put_cpuid(struct sbuf *b, const struct vcpu_image *s)
{
	sbuf_put_u32(b, s->ncpuid);
	for (uint32_t i = 0; i < s->ncpuid; i++) {
		const struct kvm_cpuid_entry2 *e = &s->cpuid[i];

		sbuf_put_u32(b, e->function);
		sbuf_put_u32(b, e->index);
		sbuf_put_u32(b, e->flags);
		sbuf_put_u32(b, e->eax);
		sbuf_put_u32(b, e->ebx);
		sbuf_put_u32(b, e->ecx);
		sbuf_put_u32(b, e->edx);
	}
}

static void put_regs(struct sbuf *b, const struct kvm_regs *r)
{
	const uint64_t v[] = {r->rax, r->rbx, r->rcx, r->rdx, r->rsi, r->rdi,
	                      r->rsp, r->rbp, r->r8,  r->r9,  r->r10, r->r11,
	                      r->r12, r->r13, r->r14, r->r15, r->rip, r->rflags};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		sbuf_put_u64(b, v[i]);
}

static void put_sregs(struct sbuf *b, const struct kvm_sregs2 *s)
{
	const struct kvm_segment *seg[] = {&s->cs, &s->ds, &s->es, &s->fs,
	                                   &s->gs, &s->ss, &s->tr, &s->ldt};

	for (size_t i = 0; i < sizeof(seg) / sizeof(seg[0]); i++)
		put_segment(b, seg[i]);
	put_dtable(b, &s->gdt);
	put_dtable(b, &s->idt);
	sbuf_put_u64(b, s->cr0);
	sbuf_put_u64(b, s->cr2);
	sbuf_put_u64(b, s->cr3);
	sbuf_put_u64(b, s->cr4);
	sbuf_put_u64(b, s->cr8);
	sbuf_put_u64(b, s->efer);
	sbuf_put_u64(b, s->apic_base);
	sbuf_put_u64(b, s->flags);
	for (int i = 0; i < 4; i++)
		sbuf_put_u64(b, s->pdptrs[i]);
}

static void put_events(struct sbuf *b, const struct kvm_vcpu_events *e)
{
	sbuf_put_u8(b, e->exception.injected);
	sbuf_put_u8(b, e->exception.nr);
	sbuf_put_u8(b, e->exception.has_error_code);
	sbuf_put_u8(b, e->exception.pending);
	sbuf_put_u32(b, e->exception.error_code);
	sbuf_put_u8(b, e->interrupt.injected);
	sbuf_put_u8(b, e->interrupt.nr);
	sbuf_put_u8(b, e->interrupt.soft);
	sbuf_put_u8(b, e->interrupt.shadow);
	sbuf_put_u8(b, e->nmi.injected);
	sbuf_put_u8(b, e->nmi.pending);
	sbuf_put_u8(b, e->nmi.masked);
	sbuf_put_u32(b, e->sipi_vector);
	sbuf_put_u32(b, e->flags);
	sbuf_put_u8(b, e->smi.smm);
	sbuf_put_u8(b, e->smi.pending);
	sbuf_put_u8(b, e->smi.smm_inside_nmi);
	sbuf_put_u8(b, e->smi.latched_init);
}

static void vcpu_put(struct sbuf *b, const struct vcpu_image *s)
{
	sbuf_put_u16(b, VMSTATE_VERSION);
	sbuf_put_u32(b, s->apic_id);
	put_cpuid(b, s);
	sbuf_put_u32(b, s->mp_state);
	put_regs(b, &s->regs);
	put_sregs(b, &s->sregs);
	sbuf_put_u32(b, s->xsave_size);
	sbuf_put_bytes(b, s->xsave, s->xsave_size);
	sbuf_put_u32(b, s->xcrs.nr_xcrs);
	sbuf_put_u32(b, s->xcrs.flags);
	for (uint32_t i = 0; i < s->xcrs.nr_xcrs; i++) {
		sbuf_put_u32(b, s->xcrs.xcrs[i].xcr);
		sbuf_put_u64(b, s->xcrs.xcrs[i].value);
	}
	for (int i = 0; i < 4; i++)
		sbuf_put_u64(b, s->dbg.db[i]);
	sbuf_put_u64(b, s->dbg.dr6);
	sbuf_put_u64(b, s->dbg.dr7);
	/* The LAPIC page is the architectural register layout, not a C struct. */
	sbuf_put_bytes(b, s->lapic.regs, sizeof(s->lapic.regs));
	sbuf_put_u32(b, s->nmsrs);
	for (uint32_t i = 0; i < s->nmsrs; i++) {
		sbuf_put_u32(b, s->msrs[i].index);
		sbuf_put_u64(b, s->msrs[i].data);
	}
	sbuf_put_u32(b, s->tsc_khz);
	put_events(b, &s->events);
}

int vm_state_probe(struct vm *vm, char *err, size_t errlen)
{
	if (vm->ncpus == 0 || vm->vcpus == NULL || vm->vcpus[0] == NULL) {
		snprintf(err, errlen, "no vCPU to probe");
		return -1;
	}
	if (probe_caps(vm, err, errlen) < 0 || probe_msrs(vm, vm->vcpus[0], err, errlen) < 0)
		return -1;
	return 0;
}

int vcpu_state_save(struct vcpu *v, struct sbuf *out, char *err, size_t errlen)
{
	struct vcpu_image *s;
	int rc;

	if (probe_caps(v->vm, err, errlen) < 0 || probe_msrs(v->vm, v, err, errlen) < 0)
		return -1;
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "vCPU %u: out of memory", v->index);
		return -1;
	}
	rc = vcpu_read(v, s, err, errlen);
	if (rc == 0) {
		vcpu_put(out, s);
		if (out->failed) {
			snprintf(err, errlen, "vCPU %u: out of memory", v->index);
			rc = -1;
		}
	}
	free(s);
	return rc;
}

/* ---- reading the section back (hostile) ---- */

/* A byte that must be at most `max`. */
static uint8_t get_u8_max(struct sbuf_reader *r, uint8_t max, const char *what)
{
	uint8_t v = sbuf_get_u8(r);

	if (v > max)
		sbuf_fail(r, "%s %u > %u", what, v, max);
	return v;
}

static void get_segment(struct sbuf_reader *r, struct kvm_segment *g)
{
	g->base = sbuf_get_u64(r);
	g->limit = sbuf_get_u32(r);
	g->selector = sbuf_get_u16(r);
	g->type = get_u8_max(r, 15, "segment type");
	g->present = get_u8_max(r, 1, "segment present");
	g->dpl = get_u8_max(r, 3, "segment dpl");
	g->db = get_u8_max(r, 1, "segment db");
	g->s = get_u8_max(r, 1, "segment s");
	g->l = get_u8_max(r, 1, "segment l");
	g->g = get_u8_max(r, 1, "segment g");
	g->avl = get_u8_max(r, 1, "segment avl");
	g->unusable = get_u8_max(r, 1, "segment unusable");
}

static void get_dtable(struct sbuf_reader *r, struct kvm_dtable *t)
{
	t->base = sbuf_get_u64(r);
	t->limit = sbuf_get_u16(r);
}

static void get_cpuid_entries(struct sbuf_reader *r, struct vcpu_image *s)
{
	s->ncpuid = sbuf_get_u32(r);
	if (s->ncpuid == 0 || s->ncpuid > VMSTATE_MAX_CPUID) {
		sbuf_fail(r, "cpuid entries %u not in 1-%u", s->ncpuid, VMSTATE_MAX_CPUID);
		s->ncpuid = 0;
	}
	for (uint32_t i = 0; i < s->ncpuid && !r->failed; i++) {
		struct kvm_cpuid_entry2 *e = &s->cpuid[i];

		e->function = sbuf_get_u32(r);
		e->index = sbuf_get_u32(r);
		e->flags = sbuf_get_u32(r);
		e->eax = sbuf_get_u32(r);
		e->ebx = sbuf_get_u32(r);
		e->ecx = sbuf_get_u32(r);
		e->edx = sbuf_get_u32(r);
	}
}

static void get_regs(struct sbuf_reader *r, struct kvm_regs *g)
{
	__u64 *const v[] = {&g->rax, &g->rbx, &g->rcx, &g->rdx, &g->rsi, &g->rdi,
	                    &g->rsp, &g->rbp, &g->r8,  &g->r9,  &g->r10, &g->r11,
	                    &g->r12, &g->r13, &g->r14, &g->r15, &g->rip, &g->rflags};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		*v[i] = sbuf_get_u64(r);
}

static void get_sregs2(struct sbuf_reader *r, struct kvm_sregs2 *s)
{
	struct kvm_segment *seg[] = {&s->cs, &s->ds, &s->es, &s->fs,
	                             &s->gs, &s->ss, &s->tr, &s->ldt};

	for (size_t i = 0; i < sizeof(seg) / sizeof(seg[0]); i++)
		get_segment(r, seg[i]);
	get_dtable(r, &s->gdt);
	get_dtable(r, &s->idt);
	s->cr0 = sbuf_get_u64(r);
	s->cr2 = sbuf_get_u64(r);
	s->cr3 = sbuf_get_u64(r);
	s->cr4 = sbuf_get_u64(r);
	s->cr8 = sbuf_get_u64(r);
	s->efer = sbuf_get_u64(r);
	s->apic_base = sbuf_get_u64(r);
	s->flags = sbuf_get_u64(r);
	if ((s->flags & ~(uint64_t)KVM_SREGS2_FLAGS_PDPTRS_VALID) != 0)
		sbuf_fail(r, "sregs flags 0x%llx unknown", (unsigned long long)s->flags);
	for (int i = 0; i < 4; i++)
		s->pdptrs[i] = sbuf_get_u64(r);
}

static void get_xsave_area(struct sbuf_reader *r, struct vcpu_image *s)
{
	s->xsave_size = sbuf_get_u32(r);
	if (s->xsave_size < VMSTATE_MIN_XSAVE || s->xsave_size > VMSTATE_MAX_XSAVE) {
		sbuf_fail(r, "xsave size %u not in %u-%u", s->xsave_size, VMSTATE_MIN_XSAVE,
		          VMSTATE_MAX_XSAVE);
		s->xsave_size = 0;
	}
	sbuf_get_bytes(r, s->xsave, s->xsave_size);
}

static void get_xcrs(struct sbuf_reader *r, struct kvm_xcrs *x)
{
	x->nr_xcrs = sbuf_get_u32(r);
	x->flags = sbuf_get_u32(r);
	if (x->nr_xcrs > VMSTATE_MAX_XCRS) {
		sbuf_fail(r, "xcrs %u > %u", x->nr_xcrs, VMSTATE_MAX_XCRS);
		x->nr_xcrs = 0;
	}
	if (x->flags != 0)
		sbuf_fail(r, "xcrs flags 0x%x unknown", x->flags);
	for (uint32_t i = 0; i < x->nr_xcrs; i++) {
		x->xcrs[i].xcr = sbuf_get_u32(r);
		x->xcrs[i].value = sbuf_get_u64(r);
	}
}

static void get_msr_pairs(struct sbuf_reader *r, struct vcpu_image *s)
{
	s->nmsrs = sbuf_get_u32(r);
	if (s->nmsrs > VMSTATE_MAX_MSRS) {
		sbuf_fail(r, "msrs %u > %u", s->nmsrs, VMSTATE_MAX_MSRS);
		s->nmsrs = 0;
	}
	for (uint32_t i = 0; i < s->nmsrs && !r->failed; i++) {
		s->msrs[i].index = sbuf_get_u32(r);
		s->msrs[i].data = sbuf_get_u64(r);
	}
}

static void get_events(struct sbuf_reader *r, struct kvm_vcpu_events *e)
{
	e->exception.injected = get_u8_max(r, 1, "exception injected");
	e->exception.nr = get_u8_max(r, 31, "exception vector");
	e->exception.has_error_code = get_u8_max(r, 1, "exception has_error_code");
	e->exception.pending = get_u8_max(r, 1, "exception pending");
	e->exception.error_code = sbuf_get_u32(r);
	e->interrupt.injected = get_u8_max(r, 1, "interrupt injected");
	e->interrupt.nr = sbuf_get_u8(r);
	e->interrupt.soft = get_u8_max(r, 1, "interrupt soft");
	e->interrupt.shadow =
	    get_u8_max(r, KVM_X86_SHADOW_INT_MOV_SS | KVM_X86_SHADOW_INT_STI, "interrupt shadow");
	e->nmi.injected = get_u8_max(r, 1, "nmi injected");
	e->nmi.pending = get_u8_max(r, 1, "nmi pending");
	e->nmi.masked = get_u8_max(r, 1, "nmi masked");
	e->sipi_vector = sbuf_get_u32(r);
	if (e->sipi_vector > 0xff)
		sbuf_fail(r, "sipi vector %u > 255", e->sipi_vector);
	e->flags = sbuf_get_u32(r);
	if ((e->flags & ~(uint32_t)EVENTS_FLAGS) != 0)
		sbuf_fail(r, "vcpu events flags 0x%x unknown", e->flags);
	e->smi.smm = get_u8_max(r, 1, "smm");
	e->smi.pending = get_u8_max(r, 1, "smi pending");
	e->smi.smm_inside_nmi = get_u8_max(r, 1, "smm inside nmi");
	e->smi.latched_init = get_u8_max(r, 1, "latched init");
}

static void vcpu_get(struct sbuf_reader *r, struct vcpu_image *s)
{
	if (sbuf_get_version(r, VMSTATE_VERSION) == 0)
		return;
	s->apic_id = sbuf_get_u32(r);
	get_cpuid_entries(r, s);
	s->mp_state = sbuf_get_u32(r);
	if (s->mp_state > KVM_MP_STATE_SIPI_RECEIVED)
		sbuf_fail(r, "mp_state %u unknown", s->mp_state);
	get_regs(r, &s->regs);
	get_sregs2(r, &s->sregs);
	get_xsave_area(r, s);
	get_xcrs(r, &s->xcrs);
	for (int i = 0; i < 4; i++)
		s->dbg.db[i] = sbuf_get_u64(r);
	s->dbg.dr6 = sbuf_get_u64(r);
	s->dbg.dr7 = sbuf_get_u64(r);
	sbuf_get_bytes(r, s->lapic.regs, sizeof(s->lapic.regs));
	get_msr_pairs(r, s);
	s->tsc_khz = sbuf_get_u32(r);
	if (s->tsc_khz == 0)
		sbuf_fail(r, "tsc_khz 0");
	get_events(r, &s->events);
}

/* ---- checks against this host ---- */

enum { EAX, EBX, ECX, EDX };

/* A feature register of a leaf, and the bits in it that are not features
 * of the host: KVM flips them at run time (OSXSAVE, OSPKE, APIC) or
 * khyve's cpuid_fixup sets them from the topology (HTT, hypervisor). */
static const struct feature_reg {
	uint32_t fn, idx;
	int reg;
	uint32_t not_host;
} feature_regs[] = {
    {1, 0, ECX, 1u << 27 | 1u << 31},
    {1, 0, EDX, 1u << 9 | 1u << 28},
    {7, 0, EBX, 0},
    {7, 0, ECX, 1u << 4},
    {7, 0, EDX, 0},
    {7, 1, EAX, 0},
    {0xd, 0, EAX, 0},
    {0xd, 0, EDX, 0},
    {0xd, 1, EAX, 0},
    {0x80000001, 0, ECX, 0},
    {0x80000001, 0, EDX, 0},
    {0x80000007, 0, EDX, 0},
    {0x80000008, 0, EBX, 0},
};

/* Names of common feature bits, for the refusal line. */
static const struct feature_name {
	uint32_t fn, idx;
	int reg, bit;
	const char *name;
} feature_names[] = {
    {1, 0, ECX, 0, "sse3"},
    {1, 0, ECX, 1, "pclmulqdq"},
    {1, 0, ECX, 5, "vmx"},
    {1, 0, ECX, 9, "ssse3"},
    {1, 0, ECX, 12, "fma"},
    {1, 0, ECX, 13, "cx16"},
    {1, 0, ECX, 19, "sse4_1"},
    {1, 0, ECX, 20, "sse4_2"},
    {1, 0, ECX, 21, "x2apic"},
    {1, 0, ECX, 22, "movbe"},
    {1, 0, ECX, 23, "popcnt"},
    {1, 0, ECX, 24, "tsc_deadline"},
    {1, 0, ECX, 25, "aes"},
    {1, 0, ECX, 26, "xsave"},
    {1, 0, ECX, 28, "avx"},
    {1, 0, ECX, 29, "f16c"},
    {1, 0, ECX, 30, "rdrand"},
    {1, 0, EDX, 25, "sse"},
    {1, 0, EDX, 26, "sse2"},
    {7, 0, EBX, 0, "fsgsbase"},
    {7, 0, EBX, 3, "bmi1"},
    {7, 0, EBX, 5, "avx2"},
    {7, 0, EBX, 8, "bmi2"},
    {7, 0, EBX, 9, "erms"},
    {7, 0, EBX, 10, "invpcid"},
    {7, 0, EBX, 16, "avx512f"},
    {7, 0, EBX, 17, "avx512dq"},
    {7, 0, EBX, 18, "rdseed"},
    {7, 0, EBX, 19, "adx"},
    {7, 0, EBX, 20, "smap"},
    {7, 0, EBX, 28, "avx512cd"},
    {7, 0, EBX, 29, "sha_ni"},
    {7, 0, EBX, 30, "avx512bw"},
    {7, 0, EBX, 31, "avx512vl"},
    {7, 0, ECX, 1, "avx512vbmi"},
    {7, 0, ECX, 3, "pku"},
    {7, 0, ECX, 8, "gfni"},
    {7, 0, ECX, 9, "vaes"},
    {7, 0, ECX, 10, "vpclmulqdq"},
    {7, 0, ECX, 16, "la57"},
    {7, 0, ECX, 22, "rdpid"},
    {7, 0, EDX, 22, "amx_bf16"},
    {7, 0, EDX, 24, "amx_tile"},
    {7, 0, EDX, 25, "amx_int8"},
    {0xd, 1, EAX, 0, "xsaveopt"},
    {0xd, 1, EAX, 1, "xsavec"},
    {0xd, 1, EAX, 3, "xsaves"},
    {0x80000001, 0, ECX, 0, "lahf_lm"},
    {0x80000001, 0, ECX, 2, "svm"},
    {0x80000001, 0, ECX, 5, "abm"},
    {0x80000001, 0, EDX, 20, "nx"},
    {0x80000001, 0, EDX, 26, "pdpe1gb"},
    {0x80000001, 0, EDX, 27, "rdtscp"},
    {0x80000001, 0, EDX, 29, "lm"},
    {0x80000007, 0, EDX, 8, "invtsc"},
};

static const char *const reg_names[] = {"eax", "ebx", "ecx", "edx"};

static const struct kvm_cpuid_entry2 *cpuid_find(const struct kvm_cpuid_entry2 *e, uint32_t n,
                                                 uint32_t fn, uint32_t idx)
{
	for (uint32_t i = 0; i < n; i++)
		if (e[i].function == fn && e[i].index == idx)
			return &e[i];
	return NULL;
}

static uint32_t cpuid_reg(const struct kvm_cpuid_entry2 *e, int reg)
{
	if (e == NULL)
		return 0;
	return reg == EAX ? e->eax : reg == EBX ? e->ebx : reg == ECX ? e->ecx : e->edx;
}

static void missing_feature(const struct feature_reg *f, int bit, char *err, size_t errlen)
{
	const char *name = NULL;

	for (size_t i = 0; i < sizeof(feature_names) / sizeof(feature_names[0]); i++) {
		const struct feature_name *n = &feature_names[i];

		if (n->fn == f->fn && n->idx == f->idx && n->reg == f->reg && n->bit == bit)
			name = n->name;
	}
	snprintf(err, errlen, "host lacks CPU feature %s%s(leaf 0x%x.%u %s bit %d) the guest saw",
	         name ? name : "", name ? " " : "", f->fn, f->idx, reg_names[f->reg], bit);
}

static uint32_t host_reg(const struct kvm_cpuid2 *c, const struct feature_reg *f)
{
	return c == NULL ? 0 : cpuid_reg(cpuid_find(c->entries, c->nent, f->fn, f->idx), f->reg);
}

/*
 * Every feature bit the guest saw must be one this host offers: in
 * KVM_GET_SUPPORTED_CPUID, or in what the fresh vCPU `fresh` (its CPUID as
 * vm_create_vcpus() set it, read back before the restore replaces it)
 * already shows.  The second matters on PVM, whose KVM_GET_CPUID2 reports
 * the host's own features beyond the supported list (the guest runs them
 * natively).
 */
static int check_cpuid(struct vm *vm, const struct kvm_cpuid2 *fresh, const struct vcpu_image *s,
                       char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(feature_regs) / sizeof(feature_regs[0]); i++) {
		const struct feature_reg *f = &feature_regs[i];
		uint32_t saw = cpuid_reg(cpuid_find(s->cpuid, s->ncpuid, f->fn, f->idx), f->reg);
		uint32_t has = host_reg(vm->supported_cpuid, f) | host_reg(fresh, f);
		uint32_t lacks = saw & ~has & ~f->not_host;

		if (lacks != 0) {
			missing_feature(f, __builtin_ctz(lacks), err, errlen);
			return -1;
		}
	}
	return 0;
}

static int check_xsave(struct vm *vm, const struct vcpu_image *s, char *err, size_t errlen)
{
	if (s->xsave_size <= vm->state_xsave_size)
		return 0;
	snprintf(err, errlen, "the guest's XSAVE area is %u bytes, this host's KVM takes %u",
	         s->xsave_size, vm->state_xsave_size);
	return -1;
}

/* The host's TSC rate for `v`, and whether the saved one can run here. */
static int check_tsc(struct vcpu *v, const struct vcpu_image *s, bool *set_khz, char *err,
                     size_t errlen)
{
	int host = ioctl(v->fd, KVM_GET_TSC_KHZ, 0);
	uint64_t diff;

	*set_khz = false;
	if (host <= 0) {
		snprintf(err, errlen, "vCPU %u: KVM_GET_TSC_KHZ: %s", v->index,
		         host < 0 ? strerror(errno) : "0 kHz");
		return -1;
	}
	if ((uint32_t)host == s->tsc_khz)
		return 0;
	if (v->vm->state_tsc_control) {
		*set_khz = true;
		return 0;
	}
	diff =
	    (uint32_t)host > s->tsc_khz ? (uint32_t)host - s->tsc_khz : s->tsc_khz - (uint32_t)host;
	if (diff * 1000000 <= (uint64_t)TSC_TOLERANCE_PPM * (uint32_t)host)
		return 0;
	snprintf(err, errlen, "host TSC %d kHz, guest saw %u kHz, no TSC scaling", host,
	         s->tsc_khz);
	return -1;
}

/* ---- writing a vCPU into KVM ---- */

static int set_cpuid(struct vcpu *v, const struct vcpu_image *s, char *err, size_t errlen)
{
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + s->ncpuid * sizeof(c->entries[0]));
	int rc;

	if (c == NULL) {
		snprintf(err, errlen, "vCPU %u: out of memory", v->index);
		return -1;
	}
	c->nent = s->ncpuid;
	memcpy(c->entries, s->cpuid, s->ncpuid * sizeof(c->entries[0]));
	rc = vcpu_ioctl(v, KVM_SET_CPUID2, c, "KVM_SET_CPUID2", err, errlen);
	free(c);
	if (rc < 0) {
		size_t n = strlen(err);

		snprintf(err + n, errlen - n, " (%u entries)", s->ncpuid);
	}
	return rc;
}

static int set_sregs(struct vcpu *v, const struct vcpu_image *s, char *err, size_t errlen)
{
	struct kvm_sregs2 s2 = s->sregs;
	struct kvm_sregs old;

	if (v->vm->state_sregs2)
		return vcpu_ioctl(v, KVM_SET_SREGS2, &s2, "KVM_SET_SREGS2", err, errlen);
	/* Without SREGS2 the PDPTEs are reloaded from CR3 by KVM. */
	memset(&old, 0, sizeof(old));
	old.cs = s2.cs;
	old.ds = s2.ds;
	old.es = s2.es;
	old.fs = s2.fs;
	old.gs = s2.gs;
	old.ss = s2.ss;
	old.tr = s2.tr;
	old.ldt = s2.ldt;
	old.gdt = s2.gdt;
	old.idt = s2.idt;
	old.cr0 = s2.cr0;
	old.cr2 = s2.cr2;
	old.cr3 = s2.cr3;
	old.cr4 = s2.cr4;
	old.cr8 = s2.cr8;
	old.efer = s2.efer;
	old.apic_base = s2.apic_base;
	return vcpu_ioctl(v, KVM_SET_SREGS, &old, "KVM_SET_SREGS", err, errlen);
}

/* KVM_SET_XSAVE reads the host's full area size: pad the saved one. */
static int set_xsave(struct vcpu *v, const struct vcpu_image *s, char *err, size_t errlen)
{
	uint8_t *buf = calloc(1, v->vm->state_xsave_size);
	int rc;

	if (buf == NULL) {
		snprintf(err, errlen, "vCPU %u: out of memory", v->index);
		return -1;
	}
	memcpy(buf, s->xsave, s->xsave_size);
	rc = vcpu_ioctl(v, KVM_SET_XSAVE, buf, "KVM_SET_XSAVE", err, errlen);
	free(buf);
	return rc;
}

/* Where an MSR goes in KVM_SET_MSRS: the TSC first and the TSC deadline
 * last, as KVM arms the deadline timer against the guest TSC of the moment
 * it is written (a fresh vCPU's is near 0: the timer would fire late). */
static int msr_rank(uint32_t index)
{
	return index == MSR_IA32_TSC ? 0 : index == MSR_IA32_TSC_DEADLINE ? 2 : 1;
}

/* All saved MSRs in one call; a short count names the MSR KVM refused. */
static int set_msrs(struct vcpu *v, const struct vcpu_image *s, char *err, size_t errlen)
{
	struct kvm_msrs *m = calloc(1, sizeof(*m) + s->nmsrs * sizeof(m->entries[0]));
	int set;

	if (m == NULL) {
		snprintf(err, errlen, "vCPU %u: out of memory", v->index);
		return -1;
	}
	for (int rank = 0; rank < 3; rank++)
		for (uint32_t i = 0; i < s->nmsrs; i++)
			if (msr_rank(s->msrs[i].index) == rank)
				m->entries[m->nmsrs++] = s->msrs[i];
	set = ioctl(v->fd, KVM_SET_MSRS, m);
	if (set < 0)
		snprintf(err, errlen, "vCPU %u: KVM_SET_MSRS: %s", v->index, strerror(errno));
	else if ((uint32_t)set < s->nmsrs)
		snprintf(err, errlen, "vCPU %u: MSR 0x%x refused by KVM", v->index,
		         m->entries[set].index);
	free(m);
	return set >= 0 && (uint32_t)set == s->nmsrs ? 0 : -1;
}

/* The restore order (design section 2). */
static int vcpu_write(struct vcpu *v, const struct vcpu_image *s, bool set_khz, char *err,
                      size_t errlen)
{
	struct kvm_mp_state mp = {.mp_state = s->mp_state};
	struct kvm_regs regs = s->regs;
	struct kvm_xcrs xcrs = s->xcrs;
	struct kvm_debugregs dbg = s->dbg;
	struct kvm_lapic_state lapic = s->lapic;
	struct kvm_vcpu_events events = s->events;

	if (set_cpuid(v, s, err, errlen) < 0)
		return -1;
	if (set_khz && ioctl(v->fd, KVM_SET_TSC_KHZ, (unsigned long)s->tsc_khz) < 0) {
		snprintf(err, errlen, "vCPU %u: KVM_SET_TSC_KHZ %u: %s", v->index, s->tsc_khz,
		         strerror(errno));
		return -1;
	}
	if (vcpu_ioctl(v, KVM_SET_MP_STATE, &mp, "KVM_SET_MP_STATE", err, errlen) < 0 ||
	    vcpu_ioctl(v, KVM_SET_REGS, &regs, "KVM_SET_REGS", err, errlen) < 0 ||
	    set_sregs(v, s, err, errlen) < 0 || set_xsave(v, s, err, errlen) < 0 ||
	    vcpu_ioctl(v, KVM_SET_XCRS, &xcrs, "KVM_SET_XCRS", err, errlen) < 0 ||
	    vcpu_ioctl(v, KVM_SET_DEBUGREGS, &dbg, "KVM_SET_DEBUGREGS", err, errlen) < 0 ||
	    vcpu_ioctl(v, KVM_SET_LAPIC, &lapic, "KVM_SET_LAPIC", err, errlen) < 0 ||
	    set_msrs(v, s, err, errlen) < 0 ||
	    vcpu_ioctl(v, KVM_SET_VCPU_EVENTS, &events, "KVM_SET_VCPU_EVENTS", err, errlen) < 0)
		return -1;
	return 0;
}

static int vcpu_check(struct vcpu *v, const struct vcpu_image *s, bool *set_khz, char *err,
                      size_t errlen)
{
	struct kvm_cpuid2 *fresh =
	    calloc(1, sizeof(*fresh) + VMSTATE_MAX_CPUID * sizeof(fresh->entries[0]));
	int rc = -1;

	if (fresh == NULL) {
		snprintf(err, errlen, "vCPU %u: out of memory", v->index);
		return -1;
	}
	fresh->nent = cpuid_count(v);
	if (s->apic_id != v->apic_id)
		snprintf(err, errlen, "vCPU %u: saved for APIC ID %u, this vCPU has %u", v->index,
		         s->apic_id, v->apic_id);
	else if (vcpu_ioctl(v, KVM_GET_CPUID2, fresh, "KVM_GET_CPUID2", err, errlen) == 0 &&
	         check_cpuid(v->vm, fresh, s, err, errlen) == 0 &&
	         check_xsave(v->vm, s, err, errlen) == 0 &&
	         check_tsc(v, s, set_khz, err, errlen) == 0)
		rc = 0;
	free(fresh);
	return rc;
}

int vcpu_state_restore(struct vcpu *v, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct vcpu_image *s;
	bool set_khz = false;
	int rc = -1;

	if (probe_caps(v->vm, err, errlen) < 0)
		return -1;
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "vCPU %u: out of memory", v->index);
		return -1;
	}
	vcpu_get(in, s);
	if (in->failed)
		snprintf(err, errlen, "vCPU %u: %s", v->index, in->why);
	else if (vcpu_check(v, s, &set_khz, err, errlen) == 0)
		rc = vcpu_write(v, s, set_khz, err, errlen);
	free(s);
	return rc;
}

/* ---- the VM-wide part ---- */

static int vm_ioctl(struct vm *vm, unsigned long req, void *arg, const char *name, char *err,
                    size_t errlen)
{
	if (ioctl(vm->vm_fd, req, arg) >= 0)
		return 0;
	snprintf(err, errlen, "%s: %s", name, strerror(errno));
	return -1;
}

static void put_pic(struct sbuf *b, const struct kvm_pic_state *p)
{
	const uint8_t v[] = {p->last_irr,
	                     p->irr,
	                     p->imr,
	                     p->isr,
	                     p->priority_add,
	                     p->irq_base,
	                     p->read_reg_select,
	                     p->poll,
	                     p->special_mask,
	                     p->init_state,
	                     p->auto_eoi,
	                     p->rotate_on_auto_eoi,
	                     p->special_fully_nested_mode,
	                     p->init4,
	                     p->elcr,
	                     p->elcr_mask};

	sbuf_put_bytes(b, v, sizeof(v));
}

static void get_pic(struct sbuf_reader *r, struct kvm_pic_state *p)
{
	p->last_irr = sbuf_get_u8(r);
	p->irr = sbuf_get_u8(r);
	p->imr = sbuf_get_u8(r);
	p->isr = sbuf_get_u8(r);
	p->priority_add = get_u8_max(r, 7, "pic priority_add");
	p->irq_base = sbuf_get_u8(r);
	p->read_reg_select = get_u8_max(r, 1, "pic read_reg_select");
	p->poll = get_u8_max(r, 1, "pic poll");
	p->special_mask = get_u8_max(r, 1, "pic special_mask");
	p->init_state = get_u8_max(r, 3, "pic init_state");
	p->auto_eoi = get_u8_max(r, 1, "pic auto_eoi");
	p->rotate_on_auto_eoi = get_u8_max(r, 1, "pic rotate_on_auto_eoi");
	p->special_fully_nested_mode = get_u8_max(r, 1, "pic special_fully_nested_mode");
	p->init4 = get_u8_max(r, 1, "pic init4");
	p->elcr = sbuf_get_u8(r);
	p->elcr_mask = sbuf_get_u8(r);
}

static void put_ioapic(struct sbuf *b, const struct kvm_ioapic_state *a)
{
	sbuf_put_u64(b, a->base_address);
	sbuf_put_u32(b, a->ioregsel);
	sbuf_put_u32(b, a->id);
	sbuf_put_u32(b, a->irr);
	for (int i = 0; i < KVM_IOAPIC_NUM_PINS; i++)
		sbuf_put_u64(b, a->redirtbl[i].bits);
}

static void get_ioapic(struct sbuf_reader *r, struct kvm_ioapic_state *a)
{
	a->base_address = sbuf_get_u64(r);
	if (!r->failed && a->base_address != IOAPIC_GPA)
		sbuf_fail(r, "ioapic base 0x%llx, khyve's is 0x%llx",
		          (unsigned long long)a->base_address, IOAPIC_GPA);
	a->ioregsel = sbuf_get_u32(r);
	a->id = sbuf_get_u32(r);
	a->irr = sbuf_get_u32(r);
	for (int i = 0; i < KVM_IOAPIC_NUM_PINS; i++)
		a->redirtbl[i].bits = sbuf_get_u64(r);
}

static void put_pit(struct sbuf *b, const struct kvm_pit_state2 *p)
{
	for (int i = 0; i < 3; i++) {
		const struct kvm_pit_channel_state *c = &p->channels[i];

		sbuf_put_u32(b, c->count);
		sbuf_put_u16(b, c->latched_count);
		sbuf_put_u8(b, c->count_latched);
		sbuf_put_u8(b, c->status_latched);
		sbuf_put_u8(b, c->status);
		sbuf_put_u8(b, c->read_state);
		sbuf_put_u8(b, c->write_state);
		sbuf_put_u8(b, c->write_latch);
		sbuf_put_u8(b, c->rw_mode);
		sbuf_put_u8(b, c->mode);
		sbuf_put_u8(b, c->bcd);
		sbuf_put_u8(b, c->gate);
	}
	sbuf_put_u32(b, p->flags);
}

static void get_pit(struct sbuf_reader *r, struct kvm_pit_state2 *p)
{
	const uint32_t flags = KVM_PIT_FLAGS_HPET_LEGACY | KVM_PIT_FLAGS_SPEAKER_DATA_ON;

	for (int i = 0; i < 3; i++) {
		struct kvm_pit_channel_state *c = &p->channels[i];

		c->count = sbuf_get_u32(r);
		if (c->count > 0x10000)
			sbuf_fail(r, "pit count %u > 65536", c->count);
		c->latched_count = sbuf_get_u16(r);
		c->count_latched = sbuf_get_u8(r);
		c->status_latched = get_u8_max(r, 1, "pit status_latched");
		c->status = sbuf_get_u8(r);
		c->read_state = sbuf_get_u8(r);
		c->write_state = sbuf_get_u8(r);
		c->write_latch = sbuf_get_u8(r);
		c->rw_mode = sbuf_get_u8(r);
		c->mode = sbuf_get_u8(r);
		c->bcd = get_u8_max(r, 1, "pit bcd");
		c->gate = get_u8_max(r, 1, "pit gate");
	}
	p->flags = sbuf_get_u32(r);
	if ((p->flags & ~flags) != 0)
		sbuf_fail(r, "pit flags 0x%x unknown", p->flags);
}

int vm_state_save(struct vm *vm, struct sbuf *out, char *err, size_t errlen)
{
	struct kvm_clock_data clock;
	struct kvm_irqchip chip[3];
	struct kvm_pit_state2 pit;

	memset(&clock, 0, sizeof(clock));
	memset(chip, 0, sizeof(chip));
	if (vm_ioctl(vm, KVM_GET_CLOCK, &clock, "KVM_GET_CLOCK", err, errlen) < 0)
		return -1;
	for (uint32_t i = 0; i < 3; i++) {
		chip[i].chip_id = i;
		if (vm_ioctl(vm, KVM_GET_IRQCHIP, &chip[i], "KVM_GET_IRQCHIP", err, errlen) < 0)
			return -1;
	}
	if (vm_ioctl(vm, KVM_GET_PIT2, &pit, "KVM_GET_PIT2", err, errlen) < 0)
		return -1;
	sbuf_put_u16(out, VMSTATE_VERSION);
	sbuf_put_u64(out, clock.clock);
	sbuf_put_u32(out, clock.flags);
	sbuf_put_u64(out, clock.realtime);
	sbuf_put_u64(out, clock.host_tsc);
	put_pic(out, &chip[KVM_IRQCHIP_PIC_MASTER].chip.pic);
	put_pic(out, &chip[KVM_IRQCHIP_PIC_SLAVE].chip.pic);
	put_ioapic(out, &chip[KVM_IRQCHIP_IOAPIC].chip.ioapic);
	put_pit(out, &pit);
	if (out->failed) {
		snprintf(err, errlen, "vm: out of memory");
		return -1;
	}
	return 0;
}

int vm_state_restore(struct vm *vm, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct kvm_irqchip chip[3];
	struct kvm_pit_state2 pit;
	uint64_t clock = 0;

	memset(chip, 0, sizeof(chip));
	memset(&pit, 0, sizeof(pit));
	vm->state_clock_valid = false;
	if (sbuf_get_version(in, VMSTATE_VERSION) != 0) {
		clock = sbuf_get_u64(in);
		/* flags, realtime and host_tsc: for migration's
		 * KVM_CLOCK_REALTIME (later); a file restore uses clock alone. */
		(void)sbuf_get_u32(in);
		(void)sbuf_get_u64(in);
		(void)sbuf_get_u64(in);
		get_pic(in, &chip[0].chip.pic);
		get_pic(in, &chip[1].chip.pic);
		get_ioapic(in, &chip[2].chip.ioapic);
		get_pit(in, &pit);
	}
	if (in->failed) {
		snprintf(err, errlen, "vm: %s", in->why);
		return -1;
	}
	for (uint32_t i = 0; i < 3; i++) {
		chip[i].chip_id = i;
		if (vm_ioctl(vm, KVM_SET_IRQCHIP, &chip[i], "KVM_SET_IRQCHIP", err, errlen) < 0)
			return -1;
	}
	if (vm_ioctl(vm, KVM_SET_PIT2, &pit, "KVM_SET_PIT2", err, errlen) < 0)
		return -1;
	vm->state_clock = clock;
	vm->state_clock_valid = true;
	return 0;
}

int vm_state_restore_finish(struct vm *vm, char *err, size_t errlen)
{
	struct kvm_clock_data clock;

	if (!vm->state_clock_valid || vm->vcpus == NULL) {
		snprintf(err, errlen, "vm: the clock or the vCPUs were not restored");
		return -1;
	}
	memset(&clock, 0, sizeof(clock));
	clock.clock = vm->state_clock; /* flags 0: no time passed while saved */
	if (vm_ioctl(vm, KVM_SET_CLOCK, &clock, "KVM_SET_CLOCK", err, errlen) < 0)
		return -1;
	for (unsigned i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = vm->vcpus[i];

		if (ioctl(v->fd, KVM_KVMCLOCK_CTRL, 0) < 0 && errno != EINVAL) {
			snprintf(err, errlen, "vCPU %u: KVM_KVMCLOCK_CTRL: %s", v->index,
			         strerror(errno));
			return -1;
		}
	}
	vm->state_clock_valid = false;
	return 0;
}

int vcpu_complete_io(struct vcpu *v)
{
	int rc, e;

	if (!v->io_pending)
		return 0;
	__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	rc = vcpu_run(v);
	e = errno;
	__atomic_store_n(&v->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
	vcpu_eat_kicks();
	if (rc == 0) {
		errno = EAGAIN; /* completing it made a new exit */
		return -1;
	}
	if (e == EINTR)
		return 0;
	errno = e;
	return -1;
}
