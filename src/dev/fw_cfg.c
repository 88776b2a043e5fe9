/*
 * QEMU fw_cfg on I/O ports 0x510-0x51b (see dev/fw_cfg.h and QEMU's
 * docs/specs/fw_cfg.rst).  Everything the guest writes here (selectors,
 * DMA descriptor addresses, lengths, control bits) is treated as hostile:
 * guest memory is reached only through gmem_ptr(), offsets saturate at the
 * item's end, and refused requests set the DMA error bit.
 */
#include "dev/fw_cfg.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sha2.h>

#include "core/machine.h"
#include "dev/lpc.h"
#include "lib/config.h"
#include "lib/log.h"
#include "vmm/mem.h"

#define DMA_DESC_LEN 16
#define DMA_KNOWN_CTL                                                                              \
	(FW_CFG_DMA_ERROR | FW_CFG_DMA_READ | FW_CFG_DMA_SKIP | FW_CFG_DMA_SELECT |                \
	 FW_CFG_DMA_WRITE)
#define DIR_ENTRY_LEN 64

static const uint8_t dma_signature[8] = {'Q', 'E', 'M', 'U', ' ', 'C', 'F', 'G'};

struct fw_blob {
	uint8_t *data;
	uint32_t len;
};

struct fw_item {
	uint16_t key;
	struct fw_blob b;
};

struct fw_file {
	char name[FW_CFG_NAME_LEN];
	struct fw_blob b;
};

struct fw_cfg {
	const struct guest_mem *mem;
	pthread_mutex_t lock;
	struct fw_item item[FW_CFG_MAX_ITEMS];
	unsigned nitems;
	struct fw_file file[FW_CFG_MAX_FILES]; /* sorted by name; selector 0x20 + index */
	unsigned nfiles;
	struct fw_blob dir; /* FW_CFG_FILE_DIR, rebuilt on every add */
	struct fw_blob id;  /* FW_CFG_ID */
	struct fw_blob sig; /* FW_CFG_SIGNATURE */
	uint16_t sel;       /* current selector */
	uint32_t off;       /* read offset into the selected item */
	uint32_t dma_hi;    /* high half of the DMA address, host order */
	struct ratelimit rl;
};

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int blob_set(struct fw_blob *b, const void *data, size_t len)
{
	uint8_t *copy;

	if (len > FW_CFG_MAX_ITEM_LEN)
		return -1;
	copy = malloc(len ? len : 1);
	if (copy == NULL)
		return -1;
	if (len)
		memcpy(copy, data, len);
	free(b->data);
	b->data = copy;
	b->len = (uint32_t)len;
	return 0;
}

static int rebuild_dir(struct fw_cfg *fw)
{
	size_t len = 4 + (size_t)fw->nfiles * DIR_ENTRY_LEN;
	uint8_t *d = calloc(1, len);

	if (d == NULL)
		return -1;
	put_be32(d, fw->nfiles);
	for (unsigned i = 0; i < fw->nfiles; i++) {
		uint8_t *e = d + 4 + (size_t)i * DIR_ENTRY_LEN;
		uint16_t sel = (uint16_t)(FW_CFG_FILE_FIRST + i);

		put_be32(e, fw->file[i].b.len);
		e[4] = (uint8_t)(sel >> 8);
		e[5] = (uint8_t)sel;
		memcpy(e + 8, fw->file[i].name, FW_CFG_NAME_LEN);
	}
	free(fw->dir.data);
	fw->dir.data = d;
	fw->dir.len = (uint32_t)len;
	return 0;
}

struct fw_cfg *fw_cfg_create(const struct guest_mem *mem)
{
	struct fw_cfg *fw = calloc(1, sizeof(*fw));
	uint8_t id[4] = {FW_CFG_ID_TRADITIONAL | FW_CFG_ID_DMA, 0, 0, 0};

	if (fw == NULL)
		return NULL;
	fw->mem = mem;
	fw->rl = (struct ratelimit)RATELIMIT_INIT;
	pthread_mutex_init(&fw->lock, NULL);
	if (blob_set(&fw->sig, "QEMU", 4) < 0 || blob_set(&fw->id, id, 4) < 0 ||
	    rebuild_dir(fw) < 0) {
		fw_cfg_free(fw);
		return NULL;
	}
	return fw;
}

void fw_cfg_free(struct fw_cfg *fw)
{
	if (fw == NULL)
		return;
	for (unsigned i = 0; i < fw->nitems; i++)
		free(fw->item[i].b.data);
	for (unsigned i = 0; i < fw->nfiles; i++)
		free(fw->file[i].b.data);
	free(fw->dir.data);
	free(fw->id.data);
	free(fw->sig.data);
	pthread_mutex_destroy(&fw->lock);
	free(fw);
}

