#!/usr/bin/env python3
"""Writes an ESX sparse extent ("COWD", VMFSSPARSE) as VMware's "Virtual
Disk Format 1.1" describes it, and optionally a descriptor naming it.

    make-vmdk-cowd.py OUT [--sectors N] [--grain G] [--gd-entries N]
                      [--gd-offset S] [--tables N] [--grains G:BYTE,...]
                      [--desc-text TEXT] [--descriptor FILE]

The header is four sectors: magic "COWD", version 1, flags 3, the
extent's size in sectors (--sectors), the grain size in sectors
(--grain), the grain directory's sector (--gd-offset, default 4, right
after the header) and entries (--gd-entries, default what the size
needs), the next free sector (the file's end), then the geometry (a root
disk's) and zeroes.  The directory follows, then its grain tables
(the first --tables of them; the others are left out, 0 in the
directory), 4096 entries of 16 KiB each, then the grains listed in
--grains (grain index : the byte that fills it), one after the other.
--desc-text puts text at byte 512 (inside the header's parent name),
which QEMU reads as a standalone file's descriptor.  --descriptor also
writes a descriptor file (createType vmfsSparse, one VMFSSPARSE extent
naming OUT by its base name).
"""
import argparse
import os
import struct

SECTOR = 512
HEADER_SECTORS = 4
GTES = 4096


def cowd(sectors, grain, gd_entries=None, gd_offset=HEADER_SECTORS,
         tables=None, grains=(), desc_text=b''):
    """The extent's bytes."""
    need = -(-(-(-sectors // grain)) // GTES)
    if gd_entries is None:
        gd_entries = need
    if tables is None:
        tables = min(need, gd_entries)
    gd_sectors = -(-gd_entries * 4 // SECTOR)
    pos = gd_offset + gd_sectors
    gd = [0] * gd_entries
    gts = {}
    for t in range(tables):
        gd[t] = pos
        gts[t] = [0] * GTES
        pos += GTES * 4 // SECTOR
    data = []
    for index, byte in grains:
        if index // GTES not in gts:
            raise SystemExit('grain %d: its grain table is left out' % index)
        gts[index // GTES][index % GTES] = pos
        data.append((pos, bytes([byte]) * (grain * SECTOR)))
        pos += grain
    header = struct.pack('<4sIIIIIIIIII', b'COWD', 1, 3, sectors, grain,
                         gd_offset, gd_entries, pos, sectors // (16 * 63),
                         16, 63)
    img = bytearray(pos * SECTOR)
    img[:len(header)] = header
    img[SECTOR:SECTOR + len(desc_text)] = desc_text
    at = gd_offset * SECTOR
    img[at:at + gd_entries * 4] = struct.pack('<%dI' % gd_entries, *gd)
    for t, gt in gts.items():
        img[gd[t] * SECTOR:gd[t] * SECTOR + GTES * 4] = \
            struct.pack('<%dI' % GTES, *gt)
    for at, chunk in data:
        img[at * SECTOR:at * SECTOR + len(chunk)] = chunk
    return bytes(img)


def descriptor(extent, sectors):
    return ('# Disk DescriptorFile\nversion=1\nCID=12345678\n'
            'parentCID=ffffffff\ncreateType="vmfsSparse"\n\n'
            '# Extent description\nRW %d VMFSSPARSE "%s"\n\n'
            '# The Disk Data Base\n#DDB\n\nddb.virtualHWVersion = "4"\n'
            % (sectors, extent))


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('out')
    p.add_argument('--sectors', type=int, default=65536)
    p.add_argument('--grain', type=int, default=8)
    p.add_argument('--gd-entries', type=int)
    p.add_argument('--gd-offset', type=int, default=HEADER_SECTORS)
    p.add_argument('--tables', type=int)
    p.add_argument('--grains', default='')
    p.add_argument('--desc-text', default='')
    p.add_argument('--descriptor')
    a = p.parse_args()
    grains = [(int(g, 0), int(b, 0)) for g, b in
              (x.split(':') for x in a.grains.split(',') if x)]
    text = a.desc_text.encode().decode('unicode_escape').encode('latin-1')
    with open(a.out, 'wb') as f:
        f.write(cowd(a.sectors, a.grain, a.gd_entries, a.gd_offset,
                     a.tables, grains, text))
    if a.descriptor:
        with open(a.descriptor, 'w') as f:
            f.write(descriptor(os.path.basename(a.out), a.sectors))


if __name__ == '__main__':
    main()
