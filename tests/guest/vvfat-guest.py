#!/usr/bin/python3
"""A Linux guest writes to a vvfat disk with rw; the host directory must
follow.

    vvfat-guest.py BUILD_DIR GUEST_DIR

qblock-nbd serves fat:rw:DIR (a FAT16 hard disk), then fat:32:rw:DIR
(qblock's FAT32, which QEMU 7.2 has not); QEMU (TCG) boots the
test kernel with an initramfs of its own (build-guest.py's, with the
vfat modules and vvfat-init.sh as /init) and that disk as virtio-blk.
Linux's vfat driver makes, rewrites, appends to, renames, moves and
removes files and directories, then unmounts; the host then applies the
same steps (STEPS, the same as vvfat-init.sh's) to a copy of the tree,
and both trees must be the same (names, sizes, contents; fat-read.py's
listing), qblock-nbd must have said nothing, and no temporary file of
the commit may be left.  This is what the guest's own write order
(FATs, directories and data through the page cache, in whatever order
its writeback chooses) makes of the commit, where vvfat-rw.sh has
mtools' order.  The guest also sets a file's time (touch -d) and makes
files read-only (chmod a-w) and one writable again (chmod u+w): the
host's mtime and write permission must follow (qblock-nbd runs with
TZ=UTC0, the guest's time zone).

Prints "ok NAME" / "FAIL NAME" and "N passed, N failed"; exits 77 when
something it needs is missing (the message says what).
"""

import calendar
import difflib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAT_READ = os.path.join(HERE, '..', 'interop', 'fat-read.py')

spec = importlib.util.spec_from_file_location(
    'build_guest', os.path.join(HERE, 'build-guest.py'))
bg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bg)


def base_tree(d):
    os.makedirs(os.path.join(d, 'sub'))
    os.makedirs(os.path.join(d, 'emptydir'))
    os.makedirs(os.path.join(d, 'full'))
    for name, data in (('a.txt', b'hello\n'), ('sub/b.txt', b'inside sub\n'),
                       ('over.txt', b'a long line of old content, longer '
                                    b'than its rewrite\n'),
                       ('appended.txt', b'first line\n' * 1000),
                       ('full/one', b'f1\n'), ('full/two', b'f2\n')):
        with open(os.path.join(d, name), 'wb') as f:
            f.write(data)


