/*
 * qcow writing, as QEMU 7.2 lays it out: a write to a cluster the image
 * lacks appends an L2 table (if its L1 entry had none) and then the
 * cluster, each at the file's end rounded up to a cluster; a compressed
 * write appends the deflated cluster at the file's very end.  Nothing is
 * ever freed: the file only grows.  The invariants are block/qcow1.h's.
 *
 * Where QEMU and this driver differ (docs/qcow.md): a partial write to a
 * cluster the image lacks copies the rest of the cluster from the
 * backing file (QEMU leaves it zero, which only matters for clusters
 * larger than a sector: QEMU gives images with a backing file 512-byte
 * clusters); a compressed write to an allocated cluster, or to an
 * encrypted image, is an ordinary write (QEMU writes the deflated bytes
 * over the cluster, or unencrypted).
 */
#include "block/qcow1.h"

#include <zlib.h>

#include "block/crypto.h"

static int coroutine_fn qcow1_pwrite(BdrvChild *child, uint64_t offset,
                                     uint64_t bytes, const void *buf)
{
    QEMUIOVector qiov;

    qemu_iovec_init_buf(&qiov, (void *)buf, bytes);
    return bdrv_co_pwritev(child, offset, bytes, &qiov, 0);
}

/* Inv. 5: a write of @what at @host must not land on the header. */
static int qcow1_check_target(uint64_t host, const char *what)
{
    if (host < sizeof(Qcow1Header)) {
        error_report("qcow: %s at 0x%" PRIx64 " lies on the header: not "
                     "written", what, host);
        return -EIO;
    }
    return 0;
}

/* The file's end, where the next table or cluster goes (inv. 2). */
static int64_t coroutine_fn qcow1_file_end(BlockDriverState *bs)
{
    int64_t end = bdrv_getlength(bs->file->bs);

    if (end >= 0 && (uint64_t)end >= QCOW1_OFFSET_MAX) {
        error_report("qcow: the file is too large to grow");
        return -EFBIG;
    }
    return end;
}

/* Inv. 1: sets the L1 entry @index in memory. */
static void qcow1_l1_set(BDRVQcow1State *s, uint64_t index, uint64_t value)
{
    if (index < s->l1_loaded) {
        s->l1_table[index] = value;
    } else {
        g_hash_table_insert(s->l1_extra, GUINT_TO_POINTER(index),
                            g_memdup2(&value, sizeof(value)));
    }
}

/* A new, zeroed L2 table for @m's L1 entry (inv. 3: s->lock held). */
static int coroutine_fn qcow1_alloc_l2(BlockDriverState *bs, Qcow1Map *m)
{
    BDRVQcow1State *s = bs->opaque;
    int64_t end = qcow1_file_end(bs);
    uint64_t l2_offset, be, at;
    int ret;

    if (end < 0) {
        return end;
    }
    l2_offset = ROUND_UP((uint64_t)end, s->cluster_size);
    if (!qcow1_l2_load(bs, l2_offset, true, &ret)) {
        return ret;
    }
    /* inv. 3: the table is in the file before the L1 entry names it */
    be = GUINT64_TO_BE(l2_offset);
    at = s->l1_table_offset + m->l1_index * sizeof(uint64_t);
    ret = qcow1_check_target(at, "the L1 entry");
    if (ret < 0) {
        return ret;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_L1_UPDATE);
    ret = qcow1_pwrite(bs->file, at, sizeof(be), &be);
    if (ret < 0) {
        return ret;
    }
    qcow1_l1_set(s, m->l1_index, l2_offset);
    m->l2_offset = l2_offset;
    return 0;
}

/* Sets @m's L2 entry to @entry, in the cache and the file. */
static int coroutine_fn qcow1_set_l2(BlockDriverState *bs,
                                     const Qcow1Map *m, uint64_t entry)
{
    uint64_t *table;
    int ret;

    ret = qcow1_check_target(m->l2_offset + m->l2_index * sizeof(uint64_t),
                             "the L2 entry");
    if (ret < 0) {
        return ret;
    }
    table = qcow1_l2_load(bs, m->l2_offset, false, &ret);
    if (!table) {
        return ret;
    }
    table[m->l2_index] = GUINT64_TO_BE(entry);
    return qcow1_pwrite(bs->file, m->l2_offset +
                        m->l2_index * sizeof(uint64_t), sizeof(uint64_t),
                        &table[m->l2_index]);
}

