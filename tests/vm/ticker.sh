# Sourced after lib.sh by the tests that run the real khyve on this host's
# KVM (TEST is the test's name, for the skip line): the ticker guest
# (tests/guests/ticker.S, as loader="bios" firmware through bios_firmware)
# as guest t, counting on com1.  Exits 0 (skipped) without /dev/kvm or when
# khyve, khyvectl or the ticker are not built beside $VM.
bin=$(dirname "$VM")
rom=$TOP/build/guests/ticker.rom
if ! [ -w /dev/kvm ] || ! [ -x "$bin/khyve" ] || ! [ -x "$bin/khyvectl" ] || ! [ -f "$rom" ]; then
	echo "$TEST: no /dev/kvm, $bin/khyve, khyvectl or ticker.rom: skipped"
	exit 0
fi
export KHYVE="$bin/khyve" KHYVECTL="$bin/khyvectl"
chmod 0755 "$scratch" # a root khyve drops to nobody
echo "bios_firmware=\"$rom\"" >>"$KHYVE_CONF"
vm init
mkdir -p "$vm_dir/t"
printf 'loader="bios"\ncpu="1"\nmemory="64M"\n' >"$vm_dir/t/t.conf"
cleanup() {
	vm poweroff -f t >/dev/null 2>&1 || :
	rm -rf "$scratch"
}
trap cleanup EXIT
# tick first|last: the first or newest "tick N" com1 gives within a second
# (the pty keeps what the guest wrote before anyone read), in decimal.
tick() {
	n=$(timeout 1 cat "$vm_dir/t/com1.pty" 2>/dev/null | tr -d '\r' |
		sed -n 's/^tick \([0-9a-f]*\)$/\1/p' | if [ "$1" = first ]; then head -n 1; else tail -n 1; fi)
	[ -n "$n" ] && echo $((0x$n)) || echo -1
}
