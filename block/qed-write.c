/*
 * qed writing, as QEMU 7.2 writes: a write to clusters the image has goes
 * in place; one to clusters it lacks takes new clusters at the file's end
 * (inv. 3), fills what the request leaves of them from the backing file
 * (or with zeroes), then points the L2 entries at them, creating the L2
 * table (after the data, at the new end) where the L1 had none.  A zero
 * write of whole clusters sets their entries to QED_CLUSTER_ZERO instead.
 * The need-check flag goes on before the first table change (inv. 4).
 * Resize grows the header's size.  The invariants are block/qed.h's.
 */
#include "block/qed.h"

/* Write flags of qed_co_write(). */
typedef enum QedWriteFlags {
    QED_WRITE_DATA = 0,
    QED_WRITE_ZERO = 1 << 0,    /* whole clusters of zeroes, no buffer */
} QedWriteFlags;

/* Takes @n clusters at the file's end (inv. 3). */
static uint64_t qed_alloc_clusters(BDRVQedState *s, uint64_t n)
{
    uint64_t offset = s->file_size;

    s->file_size += n << s->l2_shift;
    return offset;
}

/* The entries of @n clusters from @cluster, or all zero / unallocated. */
static void qed_fill_entries(const BDRVQedState *s, uint64_t *entries,
                             uint32_t n, uint64_t cluster)
{
    for (uint32_t i = 0; i < n; i++) {
        entries[i] = cluster;
        if (cluster != 0 && cluster != QED_CLUSTER_ZERO) {
            cluster += s->header.cluster_size;
        }
    }
}

/*
 * The backing file's bytes [@pos, @pos + @len) (zeroes without one) to
 * @host of the file: the part of a new cluster the request leaves.
 */
static int coroutine_fn qed_copy_from_backing(BlockDriverState *bs,
                                              uint64_t pos, uint64_t len,
                                              uint64_t host)
{
    g_autofree void *buf = NULL;
    QEMUIOVector qiov;
    int ret = 0;

    if (len == 0) {
        return 0;
    }
    /* less than a cluster: at most 64 MiB (inv. 1) */
    buf = g_try_malloc0(len);
    if (!buf) {
        return -ENOMEM;
    }
    qemu_iovec_init_buf(&qiov, buf, len);
    if (bs->backing) {
        ret = bdrv_co_read_backing(bs, pos, len, &qiov, 0);
    }
    if (ret < 0) {
        return ret;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_COW_WRITE);
    return bdrv_co_pwritev(bs->file, host, len, &qiov, 0);
}

/*
 * A new L2 table for L1 index @l1_index, at the file's end, its entries
 * [@index, @index + @n) from @cluster; written whole and flushed before
 * the L1 entry names it, as QEMU.
 */
static int coroutine_fn qed_new_l2(BlockDriverState *bs, uint64_t l1_index,
                                   uint32_t index, uint32_t n,
                                   uint64_t cluster)
{
    BDRVQedState *s = bs->opaque;
    g_autofree uint64_t *table = NULL;
    uint64_t offset;
    int ret;

    /* no larger than the L1 table, which lies in the file (inv. 2) */
    table = g_try_new0(uint64_t, s->table_nelems);
    if (!table) {
        return -ENOMEM;
    }
    offset = qed_alloc_clusters(s, s->header.table_size);
    qed_fill_entries(s, table + index, n, cluster);
    ret = qed_write_table(bs, offset, table, 0, s->table_nelems);
    if (ret < 0) {
        return ret;
    }
    ret = bdrv_co_flush(bs);
    if (ret < 0) {
        return ret;
    }
    s->l1[l1_index] = offset;
    return qed_write_table(bs, s->header.l1_table_offset, s->l1, l1_index,
                           1);
}

/* Entries [@index, @index + @n) of the L2 table at @l2 from @cluster:
 * the sectors holding them read, changed and written back. */
