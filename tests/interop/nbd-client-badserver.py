#!/usr/bin/env python3
"""A hostile NBD server for tests/interop/nbd-client.sh and
nbd-client-timeout.sh.

    nbd-client-badserver.py SOCKET FAULT
    nbd-client-badserver.py --list

SOCKET is a unix socket path, or tcp:PORTFILE: a TCP port on 127.0.0.1
chosen by the kernel, whose number is written to PORTFILE once the
server is ready.  Serves one client on SOCKET a 1 MiB export of zeroes with
a correct fixed newstyle handshake (structured replies and base:allocation
where the fault needs them, else every option but NBD_OPT_GO refused with
NBD_REP_ERR_UNSUP), and answers requests correctly until FAULT strikes:
in the handshake (the faults named hs-*), or at the first request of the
fault's command (READ, BLOCK_STATUS or FLUSH); or it goes silent
(SILENT_FAULTS, below).  --list prints each fault but the silent ones
with the command it strikes at, one per line.  After the fault it waits
for the client to go away, then exits.
"""
import os
import socket
import struct
import sys
import time

SIZE = 1 << 20
REP_MAGIC = 0x3e889045565a9
SIMPLE = 0x67446698
STRUCT = 0x668e33ef
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH, CMD_BS = 0, 1, 2, 3, 7
T_NONE, T_DATA, T_HOLE, T_STATUS = 0, 1, 2, 5
T_ERROR, T_ERROR_OFFSET = (1 << 15) | 1, (1 << 15) | 2
DONE = 1
CTX_ID = 7          # the id given to base:allocation


def chunk(cookie, ctype, payload, flags=DONE):
    return struct.pack(">LHHQL", STRUCT, flags, ctype, cookie,
                       len(payload)) + payload


def simple(cookie, error=0):
    return struct.pack(">LLQ", SIMPLE, error, cookie)


