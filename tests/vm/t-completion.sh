# The bash completion files load in bash and complete commands, guest and
# switch names (vm) and flags, -s emulations and -l devices (khyve).
. "$TOP/tests/vm/lib.sh"
command -v bash >/dev/null || { echo "t-completion: no bash, skipped"; exit 0; }
vm init
mkdir -p "$vm_dir/alpha" "$vm_dir/beta"
printf 'loader="bios"\n' >"$vm_dir/alpha/alpha.conf"
printf 'loader="bios"\n' >"$vm_dir/beta/beta.conf"
# complete FILE FUNCTION WORD...: COMPREPLY for the last word.
complete_words() {
	file=$1 fn=$2
	shift 2
	PATH=$(dirname "$VM"):$PATH bash -c '
		file=$1 fn=$2
		shift 2
		. "$file"
		COMP_WORDS=("$@")
		COMP_CWORD=$(($# - 1))
		"$fn"
		echo "${COMPREPLY[*]}"' bash "$file" "$fn" "$@"
}
vmc() { complete_words "$TOP/share/completion/vm" _vm vm "$@"; }
khc() { complete_words "$TOP/share/completion/khyve" _khyve "$@"; }
[ "$(vmc st)" = "start stop startall stopall" ] || die "vm st: $(vmc st)"
[ "$(vmc su)" = "suspend" ] || die "vm su: $(vmc su)"
[ "$(vmc imp)" = "import" ] || die "vm imp: $(vmc imp)"
mkdir "$scratch/pve"
touch "$scratch/pve/100.conf"
[ "$(vmc import -d "$scratch/pv")" = "$scratch/pve" ] || die "vm import -d: $(vmc import -d "$scratch/pv")"
[ "$(vmc import "$scratch/pve/1")" = "$scratch/pve/100.conf" ] || die "vm import FILE"
[ "$(vmc mi)" = "migrate" ] || die "vm mi: $(vmc mi)"
[ "$(vmc migrate -)" = "-l -k" ] || die "vm migrate -: $(vmc migrate -)"
[ "$(vmc migrate -l al)" = "alpha" ] || die "vm migrate -l al: $(vmc migrate -l al)"
[ "$(vmc start a)" = "alpha" ] || die "vm start a: $(vmc start a)"
[ "$(vmc destroy '')" = "alpha beta" ] || die "vm destroy: $(vmc destroy '')"
[ "$(vmc switch cr)" = "create" ] || die "vm switch cr: $(vmc switch cr)"
[ "$(vmc list -)" = "-r -v --json" ] || die "vm list -: $(vmc list -)"
[ "$(vmc snapshot -)" = "-f -m" ] || die "vm snapshot -: $(vmc snapshot -)"
[ "$(vmc snapshot -m b)" = "beta" ] || die "vm snapshot -m b: $(vmc snapshot -m b)"
touch "$vm_dir/.iso/debian.iso"
[ "$(vmc install alpha d)" = "debian.iso" ] || die "vm install alpha d: $(vmc install alpha d)"
[ "$(khc khyve -s 4,virtio-bl)" = "4,virtio-blk" ] || die "khyve -s 4,virtio-bl: $(khc khyve -s 4,virtio-bl)"
[ "$(khc khyve -s 4,virtio-ba)" = "4,virtio-balloon" ] || die "khyve -s 4,virtio-ba: $(khc khyve -s 4,virtio-ba)"
khc khyve -l '' | grep -q 'com1' || die "khyve -l: $(khc khyve -l '')"
khc khyve - | grep -q -- '-s' || die "khyve -: $(khc khyve -)"
ctc() { complete_words "$TOP/share/completion/khyvectl" _khyvectl khyvectl "$@"; }
[ "$(ctc --get)" = "--get-stats" ] || die "khyvectl --get: $(ctc --get)"
[ "$(ctc --vm=al)" = "--vm=alpha" ] || die "khyvectl --vm=al: $(ctc --vm=al)"
echo "t-completion: ok"
