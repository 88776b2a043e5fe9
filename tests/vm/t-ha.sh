# A guest that Pacemaker's resource agent manages (DIR/ha.resource, written
# by share/ocf/vm): a plain vm start is refused with one line naming the
# resource and the override; vm start -H starts it.  Another host's
# run.lock that nobody holds (a fenced node's) is taken over by -H only.
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"

guest grub
echo web-vm >"$vm_dir/grub/ha.resource"
snapshot_tree
expect_fail vm start grub
grep -q "grub is managed by Pacemaker (resource web-vm, .*/ha.resource): use pcs resource enable web-vm, or vm start -H grub" \
	"$scratch/err" || die "refusal: $(cat "$scratch/err")"
same_tree "vm start of a managed guest"
vm start -H grub >/dev/null || die "vm start -H failed"
[ "$(state grub)" = Running ] || die "grub is $(state grub)"
vm poweroff -f grub
until_state grub Stopped
# A fenced node's lock: refused without -H (vm-bhyve's rule), taken over with it.
echo othernode >"$vm_dir/grub/run.lock"
rm "$vm_dir/grub/ha.resource"
expect_fail vm start grub
grep -q 'appears to be running on othernode' "$scratch/err" || die "lock: $(cat "$scratch/err")"
vm start -H grub >"$scratch/out" || die "vm start -H over a stale lock failed"
grep -q 'run.lock names host othernode but nobody holds it: taken over' "$scratch/out" ||
	die "takeover: $(cat "$scratch/out")"
[ "$(state grub)" = Running ] || die "grub is $(state grub)"
vm poweroff -f grub
echo "t-ha: ok"
