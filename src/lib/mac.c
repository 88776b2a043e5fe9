#include "lib/mac.h"

#include <ctype.h>
#include <md5.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

int mac_parse(const char *s, uint8_t mac[MAC_LEN])
{
	uint8_t out[MAC_LEN];

	for (int i = 0; i < MAC_LEN; i++) {
		unsigned v = 0, digits = 0;

		for (; digits < 3 && isxdigit((unsigned char)*s); digits++, s++)
			v = v * 16 + (unsigned)(isdigit((unsigned char)*s)
			                            ? *s - '0'
			                            : (tolower((unsigned char)*s) - 'a' + 10));
		if (digits == 0 || digits > 2 || *s != (i == MAC_LEN - 1 ? '\0' : ':'))
			return -1;
		out[i] = (uint8_t)v;
		s++;
	}
	memcpy(mac, out, MAC_LEN);
	return 0;
}

bool mac_is_unicast(const uint8_t mac[MAC_LEN])
{
	static const uint8_t zero[MAC_LEN];

	return !(mac[0] & 1) && memcmp(mac, zero, MAC_LEN) != 0;
}

void mac_format(const uint8_t mac[MAC_LEN], char out[MAC_STRLEN])
{
	snprintf(out, MAC_STRLEN, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
	         mac[4], mac[5]);
}

void mac_bhyve_default(unsigned slot, unsigned func, const char *vmname, uint8_t mac[MAC_LEN])
{
	char key[80];
	uint8_t digest[MD5_DIGEST_LENGTH];
	MD5_CTX ctx;

	snprintf(key, sizeof(key), "%u-%u-%s", slot, func, vmname ? vmname : "");
	MD5Init(&ctx);
	MD5Update(&ctx, (const uint8_t *)key, strlen(key));
	MD5Final(digest, &ctx);
	mac[0] = 0x00;
	mac[1] = 0xa0;
	mac[2] = 0x98;
	memcpy(mac + 3, digest, 3);
}

/* Random bytes; when getrandom() cannot give them (never on Linux >= 3.17),
 * something that still differs between processes and runs. */
static void random_fill(uint8_t *b, size_t n)
{
	uint32_t seed;

	if (getrandom(b, n, 0) == (ssize_t)n)
		return;
	seed = (uint32_t)getpid() ^ (uint32_t)time(NULL) * 2654435761u;
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = (uint8_t)(seed >> 16);
	}
}

void mac_random_guest(uint8_t mac[MAC_LEN])
{
	uint8_t b[3];

	do {
		random_fill(b, sizeof(b));
		b[0] &= 0x0f;
	} while (b[0] == 0 && b[1] == 0 && b[2] == 0);
	mac[0] = 0x58;
	mac[1] = 0x9c;
	mac[2] = 0xfc;
	memcpy(mac + 3, b, 3);
}

void mac_random_local(uint8_t mac[MAC_LEN])
{
	random_fill(mac, MAC_LEN);
	mac[0] = (uint8_t)((mac[0] & 0xfe) | 0x02);
}
