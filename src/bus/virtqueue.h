/*
 * Split virtqueues (virtio 1.2 section 2.7): descriptor table, available
 * ring, used ring, indirect descriptors (2.7.5.3) and event index
 * notification suppression (2.7.7, 2.7.10).
 *
 * Everything in the rings is guest-controlled.  vq_pop() copies each
 * descriptor once before using it (no double fetch), checks every buffer
 * against guest RAM with gmem_ptr(), bounds the chain by the queue size,
 * and refuses loops, zero-length buffers, out-of-range indices, nested or
 * malformed indirect tables and readable-after-writable buffers.  A queue
 * that returns VQ_ERROR is broken: the device sets DEVICE_NEEDS_RESET.
 */
#ifndef KHYVE_VIRTQUEUE_H
#define KHYVE_VIRTQUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "vmm/mem.h"

#define VQ_MAX_SIZE                32768
#define VQ_MAX_IOV                 1024 /* longest chain accepted (Linux uses at most 1024 segments) */

#define VRING_DESC_F_NEXT          1
#define VRING_DESC_F_WRITE         2
#define VRING_DESC_F_INDIRECT      4
#define VRING_AVAIL_F_NO_INTERRUPT 1
#define VRING_USED_F_NO_NOTIFY     1

struct vring_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
} __attribute__((packed));

struct vring_used_elem {
	uint32_t id;
	uint32_t len;
} __attribute__((packed));

struct virtqueue {
	const struct guest_mem *gm;
	uint16_t size;  /* entries, a power of two */
	bool ready;     /* rings validated and in use */
	bool event_idx; /* VIRTIO_F_EVENT_IDX negotiated */
	bool indirect;  /* VIRTIO_RING_F_INDIRECT_DESC negotiated */
	uint64_t desc_gpa, avail_gpa, used_gpa;
	struct vring_desc *desc;     /* host pointers, valid while ready */
	volatile uint16_t *avail;    /* flags, idx, ring[size], used_event */
	volatile uint16_t *used_hdr; /* flags, idx */
	volatile struct vring_used_elem *used_ring;
	volatile uint16_t *avail_event; /* after used ring */
	uint16_t last_avail;            /* next available entry to take */
	uint16_t used_idx;              /* next used entry to fill */
	uint16_t signalled_used;        /* used index at the last interrupt */
	bool signalled_valid;
};

/* One popped chain: readable buffers first, then writable ones.  The
 * caller provides `iov` with room for `iov_cap` entries; a longer chain is
 * an error (devices advertise their limit, e.g. virtio-blk's seg_max). */
struct vq_elem {
	uint16_t head;                /* index to return in the used ring */
	unsigned nread;               /* iov[0 .. nread) device-readable */
	unsigned nwrite;              /* iov[nread .. nread+nwrite) device-writable */
	uint64_t read_len, write_len; /* bytes in each part */
	unsigned iov_cap;
	struct iovec *iov;
};

enum vq_pop_result { VQ_EMPTY = 0, VQ_GOT = 1, VQ_ERROR = -1 };

/*
 * Validate and map the rings (addresses from the transport) for `size`
 * entries.  0, or -1 when a ring lies outside guest RAM, is misaligned, or
 * size is not a power of two in 1..VQ_MAX_SIZE.
 */
int vq_init(struct virtqueue *vq, const struct guest_mem *gm, uint16_t size, uint64_t desc,
            uint64_t avail, uint64_t used, bool event_idx, bool indirect);

/* Forget the rings (device reset / queue reset). */
void vq_reset(struct virtqueue *vq);

/* Take the next available chain into `e`.  VQ_ERROR also marks the queue
 * not ready, so a malformed chain is never retried (no busy loop). */
enum vq_pop_result vq_pop(struct virtqueue *vq, struct vq_elem *e);

/* Give back the last `n` popped chains that were not used (in order). */
void vq_unpop(struct virtqueue *vq, unsigned n);

/* Return chain `head` with `len` bytes written into its writable part. */
void vq_push(struct virtqueue *vq, uint16_t head, uint32_t len);

/* After vq_push()es: whether the driver wants an interrupt now (honours
 * VRING_AVAIL_F_NO_INTERRUPT or the used_event index). */
bool vq_should_notify(struct virtqueue *vq);

/*
 * Ask for (true) or suppress (false) kicks, through the used ring's flags or
 * avail_event.  After enabling, returns true when more chains arrived
 * meanwhile (the caller must process them rather than sleep).
 */
bool vq_enable_kicks(struct virtqueue *vq, bool enable);

/* True when chains are waiting. */
bool vq_has_work(struct virtqueue *vq);

/* Copy out of / into an iovec array (bounded by its total length). */
size_t iov_to_buf(const struct iovec *iov, unsigned n, size_t skip, void *buf, size_t len);
size_t buf_to_iov(const struct iovec *iov, unsigned n, size_t skip, const void *buf, size_t len);

#endif
