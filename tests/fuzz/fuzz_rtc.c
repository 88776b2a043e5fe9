/*
 * libFuzzer target for the MC146818 RTC and CMOS (src/dev/rtc.c): index
 * and data port accesses as a guest's clock driver and firmware make them
 * (time reads with update-in-progress, time sets with SET held, binary and
 * BCD, 12- and 24-hour formats, CMOS memory), with the memory size the
 * machine writes.
 *
 * Input: the first byte picks local time (bit 0); then ops, an opcode byte
 * and its operands; bits 1:0:
 *   0 index write     u8 value (bit 7, the NMI mask, included)
 *   1 data read
 *   2 data write      u8 value
 *   3 machine         u64 lowmem, u64 highmem, u8 CPUs (1 + n): the
 *                     memory bytes rtc_set_memory() stores; opcode bit 2
 *                     asks rtc_guest_time() instead
 * Each input gets a fresh RTC.
 */
#include "fuzz.h"

#include "dev/rtc.h"

FUZZ_TARGET(fuzz_no_setup)

static void fuzz_one(struct fz *z)
{
	struct rtc *r = rtc_create(fz_u8(z) & 1);

	if (r == NULL)
		abort();
	FUZZ_EACH_OP (z) {
		uint8_t op = fz_u8(z);

		switch (op & 3) {
		case 0:
			rtc_write(r, 0, fz_u8(z));
			break;
		case 1:
			(void)rtc_read(r, 1);
			break;
		case 2:
			rtc_write(r, 1, fz_u8(z));
			break;
		case 3:
			if (op & 4) {
				(void)rtc_guest_time(r);
			} else {
				uint64_t low = fz_u64(z), high = fz_u64(z);

				rtc_set_memory(r, low, high, 1u + fz_u8(z));
			}
			break;
		}
	}
	rtc_free(r);
}
