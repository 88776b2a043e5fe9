#include "bus/virtio_pci.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "bus/pci.h"
#include "core/machine.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/sandbox.h"
#include "lib/sbuf.h"

#define VIRTIO_VENDOR       0x1af4
#define VIRTIO_DEVICE_BASE  0x1040
#define VIRTIO_SUBSYSTEM_ID 0x1100
#define VIRTIO_BAR          4 /* modern region, as QEMU places it */
#define VIRTIO_MSIX_BAR     1

/* Layout of the modern region. */
#define REGION_COMMON 0x0000
#define REGION_ISR    0x1000
#define REGION_DEVICE 0x2000
#define REGION_NOTIFY 0x3000
#define REGION_SIZE   0x4000
#define NOTIFY_MULT   4
#define COMMON_LEN    0x38

/* virtio_pci_cap cfg_type values (4.1.4). */
#define CAP_COMMON 1
#define CAP_NOTIFY 2
#define CAP_ISR    3
#define CAP_DEVICE 4
#define CAP_PCI    5

/* Common configuration fields (4.1.4.3). */
#define CC_DFSELECT     0x00
#define CC_DF           0x04
#define CC_GFSELECT     0x08
#define CC_GF           0x0c
#define CC_MSIX_CONFIG  0x10
#define CC_NUM_QUEUES   0x12
#define CC_STATUS       0x14
#define CC_CFG_GEN      0x15
#define CC_Q_SELECT     0x16
#define CC_Q_SIZE       0x18
#define CC_Q_MSIX       0x1a
#define CC_Q_ENABLE     0x1c
#define CC_Q_NOTIFY_OFF 0x1e
#define CC_Q_DESC       0x20
#define CC_Q_DRIVER     0x28
#define CC_Q_DEVICE     0x30

#define ISR_QUEUE       0x1
#define ISR_CONFIG      0x2

static struct ratelimit virtio_rl = RATELIMIT_INIT;

static struct virtio_dev *vd_of(struct pci_func *f)
{
	return f->softc;
}

bool virtio_has_feature(const struct virtio_dev *vd, unsigned bit)
{
	return (vd->driver_features >> bit) & 1;
}

/* ---- interrupts ---- */

/* The irqfd that interrupts on `vec` may use without a lock, or -1 when
 * they must go through pci_interrupt() (MSI-X off, no vector, masked). */
static int lockless_irqfd(struct virtio_dev *vd, uint16_t vec)
{
	if (vec == VIRTIO_MSI_NO_VECTOR || !pci_msix_enabled(vd->pf))
		return -1;
	return pci_msix_live_irqfd(vd->pf, vec);
}

/*
 * Recompute every cached irqfd after a vector or its MSI-X state changed.
 * Called with vd->lock held: refreshes then run one after the other, so the
 * last one, which started after the last change, leaves the right values.
 */
static void irqfd_cache_refresh(struct virtio_dev *vd)
{
	for (unsigned q = 0; q < vd->nqueues; q++) {
		struct virtio_queue *vq = &vd->queue[q];

		__atomic_store_n(&vq->irqfd, lockless_irqfd(vd, vq->msix_vector), __ATOMIC_RELEASE);
	}
	__atomic_store_n(&vd->config_irqfd, lockless_irqfd(vd, vd->msix_config), __ATOMIC_RELEASE);
}

void virtio_pci_vector_changed(struct pci_func *f)
{
	struct virtio_dev *vd = vd_of(f);

	pthread_mutex_lock(&vd->lock);
	irqfd_cache_refresh(vd);
	pthread_mutex_unlock(&vd->lock);
}

/*
 * Interrupt through the cached irqfd when there is one: no lock, one write.
 * Otherwise pci_interrupt() decides under the PCI lock: a masked MSI-X
 * vector sets its pending bit, an unmasked one whose cache is being
 * refreshed is signalled directly.  A write through a copy that went stale
 * an instant ago is not lost either (see pci_msix_live_irqfd()).
 */
static void signal_vector(struct virtio_dev *vd, const int *irqfd, const uint16_t *vector,
                          uint8_t isr_bit)
{
	struct pci_func *f = vd->pf;
	int fd = __atomic_load_n(irqfd, __ATOMIC_ACQUIRE);
	uint16_t vec;
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) == sizeof(one))
		return;
	if (pci_msix_enabled(f)) {
		vec = __atomic_load_n(vector, __ATOMIC_RELAXED);
		if (vec != VIRTIO_MSI_NO_VECTOR)
			pci_interrupt(f, vec);
		return;
	}
	__atomic_fetch_or(&vd->isr, isr_bit, __ATOMIC_SEQ_CST);
	pci_interrupt(f, 0); /* MSI when enabled, else INTx */
}

