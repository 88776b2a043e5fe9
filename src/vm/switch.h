/*
 * Virtual switches on Linux, shared by net.c (bring-up, taps), nat.c
 * (nftables + dnsmasq), nettool.c (running ip/nft/dnsmasq) and
 * cmd_switch.c (`vm switch ...`).  Not part of the public net.h API; the
 * pure helpers are here so unit tests can reach them.
 *
 * A "standard" switch NAME is a Linux bridge vm-NAME that we create, with
 * the host interfaces in ports_NAME (or PORT.VLAN when vlan_NAME is set)
 * as its ports.  A "manual" switch adopts an existing bridge (bridge_NAME)
 * that we never change or delete.  Settings are vm-bhyve's keys in
 * $vm_dir/.config/system.conf, plus nat_NAME="yes" for khyve's NAT.
 */
#ifndef KHYVE_VM_SWITCH_H
#define KHYVE_VM_SWITCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vm/khyvecmd.h"
#include "vm/vm.h"

/* "vm-" + name must fit Linux's 15-character interface names. */
#define VM_SWITCH_NAME_MAX 12
#define VM_IFNAME_MAX      15
#define VM_PORTS_MAX       1024 /* bytes of the ports_NAME list */

/* ---- pure helpers (no system calls) ---- */

/* An IPv4 address with its prefix length, as in "10.0.0.1/24". */
struct vm_cidr {
	uint32_t addr; /* host byte order */
	unsigned len;  /* 0..32 */
};

/* Strict a.b.c.d/len (octets 0..255, len 0..32, no extra text); 0 or -1. */
int vm_cidr_parse(const char *s, struct vm_cidr *out);
/* "a.b.c.d/len" of the network `c` lies in (out: at least 19 bytes). */
void vm_cidr_network(const struct vm_cidr *c, char *out, size_t len);
/*
 * The DHCP pool NAT hands out: the half of the subnet that does not hold
 * the switch's own address, without the network and broadcast addresses
 * (10.0.0.1/24 gives 10.0.0.128-10.0.0.254).  -1 for prefixes longer
 * than /30, which leave no room for guests.
 */
int vm_dhcp_range(const struct vm_cidr *c, char lo[16], char hi[16]);

/* Switch names: 1..12 of [A-Za-z0-9_], starting with a letter or digit
 * (they become rc.conf keys such as type_NAME and the bridge vm-NAME). */
bool vm_switch_name_valid(const char *name);
/* Linux interface names: 1..15 bytes, no '/', ':', blanks; not "." or "..". */
bool vm_ifname_valid(const char *name);
/* VLAN ids 0..4094 (0 = none) and MTUs 68..9000, decimal only; 0 or -1. */
int vm_vlan_parse(const char *s, unsigned *vlan);
int vm_mtu_parse(const char *s, unsigned *mtu);
/* on/yes/true/1 -> 1, off/no/false/0 -> 0 (any case), else -1. */
int vm_onoff_parse(const char *s);

/*
 * Space-separated word lists (switch_list, ports_NAME), changed as
 * vm-bhyve changes them with sysrc's += and -=.  vm_words_add() and
 * vm_words_remove() return a malloc'd list (NULL when out of memory).
 */
bool vm_words_has(const char *list, const char *word);
char *vm_words_add(const char *list, const char *word);
char *vm_words_remove(const char *list, const char *word);
/* Copy word `i` of `list` into `out`; -1 when there is none or it is too long. */
int vm_words_at(const char *list, size_t i, char *out, size_t len);

/* ---- switch settings ---- */

enum vm_switch_type {
	VM_SWITCH_STANDARD,
	VM_SWITCH_MANUAL,
	VM_SWITCH_OTHER, /* vale, netgraph, vxlan: FreeBSD-only, listed but not run */
};

struct vm_switch {
	char name[VM_SWITCH_NAME_MAX + 1];
	enum vm_switch_type type;
	char type_name[32];             /* type_NAME as configured */
	char bridge[VM_IFNAME_MAX + 1]; /* vm-NAME, or bridge_NAME for manual */
	char ports[VM_PORTS_MAX];       /* ports_NAME */
	bool has_addr;
	struct vm_cidr addr; /* addr_NAME when has_addr */
	char addr_text[20];
	unsigned vlan;   /* 0 = none */
	unsigned mtu;    /* 0 = the kernel's choice */
	bool is_private; /* private_NAME: taps isolated from each other */
	bool nat;        /* nat_NAME */
};

