/*
 * Unit tests for the e1000 (src/dev/e1000.c), driven through BAR 0 and
 * BAR 2 as Linux's e1000 driver does, in a detached machine (no KVM; INTx
 * through machine.intx_hook) with rings and buffers in fake guest RAM and
 * the tap a socket pair (tests/fake_tap.h): reset and identity, the
 * EEPROM read bit by bit and through EERD with its checksum, the PHY's
 * link, transmit of a legacy frame, with checksum insertion and with TCP
 * segmentation (checksums verified), receive into posted buffers with the
 * address filter, ICR/IMS and the INTx line, ITR throttling, malformed
 * rings that stop one direction without touching the host, and the saved
 * state round trip.
 */
#include "unit.h"

#include <signal.h>

#include "backend/tap.h"
#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "dev/e1000.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/sbuf.h"

#define FAKE_TAP_WRAPPED /* the Makefile wraps tap_*() for this test */
#include "../fake_tap.h" /* the tap: a socket pair */

#define RAM_GPA   0x100000ull
#define RAM_SIZE  0x100000ull
#define TX_RING   (RAM_GPA + 0x0000)
#define RX_RING   (RAM_GPA + 0x1000)
#define TX_BUF    (RAM_GPA + 0x10000)
#define RX_BUF    (RAM_GPA + 0x40000)
#define NDESC     8
#define RXBUF_LEN 2048
#define VH        E1000_VNET_HDR

static const uint8_t test_mac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};

static struct machine m;
static uint8_t *ram;
static struct pci_func *f;
static uint64_t bar0, bar2;
static volatile bool line;

static void intx_hook(struct machine *mm, unsigned gsi, bool level)
{
	(void)mm;
	(void)gsi;
	line = level;
}

static void wr(unsigned off, uint32_t val)
{
	uint64_t v = val;

	if (!iobus_access(&m.mmio, bar0 + off, 4, true, &v))
		fail_msg("BAR 0 write at 0x%x unclaimed", off);
}

static uint32_t rd(unsigned off)
{
	uint64_t v = 0;

	if (!iobus_access(&m.mmio, bar0 + off, 4, false, &v))
		fail_msg("BAR 0 read at 0x%x unclaimed", off);
	return (uint32_t)v;
}

static uint8_t *hva(uint64_t gpa)
{
	return ram + (gpa - RAM_GPA);
}

static int group_setup(void **state)
{
	char err[256] = "";

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	ram = calloc(1, RAM_SIZE);
	if (ram == NULL || machine_init_detached(&m, "unit", ram, RAM_GPA, RAM_SIZE) < 0)
		return -1;
	m.intx_hook = intx_hook;
	config_reset();
	if (config_set("pci.0.3.0.device", "e1000") < 0 ||
	    config_set("pci.0.3.0.backend", "unit0") < 0 ||
	    config_set("pci.0.3.0.mac", "02:11:22:33:44:55") < 0)
		return -1;
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	f = pci_get(0);
	bar0 = f->bar[0].addr;
	bar2 = f->bar[2].addr;
	pci_cfg_write(0, 3, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM | PCIM_CMD_IO | PCIM_CMD_BUSMASTER);
	return f->bar[0].mapped && f->bar[2].mapped && tap_peer >= 0 ? 0 : -1;
}

