#!/usr/bin/env python3
"""Writes the seed images of fuzz-qcow: qcow (version 1) images laid out
as qemu-img writes them (header, backing name, L1 table, then L2 tables
and clusters appended) that reach each part of block/qcow1.c and
block/qcow1-write.c: an image with a data cluster, a compressed cluster
(QEMU's raw deflate, 4 KiB window) and an unallocated one; an image with
512-byte clusters naming a backing file; an L1 table past the end of the
file; a disk of 2^50 bytes; an encrypted header (refused without a
secret).  Every seed stays within fuzz-qcow's longest input (16 KiB,
tests/fuzz/run.sh).

Usage: make-corpus-qcow.py [DIR]   (default: corpus/fuzz-qcow)"""

import os
import struct
import sys
import zlib

MAGIC = 0x514649fb
COMPRESSED = 1 << 63


def header(size, cluster_bits, l2_bits, l1_offset, backing=b'', crypt=0):
    h = struct.pack('>IIQIIQBBHIQ', MAGIC, 1, 48 if backing else 0,
                    len(backing), 0, size, cluster_bits, l2_bits, 0, crypt,
                    l1_offset)
    return h + backing


def deflate(data):
    c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -12, 9)
    return c.compress(data) + c.flush()


def put(img, offset, data):
    if len(img) < offset + len(data):
        img.extend(bytes(offset + len(data) - len(img)))
    img[offset:offset + len(data)] = data


def mixed():
    """4 KiB clusters, 2 MiB: L1 at 48, L2 at 512, cluster 0 at 8192,
    cluster 1 compressed right after the L2 table, cluster 2 none."""
    img = bytearray(header(2 << 20, 12, 9, 48))
    put(img, 48, struct.pack('>Q', 512))
    comp = deflate(bytes([0x22]) * 4096)
    l2 = struct.pack('>QQ', 8192,
                     COMPRESSED | len(comp) << (63 - 12) | 4608)
    put(img, 512, l2)
    put(img, 4608, comp)
    put(img, 8192, bytes([0x11]) * 4096)
    return bytes(img)


def backing():
    """512-byte clusters and 4096-entry L2 tables, as with a backing file:
    cluster 0 at 512, the L2 table at 1024, most of it past the end of
    the input (reading as zeroes)."""
    img = bytearray(header(1 << 20, 9, 12, 56, b'base.raw'))
    put(img, 56, struct.pack('>Q', 1024))
    put(img, 512, bytes([0x33]) * 512)
    put(img, 1024, struct.pack('>Q', 512))
    return bytes(img)


def l1_past_end():
    return header(4 << 20, 12, 9, 1 << 40)


def huge():
    """2^50 bytes of 64 KiB clusters: 2^16 L1 entries, none in the file."""
    return header(1 << 50, 16, 13, 48)


def encrypted():
    img = bytearray(header(1 << 20, 12, 9, 48, crypt=1))
    put(img, 48, bytes(512))
    return bytes(img)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'corpus', 'fuzz-qcow')
    os.makedirs(out, exist_ok=True)
    for name, make in (('mixed', mixed), ('backing', backing),
                       ('l1-past-end', l1_past_end), ('huge', huge),
                       ('encrypted', encrypted)):
        data = make()
        assert len(data) <= 16384, name
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
