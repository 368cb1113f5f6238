#!/usr/bin/env python3
"""Writes an Apple disk image (UDIF) as hdiutil lays it out, and the raw
disk it holds.

    dmg-make.py [--tables=plist|rsrc|both] OUT.dmg OUT.raw [CHUNK...]

A CHUNK is TYPE:SECTORS, the disk's chunks in order: zero, ignore, raw,
zlib, bzip2, comment (no sectors), lzfse (the payload is not LZFSE: the
type alone is what a reader must refuse), or gap (sectors that no chunk
covers, which a read fails on).  Every second chunk starts a new mish
block (partition).  Data chunks hold, in their sector s, the byte
(s * 7 + 3) % 251, so that a read from the wrong place shows.  The raw
file is what a reader must return (zeroes for a gap).  Default: zlib:8
zero:4 raw:3 bzip2:5 ignore:2 zlib:1.

--tables says where the mish blocks go: the XML property list (plist, the
default, as hdiutil writes since Mac OS X 10.2), a classic resource fork
of 'blkx' resources the trailer points to and no property list (rsrc, as
older images), or both.
"""
import base64
import bz2
import struct
import sys
import zlib

TYPES = {'zero': 0, 'raw': 1, 'ignore': 2, 'zlib': 0x80000005,
         'bzip2': 0x80000006, 'lzfse': 0x80000007, 'comment': 0x7ffffffe}


def sector_data(first, count):
    return b''.join(bytes([(s * 7 + 3) % 251]) * 512
                    for s in range(first, first + count))


def mish(first, count, chunks):
    """A mish block of partition sectors [first, first + count)."""
    head = struct.pack('>IIQQQIIII', 0x6d697368, 1, first, count, 0, 0, 0, 0,
                       0)
    head = head.ljust(200, b'\0') + struct.pack('>I', len(chunks) + 1)
    body = b''.join(struct.pack('>IIQQQQ', t, 0, rel, n, off, ln)
                    for t, rel, n, off, ln in chunks)
    end = struct.pack('>IIQQQQ', 0xffffffff, 0, count, 0, 0, 0)
    return head + body + end


def resource_fork(resources):
    """A classic Resource Manager fork ("Inside Macintosh: More Macintosh
    Toolbox", 1-121): RESOURCES is a list of (type, id, name, data)."""
    data, names, refs = b'', b'', {}
    for rtype, rid, name, body in resources:
        if name is None:
            name_off = 0xffff
        else:
            name_off = len(names)
            names += bytes([len(name)]) + name
        refs.setdefault(rtype, []).append(
            struct.pack('>hHI', rid, name_off, len(data)) + bytes(4))
        data += struct.pack('>I', len(body)) + body
    types = list(refs)
    type_list = struct.pack('>H', len(types) - 1)
    ref_lists, at = b'', 2 + 8 * len(types)
    for t in types:
        type_list += struct.pack('>4sHH', t, len(refs[t]) - 1,
                                 at + len(ref_lists))
        ref_lists += b''.join(refs[t])
    # map: a copy of the header, next map handle, file reference number,
    # attributes, then the type and name lists' offsets from the map
    head_len = 16 + 4 + 2 + 2 + 2 + 2
    type_at = head_len
    names_at = type_at + len(type_list) + len(ref_lists)
    rmap = struct.pack('>16sIHHHH', bytes(16), 0, 0, 0, type_at, names_at)
    rmap += type_list + ref_lists + names
    data_at = 256
    header = struct.pack('>IIII', data_at, data_at + len(data), len(data),
                         len(rmap))
    return header.ljust(data_at, b'\0') + data + rmap


def main():
    args = sys.argv[1:]
    tables = 'plist'
    if args and args[0].startswith('--tables='):
        tables = args.pop(0).split('=', 1)[1]
    out, raw_out = args[0], args[1]
    specs = args[2:] or ['zlib:8', 'zero:4', 'raw:3', 'bzip2:5', 'ignore:2',
                         'zlib:1']
    data, disk, blocks, part = b'', b'', [], []
    sector, part_first = 0, 0
    for i, spec in enumerate(specs):
        kind, _, n = spec.partition(':')
        n = int(n or 0)
        if kind == 'gap':
            disk += bytes(512 * n)
            sector += n
            continue
        payload = sector_data(sector, n)
        if kind == 'zlib':
            stored = zlib.compress(payload, 9)
        elif kind == 'bzip2':
            stored = bz2.compress(payload)
        elif kind in ('raw', 'lzfse'):
            stored = payload
        else:
            stored, payload = b'', bytes(512 * n)
        part.append((TYPES[kind], sector - part_first, n, len(data),
                     len(stored)))
        data += stored
        disk += payload
        sector += n
        if i % 2 == 1:
            blocks.append(mish(part_first, sector - part_first, part))
            part, part_first = [], sector
    if part:
        blocks.append(mish(part_first, sector - part_first, part))
    items = ''.join(
        '<dict><key>Name</key><string>part %d</string><key>Data</key>'
        '<data>\n%s\n</data></dict>\n' % (i, base64.encodebytes(b).decode())
        for i, b in enumerate(blocks))
    plist = ('<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0">'
             '<dict><key>resource-fork</key><dict><key>blkx</key><array>\n'
             + items + '</array></dict></dict></plist>\n').encode()
    fork = resource_fork([(b'blkx', i, b'part %d' % i, b)
                          for i, b in enumerate(blocks)])
    if tables == 'plist':
        fork = b''
    elif tables == 'rsrc':
        plist = b''
    # the fork, when there is one, lies between the data and the list
    koly = struct.pack('>IIII', 0x6b6f6c79, 4, 512, 1)
    koly += struct.pack('>QQQ', 0, 0, len(data))
    koly += struct.pack('>QQ', len(data) if fork else 0, len(fork))
    koly = koly.ljust(0xd8, b'\0')
    koly += struct.pack('>QQ', len(data) + len(fork) if plist else 0,
                        len(plist))
    # the image variant and the disk's sectors, which readers size it by
    koly = koly.ljust(0x1e8, b'\0') + struct.pack('>IQ', 1, sector)
    koly = koly.ljust(512, b'\0')
    with open(out, 'wb') as f:
        f.write(data + fork + plist + koly)
    with open(raw_out, 'wb') as f:
        f.write(disk)


if __name__ == '__main__':
    main()
