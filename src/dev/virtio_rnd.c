/*
 * virtio-rnd, bhyve's name for the virtio entropy device (virtio 1.2
 * section 5.4): one request queue; each writable buffer is filled from the
 * host's getrandom(2).  No configuration space, no features.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "lib/sbuf.h"

#define RND_QUEUE_SIZE    64
#define VIRTIO_ID_ENTROPY 4

#define RND_MAX_IOV       16

struct virtio_rnd {
	struct virtio_dev vd;
	struct virtio_worker worker;
	struct vq_elem elem;
	struct iovec iov[RND_MAX_IOV];
};

/* Fill every writable buffer of each request with random bytes. */
static void rnd_serve(struct virtio_dev *vd, unsigned qi)
{
	struct virtio_rnd *rnd = vd->softc;
	struct virtqueue *vq = &vd->queue[qi].vq;
	struct vq_elem *e = &rnd->elem;
	bool pushed = false;
	enum vq_pop_result r;

	while ((r = vq_pop(vq, e)) == VQ_GOT) {
		uint32_t done = 0;

		for (unsigned i = e->nread; i < e->nread + e->nwrite; i++) {
			ssize_t n = getrandom(e->iov[i].iov_base, e->iov[i].iov_len, 0);

			if (n > 0)
				done += (uint32_t)n;
			if (n < (ssize_t)e->iov[i].iov_len)
				break;
		}
		vq_push(vq, e->head, done);
		pushed = true;
	}
	if (r == VQ_ERROR)
		virtio_needs_reset(vd, "malformed request");
	if (pushed && vq_should_notify(vq))
		virtio_queue_interrupt(vd, qi);
}

static void rnd_start(struct virtio_dev *vd)
{
	struct virtio_rnd *rnd = vd->softc;

	if (virtio_worker_start(&rnd->worker, vd, 0, rnd_serve) < 0)
		virtio_needs_reset(vd, "cannot start the worker thread");
}

static void rnd_stop(struct virtio_dev *vd)
{
	struct virtio_rnd *rnd = vd->softc;

	virtio_worker_stop(&rnd->worker);
}

static const struct virtio_ops rnd_ops = {
    .name = "virtio-rnd",
    .device_type = VIRTIO_ID_ENTROPY,
    .pci_class = 0xff, /* "other": no class fits an RNG */
    .pci_subclass = 0x00,
    .start = rnd_start,
    .stop = rnd_stop,
};

static int rnd_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                    size_t errlen)
{
	struct virtio_rnd *rnd = calloc(1, sizeof(*rnd));

	(void)m;
	(void)node;
	if (rnd == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rnd->elem.iov = rnd->iov;
	rnd->elem.iov_cap = RND_MAX_IOV;
	return virtio_pci_init(&rnd->vd, f, &rnd_ops, rnd, 1, RND_QUEUE_SIZE, 0, 0, err, errlen);
}

/* ---- saved state (docs/design/snapshots.md section 2, "virtio-rnd") ---- */

#define RND_STATE_VERSION 1
#define RND_QUIESCE_MS    1000

/* The worker serves a request whole under the queue lock: once paused,
 * nothing is half-done and nothing of its own is left to save. */
static int rnd_quiesce(struct pci_func *f, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_rnd *rnd = vd->softc;
	int rc;

	pthread_mutex_lock(&vd->lock);
	rc = virtio_worker_pause(&rnd->worker, RND_QUIESCE_MS);
	pthread_mutex_unlock(&vd->lock);
	if (rc < 0)
		snprintf(err, errlen, "virtio-rnd: worker busy for %d ms", RND_QUIESCE_MS);
	return rc;
}

static void rnd_unquiesce(struct pci_func *f)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_rnd *rnd = vd->softc;

	pthread_mutex_lock(&vd->lock);
	virtio_worker_resume(&rnd->worker);
	pthread_mutex_unlock(&vd->lock);
}

/* u16 version, then the transport. */
static int rnd_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	sbuf_put_u16(out, RND_STATE_VERSION);
	virtio_pci_save(f->softc, out);
	return 0;
}

static int rnd_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	if (sbuf_get_version(in, RND_STATE_VERSION) == 0)
		return -1;
	return virtio_pci_restore(f->softc, in);
}

PCI_DEVEMU(virtio_rnd) = {
    .name = "virtio-rnd",
    .descr = "virtio entropy source fed by getrandom()",
    .usage = "  -s SLOT,virtio-rnd\n",
    .init = rnd_init,
    .bar_read = virtio_pci_bar_read,
    .bar_write = virtio_pci_bar_write,
    .bar_moved = virtio_pci_bar_moved,
    .vector_changed = virtio_pci_vector_changed,
    .quiesce = rnd_quiesce,
    .unquiesce = rnd_unquiesce,
    .save = rnd_save,
    .restore = rnd_restore,
};
