#!/usr/bin/env python3
"""NBD client nodes in iothreads (invariant 6 of block/nbd.c): a node
whose image is on another NBD server moves into an export's iothread
and back, and can be a block job's target when the job's source runs
in an iothread, as in QEMU.

- An `nbd` node exported through the daemon's NBD server in iothread
  io0 (fixed-iothread=on): the real qemu-io writes through the export
  and reads every block back, and so does the image's own server.
- With reconnect-delay, the remote server is killed and started again
  while a writer runs through the export: the writes wait and then all
  succeed (the reconnection, its timers and its pauses run in io0).
- A server that stops answering: x-request-timeout's timer, moved with
  the node, fails the read; the next read reconnects, in io0.
- While the node is reconnecting, a move is refused with a message that
  says why; once it has reconnected, the same move succeeds.
- Deleting the export takes the node back to the main loop: io0 can
  then be deleted and the node still serves another export.
- blockdev-mirror from a node exported in io0 to an `nbd` target, with
  a client writing: ready, complete, the target equals the source, the
  events are those of a mirror to a local target.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
import nbd_load                                         # noqa: E402
from qsd import error_of, generic                       # noqa: E402

t = qsd.Tests('nbd-iothread')
MIB = 1 << 20
BLOCKS = 64
# the image's own server: the real qemu-nbd where installed (another
# implementation than the client's), else qblock-nbd
SERVER = 'qemu-nbd' if qsd.have('qemu-nbd') else \
    os.path.join(t.build, 'qblock-nbd')


class Remote:
    """An NBD server of image @name (qcow2) on remote.sock, export 'r'."""

    def __init__(self, name):
        self.name = name
        self.sock = t.path('remote.sock')
        self.proc = None
        self.start()

    def start(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.proc = subprocess.Popen(
            [SERVER, '-t', '-e', '0', '-k', self.sock, '-x', 'r', '-f',
             'qcow2', '--cache=writeback', t.path(self.name)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if not qsd.wait_for(lambda: os.path.exists(self.sock)):
            raise RuntimeError('%s did not start' % SERVER)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=qsd.TIMEOUT)

    def uri(self):
        return qsd.nbd_uri(self.sock, 'r')


def nbd_node(name, remote, **extra):
    opts = {'driver': 'nbd', 'node-name': name, 'export': 'r',
            'server': {'type': 'unix', 'path': remote.sock}}
    opts.update(extra)
    return opts


def export(c, node, iothread=True, id='e0', name='disk'):
    args = {'type': 'nbd', 'id': id, 'node-name': node, 'name': name,
            'writable': True}
    if iothread:
        args.update({'iothread': 'io0', 'fixed-iothread': True})
    return c.cmd('block-export-add', args)


def daemon():
    d = t.daemon(['--object', 'iothread,id=io0'])
    c = d.qmp()
    c.ok('nbd-server-start', {'addr': {'type': 'unix', 'data': {
        'path': t.path('nbd.sock')}}})
    return d, c


def uri(name='disk'):
    return qsd.nbd_uri(t.path('nbd.sock'), name)


def writer_done(what, w):
    t.check('%s: every write of the client succeeded' % what, w.finish(),
            w.out[-1000:])


def verify(what, where, u, fmt='raw'):
    ok, out = nbd_load.verify(t, u, n=BLOCKS, fmt=fmt)
    t.check('%s: %s reads every block back' % (what, where), ok, out)


def quit(what, d, c):
    c.cmd('quit')
    t.equal('%s: the daemon exits 0' % what, d.wait(), 0)
    c.close()


def fresh():
    for f in os.listdir(t.dir):
        if f.endswith(('.qcow2', '.sock')):
            os.unlink(t.path(f))



def remote_node(prep, **opts):
    """A fresh r.qcow2 (made by the shell line @prep) served by a Remote,
    a daemon, and its nbd node 'remote' with @opts."""
    fresh()
    t.sh(prep)
    remote = Remote('r.qcow2')
    d, c = daemon()
    c.ok('blockdev-add', nbd_node('remote', remote, **opts))
    return remote, d, c


# ---------------------------------------------------------------------------


def exported_in_iothread():
    what = 'nbd node exported in an iothread'
    remote, d, c = remote_node('qemu-img create -q -f qcow2 r.qcow2 16M',
                               **{'reconnect-delay': 20})
    r = export(c, 'remote')
    t.equal('%s: the export starts' % what, r, {'return': {}})
    writer_done(what, nbd_load.Writer(uri(), n=BLOCKS))
    verify(what, 'the export', uri())
    verify(what, 'the image\'s own server', remote.uri())

    # the server goes away and comes back while a client writes
    what = 'nbd node in an iothread reconnecting'
    remote.kill()
    w = nbd_load.Writer(uri(), n=BLOCKS, first=BLOCKS)
    time.sleep(1.5)
    t.check('%s: the writes wait for the server' % what, w.running())
    remote.start()
    writer_done(what, w)
    ok, out = nbd_load.verify(t, uri(), n=BLOCKS, first=BLOCKS)
    t.check('%s: the export reads the later blocks back' % what, ok, out)

    # back to the main loop with the export's end
    what = 'nbd node leaving the iothread'
    c.ok('block-export-del', {'id': 'e0', 'mode': 'hard'})
    c.event('BLOCK_EXPORT_DELETED')
    t.equal('%s: the iothread can be deleted' % what,
            c.cmd('object-del', {'id': 'io0'}), {'return': {}})
    t.equal('%s: a main-loop export starts' % what,
            export(c, 'remote', iothread=False, id='e1', name='again'),
            {'return': {}})
    verify(what, 'the main-loop export', uri('again'))
    quit(what, d, c)
    remote.stop()


def refused_while_reconnecting():
    what = 'nbd node moved while reconnecting'
    remote, d, c = remote_node('qemu-img create -q -f qcow2 r.qcow2 16M',
                               **{'reconnect-delay': 60})
    remote.kill()
    # the loss is seen when the socket closes; attempts then fail and
    # pause in turn, for the whole minute of reconnect-delay
    time.sleep(0.5)
    r = export(c, 'remote')
    t.equal('%s: refused, saying why' % what, error_of(r), generic(
        "Cannot move node 'remote' to another iothread while it "
        "reconnects to its NBD server; try again once it is connected"))
    t.equal('%s: no export was left behind' % what,
            c.ok('query-block-exports'), [])
    remote.start()
    ok = qsd.wait_for(lambda: export(c, 'remote') == {'return': {}},
                      timeout=15)
    t.check('%s: moves once reconnected' % what, ok)
    if ok:
        writer_done(what, nbd_load.Writer(uri(), n=BLOCKS))
        verify(what, 'the image\'s own server', remote.uri())
    quit(what, d, c)
    remote.stop()


def silent_server_in_iothread():
    """x-request-timeout's timer fires in the iothread the node moved
    to: a server that stops answering fails the read, and once it
    answers again the next read reconnects."""
    what = 'nbd node in an iothread, its server silent'
    remote, d, c = remote_node('qemu-img create -q -f qcow2 r.qcow2 16M && '
                               'qemu-io -f qcow2 -c "write -P 0x33 0 1M" '
                               'r.qcow2', **{'x-request-timeout': 2})
    t.equal('%s: the export starts' % what, export(c, 'remote'),
            {'return': {}})
    rc, out = qsd.qemu_io(t, uri(), 'read -P 0x33 0 64k')
    t.check('%s: a read before' % what, rc == 0 and 'read 65536' in out,
            out)
    remote.proc.send_signal(signal.SIGSTOP)
    start = time.monotonic()
    rc, out = qsd.qemu_io(t, uri(), 'read -P 0x33 64k 64k')
    took = time.monotonic() - start
    t.check('%s: the read fails after the timeout (%.1f s)' % (what, took),
            'read failed' in out and 1.5 < took < 20, out)
    remote.proc.send_signal(signal.SIGCONT)
    rc, out = qsd.qemu_io(t, uri(), 'read -P 0x33 128k 64k')
    t.check('%s: the next read reconnects' % what,
            rc == 0 and 'read 65536' in out, out)
    quit(what, d, c)
    remote.stop()


def mirror_to_nbd():
    what = 'mirror from an iothread to an nbd target'
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x5a 0 16M" src.qcow2 && '
         'qemu-img create -q -f qcow2 tgt.qcow2 16M')
    remote = Remote('tgt.qcow2')
    d, c = daemon()
    c.ok('blockdev-add', t.qcow2('src'))
    c.ok('blockdev-add', nbd_node('tgt', remote))
    t.equal('%s: the export starts' % what, export(c, 'src'),
            {'return': {}})
    w = nbd_load.Writer(uri(), n=BLOCKS)
    r = c.cmd('blockdev-mirror', {'job-id': 'j', 'device': 'src',
                                  'target': 'tgt', 'sync': 'full'})
    t.equal('%s: starts' % what, r, {'return': {}})
    t.check('%s: ready' % what, qsd.wait_job_status(c, 'j', 'ready'))
    writer_done(what, w)
    c.ok('job-complete', {'id': 'j'})
    t.check('%s: ends' % what, qsd.wait_job_status(c, 'j', 'null'))
    served = [e['node-name'] for e in c.ok('query-block-exports')]
    t.equal('%s: the export serves the target' % what, served, ['tgt'])
    verify(what, 'the export', uri())
    c.ok('block-export-del', {'id': 'e0', 'mode': 'hard'})
    c.event('BLOCK_EXPORT_DELETED')
    t.equal('%s: the iothread can go after the job' % what,
            c.cmd('object-del', {'id': 'io0'}), {'return': {}})
    quit(what, d, c)
    remote.stop()
    rc, out, err = t.run(['qemu-img', 'compare', t.path('src.qcow2'),
                          t.path('tgt.qcow2')])
    t.check('%s: the target equals the source' % what, rc == 0, out + err)
    ok, out = nbd_load.verify(t, t.path('tgt.qcow2'), n=BLOCKS,
                              fmt='qcow2')
    t.check('%s: the target holds every block the client wrote' % what,
            ok, out)
    rc, out, err = t.run(['qemu-img', 'check', t.path('tgt.qcow2')])
    t.check('%s: qemu-img check of the target' % what, rc == 0, out + err)


exported_in_iothread()
refused_while_reconnecting()
silent_server_in_iothread()
mirror_to_nbd()
t.finish()
