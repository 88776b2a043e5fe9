/*
 * Switches and guest taps (net.h, switch.h): reading switch settings,
 * bringing a switch up on demand and giving each networkN of a starting
 * guest a tap on its switch.
 *
 * Tap names (vm_net_tap_name()): networkN_device, else networkN_name, else
 * "vmt-GUEST-N" when that fits Linux's 15 characters, else
 * "vmtXXXXXXXX-N" with XXXXXXXX the 32-bit FNV-1a hash of the guest name in
 * hex.  The two generated forms differ at their fourth character, so they
 * never meet; a hash collision is caught by the ifalias check below.
 *
 * Every tap we create carries the ifalias "vmnet/GUEST/N/SWITCH" (vm-bhyve's
 * interface description), which is how vm_net_release() knows what to
 * delete (never a networkN_device that existed before) and how `vm switch
 * info` names a port's guest.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "lib/mac.h"
#include "vm/net.h"
#include "vm/switch.h"

#define MADE_MAX 72 /* links one bring-up may create: bridge + vlan ports */

/* ---- pure helpers ---- */

/* Parse 1..max_digits decimal digits at *p into *v; advances *p. */
static int parse_digits(const char **p, unsigned max_digits, unsigned *v)
{
	unsigned n = 0, val = 0;

	while (isdigit((unsigned char)**p) && n < max_digits) {
		val = val * 10 + (unsigned)(**p - '0');
		(*p)++;
		n++;
	}
	*v = val;
	return n && !isdigit((unsigned char)**p) ? 0 : -1;
}

int vm_cidr_parse(const char *s, struct vm_cidr *out)
{
	uint32_t addr = 0;
	unsigned v;

	for (int i = 0; i < 4; i++) {
		if (parse_digits(&s, 3, &v) < 0 || v > 255 || *s++ != (i < 3 ? '.' : '/'))
			return -1;
		addr = addr << 8 | v;
	}
	if (parse_digits(&s, 2, &v) < 0 || v > 32 || *s)
		return -1;
	out->addr = addr;
	out->len = v;
	return 0;
}

static uint32_t cidr_mask(unsigned len)
{
	return len ? ~(uint32_t)0 << (32 - len) : 0;
}

static void format_ipv4(uint32_t addr, char out[16])
{
	uint32_t be = htonl(addr);

	inet_ntop(AF_INET, &be, out, 16);
}

void vm_cidr_network(const struct vm_cidr *c, char *out, size_t len)
{
	char a[16];

	format_ipv4(c->addr & cidr_mask(c->len), a);
	snprintf(out, len, "%s/%u", a, c->len);
}

int vm_dhcp_range(const struct vm_cidr *c, char lo[16], char hi[16])
{
	uint32_t net, size, half, host;

	if (c->len > 30 || c->len < 1)
		return -1;
	net = c->addr & cidr_mask(c->len);
	size = (uint32_t)1 << (32 - c->len);
	half = size / 2;
	host = c->addr - net;
	if (host == 0 || host == size - 1)
		return -1; /* the network or broadcast address is no gateway */
	if (host >= half) {
		format_ipv4(net + 1, lo);
		format_ipv4(net + half - 1, hi);
	} else {
		format_ipv4(net + half, lo);
		format_ipv4(net + size - 2, hi);
	}
	return 0;
}

bool vm_switch_name_valid(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > VM_SWITCH_NAME_MAX || !isalnum((unsigned char)name[0]))
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return false;
	return true;
}

bool vm_ifname_valid(const char *name)
{
	size_t len = strlen(name);

	/* A leading '-' would read as an option to ip; '"' etc. cannot be
	 * stored in an rc.conf value. */
	if (len == 0 || len > VM_IFNAME_MAX || !strcmp(name, ".") || !strcmp(name, "..") ||
	    name[0] == '-')
		return false;
	for (const char *p = name; *p; p++)
		if (!isgraph((unsigned char)*p) || strchr("/:\"#\\$`'", *p))
			return false;
	return true;
}

