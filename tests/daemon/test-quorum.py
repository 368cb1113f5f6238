#!/usr/bin/env python3
"""The quorum driver in the storage daemon: blockdev-add over named
children, QEMU's QUORUM_REPORT_BAD for a child that reads other content
or fails, QUORUM_FAILURE when no content has enough votes, writes that
reach every child, and a child that fails writes (blkdebug) outvoted
while the write succeeds."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import nbd_uri, qemu_io                        # noqa: E402

t = qsd.Tests('test-quorum')
KiB = 1024


def poke(name, offset, byte, length):
    """Writes @length bytes @byte at @offset of file @name behind the
    daemon's back (the daemon holds the files' locks)."""
    with open(t.path(name), 'r+b') as f:
        f.seek(offset)
        f.write(bytes([byte]) * length)


def peek(name, offset, length):
    with open(t.path(name), 'rb') as f:
        f.seek(offset)
        return f.read(length)


def child(i, blkdebug_rule=None):
    node = {'driver': 'raw', 'node-name': 'c%d' % i,
            'file': {'driver': 'file', 'filename': t.path('c%d.raw' % i)}}
    if blkdebug_rule:
        node['file'] = {'driver': 'blkdebug',
                        'inject-error': [blkdebug_rule],
                        'image': node['file']}
    return node


def main():
    for i in range(3):
        t.create_image('c%d.raw' % i, size='1M', fmt='raw')
    nodes = [child(0), child(1),
             child(2, {'event': 'none', 'iotype': 'write', 'errno': 28})]
    nodes.append({'driver': 'quorum', 'node-name': 'q0',
                  'vote-threshold': 2, 'children': ['c0', 'c1', 'c2']})
    d, c = t.start(nodes, export='q0')
    uri = nbd_uri(t.path('nbd.sock'), 'disk')

    rc, out = qemu_io(t, uri, 'write -P 0x11 0 64k')
    t.equal('a write that one child fails succeeds', rc, 0)
    t.equal('and the child is reported',
            c.events_named('QUORUM_REPORT_BAD'),
            [{'type': 'write', 'error': 'No space left on device',
              'node-name': 'c2', 'sector-num': 0, 'sectors-count': 128}])
    for i in (0, 1):
        t.equal('child c%d holds the write' % i,
                peek('c%d.raw' % i, 0, 65536), b'\x11' * 65536)
    t.equal('child c2 does not', peek('c2.raw', 0, 4), b'\0' * 4)

    poke('c0.raw', 65536, 0x22, 4096)
    rc, out = qemu_io(t, uri, 'read -P 0 64k 4k')
    t.equal('c0 is outvoted at 64k', rc, 0)
    t.equal('and reported, without an error',
            c.events_named('QUORUM_REPORT_BAD'),
            [{'type': 'read', 'node-name': 'c0', 'sector-num': 128,
              'sectors-count': 8}])
    poke('c1.raw', 0, 0x33, 4096)
    rc, out = qemu_io(t, uri, 'read 0 4k')
    t.check('three different contents: the read fails',
            rc != 0 or 'Input/output error' in out, out)
    t.equal('QUORUM_FAILURE names the quorum node',
            c.events_named('QUORUM_FAILURE'),
            [{'reference': 'q0', 'sector-num': 0, 'sectors-count': 8}])
    bad = c.events_named('QUORUM_REPORT_BAD')
    t.equal('no child is reported when none won', bad, [])
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


main()
t.finish()
