/*
 * TPM 2.0 behind the Command Response Buffer interface (TCG PC Client
 * Platform TPM Profile (PTP) 1.05, section 6.5), as bhyve 14's
 * -l tpm,swtpm,SOCKET: the registers and the data buffer of locality 0 at
 * 0xFED40000, described to the OS by the TPM2 ACPI table (start method 7,
 * "command response buffer") and a DSDT device MSFT0101.  Commands go to
 * swtpm's data socket from a worker thread, so a vCPU never waits on it:
 * START stays set until the response is in the buffer, which is what the
 * OS polls (Linux's tpm_crb does).
 */
#ifndef KHYVE_TPM_CRB_H
#define KHYVE_TPM_CRB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TPM_CRB_GPA       0xfed40000ull
#define TPM_CRB_MMIO_SIZE 0x5000u /* five localities of 4 KiB; only 0 is used */
#define TPM_CRB_CTRL_OFF  0x40u   /* the control area (TPM2 table's address) */
#define TPM_CRB_BUF_OFF   0x80u   /* the data buffer, command and response */
#define TPM_CRB_BUF_SIZE  0xf80u

/* Register offsets in locality 0 (PTP table 17). */
#define CRB_LOC_STATE   0x00
#define CRB_LOC_CTRL    0x08
#define CRB_LOC_STS     0x0c
#define CRB_INTF_ID     0x30
#define CRB_CTRL_EXT    0x38
#define CRB_CTRL_REQ    0x40
#define CRB_CTRL_STS    0x44
#define CRB_CTRL_CANCEL 0x48
#define CRB_CTRL_START  0x4c
#define CRB_INT_ENABLE  0x50
#define CRB_INT_STS     0x54
#define CRB_CMD_SIZE    0x58
#define CRB_CMD_LADDR   0x5c
#define CRB_CMD_HADDR   0x60
#define CRB_RSP_SIZE    0x64
#define CRB_RSP_ADDR    0x68

/* Bits (PTP tables 18-25). */
#define CRB_LOC_STATE_ESTABLISHED (1u << 0)
#define CRB_LOC_STATE_ASSIGNED    (1u << 1)
#define CRB_LOC_STATE_REG_VALID   (1u << 7)
#define CRB_LOC_CTRL_REQUEST      (1u << 0)
#define CRB_LOC_CTRL_RELINQUISH   (1u << 1)
#define CRB_LOC_STS_GRANTED       (1u << 0)
#define CRB_CTRL_REQ_CMD_READY    (1u << 0)
#define CRB_CTRL_REQ_GO_IDLE      (1u << 1)
#define CRB_CTRL_STS_ERROR        (1u << 0)
#define CRB_CTRL_STS_IDLE         (1u << 1)
#define CRB_START_INVOKE          (1u << 0)

/* TPM 2.0 response codes khyve answers itself (TPM 2.0 part 2, 6.6). */
#define TPM2_RC_FAILURE      0x101u
#define TPM2_RC_COMMAND_SIZE 0x142u
#define TPM2_HEADER_SIZE     10u

struct tpm_crb;
struct sbuf;
struct sbuf_reader;

/*
 * A CRB in front of the swtpm data socket `fd` (connected, a stream; the
 * device owns it and closes it when swtpm goes away).  `threaded`: a worker
 * thread runs the commands (khyve); without it tpm_crb_run_pending() does,
 * in the caller (unit tests, the fuzz target).  `what` names the socket in
 * log lines (copied).  NULL when out of memory or the thread cannot start.
 */
struct tpm_crb *tpm_crb_new(int fd, const char *what, bool threaded);

/* Stop the worker, close the socket and free the device. */
void tpm_crb_free(struct tpm_crb *t);

/*
 * The MMIO handler for [TPM_CRB_GPA, +TPM_CRB_MMIO_SIZE): `offset` into the
 * range, `size` 1, 2, 4 or 8 bytes.  Guest-driven and never blocking: a
 * START copies the command out and hands it on.  Always 0 (bad accesses
 * are ignored and logged, rate-limited).
 */
int tpm_crb_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val);

/* Unthreaded devices: run a started command now (send to the socket,
 * wait for the answer up to the device's timeout); whether one ran. */
bool tpm_crb_run_pending(struct tpm_crb *t);

/* Whether a command is in flight (START still set). */
bool tpm_crb_busy(const struct tpm_crb *t);

/* The per-exchange timeout with swtpm, in milliseconds (default 120000);
 * after it the socket counts as gone.  For tests. */
void tpm_crb_set_timeout_ms(struct tpm_crb *t, int ms);

/*
 * swtpm's control socket `fd` (connected; the device owns it), which
 * checkpoints need; replaces (closes) an earlier one.
 */
void tpm_crb_set_ctrl(struct tpm_crb *t, int fd);

/*
 * The device's checkpoint section (the "lpc.tpm" participant's save and
 * restore, for tests): registers, buffer and swtpm's three state blobs
 * through the control socket.  Restore checks every value and length,
 * then stops swtpm, loads the blobs and starts it again.  0, or -1 with
 * one line in `err` (a restore's bad section: the reader fails instead).
 */
int tpm_crb_save(struct tpm_crb *t, struct sbuf *out, char *err, size_t errlen);
int tpm_crb_restore(struct tpm_crb *t, struct sbuf_reader *in, char *err, size_t errlen);

/* The TPM2 table's control area address when -l tpm is configured (read
 * by run/vmrun.c for boot/acpi.c), else 0. */
uint64_t tpm_crb_control_area(void);

#endif
