/*
 * Unit tests for the TPM 2.0 CRB device (src/dev/tpm_crb.h): locality
 * request and relinquish, cmdReady/goIdle, a command through a fake swtpm
 * (the other end of a socketpair), a swtpm that goes away, stops answering
 * or answers nonsense, oversized commands, guest accesses outside the
 * buffer, the threaded worker, the -l tpm syntax and the TPM2 ACPI table;
 * the checkpoint section against Debian's swtpm (skipped without it): a PCR
 * extended under one swtpm reads the same under a fresh one after the
 * restore, and a damaged section changes nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "backend/swtpm.h"
#include "boot/acpi.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "core/snapshot.h"
#include "dev/lpc.h"
#include "dev/tpm_crb.h"
#include "lib/config.h"
#include "lib/sbuf.h"
#include "unit.h"

struct fixture {
	struct tpm_crb *t;
	int peer; /* the fake swtpm's end */
};

static uint64_t rd(struct tpm_crb *t, uint64_t off, unsigned size)
{
	uint64_t v = 0xdeadbeef;

	assert_int_equal(tpm_crb_access(t, off, size, false, &v), 0);
	return v;
}

static void wr(struct tpm_crb *t, uint64_t off, unsigned size, uint64_t v)
{
	assert_int_equal(tpm_crb_access(t, off, size, true, &v), 0);
}

static int setup_threaded(void **state, bool threaded)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int sv[2];

	if (f == NULL || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	f->peer = sv[1];
	f->t = tpm_crb_new(sv[0], "fake-swtpm", threaded);
	if (f->t == NULL)
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_threaded(state, false);
}

static int setup_worker(void **state)
{
	return setup_threaded(state, true);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	tpm_crb_free(f->t);
	if (f->peer >= 0)
		close(f->peer);
	free(f);
	return 0;
}

/* TPM2_GetRandom(8): tag, size 12, TPM_CC_GetRandom, bytesRequested. */
static const uint8_t getrandom_cmd[12] = {0x80, 0x01, 0, 0, 0, 12, 0, 0, 0x01, 0x7b, 0, 8};
/* Its answer: success, TPM2B of 8 bytes. */
static const uint8_t getrandom_rsp[20] = {0x80, 0x01, 0, 0, 0, 20, 0, 0, 0, 0,
                                          0,    8,    1, 2, 3, 4,  5, 6, 7, 8};

/* The guest's part of a command: into the buffer 4 bytes at a time, START. */
static void guest_send(struct tpm_crb *t, const uint8_t *cmd, size_t len)
{
	for (size_t i = 0; i < len; i += 4) {
		uint32_t v = 0;

		memcpy(&v, cmd + i, len - i < 4 ? len - i : 4);
		wr(t, TPM_CRB_BUF_OFF + i, 4, v);
	}
	wr(t, CRB_CTRL_START, 4, CRB_START_INVOKE);
}

static void guest_read(struct tpm_crb *t, uint8_t *out, size_t len)
{
	for (size_t i = 0; i < len; i++)
		out[i] = (uint8_t)rd(t, TPM_CRB_BUF_OFF + i, 1);
}

static uint32_t rc_of(const uint8_t *rsp)
{
	return (uint32_t)rsp[6] << 24 | (uint32_t)rsp[7] << 16 | (uint32_t)rsp[8] << 8 | rsp[9];
}