static int coroutine_fn qed_update_l2(BlockDriverState *bs, uint64_t l2,
                                      uint32_t index, uint32_t n,
                                      uint64_t cluster)
{
    BDRVQedState *s = bs->opaque;
    uint32_t start = index & ~(uint32_t)(QED_SECTOR_ENTRIES - 1);
    uint32_t end = ROUND_UP(index + n, QED_SECTOR_ENTRIES);
    g_autofree uint64_t *span = NULL;
    g_autofree uint64_t *le = NULL;
    int ret;

    assert(end <= s->table_nelems);
    span = g_try_new(uint64_t, end - start);
    le = g_try_new(uint64_t, end - start);
    if (!span || !le) {
        return -ENOMEM;
    }
    ret = qed_read_table(bs, l2, start, end - start, span);
    if (ret < 0) {
        return ret;
    }
    qed_fill_entries(s, span + (index - start), n, cluster);
    for (uint32_t i = 0; i < end - start; i++) {
        le[i] = GUINT64_TO_LE(span[i]);
    }
    return bdrv_pwrite(bs->file, l2 + (uint64_t)start * sizeof(uint64_t),
                       (int64_t)(end - start) * sizeof(uint64_t), le, 0);
}

/*
 * Whether the clusters from @host that hold the first @len bytes (counted
 * from @host) lie on the L1 table: a damaged table (check counts such a
 * cluster as used twice) would have a write of data or of L2 entries land
 * on the L1 table QEMU keeps in memory and the next open reads.  QEMU
 * writes there; qblock fails the write.
 */
static bool qed_overlaps_l1(const BDRVQedState *s, uint64_t host,
                            uint64_t len)
{
    uint64_t l1 = s->header.l1_table_offset;
    uint64_t l1_end = l1 + ((uint64_t)s->header.table_size << s->l2_shift);

    return host < l1_end && l1 < host + ROUND_UP(len, s->header.cluster_size);
}

/*
 * The allocating part of a write at @pos of @len bytes (one lookup's
 * worth, @kind what it found), s->lock held throughout (inv. 3).
 */
static int coroutine_fn qed_write_alloc(BlockDriverState *bs, int kind,
                                        uint64_t pos, uint64_t len,
                                        QEMUIOVector *qiov, size_t done,
                                        QedWriteFlags flags)
{
    BDRVQedState *s = bs->opaque;
    uint64_t into = qed_offset_into_cluster(s, pos);
    uint32_t n = qed_bytes_to_clusters(s, into + len);
    uint64_t l1_index = qed_l1_index(s, pos);
    uint64_t cluster;
    int ret;

    if ((flags & QED_WRITE_ZERO) && kind == QED_ZERO) {
        return 0;
    }
    /* an L2 table on the L1 table: its update would write over the L1 */
    if (kind != QED_UNALLOC_L1 &&
        qed_overlaps_l1(s, s->l1[l1_index],
                        (uint64_t)s->header.table_size << s->l2_shift)) {
        return -EINVAL;
    }
    if (flags & QED_WRITE_ZERO) {
        cluster = QED_CLUSTER_ZERO;
    } else {
        cluster = qed_alloc_clusters(s, n);
    }
    /* inv. 4 */
    if (!bs->backing && !(s->header.features & QED_F_NEED_CHECK)) {
        s->header.features |= QED_F_NEED_CHECK;
        ret = qed_write_header(bs);
        if (ret < 0) {
            return ret;
        }
    }
    if (!(flags & QED_WRITE_ZERO)) {
        uint64_t end = pos + len;

        ret = qed_copy_from_backing(bs, qed_start_of_cluster(s, pos), into,
                                    cluster);
        if (ret == 0) {
            ret = qed_copy_from_backing(bs, end,
                    qed_start_of_cluster(s, end + s->header.cluster_size - 1)
                    - end, cluster + into + len);
        }
        if (ret == 0) {
            BLKDBG_EVENT(bs->file, BLKDBG_WRITE_AIO);
            ret = bdrv_co_pwritev_part(bs->file, cluster + into, len, qiov,
                                       done, 0);
        }
        /* a crash must not leave an entry naming a cluster whose
         * backing file bytes never arrived (inv. 4) */
        if (ret == 0 && bs->backing) {
            ret = bdrv_co_flush(bs->file->bs);
        }
        if (ret < 0) {
            return ret;
        }
    }
    if (kind == QED_UNALLOC_L1) {
        return qed_new_l2(bs, l1_index, qed_l2_index(s, pos), n, cluster);
    }
    return qed_update_l2(bs, s->l1[l1_index], qed_l2_index(s, pos), n,
                         cluster);
}

