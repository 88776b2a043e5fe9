/*
 * Running ip, nft and dnsmasq, and reading interfaces through `ip -j`
 * (switch.h).  Tools run with fork/execvp and memfd-backed stdio, so a
 * daemon that keeps our stderr open (dnsmasq) cannot make us wait.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vm/switch.h"
#include "vm/util.h"

#define TOOL_ARGS_MAX 32

int vm_ip(char *err, size_t errlen, const char *what, ...)
{
	const char *argv[TOOL_ARGS_MAX + 2] = {"ip"};
	size_t n = 1;
	va_list ap;

	va_start(ap, what);
	for (const char *a; (a = va_arg(ap, const char *)) && n <= TOOL_ARGS_MAX;)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	return vm_tool_run(&(struct vm_tool){.argv = argv, .what = what}, err, errlen);
}

/* `ip -j ARGS` parsed; NULL with `err` on failure. */
static cJSON *ip_json(const char *const args[], const char *what, char *err, size_t errlen)
{
	const char *argv[TOOL_ARGS_MAX + 3] = {"ip", "-j"};
	size_t n = 2;
	char *out;
	cJSON *json;

	for (size_t i = 0; args[i] && n < TOOL_ARGS_MAX; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	if (vm_tool_run(&(struct vm_tool){.argv = argv, .out = &out, .what = what}, err, errlen) <
	    0)
		return NULL;
	json = cJSON_Parse(out);
	free(out);
	if (!cJSON_IsArray(json)) {
		snprintf(err, errlen, "%s: cannot parse the output of ip -j", what);
		cJSON_Delete(json);
		return NULL;
	}
	return json;
}

static void copy_json_string(const cJSON *obj, const char *key, char *out, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	snprintf(out, len, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static bool has_inet(const cJSON *link)
{
	const cJSON *addrs = cJSON_GetObjectItemCaseSensitive(link, "addr_info"), *a;

	cJSON_ArrayForEach(a, addrs)
	{
		const cJSON *fam = cJSON_GetObjectItemCaseSensitive(a, "family");
		if (cJSON_IsString(fam) && !strcmp(fam->valuestring, "inet"))
			return true;
	}
	return false;
}

int vm_link_get(const char *name, struct vm_link *l, char *err, size_t errlen)
{
	const char *args[] = {"-d", "addr", "show", "dev", name, NULL};
	char what[64];
	cJSON *json, *link;
	const cJSON *mtu;

	memset(l, 0, sizeof(*l));
	/* if_nametoindex() asks the kernel in our network namespace (/sys
	 * may show another's); a missing link is an answer, not an error. */
	if (!vm_ifname_valid(name) || if_nametoindex(name) == 0)
		return 0;
	snprintf(what, sizeof(what), "reading interface %s", name);
	if (!(json = ip_json(args, what, err, errlen)))
		return -1;
	link = cJSON_GetArrayItem(json, 0);
	if (link) {
		l->exists = true;
		copy_json_string(cJSON_GetObjectItemCaseSensitive(link, "linkinfo"), "info_kind",
		                 l->kind, sizeof(l->kind));
		copy_json_string(link, "master", l->master, sizeof(l->master));
		copy_json_string(link, "ifalias", l->alias, sizeof(l->alias));
		mtu = cJSON_GetObjectItemCaseSensitive(link, "mtu");
		l->mtu = cJSON_IsNumber(mtu) ? (unsigned)mtu->valuedouble : 0;
		l->has_ipv4 = has_inet(link);
	}
	cJSON_Delete(json);
	return 0;
}

int vm_link_ports(const char *bridge,
                  void (*fn)(const char *name, const char *kind, const char *alias, void *arg),
                  void *arg, char *err, size_t errlen)
{
	const char *args[] = {"-d", "link", "show", "master", bridge, NULL};
	char what[64], name[VM_IFNAME_MAX + 1], kind[16], alias[256];
	cJSON *json;
	const cJSON *link;

	snprintf(what, sizeof(what), "reading the ports of %s", bridge);
	if (!(json = ip_json(args, what, err, errlen)))
		return -1;
	cJSON_ArrayForEach(link, json)
	{
		copy_json_string(link, "ifname", name, sizeof(name));
		copy_json_string(cJSON_GetObjectItemCaseSensitive(link, "linkinfo"), "info_kind",
		                 kind, sizeof(kind));
		copy_json_string(link, "ifalias", alias, sizeof(alias));
		fn(name, kind, alias, arg);
	}
	cJSON_Delete(json);
	return 0;
}

static unsigned long long stat_bytes(const cJSON *stats, const char *dir)
{
	const cJSON *v =
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(stats, dir), "bytes");

	return cJSON_IsNumber(v) ? (unsigned long long)v->valuedouble : 0;
}

int vm_link_bytes(const char *name, unsigned long long *rx, unsigned long long *tx)
{
	const char *args[] = {"-s", "link", "show", "dev", name, NULL};
	char err[256];
	cJSON *json;
	const cJSON *stats;

	if (if_nametoindex(name) == 0 || !(json = ip_json(args, "stats", err, sizeof(err))))
		return -1;
	stats = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(json, 0), "stats64");
	*rx = stat_bytes(stats, "rx");
	*tx = stat_bytes(stats, "tx");
	cJSON_Delete(json);
	return stats ? 0 : -1;
}
