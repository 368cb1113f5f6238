#!/usr/bin/env python3
"""Block jobs on nodes in iothreads (threading rule 12 of
docs/architecture.md): mirror (complete with pivot, and cancel after
READY), backup (sync=full, and sync=incremental with a bitmap), stream,
intermediate and active commit, each on a node whose NBD export runs in
an iothread (fixed-iothread=on) while the real qemu-io writes through
that export; the target must then equal the source (`qemu-img
compare`), every image pass `qemu-img check`, and the job's events be
those of the same script with the export in the main loop.  Also:
pause/resume and set-speed of a job in an iothread, on-target-error=stop
there, grouped backups in an iothread and the main loop (a
transaction), a mirror on a node that a vhost-user-blk export put in an
iothread (its replies and events compared with the real
qemu-storage-daemon 7.2 where installed), a target that another
iothread's export keeps (refused, QEMU's message), the nodes going back
to the main loop at the job's end (the iothread can then be deleted),
and SIGTERM / quit while a job runs in an iothread."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
import nbd_load                                         # noqa: E402
from qsd import error_of, generic                       # noqa: E402

t = qsd.Tests('jobs-iothread')
MIB = 1 << 20
SIZE = 16 * MIB
# the writer's blocks: the first half of the disk, 64 KiB each
BLOCKS = 128


def fresh():
    for f in os.listdir(t.dir):
        if f.endswith(('.qcow2', '.sock')):
            os.unlink(t.path(f))


def uri():
    return qsd.nbd_uri(t.path('nbd.sock'), 'disk')


def start(nodes, export, where):
    """A daemon with iothread io0, the nodes @nodes and the NBD export
    'disk' of @export: in io0 (@where 'iothread'), in the main loop
    ('main'), or in io0 because a vhost-user-blk export put the node
    there ('vhost')."""
    d = t.daemon(['--object', 'iothread,id=io0'])
    c = d.qmp()
    for n in nodes:
        c.ok('blockdev-add', n)
    c.ok('nbd-server-start', {'addr': {'type': 'unix', 'data': {
        'path': t.path('nbd.sock')}}})
    if where == 'vhost':
        c.ok('block-export-add', {
            'type': 'vhost-user-blk', 'id': 'v0', 'node-name': export,
            'addr': {'type': 'unix', 'path': t.path('vub.sock')},
            'writable': True, 'iothread': 'io0', 'fixed-iothread': True})
    args = {'type': 'nbd', 'id': 'e0', 'node-name': export, 'name': 'disk',
            'writable': True}
    if where == 'iothread':
        args.update({'iothread': 'io0', 'fixed-iothread': True})
    c.ok('block-export-add', args)
    return d, c


def wait_status(c, job, status, timeout=60):
    """Reads events (keeping them all) until @job goes @status."""
    end = time.monotonic() + timeout
    while True:
        if any(e['event'] == 'JOB_STATUS_CHANGE' and
               e['data'] == {'id': job, 'status': status}
               for e in c.events):
            return True
        left = end - time.monotonic()
        msg = c.recv(left) if left > 0 else None
        if msg is None:
            return False
        if 'event' in msg:
            c.events.append(msg)


def job_events(c, job):
    """The job's events so far, as (event, status or error flag); the
    kept events are consumed.  A pause and its end are left out: a drain
    (an NBD client coming or going) pauses a job, whenever it happens."""
    out = []
    pause = False
    for e in c.events:
        d = e.get('data', {})
        if e['event'] == 'JOB_STATUS_CHANGE' and d.get('id') == job:
            if d['status'] in ('paused', 'standby'):
                pause = True
                continue
            if out and pause and d['status'] in ('running', 'ready'):
                pause = False
                continue
            pause = False
            out.append(d['status'])
        elif e['event'].startswith('BLOCK_JOB_') and \
                job in (d.get('device'), d.get('id')):
            out.append(e['event'] + (' error' if 'error' in d else ''))
    c.events = []
    return out


def end(what, d, c, vhost=False):
    """Deletes the exports and the iothread (which the job's nodes must
    have left), quits; the daemon must exit 0.  The export in the
    iothread goes last: it takes the nodes back to the main loop, which
    the other, served from where the node is, cannot follow."""
    for e in ['e0'] + (['v0'] if vhost else []):
        c.ok('block-export-del', {'id': e, 'mode': 'hard'})
        c.event('BLOCK_EXPORT_DELETED')
    t.equal('%s: the iothread can go after the job' % what,
            c.cmd('object-del', {'id': 'io0'}), {'return': {}})
    nodes = [n['drv'] for n in c.ok('query-named-block-nodes')]
    c.cmd('quit')
    t.equal('%s: the daemon exits 0' % what, d.wait(), 0)
    c.close()
    return nodes


def check(what, *names):
    for name in names:
        rc, out, err = t.run(['qemu-img', 'check', t.path(name)])
        t.check('%s: qemu-img check %s' % (what, name), rc == 0, out + err)


def compare(what, a, b):
    rc, out, err = t.run(['qemu-img', 'compare', t.path(a), t.path(b)])
    t.check('%s: %s equals %s' % (what, b, a), rc == 0, out + err)


def read(what, name, pattern, offset, length):
    rc, out, err = t.run(['qemu-io', '-f', 'qcow2', '-r', '-c',
                          'read -P %d %d %d' % (pattern, offset, length),
                          t.path(name)])
    t.check('%s: %s holds 0x%x at %dM+%dM' % (what, name, pattern,
                                              offset // MIB, length // MIB),
            rc == 0 and 'Pattern verification failed' not in out, out + err)


def written(what, name):
    """The writer's blocks are in image @name."""
    ok, out = nbd_load.verify(t, t.path(name), n=BLOCKS, fmt='qcow2')
    t.check('%s: %s holds every block the client wrote' % (what, name),
            ok, out)


