/*
 * The virtio PCI transport, modern interface (virtio 1.2 section 4.1):
 * vendor 0x1AF4, device 0x1040 + type, one 32-bit memory BAR holding the
 * common configuration (4.1.4.3), ISR (4.1.4.5), device-specific
 * configuration (4.1.4.6) and notification area (4.1.4.4), located by
 * vendor-specific capabilities; MSI-X in its own BAR with INTx as fallback.
 *
 * Notifications reach the device as an eventfd per queue: KVM signals it
 * directly (ioeventfd on the queue's notify address), or the transport does
 * on an MMIO write.  Interrupts leave through irqfd (MSI-X) or INTx; each
 * queue caches the irqfd of its vector, so an interrupt takes no lock.
 *
 * Device models (virtio-blk, -net, -rnd) fill struct virtio_ops and embed a
 * struct virtio_dev.
 */
#ifndef KHYVE_VIRTIO_PCI_H
#define KHYVE_VIRTIO_PCI_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus/virtqueue.h"

struct pci_func;
struct machine;

#define VIRTIO_MAX_QUEUES 65

/* Transport features (virtio 1.2 section 6). */
#define VIRTIO_F_INDIRECT_DESC 28
#define VIRTIO_F_EVENT_IDX     29
#define VIRTIO_F_VERSION_1     32

/* Device status bits (2.1). */
#define VIRTIO_STATUS_ACKNOWLEDGE        0x01
#define VIRTIO_STATUS_DRIVER             0x02
#define VIRTIO_STATUS_DRIVER_OK          0x04
#define VIRTIO_STATUS_FEATURES_OK        0x08
#define VIRTIO_STATUS_DEVICE_NEEDS_RESET 0x40
#define VIRTIO_STATUS_FAILED             0x80

#define VIRTIO_MSI_NO_VECTOR             0xffff

struct virtio_dev;

struct virtio_ops {
	const char *name;     /* for logs */
	uint16_t device_type; /* virtio device ID: 1 net, 2 block, 4 entropy */
	uint8_t pci_class, pci_subclass;
	/* Read/write the device-specific configuration; `off`+`size` is
	 * already checked against config_size. */
	void (*cfg_read)(struct virtio_dev *vd, unsigned off, unsigned size, void *buf);
	void (*cfg_write)(struct virtio_dev *vd, unsigned off, unsigned size, const void *buf);
	/* The driver finished setup (DRIVER_OK): start serving queues. */
	void (*start)(struct virtio_dev *vd);
	/* Device reset: stop using every queue; on return the transport
	 * forgets the rings.  Called with no queue lock held. */
	void (*stop)(struct virtio_dev *vd);
	/* Features were accepted (FEATURES_OK); may be NULL. */
	void (*features_ok)(struct virtio_dev *vd);
};

struct virtio_queue {
	pthread_mutex_t lock; /* held by whoever walks the rings */
	struct virtqueue vq;
	uint16_t size; /* as negotiated (<= max_size) */
	uint16_t max_size;
	uint16_t msix_vector; /* written under the device lock, read atomically */
	/* pci_msix_live_irqfd() of msix_vector, or -1: what the queue's
	 * threads interrupt through without a lock.  Refreshed under the
	 * device lock on every vector change; read atomically. */
	int irqfd;
	bool enabled;
	uint64_t desc, driver, device; /* ring addresses as written */
	int kick_fd;                   /* eventfd: the driver notified this queue */
	uint64_t ioeventfd_gpa;        /* registered notify address, 0 none */
};

struct virtio_dev {
	struct pci_func *pf;
	const struct virtio_ops *ops;
	void *softc; /* the device model's own state */
	/* Common configuration.  Device threads never take it (the
	 * transport holds it while stopping them); what they change is
	 * atomic: isr, config_generation, needs_reset. */
	pthread_mutex_t lock;
	/* Guards the ioeventfd registrations; taken under lock or under the
	 * PCI config lock (BAR moves), never the other way round. */
	pthread_mutex_t ioeventfd_lock;
	bool needs_reset;
	bool started; /* ops->start ran and ops->stop has not */
	uint64_t device_features;
	uint64_t driver_features;
	uint32_t device_feature_select, driver_feature_select;
	uint8_t status;
	uint8_t config_generation;
	uint8_t isr;
	uint16_t queue_select;
	uint16_t msix_config;
	int config_irqfd; /* as virtio_queue.irqfd, for msix_config */
	unsigned nqueues;
	size_t config_size;
	struct virtio_queue queue[VIRTIO_MAX_QUEUES];
};

/*
 * Set up the PCI function `f` as a virtio device with `nqueues` queues of
 * up to `qsize` entries, `features` (device bits; VERSION_1, INDIRECT_DESC
 * and EVENT_IDX are added) and `config_size` bytes of device config.
 * 0, or -1 with `err` filled.
 */
