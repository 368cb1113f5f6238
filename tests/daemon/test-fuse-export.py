#!/usr/bin/env python3
"""The FUSE export (block/export/fuse-export.c, docs/fuse-export.md).

One script of file operations on the mounted export (stat, open, read,
write at and past the end, chmod, chown, utime, fallocate's modes,
truncate, fsync, SEEK_DATA/SEEK_HOLE, allow-other) runs against
qblock-storage-daemon and, where installed, the real
qemu-storage-daemon 7.2; every answer must be QEMU's except the ones
docs/fuse-export.md lists as deliberate, whose qblock answers are
checked on their own.  Then qblock alone: what was written is in the
image, a growable export grows, an export in an iothread, block_resize
seen at once, the errors of create (a directory, a missing file, a
mountpoint in use) in QEMU's words, block-export-del, SIGTERM and a
failed start unmounting, and parallel readers.

Mounting needs root and /dev/fuse: without them every case is skipped,
saying why.
"""
import atexit
import errno
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qsd                                              # noqa: E402
from qsd import error_of, generic                       # noqa: E402

t = qsd.Tests('fuse-export')
QEMU_QSD = '/usr/bin/qemu-storage-daemon'
MIB = 1 << 20
MNT = t.path('mnt')


def mounted(path=MNT):
    with open('/proc/mounts') as f:
        return any(line.split()[1] == path for line in f)


def start(daemon_bin, export_opts, node=None, extra=()):
    """A daemon (@daemon_bin) with node n and the FUSE export e of it on
    MNT, a fresh empty file; waits for the mount."""
    if mounted():
        subprocess.run(['umount', '-l', MNT])
    if os.path.exists(MNT):
        os.unlink(MNT)
    open(MNT, 'w').close()
    os.chmod(MNT, 0o640)
    node = node or ('qcow2,node-name=n,file.driver=file,'
                    'file.filename=img.qcow2')
    saved, t.daemon_bin = t.daemon_bin, daemon_bin
    try:
        d = t.daemon(list(extra) + ['--blockdev', node, '--export',
                                    'fuse,id=e,node-name=n,mountpoint=%s%s'
                                    % (MNT, export_opts)])
    finally:
        t.daemon_bin = saved
    qsd.wait_for(lambda: mounted() or not d.alive(), timeout=10)
    return d


def stop(d):
    d.stop()
    d.wait()
    return d.proc.returncode


def call(f):
    try:
        return f()
    except OSError as e:
        return 'ERR ' + errno.errorcode[e.errno]


def st():
    s = os.stat(MNT)
    return '%o size=%d uid=%d gid=%d nlink=%d' % (
        s.st_mode, s.st_size, s.st_uid, s.st_gid, s.st_nlink)


def pwrite(data, off, flags=os.O_WRONLY):
    fd = os.open(MNT, flags)
    try:
        return os.pwrite(fd, data, off)
    finally:
        os.close(fd)


def pread(n, off):
    fd = os.open(MNT, os.O_RDONLY)
    try:
        data = os.pread(fd, n, off)
        return '%s len=%d' % (data[:8].hex(), len(data))
    finally:
        os.close(fd)


def seek(off, whence):
    fd = os.open(MNT, os.O_RDONLY)
    try:
        return os.lseek(fd, off, whence)
    finally:
        os.close(fd)


def falloc(mode, off, length):
    r = subprocess.run(['fallocate'] + mode + ['-o', str(off), '-l',
                                               str(length), MNT],
                       stderr=subprocess.PIPE, text=True)
    return r.stderr.strip().split(': ')[-1] if r.returncode else 'ok'


def fsync():
    fd = os.open(MNT, os.O_RDWR)
    try:
        os.fsync(fd)
        return 'ok'
    finally:
        os.close(fd)


