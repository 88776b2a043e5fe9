/* Placeholder until the legacy VGA lands: no VGA, so fbuf runs as vga=off. */
#include "dev/vga.h"

#include <stdio.h>

#include "backend/console.h"

struct vga *vga_create(struct machine *m, bool memory, char *err, size_t errlen)
{
	(void)m;
	(void)memory;
	snprintf(err, errlen, "fbuf: legacy VGA is not built yet (use vga=off)");
	return NULL;
}

uint32_t vga_port_read(struct vga *vga, uint16_t port, unsigned size)
{
	(void)vga;
	(void)port;
	(void)size;
	return 0xffffffff;
}

void vga_port_write(struct vga *vga, uint16_t port, unsigned size, uint32_t val)
{
	(void)vga;
	(void)port;
	(void)size;
	(void)val;
}

bool vga_render(struct vga *vga, uint32_t *pixels, size_t cap, struct console_frame *f)
{
	(void)vga;
	(void)pixels;
	(void)cap;
	(void)f;
	return false;
}

void vga_palette(struct vga *vga, uint32_t pal[256], bool dac8)
{
	(void)vga;
	(void)dac8;
	for (unsigned i = 0; i < 256; i++)
		pal[i] = 0;
}
