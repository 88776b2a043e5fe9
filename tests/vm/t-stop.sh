# vm stop of a guest that does not hear the power button says so at once;
# one that cannot tell gets a countdown; stale comN.pty links go away
# after khyve is killed, and at the next start.
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"

# The fake logs khyve's "not listening" warning: stop gives up in well
# under vm_stop_timeout (10 s) and suggests vm poweroff.
guest grub
script deaf
vm start grub >/dev/null
t0=$(date +%s)
expect_fail vm stop grub
[ $(($(date +%s) - t0)) -lt 5 ] || die "stop of a deaf guest took $(($(date +%s) - t0)) s"
grep -q 'grub did not hear the ACPI power button.*vm poweroff grub' "$scratch/err" ||
	die "stop said: $(cat "$scratch/err")"
[ "$(state grub)" = Running ] || die "grub is $(state grub)"
vm poweroff -f grub
# A guest that ignores it silently: the wait shows the seconds left.
script hang
vm start grub >/dev/null
sed -i 's/^vm_stop_timeout=.*/vm_stop_timeout="2"/' "$KHYVE_CONF"
expect_fail vm stop grub
grep -q 'Waiting for 1 guest(s) to stop: [12] s left' "$scratch/out" || die "no countdown: $(cat "$scratch/out")"
grep -q 'still running after 2 s' "$scratch/err" || die "stop timeout: $(cat "$scratch/err")"
# On a terminal the countdown is one line, rewritten in place.
sed -i 's/^vm_stop_timeout=.*/vm_stop_timeout="3"/' "$KHYVE_CONF"
on_tty "$VM stop grub" </dev/null >"$scratch/out" 2>&1 || :
tr '\r' '\n' <"$scratch/out" | grep -q '^Waiting for 1 guest(s) to stop: 2 s left' &&
	tr '\r' '\n' <"$scratch/out" | grep -q '^Waiting for 1 guest(s) to stop: 1 s left' ||
	die "no countdown in place: $(od -c "$scratch/out" | head -20)"
[ "$(grep -c Waiting "$scratch/out")" = 1 ] || die "countdown not on one line: $(od -c "$scratch/out" | head)"
vm poweroff -f grub

# kill -9 of khyve: the supervisor removes the com1.pty it left behind.
guest k
script sleep sleep
vm start k >/dev/null
[ -L "$vm_dir/k/com1.pty" ] || die "the fake khyve made no com1.pty"
kill -9 "$(field k khyve)"
until_state k Stopped
[ ! -L "$vm_dir/k/com1.pty" ] || die "stale com1.pty left after kill -9"
sv_log k | grep -q 'removed the stale com1.pty' || die "no log line for the stale link"
# kill -9 of both (a host crash): the next start removes it first.
vm start k >/dev/null
kill -9 "$(field k supervisor)" "$(field k khyve)"
sleep 0.3
[ -L "$vm_dir/k/com1.pty" ] || die "no stale link to test with"
: >"$FAKE_KHYVE_LOG"
script sleep
vm start k >/dev/null
grep -q "stale $vm_dir/k/com1.pty" "$FAKE_KHYVE_LOG" && die "khyve started over a stale com1.pty"
# A com2.pty that is not a link into /dev/pts is not ours: it stays.
vm poweroff -f k
echo mine >"$vm_dir/k/com2.pty"
script sleep
vm start k >/dev/null
vm poweroff -f k
[ "$(cat "$vm_dir/k/com2.pty")" = mine ] || die "com2.pty (a file) was touched"
echo "t-stop: ok"
