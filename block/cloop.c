/*
 * cloop: the read-only format driver for Linux compressed loop images
 * (cloop version 2.0, as create_compressed_fs writes them and QEMU reads
 * them).
 *
 * The file is a 128-byte shell-script preamble, the block size and the
 * number of blocks (big-endian 32-bit words at 128 and 132), then
 * n_blocks + 1 big-endian 64-bit file offsets: block i is the zlib stream
 * between offsets i and i + 1, and inflates to exactly block_size bytes.
 * The disk is n_blocks * block_size bytes.
 *
 * Invariants:
 *  1. After open the offset table is immutable, monotonically increasing,
 *     and no block's stream is longer than CLOOP_MAX_STREAM(block_size)
 *     bytes (so the stream buffer, sized to the longest stream, is
 *     bounded by the block size); block_size is a non-zero multiple of
 *     512 of at most 64 MiB.
 *  2. The cache (cached_block, block) is read and written only under
 *     s->lock: a read that inflates a block must not see another read's
 *     half-inflated block.
 *  3. The node is never writable: open refuses read-write unless
 *     auto-read-only lets it fall back, as QEMU does.
 */
#include <zlib.h>

#include "block/block_int.h"

#define CLOOP_PREAMBLE_SIZE     128
#define CLOOP_SECTOR            512
/* QEMU's limits: 64 MiB blocks, 512 MiB of offsets */
#define CLOOP_MAX_BLOCK         (64u << 20)
#define CLOOP_MAX_OFFSETS_SIZE  (512u << 20)
/*
 * The longest zlib stream a block may take: deflate's stored blocks cost
 * 5 bytes per 64 KiB, so twice the block size is far beyond any encoder.
 * QEMU allows 128 MiB whatever the block size; a tighter bound keeps what
 * a hostile offset table can make the driver allocate near the block size.
 */
#define CLOOP_MAX_STREAM(bs)    (2 * (uint64_t)(bs) + 4096)

static const char cloop_magic_v2[] =
    "#!/bin/sh\n"
    "#V2.0 Format\n"
    "modprobe cloop file=$0 && mount -r -t iso9660 /dev/cloop $1\n";

typedef struct BDRVCloopState {
    uint32_t block_size;
    uint32_t n_blocks;
    uint64_t *offsets;          /* n_blocks + 1, host-endian (inv. 1) */
    uint64_t max_stream;        /* the longest block's stream */
    CoMutex lock;
    uint8_t *stream;            /* max_stream bytes (inv. 2) */
    uint8_t *block;             /* block_size bytes (inv. 2) */
    int64_t cached_block;       /* the block in s->block, or -1 (inv. 2) */
} BDRVCloopState;

static int cloop_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    size_t len = strlen(cloop_magic_v2);

    /* QEMU's score: the preamble is a script, not a strong magic */
    if (buf_size > (int)len && !memcmp(buf, cloop_magic_v2, len)) {
        return 2;
    }
    return 0;
}

/* Checks the block size and count (inv. 1), with QEMU's messages. */
static int cloop_check_sizes(BDRVCloopState *s, Error **errp)
{
    if (s->block_size % CLOOP_SECTOR) {
        error_setg(errp, "block_size %" PRIu32 " must be a multiple of 512",
                   s->block_size);
        return -EINVAL;
    }
    if (s->block_size == 0) {
        error_setg(errp, "block_size cannot be zero");
        return -EINVAL;
    }
    if (s->block_size > CLOOP_MAX_BLOCK) {
        error_setg(errp, "block_size %" PRIu32 " must be %u MB or less",
                   s->block_size, CLOOP_MAX_BLOCK >> 20);
        return -EINVAL;
    }
    if (s->n_blocks > (UINT32_MAX - 1) / sizeof(uint64_t)) {
        error_setg(errp, "n_blocks %" PRIu32 " must be %zu or less",
                   s->n_blocks, (UINT32_MAX - 1) / sizeof(uint64_t));
        return -EINVAL;
    }
    if (((uint64_t)s->n_blocks + 1) * sizeof(uint64_t) >
        CLOOP_MAX_OFFSETS_SIZE) {
        error_setg(errp, "image requires too many offsets, "
                   "try increasing block size");
        return -EINVAL;
    }
    return 0;
}

/* Reads the offset table and checks it (inv. 1), with QEMU's messages. */
static int cloop_read_offsets(BlockDriverState *bs, Error **errp)
{
    BDRVCloopState *s = bs->opaque;
    uint64_t count = (uint64_t)s->n_blocks + 1;
    uint64_t size = count * sizeof(uint64_t);
    int64_t file_len = bdrv_getlength(bs->file->bs);
    int ret;

    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Could not get the file's length");
        return file_len;
    }
    /* a short hostile file must not make us allocate its claimed table */
    if (CLOOP_PREAMBLE_SIZE + 8 + size > (uint64_t)file_len) {
        error_setg(errp, "image file is truncated: its %" PRIu64 " offsets "
                   "end past its %" PRId64 " bytes", count, file_len);
        return -EINVAL;
    }
    s->offsets = g_try_new(uint64_t, count);
    if (!s->offsets) {
        error_setg(errp, "Could not allocate the offsets of %" PRIu64
                   " blocks", count);
        return -ENOMEM;
    }
    ret = bdrv_pread(bs->file, CLOOP_PREAMBLE_SIZE + 8, size, s->offsets, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the cloop offsets");
        return ret;
    }
    for (uint64_t i = 0; i < count; i++) {
        s->offsets[i] = GUINT64_FROM_BE(s->offsets[i]);
    }
    for (uint64_t i = 1; i < count; i++) {
        uint64_t stream = s->offsets[i] - s->offsets[i - 1];

        if (s->offsets[i] < s->offsets[i - 1]) {
            error_setg(errp, "offsets not monotonically increasing at index %"
                       PRIu64 ", image file is corrupt", i);
            return -EINVAL;
        }
        if (stream > CLOOP_MAX_STREAM(s->block_size)) {
            error_setg(errp, "invalid compressed block size at index %"
                       PRIu64 ", image file is corrupt", i);
            return -EINVAL;
        }
        s->max_stream = MAX(s->max_stream, stream);
    }
    return 0;
}