/*
 * The cluster's bytes a partial write keeps, in a new buffer, or NULL
 * where the new cluster may stay zero around the write (no backing file,
 * no compressed data, no encryption): the old compressed cluster, the
 * backing file's bytes, or zeroes to encrypt.
 */
static uint8_t *coroutine_fn qcow1_cluster_base(BlockDriverState *bs,
                                                const Qcow1Map *m,
                                                uint64_t start, int *ret)
{
    BDRVQcow1State *s = bs->opaque;
    uint8_t *buf;

    *ret = 0;
    if (!qcow1_is_compressed(m->entry) && !bs->backing && !s->crypto) {
        return NULL;
    }
    buf = qemu_try_blockalign(bs->file->bs, s->cluster_size);
    if (!buf) {
        *ret = -ENOMEM;
        return NULL;
    }
    memset(buf, 0, s->cluster_size);
    if (qcow1_is_compressed(m->entry)) {
        *ret = qcow1_read_compressed(bs, m->entry);
        if (*ret == 0) {
            memcpy(buf, s->cluster_cache, s->cluster_size);
        }
    } else if (bs->backing) {
        QEMUIOVector qiov;
        uint64_t len = MIN(s->cluster_size, s->disk_size - start);

        qemu_iovec_init_buf(&qiov, buf, len);
        BLKDBG_EVENT(bs->file, BLKDBG_COW_READ);
        *ret = bdrv_co_read_backing(bs, start, len, &qiov, 0);
    }
    if (*ret < 0) {
        qemu_vfree(buf);
        return NULL;
    }
    return buf;
}

/*
 * Writes @n bytes of @qiov from @done at guest @offset, in a cluster the
 * image lacks (or holds compressed): a new cluster at the file's end.
 * Inv. 3: s->lock held; the entry changes once the data is written.
 */
static int coroutine_fn qcow1_allocate(BlockDriverState *bs, Qcow1Map *m,
                                       uint64_t offset, uint64_t n,
                                       QEMUIOVector *qiov, size_t done)
{
    BDRVQcow1State *s = bs->opaque;
    uint64_t in_cluster = offset & (s->cluster_size - 1);
    uint64_t start = offset - in_cluster;
    uint8_t *buf = NULL;
    int64_t end;
    uint64_t at;
    int ret;

    if (!m->l2_offset) {
        ret = qcow1_alloc_l2(bs, m);
        if (ret < 0) {
            return ret;
        }
    }
    if (n < s->cluster_size) {
        buf = qcow1_cluster_base(bs, m, start, &ret);
        if (ret < 0) {
            return ret;
        }
    } else if (s->crypto) {
        buf = qemu_try_blockalign(bs->file->bs, s->cluster_size);
        if (!buf) {
            return -ENOMEM;
        }
    }
    end = qcow1_file_end(bs);
    if (end < 0) {
        ret = end;
        goto out;
    }
    at = ROUND_UP((uint64_t)end, s->cluster_size);
    BLKDBG_EVENT(bs->file, BLKDBG_CLUSTER_ALLOC);
    ret = bdrv_co_truncate(bs->file, at + s->cluster_size, false,
                           PREALLOC_MODE_OFF, 0, NULL);
    if (ret < 0) {
        goto out;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_WRITE_AIO);
    if (!buf) {
        ret = bdrv_co_pwritev_part(bs->file, at + in_cluster, n, qiov, done,
                                   0);
    } else {
        qemu_iovec_to_buf(qiov, done, buf + in_cluster, n);
        /* inv. 4: a guest sector's IV is its number */
        ret = s->crypto ? block_crypto_co_run(bs, s->crypto,
                                              BLOCK_CRYPTO_ENCRYPT, start,
                                              buf, s->cluster_size) : 0;
        if (ret == 0) {
            ret = qcow1_pwrite(bs->file, at, s->cluster_size, buf);
        }
    }
    if (ret == 0) {
        BLKDBG_EVENT(bs->file, BLKDBG_L2_UPDATE);
        ret = qcow1_set_l2(bs, m, at);
    }
out:
    qemu_vfree(buf);
    return ret;
}

