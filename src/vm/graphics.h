/*
 * Which TCP ports a guest's VNC server (khyve's fbuf) may take: those no
 * socket on this host listens on and no other running guest has recorded
 * for its VNC server in its run.state (it may not listen yet).  vm-bhyve
 * looks for a free port the same way, from 5900 on, 200 ports at most.
 */
#ifndef KHYVE_VM_GRAPHICS_H
#define KHYVE_VM_GRAPHICS_H

#include <stdbool.h>

#include "vm/vm.h"

#define VM_VNC_PORT_FIRST  5900 /* graphics_port's default, VNC display :0 */
#define VM_VNC_PORT_SEARCH 200  /* how many ports from there are tried */

/* A set of TCP ports, one bit each. */
struct vm_ports {
	unsigned char bit[65536 / 8];
};

/*
 * Fill `p` with the ports taken on this host: every TCP socket in LISTEN
 * state (/proc/net/tcp and /proc/net/tcp6, any address) and the VNC port
 * of every running guest except the one named `self` (may be NULL).
 * Files that cannot be read count as holding no ports.
 */
void vm_ports_taken(const struct vm_sys *sys, const char *self, struct vm_ports *p);

/* Whether `port` (0..65535) is in `p`. */
bool vm_port_in(const struct vm_ports *p, unsigned port);

/*
 * The first port from `first` on, among VM_VNC_PORT_SEARCH ports and below
 * 65536, that is not in `taken`: 0 with it in *port, or -1 when all are.
 */
int vm_port_first_free(const struct vm_ports *taken, unsigned first, unsigned *port);

/*
 * The port of a "HOST:PORT" or "[V6]:PORT" address as run.state records
 * it; 0 when there is none.
 */
unsigned vm_vnc_addr_port(const char *addr);

#endif
