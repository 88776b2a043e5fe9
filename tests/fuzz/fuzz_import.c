/*
 * libFuzzer target for vm import's readers (src/vm/import_pve.c: a
 * Proxmox VE qm.conf; src/vm/import_libvirt.c: a libvirt domain XML
 * through libxml2).  The file comes from another host: it must be read
 * or refused with a reason, and what is read must be within the limits
 * cmd_import.c relies on (disk and NIC counts, formats vm converts, boot
 * places, NUL-terminated strings).
 *
 * Input: u8 (bit 0: libvirt XML, else Proxmox), then the file's text.
 * No -d folder: no file is looked at.
 */
#include "fuzz.h"

#include "vm/import.h"
#include "vm/switch.h"

/* Stand-ins for vm.c's and net.c's checks (those files pull in all of vm). */
bool vm_name_valid(const char *name)
{
	size_t len = strlen(name);

	return len > 0 && len <= VM_NAME_MAX;
}

bool vm_switch_name_valid(const char *name)
{
	size_t len = strlen(name);

	return len > 0 && len <= 12;
}

static void check_string(const char *s, size_t cap)
{
	if (memchr(s, '\0', cap) == NULL)
		abort();
}

static void check_guest(const struct imp_guest *g)
{
	if (g->ndisk > IMP_MAX_DISKS || g->nnic > IMP_MAX_NICS || g->nnote > IMP_MAX_NOTES)
		abort();
	if (g->cpus < 1 || g->cpus > IMP_MAX_VCPUS || g->memory_mib < 16)
		abort();
	if (g->sockets &&
	    (unsigned long long)g->sockets * g->cores * (g->threads ? g->threads : 1) != g->cpus)
		abort();
	for (size_t i = 0; i < g->ndisk; i++) {
		const struct imp_disk *d = &g->disk[i];

		check_string(d->path, sizeof(d->path));
		check_string(d->id, sizeof(d->id));
		if (strcmp(d->format, "raw") && strcmp(d->format, "qcow2") &&
		    strcmp(d->format, "vmdk"))
			abort();
		/* Listed disks first, in order (imp_sort_disks). */
		if (i > 0 && d->boot && (!g->disk[i - 1].boot || g->disk[i - 1].boot > d->boot))
			abort();
	}
	for (size_t i = 0; i < g->nnic; i++) {
		check_string(g->nic[i].mac, sizeof(g->nic[i].mac));
		check_string(g->nic[i].sw, sizeof(g->nic[i].sw));
		if (strcmp(g->nic[i].type, "virtio-net") && strcmp(g->nic[i].type, "e1000"))
			abort();
	}
	for (size_t i = 0; i < g->nnote; i++)
		check_string(g->note[i], IMP_NOTE_LEN);
}

FUZZ_TARGET(fuzz_no_setup)

static void fuzz_one(struct fz *z)
{
	bool xml = fz_u8(z) & 1;
	struct imp_guest *g = calloc(1, sizeof(*g));
	size_t len = z->n;
	char *text = malloc(len + 1), err[1024] = "";
	int rc;

	if (!g || !text)
		abort();
	fz_bytes(z, text, len);
	text[len] = '\0';
	rc = xml ? imp_read_libvirt(text, len, "fuzz.xml", NULL, g, err, sizeof(err))
	         : imp_read_pve(text, len, "fuzz.conf", NULL, g, err, sizeof(err));
	if (rc == 0)
		check_guest(g);
	else if (!err[0])
		abort(); /* a refusal says why (vm_error() prints it escaped, on one line) */
	free(text);
	free(g);
}
