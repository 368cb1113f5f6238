/*
 * qed tables: checking the offsets they hold (inv. 2), looking up where
 * a disk offset lies, reading and writing table entries.  L2 tables are
 * not cached: a lookup reads just the entries its request covers, and an
 * update writes the sectors holding the entries it changed, as QEMU
 * writes them.  The invariants are block/qed.h's.
 */
#include "block/qed.h"

/* At most this many L2 entries are read by one lookup (32 KiB): a longer
 * request is cut there and looks up the rest next. */
#define QED_LOOKUP_MAX_ENTRIES      4096u

/* inv. 2: a data cluster's offset, or one cluster of a table */
bool qed_check_cluster_offset(const BDRVQedState *s, uint64_t offset)
{
    uint64_t header_bytes = (uint64_t)s->header.header_size *
                            s->header.cluster_size;

    if (qed_offset_into_cluster(s, offset)) {
        return false;
    }
    return offset >= header_bytes && offset < s->file_size;
}

/*
 * inv. 2: a table's first and last clusters.  As QEMU, an end that is not
 * past the start counts as an overflow, which refuses tables of one
 * cluster too (QEMU cannot open images made with table_size=1).
 */
bool qed_check_table_offset(const BDRVQedState *s, uint64_t offset)
{
    uint64_t end = offset + (uint64_t)(s->header.table_size - 1) *
                   s->header.cluster_size;

    if (end <= offset) {
        return false;
    }
    return qed_check_cluster_offset(s, offset) &&
           qed_check_cluster_offset(s, end);
}

/* Entries [@index, @index + @n) of the table at @offset, in host order. */
int qed_read_table(BlockDriverState *bs, uint64_t offset, uint32_t index,
                   uint32_t n, uint64_t *entries)
{
    BDRVQedState *s = bs->opaque;
    int ret;

    assert(index <= s->table_nelems && n <= s->table_nelems - index);
    ret = bdrv_pread(bs->file, offset + (uint64_t)index * sizeof(uint64_t),
                     (int64_t)n * sizeof(uint64_t), entries, 0);
    if (ret < 0) {
        return ret;
    }
    for (uint32_t i = 0; i < n; i++) {
        entries[i] = GUINT64_FROM_LE(entries[i]);
    }
    return 0;
}

/*
 * Writes the sectors of the table at @offset that hold entries [@index,
 * @index + @n), from @table: the whole table in host order.  QEMU
 * writes a table's changes in whole sectors.
 */
int qed_write_table(BlockDriverState *bs, uint64_t offset,
                    const uint64_t *table, uint32_t index, uint32_t n)
{
    BDRVQedState *s = bs->opaque;
    uint32_t start = index & ~(uint32_t)(QED_SECTOR_ENTRIES - 1);
    uint32_t end = ROUND_UP(index + n, QED_SECTOR_ENTRIES);
    g_autofree uint64_t *buf = NULL;

    assert(index <= s->table_nelems && n <= s->table_nelems - index);
    /* table_nelems is a power of two of at least 512 entries (inv. 1) */
    assert(end <= s->table_nelems);
    buf = g_try_new(uint64_t, end - start);
    if (!buf) {
        return -ENOMEM;
    }
    for (uint32_t i = start; i < end; i++) {
        buf[i - start] = GUINT64_TO_LE(table[i]);
    }
    return bdrv_pwrite(bs->file, offset + (uint64_t)start * sizeof(uint64_t),
                       (int64_t)(end - start) * sizeof(uint64_t), buf, 0);
}

/*
 * As QEMU: how many of the @n entries from @table[0] map alike (all
 * unallocated, all zero, or clusters each right after the last, each
 * inside the file).
 */
static uint32_t qed_count_contiguous(const BDRVQedState *s,
                                     const uint64_t *table, uint32_t n)
{
    uint64_t last = table[0];
    uint32_t i;

    for (i = 1; i < n; i++) {
        if (last == 0) {
            if (table[i] != 0) {
                break;
            }
        } else if (last == QED_CLUSTER_ZERO) {
            if (table[i] != QED_CLUSTER_ZERO) {
                break;
            }
        } else {
            /* inv. 2: QEMU checks only the first; a run that leaves the
             * file stops here, and the next lookup fails on it */
            if (table[i] != last + s->header.cluster_size ||
                !qed_check_cluster_offset(s, table[i])) {
                break;
            }
            last = table[i];
        }
    }
    return i;
}

/*
 * Where disk offset @pos lies: returns a QedCluster (or -errno), cuts
 * *@len to the bytes that map alike (never past an L2 table's reach) and
 * sets *@host to the data cluster's file offset (QED_FOUND; the cluster
 * holding @pos, not @pos's byte).  Called with s->lock held (inv. 3).
 */
int qed_find_cluster(BlockDriverState *bs, uint64_t pos, uint64_t *len,
                     uint64_t *host)
{
    BDRVQedState *s = bs->opaque;
    uint64_t l1_index = qed_l1_index(s, pos);
    uint64_t l1_end = (l1_index + 1) << s->l1_shift;
    uint64_t into = qed_offset_into_cluster(s, pos);
    g_autofree uint64_t *entries = NULL;
    uint64_t l2_offset, first;
    uint32_t index, n;
    int ret;

    /* inv. 1: every disk offset has an L1 entry */
    assert(l1_index < s->table_nelems);
    *host = 0;
    *len = MIN(*len, l1_end - pos);
    l2_offset = s->l1[l1_index];
    if (l2_offset == 0) {
        return QED_UNALLOC_L1;
    }
    if (!qed_check_table_offset(s, l2_offset)) {
        return -EINVAL;
    }
    index = qed_l2_index(s, pos);
    n = MIN(qed_bytes_to_clusters(s, into + *len),
            (uint64_t)QED_LOOKUP_MAX_ENTRIES);
    entries = g_try_new(uint64_t, n);
    if (!entries) {
        return -ENOMEM;
    }
    ret = qed_read_table(bs, l2_offset, index, n, entries);
    if (ret < 0) {
        return ret;
    }
    n = qed_count_contiguous(s, entries, n);
    *len = MIN(*len, ((uint64_t)n << s->l2_shift) - into);
    first = entries[0];
    if (first == 0) {
        return QED_UNALLOC_L2;
    }
    if (first == QED_CLUSTER_ZERO) {
        return QED_ZERO;
    }
    /* inv. 2: the clusters after it follow it, as the lookup counted */
    if (!qed_check_cluster_offset(s, first)) {
        return -EINVAL;
    }
    *host = first;
    return QED_FOUND;
}

/* qed_find_cluster() for a reader: the lock held for the lookup only. */
int coroutine_fn qed_co_find_cluster(BlockDriverState *bs, uint64_t pos,
                                     uint64_t *len, uint64_t *host)
{
    BDRVQedState *s = bs->opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = qed_find_cluster(bs, pos, len, host);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}
