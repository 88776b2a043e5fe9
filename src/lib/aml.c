#include "lib/aml.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define AML_ZERO          0x00
#define AML_ONE           0x01
#define AML_ONES          0xff
#define AML_NAME_OP       0x08
#define AML_BYTE_PREFIX   0x0a
#define AML_WORD_PREFIX   0x0b
#define AML_DWORD_PREFIX  0x0c
#define AML_STRING_PREFIX 0x0d
#define AML_QWORD_PREFIX  0x0e
#define AML_SCOPE_OP      0x10
#define AML_BUFFER_OP     0x11
#define AML_PACKAGE_OP    0x12
#define AML_DUAL_NAME     0x2e
#define AML_MULTI_NAME    0x2f
#define AML_EXT_OP        0x5b
#define AML_DEVICE_OP     0x82
#define AML_ROOT_CHAR     '\\'
#define AML_PARENT_CHAR   '^'

#define PKGLEN_RESERVE    4 /* the longest PkgLength encoding */

/* Large resource descriptors / small ones (ACPI 6.4 sections 6.4.2, 6.4.3). */
#define RES_IRQ_NOFLAGS 0x22
#define RES_IO          0x47
#define RES_END_TAG     0x79
#define RES_MEM32_FIXED 0x86

void aml_init(struct aml *a)
{
	memset(a, 0, sizeof(*a));
}

void aml_free(struct aml *a)
{
	free(a->data);
	memset(a, 0, sizeof(*a));
}

static bool reserve(struct aml *a, size_t n)
{
	size_t cap;
	uint8_t *nd;

	if (a->failed)
		return false;
	if (a->len + n <= a->cap)
		return true;
	cap = a->cap ? a->cap * 2 : 256;
	while (cap < a->len + n)
		cap *= 2;
	nd = realloc(a->data, cap);
	if (nd == NULL) {
		a->failed = true;
		return false;
	}
	a->data = nd;
	a->cap = cap;
	return true;
}

void aml_bytes(struct aml *a, const void *p, size_t n)
{
	if (!reserve(a, n))
		return;
	memcpy(a->data + a->len, p, n);
	a->len += n;
}

static void aml_byte(struct aml *a, uint8_t b)
{
	aml_bytes(a, &b, 1);
}

static void aml_le(struct aml *a, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		aml_byte(a, (uint8_t)(v >> (8 * i)));
}

/* One NameSeg: up to four of [A-Z0-9_], first not a digit, '_'-padded. */
static const char *name_seg(struct aml *a, const char *p)
{
	char seg[4] = {'_', '_', '_', '_'};
	size_t n = 0;

	while (*p != '\0' && *p != '.') {
		char c = *p++;

		if (n == 4 ||
		    !(isupper((unsigned char)c) || isdigit((unsigned char)c) || c == '_') ||
		    (n == 0 && isdigit((unsigned char)c))) {
			a->failed = true;
			return p;
		}
		seg[n++] = c;
	}
	if (n == 0)
		a->failed = true;
	aml_bytes(a, seg, 4);
	return *p == '.' ? p + 1 : p;
}

void aml_name(struct aml *a, const char *path)
{
	size_t nsegs = 1;

	while (*path == AML_ROOT_CHAR || *path == AML_PARENT_CHAR)
		aml_byte(a, (uint8_t)*path++);
	for (const char *p = path; *p != '\0'; p++)
		nsegs += *p == '.';
	if (*path == '\0') {
		aml_byte(a, 0x00); /* NullName: the root itself */
		return;
	}
	if (nsegs > 255) {
		a->failed = true;
		return;
	}
	if (nsegs == 2)
		aml_byte(a, AML_DUAL_NAME);
	else if (nsegs > 2) {
		aml_byte(a, AML_MULTI_NAME);
		aml_byte(a, (uint8_t)nsegs);
	}
	for (size_t i = 0; i < nsegs && !a->failed; i++)
		path = name_seg(a, path);
}

