/* A growable NULL-terminated argv (khyvecmd.h). */
#include "vm/khyvecmd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int argv_add(struct argv *a, const char *s)
{
	if (a->n + 2 > a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 32;
		char **v = realloc(a->v, cap * sizeof(*v));
		if (!v)
			return -1;
		a->v = v;
		a->cap = cap;
	}
	if (!(a->v[a->n] = strdup(s)))
		return -1;
	a->v[++a->n] = NULL;
	return 0;
}

int argv_vaddf(struct argv *a, const char *fmt, va_list ap)
{
	char *s;
	int rc;

	if (vasprintf(&s, fmt, ap) < 0)
		return -1;
	rc = argv_add(a, s);
	free(s);
	return rc;
}

int argv_addf(struct argv *a, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = argv_vaddf(a, fmt, ap);
	va_end(ap);
	return rc;
}

void argv_free(struct argv *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	*a = (struct argv){0};
}

/* Words made only of these need no quotes in sh. */
static int shell_safe(const char *s)
{
	return *s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	                       "@%+=:,./_-") == strlen(s);
}

char *argv_to_shell(const struct argv *a)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		return NULL;
	for (size_t i = 0; i < a->n; i++) {
		const char *s = a->v[i];
		if (i)
			fputc(' ', f);
		if (shell_safe(s)) {
			fputs(s, f);
			continue;
		}
		fputc('\'', f);
		for (; *s; s++)
			*s == '\'' ? fputs("'\\''", f) : fputc(*s, f);
		fputc('\'', f);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}
