/*
 * `vm import`: a guest of another hypervisor as vm-bhyve-style settings.
 * The readers (import_pve.c: a Proxmox VE qm.conf(5) file; import_libvirt.c:
 * a libvirt domain XML) fill one neutral `struct imp_guest`; cmd_import.c
 * checks its disks, writes NAME.conf and converts what must be converted.
 * Every value comes from a file the user names: each is checked, and what
 * has no vm setting becomes a note (one line of the report), not an error.
 */
#ifndef KHYVE_VM_IMPORT_H
#define KHYVE_VM_IMPORT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "vm/vm.h"

#define IMP_MAX_DISKS 32
#define IMP_MAX_NICS  8
#define IMP_MAX_PT    8
#define IMP_MAX_NOTES 64
#define IMP_NOTE_LEN  200
/* The largest import file read (a qm.conf is a few KiB, a domain XML tens). */
#define IMP_MAX_FILE (1024 * 1024)
/* vCPUs khyve takes (khyvecmd.c, src/vmm/topology.h). */
#define IMP_MAX_VCPUS 288

/* The bus a disk was on: virtio -> virtio-blk, the others by guest type. */
enum imp_bus { IMP_BUS_VIRTIO, IMP_BUS_SCSI, IMP_BUS_SATA, IMP_BUS_IDE };

/* One disk or CD drive with its image. */
struct imp_disk {
	char id[24];         /* "scsi0" (Proxmox), "vda" (libvirt's target dev) */
	char path[PATH_MAX]; /* the image: a file or block device on this host */
	char format[8];      /* qemu-img's -f: "raw", "qcow2", "vmdk" */
	enum imp_bus bus;
	bool cdrom, readonly;
	unsigned boot; /* place in the boot order from 1; 0: not listed */
};

/* One network interface. */
struct imp_nic {
	char id[24];   /* "net0" */
	char type[16]; /* vm's network type: "virtio-net" or "e1000" */
	char mac[18];  /* "" when the source has none (vm makes one) */
	char sw[32];   /* the vm switch: the source's bridge or network */
};

/* A guest as read; zero-initialise, then a reader fills it. */
struct imp_guest {
	const char *kind; /* "Proxmox" or "libvirt", for messages */
	char name[VM_NAME_MAX + 1];
	char uuid[37];                          /* "" when none */
	unsigned cpus, sockets, cores, threads; /* threads 0: not given */
	unsigned long long memory_mib;
	bool uefi, graphics, tablet, localtime, rng, windows;
	bool tpm;     /* a TPM 2.0: vm's tpm="yes" (a new swtpm state) */
	bool balloon; /* a virtio memory balloon: vm's balloon="yes" */
	struct imp_disk disk[IMP_MAX_DISKS];
	size_t ndisk;
	struct imp_nic nic[IMP_MAX_NICS];
	size_t nnic;
	/* Host PCI devices to pass through, vm-bhyve's "B/S/F" (decimal). */
	char passthru[IMP_MAX_PT][16];
	size_t npt;
	/* The UEFI variables (Proxmox's efidisk0 of efitype 4m, libvirt's
	 * <nvram>): "" when none; an OVMF_VARS_4M-sized store is carried over. */
	char vars_id[24];
	char vars_path[PATH_MAX];
	char vars_format[8];
	bool vars_carried; /* set by cmd_import.c once uefi-vars.fd is written */
	char note[IMP_MAX_NOTES][IMP_NOTE_LEN]; /* what was not mapped, one line each */
	bool caveat[IMP_MAX_NOTES];             /* the line is about something mapped */
	size_t nnote;
};

/* `src` into `dst` (`len` bytes with the NUL), cut when longer. */
void imp_copy(char *dst, size_t len, const char *src);

/*
 * A host PCI device at domain 0, bus `bus`, slot `slot`, function `fn`
 * to pass through (`id` names it in the report): added as passthruN with
 * a note on binding it to vfio-pci; out of range or too many: a note.
 */
void imp_passthru(struct imp_guest *g, const char *id, unsigned dom, unsigned bus, unsigned slot,
                  unsigned fn);

/* Add one line to the report of what could not be mapped (printf-style). */
void imp_note(struct imp_guest *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Add one line about something that was mapped but not quite the same
 * (printed as "note:", not "not mapped:"). */
void imp_caveat(struct imp_guest *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Where a disk image of the source host is here: with `dir` (vm import -d),
 * the file `name` in that folder, or NAME.raw there; without, `path` as it
 * is.  The result into `out` (PATH_MAX); -1 when it does not fit.
 */
int imp_locate(const char *dir, const char *path, char out[PATH_MAX]);

/*
 * Read a Proxmox VE guest config (/etc/pve/qemu-server/ID.conf) from
 * `text` (`len` bytes, NUL-terminated).  `file` names it in messages, `dir`
 * is vm import's -d (NULL: Proxmox's storage paths).  0, or -1 with one
 * line in `err` (the file is not such a config, or a value is wrong).
 */
int imp_read_pve(const char *text, size_t len, const char *file, const char *dir,
                 struct imp_guest *g, char *err, size_t errlen);

/* Read a libvirt domain XML (libxml2, no network, no entities expanded); as imp_read_pve(). */
int imp_read_libvirt(const char *text, size_t len, const char *file, const char *dir,
                     struct imp_guest *g, char *err, size_t errlen);

/* Sort g->disk into the boot order: listed ones first, by place; the rest after, as read. */
void imp_sort_disks(struct imp_guest *g);

#endif
