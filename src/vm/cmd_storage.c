/* stub: replaced by its owner */
#include "vm/commands.h"
int cmd_datastore(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_iso(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_img(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_clone(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_snapshot(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_rollback(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
