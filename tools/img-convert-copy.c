/*
 * qblock-img convert: the copy itself, in coroutines; the design and its
 * invariants are in img-convert.h.
 */
#include "img-convert.h"

#include "qblock/block-node.h"

/* Makes src_cur the source that holds @sector_num. */
static void img_convert_select_part(ImgConvertState *s, int64_t sector_num)
{
    s->src_cur = 0;
    s->src_cur_offset = 0;
    while (sector_num - s->src_cur_offset >= s->src_sectors[s->src_cur]) {
        s->src_cur_offset += s->src_sectors[s->src_cur];
        s->src_cur++;
        assert(s->src_cur < s->src_num);
    }
}

/*
 * Length in sectors of the chunk at @sector_num, with its status in
 * s->status; block status is asked once per run and remembered up to
 * s->sector_next_status.
 */
static int64_t img_convert_iteration_sectors(ImgConvertState *s,
                                             int64_t sector_num)
{
    int64_t n;
    int ret;

    img_convert_select_part(s, sector_num);
    n = MIN(s->total_sectors - sector_num, IMG_REQUEST_MAX_SECTORS);
    n = MIN(n, s->src_sectors[s->src_cur] - (sector_num - s->src_cur_offset));

    if (s->sector_next_status <= sector_num) {
        BlockDriverState *src_bs = blk_bs(s->src[s->src_cur]);
        BlockDriverState *base = NULL;
        int64_t offset = (sector_num - s->src_cur_offset) * BDRV_SECTOR_SIZE;
        int64_t count, tail;

        /* With -B the target's backing file stands for the source's. */
        if (s->target_has_backing) {
            base = bdrv_backing_bs(src_bs);
        }
        do {
            count = n * BDRV_SECTOR_SIZE;
            ret = bdrv_block_status_above(src_bs, base, offset, count,
                                          &count, NULL, NULL, NULL);
            if (ret < 0) {
                if (!s->salvage) {
                    error_report("error while reading block status at "
                                 "offset %" PRId64 ": %s", offset,
                                 strerror(-ret));
                    return ret;
                }
                if (n == 1) {
                    if (!s->quiet) {
                        warn_report("error while reading block status at "
                                    "offset %" PRId64 ": %s", offset,
                                    strerror(-ret));
                    }
                    /* read the data, then */
                    ret = BDRV_BLOCK_DATA;
                    count = BDRV_SECTOR_SIZE;
                } else {
                    n = DIV_ROUND_UP(n, 4);
                }
            }
        } while (ret < 0);

        n = DIV_ROUND_UP(count, BDRV_SECTOR_SIZE);
        /* Keep the next status query aligned to the source's clusters so
         * that reads do not straddle them. */
        tail = (sector_num - s->src_cur_offset + n) %
               s->src_alignment[s->src_cur];
        if (n > tail) {
            n -= tail;
        }

        if (ret & BDRV_BLOCK_ZERO) {
            /* Zeroes must be written over a backing file, except past its
             * end, where the target reads zeroes anyway. */
            bool post_backing_zero = s->target_backing_sectors >= 0 &&
                                     sector_num >= s->target_backing_sectors;

            s->status = post_backing_zero ? IMG_BLK_BACKING_FILE
                                          : IMG_BLK_ZERO;
        } else if (ret & BDRV_BLOCK_DATA) {
            s->status = IMG_BLK_DATA;
        } else {
            s->status = s->target_has_backing ? IMG_BLK_BACKING_FILE
                                              : IMG_BLK_DATA;
        }
        s->sector_next_status = sector_num + n;
    }

    n = MIN(n, s->sector_next_status - sector_num);
    if (s->status == IMG_BLK_DATA) {
        n = MIN(n, s->buf_sectors);
    }
    /* Compressed clusters are written whole. */
    if (s->compressed) {
        if (n < s->cluster_sectors) {
            n = MIN(s->cluster_sectors, s->total_sectors - sector_num);
            s->status = IMG_BLK_DATA;
        } else {
            n = QEMU_ALIGN_DOWN(n, s->cluster_sectors);
        }
    }
    return n;
}

/*
 * Length of the run of sectors at @buf that are all zero or all not; a run
 * that does not reach the end is aligned to @alignment sectors (data runs
 * up, zero runs down; a zero run shorter than the tail becomes data).
 * Returns true for data.
 */
