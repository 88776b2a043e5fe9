#include "vmm/vcpu.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vmm/kvm.h"

#define SIG_VCPU_KICK    (SIGRTMIN + 1)

#define X86_CR0_PE       0x00000001ull
#define X86_CR0_ET       0x00000010ull
#define X86_CR0_PG       0x80000000ull
#define X86_CR4_PAE      0x00000020ull
#define X86_EFER_LME     0x00000100ull
#define X86_EFER_LMA     0x00000400ull

#define APIC_LVT_LINT0   0x350
#define APIC_LVT_LINT1   0x360
#define APIC_MODE_NMI    0x4
#define APIC_MODE_EXTINT 0x7

int vcpu_create(struct vm *vm, struct vcpu *v, unsigned index, uint32_t apic_id)
{
	void *run;

	memset(v, 0, sizeof(*v));
	v->vm = vm;
	v->index = index;
	v->apic_id = apic_id;
	v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)apic_id);
	if (v->fd < 0)
		return -1;
	run = mmap(NULL, (size_t)vm->vcpu_mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (run == MAP_FAILED) {
		close(v->fd);
		v->fd = -1;
		return -1;
	}
	v->run = run;
	return 0;
}

void vcpu_destroy(struct vcpu *v)
{
	if (v->run != NULL)
		munmap(v->run, (size_t)v->vm->vcpu_mmap_size);
	if (v->fd >= 0)
		close(v->fd);
	v->run = NULL;
	v->fd = -1;
}

int vcpu_set_cpuid(struct vcpu *v, struct kvm_cpuid2 *cpuid)
{
	return ioctl(v->fd, KVM_SET_CPUID2, cpuid);
}

static void lapic_set_delivery_mode(struct kvm_lapic_state *s, unsigned reg, uint32_t mode)
{
	uint32_t val;

	memcpy(&val, &s->regs[reg], sizeof(val));
	val = (val & ~0x700u) | (mode << 8);
	memcpy(&s->regs[reg], &val, sizeof(val));
}

int vcpu_init_lapic(struct vcpu *v)
{
	struct kvm_lapic_state s;

	if (ioctl(v->fd, KVM_GET_LAPIC, &s) < 0)
		return -1;
	lapic_set_delivery_mode(&s, APIC_LVT_LINT0, APIC_MODE_EXTINT);
	lapic_set_delivery_mode(&s, APIC_LVT_LINT1, APIC_MODE_NMI);
	return ioctl(v->fd, KVM_SET_LAPIC, &s);
}

/* A flat 4 GiB segment; `code` selects execute/read, else read/write. */
static struct kvm_segment flat_segment(uint16_t selector, bool code, bool long_mode)
{
	struct kvm_segment s = {
	    .base = 0,
	    .limit = 0xffffffff,
	    .selector = selector,
	    .type = code ? 0xb : 0x3, /* accessed execute/read, accessed read/write */
	    .present = 1,
	    .s = 1,
	    .g = 1,
	};

	s.l = code && long_mode;
	s.db = !s.l;
	return s;
}

static int vcpu_set_sregs(struct vcpu *v, const struct boot_cpu_state *st)
{
	bool lm = st->mode == BOOT_LONG64;
	struct kvm_sregs sr;

	if (ioctl(v->fd, KVM_GET_SREGS, &sr) < 0)
		return -1;
	sr.cs = flat_segment(st->cs, true, lm);
	sr.ds = sr.es = sr.fs = sr.gs = sr.ss = flat_segment(st->ds, false, lm);
	sr.gdt.base = st->gdt_base;
	sr.gdt.limit = st->gdt_limit;
	sr.idt.base = 0;
	sr.idt.limit = 0;
	if (st->tr != 0) {
		sr.tr.selector = st->tr;
		sr.tr.base = 0;
		sr.tr.limit = 0x67;
		sr.tr.type = 0xb; /* busy 32/64-bit TSS */
		sr.tr.present = 1;
		sr.tr.s = 0;
	}
	sr.cr0 = (sr.cr0 & ~(X86_CR0_PG)) | X86_CR0_PE | X86_CR0_ET;
	sr.cr4 = 0;
	sr.efer = 0;
	if (lm) {
		sr.cr0 |= X86_CR0_PG;
		sr.cr3 = st->cr3;
		sr.cr4 = X86_CR4_PAE;
		sr.efer = X86_EFER_LME | X86_EFER_LMA;
	}
	return ioctl(v->fd, KVM_SET_SREGS, &sr);
}

