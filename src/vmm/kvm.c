#include "vmm/kvm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/hostkvm.h"
#include "vmm/irq.h"
#include "vmm/vcpu.h"

#define KVM_CPUID_MAX_ENTRIES 512

static const char *kvm_device_path(void)
{
	return host_kvm_device();
}

static int kvm_require_caps(int kvm_fd, char *err, size_t errlen)
{
	static const struct {
		int cap;
		const char *name;
	} caps[] = {
	    {KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP"},
	    {KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY"},
	    {KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR"},
	    {KVM_CAP_PIT2, "KVM_CAP_PIT2"},
	    {KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID"},
	    {KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT"},
	};

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		if (ioctl(kvm_fd, KVM_CHECK_EXTENSION, caps[i].cap) <= 0) {
			snprintf(err, errlen, "KVM lacks %s", caps[i].name);
			return -1;
		}
	}
	return 0;
}

static int kvm_open(struct vm *vm, char *err, size_t errlen)
{
	const char *path = kvm_device_path();
	int version;

	vm->kvm_fd = open(path, O_RDWR | O_CLOEXEC);
	if (vm->kvm_fd < 0) {
		snprintf(err, errlen,
		         "cannot open %s: %s (is KVM available and are you allowed to use it?)",
		         path, strerror(errno));
		return -1;
	}
	version = ioctl(vm->kvm_fd, KVM_GET_API_VERSION, 0);
	if (version != KVM_API_VERSION) {
		snprintf(err, errlen, "%s: KVM API version %d, need %d", path, version,
		         KVM_API_VERSION);
		return -1;
	}
	return kvm_require_caps(vm->kvm_fd, err, errlen);
}

/* Create, move or (size 0) delete KVM memory slot `slot`; 0 or -1. */
static int set_slot(struct vm *vm, int slot, uint32_t flags, uint64_t gpa, uint64_t size, void *hva)
{
	struct kvm_userspace_memory_region r = {
	    .slot = (uint32_t)slot,
	    .flags = flags,
	    .guest_phys_addr = gpa,
	    .memory_size = size,
	    .userspace_addr = (uintptr_t)hva,
	};

	return ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0 ? -1 : 0;
}

static int vm_set_user_memory(struct vm *vm, uint64_t gpa, uint64_t size, void *hva, bool ro)
{
	int slot = (int)vm->next_slot;

	if (set_slot(vm, slot, ro ? KVM_MEM_READONLY : 0, gpa, size, hva) < 0)
		return -1;
	vm->next_slot++;
	if (gmem_add_region(&vm->mem, gpa, size, hva, ro) < 0)
		return -1;
	vm->mem.region[vm->mem.nregions - 1].slot = slot;
	return 0;
}

int vm_ram_window_add(struct vm *vm)
{
	if (vm->vm_fd < 0)
		return -1;
	return (int)vm->next_slot++;
}

int vm_ram_window_set(struct vm *vm, int slot, uint64_t gpa, uint64_t size, void *hva, bool on)
{
	if (slot < 0 || (size & 0xfff) != 0 || (on && (gpa & 0xfff) != 0))
		return -1;
	/* size 0 deletes the slot */
	return set_slot(vm, slot, KVM_MEM_LOG_DIRTY_PAGES, on ? gpa : 0, on ? size : 0, hva);
}

int vm_device_window_set(struct vm *vm, int slot, uint64_t gpa, uint64_t size, void *hva, bool on)
{
	if (slot < 0 || (size & 0xfff) != 0 || (on && (gpa & 0xfff) != 0))
		return -1;
	return set_slot(vm, slot, 0, on ? gpa : 0, on ? size : 0, hva);
}

int vm_ram_window_dirty(struct vm *vm, int slot, uint64_t *bitmap)
{
	struct kvm_dirty_log log = {.slot = (uint32_t)slot, .dirty_bitmap = bitmap};

	if (slot < 0)
		return -1;
	return ioctl(vm->vm_fd, KVM_GET_DIRTY_LOG, &log) < 0 ? -1 : 0;
}

static int set_ram_logging(struct vm *vm, bool on)
{
	for (unsigned i = 0; i < vm->mem.nregions; i++) {
		const struct gmem_region *r = &vm->mem.region[i];

		if (r->readonly || r->size == 0)
			continue;
		if (set_slot(vm, r->slot, on ? KVM_MEM_LOG_DIRTY_PAGES : 0, r->gpa, r->size,
		             r->hva) < 0)
			return -1;
	}
	return 0;
}

int vm_dirty_log_start(struct vm *vm)
{
	if (set_ram_logging(vm, true) == 0)
		return 0;
	set_ram_logging(vm, false);
	return -1;
}

void vm_dirty_log_stop(struct vm *vm)
{
	(void)set_ram_logging(vm, false);
}

int vm_dirty_log_take(struct vm *vm, unsigned idx, uint64_t *bitmap, uint64_t *scratch)
{
	const struct gmem_region *r;
	struct kvm_dirty_log log = {0};
	size_t words;

	if (idx >= vm->mem.nregions || vm->mem.region[idx].readonly)
		return -1;
	r = &vm->mem.region[idx];
	words = gmem_dirty_words(r->size);
	memset(scratch, 0, words * sizeof(*scratch));
	log.slot = (uint32_t)r->slot;
	log.dirty_bitmap = scratch;
	if (ioctl(vm->vm_fd, KVM_GET_DIRTY_LOG, &log) < 0)
		return -1;
	for (size_t w = 0; w < words; w++)
		bitmap[w] |= scratch[w];
	return 0;
}

/* The writable region holding all of [gpa, gpa+size), or NULL. */
static struct gmem_region *ram_region_of(struct vm *vm, uint64_t gpa, uint64_t size)
{
	for (unsigned i = 0; i < vm->mem.nregions; i++) {
		struct gmem_region *r = &vm->mem.region[i];

		if (!r->readonly && gpa >= r->gpa && size <= r->size &&
		    gpa - r->gpa <= r->size - size)
			return r;
	}
	return NULL;
}

int vm_ram_hole(struct vm *vm, uint64_t gpa, uint64_t size)
{
	struct gmem_region *r = ram_region_of(vm, gpa, size);
	uint64_t below, above_gpa, above;
	uint8_t *hva;
	int upper = (int)vm->next_slot;

	if (r == NULL || size == 0 || ((gpa | size) & 0xfff) != 0 || vm->vm_fd < 0)
		return -1;
	below = gpa - r->gpa;
	above_gpa = gpa + size;
	above = r->gpa + r->size - above_gpa;
	hva = r->hva;
	/* KVM cannot shrink a slot in place: delete it, then re-add the parts. */
	if (set_slot(vm, r->slot, 0, r->gpa, 0, hva) < 0 ||
	    (below > 0 && set_slot(vm, r->slot, 0, r->gpa, below, hva) < 0) ||
	    (above > 0 && set_slot(vm, upper, 0, above_gpa, above, hva + (above_gpa - r->gpa)) < 0))
		return -1;
	if (above > 0)
		vm->next_slot++;
	/* The hole's pages stay mapped (vm_destroy unmaps by region); they
	 * are simply no longer guest memory. */
	r->size = below;
	if (above > 0) {
		if (gmem_add_region(&vm->mem, above_gpa, above, hva + (above_gpa - r->gpa), false) <
		    0)
			return -1;
		vm->mem.region[vm->mem.nregions - 1].slot = upper;
	}
	return 0;
}

int vm_rom_window_add(struct vm *vm, uint64_t gpa, uint64_t size, void *hva)
{
	unsigned slot = vm->next_slot;

	if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_READONLY_MEM) <= 0 ||
	    vm_rom_window_set(vm, (int)slot, gpa, size, hva, true) < 0)
		return -1;
	vm->next_slot++;
	return (int)slot;
}

int vm_rom_window_set(struct vm *vm, int slot, uint64_t gpa, uint64_t size, void *hva, bool on)
{
	/* size 0 deletes the slot */
	return set_slot(vm, slot, KVM_MEM_READONLY, gpa, on ? size : 0, hva);
}

#define THP_ALIGN (2ull << 20)

/*
 * Anonymous memory whose start is a multiple of THP_ALIGN (mmap alone
 * gives 4 KiB alignment before Linux 6.7): KVM maps a transparent huge
 * page as one 2 MiB guest page only where the guest-physical and host
 * addresses agree modulo 2 MiB; otherwise every 4 KiB the guest touches
 * first is an exit of its own (an EPT/NPT fault: costly nested).
 * MAP_FAILED on failure, as mmap.
 */
static void *map_ram_aligned(uint64_t size)
{
	size_t len = size + THP_ALIGN, head, tail;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
	                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uintptr_t start;

	if (p == MAP_FAILED)
		return MAP_FAILED;
	start = ((uintptr_t)p + THP_ALIGN - 1) & ~(uintptr_t)(THP_ALIGN - 1);
	head = start - (uintptr_t)p;
	tail = len - head - size;
	if (head > 0)
		munmap(p, head);
	if (tail > 0)
		munmap((uint8_t *)start + size, tail);
	return (void *)start;
}

/* Guest RAM at `gpa` (a multiple of 2 MiB here: 0 and 4 GiB). */
static int vm_add_ram(struct vm *vm, uint64_t gpa, uint64_t size)
{
	bool huge = (vm->ram_flags & VM_RAM_HUGETLB) != 0;
	/* hugetlb pages are reserved at mmap() (no MAP_NORESERVE): a short
	 * pool fails here, not with a SIGBUS when the guest touches them;
	 * they come aligned to their size. */
	void *hva = huge ? mmap(NULL, size, PROT_READ | PROT_WRITE,
	                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0)
	                 : map_ram_aligned(size);

	if (hva == MAP_FAILED)
		return -1;
	/* Transparent huge pages cut the guest's TLB misses and, with the
	 * alignment above, its first-touch faults; advisory only. */
	if (!huge)
		madvise(hva, size, MADV_HUGEPAGE);
	if ((vm->ram_flags & VM_RAM_MERGEABLE) && madvise(hva, size, MADV_MERGEABLE) < 0) {
		munmap(hva, size);
		return -1;
	}
	if (vm_set_user_memory(vm, gpa, size, hva, false) < 0) {
		munmap(hva, size);
		return -1;
	}
	return 0;
}

/* memory.hugepages: the pool must hold the whole guest (one line if not). */
static int check_hugepages(uint64_t memsize, uint64_t *page, char *err, size_t errlen)
{
	char text[8192];
	uint64_t free_pages = 0;
	FILE *f = fopen("/proc/meminfo", "re");
	size_t n = f != NULL ? fread(text, 1, sizeof(text) - 1, f) : 0;

	if (f != NULL)
		fclose(f);
	text[n] = '\0';
	if (gmem_parse_hugepages(text, &free_pages, page) < 0) {
		snprintf(err, errlen,
		         "memory.hugepages: this host has no huge pages (/proc/meminfo)");
		return -1;
	}
	if (memsize % *page != 0) {
		snprintf(
		    err, errlen,
		    "memory.hugepages: the memory size is not a multiple of the %llu KiB huge page",
		    (unsigned long long)(*page >> 10));
		return -1;
	}
	if (free_pages < memsize / *page) {
		snprintf(err, errlen,
		         "memory.hugepages: the guest needs %llu huge pages of %llu KiB, the host "
		         "has %llu free (/proc/sys/vm/nr_hugepages)",
		         (unsigned long long)(memsize / *page), (unsigned long long)(*page >> 10),
		         (unsigned long long)free_pages);
		return -1;
	}
	return 0;
}

#define CPUID_1_ECX_TSC_DEADLINE (1u << 24)

/*
 * KVM_GET_SUPPORTED_CPUID always reports the TSC-deadline timer (leaf 1
 * ECX bit 24) as absent, since it needs the in-kernel local APIC, which
 * khyve always creates; KVM_CAP_TSC_DEADLINE_TIMER says whether KVM has it
 * (Documentation/virt/kvm/api.rst, KVM_GET_SUPPORTED_CPUID).  Without it
 * Linux calibrates and programs the APIC timer in one-shot mode instead,
 * as QEMU's guests do not: a slower boot (bench/lab-boot).
 */
static void offer_tsc_deadline(struct vm *vm)
{
	if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) <= 0)
		return;
	for (unsigned i = 0; i < vm->supported_cpuid->nent; i++)
		if (vm->supported_cpuid->entries[i].function == 1)
			vm->supported_cpuid->entries[i].ecx |= CPUID_1_ECX_TSC_DEADLINE;
}

