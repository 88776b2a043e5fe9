#include "lib/devopts.h"

#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config.h"

/* Longer than any config path (config.c: CONFIG_PATH_MAX, 256). */
#define DEVOPTS_KEY_MAX 512

/* One item: "key=value", "key", or the positional value. */
static int set_item(struct config_node *node, char *item, const char *positional)
{
	char *eq = strchr(item, '=');

	if (positional != NULL && eq == NULL)
		return config_node_set(node, positional, item);
	if (eq != NULL)
		*eq = '\0';
	return config_node_set(node, item, eq != NULL ? eq + 1 : "true");
}

int devopts_parse(struct config_node *node, const char *conf, const char *positional,
                  const char *what, char *err, size_t errlen)
{
	char *copy, *item, *save = NULL;
	int rc = 0;

	if (conf == NULL || *conf == '\0')
		return 0;
	copy = strdup(conf);
	if (copy == NULL)
		return -1;
	for (item = strtok_r(copy, ",", &save); item != NULL && rc == 0;
	     item = strtok_r(NULL, ",", &save)) {
		rc = set_item(node, item, positional);
		if (rc < 0)
			snprintf(err, errlen, "bad %s option '%s'", what, item);
		positional = NULL; /* only the first item can be one */
	}
	free(copy);
	return rc;
}

bool devopts_key_matches(const char *pattern, const char *key)
{
	char p[DEVOPTS_KEY_MAX], k[DEVOPTS_KEY_MAX];

	if (snprintf(p, sizeof(p), "%s", pattern) >= (int)sizeof(p) ||
	    snprintf(k, sizeof(k), "%s", key) >= (int)sizeof(k))
		return false;
	/* fnmatch's FNM_PATHNAME keeps wildcards inside one '/' segment:
	 * make the dots slashes. */
	for (char *c = p; *c; c++)
		if (*c == '.')
			*c = '/';
	for (char *c = k; *c; c++)
		if (*c == '.')
			*c = '/';
	return fnmatch(p, k, FNM_PATHNAME) == 0;
}

static bool key_known(const char *key, const char *const *keys, size_t nkeys)
{
	for (size_t i = 0; i < nkeys; i++)
		if (devopts_key_matches(keys[i], key))
			return true;
	return false;
}

/* Walk the values below `node`; `path` holds the relative path so far
 * (`len` bytes).  Config paths are shorter than DEVOPTS_KEY_MAX, so the
 * depth is bounded too. */
static size_t walk_unknown(struct config_node *node, char *path, size_t len,
                           const char *const *keys, size_t nkeys,
                           void (*unknown)(const char *key, void *arg), void *arg)
{
	size_t count = 0;

	for (struct config_node *c = config_node_first(node); c; c = config_node_next(c)) {
		int n = snprintf(path + len, DEVOPTS_KEY_MAX - len, "%s%s", len ? "." : "",
		                 config_node_name(c));

		if (n < 0 || len + (size_t)n >= DEVOPTS_KEY_MAX)
			continue;                   /* the tree refuses paths this long */
		if (config_node_value(c) == NULL) { /* an inner node (or an empty one) */
			count += walk_unknown(c, path, len + (size_t)n, keys, nkeys, unknown, arg);
		} else if (!key_known(path, keys, nkeys)) {
			unknown(path, arg);
			count++;
		}
		path[len] = '\0';
	}
	return count;
}

size_t devopts_each_unknown(struct config_node *node, const char *const *keys, size_t nkeys,
                            void (*unknown)(const char *key, void *arg), void *arg)
{
	char path[DEVOPTS_KEY_MAX] = "";

	return node != NULL ? walk_unknown(node, path, 0, keys, nkeys, unknown, arg) : 0;
}

struct first_unknown {
	char key[DEVOPTS_KEY_MAX];
	bool found;
};

static void remember_first(const char *key, void *arg)
{
	struct first_unknown *f = arg;

	if (!f->found)
		snprintf(f->key, sizeof(f->key), "%s", key);
	f->found = true;
}

int devopts_check_keys(struct config_node *node, const char *const *keys, size_t nkeys, char *err,
                       size_t errlen)
{
	struct first_unknown first = {.found = false};

	if (devopts_each_unknown(node, keys, nkeys, remember_first, &first) == 0)
		return 0;
	snprintf(err, errlen, "unknown option '%s'", first.key);
	return -1;
}
