/*
 * qcow2 L1/L2 mapping: guest offset -> host cluster.
 *
 * A guest offset splits into an L1 index, an L2 index and an offset into
 * the cluster.  The L1 table lives in memory (s->l1_table, host-endian);
 * L2 tables are read and modified only through s->l2_table_cache, in
 * slices of s->l2_cache_entry_size bytes (big-endian, as on disk).
 *
 * Allocating writes are two-phase (qcow2.h invariant 2): this file finds
 * or allocates host clusters and describes the pending L2 update in a
 * QCowL2Meta; the caller writes the guest data; then
 * qcow2_alloc_cluster_link_l2() copies what is left of the old contents
 * (copy-on-write head and tail) and points the L2 entries at the new
 * clusters.  Between the two phases the QCowL2Meta is "in flight" on
 * s->cluster_allocs.
 *
 * Invariants of this file (qcow2.h invariants 1-4 apply as well):
 *  A. At most one in-flight QCowL2Meta covers a given guest cluster.  A
 *     request that touches a cluster of an in-flight allocation waits on
 *     its dependent_requests and looks again; requests on other clusters
 *     go on in parallel.  Requests allocate in ascending guest order, so
 *     waiting never forms a cycle.
 *  B. A QCowL2Meta never crosses an L2 slice, so its update touches
 *     exactly one cache entry.
 *  C. An L1 entry is written to the file only after the L2 table it points
 *     to, and that table's refcount, are on disk (l2_allocate); an L1
 *     table is made active in the header only after it is written.
 *  D. Everything here runs with s->lock held, except the copy-on-write
 *     I/O in qcow2_cluster_cow(), which drops the lock because it reads
 *     through qcow2_co_preadv().
 */
#include "block/qcow2.h"
#include "util/coroutine.h"
#include "util/iov.h"

/*
 * Bytes of one L2 entry.  Extended L2 entries (subclusters) add a 64-bit
 * bitmap after the descriptor; every index computation below goes through
 * this, so that support only changes here and in the entry accessors.
 */
static inline size_t l2_entry_size(BDRVQcow2State *s)
{
    (void)s;
    return sizeof(uint64_t);
}

/* Entries per L2 cache entry (a power of two, at most s->l2_size). */
static inline int l2_slice_entries(BDRVQcow2State *s)
{
    assert(s->l2_cache_entry_size >= 512 &&
           s->l2_cache_entry_size <= (uint64_t)s->cluster_size);
    return s->l2_cache_entry_size / l2_entry_size(s);
}

static inline uint64_t l2_get_entry(BDRVQcow2State *s, const uint64_t *slice,
                                    int idx)
{
    (void)s;
    return GUINT64_FROM_BE(slice[idx]);
}

static inline void l2_set_entry(BDRVQcow2State *s, uint64_t *slice, int idx,
                                uint64_t entry)
{
    (void)s;
    slice[idx] = GUINT64_TO_BE(entry);
}

/* The guest bytes one L2 slice maps. */
static inline uint64_t l2_slice_bytes_mapped(BDRVQcow2State *s)
{
    return (uint64_t)l2_slice_entries(s) << s->cluster_bits;
}

/* Index of @offset's cluster within its L2 slice. */
static inline int offset_to_l2_slice_index(BDRVQcow2State *s, uint64_t offset)
{
    return (offset >> s->cluster_bits) & (l2_slice_entries(s) - 1);
}

/* File offset of the slice of the L2 table at @l2_offset mapping @offset. */
static inline uint64_t l2_slice_offset(BDRVQcow2State *s, uint64_t l2_offset,
                                       uint64_t offset)
{
    int l2_index = offset_to_l2_index(s, offset);

    return l2_offset + (uint64_t)(l2_index / l2_slice_entries(s)) *
                       s->l2_cache_entry_size;
}

static bool has_data_file(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    return s->data_file != bs->file;
}

QCow2ClusterType qcow2_get_cluster_type(BlockDriverState *bs,
                                        uint64_t l2_entry)
{
    if (l2_entry & QCOW_OFLAG_COMPRESSED) {
        return QCOW2_CLUSTER_COMPRESSED;
    }
    if (l2_entry & QCOW_OFLAG_ZERO) {
        return (l2_entry & L2E_OFFSET_MASK) ? QCOW2_CLUSTER_ZERO_ALLOC
                                            : QCOW2_CLUSTER_ZERO_PLAIN;
    }
    if (!(l2_entry & L2E_OFFSET_MASK)) {
        /*
         * Host offset 0 is a valid data cluster in an external data file;
         * there every cluster has refcount 1, so COPIED tells them apart.
         */
        if (has_data_file(bs) && (l2_entry & QCOW_OFLAG_COPIED)) {
            return QCOW2_CLUSTER_NORMAL;
        }
        return QCOW2_CLUSTER_UNALLOCATED;
    }
    return QCOW2_CLUSTER_NORMAL;
}

static bool cluster_type_has_host(QCow2ClusterType type)
{
    return type == QCOW2_CLUSTER_NORMAL || type == QCOW2_CLUSTER_ZERO_ALLOC;
}

/* True if freeing the entry's reference releases something. */
static bool cluster_type_is_allocated(QCow2ClusterType type)
{
    return cluster_type_has_host(type) || type == QCOW2_CLUSTER_COMPRESSED;
}

/*
 * True if the entry's host cluster offset (where it has one) is cluster
 * aligned.  Reserved bits (and the copied flag of a compressed descriptor)
 * are masked off and otherwise ignored, as QEMU does: an image that QEMU
 * uses must not be marked corrupt by reading it.  check reports them.
 */
