/*
 * The configuration tree, after bhyve_config(5): every setting is a string
 * value at a dotted path ("memory.size", "lpc.com1.path", "pci.0.3.0.device").
 * Command-line flags, -o key=value and -k files all write into this one tree;
 * devices read their own subtree.  Values may refer to other values with
 * %(path), expanded when read.
 *
 * The tree is process-global (as in bhyve) and not thread-safe: it is built
 * and read during start-up, before vCPU threads exist.
 */
#ifndef KHYVE_CONFIG_H
#define KHYVE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct config_node;

/* Drop every setting (used between unit tests and before parsing). */
void config_reset(void);

/*
 * Set `path` to a copy of `value`, creating intermediate nodes.  Fails with -1
 * when a path segment is empty or holds characters other than
 * [A-Za-z0-9_-:], or when the path would turn a value into a node or a node
 * into a value.
 */
int config_set(const char *path, const char *value);

/* Set `name` (a single segment or a dotted path) below `node`. */
int config_node_set(struct config_node *node, const char *name, const char *value);

/* Remove `path` and everything below it; no error when absent. */
void config_unset(const char *path);

/*
 * The value at `path` with %(other.path) references expanded, or NULL when
 * unset (or when `path` is a node).  The string is owned by the tree and
 * stays valid until that value is set again or the tree is reset.
 */
const char *config_get(const char *path);
const char *config_get_default(const char *path, const char *def);
const char *config_node_get(struct config_node *node, const char *name);

/*
 * Booleans accept true/false, yes/no, on/off, 1/0 (any case).  A value that
 * is none of these gives -1 and leaves *out untouched; an unset value sets
 * *out to `def` and gives 0.
 */
int config_get_bool(const char *path, bool def, bool *out);
int config_node_get_bool(struct config_node *node, const char *name, bool def, bool *out);

/* Find the node at `path` (NULL: absent or a plain value) / create it. */
struct config_node *config_find_node(const char *path);
struct config_node *config_create_node(const char *path);

/* The root of the tree (its children are the top-level keys). */
struct config_node *config_root_node(void);

/* Iterate over a node's children in insertion order. */
struct config_node *config_node_first(struct config_node *node);
struct config_node *config_node_next(struct config_node *child);
const char *config_node_name(const struct config_node *node);
/* Raw (unexpanded) value, or NULL for an inner node. */
const char *config_node_value(const struct config_node *node);

/*
 * Parse "key=value" (as given to -o) and set it.  Returns 0, or -1 with a
 * one-line reason in `err`.
 */
int config_parse_assignment(const char *kv, char *err, size_t errlen);

/*
 * Read a -k file: one key=value per line; blank lines and lines starting with
 * '#' are skipped; leading/trailing blanks are trimmed.  Returns 0, or -1
 * with "FILE:LINE: reason" in `err`.
 */
int config_load_file(const char *file, char *err, size_t errlen);

/* Print every value as "path=value", one per line, in insertion order. */
void config_dump(FILE *out);

#endif