static bool img_is_allocated_sectors(const uint8_t *buf, int64_t n,
                                     int64_t *pnum, int64_t sector_num,
                                     int alignment)
{
    bool is_zero;
    int64_t i, tail;

    if (n <= 0) {
        *pnum = 0;
        return false;
    }
    is_zero = buffer_is_zero(buf, BDRV_SECTOR_SIZE);
    for (i = 1; i < n; i++) {
        buf += BDRV_SECTOR_SIZE;
        if (is_zero != buffer_is_zero(buf, BDRV_SECTOR_SIZE)) {
            break;
        }
    }
    if (i == n) {
        *pnum = i;
        return !is_zero;
    }
    tail = (sector_num + i) & (alignment - 1);
    if (tail) {
        if (is_zero && i <= tail) {
            is_zero = false;
        }
        if (!is_zero) {
            i = MIN(i + alignment - tail, n);
        } else {
            i -= tail;
        }
    }
    *pnum = i;
    return !is_zero;
}

/*
 * Like img_is_allocated_sectors(), but a data run swallows the zero runs
 * shorter than @min that follow it (-S): they are not worth a hole.
 */
static bool img_is_allocated_sectors_min(const uint8_t *buf, int64_t n,
                                         int64_t *pnum, int64_t min,
                                         int64_t sector_num, int alignment)
{
    int64_t num_checked, num_used;
    bool data;

    if (n < min) {
        min = n;
    }
    if (!img_is_allocated_sectors(buf, n, pnum, sector_num, alignment)) {
        return false;
    }
    num_used = *pnum;
    buf += BDRV_SECTOR_SIZE * *pnum;
    n -= *pnum;
    sector_num += *pnum;
    num_checked = num_used;

    while (n > 0) {
        data = img_is_allocated_sectors(buf, n, pnum, sector_num,
                                        alignment);
        buf += BDRV_SECTOR_SIZE * *pnum;
        n -= *pnum;
        sector_num += *pnum;
        num_checked += *pnum;
        if (data) {
            num_used = num_checked;
        } else if (*pnum >= min) {
            break;
        }
    }
    *pnum = num_used;
    return true;
}

/*
 * --salvage: a read that failed is retried one sector at a time; each
 * sector that still cannot be read is warned about and copied as zeroes.
 */
static void coroutine_fn img_convert_co_salvage_read(ImgConvertState *s,
                                                     BlockBackend *blk,
                                                     int64_t offset,
                                                     int64_t bytes,
                                                     uint8_t *buf)
{
    for (int64_t done = 0; done < bytes; done += BDRV_SECTOR_SIZE) {
        int64_t len = MIN(BDRV_SECTOR_SIZE, bytes - done);
        QEMUIOVector qiov;
        int ret;

        qemu_iovec_init_buf(&qiov, buf + done, len);
        ret = blk_co_preadv(blk, offset + done, len, &qiov, 0);
        if (ret < 0) {
            if (!s->quiet) {
                warn_report("error while reading offset %" PRId64 ": %s",
                            offset + done, strerror(-ret));
            }
            memset(buf + done, 0, len);
        }
    }
}

/* Reads @nb_sectors at @sector_num of the concatenated sources. */
static int coroutine_fn img_convert_co_read(ImgConvertState *s,
                                            int64_t sector_num,
                                            int64_t nb_sectors, uint8_t *buf)
{
    while (nb_sectors > 0) {
        BlockBackend *blk;
        int64_t n, offset, bytes, avail;
        QEMUIOVector qiov;
        int ret;

        img_convert_select_part(s, sector_num);
        blk = s->src[s->src_cur];
        n = MIN(nb_sectors, s->src_sectors[s->src_cur] -
                            (sector_num - s->src_cur_offset));
        offset = (sector_num - s->src_cur_offset) * BDRV_SECTOR_SIZE;
        bytes = n * BDRV_SECTOR_SIZE;
        /* The last sector of a source may be partial: zeroes follow. */
        avail = MIN(bytes, s->src_bytes[s->src_cur] - offset);
        if (avail < bytes) {
            memset(buf + avail, 0, bytes - avail);
        }
        qemu_iovec_init_buf(&qiov, buf, avail);
        ret = blk_co_preadv(blk, offset, avail, &qiov, 0);
        if (ret < 0 && s->salvage) {
            img_convert_co_salvage_read(s, blk, offset, avail, buf);
        } else if (ret < 0) {
            return ret;
        }
        sector_num += n;
        nb_sectors -= n;
        buf += bytes;
    }
    return 0;
}

