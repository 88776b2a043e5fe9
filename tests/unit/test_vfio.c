/*
 * Unit tests for PCI passthrough's host side (src/backend/vfio.h) and its
 * option (src/dev/passthru.c): host addresses in bhyve's B/S/F and the
 * sysfs form, and the checks before VFIO is opened (an IOMMU, the device
 * bound to vfio-pci, a viable group, /dev/vfio) against a fake sysfs tree.
 */
#include "unit.h"

#include <sys/stat.h>

#include "backend/vfio.h"
#include "bus/pci_slot.h"
#include "lib/config.h"

/* ---- addresses ---- */

static void expect_addr(const char *s, unsigned d, unsigned b, unsigned sl, unsigned fn)
{
	struct vfio_addr a;
	char err[256];

	if (vfio_parse_addr(s, &a, err, sizeof(err)) != 0)
		fail_msg("'%s' refused: %s", s, err);
	assert_int_equal(a.domain, d);
	assert_int_equal(a.bus, b);
	assert_int_equal(a.slot, sl);
	assert_int_equal(a.func, fn);
}

static void test_parse_good(void **state)
{
	char buf[VFIO_ADDR_STRLEN];
	struct vfio_addr a = {0, 2, 0, 0};

	(void)state;
	expect_addr("2/0/0", 0, 2, 0, 0);
	expect_addr("255/31/7", 0, 255, 31, 7);
	expect_addr("0000:00:03.0", 0, 0, 3, 0);
	expect_addr("0001:af:1f.7", 1, 0xaf, 0x1f, 7);
	expect_addr("02:00.1", 0, 2, 0, 1);
	vfio_addr_str(&a, buf, sizeof(buf));
	assert_string_equal(buf, "0000:02:00.0");
}

static void test_parse_bad(void **state)
{
	static const char *const bad[] = {
	    "",        "2/0", "2/32/0",    "256/0/0", "2/0/8",         "2/0/0x",  "0000:00:03.8",
	    "00:20.0", "zz",  "1:2:3:4.5", "-1/0/0",  "0000:00:03.0 ", "0x2/0/0", "10000:00:00.0"};
	struct vfio_addr a;
	char err[256];

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		err[0] = '\0';
		if (vfio_parse_addr(bad[i], &a, err, sizeof(err)) == 0)
			fail_msg("'%s' accepted", bad[i]);
		assert_contains(err, "BUS/SLOT/FUNC");
	}
}

/* ---- the -s option ---- */

static void test_slot_option(void **state)
{
	char err[256];

	(void)state;
	config_reset();
	assert_int_equal(pci_parse_slot_option("5,passthru,2/0/0", err, sizeof(err)), 0);
	assert_string_equal(config_get("pci.0.5.0.device"), "passthru");
	assert_string_equal(config_get("pci.0.5.0.host"), "2/0/0");
	assert_int_equal(pci_parse_slot_option("6,passthru,0000:00:03.0", err, sizeof(err)), 0);
	assert_string_equal(config_get("pci.0.6.0.host"), "0000:00:03.0");
	assert_int_equal(pci_parse_slot_option("7,passthru,host=1/2/3", err, sizeof(err)), 0);
	assert_string_equal(config_get("pci.0.7.0.host"), "1/2/3");
	assert_int_equal(pci_check_config(false, err, sizeof(err)), 0);

	assert_int_equal(pci_parse_slot_option("8,passthru", err, sizeof(err)), -1);
	assert_contains(err, "passthru,BUS/SLOT/FUNC");
	assert_int_equal(pci_parse_slot_option("10,passthru,2/0", err, sizeof(err)), -1);
	assert_contains(err, "bad host device '2/0'");
	assert_int_equal(pci_parse_slot_option("9,passthru,2/0/0,bogus=1", err, sizeof(err)), 0);
	assert_int_equal(pci_check_config(false, err, sizeof(err)), -1);
	assert_contains(err, "bogus");
	config_reset();
}

/* ---- host checks against a fake tree ---- */

struct fake {
	char root[128];
};

static void mkpath(const char *root, const char *rel)
{
	char path[1024], *p;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	mkdir(path, 0755);
}

static void put_file(const char *root, const char *rel)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
}

static void put_link(const char *root, const char *rel, const char *target)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	unlink(path);
	assert_int_equal(symlink(target, path), 0);
}

/* Device `name` in IOMMU group `group`, bound to `drv` (NULL: none). */
static void add_device(const char *root, const char *name, int group, const char *drv)
{
	char rel[256], target[512];

	snprintf(rel, sizeof(rel), "sys/devices/pci0000:00/%s", name);
	mkpath(root, rel);
	snprintf(rel, sizeof(rel), "sys/kernel/iommu_groups/%d/devices", group);
	mkpath(root, rel);
	snprintf(rel, sizeof(rel), "sys/kernel/iommu_groups/%d/devices/%s", group, name);
	snprintf(target, sizeof(target), "../../../../devices/pci0000:00/%s", name);
	put_link(root, rel, target);
	snprintf(rel, sizeof(rel), "sys/bus/pci/devices/%s", name);
	snprintf(target, sizeof(target), "../../../devices/pci0000:00/%s", name);
	put_link(root, rel, target);
	snprintf(rel, sizeof(rel), "sys/devices/pci0000:00/%s/iommu_group", name);
	snprintf(target, sizeof(target), "../../../kernel/iommu_groups/%d", group);
	put_link(root, rel, target);
	snprintf(rel, sizeof(rel), "sys/devices/pci0000:00/%s/driver", name);
	if (drv != NULL) {
		snprintf(target, sizeof(target), "../../../bus/pci/drivers/%s", drv);
		put_link(root, rel, target);
	} else {
		snprintf(target, sizeof(target), "%s/%s", root, rel);
		unlink(target);
	}
}

