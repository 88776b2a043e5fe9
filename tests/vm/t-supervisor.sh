# The supervisor (vm _run) with a fake khyve: restarts a guest that
# reboots, not one that powers off; stop, restart, reset, poweroff;
# on_restart and on_fault; stale locks; errors of vm start.
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"

# A guest that reboots twice, then powers off: khyve runs three times.
guest reboots
script 0 0 1
vm start reboots >"$scratch/out"
grep -q '^Starting reboots$' "$scratch/out" || die "no 'Starting reboots'"
until_state reboots Stopped
[ "$(runs reboots)" = 3 ] || die "reboots: khyve ran $(runs reboots) times, not 3"
[ "$(sv_log reboots | grep -c restarting)" = 2 ] || die "reboots: not restarted twice"
sv_log reboots | grep -q 'stopped$' || die "reboots: no 'stopped' in the log"
[ ! -e "$vm_dir/reboots/run.lock" ] && [ ! -e "$vm_dir/reboots/run.state" ] || die "lock left behind"

# A guest that powers off runs once; on_restart="shutdown" stops on reboot too.
guest off
script 1
vm start off >/dev/null
until_state off Stopped
[ "$(runs off)" = 1 ] || die "off: khyve ran $(runs off) times"
guest norestart on_restart=shutdown
script 0
vm start norestart >/dev/null
until_state norestart Stopped
[ "$(runs norestart)" = 1 ] || die "on_restart=shutdown: khyve ran $(runs norestart) times"

