/*
 * VFIO for PCI passthrough: see vfio.h.  The sequence follows Linux's
 * Documentation/driver-api/vfio.rst ("VFIO Usage Example").
 */
#include "backend/vfio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/mem.h"

/* ---- addresses ---- */

static int parse_bsf(const char *s, struct vfio_addr *a)
{
	unsigned b, sl, fn;
	char tail;

	if (sscanf(s, "%u/%u/%u%c", &b, &sl, &fn, &tail) != 3)
		return -1;
	*a = (struct vfio_addr){0, b, sl, fn};
	return 0;
}

static int parse_sysfs(const char *s, struct vfio_addr *a)
{
	unsigned d = 0, b, sl, fn;
	char tail;

	for (const char *p = s; *p; p++)
		if (!strchr("0123456789abcdefABCDEF:.", *p))
			return -1;
	if (sscanf(s, "%x:%x:%x.%x%c", &d, &b, &sl, &fn, &tail) == 4 ||
	    (d = 0, sscanf(s, "%x:%x.%x%c", &b, &sl, &fn, &tail) == 3)) {
		*a = (struct vfio_addr){d, b, sl, fn};
		return 0;
	}
	return -1;
}

int vfio_parse_addr(const char *s, struct vfio_addr *a, char *err, size_t errlen)
{
	int rc = strchr(s, '/') ? parse_bsf(s, a) : parse_sysfs(s, a);

	if (rc == 0 && a->domain <= 0xffff && a->bus <= 255 && a->slot <= 31 && a->func <= 7)
		return 0;
	snprintf(err, errlen,
	         "bad host device '%s' (want BUS/SLOT/FUNC, e.g. 2/0/0, or a sysfs "
	         "address, e.g. 0000:02:00.0)",
	         s);
	return -1;
}

void vfio_addr_str(const struct vfio_addr *a, char *buf, size_t len)
{
	snprintf(buf, len, "%04x:%02x:%02x.%x", a->domain & 0xffff, a->bus & 0xff, a->slot & 0x1f,
	         a->func & 7);
}

/* ---- host checks ---- */

/* The last component of the symbolic link `path` into `out`; 0 or -1. */
static int link_name(const char *path, char *out, size_t len)
{
	char target[PATH_MAX];
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	const char *base;

	if (n < 0)
		return -1;
	target[n] = '\0';
	base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (strlen(base) >= len)
		return -1;
	memcpy(out, base, strlen(base) + 1);
	return 0;
}

static bool dir_has_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	bool any = false;

	if (d == NULL)
		return false;
	while (!any && (e = readdir(d)) != NULL)
		any = e->d_name[0] != '.';
	closedir(d);
	return any;
}

/* A driver a device of the group may have without making it unviable. */
static bool driver_harmless(const char *drv)
{
	return strcmp(drv, "vfio-pci") == 0 || strcmp(drv, "pci-stub") == 0 ||
	       strcmp(drv, "pcieport") == 0;
}

static int check_bound(const char *root, const char *name, char *err, size_t errlen)
{
	char path[PATH_MAX], drv[256];

	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s", root, name);
	if (access(path, F_OK) != 0) {
		snprintf(err, errlen, "no PCI device %s on this host", name);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/driver", root, name);
	if (link_name(path, drv, sizeof(drv)) < 0) {
		snprintf(err, errlen,
		         "%s is bound to no driver, not vfio-pci (modprobe vfio-pci; echo "
		         "vfio-pci > /sys/bus/pci/devices/%s/driver_override; echo %s > "
		         "/sys/bus/pci/drivers/vfio-pci/bind)",
		         name, name, name);
		return -1;
	}
	if (strcmp(drv, "vfio-pci") != 0) {
		snprintf(err, errlen,
		         "%s is bound to %s, not vfio-pci (echo %s > "
		         "/sys/bus/pci/drivers/%s/unbind; echo vfio-pci > "
		         "/sys/bus/pci/devices/%s/driver_override; echo %s > "
		         "/sys/bus/pci/drivers/vfio-pci/bind)",
		         name, drv, name, drv, name, name);
		return -1;
	}
	return 0;
}

static int read_group(const char *root, const char *name, int *group, char *err, size_t errlen)
{
	char path[PATH_MAX], num[32], *end;
	long g;

	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/iommu_group", root, name);
	if (link_name(path, num, sizeof(num)) < 0) {
		snprintf(err, errlen, "%s has no IOMMU group (is the IOMMU on?)", name);
		return -1;
	}
	g = strtol(num, &end, 10);
	if (*end != '\0' || end == num || g < 0 || g > 1000000) {
		snprintf(err, errlen, "%s: odd IOMMU group '%s'", name, num);
		return -1;
	}
	*group = (int)g;
	return 0;
}

/* Every other device of the group must leave it viable. */
static int check_viable(const char *root, const char *name, int group, char *err, size_t errlen)
{
	char path[PATH_MAX], drv[256];
	struct dirent *e;
	DIR *d;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/sys/kernel/iommu_groups/%d/devices", root, group);
	d = opendir(path);
	if (d == NULL) {
		snprintf(err, errlen, "cannot list IOMMU group %d of %s", group, name);
		return -1;
	}
	while (rc == 0 && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || strcmp(e->d_name, name) == 0)
			continue;
		snprintf(path, sizeof(path), "%s/sys/kernel/iommu_groups/%d/devices/%s/driver",
		         root, group, e->d_name);
		if (link_name(path, drv, sizeof(drv)) == 0 && !driver_harmless(drv)) {
			snprintf(err, errlen,
			         "IOMMU group %d of %s is not viable: %s in it is bound "
			         "to %s (bind it to vfio-pci too)",
			         group, name, e->d_name, drv);
			rc = -1;
		}
	}
	closedir(d);
	return rc;
}

