/* Unit tests for vm import's readers (src/vm/import.h): Proxmox's qm.conf and libvirt's XML. */
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include "vm/import.h"

static struct imp_guest *read_pve(const char *text, const char *dir, char *err, size_t errlen)
{
	struct imp_guest *g = calloc(1, sizeof(*g));

	assert_non_null(g);
	if (imp_read_pve(text, strlen(text), "t.conf", dir, g, err, errlen) < 0) {
		free(g);
		return NULL;
	}
	return g;
}

static struct imp_guest *read_xml(const char *text, char *err, size_t errlen)
{
	struct imp_guest *g = calloc(1, sizeof(*g));

	assert_non_null(g);
	if (imp_read_libvirt(text, strlen(text), "t.xml", NULL, g, err, errlen) < 0) {
		free(g);
		return NULL;
	}
	return g;
}

static bool has_note(const struct imp_guest *g, const char *part)
{
	for (size_t i = 0; i < g->nnote; i++)
		if (strstr(g->note[i], part))
			return true;
	return false;
}

/* The old boot form: c is bootdisk, d the CD drives; the rest follow as read. */
static void test_pve_legacy_boot(void **state)
{
	char err[512] = "";
	(void)state;
	struct imp_guest *g = read_pve("boot: dc\nbootdisk: virtio1\nmemory: 64\n"
	                               "ide2: /i/x.iso,media=cdrom\nvirtio0: /i/a.raw\n"
	                               "virtio1: /i/b.qcow2\n",
	                               NULL, err, sizeof(err));

	assert_non_null(g);
	assert_int_equal(g->ndisk, 3);
	assert_string_equal(g->disk[0].id, "ide2");
	assert_true(g->disk[0].cdrom);
	assert_string_equal(g->disk[1].id, "virtio1");
	assert_string_equal(g->disk[1].format, "qcow2");
	assert_string_equal(g->disk[2].id, "virtio0");
	assert_string_equal(g->disk[2].path, "/i/a.raw");
	assert_int_equal(g->memory_mib, 64);
	assert_int_equal(g->cpus, 1);
	free(g);
}

/* Storages: local, local-lvm, local-zfs by Proxmox's paths; another one only with -d. */
static void test_pve_storages(void **state)
{
	char err[512] = "";
	(void)state;
	struct imp_guest *g = read_pve("scsi0: local:100/vm-100-disk-0.qcow2\n"
	                               "scsi1: local-lvm:vm-100-disk-1\n"
	                               "scsi2: local-zfs:vm-100-disk-2,format=raw\n"
	                               "scsi3: local:iso/d.iso,media=cdrom\n"
	                               "boot: order=scsi0;scsi1;scsi2;scsi3\n",
	                               NULL, err, sizeof(err));

	assert_non_null(g);
	assert_string_equal(g->disk[0].path, "/var/lib/vz/images/100/vm-100-disk-0.qcow2");
	assert_string_equal(g->disk[1].path, "/dev/pve/vm-100-disk-1");
	assert_string_equal(g->disk[1].format, "raw");
	assert_string_equal(g->disk[2].path, "/dev/zvol/rpool/data/vm-100-disk-2");
	assert_string_equal(g->disk[3].path, "/var/lib/vz/template/iso/d.iso");
	free(g);
	assert_null(read_pve("memory: 512\nscsi0: nas:vm-1-disk-0\n", NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "storage nas"));
	g = read_pve("memory: 512\nscsi0: nas:vm-1-disk-0\n", "/imgs", err, sizeof(err));
	assert_non_null(g);
	assert_string_equal(g->disk[0].path, "/imgs/vm-1-disk-0"); /* not there: as named */
	free(g);
	assert_null(read_pve("scsi0: local:../../etc/shadow\n", NULL, err, sizeof(err)));
	assert_null(read_pve("scsi0: local:100/x.img,format=vdi\n", NULL, err, sizeof(err)));
}

