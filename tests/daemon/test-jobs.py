"""Block jobs of the storage daemon under load, under faults, and
interrupted:

* mirror with 16 copies in flight (and with one) while fio rewrites a
  small part of the disk through the export, 16 writes at once: the target must equal the
  source, which a racing write copied stale would break;
* stream, intermediate and active commit, and mirror (background and
  write-blocking) each run while fio (its nbd engine) writes random data
  to the disk through an NBD export; fio then reads every block back
  through the export (after the pivot: from the target) and checks it,
  and the data no guest wrote is checked with the real qemu-io;
* blkdebug fails reads of the source and writes of the target for each
  on-*-error policy (report, ignore, stop, enospc);
* cancel, pause and resume in every phase, and a daemon shutdown while a
  job runs, leave images that pass the real qemu-img check with the
  source's data intact.
"""
import os
import subprocess
import time

from qsd import Tests, error_of, have, wait_for, wait_job_status

t = Tests('jobs')
MIB = 1 << 20


def fresh():
    """Empties the test directory of images (keeps sockets' directory)."""
    for f in os.listdir(t.dir):
        if f.endswith(('.qcow2', '.raw', '.sock')):
            os.unlink(t.path(f))


def job_event(c, name, timeout=60):
    return c.event(name, timeout=timeout)


def quit(d, c):
    c.cmd('quit')
    rc = d.wait()
    c.close()
    return rc


def img_check(what, name):
    rc, out, err = t.run(['qemu-img', 'check', '-U', t.path(name)])
    t.check('%s: qemu-img check %s' % (what, name), rc == 0, out + err)


def qemu_io_read(what, name, pattern, offset, length, fmt='qcow2'):
    rc, out, err = t.run(['qemu-io', '-f', fmt, '-r', '-U', '-c',
                          'read -P %d %d %d' % (pattern, offset, length),
                          t.path(name)])
    t.check('%s: %s holds 0x%x at %d+%d' % (what, name, pattern, offset,
                                            length),
            rc == 0 and 'Pattern verification failed' not in out, out + err)


# ---------------------------------------------------------------------------
# Jobs under load

def fio_start(size):
    """fio writes [0, size) of the export at random, then verifies it."""
    uri = 'nbd+unix:///disk?socket=%s' % t.path('nbd.sock')
    return subprocess.Popen(
        ['fio', '--name=load', '--ioengine=nbd', '--uri=' + uri,
         '--rw=randwrite', '--bs=4k', '--size=%d' % size, '--iodepth=8',
         '--rate=6m', '--verify=crc32c', '--verify_fatal=1',
         '--do_verify=1', '--randrepeat=0'],
        cwd=t.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def fio_finish(what, fio):
    try:
        out = fio.communicate(timeout=120)[0].decode(errors='replace')
    except subprocess.TimeoutExpired:
        fio.kill()
        out = fio.communicate()[0].decode(errors='replace')
    t.check('%s: fio read back every block it wrote' % what,
            fio.returncode == 0 and 'verify: bad' not in out and
            'err=' in out and 'err= 0' in out, out[-3000:])


def pivoted(what, c, node):
    """The job succeeded and the export now serves @node."""
    e = c.event('BLOCK_JOB_COMPLETED', timeout=5)
    t.check('%s: BLOCK_JOB_COMPLETED without error' % what,
            e is not None and 'error' not in e['data'], e)
    exports = c.ok('query-block-exports')
    t.equal('%s: the export serves %s' % (what, node),
            exports and exports[0]['node-name'], node)


def load_mirror(mode):
    what = 'mirror %s under fio' % mode
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 32M && '
       'qemu-io -f qcow2 -c "write -P 0x42 16M 16M" src.qcow2 && '
       'qemu-img create -q -f qcow2 dst.qcow2 32M')
    d, c = t.start([t.qcow2('src'), t.qcow2('dst')], export='src')
    fio = fio_start(16 * MIB)
    time.sleep(0.5)
    c.ok('blockdev-mirror', {'job-id': 'm', 'device': 'src',
                             'target': 'dst', 'sync': 'full',
                             'copy-mode': mode, 'buf-size': 1 * MIB})
    t.check('%s: ready' % what, wait_job_status(c, 'm', 'ready'))
    time.sleep(1)
    c.ok('job-complete', {'id': 'm'})
    t.check('%s: completed' % what, wait_job_status(c, 'm', 'null'))
    pivoted(what, c, 'dst')
    fio_finish(what, fio)
    quit(d, c)
    img_check(what, 'dst.qcow2')
    qemu_io_read(what, 'dst.qcow2', 0x42, 16 * MIB, 16 * MIB)


