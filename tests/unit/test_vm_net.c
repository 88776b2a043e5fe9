/*
 * Unit tests for the pure parts of the vm manager's switches and taps
 * (src/vm/switch.h, net.h): parsing, tap names, reading switch settings,
 * the NAT rules and dnsmasq command, and vm_net_prepare()'s checks that
 * run before anything is created.  Bridges, taps and NAT themselves are
 * exercised by tests/vm/t-switch.sh in a network namespace.
 */
#include "unit.h"

#include "vm/net.h"
#include "vm/switch.h"

/* A vm_sys whose system.conf is `text` (no files are read). */
static void sys_with(struct vm_sys *sys, const char *text)
{
	char err[256];

	memset(sys, 0, sizeof(*sys));
	snprintf(sys->vm_dir, sizeof(sys->vm_dir), "/nonexistent/vms");
	snprintf(sys->config_dir, sizeof(sys->config_dir), "/nonexistent/vms/.config");
	sys->system = rcconf_parse(text, "system.conf", err, sizeof(err));
	assert_non_null(sys->system);
}

static void guest_with(struct vm_guest *g, const char *name, const char *text)
{
	char err[256];

	memset(g, 0, sizeof(*g));
	snprintf(g->name, sizeof(g->name), "%s", name);
	g->conf = rcconf_parse(text, "guest.conf", err, sizeof(err));
	assert_non_null(g->conf);
}

static void test_cidr_parse(void **state)
{
	static const char *const bad[] = {
	    "",          "10.0.0.1",     "10.0.0.1/",    "10.0.0.256/24", "10.0.0.1/33",
	    "10.0.0/24", "10.0.0.1/24x", " 10.0.0.1/24", "10.0.0.1/024",  "1000.0.0.1/8",
	    "10..0.1/8", "a.b.c.d/8",    "10.0.0.1/-1"};
	struct vm_cidr c;
	char net[24];

	(void)state;
	assert_int_equal(vm_cidr_parse("10.0.0.1/24", &c), 0);
	assert_int_equal(c.addr, 0x0a000001);
	assert_int_equal(c.len, 24);
	vm_cidr_network(&c, net, sizeof(net));
	assert_string_equal(net, "10.0.0.0/24");
	assert_int_equal(vm_cidr_parse("192.168.77.130/25", &c), 0);
	vm_cidr_network(&c, net, sizeof(net));
	assert_string_equal(net, "192.168.77.128/25");
	assert_int_equal(vm_cidr_parse("0.0.0.0/0", &c), 0);
	vm_cidr_network(&c, net, sizeof(net));
	assert_string_equal(net, "0.0.0.0/0");
	assert_int_equal(vm_cidr_parse("255.255.255.255/32", &c), 0);
	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		if (vm_cidr_parse(bad[i], &c) == 0)
			fail_msg("accepted '%s'", bad[i]);
}

static void expect_range(const char *cidr, const char *lo, const char *hi)
{
	struct vm_cidr c;
	char l[16], h[16];

	assert_int_equal(vm_cidr_parse(cidr, &c), 0);
	assert_int_equal(vm_dhcp_range(&c, l, h), 0);
	assert_string_equal(l, lo);
	assert_string_equal(h, hi);
}

static void test_dhcp_range(void **state)
{
	static const char *const none[] = {"10.0.0.1/31", "10.0.0.1/32", "10.0.0.0/24",
	                                   "10.0.0.255/24", "10.0.0.1/0"};
	struct vm_cidr c;
	char l[16], h[16];

	(void)state;
	/* The half without the switch's own address, no network/broadcast. */
	expect_range("10.0.0.1/24", "10.0.0.128", "10.0.0.254");
	expect_range("10.0.0.200/24", "10.0.0.1", "10.0.0.127");
	expect_range("172.16.5.1/16", "172.16.128.0", "172.16.255.254");
	expect_range("192.168.1.1/30", "192.168.1.2", "192.168.1.2");
	expect_range("192.168.1.2/30", "192.168.1.1", "192.168.1.1");
	for (size_t i = 0; i < ARRAY_LEN(none); i++) {
		assert_int_equal(vm_cidr_parse(none[i], &c), 0);
		if (vm_dhcp_range(&c, l, h) == 0)
			fail_msg("range for '%s'", none[i]);
	}
}

