#!/usr/bin/env python3
"""Hostile NBD clients against a running server, over raw sockets.

    nbd-hostile.py SOCKET EXPORT_SIZE HANDSHAKE_LIMIT_SECS

The server must serve the default export ("") of EXPORT_SIZE bytes,
writable, on the unix socket SOCKET, with -t and -e 0.  Each case breaks
the protocol in one way and checks the server's answer (an error reply,
or a closed connection); between cases a well-behaved client checks that
the server still serves.  One client connects first and never finishes
its handshake: the server must drop it after HANDSHAKE_LIMIT_SECS.

Prints "ok NAME" / "FAIL NAME: why" per case and "N passed, N failed".
"""
import socket
import struct
import sys
import time

NBDMAGIC = 0x4e42444d41474943
IHAVEOPT = 0x49484156454f5054
REP_MAGIC = 0x0003e889045565a9
REQ_MAGIC = 0x25609513
SIMPLE_MAGIC = 0x67446698
STRUCT_MAGIC = 0x668e33ef

OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_INFO, OPT_GO = 1, 2, 3, 6, 7
OPT_STRUCTURED_REPLY, OPT_SET_META_CONTEXT = 8, 10
REP_ACK, REP_INFO = 1, 3
ERR = 1 << 31
REP_ERR_UNSUP, REP_ERR_INVALID = ERR | 1, ERR | 3
REP_ERR_UNKNOWN, REP_ERR_TOO_BIG = ERR | 6, ERR | 9
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH = 0, 1, 2, 3
CMD_WRITE_ZEROES, CMD_BLOCK_STATUS = 6, 7
EPERM, EINVAL, ENOSPC = 1, 22, 28

sock_path = sys.argv[1]
export_size = int(sys.argv[2])
handshake_limit = float(sys.argv[3])
passed = failed = 0


class Closed(Exception):
    pass


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(handshake_limit + 10)
    s.connect(sock_path)
    return s


def recv_all(s, n):
    buf = b''
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise Closed()
        buf += chunk
    return buf


