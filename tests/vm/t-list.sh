# vm list -v: vm-bhyve's extra columns %CPU, RSZ and UPTIME of the
# running khyve (from /proc), "-" for a stopped guest.
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"
guest up
guest down
script sleep
vm start up >/dev/null
sleep 1.2
vm list -v >"$scratch/out"
head -n1 "$scratch/out" | grep -q 'STATE  *%CPU  *RSZ  *UPTIME$' || die "header: $(head -n1 "$scratch/out")"
awk '$1 == "up" { print $(NF-2), $(NF-1), $NF }' "$scratch/out" >"$scratch/cols"
grep -Eq '^[0-9]+\.[0-9] [1-9][0-9]* 00:0[0-9]$' "$scratch/cols" || die "up: $(cat "$scratch/cols")"
awk '$1 == "down" { print $(NF-2), $(NF-1), $NF }' "$scratch/out" | grep -q '^- - -$' ||
	die "down: $(grep '^down' "$scratch/out")"
vm list >"$scratch/out"
grep -q 'UPTIME' "$scratch/out" && die "plain list has -v's columns"
vm list -v --json | grep -q '"uptime"' || die "no uptime in list -v --json"
expect_fail vm list -x
vm poweroff -f up
echo "t-list: ok"
