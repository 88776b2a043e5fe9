# vm configure checks the edited values as vm start would (cpu, memory,
# loader ...) before saving: one line, the config unchanged, the edit kept
# in NAME.conf.edit.  (vm set only takes system settings; it checks them,
# see t-guest.sh.)
. "$TOP/tests/vm/lib.sh"
vm init
mkdir -p "$vm_dir/c"
printf 'loader="bios"\ncpu="2"\nmemory="512M"\n' >"$vm_dir/c/c.conf"
conf=$vm_dir/c/c.conf
for edit in 's/^cpu=.*/cpu="banana"/' 's/^memory=.*/memory="lots"/' 's/^loader=.*/loader="floppy"/'; do
	rm -f "$conf.edit"
	before=$(sha256sum <"$conf")
	EDITOR="sed -i '$edit'" expect_fail vm configure c
	grep -q 'not saved; your edit is kept in' "$scratch/err" || die "$edit: $(cat "$scratch/err")"
	[ "$(sha256sum <"$conf")" = "$before" ] || die "$edit: c.conf changed"
	[ -f "$conf.edit" ] || die "$edit: the edit was not kept"
done
grep -q '^cpu="2"$' "$conf" || die "cpu changed"
# A good edit is saved even though disk0 does not exist yet.
rm -f "$conf.edit"
EDITOR="sed -i 's/^cpu=.*/cpu=\"4\"/; \$a disk0_type=\"virtio-blk\"\ndisk0_name=\"disk0.img\"'" vm configure c
grep -q '^cpu="4"$' "$conf" || die "good edit not saved: $(cat "$conf")"
[ ! -e "$conf.edit" ] || die "edit left after saving"
echo "t-configure: ok"
