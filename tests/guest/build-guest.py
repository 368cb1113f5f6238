#!/usr/bin/python3
"""Builds the test guest: a Debian kernel and a busybox initramfs.

    build-guest.py OUTDIR

Writes OUTDIR/vmlinux (the kernel's ELF image, which QEMU boots directly
through the PVH entry point: under TCG that saves the seconds the
bzImage spends in real mode and in decompressing itself),
OUTDIR/initramfs.cpio.gz (busybox-static, the virtio modules and
guest-init.sh as /init) and OUTDIR/kernel.version.

The kernel comes from an installed Debian kernel package when there is
one (/boot/vmlinuz-V with /lib/modules/V), otherwise from the package
that linux-image-amd64 depends on, fetched with `apt-get download` into
the cache directory ($QBLOCK_GUEST_CACHE, default /var/tmp/qblock-guest)
and read there without installing it.  Nothing is installed.

Exit status: 0 built, 77 when no kernel or no busybox-static can be had
(the message says which), 1 on other errors.
"""

import glob
import gzip
import io
import lzma
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BUSYBOX = '/bin/busybox'
# What the guest loads, in this order after their dependencies: the PCI
# transport and the block driver (Debian builds both as modules).
WANT_MODULES = ['virtio_pci', 'virtio_blk']
CACHE = os.environ.get('QBLOCK_GUEST_CACHE', '/var/tmp/qblock-guest')


class Skip(Exception):
    """A dependency is missing: the test is skipped, not failed."""


def log(msg):
    print('build-guest: ' + msg, file=sys.stderr)


def modname(path):
    base = os.path.basename(path).split('.ko')[0]
    return base.replace('-', '_')


def read_module(data, path):
    """The bytes of a module file, decompressed."""
    if path.endswith('.xz'):
        return lzma.decompress(data)
    if path.endswith('.gz'):
        return gzip.decompress(data)
    if path.endswith('.zst'):
        return subprocess.run(['zstd', '-qdc'], input=data, check=True,
                              stdout=subprocess.PIPE).stdout
    return data


def module_depends(ko):
    """The depends= entry of a module's .modinfo strings."""
    for field in ko.split(b'\0'):
        if field.startswith(b'depends='):
            deps = field[len(b'depends='):].decode()
            return [d.replace('-', '_') for d in deps.split(',') if d]
    return []


