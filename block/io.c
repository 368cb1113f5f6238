/*
 * The request path: byte-granular requests on a node, made to fit what its
 * driver accepts.
 *
 * Every read, write, zero write, discard and truncate on a node passes
 * through here on its way to the driver.  This layer pads requests to the
 * node's request_alignment (read-modify-write for writes), splits them at
 * max_transfer, emulates FUA and zero writes the driver cannot do, turns
 * zero-filled writes into zero writes (detect-zeroes), orders flushes, and
 * counts requests so that drain can wait for them.
 *
 * Invariants:
 *  1. A request is counted in bs->in_flight from its entry until its
 *     completion; drain polls these counters.
 *  2. A read, write or discard is in bs->tracked_requests while it may
 *     reach the driver.  The BdrvTrackedRequest lives in the frame of the
 *     coroutine that issued it and links itself through its embedded link,
 *     so tracking never allocates.
 *  3. bs->serialising_in_flight is the number of tracked requests with
 *     serialising set.  While it is zero no request has to wait for another,
 *     so none walks the list.
 *  4. A serialising request (read-modify-write, BDRV_REQ_SERIALISING)
 *     waits, before it touches the driver, until no tracked request
 *     overlapping its aligned range is left, except requests that already
 *     wait for another one (they will wait for it when they wake: waiting
 *     for them would deadlock).  A non-serialising request waits the same
 *     way for overlapping serialising ones.  Two unaligned writes to one
 *     block therefore never read the old block concurrently.
 *  5. bs->write_gen grows each time a driver's write, zero write, discard
 *     or truncate returns (before FUA is emulated by a flush).  Flushes of
 *     a node run one at a time; each reads write_gen when it starts and,
 *     on success, stores it in flushed_gen.  A flush that finds flushed_gen
 *     equal to write_gen when it starts skips flush_to_disk: every write
 *     completed before it started was completed before the flush that
 *     stored that value started, and is covered.
 *  6. Every range that a write, zero write, discard, copy-on-read write or
 *     growth may have changed is in the node's dirty bitmaps when the
 *     driver returns, failed or not (a failed write may have changed part
 *     of its range): a bitmap never misses a change.  A write, zero
 *     write, discard or copy-on-read write is marked before the driver
 *     sees it (bdrv_write_req_prepare), so that a format storing its
 *     bitmaps meanwhile stores the range; if that set a new bit in a
 *     persistent bitmap, the driver's bdrv_co_mark_bitmaps_in_use runs
 *     first and its error fails the request (qcow2-bitmap.c invariant
 *     4).  bdrv_write_req_finish() marks the range again only if a bitmap
 *     lost bits or a new one began recording meanwhile
 *     (bs->dirty_bitmap_gen moved, dirty-bitmap.c invariant 7): a clear
 *     while the request was in flight still shows it, as in QEMU.
 *  7. Every write, zero write and discard of a node that reached its
 *     driver is shown to each of bs->write_hooks after the driver
 *     returned and before the request stops being tracked, so that a
 *     hook that marks the range dirty does so after the new data is in
 *     place: whoever reads the range after clearing its mark reads the
 *     new data, or sees the mark again.
 *
 * Drain (block/drain.c), block status (block/block-status.c) and the
 * synchronous wrappers (block/io-sync.c) live beside this file; the users
 * above the graph are reached only through the classes of the edges
 * (BdrvChildClass), never by name.
 *
 * All functions run in the node's AioContext thread.
 */

#include "block/block_int.h"
#include "block/dirty-bitmap.h"
#include "io-internal.h"

/*
 * Largest request passed to a driver in one call when the node sets no
 * max_transfer: drivers and iovec totals keep byte counts in int.
 */
#define BDRV_REQUEST_MAX_BYTES ((int64_t)INT_MAX & ~(BDRV_MAX_ALIGNMENT - 1))
/*
 * Size of the zeroed buffer written when a driver cannot zero a range
 * itself: large enough that a big range takes few requests, small enough
 * not to matter in memory.
 */
#define BDRV_ZERO_BOUNCE_MAX (1 * MiB)

/* The most bytes one driver call may carry, a multiple of @align. */
static int64_t bdrv_max_transfer(BlockDriverState *bs, int64_t align)
{
    int64_t max = BDRV_REQUEST_MAX_BYTES;

    if (bs->bl.max_transfer && bs->bl.max_transfer < (uint64_t)max) {
        max = bs->bl.max_transfer;
    }
    return MAX(QEMU_ALIGN_DOWN(max, align), align);
}

static int bdrv_check_request(int64_t offset, int64_t bytes)
{
    if (offset < 0 || bytes < 0 || bytes > BDRV_MAX_LENGTH ||
        offset > BDRV_MAX_LENGTH - bytes) {
        return -EIO;
    }
    return 0;
}

static int bdrv_check_writable(BlockDriverState *bs)
{
    if (bs->read_only || (bs->open_flags & BDRV_O_INACTIVE)) {
        return -EPERM;
    }
    /* a format that found its metadata inconsistent takes no more writes */
    if (bs->corrupt) {
        return -EIO;
    }
    return 0;
}

/* Whether a request changes the node (and so needs it writable). */
typedef enum BdrvRequestKind {
    BDRV_REQUEST_READ,
    BDRV_REQUEST_WRITE,
} BdrvRequestKind;

/*
 * What every request checks before it starts: that @child leads to a node
 * with a driver (-ENOMEDIUM), that the range is one the request path takes
 * (-EIO), and for a write that the node takes writes.  Sets *@pbs to the
 * node.  Returns 0 or -errno.
 */
static int bdrv_request_prologue(BdrvChild *child, int64_t offset,
                                 int64_t bytes, BdrvRequestKind kind,
                                 BlockDriverState **pbs)
{
    BlockDriverState *bs = child ? child->bs : NULL;
    int ret;

    if (!bs || !bs->drv) {
        return -ENOMEDIUM;
    }
    ret = bdrv_check_request(offset, bytes);
    if (ret < 0) {
        return ret;
    }
    if (kind == BDRV_REQUEST_WRITE) {
        ret = bdrv_check_writable(bs);
        if (ret < 0) {
            return ret;
        }
    }
    *pbs = bs;
    return 0;
}

/*
 * The length of the next piece of a range that goes to the driver in
 * pieces aligned to @piece_align where the range allows (zero writes,
 * discards): up to the next boundary while the range starts unaligned,
 * then the aligned bulk, then the unaligned tail; never over @max.
 */
static int64_t bdrv_next_piece(int64_t offset, int64_t bytes,
                               int64_t piece_align, int64_t max)
{
    int64_t head = offset % piece_align;
    int64_t num = bytes;

    if (head) {
        /* reach the next boundary first */
        num = MIN(bytes, piece_align - head);
    } else if (num > piece_align && (offset + num) % piece_align) {
        /* the aligned bulk, leaving the unaligned tail for last */
        num -= (offset + num) % piece_align;
    }
    return MIN(num, max);
}

