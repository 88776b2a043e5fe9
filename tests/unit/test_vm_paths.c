/* Unit tests for confined host paths and vm's own files (src/vm/paths.h). */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vm/paths.h"

/* A scratch folder: @/guest (the root) holding disk.img, @/secret beside it. */
static char *dir;
static char guest[PATH_MAX];

static void at(char out[PATH_MAX], const char *name)
{
	assert_true(snprintf(out, PATH_MAX, "%s/%s", dir, name) < PATH_MAX);
}

static void link_at(const char *target, const char *name)
{
	char path[PATH_MAX];

	at(path, name);
	assert_int_equal(symlink(target, path), 0);
}

static int setup(void **state)
{
	char *f;

	(void)state;
	if ((dir = unit_mkdtemp()) == NULL)
		return -1;
	snprintf(guest, sizeof(guest), "%s/guest", dir);
	if (mkdir(guest, 0755) < 0)
		return -1;
	f = unit_write_text(guest, "disk.img", "x");
	free(f);
	f = unit_write_text(dir, "secret", "host");
	free(f);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unit_rmtree(dir);
	free(dir);
	return 0;
}

/* Confine `name` to @/guest; return the reason ("" when allowed). */
static const char *confine(const char *name)
{
	static char why[2 * PATH_MAX];
	char out[PATH_MAX];

	why[0] = '\0';
	if (vm_path_confine(guest, name, out, why, sizeof(why)) == 0) {
		assert_string_equal(why, "");
		return "";
	}
	assert_string_not_equal(why, "");
	return why;
}

/* The walk follows links (relative, absolute, chained) and `..` after them. */
static void test_resolve(void **state)
{
	char out[PATH_MAX], want[PATH_MAX], path[PATH_MAX];

	(void)state;
	link_at("guest/disk.img", "rel");
	link_at(dir, "abs");
	link_at("rel", "chain");
	at(path, "abs/./chain");
	assert_int_equal(vm_path_resolve(path, out), 0);
	/* dir itself may sit under a link (/tmp): compare against its resolution */
	char real_guest[PATH_MAX];
	assert_int_equal(vm_path_resolve(guest, real_guest), 0);
	assert_true(snprintf(want, sizeof(want), "%s/disk.img", real_guest) < (int)sizeof(want));
	assert_string_equal(out, want);
	/* missing tails are fine; `..` below a missing folder is not */
	at(path, "guest/new/file");
	assert_int_equal(vm_path_resolve(path, out), 0);
	at(path, "guest/missing/../disk.img");
	assert_int_equal(vm_path_resolve(path, out), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(vm_path_resolve("relative", out), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(vm_path_resolve("/", out), 0);
	assert_string_equal(out, "/");
	/* a loop ends */
	link_at("loop2", "loop1");
	link_at("loop1", "loop2");
	at(path, "loop1");
	assert_int_equal(vm_path_resolve(path, out), -1);
	assert_int_equal(errno, ELOOP);
}

static void test_confine(void **state)
{
	char path[PATH_MAX];

	(void)state;
	assert_string_equal(confine("disk.img"), "");
	assert_string_equal(confine("not-yet.img"), "");
	assert_string_equal(confine("./disk.img"), "");
	assert_string_equal(confine("../secret"), "'..' is not allowed");
	assert_string_equal(confine("a/../disk.img"), "'..' is not allowed");
	assert_string_equal(confine(".."), "'..' is not allowed");
	assert_contains(confine("/etc/passwd"), "it is outside");
	assert_true(snprintf(path, sizeof(path), "%s/disk.img", guest) < (int)sizeof(path));
	assert_string_equal(confine(path), "");
	/* the folder itself names no file */
	assert_contains(confine("."), "itself, not a file in it");
	/* links: out (dangling or not, file or folder) refused, inside allowed */
	at(path, "secret");
	link_at(path, "guest/out.img");
	assert_contains(confine("out.img"), "through a symbolic link");
	link_at("/nonexistent/x", "guest/dangling.img");
	assert_contains(confine("dangling.img"), "through a symbolic link");
	link_at("..", "guest/up");
	assert_contains(confine("up/secret"), "through a symbolic link");
	assert_contains(confine("up/guest/../secret"), "'..' is not allowed");
	assert_string_equal(confine("up/guest/disk.img"), ""); /* out and back in */
	link_at("disk.img", "guest/alias.img");
	assert_string_equal(confine("alias.img"), "");
}

/* vm_open_own(): plain files of its own only, O_TRUNC after the check. */
static void test_open_own(void **state)
{
	char path[PATH_MAX], other[PATH_MAX];
	struct stat st;
	int fd;

	(void)state;
	at(path, "guest/own.log");
	fd = vm_open_own(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "ab", 2), 2);
	close(fd);
	fd = vm_open_own(path, O_WRONLY | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	close(fd);
	at(other, "secret");
	link_at(other, "guest/link.log");
	at(path, "guest/link.log");
	assert_int_equal(vm_open_own(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), -1);
	assert_int_equal(errno, ELOOP);
	at(path, "guest/hard.log");
	assert_int_equal(link(other, path), 0);
	assert_int_equal(vm_open_own(path, O_WRONLY | O_TRUNC, 0644), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(stat(other, &st), 0);
	assert_int_equal(st.st_size, 4); /* not truncated */
	at(path, "guest/fifo.log");
	assert_int_equal(mkfifo(path, 0644), 0);
	assert_int_equal(vm_open_own(path, O_WRONLY | O_CREAT, 0644), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(vm_own_file_ok(path), -1);
	at(path, "guest/none.log");
	assert_int_equal(vm_own_file_ok(path), 0);
	assert_contains(vm_open_own_strerror(ELOOP), "symbolic link");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_resolve, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_confine, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_open_own, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