/* Linux's crb_request_locality / crb_relinquish_locality. */
static void test_locality(void **state)
{
	struct tpm_crb *t = ((struct fixture *)*state)->t;
	uint32_t valid = CRB_LOC_STATE_REG_VALID, assigned = CRB_LOC_STATE_ASSIGNED;

	assert_int_equal(rd(t, CRB_LOC_STATE, 4) & (valid | assigned), valid);
	assert_int_equal(rd(t, CRB_LOC_STS, 4) & CRB_LOC_STS_GRANTED, 0);
	wr(t, CRB_LOC_CTRL, 4, CRB_LOC_CTRL_REQUEST);
	assert_int_equal(rd(t, CRB_LOC_STATE, 4) & (valid | assigned), valid | assigned);
	assert_int_equal(rd(t, CRB_LOC_STATE, 4) & 0x1c, 0); /* active locality 0 */
	assert_int_equal(rd(t, CRB_LOC_STS, 4) & CRB_LOC_STS_GRANTED, CRB_LOC_STS_GRANTED);
	wr(t, CRB_LOC_CTRL, 4, CRB_LOC_CTRL_RELINQUISH);
	assert_int_equal(rd(t, CRB_LOC_STATE, 4) & (valid | assigned), valid);
	assert_int_equal(rd(t, CRB_LOC_STS, 4) & CRB_LOC_STS_GRANTED, 0);
}

/* What crb_map_io reads: the interface (CRB, active), one buffer for
 * command and response inside the MMIO range; cmdReady and goIdle
 * complete at once. */
static void test_layout_and_idle(void **state)
{
	struct tpm_crb *t = ((struct fixture *)*state)->t;
	uint64_t id = rd(t, CRB_INTF_ID, 8);

	assert_int_equal(id & 0xf, 1);       /* interface type: CRB */
	assert_int_equal((id >> 14) & 1, 1); /* CRB supported */
	assert_int_equal((id >> 17) & 3, 1); /* selector: CRB */
	assert_int_equal(rd(t, CRB_INTF_ID + 4, 4), id >> 32);
	assert_int_equal(rd(t, CRB_CMD_SIZE, 4), TPM_CRB_BUF_SIZE);
	assert_int_equal(rd(t, CRB_RSP_SIZE, 4), TPM_CRB_BUF_SIZE);
	assert_int_equal(rd(t, CRB_CMD_LADDR, 4), TPM_CRB_GPA + TPM_CRB_BUF_OFF);
	assert_int_equal(rd(t, CRB_CMD_HADDR, 4), 0);
	assert_int_equal(rd(t, CRB_RSP_ADDR, 8), TPM_CRB_GPA + TPM_CRB_BUF_OFF);
	assert_true(TPM_CRB_BUF_OFF + TPM_CRB_BUF_SIZE <= 0x1000);

	assert_int_equal(rd(t, CRB_CTRL_STS, 4) & CRB_CTRL_STS_IDLE, CRB_CTRL_STS_IDLE);
	wr(t, CRB_CTRL_REQ, 4, CRB_CTRL_REQ_CMD_READY);
	assert_int_equal(rd(t, CRB_CTRL_REQ, 4), 0);
	assert_int_equal(rd(t, CRB_CTRL_STS, 4), 0);
	wr(t, CRB_CTRL_REQ, 4, CRB_CTRL_REQ_GO_IDLE);
	assert_int_equal(rd(t, CRB_CTRL_REQ, 4), 0);
	assert_int_equal(rd(t, CRB_CTRL_STS, 4), CRB_CTRL_STS_IDLE);
}

/* START: the command reaches swtpm byte for byte, START stays set until
 * the response is in the buffer, and the guest cannot change the command
 * meanwhile. */
