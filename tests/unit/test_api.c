/*
 * run/api.c: api_handle() with good and malformed requests, on a machine
 * without KVM (machine_init_detached) and with fake counter sources.
 */
#include "unit.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/machine.h"
#include "lib/config.h"
#include "lib/counters.h"
#include "run/api.h"

static struct machine m;
static struct api a;
static struct api_reply r;

static int setup(void **state)
{
	(void)state;
	config_reset();
	counters_reset();
	config_set("memory.size", "512M");
	config_set("pci.0.4.0.device", "virtio-blk");
	config_set("pci.0.4.0.path", "/tmp/disk.img");
	machine_init_detached(&m, "web", NULL, 0, 0);
	assert_int_equal(api_init(&a, &m), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	api_reply_free(&r);
	machine_resume(&m);
	api_close(&a);
	config_reset();
	counters_reset();
	return 0;
}

/* A request with a string body; the reply's body as a string (NUL-ended
 * copy kept in a static buffer). */
static const char *req(const char *method, const char *url, const char *body)
{
	static char text[70000];

	api_reply_free(&r);
	api_handle(&a, method, url, body, body != NULL ? strlen(body) : 0, &r);
	snprintf(text, sizeof(text), "%.*s", (int)r.len, r.body != NULL ? r.body : "");
	return text;
}

static void assert_error(const char *body, int status, const char *msg)
{
	assert_int_equal(r.status, status);
	assert_string_equal(r.content_type, "application/json");
	assert_contains(body, "{\"error\":\"");
	assert_contains(body, msg);
}

static void test_ping(void **state)
{
	const char *b = req("GET", "/api/v1/vmm.ping", NULL);

	(void)state;
	assert_int_equal(r.status, 200);
	assert_contains(b, "\"version\":\"khyve 0.");
	assert_contains(b, "\"pid\":");
}

static void test_unknown_path(void **state)
{
	(void)state;
	assert_error(req("GET", "/api/v1/vm.nothing", NULL), 404, "no such endpoint");
	assert_error(req("GET", "/", NULL), 404, "no such endpoint");
	assert_error(req("GET", "/api/v1/", NULL), 404, "no such endpoint");
	assert_error(req("GET", "/api/v1/vm.info.x", NULL), 404, "no such endpoint");
	assert_error(req("GET", "/api/v2/vm.info", NULL), 404, "no such endpoint");
	assert_error(req("GET", NULL, NULL), 404, "no such endpoint");
	/* a query string is not part of the name */
	req("GET", "/api/v1/vm.info?x=1", NULL);
	assert_int_equal(r.status, 200);
}

static void test_wrong_method(void **state)
{
	(void)state;
	assert_error(req("PUT", "/api/v1/vm.info", NULL), 405, "use GET");
	assert_error(req("GET", "/api/v1/vm.pause", NULL), 405, "use PUT");
	assert_error(req("DELETE", "/api/v1/vm.pause", NULL), 405, "use PUT");
	assert_error(req(NULL, "/api/v1/vm.pause", NULL), 405, "use PUT");
	assert_false(machine_is_paused(&m));
}

static void test_bad_json(void **state)
{
	static const char *const bodies[] = {"{",    "{\"keys\":",    "nope", "{\"keys\":[]} x",
	                                     "[1,2", "\"unterminated"};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bodies); i++)
		assert_error(req("PUT", "/api/v1/vm.send-keys", bodies[i]), 400, "not valid JSON");
	/* an embedded NUL is not JSON either */
	api_reply_free(&r);
	api_handle(&a, "PUT", "/api/v1/vm.pause", "{}\0{}", 5, &r);
	assert_int_equal(r.status, 400);
	assert_false(machine_is_paused(&m));
	/* trailing blanks are fine */
	req("PUT", "/api/v1/vm.send-keys", "{\"keys\":[\"a\"]} \r\n");
	assert_int_equal(r.status, 409); /* valid, but no keyboard */
}

