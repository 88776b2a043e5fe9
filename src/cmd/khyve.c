/* khyve: one VM per process, bhyve(8)'s command line on Linux/KVM. */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "cmd/cli.h"
#include "run/vmrun.h"
#include "lib/exitcode.h"
#include "lib/log.h"
#include "lib/clock.h"

int main(int argc, char **argv)
{
	uint64_t start_ns = monotonic_ns();
	char err[512];

	log_init_from_env();
	switch (cli_parse(argc, argv, stdout, err, sizeof(err))) {
	case CLI_DONE:
		return 0;
	case CLI_ERROR:
		log_err("%s", err);
		return KHYVE_EXIT_ERROR;
	case CLI_RUN:
		break;
	}
	return vmrun(start_ns);
}
