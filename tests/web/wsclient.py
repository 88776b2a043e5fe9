#!/usr/bin/env python3
"""A small WebSocket client (RFC 6455, standard library only) for vm web's
consoles: connects (ws:// or wss://, the certificate not checked), asks for a
subprotocol, sends a session cookie, sends bytes, prints what comes back.

  wsclient.py --cookie ID --proto khyve-serial \\
      wss://127.0.0.1:PORT/ws/serial/NAME --expect "WEB TICK"
  wsclient.py --cookie ID --proto khyve-vnc \\
      wss://127.0.0.1:PORT/ws/vnc/NAME --expect "RFB 003.008"
  wsclient.py --proto khyve-vnc wss://127.0.0.1:PORT/ws/vnc/NAME --status 403

Exit status: 0 when --expect was seen (or, without it, the connection ran
until the peer closed or --timeout passed) or the refusal matched --status;
1 when the text was not seen in time; 2 when the upgrade was refused (the
HTTP status line on stderr); 3 for a connection or protocol error.
"""
import argparse
import base64
import hashlib
import os
import socket
import ssl
import struct
import sys
import time
import urllib.parse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url", help="ws://HOST:PORT/PATH or wss://...")
    ap.add_argument("--proto", help="Sec-WebSocket-Protocol to ask for")
    ap.add_argument("--cookie", help="session id (sent as khyve_session=ID), "
                    "or a whole NAME=VALUE cookie")
    ap.add_argument("--origin", help="Origin header (default: https://HOST[:PORT] "
                    "of the URL; 'none' sends none)")
    ap.add_argument("--send", action="append", default=[],
                    help="text to send as a text frame (repeatable; \\r \\n \\x.. escapes)")
    ap.add_argument("--send-binary", action="append", default=[],
                    help="text to send as a binary frame (same escapes)")
    ap.add_argument("--send-after", type=float, default=0.0,
                    help="seconds to wait after connecting before sending")
    ap.add_argument("--flood", type=int, default=0, metavar="N",
                    help="send N bytes in 16 KiB binary frames (stops when the server "
                    "stops taking them for a second)")
    ap.add_argument("--expect", help="exit 0 once the received bytes contain this (same escapes)")
    ap.add_argument("--status", type=int,
                    help="expect the upgrade to be refused with this HTTP status")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    ap.add_argument("--quiet", action="store_true", help="do not print what arrives")
    ap.add_argument("--no-read", action="store_true",
                    help="never read after the handshake (a client that stalls, "
                    "with a 4 KiB receive buffer)")
    return ap.parse_args()


def unescape(s):
    return s.encode("latin-1").decode("unicode_escape").encode("latin-1")


def connect(url, timeout, small_rcvbuf=False):
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("ws", "wss"):
        sys.exit("wsclient: the URL must be ws:// or wss://")
    port = u.port or (443 if u.scheme == "wss" else 80)
    family = socket.AF_INET6 if ":" in u.hostname else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if small_rcvbuf:  # a stalled client: let little wait in the kernel for it
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(timeout)
    sock.connect((u.hostname, port))
    if u.scheme == "wss":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["http/1.1"])
        sock = ctx.wrap_socket(sock, server_hostname=u.hostname)
    return u, port, sock


