/*
 * qcow2 data path: guest reads and writes (split into pieces that run in
 * parallel), allocating writes with their copy-on-write, zero writes,
 * discard, block status, flush and the VM state area.
 *
 * Invariants of this file, cited as "qcow2-io.c inv. N" (qcow2.h's
 * apply as well):
 *  1. Guest data I/O to allocated clusters runs without s->lock; every
 *     call into the other qcow2 files is made with it held (qcow2.h
 *     inv. 4).
 *  2. An allocating write writes its data (merged with the copy-on-write
 *     head and tail when they are contiguous with it) before its L2
 *     update is linked (qcow2.h inv. 2); a failed write aborts the
 *     allocation instead.
 */
#include "block/qcow2.h"

/* ---------------------------------------------------------------------- */
/* Parallel I/O of one request */

static void coroutine_fn qcow2_task_entry(void *opaque)
{
    Qcow2Task *t = opaque;
    Qcow2TaskPool *pool = t->pool;
    int ret = t->fn(t);

    if (ret < 0 && pool->ret == 0) {
        pool->ret = ret;
    }
    pool->in_flight--;
    g_free(t);
    if (pool->waiter) {
        Coroutine *waiter = pool->waiter;

        pool->waiter = NULL;
        aio_co_wake(waiter);
    }
}

static void coroutine_fn qcow2_pool_wait_below(Qcow2TaskPool *pool, int n)
{
    while (pool->in_flight > n) {
        pool->waiter = qemu_coroutine_self();
        qemu_coroutine_yield();
    }
}

/* Runs @t (taking ownership) in the pool; the first piece runs inline. */
int coroutine_fn qcow2_pool_run(Qcow2TaskPool *pool, Qcow2Task *t,
                                bool alone)
{
    int ret;

    if (alone) {
        ret = t->fn(t);
        g_free(t);
        return ret;
    }
    qcow2_pool_wait_below(pool, QCOW2_MAX_PARALLEL_IO - 1);
    if (pool->ret < 0) {
        g_free(t);
        return pool->ret;
    }
    t->pool = pool;
    pool->in_flight++;
    aio_co_enter(bdrv_get_aio_context(t->bs),
                 qemu_coroutine_create(qcow2_task_entry, t));
    return 0;
}

int coroutine_fn qcow2_pool_finish(Qcow2TaskPool *pool, int ret)
{
    qcow2_pool_wait_below(pool, 0);
    return ret < 0 ? ret : pool->ret;
}

/* ---------------------------------------------------------------------- */
/* Reading */

static int coroutine_fn qcow2_read_task(Qcow2Task *t)
{
    BlockDriverState *bs = t->bs;

    switch (t->type) {
    case QCOW2_CLUSTER_UNALLOCATED:
    case QCOW2_CLUSTER_UNALLOCATED_ALLOC:
        if (bs->backing) {
            return bdrv_co_read_backing(bs, t->offset, t->bytes, t->qiov,
                                         t->qiov_offset);
        }
        /* fall through */
    case QCOW2_CLUSTER_ZERO_PLAIN:
    case QCOW2_CLUSTER_ZERO_ALLOC:
        qemu_iovec_memset(t->qiov, t->qiov_offset, 0, t->bytes);
        return 0;
    case QCOW2_CLUSTER_COMPRESSED:
        return qcow2_co_read_compressed(bs, t->host_offset, t->offset,
                                        t->bytes, t->qiov, t->qiov_offset);
    case QCOW2_CLUSTER_NORMAL:
        BLKDBG_EVENT(bs->file, BLKDBG_READ_AIO);
        return qcow2_crypt_co_preadv(bs, t->host_offset, t->offset, t->bytes,
                                     t->qiov, t->qiov_offset);
    }
    g_assert_not_reached();
}

/* The longest piece one mapping call handles: whole clusters below 2 GiB. */
static unsigned int qcow2_max_piece(BDRVQcow2State *s, uint64_t offset,
                                    uint64_t bytes)
{
    uint64_t max = QEMU_ALIGN_DOWN(INT_MAX, s->cluster_size) -
                   offset_into_cluster(s, offset);

    return MIN(bytes, max);
}

