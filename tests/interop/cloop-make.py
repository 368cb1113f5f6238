#!/usr/bin/env python3
"""Writes a cloop version 2.0 image, as create_compressed_fs lays it out.

    cloop-make.py OUT BLOCK_SIZE N_BLOCKS

Block 1 is all zeroes; every other block i holds, in its 512-byte sector
s, the byte (7 * i + s) % 251, so that a read that takes the wrong block
or the wrong place in one shows.  Blocks are zlib streams at level 9, so
their lengths differ.
"""
import struct
import sys
import zlib

PREAMBLE = (b"#!/bin/sh\n#V2.0 Format\n"
            b"modprobe cloop file=$0 && mount -r -t iso9660 /dev/cloop $1\n"
            b"exit $?\n").ljust(128, b"\0")


def block(index, size):
    if index == 1:
        return bytes(size)
    return b"".join(bytes([(7 * index + s) % 251]) * 512
                    for s in range(size // 512))


def main():
    out, size, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    streams = [zlib.compress(block(i, size), 9) for i in range(count)]
    offsets = [len(PREAMBLE) + 8 + 8 * (count + 1)]
    for s in streams:
        offsets.append(offsets[-1] + len(s))
    with open(out, "wb") as f:
        f.write(PREAMBLE + struct.pack(">II", size, count))
        f.write(b"".join(struct.pack(">Q", o) for o in offsets))
        f.write(b"".join(streams))


if __name__ == "__main__":
    main()
