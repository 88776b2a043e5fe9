#!/bin/sh
# Test users for vm web's log-in, without touching the host: inside a
# private mount namespace (the caller runs `unshare --mount --propagation
# private`; this refuses to run in the host's), copies of /etc/passwd,
# /etc/shadow and /etc/group with two users appended are bind-mounted over
# the originals:
#   khyveadm   group sudo   (vm web: admin)
#   khyveview  group khyve  (vm web: viewer; the group line is added when
#                            the host has no group khyve)
# with the passwords given, hashed by `openssl passwd -6` (pam_unix reads
# SHA-512 crypt).  /etc/pam.d is replaced the same way by a copy holding
# the PAM service khyve (share/pam.d/khyve: common-auth, common-account).
# The mounts go away with the namespace.
#   tests/web/users.sh DIR ADMIN_PASSWORD VIEWER_PASSWORD
#     DIR: an empty scratch directory for the copies
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -eq 3 ] || { echo "usage: $0 DIR ADMIN_PASSWORD VIEWER_PASSWORD" >&2; exit 2; }
dir=$1 admin_pw=$2 viewer_pw=$3
die() { echo "users.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root"
# Bind mounts in the caller's namespace would show the test users to the
# whole machine: this runs only in a namespace other than
# $KHYVE_OUTER_MNTNS, the caller's before its unshare (readlink
# /proc/self/ns/mnt there; pid 1's may be either under unshare --pid).
ns=$(readlink /proc/self/ns/mnt)
[ -n "${KHYVE_OUTER_MNTNS:-}" ] && [ "$ns" != "$KHYVE_OUTER_MNTNS" ] ||
	die "not in a private mount namespace: run it under unshare --mount --propagation private" \
		"with KHYVE_OUTER_MNTNS set to the namespace outside"
command -v openssl >/dev/null || die "no openssl"
getent passwd khyveadm >/dev/null || getent passwd khyveview >/dev/null &&
	die "users khyveadm/khyveview exist already"
for f in passwd shadow group; do
	cp -p "/etc/$f" "$dir/$f" || die "cannot copy /etc/$f"
done

# free_id FILE: the first id from 61000 that FILE's third field lacks.
free_id() {
	awk -F: -v want=61000 '{ used[$3] = 1 } END { while (want in used) want++; print want }' "$1"
}
# add_member GROUP USER: USER appended to GROUP's member list in the copy.
add_member() {
	awk -F: -v OFS=: -v g="$1" -v u="$2" '$1 == g { $4 = $4 == "" ? u : $4 "," u } { print }' \
		"$dir/group" >"$dir/group.new" && cat "$dir/group.new" >"$dir/group" && rm -f "$dir/group.new"
}

grep -q '^sudo:' "$dir/group" || echo "sudo:x:$(free_id "$dir/group"):" >>"$dir/group"
grep -q '^khyve:' "$dir/group" || echo "khyve:x:$(free_id "$dir/group"):" >>"$dir/group"
uid=$(free_id "$dir/passwd")
gid=$(getent group nogroup | cut -d: -f3)
gid=${gid:-65534}
days=$(($(date +%s) / 86400 - 1))
for user in khyveadm khyveview; do
	case $user in
	khyveadm) pw=$admin_pw group=sudo ;;
	*) pw=$viewer_pw group=khyve ;;
	esac
	hash=$(printf '%s\n' "$pw" | openssl passwd -6 -stdin) || die "openssl passwd -6 failed"
	echo "$user:x:$uid:$gid:khyve web test user:/nonexistent:/usr/sbin/nologin" >>"$dir/passwd"
	echo "$user:$hash:$days:0:99999:7:::" >>"$dir/shadow"
	add_member "$group" "$user"
	uid=$((uid + 1))
done
chmod 0640 "$dir/shadow"

# PAM: the service vm web asks for (A1 installs it as /etc/pam.d/khyve).
mkdir "$dir/pam.d" && cp -a /etc/pam.d/. "$dir/pam.d/" || die "cannot copy /etc/pam.d"
if [ -f "$top/share/pam.d/khyve" ]; then
	cp "$top/share/pam.d/khyve" "$dir/pam.d/khyve"
else
	printf '@include common-auth\n@include common-account\n' >"$dir/pam.d/khyve"
fi

for f in passwd shadow group pam.d; do
	mount --bind "$dir/$f" "/etc/$f" || die "cannot bind-mount $dir/$f over /etc/$f"
done
# A name service cache would answer without the copies.
id khyveadm 2>/dev/null | grep -q '(sudo)' || die "id khyveadm: $(id khyveadm 2>&1), no group sudo"
id khyveview 2>/dev/null | grep -q '(khyve)' || die "id khyveview: $(id khyveview 2>&1), no group khyve"
[ -f /etc/pam.d/khyve ] || die "no /etc/pam.d/khyve after the bind mount"
exit 0
