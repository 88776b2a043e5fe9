/* RARP self-announce frames and their schedule (announce.h). */
#include "lib/announce.h"

#include <string.h>

void announce_start(struct announce *a, uint64_t now)
{
	a->left = ANNOUNCE_ROUNDS;
	a->at = now + ANNOUNCE_FIRST_NS;
}

bool announce_due(const struct announce *a, uint64_t now)
{
	return a->left > 0 && now >= a->at;
}

void announce_sent(struct announce *a, uint64_t now)
{
	if (a->left == 0)
		return;
	a->left--;
	a->at = now + ANNOUNCE_STEP_NS * (ANNOUNCE_ROUNDS - a->left);
}

int announce_timeout_ms(const struct announce *a, uint64_t now)
{
	if (a->left == 0)
		return -1;
	return now >= a->at ? 0 : (int)((a->at - now + 999999) / 1000000);
}

int announce_poll_ms(const struct announce *a, uint64_t now, bool paused)
{
	if (paused && a->left > 0)
		return ANNOUNCE_PAUSED_MS;
	return announce_timeout_ms(a, now);
}

size_t announce_frame(uint8_t frame[ANNOUNCE_FRAME], const uint8_t mac[6])
{
	static const uint8_t rarp[] = {0x80, 0x35,  /* EtherType RARP */
	                               0x00, 0x01,  /* hardware: Ethernet */
	                               0x08, 0x00,  /* protocol: IPv4 */
	                               6,    4,     /* address lengths */
	                               0x00, 0x03}; /* op: reverse request */

	memset(frame, 0, ANNOUNCE_FRAME);
	memset(frame, 0xff, 6);
	memcpy(frame + 6, mac, 6);
	memcpy(frame + 12, rarp, sizeof(rarp));
	memcpy(frame + 22, mac, 6); /* sender MAC; sender IP 0 */
	memcpy(frame + 32, mac, 6); /* target MAC; target IP 0 */
	return ANNOUNCE_FRAME;
}
