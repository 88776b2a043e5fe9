/*
 * virtio-balloon (virtio 1.2 section 5.5): the host asks the guest to
 * keep less memory (config num_pages, in 4 KiB pages), the guest gives
 * pages back on the inflate queue and takes them again on the deflate
 * queue; statistics (VIRTIO_BALLOON_F_STATS_VQ), deflate-on-OOM and free
 * page reporting (VIRTIO_BALLOON_F_REPORTING: the guest hands over ranges
 * of free memory it will not touch until it allocates them again).
 *
 * Pages the guest gives (inflated or reported) are discarded on the host
 * with madvise(MADV_DONTNEED): guest RAM is private anonymous memory
 * (vmm/kvm.c), so the host frees them at once and they read back as
 * zeros when the guest touches them again.  They are marked dirty for a
 * live migration (gmem_ptr with `write`), so the target gets the zeros.
 * With hugetlb RAM only whole huge pages are discarded (reported ranges
 * are 2 MiB blocks on Linux; single inflated 4 KiB pages stay).
 *
 * Queues (5.5.2): 0 inflateq, 1 deflateq, then statsq when STATS_VQ was
 * negotiated, then reporting_vq: like Linux and QEMU, the indices are
 * those of the queues that exist (no free_page_vq: FREE_PAGE_HINT is not
 * offered), so reporting_vq is 3 with statistics and 2 without.
 *
 * Every PFN and range is checked against guest RAM; one outside it is
 * skipped with a rate-limited line and the guest goes on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bus/pci.h"
#include "bus/virtio_pci.h"
#include "core/machine.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/sbuf.h"

#define VIRTIO_ID_BALLOON        5
#define BALLOON_F_STATS_VQ       1
#define BALLOON_F_DEFLATE_ON_OOM 2
#define BALLOON_F_REPORTING      5

#define BALLOON_NQUEUES          4
#define BALLOON_QSIZE            128
#define BALLOON_MAX_IOV          64 /* Linux: one buffer (inflate), 32 ranges (reporting) */
#define BALLOON_PAGE             4096ull
#define BALLOON_PFNS_AT_ONCE     256
#define BALLOON_CONFIG_SIZE      8 /* num_pages, actual (5.5.4) */

#define BALLOON_NSTAT_TAGS       10 /* the tags of 5.5.6.3 */

enum balloon_role { ROLE_NONE, ROLE_INFLATE, ROLE_DEFLATE, ROLE_STATS, ROLE_REPORTING };

struct balloon_queue {
	struct virtio_worker worker;
	struct vq_elem elem;
	struct iovec iov[BALLOON_MAX_IOV];
};

struct virtio_balloon {
	struct virtio_dev vd;
	const struct guest_mem *gm;
	uint64_t ram_bytes;
	uint64_t discard_align; /* host page size of guest RAM */
	struct balloon_queue q[BALLOON_NQUEUES];
	/* Guards what follows; taken under a queue lock, never the other way. */
	pthread_mutex_t lock;
	pthread_cond_t stats_cond;
	uint32_t num_pages; /* the host's target, pages in the balloon */
	uint32_t actual;    /* the driver's count */
	uint64_t stats_gen; /* bumped by each statistics buffer */
	uint64_t stats_ns;
	uint64_t stat[BALLOON_NSTAT_TAGS];
	uint32_t stat_seen; /* bit per tag */
	/* The statistics buffer the device holds (5.5.6.3: returned to ask
	 * for fresh figures).  Under the stats queue's lock. */
	bool stats_held;
	uint16_t stats_head;
	uint64_t reported_bytes; /* atomic */
};

static const char *const stat_names[BALLOON_NSTAT_TAGS] = {
    "swap_in",      "swap_out",         "major_faults", "minor_faults",        "free_memory",
    "total_memory", "available_memory", "disk_caches",  "hugetlb_allocations", "hugetlb_failures",
};

static struct ratelimit bad_range_rl = RATELIMIT_INIT;

/* The role of queue `qi` under the negotiated features (see the top). */
static enum balloon_role queue_role(const struct virtio_dev *vd, unsigned qi)
{
	bool stats = virtio_has_feature(vd, BALLOON_F_STATS_VQ);
	bool reporting = virtio_has_feature(vd, BALLOON_F_REPORTING);