def race_writes(size, seconds):
    """fio rewrites [0, size) of the export at random, 16 writes in flight
    all the time, so that writes keep landing on ranges being copied."""
    uri = 'nbd+unix:///disk?socket=%s' % t.path('nbd.sock')
    return subprocess.Popen(
        ['fio', '--name=race', '--ioengine=nbd', '--uri=' + uri,
         '--rw=randwrite', '--bsrange=4k-256k', '--size=%d' % size,
         '--iodepth=16', '--time_based', '--runtime=%d' % seconds,
         '--randrepeat=0', '--refill_buffers'],
        cwd=t.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def race_mirror(mode, buf_size):
    """Many copies in flight while writes land on the ranges they copy:
    a write copied stale would leave the target unlike the source."""
    what = 'mirror %s, buf-size %d, racing writes' % (mode, buf_size)
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 64M && '
       'qemu-io -f qcow2 -c "write -P 0x11 0 64M" src.qcow2 && '
       'qemu-img create -q -f qcow2 dst.qcow2 64M')
    d, c = t.start([t.qcow2('src'), t.qcow2('dst')], export='src')
    writer = race_writes(8 * MIB, 4)
    c.ok('blockdev-mirror', {'job-id': 'm', 'device': 'src',
                             'target': 'dst', 'sync': 'full',
                             'copy-mode': mode, 'granularity': 65536,
                             'buf-size': buf_size})
    out = writer.communicate(timeout=300)[0].decode(errors='replace')
    t.check('%s: every write succeeded' % what, writer.returncode == 0 and
            'err= 0' in out, out[-2000:])
    t.check('%s: ready' % what, wait_job_status(c, 'm', 'ready'))
    c.ok('job-complete', {'id': 'm'})
    t.check('%s: completed' % what, wait_job_status(c, 'm', 'null'))
    pivoted(what, c, 'dst')
    quit(d, c)
    img_check(what, 'dst.qcow2')
    rc, out, err = t.run(['qemu-img', 'compare', '-U', t.path('src.qcow2'),
                          t.path('dst.qcow2')])
    t.check('%s: the target equals the source' % what, rc == 0, out + err)


def load_stream():
    what = 'stream under fio'
    fresh()
    t.sh('qemu-img create -q -f qcow2 base.qcow2 32M && '
       'qemu-io -f qcow2 -c "write -P 0x42 0 32M" base.qcow2 && '
       'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2')
    d, c = t.start([t.qcow2('base'), t.qcow2('top', 'base')], export='top')
    fio = fio_start(16 * MIB)
    time.sleep(0.5)
    c.ok('block-stream', {'job-id': 's', 'device': 'top',
                          'speed': 8 * MIB})
    t.check('%s: completed' % what, wait_job_status(c, 's', 'null'))
    fio_finish(what, fio)
    quit(d, c)
    img_check(what, 'top.qcow2')
    rc, out, err = t.run(['qemu-img', 'info', '-U', t.path('top.qcow2')])
    t.check('%s: the top has no backing file' % what,
            'backing file' not in out, out)
    qemu_io_read(what, 'top.qcow2', 0x42, 16 * MIB, 16 * MIB)


