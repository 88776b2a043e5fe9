/* stub: replaced by its owner */
#include "vm/commands.h"
int cmd_switch(struct vm_sys *sys, int argc, char **argv)
{
	(void)sys, (void)argc;
	return vm_error("%s: not implemented yet", argv[0]);
}
