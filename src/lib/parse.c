#include "lib/parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024ull * 1024)

int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (s == NULL || *s == '\0' || *s == '-' || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int suffix_shift(const char *sfx, unsigned *shift)
{
	static const char units[] = "KMGT";
	char c = (char)toupper((unsigned char)sfx[0]);

	if (sfx[0] == '\0') {
		*shift = 0;
		return 0;
	}
	for (unsigned i = 0; units[i] != '\0'; i++) {
		if (c != units[i])
			continue;
		if (sfx[1] != '\0' && !((sfx[1] == 'B' || sfx[1] == 'b') && sfx[2] == '\0'))
			return -1;
		*shift = 10 * (i + 1);
		return 0;
	}
	if ((c == 'B') && sfx[1] == '\0') {
		*shift = 0;
		return 0;
	}
	return -1;
}

int parse_size(const char *s, uint64_t *bytes)
{
	unsigned long long v;
	unsigned shift;
	char *end;

	if (s == NULL || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || suffix_shift(end, &shift) < 0)
		return -1;
	if (shift > 0 && v > (UINT64_MAX >> shift))
		return -1;
	*bytes = (uint64_t)v << shift;
	return 0;
}

int parse_memsize(const char *s, uint64_t *bytes)
{
	uint64_t v;

	if (parse_size(s, &v) < 0)
		return -1;
	/* bhyve: a bare number under 1 MiB means MiB. */
	if (v < MIB && s[0] != '\0' && isdigit((unsigned char)s[strlen(s) - 1])) {
		if (v > UINT64_MAX / MIB)
			return -1;
		v *= MIB;
	}
	if (v == 0 || (v & 0xfff) != 0)
		return -1;
	*bytes = v;
	return 0;
}

bool parse_is_name(const char *s, size_t len, size_t max)
{
	if (len == 0 || len > max)
		return false;
	/* ASCII only, whatever the locale says is alphanumeric. */
	for (size_t i = 0; i < len; i++)
		if (!(s[i] >= 'a' && s[i] <= 'z') && !(s[i] >= 'A' && s[i] <= 'Z') &&
		    !(s[i] >= '0' && s[i] <= '9') && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}
