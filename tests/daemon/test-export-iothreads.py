#!/usr/bin/env python3
"""One export served by several iothreads (docs/iothreads.md), the node
in the first.  vhost-user-blk with iothread=[io0, io1] and two queues,
queue i in iothread i mod 2: data verified byte for byte through both
queues at depth 1 and 32, the second iothread seen doing the work, the
control path under I/O (memory table sent again and every queue stopped
and restarted while both queues verify), a front-end killed under I/O
and one that connects after it, QMP commands under I/O, export removal
under I/O (the iothreads free again).  NBD with iothread=[io0, io1]:
two clients at once, connection k in iothread k mod 2, data read back
whole, fio at depth 32 verifying on two connections, multi-conn, removal
under I/O.  The list form in QMP and on the command line, the string
form of QEMU 7.2 beside it, and the refusals: an empty list, an unknown
id, an id listed twice, a non-string entry."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
import nbd_load                                         # noqa: E402
from qsd import error_of, generic                       # noqa: E402

t = qsd.Tests('test-export-iothreads')
BENCH = os.path.join(t.build, 'tests', 'perf', 'vhost-user-bench')


def bench(sock, pattern, depth, queues, secs='1'):
    return t.run([BENCH, sock, pattern, '4096', str(depth), secs,
                  str(queues)])


def bench_bg(sock, pattern, depth, queues, secs):
    return subprocess.Popen([BENCH, sock, pattern, '4096', str(depth), secs,
                             str(queues)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def thread_cpu_ns(pid, comm):
    """Nanoseconds on a CPU so far of the daemon's thread named @comm
    (the scheduler's own count, finer than clock ticks)."""
    for tid in os.listdir('/proc/%d/task' % pid):
        try:
            with open('/proc/%d/task/%s/comm' % (pid, tid)) as f:
                if f.read().strip() != comm:
                    continue
            with open('/proc/%d/task/%s/schedstat' % (pid, tid)) as f:
                return int(f.read().split()[0])
        except OSError:
            continue
    return None


def vu_export(export_id, node, sock, iothread, queues=2):
    args = {'type': 'vhost-user-blk', 'id': export_id, 'node-name': node,
            'writable': True, 'num-queues': queues,
            'addr': {'type': 'unix', 'path': sock}}
    if iothread is not None:
        args['iothread'] = iothread
    return args


def test_two_queues_two_iothreads():
    img = t.create_image('q.qcow2', '64M')
    sock = t.path('vq.sock')
    d = t.daemon(['--object', 'iothread,id=io0',
                  '--object', 'iothread,id=io1',
                  '--blockdev', 'driver=file,node-name=f,filename=%s,'
                  'cache.direct=on,aio=io_uring' % img,
                  '--blockdev', 'driver=qcow2,node-name=v,file=f',
                  '--export', 'vhost-user-blk,id=vu,node-name=v,'
                  'writable=on,num-queues=2,iothread.0=io0,iothread.1=io1,'
                  'addr.type=unix,addr.path=%s' % sock],
                 stderr_path=t.path('daemon-q.err'))
    c = d.qmp()
    for depth in (1, 32):
        rc, out, err = bench(sock, 'verify', depth, 2)
        t.check('iothread.0=io0,iothread.1=io1: two queues at depth %d, '
                '8192 blocks written and read back byte for byte'
                % depth, rc == 0 and 'VERIFIED 8192' in out, out + err)

    before = thread_cpu_ns(d.proc.pid, 'IO io1')
    rc, out, err = bench(sock, 'randread', 32, 2, secs='1')
    after = thread_cpu_ns(d.proc.pid, 'IO io1')
    t.check('two queues at depth 32 run', rc == 0 and 'IOPS' in out,
            out + err)
    # connecting costs it microseconds; a second of queue 1 milliseconds
    t.check('the second iothread serves queue 1 (CPU ns %s -> %s)'
            % (before, after),
            before is not None and after is not None and
            after - before > 5 * 1000 * 1000)

    rc, out, err = bench(sock, 'verify-churn', 16, 2)
    churned = [int(line.split()[1]) for line in out.splitlines()
               if line.startswith('CHURNED ')]
    t.check('memory table sent again and both queues stopped and '
            'restarted under I/O (%s rounds): data byte for byte'
            % (churned[0] if churned else '?'),
            rc == 0 and 'VERIFIED 8192' in out and churned and
            churned[0] >= 1, out + err)

    p = bench_bg(sock, 'verify', 32, 2, '1')
    queries = 0
    while p.poll() is None:
        c.ok('query-named-block-nodes')
        c.ok('query-block-exports')
        queries += 1
    out = p.communicate()[0]
    t.check('QMP commands while both queues verify (%d rounds)' % queries,
            p.returncode == 0 and 'VERIFIED 8192' in out, out)

    p = bench_bg(sock, 'randwrite', 32, 2, '10')
    time.sleep(0.5)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    rc, out, err = bench(sock, 'verify', 32, 2)
    t.check('a front-end killed under I/O on both queues; the next one '
            'connects and verifies', rc == 0 and 'VERIFIED 8192' in out,
            out + err)

    p = bench_bg(sock, 'randwrite', 32, 2, '10')
    time.sleep(0.5)
    t.equal('block-export-del mode=hard while both queues write',
            c.cmd('block-export-del', {'id': 'vu', 'mode': 'hard'}),
            {'return': {}})
    t.check('BLOCK_EXPORT_DELETED', c.event('BLOCK_EXPORT_DELETED') and True)
    try:
        p.communicate(timeout=qsd.TIMEOUT)
        gone = True
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        gone = False
    t.check('the front-end sees the connection end', gone and
            p.returncode != 0)
    t.equal('the second iothread is free once the export is gone',
            c.cmd('object-del', {'id': 'io1'}), {'return': {}})
    c.ok('object-add', {'qom-type': 'iothread', 'id': 'io1'})
    t.equal('block-export-add with the list in QMP',
            c.cmd('block-export-add',
                  vu_export('vu', 'v', sock, ['io1', 'io0'])),
            {'return': {}})
    rc, out, err = bench(sock, 'verify', 32, 2)
    t.check('... the node in io1, queue 1 in io0: data byte for byte',
            rc == 0 and 'VERIFIED 8192' in out, out + err)
    t.equal('object-del of an iothread the export uses for a queue only '
            'is refused', error_of(c.cmd('object-del', {'id': 'io0'})),
            generic("object 'io0' is in use, can not be deleted"))

    p = bench_bg(sock, 'randwrite', 16, 2, '10')
    time.sleep(0.5)
    c.close()
    t.equal('SIGTERM while both queues write: the daemon exits 0',
            d.stop(), 0)
    p.kill()
    p.communicate()
    t.check('no sanitizer report', 'Sanitizer' not in d.stderr, d.stderr)
    rc, out, err = t.run(['qemu-img', 'check', img])
    t.check('the image checks clean with qemu-img', rc == 0, out + err)


def test_string_form():
    img = t.create_image('s.qcow2', '64M')
    sock = t.path('vs.sock')
    d = t.daemon(['--object', 'iothread,id=io0',
                  '--blockdev', 'driver=file,node-name=f,filename=%s' % img,
                  '--blockdev', 'driver=qcow2,node-name=v,file=f',
                  '--export', 'vhost-user-blk,id=vu,node-name=v,'
                  'writable=on,num-queues=2,iothread=io0,'
                  'addr.type=unix,addr.path=%s' % sock])
    c = d.qmp()
    rc, out, err = bench(sock, 'verify', 32, 2)
    t.check('iothread=io0 (QEMU 7.2\'s string): two queues in one '
            'iothread, data byte for byte',
            rc == 0 and 'VERIFIED 8192' in out, out + err)
    c.ok('object-add', {'qom-type': 'iothread', 'id': 'io1'})
    c.ok('blockdev-add', {'driver': 'null-co', 'node-name': 'n0',
                          'size': 64 << 20})
    c.ok('blockdev-add', {'driver': 'null-co', 'node-name': 'n1',
                          'size': 64 << 20})
    c.ok('nbd-server-start', {'addr': {'type': 'unix', 'data': {
        'path': t.path('n.sock')}}})
    bad = (
        (vu_export('e1', 'n0', t.path('e1.sock'), []),
         "Parameter 'iothread' is an empty list: it names no iothread"),
        (vu_export('e1', 'n0', t.path('e1.sock'), ['io1', 'nope']),
         'iothread "nope" not found'),
        (vu_export('e1', 'n0', t.path('e1.sock'), ['io1', 'io1']),
         'iothread "io1" is listed twice in \'iothread\' (items 0 and 1)'),
        (vu_export('e1', 'n0', t.path('e1.sock'), ['io1', 5]),
         "Invalid parameter type for 'iothread[1]', expected: string"),
        (vu_export('e1', 'n0', t.path('e1.sock'), 5),
         "Invalid parameter type for 'iothread', expected: string"),
        (vu_export('e1', 'n0', t.path('e1.sock'), 'nope'),
         'iothread "nope" not found'),
        ({'type': 'nbd', 'id': 'e2', 'node-name': 'n1',
          'iothread': ['io1', 'nope']}, 'iothread "nope" not found'),
    )
    for args, msg in bad:
        t.equal('refused: iothread=%r for %s' % (args['iothread'],
                                                   args['type']),
                error_of(c.cmd('block-export-add', args)), generic(msg))
    t.equal('nothing of the refused exports is left',
            [e['id'] for e in c.ok('query-block-exports')], ['vu'])
    t.equal('the iothread the refusals named is not held',
            c.cmd('object-del', {'id': 'io1'}), {'return': {}})
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)

    rc, out, err = t.run([t.daemon_bin, '--object', 'iothread,id=io0',
                          '--blockdev', 'null-co,node-name=n',
                          '--export', 'vhost-user-blk,id=e,node-name=n,'
                          'iothread.0=io0,iothread.1=nope,addr.type=unix,'
                          'addr.path=%s' % t.path('x.sock')])
    t.check('--export with an unknown iothread in the list: exit 1 with '
            'the message', rc == 1 and 'iothread "nope" not found' in err,
            err)


