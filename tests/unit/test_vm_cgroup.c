/* Unit tests for the guests' cgroup v2 (src/vm/cgroup.h): the limits from
 * memory and priority, the cgroup2 mount found in /proc/self/mountinfo, and
 * a cgroup made and removed on a folder standing in for cgroupfs. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "vm/cgroup.h"

static void test_limits(void **state)
{
	(void)state;
	assert_int_equal(vm_cgroup_memory_max(256ull << 20), (256ull + 32 + 256) << 20);
	assert_true(vm_cgroup_memory_max(UINT64_MAX - 5) == UINT64_MAX);
	/* The kernel's cpu.weight.nice mapping: 0 -> 100, -20 -> 8668, 19 -> 1. */
	assert_int_equal(vm_cgroup_cpu_weight(0), 100);
	assert_int_equal(vm_cgroup_cpu_weight(5), 33);
	assert_int_equal(vm_cgroup_cpu_weight(-20), 8668);
	assert_int_equal(vm_cgroup_cpu_weight(19), 1);
	assert_int_equal(vm_cgroup_cpu_weight(20), 1);
	assert_int_equal(vm_cgroup_cpu_weight(-99), 8668);
}

static void test_root_from_mountinfo(void **state)
{
	char root[4096], want[4096] = "";
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[8192];

	(void)state;
	unsetenv("KHYVE_CGROUP_ROOT");
	assert_non_null(f);
	while (want[0] == '\0' && fgets(line, sizeof(line), f) != NULL) {
		char mp[4096], *sep = strstr(line, " - cgroup2 ");
		if (sep != NULL && sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1)
			snprintf(want, sizeof(want), "%s", mp);
	}
	fclose(f);
	if (want[0] == '\0') {
		assert_int_equal(vm_cgroup_root(root, sizeof(root)), -1);
		return;
	}
	assert_int_equal(vm_cgroup_root(root, sizeof(root)), 0);
	assert_string_equal(root, want);
}

static void test_create_remove(void **state)
{
	char *dir = unit_mkdtemp(), path[4096], line[64];
	struct vm_cgroup cg;
	FILE *f;

	(void)state;
	assert_non_null(dir);
	if (dir == NULL)
		return;
	setenv("KHYVE_CGROUP_ROOT", dir, 1);
	/* No controllers: a cgroup without limits, and notes saying so. */
	vm_cgroup_create("g", 1ull << 30, 0, &cg);
	assert_true(cg.path[0] != '\0');
	assert_int_equal(cg.memory_max, 0);
	assert_non_null(strstr(cg.note, "no memory controller"));
	assert_non_null(strstr(cg.note, "no cpu controller"));
	vm_cgroup_remove(&cg);
	/* Both: limits written, the cgroup gone after remove. */
	snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("cpu memory\n", f);
	fclose(f);
	vm_cgroup_create("g", 1ull << 30, -20, &cg);
	assert_string_equal(cg.note, "");
	assert_int_equal(cg.cpu_weight, 8668);
	snprintf(path, sizeof(path), "%s/khyve/g/cpu.weight", dir);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_string_equal(line, "8668");
	vm_cgroup_describe("g", path, sizeof(path));
	assert_non_null(strstr(path, "/khyve/g (memory.max=1476395008, cpu.weight=8668)"));
	vm_cgroup_remove(&cg);
	snprintf(path, sizeof(path), "%s/khyve/g", dir);
	struct stat st;
	assert_int_equal(stat(path, &st), -1);
	/* Names that would leave ROOT/khyve make no cgroup. */
	vm_cgroup_create("../x", 1ull << 30, 0, &cg);
	assert_string_equal(cg.path, "");
	unsetenv("KHYVE_CGROUP_ROOT");
	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_root_from_mountinfo),
	    cmocka_unit_test(test_create_remove),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
