/*
 * QEMU's firmware configuration device (fw_cfg), x86 I/O-port flavour, as
 * specified in QEMU's docs/specs/fw_cfg.rst, so that unmodified SeaBIOS
 * (and OVMF) find their configuration the way they do under QEMU:
 *
 *   port 0x510 (16 bit, write)  selector: the item that reads start from;
 *                               bit 14 (write) and bit 15 (arch) are part
 *                               of the key, bit 14 is otherwise ignored
 *   port 0x511 (8 bit)          data: the next byte of the selected item,
 *                               0 past its end; writes are ignored
 *   ports 0x514-0x51b           DMA address, big-endian 64 bit: a write of
 *                               the low half (0x518) starts a transfer
 *                               described by the 16-byte FWCfgDmaAccess at
 *                               that guest-physical address; reads give
 *                               the signature "QEMU CFG"
 *
 * A DMA descriptor is { be32 control; be32 length; be64 address; }.
 * Control bits: 0x01 error, 0x02 read, 0x04 skip, 0x08 select (selector
 * in bits 31:16), 0x10 write.  When done the device stores control = 0, or
 * 0x01 (error) for anything it refuses: a descriptor or buffer outside
 * guest RAM, a write, unknown bits.  Items are read-only.
 *
 * Items: signature 0x00 ("QEMU"), ID 0x01 (bit 0 traditional interface,
 * bit 1 DMA), FW_CFG_FILE_DIR 0x19 (be32 count, then per file be32 size,
 * be16 select, be16 reserved, char name[56]), files from selector 0x20
 * (FW_CFG_FILE_FIRST) in name order; others by key with fw_cfg_add_item().
 * Unknown selectors read as an empty item (all zeros).
 *
 * Enabled (config lpc.fwcfg=qemu, bhyve's key) by default when a boot ROM
 * is configured and no Linux kernel; lpc.fwcfg=none turns it off.
 */
#ifndef KHYVE_FW_CFG_H
#define KHYVE_FW_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/snapshot.h"

struct guest_mem;
struct machine;

#define FW_CFG_PORT_SEL   0x510
#define FW_CFG_PORT_DATA  0x511
#define FW_CFG_PORT_DMA   0x514
#define FW_CFG_PORT_COUNT 12 /* 0x510-0x51b */

/* Offsets into the port range, as passed to fw_cfg_access(). */
#define FW_CFG_OFF_SEL    0
#define FW_CFG_OFF_DATA   1
#define FW_CFG_OFF_DMA_HI 4
#define FW_CFG_OFF_DMA_LO 8

/* Selector keys (fw_cfg.rst "Selector Register"). */
#define FW_CFG_SIGNATURE      0x00
#define FW_CFG_ID             0x01
#define FW_CFG_UUID           0x02
#define FW_CFG_RAM_SIZE       0x03 /* le64, bytes */
#define FW_CFG_NOGRAPHIC      0x04
#define FW_CFG_NB_CPUS        0x05 /* le16 */
#define FW_CFG_NUMA           0x0d
#define FW_CFG_BOOT_MENU      0x0e /* le16 */
#define FW_CFG_MAX_CPUS       0x0f /* le16 */
#define FW_CFG_FILE_DIR       0x19
#define FW_CFG_FILE_FIRST     0x20
#define FW_CFG_WRITE_CHANNEL  0x4000
#define FW_CFG_ARCH_LOCAL     0x8000
#define FW_CFG_ACPI_TABLES    (FW_CFG_ARCH_LOCAL + 0)
#define FW_CFG_SMBIOS_ENTRIES (FW_CFG_ARCH_LOCAL + 1)
#define FW_CFG_IRQ0_OVERRIDE  (FW_CFG_ARCH_LOCAL + 2)
#define FW_CFG_E820_TABLE     (FW_CFG_ARCH_LOCAL + 3)

#define FW_CFG_ID_TRADITIONAL 0x01
#define FW_CFG_ID_DMA         0x02

#define FW_CFG_DMA_ERROR      0x01
#define FW_CFG_DMA_READ       0x02
#define FW_CFG_DMA_SKIP       0x04
#define FW_CFG_DMA_SELECT     0x08
#define FW_CFG_DMA_WRITE      0x10

#define FW_CFG_MAX_FILES      64
#define FW_CFG_MAX_ITEMS      32
#define FW_CFG_NAME_LEN       56          /* including the NUL */
#define FW_CFG_MAX_ITEM_LEN   (16u << 20) /* bytes; keeps offsets in 32 bits */

struct fw_cfg;

/*
 * A device with no items but the signature, the ID and the (empty) file
 * directory.  DMA reaches guest memory only through gmem_ptr(`mem`).
 * NULL when out of memory.
 */
struct fw_cfg *fw_cfg_create(const struct guest_mem *mem);
void fw_cfg_free(struct fw_cfg *fw);

/* Add (or replace) item `key` with a copy of `len` bytes.  0, or -1 when
 * the key is a file selector or out of room.  Not while the guest runs. */
int fw_cfg_add_item(struct fw_cfg *fw, uint16_t key, const void *data, size_t len);

/* Add (or replace) file `name` (at most 55 bytes) with a copy of `len`
 * bytes; selectors are handed out in name order, as QEMU does.  0 or -1. */
int fw_cfg_add_file(struct fw_cfg *fw, const char *name, const void *data, size_t len);

/* The bytes of file `name` (NULL when absent), for tests. */
const uint8_t *fw_cfg_file(const struct fw_cfg *fw, const char *name, size_t *len);

/*
 * Guest access to the port range at `offset` (0-11) of `size` bytes (1, 2,
 * 4); the iobus handler.  Always 0: the guest cannot make it fail.
 */
int fw_cfg_access(void *fw, uint64_t offset, unsigned size, bool is_write, uint64_t *val);

/*
 * Saved state (docs/design/snapshots.md section 2, "dev"): `arg` is the
 * struct fw_cfg.  Version 1: the selector, the read offset, the DMA
 * address's high half, and a SHA-256 over every item (the directory, each
 * file and keyed item with its name or key and length).  The items are
 * rebuilt from the options at start, not saved; a restore whose items
 * hash differently is refused ("fw_cfg items differ from the saved
 * machine"), since a guest caught mid-read would get other bytes.
 */
extern const struct state_ops fw_cfg_state_ops;

/* The device this VM created at start-up (lpc.fwcfg=qemu), NULL if none. */
struct fw_cfg *fw_cfg_machine_device(void);

#endif
