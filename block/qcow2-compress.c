/*
 * qcow2 compressed clusters: (de)compression with zlib or zstd, reads of
 * compressed clusters, and compressed writes (qemu-img convert -c, backup
 * with compress=on), whose compression runs in worker threads.
 */
#include "block/qcow2.h"

#include <zlib.h>
#include <zstd.h>

#include "util/thread-pool.h"

/* ---------------------------------------------------------------------- */
/* Compression */

/*
 * Points a zlib stream at the whole of @src and @dest: inflate and deflate
 * both run in one Z_FINISH call over a single buffer each way.
 */
static void qcow2_zlib_set_buffers(z_stream *strm, void *dest,
                                   size_t dest_size, const void *src,
                                   size_t src_size)
{
    strm->next_in = (Bytef *)src;
    strm->avail_in = src_size;
    strm->next_out = dest;
    strm->avail_out = dest_size;
}

/* Inflates raw deflate data (no zlib header, 4 KiB window) into @dest. */
static int qcow2_zlib_decompress(void *dest, size_t dest_size,
                                 const void *src, size_t src_size)
{
    z_stream strm = { 0 };
    int ret;

    if (inflateInit2(&strm, -12) != Z_OK) {
        return -EIO;
    }
    qcow2_zlib_set_buffers(&strm, dest, dest_size, src, src_size);
    ret = inflate(&strm, Z_FINISH);
    /* the compressed size is rounded up to sectors: trailing bytes after
     * a full cluster are padding */
    ret = ((ret == Z_STREAM_END || ret == Z_BUF_ERROR) &&
           strm.avail_out == 0) ? 0 : -EIO;
    inflateEnd(&strm);
    return ret;
}

static int qcow2_zstd_decompress(void *dest, size_t dest_size,
                                 const void *src, size_t src_size)
{
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    ZSTD_inBuffer in = { src, src_size, 0 };
    ZSTD_outBuffer out = { dest, dest_size, 0 };
    int ret = 0;

    if (!dctx) {
        return -ENOMEM;
    }
    while (out.pos < out.size) {
        size_t last_pos = out.pos;
        size_t zret = ZSTD_decompressStream(dctx, &out, &in);

        if (ZSTD_isError(zret)) {
            ret = -EIO;
            break;
        }
        if (out.pos == last_pos && in.pos == in.size) {
            break;
        }
    }
    if (ret == 0 && out.pos != out.size) {
        ret = -EIO;
    }
    ZSTD_freeDCtx(dctx);
    return ret;
}

static int qcow2_decompress(BDRVQcow2State *s, void *dest, size_t dest_size,
                            const void *src, size_t src_size)
{
    if (s->compression_type == QCOW2_COMPRESSION_TYPE_ZSTD) {
        return qcow2_zstd_decompress(dest, dest_size, src, src_size);
    }
    return qcow2_zlib_decompress(dest, dest_size, src, src_size);
}

/*
 * Compresses @src into @dest; returns the compressed size, or -ENOSPC if
 * it would not be smaller than @dest_size (the caller then writes the
 * cluster uncompressed).
 */
static ssize_t qcow2_compress(BDRVQcow2State *s, void *dest,
                              size_t dest_size, const void *src,
                              size_t src_size)
{
    if (s->compression_type == QCOW2_COMPRESSION_TYPE_ZSTD) {
        size_t zret = ZSTD_compress(dest, dest_size, src, src_size,
                                    ZSTD_CLEVEL_DEFAULT);

        return ZSTD_isError(zret) ? -ENOSPC : (ssize_t)zret;
    } else {
        z_stream strm = { 0 };
        ssize_t ret;

        if (deflateInit2(&strm, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -12, 9,
                         Z_DEFAULT_STRATEGY) != Z_OK) {
            return -EIO;
        }
        qcow2_zlib_set_buffers(&strm, dest, dest_size, src, src_size);
        ret = deflate(&strm, Z_FINISH);
        ret = ret == Z_STREAM_END ? (ssize_t)(dest_size - strm.avail_out)
                                  : -ENOSPC;
        deflateEnd(&strm);
        return ret;
    }
}

