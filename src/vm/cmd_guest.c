/* stub: replaced by its owner */
#include "vm/commands.h"
int cmd_init(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_create(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_destroy(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_rename(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_get(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_set(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_configure(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_add(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_list(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
int cmd_info(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