def load_commit(active):
    what = '%s commit under fio' % ('active' if active else 'intermediate')
    fresh()
    t.sh('qemu-img create -q -f qcow2 base.qcow2 32M && '
       'qemu-io -f qcow2 -c "write -P 0x42 16M 16M" base.qcow2 && '
       'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 mid.qcow2 && '
       'qemu-io -f qcow2 -c "write -P 0x43 24M 4M" mid.qcow2 && '
       'qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 top.qcow2')
    d, c = t.start([t.qcow2('base'), t.qcow2('mid', 'base'),
                  t.qcow2('top', 'mid')], export='top')
    fio = fio_start(16 * MIB)
    time.sleep(0.5)
    if active:
        c.ok('block-commit', {'job-id': 'c', 'device': 'top'})
        t.check('%s: ready' % what, wait_job_status(c, 'c', 'ready'))
        time.sleep(1)
        c.ok('job-complete', {'id': 'c'})
    else:
        c.ok('block-commit', {'job-id': 'c', 'device': 'top',
                              'top-node': 'mid', 'base-node': 'base'})
    t.check('%s: completed' % what, wait_job_status(c, 'c', 'null'))
    pivoted(what, c, 'base' if active else 'top')
    fio_finish(what, fio)
    quit(d, c)
    img_check(what, 'base.qcow2')
    qemu_io_read(what, 'base.qcow2', 0x43, 24 * MIB, 4 * MIB)
    qemu_io_read(what, 'base.qcow2', 0x42, 28 * MIB, 4 * MIB)
    if not active:
        rc, out, err = t.run(['qemu-img', 'info', '-U',
                              t.path('top.qcow2')])
        t.check('%s: top now names base as its backing file' % what,
                'backing file: %s' % t.path('base.qcow2') in out, out)


# ---------------------------------------------------------------------------
# Faults

def blkdebug_qcow2(name, event, errno=5, iotype=None):
    rule = {'event': event, 'errno': errno, 'once': True}
    if iotype:
        rule['iotype'] = iotype
    return {'driver': 'qcow2', 'node-name': name,
            'file': {'driver': 'blkdebug', 'inject-error': [rule],
                     'image': {'driver': 'file',
                               'filename': t.path(name + '.qcow2')}}}


def fault(side, policy, errno=5):
    what = 'mirror %s error, on-%s-error=%s, errno %d' % (side, side,
                                                          policy, errno)
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 4M && '
       'qemu-io -f qcow2 -c "write -P 0x42 0 4M" src.qcow2 && '
       'qemu-img create -q -f qcow2 dst.qcow2 4M')
    if side == 'source':
        nodes = [blkdebug_qcow2('src', 'read_aio', errno), t.qcow2('dst')]
    else:
        nodes = [t.qcow2('src'), blkdebug_qcow2('dst', 'write_aio', errno)]
    d, c = t.start(nodes)
    c.ok('blockdev-mirror', {'job-id': 'm', 'device': 'src',
                             'target': 'dst', 'sync': 'full',
                             'on-%s-error' % side: policy})
    e = job_event(c, 'BLOCK_JOB_ERROR')
    stops = policy == 'stop' or (policy == 'enospc' and errno == 28)
    action = 'stop' if stops else 'ignore' if policy == 'ignore' else \
        'report'
    t.equal('%s: BLOCK_JOB_ERROR' % what, e and e['data'],
            {'device': 'm', 'operation':
             'read' if side == 'source' else 'write', 'action': action})
    if action == 'report':
        e = job_event(c, 'BLOCK_JOB_COMPLETED')
        t.check('%s: the job fails with the error' % what,
                e is not None and 'error' in e['data'], e)
        quit(d, c)
        return
    if action == 'stop':
        t.check('%s: paused' % what, wait_job_status(c, 'm', 'paused'))
        jobs = c.ok('query-block-jobs')
        t.equal('%s: io-status' % what, jobs and jobs[0]['io-status'],
                'nospace' if errno == 28 else 'failed')
        c.ok('job-resume', {'id': 'm'})
    t.check('%s: ready after the error' % what, wait_job_status(c, 'm',
                                                             'ready'))
    jobs = c.ok('query-block-jobs')
    t.equal('%s: io-status after resume' % what,
            jobs and jobs[0]['io-status'], 'ok')
    c.ok('job-complete', {'id': 'm'})
    t.check('%s: completed' % what, wait_job_status(c, 'm', 'null'))
    quit(d, c)
    rc, out, err = t.run(['qemu-img', 'compare', '-U', t.path('src.qcow2'),
                          t.path('dst.qcow2')])
    t.check('%s: target equals source' % what, rc == 0, out + err)


