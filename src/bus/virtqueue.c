#include "bus/virtqueue.h"

#include <string.h>

#define ring_load(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ring_store(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define full_barrier()   __atomic_thread_fence(__ATOMIC_SEQ_CST)

int vq_init(struct virtqueue *vq, const struct guest_mem *gm, uint16_t size, uint64_t desc,
            uint64_t avail, uint64_t used, bool event_idx, bool indirect)
{
	uint64_t desc_len = 16ull * size, avail_len = 6 + 2ull * size, used_len = 6 + 8ull * size;
	void *d, *a, *u;

	memset(vq, 0, sizeof(*vq));
	if (size == 0 || (size & (size - 1)) != 0 || (desc & 15) || (avail & 1) || (used & 3))
		return -1;
	d = gmem_ptr(gm, desc, desc_len, false);
	a = gmem_ptr(gm, avail, avail_len, true);
	u = gmem_ptr(gm, used, used_len, true);
	if (d == NULL || a == NULL || u == NULL)
		return -1;
	vq->gm = gm;
	vq->size = size;
	vq->desc_gpa = desc;
	vq->avail_gpa = avail;
	vq->used_gpa = used;
	vq->desc = d;
	vq->avail = a;
	vq->used_hdr = u;
	vq->used_ring = (volatile struct vring_used_elem *)((uint8_t *)u + 4);
	vq->avail_event = (volatile uint16_t *)((uint8_t *)u + 4 + 8ull * size);
	vq->event_idx = event_idx;
	vq->indirect = indirect;
	vq->ready = true;
	return 0;
}

void vq_reset(struct virtqueue *vq)
{
	memset(vq, 0, sizeof(*vq));
}

static uint16_t avail_idx(const struct virtqueue *vq)
{
	return ring_load(&vq->avail[1]);
}

bool vq_has_work(struct virtqueue *vq)
{
	return vq->ready && avail_idx(vq) != vq->last_avail;
}

/* Add one buffer to the element, in order: readable before writable. */
static int elem_add(struct virtqueue *vq, struct vq_elem *e, const struct vring_desc *d)
{
	bool writable = d->flags & VRING_DESC_F_WRITE;
	unsigned n = e->nread + e->nwrite;
	void *p;

	if (d->len == 0 || n >= e->iov_cap || (!writable && e->nwrite > 0))
		return -1;
	p = gmem_ptr(vq->gm, d->addr, d->len, writable);
	if (p == NULL)
		return -1;
	e->iov[n].iov_base = p;
	e->iov[n].iov_len = d->len;
	if (writable) {
		e->nwrite++;
		e->write_len += d->len;
	} else {
		e->nread++;
		e->read_len += d->len;
	}
	return 0;
}

/* Walk an indirect table (2.7.5.3): no nesting, no NEXT on the referring
 * descriptor, entries chained by NEXT inside the table, each used once. */
static int walk_indirect(struct virtqueue *vq, struct vq_elem *e, const struct vring_desc *ref)
{
	const struct vring_desc *table;
	unsigned count, i = 0, steps = 0;

	if (!vq->indirect || (ref->flags & VRING_DESC_F_NEXT) || ref->len == 0 ||
	    ref->len % sizeof(struct vring_desc) != 0)
		return -1;
	count = ref->len / sizeof(struct vring_desc);
	if (count > VQ_MAX_IOV)
		return -1;
	table = gmem_ptr(vq->gm, ref->addr, ref->len, false);
	if (table == NULL)
		return -1;
	for (;;) {
		struct vring_desc d;

		memcpy(&d, (const void *)&table[i], sizeof(d)); /* one fetch */
		if ((d.flags & VRING_DESC_F_INDIRECT) || elem_add(vq, e, &d) < 0)
			return -1;
		if (!(d.flags & VRING_DESC_F_NEXT))
			return 0;
		if (d.next >= count || ++steps >= count)
			return -1; /* out of the table, or a loop */
		i = d.next;
	}
}

static int walk_chain(struct virtqueue *vq, struct vq_elem *e, uint16_t head)
{
	unsigned steps = 0;
	uint16_t i = head;

	for (;;) {
		struct vring_desc d;

		if (i >= vq->size || steps++ >= vq->size)
			return -1; /* index out of range, or a loop */
		memcpy(&d, (const void *)&vq->desc[i], sizeof(d)); /* one fetch */
		if (d.flags & VRING_DESC_F_INDIRECT) {
			/* An indirect descriptor must be the only one in its chain. */
			if (steps != 1 || walk_indirect(vq, e, &d) < 0)
				return -1;
			return 0;
		}
		if (elem_add(vq, e, &d) < 0)
			return -1;
		if (!(d.flags & VRING_DESC_F_NEXT))
			return 0;
		i = d.next;
	}
}

