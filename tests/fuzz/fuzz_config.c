/*
 * libFuzzer target for khyve's configuration parsers (src/lib/config.c,
 * src/bus/pci_slot.c, src/dev/lpc.c): the `-k FILE` reader, -o
 * assignments, -s and -l option strings, then every value read back
 * through %(path) expansion, as boolean, and dumped.  Host-side input, but
 * a configuration file may come from anywhere: bad lines must be refused
 * with a reason, and expansion must stay bounded.
 *
 * Input: u8 mode (n%4), then text:
 *   0 the whole text is a -k file (written to a memfd, read by path)
 *   1 each line is a -o assignment (config_parse_assignment)
 *   2 each line is a -s option (pci_parse_slot_option)
 *   3 each line is a -l option (lpc_parse_option)
 * The tree starts empty for each input.
 */
#include "fuzz.h"

#include <sys/mman.h>

#include "bus/pci_slot.h"
#include "dev/lpc.h"
#include "lib/config.h"

#define MAX_LINES 64

static int file_fd;
static char file_path[64];

static void setup_once(void)
{
	file_fd = memfd_create("khyve-fuzz-config", MFD_CLOEXEC);
	if (file_fd < 0)
		abort();
	snprintf(file_path, sizeof(file_path), "/proc/self/fd/%d", file_fd);
}

/* Read every value back, expanded and as a boolean, as device models
 * would: the paths come from config_dump()'s "path=value" lines. */
static void read_back(void)
{
	char *dump = NULL, *save = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&dump, &len);
	bool b;

	if (out == NULL)
		abort();
	config_dump(out);
	fclose(out);
	for (char *line = strtok_r(dump, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');

		if (eq == NULL)
			continue;
		*eq = '\0';
		(void)config_get(line);
		(void)config_get_bool(line, false, &b);
	}
	free(dump);
}

static void each_line(char *text, int (*fn)(const char *, char *, size_t))
{
	char err[256], *save = NULL;
	unsigned n = 0;

	for (char *line = strtok_r(text, "\n", &save); line != NULL && n < MAX_LINES;
	     line = strtok_r(NULL, "\n", &save), n++)
		(void)fn(line, err, sizeof(err));
}

FUZZ_TARGET(setup_once)

static void fuzz_one(struct fz *z)
{
	uint8_t mode = fz_u8(z) % 4;
	char err[512];
	size_t len = z->n;
	char *text = malloc(len + 1);

	if (text == NULL)
		abort();
	fz_bytes(z, text, len);
	text[len] = '\0';
	config_reset();
	switch (mode) {
	case 0:
		if (ftruncate(file_fd, 0) < 0 ||
		    pwrite(file_fd, text, strlen(text), 0) != (ssize_t)strlen(text))
			abort();
		(void)config_load_file(file_path, err, sizeof(err));
		break;
	case 1:
		each_line(text, config_parse_assignment);
		break;
	case 2:
		each_line(text, pci_parse_slot_option);
		break;
	case 3:
		each_line(text, lpc_parse_option);
		break;
	}
	read_back();
	config_reset();
	free(text);
}
