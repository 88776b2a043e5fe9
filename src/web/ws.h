/*
 * The WebSocket consoles of `vm web` (ws.c): what web.c needs beyond
 * web.h's web_ws_vnc_protocol / web_ws_serial_protocol.
 */
#ifndef KHYVE_WEB_WS_H
#define KHYVE_WEB_WS_H

struct lws;
struct lws_protocols;

/*
 * The guest side of each console (the TCP connection to khyve's VNC server,
 * the guest's pty) is adopted into lws on this protocol, name
 * "khyve-ws-raw".  web.c lists it after web_ws_serial_protocol.  A browser
 * asking for it as a WebSocket subprotocol is refused.
 */
extern const struct lws_protocols web_ws_raw_protocol;

/*
 * For the "http" protocol's LWS_CALLBACK_HTTP_CONFIRM_UPGRADE (lws calls it
 * before the WebSocket handshake, while the connection can still answer in
 * HTTP): checks an upgrade to /ws/vnc/NAME or /ws/serial/NAME (session,
 * Origin, subprotocol, guest) as the WebSocket protocols will.  Returns 0
 * when it may go on; 1 after sending the refusal (403, 404 or 400) and
 * logging it: the callback then returns 1 too (lws ends the transaction).
 * Without it the same checks still refuse, in the handshake, but by
 * closing the connection without an HTTP status.
 */
int web_ws_confirm_upgrade(struct lws *wsi);

#endif