static void test_oversized_body(void **state)
{
	char *big = malloc(API_MAX_BODY + 2);

	(void)state;
	memset(big, ' ', API_MAX_BODY + 1);
	big[API_MAX_BODY + 1] = '\0';
	assert_error(req("PUT", "/api/v1/vm.send-keys", big), 413, "too large");
	/* exactly the cap is parsed (and is only blanks: bad JSON) */
	big[API_MAX_BODY] = '\0';
	assert_error(req("PUT", "/api/v1/vm.send-keys", big), 400, "not valid JSON");
	free(big);
}

/* Key sinks: record what arrives. */
static uint16_t keys[64];
static bool downs[64];
static unsigned nkeys;

static void key_sink(void *arg, bool down, uint16_t qnum)
{
	(void)arg;
	if (nkeys < ARRAY_LEN(keys)) {
		keys[nkeys] = qnum;
		downs[nkeys++] = down;
	}
}

static void test_send_keys(void **state)
{
	(void)state;
	assert_error(req("PUT", "/api/v1/vm.send-keys", "{\"keys\":[\"ctrl-alt-del\"]}"), 409,
	             "no keyboard");
	assert_int_equal(machine_add_key_sink(&m, key_sink, NULL), 0);
	nkeys = 0;
	req("PUT", "/api/v1/vm.send-keys", "{\"keys\":[\"ctrl-alt-del\",\"A\"]}");
	assert_int_equal(r.status, 204);
	assert_null(r.body);
	assert_int_equal(nkeys, 10);
	/* pressed in order, released in reverse: Ctrl 1d, Alt 38, Delete d3 */
	assert_int_equal(keys[0], 0x1d);
	assert_true(downs[0]);
	assert_int_equal(keys[1], 0x38);
	assert_int_equal(keys[2], 0xd3);
	assert_true(downs[2]);
	assert_int_equal(keys[3], 0xd3);
	assert_false(downs[3]);
	assert_int_equal(keys[5], 0x1d);
	assert_false(downs[5]);
	/* 'A' is Shift + a */
	assert_int_equal(keys[6], 0x2a);
	assert_int_equal(keys[7], 0x1e);
	assert_int_equal(keys[9], 0x2a);
	assert_false(downs[9]);
}

static void test_send_keys_bad(void **state)
{
	char many[64 * 4 + 32];
	size_t n;

	(void)state;
	assert_int_equal(machine_add_key_sink(&m, key_sink, NULL), 0);
	nkeys = 0;
	assert_error(req("PUT", "/api/v1/vm.send-keys", "{\"keys\":[\"a\",\"ctrl-nosuch\"]}"), 400,
	             "unknown key 'nosuch'");
	assert_error(req("PUT", "/api/v1/vm.send-keys", "{\"keys\":[\"--a\"]}"), 400,
	             "unknown key");
	assert_error(req("PUT", "/api/v1/vm.send-keys", "{\"keys\":[\"\"]}"), 400, "unknown key");
	assert_error(req("PUT", "/api/v1/vm.send-keys", "{\"keys\":[1]}"), 400, "string");
	assert_error(req("PUT", "/api/v1/vm.send-keys", "{\"keys\":\"a\"}"), 400, "keys");
	assert_error(req("PUT", "/api/v1/vm.send-keys", "{}"), 400, "keys");
	assert_error(req("PUT", "/api/v1/vm.send-keys", NULL), 400, "keys");
	assert_error(req("PUT", "/api/v1/vm.send-keys",
	                 "{\"keys\":[\"ctrl-alt-shift-meta-ctrl-alt-shift-a\"]}"),
	             400, "unknown key");
	/* nothing was typed by a refused request */
	assert_int_equal(nkeys, 0);
	n = (size_t)snprintf(many, sizeof(many), "{\"keys\":[");
	for (int i = 0; i < 65; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "%s\"a\"", i ? "," : "");
	snprintf(many + n, sizeof(many) - n, "]}");
	assert_error(req("PUT", "/api/v1/vm.send-keys", many), 400, "at most 64");
	assert_int_equal(nkeys, 0);
	/* a trailing '-' is the minus key: Ctrl + minus */
	req("PUT", "/api/v1/vm.send-keys", "{\"keys\":[\"ctrl--\"]}");
	assert_int_equal(r.status, 204);
	assert_int_equal(nkeys, 4);
	assert_int_equal(keys[1], 0x0c);
}

