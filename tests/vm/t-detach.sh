# vm start's detached supervisor and its khyve keep none of the caller's
# file descriptors (a $(...) pipe, a terminal), and khyve gets the pipe it
# reports on once its guest runs (KHYVE_READY_FD).
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"

guest g
script ready
vm start g >/dev/null 7>"$scratch/seven" 8<"$KHYVE_CONF"
sup=$(field g supervisor) kpid=$(field g khyve)
for pid in "$sup" "$kpid"; do
	kill -0 "$pid" || die "no process $pid"
	if ls -l "/proc/$pid/fd" | grep -q "$scratch/seven\|$KHYVE_CONF"; then
		ls -l "/proc/$pid/fd" >&2
		die "process $pid kept a file descriptor of vm start's caller"
	fi
done
i=0
until grep -q ' ready [0-9]\| no KHYVE_READY_FD' "$FAKE_KHYVE_LOG"; do
	i=$((i + 1))
	[ $i -lt 100 ] || die "the fake khyve did not run its 'ready' step"
	sleep 0.1
done
grep -q ' ready [0-9]' "$FAKE_KHYVE_LOG" || die "khyve got no KHYVE_READY_FD"
[ "$(state g)" = Running ] || die "g is $(state g) after its start"
vm stop g >/dev/null
[ "$(state g)" = Stopped ] || die "g is $(state g) after stop"
echo "detach ok"
