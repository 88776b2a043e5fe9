# vm datastore, iso, img, snapshot, rollback and clone on directory datastores.
. "$TOP/tests/vm/lib.sh"

mkdir -p "$vm_dir/.config" "$vm_dir/.iso" "$vm_dir/.img"
sysconf=$vm_dir/.config/system.conf

# Every bad command below must fail with one line and leave every file alone.
fails_cleanly() {
	snapshot_tree
	expect_fail "$@"
	same_tree "$@"
}

# --- datastores -------------------------------------------------------------
mkdir "$scratch/ds2" "$scratch/isos"
vm datastore list >"$scratch/list"
[ "$(sed -n 1p "$scratch/list" | awk '{print $1, $2, $3}')" = "NAME TYPE PATH" ] || die "list header"
[ "$(sed -n 2p "$scratch/list" | awk '{print $1, $2, $3, $4}')" = "default directory $vm_dir -" ] ||
	die "default datastore not first: $(cat "$scratch/list")"
vm datastore add ds2 "$scratch/ds2/"
vm datastore iso isos "$scratch/isos"
grep -qx "datastore_list=\"ds2 isos\"" "$sysconf" || die "datastore_list: $(cat "$sysconf")"
grep -qx "path_ds2=\"$scratch/ds2\"" "$sysconf" || die "path_ds2: $(cat "$sysconf")"
grep -qx "path_isos=\"iso:$scratch/isos\"" "$sysconf" || die "path_isos: $(cat "$sysconf")"
vm datastore list >"$scratch/list"
[ "$(sed -n 2p "$scratch/list" | awk '{print $1}')" = default ] || die "default not first"
grep -q "^ds2 *directory *$scratch/ds2 *-$" "$scratch/list" || die "ds2 not listed: $(cat "$scratch/list")"
grep -q "^isos *iso *$scratch/isos *-$" "$scratch/list" || die "isos not listed"

fails_cleanly vm datastore add ds3 "$scratch/missing"
fails_cleanly vm datastore add ds3 relative/path
fails_cleanly vm datastore add ds2 "$scratch/isos"
fails_cleanly vm datastore add bad-name "$scratch/isos"
fails_cleanly vm datastore add default "$scratch/isos"
fails_cleanly vm datastore add same "$vm_dir"
fails_cleanly vm datastore remove default
fails_cleanly vm datastore remove nosuch
fails_cleanly vm datastore frobnicate
if ! command -v zfs >/dev/null 2>&1; then
	fails_cleanly vm datastore add pool zfs:tank/vms
	grep -q zfs "$scratch/err" || die "zfs error does not say why: $(cat "$scratch/err")"
fi

mkdir "$scratch/ds3"
vm datastore add ds3 "$scratch/ds3"
vm datastore remove ds3
[ -d "$scratch/ds3" ] || die "datastore remove deleted the folder"
! grep -q ds3 "$sysconf" || die "ds3 still configured: $(cat "$sysconf")"

# --- iso ----------------------------------------------------------------------
echo "install medium" >"$scratch/install.iso"
echo "other medium" >"$scratch/isos/other.iso"
vm iso "$scratch/install.iso" >/dev/null
cmp -s "$scratch/install.iso" "$vm_dir/.iso/install.iso" || die "iso not copied"
vm iso >"$scratch/list"
grep -q "^default *install.iso$" "$scratch/list" || die "iso list: $(cat "$scratch/list")"
grep -q "^isos *other.iso$" "$scratch/list" || die "iso datastore not listed: $(cat "$scratch/list")"
fails_cleanly vm iso "$scratch/install.iso"
fails_cleanly vm iso "$scratch/missing.iso"
fails_cleanly vm iso -d nosuch "$scratch/install.iso"
fails_cleanly env PATH=/nonexistent "$VM" iso http://127.0.0.1:1/net.iso
grep -q "curl or wget" "$scratch/err" || die "no downloader: $(cat "$scratch/err")"
if command -v curl >/dev/null 2>&1 || command -v wget >/dev/null 2>&1; then
	fails_cleanly vm iso http://127.0.0.1:1/net.iso