static void test_command(void **state)
{
	struct fixture *f = *state;
	uint8_t got[sizeof(getrandom_cmd) + 1], rsp[sizeof(getrandom_rsp)];

	wr(f->t, CRB_CTRL_REQ, 4, CRB_CTRL_REQ_CMD_READY);
	guest_send(f->t, getrandom_cmd, sizeof(getrandom_cmd));
	assert_int_equal(rd(f->t, CRB_CTRL_START, 4), CRB_START_INVOKE);
	assert_true(tpm_crb_busy(f->t));
	wr(f->t, TPM_CRB_BUF_OFF, 4, 0xffffffff); /* ignored while busy */
	assert_int_equal(rd(f->t, TPM_CRB_BUF_OFF, 1), 0x80);
	assert_int_equal(write(f->peer, getrandom_rsp, sizeof(getrandom_rsp)),
	                 (ssize_t)sizeof(getrandom_rsp));
	assert_true(tpm_crb_run_pending(f->t));
	assert_false(tpm_crb_run_pending(f->t));
	assert_int_equal(rd(f->t, CRB_CTRL_START, 4), 0);
	assert_int_equal(rd(f->t, CRB_CTRL_STS, 4) & CRB_CTRL_STS_ERROR, 0);
	assert_int_equal(recv(f->peer, got, sizeof(got), MSG_DONTWAIT), sizeof(getrandom_cmd));
	assert_memory_equal(got, getrandom_cmd, sizeof(getrandom_cmd));
	guest_read(f->t, rsp, sizeof(rsp));
	assert_memory_equal(rsp, getrandom_rsp, sizeof(rsp));
}

/* swtpm gone: this command and the next answer TPM_RC_FAILURE, the
 * device keeps working as a broken TPM. */
static void test_socket_gone(void **state)
{
	struct fixture *f = *state;
	uint8_t rsp[10];

	close(f->peer);
	f->peer = -1;
	for (int i = 0; i < 2; i++) {
		guest_send(f->t, getrandom_cmd, sizeof(getrandom_cmd));
		assert_true(tpm_crb_run_pending(f->t));
		assert_int_equal(rd(f->t, CRB_CTRL_START, 4), 0);
		guest_read(f->t, rsp, sizeof(rsp));
		assert_int_equal(rsp[5], 10);
		assert_int_equal(rc_of(rsp), TPM2_RC_FAILURE);
	}
}

/* swtpm answers with a size outside 10..buffer: a failure, socket dropped. */
static void test_bad_response(void **state)
{
	struct fixture *f = *state;
	static const uint8_t huge[6] = {0x80, 0x01, 0x00, 0x10, 0x00, 0x00};
	uint8_t rsp[10];

	assert_int_equal(write(f->peer, huge, sizeof(huge)), (ssize_t)sizeof(huge));
	guest_send(f->t, getrandom_cmd, sizeof(getrandom_cmd));
	assert_true(tpm_crb_run_pending(f->t));
	guest_read(f->t, rsp, sizeof(rsp));
	assert_int_equal(rc_of(rsp), TPM2_RC_FAILURE);
}

/* swtpm that never answers: the exchange times out into a failure. */
static void test_timeout(void **state)
{
	struct fixture *f = *state;
	uint8_t rsp[10];

	tpm_crb_set_timeout_ms(f->t, 50);
	guest_send(f->t, getrandom_cmd, sizeof(getrandom_cmd));
	assert_true(tpm_crb_run_pending(f->t));
	guest_read(f->t, rsp, sizeof(rsp));
	assert_int_equal(rc_of(rsp), TPM2_RC_FAILURE);
}

/* A header size past the buffer (or below a header) is answered with
 * TPM_RC_COMMAND_SIZE at once; nothing reaches swtpm. */
static void test_oversized(void **state)
{
	struct fixture *f = *state;
	static const uint8_t sizes[][4] = {{0, 0, 0x10, 0}, {0xff, 0xff, 0xff, 0xff}, {0, 0, 0, 9}};
	uint8_t cmd[12], rsp[10], got[4];

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memcpy(cmd, getrandom_cmd, sizeof(cmd));
		memcpy(cmd + 2, sizes[i], 4);
		guest_send(f->t, cmd, sizeof(cmd));
		assert_int_equal(rd(f->t, CRB_CTRL_START, 4), 0);
		assert_false(tpm_crb_run_pending(f->t));
		guest_read(f->t, rsp, sizeof(rsp));
		assert_int_equal(rc_of(rsp), TPM2_RC_COMMAND_SIZE);
	}
	assert_int_equal(recv(f->peer, got, sizeof(got), MSG_DONTWAIT), -1);
}

