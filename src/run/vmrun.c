#include "run/vmrun.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "boot/acpi.h"
#include "boot/bootrom.h"
#include "boot/e820.h"
#include "boot/firmware.h"
#include "boot/loader.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "core/mevent.h"
#include "core/vcpu_loop.h"
#include "dev/fbuf.h"
#include "dev/lpc.h"
#include "dev/pflash.h"
#include "dev/pm.h"
#include "dev/tpm_crb.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/sandbox.h"
#include "run/api.h"
#include "run/jail.h"
#include "run/migrate.h"
#include "run/snapshot.h"
#include "vmm/topology.h"
#include "vmm/vcpu.h"
#include "vmm/vcpu_stats.h"
#include "vmm/vmstate.h"

#define ERRLEN 512

/*
 * Tell whoever started khyve that the guest runs: `vm`'s supervisor
 * (src/vm/supervisor.c) passes the write end of a pipe as KHYVE_READY_FD
 * and, once a byte arrives, stops waiting for an early failure to report.
 * The supervisor holds the read end for as long as khyve lives.
 */
static void notify_ready(void)
{
	const char *v = getenv("KHYVE_READY_FD");
	char *end;
	long fd;

	if (v == NULL)
		return;
	errno = 0;
	fd = strtol(v, &end, 10);
	if (errno == 0 && end != v && *end == '\0' && fd > STDERR_FILENO && fd < 65536) {
		if (write((int)fd, "R", 1) < 0)
			log_warn("KHYVE_READY_FD=%ld: %s", fd, strerror(errno));
		close((int)fd);
	}
	unsetenv("KHYVE_READY_FD");
}

static void on_exit_request(int fd, uint32_t events, void *arg)
{
	struct machine *m = arg;
	uint64_t v;

	(void)events;
	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("exit eventfd: %s", strerror(errno));
	if (__atomic_load_n(&m->exit_requested, __ATOMIC_SEQ_CST))
		mevent_loop_stop(m->loop);
}