static int vm_get_supported_cpuid(struct vm *vm)
{
	size_t sz =
	    sizeof(struct kvm_cpuid2) + KVM_CPUID_MAX_ENTRIES * sizeof(struct kvm_cpuid_entry2);

	vm->supported_cpuid = calloc(1, sz);
	if (vm->supported_cpuid == NULL)
		return -1;
	vm->supported_cpuid->nent = KVM_CPUID_MAX_ENTRIES;
	if (ioctl(vm->kvm_fd, KVM_GET_SUPPORTED_CPUID, vm->supported_cpuid) < 0)
		return -1;
	offer_tsc_deadline(vm);
	return 0;
}

static int vm_create_irqchip(struct vm *vm)
{
	struct kvm_pit_config pit = {.flags = KVM_PIT_SPEAKER_DUMMY};
	uint64_t identity = KVM_IDENTITY_MAP_GPA;

	if (ioctl(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &identity) < 0 ||
	    ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)KVM_TSS_GPA) < 0 ||
	    ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0 ||
	    ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0 || irq_routing_init(vm) < 0)
		return -1;
	return 0;
}

int vm_create_opts(struct vm *vm, uint64_t memsize, const struct cpu_topology *topo,
                   unsigned ram_flags, char *err, size_t errlen)
{
	uint64_t low, high;

	memset(vm, 0, sizeof(*vm));
	vm->kvm_fd = vm->vm_fd = -1;
	vm->memsize = memsize;
	vm->topo = *topo;
	vm->ram_flags = ram_flags;
	vm->ram_page_size = 4096;
	if ((ram_flags & VM_RAM_HUGETLB) &&
	    check_hugepages(memsize, &vm->ram_page_size, err, errlen) < 0)
		return -1;
	vm->ncpus = topo->sockets * topo->cores * topo->threads;
	if (kvm_open(vm, err, errlen) < 0)
		return -1;
	vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	vm->vcpu_mmap_size = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (vm->vm_fd < 0 || vm->vcpu_mmap_size <= 0) {
		snprintf(err, errlen, "KVM_CREATE_VM failed: %s", strerror(errno));
		return -1;
	}
	if (vm_create_irqchip(vm) < 0) {
		snprintf(err, errlen, "cannot create the in-kernel irqchip/PIT: %s",
		         strerror(errno));
		return -1;
	}
	gmem_layout(memsize, &low, &high);
	vm->mem.lowmem_size = low;
	vm->mem.highmem_size = high;
	if (vm_add_ram(vm, 0, low) < 0 ||
	    (high > 0 && vm_add_ram(vm, GMEM_HIGHMEM_BASE, high) < 0)) {
		snprintf(err, errlen, "cannot allocate %llu MiB of guest memory%s: %s",
		         (unsigned long long)(memsize >> 20),
		         (ram_flags & VM_RAM_HUGETLB) ? " in huge pages"
		         : (ram_flags & VM_RAM_MERGEABLE) && errno == EINVAL
		             ? " (memory.merge: no KSM in this kernel?)"
		             : "",
		         strerror(errno));
		return -1;
	}
	if (vm_get_supported_cpuid(vm) < 0) {
		snprintf(err, errlen, "KVM_GET_SUPPORTED_CPUID failed: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int vm_create(struct vm *vm, uint64_t memsize, const struct cpu_topology *topo, char *err,
              size_t errlen)
{
	return vm_create_opts(vm, memsize, topo, 0, err, errlen);
}

int vm_add_rom(struct vm *vm, uint64_t gpa, uint64_t size, const void *data, uint64_t len)
{
	bool ro = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_READONLY_MEM) > 0;
	uint8_t *hva;

	if (len > size || (size & 0xfff) != 0 || (gpa & 0xfff) != 0)
		return -1;
	hva = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hva == MAP_FAILED)
		return -1;
	memcpy(hva + (size - len), data, len);
	if (vm_set_user_memory(vm, gpa, size, hva, ro) < 0) {
		munmap(hva, size);
		return -1;
	}
	return 0;
}

