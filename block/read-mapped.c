/*
 * The read path of the formats whose every piece of the disk either lies
 * in their file or reads as zeroes (bochs, vdi, vpc, vhdx): a request
 * split where the driver's map says, each piece read from the file or
 * zeroed.
 */

#include "block/block_int.h"

int coroutine_fn bdrv_co_preadv_mapped(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvPieceMap *map)
{
    size_t done = 0;

    while (bytes > 0) {
        int64_t host;
        int64_t n = map(bs, offset, bytes, &host);
        int ret = 0;

        if (n < 0) {
            return n;
        }
        /* a map that gave nothing would never end the request */
        assert(n > 0 && n <= bytes);
        if (host >= 0) {
            ret = bdrv_co_preadv_part(bs->file, host, n, qiov, done, 0);
        } else {
            qemu_iovec_memset(qiov, done, 0, n);
        }
        if (ret < 0) {
            return ret;
        }
        offset += n;
        bytes -= n;
        done += n;
    }
    return 0;
}
