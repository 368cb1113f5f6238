#!/usr/bin/env python3
"""Writes an Apple disk image (UDIF) as hdiutil lays it out, and the raw
disk it holds.

    dmg-make.py OUT.dmg OUT.raw [CHUNK...]

A CHUNK is TYPE:SECTORS, the disk's chunks in order: zero, ignore, raw,
zlib, bzip2, comment (no sectors), lzfse (the payload is not LZFSE: the
type alone is what a reader must refuse), or gap (sectors that no chunk
covers, which a read fails on).  Every second chunk starts a new mish
block (partition).  Data chunks hold, in their sector s, the byte
(s * 7 + 3) % 251, so that a read from the wrong place shows.  The raw
file is what a reader must return (zeroes for a gap).  Default: zlib:8
zero:4 raw:3 bzip2:5 ignore:2 zlib:1.
"""
import base64
import bz2
import struct
import sys
import zlib

TYPES = {'zero': 0, 'raw': 1, 'ignore': 2, 'zlib': 0x80000005,
         'bzip2': 0x80000006, 'lzfse': 0x80000007, 'comment': 0x7ffffffe}


def sector_data(first, count):
    return b''.join(bytes([(s * 7 + 3) % 251]) * 512
                    for s in range(first, first + count))


def mish(first, count, chunks):
    """A mish block of partition sectors [first, first + count)."""
    head = struct.pack('>IIQQQIIII', 0x6d697368, 1, first, count, 0, 0, 0, 0,
                       0)
    head = head.ljust(200, b'\0') + struct.pack('>I', len(chunks) + 1)
    body = b''.join(struct.pack('>IIQQQQ', t, 0, rel, n, off, ln)
                    for t, rel, n, off, ln in chunks)
    end = struct.pack('>IIQQQQ', 0xffffffff, 0, count, 0, 0, 0)
    return head + body + end


def main():
    out, raw_out = sys.argv[1], sys.argv[2]
    specs = sys.argv[3:] or ['zlib:8', 'zero:4', 'raw:3', 'bzip2:5',
                             'ignore:2', 'zlib:1']
    data, disk, blocks, part = b'', b'', [], []
    sector, part_first = 0, 0
    for i, spec in enumerate(specs):
        kind, _, n = spec.partition(':')
        n = int(n or 0)
        if kind == 'gap':
            disk += bytes(512 * n)
            sector += n
            continue
        payload = sector_data(sector, n)
        if kind == 'zlib':
            stored = zlib.compress(payload, 9)
        elif kind == 'bzip2':
            stored = bz2.compress(payload)
        elif kind in ('raw', 'lzfse'):
            stored = payload
        else:
            stored, payload = b'', bytes(512 * n)
        part.append((TYPES[kind], sector - part_first, n, len(data),
                     len(stored)))
        data += stored
        disk += payload
        sector += n
        if i % 2 == 1:
            blocks.append(mish(part_first, sector - part_first, part))
            part, part_first = [], sector
    if part:
        blocks.append(mish(part_first, sector - part_first, part))
    items = ''.join(
        '<dict><key>Name</key><string>part %d</string><key>Data</key>'
        '<data>\n%s\n</data></dict>\n' % (i, base64.encodebytes(b).decode())
        for i, b in enumerate(blocks))
    plist = ('<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0">'
             '<dict><key>resource-fork</key><dict><key>blkx</key><array>\n'
             + items + '</array></dict></dict></plist>\n').encode()
    koly = struct.pack('>IIII', 0x6b6f6c79, 4, 512, 1)
    koly += struct.pack('>QQQ', 0, 0, len(data))
    koly = koly.ljust(0xd8, b'\0') + struct.pack('>QQ', len(data), len(plist))
    # the image variant and the disk's sectors, which readers size it by
    koly = koly.ljust(0x1e8, b'\0') + struct.pack('>IQ', 1, sector)
    koly = koly.ljust(512, b'\0')
    with open(out, 'wb') as f:
        f.write(data + plist + koly)
    with open(raw_out, 'wb') as f:
        f.write(disk)


if __name__ == '__main__':
    main()