static void on_signal(int fd, uint32_t events, void *arg)
{
	struct machine *m = arg;
	struct signalfd_siginfo si;

	(void)events;
	if (read(fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return;
	if (si.ssi_signo == SIGTERM) {
		/* bhyve: SIGTERM presses the ACPI power button. */
		/* vm stop waits for this line in vm-bhyve.log (src/vm/stopwait.c
		 * DEAF_LINE): keep the wording. */
		if (m->pm == NULL || !pm_power_button(m->pm))
			log_warn("SIGTERM: power button pressed, but the guest is not listening");
		return;
	}
	log_err("terminated by signal %u", si.ssi_signo);
	machine_request_exit(m, KHYVE_EXIT_ERROR);
}

/* The signals the event loop handles; blocked in every thread. */
static void signal_set(sigset_t *s)
{
	sigemptyset(s);
	sigaddset(s, SIGTERM);
	sigaddset(s, SIGINT);
	sigaddset(s, SIGHUP);
	sigaddset(s, SIGQUIT);
}

static int setup_loop(struct machine *m, char *err, size_t errlen)
{
	sigset_t sigs;
	int sfd;

	m->loop = mevent_loop_create();
	m->exit_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	signal_set(&sigs);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (m->loop == NULL || m->exit_fd < 0 || sfd < 0 ||
	    mevent_add(m->loop, m->exit_fd, EPOLLIN, on_exit_request, m) == NULL ||
	    mevent_add(m->loop, sfd, EPOLLIN, on_signal, m) == NULL) {
		snprintf(err, errlen, "cannot set up the event loop: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void on_coalesced_tick(int fd, uint32_t events, void *arg)
{
	uint64_t ticks;

	(void)events;
	if (read(fd, &ticks, sizeof(ticks)) < 0) {
		/* EAGAIN: flush anyway, it is cheap */
	}
	machine_flush_coalesced(arg);
}

/* With queued port writes (machine_coalesce_pio()), flush them every
 * 100 ms too: a write the guest follows with no exit (0xCF9, then HLT)
 * still takes effect. */
static int setup_coalesced_tick(struct machine *m, char *err, size_t errlen)
{
	struct itimerspec its = {{0, 100 * 1000 * 1000}, {0, 100 * 1000 * 1000}};
	int fd;

	if (!machine_coalescing(m))
		return 0;
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (fd < 0 || timerfd_settime(fd, 0, &its, NULL) < 0 ||
	    mevent_add(m->loop, fd, EPOLLIN, on_coalesced_tick, m) == NULL) {
		snprintf(err, errlen, "cannot set up the coalesced-I/O tick: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void fill_acpi_config(struct machine *m, struct acpi_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->ncpus = m->vm.ncpus;
	for (unsigned i = 0; i < m->vm.ncpus && i < ACPI_MAX_CPUS; i++)
		cfg->apic_id[i] = topo_apic_id(&m->vm.topo, i);
	cfg->ecam_base = PCI_ECAM_GPA;
	cfg->ecam_size = PCI_ECAM_SIZE;
	cfg->pci_last_bus = 0; /* functions live on bus 0 only (pci.c create_func) */
	cfg->mmio32_base = PCI_MMIO32_BASE;
	cfg->mmio32_end = PCI_MMIO32_END;
	cfg->io_base = PCI_IO_BASE;
	cfg->io_end = 0xffff;
	pci_mmio64_window(&cfg->mmio64_base, &cfg->mmio64_size);
	cfg->pci_dsdt = pci_write_dsdt;
	cfg->lpc_dsdt = lpc_write_dsdt;
	cfg->legacy_vga = fbuf_legacy_vga();
	cfg->tpm2_control_area = tpm_crb_control_area();
}

/* ACPI tables at ACPI_TABLES_GPA; returns the RSDP's address or 0. */
static uint64_t install_acpi(struct machine *m, char *err, size_t errlen)
{
	uint8_t *dst = gmem_ptr(&m->vm.mem, ACPI_TABLES_GPA, ACPI_TABLES_SIZE, true);
	struct acpi_config *cfg = malloc(sizeof(*cfg));
	size_t used = 0;

	if (dst != NULL && cfg != NULL) {
		fill_acpi_config(m, cfg);
		used = acpi_build(dst, ACPI_TABLES_SIZE, ACPI_TABLES_GPA, cfg);
	}
	free(cfg);
	if (used == 0) {
		snprintf(err, errlen,
		         "cannot build ACPI tables (guest memory below 1 MiB missing?)");
		return 0;
	}
	return ACPI_TABLES_GPA;
}

static int boot_linux(struct machine *m, struct boot_cpu_state *cpu, char *err, size_t errlen)
{
	struct linux_boot lb = {
	    .kernel = config_get("linux.kernel"),
	    .initrd = config_get("linux.initrd"),
	    .cmdline = config_get("linux.cmdline"),
	};
	struct e820_map map;
	uint64_t rsdp;

	if (e820_build_default(&map, m->vm.mem.lowmem_size, m->vm.mem.highmem_size) < 0 ||
	    e820_add(&map, PCI_ECAM_GPA, PCI_ECAM_SIZE, E820_RESERVED) < 0) {
		snprintf(err, errlen, "cannot build the e820 map");
		return -1;
	}
	rsdp = install_acpi(m, err, errlen);
	if (rsdp == 0)
		return -1;
	return kernel_load(&m->vm.mem, &lb, &map, rsdp, cpu, err, errlen);
}

/* Boot ROM, plus what fw_cfg tells the firmware (when lpc.fwcfg is on). */
static int boot_rom(struct machine *m, char *err, size_t errlen)
{
	struct acpi_config *cfg;
	int rc;

	if (bootrom_attach(m, err, errlen) < 0)
		return -1;
	cfg = malloc(sizeof(*cfg));
	if (cfg == NULL)
		return -1;
	fill_acpi_config(m, cfg);
	rc = firmware_setup(m, cfg, err, errlen);
	free(cfg);
	return rc;
}

static int setup_boot(struct machine *m, struct boot_cpu_state *cpu, char *err, size_t errlen)
{
	memset(cpu, 0, sizeof(*cpu));
	cpu->mode = BOOT_RESET;
	if (config_get("linux.kernel") != NULL)
		return boot_linux(m, cpu, err, errlen);
	if (bootrom_configured())
		return boot_rom(m, err, errlen);
	snprintf(err, errlen, "nothing to boot");
	return -1;
}

/*
 * khyve -r FILE: the machine is built as for a boot (the same devices,
 * the ROMs mapped, the loaders run); then the state file replaces what
 * the guest sees, RAM included, before any vCPU runs.
 */
static int restore_state(struct machine *m, char *err, size_t errlen)
{
	const char *file = config_get("restore.file"), *from = config_get("restore.migrate");
	char why[ERRLEN - 64] = "";
	int fd, rc;

	if (from != NULL) {
		rc = migrate_receive(m, from, why, sizeof(why));
		if (rc < 0)
			snprintf(err, errlen, "migration on %s: %s", from, why);
		return rc;
	}
	if (file == NULL)
		return 0;
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "state file %s: %s", file, strerror(errno));
		return -1;
	}
	rc = snapshot_restore(m, fd, why, sizeof(why));
	close(fd);
	/* lib/snapfile's lines start with "state file: " already. */
	if (rc < 0)
		snprintf(err, errlen, "state file %s: %s", file,
		         strncmp(why, "state file: ", 12) == 0 ? why + 12 : why);
	else
		log_info("restored the machine from %s", file);
	return rc;
}

/* KSM merges nothing while ksmd is stopped: say so, it is the host's call. */
static void warn_if_ksm_off(void)
{
	FILE *f = fopen("/sys/kernel/mm/ksm/run", "re");
	int run = -1;

	if (f != NULL) {
		if (fscanf(f, "%d", &run) != 1)
			run = -1;
		fclose(f);
	}
	if (run == 0)
		log_warn("memory.merge: KSM is stopped on this host (/sys/kernel/mm/ksm/run is 0): "
		         "nothing is merged until it is 1");
	else if (run < 0)
		log_warn("memory.merge: this host has no KSM (/sys/kernel/mm/ksm/run)");
}

/* memory.merge and memory.hugepages (-o) as VM_RAM_* flags. */
static int ram_flags_from_config(unsigned *flags, char *err, size_t errlen)
{
	static const struct {
		const char *key;
		unsigned flag;
	} keys[] = {{"memory.merge", VM_RAM_MERGEABLE}, {"memory.hugepages", VM_RAM_HUGETLB}};

	*flags = 0;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		bool on = false;

		if (config_get_bool(keys[i].key, false, &on) < 0) {
			snprintf(err, errlen, "%s: want true or false, not '%s'", keys[i].key,
			         config_get(keys[i].key));
			return -1;
		}
		*flags |= on ? keys[i].flag : 0;
	}
	if (*flags & VM_RAM_MERGEABLE)
		warn_if_ksm_off();
	return 0;
}

static int build_machine(struct machine *m, char *err, size_t errlen)
{
	struct cpu_topology topo;
	struct boot_cpu_state cpu;
	bool strict = false;
	uint64_t memsize;
	unsigned ram_flags;
	int stats;

	m->name = config_get("name");
	if (topology_from_config(&topo, err, errlen) < 0)
		return -1;
	if (parse_memsize(config_get("memory.size"), &memsize) < 0) {
		snprintf(err, errlen, "memory.size: '%s' is not a size (want e.g. 512M or 2G)",
		         config_get_default("memory.size", ""));
		return -1;
	}
	if (config_get_bool("x86.strictio", false, &strict) < 0) {
		snprintf(err, errlen, "x86.strictio: want true or false, not '%s'",
		         config_get("x86.strictio"));
		return -1;
	}
	m->strict_io = strict;
	if (ram_flags_from_config(&ram_flags, err, errlen) < 0 ||
	    vm_create_opts(&m->vm, memsize, &topo, ram_flags, err, errlen) < 0)
		return -1;
	iobus_init(&m->pio, "port");
	iobus_init(&m->mmio, "mmio");
	if (setup_loop(m, err, errlen) < 0 || lpc_init_devices(m, err, errlen) < 0 ||
	    pci_init(m, err, errlen) < 0 || setup_coalesced_tick(m, err, errlen) < 0 ||
	    setup_boot(m, &cpu, err, errlen) < 0)
		return -1;
	if (bootrom_register_write_sinks(m) < 0 || vm_create_vcpus(&m->vm, err, errlen) < 0)
		return -1;
	if (vcpu_set_boot_state(m->vm.vcpus[0], &cpu) < 0) {
		snprintf(err, errlen, "cannot set the boot CPU state: %s", strerror(errno));
		return -1;
	}
	/* A checkpoint comes from the sandboxed API thread: probe now. */
	snapshot_prepare();
	if (vm_state_probe(&m->vm, err, errlen) < 0 || migrate_check_options(err, errlen) < 0 ||
	    restore_state(m, err, errlen) < 0)
		return -1;
	/* Their stats fds open now, before the jail and the sandbox. */
	stats = vcpu_stats_register(&m->vm, true);
	if (stats < 0)
		log_warn("no vCPU counters");
	else
		log_debug("vCPU counters: KVM statistics for %d of %u vCPUs", stats, m->vm.ncpus);
	return 0;
}

int vmrun(uint64_t start_ns)
{
	static struct machine m; /* lives until exit: devices keep pointers */
	static struct api api;
	char err[ERRLEN] = "";
	int code;

	m.exit_fd = -1;
	m.start_ns = start_ns;
	/* The jail in two halves: before any thread and file, after all of them;
	 * then the seccomp filters (sandbox_arm), which forbid what the jail does. */
	if (jail_prepare(err, sizeof(err)) < 0 || vcpu_kick_init() < 0 ||
	    sandbox_setup(err, sizeof(err)) < 0 || build_machine(&m, err, sizeof(err)) < 0 ||
	    api_init(&api, &m) < 0 || api_open(&api, err, sizeof(err)) < 0 ||
	    api_start(&api, err, sizeof(err)) < 0 || jail_enter(err, sizeof(err)) < 0) {
		log_err("%s", err[0] ? err : "cannot create the VM");
		api_close(&api);
		return KHYVE_EXIT_ERROR;
	}
	/* Filters go on after every host resource is open (and privileges are
	 * dropped); the vCPUs wait until the main thread has its own. */
	sandbox_arm();
	machine_hold_start(&m);
	if (vcpu_threads_start(&m) < 0) {
		log_err("cannot start vCPU threads");
		machine_request_exit(&m, KHYVE_EXIT_ERROR);
	} else {
		notify_ready();
	}
	sandbox_thread_enter(SANDBOX_MAIN);
	machine_release_start(&m);
	if (mevent_loop_run(m.loop) < 0)
		machine_request_exit(&m, KHYVE_EXIT_ERROR);
	vcpu_threads_join(&m);
	api_close(&api);
	code = __atomic_load_n(&m.exit_code, __ATOMIC_SEQ_CST);
	mevent_loop_free(m.loop);
	pflash_close(m.vars);
	/* No vm_destroy(): device threads (queue threads, blockif's pool,
	 * the receive thread) are not joined and may still touch guest RAM
	 * and the dirty bitmaps; both go with the process, which ends now. */
	return code;
}
