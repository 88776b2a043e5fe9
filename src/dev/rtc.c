#include "dev/rtc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/machine.h"
#include "dev/lpc.h"
#include "lib/aml.h"
#include "lib/config.h"

#define RTC_PORT     0x70 /* index, then data at 0x71 */
#define RTC_NPORTS   2

#define RTC_SEC      0x00
#define RTC_MIN      0x02
#define RTC_HOUR     0x04
#define RTC_WDAY     0x06
#define RTC_MDAY     0x07
#define RTC_MONTH    0x08
#define RTC_YEAR     0x09
#define RTC_STATUS_A 0x0a
#define RTC_STATUS_B 0x0b
#define RTC_STATUS_C 0x0c
#define RTC_STATUS_D 0x0d
#define RTC_CENTURY  0x32

#define STATUS_B_24H 0x02
#define STATUS_B_BIN 0x04
#define STATUS_B_SET 0x80
#define STATUS_D_VRT 0x80
#define HOUR_PM      0x80

/* CMOS bytes firmware reads (SeaBIOS, older BIOSes). */
#define CMOS_BASEMEM_LO 0x15 /* KiB below 1 MiB */
#define CMOS_EXTMEM_LO  0x17 /* KiB from 1 MiB, capped at 0xffff */
#define CMOS_EXTMEM2_LO 0x30
#define CMOS_MEM16M_LO  0x34 /* 64 KiB units from 16 MiB to the hole */
#define CMOS_HIGHMEM_0  0x5b /* 64 KiB units above 4 GiB, 3 bytes */
#define CMOS_NCPUS_M1   0x5f

struct rtc {
	pthread_mutex_t lock;
	uint8_t index;
	uint8_t cmos[RTC_CMOS_SIZE]; /* NVRAM, status registers and the time shadow */
	bool localtime;
	time_t offset; /* guest time minus host time, seconds */
};

static bool is_time_reg(unsigned idx)
{
	return idx == RTC_SEC || idx == RTC_MIN || idx == RTC_HOUR || idx == RTC_WDAY ||
	       idx == RTC_MDAY || idx == RTC_MONTH || idx == RTC_YEAR || idx == RTC_CENTURY;
}

static uint8_t to_bcd(unsigned v)
{
	return (uint8_t)(((v / 10) << 4) | (v % 10));
}

static unsigned from_bcd(uint8_t v)
{
	return (v >> 4) * 10 + (v & 0xf);
}

static uint8_t encode(const struct rtc *r, unsigned v)
{
	return (r->cmos[RTC_STATUS_B] & STATUS_B_BIN) ? (uint8_t)v : to_bcd(v);
}

static unsigned decode(const struct rtc *r, uint8_t v)
{
	return (r->cmos[RTC_STATUS_B] & STATUS_B_BIN) ? v : from_bcd(v);
}

static uint8_t encode_hour(const struct rtc *r, int hour)
{
	bool pm = hour >= 12;

	if (r->cmos[RTC_STATUS_B] & STATUS_B_24H)
		return encode(r, (unsigned)hour);
	hour %= 12;
	return encode(r, hour == 0 ? 12u : (unsigned)hour) | (pm ? HOUR_PM : 0);
}

static int decode_hour(const struct rtc *r, uint8_t v)
{
	int h;

	if (r->cmos[RTC_STATUS_B] & STATUS_B_24H)
		return (int)decode(r, v);
	h = (int)decode(r, v & 0x7f) % 12;
	return (v & HOUR_PM) ? h + 12 : h;
}

time_t rtc_guest_time(struct rtc *r)
{
	return time(NULL) + r->offset;
}

/* Fill the time registers from the running clock. */
static void latch_time(struct rtc *r)
{
	time_t t = rtc_guest_time(r);
	struct tm tm;

	if (r->localtime)
		localtime_r(&t, &tm);
	else
		gmtime_r(&t, &tm);
	r->cmos[RTC_SEC] = encode(r, (unsigned)tm.tm_sec);
	r->cmos[RTC_MIN] = encode(r, (unsigned)tm.tm_min);
	r->cmos[RTC_HOUR] = encode_hour(r, tm.tm_hour);
	r->cmos[RTC_WDAY] = encode(r, (unsigned)tm.tm_wday + 1);
	r->cmos[RTC_MDAY] = encode(r, (unsigned)tm.tm_mday);
	r->cmos[RTC_MONTH] = encode(r, (unsigned)tm.tm_mon + 1);
	r->cmos[RTC_YEAR] = encode(r, (unsigned)(tm.tm_year % 100));
	r->cmos[RTC_CENTURY] = encode(r, (unsigned)(1900 + tm.tm_year) / 100);
}

