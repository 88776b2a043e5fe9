#include "core/vmrun.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "boot/acpi.h"
#include "boot/bootrom.h"
#include "boot/e820.h"
#include "boot/firmware.h"
#include "boot/linux.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "core/mevent.h"
#include "core/vcpu_loop.h"
#include "dev/lpc.h"
#include "dev/pflash.h"
#include "dev/pm.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "vmm/topology.h"
#include "vmm/vcpu.h"

#define ERRLEN 512

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

static void fill_acpi_config(struct machine *m, struct acpi_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->ncpus = m->vm.ncpus;
	for (unsigned i = 0; i < m->vm.ncpus && i < ACPI_MAX_CPUS; i++)
		cfg->apic_id[i] = topo_apic_id(&m->vm.topo, i);
	for (unsigned i = 0; i < 4; i++) {
		char key[32];

		snprintf(key, sizeof(key), "lpc.com%u.path", i + 1);
		cfg->com[i] = config_get(key) != NULL;
	}
	cfg->ecam_base = PCI_ECAM_GPA;
	cfg->ecam_size = PCI_ECAM_SIZE;
	cfg->mmio32_base = PCI_MMIO32_BASE;
	cfg->mmio32_end = PCI_MMIO32_END;
	cfg->io_base = PCI_IO_BASE;
	cfg->io_end = 0xffff;
	pci_mmio64_window(&cfg->mmio64_base, &cfg->mmio64_size);
	cfg->pci_dsdt = pci_write_dsdt;
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
	return linux_load(&m->vm.mem, &lb, &map, rsdp, cpu, err, errlen);
}

/* Where the variable store's read-only window is (read-array mode). */
static struct vars_window {
	struct machine *m;
	int slot;
	uint64_t gpa;
} vars_window;

static void vars_array_mode(void *arg, bool on)
{
	struct vars_window *w = arg;

	if (vm_rom_window_set(&w->m->vm, w->slot, w->gpa, pflash_size(w->m->vars),
			      pflash_data(w->m->vars), on) < 0)
		log_warn("variable store: cannot switch its read window %s", on ? "on" : "off");
}

/* The VARFILE of -l bootrom,ROM,VARFILE: a CFI flash ending where the ROM
 * starts (OVMF's 4 MiB layout: variables at 0xFFC00000, code above).
 * Reads in read-array mode go through a read-only window, without exits. */
static int attach_vars(struct machine *m, uint64_t rom_size, char *err, size_t errlen)
{
	const char *path = config_get("lpc.bootvars");
	uint64_t base;

	if (path == NULL)
		return 0;
	m->vars = pflash_open(path, err, errlen);
	if (m->vars == NULL)
		return -1;
	base = (1ull << 32) - rom_size - pflash_size(m->vars);
	if (machine_register_mmio(m, base, pflash_size(m->vars), pflash_access, m->vars,
				  "bootvars") < 0) {
		snprintf(err, errlen, "no room for the variable store below the boot ROM");
		return -1;
	}
	vars_window = (struct vars_window){m, -1, base};
	vars_window.slot = vm_rom_window_add(&m->vm, base, pflash_size(m->vars), pflash_data(m->vars));
	if (vars_window.slot >= 0)
		pflash_set_array_hook(m->vars, vars_array_mode, &vars_window);
	return 0;
}

/* Boot ROM, plus what fw_cfg tells the firmware (when lpc.fwcfg is on). */
static int boot_rom(struct machine *m, const char *rom, char *err, size_t errlen)
{
	struct acpi_config *cfg;
	uint64_t rom_size;
	int rc;

	if (bootrom_load(&m->vm, rom, &rom_size, err, errlen) < 0 ||
	    attach_vars(m, rom_size, err, errlen) < 0)
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
	const char *rom = config_get("lpc.bootrom");

	memset(cpu, 0, sizeof(*cpu));
	cpu->mode = BOOT_RESET;
	if (config_get("linux.kernel") != NULL)
		return boot_linux(m, cpu, err, errlen);
	if (rom != NULL)
		return boot_rom(m, rom, err, errlen);
	snprintf(err, errlen, "nothing to boot");
	return -1;
}

/* A read-only ROM still sees guest writes as MMIO exits; swallow them. */
static int rom_write_sink(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	(void)arg;
	(void)offset;
	(void)size;
	if (!is_write)
		*val = ~0ull;
	return 0;
}

static int register_rom_sinks(struct machine *m)
{
	for (unsigned i = 0; i < m->vm.mem.nregions; i++) {
		const struct gmem_region *r = &m->vm.mem.region[i];

		if (r->readonly &&
		    machine_register_mmio(m, r->gpa, r->size, rom_write_sink, NULL, "rom") < 0)
			return -1;
	}
	return 0;
}

static int build_machine(struct machine *m, char *err, size_t errlen)
{
	struct cpu_topology topo;
	struct boot_cpu_state cpu;
	bool strict = false;
	uint64_t memsize;

	m->name = config_get("name");
	if (topology_from_config(&topo, err, errlen) < 0 ||
	    parse_memsize(config_get("memory.size"), &memsize) < 0 ||
	    config_get_bool("x86.strictio", false, &strict) < 0) {
		if (err[0] == '\0')
			snprintf(err, errlen, "invalid configuration");
		return -1;
	}
	m->strict_io = strict;
	if (vm_create(&m->vm, memsize, &topo, err, errlen) < 0)
		return -1;
	iobus_init(&m->pio, "port");
	iobus_init(&m->mmio, "mmio");
	if (setup_loop(m, err, errlen) < 0 || lpc_init_devices(m, err, errlen) < 0 ||
	    pci_init(m, err, errlen) < 0 || setup_boot(m, &cpu, err, errlen) < 0)
		return -1;
	if (register_rom_sinks(m) < 0 || vm_create_vcpus(&m->vm, err, errlen) < 0)
		return -1;
	if (vcpu_set_boot_state(m->vm.vcpus[0], &cpu) < 0) {
		snprintf(err, errlen, "cannot set the boot CPU state: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int vmrun(uint64_t start_ns)
{
	static struct machine m; /* lives until exit: devices keep pointers */
	char err[ERRLEN] = "";
	int code;

	m.exit_fd = -1;
	m.start_ns = start_ns;
	if (vcpu_kick_init() < 0 || build_machine(&m, err, sizeof(err)) < 0) {
		log_err("%s", err[0] ? err : "cannot create the VM");
		return KHYVE_EXIT_ERROR;
	}
	if (vcpu_threads_start(&m) < 0) {
		log_err("cannot start vCPU threads");
		machine_request_exit(&m, KHYVE_EXIT_ERROR);
	}
	if (mevent_loop_run(m.loop) < 0)
		machine_request_exit(&m, KHYVE_EXIT_ERROR);
	vcpu_threads_join(&m);
	code = __atomic_load_n(&m.exit_code, __ATOMIC_SEQ_CST);
	mevent_loop_free(m.loop);
	pflash_close(m.vars);
	vm_destroy(&m.vm);
	return code;
}
