/*
 * e1000: an Intel 82545EM copper gigabit NIC (8254x SDM; register and bit
 * names in dev/e1000.h) on a tap back end, as bhyve's pci_e82545:
 * -s N,e1000,TAP[,mac=xx:xx:xx:xx:xx:xx].  What Linux's e1000 driver and
 * iPXE's intel driver use: the Microwire EEPROM (EECD) and EERD, the M88
 * PHY behind MDIC with the link up at 1000 full duplex, legacy receive
 * descriptors, legacy and extended transmit descriptors with IP/TCP/UDP
 * checksum insertion and TCP segmentation (TSO: a TCP packet goes to the
 * tap whole as a virtio-net GSO frame, which the host's stack segments;
 * UDP, ECN and a tap that refuses GSO are segmented here), the receive
 * address and multicast filters, clear-on-read statistics, and INTx with
 * ITR interrupt throttling.  The receive and transmit delay timers (RDTR,
 * RADV, TIDV, TADV) are kept but not applied: interrupts come at once,
 * bounded by ITR.
 *
 * Threads: transmit runs on the vCPU that writes TDT (the tap is
 * non-blocking: a frame it refuses is dropped, as a NIC's full FIFO
 * would); one receive thread polls the tap and also raises the interrupts
 * ITR deferred.  Everything runs under the device's lock.  A ring whose
 * base, length or indices are unusable stops that direction (one line,
 * ratelimited) until the guest reprograms it or resets the device.
 * The MAC rules are virtio-net's (bhyve's default from slot and VM name),
 * and the NIC counts frames for the API as "netN" (lib/counters.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "dev/e1000.h"

#include "backend/tap.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "lib/announce.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/counters.h"
#include "lib/devopts.h"
#include "lib/log.h"
#include "lib/mac.h"
#include "lib/sandbox.h"
#include "lib/sbuf.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "csum_add() and the descriptors' fields assume a little-endian host"
#endif

#define NREGS         (E1000_MMIO_SIZE / 4)
#define R(off)        ((off) / 4)
#define PHY_REGS      32
#define RX_MAX_FRAME  (65535 + 14)  /* what a tap may hand over */
#define RX_LPE_MAX    16384         /* with RCTL.LPE (long packets), CRC included */
#define RX_STD_MAX    1522          /* without: 1518 + a VLAN tag */
#define RX_BATCH      256           /* frames per wake: the vCPUs get the lock too */
#define TX_MAX_PACKET (256 + 65536) /* a TSO packet's headers and payload */
#define TSO_HDR_MAX   255           /* HDRLEN is a byte */
#define ETH_MIN       60            /* without the FCS */
#define ITR_UNIT_NS   256

/* The M88E1011 PHY's registers (IEEE 802.3 clause 22, plus Marvell's). */
#define PHY_BMCR     0
#define PHY_BMSR     1
#define PHY_ID1      2
#define PHY_ID2      3
#define PHY_ANAR     4
#define PHY_ANLPAR   5
#define PHY_ANER     6
#define PHY_GCTRL    9
#define PHY_GSTAT    10
#define PHY_ESTAT    15
#define PHY_M88_PSCR 16
#define PHY_M88_PSSR 17
#define BMCR_RESET   0x8000
#define BMCR_RESTART 0x0200

struct e1000_tx_ctx {
	uint8_t ipcss, ipcso, tucss, tucso, tucmd, hdrlen;
	uint16_t ipcse, tucse, mss;
	uint32_t paylen;
};

/* The Microwire EEPROM's serial state (SDM section 5.3): opcode and
 * address shifted in on SK's rising edges, then data shifted out. */
struct e1000_eewire {
	uint16_t in;    /* bits shifted in so far */
	uint8_t nbits;  /* how many, up to 9 (3 opcode + 6 address) */
	bool reading;   /* shifting a word out */
	uint8_t addr;   /* the word being shifted out */
	uint8_t outbit; /* its next bit, 15 down to 0 */
	bool dout;      /* DO as the driver reads it */
};

struct e1000 {
	struct pci_func *f;
	struct guest_mem *mem;
	struct tap *tap;
	pthread_mutex_t lock;
	uint32_t reg[NREGS]; /* the register file, by dword: what the guest wrote */
	uint16_t eeprom[E1000_EEPROM_WORDS];
	uint16_t phy[PHY_REGS];
	struct e1000_eewire ee;
	uint32_t ioaddr; /* BAR 2's IOADDR */
	uint8_t mac[6];
	/* Interrupts: the line, and ITR's clock. */
	bool irq_level;
	uint64_t last_irq_ns, irq_due_ns; /* irq_due_ns: a deferred one, 0 none */
	/* A direction stopped by a malformed ring until reprogrammed. */
	bool rx_broken, tx_broken;
	unsigned gso_refusals; /* in a row; at GSO_REFUSALS_MAX, segment ourselves */
	bool rx_paused;        /* a checkpoint's quiesce */
	/* RARP announcements after a restore, sent by the receive thread. */
	struct announce announce;
	/* Receive: one frame read from the tap that waits for buffers. */
	uint8_t *rx_frame;
	size_t rx_pending;
	int wake_fd;
	pthread_t rx_thread;
	/* Transmit: the packet being assembled, its context, segments. */
	uint8_t *tx_pkt, *tx_seg;
	struct e1000_tx_ctx ctx;
	struct {
		uint64_t packets, bytes, drops, no_buffer;
	} rx;
	struct {
		uint64_t packets, bytes, drops;
	} tx;
	struct counter_source counters;
};

static struct ratelimit e1000_rl = RATELIMIT_INIT;

/* Each counter has one writer at a time (under the lock): relaxed
 * atomics so that the API thread reads them without it. */
static void count(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

static uint32_t *reg(struct e1000 *e, unsigned off)
{
	return &e->reg[R(off)];
}

/* Statistics registers saturate rather than wrap (SDM section 13.7). */
static void stat_add(struct e1000 *e, unsigned off, uint32_t n)
{
	uint32_t *r = reg(e, off);

	*r = *r + n < *r ? UINT32_MAX : *r + n;
}

static void stat_add64(struct e1000 *e, unsigned lo, uint64_t n)
{
	uint64_t v = ((uint64_t)*reg(e, lo + 4) << 32 | *reg(e, lo)) + n;

	*reg(e, lo) = (uint32_t)v;
	*reg(e, lo + 4) = (uint32_t)(v >> 32);
}

/* One direction's statistics registers (SDM section 13.7). */
struct e1000_stat_regs {
	unsigned good, total, octets_good, octets_total, bcast, mcast;
};
static const struct e1000_stat_regs rx_stats = {E1000_GPRC, E1000_TPR,  E1000_GORCL,
                                                E1000_TORL, E1000_BPRC, E1000_MPRC},
                                    tx_stats = {E1000_GPTC, E1000_TPT,  E1000_GOTCL,
                                                E1000_TOTL, E1000_BPTC, E1000_MPTC};

static void stats_frame(struct e1000 *e, const struct e1000_stat_regs *r, const uint8_t *frame,
                        size_t len)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

	stat_add(e, r->good, 1);
	stat_add(e, r->total, 1);
	stat_add64(e, r->octets_good, len);
	stat_add64(e, r->octets_total, len);
	if (len >= 6 && memcmp(frame, bcast, 6) == 0)
		stat_add(e, r->bcast, 1);
	else if (len >= 6 && (frame[0] & 1))
		stat_add(e, r->mcast, 1);
}

/* ---- interrupts (SDM section 13.4.17-21, ITR 13.4.18) ---- */

