# graphics="yes": fbuf in slot 29 and the xhci tablet in slot 30 on the
# khyve command line, the VNC port (5900 or the next free one: a port a
# program listens on, or one another running guest has, is skipped), the
# VNC column of vm list and info's vnc line for a running (fake) guest,
# bad values refused, and the shipped templates with graphics parse.
. "$TOP/tests/vm/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 0; }
. "$TOP/tests/vm/fake.sh"
vm init
touch "$vm_dir/.iso/setup.iso"
iso=$vm_dir/.iso/setup.iso

# A program listening on 5900 (or one is already): the search skips it.
: >"$scratch/listener"
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.bind(("127.0.0.1", 5900))
    s.listen(1)
except OSError:
    pass  # taken already, which is as good
print("ready", flush=True)
time.sleep(120)' >"$scratch/listener" &
listener=$!
trap 'kill $listener 2>/dev/null; cleanup' EXIT
i=0
until grep -q ready "$scratch/listener"; do
	i=$((i + 1))
	[ $i -lt 100 ] || die "the listener did not start"
	sleep 0.1
done
# listening(PORT): a LISTEN socket on PORT, IPv4 or IPv6 (/proc/net/tcp*).
listening() { grep -qi ":$(printf %04X "$1") [0-9A-F]*:0000 0A" /proc/net/tcp /proc/net/tcp6; }
listening 5900 || die "nothing listens on 5900"

# port ARGS...: the VNC port in `vm ARGS`'s khyve command.
port() { vm "$@" | sed -n 's/.* -s 29,fbuf,tcp=[^ ]*:\([0-9]*\),.*/\1/p'; }

guest gfx graphics=yes disk0_type=virtio-blk disk0_name=disk0.img
touch "$vm_dir/gfx/disk0.img"
cmd=$(vm start -n gfx)
echo "$cmd" | grep -q -- "-s 4,virtio-blk,$vm_dir/gfx/disk0.img -s 29,fbuf,tcp=127.0.0.1:[0-9]*,w=1024,h=768 -s 30,xhci,tablet -s 31,lpc " ||
	die "start -n: $cmd"
echo "$cmd" | grep -q ',wait' && die "vm start waits: $cmd"
p=$(port start -n gfx)
[ "$p" -gt 5900 ] && [ "$p" -lt 6100 ] || die "port $p: 5900 is in use"
listening "$p" && die "port $p is in use"
# graphics_wait=auto (the default): `vm install` waits for the client.
vm install -n gfx "$iso" | grep -q -- "-s 3,ahci-cd,$iso .*-s 29,fbuf,[^ ]*,wait -s 30" ||
	die "install -n: $(vm install -n gfx "$iso")"

guest opts graphics=on graphics_port=5999 graphics_listen=0.0.0.0 graphics_res=1920x1080 \
	graphics_vga=off graphics_wait=yes vnc_password=secret xhci_mouse=no
vm start -n opts | grep -q -- " -s 29,fbuf,tcp=0.0.0.0:5999,w=1920,h=1080,vga=off,password=secret,wait -s 31,lpc " ||
	die "options: $(vm start -n opts)"
vm start -n opts | grep -q xhci && die "xhci_mouse=no: $(vm start -n opts)"
guest v6 graphics=yes graphics_listen=::1 graphics_port=5905 graphics_wait=no
vm install -n v6 "$iso" | grep -q -- "-s '29,fbuf,tcp=\[::1\]:5905,w=1024,h=768' -s 30,xhci,tablet" ||
	die "IPv6: $(vm install -n v6 "$iso")"
guest plain
vm start -n plain | grep -q 'fbuf\|xhci' && die "no graphics: $(vm start -n plain)"
# The slots stay free for disks and NICs without graphics, and are
# skipped with it.
guest slots graphics=yes start_slot=29 network0_type=virtio-net network0_switch=x \
	network1_type=virtio-net network1_switch=x
echo 'switch_list="x"' >>"$vm_dir/.config/system.conf"
expect_fail vm start -n slots
grep -q 'too many devices' "$scratch/err" || die "slots: $(cat "$scratch/err")"