def writer_done(what, w):
    t.check('%s: every write of the client succeeded' % what, w.finish(),
            w.out[-1000:])


def served(what, c, node):
    exports = [e['node-name'] for e in c.ok('query-block-exports')
               if e['id'] == 'e0']
    t.equal('%s: the export serves %s' % (what, node), exports, [node])


# ---------------------------------------------------------------------------
# The jobs, each run with the export in io0 and in the main loop


def mirror(where, how):
    what = 'mirror (%s) %s' % (how, where)
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x5a 0 16M" src.qcow2 && '
         'qemu-img create -q -f qcow2 tgt.qcow2 16M')
    d, c = start([t.qcow2('src'), t.qcow2('tgt')], 'src', where)
    w = nbd_load.Writer(uri(), n=BLOCKS)
    c.ok('blockdev-mirror', {'job-id': 'j', 'device': 'src',
                             'target': 'tgt', 'sync': 'full'})
    t.check('%s: ready' % what, wait_status(c, 'j', 'ready'))
    writer_done(what, w)
    if how == 'complete':
        c.ok('job-complete', {'id': 'j'})
    else:
        c.ok('block-job-cancel', {'device': 'j'})
    t.check('%s: ends' % what, wait_status(c, 'j', 'null'))
    events = job_events(c, 'j')
    served(what, c, 'tgt' if how == 'complete' else 'src')
    ok, out = nbd_load.verify(t, uri(), n=BLOCKS)
    t.check('%s: the export reads every block back' % what, ok, out)
    end(what, d, c, where == 'vhost')
    compare(what, 'src.qcow2', 'tgt.qcow2')
    written(what, 'tgt.qcow2')
    check(what, 'src.qcow2', 'tgt.qcow2')
    return events


