#!/usr/bin/env python3
"""A small FAT12/FAT16/FAT32 reader for the vvfat tests: written from the FAT
specification, independent of both qblock and QEMU.

  fat-read.py bpb IMAGE            the MBR and boot sector fields, key=value
  fat-read.py tree IMAGE [--detail] every file and directory: path, size,
                                   sha256 (--detail: 8.3 name, attributes,
                                   modification date and time too;
                                   --host-names: a name with no long name
                                   in lower case, as vvfat's rw gives it to
                                   the host; --times: the modification
                                   time as seconds since the epoch, read
                                   as local time, and the read-only
                                   attribute of a file, 'mtime=T ro=0|1')
  fat-read.py host DIR [--times]   the same listing for a host directory
                                   (--times: the mtime down to FAT's two
                                   seconds, ro=1 for a file no one may
                                   write)
  fat-read.py extract IMAGE PATH   one file's content on stdout
  fat-read.py masked IMAGE         sha256 of the image with the bytes past
                                   each file's end in its last cluster read
                                   as zeroes (what they hold is undefined:
                                   QEMU leaves whatever its buffer held)

The tree is checked while it is read: long-name checksums and sequence,
unique 8.3 names per directory, FAT chains that stay in the volume, do not
loop or share clusters, and are as long as the sizes say.  A failed check
exits 1 with a message naming the entry.
"""
import hashlib
import mmap
import os
import stat
import struct
import sys
import time


class FatError(Exception):
    pass