/*
 * The largest piece of a zero write or discard: the node's @limit (0: none)
 * rounded down to the piece alignment @piece_align, at least @align.
 */
static int64_t bdrv_max_piece(int64_t limit, int64_t piece_align,
                              int64_t align)
{
    int64_t max = BDRV_MAX_LENGTH;

    if (limit > 0) {
        max = MIN(max, limit);
    }
    return MAX(QEMU_ALIGN_DOWN(max, piece_align), align);
}

/* bdrv_write_req_finish()'s @marked_gen when nothing was marked before. */
#define BDRV_WRITE_REQ_UNMARKED UINT64_MAX

/*
 * What follows every request that may have changed [offset, offset +
 * bytes) of @bs (invariant 6): @marked_gen is bs->dirty_bitmap_gen when
 * bdrv_write_req_prepare() marked the range; a node without bitmaps pays
 * one test.
 */
static inline void bdrv_write_req_finish(BlockDriverState *bs,
                                         int64_t offset, int64_t bytes,
                                         uint64_t marked_gen)
{
    if (bs->dirty_bitmaps && bs->dirty_bitmap_gen != marked_gen) {
        bdrv_set_dirty(bs, offset, bytes);
    }
}

/*
 * What precedes every write, zero write, discard and copy-on-read write of
 * [offset, offset + bytes) of @bs: the write threshold and invariant 6;
 * sets *@marked_gen for bdrv_write_req_finish().  A node without bitmaps
 * or threshold pays two tests.
 */
static inline int coroutine_fn bdrv_write_req_prepare(BlockDriverState *bs,
                                                      int64_t offset,
                                                      int64_t bytes,
                                                      uint64_t *marked_gen)
{
    *marked_gen = BDRV_WRITE_REQ_UNMARKED;
    bdrv_write_threshold_check_write(bs, offset, bytes);
    if (!bs->dirty_bitmaps) {
        return 0;
    }
    *marked_gen = bs->dirty_bitmap_gen;
    if (bdrv_set_dirty(bs, offset, bytes) &&
        bs->drv->bdrv_co_mark_bitmaps_in_use) {
        return bs->drv->bdrv_co_mark_bitmaps_in_use(bs);
    }
    return 0;
}

/* ---- tracked requests and serialisation ---- */

static void tracked_request_begin(BdrvTrackedRequest *req,
                                  BlockDriverState *bs, int64_t offset,
                                  int64_t bytes, bool is_write)
{
    *req = (BdrvTrackedRequest) {
        .bs = bs,
        .offset = offset,
        .bytes = bytes,
        .is_write = is_write,
        .overlap_offset = offset,
        .overlap_bytes = bytes,
        .co = qemu_coroutine_self(),
    };
    qemu_co_queue_init(&req->wait_queue);
    req->link.data = req;
    req->link.next = bs->tracked_requests;
    if (bs->tracked_requests) {
        bs->tracked_requests->prev = &req->link;
    }
    bs->tracked_requests = &req->link;
}

/* Makes @req serialise against everything in its range rounded to @align. */
static void tracked_request_serialise(BdrvTrackedRequest *req, int64_t align)
{
    int64_t start = QEMU_ALIGN_DOWN(req->offset, align);
    int64_t end = QEMU_ALIGN_UP(req->offset + req->bytes, align);

    req->overlap_offset = MIN(req->overlap_offset, start);
    req->overlap_bytes = MAX(req->overlap_offset + req->overlap_bytes, end) -
                         req->overlap_offset;
    if (!req->serialising) {
        req->serialising = true;
        req->bs->serialising_in_flight++;
    }
}

static void tracked_request_end(BdrvTrackedRequest *req)
{
    BlockDriverState *bs = req->bs;

    if (req->serialising) {
        assert(bs->serialising_in_flight > 0);
        bs->serialising_in_flight--;
    }
    bs->tracked_requests = g_list_remove_link(bs->tracked_requests,
                                              &req->link);
    qemu_co_queue_restart_all(&req->wait_queue);
}

static bool tracked_requests_overlap(BdrvTrackedRequest *a,
                                     BdrvTrackedRequest *b)
{
    return a->overlap_offset < b->overlap_offset + b->overlap_bytes &&
           b->overlap_offset < a->overlap_offset + a->overlap_bytes;
}

static BdrvTrackedRequest *tracked_request_conflict(BdrvTrackedRequest *self)
{
    GList *l;

    for (l = self->bs->tracked_requests; l; l = l->next) {
        BdrvTrackedRequest *req = l->data;

        if (req == self || (!req->serialising && !self->serialising)) {
            continue;
        }
        if (!tracked_requests_overlap(self, req)) {
            continue;
        }
        /* A driver issuing a nested request on its own range deadlocks. */
        assert(req->co != self->co);
        if (!req->waiting_for) {
            return req;
        }
    }
    return NULL;
}

/* Invariant 4. */
static void coroutine_fn tracked_request_wait(BdrvTrackedRequest *self)
{
    BdrvTrackedRequest *req;

    if (!self->bs->serialising_in_flight) {
        return;
    }
    while ((req = tracked_request_conflict(self))) {
        self->waiting_for = req;
        qemu_co_queue_wait(&req->wait_queue, NULL);
        self->waiting_for = NULL;
    }
}

/* ---- calls into the driver ---- */

/*
 * The vector a driver call gets: @qiov itself when it is exactly the
 * @bytes from @qiov_offset, else *@slice made to view them;
 * bdrv_driver_qiov_put() frees the slice.
 */
static QEMUIOVector *bdrv_driver_qiov_get(QEMUIOVector *qiov,
                                          size_t qiov_offset, int64_t bytes,
                                          QEMUIOVector *slice)
{
    if (!qiov_offset && qiov->size == (size_t)bytes) {
        return qiov;
    }
    qemu_iovec_init_slice(slice, qiov, qiov_offset, bytes);
    return slice;
}

static void bdrv_driver_qiov_put(QEMUIOVector *q, QEMUIOVector *slice)
{
    if (q == slice) {
        qemu_iovec_destroy(slice);
    }
}

static int coroutine_fn bdrv_driver_preadv(BlockDriverState *bs,
                                           int64_t offset, int64_t bytes,
                                           QEMUIOVector *qiov,
                                           size_t qiov_offset)
{
    QEMUIOVector slice;
    QEMUIOVector *q;
    int ret;

    if (!bs->drv->bdrv_co_preadv) {
        return -ENOTSUP;
    }
    q = bdrv_driver_qiov_get(qiov, qiov_offset, bytes, &slice);
    bs->stats.reads++;
    bs->stats.bytes_read += bytes;
    ret = bs->drv->bdrv_co_preadv(bs, offset, bytes, q, 0);
    bdrv_driver_qiov_put(q, &slice);
    return ret;
}