int coroutine_fn qcow2_co_read_compressed(BlockDriverState *bs,
                                          uint64_t l2_entry,
                                          uint64_t offset,
                                          uint64_t bytes,
                                          QEMUIOVector *qiov,
                                          size_t qiov_offset)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t coffset;
    int csize, ret;
    g_autofree uint8_t *in = NULL;
    g_autofree uint8_t *out = NULL;

    qcow2_parse_compressed_l2_entry(s, l2_entry, &coffset, &csize);
    in = g_try_malloc(csize);
    out = g_try_malloc(s->cluster_size);
    if (!in || !out) {
        return -ENOMEM;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_READ_COMPRESSED);
    ret = bdrv_pread(bs->file, coffset, csize, in, 0);
    if (ret < 0) {
        return ret;
    }
    if (qcow2_decompress(s, out, s->cluster_size, in, csize) < 0) {
        return -EIO;
    }
    qemu_iovec_from_buf(qiov, qiov_offset,
                        out + offset_into_cluster(s, offset), bytes);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Compressed writes */

typedef struct Qcow2CompressJob {
    BDRVQcow2State *s;
    void *dest;
    size_t dest_size;
    const void *src;
    size_t src_size;
    ssize_t out_len;            /* the result: bytes, -ENOSPC or -errno */
} Qcow2CompressJob;

/* Worker thread: compression is CPU work, kept off the event loop. */
static int qcow2_compress_job(void *opaque)
{
    Qcow2CompressJob *job = opaque;

    return qcow2_compress(job->s, job->dest, job->dest_size, job->src,
                          job->src_size);
}

/* A pool task that hands one cluster to a worker thread. */
static int coroutine_fn qcow2_compress_task(Qcow2Task *t)
{
    Qcow2CompressJob *job = t->opaque;
    ThreadPool *pool = aio_get_thread_pool(bdrv_get_aio_context(t->bs));

    job->out_len = thread_pool_submit_co(pool, qcow2_compress_job, job);
    return job->out_len < 0 && job->out_len != -ENOSPC ? job->out_len : 0;
}

/*
 * Stores guest cluster @offset (@buf, one cluster; the image's last
 * cluster is zero-padded by the caller) as @out_len compressed bytes.
 */
static int coroutine_fn qcow2_write_compressed_cluster(BlockDriverState *bs,
                                                       uint64_t offset,
                                                       const void *out,
                                                       size_t out_len)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t coffset;
    uint64_t nb_csectors, entry;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = qcow2_prepare_compressed_cluster(bs, offset);
    if (ret < 0) {
        goto out;
    }
    coffset = qcow2_alloc_bytes(bs, out_len);
    if (coffset < 0) {
        ret = coffset;
        goto out;
    }
    /* stored as the number of 512-byte sectors touched, minus one */
    nb_csectors = ((coffset + out_len - 1) >> 9) - (coffset >> 9);
    assert(nb_csectors <= (uint64_t)s->csize_mask);
    entry = QCOW_OFLAG_COMPRESSED | (uint64_t)coffset |
            (nb_csectors << s->csize_shift);

    /*
     * The lock stays held over the data write, so that no allocation of
     * this guest cluster can start between the write and the link.
     */
    BLKDBG_EVENT(bs->file, BLKDBG_WRITE_COMPRESSED);
    ret = qcow2_pre_write_overlap_check(bs, 0, coffset, out_len);
    if (ret == 0) {
        ret = bdrv_pwrite(bs->file, coffset, out_len, out, 0);
    }
    if (ret == 0) {
        ret = qcow2_link_compressed_cluster(bs, offset, entry);
    }
    if (ret < 0) {
        qcow2_free_clusters(bs, coffset, out_len, QCOW2_DISCARD_NEVER);
    }
out:
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/*
 * Compresses the clusters of one batch in worker threads at the same time
 * (at most QCOW2_MAX_PARALLEL_IO), so that one request of many clusters
 * keeps as many cores busy.
 */
