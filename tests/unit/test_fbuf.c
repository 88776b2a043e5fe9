/*
 * Unit tests for the fbuf device (src/dev/fbuf.c): PCI identity, the Bochs
 * VBE DISPI registers through BAR2 (ID, GETCAPS, modes, bogus modes the
 * device clamps), the EDID block, QEMU's extended registers, the display
 * path (full frame on a mode change, changed rows from the dirty bitmap,
 * nothing when nothing changed), dirty rectangle computation, pixel
 * conversion for each depth, and option refusal.
 *
 * No KVM: the fake machine has vm_fd -1, so BAR0 is not a memory slot and
 * framebuffer writes arrive as MMIO through the BAR handler (the device's
 * soft dirty bits stand in for KVM's log).  vga=off, vnc=off.
 */
#include "unit.h"

#include "backend/console.h"
#include "bus/pci.h"
#include "core/iobus.h"
#include "core/machine.h"
#include "boot/acpi.h"
#include "boot/linux.h"
#include "dev/fbuf.h"
#include "core/snapshot.h"
#include "lib/config.h"
#include "lib/sbuf.h"
#include "vmm/kvm.h"
#include "vmm/vcpu.h"

#include <sys/mman.h>

#define SLOT       29
#define DISPI(i)   (0x500 + 2 * (i))
#define XRES       1
#define YRES       2
#define BPP        3
#define ENABLE     4
#define VWIDTH     6
#define VHEIGHT    7
#define XOFF       8
#define YOFF       9
#define VMEM64K    10
#define EN_ON      0x01
#define EN_GETCAPS 0x02
#define EN_LFB     0x40

static struct machine m;
static struct pci_func *f;
static uint64_t bar0, bar2;

static uint64_t rd(uint64_t addr, unsigned size)
{
	uint64_t v = 0;

	assert_true(iobus_access(&m.mmio, addr, size, false, &v));
	return v;
}

static void wr(uint64_t addr, unsigned size, uint64_t v)
{
	assert_true(iobus_access(&m.mmio, addr, size, true, &v));
}

static uint16_t dispi_get(unsigned idx)
{
	return (uint16_t)rd(bar2 + DISPI(idx), 2);
}

static void dispi_set(unsigned idx, uint16_t v)
{
	wr(bar2 + DISPI(idx), 2, v);
}

static void set_mode(uint16_t x, uint16_t y, uint16_t bpp)
{
	dispi_set(ENABLE, 0);
	dispi_set(XRES, x);
	dispi_set(YRES, y);
	dispi_set(BPP, bpp);
	dispi_set(ENABLE, EN_ON | EN_LFB);
}

static int group_setup(void **state)
{
	char err[256] = "";

	(void)state;
	config_reset();
	if (machine_init_detached(&m, "unit", NULL, 0, 0) < 0 ||
	    config_set("pci.0.29.0.device", "fbuf") < 0 ||
	    config_set("pci.0.29.0.vga", "off") < 0 || config_set("pci.0.29.0.vnc", "off") < 0 ||
	    config_set("pci.0.29.0.w", "800") < 0 || config_set("pci.0.29.0.h", "600") < 0 ||
	    config_set("pci.0.29.0.tcp", "[::1]:5901") < 0)
		return -1;
	if (pci_init(&m, err, sizeof(err)) < 0) {
		fprintf(stderr, "pci_init: %s\n", err);
		return -1;
	}
	f = pci_get(0);
	pci_cfg_write(0, SLOT, 0, PCIR_COMMAND, 2, PCIM_CMD_MEM);
	bar0 = f->bar[0].addr;
	bar2 = f->bar[2].addr;
	return f->bar[0].mapped && f->bar[2].mapped ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	dispi_set(ENABLE, 0);
	return 0;
}

static void test_pci_identity(void **state)
{
	(void)state;
	assert_int_equal(pci_cfg_read(0, SLOT, 0, PCIR_VENDOR, 4), 0x11111234);
	assert_int_equal(pci_cfg_read(0, SLOT, 0, PCIR_SUBVEND, 4), 0x11001af4);
	assert_int_equal(pci_cfg_read(0, SLOT, 0, PCIR_REVID, 4), 0x03800002); /* vga=off */
	assert_int_equal(f->bar[0].size, FBUF_VRAM_SIZE);
	assert_int_equal(pci_cfg_read(0, SLOT, 0, PCIR_BAR0, 4) & 0xf, 0x8); /* prefetchable */
	assert_int_equal(f->bar[2].size, FBUF_MMIO_SIZE);
	assert_int_equal(f->bar[PCI_ROM_BAR].type, PCI_BAR_ROM); /* vgabios-bochs-display */
}

