# Sourced after lib.sh by tests that run guests on tests/vm/fake-khyve:
# the fake's log and script, a cleanup that kills whatever a failed check
# left running, and helpers to make guests and watch their state.
export KHYVE="$TOP/tests/vm/fake-khyve" KHYVECTL="$TOP/tests/vm/fake-khyvectl"
export FAKE_KHYVECTL_FAIL="$scratch/khyvectl-fail"
export FAKE_KHYVE_LOG="$scratch/khyve.log" FAKE_KHYVE_SCRIPT="$scratch/script"
echo 'vm_stop_timeout="10"' >>"$KHYVE_CONF"
mkdir -p "$vm_dir/.config" "$vm_dir/.iso"
cleanup() {
	for f in "$vm_dir"/*/run.state; do
		[ -e "$f" ] || continue
		for pid in $(sed -n 's/^\(supervisor\|khyve\)="\([0-9]*\)"$/\2/p' "$f"); do
			[ "$pid" -gt 0 ] && kill -9 "$pid" 2>/dev/null || :
		done
	done
	rm -rf "$scratch"
}
trap cleanup EXIT
: >"$FAKE_KHYVE_LOG"

# guest NAME [KEY=VALUE...]: a minimal BIOS guest.
guest() {
	name=$1
	shift
	mkdir -p "$vm_dir/$name"
	{ printf 'loader="bios"\ncpu="1"\nmemory="256M"\n'; for kv; do echo "${kv%%=*}=\"${kv#*=}\""; done; } \
		>"$vm_dir/$name/$name.conf"
}
# script ACTION...: what the next runs of the fake khyve do (see fake-khyve).
script() { printf '%s\n' "$@" >"$FAKE_KHYVE_SCRIPT"; }
runs() { grep -c " start .* $1\$" "$FAKE_KHYVE_LOG" || true; }
state() { vm list | awk -v n="$1" '$1 == n' | grep -o 'Running\|Paused\|Stopped\|Suspended\|Locked' || echo none; }
# until_state NAME STATE: wait up to 10 s for it.
until_state() {
	i=0
	while [ "$(state "$1")" != "$2" ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || die "$1 is $(state "$1"), not $2"
		sleep 0.1
	done
}
field() { sed -n "s/^$2=\"\(.*\)\"$/\1/p" "$vm_dir/$1/run.state"; }
sv_log() { cat "$vm_dir/$1/vm-bhyve.log"; }