static void test_pause_twice(void **state)
{
	(void)state;
	assert_contains(req("GET", "/api/v1/vm.info", NULL), "\"state\":\"Running\"");
	req("PUT", "/api/v1/vm.pause", NULL);
	assert_int_equal(r.status, 204);
	assert_true(machine_is_paused(&m));
	assert_error(req("PUT", "/api/v1/vm.pause", ""), 409, "already paused");
	assert_contains(req("GET", "/api/v1/vm.info", NULL), "\"state\":\"Paused\"");
	req("PUT", "/api/v1/vm.resume", "{}");
	assert_int_equal(r.status, 204);
	assert_error(req("PUT", "/api/v1/vm.resume", NULL), 409, "not paused");
	/* while the start is held, there is nothing to pause */
	machine_hold_start(&m);
	assert_contains(req("GET", "/api/v1/vm.info", NULL), "\"state\":\"Starting\"");
	assert_error(req("PUT", "/api/v1/vm.pause", NULL), 409, "starting");
	machine_release_start(&m);
}

static void test_exits_after_reply(void **state)
{
	(void)state;
	req("PUT", "/api/v1/vm.reset", NULL);
	assert_int_equal(r.status, 204);
	assert_int_equal(r.exit_after, KHYVE_EXIT_RESET);
	req("PUT", "/api/v1/vm.power-off", NULL);
	assert_int_equal(r.exit_after, KHYVE_EXIT_POWEROFF);
	req("GET", "/api/v1/vm.info", NULL);
	assert_int_equal(r.exit_after, -1);
	/* nothing was requested yet: the HTTP glue does that once sent */
	assert_false(m.exit_requested);
}

static void test_power_button_no_pm(void **state)
{
	(void)state;
	assert_error(req("PUT", "/api/v1/vm.power-button", NULL), 409, "not listening");
}

static void test_screenshot_no_display(void **state)
{
	(void)state;
	assert_error(req("GET", "/api/v1/vm.screenshot", NULL), 404, "no display");
}

static int fake_shot(void *arg, uint32_t **px, uint32_t *w, uint32_t *h)
{
	(void)arg;
	*w = 3;
	*h = 2;
	*px = calloc(6, sizeof(uint32_t));
	(*px)[0] = 0xff0000;
	return 0;
}

static void test_screenshot_png(void **state)
{
	static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

	(void)state;
	machine_set_screenshot(&m, fake_shot, NULL);
	req("GET", "/api/v1/vm.screenshot", NULL);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.content_type, "image/png");
	assert_true(r.len > 8 + 25);
	assert_memory_equal(r.body, sig, 8);
	/* IHDR: width 3, height 2, 8 bits, RGB */
	assert_memory_equal(r.body + 12, "IHDR\0\0\0\3\0\0\0\2\10\2", 14);
}

static void test_info_config(void **state)
{
	cJSON *o, *cfg;

	(void)state;
	o = cJSON_Parse(req("GET", "/api/v1/vm.info", NULL));
	assert_non_null(o);
	assert_string_equal(cJSON_GetObjectItem(o, "name")->valuestring, "web");
	assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "uptime_ms")));
	assert_int_equal(cJSON_GetObjectItem(o, "vcpus")->valueint, 1);
	cfg = cJSON_GetObjectItem(o, "config");
	assert_string_equal(cJSON_GetObjectItem(cfg, "memory.size")->valuestring, "512M");
	assert_string_equal(cJSON_GetObjectItem(cfg, "pci.0.4.0.device")->valuestring,
	                    "virtio-blk");
	assert_string_equal(cJSON_GetObjectItem(cfg, "pci.0.4.0.path")->valuestring,
	                    "/tmp/disk.img");
	cJSON_Delete(o);
}

/* Fake sources: two vCPUs, a disk with a histogram, nothing else. */
static void read_vcpu(void *arg, struct counter_out *o)
{
	o->put(o, "exits_total", (uint64_t)(uintptr_t)arg);
	o->put(o, "halt_exits_total", 7);
}

static struct lat_hist hist;

static void read_disk(void *arg, struct counter_out *o)
{
	(void)arg;
	o->put(o, "reads_total", 3);
	counter_put_lat(o, "latency_us", &hist);
}

