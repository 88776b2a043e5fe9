/*
 * The option string of a device ("conf" in -s slot,emulation,conf):
 * comma-separated items, an optional positional first item (a disk path, a
 * tap name), then key=value pairs, stored as config keys below the
 * device's node.
 */
#ifndef KHYVE_DEVOPTS_H
#define KHYVE_DEVOPTS_H

#include <stddef.h>

struct config_node;

/*
 * Store `conf` in `node`.  Items are split at commas, empty ones skipped;
 * "key=value" sets key to value (split at the first '='), a bare "key" sets
 * it to "true", and later items win.  When `positional` is not NULL, a
 * first item without '=' is the value of that key instead ("path",
 * "backend").  NULL or "" sets nothing.  Returns 0, or -1 with
 * "bad WHAT option 'KEY'" in `err` (`what`: "disk", "network", ...) for a
 * key the config tree refuses, or with `err` untouched when out of memory;
 * items before the bad one stay set.
 */
int devopts_parse(struct config_node *node, const char *conf, const char *positional,
                  const char *what, char *err, size_t errlen);

/*
 * Refuse a key below `node` that is not one of the `nkeys` names in `keys`
 * (a misspelled option must not be silently ignored).  0, or -1 with
 * "unknown option 'KEY'" in `err`.
 */
int devopts_check_keys(struct config_node *node, const char *const *keys, size_t nkeys, char *err,
                       size_t errlen);

#endif
