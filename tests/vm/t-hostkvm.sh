# vm start on a host whose KVM cannot run the guest (PVM: no VMX or SVM, or
# no KVM device), forced with KHYVE_HOST_KVM=hardware|pvm|none: loader
# linux and uefi are refused in one line before anything runs, bios and
# grub start with a note beside "booting..."; a dry run (start -n) is never
# refused.
. "$TOP/tests/vm/lib.sh"
export KHYVE="$TOP/tests/vm/fake-khyve"
export FAKE_KHYVE_LOG="$scratch/khyve.log" FAKE_KHYVE_SCRIPT="$scratch/script"
mkdir -p "$vm_dir/.config" "$vm_dir/.iso"
: >"$FAKE_KHYVE_LOG"

mkdir -p "$vm_dir/lin" "$vm_dir/bio"
: >"$vm_dir/lin/vmlinuz"
printf 'loader="linux"\nlinux_kernel="%s"\ncpu="1"\nmemory="256M"\n' "$vm_dir/lin/vmlinuz" \
	>"$vm_dir/lin/lin.conf"
printf 'loader="bios"\ncpu="1"\nmemory="256M"\n' >"$vm_dir/bio/bio.conf"
runs() { grep -c " start .* $1\$" "$FAKE_KHYVE_LOG" || true; }
# until_stopped NAME: the fake khyve powered off (script 1) and vm saw it.
until_stopped() {
	i=0
	while vm list | awk -v n="$1" '$1 == n' | grep -q Running; do
		i=$((i + 1))
		[ $i -lt 100 ] || die "$1 still running"
		sleep 0.1
	done
}

for kind in pvm none; do
	KHYVE_HOST_KVM=$kind expect_fail vm start lin
	grep -q "^vm: this host's KVM cannot run loader=\"linux\" guests such as lin (.*); see README: nested lab$" \
		"$scratch/err" || die "$kind: $(cat "$scratch/err")"
done
[ "$(runs lin)" = 0 ] || die "khyve ran for a refused guest"
KHYVE_HOST_KVM=pvm vm start -n lin | grep -q "khyve .* lin$" || die "start -n refused"

# Where KVM runs guest code in hardware the same guest starts.
printf '1\n' >"$FAKE_KHYVE_SCRIPT"
KHYVE_HOST_KVM=hardware vm start lin >"$scratch/out" 2>"$scratch/err" || die "start: $(cat "$scratch/err")"
[ ! -s "$scratch/err" ] || die "hardware: stderr: $(cat "$scratch/err")"
until_stopped lin
[ "$(runs lin)" = 1 ] || die "lin: khyve ran $(runs lin) times"

# SeaBIOS runs on PVM, slowly: a note, and the guest starts.
printf '1\n' >"$FAKE_KHYVE_SCRIPT"
KHYVE_HOST_KVM=pvm vm start bio >"$scratch/out" 2>"$scratch/err" || die "bios: $(cat "$scratch/err")"
grep -q "^  \* note: this host's KVM (PVM/no VMX or SVM) runs firmware slowly" "$scratch/out" ||
	die "no note: $(cat "$scratch/out")"
[ ! -s "$scratch/err" ] || die "bios: stderr: $(cat "$scratch/err")"
until_stopped bio
[ "$(runs bio)" = 1 ] || die "bio: khyve ran $(runs bio) times"

KHYVE_HOST_KVM=nested expect_fail vm start bio
grep -q "KHYVE_HOST_KVM: want hardware, pvm or none" "$scratch/err" || die "$(cat "$scratch/err")"
