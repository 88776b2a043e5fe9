# Host paths a guest's config can reach (issue 12): diskN_name,
# linux_kernel, linux_initrd, uefi-vars.fd and the install medium stay in
# the guest's folder (or the ISO store) unless the config says "custom";
# `..`, absolute paths and symbolic links that leave are refused in one
# line naming the key and the path (status 1), and khyve never runs.
# Files vm creates (vm-bhyve.log, run.lock, NAME.conf.edit, .snapshots/)
# are never followed through a link planted there.
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"

secret=$scratch/secret
victim=$scratch/victim
echo "host data" >"$secret"
g=$vm_dir/p
mkdir -p "$g"
: >"$g/disk0.img"
: >"$g/vmlinuz"
: >"$g/initrd.img"

# conf KEY=VALUE...: p.conf is a BIOS guest with these settings.
conf() {
	{ printf 'loader="bios"\ncpu="1"\nmemory="256M"\n'; for kv; do echo "${kv%%=*}=\"${kv#*=}\""; done; } \
		>"$g/p.conf"
}
# refused WHAT MESSAGE CMD...: CMD fails with one line holding MESSAGE, khyve never ran.
refused() {
	what=$1 msg=$2
	shift 2
	before=$(runs p)
	expect_fail "$@"
	grep -qF -- "$msg" "$scratch/err" || die "$what: $(cat "$scratch/err")"
	[ "$(runs p)" = "$before" ] || die "$what: khyve ran"
}
# started_with WHAT TEXT: `vm start -n p` succeeds and its command holds TEXT.
started_with() {
	vm start -n p >"$scratch/out" 2>"$scratch/err" || die "$1: $(cat "$scratch/err")"
	grep -qF -- "$2" "$scratch/out" || die "$1: $(cat "$scratch/out")"
}

# --- diskN_name --------------------------------------------------------------
conf disk0_type=virtio-blk disk0_name=../secret
refused "disk .." "p.conf: disk0_name=\"../secret\": '..' is not allowed (set disk0_dev=\"custom\"" vm start -n p
refused "disk .. (start)" "'..' is not allowed" vm start p
conf disk0_type=virtio-blk disk0_name=disk0.img disk1_type=nvme disk1_name=a/../../secret
refused "disk1 .." "disk1_name=\"a/../../secret\": '..' is not allowed" vm start -n p
conf disk0_type=virtio-blk disk0_name="$secret"
refused "disk absolute" "disk0_name=\"$secret\": it is outside $g" vm start -n p
conf disk0_type=virtio-blk disk0_name="$secret" disk0_dev=file
refused "disk absolute, dev=file" "it is outside" vm start -n p
ln -s "$secret" "$g/out.img"
conf disk0_type=virtio-blk disk0_name=out.img
refused "disk link out" "disk0_name=\"out.img\": it leads outside $g through a symbolic link" vm start -n p
refused "disk link out (start)" "through a symbolic link" vm start p
ln -s "$scratch/nothing/there" "$g/dangling.img"
conf disk0_type=virtio-blk disk0_name=dangling.img
refused "dangling link out" "through a symbolic link" vm start -n p
[ ! -e "$scratch/nothing" ] || die "something was made at the dangling link's target"
ln -s .. "$g/up"
conf disk0_type=virtio-blk disk0_name=up/secret
refused "folder link out" "through a symbolic link" vm start -n p
# Links that stay inside the folder are fine, and so is an absolute path into it.
ln -s disk0.img "$g/alias.img"
mkdir "$g/sub"
ln -s ../disk0.img "$g/sub/deep.img"
conf disk0_type=virtio-blk disk0_name=alias.img disk1_type=nvme disk1_name=sub/deep.img \
	disk2_type=ahci-hd disk2_name="$g/disk0.img"
started_with "links inside" "-s 4,virtio-blk,$g/alias.img -s 5,nvme,$g/sub/deep.img -s 6,ahci-hd,$g/disk0.img"
# diskN_dev="custom": the host path as given.
conf disk0_type=virtio-blk disk0_name="$secret" disk0_dev=custom
started_with "custom" "-s 4,virtio-blk,$secret "
conf disk0_type=virtio-blk disk0_name=../secret disk0_dev=nonsense
refused "bad dev" "disk0_dev=\"nonsense\"" vm start -n p

