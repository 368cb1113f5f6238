#!/usr/bin/env python3
"""Writes the seed images of fuzz-vmdk: small hosted sparse extents
(grains of 4 KiB, grain tables of 4 entries) that reach each part of
block/vmdk.c: an embedded descriptor, allocated, unallocated and zeroed
grains in two grain tables, a parent named in the descriptor, a
stream-optimized extent whose deflated grains and grain directory (in a
footer) follow VMware's layout, and ESX sparse extents ("COWD", opened
alone: descriptor text at byte 512, as QEMU reads one), one whose
directory has fewer entries than its grains need.  A COWD grain table
has 4096 entries (16 KiB): the seeds' tables run past the end of the
file, whose missing bytes read as zeroes.  Every seed stays within fuzz-vmdk's
longest input (16 KiB, tests/fuzz/run.sh).

Usage: make-corpus-vmdk.py [DIR]   (default: corpus/fuzz-vmdk)"""

import os
import struct
import sys
import zlib

SECTOR = 512
GRAIN = 8               # sectors
GTES = 4
CAPACITY = 64           # sectors: 8 grains, 2 grain tables
GD_AT_END = 0xffffffffffffffff


def header(flags, gd_offset, overhead, desc_offset=1, desc_size=1,
           compress=0):
    h = struct.pack('<IIIQQQQIQQQB4sH', 0x564d444b, 3 if compress else 1,
                    flags, CAPACITY, GRAIN, desc_offset, desc_size, GTES, 0,
                    gd_offset, overhead, 0, b'\n \r\n', compress)
    return h.ljust(SECTOR, b'\0')


def descriptor(create_type, parent=None):
    lines = ['# Disk DescriptorFile', 'version=1', 'CID=12345678',
             'parentCID=%s' % ('87654321' if parent else 'ffffffff'),
             'createType="%s"' % create_type]
    if parent:
        lines.append('parentFileNameHint="%s"' % parent)
    lines += ['', '# Extent description',
              'RW %d SPARSE "seed.vmdk"' % CAPACITY, '']
    return '\n'.join(lines).encode().ljust(SECTOR, b'\0')


def table(entries, count):
    return struct.pack('<%dI' % count, *entries).ljust(SECTOR, b'\0')


def sparse(parent=None):
    """Sectors: header, descriptor, GD, GT0, GT1, padding, then grains at
    8, 16, 24; grain 2 zeroed (zeroed-grain flag), the others holes."""
    flags = 1 | (1 << 2)
    img = header(flags, 2, 8) + descriptor('monolithicSparse', parent)
    img += table([3, 4], 2) + table([8, 0, 1, 16], GTES)
    img += table([0, 0, 0, 24], GTES) + bytes(3 * SECTOR)
    for i, byte in enumerate((0x11, 0x22, 0x33)):
        img += bytes([byte]) * (GRAIN * SECTOR)
    return img


def stream_optimized():
    """A header that puts the directory at the end, the descriptor,
    deflated grains behind their markers, then marker and grain tables,
    marker and directory, marker and footer, end of stream."""
    flags = 1 | (1 << 16) | (1 << 17)
    body = bytearray(header(flags, GD_AT_END, 2, compress=1))
    body += descriptor('streamOptimized')
    gts = [[0] * GTES, [0] * GTES]
    for grain, byte in ((0, 0x44), (3, 0x55), (7, 0x66)):
        data = zlib.compress(bytes([byte]) * (GRAIN * SECTOR))
        gts[grain // GTES][grain % GTES] = len(body) // SECTOR
        marker = struct.pack('<QI', grain * GRAIN, len(data)) + data
        body += marker.ljust(-(-len(marker) // SECTOR) * SECTOR, b'\0')
    gd = []
    for gt in gts:
        body += struct.pack('<QII', 1, 0, 1).ljust(SECTOR, b'\0')
        gd.append(len(body) // SECTOR)
        body += table(gt, GTES)
    body += struct.pack('<QII', 1, 0, 2).ljust(SECTOR, b'\0')
    gd_offset = len(body) // SECTOR
    body += table(gd, 2)
    body += struct.pack('<QII', 1, 0, 3).ljust(SECTOR, b'\0')
    body += header(flags, gd_offset, 2, compress=1)
    body += bytes(SECTOR)
    return bytes(body)


def cowd(gd_entries=2):
    """Sectors: header (4), GD (1), GT0 (its first sector, the rest past
    the end), GT1's first sector, then grains 0, 3 and 4100 at 7, 15,
    23; 8200 grains of 8 sectors, 3 tables' worth."""
    sectors = 8200 * GRAIN
    head = struct.pack('<4sIIIIIII', b'COWD', 1, 3, sectors, GRAIN, 4,
                       gd_entries, 31).ljust(SECTOR, b'\0')
    desc = b'CID=12345678\nparentCID=ffffffff\n'.ljust(3 * SECTOR, b'\0')
    gd = struct.pack('<2I', 5, 6)[:4 * gd_entries].ljust(SECTOR, b'\0')
    gt0 = table([7, 0, 0, 15], GTES)
    gt1 = table([0, 0, 0, 0, 23], 5)
    img = head + desc + gd + gt0 + gt1
    for byte in (0x77, 0x88, 0x99):
        img += bytes([byte]) * (GRAIN * SECTOR)
    return img


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'corpus', 'fuzz-vmdk')
    os.makedirs(out, exist_ok=True)
    seeds = {
        'sparse': sparse(),
        'sparse-parent': sparse('base.vmdk'),
        'stream-optimized': stream_optimized(),
        'cowd': cowd(),
        'cowd-short-gd': cowd(1),
    }
    for name, img in seeds.items():
        assert len(img) <= 16384, (name, len(img))
        with open(os.path.join(out, name), 'wb') as f:
            f.write(img)


if __name__ == '__main__':
    main()