int coroutine_fn qcow2_co_preadv(BlockDriverState *bs, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 BdrvRequestFlags flags)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2TaskPool pool = { 0 };
    size_t qiov_offset = 0;
    int ret = 0;

    while (bytes > 0) {
        unsigned int cur = qcow2_max_piece(s, offset, bytes);
        uint64_t host_offset = 0;
        QCow2ClusterType type;
        Qcow2Task task;

        qemu_co_mutex_lock(&s->lock);
        ret = qcow2_get_host_offset(bs, offset, &cur, &host_offset, &type);
        qemu_co_mutex_unlock(&s->lock);
        if (ret < 0) {
            break;
        }
        task = (Qcow2Task) {
            .bs = bs, .fn = qcow2_read_task, .type = type,
            .host_offset = host_offset, .offset = offset, .bytes = cur,
            .qiov = qiov, .qiov_offset = qiov_offset,
        };
        /* qcow2-io.c inv. 1: the data I/O runs without s->lock */
        if (qiov_offset == 0 && cur == bytes) {
            /* the whole request in one piece: no task to allocate */
            ret = qcow2_read_task(&task);
        } else {
            ret = qcow2_pool_run(&pool, g_memdup2(&task, sizeof(task)),
                                 false);
        }
        if (ret < 0) {
            break;
        }
        offset += cur;
        bytes -= cur;
        qiov_offset += cur;
    }
    return qcow2_pool_finish(&pool, ret);
}

/* ---------------------------------------------------------------------- */
/* Copy-on-write */

/*
 * Reads guest bytes [offset, offset + bytes) into @buf through the
 * driver's read path; bytes past the end of the image read as zeroes (the
 * last cluster of an image may reach beyond it), except in the VM state
 * area, which lies beyond the end on purpose.
 */
static int coroutine_fn cow_read(BlockDriverState *bs, int64_t disk_size,
                                 uint64_t offset, uint8_t *buf,
                                 uint64_t bytes)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t valid = 0;
    QEMUIOVector qiov;
    int ret;

    if ((int64_t)offset >= qcow2_vm_state_offset(s)) {
        valid = bytes;
    } else if ((int64_t)offset < disk_size) {
        valid = MIN(bytes, disk_size - offset);
    }
    memset(buf + valid, 0, bytes - valid);
    if (!valid) {
        return 0;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_COW_READ);
    qemu_iovec_init_buf(&qiov, buf, valid);
    ret = qcow2_co_preadv(bs, offset, valid, &qiov, 0);
    return ret < 0 ? ret : 0;
}

/*
 * Writes copy-on-write data on its own.  All copy-on-write data is written
 * in this file: here, with the guest data by qcow2_write_merged_cow(), or
 * as zeroes by qcow2_write_zeroed_cow().
 */
static int coroutine_fn cow_write(BlockDriverState *bs, uint64_t host_offset,
                                  uint64_t guest_offset, uint8_t *buf,
                                  uint64_t bytes)
{
    QEMUIOVector qiov;
    int ret;

    BLKDBG_EVENT(bs->file, BLKDBG_COW_WRITE);
    qemu_iovec_init_buf(&qiov, buf, bytes);
    ret = qcow2_pre_write_data_check_unlocked(bs, host_offset, bytes);
    if (ret == 0) {
        ret = qcow2_crypt_co_pwritev(bs, host_offset, guest_offset, bytes,
                                     &qiov, 0);
    }
    return ret < 0 ? ret : 0;
}

/*
 * Copies the head and tail of @m's clusters that the guest write did not
 * cover from the old contents (backing file, zeroes, compressed or shared
 * cluster) to the new clusters, before the allocation is linked (qcow2.h
 * inv. 2).  Called with s->lock held; drops it for the I/O, which
 * reads through qcow2_co_preadv(): the old L2 entries stay in place until
 * link_l2, and qcow2-cluster.c inv. 1 keeps other writers away from
 * these clusters.
 */