	if (qi == 0)
		return ROLE_INFLATE;
	if (qi == 1)
		return ROLE_DEFLATE;
	if (qi == 2)
		return stats ? ROLE_STATS : reporting ? ROLE_REPORTING : ROLE_NONE;
	if (qi == 3)
		return stats && reporting ? ROLE_REPORTING : ROLE_NONE;
	return ROLE_NONE;
}

static int stats_queue(const struct virtio_dev *vd)
{
	return virtio_has_feature(vd, BALLOON_F_STATS_VQ) ? 2 : -1;
}

/*
 * Give guest-physical [gpa, gpa+len) back to the host.  The range was
 * checked to be RAM; only whole host pages inside it are discarded.
 * Returns the bytes discarded.
 */
static uint64_t discard(struct virtio_balloon *b, uint64_t gpa, uint64_t len)
{
	uint64_t a = b->discard_align;
	uint64_t start = (gpa + a - 1) & ~(a - 1), end = (gpa + len) & ~(a - 1);
	uintptr_t lo, hi;
	uint8_t *hva;

	if (end <= start)
		return 0;
	/* `write`: marks the pages dirty, so a migration sends the zeros. */
	hva = gmem_ptr(b->gm, start, end - start, true);
	if (hva == NULL)
		return 0;
	/* Whole host pages only: the fake RAM of tests may be unaligned. */
	lo = ((uintptr_t)hva + 4095) & ~(uintptr_t)4095;
	hi = ((uintptr_t)hva + (end - start)) & ~(uintptr_t)4095;
	if (hi <= lo || madvise((void *)lo, hi - lo, MADV_DONTNEED) < 0)
		return 0;
	return end - start;
}

/* Inside the RAM layout (below the hole, or above 4 GiB), and RAM in
 * guest_mem: never a ROM that KVM maps writable (no READONLY_MEM). */
static bool in_ram(const struct virtio_balloon *b, uint64_t gpa, uint64_t len)
{
	const struct guest_mem *gm = b->gm;
	uint64_t high_end = GMEM_HIGHMEM_BASE + gm->highmem_size;

	if (len == 0 || gpa + len < gpa || !gmem_is_ram(gm, gpa, len))
		return false;
	return gpa + len <= gm->lowmem_size ||
	       (gm->highmem_size > 0 && gpa >= GMEM_HIGHMEM_BASE && gpa + len <= high_end);
}

/* A guest range outside RAM: one line (rate-limited), skipped. */
static bool range_is_ram(struct virtio_balloon *b, const char *what, uint64_t gpa, uint64_t len)
{
	if (in_ram(b, gpa, len) && gpa % BALLOON_PAGE == 0)
		return true;
	log_ratelimited(&bad_range_rl, LOG_WARN,
	                "virtio-balloon: the guest %s 0x%llx+0x%llx, not whole pages of its RAM: "
	                "ignored",
	                what, (unsigned long long)gpa, (unsigned long long)len);
	return false;
}

/* Inflated PFNs [first, first+n): discard the run (or each page, when
 * the run is not all RAM, so a bad PFN costs only itself). */
static void inflate_run(struct virtio_balloon *b, uint64_t first, uint64_t n)
{
	if (n == 0)
		return;
	if (in_ram(b, first * BALLOON_PAGE, n * BALLOON_PAGE)) {
		discard(b, first * BALLOON_PAGE, n * BALLOON_PAGE);
		return;
	}
	for (uint64_t i = 0; i < n; i++)
		if (range_is_ram(b, "inflated", (first + i) * BALLOON_PAGE, BALLOON_PAGE))
			discard(b, (first + i) * BALLOON_PAGE, BALLOON_PAGE);
}

/* One inflate request: le32 PFNs in its readable part (5.5.6). */
static void inflate(struct virtio_balloon *b, const struct vq_elem *e)
{
	uint32_t pfn[BALLOON_PFNS_AT_ONCE];
	uint64_t run_first = 0, run_n = 0;
	size_t off = 0, got;

	while ((got = iov_to_buf(e->iov, e->nread, off, pfn, sizeof(pfn))) >= sizeof(pfn[0])) {
		for (size_t i = 0; i < got / sizeof(pfn[0]); i++) {
			if (run_n > 0 && pfn[i] == run_first + run_n) {
				run_n++;
				continue;
			}
			inflate_run(b, run_first, run_n);
			run_first = pfn[i];
			run_n = 1;
		}
		off += got - got % sizeof(pfn[0]);
	}
	inflate_run(b, run_first, run_n);
}