int vfio_check_host(const char *root, const struct vfio_addr *a, int *group, char *err,
                    size_t errlen)
{
	char name[VFIO_ADDR_STRLEN], path[PATH_MAX];

	vfio_addr_str(a, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/sys/kernel/iommu_groups", root);
	if (!dir_has_entries(path)) {
		snprintf(err, errlen,
		         "the host has no IOMMU (%s/sys/kernel/iommu_groups is empty: "
		         "enable VT-d or AMD-Vi, boot with intel_iommu=on)",
		         root);
		return -1;
	}
	if (check_bound(root, name, err, errlen) < 0 ||
	    read_group(root, name, group, err, errlen) < 0 ||
	    check_viable(root, name, *group, err, errlen) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/dev/vfio/vfio", root);
	if (access(path, F_OK) != 0) {
		snprintf(err, errlen, "no %s (modprobe vfio-pci)", path);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/dev/vfio/%d", root, *group);
	if (access(path, F_OK) != 0) {
		snprintf(err, errlen, "no %s for %s (modprobe vfio-pci)", path, name);
		return -1;
	}
	return 0;
}

/* ---- the container, group and device ---- */

static int open_container(struct vfio_dev *d, const char *root, char *err, size_t errlen)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/dev/vfio/vfio", root);
	d->container = open(path, O_RDWR | O_CLOEXEC);
	if (d->container < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (ioctl(d->container, VFIO_GET_API_VERSION) != VFIO_API_VERSION ||
	    ioctl(d->container, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) <= 0) {
		snprintf(err, errlen, "%s: no VFIO type1v2 IOMMU", path);
		return -1;
	}
	return 0;
}

static int open_group(struct vfio_dev *d, const char *root, int group, char *err, size_t errlen)
{
	struct vfio_group_status st = {.argsz = sizeof(st)};
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/dev/vfio/%d", root, group);
	d->group = open(path, O_RDWR | O_CLOEXEC);
	if (d->group < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (ioctl(d->group, VFIO_GROUP_GET_STATUS, &st) < 0 ||
	    !(st.flags & VFIO_GROUP_FLAGS_VIABLE)) {
		snprintf(err, errlen,
		         "IOMMU group %d is not viable (bind all its devices to vfio-pci)", group);
		return -1;
	}
	if (ioctl(d->group, VFIO_GROUP_SET_CONTAINER, &d->container) < 0 ||
	    ioctl(d->container, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) < 0) {
		snprintf(err, errlen, "IOMMU group %d: cannot set up the IOMMU: %s", group,
		         strerror(errno));
		return -1;
	}
	return 0;
}

/* IOVA = GPA for every writable RAM region: the device DMAs to guest RAM. */
static int map_ram(struct vfio_dev *d, const struct guest_mem *gm, char *err, size_t errlen)
{
	for (unsigned i = 0; i < gm->nregions; i++) {
		const struct gmem_region *r = &gm->region[i];
		struct vfio_iommu_type1_dma_map map = {
		    .argsz = sizeof(map),
		    .flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
		    .vaddr = (uintptr_t)r->hva,
		    .iova = r->gpa,
		    .size = r->size,
		};

		if (r->readonly || r->size == 0)
			continue;
		if (ioctl(d->container, VFIO_IOMMU_MAP_DMA, &map) < 0) {
			snprintf(err, errlen,
			         "cannot map %llu MiB of guest RAM for DMA: %s (RLIMIT_MEMLOCK?)",
			         (unsigned long long)(r->size >> 20), strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int read_device_info(struct vfio_dev *d, const char *name, char *err, size_t errlen)
{
	struct vfio_device_info info = {.argsz = sizeof(info)};

	if (ioctl(d->fd, VFIO_DEVICE_GET_INFO, &info) < 0 ||
	    !(info.flags & VFIO_DEVICE_FLAGS_PCI)) {
		snprintf(err, errlen, "%s is not a VFIO PCI device", name);
		return -1;
	}
	d->flags = info.flags;
	for (unsigned i = 0; i < VFIO_PCI_NUM_REGIONS && i < info.num_regions; i++) {
		struct vfio_region_info ri = {.argsz = sizeof(ri), .index = i};

		if (ioctl(d->fd, VFIO_DEVICE_GET_REGION_INFO, &ri) < 0)
			continue;
		d->region[i] = (struct vfio_region){ri.size, ri.offset, ri.flags};
	}
	for (unsigned i = 0; i < VFIO_PCI_NUM_IRQS && i < info.num_irqs; i++) {
		struct vfio_irq_info ii = {.argsz = sizeof(ii), .index = i};

		if (ioctl(d->fd, VFIO_DEVICE_GET_IRQ_INFO, &ii) == 0)
			d->irq_count[i] = ii.count;
	}
	if (d->region[VFIO_PCI_CONFIG_REGION_INDEX].size < 256) {
		snprintf(err, errlen, "%s: no config space region", name);
		return -1;
	}
	return 0;
}

int vfio_open(struct vfio_dev *d, const char *root, const struct vfio_addr *a, int group,
              const struct guest_mem *gm, char *err, size_t errlen)
{
	char name[VFIO_ADDR_STRLEN];

	memset(d, 0, sizeof(*d));
	d->container = d->group = d->fd = -1;
	vfio_addr_str(a, name, sizeof(name));
	if (open_container(d, root, err, errlen) < 0 ||
	    open_group(d, root, group, err, errlen) < 0 || map_ram(d, gm, err, errlen) < 0)
		goto fail;
	d->fd = ioctl(d->group, VFIO_GROUP_GET_DEVICE_FD, name);
	if (d->fd < 0) {
		snprintf(err, errlen, "%s: cannot open the device: %s", name, strerror(errno));
		goto fail;
	}
	if (read_device_info(d, name, err, errlen) < 0)
		goto fail;
	return 0;
fail:
	vfio_close(d);
	return -1;
}

void vfio_close(struct vfio_dev *d)
{
	if (d->fd >= 0)
		close(d->fd);
	if (d->group >= 0)
		close(d->group);
	if (d->container >= 0)
		close(d->container);
	d->fd = d->group = d->container = -1;
}

/* ---- interrupts, reset, register access ---- */

int vfio_set_irq_eventfds(struct vfio_dev *d, unsigned index, const int *fds, unsigned count)
{
	size_t len = sizeof(struct vfio_irq_set) + (size_t)count * sizeof(int32_t);
	struct vfio_irq_set *s = calloc(1, len);
	int rc;

	if (s == NULL)
		return -1;
	s->argsz = (uint32_t)len;
	s->flags = (count ? VFIO_IRQ_SET_DATA_EVENTFD : VFIO_IRQ_SET_DATA_NONE) |
	           VFIO_IRQ_SET_ACTION_TRIGGER;
	s->index = index;
	s->start = 0;
	s->count = count;
	for (unsigned i = 0; i < count; i++) {
		int32_t fd = fds[i];

		memcpy(s->data + i * sizeof(int32_t), &fd, sizeof(fd));
	}
	rc = ioctl(d->fd, VFIO_DEVICE_SET_IRQS, s);
	free(s);
	return rc < 0 ? -1 : 0;
}

int vfio_set_intx_unmask_fd(struct vfio_dev *d, int fd)
{
	/* struct vfio_irq_set ends in a flexible array: one int32 after it. */
	union {
		struct vfio_irq_set s;
		uint8_t bytes[sizeof(struct vfio_irq_set) + sizeof(int32_t)];
	} req = {.s = {.argsz = sizeof(req),
	               .flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_UNMASK,
	               .index = VFIO_PCI_INTX_IRQ_INDEX,
	               .start = 0,
	               .count = 1}};
	int32_t fd32 = fd;

	memcpy(req.bytes + sizeof(struct vfio_irq_set), &fd32, sizeof(fd32));
	return ioctl(d->fd, VFIO_DEVICE_SET_IRQS, &req) < 0 ? -1 : 0;
}

int vfio_reset(struct vfio_dev *d)
{
	if (!(d->flags & VFIO_DEVICE_FLAGS_RESET))
		return -1;
	return ioctl(d->fd, VFIO_DEVICE_RESET) < 0 ? -1 : 0;
}

static bool region_holds(const struct vfio_dev *d, unsigned idx, uint64_t off, size_t len)
{
	return idx < VFIO_PCI_NUM_REGIONS && off <= d->region[idx].size &&
	       len <= d->region[idx].size - off;
}

int vfio_region_read(struct vfio_dev *d, unsigned idx, uint64_t off, void *buf, size_t len)
{
	if (d->fd < 0 || !region_holds(d, idx, off, len))
		return -1;
	return pread(d->fd, buf, len, (off_t)(d->region[idx].offset + off)) == (ssize_t)len
	           ? (int)len
	           : -1;
}

int vfio_region_write(struct vfio_dev *d, unsigned idx, uint64_t off, const void *buf, size_t len)
{
	if (d->fd < 0 || !region_holds(d, idx, off, len))
		return -1;
	return pwrite(d->fd, buf, len, (off_t)(d->region[idx].offset + off)) == (ssize_t)len
	           ? (int)len
	           : -1;
}
