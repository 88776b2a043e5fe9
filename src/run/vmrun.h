/*
 * Build the VM the config tree describes and run it until the guest
 * powers off, reboots, halts or faults (bhyve: bhyverun.c main()).
 */
#ifndef KHYVE_VMRUN_H
#define KHYVE_VMRUN_H

#include <stdint.h>

/* Returns the process exit status (enum khyve_exit or a pc-testdev status).
 * `start_ns` is CLOCK_MONOTONIC at process start, for the boot probe. */
int vmrun(uint64_t start_ns);

#endif
