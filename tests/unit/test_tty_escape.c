/*
 * Unit tests for the user's console escape and the terminal restore
 * sequence (src/lib/tty_escape.h), used by khyve's stdio back end and
 * `vm console`.
 */
#include "unit.h"

#include <fcntl.h>
#include <pty.h>

#include "lib/tty_escape.h"

/* Run `typed` through a fresh stream (in pieces of `chunk` bytes) and
 * collect what the guest gets; the first command ends it. */
static enum tty_escape_cmd filter_all(int ch, const char *typed, size_t chunk, char *got,
                                      unsigned *helps)
{
	struct tty_escape e;
	enum tty_escape_cmd cmd = TTY_ESCAPE_NONE;
	size_t n = strlen(typed), off = 0, k = 0;

	tty_escape_init(&e, ch);
	*helps = 0;
	while (off < n) {
		size_t piece = n - off < chunk ? n - off : chunk, used;

		k += tty_escape_filter(&e, typed + off, piece, got + k, &used, &cmd);
		assert_true(used >= 1 && used <= piece);
		off += used;
		if (cmd == TTY_ESCAPE_QUIT)
			break;
		if (cmd == TTY_ESCAPE_HELP)
			(*helps)++;
	}
	got[k] = '\0';
	return cmd;
}

static void expect(int ch, const char *typed, const char *want, enum tty_escape_cmd want_cmd,
                   unsigned want_helps)
{
	/* The same result whether the bytes come one by one or at once. */
	size_t chunks[] = {1, strlen(typed) + 1};

	for (size_t i = 0; i < ARRAY_LEN(chunks); i++) {
		size_t chunk = chunks[i];
		char got[128];
		unsigned helps;
		enum tty_escape_cmd cmd = filter_all(ch, typed, chunk, got, &helps);

		if (strcmp(got, want) != 0)
			fail_msg("'%s' (pieces of %zu) gave '%s', want '%s'", typed, chunk, got,
			         want);
		assert_int_equal(cmd, want_cmd);
		assert_int_equal(helps, want_helps);
	}
}

static void test_plain_bytes_pass(void **state)
{
	(void)state;
	expect('~', "hello\r", "hello\r", TTY_ESCAPE_NONE, 0);
	/* Not at the start of a line: a ~ is a plain byte. */
	expect('~', "a~.b~?", "a~.b~?", TTY_ESCAPE_NONE, 0);
	expect('~', "", "", TTY_ESCAPE_NONE, 0);
}

static void test_quit_at_line_start(void **state)
{
	(void)state;
	expect('~', "~.after", "", TTY_ESCAPE_QUIT, 0);
	expect('~', "ls\r~.x", "ls\r", TTY_ESCAPE_QUIT, 0);
	expect('~', "ls\n~\x04x", "ls\n", TTY_ESCAPE_QUIT, 0);
}

static void test_tilde_twice_and_others(void **state)
{
	(void)state;
	expect('~', "~~x\r", "~x\r", TTY_ESCAPE_NONE, 0);
	/* ~~ is one plain ~: what follows is mid-line. */
	expect('~', "~~.", "~.", TTY_ESCAPE_NONE, 0);
	expect('~', "~y\r~z", "~y\r~z", TTY_ESCAPE_NONE, 0);
	/* ~ then CR: both pass, and the next line starts. */
	expect('~', "~\r~.", "~\r", TTY_ESCAPE_QUIT, 0);
}

static void test_help_keeps_line_start(void **state)
{
	(void)state;
	expect('~', "~?~?ab", "ab", TTY_ESCAPE_NONE, 2);
	expect('~', "~?~.", "", TTY_ESCAPE_QUIT, 1);
}

static void test_other_character_and_none(void **state)
{
	(void)state;
	expect('%', "~.\r%%x", "~.\r%x", TTY_ESCAPE_NONE, 0);
	expect('%', "\r%.", "\r", TTY_ESCAPE_QUIT, 0);
	expect(-1, "~.~?~~", "~.~?~~", TTY_ESCAPE_NONE, 0);
}

/* A held ~ comes out with the byte of the next call: n + 1 bytes at most. */
static void test_held_across_calls(void **state)
{
	struct tty_escape e;
	enum tty_escape_cmd cmd;
	char out[4];
	size_t used;

	(void)state;
	tty_escape_init(&e, '~');
	assert_int_equal(tty_escape_filter(&e, "~", 1, out, &used, &cmd), 0);
	assert_int_equal(used, 1);
	assert_true(e.held);
	assert_int_equal(tty_escape_filter(&e, "x", 1, out, &used, &cmd), 2);
	assert_memory_equal(out, "~x", 2);
	assert_int_equal(cmd, TTY_ESCAPE_NONE);
}

static void test_parse(void **state)
{
	(void)state;
	assert_int_equal(tty_escape_parse("none"), -1);
	assert_int_equal(tty_escape_parse("~"), '~');
	assert_int_equal(tty_escape_parse("%"), '%');
	assert_int_equal(tty_escape_parse(""), -2);
	assert_int_equal(tty_escape_parse(" "), -2);
	assert_int_equal(tty_escape_parse("~~"), -2);
	assert_int_equal(tty_escape_parse("."), -2);
	assert_int_equal(tty_escape_parse("?"), -2);
	assert_int_equal(tty_escape_parse("\x1b"), -2);
	assert_int_equal(tty_escape_parse("\xc3\xa9"), -2);
	assert_int_equal(tty_escape_parse("None"), -2);
}

/* The restore sequence reaches a terminal, and nothing else. */
static void test_write_restore(void **state)
{
	int master, slave, p[2];
	char buf[64];
	ssize_t n;

	(void)state;
	assert_int_equal(openpty(&master, &slave, NULL, NULL, NULL), 0);
	tty_write_restore(slave);
	n = read(master, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_contains(buf, "\033[?7h");
	assert_contains(buf, "\033(B\017");
	assert_contains(buf, "\033[0m");
	assert_contains(buf, "\033[?25h");
	assert_not_contains(buf, "\033c");
	close(master);
	close(slave);

	assert_int_equal(pipe(p), 0);
	tty_write_restore(p[1]);
	close(p[1]);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 0);
	close(p[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plain_bytes_pass),
	    cmocka_unit_test(test_quit_at_line_start),
	    cmocka_unit_test(test_tilde_twice_and_others),
	    cmocka_unit_test(test_help_keeps_line_start),
	    cmocka_unit_test(test_other_character_and_none),
	    cmocka_unit_test(test_held_across_calls),
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_write_restore),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