/* Values checked; unknown keys are notes; lines that are not qm.conf refuse the file. */
static void test_pve_values(void **state)
{
	char err[512];
	(void)state;
	const char *bad[] = {
	    "memory: lots\n",
	    "cores: 300\n",
	    "sockets: 0\n",
	    "bios: uefi\n",
	    "boot: xyz\n",
	    "smbios1: uuid=nope\n",
	    "localtime: 2\n",
	    "net0: virtio=01:00:5e:00:00:01,bridge=vmbr0\n",
	    "net0: pcnet=52:54:00:00:00:01\n",
	    "net0: virtio=52:54:00:00:00:01,bridge=a-very-long-bridge\n",
	    "memory 512\n",
	    "Memory: 512\n",
	    "memory:512\n",
	    "[broken\n",
	    "name: x\n",
	    "vga: fancy\n",
	    "scsi0: local-lvm:vm-1,media=tape\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		struct imp_guest *g = read_pve(bad[i], NULL, err, sizeof(err));
		if (g)
			fail_msg("accepted: %s", bad[i]);
		assert_true(err[0] != '\0');
		assert_null(strchr(err, '\n'));
	}
	struct imp_guest *g = read_pve("memory: current=768\nhostpci0: 0a:1f.7,pcie=1\n"
	                               "hostpci1: 02:00\nhostpci2: 0001:00:01.0\nwatchdog: "
	                               "model=i6300esb\nlocaltime: 0\nostype: win10\n",
	                               NULL, err, sizeof(err));
	assert_non_null(g);
	assert_int_equal(g->memory_mib, 768);
	/* hostpciN's hex address becomes vm-bhyve's decimal B/S/F. */
	assert_int_equal(g->npt, 1);
	assert_string_equal(g->passthru[0], "10/31/7");
	assert_true(has_note(g, "hostpci0: passthru0=\"10/31/7\""));
	assert_true(has_note(g, "hostpci1: 02:00: every function"));
	assert_true(has_note(g, "hostpci2: 0001:00:01.0: not an address"));
	assert_true(has_note(g, "watchdog: not mapped"));
	assert_true(g->windows);
	assert_false(g->localtime); /* localtime: 0 wins over Windows' default */
	free(g);
	/* efidisk0: efitype 4m is carried over (cmd_import.c), the old 2m default is not. */
	g = read_pve("bios: ovmf\nefidisk0: local-lvm:vm-1-disk-0,efitype=4m\n", NULL, err,
	             sizeof(err));
	assert_non_null(g);
	assert_string_equal(g->vars_path, "/dev/pve/vm-1-disk-0");
	assert_string_equal(g->vars_format, "raw");
	free(g);
	g = read_pve("bios: ovmf\nefidisk0: local-lvm:vm-1-disk-0\n", NULL, err, sizeof(err));
	assert_non_null(g);
	assert_string_equal(g->vars_path, "");
	assert_true(has_note(g, "efitype 2m"));
	free(g);
}

static const char xml_head[] = "<domain type='kvm'><name>x</name>";

static struct imp_guest *read_domain(const char *body, char *err, size_t errlen)
{
	char text[4096];

	snprintf(text, sizeof(text), "%s%s</domain>", xml_head, body);
	return read_xml(text, err, errlen);
}

/* Memory units, vcpu and its topology. */
static void test_libvirt_memory_cpu(void **state)
{
	char err[512] = "";
	(void)state;
	struct imp_guest *g =
	    read_domain("<memory unit='MB'>1000</memory><vcpu>6</vcpu><os><type>hvm</type></os>"
	                "<cpu><topology sockets='2' cores='3' threads='1'/></cpu>",
	                err, sizeof(err));

	assert_non_null(g);
	assert_int_equal(g->memory_mib, 953); /* 10^9 bytes */
	assert_int_equal(g->cpus, 6);
	assert_int_equal(g->sockets, 2);
	assert_int_equal(g->cores, 3);
	free(g);
	g = read_domain("<memory>1048576</memory><vcpu>4</vcpu><os><type>hvm</type></os>"
	                "<cpu><topology sockets='1' cores='3' threads='1'/></cpu>",
	                err, sizeof(err));
	assert_non_null(g);
	assert_int_equal(g->memory_mib, 1024); /* KiB by default */
	assert_int_equal(g->sockets, 0);       /* 1 x 3 x 1 is not 4: left out */
	assert_true(has_note(g, "cpu topology"));
	free(g);
	assert_null(read_domain("<memory unit='parsec'>1</memory><vcpu>1</vcpu><os><type>hvm</type>"
	                        "</os>",
	                        err, sizeof(err)));
	assert_null(read_domain("<memory>4</memory><vcpu>1</vcpu><os><type>hvm</type></os>", err,
	                        sizeof(err)));
	assert_null(read_domain("<memory>1048576</memory><vcpu>0</vcpu><os><type>hvm</type></os>",
	                        err, sizeof(err)));
	assert_null(read_domain("<memory>1048576</memory><vcpu>1</vcpu><os><type>exe</type></os>",
	                        err, sizeof(err)));
	assert_null(read_domain("<memory>1048576</memory><vcpu>1</vcpu><os><type "
	                        "arch='aarch64'>hvm</type></os>",
	                        err, sizeof(err)));
}

