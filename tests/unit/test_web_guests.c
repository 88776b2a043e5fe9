/*
 * Unit tests for vm web's guest views (src/web/guests.h): /metrics text
 * from a vm.counters reply (checked with promtool when it is installed),
 * ISO upload names and life cycle, POST /api/guests validation, tasks,
 * and the read-only handlers against a scratch vm_dir.
 */
#include "unit.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "vm/supervisor.h"
#include "web/guests.h"

static char *dir; /* scratch: khyve.conf and vms/ */
static char vm_dir[PATH_MAX];
static struct vm_sys sys;
static struct web_ctx ctx;
static struct web_session admin = {.user = "alice", .role = WEB_ROLE_ADMIN};

/* vm.counters as tests/api/fake-khyve serves it (docs/api.md's shape). */
static const char counters_json[] =
    "{\"uptime_ms\":12345,"
    "\"vcpu\":{\"0\":{\"exits_total\":1000,\"io_exits_total\":400,\"halt_exits_total\":500,"
    "\"halt_wait_ns_total\":1500000000,\"userspace_exits_total\":7,\"pf_fixed_total\":3},"
    "\"1\":{\"exits_total\":1001,\"io_exits_total\":401,\"halt_exits_total\":501}},"
    "\"disk\":{\"disk0\":{\"reads_total\":120,\"writes_total\":45,\"read_bytes_total\":491520,"
    "\"write_bytes_total\":184320,\"errors_total\":0,"
    "\"latency_us\":{\"buckets\":[[16,0],[64,50],[256,99],[8192,100],[\"+Inf\",100]],"
    "\"sum\":21000,\"count\":100}}},"
    "\"nic\":{\"net0\":{\"rx_packets_total\":33,\"rx_bytes_total\":4096,\"tx_drops_total\":0}},"
    "\"vnc\":{\"vnc\":{\"clients\":1,\"connections_total\":3}}}";

static void mkdirs(const char *sub)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", vm_dir, sub);
	assert_int_equal(mkdir(path, 0755), 0);
}

static void put(const char *sub, const char *text)
{
	free(unit_write_text(vm_dir, sub, text));
}

static int group_setup(void **state)
{
	char conf[PATH_MAX + 32], err[512];

	(void)state;
	dir = unit_mkdtemp();
	snprintf(vm_dir, sizeof(vm_dir), "%s/vms", dir);
	assert_int_equal(mkdir(vm_dir, 0755), 0);
	mkdirs(".config");
	mkdirs(".templates");
	mkdirs(".iso");
	mkdirs("web1");
	mkdirs("db");
	put(".config/system.conf", "switch_list=\"public\"\ntype_public=\"standard\"\n"
	                           "ports_public=\"eth0 eth1\"\naddr_public=\"10.0.0.1/24\"\n");
	put(".templates/default.conf", "loader=\"bhyveload\"\ncpu=1\nmemory=256M\n");
	put(".iso/alpine.iso", "ISO");
	put(".iso/.hidden.iso", "no");
	put("web1/web1.conf", "loader=\"uefi\"\ncpu=2\nmemory=512M\n"
	                      "disk0_type=\"virtio-blk\"\ndisk0_name=\"disk0.img\"\n"
	                      "network0_type=\"virtio-net\"\nnetwork0_switch=\"public\"\n"
	                      "network0_mac=\"58:9c:fc:00:00:01\"\ncomports=\"com1 com2 bogus\"\n");
	put("web1/disk0.img", "12345678");
	put("web1/vm-bhyve.log", "Dec 01 10:00:00: web1 started\nDec 01 10:00:05: web1 stopped\n");
	put("db/db.conf", "cpu=1\n");
	put("db/vm-bhyve.log", "Dec 01 10:00:02: db started\n");
	snprintf(conf, sizeof(conf), "%s/khyve.conf", dir);
	{
		FILE *f = fopen(conf, "w");
		assert_non_null(f);
		fprintf(f, "vm_dir=\"%s\"\nvm_list=\"db\"\n", vm_dir);
		fclose(f);
	}
	setenv("KHYVE_CONF", conf, 1);
	assert_int_equal(vm_sys_load(&sys, err, sizeof(err)), 0);
	ctx.sys = &sys;
	assert_int_equal(web_tasks_init(&ctx), 0);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	web_tasks_free(&ctx);
	vm_sys_free(&sys);
	unit_rmtree(dir);
	free(dir);
	return 0;
}

/* ---- metrics ---- */

