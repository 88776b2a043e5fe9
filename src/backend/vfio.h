/*
 * A host PCI device through VFIO (Linux Documentation/driver-api/vfio.rst):
 * the checks that it can be passed through (an IOMMU, the device bound to
 * vfio-pci, a viable group, /dev/vfio/vfio), and the type1 container, group
 * and device fds with guest RAM mapped for the device's DMA.
 *
 * Every path is `root` followed by the absolute host path ("/sys/...",
 * "/dev/vfio/..."); root is "" on a real host and a fake tree in tests.
 */
#ifndef KHYVE_VFIO_H
#define KHYVE_VFIO_H

#include <linux/vfio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct guest_mem;

/* A host PCI address (domain:bus:slot.function). */
struct vfio_addr {
	unsigned domain; /* 0..0xffff */
	unsigned bus;    /* 0..255 */
	unsigned slot;   /* 0..31 */
	unsigned func;   /* 0..7 */
};

/* Bytes vfio_addr_str() needs: "dddd:bb:ss.f" and the NUL. */
#define VFIO_ADDR_STRLEN 13

/*
 * Parse bhyve's "BUS/SLOT/FUNC" (decimal, domain 0, as bhyve's passthru
 * and vm-bhyve's passthruN) or sysfs's "DDDD:BB:SS.F" / "BB:SS.F" (hex).
 * 0, or -1 with one line in `err`.
 */
int vfio_parse_addr(const char *s, struct vfio_addr *a, char *err, size_t errlen);

/* The sysfs name "0000:00:03.0" of `a` into `buf` (VFIO_ADDR_STRLEN). */
void vfio_addr_str(const struct vfio_addr *a, char *buf, size_t len);

/*
 * Check, in this order, that the host has an IOMMU (entries in
 * ROOT/sys/kernel/iommu_groups), that the device exists and is bound to
 * vfio-pci (the line names the driver it is bound to and how to rebind),
 * that every other device of its IOMMU group is bound to vfio-pci (or to
 * pci-stub or pcieport, or to nothing), and that ROOT/dev/vfio/vfio and
 * the group's node exist.  Fills `*group` with the group number.  0, or
 * -1 with one line in `err`.
 */
int vfio_check_host(const char *root, const struct vfio_addr *a, int *group, char *err,
                    size_t errlen);

/* One region of the device (VFIO_DEVICE_GET_REGION_INFO). */
struct vfio_region {
	uint64_t size;   /* bytes; 0 when the device lacks it */
	uint64_t offset; /* of the region in the device fd, for pread/pwrite/mmap */
	uint32_t flags;  /* VFIO_REGION_INFO_FLAG_* */
};

/* An open device.  All fds -1 when closed. */
struct vfio_dev {
	int container;  /* /dev/vfio/vfio, type1 IOMMU */
	int group;      /* /dev/vfio/N */
	int fd;         /* the device */
	uint32_t flags; /* VFIO_DEVICE_FLAGS_* (RESET, PCI) */
	struct vfio_region region[VFIO_PCI_NUM_REGIONS];
	uint32_t irq_count[VFIO_PCI_NUM_IRQS]; /* vectors per IRQ index */
};

/*
 * Open the container (VFIO_GET_API_VERSION, VFIO_TYPE1v2_IOMMU), the
 * group (viable), set the IOMMU, map every RAM region of `gm` at its
 * guest-physical address (IOVA = GPA, VFIO_IOMMU_MAP_DMA, which pins the
 * pages) and open the device; read its regions and IRQ counts.  0, or -1
 * with one line in `err` (everything closed again).
 */
int vfio_open(struct vfio_dev *d, const char *root, const struct vfio_addr *a, int group,
              const struct guest_mem *gm, char *err, size_t errlen);

/* Close what vfio_open() opened (the IOMMU mappings go with the container). */
void vfio_close(struct vfio_dev *d);

/*
 * Give IRQ index `index` (VFIO_PCI_MSIX_IRQ_INDEX, ..._INTX_...) `count`
 * eventfds as triggers, vectors 0..count-1 (-1 in `fds` leaves one
 * unset); count 0 disables the index.  0 or -1 (errno).
 */
int vfio_set_irq_eventfds(struct vfio_dev *d, unsigned index, const int *fds, unsigned count);

/* Set the INTx unmask eventfd (KVM's resample fd); 0 or -1 (errno). */
int vfio_set_intx_unmask_fd(struct vfio_dev *d, int fd);

/* Function-level reset of the device when it supports one; 0 or -1. */
int vfio_reset(struct vfio_dev *d);

/* Read / write `len` bytes at `off` of region `idx`: len bytes done, or
 * -1 (out of the region, or the device is gone). */
int vfio_region_read(struct vfio_dev *d, unsigned idx, uint64_t off, void *buf, size_t len);
int vfio_region_write(struct vfio_dev *d, unsigned idx, uint64_t off, const void *buf, size_t len);

#endif
