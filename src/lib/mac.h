/*
 * Ethernet MAC addresses: the text form "xx:xx:xx:xx:xx:xx", and the MACs
 * khyve and vm make up (bhyve's default for a NIC, vm-bhyve's fixed guest
 * MACs, random ones for bridges).
 */
#ifndef KHYVE_MAC_H
#define KHYVE_MAC_H

#include <stdbool.h>
#include <stdint.h>

#define MAC_LEN    6
#define MAC_STRLEN 18 /* "xx:xx:xx:xx:xx:xx" and its NUL */

/*
 * Parse six hex fields of one or two digits separated by colons
 * ("58:9c:fc:0:1:a2"), nothing before or after.  0 with `mac` filled, or -1
 * (`mac` untouched).
 */
int mac_parse(const char *s, uint8_t mac[MAC_LEN]);

/* True for an address a NIC may have: not a group address (bit 0 of the
 * first byte) and not all zeros. */
bool mac_is_unicast(const uint8_t mac[MAC_LEN]);

/* Write `mac` as "xx:xx:xx:xx:xx:xx" (lower case) into `out`. */
void mac_format(const uint8_t mac[MAC_LEN], char out[MAC_STRLEN]);

/*
 * bhyve's MAC for a NIC without mac=: its OUI 00:a0:98 and the first three
 * bytes of the MD5 of "SLOT-FUNC-VMNAME" (`vmname` NULL counts as ""), so a
 * guest keeps its MAC from one run to the next.
 */
void mac_bhyve_default(unsigned slot, unsigned func, const char *vmname, uint8_t mac[MAC_LEN]);

/*
 * A random MAC under 58:9c:fc, as vm-bhyve gives guests: the fourth byte
 * below 0x10 and the last three not all zero.
 */
void mac_random_guest(uint8_t mac[MAC_LEN]);

/* A random locally administered unicast MAC (for a bridge of our own). */
void mac_random_local(uint8_t mac[MAC_LEN]);

#endif