fi

# --- img: qcow2 becomes raw NAME.img ----------------------------------------
qemu-img create -q -f qcow2 "$scratch/cloud.qcow2" 4M
vm img "$scratch/cloud.qcow2" >/dev/null
[ -f "$vm_dir/.img/cloud.img" ] || die "cloud.img not made: $(ls -a "$vm_dir/.img")"
qemu-img info "$vm_dir/.img/cloud.img" | grep -q "file format: raw" || die "cloud.img is not raw"
[ "$(stat -c %s "$vm_dir/.img/cloud.img")" -eq 4194304 ] || die "cloud.img has the wrong size"
printf 'raw bytes' >"$scratch/plain.img"
if command -v xz >/dev/null 2>&1; then
	xz -k "$scratch/plain.img"
	vm img "$scratch/plain.img.xz" >/dev/null
	cmp -s "$scratch/plain.img" "$vm_dir/.img/plain.img" || die "xz image not unpacked"
fi
vm img >"$scratch/list"
grep -q "^default *cloud.img$" "$scratch/list" || die "img list: $(cat "$scratch/list")"
echo "not qcow2" >"$scratch/broken.qcow2"
fails_cleanly vm img "$scratch/broken.qcow2"
[ -z "$(ls -A "$vm_dir/.img" | grep '^\.')" ] || die "temporary files left in .img"

# --- a guest ------------------------------------------------------------------
make_guest() { # NAME DIR
	mkdir -p "$2/$1"
	cat >"$2/$1/$1.conf" <<-EOF
	loader="grub"
	cpu=1
	memory=256M
	network0_type="virtio-net"
	network0_switch="public"
	network0_mac="58:9c:fc:00:00:01"
	disk0_type="virtio-blk"
	disk0_name="disk0.img"
	disk1_type="virtio-blk"
	disk1_name="data.img"
	disk1_dev="sparse"
	uuid="0b3a3c8e-1111-2222-3333-444455556666"
	EOF
	truncate -s 4M "$2/$1/disk0.img"
	truncate -s 1M "$2/$1/data.img"
}
poke() { # FILE TEXT: overwrite the first bytes, as a guest would
	printf '%s' "$2" | dd of="$1" conv=notrunc status=none
}
make_guest g "$vm_dir"
g=$vm_dir/g
poke "$g/disk0.img" before
cp "$g/disk0.img" "$scratch/disk0.before"
cp "$g/g.conf" "$scratch/conf.before"

# snapshot, change, rollback: the disk and the config come back.
vm snapshot g@s1
[ -f "$g/.snapshots/s1/disk0.img" ] && [ -f "$g/.snapshots/s1/data.img" ] &&
	[ -f "$g/.snapshots/s1/g.conf" ] || die "snapshot s1 incomplete: $(ls -a "$g/.snapshots/s1")"
poke "$g/disk0.img" AFTER
echo 'cpu=4' >>"$g/g.conf"
cmp -s "$g/disk0.img" "$scratch/disk0.before" && die "poke did not change the disk"
vm rollback g@s1
cmp -s "$g/disk0.img" "$scratch/disk0.before" || die "rollback did not restore disk0.img"
cmp -s "$g/g.conf" "$scratch/conf.before" || die "rollback did not restore g.conf"

# A default name is a timestamp; rolling back past a newer snapshot needs -r.
vm snapshot g
ls "$g/.snapshots" | grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{2}:[0-9]{2}:[0-9]{2}$' ||
	die "no timestamped snapshot: $(ls "$g/.snapshots")"
poke "$g/disk0.img" LATER
fails_cleanly vm rollback g@s1
grep -q -- "-r" "$scratch/err" || die "rollback refusal does not mention -r: $(cat "$scratch/err")"
vm rollback -r g@s1
cmp -s "$g/disk0.img" "$scratch/disk0.before" || die "rollback -r did not restore disk0.img"
[ "$(ls "$g/.snapshots")" = s1 ] || die "rollback -r left newer snapshots: $(ls -a "$g/.snapshots")"