void aml_integer(struct aml *a, uint64_t v)
{
	if (v == 0)
		aml_byte(a, AML_ZERO);
	else if (v == 1)
		aml_byte(a, AML_ONE);
	else if (v <= 0xff) {
		aml_byte(a, AML_BYTE_PREFIX);
		aml_le(a, v, 1);
	} else if (v <= 0xffff) {
		aml_byte(a, AML_WORD_PREFIX);
		aml_le(a, v, 2);
	} else if (v <= 0xffffffffull) {
		aml_byte(a, AML_DWORD_PREFIX);
		aml_le(a, v, 4);
	} else {
		aml_byte(a, AML_QWORD_PREFIX);
		aml_le(a, v, 8);
	}
}

void aml_string(struct aml *a, const char *s)
{
	aml_byte(a, AML_STRING_PREFIX);
	aml_bytes(a, s, strlen(s) + 1);
}

/* "PNP0501": three letters packed 5 bits each, then four hex digits;
 * stored so that the bytes read in order as the ID (big-endian). */
uint32_t aml_eisaid_value(const char *id)
{
	uint32_t v;

	if (strlen(id) != 7)
		return 0;
	v = ((uint32_t)(id[0] - 0x40) << 26) | ((uint32_t)(id[1] - 0x40) << 21) |
	    ((uint32_t)(id[2] - 0x40) << 16) | (uint32_t)strtoul(id + 3, NULL, 16);
	return __builtin_bswap32(v);
}

void aml_eisaid(struct aml *a, const char *id)
{
	aml_integer(a, aml_eisaid_value(id));
}

size_t aml_open(struct aml *a, const uint8_t *opcode, size_t oplen)
{
	static const uint8_t zeros[PKGLEN_RESERVE];
	size_t mark;

	aml_bytes(a, opcode, oplen);
	mark = a->len;
	aml_bytes(a, zeros, PKGLEN_RESERVE);
	return mark;
}

/* PkgLength counts its own bytes plus everything after it up to the close;
 * encode it in 1-4 bytes and drop the reserve we did not need. */
void aml_close(struct aml *a, size_t mark)
{
	size_t body, total, nbytes;
	uint8_t enc[PKGLEN_RESERVE];

	if (a->failed)
		return;
	body = a->len - mark - PKGLEN_RESERVE;
	nbytes = body + 1 < 0x40 ? 1 : body + 2 < 0x1000 ? 2 : body + 3 < 0x100000 ? 3 : 4;
	total = body + nbytes;
	if (nbytes == 1) {
		enc[0] = (uint8_t)total;
	} else {
		enc[0] = (uint8_t)(((nbytes - 1) << 6) | (total & 0x0f));
		for (size_t i = 1; i < nbytes; i++)
			enc[i] = (uint8_t)(total >> (4 + 8 * (i - 1)));
	}
	memmove(a->data + mark + nbytes, a->data + mark + PKGLEN_RESERVE, body);
	memcpy(a->data + mark, enc, nbytes);
	a->len = mark + nbytes + body;
}

size_t aml_scope(struct aml *a, const char *path)
{
	static const uint8_t op[] = {AML_SCOPE_OP};
	size_t mark = aml_open(a, op, sizeof(op));

	aml_name(a, path);
	return mark;
}

size_t aml_device(struct aml *a, const char *name)
{
	static const uint8_t op[] = {AML_EXT_OP, AML_DEVICE_OP};
	size_t mark = aml_open(a, op, sizeof(op));

	aml_name(a, name);
	return mark;
}

void aml_name_decl(struct aml *a, const char *name)
{
	aml_byte(a, AML_NAME_OP);
	aml_name(a, name);
}

size_t aml_package(struct aml *a, uint8_t nelems)
{
	static const uint8_t op[] = {AML_PACKAGE_OP};
	size_t mark = aml_open(a, op, sizeof(op));

	aml_byte(a, nelems);
	return mark;
}

/* A Buffer's size operand comes before its bytes, but we only know it at
 * the end; reserve a DWord-encoded size and patch it in aml_resource_end(). */
size_t aml_resource_template(struct aml *a)
{
	static const uint8_t op[] = {AML_BUFFER_OP};
	size_t mark = aml_open(a, op, sizeof(op));

	aml_byte(a, AML_DWORD_PREFIX);
	aml_le(a, 0, 4);
	return mark;
}

