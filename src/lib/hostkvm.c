#include "lib/hostkvm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *host_kvm_device(void)
{
	const char *p = getenv("KHYVE_KVM_DEV");

	return (p != NULL && *p != '\0') ? p : "/dev/kvm";
}

static bool device_missing(const char *dev)
{
	int fd = open(dev, O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		return false;
	}
	/* EACCES and the like: the device is there, KVM's error will say why. */
	return errno == ENOENT || errno == ENODEV || errno == ENXIO;
}

/* True when the first "flags" line of /proc/cpuinfo has `flag`; also true
 * when the file cannot be read, so that only a clear "no" counts. */
static bool cpu_has_flag_or_unknown(const char *flag)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	bool found = true;

	if (f == NULL)
		return true;
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *tok;

		if (strncmp(line, "flags", 5) != 0)
			continue;
		found = false;
		for (tok = strtok_r(strchr(line, ':'), ": \t\n", &save); tok != NULL && !found;
		     tok = strtok_r(NULL, " \t\n", &save))
			found = strcmp(tok, flag) == 0;
		break;
	}
	free(line);
	fclose(f);
	return found;
}

static int kind_from_env(const char *v, enum host_kvm *kind)
{
	static const char *const names[] = {"hardware", "pvm", "none"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(v, names[i]) == 0) {
			*kind = (enum host_kvm)i;
			return 0;
		}
	return -1;
}

int host_kvm_probe(enum host_kvm *kind)
{
	const char *forced = getenv("KHYVE_HOST_KVM");

	*kind = HOST_KVM_HARDWARE;
	if (forced != NULL && *forced != '\0')
		return kind_from_env(forced, kind);
	if (device_missing(host_kvm_device()))
		*kind = HOST_KVM_NONE;
	else if (access("/sys/module/kvm_pvm", F_OK) == 0 ||
	         (!cpu_has_flag_or_unknown("vmx") && !cpu_has_flag_or_unknown("svm")))
		*kind = HOST_KVM_PVM;
	return 0;
}

void host_kvm_message(char *buf, size_t len, enum host_kvm kind, const char *what)
{
	const char *why = kind == HOST_KVM_NONE ? "no KVM device: no VMX or SVM here"
	                                        : "PVM/no VMX or SVM: guest code is emulated";

	snprintf(buf, len, "this host's KVM cannot run %s (%s); see README: nested lab", what, why);
}
