#!/usr/bin/env python3
"""Edits a VHDX image in place for the hostile-image cases of
vhdx-interop.sh: each argument is one edit, applied in order.

  OFFSET:FMT=VALUE   pack VALUE (int, or bytes as hex after 'x') with
                     struct format FMT ('<I', '<Q', '4s', ...) at OFFSET
  crc:OFFSET:SIZE    recompute the CRC-32C at OFFSET+4 of SIZE bytes
                     from OFFSET, as VHDX headers, region tables and log
                     entries carry it
  copy:FROM:TO:LEN   copy LEN bytes from FROM to TO
  trunc:SIZE         truncate the file to SIZE bytes

Offsets and sizes are integers in any base Python accepts (0x10000).
"""
import struct
import sys

TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def main():
    path = sys.argv[1]
    with open(path, 'rb') as f:
        d = bytearray(f.read())
    for edit in sys.argv[2:]:
        if edit.startswith('crc:'):
            off, size = (int(x, 0) for x in edit[4:].split(':'))
            d[off + 4:off + 8] = b'\0' * 4
            d[off + 4:off + 8] = struct.pack('<I', crc32c(d[off:off + size]))
        elif edit.startswith('copy:'):
            src, dst, n = (int(x, 0) for x in edit[5:].split(':'))
            d[dst:dst + n] = d[src:src + n]
        elif edit.startswith('trunc:'):
            del d[int(edit[6:], 0):]
        else:
            where, value = edit.split('=', 1)
            off, fmt = where.split(':', 1)
            off = int(off, 0)
            v = bytes.fromhex(value[1:]) if value.startswith('x') \
                else int(value, 0)
            packed = struct.pack(fmt, v)
            if len(d) < off + len(packed):
                d.extend(b'\0' * (off + len(packed) - len(d)))
            d[off:off + len(packed)] = packed
    with open(path, 'wb') as f:
        f.write(d)


main()
