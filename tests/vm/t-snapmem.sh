# vm snapshot -m (the memory state beside the disk snapshot) and vm rollback
# of such a snapshot, on the fake khyve and khyvectl (fake-khyve,
# fake-khyvectl: --pause/--resume keep a paused mark, --checkpoint writes
# the state file, -r FILE resumes from it).
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"
guest a disk0_type=virtio-blk disk0_name=disk0.img
g=$vm_dir/a
echo one >"$g/disk0.img"
paused=$FAKE_KHYVE_LOG.paused.a
ctl() { grep ' khyvectl ' "$FAKE_KHYVE_LOG" | cut -d' ' -f3- | sed "s|$g/||"; }
no_temps() {
	[ -z "$(ls -A "$g/.snapshots" 2>/dev/null | grep '^\.')" ] || die "temporary folder left: $(ls -A "$g/.snapshots")"
}

# A stopped guest has no memory to keep.
expect_fail vm snapshot -m a@s0
grep -q 'a is not running' "$scratch/err" || die "-m of a stopped guest: $(cat "$scratch/err")"
[ ! -e "$g/.snapshots/s0" ] || die "a refused -m made s0"

# Running: pause, checkpoint into the snapshot's folder, copy, resume.
vm start a >/dev/null
vm snapshot -m a@s1 || die "snapshot -m failed"
ctl | sed 's|\.s1\.[A-Za-z0-9]*/|TMP/|' >"$scratch/ctl"
printf 'pause\ncheckpoint .snapshots/TMP/a.state\nresume\n' | diff - "$scratch/ctl" >&2 ||
	die "khyvectl calls: $(cat "$scratch/ctl")"
for f in a.conf disk0.img a.state; do [ -f "$g/.snapshots/s1/$f" ] || die "no $f in s1"; done
grep -q '^memory="a.state"$' "$g/.snapshots/s1/.snapshot" || die ".snapshot: $(cat "$g/.snapshots/s1/.snapshot")"
[ ! -e "$paused" ] && [ "$(state a)" = Running ] || die "a is $(state a), paused mark: $(ls "$paused" 2>&1)"
[ ! -e "$g/a.state" ] || die "snapshot -m left a.state in the guest's folder"
no_temps

# A checkpoint that fails: one line, the guest resumed, no snapshot.
: >"$FAKE_KHYVE_LOG"
echo '--checkpoint the guest cannot be saved: device foo' >"$FAKE_KHYVECTL_FAIL"
expect_fail vm snapshot -m a@s2
grep -q 'cannot be saved: device foo' "$scratch/err" || die "failed checkpoint said: $(cat "$scratch/err")"
[ "$(ctl | tail -n 1)" = resume ] || die "not resumed after the failure: $(ctl)"
[ ! -e "$paused" ] || die "a stays paused after a failed checkpoint"
[ ! -e "$g/.snapshots/s2" ] || die "a failed checkpoint left s2"
no_temps
# A pause that fails: nothing else is tried.
: >"$FAKE_KHYVE_LOG"
echo '--pause the vCPUs did not stop within 1 s' >"$FAKE_KHYVECTL_FAIL"
expect_fail vm snapshot -m a@s2
[ "$(ctl)" = pause ] || die "after a failed pause: $(ctl)"
[ ! -e "$g/.snapshots/s2" ] || die "a failed pause left s2"

# A guest someone paused stays paused.
: >"$paused"
: >"$FAKE_KHYVE_LOG"
vm snapshot -m a@s2 || die "snapshot -m of a paused guest failed"
ctl | grep -q resume && die "a paused guest was resumed: $(ctl)"
[ -e "$paused" ] || die "the paused mark went"
rm -f "$paused"
vm destroy a@s2 >/dev/null

# Rollback: the disks come back and a is Suspended in s1's state; start resumes.
echo two >"$g/disk0.img"
vm poweroff -f a >/dev/null
until_state a Stopped
vm rollback a@s1 >"$scratch/out" || die "rollback failed"
grep -q 'a is Suspended in the state of a@s1' "$scratch/out" || die "rollback said: $(cat "$scratch/out")"
[ "$(cat "$g/disk0.img")" = one ] || die "disk0.img not rolled back"
cmp -s "$g/a.state" "$g/.snapshots/s1/a.state" || die "no a.state from s1"
[ "$(state a)" = Suspended ] || die "a is $(state a) after the rollback"
[ -z "$(ls -A "$g" | grep '^\.a\.')" ] || die "temporary files left in $g: $(ls -A "$g")"
vm start a >/dev/null || die "resume after the rollback failed"
grep -q " start .* -r $g/a.state a\$" "$FAKE_KHYVE_LOG" || die "start did not resume: $(tail -n 2 "$FAKE_KHYVE_LOG")"
grep -q " resumed $g/a.state" "$FAKE_KHYVE_LOG" || die "the fake did not resume"
[ -f "$g/.snapshots/s1/a.state" ] || die "the snapshot lost its state"

# A Suspended guest's saved state is taken as it is, with no khyvectl call.
vm suspend a >/dev/null
: >"$FAKE_KHYVE_LOG"
vm snapshot -m a@s3 || die "snapshot -m of a Suspended guest failed"
[ -z "$(ctl)" ] || die "khyvectl ran for a Suspended guest: $(ctl)"
cmp -s "$g/a.state" "$g/.snapshots/s3/a.state" || die "s3 lacks a's saved state"
# A clone of a memory snapshot boots: it takes no state.
vm clone a@s3 b || die "clone failed"
[ -f "$vm_dir/b/b.conf" ] && [ ! -e "$vm_dir/b/a.state" ] && [ ! -e "$vm_dir/b/b.state" ] ||
	die "clone b: $(ls "$vm_dir/b")"
vm start -d a >/dev/null
vm poweroff -f a >/dev/null
echo "t-snapmem: ok"
