/*
 * Per-thread seccomp filters (see sandbox.h).  Each role's list is built
 * once with libseccomp, exported as a BPF program and installed by the
 * thread itself with seccomp(2), so a thread that starts late (a virtio
 * queue thread the guest's DRIVER_OK starts from a vCPU thread) needs no
 * libseccomp call, only the raw system call.
 *
 * Filters stack: a thread started by a vCPU thread keeps the vCPU filter
 * and adds its own, so a call passes only when both allow it.  The vCPU
 * list therefore also carries what its children need until they install
 * theirs (thread start: clone, set_robust_list, rseq, seccomp) and what the
 * devices do when the guest starts a queue (io_uring rings, eventfds).
 * Firecracker creates its rings before its filters; khyve's devices start
 * queues at the guest's request, which is why io_uring_setup is here.  The
 * rings blockif makes are restricted to the opcodes it uses
 * (IORING_REGISTER_RESTRICTIONS, backend/blockif.c).
 *
 * What glibc answers lazily from files (localtime()'s /etc/localtime,
 * sysconf()'s /sys) must be asked before sandbox_arm(): no role may open
 * files.  sandbox_setup() and blockif_open() do so.
 */
#include "lib/sandbox.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/kvm.h>
#include <linux/vfio.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <termios.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <linux/fs.h>
#include <linux/if_tun.h>

#include "lib/config.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANDBOX_SANITIZERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANDBOX_SANITIZERS 1
#endif
#endif

#define END      -1 /* ends a list of system call numbers */
#define MAX_NR   512
#define NAME_LEN 24

/* ---- the lists ---- */

// clang-format off

/* Every thread: locks, its own exit, memory (malloc's arenas), logging. */
static const int base_calls[] = {
	SCMP_SYS(futex), SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(close), SCMP_SYS(madvise),
	SCMP_SYS(munmap), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(sched_yield),
	SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep), SCMP_SYS(clock_gettime), SCMP_SYS(gettid),
	SCMP_SYS(getpid), SCMP_SYS(exit), SCMP_SYS(restart_syscall),
	/* malloc: the main arena (any thread may use it), realloc of large
	 * blocks, the arena limit glibc sizes from the CPUs it may run on. */
	SCMP_SYS(brk), SCMP_SYS(mremap), SCMP_SYS(sched_getaffinity), END};

/* Starting a thread (the parent) and being started (the child, before it
 * installs its own filter). */
static const int thread_start_calls[] = {
	SCMP_SYS(set_robust_list), SCMP_SYS(rseq), SCMP_SYS(seccomp), END};

/* Synchronous disk I/O and discard (blockif's thread engine, discards). */
static const int disk_calls[] = {
	SCMP_SYS(preadv), SCMP_SYS(pwritev), SCMP_SYS(pread64), SCMP_SYS(pwrite64),
	SCMP_SYS(fsync), SCMP_SYS(fdatasync), SCMP_SYS(fallocate), END};

/* Making an io_uring context (setup, its eventfd, restrictions, enabling);
 * submitting to one is io_uring_enter alone. */
static const int uring_make_calls[] = {
	SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_register), SCMP_SYS(eventfd2), END};
static const int uring_use_calls[] = {SCMP_SYS(io_uring_enter), END};

/* The event loop (signals, console input, tcp= clients, exit requests) and
 * the exit path (joins, pflash msync, pty link removal, terminal restore). */
static const int main_calls[] = {
	SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait), SCMP_SYS(epoll_ctl), SCMP_SYS(poll),
	SCMP_SYS(ppoll), SCMP_SYS(accept4), SCMP_SYS(accept), SCMP_SYS(fcntl), SCMP_SYS(recvfrom),
	SCMP_SYS(sendto), SCMP_SYS(shutdown), SCMP_SYS(setsockopt), SCMP_SYS(writev),
	SCMP_SYS(readv), SCMP_SYS(unlink), SCMP_SYS(unlinkat), SCMP_SYS(readlink),
	SCMP_SYS(exit_group), SCMP_SYS(msync), SCMP_SYS(fsync), SCMP_SYS(timerfd_settime),
	SCMP_SYS(newfstatat), SCMP_SYS(fstat), SCMP_SYS(lseek), SCMP_SYS(rt_sigaction), END};