def script(daemon_bin):
    """The file operations and their answers, as (name, answer) pairs."""
    out = []

    def op(name, f):
        out.append((name, call(f)))

    t.sh('rm -f img.qcow2 && qemu-img create -q -f qcow2 img.qcow2 1M && '
         'qemu-io -f qcow2 -c "write -P 0x11 0 64k" img.qcow2')
    d = start(daemon_bin, '')
    op('ro: stat', st)
    op('ro: open for writing', lambda: pwrite(b'ab', 0))
    op('ro: read past the end', lambda: pread(100, MIB))
    op('ro: read over the end', lambda: pread(100, MIB - 10))
    op('ro: read data', lambda: pread(8, 0))
    op('ro: SEEK_DATA 0', lambda: seek(0, os.SEEK_DATA))
    op('ro: SEEK_HOLE 0', lambda: seek(0, os.SEEK_HOLE))
    op('ro: SEEK_HOLE in a hole', lambda: seek(100000, os.SEEK_HOLE))
    op('ro: SEEK_DATA at the end', lambda: seek(MIB, os.SEEK_DATA))
    op('ro: SEEK_HOLE at the end', lambda: seek(MIB, os.SEEK_HOLE))
    op('ro: chmod', lambda: os.chmod(MNT, 0o644))
    op('ro: utime', lambda: os.utime(MNT))
    op('ro: truncate', lambda: os.truncate(MNT, 4096))
    op('ro: a name below the file', lambda: os.stat(MNT + '/x'))
    op('ro: the daemon exits', lambda: stop(d))
    op('ro: unmounted', mounted)

    d = start(daemon_bin, ',writable=on')
    op('rw: stat', st)
    op('rw: write over the end', lambda: pwrite(b'abcd', MIB - 2))
    op('rw: the end', lambda: pread(4, MIB - 2))
    op('rw: write past the end', lambda: pwrite(b'abcd', MIB + 4096))
    op('rw: chmod', lambda: os.chmod(MNT, 0o644))
    op('rw: chown', lambda: os.chown(MNT, 1, 1))
    op('rw: stat after chmod, chown', st)
    op('rw: utime', lambda: os.utime(MNT))
    op('rw: punch a hole', lambda: falloc(['-p'], 0, 4096))
    op('rw: the hole', lambda: pread(4, 0))
    op('rw: zero a range', lambda: falloc(['-z'], 8192, 4096))
    op('rw: the range', lambda: pread(4, 8192))
    op('rw: zero past the end', lambda: falloc(['-z'], MIB, 4096))
    op('rw: stat after zeroing past the end', st)
    op('rw: allocate within', lambda: falloc([], 0, 4096))
    op('rw: allocate at the end',
       lambda: falloc([], os.stat(MNT).st_size, 4096))
    op('rw: allocate past the end',
       lambda: falloc([], os.stat(MNT).st_size + 4096, 4096))
    op('rw: stat after allocating', st)
    op('rw: punch past the end', lambda: falloc(['-p'], 2 * MIB, 4096))
    op('rw: truncate up', lambda: os.truncate(MNT, 2 * MIB))
    op('rw: stat after truncating up', st)
    op('rw: truncate down', lambda: os.truncate(MNT, MIB))
    op('rw: stat after truncating down', st)
    op('rw: fsync', fsync)
    op('rw: the daemon exits', lambda: stop(d))

    d = start(daemon_bin, ',writable=on,growable=on')
    op('growable: an aligned write past the end',
       lambda: pwrite(b'x' * 4096, MIB + 4096))
    op('growable: stat', st)
    op('growable: a write that leaves the end unaligned (qcow2)',
       lambda: pwrite(b'abcd', 2 * MIB))
    op('growable: the daemon exits', lambda: stop(d))

    d = start(daemon_bin, ',allow-other=off')
    op('allow-other=off: mount options', lambda: [
        o for o in open('/proc/mounts').read().split('\n')
        if ' %s ' % MNT in o][0].split()[3])
    op('allow-other=off: the daemon exits', lambda: stop(d))
    d = start(daemon_bin, '')
    op('allow-other=auto (root): mount options', lambda: [
        o for o in open('/proc/mounts').read().split('\n')
        if ' %s ' % MNT in o][0].split()[3])
    op('allow-other=auto: the daemon exits', lambda: stop(d))
    return out


