/* stub: replaced by its owner */
#include "vm/commands.h"
int cmd_start(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_install(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_stop(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_restart(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_poweroff(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_reset(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_startall(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_stopall(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_run_supervisor(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
