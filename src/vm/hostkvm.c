#include "vm/hostkvm.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lib/hostkvm.h"
#include "vm/rcconf.h"

/* The loaders whose guests run only where KVM runs guest code in hardware. */
static bool needs_hardware(const char *loader)
{
	return !strcmp(loader, "linux") || !strncmp(loader, "uefi", 4);
}

int vm_check_host_kvm(const struct vm_guest *g)
{
	const char *loader = rcconf_get_default(g->conf, "loader", "");
	char what[160], line[320];
	enum host_kvm kind;

	if (host_kvm_probe(&kind) < 0)
		return vm_error("KHYVE_HOST_KVM: want hardware, pvm or none");
	if (kind == HOST_KVM_HARDWARE || !needs_hardware(loader))
		return 0;
	snprintf(what, sizeof(what), "loader=\"%s\" guests such as %s", loader, g->name);
	host_kvm_message(line, sizeof(line), kind, what);
	return vm_error("%s", line);
}

void vm_note_host_kvm(FILE *out)
{
	char line[320];
	enum host_kvm kind;

	if (host_kvm_probe(&kind) < 0 || kind == HOST_KVM_HARDWARE)
		return;
	if (kind == HOST_KVM_PVM) {
		fprintf(out, "  * note: this host's KVM (PVM/no VMX or SVM) runs firmware slowly "
		             "and cannot run Linux kernels or UEFI; see README: nested lab\n");
		return;
	}
	host_kvm_message(line, sizeof(line), kind, "guests");
	fprintf(out, "  * note: %s\n", line);
}
