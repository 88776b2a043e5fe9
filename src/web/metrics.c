/*
 * GET /metrics: the Prometheus text exposition format, version 0.0.4
 * (prometheus.io/docs/instrumenting/exposition_formats), built from each
 * running guest's vm.counters (docs/api.md) without a table of names:
 * khyve's counters are already named by Prometheus' conventions
 * (src/lib/counters.h), so a key K of source S of kind G becomes family
 * khyve_<G'>_K with labels {vm, <G'>=S}.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/apiclient.h"
#include "vm/live.h"
#include "vm/state.h"
#include "web/guests.h"

#define METRIC_NAME_MAX 128
#define FAMILIES_MAX    1024 /* a bound on what a hostile counters reply can make us keep */
#define SOURCES_MAX     1024
#define BUCKETS_MAX     64

/* One family: its HELP/TYPE header and its sample lines so far. */
struct family {
	char name[METRIC_NAME_MAX];
	const char *type; /* "counter", "gauge", "histogram" */
	char help[192];
	char *buf;
	size_t len;
	FILE *f; /* open_memstream over buf */
};

struct web_metrics {
	struct family *fam;
	size_t n;
};

struct web_metrics *web_metrics_new(void)
{
	struct web_metrics *m = calloc(1, sizeof(*m));

	if (m && !(m->fam = calloc(FAMILIES_MAX, sizeof(*m->fam)))) {
		free(m);
		return NULL;
	}
	return m;
}

void web_metrics_free(struct web_metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		if (m->fam[i].f)
			fclose(m->fam[i].f);
		free(m->fam[i].buf);
	}
	free(m->fam);
	free(m);
}

/* The family `name` (created with `type` and `help` when new), or NULL
 * when the table is full or its type differs from an earlier one. */
static struct family *family(struct web_metrics *m, const char *name, const char *type,
                             const char *help)
{
	struct family *f;

	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->fam[i].name, name))
			return strcmp(m->fam[i].type, type) ? NULL : &m->fam[i];
	if (m->n == FAMILIES_MAX || strlen(name) >= METRIC_NAME_MAX)
		return NULL;
	f = &m->fam[m->n];
	if (!(f->f = open_memstream(&f->buf, &f->len)))
		return NULL;
	m->n++;
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->type = type;
	snprintf(f->help, sizeof(f->help), "%s", help);
	return f;
}