/* Writes @n bytes at @offset of an allocated cluster at @host. */
static int coroutine_fn qcow1_write_in_place(BlockDriverState *bs,
                                             uint64_t offset, uint64_t host,
                                             uint64_t n, QEMUIOVector *qiov,
                                             size_t done)
{
    BDRVQcow1State *s = bs->opaque;
    uint8_t *buf;
    int ret;

    /* inv. 5 by inv. 2: a data cluster is at a non-zero sector */
    assert(host >= QCOW1_SECTOR);
    BLKDBG_EVENT(bs->file, BLKDBG_WRITE_AIO);
    if (!s->crypto) {
        return bdrv_co_pwritev_part(bs->file, host, n, qiov, done, 0);
    }
    /* inv. 4: never in the caller's buffer */
    buf = qemu_try_blockalign(bs->file->bs, n);
    if (!buf) {
        return -ENOMEM;
    }
    qemu_iovec_to_buf(qiov, done, buf, n);
    ret = block_crypto_co_run(bs, s->crypto, BLOCK_CRYPTO_ENCRYPT, offset,
                              buf, n);
    if (ret == 0) {
        ret = qcow1_pwrite(bs->file, host, n, buf);
    }
    qemu_vfree(buf);
    return ret;
}

static int coroutine_fn qcow1_write_piece(BlockDriverState *bs,
                                          uint64_t offset, uint64_t n,
                                          QEMUIOVector *qiov, size_t done)
{
    BDRVQcow1State *s = bs->opaque;
    uint64_t in_cluster = offset & (s->cluster_size - 1);
    Qcow1Map m;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    /* as QEMU: a write forgets the last compressed cluster read */
    s->cluster_cache_offset = UINT64_MAX;
    ret = qcow1_map(bs, offset, &m);
    if (ret == 0 && (!m.entry || qcow1_is_compressed(m.entry))) {
        ret = qcow1_allocate(bs, &m, offset, n, qiov, done);
        qemu_co_mutex_unlock(&s->lock);
        return ret;
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret < 0 ? ret : qcow1_write_in_place(bs, offset,
                                                m.entry + in_cluster, n,
                                                qiov, done);
}

int coroutine_fn qcow1_co_pwritev(BlockDriverState *bs, int64_t offset,
                                  int64_t bytes, QEMUIOVector *qiov,
                                  BdrvRequestFlags flags)
{
    return qcow1_each_cluster(bs, offset, bytes, qiov, qcow1_write_piece);
}

/*
 * QEMU's deflate of a cluster: raw, 4 KiB window, default level, so that
 * the same zlib gives the same bytes.  Returns the deflated length, or 0
 * where it would not be shorter than the cluster.
 */
static size_t qcow1_deflate(uint8_t *out, const uint8_t *in, size_t len)
{
    z_stream strm = { 0 };
    size_t out_len;
    int ret;

    if (deflateInit2(&strm, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -12, 9,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
        return 0;
    }
    strm.next_in = (Bytef *)in;
    strm.avail_in = len;
    strm.next_out = out;
    strm.avail_out = len;
    ret = deflate(&strm, Z_FINISH);
    out_len = strm.next_out - out;
    deflateEnd(&strm);
    return ret == Z_STREAM_END && out_len < len ? out_len : 0;
}

/* Appends @out_len deflated bytes for @offset's cluster (s->lock held). */
static int coroutine_fn qcow1_append_compressed(BlockDriverState *bs,
                                                Qcow1Map *m,
                                                const uint8_t *out,
                                                size_t out_len)
{
    BDRVQcow1State *s = bs->opaque;
    int64_t end;
    int ret;

    if (!m->l2_offset) {
        ret = qcow1_alloc_l2(bs, m);
        if (ret < 0) {
            return ret;
        }
    }
    end = qcow1_file_end(bs);
    if (end < 0) {
        return end;
    }
    if ((uint64_t)end > s->cluster_offset_mask) {
        return -EFBIG;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_WRITE_COMPRESSED);
    ret = qcow1_pwrite(bs->file, end, out_len, out);
    if (ret < 0) {
        return ret;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_L2_UPDATE_COMPRESSED);
    return qcow1_set_l2(bs, m, (uint64_t)end | QCOW1_OFLAG_COMPRESSED |
                        (uint64_t)out_len << (63 - s->cluster_bits));
}

/* One cluster (or the disk's last, partial one) from @qiov at @done. */
static int coroutine_fn qcow1_write_compressed_cluster(BlockDriverState *bs,
                                                       uint64_t offset,
                                                       uint64_t bytes,
                                                       QEMUIOVector *qiov,
                                                       size_t done)
{
    BDRVQcow1State *s = bs->opaque;
    g_autofree uint8_t *buf = g_malloc0(s->cluster_size);
    g_autofree uint8_t *out = g_malloc(s->cluster_size);
    QEMUIOVector piece;
    size_t out_len;
    Qcow1Map m;
    int ret;

    qemu_iovec_to_buf(qiov, done, buf, bytes);
    qemu_iovec_init_buf(&piece, buf, bytes);
    out_len = qcow1_deflate(out, buf, s->cluster_size);
    if (!out_len) {
        return qcow1_co_pwritev(bs, offset, bytes, &piece, 0);
    }
    qemu_co_mutex_lock(&s->lock);
    s->cluster_cache_offset = UINT64_MAX;
    ret = qcow1_map(bs, offset, &m);
    if (ret == 0 && m.entry && !qcow1_is_compressed(m.entry)) {
        /* an allocated cluster keeps its place: an ordinary write */
        qemu_co_mutex_unlock(&s->lock);
        return qcow1_co_pwritev(bs, offset, bytes, &piece, 0);
    }
    if (ret == 0) {
        ret = qcow1_append_compressed(bs, &m, out, out_len);
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

int coroutine_fn qcow1_co_pwritev_compressed(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             QEMUIOVector *qiov)
{
    BDRVQcow1State *s = bs->opaque;

    /* the end of a stream of compressed writes: nothing to align here */
    if (bytes == 0) {
        return 0;
    }
    /* as QEMU: whole clusters, the disk's last one maybe partial */
    if (offset % s->cluster_size ||
        (bytes % s->cluster_size && offset + bytes != (int64_t)s->disk_size)) {
        return -EINVAL;
    }
    if (s->crypto) {
        return qcow1_co_pwritev(bs, offset, bytes, qiov, 0);
    }
    /* the offset is aligned: each piece is a whole cluster or the last */
    return qcow1_each_cluster(bs, offset, bytes, qiov,
                              qcow1_write_compressed_cluster);
}

static int coroutine_fn qcow1_make_empty_co(BlockDriverState *bs,
                                            void *opaque)
{
    BDRVQcow1State *s = bs->opaque;
    uint64_t l1_bytes = s->l1_size * sizeof(uint64_t);
    int ret;

    qemu_co_mutex_lock(&s->lock);
    /* as QEMU: a zeroed L1 table and the file cut right after it */
    ret = bdrv_co_pwrite_zeroes(bs->file, s->l1_table_offset, l1_bytes, 0);
    if (ret == 0) {
        ret = bdrv_co_truncate(bs->file, s->l1_table_offset + l1_bytes,
                               false, PREALLOC_MODE_OFF, 0, NULL);
    }
    if (ret == 0) {
        memset(s->l1_table, 0, s->l1_loaded * sizeof(uint64_t));
        g_hash_table_remove_all(s->l1_extra);
        memset(s->l2_cache_offsets, 0, sizeof(s->l2_cache_offsets));
        memset(s->l2_cache_counts, 0, sizeof(s->l2_cache_counts));
        s->cluster_cache_offset = UINT64_MAX;
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

int qcow1_make_empty(BlockDriverState *bs)
{
    return bdrv_run_co(bs, qcow1_make_empty_co, NULL);
}
