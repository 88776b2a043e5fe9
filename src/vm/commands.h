/*
 * `vm` subcommands.  Each takes the arguments after the command name
 * (argv[0] is the command itself, getopt-ready) and returns the exit status:
 * 0 on success, 1 after printing one "vm: ..." line.
 */
#ifndef KHYVE_VM_COMMANDS_H
#define KHYVE_VM_COMMANDS_H

#include "vm/vm.h"

typedef int (*vm_command_fn)(struct vm_sys *sys, int argc, char **argv);

struct vm_command {
	const char *name;
	vm_command_fn run;
	const char *usage; /* one line, shown by `vm help` */
};

/* The command table (terminated by a NULL name) and lookup by name. */
extern const struct vm_command vm_commands[];
const struct vm_command *vm_command_find(const char *name);
void vm_usage(FILE *out);

/* cmd_guest.c: init, create, destroy, rename, get, set, configure, add, info, list, install */
int cmd_init(struct vm_sys *sys, int argc, char **argv);
int cmd_create(struct vm_sys *sys, int argc, char **argv);
int cmd_destroy(struct vm_sys *sys, int argc, char **argv);
int cmd_rename(struct vm_sys *sys, int argc, char **argv);
int cmd_get(struct vm_sys *sys, int argc, char **argv);
int cmd_set(struct vm_sys *sys, int argc, char **argv);
int cmd_configure(struct vm_sys *sys, int argc, char **argv);
int cmd_add(struct vm_sys *sys, int argc, char **argv);
int cmd_list(struct vm_sys *sys, int argc, char **argv);
int cmd_info(struct vm_sys *sys, int argc, char **argv);

/* cmd_run.c: start, stop, restart, poweroff, reset, install, startall, stopall, _run */
int cmd_start(struct vm_sys *sys, int argc, char **argv);
int cmd_install(struct vm_sys *sys, int argc, char **argv);
int cmd_stop(struct vm_sys *sys, int argc, char **argv);
int cmd_restart(struct vm_sys *sys, int argc, char **argv);
int cmd_poweroff(struct vm_sys *sys, int argc, char **argv);
int cmd_reset(struct vm_sys *sys, int argc, char **argv);
int cmd_startall(struct vm_sys *sys, int argc, char **argv);
int cmd_stopall(struct vm_sys *sys, int argc, char **argv);
int cmd_run_supervisor(struct vm_sys *sys, int argc, char **argv);

/* suspend.c: suspend (resume is vm start of a Suspended guest) */
int cmd_suspend(struct vm_sys *sys, int argc, char **argv);

/* console.c */
int cmd_console(struct vm_sys *sys, int argc, char **argv);

/* cmd_switch.c */
int cmd_switch(struct vm_sys *sys, int argc, char **argv);

/* cmd_datastore.c, cmd_iso_img.c, cmd_snapshot.c (snapshot, rollback), cmd_clone.c;
 * their shared helpers are in storage.c */
int cmd_datastore(struct vm_sys *sys, int argc, char **argv);
int cmd_iso(struct vm_sys *sys, int argc, char **argv);
int cmd_img(struct vm_sys *sys, int argc, char **argv);
int cmd_clone(struct vm_sys *sys, int argc, char **argv);
int cmd_snapshot(struct vm_sys *sys, int argc, char **argv);
int cmd_rollback(struct vm_sys *sys, int argc, char **argv);

/* cmd_import.c (import.h): a Proxmox VE or libvirt guest */
int cmd_import(struct vm_sys *sys, int argc, char **argv);

#endif