/* Outside locality 0's page, across the buffer's end, odd sizes: reads
 * give all ones or zero, writes change nothing. */
static void test_outside(void **state)
{
	struct tpm_crb *t = ((struct fixture *)*state)->t;
	uint64_t v = 0x1122334455667788ull;

	assert_int_equal(rd(t, 0x1000, 4), 0xffffffff);
	assert_int_equal(rd(t, TPM_CRB_MMIO_SIZE - 8, 8), ~0ull);
	assert_int_equal(rd(t, TPM_CRB_MMIO_SIZE, 4), 0);
	assert_int_equal(rd(t, UINT64_MAX - 2, 4), 0);
	assert_int_equal(rd(t, 0xffe, 4), 0xffffffff); /* crosses into locality 1 */
	assert_int_equal(rd(t, 0x7e, 4), 0);           /* registers into the buffer */
	assert_int_equal(rd(t, 0x10, 3), 0);
	wr(t, 0xffc, 8, v);
	wr(t, 0x1000, 4, CRB_LOC_CTRL_REQUEST);
	wr(t, UINT64_MAX, 1, 1);
	wr(t, 0x10, 16, 1);
	assert_int_equal(rd(t, CRB_LOC_STATE, 4) & CRB_LOC_STATE_ASSIGNED, 0);
	wr(t, 0xff8, 8, v); /* the buffer's last 8 bytes */
	assert_int_equal(rd(t, 0xff8, 8), v);
	assert_int_equal(rd(t, 0xffc, 2), 0x3344);
	wr(t, CRB_CMD_SIZE, 4, 0x10000); /* read-only */
	assert_int_equal(rd(t, CRB_CMD_SIZE, 4), TPM_CRB_BUF_SIZE);
}

/* The worker thread: START returns at once, the response comes later. */
static void test_worker(void **state)
{
	struct fixture *f = *state;
	uint8_t got[sizeof(getrandom_cmd)], rsp[sizeof(getrandom_rsp)];
	struct timespec pause = {0, 1000000};
	int i;

	guest_send(f->t, getrandom_cmd, sizeof(getrandom_cmd));
	assert_int_equal(rd(f->t, CRB_CTRL_START, 4), CRB_START_INVOKE);
	assert_int_equal(read(f->peer, got, sizeof(got)), (ssize_t)sizeof(got));
	assert_memory_equal(got, getrandom_cmd, sizeof(got));
	assert_int_equal(rd(f->t, CRB_CTRL_START, 4), CRB_START_INVOKE); /* still waiting */
	assert_int_equal(write(f->peer, getrandom_rsp, sizeof(getrandom_rsp)),
	                 (ssize_t)sizeof(getrandom_rsp));
	for (i = 0; i < 5000 && rd(f->t, CRB_CTRL_START, 4) != 0; i++)
		nanosleep(&pause, NULL);
	assert_true(i < 5000);
	guest_read(f->t, rsp, sizeof(rsp));
	assert_memory_equal(rsp, getrandom_rsp, sizeof(rsp));
}

