#!/usr/bin/env python3
"""The throttle filter and throttle-group objects in the storage daemon:
QEMU's errors for bad groups and limits, limits that hold requests back
(lower bounds on elapsed time only: a loaded machine can only make I/O
slower), qom-set and qom-get of the limits, qom-get and qom-list of
objects, one group shared by two nodes in turn
(one of them in an iothread), object-del refused while a node uses the
group, and blockdev-reopen moving a node to another group.  That a drain
lifts the limits is tests/unit/test-throttle.c's."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic, nbd_uri, qemu_io     # noqa: E402

t = qsd.Tests('test-throttle')


def throttle_node(name, group, image_node):
    return {'driver': 'throttle', 'node-name': name,
            'throttle-group': group, 'file': image_node}


def image(c, name):
    """A qcow2 node whose first 64 KiB hold data: the NBD export reads
    only what block status calls data, as QEMU's does, and block status
    passes a throttle node without counting."""
    t.create_image(name + '.qcow2', size='16M')
    t.sh('qemu-io -f qcow2 -c "write -P 0x5a 0 64k" %s.qcow2' % name)
    c.ok('blockdev-add', t.qcow2(name))


def export(c, node, name, iothread=None):
    args = {'type': 'nbd', 'id': 'e-' + name, 'node-name': node,
            'name': name, 'writable': True}
    if iothread:
        args['iothread'] = iothread
    c.ok('block-export-add', args)
    return nbd_uri(t.path('nbd.sock'), name)


def start(*objects):
    args = []
    for o in objects:
        args += ['--object', o]
    d = t.daemon(args)
    c = d.qmp()
    c.ok('nbd-server-start', {'addr': {'type': 'unix', 'data': {
        'path': t.path('nbd.sock')}}})
    return d, c


def timed_reads(uri, count, size=512):
    cmds = ['read %d %d' % ((i % 64) * 512, size) for i in range(count)]
    start = time.monotonic()
    rc, out = qemu_io(t, uri, *cmds)
    return rc, out, time.monotonic() - start


def test_errors():
    d, c = start('throttle-group,id=tg0,x-iops-total=100',
                 'iothread,id=io0')
    image(c, 'n0')
    cases = [
        ({'driver': 'throttle', 'node-name': 't0', 'file': 'n0'},
         'Please specify a throttle group'),
        (throttle_node('t0', 'nope', 'n0'),
         "Throttle group 'nope' does not exist"),
        (throttle_node('t0', 'io0', 'n0'),
         "Throttle group 'io0' does not exist"),
    ]
    for args, desc in cases:
        t.equal('blockdev-add %r' % args,
                error_of(c.cmd('blockdev-add', args)), generic(desc))
    bad = [
        ({'iops-total': 10, 'iops-read': 5},
         'bps/iops/max total values and read/write values cannot be used '
         'at the same time'),
        ({'bps-total-max': 5, 'bps-total': 0},
         'bps_max/iops_max require corresponding bps/iops values'),
        ({'bps-total': 10, 'bps-total-max': 5},
         'bps_max/iops_max cannot be lower than bps/iops'),
        ({'iops-total-max-length': 0},
         'the burst length cannot be 0'),
        ({'iops-total-max-length': 5},
         'burst length set without burst rate'),
        ({'iops-total-max-length': 1 << 33},
         'iops-total-max-length value must be in the range [0, 4294967295]'),
        ({'bps-write': 10 ** 15 + 1},
         'bps/iops/max values must be within [0, 1000000000000000]'),
        ({'iops-total': 0, 'iops-size': 4096},
         'iops size requires an iops value to be set'),
    ]
    for limits, desc in bad:
        t.equal('qom-set limits %r' % limits,
                error_of(c.cmd('qom-set', {'path': '/objects/tg0',
                                           'property': 'limits',
                                           'value': limits})),
                generic(desc))
    t.equal('qom-set of an x- property after creation',
            error_of(c.cmd('qom-set', {'path': 'tg0',
                                       'property': 'x-iops-total',
                                       'value': 5})),
            generic('Property cannot be set after initialization'))
    t.equal('qom-set of no property',
            error_of(c.cmd('qom-set', {'path': 'tg0', 'property': 'foo',
                                       'value': 5})),
            generic("Property 'throttle-group.foo' not found"))
    t.equal('object-add of a group with bad limits',
            error_of(c.cmd('object-add', {'qom-type': 'throttle-group',
                                          'id': 'tg1',
                                          'x-iops-read': 5,
                                          'x-iops-total': 3})),
            generic('bps/iops/max total values and read/write values '
                    'cannot be used at the same time'))
    t.equal('qom-list /objects',
            c.cmd('qom-list', {'path': '/objects'}),
            {'return': [{'name': 'type', 'type': 'string'},
                        {'name': 'io0', 'type': 'child<iothread>'},
                        {'name': 'tg0', 'type': 'child<throttle-group>'}]})
    t.equal('qom-get type', c.cmd('qom-get', {'path': '/objects/io0',
                                              'property': 'type'}),
            {'return': 'iothread'})
    t.equal('qom-get of an iothread property',
            c.cmd('qom-get', {'path': 'io0', 'property': 'poll-max-ns'}),
            {'return': 32768})
    t.equal('qom-get of no property',
            error_of(c.cmd('qom-get', {'path': 'io0', 'property': 'x'})),
            generic("Property 'iothread.x' not found"))
    t.equal('qom-get of no object',
            error_of(c.cmd('qom-get', {'path': '/objects/x',
                                       'property': 'type'})),
            ('DeviceNotFound', "Device '/objects/x' not found"))
    c.ok('object-add', {'qom-type': 'secret', 'id': 'sec0', 'data': 'pw'})
    t.equal('a secret\'s data is not shown (QEMU shows it)',
            error_of(c.cmd('qom-get', {'path': 'sec0', 'property': 'data'})),
            generic("Property 'secret.data' is not readable"))
    c.ok('blockdev-add', throttle_node('t0', 'tg0', 'n0'))
    reply = c.cmd('object-del', {'id': 'tg0'})
    t.check('object-del of a group a node uses is refused',
            error_of(reply) is not None, reply)
    c.ok('blockdev-del', {'node-name': 't0'})
    t.equal('object-del once no node uses it',
            c.cmd('object-del', {'id': 'tg0'}), {'return': {}})
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def test_limits():
    d, c = start('{"qom-type": "throttle-group", "id": "tg0", '
                 '"limits": {"iops-total": 20}}')
    image(c, 'n0')
    c.ok('blockdev-add', throttle_node('t0', 'tg0', 'n0'))
    uri = export(c, 't0', 'disk')
    rc, out = qemu_io(t, uri, 'write -P 0xa5 64k 64k')
    t.equal('a write through the filter', rc, 0)
    # a tenth of a second's worth goes at once, the rest at 20 a second
    rc, out, took = timed_reads(uri, 30)
    t.check('30 reads at iops-total=20 take at least 1.2 s (%.2f s)' % took,
            rc == 0 and took >= 1.2, out[-300:])
    c.ok('qom-set', {'path': '/objects/tg0', 'property': 'limits',
                     'value': {'iops-total': 0, 'bps-read': 64 * 1024}})
    limits = c.cmd('qom-get', {'path': '/objects/tg0',
                               'property': 'limits'})['return']
    t.equal('qom-get limits: what qom-set changed, the rest kept',
            (limits['bps-read'], limits['iops-total'],
             limits['bps-read-max-length'], len(limits)),
            (64 * 1024, 0, 1, 19))
    t.equal('qom-get of an x- property',
            c.cmd('qom-get', {'path': 'tg0', 'property': 'x-bps-read'}),
            {'return': 64 * 1024})
    rc, out, took = timed_reads(uri, 6, size=32 * 1024)
    t.check('6 reads of 32 KiB at bps-read=64 KiB take at least 2 s '
            '(%.2f s)' % took, rc == 0 and took >= 2.0, out[-300:])
    rc, out = qemu_io(t, uri, 'read -P 0xa5 64k 64k')
    t.equal('what was written reads back through the filter', rc, 0)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def test_shared_group():
    """Two nodes, one in an iothread, share one group's limits."""
    d, c = start('throttle-group,id=tg0,x-iops-total=20', 'iothread,id=io0')
    image(c, 'n0')
    image(c, 'n1')
    c.ok('blockdev-add', throttle_node('t0', 'tg0', 'n0'))
    c.ok('blockdev-add', throttle_node('t1', 'tg0', 'n1'))
    uris = [export(c, 't0', 'a'), export(c, 't1', 'b', iothread='io0')]
    procs = []
    start_time = time.monotonic()
    for uri in uris:
        args = ['qemu-io', '-f', 'raw', '-t', 'writeback']
        for i in range(20):
            args += ['-c', 'read %d 512' % (i * 512)]
        procs.append(subprocess.Popen(args + [uri], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT))
    ends = []
    for p in procs:
        out = p.communicate(timeout=qsd.TIMEOUT)[0].decode()
        ends.append(time.monotonic() - start_time)
        t.check("the reads of one node succeed", p.returncode == 0 and "read 512/512" in out, out[-400:])
    t.check('40 reads over two nodes sharing iops-total=20 take at least '
            '1.5 s (%.2f s)' % max(ends), max(ends) >= 1.5)
    # alone, 20 reads at 20 a second end after 0.95 s; taking turns, each
    # node gets half the rate
    t.check('the group serves both nodes in turn: neither ends within '
            'the time its reads would take alone (%.2f s, %.2f s)'
            % tuple(ends),
            min(ends) >= 1.1)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def test_reopen_moves_group():
    """blockdev-reopen moves a node to another group, as QEMU's."""
    d, c = start('throttle-group,id=tg0,x-iops-total=10',
                 'throttle-group,id=tg1,x-bps-total=1000000')
    image(c, 'n0')
    c.ok('blockdev-add', throttle_node('t0', 'tg0', 'n0'))
    t.equal('reopen to a group that does not exist',
            error_of(c.cmd('blockdev-reopen', {'options': [
                throttle_node('t0', 'nope', 'n0')]})),
            generic("Throttle group 'nope' does not exist"))
    c.ok('blockdev-reopen', {'options': [throttle_node('t0', 'tg1', 'n0')]})
    t.equal('the old group is free to go',
            c.cmd('object-del', {'id': 'tg0'}), {'return': {}})
    t.check('the new one is in use',
            error_of(c.cmd('object-del', {'id': 'tg1'})) is not None)
    uri = export(c, 't0', 'disk')
    rc, out = qemu_io(t, uri, 'read -P 0x5a 0 64k')
    t.equal('the node reads through its new group', rc, 0)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


test_errors()
test_limits()
test_shared_group()
test_reopen_moves_group()
t.finish()