static void wake_thread(struct e1000 *e)
{
	uint64_t one = 1;

	if (e->wake_fd >= 0 && write(e->wake_fd, &one, sizeof(one)) < 0)
		log_ratelimited(&e1000_rl, LOG_DEBUG, "e1000: cannot wake the receive thread");
}

/* The line follows ICR & IMS, but rises at most once per ITR interval
 * (ITR * 256 ns): sooner, the receive thread raises it when it is due. */
static void irq_update(struct e1000 *e)
{
	uint64_t gap = (uint64_t)(*reg(e, E1000_ITR) & 0xffff) * ITR_UNIT_NS, now;

	if ((*reg(e, E1000_ICR) & *reg(e, E1000_IMS)) == 0) {
		e->irq_due_ns = 0;
		if (e->irq_level)
			pci_intx_deassert(e->f);
		e->irq_level = false;
		return;
	}
	if (e->irq_level)
		return;
	now = monotonic_ns();
	if (gap != 0 && now < e->last_irq_ns + gap) {
		if (e->irq_due_ns == 0)
			wake_thread(e);
		e->irq_due_ns = e->last_irq_ns + gap;
		return;
	}
	e->irq_due_ns = 0;
	e->irq_level = true;
	e->last_irq_ns = now;
	pci_intx_assert(e->f);
}

static void irq_cause(struct e1000 *e, uint32_t bits)
{
	*reg(e, E1000_ICR) |= bits;
	irq_update(e);
}

/* ---- EEPROM (SDM section 5.6: words 0-2 the MAC, 0x3f the checksum) ---- */

static void eeprom_build(struct e1000 *e)
{
	uint16_t sum = 0;

	memset(e->eeprom, 0, sizeof(e->eeprom));
	for (int i = 0; i < 3; i++)
		e->eeprom[i] = (uint16_t)(e->mac[2 * i] | e->mac[2 * i + 1] << 8);
	e->eeprom[0x0b] = E1000_DEVICE; /* subsystem ID */
	e->eeprom[0x0c] = E1000_VENDOR; /* subsystem vendor */
	e->eeprom[0x0d] = E1000_DEVICE;
	e->eeprom[0x0e] = E1000_VENDOR;
	for (int i = 0; i < E1000_EEPROM_WORDS - 1; i++)
		sum = (uint16_t)(sum + e->eeprom[i]);
	e->eeprom[E1000_EEPROM_WORDS - 1] = (uint16_t)(E1000_EEPROM_CSUM_SUM - sum);
}

/* A Microwire READ is the start bit and opcode 10 (0b110), then six
 * address bits; 16 data bits follow, MSB first, and the next word after
 * them for as long as CS stays up. */
#define EE_OP_READ 0x6

static void eecd_clock(struct e1000 *e, bool di)
{
	struct e1000_eewire *w = &e->ee;

	if (w->reading) {
		w->dout = (e->eeprom[w->addr] >> w->outbit) & 1;
		if (w->outbit-- == 0) {
			w->outbit = 15;
			w->addr = (uint8_t)((w->addr + 1) % E1000_EEPROM_WORDS);
		}
		return;
	}
	w->in = (uint16_t)(w->in << 1 | di);
	if (++w->nbits < 9)
		return;
	w->reading = (w->in >> 6) == EE_OP_READ;
	w->addr = w->in & 0x3f;
	w->outbit = 15;
	w->nbits = 0;
	w->in = 0;
}

static void eecd_write(struct e1000 *e, uint32_t v)
{
	uint32_t old = *reg(e, E1000_EECD);
	const uint32_t wires = E1000_EECD_SK | E1000_EECD_CS | E1000_EECD_DI | E1000_EECD_REQ;

	*reg(e, E1000_EECD) = v & wires;
	if (!(v & E1000_EECD_CS)) {
		memset(&e->ee, 0, sizeof(e->ee));
		return;
	}
	if ((v & E1000_EECD_SK) && !(old & E1000_EECD_SK))
		eecd_clock(e, (v & E1000_EECD_DI) != 0);
}

static uint32_t eecd_read(struct e1000 *e)
{
	uint32_t v = *reg(e, E1000_EECD) | E1000_EECD_PRES;

	if (v & E1000_EECD_REQ)
		v |= E1000_EECD_GNT;
	if (e->ee.dout)
		v |= E1000_EECD_DO;
	return v;
}

static void eerd_write(struct e1000 *e, uint32_t v)
{
	unsigned addr = (v >> 8) & 0xff;
	uint16_t data = addr < E1000_EEPROM_WORDS ? e->eeprom[addr] : 0;

	if (v & E1000_EERD_START)
		*reg(e, E1000_EERD) = (uint32_t)data << 16 | addr << 8 | E1000_EERD_DONE;
}

/* ---- PHY through MDIC (SDM section 13.4.6; an M88E1011, link up) ---- */

static void phy_reset(struct e1000 *e)
{
	memset(e->phy, 0, sizeof(e->phy));
	e->phy[PHY_BMCR] = 0x1140;   /* autonegotiation on, 1000, full duplex */
	e->phy[PHY_BMSR] = 0x796d;   /* link up, autonegotiation done, 10/100/1000 */
	e->phy[PHY_ID1] = 0x0141;    /* Marvell */
	e->phy[PHY_ID2] = 0x0c20;    /* 88E1011 */
	e->phy[PHY_ANAR] = 0x01e1;   /* 10/100 half and full */
	e->phy[PHY_ANLPAR] = 0x45e1; /* the partner's, acknowledged, pause */
	e->phy[PHY_ANER] = 0x0001;
	e->phy[PHY_GCTRL] = 0x0300; /* advertise 1000 half and full */
	e->phy[PHY_GSTAT] = 0x3c00; /* receivers OK, partner 1000 half and full */
	e->phy[PHY_ESTAT] = 0x3000;
	e->phy[PHY_M88_PSCR] = 0x0068;
	e->phy[PHY_M88_PSSR] = 0xac00; /* 1000, full duplex, resolved, link */
}

static void phy_write(struct e1000 *e, unsigned r, uint16_t v)
{
	switch (r) {
	case PHY_BMCR:
		if (v & BMCR_RESET)
			phy_reset(e);
		else
			e->phy[r] = v & ~BMCR_RESTART; /* autonegotiation is done at once */
		break;
	case PHY_BMSR:
	case PHY_ID1:
	case PHY_ID2:
	case PHY_ANLPAR:
	case PHY_GSTAT:
	case PHY_ESTAT:
	case PHY_M88_PSSR:
		break; /* read-only */
	default:
		e->phy[r] = v;
	}
}

static void mdic_write(struct e1000 *e, uint32_t v)
{
	unsigned phyadd = (v >> 21) & 0x1f, r = (v >> 16) & 0x1f;
	uint32_t op = v & (3u << 26), out = v & ~(E1000_MDIC_READY | E1000_MDIC_ERROR);

	if (phyadd != E1000_PHY_ADDR || (op != E1000_MDIC_OP_READ && op != E1000_MDIC_OP_WRITE))
		out |= E1000_MDIC_ERROR;
	else if (op == E1000_MDIC_OP_READ)
		out = (out & ~0xffffu) | e->phy[r];
	else
		phy_write(e, r, (uint16_t)v);
	*reg(e, E1000_MDIC) = out | E1000_MDIC_READY;
	if (v & (1u << 29)) /* MDIC.I: interrupt when done */
		irq_cause(e, E1000_ICR_MDAC);
}

/* ---- reset ---- */

