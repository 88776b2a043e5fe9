/*
 * virtio-console (virtio 1.2 section 5.3) with bhyve's syntax
 * (-s N,virtio-console,NAME=PATH[,NAME=PATH]...): up to CON_MAX_PORTS
 * ports, each a unix socket khyve listens on (backend/chardev.h,
 * unix=PATH: one client at a time).  VIRTIO_CONSOLE_F_MULTIPORT: the
 * driver learns each port's name from a PORT_NAME control message, so
 * Linux shows it as /sys/class/virtio-ports/vportNpM/name (and udev as
 * /dev/virtio-ports/NAME).
 *
 * Queues (5.3.2): port 0's receive and transmit queues are 0 and 1, the
 * control receive and transmit queues 2 and 3, port N >= 1's 2N+2, 2N+3.
 *
 * Threads: one console thread (started at DRIVER_OK) serves the control
 * queue, every port's transmit queue and the receive queues' kicks; the
 * event loop reads the sockets into the receive queues.  Neither ever
 * blocks on a socket: output goes through chardev's bounded ring (dropped
 * when the client does not read, or when there is none, as on a serial
 * line), input stops being read while a port has no receive buffer and
 * starts again at the guest's next kick.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backend/chardev.h"
#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "core/machine.h"
#include "lib/config.h"
#include "lib/devopts.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/sandbox.h"
#include "lib/sbuf.h"

#define VIRTIO_ID_CONSOLE          3
#define VIRTIO_CONSOLE_F_MULTIPORT 1

/* Control events (5.3.6.2). */
#define CON_DEVICE_READY 0
#define CON_DEVICE_ADD   1
#define CON_PORT_READY   3
#define CON_PORT_OPEN    6
#define CON_PORT_NAME    7

#define CON_MAX_PORTS    16
#define CON_NAME_MAX     64
#define CON_QUEUE_SIZE   64
#define CON_MAX_IOV      16
#define CON_CTRL_RXQ     2
#define CON_CTRL_TXQ     3
/* Control messages waiting for a control receive buffer: DEVICE_ADD,
 * PORT_NAME and PORT_OPEN per port; a driver repeating DEVICE_READY or
 * PORT_READY beyond that loses the surplus (logged). */
#define CON_PENDING_MAX (3 * CON_MAX_PORTS)

struct virtio_console_config {
	uint16_t cols;
	uint16_t rows;
	uint32_t max_nr_ports;
	uint32_t emerg_wr;
} __attribute__((packed));

struct con_ctrl {
	uint32_t id;
	uint16_t event;
	uint16_t value;
} __attribute__((packed));

struct virtio_console;

struct con_port {
	struct virtio_console *con;
	unsigned id;
	char name[CON_NAME_MAX + 1];
	char *path;
	struct chardev *cd;
	/* Input waits for a receive buffer (chardev paused); under the
	 * receive queue's lock. */
	bool starved;
	struct vq_elem elem;
	struct iovec iov[CON_MAX_IOV];
};

struct virtio_console {
	struct virtio_dev vd;
	unsigned nports;
	struct virtio_console_config cfg;
	struct con_port port[CON_MAX_PORTS];
	/* The console thread. */
	pthread_t thread;
	int stop_fd;
	bool running; /* under every receive queue's lock to change */
	/* A checkpoint's quiesce: nothing is taken from or given to a queue;
	 * set atomically, read under the lock of the queue about to be used. */
	bool quiesced;
	/* Control messages to send, under the control receive queue's lock. */
	struct con_ctrl pending[CON_PENDING_MAX];
	unsigned npending;
	struct vq_elem elem;
	struct iovec iov[CON_MAX_IOV];
};

static struct ratelimit con_rl = RATELIMIT_INIT;

static bool quiesced(const struct virtio_console *con)
{
	return __atomic_load_n(&con->quiesced, __ATOMIC_ACQUIRE);
}

static unsigned rxq_of(unsigned port)
{
	return port == 0 ? 0 : 2 * port + 2;
}