static int coroutine_fn qcow2_cluster_cow(BlockDriverState *bs,
                                          QCowL2Meta *m)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t start_bytes = m->cow_start_bytes;
    uint64_t end_bytes = m->cow_end_bytes;
    int64_t disk_size;
    uint8_t *buf;
    int ret;

    if (!start_bytes && !end_bytes) {
        return 0;
    }
    disk_size = bdrv_getlength(bs);
    if (disk_size < 0) {
        return disk_size;
    }
    buf = qemu_try_memalign(qemu_real_host_page_size(),
                            start_bytes + end_bytes);
    if (!buf) {
        return -ENOMEM;
    }

    qemu_co_mutex_unlock(&s->lock);
    ret = cow_read(bs, disk_size, m->offset + m->cow_start_offset, buf,
                   start_bytes);
    if (ret >= 0) {
        ret = cow_read(bs, disk_size, m->offset + m->cow_end_offset,
                       buf + start_bytes, end_bytes);
    }
    if (ret >= 0 && start_bytes) {
        ret = cow_write(bs, m->alloc_offset + m->cow_start_offset,
                        m->offset + m->cow_start_offset, buf, start_bytes);
    }
    if (ret >= 0 && end_bytes) {
        ret = cow_write(bs, m->alloc_offset + m->cow_end_offset,
                        m->offset + m->cow_end_offset, buf + start_bytes,
                        end_bytes);
    }
    qemu_co_mutex_lock(&s->lock);

    qemu_vfree(buf);
    if (ret >= 0) {
        m->cow_start_bytes = 0;
        m->cow_end_bytes = 0;
    }
    return ret;
}

/* ---------------------------------------------------------------------- */
/* Writing */

/*
 * Completes the pending L2 update of a write under s->lock: if the data is
 * written (@ret == 0), copies what is left of the copy-on-write and links
 * it, else undoes the allocation (link_l2 undoes it itself when it fails).
 * Either lets the requests that waited for it go on; the QCowL2Meta is
 * then freed.
 */
static int coroutine_fn qcow2_handle_l2meta(BlockDriverState *bs,
                                            QCowL2Meta *m, int ret)
{
    if (!m) {
        return ret;
    }
    if (ret == 0) {
        ret = qcow2_cluster_cow(bs, m);
    }
    if (ret == 0) {
        ret = qcow2_alloc_cluster_link_l2(bs, m);
    } else {
        qcow2_alloc_cluster_abort(bs, m);
    }
    g_free(m);
    return ret;
}

/*
 * True if guest [offset, offset + bytes) reads as zeroes: zero clusters,
 * or unallocated ones where the backing chain's block status says zero.
 * A cluster with an allocation in flight does not (its L2 entry still
 * says unallocated, but a write is filling it), unless the allocation is
 * @except, the caller's own.  Called with s->lock held.
 */
static bool coroutine_fn qcow2_range_is_zero_except(BlockDriverState *bs,
                                                    int64_t offset,
                                                    int64_t bytes,
                                                    QCowL2Meta *except)
{
    BDRVQcow2State *s = bs->opaque;

    for (GList *l = s->cluster_allocs; l; l = l->next) {
        QCowL2Meta *m = l->data;
        uint64_t m_end = m->offset +
                         ((uint64_t)m->nb_clusters << s->cluster_bits);

        if (m == except) {
            continue;
        }
        if ((uint64_t)offset < m_end && m->offset < (uint64_t)offset + bytes) {
            return false;
        }
    }
    while (bytes > 0) {
        unsigned int cur = qcow2_max_piece(s, offset, bytes);
        uint64_t host_offset;
        QCow2ClusterType type;

        if (qcow2_get_host_offset(bs, offset, &cur, &host_offset,
                                  &type) < 0) {
            return false;
        }
        if (type == QCOW2_CLUSTER_UNALLOCATED ||
            type == QCOW2_CLUSTER_UNALLOCATED_ALLOC) {
            /* what the backing chain says it holds (zero past its end) */
            if (bs->backing &&
                !bdrv_co_is_zero_fast(bs->backing->bs, offset, cur)) {
                return false;
            }
        } else if (type != QCOW2_CLUSTER_ZERO_PLAIN &&
                   type != QCOW2_CLUSTER_ZERO_ALLOC) {
            return false;
        }
        offset += cur;
        bytes -= cur;
    }
    return true;
}

static bool coroutine_fn qcow2_range_is_zero(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes)
{
    return qcow2_range_is_zero_except(bs, offset, bytes, NULL);
}

