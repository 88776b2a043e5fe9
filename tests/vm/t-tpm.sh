# tpm="yes": the supervisor starts swtpm (tests/vm/fake-swtpm) with its
# state in the guest's folder before khyve, khyve gets -l
# tpm,swtpm,DIR/tpm/swtpm.sock,ctrl=DIR/tpm/swtpm.ctrl, and swtpm stops after khyve; a swtpm that
# fails stops the start with one line; bad values refused; the windows
# template has a TPM.
. "$TOP/tests/vm/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 0; }
. "$TOP/tests/vm/fake.sh"
export SWTPM="$TOP/tests/vm/fake-swtpm" FAKE_SWTPM_LOG="$scratch/swtpm.log"
vm init
: >"$FAKE_SWTPM_LOG"
sock=$vm_dir/t/tpm/swtpm.sock
ctrl=$vm_dir/t/tpm/swtpm.ctrl

guest t tpm=yes
vm start -n t | grep -q -- " -l com1,[^ ]* -l tpm,swtpm,$sock,ctrl=$ctrl " || die "start -n: $(vm start -n t)"
guest none
vm start -n none | grep -q -- '-l tpm,' && die "no tpm key: $(vm start -n none)"
guest off tpm=no
vm start -n off | grep -q -- '-l tpm,' && die "tpm=no: $(vm start -n off)"
guest bad tpm=maybe
expect_fail vm start -n bad
grep -q 'tpm' "$scratch/err" || die "tpm=maybe: $(cat "$scratch/err")"

# A run: swtpm first, with the state in DIR/tpm; stopped after khyve.
script sleep
vm start t >/dev/null
until_state t Running
grep -q "^start socket --tpm2 --tpmstate dir=$vm_dir/t/tpm --server type=unixio,path=$sock --ctrl type=unixio,path=$vm_dir/t/tpm/swtpm.ctrl --flags not-need-init" "$FAKE_SWTPM_LOG" ||
	die "swtpm's arguments: $(cat "$FAKE_SWTPM_LOG")"
[ -S "$sock" ] || die "no socket $sock"
grep -q " start .*-l tpm,swtpm,$sock,ctrl=$ctrl .* t\$" "$FAKE_KHYVE_LOG" || die "khyve's arguments: $(cat "$FAKE_KHYVE_LOG")"
sv_log t | grep -n 'swtpm started\|starting khyve' | head -n 1 | grep -q 'swtpm started' ||
	die "swtpm not before khyve: $(sv_log t)"
vm stop t >/dev/null
until_state t Stopped
grep -q '^stopped$' "$FAKE_SWTPM_LOG" || die "swtpm not stopped: $(cat "$FAKE_SWTPM_LOG")"
sv_log t | grep -q 'swtpm stopped' || die "no 'swtpm stopped': $(sv_log t)"
[ ! -e "$sock" ] && [ -d "$vm_dir/t/tpm" ] || die "socket left, or no state folder"

# A reboot: a new swtpm for the next run (a TPM reset), the same folder.
: >"$FAKE_SWTPM_LOG"
script 0 1
vm start t >/dev/null
until_state t Stopped
[ "$(grep -c '^start ' "$FAKE_SWTPM_LOG")" = 2 ] && [ "$(grep -c '^stopped$' "$FAKE_SWTPM_LOG")" = 2 ] ||
	die "reboot: $(cat "$FAKE_SWTPM_LOG")"

# swtpm fails: one line, khyve never starts.
before=$(runs t)
export FAKE_SWTPM_FAIL=1
expect_fail vm start t
grep -q 'swtpm exited (status 3)' "$scratch/err" || die "swtpm failure: $(cat "$scratch/err")"
[ "$(runs t)" = "$before" ] || die "khyve started without its swtpm"
unset FAKE_SWTPM_FAIL

# The windows template asks for one.
vm create -t windows -s 64M w >/dev/null || die "create -t windows"
grep -q '^tpm="yes"' "$vm_dir/w/w.conf" || die "windows has no tpm"
echo ok
