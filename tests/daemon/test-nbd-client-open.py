#!/usr/bin/env python3
"""blockdev-add of an nbd node does not stop the main loop: its connect
and handshake run in a worker thread (block/nbd.c, nbd_open_connect), so
while the daemon waits for a server that accepts and never answers, an
export in the main loop is still served (qemu-storage-daemon 7.2 stops
serving it for the whole open: docs/nbd-client.md).

A local image exported over NBD from the main loop; blockdev-add of an
nbd node whose server never speaks, with open-timeout=4; meanwhile the
real qemu-io reads and writes through the export, which must take well
under the open's 4 s; then the blockdev-add fails by its timeout, with
its message, and the daemon goes on (the node was not added, the export
still serves).
"""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic                       # noqa: E402

t = qsd.Tests('nbd-client-open')
OPEN_TIMEOUT = 4


class SilentServer:
    """Accepts connections on a unix socket and never sends a byte."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.conns = []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def open_with_silent_server():
    what = 'nbd open with a silent server'
    t.sh('qemu-img create -q -f qcow2 img.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x44 0 1M" img.qcow2')
    silent = SilentServer(t.path('silent.sock'))
    d, c = t.start([t.qcow2('img')], export='img')
    uri = qsd.nbd_uri(t.path('nbd.sock'), 'disk')
    c.send_raw(b'{"execute": "blockdev-add", "arguments": {"driver": '
               b'"nbd", "node-name": "remote", "server": {"type": "unix", '
               b'"path": "%s"}, "open-timeout": %d}}\n'
               % (t.path('silent.sock').encode(), OPEN_TIMEOUT))
    # the daemon has read the command once the server got its connection
    qsd.wait_for(lambda: silent.conns, timeout=10)
    start = time.monotonic()
    rc, out = qsd.qemu_io(t, uri, 'read -P 0x44 0 64k',
                          'write -P 0x45 64k 64k', 'read -P 0x45 64k 64k')
    took = time.monotonic() - start
    t.check('%s: the export serves meanwhile (%.2f s)' % (what, took),
            rc == 0 and 'Pattern verification failed' not in out and
            out.count('65536 bytes') == 3 and took < OPEN_TIMEOUT / 2, out)
    r = c.reply(timeout=OPEN_TIMEOUT * 5)
    waited = time.monotonic() - start
    t.equal('%s: blockdev-add fails by open-timeout' % what, error_of(r),
            generic("NBD server '%s' did not complete the handshake within "
                    "open-timeout=%d s: Failed to read initial magic: the "
                    "server sent nothing more before the handshake's time "
                    "limit" % (t.path('silent.sock'), OPEN_TIMEOUT)))
    t.check('%s: ... after about open-timeout (%.1f s)' % (what, waited),
            OPEN_TIMEOUT - 1 < waited < OPEN_TIMEOUT * 4)
    names = [n['node-name'] for n in c.ok('query-named-block-nodes')]
    t.check('%s: no node was added' % what, 'remote' not in names, names)
    rc, out = qsd.qemu_io(t, uri, 'read -P 0x45 64k 64k')
    t.check('%s: the export still serves' % what, rc == 0 and
            'Pattern verification failed' not in out, out)
    c.cmd('quit')
    t.equal('%s: the daemon exits 0' % what, d.wait(), 0)
    silent.close()


open_with_silent_server()
t.finish()