int fw_cfg_add_item(struct fw_cfg *fw, uint16_t key, const void *data, size_t len)
{
	unsigned i;

	key &= (uint16_t)~FW_CFG_WRITE_CHANNEL;
	if (key == FW_CFG_SIGNATURE || key == FW_CFG_ID || key == FW_CFG_FILE_DIR ||
	    (key >= FW_CFG_FILE_FIRST && key < FW_CFG_ARCH_LOCAL))
		return -1;
	for (i = 0; i < fw->nitems; i++)
		if (fw->item[i].key == key)
			return blob_set(&fw->item[i].b, data, len);
	if (fw->nitems == FW_CFG_MAX_ITEMS || blob_set(&fw->item[i].b, data, len) < 0)
		return -1;
	fw->item[i].key = key;
	fw->nitems++;
	return 0;
}

int fw_cfg_add_file(struct fw_cfg *fw, const char *name, const void *data, size_t len)
{
	unsigned i;
	int cmp = 1;

	if (name == NULL || name[0] == '\0' || strlen(name) >= FW_CFG_NAME_LEN)
		return -1;
	for (i = 0; i < fw->nfiles; i++) {
		cmp = strcmp(fw->file[i].name, name);
		if (cmp >= 0)
			break;
	}
	if (i < fw->nfiles && cmp == 0)
		return blob_set(&fw->file[i].b, data, len) < 0 ? -1 : rebuild_dir(fw);
	if (fw->nfiles == FW_CFG_MAX_FILES)
		return -1;
	memmove(&fw->file[i + 1], &fw->file[i], (fw->nfiles - i) * sizeof(fw->file[0]));
	memset(&fw->file[i], 0, sizeof(fw->file[i]));
	if (blob_set(&fw->file[i].b, data, len) < 0) {
		memmove(&fw->file[i], &fw->file[i + 1], (fw->nfiles - i) * sizeof(fw->file[0]));
		return -1;
	}
	snprintf(fw->file[i].name, sizeof(fw->file[i].name), "%s", name);
	fw->nfiles++;
	return rebuild_dir(fw);
}

const uint8_t *fw_cfg_file(const struct fw_cfg *fw, const char *name, size_t *len)
{
	for (unsigned i = 0; i < fw->nfiles; i++) {
		if (strcmp(fw->file[i].name, name) == 0) {
			if (len != NULL)
				*len = fw->file[i].b.len;
			return fw->file[i].b.data;
		}
	}
	return NULL;
}

/* The item selector `sel` names; NULL for an unknown one (reads as zeros). */
static const struct fw_blob *lookup(const struct fw_cfg *fw, uint16_t sel)
{
	uint16_t key = sel & (uint16_t)~FW_CFG_WRITE_CHANNEL;

	if (key == FW_CFG_SIGNATURE)
		return &fw->sig;
	if (key == FW_CFG_ID)
		return &fw->id;
	if (key == FW_CFG_FILE_DIR)
		return &fw->dir;
	if (key >= FW_CFG_FILE_FIRST && key < FW_CFG_FILE_FIRST + fw->nfiles)
		return &fw->file[key - FW_CFG_FILE_FIRST].b;
	for (unsigned i = 0; i < fw->nitems; i++)
		if (fw->item[i].key == key)
			return &fw->item[i].b;
	return NULL;
}

static void select_item(struct fw_cfg *fw, uint16_t sel)
{
	fw->sel = sel;
	fw->off = 0;
}

/* Copy up to `len` bytes of the selected item into `dst`, zero-filling
 * past its end, and advance the offset (saturating at the end). */
static void read_bytes(struct fw_cfg *fw, uint8_t *dst, uint64_t len)
{
	const struct fw_blob *b = lookup(fw, fw->sel);
	uint64_t avail = (b != NULL && fw->off < b->len) ? b->len - fw->off : 0;
	uint64_t n = len < avail ? len : avail;

	if (n > 0)
		memcpy(dst, b->data + fw->off, n);
	if (len > n)
		memset(dst + n, 0, len - n);
	fw->off += (uint32_t)n;
}

static void skip_bytes(struct fw_cfg *fw, uint64_t len)
{
	const struct fw_blob *b = lookup(fw, fw->sel);
	uint64_t avail = (b != NULL && fw->off < b->len) ? b->len - fw->off : 0;

	fw->off += (uint32_t)(len < avail ? len : avail);
}