void virtio_queue_interrupt(struct virtio_dev *vd, unsigned q)
{
	if (q < vd->nqueues)
		signal_vector(vd, &vd->queue[q].irqfd, &vd->queue[q].msix_vector, ISR_QUEUE);
}

void virtio_config_changed(struct virtio_dev *vd)
{
	__atomic_add_fetch(&vd->config_generation, 1, __ATOMIC_SEQ_CST);
	signal_vector(vd, &vd->config_irqfd, &vd->msix_config, ISR_CONFIG);
}

void virtio_needs_reset(struct virtio_dev *vd, const char *why)
{
	log_ratelimited(&virtio_rl, LOG_WARN, "%s %02x:%02x.%x: %s; device needs reset",
	                vd->ops->name, vd->pf->bus, vd->pf->slot, vd->pf->func, why);
	__atomic_store_n(&vd->needs_reset, true, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&vd->status, __ATOMIC_SEQ_CST) & VIRTIO_STATUS_DRIVER_OK)
		virtio_config_changed(vd);
}

/* ---- notifications: ioeventfd ---- */

static uint64_t notify_gpa(struct virtio_dev *vd, unsigned q)
{
	const struct pci_bar *b = &vd->pf->bar[VIRTIO_BAR];

	return b->mapped ? b->addr + REGION_NOTIFY + (uint64_t)q * NOTIFY_MULT : 0;
}

static void ioeventfd_unregister(struct virtio_dev *vd, unsigned q)
{
	struct virtio_queue *vq = &vd->queue[q];

	if (vq->ioeventfd_gpa == 0)
		return;
	vm_ioeventfd(&vd->pf->m->vm, vq->ioeventfd_gpa, 2, vq->kick_fd, false);
	vq->ioeventfd_gpa = 0;
}

/* While the driver runs, each enabled queue's notify address signals its
 * kick eventfd inside KVM. */
static void ioeventfd_update(struct virtio_dev *vd)
{
	bool running = __atomic_load_n(&vd->status, __ATOMIC_SEQ_CST) & VIRTIO_STATUS_DRIVER_OK;

	pthread_mutex_lock(&vd->ioeventfd_lock);
	for (unsigned q = 0; q < vd->nqueues; q++) {
		struct virtio_queue *vq = &vd->queue[q];
		uint64_t want = running && vq->enabled ? notify_gpa(vd, q) : 0;

		if (want == vq->ioeventfd_gpa)
			continue;
		ioeventfd_unregister(vd, q);
		if (want != 0 && vm_ioeventfd(&vd->pf->m->vm, want, 2, vq->kick_fd, true) == 0)
			vq->ioeventfd_gpa = want;
	}
	pthread_mutex_unlock(&vd->ioeventfd_lock);
}

void virtio_pci_bar_moved(struct pci_func *f, int bar)
{
	struct virtio_dev *vd = vd_of(f);

	if (bar == VIRTIO_BAR)
		ioeventfd_update(vd);
}

/* ---- reset and status ---- */

static void queue_defaults(struct virtio_queue *q)
{
	q->size = q->max_size;
	__atomic_store_n(&q->msix_vector, VIRTIO_MSI_NO_VECTOR, __ATOMIC_RELAXED);
	__atomic_store_n(&q->irqfd, -1, __ATOMIC_RELEASE);
	q->enabled = false;
	q->desc = q->driver = q->device = 0;
}

static void device_reset(struct virtio_dev *vd)
{
	uint64_t drain;

	if (vd->started)
		vd->ops->stop(vd);
	vd->started = false;
	vd->status = 0;
	ioeventfd_update(vd); /* not running: removes them all */
	for (unsigned q = 0; q < vd->nqueues; q++) {
		struct virtio_queue *vq = &vd->queue[q];

		pthread_mutex_lock(&vq->lock);
		vq_reset(&vq->vq);
		queue_defaults(vq);
		pthread_mutex_unlock(&vq->lock);
		while (read(vq->kick_fd, &drain, sizeof(drain)) > 0)
			;
	}
	vd->driver_features = 0;
	vd->device_feature_select = vd->driver_feature_select = 0;
	vd->status = 0;
	__atomic_store_n(&vd->needs_reset, false, __ATOMIC_SEQ_CST);
	vd->queue_select = 0;
	__atomic_store_n(&vd->msix_config, VIRTIO_MSI_NO_VECTOR, __ATOMIC_RELAXED);
	irqfd_cache_refresh(vd);
	__atomic_store_n(&vd->isr, 0, __ATOMIC_SEQ_CST);
	pci_intx_deassert(vd->pf);
}

static bool features_acceptable(const struct virtio_dev *vd)
{
	return (vd->driver_features & ~vd->device_features) == 0 &&
	       virtio_has_feature(vd, VIRTIO_F_VERSION_1);
}

