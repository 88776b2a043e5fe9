/*
 * vm: a vm-bhyve-compatible manager for khyve.  Each subcommand lives in
 * src/vm/; this file only loads the system settings and dispatches.
 */
#include <stdio.h>
#include <unistd.h>
#include <string.h>

#include "vm/commands.h"
#include "vm/migrate.h"
#include "vm/vm.h"
#include "web/web.h"

#define KHYVE_VERSION "0.1"

static int cmd_version(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc, (void)argv;
	printf("vm (khyve) %s\n", KHYVE_VERSION);
	return 0;
}

static int cmd_help(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc, (void)argv;
	vm_usage(stdout);
	return 0;
}

const struct vm_command vm_commands[] = {
    {"version", cmd_version, "version"},
    {"init", cmd_init, "init"},
    {"switch", cmd_switch,
     "switch list|create|info|add|remove|destroy|vlan|address|nat|private ..."},
    {"datastore", cmd_datastore, "datastore list|add|remove ..."},
    {"list", cmd_list, "list [-r] [-v] [--json]"},
    {"info", cmd_info, "info [name...]"},
    {"create", cmd_create,
     "create [-d datastore] [-t template] [-s size] [-m memory] [-c cpus] [-i image] [-C -k "
     "pubkey] name"},
    {"install", cmd_install, "install [-fdi] name iso"},
    {"start", cmd_start, "start [-fdin] name..."},
    {"suspend", cmd_suspend, "suspend name..."},
    {"migrate", cmd_migrate, "migrate [-l] [-k] name host"},
    {"stop", cmd_stop, "stop name..."},
    {"restart", cmd_restart, "restart name"},
    {"poweroff", cmd_poweroff, "poweroff [-f] name"},
    {"reset", cmd_reset, "reset [-f] name"},
    {"startall", cmd_startall, "startall"},
    {"stopall", cmd_stopall, "stopall"},
    {"console", cmd_console, "console name [com1|com2]"},
    {"configure", cmd_configure, "configure name"},
    {"rename", cmd_rename, "rename name new-name"},
    {"add", cmd_add, "add -d disk|network [-t file] [-s size|switch] name"},
    {"destroy", cmd_destroy, "destroy [-f] name[@snapshot]"},
    {"get", cmd_get, "get all|setting..."},
    {"set", cmd_set, "set setting=value..."},
    {"iso", cmd_iso, "iso [url|file]"},
    {"img", cmd_img, "img [url|file]"},
    {"clone", cmd_clone, "clone name[@snapshot] new-name"},
    {"import", cmd_import, "import [-d dir] file [name]"},
    {"snapshot", cmd_snapshot, "snapshot [-f] [-m] name[@snapshot]"},
    {"rollback", cmd_rollback, "rollback [-r] name@snapshot"},
    {"web", cmd_web, "web [-l addr:port] [-c cert -k key]"},
    {"help", cmd_help, "help"},
    {"_run", cmd_run_supervisor, NULL},
    {"_migrate-check", cmd_migrate_check, NULL},
    {"_migrate-receive", cmd_migrate_receive, NULL},
    {"_migrate-unpack", cmd_migrate_unpack, NULL},
    {NULL, NULL, NULL},
};

const struct vm_command *vm_command_find(const char *name)
{
	for (const struct vm_command *c = vm_commands; c->name; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

void vm_usage(FILE *out)
{
	fprintf(out, "usage: vm COMMAND [ARGS]  (settings: $KHYVE_CONF or %s)\n", VM_DEFAULT_CONF);
	for (const struct vm_command *c = vm_commands; c->name; c++)
		if (c->usage)
			fprintf(out, "   vm %s\n", c->usage);
}

int main(int argc, char **argv)
{
	const struct vm_command *cmd;
	struct vm_sys sys;
	char err[1024];
	int rc;

	if (argc < 2) {
		vm_usage(stderr);
		return 1;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
		return cmd_help(NULL, 0, NULL);
	if (!strcmp(argv[1], "--version"))
		return cmd_version(NULL, 0, NULL);
	/* Commands print their own one-line usage on a bad option. */
	opterr = 0;
	cmd = vm_command_find(argv[1]);
	if (!cmd)
		return vm_error("%s: unknown command (vm help lists them)", argv[1]);
	if (vm_sys_load(&sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	rc = cmd->run(&sys, argc - 1, argv + 1);
	vm_sys_free(&sys);
	return rc;
}
