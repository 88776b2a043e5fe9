/*
 * rc.conf-style settings files, as vm-bhyve reads and writes them with
 * sysrc(8): /etc/khyve.conf, each VM's NAME.conf, templates and
 * $vm_dir/.config/system.conf.
 *
 * One setting per line, `key="value"`, `key='value'` or `key=value`.  As in
 * vm-bhyve's config.sample: '#' starts a comment anywhere (even inside
 * double quotes), a line that starts with blanks is ignored, and keys are
 * [A-Za-z0-9_].  Every line (comments, blank and ignored lines) is kept, so
 * saving after rcconf_set() changes only the lines that were set.
 *
 * Not thread-safe; the `vm` front end is single-threaded.
 */
#ifndef KHYVE_VM_RCCONF_H
#define KHYVE_VM_RCCONF_H

#include <stdbool.h>
#include <stddef.h>

struct rcconf;

/* An empty file in memory.  NULL only when out of memory. */
struct rcconf *rcconf_new(void);
void rcconf_free(struct rcconf *rc);

/*
 * Parse `text` (NUL-terminated) into a fresh rcconf.  `name` is used in
 * messages.  A line that is not a comment, blank, indented or a valid
 * assignment is an error: NULL with "NAME:LINE: reason" in `err`.  When a
 * key is set twice, the first line wins (vm-bhyve reads the first match).
 */
struct rcconf *rcconf_parse(const char *text, const char *name, char *err, size_t errlen);

/*
 * Read and parse `path`.  A missing file gives NULL with errno ENOENT and
 * "PATH: No such file or directory" in `err`, so callers can treat it as
 * empty when that is what they want.
 */
struct rcconf *rcconf_load(const char *path, char *err, size_t errlen);

/* The value of `key`, or NULL when unset.  Owned by `rc`; valid until the
 * key is set again or `rc` is freed. */
const char *rcconf_get(const struct rcconf *rc, const char *key);
const char *rcconf_get_default(const struct rcconf *rc, const char *key, const char *def);

/* Yes/no as vm-bhyve's checkyesno: yes/true/on/1 (any case) is true. */
bool rcconf_get_yes(const struct rcconf *rc, const char *key);

/*
 * Set `key` to `value` (replaces the first line that set it and drops later
 * ones, or appends a line)
 * or remove it when `value` is NULL.  Values that cannot be written back as
 * a double-quoted rc.conf value (containing '"', '#', '\\', '$', '`' or a
 * newline) and bad keys give -1 and change nothing.
 */
int rcconf_set(struct rcconf *rc, const char *key, const char *value);

/* True when `key` is a valid rc.conf variable name. */
bool rcconf_key_valid(const char *key);
/* True when `value` can be stored by rcconf_set(). */
bool rcconf_value_valid(const char *value);

/* Settings in file order (the first assignment of each key only). */
size_t rcconf_count(const struct rcconf *rc);
const char *rcconf_key_at(const struct rcconf *rc, size_t i);
const char *rcconf_value_at(const struct rcconf *rc, size_t i);

/* The whole file as text (malloc'd, caller frees), NULL when out of memory. */
char *rcconf_format(const struct rcconf *rc);

/*
 * Write `rc` to `path` atomically: a temporary file in the same folder,
 * fsync, rename.  The file keeps the mode of the one it replaces (0644 for
 * a new one).  0, or -1 with "PATH: reason" in `err`; on error the old file
 * is untouched.
 */
int rcconf_save(const struct rcconf *rc, const char *path, char *err, size_t errlen);

#endif