static void host_drain(void)
{
	uint8_t buf[4096];

	while (recv(tap_peer, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

/* The reset Linux does: CTRL.RST through the I/O BAR, interrupts masked. */
static void reset(void)
{
	uint64_t v = E1000_CTRL;

	assert_true(iobus_access(&m.pio, bar2 + E1000_IOADDR, 4, true, &v));
	v = E1000_CTRL_RST;
	assert_true(iobus_access(&m.pio, bar2 + E1000_IODATA, 4, true, &v));
	wr(E1000_IMC, 0xffffffff);
	rd(E1000_ICR);
	memset(ram, 0, RAM_SIZE);
	host_drain();
}

static void test_reset_identity_link(void **state)
{
	(void)state;
	reset();
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_VENDOR, 2), E1000_VENDOR);
	assert_int_equal(pci_cfg_read(0, 3, 0, PCIR_DEVICE, 2), E1000_DEVICE);
	assert_int_equal(rd(E1000_STATUS) & (E1000_STATUS_LU | E1000_STATUS_FD | (3u << 6)),
	                 E1000_STATUS_LU | E1000_STATUS_FD | E1000_STATUS_1000);
	assert_int_equal(rd(E1000_RA), 0x33221102);
	assert_int_equal(rd(E1000_RA + 4), 0x5544 | E1000_RAH_AV);
	assert_int_equal(rd(E1000_RCTL), 0);
	assert_false(line);
}

/* ---- EEPROM ---- */

static void ee_wire(uint32_t v)
{
	wr(E1000_EECD, v | E1000_EECD_REQ | E1000_EECD_CS);
}

static void ee_out(unsigned bits, unsigned n)
{
	while (n-- > 0) {
		uint32_t di = (bits >> n) & 1 ? E1000_EECD_DI : 0;

		ee_wire(di);
		ee_wire(di | E1000_EECD_SK);
		ee_wire(di);
	}
}

/* A Microwire READ of one word, as e1000_read_eeprom() bit-bangs it. */
static uint16_t ee_read(unsigned addr)
{
	uint16_t v = 0;

	wr(E1000_EECD, E1000_EECD_REQ);
	assert_true(rd(E1000_EECD) & E1000_EECD_GNT);
	ee_wire(0);
	ee_out(0x6, 3);
	ee_out(addr, 6);
	for (int i = 0; i < 16; i++) {
		ee_wire(E1000_EECD_SK);
		v = (uint16_t)(v << 1 | ((rd(E1000_EECD) & E1000_EECD_DO) ? 1 : 0));
		ee_wire(0);
	}
	wr(E1000_EECD, 0);
	return v;
}

static void test_eeprom(void **state)
{
	uint16_t sum = 0;

	(void)state;
	reset();
	for (unsigned i = 0; i < E1000_EEPROM_WORDS; i++)
		sum = (uint16_t)(sum + ee_read(i));
	assert_int_equal(sum, E1000_EEPROM_CSUM_SUM);
	assert_int_equal(ee_read(0), 0x1102);
	assert_int_equal(ee_read(1), 0x3322);
	assert_int_equal(ee_read(2), 0x5544);
	wr(E1000_EERD, 1u << 8 | E1000_EERD_START);
	assert_int_equal(rd(E1000_EERD), 0x3322u << 16 | 1u << 8 | E1000_EERD_DONE);
}

static uint32_t mdic(uint32_t op, unsigned phy, unsigned r, uint16_t data)
{
	wr(E1000_MDIC, op | phy << 21 | r << 16 | data);
	return rd(E1000_MDIC);
}

static void test_phy(void **state)
{
	uint32_t v;

	(void)state;
	reset();
	v = mdic(E1000_MDIC_OP_READ, E1000_PHY_ADDR, 1, 0);
	assert_true(v & E1000_MDIC_READY);
	assert_false(v & E1000_MDIC_ERROR);
	assert_int_equal(v & 0x24, 0x24); /* link up, autonegotiation complete */
	assert_int_equal(mdic(E1000_MDIC_OP_READ, E1000_PHY_ADDR, 2, 0) & 0xffff, 0x0141);
	assert_int_equal(mdic(E1000_MDIC_OP_READ, E1000_PHY_ADDR, 3, 0) & 0xfff0, 0x0c20);
	/* autonegotiation restarted: done at once, the bit self-clears */
	mdic(E1000_MDIC_OP_WRITE, E1000_PHY_ADDR, 0, 0x1340);
	assert_int_equal(mdic(E1000_MDIC_OP_READ, E1000_PHY_ADDR, 0, 0) & 0xffff, 0x1140);
	assert_true(mdic(E1000_MDIC_OP_READ, 2, 1, 0) & E1000_MDIC_ERROR);
}

/* ---- transmit ---- */

static void tx_ring_setup(void)
{
	wr(E1000_TDBAL, (uint32_t)TX_RING);
	wr(E1000_TDBAH, 0);
	wr(E1000_TDLEN, NDESC * E1000_DESC_SIZE);
	wr(E1000_TDH, 0);
	wr(E1000_TDT, 0);
	wr(E1000_TCTL, E1000_TCTL_EN);
}

static void put_desc(uint64_t ring, unsigned i, uint64_t addr, uint32_t lenfield, uint8_t cmd,
                     uint8_t b13)
{
	uint8_t *d = hva(ring + (uint64_t)i * E1000_DESC_SIZE);

	memcpy(d, &addr, 8);
	memcpy(d + 8, &lenfield, 4);
	d[11] = cmd;
	d[12] = 0;
	d[13] = b13;
}

static ssize_t host_recv(uint8_t *buf, size_t len)
{
	return recv(tap_peer, buf, len, MSG_DONTWAIT);
}

static void test_tx_legacy(void **state)
{
	uint8_t buf[256];

	(void)state;
	reset();
	wr(E1000_IMS, E1000_ICR_TXDW);
	tx_ring_setup();
	memset(hva(TX_BUF), 0x5a, 60);
	put_desc(TX_RING, 0, TX_BUF, 60, E1000_TXD_EOP | E1000_TXD_IFCS | E1000_TXD_RS, 0);
	wr(E1000_TDT, 1);
	assert_int_equal(host_recv(buf, sizeof(buf)), VH + 60);
	assert_int_equal(buf[VH + 59], 0x5a);
	assert_int_equal(rd(E1000_TDH), 1);
	assert_true(hva(TX_RING)[12] & E1000_TXD_DD);
	assert_true(line);
	assert_int_equal(rd(E1000_ICR) & (E1000_ICR_TXDW | E1000_ICR_TXQE),
	                 E1000_ICR_TXDW | E1000_ICR_TXQE);
	assert_false(line);
	assert_int_equal(rd(E1000_GPTC), 1);
	assert_int_equal(rd(E1000_GPTC), 0); /* clear on read */
}

static uint64_t sum16(uint64_t sum, const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i += 2)
		sum += (uint32_t)p[i] << 8 | (i + 1 < len ? p[i + 1] : 0);
	return sum;
}

