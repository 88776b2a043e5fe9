/*
 * virtio-9p, the 9P transport for virtio (the "9P transport" of Linux's
 * net/9p/trans_virtio.c; device ID 9) with bhyve's syntax
 * (-s N,virtio-9p,SHARENAME=PATH[,ro]): one request queue, each chain a
 * whole 9P request (readable) and room for its reply (writable); the mount
 * tag SHARENAME in the device configuration (u16 tag_len, the tag bytes;
 * feature VIRTIO_9P_MOUNT_TAG).  The 9P2000.L server is backend/p9fs.c.
 *
 * Requests are served by one thread of the device's own, made when the
 * device is created (before the sandbox is armed, so it carries only its
 * own filter, SANDBOX_P9, and never the vCPU's), never on a vCPU.  Each
 * request is copied out of guest memory into a bounded buffer before it
 * is parsed, and the reply built in another before it is copied in: the
 * guest cannot change a message while it is read, and a reply is never
 * half-written.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backend/p9fs.h"
#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "core/machine.h"
#include "lib/config.h"
#include "lib/devopts.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/sandbox.h"

#define VIRTIO_ID_9P          9
#define VIRTIO_9P_F_MOUNT_TAG 0
#define P9_QUEUE_SIZE         128
#define P9_MAX_IOV            VQ_MAX_IOV
#define P9_TAG_MAX            255

struct virtio_9p {
	struct virtio_dev vd;
	struct p9fs *fs;
	char *path; /* the shared folder, for messages */
	uint8_t cfg[2 + P9_TAG_MAX];
	size_t cfg_len;
	pthread_t thread;
	int wake_fd;  /* the thread's eventfd: start, stop (`quit`) */
	bool serving; /* under the queue lock: the driver is ready */
	bool quit;
	uint8_t *req, *resp; /* P9FS_MAX_MSIZE each */
	struct vq_elem elem;
	struct iovec iov[P9_MAX_IOV];
};

static struct ratelimit p9_rl = RATELIMIT_INIT;

/* One chain: copy the request out, answer it, copy the reply in. */
static void serve_one(struct virtio_9p *p9, struct virtqueue *vq, const struct vq_elem *e)
{
	size_t len = iov_to_buf(e->iov, e->nread, 0, p9->req, P9FS_MAX_MSIZE);
	size_t cap = e->write_len < P9FS_MAX_MSIZE ? (size_t)e->write_len : P9FS_MAX_MSIZE;
	size_t n = p9fs_handle(p9->fs, p9->req, len, p9->resp, cap);

	if (n == 0)
		log_ratelimited(&p9_rl, LOG_WARN,
		                "virtio-9p %s: request without a header or room for a reply",
		                p9->path);
	n = buf_to_iov(e->iov + e->nread, e->nwrite, 0, p9->resp, n);
	vq_push(vq, e->head, (uint32_t)n);
}

static void serve_queue(struct virtio_9p *p9)
{
	struct virtio_queue *q = &p9->vd.queue[0];
	bool more = true;

	while (more && p9->serving && q->vq.ready) {
		enum vq_pop_result r;
		bool pushed = false;

		vq_enable_kicks(&q->vq, false);
		while ((r = vq_pop(&q->vq, &p9->elem)) == VQ_GOT) {
			serve_one(p9, &q->vq, &p9->elem);
			pushed = true;
		}
		if (pushed && vq_should_notify(&q->vq))
			virtio_queue_interrupt(&p9->vd, 0);
		if (r == VQ_ERROR) {
			virtio_needs_reset(&p9->vd, "malformed descriptor chain");
			return;
		}
		more = vq_enable_kicks(&q->vq, true);
	}
}

