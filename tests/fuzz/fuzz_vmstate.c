/*
 * libFuzzer target for the vCPU and VM state sections (src/vmm/vmstate.c):
 * a state file comes from another host or is damaged, so every field of a
 * section is hostile.  Set-up makes a one-vCPU VM on this host's KVM and
 * saves its vCPU and VM sections; each input edits a copy of one of them
 * and restores it onto that (never-run) VM.  Starting from real sections
 * gets the fuzzer past the version and counts at once, and needs no seeds
 * that depend on the host's CPUID.  A restore returns 0 or -1 with one
 * line; nothing may crash, leak or read past a buffer.  Without a usable
 * /dev/kvm every input does nothing.
 *
 * Input: u8 which (bit 0: the VM section, else the vCPU's); u32 cut (not 0:
 * the section is cut to cut % (length + 1) bytes); then, while input is
 * left, edits of u32 offset (modulo the length) and u8 xor mask.
 */
#include "fuzz.h"

#include "lib/sbuf.h"
#include "vmm/kvm.h"
#include "vmm/vcpu.h"
#include "vmm/vmstate.h"

static struct vm vm;
static bool have_vm;
static struct sbuf vcpu_section, vm_section;
static uint8_t *edited;

static void setup(void)
{
	struct cpu_topology topo = {.sockets = 1, .cores = 1, .threads = 1};
	char err[256];

	if (!kvm_available())
		return;
	if (vm_create(&vm, 2ull << 20, &topo, err, sizeof(err)) < 0 ||
	    vm_create_vcpus(&vm, err, sizeof(err)) < 0 ||
	    vcpu_state_save(vm.vcpus[0], &vcpu_section, err, sizeof(err)) < 0 ||
	    vm_state_save(&vm, &vm_section, err, sizeof(err)) < 0) {
		fprintf(stderr, "fuzz_vmstate: %s\n", err);
		abort();
	}
	edited = malloc(vcpu_section.len > vm_section.len ? vcpu_section.len : vm_section.len);
	if (edited == NULL)
		abort();
	have_vm = true;
}

FUZZ_TARGET(setup)

/* A refusal is one non-empty line. */
static void check_result(int rc, const char *err)
{
	if (rc != 0 && rc != -1)
		abort();
	if (rc == -1 && (err[0] == '\0' || strchr(err, '\n') != NULL))
		abort();
}

static void fuzz_one(struct fz *z)
{
	const struct sbuf *src;
	struct sbuf_reader r;
	char err[256] = "";
	size_t len;
	uint32_t cut;
	bool vm_part;
	int rc;

	if (!have_vm)
		return;
	vm_part = fz_u8(z) & 1;
	src = vm_part ? &vm_section : &vcpu_section;
	memcpy(edited, src->data, src->len);
	len = src->len;
	cut = fz_u32(z);
	if (cut != 0)
		len = cut % (src->len + 1);
	FUZZ_EACH_OP (z) {
		uint32_t off = (uint32_t)(fz_u32(z) % src->len);

		edited[off] ^= fz_u8(z);
	}
	sbuf_reader_init(&r, edited, len);
	if (vm_part) {
		rc = vm_state_restore(&vm, &r, err, sizeof(err));
		check_result(rc, err);
		if (rc == 0) {
			rc = vm_state_restore_finish(&vm, err, sizeof(err));
			check_result(rc, err);
		}
	} else {
		rc = vcpu_state_restore(vm.vcpus[0], &r, err, sizeof(err));
		check_result(rc, err);
	}
}
