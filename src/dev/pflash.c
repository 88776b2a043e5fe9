#include "dev/pflash.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/machine.h"
#include "lib/log.h"

#define CMD_READ_ARRAY    0xff
#define CMD_PROGRAM       0x10
#define CMD_PROGRAM_ALT   0x40
#define CMD_ERASE         0x20
#define CMD_ERASE_CONFIRM 0xd0
#define CMD_CLEAR_STATUS  0x50
#define CMD_READ_STATUS   0x70
#define CMD_READ_ID       0x90

#define STATUS_READY      0x80
#define STATUS_ERASE_ERR  0x20
#define STATUS_PROG_ERR   0x10

#define ID_MANUFACTURER   0x89 /* Intel */
#define ID_DEVICE         0x18

enum pflash_mode {
	MODE_ARRAY,   /* reads return the contents */
	MODE_STATUS,  /* reads return the status register */
	MODE_ID,      /* reads return the identifier */
	MODE_PROGRAM, /* the next write is data to program */
	MODE_ERASE,   /* the next write must be the erase confirmation */
};

struct pflash {
	pthread_mutex_t lock;
	uint8_t *data; /* the file, mapped shared */
	uint64_t size; /* bytes */
	enum pflash_mode mode;
	uint8_t status;
	bool dirty; /* written since the last msync */
	void (*array_hook)(void *arg, bool on);
	void *array_arg;
};

static struct ratelimit pflash_rl = RATELIMIT_INIT;

struct pflash *pflash_open(const char *path, char *err, size_t errlen)
{
	struct pflash *pf = calloc(1, sizeof(*pf));
	struct stat st;
	int fd = open(path, O_RDWR | O_CLOEXEC);

	if (pf == NULL || fd < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "variable store %s: %s", path, strerror(errno));
		goto fail;
	}
	if (st.st_size <= 0 || st.st_size % PFLASH_BLOCK_SIZE != 0 ||
	    st.st_size > PFLASH_MAX_SIZE) {
		snprintf(err, errlen,
		         "variable store %s: %lld bytes (want a multiple of %u, at most "
		         "16 MiB)",
		         path, (long long)st.st_size, PFLASH_BLOCK_SIZE);
		goto fail;
	}
	pf->size = (uint64_t)st.st_size;
	pf->data = mmap(NULL, pf->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (pf->data == MAP_FAILED) {
		snprintf(err, errlen, "variable store %s: cannot map it: %s", path,
		         strerror(errno));
		pf->data = NULL;
		goto fail;
	}
	close(fd);
	pthread_mutex_init(&pf->lock, NULL);
	pf->mode = MODE_ARRAY;
	pf->status = STATUS_READY;
	return pf;
fail:
	if (fd >= 0)
		close(fd);
	free(pf);
	return NULL;
}

int pflash_sync(struct pflash *pf)
{
	int rc = 0;

	pthread_mutex_lock(&pf->lock);
	if (pf->dirty) {
		rc = msync(pf->data, pf->size, MS_SYNC);
		pf->dirty = rc != 0;
	}
	pthread_mutex_unlock(&pf->lock);
	if (rc < 0)
		log_ratelimited(&pflash_rl, LOG_WARN, "variable store: msync failed: %s",
		                strerror(errno));
	return rc;
}

void pflash_close(struct pflash *pf)
{
	if (pf == NULL)
		return;
	pflash_sync(pf);
	munmap(pf->data, pf->size);
	pthread_mutex_destroy(&pf->lock);
	free(pf);
}

uint64_t pflash_size(const struct pflash *pf)
{
	return pf->size;
}

void *pflash_data(struct pflash *pf)
{
	return pf->data;
}

void pflash_set_array_hook(struct pflash *pf, void (*fn)(void *arg, bool on), void *arg)
{
	pthread_mutex_lock(&pf->lock);
	pf->array_hook = fn;
	pf->array_arg = arg;
	pthread_mutex_unlock(&pf->lock);
}

/* The byte a non-array read returns at `offset`. */
static uint8_t register_byte(const struct pflash *pf, uint64_t offset)
{
	if (pf->mode == MODE_ID)
		return (offset & 0xff) == 0   ? ID_MANUFACTURER
		       : (offset & 0xff) == 1 ? ID_DEVICE
		                              : 0;
	return pf->status;
}

static uint64_t flash_read(const struct pflash *pf, uint64_t offset, unsigned size)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < size; i++) {
		uint64_t off = offset + i;
		uint8_t b = 0xff;

		if (off < pf->size)
			b = pf->mode == MODE_ARRAY ? pf->data[off] : register_byte(pf, off);
		v |= (uint64_t)b << (8 * i);
	}
	return v;
}

static void program(struct pflash *pf, uint64_t offset, unsigned size, uint64_t val)
{
	if (offset >= pf->size || size > pf->size - offset) {
		pf->status |= STATUS_PROG_ERR;
		return;
	}
	/* As QEMU's pflash_cfi01 (which OVMF is tested on): the value is
	 * stored as written, not ANDed into the cells as real NOR would. */
	for (unsigned i = 0; i < size; i++)
		pf->data[offset + i] = (uint8_t)(val >> (8 * i));
	pf->dirty = true;
}