class KernelSource:
    """A kernel image and its module tree, installed or in a .deb."""

    def __init__(self):
        self.version = None
        self.vmlinuz = None
        self.config = None
        self.modules = {}       # name -> bytes, filled by load_modules

    def from_installed(self):
        for vmlinuz in sorted(glob.glob('/boot/vmlinuz-*'), reverse=True):
            version = vmlinuz[len('/boot/vmlinuz-'):]
            moddir = '/lib/modules/' + version
            if os.path.isdir(moddir) and os.access(vmlinuz, os.R_OK):
                self.version = version
                with open(vmlinuz, 'rb') as f:
                    self.vmlinuz = f.read()
                cfg = '/boot/config-' + version
                if os.path.exists(cfg):
                    with open(cfg) as f:
                        self.config = f.read()
                for path in glob.glob(moddir + '/kernel/**/*.ko*',
                                      recursive=True):
                    self.modules.setdefault(modname(path), path)
                return True
        return False

    def from_deb(self):
        deb = self.fetch_deb()
        log('reading %s' % deb)
        data = subprocess.run(['dpkg-deb', '--fsys-tarfile', deb], check=True,
                              stdout=subprocess.PIPE).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for m in tar.getmembers():
                name = m.name.lstrip('./')
                if re.fullmatch(r'boot/vmlinuz-.*', name):
                    self.version = name[len('boot/vmlinuz-'):]
                    self.vmlinuz = tar.extractfile(m).read()
                elif re.fullmatch(r'boot/config-.*', name):
                    self.config = tar.extractfile(m).read().decode()
                elif '/kernel/' in name and '.ko' in name and m.isfile():
                    self.modules.setdefault(modname(name), (tar, m))
            # read the modules we need while the archive is open
            wanted = self.closure(lambda n: read_module(
                self.modules[n][0].extractfile(self.modules[n][1]).read(),
                self.modules[n][1].name))
        if not self.vmlinuz:
            raise RuntimeError('no /boot/vmlinuz-* in ' + deb)
        return wanted

    def fetch_deb(self):
        debs = sorted(glob.glob(os.path.join(CACHE, 'linux-image-*.deb')))
        if debs:
            return debs[-1]
        if not shutil.which('apt-get'):
            raise Skip('no kernel installed and no apt-get to fetch one')
        out = subprocess.run(['apt-cache', 'depends', 'linux-image-amd64'],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True).stdout
        m = re.search(r'Depends: (linux-image-[0-9]\S*)', out)
        if not m:
            raise Skip('no kernel installed, and apt knows no '
                       'linux-image-amd64 (run apt-get update)')
        pkg = m.group(1)
        os.makedirs(CACHE, exist_ok=True)
        log('fetching %s into %s' % (pkg, CACHE))
        r = subprocess.run(['apt-get', 'download', pkg], cwd=CACHE,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        debs = sorted(glob.glob(os.path.join(CACHE, pkg + '_*.deb')))
        if r.returncode != 0 or not debs:
            raise Skip('cannot fetch the kernel: apt-get download %s: %s'
                       % (pkg, r.stderr.strip()))
        return debs[-1]

    def closure(self, read):
        """The wanted modules and their dependencies, dependencies first."""
        order, seen = [], {}

        def visit(name):
            if name in seen:
                return
            if name not in self.modules:
                # built into the kernel: nothing to load
                seen[name] = None
                return
            ko = read(name)
            seen[name] = ko
            for dep in module_depends(ko):
                visit(dep)
            order.append((name, ko))

        for name in WANT_MODULES:
            visit(name)
        return order


def get_kernel():
    k = KernelSource()
    if k.from_installed():
        log('using the installed kernel %s' % k.version)
        mods = k.closure(lambda n: read_module(open(k.modules[n], 'rb').read(),
                                               k.modules[n]))
    else:
        mods = k.from_deb()
        log('using kernel %s from its package' % k.version)
    if k.config is not None and 'CONFIG_PVH=y' not in k.config:
        raise Skip('kernel %s cannot be booted through PVH' % k.version)
    return k, mods


def extract_vmlinux(vmlinuz):
    """The ELF image inside a bzImage (compressed with xz, zstd or gzip)."""
    for magic, decompress in (
            (b'\xfd7zXZ\x00', lambda d: lzma.LZMADecompressor().decompress(d)),
            (b'\x28\xb5\x2f\xfd', lambda d: subprocess.run(
                ['zstd', '-qdc'], input=d, stdout=subprocess.PIPE).stdout),
            (b'\x1f\x8b\x08', lambda d: gzip.GzipFile(
                fileobj=io.BytesIO(d)).read())):
        pos = vmlinuz.find(magic)
        while pos >= 0:
            try:
                elf = decompress(vmlinuz[pos:])
            except (lzma.LZMAError, OSError, EOFError):
                elf = b''
            if elf.startswith(b'\x7fELF'):
                return elf
            pos = vmlinuz.find(magic, pos + 1)
    raise RuntimeError('no ELF image found inside the kernel')


class Cpio:
    """A cpio archive in the "newc" format the kernel unpacks."""

    def __init__(self):
        self.out = io.BytesIO()
        self.ino = 1

    def add(self, name, mode, data=b''):
        hdr = '070701' + ''.join('%08X' % v for v in (
            self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0,
            len(name) + 1, 0))
        self.ino += 1
        self.out.write(hdr.encode() + name.encode() + b'\0')
        self.pad()
        self.out.write(data)
        self.pad()

    def pad(self):
        self.out.write(b'\0' * (-self.out.tell() % 4))

    def finish(self):
        self.add('TRAILER!!!', 0)
        return self.out.getvalue()


def elf_is_static(elf):
    """True if a 64-bit little-endian ELF has no PT_INTERP (a loader)."""
    if elf[:5] != b'\x7fELF\x02' or elf[5] != 1:
        return False
    phoff, = struct.unpack_from('<Q', elf, 0x20)
    phentsize, phnum = struct.unpack_from('<HH', elf, 0x36)
    for i in range(phnum):
        p_type, = struct.unpack_from('<I', elf, phoff + i * phentsize)
        if p_type == 3:
            return False
    return True


def build_initramfs(mods, init='guest-init.sh'):
    if not os.path.exists(BUSYBOX):
        raise Skip('busybox-static is not installed (%s)' % BUSYBOX)
    with open(BUSYBOX, 'rb') as f:
        busybox = f.read()
    if not elf_is_static(busybox):
        raise Skip('%s is not static: install busybox-static' % BUSYBOX)
    applets = subprocess.run([BUSYBOX, '--list'], check=True, text=True,
                             stdout=subprocess.PIPE).stdout.split()
    with open(os.path.join(HERE, init), 'rb') as f:
        init = f.read()

    c = Cpio()
    for d in ('bin', 'dev', 'proc', 'sys', 'tmp', 'lib', 'lib/modules'):
        c.add(d, stat.S_IFDIR | 0o755)
    c.add('bin/busybox', stat.S_IFREG | 0o755, busybox)
    for a in applets:
        if a != 'busybox':
            c.add('bin/' + a, stat.S_IFLNK | 0o777, b'busybox')
    order = []
    for name, ko in mods:
        c.add('lib/modules/%s.ko' % name, stat.S_IFREG | 0o644, ko)
        order.append(name)
    c.add('lib/modules/order', stat.S_IFREG | 0o644,
          ('\n'.join(order) + '\n').encode())
    c.add('init', stat.S_IFREG | 0o755, init)
    return gzip.compress(c.finish(), compresslevel=1), order


def main():
    if len(sys.argv) != 2:
        print('usage: build-guest.py OUTDIR', file=sys.stderr)
        return 1
    outdir = sys.argv[1]
    try:
        kernel, mods = get_kernel()
        initramfs, order = build_initramfs(mods)
    except Skip as e:
        print('build-guest: skipped: %s' % e, file=sys.stderr)
        return 77
    os.makedirs(outdir, exist_ok=True)
    vmlinux = extract_vmlinux(kernel.vmlinuz)
    for name, data in (('vmlinux', vmlinux),
                       ('initramfs.cpio.gz', initramfs),
                       ('kernel.version', (kernel.version + '\n').encode())):
        with tempfile.NamedTemporaryFile(dir=outdir, delete=False) as f:
            f.write(data)
        os.chmod(f.name, 0o644)
        os.rename(f.name, os.path.join(outdir, name))
    log('kernel %s, modules %s' % (kernel.version, ' '.join(order)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