static int parse_ranged(const char *s, unsigned min, unsigned max, unsigned *out)
{
	unsigned v;

	if (parse_digits(&s, 5, &v) < 0 || *s || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int vm_vlan_parse(const char *s, unsigned *vlan)
{
	return parse_ranged(s, 0, 4094, vlan);
}

int vm_mtu_parse(const char *s, unsigned *mtu)
{
	return parse_ranged(s, 68, 9000, mtu);
}

int vm_onoff_parse(const char *s)
{
	static const char *const yes[] = {"on", "yes", "true", "1"}, *const no[] = {"off", "no",
	                                                                            "false", "0"};

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(s, yes[i]))
			return 1;
		if (!strcasecmp(s, no[i]))
			return 0;
	}
	return -1;
}

/* The next word of *p (length in *len), or NULL at the end. */
static const char *next_word(const char **p, size_t *len)
{
	const char *w = *p;

	while (*w == ' ' || *w == '\t')
		w++;
	*len = strcspn(w, " \t");
	*p = w + *len;
	return *len ? w : NULL;
}

bool vm_words_has(const char *list, const char *word)
{
	size_t len, wl = strlen(word);

	for (const char *w; list && (w = next_word(&list, &len));)
		if (len == wl && !strncmp(w, word, len))
			return true;
	return false;
}

int vm_words_at(const char *list, size_t i, char *out, size_t outlen)
{
	size_t len;

	for (const char *w; list && (w = next_word(&list, &len));) {
		if (i-- > 0)
			continue;
		if (len >= outlen)
			return -1;
		memcpy(out, w, len);
		out[len] = '\0';
		return 0;
	}
	return -1;
}

char *vm_words_add(const char *list, const char *word)
{
	char *out;

	if (vm_words_has(list, word))
		return vm_words_remove(list, ""); /* unchanged, but normalised */
	out = vm_words_remove(list, "");
	if (out && *out) {
		char *joined;
		if (asprintf(&joined, "%s %s", out, word) < 0)
			joined = NULL;
		free(out);
		return joined;
	}
	free(out);
	return strdup(word);
}

char *vm_words_remove(const char *list, const char *word)
{
	size_t len, wl = strlen(word), n = 0;
	char *out = malloc((list ? strlen(list) : 0) + 1);

	if (!out)
		return NULL;
	for (const char *w; list && (w = next_word(&list, &len));) {
		if (len == wl && !strncmp(w, word, len))
			continue;
		if (n)
			out[n++] = ' ';
		memcpy(out + n, w, len);
		n += len;
	}
	out[n] = '\0';
	return out;
}

/* ---- switch settings ---- */

/* system.conf's KEY_NAME, or NULL. */
static const char *switch_setting(const struct vm_sys *sys, const char *key, const char *name)
{
	char full[64];

	snprintf(full, sizeof(full), "%s_%s", key, name);
	return rcconf_get(sys->system, full);
}

bool vm_switch_listed(const struct vm_sys *sys, const char *name)
{
	return vm_words_has(rcconf_get(sys->system, "switch_list"), name);
}

static int bad_setting(const char *key, const char *name, const char *value, const char *why,
                       char *err, size_t errlen)
{
	snprintf(err, errlen, "system.conf: %s_%s=\"%s\" is not %s", key, name, value, why);
	return -1;
}

/* vlan_NAME, mtu_NAME and addr_NAME into `sw`. */
static int read_numbers(const struct vm_sys *sys, struct vm_switch *sw, char *err, size_t errlen)
{
	const char *v;

	if ((v = switch_setting(sys, "vlan", sw->name)) && *v && vm_vlan_parse(v, &sw->vlan) < 0)
		return bad_setting("vlan", sw->name, v, "a vlan id (0-4094)", err, errlen);
	if ((v = switch_setting(sys, "mtu", sw->name)) && *v && vm_mtu_parse(v, &sw->mtu) < 0)
		return bad_setting("mtu", sw->name, v, "an mtu (68-9000)", err, errlen);
	if ((v = switch_setting(sys, "addr", sw->name)) && *v) {
		if (vm_cidr_parse(v, &sw->addr) < 0)
			return bad_setting("addr", sw->name, v, "an address a.b.c.d/len", err,
			                   errlen);
		sw->has_addr = true;
		snprintf(sw->addr_text, sizeof(sw->addr_text), "%s", v);
	}
	return 0;
}

