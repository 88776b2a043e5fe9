/* Exit status of khyve, as bhyve(8) defines it. */
#ifndef KHYVE_EXITCODE_H
#define KHYVE_EXITCODE_H

enum khyve_exit {
	KHYVE_EXIT_RESET = 0,       /* guest rebooted */
	KHYVE_EXIT_POWEROFF = 1,    /* guest powered off */
	KHYVE_EXIT_HALT = 2,        /* guest halted */
	KHYVE_EXIT_TRIPLEFAULT = 3, /* guest triple-faulted */
	KHYVE_EXIT_ERROR = 4,       /* an error occurred (bad input, host failure) */
	/* khyve's own, beyond bhyve's: the guest was suspended into a state file
	 * (vm.suspend, khyvectl --suspend) and `khyve -r FILE` resumes it. */
	KHYVE_EXIT_SUSPENDED = 5,
};

#endif
