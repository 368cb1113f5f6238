#!/usr/bin/env python3
"""Writes the seed images of fuzz-vdi: VDI 1.1 images as qemu-img
create -f vdi lays them out (header sector, block map, data area) that
reach each part of block/vdi.c and block/vdi-write.c: a dynamic image
with allocated, unallocated and discarded entries and the first bytes of
its data area (the rest of a block lies past the end of the input and
reads as zeroes), a static image, one whose block map lies past the end
of the file, and one whose data area overlaps its map (read-only).
Every seed stays within fuzz-vdi's longest input (16 KiB,
tests/fuzz/run.sh).

Usage: make-corpus-vdi.py [DIR]   (default: corpus/fuzz-vdi)"""

import os
import struct
import sys

SECTOR = 512
BLOCK = 1 << 20
UNALLOCATED = 0xffffffff
DISCARDED = 0xfffffffe


def header(blocks, allocated, static=False, disk_size=None, bmap=SECTOR,
           data=None):
    if data is None:
        data = bmap + -(-blocks * 4 // SECTOR) * SECTOR
    h = b'<<< QEMU VM Virtual Disk Image >>>\n'.ljust(0x40, b'\0')
    h += struct.pack('<IIIII', 0xbeda107f, 0x00010001, 0x180,
                     2 if static else 1, 0)
    h += bytes(256)
    h += struct.pack('<IIIIIIIQIIII', bmap, data, 0, 0, 0, SECTOR, 0,
                     blocks * BLOCK if disk_size is None else disk_size,
                     BLOCK, 0, blocks, allocated)
    h += bytes(range(16)) + bytes(range(16, 32))      # image, last snap
    return h.ljust(SECTOR, b'\0')


def bmap(entries):
    b = b''.join(struct.pack('<I', e) for e in entries)
    return b.ljust(-(-len(b) // SECTOR) * SECTOR, b'\0')


def dynamic():
    entries = [1, UNALLOCATED, 0, DISCARDED, UNALLOCATED, 2, UNALLOCATED, 3]
    img = header(len(entries), 4) + bmap(entries)
    # the first bytes of blocks 0 and 1 of the data area
    return img + bytes([0x11]) * 4096 + bytes([0x22]) * 4096


def static():
    return header(4, 4, static=True, disk_size=4 * BLOCK - 3 * SECTOR) + \
        bmap(range(4)) + bytes([0x33]) * 2048


def map_past_end():
    return header(16, 0, bmap=64 * SECTOR, data=128 * SECTOR)


def overlapping():
    entries = [0, 1]
    return header(2, 2, data=SECTOR) + bmap(entries) + bytes([0x44]) * 1024


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'corpus', 'fuzz-vdi')
    os.makedirs(out, exist_ok=True)
    seeds = {
        'dynamic': dynamic(),
        'static': static(),
        'map-past-end': map_past_end(),
        'overlapping': overlapping(),
    }
    for name, img in seeds.items():
        assert len(img) <= 16384, (name, len(img))
        with open(os.path.join(out, name), 'wb') as f:
            f.write(img)


if __name__ == '__main__':
    main()
