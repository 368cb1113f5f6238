#!/usr/bin/env python3
"""Writes the seed images of fuzz-bochs: small Bochs growing images
(version 1 and 2 headers), each a 64 KiB disk of 4 KiB extents with
some extents written, some sectors of them written, the others not.
Usage: make-corpus-bochs.py DIR"""
import os
import struct
import sys

EXTENT, BITMAP, DISK = 4096, 512, 64 * 1024


def image(version, written):
    """@written: {extent number: sector bit mask}, stored in that order."""
    catalog = DISK // EXTENT
    hdr = b'Bochs Virtual HD Image'.ljust(32, b'\0')
    hdr += b'Redolog'.ljust(16, b'\0') + b'Growing'.ljust(16, b'\0')
    hdr += struct.pack('<IIIII', version << 16, 512, catalog, BITMAP, EXTENT)
    if version == 2:
        hdr += struct.pack('<IQ', 0, DISK)
    else:
        hdr += struct.pack('<Q', DISK)
    hdr = hdr.ljust(512, b'\0')
    cat = [0xffffffff] * catalog
    body = b''
    for n, (ext, mask) in enumerate(written.items()):
        cat[ext] = n
        bm = bytearray(BITMAP)
        bm[0] = mask
        body += bytes(bm) + bytes([0x10 + ext]) * EXTENT
    return hdr + b''.join(struct.pack('<I', c) for c in cat) + body


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {
        'v1-two-extents': image(1, {1: 0b1001, 5: 0xff}),
        'v2-two-extents': image(2, {1: 0b1001, 5: 0xff}),
        'v2-empty': image(2, {}),
        'v2-last-extent': image(2, {15: 0b10000001, 0: 0x01}),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
