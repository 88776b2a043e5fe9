/*
 * libFuzzer target for the fw_cfg device (src/dev/fw_cfg.c): the selector,
 * data and DMA ports, with DMA descriptors and buffers in fake guest RAM
 * (64 KiB at 0, then a gap, then a read-only 4 KiB region, so that buffers
 * can straddle RAM's end or land in memory the device must not write).
 *
 * Input: a sequence of ops, each an opcode byte and its operands; bit 6
 * "fix-up" keeps a DMA descriptor's buffer address in RAM; bits 1:0:
 *   0 RAM write    u16 offset, u8 length-1, bytes
 *   1 port access  u8 offset (n%12) and size (1 << (n>>4)%3), bit 7 of it
 *                  write; u32 value when writing
 *   2 DMA          u16 descriptor offset (bit 15: take a u64 guest address
 *                  as is instead), u32 control, u32 length, u64 address;
 *                  the descriptor is written big-endian, then started
 *                  through the high and the low DMA address ports
 *   3 select+read  u16 selector, u8 count: that many data port reads
 *
 * Each input gets a fresh device with a few items and files, of sizes that
 * put item ends on and off the boundaries DMA lengths tend to hit.
 */
#include "fuzz.h"

#include "dev/fw_cfg.h"
#include "vmm/mem.h"

#define RAM_SIZE 0x10000u
#define ROM_GPA  0x100000u
#define ROM_SIZE 0x1000u

static struct guest_mem gm;
static uint8_t *ram, *rom;
static uint8_t blob[70000];

static void setup_once(void)
{
	ram = calloc(1, RAM_SIZE);
	rom = calloc(1, ROM_SIZE);
	if (ram == NULL || rom == NULL || gmem_add_region(&gm, 0, RAM_SIZE, ram, false) < 0 ||
	    gmem_add_region(&gm, ROM_GPA, ROM_SIZE, rom, true) < 0)
		abort();
	for (size_t i = 0; i < sizeof(blob); i++)
		blob[i] = (uint8_t)(i * 31 + (i >> 8));
}

static struct fw_cfg *make_device(void)
{
	struct fw_cfg *fw = fw_cfg_create(&gm);

	if (fw == NULL || fw_cfg_add_item(fw, FW_CFG_RAM_SIZE, blob, 8) < 0 ||
	    fw_cfg_add_item(fw, FW_CFG_NB_CPUS, blob, 2) < 0 ||
	    fw_cfg_add_item(fw, FW_CFG_E820_TABLE, blob, 4096) < 0 ||
	    fw_cfg_add_file(fw, "etc/empty", blob, 0) < 0 ||
	    fw_cfg_add_file(fw, "etc/boot-order", blob, 37) < 0 ||
	    fw_cfg_add_file(fw, "opt/large", blob, sizeof(blob)) < 0 ||
	    fw_cfg_add_file(fw, "etc/acpi/tables", blob, 4097) < 0)
		abort();
	return fw;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void dma(struct fw_cfg *fw, struct fz *z, bool fix)
{
	uint16_t where = fz_u16(z);
	uint64_t desc = where & 0x7fff, hi, lo;
	uint32_t ctl, len;
	uint64_t addr;

	if (where & 0x8000)
		desc = fz_u64(z);
	ctl = fz_u32(z);
	len = fz_u32(z);
	addr = fz_u64(z);
	if (fix)
		addr %= RAM_SIZE;
	if (desc <= RAM_SIZE - 16) {
		put_be32(ram + desc, ctl);
		put_be32(ram + desc + 4, len);
		put_be32(ram + desc + 8, (uint32_t)(addr >> 32));
		put_be32(ram + desc + 12, (uint32_t)addr);
	}
	hi = __builtin_bswap32((uint32_t)(desc >> 32));
	lo = __builtin_bswap32((uint32_t)desc);
	fw_cfg_access(fw, FW_CFG_OFF_DMA_HI, 4, true, &hi);
	fw_cfg_access(fw, FW_CFG_OFF_DMA_LO, 4, true, &lo);
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	struct fw_cfg *fw;

	memset(ram, 0, RAM_SIZE);
	fw = make_device();
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);

		switch (op & 3) {
		case 0:
			fz_ram_write(z, ram, RAM_SIZE, 2);
			break;
		case 1: {
			uint8_t a = fz_u8(z);
			unsigned sz = 1u << ((a >> 4) % 3);
			bool is_write = a & 0x80;
			/* The port bus hands devices values no wider than the access. */
			uint64_t v =
			    is_write ? fz_u32(z) & (sz == 4 ? 0xffffffffu : (1u << (8 * sz)) - 1)
			             : 0;

			fw_cfg_access(fw, (a & 0xf) % FW_CFG_PORT_COUNT, sz, is_write, &v);
			break;
		}
		case 2:
			dma(fw, z, op & 0x40);
			break;
		case 3: {
			uint64_t v = fz_u16(z);
			unsigned count = fz_u8(z);

			fw_cfg_access(fw, FW_CFG_OFF_SEL, 2, true, &v);
			for (unsigned i = 0; i < count; i++)
				fw_cfg_access(fw, FW_CFG_OFF_DATA, 1, false, &v);
			break;
		}
		}
	}
	fw_cfg_free(fw);
}