/* Called with vd->lock held; may call into the device (start/stop). */
static void status_write(struct virtio_dev *vd, uint8_t val)
{
	uint8_t old = vd->status;

	if (val == 0) {
		device_reset(vd);
		return;
	}
	/* Only a reset clears bits (2.1.1: the driver MUST NOT clear them). */
	val |= old;
	if ((val & VIRTIO_STATUS_FEATURES_OK) && !(old & VIRTIO_STATUS_FEATURES_OK)) {
		if (!features_acceptable(vd))
			val &= (uint8_t)~VIRTIO_STATUS_FEATURES_OK; /* the driver reads it back */
		else if (vd->ops->features_ok != NULL)
			vd->ops->features_ok(vd);
	}
	__atomic_store_n(&vd->status, (uint8_t)(val & ~VIRTIO_STATUS_DEVICE_NEEDS_RESET),
	                 __ATOMIC_SEQ_CST);
	if ((val & VIRTIO_STATUS_DRIVER_OK) && !vd->started) {
		ioeventfd_update(vd);
		vd->started = true;
		vd->ops->start(vd);
	}
}

/* ---- common configuration ---- */

static struct virtio_queue *selected(struct virtio_dev *vd)
{
	return vd->queue_select < vd->nqueues ? &vd->queue[vd->queue_select] : NULL;
}

/* The common configuration as the driver would read it. */
static void common_image(struct virtio_dev *vd, uint8_t img[0x40])
{
	struct virtio_queue *q = selected(vd);
	uint32_t df = vd->device_feature_select < 2
	                  ? (uint32_t)(vd->device_features >> (32 * vd->device_feature_select))
	                  : 0;
	uint32_t gf = vd->driver_feature_select < 2
	                  ? (uint32_t)(vd->driver_features >> (32 * vd->driver_feature_select))
	                  : 0;
	uint16_t nq = (uint16_t)vd->nqueues, zero16 = 0;
	uint16_t qnotify = vd->queue_select;

	memset(img, 0, 0x40);
	memcpy(img + CC_DFSELECT, &vd->device_feature_select, 4);
	memcpy(img + CC_DF, &df, 4);
	memcpy(img + CC_GFSELECT, &vd->driver_feature_select, 4);
	memcpy(img + CC_GF, &gf, 4);
	memcpy(img + CC_MSIX_CONFIG, &vd->msix_config, 2);
	memcpy(img + CC_NUM_QUEUES, &nq, 2);
	img[CC_STATUS] = vd->status;
	if (__atomic_load_n(&vd->needs_reset, __ATOMIC_SEQ_CST))
		img[CC_STATUS] |= VIRTIO_STATUS_DEVICE_NEEDS_RESET;
	img[CC_CFG_GEN] = __atomic_load_n(&vd->config_generation, __ATOMIC_SEQ_CST);
	memcpy(img + CC_Q_SELECT, &vd->queue_select, 2);
	if (q == NULL) {
		memcpy(img + CC_Q_SIZE, &zero16, 2); /* no such queue: size 0 */
		return;
	}
	memcpy(img + CC_Q_SIZE, &q->size, 2);
	memcpy(img + CC_Q_MSIX, &q->msix_vector, 2);
	img[CC_Q_ENABLE] = q->enabled;
	memcpy(img + CC_Q_NOTIFY_OFF, &qnotify, 2);
	memcpy(img + CC_Q_DESC, &q->desc, 8);
	memcpy(img + CC_Q_DRIVER, &q->driver, 8);
	memcpy(img + CC_Q_DEVICE, &q->device, 8);
}

static uint64_t common_read(struct virtio_dev *vd, unsigned off, unsigned size)
{
	uint8_t img[0x40];
	uint64_t v = 0;

	if (off + size > COMMON_LEN)
		return 0;
	pthread_mutex_lock(&vd->lock);
	common_image(vd, img);
	pthread_mutex_unlock(&vd->lock);
	memcpy(&v, img + off, size);
	return v;
}

static void set_addr_part(uint64_t *addr, unsigned off_in_field, unsigned size, uint64_t val)
{
	uint8_t b[8];

	memcpy(b, addr, 8);
	memcpy(b + off_in_field, &val, size);
	memcpy(addr, b, 8);
}

static void queue_enable(struct virtio_dev *vd, struct virtio_queue *q)
{
	bool event_idx = virtio_has_feature(vd, VIRTIO_F_EVENT_IDX);
	bool indirect = virtio_has_feature(vd, VIRTIO_F_INDIRECT_DESC);
	int rc;

	if (q->enabled)
		return;
	pthread_mutex_lock(&q->lock);
	rc = vq_init(&q->vq, &vd->pf->m->vm.mem, q->size, q->desc, q->driver, q->device, event_idx,
	             indirect);
	q->enabled = rc == 0;
	pthread_mutex_unlock(&q->lock);
	if (rc < 0) {
		log_ratelimited(&virtio_rl, LOG_WARN, "%s: queue %u rings invalid", vd->ops->name,
		                vd->queue_select);
		__atomic_store_n(&vd->needs_reset, true, __ATOMIC_SEQ_CST);
	}
}

