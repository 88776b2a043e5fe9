/*
 * The option string of a device ("conf" in -s slot,emulation,conf):
 * comma-separated items, an optional positional first item (a disk path, a
 * tap name), then key=value pairs, stored as config keys below the
 * device's node.
 */
#ifndef KHYVE_DEVOPTS_H
#define KHYVE_DEVOPTS_H

#include <stdbool.h>
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
 * Whether `key`, a dotted config path relative to a device's node ("ro",
 * "port.1.path"), matches `pattern`, a fnmatch(3) glob whose wildcards
 * stay inside one dot-separated segment: "port.*.path" matches
 * "port.1.path" but not "port.1.x.path"; "com[1-4].path" matches
 * "com2.path".  Plain names match only themselves.
 */
bool devopts_key_matches(const char *pattern, const char *key);

/*
 * Refuse a value below `node` whose path relative to `node` matches none of
 * the `nkeys` patterns in `keys` (devopts_key_matches()), so a misspelled
 * option is never silently ignored.  Every value counts, however deep.
 * 0, or -1 with "unknown option 'KEY'" in `err` (KEY relative to `node`).
 */
int devopts_check_keys(struct config_node *node, const char *const *keys, size_t nkeys, char *err,
                       size_t errlen);

/*
 * Call `unknown(key, arg)` for every value below `node` (depth first, in
 * insertion order) whose relative path matches none of `keys`; `key` is
 * valid during the call only.  Returns how many there were.
 */
size_t devopts_each_unknown(struct config_node *node, const char *const *keys, size_t nkeys,
                            void (*unknown)(const char *key, void *arg), void *arg);

#endif