/* Writes @bytes of @qiov from @qiov_offset, emulating FUA by a flush. */
static int coroutine_fn bdrv_driver_pwritev(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov,
                                            size_t qiov_offset,
                                            BdrvRequestFlags flags)
{
    QEMUIOVector slice;
    QEMUIOVector *q;
    int ret;

    if (!bs->drv->bdrv_co_pwritev) {
        return -ENOTSUP;
    }
    q = bdrv_driver_qiov_get(qiov, qiov_offset, bytes, &slice);
    bs->stats.writes++;
    bs->stats.bytes_written += bytes;
    ret = bs->drv->bdrv_co_pwritev(bs, offset, bytes, q,
                                   flags & bs->supported_write_flags);
    bs->write_gen++;
    bdrv_driver_qiov_put(q, &slice);
    if (ret == 0 && (flags & BDRV_REQ_FUA) &&
        !(bs->supported_write_flags & BDRV_REQ_FUA)) {
        ret = bdrv_co_flush(bs);
    }
    return ret;
}

static int coroutine_fn bdrv_driver_pwritev_compressed(BlockDriverState *bs,
                                                       int64_t offset,
                                                       int64_t bytes,
                                                       QEMUIOVector *qiov,
                                                       size_t qiov_offset)
{
    QEMUIOVector slice;
    QEMUIOVector *q;
    int ret;

    if (!bs->drv->bdrv_co_pwritev_compressed) {
        return -ENOTSUP;
    }
    q = bdrv_driver_qiov_get(qiov, qiov_offset, bytes, &slice);
    bs->stats.writes++;
    bs->stats.bytes_written += bytes;
    ret = bs->drv->bdrv_co_pwritev_compressed(bs, offset, bytes, q);
    bs->write_gen++;
    bdrv_driver_qiov_put(q, &slice);
    return ret;
}

/*
 * Writes zeroes with a bounce buffer over [offset, offset + bytes), in
 * chunks of at most max_transfer.  FUA is kept for the caller to emulate
 * once (*need_flush) rather than once per chunk.
 */
static int coroutine_fn bdrv_write_zero_buffer(BlockDriverState *bs,
                                               int64_t offset, int64_t bytes,
                                               int64_t max_transfer,
                                               BdrvRequestFlags flags,
                                               bool *need_flush)
{
    BdrvRequestFlags wflags = flags & BDRV_REQ_FUA;
    int64_t chunk = MIN(MIN(bytes, max_transfer), BDRV_ZERO_BOUNCE_MAX);
    QEMUIOVector qiov;
    void *buf;
    int ret = 0;

    if ((wflags & BDRV_REQ_FUA) &&
        !(bs->supported_write_flags & BDRV_REQ_FUA)) {
        wflags &= ~BDRV_REQ_FUA;
        *need_flush = true;
    }
    buf = qemu_try_blockalign(bs, chunk);
    if (!buf) {
        return -ENOMEM;
    }
    memset(buf, 0, chunk);
    while (bytes > 0 && ret == 0) {
        int64_t num = MIN(bytes, chunk);

        qemu_iovec_init_buf(&qiov, buf, num);
        ret = bdrv_driver_pwritev(bs, offset, num, &qiov, 0, wflags);
        offset += num;
        bytes -= num;
    }
    qemu_vfree(buf);
    return ret;
}

/*
 * Zeroes an aligned range: the driver's own zero write where it has one
 * (its bulk aligned to pwrite_zeroes_alignment, pieces of at most
 * max_pwrite_zeroes), else a zeroed buffer unless NO_FALLBACK.
 */
static int coroutine_fn bdrv_do_pwrite_zeroes(BlockDriverState *bs,
                                              int64_t offset, int64_t bytes,
                                              BdrvRequestFlags flags)
{
    const BlockDriver *drv = bs->drv;
    int64_t align = bdrv_request_align(bs);
    int64_t zalign = MAX((int64_t)bs->bl.pwrite_zeroes_alignment, align);
    int64_t max_zeroes = bdrv_max_piece(bs->bl.max_pwrite_zeroes, zalign,
                                        align);
    int64_t max_transfer = bdrv_max_transfer(bs, align);
    bool need_flush = false;
    int ret = 0;

    if ((flags & BDRV_REQ_NO_FALLBACK) &&
        !(bs->supported_zero_flags & BDRV_REQ_NO_FALLBACK)) {
        return -ENOTSUP;
    }
    while (bytes > 0 && ret == 0) {
        int64_t num = bdrv_next_piece(offset, bytes, zalign, max_zeroes);

        ret = -ENOTSUP;
        if (drv->bdrv_co_pwrite_zeroes) {
            bs->stats.zero_writes++;
            ret = drv->bdrv_co_pwrite_zeroes(bs, offset, num,
                                             flags & bs->supported_zero_flags);
            bs->write_gen++;
            if (ret == 0 && (flags & BDRV_REQ_FUA) &&
                !(bs->supported_zero_flags & BDRV_REQ_FUA)) {
                need_flush = true;
            }
        }
        if (ret == -ENOTSUP && !(flags & BDRV_REQ_NO_FALLBACK)) {
            ret = bdrv_write_zero_buffer(bs, offset, num, max_transfer, flags,
                                         &need_flush);
        }
        offset += num;
        bytes -= num;
    }
    if (ret == 0 && need_flush) {
        ret = bdrv_co_flush(bs);
    }
    return ret;
}

/* ---- aligned requests ---- */

/*
 * Reads an aligned range.  Bytes past the end of the node read as zeroes;
 * the driver sees at most the block that holds the end.
 */
static int coroutine_fn bdrv_aligned_preadv(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            int64_t align, QEMUIOVector *qiov,
                                            size_t qiov_offset)
{
    int64_t max_transfer = bdrv_max_transfer(bs, align);
    int64_t total = bdrv_getlength(bs);
    int64_t max_bytes;
    int64_t done = 0;

    if (total < 0) {
        return total;
    }
    max_bytes = QEMU_ALIGN_UP(MAX(0, total - offset), align);
    if (bytes <= max_bytes && bytes <= max_transfer) {
        return bdrv_driver_preadv(bs, offset, bytes, qiov, qiov_offset);
    }
    while (done < bytes) {
        int64_t num = bytes - done;
        int ret = 0;

        if (max_bytes > 0) {
            num = MIN(num, MIN(max_bytes, max_transfer));
            ret = bdrv_driver_preadv(bs, offset + done, num, qiov,
                                     qiov_offset + done);
            max_bytes -= num;
        } else {
            qemu_iovec_memset(qiov, qiov_offset + done, 0, num);
        }
        if (ret < 0) {
            return ret;
        }
        done += num;
    }
    return 0;
}

