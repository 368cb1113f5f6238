"""The backup tool of a pull-mode (fleecing) incremental backup, as
docs/incremental-backup.md describes it: asks the point-in-time export
SRC which extents the meta context qemu:dirty-bitmap:BITMAP marks dirty,
reads exactly those and writes them to the export DST (an overlay of the
previous backup), then flushes DST.  Last, it reads one clean cluster of
SRC, which a snapshot-access export over a copy-before-write filter with
a bitmap must refuse (it holds only what the bitmap marks).

    /usr/bin/python3 nbd_pull.py SRC_URI BITMAP DST_URI
Prints one JSON object: {"extents": [[offset, length], ...],
"bytes": N, "clean_read_refused": true|false|null (no clean cluster)}.
Needs libnbd's Python module (Debian python3-libnbd), which is built for
Debian's /usr/bin/python3; exits 77 without it.
"""
import json
import sys

try:
    import nbd
except ImportError:
    print('python3-libnbd is not installed', file=sys.stderr)
    sys.exit(77)

CHUNK = 4 << 20         # what one request reads or writes at most
CLUSTER = 64 << 10      # a clean cluster, for the refused read


def dirty_extents(src, context, size):
    """[offset, length] of the dirty extents of @context, merged."""
    out = []
    offset = 0
    while offset < size:
        got = []

        def cb(meta, off, entries, err):
            if meta == context:
                got.extend(entries)
            return 0

        src.block_status(min(size - offset, 1 << 30), offset, cb)
        if not got:
            raise RuntimeError('no extents for %s at %d' % (context, offset))
        for i in range(0, len(got), 2):
            length, flags = got[i], got[i + 1]
            length = min(length, size - offset)
            if flags & 1:
                if out and out[-1][0] + out[-1][1] == offset:
                    out[-1][1] += length
                else:
                    out.append([offset, length])
            offset += length
    return out


def main():
    src_uri, bitmap, dst_uri = sys.argv[1:4]
    context = 'qemu:dirty-bitmap:' + bitmap
    src = nbd.NBD()
    src.add_meta_context(context)
    src.connect_uri(src_uri)
    if not src.can_meta_context(context):
        raise RuntimeError('%s does not offer %s' % (src_uri, context))
    dst = nbd.NBD()
    dst.connect_uri(dst_uri)
    size = src.get_size()
    extents = dirty_extents(src, context, size)
    copied = 0
    for offset, length in extents:
        end = offset + length
        while offset < end:
            n = min(CHUNK, end - offset)
            dst.pwrite(src.pread(n, offset), offset)
            offset += n
            copied += n
    dst.flush()
    refused = None
    clean = 0
    for offset, length in extents:
        if offset > clean:
            break
        clean = offset + length
    clean = (clean + CLUSTER - 1) // CLUSTER * CLUSTER
    if clean + CLUSTER <= size and not any(
            o < clean + CLUSTER and clean < o + n for o, n in extents):
        try:
            src.pread(4096, clean)
            refused = False
        except nbd.Error:
            refused = True
    src.shutdown()
    dst.shutdown()
    print(json.dumps({'extents': extents, 'bytes': copied,
                      'clean_read_refused': refused}))


main()