static char *metrics_of(const char *vm, const char *json)
{
	struct web_metrics *m = web_metrics_new();
	cJSON *j = cJSON_Parse(json);
	size_t len = 0;
	char *text;

	assert_non_null(m);
	web_metrics_guest_counts(m, 1, 2, 0);
	web_metrics_guest(m, vm, true, j);
	web_metrics_guest(m, "stopped1", false, NULL);
	text = web_metrics_text(m, &len);
	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	cJSON_Delete(j);
	web_metrics_free(m);
	return text;
}

static void test_metrics_families(void **state)
{
	char *t = metrics_of("web", counters_json);

	(void)state;
	assert_contains(t, "# TYPE khyve_guests gauge\n");
	assert_contains(t, "khyve_guests{state=\"stopped\"} 2\n");
	assert_contains(t, "khyve_guest_up{vm=\"web\"} 1\n");
	assert_contains(t, "khyve_guest_up{vm=\"stopped1\"} 0\n");
	assert_contains(t, "khyve_guest_uptime_seconds{vm=\"web\"} 12.345\n");
	assert_contains(t, "# TYPE khyve_vcpu_exits_total counter\n");
	assert_contains(t, "khyve_vcpu_exits_total{vm=\"web\",vcpu=\"1\"} 1001\n");
	assert_contains(t, "khyve_vcpu_halt_wait_seconds_total{vm=\"web\",vcpu=\"0\"} 1.5\n");
	assert_contains(t, "khyve_block_read_bytes_total{vm=\"web\",disk=\"disk0\"} 491520\n");
	assert_contains(t, "# TYPE khyve_block_latency_seconds histogram\n");
	assert_contains(
	    t, "khyve_block_latency_seconds_bucket{vm=\"web\",disk=\"disk0\",le=\"6.4e-05\"} 50\n");
	assert_contains(
	    t, "khyve_block_latency_seconds_bucket{vm=\"web\",disk=\"disk0\",le=\"+Inf\"} 100\n");
	assert_contains(t, "khyve_block_latency_seconds_sum{vm=\"web\",disk=\"disk0\"} 0.021\n");
	assert_contains(t, "khyve_block_latency_seconds_count{vm=\"web\",disk=\"disk0\"} 100\n");
	assert_contains(t, "khyve_net_rx_bytes_total{vm=\"web\",nic=\"net0\"} 4096\n");
	assert_contains(t, "# TYPE khyve_vnc_clients gauge\n");
	assert_contains(t, "khyve_vnc_connections_total{vm=\"web\"} 3\n");
	/* One HELP per family even with two vCPUs. */
	assert_int_equal(
	    strstr(strstr(t, "# HELP khyve_vcpu_exits_total") + 1, "# HELP khyve_vcpu_exits_total"),
	    NULL);
	free(t);
}

/* Two guests' samples of one family stay under one header. */
static void test_metrics_grouped(void **state)
{
	struct web_metrics *m = web_metrics_new();
	cJSON *j = cJSON_Parse(counters_json);
	char *t, *a, *b;
	size_t len;

	(void)state;
	web_metrics_guest(m, "a", true, j);
	web_metrics_guest(m, "b", true, j);
	t = web_metrics_text(m, &len);
	a = strstr(t, "khyve_vcpu_exits_total{vm=\"a\",vcpu=\"0\"}");
	b = strstr(t, "khyve_vcpu_exits_total{vm=\"b\",vcpu=\"0\"}");
	assert_non_null(a);
	assert_non_null(b);
	/* Nothing but khyve_vcpu_exits_total lines between them. */
	for (const char *p = strchr(a, '\n') + 1; p < b; p = strchr(p, '\n') + 1)
		assert_int_equal(strncmp(p, "khyve_vcpu_exits_total{", 23), 0);
	free(t);
	cJSON_Delete(j);
	web_metrics_free(m);
}

static void test_metrics_escape_and_hostile(void **state)
{
	char *t = metrics_of(
	    "we\"b\\x\ny",
	    "{\"uptime_ms\":\"no\",\"vcpu\":{\"0\":{\"Bad-Key\":1,\"x_total\":\"s\","
	    "\"halt_wait_ns_total\":2000000000,\"h\":{\"buckets\":[[1,2]],\"sum\":1,"
	    "\"count\":2}}},\"disk\":[1,2],\"nic\":{\"n\\\"0\":{\"rx_bytes_total\":1}}}");

	(void)state;
	assert_contains(t, "khyve_guest_up{vm=\"we\\\"b\\\\x\\ny\"} 1\n");
	assert_contains(t, "khyve_net_rx_bytes_total{vm=\"we\\\"b\\\\x\\ny\",nic=\"n\\\"0\"} 1\n");
	assert_contains(t, "khyve_vcpu_halt_wait_seconds_total{vm=");
	assert_contains(t, "} 2\n");
	assert_not_contains(t, "Bad-Key");
	assert_not_contains(t, "x_total");
	assert_not_contains(t, "khyve_vcpu_h_"); /* a histogram without +Inf is dropped */
	assert_not_contains(t, "uptime");
	free(t);
}

