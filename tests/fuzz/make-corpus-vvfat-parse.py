#!/usr/bin/env python3
"""Writes the seeds of fuzz-vvfat-parse: small FAT16, FAT12 and FAT32
volumes in its layout (one 512-byte FAT, 16 root entries, 8 KiB clusters
from byte 1024; FAT32: the root the chain from cluster 2, at 512): a
label, an 8.3 file, a long-named file of two clusters, a subdirectory
with "." and ".." and a file, a deleted entry.
Usage: make-corpus-vvfat-parse.py DIR"""
import os
import struct
import sys

CLUSTER = 8192
POS = (1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30)


def short(name, attr, cluster, size):
    return name.encode() + bytes([attr]) + bytes(14) + \
        struct.pack('<HI', cluster, size)


def checksum(sn):
    s = 0
    for ch in sn.encode():
        s = (((s & 1) << 7) + (s >> 1) + ch) & 0xff
    return s


def lfn(name, sn):
    e = bytearray(32)
    e[0] = 0x41
    e[11] = 0x0f
    e[13] = checksum(sn)
    for i, p in enumerate(POS):
        v = ord(name[i]) if i < len(name) else 0 if i == len(name) \
            else 0xffff
        struct.pack_into('<H', e, p, v)
    return bytes(e)


def entries(sub, long_name, a):
    """The root's and SUB's entries, given the first clusters of SUB, the
    long-named file and A.TXT."""
    root = short('QEMU VVFAT ', 0x08, 0, 0) + \
        short('SUB        ', 0x10, sub, 0) + \
        lfn('Long Name', 'LONGNA~1   ') + \
        short('LONGNA~1   ', 0x20, long_name, 9000) + \
        b'\xe5' + short('GONE    TXT', 0x20, 9, 1)[1:] + \
        short('A       TXT', 0x20, a, 100)
    return root, short('.          ', 0x10, sub, 0) + \
        short('..         ', 0x10, 0, 0) + \
        short('X          ', 0x20, 0, 0)


def volume(fat_type):
    fat = bytearray(512)

    def setfat(c, v):
        if fat_type == 16:
            struct.pack_into('<H', fat, 2 * c, v)
            return
        o = c * 3 // 2
        if c & 1:
            fat[o] = (fat[o] & 0x0f) | ((v << 4) & 0xf0)
            fat[o + 1] = (v >> 4) & 0xff
        else:
            fat[o] = v & 0xff
            fat[o + 1] = (fat[o + 1] & 0xf0) | ((v >> 8) & 0x0f)
    # FAT16's end of chain is 0xfff8 and up: 0xfff is a cluster there
    eoc = 0xffff if fat_type == 16 else 0xfff
    # the first byte picks the type: even FAT16, odd FAT12
    setfat(0, 0xfff8 if fat_type == 16 else 0xff9)
    setfat(1, eoc)
    setfat(2, eoc)                      # SUB
    setfat(3, 4)                        # the long-named file
    setfat(4, eoc)
    setfat(5, eoc)                      # A.TXT
    root, sub = entries(2, 3, 5)
    root += bytes(512 - len(root))
    return bytes(fat) + root + sub + bytes(64)


def volume32():
    """FAT32: no fixed root, the root is the chain from cluster 2, which
    starts right after the FAT (byte 512)."""
    fat = bytearray(512)
    # the first byte picks the type: bit 1 set, bit 0 clear
    for c, v in ((0, 0x0ffffffa), (1, 0x0fffffff), (2, 0x0fffffff),
                 (3, 0x0fffffff), (4, 5), (5, 0x0fffffff),
                 (6, 0x0fffffff)):
        struct.pack_into('<I', fat, 4 * c, v)
    root, sub = entries(3, 4, 6)
    root += bytes(CLUSTER - len(root))
    return bytes(fat) + root + sub + bytes(64)


for name, t in (('fat16', 16), ('fat12', 12)):
    with open(os.path.join(sys.argv[1], name), 'wb') as f:
        f.write(volume(t))
with open(os.path.join(sys.argv[1], 'fat32'), 'wb') as f:
    f.write(volume32())
