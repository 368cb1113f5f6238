#!/usr/bin/env python3
"""drive-mirror, as QEMU's: the target image is created (of the source's
size and format, over its backing file for sync top, over the source for
sync none) or opened (mode existing), opened without its backing file,
and given its backing node when the job completes, before the export
moves to it; the data reads back through the export after the pivot; the
refusals are QEMU's."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic, nbd_uri, qemu_io     # noqa: E402

t = qsd.Tests('test-drive-mirror')
MiB = 1 << 20


def fresh_chain():
    for f in ('base.qcow2', 'top.qcow2'):
        if os.path.exists(t.path(f)):
            os.unlink(t.path(f))
    t.create_image('base.qcow2', size='4M')
    t.sh('qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2')
    t.sh('qemu-io -c "write -P 1 0 1M" base.qcow2')
    t.sh('qemu-io -c "write -P 2 1M 1M" top.qcow2')


def root_and_backing(c):
    """The node the export's BlockBackend uses, and that node's backing
    node (its name, or its file name for an anonymous node)."""
    g = c.ok('x-debug-query-block-graph')
    names = {n['id']: n['name'] for n in g['nodes']}
    root = [e['child'] for e in g['edges'] if e['name'] == 'root']
    if len(root) != 1:
        return None, None
    backing = [e['child'] for e in g['edges']
               if e['parent'] == root[0] and e['name'] == 'backing']
    files = {n['node-name']: n['file']
             for n in c.ok('query-named-block-nodes')}
    b = names[backing[0]] if backing else None
    return names[root[0]], (files.get(b, b) if b else None)


def mirror(args, expect_backing, prepare=None, at_2m=0):
    """drive-mirror of the exported chain top -> base with @args while a
    client writes; after the pivot, the export reads what it wrote and
    the chain's data (@at_2m where neither has any), and the target has
    @expect_backing (a file name) as its backing node."""
    fresh_chain()
    if prepare:
        prepare()
    d, c = t.start([t.qcow2('top')], export='top')
    uri = nbd_uri(t.path('nbd.sock'), 'disk')
    what = args['sync'] + (' (existing)' if 'mode' in args else '')
    r = c.cmd('drive-mirror', dict({'job-id': 'm', 'device': 'top'}, **args))
    t.equal('%s: the job starts' % what, r, {'return': {}})
    rc, out = qemu_io(t, uri, 'write -P 3 3M 64k')
    t.equal('%s: a client writes meanwhile' % what, rc, 0)
    e = c.event('BLOCK_JOB_READY', timeout=60)
    t.check('%s: ready' % what, e is not None)
    c.ok('job-complete', {'id': 'm'})
    e = c.event('BLOCK_JOB_COMPLETED', timeout=60)
    t.equal('%s: completed without error' % what,
            e and e['data'].get('error', 'none'), 'none')
    root, backing = root_and_backing(c)
    t.equal('%s: the export uses the target, with its backing node' % what,
            (root, backing),
            (args.get('node-name', root), expect_backing))
    rc, out = qemu_io(t, uri, 'read -P 1 0 1M', 'read -P 2 1M 1M',
                      'read -P 3 3M 64k', 'read -P %d 2M 64k' % at_2m)
    t.check('%s: the export reads the chain\'s data and the write' % what,
            rc == 0 and 'verification failed' not in out, out)
    c.close()
    t.equal('%s: the daemon exits 0' % what, d.stop(), 0)


def test_modes():
    mirror({'sync': 'full', 'target': t.path('full.qcow2'),
            'node-name': 'tgt'}, None)
    i = t.image_info('full.qcow2')
    t.equal('full: a qcow2 image as large, without backing file',
            (i.get('format'), i.get('virtual-size'),
             i.get('backing-filename')), ('qcow2', 4 * MiB, None))
    mirror({'sync': 'top', 'target': t.path('top-copy.qcow2')},
           t.path('base.qcow2'))
    i = t.image_info('top-copy.qcow2')
    t.equal('top: the image records the source\'s backing file',
            (i.get('backing-filename'), i.get('backing-filename-format')),
            (t.path('base.qcow2'), 'qcow2'))
    mirror({'sync': 'none', 'target': t.path('none.qcow2')},
           t.path('top.qcow2'))

    def existing():
        t.sh('qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 '
             'old.qcow2')
        # data where the source has none: a top mirror leaves it there
        t.sh('qemu-io -c "write -P 9 2M 64k" old.qcow2')
    mirror({'sync': 'top', 'mode': 'existing', 'format': 'qcow2',
            'target': t.path('old.qcow2')}, t.path('base.qcow2'),
           prepare=existing, at_2m=9)

    def stale():
        t.sh('qemu-img create -q -f qcow2 full-old.qcow2 4M')
        t.sh('qemu-io -c "write -P 9 2M 1M" full-old.qcow2')
    mirror({'sync': 'full', 'mode': 'existing',
            'target': t.path('full-old.qcow2')}, None, prepare=stale)


def test_refusals():
    fresh_chain()
    d, c = t.start([t.qcow2('top')])
    cases = [
        ({'device': 'nope', 'target': t.path('x.qcow2')},
         "Cannot find device='nope' nor node-name='nope'"),
        ({'device': 'top', 'target': t.path('x.qcow2'), 'replaces': 'top'},
         'a node-name must be provided when replacing a named node of the '
         'graph'),
        ({'device': 'top', 'target': t.path('nodir/x.qcow2')},
         "Could not create '%s': No such file or directory"
         % t.path('nodir/x.qcow2')),
        ({'device': 'top', 'target': t.path('g.qcow2'),
          'granularity': 1000},
         "Parameter 'granularity' expects a power of 2"),
        ({'device': 'top', 'target': t.path('i.qcow2'),
          'sync': 'incremental'},
         "Sync mode 'incremental' not supported"),
    ]
    qsd.refused(t, c, 'drive-mirror', {'job-id': 'bad', 'sync': 'full'}, cases)
    t.equal('no job is left', c.ok('query-jobs'), [])
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


test_modes()
test_refusals()
t.finish()