static unsigned txq_of(unsigned port)
{
	return rxq_of(port) + 1;
}

/* ---- control messages ---- */

static void ctrl_queue(struct virtio_console *con, uint32_t id, uint16_t event, uint16_t value)
{
	if (con->npending == CON_PENDING_MAX) {
		log_ratelimited(&con_rl, LOG_WARN, "virtio-console: control message dropped");
		return;
	}
	con->pending[con->npending++] = (struct con_ctrl){id, event, value};
}

/* Send what waits while the driver gives control receive buffers.  Called
 * with the control receive queue's lock held. */
static void ctrl_flush(struct virtio_console *con)
{
	struct virtqueue *vq = &con->vd.queue[CON_CTRL_RXQ].vq;
	struct vq_elem *e = &con->elem;
	unsigned sent = 0;
	enum vq_pop_result r = VQ_EMPTY;

	while (sent < con->npending && vq->ready && !quiesced(con) &&
	       (r = vq_pop(vq, e)) == VQ_GOT) {
		const struct con_ctrl *c = &con->pending[sent++];
		const struct iovec *w = e->iov + e->nread;
		size_t n = buf_to_iov(w, e->nwrite, 0, c, sizeof(*c));

		if (c->event == CON_PORT_NAME && c->id < con->nports)
			n += buf_to_iov(w, e->nwrite, n, con->port[c->id].name,
			                strlen(con->port[c->id].name));
		vq_push(vq, e->head, (uint32_t)n);
	}
	memmove(con->pending, con->pending + sent,
	        (con->npending - sent) * sizeof(con->pending[0]));
	con->npending -= sent;
	if (r == VQ_ERROR)
		virtio_needs_reset(&con->vd, "malformed control buffer");
	if (sent > 0 && vq->ready && vq_should_notify(vq))
		virtio_queue_interrupt(&con->vd, CON_CTRL_RXQ);
}

/* One message from the driver (5.3.6.2): DEVICE_READY asks for the ports,
 * PORT_READY for a port's name; the host side of every port counts as
 * open (khyve listens), so PORT_OPEN follows.  The driver's own PORT_OPEN
 * (a program opened the port) needs nothing. */
static void ctrl_handle(struct virtio_console *con, const struct con_ctrl *c)
{
	if (c->event == CON_DEVICE_READY && c->value == 1) {
		for (unsigned i = 0; i < con->nports; i++)
			ctrl_queue(con, i, CON_DEVICE_ADD, 0);
	} else if (c->event == CON_PORT_READY && c->value == 1 && c->id < con->nports) {
		ctrl_queue(con, c->id, CON_PORT_NAME, 1);
		ctrl_queue(con, c->id, CON_PORT_OPEN, 1);
	} else if (c->event == CON_DEVICE_READY || c->event == CON_PORT_READY) {
		log_ratelimited(&con_rl, LOG_WARN,
		                "virtio-console: driver failed port %u (event %u)", c->id,
		                c->event);
	}
}

/* The control transmit queue: parse each message from a bounded copy. */
static void ctrl_serve(struct virtio_console *con)
{
	struct virtio_queue *tq = &con->vd.queue[CON_CTRL_TXQ], *rq = &con->vd.queue[CON_CTRL_RXQ];
	struct vq_elem *e = &con->elem;
	enum vq_pop_result r;

	pthread_mutex_lock(&tq->lock);
	while (tq->vq.ready && !quiesced(con) && (r = vq_pop(&tq->vq, e)) == VQ_GOT) {
		struct con_ctrl c;

		if (iov_to_buf(e->iov, e->nread, 0, &c, sizeof(c)) == sizeof(c)) {
			pthread_mutex_lock(&rq->lock);
			ctrl_handle(con, &c);
			pthread_mutex_unlock(&rq->lock);
		} else {
			log_ratelimited(&con_rl, LOG_WARN, "virtio-console: short control message");
		}
		vq_push(&tq->vq, e->head, 0);
	}
	if (tq->vq.ready && r == VQ_ERROR)
		virtio_needs_reset(&con->vd, "malformed control message");
	if (tq->vq.ready && vq_should_notify(&tq->vq))
		virtio_queue_interrupt(&con->vd, CON_CTRL_TXQ);
	pthread_mutex_unlock(&tq->lock);
	pthread_mutex_lock(&rq->lock);
	ctrl_flush(con);
	pthread_mutex_unlock(&rq->lock);
}