/* <boot order> beats os/boot; disks without one follow, as read. */
static void test_libvirt_boot_order(void **state)
{
	char err[512] = "";
	(void)state;
	struct imp_guest *g = read_domain(
	    "<memory>1048576</memory><vcpu>1</vcpu><os><type>hvm</type><boot dev='cdrom'/></os>"
	    "<devices>"
	    "<disk type='file' device='disk'><source file='/a.img'/><target dev='vda'/></disk>"
	    "<disk type='block' device='disk'><source dev='/dev/sdz'/><target dev='sdb' "
	    "bus='sata'/><boot order='1'/></disk>"
	    "<disk type='file' device='cdrom'><source file='/c.iso'/><target dev='hdc' "
	    "bus='ide'/><boot order='2'/></disk>"
	    "<disk type='network' device='disk'><target dev='vdc'/></disk>"
	    "<disk type='file' device='floppy'><source file='/f.img'/><target dev='fda'/></disk>"
	    "</devices>",
	    err, sizeof(err));

	assert_non_null(g);
	assert_int_equal(g->ndisk, 3);
	assert_string_equal(g->disk[0].id, "sdb");
	assert_int_equal(g->disk[0].bus, IMP_BUS_SATA);
	assert_string_equal(g->disk[1].id, "hdc");
	assert_true(g->disk[1].cdrom);
	assert_string_equal(g->disk[2].id, "vda");
	assert_int_equal(g->disk[2].bus, IMP_BUS_VIRTIO);
	assert_true(has_note(g, "type network"));
	assert_true(has_note(g, "device=floppy"));
	free(g);
}

/* Not a domain, a DTD, a relative disk path, a bad MAC or driver type: refused. */
static void test_libvirt_refused(void **state)
{
	char err[512];
	(void)state;
	const char *base = "<memory>1048576</memory><vcpu>1</vcpu><os><type>hvm</type></os>";
	const char *bad[] = {
	    "<devices><disk type='file'><source file='rel.img'/><target dev='vda'/></disk>"
	    "</devices>",
	    "<devices><disk type='file'><driver type='vdi'/><source file='/a'/><target "
	    "dev='vda'/></disk></devices>",
	    "<devices><interface type='bridge'><mac address='ff:ff:ff:ff:ff:ff'/><source "
	    "bridge='br0'/></interface></devices>",
	    "<devices><interface type='network'></interface></devices>",
	    "<devices><disk type='file'><source file='/a'/></disk></devices>",
	};
	char text[2048];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "%s%s", base, bad[i]);
		err[0] = '\0';
		struct imp_guest *g = read_domain(text, err, sizeof(err));
		if (g)
			fail_msg("accepted: %s", bad[i]);
		assert_true(err[0] != '\0');
	}
	assert_null(read_xml("<network><name>default</name></network>", err, sizeof(err)));
	assert_non_null(strstr(err, "no <domain>"));
	assert_null(
	    read_xml("<!DOCTYPE domain [<!ENTITY a 'b'>]><domain>&a;</domain>", err, sizeof(err)));
	assert_non_null(strstr(err, "DTD"));
	assert_null(read_xml("<domain><name>", err, sizeof(err)));
	assert_non_null(strstr(err, "not a libvirt domain XML"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pve_legacy_boot),    cmocka_unit_test(test_pve_storages),
	    cmocka_unit_test(test_pve_values),         cmocka_unit_test(test_libvirt_memory_cpu),
	    cmocka_unit_test(test_libvirt_boot_order), cmocka_unit_test(test_libvirt_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
