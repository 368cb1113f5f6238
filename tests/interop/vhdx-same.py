#!/usr/bin/env python3
"""Compares two VHDX images byte for byte but for what QEMU makes random
or its own: the creator string of the file identifier, the headers'
sequence numbers, GUIDs and checksums (their other fields must match,
and the sequence numbers of each file must be in the same order), the
page 83 data item, and the log's GUIDs and checksums (entries of the same
place, length and descriptors).  Exits 0 when the same, else 1 with the
first difference.

  vhdx-same.py A B
"""
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


def masked(d, meta, lo, ll):
    d = bytearray(d)
    d[8:8 + 512] = b'\0' * 512                      # creator
    for h in (64 * 1024, 128 * 1024):
        d[h + 4:h + 64] = b'\0' * 60                # crc, seq, GUIDs
    d[meta + 64 * 1024 + 16:meta + 64 * 1024 + 32] = b'\0' * 16  # page 83
    for p in range(lo, min(lo + ll, len(d)), 4096):
        if d[p:p + 4] == b'loge':
            d[p + 4:p + 8] = b'\0' * 4
            d[p + 32:p + 48] = b'\0' * 16
    return d


def main():
    a, b = (open(p, 'rb') for p in sys.argv[1:3])
    ha, hb = a.read(8 * MIB), b.read(8 * MIB)
    la, lb = layout(ha), layout(hb)
    if la != lb:
        print('layouts differ: %s vs %s' % (la, lb))
        return 1
    meta, lo, ll, _ = la
    a.seek(0)
    b.seek(0)
    pos = 0
    while True:
        ca, cb = a.read(64 * MIB), b.read(64 * MIB)
        if not ca and not cb:
            return 0
        if pos == 0 or pos <= lo + ll or pos <= meta + MIB:
            # the structures are all in the first chunks
            ca = bytes(masked(ha[:0] + ca, meta - pos, lo - pos, ll)) \
                if pos == 0 else ca
            cb = bytes(masked(hb[:0] + cb, meta - pos, lo - pos, ll)) \
                if pos == 0 else cb
        if ca != cb:
            i = next((k for k in range(min(len(ca), len(cb)))
                      if ca[k] != cb[k]), min(len(ca), len(cb)))
            print('differ at byte %d (lengths %d, %d)'
                  % (pos + i, len(ca), len(cb)))
            return 1
        pos += len(ca)


sys.exit(main())
