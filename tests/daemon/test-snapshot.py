#!/usr/bin/env python3
"""External snapshots (blockdev-snapshot-sync, blockdev-snapshot) and
internal ones (blockdev-snapshot-internal-sync, -delete-internal-sync)
of a node that an NBD export serves while qemu-io writes to it: the
export follows each overlay, no write is lost, the overlays record the
backing file QEMU records, the old nodes turn read-only, internal
snapshots hold each write whole or not at all, and every image passes
the real qemu-img check.  QEMU's error messages for the same commands
are compared with the real daemon in tests/interop/daemon-ops-vs-qsd."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic                       # noqa: E402
import nbd_load                                         # noqa: E402

t = qsd.Tests('test-snapshot')


def start(img, name='disk'):
    sock = t.path('%s.sock' % name)
    d = t.daemon(['--blockdev', 'driver=file,node-name=f0,filename=%s' % img,
                  '--blockdev', 'driver=qcow2,node-name=n0,file=f0',
                  '--nbd-server', 'addr.type=unix,addr.path=%s' % sock,
                  '--export', 'type=nbd,id=e0,node-name=n0,writable=on,'
                              'name=disk'])
    return d, qsd.nbd_uri(sock, 'disk')


def export_node(c):
    return c.ok('query-block-exports')[0]['node-name']


def nodes(c):
    return {n['node-name']: n for n in
            c.ok('query-named-block-nodes', {'flat': True})}


def image_info(path):
    rc, out, err = t.run(['qemu-img', 'info', '-U', '--output=json', path])
    return json.loads(out) if rc == 0 else {}


def qemu_img_check(path):
    rc, out, err = t.run(['qemu-img', 'check', path])
    t.equal('qemu-img check %s' % os.path.basename(path), rc, 0)


def test_external_sync_under_writes():
    base = t.create_image('base.qcow2')
    d, uri = start(base)
    c = d.qmp()
    w = nbd_load.Writer(uri)
    files, prev, replies = [], 'n0', []
    while w.running() and len(files) < 12:
        name = 's%d' % len(files)
        path = t.path('%s.qcow2' % name)
        replies.append(c.cmd('blockdev-snapshot-sync',
                             {'node-name': prev, 'snapshot-file': path,
                              'snapshot-node-name': name}))
        files.append(path)
        prev = name
    t.check('every write succeeded across the snapshots', w.finish(),
            w.out[-2000:])
    t.check('snapshots taken while the writes ran', len(files) > 1,
            len(files))
    t.equal('each succeeded', replies, [{'return': {}}] * len(files))
    t.equal('the export serves the last overlay', export_node(c), prev)
    ok, out = nbd_load.verify(t, uri)
    t.check('no write was lost', ok, out)
    n = nodes(c)
    t.check('the old nodes are read-only, the top one is not',
            n['n0']['ro'] and all(n['s%d' % i]['ro']
                                  for i in range(len(files) - 1)) and
            not n[prev]['ro'], {k: v['ro'] for k, v in n.items()})
    t.equal('an old node is busy', error_of(c.cmd(
        'blockdev-snapshot-sync', {'node-name': 'n0',
                                   'snapshot-file': t.path('x.qcow2'),
                                   'snapshot-node-name': 'x'})),
        generic("Node 'n0' is busy: node is used as backing hd of 's0'"))
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    chain = [base] + files
    for lower, upper in zip(chain, chain[1:]):
        info = image_info(upper)
        t.equal('%s records its backing file as QEMU does' %
                os.path.basename(upper),
                (info.get('backing-filename'),
                 info.get('backing-filename-format')), (lower, 'qcow2'))
        qemu_img_check(upper)
    qemu_img_check(base)
    ok, out = nbd_load.verify(t, files[-1], fmt='qcow2')
    t.check('the chain holds every write after shutdown', ok, out)


def test_blockdev_snapshot_under_writes():
    base = t.create_image('b2.qcow2')
    d, uri = start(base, 'b2')
    c = d.qmp()
    overlays = []
    for i in range(4):
        path = t.path('o%d.qcow2' % i)
        lower = base if i == 0 else overlays[-1]
        rc, out, err = t.run(['qemu-img', 'create', '-q', '-f', 'qcow2',
                              '-F', 'qcow2', '-b', lower, '-u', path, '64M'])
        overlays.append(path)
        c.ok('blockdev-add', {'driver': 'qcow2', 'node-name': 'o%d' % i,
                              'backing': None,
                              'file': {'driver': 'file', 'filename': path}})
    w = nbd_load.Writer(uri)
    replies, prev = [], 'n0'
    for i in range(4):
        if not w.running():
            break
        replies.append(c.cmd('blockdev-snapshot',
                             {'node': prev, 'overlay': 'o%d' % i}))
        prev = 'o%d' % i
    t.check('every write succeeded across blockdev-snapshot', w.finish(),
            w.out[-2000:])
    t.equal('each blockdev-snapshot succeeded', replies,
            [{'return': {}}] * len(replies))
    t.equal('the export serves the last overlay', export_node(c), prev)
    ok, out = nbd_load.verify(t, uri)
    t.check('no write was lost', ok, out)
    t.equal('an overlay in use is refused', error_of(c.cmd(
        'blockdev-snapshot', {'node': prev, 'overlay': 'f0'})),
        generic('The overlay is already in use'))
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    for path in [base] + overlays:
        qemu_img_check(path)


def snapshot_names(path):
    return [s['name'] for s in image_info(path).get('snapshots', [])]


def test_internal_under_writes():
    img = t.create_image('int.qcow2')
    d, uri = start(img, 'int')
    c = d.qmp()
    w = nbd_load.Writer(uri)
    names = []
    while w.running() and len(names) < 8:
        name = 'snap%d' % len(names)
        r = c.cmd('blockdev-snapshot-internal-sync',
                  {'device': 'n0', 'name': name})
        if not t.equal('internal snapshot %s' % name, r, {'return': {}}):
            break
        names.append(name)
    t.check('every write succeeded across the internal snapshots',
            w.finish(), w.out[-2000:])
    ok, out = nbd_load.verify(t, uri)
    t.check('no write was lost', ok, out)
    r = c.cmd('blockdev-snapshot-delete-internal-sync',
              {'device': 'n0', 'name': names[0]})
    info = r.get('return', {})
    t.equal('delete returns the SnapshotInfo',
            (info.get('id'), info.get('name'), info.get('vm-state-size')),
            ('1', names[0], 0))
    t.check('with its dates', all(k in info for k in (
        'date-sec', 'date-nsec', 'vm-clock-sec', 'vm-clock-nsec')), info)
    t.equal('a deleted snapshot is gone', error_of(c.cmd(
        'blockdev-snapshot-delete-internal-sync',
        {'device': 'n0', 'id': '1'})),
        generic("Snapshot with id '1' and name 'null' does not exist on "
                "device 'n0'"))
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    qemu_img_check(img)
    t.equal('the image lists the snapshots left', snapshot_names(img),
            names[1:])
    whole = True
    for name in names[1:]:
        raw = t.path('%s.raw' % name)
        rc, out, err = t.run(['qemu-img', 'convert', '-O', 'raw', '-l',
                              'snapshot.name=%s' % name, img, raw])
        with open(raw, 'rb') as f:
            whole &= rc == 0 and nbd_load.whole_blocks(f.read())
        os.unlink(raw)
    t.check('each snapshot holds each write whole or not at all', whole)


test_external_sync_under_writes()
test_blockdev_snapshot_under_writes()
test_internal_under_writes()
t.finish()