static uint16_t fold(uint64_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* The pseudo-header sum of an IPv4 TCP segment of `len` bytes. */
static uint64_t pseudo(const uint8_t *ip, unsigned len)
{
	return sum16(0, ip + 12, 8) + 6 + len;
}

/* Ethernet, IPv4 (20), TCP (20), then `payload` bytes at TX_BUF. */
static void build_tcp(unsigned payload, bool tso)
{
	uint8_t *p = hva(TX_BUF), *ip = p + 14, *tcp = ip + 20;
	unsigned tot = 40 + payload;
	uint16_t seed;

	memcpy(p, "\x02\x99\x99\x99\x99\x99", 6);
	memcpy(p + 6, test_mac, 6);
	p[12] = 0x08;
	p[13] = 0x00;
	memset(ip, 0, 40);
	ip[0] = 0x45;
	ip[2] = tso ? 0 : (uint8_t)(tot >> 8);
	ip[3] = tso ? 0 : (uint8_t)tot;
	ip[4] = 0x12; /* ID 0x1234 */
	ip[5] = 0x34;
	ip[8] = 64;
	ip[9] = 6;
	memcpy(ip + 12, "\x0a\x00\x00\x01\x0a\x00\x00\x02", 8);
	tcp[4] = 0x10; /* sequence 0x10000000 */
	tcp[12] = 5 << 4;
	tcp[13] = 0x18; /* PSH, ACK */
	for (unsigned i = 0; i < payload; i++)
		tcp[20 + i] = (uint8_t)(i * 7);
	/* The seed Linux writes: the pseudo-header sum, with the length for
	 * checksum offload, without it for TSO. */
	seed = fold(tso ? sum16(0, ip + 12, 8) + 6 : pseudo(ip, 20 + payload));
	tcp[16] = (uint8_t)(seed >> 8);
	tcp[17] = (uint8_t)seed;
}

static void check_tcp(const uint8_t *frame, size_t len)
{
	const uint8_t *ip = frame + 14;
	unsigned tot = (unsigned)(ip[2] << 8 | ip[3]);

	assert_int_equal(tot, len - 14);
	assert_int_equal(fold(sum16(0, ip, 20)), 0xffff);
	assert_int_equal(fold(sum16(pseudo(ip, tot - 20), ip + 20, tot - 20)), 0xffff);
}

/* A context descriptor for IPv4/TCP at 14/34, TSO when `mss`. */
static void put_context(unsigned i, unsigned mss, unsigned paylen)
{
	uint8_t *d = hva(TX_RING + (uint64_t)i * E1000_DESC_SIZE);
	uint32_t cmdlen = paylen | (uint32_t)E1000_TXD_DTYP_CTX << 20 |
	                  (uint32_t)(E1000_TUCMD_TCP | E1000_TUCMD_IP | E1000_TXD_DEXT |
	                             (mss ? E1000_TUCMD_TSE : 0))
	                      << 24;

	memset(d, 0, 16);
	d[0] = 14;      /* IPCSS */
	d[1] = 14 + 10; /* IPCSO */
	d[2] = 33;      /* IPCSE */
	d[4] = 34;      /* TUCSS */
	d[5] = 34 + 16; /* TUCSO */
	memcpy(d + 8, &cmdlen, 4);
	d[13] = 54; /* HDRLEN */
	d[14] = (uint8_t)mss;
	d[15] = (uint8_t)(mss >> 8);
}

static void test_tx_checksum_offload(void **state)
{
	uint8_t buf[2048];
	unsigned len = 54 + 100;

	(void)state;
	reset();
	tx_ring_setup();
	build_tcp(100, false);
	put_context(0, 0, 0);
	put_desc(TX_RING, 1, TX_BUF, len | (uint32_t)E1000_TXD_DTYP_DATA << 20,
	         E1000_TXD_EOP | E1000_TXD_DEXT | E1000_TXD_RS,
	         E1000_POPTS_IXSM | E1000_POPTS_TXSM);
	wr(E1000_TDT, 2);
	assert_int_equal(host_recv(buf, sizeof(buf)), VH + len);
	check_tcp(buf + VH, len);
	assert_int_equal(rd(E1000_TDH), 2);
}

/* A TSO packet of 2500 bytes in MSS 1000, headers and payload in two
 * descriptors as Linux maps an skb; `flags` are the TCP flags. */
static void tso_packet(unsigned payload, unsigned mss, uint8_t flags)
{
	reset();
	tx_ring_setup();
	build_tcp(payload, true);
	hva(TX_BUF)[34 + 13] = flags;
	put_context(0, mss, payload);
	put_desc(TX_RING, 1, TX_BUF, 54 | (uint32_t)E1000_TXD_DTYP_DATA << 20,
	         E1000_TXD_DEXT | E1000_TXD_TSE, E1000_POPTS_IXSM | E1000_POPTS_TXSM);
	put_desc(TX_RING, 2, TX_BUF + 54, payload | (uint32_t)E1000_TXD_DTYP_DATA << 20,
	         E1000_TXD_EOP | E1000_TXD_DEXT | E1000_TXD_TSE | E1000_TXD_RS, 0);
	wr(E1000_TDT, 3);
}

static unsigned le16_at(const uint8_t *p)
{
	return (unsigned)(p[0] | p[1] << 8);
}

/* TCP TSO goes to the tap whole, as a GSO frame (virtio-net header:
 * NEEDS_CSUM, TCPV4, hdr_len, gso_size, csum_start/offset), with the IP
 * length and checksum of the whole packet and the seed with its length. */
static void test_tx_tso_gso(void **state)
{
	static uint8_t buf[VH + 4096];
	unsigned payload = 2500, mss = 1000, len = 54 + payload;
	const uint8_t *ip = buf + VH + 14, *tcp = ip + 20;

	(void)state;
	tso_packet(payload, mss, 0x18);
	assert_int_equal(host_recv(buf, sizeof(buf)), VH + len);
	assert_int_equal(buf[0], 1); /* VIRTIO_NET_HDR_F_NEEDS_CSUM */
	assert_int_equal(buf[1], 1); /* VIRTIO_NET_HDR_GSO_TCPV4 */
	assert_int_equal(le16_at(buf + 2), 54);
	assert_int_equal(le16_at(buf + 4), mss);
	assert_int_equal(le16_at(buf + 6), 34);
	assert_int_equal(le16_at(buf + 8), 16);
	assert_int_equal((unsigned)(ip[2] << 8 | ip[3]), len - 14);
	assert_int_equal(fold(sum16(0, ip, 20)), 0xffff);
	assert_int_equal((unsigned)(tcp[16] << 8 | tcp[17]), fold(pseudo(ip, 20 + payload)));
	assert_memory_equal(tcp + 20, hva(TX_BUF) + 54, payload);
	assert_true(host_recv(buf, sizeof(buf)) < 0);
	assert_true(hva(TX_RING + 2 * E1000_DESC_SIZE)[12] & E1000_TXD_DD);
}

/* With CWR set (ECN) the device segments itself: each segment with its
 * lengths, IP ID, sequence number, flags and both checksums. */
static void test_tx_tso_segments(void **state)
{
	uint8_t buf[2048];
	unsigned payload = 2500, mss = 1000;
	uint32_t seq = 0x10000000;

	(void)state;
	tso_packet(payload, mss, 0x98); /* CWR, PSH, ACK */
	for (unsigned i = 0; i < 3; i++) {
		ssize_t n = host_recv(buf, sizeof(buf));
		unsigned seg = i < 2 ? mss : payload - 2 * mss;
		const uint8_t *tcp = buf + VH + 34;

		assert_int_equal(n, VH + 54 + seg);
		assert_int_equal(buf[1], 0); /* no GSO */
		check_tcp(buf + VH, (size_t)n - VH);
		assert_int_equal(buf[VH + 14 + 5], 0x34 + i); /* IP ID */
		assert_int_equal((uint32_t)tcp[4] << 24 | tcp[5] << 16 | tcp[6] << 8 | tcp[7],
		                 seq + i * mss);
		assert_int_equal(tcp[13], i < 2 ? 0x90 : 0x98); /* PSH on the last only */
		assert_memory_equal(tcp + 20, hva(TX_BUF) + 54 + i * mss, seg);
	}
	assert_true(host_recv(buf, sizeof(buf)) < 0);
	assert_true(hva(TX_RING + 2 * E1000_DESC_SIZE)[12] & E1000_TXD_DD);
}

/* ---- receive ---- */

static void rx_ring_setup(uint32_t rctl)
{
	for (unsigned i = 0; i < NDESC; i++)
		put_desc(RX_RING, i, RX_BUF + (uint64_t)i * RXBUF_LEN, 0, 0, 0);
	wr(E1000_RDBAL, (uint32_t)RX_RING);
	wr(E1000_RDBAH, 0);
	wr(E1000_RDLEN, NDESC * E1000_DESC_SIZE);
	wr(E1000_RDH, 0);
	wr(E1000_RDT, NDESC - 1);
	wr(E1000_RCTL, rctl);
}

static void host_send(const uint8_t *dst, unsigned len, uint8_t fill)
{
	uint8_t frame[VH + 2048];

	memset(frame, 0, VH);
	memcpy(frame + VH, dst, 6);
	memcpy(frame + VH + 6, "\x02\x77\x77\x77\x77\x77", 6);
	memset(frame + VH + 12, fill, len - 12);
	assert_int_equal(send(tap_peer, frame, VH + len, 0), (ssize_t)(VH + len));
}

static bool wait_dd(unsigned i, unsigned ms)
{
	for (unsigned t = 0; t < ms; t++) {
		if (__atomic_load_n(&hva(RX_RING + (uint64_t)i * E1000_DESC_SIZE)[12],
		                    __ATOMIC_ACQUIRE) &
		    E1000_RXD_DD)
			return true;
		usleep(1000);
	}
	return false;
}

static void test_rx(void **state)
{
	const uint8_t *d = hva(RX_RING);

	(void)state;
	reset();
	wr(E1000_IMS, E1000_ICR_RXT0);
	rx_ring_setup(E1000_RCTL_EN | E1000_RCTL_BAM | E1000_RCTL_SECRC);
	host_send(test_mac, 100, 0xa1);
	assert_true(wait_dd(0, 2000));
	assert_int_equal(d[8] | d[9] << 8, 100);
	assert_true(d[12] & E1000_RXD_EOP);
	assert_int_equal(d[13], 0);
	assert_memory_equal(hva(RX_BUF), test_mac, 6);
	assert_int_equal(hva(RX_BUF)[99], 0xa1);
	assert_int_equal(rd(E1000_RDH), 1);
	assert_true(line);
	assert_true(rd(E1000_ICR) & E1000_ICR_RXT0);
	assert_false(line);
	/* without SECRC the FCS follows the frame; short frames are padded */
	wr(E1000_RCTL, E1000_RCTL_EN | E1000_RCTL_BAM);
	host_send((const uint8_t *)"\xff\xff\xff\xff\xff\xff", 42, 0xb2);
	assert_true(wait_dd(1, 2000));
	assert_int_equal(d[16 + 8], 64);
	assert_int_equal(rd(E1000_GPRC), 2);
}

static void test_rx_filter(void **state)
{
	static const uint8_t other[6] = {0x02, 0x42, 0x42, 0x42, 0x42, 0x42};

	(void)state;
	reset();
	rx_ring_setup(E1000_RCTL_EN | E1000_RCTL_SECRC);
	host_send(other, 80, 0xc3);
	host_send((const uint8_t *)"\xff\xff\xff\xff\xff\xff", 80, 0xc4); /* no BAM */
	host_send(test_mac, 80, 0xc5);
	assert_true(wait_dd(0, 2000));
	assert_int_equal(hva(RX_BUF)[79], 0xc5);
	wr(E1000_RCTL, E1000_RCTL_EN | E1000_RCTL_SECRC | E1000_RCTL_UPE);
	host_send(other, 80, 0xc6);
	assert_true(wait_dd(1, 2000));
	assert_int_equal(hva(RX_BUF + RXBUF_LEN)[79], 0xc6);
}

/* The ring full (RDH == RDT): the frame waits for the driver's RDT. */
static void test_rx_waits_for_buffers(void **state)
{
	(void)state;
	reset();
	rx_ring_setup(E1000_RCTL_EN | E1000_RCTL_SECRC);
	wr(E1000_RDT, 0);
	host_send(test_mac, 80, 0xd1);
	usleep(20000);
	assert_false(hva(RX_RING)[12] & E1000_RXD_DD);
	wr(E1000_RDT, 1);
	assert_true(wait_dd(0, 2000));
	assert_int_equal(hva(RX_BUF)[79], 0xd1);
}

/* ---- interrupts ---- */

static bool wait_line(bool want, unsigned ms)
{
	for (unsigned t = 0; t < ms; t++) {
		if (line == want)
			return true;
		usleep(1000);
	}
	return line == want;
}

static void test_icr_ims(void **state)
{
	(void)state;
	reset();
	wr(E1000_ICS, E1000_ICR_LSC);
	assert_false(line); /* masked */
	wr(E1000_IMS, E1000_ICR_LSC);
	assert_true(line);
	assert_int_equal(rd(E1000_IMS), E1000_ICR_LSC);
	wr(E1000_IMC, E1000_ICR_LSC);
	assert_false(line);
	assert_int_equal(rd(E1000_ICR), E1000_ICR_LSC);
	assert_int_equal(rd(E1000_ICR), 0);
}

static void test_itr_throttles(void **state)
{
	uint64_t t0;

	(void)state;
	reset();
	wr(E1000_ITR, 0xffff); /* 16.8 ms between interrupts */
	wr(E1000_IMS, E1000_ICR_LSC);
	wr(E1000_ICS, E1000_ICR_LSC);
	assert_true(wait_line(true, 1000)); /* at once, or ITR after the last test's */
	t0 = monotonic_ns();
	rd(E1000_ICR);
	assert_false(line);
	wr(E1000_ICS, E1000_ICR_LSC);
	assert_false(line); /* too soon: deferred */
	assert_true(wait_line(true, 1000));
	assert_true(monotonic_ns() - t0 >= 0xffffull * 256 - 1000000);
	rd(E1000_ICR);
	wr(E1000_ITR, 0);
}

/* ---- malformed rings ---- */

static void test_malformed_tx(void **state)
{
	uint8_t buf[256];

	(void)state;
	reset();
	tx_ring_setup();
	put_desc(TX_RING, 0, TX_BUF, 60, E1000_TXD_EOP | E1000_TXD_RS, 0);
	wr(E1000_TDLEN, 0); /* length 0 */
	wr(E1000_TDT, 1);
	assert_true(host_recv(buf, sizeof(buf)) < 0);
	wr(E1000_TDLEN, NDESC * E1000_DESC_SIZE);
	wr(E1000_TDBAL, 0x7fff0000); /* outside RAM */
	wr(E1000_TDT, 1);
	assert_true(host_recv(buf, sizeof(buf)) < 0);
	wr(E1000_TDBAL, (uint32_t)TX_RING);
	wr(E1000_TDT, 200); /* past the end */
	assert_true(host_recv(buf, sizeof(buf)) < 0);
	assert_int_equal(rd(E1000_TDH), 0);
	/* a buffer outside RAM: that frame is dropped, the ring goes on */
	put_desc(TX_RING, 0, 0xfff00000, 60, E1000_TXD_EOP | E1000_TXD_RS, 0);
	put_desc(TX_RING, 1, TX_BUF, 60, E1000_TXD_EOP | E1000_TXD_RS, 0);
	wr(E1000_TDT, 2);
	assert_int_equal(host_recv(buf, sizeof(buf)), VH + 60);
	assert_true(host_recv(buf, sizeof(buf)) < 0);
	assert_int_equal(rd(E1000_TDH), 2);
}

static void test_malformed_rx(void **state)
{
	(void)state;
	reset();
	rx_ring_setup(E1000_RCTL_EN | E1000_RCTL_SECRC);
	wr(E1000_RDH, 100); /* past the end */
	host_send(test_mac, 80, 0xe1);
	usleep(20000);
	assert_false(hva(RX_RING)[12] & E1000_RXD_DD);
	wr(E1000_RDLEN, 0);
	wr(E1000_RDH, 0);
	usleep(20000);
	assert_false(hva(RX_RING)[12] & E1000_RXD_DD);
	/* set up again: the waiting frame arrives */
	wr(E1000_RDLEN, NDESC * E1000_DESC_SIZE);
	assert_true(wait_dd(0, 2000));
	assert_int_equal(hva(RX_BUF)[79], 0xe1);
	/* a buffer outside RAM: the descriptor says so, nothing written */
	put_desc(RX_RING, 1, 0xfff00000, 0, 0, 0);
	host_send(test_mac, 80, 0xe2);
	assert_true(wait_dd(1, 2000));
	assert_int_equal(hva(RX_RING + 16)[13], E1000_RXD_ERR_RXE);
}

/* ---- saved state ---- */

/* RARP frames (broadcast, from test_mac, op 3) the host gets within
 * `ms`, counting from the last call's; stops early at `want`. */
static unsigned rarps_within(unsigned ms, unsigned want)
{
	static unsigned seen;
	uint8_t buf[4096];
	ssize_t n;

	for (unsigned t = 0; t < ms && seen < want; t++) {
		while ((n = host_recv(buf, sizeof(buf))) > 0) {
			const uint8_t *e = buf + E1000_VNET_HDR;

			if (n == E1000_VNET_HDR + 60 && e[12] == 0x80 && e[13] == 0x35 &&
			    e[0] == 0xff && memcmp(e + 6, test_mac, 6) == 0 && e[21] == 3 &&
			    memcmp(e + 22, test_mac, 6) == 0)
				seen++;
		}
		usleep(1000);
	}
	return seen;
}

static void test_save_restore(void **state)
{
	struct sbuf s = {0};
	struct sbuf_reader r;
	char err[256] = "";

	(void)state;
	reset();
	rx_ring_setup(E1000_RCTL_EN | E1000_RCTL_SECRC);
	wr(E1000_IMS, E1000_ICR_RXT0);
	assert_int_equal(f->de->quiesce(f, err, sizeof(err)), 0);
	assert_int_equal(f->de->save(f, &s, err, sizeof(err)), 0);
	reset();
	assert_int_equal(rd(E1000_RCTL), 0);
	sbuf_reader_init(&r, s.data, s.len);
	assert_int_equal(f->de->restore(f, &r, err, sizeof(err)), 0);
	f->de->unquiesce(f);
	assert_int_equal(rd(E1000_RCTL), E1000_RCTL_EN | E1000_RCTL_SECRC);
	assert_int_equal(rd(E1000_RDT), NDESC - 1);
	assert_int_equal(ee_read(1), 0x3322);
	host_send(test_mac, 80, 0xf1);
	assert_true(wait_dd(0, 2000));
	/* the restore announces the station address: five RARP broadcasts */
	assert_int_equal(rarps_within(3000, 5), 5);
	assert_int_equal(rarps_within(600, 6), 5);
	/* cut short: refused */
	sbuf_reader_init(&r, s.data, s.len / 2);
	assert_int_equal(f->de->restore(f, &r, err, sizeof(err)), -1);
	sbuf_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reset_identity_link),
	    cmocka_unit_test(test_eeprom),
	    cmocka_unit_test(test_phy),
	    cmocka_unit_test(test_tx_legacy),
	    cmocka_unit_test(test_tx_checksum_offload),
	    cmocka_unit_test(test_tx_tso_gso),
	    cmocka_unit_test(test_tx_tso_segments),
	    cmocka_unit_test(test_rx),
	    cmocka_unit_test(test_rx_filter),
	    cmocka_unit_test(test_rx_waits_for_buffers),
	    cmocka_unit_test(test_icr_ims),
	    cmocka_unit_test(test_itr_throttles),
	    cmocka_unit_test(test_malformed_tx),
	    cmocka_unit_test(test_malformed_rx),
	    cmocka_unit_test(test_save_restore),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
