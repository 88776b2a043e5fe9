/*
 * khyve's command line, bhyve(8)-compatible where the two overlap.  Every
 * flag only writes keys into the config tree (lib/config.h); nothing is
 * created here, so parsing is cheap to test.
 */
#ifndef KHYVE_CLI_H
#define KHYVE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum cli_result {
	CLI_RUN,  /* configuration complete: start the VM */
	CLI_DONE, /* help or config.dump printed: exit 0 */
	CLI_ERROR /* bad input: `err` says why; exit 4 */
};

/* Set the defaults (memory.size=256M, cpus=1, ...) then apply argv.
 * Output of -h / config.dump goes to `out`. */
enum cli_result cli_parse(int argc, char **argv, FILE *out, char *err, size_t errlen);

/*
 * Check what the whole tree says so errors surface before any KVM work:
 * every key known (run/known_keys.h: an unknown -o/-k key or device option
 * is refused, or only warned about with config.unknown=warn), booleans,
 * topology, memory size, -U a UUID, the boot method, a boot ROM of 64 KiB
 * to 16 MiB.  0, or -1 with one line in `err` naming the key.
 */
int cli_validate(char *err, size_t errlen);

void cli_usage(FILE *out);

/*
 * Whether the configured boot needs a KVM that runs guest code in hardware
 * (lib/hostkvm.h): a Linux bzImage (linux.kernel that is not an ELF) or a
 * boot ROM larger than 1 MiB (OVMF; SeaBIOS is 256 KiB).  True with a
 * short name of it in `what` ("a Linux bzImage"); false when the boot is
 * one that PVM's emulator runs, or a file cannot be read (then the loader
 * reports it).
 */
bool cli_boot_needs_hardware_kvm(char *what, size_t len);

#endif