static void cloop_close(BlockDriverState *bs)
{
    BDRVCloopState *s = bs->opaque;

    g_clear_pointer(&s->offsets, g_free);
    g_clear_pointer(&s->stream, g_free);
    g_clear_pointer(&s->block, g_free);
}

static int cloop_open(BlockDriverState *bs, QDict *options, int flags,
                      Error **errp)
{
    BDRVCloopState *s = bs->opaque;
    uint32_t sizes[2];
    int ret;

    /* inv. 3 */
    ret = bdrv_open_read_only_format(bs, options, flags, errp);
    if (ret < 0) {
        return ret;
    }
    ret = bdrv_pread(bs->file, CLOOP_PREAMBLE_SIZE, sizeof(sizes), sizes, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the cloop header");
        return ret;
    }
    s->block_size = GUINT32_FROM_BE(sizes[0]);
    s->n_blocks = GUINT32_FROM_BE(sizes[1]);
    ret = cloop_check_sizes(s, errp);
    if (ret == 0) {
        ret = cloop_read_offsets(bs, errp);
    }
    if (ret == 0) {
        s->stream = g_try_malloc(MAX(s->max_stream, 1));
        s->block = g_try_malloc(s->block_size);
        if (!s->stream || !s->block) {
            error_setg(errp, "Could not allocate the buffers of a %" PRIu32
                       "-byte block", s->block_size);
            ret = -ENOMEM;
        }
    }
    if (ret < 0) {
        cloop_close(bs);
        return ret;
    }
    s->cached_block = -1;
    qemu_co_mutex_init(&s->lock);
    return 0;
}

/* Inflates block @index into s->block (inv. 2: under s->lock). */
static int coroutine_fn cloop_load_block(BlockDriverState *bs, uint32_t index)
{
    BDRVCloopState *s = bs->opaque;
    uint64_t stream = s->offsets[index + 1] - s->offsets[index];
    uLongf out = s->block_size;
    int ret;

    if (s->cached_block == index) {
        return 0;
    }
    /* inv. 1: every stream fits the buffer sized to the longest */
    assert(stream <= s->max_stream);
    s->cached_block = -1;
    if (s->offsets[index] > INT64_MAX - stream) {
        error_report("cloop: block %" PRIu32 " lies past the largest file "
                     "offset", index);
        return -EIO;
    }
    ret = bdrv_pread(bs->file, s->offsets[index], stream, s->stream, 0);
    if (ret < 0) {
        return ret;
    }
    if (uncompress(s->block, &out, s->stream, stream) != Z_OK ||
        out != s->block_size) {
        error_report("cloop: block %" PRIu32 " (%" PRIu64 " bytes at offset "
                     "%" PRIu64 ") does not inflate to a %" PRIu32
                     "-byte block", index, stream, s->offsets[index],
                     s->block_size);
        return -EIO;
    }
    s->cached_block = index;
    return 0;
}

/* One piece of a read: what of the request lies in one block. */
static int64_t coroutine_fn cloop_read_piece(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             QEMUIOVector *qiov, size_t done,
                                             void *opaque)
{
    BDRVCloopState *s = bs->opaque;
    uint32_t index = offset / s->block_size;
    uint32_t in_block = offset % s->block_size;
    int64_t n = MIN(bytes, (int64_t)(s->block_size - in_block));
    int ret = cloop_load_block(bs, index);

    if (ret < 0) {
        return ret;
    }
    qemu_iovec_from_buf(qiov, done, s->block + in_block, n);
    return n;
}

static int coroutine_fn cloop_co_preadv(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags)
{
    BDRVCloopState *s = bs->opaque;
    int ret;

    /* the pieces share the cache of one inflated block */
    qemu_co_mutex_lock(&s->lock);
    ret = bdrv_co_each_piece(bs, offset, bytes, qiov, cloop_read_piece, NULL);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

static int64_t cloop_getlength(BlockDriverState *bs)
{
    BDRVCloopState *s = bs->opaque;

    return (int64_t)s->n_blocks * s->block_size;
}

static const BlockDriver bdrv_cloop = {
    .format_name                    = "cloop",
    .instance_size                  = sizeof(BDRVCloopState),
    .is_format                      = true,
    .bdrv_probe                     = cloop_probe,
    .bdrv_open                      = cloop_open,
    .bdrv_close                     = cloop_close,
    .bdrv_co_preadv                 = cloop_co_preadv,
    .bdrv_getlength                 = cloop_getlength,
    .request_alignment              = CLOOP_SECTOR,
};

block_init(bdrv_register, bdrv_cloop)
