/*
 * Unit tests for the counter registry (src/lib/counters.h): registration
 * order and names taken twice, kind names, and the latency histogram's
 * bucket edges (0 ns, exactly 16 us, 16.001 us, each power of two, values
 * past the last bound) and its cumulative output with +Inf last.
 */
#include "unit.h"

#include <pthread.h>

#include "unit_counters.h"

static void read_two(void *arg, struct counter_out *o)
{
	o->put(o, "a_total", (uint64_t)(uintptr_t)arg);
	o->put(o, "b", 2);
}

static void collect_names(struct counter_source *s, void *ctx)
{
	char *buf = ctx;

	strcat(buf, s->name);
	strcat(buf, ",");
}

static int reset(void **state)
{
	(void)state;
	counters_reset();
	return 0;
}

static void test_register_order_and_duplicates(void **state)
{
	static struct counter_source a = {.kind = COUNTER_DISK, .name = "disk0", .read = read_two};
	static struct counter_source b = {.kind = COUNTER_DISK, .name = "disk1", .read = read_two};
	static struct counter_source c = {.kind = COUNTER_NIC, .name = "disk0", .read = read_two};
	static struct counter_source dup = {
	    .kind = COUNTER_DISK, .name = "disk0", .read = read_two};
	char names[64] = "";
	struct unit_counters out;

	(void)state;
	a.arg = (void *)(uintptr_t)7;
	assert_int_equal(counters_register(&a), 0);
	assert_int_equal(counters_register(&b), 0);
	assert_int_equal(counters_register(&c), 0); /* same name, other kind */
	assert_int_equal(counters_register(&dup), -1);
	counters_foreach(collect_names, names);
	assert_string_equal(names, "disk0,disk1,disk0,");
	assert_true(unit_counters_read(COUNTER_DISK, "disk0", &out));
	assert_int_equal(unit_counter(&out, "a_total"), 7);
	assert_int_equal(unit_counter(&out, "b"), 2);
	assert_false(unit_counters_read(COUNTER_VNC, "vnc", &out));
	counters_reset();
	names[0] = '\0';
	counters_foreach(collect_names, names);
	assert_string_equal(names, "");
	/* After a reset the same source registers again. */
	assert_int_equal(counters_register(&a), 0);
}

static void test_kind_names(void **state)
{
	(void)state;
	assert_string_equal(counter_kind_name(COUNTER_VCPU), "vcpu");
	assert_string_equal(counter_kind_name(COUNTER_DISK), "disk");
	assert_string_equal(counter_kind_name(COUNTER_NIC), "nic");
	assert_string_equal(counter_kind_name(COUNTER_VNC), "vnc");
	assert_string_equal(counter_kind_name(COUNTER_KINDS), "other");
}

/* The bucket `ns` lands in. */
static unsigned bucket_of(uint64_t ns)
{
	struct lat_hist h;
	unsigned hit = LAT_HIST_BUCKETS;

	memset(&h, 0, sizeof(h));
	lat_hist_add(&h, ns);
	for (unsigned i = 0; i < LAT_HIST_BUCKETS; i++) {
		if (h.count[i] == 1 && hit == LAT_HIST_BUCKETS)
			hit = i;
		else if (h.count[i] != 0)
			fail_msg("%llu ns counted twice", (unsigned long long)ns);
	}
	return hit;
}