/* A label value as the format wants it: \\ \" and \n escaped. */
static void put_label_value(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

/* A float value: integers exactly, others to 15 digits (what a double holds
 * reliably: 12345 ms is 12.345 s, not 12.345000000000001). */
static void put_value(FILE *f, double v)
{
	if (v > -9e15 && v < 9e15 && (double)(long long)v == v)
		fprintf(f, "%lld", (long long)v);
	else
		fprintf(f, "%.15g", v);
}

/* Labels of one series: vm, then `key`=`val` when key is set, then extra
 * (already formatted: `le="0.5"`) when set. */
static void put_labels(FILE *f, const char *vm, const char *key, const char *val, const char *extra)
{
	fputs("{vm=\"", f);
	put_label_value(f, vm);
	fputc('"', f);
	if (key) {
		fprintf(f, ",%s=\"", key);
		put_label_value(f, val);
		fputc('"', f);
	}
	if (extra)
		fprintf(f, ",%s", extra);
	fputc('}', f);
}

/* One sample line NAME{labels} VALUE into family `name`. */
static void sample(struct web_metrics *m, const char *name, const char *type, const char *help,
                   const char *vm, const char *key, const char *val, double v)
{
	struct family *f = family(m, name, type, help);

	if (!f)
		return;
	fputs(name, f->f);
	put_labels(f->f, vm, key, val, NULL);
	fputc(' ', f->f);
	put_value(f->f, v);
	fputc('\n', f->f);
}

void web_metrics_guest_counts(struct web_metrics *m, unsigned running, unsigned stopped,
                              unsigned paused)
{
	static const char *const states[] = {"running", "stopped", "paused"};
	unsigned n[] = {running, stopped, paused};
	struct family *f = family(m, "khyve_guests", "gauge", "Guests of this host by state.");

	for (size_t i = 0; f && i < 3; i++)
		fprintf(f->f, "khyve_guests{state=\"%s\"} %u\n", states[i], n[i]);
}

/* A counter key we turn into a name: [a-z0-9_], not empty, short. */
static bool key_ok(const char *k)
{
	size_t n = strlen(k);

	return n > 0 && n < 64 && strspn(k, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/*
 * Family name and value scale of key `k` in group `prefix` ("khyve_block"):
 * PREFIX_K, with a unit suffix _ns/_us/_ms (before _total) written _seconds,
 * as Prometheus wants base units.  *counter tells whether K ends _total.
 */
static double family_name(const char *prefix, const char *k, char *out, size_t len, bool *counter)
{
	static const struct {
		const char *suffix;
		double scale;
	} units[] = {{"_ns", 1e-9}, {"_us", 1e-6}, {"_ms", 1e-3}};
	char base[64];
	size_t n;
	double scale = 1;

	snprintf(base, sizeof(base), "%s", k);
	n = strlen(base);
	*counter = n > 6 && !strcmp(base + n - 6, "_total");
	if (*counter)
		base[n -= 6] = '\0';
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (n > 3 && !strcmp(base + n - 3, units[i].suffix)) {
			base[n - 3] = '\0';
			scale = units[i].scale;
			snprintf(out, len, "%s_%s_seconds%s", prefix, base,
			         *counter ? "_total" : "");
			return scale;
		}
	snprintf(out, len, "%s_%s%s", prefix, base, *counter ? "_total" : "");
	return scale;
}

/* A histogram {"buckets":[[le,n],...,["+Inf",n]],"sum":S,"count":C}. */
static void histogram(struct web_metrics *m, const char *name, double scale, const char *help,
                      const char *vm, const char *lkey, const char *lval, const cJSON *h)
{
	const cJSON *buckets = cJSON_GetObjectItemCaseSensitive(h, "buckets");
	const cJSON *sum = cJSON_GetObjectItemCaseSensitive(h, "sum");
	const cJSON *count = cJSON_GetObjectItemCaseSensitive(h, "count");
	const cJSON *b;
	struct family *f;
	char line[METRIC_NAME_MAX + 16], le[48];
	bool inf = false;
	unsigned nb = 0;

	if (!cJSON_IsArray(buckets) || !cJSON_IsNumber(sum) || !cJSON_IsNumber(count))
		return;
	/* Check the whole histogram first, so a bad one adds no partial family. */
	cJSON_ArrayForEach(b, buckets)
	{
		const cJSON *l = cJSON_GetArrayItem(b, 0), *c = cJSON_GetArrayItem(b, 1);
		if (inf || ++nb > BUCKETS_MAX || cJSON_GetArraySize(b) != 2 || !cJSON_IsNumber(c) ||
		    !(cJSON_IsNumber(l) || (cJSON_IsString(l) && !strcmp(l->valuestring, "+Inf"))))
			return;
		inf = cJSON_IsString(l);
	}
	if (!inf || !(f = family(m, name, "histogram", help)))
		return;
	snprintf(line, sizeof(line), "%s_bucket", name);
	cJSON_ArrayForEach(b, buckets)
	{
		const cJSON *l = cJSON_GetArrayItem(b, 0), *c = cJSON_GetArrayItem(b, 1);
		if (cJSON_IsString(l))
			snprintf(le, sizeof(le), "le=\"+Inf\"");
		else
			snprintf(le, sizeof(le), "le=\"%.9g\"", l->valuedouble * scale);
		fputs(line, f->f);
		put_labels(f->f, vm, lkey, lval, le);
		fputc(' ', f->f);
		put_value(f->f, c->valuedouble);
		fputc('\n', f->f);
	}
	fprintf(f->f, "%s_sum", name);
	put_labels(f->f, vm, lkey, lval, NULL);
	fputc(' ', f->f);
	put_value(f->f, sum->valuedouble * scale);
	fprintf(f->f, "\n%s_count", name);
	put_labels(f->f, vm, lkey, lval, NULL);
	fputc(' ', f->f);
	put_value(f->f, count->valuedouble);
	fputc('\n', f->f);
}

/* Every key of one source `src` named `sname` (label `lkey`; NULL: none). */
static void source(struct web_metrics *m, const char *prefix, const char *what, const char *vm,
                   const char *lkey, const char *sname, const cJSON *src)
{
	const cJSON *v;
	unsigned n = 0;

	cJSON_ArrayForEach(v, src)
	{
		char name[METRIC_NAME_MAX], help[192];
		bool counter;
		double scale;

		if (++n > 256)
			break;
		if (!v->string || !key_ok(v->string))
			continue;
		scale = family_name(prefix, v->string, name, sizeof(name), &counter);
		snprintf(help, sizeof(help), "khyve %s counter %s (vm.counters).", what, v->string);
		if (cJSON_IsNumber(v))
			sample(m, name, counter ? "counter" : "gauge", help, vm, lkey, sname,
			       v->valuedouble * scale);
		else if (cJSON_IsObject(v) && !counter)
			histogram(m, name, scale, help, vm, lkey, sname, v);
	}
}

void web_metrics_guest(struct web_metrics *m, const char *vm, bool up, const cJSON *counters)
{
	static const struct {
		const char *group, *prefix, *label, *what;
	} groups[] = {{"vcpu", "khyve_vcpu", "vcpu", "vCPU"},
	              {"disk", "khyve_block", "disk", "disk"},
	              {"nic", "khyve_net", "nic", "NIC"},
	              {"vnc", "khyve_vnc", NULL, "VNC server"}};
	const cJSON *uptime = cJSON_GetObjectItemCaseSensitive(counters, "uptime_ms");

	sample(m, "khyve_guest_up", "gauge", "Whether the guest runs on this host (1) or not (0).",
	       vm, NULL, NULL, up);
	if (!cJSON_IsObject(counters))
		return;
	if (cJSON_IsNumber(uptime))
		sample(m, "khyve_guest_uptime_seconds", "gauge",
		       "Seconds since the guest's khyve started.", vm, NULL, NULL,
		       uptime->valuedouble / 1000);
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		const cJSON *src;
		unsigned n = 0;

		cJSON_ArrayForEach(src, cJSON_GetObjectItemCaseSensitive(counters, groups[i].group))
		{
			if (++n > SOURCES_MAX)
				break;
			if (cJSON_IsObject(src) && src->string)
				source(m, groups[i].prefix, groups[i].what, vm, groups[i].label,
				       src->string, src);
		}
	}
}

char *web_metrics_text(struct web_metrics *m, size_t *len)
{
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);

	if (!f)
		return NULL;
	for (size_t i = 0; i < m->n; i++) {
		struct family *fam = &m->fam[i];
		fflush(fam->f);
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fam->name, fam->help, fam->name,
		        fam->type);
		fwrite(fam->buf, 1, fam->len, f);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	*len = n;
	return out;
}

/* ---- the handler ---- */

struct collect {
	struct web_ctx *ctx;
	struct web_metrics *m;
	unsigned running, stopped, paused;
};

static int collect_one(struct vm_guest *g, void *arg)
{
	struct collect *c = arg;
	struct vm_status st;
	cJSON *counters = NULL;
	bool up;

	vm_status_get(c->ctx->sys, g, &st);
	up = st.state == VM_RUNNING;
	if (up)
		web_guest_ask(g, &st, &counters);
	if (up && !strcmp(st.live, "Paused"))
		c->paused++;
	else if (up)
		c->running++;
	else
		c->stopped++;
	web_metrics_guest(c->m, g->name, up, counters);
	cJSON_Delete(counters);
	return 0;
}

int web_metrics_handler(struct web_req *rq, struct web_resp *rs)
{
	struct collect c = {.ctx = rq->ctx, .m = web_metrics_new()};

	if (!c.m)
		return web_reply_error(rs, 500, "out of memory");
	vm_guest_foreach(rq->ctx->sys, collect_one, &c);
	/* Families may come in any order: the counts are known only now. */
	web_metrics_guest_counts(c.m, c.running, c.stopped, c.paused);
	rs->body = web_metrics_text(c.m, &rs->len);
	web_metrics_free(c.m);
	if (!rs->body)
		return web_reply_error(rs, 500, "out of memory");
	rs->status = 200;
	rs->content_type = "text/plain; version=0.0.4; charset=utf-8";
	return 0;
}
