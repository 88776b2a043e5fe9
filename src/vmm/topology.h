/* vCPU topology from the config keys cpus, sockets, cores, threads, with
 * bhyve's rules (bhyverun.c calc_topology). */
#ifndef KHYVE_TOPOLOGY_H
#define KHYVE_TOPOLOGY_H

#include <stddef.h>

#include "vmm/cpuid.h"

#define KHYVE_MAX_VCPUS 288

/*
 * Unset cores/threads are 1; unset sockets is cpus; unset cpus is the
 * product.  An explicit cpus must equal sockets*cores*threads.  0, or -1
 * with a one-line reason in `err`.
 */
int topology_from_config(struct cpu_topology *t, char *err, size_t errlen);

#endif
