/*
 * TPM 2.0, CRB interface, backed by swtpm (see tpm_crb.h).
 *
 *   -l tpm,swtpm,SOCKET[,ctrl=CTRL][,version=2.0]
 *        lpc.tpm.type=swtpm, lpc.tpm.path=SOCKET, lpc.tpm.ctrl=CTRL
 *
 * SOCKET is swtpm's data channel (`swtpm socket --tpm2 --server
 * type=unixio,path=SOCKET --flags not-need-init`): each command is its bytes
 * out, one response back.  The TPM2_Startup is the OS's (Linux sends it
 * when the self-test answers TPM_RC_INITIALIZE); swtpm's CMD_INIT on the
 * control channel is what not-need-init spares us.
 *
 * Threads: the vCPU takes `lock` to read and write registers and to copy a
 * started command into `cmd`; the worker takes it only to pick the command
 * up and to post the response, never across socket I/O.  A swtpm that
 * stops answering therefore costs the guest that command's START bit,
 * never a vCPU.  When the socket fails (closed, reset, timed out) the
 * command and every later one complete with TPM_RC_FAILURE, with one log
 * line; the guest sees a broken TPM and runs on.
 *
 * Checkpoints, suspend and migration carry the TPM when CTRL, swtpm's
 * control socket, is given: the section holds the registers, the buffer
 * and swtpm's permanent, volatile and save-state blobs (backend/swtpm.h),
 * which a restore hands to the swtpm the new khyve is given (STOP, the
 * blobs, INIT), as QEMU's tpm-emulator does.  Without CTRL they refuse.
 * CRB_CTRL_CANCEL is kept but not passed on: libtpms runs a command to its
 * end in swtpm's one thread, so swtpm's CANCEL_TPM_CMD would not stop it.
 */
#include "dev/tpm_crb.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/swtpm.h"
#include "core/machine.h"
#include "core/snapshot.h"
#include "dev/lpc.h"
#include "lib/aml.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/sandbox.h"

#define EXCHANGE_TIMEOUT_MS 120000 /* RSA key generation in a slow host */

/* The interface identifier (PTP table 21): CRB active and the only one
 * offered, version 1, 64-byte transfers, locality 0 only, IBM's IDs as
 * bhyve and QEMU report. */
#define INTF_ID_LO                                                                                 \
	((1u << 0) /* type: CRB */ | (1u << 4) /* version: CRB */ |                                \
	 (3u << 11) /* 64-byte transfers */ | (1u << 14) /* CRB supported */ |                     \
	 (1u << 17) /* selector: CRB */)
#define INTF_ID_HI 0x10141014u /* DID, VID */

struct tpm_crb {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	bool threaded, quit;
	int fd;      /* swtpm's data socket; -1 once it failed */
	int ctrl_fd; /* swtpm's control socket (ctrl=), or -1: no checkpoints */
	int timeout_ms;
	char what[128];

	/* Registers of locality 0 (under lock). */
	uint32_t loc_state, loc_sts, ctrl_sts, ctrl_cancel, int_enable, int_sts;
	bool busy;        /* CRB_CTRL_START reads 1 */
	bool cmd_pending; /* `cmd` waits for the worker */
	uint8_t buf[TPM_CRB_BUF_SIZE];

	/* The command in flight, copied out of `buf` at START. */
	uint8_t cmd[TPM_CRB_BUF_SIZE];
	uint32_t cmd_len;
};

static struct ratelimit crb_rl = RATELIMIT_INIT;
static uint64_t control_area; /* set by init when configured */