def backup(where):
    what = 'backup sync=full %s' % where
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x5a 0 16M" src.qcow2 && '
         'qemu-img convert -O qcow2 src.qcow2 ref.qcow2 && '
         'qemu-img create -q -f qcow2 tgt.qcow2 16M')
    d, c = start([t.qcow2('src'), t.qcow2('tgt')], 'src', where)
    # slow enough that the client's writes meet clusters not copied yet
    c.ok('blockdev-backup', {'job-id': 'j', 'device': 'src',
                             'target': 'tgt', 'sync': 'full',
                             'speed': 16 * MIB})
    w = nbd_load.Writer(uri(), n=BLOCKS)
    writer_done(what, w)
    t.check('%s: ends' % what, wait_status(c, 'j', 'null'))
    events = job_events(c, 'j')
    served(what, c, 'src')
    end(what, d, c)
    compare(what + ': the point in time', 'ref.qcow2', 'tgt.qcow2')
    written(what, 'src.qcow2')
    check(what, 'src.qcow2', 'tgt.qcow2')
    return events


def backup_bitmap():
    what = 'backup sync=incremental iothread'
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x5a 0 16M" src.qcow2 && '
         'qemu-img create -q -f qcow2 tgt.qcow2 16M')
    d, c = start([t.qcow2('src'), t.qcow2('tgt')], 'src', 'iothread')
    c.ok('block-dirty-bitmap-add', {'node': 'src', 'name': 'b0'})
    writer_done(what, nbd_load.Writer(uri(), n=16))
    c.ok('blockdev-backup', {'job-id': 'j', 'device': 'src',
                             'target': 'tgt', 'sync': 'incremental',
                             'bitmap': 'b0'})
    # later writes are not the backup's
    w = nbd_load.Writer(uri(), n=16, first=32)
    t.check('%s: ends' % what, wait_status(c, 'j', 'null'))
    writer_done(what, w)
    t.equal('%s: events' % what, job_events(c, 'j'),
            ['created', 'running', 'waiting', 'pending',
             'BLOCK_JOB_COMPLETED', 'concluded', 'null'])
    end(what, d, c)
    ok, out = nbd_load.verify(t, t.path('tgt.qcow2'), n=16, fmt='qcow2')
    t.check('%s: the target holds the dirty blocks' % what, ok, out)
    read(what, 'tgt.qcow2', 0, 1 * MIB, 15 * MIB)
    check(what, 'src.qcow2', 'tgt.qcow2')


def stream(where):
    what = 'stream %s' % where
    fresh()
    t.sh('qemu-img create -q -f qcow2 base.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x5a 0 16M" base.qcow2 && '
         'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2')
    d, c = start([t.qcow2('base'), t.qcow2('top', 'base')], 'top', where)
    w = nbd_load.Writer(uri(), n=BLOCKS)
    c.ok('block-stream', {'job-id': 'j', 'device': 'top'})
    t.check('%s: ends' % what, wait_status(c, 'j', 'null'))
    writer_done(what, w)
    events = job_events(c, 'j')
    nodes = end(what, d, c)
    t.check('%s: the filter is gone' % what,
            'copy-on-read' not in nodes, nodes)
    rc, out, err = t.run(['qemu-img', 'info', t.path('top.qcow2')])
    t.check('%s: the top has no backing file' % what,
            'backing file' not in out, out)
    written(what, 'top.qcow2')
    read(what, 'top.qcow2', 0x5a, 8 * MIB, 8 * MIB)
    check(what, 'base.qcow2', 'top.qcow2')
    return events