/* The guest set the clock: derive the new offset from the time registers. */
static void commit_time(struct rtc *r)
{
	struct tm tm = {0};
	time_t t;

	tm.tm_sec = (int)decode(r, r->cmos[RTC_SEC]);
	tm.tm_min = (int)decode(r, r->cmos[RTC_MIN]);
	tm.tm_hour = decode_hour(r, r->cmos[RTC_HOUR]);
	tm.tm_mday = (int)decode(r, r->cmos[RTC_MDAY]);
	tm.tm_mon = (int)decode(r, r->cmos[RTC_MONTH]) - 1;
	tm.tm_year =
	    (int)(decode(r, r->cmos[RTC_CENTURY]) * 100 + decode(r, r->cmos[RTC_YEAR])) - 1900;
	tm.tm_isdst = -1;
	t = r->localtime ? mktime(&tm) : timegm(&tm);
	if (t != (time_t)-1)
		r->offset = t - time(NULL);
}

static uint8_t data_read(struct rtc *r)
{
	unsigned idx = r->index;
	uint8_t v;

	if (is_time_reg(idx) && !(r->cmos[RTC_STATUS_B] & STATUS_B_SET))
		latch_time(r);
	v = r->cmos[idx];
	if (idx == RTC_STATUS_C)
		r->cmos[RTC_STATUS_C] = 0; /* flags clear on read */
	return v;
}

static void data_write(struct rtc *r, uint8_t val)
{
	unsigned idx = r->index;
	bool was_set = r->cmos[RTC_STATUS_B] & STATUS_B_SET;

	if (idx == RTC_STATUS_C || idx == RTC_STATUS_D)
		return; /* read-only */
	if (is_time_reg(idx)) {
		if (!was_set)
			latch_time(r);
		r->cmos[idx] = val;
		if (!was_set)
			commit_time(r);
		return;
	}
	if (idx == RTC_STATUS_B) {
		if (!was_set && (val & STATUS_B_SET))
			latch_time(r); /* freeze what the guest will edit */
		r->cmos[idx] = val;
		if (was_set && !(val & STATUS_B_SET))
			commit_time(r);
		return;
	}
	if (idx == RTC_STATUS_A)
		val &= 0x7f; /* update-in-progress is read-only */
	r->cmos[idx] = val;
}

uint8_t rtc_read(struct rtc *r, unsigned port_offset)
{
	uint8_t v;

	pthread_mutex_lock(&r->lock);
	v = port_offset == 0 ? r->index : data_read(r);
	pthread_mutex_unlock(&r->lock);
	return v;
}

void rtc_write(struct rtc *r, unsigned port_offset, uint8_t val)
{
	pthread_mutex_lock(&r->lock);
	if (port_offset == 0)
		r->index = val & 0x7f; /* bit 7 masks NMIs on real hardware */
	else
		data_write(r, val);
	pthread_mutex_unlock(&r->lock);
}

