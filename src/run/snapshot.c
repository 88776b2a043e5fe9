/*
 * Checkpoint, suspend and restore through a state file; see snapshot.h and
 * docs/design/snapshots.md.  The order of sections is fixed: "vm" first
 * (the in-kernel irqchip must hold its state before a device re-drives a
 * line), then the vCPUs, RAM, and the participants in registration order.
 */
#include "run/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/machine.h"
#include "core/snapshot.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/sbuf.h"
#include "lib/snapfile.h"
#include "vmm/vcpu.h"
#include "vmm/vmstate.h"

#define SNAPSHOT_PAUSE_MS 1000u
#define SNAPSHOT_ERRLEN   384

/* ---- the configuration a state file names ---- */

/*
 * Keys that belong to this host or this run, not to the machine the guest
 * sees: a restore may change them (another serial back end, another API
 * socket, a VNC server on another port, another tap, another swtpm whose
 * state the restore loads: a migration target on the same host cannot open
 * the source's).  fnmatch(3) patterns.
 */
static const char *const host_local_keys[] = {
    "name",       "restore.*", "migration.*",       "config.*",          "sandbox.*",
    "api.*",      "user.*",    "lpc.com[1-4].path", "lpc.debugcon.path", "lpc.pc-testdev-debugcon",
    "boot_probe", "pci.*.tcp", "pci.*.rfb",         "pci.*.unix",        "pci.*.password",
    "pci.*.wait", "pci.*.vnc", "pci.*.backend",     "lpc.tpm.path",      "lpc.tpm.ctrl",
};

static bool host_local(const char *key)
{
	for (size_t i = 0; i < sizeof(host_local_keys) / sizeof(host_local_keys[0]); i++)
		if (fnmatch(host_local_keys[i], key, 0) == 0)
			return true;
	return false;
}

