/*
 * Live migration between two khyve processes (docs/design/snapshots.md
 * section 4, docs/snapshots.md "Live migration").
 *
 * The stream from source to target is a state file (lib/snapfile.h)
 * written as it goes: the header (with the configuration), then pre-copy
 * rounds of RAM, sections "ram.pre.N" (SNAPSHOT_RAM_ROUND; the first
 * round every non-zero page, later rounds the pages written since the
 * round before, zero ones included), then what a state file holds ("vm",
 * "vcpu.N", "ram.N" = the last dirty pages, every participant), and the
 * trailer.  The target answers with framed lines, a u32 little-endian
 * length (at most MIGRATE_MAX_LINE) then that many bytes of text: "OK
 * ready" after the header (or "ERR reason"), "OK loaded" after the
 * trailer (or "ERR reason"); the source then sends the framed line
 * "COMMIT" and the target answers "OK running" and starts its vCPUs; or,
 * for a guest its user had paused (khyvectl --pause), "COMMIT paused",
 * answered by "OK paused": the target's vCPUs wait for vm.resume.
 */
#ifndef KHYVE_RUN_MIGRATE_H
#define KHYVE_RUN_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>

struct machine;

#define MIGRATE_MAX_LINE      512u   /* bytes of one framed line */
#define MIGRATE_MAX_ROUNDS    30u    /* pre-copy rounds after the first */
#define MIGRATE_DOWNTIME_MS   300u   /* migration.downtime_ms's default */
#define MIGRATE_READY_MS      10000u /* the target's "OK ready" */
#define MIGRATE_LOADED_MS     60000u /* the target's "OK loaded" */
#define MIGRATE_RUNNING_MS    10000u /* the target's "OK running" after COMMIT */

#define MIGRATE_COMMIT        "COMMIT"        /* the source's last line */
#define MIGRATE_COMMIT_PAUSED "COMMIT paused" /* ... of a guest its user paused */

/* What migrate_send() ended with. */
enum migrate_outcome {
	MIGRATE_DONE = 0,       /* the target runs the guest: this khyve should exit 0 */
	MIGRATE_FAILED = -1,    /* nothing changed: the guest runs on here */
	MIGRATE_UNCERTAIN = -2, /* COMMIT went out, no "OK running" came: the guest
	                         * stays paused here (never two running copies) */
};

/*
 * Source: migrate the running machine over `fd` (a connected stream
 * socket; not owned).  Runs on the calling thread (the API thread, which
 * answers no other call meanwhile) until the target has answered COMMIT
 * or the migration failed.  Pre-copy with KVM's dirty log ORed with
 * gmem_mark_dirty()'s, until the dirty set fits migration.downtime_ms at
 * the measured bandwidth or MIGRATE_MAX_ROUNDS passed; then pause,
 * quiesce, last round and sections.  One line in `err` unless
 * MIGRATE_DONE.
 */
enum migrate_outcome migrate_send(struct machine *m, int fd, char *err, size_t errlen);

/*
 * Check the migration.* options (downtime_ms, listen_any) before the
 * guest starts: 0, or -1 with one line in `err`.
 */
int migrate_check_options(char *err, size_t errlen);

/*
 * Target (khyve -R ADDRESS): listen on `addr` ("unix:PATH", or
 * "HOST:PORT" with a numeric loopback HOST unless migration.listen_any),
 * accept one connection, check the stream's configuration as a restore
 * does, load the rounds and the state into `m` (built as for a boot, no
 * vCPU run yet), and wait for COMMIT.  0 once "OK running" went out (the
 * caller starts the vCPUs), or -1 with one line in `err` (an "ERR" line
 * went to the source when it could; the caller exits with status 4).
 * Called from the main thread before the sandbox.
 */
int migrate_receive(struct machine *m, const char *addr, char *err, size_t errlen);

#endif