/*
 * Writes an aligned range; @qiov is NULL for zero writes.  With FUA split
 * over several driver calls and emulated, only the last one flushes.
 */
static int coroutine_fn bdrv_aligned_pwritev(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             int64_t align,
                                             QEMUIOVector *qiov,
                                             size_t qiov_offset,
                                             BdrvRequestFlags flags)
{
    int64_t max_transfer = bdrv_max_transfer(bs, align);
    int64_t done = 0;
    int ret = 0;

    if (qiov && bs->detect_zeroes != BLOCKDEV_DETECT_ZEROES_OPTIONS_OFF &&
        !(flags & BDRV_REQ_WRITE_COMPRESSED) &&
        bs->drv->bdrv_co_pwrite_zeroes &&
        qemu_iovec_is_zero(qiov, qiov_offset, bytes)) {
        flags |= BDRV_REQ_ZERO_WRITE;
        if (bs->detect_zeroes == BLOCKDEV_DETECT_ZEROES_OPTIONS_UNMAP &&
            (bs->open_flags & BDRV_O_UNMAP)) {
            flags |= BDRV_REQ_MAY_UNMAP;
        }
    }

    /*
     * The events are emitted on the node being written: a blkdebug node
     * sees its own writes, so that rules on "pwritev" fire once per write
     * that reaches it, whatever format sits above.
     */
    if (flags & BDRV_REQ_ZERO_WRITE) {
        bdrv_debug_event(bs, BLKDBG_PWRITEV_ZERO);
        ret = bdrv_do_pwrite_zeroes(bs, offset, bytes, flags);
    } else if (flags & BDRV_REQ_WRITE_COMPRESSED) {
        ret = bdrv_driver_pwritev_compressed(bs, offset, bytes, qiov,
                                             qiov_offset);
    } else if (bytes <= max_transfer) {
        bdrv_debug_event(bs, BLKDBG_PWRITEV);
        ret = bdrv_driver_pwritev(bs, offset, bytes, qiov, qiov_offset,
                                  flags);
    } else {
        bdrv_debug_event(bs, BLKDBG_PWRITEV);
        while (done < bytes && ret == 0) {
            int64_t num = MIN(bytes - done, max_transfer);
            BdrvRequestFlags f = flags;

            if (done + num < bytes &&
                !(bs->supported_write_flags & BDRV_REQ_FUA)) {
                f &= ~BDRV_REQ_FUA;
            }
            ret = bdrv_driver_pwritev(bs, offset + done, num, qiov,
                                      qiov_offset + done, f);
            done += num;
        }
    }
    bdrv_debug_event(bs, BLKDBG_PWRITEV_DONE);
    return ret;
}

/* ---- copy-on-read ---- */

/* Bounce buffers of copy-on-read are at most this big. */
#define BDRV_COR_MAX_CHUNK (1 * MiB)

/* Copy-on-read copies whole clusters of the node's format (or blocks). */
static int64_t bdrv_cor_align(BlockDriverState *bs, int64_t align)
{
    BlockDriverInfo bdi;

    if (bdrv_get_info(bs, &bdi) == 0 && bdi.cluster_size > align &&
        is_power_of_2(bdi.cluster_size)) {
        return bdi.cluster_size;
    }
    return align;
}

/*
 * A read that also copies what it reads from below (the backing chain,
 * or the zeroes of an unallocated range) into @bs, so that the next read finds it there (qemu-io -C, QEMU's
 * copy-on-read).  [offset, offset + bytes) is aligned to @align; the copy
 * covers whole clusters around it, which the caller has serialised against
 * every other request.  Ranges already allocated in @bs are read as usual.
 */
static int coroutine_fn bdrv_cor_preadv(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, int64_t align,
                                        int64_t cluster, QEMUIOVector *qiov,
                                        size_t qiov_offset)
{
    int64_t total = bdrv_getlength(bs);
    int64_t pos = QEMU_ALIGN_DOWN(offset, cluster);
    int64_t end;
    uint8_t *bounce = NULL;
    int ret = 0;

    if (total < 0) {
        return total;
    }
    end = MIN(QEMU_ALIGN_UP(offset + bytes, cluster),
              QEMU_ALIGN_UP(total, align));
    if (end <= offset) {
        /* entirely past the end: zeroes, nothing to copy */
        return bdrv_aligned_preadv(bs, offset, bytes, align, qiov,
                                   qiov_offset);
    }
    while (pos < end && ret == 0) {
        int64_t pnum, chunk, from, to;
        QEMUIOVector q;

        ret = bdrv_co_is_allocated(bs, pos, end - pos, &pnum);
        if (ret < 0) {
            break;
        }
        chunk = MIN(pnum, BDRV_COR_MAX_CHUNK);
        if (ret == 0 && chunk > cluster) {
            chunk = QEMU_ALIGN_DOWN(chunk, cluster);
        }
        chunk = QEMU_ALIGN_UP(chunk, align);
        from = MAX(pos, offset);
        to = MIN(pos + chunk, offset + bytes);
        if (ret) {
            ret = to > from ? bdrv_aligned_preadv(bs, from, to - from, align,
                                                  qiov,
                                                  qiov_offset + from - offset)
                            : 0;
        } else {
            if (!bounce) {
                bounce = qemu_try_blockalign(bs, BDRV_COR_MAX_CHUNK);
                if (!bounce) {
                    ret = -ENOMEM;
                    break;
                }
            }
            qemu_iovec_init_buf(&q, bounce, chunk);
            ret = bdrv_aligned_preadv(bs, pos, chunk, align, &q, 0);
            if (ret == 0) {
                uint64_t marked_gen;
                /*
                 * Zeroes are copied as a zero write (a zero cluster rather
                 * than data), as QEMU does, whatever detect-zeroes says.
                 */
                bool zero = bs->drv->bdrv_co_pwrite_zeroes &&
                            buffer_is_zero(bounce, chunk);

                BLKDBG_EVENT(bs->file, BLKDBG_COR_WRITE);
                ret = bdrv_write_req_prepare(bs, pos, chunk, &marked_gen);
                if (ret == 0) {
                    ret = bdrv_aligned_pwritev(
                        bs, pos, chunk, align, zero ? NULL : &q, 0,
                        BDRV_REQ_WRITE_UNCHANGED |
                        (zero ? BDRV_REQ_ZERO_WRITE : 0));
                }
                bdrv_write_req_finish(bs, pos, chunk, marked_gen);
            }
            if (ret == 0 && to > from) {
                qemu_iovec_from_buf(qiov, qiov_offset + from - offset,
                                    bounce + from - pos, to - from);
            }
        }
        pos += chunk;
    }
    qemu_vfree(bounce);
    return ret < 0 ? ret : 0;
}

