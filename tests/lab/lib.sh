# Shared helpers for the nested lab scripts (sourced, not run).
# POSIX sh; callers set -eu themselves.

lab_die() {
	echo "lab: $*" >&2
	exit 125
}

# Newest kernel in /boot that has a matching /lib/modules/<ver> directory.
# LAB_KVER overrides.
lab_kver() {
	if [ -n "${LAB_KVER:-}" ]; then
		[ -r "/boot/vmlinuz-$LAB_KVER" ] && [ -d "/lib/modules/$LAB_KVER" ] ||
			lab_die "LAB_KVER=$LAB_KVER: no /boot/vmlinuz-$LAB_KVER or /lib/modules/$LAB_KVER"
		echo "$LAB_KVER"
		return 0
	fi
	for k in /boot/vmlinuz-*; do
		[ -e "$k" ] || continue
		v=${k#/boot/vmlinuz-}
		[ -d "/lib/modules/$v" ] && echo "$v"
	done | sort -V | tail -n 1
}

# lab_mod_resolve KVER NAME...
# Print the modules.dep paths (relative to /lib/modules/KVER) of the named
# modules and everything they depend on, in a valid load order, each once.
# Names may use '-' or '_'.  Built-in modules are skipped with a note on
# stderr; an unknown name is an error.
lab_mod_resolve() {
	_kv=$1
	shift
	_md=/lib/modules/$_kv
	[ -r "$_md/modules.dep" ] || lab_die "no $_md/modules.dep"
	awk -v want="$*" -v builtin="$_md/modules.builtin" '
		function norm(p,   b) {
			b = p
			sub(/.*\//, "", b)
			sub(/\.ko(\.[a-z]+)?$/, "", b)
			gsub(/-/, "_", b)
			return b
		}
		function emit(p) {
			if (!(p in seen)) { seen[p] = 1; print p }
		}
		BEGIN {
			while ((getline l < builtin) > 0) isbuiltin[norm(l)] = 1
		}
		{
			m = $1
			sub(/:$/, "", m)
			n = norm(m)
			path[n] = m
			deps[n] = ""
			for (i = 2; i <= NF; i++) deps[n] = deps[n] " " $i
		}
		END {
			nw = split(want, w, " ")
			for (j = 1; j <= nw; j++) {
				n = norm(w[j])
				if (!(n in path)) {
					if (n in isbuiltin) {
						print "lab: module " w[j] " is built in, skipped" > "/dev/stderr"
						continue
					}
					print "lab: no module " w[j] " in modules.dep" > "/dev/stderr"
					bad = 1
					continue
				}
				# modules.dep lists the transitive dependencies; they load
				# from the last to the first.
				nd = split(deps[n], d, " ")
				for (i = nd; i >= 1; i--) emit(d[i])
				emit(path[n])
			}
			exit bad
		}' "$_md/modules.dep"
}

# lab_mod_install KVER STAGE RELPATH...
# Copy modules into STAGE/lib/modules/KVER/, decompressing .xz/.zst/.gz so
# that busybox insmod can load them; print the installed paths (relative to
# STAGE, with a leading /) one per line.
lab_mod_install() {
	_kv=$1
	_st=$2
	shift 2
	for _m in "$@"; do
		_src=/lib/modules/$_kv/$_m
		_dst=$_st/lib/modules/$_kv/${_m%.ko*}.ko
		mkdir -p "${_dst%/*}"
		case $_m in
		*.ko) cp "$_src" "$_dst" ;;
		*.ko.xz) xz -dc "$_src" >"$_dst" ;;
		*.ko.zst) zstd -qdc "$_src" >"$_dst" ;;
		*.ko.gz) gzip -dc "$_src" >"$_dst" ;;
		*) lab_die "unknown module format: $_src" ;;
		esac
		echo "${_dst#"$_st"}"
	done
}

# lab_extract_vmlinux BZIMAGE OUT: unpack the ELF kernel from an XZ-compressed
# bzImage (Debian's); fails if there is none.
lab_extract_vmlinux() {
	_off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$1" | head -n 1 | cut -d: -f1)
	[ -n "$_off" ] || return 1
	# xz complains about the data after the stream; the ELF check decides.
	tail -c +$((_off + 1)) "$1" | xz -dc >"$2" 2>/dev/null
	[ "$(head -c 4 "$2" | od -An -c | tr -d ' ')" = '177ELF' ]
}

# lab_busybox STAGE: static busybox in STAGE/bin with a link per applet.
lab_busybox() {
	_bb=$(command -v busybox || true)
	[ -n "$_bb" ] || _bb=/bin/busybox
	mkdir -p "$1/bin"
	cp "$_bb" "$1/bin/busybox"
	for _a in $("$1/bin/busybox" --list); do
		[ "$_a" = busybox ] || ln -sf busybox "$1/bin/$_a"
	done
	ln -sf bin "$1/sbin"
}

# lab_cpio_newc_entry NAME MODE_OCTAL RDEVMAJ RDEVMIN
# One header-only entry of a "newc" cpio archive (directory or device node).
lab_cpio_newc_entry() {
	_len=$((${#1} + 1))
	printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
		"$_lab_ino" "$((0$2))" 0 0 1 0 0 0 0 "$3" "$4" "$_len" 0
	printf '%s\0' "$1"
	# header (110) + name must end on a 4-byte boundary
	_pad=$(((4 - (110 + _len) % 4) % 4))
	while [ "$_pad" -gt 0 ]; do printf '\0'; _pad=$((_pad - 1)); done
	_lab_ino=$((_lab_ino + 1))
}

# lab_cpio_console: a small cpio archive holding /dev and /dev/console, to
# append to an initramfs built without root rights, so that the kernel can
# open an initial console for /init.
lab_cpio_console() {
	_lab_ino=1
	lab_cpio_newc_entry dev 040755 0 0
	lab_cpio_newc_entry dev/console 020600 5 1
	lab_cpio_newc_entry TRAILER!!! 0 0 0
}

# lab_cpio_pack STAGE OUT: archive STAGE (owned by root) plus /dev/console
# into OUT; gzip when OUT ends in .gz.
lab_cpio_pack() {
	_tmp=$2.tmp.$$
	{
		(cd "$1" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet)
		lab_cpio_console
	} >"$_tmp.raw"
	case $2 in
	*.gz) gzip -6 -n <"$_tmp.raw" >"$_tmp" && rm -f "$_tmp.raw" ;;
	*) mv "$_tmp.raw" "$_tmp" ;;
	esac
	mv -f "$_tmp" "$2"
}

# lab_q ARG: print ARG quoted for a POSIX shell (single quotes, any bytes).
lab_q() {
	_s=$1
	_o=
	while :; do
		case $_s in
		*\'*)
			_o=$_o${_s%%\'*}"'\\''"
			_s=${_s#*\'}
			;;
		*) break ;;
		esac
	done
	printf "'%s%s'" "$_o" "$_s"
}