def fio_has_nbd():
    if not qsd.have('fio'):
        return False
    p = subprocess.run(['fio', '--enghelp'], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    return any(line.strip() == 'nbd' for line in p.stdout.splitlines())


def test_nbd_connections():
    img = t.create_image('n.qcow2', '64M')
    sock = t.path('nbd.sock')
    d = t.daemon(['--object', 'iothread,id=io0',
                  '--object', 'iothread,id=io1',
                  '--blockdev', 'driver=file,node-name=f,filename=%s,'
                  'cache.direct=on,aio=io_uring' % img,
                  '--blockdev', 'driver=qcow2,node-name=n,file=f',
                  '--nbd-server', 'addr.type=unix,addr.path=%s' % sock,
                  '--export', 'nbd,id=e,node-name=n,writable=on,'
                  'iothread.0=io0,iothread.1=io1'],
                 stderr_path=t.path('daemon-n.err'))
    c = d.qmp()
    uri = qsd.nbd_uri(sock, 'n')
    before = thread_cpu_ns(d.proc.pid, 'IO io1')
    writers = [nbd_load.Writer(uri, n=256, first=0),
               nbd_load.Writer(uri, n=256, first=256)]
    ok = [w.finish() for w in writers]
    after = thread_cpu_ns(d.proc.pid, 'IO io1')
    t.check('two NBD clients at once on iothread=[io0, io1] write every '
            'block', all(ok), ' / '.join(w.out[-300:] for w in writers))
    # 16 MiB of one client's writes read from its socket there
    t.check('the second iothread serves a connection (CPU ns %s -> %s)'
            % (before, after),
            before is not None and after is not None and
            after - before > 1000 * 1000)
    for first in (0, 256):
        good, out = nbd_load.verify(t, uri, n=256, first=first)
        t.check('blocks %d.. read back whole through another connection'
                % first, good, out)

    if fio_has_nbd():
        rc, out, err = t.run(['fio', '--name=v', '--ioengine=nbd',
                              '--uri=%s' % uri, '--rw=randwrite',
                              '--bs=4k', '--iodepth=32', '--numjobs=2',
                              '--size=8M', '--offset_increment=8M',
                              '--verify=crc32c', '--do_verify=1',
                              '--verify_fatal=1'])
        t.check('fio at depth 32 on two connections: every block verified',
                rc == 0, out[-800:] + err)
    else:
        t.skip('fio at depth 32 on two connections', 'fio has no nbd engine')
    if qsd.have('nbdinfo'):
        rc, out, err = t.run(['nbdinfo', uri])
        t.check('the export announces multi-conn',
                'can_multi_conn: true' in out, out + err)
    else:
        t.skip('multi-conn', 'nbdinfo (libnbd-bin) is not installed')

    writers = [nbd_load.Writer(uri, n=900, first=0),
               nbd_load.Writer(uri, n=900, first=0)]
    time.sleep(0.5)
    t.equal('block-export-del mode=hard while two clients write',
            c.cmd('block-export-del', {'id': 'e', 'mode': 'hard'}),
            {'return': {}})
    t.check('BLOCK_EXPORT_DELETED', c.event('BLOCK_EXPORT_DELETED') and True)
    for w in writers:
        w.proc.communicate(timeout=qsd.TIMEOUT * 4)
    t.equal('both iothreads are free once the export is gone',
            [c.cmd('object-del', {'id': i}) for i in ('io1', 'io0')],
            [{'return': {}}] * 2)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)
    t.check('no sanitizer report', 'Sanitizer' not in d.stderr, d.stderr)
    rc, out, err = t.run(['qemu-img', 'check', img])
    t.check('the image checks clean with qemu-img', rc == 0, out + err)


test_nbd_connections()
if not os.path.exists(BENCH):
    t.skip('vhost-user-blk queues over iothreads', '%s is not built' % BENCH)
else:
    test_two_queues_two_iothreads()
    test_string_form()
t.finish()