static void test_dispi_id(void **state)
{
	(void)state;
	assert_int_equal(dispi_get(0), 0xb0c5);
	dispi_set(0, 0xb0c0);
	assert_int_equal(dispi_get(0), 0xb0c0);
	dispi_set(0, 0x1234); /* not an ID: ignored */
	assert_int_equal(dispi_get(0), 0xb0c0);
	dispi_set(0, 0xb0c5);
	assert_int_equal(dispi_get(VMEM64K), 256);
	assert_int_equal(dispi_get(0x7f), 0); /* past the register file */
}

static void test_dispi_getcaps(void **state)
{
	(void)state;
	dispi_set(XRES, 1024);
	dispi_set(ENABLE, EN_GETCAPS);
	assert_int_equal(dispi_get(XRES), 3840);
	assert_int_equal(dispi_get(YRES), 2160);
	assert_int_equal(dispi_get(BPP), 32);
	dispi_set(ENABLE, 0);
	assert_int_equal(dispi_get(XRES), 1024);
}

static void test_dispi_mode(void **state)
{
	(void)state;
	set_mode(1024, 768, 32);
	assert_int_equal(dispi_get(XRES), 1024);
	assert_int_equal(dispi_get(YRES), 768);
	assert_int_equal(dispi_get(BPP), 32);
	assert_int_equal(dispi_get(VWIDTH), 1024);
	assert_int_equal(dispi_get(VHEIGHT), FBUF_VRAM_SIZE / 4096);
	assert_int_equal(dispi_get(ENABLE), EN_ON | EN_LFB);
	/* panning inside the framebuffer is kept */
	dispi_set(YOFF, 768);
	assert_int_equal(dispi_get(YOFF), 768);
}

/* Bogus modes are clamped by the device, as QEMU does. */
static void test_dispi_bogus_modes(void **state)
{
	(void)state;
	set_mode(1024, 768, 7);
	assert_int_equal(dispi_get(BPP), 8);
	set_mode(1001, 600, 16);
	assert_int_equal(dispi_get(XRES), 1000);
	set_mode(0, 0, 32);
	assert_int_equal(dispi_get(XRES), 8);
	assert_int_equal(dispi_get(YRES), 1);
	/* 3840x60000x32 does not fit 16 MiB: the height drops to what does */
	set_mode(65535, 60000, 32);
	assert_int_equal(dispi_get(XRES), 3840);
	assert_int_equal(dispi_get(YRES), FBUF_VRAM_SIZE / (3840 * 4));
	/* offsets that would show memory past the end drop to 0 */
	set_mode(1024, 768, 32);
	dispi_set(YOFF, 65535);
	dispi_set(XOFF, 65535);
	assert_int_equal(dispi_get(YOFF), 0);
	assert_int_equal(dispi_get(XOFF), 3840);
	dispi_set(VWIDTH, 65535);
	assert_int_equal(dispi_get(VWIDTH), 3840);
	assert_true(dispi_get(VHEIGHT) >= dispi_get(YRES));
	/* odd and oversized accesses neither crash nor change state */
	wr(bar2 + 0x501, 1, 0xff);
	wr(bar2 + 0x7ff, 1, 0xff);
	(void)rd(bar2 + 0xffc, 4);
	(void)rd(bar2 + 0x503, 1);
}