def steps(d):
    """vvfat-init.sh's steps, on the host."""
    def p(*names):
        return os.path.join(d, *names)
    with open(p('Big File.Txt'), 'w') as f:
        for i in range(3000):
            f.write('line %d of the big file\n' % i)
    with open(p('newfile.txt'), 'w') as f:
        f.write('a new file\n')
    open(p('empty-new'), 'w').close()
    os.mkdir(p('New Dir'))
    with open(p('New Dir', 'inner.txt'), 'w') as f:
        f.write('inner\n')
    os.unlink(p('a.txt'))
    os.rename(p('sub', 'b.txt'), p('New Dir', 'b.txt'))
    os.rename(p('over.txt'), p('Renamed.txt'))
    with open(p('Renamed.txt'), 'w') as f:
        f.write('short\n')
    with open(p('appended.txt'), 'a') as f:
        f.write('one more line\n')
    os.rmdir(p('emptydir'))
    shutil.rmtree(p('full'))
    os.rename(p('sub'), p('Sub Renamed'))
    line = b'a line of the large file\n'
    with open(p('large.txt'), 'wb') as f:
        f.write((line * (3000000 // len(line) + 1))[:3000000])
    os.utime(p('newfile.txt'), (GUEST_TIME, GUEST_TIME))
    os.chmod(p('appended.txt'), 0o444)


# touch -d "2001-02-03 04:05:06" in the guest, whose clock is UTC
GUEST_TIME = calendar.timegm((2001, 2, 3, 4, 5, 6))


def listing(d):
    return subprocess.run([sys.executable, FAT_READ, 'host', d], check=True,
                          stdout=subprocess.PIPE, text=True).stdout


def build(out):
    """The kernel and the initramfs with the vfat modules."""
    bg.WANT_MODULES = ['virtio_pci', 'virtio_blk', 'vfat', 'nls_cp437',
                       'nls_utf8']
    kernel, mods = bg.get_kernel()
    initramfs, order = bg.build_initramfs(mods, 'vvfat-init.sh')
    with open(os.path.join(out, 'vmlinux'), 'wb') as f:
        f.write(bg.extract_vmlinux(kernel.vmlinuz))
    with open(os.path.join(out, 'initramfs.cpio.gz'), 'wb') as f:
        f.write(initramfs)
    return order


class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, good, detail=''):
        if good:
            print('ok ' + name)
            self.passed += 1
        else:
            print('FAIL ' + name)
            for line in str(detail).splitlines()[-40:]:
                print('    ' + line)
            self.failed += 1


def run_disk(c, build_dir, out, prefix, kind):
    """The guest's steps on a PREFIX disk (fat:rw: or fat:32:rw:)."""
    def check(name, good, detail=''):
        c.check('%s: %s' % (kind, name), good, detail)

    work = tempfile.mkdtemp(prefix='vvfat-guest.')
    host = os.path.join(work, 'host')
    want = os.path.join(work, 'want')
    base_tree(host)
    shutil.copytree(host, want)
    steps(want)
    sock = os.path.join(work, 'nbd.sock')
    env = dict(os.environ, TMPDIR=work, TZ='UTC0')
    umask = os.umask(0)
    os.umask(umask)
    nbd_err = open(os.path.join(out, 'qblock-nbd-%s.log' % kind), 'w')
    nbd = subprocess.Popen([os.path.join(build_dir, 'qblock-nbd'), '-t',
                            '-k', sock, '-f', 'vvfat', prefix + host],
                           stderr=nbd_err, env=env)
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        console = os.path.join(out, 'console-%s.log' % kind)
        argv = ['qemu-system-x86_64', '-machine', 'q35,accel=tcg',
                '-cpu', 'max', '-m', '256', '-nodefaults',
                '-no-user-config', '-nographic', '-monitor', 'none',
                '-no-reboot', '-serial', 'file:' + console,
                '-kernel', os.path.join(out, 'vmlinux'),
                '-initrd', os.path.join(out, 'initramfs.cpio.gz'),
                '-append', 'console=ttyS0 panic=-1 quiet',
                '-drive', 'file=nbd+unix:///?socket=%s,format=raw,'
                'if=virtio,cache=none' % sock]
        try:
            r = subprocess.run(argv, timeout=600, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            qemu_out = r.stdout
        except subprocess.TimeoutExpired:
            qemu_out = 'timed out after 600 s'
        with open(console, errors='replace') as f:
            log = f.read()
        check('the guest booted and ran its steps on vfat',
                '@@RESULT PASS' in log, qemu_out + '\n' + log)
    finally:
        nbd.terminate()
        nbd.wait()
        nbd_err.close()
    got, expected = listing(host), listing(want)
    check('the host tree is the guest\'s (names, sizes, contents)',
            got == expected,
            ''.join(difflib.unified_diff(expected.splitlines(True),
                                         got.splitlines(True),
                                         'expected', 'host')))
    mtime = os.stat(os.path.join(host, 'newfile.txt')).st_mtime
    check('a time the guest set (touch -d) is the host file\'s mtime',
            mtime == GUEST_TIME, '%s, not %s' % (mtime, GUEST_TIME))
    modes = [os.stat(os.path.join(host, n)).st_mode & 0o777
             for n in ('appended.txt', 'Renamed.txt')]
    check('chmod a-w in the guest takes the host file\'s write '
            'permission, u+w gives it back',
            modes == [0o444 & ~umask, 0o666 & ~umask],
            ' '.join('%o' % m for m in modes))
    with open(os.path.join(out, 'qblock-nbd-%s.log' % kind)) as f:
        said = f.read()
    # Linux marks the volume dirty in its boot sector at mount and clean
    # at umount: refused, with QEMU's message, as QEMU refuses it
    said = '\n'.join(line for line in said.splitlines() if line !=
                     'qblock-nbd: Tried to write to protected bootsector')
    check('qblock-nbd said nothing but the boot sector\'s refusal',
            said == '', said)
    left = [n for n in os.listdir(host) if n.startswith('.qblock-vvfat')]
    check('no temporary file of the commit is left', not left, left)
    left = [n for n in os.listdir(work) if n.startswith('qblock-vvfat')]
    check('the overlay left nothing in TMPDIR', not left, left)
    shutil.rmtree(work)


def main():
    if len(sys.argv) != 3:
        print('usage: vvfat-guest.py BUILD_DIR GUEST_DIR', file=sys.stderr)
        return 1
    build_dir, guest_dir = sys.argv[1:]
    if not shutil.which('qemu-system-x86_64'):
        print('vvfat-guest: skipped: qemu-system-x86_64 is not installed')
        return 77
    out = os.path.join(guest_dir, 'vvfat')
    os.makedirs(out, exist_ok=True)
    try:
        order = build(out)
    except bg.Skip as e:
        print('vvfat-guest: skipped: %s' % e)
        return 77
    print('# guest modules: %s' % ' '.join(order))
    c = Checks()
    # FAT16 (QEMU's default) and FAT32 (qblock's own, a real FAT32 volume)
    for prefix, kind in (('fat:rw:', 'FAT16'), ('fat:32:rw:', 'FAT32')):
        run_disk(c, build_dir, out, prefix, kind)
    print('%d passed, %d failed' % (c.passed, c.failed))
    return 1 if c.failed else 0


if __name__ == '__main__':
    sys.exit(main())
