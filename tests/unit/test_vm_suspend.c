/* Unit tests for the vm tool's suspend and resume helpers (src/vm/suspend.h). */
#include "unit.h"

#include <sys/stat.h>
#include <unistd.h>

#include "vm/rcconf.h"
#include "vm/suspend.h"

static char *dir;
static struct vm_guest g;

static int setup(void **state)
{
	(void)state;
	dir = unit_mkdtemp();
	if (!dir)
		return -1;
	memset(&g, 0, sizeof(g));
	snprintf(g.name, sizeof(g.name), "alpha");
	snprintf(g.dir, sizeof(g.dir), "%s", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unit_rmtree(dir);
	free(dir);
	return 0;
}

static char *joined(const struct argv *a)
{
	return argv_to_shell(a);
}

/* -r FILE goes before the last word, the VM name, as khyve's usage has it. */
static void test_restore_before_name(void **state)
{
	struct argv a = {0};
	char *line;

	(void)state;
	assert_int_equal(vm_argv_add_restore(&a, "/x/alpha.state"), -1);
	assert_int_equal(argv_add(&a, "khyve"), 0);
	assert_int_equal(argv_add(&a, "-m"), 0);
	assert_int_equal(argv_add(&a, "256M"), 0);
	assert_int_equal(argv_add(&a, "alpha"), 0);
	assert_int_equal(vm_argv_add_restore(&a, "/x/alpha.state"), 0);
	assert_int_equal(a.n, 6);
	assert_null(a.v[6]);
	line = joined(&a);
	assert_string_equal(line, "khyve -m 256M -r /x/alpha.state alpha");
	free(line);
	argv_free(&a);
}

/* Only a regular DIR/NAME.state is a saved state; -d moves it aside. */
static void test_state_file(void **state)
{
	char path[PATH_MAX], link[PATH_MAX + 16], err[512];
	char *f;

	(void)state;
	assert_int_equal(vm_state_path(&g, path), 0);
	assert_contains(path, "/alpha.state");
	assert_false(vm_state_present(&g));
	assert_int_equal(vm_state_discard(&g, err, sizeof(err)), -1);
	assert_contains(err, "cannot discard");
	/* A link (to a real file) is not ours to resume from. */
	f = unit_write_text(dir, "elsewhere", "x");
	assert_non_null(f);
	assert_int_equal(symlink(f, path), 0);
	assert_false(vm_state_present(&g));
	unlink(path);
	mkdir(path, 0700);
	assert_false(vm_state_present(&g));
	rmdir(path);
	free(unit_write_text(dir, "alpha.state", "saved"));
	assert_true(vm_state_present(&g));
	/* An older discarded one is replaced. */
	free(unit_write_text(dir, "alpha.state.discarded", "older"));
	assert_int_equal(vm_state_discard(&g, err, sizeof(err)), 0);
	assert_false(vm_state_present(&g));
	snprintf(link, sizeof(link), "%s.discarded", path);
	struct stat st;
	assert_int_equal(stat(link, &st), 0);
	assert_int_equal(st.st_size, 5);
	free(f);
}

static int mode_of(const char *value, enum vm_stop_mode *mode)
{
	struct vm_sys sys = {0};
	int rc;

	snprintf(sys.conf_path, sizeof(sys.conf_path), "/etc/khyve.conf");
	sys.conf = rcconf_new();
	assert_non_null(sys.conf);
	if (value)
		assert_int_equal(rcconf_set(sys.conf, "vm_stop_mode", value), 0);
	rc = vm_stop_mode_get(&sys, mode);
	rcconf_free(sys.conf);
	return rc;
}

/* vm_stop_mode: unset, "", shutdown, suspend; anything else is refused. */
static void test_stop_mode(void **state)
{
	enum vm_stop_mode m;

	(void)state;
	assert_int_equal(mode_of(NULL, &m), 0);
	assert_int_equal(m, VM_STOP_SHUTDOWN);
	assert_int_equal(mode_of("", &m), 0);
	assert_int_equal(m, VM_STOP_SHUTDOWN);
	assert_int_equal(mode_of("shutdown", &m), 0);
	assert_int_equal(m, VM_STOP_SHUTDOWN);
	assert_int_equal(mode_of("suspend", &m), 0);
	assert_int_equal(m, VM_STOP_SUSPEND);
	assert_int_equal(mode_of("Suspend", &m), 1);
	assert_int_equal(mode_of("hibernate", &m), 1);
	assert_int_equal(m, VM_STOP_SHUTDOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_restore_before_name, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stop_mode, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
