# Each running guest in its own cgroup v2 (src/vm/cgroup.c), on a folder
# standing in for cgroupfs (KHYVE_CGROUP_ROOT): made before khyve starts,
# khyve in it, memory.max = memory + 1/8 + 256 MiB, cpu.weight from
# priority as the kernel weighs nice levels, shown by vm info, removed
# at stop; without a controller the limit is left out and the log says so.
. "$TOP/tests/vm/lib.sh"
. "$TOP/tests/vm/fake.sh"

cg=$KHYVE_CGROUP_ROOT
# Without cgroup2 the guest still starts; vm info says why there is none.
guest nocg
script sleep
vm start nocg >/dev/null
until_state nocg Running
vm info nocg | grep -q '^  cgroup: - (no cgroup2 mounted)$' || die "info without cgroup2: $(vm info nocg | grep cgroup)"
sv_log nocg | grep -q 'cgroup: no cgroup2 mounted' || die "log lacks why: $(sv_log nocg)"
vm poweroff -f nocg
until_state nocg Stopped

mkdir -p "$cg"
echo "cpuset cpu io memory pids" >"$cg/cgroup.controllers"
guest g priority=5
sed -i 's/^memory=.*/memory="1G"/' "$vm_dir/g/g.conf"
script sleep
vm start g >/dev/null
until_state g Running
[ -d "$cg/khyve/g" ] || die "no cgroup $cg/khyve/g"
want=$(((1024 + 128 + 256) * 1024 * 1024))
[ "$(cat "$cg/khyve/g/memory.max")" = "$want" ] || die "memory.max $(cat "$cg/khyve/g/memory.max"), want $want"
# nice 5: kernel weight 335, * 100 / 1024 = 33.
[ "$(cat "$cg/khyve/g/cpu.weight")" = 33 ] || die "cpu.weight $(cat "$cg/khyve/g/cpu.weight"), want 33"
i=0
until [ -n "$(field g khyve)" ] && [ "$(field g khyve)" != 0 ]; do
	i=$((i + 1)); [ $i -lt 100 ] || die "no khyve pid in run.state"; sleep 0.1
done
[ "$(cat "$cg/khyve/g/cgroup.procs")" = "$(field g khyve)" ] ||
	die "cgroup.procs has '$(cat "$cg/khyve/g/cgroup.procs")', khyve is $(field g khyve)"
grep -qx '+memory' "$cg/khyve/cgroup.subtree_control" || grep -qx '+cpu' "$cg/khyve/cgroup.subtree_control" ||
	die "controllers not handed down: $(cat "$cg/khyve/cgroup.subtree_control")"
vm info g | grep -qx "  cgroup: $cg/khyve/g (memory.max=$want, cpu.weight=33)" ||
	die "info: $(vm info g | grep cgroup)"
sv_log g | grep -q "cgroup $cg/khyve/g \[memory.max: $want\] \[cpu.weight: 33\]" || die "log: $(sv_log g)"
vm poweroff -f g
until_state g Stopped
i=0
while [ -e "$cg/khyve/g" ]; do i=$((i + 1)); [ $i -lt 50 ] || die "cgroup left after stop"; sleep 0.1; done
vm info g | grep -qx '  cgroup: - (made while the guest runs)' || die "info stopped: $(vm info g | grep cgroup)"
echo "pids" >"$cg/cgroup.controllers"
vm info g | grep -qx "  cgroup: - (made while the guest runs; cgroup2 at $cg lacks memory and cpu)" ||
	die "info stopped, no controllers: $(vm info g | grep cgroup)"

# Only cpu delegated (this host: memory is on cgroup v1): no memory.max.
echo "cpu pids" >"$cg/cgroup.controllers"
guest h
script sleep
vm start h >/dev/null
until_state h Running
[ ! -e "$cg/khyve/h/memory.max" ] || die "memory.max written without a memory controller"
[ "$(cat "$cg/khyve/h/cpu.weight")" = 100 ] || die "h: cpu.weight $(cat "$cg/khyve/h/cpu.weight")"
sv_log h | grep -q "no memory controller in cgroup2 at $cg/khyve (hybrid hierarchy?)" || die "h log: $(sv_log h)"
vm info h | grep -q "memory.max=- (no memory controller in cgroup2), cpu.weight=100" ||
	die "h info: $(vm info h | grep cgroup)"
vm poweroff -f h
until_state h Stopped
echo "t-cgroup: ok"
