/*
 * libFuzzer target for the direct kernel loaders (src/boot/loader.c,
 * linux.c, pvh.c): kernel_load() on a kernel file, which is a bzImage (the
 * setup header of Documentation/arch/x86/boot.rst) or an ELF with a PVH
 * entry note (its program and note headers), with an initrd and a command
 * line, into 8 MiB of fake guest RAM with its e820 map.  Host-side input,
 * but from a file a guest's owner may hand over: the loaders must refuse
 * what they cannot boot with a reason, never read past the file or write
 * past guest RAM.
 *
 * Input: u8 flags (bit 0: an initrd, bit 1: RAM ends at 2 MiB instead),
 * u8 command-line length and that many bytes (NULs end it early), u16
 * initrd length and its bytes when bit 0 is set, then the kernel file.
 * bzimage_parse() also sees the kernel bytes on their own, and
 * linux_initrd_addr() what it parsed.
 */
#include "fuzz.h"

#include <sys/mman.h>

#include "boot/e820.h"
#include "boot/linux.h"
#include "boot/loader.h"
#include "boot/pvh.h"

#define RAM_SIZE (8ull << 20)

static uint8_t *ram;
static int kernel_fd, initrd_fd;
static char kernel_path[64], initrd_path[64];

static void setup_once(void)
{
	ram = calloc(1, RAM_SIZE);
	kernel_fd = memfd_create("khyve-fuzz-kernel", MFD_CLOEXEC);
	initrd_fd = memfd_create("khyve-fuzz-initrd", MFD_CLOEXEC);
	if (ram == NULL || kernel_fd < 0 || initrd_fd < 0)
		abort();
	snprintf(kernel_path, sizeof(kernel_path), "/proc/self/fd/%d", kernel_fd);
	snprintf(initrd_path, sizeof(initrd_path), "/proc/self/fd/%d", initrd_fd);
}

/* Make the memfd hold exactly `len` bytes of `data`. */
static void fill(int fd, const uint8_t *data, size_t len)
{
	if (ftruncate(fd, 0) < 0 || (len > 0 && pwrite(fd, data, len, 0) != (ssize_t)len))
		abort();
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	uint8_t flags = fz_u8(z);
	uint64_t ram_size = (flags & 2) ? (2ull << 20) : RAM_SIZE;
	char cmdline[256], err[256];
	size_t cmd_len = fz_u8(z), initrd_len = 0;
	struct guest_mem gm = {0};
	struct e820_map map = {0};
	struct boot_cpu_state cpu;
	struct bzimage_info info;
	struct linux_boot lb = {kernel_path, NULL, cmdline};

	fz_bytes(z, cmdline, cmd_len);
	cmdline[cmd_len] = '\0';
	if (flags & 1) {
		initrd_len = fz_u16(z);
		if (initrd_len > z->n)
			initrd_len = z->n;
		fill(initrd_fd, z->p, initrd_len);
		z->p += initrd_len;
		z->n -= initrd_len;
		lb.initrd = initrd_path;
	}
	fill(kernel_fd, z->p, z->n);
	if (gmem_add_region(&gm, 0, ram_size, ram, false) < 0 ||
	    e820_build_default(&map, ram_size, 0) < 0)
		abort();
	gm.lowmem_size = ram_size;
	(void)kernel_load(&gm, &lb, &map, 0xf0000, &cpu, err, sizeof(err));
	if (bzimage_parse(z->p, z->n, &info, err, sizeof(err)) == 0)
		(void)linux_initrd_addr(&info, ram_size, initrd_len);
}