/* ---- padding to the request alignment ---- */

/*
 * An unaligned request widened to whole blocks: the head block (if the
 * request starts inside one) and the tail block (if it ends inside one)
 * live in @buf; @qiov is head padding + the caller's buffer + tail padding.
 */
typedef struct BdrvPadding {
    int64_t start;          /* aligned start of the widened request */
    int64_t end;            /* aligned end */
    int64_t head;           /* bytes of padding before the request */
    int64_t tail;           /* bytes of padding after it */
    int64_t align;
    uint8_t *buf;           /* head block, then tail block if distinct */
    uint8_t *tail_block;
    QEMUIOVector qiov;
} BdrvPadding;

static bool bdrv_needs_padding(int64_t offset, int64_t bytes, int64_t align)
{
    return !QEMU_IS_ALIGNED(offset, align) ||
           !QEMU_IS_ALIGNED(offset + bytes, align);
}

static int bdrv_padding_init(BdrvPadding *pad, BlockDriverState *bs,
                             int64_t offset, int64_t bytes, int64_t align,
                             QEMUIOVector *qiov)
{
    int64_t blocks;

    pad->align = align;
    pad->start = QEMU_ALIGN_DOWN(offset, align);
    pad->end = QEMU_ALIGN_UP(offset + bytes, align);
    pad->head = offset - pad->start;
    pad->tail = pad->end - (offset + bytes);
    blocks = (pad->head && pad->tail && pad->end - pad->start > align) ? 2 : 1;
    pad->buf = qemu_try_blockalign(bs, blocks * align);
    if (!pad->buf) {
        return -ENOMEM;
    }
    pad->tail_block = pad->buf + (blocks - 1) * align;
    if (qiov) {
        qemu_iovec_init(&pad->qiov, qiov->niov + 2);
        if (pad->head) {
            qemu_iovec_add(&pad->qiov, pad->buf, pad->head);
        }
        qemu_iovec_concat(&pad->qiov, qiov, 0, bytes);
        if (pad->tail) {
            qemu_iovec_add(&pad->qiov, pad->tail_block + align - pad->tail,
                           pad->tail);
        }
    }
    return 0;
}

static void bdrv_padding_destroy(BdrvPadding *pad, bool has_qiov)
{
    if (has_qiov) {
        qemu_iovec_destroy(&pad->qiov);
    }
    qemu_vfree(pad->buf);
}

/* Reads the current content of the head and tail blocks into pad->buf. */
static int coroutine_fn bdrv_padding_read(BlockDriverState *bs,
                                          BdrvPadding *pad)
{
    QEMUIOVector q;
    int ret;

    if (pad->head) {
        qemu_iovec_init_buf(&q, pad->buf, pad->align);
        bdrv_debug_event(bs, BLKDBG_PWRITEV_RMW_HEAD);
        ret = bdrv_aligned_preadv(bs, pad->start, pad->align, pad->align,
                                  &q, 0);
        if (ret < 0) {
            return ret;
        }
        bdrv_debug_event(bs, BLKDBG_PWRITEV_RMW_AFTER_HEAD);
    }
    if (pad->tail && !(pad->head && pad->tail_block == pad->buf)) {
        qemu_iovec_init_buf(&q, pad->tail_block, pad->align);
        bdrv_debug_event(bs, BLKDBG_PWRITEV_RMW_TAIL);
        ret = bdrv_aligned_preadv(bs, pad->end - pad->align, pad->align,
                                  pad->align, &q, 0);
        if (ret < 0) {
            return ret;
        }
        bdrv_debug_event(bs, BLKDBG_PWRITEV_RMW_AFTER_TAIL);
    }
    return 0;
}

/* An unaligned write: read the edge blocks, merge, write whole blocks. */
static int coroutine_fn bdrv_rmw_pwritev(BlockDriverState *bs,
                                         int64_t offset, int64_t bytes,
                                         int64_t align, QEMUIOVector *qiov,
                                         BdrvRequestFlags flags)
{
    BdrvPadding pad;
    int ret;

    ret = bdrv_padding_init(&pad, bs, offset, bytes, align, qiov);
    if (ret < 0) {
        return ret;
    }
    ret = bdrv_padding_read(bs, &pad);
    if (ret == 0) {
        ret = bdrv_aligned_pwritev(bs, pad.start, pad.end - pad.start, align,
                                   &pad.qiov, 0, flags);
    }
    bdrv_padding_destroy(&pad, true);
    return ret;
}

/*
 * An unaligned zero write: the partial edge blocks are rewritten with
 * zeroes merged in, the aligned middle is zeroed as such.
 */
static int coroutine_fn bdrv_rmw_pwrite_zeroes(BlockDriverState *bs,
                                               int64_t offset, int64_t bytes,
                                               int64_t align,
                                               BdrvRequestFlags flags)
{
    BdrvRequestFlags dflags = flags & BDRV_REQ_FUA;
    uint8_t *buf;
    QEMUIOVector q;
    int ret = 0;

    buf = qemu_try_blockalign(bs, align);
    if (!buf) {
        return -ENOMEM;
    }
    qemu_iovec_init_buf(&q, buf, align);
    if (!QEMU_IS_ALIGNED(offset, align)) {
        int64_t start = QEMU_ALIGN_DOWN(offset, align);
        int64_t head = offset - start;
        int64_t num = MIN(bytes, align - head);

        ret = bdrv_aligned_preadv(bs, start, align, align, &q, 0);
        if (ret == 0) {
            memset(buf + head, 0, num);
            ret = bdrv_aligned_pwritev(bs, start, align, align, &q, 0, dflags);
        }
        offset += num;
        bytes -= num;
    }
    if (ret == 0 && bytes >= align) {
        int64_t num = QEMU_ALIGN_DOWN(bytes, align);

        ret = bdrv_aligned_pwritev(bs, offset, num, align, NULL, 0, flags);
        offset += num;
        bytes -= num;
    }
    if (ret == 0 && bytes > 0) {
        ret = bdrv_aligned_preadv(bs, offset, align, align, &q, 0);
        if (ret == 0) {
            memset(buf, 0, bytes);
            ret = bdrv_aligned_pwritev(bs, offset, align, align, &q, 0,
                                       dflags);
        }
    }
    qemu_vfree(buf);
    return ret;
}

/* ---- public request functions ---- */

/* Largest bounce buffer of a prefetch that has to read. */
#define BDRV_PREFETCH_CHUNK (1 * MiB)

/*
 * A prefetch: the caller wants [offset, offset + bytes) pulled into the
 * layers below (or, with copy-on-read, into this node), not the data.  A
 * driver that can do that itself (supported_read_flags) gets the request
 * with no buffer, rounded out to its alignment and split at its maximum
 * transfer (reading more than asked is harmless); otherwise, and
 * whenever the node copies on read, it is a read into a buffer that is
 * dropped, which is what pulls the data through every layer.
 */