/* promtool check metrics prints nothing for our text (when installed). */
static void test_metrics_promtool(void **state)
{
	char path[PATH_MAX + 16], cmd[3 * PATH_MAX], *t;
	FILE *f;

	(void)state;
	if (access("/usr/bin/promtool", X_OK) != 0)
		skip();
	t = metrics_of("web", counters_json);
	snprintf(path, sizeof(path), "%s/metrics.txt", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(t, f);
	fclose(f);
	free(t);
	snprintf(cmd, sizeof(cmd), "/usr/bin/promtool check metrics <'%s' >'%s.out' 2>&1", path,
	         path);
	assert_int_equal(system(cmd), 0);
	strcat(path, ".out");
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fgetc(f), EOF);
	fclose(f);
}

/* ---- uploads ---- */

static void test_iso_names(void **state)
{
	char long_name[140];

	(void)state;
	assert_true(web_iso_name_valid("alpine-3.19_x86+64.iso"));
	assert_false(web_iso_name_valid(".iso"));
	assert_false(web_iso_name_valid(".hidden.iso"));
	assert_false(web_iso_name_valid("../x.iso"));
	assert_false(web_iso_name_valid("a/b.iso"));
	assert_false(web_iso_name_valid("a.img"));
	assert_false(web_iso_name_valid("a b.iso"));
	assert_false(web_iso_name_valid("-a.iso"));
	memset(long_name, 'a', sizeof(long_name));
	strcpy(long_name + 125, ".iso"); /* 129 */
	assert_false(web_iso_name_valid(long_name));
	strcpy(long_name + 124, ".iso"); /* 128 */
	assert_true(web_iso_name_valid(long_name));
}

static bool iso_exists(const char *name)
{
	char path[PATH_MAX + 200];

	snprintf(path, sizeof(path), "%s/.iso/%s", vm_dir, name);
	return access(path, F_OK) == 0;
}

static void test_upload_life(void **state)
{
	struct web_upload *u;
	char err[512];
	int status;

	(void)state;
	/* Exact length: renamed, no part left. */
	u = web_upload_begin(&ctx, "new.iso", 6, &status, err, sizeof(err));
	assert_non_null(u);
	assert_true(iso_exists(".new.iso.part"));
	assert_false(iso_exists("new.iso"));
	assert_int_equal(web_upload_write(u, "abc", 3), 0);
	assert_int_equal(web_upload_write(u, "def", 3), 0);
	assert_int_equal(web_upload_write(u, "g", 1), -1); /* beyond Content-Length */
	assert_int_equal(web_upload_finish(u, err, sizeof(err)), 0);
	assert_true(iso_exists("new.iso"));
	assert_false(iso_exists(".new.iso.part"));

	/* Cut off: finish refuses, nothing is left. */
	u = web_upload_begin(&ctx, "cut.iso", 10, &status, err, sizeof(err));
	assert_non_null(u);
	assert_int_equal(web_upload_write(u, "abc", 3), 0);
	assert_int_equal(web_upload_finish(u, err, sizeof(err)), -1);
	assert_contains(err, "cut off after 3 of 10 bytes");
	assert_false(iso_exists("cut.iso"));
	assert_false(iso_exists(".cut.iso.part"));

	/* Aborted (the connection closed). */
	u = web_upload_begin(&ctx, "gone.iso", 10, &status, err, sizeof(err));
	assert_non_null(u);
	web_upload_abort(u);
	assert_false(iso_exists(".gone.iso.part"));

	/* Existing name, upload under way, bad name, too large. */
	assert_null(web_upload_begin(&ctx, "alpine.iso", 1, &status, err, sizeof(err)));
	assert_int_equal(status, 409);
	u = web_upload_begin(&ctx, "twice.iso", 1, &status, err, sizeof(err));
	assert_null(web_upload_begin(&ctx, "twice.iso", 1, &status, err, sizeof(err)));
	assert_int_equal(status, 409);
	web_upload_abort(u);
	assert_null(web_upload_begin(&ctx, "../x.iso", 1, &status, err, sizeof(err)));
	assert_int_equal(status, 400);
	assert_null(web_upload_begin(&ctx, "huge.iso", 1ULL << 62, &status, err, sizeof(err)));
	assert_int_equal(status, 507);
	assert_false(iso_exists(".huge.iso.part"));
	assert_int_equal(web_upload_status(ENOSPC), 507);
	assert_int_equal(web_upload_status(EFBIG), 413);
	assert_int_equal(web_upload_status(EIO), 500);
}

