# vm suspend / start of a Suspended guest / start -d, and stopall/startall
# with vm_stop_mode="suspend", on the fake khyve and khyvectl (fake-khyve,
# fake-khyvectl: a suspend writes NAME.state and khyve exits 5; -r FILE
# resumes, refusing a file made with other options).
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"
guest a
st=$vm_dir/a/a.state

# Suspend: the file is there, the supervisor logs exit 5 and does not restart.
expect_fail vm suspend a
grep -q 'a is not running' "$scratch/err" || die "suspend of a stopped guest: $(cat "$scratch/err")"
vm start a >/dev/null
vm suspend a >"$scratch/out" || die "suspend failed"
grep -q "Suspending a into $st" "$scratch/out" || die "suspend said: $(cat "$scratch/out")"
[ -f "$st" ] || die "no $st"
[ "$(state a)" = Suspended ] || die "a is $(state a) after suspend"
grep -q ' exit 5 a$' "$FAKE_KHYVE_LOG" || die "khyve did not exit 5"
sv_log a | grep -q 'khyve exited with status 5' || die "no exit 5 in the log: $(sv_log a)"
sv_log a | grep -q 'suspended; not restarting' || die "no suspended line: $(sv_log a)"
[ "$(runs a)" = 1 ] || die "khyve ran $(runs a) times"
vm info a | grep -q '^  state: suspended' || die "vm info: $(vm info a | head -5)"
vm info a | grep -q "saved-state: $st" || die "vm info shows no saved state"
vm list --json | tr -d ' \t' | grep -q '"suspended":true' || die "list --json: $(vm list --json)"
expect_fail vm suspend a
grep -q 'already suspended' "$scratch/err" || die "second suspend: $(cat "$scratch/err")"
expect_fail vm rename a b
grep -q 'a is suspended' "$scratch/err" || die "rename: $(cat "$scratch/err")"
expect_fail vm rollback a@x
grep -q 'a is suspended' "$scratch/err" || die "rollback: $(cat "$scratch/err")"

# -n shows the resume; start adds -r before the name, the file goes after the grace.
vm start -n a | grep -q -- "-r $st a\$" || die "start -n: $(vm start -n a)"
t0=$(date +%s%N)
vm start a >"$scratch/out"
grep -q 'resuming from a.state' "$scratch/out" || die "start said: $(cat "$scratch/out")"
[ $((($(date +%s%N) - t0) / 1000000)) -ge 1900 ] || die "start returned before the grace"
grep -q " start .* -r $st a\$" "$FAKE_KHYVE_LOG" || die "no -r: $(tail -n 3 "$FAKE_KHYVE_LOG")"
grep -q " resumed $st" "$FAKE_KHYVE_LOG" || die "the fake did not resume"
[ "$(state a)" = Running ] || die "a is $(state a) after resume"
[ ! -e "$st" ] || die "$st still there after the grace"
sv_log a | grep -q "resumed from $st; removed it" || die "no resume line: $(sv_log a)"

# A restore that khyve refuses (other options: memory changed) keeps the file.
vm suspend a >/dev/null
sed -i 's/^memory=.*/memory="512M"/' "$vm_dir/a/a.conf"
expect_fail vm start a
grep -q 'khyve: state file .* was made with other options' "$scratch/err" ||
	die "refused start said: $(cat "$scratch/err")"
[ -f "$st" ] || die "a refused restore removed $st"
[ "$(state a)" = Suspended ] || die "a is $(state a) after a refused restore"
sv_log a | grep -q 'khyve refused to resume' || die "no refusal in the log: $(sv_log a)"
# -d: the file goes to a.state.discarded and a boots afresh.
: >"$FAKE_KHYVE_LOG"
vm start -d a >"$scratch/out"
grep -q 'discarded the saved state' "$scratch/out" || die "start -d said: $(cat "$scratch/out")"
[ ! -e "$st" ] && [ -f "$st.discarded" ] || die "start -d did not move the state"
grep -q -- ' -r ' "$FAKE_KHYVE_LOG" && die "start -d resumed: $(cat "$FAKE_KHYVE_LOG")"
[ "$(state a)" = Running ] || die "a is $(state a) after start -d"
vm poweroff -f a >/dev/null

# vm_stop_mode: unknown values are refused; "suspend" suspends on stopall,
# falls back to the power button for a guest whose suspend fails, and
# startall resumes (vm_list's and the others).
echo 'vm_stop_mode="hibernate"' >>"$KHYVE_CONF"
expect_fail vm stopall
grep -q 'vm_stop_mode="hibernate"' "$scratch/err" || die "stopall: $(cat "$scratch/err")"
sed -i 's/^vm_stop_mode=.*/vm_stop_mode="suspend"/' "$KHYVE_CONF"
printf 'vm_list="a b"\nvm_delay="0"\n' >>"$KHYVE_CONF"
guest b
guest c
vm start a b c >/dev/null
echo 'the guest cannot be saved: device xhci' >"$FAKE_KHYVECTL_FAIL"
vm stopall >"$scratch/out" 2>"$scratch/err" || die "stopall failed: $(cat "$scratch/err")"
for n in a b c; do [ "$(state $n)" != Running ] || die "$n still runs after stopall"; done
# c (outside vm_list) goes first: its suspend is the one that fails.
[ "$(state c)" = Stopped ] || die "c is $(state c)"
grep -q 'c: cannot suspend (khyvectl: c: the guest cannot be saved' "$scratch/err" ||
	die "no fallback warning: $(cat "$scratch/err")"
sv_log c | grep -q 'stopall: cannot suspend' || die "no fallback in c's log"
[ "$(state a)" = Suspended ] && [ "$(state b)" = Suspended ] || die "a $(state a), b $(state b)"
vm poweroff -f c >/dev/null 2>&1 || :
# startall: b and a (vm_list) and c's none; d, suspended outside vm_list, too.
guest d
vm start d >/dev/null
vm suspend d >/dev/null
: >"$FAKE_KHYVE_LOG"
vm startall >"$scratch/out"
for n in a b d; do
	[ "$(state $n)" = Running ] || die "$n is $(state $n) after startall"
	grep -q " start .* -r $vm_dir/$n/$n.state $n\$" "$FAKE_KHYVE_LOG" || die "$n not resumed"
done
[ "$(state c)" = Stopped ] || die "startall started c"
vm stopall >/dev/null
echo "t-suspend: ok"