static void test_counters_shape(void **state)
{
	static struct counter_source v0 = {
	    .kind = COUNTER_VCPU, .name = "0", .read = read_vcpu, .arg = (void *)(uintptr_t)100};
	static struct counter_source v1 = {
	    .kind = COUNTER_VCPU, .name = "1", .read = read_vcpu, .arg = (void *)(uintptr_t)200};
	static struct counter_source d0 = {
	    .kind = COUNTER_DISK, .name = "disk0", .read = read_disk};
	const char *b;
	cJSON *o, *buckets, *last;

	(void)state;
	memset(&hist, 0, sizeof(hist));
	lat_hist_add(&hist, 10 * 1000);        /* 10 us: first bucket */
	lat_hist_add(&hist, 100ull * 1000000); /* 100 ms */
	assert_int_equal(counters_register(&v0), 0);
	assert_int_equal(counters_register(&v1), 0);
	assert_int_equal(counters_register(&d0), 0);
	b = req("GET", "/api/v1/vm.counters", NULL);
	assert_int_equal(r.status, 200);
	assert_contains(b, "\"vcpu\":{\"0\":{\"exits_total\":100,\"halt_exits_total\":7},"
	                   "\"1\":{\"exits_total\":200,");
	assert_contains(b, "\"nic\":{}");
	assert_contains(b, "\"vnc\":{}");
	assert_contains(b, "\"latency_us\":{\"buckets\":[[16,1],[32,1],");
	assert_contains(b, "[\"+Inf\",2]],\"sum\":100010,\"count\":2}");
	o = cJSON_Parse(b);
	assert_non_null(o);
	assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "uptime_ms")));
	buckets = cJSON_GetObjectItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "disk"), "disk0"),
	                        "latency_us"),
	    "buckets");
	assert_int_equal(cJSON_GetArraySize(buckets), LAT_HIST_BUCKETS);
	last = cJSON_GetArrayItem(buckets, LAT_HIST_BUCKETS - 1);
	assert_string_equal(cJSON_GetArrayItem(last, 0)->valuestring, "+Inf");
	cJSON_Delete(o);
}

static void test_counters_empty(void **state)
{
	(void)state;
	assert_contains(req("GET", "/api/v1/vm.counters", NULL),
	                "\"vcpu\":{},\"disk\":{},\"nic\":{},\"vnc\":{}}");
}

/* A fake removable-medium drive (M1's ahci-cd is not here yet). */
static struct fake_drive {
	bool present, locked;
	uint64_t bytes;
	int fd;      /* the medium's fd, -1 none */
	int changes; /* change() calls */
} fd0;

static int fake_change(void *dev, int fd, bool force, char *err, size_t errlen)
{
	struct fake_drive *d = dev;
	struct stat st;

	d->changes++;
	if (d->locked && !force) {
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "the guest locked the tray (force ejects anyway)");
		return -1;
	}
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		snprintf(err, errlen, "not a regular file or block device");
		return -1;
	}
	if (d->fd >= 0)
		close(d->fd);
	d->fd = fd;
	d->present = fd >= 0;
	d->bytes = fd >= 0 ? (uint64_t)st.st_size : 0;
	return 0;
}

static void fake_state(void *dev, bool *present, bool *locked, uint64_t *bytes)
{
	struct fake_drive *d = dev;

	*present = d->present;
	*locked = d->locked;
	*bytes = d->bytes;
}

static void add_fake_drive(void)
{
	struct machine_media_drive d = {.name = "cd0",
	                                .device = "ahci-cd",
	                                .slot = "4:0",
	                                .port = 2,
	                                .dev = &fd0,
	                                .change = fake_change,
	                                .state = fake_state};

	memset(&fd0, 0, sizeof(fd0));
	fd0.fd = -1;
	assert_int_equal(machine_add_media_drive(&m, &d), 0);
}

static void test_info_drives(void **state)
{
	(void)state;
	assert_contains(req("GET", "/api/v1/vm.info", NULL), "\"drives\":{}");
	add_fake_drive();
	fd0.present = true;
	fd0.bytes = 4096;
	assert_contains(req("GET", "/api/v1/vm.info", NULL),
	                "\"drives\":{\"cd0\":{\"device\":\"ahci-cd\",\"slot\":\"4:0\",\"port\":2,"
	                "\"medium\":true,\"locked\":false,\"bytes\":4096}}");
}

