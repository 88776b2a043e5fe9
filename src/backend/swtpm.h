/*
 * swtpm's two sockets (Debian's swtpm, `swtpm socket --tpm2`): the data
 * channel, where a TPM command's bytes go out and one response comes back,
 * and the control channel (swtpm-ioctls(3), "control commands": a
 * big-endian u32 command code and its big-endian fields), which khyve uses
 * to move the TPM's state in and out of a checkpoint as QEMU's
 * tpm-emulator does: STOP, GET_STATEBLOB and SET_STATEBLOB for the
 * permanent, volatile and save-state blobs, INIT to run on from them.
 *
 * Every call is bounded by a deadline; swtpm's answers are checked like a
 * guest's (sizes, result codes).  No locks: one caller per socket.
 */
#ifndef KHYVE_SWTPM_H
#define KHYVE_SWTPM_H

#include <stddef.h>
#include <stdint.h>

/* State blob types (swtpm-ioctls(3), PTM_GET_STATEBLOB). */
#define SWTPM_BLOB_PERMANENT  1u
#define SWTPM_BLOB_VOLATILE   2u
#define SWTPM_BLOB_SAVESTATE  3u
#define SWTPM_NBLOBS          3u

#define SWTPM_STATE_ENCRYPTED 2u          /* a blob's flag: encrypted with swtpm's key */
#define SWTPM_BLOB_MAX        (16u << 20) /* bytes: larger blobs are refused */

/* One state blob: `len` bytes at `data` (malloc()ed, owned), swtpm's flags. */
struct swtpm_blob {
	uint32_t type, flags, len;
	uint8_t *data;
};

/* Milliseconds of CLOCK_MONOTONIC, for the deadlines below. */
int64_t swtpm_now_ms(void);

/*
 * Connect to the unix stream socket at `path`: the fd (close-on-exec), or
 * -1 with "cannot connect to swtpm at PATH: why" in `err`.
 */
int swtpm_connect(const char *path, char *err, size_t errlen);

/* All `len` bytes out before `deadline` (swtpm_now_ms()); 0, or -1 with errno. */
int swtpm_send_all(int fd, const void *p, size_t len, int64_t deadline);

/* All `len` bytes in before `deadline`; 0, or -1 with errno (ECONNRESET: closed). */
int swtpm_recv_all(int fd, void *p, size_t len, int64_t deadline);

/*
 * Check that `fd` is swtpm's control channel and can stop, init and move
 * state blobs (CMD_GET_CAPABILITY, answered within `timeout_ms`).  0, or
 * -1 with one line in `err`.
 */
int swtpm_ctrl_check(int fd, int timeout_ms, char *err, size_t errlen);

/*
 * Fetch blob `b->type` (CMD_GET_STATEBLOB, as stored: an encrypted state
 * stays encrypted) into `b`; the TPM must be running.  0, or -1 with one
 * line in `err` (b->data NULL then).
 */
int swtpm_ctrl_get_blob(int fd, struct swtpm_blob *b, int timeout_ms, char *err, size_t errlen);

/*
 * Stop the TPM (CMD_STOP), hand it every blob of `blobs` (CMD_SET_STATEBLOB;
 * empty ones are skipped) and start it again from them (CMD_INIT, the
 * volatile state file deleted once read), so that it runs on where the
 * blobs were taken.  0, or -1 with one line in `err`; the TPM may be left
 * stopped then (its commands fail), the guest runs on.
 */
int swtpm_ctrl_load(int fd, const struct swtpm_blob *blobs, unsigned n, int timeout_ms, char *err,
                    size_t errlen);

#endif
