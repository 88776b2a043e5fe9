/*
 * Unit tests for virtio-net's receive publication (src/dev/virtio_net.h):
 * num_buffers in the frame's header is written before the used index moves
 * (virtio 1.2 section 5.1.6.4), so a driver polling used->idx never reads
 * a stale header.  vq_push() is wrapped (-Wl,--wrap=vq_push, see the
 * Makefile): at every push the test reads the header as the guest would.
 */
#include "unit.h"

#include "bus/virtqueue.h"
#include "dev/virtio_net.h"
#include "vmm/mem.h"

#define RAM_GPA   0x100000ull
#define RAM_SIZE  0x40000ull
#define DESC_GPA  (RAM_GPA + 0x0000)
#define AVAIL_GPA (RAM_GPA + 0x1000)
#define USED_GPA  (RAM_GPA + 0x2000)
#define BUF_GPA   (RAM_GPA + 0x10000) /* receive buffers, BUF_LEN each */
#define BUF_LEN   100
#define QSIZE     16
#define NCHAINS   4
#define STALE     0xeeee

static struct {
	uint8_t *ram;
	struct guest_mem gm;
	struct virtqueue vq;
	struct iovec iov[NCHAINS];
	struct vq_elem e[NCHAINS];
	uint16_t want_num_buffers; /* what every push must already see */
	unsigned pushes;
} fx;

void __real_vq_push(struct virtqueue *vq, uint16_t head, uint32_t len);
void __wrap_vq_push(struct virtqueue *vq, uint16_t head, uint32_t len);

static uint16_t guest16(uint64_t gpa)
{
	uint16_t v;

	memcpy(&v, fx.ram + (gpa - RAM_GPA), sizeof(v));
	return v;
}

/* The guest's view at the moment the device publishes a chain. */
void __wrap_vq_push(struct virtqueue *vq, uint16_t head, uint32_t len)
{
	assert_int_equal(guest16(BUF_GPA + 10), fx.want_num_buffers);
	fx.pushes++;
	__real_vq_push(vq, head, len);
}

static int setup(void **state)
{
	(void)state;
	memset(&fx, 0, sizeof(fx));
	fx.ram = calloc(1, RAM_SIZE);
	if (fx.ram == NULL || gmem_add_region(&fx.gm, RAM_GPA, RAM_SIZE, fx.ram, false) < 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(fx.ram);
	return 0;
}

/* NCHAINS one-descriptor writable chains of BUF_LEN bytes, popped in
 * order; the header's num_buffers starts stale, as guest memory may be. */
static void post_and_pop(void)
{
	uint16_t stale = STALE;

	assert_int_equal(
	    vq_init(&fx.vq, &fx.gm, QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA, false, false), 0);
	for (uint16_t i = 0; i < NCHAINS; i++) {
		struct vring_desc d = {BUF_GPA + BUF_LEN * i, BUF_LEN, VRING_DESC_F_WRITE, 0};

		memcpy(fx.ram + (DESC_GPA - RAM_GPA) + 16 * i, &d, sizeof(d));
		memcpy(fx.ram + (AVAIL_GPA - RAM_GPA) + 4 + 2 * i, &i, 2);
	}
	memcpy(fx.ram + (AVAIL_GPA - RAM_GPA) + 2, &(uint16_t){NCHAINS}, 2);
	for (int i = 0; i < NCHAINS; i++) {
		fx.e[i].iov = &fx.iov[i];
		fx.e[i].iov_cap = 1;
		assert_int_equal(vq_pop(&fx.vq, &fx.e[i]), VQ_GOT);
	}
	memcpy(fx.ram + (BUF_GPA + 10 - RAM_GPA), &stale, 2);
}

static void test_mergeable_header_first(void **state)
{
	(void)state;
	post_and_pop();
	/* 250 bytes fill three 100-byte chains; the fourth goes back. */
	fx.want_num_buffers = 3;
	virtio_net_rx_publish(&fx.vq, fx.e, NCHAINS, 250, true);
	assert_int_equal(fx.pushes, 3);
	assert_int_equal(guest16(USED_GPA + 2), 3);
	assert_int_equal(fx.vq.last_avail, 3);
	/* The used entries: ids 0-2 with 100, 100 and 50 bytes. */
	assert_int_equal(guest16(USED_GPA + 4 + 8 * 2), 2);
	assert_int_equal(guest16(USED_GPA + 4 + 8 * 2 + 4), 50);
}

static void test_plain_header_says_one(void **state)
{
	(void)state;
	post_and_pop();
	/* Without MRG_RXBUF the device must still set num_buffers to 1. */
	fx.want_num_buffers = 1;
	virtio_net_rx_publish(&fx.vq, fx.e, 1, 60, false);
	assert_int_equal(fx.pushes, 1);
	assert_int_equal(guest16(USED_GPA + 2), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_mergeable_header_first, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_plain_header_says_one, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