static bool l2_entry_is_valid(BDRVQcow2State *s, uint64_t entry,
                              QCow2ClusterType type)
{
    return !cluster_type_has_host(type) ||
           !offset_into_cluster(s, entry & L2E_OFFSET_MASK);
}

/* Reports an invalid L2 entry (qcow2.h: corruption -> -EIO). */
static int l2_entry_corrupt(BlockDriverState *bs, uint64_t l2_offset,
                            int l2_index, uint64_t entry,
                            QCow2ClusterType type)
{
    assert(cluster_type_has_host(type));
    qcow2_signal_corruption(bs, true, -1, -1,
                            "Cluster allocation offset %#" PRIx64
                            " unaligned (L2 offset: %#" PRIx64
                            ", L2 index: %#x)",
                            (uint64_t)(entry & L2E_OFFSET_MASK),
                            l2_offset, l2_index);
    return -EIO;
}

/*
 * Returns the L2 table offset from L1 entry @l1_index, 0 if none, or -EIO
 * (reported) if the entry is invalid.
 */
static int64_t l1_entry_l2_offset(BlockDriverState *bs, int l1_index)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t l1_entry = s->l1_table[l1_index];
    uint64_t l2_offset = l1_entry & L1E_OFFSET_MASK;

    if (offset_into_cluster(s, l2_offset)) {
        qcow2_signal_corruption(bs, true, -1, -1,
                                "L2 table offset %#" PRIx64
                                " unaligned (L1 index: %#x)",
                                l2_offset, l1_index);
        return -EIO;
    }
    /* reserved bits are ignored, as in L2 entries (l2_entry_is_valid) */
    return l2_offset;
}

/*
 * Writes entries [first, first + count) of the host-endian @table to the
 * L1 table at @l1_offset and flushes: the one place where L1 tables are
 * written (qcow2.h calling conventions).
 */
static int coroutine_fn qcow2_l1_write(BlockDriverState *bs,
                                       int64_t l1_offset,
                                       const uint64_t *table, int first,
                                       int count)
{
    QEMUIOVector qiov;
    uint64_t *buf;
    int ret;

    buf = g_try_new(uint64_t, count);
    if (!buf) {
        return -ENOMEM;
    }
    for (int i = 0; i < count; i++) {
        buf[i] = GUINT64_TO_BE(table[first + i]);
    }
    qemu_iovec_init_buf(&qiov, buf, count * sizeof(uint64_t));
    ret = qcow2_pre_write_overlap_check(bs, QCOW2_OL_ACTIVE_L1,
                                        l1_offset + first * sizeof(uint64_t),
                                        count * sizeof(uint64_t));
    if (ret >= 0) {
        ret = bdrv_co_pwritev(bs->file,
                              l1_offset + first * sizeof(uint64_t),
                              count * sizeof(uint64_t), &qiov, 0);
    }
    if (ret >= 0) {
        ret = bdrv_co_flush(bs->file->bs);
    }
    g_free(buf);
    return ret < 0 ? ret : 0;
}

/* L1 entries per 512-byte sector: entry updates write whole sectors. */
#define L1_ENTRIES_PER_SECTOR (512 / sizeof(uint64_t))

int coroutine_fn qcow2_write_l1_entry(BlockDriverState *bs, int l1_index)
{
    BDRVQcow2State *s = bs->opaque;
    int first = l1_index & ~(int)(L1_ENTRIES_PER_SECTOR - 1);
    int count = MIN((int)L1_ENTRIES_PER_SECTOR, s->l1_size - first);

    assert(l1_index < s->l1_size);
    BLKDBG_EVENT(bs->file, BLKDBG_L1_UPDATE);
    return qcow2_l1_write(bs, s->l1_table_offset, s->l1_table, first, count);
}

/*
 * Points the header at a new active L1 table: l1_size and l1_table_offset
 * are adjacent in the header, so one 12-byte write switches both at once.
 */
static int coroutine_fn qcow2_write_l1_header_fields(BlockDriverState *bs,
                                                     uint32_t l1_size,
                                                     uint64_t l1_offset)
{
    struct QEMU_PACKED {
        uint32_t l1_size;
        uint64_t l1_table_offset;
    } fields = {
        .l1_size = GUINT32_TO_BE(l1_size),
        .l1_table_offset = GUINT64_TO_BE(l1_offset),
    };
    QEMUIOVector qiov;
    int ret;

    _Static_assert(offsetof(QCowHeader, l1_table_offset) ==
                   offsetof(QCowHeader, l1_size) + sizeof(uint32_t),
                   "l1_size and l1_table_offset are adjacent");
    qemu_iovec_init_buf(&qiov, &fields, sizeof(fields));
    ret = qcow2_pre_write_overlap_check(bs, QCOW2_OL_MAIN_HEADER,
                                        offsetof(QCowHeader, l1_size),
                                        sizeof(fields));
    if (ret >= 0) {
        ret = bdrv_co_pwritev(bs->file, offsetof(QCowHeader, l1_size),
                              sizeof(fields), &qiov, 0);
    }
    if (ret >= 0) {
        ret = bdrv_co_flush(bs->file->bs);
    }
    return ret < 0 ? ret : 0;
}

