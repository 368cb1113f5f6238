/*
 * qblock-img convert and dd: the sub-commands that copy image content.
 *
 * convert works in 512-byte sectors, as qemu-img does, so that the target
 * gets the same size and the same allocation.  The copy runs in up to 16
 * coroutines (-m) on the main AioContext.  Each takes the next chunk under
 * the state lock: a run of one block status (data, zeroes, or "leave it to
 * the backing file"), at most one buffer long.  Reads run in parallel;
 * writes too with -W, otherwise a coroutine whose chunk is not the next
 * one to be written waits until the chunk before it has been written.
 *
 * Invariants:
 *  1. sector_num only grows, and only under lock: chunks never overlap.
 *  2. Without -W, wr_offs is the end of the last chunk written; a coroutine
 *     writes only when wr_offs equals its chunk's start, so writes are
 *     sequential.
 *  3. A coroutine that waits has wait_sector_num set to its chunk's start;
 *     the owner of the chunk before it wakes it once done, whether it
 *     wrote or gave up after an error, so no waiter is left behind.
 */
#include "qblock-img.h"

#include "block/block_int.h"
#include "block/snapshot.h"

/* Bounds of -S and of the copy buffer, in sectors (16 MiB). */
#define IMG_MAX_BUF_SECTORS 32768
/* Default copy buffer: 2 MiB. */
#define IMG_IO_BUF_SECTORS 4096
/* Default -S: 4 KiB. */
#define IMG_MIN_SPARSE_DEFAULT 8
#define IMG_MAX_COROUTINES 16
/* Clusters per compressed write request, which a format may compress in
 * parallel (qcow2 does, one worker thread per cluster, up to 16). */
#define IMG_COMPRESS_CLUSTERS 16
/* Largest request the block layer takes, in sectors. */
#define IMG_REQUEST_MAX_SECTORS (INT_MAX >> BDRV_SECTOR_BITS)

typedef enum ImgConvertStatus {
    IMG_BLK_ZERO,
    IMG_BLK_DATA,
    IMG_BLK_BACKING_FILE,
} ImgConvertStatus;

