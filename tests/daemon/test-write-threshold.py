#!/usr/bin/env python3
"""block-set-write-threshold, as QEMU's: a write, zero write or discard
(discards count where the node passes them on: discard=unmap)
that ends past a node's threshold sends BLOCK_WRITE_THRESHOLD once, with
how far past it went, and the threshold goes back to 0; writes below it
send nothing; query-named-block-nodes shows it; a threshold on the file
node below a qcow2 image reports the image's growth (what a manager of
thin volumes watches); an unknown node gets QEMU's error."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic, nbd_uri, qemu_io     # noqa: E402

t = qsd.Tests('test-write-threshold')
MiB = 1 << 20


def threshold_of(c, node):
    for n in c.cmd('query-named-block-nodes')['return']:
        if n['node-name'] == node:
            return n['write_threshold']
    return None


def set_threshold(c, node, value):
    return c.cmd('block-set-write-threshold',
                 {'node-name': node, 'write-threshold': value})


def test_raw_node():
    t.create_image('raw.img', size='16M', fmt='raw')
    d, c = t.start([{'driver': 'file', 'node-name': 'f0',
                     'filename': t.path('raw.img'), 'discard': 'unmap'}],
                   export='f0')
    uri = nbd_uri(t.path('nbd.sock'), 'disk')
    t.equal('unknown node', error_of(set_threshold(c, 'nope', MiB)),
            generic("Device 'nope' not found"))
    t.equal('no threshold at first', threshold_of(c, 'f0'), 0)
    t.equal('set 4 MiB', set_threshold(c, 'f0', 4 * MiB), {'return': {}})
    t.equal('query-named-block-nodes shows it', threshold_of(c, 'f0'),
            4 * MiB)
    rc, out = qemu_io(t, uri, 'write 0 1M', 'write 3M 1M')
    t.equal('writes up to the threshold', rc, 0)
    t.equal('send no event', c.events_named('BLOCK_WRITE_THRESHOLD', 0.5), [])
    rc, out = qemu_io(t, uri, 'write 4M 64k', 'write 5M 64k')
    t.equal('two writes past it', rc, 0)
    t.equal('send one event, for the first',
            c.events_named('BLOCK_WRITE_THRESHOLD'),
            [{'node-name': 'f0', 'amount-exceeded': 64 * 1024,
              'write-threshold': 4 * MiB}])
    t.equal('and the threshold is 0', threshold_of(c, 'f0'), 0)
    for cmd, end in (('write -z 8M 1M', 9 * MiB), ('discard 10M 1M', 11 * MiB)):
        set_threshold(c, 'f0', 8 * MiB)
        rc, out = qemu_io(t, uri, cmd)
        t.equal('%s past 8 MiB sends the event' % cmd.split()[0],
                c.events_named('BLOCK_WRITE_THRESHOLD'),
                [{'node-name': 'f0', 'amount-exceeded': end - 8 * MiB,
                  'write-threshold': 8 * MiB}])
    set_threshold(c, 'f0', 8 * MiB)
    t.equal('0 removes it', set_threshold(c, 'f0', 0), {'return': {}})
    qemu_io(t, uri, 'write 12M 1M')
    t.equal('then nothing is reported',
            c.events_named('BLOCK_WRITE_THRESHOLD', 0.5), [])
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def test_qcow2_growth():
    """On the file below a qcow2 image: the image grows past it."""
    t.create_image('thin.qcow2', size='64M')
    size = os.path.getsize(t.path('thin.qcow2'))
    d, c = t.start([{'driver': 'file', 'node-name': 'f0',
                     'filename': t.path('thin.qcow2')},
                    {'driver': 'qcow2', 'node-name': 'q0', 'file': 'f0'}],
                   export='q0')
    uri = nbd_uri(t.path('nbd.sock'), 'disk')
    set_threshold(c, 'f0', size + MiB)
    rc, out = qemu_io(t, uri, 'write 0 512k')
    t.equal('an allocation that stays below sends nothing',
            c.events_named('BLOCK_WRITE_THRESHOLD', 0.5), [])
    rc, out = qemu_io(t, uri, 'write 32M 1M')
    got = c.events_named('BLOCK_WRITE_THRESHOLD')
    t.check('growing the image past it sends one event',
            len(got) == 1 and got[0]['node-name'] == 'f0' and
            got[0]['write-threshold'] == size + MiB and
            got[0]['amount-exceeded'] > 0, got)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


test_raw_node()
test_qcow2_growth()
t.finish()
