/*
 * tests/lab/vm-grub's stand-in for `vm start`/`vm install` with
 * loader="grub": find guest NAME through $KHYVE_CONF as vm does and make
 * its GRUB boot CD with vm_grub_image() (src/vm/grub.c); print the image's
 * path.
 *   KHYVE_CONF=conf vm-grub-driver NAME [INSTALL-MEDIUM]
 */
#include <stdio.h>

#include "vm/khyvecmd.h"

int main(int argc, char **argv)
{
	struct vm_sys sys = {0};
	struct vm_guest g = {0};
	char err[512] = "", out[PATH_MAX];
	const char *iso = argc > 2 ? argv[2] : NULL;
	int rc = 1;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: vm-grub-driver NAME [INSTALL-MEDIUM]\n");
		return 2;
	}
	if (vm_sys_load(&sys, err, sizeof(err)) == 0 &&
	    vm_guest_find(&sys, argv[1], &g, err, sizeof(err)) == 0 &&
	    vm_grub_image(&sys, &g, iso != NULL, iso, out, err, sizeof(err)) == 0) {
		printf("%s\n", out);
		rc = 0;
	} else {
		fprintf(stderr, "vm-grub-driver: %s\n", err);
	}
	vm_guest_free(&g);
	vm_sys_free(&sys);
	return rc;
}