/* ---- data ---- */

/* The guest's output on port `p`: to the socket, never waiting for it. */
static void port_transmit(struct con_port *p)
{
	struct virtio_console *con = p->con;
	struct virtio_queue *q = &con->vd.queue[txq_of(p->id)];
	struct vq_elem *e = &con->elem;
	bool pushed = false;
	enum vq_pop_result r = VQ_EMPTY;

	pthread_mutex_lock(&q->lock);
	while (q->vq.ready && !quiesced(con) && (r = vq_pop(&q->vq, e)) == VQ_GOT) {
		for (unsigned i = 0; i < e->nread; i++)
			chardev_write(p->cd, e->iov[i].iov_base, e->iov[i].iov_len);
		vq_push(&q->vq, e->head, 0);
		pushed = true;
	}
	if (r == VQ_ERROR)
		virtio_needs_reset(&con->vd, "malformed transmit buffer");
	if (pushed && q->vq.ready && vq_should_notify(&q->vq))
		virtio_queue_interrupt(&con->vd, txq_of(p->id));
	pthread_mutex_unlock(&q->lock);
}

/* The guest gave receive buffers: take input again if it waited. */
static void port_refilled(struct con_port *p)
{
	struct virtio_queue *q = &p->con->vd.queue[rxq_of(p->id)];

	pthread_mutex_lock(&q->lock);
	if (p->starved && q->vq.ready && !quiesced(p->con) && vq_has_work(&q->vq)) {
		p->starved = false;
		chardev_resume_input(p->cd);
	}
	pthread_mutex_unlock(&q->lock);
}

/* Fill one receive buffer from the socket: bytes read, 0 when none. */
static uint32_t port_fill(struct con_port *p, const struct vq_elem *e)
{
	uint32_t got = 0;

	for (unsigned i = e->nread; i < e->nread + e->nwrite; i++) {
		size_t n = chardev_read(p->cd, e->iov[i].iov_base, e->iov[i].iov_len);

		got += (uint32_t)n;
		if (n < e->iov[i].iov_len)
			break;
	}
	return got;
}

/* The socket has input (event-loop thread): into receive buffers while
 * there are some, else pause input until the guest kicks. */
static void port_input_ready(void *arg)
{
	struct con_port *p = arg;
	struct virtio_console *con = p->con;
	struct virtio_queue *q = &con->vd.queue[rxq_of(p->id)];
	bool pushed = false;
	enum vq_pop_result r = VQ_EMPTY;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		uint32_t n;

		if (!con->running || !q->vq.ready || quiesced(con))
			r = VQ_EMPTY;
		else if ((r = vq_pop(&q->vq, &p->elem)) == VQ_EMPTY &&
		         vq_enable_kicks(&q->vq, true))
			continue; /* a buffer came as the kick was asked for */
		if (r != VQ_GOT) {
			/* Nowhere to put it: the socket keeps it (flow control)
			 * until the guest's next buffer, which it now kicks for. */
			p->starved = true;
			chardev_pause_input(p->cd);
			break;
		}
		n = port_fill(p, &p->elem);
		if (n == 0) {
			vq_unpop(&q->vq, 1);
			break;
		}
		vq_push(&q->vq, p->elem.head, n);
		pushed = true;
	}
	if (r == VQ_ERROR)
		virtio_needs_reset(&con->vd, "malformed receive buffer");
	if (pushed && q->vq.ready && vq_should_notify(&q->vq))
		virtio_queue_interrupt(&con->vd, rxq_of(p->id));
	pthread_mutex_unlock(&q->lock);
}

/* ---- the console thread ---- */

static void drain_kick(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_ratelimited(&con_rl, LOG_WARN, "virtio-console: kick read failed");
}

