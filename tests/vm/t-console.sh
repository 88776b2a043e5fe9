# vm console: the relay between a guest's pty and the terminal, its ~.
# escape, khyve going away, the tmux branch and the errors.  No khyve runs:
# a Python "guest" opens a pty and links its slave where khyve would
# (-l com1,pty=$vm_dir/NAME/com1.pty), then talks on the master side.
. "$TOP/tests/vm/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 0; }

mkdir -p "$vm_dir/.config" "$vm_dir/g" "$vm_dir/two"
echo 'memory="256M"' >"$vm_dir/g/g.conf"
printf 'memory="256M"\ncomports="com2 com1"\n' >"$vm_dir/two/two.conf"

cat >"$scratch/guest.py" <<'EOF'
# guest.py LINK LOG MODE: a pty whose slave LINK names, raw as khyve makes
# it.  Says MARKER-BOOT at once; "talk": logs what arrives in LOG and says
# MARKER-LIVE once "abc" came; "hangup": closes the master after a second.
import os, pty, select, sys, time, tty
link, log, mode = sys.argv[1:4]
master, slave = pty.openpty()
tty.setraw(slave)
os.symlink(os.ttyname(slave), link + ".tmp")
os.rename(link + ".tmp", link)
os.write(master, b"MARKER-BOOT\r\n")
open(link + ".ready", "w").close()
if mode == "hangup":
    time.sleep(1)
    os.close(master)
    sys.exit(0)
got, said = b"", False
end = time.time() + 30
while time.time() < end:
    if select.select([master], [], [], 0.2)[0]:
        got += os.read(master, 1024)
        with open(log, "wb") as f:
            f.write(got)
        if b"abc" in got and not said:
            os.write(master, b"MARKER-LIVE\r\n")
            said = True
EOF

# start_guest NAME PORT MODE: run the fake guest, wait for its link.
start_guest() {
	link=$vm_dir/$1/$2.pty
	rm -f "$link.ready"
	python3 "$scratch/guest.py" "$link" "$scratch/guest.log" "$3" &
	guest_pid=$!
	for _ in $(seq 100); do [ -e "$link.ready" ] && return 0; sleep 0.1; done
	die "fake guest did not start"
}
stop_guest() { kill "$guest_pid" 2>/dev/null || true; wait "$guest_pid" 2>/dev/null || true; }

# --- relay both ways, escapes, detach with ~. ---
start_guest g com1 talk
# "~" is special only at the start of a line: "~~" sends "~", "a~.b" and
# "~y" pass as typed, and the final "~." detaches.
(sleep 0.5; printf 'abc\r~~x a~.b\r~y\r'; sleep 1; printf '~.ignored') |
	vm console g >"$scratch/out" 2>"$scratch/err" || die "vm console failed: $(cat "$scratch/err")"
stop_guest
grep -q MARKER-BOOT "$scratch/out" || die "no output from before connecting: $(cat "$scratch/out")"
grep -q MARKER-LIVE "$scratch/out" || die "no live output: $(cat "$scratch/out")"
[ "$(cat "$scratch/err")" = "vm: connected to g com1; ~. detaches" ] ||
	die "stderr: $(cat "$scratch/err")"
printf 'abc\r~x a~.b\r~y\r' | cmp -s - "$scratch/guest.log" ||
	die "guest got: $(od -c "$scratch/guest.log")"

# --- khyve exits: one line, status 0 (stdin at EOF keeps output flowing) ---
start_guest g com1 hangup
vm console g com1 </dev/null >"$scratch/out" 2>"$scratch/err" ||
	die "vm console after hangup failed: $(cat "$scratch/err")"
wait "$guest_pid" || true
grep -q MARKER-BOOT "$scratch/out" || die "no output before hangup"
[ "$(wc -l <"$scratch/err")" -eq 2 ] || die "stderr: $(cat "$scratch/err")"
grep -q '^vm: g com1: khyve has exited' "$scratch/err" || die "stderr: $(cat "$scratch/err")"
rm -f "$vm_dir/g/com1.pty"

# --- the first of comports is the default ---
start_guest two com2 talk
(sleep 0.5; printf '~.') | vm console two >"$scratch/out" 2>"$scratch/err" ||
	die "vm console two failed: $(cat "$scratch/err")"
stop_guest
grep -q "connected to two com2" "$scratch/err" || die "stderr: $(cat "$scratch/err")"
rm -f "$vm_dir/two/com2.pty"

# --- on a terminal: raw while connected, restored on detach and on SIGTERM ---
cat >"$scratch/onterm.py" <<'EOF'
# onterm.py VM NAME HOW: run `vm console NAME` on a pty, end it by HOW
# (detach: type ~.; term: SIGTERM), check the settings are put back.
import os, pty, signal, sys, termios, time
vm, name, how = sys.argv[1:4]
pid, fd = pty.fork()
if pid == 0:
    os.execv(vm, [vm, "console", name])