static void test_media_eject(void **state)
{
	(void)state;
	add_fake_drive();
	fd0.fd = open("/dev/null", O_RDONLY);
	fd0.present = true;
	req("PUT", "/api/v1/vm.media-eject", "{\"drive\":\"cd0\"}");
	assert_int_equal(r.status, 204);
	assert_false(fd0.present);
	assert_int_equal(fd0.fd, -1);
	assert_error(req("PUT", "/api/v1/vm.media-eject", "{\"drive\":\"cd1\"}"), 404,
	             "no drive cd1");
	assert_error(req("GET", "/api/v1/vm.media-eject", NULL), 405, "use PUT");
}

static void test_media_eject_locked(void **state)
{
	(void)state;
	add_fake_drive();
	fd0.locked = true;
	fd0.present = true;
	assert_error(req("PUT", "/api/v1/vm.media-eject", "{\"drive\":\"cd0\",\"force\":false}"),
	             409, "the guest locked the tray");
	assert_true(fd0.present);
	req("PUT", "/api/v1/vm.media-eject", "{\"drive\":\"cd0\",\"force\":true}");
	assert_int_equal(r.status, 204);
	assert_false(fd0.present);
}

static void test_media_bad_bodies(void **state)
{
	static const char *const bodies[] = {"",
	                                     "[]",
	                                     "{}",
	                                     "{\"drive\":1}",
	                                     "{\"drive\":\"cd0\",\"force\":1}",
	                                     "{\"drive\":\"cd0\",\"forse\":true}",
	                                     "{\"drive\":null}",
	                                     "\"cd0\""};

	(void)state;
	add_fake_drive();
	for (size_t i = 0; i < ARRAY_LEN(bodies); i++) {
		req("PUT", "/api/v1/vm.media-eject", bodies[i]);
		assert_int_equal(r.status, 400);
		req("PUT", "/api/v1/vm.media-insert", bodies[i]);
		assert_int_equal(r.status, 400);
	}
	assert_error(req("PUT", "/api/v1/vm.media-eject", "{\"drive\":\"cd0\",\"forse\":true}"),
	             400, "unknown key 'forse'");
	assert_int_equal(fd0.changes, 0);
}

static void test_media_insert_plain(void **state)
{
	(void)state;
	add_fake_drive();
	assert_error(req("PUT", "/api/v1/vm.media-insert", "{\"drive\":\"cd0\"}"), 400,
	             "passes the image as a file descriptor");
	assert_error(req("PUT", "/api/v1/vm.media-insert", "{\"drive\":\"cd9\"}"), 404,
	             "no drive cd9");
	assert_int_equal(fd0.changes, 0);
}

/* The two steps the HTTP glue takes for an upgraded vm.media-insert. */
static void test_media_insert_fd(void **state)
{
	const char *good = "{\"drive\":\"cd0\",\"force\":true}";
	bool force = false;
	int idx, fd;

	(void)state;
	add_fake_drive();
	api_reply_free(&r);
	assert_int_equal(api_media_insert_check(&a, "{\"drive\":\"cdx\"}", 15, &force, &r), -1);
	assert_int_equal(r.status, 404);
	api_reply_free(&r);
	assert_int_equal(api_media_insert_check(&a, "{", 1, &force, &r), -1);
	assert_int_equal(r.status, 400);
	api_reply_free(&r);
	idx = api_media_insert_check(&a, good, strlen(good), &force, &r);
	assert_int_equal(idx, 0);
	assert_true(force);
	api_reply_free(&r);
	/* a directory is refused before the drive sees it */
	fd = open("/", O_RDONLY | O_DIRECTORY);
	api_media_insert_fd(&a, idx, false, fd, &r);
	assert_int_equal(r.status, 400);
	assert_contains(r.body, "not a regular file");
	assert_int_equal(fd0.changes, 0);
	api_reply_free(&r);
	/* no fd */
	api_media_insert_fd(&a, idx, false, -1, &r);
	assert_int_equal(r.status, 400);
	api_reply_free(&r);
	/* a file */
	fd = open("/proc/self/exe", O_RDONLY);
	assert_true(fd >= 0);
	api_media_insert_fd(&a, idx, false, fd, &r);
	assert_int_equal(r.status, 204);
	assert_true(fd0.present);
	assert_true(fd0.bytes > 0);
	close(fd0.fd);
	fd0.fd = -1;
	api_reply_free(&r);
	/* a bad index closes the fd */
	api_media_insert_fd(&a, 5, false, open("/dev/null", O_RDONLY), &r);
	assert_int_equal(r.status, 404);
}

