/* Unit tests for the MAC address helpers (src/lib/mac.h). */
#include "unit.h"

#include "lib/mac.h"

static void test_mac_parse_ok(void **state)
{
	static const struct {
		const char *s;
		uint8_t mac[MAC_LEN];
	} ok[] = {
	    {"58:9c:fc:00:00:01", {0x58, 0x9c, 0xfc, 0x00, 0x00, 0x01}},
	    {"AA:bb:Cc:dD:ee:FF", {0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}},
	    {"0:1:2:a:b:c", {0, 1, 2, 0xa, 0xb, 0xc}},
	    {"00:00:00:00:00:00", {0}},
	    {"01:00:5e:00:00:01", {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}},
	};
	uint8_t mac[MAC_LEN];

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(ok); i++) {
		if (mac_parse(ok[i].s, mac) != 0)
			fail_msg("mac_parse refused '%s'", ok[i].s);
		assert_memory_equal(mac, ok[i].mac, MAC_LEN);
	}
}

static void test_mac_parse_bad(void **state)
{
	static const char *const bad[] = {
	    "",
	    "58:9c:fc:00:00",
	    "58:9c:fc:00:00:01:02",
	    "58:9c:fc:00:00:01:",
	    ":58:9c:fc:00:00:01",
	    "58:9c:fc:000:00:01",
	    "58:9c:fc::00:01",
	    "58-9c-fc-00-00-01",
	    "58:9c:fc:00:00:0g",
	    " 58:9c:fc:00:00:01",
	    "58:9c:fc:00:00:01 ",
	    "0x58:9c:fc:00:00:01",
	    "+5:9c:fc:00:00:01",
	};
	uint8_t mac[MAC_LEN] = {1, 2, 3, 4, 5, 6};
	static const uint8_t untouched[MAC_LEN] = {1, 2, 3, 4, 5, 6};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		if (mac_parse(bad[i], mac) != -1)
			fail_msg("mac_parse accepted '%s'", bad[i]);
		assert_memory_equal(mac, untouched, MAC_LEN);
	}
}

static void test_mac_unicast(void **state)
{
	(void)state;
	assert_true(mac_is_unicast((const uint8_t[]){0x58, 0x9c, 0xfc, 0, 0, 1}));
	assert_true(mac_is_unicast((const uint8_t[]){0x02, 0, 0, 0, 0, 0}));
	assert_false(mac_is_unicast((const uint8_t[]){0, 0, 0, 0, 0, 0}));
	assert_false(mac_is_unicast((const uint8_t[]){0x01, 0, 0x5e, 0, 0, 1}));
	assert_false(mac_is_unicast((const uint8_t[]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff}));
}

static void test_mac_format(void **state)
{
	char s[MAC_STRLEN];
	uint8_t back[MAC_LEN];
	static const uint8_t mac[MAC_LEN] = {0x00, 0xa0, 0x98, 0x0a, 0xbc, 0xff};

	(void)state;
	mac_format(mac, s);
	assert_string_equal(s, "00:a0:98:0a:bc:ff");
	assert_int_equal(mac_parse(s, back), 0);
	assert_memory_equal(back, mac, MAC_LEN);
}

/* bhyve's OUI and MD5("SLOT-FUNC-NAME")'s first bytes: MD5("3-0-guest")
 * begins 7d 4b ba, MD5("5-1-") 81 7c 03. */
static void test_mac_bhyve_default(void **state)
{
	uint8_t mac[MAC_LEN];

	(void)state;
	mac_bhyve_default(3, 0, "guest", mac);
	assert_memory_equal(mac, ((const uint8_t[]){0x00, 0xa0, 0x98, 0x7d, 0x4b, 0xba}), MAC_LEN);
	mac_bhyve_default(5, 1, NULL, mac);
	assert_memory_equal(mac, ((const uint8_t[]){0x00, 0xa0, 0x98, 0x81, 0x7c, 0x03}), MAC_LEN);
	mac_bhyve_default(5, 1, "", mac);
	assert_memory_equal(mac, ((const uint8_t[]){0x00, 0xa0, 0x98, 0x81, 0x7c, 0x03}), MAC_LEN);
}

static void test_mac_random(void **state)
{
	uint8_t a[MAC_LEN], b[MAC_LEN];
	bool differ = false;

	(void)state;
	for (int i = 0; i < 200; i++) {
		mac_random_guest(a);
		assert_memory_equal(a, ((const uint8_t[]){0x58, 0x9c, 0xfc}), 3);
		assert_true(a[3] < 0x10);
		assert_true(a[3] | a[4] | a[5]);
		mac_random_local(b);
		assert_int_equal(b[0] & 3, 2); /* locally administered, unicast */
		if (memcmp(a + 3, b + 3, 3) != 0)
			differ = true;
	}
	assert_true(differ);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mac_parse_ok),      cmocka_unit_test(test_mac_parse_bad),
	    cmocka_unit_test(test_mac_unicast),       cmocka_unit_test(test_mac_format),
	    cmocka_unit_test(test_mac_bhyve_default), cmocka_unit_test(test_mac_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