/* ---- create validation ---- */

static void expect_create_error(const char *body, const char *msg)
{
	struct web_create c;
	char err[PATH_MAX + 256];

	assert_int_equal(web_create_check(&ctx, body, &c, err, sizeof(err)), -1);
	assert_contains(err, msg);
}

static void test_create_check(void **state)
{
	struct web_create c;
	char err[PATH_MAX + 256], line[512] = "";

	(void)state;
	expect_create_error("[]", "body: want a JSON object");
	expect_create_error("{\"template\":\"default\"}", "name: missing");
	expect_create_error("{\"name\":\"bad name\",\"template\":\"default\"}", "name: ");
	expect_create_error("{\"name\":\"-x\",\"template\":\"default\"}", "name: ");
	expect_create_error("{\"name\":\"web1\",\"template\":\"default\"}", "name: web1 exists");
	expect_create_error("{\"name\":\"n1\",\"template\":\"nope\"}", "template: no such");
	expect_create_error("{\"name\":\"n1\",\"template\":\"../x\"}", "template: no such");
	expect_create_error("{\"name\":\"n1\",\"template\":\"default\",\"iso\":\"../alpine.iso\"}",
	                    "iso: ");
	expect_create_error("{\"name\":\"n1\",\"template\":\"default\",\"iso\":\"/etc/x.iso\"}",
	                    "iso: ");
	expect_create_error("{\"name\":\"n1\",\"template\":\"default\",\"iso\":\"none.iso\"}",
	                    "iso: ");
	expect_create_error("{\"name\":\"n1\",\"template\":\"default\",\"size\":\"big\"}",
	                    "size: ");
	expect_create_error("{\"name\":\"n1\",\"template\":\"default\",\"memory\":\"1Q\"}",
	                    "memory: ");
	expect_create_error("{\"name\":\"n1\",\"template\":\"default\",\"cpus\":\"0\"}", "cpus: ");
	expect_create_error("{\"name\":\"n1\",\"template\":\"default\",\"cpus\":300}", "cpus: ");
	expect_create_error("{\"name\":\"n1\",\"template\":\"default\",\"datastore\":\"zz\"}",
	                    "datastore: ");
	expect_create_error("{\"name\":\"n1\",\"template\":\"default\",\"nmae\":\"x\"}",
	                    "nmae: unknown field");
	expect_create_error("{\"name\":1,\"template\":\"default\"}", "name: want a string");

	assert_int_equal(
	    web_create_check(&ctx,
	                     "{\"name\":\"n1\",\"template\":\"default\",\"size\":\"2G\","
	                     "\"memory\":\"512M\",\"cpus\":2,\"iso\":\"alpine.iso\"}",
	                     &c, err, sizeof(err)),
	    0);
	for (size_t i = 0; c.argv[i]; i++)
		snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s ", c.argv[i]);
	assert_string_equal(line, "create -t default -s 2G -m 512M -c 2 n1 ");
	assert_string_equal(c.install[0], "install");
	assert_string_equal(c.install[2], "alpine.iso");
	assert_int_equal(web_create_check(&ctx, "{\"name\":\"n2\",\"template\":\"default\"}", &c,
	                                  err, sizeof(err)),
	                 0);
	assert_null(c.install[0]);
}

/* ---- tasks ---- */

/* Poll until no task runs (at most 5 s). */
static void wait_tasks(void)
{
	for (int i = 0; i < 500; i++) {
		cJSON *a = web_tasks_json(&ctx), *t;
		bool running = false;
		cJSON_ArrayForEach(t, a) running |=
		    !strcmp(cJSON_GetObjectItem(t, "state")->valuestring, "running");
		cJSON_Delete(a);
		if (!running)
			return;
		web_tasks_poll(&ctx);
		usleep(10000);
	}
	fail_msg("tasks did not end");
}