int coroutine_fn qcow2_grow_l1_table(BlockDriverState *bs, uint64_t min_size,
                                     bool exact_size)
{
    BDRVQcow2State *s = bs->opaque;
    const uint64_t max_entries = QCOW_MAX_L1_SIZE / sizeof(uint64_t);
    uint64_t new_size;
    uint64_t *new_table;
    int64_t new_offset;
    uint64_t *old_table = s->l1_table;
    int64_t old_offset = s->l1_table_offset;
    int old_size = s->l1_size;
    int ret;

    if (min_size <= (uint64_t)s->l1_size) {
        return 0;
    }
    if (min_size > max_entries) {
        return -EFBIG;
    }
    if (exact_size) {
        new_size = min_size;
    } else {
        /* grow by half, so that a growing image rewrites L1 rarely */
        new_size = MAX(s->l1_size, 1);
        while (new_size < min_size) {
            new_size = (new_size * 3 + 1) / 2;
        }
        new_size = MIN(new_size, max_entries);
    }

    new_table = g_try_new0(uint64_t, new_size);
    if (!new_table) {
        return -ENOMEM;
    }
    if (old_size) {
        memcpy(new_table, old_table, old_size * sizeof(uint64_t));
    }

    BLKDBG_EVENT(bs->file, BLKDBG_L1_GROW_ALLOC_TABLE);
    new_offset = qcow2_alloc_clusters(bs, new_size * sizeof(uint64_t));
    if (new_offset < 0) {
        g_free(new_table);
        return new_offset;
    }
    /* the new table's refcount must be on disk before the header names it */
    ret = qcow2_cache_flush(bs, s->refcount_block_cache);
    if (ret < 0) {
        goto fail;
    }

    BLKDBG_EVENT(bs->file, BLKDBG_L1_GROW_WRITE_TABLE);
    ret = qcow2_l1_write(bs, new_offset, new_table, 0, new_size);
    if (ret < 0) {
        goto fail;
    }

    BLKDBG_EVENT(bs->file, BLKDBG_L1_GROW_ACTIVATE_TABLE);
    ret = qcow2_write_l1_header_fields(bs, new_size, new_offset);
    if (ret < 0) {
        goto fail;
    }

    s->l1_table = new_table;
    s->l1_size = new_size;
    s->l1_table_offset = new_offset;
    g_free(old_table);
    if (old_size) {
        qcow2_free_clusters(bs, old_offset, old_size * sizeof(uint64_t),
                            QCOW2_DISCARD_OTHER);
    }
    return 0;

fail:
    g_free(new_table);
    qcow2_free_clusters(bs, new_offset, new_size * sizeof(uint64_t),
                        QCOW2_DISCARD_OTHER);
    return ret;
}

int coroutine_fn qcow2_shrink_l1_table(BlockDriverState *bs,
                                       uint64_t new_l1_size)
{
    BDRVQcow2State *s = bs->opaque;

    for (int64_t i = new_l1_size; i < s->l1_size; i++) {
        uint64_t l2_offset = s->l1_table[i] & L1E_OFFSET_MASK;
        uint64_t old = s->l1_table[i];
        int ret;

        if (!l2_offset) {
            continue;
        }
        /* the entry goes first: a crash in between leaks the table */
        s->l1_table[i] = 0;
        ret = qcow2_write_l1_entry(bs, i);
        if (ret < 0) {
            s->l1_table[i] = old;
            return ret;
        }
        qcow2_free_clusters(bs, l2_offset, s->cluster_size,
                            QCOW2_DISCARD_ALWAYS);
    }
    return 0;
}

/*
 * Gives L1 entry @l1_index a fresh L2 table with refcount 1: a copy of the
 * table it points to now (shared with a snapshot), or zeroes if none.
 * Invariant C.
 */
static int coroutine_fn l2_allocate(BlockDriverState *bs, int l1_index)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t old_l1_entry = s->l1_table[l1_index];
    uint64_t old_l2_offset = old_l1_entry & L1E_OFFSET_MASK;
    int slices = s->cluster_size / s->l2_cache_entry_size;
    int64_t l2_offset;
    int ret;

    l2_offset = qcow2_alloc_clusters(bs, s->l2_size * l2_entry_size(s));
    if (l2_offset < 0) {
        return l2_offset;
    }

    for (int i = 0; i < slices; i++) {
        uint64_t delta = (uint64_t)i * s->l2_cache_entry_size;
        void *new_slice, *old_slice;

        ret = qcow2_cache_get_empty(bs, s->l2_table_cache,
                                    l2_offset + delta, &new_slice);
        if (ret < 0) {
            goto fail;
        }
        if (old_l2_offset) {
            BLKDBG_EVENT(bs->file, BLKDBG_L2_ALLOC_COW_READ);
            ret = qcow2_cache_get(bs, s->l2_table_cache,
                                  old_l2_offset + delta, &old_slice);
            if (ret < 0) {
                qcow2_cache_put(s->l2_table_cache, &new_slice);
                goto fail;
            }
            memcpy(new_slice, old_slice, s->l2_cache_entry_size);
            qcow2_cache_put(s->l2_table_cache, &old_slice);
        } else {
            memset(new_slice, 0, s->l2_cache_entry_size);
        }
        qcow2_cache_entry_mark_dirty(s->l2_table_cache, new_slice);
        qcow2_cache_put(s->l2_table_cache, &new_slice);
    }

    BLKDBG_EVENT(bs->file, BLKDBG_L2_ALLOC_WRITE);
    ret = qcow2_cache_write(bs, s->refcount_block_cache);
    if (ret < 0) {
        goto fail;
    }
    ret = qcow2_cache_flush(bs, s->l2_table_cache);
    if (ret < 0) {
        goto fail;
    }

    s->l1_table[l1_index] = l2_offset | QCOW_OFLAG_COPIED;
    ret = qcow2_write_l1_entry(bs, l1_index);
    if (ret < 0) {
        s->l1_table[l1_index] = old_l1_entry;
        goto fail;
    }
    qcow2_overlap_l2_changed(s, old_l1_entry, s->l1_table[l1_index]);
    if (old_l2_offset) {
        /* drop our reference; the snapshot keeps the old table */
        qcow2_free_clusters(bs, old_l2_offset, s->l2_size * l2_entry_size(s),
                            QCOW2_DISCARD_OTHER);
    }
    return 0;

