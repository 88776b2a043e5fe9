#include "lib/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/log.h"

/*
 * A node is either a leaf holding `value` or an inner node with children;
 * the root is an inner node.  Children are a singly linked list kept in
 * insertion order, so dumps are stable and readable.
 */
struct config_node {
	char *name;
	char *value;    /* leaf only */
	char *expanded; /* cache of value with %(...) expanded */
	unsigned expanded_gen;
	bool expanding; /* on the current expansion path: breaks %(a) cycles */
	struct config_node *parent;
	struct config_node *first_child;
	struct config_node *last_child;
	struct config_node *next;
};

#define CONFIG_EXPAND_DEPTH 8
#define CONFIG_PATH_MAX     256
/* Work one config_get() may do expanding %(path) references: bytes copied
 * plus references followed.  Depth alone does not bound it: eight levels
 * of forty references each are 40^8 copies (found by tests/fuzz). */
#define CONFIG_EXPAND_BUDGET (64u << 10)

static struct config_node config_root;
/* Bumped on every change, so cached expansions never go stale. */
static unsigned config_generation = 1;

/* Expansions replaced by newer ones.  config_get() promises its string
 * lives until the tree is reset, so they are only freed then. */
struct retired {
	struct retired *next;
	char *s;
};
static struct retired *retired_expansions;
static struct ratelimit expand_rl = RATELIMIT_INIT;

static void retire(char *s)
{
	struct retired *r;

	if (s == NULL)
		return;
	r = malloc(sizeof(*r));
	if (r == NULL)
		return; /* leak rather than free a string a caller may hold */
	r->s = s;
	r->next = retired_expansions;
	retired_expansions = r;
}

static void node_free(struct config_node *n)
{
	struct config_node *c = n->first_child;

	while (c != NULL) {
		struct config_node *next = c->next;

		node_free(c);
		c = next;
	}
	free(n->name);
	free(n->value);
	retire(n->expanded);
	if (n != &config_root)
		free(n);
}

void config_reset(void)
{
	node_free(&config_root);
	while (retired_expansions != NULL) {
		struct retired *r = retired_expansions;

		retired_expansions = r->next;
		free(r->s);
		free(r);
	}
	memset(&config_root, 0, sizeof(config_root));
	config_generation++;
}

static bool segment_valid(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!isalnum(c) && c != '_' && c != '-' && c != ':')
			return false;
	}
	return true;
}

static struct config_node *child_lookup(struct config_node *parent, const char *name, size_t len)
{
	for (struct config_node *c = parent->first_child; c != NULL; c = c->next)
		if (strlen(c->name) == len && memcmp(c->name, name, len) == 0)
			return c;
	return NULL;
}

static struct config_node *child_add(struct config_node *parent, const char *name, size_t len)
{
	struct config_node *c = calloc(1, sizeof(*c));

	if (c == NULL || (c->name = strndup(name, len)) == NULL) {
		free(c);
		return NULL;
	}
	c->parent = parent;
	if (parent->last_child != NULL)
		parent->last_child->next = c;
	else
		parent->first_child = c;
	parent->last_child = c;
	return c;
}

/*
 * Walk `path` below `base`.  With `create`, missing inner nodes are made and
 * the final segment is created as an empty leaf-or-node.  Returns NULL on an
 * invalid path, on a value in the middle of the path, or (without create)
 * when absent.
 */
static bool path_valid(const char *path)
{
	const char *seg = path;

	if (strlen(path) >= CONFIG_PATH_MAX)
		return false;
	for (;;) {
		const char *dot = strchr(seg, '.');
		size_t len = dot ? (size_t)(dot - seg) : strlen(seg);

		if (!segment_valid(seg, len))
			return false;
		if (dot == NULL)
			return true;
		seg = dot + 1;
	}
}

/* Length of the dotted path from the root to `n`. */
static size_t node_path_len(const struct config_node *n)
{
	size_t len = 0;

	for (; n != NULL && n->parent != NULL; n = n->parent)
		len += strlen(n->name) + (n->parent->parent != NULL ? 1 : 0);
	return len;
}

static struct config_node *node_walk(struct config_node *base, const char *path, bool create)
{
	struct config_node *n = base;
	const char *seg = path;

	/* Check everything first: a failed set must not leave nodes behind. */
	if (!path_valid(path) ||
	    (create && node_path_len(base) + 1 + strlen(path) >= CONFIG_PATH_MAX))
		return NULL;

