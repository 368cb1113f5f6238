#!/usr/bin/env python3
"""Compares two VHDX images byte for byte but for what QEMU makes random
or its own: the creator string of the file identifier, the headers'
sequence numbers, GUIDs and checksums (their other fields must match,
and the sequence numbers of each file must be in the same order), the
page 83 data item, and the log's GUIDs and checksums and the padding
after an entry's descriptors, which QEMU leaves unset (entries of the
same place, length and descriptors).  Exits 0 when the same, else 1 with
the first difference.

  vhdx-same.py A B
"""
import errno
import os
import struct
import sys

MIB = 1 << 20


def layout(d):
    """(metadata offset, log offset, log length, seq order) of image d."""
    regions = {}
    n = struct.unpack_from('<I', d, 192 * 1024 + 8)[0]
    for i in range(min(n, 2047)):
        g, off, length, _ = struct.unpack_from('<16sQII', d,
                                                192 * 1024 + 16 + 32 * i)
        regions[g[:2]] = (off, length)
    s1 = struct.unpack_from('<Q', d, 64 * 1024 + 8)[0]
    s2 = struct.unpack_from('<Q', d, 128 * 1024 + 8)[0]
    ll, lo = struct.unpack_from('<IQ', d, 64 * 1024 + 68)
    return regions[b'\x06\xa2'][0], lo, ll, s1 < s2


def mask_ranges(f, meta, lo, ll):
    """The byte ranges of file f that may differ (absolute offsets)."""
    ranges = [(8, 8 + 512)]                          # creator
    for h in (64 * 1024, 128 * 1024):
        ranges.append((h + 4, h + 64))              # crc, seq, GUIDs
    ranges.append((meta + 64 * 1024 + 16, meta + 64 * 1024 + 32))  # page 83
    f.seek(lo)
    log = f.read(ll)
    for p in range(0, len(log), 4096):
        if log[p:p + 4] == b'loge':
            ranges += [(lo + p + 4, lo + p + 8), (lo + p + 32, lo + p + 48)]
            # the padding after the descriptors, up to the next 4 KiB:
            # QEMU leaves whatever its buffer held there (it differs from
            # one qemu-io run to the next)
            n = struct.unpack_from('<I', log, p + 24)[0]
            end = 64 + 32 * min(n, 1 << 20)
            ranges.append((lo + p + end, lo + p + (end + 4095) // 4096 * 4096))
    return ranges


def data_extents(f):
    """The (start, end) ranges of file f that may hold data: where neither
    SEEK_DATA nor SEEK_HOLE says it is a hole (all of it if the file
    system cannot tell)."""
    fd = f.fileno()
    size = os.fstat(fd).st_size
    out, pos = [], 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:      # only a hole is left
                break
            return [(0, size)]
        end = os.lseek(fd, start, os.SEEK_HOLE)
        out.append((start, end))
        pos = end
    return out


def chunks(extents, step):
    """The step-aligned chunks (start offsets) that meet any extent."""
    seen = set()
    for start, end in extents:
        for c in range(start // step * step, end, step):
            if c not in seen:
                seen.add(c)
                yield c


def main():
    a, b = (open(p, 'rb') for p in sys.argv[1:3])
    la, lb = layout(a.read(8 * MIB)), layout(b.read(8 * MIB))
    if la != lb:
        print('layouts differ: %s vs %s' % (la, lb))
        return 1
    size_a, size_b = (os.fstat(f.fileno()).st_size for f in (a, b))
    if size_a != size_b:
        print('lengths differ: %d, %d' % (size_a, size_b))
        return 1
    ranges = mask_ranges(a, *la[:3]) + mask_ranges(b, *lb[:3])
    # what is a hole in both files reads as zeroes in both: only the
    # chunks where either has data are read (a fixed 5 GiB image is
    # mostly holes)
    step = 64 * MIB
    for pos in sorted(chunks(data_extents(a) + data_extents(b), step)):
        a.seek(pos)
        b.seek(pos)
        ca, cb = bytearray(a.read(step)), bytearray(b.read(step))
        for start, end in ranges:
            for c in (ca, cb):
                s, e = max(start - pos, 0), min(end - pos, len(c))
                if s < e:
                    c[s:e] = bytes(e - s)
        if ca != cb:
            i = next(k for k in range(len(ca)) if ca[k] != cb[k])
            print('differ at byte %d' % (pos + i))
            return 1
    return 0


sys.exit(main())
