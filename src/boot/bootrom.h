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

#include <stddef.h>
#include <stdint.h>

struct vm;

#define BOOTROM_MAX_SIZE (16u << 20)

/* Load `path` as the boot ROM; 0, or -1 with a one-line reason in `err`.
 * `*mapped` gets the bytes mapped below 4 GiB (the file's size rounded up
 * to 4 KiB): the firmware's variable store goes right below them. */
int bootrom_load(struct vm *vm, const char *path, uint64_t *mapped, char *err, size_t errlen);

#endif