static struct kvm_cpuid2 *cpuid_for_vcpu(struct vm *vm, unsigned index)
{
	size_t sz =
	    sizeof(struct kvm_cpuid2) + KVM_CPUID_MAX_ENTRIES * sizeof(struct kvm_cpuid_entry2);
	struct kvm_cpuid2 *c = malloc(sz);
	int n;

	if (c == NULL)
		return NULL;
	memcpy(c, vm->supported_cpuid,
	       sizeof(*c) + vm->supported_cpuid->nent * sizeof(struct kvm_cpuid_entry2));
	n = cpuid_fixup(c->entries, c->nent, KVM_CPUID_MAX_ENTRIES, &vm->topo, index);
	if (n < 0) {
		free(c);
		return NULL;
	}
	c->nent = (uint32_t)n;
	return c;
}

static int vm_setup_vcpu(struct vm *vm, unsigned i)
{
	struct kvm_cpuid2 *cpuid;
	int rc;

	vm->vcpus[i] = calloc(1, sizeof(struct vcpu));
	if (vm->vcpus[i] == NULL ||
	    vcpu_create(vm, vm->vcpus[i], i, topo_apic_id(&vm->topo, i)) < 0)
		return -1;
	cpuid = cpuid_for_vcpu(vm, i);
	if (cpuid == NULL)
		return -1;
	rc = vcpu_set_cpuid(vm->vcpus[i], cpuid);
	free(cpuid);
	if (rc < 0)
		return -1;
	return vcpu_init_lapic(vm->vcpus[i]);
}

