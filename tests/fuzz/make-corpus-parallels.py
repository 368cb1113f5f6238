#!/usr/bin/env python3
"""Writes the seed images of fuzz-parallels: small Parallels images of
both layouts (entries in clusters, "WithouFreSpacExt"; in sectors,
"WithoutFreeSpace"), 4 KiB clusters, some clusters written; one left in
use, one with a format extension holding a dirty bitmap.
Usage: make-corpus-parallels.py DIR"""
import hashlib
import os
import struct
import sys

CLUSTER, DISK = 4096, 64 * 1024


def extension(at, disk_sectors, tracks):
    """The format extension cluster and a bitmap data cluster after it, at
    file offset @at: one dirty bitmap of 4 KiB granules, granules 1 and 3
    set."""
    bitmap = struct.pack('<Q16sII', disk_sectors, bytes(range(16)), tracks,
                         1) + struct.pack('<Q', (at + CLUSTER) // 512)
    feature = struct.pack('<QQII', 0x20385fae252cb34a, 0, len(bitmap), 0)
    rest = (feature + bitmap).ljust(CLUSTER - 24, b'\0')
    ext = struct.pack('<Q', 0xab234cef23dcea87) + hashlib.md5(rest).digest()
    return ext + rest + bytes([0x0a]).ljust(CLUSTER, b'\0')


def image(old=False, written=(0, 3, 7), inuse=0, ext=False):
    tracks = CLUSTER // 512
    entries = DISK // CLUSTER
    data_off = -(-(64 + 4 * entries) // CLUSTER) * CLUSTER
    magic = b'WithoutFreeSpace' if old else b'WithouFreSpacExt'
    ext_at = data_off + len(written) * CLUSTER
    hdr = magic + struct.pack('<IIIIIQIIIQ', 2, 16, DISK // 512 // 16 // 32,
                              tracks, entries, DISK // 512, inuse,
                              data_off // 512, 0, ext_at // 512 if ext else 0)
    bat = [0] * entries
    body = b''
    for n, cl in enumerate(written):
        at = data_off + n * CLUSTER
        bat[cl] = at // 512 if old else at // CLUSTER
        body += bytes([0x10 + cl]) * CLUSTER
    table = b''.join(struct.pack('<I', e) for e in bat)
    tail = extension(ext_at, DISK // 512, tracks) if ext else b''
    return (hdr + table).ljust(data_off, b'\0') + body + tail


def main():
    out = sys.argv[1]
    seeds = {
        'ext': image(),
        'old': image(old=True),
        'empty': image(written=()),
        'inuse': image(inuse=0x746f6e59),
        'extension': image(written=(2,), ext=True),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