def commit(where, active):
    what = '%s commit %s' % ('active' if active else 'intermediate', where)
    fresh()
    t.sh('qemu-img create -q -f qcow2 base.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x5a 0 16M" base.qcow2 && '
         'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 mid.qcow2 && '
         'qemu-io -f qcow2 -c "write -P 0x6b 8M 4M" mid.qcow2 && '
         'qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 top.qcow2')
    d, c = start([t.qcow2('base'), t.qcow2('mid', 'base'),
                  t.qcow2('top', 'mid')], 'top', where)
    w = nbd_load.Writer(uri(), n=BLOCKS)
    if active:
        c.ok('block-commit', {'job-id': 'j', 'device': 'top'})
        t.check('%s: ready' % what, wait_status(c, 'j', 'ready'))
        writer_done(what, w)
        c.ok('job-complete', {'id': 'j'})
    else:
        c.ok('block-commit', {'job-id': 'j', 'device': 'top',
                              'top-node': 'mid', 'base-node': 'base'})
    t.check('%s: ends' % what, wait_status(c, 'j', 'null'))
    if not active:
        writer_done(what, w)
    events = job_events(c, 'j')
    served(what, c, 'base' if active else 'top')
    end(what, d, c)
    if active:
        compare(what, 'top.qcow2', 'base.qcow2')
        written(what, 'base.qcow2')
    else:
        rc, out, err = t.run(['qemu-img', 'info', t.path('top.qcow2')])
        t.check('%s: the top\'s backing file is the base' % what,
                re.search(r'backing file: .*base\.qcow2', out), out)
        written(what, 'top.qcow2')
    read(what, 'base.qcow2', 0x6b, 8 * MIB, 4 * MIB)
    read(what, 'base.qcow2', 0x5a, 12 * MIB, 4 * MIB)
    check(what, 'base.qcow2', 'mid.qcow2', 'top.qcow2')
    return events


def pause_resume(where):
    """job-pause, job-resume and block-job-set-speed of a mirror."""
    what = 'pause/resume/set-speed %s' % where
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x5a 0 16M" src.qcow2 && '
         'qemu-img create -q -f qcow2 tgt.qcow2 16M')
    d, c = start([t.qcow2('src'), t.qcow2('tgt')], 'src', where)
    c.ok('blockdev-mirror', {'job-id': 'j', 'device': 'src',
                             'target': 'tgt', 'sync': 'full',
                             'speed': 1 * MIB, 'buf-size': 256 * 1024})
    t.check('%s: running' % what, wait_status(c, 'j', 'running'))
    c.ok('job-pause', {'id': 'j'})
    t.check('%s: paused' % what, wait_status(c, 'j', 'paused'))
    p0 = c.ok('query-jobs')[0]
    time.sleep(0.3)
    p1 = c.ok('query-jobs')[0]
    t.check('%s: a paused job makes no progress' % what,
            p0['status'] == p1['status'] == 'paused' and
            p0['current-progress'] == p1['current-progress'] < SIZE,
            (p0, p1))
    t.equal('%s: query-block-jobs says paused' % what,
            [(j['paused'], j['speed']) for j in c.ok('query-block-jobs')],
            [(True, MIB)])
    c.ok('job-resume', {'id': 'j'})
    c.ok('block-job-set-speed', {'device': 'j', 'speed': 0})
    t.equal('%s: the new speed is reported' % what,
            [j['speed'] for j in c.ok('query-block-jobs')], [0])
    t.check('%s: without the limit it gets ready' % what,
            wait_status(c, 'j', 'ready', timeout=30))
    c.ok('job-complete', {'id': 'j'})
    t.check('%s: ends' % what, wait_status(c, 'j', 'null'))
    events = job_events(c, 'j')
    end(what, d, c)
    compare(what, 'src.qcow2', 'tgt.qcow2')
    check(what, 'src.qcow2', 'tgt.qcow2')
    return events