/*
 * An allocating write whose copy-on-write head and tail read as zeroes
 * (no backing data there) zeroes its span in the file, cheaply (fallocate,
 * BDRV_REQ_NO_FALLBACK), and then writes only the guest data, instead of
 * writing buffers of zeroes around it: a 4 KiB write into a new 64 KiB
 * cluster writes 4 KiB, as QEMU does.  -ENOTSUP where that is not possible
 * (the caller then writes head, data and tail together).
 */
static int coroutine_fn qcow2_write_zeroed_cow(BlockDriverState *bs,
                                               QCowL2Meta *m,
                                               uint64_t offset,
                                               uint64_t bytes,
                                               QEMUIOVector *qiov,
                                               size_t qiov_offset)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t start = m->offset + m->cow_start_offset;
    uint64_t end = m->offset + m->cow_end_offset + m->cow_end_bytes;
    uint64_t host_start = m->alloc_offset + m->cow_start_offset;
    bool zero;
    int ret;

    /* zeroes on disk do not decrypt to zeroes */
    if (!(s->data_file->bs->supported_zero_flags & BDRV_REQ_NO_FALLBACK) ||
        s->crypt_method) {
        return -ENOTSUP;
    }
    qemu_co_mutex_lock(&s->lock);
    zero = (!m->cow_start_bytes ||
            qcow2_range_is_zero_except(bs, start, m->cow_start_bytes, m)) &&
           (!m->cow_end_bytes ||
            qcow2_range_is_zero_except(bs, m->offset + m->cow_end_offset,
                                       m->cow_end_bytes, m));
    qemu_co_mutex_unlock(&s->lock);
    if (!zero) {
        return -ENOTSUP;
    }
    ret = qcow2_pre_write_data_check_unlocked(bs, host_start, end - start);
    if (ret < 0) {
        return ret;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_CLUSTER_ALLOC_SPACE);
    ret = bdrv_co_pwrite_zeroes(s->data_file, host_start, end - start,
                                BDRV_REQ_NO_FALLBACK);
    if (ret < 0) {
        return ret == -ENOTSUP || ret == -EINVAL ? -ENOTSUP : ret;
    }
    m->cow_start_bytes = 0;
    m->cow_end_bytes = 0;
    BLKDBG_EVENT(bs->file, BLKDBG_WRITE_AIO);
    return qcow2_crypt_co_pwritev(bs, m->alloc_offset + (offset - m->offset),
                                  offset, bytes, qiov, qiov_offset);
}

/*
 * Whether the copy-on-write head and tail of @m can be written with the
 * guest data in one request: a single allocation whose head ends where
 * the data starts and whose tail starts where it ends, inside the disk.
 */
static bool qcow2_can_merge_cow(BlockDriverState *bs, QCowL2Meta *m,
                                uint64_t offset, uint64_t bytes,
                                uint64_t host_offset)
{
    BDRVQcow2State *s = bs->opaque;

    if (!m || m->next || (!m->cow_start_bytes && !m->cow_end_bytes)) {
        return false;
    }
    if (host_offset != m->alloc_offset + (offset - m->offset)) {
        return false;
    }
    if (m->cow_start_bytes &&
        m->offset + m->cow_start_offset + m->cow_start_bytes != offset) {
        return false;
    }
    if (m->cow_end_bytes &&
        (m->offset + m->cow_end_offset != offset + bytes ||
         m->offset + m->cow_end_offset + m->cow_end_bytes >
         ROUND_UP(s->virtual_size, BDRV_SECTOR_SIZE))) {
        return false;
    }
    return true;
}

/*
 * Writes head + data + tail of a fresh allocation as one request
 * (qcow2-io.c inv. 2).  The head and tail are read through the driver's read
 * path: the L2 entry still maps the old contents (backing file, zeroes,
 * a compressed or shared cluster).
 */