uint64_t tpm_crb_control_area(void)
{
	return control_area;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be(uint8_t *p, uint32_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

/* A TPM 2.0 error response: TPM_ST_NO_SESSIONS, 10 bytes, `rc`. */
static void error_response(uint8_t *out, uint32_t rc)
{
	put_be(out, 0x8001, 2);
	put_be(out + 2, TPM2_HEADER_SIZE, 4);
	put_be(out + 6, rc, 4);
}

/* ---- the exchange with swtpm (worker thread, no lock held) ---- */

/*
 * Send `cmd` and read one response into `rsp` (TPM_CRB_BUF_SIZE bytes).
 * The response's size field is swtpm's, but checked like a guest's:
 * 10 to TPM_CRB_BUF_SIZE bytes.  0, or -1 with errno (EPROTO: a bad size).
 */
static int exchange(int fd, const uint8_t *cmd, uint32_t len, uint8_t *rsp, int timeout_ms)
{
	int64_t deadline = swtpm_now_ms() + timeout_ms;
	uint32_t size;

	if (swtpm_send_all(fd, cmd, len, deadline) < 0 || swtpm_recv_all(fd, rsp, 6, deadline) < 0)
		return -1;
	size = be32(rsp + 2);
	if (size < TPM2_HEADER_SIZE || size > TPM_CRB_BUF_SIZE)
		return errno = EPROTO, -1;
	return swtpm_recv_all(fd, rsp + 6, size - 6, deadline);
}

/* Run the picked-up command; the response lands in `rsp`. */
static void run_command(struct tpm_crb *t, int fd, const uint8_t *cmd, uint32_t len, uint8_t *rsp)
{
	if (fd >= 0 && exchange(fd, cmd, len, rsp, t->timeout_ms) == 0)
		return;
	error_response(rsp, TPM2_RC_FAILURE);
	if (fd < 0)
		return;
	pthread_mutex_lock(&t->lock);
	if (t->fd == fd) {
		log_ratelimited(&crb_rl, LOG_WARN,
		                "tpm: swtpm socket %s: %s; TPM commands fail from now on", t->what,
		                errno == EPROTO ? "bad response size" : strerror(errno));
		close(t->fd);
		t->fd = -1;
	}
	pthread_mutex_unlock(&t->lock);
}

/* Pick up the pending command (lock held), run it unlocked, post it. */
static void serve_one(struct tpm_crb *t)
{
	static __thread uint8_t cmd[TPM_CRB_BUF_SIZE], rsp[TPM_CRB_BUF_SIZE];
	uint32_t len = t->cmd_len;
	int fd = t->fd;

	memcpy(cmd, t->cmd, len);
	t->cmd_pending = false;
	pthread_mutex_unlock(&t->lock);
	run_command(t, fd, cmd, len, rsp);
	pthread_mutex_lock(&t->lock);
	memcpy(t->buf, rsp, be32(rsp + 2));
	t->busy = false; /* START reads 0: the OS reads the response */
}

bool tpm_crb_run_pending(struct tpm_crb *t)
{
	bool ran = false;

	pthread_mutex_lock(&t->lock);
	if (t->cmd_pending) {
		serve_one(t);
		ran = true;
	}
	pthread_mutex_unlock(&t->lock);
	return ran;
}

static void wake_worker(void *arg)
{
	struct tpm_crb *t = arg;

	pthread_mutex_lock(&t->lock);
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
}

static void *worker(void *arg)
{
	struct tpm_crb *t = arg;

	pthread_mutex_lock(&t->lock);
	while (!t->quit) {
		/* Started before the sandbox is armed: wake_worker() wakes us then. */
		pthread_mutex_unlock(&t->lock);
		sandbox_thread_enter(SANDBOX_TPM);
		pthread_mutex_lock(&t->lock);
		if (t->cmd_pending)
			serve_one(t);
		else if (!t->quit)
			pthread_cond_wait(&t->wake, &t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* ---- registers (vCPU thread, lock held) ---- */

/* START: take the command out of the buffer and hand it on. */
static void start_command(struct tpm_crb *t)
{
	uint32_t len = be32(t->buf + 2);

	if (t->busy)
		return; /* one at a time; the write is ignored as PTP says */
	t->busy = true;
	if (len < TPM2_HEADER_SIZE || len > TPM_CRB_BUF_SIZE) {
		log_ratelimited(&crb_rl, LOG_WARN, "tpm: command of %u bytes refused (10 to %u)",
		                len, TPM_CRB_BUF_SIZE);
		error_response(t->buf, TPM2_RC_COMMAND_SIZE);
		t->busy = false;
		return;
	}
	memcpy(t->cmd, t->buf, len);
	t->cmd_len = len;
	t->cmd_pending = true;
	if (t->threaded)
		pthread_cond_signal(&t->wake);
}

static void write_loc_ctrl(struct tpm_crb *t, uint32_t v)
{
	if (v & CRB_LOC_CTRL_REQUEST) {
		t->loc_state |= CRB_LOC_STATE_ASSIGNED; /* active locality 0 */
		t->loc_sts |= CRB_LOC_STS_GRANTED;
	} else if (v & CRB_LOC_CTRL_RELINQUISH) {
		t->loc_state &= ~CRB_LOC_STATE_ASSIGNED;
		t->loc_sts &= ~CRB_LOC_STS_GRANTED;
	}
}

static void write_reg(struct tpm_crb *t, uint32_t off, uint32_t v)
{
	switch (off) {
	case CRB_LOC_CTRL:
		write_loc_ctrl(t, v);
		break;
	case CRB_CTRL_REQ:
		/* Both complete at once: the register reads 0 again. */
		if (v & CRB_CTRL_REQ_CMD_READY)
			t->ctrl_sts &= ~CRB_CTRL_STS_IDLE;
		else if ((v & CRB_CTRL_REQ_GO_IDLE) && !t->busy)
			t->ctrl_sts |= CRB_CTRL_STS_IDLE;
		break;
	case CRB_CTRL_CANCEL:
		/* Kept for the OS to read back; swtpm's cancel is on its
		 * control channel, so the command still runs to its end. */
		t->ctrl_cancel = v & 1;
		break;
	case CRB_CTRL_START:
		if (v & CRB_START_INVOKE)
			start_command(t);
		break;
	case CRB_INT_ENABLE:
		t->int_enable = v; /* no interrupt is wired: the OS polls */
		break;
	case CRB_INT_STS:
		t->int_sts &= ~v;
		break;
	default:
		break; /* read-only or reserved */
	}
}

static uint32_t read_reg(const struct tpm_crb *t, uint32_t off)
{
	switch (off) {
	case CRB_LOC_STATE:
		return t->loc_state;
	case CRB_LOC_STS:
		return t->loc_sts;
	case CRB_INTF_ID:
		return INTF_ID_LO;
	case CRB_INTF_ID + 4:
		return INTF_ID_HI;
	case CRB_CTRL_STS:
		return t->ctrl_sts;
	case CRB_CTRL_CANCEL:
		return t->ctrl_cancel;
	case CRB_CTRL_START:
		return t->busy ? CRB_START_INVOKE : 0;
	case CRB_INT_ENABLE:
		return t->int_enable;
	case CRB_INT_STS:
		return t->int_sts;
	case CRB_CMD_SIZE:
	case CRB_RSP_SIZE:
		return TPM_CRB_BUF_SIZE;
	case CRB_CMD_LADDR:
	case CRB_RSP_ADDR:
		return (uint32_t)(TPM_CRB_GPA + TPM_CRB_BUF_OFF);
	default:
		return 0; /* loc_ctrl, ctrl_req, ctrl_ext, the high halves */
	}
}

/* The data buffer: any size; ignored while a command runs (PTP 6.5.3.6:
 * the buffer is the TPM's until START clears). */
static void buffer_access(struct tpm_crb *t, uint32_t off, unsigned size, bool is_write,
                          uint64_t *val)
{
	if (is_write && !t->busy)
		memcpy(&t->buf[off], val, size);
	else if (!is_write)
		memcpy(val, &t->buf[off], size);
}

static void reg_access(struct tpm_crb *t, uint32_t off, unsigned size, bool is_write, uint64_t *val)
{
	uint32_t dword = off & ~3u, shift = (off & 3u) * 8;

	if (is_write) {
		/* Linux writes 32 bits; a wider write is two, a narrower one
		 * is taken as the whole register's low bits. */
		write_reg(t, dword, (uint32_t)(*val << shift));
		if (size == 8 && (off & 3u) == 0)
			write_reg(t, dword + 4, (uint32_t)(*val >> 32));
		return;
	}
	uint64_t v = read_reg(t, dword) | (uint64_t)read_reg(t, dword + 4) << 32;

	v >>= shift;
	*val = size == 8 ? v : v & ((1ull << (size * 8)) - 1);
}

int tpm_crb_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	struct tpm_crb *t = arg;

	if (!is_write)
		*val = 0;
	if ((size != 1 && size != 2 && size != 4 && size != 8) || offset >= TPM_CRB_MMIO_SIZE) {
		log_ratelimited(&crb_rl, LOG_WARN, "tpm: bad %u-byte access at 0x%llx ignored",
		                size, (unsigned long long)offset);
		return 0;
	}
	if (offset >= 0x1000 || offset + size > 0x1000) {
		if (!is_write) /* localities 1-4: not offered */
			*val = size == 8 ? ~0ull : (1ull << (size * 8)) - 1;
		return 0;
	}
	pthread_mutex_lock(&t->lock);
	if (offset >= TPM_CRB_BUF_OFF)
		buffer_access(t, (uint32_t)(offset - TPM_CRB_BUF_OFF), size, is_write, val);
	else if (offset + size <= TPM_CRB_BUF_OFF)
		reg_access(t, (uint32_t)offset, size, is_write, val);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

bool tpm_crb_busy(const struct tpm_crb *t)
{
	struct tpm_crb *u = (struct tpm_crb *)t;
	bool busy;

	pthread_mutex_lock(&u->lock);
	busy = u->busy;
	pthread_mutex_unlock(&u->lock);
	return busy;
}

void tpm_crb_set_timeout_ms(struct tpm_crb *t, int ms)
{
	t->timeout_ms = ms;
}

struct tpm_crb *tpm_crb_new(int fd, const char *what, bool threaded)
{
	struct tpm_crb *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->wake, NULL);
	t->fd = fd;
	t->ctrl_fd = -1;
	t->timeout_ms = EXCHANGE_TIMEOUT_MS;
	snprintf(t->what, sizeof(t->what), "%s", what);
	/* bhyve's reset values: established, registers valid, idle. */
	t->loc_state = CRB_LOC_STATE_ESTABLISHED | CRB_LOC_STATE_REG_VALID;
	t->ctrl_sts = CRB_CTRL_STS_IDLE;
	t->threaded = threaded;
	if (threaded && pthread_create(&t->thread, NULL, worker, t) != 0) {
		pthread_cond_destroy(&t->wake);
		pthread_mutex_destroy(&t->lock);
		free(t);
		return NULL;
	}
	if (threaded)
		sandbox_wake_at_arm(wake_worker, t);
	return t;
}

void tpm_crb_free(struct tpm_crb *t)
{
	if (t == NULL)
		return;
	if (t->threaded) {
		sandbox_cancel_wake(wake_worker, t);
		pthread_mutex_lock(&t->lock);
		t->quit = true;
		pthread_cond_signal(&t->wake);
		pthread_mutex_unlock(&t->lock);
		pthread_join(t->thread, NULL);
	}
	if (t->fd >= 0)
		close(t->fd);
	if (t->ctrl_fd >= 0)
		close(t->ctrl_fd);
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* ---- configuration, ACPI ---- */

/* ---- checkpoints: the registers, the buffer and swtpm's state blobs ---- */

#define CTRL_TIMEOUT_MS 10000
#define QUIESCE_MS      1000

/* Wait (bounded) for the command in flight: its response belongs in the
 * checkpoint's buffer, and swtpm's state must not move under GET_STATEBLOB. */
static int crb_quiesce(void *arg, char *err, size_t errlen)
{
	struct timespec step = {0, 1000 * 1000};

	for (int i = 0; i < QUIESCE_MS; i++) {
		if (!tpm_crb_busy(arg))
			return 0;
		nanosleep(&step, NULL);
	}
	snprintf(err, errlen, "a TPM command still runs after %d ms", QUIESCE_MS);
	return -1;
}

static void free_blobs(struct swtpm_blob *b)
{
	for (unsigned i = 0; i < SWTPM_NBLOBS; i++) {
		free(b[i].data);
		b[i].data = NULL;
	}
}

/* Version 1: six registers, the buffer, then per blob type, flags, length, bytes. */
static int crb_save(void *arg, struct sbuf *out, char *err, size_t errlen)
{
	struct tpm_crb *t = arg;
	struct swtpm_blob blobs[SWTPM_NBLOBS] = {{0}};
	int rc = 0;

	for (unsigned i = 0; i < SWTPM_NBLOBS && rc == 0; i++) {
		blobs[i].type = SWTPM_BLOB_PERMANENT + i;
		rc = swtpm_ctrl_get_blob(t->ctrl_fd, &blobs[i], CTRL_TIMEOUT_MS, err, errlen);
	}
	if (rc == 0) {
		pthread_mutex_lock(&t->lock);
		sbuf_put_u16(out, 1);
		sbuf_put_u32(out, t->loc_state);
		sbuf_put_u32(out, t->loc_sts);
		sbuf_put_u32(out, t->ctrl_sts);
		sbuf_put_u32(out, t->ctrl_cancel);
		sbuf_put_u32(out, t->int_enable);
		sbuf_put_u32(out, t->int_sts);
		sbuf_put_bytes(out, t->buf, sizeof(t->buf));
		pthread_mutex_unlock(&t->lock);
		for (unsigned i = 0; i < SWTPM_NBLOBS; i++) {
			sbuf_put_u32(out, blobs[i].type);
			sbuf_put_u32(out, blobs[i].flags);
			sbuf_put_u32(out, blobs[i].len);
			sbuf_put_bytes(out, blobs[i].data, blobs[i].len);
		}
	}
	free_blobs(blobs);
	return rc;
}

/* One blob of the section, checked: its type in order, known flags, a
 * length the section really holds. */
static void read_blob(struct sbuf_reader *in, struct swtpm_blob *b, uint32_t type)
{
	b->type = sbuf_get_u32(in);
	b->flags = sbuf_get_u32(in);
	b->len = sbuf_get_u32(in);
	if (in->failed)
		return;
	if (b->type != type || (b->flags & ~SWTPM_STATE_ENCRYPTED) != 0 ||
	    b->len > SWTPM_BLOB_MAX || b->len > in->len - in->off) {
		sbuf_fail(in, "state blob %u: type %u, flags 0x%x, %u bytes", type, b->type,
		          b->flags, b->len);
		b->len = 0;
		return;
	}
	b->data = malloc(b->len ? b->len : 1);
	if (b->data == NULL) {
		sbuf_fail(in, "state blob %u: out of memory", type);
		b->len = 0;
		return;
	}
	sbuf_get_bytes(in, b->data, b->len);
}

static void restore_regs(struct tpm_crb *t, struct sbuf_reader *in)
{
	uint32_t r[6];

	for (unsigned i = 0; i < 6; i++)
		r[i] = sbuf_get_u32(in);
	pthread_mutex_lock(&t->lock);
	t->loc_state =
	    r[0] & (CRB_LOC_STATE_ESTABLISHED | CRB_LOC_STATE_ASSIGNED | CRB_LOC_STATE_REG_VALID);
	t->loc_sts = r[1] & CRB_LOC_STS_GRANTED;
	t->ctrl_sts = r[2] & CRB_CTRL_STS_IDLE;
	t->ctrl_cancel = r[3] & 1;
	t->int_enable = r[4];
	t->int_sts = r[5];
	sbuf_get_bytes(in, t->buf, sizeof(t->buf));
	t->busy = t->cmd_pending = false;
	pthread_mutex_unlock(&t->lock);
}

static int crb_restore(void *arg, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct tpm_crb *t = arg;
	struct swtpm_blob blobs[SWTPM_NBLOBS] = {{0}};
	int rc = 0;

	if (sbuf_get_version(in, 1) == 0)
		return 0; /* the caller reports the reader's failure */
	restore_regs(t, in);
	for (unsigned i = 0; i < SWTPM_NBLOBS; i++)
		read_blob(in, &blobs[i], SWTPM_BLOB_PERMANENT + i);
	if (!in->failed && t->ctrl_fd < 0) {
		snprintf(err, errlen, "restoring a TPM needs swtpm's control socket (ctrl=PATH)");
		rc = -1;
	} else if (!in->failed) {
		rc = swtpm_ctrl_load(t->ctrl_fd, blobs, SWTPM_NBLOBS, CTRL_TIMEOUT_MS, err, errlen);
	}
	free_blobs(blobs);
	return rc;
}

static const char *crb_never_saved(void *arg)
{
	const struct tpm_crb *t = arg;

	return t->ctrl_fd < 0 ? "swtpm's control socket is not given (-l tpm,swtpm,SOCK,ctrl=CTRL)"
	                      : NULL;
}

static const struct state_ops crb_state_ops = {
    .quiesce = crb_quiesce,
    .save = crb_save,
    .restore = crb_restore,
    .never_saved = crb_never_saved,
};

int tpm_crb_save(struct tpm_crb *t, struct sbuf *out, char *err, size_t errlen)
{
	return crb_save(t, out, err, errlen);
}

int tpm_crb_restore(struct tpm_crb *t, struct sbuf_reader *in, char *err, size_t errlen)
{
	return crb_restore(t, in, err, errlen);
}

void tpm_crb_set_ctrl(struct tpm_crb *t, int fd)
{
	if (t->ctrl_fd >= 0)
		close(t->ctrl_fd);
	t->ctrl_fd = fd;
}

static int crb_check_config(const char **path, char *err, size_t errlen)
{
	const char *type = config_get("lpc.tpm.type");
	const char *version = config_get_default("lpc.tpm.version", "2.0");

	*path = config_get("lpc.tpm.path");
	if (strcmp(type, "swtpm") != 0) {
		snprintf(err, errlen, "unknown TPM type '%s' (only swtpm)", type);
		return -1;
	}
	if (strcmp(version, "2.0") != 0) {
		snprintf(err, errlen, "unsupported TPM version '%s' (only 2.0)", version);
		return -1;
	}
	if (*path == NULL || **path == '\0') {
		snprintf(err, errlen, "-l tpm,swtpm needs swtpm's socket: -l tpm,swtpm,PATH");
		return -1;
	}
	return 0;
}

/* ctrl=PATH: swtpm's control socket, checked now (not at the first
 * checkpoint) and kept: the jail leaves no path to connect to later. */
static int connect_ctrl(struct tpm_crb *t, char *err, size_t errlen)
{
	const char *ctrl = config_get("lpc.tpm.ctrl");
	char why[160];
	int fd;

	if (ctrl == NULL)
		return 0;
	fd = swtpm_connect(ctrl, why, sizeof(why));
	if (fd < 0 || swtpm_ctrl_check(fd, 5000, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "-l tpm,...,ctrl=%s: %s", ctrl, why);
		if (fd >= 0)
			close(fd);
		tpm_crb_free(t);
		return -1;
	}
	tpm_crb_set_ctrl(t, fd);
	return 0;
}

static int crb_init(struct machine *m, char *err, size_t errlen)
{
	struct tpm_crb *t;
	const char *path;
	int fd;

	if (config_get("lpc.tpm.type") == NULL)
		return 0;
	if (crb_check_config(&path, err, errlen) < 0)
		return -1;
	fd = swtpm_connect(path, err, errlen);
	if (fd < 0)
		return -1;
	t = tpm_crb_new(fd, path, true);
	if (t == NULL) {
		close(fd);
		snprintf(err, errlen, "out of memory or threads");
		return -1;
	}
	if (connect_ctrl(t, err, errlen) < 0)
		return -1;
	if (machine_register_mmio(m, TPM_CRB_GPA, TPM_CRB_MMIO_SIZE, tpm_crb_access, t, "tpm-crb") <
	        0 ||
	    machine_add_state(m, "lpc.tpm", &crb_state_ops, t) < 0) {
		snprintf(err, errlen, "the TPM's MMIO range is already taken");
		return -1;
	}
	control_area = TPM_CRB_GPA + TPM_CRB_CTRL_OFF;
	return 0;
}

/* Device MSFT0101 (TCG ACPI 1.3, section 8.3) over the CRB's MMIO. */
static void crb_write_dsdt(struct aml *a)
{
	size_t dev, res;

	if (config_get("lpc.tpm.type") == NULL)
		return;
	dev = aml_device(a, "TPM_");
	aml_name_decl(a, "_HID");
	aml_string(a, "MSFT0101");
	aml_name_decl(a, "_STR");
	aml_string(a, "TPM 2.0 Device");
	aml_name_decl(a, "_UID");
	aml_integer(a, 1);
	aml_name_decl(a, "_CRS");
	res = aml_resource_template(a);
	aml_res_mem32_fixed(a, (uint32_t)TPM_CRB_GPA, TPM_CRB_MMIO_SIZE, true);
	aml_resource_end(a, res);
	aml_close(a, dev);
}

static const char *const crb_keys[] = {"tpm.type", "tpm.path", "tpm.ctrl", "tpm.version", NULL};

LPC_DEVICE(tpm_crb) = {
    .name = "tpm",
    .option = "tpm",
    .keys = crb_keys,
    .descr = "TPM 2.0 (CRB interface at 0xFED40000) backed by swtpm",
    .usage = "  -l tpm,swtpm,SOCKET[,ctrl=CTRL][,version=2.0]\n"
             "  SOCKET           swtpm's data socket: swtpm socket --tpm2 --server\n"
             "                   type=unixio,path=SOCKET --flags not-need-init ...\n"
             "  ctrl=CTRL        swtpm's control socket (--ctrl type=unixio,path=CTRL):\n"
             "                   the TPM's state goes into checkpoints and migrations\n"
             "  version=2.0      the only version offered\n",
    .init = crb_init,
    .write_dsdt = crb_write_dsdt,
};
