/* Unit tests for the per-thread seccomp filters (src/lib/sandbox.h).  The
 * sandbox keeps process-wide state and a filter cannot be removed, so each
 * case runs in a forked child that ends with _exit(). */
#include "unit.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>

#include "lib/config.h"
#include "lib/sandbox.h"

/* Run fn in a child; return its wait status. */
static int in_child(int (*fn)(void))
{
	int status = 0;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static int off_child(void)
{
	char err[128] = "";

	config_set("sandbox.enable", "off");
	if (sandbox_setup(err, sizeof(err)) != 0 || sandbox_enabled())
		return 10;
	sandbox_arm();
	sandbox_thread_enter(SANDBOX_VCPU);
	/* No filter: the call runs (and only reads the personality). */
	return syscall(SYS_personality, 0xffffffffUL) < 0 ? 11 : 0;
}

static void test_sandbox_off(void **state)
{
	int st = in_child(off_child);

	(void)state;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static int bad_role_child(void)
{
	char err[128] = "";

	config_set("sandbox.selftest", "cpu");
	if (sandbox_setup(err, sizeof(err)) != -1 || strstr(err, "'cpu'") == NULL)
		return 10;
	return 0;
}

static void test_sandbox_bad_selftest_role(void **state)
{
	int st = in_child(bad_role_child);

	(void)state;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* Every role's list is built; the vCPU's stays small (Firecracker's has
 * 27 calls; khyve's also starts device threads, see sandbox.c). */
static int sizes_child(void)
{
	char err[128] = "";

	if (sandbox_setup(err, sizeof(err)) != 0 || !sandbox_enabled())
		return 10;
	for (int r = 0; r < SANDBOX_NROLES; r++) {
		unsigned n = sandbox_role_size((enum sandbox_role)r);

		printf("sandbox role %-14s %u system calls\n",
		       sandbox_role_name((enum sandbox_role)r), n);
		if (n < 15 || n > 80)
			return 11;
	}
	fflush(stdout);
	return sandbox_role_size(SANDBOX_BLK_POOL) < sandbox_role_size(SANDBOX_VCPU) ? 0 : 12;
}

static void test_sandbox_role_sizes(void **state)
{
	int st = in_child(sizes_child);

	(void)state;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static int forbidden_child(void)
{
	char err[128] = "";

	if (sandbox_setup(err, sizeof(err)) != 0)
		return 10;
	sandbox_thread_enter(SANDBOX_VCPU); /* before arming: still unfiltered */
	if (syscall(SYS_personality, 0xffffffffUL) < 0)
		return 11;
	sandbox_arm();
	sandbox_thread_enter(SANDBOX_VCPU);
	syscall(SYS_personality, 0xffffffffUL);
	return 12; /* not reached: the filter kills the process */
}

static void test_sandbox_forbidden_call_kills(void **state)
{
	int st = in_child(forbidden_child);

	(void)state;
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGSYS);
}

/* Log mode: the denied call fails with EPERM and the thread goes on. */
static int log_child(void)
{
	char err[128] = "";

	config_set("sandbox.log", "true");
	if (sandbox_setup(err, sizeof(err)) != 0)
		return 10;
	sandbox_arm();
	sandbox_thread_enter(SANDBOX_BLK_POOL);
	errno = 0;
	if (syscall(SYS_personality, 0xffffffffUL) != -1 || errno != EPERM)
		return 11;
	/* Allowed calls still work. */
	return getpid() > 0 ? 0 : 12;
}

static void test_sandbox_log_mode_continues(void **state)
{
	int st = in_child(log_child);

	(void)state;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* `sandbox=off` on the command line or in a -k file is sandbox.enable. */
static void test_sandbox_key_alias(void **state)
{
	char err[128];

	(void)state;
	config_reset();
	assert_int_equal(config_parse_assignment("sandbox=off", err, sizeof(err)), 0);
	assert_int_equal(config_parse_assignment("sandbox.log=true", err, sizeof(err)), 0);
	assert_string_equal(config_get("sandbox.enable"), "off");
	assert_string_equal(config_get("sandbox.log"), "true");
	config_reset();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sandbox_off),
	    cmocka_unit_test(test_sandbox_bad_selftest_role),
	    cmocka_unit_test(test_sandbox_role_sizes),
	    cmocka_unit_test(test_sandbox_forbidden_call_kills),
	    cmocka_unit_test(test_sandbox_log_mode_continues),
	    cmocka_unit_test(test_sandbox_key_alias),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