static int coroutine_fn qcow2_write_merged_cow(BlockDriverState *bs,
                                               QCowL2Meta *m,
                                               uint64_t offset,
                                               uint64_t bytes,
                                               QEMUIOVector *qiov,
                                               size_t qiov_offset)
{
    uint8_t *head = NULL, *tail = NULL;
    QEMUIOVector hv, tv, all;
    uint64_t start = m->offset + m->cow_start_offset;
    int ret = 0;

    qemu_iovec_init(&all, qiov->niov + 2);
    if (m->cow_start_bytes) {
        head = qemu_try_blockalign(bs, m->cow_start_bytes);
        if (!head) {
            ret = -ENOMEM;
            goto out;
        }
        qemu_iovec_init_buf(&hv, head, m->cow_start_bytes);
        BLKDBG_EVENT(bs->file, BLKDBG_COW_READ);
        ret = qcow2_co_preadv(bs, start, m->cow_start_bytes, &hv, 0);
        if (ret < 0) {
            goto out;
        }
        qemu_iovec_add(&all, head, m->cow_start_bytes);
    } else {
        start = offset;
    }
    qemu_iovec_concat(&all, qiov, qiov_offset, bytes);
    if (m->cow_end_bytes) {
        tail = qemu_try_blockalign(bs, m->cow_end_bytes);
        if (!tail) {
            ret = -ENOMEM;
            goto out;
        }
        qemu_iovec_init_buf(&tv, tail, m->cow_end_bytes);
        BLKDBG_EVENT(bs->file, BLKDBG_COW_READ);
        ret = qcow2_co_preadv(bs, m->offset + m->cow_end_offset,
                              m->cow_end_bytes, &tv, 0);
        if (ret < 0) {
            goto out;
        }
        qemu_iovec_add(&all, tail, m->cow_end_bytes);
    }
    /*
     * Both events, in QEMU's order: the request carries guest data, so
     * qemu-io's "break write_aio" (upstream 046) must stop it, and it
     * writes copy-on-write, so a rule on cow_write must fail it too.
     */
    BLKDBG_EVENT(bs->file, BLKDBG_WRITE_AIO);
    BLKDBG_EVENT(bs->file, BLKDBG_COW_WRITE);
    ret = qcow2_pre_write_data_check_unlocked(bs, m->alloc_offset +
                                              (start - m->offset),
                                              all.size);
    if (ret == 0) {
        ret = qcow2_crypt_co_pwritev(bs, m->alloc_offset + (start - m->offset),
                                     start, all.size, &all, 0);
    }
    if (ret == 0) {
        m->cow_start_bytes = 0;
        m->cow_end_bytes = 0;
    }
out:
    qemu_iovec_destroy(&all);
    qemu_vfree(head);
    qemu_vfree(tail);
    return ret;
}

/* One piece of a guest write, as qcow2_alloc_host_offset() maps it. */
typedef struct Qcow2WritePiece {
    uint64_t offset;
    unsigned int bytes;
    uint64_t host_offset;
    QCowL2Meta *l2meta;         /* NULL: written in place */
} Qcow2WritePiece;

/* @host_hint: where the previous piece ended on the host, or 0 */
static int coroutine_fn qcow2_map_write_piece(BlockDriverState *bs,
                                              uint64_t offset, uint64_t bytes,
                                              uint64_t host_hint,
                                              Qcow2WritePiece *p)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    p->offset = offset;
    p->bytes = qcow2_max_piece(s, offset, bytes);
    p->host_offset = offset_into_cluster(s, host_hint) ? 0 : host_hint;
    p->l2meta = NULL;
    qemu_co_mutex_lock(&s->lock);
    ret = qcow2_alloc_host_offset(bs, offset, &p->bytes, &p->host_offset,
                                  &p->l2meta);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/*
 * Writes the guest data of @first and of the pieces after it that follow
 * it in the file as well, as one request: a write over clusters that
 * are consecutive on the host (written in place, fresh allocations,
 * reused preallocated zero clusters) reaches the file as QEMU sends it,
 * one write (upstream 066 counts them with blkdebug).  A piece with
 * copy-on-write of its own is left for the caller, which may merge that
 * with its data instead; so is the first piece that does not follow.
 * Their L2 updates are then completed in guest order (qcow2-io.c inv. 2).
 * Returns the bytes written, or -errno; *@next holds the piece mapped but
 * not written (bytes 0: none).
 */