static void *p9_main(void *arg)
{
	struct virtio_9p *p9 = arg;
	struct virtio_queue *q = &p9->vd.queue[0];
	struct pollfd pfd[2] = {{q->kick_fd, POLLIN, 0}, {p9->wake_fd, POLLIN, 0}};
	uint64_t v;

	for (;;) {
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		/* Made before sandbox_arm(): the filter goes on at the first
		 * wake after it, before any guest request is read. */
		sandbox_thread_enter(SANDBOX_P9);
		if (__atomic_load_n(&p9->quit, __ATOMIC_ACQUIRE))
			break;
		if ((pfd[0].revents && read(q->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN) ||
		    (pfd[1].revents && read(p9->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN))
			log_ratelimited(&p9_rl, LOG_WARN, "virtio-9p: wake-up read failed");
		pthread_mutex_lock(&q->lock);
		serve_queue(p9);
		pthread_mutex_unlock(&q->lock);
	}
	return NULL;
}

static void wake(struct virtio_9p *p9)
{
	uint64_t one = 1;

	if (write(p9->wake_fd, &one, sizeof(one)) < 0)
		log_warn("virtio-9p: cannot wake the request thread");
}

static void p9_start(struct virtio_dev *vd)
{
	struct virtio_9p *p9 = vd->softc;
	struct virtio_queue *q = &vd->queue[0];

	pthread_mutex_lock(&q->lock);
	p9->serving = true;
	pthread_mutex_unlock(&q->lock);
	wake(p9); /* requests queued before DRIVER_OK */
}

/* A reset: the thread stops serving (it serves under the queue lock, so
 * once the flag is down no request is in progress) and every fid goes. */
static void p9_stop(struct virtio_dev *vd)
{
	struct virtio_9p *p9 = vd->softc;
	struct virtio_queue *q = &vd->queue[0];

	pthread_mutex_lock(&q->lock);
	p9->serving = false;
	p9fs_reset(p9->fs);
	pthread_mutex_unlock(&q->lock);
}

static void p9_cfg_read(struct virtio_dev *vd, unsigned off, unsigned size, void *buf)
{
	struct virtio_9p *p9 = vd->softc;

	if (off + size <= p9->cfg_len)
		memcpy(buf, p9->cfg + off, size);
}

static const struct virtio_ops p9_ops = {
    .name = "virtio-9p",
    .device_type = VIRTIO_ID_9P,
    .pci_class = 0x00, /* no class fits; as QEMU and bhyve */
    .pci_subclass = 0x00,
    .cfg_read = p9_cfg_read,
    .start = p9_start,
    .stop = p9_stop,
};

/* ---- configuration ---- */

/* bhyve's form: SHARENAME=PATH (the mount tag and the folder), then ro;
 * stored as sharename, path and ro. */
static int p9_legacy_config(struct config_node *node, const char *conf, char *err, size_t errlen)
{
	const char *comma = conf != NULL ? strchr(conf, ',') : NULL;
	size_t len = conf == NULL ? 0 : comma ? (size_t)(comma - conf) : strlen(conf);
	const char *eq = conf != NULL ? memchr(conf, '=', len) : NULL;
	char *tag;
	int rc;

	if (eq == NULL || eq == conf || eq + 1 == conf + len) {
		snprintf(err, errlen, "want SHARENAME=PATH first, not '%.*s'", (int)len,
		         conf != NULL ? conf : "");
		return -1;
	}
	tag = strndup(conf, (size_t)(eq - conf));
	if (tag == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = config_node_set(node, "sharename", tag);
	free(tag);
	if (rc == 0) {
		char *path = strndup(eq + 1, (size_t)(conf + len - eq - 1));

		rc = path != NULL ? config_node_set(node, "path", path) : -1;
		free(path);
	}
	if (rc < 0) {
		snprintf(err, errlen, "cannot store the share");
		return -1;
	}
	return comma != NULL ? devopts_parse(node, comma + 1, NULL, "9p", err, errlen) : 0;
}

static int p9_configure(struct virtio_9p *p9, struct config_node *node, bool *ro, char *err,
                        size_t errlen)
{
	const char *tag = config_node_get(node, "sharename"), *path = config_node_get(node, "path");
	size_t n;

	if (tag == NULL || path == NULL) {
		snprintf(err, errlen, "want SHARENAME=PATH");
		return -1;
	}
	if (!parse_is_name(tag, strlen(tag), P9_TAG_MAX)) {
		snprintf(err, errlen, "bad share name '%s' (1-%d characters [A-Za-z0-9._-])", tag,
		         P9_TAG_MAX);
		return -1;
	}
	if (config_node_get_bool(node, "ro", false, ro) < 0) {
		snprintf(err, errlen, "ro: want true or false, not '%s'",
		         config_node_get(node, "ro"));
		return -1;
	}
	n = strlen(tag);
	p9->cfg[0] = (uint8_t)n;
	p9->cfg[1] = (uint8_t)(n >> 8);
	memcpy(p9->cfg + 2, tag, n);
	p9->cfg_len = 2 + n;
	p9->path = strdup(path);
	if (p9->path == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static int p9_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                   size_t errlen)
{
	struct virtio_9p *p9 = calloc(1, sizeof(*p9));
	bool ro = false;

	(void)m;
	if (p9 == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	p9->wake_fd = -1;
	if (p9_configure(p9, node, &ro, err, errlen) < 0)
		goto fail;
	p9->fs = p9fs_open(p9->path, ro, err, errlen);
	if (p9->fs == NULL)
		goto fail;
	p9->req = malloc(P9FS_MAX_MSIZE);
	p9->resp = malloc(P9FS_MAX_MSIZE);
	p9->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p9->req == NULL || p9->resp == NULL || p9->wake_fd < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	p9->elem.iov = p9->iov;
	p9->elem.iov_cap = P9_MAX_IOV;
	if (virtio_pci_init(&p9->vd, f, &p9_ops, p9, 1, P9_QUEUE_SIZE,
	                    1ull << VIRTIO_9P_F_MOUNT_TAG, p9->cfg_len, err, errlen) < 0)
		return -1; /* as every virtio device: khyve does not start */
	/* Made now, by the main thread: it never inherits a vCPU's filter. */
	if (pthread_create(&p9->thread, NULL, p9_main, p9) != 0) {
		snprintf(err, errlen, "cannot start the request thread");
		return -1; /* the transport is set up: freed with the machine */
	}
	return 0;
fail:
	p9fs_close(p9->fs);
	if (p9->wake_fd >= 0)
		close(p9->wake_fd);
	free(p9->req);
	free(p9->resp);
	free(p9->path);
	free(p9);
	return -1;
}

static const char *const p9_keys[] = {"sharename", "path", "ro", NULL};

PCI_DEVEMU(virtio_9p) = {
    .name = "virtio-9p",
    .descr = "virtio 9P2000.L file sharing of a host folder",
    .usage = "  -s SLOT,virtio-9p,SHARENAME=PATH[,ro]\n"
             "  SHARENAME=PATH   share the folder PATH under the mount tag SHARENAME\n"
             "                   (mount -t 9p -o trans=virtio,version=9p2000.L SHARENAME DIR)\n"
             "  ro               refuse every change (EROFS)\n",
    .keys = p9_keys,
    .legacy_config = p9_legacy_config,
    .init = p9_init,
    .bar_read = virtio_pci_bar_read,
    .bar_write = virtio_pci_bar_write,
    .bar_moved = virtio_pci_bar_moved,
    .vector_changed = virtio_pci_vector_changed,
};
