#!/usr/bin/env python3
"""Finds and damages qcow2 metadata, for the tests that need a broken image.

  qcow2_meta.py IMG locate STRUCT       prints the host offset of STRUCT
  qcow2_meta.py IMG size STRUCT         prints its size in bytes
  qcow2_meta.py IMG point GUEST STRUCT  makes the L2 entry of guest offset
                                        GUEST map the first cluster of
                                        STRUCT (a normal, COPIED entry)
  qcow2_meta.py IMG sum STRUCT          md5 of STRUCT's bytes
  qcow2_meta.py IMG set-incompat BITS   sets the incompatible feature bits

STRUCT is one of: header, active-l1, active-l2 (the L2 table of guest
offset 0), refcount-table, refcount-block (the first block),
snapshot-table, inactive-l1 (the first snapshot's L1 table), inactive-l2
(the first L2 table of the first snapshot), bitmap-directory, or a number
(a host offset).

Written from the qcow2 specification (docs/interop/qcow2.txt in QEMU).
"""
import hashlib
import struct
import sys

L1E_OFFSET_MASK = 0x00fffffffffffe00
COPIED = 1 << 63
BITMAPS_EXT = 0x23852875


class Image:
    def __init__(self, path):
        self.f = open(path, 'r+b')
        h = self.f.read(104)
        (magic, self.version, _, _, self.cluster_bits, self.size, _,
         self.l1_size, self.l1_offset, self.reftable_offset,
         self.reftable_clusters, self.nb_snapshots,
         self.snapshots_offset) = struct.unpack('>IIQIIQIIQQIIQ', h[:72])
        if magic != 0x514649fb:
            sys.exit('%s: not a qcow2 image' % path)
        self.cluster_size = 1 << self.cluster_bits
        self.header_length = 72
        if self.version >= 3:
            self.header_length = struct.unpack('>I', h[100:104])[0]

    def u64(self, offset):
        self.f.seek(offset)
        return struct.unpack('>Q', self.f.read(8))[0]

    def extensions(self):
        offset = self.header_length
        while offset + 8 <= self.cluster_size:
            self.f.seek(offset)
            magic, length = struct.unpack('>II', self.f.read(8))
            if magic == 0:
                return
            yield magic, self.f.read(length)
            offset += 8 + (length + 7) // 8 * 8

    def snapshot_l1(self):
        if not self.nb_snapshots:
            sys.exit('the image has no snapshots')
        self.f.seek(self.snapshots_offset)
        l1_offset, l1_size = struct.unpack('>QI', self.f.read(12))
        return l1_offset, l1_size

    def snapshot_table_size(self):
        offset = self.snapshots_offset
        for _ in range(self.nb_snapshots):
            self.f.seek(offset)
            (_, _, id_len, name_len, _, _, _, _,
             extra) = struct.unpack('>QIHHIIQII', self.f.read(40))
            offset += 40 + extra + id_len + name_len
            offset = (offset + 7) // 8 * 8
        return offset - self.snapshots_offset

    def bitmap_directory(self):
        for magic, data in self.extensions():
            if magic == BITMAPS_EXT:
                _, _, size, offset = struct.unpack('>IIQQ', data[:24])
                return offset, size
        sys.exit('the image has no bitmaps extension')

    def first_l2(self, l1_offset, l1_size):
        for i in range(l1_size):
            l2 = self.u64(l1_offset + 8 * i) & L1E_OFFSET_MASK
            if l2:
                return l2
        sys.exit('no L2 table in the L1 table at %#x' % l1_offset)

    def locate(self, name):
        """(offset, size) of a structure."""
        if name.isdigit() or name.startswith('0x'):
            return int(name, 0), self.cluster_size
        if name == 'header':
            return 0, self.cluster_size
        if name == 'active-l1':
            return self.l1_offset, self.l1_size * 8
        if name == 'active-l2':
            return (self.u64(self.l1_offset) & L1E_OFFSET_MASK,
                    self.cluster_size)
        if name == 'refcount-table':
            return self.reftable_offset, self.reftable_clusters * \
                self.cluster_size
        if name == 'refcount-block':
            return self.u64(self.reftable_offset), self.cluster_size
        if name == 'snapshot-table':
            return self.snapshots_offset, self.snapshot_table_size()
        if name == 'inactive-l1':
            l1_offset, l1_size = self.snapshot_l1()
            return l1_offset, l1_size * 8
        if name == 'inactive-l2':
            return self.first_l2(*self.snapshot_l1()), self.cluster_size
        if name == 'bitmap-directory':
            return self.bitmap_directory()
        sys.exit('unknown structure %s' % name)

    def point(self, guest, name):
        l2_index = (guest >> self.cluster_bits) & \
            ((1 << (self.cluster_bits - 3)) - 1)
        l1_index = guest >> (2 * self.cluster_bits - 3)
        l2 = self.u64(self.l1_offset + 8 * l1_index) & L1E_OFFSET_MASK
        if not l2:
            sys.exit('guest offset %#x has no L2 table' % guest)
        target = self.locate(name)[0] & ~(self.cluster_size - 1)
        self.f.seek(l2 + 8 * l2_index)
        self.f.write(struct.pack('>Q', target | COPIED))


def main():
    img = Image(sys.argv[1])
    cmd, args = sys.argv[2], sys.argv[3:]
    if cmd == 'locate':
        print(img.locate(args[0])[0])
    elif cmd == 'size':
        print(img.locate(args[0])[1])
    elif cmd == 'point':
        img.point(int(args[0], 0), args[1])
    elif cmd == 'sum':
        offset, size = img.locate(args[0])
        img.f.seek(offset)
        print(hashlib.md5(img.f.read(size)).hexdigest())
    elif cmd == 'set-incompat':
        img.f.seek(72)
        bits = struct.unpack('>Q', img.f.read(8))[0] | int(args[0], 0)
        img.f.seek(72)
        img.f.write(struct.pack('>Q', bits))
    else:
        sys.exit('unknown command %s' % cmd)


if __name__ == '__main__':
    main()