fail:
    qcow2_free_clusters(bs, l2_offset, s->l2_size * l2_entry_size(s),
                        QCOW2_DISCARD_ALWAYS);
    return ret;
}

/*
 * Loads the L2 slice that maps @offset for modification: grows the L1
 * table and allocates or copies the L2 table as needed, so that the slice
 * belongs to the active image alone (OFLAG_COPIED).  Sets *slice (to be
 * put back by the caller), *l2_offset and *slice_index.
 */
static int coroutine_fn get_cluster_table(BlockDriverState *bs,
                                          uint64_t offset, uint64_t **slice,
                                          uint64_t *l2_offset,
                                          int *slice_index)
{
    BDRVQcow2State *s = bs->opaque;
    int l1_index = offset_to_l1_index(s, offset);
    int64_t l2;
    int ret;

    if (l1_index >= s->l1_size) {
        ret = qcow2_grow_l1_table(bs, l1_index + 1, false);
        if (ret < 0) {
            return ret;
        }
    }
    l2 = l1_entry_l2_offset(bs, l1_index);
    if (l2 < 0) {
        return l2;
    }
    if (!l2 || !(s->l1_table[l1_index] & QCOW_OFLAG_COPIED)) {
        ret = l2_allocate(bs, l1_index);
        if (ret < 0) {
            return ret;
        }
        l2 = s->l1_table[l1_index] & L1E_OFFSET_MASK;
    }

    ret = qcow2_cache_get(bs, s->l2_table_cache,
                          l2_slice_offset(s, l2, offset), (void **)slice);
    if (ret < 0) {
        return ret;
    }
    *l2_offset = l2;
    *slice_index = offset_to_l2_slice_index(s, offset);
    return 0;
}

int coroutine_fn qcow2_get_host_offset(BlockDriverState *bs, uint64_t offset,
                                       unsigned int *bytes,
                                       uint64_t *host_offset,
                                       QCow2ClusterType *type)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t in_cluster = offset_into_cluster(s, offset);
    int l1_index = offset_to_l1_index(s, offset);
    int slice_index = offset_to_l2_slice_index(s, offset);
    uint64_t bytes_needed = in_cluster + *bytes;
    uint64_t bytes_available;
    uint64_t *slice;
    uint64_t entry, first_host;
    int64_t l2_offset;
    int nb_clusters, n;
    int ret;

    assert(*bytes > 0);
    bytes_available = (uint64_t)(l2_slice_entries(s) - slice_index)
                      << s->cluster_bits;
    bytes_needed = MIN(bytes_needed, bytes_available);
    nb_clusters = size_to_clusters(s, bytes_needed);
    *host_offset = 0;
    *type = QCOW2_CLUSTER_UNALLOCATED;

    l2_offset = l1_index < s->l1_size ? l1_entry_l2_offset(bs, l1_index) : 0;
    if (l2_offset < 0) {
        return l2_offset;
    }
    if (!l2_offset) {
        goto out;
    }

    BLKDBG_EVENT(bs->file, BLKDBG_L2_LOAD);
    ret = qcow2_cache_get(bs, s->l2_table_cache,
                          l2_slice_offset(s, l2_offset, offset),
                          (void **)&slice);
    if (ret < 0) {
        return ret;
    }

    entry = l2_get_entry(s, slice, slice_index);
    *type = qcow2_get_cluster_type(bs, entry);
    if (!l2_entry_is_valid(s, entry, *type)) {
        qcow2_cache_put(s->l2_table_cache, (void **)&slice);
        return l2_entry_corrupt(bs, l2_offset,
                                offset_to_l2_index(s, offset), entry, *type);
    }

    first_host = entry & L2E_OFFSET_MASK;
    switch (*type) {
    case QCOW2_CLUSTER_COMPRESSED:
        /* each compressed cluster is a run of its own */
        *host_offset = entry;
        n = 1;
        break;
    case QCOW2_CLUSTER_NORMAL:
    case QCOW2_CLUSTER_ZERO_ALLOC:
        *host_offset = first_host + in_cluster;
        /* fall through */
    default:
        for (n = 1; n < nb_clusters; n++) {
            uint64_t e = l2_get_entry(s, slice, slice_index + n);
            QCow2ClusterType t = qcow2_get_cluster_type(bs, e);

            if (t != *type || !l2_entry_is_valid(s, e, t)) {
                break;
            }
            if (cluster_type_has_host(t) &&
                (e & L2E_OFFSET_MASK) !=
                first_host + ((uint64_t)n << s->cluster_bits)) {
                break;
            }
        }
        break;
    }
    qcow2_cache_put(s->l2_table_cache, (void **)&slice);
    bytes_needed = MIN(bytes_needed, (uint64_t)n << s->cluster_bits);

out:
    *bytes = bytes_needed - in_cluster;
    return 0;
}

/* True if the cluster range of @m and [start, end) overlap. */
static bool l2meta_overlaps(BDRVQcow2State *s, QCowL2Meta *m, uint64_t start,
                            uint64_t end)
{
    uint64_t m_end = m->offset + ((uint64_t)m->nb_clusters << s->cluster_bits);

    return start < m_end && m->offset < end;
}

/*
 * Invariant A.  If an in-flight allocation covers @offset's cluster, waits
 * for it and returns -EAGAIN (the caller looks again: the metadata may
 * have changed meanwhile).  If one begins later within [offset, offset +
 * *cur_bytes), shrinks *cur_bytes to end before it.  Returns 0 otherwise.
 */