/* The interface that carries the switch: vm-NAME, or the adopted bridge. */
static int read_bridge(const struct vm_sys *sys, struct vm_switch *sw, char *err, size_t errlen)
{
	const char *v;

	if (sw->type == VM_SWITCH_STANDARD) {
		snprintf(sw->bridge, sizeof(sw->bridge), "vm-%s", sw->name);
		return 0;
	}
	if (sw->type != VM_SWITCH_MANUAL)
		return 0;
	v = switch_setting(sys, "bridge", sw->name);
	if (!v || !vm_ifname_valid(v))
		return bad_setting("bridge", sw->name, v ? v : "", "an interface name", err,
		                   errlen);
	snprintf(sw->bridge, sizeof(sw->bridge), "%s", v);
	return 0;
}

/* ports_NAME into sw->ports, every word a valid interface name. */
static int read_ports(const struct vm_sys *sys, struct vm_switch *sw, char *err, size_t errlen)
{
	const char *ports = switch_setting(sys, "ports", sw->name);
	char port[64];

	if (snprintf(sw->ports, sizeof(sw->ports), "%s", ports ? ports : "") >=
	    (int)sizeof(sw->ports)) {
		snprintf(err, errlen, "system.conf: ports_%s is too long", sw->name);
		return -1;
	}
	for (size_t i = 0; vm_words_at(sw->ports, i, port, sizeof(port)) == 0; i++)
		if (!vm_ifname_valid(port))
			return bad_setting("ports", sw->name, sw->ports, "a list of interfaces",
			                   err, errlen);
	return 0;
}

static enum vm_switch_type parse_type(const char *name)
{
	if (!strcmp(name, "standard"))
		return VM_SWITCH_STANDARD;
	return !strcmp(name, "manual") ? VM_SWITCH_MANUAL : VM_SWITCH_OTHER;
}

int vm_switch_get(const struct vm_sys *sys, const char *name, struct vm_switch *sw, char *err,
                  size_t errlen)
{
	const char *type, *v;

	memset(sw, 0, sizeof(*sw));
	if (!vm_switch_listed(sys, name)) {
		snprintf(err, errlen, "%s: no such switch (vm switch list shows them)", name);
		return -1;
	}
	if (!vm_switch_name_valid(name)) {
		snprintf(err, errlen, "%s: switch names on Linux are 1-12 letters, digits and '_'",
		         name);
		return -1;
	}
	snprintf(sw->name, sizeof(sw->name), "%s", name);
	type = switch_setting(sys, "type", name);
	snprintf(sw->type_name, sizeof(sw->type_name), "%s", type && *type ? type : "standard");
	sw->type = parse_type(sw->type_name);
	/* vm-bhyve's util::yesno: any value but no/false/off/0 is yes. */
	v = switch_setting(sys, "private", name);
	sw->is_private = v && *v && vm_onoff_parse(v) != 0;
	v = switch_setting(sys, "nat", name);
	sw->nat = v && *v && vm_onoff_parse(v) != 0;
	if (read_ports(sys, sw, err, errlen) < 0 || read_numbers(sys, sw, err, errlen) < 0 ||
	    read_bridge(sys, sw, err, errlen) < 0)
		return -1;
	return 0;
}

/* ---- bringing switches up and down ---- */

/* Links one bring-up created, deleted again when a later step fails. */
struct made_links {
	char name[MADE_MAX][VM_IFNAME_MAX + 1];
	size_t n;
};

static void made_add(struct made_links *m, const char *name)
{
	if (m && m->n < MADE_MAX)
		snprintf(m->name[m->n++], sizeof(m->name[0]), "%s", name);
}

static void made_undo(struct made_links *m)
{
	char err[256];

	while (m->n > 0)
		if (vm_ip(err, sizeof(err), "cleaning up", "link", "del", "dev", m->name[--m->n],
		          NULL) < 0)
			vm_warn("%s", err);
}

/* The interface a port puts on the bridge: IF, or IF.VLAN. */
static int port_member(const struct vm_switch *sw, const char *port, char out[VM_IFNAME_MAX + 1],
                       char *err, size_t errlen)
{
	int n = sw->vlan ? snprintf(out, VM_IFNAME_MAX + 1, "%s.%u", port, sw->vlan)
	                 : snprintf(out, VM_IFNAME_MAX + 1, "%s", port);

	if (n < 0 || n > VM_IFNAME_MAX) {
		snprintf(err, errlen, "%s.%u: vlan interface name longer than %d characters", port,
		         sw->vlan, VM_IFNAME_MAX);
		return -1;
	}
	return 0;
}