def fault_stream(policy):
    what = 'stream read error, on-error=%s' % policy
    fresh()
    t.sh('qemu-img create -q -f qcow2 base.qcow2 4M && '
       'qemu-io -f qcow2 -c "write -P 0x42 0 4M" base.qcow2 && '
       'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2')
    d, c = t.start([blkdebug_qcow2('base', 'read_aio'),
                  t.qcow2('top', 'base')])
    c.ok('block-stream', {'job-id': 's', 'device': 'top',
                          'on-error': policy})
    e = job_event(c, 'BLOCK_JOB_ERROR')
    t.equal('%s: BLOCK_JOB_ERROR' % what, e and e['data']['action'],
            policy if policy != 'enospc' else 'report')
    if policy == 'stop':
        t.check('%s: paused' % what, wait_job_status(c, 's', 'paused'))
        c.ok('block-job-resume', {'device': 's'})
        e = job_event(c, 'BLOCK_JOB_COMPLETED')
        t.check('%s: completes after resume' % what,
                e is not None and 'error' not in e['data'], e)
    else:
        e = job_event(c, 'BLOCK_JOB_COMPLETED')
        # ignore goes on but still fails at the end, as QEMU's stream
        t.check('%s: the job fails with the error' % what,
                e is not None and 'error' in e['data'], e)
    quit(d, c)
    img_check(what, 'top.qcow2')


# ---------------------------------------------------------------------------
# Interruptions

def interrupt(kind, phase):
    """Cancel (or quit the daemon) in @phase of a mirror."""
    what = 'mirror %s while %s' % (kind, phase)
    fresh()
    t.sh('qemu-img create -q -f qcow2 src.qcow2 16M && '
       'qemu-io -f qcow2 -c "write -P 0x42 0 16M" src.qcow2 && '
       'qemu-img create -q -f qcow2 dst.qcow2 16M')
    d, c = t.start([t.qcow2('src'), t.qcow2('dst')])
    c.ok('blockdev-mirror', {'job-id': 'm', 'device': 'src',
                             'target': 'dst', 'sync': 'full',
                             'speed': 0 if phase == 'ready' else 2 * MIB,
                             'auto-finalize': phase != 'pending'})
    if phase == 'paused':
        c.ok('job-pause', {'id': 'm'})
        t.check('%s: paused' % what, wait_job_status(c, 'm', 'paused'))
    elif phase in ('ready', 'pending'):
        if phase == 'pending':
            c.ok('block-job-set-speed', {'device': 'm', 'speed': 0})
        t.check('%s: ready' % what, wait_job_status(c, 'm', 'ready'))
        if phase == 'pending':
            c.ok('job-complete', {'id': 'm'})
            t.check('%s: pending' % what, wait_job_status(c, 'm', 'pending'))
    if kind == 'cancel':
        c.ok('job-cancel', {'id': 'm'})
        e = job_event(c, 'BLOCK_JOB_CANCELLED')
        t.check('%s: cancelled' % what, e is not None, e)
        t.check('%s: gone' % what, wait_job_status(c, 'm', 'null'))
        t.equal('%s: query-jobs' % what, c.ok('query-jobs'), [])
    rc = quit(d, c)
    t.equal('%s: the daemon exits 0' % what, rc, 0)
    img_check(what, 'src.qcow2')
    img_check(what, 'dst.qcow2')
    qemu_io_read(what, 'src.qcow2', 0x42, 0, 16 * MIB)


