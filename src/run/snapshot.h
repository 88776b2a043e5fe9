/*
 * Checkpoint, suspend and restore of the whole machine through a state
 * file (lib/snapfile.h; docs/snapshots.md).  A state file holds, in this
 * order: the configuration the machine was made from (its key=value
 * lines, sorted), section "vm" (KVM's clock, PIC, IOAPIC and PIT), one
 * "vcpu.N" per vCPU, one "ram.N" per RAM region (zero pages left out),
 * then one section per state participant (core/snapshot.h: every device
 * and PCI function) in the order they were registered, and the trailer.
 */
#ifndef KHYVE_RUN_SNAPSHOT_H
#define KHYVE_RUN_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gmem_region;
struct machine;
struct snapfile_reader;
struct snapfile_writer;

/* A live migration's RAM rounds: "ram.pre.N" for ram.N's region, written
 * by run/migrate.c before section "vm" (snapfile_write_ram() for the
 * first round, snapfile_write_ram_pages() for the dirty ones). */
#define SNAPSHOT_RAM_ROUND "ram.pre."
#define SNAPSHOT_CREATOR   "khyve 0.1"
#define SNAPSHOT_PAGE      4096u

/*
 * Save the machine into `fd` (a regular file opened for writing, at its
 * start; not owned): pause the vCPUs (unless already paused), quiesce the
 * devices, write every section, fsync.  Then, unless `stay_paused`, let
 * the devices and vCPUs go on; with `stay_paused` (suspend) both stay
 * stopped for the caller to end the process.  A vCPU the user had paused
 * stays paused.  0, or -1 with one line in `err`; on failure the machine
 * runs on as before and what was written is no state file any reader
 * accepts (it lacks its trailer).  Called from the API thread.
 */
int snapshot_save(struct machine *m, int fd, bool stay_paused, char *err, size_t errlen);

/*
 * Whether the machine could be saved now: every device can be saved.
 * 0, or -1 with one line in `err`.
 */
int snapshot_check(struct machine *m, char *err, size_t errlen);

/*
 * Load the state file on `fd` (seekable; not owned) into a machine built
 * from the same options whose vCPUs have not run, in one pass: the
 * header's configuration is compared with this khyve's (keys that are
 * host-local, such as the serial ports' back ends and the API socket, may
 * differ), then each section is applied once its checksum has been
 * checked, then the trailer is checked.  0, or -1 with one line in `err`
 * (nothing has run; the caller exits with status 4, so what was loaded
 * goes with the process, and the file is untouched).
 */
int snapshot_restore(struct machine *m, int fd, char *err, size_t errlen);

/* Open what a save needs later from the sandboxed API thread (the page
 * map that tells which RAM pages are in use); call once before the
 * sandbox.  A save without it reads every page. */
void snapshot_prepare(void);

/* A bitmap with bit i set for each page of `r` that is mapped or swapped
 * out (proc(5), pagemap): any other page of guest RAM (private anonymous
 * memory) was never written since it was last discarded and reads as
 * zero, so a save or a migration's first round need not read it (an idle
 * 2 GiB guest would take half a million faults of the zero page
 * otherwise).  For snapfile_write_ram_some(); the caller frees it.  NULL
 * when pagemap cannot tell (no snapshot_prepare(), no memory): then every
 * page is to be read. */
uint64_t *snapshot_pages_in_use(const struct gmem_region *r);

/*
 * The configuration text a state file records: every "key=value" line of
 * the configuration tree, sorted, except restore.file.  malloc()ed
 * (the caller frees), or NULL without memory.
 */
char *snapshot_config_text(void);

/*
 * Compare the configuration `saved` (a state file's) with `now`
 * (snapshot_config_text()): 0 when they match on every key that is not
 * host-local, else -1 with the first difference in `err` ("the state file
 * was made with memory.size=512M, this khyve has memory.size=256M").
 */
int snapshot_config_compare(const char *saved, const char *now, char *err, size_t errlen);

/*
 * Write "vm", the "vcpu.N", the "ram.N" and every participant's section
 * into `w` (no trailer); the machine is paused and quiesced.  With
 * `dirty` NULL every non-zero page goes into ram.N; else dirty[i] (for
 * gmem region i, gmem_dirty_words() words) names the pages ram.N holds
 * (a migration's last round).  0, or -1 with one line in `err`.
 */
int snapshot_write_sections(struct machine *m, struct snapfile_writer *w, uint64_t *const *dirty,
                            char *err, size_t errlen);

/* Compare the configuration in `r`'s header with this khyve's (as
 * snapshot_config_compare()).  0, or -1 with one line in `err`. */
int snapshot_check_config(struct snapfile_reader *r, char *err, size_t errlen);

/*
 * The rest of a migration stream whose header `r` has read and checked:
 * RAM rounds (SNAPSHOT_RAM_ROUND), then the sections of a state file,
 * each checked as snapshot_restore() checks them, up to the trailer.
 * Guest RAM must hold zeros first (snapshot_clear_ram()).  0, or -1 with
 * one line in `err`.
 */
int snapshot_load_stream(struct machine *m, struct snapfile_reader *r, char *err, size_t errlen);

/* Drop the contents of every writable RAM region (reads as zero).  0 or
 * -1 with one line in `err`. */
int snapshot_clear_ram(struct machine *m, char *err, size_t errlen);

#endif
