/* Unit tests for the configuration a state file names and its compare
 * (src/run/snapshot.h): sorted text, host-local keys, first difference. */
#include "unit.h"

#include "lib/config.h"
#include "run/snapshot.h"

static int reset(void **state)
{
	(void)state;
	config_reset();
	return 0;
}

static void test_text_is_sorted_without_restore_file(void **state)
{
	char *t;

	(void)state;
	config_set("memory.size", "64M");
	config_set("cpus", "2");
	config_set("restore.file", "/tmp/x.state");
	config_set("lpc.com1.path", "stdio");
	t = snapshot_config_text();
	assert_non_null(t);
	assert_string_equal(t, "cpus=2\nlpc.com1.path=stdio\nmemory.size=64M\n");
	free(t);
}

static void test_equal_and_host_local_keys(void **state)
{
	char err[256] = "";

	(void)state;
	assert_int_equal(snapshot_config_compare("cpus=2\nmemory.size=64M\n",
	                                         "cpus=2\nmemory.size=64M\n", err, sizeof(err)),
	                 0);
	/* A serial back end, the API socket, the name, VNC's listener and
	 * virtio-net's tap may differ; so may their presence. */
	assert_int_equal(snapshot_config_compare(
	                     "api.socket=/a\ncpus=2\nlpc.com1.path=stdio\nname=a\n"
	                     "pci.0.29.0.tcp=127.0.0.1:5900\npci.0.3.0.backend=tap0\n",
	                     "cpus=2\nlpc.com1.path=/dev/null\nname=b\npci.0.3.0.backend=tap1\n"
	                     "sandbox.enable=false\n",
	                     err, sizeof(err)),
	                 0);
	/* Unsorted input (another tool's) compares the same. */
	assert_int_equal(snapshot_config_compare("memory.size=64M\ncpus=2\n",
	                                         "cpus=2\nmemory.size=64M\n", err, sizeof(err)),
	                 0);
}

static void test_first_difference_is_named(void **state)
{
	char err[256] = "";

	(void)state;
	assert_int_equal(snapshot_config_compare("cpus=2\nmemory.size=512M\n",
	                                         "cpus=2\nmemory.size=1G\n", err, sizeof(err)),
	                 -1);
	assert_string_equal(err, "the state file was made with memory.size=512M, this khyve has "
	                         "memory.size=1G");
	assert_int_equal(snapshot_config_compare(
	                     "cpus=2\n", "cpus=2\npci.0.3.0.device=virtio-blk\n", err, sizeof(err)),
	                 -1);
	assert_string_equal(err, "this khyve has pci.0.3.0.device=virtio-blk, the state file was "
	                         "made without it");
	assert_int_equal(snapshot_config_compare("cpus=2\npci.0.3.0.device=nvme\n", "cpus=2\n", err,
	                                         sizeof(err)),
	                 -1);
	assert_string_equal(err, "the state file was made with pci.0.3.0.device=nvme, this khyve "
	                         "has no pci.0.3.0.device");
	/* A key that is a prefix of another is its own key. */
	assert_int_equal(snapshot_config_compare("cpus=2\n", "cpus=2\ncpusx=1\n", err, sizeof(err)),
	                 -1);
	assert_int_equal(snapshot_config_compare("", "", err, sizeof(err)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_text_is_sorted_without_restore_file, reset),
	    cmocka_unit_test_setup(test_equal_and_host_local_keys, reset),
	    cmocka_unit_test_setup(test_first_difference_is_named, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