static int coroutine_fn bdrv_co_prefetch(BdrvChild *child, int64_t offset,
                                         int64_t bytes,
                                         BdrvRequestFlags flags)
{
    BlockDriverState *bs = child->bs;
    int64_t align = bdrv_request_align(bs);
    int64_t total, end, max_transfer;
    BdrvTrackedRequest req;
    int ret = 0;

    flags &= ~BDRV_REQ_PREFETCH;
    if ((flags & BDRV_REQ_COPY_ON_READ) ||
        (bs->open_flags & BDRV_O_COPY_ON_READ) ||
        !(bs->supported_read_flags & BDRV_REQ_PREFETCH)) {
        int64_t chunk = MIN(bytes, BDRV_PREFETCH_CHUNK);
        void *buf = qemu_try_blockalign(bs, chunk);

        if (!buf) {
            return -ENOMEM;
        }
        for (int64_t done = 0; done < bytes && ret == 0; done += chunk) {
            QEMUIOVector qiov;

            chunk = MIN(bytes - done, BDRV_PREFETCH_CHUNK);
            qemu_iovec_init_buf(&qiov, buf, chunk);
            ret = bdrv_co_preadv(child, offset + done, chunk, &qiov, flags);
        }
        qemu_vfree(buf);
        return ret;
    }

    total = bdrv_getlength(bs);
    if (total < 0) {
        return total;
    }
    end = MIN(QEMU_ALIGN_UP(offset + bytes, align), total);
    offset = QEMU_ALIGN_DOWN(offset, align);
    max_transfer = QEMU_ALIGN_DOWN(bdrv_max_transfer(bs, align), align);
    bdrv_inc_in_flight(bs);
    tracked_request_begin(&req, bs, offset, MAX(end - offset, 0), false);
    tracked_request_wait(&req);
    while (offset < end && ret == 0) {
        int64_t num = MIN(end - offset, max_transfer);

        bs->stats.reads++;
        ret = bs->drv->bdrv_co_preadv(bs, offset, num, NULL,
                                      BDRV_REQ_PREFETCH);
        offset += num;
    }
    tracked_request_end(&req);
    bdrv_dec_in_flight(bs);
    return ret;
}

int coroutine_fn bdrv_co_preadv(BdrvChild *child, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags)
{
    BlockDriverState *bs;
    BdrvTrackedRequest req;
    int64_t align, cor_align = 0;
    int ret;

    ret = bdrv_request_prologue(child, offset, bytes, BDRV_REQUEST_READ, &bs);
    if (ret < 0) {
        return ret;
    }
    if (flags & BDRV_REQ_PREFETCH) {
        /* the one read without a buffer */
        return bytes ? bdrv_co_prefetch(child, offset, bytes, flags) : 0;
    }
    assert(qiov && qiov->size >= (size_t)bytes);
    if (bytes == 0) {
        return 0;
    }
    align = bdrv_request_align(bs);
    /*
     * Copying needs a writable node, and a user that may write to it,
     * if only what it reads already (WRITE_UNCHANGED: a copy-on-read
     * filter above it, as in QEMU).  Without a backing file, what is
     * unallocated is copied too, as zeroes (QEMU does the same: the
     * image then says where it reads as zero).
     */
    if (bs->open_flags & BDRV_O_COPY_ON_READ) {
        flags |= BDRV_REQ_COPY_ON_READ;
    }
    if ((flags & BDRV_REQ_COPY_ON_READ) &&
        (bdrv_check_writable(bs) < 0 ||
         !(bs->perm & (BLK_PERM_WRITE | BLK_PERM_WRITE_UNCHANGED)))) {
        flags &= ~BDRV_REQ_COPY_ON_READ;
    }

    bdrv_inc_in_flight(bs);
    tracked_request_begin(&req, bs, offset, bytes, false);
    if (flags & BDRV_REQ_COPY_ON_READ) {
        cor_align = bdrv_cor_align(bs, align);
        tracked_request_serialise(&req, cor_align);
    } else if (flags & BDRV_REQ_SERIALISING) {
        tracked_request_serialise(&req, align);
    }
    tracked_request_wait(&req);

    if (bdrv_needs_padding(offset, bytes, align)) {
        BdrvPadding pad;

        ret = bdrv_padding_init(&pad, bs, offset, bytes, align, qiov);
        if (ret == 0) {
            ret = cor_align
                  ? bdrv_cor_preadv(bs, pad.start, pad.end - pad.start,
                                    align, cor_align, &pad.qiov, 0)
                  : bdrv_aligned_preadv(bs, pad.start, pad.end - pad.start,
                                        align, &pad.qiov, 0);
            bdrv_padding_destroy(&pad, true);
        }
    } else if (cor_align) {
        ret = bdrv_cor_preadv(bs, offset, bytes, align, cor_align, qiov, 0);
    } else {
        ret = bdrv_aligned_preadv(bs, offset, bytes, align, qiov, 0);
    }

    tracked_request_end(&req);
    bdrv_dec_in_flight(bs);
    return ret;
}

/* ---- write hooks ---- */

void bdrv_inherit_file_flags(BlockDriverState *bs)
{
    BlockDriverState *file = bs->file->bs;

    bs->supported_write_flags = BDRV_REQ_WRITE_UNCHANGED |
        (BDRV_REQ_FUA & file->supported_write_flags);
    bs->supported_zero_flags = BDRV_REQ_WRITE_UNCHANGED |
        ((BDRV_REQ_FUA | BDRV_REQ_MAY_UNMAP | BDRV_REQ_NO_FALLBACK) &
         file->supported_zero_flags);
    bs->supported_truncate_flags = file->supported_truncate_flags;
}

void bdrv_add_write_hook(BlockDriverState *bs, BdrvWriteHook *hook)
{
    bs->write_hooks = g_slist_append(bs->write_hooks, hook);
}

void bdrv_remove_write_hook(BlockDriverState *bs, BdrvWriteHook *hook)
{
    bs->write_hooks = g_slist_remove(bs->write_hooks, hook);
}

/* Invariant 6.  A hook may yield: the list is walked as it was. */
static void coroutine_fn bdrv_run_write_hooks(BlockDriverState *bs,
                                              int64_t offset, int64_t bytes,
                                              QEMUIOVector *qiov, int ret)
{
    g_autoptr(GSList) hooks = NULL;

    if (likely(!bs->write_hooks)) {
        return;
    }
    hooks = g_slist_copy(bs->write_hooks);
    for (GSList *l = hooks; l; l = l->next) {
        BdrvWriteHook *hook = l->data;

        hook->after_write(hook, offset, bytes, qiov, ret);
    }
}