static void ra0_load(struct e1000 *e)
{
	*reg(e, E1000_RA) = (uint32_t)e->eeprom[0] | (uint32_t)e->eeprom[1] << 16;
	*reg(e, E1000_RA + 4) = e->eeprom[2] | E1000_RAH_AV;
}

/* CTRL.RST: every register to its default, as after power-up; the EEPROM
 * is read again (RAL0/RAH0), the PHY keeps its state. */
static void device_reset(struct e1000 *e)
{
	memset(e->reg, 0, sizeof(e->reg));
	*reg(e, E1000_CTRL) = E1000_CTRL_SLU | 1u; /* full duplex, link up */
	*reg(e, E1000_PBA) = 0x30;                 /* 48 KiB for receive */
	ra0_load(e);
	memset(&e->ee, 0, sizeof(e->ee));
	memset(&e->ctx, 0, sizeof(e->ctx));
	e->rx_broken = e->tx_broken = false;
	e->rx_pending = 0;
	e->irq_due_ns = 0;
	irq_update(e);
}

/* ---- rings ---- */

struct e1000_ring {
	uint8_t *desc; /* host view of the whole ring */
	uint32_t count, head, tail;
};

/* The ring at `bal` (BAL, BAH, LEN, H, T follow at fixed offsets), or
 * false with one ratelimited line when the guest's values cannot be
 * used: length 0, outside RAM, an index past the end. */
static bool ring_get(struct e1000 *e, unsigned bal, const char *dir, struct e1000_ring *ring)
{
	uint64_t base = ((uint64_t)*reg(e, bal + 4) << 32 | *reg(e, bal)) & ~0xfull;
	uint32_t len = *reg(e, bal + 8);

	ring->count = len / E1000_DESC_SIZE;
	ring->head = *reg(e, bal + 0x10);
	ring->tail = *reg(e, bal + 0x18);
	ring->desc = len ? gmem_ptr(e->mem, base, len, true) : NULL;
	if (ring->desc != NULL && ring->head < ring->count && ring->tail < ring->count)
		return true;
	log_ratelimited(&e1000_rl, LOG_WARN,
	                "e1000: %s ring unusable (base 0x%llx, length %u, head %u, tail %u): "
	                "%s stopped until the driver sets it up again",
	                dir, (unsigned long long)base, len, ring->head, ring->tail, dir);
	return false;
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

/* ---- ones' complement checksums (RFC 1071) ---- */

/* Adds the 16-bit big-endian words of [p, p+len) to `sum`.  The data are
 * summed four bytes at a time in the host's (little-endian, x86) order and
 * the folded result swapped: the ones' complement sum is the same in
 * either byte order (RFC 1071 section 2(B)), and a byte at a time was the
 * transmit path's main cost. */
static uint64_t csum_add(uint64_t sum, const uint8_t *p, size_t len)
{
	uint64_t acc = 0;
	size_t i = 0;
	uint32_t w;
	uint16_t folded;

	for (; i + 4 <= len; i += 4) {
		memcpy(&w, p + i, sizeof(w));
		acc += w;
	}
	for (; i + 2 <= len; i += 2)
		acc += (uint32_t)(p[i] | p[i + 1] << 8);
	if (i < len)
		acc += p[i];
	while (acc >> 16)
		acc = (acc & 0xffff) + (acc >> 16);
	folded = (uint16_t)acc;
	return sum + (uint16_t)(folded >> 8 | folded << 8);
}

static uint16_t csum_fold(uint64_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* Insert the checksum of [css, cse] (cse 0: to the end; inclusive) at
 * cso, as the hardware does: the guest seeded the field (a pseudo-header
 * sum, or 0).  Offsets outside the packet: nothing inserted. */
static void csum_insert(uint8_t *pkt, size_t len, unsigned css, unsigned cso, unsigned cse)
{
	size_t end = cse != 0 && cse < len ? (size_t)cse + 1 : len;

	if (css >= end || (size_t)cso + 2 > len)
		return;
	put_be16(pkt + cso, (uint16_t)~csum_fold(csum_add(0, pkt + css, end - css)));
}

/* ---- transmit (SDM section 3.3) ---- */

static void tx_send(struct e1000 *e, const uint8_t *frame, size_t len)
{
	uint8_t hdr[E1000_VNET_HDR] = {0};
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)frame, len}};

	if (writev(tap_fd(e->tap), iov, 2) < 0) {
		count(&e->tx.drops, 1);
		if (errno != EAGAIN)
			log_ratelimited(&e1000_rl, LOG_DEBUG, "e1000: tap write: %s",
			                strerror(errno));
		return;
	}
	count(&e->tx.packets, 1);
	count(&e->tx.bytes, len);
	stats_frame(e, &tx_stats, frame, len);
}

/* One TCP (or UDP) segment of a TSO packet: the headers with lengths,
 * IP ID, sequence number and flags of segment `i`, its payload, both
 * checksums (SDM section 3.5). */
static void tso_segment(struct e1000 *e, const uint8_t *pkt, size_t total, size_t off, size_t seg,
                        unsigned i)
{
	const struct e1000_tx_ctx *c = &e->ctx;
	uint8_t *s = e->tx_seg;
	size_t hl = c->hdrlen, l4len = hl - c->tucss + seg;
	bool last = hl + off + seg >= total;
	uint64_t sum;

	memcpy(s, pkt, hl);
	memcpy(s + hl, pkt + hl + off, seg);
	if (c->tucmd & E1000_TUCMD_IP) {
		put_be16(s + c->ipcss + 2, (uint16_t)(hl - c->ipcss + seg));
		put_be16(s + c->ipcss + 4, (uint16_t)(get_be16(pkt + c->ipcss + 4) + i));
		put_be16(s + c->ipcso, 0);
		csum_insert(s, hl, c->ipcss, c->ipcso, c->ipcse ? c->ipcse : c->tucss - 1u);
	} else {
		put_be16(s + c->ipcss + 4, (uint16_t)(hl - c->ipcss - 40 + seg));
	}
	if (c->tucmd & E1000_TUCMD_TCP) {
		uint32_t seq =
		    (uint32_t)get_be16(pkt + c->tucss + 4) << 16 | get_be16(pkt + c->tucss + 6);

		seq += (uint32_t)off;
		put_be16(s + c->tucss + 4, (uint16_t)(seq >> 16));
		put_be16(s + c->tucss + 6, (uint16_t)seq);
		if (!last)
			s[c->tucss + 13] &= (uint8_t)~0x09; /* FIN, PSH: the last segment's */
	} else {
		put_be16(s + c->tucss + 4, (uint16_t)l4len);
	}
	/* The guest seeded the field with the pseudo-header sum without the
	 * length; each segment adds its own. */
	sum = csum_add(l4len, s + c->tucss, l4len);
	put_be16(s + c->tucso, (uint16_t)~csum_fold(sum));
	tx_send(e, s, hl + seg);
}

/* The context's headers must lie inside HDRLEN, with room for the fields
 * segmentation rewrites. */
static bool tso_ctx_ok(const struct e1000_tx_ctx *c, size_t total)
{
	unsigned l3 = c->tucmd & E1000_TUCMD_IP ? 20 : 40, l4 = c->tucmd & E1000_TUCMD_TCP ? 20 : 8;

	return c->mss != 0 && c->hdrlen <= total && (unsigned)c->ipcss + l3 <= c->tucss &&
	       (unsigned)c->tucss + l4 <= c->hdrlen && (unsigned)c->ipcso + 2 <= c->hdrlen &&
	       (unsigned)c->tucso + 2 <= c->hdrlen;
}

