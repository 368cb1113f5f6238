/*
 * The request loop that the drivers which split a request share (the
 * formats at their clusters, copy-on-read at what it copies): a request
 * done piece by piece (bdrv_co_each_piece()); the read path of the
 * formats whose every piece of the disk lies in their file, in their
 * backing node or reads as zeroes (bochs, vdi, vpc, vhdx, parallels,
 * qed), each piece read from the file or the backing node or zeroed; and
 * the open of those that only read.
 */

#include "block/block_int.h"

int coroutine_fn bdrv_co_each_piece(BlockDriverState *bs, int64_t offset,
                                    int64_t bytes, QEMUIOVector *qiov,
                                    BdrvPieceFn *fn, void *opaque)
{
    size_t done = 0;

    while (bytes > 0) {
        int64_t n = fn(bs, offset, bytes, qiov, done, opaque);

        if (n < 0) {
            return n;
        }
        /* a piece that did nothing would never end the request */
        assert(n > 0 && n <= bytes);
        offset += n;
        bytes -= n;
        done += n;
    }
    return 0;
}

/* One piece of bdrv_co_preadv_mapped(): @opaque points to the map. */
static int64_t coroutine_fn bdrv_read_mapped_piece(BlockDriverState *bs,
                                                   int64_t offset,
                                                   int64_t bytes,
                                                   QEMUIOVector *qiov,
                                                   size_t done, void *opaque)
{
    BdrvPieceMap **map = opaque;
    int64_t host;
    int64_t n = (*map)(bs, offset, bytes, &host);
    int ret = 0;

    if (n < 0) {
        return n;
    }
    if (host >= 0) {
        ret = bdrv_co_preadv_part(bs->file, host, n, qiov, done, 0);
    } else if (host != BDRV_PIECE_ZERO && bs->backing) {
        ret = bdrv_co_read_backing(bs, offset, n, qiov, done);
    } else {
        qemu_iovec_memset(qiov, done, 0, n);
    }
    return ret < 0 ? ret : n;
}

int coroutine_fn bdrv_co_preadv_mapped(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvPieceMap *map)
{
    return bdrv_co_each_piece(bs, offset, bytes, qiov,
                              bdrv_read_mapped_piece, &map);
}

int bdrv_open_read_only(BlockDriverState *bs, int flags, Error **errp)
{
    if (flags & BDRV_O_RDWR) {
        if (!(flags & BDRV_O_AUTO_RDONLY)) {
            error_setg(errp, "Image is read-only");
            return -EACCES;
        }
        bs->read_only = true;
    }
    return 0;
}

int bdrv_open_read_only_format(BlockDriverState *bs, QDict *options,
                               int flags, Error **errp)
{
    int ret = bdrv_open_read_only(bs, flags, errp);

    if (ret < 0) {
        return ret;
    }
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    return bs->file ? 0 : -EINVAL;
}