	for (;;) {
		const char *dot = strchr(seg, '.');
		size_t len = dot ? (size_t)(dot - seg) : strlen(seg);
		struct config_node *c;

		if (!segment_valid(seg, len) || n->value != NULL)
			return NULL;
		c = child_lookup(n, seg, len);
		if (c == NULL) {
			if (!create)
				return NULL;
			c = child_add(n, seg, len);
			if (c == NULL)
				return NULL;
		}
		n = c;
		if (dot == NULL)
			return n;
		seg = dot + 1;
	}
}

int config_node_set(struct config_node *node, const char *name, const char *value)
{
	struct config_node *n, *existing;
	char *copy;

	if (value == NULL)
		return -1;
	/* An existing inner node cannot become a value. */
	existing = node_walk(node, name, false);
	if (existing != NULL && existing->first_child != NULL)
		return -1;
	n = existing != NULL ? existing : node_walk(node, name, true);
	if (n == NULL)
		return -1;
	copy = strdup(value);
	if (copy == NULL)
		return -1;
	free(n->value);
	n->value = copy;
	config_generation++;
	return 0;
}

int config_set(const char *path, const char *value)
{
	return config_node_set(&config_root, path, value);
}

static void node_unlink(struct config_node *n)
{
	struct config_node *p = n->parent, **pp = &p->first_child, *prev = NULL;

	while (*pp != n) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	*pp = n->next;
	if (p->last_child == n)
		p->last_child = prev;
}

void config_unset(const char *path)
{
	struct config_node *n = node_walk(&config_root, path, false);

	if (n == NULL)
		return;
	node_unlink(n);
	node_free(n);
	config_generation++;
}

struct config_node *config_find_node(const char *path)
{
	struct config_node *n = node_walk(&config_root, path, false);

	return (n != NULL && n->value == NULL) ? n : NULL;
}

struct config_node *config_create_node(const char *path)
{
	struct config_node *n = node_walk(&config_root, path, true);

	return (n != NULL && n->value == NULL) ? n : NULL;
}

/* Append `s` (length `len`) to the growing string *buf. */
static int str_append(char **buf, size_t *used, const char *s, size_t len, size_t *budget)
{
	char *nb;

	if (len > *budget)
		return -1;
	*budget -= len;
	nb = realloc(*buf, *used + len + 1);
	if (nb == NULL)
		return -1;
	memcpy(nb + *used, s, len);
	*used += len;
	nb[*used] = '\0';
	*buf = nb;
	return 0;
}

/* Expand %(path) references in `raw` into a new string; unknown
 * references, cycles and references nested deeper than
 * CONFIG_EXPAND_DEPTH expand to "".  NULL when out of memory or out of
 * `budget` (CONFIG_EXPAND_BUDGET for the whole expansion). */
static char *expand_string(const char *raw, int depth, size_t *budget)
{
	char *out = NULL;
	size_t used = 0;
	const char *p = raw;

	if (str_append(&out, &used, "", 0, budget) < 0)
		return NULL;
	while (*p != '\0') {
		const char *ref = strstr(p, "%(");
		const char *end = ref ? strchr(ref + 2, ')') : NULL;
		char name[CONFIG_PATH_MAX];
		struct config_node *n;
		size_t nlen;

		if (ref == NULL || end == NULL) {
			if (str_append(&out, &used, p, strlen(p), budget) < 0)
				goto fail;
			break;
		}
		if (str_append(&out, &used, p, (size_t)(ref - p), budget) < 0 || *budget == 0)
			goto fail;
		--*budget; /* the reference itself, even when it expands to "" */
		nlen = (size_t)(end - ref - 2);
		if (nlen >= sizeof(name))
			nlen = sizeof(name) - 1;
		memcpy(name, ref + 2, nlen);
		name[nlen] = '\0';
		n = node_walk(&config_root, name, false);
		if (n != NULL && n->value != NULL && !n->expanding && depth < CONFIG_EXPAND_DEPTH) {
			char *sub;

			n->expanding = true;
			sub = expand_string(n->value, depth + 1, budget);
			n->expanding = false;
			if (sub == NULL || str_append(&out, &used, sub, strlen(sub), budget) < 0) {
				free(sub);
				goto fail;
			}
			free(sub);
		}
		p = end + 1;
	}
	return out;
fail:
	free(out);
	return NULL;
}

static const char *node_expand(struct config_node *n)
{
	size_t budget = CONFIG_EXPAND_BUDGET;
	char *fresh;

	if (n == NULL || n->value == NULL)
		return NULL;
	if (strstr(n->value, "%(") == NULL)
		return n->value;
	if (n->expanded != NULL && n->expanded_gen == config_generation)
		return n->expanded;
	n->expanding = true;
	fresh = expand_string(n->value, 0, &budget);
	n->expanding = false;
	if (fresh == NULL) {
		log_ratelimited(&expand_rl, LOG_ERR,
		                "config: %s expands to more than %u bytes; taken as unset", n->name,
		                CONFIG_EXPAND_BUDGET);
		return NULL;
	}
	retire(n->expanded);
	n->expanded = fresh;
	n->expanded_gen = config_generation;
	return n->expanded;
}