/* Ask for the driver's next kick on queue `qi` (with EVENT_IDX it kicks
 * only past the index the device names); whether work is waiting that the
 * console thread itself must do. */
static bool rearm(struct virtio_console *con, unsigned qi)
{
	struct virtio_queue *q = &con->vd.queue[qi];
	bool waiting, ours = true;

	pthread_mutex_lock(&q->lock);
	waiting = q->vq.ready && !quiesced(con) && vq_enable_kicks(&q->vq, true);
	if (qi == CON_CTRL_RXQ)
		ours = con->npending > 0; /* buffers only matter with messages */
	else if (qi % 2 == 0)
		ours = con->port[qi == 0 ? 0 : (qi - 2) / 2].starved; /* else the loop fills it */
	pthread_mutex_unlock(&q->lock);
	return waiting && ours;
}

/* Each wake serves everything: the queues are few and their work small. */
static void *con_main(void *arg)
{
	struct virtio_console *con = arg;
	struct pollfd pfd[2 * (CON_MAX_PORTS + 1) + 1];
	unsigned nq = con->vd.nqueues;

	for (unsigned i = 0; i < nq; i++)
		pfd[i] = (struct pollfd){con->vd.queue[i].kick_fd, POLLIN, 0};
	pfd[nq] = (struct pollfd){con->stop_fd, POLLIN, 0};
	sandbox_thread_enter(SANDBOX_CONSOLE);
	for (;;) {
		bool more = true;

		sandbox_thread_enter(SANDBOX_CONSOLE);
		while (more) {
			ctrl_serve(con);
			for (unsigned i = 0; i < con->nports; i++) {
				port_transmit(&con->port[i]);
				port_refilled(&con->port[i]);
			}
			more = false;
			for (unsigned i = 0; i < nq; i++)
				more |= rearm(con, i);
		}
		if (poll(pfd, nq + 1, -1) < 0 && errno != EINTR)
			break;
		if (pfd[nq].revents)
			break;
		for (unsigned i = 0; i < nq; i++)
			if (pfd[i].revents)
				drain_kick(pfd[i].fd);
	}
	return NULL;
}

static void set_running(struct virtio_console *con, bool on)
{
	for (unsigned i = 0; i < con->nports; i++) {
		struct con_port *p = &con->port[i];
		struct virtio_queue *q = &con->vd.queue[rxq_of(i)];

		pthread_mutex_lock(&q->lock);
		con->running = on;
		/* On start, input is read again (into the guest's first
		 * buffers); on stop, it waits in the socket. */
		p->starved = !on;
		if (on)
			chardev_resume_input(p->cd);
		else
			chardev_pause_input(p->cd);
		pthread_mutex_unlock(&q->lock);
	}
}

static void con_start(struct virtio_dev *vd)
{
	struct virtio_console *con = vd->softc;

	con->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (con->stop_fd < 0 || pthread_create(&con->thread, NULL, con_main, con) != 0) {
		virtio_needs_reset(vd, "cannot start the console thread");
		return;
	}
	set_running(con, true);
}

static void con_stop(struct virtio_dev *vd)
{
	struct virtio_console *con = vd->softc;
	uint64_t one = 1;

	if (con->stop_fd < 0)
		return;
	set_running(con, false);
	if (write(con->stop_fd, &one, sizeof(one)) < 0)
		log_warn("virtio-console: cannot stop the console thread");
	pthread_join(con->thread, NULL);
	close(con->stop_fd);
	con->stop_fd = -1;
	con->npending = 0; /* the driver asks again after the reset */
}

static void con_cfg_read(struct virtio_dev *vd, unsigned off, unsigned size, void *buf)
{
	struct virtio_console *con = vd->softc;

	if (off + size <= sizeof(con->cfg))
		memcpy(buf, (uint8_t *)&con->cfg + off, size);
}

static const struct virtio_ops con_ops = {
    .name = "virtio-console",
    .device_type = VIRTIO_ID_CONSOLE,
    .pci_class = 0x07, /* simple communication controller */
    .pci_subclass = 0x80,
    .cfg_read = con_cfg_read,
    .start = con_start,
    .stop = con_stop,
};

