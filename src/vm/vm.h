/*
 * The `vm` manager's shared state: system settings (/etc/khyve.conf or
 * $KHYVE_CONF), datastores and guests, laid out as vm-bhyve lays them out:
 *
 *   $vm_dir/.config/system.conf   datastores (datastore_list, path_NAME),
 *                                 switches (switch_list, type_NAME, ...)
 *   $vm_dir/.templates/NAME.conf  templates for `vm create -t`
 *   $vm_dir/.iso/ .img/           install media and cloud images
 *   $DATASTORE/NAME/NAME.conf     a guest's settings, its disks beside it,
 *                                 vm-bhyve.log, run.lock (the host's name)
 *
 * Messages: every error is one line "vm: ..." on stderr (vm_error()), and a
 * command that fails returns a non-zero exit status without having changed
 * any file.
 */
#ifndef KHYVE_VM_VM_H
#define KHYVE_VM_VM_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "vm/rcconf.h"

#define VM_DEFAULT_CONF "/etc/khyve.conf"
#define VM_NAME_MAX     64

/* System-wide state, loaded once per `vm` run. */
struct vm_sys {
	char conf_path[PATH_MAX];  /* /etc/khyve.conf or $KHYVE_CONF */
	struct rcconf *conf;       /* its settings (empty when the file is missing) */
	char vm_dir[PATH_MAX];     /* $vm_dir; "" when unset */
	char config_dir[PATH_MAX]; /* $vm_dir/.config */
	struct rcconf *system;     /* $vm_dir/.config/system.conf (may be empty) */
	char khyve[PATH_MAX];      /* the khyve binary: $KHYVE, beside vm, or "khyve" */
	char khyvectl[PATH_MAX];   /* the API client: $KHYVECTL, beside vm, or "khyvectl" */
	char self[PATH_MAX];       /* this vm binary (/proc/self/exe) */
};

/* A guest: NAME.conf in a datastore. */
struct vm_guest {
	char name[VM_NAME_MAX + 1];
	char datastore[VM_NAME_MAX + 1]; /* "default" for $vm_dir itself */
	char dir[PATH_MAX];              /* $datastore_path/NAME */
	char conf_path[PATH_MAX];        /* dir/NAME.conf */
	struct rcconf *conf;
};

/*
 * Read $KHYVE_CONF (default /etc/khyve.conf; a missing file is empty) and,
 * when vm_dir is set and initialised, $vm_dir/.config/system.conf.
 * 0, or -1 with a one-line reason in `err` (a malformed file, for example).
 */
int vm_sys_load(struct vm_sys *sys, char *err, size_t errlen);
void vm_sys_free(struct vm_sys *sys);

/* -1 with a message unless vm_dir is set and `vm init` has run. */
int vm_sys_require_init(const struct vm_sys *sys, char *err, size_t errlen);

/* Save sys->system to $vm_dir/.config/system.conf; 0 or -1 with `err`. */
int vm_sys_save_system(struct vm_sys *sys, char *err, size_t errlen);

/*
 * Datastores, "default" ($vm_dir) first, then datastore_list in order.
 * vm_datastore_path() gives the folder of `name`, or NULL when unknown.
 */
size_t vm_datastore_count(const struct vm_sys *sys);
const char *vm_datastore_name(const struct vm_sys *sys, size_t i);
const char *vm_datastore_path(const struct vm_sys *sys, const char *name);

/* A guest name vm-bhyve accepts: [A-Za-z0-9][A-Za-z0-9._-]*, at most 64. */
bool vm_name_valid(const char *name);

/*
 * Find guest `name` in every datastore and load its NAME.conf.  -1 with
 * "NAME: no such virtual machine" (or the parse error) in `err`.
 * Free with vm_guest_free() (also safe after a failure).
 */
int vm_guest_find(const struct vm_sys *sys, const char *name, struct vm_guest *g, char *err,
                  size_t errlen);
void vm_guest_free(struct vm_guest *g);

/* Save g->conf to g->conf_path atomically; 0 or -1 with `err`. */
int vm_guest_save(struct vm_guest *g, char *err, size_t errlen);

/*
 * Call `fn` for every guest of every datastore, in name order within a
 * datastore.  Guests whose config does not parse are passed with conf NULL.
 * Stops and returns fn's value when it is non-zero.
 */
int vm_guest_foreach(const struct vm_sys *sys, int (*fn)(struct vm_guest *g, void *arg), void *arg);

/* Print "vm: MESSAGE" (one line) on stderr; returns 1 for `return vm_error(...)`. */
int vm_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "vm: warning: MESSAGE" on stderr. */
void vm_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Commands that change VMs, switches or datastores call this first: -1 with
 * "vm: COMMAND changes VMs and needs root ..." unless we run as root or can
 * write $vm_dir (tests run unprivileged in a temporary vm_dir).
 */
int vm_require_write(const struct vm_sys *sys, const char *command);

/* Join into `out` (PATH_MAX): "a/b"; -1 when too long. */
int vm_path(char *out, const char *a, const char *b);

/*
 * Parse a vm-bhyve size ("20G", "512M", "1024" = bytes? no: as vm-bhyve and
 * truncate(1): plain numbers are bytes, suffixes K M G T binary).  0 or -1.
 */
int vm_parse_size(const char *s, unsigned long long *bytes);

#endif