static int64_t coroutine_fn qcow2_write_run(BlockDriverState *bs,
                                            Qcow2WritePiece *first,
                                            uint64_t bytes,
                                            QEMUIOVector *qiov,
                                            size_t qiov_offset,
                                            Qcow2WritePiece *next)
{
    BDRVQcow2State *s = bs->opaque;
    /* made by the first allocation: an in-place write allocates nothing */
    g_autoptr(GPtrArray) metas = NULL;
    uint64_t total = first->bytes;
    int ret = 0;

    next->bytes = 0;
    if (first->l2meta) {
        metas = g_ptr_array_new();
        g_ptr_array_add(metas, first->l2meta);
    }
    while (total < bytes) {
        ret = qcow2_map_write_piece(bs, first->offset + total, bytes - total,
                                    first->host_offset + total, next);
        if (ret < 0) {
            next->bytes = 0;
            break;
        }
        if (next->host_offset != first->host_offset + total ||
            (next->l2meta && (next->l2meta->cow_start_bytes ||
                              next->l2meta->cow_end_bytes)) ||
            total + next->bytes > qcow2_max_piece(s, first->offset, bytes)) {
            break;
        }
        if (next->l2meta) {
            if (!metas) {
                metas = g_ptr_array_new();
            }
            g_ptr_array_add(metas, next->l2meta);
        }
        total += next->bytes;
        next->bytes = 0;
    }

    if (ret == 0) {
        BLKDBG_EVENT(bs->file, BLKDBG_WRITE_AIO);
        ret = qcow2_pre_write_data_check_unlocked(bs, first->host_offset,
                                                  total);
    }
    if (ret == 0) {
        ret = qcow2_crypt_co_pwritev(bs, first->host_offset, first->offset,
                                     total, qiov, qiov_offset);
    }

    if (metas) {
        qemu_co_mutex_lock(&s->lock);
        for (guint i = 0; i < metas->len; i++) {
            int r = qcow2_handle_l2meta(bs, metas->pdata[i], ret);

            ret = ret < 0 ? ret : r;
        }
        qemu_co_mutex_unlock(&s->lock);
    }
    return ret < 0 ? ret : (int64_t)total;
}

int coroutine_fn qcow2_co_pwritev(BlockDriverState *bs, int64_t offset,
                                  int64_t bytes, QEMUIOVector *qiov,
                                  BdrvRequestFlags flags)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2WritePiece piece = { .bytes = 0 };
    size_t qiov_offset = 0;
    int ret = 0;

    while (bytes > 0) {
        int64_t done;

        /* a piece qcow2_write_run() mapped but left is taken up here */
        if (!piece.bytes) {
            ret = qcow2_map_write_piece(bs, offset, bytes, 0, &piece);
            if (ret < 0) {
                break;
            }
        }
        assert(piece.offset == offset);

        if (qcow2_can_merge_cow(bs, piece.l2meta, offset, piece.bytes,
                                piece.host_offset)) {
            ret = qcow2_write_zeroed_cow(bs, piece.l2meta, offset,
                                         piece.bytes, qiov, qiov_offset);
            if (ret == -ENOTSUP) {
                ret = qcow2_write_merged_cow(bs, piece.l2meta, offset,
                                             piece.bytes, qiov, qiov_offset);
            }
            qemu_co_mutex_lock(&s->lock);
            ret = qcow2_handle_l2meta(bs, piece.l2meta, ret);
            qemu_co_mutex_unlock(&s->lock);
            done = ret < 0 ? ret : piece.bytes;
            piece.bytes = 0;
        } else {
            Qcow2WritePiece first = piece;

            done = qcow2_write_run(bs, &first, bytes, qiov, qiov_offset,
                                   &piece);
        }
        if (done < 0) {
            ret = done;
            break;
        }
        offset += done;
        bytes -= done;
        qiov_offset += done;
    }
    if (piece.bytes) {
        /* a write that failed leaves the piece after it unwritten */
        qemu_co_mutex_lock(&s->lock);
        qcow2_handle_l2meta(bs, piece.l2meta, ret);
        qemu_co_mutex_unlock(&s->lock);
    }
    return ret;
}

