#include "boot/bootrom.h"

#include <stdio.h>
#include <stdlib.h>

#include "boot/linux.h"
#include "vmm/kvm.h"

#define FOUR_GIB        (1ull << 32)
#define LEGACY_BIOS_END 0x100000ull
#define LEGACY_BIOS_MAX 0x20000ull /* 128 KiB: 0xE0000-0xFFFFF */
#define SHADOW_MAX      0x40000ull /* 256 KiB: 0xC0000-0xFFFFF */

int bootrom_load(struct vm *vm, const char *path, uint64_t *mapped, char *err, size_t errlen)
{
	size_t len, shadow;
	uint64_t size;
	uint8_t *rom = boot_read_file(path, BOOTROM_MAX_SIZE, &len, err, errlen);

	if (rom == NULL)
		return -1;
	size = (len + 0xfff) & ~0xfffull;
	*mapped = size;
	if (vm_add_rom(vm, FOUR_GIB - size, size, rom, len) < 0) {
		snprintf(err, errlen, "cannot map boot ROM %s (%zu bytes)", path, len);
		free(rom);
		return -1;
	}
	/* Real-mode firmware far-jumps into F000:xxxx; give it a RAM shadow of
	 * its top (as a chipset with shadow RAM enabled would).  A ROM of up
	 * to 256 KiB (SeaBIOS's bios-256k.bin) is shadowed whole from
	 * 0xC0000, which is where its copy would sit once it had enabled
	 * shadow RAM itself; larger ones (UEFI) only their last 128 KiB. */
	shadow = len <= SHADOW_MAX ? len : LEGACY_BIOS_MAX;
	if (vm->mem.lowmem_size >= LEGACY_BIOS_END)
		gmem_write(&vm->mem, LEGACY_BIOS_END - shadow, rom + len - shadow, shadow);
	free(rom);
	return 0;
}