/* Run the DMA descriptor at guest-physical `gpa`. */
static void dma_transfer(struct fw_cfg *fw, uint64_t gpa)
{
	uint8_t *desc = gmem_ptr(fw->mem, gpa, DMA_DESC_LEN, true);
	uint8_t local[DMA_DESC_LEN];
	uint32_t ctl, len, result = 0;
	uint64_t addr;

	if (desc == NULL) {
		log_ratelimited(&fw->rl, LOG_WARN,
		                "fw_cfg: DMA descriptor at 0x%llx is not in guest RAM",
		                (unsigned long long)gpa);
		return;
	}
	/* One snapshot: the guest may change the descriptor meanwhile. */
	memcpy(local, desc, sizeof(local));
	ctl = get_be32(local);
	len = get_be32(local + 4);
	addr = ((uint64_t)get_be32(local + 8) << 32) | get_be32(local + 12);

	if ((ctl & 0xffff & ~(uint32_t)DMA_KNOWN_CTL) || (ctl & FW_CFG_DMA_ERROR)) {
		log_ratelimited(&fw->rl, LOG_WARN, "fw_cfg: DMA control 0x%x has unknown bits",
		                ctl);
		result = FW_CFG_DMA_ERROR;
		goto done;
	}
	if (ctl & FW_CFG_DMA_SELECT)
		select_item(fw, (uint16_t)(ctl >> 16));
	if (ctl & FW_CFG_DMA_READ) {
		uint8_t *dst = len ? gmem_ptr(fw->mem, addr, len, true) : NULL;

		if (len && dst == NULL) {
			log_ratelimited(&fw->rl, LOG_WARN,
			                "fw_cfg: DMA read to 0x%llx+0x%x is not in guest RAM",
			                (unsigned long long)addr, len);
			result = FW_CFG_DMA_ERROR;
		} else if (len) {
			read_bytes(fw, dst, len);
			gmem_mark_dirty(fw->mem, addr, len);
		}
	} else if (ctl & FW_CFG_DMA_WRITE) {
		log_ratelimited(&fw->rl, LOG_WARN, "fw_cfg: DMA write to item 0x%x refused",
		                fw->sel);
		result = FW_CFG_DMA_ERROR;
	} else if (ctl & FW_CFG_DMA_SKIP) {
		skip_bytes(fw, len);
	}
done:
	put_be32(local, result);
	memcpy(desc, local, 4);
	gmem_mark_dirty(fw->mem, gpa, 4);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int fw_cfg_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct fw_cfg *fw = arg;

	pthread_mutex_lock(&fw->lock);
	if (offset == FW_CFG_OFF_SEL && is_write) {
		select_item(fw, (uint16_t)*val);
	} else if (offset == FW_CFG_OFF_DATA && !is_write && size <= 8) {
		uint8_t buf[8];

		read_bytes(fw, buf, size);
		*val = 0;
		for (unsigned i = 0; i < size; i++)
			*val |= (uint64_t)buf[i] << (8 * i);
	} else if (offset >= FW_CFG_OFF_DMA_HI && offset < FW_CFG_PORT_COUNT && !is_write) {
		*val = 0;
		for (unsigned i = 0; i < size && offset + i < FW_CFG_PORT_COUNT; i++)
			*val |= (uint64_t)dma_signature[offset - FW_CFG_OFF_DMA_HI + i] << (8 * i);
	} else if (offset == FW_CFG_OFF_DMA_HI && is_write && size == 4) {
		fw->dma_hi = __builtin_bswap32((uint32_t)*val);
	} else if (offset == FW_CFG_OFF_DMA_HI && is_write && size == 8) {
		dma_transfer(fw, __builtin_bswap64(*val));
		fw->dma_hi = 0;
	} else if (offset == FW_CFG_OFF_DMA_LO && is_write && size == 4) {
		dma_transfer(fw, ((uint64_t)fw->dma_hi << 32) | __builtin_bswap32((uint32_t)*val));
		fw->dma_hi = 0;
	} else if (!is_write) {
		*val = 0;
	} else {
		log_ratelimited(&fw->rl, LOG_WARN, "fw_cfg: ignored %u-byte write at port 0x%llx",
		                size, (unsigned long long)(FW_CFG_PORT_SEL + offset));
	}
	pthread_mutex_unlock(&fw->lock);
	return 0;
}

/* ---- saved state ---- */

#define FW_CFG_STATE_VERSION 1
#define FW_CFG_HASH_LEN      SHA256_DIGEST_LENGTH

static void hash_u32(SHA2_CTX *c, uint32_t v)
{
	uint8_t b[4];

	put_be32(b, v);
	SHA256Update(c, b, sizeof(b));
}

static void hash_blob(SHA2_CTX *c, const struct fw_blob *b)
{
	hash_u32(c, b->len);
	if (b->len)
		SHA256Update(c, b->data, b->len);
}

/* What the guest can read, in a fixed order: the directory (names, sizes,
 * selectors), each file's bytes, then each keyed item with its key. */