static int coroutine_fn handle_dependencies(BlockDriverState *bs,
                                            uint64_t offset,
                                            uint64_t *cur_bytes)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t start = start_of_cluster(s, offset);
    uint64_t end = ROUND_UP(offset + *cur_bytes, (uint64_t)s->cluster_size);

    for (GList *l = s->cluster_allocs; l; l = l->next) {
        QCowL2Meta *m = l->data;

        if (!l2meta_overlaps(s, m, start, end)) {
            continue;
        }
        if (m->offset <= start) {
            qemu_co_queue_wait(&m->dependent_requests, &s->lock);
            return -EAGAIN;
        }
        end = m->offset;
        *cur_bytes = end - offset;
    }
    return 0;
}

/* True if a write may go to the entry's host cluster in place. */
static bool cluster_is_writable_in_place(BlockDriverState *bs, uint64_t e)
{
    return qcow2_get_cluster_type(bs, e) == QCOW2_CLUSTER_NORMAL &&
           (e & QCOW_OFLAG_COPIED);
}

/* A preallocated zero cluster the active image owns: reused by writes. */
static bool cluster_is_reusable_zero(BlockDriverState *bs, uint64_t e)
{
    return qcow2_get_cluster_type(bs, e) == QCOW2_CLUSTER_ZERO_ALLOC &&
           (e & QCOW_OFLAG_COPIED);
}

/*
 * Counts the entries from @idx on (at most @max) that form one run with
 * the first: host clusters contiguous from @first_host when @contiguous.
 */
static int count_run(BlockDriverState *bs, uint64_t *slice, int idx, int max,
                     bool (*same)(BlockDriverState *, uint64_t),
                     bool contiguous, uint64_t first_host)
{
    BDRVQcow2State *s = bs->opaque;
    int n;

    for (n = 0; n < max; n++) {
        uint64_t e = l2_get_entry(s, slice, idx + n);

        if (!same(bs, e) ||
            !l2_entry_is_valid(s, e, qcow2_get_cluster_type(bs, e))) {
            break;
        }
        if (contiguous &&
            (e & L2E_OFFSET_MASK) !=
            first_host + ((uint64_t)n << s->cluster_bits)) {
            break;
        }
    }
    return n;
}

/* Clusters that need a new host cluster before they can be written. */
static bool cluster_needs_new_alloc(BlockDriverState *bs, uint64_t e)
{
    return !cluster_is_writable_in_place(bs, e) &&
           !cluster_is_reusable_zero(bs, e);
}

int coroutine_fn qcow2_alloc_host_offset(BlockDriverState *bs,
                                         uint64_t offset,
                                         unsigned int *bytes,
                                         uint64_t *host_offset,
                                         QCowL2Meta **m)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t in_cluster = offset_into_cluster(s, offset);
    uint64_t cur_bytes, slice_end, alloc_offset, entry;
    uint64_t *slice;
    uint64_t l2_offset;
    int slice_index, nb_clusters, n;
    bool keep_old;
    QCowL2Meta *meta;
    int ret;

    assert(*bytes > 0);
    *m = NULL;

again:
    cur_bytes = *bytes;
    slice_end = ROUND_UP(offset + 1, l2_slice_bytes_mapped(s));
    cur_bytes = MIN(cur_bytes, slice_end - offset);
    ret = handle_dependencies(bs, offset, &cur_bytes);
    if (ret == -EAGAIN) {
        goto again;
    }

    ret = get_cluster_table(bs, offset, &slice, &l2_offset, &slice_index);
    if (ret < 0) {
        return ret;
    }
    nb_clusters = size_to_clusters(s, in_cluster + cur_bytes);

    entry = l2_get_entry(s, slice, slice_index);
    if (!l2_entry_is_valid(s, entry, qcow2_get_cluster_type(bs, entry))) {
        qcow2_cache_put(s->l2_table_cache, (void **)&slice);
        return l2_entry_corrupt(bs, l2_offset, offset_to_l2_index(s, offset),
                                entry, qcow2_get_cluster_type(bs, entry));
    }

    if (cluster_is_writable_in_place(bs, entry)) {
        n = count_run(bs, slice, slice_index, nb_clusters,
                      cluster_is_writable_in_place, true,
                      entry & L2E_OFFSET_MASK);
        qcow2_cache_put(s->l2_table_cache, (void **)&slice);
        *host_offset = (entry & L2E_OFFSET_MASK) + in_cluster;
        *bytes = MIN(cur_bytes, ((uint64_t)n << s->cluster_bits) - in_cluster);
        return 0;
    }

    keep_old = cluster_is_reusable_zero(bs, entry);
    if (keep_old) {
        n = count_run(bs, slice, slice_index, nb_clusters,
                      cluster_is_reusable_zero, true,
                      entry & L2E_OFFSET_MASK);
        alloc_offset = entry & L2E_OFFSET_MASK;
        qcow2_cache_put(s->l2_table_cache, (void **)&slice);
    } else {
        int64_t ret64;

        n = count_run(bs, slice, slice_index, nb_clusters,
                      cluster_needs_new_alloc, false, 0);
        qcow2_cache_put(s->l2_table_cache, (void **)&slice);
        BLKDBG_EVENT(bs->file, BLKDBG_CLUSTER_ALLOC);
        ret64 = qcow2_alloc_clusters(bs, (uint64_t)n << s->cluster_bits);
        if (ret64 < 0) {
            return ret64;
        }
        alloc_offset = ret64;
    }
    assert(n > 0);
    cur_bytes = MIN(cur_bytes, ((uint64_t)n << s->cluster_bits) - in_cluster);

    meta = g_new0(QCowL2Meta, 1);
    meta->offset = start_of_cluster(s, offset);
    meta->alloc_offset = alloc_offset;
    meta->nb_clusters = n;
    meta->keep_old_clusters = keep_old;
    meta->cow_start_offset = 0;
    meta->cow_start_bytes = in_cluster;
    meta->cow_end_offset = in_cluster + cur_bytes;
    meta->cow_end_bytes = ((uint64_t)n << s->cluster_bits) -
                          meta->cow_end_offset;
    qemu_co_queue_init(&meta->dependent_requests);
    meta->in_flight = true;
    s->cluster_allocs = g_list_prepend(s->cluster_allocs, meta);

    *host_offset = alloc_offset + in_cluster;
    *bytes = cur_bytes;
    *m = meta;
    return 0;
}

