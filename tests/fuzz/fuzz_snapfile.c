/*
 * libFuzzer target for the state file reader (src/lib/snapfile.c): a state
 * file may come from another host or be cut or damaged on disk, so every
 * length in it is hostile.  The input is the file itself, in a memfd:
 * snapfile_verify_all() checks it, then the reader walks every section,
 * reading RAM sections with snapfile_read_ram() into a 64 KiB buffer and
 * the others in pieces (names starting with 's' are skipped unread).
 * Nothing may crash, leak, or read past a buffer; a refusal is one line.
 *
 * Input: the file bytes (seeds: tests/fuzz/gen-corpus writes a valid one).
 */
#include "fuzz.h"

#include <sys/mman.h>

#include "lib/snapfile.h"

#define RAM_LEN (64u << 10)

FUZZ_TARGET(fuzz_no_setup)

static uint8_t ram[RAM_LEN];

/* Walk every section; 0 when the whole file read without an error. */
static int read_all(int fd)
{
	char err[256], name[SNAPFILE_NAME_LEN];
	struct snapfile_reader *r = snapfile_open(fd, err, sizeof(err));
	uint8_t buf[777];
	ssize_t n;
	int rc;

	if (r == NULL)
		return -1;
	while ((rc = snapfile_next(r, name)) == 1) {
		if (strncmp(name, "ram", 3) == 0) {
			if (snapfile_read_ram(r, ram, RAM_LEN, name[3] == 'z') < 0) {
				rc = -1;
				break;
			}
			continue;
		}
		if (name[0] == 's')
			continue; /* skipped unread: snapfile_next() checks it */

		while ((n = snapfile_read(r, buf, sizeof(buf))) > 0)
			;
		if (n < 0) {
			rc = -1;
			break;
		}
	}
	if (rc != 0 && rc != -1)
		abort();
	snapfile_close(r);
	return rc;
}

static void fuzz_one(struct fz *z)
{
	int fd = memfd_create("fuzz-snapfile", 0);
	char err[256];
	int verified;

	if (fd < 0)
		abort();
	if (z->n > 0 && write(fd, z->p, z->n) != (ssize_t)z->n)
		abort();
	if (lseek(fd, 0, SEEK_SET) != 0)
		abort();
	verified = snapfile_verify_all(fd, err, sizeof(err));
	if (verified == 0 && lseek(fd, 0, SEEK_CUR) != 0)
		abort();
	if (verified != 0 && (err[0] == '\0' || strchr(err, '\n') != NULL))
		abort();
	if (lseek(fd, 0, SEEK_SET) != 0)
		abort();
	/* A verified file may still hold a RAM section of another size than
	 * the buffer, which read_ram refuses: only crashes count here. */
	(void)read_all(fd);
	close(fd);
}
