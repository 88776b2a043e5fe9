# vm import: Proxmox VE and libvirt guests (tests/vm/import/*) written as
# vm settings, compared byte for byte with tests/vm/import/expected/, the
# qcow2 disks converted by qemu-img and the raw ones referenced; bad files
# and failing imports: one line, non-zero exit, nothing left behind.
. "$TOP/tests/vm/lib.sh"
samples=$TOP/tests/vm/import
vm init
imgs=$scratch/imgs
mkdir "$imgs"
# The images the samples name, as copied from their hosts into one folder.
for f in vm-100-disk-0 vm-101-disk-1 vm-102-disk-1.raw fedora-uefi.img debian-data; do
	truncate -s 1M "$imgs/$f"
done
touch "$imgs/Win11_23H2_English_x64.iso"
# win11's efidisk0 (efitype=4m): an OVMF_VARS_4M-sized firmware volume
# (FvLength 0x84000, "_FVH") on a 4 MiB LVM volume; fedora-uefi's nvram is
# of the 2 MiB OVMF (128 KiB), which khyve's 4 MiB OVMF cannot take.
head -c 540672 /dev/urandom >"$scratch/vars.fd"
printf '\000\100\010\000\000\000\000\000_FVH' | dd of="$scratch/vars.fd" bs=1 seek=32 conv=notrunc status=none
cp "$scratch/vars.fd" "$imgs/vm-101-disk-0"
truncate -s 4M "$imgs/vm-101-disk-0"
head -c 131072 /dev/urandom >"$imgs/fedora-uefi_VARS.fd"
head -c 3M /dev/urandom >"$scratch/content.raw"
qemu-img convert -q -f raw -O qcow2 "$scratch/content.raw" "$imgs/vm-102-disk-0.qcow2"
cp "$imgs/vm-102-disk-0.qcow2" "$imgs/debian12.qcow2"
(cd "$imgs" && sha256sum ./*) >"$scratch/imgs.sum"

# same EXPECTED: stdin (with $scratch as @SCRATCH@) must be the file; with
# IMPORT_REGEN=1 it becomes the file (review the diff before committing).
same() {
	if [ -n "${IMPORT_REGEN:-}" ]; then
		sed "s|$scratch|@SCRATCH@|g" >"$1"
	else
		sed "s|$scratch|@SCRATCH@|g" | diff -u "$1" - >&2
	fi
}
# import SAMPLE NAME [ARGS...]: import it with -d, compare NAME.conf and the report.
import() {
	sample=$1 name=$2
	shift 2
	vm import -d "$imgs" "$samples/$sample" "$@" >"$scratch/report" ||
		die "vm import $sample failed"
	same "$samples/expected/$name.conf" <"$vm_dir/$name/$name.conf" ||
		die "$sample: $name.conf differs"
	same "$samples/expected/$name.out" <"$scratch/report" || die "$sample: report differs"
	vm start -n "$name" >/dev/null || die "$sample: vm start -n $name refuses the settings"
}
import pve-debian.conf debian12
import pve-win11.conf win11
import pve-qcow2.conf ubuntu-dir
import libvirt-debian.xml debian-libvirt
import libvirt-ovmf.xml fedora-uefi
cmp "$scratch/vars.fd" "$vm_dir/win11/uefi-vars.fd" || die "efidisk0 not carried over"
[ "$(stat -c %a "$vm_dir/win11/uefi-vars.fd")" = 600 ] || die "uefi-vars.fd readable by others"
[ -e "$vm_dir/fedora-uefi/uefi-vars.fd" ] && die "a 2 MiB OVMF's nvram was carried over"
# qcow2: converted to raw in the guest's folder (owner only); the source is untouched.
cmp "$scratch/content.raw" "$vm_dir/ubuntu-dir/disk0.img" || die "qcow2 not converted to raw"
[ "$(stat -c %a "$vm_dir/ubuntu-dir/disk0.img")" = 600 ] || die "converted disk readable by others"
(cd "$imgs" && sha256sum -c --quiet "$scratch/imgs.sum") || die "a source image changed"
ls -A "$vm_dir" | grep -q importing && die "a temporary folder was left"

# An efidisk0 in qcow2 (directory storage): through qemu-img into uefi-vars.fd.
mkdir "$scratch/efi"
qemu-img convert -q -f raw -O qcow2 "$scratch/vars.fd" "$scratch/efi/vm-105-disk-1.qcow2"
truncate -s 1M "$scratch/efi/vm-105-disk-0.raw"
printf 'bios: ovmf\nmemory: 512\nefidisk0: local:105/vm-105-disk-1.qcow2,efitype=4m\nvirtio0: local:105/vm-105-disk-0.raw\n' \
	>"$scratch/efi.conf"
vm import -d "$scratch/efi" "$scratch/efi.conf" efi >/dev/null
cmp "$scratch/vars.fd" "$vm_dir/efi/uefi-vars.fd" || die "qcow2 efidisk0 not carried over"
[ -e "$vm_dir/efi/.vars.raw" ] && die "the converted efidisk was left"

# On a terminal, qemu-img's progress bar.
on_tty "$VM import -d $imgs $samples/pve-qcow2.conf tty" </dev/null >"$scratch/tty.out"
grep -q 'virtio0: converting .*vm-102-disk-0.qcow2 (qcow2) to disk0.img' "$scratch/tty.out" &&
	grep -q '100.00/100%' "$scratch/tty.out" || die "no progress on a terminal: $(cat "$scratch/tty.out")"

# A network boot before the disks is reported; after them it changes nothing.
printf 'memory: 256\nboot: order=net0;virtio0\nnet0: virtio=52:54:00:00:00:09,bridge=vmbr0\nvirtio0: /x/vm-102-disk-1.raw\n' \
	>"$scratch/pxe.conf"
vm import -d "$imgs" "$scratch/pxe.conf" pxe >"$scratch/report"
grep -q "^not mapped: boot: net0 first: network boot" "$scratch/report" || die "PXE first: $(cat "$scratch/report")"

# A block device (an LVM volume, a zvol) is referenced where it is.
blk=$(find /dev -maxdepth 1 -type b -readable 2>/dev/null | head -n 1)
if [ -n "$blk" ]; then
	printf 'memory: 256\nvirtio0: %s\n' "$blk" >"$scratch/blk.conf"
	vm import "$scratch/blk.conf" blk >/dev/null
	grep -q "^disk0_name=\"$blk\"\$" "$vm_dir/blk/blk.conf" &&
		grep -q '^disk0_dev="custom"$' "$vm_dir/blk/blk.conf" || die "block device: $(cat "$vm_dir/blk/blk.conf")"
	printf 'memory: 256\nvirtio0: %s,format=qcow2\n' "$blk" >"$scratch/blk.conf"
	expect_fail vm import "$scratch/blk.conf" blk2
fi

# A name of our own; then that name again, and a guest that exists.
vm import -d "$imgs" "$samples/libvirt-debian.xml" other >/dev/null
grep -q '^disk0_name="disk0.img"$' "$vm_dir/other/other.conf" || die "import FILE NAME"
snapshot_tree
expect_fail vm import -d "$imgs" "$samples/libvirt-debian.xml" other
grep -q 'already exists' "$scratch/err" || die "existing guest: $(cat "$scratch/err")"
expect_fail vm import -d "$imgs" "$samples/pve-debian.conf"
same_tree "existing guests"

# Bad files and bad uses: one line each, nothing written.
for f in bad-truncated.xml bad-binary.conf bad-nodomain.xml bad-entity.xml bad-values.conf bad-mac.conf \
	bad-text.conf; do
	expect_fail vm import -d "$imgs" "$samples/$f"
	sed "s|$samples/||" "$scratch/err" >>"$scratch/bad.err"
done
same "$samples/expected/bad.err" <"$scratch/bad.err" || die "bad files: messages differ"
expect_fail vm import "$samples/pve-qcow2.conf" fresh      # no -d: /var/lib/vz/images/102/...
expect_fail vm import -x "$samples/pve-debian.conf"        # unknown option
expect_fail vm import -d "$imgs/vm-100-disk-0" "$samples/pve-debian.conf" fresh
expect_fail vm import -d "$imgs" "$samples/pve-debian.conf" 'bad name'
expect_fail vm import -d "$imgs" "$scratch/missing.conf"
expect_fail vm import -d "$imgs" /dev/null
# qemu-img fails halfway: disk0 is converted, disk1 is not qcow2: the
# half-made folder goes.
mkdir "$scratch/corrupt"
cp "$imgs/vm-102-disk-0.qcow2" "$scratch/corrupt/"
head -c 1M /dev/zero >"$scratch/corrupt/vm-102-disk-1.qcow2"
printf 'memory: 256\nvirtio0: local:102/vm-102-disk-0.qcow2\nvirtio1: local:102/vm-102-disk-1.qcow2\n' \
	>"$scratch/two.conf"
snapshot_tree
expect_fail vm import -d "$scratch/corrupt" "$scratch/two.conf" fresh
grep -q 'virtio1: qemu-img convert' "$scratch/err" || die "corrupt qcow2: $(cat "$scratch/err")"
same_tree "failed conversion"
[ -e "$vm_dir/fresh" ] && die "failed import left its guest"
ls -A "$vm_dir" | grep -q importing && die "failed import left its temporary folder"
echo "t-import: ok"