static void test_edid(void **state)
{
	uint8_t e[FBUF_EDID_SIZE], sum = 0;
	static const uint8_t header[8] = {0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0};

	(void)state;
	for (unsigned i = 0; i < FBUF_EDID_SIZE; i++) {
		e[i] = (uint8_t)rd(bar2 + i, 1);
		sum = (uint8_t)(sum + e[i]);
	}
	assert_memory_equal(e, header, 8);
	assert_int_equal(sum, 0);
	assert_int_equal(e[18], 1);
	assert_int_equal(e[19], 4);
	assert_true(e[24] & 0x02); /* preferred timing is native */
	/* preferred detailed timing: 800 x 600 */
	assert_int_equal(e[56] | (e[58] >> 4) << 8, 800);
	assert_int_equal(e[59] | (e[61] >> 4) << 8, 600);
	assert_true((e[54] | e[55] << 8) != 0);
	/* every size the options allow builds a valid block */
	for (uint32_t w = FBUF_MIN_W; w <= FBUF_MAX_W; w += 8 * 53) {
		fbuf_build_edid(e, w, FBUF_MAX_H);
		sum = 0;
		for (unsigned i = 0; i < FBUF_EDID_SIZE; i++)
			sum = (uint8_t)(sum + e[i]);
		assert_int_equal(sum, 0);
		assert_int_equal(e[56] | (e[58] >> 4) << 8, w);
		assert_int_equal(e[59] | (e[61] >> 4) << 8, FBUF_MAX_H);
	}
}

static void test_qemu_ext_regs(void **state)
{
	(void)state;
	assert_int_equal(rd(bar2 + 0x600, 4), 8);
	assert_int_equal(rd(bar2 + 0x604, 4), 0x1e1e1e1e);
	wr(bar2 + 0x604, 4, 0xbebebebe);
	assert_int_equal(rd(bar2 + 0x604, 4), 0xbebebebe);
	wr(bar2 + 0x604, 4, 0x12345678); /* neither value: ignored */
	assert_int_equal(rd(bar2 + 0x604, 4), 0xbebebebe);
	wr(bar2 + 0x604, 4, 0x1e1e1e1e);
	/* vga=off: the VGA register window reads as nothing */
	assert_int_equal(rd(bar2 + 0x400, 1), 0xff);
}

static void test_refresh_full_then_dirty(void **state)
{
	struct console_frame fr;
	uint32_t line = 800 * 4;

	(void)state;
	set_mode(800, 600, 32);
	memset(&fr, 0, sizeof(fr));
	assert_true(console_refresh(&fr));
	assert_true(fr.full);
	assert_int_equal(fr.width, 800);
	assert_int_equal(fr.height, 600);
	assert_int_equal(fr.stride, 800);
	/* nothing written: nothing changed */
	memset(&fr, 0, sizeof(fr));
	assert_true(console_refresh(&fr));
	assert_false(fr.full);
	assert_int_equal(fr.nrects, 0);
	/* one pixel on row 100, column 5 */
	wr(bar0 + 100 * line + 5 * 4, 4, 0x00123456);
	memset(&fr, 0, sizeof(fr));
	assert_true(console_refresh(&fr));
	assert_false(fr.full);
	assert_int_equal(fr.nrects, 1);
	assert_true(fr.rects[0].y <= 100 && fr.rects[0].y + fr.rects[0].h > 100);
	assert_int_equal(fr.rects[0].x, 0);
	assert_int_equal(fr.rects[0].w, 800);
	assert_int_equal(fr.pixels[100 * 800 + 5], 0x123456);
	/* a mode change is a full frame */
	set_mode(640, 480, 16);
	memset(&fr, 0, sizeof(fr));
	assert_true(console_refresh(&fr));
	assert_true(fr.full);
	assert_int_equal(fr.width, 640);
	/* DISPI off without a VGA: a black frame of the EDID size */
	dispi_set(ENABLE, 0);
	memset(&fr, 0, sizeof(fr));
	assert_true(console_refresh(&fr));
	assert_true(fr.full);
	assert_int_equal(fr.width, 800);
	assert_int_equal(fr.height, 600);
	assert_int_equal(fr.pixels[0], 0);
}

static void set_bit(uint64_t *bm, unsigned page)
{
	bm[page / 64] |= 1ull << (page % 64);
}