/* One report: each writable buffer is a range of free guest memory. */
static void report(struct virtio_balloon *b, const struct vq_elem *e, uint64_t *gpas)
{
	uint64_t bytes = 0;

	for (unsigned i = e->nread; i < e->nread + e->nwrite; i++)
		if (range_is_ram(b, "reported", gpas[i], e->iov[i].iov_len))
			bytes += discard(b, gpas[i], e->iov[i].iov_len);
	__atomic_add_fetch(&b->reported_bytes, bytes, __ATOMIC_RELAXED);
}

/* le16 tag, le64 value (5.5.6.3), packed. */
static void take_stats(struct virtio_balloon *b, const struct vq_elem *e)
{
	uint8_t buf[10 * 64];
	size_t n = iov_to_buf(e->iov, e->nread, 0, buf, sizeof(buf));

	pthread_mutex_lock(&b->lock);
	for (size_t off = 0; off + 10 <= n; off += 10) {
		uint16_t tag;
		uint64_t val;

		memcpy(&tag, buf + off, 2);
		memcpy(&val, buf + off + 2, 8);
		if (tag < BALLOON_NSTAT_TAGS) {
			b->stat[tag] = val;
			b->stat_seen |= 1u << tag;
		}
	}
	b->stats_gen++;
	b->stats_ns = monotonic_ns();
	pthread_cond_broadcast(&b->stats_cond);
	pthread_mutex_unlock(&b->lock);
}

/*
 * The guest-physical address of each buffer of `e`, recovered from its
 * host pointer: vq_pop() gave host pointers checked against RAM, and the
 * report is about guest addresses.
 */
static bool elem_gpas(struct virtio_balloon *b, const struct vq_elem *e, uint64_t *gpas)
{
	for (unsigned i = 0; i < e->nread + e->nwrite; i++) {
		const uint8_t *p = e->iov[i].iov_base;
		bool found = false;

		for (unsigned r = 0; r < b->gm->nregions && !found; r++) {
			const struct gmem_region *g = &b->gm->region[r];

			if (p >= g->hva && p < g->hva + g->size) {
				gpas[i] = g->gpa + (uint64_t)(p - g->hva);
				found = true;
			}
		}
		if (!found)
			return false;
	}
	return true;
}

static void balloon_serve(struct virtio_dev *vd, unsigned qi)
{
	struct virtio_balloon *b = vd->softc;
	struct virtqueue *vq = &vd->queue[qi].vq;
	struct vq_elem *e = &b->q[qi].elem;
	enum balloon_role role = queue_role(vd, qi);
	uint64_t gpas[BALLOON_MAX_IOV];
	bool pushed = false;
	enum vq_pop_result r;

	while ((r = vq_pop(vq, e)) == VQ_GOT) {
		if (role == ROLE_STATS) {
			/* The buffer stays until the host wants new figures; a
			 * driver that adds another gets the older one back. */
			if (b->stats_held) {
				vq_push(vq, b->stats_head, 0);
				pushed = true;
			}
			take_stats(b, e);
			b->stats_held = true;
			b->stats_head = e->head;
			continue;
		}
		if (role == ROLE_INFLATE)
			inflate(b, e);
		else if (role == ROLE_REPORTING && elem_gpas(b, e, gpas))
			report(b, e, gpas);
		vq_push(vq, e->head, 0);
		pushed = true;
	}
	if (r == VQ_ERROR)
		virtio_needs_reset(vd, "malformed request");
	if (pushed && vq_should_notify(vq))
		virtio_queue_interrupt(vd, qi);
}

