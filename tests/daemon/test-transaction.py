#!/usr/bin/env python3
"""The transaction command on nodes that NBD exports serve while qemu-io
writes to them: actions that all succeed are all committed (each export
on its overlay, the old nodes read-only); one that fails undoes the
others (the exports back on their nodes, writable, the internal
snapshot deleted, the writes in the old images); completion-mode
grouped is refused for actions that start no job; no write is lost."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic                       # noqa: E402
import nbd_load                                         # noqa: E402

t = qsd.Tests('test-transaction')


def start():
    sock = t.path('nbd.sock')
    args = ['--nbd-server', 'addr.type=unix,addr.path=%s' % sock]
    for i in range(2):
        img = t.create_image('d%d.qcow2' % i)
        args += ['--blockdev', 'driver=file,node-name=f%d,filename=%s' %
                 (i, img),
                 '--blockdev', 'driver=qcow2,node-name=n%d,file=f%d' % (i, i),
                 '--export', 'type=nbd,id=e%d,node-name=n%d,writable=on' %
                 (i, i)]
    d = t.daemon(args)
    return d, [qsd.nbd_uri(sock, 'n%d' % i) for i in range(2)]


def exports(c):
    return {e['id']: e['node-name'] for e in c.ok('query-block-exports')}


def ro(c):
    return {n['node-name']: n['ro'] for n in
            c.ok('query-named-block-nodes', {'flat': True})}


def snapshot_names(path):
    rc, out, err = t.run(['qemu-img', 'info', '-U', '--output=json', path])
    return [s['name'] for s in json.loads(out).get('snapshots', [])]


def sync_action(node, overlay):
    return {'type': 'blockdev-snapshot-sync',
            'data': {'node-name': node,
                     'snapshot-file': t.path('%s.qcow2' % overlay),
                     'snapshot-node-name': overlay}}


def internal_action(node, name):
    return {'type': 'blockdev-snapshot-internal-sync',
            'data': {'device': node, 'name': name}}


def test_abort_under_writes(c, uris):
    writers = [nbd_load.Writer(u) for u in uris]
    r = c.cmd('transaction', {'actions': [
        internal_action('n0', 'i0'),
        sync_action('n0', 'a0'),
        sync_action('n1', 'a1'),
        {'type': 'abort', 'data': {}}]})
    t.equal('an abort action fails the transaction', error_of(r),
            generic('Transaction aborted using Abort action'))
    t.equal('the exports are back on their nodes', exports(c),
            {'e0': 'n0', 'e1': 'n1'})
    flags = ro(c)
    t.check('the nodes are writable, the overlays are gone',
            not flags['n0'] and not flags['n1'] and 'a0' not in flags and
            'a1' not in flags, flags)
    r = c.cmd('transaction', {'actions': [
        sync_action('n1', 'b1'),
        sync_action('n0', 'f1')]})
    t.equal('an action that fails undoes the ones before', error_of(r),
            generic('New overlay node-name already in use'))
    t.equal('the exports stay', exports(c), {'e0': 'n0', 'e1': 'n1'})
    for i, w in enumerate(writers):
        t.check('every write to disk %d succeeded' % i, w.finish(),
                w.out[-2000:])
        ok, out = nbd_load.verify(t, uris[i])
        t.check('no write to disk %d was lost' % i, ok, out)


def test_commit_under_writes(c, uris):
    writers = [nbd_load.Writer(u, first=256) for u in uris]
    r = c.cmd('transaction', {'actions': [
        sync_action('n0', 's0'),
        internal_action('n1', 'i1'),
        sync_action('n1', 's1')]})
    t.equal('a transaction of three actions', r, {'return': {}})
    t.equal('both exports moved to their overlays', exports(c),
            {'e0': 's0', 'e1': 's1'})
    flags = ro(c)
    t.check('the old nodes are read-only, the overlays writable',
            flags['n0'] and flags['n1'] and not flags['s0'] and
            not flags['s1'], flags)
    for i, w in enumerate(writers):
        t.check('every write to disk %d succeeded' % i, w.finish(),
                w.out[-2000:])
        ok, out = nbd_load.verify(t, uris[i], first=256)
        t.check('no write to disk %d was lost' % i, ok, out)
        ok, out = nbd_load.verify(t, uris[i])
        t.check('disk %d still shows what was written before' % i, ok, out)


def test_grouped(c):
    r = c.cmd('transaction', {'actions': [sync_action('s0', 'g0')],
                              'properties': {'completion-mode': 'grouped'}})
    t.equal('grouped is refused for a snapshot', error_of(r),
            generic("Action 'blockdev-snapshot-sync' does not support "
                    "Transaction property completion-mode = grouped"))
    r = c.cmd('transaction', {'actions': [],
                              'properties': {'completion-mode': 'grouped'}})
    t.equal('an empty transaction succeeds', r, {'return': {}})
    t.equal('an action without data', error_of(c.cmd(
        'transaction', {'actions': [{'type': 'abort'}]})),
        generic("Parameter 'actions[0].data' is missing"))


d, uris = start()
c = d.qmp()
test_abort_under_writes(c, uris)
test_commit_under_writes(c, uris)
test_grouped(c)
c.close()
t.equal('the daemon exits 0', d.stop(), 0)
t.equal('the aborted internal snapshot is gone, the committed one kept',
        (snapshot_names(t.path('d0.qcow2')),
         snapshot_names(t.path('d1.qcow2'))), ([], ['i1']))
for name in ('d0', 'd1', 's0', 's1'):
    rc, out, err = t.run(['qemu-img', 'check', t.path('%s.qcow2' % name)])
    t.equal('qemu-img check %s.qcow2' % name, rc, 0)
t.finish()
