#!/usr/bin/env python3
"""Writes the seed inputs of fuzz-vhdx: VHDX images in the harness's
compact shape (the first bytes of each structure, in the order of
SEGMENTS, a byte of checksum-fixing flags, then the data area at 4 MiB),
with QEMU's layout: log at 1 MiB, BAT at 2 MiB, metadata at 3 MiB.
Seeds: 1 MiB blocks with two blocks present (4 and 5 MiB), zero and
absent blocks; 8 MiB blocks with none present; a dirty log (the header
names the GUID of a valid log entry), opened read-only and as check -r
opens it (which replays it); a second header with a higher sequence
number; each of 1 MiB blocks, the dirty log and the odd size again
opened read-write and written.  Usage: make-corpus-vhdx.py DIR
       make-corpus-vhdx.py --expand INPUT IMAGE  (the image fuzz-vhdx
       makes of INPUT, to try it with qemu-img)"""
import os
import struct
import sys

# (file offset, length): fuzz-vhdx.c's vhdx_fuzz_segments
SEGMENTS = [(0x000000, 0x10), (0x010000, 0x100), (0x020000, 0x100),
            (0x030000, 0x200), (0x100000, 0x2000), (0x200000, 0x200),
            (0x300000, 0x200), (0x310000, 0x100)]
FIX_ALL = 7
CHECK_OPEN = 8      # open as qemu-img check -r does: replays the log
WRITE = 16          # open read-write, write at three places, read back

BAT_GUID = bytes.fromhex('6677c22d23f600429d64115e9bfd4a08')
METADATA_GUID = bytes.fromhex('06a27c8b90479a4bb8fe575f050f886e')
ITEMS = [  # (GUID, offset in the items, flags)
    (bytes.fromhex('3767a1ca36fa434db3b633f0aa44e76b'), 0x10000, 4),
    (bytes.fromhex('2442a52f1bcd7648b2115dbed83bf4b8'), 0x10008, 6),
    (bytes.fromhex('ab12cabee6b2234593efc309e000c746'), 0x10010, 6),
    (bytes.fromhex('1dbf41816fa90947ba47f233a8faab5f'), 0x10020, 6),
    (bytes.fromhex('c748a3cd5d4471449cc9e9885251c556'), 0x10024, 6),
]
LOG_GUID = bytes(range(1, 17))


def header(seq, log_guid=bytes(16)):
    return (b'head' + bytes(4) + struct.pack('<Q', seq) + bytes(32) +
            log_guid + struct.pack('<HHIQ', 0, 1, 0x100000, 0x100000))


def region_table():
    return (b'regi' + bytes(4) + struct.pack('<II', 2, 0) +
            BAT_GUID + struct.pack('<QII', 0x200000, 0x100000, 1) +
            METADATA_GUID + struct.pack('<QII', 0x300000, 0x100000, 1))


def metadata(block_size, disk_size):
    table = b'metadata' + struct.pack('<HH', 0, len(ITEMS)) + bytes(20)
    for guid, off, flags in ITEMS:
        table += guid + struct.pack('<IIII', off, 8, flags, 0)
    items = struct.pack('<IIQ', block_size, 0, disk_size) + bytes(16)
    items += struct.pack('<II', 512, 4096)
    return table, items


def log_entry(guid):
    """An 8 KiB entry: a zero descriptor over the block at 4 MiB and a
    data descriptor that rewrites the BAT's first sector (blocks 0 and 1
    at 5 and 4 MiB), then that data sector; its CRC is fixed by the
    harness (flag 4)."""
    hdr = b'loge' + bytes(4) + struct.pack('<IIQII', 8192, 0, 1, 2, 0)
    hdr += guid + struct.pack('<QQ', 0x600000, 0x600000)
    zero = b'zero' + bytes(4) + struct.pack('<QQQ', 0x100000, 0x400000, 1)
    # blocks 0 and 1 swapped; bytes past the BAT's 8 entries (unused)
    # make the whole sector count, the descriptor's trailing bytes too
    bat = struct.pack('<QQ', 0x500006, 0x400006).ljust(4080, b'\0')
    bat += bytes(range(0xa0, 0xb0))
    desc = b'desc' + bat[-4:] + bat[:8] + struct.pack('<QQ', 0x200000, 1)
    data = b'data' + struct.pack('<I', 0) + bat[8:-4] + struct.pack('<I', 1)
    return (hdr + zero + desc).ljust(4096, b'\0') + data


