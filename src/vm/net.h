/*
 * Virtual switches (Linux bridges named vm-NAME, as vm-bhyve names them)
 * and the taps of running guests.  Switch settings live in
 * $vm_dir/.config/system.conf with vm-bhyve's keys (switch_list,
 * type_NAME, ports_NAME, vlan_NAME, addr_NAME, mtu_NAME, bridge_NAME) plus
 * nat_NAME for khyve's NAT (nftables masquerading + dnsmasq DHCP).
 */
#ifndef KHYVE_VM_NET_H
#define KHYVE_VM_NET_H

#include "vm/khyvecmd.h"
#include "vm/vm.h"

/*
 * Before khyve starts: make sure every networkN_switch exists (bridge up,
 * NAT running when enabled), create one tap per networkN (named in
 * `taps`; networkN_device is used as the name when set) and attach it.
 * 0, or -1 with `err` and nothing left behind.
 */
int vm_net_prepare(const struct vm_sys *sys, const struct vm_guest *g, struct vm_taps *taps,
                   char *err, size_t errlen);

/* After khyve exits: remove the taps vm_net_prepare() made. */
void vm_net_release(const struct vm_sys *sys, const struct vm_guest *g, const struct vm_taps *taps);

/* The tap name networkN of guest `g` will get (for dry runs). */
void vm_net_tap_name(const struct vm_guest *g, unsigned n, char out[16]);

#endif