/* ---- configuration ---- */

static bool name_ok(const char *s, size_t len)
{
	return parse_is_name(s, len, CON_NAME_MAX);
}

/* One "NAME=PATH" item as port.N.name and port.N.path. */
static int port_item(struct config_node *node, const char *item, size_t len, unsigned n, char *err,
                     size_t errlen)
{
	const char *eq = memchr(item, '=', len);
	char key[32], name[CON_NAME_MAX + 1];
	char *path;
	int rc;

	if (eq == NULL || !name_ok(item, (size_t)(eq - item)) || eq + 1 == item + len) {
		snprintf(err, errlen,
		         "bad port '%.*s' (want NAME=PATH, NAME of 1-%d characters "
		         "[A-Za-z0-9._-])",
		         (int)len, item, CON_NAME_MAX);
		return -1;
	}
	if (n >= CON_MAX_PORTS) {
		snprintf(err, errlen, "at most %d ports", CON_MAX_PORTS);
		return -1;
	}
	memcpy(name, item, (size_t)(eq - item));
	name[eq - item] = '\0';
	path = strndup(eq + 1, (size_t)(item + len - eq - 1));
	if (path == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(key, sizeof(key), "port.%u.name", n);
	rc = config_node_set(node, key, name);
	snprintf(key, sizeof(key), "port.%u.path", n);
	if (rc == 0)
		rc = config_node_set(node, key, path);
	free(path);
	if (rc < 0)
		snprintf(err, errlen, "cannot store port '%s'", name);
	return rc;
}

/* bhyve's form: NAME=PATH items, the port names and their sockets. */
static int con_legacy_config(struct config_node *node, const char *conf, char *err, size_t errlen)
{
	unsigned n = 0;

	while (conf != NULL && *conf != '\0') {
		size_t len = strcspn(conf, ",");

		if (len > 0 && port_item(node, conf, len, n++, err, errlen) < 0)
			return -1;
		conf += len;
		if (*conf == ',')
			conf++;
	}
	return 0;
}

/* port.N.name and port.N.path for N = 0, 1, ... up to the first gap. */
static int con_read_ports(struct virtio_console *con, struct config_node *node, char *err,
                          size_t errlen)
{
	char key[32];

	for (unsigned i = 0; i < CON_MAX_PORTS; i++) {
		const char *name, *path;

		snprintf(key, sizeof(key), "port.%u.name", i);
		name = config_node_get(node, key);
		snprintf(key, sizeof(key), "port.%u.path", i);
		path = config_node_get(node, key);
		if (name == NULL && path == NULL)
			break;
		if (name == NULL || path == NULL || !name_ok(name, strlen(name))) {
			snprintf(err, errlen, "port %u: want a name ([A-Za-z0-9._-]) and a path",
			         i);
			return -1;
		}
		for (unsigned j = 0; j < i; j++)
			if (strcmp(con->port[j].name, name) == 0) {
				snprintf(err, errlen, "port name '%s' given twice", name);
				return -1;
			}
		snprintf(con->port[i].name, sizeof(con->port[i].name), "%s", name);
		con->port[i].path = strdup(path);
		if (con->port[i].path == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		con->nports = i + 1;
	}
	if (con->nports == 0) {
		snprintf(err, errlen, "no port (want NAME=PATH)");
		return -1;
	}
	return 0;
}

static int con_open_ports(struct virtio_console *con, struct machine *m, char *err, size_t errlen)
{
	char spec[4200], why[256];

	for (unsigned i = 0; i < con->nports; i++) {
		struct con_port *p = &con->port[i];

		p->con = con;
		p->id = i;
		p->elem.iov = p->iov;
		p->elem.iov_cap = CON_MAX_IOV;
		p->starved = true;
		snprintf(spec, sizeof(spec), "unix=%s", p->path);
		p->cd = chardev_open(spec, m->loop, port_input_ready, p, why, sizeof(why));
		if (p->cd == NULL) {
			snprintf(err, errlen, "port %s: %s", p->name, why);
			return -1;
		}
		chardev_set_name(p->cd, p->name);
		chardev_pause_input(p->cd); /* until the driver is ready */
	}
	return 0;
}

/* A console that failed to come up: its sockets (ours, removed) and memory. */
static void con_free(struct virtio_console *con)
{
	for (unsigned i = 0; i < CON_MAX_PORTS; i++) {
		chardev_close(con->port[i].cd);
		free(con->port[i].path);
	}
	free(con);
}

static int con_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                    size_t errlen)
{
	struct virtio_console *con = calloc(1, sizeof(*con));

	if (con == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	con->stop_fd = -1;
	con->elem.iov = con->iov;
	con->elem.iov_cap = CON_MAX_IOV;
	if (con_read_ports(con, node, err, errlen) < 0 || con_open_ports(con, m, err, errlen) < 0) {
		con_free(con);
		return -1;
	}
	con->cfg.max_nr_ports = con->nports;
	return virtio_pci_init(&con->vd, f, &con_ops, con, 2 * (con->nports + 1), CON_QUEUE_SIZE,
	                       1ull << VIRTIO_CONSOLE_F_MULTIPORT, sizeof(con->cfg), err, errlen);
}

/* ---- saved state (docs/design/snapshots.md section 2, "dev") ---- */

#define CON_STATE_VERSION 1
#define CON_QUIESCE_MS    1000

/* Once every queue's lock was held after the flag went up, nothing that
 * read it down is still at work: every user tests it under the lock of
 * the queue it is about to use. */
static int con_quiesce(struct pci_func *f, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_console *con = vd->softc;

	__atomic_store_n(&con->quiesced, true, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < vd->nqueues; i++) {
		if (virtio_queue_lock_timed(&vd->queue[i], CON_QUIESCE_MS) < 0) {
			snprintf(err, errlen, "virtio-console: queue %u busy for %d ms", i,
			         CON_QUIESCE_MS);
			return -1;
		}
		pthread_mutex_unlock(&vd->queue[i].lock);
	}
	return 0;
}

/* Kicks taken meanwhile are made up for; input that waited is read. */
static void con_unquiesce(struct pci_func *f)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_console *con = vd->softc;
	uint64_t one = 1;

	__atomic_store_n(&con->quiesced, false, __ATOMIC_RELEASE);
	if (con->stop_fd < 0)
		return;
	/* Input waits until the console thread sees a receive buffer. */
	for (unsigned i = 0; i < con->nports; i++) {
		struct virtio_queue *q = &vd->queue[rxq_of(i)];

		pthread_mutex_lock(&q->lock);
		con->port[i].starved = true;
		chardev_pause_input(con->port[i].cd);
		pthread_mutex_unlock(&q->lock);
	}
	if (write(vd->queue[CON_CTRL_TXQ].kick_fd, &one, sizeof(one)) < 0)
		log_warn("virtio-console: cannot resume");
}

/* u16 version, u8 ports, each port's name (u8 length, bytes), u8 control
 * messages waiting and each (u32 port, u16 event, u16 value); then the
 * transport (virtio_pci_save). */
static int con_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_console *con = vd->softc;
	struct virtio_queue *rq = &vd->queue[CON_CTRL_RXQ];

	(void)err;
	(void)errlen;
	sbuf_put_u16(out, CON_STATE_VERSION);
	sbuf_put_u8(out, (uint8_t)con->nports);
	for (unsigned i = 0; i < con->nports; i++) {
		sbuf_put_u8(out, (uint8_t)strlen(con->port[i].name));
		sbuf_put_bytes(out, con->port[i].name, strlen(con->port[i].name));
	}
	pthread_mutex_lock(&rq->lock);
	sbuf_put_u8(out, (uint8_t)con->npending);
	for (unsigned i = 0; i < con->npending; i++) {
		sbuf_put_u32(out, con->pending[i].id);
		sbuf_put_u16(out, con->pending[i].event);
		sbuf_put_u16(out, con->pending[i].value);
	}
	pthread_mutex_unlock(&rq->lock);
	virtio_pci_save(vd, out);
	return 0;
}

