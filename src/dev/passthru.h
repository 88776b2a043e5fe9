/*
 * PCI passthrough (passthru.c): the seam its unit tests use in place of a
 * host device.
 */
#ifndef KHYVE_PASSTHRU_H
#define KHYVE_PASSTHRU_H

#include <stddef.h>

struct vfio_dev;

/*
 * NULL in khyve.  A unit test sets it to stand in for the host: passthru's
 * init then calls it with the `host` option instead of checking the host
 * and opening VFIO, and it fills `dev` (an fd whose pread/pwrite at the
 * regions' offsets play the device, the regions, the IRQ counts; flags
 * without VFIO_REGION_INFO_FLAG_MMAP keep every BAR trapping).  0, or -1
 * with one line in `err`.
 */
extern int (*passthru_test_open)(struct vfio_dev *dev, const char *host, char *err, size_t errlen);

#endif