typedef struct ImgConvertState {
    /* --- set before the copy starts, read-only after --- */
    BlockBackend **src;
    int64_t *src_sectors;
    int64_t *src_bytes;
    int *src_alignment;
    int src_num;
    int64_t total_sectors;
    BlockBackend *target;
    bool target_has_backing;
    /* length of the new target's backing file in sectors, or -1 */
    int64_t target_backing_sectors;
    bool has_zero_init;
    bool compressed;
    bool salvage;
    bool quiet;
    bool wr_in_order;
    int min_sparse;
    int alignment;
    int64_t cluster_sectors;
    int64_t buf_sectors;
    int num_coroutines;
    ImgProgress progress;
    int64_t allocated_sectors;

    /* --- under lock --- */
    CoMutex lock;
    int64_t sector_num;
    int64_t sector_next_status;
    ImgConvertStatus status;
    int src_cur;
    int64_t src_cur_offset;

    /* --- main context only (coroutines run there) --- */
    /* -EINPROGRESS while copying, then 0 or the first error */
    int ret;
    int running_coroutines;
    int64_t wr_offs;
    int64_t allocated_done;
    Coroutine *co[IMG_MAX_COROUTINES];
    int64_t wait_sector_num[IMG_MAX_COROUTINES];
} ImgConvertState;

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
        if (s->target_has_backing && src_bs->backing) {
            base = src_bs->backing->bs;
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
        if (ret < 0) {
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
        if (s->ret == -EINPROGRESS) {
            ret = img_convert_co_write(s, sector_num, n, buf, status);
            if (ret < 0) {
                error_report("error while writing at byte %" PRId64 ": %s",
                             sector_num << BDRV_SECTOR_BITS, strerror(-ret));
                s->ret = ret;
            }
        }
        if (s->wr_in_order) {
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

static int img_convert_do_copy(ImgConvertState *s)
{
    AioContext *ctx = qemu_get_aio_context();
    int64_t sector_num = 0, n;

    /* The progress meter counts only what will be written. */
    if (s->progress.enabled) {
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
    }

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

static bool img_driver_can_compress(BlockDriver *drv)
{
    return drv->bdrv_co_pwritev_compressed != NULL;
}

/* Command-line settings of convert that are not copy state. */
typedef struct ImgConvertArgs {
    const char *fmt;
    const char *out_fmt;
    const char *out_baseimg;
    const char *backing_fmt;
    const char *cache;
    const char *src_cache;
    const char *options;
    bool image_opts;
    bool tgt_image_opts;
    bool skip_create;
    bool force_share;
    bool progress;
    bool target_is_zero;
    /* -l: a snapshot ID or name, or snapshot.id/snapshot.name options */
    const char *snapshot_name;
    QemuOpts *snapshot_opts;
} ImgConvertArgs;

/* convert -l snapshot.id=ID,snapshot.name=NAME */
static const QemuOptDesc img_internal_snapshot_desc[] = {
    { .name = "snapshot.id", .type = QEMU_OPT_STRING,
      .help = "ID of the internal snapshot" },
    { .name = "snapshot.name", .type = QEMU_OPT_STRING,
      .help = "name of the internal snapshot" },
    { NULL }
};

static const QemuOptsList img_internal_snapshot_opts = {
    .name = "internal-snapshot",
    .desc = img_internal_snapshot_desc,
};

/* Makes the first source show the snapshot -l names (read-only). */
static int img_convert_load_snapshot(ImgConvertState *s,
                                     const ImgConvertArgs *a)
{
    Error *err = NULL;

    if (a->snapshot_opts) {
        bdrv_snapshot_load_tmp(blk_bs(s->src[0]),
                               qemu_opt_get(a->snapshot_opts, "snapshot.id"),
                               qemu_opt_get(a->snapshot_opts,
                                            "snapshot.name"),
                               &err);
    } else if (a->snapshot_name) {
        if (s->src_num > 1) {
            error_report("No support for concatenating multiple snapshot");
            return -EINVAL;
        }
        bdrv_snapshot_load_tmp_by_id_or_name(blk_bs(s->src[0]),
                                             a->snapshot_name, &err);
    }
    if (err) {
        error_report("Failed to load snapshot: %s", error_get_pretty(err));
        error_free(err);
        return -EINVAL;
    }
    return 0;
}

/* Builds the creation options of the target; NULL after an error. */
static QemuOpts *img_convert_create_opts(ImgConvertState *s,
                                         const ImgConvertArgs *a,
                                         BlockDriver *drv,
                                         const char *out_filename,
                                         QemuOptsList **plist)
{
    BlockDriver *proto;
    Error *err = NULL;
    QemuOpts *opts;

    proto = bdrv_find_protocol(out_filename, true, &err);
    if (!proto) {
        error_report_err(err);
        return NULL;
    }
    if (!drv->create_opts) {
        error_report("Format driver '%s' does not support image creation",
                     drv->format_name);
        return NULL;
    }
    if (!proto->create_opts) {
        error_report("Protocol driver '%s' does not support image creation",
                     proto->format_name);
        return NULL;
    }
    *plist = qemu_opts_append(NULL, drv->create_opts);
    *plist = qemu_opts_append(*plist, proto->create_opts);

    opts = a->options ? qemu_opts_parse(*plist, a->options, &err)
                      : qemu_opts_create(*plist);
    if (!opts) {
        error_report_err(err);
        return NULL;
    }
    qemu_opt_set_number(opts, "size", s->total_sectors * BDRV_SECTOR_SIZE,
                        &error_abort);
    if (a->out_baseimg) {
        if (!qemu_opts_find_desc(*plist, "backing_file")) {
            error_report("Backing file not supported for file format '%s'",
                         a->out_fmt);
            qemu_opts_del(opts);
            return NULL;
        }
        qemu_opt_set(opts, "backing_file", a->out_baseimg, &error_abort);
    }
    if (a->backing_fmt) {
        if (!qemu_opts_find_desc(*plist, "backing_fmt")) {
            error_report("Backing file format not supported for file "
                         "format '%s'", a->out_fmt);
            qemu_opts_del(opts);
            return NULL;
        }
        qemu_opt_set(opts, "backing_fmt", a->backing_fmt, &error_abort);
    }
    return opts;
}

static bool img_convert_check_compression(BlockDriver *drv, QemuOpts *opts)
{
    const char *prealloc = qemu_opt_get(opts, "preallocation");

    if (!img_driver_can_compress(drv)) {
        error_report("Compression not supported for this file format");
        return false;
    }
    if (qemu_opt_get_bool(opts, "encryption", false) ||
        qemu_opt_get(opts, "encrypt.format")) {
        error_report("Compression and encryption not supported at the same "
                     "time");
        return false;
    }
    if (prealloc && strcmp(prealloc, "off")) {
        error_report("Compression and preallocation not supported at the "
                     "same time");
        return false;
    }
    return true;
}

/* Opens the sources; sums their sizes. */
static int img_convert_open_sources(ImgConvertState *s,
                                    const ImgConvertArgs *a, char **names)
{
    ImgOpenOptions o = {
        .fmt = a->fmt,
        .image_opts = a->image_opts,
        .force_share = a->force_share,
    };

    if (img_parse_cache(a->src_cache, &o) < 0) {
        error_report("Invalid source cache option: %s", a->src_cache);
        return -EINVAL;
    }
    for (int i = 0; i < s->src_num; i++) {
        BlockDriverState *bs;
        BlockDriverInfo bdi;
        int64_t len;

        s->src[i] = img_open(names[i], &o);
        if (!s->src[i]) {
            return -EINVAL;
        }
        len = blk_getlength(s->src[i]);
        if (len < 0) {
            error_report("Could not get size of %s: %s", names[i],
                         strerror(-len));
            return len;
        }
        s->src_bytes[i] = len;
        s->src_sectors[i] = DIV_ROUND_UP(len, BDRV_SECTOR_SIZE);
        bs = blk_bs(s->src[i]);
        s->src_alignment[i] = DIV_ROUND_UP(bs->bl.request_alignment,
                                           BDRV_SECTOR_SIZE);
        if (!bdrv_get_info(bs, &bdi)) {
            s->src_alignment[i] = MAX(s->src_alignment[i],
                                      bdi.cluster_size / BDRV_SECTOR_SIZE);
        }
        s->total_sectors += s->src_sectors[i];
    }
    return 0;
}

/* Opens the target and sizes the copy to it. */
static int img_convert_open_target(ImgConvertState *s,
                                   const ImgConvertArgs *a,
                                   const char *out_filename)
{
    ImgOpenOptions o = {
        .fmt = a->out_fmt,
        .image_opts = a->skip_create && a->tgt_image_opts,
        .flags = s->min_sparse ? BDRV_O_RDWR | BDRV_O_UNMAP : BDRV_O_RDWR,
    };
    BlockDriverState *out_bs;
    BlockDriverInfo bdi;
    int64_t pow2_min_sparse;

    if (img_parse_cache(a->cache, &o) < 0) {
        error_report("Invalid cache option: %s", a->cache);
        return -EINVAL;
    }
    /* O_DIRECT may need the target grown to the device's sector size. */
    if (o.flags & BDRV_O_NOCACHE) {
        o.flags |= BDRV_O_RESIZE;
    }
    s->target = img_open(out_filename, &o);
    if (!s->target) {
        return -EINVAL;
    }
    out_bs = blk_bs(s->target);
    if (s->compressed && !img_driver_can_compress(out_bs->drv)) {
        error_report("Compression not supported for this file format");
        return -ENOTSUP;
    }

    s->buf_sectors = MIN(IMG_MAX_BUF_SECTORS,
                         MAX(s->buf_sectors,
                             MAX(out_bs->bl.opt_transfer >> BDRV_SECTOR_BITS,
                                 out_bs->bl.pdiscard_alignment >>
                                 BDRV_SECTOR_BITS)));
    /* Writes aligned to the target's requests avoid read-modify-write. */
    pow2_min_sparse = s->min_sparse ? 1 << (63 - clz64(s->min_sparse)) : 0;
    s->alignment = MAX(pow2_min_sparse,
                       DIV_ROUND_UP(out_bs->bl.request_alignment,
                                    BDRV_SECTOR_SIZE));

    if (a->skip_create) {
        int64_t len = blk_getlength(s->target);

        if (len < 0) {
            error_report("unable to get output image length: %s",
                         strerror(-len));
            return -EINVAL;
        }
        if (DIV_ROUND_UP(len, BDRV_SECTOR_SIZE) < s->total_sectors) {
            error_report("output file is smaller than input file");
            return -EINVAL;
        }
    }

    s->target_backing_sectors = -1;
    if (s->target_has_backing && !a->skip_create && out_bs->backing) {
        int64_t len = bdrv_getlength(out_bs->backing->bs);

        /* an unknown length only costs zero writes */
        if (len >= 0) {
            s->target_backing_sectors = DIV_ROUND_UP(len, BDRV_SECTOR_SIZE);
        }
    }

    if (bdrv_get_info(out_bs, &bdi) < 0) {
        if (s->compressed) {
            error_report("could not get block driver info");
            return -EINVAL;
        }
    } else {
        s->cluster_sectors = bdi.cluster_size / BDRV_SECTOR_SIZE;
    }
    if (s->compressed) {
        if (s->cluster_sectors <= 0 || s->cluster_sectors > s->buf_sectors) {
            error_report("invalid cluster size");
            return -EINVAL;
        }
        /* several clusters per request: the driver compresses them in
         * parallel (one worker thread each) */
        s->buf_sectors = MAX(MIN(s->cluster_sectors * IMG_COMPRESS_CLUSTERS,
                                 IMG_MAX_BUF_SECTORS), s->cluster_sectors);
    }
    return 0;
}

static int img_convert_run(ImgConvertState *s, ImgConvertArgs *a,
                           char **names, const char *out_filename)
{
    BlockDriver *drv = NULL;
    QemuOptsList *list = NULL;
    QemuOpts *opts = NULL;
    const char *out_baseimg = a->out_baseimg;
    Error *err = NULL;
    int ret;

    ret = img_convert_open_sources(s, a, names);
    if (ret < 0) {
        goto out;
    }
    ret = img_convert_load_snapshot(s, a);
    if (ret < 0) {
        goto out;
    }

    ret = -EINVAL;
    if (!a->skip_create) {
        drv = bdrv_find_format(a->out_fmt);
        if (!drv) {
            error_report("Unknown file format '%s'", a->out_fmt);
            goto out;
        }
        opts = img_convert_create_opts(s, a, drv, out_filename, &list);
        if (!opts) {
            goto out;
        }
        if (qemu_opt_get(opts, "backing_file")) {
            out_baseimg = qemu_opt_get(opts, "backing_file");
        }
    }
    s->target_has_backing = out_baseimg != NULL;
    if (s->src_num > 1 && out_baseimg) {
        error_report("Having a backing file for the target makes no sense "
                     "when concatenating multiple input images");
        goto out;
    }
    if (out_baseimg && opts && !qemu_opt_get(opts, "backing_fmt")) {
        error_report("Use of backing file requires explicit backing format");
        goto out;
    }
    if (s->compressed && drv && !img_convert_check_compression(drv, opts)) {
        goto out;
    }

    if (!a->skip_create) {
        ret = bdrv_create(drv, out_filename, opts, &err);
        if (ret < 0) {
            error_report("%s: error while converting %s: %s", out_filename,
                         a->out_fmt, error_get_pretty(err));
            error_free(err);
            goto out;
        }
        /* A new image without backing file reads as zeroes. */
        s->has_zero_init = s->min_sparse && !s->target_has_backing;
    }
    if (a->target_is_zero) {
        s->has_zero_init = true;
    }

    ret = img_convert_open_target(s, a, out_filename);
    if (ret < 0) {
        goto out;
    }
    if (!a->target_is_zero && !bdrv_has_zero_init(blk_bs(s->target))) {
        /* A device keeps its old data: zeroes must be written. */
        s->has_zero_init = false;
    }
    ret = img_convert_do_copy(s);

out:
    if (opts) {
        qemu_opts_del(opts);
    }
    qemu_opts_free(list);
    return ret;
}

int img_convert(int argc, char **argv)
{
    enum {
        OPTION_IMAGE_OPTS = 256,
        OPTION_TARGET_IMAGE_OPTS,
        OPTION_SALVAGE,
        OPTION_TARGET_IS_ZERO,
    };
    static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "image-opts", no_argument, NULL, OPTION_IMAGE_OPTS },
        { "target-image-opts", no_argument, NULL, OPTION_TARGET_IMAGE_OPTS },
        { "salvage", no_argument, NULL, OPTION_SALVAGE },
        { "target-is-zero", no_argument, NULL, OPTION_TARGET_IS_ZERO },
        { NULL, 0, NULL, 0 }
    };
    ImgConvertArgs a = {
        .cache = IMG_CACHE_CONVERT_DEFAULT,
        .src_cache = IMG_CACHE_DEFAULT,
    };
    ImgConvertState s = {
        .min_sparse = IMG_MIN_SPARSE_DEFAULT,
        .buf_sectors = IMG_IO_BUF_SECTORS,
        .wr_in_order = true,
        .num_coroutines = 8,
        .cluster_sectors = 0,
    };
    g_autofree char *options = NULL;
    const char *out_filename;
    int64_t sval;
    int c, ret;

    while ((c = getopt_long(argc, argv, ":hf:O:B:cF:o:l:S:pt:T:qnm:WU",
                            long_options, NULL)) != -1) {
        switch (c) {
        case ':':
        case '?':
            img_bad_option(c, argv);
        case 'h':
            img_help();
        case 'f':
            a.fmt = optarg;
            break;
        case 'O':
            a.out_fmt = optarg;
            break;
        case 'B':
            a.out_baseimg = optarg;
            break;
        case 'c':
            s.compressed = true;
            break;
        case 'F':
            a.backing_fmt = optarg;
            break;
        case 'o':
            options = img_accumulate_options(options, optarg);
            break;
        case 'l':
            if (g_str_has_prefix(optarg, "snapshot.")) {
                Error *err = NULL;

                if (a.snapshot_opts) {
                    qemu_opts_del(a.snapshot_opts);
                }
                a.snapshot_opts = qemu_opts_parse(&img_internal_snapshot_opts,
                                                  optarg, &err);
                if (!a.snapshot_opts) {
                    error_report_err(err);
                    error_report("Failed in parsing snapshot param '%s'",
                                 optarg);
                    return 1;
                }
            } else {
                a.snapshot_name = optarg;
            }
            break;
        case 'S':
            sval = img_cvtnum("buffer size for sparse output", optarg);
            if (sval < 0) {
                return 1;
            }
            if (!QEMU_IS_ALIGNED(sval, BDRV_SECTOR_SIZE) ||
                sval / BDRV_SECTOR_SIZE > IMG_MAX_BUF_SECTORS) {
                error_report("Invalid buffer size for sparse output "
                             "specified. Valid sizes are multiples of %llu "
                             "up to %llu. Select 0 to disable sparse "
                             "detection (fully allocates output).",
                             BDRV_SECTOR_SIZE,
                             IMG_MAX_BUF_SECTORS * BDRV_SECTOR_SIZE);
                return 1;
            }
            s.min_sparse = sval / BDRV_SECTOR_SIZE;
            break;
        case 'p':
            a.progress = true;
            break;
        case 't':
            a.cache = optarg;
            break;
        case 'T':
            a.src_cache = optarg;
            break;
        case 'q':
            s.quiet = true;
            break;
        case 'n':
            a.skip_create = true;
            break;
        case 'm':
            if (qemu_strtoi(optarg, NULL, 0, &s.num_coroutines) ||
                s.num_coroutines < 1 ||
                s.num_coroutines > IMG_MAX_COROUTINES) {
                error_report("Invalid number of coroutines. Allowed number "
                             "of coroutines is between 1 and %d",
                             IMG_MAX_COROUTINES);
                return 1;
            }
            break;
        case 'W':
            s.wr_in_order = false;
            break;
        case 'U':
            a.force_share = true;
            break;
        case OPTION_IMAGE_OPTS:
            a.image_opts = true;
            break;
        case OPTION_TARGET_IMAGE_OPTS:
            a.tgt_image_opts = true;
            break;
        case OPTION_SALVAGE:
            s.salvage = true;
            break;
        case OPTION_TARGET_IS_ZERO:
            a.target_is_zero = true;
            break;
        }
    }

    a.options = options;
    if (!a.out_fmt && !a.tgt_image_opts) {
        a.out_fmt = "raw";
    }
    if (a.tgt_image_opts && !a.skip_create) {
        error_report("--target-image-opts requires use of -n flag");
        return 1;
    }
    if (a.skip_create && a.options) {
        error_report("-o has no effect when skipping image creation");
        return 1;
    }
    if (a.target_is_zero && !a.skip_create) {
        error_report("--target-is-zero requires use of -n flag");
        return 1;
    }

    s.src_num = argc - optind - 1;
    out_filename = s.src_num >= 1 ? argv[argc - 1] : NULL;
    if (a.options && img_has_help_option(a.options)) {
        if (!a.out_fmt) {
            error_report("Option help requires a format be specified");
            return 1;
        }
        return img_print_create_help(out_filename, a.out_fmt);
    }
    if (s.src_num < 1) {
        error_report("Must specify image file name");
        return 1;
    }

    img_progress_init(&s.progress, a.progress && !s.quiet, 1.0);
    img_progress_print(&s.progress, 0, 100);

    s.src = g_new0(BlockBackend *, s.src_num);
    s.src_sectors = g_new0(int64_t, s.src_num);
    s.src_bytes = g_new0(int64_t, s.src_num);
    s.src_alignment = g_new0(int, s.src_num);

    ret = img_convert_run(&s, &a, argv + optind, out_filename);

    if (!ret) {
        img_progress_print(&s.progress, 100, 0);
    }
    img_progress_end(&s.progress);
    if (s.target) {
        blk_unref(s.target);
    }
    for (int i = 0; i < s.src_num; i++) {
        if (s.src[i]) {
            blk_unref(s.src[i]);
        }
    }
    g_free(s.src);
    g_free(s.src_sectors);
    g_free(s.src_bytes);
    g_free(s.src_alignment);
    if (a.snapshot_opts) {
        qemu_opts_del(a.snapshot_opts);
    }
    return ret ? 1 : 0;
}

/* The operands of dd, in the units qemu-img uses. */
typedef struct ImgDdArgs {
    const char *in_filename;
    const char *out_filename;
    int64_t bsz;
    int64_t count;
    int64_t skip;
    bool has_count;
    bool has_skip;
} ImgDdArgs;

static int img_dd_operand(ImgDdArgs *dd, const char *arg)
{
    g_autofree char *name = g_strdup(arg);
    char *value = strchr(name, '=');

    if (!value) {
        error_report("unrecognized operand %s", arg);
        return -1;
    }
    *value++ = '\0';
    if (!strcmp(name, "bs")) {
        dd->bsz = img_cvtnum_full("bs", value, 1, INT_MAX);
        return dd->bsz < 0 ? -1 : 0;
    }
    if (!strcmp(name, "count")) {
        dd->count = img_cvtnum("count", value);
        dd->has_count = true;
        return dd->count < 0 ? -1 : 0;
    }
    if (!strcmp(name, "skip")) {
        dd->skip = img_cvtnum("skip", value);
        dd->has_skip = true;
        return dd->skip < 0 ? -1 : 0;
    }
    if (!strcmp(name, "if")) {
        dd->in_filename = arg + (value - name);
        return 0;
    }
    if (!strcmp(name, "of")) {
        dd->out_filename = arg + (value - name);
        return 0;
    }
    error_report("unrecognized operand %s", name);
    return -1;
}

/* Creates the output image of dd with @size bytes. */
static int img_dd_create_output(const char *out_fmt, const char *filename,
                                int64_t size)
{
    BlockDriver *drv = bdrv_find_format(out_fmt);
    BlockDriver *proto;
    QemuOptsList *list;
    QemuOpts *opts;
    Error *err = NULL;
    int ret;

    if (!drv) {
        error_report("Unknown file format");
        return -EINVAL;
    }
    proto = bdrv_find_protocol(filename, true, &err);
    if (!proto) {
        error_report_err(err);
        return -EINVAL;
    }
    if (!drv->create_opts) {
        error_report("Format driver '%s' does not support image creation",
                     drv->format_name);
        return -EINVAL;
    }
    if (!proto->create_opts) {
        error_report("Protocol driver '%s' does not support image creation",
                     proto->format_name);
        return -EINVAL;
    }
    list = qemu_opts_append(NULL, drv->create_opts);
    list = qemu_opts_append(list, proto->create_opts);
    opts = qemu_opts_create(list);
    qemu_opt_set_number(opts, "size", size, &error_abort);
    ret = bdrv_create(drv, filename, opts, &err);
    if (ret < 0) {
        error_report("%s: error while creating output image: %s", filename,
                     error_get_pretty(err));
        error_free(err);
    }
    qemu_opts_del(opts);
    qemu_opts_free(list);
    return ret;
}

int img_dd(int argc, char **argv)
{
    enum {
        OPTION_IMAGE_OPTS = 256,
    };
    static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "image-opts", no_argument, NULL, OPTION_IMAGE_OPTS },
        { "force-share", no_argument, NULL, 'U' },
        { NULL, 0, NULL, 0 }
    };
    ImgDdArgs dd = { .bsz = 512 };
    ImgOpenOptions in_o = { 0 };
    ImgOpenOptions out_o = { .fmt = "raw", .flags = BDRV_O_RDWR };
    BlockBackend *blk_in = NULL, *blk_out = NULL;
    g_autofree uint8_t *buf = NULL;
    int64_t size, in_pos, out_pos;
    bool skip_too_far;
    int c, ret = -1;

    while ((c = getopt_long(argc, argv, ":hf:O:U", long_options,
                            NULL)) != -1) {
        switch (c) {
        case ':':
        case '?':
            img_bad_option(c, argv);
        case 'h':
            img_help();
        case 'f':
            in_o.fmt = optarg;
            break;
        case 'O':
            out_o.fmt = optarg;
            break;
        case 'U':
            in_o.force_share = true;
            break;
        case OPTION_IMAGE_OPTS:
            in_o.image_opts = true;
            break;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (img_dd_operand(&dd, argv[i]) < 0) {
            return 1;
        }
    }
    if (!dd.in_filename || !dd.out_filename) {
        error_report("Must specify both input and output files");
        return 1;
    }

    blk_in = img_open(dd.in_filename, &in_o);
    if (!blk_in) {
        return 1;
    }
    size = blk_getlength(blk_in);
    if (size < 0) {
        error_report("Failed to get size for '%s'", dd.in_filename);
        goto out;
    }
    if (dd.has_count && dd.count <= INT64_MAX / dd.bsz &&
        dd.count * dd.bsz < size) {
        size = dd.count * dd.bsz;
    }
    /* Like dd(1), skipping past the end gives an empty output. */
    skip_too_far = dd.has_skip && (dd.skip > INT64_MAX / dd.bsz ||
                                   size < dd.skip * dd.bsz);
    if (img_dd_create_output(out_o.fmt, dd.out_filename,
                             skip_too_far ? 0 : size - dd.skip * dd.bsz) < 0) {
        goto out;
    }
    blk_out = img_open(dd.out_filename, &out_o);
    if (!blk_out) {
        goto out;
    }
    if (skip_too_far) {
        error_report("%s: cannot skip to specified offset", dd.in_filename);
        in_pos = size;
    } else {
        in_pos = dd.skip * dd.bsz;
    }

    buf = g_malloc(dd.bsz);
    ret = 0;
    for (out_pos = 0; in_pos < size; ) {
        int64_t bytes = MIN(dd.bsz, size - in_pos);

        ret = blk_pread(blk_in, in_pos, bytes, buf, 0);
        if (ret < 0) {
            error_report("error while reading from input image file: %s",
                         strerror(-ret));
            goto out;
        }
        in_pos += bytes;
        ret = blk_pwrite(blk_out, out_pos, bytes, buf, 0);
        if (ret < 0) {
            error_report("error while writing to output image file: %s",
                         strerror(-ret));
            goto out;
        }
        out_pos += bytes;
    }
    ret = 0;
out:
    if (blk_out) {
        blk_unref(blk_out);
    }
    blk_unref(blk_in);
    return ret < 0 ? 1 : 0;
}