/* Exit handlers: UART output (stdio, tcp=), pflash msync, virtio-rnd run
 * inline, timers (RTC, NVMe), kicks (taking a pending kick signal after
 * KVM_RUN's EINTR: vcpu_eat_kicks), a migration's throttle (the thread's
 * own POSIX timer, and sleeping in sigtimedwait for a kick); plus
 * io_uring, disk I/O and thread start through the flags (role_table). */
static const int vcpu_calls[] = {
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(timerfd_create), SCMP_SYS(timerfd_settime),
	SCMP_SYS(msync), SCMP_SYS(getrandom), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(sendto),
	SCMP_SYS(rt_sigtimedwait), SCMP_SYS(timer_create), SCMP_SYS(timer_settime),
	SCMP_SYS(timer_delete),
	/* the UART's FIFO has room again: console input is watched again */
	SCMP_SYS(epoll_ctl), END};

/* virtio-rnd (getrandom) and virtio-net transmit (writev to the tap). */
static const int worker_calls[] = {
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(getrandom), SCMP_SYS(readv), SCMP_SYS(writev),
	END};

static const int blk_queue_calls[] = {SCMP_SYS(poll), SCMP_SYS(ppoll), END};

static const int nvme_sq_calls[] = {
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(timerfd_settime), END};

static const int net_rx_calls[] = {
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(readv), SCMP_SYS(writev), END};

/* libvncserver: select(), its sockets, new clients. */
static const int vnc_calls[] = {
	SCMP_SYS(select), SCMP_SYS(pselect6), SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(accept4),
	SCMP_SYS(accept), SCMP_SYS(recvfrom), SCMP_SYS(sendto), SCMP_SYS(recvmsg),
	SCMP_SYS(sendmsg), SCMP_SYS(writev), SCMP_SYS(readv), SCMP_SYS(setsockopt),
	SCMP_SYS(getsockopt), SCMP_SYS(getpeername), SCMP_SYS(getsockname), SCMP_SYS(fcntl),
	SCMP_SYS(shutdown), END};

/* The API (libmicrohttpd driven by poll): its epoll set, clients on the
 * unix socket; pause kicks vCPUs (KICKS_VCPUS), power-button and
 * send-keys raise interrupts, screenshot reads fbuf's dirty log, counters
 * read KVM's per-vCPU statistics (pread of fds opened at set-up);
 * vm.media-insert receives the image's fd (recvmsg, SCM_RIGHTS) and the
 * drive's change() looks at it (fstat, lseek); vm.checkpoint/vm.suspend
 * write the state file they are passed the same way and sync it, the
 * disks (fdatasync) and the variable store (msync); a state file's or
 * migration stream's chunks go out as their length and payload in one
 * writev. */
static const int api_calls[] = {
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait),
	SCMP_SYS(epoll_ctl), SCMP_SYS(accept4), SCMP_SYS(accept), SCMP_SYS(recvfrom),
	SCMP_SYS(sendto), SCMP_SYS(sendmsg), SCMP_SYS(shutdown), SCMP_SYS(setsockopt), SCMP_SYS(fcntl),
	SCMP_SYS(pread64), SCMP_SYS(recvmsg), SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(lseek),
	SCMP_SYS(fsync), SCMP_SYS(fdatasync), SCMP_SYS(mmap), SCMP_SYS(msync), SCMP_SYS(writev), END};

/* virtio-console: a port's output goes out through chardev (send with
 * MSG_DONTWAIT; a full socket arms the loop's write watch and flush tick). */
static const int console_calls[] = {
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(sendto), SCMP_SYS(writev),
	SCMP_SYS(epoll_ctl), SCMP_SYS(timerfd_settime), END};

/* virtio-9p (backend/p9fs.c): every file operation is relative to the
 * share's descriptor (openat2 with RESOLVE_BENEATH, *at calls on the
 * directories it opened); nothing is executed, no socket is made. */
static const int p9_calls[] = {
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(openat), SCMP_SYS(openat2),
	SCMP_SYS(newfstatat), SCMP_SYS(fstat), SCMP_SYS(fstatfs), SCMP_SYS(getdents64),
	SCMP_SYS(lseek), SCMP_SYS(pread64), SCMP_SYS(pwrite64), SCMP_SYS(fsync),
	SCMP_SYS(fdatasync), SCMP_SYS(ftruncate), SCMP_SYS(fchmod), SCMP_SYS(fchmodat),
	SCMP_SYS(fchownat), SCMP_SYS(utimensat), SCMP_SYS(mkdirat), SCMP_SYS(unlinkat),
	SCMP_SYS(renameat), SCMP_SYS(renameat2), SCMP_SYS(symlinkat), SCMP_SYS(readlinkat),
	SCMP_SYS(linkat), SCMP_SYS(fcntl), END};