/* Takes @m off the in-flight list and lets the requests waiting on it go. */
static void l2meta_finish(BDRVQcow2State *s, QCowL2Meta *m)
{
    s->cluster_allocs = g_list_remove(s->cluster_allocs, m);
    m->in_flight = false;
    qemu_co_queue_restart_all(&m->dependent_requests);
}

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

/* The one place where copy-on-write data is written. */
static int coroutine_fn cow_write(BlockDriverState *bs, uint64_t host_offset,
                                  uint8_t *buf, uint64_t bytes)
{
    BDRVQcow2State *s = bs->opaque;
    QEMUIOVector qiov;
    int ret;

    BLKDBG_EVENT(bs->file, BLKDBG_COW_WRITE);
    qemu_iovec_init_buf(&qiov, buf, bytes);
    ret = qcow2_pre_write_data_check(bs, host_offset, bytes);
    if (ret == 0) {
        ret = bdrv_co_pwritev(s->data_file, host_offset, bytes, &qiov, 0);
    }
    return ret < 0 ? ret : 0;
}

/*
 * Copies the head and tail of @m's clusters that the guest write did not
 * cover from the old contents (backing file, zeroes, compressed or shared
 * cluster) to the new clusters.  Called with s->lock held; drops it for the
 * I/O (invariant D): the old L2 entries stay in place until link_l2, and
 * invariant A keeps other writers away from these clusters.
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
        ret = cow_write(bs, m->alloc_offset + m->cow_start_offset, buf,
                        start_bytes);
    }
    if (ret >= 0 && end_bytes) {
        ret = cow_write(bs, m->alloc_offset + m->cow_end_offset,
                        buf + start_bytes, end_bytes);
    }
    qemu_co_mutex_lock(&s->lock);

    qemu_vfree(buf);
    if (ret >= 0) {
        m->cow_start_bytes = 0;
        m->cow_end_bytes = 0;
    }
    return ret;
}

static void coroutine_fn wait_for_allocations(BlockDriverState *bs,
                                              uint64_t offset,
                                              uint64_t bytes);

int coroutine_fn qcow2_alloc_cluster_link_l2(BlockDriverState *bs,
                                             QCowL2Meta *m)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t *old_entries;
    uint64_t *slice;
    uint64_t l2_offset;
    int slice_index;
    int ret;

    assert(m->in_flight);
    ret = qcow2_cluster_cow(bs, m);
    if (ret < 0) {
        goto fail;
    }

    if (s->use_lazy_refcounts) {
        /* invariant 5: dirty before deferred refcounts can matter */
        ret = qcow2_mark_dirty(bs);
        if (ret < 0) {
            goto fail;
        }
    } else {
        /* invariant 1 */
        ret = qcow2_cache_set_dependency(bs, s->l2_table_cache,
                                         s->refcount_block_cache);
        if (ret < 0) {
            goto fail;
        }
    }

    ret = get_cluster_table(bs, m->offset, &slice, &l2_offset, &slice_index);
    if (ret < 0) {
        goto fail;
    }
    assert(slice_index + m->nb_clusters <= l2_slice_entries(s));

    BLKDBG_EVENT(bs->file, BLKDBG_L2_UPDATE);
    old_entries = g_new(uint64_t, m->nb_clusters);
    for (int i = 0; i < m->nb_clusters; i++) {
        uint64_t host = m->alloc_offset + ((uint64_t)i << s->cluster_bits);

        old_entries[i] = l2_get_entry(s, slice, slice_index + i);
        l2_set_entry(s, slice, slice_index + i, host | QCOW_OFLAG_COPIED);
    }
    qcow2_cache_entry_mark_dirty(s->l2_table_cache, slice);
    qcow2_cache_put(s->l2_table_cache, (void **)&slice);

    /*
     * The old clusters were only read by the copy-on-write; with their
     * reference gone they may be free.  Not discarded in the file: the
     * new L2 entries are still only in the cache.
     */
    if (!m->keep_old_clusters) {
        for (int i = 0; i < m->nb_clusters; i++) {
            QCow2ClusterType t = qcow2_get_cluster_type(bs, old_entries[i]);

            if (cluster_type_is_allocated(t)) {
                qcow2_free_any_cluster(bs, old_entries[i], 1,
                                       QCOW2_DISCARD_NEVER);
            }
        }
    }
    g_free(old_entries);
    l2meta_finish(s, m);
    return 0;

fail:
    qcow2_alloc_cluster_abort(bs, m);
    return ret;
}

int coroutine_fn qcow2_prepare_compressed_cluster(BlockDriverState *bs,
                                                  uint64_t offset)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t *slice;
    uint64_t l2_offset;
    int slice_index;
    int ret;

    wait_for_allocations(bs, offset, s->cluster_size);
    ret = get_cluster_table(bs, offset, &slice, &l2_offset, &slice_index);
    if (ret < 0) {
        return ret;
    }
    qcow2_cache_put(s->l2_table_cache, (void **)&slice);
    return 0;
}

