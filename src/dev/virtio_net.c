/*
 * virtio-net (virtio 1.2 section 5.1) on a tap back end:
 * -s N,virtio-net,tapN[,mac=xx:xx:xx:xx:xx:xx][,mtu=N].
 *
 * The guest's virtio-net header and the tap's vnet header are the same
 * format, so frames move between guest buffers and the tap with one
 * readv/writev and no copy; checksum and TSO offloads are negotiated with
 * the tap (TUNSETOFFLOAD).  Receive uses mergeable buffers: one frame may
 * fill several descriptor chains (num_buffers).  One thread per direction.
 * The default MAC is bhyve's: OUI 00:a0:98 and the first three bytes of
 * MD5("SLOT-FUNC-VMNAME"), so a VM keeps its address when moved from bhyve.
 * Each NIC counts its frames for the API as "net0", "net1", ... in slot
 * order (lib/counters.h).  After a restore or an incoming migration the
 * NIC announces its MAC with RARP broadcasts, as QEMU's self-announce does,
 * so that bridges and switches learn the guest's new port before it sends.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dev/virtio_net.h"

#include "backend/tap.h"
#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "core/machine.h"
#include "lib/announce.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/counters.h"
#include "lib/devopts.h"
#include "lib/log.h"
#include "lib/mac.h"
#include "lib/parse.h"
#include "lib/sandbox.h"
#include "lib/sbuf.h"

#define VIRTIO_ID_NET           1

#define VIRTIO_NET_F_CSUM       0
#define VIRTIO_NET_F_GUEST_CSUM 1
#define VIRTIO_NET_F_MTU        3
#define VIRTIO_NET_F_MAC        5
#define VIRTIO_NET_F_GUEST_TSO4 7
#define VIRTIO_NET_F_GUEST_TSO6 8
#define VIRTIO_NET_F_GUEST_ECN  9
#define VIRTIO_NET_F_HOST_TSO4  11
#define VIRTIO_NET_F_HOST_TSO6  12
#define VIRTIO_NET_F_HOST_ECN   13
#define VIRTIO_NET_F_MRG_RXBUF  15
#define VIRTIO_NET_F_STATUS     16

#define VIRTIO_NET_S_LINK_UP    1

#define NET_HDR_LEN             12 /* struct virtio_net_hdr_v1, with num_buffers */
#define NET_NUM_BUFFERS_OFF     10 /* num_buffers in that header */
#define NET_QUEUE_SIZE          256
#define NET_RXQ                 0
#define NET_TXQ                 1
#define NET_MAX_FRAME           (65535 + 14 + 4) /* a GSO frame with its Ethernet header */
#define NET_RX_IOV              256
#define NET_RX_CHAINS           64
#define NET_TX_IOV              64
#define NET_MIN_MTU             68
#define NET_MAX_MTU             65535

struct virtio_net_config {
	uint8_t mac[6];
	uint16_t status;
	uint16_t max_virtqueue_pairs;
	uint16_t mtu;
} __attribute__((packed));

struct virtio_net {
	struct virtio_dev vd;
	struct tap *tap;
	struct virtio_net_config cfg;
	/* receive */
	pthread_t rx_thread;
	int rx_stop_fd;
	bool rx_running;
	/* A checkpoint's quiesce (under the receive queue's lock): the
	 * thread leaves the tap unread; what overflows it is lost, as on a
	 * wire. */
	bool rx_paused;
	/* RARP announcements still to send: set by a restore, sent by the
	 * receive thread (under the receive queue's lock). */
	struct announce announce;
	struct iovec rx_iov[NET_RX_IOV];
	struct vq_elem rx_elem[NET_RX_CHAINS];
	uint8_t *rx_bounce; /* for frames when the posted buffers may be too small */
	/* transmit */
	struct virtio_worker tx_worker;
	struct vq_elem tx_elem;
	struct iovec tx_iov[NET_TX_IOV];
	/* Counters, each written by one thread (relaxed atomic loads and
	 * stores); bytes are frame bytes, without the virtio-net header. */
	struct {
		uint64_t packets, bytes;
		uint64_t drops;     /* frames khyve dropped: too big for the buffers */
		uint64_t no_buffer; /* times the guest's buffers ran out */
	} rx;
	struct {
		uint64_t packets, bytes;
		uint64_t drops; /* frames the tap refused (write failed, EAGAIN) */
	} tx;
	struct counter_source counters;
};