/* The TPM's worker (dev/tpm_crb.c): send and receive on swtpm's socket,
 * poll for its timeout. */
static const int tpm_calls[] = {
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(sendto), SCMP_SYS(recvfrom), END};

#ifdef SANDBOX_SANITIZERS
/* ASan/UBSan/LSan builds (detected at compile time): the runtime's own
 * bookkeeping, its reports (/proc/self/maps, symbolising) and, in the
 * main thread at exit, LeakSanitizer's tracer (clone without CLONE_THREAD,
 * open, ptrace, wait4).  Never in a release build. */
static const int san_calls[] = {
	SCMP_SYS(open), SCMP_SYS(openat), SCMP_SYS(readlink), SCMP_SYS(newfstatat), SCMP_SYS(fstat),
	SCMP_SYS(getdents), SCMP_SYS(getdents64), SCMP_SYS(lseek), SCMP_SYS(sigaltstack),
	SCMP_SYS(prctl), SCMP_SYS(getrlimit), SCMP_SYS(prlimit64), SCMP_SYS(uname),
	SCMP_SYS(rt_sigaction), SCMP_SYS(exit_group), SCMP_SYS(tgkill), SCMP_SYS(sched_getaffinity),
	SCMP_SYS(ptrace), SCMP_SYS(wait4), SCMP_SYS(clone), SCMP_SYS(getppid), SCMP_SYS(mremap),
	SCMP_SYS(pipe2), SCMP_SYS(dup2), SCMP_SYS(kill), END};
#endif

/* KVM vCPU and VM ioctls the exit handlers and devices use at run time
 * (the VM's set-up ones, KVM_CREATE_*, KVM_SET_CPUID2..., are done). */
static const unsigned long kvm_run_ioctls[] = {
	KVM_RUN, KVM_GET_REGS, KVM_SET_REGS, KVM_GET_SREGS, KVM_SET_SREGS, KVM_GET_LAPIC,
	KVM_IRQ_LINE, KVM_SIGNAL_MSI, KVM_IRQFD, KVM_IOEVENTFD, KVM_SET_GSI_ROUTING,
	KVM_GET_DIRTY_LOG, KVM_SET_USER_MEMORY_REGION, 0};

/* Disk: discard and zeroing of block devices (blockif's do_discard). */
static const unsigned long disk_ioctls[] = {BLKDISCARD, BLKZEROOUT, 0};

/* The terminal (console back ends, the exit path's restore). */
static const unsigned long tty_ioctls[] = {
	TCGETS, TCSETS, TCSETSW, TCSETSF, TIOCGWINSZ, FIONREAD, FIONBIO, 0};

/* A passed-through device's interrupts follow the guest's MSI-X enable
 * (a vCPU's config write) and go when the host takes it back (main). */
static const unsigned long vfio_ioctls[] = {VFIO_DEVICE_SET_IRQS, 0};

/* A virtio-net device's offloads follow the guest's features (DRIVER_OK). */
static const unsigned long tap_ioctls[] = {TUNSETOFFLOAD, 0};

/* Input from VNC clients raises the PS/2 IRQ or the xHCI's MSI. */
static const unsigned long vnc_ioctls[] = {
	KVM_GET_DIRTY_LOG, KVM_IRQ_LINE, KVM_SIGNAL_MSI, FIONREAD, FIONBIO, 0};

/* What the API's endpoints do to devices (see api_calls); TCGETS is
 * lib/log.c's isatty(stderr) when the thread logs a line. */
static const unsigned long api_ioctls[] = {
	KVM_IRQ_LINE, KVM_SIGNAL_MSI, KVM_GET_DIRTY_LOG, FIONREAD, FIONBIO, BLKGETSIZE64, TCGETS, 0};

/* A checkpoint reads the paused vCPUs' and the VM's state
 * (vmm/vmstate.c); it sets none. */
