#!/usr/bin/env python3
"""Helpers for tests/vnc/run: check a vncshot PNG against the fake display's
pattern, and play the hostile or unusual clients (garbage, a message cut
off, a stalled message, a WebSocket upgrade) with raw sockets.

  vnctool.py png-check FILE WIDTH HEIGHT GEN
  vnctool.py png-size FILE             (prints WIDTHxHEIGHT)
  vnctool.py garbage HOST PORT
  vnctool.py midmsg HOST PORT
  vnctool.py stall HOST PORT SECONDS
  vnctool.py websocket HOST PORT
Exit 0 when the check passes, 1 (with one line on stderr) when not."""
import base64
import hashlib
import os
import socket
import struct
import sys
import time
import zlib


def fail(msg):
    print("vnctool: " + msg, file=sys.stderr)
    sys.exit(1)


def pattern(x, y, gen):
    b = ((x >> 8) + 16 * (y >> 8) + 64 * gen) & 255
    return (x & 255, y & 255, b)


def png_rows(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + ": not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    w, h, depth, ctype = hdr[0], hdr[1], hdr[2], hdr[3]
    if depth != 8 or ctype != 2:
        fail(path + ": not 8-bit RGB")
    raw = zlib.decompress(idat)
    stride = w * 3
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0
            b = prev[i]
            c = prev[i - 3] if i >= 3 else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pr) & 255
        rows.append(line)
        prev = line
    return w, h, rows


def png_check(path, width, height, gen):
    w, h, rows = png_rows(path)
    if (w, h) != (width, height):
        fail("%s is %dx%d, want %dx%d" % (path, w, h, width, height))
    bad = 0
    for y in range(h):
        row = rows[y]
        for x in range(w):
            if tuple(row[x * 3:x * 3 + 3]) != pattern(x, y, gen):
                if bad == 0:
                    first = (x, y, tuple(row[x * 3:x * 3 + 3]), pattern(x, y, gen))
                bad += 1
    if bad:
        fail("%s: %d pixels differ, first at (%d,%d): %s, want %s" % ((path, bad) + first))


def connect(host, port):
    s = socket.create_connection((host, int(port)), timeout=10)
    return s


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            fail("server closed during the handshake")
        buf += chunk
    return buf


def handshake(s):
    """RFB 3.8 with security type None, shared; returns after ServerInit."""
    if not recv_exact(s, 12).startswith(b"RFB 003."):
        fail("no RFB version")
    s.sendall(b"RFB 003.008\n")
    n = recv_exact(s, 1)[0]
    types = recv_exact(s, n)
    if 1 not in types:
        fail("security type None not offered")
    s.sendall(b"\x01")
    if recv_exact(s, 4) != b"\0\0\0\0":
        fail("security result not OK")
    s.sendall(b"\x01")
    init = recv_exact(s, 24)
    (namelen,) = struct.unpack(">I", init[20:24])
    recv_exact(s, namelen)


def wait_closed(s, seconds):
    """True when the server closes the connection within `seconds`."""
    s.settimeout(seconds)
    end = time.time() + seconds
    try:
        while time.time() < end:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def garbage(host, port):
    s = connect(host, port)
    recv_exact(s, 12)
    s.sendall(b"RFB 003.008\n")
    recv_exact(s, 1)
    s.sendall(b"\x01")
    s.recv(4)
    s.sendall(b"\x01")
    s.recv(4096)
    # Message types that do not exist, then random bytes.
    try:
        s.sendall(bytes([0xAB, 0x7F]) + os.urandom(4096))
    except (ConnectionResetError, BrokenPipeError):
        return
    if not wait_closed(s, 10):
        fail("server kept a client that sent garbage")


def midmsg(host, port):
    s = connect(host, port)
    handshake(s)
    # SetEncodings announcing 10 encodings, of which two arrive.
    s.sendall(struct.pack(">BxH", 2, 10) + struct.pack(">ii", 0, 5))
    s.close()


def stall(host, port, seconds):
    s = connect(host, port)
    handshake(s)
    # A PointerEvent's first two of six bytes, then nothing.
    s.sendall(b"\x05\x01")
    closed = wait_closed(s, float(seconds))
    s.close()
    if not closed:
        fail("server kept a client stalled in the middle of a message")


def websocket(host, port):
    s = connect(host, port)
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET /websockify HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
           "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: binary\r\n"
           "Origin: http://localhost\r\n\r\n" % (host, port, key))
    s.sendall(req.encode())
    resp = b""
    while b"\r\n\r\n" not in resp:
        chunk = s.recv(4096)
        if not chunk:
            fail("server closed the WebSocket handshake")
        resp += chunk
    head, rest = resp.split(b"\r\n\r\n", 1)
    lines = head.decode(errors="replace").split("\r\n")
    if not lines[0].startswith("HTTP/1.1 101"):
        fail("WebSocket upgrade answered %r" % lines[0])
    want = base64.b64encode(hashlib.sha1(
        (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    accept = [l.split(":", 1)[1].strip() for l in lines
              if l.lower().startswith("sec-websocket-accept:")]
    if accept != [want]:
        fail("Sec-WebSocket-Accept %r, want %r" % (accept, want))
    buf = [rest]

    def read_frame():
        data = buf[0]
        while len(data) < 2:
            data += s.recv(4096)
        opcode, length = data[0] & 0x0F, data[1] & 0x7F
        while len(data) < 2 + length:
            data += s.recv(4096)
        payload, buf[0] = data[2:2 + length], data[2 + length:]
        return base64.b64decode(payload) if opcode == 1 else payload

    def send_frame(payload):
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        s.sendall(bytes([0x82, 0x80 | len(payload)]) + mask + body)

    # The server's RFB version, then our version and the security types:
    # RFB flows both ways through the frames (as noVNC speaks it).
    version = read_frame()
    if not version.startswith(b"RFB 003.00"):
        fail("first WebSocket frame %r is not the RFB version" % version)
    send_frame(b"RFB 003.008\n")
    types = read_frame()
    if len(types) < 2 or types[0] == 0 or 1 not in types[1:1 + types[0]]:
        fail("security types over WebSocket: %r" % types)


def main(argv):
    if len(argv) < 2:
        fail("usage: see the file's doc string")
    cmd, args = argv[1], argv[2:]
    if cmd == "png-size" and len(args) == 1:
        data = open(args[0], "rb").read(24)
        print("%dx%d" % struct.unpack(">II", data[16:24]))
    elif cmd == "png-check" and len(args) == 4:
        png_check(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif cmd == "garbage" and len(args) == 2:
        garbage(*args)
    elif cmd == "midmsg" and len(args) == 2:
        midmsg(*args)
    elif cmd == "stall" and len(args) == 3:
        stall(*args)
    elif cmd == "websocket" and len(args) == 2:
        websocket(*args)
    else:
        fail("bad command " + " ".join(argv[1:]))


if __name__ == "__main__":
    main(sys.argv)