def stop_policy():
    """on-target-error=stop in an iothread: the job pauses with the
    error, job-resume copies the range again."""
    what = 'on-target-error=stop iothread'
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 4M && '
         'qemu-io -f qcow2 -c "write -P 0x5a 0 4M" src.qcow2 && '
         'qemu-img create -q -f qcow2 tgt.qcow2 4M')
    tgt = {'driver': 'qcow2', 'node-name': 'tgt', 'file': {
        'driver': 'blkdebug',
        'inject-error': [{'event': 'write_aio', 'errno': 5, 'once': True}],
        'image': {'driver': 'file', 'filename': t.path('tgt.qcow2')}}}
    d, c = start([t.qcow2('src'), tgt], 'src', 'iothread')
    c.ok('blockdev-mirror', {'job-id': 'j', 'device': 'src',
                             'target': 'tgt', 'sync': 'full',
                             'on-target-error': 'stop'})
    e = c.event('BLOCK_JOB_ERROR')
    t.equal('%s: BLOCK_JOB_ERROR' % what, e and e['data'],
            {'device': 'j', 'operation': 'write', 'action': 'stop'})
    t.check('%s: paused' % what, wait_status(c, 'j', 'paused'))
    t.equal('%s: io-status failed' % what,
            [j['io-status'] for j in c.ok('query-block-jobs')], ['failed'])
    c.ok('job-resume', {'id': 'j'})
    t.check('%s: resumed, ready' % what, wait_status(c, 'j', 'ready'))
    c.ok('job-complete', {'id': 'j'})
    t.check('%s: ends' % what, wait_status(c, 'j', 'null'))
    end(what, d, c)
    compare(what, 'src.qcow2', 'tgt.qcow2')
    check(what, 'src.qcow2', 'tgt.qcow2')


def same_events(name, fn, *args):
    """@fn in an iothread, then in the main loop: the same job events,
    which are returned."""
    got = fn('iothread', *args)
    main = fn('main', *args)
    t.equal('%s: the events in an iothread are the main loop\'s' % name,
            got, main)
    return main


def grouped():
    """A transaction's backups in two contexts (completion-mode
    grouped): one of a node in io0, one of a node in the main loop; they
    finalize together, and a cancel of one cancels the other."""
    what = 'grouped backups in io0 and the main loop'
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x5a 0 16M" src.qcow2 && '
         'qemu-img create -q -f qcow2 src2.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x3c 2M 6M" src2.qcow2 && '
         'for i in 1 2 3 4; do '
         'qemu-img create -q -f qcow2 dst$i.qcow2 16M; done')
    d, c = start([t.qcow2(n) for n in ('src', 'src2', 'dst1', 'dst2',
                                       'dst3', 'dst4')], 'src', 'iothread')

    def act(job, device, target, speed):
        return {'type': 'blockdev-backup', 'data': {
            'job-id': job, 'device': device, 'target': target,
            'sync': 'full', 'speed': speed}}

    c.ok('transaction', {'properties': {'completion-mode': 'grouped'},
                         'actions': [act('g1', 'src', 'dst1', 0),
                                     act('g2', 'src2', 'dst2', 8 * MIB)]})
    t.check('%s: both end' % what, wait_status(c, 'g1', 'null') and
            wait_status(c, 'g2', 'null'))
    t.equal('%s: the quick one waited for the other' % what,
            (job_events(c, 'g1'), ),
            (['created', 'running', 'waiting', 'pending',
              'BLOCK_JOB_COMPLETED', 'concluded', 'null'], ))
    c.ok('transaction', {'properties': {'completion-mode': 'grouped'},
                         'actions': [act('c1', 'src', 'dst3', MIB),
                                     act('c2', 'src2', 'dst4', MIB)]})
    t.check('%s: running' % what, wait_status(c, 'c1', 'running'))
    c.ok('block-job-cancel', {'device': 'c2'})
    t.check('%s: a cancel of one ends both' % what,
            wait_status(c, 'c1', 'null') and wait_status(c, 'c2', 'null'))
    t.equal('%s: ... the other cancelled' % what,
            [e for e in job_events(c, 'c1') if e.startswith('BLOCK')],
            ['BLOCK_JOB_CANCELLED'])
    t.equal('%s: no job left' % what, c.ok('query-jobs'), [])
    end(what, d, c)
    compare(what, 'src.qcow2', 'dst1.qcow2')
    compare(what, 'src2.qcow2', 'dst2.qcow2')
    check(what, *['dst%d.qcow2' % i for i in (1, 2, 3, 4)])


