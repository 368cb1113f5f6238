#!/usr/bin/env python3
"""The quorum driver in the storage daemon: blockdev-add over named
children, QEMU's QUORUM_REPORT_BAD for a child that reads other content
or fails, QUORUM_FAILURE when no content has enough votes, writes that
reach every child, and a child that fails writes (blkdebug) outvoted
while the write succeeds; x-blockdev-change adds and removes children
with QEMU's names (children.N) and messages while an export serves the
quorum."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic, nbd_uri, qemu_io     # noqa: E402

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


def change(c, **args):
    r = c.cmd('x-blockdev-change', args)
    return r.get('return', error_of(r))


def children_of(c, node):
    """The children's file names, in order, from the node's json: name."""
    for n in c.cmd('query-named-block-nodes')['return']:
        if n['node-name'] == node:
            name = json.loads(n['image']['filename'][len('json:'):])
            return [os.path.basename(ch['file']['filename'])
                    for ch in name['children']]
    return None


def test_x_blockdev_change():
    for i in range(3, 9):
        t.create_image('c%d.raw' % i, size='1M', fmt='raw')
    t.create_image('big.raw', size='2M', fmt='raw')
    nodes = [child(i) for i in range(3, 9)]
    nodes.append({'driver': 'raw', 'node-name': 'big',
                  'file': {'driver': 'file', 'filename': t.path('big.raw')}})
    nodes.append({'driver': 'quorum', 'node-name': 'q1',
                  'vote-threshold': 1, 'children': ['c3', 'c4', 'c5']})
    d, c = t.start(nodes, export='q1')
    uri = nbd_uri(t.path('nbd.sock'), 'disk')
    t.equal('remove children.1', change(c, parent='q1', child='children.1'),
            {})
    t.equal('a removed child is gone',
            change(c, parent='q1', child='children.1'),
            generic("Node 'q1' does not have child 'children.1'"))
    t.equal('add a node: it is children.3',
            change(c, parent='q1', node='c4'), {})
    t.equal('the json: name lists the children in order',
            children_of(c, 'q1'), ['c3.raw', 'c5.raw', 'c4.raw'])
    rc, out = qemu_io(t, uri, 'write -P 0x44 0 64k')
    t.equal('a write through the export reaches the new child',
            peek('c4.raw', 0, 65536), b'\x44' * 65536)
    t.equal('removing the last one named gives its index back',
            [change(c, parent='q1', child='children.3'),
             change(c, parent='q1', child='children.2'),
             change(c, parent='q1', node='c5'),
             change(c, parent='q1', child='children.2')], [{}, {}, {}, {}])
    t.equal('not below the vote threshold',
            change(c, parent='q1', child='children.0'),
            generic('The number of children cannot be lower than the vote '
                    'threshold 1'))
    t.equal('a node with a parent',
            change(c, parent='q1', node='c3'),
            generic('The node c3 already has a parent'))
    t.equal('both', change(c, parent='q1', child='children.0', node='c6'),
            generic('The parameters child and node are in conflict'))
    t.equal('neither', change(c, parent='q1'),
            generic('Either child or node must be specified'))
    t.equal('unknown parent', change(c, parent='nope', node='c6'),
            generic("Cannot find device='nope' nor node-name='nope'"))
    t.equal('unknown node', change(c, parent='q1', node='nope'),
            generic("Node 'nope' not found"))
    t.equal('a driver without a list of children',
            [change(c, parent='c6', node='c7'),
             change(c, parent='c6', child='file'),
             change(c, parent='c6', child='nope')],
            [generic('The node c6 does not support adding a child'),
             generic('The node c6 does not support removing a child'),
             generic("Node 'c6' does not have child 'nope'")])
    c.ok('blockdev-add', {'driver': 'quorum', 'node-name': 'v',
                          'vote-threshold': 2, 'blkverify': True,
                          'children': ['c7', 'c8']})
    t.equal('blkverify mode takes no child',
            change(c, parent='v', node='c6'),
            generic('Cannot add a child to a quorum in blkverify mode'))
    c.ok('blockdev-add', {'driver': 'quorum', 'node-name': 'w',
                          'vote-threshold': 1, 'children': ['c6']})
    t.equal('a cycle', change(c, parent='w', node='w'),
            generic("Making 'w' a children.1 child of 'w' would create "
                    "a cycle"))
    if t.daemon_bin.endswith('qblock-storage-daemon'):
        # QEMU adds it, and then cannot read the quorum's length
        t.equal('a child of another length',
                change(c, parent='q1', node='big'),
                generic("Cannot add 'big' to quorum 'q1': its length "
                        "(2097152 bytes) differs from the quorum's "
                        "(1048576 bytes)"))
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


main()
test_x_blockdev_change()
t.finish()