# qblock's own answers where QEMU 7.2's export is broken
# (docs/fuse-export.md, "Differences from QEMU"), with QEMU's
DELIBERATE = {
    'rw: write past the end': ('ERR ENOSPC', 'ERR EIO'),
    'rw: the hole': ('00000000 len=4', '11111111 len=4'),
    'rw: punch past the end': ('ok', 'Input/output error'),
}


def compare_with_qemu():
    ours = script(t.daemon_bin)
    if not os.path.exists(QEMU_QSD):
        t.skip('the FUSE export against qemu-storage-daemon',
               '%s is not installed' % QEMU_QSD)
        qemu = None
    else:
        qemu = dict(script(QEMU_QSD))
    for name, answer in ours:
        if name in DELIBERATE:
            want, qemu_answer = DELIBERATE[name]
            t.equal('fuse %s (deliberately not QEMU\'s)' % name, answer, want)
            if qemu is not None:
                t.equal('fuse %s: QEMU\'s answer is still %r' %
                        (name, qemu_answer), qemu[name], qemu_answer)
        elif qemu is not None:
            t.equal('fuse %s: as QEMU' % name, answer, qemu[name])
        else:
            t.skip('fuse %s' % name, 'no QEMU to compare with')
    return dict(ours)


def can_mount():
    if os.geteuid() != 0:
        return 'mounting a FUSE file system needs root here'
    if not os.path.exists('/dev/fuse'):
        return '/dev/fuse does not exist (no FUSE in this kernel or ' \
            'container)'
    t.sh('rm -f img.qcow2 && qemu-img create -q -f qcow2 img.qcow2 1M')
    d = start(t.daemon_bin, '')
    ok = mounted()
    d.stop()
    err = d.stderr
    if not ok:
        return 'the kernel refused the mount: ' + err.strip()[-300:]
    return None


# ---------------------------------------------------------------------------
# qblock alone


def data_reaches_image():
    what = 'fuse: data'
    t.sh('rm -f img.qcow2 && qemu-img create -q -f qcow2 img.qcow2 4M')
    d = start(t.daemon_bin, ',writable=on')
    block = 64 * 1024
    fd = os.open(MNT, os.O_WRONLY)
    for i in range(16):
        os.pwrite(fd, bytes([i + 1]) * block, i * block * 3)
    os.fsync(fd)
    os.close(fd)
    # several readers at once: the requests run side by side
    procs = [subprocess.Popen(['cmp', MNT, '-', '--bytes', str(4 * MIB)],
                              stdin=open(MNT, 'rb')) for _ in range(4)]
    t.check('%s: parallel readers see the same bytes' % what,
            all(p.wait() == 0 for p in procs))
    t.equal('%s: the daemon exits 0' % what, stop(d), 0)
    cmds = []
    for i in range(16):
        cmds += ['-c', 'read -P %d %d %d' % (i + 1, i * block * 3, block)]
    rc, out, err = t.run(['qemu-io', '-f', 'qcow2'] + cmds +
                         [t.path('img.qcow2')])
    t.check('%s: every block written through the file is in the image'
            % what, rc == 0 and 'Pattern verification failed' not in out,
            out + err)
    rc, out, err = t.run(['qemu-img', 'check', t.path('img.qcow2')])
    t.check('%s: qemu-img check' % what, rc == 0, out + err)