/* A vector the driver wrote: one of the MSI-X table, else NO_VECTOR (the
 * driver reads it back to learn that it failed, 4.1.5.1.2). */
static uint16_t checked_vector(const struct virtio_dev *vd, uint64_t val)
{
	return val < vd->pf->msix.table_count ? (uint16_t)val : VIRTIO_MSI_NO_VECTOR;
}

static void queue_field_write(struct virtio_dev *vd, unsigned off, unsigned size, uint64_t val)
{
	struct virtio_queue *q = selected(vd);

	if (q == NULL || q->enabled) /* fields are fixed once enabled */
		return;
	if (off == CC_Q_SIZE && size == 2) {
		/* Any power of two up to the maximum; otherwise keep the old. */
		if (val != 0 && val <= q->max_size && (val & (val - 1)) == 0)
			q->size = (uint16_t)val;
	} else if (off == CC_Q_MSIX && size == 2) {
		__atomic_store_n(&q->msix_vector, checked_vector(vd, val), __ATOMIC_RELAXED);
		irqfd_cache_refresh(vd);
	} else if (off == CC_Q_ENABLE && size == 2) {
		if (val == 1)
			queue_enable(vd, q);
	} else if (off >= CC_Q_DESC && off + size <= CC_Q_DEVICE + 8 &&
	           (off - CC_Q_DESC) % 8 + size <= 8) {
		/* Each access stays inside one 64-bit address field. */
		uint64_t *field = off < CC_Q_DRIVER   ? &q->desc
		                  : off < CC_Q_DEVICE ? &q->driver
		                                      : &q->device;

		set_addr_part(field, (off - CC_Q_DESC) % 8, size, val);
	}
}

static void common_write(struct virtio_dev *vd, unsigned off, unsigned size, uint64_t val)
{
	pthread_mutex_lock(&vd->lock);
	switch (off) {
	case CC_DFSELECT:
		vd->device_feature_select = (uint32_t)val;
		break;
	case CC_GFSELECT:
		vd->driver_feature_select = (uint32_t)val;
		break;
	case CC_GF:
		if (!(vd->status & VIRTIO_STATUS_FEATURES_OK) && vd->driver_feature_select < 2) {
			unsigned shift = 32 * vd->driver_feature_select;

			vd->driver_features &= ~(0xffffffffull << shift);
			vd->driver_features |= (val & 0xffffffffull) << shift;
		}
		break;
	case CC_MSIX_CONFIG:
		__atomic_store_n(&vd->msix_config, checked_vector(vd, val), __ATOMIC_RELAXED);
		irqfd_cache_refresh(vd);
		break;
	case CC_STATUS:
		if (size == 1)
			status_write(vd, (uint8_t)val);
		break;
	case CC_Q_SELECT:
		vd->queue_select = (uint16_t)val;
		break;
	default:
		queue_field_write(vd, off, size, val);
		break;
	}
	pthread_mutex_unlock(&vd->lock);
}

/* ---- the BAR ---- */

static uint64_t isr_read(struct virtio_dev *vd)
{
	/* Reading acknowledges, and drops INTx. */
	uint8_t v = __atomic_exchange_n(&vd->isr, 0, __ATOMIC_SEQ_CST);

	pci_intx_deassert(vd->pf);
	/* An interrupt raised between the exchange and the deassert. */
	if (__atomic_load_n(&vd->isr, __ATOMIC_SEQ_CST) != 0)
		pci_intx_assert(vd->pf);
	return v;
}

uint64_t virtio_pci_bar_read(struct pci_func *f, int bar, uint64_t off, unsigned size)
{
	struct virtio_dev *vd = vd_of(f);
	uint64_t v = 0;

	if (bar != VIRTIO_BAR)
		return ~0ull;
	if (off < REGION_ISR)
		return common_read(vd, (unsigned)off, size);
	if (off < REGION_DEVICE)
		return off == REGION_ISR ? isr_read(vd) : 0;
	if (off < REGION_NOTIFY) {
		unsigned o = (unsigned)(off - REGION_DEVICE);

		if (o + size <= vd->config_size && vd->ops->cfg_read != NULL)
			vd->ops->cfg_read(vd, o, size, &v);
		return v;
	}
	return 0;
}

