/*
 * libFuzzer target for the TPM 2.0 CRB (src/dev/tpm_crb.c): the guest's
 * MMIO accesses to locality 0's registers, its data buffer and the
 * localities past it, commands started with any header, and a fake swtpm
 * (the other end of a socketpair) that answers with fuzzed bytes, too few,
 * a bad size, or goes away.  The device runs unthreaded: a started command
 * runs at op 3, with a zero timeout (what the fake has not sent by then is
 * a swtpm that does not answer).
 *
 * Input: a sequence of ops, an opcode byte and its operands; bits 2:0:
 *   0 read      u16 offset (mod 0x5100), u8 size (n%10: 0, 3, 5.. refused)
 *   1 write     u16 offset, u8 size, u64 value
 *   2 command   u16 length (mod 0x1000), that many bytes into the buffer at
 *               0x80, then START
 *   3 answer    u16 length (mod 0x1000), that many bytes from swtpm, then the
 *               started command runs
 *   4 hang up   swtpm closes its end
 *   5 register  u8 index: a 4-byte write of u32 to one of the CRB's registers
 *   6 restore   u16 length (mod 0x2000), that many bytes as a checkpoint
 *               section (the device has no swtpm control socket: the
 *               section is parsed and checked, then refused)
 * Each input starts a fresh device.
 */
#include "fuzz.h"

#include <sys/socket.h>

#include "dev/tpm_crb.h"
#include "lib/sbuf.h"

static const uint16_t regs[] = {
    CRB_LOC_STATE, CRB_LOC_CTRL,    CRB_LOC_STS,    CRB_INTF_ID,    CRB_CTRL_EXT, CRB_CTRL_REQ,
    CRB_CTRL_STS,  CRB_CTRL_CANCEL, CRB_CTRL_START, CRB_INT_ENABLE, CRB_INT_STS,  CRB_CMD_SIZE,
};

FUZZ_TARGET(fuzz_no_setup)

static void send_bytes(int peer, struct fz *z, size_t len)
{
	uint8_t buf[0x1000];

	fz_bytes(z, buf, len);
	if (peer >= 0 && send(peer, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return; /* a full socket: the device reads what is there */
}

static void put_command(struct tpm_crb *t, struct fz *z)
{
	size_t len = fz_u16(z) % 0x1000;
	uint64_t v;

	for (size_t i = 0; i < len && i < TPM_CRB_BUF_SIZE; i++) {
		v = fz_u8(z);
		(void)tpm_crb_access(t, TPM_CRB_BUF_OFF + i, 1, true, &v);
	}
	v = CRB_START_INVOKE;
	(void)tpm_crb_access(t, CRB_CTRL_START, 4, true, &v);
}

/* A hostile section: whatever the reader says, the device stays usable
 * (the end of fuzz_one checks that a started command still completes). */
static void restore_section(struct tpm_crb *t, struct fz *z)
{
	static uint8_t buf[0x2000];
	size_t len = fz_u16(z) % sizeof(buf);
	struct sbuf_reader in;
	char err[256];

	fz_bytes(z, buf, len);
	sbuf_reader_init(&in, buf, len);
	(void)tpm_crb_restore(t, &in, err, sizeof(err));
}

static void fuzz_one(struct fz *z)
{
	struct tpm_crb *t;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	t = tpm_crb_new(sv[0], "fuzz", false);
	if (t == NULL)
		abort();
	tpm_crb_set_timeout_ms(t, 0);
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);
		uint64_t v = 0;

		switch (op & 7) {
		case 0: {
			uint64_t off = fz_u16(z) % 0x5100;

			(void)tpm_crb_access(t, off, fz_u8(z) % 10, false, &v);
			break;
		}
		case 1: {
			uint64_t off = fz_u16(z) % 0x5100;
			unsigned size = fz_u8(z) % 10;

			v = fz_u64(z);
			(void)tpm_crb_access(t, off, size, true, &v);
			break;
		}
		case 2:
			put_command(t, z);
			break;
		case 3:
			send_bytes(sv[1], z, fz_u16(z) % 0x1000);
			(void)tpm_crb_run_pending(t);
			break;
		case 4:
			if (sv[1] >= 0)
				close(sv[1]);
			sv[1] = -1;
			break;
		case 5: {
			uint16_t reg = regs[fz_u8(z) % (sizeof(regs) / sizeof(regs[0]))];

			v = fz_u32(z);
			(void)tpm_crb_access(t, reg, 4, true, &v);
			break;
		}
		case 6:
			restore_section(t, z);
			break;
		default:
			break;
		}
	}
	/* START reads 0 once nothing is pending: the guest always gets an answer. */
	(void)tpm_crb_run_pending(t);
	if (tpm_crb_busy(t))
		abort();
	tpm_crb_free(t);
	if (sv[1] >= 0)
		close(sv[1]);
}
