# vm and khyve's API socket: khyve gets -o api.socket=DIR/khyve.sock; vm
# list's STATE and vm info's state come from vm.info when the socket
# answers (Paused), vm info shows vm.counters and the balloon's memory;
# without an answer both stay
# as they were.  tests/api/fake-khyve stands in for khyve's API.
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"
guest api
vm start -n api | grep -q -- " -o api.socket=$vm_dir/api/khyve.sock api\$" ||
	die "no api.socket: $(vm start -n api)"
script sleep
vm start api >/dev/null
until_state api Running
vm list | awk '$1 == "api"' | grep -q 'Running ([0-9]*)$' || die "list: $(vm list)"
vm info api | grep -q '^  state: running ([0-9]*)$' || die "info: $(vm info api)"
vm info api | grep -q '^  counters$' && die "counters without an API"

python3 "$TOP/tests/api/fake-khyve" "$vm_dir/api/khyve.sock" --name api --paused &
api_pid=$!
trap 'kill $api_pid 2>/dev/null || :; cleanup' EXIT
i=0
while [ ! -S "$vm_dir/api/khyve.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
vm list | awk '$1 == "api"' | grep -q '  Paused ([0-9]*)$' || die "list not Paused: $(vm list)"
[ "$(state api)" = Paused ] || die "state: $(state api)"
vm list --json | grep -q '"paused":[[:space:]]*true' || die "list --json: $(vm list --json)"
vm info api >"$scratch/info"
grep -q '^  state: paused ([0-9]*)$' "$scratch/info" || die "info state: $(cat "$scratch/info")"
grep -q '^  counters$' "$scratch/info" || die "no counters: $(cat "$scratch/info")"
grep -q '^    vcpu1: exits=1001 io-exits=401 mmio-exits=31 halt-exits=501$' "$scratch/info" ||
	die "vcpu1: $(cat "$scratch/info")"
grep -q '^    disk0: reads=120 writes=45 read-bytes=491520 write-bytes=184320 errors=0$' \
	"$scratch/info" || die "disk0: $(cat "$scratch/info")"
grep -q '^    net0: rx-packets=33 rx-bytes=4096 tx-packets=21 tx-bytes=2048$' "$scratch/info" ||
	die "net0: $(cat "$scratch/info")"
# The balloon's memory section: what the fake's vm.balloon says, a
# statistic the guest did not send as "-".
sed -n '/^  memory (virtio-balloon)$/,/^$/p' "$scratch/info" | grep . | tr -s ' ' >"$scratch/mem"
printf '%s\n' ' memory (virtio-balloon)' ' ram: 512M' ' target: 512M' ' guest-keeps: 512M' \
	' reported-free: 100M' ' guest-total: -' ' guest-free: 256M' ' guest-available: -' \
	' guest-caches: -' | cmp -s - "$scratch/mem" || die "memory section: $(cat "$scratch/info")"
kill "$api_pid"
wait "$api_pid" 2>/dev/null || :
vm list | awk '$1 == "api"' | grep -q 'Running ([0-9]*)$' || die "after the API: $(vm list)"
# A khyve whose API hangs costs vm list its 1-s timeout, no more.
python3 "$TOP/tests/api/fake-khyve" "$vm_dir/api/khyve.sock" --silent &
api_pid=$!
i=0
while [ ! -S "$vm_dir/api/khyve.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
t0=$(date +%s)
vm list | awk '$1 == "api"' | grep -q 'Running ([0-9]*)$' || die "hung API: $(vm list)"
[ $(($(date +%s) - t0)) -le 4 ] || die "vm list waited $(($(date +%s) - t0)) s for a hung API"
kill "$api_pid"
vm poweroff -f api
echo "t-api: ok"