# A running guest's VNC address: run.state, vm list, vm info.
guest up graphics=yes
script 0 sleep
vm install up "$iso" >/dev/null
until_state up Running
i=0
while [ "$(runs up)" -lt 2 ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || die "up did not reboot"
	sleep 0.1
done
sleep 0.3
addr=$(field up vnc)
uport=${addr##*:}
[ "$addr" = "127.0.0.1:$uport" ] || die "run.state vnc=$addr"
[ "$(field up vnc_wait)" = no ] || die "the reboot after the install still waits"
grep " start .*,fbuf,tcp=$addr,w=1024,h=768,wait .* up\$" "$FAKE_KHYVE_LOG" | grep -q . ||
	die "first boot did not wait: $(cat "$FAKE_KHYVE_LOG")"
[ "$(grep -c " start .*,fbuf,tcp=$addr,w=1024,h=768 .* up\$" "$FAKE_KHYVE_LOG")" = 1 ] ||
	die "the reboot changed port or waits: $(cat "$FAKE_KHYVE_LOG")"
vm list | awk '$1 == "up" { print $6 }' | grep -qx "$addr" || die "list: $(vm list)"
vm list | awk '$1 == "gfx" { print $6 }' | grep -qx -- - || die "list of a stopped guest: $(vm list)"
vm list --json | grep -q "\"vnc\":[[:space:]]*\"$addr\"" || die "list --json"
vm info up | grep -qx "  vnc: $addr" || die "info: $(vm info up)"
vm info gfx | grep -q '^  vnc: -' || die "info of a stopped guest: $(vm info gfx)"
# Another guest does not take a port a running guest has (the fake khyve
# does not listen: run.state says so).
p2=$(port start -n gfx)
[ "$p2" != "$uport" ] && [ "$p2" -gt 5900 ] || die "gfx got $p2, up has $uport"
# graphics_wait=yes: every boot waits, and info says so.
guest waiter graphics=yes graphics_wait=yes
vm start waiter >/dev/null
until_state waiter Running
i=0
until vm info waiter | grep -q '^  vnc: 127\.0\.0\.1:[0-9]* (the guest waits for the first client)$'; do
	i=$((i + 1))
	[ $i -lt 50 ] || die "info waiter: $(vm info waiter)"
	sleep 0.1
done
[ "$(field waiter vnc)" != "$addr" ] || die "waiter has up's port"
vm poweroff -f waiter
vm poweroff -f up
until_state up Stopped
vm list | awk '$1 == "up" { print $6 }' | grep -qx -- - || die "list after stop: $(vm list)"

# Bad values: one line naming the key, nothing started.
for bad in graphics=maybe xhci_mouse=perhaps graphics_res=800x601 graphics_res=1024 \
	graphics_res=8000x6000 graphics_res=x768 graphics_port=70000 graphics_port=59o0 \
	graphics_listen=nowhere graphics_listen=127.0.0.1:5900 graphics_wait=later \
	graphics_vga=vga vnc_password=123456789 "vnc_password=a,b" "vnc_password=a b"; do
	guest bad "$bad" graphics=yes
	expect_fail vm start -n bad
	grep -q "bad.conf: ${bad%%=*}" "$scratch/err" || die "$bad: $(cat "$scratch/err")"
	expect_fail vm start bad
done
[ "$(runs bad)" = 0 ] || die "a bad config started khyve"
grep -q 123456789 "$scratch/err" && die "the password is in the message"
# vm configure keeps a bad graphics value out of the config.
EDITOR="sed -i 1igraphics_res=1x1" vm configure gfx 2>"$scratch/err" &&
	die "configure saved graphics_res=1x1"
grep -q graphics_res "$scratch/err" || die "configure: $(cat "$scratch/err")"
grep -q '^graphics_res' "$vm_dir/gfx/gfx.conf" && die "graphics_res reached the config"
guest bad graphics=yes install_slot=29
expect_fail vm install -n bad "$iso"
grep -q install_slot "$scratch/err" || die "install_slot 29: $(cat "$scratch/err")"

# The shipped templates: all parse; those with graphics give the slots.
for t in "$TOP"/share/templates/*.conf; do
	name=$(basename "$t" .conf)
	vm create -t "$name" -s 64M "t-$name" || die "template $name"
done
grep -q '^graphics="yes"' "$vm_dir/t-windows/t-windows.conf" || die "windows has no graphics"
grep -qi 'serial console' "$TOP/share/templates/windows.conf" && die "windows: serial console"
for t in windows linux-uefi-graphics; do
	[ -f /usr/share/OVMF/OVMF_CODE_4M.fd ] || break
	vm start -n "t-$t" | grep -q -- " -s 29,fbuf,tcp=127.0.0.1:[0-9]*,w=1024,h=768[^ ]* -s 30,xhci,tablet " ||
		die "template $t: $(vm start -n "t-$t")"
done
if [ -f /usr/share/OVMF/OVMF_CODE_4M.fd ]; then
	vm start -n t-linux-uefi-graphics | grep -q ',vga=off' || die "linux-uefi-graphics: vga"
fi
echo "t-graphics: ok"