static int cmp_lines(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Split `text` (modified) into its lines; a malloc()ed array, *n lines. */
static char **split_lines(char *text, size_t *n)
{
	size_t cap = 64;
	char **v = malloc(cap * sizeof(*v)), *save = NULL;

	*n = 0;
	for (char *l = strtok_r(text, "\n", &save); v != NULL && l != NULL;
	     l = strtok_r(NULL, "\n", &save)) {
		if (*n == cap) {
			char **w = realloc(v, (cap *= 2) * sizeof(*v));

			if (w == NULL) {
				free(v);
				return NULL;
			}
			v = w;
		}
		v[(*n)++] = l;
	}
	return v;
}

char *snapshot_config_text(void)
{
	char *raw = NULL, *out = NULL, **lines;
	size_t rawlen = 0, n = 0, used = 0;
	FILE *f = open_memstream(&raw, &rawlen);

	if (f == NULL)
		return NULL;
	config_dump(f);
	if (fclose(f) != 0 || raw == NULL)
		return NULL;
	lines = split_lines(raw, &n);
	out = lines != NULL ? malloc(rawlen + 1) : NULL;
	if (out != NULL) {
		qsort(lines, n, sizeof(*lines), cmp_lines);
		for (size_t i = 0; i < n; i++) {
			size_t l = strlen(lines[i]);

			if (strncmp(lines[i], "restore.", 8) == 0)
				continue;
			memcpy(out + used, lines[i], l);
			used += l;
			out[used++] = '\n';
		}
		out[used] = '\0';
	}
	free(lines);
	free(raw);
	return out;
}

/* The next line of `v` (n lines) at or after *i whose key matters. */
static const char *next_relevant(char **v, size_t n, size_t *i)
{
	for (; *i < n; (*i)++) {
		char key[256];
		size_t klen = strcspn(v[*i], "=");

		snprintf(key, sizeof(key), "%.*s", (int)(klen < 255 ? klen : 255), v[*i]);
		if (!host_local(key))
			return v[*i];
	}
	return NULL;
}

static int key_order(const char *a, const char *b)
{
	size_t la = strcspn(a, "="), lb = strcspn(b, "=");
	int c = strncmp(a, b, la < lb ? la : lb);

	return c != 0 ? c : (la > lb) - (la < lb);
}

static void describe_difference(const char *was, const char *is, char *err, size_t errlen)
{
	if (was != NULL && is != NULL && key_order(was, is) == 0)
		snprintf(err, errlen, "the state file was made with %s, this khyve has %s", was,
		         is);
	else if (was != NULL && (is == NULL || key_order(was, is) < 0))
		snprintf(err, errlen, "the state file was made with %s, this khyve has no %.*s",
		         was, (int)strcspn(was, "="), was);
	else
		snprintf(err, errlen, "this khyve has %s, the state file was made without it", is);
}

/* Both texts are sorted key=value lines (snapshot_config_text()). */
static int compare_lines(char **a, size_t na, char **b, size_t nb, char *err, size_t errlen)
{
	size_t i = 0, j = 0;

	for (;;) {
		const char *x = next_relevant(a, na, &i), *y = next_relevant(b, nb, &j);

		if (x == NULL && y == NULL)
			return 0;
		if (x == NULL || y == NULL || strcmp(x, y) != 0) {
			describe_difference(x, y, err, errlen);
			return -1;
		}
		i++;
		j++;
	}
}

int snapshot_config_compare(const char *saved, const char *now, char *err, size_t errlen)
{
	char *a = strdup(saved), *b = strdup(now), **va = NULL, **vb = NULL;
	size_t na = 0, nb = 0;
	int rc = -1;

	if (a != NULL && b != NULL) {
		va = split_lines(a, &na);
		vb = split_lines(b, &nb);
	}
	if (va == NULL || vb == NULL)
		snprintf(err, errlen, "out of memory comparing the configuration");
	else {
		/* A file from another tool may not be sorted: sort both. */
		qsort(va, na, sizeof(*va), cmp_lines);
		qsort(vb, nb, sizeof(*vb), cmp_lines);
		rc = compare_lines(va, na, vb, nb, err, errlen);
	}
	free(va);
	free(vb);
	free(a);
	free(b);
	return rc;
}

/* ---- save ---- */

int snapshot_check(struct machine *m, char *err, size_t errlen)
{
	return machine_state_saveable(m, err, errlen);
}

static int write_section(struct snapfile_writer *w, const char *name, const struct sbuf *b)
{
	if (snapfile_section_begin(w, name) < 0 || snapfile_write(w, b->data, b->len) < 0 ||
	    snapfile_section_end(w) < 0)
		return -1;
	return 0;
}

static int save_kvm_sections(struct machine *m, struct snapfile_writer *w, struct sbuf *b,
                             char *err, size_t errlen)
{
	char name[SNAPFILE_NAME_LEN];

	sbuf_free(b);
	if (vm_state_save(&m->vm, b, err, errlen) < 0 || b->failed || write_section(w, "vm", b) < 0)
		return -1;
	for (unsigned i = 0; i < m->vm.ncpus; i++) {
		sbuf_free(b);
		snprintf(name, sizeof(name), "vcpu.%u", i);
		if (vcpu_state_save(m->vm.vcpus[i], b, err, errlen) < 0 || b->failed ||
		    write_section(w, name, b) < 0)
			return -1;
	}
	return 0;
}

/* /proc/self/pagemap, opened before the sandbox (snapshot_prepare()); -1
 * when there is none, and then every page of RAM is read on a save. */
static int pagemap_fd = -1;

#define PAGEMAP_PRESENT (1ull << 63)
#define PAGEMAP_SWAPPED (1ull << 62)
#define PAGEMAP_BATCH   512 /* entries a pread() takes: 4 KiB */

void snapshot_prepare(void)
{
	if (pagemap_fd < 0 && sysconf(_SC_PAGESIZE) == (long)SNAPSHOT_PAGE)
		pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
}

uint64_t *snapshot_pages_in_use(const struct gmem_region *r)
{
	size_t pages = r->size / SNAPSHOT_PAGE, i = 0;
	off_t first = (off_t)((uintptr_t)r->hva / SNAPSHOT_PAGE) * 8;
	uint64_t entries[PAGEMAP_BATCH], *map;

	if (pagemap_fd < 0 || !(map = calloc((pages + 63) / 64, sizeof(*map))))
		return NULL;
	while (i < pages) {
		size_t want = pages - i < PAGEMAP_BATCH ? pages - i : PAGEMAP_BATCH;
		ssize_t got = pread(pagemap_fd, entries, want * 8, first + (off_t)i * 8);

		if (got <= 0 || got % 8 != 0) {
			free(map);
			return NULL;
		}
		for (size_t k = 0; k < (size_t)got / 8; k++, i++)
			if (entries[k] & (PAGEMAP_PRESENT | PAGEMAP_SWAPPED))
				map[i / 64] |= 1ull << (i % 64);
	}
	return map;
}

static int save_ram(struct machine *m, struct snapfile_writer *w, uint64_t *const *dirty)
{
	char name[SNAPFILE_NAME_LEN];
	unsigned n = 0;

	for (unsigned i = 0; i < m->vm.mem.nregions; i++) {
		const struct gmem_region *r = &m->vm.mem.region[i];
		int rc;

		if (r->readonly)
			continue;
		snprintf(name, sizeof(name), "ram.%u", n++);
		if (dirty != NULL)
			rc = snapfile_write_ram_pages(w, name, r->hva, r->size, SNAPSHOT_PAGE,
			                              dirty[i]);
		else {
			uint64_t *in_use = snapshot_pages_in_use(r);

			rc = snapfile_write_ram_some(w, name, r->hva, r->size, SNAPSHOT_PAGE,
			                             in_use);
			free(in_use);
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int save_participants(struct machine *m, struct snapfile_writer *w, struct sbuf *b,
                             char *err, size_t errlen)
{
	for (unsigned i = 0; i < m->nstates; i++)
		if (machine_state_save_one(m, i, b, err, errlen) < 0 ||
		    write_section(w, m->states[i].name, b) < 0)
			return -1;
	return 0;
}

int snapshot_write_sections(struct machine *m, struct snapfile_writer *w, uint64_t *const *dirty,
                            char *err, size_t errlen)
{
	struct sbuf b = {0};
	int rc = -1;

	err[0] = '\0';
	if (save_kvm_sections(m, w, &b, err, errlen) == 0 && save_ram(m, w, dirty) == 0 &&
	    save_participants(m, w, &b, err, errlen) == 0)
		rc = 0;
	if (rc < 0 && err[0] == '\0')
		snprintf(err, errlen, "%s", snapfile_writer_error(w));
	sbuf_free(&b);
	return rc;
}

/* Every section into `fd`; the machine is paused and quiesced. */
static int write_state(struct machine *m, int fd, char *err, size_t errlen)
{
	char *config = snapshot_config_text();
	struct snapfile_writer *w;

	if (config == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	w = snapfile_create(fd, SNAPSHOT_CREATOR, config, err, errlen);
	free(config);
	if (w == NULL)
		return -1;
	if (snapshot_write_sections(m, w, NULL, err, errlen) < 0) {
		snapfile_abort(w);
		return -1;
	}
	return snapfile_finish(w, err, errlen);
}

static int pause_for_save(struct machine *m, bool *we_paused, char *err, size_t errlen)
{
	int rc = machine_pause(m, SNAPSHOT_PAUSE_MS);

	*we_paused = rc == 0;
	if (rc == 0 || rc == -EALREADY)
		return 0;
	snprintf(err, errlen, "%s",
	         rc == -ETIMEDOUT ? "the vCPUs did not stop within 1 s"
	                          : "the machine is starting or stopping");
	return -1;
}

int snapshot_save(struct machine *m, int fd, bool stay_paused, char *err, size_t errlen)
{
	bool we_paused;
	int rc;

	if (snapshot_check(m, err, errlen) < 0 || pause_for_save(m, &we_paused, err, errlen) < 0)
		return -1;
	/* A failed quiesce has undone itself. */
	rc = machine_state_quiesce(m, err, errlen);
	if (rc == 0) {
		rc = write_state(m, fd, err, errlen);
		if (rc == 0 && stay_paused)
			return 0;
		machine_state_unquiesce(m);
	}
	if (we_paused)
		machine_resume(m);
	return rc;
}

/* ---- restore ---- */

/* The current section's whole payload (at most SBUF_MAX bytes). */
static int read_payload(struct snapfile_reader *r, const char *name, struct sbuf *b, char *err,
                        size_t errlen)
{
	uint8_t chunk[16384];
	ssize_t got;

	sbuf_free(b);
	while ((got = snapfile_read(r, chunk, sizeof(chunk))) > 0) {
		sbuf_put_bytes(b, chunk, (size_t)got);
		if (b->failed) {
			snprintf(err, errlen, "section %s is too large", name);
			return -1;
		}
	}
	if (got < 0) {
		snprintf(err, errlen, "%s", snapfile_reader_error(r));
		return -1;
	}
	return 0;
}

struct restore_walk {
	struct machine *m;
	struct snapfile_reader *r;
	struct sbuf buf;
	unsigned vcpus, rams, states; /* sections seen of each kind */
	unsigned region;              /* next gmem region to look at */
	bool vm_seen;
	bool live; /* a migration stream: RAM rounds first, RAM already there */
};

static int restore_vm(struct restore_walk *rw, char *err, size_t errlen)
{
	struct sbuf_reader in;

	if (rw->vm_seen || rw->vcpus || rw->rams || rw->states) {
		snprintf(err, errlen, "section vm out of order");
		return -1;
	}
	rw->vm_seen = true;
	if (read_payload(rw->r, "vm", &rw->buf, err, errlen) < 0)
		return -1;
	sbuf_reader_init(&in, rw->buf.data, rw->buf.len);
	if (vm_state_restore(&rw->m->vm, &in, err, errlen) < 0)
		return -1;
	return sbuf_reader_done(&in, "vm", err, errlen);
}

static int restore_vcpu(struct restore_walk *rw, const char *name, char *err, size_t errlen)
{
	struct sbuf_reader in;
	char want[SNAPFILE_NAME_LEN];

	snprintf(want, sizeof(want), "vcpu.%u", rw->vcpus);
	if (!rw->vm_seen || rw->rams || rw->states || strcmp(name, want) != 0 ||
	    rw->vcpus >= rw->m->vm.ncpus) {
		snprintf(err, errlen, "section %s out of order or one too many", name);
		return -1;
	}
	if (read_payload(rw->r, name, &rw->buf, err, errlen) < 0)
		return -1;
	sbuf_reader_init(&in, rw->buf.data, rw->buf.len);
	if (vcpu_state_restore(rw->m->vm.vcpus[rw->vcpus], &in, err, errlen) < 0)
		return -1;
	rw->vcpus++;
	return sbuf_reader_done(&in, name, err, errlen);
}

/* The next writable region after rw->region, or NULL. */
static struct gmem_region *next_ram_region(struct restore_walk *rw)
{
	struct guest_mem *gm = &rw->m->vm.mem;

	while (rw->region < gm->nregions && gm->region[rw->region].readonly)
		rw->region++;
	return rw->region < gm->nregions ? &gm->region[rw->region++] : NULL;
}

static int restore_ram(struct restore_walk *rw, const char *name, char *err, size_t errlen)
{
	struct gmem_region *reg;
	char want[SNAPFILE_NAME_LEN];

	snprintf(want, sizeof(want), "ram.%u", rw->rams);
	reg = strcmp(name, want) == 0 && rw->vcpus == rw->m->vm.ncpus && !rw->states
	          ? next_ram_region(rw)
	          : NULL;
	if (reg == NULL) {
		snprintf(err, errlen, "section %s out of order or one too many", name);
		return -1;
	}
	/* What the loaders wrote goes: the pages the file leaves out are zero
	 * pages of the saved guest, and fresh anonymous memory reads as zero
	 * without being touched.  A stream's ram.N holds the last dirty pages
	 * over what its rounds brought (snapshot_clear_ram() came first). */
	if (!rw->live && madvise(reg->hva, reg->size, MADV_DONTNEED) < 0) {
		snprintf(err, errlen, "cannot clear guest RAM: %s", strerror(errno));
		return -1;
	}
	if (snapfile_read_ram(rw->r, reg->hva, reg->size, false) < 0) {
		snprintf(err, errlen, "%s: %s", name, snapfile_reader_error(rw->r));
		return -1;
	}
	rw->rams++;
	return 0;
}

/* The `n`th writable region (ram.N's), or NULL. */
static struct gmem_region *writable_region(struct machine *m, unsigned long n)
{
	for (unsigned i = 0; i < m->vm.mem.nregions; i++)
		if (!m->vm.mem.region[i].readonly && n-- == 0)
			return &m->vm.mem.region[i];
	return NULL;
}

/* A migration's round of RAM ("ram.pre.N"): before any other section. */
static int restore_ram_round(struct restore_walk *rw, const char *name, char *err, size_t errlen)
{
	const char *digits = name + strlen(SNAPSHOT_RAM_ROUND);
	struct gmem_region *reg = NULL;
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(digits, &end, 10);
	if (rw->live && !rw->vm_seen && *digits >= '0' && *digits <= '9' && *end == '\0' &&
	    errno == 0)
		reg = writable_region(rw->m, n);
	if (reg == NULL) {
		snprintf(err, errlen, "section %s out of order or for no RAM region", name);
		return -1;
	}
	if (snapfile_read_ram(rw->r, reg->hva, reg->size, false) < 0) {
		snprintf(err, errlen, "%s: %s", name, snapfile_reader_error(rw->r));
		return -1;
	}
	return 0;
}

static int restore_participant(struct restore_walk *rw, const char *name, char *err, size_t errlen)
{
	struct machine *m = rw->m;

	if (rw->states >= m->nstates || strcmp(name, m->states[rw->states].name) != 0) {
		if (rw->states < m->nstates)
			snprintf(err, errlen, "the state file has %s where this khyve has %s", name,
			         m->states[rw->states].name);
		else
			snprintf(err, errlen, "the state file has %s, which this khyve lacks",
			         name);
		return -1;
	}
	if (read_payload(rw->r, name, &rw->buf, err, errlen) < 0 ||
	    machine_state_restore_one(m, rw->states, rw->buf.data, rw->buf.len, err, errlen) < 0)
		return -1;
	rw->states++;
	return 0;
}

static int restore_section(struct restore_walk *rw, const char *name, char *err, size_t errlen)
{
	if (strncmp(name, SNAPSHOT_RAM_ROUND, strlen(SNAPSHOT_RAM_ROUND)) == 0)
		return restore_ram_round(rw, name, err, errlen);
	if (strcmp(name, "vm") == 0)
		return restore_vm(rw, err, errlen);
	if (strncmp(name, "vcpu.", 5) == 0)
		return restore_vcpu(rw, name, err, errlen);
	if (strncmp(name, "ram.", 4) == 0)
		return restore_ram(rw, name, err, errlen);
	if (rw->rams == 0) {
		snprintf(err, errlen, "section %s before guest RAM", name);
		return -1;
	}
	return restore_participant(rw, name, err, errlen);
}

/* After the trailer: nothing this machine has may be missing. */
static int restore_complete(struct restore_walk *rw, char *err, size_t errlen)
{
	struct machine *m = rw->m;

	if (!rw->vm_seen || rw->vcpus != m->vm.ncpus || next_ram_region(rw) != NULL ||
	    rw->states != m->nstates) {
		if (rw->states < m->nstates && rw->vm_seen && rw->vcpus == m->vm.ncpus)
			snprintf(err, errlen, "the state file lacks %s",
			         m->states[rw->states].name);
		else
			snprintf(err, errlen,
			         "the state file has %u vCPUs and %u RAM regions; this khyve "
			         "has %u vCPUs",
			         rw->vcpus, rw->rams, m->vm.ncpus);
		return -1;
	}
	return vm_state_restore_finish(&m->vm, err, errlen);
}

static int restore_sections(struct restore_walk *rw, char *err, size_t errlen)
{
	char name[SNAPFILE_NAME_LEN];
	int more;

	while ((more = snapfile_next(rw->r, name)) > 0)
		if (restore_section(rw, name, err, errlen) < 0)
			return -1;
	if (more < 0) {
		snprintf(err, errlen, "%s", snapfile_reader_error(rw->r));
		return -1;
	}
	return restore_complete(rw, err, errlen);
}

int snapshot_check_config(struct snapfile_reader *r, char *err, size_t errlen)
{
	char *now = snapshot_config_text();
	int rc;

	if (now == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = snapshot_config_compare(snapfile_config(r, NULL), now, err, errlen);
	free(now);
	return rc;
}

int snapshot_restore(struct machine *m, int fd, char *err, size_t errlen)
{
	struct restore_walk rw = {.m = m};
	int rc = -1;

	/* One pass: the reader checks each section's hash before it hands
	 * over the section's last byte and the trailer's at the end, so a
	 * corrupt or truncated file fails before the guest ever runs (khyve
	 * then exits); what was loaded until then is thrown away with the
	 * process.  A first pass over the whole file to check it would read
	 * and hash every byte of RAM twice. */
	rw.r = snapfile_open(fd, err, errlen);
	if (rw.r == NULL)
		return -1;
	if (snapshot_check_config(rw.r, err, errlen) == 0)
		rc = restore_sections(&rw, err, errlen);
	snapfile_close(rw.r);
	sbuf_free(&rw.buf);
	return rc;
}

int snapshot_load_stream(struct machine *m, struct snapfile_reader *r, char *err, size_t errlen)
{
	struct restore_walk rw = {.m = m, .r = r, .live = true};
	int rc = restore_sections(&rw, err, errlen);

	sbuf_free(&rw.buf);
	return rc;
}

int snapshot_clear_ram(struct machine *m, char *err, size_t errlen)
{
	for (unsigned i = 0; i < m->vm.mem.nregions; i++) {
		const struct gmem_region *reg = &m->vm.mem.region[i];

		if (!reg->readonly && reg->size > 0 &&
		    madvise(reg->hva, reg->size, MADV_DONTNEED) < 0) {
			snprintf(err, errlen, "cannot clear guest RAM: %s", strerror(errno));
			return -1;
		}
	}
	return 0;
}
