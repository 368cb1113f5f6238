#!/usr/bin/env python3
"""qblock-storage-daemon against hostile NBD clients (issue 14): an
export removed over QMP while a client in the handshake does not read the
replies about it, safe and hard; clients that send big reads and never
read the replies (the daemon's memory stays within its buffer budget and
a well-behaved client is still served); the default connection limit.
Run it against an AddressSanitizer
build (./configure --enable-asan --builddir=build-asan) to prove that
nothing touches a freed export: the daemon's stderr must hold no
sanitizer report.

  tests/daemon/test-nbd-security.py BUILD_DIR
"""
import socket
import struct
import time

import qsd
from qsd import error_of, generic

t = qsd.Tests('test-nbd-security')

NBD_OPTS_MAGIC = 0x49484156454F5054
NBD_REP_MAGIC = 0x0003e889045565a9
NBD_OPT_LIST, NBD_OPT_INFO, NBD_OPT_GO = 3, 6, 7
NBD_REP_ACK = 1
NBD_REQUEST_MAGIC = 0x25609513
NBD_CMD_READ = 0
MiB = 1 << 20
# block/export/nbd-int.h and include/block/nbd.h
NBD_MAX_PAYLOAD_SIZE = 32 * MiB
NBD_CLIENT_BUFFER_BUDGET = 2 * NBD_MAX_PAYLOAD_SIZE
NBD_DEFAULT_BUFFER_BUDGET = 8 * NBD_MAX_PAYLOAD_SIZE
NBD_DEFAULT_MAX_CONNECTIONS = 100
NBD_OPT_STRUCTURED_REPLY, NBD_OPT_SET_META_CONTEXT = 8, 10
NBD_REP_INFO = 3
NBD_INFO_NAME = 1
NBD_FLAG_C_FIXED_NEWSTYLE = 1


def option(opt, data=b''):
    return struct.pack('>QII', NBD_OPTS_MAGIC, opt, len(data)) + data


def lstring(s):
    return struct.pack('>I', len(s)) + s.encode()


def handshake_client(sock_path):
    """A client past the greeting, in the option phase."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    s.settimeout(qsd.TIMEOUT)
    greeting = b''
    while len(greeting) < 18:
        greeting += s.recv(18 - len(greeting))
    s.sendall(struct.pack('>I', NBD_FLAG_C_FIXED_NEWSTYLE))
    return s


def flood(s, name):
    """The issue's reproducer: 5 NBD_OPT_LIST, 300 NBD_OPT_INFO naming the
    export (with NBD_INFO_NAME), and SET_META_CONTEXT, none read."""
    info = lstring(name) + struct.pack('>HH', 1, NBD_INFO_NAME)
    meta = lstring(name) + struct.pack('>I', 1) + lstring('base:allocation')
    data = option(NBD_OPT_LIST) * 5 + option(NBD_OPT_INFO, info) * 300
    data += option(NBD_OPT_STRUCTURED_REPLY)
    data += option(NBD_OPT_SET_META_CONTEXT, meta) * 300
    s.sendall(data)


def read_replies(s, name):
    """Reads option replies until EOF: (replies, bad ones, INFO_NAME
    replies that named something else than @name)."""
    buf = b''
    while True:
        try:
            data = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            data = b''
        if not data:
            break
        buf += data
    n = bad = wrong_name = 0
    while len(buf) >= 20:
        magic, opt, typ, length = struct.unpack('>QIII', buf[:20])
        if magic != NBD_REP_MAGIC:
            bad += 1
            break
        if len(buf) < 20 + length:
            break               # cut off by the disconnect
        payload = buf[20:20 + length]
        buf = buf[20 + length:]
        n += 1
        if typ == NBD_REP_INFO and payload[:2] == struct.pack('>H',
                                                              NBD_INFO_NAME):
            wrong_name += payload[2:] != name.encode()
    return n, bad, wrong_name


def recv_exact(s, n):
    buf = b''
    while len(buf) < n:
        data = s.recv(n - len(buf))
        if not data:
            raise OSError('EOF after %d of %d bytes' % (len(buf), n))
        buf += data
    return buf


def transmission_client(sock_path, name):
    """A client that chose export @name with NBD_OPT_GO (simple replies)
    and reads nothing more unless told to: its receive buffer is small, so
    the daemon's replies wait in the daemon."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(sock_path)
    s.settimeout(qsd.TIMEOUT)
    recv_exact(s, 18)
    s.sendall(struct.pack('>I', NBD_FLAG_C_FIXED_NEWSTYLE))
    s.sendall(option(NBD_OPT_GO, lstring(name) + struct.pack('>H', 0)))
    while True:
        magic, opt, typ, length = struct.unpack('>QIII', recv_exact(s, 20))
        recv_exact(s, length)
        if typ == NBD_REP_ACK:
            return s
        if typ != NBD_REP_INFO:
            raise OSError('NBD_OPT_GO failed: reply type 0x%x' % typ)


