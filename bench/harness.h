/*
 * What the in-process device harnesses (blk_harness.c, nvme_harness.c)
 * share: their command line, the image size, and the random offsets.
 */
#ifndef KHYVE_BENCH_HARNESS_H
#define KHYVE_BENCH_HARNESS_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NAME FILE read|write QD SECONDS [nocache] */
struct harness_args {
	const char *path;
	bool write;
	unsigned qd;      /* requests kept in flight */
	double secs;      /* measuring time */
	bool nocache;     /* O_DIRECT */
	uint64_t nblocks; /* whole `block_bytes` blocks in the image */
};

/* Parse argv; returns 0, or the exit status for main (2: usage, 1: the
 * image cannot be sized).  `qd_ok` says whether a depth fits the queue. */
static inline int harness_parse(int argc, char **argv, const char *name, uint64_t block_bytes,
                                bool (*qd_ok)(unsigned qd), struct harness_args *a)
{
	FILE *f;

	if (argc < 5) {
		fprintf(stderr, "usage: %s FILE read|write QD SECONDS [nocache]\n", name);
		return 2;
	}
	a->path = argv[1];
	a->write = strcmp(argv[2], "write") == 0;
	a->qd = (unsigned)atoi(argv[3]);
	a->secs = atof(argv[4]);
	a->nocache = argc > 5 && strcmp(argv[5], "nocache") == 0;
	if (a->qd == 0 || !qd_ok(a->qd) || a->secs <= 0)
		return 2;
	f = fopen(a->path, "r");
	if (f == NULL || fseek(f, 0, SEEK_END) < 0) {
		if (f != NULL)
			fclose(f);
		return 1;
	}
	a->nblocks = (uint64_t)ftell(f) / block_bytes;
	fclose(f);
	return 0;
}

/*
 * HARNESS_DRIVER_CPU=N pins the calling (driver) thread to CPU N.  A polling
 * driver spins where a guest's vCPU would sleep in HLT at low depth; left
 * free, it may take the CPU that receives the disk's completion interrupt
 * and push the device's queue thread off it, so every completion becomes a
 * cross-CPU wake-up that neither a VM nor fio pays.  bench/blk-host and
 * bench/nvme-host pick a CPU other than that interrupt's.
 */
static inline void harness_pin_driver(void)
{
	const char *v = getenv("HARNESS_DRIVER_CPU");
	cpu_set_t set;

	if (v == NULL || *v == '\0')
		return;
	CPU_ZERO(&set);
	CPU_SET(atoi(v), &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
		fprintf(stderr, "harness: cannot pin the driver to CPU %s\n", v);
}

/* xorshift64: cheap, and the same offsets in every run. */
static inline uint64_t harness_rnd(void)
{
	static uint64_t state = 88172645463325252ull;

	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return state;
}

#endif