# --- bhyve_options: -s, -l, -o, -k can name any file ---------------------------
conf disk0_type=virtio-blk disk0_name=disk0.img bhyve_options="-x -s 9,virtio-blk,$secret"
refused "bhyve_options -s" "bhyve_options=\"-x -s 9,virtio-blk,$secret\": -s can name a host file (set bhyve_options_dev=\"custom\"" vm start -n p
conf disk0_type=virtio-blk disk0_name=disk0.img bhyve_options="-o lpc.bootrom=$secret"
refused "bhyve_options -o" "-o can name a host file" vm start -n p
conf disk0_type=virtio-blk disk0_name=disk0.img bhyve_options="-x -e"
started_with "bhyve_options flags" " -x -e p"
conf disk0_type=virtio-blk disk0_name=disk0.img bhyve_options="-s 9,virtio-blk,$secret" bhyve_options_dev=custom
started_with "bhyve_options custom" " -s 9,virtio-blk,$secret p"

# --- linux_kernel, linux_initrd -----------------------------------------------
lin() { conf "$@"; sed -i 's/^loader="bios"$/loader="linux"/' "$g/p.conf"; }
for key in linux_kernel linux_initrd; do
	other=linux_initrd val=initrd.img
	[ $key = linux_initrd ] && other=linux_kernel val=vmlinuz
	lin $other=$val $key=../secret
	refused "$key .." "$key=\"../secret\": '..' is not allowed (set ${key}_dev=\"custom\"" vm start -n p
	lin $other=$val $key="$secret"
	refused "$key absolute" "$key=\"$secret\": it is outside $g" vm start -n p
	lin $other=$val $key=out.img
	refused "$key link out" "$key=\"out.img\": it leads outside $g through a symbolic link" vm start -n p
	lin $other=$val $key=alias.img
	started_with "$key link inside" "=$g/alias.img"
	lin $other=$val $key="$secret" ${key}_dev=custom
	started_with "$key custom" "=$secret"
done
lin linux_kernel="$g/vmlinuz" linux_initrd=initrd.img
started_with "kernel absolute inside" "-o linux.kernel=$g/vmlinuz -o linux.initrd=$g/initrd.img"

# --- uefi-vars.fd --------------------------------------------------------------
: >"$scratch/OVMF_CODE_4M.fd"
echo "vars template" >"$scratch/OVMF_VARS_4M.fd"
echo "uefi_firmware=\"$scratch/OVMF_CODE_4M.fd\"" >>"$KHYVE_CONF"
uefi() { conf "$@" uefi_vars=yes; sed -i 's/^loader="bios"$/loader="uefi"/' "$g/p.conf"; }
ln -s "$secret" "$g/uefi-vars.fd"
uefi
refused "vars link out" "uefi_vars=\"yes\": $g/uefi-vars.fd: it leads outside $g through a symbolic link" \
	env KHYVE_HOST_KVM=hardware "$VM" start p
rm "$g/uefi-vars.fd"
ln -s "$victim" "$g/uefi-vars.fd"
refused "vars dangling link" "through a symbolic link" env KHYVE_HOST_KVM=hardware "$VM" start p
[ ! -e "$victim" ] || die "the vars template was copied through a dangling link"
rm "$g/uefi-vars.fd"
# uefi-custom's firmware stays in the datastore's .config too.
ln -s "$secret" "$vm_dir/.config/BHYVE_UEFI.fd"
conf
sed -i 's/^loader="bios"$/loader="uefi-custom"/' "$g/p.conf"
refused "uefi-custom link out" "loader uefi-custom: $vm_dir/.config/BHYVE_UEFI.fd: it leads outside" \
	vm start -n p
rm "$vm_dir/.config/BHYVE_UEFI.fd"

# --- vm configure checks an edit the same way --------------------------------------
conf disk0_type=virtio-blk disk0_name=disk0.img
cp "$g/p.conf" "$scratch/p.conf.before"
printf '#!/bin/sh\nsed -i "s|disk0.img|../secret|" "$1"\n' >"$scratch/editor"
chmod +x "$scratch/editor"
EDITOR=$scratch/editor expect_fail vm configure p
grep -qF "disk0_name=\"../secret\": '..' is not allowed" "$scratch/err" || die "configure: $(cat "$scratch/err")"
cmp -s "$g/p.conf" "$scratch/p.conf.before" || die "configure installed a bad edit"
rm -f "$g/p.conf.edit"