def interrupt_chain(job, kind):
    """Cancel (or quit the daemon) while a stream or commit runs: the
    chain reads as before."""
    what = '%s %s while running' % (job, kind)
    fresh()
    t.sh('qemu-img create -q -f qcow2 base.qcow2 8M && '
       'qemu-io -f qcow2 -c "write -P 0x42 0 8M" base.qcow2 && '
       'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 mid.qcow2 && '
       'qemu-io -f qcow2 -c "write -P 0x43 0 4M" mid.qcow2 && '
       'qemu-img create -q -f qcow2 -b mid.qcow2 -F qcow2 top.qcow2')
    d, c = t.start([t.qcow2('base'), t.qcow2('mid', 'base'),
                  t.qcow2('top', 'mid')])
    if job == 'stream':
        c.ok('block-stream', {'job-id': 'j', 'device': 'top',
                              'speed': 1 * MIB})
    else:
        c.ok('block-commit', {'job-id': 'j', 'device': 'top',
                              'top-node': 'mid', 'speed': 1 * MIB})
    time.sleep(0.3)
    if kind == 'cancel':
        c.ok('job-cancel', {'id': 'j'})
        e = job_event(c, 'BLOCK_JOB_CANCELLED')
        t.check('%s: cancelled' % what, e is not None, e)
    rc = quit(d, c)
    t.equal('%s: the daemon exits 0' % what, rc, 0)
    for img in ('top.qcow2', 'mid.qcow2', 'base.qcow2'):
        img_check(what, img)
    rc, out, err = t.run(['qemu-img', 'info', '-U', t.path('top.qcow2')])
    t.check('%s: the chain is unchanged' % what,
            'backing file: mid.qcow2' in out, out)
    qemu_io_read(what, 'top.qcow2', 0x43, 0, 4 * MIB)
    qemu_io_read(what, 'top.qcow2', 0x42, 4 * MIB, 4 * MIB)


def pause_resume_stream():
    what = 'stream paused, resumed, then complete'
    fresh()
    t.sh('qemu-img create -q -f qcow2 base.qcow2 8M && '
       'qemu-io -f qcow2 -c "write -P 0x42 0 8M" base.qcow2 && '
       'qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2')
    d, c = t.start([t.qcow2('base'), t.qcow2('top', 'base')])
    c.ok('block-stream', {'job-id': 's', 'device': 'top',
                          'speed': 1 * MIB})
    c.ok('job-pause', {'id': 's'})
    t.check('%s: paused' % what, wait_job_status(c, 's', 'paused'))
    jobs = c.ok('query-block-jobs')
    offset = jobs[0]['offset']
    time.sleep(0.5)
    t.equal('%s: no progress while paused' % what,
            c.ok('query-block-jobs')[0]['offset'], offset)
    t.equal('%s: resume of a job not paused' % what,
            error_of(c.cmd('job-resume', {'id': 'nope'})),
            ('GenericError', 'Job not found'))
    c.ok('block-job-set-speed', {'device': 's', 'speed': 0})
    c.ok('job-resume', {'id': 's'})
    t.check('%s: completed' % what, wait_job_status(c, 's', 'null'))
    quit(d, c)
    img_check(what, 'top.qcow2')
    qemu_io_read(what, 'top.qcow2', 0x42, 0, 8 * MIB)


def main():
    if not have('qemu-img') or not have('qemu-io'):
        t.skip('all', 'qemu-img and qemu-io (qemu-utils) are needed')
        t.finish()
    if have('fio'):
        load_mirror('background')
        load_mirror('write-blocking')
        load_stream()
        load_commit(active=True)
        load_commit(active=False)
        race_mirror('background', 16 * MIB)
        race_mirror('background', 4096)
        race_mirror('write-blocking', 16 * MIB)
    else:
        t.skip('jobs under load', 'fio is not installed (Debian fio)')
    for side in ('source', 'target'):
        for policy in ('report', 'ignore', 'stop', 'enospc'):
            fault(side, policy)
    fault('target', 'enospc', errno=28)
    for policy in ('report', 'ignore', 'stop', 'enospc'):
        fault_stream(policy)
    for phase in ('running', 'paused', 'ready', 'pending'):
        interrupt('cancel', phase)
        interrupt('shutdown', phase)
    for job in ('stream', 'commit'):
        for kind in ('cancel', 'shutdown'):
            interrupt_chain(job, kind)
    pause_resume_stream()
    t.finish()


main()