/*
 * With -c: the length in sectors of the run of whole clusters at @buf
 * (@n sectors from @sector_num, the last cluster possibly cut by the end
 * of the image) that are all zero or all not; true for data.  Zero
 * clusters become holes, as they do when qemu-img writes one cluster at a
 * time; with -S 0 everything is data.
 */
static bool img_convert_compressed_run(ImgConvertState *s, const uint8_t *buf,
                                       int64_t n, int64_t *pnum)
{
    int64_t cs = s->cluster_sectors;
    int64_t done = 0;
    bool data = true;

    while (done < n) {
        int64_t len = MIN(cs, n - done);
        bool zero = s->min_sparse &&
                    buffer_is_zero(buf + done * BDRV_SECTOR_SIZE,
                                   len * BDRV_SECTOR_SIZE);

        if (done == 0) {
            data = !zero;
        } else if (data == zero) {
            break;
        }
        done += len;
    }
    *pnum = done;
    return data;
}

static int coroutine_fn img_convert_co_write(ImgConvertState *s,
                                             int64_t sector_num,
                                             int64_t nb_sectors,
                                             uint8_t *buf,
                                             ImgConvertStatus status)
{
    int ret;

    while (nb_sectors > 0) {
        int64_t n = nb_sectors;
        QEMUIOVector qiov;

        switch (status) {
        case IMG_BLK_BACKING_FILE:
            /* unallocated in the source: the backing file shows through */
            assert(s->target_has_backing);
            break;
        case IMG_BLK_DATA:
            /* Written unless sparse output may turn it into a hole. */
            if ((s->compressed &&
                 img_convert_compressed_run(s, buf, n, &n)) ||
                (!s->compressed &&
                 (!s->min_sparse ||
                  img_is_allocated_sectors_min(buf, n, &n, s->min_sparse,
                                               sector_num, s->alignment)))) {
                qemu_iovec_init_buf(&qiov, buf, n * BDRV_SECTOR_SIZE);
                ret = s->compressed ?
                      blk_co_pwritev_compressed(s->target,
                                                sector_num *
                                                BDRV_SECTOR_SIZE,
                                                n * BDRV_SECTOR_SIZE, &qiov) :
                      blk_co_pwritev(s->target, sector_num * BDRV_SECTOR_SIZE,
                                     n * BDRV_SECTOR_SIZE, &qiov, 0);
                if (ret < 0) {
                    return ret;
                }
                break;
            }
            /* fall through */
        case IMG_BLK_ZERO:
            if (s->has_zero_init) {
                assert(!s->target_has_backing);
                break;
            }
            ret = blk_co_pwrite_zeroes(s->target,
                                       sector_num * BDRV_SECTOR_SIZE,
                                       n * BDRV_SECTOR_SIZE,
                                       BDRV_REQ_MAY_UNMAP);
            if (ret < 0) {
                return ret;
            }
            break;
        }
        sector_num += n;
        nb_sectors -= n;
        buf += n * BDRV_SECTOR_SIZE;
    }
    return 0;
}

static int img_convert_co_index(ImgConvertState *s)
{
    Coroutine *self = qemu_coroutine_self();

    for (int i = 0; i < s->num_coroutines; i++) {
        if (s->co[i] == self) {
            return i;
        }
    }
    g_assert_not_reached();
}

/* Wakes the coroutine waiting to write at wr_offs (invariant 3). */
static void img_convert_wake_next_writer(ImgConvertState *s)
{
    for (int i = 0; i < s->num_coroutines; i++) {
        if (s->co[i] && s->wait_sector_num[i] == s->wr_offs) {
            aio_co_wake(s->co[i]);
            return;
        }
    }
}