static const unsigned long kvm_save_ioctls[] = {
	KVM_GET_REGS, KVM_GET_SREGS, KVM_GET_SREGS2, KVM_GET_XSAVE, KVM_GET_XSAVE2, KVM_GET_XCRS,
	KVM_GET_DEBUGREGS, KVM_GET_LAPIC, KVM_GET_MSRS, KVM_GET_MP_STATE, KVM_GET_VCPU_EVENTS,
	KVM_GET_CPUID2, KVM_GET_TSC_KHZ, KVM_GET_CLOCK, KVM_GET_IRQCHIP, KVM_GET_PIT2,
	KVM_CHECK_EXTENSION, 0};

/* A live migration from the API thread (run/migrate.c) switches KVM's
 * dirty log on the RAM slots on and off and reads it. */
static const unsigned long kvm_migrate_ioctls[] = {
	KVM_SET_USER_MEMORY_REGION, KVM_GET_DIRTY_LOG, 0};

// clang-format on

enum role_flags {
	MAY_START_THREADS = 1 << 0, /* clone (threads only) and what a new thread does */
	MAKES_RINGS = 1 << 1,       /* io_uring set-up, for queues the guest starts */
	DOES_DISK = 1 << 2,
	KICKS_VCPUS = 1 << 3, /* tgkill, to this process only (vcpu_kick) */
	USES_RINGS = 1 << 4,
	/* open and openat fail with EACCES instead of killing: glibc's free()
	 * reads /proc/sys/vm/overcommit_memory the first time it trims a
	 * thread arena's heap (the API's PNG buffers do) and copes with a
	 * failure by not trimming. */
	OPEN_FAILS = 1 << 5,
};

struct role_desc {
	const char *name;
	const int *calls;
	const unsigned long *ioctls[5];
	unsigned flags;
};

static const struct role_desc role_table[SANDBOX_NROLES] = {
    [SANDBOX_MAIN] = {"main",
                      main_calls,
                      {kvm_run_ioctls, tty_ioctls, vfio_ioctls},
                      KICKS_VCPUS | USES_RINGS | DOES_DISK},
    [SANDBOX_VCPU] = {"vcpu",
                      vcpu_calls,
                      {kvm_run_ioctls, disk_ioctls, tty_ioctls, tap_ioctls, vfio_ioctls},
                      KICKS_VCPUS | MAY_START_THREADS | MAKES_RINGS | USES_RINGS | DOES_DISK},
    [SANDBOX_VIRTIO_WORKER] = {"virtio-worker", worker_calls, {kvm_run_ioctls}, 0},
    [SANDBOX_BLK_QUEUE] = {"blk-queue",
                           blk_queue_calls,
                           {kvm_run_ioctls, disk_ioctls},
                           MAY_START_THREADS | MAKES_RINGS | USES_RINGS | DOES_DISK},
    [SANDBOX_NVME_SQ] = {"nvme-sq",
                         nvme_sq_calls,
                         {kvm_run_ioctls, disk_ioctls},
                         USES_RINGS | DOES_DISK},
    [SANDBOX_BLK_POOL] = {"blk-pool", NULL, {disk_ioctls}, DOES_DISK},
    [SANDBOX_NET_RX] = {"net-rx", net_rx_calls, {kvm_run_ioctls}, 0},
    [SANDBOX_VNC] = {"vnc", vnc_calls, {vnc_ioctls}, 0},
    [SANDBOX_API] = {"api",
                     api_calls,
                     {api_ioctls, kvm_save_ioctls, kvm_migrate_ioctls},
                     KICKS_VCPUS | OPEN_FAILS},
    [SANDBOX_CONSOLE] = {"console", console_calls, {kvm_run_ioctls}, 0},
    [SANDBOX_P9] = {"9p", p9_calls, {kvm_run_ioctls}, 0},
    [SANDBOX_TPM] = {"tpm", tpm_calls, {NULL}, 0},
};

/* ---- state ---- */

static bool enabled, log_mode, armed;
static int selftest_role = -1;
static struct sock_fprog programs[SANDBOX_NROLES];
static unsigned role_sizes[SANDBOX_NROLES];
static char call_names[MAX_NR][NAME_LEN]; /* for the SIGSYS handler */
static bool stderr_tty;
static __thread bool thread_filtered;
static __thread int thread_role = -1;

const char *sandbox_role_name(enum sandbox_role role)
{
	return (unsigned)role < SANDBOX_NROLES ? role_table[role].name : "?";
}