static void test_dirty_rects(void **state)
{
	uint64_t bm[4] = {0};
	struct console_rect r[4];
	unsigned n;

	(void)state;
	/* 1024x32bpp: one page a row.  Pages 0, 1 and 5 -> rows 0-1 and 5. */
	set_bit(bm, 0);
	set_bit(bm, 1);
	set_bit(bm, 5);
	n = fbuf_dirty_rects(bm, 256, 0, 4096, 1024, 200, r, 4);
	assert_int_equal(n, 2);
	assert_int_equal(r[0].y, 0);
	assert_int_equal(r[0].h, 2);
	assert_int_equal(r[1].y, 5);
	assert_int_equal(r[1].h, 1);
	assert_int_equal(r[1].w, 1024);
	/* a start offset of one row shifts them up; page 0 is then not shown */
	n = fbuf_dirty_rects(bm, 256, 4096, 4096, 1024, 200, r, 4);
	assert_int_equal(n, 2);
	assert_int_equal(r[0].y, 0);
	assert_int_equal(r[0].h, 1);
	assert_int_equal(r[1].y, 4);
	/* pages past the shown area are not reported */
	memset(bm, 0, sizeof(bm));
	set_bit(bm, 250);
	assert_int_equal(fbuf_dirty_rects(bm, 256, 0, 4096, 1024, 200, r, 4), 0);
	/* more areas than room: the last rectangle grows over the rest */
	memset(bm, 0, sizeof(bm));
	for (unsigned p = 0; p < 20; p += 2)
		set_bit(bm, p);
	n = fbuf_dirty_rects(bm, 256, 0, 4096, 1024, 200, r, 4);
	assert_int_equal(n, 4);
	assert_int_equal(r[3].y, 6);
	assert_int_equal(r[3].y + r[3].h, 19);
	/* a row smaller than a page: a page covers several rows */
	memset(bm, 0, sizeof(bm));
	set_bit(bm, 1);
	n = fbuf_dirty_rects(bm, 256, 0, 640, 640, 480, r, 4);
	assert_int_equal(n, 1);
	assert_int_equal(r[0].y, 4096 / 640);
	assert_int_equal(r[0].y + r[0].h - 1, (8192 - 1) / 640);
	/* degenerate modes */
	assert_int_equal(fbuf_dirty_rects(bm, 256, 0, 0, 640, 480, r, 4), 0);
}

static void test_convert(void **state)
{
	uint32_t pal[256], out[2];
	const uint8_t p8[] = {3, 200};
	const uint8_t p15[] = {0x00, 0x7c, 0x1f, 0x00}; /* red, blue */
	const uint8_t p16[] = {0xe0, 0x07, 0x00, 0xf8}; /* green, red */
	const uint8_t p24[] = {0x01, 0x02, 0x03, 0xff, 0x00, 0x80};
	const uint8_t p32[] = {0x01, 0x02, 0x03, 0xaa, 0x10, 0x20, 0x30, 0x40};

	(void)state;
	for (unsigned i = 0; i < 256; i++)
		pal[i] = i * 0x10101;
	fbuf_convert(out, p8, 2, 8, pal, false);
	assert_int_equal(out[0], 0x030303);
	assert_int_equal(out[1], 200 * 0x10101);
	fbuf_convert(out, p15, 2, 15, pal, false);
	assert_int_equal(out[0], 0xff0000);
	assert_int_equal(out[1], 0x0000ff);
	fbuf_convert(out, p16, 2, 16, pal, false);
	assert_int_equal(out[0], 0x00ff00);
	assert_int_equal(out[1], 0xff0000);
	fbuf_convert(out, p24, 2, 24, pal, false);
	assert_int_equal(out[0], 0x030201);
	assert_int_equal(out[1], 0x8000ff);
	fbuf_convert(out, p32, 2, 32, pal, false);
	assert_int_equal(out[0], 0x030201);
	assert_int_equal(out[1], 0x302010);
	fbuf_convert(out, p32, 2, 32, pal, true); /* x,r,g,b in memory */
	assert_int_equal(out[0], 0x0203aa);
	fbuf_convert(out, p16, 1, 16, pal, true);
	assert_int_equal(out[0], 0xe70039);
}

/* Create an fbuf from `conf` (slot 5); the init's error. */
static int try_conf(const char *conf, char *err, size_t errlen)
{
	const struct pci_devemu *de = pci_devemu_find("fbuf");
	struct config_node *node;
	struct pci_func fn;

	config_unset("pci.0.5");
	node = config_create_node("pci.0.5.0");
	assert_non_null(node);
	err[0] = '\0';
	if (de->legacy_config(node, conf, err, errlen) < 0)
		return -1;
	memset(&fn, 0, sizeof(fn));
	fn.m = &m;
	fn.slot = 5;
	fn.de = de;
	return de->init(&m, &fn, node, err, errlen);
}