static void test_tasks(void **state)
{
	char saved[PATH_MAX], err[256];
	char *one[] = {"-c", "echo out; echo err >&2; exit 3", NULL};
	char *first[] = {"-c", "echo first", NULL}, *second[] = {"-c", "echo second", NULL};
	cJSON *a, *t;
	int id1, id2;

	(void)state;
	snprintf(saved, sizeof(saved), "%s", sys.self);
	snprintf(sys.self, sizeof(sys.self), "/bin/sh");
	id1 = web_task_start(&ctx, "alice", one, err, sizeof(err));
	assert_true(id1 > 0);
	id2 = web_task_start2(&ctx, "bob", first, second, err, sizeof(err));
	assert_int_equal(id2, id1 + 1);
	wait_tasks();
	snprintf(sys.self, sizeof(sys.self), "%s", saved);

	a = web_tasks_json(&ctx);
	t = cJSON_GetArrayItem(a, 0); /* newest first */
	assert_int_equal(cJSON_GetObjectItem(t, "id")->valueint, id2);
	assert_string_equal(cJSON_GetObjectItem(t, "state")->valuestring, "ok");
	assert_string_equal(cJSON_GetObjectItem(t, "output")->valuestring, "first\nsecond\n");
	assert_contains(cJSON_GetObjectItem(t, "command")->valuestring,
	                "vm -c echo first && vm -c");
	t = cJSON_GetArrayItem(a, 1);
	assert_string_equal(cJSON_GetObjectItem(t, "user")->valuestring, "alice");
	assert_string_equal(cJSON_GetObjectItem(t, "state")->valuestring, "failed");
	assert_int_equal(cJSON_GetObjectItem(t, "status")->valueint, 3);
	assert_contains(cJSON_GetObjectItem(t, "output")->valuestring, "out\n");
	assert_contains(cJSON_GetObjectItem(t, "output")->valuestring, "err\n");
	assert_true(cJSON_IsNumber(cJSON_GetObjectItem(t, "ended")));
	cJSON_Delete(a);
}

/* ---- read-only handlers ---- */

static cJSON *call(web_handler_fn fn, const char *method, const char *arg, const char *query,
                   int want_status)
{
	struct web_req rq = {.ctx = &ctx,
	                     .method = method,
	                     .path = "/api/x",
	                     .query = query,
	                     .body = "",
	                     .session = &admin,
	                     .peer = "127.0.0.1",
	                     .arg = arg};
	struct web_resp rs = {0};
	cJSON *j;

	fn(&rq, &rs);
	assert_int_equal(rs.status, want_status);
	j = cJSON_Parse(rs.body);
	assert_non_null(j);
	free(rs.body);
	return j;
}

static void test_guest_list(void **state)
{
	cJSON *j = call(web_guests_list, "GET", "", "", 200), *g;

	(void)state;
	assert_int_equal(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(j, "host"), "guests_total")->valueint, 2);
	g = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "guests"), 1);
	assert_string_equal(cJSON_GetObjectItem(g, "name")->valuestring, "web1");
	assert_string_equal(cJSON_GetObjectItem(g, "state")->valuestring, "Stopped");
	assert_string_equal(cJSON_GetObjectItem(g, "cpus")->valuestring, "2");
	assert_string_equal(cJSON_GetObjectItem(g, "loader")->valuestring, "uefi");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(g, "pid")));
	assert_true(cJSON_IsFalse(cJSON_GetObjectItem(g, "autostart")));
	g = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "guests"), 0);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(g, "autostart")));
	cJSON_Delete(j);
}

static void test_guest_detail(void **state)
{
	cJSON *j = call(web_guests_get_or_action, "GET", "web1", "", 200), *d, *ports;

	(void)state;
	assert_string_equal(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(j, "config"), "memory")->valuestring, "512M");
	d = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "disks"), 0);
	assert_string_equal(cJSON_GetObjectItem(d, "name")->valuestring, "disk0.img");
	assert_int_equal(cJSON_GetObjectItem(d, "size_bytes")->valueint, 8);
	d = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "nics"), 0);
	assert_string_equal(cJSON_GetObjectItem(d, "switch")->valuestring, "public");
	ports = cJSON_GetObjectItem(j, "console_ports");
	assert_int_equal(cJSON_GetArraySize(ports), 2);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "counters")));
	assert_true(cJSON_IsArray(cJSON_GetObjectItem(j, "snapshots")));
	cJSON_Delete(j);
	cJSON_Delete(call(web_guests_get_or_action, "GET", "nope", "", 404));
	cJSON_Delete(call(web_guests_get_or_action, "GET", "../web1", "", 404));
	cJSON_Delete(call(web_guests_get_or_action, "POST", "web1/explode", "", 404));
	cJSON_Delete(call(web_guests_get_or_action, "POST", "web1/start/x", "", 404));
}

static void test_templates_isos_host(void **state)
{
	cJSON *j = call(web_templates_list, "GET", "", "", 200);

	(void)state;
	assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "templates"), 0)->valuestring,
	                    "default");
	cJSON_Delete(j);
	j = call(web_isos_list, "GET", "", "", 200);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "isos")),
	                 1 + iso_exists("new.iso"));
	assert_string_equal(
	    cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "isos"), 0), "name")
	        ->valuestring,
	    "alpine.iso");
	assert_true(cJSON_GetObjectItem(j, "free_bytes")->valuedouble > 0);
	cJSON_Delete(j);
	j = call(web_host_get, "GET", "", "", 200);
	cJSON *sw = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "switches"), 0);
	assert_string_equal(cJSON_GetObjectItem(sw, "address")->valuestring, "10.0.0.1/24");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(sw, "interfaces")), 2);
	assert_string_equal(
	    cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "datastores"), 0), "name")
	        ->valuestring,
	    "default");
	cJSON_Delete(j);
}

