# vm suspend and resume with the real khyve and khyvectl on this host's KVM:
# the ticker guest (tests/guests/ticker.S, as loader="bios" firmware through
# bios_firmware) counts on com1; after vm suspend and vm start the count
# goes on from where it stopped, never from 0.  Then vm snapshot -m: the
# guest counts on after it (a guest paused before stays paused), and after
# a rollback to it vm start resumes from the snapshot's count, not from the
# count at the rollback.  Skipped without /dev/kvm or
# when khyve, khyvectl or the ticker are not built beside $VM (ticker.sh).
. "$TOP/tests/vm/lib.sh"
TEST=t-suspend-kvm
. "$TOP/tests/vm/ticker.sh"
vm start t >/dev/null || die "start: $(tail -n 3 "$vm_dir/t/vm-bhyve.log")"
sleep 1
before=$(tick last)
[ "$before" -ge 0 ] || die "no ticks on com1"
vm suspend t >/dev/null || die "suspend failed"
vm list | grep -q '^t .*Suspended$' || die "list: $(vm list)"
grep -q 'khyve exited with status 5' "$vm_dir/t/vm-bhyve.log" || die "no exit 5 in the log"
vm start t >/dev/null || die "resume: $(tail -n 3 "$vm_dir/t/vm-bhyve.log")"
[ ! -e "$vm_dir/t/t.state" ] || die "t.state still there after the resume"
after=$(tick first)
# Where it stopped (a few ticks on, from the suspend's own moment), not from 0.
[ "$after" -gt "$before" ] && [ "$after" -le $((before + 20)) ] ||
	die "first tick after the resume: $after, last before: $before"

khyvectl() { "$KHYVECTL" --socket="$vm_dir/t/khyve.sock" "$@" >/dev/null; }
sleep 0.3
snap=$(tick last)
vm snapshot -m t@m1 >/dev/null || die "snapshot -m failed"
[ -f "$vm_dir/t/.snapshots/m1/t.state" ] || die "no t.state in the snapshot"
khyvectl --pause || die "khyvectl --pause failed"
vm snapshot -m t@m2 >/dev/null || die "snapshot -m of a paused guest failed"
vm list | grep -q '^t .*Paused' || die "a paused guest did not stay paused: $(vm list)"
khyvectl --resume || die "khyvectl --resume failed"
sleep 2
later=$(tick last)
# It counted on after the snapshot (2 s at 10 ticks a second, less the pause).
[ "$later" -ge $((snap + 15)) ] || die "ticks after snapshot -m: $later, $snap at it"
vm poweroff -f t >/dev/null
i=0
while vm list | grep -q '^t .*Running'; do
	i=$((i + 1))
	[ $i -lt 100 ] || die "t still runs after poweroff"
	sleep 0.1
done
vm rollback -r t@m1 >/dev/null || die "rollback failed"
vm list | grep -q '^t .*Suspended$' || die "not Suspended after the rollback: $(vm list)"
vm start t >/dev/null || die "resume from m1: $(tail -n 3 "$vm_dir/t/vm-bhyve.log")"
back=$(tick first)
[ "$back" -gt "$snap" ] && [ "$back" -le $((snap + 15)) ] && [ "$back" -lt "$later" ] ||
	die "first tick after the rollback: $back; at the snapshot: $snap; before the rollback: $later"
echo "t-suspend-kvm: ok (tick $before, then $after after the resume; snapshot at $snap," \
	"$later at the rollback, $back after it)"
