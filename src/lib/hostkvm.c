#include "lib/hostkvm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

static enum host_kvm probe_files(const char *dev)
{
	if (device_missing(dev))
		return HOST_KVM_NONE;
	if (access("/sys/module/kvm_pvm", F_OK) == 0 ||
	    (!cpu_has_flag_or_unknown("vmx") && !cpu_has_flag_or_unknown("svm")))
		return HOST_KVM_PVM;
	return HOST_KVM_HARDWARE;
}

int host_kvm_probe(enum host_kvm *kind)
{
	/* The answer per device path is kept: after the jail (src/run/jail.c)
	 * neither the device nor /proc and /sys can be opened again. */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static char cached_dev[256];
	static enum host_kvm cached_kind;
	const char *forced = getenv("KHYVE_HOST_KVM");
	const char *dev = host_kvm_device();

	*kind = HOST_KVM_HARDWARE;
	if (forced != NULL && *forced != '\0')
		return kind_from_env(forced, kind);
	pthread_mutex_lock(&lock);
	if (strcmp(cached_dev, dev) != 0) {
		cached_kind = probe_files(dev);
		snprintf(cached_dev, sizeof(cached_dev), "%s", dev);
	}
	*kind = cached_kind;
	pthread_mutex_unlock(&lock);
	return 0;
}

void host_kvm_message(char *buf, size_t len, enum host_kvm kind, const char *what)
{
	const char *why = kind == HOST_KVM_NONE ? "no KVM device: no VMX or SVM here"
	                                        : "PVM/no VMX or SVM: guest code is emulated";

	snprintf(buf, len, "this host's KVM cannot run %s (%s); see README: nested lab", what, why);
}