static void put16(uint8_t *p, uint64_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

void rtc_set_memory(struct rtc *r, uint64_t lowmem, uint64_t highmem, unsigned ncpus)
{
	const uint64_t mib = 1ull << 20;
	uint64_t ext_kib = lowmem > mib ? (lowmem - mib) >> 10 : 0;
	uint64_t above16m = lowmem > 16 * mib ? (lowmem - 16 * mib) >> 16 : 0;
	uint64_t high = highmem >> 16;

	pthread_mutex_lock(&r->lock);
	put16(&r->cmos[CMOS_BASEMEM_LO], 640);
	put16(&r->cmos[CMOS_EXTMEM_LO], ext_kib > 0xffff ? 0xffff : ext_kib);
	put16(&r->cmos[CMOS_EXTMEM2_LO], ext_kib > 0xffff ? 0xffff : ext_kib);
	put16(&r->cmos[CMOS_MEM16M_LO], above16m > 0xffff ? 0xffff : above16m);
	r->cmos[CMOS_HIGHMEM_0] = (uint8_t)high;
	r->cmos[CMOS_HIGHMEM_0 + 1] = (uint8_t)(high >> 8);
	r->cmos[CMOS_HIGHMEM_0 + 2] = (uint8_t)(high >> 16);
	r->cmos[CMOS_NCPUS_M1] = (uint8_t)(ncpus - 1);
	pthread_mutex_unlock(&r->lock);
}

struct rtc *rtc_create(bool localtime)
{
	struct rtc *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	r->localtime = localtime;
	r->cmos[RTC_STATUS_A] = 0x26; /* 32.768 kHz time base, 1024 Hz rate */
	r->cmos[RTC_STATUS_B] = STATUS_B_24H;
	r->cmos[RTC_STATUS_D] = STATUS_D_VRT;
	return r;
}

void rtc_free(struct rtc *r)
{
	if (r == NULL)
		return;
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* ---- saved state ---- */

#define RTC_STATE_VERSION 1
#define RTC_MAX_OFFSET    (1ll << 40) /* seconds (35000 years): keeps time_t sums exact */

static int rtc_save(void *arg, struct sbuf *out, char *err, size_t errlen)
{
	struct rtc *r = arg;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&r->lock);
	sbuf_put_u16(out, RTC_STATE_VERSION);
	sbuf_put_u8(out, r->index);
	sbuf_put_bytes(out, r->cmos, RTC_CMOS_SIZE);
	sbuf_put_u64(out, (uint64_t)(int64_t)r->offset);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static int rtc_restore(void *arg, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct rtc *r = arg;
	uint8_t index, cmos[RTC_CMOS_SIZE];
	int64_t offset;

	if (sbuf_get_version(in, RTC_STATE_VERSION) == 0)
		return snprintf(err, errlen, "%s", in->why), -1;
	index = sbuf_get_u8(in);
	sbuf_get_bytes(in, cmos, sizeof(cmos));
	offset = (int64_t)sbuf_get_u64(in);
	if (index >= RTC_CMOS_SIZE)
		sbuf_fail(in, "index %u >= %u", index, RTC_CMOS_SIZE);
	if (offset > RTC_MAX_OFFSET || offset < -RTC_MAX_OFFSET)
		sbuf_fail(in, "clock offset %lld s out of range", (long long)offset);
	if (cmos[RTC_STATUS_A] & 0x80)
		sbuf_fail(in, "status A 0x%02x has update-in-progress set", cmos[RTC_STATUS_A]);
	if (in->failed)
		return snprintf(err, errlen, "%s", in->why), -1;
	pthread_mutex_lock(&r->lock);
	r->index = index;
	memcpy(r->cmos, cmos, sizeof(cmos));
	r->offset = (time_t)offset;
	pthread_mutex_unlock(&r->lock);
	return 0;
}

const struct state_ops rtc_state_ops = {
    .save = rtc_save,
    .restore = rtc_restore,
};

static int rtc_port_access(void *arg, uint64_t offset, unsigned size, bool is_write, uint64_t *val)
{
	if (size != 1)
		return -1;
	if (is_write)
		rtc_write(arg, (unsigned)offset, (uint8_t)*val);
	else
		*val = rtc_read(arg, (unsigned)offset);
	return 0;
}

static int rtc_lpc_init(struct machine *m, char *err, size_t errlen)
{
	bool localtime;
	struct rtc *r;

	if (config_get_bool("rtc.use_localtime", true, &localtime) < 0) {
		snprintf(err, errlen, "rtc.use_localtime: not a boolean");
		return -1;
	}
	r = rtc_create(localtime);
	if (r == NULL)
		return -1;
	rtc_set_memory(r, m->vm.mem.lowmem_size, m->vm.mem.highmem_size, m->vm.ncpus);
	if (machine_add_state(m, "lpc.rtc", &rtc_state_ops, r) < 0) {
		snprintf(err, errlen, "rtc: cannot register its saved state");
		return -1;
	}
	return machine_register_pio(m, RTC_PORT, RTC_NPORTS, rtc_port_access, r, "rtc");
}

/* The PC/AT clock (PNP0B00) on IRQ 8, ACPI 6.4 section 9.15. */
static void rtc_write_dsdt(struct aml *a)
{
	aml_isa_device(a, "RTC", "PNP0B00", 0, RTC_PORT, RTC_NPORTS, 8);
}

LPC_DEVICE(rtc) = {
    .name = "rtc",
    .descr = "MC146818 RTC and CMOS (built in)",
    .init = rtc_lpc_init,
    .write_dsdt = rtc_write_dsdt,
};
