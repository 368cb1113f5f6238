#!/usr/bin/env python3
"""Writes the seed images of fuzz-qed: QED images laid out as qemu-img
create -f qed and qemu-io write them (header cluster, L1 table, then L2
tables and data clusters in allocation order), with 4 KiB clusters and
tables of two clusters so that each fits fuzz-qed's longest input
(32 KiB, tests/fuzz/run.sh), that reach each part of block/qed*.c: an
empty image; one with an L2 table, data clusters, a zero cluster and the
need-check flag (repaired on a read-write open); one naming a raw
backing file; one whose tables hold invalid, repeated and unaligned
offsets, with a leaked cluster; and one of a single-cluster table, which
QEMU refuses.

Usage: make-corpus-qed.py [DIR]   (default: corpus/fuzz-qed)"""

import os
import struct
import sys

MAGIC = 0x00444551
CLUSTER = 4096
TABLE = 2                       # clusters of a table
ENTRIES = CLUSTER * TABLE // 8
F_BACKING, F_NEED_CHECK, F_RAW = 1, 2, 4


def header(size=1 << 20, features=0, table=TABLE, name=b''):
    h = struct.pack('<IIIIQQQQQII', MAGIC, CLUSTER, table, 1, features, 0,
                    0, CLUSTER, size, 64 if name else 0, len(name))
    return (h + name).ljust(CLUSTER, b'\0')


def table(entries):
    t = bytearray(ENTRIES * 8)
    for i, e in entries.items():
        struct.pack_into('<Q', t, i * 8, e)
    return bytes(t)


def image(l1, l2=None, data=(), **kw):
    out = header(**kw) + table(l1)
    if l2 is not None:
        out += table(l2)
    for d in data:
        out += d.ljust(CLUSTER, b'\0')
    return out


L2_AT = CLUSTER * (1 + TABLE)           # 0x3000
DATA_AT = L2_AT + CLUSTER * TABLE       # 0x5000

SEEDS = {
    'empty': image({}),
    'allocated': image({0: L2_AT}, {0: DATA_AT, 1: 1, 3: DATA_AT + CLUSTER},
                       [b'\x11' * 512, b'\x22' * 100],
                       features=F_NEED_CHECK),
    'backing': image({0: L2_AT}, {2: DATA_AT}, [b'\x33' * 64],
                     features=F_BACKING | F_RAW, name=b'base.raw'),
    'corrupt': image({0: L2_AT, 1: 3, 2: DATA_AT, 5: 0x100000},
                     {0: DATA_AT, 1: DATA_AT, 2: 0x7fff000, 3: DATA_AT + 1,
                      4: 1, 6: DATA_AT + CLUSTER},
                     [b'\x44', b'\x55', b'\x66'], features=F_NEED_CHECK),
    'one-cluster-table': header(table=1) + bytes(CLUSTER),
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.join(here, 'corpus', 'fuzz-qed')
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        assert len(data) <= 32768, name
        # the last 8 bytes place fuzz-qed's middle read: leave them
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