/* -l tpm,swtpm,PATH[,version=2.0] as bhyve 14; the rest refused. */
static void test_parse(void **state)
{
	char err[256];

	(void)state;
	config_reset();
	assert_int_equal(lpc_parse_option("tpm,swtpm,/run/a,b.sock", err, sizeof(err)), 0);
	assert_string_equal(config_get("lpc.tpm.type"), "swtpm");
	assert_string_equal(config_get("lpc.tpm.path"), "/run/a,b.sock");
	assert_int_equal(lpc_parse_option("tpm,swtpm,/x", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "twice"));
	config_reset();
	assert_int_equal(lpc_parse_option("tpm,swtpm,/s,version=2.0", err, sizeof(err)), 0);
	assert_string_equal(config_get("lpc.tpm.path"), "/s");
	assert_string_equal(config_get("lpc.tpm.version"), "2.0");
	assert_int_equal(lpc_check_config(false, err, sizeof(err)), 0);
	config_reset();
	/* ctrl= (swtpm's control socket), before or after version= */
	assert_int_equal(lpc_parse_option("tpm,swtpm,/a,b,ctrl=/c,d,version=2.0", err, sizeof(err)),
	                 0);
	assert_string_equal(config_get("lpc.tpm.path"), "/a,b");
	assert_string_equal(config_get("lpc.tpm.ctrl"), "/c,d");
	assert_string_equal(config_get("lpc.tpm.version"), "2.0");
	assert_int_equal(lpc_check_config(false, err, sizeof(err)), 0);
	config_reset();
	assert_int_equal(lpc_parse_option("tpm,swtpm,/a,version=2.0,ctrl=/c", err, sizeof(err)), 0);
	assert_string_equal(config_get("lpc.tpm.ctrl"), "/c");
	assert_string_equal(config_get("lpc.tpm.version"), "2.0");
	config_reset();
	assert_int_equal(lpc_parse_option("tpm", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "-l tpm,swtpm,PATH"));
	assert_int_equal(lpc_parse_option("tpm,swtpm", err, sizeof(err)), -1);
	config_reset();
	assert_int_equal(config_set("lpc.tpm.typo", "x"), 0);
	assert_int_equal(lpc_check_config(false, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "lpc.tpm.typo"));
	config_reset();
}

/* The TPM2 table: listed in the XSDT, start method 7, the control area. */
static void test_acpi_table(void **state)
{
	struct acpi_config cfg = {.ncpus = 1};
	uint8_t *buf = calloc(1, ACPI_TABLES_SIZE);
	const uint8_t *xsdt, *tpm2 = NULL;
	size_t len;

	(void)state;
	assert_non_null(buf);
	cfg.tpm2_control_area = TPM_CRB_GPA + TPM_CRB_CTRL_OFF;
	len = acpi_build(buf, ACPI_TABLES_SIZE, ACPI_TABLES_GPA, &cfg);
	assert_true(len > 0);
	xsdt = buf + (unit_le(buf + 24, 8) - ACPI_TABLES_GPA);
	assert_memory_equal(xsdt, "XSDT", 4);
	for (uint32_t i = 36; i < unit_le(xsdt + 4, 4); i += 8) {
		const uint8_t *tab = buf + (unit_le(xsdt + i, 8) - ACPI_TABLES_GPA);

		if (memcmp(tab, "TPM2", 4) == 0)
			tpm2 = tab;
	}
	assert_non_null(tpm2);
	assert_int_equal(unit_le(tpm2 + 4, 4), 76);
	assert_int_equal(tpm2[8], 4);
	assert_int_equal(acpi_checksum(tpm2, 76), 0);
	assert_int_equal(unit_le(tpm2 + 40, 8), 0xfed40040);
	assert_int_equal(unit_le(tpm2 + 48, 4), 7);
	cfg.tpm2_control_area = 0; /* no TPM: no table */
	len = acpi_build(buf, ACPI_TABLES_SIZE, ACPI_TABLES_GPA, &cfg);
	assert_true(len > 0);
	xsdt = buf + (unit_le(buf + 24, 8) - ACPI_TABLES_GPA);
	assert_int_equal(unit_le(xsdt + 4, 4), 36 + 2 * 8);
	free(buf);
}

/* The registered device, through lpc_init_devices() as khyve starts it:
 * connects to the socket, claims 0xFED40000, names the TPM2 table's
 * control area, and makes checkpoints refuse; a socket that is not there
 * is one line. */
