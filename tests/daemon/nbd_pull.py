"""The backup tool of a pull-mode (fleecing) incremental backup, as
docs/incremental-backup.md describes it: asks the point-in-time export
SRC which extents the meta context qemu:dirty-bitmap:BITMAP marks dirty,
and of those which read as zeroes (base:allocation, the snapshot's own
status), then writes zeroes for those and copies the others to the
export DST (an overlay of the previous backup), then flushes DST.  Last, it reads one clean cluster of
SRC, which a snapshot-access export over a copy-before-write filter with
a bitmap must refuse (it holds only what the bitmap marks).

    /usr/bin/python3 nbd_pull.py SRC_URI BITMAP DST_URI
Prints one JSON object: {"extents": [[offset, length], ...],
"bytes": N, "zero_bytes": N (of bytes, those written as zeroes),
"clean_read_refused": true|false|null (no clean cluster)}.
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


def extents(src, context, offset, end):
    """[offset, length, flags] of @context over [offset, end)."""
    out = []
    while offset < end:
        got = []

        def cb(meta, off, entries, err):
            if meta == context:
                got.extend(entries)
            return 0

        src.block_status(min(end - offset, 1 << 30), offset, cb)
        if not got:
            raise RuntimeError('no extents for %s at %d' % (context, offset))
        for i in range(0, len(got), 2):
            length = min(got[i], end - offset)
            out.append([offset, length, got[i + 1]])
            offset += length
    return out


def dirty_extents(src, context, size):
    """[offset, length] of the dirty extents of @context, merged."""
    out = []
    for offset, length, flags in extents(src, context, 0, size):
        if not flags & 1:
            continue
        if out and out[-1][0] + out[-1][1] == offset:
            out[-1][1] += length
        else:
            out.append([offset, length])
    return out


def main():
    src_uri, bitmap, dst_uri = sys.argv[1:4]
    context = 'qemu:dirty-bitmap:' + bitmap
    # one connection per context: a server computes every selected
    # context over the whole range asked, and the snapshot's status fails
    # over clusters outside it (QEMU's and qblock's alike)
    meta = nbd.NBD()
    meta.add_meta_context(context)
    meta.connect_uri(src_uri)
    if not meta.can_meta_context(context):
        raise RuntimeError('%s does not offer %s' % (src_uri, context))
    src = nbd.NBD()
    src.add_meta_context('base:allocation')
    src.connect_uri(src_uri)
    dst = nbd.NBD()
    dst.connect_uri(dst_uri)
    size = src.get_size()
    dirty = dirty_extents(meta, context, size)
    meta.shutdown()
    copied = zeroes = 0
    for start, length in dirty:
        for offset, n, flags in extents(src, 'base:allocation', start,
                                        start + length):
            copied += n
            if flags & 2:           # NBD_STATE_ZERO
                dst.zero(n, offset)
                zeroes += n
                continue
            end = offset + n
            while offset < end:
                k = min(CHUNK, end - offset)
                dst.pwrite(src.pread(k, offset), offset)
                offset += k
    dst.flush()
    refused = None
    clean = 0
    for offset, length in dirty:
        if offset > clean:
            break
        clean = offset + length
    clean = (clean + CLUSTER - 1) // CLUSTER * CLUSTER
    if clean + CLUSTER <= size and not any(
            o < clean + CLUSTER and clean < o + n for o, n in dirty):
        try:
            src.pread(4096, clean)
            refused = False
        except nbd.Error:
            refused = True
    src.shutdown()
    dst.shutdown()
    print(json.dumps({'extents': dirty, 'bytes': copied,
                      'zero_bytes': zeroes, 'clean_read_refused': refused}))


main()