int vm_switch_port_check(const struct vm_switch *sw, const char *port, char *err, size_t errlen)
{
	char member[VM_IFNAME_MAX + 1];
	struct vm_link l;

	if (!vm_ifname_valid(port)) {
		snprintf(err, errlen, "%s: not a valid interface name", port);
		return -1;
	}
	if (port_member(sw, port, member, err, errlen) < 0 ||
	    vm_link_get(port, &l, err, errlen) < 0)
		return -1;
	if (!l.exists) {
		snprintf(err, errlen, "%s: no such interface", port);
		return -1;
	}
	if (sw->vlan && vm_link_get(member, &l, err, errlen) < 0)
		return -1;
	if (!l.exists || !strcmp(l.master, sw->bridge))
		return 0; /* a vlan link still to make, or already ours */
	if (l.has_ipv4) {
		snprintf(err, errlen,
		         "%s has an IPv4 address: adding it to switch %s would cut the host's link "
		         "(make a bridge that carries the address and use vm switch create -t "
		         "manual -b BRIDGE)",
		         member, sw->name);
		return -1;
	}
	if (l.master[0]) {
		snprintf(err, errlen, "%s is already a port of %s", member, l.master);
		return -1;
	}
	return 0;
}

/* Create PORT.VLAN when missing (recorded in `made`); the parent must be up
 * for tagged frames to flow, which does not flap an interface already up. */
static int make_vlan(const struct vm_switch *sw, const char *port, const char *member,
                     struct made_links *made, char *err, size_t errlen)
{
	char vid[8], what[96];
	struct vm_link l;

	if (vm_link_get(member, &l, err, errlen) < 0)
		return -1;
	if (l.exists && strcmp(l.kind, "vlan")) {
		snprintf(err, errlen, "%s exists and is not a vlan interface", member);
		return -1;
	}
	snprintf(what, sizeof(what), "creating vlan interface %s", member);
	snprintf(vid, sizeof(vid), "%u", sw->vlan);
	if (!l.exists) {
		if (vm_ip(err, errlen, what, "link", "add", "link", port, "name", member, "type",
		          "vlan", "id", vid, NULL) < 0) {
			if (strstr(err, "Unknown device type") && strlen(err) + 32 < errlen)
				strcat(err, " (is the 8021q module loaded?)");
			return -1;
		}
		made_add(made, member);
	}
	return vm_ip(err, errlen, what, "link", "set", "dev", port, "up", NULL);
}

/* Set `dev`'s mtu when the switch has one and it differs (some drivers
 * reset the link on every mtu change). */
static int apply_mtu(const struct vm_switch *sw, const char *dev, char *err, size_t errlen)
{
	struct vm_link l;
	char mtu[8], what[64];

	if (!sw->mtu)
		return 0;
	if (vm_link_get(dev, &l, err, errlen) < 0)
		return -1;
	if (!l.exists || l.mtu == sw->mtu)
		return 0;
	snprintf(mtu, sizeof(mtu), "%u", sw->mtu);
	snprintf(what, sizeof(what), "setting the mtu of %s", dev);
	return vm_ip(err, errlen, what, "link", "set", "dev", dev, "mtu", mtu, NULL);
}

static int attach_port(const struct vm_switch *sw, const char *port, struct made_links *made,
                       char *err, size_t errlen)
{
	char member[VM_IFNAME_MAX + 1], what[96];

	if (vm_switch_port_check(sw, port, err, errlen) < 0 ||
	    port_member(sw, port, member, err, errlen) < 0)
		return -1;
	if (sw->vlan && make_vlan(sw, port, member, made, err, errlen) < 0)
		return -1;
	if (apply_mtu(sw, port, err, errlen) < 0 ||
	    (sw->vlan && apply_mtu(sw, member, err, errlen) < 0))
		return -1;
	snprintf(what, sizeof(what), "adding %s to switch %s", member, sw->name);
	return vm_ip(err, errlen, what, "link", "set", "dev", member, "master", sw->bridge, "up",
	             NULL);
}

int vm_switch_port_add(const struct vm_switch *sw, const char *port, char *err, size_t errlen)
{
	struct made_links made = {.n = 0};

	if (attach_port(sw, port, &made, err, errlen) < 0) {
		made_undo(&made);
		return -1;
	}
	return 0;
}