def read_request(cookie, offset, length):
    return struct.pack('>IHHQQI', NBD_REQUEST_MAGIC, 0, NBD_CMD_READ,
                       cookie, offset, length)


def rss(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    return 0


def export(c, sock, img, name):
    c.ok('blockdev-add', {'driver': 'raw', 'node-name': name,
                          'file': {'driver': 'file', 'filename': img}})
    c.ok('block-export-add', {'type': 'nbd', 'id': name, 'node-name': name,
                              'name': name, 'writable': True})


def test_remove_during_handshake(d, c, sock, img):
    export(c, sock, img, 'victim')
    s = handshake_client(sock)
    flood(s, 'victim')
    time.sleep(0.5)             # the daemon's replies fill the socket
    r = c.cmd('block-export-del', {'id': 'victim'})
    t.equal('a safe block-export-del is refused while a handshake client '
            'is being answered about the export', error_of(r),
            generic("export 'victim' still in use"))
    r = c.cmd('nbd-server-remove', {'name': 'victim', 'mode': 'hard'})
    t.equal('nbd-server-remove mode=hard removes it', r, {'return': {}})
    n, bad, wrong = read_replies(s, 'victim')
    s.close()
    t.check('the client got replies, then was disconnected', n > 0, n)
    t.equal('every reply well formed, every NBD_INFO_NAME the export\'s',
            (bad, wrong), (0, 0))
    ev = c.event('BLOCK_EXPORT_DELETED')
    t.equal('BLOCK_EXPORT_DELETED once the client is gone',
            ev and ev['data'], {'id': 'victim'})
    c.ok('blockdev-del', {'node-name': 'victim'})
    # the same client, now with hard block-export-del
    export(c, sock, img, 'victim2')
    s = handshake_client(sock)
    flood(s, 'victim2')
    time.sleep(0.5)
    r = c.cmd('block-export-del', {'id': 'victim2', 'mode': 'hard'})
    t.equal('block-export-del mode=hard removes it', r, {'return': {}})
    n, bad, wrong = read_replies(s, 'victim2')
    s.close()
    t.equal('every reply well formed after a hard block-export-del',
            (bad, wrong), (0, 0))
    t.check('BLOCK_EXPORT_DELETED for it',
            c.event('BLOCK_EXPORT_DELETED') is not None)
    c.ok('blockdev-del', {'node-name': 'victim2'})
    # a client that left: a safe removal goes through
    export(c, sock, img, 'victim3')
    s = handshake_client(sock)
    flood(s, 'victim3')
    time.sleep(0.2)
    s.close()
    ok = qsd.wait_for(lambda: 'return' in c.cmd('block-export-del',
                                                {'id': 'victim3'}))
    t.check('a safe block-export-del succeeds once the client is gone', ok)
    c.ok('blockdev-del', {'node-name': 'victim3'})
    t.check('daemon alive', d.alive())


def test_memory_budget(d, c, sock, img):
    """Issue 14, finding 5: clients that send 16 reads of 32 MiB each and
    read no reply made the daemon hold 512 MiB per client."""
    export(c, sock, img, 'big')
    before = rss(d.proc.pid)
    hogs = [transmission_client(sock, 'big') for _ in range(3)]
    for h in hogs:
        h.sendall(b''.join(read_request(i, 0, NBD_MAX_PAYLOAD_SIZE)
                           for i in range(16)))
    # give the daemon time to fill every buffer it is allowed to
    time.sleep(2)
    grown = rss(d.proc.pid) - before
    t.check('3 clients that do not read hold at most their buffer budget '
            '(%d MiB more resident)' % (grown // MiB),
            grown <= 3 * NBD_CLIENT_BUFFER_BUDGET + 32 * MiB,
            '%d MiB' % (grown // MiB))
    t.check('and the daemon at most its own (%d MiB)'
            % (NBD_DEFAULT_BUFFER_BUDGET // MiB),
            grown <= NBD_DEFAULT_BUFFER_BUDGET, '%d MiB' % (grown // MiB))
    rc, out = qsd.qemu_io(t, qsd.nbd_uri(sock, 'big'), 'read 0 1M')
    t.check('a well-behaved client is served meanwhile',
            rc == 0 and 'read 1048576/1048576' in out, out)
    # one hog reads its replies: every one of them arrives whole
    h = hogs.pop()
    h.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    cookies = []
    try:
        for _ in range(16):
            magic, err, cookie = struct.unpack('>IIQ', recv_exact(h, 16))
            recv_exact(h, NBD_MAX_PAYLOAD_SIZE)
            cookies.append((err, cookie))
    except OSError as e:
        cookies.append(repr(e))
    t.equal('a client that reads late gets all its replies, none refused',
            sorted(cookies), [(0, i) for i in range(16)])
    for h in hogs + [h]:
        h.close()
    ok = qsd.wait_for(lambda: 'return' in c.cmd('block-export-del',
                                                {'id': 'big'}))
    t.check('the hogs\' connections end when they close', ok)
    c.ok('blockdev-del', {'node-name': 'big'})


def test_connection_limit(d, c, sock, img):
    """The default max-connections: 100 clients are served, the next one
    waits in the listen backlog (no greeting) until one leaves."""
    export(c, sock, img, 'many')
    clients = []
    for _ in range(NBD_DEFAULT_MAX_CONNECTIONS):
        clients.append(handshake_client(sock))
    extra = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    extra.connect(sock)
    extra.settimeout(1)
    try:
        got = extra.recv(18)
    except socket.timeout:
        got = None
    t.equal('client %d gets no greeting while %d are connected'
            % (NBD_DEFAULT_MAX_CONNECTIONS + 1, NBD_DEFAULT_MAX_CONNECTIONS),
            got, None)
    clients.pop().close()
    extra.settimeout(qsd.TIMEOUT)
    try:
        got = len(recv_exact(extra, 18))
    except OSError as e:
        got = repr(e)
    t.equal('and is greeted once one leaves', got, 18)
    for x in clients + [extra]:
        x.close()
    ok = qsd.wait_for(lambda: 'return' in c.cmd('block-export-del',
                                                {'id': 'many'}))
    t.check('every connection ends', ok)
    c.ok('blockdev-del', {'node-name': 'many'})


def test_quit(d, c):
    try:
        c.cmd('quit')
    except OSError:
        pass                    # it is dead already
    t.equal('the daemon exits 0', d.wait(), 0)
    report = max(d.stderr.find('ERROR: AddressSanitizer'),
                 d.stderr.find('runtime error'))
    t.check('no sanitizer report on stderr', report < 0,
            d.stderr[report:report + 3000])


img = t.path('disk.raw')
with open(img, 'wb') as f:
    f.truncate(64 << 20)
sock = t.path('nbd.sock')
d = t.daemon(['--nbd-server', 'addr.type=unix,addr.path=%s' % sock])
c = d.qmp()
try:
    test_remove_during_handshake(d, c, sock, img)
    test_memory_budget(d, c, sock, img)
    test_connection_limit(d, c, sock, img)
except (OSError, RuntimeError) as e:
    # a daemon that died: its stderr below says why
    t.check('the removal tests ran to the end', False, repr(e))
test_quit(d, c)
t.finish()