static void test_option_refusal(void **state)
{
	static const struct {
		const char *conf, *msg;
	} bad[] = {
	    {"tcp=127.0.0.1:5900,colour=blue", "unknown option 'colour'"},
	    {"w=641", "bad w=641"},
	    {"w=632", "bad w=632"},
	    {"w=3848", "bad w=3848"},
	    {"h=2168", "bad h=2168"},
	    {"h=abc", "bad h=abc"},
	    {"password=123456789", "bad password"},
	    {"password=", "bad password"},
	    {"vga=maybe", "bad vga=maybe"},
	    {"tcp=1.2.3.4:99999", "bad address"},
	    {"tcp=1.2.3.4:", "bad address"},
	    {"tcp=[::1", "bad address"},
	    {"tcp=[::1]x", "bad address"},
	    {"tcp=[zz::1]:5900", "bad address"},
	    {"rfb=bad host:1", "bad address"},
	    {"tcp=5900", "bad address"},
	    {"tcp=1.2.3:5900", "bad address"},
	    {"tcp=1.2.3.4:5900,unix=/tmp/s", "exclude"},
	    {"wait=perhaps", "bad wait"},
	    {"wait,vnc=off", "wait needs the VNC server"},
	    {"unix=", "bad unix="},
	};
	char err[256];

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		assert_int_equal(try_conf(bad[i].conf, err, sizeof(err)), -1);
		assert_contains(err, bad[i].msg);
		assert_null(strchr(err, '\n'));
	}
}

/* The FADT's IAPC_BOOT_ARCH bit 2 "VGA Not Present" (ACPI 6.4 table 5.11)
 * follows acpi_config.legacy_vga; the DSDT describes the function. */
static void test_acpi(void **state)
{
	static struct acpi_config cfg;
	uint8_t *buf = malloc(ACPI_TABLES_SIZE);
	const uint8_t *fadt;
	size_t len;

	(void)state;
	assert_non_null(buf);
	for (int vga = 0; vga <= 1; vga++) {
		memset(&cfg, 0, sizeof(cfg));
		cfg.ncpus = 1;
		cfg.ecam_base = PCI_ECAM_GPA;
		cfg.ecam_size = PCI_ECAM_SIZE;
		cfg.mmio32_base = PCI_MMIO32_BASE;
		cfg.mmio32_end = PCI_MMIO32_END;
		cfg.io_base = PCI_IO_BASE;
		cfg.io_end = 0xffff;
		cfg.pci_dsdt = pci_write_dsdt;
		cfg.legacy_vga = vga;
		len = acpi_build(buf, ACPI_TABLES_SIZE, ACPI_TABLES_GPA, &cfg);
		assert_true(len > 0);
		fadt = memmem(buf, len, "FACP", 4);
		assert_non_null(fadt);
		assert_int_equal((fadt[109] >> 2) & 1, vga ? 0 : 1);
		assert_non_null(memmem(buf, len, "GFE8", 4)); /* slot 29 */
	}
	free(buf);
	/* vga=off made neither flag */
	assert_false(fbuf_legacy_vga());
	assert_false(fbuf_vga_text());
}

/* screen_info for 80x25 colour text, as Linux's vgacon reads it. */
static void test_screen_info(void **state)
{
	uint8_t zp[4096] = {0};

	(void)state;
	linux_zp_vga_text(zp);
	assert_int_equal(zp[0x06], 3);                  /* orig_video_mode */
	assert_int_equal(zp[0x07], 80);                 /* orig_video_cols */
	assert_int_equal(zp[0x0e], 25);                 /* orig_video_lines */
	assert_int_equal(zp[0x0f], 0x22);               /* VIDEO_TYPE_VGAC */
	assert_int_equal(zp[0x10] | zp[0x11] << 8, 16); /* orig_video_points */
	assert_int_equal(zp[0x0a], 3);                  /* ega_bx: colour, not CGA (0x10) */
	assert_int_equal(zp[0x01], 0);                  /* orig_y */
}

/* vmm/kvm.c's pieces for fbuf on this host's KVM (skipped without one):
 * a dirty-logged RAM window that can be switched on, moved and off, and
 * the legacy VGA hole in low RAM. */
