/*
 * The VNC server (RFB 3.8, RFC 6143) through libvncserver, in its own
 * thread: it shows the console's frame (backend/console.h) and turns client
 * key and pointer events into console events.  Nothing a client does blocks
 * a vCPU: the server only reads the frame the display hands it.
 */
#ifndef KHYVE_VNC_H
#define KHYVE_VNC_H

#include <stddef.h>
#include <stdint.h>

struct vnc_server;

/* What fbuf's options say (tcp=, unix=, password=, wait, w=, h=). */
struct vnc_config {
	const char *host;       /* listen address (IPv4 or IPv6 literal, or a name);
	                         * NULL is 127.0.0.1 */
	int port;               /* TCP port; 0 picks a free one (vnc_port()) */
	const char *unix_path;  /* listen on this UNIX socket instead, or NULL */
	const char *password;   /* VNC authentication (at most 8 characters), or NULL */
	uint32_t width, height; /* the first frame's size, before the guest draws */
	const char *name;       /* desktop name shown by clients: the VM's name */
	/* Called once, on the VNC thread, when the first client has completed
	 * the handshake (fbuf's `wait` releases the vCPUs here); may be NULL. */
	void (*first_client)(void *arg);
	void *first_client_arg;
};

/*
 * Listen now (so an address in use fails before the guest starts) and start
 * the server thread.  Warns on stderr when listening on a non-loopback
 * address without a password.  NULL with a one-line reason in `err`.
 */
struct vnc_server *vnc_start(const struct vnc_config *c, char *err, size_t errlen);

/* The TCP port the server listens on (the one bound when the config asked
 * for port 0), or 0 on a UNIX socket. */
int vnc_port(const struct vnc_server *s);

/* What the server has sent since it started, over all clients (for the
 * benchmark, bench/vnc): update bytes as libvncserver counts them, framebuffer
 * update messages, and refreshes that found the frame changed. */
struct vnc_stats {
	uint64_t bytes_sent;
	uint64_t updates_sent;
	uint64_t changed_refreshes;
	unsigned clients;     /* connected now */
	uint64_t connections; /* clients accepted since the start */
};

/* A snapshot of the counters; any thread.  Updated by the VNC thread about
 * 30 times a second. */
void vnc_get_stats(struct vnc_server *s, struct vnc_stats *st);

/*
 * Show the server in the counter registry (lib/counters.h) as source "vnc":
 * clients (now), connections_total, bytes_sent_total, updates_sent_total.
 * Once per server; a registered server must not be stopped (the registry
 * keeps pointing at it; fbuf's lives as long as the VM).  0, or -1 when the
 * registry already has a "vnc".
 */
int vnc_register_counters(struct vnc_server *s);

/* Stop the thread, close every client and the listening socket. */
void vnc_stop(struct vnc_server *s);

#endif