static void test_names(void **state)
{
	(void)state;
	assert_true(vm_switch_name_valid("public"));
	assert_true(vm_switch_name_valid("lan_2"));
	assert_true(vm_switch_name_valid("abcdefghijkl")); /* 12: vm-NAME is 15 */
	assert_false(vm_switch_name_valid("abcdefghijklm"));
	assert_false(vm_switch_name_valid(""));
	assert_false(vm_switch_name_valid("_x"));
	assert_false(vm_switch_name_valid("my-lan")); /* not an rc.conf key */
	assert_false(vm_switch_name_valid("a.b"));

	assert_true(vm_ifname_valid("eth0"));
	assert_true(vm_ifname_valid("enp0s31f6.100"));
	assert_true(vm_ifname_valid("abcdefghijklmno"));
	assert_false(vm_ifname_valid("abcdefghijklmnop"));
	assert_false(vm_ifname_valid(""));
	assert_false(vm_ifname_valid("."));
	assert_false(vm_ifname_valid("-x"));
	assert_false(vm_ifname_valid("a/b"));
	assert_false(vm_ifname_valid("a:b"));
	assert_false(vm_ifname_valid("a b"));
	assert_false(vm_ifname_valid("a\"b"));
}

static void test_numbers(void **state)
{
	unsigned v;

	(void)state;
	assert_int_equal(vm_vlan_parse("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(vm_vlan_parse("4094", &v), 0);
	assert_int_equal(v, 4094);
	assert_int_equal(vm_vlan_parse("4095", &v), -1);
	assert_int_equal(vm_vlan_parse("-1", &v), -1);
	assert_int_equal(vm_vlan_parse("1x", &v), -1);
	assert_int_equal(vm_vlan_parse("", &v), -1);
	assert_int_equal(vm_vlan_parse("0x10", &v), -1);
	assert_int_equal(vm_mtu_parse("9000", &v), 0);
	assert_int_equal(v, 9000);
	assert_int_equal(vm_mtu_parse("68", &v), 0);
	assert_int_equal(vm_mtu_parse("67", &v), -1);
	assert_int_equal(vm_mtu_parse("9001", &v), -1);
	assert_int_equal(vm_mtu_parse("1500 ", &v), -1);
	assert_int_equal(vm_onoff_parse("on"), 1);
	assert_int_equal(vm_onoff_parse("YES"), 1);
	assert_int_equal(vm_onoff_parse("true"), 1);
	assert_int_equal(vm_onoff_parse("1"), 1);
	assert_int_equal(vm_onoff_parse("Off"), 0);
	assert_int_equal(vm_onoff_parse("no"), 0);
	assert_int_equal(vm_onoff_parse("0"), 0);
	assert_int_equal(vm_onoff_parse("maybe"), -1);
	assert_int_equal(vm_onoff_parse(""), -1);
}

static void test_words(void **state)
{
	char w[16], *s;

	(void)state;
	assert_true(vm_words_has("a bb c", "bb"));
	assert_false(vm_words_has("a bb c", "b"));
	assert_false(vm_words_has(NULL, "a"));
	assert_int_equal(vm_words_at("  a\tbb  c ", 1, w, sizeof(w)), 0);
	assert_string_equal(w, "bb");
	assert_int_equal(vm_words_at("a bb c", 3, w, sizeof(w)), -1);
	assert_int_equal(vm_words_at("a averyveryverylongword", 1, w, sizeof(w)), -1);
	s = vm_words_add(NULL, "em0");
	assert_string_equal(s, "em0");
	free(s);
	s = vm_words_add("em0  em1", "em2");
	assert_string_equal(s, "em0 em1 em2");
	free(s);
	s = vm_words_add("em0 em1", "em1");
	assert_string_equal(s, "em0 em1");
	free(s);
	s = vm_words_remove("em0 em1 em0 em2", "em0");
	assert_string_equal(s, "em1 em2");
	free(s);
	s = vm_words_remove("em0", "em0");
	assert_string_equal(s, "");
	free(s);
}

static void test_switch_get(void **state)
{
	struct vm_sys sys;
	struct vm_switch sw;
	char err[256];

	(void)state;
	sys_with(&sys, "switch_list=\"public lan bsd broken\"\n"
	               "type_public=\"standard\"\nports_public=\"eth1 eth2\"\nvlan_public=\"10\"\n"
	               "addr_public=\"10.0.0.1/24\"\nmtu_public=\"9000\"\nprivate_public=\"yes\"\n"
	               "nat_public=\"yes\"\n"
	               "type_lan=\"manual\"\nbridge_lan=\"br0\"\n"
	               "type_bsd=\"vale\"\n"
	               "vlan_broken=\"5000\"\n");
	assert_int_equal(vm_switch_get(&sys, "public", &sw, err, sizeof(err)), 0);
	assert_int_equal(sw.type, VM_SWITCH_STANDARD);
	assert_string_equal(sw.bridge, "vm-public");
	assert_string_equal(sw.ports, "eth1 eth2");
	assert_int_equal(sw.vlan, 10);
	assert_int_equal(sw.mtu, 9000);
	assert_true(sw.has_addr);
	assert_string_equal(sw.addr_text, "10.0.0.1/24");
	assert_true(sw.is_private);
	assert_true(sw.nat);

	assert_int_equal(vm_switch_get(&sys, "lan", &sw, err, sizeof(err)), 0);
	assert_int_equal(sw.type, VM_SWITCH_MANUAL);
	assert_string_equal(sw.bridge, "br0");
	assert_false(sw.nat);
	assert_false(sw.has_addr);

	assert_int_equal(vm_switch_get(&sys, "bsd", &sw, err, sizeof(err)), 0);
	assert_int_equal(sw.type, VM_SWITCH_OTHER);
	assert_string_equal(sw.type_name, "vale");

	assert_int_equal(vm_switch_get(&sys, "broken", &sw, err, sizeof(err)), -1);
	assert_contains(err, "vlan_broken=\"5000\"");
	assert_int_equal(vm_switch_get(&sys, "nope", &sw, err, sizeof(err)), -1);
	assert_contains(err, "nope: no such switch");
	assert_false(vm_switch_listed(&sys, "nope"));
	assert_true(vm_switch_listed(&sys, "lan"));
	rcconf_free(sys.system);
}

static void test_tap_names(void **state)
{
	struct vm_guest g, h;
	char a[16], b[16];

	(void)state;
	guest_with(&g, "deb",
	           "network0_type=\"virtio-net\"\n"
	           "network1_device=\"tap7\"\nnetwork2_name=\"mine\"\n"
	           "network3_device=\"dev3\"\nnetwork3_name=\"name3\"\n");
	vm_net_tap_name(&g, 0, a);
	assert_string_equal(a, "vmt-deb-0");
	vm_net_tap_name(&g, 1, a);
	assert_string_equal(a, "tap7");
	vm_net_tap_name(&g, 2, a);
	assert_string_equal(a, "mine");
	vm_net_tap_name(&g, 3, a);
	assert_string_equal(a, "dev3");
	vm_net_tap_name(&g, 31, a);
	assert_string_equal(a, "vmt-deb-31");
	rcconf_free(g.conf);

	/* 9 characters + one digit still fit; longer names are hashed. */
	guest_with(&g, "ninechars", "");
	vm_net_tap_name(&g, 9, a);
	assert_string_equal(a, "vmt-ninechars-9");
	vm_net_tap_name(&g, 10, a);
	assert_int_equal(strncmp(a, "vmt", 3), 0);
	assert_true(a[3] != '-');
	assert_true(strlen(a) <= 15);
	assert_contains(a, "-10");
	rcconf_free(g.conf);

	guest_with(&g, "averyveryverylongguestname-1", "");
	guest_with(&h, "averyveryverylongguestname-2", "");
	vm_net_tap_name(&g, 0, a);
	vm_net_tap_name(&h, 0, b);
	assert_true(strlen(a) <= 15 && strlen(b) <= 15);
	assert_string_not_equal(a, b);
	vm_net_tap_name(&g, 0, b); /* deterministic */
	assert_string_equal(a, b);
	rcconf_free(g.conf);
	rcconf_free(h.conf);
}

static void test_nat_commands(void **state)
{
	struct vm_sys sys;
	struct vm_switch sw;
	struct argv a = {0};
	char err[256], *script, *line;

	(void)state;
	sys_with(&sys, "switch_list=\"public\"\naddr_public=\"10.5.0.1/24\"\nnat_public=\"yes\"\n");
	assert_int_equal(vm_switch_get(&sys, "public", &sw, err, sizeof(err)), 0);
	script = vm_nat_nft_script(&sw);
	assert_non_null(script);
	assert_contains(script, "delete table ip khyve-public\n");
	assert_contains(script, "table ip khyve-public {");
	assert_contains(script, "type nat hook postrouting");
	assert_contains(script, "ip saddr 10.5.0.0/24 oifname != \"vm-public\" masquerade");
	free(script);

	assert_int_equal(vm_nat_dnsmasq_argv(&sys, &sw, &a), 0);
	line = argv_to_shell(&a);
	assert_string_equal(a.v[0], "dnsmasq");
	assert_contains(line, " --interface=vm-public ");
	assert_contains(line, " --bind-interfaces ");
	assert_contains(line, " --except-interface=lo ");
	assert_contains(line, " --conf-file=/dev/null ");
	assert_contains(line, " --dhcp-range=10.5.0.128,10.5.0.254,12h ");
	assert_contains(line, " --pid-file=/nonexistent/vms/.config/nat/public.pid ");
	assert_contains(line, " --dhcp-leasefile=/nonexistent/vms/.config/nat/public.leases ");
	free(line);
	argv_free(&a);
	rcconf_free(sys.system);
}

/* Bad settings are refused before any interface is touched (no root needed). */
static void test_prepare_checks(void **state)
{
	struct vm_sys sys;
	struct vm_guest g;
	struct vm_taps taps;
	char err[256];

	(void)state;
	sys_with(&sys, "switch_list=\"public\"\n");
	guest_with(&g, "deb", "cpu=\"1\"\n");
	assert_int_equal(vm_net_prepare(&sys, &g, &taps, err, sizeof(err)), 0);
	assert_int_equal(taps.n, 0);
	rcconf_free(g.conf);

	guest_with(&g, "deb",
	           "network0_type=\"virtio-net\"\nnetwork0_switch=\"public\"\n"
	           "network1_type=\"virtio-net\"\nnetwork1_switch=\"nope\"\n");
	assert_int_equal(vm_net_prepare(&sys, &g, &taps, err, sizeof(err)), -1);
	assert_string_equal(
	    err, "deb: network1_switch: nope: no such switch (vm switch list shows them)");
	assert_int_equal(taps.n, 0);
	rcconf_free(g.conf);

	guest_with(&g, "deb",
	           "network0_type=\"virtio-net\"\nnetwork0_device=\"far-too-long-a-name\"\n");
	assert_int_equal(vm_net_prepare(&sys, &g, &taps, err, sizeof(err)), -1);
	assert_contains(err, "network0_device=\"far-too-long-a-name\"");
	rcconf_free(g.conf);

	guest_with(&g, "deb",
	           "network0_type=\"virtio-net\"\nnetwork0_device=\"tapx\"\n"
	           "network1_type=\"virtio-net\"\nnetwork1_name=\"tapx\"\n");
	assert_int_equal(vm_net_prepare(&sys, &g, &taps, err, sizeof(err)), -1);
	assert_contains(err, "network0 and network1 both use interface tapx");
	rcconf_free(g.conf);
	rcconf_free(sys.system);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cidr_parse),     cmocka_unit_test(test_dhcp_range),
	    cmocka_unit_test(test_names),          cmocka_unit_test(test_numbers),
	    cmocka_unit_test(test_words),          cmocka_unit_test(test_switch_get),
	    cmocka_unit_test(test_tap_names),      cmocka_unit_test(test_nat_commands),
	    cmocka_unit_test(test_prepare_checks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
