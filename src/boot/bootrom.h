/*
 * Boot ROM (bhyve: -l bootrom,ROMFILE[,VARFILE]; config lpc.bootrom): a
 * firmware image mapped read-only so that it ends at 4 GiB, where the CPU's
 * reset vector (0xFFFFFFF0) points.  Its last 128 KiB are also copied to
 * 0xE0000-0xFFFFF, the legacy BIOS area real-mode firmware runs from (a
 * ROM of at most 256 KiB, such as SeaBIOS's bios-256k.bin, whole, ending at
 * 1 MiB, as SeaBIOS's own shadowing would leave it).
 */
#ifndef KHYVE_BOOTROM_H
#define KHYVE_BOOTROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct machine;
struct vm;

#define BOOTROM_MAX_SIZE (16u << 20)

/* Load `path` as the boot ROM; 0, or -1 with a one-line reason in `err`.
 * `*mapped` gets the bytes mapped below 4 GiB (the file's size rounded up
 * to 4 KiB): the firmware's variable store goes right below them. */
int bootrom_load(struct vm *vm, const char *path, uint64_t *mapped, char *err, size_t errlen);

/* Did the user give a boot ROM (-l bootrom, config lpc.bootrom)? */
bool bootrom_configured(void);

/*
 * Map the configured boot ROM (bootrom_load) and, with a VARFILE
 * (lpc.bootvars), its variable store as a CFI flash (dev/pflash.h) right
 * below it, stored in m->vars (the caller closes it with pflash_close at
 * exit).  In the flash's read-array mode a read-only KVM memslot serves
 * reads without exits.  0, or -1 with a one-line reason in `err`.
 */
int bootrom_attach(struct machine *m, char *err, size_t errlen);

/* Register an MMIO handler over every read-only region of guest memory
 * (the ROM, its variable store window) that ignores the guest's writes
 * there, which KVM reports as MMIO exits.  0, or -1. */
int bootrom_register_write_sinks(struct machine *m);

#endif