/* Give the statistics buffer back: the driver answers with fresh ones. */
static void stats_request(struct virtio_balloon *b)
{
	int qi = stats_queue(&b->vd);
	struct virtio_queue *q;

	if (qi < 0)
		return;
	q = &b->vd.queue[qi];
	if (virtio_queue_lock_timed(q, 100) < 0)
		return;
	if (b->stats_held && q->vq.ready) {
		b->stats_held = false;
		vq_push(&q->vq, b->stats_head, 0);
		if (vq_should_notify(&q->vq))
			virtio_queue_interrupt(&b->vd, (unsigned)qi);
	}
	pthread_mutex_unlock(&q->lock);
}

static void balloon_start(struct virtio_dev *vd)
{
	struct virtio_balloon *b = vd->softc;

	for (unsigned qi = 0; qi < BALLOON_NQUEUES; qi++)
		if (queue_role(vd, qi) != ROLE_NONE && vd->queue[qi].enabled &&
		    virtio_worker_start(&b->q[qi].worker, vd, qi, balloon_serve) < 0) {
			virtio_needs_reset(vd, "cannot start a worker thread");
			return;
		}
}

static void balloon_stop(struct virtio_dev *vd)
{
	struct virtio_balloon *b = vd->softc;

	for (unsigned qi = 0; qi < BALLOON_NQUEUES; qi++)
		virtio_worker_stop(&b->q[qi].worker);
	/* Under the stats queue's lock: the API may be giving it back. */
	pthread_mutex_lock(&vd->queue[2].lock);
	b->stats_held = false;
	pthread_mutex_unlock(&vd->queue[2].lock);
	pthread_mutex_lock(&b->lock);
	b->actual = 0;
	pthread_mutex_unlock(&b->lock);
}

static void balloon_cfg_read(struct virtio_dev *vd, unsigned off, unsigned size, void *buf)
{
	struct virtio_balloon *b = vd->softc;
	uint32_t cfg[2];

	pthread_mutex_lock(&b->lock);
	cfg[0] = b->num_pages;
	cfg[1] = b->actual;
	pthread_mutex_unlock(&b->lock);
	memcpy(buf, (uint8_t *)cfg + off, size);
}

/* The driver writes `actual` only; num_pages is the host's. */
static void balloon_cfg_write(struct virtio_dev *vd, unsigned off, unsigned size, const void *buf)
{
	struct virtio_balloon *b = vd->softc;
	uint32_t cfg[2];

	pthread_mutex_lock(&b->lock);
	cfg[0] = b->num_pages;
	cfg[1] = b->actual;
	memcpy((uint8_t *)cfg + off, buf, size);
	b->actual = cfg[1];
	pthread_mutex_unlock(&b->lock);
}

static const struct virtio_ops balloon_ops = {
    .name = "virtio-balloon",
    .device_type = VIRTIO_ID_BALLOON,
    .pci_class = 0x05, /* memory controller, as QEMU's */
    .pci_subclass = 0x80,
    .cfg_read = balloon_cfg_read,
    .cfg_write = balloon_cfg_write,
    .start = balloon_start,
    .stop = balloon_stop,
};

/* ---- the API's hooks (core/machine.h) ---- */

static int balloon_set_target(void *dev, uint64_t guest_bytes, char *err, size_t errlen)
{
	struct virtio_balloon *b = dev;

	if (guest_bytes > b->ram_bytes) {
		snprintf(err, errlen,
		         "the guest has %llu MiB of RAM: the balloon cannot give it %llu MiB",
		         (unsigned long long)(b->ram_bytes >> 20),
		         (unsigned long long)(guest_bytes >> 20));
		return -1;
	}
	pthread_mutex_lock(&b->lock);
	b->num_pages = (uint32_t)((b->ram_bytes - guest_bytes) / BALLOON_PAGE);
	pthread_mutex_unlock(&b->lock);
	virtio_config_changed(&b->vd);
	return 0;
}

static void wait_stats(struct virtio_balloon *b, uint64_t gen, unsigned ms)
{
	struct timespec until = realtime_deadline_after(ms);

	while (b->stats_gen == gen &&
	       pthread_cond_timedwait(&b->stats_cond, &b->lock, &until) != ETIMEDOUT)
		;
}