unsigned sandbox_role_size(enum sandbox_role role)
{
	return (unsigned)role < SANDBOX_NROLES ? role_sizes[role] : 0;
}

bool sandbox_enabled(void)
{
	return enabled;
}

/* ---- building ---- */

static int allow(scmp_filter_ctx ctx, int nr)
{
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);

	/* -EEXIST: already in the list through another group. */
	return rc == -EEXIST ? 0 : rc;
}

static int allow_list(scmp_filter_ctx ctx, const int *calls)
{
	for (; calls != NULL && *calls != END; calls++)
		if (allow(ctx, *calls) < 0)
			return -1;
	return 0;
}

/* libseccomp's SCMP_An() macros leave datum_b out, which clang's
 * -Wmissing-field-initializers rejects. */
static struct scmp_arg_cmp arg_cmp(unsigned arg, enum scmp_compare op, scmp_datum_t a,
                                   scmp_datum_t b)
{
	return (struct scmp_arg_cmp){.arg = arg, .op = op, .datum_a = a, .datum_b = b};
}

static int allow_ioctls(scmp_filter_ctx ctx, const unsigned long *cmds)
{
	for (; cmds != NULL && *cmds != 0; cmds++) {
		int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
		                          arg_cmp(1, SCMP_CMP_EQ, (scmp_datum_t)*cmds, 0));
		if (rc < 0 && rc != -EEXIST)
			return -1;
	}
	return 0;
}

/* mmap and mprotect without PROT_EXEC: nothing khyve maps at run time is
 * code.  clone3 fails with ENOSYS (its flags sit in memory a filter cannot
 * read), so glibc falls back to clone, whose flags must name a thread. */
static int add_memory_and_clone(scmp_filter_ctx ctx, unsigned flags)
{
	if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
	                     arg_cmp(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
	                     arg_cmp(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) < 0)
		return -1;
#ifdef SANDBOX_SANITIZERS
	(void)flags; /* clone is in san_calls, for LeakSanitizer's tracer */
#else
	if ((flags & MAY_START_THREADS) &&
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
	                     arg_cmp(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD)) < 0)
		return -1;
#endif
	return 0;
}

static int add_role_rules(scmp_filter_ctx ctx, const struct role_desc *r)
{
	if (allow_list(ctx, base_calls) < 0 || allow_list(ctx, r->calls) < 0 ||
	    add_memory_and_clone(ctx, r->flags) < 0)
		return -1;
	if ((r->flags & MAY_START_THREADS) && allow_list(ctx, thread_start_calls) < 0)
		return -1;
	if (r->flags & KICKS_VCPUS) {
		int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
		                          arg_cmp(0, SCMP_CMP_EQ, (scmp_datum_t)getpid(), 0));
		if (rc < 0 && rc != -EEXIST)
			return -1;
	}
	if ((r->flags & MAKES_RINGS) && allow_list(ctx, uring_make_calls) < 0)
		return -1;
	if ((r->flags & USES_RINGS) && allow_list(ctx, uring_use_calls) < 0)
		return -1;
	if ((r->flags & DOES_DISK) && allow_list(ctx, disk_calls) < 0)
		return -1;
#ifdef SANDBOX_SANITIZERS
	if (allow_list(ctx, san_calls) < 0)
		return -1;
#else
	if ((r->flags & OPEN_FAILS) &&
	    (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(open), 0) < 0 ||
	     seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 0) < 0))
		return -1;
#endif
	for (size_t i = 0; i < sizeof(r->ioctls) / sizeof(r->ioctls[0]); i++)
		if (allow_ioctls(ctx, r->ioctls[i]) < 0)
			return -1;
	return 0;
}

/* How many distinct system calls the role's lists name (ioctl counts once). */
static unsigned count_calls(const struct role_desc *r)
{
	static const int extra[] = {SCMP_SYS(mmap), SCMP_SYS(mprotect), SCMP_SYS(ioctl), END};
	const int *groups[] = {base_calls,
	                       r->calls,
	                       extra,
	                       (r->flags & MAY_START_THREADS) ? thread_start_calls : NULL,
	                       (r->flags & MAKES_RINGS) ? uring_make_calls : NULL,
	                       (r->flags & USES_RINGS) ? uring_use_calls : NULL,
	                       (r->flags & DOES_DISK) ? disk_calls : NULL};
	bool seen[MAX_NR] = {false};
	unsigned n = ((r->flags & MAY_START_THREADS) ? 1 : 0) + /* clone */
	             ((r->flags & KICKS_VCPUS) ? 1 : 0);        /* tgkill */

	for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
		for (const int *c = groups[g]; c != NULL && *c != END; c++)
			if (*c >= 0 && *c < MAX_NR && !seen[*c]) {
				seen[*c] = true;
				n++;
			}
	return n;
}