/* One piece of a write; @opaque points to its QedWriteFlags. */
static int64_t coroutine_fn qed_write_piece(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov, size_t done,
                                            void *opaque)
{
    BDRVQedState *s = bs->opaque;
    QedWriteFlags flags = *(QedWriteFlags *)opaque;
    uint64_t len = bytes;
    uint64_t host;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = qed_find_cluster(bs, offset, &len, &host);
    if (ret == QED_FOUND &&
        qed_overlaps_l1(s, host, qed_offset_into_cluster(s, offset) +
                        len)) {
        ret = -EINVAL;
    }
    if (ret == QED_FOUND) {
        qemu_co_mutex_unlock(&s->lock);
        host += qed_offset_into_cluster(s, offset);
        if (flags & QED_WRITE_ZERO) {
            /* QEMU writes zeroes there, keeping the clusters */
            ret = bdrv_co_pwrite_zeroes(bs->file, host, len, 0);
        } else {
            BLKDBG_EVENT(bs->file, BLKDBG_WRITE_AIO);
            ret = bdrv_co_pwritev_part(bs->file, host, len, qiov, done, 0);
        }
    } else {
        if (ret >= 0) {
            ret = qed_write_alloc(bs, ret, offset, len, qiov, done, flags);
        }
        if (ret >= 0) {
            qed_need_check_timer_arm(bs);
        }
        qemu_co_mutex_unlock(&s->lock);
    }
    return ret < 0 ? ret : (int64_t)len;
}

static int coroutine_fn qed_co_write(BlockDriverState *bs, uint64_t offset,
                                     uint64_t bytes, QEMUIOVector *qiov,
                                     QedWriteFlags flags)
{
    return bdrv_co_each_piece(bs, offset, bytes, qiov, qed_write_piece,
                              &flags);
}

int coroutine_fn qed_co_pwritev(BlockDriverState *bs, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags)
{
    return qed_co_write(bs, offset, bytes, qiov, QED_WRITE_DATA);
}

/* Whole clusters only, as QEMU; the generic layer writes the rest. */
int coroutine_fn qed_co_pwrite_zeroes(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, BdrvRequestFlags flags)
{
    BDRVQedState *s = bs->opaque;

    if (qed_offset_into_cluster(s, offset) ||
        qed_offset_into_cluster(s, bytes)) {
        return -ENOTSUP;
    }
    return qed_co_write(bs, offset, bytes, NULL, QED_WRITE_ZERO);
}

/* As QEMU: grow only, to a size the tables can map; the header says it. */
int coroutine_fn qed_co_truncate(BlockDriverState *bs, int64_t offset,
                                 bool exact, PreallocMode prealloc,
                                 BdrvRequestFlags flags, Error **errp)
{
    BDRVQedState *s = bs->opaque;
    uint64_t old_size = s->header.image_size;
    int ret;

    if (prealloc != PREALLOC_MODE_OFF) {
        error_setg(errp, "Unsupported preallocation mode '%s'",
                   PreallocMode_str[prealloc]);
        return -ENOTSUP;
    }
    if (!qed_is_image_size_valid(offset, s->header.cluster_size,
                                 s->header.table_size)) {
        error_setg(errp, "Invalid image size specified");
        return -EINVAL;
    }
    if ((uint64_t)offset < old_size) {
        error_setg(errp, "Shrinking images is currently not supported");
        return -ENOTSUP;
    }
    qemu_co_mutex_lock(&s->lock);
    s->header.image_size = offset;
    ret = qed_write_header(bs);
    if (ret < 0) {
        s->header.image_size = old_size;
        error_setg_errno(errp, -ret, "Failed to update the image size");
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}