static void balloon_info(void *dev, unsigned refresh_ms, struct machine_balloon_info *out)
{
	struct virtio_balloon *b = dev;
	uint64_t gen;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&b->lock);
	gen = b->stats_gen;
	pthread_mutex_unlock(&b->lock);
	if (refresh_ms > 0 && stats_queue(&b->vd) >= 0) {
		stats_request(b);
		pthread_mutex_lock(&b->lock);
		wait_stats(b, gen, refresh_ms);
		pthread_mutex_unlock(&b->lock);
	}
	pthread_mutex_lock(&b->lock);
	out->ram_bytes = b->ram_bytes;
	out->target_bytes = b->ram_bytes - (uint64_t)b->num_pages * BALLOON_PAGE;
	out->actual_bytes = b->ram_bytes - (uint64_t)b->actual * BALLOON_PAGE;
	if (b->actual > b->ram_bytes / BALLOON_PAGE)
		out->actual_bytes = 0;
	out->stats_valid = b->stats_gen > 0;
	out->stats_age_ms = out->stats_valid ? (monotonic_ns() - b->stats_ns) / 1000000u : 0;
	for (unsigned t = 0; t < BALLOON_NSTAT_TAGS && out->nstats < MACHINE_BALLOON_NSTATS; t++)
		if (b->stat_seen & (1u << t)) {
			out->stat[out->nstats].name = stat_names[t];
			out->stat[out->nstats++].value = b->stat[t];
		}
	pthread_mutex_unlock(&b->lock);
	out->reported_bytes = __atomic_load_n(&b->reported_bytes, __ATOMIC_RELAXED);
	out->reporting = virtio_has_feature(&b->vd, BALLOON_F_REPORTING);
	out->deflate_on_oom = virtio_has_feature(&b->vd, BALLOON_F_DEFLATE_ON_OOM);
}

/* ---- set-up ---- */

/* An on/off option of the device (default `def`); -1 with `err`. */
static int bool_opt(struct config_node *node, const char *name, bool def, bool *out, char *err,
                    size_t errlen)
{
	if (config_node_get_bool(node, name, def, out) < 0) {
		snprintf(err, errlen, "%s: want on or off, not '%s'", name,
		         config_node_get(node, name));
		return -1;
	}
	return 0;
}

static int balloon_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                        size_t errlen)
{
	struct virtio_balloon *b;
	bool stats, oom, reporting;
	uint64_t features = 0;

	if (m->balloon.dev != NULL) {
		snprintf(err, errlen, "one virtio-balloon a VM");
		return -1;
	}
	if (bool_opt(node, "stats", true, &stats, err, errlen) < 0 ||
	    bool_opt(node, "deflate_on_oom", false, &oom, err, errlen) < 0 ||
	    bool_opt(node, "free_page_reporting", true, &reporting, err, errlen) < 0)
		return -1;
	b = calloc(1, sizeof(*b));
	if (b == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	b->gm = &m->vm.mem;
	b->ram_bytes = m->vm.mem.lowmem_size + m->vm.mem.highmem_size;
	b->discard_align = m->vm.ram_page_size >= BALLOON_PAGE ? m->vm.ram_page_size : BALLOON_PAGE;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->stats_cond, NULL);
	for (unsigned qi = 0; qi < BALLOON_NQUEUES; qi++) {
		b->q[qi].elem.iov = b->q[qi].iov;
		b->q[qi].elem.iov_cap = BALLOON_MAX_IOV;
	}
	features |= stats ? 1ull << BALLOON_F_STATS_VQ : 0;
	features |= oom ? 1ull << BALLOON_F_DEFLATE_ON_OOM : 0;
	features |= reporting ? 1ull << BALLOON_F_REPORTING : 0;
	if (virtio_pci_init(&b->vd, f, &balloon_ops, b, BALLOON_NQUEUES, BALLOON_QSIZE, features,
	                    BALLOON_CONFIG_SIZE, err, errlen) < 0)
		return -1;
	m->balloon = (struct machine_balloon){b, balloon_set_target, balloon_info};
	return 0;
}

/* ---- saved state (docs/design/snapshots.md section 2, "virtio-balloon") ---- */

#define BALLOON_STATE_VERSION 1
#define BALLOON_QUIESCE_MS    1000

/* Pause every worker; the held statistics buffer goes back to the ring
 * (vq_unpop), so the restored device pops it again. */