static int vcpu_set_regs(struct vcpu *v, const struct boot_cpu_state *st)
{
	struct kvm_regs r = {
	    .rflags = 0x2, /* bit 1 is reserved-one; interrupts off */
	    .rip = st->rip,
	    .rsp = st->rsp,
	    .rsi = st->rsi,
	    .rbx = st->rbx,
	};

	return ioctl(v->fd, KVM_SET_REGS, &r);
}

/* x87 and SSE control words as after FNINIT / reset. */
static int vcpu_set_fpu(struct vcpu *v)
{
	struct kvm_fpu f = {.fcw = 0x37f, .mxcsr = 0x1f80};

	return ioctl(v->fd, KVM_SET_FPU, &f);
}

int vcpu_set_boot_state(struct vcpu *v, const struct boot_cpu_state *s)
{
	if (s->mode == BOOT_RESET)
		return 0;
	if (vcpu_set_sregs(v, s) < 0 || vcpu_set_regs(v, s) < 0 || vcpu_set_fpu(v) < 0)
		return -1;
	return 0;
}

static enum vcpu_exit_kind exit_kind(const struct vcpu *v, int rc, int err)
{
	if (rc < 0)
		return err == EINTR || err == EAGAIN ? VCPU_EXIT_SIGNAL : VCPU_EXIT_OTHER;
	switch (v->run->exit_reason) {
	case KVM_EXIT_IO:
		return VCPU_EXIT_IO;
	case KVM_EXIT_MMIO:
		return VCPU_EXIT_MMIO;
	case KVM_EXIT_INTR:
		return VCPU_EXIT_SIGNAL;
	case KVM_EXIT_HLT:
		return VCPU_EXIT_HLT;
	case KVM_EXIT_SYSTEM_EVENT:
		return VCPU_EXIT_SYSTEM_EVENT;
	default:
		return VCPU_EXIT_OTHER;
	}
}

int vcpu_run(struct vcpu *v)
{
	int rc = ioctl(v->fd, KVM_RUN, 0);
	int err = errno;
	enum vcpu_exit_kind kind = exit_kind(v, rc, err);
	uint64_t *c = &v->exits[kind];

	/* Only this vCPU's thread writes: no locked add. */
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	/* Any KVM_RUN completes the previous exit's instruction first. */
	v->io_pending = rc == 0 && (kind == VCPU_EXIT_IO || kind == VCPU_EXIT_MMIO);
	errno = err;
	return rc;
}

void vcpu_kick(struct vcpu *v)
{
	__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&v->kickable, __ATOMIC_SEQ_CST))
		pthread_kill(v->self, SIG_VCPU_KICK);
}

int vcpu_block_kick(struct vcpu *v)
{
	/* struct kvm_signal_mask and the kernel's sigset_t (64 signals) */
	uint32_t buf[(sizeof(struct kvm_signal_mask) + 8 + 3) / 4];
	struct kvm_signal_mask *km = (struct kvm_signal_mask *)buf;
	sigset_t kick, inside;

	sigemptyset(&kick);
	sigaddset(&kick, SIG_VCPU_KICK);
	if (pthread_sigmask(SIG_BLOCK, &kick, &inside) != 0)
		return -1;
	sigdelset(&inside, SIG_VCPU_KICK);
	km->len = 8;
	memcpy(km->sigset, &inside, 8);
	return ioctl(v->fd, KVM_SET_SIGNAL_MASK, km);
}

void vcpu_mark_kickable(struct vcpu *v)
{
	v->self = pthread_self();
	__atomic_store_n(&v->kickable, true, __ATOMIC_SEQ_CST);
}

void vcpu_eat_kicks(void)
{
	const struct timespec now = {0, 0};
	sigset_t kick;

	sigemptyset(&kick);
	sigaddset(&kick, SIG_VCPU_KICK);
	for (int i = 0; i < 64 && sigtimedwait(&kick, NULL, &now) == SIG_VCPU_KICK; i++)
		;
}

static void kick_handler(int sig)
{
	(void)sig; /* only here to interrupt KVM_RUN with EINTR */
}

int vcpu_kick_signal(void)
{
	return SIG_VCPU_KICK;
}

int vcpu_kick_init(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kick_handler;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIG_VCPU_KICK, &sa, NULL);
}
