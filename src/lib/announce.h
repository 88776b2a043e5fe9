/*
 * A NIC's self-announce after a restore or an incoming migration: RARP
 * broadcasts from the guest's MAC (RFC 903), as QEMU's qemu_announce_self
 * sends them, so that bridges and switches learn the guest's new port
 * before the guest itself sends.  The device owns the schedule and writes
 * the frames to its back end.
 */
#ifndef KHYVE_ANNOUNCE_H
#define KHYVE_ANNOUNCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* QEMU's defaults: announce-initial 50 ms, announce-rounds 5,
 * announce-step 100 ms (each gap one step longer than the one before). */
#define ANNOUNCE_ROUNDS   5
#define ANNOUNCE_FIRST_NS (50 * 1000000ull)
#define ANNOUNCE_STEP_NS  (100 * 1000000ull)
#define ANNOUNCE_FRAME    60 /* a RARP frame padded to the Ethernet minimum, no FCS */

/* Zero-initialised: nothing to announce. */
struct announce {
	unsigned left; /* frames still to send */
	uint64_t at;   /* CLOCK_MONOTONIC ns when the next is due */
};

/* Schedule ANNOUNCE_ROUNDS frames, the first ANNOUNCE_FIRST_NS after
 * `now` (monotonic ns). */
void announce_start(struct announce *a, uint64_t now);

/* Whether a frame is due at `now`; the caller then sends one
 * (announce_frame) and calls announce_sent(). */
bool announce_due(const struct announce *a, uint64_t now);

/* One frame went out (or was lost) at `now`: schedule the next. */
void announce_sent(struct announce *a, uint64_t now);

/* Milliseconds from `now` until the next frame is due (0: now), rounded
 * up, for poll(2); -1 when none is left. */
int announce_timeout_ms(const struct announce *a, uint64_t now);

/* A device's receive side is quiesced (`paused`: a checkpoint) while
 * frames are left: nothing is sent then, and it looks again after this
 * many ms. */
#define ANNOUNCE_PAUSED_MS 10

/* announce_timeout_ms(), but ANNOUNCE_PAUSED_MS while `paused` with frames
 * left: the poll(2) timeout of a device's receive thread. */
int announce_poll_ms(const struct announce *a, uint64_t now, bool paused);

/* Fill `frame` with the RARP reverse request for `mac`: broadcast, sender
 * and target hardware addresses `mac`, both protocol addresses 0.
 * Returns ANNOUNCE_FRAME, its length in bytes. */
size_t announce_frame(uint8_t frame[ANNOUNCE_FRAME], const uint8_t mac[6]);

#endif