static struct ratelimit net_rl = RATELIMIT_INIT;

/* Each counter has one writer (the receive thread, or the transmit
 * worker): a relaxed load and store, no locked add. */
static void count(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* ---- transmit: guest -> tap ---- */

/* Header and frame go to the tap as they are; a frame the tap cannot take
 * is dropped, as a full NIC queue would. */
static void tx_frame(struct virtio_net *net, const struct vq_elem *e)
{
	ssize_t n = writev(tap_fd(net->tap), e->iov, (int)e->nread);

	if (n < 0) {
		count(&net->tx.drops, 1);
		if (errno != EAGAIN)
			log_ratelimited(&net_rl, LOG_DEBUG, "virtio-net: tap write: %s",
			                strerror(errno));
		return;
	}
	count(&net->tx.packets, 1);
	count(&net->tx.bytes, n > NET_HDR_LEN ? (uint64_t)n - NET_HDR_LEN : 0);
}

static void net_tx(struct virtio_dev *vd, unsigned qi)
{
	struct virtio_net *net = vd->softc;
	struct virtqueue *vq = &vd->queue[qi].vq;
	struct vq_elem *e = &net->tx_elem;
	enum vq_pop_result r;
	bool pushed = false;

	while ((r = vq_pop(vq, e)) == VQ_GOT) {
		if (e->nread > 0 && e->read_len > NET_HDR_LEN)
			tx_frame(net, e);
		vq_push(vq, e->head, 0);
		pushed = true;
	}
	if (r == VQ_ERROR)
		virtio_needs_reset(vd, "malformed transmit chain");
	if (pushed && vq_should_notify(vq))
		virtio_queue_interrupt(vd, qi);
}

/* ---- receive: tap -> guest ---- */

/* Gather chains until they can hold the largest frame (or one chain
 * without mergeable buffers).  Returns the chain count, -1 on a malformed
 * chain. */
static int rx_gather(struct virtio_net *net, struct virtqueue *vq, bool mergeable, unsigned *niov,
                     uint64_t *room)
{
	int nchains = 0;

	*niov = 0;
	*room = 0;
	while (nchains < NET_RX_CHAINS && *room < NET_HDR_LEN + NET_MAX_FRAME &&
	       *niov < NET_RX_IOV) {
		struct vq_elem *e = &net->rx_elem[nchains];
		enum vq_pop_result r;

		e->iov = &net->rx_iov[*niov];
		e->iov_cap = NET_RX_IOV - *niov;
		r = vq_pop(vq, e);
		if (r == VQ_ERROR)
			return -1;
		if (r == VQ_EMPTY)
			break;
		if (e->nread != 0 || e->write_len < NET_HDR_LEN) {
			vq_unpop(vq, 1);
			return nchains > 0 ? nchains : -1;
		}
		*niov += e->nwrite;
		*room += e->write_len;
		nchains++;
		if (!mergeable)
			break;
	}
	return nchains;
}

/* How many of the first `nchains` chains `len` bytes fill. */
static uint16_t rx_chains_used(const struct vq_elem *chains, int nchains, size_t len)
{
	uint16_t used = 0;

	for (int i = 0; i < nchains && len > 0; i++, used++)
		len -= len < chains[i].write_len ? len : chains[i].write_len;
	return used;
}

void virtio_net_rx_publish(struct virtqueue *vq, const struct vq_elem *chains, int nchains,
                           size_t len, bool mergeable)
{
	uint16_t used = rx_chains_used(chains, nchains, len);
	/* virtio 1.2 section 5.1.6.4: the buffers merged, 1 without
	 * MRG_RXBUF (the tap leaves these two bytes alone). */
	uint16_t num_buffers = mergeable ? used : 1;
	size_t left = len;

	/* The header must be complete before the guest can see the chain:
	 * vq_push()'s release store of the used index orders this write
	 * before it, so a driver polling used->idx never reads a stale
	 * num_buffers. */
	buf_to_iov(chains[0].iov, chains[0].nwrite, NET_NUM_BUFFERS_OFF, &num_buffers,
	           sizeof(num_buffers));
	for (uint16_t i = 0; i < used; i++) {
		uint32_t take = (uint32_t)(left < chains[i].write_len ? left : chains[i].write_len);

		vq_push(vq, chains[i].head, take);
		left -= take;
	}
	vq_unpop(vq, (unsigned)(nchains - used));
}

/*
 * Read one frame into the gathered buffers: straight into them when they
 * can hold any frame, else through a bounce buffer so a frame that does
 * not fit is dropped whole rather than delivered truncated.  Returns the
 * length, 0 for a dropped frame, -1 when the tap is empty.
 */
static ssize_t rx_read(struct virtio_net *net, unsigned niov, uint64_t room)
{
	ssize_t n;

	if (room >= NET_HDR_LEN + NET_MAX_FRAME) {
		n = readv(tap_fd(net->tap), net->rx_iov, (int)niov);
		return n > 0 ? n : -1;
	}
	n = read(tap_fd(net->tap), net->rx_bounce, NET_HDR_LEN + NET_MAX_FRAME);
	if (n <= 0)
		return -1;
	if ((uint64_t)n > room) {
		count(&net->rx.drops, 1);
		log_ratelimited(&net_rl, LOG_DEBUG, "virtio-net: %zd-byte frame dropped", n);
		return 0;
	}
	buf_to_iov(net->rx_iov, niov, 0, net->rx_bounce, (size_t)n);
	return n;
}

/* Move frames until the tap is empty or buffers run out.  Returns true
 * when it stopped for lack of guest buffers. */
static bool rx_drain(struct virtio_net *net, struct virtio_queue *q)
{
	bool mergeable = virtio_has_feature(&net->vd, VIRTIO_NET_F_MRG_RXBUF);
	bool pushed = false, starved = false;

	for (;;) {
		unsigned niov;
		uint64_t room;
		int nchains = rx_gather(net, &q->vq, mergeable, &niov, &room);
		ssize_t n;

		if (nchains < 0) {
			/* As vq_pop() does with a chain it refuses: the queue is
			 * dead until the driver resets the device.  Left live, a
			 * read-only chain was retried (with a configuration
			 * interrupt each time) for as long as frames arrived. */
			q->vq.ready = false;
			virtio_needs_reset(&net->vd, "malformed receive chain");
			break;
		}
		if (nchains == 0) {
			starved = !vq_enable_kicks(&q->vq, true);
			if (!starved)
				continue; /* buffers arrived meanwhile */
			/* Frames wait in the tap's queue now; what overflows it
			 * the host counts as the tap's TX drops. */
			count(&net->rx.no_buffer, 1);
			break;
		}
		n = rx_read(net, niov, room);
		if (n <= 0) {
			vq_unpop(&q->vq, (unsigned)nchains);
			if (n < 0)
				break;
			continue; /* a frame too big for the buffers was dropped */
		}
		virtio_net_rx_publish(&q->vq, net->rx_elem, nchains, (size_t)n, mergeable);
		count(&net->rx.packets, 1);
		count(&net->rx.bytes, n > NET_HDR_LEN ? (uint64_t)n - NET_HDR_LEN : 0);
		pushed = true;
	}
	if (pushed && vq_should_notify(&q->vq))
		virtio_queue_interrupt(&net->vd, NET_RXQ);
	return starved;
}

/* ---- self-announce (lib/announce.h) ---- */

static void announce_send(struct virtio_net *net)
{
	uint8_t hdr[NET_HDR_LEN] = {0}, frame[ANNOUNCE_FRAME];
	size_t len = announce_frame(frame, net->cfg.mac);
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {frame, len}};

	if (writev(tap_fd(net->tap), iov, 2) < 0)
		log_ratelimited(&net_rl, LOG_DEBUG, "virtio-net: %s: announce: %s",
		                tap_name(net->tap), strerror(errno));
}