static void test_lat_hist_edges(void **state)
{
	(void)state;
	assert_int_equal(bucket_of(0), 0);
	assert_int_equal(bucket_of(999), 0);
	assert_int_equal(bucket_of(16000), 0); /* exactly 16 us: le is inclusive */
	/* Regression: the bucket was chosen in whole microseconds, so 16.001 us
	 * (and anything up to 16.999 us) was counted as <= 16 us. */
	assert_int_equal(bucket_of(16001), 1);
	assert_int_equal(bucket_of(16999), 1);
	assert_int_equal(bucket_of(32000), 1);
	assert_int_equal(bucket_of(32001), 2);
	for (unsigned i = 0; i < LAT_HIST_BUCKETS - 1; i++) {
		assert_int_equal(bucket_of(16000ull << i), i);
		assert_int_equal(bucket_of((16000ull << i) + 1), i + 1);
	}
	/* The last bound is 2^25 us (33.5 s); beyond it only +Inf. */
	assert_int_equal(bucket_of(16000ull << 21), 21);
	assert_int_equal(bucket_of((16000ull << 21) + 1), LAT_HIST_BUCKETS - 1);
	assert_int_equal(bucket_of(3600ull * 1000000000ull), LAT_HIST_BUCKETS - 1);
	assert_int_equal(bucket_of(UINT64_MAX), LAT_HIST_BUCKETS - 1);
}

static void test_lat_hist_cumulative(void **state)
{
	struct lat_hist h;
	struct unit_counters out;
	const struct unit_hist *uh;

	(void)state;
	memset(&h, 0, sizeof(h));
	lat_hist_add(&h, 0);              /* bucket 0, 0 us */
	lat_hist_add(&h, 16000);          /* bucket 0, 16 us */
	lat_hist_add(&h, 16001);          /* bucket 1, 16 us (rounded) */
	lat_hist_add(&h, 1499);           /* bucket 0, 1 us */
	lat_hist_add(&h, 1500);           /* bucket 0, 2 us */
	lat_hist_add(&h, 100000000);      /* 100 ms: <= 131072 us, bucket 13 */
	lat_hist_add(&h, 60000000000ull); /* a minute: +Inf */
	unit_counters_init(&out);
	counter_put_lat(&out.out, "latency_us", &h);
	uh = unit_counter_hist(&out, "latency_us");
	assert_non_null(uh);
	assert_int_equal(uh->n, LAT_HIST_BUCKETS);
	for (unsigned i = 0; i < LAT_HIST_BUCKETS - 1; i++)
		assert_int_equal(uh->le[i], 16ull << i);
	assert_int_equal(uh->le[LAT_HIST_BUCKETS - 1], UINT64_MAX);
	assert_int_equal(uh->count[0], 4);
	for (unsigned i = 1; i < 13; i++)
		assert_int_equal(uh->count[i], 5);
	assert_int_equal(uh->le[13], 131072);
	for (unsigned i = 13; i < LAT_HIST_BUCKETS - 1; i++)
		assert_int_equal(uh->count[i], 6);
	assert_int_equal(uh->count[LAT_HIST_BUCKETS - 1], 7);
	assert_int_equal(uh->sum, 0 + 16 + 16 + 1 + 2 + 100000 + 60000000);
}

/* Hot paths add from several threads at once: nothing is lost. */
static struct lat_hist shared;

static void *add_many(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < 100000; i++)
		lat_hist_add(&shared, (i % 4) * 20000ull); /* 0, 20, 40, 60 us */
	return NULL;
}

static void test_lat_hist_threads(void **state)
{
	pthread_t t[4];
	struct unit_counters out;
	const struct unit_hist *uh;

	(void)state;
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, add_many, NULL), 0);
	for (unsigned i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	unit_counters_init(&out);
	counter_put_lat(&out.out, "latency_us", &shared);
	uh = unit_counter_hist(&out, "latency_us");
	assert_non_null(uh);
	assert_int_equal(uh->count[0], 100000); /* 0 us */
	assert_int_equal(uh->count[1], 200000); /* + 20 us */
	assert_int_equal(uh->count[2], 400000); /* + 40, 60 us */
	assert_int_equal(uh->count[LAT_HIST_BUCKETS - 1], 400000);
	assert_int_equal(uh->sum, 4ull * 25000 * (20 + 40 + 60));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_register_order_and_duplicates, reset),
	    cmocka_unit_test(test_kind_names),
	    cmocka_unit_test(test_lat_hist_edges),
	    cmocka_unit_test(test_lat_hist_cumulative),
	    cmocka_unit_test(test_lat_hist_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
