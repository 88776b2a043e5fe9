#include "lib/strescape.h"

#include <stdio.h>
#include <string.h>

/* The escape for control byte `c` (at most 4 characters and a NUL). */
static void escape_one(unsigned char c, char out[5])
{
	switch (c) {
	case '\n':
		strcpy(out, "\\n");
		break;
	case '\r':
		strcpy(out, "\\r");
		break;
	case '\t':
		strcpy(out, "\\t");
		break;
	case 0x1b:
		strcpy(out, "\\e");
		break;
	default:
		snprintf(out, 5, "\\x%02x", c);
		break;
	}
}

char *str_escape_controls(char *dst, size_t dstlen, const char *src)
{
	size_t n = 0;

	if (dstlen == 0)
		return dst;
	for (const unsigned char *s = (const unsigned char *)src; *s != '\0'; s++) {
		char esc[5] = {(char)*s, '\0'};
		size_t len;

		if (*s < 0x20 || *s == 0x7f)
			escape_one(*s, esc);
		len = strlen(esc);
		if (n + len >= dstlen)
			break;
		memcpy(dst + n, esc, len);
		n += len;
	}
	dst[n] = '\0';
	return dst;
}