/* The saved ports must be this console's, by name and in order. */
static void check_ports(struct virtio_console *con, struct sbuf_reader *in)
{
	uint8_t n = sbuf_get_u8(in);

	if (!in->failed && n != con->nports)
		sbuf_fail(in, "%u ports, this console has %u", n, con->nports);
	for (unsigned i = 0; i < con->nports && !in->failed; i++) {
		char name[CON_NAME_MAX + 1] = "";
		uint8_t len = sbuf_get_u8(in);

		if (len > CON_NAME_MAX) {
			sbuf_fail(in, "port %u: a name of %u bytes", i, len);
			break;
		}
		sbuf_get_bytes(in, name, len);
		if (!in->failed && strcmp(name, con->port[i].name) != 0)
			sbuf_fail(in, "port %u is '%s' here, not '%.64s'", i, con->port[i].name,
			          name);
	}
}

static unsigned read_pending(struct virtio_console *con, struct sbuf_reader *in,
                             struct con_ctrl *pending)
{
	uint8_t n = sbuf_get_u8(in);

	if (n > CON_PENDING_MAX) {
		sbuf_fail(in, "%u control messages waiting, at most %d", n, CON_PENDING_MAX);
		return 0;
	}
	for (unsigned i = 0; i < n && !in->failed; i++) {
		pending[i].id = sbuf_get_u32(in);
		pending[i].event = sbuf_get_u16(in);
		pending[i].value = sbuf_get_u16(in);
		if (!in->failed &&
		    (pending[i].id >= con->nports ||
		     (pending[i].event != CON_DEVICE_ADD && pending[i].event != CON_PORT_NAME &&
		      pending[i].event != CON_PORT_OPEN)))
			sbuf_fail(in, "control message %u: port %u, event %u", i, pending[i].id,
			          pending[i].event);
	}
	return in->failed ? 0 : n;
}

