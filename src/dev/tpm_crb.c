/*
 * TPM 2.0, CRB interface, backed by swtpm (see tpm_crb.h).
 *
 *   -l tpm,swtpm,SOCKET[,version=2.0]   lpc.tpm.type=swtpm, lpc.tpm.path=SOCKET
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
 */
#include "dev/tpm_crb.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

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
	int fd; /* swtpm's data socket; -1 once it failed */
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

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until `fd` is ready for `events` or `deadline` passes; 0 or -1. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		struct pollfd p = {.fd = fd, .events = events};
		int rc;

		if (left <= 0)
			return errno = ETIMEDOUT, -1;
		rc = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

static int send_all(int fd, const uint8_t *p, size_t len, int64_t deadline)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_fd(fd, POLLOUT, deadline) < 0)
				return -1;
		} else {
			return -1;
		}
	}
	return 0;
}

static int recv_all(int fd, uint8_t *p, size_t len, int64_t deadline)
{
	while (len > 0) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n == 0) {
			return errno = ECONNRESET, -1; /* swtpm went away */
		} else if (errno == EINTR) {
			continue;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			if (wait_fd(fd, POLLIN, deadline) < 0)
				return -1;
		} else {
			return -1;
		}
	}
	return 0;
}

/*
 * Send `cmd` and read one response into `rsp` (TPM_CRB_BUF_SIZE bytes).
 * The response's size field is swtpm's, but checked like a guest's:
 * 10 to TPM_CRB_BUF_SIZE bytes.  0, or -1 with errno (EPROTO: a bad size).
 */
static int exchange(int fd, const uint8_t *cmd, uint32_t len, uint8_t *rsp, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	uint32_t size;

	if (send_all(fd, cmd, len, deadline) < 0 || recv_all(fd, rsp, 6, deadline) < 0)
		return -1;
	size = be32(rsp + 2);
	if (size < TPM2_HEADER_SIZE || size > TPM_CRB_BUF_SIZE)
		return errno = EPROTO, -1;
	return recv_all(fd, rsp + 6, size - 6, deadline);
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
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* ---- configuration, ACPI ---- */

/* Connect to swtpm's data socket at `path`; the fd, or -1 with `err`. */
static int connect_swtpm(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		snprintf(err, errlen, "cannot connect to swtpm at %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Checkpoint, suspend and migration refuse while a TPM is configured
 * ("lpc.tpm cannot be saved yet"): swtpm keeps the TPM's state, and
 * moving it with the guest is not done yet. */
static const struct state_ops crb_state_ops = {.save = NULL};

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

static int crb_init(struct machine *m, char *err, size_t errlen)
{
	struct tpm_crb *t;
	const char *path;
	int fd;

	if (config_get("lpc.tpm.type") == NULL)
		return 0;
	if (crb_check_config(&path, err, errlen) < 0)
		return -1;
	fd = connect_swtpm(path, err, errlen);
	if (fd < 0)
		return -1;
	t = tpm_crb_new(fd, path, true);
	if (t == NULL) {
		close(fd);
		snprintf(err, errlen, "out of memory or threads");
		return -1;
	}
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

static const char *const crb_keys[] = {"tpm.type", "tpm.path", "tpm.version", NULL};

LPC_DEVICE(tpm_crb) = {
    .name = "tpm",
    .option = "tpm",
    .keys = crb_keys,
    .descr = "TPM 2.0 (CRB interface at 0xFED40000) backed by swtpm",
    .usage = "  -l tpm,swtpm,SOCKET[,version=2.0]\n"
             "  SOCKET           swtpm's data socket: swtpm socket --tpm2 --server\n"
             "                   type=unixio,path=SOCKET --flags not-need-init ...\n"
             "  version=2.0      the only version offered\n",
    .init = crb_init,
    .write_dsdt = crb_write_dsdt,
};