int coroutine_fn bdrv_co_pwritev(BdrvChild *child, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 BdrvRequestFlags flags)
{
    BlockDriverState *bs;
    BdrvTrackedRequest req;
    uint64_t marked_gen;
    int64_t align;
    int ret;

    ret = bdrv_request_prologue(child, offset, bytes, BDRV_REQUEST_WRITE,
                                &bs);
    if (ret < 0) {
        return ret;
    }
    assert((flags & BDRV_REQ_ZERO_WRITE) ||
           (qiov && qiov->size >= (size_t)bytes));
    if (bytes == 0) {
        /*
         * An empty compressed write ends a stream of them (qemu-img
         * convert -c): the format may tidy up its file.
         */
        if ((flags & BDRV_REQ_WRITE_COMPRESSED) && offset == 0 &&
            bs->drv->bdrv_co_pwritev_compressed) {
            bdrv_inc_in_flight(bs);
            ret = bs->drv->bdrv_co_pwritev_compressed(bs, 0, 0, qiov);
            bdrv_dec_in_flight(bs);
            return ret;
        }
        return 0;
    }
    align = bdrv_request_align(bs);

    bdrv_inc_in_flight(bs);
    tracked_request_begin(&req, bs, offset, bytes, true);
    if ((flags & BDRV_REQ_SERIALISING) ||
        bdrv_needs_padding(offset, bytes, align)) {
        tracked_request_serialise(&req, align);
    }
    tracked_request_wait(&req);

    ret = bdrv_write_req_prepare(bs, offset, bytes, &marked_gen);
    if (ret == 0 && !bdrv_needs_padding(offset, bytes, align)) {
        ret = bdrv_aligned_pwritev(bs, offset, bytes, align,
                                   (flags & BDRV_REQ_ZERO_WRITE) ? NULL : qiov,
                                   0, flags);
    } else if (ret == 0 && (flags & BDRV_REQ_ZERO_WRITE)) {
        ret = bdrv_rmw_pwrite_zeroes(bs, offset, bytes, align, flags);
    } else if (ret == 0) {
        ret = bdrv_rmw_pwritev(bs, offset, bytes, align, qiov, flags);
    }
    bdrv_write_req_finish(bs, offset, bytes, marked_gen);
    bdrv_run_write_hooks(bs, offset, bytes,
                         (flags & BDRV_REQ_ZERO_WRITE) ? NULL : qiov, ret);

    tracked_request_end(&req);
    bdrv_dec_in_flight(bs);
    return ret;
}

typedef int coroutine_fn BdrvVectorRequest(BdrvChild *child, int64_t offset,
                                           int64_t bytes, QEMUIOVector *qiov,
                                           BdrvRequestFlags flags);

/* @request on the @bytes of @qiov from byte @qiov_offset on. */
static int coroutine_fn bdrv_co_request_part(BdrvVectorRequest *request,
                                             BdrvChild *child,
                                             int64_t offset, int64_t bytes,
                                             QEMUIOVector *qiov,
                                             size_t qiov_offset,
                                             BdrvRequestFlags flags)
{
    QEMUIOVector part;
    int ret;

    qemu_iovec_init_slice(&part, qiov, qiov_offset, bytes);
    ret = request(child, offset, bytes, &part, flags);
    qemu_iovec_destroy(&part);
    return ret;
}

int coroutine_fn bdrv_co_preadv_part(BdrvChild *child, int64_t offset,
                                     int64_t bytes, QEMUIOVector *qiov,
                                     size_t qiov_offset,
                                     BdrvRequestFlags flags)
{
    return bdrv_co_request_part(bdrv_co_preadv, child, offset, bytes, qiov,
                                qiov_offset, flags);
}

int coroutine_fn bdrv_co_pwritev_part(BdrvChild *child, int64_t offset,
                                      int64_t bytes, QEMUIOVector *qiov,
                                      size_t qiov_offset,
                                      BdrvRequestFlags flags)
{
    return bdrv_co_request_part(bdrv_co_pwritev, child, offset, bytes, qiov,
                                qiov_offset, flags);
}

int coroutine_fn bdrv_co_pwrite_zeroes(BdrvChild *child, int64_t offset,
                                       int64_t bytes, BdrvRequestFlags flags)
{
    if (child && child->bs && !(child->bs->open_flags & BDRV_O_UNMAP)) {
        flags &= ~BDRV_REQ_MAY_UNMAP;
    }
    return bdrv_co_pwritev(child, offset, bytes, NULL,
                           flags | BDRV_REQ_ZERO_WRITE);
}

/*
 * Discards are advisory: without discard=unmap, or on a driver that cannot
 * discard, they succeed doing nothing.  Partial blocks at either end are
 * left alone; the rest goes down in pieces aligned to pdiscard_alignment
 * where the range allows and no larger than max_pdiscard.
 */
int coroutine_fn bdrv_co_pdiscard(BdrvChild *child, int64_t offset,
                                  int64_t bytes)
{
    BlockDriverState *bs;
    BdrvTrackedRequest req;
    int64_t align, dalign, max_discard, end, req_offset, req_bytes;
    uint64_t marked_gen;
    int ret;

    ret = bdrv_request_prologue(child, offset, bytes, BDRV_REQUEST_WRITE,
                                &bs);
    if (ret < 0) {
        return ret;
    }
    if (!(bs->open_flags & BDRV_O_UNMAP) || !bs->drv->bdrv_co_pdiscard) {
        return 0;
    }
    align = bdrv_request_align(bs);
    dalign = MAX((int64_t)bs->bl.pdiscard_alignment, align);
    end = QEMU_ALIGN_DOWN(offset + bytes, align);
    offset = QEMU_ALIGN_UP(offset, align);
    if (end <= offset) {
        return 0;
    }
    bytes = end - offset;
    max_discard = bdrv_max_piece(bs->bl.max_pdiscard, dalign, align);

    bdrv_inc_in_flight(bs);
    tracked_request_begin(&req, bs, offset, bytes, true);
    tracked_request_wait(&req);
    req_offset = offset;
    req_bytes = bytes;
    ret = bdrv_write_req_prepare(bs, offset, bytes, &marked_gen);
    while (ret == 0 && bytes > 0) {
        int64_t num = bdrv_next_piece(offset, bytes, dalign, max_discard);

        bs->stats.discards++;
        ret = bs->drv->bdrv_co_pdiscard(bs, offset, num);
        bs->write_gen++;
        if (ret < 0 && ret != -ENOTSUP) {
            break;
        }
        ret = 0;
        offset += num;
        bytes -= num;
    }
    bdrv_write_req_finish(bs, req_offset, req_bytes, marked_gen);
    bdrv_run_write_hooks(bs, req.offset, req.bytes, NULL, ret);
    tracked_request_end(&req);
    bdrv_dec_in_flight(bs);
    return ret;
}

