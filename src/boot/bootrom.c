#include "boot/bootrom.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/machine.h"
#include "dev/pflash.h"
#include "lib/config.h"
#include "lib/file.h"
#include "lib/log.h"
#include "vmm/kvm.h"

#define FOUR_GIB        (1ull << 32)
#define LEGACY_BIOS_END 0x100000ull
#define LEGACY_BIOS_MAX 0x20000ull /* 128 KiB: 0xE0000-0xFFFFF */
#define SHADOW_MAX      0x40000ull /* 256 KiB: 0xC0000-0xFFFFF */

int bootrom_load(struct vm *vm, const char *path, uint64_t *mapped, char *err, size_t errlen)
{
	size_t len, shadow;
	uint64_t size;
	uint8_t *rom = file_read_all(path, BOOTROM_MAX_SIZE, &len, err, errlen);

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

/* Where the variable store's read-only window is (read-array mode). */
static struct vars_window {
	struct machine *m;
	int slot;
	uint64_t gpa;
} vars_window;

static void vars_array_mode(void *arg, bool on)
{
	struct vars_window *w = arg;

	if (vm_rom_window_set(&w->m->vm, w->slot, w->gpa, pflash_size(w->m->vars),
	                      pflash_data(w->m->vars), on) < 0)
		log_warn("variable store: cannot switch its read window %s", on ? "on" : "off");
}

/* The VARFILE of -l bootrom,ROM,VARFILE: a CFI flash ending where the ROM
 * starts (OVMF's 4 MiB layout: variables at 0xFFC00000, code above).
 * Reads in read-array mode go through a read-only window, without exits. */
static int attach_vars(struct machine *m, uint64_t rom_size, char *err, size_t errlen)
{
	const char *path = config_get("lpc.bootvars");
	uint64_t base;

	if (path == NULL)
		return 0;
	m->vars = pflash_open(path, err, errlen);
	if (m->vars == NULL)
		return -1;
	if (pflash_add_state(m, m->vars) < 0) {
		snprintf(err, errlen, "variable store: cannot register its saved state");
		return -1;
	}
	base = FOUR_GIB - rom_size - pflash_size(m->vars);
	if (machine_register_mmio(m, base, pflash_size(m->vars), pflash_access, m->vars,
	                          "bootvars") < 0) {
		snprintf(err, errlen, "no room for the variable store below the boot ROM");
		return -1;
	}
	vars_window = (struct vars_window){m, -1, base};
	vars_window.slot =
	    vm_rom_window_add(&m->vm, base, pflash_size(m->vars), pflash_data(m->vars));
	if (vars_window.slot >= 0)
		pflash_set_array_hook(m->vars, vars_array_mode, &vars_window);
	return 0;
}

bool bootrom_configured(void)
{
	return config_get("lpc.bootrom") != NULL;
}

int bootrom_attach(struct machine *m, char *err, size_t errlen)
{
	uint64_t rom_size;

	if (bootrom_load(&m->vm, config_get("lpc.bootrom"), &rom_size, err, errlen) < 0)
		return -1;
	return attach_vars(m, rom_size, err, errlen);
}

/* A read-only ROM still sees guest writes as MMIO exits; swallow them. */
static int rom_write_sink(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	(void)arg;
	(void)offset;
	(void)size;
	if (!is_write)
		*val = ~0ull;
	return 0;
}

int bootrom_register_write_sinks(struct machine *m)
{
	for (unsigned i = 0; i < m->vm.mem.nregions; i++) {
		const struct gmem_region *r = &m->vm.mem.region[i];

		if (r->readonly &&
		    machine_register_mmio(m, r->gpa, r->size, rom_write_sink, NULL, "rom") < 0)
			return -1;
	}
	return 0;
}