/* The virtio-net header's fields (virtio 1.2 section 5.1.6) for a TCP
 * segmentation the tap's kernel does: one write instead of one per MSS,
 * which is what makes a guest's bulk transmit cheap for the host stack. */
#define VNET_F_NEEDS_CSUM 1
#define VNET_GSO_TCPV4    1
#define VNET_GSO_TCPV6    4
#define GSO_REFUSALS_MAX  8

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* Hand a TCP TSO packet to the tap whole as a GSO frame, with the lengths
 * and the checksum seed of the whole packet (the guest left both for the
 * segments: Linux's e1000 writes tot_len 0 and a seed without the length).
 * False when the tap refused it; the packet is then as it came. */
static bool gso_send(struct e1000 *e, uint8_t *pkt, size_t total)
{
	const struct e1000_tx_ctx *c = &e->ctx;
	uint8_t hdr[E1000_VNET_HDR] = {VNET_F_NEEDS_CSUM}, seed[2];
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {pkt, total}};
	size_t l4len = total - c->tucss, payload = total - c->hdrlen, segs;
	bool v4 = c->tucmd & E1000_TUCMD_IP;

	if (e->gso_refusals >= GSO_REFUSALS_MAX || !(c->tucmd & E1000_TUCMD_TCP) ||
	    (pkt[c->tucss + 13] & 0x80) || total - c->ipcss > 0xffff || payload <= c->mss)
		return false; /* UDP, CWR (ECN), too long for one IP packet, or one segment */
	memcpy(seed, pkt + c->tucso, 2);
	put_be16(pkt + c->tucso, csum_fold((uint64_t)get_be16(seed) + l4len));
	if (v4) {
		put_be16(pkt + c->ipcss + 2, (uint16_t)(total - c->ipcss));
		put_be16(pkt + c->ipcso, 0);
		csum_insert(pkt, c->hdrlen, c->ipcss, c->ipcso,
		            c->ipcse ? c->ipcse : c->tucss - 1u);
	} else {
		put_be16(pkt + c->ipcss + 4, (uint16_t)(total - c->ipcss - 40));
	}
	hdr[1] = v4 ? VNET_GSO_TCPV4 : VNET_GSO_TCPV6;
	put_le16(hdr + 2, c->hdrlen);
	put_le16(hdr + 4, c->mss);
	put_le16(hdr + 6, c->tucss);
	put_le16(hdr + 8, (uint16_t)(c->tucso - c->tucss));
	if (writev(tap_fd(e->tap), iov, 2) < 0) {
		if (errno != EINVAL) {
			count(&e->tx.drops, 1); /* no room: dropped, as tx_send does */
			return true;
		}
		/* This frame, or every one: after a few in a row, stop asking. */
		e->gso_refusals++;
		log_ratelimited(&e1000_rl, LOG_DEBUG,
		                "e1000: the tap refused a GSO frame: segmenting in software");
		memcpy(pkt + c->tucso, seed, 2);
		return false;
	}
	e->gso_refusals = 0;
	segs = (payload + c->mss - 1) / c->mss;
	count(&e->tx.packets, segs ? segs : 1);
	count(&e->tx.bytes, total + (segs > 1 ? (segs - 1) * c->hdrlen : 0));
	for (size_t i = 0; i < segs; i++)
		stats_frame(e, &tx_stats, pkt,
		            c->hdrlen + (i + 1 < segs ? c->mss : payload - i * c->mss));
	return true;
}

static void tso_send(struct e1000 *e, uint8_t *pkt, size_t total)
{
	size_t payload, off = 0;
	unsigned i = 0;

	if (!tso_ctx_ok(&e->ctx, total)) {
		count(&e->tx.drops, 1);
		log_ratelimited(&e1000_rl, LOG_DEBUG, "e1000: TSO context unusable: dropped");
		return;
	}
	if (gso_send(e, pkt, total))
		return;
	payload = total - e->ctx.hdrlen;
	do {
		size_t seg = payload - off < e->ctx.mss ? payload - off : e->ctx.mss;

		tso_segment(e, pkt, total, off, seg, i++);
		off += seg;
	} while (off < payload);
}

/* What the packet being assembled asks for, from its first data
 * descriptor (legacy: CSO/CSS; extended: POPTS and TSE). */
struct e1000_tx_pkt {
	size_t len;
	bool bad, extended, tse, ixsm, txsm, legacy_ic;
	uint8_t cso, css;
	bool started;
};

static void tx_finish(struct e1000 *e, struct e1000_tx_pkt *p)
{
	if (p->bad) {
		count(&e->tx.drops, 1);
		return;
	}
	if (p->extended && p->tse && (e->ctx.tucmd & E1000_TUCMD_TSE)) {
		tso_send(e, e->tx_pkt, p->len);
		return;
	}
	if (p->extended && p->ixsm)
		csum_insert(e->tx_pkt, p->len, e->ctx.ipcss, e->ctx.ipcso, e->ctx.ipcse);
	if (p->extended && p->txsm)
		csum_insert(e->tx_pkt, p->len, e->ctx.tucss, e->ctx.tucso, e->ctx.tucse);
	if (!p->extended && p->legacy_ic)
		csum_insert(e->tx_pkt, p->len, p->css, p->cso, 0);
	tx_send(e, e->tx_pkt, p->len);
}

static void tx_append(struct e1000 *e, struct e1000_tx_pkt *p, uint64_t addr, uint32_t len)
{
	const uint8_t *buf = len ? gmem_ptr(e->mem, addr, len, false) : NULL;

	if (len == 0 || p->bad)
		return;
	if (buf == NULL || p->len + len > TX_MAX_PACKET) {
		log_ratelimited(&e1000_rl, LOG_DEBUG,
		                "e1000: transmit buffer 0x%llx+%u outside RAM or too long: dropped",
		                (unsigned long long)addr, len);
		p->bad = true;
		return;
	}
	memcpy(e->tx_pkt + p->len, buf, len);
	p->len += len;
}

static void tx_context(struct e1000 *e, const uint8_t *d)
{
	struct e1000_tx_ctx *c = &e->ctx;
	uint32_t cmdlen;

	c->ipcss = d[0];
	c->ipcso = d[1];
	c->ipcse = le16(d + 2);
	c->tucss = d[4];
	c->tucso = d[5];
	c->tucse = le16(d + 6);
	memcpy(&cmdlen, d + 8, 4);
	c->paylen = cmdlen & 0xfffff;
	c->tucmd = (uint8_t)(cmdlen >> 24);
	c->hdrlen = d[13];
	c->mss = le16(d + 14);
}

/* One descriptor of a packet; returns true at its end (EOP). */
static bool tx_desc(struct e1000 *e, struct e1000_tx_pkt *p, const uint8_t *d)
{
	uint8_t cmd = d[11];
	uint32_t lenfield;

	memcpy(&lenfield, d + 8, 4);
	if (!(cmd & E1000_TXD_DEXT)) {
		if (!p->started) {
			p->started = true;
			p->legacy_ic = cmd & E1000_TXD_IC;
			p->cso = d[10];
			p->css = d[13];
		}
		tx_append(e, p, le64(d), lenfield & 0xffff);
		return cmd & E1000_TXD_EOP;
	}
	switch ((lenfield >> 20) & 0xf) {
	case E1000_TXD_DTYP_CTX:
		tx_context(e, d);
		return false;
	case E1000_TXD_DTYP_DATA:
		if (!p->started) {
			p->started = p->extended = true;
			p->tse = cmd & E1000_TXD_TSE;
			p->ixsm = d[13] & E1000_POPTS_IXSM;
			p->txsm = d[13] & E1000_POPTS_TXSM;
		}
		tx_append(e, p, le64(d), lenfield & 0xfffff);
		return cmd & E1000_TXD_EOP;
	default:
		return false; /* a type this NIC lacks: skipped */
	}
}