/*
 * Invariant 5 orders flushes.  The steps follow block_int.h: flush_to_os,
 * the children, then flush_to_disk (or the driver's bdrv_co_flush alone).
 * cache.no-flush (BDRV_O_NO_FLUSH) keeps only the flush_to_os step, so that
 * caches still reach the OS, and the children (which decide for
 * themselves).
 */
int coroutine_fn bdrv_co_flush(BlockDriverState *bs)
{
    const BlockDriver *drv;
    bool no_flush;
    uint64_t gen;
    GList *l;
    int ret = 0;

    if (!bs || !bs->drv) {
        return -ENOMEDIUM;
    }
    if (bs->read_only) {
        return 0;
    }
    drv = bs->drv;
    no_flush = bs->open_flags & BDRV_O_NO_FLUSH;

    bdrv_inc_in_flight(bs);
    /*
     * The writes this flush must cover are those completed before it was
     * asked for: the generation now.  A flush queued behind an active one
     * then finds its writes on disk already (flushed_gen >= gen) when its
     * turn comes, and skips the disk flush, instead of flushing again for
     * writes that came meanwhile.  Flushes run in FIFO order, so the
     * generations reach the driver in nondecreasing order.  What formats
     * keep in memory (flush_to_os) and the children are flushed always:
     * not every metadata update counts as a write.
     */
    gen = bs->write_gen;
    while (bs->active_flush_req) {
        qemu_co_queue_wait(&bs->flush_queue, NULL);
    }
    bs->active_flush_req = true;

    if (drv->bdrv_co_flush) {
        if (!no_flush && bs->flushed_gen < gen) {
            bs->stats.flushes++;
            ret = drv->bdrv_co_flush(bs);
        }
        goto out;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_FLUSH_TO_OS);
    if (drv->bdrv_co_flush_to_os) {
        ret = drv->bdrv_co_flush_to_os(bs);
        if (ret < 0) {
            goto out;
        }
    }
    for (l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;
        int child_ret = c->bs ? bdrv_co_flush(c->bs) : 0;

        if (ret == 0) {
            ret = child_ret;
        }
    }
    if (ret == 0 && !no_flush && bs->flushed_gen < gen &&
        drv->bdrv_co_flush_to_disk) {
        BLKDBG_EVENT(bs->file, BLKDBG_FLUSH_TO_DISK);
        bs->stats.flushes++;
        ret = drv->bdrv_co_flush_to_disk(bs);
    }

out:
    if (ret == 0 && !no_flush && gen > bs->flushed_gen) {
        bs->flushed_gen = gen;
    }
    bs->active_flush_req = false;
    qemu_co_queue_next(&bs->flush_queue);
    bdrv_dec_in_flight(bs);
    return ret;
}

/* Tells the users above @bs that its length changed (exports' devices). */
static void bdrv_parent_cb_resize(BlockDriverState *bs)
{
    for (GList *l = bs->parents; l; l = l->next) {
        BdrvChild *c = l->data;

        if (c->klass->resize) {
            c->klass->resize(c);
        }
    }
}

int coroutine_fn bdrv_co_truncate(BdrvChild *child, int64_t offset,
                                  bool exact, PreallocMode prealloc,
                                  BdrvRequestFlags flags, Error **errp)
{
    BlockDriverState *bs = child ? child->bs : NULL;
    const BlockDriver *drv;
    BdrvTrackedRequest req;
    int64_t old_size, new_bytes;
    int ret;

    if (!bs || !bs->drv) {
        error_setg(errp, "No medium inserted");
        return -ENOMEDIUM;
    }
    drv = bs->drv;
    if (offset < 0) {
        error_setg(errp, "Image size cannot be negative");
        return -EINVAL;
    }
    if (offset > BDRV_MAX_LENGTH) {
        error_setg(errp, "offset(%" PRId64 ") exceeds maximum(%" PRId64
                   ")", offset, (int64_t)BDRV_MAX_LENGTH);
        return -EFBIG;
    }
    ret = bdrv_check_writable(bs);
    if (ret == -EIO) {
        error_setg(errp, "Image is corrupt; cannot be resized");
        return ret;
    } else if (ret < 0) {
        error_setg(errp, "Image is read-only");
        return -EACCES;
    }
    if (!(child->perm & BLK_PERM_RESIZE)) {
        error_setg(errp, "Node '%s' cannot be resized through '%s': the "
                   "resize permission was not taken",
                   bdrv_get_node_name(bs), child->name ? child->name : "");
        return -EPERM;
    }
    old_size = bdrv_getlength(bs);
    if (old_size < 0) {
        error_setg_errno(errp, -old_size, "Failed to get old image size");
        return old_size;
    }
    new_bytes = offset > old_size ? offset - old_size : 0;

    bdrv_inc_in_flight(bs);
    tracked_request_begin(&req, bs, offset - new_bytes, new_bytes, true);
    if (new_bytes) {
        /* preallocation must not overwrite writes racing into the area */
        tracked_request_serialise(&req, 1);
    }
    tracked_request_wait(&req);

    /* a longer backing file would show through the new area: zero it */
    if (new_bytes && bs->backing && bs->backing->bs) {
        int64_t backing_len = bdrv_getlength(bs->backing->bs);

        if (backing_len < 0) {
            ret = backing_len;
            error_setg_errno(errp, -ret, "Could not get backing file size");
            goto out;
        }
        if (backing_len > old_size) {
            flags |= BDRV_REQ_ZERO_WRITE;
        }
    }

    if (drv->bdrv_co_truncate) {
        if (flags & ~bs->supported_truncate_flags) {
            error_setg(errp, "Block driver does not support requested flags");
            ret = -ENOTSUP;
            goto out;
        }
        ret = drv->bdrv_co_truncate(bs, offset, exact, prealloc, flags, errp);
    } else if (drv->is_filter && bs->file) {
        ret = bdrv_co_truncate(bs->file, offset, exact, prealloc, flags,
                               errp);
    } else {
        error_setg(errp, "Image format driver does not support resize");
        ret = -ENOTSUP;
        goto out;
    }
    if (ret == 0) {
        ret = bdrv_refresh_total_sectors(bs, offset >> BDRV_SECTOR_BITS);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not refresh total sector "
                             "count");
        } else {
            bdrv_parent_cb_resize(bs);
        }
    }
    if (bs->dirty_bitmaps && ret == 0) {
        bdrv_dirty_bitmap_truncate(bs, offset);
    }
    bs->write_gen++;
    bdrv_write_req_finish(bs, offset - new_bytes, new_bytes,
                          BDRV_WRITE_REQ_UNMARKED);

out:
    tracked_request_end(&req);
    bdrv_dec_in_flight(bs);
    return ret;
}
