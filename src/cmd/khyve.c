/* khyve: one VM per process, bhyve(8)'s command line on Linux/KVM. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "cmd/cli.h"
#include "run/vmrun.h"
#include "lib/exitcode.h"
#include "lib/hostkvm.h"
#include "lib/log.h"
#include "lib/clock.h"

/* Say in one line what this host's KVM cannot run (lib/hostkvm.h): no KVM
 * device stops here; on PVM a boot that hangs or stops in KVM's emulator
 * (vcpu_loop.c reports that stop) gets a warning and runs anyway.  0 to go
 * on, or -1 after the message. */
static int check_host_kvm(void)
{
	char what[512], line[768];
	enum host_kvm kind;

	if (host_kvm_probe(&kind) < 0) {
		log_err("KHYVE_HOST_KVM: want hardware, pvm or none");
		return -1;
	}
	if (kind == HOST_KVM_NONE) {
		host_kvm_message(line, sizeof(line), kind, "guests");
		log_err("%s", line);
		return -1;
	}
	if (kind == HOST_KVM_PVM && cli_boot_needs_hardware_kvm(what, sizeof(what))) {
		host_kvm_message(line, sizeof(line), kind, what);
		log_warn("%s", line);
	}
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t start_ns = monotonic_ns();
	char err[512];

	log_init_from_env();
	/* A reader that left (a pipe, a socket) is an error on that write, not
	 * the end of khyve: back ends see EPIPE and drop output. */
	signal(SIGPIPE, SIG_IGN);
	switch (cli_parse(argc, argv, stdout, err, sizeof(err))) {
	case CLI_DONE:
		return 0;
	case CLI_ERROR:
		log_err("%s", err);
		return KHYVE_EXIT_ERROR;
	case CLI_RUN:
		break;
	}
	if (check_host_kvm() < 0)
		return KHYVE_EXIT_ERROR;
	return vmrun(start_ns);
}