int vm_switch_port_remove(const struct vm_switch *sw, const char *port, char *err, size_t errlen)
{
	char member[VM_IFNAME_MAX + 1], what[96];
	struct vm_link l;

	if (port_member(sw, port, member, err, errlen) < 0 ||
	    vm_link_get(member, &l, err, errlen) < 0)
		return -1;
	snprintf(what, sizeof(what), "removing %s from switch %s", member, sw->name);
	if (sw->vlan && l.exists && !strcmp(l.kind, "vlan"))
		return vm_ip(err, errlen, what, "link", "del", "dev", member, NULL);
	if (l.exists && !strcmp(l.master, sw->bridge))
		return vm_ip(err, errlen, what, "link", "set", "dev", member, "nomaster", NULL);
	return 0;
}

/* Attach every configured port; one that cannot be (gone, or carrying the
 * host's address since) is skipped with a warning so guests still start. */
static int attach_ports(const struct vm_switch *sw, struct made_links *made, char *err,
                        size_t errlen)
{
	char port[VM_IFNAME_MAX + 1];

	for (size_t i = 0; vm_words_at(sw->ports, i, port, sizeof(port)) == 0; i++) {
		char why[512];
		if (vm_switch_port_check(sw, port, why, sizeof(why)) < 0) {
			vm_warn("switch %s: port skipped: %s", sw->name, why);
			continue;
		}
		if (attach_port(sw, port, made, err, errlen) < 0)
			return -1;
	}
	return 0;
}

static int manual_up(const struct vm_switch *sw, char *err, size_t errlen)
{
	struct vm_link l;
	char what[64];

	if (vm_link_get(sw->bridge, &l, err, errlen) < 0)
		return -1;
	if (!l.exists || strcmp(l.kind, "bridge")) {
		snprintf(err, errlen, "switch %s: %s is not an existing bridge", sw->name,
		         sw->bridge);
		return -1;
	}
	snprintf(what, sizeof(what), "bringing up %s", sw->bridge);
	return vm_ip(err, errlen, what, "link", "set", "dev", sw->bridge, "up", NULL);
}

/*
 * A random locally administered MAC for a new bridge (vm-bhyve: "link
 * random").  Left to itself a Linux bridge takes the lowest MAC of its
 * ports, so every guest starting or stopping would change the gateway's
 * MAC under the other guests; a MAC we set stays.
 */
static void random_mac(char out[MAC_STRLEN])
{
	uint8_t mac[MAC_LEN];

	mac_random_local(mac);
	mac_format(mac, out);
}

/* Create vm-NAME when missing; -1 when the name is taken by something else. */
static int make_bridge(const struct vm_switch *sw, struct made_links *made, char *err,
                       size_t errlen)
{
	struct vm_link l;
	char what[64], mac[18];

	if (vm_link_get(sw->bridge, &l, err, errlen) < 0)
		return -1;
	if (l.exists && strcmp(l.kind, "bridge")) {
		snprintf(err, errlen, "switch %s: %s exists and is not a bridge", sw->name,
		         sw->bridge);
		return -1;
	}
	if (l.exists)
		return 0;
	random_mac(mac);
	snprintf(what, sizeof(what), "creating bridge %s", sw->bridge);
	if (vm_ip(err, errlen, what, "link", "add", "name", sw->bridge, "address", mac, "type",
	          "bridge", NULL) < 0)
		return -1;
	made_add(made, sw->bridge);
	return 0;
}

static int standard_up(const struct vm_sys *sys, const struct vm_switch *sw,
                       struct made_links *made, char *err, size_t errlen)
{
	char what[64];

	snprintf(what, sizeof(what), "configuring switch %s", sw->name);
	if (make_bridge(sw, made, err, errlen) < 0 || apply_mtu(sw, sw->bridge, err, errlen) < 0)
		return -1;
	if (sw->has_addr &&
	    vm_ip(err, errlen, what, "addr", "replace", sw->addr_text, "dev", sw->bridge, NULL) < 0)
		return -1;
	if (attach_ports(sw, made, err, errlen) < 0 ||
	    vm_ip(err, errlen, what, "link", "set", "dev", sw->bridge, "up", NULL) < 0)
		return -1;
	return sw->nat ? vm_nat_start(sys, sw, err, errlen) : 0;
}

/*
 * Guests starting at the same time bring up the same switch: hold an
 * exclusive flock on $vm_dir/.config (a folder, so no lock file appears)
 * while one of them does.  -1 when it cannot be opened: we then go ahead
 * unlocked rather than fail.
 */