static int con_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_console *con = vd->softc;
	struct virtio_queue *rq = &vd->queue[CON_CTRL_RXQ];
	struct con_ctrl pending[CON_PENDING_MAX];
	unsigned n;
	uint64_t one = 1;

	(void)err;
	(void)errlen;
	if (sbuf_get_version(in, CON_STATE_VERSION) == 0)
		return -1;
	check_ports(con, in);
	n = in->failed ? 0 : read_pending(con, in, pending);
	if (in->failed || virtio_pci_restore(vd, in) < 0)
		return -1;
	/* After the transport's reset and start: the messages the driver
	 * still waits for, then a kick so that they go. */
	pthread_mutex_lock(&rq->lock);
	memcpy(con->pending, pending, n * sizeof(pending[0]));
	con->npending = n;
	pthread_mutex_unlock(&rq->lock);
	if (con->stop_fd >= 0 && write(rq->kick_fd, &one, sizeof(one)) < 0)
		log_warn("virtio-console: cannot resume the control queue");
	return 0;
}

static const char *const con_keys[] = {"port.*.name", "port.*.path", NULL};

PCI_DEVEMU(virtio_console) = {
    .name = "virtio-console",
    .descr = "virtio console: named ports on unix sockets",
    .usage = "  -s SLOT,virtio-console,NAME=PATH[,NAME=PATH]...\n"
             "  NAME=PATH        a port named NAME (/dev/virtio-ports/NAME in a Linux\n"
             "                   guest) on a new unix socket at PATH; up to 16 ports\n",
    .keys = con_keys,
    .legacy_config = con_legacy_config,
    .init = con_init,
    .bar_read = virtio_pci_bar_read,
    .bar_write = virtio_pci_bar_write,
    .bar_moved = virtio_pci_bar_moved,
    .vector_changed = virtio_pci_vector_changed,
    .quiesce = con_quiesce,
    .unquiesce = con_unquiesce,
    .save = con_save,
    .restore = con_restore,
};
