# passthruN="B/S/F" (vm-bhyve's): each host device passed through in a
# slot of its own (functions of one host slot share a guest slot), with
# the guest's memory wired (-S), as vm-bhyve does; bad values refused.
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"
vm init

guest pt disk0_type=virtio-blk disk0_name=disk0.img passthru0=2/0/0 passthru1=2/0/1 \
	passthru2=5/0/0
touch "$vm_dir/pt/disk0.img"
cmd=$(vm start -n pt)
echo "$cmd" | grep -q -- "-s 4,virtio-blk,$vm_dir/pt/disk0.img -s 5:0,passthru,2/0/0 -s 5:1,passthru,2/0/1 -s 6:0,passthru,5/0/0 .*-s 31,lpc " ||
	die "start -n: $cmd"
echo "$cmd" | grep -q -- " -w -S -u " || die "-S not among the flags: $cmd"
vm start -n pt 2>&1 | grep -q "not supported" && die "passthru still called unsupported"

# wired_memory=yes already gives -S: not twice.
guest ptw passthru0=3/0/0 wired_memory=yes
cmd=$(vm start -n ptw)
[ "$(echo "$cmd" | grep -o -- ' -S ' | wc -l)" -eq 1 ] || die "wired: -S not once: $cmd"
echo "$cmd" | grep -q -- "-s [0-9]*:0,passthru,3/0/0" || die "wired: $cmd"

# Bad values: one line naming the key.
for bad in 2/0 2/32/0 0000:02:00.0 x/0/0 2/0/8; do
	guest ptbad "passthru0=$bad"
	out=$(vm start -n ptbad 2>&1) && die "passthru0=$bad accepted: $out"
	echo "$out" | grep -q "passthru0=\"$bad\": want BUS/SLOT/FUNCTION" || die "passthru0=$bad: $out"
done
echo "t-passthru: ok"