void aml_res_io(struct aml *a, uint16_t base, uint8_t len)
{
	aml_byte(a, RES_IO);
	aml_byte(a, 0x01);  /* 16-bit decode */
	aml_le(a, base, 2); /* minimum */
	aml_le(a, base, 2); /* maximum */
	aml_byte(a, 0x01);  /* alignment */
	aml_byte(a, len);
}

void aml_res_irq(struct aml *a, uint8_t irq)
{
	aml_byte(a, RES_IRQ_NOFLAGS);
	aml_le(a, 1u << irq, 2);
}

void aml_res_mem32_fixed(struct aml *a, uint32_t base, uint32_t len, bool writable)
{
	aml_byte(a, RES_MEM32_FIXED);
	aml_le(a, 9, 2); /* length of the rest */
	aml_byte(a, writable ? 1 : 0);
	aml_le(a, base, 4);
	aml_le(a, len, 4);
}

#define RES_DWORD_ADDR            0x87
#define RES_WORD_ADDR             0x88
#define RES_QWORD_ADDR            0x8a
#define ADDR_TYPE_MEM             0
#define ADDR_TYPE_IO              1
#define ADDR_TYPE_BUS             2
#define ADDR_FLAGS_FIXED_PRODUCER 0x0c /* min and max fixed, produced */

/* One address space descriptor with fields of `w` bytes each:
 * granularity, min, max, translation offset, length. */
static void res_addr(struct aml *a, uint8_t tag, unsigned w, uint8_t type, uint8_t tflags,
                     uint64_t min, uint64_t max)
{
	aml_byte(a, tag);
	aml_le(a, 3 + 5 * w, 2);
	aml_byte(a, type);
	aml_byte(a, ADDR_FLAGS_FIXED_PRODUCER);
	aml_byte(a, tflags);
	aml_le(a, 0, w); /* granularity */
	aml_le(a, min, w);
	aml_le(a, max, w);
	aml_le(a, 0, w); /* translation */
	aml_le(a, max - min + 1, w);
}

void aml_res_word_bus(struct aml *a, uint16_t min, uint16_t max)
{
	res_addr(a, RES_WORD_ADDR, 2, ADDR_TYPE_BUS, 0, min, max);
}

void aml_res_word_io(struct aml *a, uint16_t min, uint16_t max)
{
	res_addr(a, RES_WORD_ADDR, 2, ADDR_TYPE_IO, 0x03 /* entire range */, min, max);
}

void aml_res_dword_mem(struct aml *a, uint32_t min, uint32_t max)
{
	res_addr(a, RES_DWORD_ADDR, 4, ADDR_TYPE_MEM, 0x01 /* read-write */, min, max);
}

void aml_res_qword_mem(struct aml *a, uint64_t min, uint64_t max)
{
	res_addr(a, RES_QWORD_ADDR, 8, ADDR_TYPE_MEM, 0x01, min, max);
}

void aml_resource_end(struct aml *a, size_t mark)
{
	size_t size_at = mark + PKGLEN_RESERVE + 1; /* after the DWord prefix */
	size_t size;

	aml_byte(a, RES_END_TAG);
	aml_byte(a, 0x00); /* checksum 0: "treat as correct" */
	if (a->failed)
		return;
	size = a->len - size_at - 4;
	for (unsigned i = 0; i < 4; i++)
		a->data[size_at + i] = (uint8_t)(size >> (8 * i));
	aml_close(a, mark);
}

void aml_isa_device(struct aml *a, const char *name, const char *hid, unsigned uid, uint16_t port,
                    uint8_t len, int irq)
{
	size_t dev = aml_device(a, name), res;

	aml_name_decl(a, "_HID");
	aml_eisaid(a, hid);
	aml_name_decl(a, "_UID");
	aml_integer(a, uid);
	aml_name_decl(a, "_CRS");
	res = aml_resource_template(a);
	aml_res_io(a, port, len);
	if (irq >= 0)
		aml_res_irq(a, (uint8_t)irq);
	aml_resource_end(a, res);
	aml_close(a, dev);
}
