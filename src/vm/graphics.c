/*
 * Free TCP ports for guests' VNC servers (graphics.h).  The kernel's
 * socket tables say who listens now; run.state says which port a guest
 * that is starting will listen on before it does.
 */
#include "vm/graphics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/state.h"

static void port_add(struct vm_ports *p, unsigned port)
{
	if (port < 65536)
		p->bit[port / 8] |= (unsigned char)(1u << (port % 8));
}

bool vm_port_in(const struct vm_ports *p, unsigned port)
{
	return port < 65536 && (p->bit[port / 8] & (1u << (port % 8)));
}

/* TCP's LISTEN state in the "st" column of /proc/net/tcp (include/net/tcp_states.h). */
#define TCP_LISTEN_STATE 0x0A

/*
 * Lines of /proc/net/tcp[6]: "N: LOCALADDR:PORT REMADDR:PORT ST ...", all
 * in hex; the first line is a header.
 */
static void add_listeners(struct vm_ports *p, const char *table)
{
	char line[512];
	FILE *f = fopen(table, "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned port, state;

		if (sscanf(line, " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x", &port, &state) ==
		        2 &&
		    state == TCP_LISTEN_STATE)
			port_add(p, port);
	}
	fclose(f);
}

unsigned vm_vnc_addr_port(const char *addr)
{
	const char *colon = strrchr(addr, ':');
	char *end;
	unsigned long port;

	if (!colon || !colon[1])
		return 0;
	port = strtoul(colon + 1, &end, 10);
	return *end == '\0' && port > 0 && port < 65536 ? (unsigned)port : 0;
}

struct guest_ports {
	const struct vm_sys *sys;
	const char *self;
	struct vm_ports *p;
};

static int add_guest_port(struct vm_guest *g, void *arg)
{
	struct guest_ports *gp = arg;
	struct vm_status st;

	if (gp->self && strcmp(g->name, gp->self) == 0)
		return 0;
	vm_status_get(gp->sys, g, &st);
	if (st.state == VM_RUNNING && st.vnc[0])
		port_add(gp->p, vm_vnc_addr_port(st.vnc));
	return 0;
}

void vm_ports_taken(const struct vm_sys *sys, const char *self, struct vm_ports *p)
{
	struct guest_ports gp = {.sys = sys, .self = self, .p = p};

	memset(p, 0, sizeof(*p));
	add_listeners(p, "/proc/net/tcp");
	add_listeners(p, "/proc/net/tcp6");
	if (sys)
		vm_guest_foreach(sys, add_guest_port, &gp);
}

int vm_port_first_free(const struct vm_ports *taken, unsigned first, unsigned *port)
{
	for (unsigned n = first; n < first + VM_VNC_PORT_SEARCH && n < 65536; n++) {
		if (n > 0 && !vm_port_in(taken, n)) {
			*port = n;
			return 0;
		}
	}
	return -1;
}