/* ---- vm.balloon, with a fake balloon ---- */

static uint64_t fake_target, fake_refresh;

static int fake_set_target(void *dev, uint64_t bytes, char *err, size_t errlen)
{
	(void)dev;
	if (bytes > (512u << 20)) {
		snprintf(err, errlen, "more than the RAM");
		return -1;
	}
	fake_target = bytes;
	return 0;
}

static void fake_info(void *dev, unsigned refresh_ms, struct machine_balloon_info *out)
{
	(void)dev;
	fake_refresh = refresh_ms;
	memset(out, 0, sizeof(*out));
	out->ram_bytes = 512u << 20;
	out->target_bytes = fake_target;
	out->actual_bytes = 256u << 20;
	out->reported_bytes = 4096;
	out->reporting = true;
	out->stats_valid = true;
	out->nstats = 1;
	out->stat[0].name = "free_memory";
	out->stat[0].value = 1000;
}

static void test_balloon(void **state)
{
	(void)state;
	assert_error(req("GET", "/api/v1/vm.balloon", NULL), 409, "no virtio-balloon");
	assert_error(req("PUT", "/api/v1/vm.balloon", "{\"memory_bytes\":1}"), 409,
	             "no virtio-balloon");
	m.balloon = (struct machine_balloon){&m, fake_set_target, fake_info};
	req("PUT", "/api/v1/vm.balloon", "{\"memory_bytes\":268435456}");
	assert_int_equal(r.status, 204);
	assert_int_equal(fake_target, 256u << 20);
	assert_contains(req("GET", "/api/v1/vm.balloon", NULL),
	                "{\"memory_bytes\":536870912,\"target_bytes\":268435456,"
	                "\"actual_bytes\":268435456,\"reported_bytes\":4096,"
	                "\"free_page_reporting\":true,\"deflate_on_oom\":false,");
	assert_contains(req("GET", "/api/v1/vm.balloon", NULL), "\"stats\":{\"free_memory\":1000}");
	assert_int_equal(fake_refresh, 500);
	assert_contains(req("GET", "/api/v1/vm.info", NULL), "\"balloon\":{\"memory_bytes\":");
	assert_int_equal(fake_refresh, 0);
	assert_error(req("PUT", "/api/v1/vm.balloon", "{\"memory_bytes\":1073741824}"), 400,
	             "more than the RAM");
	static const char *const bad[] = {"",
	                                  "{}",
	                                  "{\"memory_bytes\":-1}",
	                                  "{\"memory_bytes\":1.5}",
	                                  "{\"memory_bytes\":\"1G\"}",
	                                  "{\"memory_bytes\":1,\"x\":2}",
	                                  "[1]"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_error(req("PUT", "/api/v1/vm.balloon", bad[i]), 400, "memory_bytes");
	assert_error(req("DELETE", "/api/v1/vm.balloon", NULL), 405, "use GET");
	m.balloon = (struct machine_balloon){0};
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_ping),
	    T(test_unknown_path),
	    T(test_wrong_method),
	    T(test_bad_json),
	    T(test_oversized_body),
	    T(test_send_keys),
	    T(test_send_keys_bad),
	    T(test_pause_twice),
	    T(test_exits_after_reply),
	    T(test_power_button_no_pm),
	    T(test_screenshot_no_display),
	    T(test_screenshot_png),
	    T(test_info_config),
	    T(test_counters_shape),
	    T(test_counters_empty),
	    T(test_info_drives),
	    T(test_media_eject),
	    T(test_media_eject_locked),
	    T(test_media_bad_bodies),
	    T(test_media_insert_plain),
	    T(test_media_insert_fd),
	    T(test_balloon),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
