# vm migrate through tests/vm/fake-ssh (the "remote" vm runs here with the
# target's KHYVE_CONF) on the fake khyve: the checks made on the target
# before anything starts or is copied there (an unreachable host, disks the
# target does not see, another vm_dir, a switch it lacks, a guest name it
# has), and cold migration: the folder is copied sparse into the target's
# vm_dir and removed here (-k keeps it), a shared folder is not copied,
# and a running guest is refused.  A live migration with the real khyve is
# t-migrate-kvm.sh.
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"
export KHYVE_SSH="$TOP/tests/vm/fake-ssh" FAKE_SSH_LOG="$scratch/ssh.log"
vm init
# The target: another vm_dir, initialised, with its own settings.
target=$scratch/vms2
export FAKE_SSH_CONF="$scratch/target.conf"
echo "vm_dir=\"$target\"" >"$FAKE_SSH_CONF"
KHYVE_CONF=$FAKE_SSH_CONF vm init
guest a
truncate -s 64M "$vm_dir/a/disk0.img"
echo data | dd of="$vm_dir/a/disk0.img" bs=1M seek=32 conv=notrunc 2>/dev/null
printf 'disk0_type="virtio-blk"\ndisk0_name="disk0.img"\n' >>"$vm_dir/a/a.conf"
tokens() { ls -a "$vm_dir/a" | grep -c '^\.khyve-migrate-' || true; }

# Bad input, refused before ssh runs.
expect_fail vm migrate a
expect_fail vm migrate -z a h
grep -q 'unknown option -z' "$scratch/err" || die "-z: $(cat "$scratch/err")"
expect_fail vm migrate a -oProxyCommand=x
grep -q 'not a host name' "$scratch/err" || die "option as host: $(cat "$scratch/err")"
expect_fail vm migrate -l -k a h
[ ! -s "$FAKE_SSH_LOG" ] || die "ssh ran for bad input: $(cat "$FAKE_SSH_LOG")"

# An unreachable host: ssh's line, nothing changed.
expect_fail vm migrate a down1
grep -q 'BatchMode=yes' "$FAKE_SSH_LOG" || die "ssh ran without BatchMode: $(cat "$FAKE_SSH_LOG")"
snapshot_tree
expect_fail env FAKE_SSH_LOG=/dev/null "$VM" migrate a down1
grep -q 'cannot migrate to down1: ssh: connect to host down1 port 22: No route to host' "$scratch/err" ||
	die "unreachable: $(cat "$scratch/err")"
same_tree "unreachable host"

# Live: the target's vm_dir does not hold this folder.
vm start a >/dev/null
if unshare -m true 2>/dev/null; then
	expect_fail env FAKE_SSH_HIDE="$vm_dir/a" "$VM" migrate -l a h
	grep -q 'cannot migrate to h: disks are not on storage both hosts see' "$scratch/err" ||
		die "not shared: $(cat "$scratch/err")"
	[ "$(tokens)" = 0 ] || die "token left behind"
else
	echo "t-migrate: no unshare -m here: the unshared-disks case is skipped"
fi
# ... the same folder, but another vm_dir (a link to ours).
ln -s "$vm_dir" "$scratch/vmlink"
echo "vm_dir=\"$scratch/vmlink\"" >"$scratch/link.conf"
expect_fail env FAKE_SSH_CONF="$scratch/link.conf" "$VM" migrate -l a h
grep -q "vm_dir is $scratch/vmlink here, not $vm_dir" "$scratch/err" || die "vm_dir: $(cat "$scratch/err")"
# A receiver that refuses at once (another device set, say): its line, and
# the guest runs on here.
printf '#!/bin/sh\necho "khyve: the source has another device set" >&2\nexit 4\n' >"$scratch/refuse"
chmod +x "$scratch/refuse"
cp "$KHYVE_CONF" "$scratch/same.conf"
sv=$(field a supervisor)
expect_fail env FAKE_SSH_CONF="$scratch/same.conf" FAKE_SSH_KHYVE="$scratch/refuse" "$VM" migrate -l a h
grep -q 'cannot migrate to h: a: khyve: the source has another device set' "$scratch/err" ||
	die "refusing receiver: $(cat "$scratch/err")"