static int lock_switches(const struct vm_sys *sys)
{
	int fd = open(sys->config_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	while (fd >= 0 && flock(fd, LOCK_EX) < 0 && errno == EINTR)
		;
	return fd;
}

static int bring_up(const struct vm_sys *sys, const struct vm_switch *sw, char *err, size_t errlen)
{
	struct made_links made = {.n = 0};

	if (sw->type == VM_SWITCH_MANUAL)
		return manual_up(sw, err, errlen);
	if (sw->type != VM_SWITCH_STANDARD) {
		snprintf(err, errlen,
		         "switch %s: type %s is not available on Linux (standard or manual are)",
		         sw->name, sw->type_name);
		return -1;
	}
	if (standard_up(sys, sw, &made, err, errlen) == 0)
		return 0;
	if (sw->nat) {
		char ignored[256];
		vm_nat_stop(sys, sw, ignored, sizeof(ignored));
	}
	made_undo(&made);
	return -1;
}

int vm_switch_up(const struct vm_sys *sys, const struct vm_switch *sw, char *err, size_t errlen)
{
	int lock = lock_switches(sys), rc = bring_up(sys, sw, err, errlen);

	if (lock >= 0)
		close(lock);
	return rc;
}

int vm_switch_down(const struct vm_sys *sys, const struct vm_switch *sw, char *err, size_t errlen)
{
	char port[VM_IFNAME_MAX + 1], what[64];
	struct vm_link l;

	if (sw->nat && vm_nat_stop(sys, sw, err, errlen) < 0)
		return -1;
	if (sw->type != VM_SWITCH_STANDARD)
		return 0; /* an adopted bridge is the user's */
	for (size_t i = 0; vm_words_at(sw->ports, i, port, sizeof(port)) == 0; i++)
		if (vm_switch_port_remove(sw, port, err, errlen) < 0)
			return -1;
	if (vm_link_get(sw->bridge, &l, err, errlen) < 0)
		return -1;
	if (!l.exists || strcmp(l.kind, "bridge"))
		return 0;
	snprintf(what, sizeof(what), "deleting bridge %s", sw->bridge);
	return vm_ip(err, errlen, what, "link", "del", "dev", sw->bridge, NULL);
}

/* ---- guest taps ---- */

/* How networkN of a guest is wired up. */
struct nic {
	char tap[VM_IFNAME_MAX + 1];
	bool given;   /* networkN_device: may exist already, and is then not ours */
	int sw;       /* index in the switch table, -1 when not on a switch */
	bool created; /* we made the tap in this call */
};

static const char *nic_setting(const struct vm_guest *g, unsigned n, const char *what)
{
	char key[48];

	snprintf(key, sizeof(key), "network%u_%s", n, what);
	return rcconf_get(g->conf, key);
}

static uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

void vm_net_tap_name(const struct vm_guest *g, unsigned n, char out[16])
{
	const char *dev = nic_setting(g, n, "device"), *name = nic_setting(g, n, "name");

	if (dev && *dev && strlen(dev) <= VM_IFNAME_MAX)
		snprintf(out, 16, "%s", dev);
	else if (name && *name && strlen(name) <= VM_IFNAME_MAX)
		snprintf(out, 16, "%s", name);
	else if (strlen(g->name) + 4 + 1 + (n >= 10) + 1 <= VM_IFNAME_MAX)
		snprintf(out, 16, "vmt-%.9s-%u", g->name, n);
	else
		snprintf(out, 16, "vmt%08x-%u", (unsigned)fnv1a(g->name), n % 100);
}

/* How many networkN_type settings there are, counting from network0. */
static int count_networks(const struct vm_guest *g, size_t *count, char *err, size_t errlen)
{
	size_t n = 0;
	const char *type;

	while ((type = nic_setting(g, (unsigned)n, "type")) && *type) {
		if (++n > VM_MAX_NICS) {
			snprintf(err, errlen, "%s: at most %d network interfaces", g->name,
			         VM_MAX_NICS);
			return -1;
		}
	}
	*count = n;
	return 0;
}

/* Index of switch `name` in `sws`, loading it when new; -1 with `err`. */
static int switch_index(const struct vm_sys *sys, const char *name, struct vm_switch *sws,
                        size_t *nsw, char *err, size_t errlen)
{
	for (size_t i = 0; i < *nsw; i++)
		if (!strcmp(sws[i].name, name))
			return (int)i;
	if (vm_switch_get(sys, name, &sws[*nsw], err, errlen) < 0)
		return -1;
	if (sws[*nsw].type != VM_SWITCH_STANDARD && sws[*nsw].type != VM_SWITCH_MANUAL) {
		snprintf(err, errlen, "switch %s: type %s is not available on Linux", name,
		         sws[*nsw].type_name);
		return -1;
	}
	return (int)(*nsw)++;
}

/* Check the settings of networkN and fill `nic`; nothing is created. */
static int plan_nic(const struct vm_sys *sys, const struct vm_guest *g, unsigned n, struct nic *nic,
                    struct vm_switch *sws, size_t *nsw, char *err, size_t errlen)
{
	const char *sw = nic_setting(g, n, "switch"), *dev = nic_setting(g, n, "device");
	const char *name = nic_setting(g, n, "name");
	char why[512];

	memset(nic, 0, sizeof(*nic));
	nic->sw = -1;
	nic->given = dev && *dev;
	if ((nic->given && !vm_ifname_valid(dev)) || (name && *name && !vm_ifname_valid(name))) {
		snprintf(err, errlen,
		         "%s: network%u_%s=\"%s\": not an interface name (at most 15 characters)",
		         g->name, n, nic->given ? "device" : "name", nic->given ? dev : name);
		return -1;
	}
	vm_net_tap_name(g, n, nic->tap);
	if (nic_setting(g, n, "span") && vm_onoff_parse(nic_setting(g, n, "span")) == 1)
		vm_warn("%s: network%u_span: Linux bridges have no span ports; added as an "
		        "ordinary port",
		        g->name, n);
	if (!sw || !*sw)
		return 0;
	nic->sw = switch_index(sys, sw, sws, nsw, why, sizeof(why));
	if (nic->sw < 0) {
		snprintf(err, errlen, "%s: network%u_switch: %s", g->name, n, why);
		return -1;
	}
	return 0;
}

static int plan_nics(const struct vm_sys *sys, const struct vm_guest *g, size_t n, struct nic *nics,
                     struct vm_switch *sws, size_t *nsw, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		if (plan_nic(sys, g, (unsigned)i, &nics[i], sws, nsw, err, errlen) < 0)
			return -1;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(nics[i].tap, nics[j].tap)) {
				snprintf(err, errlen,
				         "%s: network%zu and network%zu both use interface %s",
				         g->name, j, i, nics[i].tap);
				return -1;
			}
	}
	return 0;
}