static void test_log(void **state)
{
	cJSON *j = call(web_log_get, "GET", "", "", 200), *lines = cJSON_GetObjectItem(j, "lines");

	(void)state;
	assert_int_equal(cJSON_GetArraySize(lines), 3);
	/* Newest last, across guests. */
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 1), "guest")->valuestring,
	                    "db");
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 2), "text")->valuestring,
	                    "web1 stopped");
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(lines, 2), "time")->valuestring,
	                    "Dec 01 10:00:05");
	cJSON_Delete(j);
	j = call(web_log_get, "GET", "", "guest=web1&q=START&limit=5", 200);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "lines")), 1);
	cJSON_Delete(j);
	j = call(web_log_get, "GET", "", "limit=1", 200);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "lines")), 1);
	cJSON_Delete(j);
	cJSON_Delete(call(web_log_get, "GET", "", "limit=0", 400));
	cJSON_Delete(call(web_log_get, "GET", "", "guest=..%2fx", 400));
	cJSON_Delete(call(
	    web_log_get, "GET", "",
	    "guest=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 400));
	cJSON_Delete(call(web_log_get, "GET", "", "limit=12345678901234567890", 400));
	j = call(web_log_get, "GET", "", "other=1&guest=&q=", 200);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "lines")), 3);
	cJSON_Delete(j);
}

/* The output of the task `id` once it ended (malloc'd). */
static char *task_output(int id)
{
	cJSON *a, *t;
	char *out = NULL;

	wait_tasks();
	a = web_tasks_json(&ctx);
	cJSON_ArrayForEach(t, a) if (cJSON_GetObjectItem(t, "id")->valueint == id) out =
	    strdup(cJSON_GetObjectItem(t, "output")->valuestring);
	cJSON_Delete(a);
	assert_non_null(out);
	return out;
}

/* POST routes with `vm` played by echo: the arguments each one runs. */
static void test_change_routes(void **state)
{
	static const struct {
		const char *arg, *argv;
	} actions[] = {{"web1/start", "start web1\n"},
	               {"web1/stop", "stop web1\n"},
	               {"web1/restart", "restart web1\n"},
	               {"web1/poweroff", "poweroff -f web1\n"},
	               {"web1/reset", "reset -f web1\n"}};
	char saved[PATH_MAX], *out;
	struct web_req rq = {.ctx = &ctx,
	                     .method = "POST",
	                     .path = "/api/guests",
	                     .query = "",
	                     .session = &admin,
	                     .peer = "127.0.0.1",
	                     .arg = ""};
	struct web_resp rs;
	cJSON *j;

	(void)state;
	snprintf(saved, sizeof(saved), "%s", sys.self);
	snprintf(sys.self, sizeof(sys.self), "/bin/echo");
	for (size_t i = 0; i < ARRAY_LEN(actions); i++) {
		j = call(web_guests_get_or_action, "POST", actions[i].arg, "", 202);
		out = task_output(cJSON_GetObjectItem(j, "task")->valueint);
		assert_string_equal(out, actions[i].argv);
		free(out);
		cJSON_Delete(j);
	}
	rq.body = "{\"name\":\"n1\",\"template\":\"default\",\"iso\":\"alpine.iso\"}";
	rq.body_len = strlen(rq.body);
	memset(&rs, 0, sizeof(rs));
	web_guests_create(&rq, &rs);
	assert_int_equal(rs.status, 202);
	j = cJSON_Parse(rs.body);
	free(rs.body);
	out = task_output(cJSON_GetObjectItem(j, "task")->valueint);
	assert_string_equal(out, "create -t default n1\ninstall n1 alpine.iso\n");
	free(out);
	cJSON_Delete(j);
	rq.body = "{\"name\":\"n1\",\"template\":\"default\",\"iso\":\"a/b.iso\"}";
	memset(&rs, 0, sizeof(rs));
	web_guests_create(&rq, &rs);
	assert_int_equal(rs.status, 400);
	assert_contains(rs.body, "iso: ");
	free(rs.body);
	snprintf(sys.self, sizeof(sys.self), "%s", saved);

	/* A buffered upload through the route. */
	rq.query = "name=small.iso";
	rq.body = "0123456789";
	rq.body_len = 10;
	memset(&rs, 0, sizeof(rs));
	web_isos_upload(&rq, &rs);
	assert_int_equal(rs.status, 201);
	assert_contains(rs.body, "\"size_bytes\":10");
	free(rs.body);
	assert_true(iso_exists("small.iso"));
	memset(&rs, 0, sizeof(rs));
	web_isos_upload(&rq, &rs);
	assert_int_equal(rs.status, 409);
	free(rs.body);
	rq.query = "name=..%2Fup.iso";
	memset(&rs, 0, sizeof(rs));
	web_isos_upload(&rq, &rs);
	assert_int_equal(rs.status, 400);
	free(rs.body);
}