[ "$(field a supervisor)" = "$sv" ] || die "the supervisor changed after a refused migration"
[ ! -e "$vm_dir/a/run.migrating" ] || die "run.migrating left behind"
# Cold migration of a running guest.
expect_fail vm migrate a h
grep -q 'a is running: stop it first' "$scratch/err" || die "cold, running: $(cat "$scratch/err")"
[ "$(state a)" = Running ] || die "a is $(state a) after the refusals"
[ "$(runs a)" = 1 ] || die "khyve ran $(runs a) times"
vm stop a >/dev/null
until_state a Stopped
expect_fail vm migrate -l a h
grep -q 'a is not running' "$scratch/err" || die "live, stopped: $(cat "$scratch/err")"

# A switch the target lacks.
cp "$vm_dir/.config/system.conf" "$scratch/system.conf"
printf 'switch_list="public"\ntype_public="standard"\n' >>"$vm_dir/.config/system.conf"
echo 'network0_switch="public"' >>"$vm_dir/a/a.conf"
expect_fail vm migrate a h
grep -q 'switch public (of a.s networks) does not exist on' "$scratch/err" || die "switch: $(cat "$scratch/err")"
[ ! -e "$target/a" ] || die "copied despite the missing switch"
printf 'switch_list="public"\ntype_public="standard"\n' >>"$target/.config/system.conf"

# Cold copy: sparse there, removed here.  On one host the target sees every
# folder: fake-ssh hides ours from it.
if ! unshare -m true 2>/dev/null; then
	echo "t-migrate: ok (no unshare -m here: the copies are skipped)"
	exit 0
fi
FAKE_SSH_HIDE="$vm_dir/a" vm migrate a h >"$scratch/out" || die "cold: $(cat "$scratch/err" "$scratch/out")"
grep -q 'a is on h now; removed it here' "$scratch/out" || die "cold said: $(cat "$scratch/out")"
[ ! -e "$vm_dir/a" ] || die "the source folder is still there"
cmp -s "$target/a/disk0.img" /dev/null && die "empty disk"
[ "$(stat -c %s "$target/a/disk0.img")" = 67108864 ] || die "disk size $(stat -c %s "$target/a/disk0.img")"
[ "$(du -k "$target/a/disk0.img" | cut -f1)" -lt 8192 ] || die "not sparse: $(du -k "$target/a/disk0.img")"
dd if="$target/a/disk0.img" bs=1M skip=32 count=1 2>/dev/null | head -c 4 | grep -q data || die "data lost"
grep -q 'network0_switch="public"' "$target/a/a.conf" || die "config not copied"
ls -a "$target" | grep -q '^\.a\.incoming' && die "incoming folder left"
KHYVE_CONF=$FAKE_SSH_CONF vm list | grep -q '^a ' || die "target list: $(KHYVE_CONF=$FAKE_SSH_CONF vm list)"

# Back with -k: both keep a copy; again: the target has it, never replaced.
here=$KHYVE_CONF there=$FAKE_SSH_CONF
env KHYVE_CONF="$there" FAKE_SSH_CONF="$here" FAKE_SSH_HIDE="$target/a" "$VM" migrate -k a h >/dev/null ||
	die "back failed"
[ -f "$target/a/a.conf" ] && [ -f "$vm_dir/a/a.conf" ] || die "-k did not keep the copy"
echo 'changed="yes"' >>"$vm_dir/a/a.conf"
expect_fail env FAKE_SSH_HIDE="$vm_dir/a" "$VM" migrate a h
grep -q 'a guest named a exists here already' "$scratch/err" || die "exists: $(cat "$scratch/err")"
grep -q changed "$target/a/a.conf" && die "replaced the target's guest"
[ -f "$vm_dir/a/a.conf" ] || die "the source went after a refusal"

# Shared storage: the target sees this folder; nothing is copied or removed.
FAKE_SSH_CONF="$scratch/same.conf" vm migrate a h >"$scratch/out" || die "shared: $(cat "$scratch/out")"
grep -q 'h sees the same folder (shared storage): nothing to copy' "$scratch/out" || die "shared said: $(cat "$scratch/out")"
[ -f "$vm_dir/a/a.conf" ] || die "shared: removed"
[ "$(tokens)" = 0 ] || die "token left behind"
echo "t-migrate: ok"
