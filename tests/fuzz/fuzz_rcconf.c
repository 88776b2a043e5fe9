/*
 * libFuzzer target for the rc.conf reader and writer (src/vm/rcconf.c)
 * that `vm` uses for khyve.conf, each guest's NAME.conf and templates:
 * parse, read settings back, change some, format, and parse the result
 * again.  Host-side input, but a guest folder may come from another host:
 * a file must parse or be refused with a reason, and what rcconf_format()
 * writes must read back to the same settings.
 *
 * Input: u8 number of changes (n%8); per change u8 key length (n%16) and
 * key bytes, u8 value length (n%32) and value bytes (value length 31
 * removes the key); then the file text.
 */
#include "fuzz.h"

#include "vm/rcconf.h"

struct change {
	char key[16], value[32];
	bool remove;
};

/* The formatted text reads back to the same settings, in order. */
static void check_round_trip(const struct rcconf *rc)
{
	char err[256], *text = rcconf_format(rc);
	struct rcconf *again;

	if (text == NULL)
		abort();
	again = rcconf_parse(text, "formatted", err, sizeof(err));
	if (again == NULL) {
		fprintf(stderr, "formatted text does not parse: %s\n", err);
		abort();
	}
	if (rcconf_count(again) != rcconf_count(rc))
		abort();
	for (size_t i = 0; i < rcconf_count(rc); i++)
		if (strcmp(rcconf_key_at(rc, i), rcconf_key_at(again, i)) != 0 ||
		    strcmp(rcconf_value_at(rc, i), rcconf_value_at(again, i)) != 0)
			abort();
	rcconf_free(again);
	free(text);
}

FUZZ_TARGET(fuzz_no_setup)

static void fuzz_one(struct fz *z)
{
	struct change ch[8];
	unsigned nch = fz_u8(z) % 8;
	char err[256], *text;
	struct rcconf *rc;
	size_t len;

	for (unsigned i = 0; i < nch; i++) {
		size_t kl = fz_u8(z) % 16, vl;

		fz_bytes(z, ch[i].key, kl);
		ch[i].key[kl] = '\0';
		vl = fz_u8(z) % 32;
		ch[i].remove = vl == 31;
		if (ch[i].remove)
			vl = 0;
		fz_bytes(z, ch[i].value, vl);
		ch[i].value[vl] = '\0';
	}
	len = z->n;
	text = malloc(len + 1);
	if (text == NULL)
		abort();
	fz_bytes(z, text, len);
	text[len] = '\0';
	rc = rcconf_parse(text, "fuzz.conf", err, sizeof(err));
	free(text);
	if (rc == NULL)
		return;
	for (size_t i = 0; i < rcconf_count(rc); i++) {
		const char *key = rcconf_key_at(rc, i);

		if (rcconf_get(rc, key) == NULL)
			abort();
		(void)rcconf_get_yes(rc, key);
	}
	for (unsigned i = 0; i < nch; i++) {
		const char *v = ch[i].remove ? NULL : ch[i].value;
		bool ok = rcconf_key_valid(ch[i].key) && (v == NULL || rcconf_value_valid(v));

		if ((rcconf_set(rc, ch[i].key, v) == 0) != ok)
			abort();
		if (ok && v != NULL && strcmp(rcconf_get(rc, ch[i].key), v) != 0)
			abort();
		if (ok && v == NULL && rcconf_get(rc, ch[i].key) != NULL)
			abort();
	}
	check_round_trip(rc);
	rcconf_free(rc);
}
