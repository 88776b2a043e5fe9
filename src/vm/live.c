/* A running guest's state and counters from its API socket (live.h). */
#include "vm/live.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "lib/apiclient.h"

#define LIVE_TIMEOUT_MS 1000 /* per guest: vm list stays quick with a hung khyve */

cJSON *vm_live_get(const struct vm_guest *g, const char *endpoint, long timeout_ms)
{
	char sock[PATH_MAX], err[PATH_MAX + 128];
	struct apic_reply r;
	cJSON *j = NULL;

	if (snprintf(sock, sizeof(sock), "%s/%s", g->dir, VM_API_SOCKET) >= API_SOCKET_MAX)
		return NULL;
	if (apic_call(sock, "GET", endpoint, NULL, timeout_ms, &r, err, sizeof(err)) != API_CALL_OK)
		return NULL;
	if (r.status == 200 && r.body)
		j = cJSON_Parse(r.body);
	apic_reply_free(&r);
	return j;
}

static cJSON *live_get(const struct vm_guest *g, const char *endpoint)
{
	return vm_live_get(g, endpoint, LIVE_TIMEOUT_MS);
}

int vm_live_state(const struct vm_guest *g, char *out, size_t len)
{
	cJSON *j = live_get(g, "vm.info");
	const cJSON *state = cJSON_GetObjectItemCaseSensitive(j, "state");
	int rc = -1;

	out[0] = '\0';
	/* Only the states the API names: a word of letters, shown as it is. */
	if (cJSON_IsString(state) && state->valuestring[0] &&
	    strspn(state->valuestring, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") ==
	        strlen(state->valuestring) &&
	    strlen(state->valuestring) < len) {
		snprintf(out, len, "%s", state->valuestring);
		rc = 0;
	}
	cJSON_Delete(j);
	return rc;
}

/* A source's counter `key`, or 0 when it has none. */
static double num(const cJSON *src, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, key);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* One line per source of `group`: "    PREFIXNAME: k=v k=v ..." for `keys`. */
static void show_group(const cJSON *json, const char *group, const char *prefix,
                       const char *const *keys, size_t nkeys)
{
	const cJSON *src;
	unsigned n = 0;

	cJSON_ArrayForEach(src, cJSON_GetObjectItemCaseSensitive(json, group))
	{
		if (!cJSON_IsObject(src) || ++n > 1024)
			break;
		printf("    %s%s:", prefix, src->string);
		for (size_t i = 0; i < nkeys; i++) {
			size_t kl = strlen(keys[i]);
			/* "io_exits_total" -> "io-exits" */
			printf(" ");
			for (size_t c = 0;
			     c < kl - (kl > 6 && !strcmp(keys[i] + kl - 6, "_total") ? 6 : 0); c++)
				putchar(keys[i][c] == '_' ? '-' : keys[i][c]);
			printf("=%.0f", num(src, keys[i]));
		}
		printf("\n");
	}
}

void vm_live_show_counters(const struct vm_guest *g)
{
	static const char *const vcpu[] = {"exits_total", "io_exits_total", "mmio_exits_total",
	                                   "halt_exits_total"};
	static const char *const disk[] = {"reads_total", "writes_total", "read_bytes_total",
	                                   "write_bytes_total", "errors_total"};
	static const char *const nic[] = {"rx_packets_total", "rx_bytes_total", "tx_packets_total",
	                                  "tx_bytes_total"};
	cJSON *j = live_get(g, "vm.counters");

	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return;
	}
	printf("\n  counters\n");
	printf("    uptime-ms: %.0f\n", num(j, "uptime_ms"));
	show_group(j, "vcpu", "vcpu", vcpu, sizeof(vcpu) / sizeof(vcpu[0]));
	show_group(j, "disk", "", disk, sizeof(disk) / sizeof(disk[0]));
	show_group(j, "nic", "", nic, sizeof(nic) / sizeof(nic[0]));
	cJSON_Delete(j);
}

/* Bytes as vm info shows sizes: "1536M" (MiB, rounded down). */
static void show_mib(const char *name, double bytes)
{
	printf("    %s: %lluM\n", name, bytes > 0 ? (unsigned long long)(bytes / 1048576.0) : 0ull);
}

/* A guest statistic: "-" when the driver did not report it (a Linux guest
 * sends only the ones its kernel knows), never a made-up 0M. */
static void show_stat_mib(const cJSON *stats, const char *name, const char *key)
{
	if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(stats, key)))
		show_mib(name, num(stats, key));
	else
		printf("    %s: -\n", name);
}

void vm_live_show_memory(const struct vm_guest *g)
{
	cJSON *j = live_get(g, "vm.balloon");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "stats");

	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return;
	}
	printf("\n  memory (virtio-balloon)\n");
	show_mib("ram", num(j, "memory_bytes"));
	show_mib("target", num(j, "target_bytes"));
	show_mib("guest-keeps", num(j, "actual_bytes"));
	show_mib("reported-free", num(j, "reported_bytes"));
	if (cJSON_IsObject(st)) {
		show_stat_mib(st, "guest-total", "total_memory");
		show_stat_mib(st, "guest-free", "free_memory");
		show_stat_mib(st, "guest-available", "available_memory");
		show_stat_mib(st, "guest-caches", "disk_caches");
	}
	cJSON_Delete(j);
}
