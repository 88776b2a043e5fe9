# startall and stopall with a fake khyve: vm_list order, vm_delay apart;
# stopall stops the others at once, then vm_list in reverse; vm_enable="NO".
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"
cat >>"$KHYVE_CONF" <<'C'
vm_list="b a c"
vm_delay="1"
C
for n in a b c d; do
	guest "$n"
done
# order WHAT: the guests of the fake log's WHAT (start|exit) lines, in order.
order() { awk -v w="$1" '$2 == w { print $NF }' "$FAKE_KHYVE_LOG" | tr '\n' ' '; }
# gaps WHAT: the smallest time between two such lines, in ms.
gap() {
	awk -v w="$1" '$2 == w { if (n++) { d = ($1 - t) * 1000; if (min == "" || d < min) min = d } t = $1 }
		END { printf "%d\n", min }' "$FAKE_KHYVE_LOG"
}

# vm_enable="NO": nothing starts.
echo 'vm_enable="NO"' >>"$KHYVE_CONF"
vm startall >"$scratch/out"
grep -q 'vm_enable' "$scratch/out" || die "startall did not say vm_enable is off"
[ ! -s "$FAKE_KHYVE_LOG" ] || die "startall started guests with vm_enable=NO"
sed -i 's/^vm_enable=.*/vm_enable="YES"/' "$KHYVE_CONF"

vm startall >"$scratch/out"
[ "$(order start)" = "b a c " ] || die "start order: $(order start)"
[ "$(gap start)" -ge 1000 ] || die "starts only $(gap start) ms apart"
[ "$(grep -c '^Waiting 1 second(s)$' "$scratch/out")" = 2 ] || die "startall said: $(cat "$scratch/out")"
for n in a b c; do [ "$(state $n)" = Running ] || die "$n is $(state $n)"; done
[ "$(state d)" = Stopped ] || die "d (not in vm_list) was started"
# Guests that run already are skipped: startall again is harmless.
vm startall >"$scratch/out"
[ "$(grep -c 'is already running$' "$scratch/out")" = 3 ] || die "second startall: $(cat "$scratch/out")"
[ "$(grep -c ' start ' "$FAKE_KHYVE_LOG")" = 3 ] || die "second startall started guests again"

vm start d >/dev/null
vm stopall >"$scratch/out"
grep -q '^Beginning shutdown process$' "$scratch/out" || die "stopall said: $(cat "$scratch/out")"
grep -q 'non-ordered guests: d$' "$scratch/out" || die "d not stopped first: $(cat "$scratch/out")"
for n in a b c d; do [ "$(state $n)" = Stopped ] || die "$n is $(state $n) after stopall"; done
[ "$(order exit | sed "s/d //")" = "c a b " ] || die "stop order: $(order exit)"
vm stopall # nothing running: nothing to do
echo "startall ok"