# ---------------------------------------------------------------------------
# Refusals, shutdown


def refused_target():
    """A target that an export keeps in another iothread cannot move."""
    what = 'target in another iothread'
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 16M && '
         'qemu-img create -q -f qcow2 tgt.qcow2 16M')
    d, c = start([t.qcow2('src'), t.qcow2('tgt')], 'src', 'iothread')
    c.ok('object-add', {'qom-type': 'iothread', 'id': 'io1'})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e1', 'name': 't',
                              'node-name': 'tgt', 'iothread': 'io1',
                              'fixed-iothread': True})
    for cmd, args in (('blockdev-mirror', {'sync': 'full'}),
                      ('blockdev-backup', {'sync': 'full'})):
        args.update({'job-id': 'j', 'device': 'src', 'target': 'tgt'})
        t.equal('%s: %s refused with QEMU\'s message' % (what, cmd),
                error_of(c.cmd(cmd, args)),
                generic('Cannot change iothread of active block backend'))
    t.equal('%s: no job, no filter left' % what,
            (c.ok('query-jobs'),
             [n['drv'] for n in c.ok('query-named-block-nodes')
              if n['drv'] in ('mirror_top', 'copy-before-write')]),
            ([], []))
    c.ok('block-export-del', {'id': 'e1'})
    c.event('BLOCK_EXPORT_DELETED')
    c.ok('object-del', {'id': 'io1'})
    # the export of tgt went: the target now follows the source
    c.ok('blockdev-mirror', {'job-id': 'j', 'device': 'src',
                             'target': 'tgt', 'sync': 'full'})
    t.check('%s: once free, the target follows the source' % what,
            wait_status(c, 'j', 'ready'))
    c.ok('block-job-cancel', {'device': 'j'})
    t.check('%s: cancelled' % what, wait_status(c, 'j', 'null'))
    end(what, d, c)
    check(what, 'src.qcow2', 'tgt.qcow2')


def shutdown(how):
    """SIGTERM (a mirror) or quit (a backup) while the job runs."""
    what = '%s during a job in an iothread' % how
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 16M && '
         'qemu-io -f qcow2 -c "write -P 0x5a 0 16M" src.qcow2 && '
         'qemu-img convert -O qcow2 src.qcow2 ref.qcow2 && '
         'qemu-img create -q -f qcow2 tgt.qcow2 16M')
    d, c = start([t.qcow2('src'), t.qcow2('tgt')], 'src', 'iothread')
    cmd = 'blockdev-mirror' if how == 'SIGTERM' else 'blockdev-backup'
    c.ok(cmd, {'job-id': 'j', 'device': 'src', 'target': 'tgt',
               'sync': 'full', 'speed': 2 * MIB})
    t.check('%s: running' % what, wait_status(c, 'j', 'running'))
    if how == 'SIGTERM':
        w = nbd_load.Writer(uri(), n=BLOCKS)
        time.sleep(0.3)
        t.equal('%s: exit 0' % what, d.stop(), 0)
        w.proc.communicate(timeout=qsd.TIMEOUT * 4)
    else:
        time.sleep(0.3)
        c.cmd('quit')
        t.equal('%s: exit 0' % what, d.wait(), 0)
    c.close()
    check(what, 'src.qcow2', 'tgt.qcow2')
    if how == 'quit':
        compare(what + ': the source is intact', 'ref.qcow2', 'src.qcow2')


# ---------------------------------------------------------------------------
# The same script against the real qemu-storage-daemon