/* The index of the first EOP between head and tail, or -1: a packet
 * whose end the driver has not handed over yet waits. */
static int64_t tx_find_eop(const struct e1000_ring *r)
{
	for (uint32_t i = r->head; i != r->tail; i = (i + 1) % r->count) {
		const uint8_t *d = r->desc + (size_t)i * E1000_DESC_SIZE;
		uint32_t lenfield;

		memcpy(&lenfield, d + 8, 4);
		if (!(d[11] & E1000_TXD_EOP))
			continue;
		if (!(d[11] & E1000_TXD_DEXT) || ((lenfield >> 20) & 0xf) == E1000_TXD_DTYP_DATA)
			return i;
	}
	return -1;
}

/* Send every complete packet between TDH and TDT. */
static void tx_run(struct e1000 *e)
{
	struct e1000_ring r;
	uint32_t causes = 0;
	int64_t eop;

	if (!(*reg(e, E1000_TCTL) & E1000_TCTL_EN) || e->tx_broken)
		return;
	if (!ring_get(e, E1000_TDBAL, "transmit", &r)) {
		e->tx_broken = true;
		return;
	}
	while ((eop = tx_find_eop(&r)) >= 0) {
		struct e1000_tx_pkt p = {0};
		bool end = false;

		while (!end) {
			uint8_t *d = r.desc + (size_t)r.head * E1000_DESC_SIZE;

			end = r.head == (uint32_t)eop;
			tx_desc(e, &p, d);
			if (d[11] & E1000_TXD_RS) {
				__atomic_store_n(&d[12], (uint8_t)(d[12] | E1000_TXD_DD),
				                 __ATOMIC_RELEASE);
				causes |= E1000_ICR_TXDW;
			}
			r.head = (r.head + 1) % r.count;
		}
		tx_finish(e, &p);
	}
	*reg(e, E1000_TDH) = r.head;
	if (r.head == r.tail)
		causes |= E1000_ICR_TXQE;
	irq_cause(e, causes);
}

/* ---- receive (SDM section 3.2) ---- */

static uint32_t rx_buffer_size(uint32_t rctl)
{
	static const uint32_t plain[4] = {2048, 1024, 512, 256}, ext[4] = {0, 16384, 8192, 4096};
	unsigned bsize = (rctl >> 16) & 3;
	uint32_t v = rctl & E1000_RCTL_BSEX ? ext[bsize] : plain[bsize];

	return v ? v : 2048;
}

/* The multicast table's 12 bits of the address, where RCTL.MO says. */
static bool mta_match(struct e1000 *e, const uint8_t *dst)
{
	static const unsigned shift[4] = {4, 3, 2, 0};
	unsigned mo = (*reg(e, E1000_RCTL) >> 12) & 3;
	unsigned h = ((dst[4] >> shift[mo]) | (unsigned)dst[5] << (8 - shift[mo])) & 0xfff;

	return (*reg(e, E1000_MTA + 4 * (h >> 5)) >> (h & 31)) & 1;
}

static bool ra_match(struct e1000 *e, const uint8_t *dst)
{
	for (unsigned i = 0; i < 16; i++) {
		uint32_t lo = *reg(e, E1000_RA + 8 * i), hi = *reg(e, E1000_RA + 8 * i + 4);
		uint8_t a[6] = {(uint8_t)lo,         (uint8_t)(lo >> 8), (uint8_t)(lo >> 16),
		                (uint8_t)(lo >> 24), (uint8_t)hi,        (uint8_t)(hi >> 8)};

		if ((hi & E1000_RAH_AV) && memcmp(a, dst, 6) == 0)
			return true;
	}
	return false;
}

/* RCTL's filters (SDM section 13.4.22): unicast through the receive
 * addresses or UPE, multicast through the table or MPE, broadcast BAM. */
static bool rx_accept(struct e1000 *e, const uint8_t *frame, size_t len)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	uint32_t rctl = *reg(e, E1000_RCTL);
	size_t max = rctl & E1000_RCTL_LPE ? RX_LPE_MAX : RX_STD_MAX;

	if (len < 14 || len + 4 > max)
		return false;
	if (memcmp(frame, bcast, 6) == 0)
		return rctl & (E1000_RCTL_BAM | E1000_RCTL_MPE);
	if (frame[0] & 1)
		return (rctl & E1000_RCTL_MPE) || mta_match(e, frame);
	return (rctl & E1000_RCTL_UPE) || ra_match(e, frame);
}

/* Write back one receive descriptor: its status byte last, so that a
 * driver that sees DD sees the rest. */
static void rx_desc_done(uint8_t *d, uint16_t len, bool eop, uint8_t errors)
{
	d[8] = (uint8_t)len;
	d[9] = (uint8_t)(len >> 8);
	d[10] = d[11] = 0; /* packet checksum: not computed */
	d[13] = errors;
	d[14] = d[15] = 0;
	__atomic_store_n(&d[12],
	                 (uint8_t)(E1000_RXD_DD | E1000_RXD_IXSM | (eop ? E1000_RXD_EOP : 0)),
	                 __ATOMIC_RELEASE);
}

static void rx_count(struct e1000 *e, const uint8_t *frame, size_t len)
{
	count(&e->rx.packets, 1);
	count(&e->rx.bytes, len);
	stats_frame(e, &rx_stats, frame, len);
}

/* Put the pending frame into the buffers from RDH on.  False when they
 * are too few (the frame keeps waiting) or the ring is unusable. */
static bool rx_deliver(struct e1000 *e)
{
	uint32_t bufsize = rx_buffer_size(*reg(e, E1000_RCTL)), need, avail, rdmts;
	size_t len = e->rx_pending, done = 0;
	struct e1000_ring r;

	if (!ring_get(e, E1000_RDBAL, "receive", &r)) {
		e->rx_broken = true;
		return false;
	}
	need = (uint32_t)((len + bufsize - 1) / bufsize);
	if (need >= r.count) {
		/* Never fits: dropped rather than waiting for ever. */
		count(&e->rx.drops, 1);
		e->rx_pending = 0;
		return true;
	}
	avail = (r.tail + r.count - r.head) % r.count;
	if (avail < need) {
		count(&e->rx.no_buffer, 1);
		return false;
	}
	while (done < len) {
		uint8_t *d = r.desc + (size_t)r.head * E1000_DESC_SIZE;
		size_t take = len - done < bufsize ? len - done : bufsize;
		uint8_t *buf = gmem_ptr(e->mem, le64(d), take, true);

		if (buf != NULL)
			memcpy(buf, e->rx_frame + done, take);
		rx_desc_done(d, (uint16_t)take, done + take == len, buf ? 0 : E1000_RXD_ERR_RXE);
		done += take;
		r.head = (r.head + 1) % r.count;
	}
	*reg(e, E1000_RDH) = r.head;
	rx_count(e, e->rx_frame, len);
	e->rx_pending = 0;
	/* RCTL.RDMTS: free descriptors down to 1/2, 1/4 or 1/8 of the ring. */
	rdmts = (*reg(e, E1000_RCTL) >> 8) & 3;
	avail = (r.tail + r.count - r.head) % r.count;
	irq_cause(e, E1000_ICR_RXT0 | (avail <= r.count >> (rdmts + 1) ? E1000_ICR_RXDMT0 : 0));
	return true;
}

