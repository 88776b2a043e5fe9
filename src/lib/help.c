#include "lib/help.h"

#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
	const struct help_line *x = a, *y = b;

	return strcmp(x->name, y->name);
}

void help_print_lines(FILE *out, struct help_line *lines, size_t n)
{
	int width = 0;

	qsort(lines, n, sizeof(*lines), by_name);
	for (size_t i = 0; i < n; i++)
		if ((int)strlen(lines[i].name) > width)
			width = (int)strlen(lines[i].name);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "  %-*s  %s\n", width, lines[i].name,
		        lines[i].descr != NULL ? lines[i].descr : "");
}

void help_print_usage(FILE *out, const char *name, const char *descr, const char *usage)
{
	fprintf(out, "%s: %s\n", name, descr != NULL ? descr : "");
	if (usage == NULL)
		fprintf(out, "  (no options)\n");
	else
		fputs(usage, out);
}
