/* Coalesced MMIO and port I/O (see coalesced.h). */
#include "vmm/coalesced.h"

#include <linux/kvm.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/ioctl.h>

#include "vmm/kvm.h"
#include "vmm/vcpu.h"

#define RING_PAGE_SIZE 4096u /* x86: KVM's ring is one 4 KiB page */
#define RING_ENTRIES                                                                               \
	((RING_PAGE_SIZE - sizeof(struct kvm_coalesced_mmio_ring)) /                               \
	 sizeof(struct kvm_coalesced_mmio))

static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;

int vm_coalesce_zone(struct vm *vm, uint64_t addr, uint32_t size, bool pio)
{
	struct kvm_coalesced_mmio_zone zone = {.addr = addr, .size = size, .pio = pio ? 1 : 0};
	int page = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_COALESCED_MMIO);

	if (page <= 0 ||
	    (pio && ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_COALESCED_PIO) <= 0))
		return -1;
	if ((uint64_t)vm->vcpu_mmap_size < ((uint64_t)page + 1) * RING_PAGE_SIZE)
		return -1; /* the ring is not in the vCPU mapping: nothing could drain it */
	if (ioctl(vm->vm_fd, KVM_REGISTER_COALESCED_MMIO, &zone) < 0)
		return -1;
	vm->coalesced_page = (unsigned)page;
	return 0;
}

unsigned vm_coalesced_page(const struct vm *vm)
{
	return vm->coalesced_page;
}

static struct kvm_coalesced_mmio_ring *ring_of(struct vm *vm)
{
	if (vm->coalesced_page == 0 || vm->vcpus == NULL || vm->vcpus[0] == NULL ||
	    vm->vcpus[0]->run == NULL)
		return NULL;
	return (void *)((char *)vm->vcpus[0]->run + (size_t)vm->coalesced_page * RING_PAGE_SIZE);
}

void vm_coalesced_drain(struct vm *vm, vm_coalesced_fn fn, void *arg)
{
	struct kvm_coalesced_mmio_ring *ring = ring_of(vm);
	uint32_t first;

	if (ring == NULL || __atomic_load_n(&ring->first, __ATOMIC_ACQUIRE) ==
	                        __atomic_load_n(&ring->last, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&drain_lock);
	first = __atomic_load_n(&ring->first, __ATOMIC_ACQUIRE);
	/* KVM keeps both indices below RING_ENTRIES; a bound anyway, so a
	 * damaged page cannot make this loop run on. */
	for (unsigned n = 0; n < RING_ENTRIES && first < RING_ENTRIES &&
	                     first != __atomic_load_n(&ring->last, __ATOMIC_ACQUIRE);
	     n++) {
		struct kvm_coalesced_mmio e = ring->coalesced_mmio[first];
		unsigned len = e.len <= sizeof(e.data) ? e.len : sizeof(e.data);

		if (len > 0)
			fn(arg, e.phys_addr, len, e.pio != 0, e.data);
		first = (first + 1) % RING_ENTRIES;
		/* Published after the write took effect: a vCPU that then sees
		 * the ring empty knows its own write is applied. */
		__atomic_store_n(&ring->first, first, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&drain_lock);
}