/* Read one frame from the tap into rx_frame, padded to the Ethernet
 * minimum and with its FCS unless RCTL.SECRC strips it.  False when the
 * tap is empty. */
static bool rx_read(struct e1000 *e)
{
	uint8_t hdr[E1000_VNET_HDR];
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {e->rx_frame, RX_MAX_FRAME}};
	ssize_t n = readv(tap_fd(e->tap), iov, 2);
	size_t len;

	if (n < 0)
		return false;
	if (n <= (ssize_t)sizeof(hdr))
		return true; /* nothing to deliver */
	len = (size_t)n - sizeof(hdr);
	if (!rx_accept(e, e->rx_frame, len))
		return true;
	if (len < ETH_MIN) {
		memset(e->rx_frame + len, 0, ETH_MIN - len);
		len = ETH_MIN;
	}
	if (!(*reg(e, E1000_RCTL) & E1000_RCTL_SECRC)) {
		uint32_t fcs = (uint32_t)crc32(0, e->rx_frame, (unsigned)len);

		for (int i = 0; i < 4; i++)
			e->rx_frame[len++] = (uint8_t)(fcs >> (8 * i));
	}
	e->rx_pending = len;
	return true;
}

/* Under the lock: move frames while there are buffers.  Returns true when
 * the thread should watch the tap (false: it waits for RDT or RCTL). */
static bool rx_drain(struct e1000 *e)
{
	bool enabled = *reg(e, E1000_RCTL) & E1000_RCTL_EN;

	if (e->rx_paused || (enabled && e->rx_broken))
		return false;
	for (int i = 0; i < RX_BATCH; i++) {
		if (e->rx_pending == 0 && !rx_read(e))
			return true;
		if (e->rx_pending == 0)
			continue; /* filtered, or read nothing */
		if (!enabled) {
			e->rx_pending = 0; /* receive off: the wire's frames are lost */
			continue;
		}
		if (!rx_deliver(e))
			return false;
	}
	return true;
}

/* ---- self-announce after a restore (lib/announce.h) ---- */

/* The guest's address: receive address 0 as the driver set it, else the
 * configured one. */
static void station_mac(struct e1000 *e, uint8_t mac[6])
{
	uint32_t lo = *reg(e, E1000_RA), hi = *reg(e, E1000_RA + 4);

	if (!(hi & E1000_RAH_AV)) {
		memcpy(mac, e->mac, 6);
		return;
	}
	for (unsigned i = 0; i < 4; i++)
		mac[i] = (uint8_t)(lo >> (8 * i));
	mac[4] = (uint8_t)hi;
	mac[5] = (uint8_t)(hi >> 8);
}

/* The announcement due now, if one is; under the lock. */
static void announce_if_due(struct e1000 *e, uint64_t now)
{
	uint8_t hdr[E1000_VNET_HDR] = {0}, frame[ANNOUNCE_FRAME], mac[6];
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {frame, sizeof(frame)}};

	if (e->rx_paused || !announce_due(&e->announce, now))
		return;
	station_mac(e, mac);
	announce_frame(frame, mac);
	if (writev(tap_fd(e->tap), iov, 2) < 0)
		log_ratelimited(&e1000_rl, LOG_DEBUG, "e1000: %s: announce: %s", tap_name(e->tap),
		                strerror(errno));
	announce_sent(&e->announce, now);
}

/* Until the deferred interrupt or the next announcement, in ns; -1:
 * neither.  In ns, not poll(2)'s ms: ITR intervals are tens of µs (the
 * Linux driver's dynamic ITR sets 4000-20000 interrupts/s), and rounding
 * each one up to a millisecond slowed a bulk receive. */
static int64_t rx_timeout_ns(struct e1000 *e)
{
	uint64_t now = monotonic_ns();
	int ms = announce_poll_ms(&e->announce, now, e->rx_paused);
	int64_t irq = -1, ann = ms < 0 ? -1 : (int64_t)ms * 1000000;

	if (e->irq_due_ns != 0)
		irq = now >= e->irq_due_ns ? 0 : (int64_t)(e->irq_due_ns - now);
	if (irq < 0 || (ann >= 0 && ann < irq))
		return ann;
	return irq;
}

static void *rx_main(void *arg)
{
	struct e1000 *e = arg;
	struct pollfd pfd[2] = {{tap_fd(e->tap), POLLIN, 0}, {e->wake_fd, POLLIN, 0}};
	bool watch_tap = true;
	struct timespec ts;
	uint64_t v;
	int64_t ns;

	sandbox_thread_enter(SANDBOX_NET_RX);
	for (;;) {
		pthread_mutex_lock(&e->lock);
		ns = rx_timeout_ns(e);
		pthread_mutex_unlock(&e->lock);
		pfd[0].events = watch_tap ? POLLIN : 0;
		ts = ns_to_timespec(ns < 0 ? 0 : (uint64_t)ns);
		if (ppoll(pfd, 2, ns < 0 ? NULL : &ts, NULL) < 0 && errno != EINTR)
			break;
		/* Started before sandbox_arm(): filtered from the first wake
		 * after it on. */
		sandbox_thread_enter(SANDBOX_NET_RX);
		if ((pfd[1].revents & POLLIN) && read(e->wake_fd, &v, sizeof(v)) < 0 &&
		    errno != EAGAIN)
			break;
		pthread_mutex_lock(&e->lock);
		if (e->irq_due_ns != 0 && monotonic_ns() >= e->irq_due_ns) {
			e->irq_due_ns = 0;
			irq_update(e);
		}
		announce_if_due(e, monotonic_ns());
		watch_tap = rx_drain(e);
		pthread_mutex_unlock(&e->lock);
	}
	return NULL;
}

/* ---- registers ---- */

static uint32_t reg_read(struct e1000 *e, unsigned off)
{
	uint32_t v;

	switch (off) {
	case E1000_STATUS:
		return E1000_STATUS_FD | E1000_STATUS_LU | E1000_STATUS_1000;
	case E1000_EECD:
		return eecd_read(e);
	case E1000_ICR:
		v = *reg(e, E1000_ICR);
		*reg(e, E1000_ICR) = 0;
		irq_update(e);
		return v;
	case E1000_ICS:
		return *reg(e, E1000_ICR);
	case E1000_IMC:
		return 0;
	default:
		if (off >= E1000_STATS && off < E1000_STATS_END) {
			v = *reg(e, off);
			*reg(e, off) = 0;
			return v;
		}
		return *reg(e, off);
	}
}

static void ctrl_write(struct e1000 *e, uint32_t v)
{
	if (v & E1000_CTRL_RST) {
		device_reset(e);
		return;
	}
	if (v & E1000_CTRL_PHY_RST)
		phy_reset(e);
	*reg(e, E1000_CTRL) = v & ~(E1000_CTRL_RST | E1000_CTRL_PHY_RST);
}

/* A ring register written: that direction may work again. */
static void ring_reg_write(struct e1000 *e, unsigned off, uint32_t v)
{
	bool rx = off < E1000_TDBAL;

	if ((off & 0xff) == (E1000_RDLEN & 0xff))
		v &= 0xfff80; /* bits 19:7: a multiple of 128 bytes */
	*reg(e, off) = v;
	if (rx) {
		e->rx_broken = false;
		wake_thread(e);
	} else {
		e->tx_broken = false;
		if ((off & 0xff) == (E1000_TDT & 0xff))
			tx_run(e);
	}
}

