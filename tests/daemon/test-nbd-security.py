#!/usr/bin/env python3
"""qblock-storage-daemon against hostile NBD clients (issue 14): an
export removed over QMP while a client in the handshake does not read the
replies about it, safe and hard.  Run it against an AddressSanitizer
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
NBD_OPT_LIST, NBD_OPT_INFO = 3, 6
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


def export(c, sock, img, name):
    c.ok('blockdev-add', {'driver': 'raw', 'node-name': name,
                          'file': {'driver': 'file', 'filename': img}})
    c.ok('block-export-add', {'type': 'nbd', 'id': name, 'node-name': name,
                              'name': name})


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
    f.truncate(16 << 20)
sock = t.path('nbd.sock')
d = t.daemon(['--nbd-server', 'addr.type=unix,addr.path=%s' % sock])
c = d.qmp()
try:
    test_remove_during_handshake(d, c, sock, img)
except (OSError, RuntimeError) as e:
    # a daemon that died: its stderr below says why
    t.check('the removal tests ran to the end', False, repr(e))
test_quit(d, c)
t.finish()
