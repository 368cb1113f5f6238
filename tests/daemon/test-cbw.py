#!/usr/bin/env python3
"""The copy-before-write filter in the daemon: a source exported through
the filter while two qemu-io clients write the same clusters at once;
afterwards the target holds the old data of every cluster written (and
nothing else), the source the new data, each write whole.  A
snapshot-access node over the filter, read by a third client meanwhile,
shows the old data throughout (image fleecing).  Then the
error policies: on-cbw-error=break-guest-write fails a write whose copy
fails and leaves the source alone; break-snapshot lets it go on and
copies nothing more; cbw-timeout counts a copy that takes too long as
failed.  And QEMU's option errors."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic                       # noqa: E402
import nbd_load                                         # noqa: E402

t = qsd.Tests('test-cbw')
BLOCK = nbd_load.BLOCK
N = 128                 # blocks of the source with old data


def old(i):
    return (i * 7) % 250 + 1


def new_a(i):
    return 251 + i % 2          # 251, 252


def new_b(i):
    return 253 + i % 2          # 253, 254


def make_source(name):
    path = t.create_image(name)
    cmds = []
    for i in range(N):
        cmds += ['-c', 'write -P %d %d %d' % (old(i), i * BLOCK, BLOCK)]
    rc, out, err = t.run(['qemu-io', '-f', 'qcow2'] + cmds + [path])
    if rc:
        raise RuntimeError('qemu-io failed: ' + out + err)
    return path


def start(extra_cbw=''):
    src = make_source('src.qcow2')
    tgt = t.create_image('tgt.qcow2')
    sock = t.path('nbd.sock')
    d = t.daemon(['--blockdev', 'driver=file,node-name=sf,filename=%s' % src,
                  '--blockdev', 'driver=qcow2,node-name=src,file=sf',
                  '--blockdev', 'driver=file,node-name=tf,filename=%s' % tgt,
                  '--blockdev', 'driver=qcow2,node-name=tgt,file=tf',
                  '--nbd-server', 'addr.type=unix,addr.path=%s' % sock])
    return d, src, tgt, sock


class writer:
    """qemu-io writing @blocks in order, each as 16 writes of 4k, so that
    two writers meet inside clusters.  Its output goes to a file: a pipe
    nobody reads while the test polls would stop it."""
    count = 0

    def __init__(self, uri, blocks, pat):
        args = ['qemu-io', '-f', 'raw', '-t', 'writeback']
        for i in blocks:
            for k in range(16):
                args += ['-c', 'write -P %d %d 4k' % (pat(i),
                                                       i * BLOCK + k * 4096)]
        writer.count += 1
        self.log = t.path('writer-%d.log' % writer.count)
        with open(self.log, 'w') as f:
            self.proc = subprocess.Popen(args + [uri], stdout=f,
                                         stderr=subprocess.STDOUT)

    def poll(self):
        return self.proc.poll()

    def finish(self):
        """True if every write succeeded; the output is in self.out."""
        self.proc.wait(timeout=qsd.TIMEOUT * 4)
        with open(self.log) as f:
            self.out = f.read()
        return self.proc.returncode == 0 and 'failed' not in self.out


def read_image(path, fmt='qcow2'):
    raw = path + '.raw'
    rc, out, err = t.run(['qemu-img', 'convert', '-U', '-f', fmt, '-O',
                          'raw', path, raw])
    with open(raw, 'rb') as f:
        data = f.read()
    os.unlink(raw)
    return data


def test_racing_writers():
    d, src, tgt, sock = start()
    c = d.qmp()
    c.ok('blockdev-add', {'driver': 'copy-before-write', 'node-name': 'cbw',
                          'file': 'src', 'target': 'tgt'})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e0', 'node-name': 'cbw',
                              'writable': True})
    uri = qsd.nbd_uri(sock, 'cbw')
    # both write the first N/2 blocks, from either end; A also the rest
    a = writer(uri, list(range(N // 2)) + list(range(N // 2, N - 8)), new_a)
    b = writer(uri, list(reversed(range(N // 2))), new_b)
    ok = [w.finish() for w in (a, b)]
    t.check('every write succeeded', all(ok), (a.out + b.out)[-2000:])
    t.equal('a write to the source beside the filter is refused',
            error_of(c.cmd('block-export-add',
                           {'type': 'nbd', 'id': 'e1', 'node-name': 'src',
                            'writable': True}))[0], 'GenericError')
    c.ok('block-export-del', {'id': 'e0'})
    c.event('BLOCK_EXPORT_DELETED')
    c.ok('blockdev-del', {'node-name': 'cbw'})
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)

    tdata, sdata = read_image(tgt), read_image(src)
    t.check('the target holds the old data of every cluster written',
            all(tdata[i * BLOCK:(i + 1) * BLOCK].count(old(i)) == BLOCK
                for i in range(N - 8)))
    rc, out, err = t.run(['qemu-img', 'map', '--output=json', tgt])
    mapped = [e for e in json.loads(out) if e['data']]
    t.equal('and nothing else', sum(e['length'] for e in mapped),
            (N - 8) * BLOCK)
    whole = True
    for i in range(N):
        blk = sdata[i * BLOCK:(i + 1) * BLOCK]
        if i < N // 2:
            # 4k pieces of either writer, never the old data
            whole &= all(blk[k:k + 4096].count(blk[k]) == 4096 and
                         blk[k] in (new_a(i), new_b(i))
                         for k in range(0, BLOCK, 4096))
        elif i < N - 8:
            whole &= blk.count(new_a(i)) == BLOCK
        else:
            whole &= blk.count(old(i)) == BLOCK
    t.check('the source holds the new data, each write whole', whole)
    for path in (src, tgt):
        rc, out, err = t.run(['qemu-img', 'check', path])
        t.equal('qemu-img check %s' % os.path.basename(path), rc, 0)


def read_snapshot(uri, reads):
    """Runs @reads read-only on @uri: (all read and matched, output)."""
    args = ['qemu-io', '-r', '-f', 'raw']
    for r in reads:
        args += ['-c', r]
    rc, out, err = t.run(args + [uri])
    return (rc == 0 and 'verification failed' not in out and
            out.count('read %d/%d' % (BLOCK, BLOCK)) == len(reads),
            (out + err)[-2000:])


def test_fleecing():
    """snapshot-access over the filter, read by one client while another
    writes through the filter: every read sees the old data."""
    d, src, tgt, sock = start()
    c = d.qmp()
    c.ok('blockdev-add', {'driver': 'copy-before-write', 'node-name': 'cbw',
                          'file': 'src', 'target': 'tgt'})
    c.ok('blockdev-add', {'driver': 'snapshot-access', 'node-name': 'snap',
                          'file': 'cbw'})
    for node in ('cbw', 'snap'):
        c.ok('block-export-add', {'type': 'nbd', 'id': node,
                                  'node-name': node,
                                  'writable': node == 'cbw'})
    reads = ['read -P %d %d %d' % (old(i), i * BLOCK, BLOCK)
             for i in range(N)]
    w = writer(qsd.nbd_uri(sock, 'cbw'), range(N), new_a)
    rounds = ok = 0
    while w.poll() is None or rounds == 0:
        good, out = read_snapshot(qsd.nbd_uri(sock, 'snap'), reads)
        rounds += 1
        ok += good
    t.check('the writes through the filter succeeded', w.finish(),
            w.out[-2000:])
    t.check('the snapshot was read while they ran', rounds > 1, rounds)
    t.equal('each full read of the snapshot while they ran saw the old '
            'data', ok, rounds)
    good, out = read_snapshot(qsd.nbd_uri(sock, 'snap'), reads)
    t.check('and still does after them', good, out)
    rc, out, err = t.run(['qemu-io', '-f', 'raw', '-c', 'write 0 4k',
                          qsd.nbd_uri(sock, 'snap')])
    t.check('the snapshot cannot be written', rc or 'failed' in out + err,
            out + err)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def failing_target(extra):
    """A cbw node whose target fails every write (blkdebug)."""
    opts = {'driver': 'copy-before-write', 'node-name': 'cbw',
            'file': 'src',
            'target': {'driver': 'blkdebug', 'image': 'tgt',
                       'inject-error': [{'event': 'none', 'iotype': 'write',
                                         'errno': 5}]}}
    opts.update(extra)
    return opts


def test_error_policies():
    for policy in ('break-guest-write', 'break-snapshot'):
        d, src, tgt, sock = start()
        c = d.qmp()
        r = c.cmd('blockdev-add', failing_target({'on-cbw-error': policy}))
        if not t.equal('%s: a filter over a failing target' % policy, r,
                       {'return': {}}):
            c.close()
            d.stop()
            continue
        c.ok('block-export-add', {'type': 'nbd', 'id': 'e0',
                                  'node-name': 'cbw', 'writable': True})
        uri = qsd.nbd_uri(sock, 'cbw')
        rc, out = qsd.qemu_io(t, uri, 'write -P 200 0 4k',
                              'write -P 201 1M 4k')
        if policy == 'break-guest-write':
            t.check('the write whose copy failed fails', 'write failed'
                    in out, out)
            rc, out = qsd.qemu_io(t, uri, 'read -P %d 0 64k' % old(0))
            t.check('and the source is unchanged', rc == 0 and
                    'verification failed' not in out, out)
        else:
            t.check('break-snapshot: the writes go on', rc == 0 and
                    'failed' not in out, out)
            rc, out = qsd.qemu_io(t, uri, 'read -P 200 0 4k',
                                  'read -P 201 1M 4k')
            t.check('and reach the source', rc == 0 and
                    'verification failed' not in out, out)
            c.ok('blockdev-add', {'driver': 'snapshot-access',
                                  'node-name': 'snap', 'file': 'cbw'})
            c.ok('block-export-add', {'type': 'nbd', 'id': 'snap',
                                      'node-name': 'snap'})
            rc, out, err = t.run(['qemu-io', '-r', '-f', 'raw', '-c',
                                  'read 64k 4k', qsd.nbd_uri(sock, 'snap')])
            t.check('the broken snapshot cannot be read',
                    'read failed' in out + err, out + err)
        c.close()
        t.equal('%s: the daemon exits 0' % policy, d.stop(), 0)


def test_timeout():
    d, src, tgt, sock = start()
    c = d.qmp()
    # every copy waits 3 s on the target: a 1 s timeout runs out
    c.ok('blockdev-add', {'driver': 'null-co', 'node-name': 'slow',
                          'size': 64 << 20, 'latency-ns': 3 * 10 ** 9})
    c.ok('blockdev-add', {'driver': 'copy-before-write', 'node-name': 'cbw',
                          'file': 'src', 'target': 'slow',
                          'on-cbw-error': 'break-snapshot',
                          'cbw-timeout': 1})
    c.ok('block-export-add', {'type': 'nbd', 'id': 'e0', 'node-name': 'cbw',
                              'writable': True})
    uri = qsd.nbd_uri(sock, 'cbw')
    start_t = time.monotonic()
    rc, out = qsd.qemu_io(t, uri, 'write -P 200 0 4k')
    took = time.monotonic() - start_t
    t.check('the write goes on once its copy timed out', rc == 0 and
            'failed' not in out, out)
    t.check('after the timeout, before the copy', 0.9 < took < 2.9, took)
    start_t = time.monotonic()
    rc, out = qsd.qemu_io(t, uri, 'write -P 201 1M 4k')
    t.check('a broken snapshot copies nothing more',
            rc == 0 and time.monotonic() - start_t < 2.5, out)
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


def test_option_errors():
    d, src, tgt, sock = start()
    c = d.qmp()
    base = {'driver': 'copy-before-write', 'node-name': 'cbw',
            'file': 'src', 'target': 'tgt'}
    small = t.create_image('small.qcow2', size='32M')
    c.ok('blockdev-add', {'driver': 'qcow2', 'node-name': 'small',
                          'file': {'driver': 'file', 'filename': small}})
    c.ok('block-dirty-bitmap-add', {'node': 'small', 'name': 's0'})
    cases = [
        ({'target': 'zz'}, "Cannot find device='zz' nor node-name='zz'"),
        ({'on-cbw-error': 'bogus'},
         "Parameter 'on-cbw-error' does not accept value 'bogus'"),
        ({'bitmap': {'node': 'src', 'name': 'b0'}},
         "Dirty bitmap 'b0' not found"),
        ({'bitmap': {'node': 'zz', 'name': 'b0'}}, "Node 'zz' not found"),
        ({'bitmap': {'node': 'src'}}, "Parameter 'bitmap.name' is missing"),
        ({'bitmap': {'node': 'small', 'name': 's0'}},
         "Cannot create block-copy-state: Failed to merge bitmap 's0' to "
         "internal copy-bitmap: Bitmaps are of different sizes (destination "
         "size is 67108864, source size is 33554432) and can't be merged"),
        ({'target': 'small'},
         "copy-before-write: the target node 'small' (33554432 bytes) is "
         "shorter than the source node 'src' (67108864 bytes)"),
    ]
    for extra, desc in cases:
        args = dict(base)
        args.update(extra)
        t.equal('blockdev-add cbw %r' % extra,
                error_of(c.cmd('blockdev-add', args)), generic(desc))
    args = dict(base)
    del args['target']
    t.check('without a target', error_of(c.cmd('blockdev-add', args)))
    t.equal('the options QEMU takes', c.cmd('blockdev-add', dict(
        base, **{'on-cbw-error': 'break-snapshot', 'cbw-timeout': 5})),
        {'return': {}})
    c.close()
    t.equal('the daemon exits 0', d.stop(), 0)


test_racing_writers()
test_fleecing()
test_error_policies()
test_timeout()
test_option_errors()
t.finish()
