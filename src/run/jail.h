/*
 * The jail: after every device, back end and file is open, khyve gives up
 * what it no longer needs, in the way Firecracker's jailer confines
 * firecracker: its own mount namespace whose root is an empty read-only
 * tmpfs (pivot_root(2), chroot(2) where the root is an initramfs), no
 * supplementary groups, an unprivileged user (when started as root), no
 * capabilities in any set, and PR_SET_NO_NEW_PRIVS.
 *
 * Configuration (read from the config tree):
 *   sandbox=off          no jail at all (the seccomp filters' switch too;
 *                        read as sandbox.enable where the tree files it so)
 *   sandbox.user=NAME    the user to become when started as root; default
 *                        `khyve` where it exists (make install creates it),
 *                        else `nobody`
 *
 * A non-root khyve keeps its user and mounts; it still sets NO_NEW_PRIVS.
 */
#ifndef KHYVE_JAIL_H
#define KHYVE_JAIL_H

#include <stddef.h>

/*
 * First half, while khyve has one thread and has opened nothing: reads the
 * sandbox options, looks the user up (before /etc disappears), sets
 * NO_NEW_PRIVS, empties the bounding, ambient and inheritable capability
 * sets and enters a private mount namespace.  These are per-thread
 * attributes, so doing them before any thread exists gives them to every
 * thread khyve makes.  Effective capabilities stay, so devices still open.
 * Returns 0, or -1 with a one-line reason in `err` (bad option, unknown
 * user, a kernel refusing a step as root).
 */
int jail_prepare(char *err, size_t errlen);

/*
 * Second half, after every file, device, socket, pty and tap is open and
 * before the vCPUs run: pivots into an empty read-only tmpfs, then drops to
 * the sandbox user and clears every capability (glibc applies setresuid and
 * setgroups to all threads).  Nothing opened by path works after this: what
 * khyve needs later must be open before.  Returns 0 (also when the jail is
 * off), or -1 with the reason in `err`.
 */
int jail_enter(char *err, size_t errlen);

#endif
