"""blockdev-backup on a live disk: the incremental backup path of
docs/incremental-backup.md while fio (its nbd engine) writes random data
to the disk through an NBD export the whole time.

  1. transaction {internal snapshot p1, block-dirty-bitmap-add b0,
     blockdev-backup sync=full to full.qcow2};
  2. fio goes on writing;
  3. transaction {internal snapshot p2, blockdev-backup sync=incremental
     bitmap b0 to inc.qcow2, an overlay of full.qcow2}.

The internal snapshots are taken in the same transaction (the same
drained section) as each backup, so they are the disk as the backup must
hold it: afterwards full.qcow2 must read as p1 and the chain
inc.qcow2 -> full.qcow2 as p2 (the real qemu-img compare), inc.qcow2 must
hold only what changed, and every image must pass the real qemu-img
check.  The bitmap is checked too: after each backup it holds only the
writes made since (never empty while fio writes, never the whole disk).

Then two backups of the same disk at once (stacked copy-before-write
filters, as QEMU does), with known writes between and after their
starts: each target must hold the disk of its own start.
"""
import json
import os
import subprocess
import time

from qsd import Tests, have, wait_job_status

t = Tests('backup')
MIB = 1 << 20
SIZE = 32 * MIB


def fio_start(seconds, sock='nbd.sock', offset=0):
    """fio writes random blocks of the export from @offset on until
    @seconds passed."""
    uri = 'nbd+unix:///disk?socket=%s' % t.path(sock)
    return subprocess.Popen(
        ['fio', '--name=load', '--ioengine=nbd', '--uri=' + uri,
         '--rw=randwrite', '--bsrange=4k-64k', '--offset=%d' % offset,
         '--size=%d' % (SIZE - offset),
         '--iodepth=8', '--rate=1m', '--time_based',
         '--runtime=%d' % seconds, '--randrepeat=0'],
        cwd=t.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def act(kind, **data):
    return {'type': kind, 'data': data}


def bitmap_count(c):
    for n in c.ok('query-named-block-nodes', {'flat': True}):
        for b in n.get('dirty-bitmaps', []):
            if n['node-name'] == 'src' and b.get('name') == 'b0':
                return b['count']
    return None


def transaction(what, c, actions, job):
    r = c.cmd('transaction', {'actions': actions})
    t.check('%s: transaction' % what, r and 'return' in r, r)
    t.check('%s: the backup completed while fio wrote' % what,
            wait_job_status(c, job, 'null', timeout=120))


def compare(what, a, b, fmt_b):
    rc, out, err = t.run(['qemu-img', 'compare', '-f', 'qcow2', '-F', fmt_b,
                          t.path(a), t.path(b)])
    t.check(what, rc == 0, out + err)


def allocated_top(name):
    rc, out, _ = t.run(['qemu-img', 'map', '--output=json', t.path(name)])
    return sum(e['length'] for e in json.loads(out or '[]')
               if e['depth'] == 0 and e['data']) if rc == 0 else -1


def live_incremental():
    what = 'incremental backup under fio'
    t.sh('qemu-img create -q -f qcow2 src.qcow2 %d && '
       'qemu-io -f qcow2 -c "write -P 0x11 0 %d" src.qcow2 && '
       'qemu-img create -q -f qcow2 full.qcow2 %d && '
       'qemu-img create -q -f qcow2 -b full.qcow2 -F qcow2 inc.qcow2'
       % (SIZE, SIZE // 2, SIZE))
    d, c = t.start([t.qcow2('src'), t.qcow2('full')],
                               export='src')
    fio = fio_start(10)
    time.sleep(2)
    transaction('%s: full' % what, c, [
        act('blockdev-snapshot-internal-sync', device='src', name='p1'),
        act('block-dirty-bitmap-add', node='src', name='b0'),
        act('blockdev-backup', device='src', target='full', sync='full',
            **{'job-id': 'full'})], 'full')
    time.sleep(3)
    c.ok('blockdev-add', t.qcow2('inc', backing='full'))
    dirty = bitmap_count(c)
    t.check('%s: the bitmap recorded writes since the full backup (%s '
            'bytes)' % (what, dirty), dirty and 0 < dirty < SIZE)
    transaction('%s: incremental' % what, c, [
        act('blockdev-snapshot-internal-sync', device='src', name='p2'),
        act('blockdev-backup', device='src', target='inc',
            sync='incremental', bitmap='b0', **{'job-id': 'inc'})], 'inc')
    out = fio.communicate(timeout=120)[0].decode(errors='replace')
    t.check('%s: fio wrote without error' % what,
            fio.returncode == 0 and 'err= 0' in out, out[-2000:])
    after = bitmap_count(c)
    t.check('%s: after it, the bitmap holds the later writes only (%s '
            'bytes)' % (what, after), after is not None and after < SIZE)
    c.cmd('quit')
    d.wait()
    t.sh('qemu-img convert -f qcow2 -l snapshot.name=p1 -O raw src.qcow2 '
       'p1.raw && qemu-img convert -f qcow2 -l snapshot.name=p2 -O raw '
       'src.qcow2 p2.raw')
    rc, _, _ = t.run(['cmp', '-s', t.path('p1.raw'), t.path('p2.raw')])
    t.check('%s: the disk changed between the two backups' % what, rc != 0)
    compare('%s: the full backup is the disk at its point in time' % what,
            'full.qcow2', 'p1.raw', 'raw')
    compare('%s: full + incremental is the disk at the second point' % what,
            'inc.qcow2', 'p2.raw', 'raw')
    top = allocated_top('inc.qcow2')
    # the bitmap was read a moment before the second transaction: fio's
    # writes in between are in the image too
    t.check('%s: the incremental image holds what changed only (%d of %d '
            'bytes; the bitmap had %s shortly before)' % (what, top, SIZE,
                                                          dirty),
            0 < top < SIZE)
    for img in ('src.qcow2', 'full.qcow2', 'inc.qcow2'):
        rc, out, err = t.run(['qemu-img', 'check', t.path(img)])
        t.check('%s: qemu-img check %s' % (what, img), rc == 0, out + err)


def wait_all(c, jobs, status, timeout=120):
    """Waits until each of @jobs reached @status, in any order."""
    left = set(jobs)
    end = time.monotonic() + timeout
    while left and time.monotonic() < end:
        e = c.event('JOB_STATUS_CHANGE', timeout=end - time.monotonic())
        if e is None:
            break
        if e['data']['status'] == status:
            left.discard(e['data']['id'])
    return not left


def cbw_nodes(c):
    return sorted(n['node-name'] for n in
                  c.ok('query-named-block-nodes', {'flat': True})
                  if n['drv'] == 'copy-before-write')


def two_backups():
    """Two backups of one disk at once, as QEMU stacks their filters:
    each target must hold the disk as it was when its own backup began.
    qemu-io writes known data to the first half through the export
    before and after the second start, while fio writes random data to
    the second half the whole time (an internal snapshot, as above,
    cannot be taken of a node under a filter: QEMU refuses it too).  The
    first filter goes first: the export then writes through the second."""
    what = 'two backups of one disk under writes'
    half = SIZE // 2
    t.sh('qemu-img create -q -f qcow2 src.qcow2 %d && '
       'qemu-io -f qcow2 -c "write -P 0x22 0 %d" src.qcow2 && '
       'qemu-img create -q -f qcow2 a.qcow2 %d && '
       'qemu-img create -q -f qcow2 b.qcow2 %d && '
       'qemu-img create -q -f raw want-a.raw %d && '
       'qemu-io -f raw -c "write -P 0x22 0 %d" want-a.raw'
       % (SIZE, half, SIZE, SIZE, half, half))
    d = t.daemon([])
    c = d.qmp()
    for n in (t.qcow2('src'), t.qcow2('a'), t.qcow2('b')):
        c.ok('blockdev-add', n)
    c.ok('nbd-server-start', {'addr': {'type': 'unix', 'data': {
        'path': t.path('nbd2.sock')}}})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e0', 'node-name': 'src',
                              'name': 'disk', 'writable': True})
    fio = fio_start(8, 'nbd2.sock', offset=half)
    uri = 'nbd+unix:///disk?socket=%s' % t.path('nbd2.sock')
    # between the starts, and after the second (an unaligned one too)
    writes = ('-c "write -P 0x33 1M 64k" -c "write -P 0x34 5M 1M" '
              '-c "write -P 0x35 12M 4k"',
              '-c "write -P 0x44 1M 64k" -c "write -P 0x45 8M 2M" '
              '-c "write -z 12M 64k"')
    for job, target, speed, io in (('ba', 'a', 2 * MIB, writes[0]),
                                   ('bb', 'b', MIB, writes[1])):
        r = c.cmd('blockdev-backup', {'job-id': job, 'device': 'src',
                                      'target': target, 'sync': 'full',
                                      'speed': speed,
                                      'filter-node-name': 'f' + target})
        t.check('%s: %s starts' % (what, job), r and 'return' in r, r)
        t.sh('qemu-io -f raw %s "%s"' % (io, uri))
    t.sh('cp want-a.raw want-b.raw && qemu-io -f raw %s want-b.raw'
       % writes[0])
    t.equal('%s: both filters are in the graph' % what, cbw_nodes(c),
            ['fa', 'fb'])
    c.ok('block-job-set-speed', {'device': 'ba', 'speed': 0})
    t.check('%s: the first backup completed' % what,
            wait_all(c, ['ba'], 'null'))
    t.equal('%s: the second filter stays' % what, cbw_nodes(c), ['fb'])
    export = c.ok('query-block-exports')[0]['node-name']
    t.equal('%s: the export writes through the second filter' % what,
            export, 'fb')
    c.ok('block-job-set-speed', {'device': 'bb', 'speed': 0})
    t.check('%s: the second backup completed' % what,
            wait_all(c, ['bb'], 'null'))
    t.equal('%s: no filter is left' % what, cbw_nodes(c), [])
    t.equal('%s: the export writes to the disk again' % what,
            c.ok('query-block-exports')[0]['node-name'], 'src')
    out = fio.communicate(timeout=120)[0].decode(errors='replace')
    t.check('%s: fio wrote without error' % what,
            fio.returncode == 0 and 'err= 0' in out, out[-2000:])
    c.cmd('quit')
    d.wait()
    for img in ('a', 'b'):
        t.sh('qemu-img convert -f qcow2 -O raw %s.qcow2 %s.raw' % (img, img))
        rc, out, err = t.run(['cmp', '-n', str(half), t.path(img + '.raw'),
                              t.path('want-%s.raw' % img)])
        t.check('%s: target %s holds the disk of its own start' %
                (what, img), rc == 0, out + err)
    rc, _, _ = t.run(['cmp', '-s', '-n', str(half), t.path('a.raw'),
                      t.path('b.raw')])
    t.check('%s: the two targets differ' % what, rc != 0)
    for img in ('src.qcow2', 'a.qcow2', 'b.qcow2'):
        rc, out, err = t.run(['qemu-img', 'check', t.path(img)])
        t.check('%s: qemu-img check %s' % (what, img), rc == 0, out + err)


def pull_mode():
    """Pull-mode incremental backup (fleecing) while fio writes: one
    transaction takes the fleecing point (the next checkpoint c2, a frozen
    copy of c1 for this backup, an internal snapshot to check against and
    a sync=none backup job whose filter keeps the point-in-time view, as
    libvirt's pull mode does); a snapshot-access node over the job's
    filter is exported with the frozen bitmap, and the backup tool
    (nbd_pull.py) copies its dirty extents into an overlay of the full
    backup.  That chain must read as the disk at the fleecing point.  (The
    filter's own "bitmap" option needs the guest's export moved onto the
    filter, which a running fio would see as a disconnection: it is run,
    against qemu-storage-daemon, by tests/interop/jobs-vs-qsd.py fleece.)
    """
    what = 'pull-mode backup under fio'
    t.sh('qemu-img create -q -f qcow2 src.qcow2 %d && '
       'qemu-io -f qcow2 -c "write -P 0x11 0 %d" src.qcow2 && '
       'qemu-img convert -O qcow2 src.qcow2 full.qcow2 && '
       'qemu-img create -q -f qcow2 fleece.qcow2 %d && '
       'qemu-img create -q -f qcow2 -b full.qcow2 -F qcow2 inc.qcow2'
       % (SIZE, SIZE // 2, SIZE))
    d = t.daemon([])
    c = d.qmp()
    c.ok('blockdev-add', t.qcow2('src'))
    c.ok('block-dirty-bitmap-add', {'node': 'src', 'name': 'c1',
                                    'persistent': True})
    c.ok('nbd-server-start', {'addr': {'type': 'unix', 'data': {
        'path': t.path('nbd.sock')}}})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e0', 'node-name': 'src',
                              'name': 'disk', 'writable': True})
    fio = fio_start(8)
    time.sleep(2)
    c.ok('blockdev-add', t.qcow2('fleece'))
    r = c.cmd('transaction', {'actions': [
        act('block-dirty-bitmap-add', node='src', name='c2',
            persistent=True),
        act('block-dirty-bitmap-add', node='src', name='backup',
            disabled=True),
        act('block-dirty-bitmap-merge', node='src', target='backup',
            bitmaps=['c1']),
        act('block-dirty-bitmap-disable', node='src', name='c1'),
        act('blockdev-snapshot-internal-sync', device='src', name='point'),
        act('blockdev-backup', device='src', target='fleece', sync='none',
            **{'job-id': 'fleece', 'filter-node-name': 'fl'})]})
    t.check('%s: the fleecing transaction' % what, r and 'return' in r, r)
    c.ok('blockdev-add', {'driver': 'snapshot-access', 'node-name': 'snap',
                          'file': 'fl'})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'snap',
                              'node-name': 'snap', 'name': 'snap',
                              'bitmaps': [{'node': 'src',
                                           'name': 'backup'}]})
    c.ok('blockdev-add', t.qcow2('inc'))
    c.ok('block-export-add', {'type': 'nbd', 'id': 'inc', 'node-name': 'inc',
                              'name': 'inc', 'writable': True})
    uri = 'nbd+unix:///%%s?socket=%s' % t.path('nbd.sock')
    rc, out, err = t.run(['/usr/bin/python3',
                          os.path.join(os.path.dirname(
                              os.path.abspath(__file__)), 'nbd_pull.py'),
                          uri % 'snap', 'backup', uri % 'inc'])
    pulled = json.loads(out) if rc == 0 else {}
    t.check('%s: the backup tool pulled the dirty extents (%s bytes)' %
            (what, pulled.get('bytes')), rc == 0 and
            0 < pulled['bytes'] < SIZE, out + err)
    for e in ('snap', 'inc'):
        c.ok('block-export-del', {'id': e})
        c.event('BLOCK_EXPORT_DELETED')
    c.ok('blockdev-del', {'node-name': 'snap'})
    c.ok('job-cancel', {'id': 'fleece'})
    t.check('%s: the fleecing job ended' % what,
            wait_job_status(c, 'fleece', 'null'))
    for n in ('fleece', 'inc'):
        c.ok('blockdev-del', {'node-name': n})
    c.ok('block-dirty-bitmap-remove', {'node': 'src', 'name': 'backup'})
    out = fio.communicate(timeout=120)[0].decode(errors='replace')
    t.check('%s: fio wrote without error' % what,
            fio.returncode == 0 and 'err= 0' in out, out[-2000:])
    c.cmd('quit')
    d.wait()
    t.sh('qemu-img convert -f qcow2 -l snapshot.name=point -O raw src.qcow2 '
       'point.raw')
    compare('%s: full + pulled incremental is the disk at the fleecing '
            'point' % what, 'inc.qcow2', 'point.raw', 'raw')
    t.sh('qemu-img convert -f qcow2 -O raw src.qcow2 final.raw')
    rc, _, _ = t.run(['cmp', '-s', t.path('point.raw'), t.path('final.raw')])
    t.check('%s: the disk changed after the fleecing point' % what, rc != 0)
    for img in ('src.qcow2', 'inc.qcow2'):
        rc, out, err = t.run(['qemu-img', 'check', t.path(img)])
        t.check('%s: qemu-img check %s' % (what, img), rc == 0, out + err)


def main():
    if not have('qemu-img') or not have('qemu-io'):
        t.skip('all', 'qemu-img and qemu-io (qemu-utils) are needed')
        t.finish()
    if not have('fio'):
        t.skip('incremental backup under fio', 'fio is not installed '
               '(Debian fio)')
        t.finish()
    live_incremental()
    two_backups()
    rc, _, _ = t.run(['/usr/bin/python3', '-c', 'import nbd'])
    if rc:
        t.skip('pull-mode backup under fio', 'python3-libnbd is not '
               'installed (for /usr/bin/python3)')
    else:
        pull_mode()
    t.finish()


main()