static void reg_write(struct e1000 *e, unsigned off, uint32_t v)
{
	switch (off) {
	case E1000_CTRL:
		ctrl_write(e, v);
		break;
	case E1000_STATUS:
		break;
	case E1000_EECD:
		eecd_write(e, v);
		break;
	case E1000_EERD:
		eerd_write(e, v);
		break;
	case E1000_MDIC:
		mdic_write(e, v);
		break;
	case E1000_ICR:
		*reg(e, E1000_ICR) &= ~v;
		irq_update(e);
		break;
	case E1000_ICS:
		irq_cause(e, v);
		break;
	case E1000_IMS:
		*reg(e, E1000_IMS) |= v;
		irq_update(e);
		break;
	case E1000_IMC:
		*reg(e, E1000_IMS) &= ~v;
		irq_update(e);
		break;
	case E1000_ITR:
		*reg(e, off) = v & 0xffff;
		irq_update(e);
		break;
	case E1000_RCTL:
		*reg(e, off) = v;
		wake_thread(e);
		break;
	case E1000_TCTL:
		*reg(e, off) = v;
		tx_run(e);
		break;
	case E1000_RDBAL:
	case E1000_RDBAH:
	case E1000_RDLEN:
	case E1000_RDH:
	case E1000_RDT:
	case E1000_TDBAL:
	case E1000_TDBAH:
	case E1000_TDLEN:
	case E1000_TDH:
	case E1000_TDT:
		ring_reg_write(e, off, v);
		break;
	default:
		*reg(e, off) = v;
	}
}

/* Registers are dwords; a narrower access reads or merges into one. */
static uint64_t mmio_read(struct e1000 *e, uint64_t offset, unsigned size)
{
	unsigned off = (unsigned)(offset & ~3ull), shift = (unsigned)(offset & 3) * 8;
	uint64_t v;

	if (size == 8)
		return mmio_read(e, offset, 4) | mmio_read(e, offset + 4, 4) << 32;
	if (offset >= E1000_MMIO_SIZE)
		return 0;
	v = reg_read(e, off) >> shift;
	return size >= 4 ? (uint32_t)v : v & ((1u << (8 * size)) - 1);
}

static void mmio_write(struct e1000 *e, uint64_t offset, unsigned size, uint64_t val)
{
	unsigned off = (unsigned)(offset & ~3ull), shift = (unsigned)(offset & 3) * 8;
	uint32_t mask, v;

	if (size == 8) {
		mmio_write(e, offset, 4, (uint32_t)val);
		mmio_write(e, offset + 4, 4, val >> 32);
		return;
	}
	if (offset >= E1000_MMIO_SIZE)
		return;
	if (size >= 4 && shift == 0) {
		reg_write(e, off, (uint32_t)val);
		return;
	}
	mask = (size >= 4 ? 0xffffffffu : (1u << (8 * size)) - 1) << shift;
	v = (e->reg[R(off)] & ~mask) | ((uint32_t)(val << shift) & mask);
	reg_write(e, off, v);
}

static uint64_t e1000_bar_read(struct pci_func *f, int bar, uint64_t offset, unsigned size)
{
	struct e1000 *e = f->softc;
	uint64_t v = 0;

	pthread_mutex_lock(&e->lock);
	if (bar == 0)
		v = mmio_read(e, offset, size);
	else if (offset == E1000_IOADDR)
		v = e->ioaddr;
	else if (offset == E1000_IODATA)
		v = mmio_read(e, e->ioaddr & (E1000_MMIO_SIZE - 4), 4);
	pthread_mutex_unlock(&e->lock);
	return v;
}

static void e1000_bar_write(struct pci_func *f, int bar, uint64_t offset, unsigned size,
                            uint64_t val)
{
	struct e1000 *e = f->softc;

	pthread_mutex_lock(&e->lock);
	if (bar == 0)
		mmio_write(e, offset, size, val);
	else if (offset == E1000_IOADDR)
		e->ioaddr = (uint32_t)val;
	else if (offset == E1000_IODATA)
		mmio_write(e, e->ioaddr & (E1000_MMIO_SIZE - 4), 4, (uint32_t)val);
	pthread_mutex_unlock(&e->lock);
}

/* ---- counters ---- */

static uint64_t load(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static void e1000_read_counters(void *arg, struct counter_out *o)
{
	struct e1000 *e = arg;

	o->put(o, "rx_packets_total", load(&e->rx.packets));
	o->put(o, "rx_bytes_total", load(&e->rx.bytes));
	o->put(o, "tx_packets_total", load(&e->tx.packets));
	o->put(o, "tx_bytes_total", load(&e->tx.bytes));
	o->put(o, "rx_drops_total", load(&e->rx.drops));
	o->put(o, "tx_drops_total", load(&e->tx.drops));
	o->put(o, "rx_no_buffer_total", load(&e->rx.no_buffer));
}

/* "netN" as virtio-net's: N the NICs registered before, in slot order. */
static void e1000_register_counters(struct e1000 *e)
{
	e->counters.kind = COUNTER_NIC;
	snprintf(e->counters.name, sizeof(e->counters.name), "net%u", counters_count(COUNTER_NIC));
	e->counters.read = e1000_read_counters;
	e->counters.arg = e;
	if (counters_register(&e->counters) < 0)
		log_warn("e1000: %s: no counters", tap_name(e->tap));
}

/* ---- creation ---- */

static int e1000_legacy_config(struct config_node *node, const char *conf, char *err, size_t errlen)
{
	return devopts_parse(node, conf, "backend", "network", err, errlen);
}

static int e1000_configure(struct e1000 *e, struct pci_func *f, struct config_node *node,
                           const char *vmname, char *err, size_t errlen)
{
	const char *mac = config_node_get(node, "mac"), *backend = config_node_get(node, "backend");

	if (mac != NULL && (mac_parse(mac, e->mac) < 0 || !mac_is_unicast(e->mac))) {
		snprintf(err, errlen, "bad mac '%s' (want xx:xx:xx:xx:xx:xx, unicast)", mac);
		return -1;
	}
	if (mac == NULL)
		mac_bhyve_default(f->slot, f->func, vmname, e->mac);
	if (!tap_name_valid(backend)) {
		snprintf(err, errlen,
		         "want a tap interface name (tapN, or any name of up to 15 characters), "
		         "not '%s'",
		         backend ? backend : "");
		return -1;
	}
	e->tap = tap_open(backend, E1000_VNET_HDR, err, errlen);
	return e->tap ? 0 : -1;
}

static void e1000_free(struct e1000 *e)
{
	tap_close(e->tap);
	if (e->wake_fd >= 0)
		close(e->wake_fd);
	free(e->rx_frame);
	free(e->tx_pkt);
	free(e->tx_seg);
	free(e);
}

static int e1000_pci_setup(struct pci_func *f)
{
	pci_set_ids(f, E1000_VENDOR, E1000_DEVICE, 0x02, 0x00, 0x00, 0x00);
	pci_set_cfg(f, PCIR_SUBVEND, 2, E1000_VENDOR);
	pci_set_cfg(f, PCIR_SUBDEV, 2, E1000_DEVICE);
	pci_enable_intx(f);
	if (pci_alloc_bar(f, 0, PCI_BAR_MEM32, E1000_MMIO_SIZE) < 0)
		return -1;
	return pci_alloc_bar(f, 2, PCI_BAR_IO, E1000_IO_SIZE);
}

static int e1000_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                      size_t errlen)
{
	struct e1000 *e = calloc(1, sizeof(*e));

	if (e == NULL)
		return -1;
	e->f = f;
	e->mem = &m->vm.mem;
	e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	e->rx_frame = malloc(RX_MAX_FRAME + 4);
	e->tx_pkt = malloc(TX_MAX_PACKET);
	e->tx_seg = malloc(TSO_HDR_MAX + 65536);
	pthread_mutex_init(&e->lock, NULL);
	if (e->wake_fd < 0 || !e->rx_frame || !e->tx_pkt || !e->tx_seg) {
		snprintf(err, errlen, "out of memory or eventfds");
		goto fail;
	}
	if (e1000_configure(e, f, node, m->name, err, errlen) < 0)
		goto fail;
	if (e1000_pci_setup(f) < 0) {
		snprintf(err, errlen, "no room for its BARs");
		goto fail;
	}
	f->softc = e;
	eeprom_build(e);
	phy_reset(e);
	device_reset(e);
	if (pthread_create(&e->rx_thread, NULL, rx_main, e) != 0) {
		snprintf(err, errlen, "cannot start its receive thread");
		goto fail;
	}
	e1000_register_counters(e);
	return 0;
fail:
	f->softc = NULL;
	e1000_free(e);
	return -1;
}