static int balloon_quiesce(struct pci_func *f, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_balloon *b = vd->softc;
	int rc = 0, sq = stats_queue(vd);

	pthread_mutex_lock(&vd->lock);
	for (unsigned qi = 0; qi < BALLOON_NQUEUES && rc == 0; qi++)
		if ((rc = virtio_worker_pause(&b->q[qi].worker, BALLOON_QUIESCE_MS)) < 0)
			for (unsigned j = 0; j < qi; j++)
				virtio_worker_resume(&b->q[j].worker);
	if (rc == 0 && sq >= 0 && b->stats_held && vd->queue[sq].vq.ready) {
		pthread_mutex_lock(&vd->queue[sq].lock);
		vq_unpop(&vd->queue[sq].vq, 1);
		b->stats_held = false;
		pthread_mutex_unlock(&vd->queue[sq].lock);
	}
	pthread_mutex_unlock(&vd->lock);
	if (rc < 0)
		snprintf(err, errlen, "virtio-balloon: worker busy for %d ms", BALLOON_QUIESCE_MS);
	return rc;
}

static void balloon_unquiesce(struct pci_func *f)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_balloon *b = vd->softc;

	pthread_mutex_lock(&vd->lock);
	for (unsigned qi = 0; qi < BALLOON_NQUEUES; qi++)
		virtio_worker_resume(&b->q[qi].worker);
	pthread_mutex_unlock(&vd->lock);
}

/* u16 version, u32 num_pages, u32 actual, u64 reported_bytes, then the
 * transport. */
static int balloon_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_balloon *b = vd->softc;

	(void)err;
	(void)errlen;
	sbuf_put_u16(out, BALLOON_STATE_VERSION);
	pthread_mutex_lock(&b->lock);
	sbuf_put_u32(out, b->num_pages);
	sbuf_put_u32(out, b->actual);
	pthread_mutex_unlock(&b->lock);
	sbuf_put_u64(out, __atomic_load_n(&b->reported_bytes, __ATOMIC_RELAXED));
	virtio_pci_save(vd, out);
	return 0;
}

static int balloon_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct virtio_dev *vd = f->softc;
	struct virtio_balloon *b = vd->softc;
	uint32_t num_pages, actual;
	uint64_t reported;

	(void)err;
	(void)errlen;
	if (sbuf_get_version(in, BALLOON_STATE_VERSION) == 0)
		return -1;
	num_pages = sbuf_get_u32(in);
	actual = sbuf_get_u32(in);
	reported = sbuf_get_u64(in);
	if (in->failed)
		return -1;
	if (num_pages > b->ram_bytes / BALLOON_PAGE) {
		sbuf_fail(in, "virtio-balloon: a target of %u pages in %llu MiB of RAM", num_pages,
		          (unsigned long long)(b->ram_bytes >> 20));
		return -1;
	}
	if (virtio_pci_restore(vd, in) < 0)
		return -1;
	/* After the transport: its reset (ops->stop) clears `actual`. */
	pthread_mutex_lock(&b->lock);
	b->num_pages = num_pages;
	b->actual = actual;
	pthread_mutex_unlock(&b->lock);
	__atomic_store_n(&b->reported_bytes, reported, __ATOMIC_RELAXED);
	return 0;
}

static const char *const balloon_keys[] = {"stats", "deflate_on_oom", "free_page_reporting", NULL};

PCI_DEVEMU(virtio_balloon) = {
    .name = "virtio-balloon",
    .descr = "virtio memory balloon: target size, statistics, free page reporting",
    .usage = "  -s SLOT,virtio-balloon[,stats=off][,deflate_on_oom=on][,free_page_reporting=off]\n"
             "    stats=off                no statistics queue\n"
             "    deflate_on_oom=on        the guest takes pages back when out of memory (Linux\n"
             "                             then keeps them in MemTotal)\n"
             "    free_page_reporting=off  the guest does not report its free memory\n",
    .keys = balloon_keys,
    .init = balloon_init,
    .bar_read = virtio_pci_bar_read,
    .bar_write = virtio_pci_bar_write,
    .bar_moved = virtio_pci_bar_moved,
    .vector_changed = virtio_pci_vector_changed,
    .quiesce = balloon_quiesce,
    .unquiesce = balloon_unquiesce,
    .save = balloon_save,
    .restore = balloon_restore,
};