/* True when `name` is in switch_list. */
bool vm_switch_listed(const struct vm_sys *sys, const char *name);

/*
 * Read switch `name` from sys->system.  -1 with "NAME: no such switch" or
 * "...: bad value" in `err` (a hand-edited file).
 */
int vm_switch_get(const struct vm_sys *sys, const char *name, struct vm_switch *sw, char *err,
                  size_t errlen);

/* ---- live state (needs root; every failure is one line in `err`) ---- */

/*
 * Make switch `sw` exist and run: create the bridge, apply mtu, address,
 * ports (IF, or IF.VLAN created on demand) and start NAT when it is on.
 * Idempotent.  A port that carries an IPv4 address is skipped with a
 * warning rather than enslaved (that would cut the host's link).  On error
 * the links this call created are deleted again.
 */
int vm_switch_up(const struct vm_sys *sys, const struct vm_switch *sw, char *err, size_t errlen);

/* Stop NAT, release the ports (deleting IF.VLAN links) and delete the
 * bridge of a standard switch; a manual switch's bridge is left alone. */
int vm_switch_down(const struct vm_sys *sys, const struct vm_switch *sw, char *err, size_t errlen);

/* Put port `port` (IF, or IF.VLAN with sw->vlan) on the running bridge.  -1
 * when `port` does not exist or carries an IPv4 address. */
int vm_switch_port_add(const struct vm_switch *sw, const char *port, char *err, size_t errlen);
/* Take `port` off the bridge (deleting IF.VLAN); quiet when it is not on. */
int vm_switch_port_remove(const struct vm_switch *sw, const char *port, char *err, size_t errlen);

/*
 * Whether `port` may join `sw`: it exists, and what would be enslaved (IF,
 * or IF.VLAN when that exists) is not a port elsewhere and carries no IPv4
 * address (else -1 with a message that says to use a manual switch).
 */
int vm_switch_port_check(const struct vm_switch *sw, const char *port, char *err, size_t errlen);

/* ---- NAT: nftables masquerading + dnsmasq (nat.c) ---- */

/* The nft table of switch `sw`: "khyve-NAME" (family ip). */
void vm_nat_table(const struct vm_switch *sw, char *out, size_t len);
/* The nft script that (re)creates that table atomically (malloc'd). */
char *vm_nat_nft_script(const struct vm_switch *sw);
/* dnsmasq's argv for `sw` (DHCP on the bridge only); 0 or -1. */
int vm_nat_dnsmasq_argv(const struct vm_sys *sys, const struct vm_switch *sw, struct argv *out);
/* Its pid file and lease file: $vm_dir/.config/nat/NAME.pid, NAME.leases. */
int vm_nat_file(const struct vm_sys *sys, const struct vm_switch *sw, const char *ext, char *out);

/* Enable forwarding, load the nft table, (re)start dnsmasq as needed. */
int vm_nat_start(const struct vm_sys *sys, const struct vm_switch *sw, char *err, size_t errlen);
/* Stop dnsmasq and delete the table; quiet when NAT was not running. */
int vm_nat_stop(const struct vm_sys *sys, const struct vm_switch *sw, char *err, size_t errlen);
/* The pid of the switch's running dnsmasq, or 0. */
pid_t vm_nat_dnsmasq_pid(const struct vm_sys *sys, const struct vm_switch *sw);

/* ---- running tools and reading links (nettool.c) ---- */

/* vm_tool_run() (util.h) for `ip ARGS...` (NULL-terminated). */
int vm_ip(char *err, size_t errlen, const char *what, ...) __attribute__((sentinel));

/* What we need to know of one network interface. */
struct vm_link {
	bool exists;
	char kind[16];                  /* linkinfo kind: "bridge", "tun", "vlan", "" */
	char master[VM_IFNAME_MAX + 1]; /* the bridge it is a port of, or "" */
	char alias[256];                /* ifalias, or "" */
	unsigned mtu;
	bool has_ipv4;
};

/* Fill `l` (exists false when there is no such interface); 0 or -1. */
int vm_link_get(const char *name, struct vm_link *l, char *err, size_t errlen);
/*
 * Call fn for each port of bridge `bridge` (name, kind, alias).  0, or -1
 * with `err`.
 */
int vm_link_ports(const char *bridge,
                  void (*fn)(const char *name, const char *kind, const char *alias, void *arg),
                  void *arg, char *err, size_t errlen);
/* Bytes received and sent by `name`; 0 or -1. */
int vm_link_bytes(const char *name, unsigned long long *rx, unsigned long long *tx);

#endif