int vm_create_vcpus(struct vm *vm, char *err, size_t errlen)
{
	int max_id = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPU_ID);
	uint32_t top_id = topo_apic_id(&vm->topo, vm->ncpus - 1);

	if (max_id <= 0)
		max_id = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);
	if (max_id > 0 && top_id >= (uint32_t)max_id) {
		snprintf(err, errlen, "%u vCPUs (APIC ID up to %u) exceed KVM's limit of %d",
		         vm->ncpus, top_id, max_id);
		return -1;
	}
	vm->vcpus = calloc(vm->ncpus, sizeof(*vm->vcpus));
	if (vm->vcpus == NULL)
		return -1;
	for (unsigned i = 0; i < vm->ncpus; i++) {
		if (vm_setup_vcpu(vm, i) < 0) {
			snprintf(err, errlen, "cannot create vCPU %u: %s", i, strerror(errno));
			return -1;
		}
	}
	return 0;
}

void vm_destroy(struct vm *vm)
{
	for (unsigned i = 0; vm->vcpus != NULL && i < vm->ncpus; i++) {
		if (vm->vcpus[i] != NULL)
			vcpu_destroy(vm->vcpus[i]);
		free(vm->vcpus[i]);
	}
	free(vm->vcpus);
	gmem_dirty_free(&vm->mem);
	for (unsigned i = 0; i < vm->mem.nregions; i++)
		munmap(vm->mem.region[i].hva, vm->mem.region[i].size);
	free(vm->supported_cpuid);
	free(vm->state_msrs);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	memset(vm, 0, sizeof(*vm));
	vm->kvm_fd = vm->vm_fd = -1;
}

int vm_irq_line(struct vm *vm, uint32_t gsi, int level)
{
	struct kvm_irq_level irq = {.irq = gsi, .level = (uint32_t)level};

	return ioctl(vm->vm_fd, KVM_IRQ_LINE, &irq);
}

int vm_ioeventfd(struct vm *vm, uint64_t gpa, unsigned len, int fd, bool assign)
{
	struct kvm_ioeventfd io = {
	    .addr = gpa,
	    .len = len,
	    .fd = fd,
	    .flags = assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN,
	};

	return ioctl(vm->vm_fd, KVM_IOEVENTFD, &io);
}

bool kvm_available(void)
{
	int kvm = open(kvm_device_path(), O_RDWR | O_CLOEXEC);
	int fd;

	if (kvm < 0)
		return false;
	fd = ioctl(kvm, KVM_CREATE_VM, 0);
	close(kvm);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}
