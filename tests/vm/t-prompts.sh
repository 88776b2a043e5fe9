# poweroff and destroy ask "Are you sure"; with stdin not a terminal they
# fail at once with one line (an EOF is no answer) unless -f is given.
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"

guest p
script sleep
vm start p >/dev/null
expect_fail vm poweroff p </dev/null
grep -q 'stdin is not a terminal.*use -f' "$scratch/err" || die "poweroff said: $(cat "$scratch/err")"
[ "$(state p)" = Running ] || die "poweroff without -f went ahead"
expect_fail vm reset p </dev/null
vm poweroff -f p </dev/null
[ "$(state p)" = Stopped ] || die "poweroff -f: p is $(state p)"

expect_fail vm destroy p </dev/null
grep -q 'stdin is not a terminal.*use -f' "$scratch/err" || die "destroy said: $(cat "$scratch/err")"
[ -f "$vm_dir/p/p.conf" ] || die "destroy without -f removed p"
# On a terminal the question is asked; "n" keeps the guest.
echo n | on_tty "$VM destroy p" >"$scratch/out"
grep -q "Are you sure" "$scratch/out" || die "destroy did not ask: $(od -c "$scratch/out" | head)"
[ -f "$vm_dir/p/p.conf" ] || die "destroy went ahead after 'n'"
vm destroy -f p </dev/null
[ ! -e "$vm_dir/p" ] || die "destroy -f left p"
echo "t-prompts: ok"