const char *config_get(const char *path)
{
	return node_expand(node_walk(&config_root, path, false));
}

const char *config_get_default(const char *path, const char *def)
{
	const char *v = config_get(path);

	return v != NULL ? v : def;
}

const char *config_node_get(struct config_node *node, const char *name)
{
	return node_expand(node_walk(node, name, false));
}

static int parse_bool(const char *v, bool def, bool *out)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};

	if (v == NULL) {
		*out = def;
		return 0;
	}
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

int config_get_bool(const char *path, bool def, bool *out)
{
	return parse_bool(config_get(path), def, out);
}

int config_node_get_bool(struct config_node *node, const char *name, bool def, bool *out)
{
	return parse_bool(config_node_get(node, name), def, out);
}

struct config_node *config_root_node(void)
{
	return &config_root;
}

struct config_node *config_node_first(struct config_node *node)
{
	return node != NULL ? node->first_child : NULL;
}

struct config_node *config_node_next(struct config_node *child)
{
	return child->next;
}

const char *config_node_name(const struct config_node *node)
{
	return node->name;
}

const char *config_node_value(const struct config_node *node)
{
	return node->value;
}

int config_parse_assignment(const char *kv, char *err, size_t errlen)
{
	const char *eq = strchr(kv, '=');
	char path[CONFIG_PATH_MAX];
	size_t len;

	if (eq == NULL || eq == kv) {
		snprintf(err, errlen, "'%s' is not key=value", kv);
		return -1;
	}
	len = (size_t)(eq - kv);
	if (len >= sizeof(path)) {
		snprintf(err, errlen, "key too long in '%s'", kv);
		return -1;
	}
	memcpy(path, kv, len);
	path[len] = '\0';
	/* `sandbox=off` reads as the issue and khyve.8 spell it; the tree keeps
	 * it as sandbox.enable beside sandbox.log and the other sandbox keys. */
	if (strcmp(path, "sandbox") == 0)
		snprintf(path, sizeof(path), "sandbox.enable");
	if (config_set(path, eq + 1) < 0) {
		snprintf(err, errlen, "invalid config key '%s'", path);
		return -1;
	}
	return 0;
}

static char *trim(char *s)
{
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

/* "key = value" is read as "key=value": blanks around '=' are dropped. */
static int parse_file_line(char *s, char *why, size_t whylen)
{
	char *eq = strchr(s, '=');

	if (eq != NULL) {
		char *k_end = eq, *v = eq + 1;

		while (k_end > s && isspace((unsigned char)k_end[-1]))
			k_end--;
		while (isspace((unsigned char)*v))
			v++;
		memmove(k_end + 1, v, strlen(v) + 1);
		*k_end = '=';
	}
	return config_parse_assignment(s, why, whylen);
}

int config_load_file(const char *file, char *err, size_t errlen)
{
	FILE *f = fopen(file, "r");
	char *line = NULL, why[256];
	size_t cap = 0;
	int lineno = 0, rc = 0;

	if (f == NULL) {
		snprintf(err, errlen, "cannot open config file %s: %s", file, strerror(errno));
		return -1;
	}
	while (getline(&line, &cap, f) >= 0) {
		char *s = trim(line);

		lineno++;
		if (*s == '\0' || *s == '#')
			continue;
		if (parse_file_line(s, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s:%d: %s", file, lineno, why);
			rc = -1;
			break;
		}
	}
	if (rc == 0 && ferror(f)) {
		snprintf(err, errlen, "cannot read config file %s: %s", file, strerror(errno));
		rc = -1;
	}
	free(line);
	fclose(f);
	return rc;
}

static void dump_node(FILE *out, const struct config_node *n, char *prefix, size_t plen)
{
	for (const struct config_node *c = n->first_child; c != NULL; c = c->next) {
		int len = snprintf(prefix + plen, CONFIG_PATH_MAX - plen, "%s%s", plen ? "." : "",
		                   c->name);

		if (len < 0 || plen + (size_t)len >= CONFIG_PATH_MAX)
			continue;
		if (c->value != NULL)
			fprintf(out, "%s=%s\n", prefix, c->value);
		else
			dump_node(out, c, prefix, plen + (size_t)len);
		prefix[plen] = '\0';
	}
}

void config_dump(FILE *out)
{
	char prefix[CONFIG_PATH_MAX] = "";

	dump_node(out, &config_root, prefix, 0);
}