static void test_kvm_windows(void **state)
{
	struct cpu_topology topo = {.sockets = 1, .cores = 1, .threads = 1};
	static uint64_t bitmap[FBUF_VRAM_SIZE / FBUF_PAGE / 64];
	char err[256];
	struct vm vm;
	void *mem;
	int slot;

	(void)state;
	if (!kvm_available())
		skip();
	assert_int_equal(vm_create(&vm, 64ull << 20, &topo, err, sizeof(err)), 0);
	mem =
	    mmap(NULL, FBUF_VRAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(mem != MAP_FAILED);
	slot = vm_ram_window_add(&vm);
	assert_true(slot >= 0);
	assert_int_equal(vm_ram_window_dirty(&vm, slot, bitmap), -1); /* off */
	assert_int_equal(vm_ram_window_set(&vm, slot, 0xc0000000, FBUF_VRAM_SIZE, mem, true), 0);
	memset(bitmap, 0xff, sizeof(bitmap));
	assert_int_equal(vm_ram_window_dirty(&vm, slot, bitmap), 0);
	for (size_t i = 0; i < ARRAY_LEN(bitmap); i++)
		assert_int_equal(bitmap[i], 0); /* no guest ran */
	assert_int_equal(vm_ram_window_set(&vm, slot, 0, FBUF_VRAM_SIZE, mem, false), 0);
	assert_int_equal(vm_ram_window_set(&vm, slot, 0xd0000000, FBUF_VRAM_SIZE, mem, true), 0);
	/* over RAM: KVM refuses the overlap */
	assert_int_equal(vm_ram_window_set(&vm, slot, 0, FBUF_VRAM_SIZE, mem, false), 0);
	assert_int_equal(vm_ram_window_set(&vm, slot, 0x100000, FBUF_VRAM_SIZE, mem, true), -1);
	/* the VGA hole */
	assert_non_null(gmem_ptr(&vm.mem, 0xa0000, 1, true));
	assert_int_equal(vm_ram_hole(&vm, 0xa0000, 0x20000), 0);
	assert_null(gmem_ptr(&vm.mem, 0xa0000, 1, false));
	assert_null(gmem_ptr(&vm.mem, 0xbffff, 1, false));
	assert_null(gmem_ptr(&vm.mem, 0x9f000, 0x2000, false));
	assert_non_null(gmem_ptr(&vm.mem, 0x9f000, 0x1000, true));
	assert_non_null(gmem_ptr(&vm.mem, 0xc0000, 0x1000, true));
	assert_non_null(gmem_ptr(&vm.mem, 0x100000, 0x1000, true));
	assert_int_equal(vm_ram_hole(&vm, 0xa0000, 0x20000), -1); /* not RAM any more */
	assert_int_equal(vm_ram_hole(&vm, 0xa0100, 0x1000), -1);
	munmap(mem, FBUF_VRAM_SIZE);
	vm_destroy(&vm);
}

/* A guest write into the window shows in the dirty log, and only that page:
 * a flat 32-bit guest stores to page 2 of the window, then exits by OUT. */
static void test_kvm_dirty_log(void **state)
{
	static const uint64_t gdt[4] = {0, 0x00cf9b000000ffffull, 0x00cf93000000ffffull,
	                                0x00008b0000000067ull};
	static const uint8_t code[] = {
	    0xc7, 0x05, 0x00, 0x20, 0x00,
	    0xc0, 0x78, 0x56, 0x34, 0x12, /* movl $0x12345678, 0xc0002000 */
	    0xe6, 0x80,                   /* outb %al, $0x80 */
	};
	struct boot_cpu_state st = {.mode = BOOT_FLAT32,
	                            .rip = 0x8000,
	                            .rsp = 0x7000,
	                            .gdt_base = 0x5000,
	                            .gdt_limit = sizeof(gdt) - 1,
	                            .cs = 0x08,
	                            .ds = 0x10,
	                            .tr = 0x18};
	struct cpu_topology topo = {.sockets = 1, .cores = 1, .threads = 1};
	static uint64_t bitmap[FBUF_VRAM_SIZE / FBUF_PAGE / 64];
	char err[256];
	struct vm vm;
	uint32_t *mem;
	int slot;

	(void)state;
	if (!kvm_available())
		skip();
	assert_int_equal(vm_create(&vm, 16ull << 20, &topo, err, sizeof(err)), 0);
	assert_int_equal(vm_create_vcpus(&vm, err, sizeof(err)), 0);
	assert_int_equal(gmem_write(&vm.mem, 0x5000, gdt, sizeof(gdt)), 0);
	assert_int_equal(gmem_write(&vm.mem, 0x8000, code, sizeof(code)), 0);
	mem =
	    mmap(NULL, FBUF_VRAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(mem != MAP_FAILED);
	slot = vm_ram_window_add(&vm);
	assert_int_equal(vm_ram_window_set(&vm, slot, 0xc0000000, FBUF_VRAM_SIZE, mem, true), 0);
	assert_int_equal(vm_ram_window_dirty(&vm, slot, bitmap), 0);
	assert_int_equal(vcpu_set_boot_state(vm.vcpus[0], &st), 0);
	for (int i = 0; i < 10 && vcpu_run(vm.vcpus[0]) == 0; i++)
		if (vm.vcpus[0]->run->exit_reason == KVM_EXIT_IO)
			break;
	assert_int_equal(vm.vcpus[0]->run->exit_reason, KVM_EXIT_IO);
	assert_int_equal(mem[0x2000 / 4], 0x12345678); /* no exit: straight to memory */
	assert_int_equal(vm_ram_window_dirty(&vm, slot, bitmap), 0);
	assert_int_equal(bitmap[0], 1ull << 2);
	for (size_t i = 1; i < ARRAY_LEN(bitmap); i++)
		assert_int_equal(bitmap[i], 0);
	assert_int_equal(vm_ram_window_dirty(&vm, slot, bitmap), 0);
	assert_int_equal(bitmap[0], 0); /* fetching cleared it */
	munmap(mem, FBUF_VRAM_SIZE);
	vm_destroy(&vm);
}

/* ---- saved state ---- */

/* Offsets into fbuf's own part (vga=off). */
#define ST_REGS  4
#define ST_ORDER (ST_REGS + 2 * 10)
#define ST_VGA   (ST_ORDER + 4 + 4 * 256)
#define ST_RUNS  (ST_VGA + 1)

static int restore_emul(const uint8_t *data, size_t len, char *err, size_t errlen)
{
	struct sbuf_reader in;

	sbuf_reader_init(&in, data, len);
	err[0] = '\0';
	if (f->de->restore(f, &in, err, errlen) < 0 && !in.failed)
		return -1;
	return sbuf_reader_done(&in, "fbuf", err, errlen);
}

static void save_emul(struct sbuf *out)
{
	char err[128];

	memset(out, 0, sizeof(*out));
	assert_int_equal(f->de->save(f, out, err, sizeof(err)), 0);
	assert_false(out->failed);
}

static void assert_state_is(const struct sbuf *want)
{
	struct sbuf got;

	save_emul(&got);
	assert_int_equal(got.len, want->len);
	assert_memory_equal(got.data, want->data, want->len);
	sbuf_free(&got);
}

static void refuse_patched(const struct sbuf *good, size_t off, const void *bytes, size_t n,
                           const char *why)
{
	uint8_t *bad = malloc(good->len);
	char err[160];

	assert_non_null(bad);
	memcpy(bad, good->data, good->len);
	memcpy(bad + off, bytes, n);
	assert_int_equal(restore_emul(bad, good->len, err, sizeof(err)), -1);
	assert_contains(err, why);
	assert_state_is(good); /* untouched */
	free(bad);
}

/*
 * A 640x480x32 mode in big-endian byte order with pixels on three pages:
 * saved (sparse: those pages only), then the guest changes everything
 * (another mode clears the VRAM), and the restore brings back the
 * registers, the byte order and every VRAM byte; the next frame is a full
 * one.  Hostile images are refused without changing anything.
 */
static void test_state_round_trip(void **state)
{
	struct console_frame fr;
	struct sbuf good;
	char err[160];
	uint16_t v16;
	uint32_t v32;

	(void)state;
	assert_non_null(machine_state_find(&m, "pci.0.29.0.fbuf"));
	assert_int_equal(machine_state_saveable(&m, err, sizeof(err)), 0);
	set_mode(640, 480, 32);
	wr(bar0, 4, 0x11223344);
	wr(bar0 + 5 * 4096 + 8, 8, 0x0102030405060708ull);
	wr(bar0 + 1000 * 4096 + 4092, 4, 0xa5a5a5a5);
	wr(bar2 + 0x604, 4, 0xbebebebe);
	memset(&fr, 0, sizeof(fr));
	assert_true(console_refresh(&fr));
	save_emul(&good);
	assert_int_equal(good.len, ST_RUNS + 4 + 3 * (8 + 4096)); /* three pages */

	set_mode(800, 600, 16);
	wr(bar0 + 5 * 4096, 4, 0xdeadbeef);
	wr(bar2 + 0x604, 4, 0x1e1e1e1e);
	memset(&fr, 0, sizeof(fr));
	assert_true(console_refresh(&fr));
	assert_int_equal(restore_emul(good.data, good.len, err, sizeof(err)), 0);
	assert_int_equal(dispi_get(XRES), 640);
	assert_int_equal(dispi_get(YRES), 480);
	assert_int_equal(dispi_get(BPP), 32);
	assert_int_equal(dispi_get(ENABLE), EN_ON | EN_LFB);
	assert_int_equal(rd(bar2 + 0x604, 4), 0xbebebebe);
	assert_int_equal(rd(bar0, 4), 0x11223344);
	assert_int_equal(rd(bar0 + 5 * 4096, 4), 0);
	assert_int_equal(rd(bar0 + 5 * 4096 + 8, 8), 0x0102030405060708ull);
	assert_int_equal(rd(bar0 + 1000 * 4096 + 4092, 4), 0xa5a5a5a5);
	assert_int_equal(rd(bar0 + 4096, 4), 0);
	assert_state_is(&good);
	memset(&fr, 0, sizeof(fr));
	assert_true(console_refresh(&fr));
	assert_true(fr.full);
	assert_int_equal(fr.width, 640);

	v16 = 4000; /* wider than the clamping allows */
	refuse_patched(&good, ST_REGS + 2 * XRES, &v16, 2, "does not fit");
	v16 = 32000; /* the offset would show past the VRAM */
	refuse_patched(&good, ST_REGS + 2 * YOFF, &v16, 2, "does not fit");
	v16 = 0x1234;
	refuse_patched(&good, ST_REGS, &v16, 2, "DISPI id");
	v32 = 0x12345678;
	refuse_patched(&good, ST_ORDER, &v32, 4, "byte order");
	refuse_patched(&good, ST_VGA, "\1", 1, "legacy VGA");
	refuse_patched(&good, ST_VGA, "\2", 1, "");
	v32 = 4096; /* the first run starts past the VRAM */
	refuse_patched(&good, ST_RUNS + 4, &v32, 4, "out of range");
	v32 = 4097;
	refuse_patched(&good, ST_RUNS, &v32, 4, "runs of pages");
	v16 = 2;
	refuse_patched(&good, 0, &v16, 2, "version");
	assert_int_equal(restore_emul(good.data, ST_RUNS + 2, err, sizeof(err)), -1);
	assert_contains(err, "truncated");
	assert_int_equal(restore_emul(good.data, good.len - 1, err, sizeof(err)), -1);
	assert_int_equal(restore_emul(good.data, good.len, err, sizeof(err)), 0);
	assert_state_is(&good);
	sbuf_free(&good);
	wr(bar2 + 0x604, 4, 0x1e1e1e1e);
}

int main(void)
{
#define T(fn) cmocka_unit_test_teardown(fn, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_pci_identity),
	    T(test_dispi_id),
	    T(test_dispi_getcaps),
	    T(test_dispi_mode),
	    T(test_dispi_bogus_modes),
	    T(test_edid),
	    T(test_qemu_ext_regs),
	    T(test_refresh_full_then_dirty),
	    T(test_state_round_trip),
	    cmocka_unit_test(test_dirty_rects),
	    cmocka_unit_test(test_convert),
	    cmocka_unit_test(test_option_refusal),
	    cmocka_unit_test(test_acpi),
	    cmocka_unit_test(test_screen_info),
	    cmocka_unit_test(test_kvm_windows),
	    cmocka_unit_test(test_kvm_dirty_log),
	};
#undef T

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