int coroutine_fn qcow2_co_pwrite_zeroes(BlockDriverState *bs,
                                        int64_t offset, int64_t bytes,
                                        BdrvRequestFlags flags)
{
    BDRVQcow2State *s = bs->opaque;
    /* with subclusters, each of them can read as zeroes on its own */
    int64_t unit = s->subcluster_size;
    int64_t end = offset + bytes;
    int64_t start = QEMU_ALIGN_DOWN(offset, unit);
    int64_t aligned_end = MIN(ROUND_UP(end, unit),
                              ROUND_UP(s->virtual_size, unit));
    int ret;

    qemu_co_mutex_lock(&s->lock);
    /*
     * Zero clusters (subclusters) are whole: a partial one can only become
     * zero if the rest of it reads as zero already (the end of the disk
     * counts as zero).
     */
    if ((start < offset && !qcow2_range_is_zero(bs, start, offset - start)) ||
        (end < aligned_end && end < s->virtual_size &&
         !qcow2_range_is_zero(bs, end, MIN(aligned_end, s->virtual_size) -
                              end))) {
        qemu_co_mutex_unlock(&s->lock);
        return -ENOTSUP;
    }
    ret = qcow2_subcluster_zeroize(bs, start, aligned_end - start, flags);
    qemu_co_mutex_unlock(&s->lock);
    /* a raw data file must read as the disk does */
    if (ret == 0 && qcow2_data_file_is_raw(s)) {
        ret = qcow2_pre_write_data_check_unlocked(bs, offset, bytes);
        if (ret == 0) {
            ret = bdrv_co_pwrite_zeroes(s->data_file, offset, bytes, 0);
        }
    }
    return ret;
}

int coroutine_fn qcow2_co_pdiscard(BlockDriverState *bs,
                                   int64_t offset, int64_t bytes)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    /* only whole clusters can be discarded; the end of the disk counts as
     * the end of its last cluster */
    if (offset_into_cluster(s, offset) ||
        (offset_into_cluster(s, bytes) && offset + bytes != s->virtual_size)) {
        return -ENOTSUP;
    }
    /*
     * Without the zero flag (v2) a discarded cluster would read as the
     * backing file, which is neither the old data nor zeroes; like QEMU,
     * keep the data.
     */
    if (s->qcow_version < 3 && bs->backing) {
        return -ENOTSUP;
    }
    qemu_co_mutex_lock(&s->lock);
    ret = qcow2_cluster_discard(bs, offset, bytes, false,
                                QCOW2_DISCARD_REQUEST);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/* ---------------------------------------------------------------------- */
/* Block status and flush */

/*
 * QEMU's test for an image made with preallocation=metadata: clearly more
 * clusters have a refcount than the file has allocated on the host (at
 * least a ninth more, and two).  Only such images have clusters that were
 * never written, whose holes in the file block status reports as zeroes;
 * in any other image an allocated cluster is data, as QEMU's map says.
 */
static int coroutine_fn qcow2_detect_metadata_preallocation(
    BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t file_length = bdrv_getlength(bs->file->bs);
    int64_t allocated = bdrv_get_allocated_file_size(bs->file->bs);
    int64_t real_clusters, threshold, count = 0;

    if (file_length < 0 || allocated < 0) {
        return file_length < 0 ? file_length : allocated;
    }
    real_clusters = allocated / s->cluster_size;
    threshold = MAX(real_clusters * 10 / 9, real_clusters + 2);
    for (int64_t i = 0; i < size_to_clusters(s, file_length) &&
                        count < threshold; i++) {
        uint64_t refcount;
        int ret = qcow2_get_refcount(bs, i, &refcount);

        if (ret < 0) {
            return ret;
        }
        count += refcount != 0;
    }
    return count >= threshold;
}