# vm stop: ACPI shutdown (SIGTERM), the supervisor does not restart it.
guest g
script sleep
vm start g >/dev/null
[ "$(state g)" = Running ] || die "g is $(state g) right after start"
sup=$(field g supervisor)
kill -0 "$sup" || die "no supervisor"
expect_fail vm start g
grep -q 'already running' "$scratch/err" || die "start of a running guest: $(cat "$scratch/err")"
vm stop g >"$scratch/out"
grep -q '^Sending ACPI shutdown to g$' "$scratch/out" || die "stop said: $(cat "$scratch/out")"
[ "$(state g)" = Stopped ] || die "g is $(state g) after stop"
i=0
# An exited supervisor is reparented to pid 1, which on some hosts (a
# sandbox's own init) reaps late: a zombie counts as gone.
sup_alive() { kill -0 "$sup" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$sup/status" 2>/dev/null; }
while sup_alive; do i=$((i + 1)); [ $i -lt 20 ] || die "supervisor alive after stop"; sleep 0.1; done
[ "$(runs g)" = 1 ] || die "g restarted after stop"
grep -q ' exit 1 g$' "$FAKE_KHYVE_LOG" || die "khyve did not get the power button"
expect_fail vm stop g
grep -q 'not running' "$scratch/err" || die "stop of a stopped guest: $(cat "$scratch/err")"

# restart: stop (ACPI shutdown), then start again.
: >"$FAKE_KHYVE_LOG"
script sleep sleep
vm start g >/dev/null
vm restart g >"$scratch/out"
grep -q '^Sending ACPI shutdown to g$' "$scratch/out" && grep -q '^Starting g$' "$scratch/out" ||
	die "restart said: $(cat "$scratch/out")"
i=0
until [ "$(runs g)" = 2 ]; do i=$((i + 1)); [ $i -lt 100 ] || die "restart: no second run"; sleep 0.1; done
[ "$(state g)" = Running ] || die "g is $(state g) after restart"
# reset: khyve is killed and booted again at once.
script sleep
vm reset -f g
i=0
until [ "$(runs g)" = 3 ]; do i=$((i + 1)); [ $i -lt 100 ] || die "reset: no third run"; sleep 0.1; done
[ "$(state g)" = Running ] || die "g is $(state g) after reset"
# poweroff: killed, not restarted; without -f it asks on a terminal and
# "n" keeps it; without a terminal it fails at once (tests/vm/t-prompts.sh).
echo n | on_tty "$VM poweroff g" >/dev/null
[ "$(state g)" = Running ] || die "poweroff went ahead after 'n'"
vm poweroff -f g
[ "$(state g)" = Stopped ] || die "g is $(state g) after poweroff"
[ "$(runs g)" = 3 ] || die "g restarted after poweroff"

# A guest that ignores the power button: stop gives up after vm_stop_timeout.
guest deaf
script hang
vm start deaf >/dev/null
sed -i 's/^vm_stop_timeout=.*/vm_stop_timeout="1"/' "$KHYVE_CONF"
expect_fail vm stop deaf
grep -q 'deaf is still running after 1 s' "$scratch/err" || die "stop timeout: $(cat "$scratch/err")"
grep -q 'ignored SIGTERM deaf' "$FAKE_KHYVE_LOG" || die "deaf got no SIGTERM"
vm poweroff -f deaf
[ "$(state deaf)" = Stopped ] || die "deaf is $(state deaf) after poweroff"
sed -i 's/^vm_stop_timeout=.*/vm_stop_timeout="10"/' "$KHYVE_CONF"

# kill -9 of the supervisor and khyve (a host crash): the lock is stale.
script sleep sleep sleep
vm start g >/dev/null
sup=$(field g supervisor) kpid=$(field g khyve)
kill -9 "$sup" "$kpid"
until_state g Stopped
[ -e "$vm_dir/g/run.lock" ] || die "no stale run.lock to test with"
vm start g >/dev/null
[ "$(state g)" = Running ] || die "g is $(state g) after starting over a stale lock"
# kill -9 of the supervisor alone: khyve keeps the guest running (and locked).
kill -9 "$(field g supervisor)"
sleep 0.2
[ "$(state g)" = Running ] || die "g is $(state g) with an orphaned khyve"
expect_fail vm start g
vm stop g >/dev/null
[ "$(state g)" = Stopped ] || die "orphaned khyve not stopped"

# on_fault: "shutdown" by default, and vm start says so; "restart" backs off.
guest crash
script 3
expect_fail vm start crash
grep -q 'crash: khyve exited with status 3' "$scratch/err" || die "fault at once: $(cat "$scratch/err")"
[ "$(state crash)" = Stopped ] || die "crash is $(state crash)"
guest faulty on_fault=restart
script 3 3 1
t0=$(date +%s)
vm start faulty >/dev/null
until_state faulty Stopped
[ "$(runs faulty)" = 3 ] || die "on_fault=restart: khyve ran $(runs faulty) times, not 3"
[ $(($(date +%s) - t0)) -ge 3 ] || die "on_fault=restart: no 1 s + 2 s back-off"
sv_log faulty | grep -q 'restarting in 2 second' || die "no back-off in the log"

# -f: the supervisor runs in vm itself, com1 on stdio; a power-off is success.
script 0 1
: >"$FAKE_KHYVE_LOG"
vm start -f g </dev/null >"$scratch/out"
[ "$(runs g)" = 2 ] || die "start -f: khyve ran $(runs g) times"
grep -q 'com1,stdio' "$FAKE_KHYVE_LOG" || die "start -f: com1 not on stdio"
[ "$(state g)" = Stopped ] || die "g is $(state g) after start -f"
# -i without console=tmux is -f.
script 1
vm start -i g </dev/null >/dev/null
[ "$(runs g)" = 3 ] && [ "$(grep -c com1,stdio "$FAKE_KHYVE_LOG")" = 3 ] || die "start -i did not run g on stdio"

# install: the medium is there on the first boot only.
touch "$vm_dir/.iso/inst.iso"
guest inst
script 0 1
: >"$FAKE_KHYVE_LOG"
vm install inst inst.iso >/dev/null
until_state inst Stopped
sed -n 1p "$FAKE_KHYVE_LOG" | grep -q "$vm_dir/.iso/inst.iso" || die "no iso on the first boot"
sed -n '2,$p' "$FAKE_KHYVE_LOG" | grep -q 'inst.iso' && die "iso still there after the reboot"
expect_fail vm install inst nosuch.iso

# Errors: one line, nothing changed, nothing started.
echo 'otherhost' >"$vm_dir/off/run.lock"
[ "$(state off)" = Locked ] || die "a lock naming another host reads $(state off)"
expect_fail vm start off
grep -q 'running on otherhost' "$scratch/err" || die "locked: $(cat "$scratch/err")"
rm "$vm_dir/off/run.lock"
guest badprio priority=fast
: >"$FAKE_KHYVE_LOG"
snapshot_tree
expect_fail vm start badprio
expect_fail vm start nosuch
expect_fail vm start -f -i g
expect_fail vm stop nosuch
expect_fail vm poweroff -f nosuch
same_tree "failed starts"
[ ! -s "$FAKE_KHYVE_LOG" ] || die "khyve ran for a failed start"

# -n prints the command and starts nothing.
vm start -n g >"$scratch/out"
grep -q "^$KHYVE .* g\$" "$scratch/out" || die "start -n printed: $(cat "$scratch/out")"
[ "$(state g)" = Stopped ] && [ ! -s "$FAKE_KHYVE_LOG" ] || die "start -n started g"
echo "supervisor ok"