static void coroutine_fn img_convert_co_do_copy(void *opaque)
{
    ImgConvertState *s = opaque;
    int index = img_convert_co_index(s);
    uint8_t *buf = blk_blockalign(s->target,
                                  s->buf_sectors * BDRV_SECTOR_SIZE);
    int ret;

    for (;;) {
        int64_t sector_num, n;
        ImgConvertStatus status;

        qemu_co_mutex_lock(&s->lock);
        if (s->ret != -EINPROGRESS || s->sector_num >= s->total_sectors) {
            qemu_co_mutex_unlock(&s->lock);
            break;
        }
        n = img_convert_iteration_sectors(s, s->sector_num);
        if (n < 0) {
            qemu_co_mutex_unlock(&s->lock);
            s->ret = n;
            break;
        }
        sector_num = s->sector_num;
        status = s->status;
        if (!s->min_sparse && status == IMG_BLK_ZERO) {
            n = MIN(n, s->buf_sectors);
        }
        /* invariant 1: others may take the next chunk right away */
        s->sector_num += n;
        qemu_co_mutex_unlock(&s->lock);

        if (status == IMG_BLK_DATA ||
            (!s->min_sparse && status == IMG_BLK_ZERO)) {
            s->allocated_done += n;
            img_progress_print(&s->progress, 100.0 * s->allocated_done /
                                             s->allocated_sectors, 0);
        }
        if (status == IMG_BLK_DATA) {
            ret = img_convert_co_read(s, sector_num, n, buf);
            if (ret < 0) {
                error_report("error while reading at byte %" PRId64 ": %s",
                             sector_num << BDRV_SECTOR_BITS, strerror(-ret));
                s->ret = ret;
            }
        } else if (!s->min_sparse && status == IMG_BLK_ZERO) {
            /* -S 0: zeroes are written as data, fully allocating */
            status = IMG_BLK_DATA;
            memset(buf, 0, n * BDRV_SECTOR_SIZE);
        }

        if (s->wr_in_order) {
            /* invariant 2 */
            while (s->wr_offs != sector_num && s->ret == -EINPROGRESS) {
                s->wait_sector_num[index] = sector_num;
                qemu_coroutine_yield();
            }
            s->wait_sector_num[index] = -1;
        }
        /* invariant 2: where the target allocates nothing, overlap */
        if (s->wr_in_order && s->overlap_writes) {
            s->wr_offs = sector_num + n;
            img_convert_wake_next_writer(s);
        }
        if (s->ret == -EINPROGRESS) {
            ret = img_convert_co_write(s, sector_num, n, buf, status);
            if (ret < 0) {
                error_report("error while writing at byte %" PRId64 ": %s",
                             sector_num << BDRV_SECTOR_BITS, strerror(-ret));
                s->ret = ret;
            }
        }
        if (s->wr_in_order && !s->overlap_writes) {
            s->wr_offs = sector_num + n;
            img_convert_wake_next_writer(s);
        }
    }

    qemu_vfree(buf);
    s->co[index] = NULL;
    s->running_coroutines--;
    /* Only the last one knows that every write has completed. */
    if (!s->running_coroutines && s->ret == -EINPROGRESS) {
        s->ret = 0;
    }
}

int img_convert_do_copy(ImgConvertState *s)
{
    AioContext *ctx = qemu_get_aio_context();
    int64_t sector_num = 0, n;

    /*
     * The progress meter counts only what will be written.  The walk is
     * made with or without the meter, as qemu-img makes it: a source
     * whose block status fails (--salvage) is warned about in this walk
     * and again in the copy, as qemu-img does.
     */
    while (sector_num < s->total_sectors) {
        n = img_convert_iteration_sectors(s, sector_num);
        if (n < 0) {
            return n;
        }
        if (s->status == IMG_BLK_DATA ||
            (!s->min_sparse && s->status == IMG_BLK_ZERO)) {
            s->allocated_sectors += n;
        }
        sector_num += n;
    }
    s->sector_next_status = 0;

    s->ret = -EINPROGRESS;
    qemu_co_mutex_init(&s->lock);
    for (int i = 0; i < s->num_coroutines; i++) {
        s->co[i] = qemu_coroutine_create(img_convert_co_do_copy, s);
        s->wait_sector_num[i] = -1;
        s->running_coroutines++;
    }
    for (int i = 0; i < s->num_coroutines; i++) {
        if (s->co[i]) {
            qemu_coroutine_enter(s->co[i]);
        }
    }
    while (s->running_coroutines) {
        aio_poll(ctx, true);
    }
    if (s->compressed && s->ret == 0) {
        /* an empty compressed write tells the format the stream ended */
        s->ret = blk_pwrite_compressed(s->target, 0, 0, NULL);
        if (s->ret < 0) {
            error_report("error while writing at byte 0: %s",
                         strerror(-s->ret));
        }
    }
    return s->ret;
}