def handshake(sock, u, port, args):
    key = base64.b64encode(os.urandom(16)).decode()
    host = u.hostname if ":" not in u.hostname else "[%s]" % u.hostname
    default_port = 443 if u.scheme == "wss" else 80
    hostport = host if port == default_port else "%s:%d" % (host, port)
    path = u.path or "/"
    if u.query:
        path += "?" + u.query
    lines = ["GET %s HTTP/1.1" % path, "Host: " + hostport, "Upgrade: websocket",
             "Connection: Upgrade", "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
    origin = args.origin or "https://" + hostport
    if origin != "none":
        lines.append("Origin: " + origin)
    if args.proto:
        lines.append("Sec-WebSocket-Protocol: " + args.proto)
    if args.cookie:
        c = args.cookie if "=" in args.cookie else "khyve_session=" + args.cookie
        lines.append("Cookie: " + c)
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
        if len(head) > 65536:
            break
    text, _, rest = head.partition(b"\r\n\r\n")
    status_line = text.split(b"\r\n", 1)[0].decode("latin-1", "replace")
    parts = status_line.split()
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    headers = {}
    for line in text.split(b"\r\n")[1:]:
        k, _, v = line.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    if status == 101:
        want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != want:
            print("wsclient: wrong Sec-WebSocket-Accept", file=sys.stderr)
            sys.exit(3)
        if args.proto and headers.get("sec-websocket-protocol") != args.proto.split(",")[0].strip():
            print("wsclient: server chose subprotocol %r"
                  % headers.get("sec-websocket-protocol"), file=sys.stderr)
            sys.exit(3)
    return status, status_line or "(connection closed)", rest


def frame(opcode, payload):
    """A client frame: FIN set, masked as RFC 6455 5.3 requires."""
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


class Reader:
    """Frames out of a byte stream (server frames are not masked)."""

    def __init__(self, sock, pending):
        self.sock, self.buf = sock, pending

    def need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk

    def take(self, n):
        self.need(n)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def next_frame(self):
        b0, b1 = self.take(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self.take(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self.take(8))[0]
        mask = self.take(4) if b1 & 0x80 else None
        payload = self.take(n)
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return b0 & 0x0F, payload


def flood(sock, total, deadline):
    """Send `total` bytes in 16 KiB binary frames; report how far it got
    before the server stopped taking them (its flow control) or time ran out."""
    done, piece = 0, frame(OP_BINARY, b"f" * 16384)
    try:
        while done < total and time.monotonic() < deadline:
            sock.settimeout(max(0.1, min(1.0, deadline - time.monotonic())))
            sock.sendall(piece)
            done += 16384
    except (socket.timeout, TimeoutError):
        print("wsclient: the server stopped taking input after %d bytes" % done,
              file=sys.stderr)
        return
    except OSError as e:
        print("wsclient: flood ended after %d bytes: %s" % (done, e), file=sys.stderr)
        return
    print("wsclient: sent %d bytes" % done, file=sys.stderr)


def main():
    args = parse_args()
    deadline = time.monotonic() + args.timeout
    try:
        u, port, sock = connect(args.url, args.timeout, args.no_read)
        status, status_line, rest = handshake(sock, u, port, args)
    except (OSError, ssl.SSLError) as e:
        print("wsclient: %s" % e, file=sys.stderr)
        return 3
    if status != 101:
        print("wsclient: upgrade refused: %s" % status_line, file=sys.stderr)
        return 0 if args.status is not None and status == args.status else 2
    if args.status is not None:
        print("wsclient: upgrade accepted, expected %d" % args.status, file=sys.stderr)
        return 2
    if args.send_after:
        time.sleep(args.send_after)
    for s in args.send:
        sock.sendall(frame(OP_TEXT, unescape(s)))
    for s in args.send_binary:
        sock.sendall(frame(OP_BINARY, unescape(s)))
    if args.flood:
        flood(sock, args.flood, deadline)
    if args.no_read:
        time.sleep(max(0.0, deadline - time.monotonic()))
        return 0
    reader, seen = Reader(sock, rest), b""
    want = unescape(args.expect) if args.expect else None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            op, payload = reader.next_frame()
        except (socket.timeout, TimeoutError):
            break
        except (EOFError, OSError, ssl.SSLError) as e:
            print("wsclient: connection ended: %s" % (e or "EOF"), file=sys.stderr)
            break
        if op == OP_PING:
            sock.sendall(frame(OP_PONG, payload))
        elif op == OP_CLOSE:
            code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 0
            print("wsclient: closed by the server (%d %s)"
                  % (code, payload[2:].decode("utf-8", "replace")), file=sys.stderr)
            try:
                sock.sendall(frame(OP_CLOSE, payload[:2]))
            except OSError:
                pass
            break
        elif op in (OP_TEXT, OP_BINARY, OP_CONT):
            if not args.quiet:
                sys.stdout.write(payload.decode("utf-8", "replace"))
                sys.stdout.flush()
            seen = (seen + payload)[-65536:]
            if want and want in seen:
                if not args.quiet:
                    sys.stdout.write("\n")
                return 0
    if want:
        print("wsclient: %r not seen within %g s" % (args.expect, args.timeout), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