before = termios.tcgetattr(fd)
time.sleep(1)
assert termios.tcgetattr(fd)[3] & termios.ICANON == 0, "not raw while connected"
if how == "detach":
    os.write(fd, b"\r~.")
else:
    os.kill(pid, signal.SIGTERM)
_, status = os.waitpid(pid, 0)
assert termios.tcgetattr(fd) == before, "terminal not restored after " + how
assert status == (0 if how == "detach" else signal.SIGTERM), "status %d" % status
EOF
start_guest g com1 talk
python3 "$scratch/onterm.py" "$VM" g detach || die "terminal, detach"
python3 "$scratch/onterm.py" "$VM" g term || die "terminal, SIGTERM"
stop_guest
rm -f "$vm_dir/g/com1.pty"

# --- errors: one line each ---
snapshot_tree
expect_fail vm console
expect_fail vm console g com1 extra
expect_fail vm console -x g
expect_fail vm console nosuch
grep -q 'nosuch' "$scratch/err" || die "no name in: $(cat "$scratch/err")"
expect_fail vm console g com9
expect_fail vm console g com2
grep -q 'comports' "$scratch/err" || die "$(cat "$scratch/err")"
expect_fail vm console g
grep -q 'not running' "$scratch/err" || die "$(cat "$scratch/err")"
ln -s /dev/pts/999999 "$vm_dir/g/com1.pty" # left by a khyve killed with -9
expect_fail vm console g
grep -q 'cannot open' "$scratch/err" || die "$(cat "$scratch/err")"
rm "$vm_dir/g/com1.pty"
ln -s "$vm_dir/g/g.conf" "$vm_dir/g/com1.pty"
expect_fail vm console g
grep -q "does not point into /dev/pts" "$scratch/err" || die "$(cat "$scratch/err")"
rm "$vm_dir/g/com1.pty"
same_tree "vm console errors"

# --- console=tmux: the relay runs in tmux session vm-NAME ---
mkdir -p "$scratch/bin"
cat >"$scratch/bin/tmux" <<EOF
#!/bin/sh
echo "\$*" >>"$scratch/tmux.log"
[ "\$1" = has-session ] && exit 1
exit 0
EOF
chmod +x "$scratch/bin/tmux"
echo 'console="tmux"' >>"$vm_dir/.config/system.conf"
ln -s /dev/null "$vm_dir/g/com1.pty"
PATH=$scratch/bin:$PATH TMUX= vm console g </dev/null || die "tmux branch failed"
self=$(readlink -f "$VM")
relay="/usr/bin/env KHYVE_CONF=$KHYVE_CONF $self console --direct g com1"
[ "$(cat "$scratch/tmux.log")" = "new-session -A -s vm-g $relay" ] ||
	die "tmux got: $(cat "$scratch/tmux.log")"
# Inside tmux already: a detached session, then switch to it.
rm "$scratch/tmux.log"
PATH=$scratch/bin:$PATH TMUX=/tmp/tmux-0/default,1,0 vm console g </dev/null ||
	die "nested tmux branch failed"
printf '%s\n' "has-session -t =vm-g" "new-session -d -s vm-g $relay" "switch-client -t =vm-g" |
	cmp -s - "$scratch/tmux.log" || die "tmux got: $(cat "$scratch/tmux.log")"
# --direct skips tmux: here it reaches the relay, which refuses /dev/null.
rm "$scratch/tmux.log"
PATH=$scratch/bin:$PATH expect_fail vm console --direct g
[ ! -e "$scratch/tmux.log" ] || die "--direct ran tmux"

# --- supervised guests (run.lock, run.state: src/vm/state.h) ---
# A stale run.lock (nobody holds it): not running, whatever link is left.
hostname >"$vm_dir/g/run.lock"
expect_fail vm console g
grep -q 'not running' "$scratch/err" || die "$(cat "$scratch/err")"
# Started with console=tmux: the first port is on the terminal of tmux
# session NAME, which vm start made; attach to it.  (Skipped while
# state.c is the placeholder that reads every guest as stopped.)
if ! grep -q 'stub: replaced' "$TOP/src/vm/state.c"; then
	echo 'console="tmux"' >"$vm_dir/g/run.state"
	python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "r+"); fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[1] + ".held", "w").close(); time.sleep(30)' "$vm_dir/g/run.lock" &
	holder=$!
	for _ in $(seq 100); do [ -e "$vm_dir/g/run.lock.held" ] && break; sleep 0.1; done
	rm -f "$scratch/tmux.log"
	PATH=$scratch/bin:$PATH TMUX= vm console g </dev/null || die "attach to the guest's tmux"
	[ "$(cat "$scratch/tmux.log")" = "attach-session -t =g" ] || die "tmux got: $(cat "$scratch/tmux.log")"
	kill "$holder"
	wait "$holder" 2>/dev/null || true
fi
rm -f "$vm_dir/g/run.lock" "$vm_dir/g/run.lock.held" "$vm_dir/g/run.state"
echo ok
