# vm init, create, list, info, add, rename, destroy, get/set and their
# errors: one line on stderr, non-zero exit, no file changed.
. "$TOP/tests/vm/lib.sh"

expect_fail vm list # not initialised yet
vm init
[ -d "$vm_dir/.templates" ] && [ -d "$vm_dir/.iso" ] && [ -d "$vm_dir/.img" ] ||
	die "init made no folders"
cat >"$vm_dir/.templates/t.conf" <<'T'
# a vm-bhyve template
loader="bios"
cpu=1
memory=256M
network0_type="virtio-net"
network0_switch="public"
disk0_type="virtio-blk"
disk0_name="disk0.img"
disk0_size="2G"
T
vm create -t t -c 2 -m 512M alpha
vm create -t t -s 1G beta
conf=$vm_dir/alpha/alpha.conf
grep -q '^cpu="2"$' "$conf" && grep -q '^memory="512M"$' "$conf" || die "cpu/memory not set"
grep -q '^uuid="[0-9a-f-]\{36\}"$' "$conf" || die "no uuid"
grep -q '^network0_mac="58:9c:fc:0[0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]"$' "$conf" || die "no mac"
grep -q disk0_size "$conf" && die "disk0_size kept"
[ "$(stat -c %s "$vm_dir/alpha/disk0.img")" = 2147483648 ] || die "disk0 not 2G"
[ "$(stat -c %s "$vm_dir/beta/disk0.img")" = 1073741824 ] || die "-s not applied"
[ "$(stat -c %b "$vm_dir/beta/disk0.img")" -lt 16 ] || die "disk not sparse"
[ "$(stat -c %a "$vm_dir/beta/disk0.img")" = 600 ] || die "disk readable by others"

# -i: a cloud image (qcow2) written into disk0 and grown to its size;
# -C -k: a cloud-init seed ISO with the key, attached as the next disk.
qemu-img create -q -f qcow2 "$vm_dir/.img/cloud.qcow2" 64M
echo "ssh-ed25519 AAAAtest user@host" >"$scratch/key.pub"
vm create -t t -s 1G -i cloud.qcow2 -C -k "$scratch/key.pub" cloud
[ "$(stat -c %s "$vm_dir/cloud/disk0.img")" = 1073741824 ] || die "-i image not grown"
grep -q '^disk1_name="seed.iso"$' "$vm_dir/cloud/cloud.conf" || die "no seed.iso disk"
grep -q 'ssh-ed25519 AAAAtest' "$vm_dir/cloud/.cloud-init/user-data" || die "no key"
vm destroy -f cloud
# vm img converts a qcow2 image to NAME.img; -i finds it by either name.
qemu-img create -q -f qcow2 "$scratch/conv.qcow2" 64M
vm img "$scratch/conv.qcow2" >/dev/null
[ -f "$vm_dir/.img/conv.img" ] || die "vm img did not make conv.img"
vm create -t t -s 1G -i conv.qcow2 cloud2
vm destroy -f cloud2

# start -n: the khyve command line, from the shipped templates too
# (loader=grub makes its GRUB CD for the run).
vm start -n alpha | grep -q "^.*khyve .*-s 4,virtio-blk,$vm_dir/alpha/disk0.img .* alpha$" ||
	die "start -n: $(vm start -n alpha 2>&1)"
if [ -d /usr/lib/grub/i386-pc ] && command -v xorriso >/dev/null; then
	vm create -t linux-grub -s 1G lg
	vm start -n lg | grep -q -- "-s 2,ahci-cd,$vm_dir/lg/.grub-boot.iso " || die "start -n grub"
	vm destroy -f lg
fi

vm list >"$scratch/list"
head -n 1 "$scratch/list" | grep -q '^NAME  *DATASTORE  *LOADER  *CPU  *MEMORY  *VNC  *AUTO  *STATE$' ||
	die "list header: $(head -n 1 "$scratch/list")"
grep -q '^alpha  *default  *bios  *2  *512M  *-  *No  *Stopped$' "$scratch/list" || die "list row"
vm list --json | grep -q '"name":[[:space:]]*"beta"' || die "list --json"
vm info alpha | grep -q 'virtual-switch: public' || die "info"

vm add -d disk -s 1G alpha
vm add -d network -s lan alpha
grep -q '^disk1_name="disk1.img"$' "$conf" && grep -q '^network1_switch="lan"$' "$conf" ||
	die "add"
vm rename beta gamma
[ -f "$vm_dir/gamma/gamma.conf" ] && [ ! -e "$vm_dir/beta" ] || die "rename"
vm set console=tmux
vm get console | grep -q '^console  *tmux$' || die "get/set"

# Bad input: one line, non-zero, nothing changed.
snapshot_tree
expect_fail vm frobnicate alpha
expect_fail vm create -x alpha             # getopt's own message is off
expect_fail vm stop -z                     # an invalid name (this crashed once)
expect_fail vm create -t t -c 999 delta
expect_fail vm create -t t alpha           # exists
expect_fail vm create -t t -s 10X delta    # malformed size
expect_fail vm create -t t -m lots delta
expect_fail vm create -t nosuch delta
expect_fail vm create -t t 'bad name'
expect_fail vm info nosuch
expect_fail vm destroy -f nosuch
expect_fail vm rename alpha gamma
expect_fail vm add -d floppy alpha
expect_fail vm add -d disk -s huge alpha
expect_fail vm set frob=1
expect_fail vm set console=vga
printf 'loader="bios"\ncpu=1 2\n' >"$vm_dir/.templates/broken.conf"
snapshot_tree
expect_fail vm create -t broken delta      # a config with a bad value
same_tree "bad input"
[ ! -e "$vm_dir/delta" ] || die "delta left behind"

# configure: an edit that does not parse is refused and kept aside.
EDITOR="sed -i s/^cpu=.*/cpu=oops\\ oops/" vm configure alpha 2>"$scratch/err" && die "bad edit saved"
grep -q '^cpu="2"$' "$conf" || die "bad edit reached the config"
[ -f "$conf.edit" ] || die "bad edit not kept"
EDITOR="sed -i s/^cpu=.*/cpu=3/" vm configure alpha
grep -q '^cpu=3$' "$conf" || die "configure"

# Read-only commands work for other users; changes say they need root.
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
	chmod 755 "$scratch"
	chmod 644 "$KHYVE_CONF"
	as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	as_user "$VM" list | grep -q '^alpha ' || die "list as a user"
	as_user "$VM" info alpha >/dev/null || die "info as a user"
	if as_user "$VM" create -t t delta 2>"$scratch/err"; then die "create as a user"; fi
	grep -q 'needs root' "$scratch/err" || die "no 'needs root': $(cat "$scratch/err")"
fi

vm snapshot gamma@before
[ -d "$vm_dir/gamma/.snapshots/before" ] || die "snapshot"
expect_fail vm destroy -f gamma@nosuch
vm destroy -f gamma@before
[ ! -e "$vm_dir/gamma/.snapshots/before" ] || die "destroy name@snapshot"
printf 'y\n' | on_tty "$VM destroy gamma" >/dev/null
[ ! -e "$vm_dir/gamma" ] || die "destroy"
echo "t-guest: ok"