/* "vmnet/GUEST/N/": the start of the ifalias of the taps we make. */
static void tap_mark(const struct vm_guest *g, unsigned n, char *out, size_t len)
{
	snprintf(out, len, "vmnet/%s/%u/", g->name, n);
}

/* Create the tap of `nic` unless it is a networkN_device that exists; a
 * leftover of ours (a supervisor killed before cleaning up) is replaced. */
static int make_tap(const struct vm_guest *g, unsigned n, struct nic *nic,
                    const struct vm_switch *sw, char *err, size_t errlen)
{
	char mark[128], alias[160], what[256];
	struct vm_link l;

	tap_mark(g, n, mark, sizeof(mark));
	snprintf(what, sizeof(what), "%s: creating tap %.15s", g->name, nic->tap);
	if (vm_link_get(nic->tap, &l, err, errlen) < 0)
		return -1;
	if (l.exists && !strncmp(l.alias, mark, strlen(mark))) {
		if (vm_ip(err, errlen, what, "link", "del", "dev", nic->tap, NULL) < 0)
			return -1;
		l.exists = false;
	}
	if (l.exists && !nic->given) {
		snprintf(err, errlen,
		         "%s: interface %s already exists and is not the tap of network%u", g->name,
		         nic->tap, n);
		return -1;
	}
	if (l.exists && sw && l.has_ipv4) {
		snprintf(err, errlen,
		         "%s: network%u_device %s has an IPv4 address; not adding it to switch %s",
		         g->name, n, nic->tap, sw->name);
		return -1;
	}
	if (l.exists)
		return 0;
	if (vm_ip(err, errlen, what, "tuntap", "add", "dev", nic->tap, "mode", "tap", NULL) < 0)
		return -1;
	nic->created = true;
	snprintf(alias, sizeof(alias), "%s%s", mark, sw ? sw->name : "custom");
	return vm_ip(err, errlen, what, "link", "set", "dev", nic->tap, "alias", alias, NULL);
}