static void items_hash(const struct fw_cfg *fw, uint8_t out[FW_CFG_HASH_LEN])
{
	SHA2_CTX c;

	SHA256Init(&c);
	hash_blob(&c, &fw->dir);
	for (unsigned i = 0; i < fw->nfiles; i++)
		hash_blob(&c, &fw->file[i].b);
	hash_u32(&c, fw->nitems);
	for (unsigned i = 0; i < fw->nitems; i++) {
		hash_u32(&c, fw->item[i].key);
		hash_blob(&c, &fw->item[i].b);
	}
	SHA256Final(out, &c);
}

static int fw_cfg_save(void *arg, struct sbuf *out, char *err, size_t errlen)
{
	struct fw_cfg *fw = arg;
	uint8_t hash[FW_CFG_HASH_LEN];

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&fw->lock);
	items_hash(fw, hash);
	sbuf_put_u16(out, FW_CFG_STATE_VERSION);
	sbuf_put_u16(out, fw->sel);
	sbuf_put_u32(out, fw->off);
	sbuf_put_u32(out, fw->dma_hi);
	sbuf_put_bytes(out, hash, sizeof(hash));
	pthread_mutex_unlock(&fw->lock);
	return 0;
}

static int fw_cfg_restore(void *arg, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct fw_cfg *fw = arg;
	uint8_t saved[FW_CFG_HASH_LEN], now[FW_CFG_HASH_LEN];
	const struct fw_blob *b;
	uint16_t sel;
	uint32_t off, dma_hi;

	if (sbuf_get_version(in, FW_CFG_STATE_VERSION) == 0)
		return snprintf(err, errlen, "%s", in->why), -1;
	sel = sbuf_get_u16(in);
	off = sbuf_get_u32(in);
	dma_hi = sbuf_get_u32(in);
	sbuf_get_bytes(in, saved, sizeof(saved));
	if (in->failed)
		return snprintf(err, errlen, "%s", in->why), -1;
	pthread_mutex_lock(&fw->lock);
	items_hash(fw, now);
	b = lookup(fw, sel);
	if (memcmp(saved, now, sizeof(now)) != 0)
		sbuf_fail(in, "fw_cfg items differ from the saved machine");
	else if (off > (b != NULL ? b->len : 0)) /* reads saturate at the item's end */
		sbuf_fail(in, "offset %u past the end of item 0x%04x", off, sel);
	if (!in->failed) {
		fw->sel = sel;
		fw->off = off;
		fw->dma_hi = dma_hi;
	}
	pthread_mutex_unlock(&fw->lock);
	if (in->failed)
		return snprintf(err, errlen, "%s", in->why), -1;
	return 0;
}

const struct state_ops fw_cfg_state_ops = {
    .save = fw_cfg_save,
    .restore = fw_cfg_restore,
};

/* ---- the VM's instance ---- */

static struct fw_cfg *machine_fw;

struct fw_cfg *fw_cfg_machine_device(void)
{
	return machine_fw;
}

static int dma_port_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	return fw_cfg_access(arg, offset + FW_CFG_OFF_DMA_HI, size, is_write, val);
}

static int fw_cfg_init(struct machine *m, char *err, size_t errlen)
{
	const char *mode = config_get("lpc.fwcfg");
	bool want = config_get("lpc.bootrom") != NULL && config_get("linux.kernel") == NULL;

	if (mode != NULL) {
		if (strcmp(mode, "qemu") == 0) {
			want = true;
		} else if (strcmp(mode, "none") == 0 || strcmp(mode, "false") == 0) {
			want = false;
		} else {
			snprintf(err, errlen, "lpc.fwcfg: want qemu or none, not '%s'", mode);
			return -1;
		}
	}
	if (!want)
		return 0;
	machine_fw = fw_cfg_create(&m->vm.mem);
	if (machine_fw == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (machine_add_state(m, "lpc.fw_cfg", &fw_cfg_state_ops, machine_fw) < 0) {
		snprintf(err, errlen, "fw_cfg: cannot register its saved state");
		return -1;
	}
	if (machine_register_pio(m, FW_CFG_PORT_SEL, 2, fw_cfg_access, machine_fw, "fw_cfg") < 0 ||
	    machine_register_pio(m, FW_CFG_PORT_DMA, 8, dma_port_access, machine_fw, "fw_cfg-dma") <
	        0) {
		snprintf(err, errlen, "fw_cfg ports 0x510-0x51b are already taken");
		return -1;
	}
	return 0;
}

static const char *const fw_cfg_keys[] = {"fwcfg", NULL};

LPC_DEVICE(fw_cfg) = {
    .name = "fw_cfg",
    .option = "fwcfg",
    .keys = fw_cfg_keys,
    .descr = "QEMU's fw_cfg interface (on by default with a boot ROM)",
    .usage = "  -l fwcfg[,qemu|none]\n"
             "  qemu             offer fw_cfg (ports 0x510, 0x511, DMA 0x514)\n"
             "  none             turn it off\n",
    .init = fw_cfg_init,
};