static void test_init(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	static struct machine m0, m, m2;
	char *dir = unit_mkdtemp(), err[512];
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	uint64_t v = 0;

	(void)state;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", dir);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	config_reset();
	assert_int_equal(config_set("lpc.tpm.type", "swtpm"), 0);
	assert_int_equal(config_set("lpc.tpm.path", "/nonexistent/swtpm.sock"), 0);
	assert_int_equal(machine_init_detached(&m0, "unit", NULL, 0, 0), 0);
	assert_int_equal(lpc_init_devices(&m0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot connect to swtpm at /nonexistent/swtpm.sock"));
	assert_null(strchr(err, '\n'));
	assert_int_equal(config_set("lpc.tpm.path", sa.sun_path), 0);
	assert_int_equal(machine_init_detached(&m, "unit", NULL, 0, 0), 0);
	assert_int_equal(lpc_init_devices(&m, err, sizeof(err)), 0);
	assert_true(iobus_access(&m.mmio, TPM_CRB_GPA + CRB_INTF_ID, 4, false, &v));
	assert_int_equal(v & 0xf, 1);
	assert_int_equal(tpm_crb_control_area(), TPM_CRB_GPA + TPM_CRB_CTRL_OFF);
	assert_int_equal(machine_state_saveable(&m, err, sizeof(err)), -1);
	assert_non_null(
	    strstr(err, "lpc.tpm cannot be saved: swtpm's control socket is not given"));
	config_set("lpc.tpm.type", "tpm-emulator");
	assert_int_equal(machine_init_detached(&m2, "unit", NULL, 0, 0), 0);
	assert_int_equal(lpc_init_devices(&m2, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown TPM type 'tpm-emulator'"));
	config_reset();
	close(lfd);
	unit_rmtree(dir);
	free(dir);
}

/* ---- the checkpoint section, against Debian's swtpm ---- */

struct real_swtpm {
	pid_t pid;
	char *dir;
	int data, ctrl;
};

static bool have_swtpm(void)
{
	return system("command -v swtpm >/dev/null 2>&1") == 0;
}

static bool is_sock(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* swtpm as vm starts it: state, data and control sockets in a new folder. */
static void start_swtpm(struct real_swtpm *s)
{
	char state[400], server[400], ctrl[400], sock[200], csock[200], err[256];

	s->dir = unit_mkdtemp();
	snprintf(sock, sizeof(sock), "%s/s", s->dir);
	snprintf(csock, sizeof(csock), "%s/c", s->dir);
	snprintf(state, sizeof(state), "dir=%s", s->dir);
	snprintf(server, sizeof(server), "type=unixio,path=%s", sock);
	snprintf(ctrl, sizeof(ctrl), "type=unixio,path=%s", csock);
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		if (freopen("/dev/null", "w", stderr) == NULL)
			_exit(126);
		execlp("swtpm", "swtpm", "socket", "--tpm2", "--tpmstate", state, "--server",
		       server, "--ctrl", ctrl, "--flags", "not-need-init", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && !(is_sock(sock) && is_sock(csock)); i++)
		usleep(10000);
	s->data = swtpm_connect(sock, err, sizeof(err));
	s->ctrl = swtpm_connect(csock, err, sizeof(err));
	assert_true(s->data >= 0 && s->ctrl >= 0);
	assert_int_equal(swtpm_ctrl_check(s->ctrl, 5000, err, sizeof(err)), 0);
}

static void stop_swtpm(struct real_swtpm *s)
{
	kill(s->pid, SIGTERM);
	waitpid(s->pid, NULL, 0);
	unit_rmtree(s->dir);
	free(s->dir);
}

/* TPM2_Startup(TPM_SU_CLEAR). */
static const uint8_t startup_cmd[12] = {0x80, 0x01, 0, 0, 0, 12, 0, 0, 0x01, 0x44, 0, 0};
/* TPM2_PCR_Extend(PCR 16, password session, one SHA-256 digest of 0x5a). */
static const uint8_t extend_hdr[33] = {0x80, 0x02, 0,  0, 0, 65, 0, 0,    0x01, 0x82, 0,
                                       0,    0,    16, 0, 0, 0,  9, 0x40, 0,    0,    9,
                                       0,    0,    0,  0, 0, 0,  0, 0,    1,    0,    0x0b};
/* TPM2_PCR_Read(SHA-256: PCR 16); the digest is at 30 in the answer. */
static const uint8_t read_cmd[20] = {0x80, 0x01, 0, 0, 0, 20,   0, 0, 0x01, 0x7e,
                                     0,    0,    0, 1, 0, 0x0b, 3, 0, 0,    1};

/* One command, the guest's way (unthreaded device); its response code. */
static uint32_t run_cmd(struct tpm_crb *t, const uint8_t *cmd, size_t len, uint8_t *rsp,
                        size_t rsplen)
{
	guest_send(t, cmd, len);
	assert_true(tpm_crb_run_pending(t));
	guest_read(t, rsp, rsplen);
	return rc_of(rsp);
}

static void read_pcr16(struct tpm_crb *t, uint8_t digest[32])
{
	uint8_t rsp[62];

	assert_int_equal(run_cmd(t, read_cmd, sizeof(read_cmd), rsp, sizeof(rsp)), 0);
	memcpy(digest, rsp + 30, 32);
}

static void test_state_real_swtpm(void **state)
{
	struct real_swtpm a, b;
	struct sbuf out = {0};
	struct sbuf_reader in;
	uint8_t extend[65], rsp[64], before[32], after[32], zero[32] = {0};
	struct tpm_crb *t, *u;
	char err[256];

	(void)state;
	if (!have_swtpm())
		skip();
	memcpy(extend, extend_hdr, sizeof(extend_hdr));
	memset(extend + sizeof(extend_hdr), 0x5a, 32);
	start_swtpm(&a);
	t = tpm_crb_new(a.data, "swtpm a", false);
	tpm_crb_set_ctrl(t, a.ctrl);
	assert_int_equal(run_cmd(t, startup_cmd, sizeof(startup_cmd), rsp, 10), 0);
	assert_int_equal(run_cmd(t, extend, sizeof(extend), rsp, 10), 0);
	read_pcr16(t, before);
	assert_memory_not_equal(before, zero, 32);
	if (tpm_crb_save(t, &out, err, sizeof(err)) != 0)
		fail_msg("save: %s", err);

	/* A fresh swtpm (another host's, say) takes the section over. */
	start_swtpm(&b);
	u = tpm_crb_new(b.data, "swtpm b", false);
	tpm_crb_set_ctrl(u, b.ctrl);
	sbuf_reader_init(&in, out.data, out.len - 7); /* damaged: refused, nothing sent */
	tpm_crb_restore(u, &in, err, sizeof(err));
	assert_int_equal(sbuf_reader_done(&in, "lpc.tpm", err, sizeof(err)), -1);
	sbuf_reader_init(&in, out.data, out.len);
	if (tpm_crb_restore(u, &in, err, sizeof(err)) != 0)
		fail_msg("restore: %s", err);
	assert_int_equal(sbuf_reader_done(&in, "lpc.tpm", err, sizeof(err)), 0);
	read_pcr16(u, after);
	assert_memory_equal(before, after, 32);
	/* Resumed, not reset: the OS's Startup was part of the saved state. */
	assert_int_equal(run_cmd(u, startup_cmd, sizeof(startup_cmd), rsp, 10), 0x100);
	tpm_crb_free(t);
	tpm_crb_free(u);
	sbuf_free(&out);
	stop_swtpm(&a);
	stop_swtpm(&b);
}

/* Something on the ctrl= path that is not swtpm's control channel: one
 * line, after the (here short) timeout. */
static void test_ctrl_not_swtpm(void **state)
{
	int sv[2];
	char err[256];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(swtpm_ctrl_check(sv[0], 50, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is it swtpm's --ctrl socket?"));
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_locality, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_layout_and_idle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_command, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_socket_gone, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_response, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_oversized, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_outside, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_worker, setup_worker, teardown),
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_acpi_table),
	    cmocka_unit_test(test_init),
	    cmocka_unit_test(test_state_real_swtpm),
	    cmocka_unit_test(test_ctrl_not_swtpm),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