static void erase_block(struct pflash *pf, uint64_t offset)
{
	uint64_t start = offset & ~(uint64_t)(PFLASH_BLOCK_SIZE - 1);

	if (start >= pf->size) {
		pf->status |= STATUS_ERASE_ERR;
		return;
	}
	memset(pf->data + start, 0xff, PFLASH_BLOCK_SIZE);
	pf->dirty = true;
}

/* A command write (the low byte of the value counts, as on an x8 part). */
static bool command(struct pflash *pf, uint8_t cmd)
{
	switch (cmd) {
	case CMD_READ_ARRAY:
		pf->mode = MODE_ARRAY;
		return true; /* the guest is done for now: sync */
	case CMD_PROGRAM:
	case CMD_PROGRAM_ALT:
		pf->mode = MODE_PROGRAM;
		break;
	case CMD_ERASE:
		pf->mode = MODE_ERASE;
		break;
	case CMD_CLEAR_STATUS:
		pf->status = 0;
		pf->mode = MODE_ARRAY;
		break;
	case CMD_READ_STATUS:
		pf->mode = MODE_STATUS;
		break;
	case CMD_READ_ID:
		pf->mode = MODE_ID;
		break;
	default:
		log_ratelimited(&pflash_rl, LOG_WARN,
		                "variable store: unsupported flash command 0x%02x", cmd);
		pf->mode = MODE_ARRAY;
		break;
	}
	return false;
}

/* Returns true when the file should be synced. */
static bool flash_write(struct pflash *pf, uint64_t offset, unsigned size, uint64_t val)
{
	switch (pf->mode) {
	case MODE_PROGRAM:
		program(pf, offset, size, val);
		pf->status |= STATUS_READY;
		pf->mode = MODE_STATUS;
		return false;
	case MODE_ERASE:
		pf->mode = MODE_STATUS;
		if ((uint8_t)val != CMD_ERASE_CONFIRM) {
			pf->status |=
			    STATUS_ERASE_ERR | STATUS_PROG_ERR; /* command sequence error */
			return false;
		}
		erase_block(pf, offset);
		pf->status |= STATUS_READY;
		return true;
	default:
		return command(pf, (uint8_t)val);
	}
}

int pflash_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct pflash *pf = arg;
	bool sync = false, was_array;

	if (size == 0 || size > 8)
		return 0;
	pthread_mutex_lock(&pf->lock);
	was_array = pf->mode == MODE_ARRAY;
	if (is_write)
		sync = flash_write(pf, offset, size, *val);
	else
		*val = flash_read(pf, offset, size);
	if (pf->array_hook != NULL && was_array != (pf->mode == MODE_ARRAY))
		pf->array_hook(pf->array_arg, pf->mode == MODE_ARRAY);
	pthread_mutex_unlock(&pf->lock);
	if (sync)
		pflash_sync(pf);
	return 0;
}

/* ---- saved state ---- */

#define PFLASH_STATE_VERSION 1
#define STATUS_BITS          (STATUS_READY | STATUS_ERASE_ERR | STATUS_PROG_ERR)

static int pflash_save(void *arg, struct sbuf *out, char *err, size_t errlen)
{
	struct pflash *pf = arg;

	(void)err;
	(void)errlen;
	/* Not a sync: the caller flushes the store (pflash_sync) with the disks. */
	pthread_mutex_lock(&pf->lock);
	sbuf_put_u16(out, PFLASH_STATE_VERSION);
	sbuf_put_u8(out, (uint8_t)pf->mode);
	sbuf_put_u8(out, pf->status);
	pthread_mutex_unlock(&pf->lock);
	return 0;
}

static int pflash_restore(void *arg, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct pflash *pf = arg;
	uint8_t mode, status;
	bool was_array;

	if (sbuf_get_version(in, PFLASH_STATE_VERSION) == 0)
		return snprintf(err, errlen, "%s", in->why), -1;
	mode = sbuf_get_u8(in);
	status = sbuf_get_u8(in);
	if (mode > MODE_ERASE)
		sbuf_fail(in, "flash mode %u > %u", mode, MODE_ERASE);
	if (status & ~STATUS_BITS)
		sbuf_fail(in, "flash status 0x%02x has unknown bits", status);
	if (in->failed)
		return snprintf(err, errlen, "%s", in->why), -1;
	pthread_mutex_lock(&pf->lock);
	was_array = pf->mode == MODE_ARRAY;
	pf->mode = (enum pflash_mode)mode;
	pf->status = status;
	if (pf->array_hook != NULL && was_array != (pf->mode == MODE_ARRAY))
		pf->array_hook(pf->array_arg, pf->mode == MODE_ARRAY);
	pthread_mutex_unlock(&pf->lock);
	return 0;
}

/* A checkpoint writes the variable store back first: like a disk, the
 * store is not in the state file, its file is. */
static int pflash_quiesce(void *arg, char *err, size_t errlen)
{
	if (pflash_sync(arg) == 0)
		return 0;
	snprintf(err, errlen, "cannot write the variable store back: %s", strerror(errno));
	return -1;
}

const struct state_ops pflash_state_ops = {
    .quiesce = pflash_quiesce,
    .save = pflash_save,
    .restore = pflash_restore,
};

int pflash_add_state(struct machine *m, struct pflash *pf)
{
	return machine_add_state(m, "lpc.pflash", &pflash_state_ops, pf);
}
