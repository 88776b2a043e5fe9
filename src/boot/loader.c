#include "boot/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot/linux.h"
#include "boot/pvh.h"
#include "lib/file.h"

int loader_write_cmdline(const struct guest_mem *gm, const char *cmdline, size_t max, char *err,
                         size_t errlen)
{
	size_t len = cmdline ? strlen(cmdline) : 0;

	if (max > LINUX_CMDLINE_MAX - 1)
		max = LINUX_CMDLINE_MAX - 1;
	if (len > max) {
		snprintf(err, errlen, "kernel command line is %zu bytes; this kernel takes %zu",
		         len, max);
		return -1;
	}
	if (gmem_write(gm, LINUX_CMDLINE_GPA, cmdline ? cmdline : "", len + 1) < 0) {
		snprintf(err, errlen, "guest memory too small for the kernel command line");
		return -1;
	}
	return 0;
}

int kernel_load(const struct guest_mem *gm, const struct linux_boot *lb, const struct e820_map *map,
                uint64_t rsdp_gpa, struct boot_cpu_state *cpu, char *err, size_t errlen)
{
	size_t len;
	uint8_t *img = file_read_all(lb->kernel, LOADER_KERNEL_MAX, &len, err, errlen);
	uint32_t pvh_entry;
	int rc;

	if (img == NULL)
		return -1;
	/* An ELF kernel with a PVH note boots through its PVH entry. */
	if (pvh_probe(img, len, &pvh_entry, err, errlen) != 0)
		rc = pvh_load(gm, img, len, lb, map, rsdp_gpa, cpu, err, errlen);
	else
		rc = bzimage_load(gm, img, len, lb, map, rsdp_gpa, cpu, err, errlen);
	free(img);
	return rc;
}