/* poll(2)'s timeout until the next announcement (-1: none due), sending
 * the one due now; under the receive queue's lock. */
static int announce_due_ms(struct virtio_net *net)
{
	uint64_t now = monotonic_ns();

	if (!net->rx_paused && announce_due(&net->announce, now)) {
		announce_send(net);
		announce_sent(&net->announce, now);
	}
	return announce_poll_ms(&net->announce, now, net->rx_paused);
}

static int rx_poll_timeout(struct virtio_net *net, struct virtio_queue *q)
{
	int ms;

	pthread_mutex_lock(&q->lock);
	ms = announce_due_ms(net);
	pthread_mutex_unlock(&q->lock);
	return ms;
}

static void *rx_main(void *arg)
{
	struct virtio_net *net = arg;
	struct virtio_queue *q = &net->vd.queue[NET_RXQ];
	struct pollfd pfd[3] = {
	    {tap_fd(net->tap), POLLIN, 0},
	    {q->kick_fd, POLLIN, 0},
	    {net->rx_stop_fd, POLLIN, 0},
	};
	bool starved = false;
	uint64_t v;

	sandbox_thread_enter(SANDBOX_NET_RX);
	for (;;) {
		/* Without buffers, wait for the guest's kick, not the tap. */
		pfd[0].events = starved ? 0 : POLLIN;
		if (poll(pfd, 3, rx_poll_timeout(net, q)) < 0 && errno != EINTR)
			break;
		/* Started by a restore, before sandbox_arm(): filtered from the
		 * first wake after it on. */
		sandbox_thread_enter(SANDBOX_NET_RX);
		if (pfd[2].revents)
			break;
		if (!(pfd[0].revents | pfd[1].revents))
			continue; /* only an announcement was due */
		if (pfd[1].revents && read(q->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			break;
		pthread_mutex_lock(&q->lock);
		if (net->rx_paused) {
			/* Until the unquiesce's kick, watch only kick and stop. */
			starved = true;
			pthread_mutex_unlock(&q->lock);
			continue;
		}
		vq_enable_kicks(&q->vq, false);
		/* A queue that is not live (never enabled, or broken by a
		 * malformed chain) has no buffers either: waiting on the tap
		 * then would spin while frames arrive (found by
		 * tests/fuzz/fuzz_virtio_net). */
		starved = q->vq.ready ? rx_drain(net, q) : true;
		pthread_mutex_unlock(&q->lock);
	}
	return NULL;
}

/* ---- lifecycle ---- */

static void net_features_ok(struct virtio_dev *vd)
{
	struct virtio_net *net = vd->softc;

	if (tap_set_offload(net->tap, virtio_has_feature(vd, VIRTIO_NET_F_GUEST_CSUM),
	                    virtio_has_feature(vd, VIRTIO_NET_F_GUEST_TSO4),
	                    virtio_has_feature(vd, VIRTIO_NET_F_GUEST_TSO6),
	                    virtio_has_feature(vd, VIRTIO_NET_F_GUEST_ECN)) < 0)
		log_warn("virtio-net: %s: cannot set offloads", tap_name(net->tap));
}

static void net_start(struct virtio_dev *vd)
{
	struct virtio_net *net = vd->softc;

	net->rx_paused = false;
	net->rx_stop_fd = eventfd(0, EFD_CLOEXEC);
	if (net->rx_stop_fd < 0 || pthread_create(&net->rx_thread, NULL, rx_main, net) != 0 ||
	    virtio_worker_start(&net->tx_worker, vd, NET_TXQ, net_tx) < 0) {
		virtio_needs_reset(vd, "cannot start queue threads");
		return;
	}
	net->rx_running = true;
}

static void net_stop(struct virtio_dev *vd)
{
	struct virtio_net *net = vd->softc;
	uint64_t one = 1;

	virtio_worker_stop(&net->tx_worker);
	if (net->rx_running) {
		if (write(net->rx_stop_fd, &one, sizeof(one)) < 0)
			log_warn("virtio-net: cannot stop the receive thread");
		pthread_join(net->rx_thread, NULL);
		net->rx_running = false;
	}
	if (net->rx_stop_fd >= 0)
		close(net->rx_stop_fd);
	net->rx_stop_fd = -1;
	tap_set_offload(net->tap, false, false, false, false);
}

static void net_cfg_read(struct virtio_dev *vd, unsigned off, unsigned size, void *buf)
{
	struct virtio_net *net = vd->softc;

	if (off + size <= sizeof(net->cfg))
		memcpy(buf, (uint8_t *)&net->cfg + off, size);
}

static const struct virtio_ops net_ops = {
    .name = "virtio-net",
    .device_type = VIRTIO_ID_NET,
    .pci_class = 0x02, /* network, Ethernet */
    .pci_subclass = 0x00,
    .cfg_read = net_cfg_read,
    .start = net_start,
    .stop = net_stop,
    .features_ok = net_features_ok,
};

/* ---- counters ---- */

static uint64_t load(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static void net_read_counters(void *arg, struct counter_out *o)
{
	struct virtio_net *net = arg;

	o->put(o, "rx_packets_total", load(&net->rx.packets));
	o->put(o, "rx_bytes_total", load(&net->rx.bytes));
	o->put(o, "tx_packets_total", load(&net->tx.packets));
	o->put(o, "tx_bytes_total", load(&net->tx.bytes));
	o->put(o, "rx_drops_total", load(&net->rx.drops));
	o->put(o, "tx_drops_total", load(&net->tx.drops));
	o->put(o, "rx_no_buffer_total", load(&net->rx.no_buffer));
}

/* "netN", N the NICs registered before: slot order, as pci_init() goes. */
static void net_register_counters(struct virtio_net *net)
{
	net->counters.kind = COUNTER_NIC;
	snprintf(net->counters.name, sizeof(net->counters.name), "net%u",
	         counters_count(COUNTER_NIC));
	net->counters.read = net_read_counters;
	net->counters.arg = net;
	if (counters_register(&net->counters) < 0)
		log_warn("virtio-net: %s: no counters", tap_name(net->tap));
}

/* ---- creation ---- */

static int net_legacy_config(struct config_node *node, const char *conf, char *err, size_t errlen)
{
	/* NULL or "": a NIC without a back end, as bhyve allows. */
	return devopts_parse(node, conf, "backend", "network", err, errlen);
}

static int net_configure(struct virtio_net *net, struct pci_func *f, struct config_node *node,
                         const char *vmname, uint64_t *features, char *err, size_t errlen)
{
	const char *mac = config_node_get(node, "mac"), *mtu = config_node_get(node, "mtu");
	uint64_t v;

	if (mac != NULL && (mac_parse(mac, net->cfg.mac) < 0 || !mac_is_unicast(net->cfg.mac))) {
		snprintf(err, errlen, "bad mac '%s' (want xx:xx:xx:xx:xx:xx, unicast)", mac);
		return -1;
	}
	if (mac == NULL)
		mac_bhyve_default(f->slot, f->func, vmname, net->cfg.mac);
	net->cfg.status = VIRTIO_NET_S_LINK_UP;
	net->cfg.max_virtqueue_pairs = 1;
	if (mtu != NULL) {
		if (parse_uint(mtu, NET_MIN_MTU, NET_MAX_MTU, &v) < 0) {
			snprintf(err, errlen, "bad mtu '%s' (want %d-%d)", mtu, NET_MIN_MTU,
			         NET_MAX_MTU);
			return -1;
		}
		net->cfg.mtu = (uint16_t)v;
		*features |= 1ull << VIRTIO_NET_F_MTU;
	}
	return 0;
}

static int net_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                    size_t errlen)
{
	struct virtio_net *net = calloc(1, sizeof(*net));
	const char *backend = config_node_get(node, "backend");
	uint64_t features = (1ull << VIRTIO_NET_F_CSUM) | (1ull << VIRTIO_NET_F_GUEST_CSUM) |
	                    (1ull << VIRTIO_NET_F_MAC) | (1ull << VIRTIO_NET_F_GUEST_TSO4) |
	                    (1ull << VIRTIO_NET_F_GUEST_TSO6) | (1ull << VIRTIO_NET_F_GUEST_ECN) |
	                    (1ull << VIRTIO_NET_F_HOST_TSO4) | (1ull << VIRTIO_NET_F_HOST_TSO6) |
	                    (1ull << VIRTIO_NET_F_HOST_ECN) | (1ull << VIRTIO_NET_F_MRG_RXBUF) |
	                    (1ull << VIRTIO_NET_F_STATUS);

	if (net == NULL)
		return -1;
	net->rx_stop_fd = -1;
	net->rx_bounce = malloc(NET_HDR_LEN + NET_MAX_FRAME);
	if (net->rx_bounce == NULL) {
		free(net);
		return -1;
	}
	net->tx_elem.iov = net->tx_iov;
	net->tx_elem.iov_cap = NET_TX_IOV;
	if (net_configure(net, f, node, m->name, &features, err, errlen) < 0)
		goto fail;
	if (!tap_name_valid(backend)) {
		snprintf(err, errlen,
		         "want a tap interface name (tapN, or any name of up to 15 "
		         "characters), not '%s'",
		         backend ? backend : "");
		goto fail;
	}
	net->tap = tap_open(backend, NET_HDR_LEN, err, errlen);
	if (net->tap == NULL)
		goto fail;
	if (net->cfg.mtu != 0 && tap_set_mtu(net->tap, net->cfg.mtu) < 0)
		log_warn("virtio-net: cannot set the MTU of %s", backend);
	if (virtio_pci_init(&net->vd, f, &net_ops, net, 2, NET_QUEUE_SIZE, features,
	                    sizeof(net->cfg), err, errlen) < 0)
		return -1;
	net_register_counters(net);
	return 0;
fail:
	tap_close(net->tap);
	free(net->rx_bounce);
	free(net);
	return -1;
}

/* ---- saved state (docs/design/snapshots.md section 2, "virtio-net") ---- */

#define NET_STATE_VERSION 1
#define NET_QUIESCE_MS    1000

/* Pause the receive thread: it moves frames under the queue lock, so once
 * the flag is set under it no frame is half-delivered. */
static int rx_pause(struct virtio_net *net, unsigned timeout_ms)
{
	struct virtio_queue *q = &net->vd.queue[NET_RXQ];

	if (!net->rx_running)
		return 0;
	if (virtio_queue_lock_timed(q, timeout_ms) < 0)
		return -1;
	net->rx_paused = true;
	pthread_mutex_unlock(&q->lock);
	return 0;
}

static void rx_resume(struct virtio_net *net)
{
	struct virtio_queue *q = &net->vd.queue[NET_RXQ];
	uint64_t one = 1;

	if (!net->rx_running)
		return;
	pthread_mutex_lock(&q->lock);
	net->rx_paused = false;
	pthread_mutex_unlock(&q->lock);
	/* Wakes the thread, which watches the tap again and drains it. */
	if (write(q->kick_fd, &one, sizeof(one)) < 0)
		log_warn("virtio-net: %s: cannot resume receiving", tap_name(net->tap));
}

/* Receive stops (frames wait in the tap or are lost); transmit finishes
 * the batch in progress, each frame written to the tap whole before its
 * used entry, so nothing is sent twice after a restore. */
static int net_quiesce(struct pci_func *f, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_net *net = vd->softc;
	int rc = 0;

	pthread_mutex_lock(&vd->lock);
	if (rx_pause(net, NET_QUIESCE_MS) < 0) {
		snprintf(err, errlen, "receive queue busy for %d ms", NET_QUIESCE_MS);
		rc = -1;
	} else if (virtio_worker_pause(&net->tx_worker, NET_QUIESCE_MS) < 0) {
		snprintf(err, errlen, "transmit queue busy for %d ms", NET_QUIESCE_MS);
		rc = -1;
	}
	pthread_mutex_unlock(&vd->lock);
	return rc;
}

static void net_unquiesce(struct pci_func *f)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_net *net = vd->softc;

	pthread_mutex_lock(&vd->lock);
	virtio_worker_resume(&net->tx_worker);
	rx_resume(net);
	pthread_mutex_unlock(&vd->lock);
}

/* u16 version, the MAC (6 bytes), u16 status, u16 mtu; then the
 * transport (virtio_pci_save).  The offloads follow the driver's
 * features, which the transport's restore hands to net_features_ok(). */
static int net_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_net *net = vd->softc;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&vd->lock);
	sbuf_put_u16(out, NET_STATE_VERSION);
	sbuf_put_bytes(out, net->cfg.mac, sizeof(net->cfg.mac));
	sbuf_put_u16(out, net->cfg.status);
	sbuf_put_u16(out, net->cfg.mtu);
	pthread_mutex_unlock(&vd->lock);
	virtio_pci_save(vd, out);
	return 0;
}