void virtio_pci_bar_write(struct pci_func *f, int bar, uint64_t off, unsigned size, uint64_t val)
{
	struct virtio_dev *vd = vd_of(f);
	uint64_t one = 1;

	if (bar != VIRTIO_BAR)
		return;
	if (off < REGION_ISR) {
		common_write(vd, (unsigned)off, size, val);
	} else if (off >= REGION_DEVICE && off < REGION_NOTIFY) {
		unsigned o = (unsigned)(off - REGION_DEVICE);

		if (o + size <= vd->config_size && vd->ops->cfg_write != NULL)
			vd->ops->cfg_write(vd, o, size, &val);
	} else if (off >= REGION_NOTIFY) {
		/* A notification KVM did not turn into an eventfd signal. */
		unsigned q = (unsigned)((off - REGION_NOTIFY) / NOTIFY_MULT);

		if (q < vd->nqueues && write(vd->queue[q].kick_fd, &one, sizeof(one)) < 0)
			log_ratelimited(&virtio_rl, LOG_WARN, "%s: kick lost", vd->ops->name);
	}
}

/* ---- queue worker threads ---- */

static void *worker_main(void *arg)
{
	struct virtio_worker *w = arg;
	struct virtio_queue *q = &w->vd->queue[w->q];
	struct pollfd pfd[2] = {{q->kick_fd, POLLIN, 0}, {w->stop_fd, POLLIN, 0}};
	uint64_t v;

	sandbox_thread_enter(SANDBOX_VIRTIO_WORKER);
	for (;;) {
		bool more = true;

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		/* Started by a restore, before sandbox_arm(): filtered from the
		 * first wake after it on. */
		sandbox_thread_enter(SANDBOX_VIRTIO_WORKER);
		if (pfd[1].revents)
			break;
		if (read(q->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			break;
		pthread_mutex_lock(&q->lock);
		while (more && q->vq.ready && !__atomic_load_n(&w->paused, __ATOMIC_ACQUIRE)) {
			vq_enable_kicks(&q->vq, false);
			w->fn(w->vd, w->q);
			more = vq_enable_kicks(&q->vq, true);
		}
		pthread_mutex_unlock(&q->lock);
	}
	return NULL;
}

int virtio_worker_start(struct virtio_worker *w, struct virtio_dev *vd, unsigned q,
                        void (*fn)(struct virtio_dev *vd, unsigned q))
{
	uint64_t one = 1;

	w->vd = vd;
	w->q = q;
	w->fn = fn;
	w->paused = false;
	w->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (w->stop_fd < 0)
		return -1;
	if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
		close(w->stop_fd);
		return -1;
	}
	w->running = true;
	/* Work queued before DRIVER_OK would otherwise wait for a kick. */
	if (write(vd->queue[q].kick_fd, &one, sizeof(one)) < 0)
		log_ratelimited(&virtio_rl, LOG_WARN, "%s: cannot start queue %u", vd->ops->name,
		                q);
	return 0;
}

void virtio_worker_stop(struct virtio_worker *w)
{
	uint64_t one = 1;

	if (!w->running)
		return;
	if (write(w->stop_fd, &one, sizeof(one)) < 0)
		log_warn("virtio: cannot stop a worker");
	pthread_join(w->thread, NULL);
	close(w->stop_fd);
	w->running = false;
}

int virtio_queue_lock_timed(struct virtio_queue *q, unsigned timeout_ms)
{
	struct timespec until = realtime_deadline_after(timeout_ms);

	return pthread_mutex_timedlock(&q->lock, &until) == 0 ? 0 : -1;
}

int virtio_worker_pause(struct virtio_worker *w, unsigned timeout_ms)
{
	struct virtio_queue *q;

	if (!w->running)
		return 0;
	q = &w->vd->queue[w->q];
	/* The worker tests `paused` under the queue lock before each batch:
	 * once the flag is set under it, no batch starts again. */
	if (virtio_queue_lock_timed(q, timeout_ms) < 0)
		return -1;
	__atomic_store_n(&w->paused, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

void virtio_worker_resume(struct virtio_worker *w)
{
	uint64_t one = 1;

	if (!w->running || !__atomic_load_n(&w->paused, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&w->paused, false, __ATOMIC_RELEASE);
	if (write(w->vd->queue[w->q].kick_fd, &one, sizeof(one)) < 0)
		log_ratelimited(&virtio_rl, LOG_WARN, "%s: cannot resume queue %u",
		                w->vd->ops->name, w->q);
}

/* ---- creation ---- */

static void add_cap(struct pci_func *f, uint8_t type, uint32_t off, uint32_t len, bool notify)
{
	uint8_t cap[20] = {PCIY_VENDOR, 0, notify ? 20 : 16, type, VIRTIO_BAR};
	uint32_t mult = NOTIFY_MULT;

	memcpy(cap + 8, &off, 4);
	memcpy(cap + 12, &len, 4);
	if (notify)
		memcpy(cap + 16, &mult, 4);
	pci_add_cap(f, cap, notify ? 20 : 16);
}

int virtio_pci_init(struct virtio_dev *vd, struct pci_func *f, const struct virtio_ops *ops,
                    void *softc, unsigned nqueues, uint16_t qsize, uint64_t features,
                    size_t config_size, char *err, size_t errlen)
{
	uint8_t pcicap[20] = {PCIY_VENDOR, 0, 20, CAP_PCI};

	if (nqueues == 0 || nqueues > VIRTIO_MAX_QUEUES || config_size > 0x1000) {
		snprintf(err, errlen, "bad virtio geometry");
		return -1;
	}
	memset(vd, 0, sizeof(*vd));
	vd->pf = f;
	vd->ops = ops;
	vd->softc = softc;
	vd->nqueues = nqueues;
	vd->config_size = config_size;
	vd->device_features = features | (1ull << VIRTIO_F_VERSION_1) |
	                      (1ull << VIRTIO_F_INDIRECT_DESC) | (1ull << VIRTIO_F_EVENT_IDX);
	vd->msix_config = VIRTIO_MSI_NO_VECTOR;
	vd->config_irqfd = -1;
	pthread_mutex_init(&vd->lock, NULL);
	pthread_mutex_init(&vd->ioeventfd_lock, NULL);
	for (unsigned q = 0; q < nqueues; q++) {
		pthread_mutex_init(&vd->queue[q].lock, NULL);
		vd->queue[q].max_size = qsize;
		vd->queue[q].kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (vd->queue[q].kick_fd < 0) {
			snprintf(err, errlen, "out of eventfds");
			return -1;
		}
		queue_defaults(&vd->queue[q]);
	}
	f->softc = vd;
	pci_set_ids(f, VIRTIO_VENDOR, (uint16_t)(VIRTIO_DEVICE_BASE + ops->device_type),
	            ops->pci_class, ops->pci_subclass, 0, 1);
	/* Non-transitional devices: revision 1 and a subsystem ID of 0x40 or
	 * more (virtio 1.2 section 4.1.2.1); OVMF's Virtio10Dxe insists.
	 * 0x1100 is QEMU's, which virtio-win's drivers match. */
	pci_set_cfg(f, PCIR_SUBVEND, 2, VIRTIO_VENDOR);
	pci_set_cfg(f, PCIR_SUBDEV, 2, VIRTIO_SUBSYSTEM_ID);
	if (pci_alloc_bar(f, VIRTIO_BAR, PCI_BAR_MEM32, REGION_SIZE) < 0 ||
	    pci_add_msix_cap(f, nqueues + 1, VIRTIO_MSIX_BAR) < 0) {
		snprintf(err, errlen, "no room for the virtio BARs");
		return -1;
	}
	add_cap(f, CAP_COMMON, REGION_COMMON, COMMON_LEN, false);
	add_cap(f, CAP_ISR, REGION_ISR, 4, false);
	add_cap(f, CAP_DEVICE, REGION_DEVICE, (uint32_t)(config_size ? config_size : 4), false);
	add_cap(f, CAP_NOTIFY, REGION_NOTIFY, nqueues * NOTIFY_MULT, true);
	/* VIRTIO_PCI_CAP_PCI_CFG must exist (4.1.4.9); khyve leaves its
	 * window idle, as drivers with a mapped BAR never use it. */
	pci_add_cap(f, pcicap, sizeof(pcicap));
	pci_enable_intx(f);
	return 0;
}

/* ---- saved state (docs/design/snapshots.md section 2, "virtio transport") ---- */

#define VIRTIO_STATE_VERSION 1

struct vq_saved {
	uint16_t size, msix_vector;
	bool enabled, ready;
	uint64_t desc, driver, device;
	uint16_t last_avail, used_idx, signalled_used;
	bool signalled_valid;
};

/* The transport's part, read and checked whole before any of it is applied. */
struct virtio_saved {
	uint64_t device_features, driver_features;
	uint32_t device_feature_select, driver_feature_select;
	uint8_t status, config_generation, isr;
	bool needs_reset;
	uint16_t queue_select, msix_config;
	struct vq_saved q[VIRTIO_MAX_QUEUES];
};

static void save_queue(struct virtio_queue *q, struct sbuf *out)
{
	pthread_mutex_lock(&q->lock);
	sbuf_put_u16(out, q->size);
	sbuf_put_u16(out, __atomic_load_n(&q->msix_vector, __ATOMIC_RELAXED));
	sbuf_put_bool(out, q->enabled);
	sbuf_put_bool(out, q->vq.ready);
	sbuf_put_u64(out, q->desc);
	sbuf_put_u64(out, q->driver);
	sbuf_put_u64(out, q->device);
	sbuf_put_u16(out, q->vq.last_avail);
	sbuf_put_u16(out, q->vq.used_idx);
	sbuf_put_u16(out, q->vq.signalled_used);
	sbuf_put_bool(out, q->vq.signalled_valid);
	pthread_mutex_unlock(&q->lock);
}

void virtio_pci_save(struct virtio_dev *vd, struct sbuf *out)
{
	pthread_mutex_lock(&vd->lock);
	sbuf_put_u16(out, VIRTIO_STATE_VERSION);
	sbuf_put_u32(out, vd->nqueues);
	sbuf_put_u64(out, vd->device_features);
	sbuf_put_u64(out, vd->driver_features);
	sbuf_put_u32(out, vd->device_feature_select);
	sbuf_put_u32(out, vd->driver_feature_select);
	sbuf_put_u8(out, __atomic_load_n(&vd->status, __ATOMIC_SEQ_CST));
	sbuf_put_u8(out, __atomic_load_n(&vd->config_generation, __ATOMIC_SEQ_CST));
	sbuf_put_u8(out, __atomic_load_n(&vd->isr, __ATOMIC_SEQ_CST));
	sbuf_put_bool(out, __atomic_load_n(&vd->needs_reset, __ATOMIC_SEQ_CST));
	sbuf_put_u16(out, vd->queue_select);
	sbuf_put_u16(out, __atomic_load_n(&vd->msix_config, __ATOMIC_RELAXED));
	for (unsigned q = 0; q < vd->nqueues; q++)
		save_queue(&vd->queue[q], out);
	pthread_mutex_unlock(&vd->lock);
}

static bool vector_ok(const struct virtio_dev *vd, uint16_t vec)
{
	return vec == VIRTIO_MSI_NO_VECTOR || vec < vd->pf->msix.table_count;
}

/* vq_init() has no side effects but on the struct it fills: try it. */
static bool rings_in_ram(const struct virtio_dev *vd, const struct vq_saved *s)
{
	struct virtqueue trial;

	return vq_init(&trial, &vd->pf->m->vm.mem, s->size, s->desc, s->driver, s->device, false,
	               false) == 0;
}

static int read_queue(const struct virtio_dev *vd, unsigned i, struct sbuf_reader *in,
                      struct vq_saved *s)
{
	const struct virtio_queue *q = &vd->queue[i];

	s->size = sbuf_get_u16(in);
	s->msix_vector = sbuf_get_u16(in);
	s->enabled = sbuf_get_bool(in);
	s->ready = sbuf_get_bool(in);
	s->desc = sbuf_get_u64(in);
	s->driver = sbuf_get_u64(in);
	s->device = sbuf_get_u64(in);
	s->last_avail = sbuf_get_u16(in);
	s->used_idx = sbuf_get_u16(in);
	s->signalled_used = sbuf_get_u16(in);
	s->signalled_valid = sbuf_get_bool(in);
	if (in->failed)
		return -1;
	if (s->size == 0 || s->size > q->max_size || (s->size & (s->size - 1)) != 0)
		sbuf_fail(in, "queue %u size %u, this device takes powers of two up to %u", i,
		          s->size, q->max_size);
	else if (!vector_ok(vd, s->msix_vector))
		sbuf_fail(in, "queue %u MSI-X vector %u out of range", i, s->msix_vector);
	else if (s->ready && !s->enabled)
		sbuf_fail(in, "queue %u ready but not enabled", i);
	else if (s->ready && !rings_in_ram(vd, s))
		sbuf_fail(in, "queue %u rings are outside guest RAM or misaligned", i);
	return in->failed ? -1 : 0;
}

static int read_transport(const struct virtio_dev *vd, struct sbuf_reader *in,
                          struct virtio_saved *s)
{
	uint32_t nqueues;

	if (sbuf_get_version(in, VIRTIO_STATE_VERSION) == 0)
		return -1;
	nqueues = sbuf_get_u32(in);
	s->device_features = sbuf_get_u64(in);
	s->driver_features = sbuf_get_u64(in);
	s->device_feature_select = sbuf_get_u32(in);
	s->driver_feature_select = sbuf_get_u32(in);
	s->status = sbuf_get_u8(in);
	s->config_generation = sbuf_get_u8(in);
	s->isr = sbuf_get_u8(in);
	s->needs_reset = sbuf_get_bool(in);
	s->queue_select = sbuf_get_u16(in);
	s->msix_config = sbuf_get_u16(in);
	if (in->failed)
		return -1;
	if (nqueues != vd->nqueues)
		sbuf_fail(in, "%u queues, this device has %u", nqueues, vd->nqueues);
	else if (s->device_features != vd->device_features)
		sbuf_fail(in, "device features 0x%llx, this device offers 0x%llx",
		          (unsigned long long)s->device_features,
		          (unsigned long long)vd->device_features);
	/* A driver may write any bits (FEATURES_OK then fails and it reads
	 * them back), so only an accepted set must be one offered. */
	else if ((s->status & VIRTIO_STATUS_FEATURES_OK) &&
	         (s->driver_features & ~s->device_features) != 0)
		sbuf_fail(in, "driver features 0x%llx not offered",
		          (unsigned long long)s->driver_features);
	else if (s->status & VIRTIO_STATUS_DEVICE_NEEDS_RESET)
		sbuf_fail(in, "status 0x%02x: NEEDS_RESET is not a driver bit", s->status);
	else if (s->isr & ~(ISR_QUEUE | ISR_CONFIG))
		sbuf_fail(in, "ISR 0x%02x has unknown bits", s->isr);
	else if (!vector_ok(vd, s->msix_config))
		sbuf_fail(in, "config MSI-X vector %u out of range", s->msix_config);
	for (unsigned q = 0; q < vd->nqueues && !in->failed; q++)
		read_queue(vd, q, in, &s->q[q]);
	return in->failed ? -1 : 0;
}

/* Map a saved queue's rings again (read_queue() checked them); its ring
 * indices carry on from where the source left them.  vd->lock held. */
static void restore_queue(struct virtio_dev *vd, unsigned i, const struct vq_saved *s)
{
	struct virtio_queue *q = &vd->queue[i];

	pthread_mutex_lock(&q->lock);
	q->size = s->size;
	__atomic_store_n(&q->msix_vector, s->msix_vector, __ATOMIC_RELAXED);
	q->desc = s->desc;
	q->driver = s->driver;
	q->device = s->device;
	q->enabled = s->enabled;
	if (s->ready) {
		(void)vq_init(&q->vq, &vd->pf->m->vm.mem, q->size, q->desc, q->driver, q->device,
		              virtio_has_feature(vd, VIRTIO_F_EVENT_IDX),
		              virtio_has_feature(vd, VIRTIO_F_INDIRECT_DESC));
		q->vq.last_avail = s->last_avail;
		q->vq.used_idx = s->used_idx;
		q->vq.signalled_used = s->signalled_used;
		q->vq.signalled_valid = s->signalled_valid;
	}
	pthread_mutex_unlock(&q->lock);
}

/* Put the saved transport in place over a reset device, then re-drive
 * what a driver's writes would have: features_ok, irqfds, ioeventfds, the
 * device's start, one kick per ready queue (a kick that raced the pause is
 * not lost; a spurious one finds no work).  Called with vd->lock held. */
static void apply_transport(struct virtio_dev *vd, const struct virtio_saved *s)
{
	/* The generic PCI restore drove INTx already; the reset drops it. */
	bool intx = vd->pf->intx_asserted;
	uint64_t one = 1;

	device_reset(vd);
	if (intx)
		pci_intx_assert(vd->pf);
	vd->driver_features = s->driver_features;
	vd->device_feature_select = s->device_feature_select;
	vd->driver_feature_select = s->driver_feature_select;
	vd->queue_select = s->queue_select;
	__atomic_store_n(&vd->msix_config, s->msix_config, __ATOMIC_RELAXED);
	__atomic_store_n(&vd->config_generation, s->config_generation, __ATOMIC_SEQ_CST);
	for (unsigned q = 0; q < vd->nqueues; q++)
		restore_queue(vd, q, &s->q[q]);
	if ((s->status & VIRTIO_STATUS_FEATURES_OK) && vd->ops->features_ok != NULL)
		vd->ops->features_ok(vd);
	__atomic_store_n(&vd->status, s->status, __ATOMIC_SEQ_CST);
	__atomic_store_n(&vd->needs_reset, s->needs_reset, __ATOMIC_SEQ_CST);
	__atomic_store_n(&vd->isr, s->isr, __ATOMIC_SEQ_CST);
	irqfd_cache_refresh(vd);
	if (s->status & VIRTIO_STATUS_DRIVER_OK) {
		ioeventfd_update(vd);
		vd->started = true;
		vd->ops->start(vd);
	}
	for (unsigned q = 0; q < vd->nqueues; q++)
		if (vd->queue[q].vq.ready &&
		    write(vd->queue[q].kick_fd, &one, sizeof(one)) != sizeof(one))
			log_ratelimited(&virtio_rl, LOG_WARN, "%s: cannot kick queue %u",
			                vd->ops->name, q);
}

int virtio_pci_restore(struct virtio_dev *vd, struct sbuf_reader *in)
{
	struct virtio_saved *s = calloc(1, sizeof(*s));
	int rc = -1;

	if (s == NULL) {
		sbuf_fail(in, "out of memory");
		return -1;
	}
	if (read_transport(vd, in, s) == 0) {
		pthread_mutex_lock(&vd->lock);
		apply_transport(vd, s);
		pthread_mutex_unlock(&vd->lock);
		rc = 0;
	}
	free(s);
	return rc;
}
