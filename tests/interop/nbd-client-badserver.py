#!/usr/bin/env python3
"""A hostile NBD server for tests/interop/nbd-client.sh.

    nbd-client-badserver.py SOCKET FAULT

Serves one client on the unix socket SOCKET: a correct fixed newstyle
handshake (simple replies only: every option but NBD_OPT_GO is refused
with NBD_REP_ERR_UNSUP) for a 1 MiB export, then answers requests until
FAULT strikes, at the first read:
  close       hang up with the read in flight
  magic       a reply with a bad magic
  cookie      a reply to a cookie that was never sent
  structured  a structured reply chunk, never negotiated
  short       (structured replies negotiated) a read answered with data
              for its first half only, then the final chunk
Waits for the client to go away before it exits.
"""
import socket
import struct
import sys

SIZE = 1 << 20


def recv_all(c, n):
    buf = b""
    while len(buf) < n:
        part = c.recv(n - len(buf))
        if not part:
            raise EOFError
        buf += part
    return buf


def handshake(c, fault):
    c.sendall(b"NBDMAGIC" + b"IHAVEOPT" + struct.pack(">H", 3))
    recv_all(c, 4)
    while True:
        _, opt, length = struct.unpack(">QLL", recv_all(c, 16))
        recv_all(c, length)
        if opt == 8 and fault == "short":   # NBD_OPT_STRUCTURED_REPLY
            c.sendall(struct.pack(">QLLL", 0x3e889045565a9, opt, 1, 0))
            continue
        if opt != 7:            # NBD_OPT_GO
            c.sendall(struct.pack(">QLLL", 0x3e889045565a9, opt,
                                  (1 << 31) | 1, 0))
            continue
        info = struct.pack(">HQH", 0, SIZE, 1 | 4)   # HAS_FLAGS, FLUSH
        c.sendall(struct.pack(">QLLL", 0x3e889045565a9, opt, 3, len(info))
                  + info)
        c.sendall(struct.pack(">QLLL", 0x3e889045565a9, opt, 1, 0))
        return


def serve(c, fault):
    while True:
        _, _, cmd, cookie, offset, length = struct.unpack(">LHHQQL",
                                                     recv_all(c, 28))
        if cmd == 2:            # NBD_CMD_DISC
            return
        if cmd == 1:            # NBD_CMD_WRITE
            recv_all(c, length)
        if cmd != 0:
            c.sendall(struct.pack(">LLQ", 0x67446698, 0, cookie))
            continue
        if fault == "short":
            half = length // 2
            c.sendall(struct.pack(">LHHQLQ", 0x668e33ef, 0, 1, cookie,
                                  8 + half, offset) + b"\1" * half)
            c.sendall(struct.pack(">LHHQL", 0x668e33ef, 1, 0, cookie, 0))
        if fault == "close":
            c.shutdown(socket.SHUT_RDWR)
        elif fault == "magic":
            c.sendall(struct.pack(">LLQ", 0x12345678, 0, cookie))
        elif fault == "cookie":
            c.sendall(struct.pack(">LLQ", 0x67446698, 0, cookie + 1000))
        elif fault == "structured":
            c.sendall(struct.pack(">LHHQL", 0x668e33ef, 1, 0, cookie, 0))
        try:
            while c.recv(4096):
                pass
        except OSError:
            pass
        return


def main():
    path, fault = sys.argv[1], sys.argv[2]
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(1)
    c, _ = s.accept()
    try:
        handshake(c, fault)
        serve(c, fault)
    except (EOFError, OSError):
        pass


main()