static int coroutine_fn qcow2_compress_batch(BlockDriverState *bs,
                                             Qcow2CompressJob *jobs, int n)
{
    Qcow2TaskPool pool = { 0 };
    int ret = 0;

    for (int i = 0; i < n && ret == 0; i++) {
        Qcow2Task *t = g_new0(Qcow2Task, 1);

        *t = (Qcow2Task) {
            .bs = bs, .fn = qcow2_compress_task, .opaque = &jobs[i],
        };
        ret = qcow2_pool_run(&pool, t, n == 1);
    }
    return qcow2_pool_finish(&pool, ret);
}

/*
 * Writes whole clusters compressed.  The clusters of a request are
 * compressed in parallel and then stored in guest order, so that the
 * image is laid out as if they had been written one by one.  A cluster
 * that does not shrink is written as a normal cluster.  Unlike QEMU 7.2,
 * an allocated cluster may be overwritten (its old host cluster is freed)
 * instead of failing with EIO.
 */
int coroutine_fn qcow2_co_pwritev_compressed(BlockDriverState *bs,
                                             int64_t offset,
                                             int64_t bytes,
                                             QEMUIOVector *qiov)
{
    BDRVQcow2State *s = bs->opaque;
    int batch = MIN(size_to_clusters(s, bytes), QCOW2_MAX_PARALLEL_IO);
    g_autofree Qcow2CompressJob *jobs = NULL;
    uint8_t *in, *out;
    size_t qiov_offset = 0;
    int ret = 0;

    /* compressed clusters are not encrypted: QEMU refuses them too */
    if (s->data_file != bs->file || s->crypt_method) {
        return -ENOTSUP;
    }
    if (bytes == 0) {
        /* the end of the stream: the file ends on a sector boundary, so
         * that sector-based readers see the last compressed bytes whole */
        int64_t len = bdrv_getlength(bs->file->bs);

        if (len < 0) {
            return len;
        }
        qemu_co_mutex_lock(&s->lock);
        ret = bdrv_co_truncate(bs->file, len, false, PREALLOC_MODE_OFF, 0,
                               NULL);
        qemu_co_mutex_unlock(&s->lock);
        return ret;
    }
    if (offset_into_cluster(s, offset) ||
        (offset_into_cluster(s, bytes) &&
         offset + bytes != s->virtual_size)) {
        return -EINVAL;
    }
    jobs = g_new0(Qcow2CompressJob, batch);
    in = qemu_try_blockalign(bs, (size_t)batch * s->cluster_size);
    out = g_try_malloc((size_t)batch * s->cluster_size);
    if (!in || !out) {
        ret = -ENOMEM;
        bytes = 0;
    }

    while (bytes > 0 && ret == 0) {
        int n = MIN(size_to_clusters(s, bytes), batch);

        for (int i = 0; i < n; i++) {
            size_t cur = MIN(bytes - (int64_t)i * s->cluster_size,
                             (int64_t)s->cluster_size);
            uint8_t *src = in + (size_t)i * s->cluster_size;

            qemu_iovec_to_buf(qiov, qiov_offset + (size_t)i * s->cluster_size,
                              src, cur);
            memset(src + cur, 0, s->cluster_size - cur);
            jobs[i] = (Qcow2CompressJob) {
                .s = s, .dest = out + (size_t)i * s->cluster_size,
                /* anything smaller than a cluster is stored compressed,
                 * as QEMU does */
                .dest_size = s->cluster_size - 1,
                .src = src, .src_size = s->cluster_size,
            };
        }
        ret = qcow2_compress_batch(bs, jobs, n);

        for (int i = 0; i < n && ret == 0; i++) {
            size_t cur = MIN(bytes, (int64_t)s->cluster_size);

            if (jobs[i].out_len == -ENOSPC) {
                QEMUIOVector slice;

                qemu_iovec_init_slice(&slice, qiov, qiov_offset, cur);
                ret = qcow2_co_pwritev(bs, offset, cur, &slice, 0);
                qemu_iovec_destroy(&slice);
            } else {
                ret = qcow2_write_compressed_cluster(bs, offset, jobs[i].dest,
                                                     jobs[i].out_len);
            }
            offset += cur;
            bytes -= cur;
            qiov_offset += cur;
        }
    }
    qemu_vfree(in);
    g_free(out);
    return ret;
}