int coroutine_fn qcow2_co_block_status(BlockDriverState *bs,
                                       bool want_zero, int64_t offset,
                                       int64_t bytes, int64_t *pnum,
                                       int64_t *map,
                                       BlockDriverState **file)
{
    BDRVQcow2State *s = bs->opaque;
    unsigned int cur = qcow2_max_piece(s, offset, bytes);
    uint64_t host_offset = 0;
    QCow2ClusterType type;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    if (!s->metadata_preallocation_checked) {
        ret = qcow2_detect_metadata_preallocation(bs);
        s->metadata_preallocation = ret == 1;
        s->metadata_preallocation_checked = true;
    }
    ret = qcow2_get_host_offset(bs, offset, &cur, &host_offset, &type);
    qemu_co_mutex_unlock(&s->lock);
    if (ret < 0) {
        return ret;
    }
    *pnum = cur;
    switch (type) {
    case QCOW2_CLUSTER_NORMAL:
        *map = host_offset;
        *file = s->data_file->bs;
        /* preallocated metadata maps clusters never written: the file's
         * holes tell that they read as zeroes */
        return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID |
               (s->metadata_preallocation ? BDRV_BLOCK_RECURSE : 0);
    case QCOW2_CLUSTER_ZERO_ALLOC:
        *map = host_offset;
        *file = s->data_file->bs;
        return BDRV_BLOCK_ZERO | BDRV_BLOCK_OFFSET_VALID;
    case QCOW2_CLUSTER_ZERO_PLAIN:
        return BDRV_BLOCK_ZERO;
    case QCOW2_CLUSTER_COMPRESSED:
        return BDRV_BLOCK_DATA;
    case QCOW2_CLUSTER_UNALLOCATED_ALLOC:
        /* where the data would go, but it is the backing file's still */
        *map = host_offset;
        *file = s->data_file->bs;
        return BDRV_BLOCK_OFFSET_VALID;
    case QCOW2_CLUSTER_UNALLOCATED:
        /* the generic layer asks the backing file, or reports zeroes */
        return 0;
    }
    g_assert_not_reached();
}

int coroutine_fn qcow2_co_flush_to_os(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    if (s->incompatible_features & QCOW2_INCOMPAT_DIRTY) {
        /*
         * Lazy refcounts (qcow2.h inv. 5): the guest's data needs
         * its L2 tables on disk, not its refcounts, which the dirty bit
         * has the next open rebuild.  QEMU flushes the same way.
         */
        ret = qcow2_cache_write(bs, s->l2_table_cache);
    } else {
        ret = qcow2_write_caches(bs);
    }
    if (ret == 0) {
        /*
         * The checkpoint (qcow2-bitmap.c invariant 4): its store flushes
         * the file before its commit, so the data it covers is durable by
         * then; the flush of the file that follows finds nothing left.
         */
        qcow2_checkpoint_bitmaps(bs);
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/* ---------------------------------------------------------------------- */
/* The VM state area (after the end of the disk, qcow2.h) */

int coroutine_fn qcow2_co_save_vmstate(BlockDriverState *bs,
                                       QEMUIOVector *qiov,
                                       int64_t pos)
{
    BDRVQcow2State *s = bs->opaque;

    return qcow2_co_pwritev(bs, qcow2_vm_state_offset(s) + pos, qiov->size,
                            qiov, 0);
}

int coroutine_fn qcow2_co_load_vmstate(BlockDriverState *bs,
                                       QEMUIOVector *qiov,
                                       int64_t pos)
{
    BDRVQcow2State *s = bs->opaque;

    return qcow2_co_preadv(bs, qcow2_vm_state_offset(s) + pos, qiov->size,
                           qiov, 0);
}

/* ---------------------------------------------------------------------- */
/* Preallocation */

int coroutine_fn qcow2_preallocate_range(BlockDriverState *bs,
                                         uint64_t offset, uint64_t bytes,
                                         uint64_t *host_end)
{
    BDRVQcow2State *s = bs->opaque;

    *host_end = 0;
    while (bytes > 0) {
        /* whole clusters, so that a chunk never splits one */
        unsigned int cur = MIN(bytes, (uint64_t)(INT_MAX & -s->cluster_size));
        uint64_t host_offset = 0;
        QCowL2Meta *m;
        int ret;

        ret = qcow2_alloc_host_offset(bs, offset, &cur, &host_offset, &m);
        if (ret < 0) {
            return ret;
        }
        if (m) {
            m->prealloc = true;
            ret = qcow2_handle_l2meta(bs, m, 0);
            if (ret < 0) {
                return ret;
            }
        }
        *host_end = MAX(*host_end, ROUND_UP(host_offset + cur,
                                            (uint64_t)s->cluster_size));
        offset += cur;
        bytes -= cur;
    }
    return 0;
}