def is_closed(s, timeout=5.0):
    """True if the server closes the connection (EOF) within timeout."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def greet(s, flags=3):
    magic, opts, hflags = struct.unpack('>QQH', recv_all(s, 18))
    assert magic == NBDMAGIC and opts == IHAVEOPT, 'bad greeting'
    s.sendall(struct.pack('>I', flags))
    return hflags


def send_opt(s, opt, data=b'', length=None):
    if length is None:
        length = len(data)
    s.sendall(struct.pack('>QII', IHAVEOPT, opt, length) + data)


def read_rep(s):
    magic, opt, rtype, length = struct.unpack('>QIII', recv_all(s, 20))
    assert magic == REP_MAGIC, 'bad reply magic'
    return opt, rtype, recv_all(s, length)


def go(s, name=b'', structured=False, contexts=(), greeted=False):
    """Handshake up to transmission; returns the transmission flags."""
    if not greeted:
        greet(s)
    if structured:
        send_opt(s, OPT_STRUCTURED_REPLY)
        assert read_rep(s)[1] == REP_ACK
    if contexts:
        data = struct.pack('>I', len(name)) + name
        data += struct.pack('>I', len(contexts))
        for c in contexts:
            data += struct.pack('>I', len(c)) + c
        send_opt(s, OPT_SET_META_CONTEXT, data)
        while read_rep(s)[1] != REP_ACK:
            pass
    send_opt(s, OPT_GO, struct.pack('>I', len(name)) + name +
             struct.pack('>H', 0))
    flags = None
    while True:
        _, rtype, data = read_rep(s)
        if rtype == REP_INFO and struct.unpack('>H', data[:2])[0] == 0:
            flags = struct.unpack('>QH', data[2:12])[1]
        if rtype == REP_ACK:
            return flags
        assert not rtype & ERR, 'GO refused: %r' % data


def request(s, cmd, offset, length, flags=0, cookie=1, payload=b''):
    s.sendall(struct.pack('>IHHQQI', REQ_MAGIC, flags, cmd, cookie, offset,
                          length) + payload)


def simple_reply(s):
    magic, error, cookie = struct.unpack('>IIQ', recv_all(s, 16))
    assert magic == SIMPLE_MAGIC, 'not a simple reply: 0x%x' % magic
    return error, cookie


def chunk(s):
    magic, flags, ctype, cookie, length = struct.unpack(
        '>IHHQI', recv_all(s, 20))
    assert magic == STRUCT_MAGIC, 'not a structured chunk: 0x%x' % magic
    return flags, ctype, cookie, recv_all(s, length)


def good_client():
    """A correct client: write, read back, disconnect politely."""
    s = connect()
    go(s)
    pattern = bytes(range(256)) * 16
    request(s, CMD_WRITE, 4096, len(pattern), cookie=7, payload=pattern)
    assert simple_reply(s) == (0, 7), 'write failed'
    request(s, CMD_READ, 4096, len(pattern), cookie=8)
    assert simple_reply(s) == (0, 8), 'read failed'
    assert recv_all(s, len(pattern)) == pattern, 'read back differs'
    request(s, CMD_DISC, 0, 0)
    s.close()


def case(name, fn):
    global passed, failed
    try:
        fn()
        good_client()
        print('ok %s' % name)
        passed += 1
    except Exception as e:
        print('FAIL %s: %s %s' % (name, type(e).__name__, e))
        failed += 1


# --- handshake ---

def bad_client_flags():
    s = connect()
    greet(s, flags=0x80000001)
    assert is_closed(s), 'unknown client flags accepted'


def not_fixed_newstyle():
    s = connect()
    greet(s, flags=0)
    assert is_closed(s), 'non-fixed-newstyle client accepted'


def bad_option_magic():
    s = connect()
    greet(s)
    s.sendall(struct.pack('>QII', 0x1122334455667788, OPT_GO, 0))
    assert is_closed(s), 'bad option magic accepted'


def unknown_option():
    s = connect()
    greet(s)
    send_opt(s, 0x7777, b'junk')
    opt, rtype, _ = read_rep(s)
    assert (opt, rtype) == (0x7777, REP_ERR_UNSUP), 'got %x' % rtype
    send_opt(s, 5)                      # STARTTLS, without TLS configured
    assert read_rep(s)[1] == (1 << 31) | 2              # REP_ERR_POLICY
    go(s, greeted=True)                                 # still usable
    request(s, CMD_DISC, 0, 0)


def huge_option_length():
    s = connect()
    greet(s)
    send_opt(s, OPT_GO, b'', length=0xffffffff)
    _, rtype, _ = read_rep(s)
    assert rtype == REP_ERR_TOO_BIG, 'got %x' % rtype
    assert is_closed(s), 'connection kept after an oversized option'


def truncated_option():
    s = connect()
    greet(s)
    send_opt(s, OPT_GO, b'\0\0', length=100)
    s.shutdown(socket.SHUT_WR)
    assert is_closed(s), 'truncated option not detected'


def malformed_options():
    s = connect()
    greet(s)
    # name length beyond the option's data
    send_opt(s, OPT_GO, struct.pack('>I', 1000) + b'x')
    assert read_rep(s)[1] == REP_ERR_INVALID
    # info request count disagreeing with the data
    send_opt(s, OPT_INFO, struct.pack('>IH', 0, 5))
    assert read_rep(s)[1] == REP_ERR_INVALID
    # LIST and STRUCTURED_REPLY take no data
    send_opt(s, OPT_LIST, b'x')
    assert read_rep(s)[1] == REP_ERR_INVALID
    send_opt(s, OPT_STRUCTURED_REPLY, b'x')
    assert read_rep(s)[1] == REP_ERR_INVALID
    # meta contexts before structured replies
    send_opt(s, OPT_SET_META_CONTEXT, struct.pack('>II', 0, 0))
    assert read_rep(s)[1] == REP_ERR_INVALID
    # unknown export
    send_opt(s, OPT_GO, struct.pack('>I', 4) + b'nope' + struct.pack('>H', 0))
    assert read_rep(s)[1] == REP_ERR_UNKNOWN
    send_opt(s, OPT_ABORT)
    assert read_rep(s)[1] == REP_ACK
    assert is_closed(s)


def export_name_unknown():
    s = connect()
    greet(s)
    send_opt(s, OPT_EXPORT_NAME, b'nope')
    assert is_closed(s), 'unknown NBD_OPT_EXPORT_NAME not refused'


def option_flood():
    s = connect()
    greet(s)
    for _ in range(200):
        send_opt(s, OPT_LIST)
        while read_rep(s)[1] != REP_ACK:
            pass
    send_opt(s, OPT_ABORT)
    read_rep(s)


# --- transmission ---

def bad_request_magic():
    s = connect()
    go(s)
    s.sendall(struct.pack('>IHHQQI', 0xdeadbeef, 0, CMD_READ, 1, 0, 512))
    assert is_closed(s), 'bad request magic accepted'


def request_errors():
    s = connect()
    flags = go(s)
    assert flags & 1, 'transmission flags missing'
    checks = [
        # (cmd, offset, length, flags, expected error)
        (CMD_READ, 0, 64 * 1024 * 1024, 0, EINVAL),            # too big
        (CMD_READ, export_size - 512, 1024, 0, EINVAL),        # past end
        (CMD_READ, 1 << 62, 512, 0, EINVAL),                   # far past
        (CMD_WRITE_ZEROES, export_size, 512, 0, ENOSPC),       # past end
        (CMD_READ, 0, 512, 0x8000, EINVAL),                    # bad flag
        (CMD_READ, 0, 512, 4, EINVAL),                         # DF, simple
        (CMD_BLOCK_STATUS, 0, 512, 0, EINVAL),                 # no context
        (0x55, 0, 512, 0, EINVAL),                             # unknown
    ]
    for i, (cmd, off, length, fl, err) in enumerate(checks):
        request(s, cmd, off, length, flags=fl, cookie=100 + i)
        got = simple_reply(s)
        assert got == (err, 100 + i), 'case %d: got %r' % (i, got)
    # a write past the end still has its payload consumed
    request(s, CMD_WRITE, export_size, 512, cookie=200, payload=b'x' * 512)
    assert simple_reply(s) == (ENOSPC, 200)
    request(s, CMD_FLUSH, 0, 0, cookie=201)
    assert simple_reply(s) == (0, 201)
    request(s, CMD_DISC, 0, 0)


def structured_errors():
    s = connect()
    go(s, structured=True, contexts=[b'base:allocation'])
    request(s, CMD_READ, export_size, 512, cookie=5)
    flags, ctype, cookie, data = chunk(s)
    assert (flags, ctype, cookie) == (1, 0x8001, 5), 'no error chunk'
    assert struct.unpack('>I', data[:4])[0] == EINVAL
    request(s, CMD_BLOCK_STATUS, 0, 0, cookie=6)                # length 0
    flags, ctype, cookie, _ = chunk(s)
    assert (flags, ctype, cookie) == (1, 0x8001, 6)
    request(s, CMD_BLOCK_STATUS, 0, export_size, flags=8, cookie=7)
    flags, ctype, cookie, data = chunk(s)
    assert (flags, ctype, cookie) == (1, 5, 7), 'no status chunk'
    assert len(data) == 12, 'REQ_ONE gave %d extents' % ((len(data) - 4) / 8)
    request(s, CMD_DISC, 0, 0)


def oversized_write():
    s = connect()
    go(s)
    request(s, CMD_WRITE, 0, 64 * 1024 * 1024, cookie=9)
    try:
        s.sendall(b'\0' * 65536)
    except BrokenPipeError:
        pass                # the server may hang up before all is sent
    assert is_closed(s), 'oversized write kept the connection'


def truncated_requests():
    s = connect()
    go(s)
    s.sendall(struct.pack('>IHH', REQ_MAGIC, 0, CMD_READ))      # half
    s.close()
    s = connect()
    go(s)
    request(s, CMD_WRITE, 0, 65536, cookie=3, payload=b'y' * 1000)
    s.close()                                                   # mid-payload


def disconnect_mid_request():
    s = connect()
    go(s)
    for i in range(16):
        request(s, CMD_READ, 0, 32 * 1024 * 1024, cookie=i)
    s.close()                                                   # no reading


def many_requests_unread():
    """A client that keeps sending but never reads its replies."""
    s = connect()
    go(s)
    s.setblocking(False)
    sent = 0
    try:
        for i in range(4096):
            s.send(struct.pack('>IHHQQI', REQ_MAGIC, 0, CMD_READ, i, 0,
                               1024 * 1024))
            sent += 1
    except BlockingIOError:
        pass
    s.close()


def slow_handshake_start():
    s = connect()
    recv_all(s, 18)          # the greeting, then silence
    return s, time.monotonic()


def slow_handshake_check(s, t0):
    global passed, failed
    name = 'slow handshake is cut off after the time limit'
    try:
        closed = is_closed(s, timeout=handshake_limit + 8)
        elapsed = time.monotonic() - t0
        assert closed, 'still open after %.1f s' % elapsed
        assert elapsed >= handshake_limit - 1, 'closed early (%.1f s)' % \
            elapsed
        good_client()
        print('ok %s (%.1f s)' % (name, elapsed))
        passed += 1
    except Exception as e:
        print('FAIL %s: %s %s' % (name, type(e).__name__, e))
        failed += 1


slow = slow_handshake_start()
for name, fn in [
        ('unknown client flags close the connection', bad_client_flags),
        ('a client without fixed newstyle is refused', not_fixed_newstyle),
        ('bad option magic closes the connection', bad_option_magic),
        ('unknown options get NBD_REP_ERR_UNSUP', unknown_option),
        ('a huge option length gets ERR_TOO_BIG and a close',
         huge_option_length),
        ('a truncated option closes the connection', truncated_option),
        ('malformed options get NBD_REP_ERR_INVALID/UNKNOWN',
         malformed_options),
        ('an unknown NBD_OPT_EXPORT_NAME closes', export_name_unknown),
        ('200 option rounds in one handshake', option_flood),
        ('bad request magic closes the connection', bad_request_magic),
        ('bad requests get EINVAL/ENOSPC and the client stays',
         request_errors),
        ('structured error and REQ_ONE block status chunks',
         structured_errors),
        ('an oversized write closes the connection', oversized_write),
        ('truncated requests and payloads', truncated_requests),
        ('a client leaving with 16 reads in flight', disconnect_mid_request),
        ('a client that never reads its replies', many_requests_unread)]:
    case(name, fn)
slow_handshake_check(*slow)
print('%d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