/* libseccomp's program as BPF in memory (seccomp_export_bpf writes to an
 * fd; 2.5 has no in-memory export). */
static int export_program(scmp_filter_ctx ctx, struct sock_fprog *out)
{
	int fd = memfd_create("khyve-seccomp", MFD_CLOEXEC);
	off_t size;
	void *buf = NULL;

	if (fd < 0)
		return -1;
	if (seccomp_export_bpf(ctx, fd) < 0 || (size = lseek(fd, 0, SEEK_END)) <= 0 ||
	    size % (off_t)sizeof(struct sock_filter) != 0 || (buf = malloc((size_t)size)) == NULL ||
	    pread(fd, buf, (size_t)size, 0) != size) {
		free(buf);
		close(fd);
		return -1;
	}
	close(fd);
	out->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
	out->filter = buf;
	return 0;
}

static int build_role(enum sandbox_role role)
{
	scmp_filter_ctx ctx = seccomp_init(log_mode ? SCMP_ACT_TRAP : SCMP_ACT_KILL_PROCESS);
	int rc = -1;

	if (ctx == NULL)
		return -1;
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) == 0 &&
	    add_role_rules(ctx, &role_table[role]) == 0 &&
	    export_program(ctx, &programs[role]) == 0)
		rc = 0;
	seccomp_release(ctx);
	role_sizes[role] = count_calls(&role_table[role]);
	return rc;
}

/* ---- log mode ---- */

static size_t append(char *buf, size_t at, size_t cap, const char *s)
{
	while (*s != '\0' && at + 1 < cap)
		buf[at++] = *s++;
	return at;
}

/*
 * SIGSYS from a filter in log mode.  Only async-signal-safe work: the
 * names were resolved at set-up, the line goes out with one write(2).  The
 * thread then goes on with the call failing (EPERM in %rax): log mode is
 * for finding every missing call in one run, so it reports and continues
 * rather than exiting; what the denied call was for fails as any other
 * EPERM would.
 */
static void on_sigsys(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	int nr = si->si_syscall;
	char num[16], line[160];
	size_t n = 0, k = sizeof(num);
	int saved = errno;

	(void)sig;
	num[--k] = '\0';
	for (unsigned v = (unsigned)nr; k > 0;) {
		num[--k] = (char)('0' + v % 10);
		v /= 10;
		if (v == 0)
			break;
	}
	n = append(line, n, sizeof(line), "khyve: sandbox: the ");
	n = append(line, n, sizeof(line), thread_role >= 0 ? role_table[thread_role].name : "?");
	n = append(line, n, sizeof(line), " thread called the forbidden system call ");
	n = append(line, n, sizeof(line),
	           nr >= 0 && nr < MAX_NR && call_names[nr][0] ? call_names[nr] : "?");
	n = append(line, n, sizeof(line), " (");
	n = append(line, n, sizeof(line), num + k);
	if (nr == SCMP_SYS(ioctl)) {
		char hex[24] = " request 0x";
		unsigned long req = (unsigned long)uc->uc_mcontext.gregs[REG_RSI];

		for (int i = 0; i < 8; i++)
			hex[11 + i] = "0123456789abcdef"[(req >> (28 - 4 * i)) & 0xf];
		n = append(line, n, sizeof(line), hex);
	}
	n = append(line, n, sizeof(line), stderr_tty ? ")\r\n" : ")\n");
	if (write(STDERR_FILENO, line, n) < 0) {
		/* nowhere else to report it */
	}
	uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
	errno = saved;
}

static int setup_log_mode(void)
{
	struct sigaction sa;

	for (int nr = 0; nr < MAX_NR; nr++) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);

		if (name != NULL) {
			snprintf(call_names[nr], NAME_LEN, "%s", name);
			free(name);
		}
	}
	stderr_tty = isatty(STDERR_FILENO);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGSYS, &sa, NULL);
}

/* ---- set-up and installation ---- */

