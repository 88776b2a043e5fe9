/*
 * Shared helpers for khyve's cmocka unit tests: the cmocka includes in the
 * order it needs, temporary files, and capturing a FILE's output.
 *
 * A test written to expose a bug keeps a "Regression:" comment saying what
 * used to be wrong once the bug is fixed.
 */
#ifndef KHYVE_UNIT_H
#define KHYVE_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* assert that `haystack` contains `needle`, printing both when not. */
#define assert_contains(haystack, needle)                                                          \
	do {                                                                                       \
		const char *h_ = (haystack), *n_ = (needle);                                       \
		if (h_ == NULL || strstr(h_, n_) == NULL)                                          \
			fail_msg("'%s' does not contain '%s'", h_ ? h_ : "(null)", n_);            \
	} while (0)

#define assert_not_contains(haystack, needle)                                                      \
	do {                                                                                       \
		const char *h_ = (haystack), *n_ = (needle);                                       \
		if (h_ != NULL && strstr(h_, n_) != NULL)                                          \
			fail_msg("'%s' unexpectedly contains '%s'", h_, n_);                       \
	} while (0)

/* A fresh private directory under $TMPDIR (or /tmp); the caller frees the
 * string and removes the directory with unit_rmtree(). */
static inline char *unit_mkdtemp(void)
{
	const char *base = getenv("TMPDIR");
	char *path;

	if (base == NULL || *base == '\0')
		base = "/tmp";
	if (asprintf(&path, "%s/khyve-unit.XXXXXX", base) < 0)
		return NULL;
	if (mkdtemp(path) == NULL) {
		free(path);
		return NULL;
	}
	return path;
}

/* Remove a directory made by unit_mkdtemp() and everything in it. */
static inline void unit_rmtree(const char *dir)
{
	char *cmd;

	if (dir == NULL || strncmp(dir, "/", 1) != 0 || strstr(dir, "khyve-unit.") == NULL)
		return;
	if (asprintf(&cmd, "rm -rf '%s'", dir) < 0)
		return;
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	free(cmd);
}

/* Write `len` bytes to dir/name; returns the malloc()ed path or NULL. */
static inline char *unit_write_file(const char *dir, const char *name, const void *data, size_t len)
{
	char *path;
	FILE *f;

	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return NULL;
	f = fopen(path, "wb");
	if (f == NULL || fwrite(data, 1, len, f) != len) {
		if (f != NULL)
			fclose(f);
		free(path);
		return NULL;
	}
	if (fclose(f) != 0) {
		free(path);
		return NULL;
	}
	return path;
}

static inline char *unit_write_text(const char *dir, const char *name, const char *text)
{
	return unit_write_file(dir, name, text, strlen(text));
}

/* Capture what is written to a FILE: open with unit_capture_open(), read
 * with unit_capture_text() (flushes), free with unit_capture_close(). */
struct unit_capture {
	FILE *f;
	char *buf;
	size_t len;
};

static inline FILE *unit_capture_open(struct unit_capture *c)
{
	c->buf = NULL;
	c->len = 0;
	c->f = open_memstream(&c->buf, &c->len);
	return c->f;
}

static inline const char *unit_capture_text(struct unit_capture *c)
{
	fflush(c->f);
	return c->buf != NULL ? c->buf : "";
}

static inline void unit_capture_close(struct unit_capture *c)
{
	if (c->f != NULL)
		fclose(c->f);
	free(c->buf);
	c->f = NULL;
	c->buf = NULL;
	c->len = 0;
}

/* Little-endian loads from a byte buffer. */
static inline uint64_t unit_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static inline void unit_put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * Run `body` in a child process so that a crash (double free, ASan report,
 * abort) fails only the calling test instead of killing the whole suite.
 * `body` returns NULL on success or a message saying what went wrong; it
 * must not use cmocka's asserts.  In sanitizer builds the child also runs
 * a leak check, so leaks made by `body` fail the test too.
 */
static inline void unit_run_isolated(const char *(*body)(void))
{
	pid_t pid;
	int status;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		fail_msg("fork failed");
	if (pid == 0) {
		const char *why = body();

		if (why != NULL) {
			fprintf(stderr, "isolated check failed: %s\n", why);
			fflush(stderr);
			_exit(1);
		}
#ifdef __SANITIZE_ADDRESS__
		if (__lsan_do_recoverable_leak_check() != 0) {
			fprintf(stderr, "isolated check leaked memory\n");
			_exit(2);
		}
#endif
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid)
		fail_msg("waitpid failed");
	if (WIFSIGNALED(status))
		fail_msg("isolated check crashed with signal %d", WTERMSIG(status));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("isolated check failed (exit status %d; see its output above)",
		         WEXITSTATUS(status));
}

/* For bodies run by unit_run_isolated(). */
#define ISO_CHECK(cond)                                                                            \
	do {                                                                                       \
		if (!(cond))                                                                       \
			return __FILE__ ":" ISO_STR(__LINE__) ": " #cond;                          \
	} while (0)
#define ISO_STR(x)  ISO_STR2(x)
#define ISO_STR2(x) #x

#endif
