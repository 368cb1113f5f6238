#!/usr/bin/env python3
"""drive-backup, as QEMU's: the target image is created (as large as the
source, of its format, over its backing file for sync top and over the
source for sync none) or opened (mode existing), the backup runs, and the
target node goes away with the job; the refusals are QEMU's; a
transaction takes drive-backup as an action."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic                       # noqa: E402

t = qsd.Tests('test-drive-backup')
MiB = 1 << 20


def same(a, b):
    """qemu-img compare: the guest sees the same data in both."""
    rc, out, err = t.run(['qemu-img', 'compare', '-U', t.path(a), t.path(b)])
    return rc == 0, out + err


def backup(c, args):
    """Runs drive-backup to its end; returns the command's reply and the
    BLOCK_JOB_COMPLETED event's data (None if the command failed)."""
    r = c.cmd('drive-backup', args)
    if 'return' not in r:
        return r, None
    e = c.event('BLOCK_JOB_COMPLETED', timeout=60)
    return r, e and e['data']


def node_names(c):
    return [n['node-name'] for n in c.ok('query-named-block-nodes')]


def setup():
    t.create_image('base.qcow2', size='4M')
    t.sh('qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2')
    t.sh('qemu-io -c "write -P 1 0 1M" base.qcow2')
    t.sh('qemu-io -c "write -P 2 1M 1M" top.qcow2')
    d, c = t.start([t.qcow2('top')])
    return d, c


def test_full_and_top(c):
    before = node_names(c)
    r, done = backup(c, {'job-id': 'full', 'device': 'top', 'sync': 'full',
                         'target': t.path('full.qcow2')})
    t.equal('sync full: the job completes', (r, done and done['type'],
                                            done and done.get('error')),
            ({'return': {}}, 'backup', None))
    i = t.image_info('full.qcow2')
    t.equal('sync full: the target is qcow2 (the source\'s format), as '
            'large, without a backing file',
            (i.get('format'), i.get('virtual-size'),
             i.get('backing-filename')), ('qcow2', 4 * MiB, None))
    t.check('sync full: the target holds the whole chain\'s data',
            *same('top.qcow2', 'full.qcow2'))
    t.equal('the target node went with the job', node_names(c), before)

    r, done = backup(c, {'job-id': 'top', 'device': 'top', 'sync': 'top',
                         'target': t.path('top-copy.qcow2')})
    t.equal('sync top: the job completes', done and done.get('error'),
            None)
    i = t.image_info('top-copy.qcow2')
    t.equal('sync top: the target records the source\'s backing file',
            (i.get('backing-filename'), i.get('backing-filename-format')),
            (t.path('base.qcow2'), 'qcow2'))
    t.check('sync top: with it, the target reads as the source',
            *same('top.qcow2', 'top-copy.qcow2'))
    rc, out, err = t.run(['qemu-img', 'map', '-U', '--output=json',
                          t.path('top-copy.qcow2')])
    top_data = [m for m in json.loads(out) if m['data'] and m['depth'] == 0]
    t.equal('sync top: only what the top image allocates was copied',
            [(m['start'], m['length']) for m in top_data], [(MiB, MiB)])

    r, done = backup(c, {'job-id': 'raw', 'device': 'top', 'sync': 'full',
                         'format': 'raw', 'target': t.path('full.raw')})
    t.equal('format raw: the job completes', done and done.get('error'),
            None)
    t.equal('format raw: a raw target', t.image_info('full.raw').get('format'),
            'raw')
    t.check('format raw: it holds the data', *same('top.qcow2', 'full.raw'))

    r, done = backup(c, {'job-id': 'again', 'device': 'top', 'sync': 'full',
                         'mode': 'existing', 'format': 'qcow2',
                         'target': t.path('top-copy.qcow2')})
    t.equal('mode existing: the backup goes to the image there',
            done and done.get('error'), None)


def test_none(c):
    r = c.cmd('drive-backup', {'job-id': 'none', 'device': 'top',
                               'sync': 'none',
                               'target': t.path('none.qcow2')})
    t.equal('sync none: the job starts', r, {'return': {}})
    i = t.image_info('none.qcow2')
    t.equal('sync none: the target records the source as its backing file',
            (i.get('backing-filename'), i.get('backing-filename-format')),
            (t.path('top.qcow2'), 'qcow2'))
    g = c.ok('x-debug-query-block-graph')
    names = {n['id']: n['name'] for n in g['nodes']}
    backing = [(names[e['parent']], names[e['child']]) for e in g['edges']
               if e['name'] == 'backing']
    # the source, not the filter above it: that would be a cycle
    t.check('sync none: the target node is backed by the source node',
            any(child == 'top' for parent, child in backing), backing)
    c.ok('job-cancel', {'id': 'none'})
    e = c.event('BLOCK_JOB_CANCELLED', timeout=60)
    t.check('sync none: cancelled', e is not None, e)


def test_refusals(c):
    cases = [
        ({'device': 'nope', 'target': t.path('x.qcow2')},
         "Cannot find device='nope' nor node-name='nope'"),
        ({'device': 'top', 'target': t.path('nodir/x.qcow2')},
         "Could not create '%s': No such file or directory"
         % t.path('nodir/x.qcow2')),
        ({'device': 'top', 'target': t.path('missing.qcow2'),
          'mode': 'existing'},
         "Could not open '%s': No such file or directory"
         % t.path('missing.qcow2')),
        ({'device': 'top', 'target': t.path('x.qcow2'), 'format': 'nope'},
         "Unknown file format 'nope'"),
        ({'device': 'top', 'target': t.path('x.qcow2'), 'sync': 'bitmap'},
         "must provide a valid bitmap name for 'bitmap' sync mode"),
    ]
    qsd.refused(t, c, 'drive-backup', {'job-id': 'bad', 'sync': 'full'}, cases)
    t.equal('no job is left', c.ok('query-jobs'), [])


def test_transaction(c):
    r = c.cmd('transaction', {'actions': [
        {'type': 'drive-backup', 'data': {
            'job-id': 'tx', 'device': 'top', 'sync': 'full',
            'target': t.path('tx.qcow2')}}]})
    t.equal('a transaction with a drive-backup action', r, {'return': {}})
    e = c.event('BLOCK_JOB_COMPLETED', timeout=60)
    t.check('its job completes', e and not e['data'].get('error'), e)
    t.check('its target holds the data', *same('top.qcow2', 'tx.qcow2'))


d, c = setup()
test_full_and_top(c)
test_none(c)
test_refusals(c)
test_transaction(c)
c.close()
t.equal('the daemon exits 0', d.stop(), 0)
t.finish()