# --- the install medium ---------------------------------------------------------
conf disk0_type=virtio-blk disk0_name=disk0.img
mkdir -p "$vm_dir/.iso/sub" "$scratch/cwd"
echo iso >"$vm_dir/.iso/good.iso"
ln -s good.iso "$vm_dir/.iso/alias.iso"
ln -s "$secret" "$vm_dir/.iso/evil.iso"
echo iso >"$vm_dir/up.iso"
cd "$scratch/cwd"
refused "iso link out" "iso evil.iso in $vm_dir/.iso: it leads outside" vm install -n p evil.iso
refused "iso .." "iso sub/../../up.iso in $vm_dir/.iso: '..' is not allowed" vm install -n p sub/../../up.iso
vm install -n p alias.iso | grep -qF "ahci-cd,$vm_dir/.iso/alias.iso" || die "iso link inside"
# A path the user types is the user's: taken as given.
vm install -n p "$secret" | grep -qF ",$secret," || die "typed absolute iso"
cd "$TOP"
# vm create -i NAME: an image found in .img stays in there too.
mkdir -p "$vm_dir/.templates" "$vm_dir/.img"
printf 'loader="bios"\ndisk0_type="virtio-blk"\ndisk0_name="disk0.img"\n' >"$vm_dir/.templates/t.conf"
ln -s "$secret" "$vm_dir/.img/evil.img"
expect_fail vm create -t t -s 1M -i evil.img imgout
grep -qF "img evil.img in $vm_dir/.img: it leads outside" "$scratch/err" || die "create -i: $(cat "$scratch/err")"
[ ! -e "$vm_dir/imgout" ] || die "create -i made the guest"

# --- files vm creates -------------------------------------------------------------
conf disk0_type=virtio-blk disk0_name=disk0.img
for f in vm-bhyve.log run.lock; do
	ln -s "$victim" "$g/$f"
	refused "$f link" "$g/$f: a symbolic link is there" vm start p
	[ ! -e "$victim" ] || die "$f: the link was followed"
	rm "$g/$f"
done
echo "not vm's" >"$victim"
rm -f "$g/vm-bhyve.log"
ln "$victim" "$g/vm-bhyve.log" # a hard link: another file's data
refused "log hard link" "$g/vm-bhyve.log: something other than vm's own plain file" vm start p
rm "$g/vm-bhyve.log"
mkfifo "$g/vm-bhyve.log"
refused "log fifo" "something other than vm's own plain file" vm start p
rm "$g/vm-bhyve.log"
[ "$(cat "$victim")" = "not vm's" ] || die "victim changed"
rm "$victim"
ln -s "$victim" "$g/p.conf.edit"
EDITOR=true expect_fail vm configure p
grep -qF "p.conf.edit: a symbolic link is there" "$scratch/err" || die "configure: $(cat "$scratch/err")"
[ ! -e "$victim" ] || die "configure followed the link"
rm "$g/p.conf.edit"
mkdir "$scratch/elsewhere"
ln -s "$scratch/elsewhere" "$g/.snapshots"
expect_fail vm snapshot p@s1
grep -qF ".snapshots: not a folder of its own" "$scratch/err" || die "snapshot: $(cat "$scratch/err")"
[ -z "$(ls -A "$scratch/elsewhere")" ] || die "snapshot copied through the link"
rm "$g/.snapshots"
# A disk that links out is refused by snapshot and clone too (cp would read the host file).
conf disk0_type=virtio-blk disk0_name=out.img
expect_fail vm snapshot p@s2
grep -qF "disk0_name=\"out.img\": it leads outside" "$scratch/err" || die "snapshot disk: $(cat "$scratch/err")"

# FIFOs planted where vm reads (run.lock, the config) must not hang vm list.
conf disk0_type=virtio-blk disk0_name=disk0.img
mkfifo "$g/run.lock"
timeout 10 "$VM" list >"$scratch/out" 2>&1 || [ $? -ne 124 ] || die "vm list hangs on a FIFO run.lock"
grep -q "^p .*Stopped" "$scratch/out" || die "list with a FIFO run.lock: $(cat "$scratch/out")"
refused "lock fifo" "$g/run.lock: something other than vm's own plain file" vm start p
rm "$g/run.lock"
mkdir "$vm_dir/q"
mkfifo "$vm_dir/q/q.conf"
timeout 10 "$VM" list >"$scratch/out" 2>&1 || [ $? -ne 124 ] || die "vm list hangs on a FIFO config"
rm -r "$vm_dir/q"

# And a clean guest still starts and stops.
conf disk0_type=virtio-blk disk0_name=disk0.img
script sleep
vm start p >/dev/null
until_state p Running
vm poweroff -f p >/dev/null
until_state p Stopped
[ ! -L "$g/vm-bhyve.log" ] && [ -f "$g/vm-bhyve.log" ] || die "no log of its own"
echo "t-paths: ok"