class Fat:
    def __init__(self, path):
        # mapped, not read: a hard disk image is 504 MiB
        with open(path, 'rb') as f:
            self.img = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.part = 0
        self.mbr = None
        if self.img[0] not in (0xeb, 0xe9):
            # a partition table: the first entry holds the volume
            if self.img[510:512] != b'\x55\xaa':
                raise FatError('neither a boot sector nor an MBR at 0')
            self.mbr = self.img[0x1be:0x1be + 16]
            self.part = struct.unpack('<I', self.mbr[8:12])[0] * 512
        b = self.img[self.part:self.part + 512]
        if b[510:512] != b'\x55\xaa':
            raise FatError('no boot sector signature at %d' % self.part)
        (self.bps, self.spc, self.res, self.nfats, self.root_entries,
         ts16, self.media, self.spf, self.spt, self.heads, self.hidden,
         ts32) = struct.unpack('<HBHBHHBHHHII', b[11:36])
        self.total = ts16 or ts32
        self.boot = b
        self.fat_type = 12 if b[54:59] == b'FAT12' else 16
        # FAT32: no fixed root, the FAT's size and the root's cluster in
        # its own fields, the extended BPB after them
        self.ext = 36
        self.root_cluster = 0
        if self.root_entries == 0 and self.spf == 0:
            self.fat_type = 32
            self.spf, = struct.unpack('<I', b[36:40])
            self.root_cluster, = struct.unpack('<I', b[44:48])
            self.ext = 64
        self.fat_off = self.part + self.res * self.bps
        self.root_off = self.fat_off + self.nfats * self.spf * self.bps
        self.data_off = self.root_off + self.root_entries * 32
        self.csize = self.spc * self.bps
        data_sectors = self.total - (self.data_off - self.part) // self.bps
        self.clusters = data_sectors // self.spc
        self.used = {}
        self.files = {}
        self.tails = []
        self.chain_of = {}
        for i in range(1, self.nfats):
            a = self.img[self.fat_off:self.fat_off + self.spf * self.bps]
            o = self.fat_off + i * self.spf * self.bps
            if self.img[o:o + len(a)] != a:
                raise FatError('FAT %d differs from FAT 0' % i)

    def fields(self):
        out = []
        if self.mbr is not None:
            m = self.mbr
            out += [('mbr.status', hex(m[0])), ('mbr.chs_start', m[1:4].hex()),
                    ('mbr.type', hex(m[4])), ('mbr.chs_end', m[5:8].hex()),
                    ('mbr.lba', struct.unpack('<I', m[8:12])[0]),
                    ('mbr.sectors', struct.unpack('<I', m[12:16])[0]),
                    ('mbr.signature', self.img[0x1b8:0x1bc].hex())]
        b = self.boot
        x = self.ext
        out += [('jump', b[0:3].hex()), ('oem', b[3:11].decode('latin-1')),
                ('bytes_per_sector', self.bps),
                ('sectors_per_cluster', self.spc),
                ('reserved_sectors', self.res), ('fats', self.nfats),
                ('root_entries', self.root_entries),
                ('total_sectors16', struct.unpack('<H', b[19:21])[0]),
                ('media', hex(self.media)), ('sectors_per_fat', self.spf),
                ('sectors_per_track', self.spt), ('heads', self.heads),
                ('hidden_sectors', self.hidden),
                ('total_sectors32', struct.unpack('<I', b[32:36])[0]),
                ('drive', hex(b[x])), ('ext_signature', hex(b[x + 2])),
                ('serial', b[x + 3:x + 7].hex()),
                ('label', b[x + 7:x + 18].decode('latin-1')),
                ('fs_type', b[x + 18:x + 26].decode('latin-1')),
                ('fat0', self.entry(0)), ('fat1', self.entry(1))]
        if self.fat_type == 32:
            f = self.part + struct.unpack('<H', b[48:50])[0] * self.bps
            fsinfo = self.img[f:f + 512]
            out += [('root_cluster', self.root_cluster),
                    ('fsinfo_sector', struct.unpack('<H', b[48:50])[0]),
                    ('backup_boot_sector', struct.unpack('<H', b[50:52])[0]),
                    ('fsinfo.signatures', fsinfo[0:4] + fsinfo[484:488] +
                     fsinfo[508:512]),
                    ('fsinfo.free', struct.unpack('<I', fsinfo[488:492])[0]),
                    ('fsinfo.next', struct.unpack('<I', fsinfo[492:496])[0])]
        return out

    def entry(self, c):
        if self.fat_type == 32:
            return struct.unpack('<I', self.img[self.fat_off + 4 * c:
                                                self.fat_off + 4 * c + 4]
                                 )[0] & 0x0fffffff
        if self.fat_type == 16:
            return struct.unpack('<H', self.img[self.fat_off + 2 * c:
                                                self.fat_off + 2 * c + 2])[0]
        o = self.fat_off + c * 3 // 2
        v = struct.unpack('<H', self.img[o:o + 2])[0]
        return v >> 4 if c & 1 else v & 0xfff

    def chain(self, first, what):
        eoc = {12: 0xff8, 16: 0xfff8, 32: 0x0ffffff8}[self.fat_type]
        out = []
        c = first
        while True:
            if c < 2 or c >= self.clusters + 2:
                raise FatError('%s: cluster %d outside the volume' % (what, c))
            if c in self.used:
                raise FatError('%s: cluster %d also belongs to %s' %
                               (what, c, self.used[c]))
            self.used[c] = what
            out.append(c)
            c = self.entry(c)
            if c >= eoc:
                self.chain_of[what] = out
                return out

    def read_chain(self, first, what):
        return b''.join(self.img[self.data_off + (c - 2) * self.csize:
                                 self.data_off + (c - 1) * self.csize]
                        for c in self.chain(first, what))

    def entries(self, raw, where):
        """The directory's (long name, short entry) pairs, checked."""
        lfn = {}
        seen = set()
        for i in range(0, len(raw), 32):
            e = raw[i:i + 32]
            if e[0] == 0:
                break
            if e[0] == 0xe5:
                lfn = {}
                continue
            if e[11] == 0x0f:
                seq = e[0] & 0x3f
                if e[0] & 0x40:
                    lfn = {'count': seq, 'sum': e[13]}
                elif not lfn or e[13] != lfn['sum']:
                    raise FatError('%s: long-name piece %d out of place' %
                                   (where, seq))
                lfn[seq] = e[1:11] + e[14:26] + e[28:32]
                continue
            short = bytes(e[:11])
            if short in seen:
                raise FatError('%s: 8.3 name %r twice' % (where, short))
            seen.add(short)
            name = None
            if lfn:
                s = 0
                for ch in short:
                    s = (((s & 1) << 7) + (s >> 1) + ch) & 0xff
                if s != lfn['sum'] or any(k not in lfn for k in
                                          range(1, lfn['count'] + 1)):
                    raise FatError('%s: long name of %r does not match it' %
                                   (where, short))
                u = b''.join(lfn[k] for k in range(1, lfn['count'] + 1))
                name = u.decode('utf-16-le').split('\0')[0]
            lfn = {}
            yield name, e

    def walk(self, raw, prefix, out):
        for name, e in self.entries(raw, prefix or '/'):
            attr = e[11]
            short = e[:11]
            if attr & 0x08:
                continue
            if short in (b'.          ', b'..         '):
                continue
            if name is None:
                base = short[:8].decode('latin-1').rstrip()
                ext = short[8:].decode('latin-1').rstrip()
                name = base + ('.' + ext if ext else '')
                if self.host_names:
                    name = name.lower()
            path = prefix + '/' + name
            first = struct.unpack('<H', e[26:28])[0]
            if self.fat_type == 32:
                first |= struct.unpack('<H', e[20:22])[0] << 16
            size = struct.unpack('<I', e[28:32])[0]
            mdate, mtime = struct.unpack('<H', e[24:26])[0], \
                struct.unpack('<H', e[22:24])[0]
            detail = '%s attr=%02x mdate=%04x mtime=%04x' % (
                short.decode('latin-1'), attr, mdate, mtime)
            self.times[path] = fat_times(mdate, mtime, attr)
            if attr & 0x10:
                out.append((path, 'dir', '-', detail))
                self.walk(self.read_chain(first, path), path, out)
                continue
            data = b''
            if size:
                data = self.read_chain(first, path)
                if len(data) - self.csize >= size or len(data) < size:
                    raise FatError('%s: %d clusters for %d bytes' %
                                   (path, len(data) // self.csize, size))
            elif first:
                raise FatError('%s: empty but has cluster %d' % (path, first))
            self.files[path] = data[:size]
            if size % self.csize:
                last = self.chain_of[path][-1]
                start = self.data_off + (last - 2) * self.csize
                self.tails.append((start + size % self.csize,
                                   start + self.csize))
            out.append((path, str(size),
                        hashlib.sha256(data[:size]).hexdigest(), detail))

    def masked_sha256(self):
        self.tree()
        h = hashlib.sha256()

        def feed(a, b):
            # in pieces: a slice of the map is a copy
            for o in range(a, b, 1 << 20):
                h.update(self.img[o:min(b, o + (1 << 20))])
        pos = 0
        for start, end in sorted(self.tails):
            feed(pos, start)
            h.update(bytes(end - start))
            pos = end
        feed(pos, len(self.img))
        return h.hexdigest()

    def tree(self):
        out = []
        self.times = {}
        if self.root_cluster:
            root = self.read_chain(self.root_cluster, '/')
        else:
            root = self.img[self.root_off:self.data_off]
        self.walk(root, '', out)
        return sorted(out)


def fat_times(mdate, mtime, attr):
    try:
        t = '%d' % time.mktime(((mdate >> 9) + 1980, (mdate >> 5) & 15,
                                mdate & 31, mtime >> 11, (mtime >> 5) & 63,
                                (mtime & 31) * 2, 0, 0, -1))
    except (ValueError, OverflowError):
        t = '-'
    return 'mtime=%s ro=%s' % (t, '-' if attr & 0x10 else attr & 1)


def host_times(path):
    st = os.stat(path)
    ro = '-' if stat.S_ISDIR(st.st_mode) else int(not st.st_mode & 0o222)
    return 'mtime=%d ro=%s' % (int(st.st_mtime) & ~1, ro)


def host_tree(top):
    out = []
    for root, dirs, files in os.walk(top, followlinks=True):
        rel = os.path.relpath(root, top)
        rel = '' if rel == '.' else '/' + rel
        for d in dirs:
            out.append((rel + '/' + d, 'dir', '-', ''))
        for f in files:
            p = os.path.join(root, f)
            if not os.path.exists(p):
                continue            # a dangling link: vvfat leaves it out
            with open(p, 'rb') as fh:
                data = fh.read() if os.path.isfile(p) else b''
            out.append((rel + '/' + f, str(len(data)),
                        hashlib.sha256(data).hexdigest(), ''))
    return sorted(out)


def main():
    cmd, arg = sys.argv[1], sys.argv[2]
    try:
        times = '--times' in sys.argv[3:]
        if cmd == 'host':
            for p, kind, h, _ in host_tree(arg):
                print('%s\t%s\t%s%s' % (p, kind, h, '\t' + host_times(
                    arg + p) if times else ''))
            return 0
        fat = Fat(arg)
        fat.host_names = '--host-names' in sys.argv[3:]
        if cmd == 'bpb':
            for k, v in fat.fields():
                print('%s=%s' % (k, v))
        elif cmd == 'tree':
            detail = '--detail' in sys.argv[3:]
            for p, kind, h, d in fat.tree():
                print('%s\t%s\t%s%s%s' % (p, kind, h,
                                          '\t' + d if detail else '',
                                          '\t' + fat.times[p] if times
                                          else ''))
        elif cmd == 'masked':
            print(fat.masked_sha256())
        elif cmd == 'extract':
            fat.tree()
            want = sys.argv[3]
            if want not in fat.files:
                raise FatError('no file %s' % want)
            sys.stdout.buffer.write(fat.files[want])
        else:
            raise FatError('unknown command %s' % cmd)
    except FatError as e:
        print('fat-read.py: %s: %s' % (arg, e), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