static int net_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_net *net = vd->softc;
	uint8_t mac[6], old_mac[6];
	uint16_t status, mtu, old_status;

	(void)err;
	(void)errlen;
	if (sbuf_get_version(in, NET_STATE_VERSION) == 0)
		return -1;
	sbuf_get_bytes(in, mac, sizeof(mac));
	status = sbuf_get_u16(in);
	mtu = sbuf_get_u16(in);
	if (in->failed)
		return -1;
	if (!mac_is_unicast(mac))
		sbuf_fail(in, "MAC %02x:%02x:%02x:%02x:%02x:%02x is not unicast", mac[0], mac[1],
		          mac[2], mac[3], mac[4], mac[5]);
	else if (status & ~VIRTIO_NET_S_LINK_UP)
		sbuf_fail(in, "status 0x%x has unknown bits", status);
	else if (mtu != net->cfg.mtu)
		sbuf_fail(in, "mtu %u, this device has %u", mtu, net->cfg.mtu);
	if (in->failed)
		return -1;
	/* The guest's view first (the MAC may derive from the VM's name,
	 * which a restore may change), then the transport, which starts the
	 * device. */
	pthread_mutex_lock(&vd->lock);
	memcpy(old_mac, net->cfg.mac, sizeof(old_mac));
	old_status = net->cfg.status;
	memcpy(net->cfg.mac, mac, sizeof(mac));
	net->cfg.status = status;
	/* Read by the receive thread the transport's restore starts; on a
	 * migration's target that is once the source has paused. */
	announce_start(&net->announce, monotonic_ns());
	pthread_mutex_unlock(&vd->lock);
	if (virtio_pci_restore(vd, in) == 0)
		return 0;
	net->announce.left = 0;
	/* Refused: the device stays as it was. */
	pthread_mutex_lock(&vd->lock);
	memcpy(net->cfg.mac, old_mac, sizeof(old_mac));
	net->cfg.status = old_status;
	pthread_mutex_unlock(&vd->lock);
	return -1;
}

static const char *const net_keys[] = {"backend", "mac", "mtu", NULL};

PCI_DEVEMU(virtio_net) = {
    .name = "virtio-net",
    .descr = "virtio 1.x network device on a tap interface",
    .usage = "  -s SLOT,virtio-net[,TAP][,OPTION]...\n"
             "  TAP              tap interface name (created when missing)\n"
             "  mac=MAC          xx:xx:xx:xx:xx:xx (default: from VM name and slot)\n"
             "  mtu=N            MTU offered to the guest\n",
    .keys = net_keys,
    .legacy_config = net_legacy_config,
    .init = net_init,
    .bar_read = virtio_pci_bar_read,
    .bar_write = virtio_pci_bar_write,
    .bar_moved = virtio_pci_bar_moved,
    .vector_changed = virtio_pci_vector_changed,
    .quiesce = net_quiesce,
    .unquiesce = net_unquiesce,
    .save = net_save,
    .restore = net_restore,
};