def errors_and_lifecycle():
    what = 'fuse: create'
    t.sh('rm -f img.qcow2 && qemu-img create -q -f qcow2 img.qcow2 1M')
    d = start(t.daemon_bin, ',writable=on',
              extra=['--object', 'iothread,id=io0', '--chardev',
                     'socket,id=q2,path=%s,server=on,wait=off'
                     % t.path('qmp.sock'), '--monitor', 'chardev=q2'])
    c = qsd.QmpClient(t.path('qmp.sock'))
    c.negotiate()
    if not os.path.isdir(t.path('dir')):
        os.mkdir(t.path('dir'))

    def add(mnt, **kw):
        args = {'type': 'fuse', 'id': 'x', 'node-name': 'n',
                'mountpoint': mnt}
        args.update(kw)
        return c.cmd('block-export-add', args)

    t.equal('%s: a directory' % what, error_of(add(t.path('dir'))),
            generic("'%s' is not a regular file" % t.path('dir')))
    t.equal('%s: a missing file' % what, error_of(add(t.path('none'))),
            generic("Failed to stat '%s': No such file or directory"
                    % t.path('none')))
    t.equal('%s: a mountpoint in use' % what, error_of(add(MNT)),
            generic("There already is a FUSE export on '%s'" % MNT))

    # block_resize is seen at once, not after the attribute timeout
    what = 'fuse: block_resize'
    os.stat(MNT)
    c.ok('block_resize', {'node-name': 'n', 'size': 2 * MIB})
    t.equal('%s: the file has the new size' % what, os.stat(MNT).st_size,
            2 * MIB)

    # a second export in an iothread, on another file
    what = 'fuse: in an iothread'
    mnt2 = t.path('mnt2')
    open(mnt2, 'w').close()
    t.sh('rm -f two.raw && qemu-img create -q -f raw two.raw 1M')
    c.ok('blockdev-add', {'driver': 'raw', 'node-name': 'two', 'file': {
        'driver': 'file', 'filename': t.path('two.raw')}})
    r = c.cmd('block-export-add', {'type': 'fuse', 'id': 'e2',
                                   'node-name': 'two', 'mountpoint': mnt2,
                                   'writable': True, 'iothread': 'io0',
                                   'fixed-iothread': True})
    t.equal('%s: starts' % what, r, {'return': {}})
    pwrite2 = os.open(mnt2, os.O_RDWR)
    os.pwrite(pwrite2, b'\x5a' * 8192, 4096)
    t.equal('%s: reads back' % what, os.pread(pwrite2, 8192, 4096),
            b'\x5a' * 8192)
    os.close(pwrite2)
    c.ok('block-export-del', {'id': 'e2'})
    c.event('BLOCK_EXPORT_DELETED')
    t.check('%s: block-export-del unmounts' % what, not mounted(mnt2))
    t.equal('%s: the file under it is back, untouched' % what,
            os.path.getsize(mnt2), 0)
    t.equal('%s: then the iothread can go' % what,
            c.cmd('object-del', {'id': 'io0'}), {'return': {}})
    rc, out, err = t.run(['qemu-io', '-f', 'raw', '-r', '-U', '-c',
                          'read -P 0x5a 4096 8192', t.path('two.raw')])
    t.check('%s: the data is in the image' % what,
            rc == 0 and 'Pattern verification failed' not in out, out)

    what = 'fuse: SIGTERM'
    c.close()
    t.equal('%s: the daemon exits 0' % what, stop(d), 0)
    t.check('%s: unmounted' % what, not mounted())


def failed_start_unmounts():
    what = 'fuse: a start that fails after the mount'
    t.sh('rm -f img.qcow2 && qemu-img create -q -f qcow2 img.qcow2 1M')
    open(MNT, 'w').close()
    rc, out, err = t.run([
        t.daemon_bin, '--blockdev', 'qcow2,node-name=n,file.driver=file,'
        'file.filename=img.qcow2', '--export',
        'fuse,id=e,node-name=n,mountpoint=' + MNT, '--export',
        'fuse,id=e2,node-name=n,mountpoint=' + MNT])
    t.check('%s: says why' % what, rc == 1 and
            "There already is a FUSE export on '%s'" % MNT in err, err)
    t.check('%s: leaves no mount behind (QEMU 7.2 does)' % what,
            not mounted())


def cleanup():
    """A daemon that a failure (or a test killed half-way) left running
    would leave its mount behind."""
    for d in t.daemons:
        d.kill()
    for path in (MNT, t.path('mnt2')):
        if mounted(path):
            subprocess.run(['umount', '-l', path])


atexit.register(cleanup)
why = can_mount()
if why:
    t.skip('the FUSE export', why)
else:
    compare_with_qemu()
    data_reaches_image()
    errors_and_lifecycle()
    failed_start_unmounts()
cleanup()
t.finish()
