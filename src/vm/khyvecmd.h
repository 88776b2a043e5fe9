/*
 * From a guest's vm-bhyve config to the khyve command line (what vm-bhyve's
 * vm-run does for bhyve): loader, cpu topology, memory, disks, networks,
 * com ports, bhyve_options.  Pure apart from reading files it is told
 * about, so `vm start -n NAME` can print the result and unit tests can
 * check it.
 */
#ifndef KHYVE_VM_KHYVECMD_H
#define KHYVE_VM_KHYVECMD_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "vm/vm.h"

#define VM_MAX_NICS 32

/* A growable NULL-terminated argv; free with argv_free(). */
struct argv {
	char **v;
	size_t n, cap;
};
int argv_add(struct argv *a, const char *s);
int argv_addf(struct argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int argv_vaddf(struct argv *a, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
void argv_free(struct argv *a);
/* The argv as one shell-quoted line (malloc'd), for `vm start -n` and logs. */
char *argv_to_shell(const struct argv *a);

/* Host-side names chosen at start time for each networkN (by N). */
struct vm_taps {
	size_t n;                   /* networks 0..n-1 */
	char name[VM_MAX_NICS][16]; /* tap interface of networkN ("" = none) */
};

/*
 * The graphical console of a guest with graphics="yes" (khyve's fbuf, a
 * VNC server), as vm_khyve_command() chose it.
 */
struct vm_vnc {
	char addr[80]; /* "127.0.0.1:5900", "[::1]:5901"; "" without graphics */
	unsigned port; /* the TCP port in addr; 0 without graphics */
	bool wait;     /* khyve waits for the first VNC client before the guest runs */
};

struct vm_start_opts {
	bool install;               /* `vm install`: boot from `iso` */
	const char *iso;            /* install medium (absolute path) or NULL */
	const struct vm_taps *taps; /* may be NULL (dry run: names are predicted) */
	const char *grub_image;     /* loader=grub: the boot image made for this run */
	bool foreground;            /* `vm start -i`/console=tmux: com1 on stdio */
	bool settings_only;         /* check the settings, not the host's files (configure) */
	unsigned vnc_port;          /* graphics: this port (a restart keeps its port), 0: choose */
	struct vm_vnc *vnc;         /* where to say where the VNC server listens, or NULL */
};

/*
 * Build the khyve command line for guest `g`: argv[0] is sys->khyve, the
 * last element the guest name.  0, or -1 with a one-line reason in `err`
 * for a config khyve cannot run (bhyveload, a bad value in a key such as
 * cpu or memory, a missing disk).  Unknown keys are warned about once.
 * graphics="yes" adds fbuf in slot 29 and (xhci_mouse) xhci in slot 30;
 * without opts->vnc_port the VNC port is graphics_port, else the first
 * free one from 5900 (see graphics.h).
 */
int vm_khyve_command(const struct vm_sys *sys, const struct vm_guest *g,
                     const struct vm_start_opts *opts, struct argv *out, char *err, size_t errlen);

/*
 * Check g's settings as vm_khyve_command() would (cpu, memory, loader,
 * disk and network types ...) without looking for its disks, firmware or
 * GRUB image, which need not exist while the config is edited.  0, or -1
 * with "NAME.conf: KEY=\"VALUE\": why" in `err`.
 */
int vm_check_settings(const struct vm_sys *sys, const struct vm_guest *g, char *err, size_t errlen);

/*
 * loader="grub": write a SeaBIOS-bootable GRUB image for this run into
 * `out` (PATH_MAX) whose script is the guest's grub_run* (or, when
 * installing, grub_install*) lines.  0, or -1 with `err`.
 */
int vm_grub_image(const struct vm_sys *sys, const struct vm_guest *g, bool install, const char *iso,
                  char *out, char *err, size_t errlen);

/*
 * The GRUB script (grub.cfg text) vm_grub_image() puts on the image, with
 * grub-bhyve's device names mapped to GRUB's on khyve (see grub.c).  The
 * image must be attached as `-s 2,ahci-cd,IMAGE` and an .iso install
 * medium as ahci-cd at install_slot.  malloc'd (caller frees), or NULL
 * with a one-line reason in `err` (a bad grub_run_partition, say).
 */
char *vm_grub_script(const struct vm_guest *g, bool install, const char *iso, char *err,
                     size_t errlen);

#endif
