#!/usr/bin/env python3
"""blockdev-reopen where qblock does not follow qemu-storage-daemon 7.2
(which tests/interop/reopen-vs-qsd.py compares everywhere else): an
empty list and a child in another iothread, both of which crash QEMU
7.2; a transaction of two nodes undone as a whole; a copy-before-write
filter put under a writable NBD export and taken out again while a
client writes, no write lost; and a discard on a snapshot-access export
that ends within a cluster (QEMU 7.2 fails an assertion)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic                       # noqa: E402

t = qsd.Tests('test-reopen')
MiB = 1 << 20


def qcow2(name, **extra):
    opts = {'driver': 'qcow2', 'node-name': name,
            'file': {'driver': 'file', 'node-name': name + '-file',
                     'filename': t.path(name + '.qcow2')}}
    opts.update(extra)
    return opts


def reopen(c, *options):
    return c.cmd('blockdev-reopen', {'options': list(options)})


def node_info(c, name):
    for n in c.cmd('query-named-block-nodes', {'flat': True})['return']:
        if n['node-name'] == name:
            return n
    return {}


def read_only(c, name):
    return node_info(c, name).get('ro')


def start(*nodes):
    d = t.daemon([])
    c = d.qmp()
    for n in nodes:
        c.ok('blockdev-add', n)
    c.ok('nbd-server-start', {'addr': {'type': 'unix', 'data': {
        'path': t.path('nbd.sock')}}})
    return d, c


def export(c, node, name, writable=True):
    c.ok('block-export-add', {'type': 'nbd', 'id': name, 'node-name': node,
                              'name': name, 'writable': writable})


def test_refusals():
    for n in ('a', 'b', 'c'):
        t.create_image(n + '.qcow2', size='16M')
    d, c = start(qcow2('a'), qcow2('b'), qcow2('c'))
    t.equal('an empty list changes nothing', reopen(c), {'return': {}})
    c.ok('object-add', {'qom-type': 'iothread', 'id': 'io0'})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'c', 'node-name': 'c',
                              'iothread': 'io0'})
    t.equal('a backing child in another iothread is refused',
            error_of(reopen(c, qcow2('a', backing='c'))),
            generic("Cannot make node 'c' the backing child of 'a': they "
                    "are in different iothreads (AioContexts)"))
    export(c, 'b', 'b')
    t.equal('the second node of two refuses',
            error_of(reopen(c, qcow2('a', **{'read-only': True}),
                            qcow2('b', **{'read-only': True}))),
            generic("Read-only block node 'b' cannot support read-write "
                    "users"))
    t.equal('so the first stays read-write', read_only(c, 'a'), False)
    t.equal('and its file too', read_only(c, 'a-file'), False)
    t.equal('a backing node given and refused in one transaction',
            error_of(reopen(c, qcow2('a', backing='b'),
                            qcow2('b', backing='a'))),
            generic("Making 'a' a backing child of 'b' would create a "
                    "cycle"))
    t.equal('nothing is left of the first: no backing node',
            node_info(c, 'a')['backing_file_depth'], 0)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def test_insert_under_writes():
    """The filter goes in and out under the export while a client
    writes: every write lands, none fails."""
    t.create_image('disk.qcow2', size='64M')
    t.create_image('fl.qcow2', size='64M')
    top = {'driver': 'raw', 'node-name': 'top', 'file': 'disk'}
    d, c = start(qcow2('disk'), top, qcow2('fl'),
                 {'driver': 'copy-before-write', 'node-name': 'cbw',
                  'file': 'disk', 'target': 'fl'})
    export(c, 'top', 'guest')
    uri = qsd.nbd_uri(t.path('nbd.sock'), 'guest')
    n = 1024
    writes = []
    for i in range(n):
        writes += ['-c', 'write -P %d %d 64k' % (i % 250 + 1, i * 64 << 10)]
    writer = subprocess.Popen(['qemu-io', '-f', 'raw', '-t', 'writeback'] +
                              writes + [uri], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    replies = []
    while writer.poll() is None and len(replies) < 40:
        replies.append(reopen(c, dict(top, file='cbw')))
        replies.append(reopen(c, top))
    out = writer.communicate()[0].decode()
    t.check('reopens while the writes ran', len(replies) > 2, replies)
    t.equal('each succeeded', replies, [{'return': {}}] * len(replies))
    t.check('every write succeeded', writer.returncode == 0 and
            out.count('wrote 65536/65536 bytes') == n, out[-2000:])
    reads = ['read -P %d %d 64k' % (i % 250 + 1, i * 64 << 10)
             for i in range(n)]
    rc, out = qsd.qemu_io(t, uri, *reads)
    t.check('no write was lost', rc == 0 and
            'Pattern verification failed' not in out, out[-2000:])
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def test_unaligned_snapshot_discard():
    t.sh('qemu-img create -q -f qcow2 sd.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x11 0 16M" sd.qcow2 && '
         'qemu-img create -q -f qcow2 sfl.qcow2 16M')
    d, c = start(qcow2('sd'), qcow2('sfl', discard='unmap'),
                 {'driver': 'copy-before-write', 'node-name': 'cbw',
                  'file': 'sd', 'target': 'sfl'},
                 {'driver': 'snapshot-access', 'node-name': 'snap',
                  'file': 'cbw', 'discard': 'unmap'})
    export(c, 'snap', 'snap')
    uri = qsd.nbd_uri(t.path('nbd.sock'), 'snap')
    rc, out = qsd.qemu_io(t, uri, 'discard 1M 96k', 'discard 4M 32k')
    t.check('discards that end within a cluster succeed', rc == 0 and
            'failed' not in out, out)
    rc, out = qsd.qemu_io(t, uri, 'read 1M 64k')
    t.check('the whole cluster left the snapshot', 'failed' in out, out)
    rc, out = qsd.qemu_io(t, uri, 'read -P 0x11 1088k 64k',
                          'read -P 0x11 4M 64k')
    t.check('the clusters it ends or lies within did not', rc == 0 and
            'failed' not in out, out)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


test_refusals()
test_insert_under_writes()
test_unaligned_snapshot_discard()
t.finish()
