/*
 * A small encoder for ACPI Machine Language (ACPI 6.4 chapter 20), enough
 * for khyve's DSDT: scopes, devices, names, integers, strings, packages,
 * EISA IDs and resource templates.  Bytes go into a growing buffer;
 * aml_open()/aml_close() bracket anything that carries a PkgLength.
 */
#ifndef KHYVE_AML_H
#define KHYVE_AML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct aml {
	uint8_t *data;
	size_t len;
	size_t cap;
	bool failed; /* out of memory or a malformed name: the result is unusable */
};

void aml_init(struct aml *a);
void aml_free(struct aml *a);

/* Raw bytes. */
void aml_bytes(struct aml *a, const void *p, size_t n);

/* NameString: "\\_SB_", "\\_SB.PCI0", "COM1", "^FOO"; segments shorter than
 * four characters are padded with '_'. */
void aml_name(struct aml *a, const char *path);

/* Integer constant in the smallest encoding (Zero, One, Byte..QWord). */
void aml_integer(struct aml *a, uint64_t v);

/* String constant. */
void aml_string(struct aml *a, const char *s);

/* EISAID("PNP0501") as its compressed 32-bit integer. */
void aml_eisaid(struct aml *a, const char *id);
uint32_t aml_eisaid_value(const char *id);

/*
 * Start an object with a PkgLength (Scope, Device, Package, Buffer, Method):
 * write its opcode bytes, reserve room for the length and return a mark for
 * aml_close(), which fills the length in.
 */
size_t aml_open(struct aml *a, const uint8_t *opcode, size_t oplen);
void aml_close(struct aml *a, size_t mark);

/* Convenience: Scope(path){, Device(name){, Name(name, ...). */
size_t aml_scope(struct aml *a, const char *path);
size_t aml_device(struct aml *a, const char *name);
void aml_name_decl(struct aml *a, const char *name); /* NameOp + name; value follows */

/* Package(n){ ... }: open, then n data objects, then aml_close(). */
size_t aml_package(struct aml *a, uint8_t nelems);

/*
 * Resource templates (ACPI 6.4 section 6.4): open a Buffer, add descriptors,
 * close with aml_resource_end() (writes the end tag, then closes).
 */
size_t aml_resource_template(struct aml *a);
void aml_res_io(struct aml *a, uint16_t base, uint8_t len);
void aml_res_irq(struct aml *a, uint8_t irq);
void aml_res_mem32_fixed(struct aml *a, uint32_t base, uint32_t len, bool writable);
/* Address space descriptors a root bridge produces (ACPI 6.4 6.4.3.5):
 * WordBusNumber, WordIO, DWordMemory, QWordMemory over [min, max]. */
void aml_res_word_bus(struct aml *a, uint16_t min, uint16_t max);
void aml_res_word_io(struct aml *a, uint16_t min, uint16_t max);
void aml_res_dword_mem(struct aml *a, uint32_t min, uint32_t max);
void aml_res_qword_mem(struct aml *a, uint64_t min, uint64_t max);
void aml_resource_end(struct aml *a, size_t mark);

/*
 * Device(name) with _HID `hid` (an EISA ID such as "PNP0501"), _UID `uid`
 * and a _CRS of one I/O range [port, port+len) and, when irq >= 0, one
 * IRQ: how an ISA device behind the LPC bridge describes itself (ACPI 6.4
 * sections 6.1.5, 6.1.12, 6.2.2).
 */
void aml_isa_device(struct aml *a, const char *name, const char *hid, unsigned uid, uint16_t port,
                    uint8_t len, int irq);

#endif