int virtio_pci_init(struct virtio_dev *vd, struct pci_func *f, const struct virtio_ops *ops,
                    void *softc, unsigned nqueues, uint16_t qsize, uint64_t features,
                    size_t config_size, char *err, size_t errlen);

/* True when the driver accepted feature `bit`. */
bool virtio_has_feature(const struct virtio_dev *vd, unsigned bit);

/* Interrupt the driver for queue `q` (call after vq_push()es when
 * vq_should_notify() says so).  Thread-safe. */
void virtio_queue_interrupt(struct virtio_dev *vd, unsigned q);

/* The device hit malformed guest data on a queue: log, set
 * DEVICE_NEEDS_RESET and raise a configuration interrupt. */
void virtio_needs_reset(struct virtio_dev *vd, const char *why);

/* Device config changed (e.g. link status): bump the generation and
 * raise a configuration interrupt. */
void virtio_config_changed(struct virtio_dev *vd);

/*
 * A thread serving one queue: it sleeps until the queue is kicked, then
 * calls `fn` with the queue's lock held; `fn` pops, processes and pushes,
 * and returns.  The helper re-enables kicks and re-checks for work so no
 * notification is lost (2.7.10).  Started from ops->start, stopped (and
 * joined) from ops->stop.
 */
struct virtio_worker {
	struct virtio_dev *vd;
	unsigned q;
	void (*fn)(struct virtio_dev *vd, unsigned q);
	pthread_t thread;
	int stop_fd;
	bool running;
	bool paused; /* virtio_worker_pause(): kicks are taken, no request */
};

int virtio_worker_start(struct virtio_worker *w, struct virtio_dev *vd, unsigned q,
                        void (*fn)(struct virtio_dev *vd, unsigned q));
void virtio_worker_stop(struct virtio_worker *w);

/*
 * Lock queue `q` (its `lock`), waiting at most `timeout_ms` milliseconds
 * for whoever holds it: 0 (locked), or -1 (not locked).  For a quiesce,
 * which must not wait on a stuck device for ever.
 */
int virtio_queue_lock_timed(struct virtio_queue *q, unsigned timeout_ms);

/*
 * Quiesce a worker (docs/design/snapshots.md section 2, "dev"): once this
 * returns 0, `fn` is not running and is not called again until
 * virtio_worker_resume(); as `fn` pops and pushes under the queue lock, no
 * request is then half-done.  Kicks arriving meanwhile are consumed and
 * made up for by the resume.  A worker that is not running needs nothing.
 * Waits at most `timeout_ms` for the batch in progress: -1 when it did not
 * end in time (the worker is then not paused).  Neither starts nor stops
 * a thread, so the API thread's sandbox allows it.
 */
int virtio_worker_pause(struct virtio_worker *w, unsigned timeout_ms);

/* Undo virtio_worker_pause(): the worker serves its queue again, kicked
 * once so that requests queued while it was paused are seen. */
void virtio_worker_resume(struct virtio_worker *w);

/* The pci_devemu hooks every virtio emulation uses. */
uint64_t virtio_pci_bar_read(struct pci_func *f, int bar, uint64_t off, unsigned size);
void virtio_pci_bar_write(struct pci_func *f, int bar, uint64_t off, unsigned size, uint64_t val);
void virtio_pci_bar_moved(struct pci_func *f, int bar);
/* MSI-X was enabled, disabled, masked or reprogrammed: refresh the cached
 * irqfds.  Takes the device lock, so it must be called without it. */
void virtio_pci_vector_changed(struct pci_func *f);

struct sbuf;
struct sbuf_reader;

/*
 * The transport's saved state (docs/design/snapshots.md section 2, "virtio
 * transport"), for an emulation's pci_devemu.save/restore to embed: u16
 * version 1, u32 nqueues, device and driver features (u64 each), the two
 * feature selects (u32), status, config_generation, isr (u8),
 * needs_reset, queue_select, msix_config (u16), then per queue size,
 * msix_vector (u16), enabled, ready, the desc/driver/device GPAs (u64),
 * last_avail, used_idx, signalled_used (u16), signalled_valid.  Save with
 * the device quiesced (no request in flight).  Takes the device lock.
 */
void virtio_pci_save(struct virtio_dev *vd, struct sbuf *out);

/*
 * Load what virtio_pci_save() wrote into this device: refused (-1, the
 * reader failed with the reason) for another queue count or feature set,
 * a queue size, vector or status the device could not have, or rings
 * outside guest RAM, leaving the device as it was.  Otherwise it is
 * reset, the fields loaded, the rings mapped with their indices, and what
 * the driver's writes would have caused follows: features_ok, irqfds,
 * ioeventfds and ops->start when DRIVER_OK is set, then one kick per
 * ready queue.  Guest RAM must be restored before.  It starts the device,
 * so an emulation restores its own fields first and calls this last.
 * Takes the device lock (call it without).  0 or -1.
 */
int virtio_pci_restore(struct virtio_dev *vd, struct sbuf_reader *in);

#endif
