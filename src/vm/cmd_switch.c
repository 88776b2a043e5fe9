/*
 * `vm switch ...`: virtual switches as vm-bhyve manages them (lib/vm-switch,
 * vm-switch-standard, vm-switch-manual), on Linux bridges (switch.h).
 *
 * Every command that changes something checks all its input first, then
 * changes the live interfaces, then saves system.conf; when saving fails
 * the live change is undone, so a failing command leaves both as they were.
 */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vm/commands.h"
#include "vm/switch.h"

#define LIST_COLUMNS 8

struct switch_cmd {
	const char *name;
	int (*run)(struct vm_sys *sys, int argc, char **argv);
	bool needs_root; /* it changes interfaces */
	const char *usage;
};

static int usage_error(const char *usage)
{
	return vm_error("usage: vm switch %s", usage);
}

/* system.conf's KEY_NAME = value (NULL removes it); 1 after an error. */
static int set_setting(struct vm_sys *sys, const char *key, const char *name, const char *value)
{
	char full[160];

	snprintf(full, sizeof(full), "%s_%s", key, name);
	if (rcconf_set(sys->system, full, value) < 0)
		return vm_error("%s: cannot store \"%s\"", full, value ? value : "");
	return 0;
}

static int save_system(struct vm_sys *sys)
{
	char err[512];

	if (vm_sys_save_system(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	return 0;
}

/* Load switch `name`; 1 after printing the error. */
static int load_switch(const struct vm_sys *sys, const char *name, struct vm_switch *sw)
{
	char err[512];

	if (vm_switch_get(sys, name, sw, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	return 0;
}

/* Commands that change a bridge's ports or address work on our own. */
static int require_standard(const struct vm_switch *sw)
{
	if (sw->type == VM_SWITCH_STANDARD)
		return 0;
	if (sw->type == VM_SWITCH_MANUAL)
		return vm_error(
		    "switch %s is manual: configure its bridge %s yourself (ip link, ip addr)",
		    sw->name, sw->bridge);
	return vm_error("switch %s: type %s is not available on Linux", sw->name, sw->type_name);
}

/* ---- list ---- */

struct table {
	char *(*cell)[LIST_COLUMNS];
	size_t rows;
};

static const char *dash(const char *s)
{
	return s && *s ? s : "-";
}

static const char *setting_of(const struct vm_sys *sys, const char *key, const char *name)
{
	char full[160];

	snprintf(full, sizeof(full), "%s_%s", key, name);
	return rcconf_get(sys->system, full);
}

/* One row as vm-bhyve's switch::*::show prints it. */
static int list_row(const struct vm_sys *sys, const char *name, char *row[LIST_COLUMNS])
{
	const char *type = dash(setting_of(sys, "type", name));
	const char *priv = setting_of(sys, "private", name);
	const char *cells[LIST_COLUMNS] = {name, type, "-", "-", priv && *priv ? priv : "no"};
	char bridge[160];

	if (!strcmp(type, "-"))
		cells[1] = type = "standard";
	if (!strcmp(type, "manual")) {
		cells[2] = dash(setting_of(sys, "bridge", name));
		cells[3] = cells[5] = cells[6] = cells[7] = "n/a";
	} else {
		/* IFACE only while the bridge exists, as vm-bhyve shows it. */
		snprintf(bridge, sizeof(bridge), "vm-%s", name);
		if (!strcmp(type, "standard") && strlen(bridge) <= VM_IFNAME_MAX &&
		    if_nametoindex(bridge))
			cells[2] = bridge;
		cells[3] = dash(setting_of(sys, "addr", name));
		cells[5] = dash(setting_of(sys, "mtu", name));
		cells[6] = dash(setting_of(sys, "vlan", name));
		cells[7] = dash(setting_of(sys, "ports", name));
	}
	for (size_t c = 0; c < LIST_COLUMNS; c++)
		if (!(row[c] = strdup(cells[c])))
			return -1;
	return 0;
}

/* Columns two spaces apart, as `column -t` lays out vm-bhyve's list. */
static void print_table(const struct table *t)
{
	size_t width[LIST_COLUMNS] = {0};

	for (size_t r = 0; r < t->rows; r++)
		for (size_t c = 0; c < LIST_COLUMNS; c++)
			if (strlen(t->cell[r][c]) > width[c])
				width[c] = strlen(t->cell[r][c]);
	for (size_t r = 0; r < t->rows; r++)
		for (size_t c = 0; c < LIST_COLUMNS; c++)
			if (c + 1 < LIST_COLUMNS)
				printf("%-*s  ", (int)width[c], t->cell[r][c]);
			else
				printf("%s\n", t->cell[r][c]);
}

static void free_table(struct table *t)
{
	for (size_t r = 0; r < t->rows; r++)
		for (size_t c = 0; c < LIST_COLUMNS; c++)
			free(t->cell[r][c]);
	free(t->cell);
}

static int switch_list(struct vm_sys *sys, int argc, char **argv)
{
	static const char *const head[] = {"NAME",    "TYPE", "IFACE", "ADDRESS",
	                                   "PRIVATE", "MTU",  "VLAN",  "PORTS"};
	const char *list = rcconf_get(sys->system, "switch_list");
	char name[128];
	size_t n = 0;
	struct table t = {0};
	int rc = 0;

	(void)argv;
	if (argc > 1)
		return usage_error("list");
	while (vm_words_at(list, n, name, sizeof(name)) == 0)
		n++;
	if (!(t.cell = calloc(n + 1, sizeof(*t.cell))))
		return vm_error("out of memory");
	for (size_t c = 0; c < LIST_COLUMNS; c++)
		if (!(t.cell[0][c] = strdup(head[c])))
			rc = 1;
	t.rows = 1;
	for (size_t i = 0; i < n && !rc; i++, t.rows++)
		if (vm_words_at(list, i, name, sizeof(name)) < 0 ||
		    list_row(sys, name, t.cell[t.rows]) < 0)
			rc = 1;
	if (rc)
		vm_error("out of memory");
	else
		print_table(&t);
	free_table(&t);
	return rc;
}

/* ---- info ---- */

/* vm-bhyve's info::__bytes_human: three decimals and a B/K/M/G/T suffix. */
static void bytes_human(unsigned long long bytes, char *out, size_t len)
{
	static const char suffix[] = "BKMGT";
	double v = (double)bytes;
	size_t i = 0;

	while (v >= 1024 && i + 1 < sizeof(suffix) - 1) {
		v /= 1024;
		i++;
	}
	snprintf(out, len, "%.3f%c", v, suffix[i]);
}

static void print_virtual_port(const char *name, const char *kind, const char *alias, void *arg)
{
	char guest[VM_NAME_MAX + 1] = "-";

	(void)arg;
	if (strcmp(kind, "tun"))
		return; /* host ports are listed as physical-ports */
	if (!strncmp(alias, "vmnet/", 6))
		snprintf(guest, sizeof(guest), "%.*s", (int)strcspn(alias + 6, "/"), alias + 6);
	printf("\n  virtual-port\n    device: %s\n    vm: %s\n", name, guest);
}

static void print_nat(const struct vm_sys *sys, const struct vm_switch *sw)
{
	char lo[16], hi[16];
	pid_t pid;

	if (!sw->nat) {
		printf("  nat: -\n");
		return;
	}
	pid = vm_nat_dnsmasq_pid(sys, sw);
	if (sw->has_addr && vm_dhcp_range(&sw->addr, lo, hi) == 0)
		printf("  nat: yes (dhcp %s-%s, dnsmasq %s)\n", lo, hi,
		       pid ? "running" : "not running");
	else
		printf("  nat: yes (no usable address)\n");
}

static void print_switch_info(const struct vm_sys *sys, const struct vm_switch *sw)
{
	bool live = sw->bridge[0] && if_nametoindex(sw->bridge);
	unsigned long long rx, tx;
	char hrx[32], htx[32], err[256];

	printf("------------------------\nVirtual Switch: %s\n------------------------\n",
	       sw->name);
	printf("  type: %s\n  ident: %s\n", sw->type_name, live ? sw->bridge : "-");
	printf("  vlan: %s\n", dash(setting_of(sys, "vlan", sw->name)));
	printf("  physical-ports: %s\n", dash(sw->ports));
	printf("  address: %s\n", dash(sw->addr_text));
	print_nat(sys, sw);
	if (live && vm_link_bytes(sw->bridge, &rx, &tx) == 0) {
		bytes_human(rx, hrx, sizeof(hrx));
		bytes_human(tx, htx, sizeof(htx));
		printf("  bytes-in: %llu (%s)\n  bytes-out: %llu (%s)\n", rx, hrx, tx, htx);
	}
	if (live && vm_link_ports(sw->bridge, print_virtual_port, NULL, err, sizeof(err)) < 0)
		vm_warn("%s", err);
	printf("\n");
}

static int switch_info(struct vm_sys *sys, int argc, char **argv)
{
	const char *list = rcconf_get(sys->system, "switch_list");
	char name[128];
	struct vm_switch sw;

	for (int i = 1; i < argc; i++)
		if (load_switch(sys, argv[i], &sw))
			return 1;
	for (int i = 1; i < argc; i++) {
		load_switch(sys, argv[i], &sw);
		print_switch_info(sys, &sw);
	}
	for (size_t i = 0; argc == 1 && vm_words_at(list, i, name, sizeof(name)) == 0; i++) {
		char err[512];
		if (vm_switch_get(sys, name, &sw, err, sizeof(err)) < 0)
			vm_warn("%s", err);
		else
			print_switch_info(sys, &sw);
	}
	return 0;
}

/* ---- create ---- */

struct create_opts {
	const char *type, *iface, *vlan, *bridge, *addr, *mtu;
	bool is_private;
};

#define CREATE_USAGE                                                                               \
	"create [-t type] [-i interface] [-n vlan-id] [-b bridge] [-m mtu] [-a address] [-p] name"

static int parse_create(int argc, char **argv, struct create_opts *o, const char **name)
{
	int c;

	*o = (struct create_opts){.type = "standard"};
	optind = 0; /* glibc: start over, whatever ran getopt before */
	opterr = 0;
	while ((c = getopt(argc, argv, "+t:i:n:b:a:m:p")) != -1) {
		switch (c) {
		case 't':
			o->type = optarg;
			break;
		case 'i':
			o->iface = optarg;
			break;
		case 'n':
			o->vlan = optarg;
			break;
		case 'b':
			o->bridge = optarg;
			break;
		case 'a':
			o->addr = optarg;
			break;
		case 'm':
			o->mtu = optarg;
			break;
		case 'p':
			o->is_private = true;
			break;
		default:
			return usage_error(CREATE_USAGE);
		}
	}
	if (optind != argc - 1)
		return usage_error(CREATE_USAGE);
	*name = argv[optind];
	return 0;
}

/* vm-bhyve's checks, in its order: name, duplicate, vlan, address, mtu, type. */
static int check_create(const struct vm_sys *sys, const struct create_opts *o, const char *name)
{
	struct vm_cidr cidr;
	unsigned v;

	if (!vm_switch_name_valid(name))
		return vm_error("invalid switch name - '%s' (1-12 letters, digits and '_')", name);
	if (vm_switch_listed(sys, name))
		return vm_error("switch %s already exists", name);
	if (o->vlan && vm_vlan_parse(o->vlan, &v) < 0)
		return vm_error("invalid vlan number '%s' (0-4094)", o->vlan);
	if (o->addr && vm_cidr_parse(o->addr, &cidr) < 0)
		return vm_error("address must be supplied in CIDR notation (a.b.c.d/prefix-len)");
	if (o->mtu && vm_mtu_parse(o->mtu, &v) < 0)
		return vm_error("invalid mtu '%s' (68-9000)", o->mtu);
	if (!strcmp(o->type, "manual")) {
		if (!o->bridge)
			return vm_error("you must specify a bridge to import (-b) when creating a "
			                "manual switch");
		if (o->iface || o->vlan || o->addr || o->mtu)
			return vm_error("a manual switch is configured by hand: -i, -n, -a and -m "
			                "are for standard switches");
		if (!vm_ifname_valid(o->bridge))
			return vm_error("%s: not a valid interface name", o->bridge);
		return 0;
	}
	if (strcmp(o->type, "standard"))
		return vm_error("invalid switch type - '%s' (standard or manual on Linux)",
		                o->type);
	if (o->bridge)
		return vm_error("-b is for manual switches (-t manual)");
	if (o->iface && !vm_ifname_valid(o->iface))
		return vm_error("%s: not a valid interface name", o->iface);
	return 0;
}

/* A manual switch adopts a bridge that must exist already. */
static int check_manual_bridge(const char *bridge)
{
	struct vm_link l;
	char err[512];

	if (vm_link_get(bridge, &l, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (!l.exists || strcmp(l.kind, "bridge"))
		return vm_error("%s does not appear to be a valid existing bridge", bridge);
	return 0;
}

static int store_create(struct vm_sys *sys, const struct create_opts *o, const char *name)
{
	char *list = vm_words_add(rcconf_get(sys->system, "switch_list"), name);
	int rc = !list || rcconf_set(sys->system, "switch_list", list) < 0;

	free(list);
	if (rc)
		return vm_error("out of memory");
	bool manual = !strcmp(o->type, "manual");
	if (set_setting(sys, "type", name, o->type) ||
	    (manual && set_setting(sys, "bridge", name, o->bridge)) ||
	    (o->iface && set_setting(sys, "ports", name, o->iface)) ||
	    (o->vlan && strcmp(o->vlan, "0") && set_setting(sys, "vlan", name, o->vlan)) ||
	    (o->addr && set_setting(sys, "addr", name, o->addr)) ||
	    (o->is_private && set_setting(sys, "private", name, "yes")) ||
	    (o->mtu && set_setting(sys, "mtu", name, o->mtu)))
		return 1;
	return 0;
}

static int switch_create(struct vm_sys *sys, int argc, char **argv)
{
	struct create_opts o;
	struct vm_switch sw;
	const char *name = NULL;
	char err[512];

	if (parse_create(argc, argv, &o, &name) || check_create(sys, &o, name))
		return 1;
	if (!strcmp(o.type, "manual") && check_manual_bridge(o.bridge))
		return 1;
	/* Settings go in memory first: nothing is saved unless it all works. */
	if (store_create(sys, &o, name) || load_switch(sys, name, &sw))
		return 1;
	if (o.iface && vm_switch_port_check(&sw, o.iface, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (vm_switch_up(sys, &sw, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (save_system(sys)) {
		vm_switch_down(sys, &sw, err, sizeof(err));
		return 1;
	}
	return 0;
}

/* ---- destroy ---- */

static void remove_nat_files(const struct vm_sys *sys, const struct vm_switch *sw)
{
	char path[PATH_MAX];

	if (vm_nat_file(sys, sw, "leases", path) == 0)
		unlink(path);
	if (vm_path(path, sys->config_dir, "nat") == 0)
		rmdir(path); /* only when empty */
}

static int forget_switch(struct vm_sys *sys, const char *name)
{
	static const char *const keys[] = {"ports", "vlan",    "nat", "type",
	                                   "addr",  "private", "mtu", "bridge"};
	char *list = vm_words_remove(rcconf_get(sys->system, "switch_list"), name);
	int rc;

	if (!list)
		return vm_error("out of memory");
	rc = rcconf_set(sys->system, "switch_list", *list ? list : NULL);
	free(list);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && !rc; i++)
		rc = set_setting(sys, keys[i], name, NULL);
	return rc ? 1 : 0;
}

static int switch_destroy(struct vm_sys *sys, int argc, char **argv)
{
	struct vm_switch sw;
	char err[512];

	if (argc != 2)
		return usage_error("destroy name");
	if (load_switch(sys, argv[1], &sw))
		return 1;
	if (vm_switch_down(sys, &sw, err, sizeof(err)) < 0)
		return vm_error("failed to remove virtual switch: %s", err);
	if (forget_switch(sys, sw.name) || save_system(sys)) {
		if (vm_switch_up(sys, &sw, err, sizeof(err)) < 0)
			vm_warn("%s", err);
		return 1;
	}
	remove_nat_files(sys, &sw);
	return 0;
}

/* ---- add / remove ---- */

static int switch_add(struct vm_sys *sys, int argc, char **argv)
{
	struct vm_switch sw;
	char err[512], *ports;
	int rc;

	if (argc != 3)
		return usage_error("add name interface");
	if (load_switch(sys, argv[1], &sw) || require_standard(&sw))
		return 1;
	if (vm_words_has(sw.ports, argv[2]))
		return vm_error("%s is already a port of switch %s", argv[2], sw.name);
	if (vm_switch_port_check(&sw, argv[2], err, sizeof(err)) < 0 ||
	    vm_switch_up(sys, &sw, err, sizeof(err)) < 0 ||
	    vm_switch_port_add(&sw, argv[2], err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (!(ports = vm_words_add(sw.ports, argv[2])))
		return vm_error("out of memory");
	rc = set_setting(sys, "ports", sw.name, ports) || save_system(sys);
	free(ports);
	if (rc)
		vm_switch_port_remove(&sw, argv[2], err, sizeof(err));
	return rc;
}

static int switch_remove(struct vm_sys *sys, int argc, char **argv)
{
	struct vm_switch sw;
	char err[512], *ports;
	int rc;

	if (argc != 3)
		return usage_error("remove name interface");
	if (load_switch(sys, argv[1], &sw) || require_standard(&sw))
		return 1;
	if (!vm_words_has(sw.ports, argv[2]))
		return vm_error("%s is not a port of switch %s", argv[2], sw.name);
	if (vm_switch_port_remove(&sw, argv[2], err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (!(ports = vm_words_remove(sw.ports, argv[2])))
		return vm_error("out of memory");
	rc = set_setting(sys, "ports", sw.name, *ports ? ports : NULL) || save_system(sys);
	free(ports);
	if (rc && vm_switch_port_add(&sw, argv[2], err, sizeof(err)) < 0)
		vm_warn("%s", err);
	return rc;
}

/* ---- vlan ---- */

static int remove_ports(const struct vm_switch *sw, char *err, size_t errlen)
{
	char port[VM_IFNAME_MAX + 1];

	for (size_t i = 0; vm_words_at(sw->ports, i, port, sizeof(port)) == 0; i++)
		if (vm_switch_port_remove(sw, port, err, errlen) < 0)
			return -1;
	return 0;
}

static int check_ports(const struct vm_switch *sw)
{
	char port[VM_IFNAME_MAX + 1], err[512];

	for (size_t i = 0; vm_words_at(sw->ports, i, port, sizeof(port)) == 0; i++)
		if (vm_switch_port_check(sw, port, err, sizeof(err)) < 0)
			return vm_error("%s", err);
	return 0;
}

/* Swap the ports from `from`'s vlan to `to`'s (vm-bhyve: remove all, re-add). */
static int move_ports(const struct vm_sys *sys, const struct vm_switch *from,
                      const struct vm_switch *to, char *err, size_t errlen)
{
	char ignored[512];

	if (remove_ports(from, err, errlen) < 0)
		return -1;
	if (vm_switch_up(sys, to, err, errlen) == 0)
		return 0;
	remove_ports(to, ignored, sizeof(ignored));
	if (vm_switch_up(sys, from, ignored, sizeof(ignored)) < 0)
		vm_warn("%s", ignored);
	return -1;
}

static int switch_vlan(struct vm_sys *sys, int argc, char **argv)
{
	struct vm_switch sw, next;
	char err[512], text[8];
	unsigned vlan;

	if (argc != 3)
		return usage_error("vlan name vlan-id");
	if (load_switch(sys, argv[1], &sw) || require_standard(&sw))
		return 1;
	if (vm_vlan_parse(argv[2], &vlan) < 0)
		return vm_error("invalid vlan number '%s' (0-4094, 0 turns vlan off)", argv[2]);
	next = sw;
	next.vlan = vlan;
	if (check_ports(&next))
		return 1;
	if (vm_switch_up(sys, &sw, err, sizeof(err)) < 0 ||
	    move_ports(sys, &sw, &next, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	snprintf(text, sizeof(text), "%u", vlan);
	if (set_setting(sys, "vlan", sw.name, vlan ? text : NULL) || save_system(sys)) {
		if (move_ports(sys, &next, &sw, err, sizeof(err)) < 0)
			vm_warn("%s", err);
		return 1;
	}
	return 0;
}

/* ---- address ---- */

/* Move the bridge from `from`'s address to `to`'s; NAT follows. */
static int readdress(const struct vm_sys *sys, const struct vm_switch *from,
                     const struct vm_switch *to, char *err, size_t errlen)
{
	char ignored[256];

	if (from->has_addr && (!to->has_addr || strcmp(from->addr_text, to->addr_text)))
		vm_ip(ignored, sizeof(ignored), "removing address", "addr", "del", from->addr_text,
		      "dev", from->bridge, NULL); /* quiet: it may be gone already */
	return vm_switch_up(sys, to, err, errlen);
}

static int parse_new_address(const struct vm_switch *sw, const char *arg, struct vm_switch *next)
{
	char lo[16], hi[16];

	*next = *sw;
	if (!strcmp(arg, "none")) {
		if (!sw->has_addr)
			return vm_error("switch %s has no address to remove", sw->name);
		if (sw->nat)
			return vm_error("NAT on switch %s needs its address: turn NAT off first "
			                "(vm switch nat %s off)",
			                sw->name, sw->name);
		next->has_addr = false;
		next->addr_text[0] = '\0';
		return 0;
	}
	if (vm_cidr_parse(arg, &next->addr) < 0)
		return vm_error("address must be supplied in CIDR notation (a.b.c.d/prefix-len)");
	if (sw->nat && vm_dhcp_range(&next->addr, lo, hi) < 0)
		return vm_error(
		    "switch %s has NAT on, which needs a host address in a /30 or larger subnet",
		    sw->name);
	next->has_addr = true;
	snprintf(next->addr_text, sizeof(next->addr_text), "%s", arg);
	return 0;
}

static int switch_address(struct vm_sys *sys, int argc, char **argv)
{
	struct vm_switch sw, next;
	char err[512];

	if (argc != 3)
		return usage_error("address name a.b.c.d/len|none");
	if (load_switch(sys, argv[1], &sw) || require_standard(&sw) ||
	    parse_new_address(&sw, argv[2], &next))
		return 1;
	if (vm_switch_up(sys, &sw, err, sizeof(err)) < 0 ||
	    readdress(sys, &sw, &next, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (set_setting(sys, "addr", sw.name, next.has_addr ? next.addr_text : NULL) ||
	    save_system(sys)) {
		if (readdress(sys, &next, &sw, err, sizeof(err)) < 0)
			vm_warn("%s", err);
		return 1;
	}
	return 0;
}

/* ---- nat / private ---- */

static int nat_on(struct vm_sys *sys, struct vm_switch *sw)
{
	char err[512], lo[16], hi[16];

	if (!sw->has_addr)
		return vm_error("switch %s has no address: give it one first (vm switch address %s "
		                "10.0.0.1/24)",
		                sw->name, sw->name);
	if (vm_dhcp_range(&sw->addr, lo, hi) < 0)
		return vm_error(
		    "NAT needs a host address in a /30 or larger subnet; switch %s has %s",
		    sw->name, sw->addr_text);
	sw->nat = true;
	if (vm_switch_up(sys, sw, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (set_setting(sys, "nat", sw->name, "yes") || save_system(sys)) {
		vm_nat_stop(sys, sw, err, sizeof(err));
		return 1;
	}
	return 0;
}

static int nat_off(struct vm_sys *sys, struct vm_switch *sw)
{
	char err[512];

	if (vm_nat_stop(sys, sw, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	if (set_setting(sys, "nat", sw->name, NULL) || save_system(sys)) {
		if (sw->nat && vm_nat_start(sys, sw, err, sizeof(err)) < 0)
			vm_warn("%s", err);
		return 1;
	}
	return 0;
}

static int switch_nat(struct vm_sys *sys, int argc, char **argv)
{
	struct vm_switch sw;
	int on;

	if (argc != 3)
		return usage_error("nat name on|off");
	if (load_switch(sys, argv[1], &sw) || require_standard(&sw))
		return 1;
	if ((on = vm_onoff_parse(argv[2])) < 0)
		return vm_error("nat: expected on or off, not '%s'", argv[2]);
	return on ? nat_on(sys, &sw) : nat_off(sys, &sw);
}

/* Like vm-bhyve, this applies to taps made from now on. */
static int switch_private(struct vm_sys *sys, int argc, char **argv)
{
	struct vm_switch sw;
	int on;

	if (argc != 3)
		return usage_error("private name on|off");
	if (load_switch(sys, argv[1], &sw))
		return 1;
	if ((on = vm_onoff_parse(argv[2])) < 0)
		return vm_error("private: expected on or off, not '%s'", argv[2]);
	if (set_setting(sys, "private", sw.name, on ? "yes" : "no"))
		return 1;
	return save_system(sys);
}

/* ---- dispatch ---- */

static const struct switch_cmd switch_cmds[] = {
    {"list", switch_list, false, "list"},
    {"info", switch_info, false, "info [name ...]"},
    {"create", switch_create, true, CREATE_USAGE},
    {"destroy", switch_destroy, true, "destroy name"},
    {"add", switch_add, true, "add name interface"},
    {"remove", switch_remove, true, "remove name interface"},
    {"vlan", switch_vlan, true, "vlan name vlan-id"},
    {"address", switch_address, true, "address name a.b.c.d/len|none"},
    {"nat", switch_nat, true, "nat name on|off"},
    {"private", switch_private, false, "private name on|off"},
    {NULL, NULL, false, NULL},
};

static bool changes_things(const struct switch_cmd *c)
{
	return c->run != switch_list && c->run != switch_info;
}

int cmd_switch(struct vm_sys *sys, int argc, char **argv)
{
	const struct switch_cmd *c = switch_cmds;
	char err[512], what[32];

	if (argc < 2)
		return vm_error("usage: vm switch "
		                "list|info|create|destroy|add|remove|vlan|address|nat|private ...");
	while (c->name && strcmp(c->name, argv[1]))
		c++;
	if (!c->name)
		return vm_error(
		    "switch %s: unknown command (list, info, create, destroy, add, remove, vlan, "
		    "address, nat, private)",
		    argv[1]);
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	snprintf(what, sizeof(what), "switch %s", c->name);
	if (changes_things(c) && vm_require_write(sys, what) < 0)
		return 1;
	if (c->needs_root && geteuid() != 0)
		return vm_error(
		    "%s configures network interfaces and needs root (run it with sudo)", what);
	return c->run(sys, argc - 1, argv + 1);
}