/* ---- a running guest: run.lock held by us, tests/api/fake-khyve on its socket ---- */

/* Start the fake API of guest `name` (with --paused when `paused`); its pid, or 0. */
static pid_t fake_khyve(const char *name, bool paused)
{
	const char *top = getenv("TOP");
	char fake[PATH_MAX], sock[PATH_MAX + 64];
	pid_t pid;

	snprintf(fake, sizeof(fake), "%s/tests/api/fake-khyve", top && *top ? top : ".");
	snprintf(sock, sizeof(sock), "%s/%s/khyve.sock", vm_dir, name);
	if (access(fake, R_OK) != 0 || access("/usr/bin/python3", X_OK) != 0)
		return 0;
	if ((pid = fork()) == 0) {
		execl("/usr/bin/python3", "python3", fake, sock, "--name", name,
		      paused ? "--paused" : NULL, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100 && access(sock, F_OK) != 0; i++)
		usleep(50000);
	return pid;
}

/* ---- media (media.c) ---- */

static void expect_media_error(const char *body, const char *msg)
{
	struct web_media_req m;
	char err[512];

	assert_int_equal(web_media_parse(body, &m, err, sizeof(err)), -1);
	assert_contains(err, msg);
}

static void test_media(void **state)
{
	struct web_media_req m;
	char err[512];
	struct web_req rq = {.ctx = &ctx,
	                     .method = "POST",
	                     .path = "/api/guests",
	                     .query = "",
	                     .body = "{\"drive\":\"cd0\",\"iso\":null}",
	                     .session = &admin,
	                     .peer = "127.0.0.1",
	                     .arg = "web1/media"};
	struct web_resp rs = {0};
	cJSON *info, *a, *d;

	(void)state;
	assert_int_equal(
	    web_media_parse("{\"drive\":\"cd0\",\"iso\":\"alpine.iso\"}", &m, err, sizeof(err)), 0);
	assert_string_equal(m.drive, "cd0");
	assert_string_equal(m.iso, "alpine.iso");
	assert_false(m.force);
	assert_int_equal(web_media_parse("{\"drive\":\"cd1\",\"iso\":null,\"force\":true}", &m, err,
	                                 sizeof(err)),
	                 0);
	assert_string_equal(m.iso, "");
	assert_true(m.force);
	expect_media_error("[]", "body: ");
	expect_media_error("{\"drive\":\"cd0\"}", "iso: want");
	expect_media_error("{\"drive\":\"cd0\",\"iso\":3}", "iso: want");
	expect_media_error("{\"drive\":\"cd0\",\"iso\":\"../x.iso\"}", "is not an ISO name");
	expect_media_error("{\"drive\":\"cd0\",\"iso\":\"x.img\"}", "is not an ISO name");
	expect_media_error("{\"drive\":\"cd/0\",\"iso\":null}", "drive: ");
	expect_media_error("{\"drive\":\"cd0123456789abcdef\",\"iso\":null}", "drive: ");
	expect_media_error("{\"iso\":null}", "drive: ");
	expect_media_error("{\"drive\":\"cd0\",\"iso\":null,\"force\":1}", "force: ");
	expect_media_error("{\"drive\":\"cd0\",\"iso\":null,\"x\":1}", "x: unknown field");

	/* A guest that does not run: no API socket, 409. */
	rq.body_len = strlen(rq.body);
	web_guests_get_or_action(&rq, &rs);
	assert_int_equal(rs.status, 409);
	assert_contains(rs.body, "not running");
	free(rs.body);

	info = cJSON_Parse("{\"drives\":{\"cd0\":{\"device\":\"ahci-cd\",\"slot\":\"4:0\","
	                   "\"port\":0,\"medium\":true,\"locked\":true,\"bytes\":2048},"
	                   "\"cd1\":{\"device\":\"ahci-cd\",\"medium\":false},\"bad\":3}}");
	a = web_guest_drives_json(info);
	assert_int_equal(cJSON_GetArraySize(a), 2);
	d = cJSON_GetArrayItem(a, 0);
	assert_string_equal(cJSON_GetObjectItem(d, "name")->valuestring, "cd0");
	assert_string_equal(cJSON_GetObjectItem(d, "device")->valuestring, "ahci-cd");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(d, "medium")));
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(d, "locked")));
	assert_int_equal(cJSON_GetObjectItem(d, "bytes")->valueint, 2048);
	d = cJSON_GetArrayItem(a, 1);
	assert_false(cJSON_IsTrue(cJSON_GetObjectItem(d, "medium")));
	assert_int_equal(cJSON_GetObjectItem(d, "bytes")->valueint, 0);
	cJSON_Delete(a);
	cJSON_Delete(info);
	a = web_guest_drives_json(NULL);
	assert_int_equal(cJSON_GetArraySize(a), 0);
	cJSON_Delete(a);
}