fails_cleanly vm snapshot nosuch
fails_cleanly vm snapshot 'g@bad name'
fails_cleanly vm snapshot g@s1
fails_cleanly vm snapshot g@
fails_cleanly vm rollback g
fails_cleanly vm rollback g@nosuch
fails_cleanly vm rollback nosuch@s1
fails_cleanly vm snapshot -x g
[ -z "$(ls -A "$g" | grep '^\.' | grep -v '^\.snapshots$')" ] || die "temporary files left in $g"

# --- a running guest (its supervisor holds a lock on run.lock) -----------------
if command -v python3 >/dev/null 2>&1; then
	hostname >"$g/run.lock"
	python3 -c '
import fcntl, sys, time
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(30)' "$g/run.lock" "$scratch/locked" &
	holder=$!
	n=0
	while [ ! -e "$scratch/locked" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
	[ -e "$scratch/locked" ] || die "lock holder did not start"
	rm "$scratch/locked"
	fails_cleanly vm snapshot g@live
	fails_cleanly vm rollback g@s1
	fails_cleanly vm clone g g9
	vm snapshot -f g@live
	vm clone g@live g9
	kill "$holder"
	wait "$holder" 2>/dev/null || true
	rm -rf "$g/.snapshots/live" "$vm_dir/g9"
fi

# --- clone ----------------------------------------------------------------------
poke "$g/disk0.img" NOW
touch "$g/run.lock" "$g/run.state" "$g/vm-bhyve.log" "$g/com1.pty"
vm clone g g2
c=$vm_dir/g2
[ -f "$c/g2.conf" ] && [ ! -e "$c/g.conf" ] || die "clone has no g2.conf: $(ls -a "$c")"
# The clone gets its own uuid and MACs.
grep -q '^uuid="[0-9a-f-]\{36\}"$' "$c/g2.conf" || die "clone has no uuid: $(cat "$c/g2.conf")"
! grep -q '0b3a3c8e-1111-2222-3333-444455556666\|58:9c:fc:00:00:01' "$c/g2.conf" ||
	die "clone kept uuid/mac: $(cat "$c/g2.conf")"
grep -q '^network0_mac="58:9c:fc:' "$c/g2.conf" || die "clone has no mac"
grep -q '^disk1_name="data.img"$' "$c/g2.conf" || die "clone lost settings"
cmp -s "$g/disk0.img" "$c/disk0.img" || die "clone disk differs"
for f in run.lock run.state vm-bhyve.log com1.pty .snapshots; do
	[ ! -e "$c/$f" ] || die "clone copied $f"
done
grep -q '^uuid=' "$g/g.conf" || die "clone changed the source"

vm clone g@s1 g3
cmp -s "$vm_dir/g3/disk0.img" "$scratch/disk0.before" || die "clone of g@s1 has the wrong disk"
[ -f "$vm_dir/g3/g3.conf" ] || die "clone of g@s1 has no g3.conf"

# A clone stays in its source's datastore.
make_guest h "$scratch/ds2"
vm clone h h2
[ -f "$scratch/ds2/h2/h2.conf" ] || die "clone left its datastore"

fails_cleanly vm clone g g2
fails_cleanly vm clone g h
fails_cleanly vm clone nosuch g4
fails_cleanly vm clone g@nosuch g4
fails_cleanly vm clone g 'bad/name'
fails_cleanly vm clone g
[ -z "$(ls -A "$vm_dir" | grep '^\.' | grep -Ev '^\.(config|iso|img)$')" ] || die "temporary files in $vm_dir"

# Disks that are not files in the guest's folder cannot be copied.
echo 'disk2_name="/dev/sdz"' >>"$g/g.conf"
echo 'disk2_dev="custom"' >>"$g/g.conf"
fails_cleanly vm snapshot g@s3
fails_cleanly vm clone g g5
echo PASS
