/*
 * A guest's software TPM (tpm="yes"): the supervisor starts Debian's swtpm
 * for each run of khyve, with the TPM's state in the guest's folder
 * (DIR/tpm), hands khyve its data socket (-l tpm,swtpm,DIR/tpm/swtpm.sock)
 * and stops it when khyve has exited.  A new swtpm per run is a TPM reset
 * per guest reboot, as on real hardware; the state (keys, NV) persists.
 */
#ifndef KHYVE_VM_TPM_H
#define KHYVE_VM_TPM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "vm/vm.h"

#define VM_TPM_SOCK_MAX 108 /* sizeof(sockaddr_un.sun_path) */

struct vm_tpm {
	pid_t pid;                 /* the running swtpm, or 0 */
	char dir[VM_TPM_SOCK_MAX]; /* DIR/tpm */
	char sock[VM_TPM_SOCK_MAX];
};

/* Whether `g` has tpm="yes" (vm-bhyve's yes words); false for no or unset. */
bool vm_tpm_wanted(const struct vm_guest *g);

/*
 * The data socket of g's swtpm, DIR/tpm/swtpm.sock, into `out`
 * (VM_TPM_SOCK_MAX bytes).  0, or -1 with a line in `err` when the
 * path is too long for a unix socket.
 */
int vm_tpm_socket(const struct vm_guest *g, char *out, char *err, size_t errlen);

/*
 * Its control socket, DIR/tpm/swtpm.ctrl (khyve's ctrl=: checkpoints and
 * migrations carry the TPM's state through it), the same way.
 */
int vm_tpm_ctrl_socket(const struct vm_guest *g, char *out, char *err, size_t errlen);

/*
 * Start swtpm ($SWTPM, else swtpm from PATH) for `g` and wait until its
 * socket is there (up to 5 s): `swtpm socket --tpm2 --tpmstate dir=DIR/tpm
 * --server type=unixio,path=SOCK --ctrl type=unixio,path=DIR/tpm/swtpm.ctrl
 * --flags not-need-init --log file=DIR/tpm/swtpm.log`.  0, or -1 with one
 * line in `err` (swtpm missing, exited, or no socket in time).
 */
int vm_tpm_start(const struct vm_guest *g, struct vm_tpm *t, char *err, size_t errlen);

/* Stop a started swtpm (SIGTERM, SIGKILL after 2 s) and reap it; its
 * socket files go.  A no-op when none runs. */
void vm_tpm_stop(struct vm_tpm *t);

#endif
