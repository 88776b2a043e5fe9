#include "vmm/topology.h"

#include <stdint.h>
#include <stdio.h>

#include "lib/config.h"
#include "lib/parse.h"

static int get_count(const char *key, unsigned def, unsigned *out, char *err, size_t errlen)
{
	const char *v = config_get(key);
	uint64_t n;

	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (parse_uint(v, 1, KHYVE_MAX_VCPUS, &n) < 0) {
		snprintf(err, errlen, "invalid %s '%s' (want 1-%d)", key, v, KHYVE_MAX_VCPUS);
		return -1;
	}
	*out = (unsigned)n;
	return 0;
}

int topology_from_config(struct cpu_topology *t, char *err, size_t errlen)
{
	bool explicit_cpus = config_get("cpus") != NULL;
	unsigned cpus;
	uint64_t product;

	if (get_count("cpus", 1, &cpus, err, errlen) < 0 ||
	    get_count("cores", 1, &t->cores, err, errlen) < 0 ||
	    get_count("threads", 1, &t->threads, err, errlen) < 0 ||
	    get_count("sockets", cpus, &t->sockets, err, errlen) < 0)
		return -1;
	product = (uint64_t)t->sockets * t->cores * t->threads;
	if (product > KHYVE_MAX_VCPUS) {
		snprintf(err, errlen, "topology gives %llu vCPUs; the limit is %d",
		         (unsigned long long)product, KHYVE_MAX_VCPUS);
		return -1;
	}
	if (explicit_cpus && product != cpus) {
		snprintf(err, errlen,
		         "topology (%u sockets, %u cores, %u threads) does not match %u vCPUs",
		         t->sockets, t->cores, t->threads, cpus);
		return -1;
	}
	return 0;
}