enum vq_pop_result vq_pop(struct virtqueue *vq, struct vq_elem *e)
{
	uint16_t idx, head;

	if (!vq->ready)
		return VQ_EMPTY;
	idx = avail_idx(vq);
	if (idx == vq->last_avail)
		return VQ_EMPTY;
	/* More entries than the ring holds means a corrupt index. */
	if ((uint16_t)(idx - vq->last_avail) > vq->size) {
		vq->ready = false;
		return VQ_ERROR;
	}
	head = ring_load(&vq->avail[2 + (vq->last_avail & (vq->size - 1))]);
	e->head = head;
	e->nread = e->nwrite = 0;
	e->read_len = e->write_len = 0;
	if (walk_chain(vq, e, head) < 0) {
		vq->ready = false; /* broken: nothing more until the driver resets */
		return VQ_ERROR;
	}
	vq->last_avail++;
	return VQ_GOT;
}

void vq_unpop(struct virtqueue *vq, unsigned n)
{
	vq->last_avail = (uint16_t)(vq->last_avail - n);
}

void vq_push(struct virtqueue *vq, uint16_t head, uint32_t len)
{
	volatile struct vring_used_elem *u = &vq->used_ring[vq->used_idx & (vq->size - 1)];

	u->id = head;
	u->len = len;
	vq->used_idx++;
	ring_store(&vq->used_hdr[1], vq->used_idx);
	/* The ring's pointers were taken when the queue started: tell a
	 * migration's dirty tracking (vmm/mem.h) of the used ring. */
	gmem_mark_dirty(vq->gm, vq->used_gpa, 6 + 8ull * vq->size);
}

bool vq_should_notify(struct virtqueue *vq)
{
	uint16_t old, new_idx = vq->used_idx, event;
	bool valid = vq->signalled_valid;

	/* The used index store must be visible before we read the driver's
	 * flags or used_event. */
	full_barrier();
	if (!vq->event_idx)
		return !(ring_load(&vq->avail[0]) & VRING_AVAIL_F_NO_INTERRUPT);
	old = vq->signalled_used;
	vq->signalled_used = new_idx;
	vq->signalled_valid = true;
	if (!valid)
		return true;
	event = ring_load(&vq->avail[2 + vq->size]);
	/* vring_need_event(): did new_idx pass event since old? */
	return (uint16_t)(new_idx - event - 1) < (uint16_t)(new_idx - old);
}

bool vq_enable_kicks(struct virtqueue *vq, bool enable)
{
	if (!vq->ready)
		return false;
	if (vq->event_idx) {
		if (enable) {
			ring_store(vq->avail_event, vq->last_avail);
			gmem_mark_dirty(vq->gm, vq->used_gpa, 6 + 8ull * vq->size);
		}
	} else {
		ring_store(&vq->used_hdr[0], enable ? 0 : VRING_USED_F_NO_NOTIFY);
		gmem_mark_dirty(vq->gm, vq->used_gpa, 4);
	}
	if (!enable)
		return false;
	full_barrier();
	return avail_idx(vq) != vq->last_avail;
}

size_t iov_to_buf(const struct iovec *iov, unsigned n, size_t skip, void *buf, size_t len)
{
	size_t done = 0;

	for (unsigned i = 0; i < n && done < len; i++) {
		size_t l = iov[i].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		l -= skip;
		if (l > len - done)
			l = len - done;
		memcpy((uint8_t *)buf + done, (uint8_t *)iov[i].iov_base + skip, l);
		done += l;
		skip = 0;
	}
	return done;
}

size_t buf_to_iov(const struct iovec *iov, unsigned n, size_t skip, const void *buf, size_t len)
{
	size_t done = 0;

	for (unsigned i = 0; i < n && done < len; i++) {
		size_t l = iov[i].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		l -= skip;
		if (l > len - done)
			l = len - done;
		memcpy((uint8_t *)iov[i].iov_base + skip, (const uint8_t *)buf + done, l);
		done += l;
		skip = 0;
	}
	return done;
}
