/* khyve: one VM per process, bhyve(8)'s command line on Linux/KVM. */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "cmd/cli.h"
#include "core/vmrun.h"
#include "lib/exitcode.h"
#include "lib/log.h"

int main(int argc, char **argv)
{
	struct timespec ts;
	char err[512];
	uint64_t start_ns;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	start_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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
