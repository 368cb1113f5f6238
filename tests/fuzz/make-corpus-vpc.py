#!/usr/bin/env python3
"""Writes the seed images of fuzz-vpc: small VHD images laid out as
qemu-img 7.2 lays them out, but for 4 KiB blocks (qemu-img's are 2 MiB,
which would not fit fuzz-vpc's 16 KiB inputs): dynamic disks of 34 KiB
(the CHS geometry 1 x 4 x 17) with some blocks written, their bitmaps
full or partial; one whose creator ("win ") says the size is the byte
count (32 KiB); a differencing one; a fixed disk of 8 KiB.
Usage: make-corpus-vpc.py DIR"""
import os
import struct
import sys

SECTOR, BLOCK, DISK = 512, 4096, 32 * 1024
TIMESTAMP = 0x32a7ce24          # a fixed time: seeds are reproducible


def checksum(b):
    return ~sum(b) & 0xffffffff


def footer(size, disk_type, creator=b'qemu', data_offset=512,
           geometry=(1, 4, 17)):
    f = bytearray(512)
    struct.pack_into('>8sIIQI4sI4sQQHBBI', f, 0, b'conectix', 2, 0x10000,
                     data_offset, TIMESTAMP, creator, 0x50003, b'Wi2k',
                     size, size, *geometry, disk_type)
    f[68:84] = bytes(range(16))
    struct.pack_into('>I', f, 64, checksum(f))
    return bytes(f)


def dynamic(written, disk_type=3, creator=b'qemu', bitmap_byte=0xff):
    """@written: block numbers, allocated in that order."""
    size = DISK if creator != b'qemu' else 1 * 4 * 17 * SECTOR
    entries = -(-size // BLOCK)
    foot = footer(size, disk_type, creator)
    hdr = bytearray(1024)
    struct.pack_into('>8sQQIII', hdr, 0, b'cxsparse', 0xffffffffffffffff,
                     1536, 0x10000, entries, BLOCK)
    struct.pack_into('>I', hdr, 36, checksum(hdr))
    bat_len = -(-entries * 4 // SECTOR) * SECTOR
    bat = [0xffffffff] * entries
    body = b''
    at = 1536 + bat_len
    for n in written:
        bat[n] = (at + len(body)) // SECTOR
        body += bytes([bitmap_byte]) * SECTOR + bytes([0x10 + n]) * BLOCK
    batb = b''.join(struct.pack('>I', e) for e in bat).ljust(bat_len,
                                                              b'\xff')
    return foot + bytes(hdr) + batb + body + foot


def fixed():
    size = 8192
    data = bytes(range(256)) * (size // 256)
    return data + footer(size, 2, creator=b'win ',
                         data_offset=0xffffffffffffffff)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {
        'dynamic-empty': dynamic([]),
        'dynamic-two-blocks': dynamic([2, 0]),
        'dynamic-partial-bitmap': dynamic([1], bitmap_byte=0x0f),
        'dynamic-size-from-bytes': dynamic([7], creator=b'win '),
        'differencing': dynamic([3], disk_type=4),
        'fixed': fixed(),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