/* ---- saved state (docs/design/snapshots.md section 2, "e1000") ---- */

#define E1000_STATE_VERSION 1

/* Receive stops under the lock, so no frame is half-written; transmit runs
 * on the vCPUs, which a checkpoint has paused.  A frame read from the tap
 * and waiting for buffers is lost, as on a wire. */
static int e1000_quiesce(struct pci_func *f, char *err, size_t errlen)
{
	struct e1000 *e = f->softc;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&e->lock);
	e->rx_paused = true;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

static void e1000_unquiesce(struct pci_func *f)
{
	struct e1000 *e = f->softc;

	pthread_mutex_lock(&e->lock);
	e->rx_paused = false;
	wake_thread(e);
	pthread_mutex_unlock(&e->lock);
}

/* u16 version; the register file (u32 each, 32768); the EEPROM (u16 each,
 * 64); the PHY (u16 each, 32); the EEPROM wire (u16 in, u8 nbits, bool
 * reading, u8 addr, u8 outbit, bool dout); u32 IOADDR; the transmit
 * context (u8 ipcss ipcso tucss tucso tucmd hdrlen, u16 ipcse tucse mss,
 * u32 paylen). */
static int e1000_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	struct e1000 *e = f->softc;
	const struct e1000_tx_ctx *c = &e->ctx;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&e->lock);
	sbuf_put_u16(out, E1000_STATE_VERSION);
	for (unsigned i = 0; i < NREGS; i++)
		sbuf_put_u32(out, e->reg[i]);
	for (unsigned i = 0; i < E1000_EEPROM_WORDS; i++)
		sbuf_put_u16(out, e->eeprom[i]);
	for (unsigned i = 0; i < PHY_REGS; i++)
		sbuf_put_u16(out, e->phy[i]);
	sbuf_put_u16(out, e->ee.in);
	sbuf_put_u8(out, e->ee.nbits);
	sbuf_put_bool(out, e->ee.reading);
	sbuf_put_u8(out, e->ee.addr);
	sbuf_put_u8(out, e->ee.outbit);
	sbuf_put_bool(out, e->ee.dout);
	sbuf_put_u32(out, e->ioaddr);
	sbuf_put_u8(out, c->ipcss);
	sbuf_put_u8(out, c->ipcso);
	sbuf_put_u8(out, c->tucss);
	sbuf_put_u8(out, c->tucso);
	sbuf_put_u8(out, c->tucmd);
	sbuf_put_u8(out, c->hdrlen);
	sbuf_put_u16(out, c->ipcse);
	sbuf_put_u16(out, c->tucse);
	sbuf_put_u16(out, c->mss);
	sbuf_put_u32(out, c->paylen);
	pthread_mutex_unlock(&e->lock);
	return 0;
}

static void ctx_load(struct sbuf_reader *in, struct e1000_tx_ctx *c)
{
	c->ipcss = sbuf_get_u8(in);
	c->ipcso = sbuf_get_u8(in);
	c->tucss = sbuf_get_u8(in);
	c->tucso = sbuf_get_u8(in);
	c->tucmd = sbuf_get_u8(in);
	c->hdrlen = sbuf_get_u8(in);
	c->ipcse = sbuf_get_u16(in);
	c->tucse = sbuf_get_u16(in);
	c->mss = sbuf_get_u16(in);
	c->paylen = sbuf_get_u32(in);
}

/* Every register value is one a guest could have written, which the
 * device copes with; only the EEPROM wire's counters need bounds. */
static int e1000_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct e1000 *e = f->softc;
	uint32_t *regs = malloc(sizeof(e->reg));
	uint16_t eeprom[E1000_EEPROM_WORDS], phy[PHY_REGS];
	struct e1000_eewire w;
	struct e1000_tx_ctx c;
	uint32_t ioaddr;

	(void)err;
	(void)errlen;
	if (regs == NULL || sbuf_get_version(in, E1000_STATE_VERSION) == 0) {
		free(regs);
		return -1;
	}
	for (unsigned i = 0; i < NREGS; i++)
		regs[i] = sbuf_get_u32(in);
	for (unsigned i = 0; i < E1000_EEPROM_WORDS; i++)
		eeprom[i] = sbuf_get_u16(in);
	for (unsigned i = 0; i < PHY_REGS; i++)
		phy[i] = sbuf_get_u16(in);
	w.in = sbuf_get_u16(in);
	w.nbits = sbuf_get_u8(in);
	w.reading = sbuf_get_bool(in);
	w.addr = sbuf_get_u8(in);
	w.outbit = sbuf_get_u8(in);
	w.dout = sbuf_get_bool(in);
	ioaddr = sbuf_get_u32(in);
	ctx_load(in, &c);
	if (!in->failed && (w.nbits >= 9 || w.addr >= E1000_EEPROM_WORDS || w.outbit > 15))
		sbuf_fail(in, "EEPROM wire state out of range");
	if (in->failed) {
		free(regs);
		return -1;
	}
	pthread_mutex_lock(&e->lock);
	memcpy(e->reg, regs, sizeof(e->reg));
	memcpy(e->eeprom, eeprom, sizeof(eeprom));
	memcpy(e->phy, phy, sizeof(phy));
	e->ee = w;
	e->ioaddr = ioaddr;
	e->ctx = c;
	e->rx_broken = e->tx_broken = false;
	e->rx_pending = 0;
	e->irq_due_ns = 0;
	announce_start(&e->announce, monotonic_ns());
	/* The generic part drove the line as saved; ours follows ICR & IMS. */
	e->irq_level = f->intx_asserted;
	irq_update(e);
	wake_thread(e);
	pthread_mutex_unlock(&e->lock);
	free(regs);
	return 0;
}

static const char *const e1000_keys[] = {"backend", "mac", NULL};

PCI_DEVEMU(e1000) = {
    .name = "e1000",
    .descr = "Intel 82545EM gigabit Ethernet on a tap interface",
    .usage = "  -s SLOT,e1000,TAP[,mac=MAC]\n"
             "  TAP              tap interface name (created when missing)\n"
             "  mac=MAC          xx:xx:xx:xx:xx:xx (default: from VM name and slot)\n",
    .keys = e1000_keys,
    .legacy_config = e1000_legacy_config,
    .init = e1000_init,
    .bar_read = e1000_bar_read,
    .bar_write = e1000_bar_write,
    .quiesce = e1000_quiesce,
    .unquiesce = e1000_unquiesce,
    .save = e1000_save,
    .restore = e1000_restore,
};