# Post-handshake faults: command -> what the server sends instead of the
# right reply (c = cookie, o = offset, n = length).
FAULTS = {
    "close": (CMD_READ, None),
    "magic": (CMD_READ, lambda c, o, n: struct.pack(">LLQ", 0x12345678, 0, c)),
    "cookie": (CMD_READ, lambda c, o, n: simple(c + 1000)),
    "structured": (CMD_READ, lambda c, o, n: chunk(c, T_NONE, b"")),
    "short": (CMD_READ, lambda c, o, n:
              chunk(c, T_DATA, struct.pack(">Q", o) + b"\1" * (n // 2), 0)
              + chunk(c, T_NONE, b"")),
    "simple-data": (CMD_READ, lambda c, o, n: simple(c) + b"\0" * n),
    "data-to-flush": (CMD_FLUSH, lambda c, o, n:
                      chunk(c, T_DATA, struct.pack(">Q", 0) + b"\0" * 512)),
    "hole-size": (CMD_READ, lambda c, o, n:
                  chunk(c, T_HOLE, struct.pack(">Q", o))),
    "data-size": (CMD_READ, lambda c, o, n:
                  chunk(c, T_DATA, struct.pack(">L", 0))),
    "data-long": (CMD_READ, lambda c, o, n:
                  chunk(c, T_DATA, struct.pack(">Q", o) + b"\0" * (n + 1))),
    "outside": (CMD_READ, lambda c, o, n:
                chunk(c, T_HOLE, struct.pack(">QL", o + n, n))),
    "overlap": (CMD_READ, lambda c, o, n:
                chunk(c, T_HOLE, struct.pack(">QL", o, n), 0)
                + chunk(c, T_HOLE, struct.pack(">QL", o, n))),
    "error-size": (CMD_READ, lambda c, o, n:
                   chunk(c, T_ERROR, struct.pack(">H", 5))),
    "error-message": (CMD_READ, lambda c, o, n:
                      chunk(c, T_ERROR, struct.pack(">LH", 5, 100) + b"x")),
    "error-zero": (CMD_READ, lambda c, o, n:
                   chunk(c, T_ERROR, struct.pack(">LH", 0, 0))),
    "huge-chunk": (CMD_READ, lambda c, o, n:
                   struct.pack(">LHHQL", STRUCT, DONE, T_ERROR, c, 1 << 30)),
    "none-payload": (CMD_READ, lambda c, o, n:
                     chunk(c, T_NONE, b"\0\0\0\0")),
    "unknown-type": (CMD_READ, lambda c, o, n: chunk(c, 77, b"")),
    "status-to-read": (CMD_READ, lambda c, o, n:
                       chunk(c, T_STATUS, struct.pack(">LLL", CTX_ID, n, 0))),
    "status-size": (CMD_BS, lambda c, o, n:
                    chunk(c, T_STATUS, struct.pack(">LL", CTX_ID, n))),
    "status-context": (CMD_BS, lambda c, o, n:
                       chunk(c, T_STATUS, struct.pack(">LLL", 99, n, 0))),
    "status-twice": (CMD_BS, lambda c, o, n:
                     chunk(c, T_STATUS, struct.pack(">LLL", CTX_ID, n, 0), 0)
                     + chunk(c, T_STATUS, struct.pack(">LLL", CTX_ID, n, 0))),
    "status-none": (CMD_BS, lambda c, o, n: chunk(c, T_NONE, b"")),
}

# Handshake faults: the reply that replaces NBD_OPT_GO's.
HS_FAULTS = {
    "hs-reply-magic": lambda opt: struct.pack(">QLLL", 0x1234, opt, 1, 0),
    "hs-reply-option": lambda opt: struct.pack(">QLLL", REP_MAGIC, 99, 1, 0),
    "hs-reply-long": lambda opt: struct.pack(">QLLL", REP_MAGIC, opt, 3,
                                             1 << 30),
    "hs-no-size": lambda opt: struct.pack(">QLLL", REP_MAGIC, opt, 1, 0),
    "hs-block-size": lambda opt: info(opt, struct.pack(">HLLL", 3, 3, 4096,
                                                       1 << 20))
                                 + ack_go(opt),
    "hs-info-size": lambda opt: info(opt, struct.pack(">HQ", 0, SIZE)),
}


# Faults of a server that goes silent (nbd-client-timeout.sh), not in
# --list: the client's time limits end them, not a malformed reply.
#   hs-silent-greeting  accepts, then sends nothing at all
#   hs-silent           answers every option but NBD_OPT_GO
#   silent              stops answering at the first READ, reads on
#   silent-once         "silent" on the first connection; serves the
#                       next one (a client that reconnects) correctly
#   slow                answers every request, each reply in four parts
#                       0.3 s apart: slow, never silent for long
#   healthy             answers every request correctly
#   blackhole           never accepts, and its backlog is full: a TCP
#                       client's SYNs are dropped (a host that is away),
#                       a unix client's connect() would block
#   vanish              answers the first READ; at the second, becomes
#                       "blackhole" and closes the connection: a client
#                       that reconnects finds a host that is away
SILENT_FAULTS = ("hs-silent-greeting", "hs-silent", "silent", "silent-once",
                 "slow", "healthy", "blackhole", "vanish")
SLOW_PARTS, SLOW_PAUSE = 4, 0.3


def info(opt, payload):
    return struct.pack(">QLLL", REP_MAGIC, opt, 3, len(payload)) + payload


def ack_go(opt):
    return (info(opt, struct.pack(">HQH", 0, SIZE, 1 | 4))
            + struct.pack(">QLLL", REP_MAGIC, opt, 1, 0))


def recv_all(c, n):
    buf = b""
    while len(buf) < n:
        part = c.recv(n - len(buf))
        if not part:
            raise EOFError
        buf += part
    return buf


def drain(c):
    """Reads (and ignores) whatever the client sends until it goes."""
    while c.recv(4096):
        pass


def handshake(c, fault):
    """Returns whether structured replies were negotiated."""
    sr = fault not in ("close", "magic", "cookie", "structured")
    if fault == "hs-silent-greeting":
        drain(c)
        return None
    c.sendall(b"NBDMAGIC" + b"IHAVEOPT" + struct.pack(">H", 3))
    recv_all(c, 4)
    while True:
        _, opt, length = struct.unpack(">QLL", recv_all(c, 16))
        data = recv_all(c, length)
        if opt == 8 and sr:             # NBD_OPT_STRUCTURED_REPLY
            c.sendall(struct.pack(">QLLL", REP_MAGIC, opt, 1, 0))
            continue
        if opt == 10 and sr:            # NBD_OPT_SET_META_CONTEXT
            name = b"base:allocation"
            if name in data:
                c.sendall(struct.pack(">QLLL", REP_MAGIC, opt, 4,
                                      4 + len(name))
                          + struct.pack(">L", CTX_ID) + name)
            c.sendall(struct.pack(">QLLL", REP_MAGIC, opt, 1, 0))
            continue
        if opt != 7:                    # NBD_OPT_GO
            c.sendall(struct.pack(">QLLL", REP_MAGIC, opt, (1 << 31) | 1, 0))
            continue
        if fault == "hs-silent":
            drain(c)
            return None
        if fault in HS_FAULTS:
            c.sendall(HS_FAULTS[fault](opt))
            return None
        c.sendall(ack_go(opt))
        return sr


def send_slowly(c, data):
    """Sends data in SLOW_PARTS parts, SLOW_PAUSE seconds apart."""
    step = -(-len(data) // SLOW_PARTS)
    for i in range(0, len(data), step):
        time.sleep(SLOW_PAUSE)
        c.sendall(data[i:i + step])


def answer(c, sr, cmd, cookie, offset, length, send=None, status=3):
    """The right reply to a request (block status: flags status)."""
    send = send or c.sendall
    if cmd == CMD_READ and sr:
        send(chunk(cookie, T_HOLE, struct.pack(">QL", offset, length)))
    elif cmd == CMD_READ:
        send(simple(cookie) + b"\0" * length)
    elif cmd == CMD_BS:
        send(chunk(cookie, T_STATUS,
                   struct.pack(">LLL", CTX_ID, length, status)))
    else:
        send(simple(cookie))


# The connections that fill the backlog, kept open.
FILLERS = []


def fill_backlog(listener, address):
    """Fills the backlog of listener (listen(0)) at address with
    connections that it never accepts: the kernel then drops a TCP
    client's SYN and makes a unix client's connect() wait (EAGAIN if
    non-blocking)."""
    for _ in range(2):
        f = socket.socket(listener.family)
        f.setblocking(False)
        f.connect_ex(address)
        FILLERS.append(f)
    time.sleep(0.2)             # TCP: the first filler's handshake ends


def hold():
    """Keeps the listener (and its full backlog) until killed."""
    while True:
        time.sleep(60)


def serve_silent(c, sr, fault, listener, address):
    """The faults of SILENT_FAULTS after the handshake ("healthy": none)."""
    reads = 0
    while True:
        _, _, cmd, cookie, offset, length = struct.unpack(
            ">LHHQQL", recv_all(c, 28))
        if cmd == CMD_DISC:
            return
        if cmd == CMD_WRITE:
            recv_all(c, length)
        reads += cmd == CMD_READ
        if fault == "vanish" and reads == 2:
            fill_backlog(listener, address)
            return
        # all data, so that convert reads it
        if fault == "slow":
            answer(c, sr, cmd, cookie, offset, length,
                   lambda data: send_slowly(c, data), status=0)
        elif cmd == CMD_READ and fault not in ("healthy", "vanish"):
            drain(c)
            return
        else:
            answer(c, sr, cmd, cookie, offset, length, status=0)


def serve(c, sr, fault, listener, address):
    if fault in SILENT_FAULTS:
        serve_silent(c, sr, fault, listener, address)
        return
    strike_cmd, action = FAULTS[fault]
    while True:
        _, _, cmd, cookie, offset, length = struct.unpack(
            ">LHHQQL", recv_all(c, 28))
        if cmd == CMD_DISC:
            return
        if cmd == CMD_WRITE:
            recv_all(c, length)
        if cmd != strike_cmd:
            answer(c, sr, cmd, cookie, offset, length)
            continue
        if action is None:
            c.shutdown(socket.SHUT_RDWR)
        else:
            c.sendall(action(cookie, offset, length))
        return


def main():
    if sys.argv[1] == "--list":
        names = {CMD_READ: "read", CMD_BS: "block-status", CMD_FLUSH: "flush"}
        for name, (cmd, _) in FAULTS.items():
            print(name, names[cmd])
        for name in HS_FAULTS:
            print(name, "handshake")
        return
    where, fault = sys.argv[1], sys.argv[2]
    if (fault not in FAULTS and fault not in HS_FAULTS
            and fault not in SILENT_FAULTS):
        sys.exit("unknown fault " + fault)
    # the path or port appears once the server is ready for the client
    if where.startswith("tcp:"):
        s = socket.socket(socket.AF_INET)
        s.bind(("127.0.0.1", 0))
        ready = where[4:]
        address = s.getsockname()
    else:
        s = socket.socket(socket.AF_UNIX)
        s.bind(where + ".tmp")
        ready = address = where
    s.listen(0)
    if fault == "blackhole":
        fill_backlog(s, where + ".tmp" if s.family == socket.AF_UNIX
                     else address)
    if s.family == socket.AF_INET:
        with open(ready + ".tmp", "w") as f:
            f.write("%d\n" % address[1])
    os.rename(ready + ".tmp", ready)
    if fault == "blackhole":
        hold()
    for conn in range(2 if fault == "silent-once" else 1):
        c, _ = s.accept()
        try:
            sr = handshake(c, fault)
            if sr is not None:
                serve(c, sr, fault, s, address)
                if fault == "vanish":
                    c.close()
                    hold()
            drain(c)
        except (EOFError, OSError):
            pass
        c.close()
        fault = "healthy" if fault == "silent-once" else fault

main()