static int parse_selftest(char *err, size_t errlen)
{
	const char *v = config_get("sandbox.selftest");

	if (v == NULL)
		return 0;
	for (int r = 0; r < SANDBOX_NROLES; r++)
		if (strcmp(v, role_table[r].name) == 0) {
			selftest_role = r;
			return 0;
		}
	snprintf(err, errlen, "sandbox.selftest: unknown thread role '%.40s'", v);
	return -1;
}

int sandbox_setup(char *err, size_t errlen)
{
	if (config_get_bool("sandbox.enable", true, &enabled) < 0 ||
	    config_get_bool("sandbox.log", false, &log_mode) < 0) {
		snprintf(err, errlen, "sandbox, sandbox.log: expected on or off");
		return -1;
	}
	if (!enabled)
		return 0;
	/* The RTC's localtime_r() and mktime() read /etc/localtime: now, while
	 * files may still be opened.  Without TZ, glibc's mktime() stats the
	 * file again on every call (a guest setting the clock, as OVMF does);
	 * TZ naming the same file makes it keep what it read.  No thread
	 * runs yet, so setenv() is safe. */
	if (getenv("TZ") == NULL)
		setenv("TZ", ":/etc/localtime", 0);
	tzset();
	if (parse_selftest(err, errlen) < 0)
		return -1;
	if (log_mode && setup_log_mode() < 0) {
		snprintf(err, errlen, "sandbox: cannot catch SIGSYS: %s", strerror(errno));
		return -1;
	}
	for (int r = 0; r < SANDBOX_NROLES; r++)
		if (build_role((enum sandbox_role)r) < 0) {
			snprintf(err, errlen, "sandbox: cannot build the %s filter (libseccomp)",
			         role_table[r].name);
			return -1;
		}
	return 0;
}

static pthread_mutex_t wakers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	void (*fn)(void *arg);
	void *arg;
} wakers[SANDBOX_MAX_WAKERS];

int sandbox_wake_at_arm(void (*fn)(void *arg), void *arg)
{
	int rc = -1;

	if (!enabled)
		return 0;
	pthread_mutex_lock(&wakers_lock);
	for (int i = 0; i < SANDBOX_MAX_WAKERS && rc < 0; i++)
		if (wakers[i].fn == NULL) {
			wakers[i].fn = fn;
			wakers[i].arg = arg;
			rc = 0;
		}
	pthread_mutex_unlock(&wakers_lock);
	return rc;
}

void sandbox_cancel_wake(void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&wakers_lock);
	for (int i = 0; i < SANDBOX_MAX_WAKERS; i++)
		if (wakers[i].fn == fn && wakers[i].arg == arg)
			wakers[i].fn = NULL;
	pthread_mutex_unlock(&wakers_lock);
}

void sandbox_arm(void)
{
	if (!enabled)
		return;
	__atomic_store_n(&armed, true, __ATOMIC_RELEASE);
	pthread_mutex_lock(&wakers_lock);
	for (int i = 0; i < SANDBOX_MAX_WAKERS; i++)
		if (wakers[i].fn != NULL)
			wakers[i].fn(wakers[i].arg);
	pthread_mutex_unlock(&wakers_lock);
}

static int install(enum sandbox_role role)
{
	if (log_mode) {
		sigset_t sys;

		/* A blocked SIGSYS from a filter kills instead of reaching the handler. */
		sigemptyset(&sys);
		sigaddset(&sys, SIGSYS);
		pthread_sigmask(SIG_UNBLOCK, &sys, NULL);
	}
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &programs[role]) == 0)
		return 0;
	/* Without CAP_SYS_ADMIN a filter needs no_new_privs (inherited, so only
	 * threads that started unfiltered get here). */
	if (errno != EACCES || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &programs[role]);
}

void sandbox_thread_enter(enum sandbox_role role)
{
	if (!enabled || thread_filtered || !__atomic_load_n(&armed, __ATOMIC_ACQUIRE) ||
	    (unsigned)role >= SANDBOX_NROLES)
		return;
	thread_role = (int)role;
	if (install(role) < 0) {
		fprintf(stderr, "khyve: sandbox: cannot install the %s filter: %s\n",
		        role_table[role].name, strerror(errno));
		kill(getpid(), SIGQUIT);
		return;
	}
	thread_filtered = true;
	if (selftest_role == (int)role)
		syscall(SYS_personality, 0xffffffffUL); /* in no list: kill, or log */
}
