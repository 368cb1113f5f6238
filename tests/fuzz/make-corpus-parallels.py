#!/usr/bin/env python3
"""Writes the seed images of fuzz-parallels: small Parallels images of
both layouts (entries in clusters, "WithouFreSpacExt"; in sectors,
"WithoutFreeSpace"), 4 KiB clusters, some clusters written; one left in
use, one with a format extension.
Usage: make-corpus-parallels.py DIR"""
import os
import struct
import sys

CLUSTER, DISK = 4096, 64 * 1024


def image(old=False, written=(0, 3, 7), inuse=0, ext_off=0):
    tracks = CLUSTER // 512
    entries = DISK // CLUSTER
    data_off = -(-(64 + 4 * entries) // CLUSTER) * CLUSTER
    magic = b'WithoutFreeSpace' if old else b'WithouFreSpacExt'
    hdr = magic + struct.pack('<IIIIIQIIIQ', 2, 16, DISK // 512 // 16 // 32,
                              tracks, entries, DISK // 512, inuse,
                              data_off // 512, 0, ext_off)
    bat = [0] * entries
    body = b''
    for n, cl in enumerate(written):
        at = data_off + n * CLUSTER
        bat[cl] = at // 512 if old else at // CLUSTER
        body += bytes([0x10 + cl]) * CLUSTER
    table = b''.join(struct.pack('<I', e) for e in bat)
    head = bytearray((hdr + table).ljust(data_off, b'\0'))
    if ext_off:
        # the extension's magic, then an empty checksum and no feature
        head[ext_off * 512:ext_off * 512 + 8] = struct.pack(
            '<Q', 0xab234cef23dcea87)
    return bytes(head) + body


def main():
    out = sys.argv[1]
    seeds = {
        'ext': image(),
        'old': image(old=True),
        'empty': image(written=()),
        'inuse': image(inuse=0x746f6e59),
        'extension': image(ext_off=1),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