int coroutine_fn qcow2_link_compressed_cluster(BlockDriverState *bs,
                                               uint64_t offset,
                                               uint64_t l2_entry)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t *slice;
    uint64_t l2_offset, old;
    int slice_index;
    int ret;

    assert(!offset_into_cluster(s, offset));
    wait_for_allocations(bs, offset, s->cluster_size);
    /* invariant 1: the bytes' refcounts reach the file first */
    ret = qcow2_cache_set_dependency(bs, s->l2_table_cache,
                                     s->refcount_block_cache);
    if (ret < 0) {
        return ret;
    }
    ret = get_cluster_table(bs, offset, &slice, &l2_offset, &slice_index);
    if (ret < 0) {
        return ret;
    }
    old = l2_get_entry(s, slice, slice_index);
    if (!l2_entry_is_valid(s, old, qcow2_get_cluster_type(bs, old))) {
        qcow2_cache_put(s->l2_table_cache, (void **)&slice);
        return l2_entry_corrupt(bs, l2_offset, offset_to_l2_index(s, offset),
                                old, qcow2_get_cluster_type(bs, old));
    }
    BLKDBG_EVENT(bs->file, BLKDBG_L2_UPDATE_COMPRESSED);
    l2_set_entry(s, slice, slice_index, l2_entry);
    qcow2_cache_entry_mark_dirty(s->l2_table_cache, slice);
    qcow2_cache_put(s->l2_table_cache, (void **)&slice);
    /* not discarded: the new entry is still only in the cache */
    if (cluster_type_is_allocated(qcow2_get_cluster_type(bs, old))) {
        qcow2_free_any_cluster(bs, old, 1, QCOW2_DISCARD_NEVER);
    }
    return 0;
}

void coroutine_fn qcow2_alloc_cluster_abort(BlockDriverState *bs,
                                            QCowL2Meta *m)
{
    BDRVQcow2State *s = bs->opaque;

    if (!m->in_flight) {
        return;
    }
    if (!m->keep_old_clusters) {
        qcow2_free_clusters(bs, m->alloc_offset,
                            (uint64_t)m->nb_clusters << s->cluster_bits,
                            QCOW2_DISCARD_NEVER);
    }
    l2meta_finish(s, m);
}

/*
 * Waits until no in-flight allocation overlaps the clusters of [offset,
 * offset + bytes), so that discard and zeroize never change an L2 entry
 * that a pending link_l2 is about to overwrite (invariant A).
 */
static void coroutine_fn wait_for_allocations(BlockDriverState *bs,
                                              uint64_t offset,
                                              uint64_t bytes)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t start = start_of_cluster(s, offset);
    uint64_t end = ROUND_UP(offset + bytes, (uint64_t)s->cluster_size);
    bool waited;

    do {
        waited = false;
        for (GList *l = s->cluster_allocs; l; l = l->next) {
            QCowL2Meta *m = l->data;

            if (l2meta_overlaps(s, m, start, end)) {
                qemu_co_queue_wait(&m->dependent_requests, &s->lock);
                waited = true;
                break;
            }
        }
    } while (waited);
}

/* What a discard leaves in an entry; see qcow2_cluster_discard(). */
static uint64_t discarded_entry(BlockDriverState *bs, uint64_t old,
                                bool full_discard)
{
    BDRVQcow2State *s = bs->opaque;
    QCow2ClusterType type = qcow2_get_cluster_type(bs, old);

    if (full_discard) {
        return 0;
    }
    if (bs->backing || cluster_type_is_allocated(type)) {
        /* v2 has no zero flag: the backing file shows through there */
        return s->qcow_version >= 3 ? QCOW_OFLAG_ZERO : 0;
    }
    /* unallocated or zero without a backing file reads zeroes already */
    return old;
}

/* What zeroize leaves in an entry; see qcow2_subcluster_zeroize(). */
static uint64_t zeroized_entry(BlockDriverState *bs, uint64_t old, int flags,
                               bool *unmap)
{
    QCow2ClusterType type = qcow2_get_cluster_type(bs, old);

    /* a compressed descriptor cannot carry the zero flag */
    *unmap = type == QCOW2_CLUSTER_COMPRESSED ||
             ((flags & BDRV_REQ_MAY_UNMAP) && cluster_type_is_allocated(type));
    return *unmap ? QCOW_OFLAG_ZERO : old | QCOW_OFLAG_ZERO;
}

enum {
    L2_OP_DISCARD,
    L2_OP_ZEROIZE,
};

/*
 * Rewrites the entries of @nb_clusters clusters from @offset, all within
 * one L2 slice, and frees what the replaced entries pointed to.
 */
