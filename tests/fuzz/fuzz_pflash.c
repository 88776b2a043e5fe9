/*
 * libFuzzer target for the CFI flash that holds UEFI variables
 * (src/dev/pflash.c): the Intel command set OVMF uses (read array, read
 * status, read ID, clear status, word program, block erase and its
 * confirmation) written and read at any offset and size, in and past the
 * 16 KiB store, with the array-mode hook checked against the mode it
 * reports.
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bit 7
 * makes the offset one of the store's last 16 bytes or past its end;
 * bits 1:0:
 *   0 read       u16 offset, u8 size (n%10: 0 and 9 are refused sizes)
 *   1 write      u16 offset, u8 size, u64 value
 *   2 command    u16 offset, u8 command byte: one of the set above (n%8)
 *                or, for n >= 0xc0, the byte itself
 *   3 sync       pflash_sync()
 * Each input opens the store afresh, zero-filled (the file is a memfd).
 */
#include "fuzz.h"

#include <sys/mman.h>

#include "dev/pflash.h"

#define STORE_SIZE (4 * PFLASH_BLOCK_SIZE)

static int store_fd = -1;
static char store_path[64];
static bool array_mode;

static void setup_once(void)
{
	store_fd = memfd_create("khyve-fuzz-pflash", MFD_CLOEXEC);
	if (store_fd < 0)
		abort();
	snprintf(store_path, sizeof(store_path), "/proc/self/fd/%d", store_fd);
}

static void array_hook(void *arg, bool on)
{
	(void)arg;
	/* Called on each change only. */
	if (on == array_mode)
		abort();
	array_mode = on;
}

static uint64_t offset_of(uint8_t op, uint16_t raw)
{
	if (op & 0x80)
		return STORE_SIZE - 16 + raw % 64;
	return raw % STORE_SIZE;
}

static uint8_t command_of(uint8_t n)
{
	static const uint8_t cmds[8] = {0xff, 0x10, 0x40, 0x20, 0xd0, 0x50, 0x70, 0x90};

	return n >= 0xc0 ? n : cmds[n % 8];
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	char err[256];
	struct pflash *pf;

	if (ftruncate(store_fd, 0) < 0 || ftruncate(store_fd, STORE_SIZE) < 0)
		abort();
	pf = pflash_open(store_path, err, sizeof(err));
	if (pf == NULL || pflash_size(pf) != STORE_SIZE) {
		fprintf(stderr, "pflash_open: %s\n", err);
		abort();
	}
	array_mode = true;
	pflash_set_array_hook(pf, array_hook, NULL);
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		uint64_t off = offset_of(op, fz_u16(z));
		uint64_t val = 0;

		switch (op & 3) {
		case 0:
			(void)pflash_access(pf, off, fz_u8(z) % 10, false, &val);
			break;
		case 1: {
			unsigned size = fz_u8(z) % 10;

			val = fz_u64(z);
			(void)pflash_access(pf, off, size, true, &val);
			break;
		}
		case 2:
			val = command_of(fz_u8(z));
			(void)pflash_access(pf, off, 1, true, &val);
			break;
		case 3:
			(void)pflash_sync(pf);
			break;
		}
	}
	pflash_close(pf);
}