static int fake_setup(void **state)
{
	struct fake *fk = calloc(1, sizeof(*fk));

	snprintf(fk->root, sizeof(fk->root), "/tmp/khyve-vfio-XXXXXX");
	assert_non_null(mkdtemp(fk->root));
	mkpath(fk->root, "sys/kernel/iommu_groups");
	mkpath(fk->root, "sys/bus/pci/devices");
	mkpath(fk->root, "sys/devices/pci0000:00");
	mkpath(fk->root, "dev/vfio");
	put_file(fk->root, "dev/vfio/vfio");
	put_file(fk->root, "dev/vfio/7");
	*state = fk;
	return 0;
}

static int fake_teardown(void **state)
{
	struct fake *fk = *state;
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fk->root);
	assert_int_equal(system(cmd), 0);
	free(fk);
	return 0;
}

static int check(struct fake *fk, const char *addr, int *group, char *err, size_t errlen)
{
	struct vfio_addr a;

	assert_int_equal(vfio_parse_addr(addr, &a, err, errlen), 0);
	err[0] = '\0';
	return vfio_check_host(fk->root, &a, group, err, errlen);
}

static void test_no_iommu(void **state)
{
	struct fake *fk = *state;
	char err[512];
	int group = -1;

	assert_int_equal(check(fk, "0/3/0", &group, err, sizeof(err)), -1);
	assert_contains(err, "no IOMMU");
}

static void test_no_device(void **state)
{
	struct fake *fk = *state;
	char err[512];
	int group = -1;

	add_device(fk->root, "0000:00:04.0", 3, "e1000e");
	assert_int_equal(check(fk, "0/3/0", &group, err, sizeof(err)), -1);
	assert_contains(err, "no PCI device 0000:00:03.0");
}

static void test_unbound(void **state)
{
	struct fake *fk = *state;
	char err[512];
	int group = -1;

	add_device(fk->root, "0000:00:03.0", 7, NULL);
	assert_int_equal(check(fk, "0/3/0", &group, err, sizeof(err)), -1);
	assert_contains(err, "bound to no driver, not vfio-pci");
	assert_contains(err, "echo 0000:00:03.0 > /sys/bus/pci/drivers/vfio-pci/bind");
}

static void test_other_driver(void **state)
{
	struct fake *fk = *state;
	char err[512];
	int group = -1;

	add_device(fk->root, "0000:00:03.0", 7, "nvme");
	assert_int_equal(check(fk, "0000:00:03.0", &group, err, sizeof(err)), -1);
	assert_contains(err, "0000:00:03.0 is bound to nvme, not vfio-pci");
	assert_contains(err, "/sys/bus/pci/drivers/nvme/unbind");
	assert_contains(err, "driver_override");
	assert_null(strchr(err, '\n'));
}

static void test_group_not_viable(void **state)
{
	struct fake *fk = *state;
	char err[512];
	int group = -1;

	add_device(fk->root, "0000:00:03.0", 7, "vfio-pci");
	add_device(fk->root, "0000:00:03.1", 7, "snd_hda_intel");
	assert_int_equal(check(fk, "0/3/0", &group, err, sizeof(err)), -1);
	assert_contains(err, "IOMMU group 7 of 0000:00:03.0 is not viable");
	assert_contains(err, "0000:00:03.1 in it is bound to snd_hda_intel");
	/* A bridge's pcieport or an unbound neighbour leaves it viable. */
	add_device(fk->root, "0000:00:03.1", 7, "pcieport");
	add_device(fk->root, "0000:00:03.2", 7, NULL);
	assert_int_equal(check(fk, "0/3/0", &group, err, sizeof(err)), 0);
	assert_int_equal(group, 7);
}

static void test_no_dev_vfio(void **state)
{
	struct fake *fk = *state;
	char err[512], path[256];
	int group = -1;

	add_device(fk->root, "0000:00:03.0", 7, "vfio-pci");
	snprintf(path, sizeof(path), "%s/dev/vfio/vfio", fk->root);
	unlink(path);
	assert_int_equal(check(fk, "0/3/0", &group, err, sizeof(err)), -1);
	assert_contains(err, "dev/vfio/vfio (modprobe vfio-pci)");
	put_file(fk->root, "dev/vfio/vfio");
	snprintf(path, sizeof(path), "%s/dev/vfio/7", fk->root);
	unlink(path);
	assert_int_equal(check(fk, "0/3/0", &group, err, sizeof(err)), -1);
	assert_contains(err, "dev/vfio/7");
}

static void test_all_good(void **state)
{
	struct fake *fk = *state;
	char err[512];
	int group = -1;

	add_device(fk->root, "0000:00:03.0", 7, "vfio-pci");
	add_device(fk->root, "0000:00:04.0", 8, "e1000e"); /* another group: no matter */
	assert_int_equal(check(fk, "0/3/0", &group, err, sizeof(err)), 0);
	assert_int_equal(group, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_good),
	    cmocka_unit_test(test_parse_bad),
	    cmocka_unit_test(test_slot_option),
	    cmocka_unit_test_setup_teardown(test_no_iommu, fake_setup, fake_teardown),
	    cmocka_unit_test_setup_teardown(test_no_device, fake_setup, fake_teardown),
	    cmocka_unit_test_setup_teardown(test_unbound, fake_setup, fake_teardown),
	    cmocka_unit_test_setup_teardown(test_other_driver, fake_setup, fake_teardown),
	    cmocka_unit_test_setup_teardown(test_group_not_viable, fake_setup, fake_teardown),
	    cmocka_unit_test_setup_teardown(test_no_dev_vfio, fake_setup, fake_teardown),
	    cmocka_unit_test_setup_teardown(test_all_good, fake_setup, fake_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