static int coroutine_fn rewrite_l2_slice(BlockDriverState *bs,
                                         uint64_t offset, int nb_clusters,
                                         int op, bool full_discard,
                                         int flags)
{
    BDRVQcow2State *s = bs->opaque;
    int l1_index = offset_to_l1_index(s, offset);
    uint64_t *slice;
    uint64_t l2_offset;
    int slice_index;
    int ret;

    /*
     * Without an L2 table every entry is unallocated; if that is what the
     * operation leaves, there is no table to allocate (a shrink or a
     * discard of a sparse disk would create one per L1 entry).
     */
    if (l1_index >= s->l1_size ||
        !(s->l1_table[l1_index] & L1E_OFFSET_MASK)) {
        bool no_table_unmap;
        uint64_t new = op == L2_OP_DISCARD
                       ? discarded_entry(bs, 0, full_discard)
                       : zeroized_entry(bs, 0, flags, &no_table_unmap);

        if (new == 0) {
            return 0;
        }
    }

    ret = get_cluster_table(bs, offset, &slice, &l2_offset, &slice_index);
    if (ret < 0) {
        return ret;
    }
    for (int i = 0; i < nb_clusters; i++) {
        uint64_t old = l2_get_entry(s, slice, slice_index + i);
        QCow2ClusterType type = qcow2_get_cluster_type(bs, old);
        uint64_t new;
        bool unmap;

        if (!l2_entry_is_valid(s, old, type)) {
            qcow2_cache_put(s->l2_table_cache, (void **)&slice);
            return l2_entry_corrupt(bs, l2_offset,
                                    offset_to_l2_index(s, offset) + i, old,
                                    type);
        }
        if (op == L2_OP_DISCARD) {
            new = discarded_entry(bs, old, full_discard);
            unmap = true;
        } else {
            new = zeroized_entry(bs, old, flags, &unmap);
        }
        if (new == old) {
            continue;
        }
        l2_set_entry(s, slice, slice_index + i, new);
        qcow2_cache_entry_mark_dirty(s->l2_table_cache, slice);
        if (unmap && cluster_type_is_allocated(type)) {
            qcow2_free_any_cluster(bs, old, 1, QCOW2_DISCARD_REQUEST);
        }
    }
    qcow2_cache_put(s->l2_table_cache, (void **)&slice);
    return 0;
}

/* Applies rewrite_l2_slice() to the clusters of [offset, offset + bytes). */
static int coroutine_fn rewrite_l2_range(BlockDriverState *bs,
                                         uint64_t offset, uint64_t bytes,
                                         int op, bool full_discard,
                                         int flags)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t nb_clusters = size_to_clusters(s, bytes);
    int ret;

    assert(!offset_into_cluster(s, offset));
    wait_for_allocations(bs, offset, bytes);
    while (nb_clusters > 0) {
        int n = MIN(nb_clusters, (uint64_t)(l2_slice_entries(s) -
                                 offset_to_l2_slice_index(s, offset)));

        ret = rewrite_l2_slice(bs, offset, n, op, full_discard, flags);
        if (ret < 0) {
            return ret;
        }
        offset += (uint64_t)n << s->cluster_bits;
        nb_clusters -= n;
    }
    return 0;
}

int coroutine_fn qcow2_cluster_discard(BlockDriverState *bs, uint64_t offset,
                                       uint64_t bytes, bool full_discard)
{
    return rewrite_l2_range(bs, offset, bytes, L2_OP_DISCARD, full_discard,
                            0);
}

int coroutine_fn qcow2_subcluster_zeroize(BlockDriverState *bs,
                                          uint64_t offset, uint64_t bytes,
                                          int flags)
{
    BDRVQcow2State *s = bs->opaque;

    /*
     * v2 has no zero flag.  Without a backing file unallocated clusters
     * read as zeroes, so a discard does it (as QEMU does); with one, the
     * generic layer writes zeroes instead.
     */
    if (s->qcow_version < 3) {
        if (bs->backing) {
            return -ENOTSUP;
        }
        return qcow2_cluster_discard(bs, offset, bytes, false);
    }
    return rewrite_l2_range(bs, offset, bytes, L2_OP_ZEROIZE, false, flags);
}

int coroutine_fn qcow2_preallocate_range(BlockDriverState *bs,
                                         uint64_t offset, uint64_t bytes,
                                         uint64_t *host_end)
{
    BDRVQcow2State *s = bs->opaque;

    *host_end = 0;
    while (bytes > 0) {
        /* whole clusters, so that a chunk never splits one */
        unsigned int cur = MIN(bytes, (uint64_t)(INT_MAX & -s->cluster_size));
        uint64_t host_offset;
        QCowL2Meta *m;
        int ret;

        ret = qcow2_alloc_host_offset(bs, offset, &cur, &host_offset, &m);
        if (ret < 0) {
            return ret;
        }
        if (m) {
            ret = qcow2_alloc_cluster_link_l2(bs, m);
            g_free(m);
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

int coroutine_fn qcow2_write_l1_table(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    if (!s->l1_size) {
        return 0;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_L1_UPDATE);
    return qcow2_l1_write(bs, s->l1_table_offset, s->l1_table, 0,
                          s->l1_size);
}

int coroutine_fn qcow2_l2_table_map(BlockDriverState *bs, uint64_t l2_offset,
                                    Qcow2L2EntryFn *fn, void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    int slices = s->cluster_size / s->l2_cache_entry_size;
    int per_slice = l2_slice_entries(s);
    int ret = 0;

    for (int i = 0; i < slices && ret == 0; i++) {
        uint64_t *slice;

        ret = qcow2_cache_get(bs, s->l2_table_cache,
                              l2_offset + (uint64_t)i *
                              s->l2_cache_entry_size, (void **)&slice);
        if (ret < 0) {
            break;
        }
        for (int j = 0; j < per_slice; j++) {
            uint64_t entry = l2_get_entry(s, slice, j);
            QCow2ClusterType type = qcow2_get_cluster_type(bs, entry);
            uint64_t new_entry = entry;

            if (!l2_entry_is_valid(s, entry, type)) {
                ret = l2_entry_corrupt(bs, l2_offset, i * per_slice + j,
                                       entry, type);
                break;
            }
            ret = fn(bs, type, &new_entry, opaque);
            if (ret < 0) {
                break;
            }
            if (new_entry != entry) {
                l2_set_entry(s, slice, j, new_entry);
                qcow2_cache_entry_mark_dirty(s->l2_table_cache, slice);
            }
        }
        qcow2_cache_put(s->l2_table_cache, (void **)&slice);
    }
    return ret;
}
