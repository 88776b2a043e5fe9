# Sourced by tests/vm/t-*.sh: a scratch KHYVE_CONF and vm_dir, and helpers.
# $VM is the vm binary under test, $TOP the repository.
set -eu
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export KHYVE_CONF=$scratch/khyve.conf
# No test touches the host's cgroups: a missing folder means "no cgroup2"
# (tests/vm/t-cgroup.sh makes one that stands in for cgroupfs).
export KHYVE_CGROUP_ROOT=$scratch/cgroup
vm_dir=$scratch/vms
echo "vm_dir=\"$vm_dir\"" >"$KHYVE_CONF"
vm() { "$VM" "$@"; }
die() { echo "FAIL: $*" >&2; exit 1; }
# expect_fail CMD...: CMD must exit non-zero with exactly one line on stderr.
expect_fail() {
	if "$@" >"$scratch/out" 2>"$scratch/err"; then die "succeeded: $*"; fi
	[ "$(wc -l <"$scratch/err")" -eq 1 ] || { cat "$scratch/err" >&2; die "not one line: $*"; }
	grep -q '^vm: ' "$scratch/err" || die "no 'vm:' prefix: $(cat "$scratch/err")"
}
# snapshot_tree / same_tree: prove a failing command changed no file.
snapshot_tree() { (cd "$scratch" && find . -type f -exec sha256sum {} + | sort) >"$scratch/.tree"; }
same_tree() {
	(cd "$scratch" && find . -type f ! -name .tree ! -name .tree2 ! -name out ! -name err \
		-exec sha256sum {} + | sort) >"$scratch/.tree2"
	grep -v ' \./\(\.tree\|\.tree2\|out\|err\)$' "$scratch/.tree" | diff - "$scratch/.tree2" >&2 ||
		die "files changed: $*"
}
# on_tty CMD: run the shell command line CMD with a terminal (a pty from
# script(1)) as its stdin, which gets what on_tty's stdin holds: late, as
# input that comes before script(1) has set up the terminal may be lost.
on_tty() { { sleep 0.5; cat; } | command script -qec "$*" /dev/null; }
