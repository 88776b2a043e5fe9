#!/bin/sh
# vm switch: bridges, ports, vlan, address, NAT (nftables + dnsmasq),
# manual switches and bad input.  Runs in a private network namespace
# (unshare -n) so the host's links are never touched; skipped (exit 0)
# where namespaces are not allowed.
if [ -z "${T_SWITCH_IN_NETNS:-}" ]; then
	if ! unshare -n true 2>/dev/null; then
		echo "SKIP t-switch: cannot create a network namespace (unshare -n needs root)"
		exit 0
	fi
	T_SWITCH_IN_NETNS=1 exec unshare -n sh "$0" "$@"
fi
. "$TOP/tests/vm/lib.sh"

conf=$vm_dir/.config/system.conf
natdir=$vm_dir/.config/nat
# dnsmasq would keep this namespace (and itself) alive after we exit.
stop_dnsmasq() {
	for p in "$natdir"/*.pid; do
		[ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null
	done
	return 0
}
trap 'stop_dnsmasq; rm -rf "$scratch"' EXIT

# A zombie has an empty cmdline (this host's init may not reap them).
alive() { [ -n "$(tr -d '\0' <"/proc/$1/cmdline" 2>/dev/null)" ]; }
has_link() { ip link show dev "$1" >/dev/null 2>&1; }
master_of() { ip -o link show dev "$1" | sed -n 's/.* master \([^ ]*\) .*/\1/p'; }
# list_row NAME: the columns after NAME of its `vm switch list` row, one space apart.
list_row() { vm switch list | awk -v n="$1" '$1 == n { $1 = ""; sub(/^ /, ""); print }'; }
# fails CMD...: a one-line error and no file changed.
fails() {
	snapshot_tree
	expect_fail "$@"
	same_tree "$@"
}

ip link set lo up
vm init >/dev/null 2>&1 || mkdir -p "$vm_dir/.config"

# ---- list, create ----
[ "$(vm switch list)" = "NAME  TYPE  IFACE  ADDRESS  PRIVATE  MTU  VLAN  PORTS" ] ||
	die "empty list: $(vm switch list)"
vm switch create public
ip -d link show dev vm-public | grep -q 'bridge ' || die "vm-public is not a bridge"
ip link show dev vm-public | grep -q '[<,]UP[,>]' || die "vm-public is not up"
[ "$(list_row public)" = "standard vm-public - no - - -" ] || die "list: $(list_row public)"
grep -qx 'switch_list="public"' "$conf" && grep -qx 'type_public="standard"' "$conf" ||
	die "config: $(cat "$conf")"
vm switch create -m 1400 -p second
[ "$(ip -o link show dev vm-second | sed 's/.* mtu \([0-9]*\) .*/\1/')" = 1400 ] || die "mtu 1400"
vm switch list | grep -qx 'second  standard  vm-second  -        yes      1400  -     -' ||
	die "list alignment: $(vm switch list)"
vm switch info second | grep -q '^  ident: vm-second$' || die "info: $(vm switch info second)"

# ---- address ----
vm switch address public 10.77.0.1/24
ip -4 -o addr show dev vm-public | grep -q 'inet 10.77.0.1/24' || die "address not set"
vm switch address public 10.78.0.1/24
ip -4 -o addr show dev vm-public | grep -q 'inet 10.77.0.1/24' && die "old address kept"
ip -4 -o addr show dev vm-public | grep -q 'inet 10.78.0.1/24' || die "new address not set"
grep -qx 'addr_public="10.78.0.1/24"' "$conf" || die "addr_public"
[ "$(list_row public)" = "standard vm-public 10.78.0.1/24 no - - -" ] || die "list: $(list_row public)"

# ---- vlan (no ports: settings only) ----
vm switch vlan public 10
grep -qx 'vlan_public="10"' "$conf" || die "vlan_public"
[ "$(list_row public)" = "standard vm-public 10.78.0.1/24 no - 10 -" ] || die "list: $(list_row public)"
vm switch vlan public 0
grep -q vlan_public "$conf" && die "vlan 0 kept vlan_public"

# ---- ports ----
ip link add kt0 type veth peer name kt1
ip addr add 192.0.2.1/24 dev kt1
mac_of() { ip -o link show dev "$1" | sed 's|.* link/ether \([0-9a-f:]*\) .*|\1|'; }
mac=$(mac_of vm-public)
vm switch add public kt0
[ "$(master_of kt0)" = vm-public ] || die "kt0 not on vm-public"
[ "$(mac_of vm-public)" = "$mac" ] || die "the bridge's MAC changed when a port joined"
grep -qx 'ports_public="kt0"' "$conf" || die "ports_public"
fails vm switch add public kt1
grep -q 'manual' "$scratch/err" || die "IPv4 refusal does not point to manual switches: $(cat "$scratch/err")"
[ -z "$(master_of kt1)" ] || die "kt1 was enslaved"
fails vm switch add public kt0
fails vm switch add public nosuch0
fails vm switch remove public kt1
if ip link add link kt1 name kt1.3 type vlan id 3 2>/dev/null; then
	ip link del kt1.3
	vm switch vlan public 9
	[ "$(master_of kt0.9)" = vm-public ] || die "kt0.9 not on vm-public"
	[ -z "$(master_of kt0)" ] || die "kt0 still on the bridge untagged"
	vm switch vlan public 0
	has_link kt0.9 && die "kt0.9 not deleted"
	[ "$(master_of kt0)" = vm-public ] || die "kt0 not back on vm-public"
else
	echo "note: no vlan support in this kernel; checking that the failure changes nothing"
	fails vm switch vlan public 9
	[ "$(master_of kt0)" = vm-public ] || die "kt0 lost after a failed vlan change"
fi
# The bridge comes back on demand with its address and ports.
ip link del vm-public
vm switch address public 10.78.0.1/24
[ "$(master_of kt0)" = vm-public ] || die "kt0 not re-attached"
ip -4 -o addr show dev vm-public | grep -q 'inet 10.78.0.1/24' || die "address not re-applied"
vm switch remove public kt0
[ -z "$(master_of kt0)" ] || die "kt0 still on vm-public"
grep -q ports_public "$conf" && die "ports_public kept"

# ---- NAT ----
fails vm switch nat second on # no address
if command -v nft >/dev/null && command -v dnsmasq >/dev/null; then
	vm switch nat public on
	grep -qx 'nat_public="yes"' "$conf" || die "nat_public"
	nft list table ip khyve-public | grep -q 'ip saddr 10.78.0.0/24 .*masquerade' ||
		die "no masquerade: $(nft list table ip khyve-public)"
	[ "$(cat /proc/sys/net/ipv4/ip_forward)" = 1 ] || die "forwarding off"
	pid=$(cat "$natdir/public.pid")
	alive "$pid" || die "dnsmasq is not running"
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'dnsmasq .*--interface=vm-public .*--bind-interfaces' ||
		die "dnsmasq: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- '--dhcp-range=10.78.0.128,10.78.0.254,' ||
		die "dhcp range"
	vm switch info public | grep -q '^  nat: yes (dhcp 10.78.0.128-10.78.0.254, dnsmasq running)$' ||
		die "info: $(vm switch info public)"
	vm switch nat public on # again: nothing restarts
	[ "$(cat "$natdir/public.pid")" = "$pid" ] || die "dnsmasq restarted for nothing"
	# A new address moves the rules and restarts DHCP with the new range.
	vm switch address public 10.79.0.1/24
	nft list table ip khyve-public | grep -q 'ip saddr 10.79.0.0/24' || die "rules not moved"
	alive "$pid" && die "old dnsmasq still runs"
	pid=$(cat "$natdir/public.pid")
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- '--dhcp-range=10.79.0.128,' || die "range not moved"
	fails vm switch address public none # NAT needs it
	fails vm switch address public 10.79.0.1/31
	vm switch nat public off
	nft list table ip khyve-public >/dev/null 2>&1 && die "table kept"
	alive "$pid" && die "dnsmasq still runs"
	grep -q nat_public "$conf" && die "nat_public kept"
	vm switch nat public on
	pid=$(cat "$natdir/public.pid")
else
	echo "note: nft or dnsmasq missing; NAT not tested"
fi

# ---- private ----
vm switch private public on
grep -qx 'private_public="yes"' "$conf" || die "private_public"
vm switch private public off

# ---- destroy ----
vm switch destroy public
has_link vm-public && die "vm-public kept"
grep -q '_public=' "$conf" && die "settings kept: $(cat "$conf")"
grep -qx 'switch_list="second"' "$conf" || die "switch_list: $(cat "$conf")"
if [ -n "${pid:-}" ]; then
	alive "$pid" && die "dnsmasq survived destroy"
	nft list table ip khyve-public >/dev/null 2>&1 && die "table survived destroy"
fi
vm switch address second 10.90.0.1/24
vm switch address second none
ip -4 -o addr show dev vm-second | grep -q inet && die "address none kept the address"
grep -q addr_second "$conf" && die "addr_second kept"

# ---- manual ----
ip link add br-test type bridge
vm switch create -t manual -b br-test lan
[ "$(list_row lan)" = "manual br-test n/a no n/a n/a n/a" ] || die "list: $(list_row lan)"
grep -qx 'bridge_lan="br-test"' "$conf" || die "bridge_lan"
fails vm switch add lan kt0
fails vm switch address lan 10.1.0.1/24
fails vm switch nat lan on
vm switch destroy lan
has_link br-test || die "destroy deleted the adopted bridge"
grep -q '_lan=' "$conf" && die "lan settings kept"

# ---- bad input: one line, nothing changed ----
ip link add vm-taken type veth peer name kt2
fails vm switch
fails vm switch frobnicate
fails vm switch create
fails vm switch create my-lan
fails vm switch create abcdefghijklm
fails vm switch create second
fails vm switch create -n 4095 x1
fails vm switch create -a 10.0.0.256/24 x1
fails vm switch create -a 10.0.0.1 x1
fails vm switch create -m 50 x1
fails vm switch create -t vale x1
fails vm switch create -t manual x1
fails vm switch create -t manual -b nosuchbr x1
fails vm switch create -t manual -b kt0 x1
fails vm switch create -i kt1 x1
fails vm switch create taken
has_link vm-x1 && die "a failed create left vm-x1"
fails vm switch create -q x1
fails vm switch address nope 10.0.0.1/24
fails vm switch address second 1.2.3/24
fails vm switch address second 10.0.0.1/24 extra
fails vm switch address second none
fails vm switch vlan second 4095
fails vm switch vlan nope 1
fails vm switch nat second maybe
fails vm switch nat nope on
fails vm switch destroy nope
fails vm switch info nope
fails vm switch private second maybe
has_link vm-nope && die "vm-nope created"
vm switch destroy second
has_link vm-second && die "vm-second kept"
echo "t-switch: ok"
