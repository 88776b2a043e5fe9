/*
 * Every configuration key khyve knows, so a misspelled -o or -k key (or a
 * -s / -l option a device does not read) is refused before the VM starts
 * rather than silently ignored.  The top-level keys are one table in
 * known_keys.c (one line per key); pci.B.S.F.* keys are checked against
 * their emulation's list (bus/pci_slot.h), lpc.* keys against the LPC
 * devices' lists (dev/lpc.h).  `-o config.unknown=warn` turns refusals
 * into warnings, for configurations written for a khyve that ignored them.
 */
#ifndef KHYVE_KNOWN_KEYS_H
#define KHYVE_KNOWN_KEYS_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Check the whole config tree: every key known, every boolean key a
 * boolean, config.unknown "error" (the default) or "warn".  0, or -1 with
 * one line in `err` naming the first bad key (and the device it belongs to,
 * for -s and -l options).  With config.unknown=warn each unknown key is
 * logged as a warning and 0 returned (a bad boolean is still an error).
 */
int known_keys_check(char *err, size_t errlen);

/* Whether `key` (a full dotted path outside pci.* and lpc.*) is in the
 * table. */
bool known_keys_top_level(const char *key);

#endif
