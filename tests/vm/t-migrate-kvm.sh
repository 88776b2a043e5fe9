# vm migrate -l with the real khyve and khyvectl on this host's KVM, through
# tests/vm/fake-ssh (the "target" is this host, with its own KHYVE_CONF
# naming the same vm_dir: shared storage).  The ticker guest
# (tests/guests/ticker.S) counts on com1: after the move it counts on
# from where it was under the target's supervisor, the source's
# supervisor stopped without a reboot.  A receiver that dies mid-stream
# (tests/snapshot/fake-target) leaves the guest running here, counting.
# Skipped without /dev/kvm or when khyve, khyvectl or the ticker are not
# built beside $VM.
. "$TOP/tests/vm/lib.sh"
TEST=t-migrate-kvm
. "$TOP/tests/vm/ticker.sh"
export KHYVE_SSH="$TOP/tests/vm/fake-ssh" FAKE_SSH_LOG="$scratch/ssh.log"
export FAKE_SSH_CONF="$scratch/target.conf"
cp "$KHYVE_CONF" "$FAKE_SSH_CONF"
supervisor() { sed -n 's/^supervisor="\([0-9]*\)"$/\1/p' "$vm_dir/t/run.state"; }
vm start t >/dev/null || die "start: $(tail -n 3 "$vm_dir/t/vm-bhyve.log")"
sleep 1
before=$(tick last)
[ "$before" -ge 0 ] || die "no ticks on com1"
src=$(supervisor)

# A receiver killed mid-stream: the guest goes on here.
cat >"$scratch/dying-khyve" <<EOS
#!/bin/sh
for a; do case \$a in unix:*) exec python3 "$TOP/tests/snapshot/fake-target" kill "\${a#unix:}" ;; esac; done
exit 4
EOS
chmod +x "$scratch/dying-khyve"
expect_fail env FAKE_SSH_KHYVE="$scratch/dying-khyve" "$VM" migrate -l t localhost
grep -q 'migration to localhost failed: .*t keeps running here' "$scratch/err" || die "dying receiver: $(cat "$scratch/err")"
[ "$(supervisor)" = "$src" ] || die "the supervisor changed after a failed migration"
[ ! -e "$vm_dir/t/run.migrating" ] || die "run.migrating left behind"
mid=$(tick last)
[ "$mid" -gt "$before" ] || die "the guest stopped counting after the failed migration ($before, then $mid)"

# The real move.
vm migrate -l t localhost >"$scratch/out" 2>&1 || die "migrate -l: $(cat "$scratch/out"; tail -n 5 "$vm_dir/t/vm-bhyve.log")"
grep -q 't runs on localhost now' "$scratch/out" || die "migrate said: $(cat "$scratch/out")"
# The stream went through a forwarded unix socket: no TCP port.
grep -q -- "-L /tmp/khyve-migrate\.[^/]*/stream\.sock:$vm_dir/t/t\.mig " "$FAKE_SSH_LOG" ||
	die "no stream-local forward: $(cat "$FAKE_SSH_LOG")"
dst=$(supervisor)
[ -n "$dst" ] && [ "$dst" != "$src" ] || die "run.state names supervisor '$dst' (the source's was $src)"
# (gone, or a zombie where no init reaps the detached supervisor)
ps -o stat= -p "$src" | grep -qv Z && die "the source's supervisor $src still runs"
grep -q 'migrated away; stopped here' "$vm_dir/t/vm-bhyve.log" || die "no 'migrated away' in the log"
grep -q 'took over run.lock' "$vm_dir/t/vm-bhyve.log" || die "no 'took over' in the log"
vm list | grep -q "^t .*Running ($dst)" || die "list: $(vm list)"
after=$(tick last)
[ "$after" -gt "$mid" ] || die "after the move: tick $after, before it $mid"
[ ! -e "$vm_dir/t/khyve.sock.mig" ] && [ -S "$vm_dir/t/khyve.sock" ] || die "the API socket was not renamed"
vm poweroff -f t >/dev/null || die "poweroff of the moved guest"
echo "t-migrate-kvm: ok (tick $before, $mid after a failed try, $after on the target)"