/* Put the tap on its switch with the bridge's mtu (so adding it does not
 * change the bridge's), isolated on a private switch, and bring it up. */
static int attach_tap(const struct vm_guest *g, unsigned n, const struct nic *nic,
                      const struct vm_switch *sw, char *err, size_t errlen)
{
	char what[256], mtu[12];
	struct vm_link br;

	snprintf(what, sizeof(what), "%s: attaching tap %.15s", g->name, nic->tap);
	if (!sw) {
		vm_warn("%s: network%u has no network%u_switch: %s is not attached to any switch",
		        g->name, n, n, nic->tap);
		return vm_ip(err, errlen, what, "link", "set", "dev", nic->tap, "up", NULL);
	}
	if (vm_link_get(sw->bridge, &br, err, errlen) < 0)
		return -1;
	snprintf(mtu, sizeof(mtu), "%u", br.mtu ? br.mtu : 1500);
	if (vm_ip(err, errlen, what, "link", "set", "dev", nic->tap, "mtu", mtu, "master",
	          sw->bridge, "up", NULL) < 0)
		return -1;
	if (!sw->is_private)
		return 0;
	return vm_ip(err, errlen, what, "link", "set", "dev", nic->tap, "type", "bridge_slave",
	             "isolated", "on", NULL);
}

static void delete_created(const struct nic *nics, size_t n)
{
	char err[256];

	for (size_t i = 0; i < n; i++)
		if (nics[i].created && vm_ip(err, sizeof(err), "cleaning up", "link", "del", "dev",
		                             nics[i].tap, NULL) < 0)
			vm_warn("%s", err);
}

static int wire_nics(const struct vm_sys *sys, const struct vm_guest *g, struct nic *nics, size_t n,
                     const struct vm_switch *sws, size_t nsw, char *err, size_t errlen)
{
	for (size_t i = 0; i < nsw; i++)
		if (vm_switch_up(sys, &sws[i], err, errlen) < 0)
			return -1;
	for (size_t i = 0; i < n; i++) {
		const struct vm_switch *sw = nics[i].sw >= 0 ? &sws[nics[i].sw] : NULL;
		if (make_tap(g, (unsigned)i, &nics[i], sw, err, errlen) < 0 ||
		    attach_tap(g, (unsigned)i, &nics[i], sw, err, errlen) < 0)
			return -1;
	}
	return 0;
}

int vm_net_prepare(const struct vm_sys *sys, const struct vm_guest *g, struct vm_taps *taps,
                   char *err, size_t errlen)
{
	struct nic nics[VM_MAX_NICS];
	struct vm_switch *sws = NULL;
	size_t n, nsw = 0;
	int rc = -1;

	memset(taps, 0, sizeof(*taps));
	if (count_networks(g, &n, err, errlen) < 0)
		return -1;
	if (n == 0)
		return 0;
	if (!(sws = calloc(n, sizeof(*sws)))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (plan_nics(sys, g, n, nics, sws, &nsw, err, errlen) < 0)
		goto out;
	if (geteuid() != 0) {
		snprintf(err, errlen, "%s: creating its network taps needs root", g->name);
		goto out;
	}
	if (wire_nics(sys, g, nics, n, sws, nsw, err, errlen) < 0) {
		delete_created(nics, n);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		memcpy(taps->name[i], nics[i].tap, sizeof(taps->name[i]));
	taps->n = n;
	rc = 0;
out:
	free(sws);
	return rc;
}

void vm_net_release(const struct vm_sys *sys, const struct vm_guest *g, const struct vm_taps *taps)
{
	char mark[128], err[256];
	struct vm_link l;

	(void)sys;
	for (size_t i = 0; i < taps->n && i < VM_MAX_NICS; i++) {
		if (!taps->name[i][0])
			continue;
		tap_mark(g, (unsigned)i, mark, sizeof(mark));
		if (vm_link_get(taps->name[i], &l, err, sizeof(err)) < 0) {
			vm_warn("%s", err);
			continue;
		}
		/* Only what we made: a networkN_device that existed is the user's. */
		if (!l.exists || strncmp(l.alias, mark, strlen(mark)))
			continue;
		if (vm_ip(err, sizeof(err), "deleting tap", "link", "del", "dev", taps->name[i],
		          NULL) < 0)
			vm_warn("%s: %s", g->name, err);
	}
}
