#include "vmm/irq.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "vmm/kvm.h"

#define IRQ_MAX_ROUTES 1024
#define PIC_PINS       16
#define MSI_GSI_BASE   IOAPIC_NPINS

static pthread_mutex_t routing_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvm_irq_routing *routing;
/* MSI GSIs in use, by GSI - MSI_GSI_BASE. */
static uint8_t msi_gsi_used[IRQ_MAX_ROUTES];

static int commit(struct vm *vm)
{
	return ioctl(vm->vm_fd, KVM_SET_GSI_ROUTING, routing);
}

static void add_irqchip_route(uint32_t gsi, uint32_t chip, uint32_t pin)
{
	struct kvm_irq_routing_entry *e = &routing->entries[routing->nr++];

	memset(e, 0, sizeof(*e));
	e->gsi = gsi;
	e->type = KVM_IRQ_ROUTING_IRQCHIP;
	e->u.irqchip.irqchip = chip;
	e->u.irqchip.pin = pin;
}

int irq_routing_init(struct vm *vm)
{
	int rc;

	pthread_mutex_lock(&routing_lock);
	if (routing == NULL)
		routing = calloc(1, sizeof(*routing) +
		                        IRQ_MAX_ROUTES * sizeof(struct kvm_irq_routing_entry));
	if (routing == NULL) {
		pthread_mutex_unlock(&routing_lock);
		return -1;
	}
	routing->nr = 0;
	memset(msi_gsi_used, 0, sizeof(msi_gsi_used));
	/* The same table KVM_CREATE_IRQCHIP starts with: ISA IRQs reach both
	 * PICs and the IOAPIC, GSIs 16-23 only the IOAPIC. */
	for (uint32_t gsi = 0; gsi < IOAPIC_NPINS; gsi++) {
		if (gsi < PIC_PINS)
			add_irqchip_route(
			    gsi, gsi < 8 ? KVM_IRQCHIP_PIC_MASTER : KVM_IRQCHIP_PIC_SLAVE, gsi % 8);
		add_irqchip_route(gsi, KVM_IRQCHIP_IOAPIC, gsi);
	}
	rc = commit(vm);
	pthread_mutex_unlock(&routing_lock);
	return rc;
}

static struct kvm_irq_routing_entry *find_msi(int gsi)
{
	for (uint32_t i = 0; i < routing->nr; i++)
		if (routing->entries[i].gsi == (uint32_t)gsi &&
		    routing->entries[i].type == KVM_IRQ_ROUTING_MSI)
			return &routing->entries[i];
	return NULL;
}

static void set_msi(struct kvm_irq_routing_entry *e, uint64_t addr, uint32_t data)
{
	e->u.msi.address_lo = (uint32_t)addr;
	e->u.msi.address_hi = (uint32_t)(addr >> 32);
	e->u.msi.data = data;
}

int irq_route_msi_add(struct vm *vm, uint64_t addr, uint32_t data)
{
	struct kvm_irq_routing_entry *e;
	int gsi = -1;

	pthread_mutex_lock(&routing_lock);
	for (int i = 0; routing != NULL && i < IRQ_MAX_ROUTES - MSI_GSI_BASE; i++)
		if (!msi_gsi_used[i]) {
			gsi = i + MSI_GSI_BASE;
			break;
		}
	if (gsi < 0 || routing->nr >= IRQ_MAX_ROUTES) {
		pthread_mutex_unlock(&routing_lock);
		return -1;
	}
	e = &routing->entries[routing->nr++];
	memset(e, 0, sizeof(*e));
	e->gsi = (uint32_t)gsi;
	e->type = KVM_IRQ_ROUTING_MSI;
	set_msi(e, addr, data);
	if (commit(vm) < 0) {
		routing->nr--;
		gsi = -1;
	} else {
		msi_gsi_used[gsi - MSI_GSI_BASE] = 1;
	}
	pthread_mutex_unlock(&routing_lock);
	return gsi;
}

int irq_route_msi_update(struct vm *vm, int gsi, uint64_t addr, uint32_t data)
{
	struct kvm_irq_routing_entry *e;
	int rc = -1;

	pthread_mutex_lock(&routing_lock);
	e = routing ? find_msi(gsi) : NULL;
	if (e != NULL) {
		set_msi(e, addr, data);
		rc = commit(vm);
	}
	pthread_mutex_unlock(&routing_lock);
	return rc;
}

int irq_route_msi_del(struct vm *vm, int gsi)
{
	struct kvm_irq_routing_entry *e;
	int rc = -1;

	pthread_mutex_lock(&routing_lock);
	e = routing ? find_msi(gsi) : NULL;
	if (e != NULL) {
		*e = routing->entries[--routing->nr];
		msi_gsi_used[gsi - MSI_GSI_BASE] = 0;
		rc = commit(vm);
	}
	pthread_mutex_unlock(&routing_lock);
	return rc;
}

int irq_signal_msi(struct vm *vm, uint64_t addr, uint32_t data)
{
	struct kvm_msi msi = {
	    .address_lo = (uint32_t)addr,
	    .address_hi = (uint32_t)(addr >> 32),
	    .data = data,
	};

	return ioctl(vm->vm_fd, KVM_SIGNAL_MSI, &msi) < 0 ? -1 : 0;
}

int irq_irqfd_bind(struct vm *vm, int fd, int gsi)
{
	struct kvm_irqfd irqfd = {.fd = (uint32_t)fd, .gsi = (uint32_t)gsi};

	return ioctl(vm->vm_fd, KVM_IRQFD, &irqfd);
}

int irq_irqfd_bind_resample(struct vm *vm, int fd, int gsi, int resamplefd)
{
	struct kvm_irqfd irqfd = {
	    .fd = (uint32_t)fd,
	    .gsi = (uint32_t)gsi,
	    .flags = KVM_IRQFD_FLAG_RESAMPLE,
	    .resamplefd = (uint32_t)resamplefd,
	};

	return ioctl(vm->vm_fd, KVM_IRQFD, &irqfd);
}

int irq_irqfd_unbind(struct vm *vm, int fd, int gsi)
{
	struct kvm_irqfd irqfd = {
	    .fd = (uint32_t)fd,
	    .gsi = (uint32_t)gsi,
	    .flags = KVM_IRQFD_FLAG_DEASSIGN,
	};

	return ioctl(vm->vm_fd, KVM_IRQFD, &irqfd);
}
