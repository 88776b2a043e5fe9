#include "lib/tty_escape.h"

#include <string.h>
#include <unistd.h>

/* Autowrap on, G0 = ASCII, shift in (SI), attributes off, cursor on. */
static const char restore_seq[] = "\033[?7h\033(B\017\033[0m\033[?25h";

void tty_escape_init(struct tty_escape *e, int ch)
{
	e->ch = ch;
	e->line_start = true;
	e->held = false;
}

/* The byte after a held escape character: a command, or bytes to pass. */
static enum tty_escape_cmd escape_second(struct tty_escape *e, char c, char *out, size_t *k)
{
	if (c == '.' || c == 0x04)
		return TTY_ESCAPE_QUIT;
	if (c == '?') {
		e->line_start = true; /* the next ~ is an escape again */
		return TTY_ESCAPE_HELP;
	}
	if ((unsigned char)c != e->ch)
		out[(*k)++] = (char)e->ch;
	out[(*k)++] = c;
	e->line_start = c == '\r' || c == '\n';
	return TTY_ESCAPE_NONE;
}

size_t tty_escape_filter(struct tty_escape *e, const char *in, size_t n, char *out, size_t *used,
                         enum tty_escape_cmd *cmd)
{
	size_t k = 0;

	*cmd = TTY_ESCAPE_NONE;
	for (size_t i = 0; i < n; i++) {
		char c = in[i];

		if (e->held) {
			e->held = false;
			*cmd = escape_second(e, c, out, &k);
			if (*cmd != TTY_ESCAPE_NONE) {
				*used = i + 1;
				return k;
			}
			continue;
		}
		if (e->line_start && e->ch >= 0 && (unsigned char)c == e->ch) {
			e->held = true;
			continue;
		}
		out[k++] = c;
		e->line_start = c == '\r' || c == '\n';
	}
	*used = n;
	return k;
}

int tty_escape_parse(const char *value)
{
	unsigned char c = (unsigned char)value[0];

	if (strcmp(value, "none") == 0)
		return -1;
	/* '.' and '?' would collide with the commands that follow. */
	if (c > ' ' && c < 0x7f && c != '.' && c != '?' && value[1] == '\0')
		return c;
	return -2;
}

void tty_write_restore(int fd)
{
	if (isatty(fd) && write(fd, restore_seq, sizeof(restore_seq) - 1) < 0) {
		/* Nothing more to do for a terminal that went away. */
	}
}