def qsd_script(binary, d):
    """A mirror of a node that a vhost-user-blk export put in iothread
    io0, completed; returns the replies and events, normalised."""
    sock = os.path.join(d, 'qmp.sock')
    proc = subprocess.Popen(
        [binary, '--chardev', 'socket,id=m0,path=%s,server=on,wait=off'
         % sock, '--monitor', 'chardev=m0', '--object', 'iothread,id=io0'],
        cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    c = None

    def connect():
        nonlocal c
        try:
            c = qsd.QmpClient(sock)
        except OSError:
            pass
        return c is not None or proc.poll() is not None

    if not qsd.wait_for(connect) or c is None:
        return ['no QMP socket']
    c.negotiate()
    log = []

    def cmd(name, args):
        r = c.cmd(name, args)
        log.append((name, r))

    for n in ('src', 'tgt'):
        cmd('blockdev-add', {'driver': 'qcow2', 'node-name': n, 'file': {
            'driver': 'file', 'filename': os.path.join(d, n + '.qcow2')}})
    cmd('block-export-add', {
        'type': 'vhost-user-blk', 'id': 'v0', 'node-name': 'src',
        'addr': {'type': 'unix', 'path': os.path.join(d, 'vub.sock')},
        'writable': True, 'iothread': 'io0', 'fixed-iothread': True})
    cmd('blockdev-mirror', {'job-id': 'j', 'device': 'src',
                            'target': 'tgt', 'sync': 'full'})
    ok = wait_status(c, 'j', 'ready')
    cmd('job-complete', {'id': 'j'})
    ok = ok and wait_status(c, 'j', 'null')
    cmd('query-block-exports', None)
    cmd('block-export-del', {'id': 'v0'})
    c.event('BLOCK_EXPORT_DELETED')
    events = [e['event'] + ' ' + str(e.get('data', {}).get('status', ''))
              for e in c.events if e['event'] != 'BLOCK_EXPORT_DELETED']
    c.cmd('quit')
    proc.wait(timeout=qsd.TIMEOUT)
    c.close()
    return [ok, log, events]


def vs_qsd():
    what = 'mirror of a vhost-user-blk export\'s node vs qemu-storage-daemon'
    binary = 'qemu-storage-daemon'
    if not qsd.have(binary):
        t.skip(what, 'qemu-storage-daemon (qemu-system-common) is not '
               'installed')
        return
    runs = []
    for b in (binary, t.daemon_bin):
        d = os.path.join(t.dir, os.path.basename(b))
        os.makedirs(d, exist_ok=True)
        subprocess.run('qemu-img create -q -f qcow2 src.qcow2 4M && '
                       'qemu-io -f qcow2 -c "write -P 0x5a 0 2M" src.qcow2 '
                       '>/dev/null && '
                       'qemu-img create -q -f qcow2 tgt.qcow2 4M',
                       shell=True, cwd=d, check=True)
        runs.append(qsd_script(b, d))
        rc, out, err = t.run(['qemu-img', 'compare',
                              os.path.join(d, 'src.qcow2'),
                              os.path.join(d, 'tgt.qcow2')])
        t.check('%s: %s: the target equals the source' %
                (what, os.path.basename(b)), rc == 0, out + err)
    t.equal(what + ': the same replies and events', runs[1], runs[0])


def main():
    if not qsd.have('qemu-io') or not qsd.have('qemu-img'):
        t.skip('everything', 'qemu-utils is not installed')
        t.finish()
    main_events = same_events('mirror complete', mirror, 'complete')
    same_events('mirror cancel after ready', mirror, 'cancel')
    t.equal('mirror with a vhost-user-blk export in an iothread: the '
            'events', mirror('vhost', 'complete'), main_events)
    same_events('backup', backup)
    backup_bitmap()
    same_events('stream', stream)
    same_events('intermediate commit', commit, False)
    same_events('active commit', commit, True)
    same_events('pause, resume, set-speed', pause_resume)
    grouped()
    stop_policy()
    refused_target()
    shutdown('SIGTERM')
    shutdown('quit')
    vs_qsd()
    t.finish()


main()