def seed(block_size, disk_size, bat, h1, h2, log=b'', data=b'', flags=FIX_ALL):
    table, items = metadata(block_size, disk_size)
    parts = [b'vhdxfile', h1, h2, region_table(), log,
             b''.join(struct.pack('<Q', e) for e in bat), table, items]
    out = b''
    for (_, length), part in zip(SEGMENTS, parts):
        out += part[:length].ljust(length, b'\0')
    return out + bytes([flags]) + data


TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def fix_crc(img, at, length):
    img[at + 4:at + 8] = bytes(4)
    img[at + 4:at + 8] = struct.pack('<I', crc32c(img[at:at + length]))


def expand(blob):
    """fuzz-vhdx.c's image of the input @blob."""
    img = bytearray(6 << 20)
    used = 0
    for off, length in SEGMENTS:
        part = blob[used:used + length]
        img[off:off + len(part)] = part
        used += len(part)
    flags = blob[used] if used < len(blob) else 0
    tail = blob[used + 1:][:2 << 20]
    img[4 << 20:(4 << 20) + len(tail)] = tail
    if flags & 1:
        fix_crc(img, 0x10000, 4096)
        fix_crc(img, 0x20000, 4096)
    if flags & 2:
        fix_crc(img, 0x30000, 65536)
    if flags & 4:
        length = struct.unpack_from('<I', img, 0x100008)[0]
        fix_crc(img, 0x100000, min(length, 0x100000))
    return bytes(img)


def main():
    if sys.argv[1] == '--expand':
        with open(sys.argv[2], 'rb') as f:
            blob = f.read()
        with open(sys.argv[3], 'wb') as f:
            f.write(expand(blob))
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    mib = 1 << 20
    data = bytes([0x5a]) * 4096 + struct.pack('<Q', 0x1000)
    seeds = {
        'blocks-1m': seed(mib, 8 * mib, [0x400006, 2, 0, 0x500006, 3, 1],
                          header(1), header(2), data=data),
        'blocks-8m': seed(8 * mib, 64 * mib, [0, 2, 0, 0, 0, 0, 0, 0],
                          header(5), header(4)),
        'dirty-log': seed(mib, 8 * mib, [0x400006, 2],
                          header(1, LOG_GUID), header(0),
                          log=log_entry(LOG_GUID), data=data),
        'dirty-log-replayed': seed(mib, 8 * mib, [0x400006, 2],
                                   header(1, LOG_GUID), header(0),
                                   log=log_entry(LOG_GUID), data=data,
                                   flags=FIX_ALL | CHECK_OPEN),
        'odd-size': seed(mib, 3 * mib + 1536, [0x400006, 0, 0, 0x500006],
                         header(2), header(1), data=data),
    }
    seeds['write-blocks-1m'] = seed(
        mib, 8 * mib, [0x400006, 2, 0, 0x500006, 3, 1], header(1),
        header(2), data=data, flags=FIX_ALL | WRITE)
    seeds['write-dirty-log'] = seed(
        mib, 8 * mib, [0x400006, 2], header(1, LOG_GUID), header(0),
        log=log_entry(LOG_GUID), data=data, flags=FIX_ALL | WRITE)
    seeds['write-odd-size'] = seed(
        mib, 3 * mib + 1536, [0x400006, 0, 0, 0x500006], header(2),
        header(1), data=data, flags=FIX_ALL | WRITE)
    for name, blob in seeds.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(blob)


if __name__ == '__main__':
    main()
