#include "lib/devopts.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config.h"

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

int devopts_check_keys(struct config_node *node, const char *const *keys, size_t nkeys, char *err,
                       size_t errlen)
{
	for (struct config_node *k = config_node_first(node); k; k = config_node_next(k)) {
		bool known = false;

		for (size_t i = 0; i < nkeys && !known; i++)
			known = strcmp(config_node_name(k), keys[i]) == 0;
		if (!known) {
			snprintf(err, errlen, "unknown option '%s'", config_node_name(k));
			return -1;
		}
	}
	return 0;
}
