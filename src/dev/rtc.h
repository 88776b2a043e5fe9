/*
 * MC146818 real-time clock and CMOS RAM at ports 0x70/0x71 (bhyve: rtc.c).
 * The clock reads the host's time (local time unless rtc.use_localtime is
 * false, bhyve's -u); guest writes move an offset, never the host clock.
 * The CMOS also tells firmware the memory size and vCPU count.
 */
#ifndef KHYVE_RTC_H
#define KHYVE_RTC_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "core/snapshot.h"

#define RTC_CMOS_SIZE 128

struct rtc;

/* Create an RTC whose clock is time(NULL) + offset; `localtime` selects the
 * time zone of the registers.  NULL when out of memory. */
struct rtc *rtc_create(bool localtime);
void rtc_free(struct rtc *r);

/* Port access: `port_offset` 0 = index port (0x70), 1 = data port (0x71). */
uint8_t rtc_read(struct rtc *r, unsigned port_offset);
void rtc_write(struct rtc *r, unsigned port_offset, uint8_t val);

/* Store firmware facts: RAM below/above the 4 GiB hole (bytes), vCPUs. */
void rtc_set_memory(struct rtc *r, uint64_t lowmem, uint64_t highmem, unsigned ncpus);

/* Guest time in seconds since the epoch, as the registers would show it. */
time_t rtc_guest_time(struct rtc *r);

/*
 * Saved state (docs/design/snapshots.md section 2, "dev"): `arg` is the
 * struct rtc.  Version 1: the index, the 128 CMOS bytes, and the clock as
 * its offset from the host's time (seconds), so a guest restored on a
 * later day reads host time plus the offset it had set, as a laptop's RTC
 * after a resume.  The MC146818 here raises no alarm, update or periodic
 * interrupts, so there is no timer state.  `localtime` is an option, not
 * state.
 */
extern const struct state_ops rtc_state_ops;

#endif