static void test_running_guest(void **state)
{
	char path[PATH_MAX + 64], me[256], *metrics, cmd[3 * PATH_MAX];
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	struct web_req rq = {.ctx = &ctx,
	                     .method = "GET",
	                     .path = "/metrics",
	                     .query = "",
	                     .body = "",
	                     .session = &admin,
	                     .peer = "127.0.0.1",
	                     .arg = ""};
	struct web_resp rs = {0};
	cJSON *j, *counters;
	pid_t fake;
	FILE *f;
	int lock;

	(void)state;
	mkdirs("live");
	put("live/live.conf", "cpu=2\nmemory=512M\n");
	vm_hostname(me, sizeof(me));
	snprintf(path, sizeof(path), "%s/live/run.lock", vm_dir);
	lock = open(path, O_RDWR | O_CREAT, 0644);
	assert_true(lock >= 0);
	assert_true(write(lock, me, strlen(me)) > 0);
	assert_int_equal(fcntl(lock, F_OFD_SETLK, &fl), 0);
	snprintf(path, sizeof(path), "%s/live/run.state", vm_dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
	        "supervisor=\"%d\"\nsupervisor_start=\"%llu\"\nkhyve=\"%d\"\n"
	        "khyve_start=\"%llu\"\nvnc=\"127.0.0.1:5999\"\n",
	        (int)getpid(), vm_proc_start(getpid()), (int)getpid(), vm_proc_start(getpid()));
	fclose(f);
	if (!(fake = fake_khyve("live", true))) {
		close(lock);
		skip();
	}

	j = call(web_guests_get_or_action, "GET", "live", "", 200);
	assert_string_equal(cJSON_GetObjectItem(j, "state")->valuestring, "Paused");
	assert_string_equal(cJSON_GetObjectItem(j, "vnc")->valuestring, "127.0.0.1:5999");
	assert_int_equal(cJSON_GetObjectItem(j, "pid")->valueint, getpid());
	assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "rss_kib")));
	counters = cJSON_GetObjectItem(j, "counters");
	assert_true(cJSON_IsObject(cJSON_GetObjectItem(counters, "disk")));
	cJSON_Delete(j);

	web_metrics_handler(&rq, &rs);
	assert_int_equal(rs.status, 200);
	assert_contains(rs.content_type, "text/plain; version=0.0.4");
	metrics = strndup(rs.body, rs.len);
	free(rs.body);
	assert_contains(metrics, "khyve_guests{state=\"paused\"} 1\n");
	assert_contains(metrics, "khyve_guests{state=\"stopped\"} 2\n");
	assert_contains(metrics, "khyve_guest_up{vm=\"live\"} 1\n");
	assert_contains(metrics,
	                "khyve_block_read_bytes_total{vm=\"live\",disk=\"disk0\"} 491520\n");
	if (access("/usr/bin/promtool", X_OK) == 0) {
		free(unit_write_text(dir, "live.prom", metrics));
		snprintf(cmd, sizeof(cmd),
		         "/usr/bin/promtool check metrics <'%s/live.prom' >'%s/live.out' 2>&1 && "
		         "test ! -s '%s/live.out'",
		         dir, dir, dir);
		assert_int_equal(system(cmd), 0);
	}
	free(metrics);

	kill(fake, SIGTERM);
	waitpid(fake, NULL, 0);
	close(lock);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/live'", vm_dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_metrics_families),
	    cmocka_unit_test(test_metrics_grouped),
	    cmocka_unit_test(test_metrics_escape_and_hostile),
	    cmocka_unit_test(test_metrics_promtool),
	    cmocka_unit_test(test_iso_names),
	    cmocka_unit_test(test_upload_life),
	    cmocka_unit_test(test_create_check),
	    cmocka_unit_test(test_tasks),
	    cmocka_unit_test(test_guest_list),
	    cmocka_unit_test(test_guest_detail),
	    cmocka_unit_test(test_templates_isos_host),
	    cmocka_unit_test(test_log),
	    cmocka_unit_test(test_running_guest),
	    cmocka_unit_test(test_change_routes),
	    cmocka_unit_test(test_media),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
