/*
 * qcow2 L1/L2 mapping: guest offset -> host cluster.
 *
 * A guest offset splits into an L1 index, an L2 index and an offset into
 * the cluster.  The L1 table lives in memory (s->l1_table, host-endian);
 * L2 tables are read and modified only through s->l2_table_cache, in
 * slices of s->l2_cache_entry_size bytes (big-endian, as on disk).
 *
 * Allocating writes are two-phase (qcow2.h inv. 2): this file finds
 * or allocates host clusters and describes the pending L2 update in a
 * QCowL2Meta; the caller (qcow2-io.c) writes the guest data and the
 * copy-on-write head and tail; then qcow2_alloc_cluster_link_l2() points
 * the L2 entries at the new clusters.  Between the two phases the
 * QCowL2Meta is "in flight" on s->cluster_allocs.  This file is mapping
 * only: it reads and writes metadata, never guest data.
 *
 * Invariants of this file, cited as "qcow2-cluster.c inv. N" (qcow2.h's
 * apply as well):
 *  1. At most one in-flight QCowL2Meta covers a given guest cluster.  A
 *     request that touches a cluster of an in-flight allocation waits on
 *     its dependent_requests and looks again; requests on other clusters
 *     go on in parallel.  Requests allocate in ascending guest order, so
 *     waiting never forms a cycle.
 *  2. A QCowL2Meta never crosses an L2 slice, so its update touches
 *     exactly one cache entry.
 *  3. An L1 entry is written to the file only after the L2 table it points
 *     to, and that table's refcount, are on disk (l2_allocate); an L1
 *     table is made active in the header only after it is written.
 *  4. Everything here runs with s->lock held; the lock is dropped only
 *     while waiting for an in-flight allocation (inv. 1).
 */
#include "block/qcow2.h"
#include "util/coroutine.h"
#include "util/iov.h"

/*
 * Bytes of one L2 entry.  Extended L2 entries (subclusters) add a 64-bit
 * bitmap after the descriptor; every index computation below goes through
 * this and the entry accessors.
 */
static inline size_t l2_entry_size(BDRVQcow2State *s)
{
    return s->extended_l2 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
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
    return GUINT64_FROM_BE(slice[idx * (l2_entry_size(s) / 8)]);
}

static inline void l2_set_entry(BDRVQcow2State *s, uint64_t *slice, int idx,
                                uint64_t entry)
{
    slice[idx * (l2_entry_size(s) / 8)] = GUINT64_TO_BE(entry);
}

/* The subcluster bitmap of an entry; 0 without extended L2 entries. */
static inline uint64_t l2_get_bitmap(BDRVQcow2State *s, const uint64_t *slice,
                                     int idx)
{
    return s->extended_l2 ? GUINT64_FROM_BE(slice[idx * 2 + 1]) : 0;
}

static inline void l2_set_bitmap(BDRVQcow2State *s, uint64_t *slice, int idx,
                                 uint64_t bitmap)
{
    assert(s->extended_l2);
    slice[idx * 2 + 1] = GUINT64_TO_BE(bitmap);
}

/* The subcluster of @offset within its cluster (0 without subclusters). */
static inline int offset_to_sc_index(BDRVQcow2State *s, uint64_t offset)
{
    return offset_into_cluster(s, offset) >> s->subcluster_bits;
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
    BDRVQcow2State *s = bs->opaque;

    if (l2_entry & QCOW_OFLAG_COMPRESSED) {
        return QCOW2_CLUSTER_COMPRESSED;
    }
    /* with subclusters the bitmap says what reads as zeroes */
    if ((l2_entry & QCOW_OFLAG_ZERO) && !s->extended_l2) {
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
    return type == QCOW2_CLUSTER_NORMAL || type == QCOW2_CLUSTER_ZERO_ALLOC ||
           type == QCOW2_CLUSTER_UNALLOCATED_ALLOC;
}

/* True if freeing the entry's reference releases something. */
static bool cluster_type_is_allocated(QCow2ClusterType type)
{
    return cluster_type_has_host(type) || type == QCOW2_CLUSTER_COMPRESSED;
}

/*
 * What subcluster @sc of the cluster that @entry and @bitmap describe
 * reads from: its own data (NORMAL), zeroes (ZERO_ALLOC when the cluster
 * has a host cluster, else ZERO_PLAIN), or the backing file (UNALLOCATED,
 * UNALLOCATED_ALLOC in a cluster that has a host cluster).  Without
 * subclusters this is the cluster's type.
 */
static QCow2ClusterType l2_subcluster_type(BlockDriverState *bs,
                                           uint64_t entry, uint64_t bitmap,
                                           int sc)
{
    BDRVQcow2State *s = bs->opaque;
    QCow2ClusterType type = qcow2_get_cluster_type(bs, entry);

    if (!s->extended_l2 || type == QCOW2_CLUSTER_COMPRESSED) {
        return type;
    }
    if (bitmap & QCOW2_SC_ZERO(sc)) {
        return type == QCOW2_CLUSTER_NORMAL ? QCOW2_CLUSTER_ZERO_ALLOC
                                            : QCOW2_CLUSTER_ZERO_PLAIN;
    }
    if (type == QCOW2_CLUSTER_NORMAL) {
        return (bitmap & QCOW2_SC_ALLOC(sc)) ? QCOW2_CLUSTER_NORMAL
                                             : QCOW2_CLUSTER_UNALLOCATED_ALLOC;
    }
    return QCOW2_CLUSTER_UNALLOCATED;
}

/*
 * A subcluster bitmap is invalid if a subcluster is both allocated and
 * zero, or allocated in a cluster without a host cluster.
 */
static bool l2_bitmap_is_valid(BlockDriverState *bs, uint64_t entry,
                               uint64_t bitmap)
{
    QCow2ClusterType type = qcow2_get_cluster_type(bs, entry);

    if (type == QCOW2_CLUSTER_COMPRESSED) {
        return true;
    }
    if ((bitmap >> 32) & bitmap) {
        return false;
    }
    return type == QCOW2_CLUSTER_NORMAL || !(bitmap & QCOW2_SC_ALL_ALLOC);
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

/*
 * How an invalid L2 entry was met.  QEMU words the report of a bad
 * subcluster bitmap differently on the two paths (two spaces before the
 * parenthesis when reading, one when allocating) and scripts such as its
 * iotest 271 match the line, so the wording follows the path.
 */
typedef enum {
    L2_ENTRY_MET_READING,
    L2_ENTRY_MET_ALLOCATING,
} L2EntryMet;

/*
 * Reports an invalid L2 entry (qcow2.h: corruption -> -EIO): an unaligned
 * host offset, or (extended L2) a subcluster bitmap that contradicts it.
 */
static int l2_entry_corrupt(BlockDriverState *bs, uint64_t l2_offset,
                            int l2_index, uint64_t entry,
                            QCow2ClusterType type, L2EntryMet met)
{
    BDRVQcow2State *s = bs->opaque;

    if (cluster_type_has_host(type) &&
        offset_into_cluster(s, entry & L2E_OFFSET_MASK)) {
        qcow2_signal_corruption(bs, true, -1, -1,
                                "Cluster allocation offset %#" PRIx64
                                " unaligned (L2 offset: %#" PRIx64
                                ", L2 index: %#x)",
                                (uint64_t)(entry & L2E_OFFSET_MASK),
                                l2_offset, l2_index);
    } else {
        qcow2_signal_corruption(bs, true, -1, -1,
                                "Invalid cluster entry found%s(L2 offset: %#"
                                PRIx64 ", L2 index: %#x)",
                                met == L2_ENTRY_MET_READING ? "  " : " ",
                                l2_offset, l2_index);
    }
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

int qcow2_write_table64(BlockDriverState *bs, int ign, int64_t offset,
                        const uint64_t *entries, uint64_t n)
{
    g_autofree uint64_t *be = g_try_new(uint64_t, n);
    int ret;

    if (!be) {
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < n; i++) {
        be[i] = GUINT64_TO_BE(entries[i]);
    }
    ret = qcow2_pre_write_overlap_check(bs, ign, offset, n * sizeof(uint64_t));
    if (ret < 0) {
        return ret;
    }
    ret = bdrv_pwrite(bs->file, offset, n * sizeof(uint64_t), be, 0);
    return ret < 0 ? ret : 0;
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
    int ret = qcow2_write_table64(bs, QCOW2_OL_ACTIVE_L1,
                                  l1_offset + first * sizeof(uint64_t),
                                  table + first, count);

    if (ret < 0) {
        return ret;
    }
    ret = bdrv_co_flush(bs->file->bs);
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
    int ret;

    _Static_assert(offsetof(QCowHeader, l1_table_offset) ==
                   offsetof(QCowHeader, l1_size) + sizeof(uint32_t),
                   "l1_size and l1_table_offset are adjacent");
    ret = qcow2_header_write(bs, offsetof(QCowHeader, l1_size), &fields,
                             sizeof(fields));
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
    qcow2_overlap_singles_changed(s);
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

/*
 * Gives L1 entry @l1_index a fresh L2 table with refcount 1: a copy of the
 * table it points to now (shared with a snapshot), or zeroes if none.
 * qcow2-cluster.c inv. 3.
 */
static int coroutine_fn l2_allocate(BlockDriverState *bs, int l1_index)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t old_l1_entry = s->l1_table[l1_index];
    uint64_t old_l2_offset = old_l1_entry & L1E_OFFSET_MASK;
    int slices = s->cluster_size / s->l2_cache_entry_size;
    int64_t l2_offset;
    int ret;

    l2_offset = qcow2_alloc_named_clusters(bs, s->l2_size * l2_entry_size(s),
                                           "L2 table");
    if (l2_offset < 0) {
        return l2_offset;
    }
    /* the new table's refcount reaches the file first, before any slice
     * of it is dirty: if that fails, freeing it again needs no L2 write */
    ret = qcow2_cache_write(bs, s->refcount_block_cache);
    if (ret < 0) {
        goto fail;
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
    /* the L1 entry on disk still names the old table (or none) */
    qcow2_free_unreferenced_clusters(bs, l2_offset,
                                     s->l2_size * l2_entry_size(s),
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
    uint64_t entry, bitmap, first_host, pos;
    QCow2ClusterType cluster_type;
    int64_t l2_offset;
    int ret;

    assert(*bytes > 0);
    bytes_available = (uint64_t)(l2_slice_entries(s) - slice_index)
                      << s->cluster_bits;
    bytes_needed = MIN(bytes_needed, bytes_available);
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
    bitmap = l2_get_bitmap(s, slice, slice_index);
    cluster_type = qcow2_get_cluster_type(bs, entry);
    if (!l2_entry_is_valid(s, entry, cluster_type) ||
        !l2_bitmap_is_valid(bs, entry, bitmap)) {
        qcow2_cache_put(s->l2_table_cache, (void **)&slice);
        return l2_entry_corrupt(bs, l2_offset,
                                offset_to_l2_index(s, offset), entry,
                                cluster_type, L2_ENTRY_MET_READING);
    }
    *type = l2_subcluster_type(bs, entry, bitmap,
                               offset_to_sc_index(s, offset));

    first_host = entry & L2E_OFFSET_MASK;
    if (*type == QCOW2_CLUSTER_COMPRESSED) {
        /* each compressed cluster is a run of its own */
        *host_offset = entry;
        pos = s->cluster_size;
    } else {
        if (cluster_type_has_host(*type)) {
            *host_offset = first_host + in_cluster;
        }
        /* the run goes on, subcluster by subcluster, while the type stays
         * and host clusters follow each other */
        pos = QEMU_ALIGN_DOWN(in_cluster, s->subcluster_size) +
              s->subcluster_size;
        while (pos < bytes_needed) {
            int n = pos >> s->cluster_bits;
            uint64_t e = l2_get_entry(s, slice, slice_index + n);
            uint64_t b = l2_get_bitmap(s, slice, slice_index + n);
            QCow2ClusterType ct = qcow2_get_cluster_type(bs, e);

            if (!l2_entry_is_valid(s, e, ct) ||
                !l2_bitmap_is_valid(bs, e, b) ||
                l2_subcluster_type(bs, e, b, offset_to_sc_index(s, pos)) !=
                *type) {
                break;
            }
            if (cluster_type_has_host(*type) &&
                (e & L2E_OFFSET_MASK) !=
                first_host + ((uint64_t)n << s->cluster_bits)) {
                break;
            }
            pos += s->subcluster_size;
        }
    }
    qcow2_cache_put(s->l2_table_cache, (void **)&slice);
    bytes_needed = MIN(bytes_needed, pos);

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
 * qcow2-cluster.c inv. 1.  If an in-flight allocation covers @offset's
 * cluster, waits for it and returns -EAGAIN (the caller looks again: the
 * metadata may have changed meanwhile).  If one begins later within
 * [offset, offset + *cur_bytes), shrinks *cur_bytes to end before it.
 * Returns 0 otherwise.
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
/* How a write reaches a cluster. */
typedef enum ClusterWriteKind {
    WRITE_IN_PLACE,     /* the active image owns it, all written parts too */
    WRITE_REUSE,        /* owned host cluster, metadata to update */
    WRITE_NEW,          /* needs a new host cluster */
} ClusterWriteKind;

/*
 * The kind of write to a cluster described by @e and @bitmap, of its
 * subclusters [first_sc, end_sc).  A cluster the active image owns
 * (OFLAG_COPIED) is written in place; with subclusters only if every
 * written one is allocated, else its bitmap changes too; a preallocated
 * zero cluster is reused.
 */
static ClusterWriteKind cluster_write_kind(BlockDriverState *bs, uint64_t e,
                                           uint64_t bitmap, int first_sc,
                                           int end_sc)
{
    BDRVQcow2State *s = bs->opaque;
    QCow2ClusterType type = qcow2_get_cluster_type(bs, e);
    uint64_t written = QCOW2_SC_ALLOC_RANGE(first_sc, end_sc);

    if (!(e & QCOW_OFLAG_COPIED)) {
        return WRITE_NEW;
    }
    if (type == QCOW2_CLUSTER_NORMAL) {
        return !s->extended_l2 || (bitmap & written) == written ?
               WRITE_IN_PLACE : WRITE_REUSE;
    }
    return type == QCOW2_CLUSTER_ZERO_ALLOC ? WRITE_REUSE : WRITE_NEW;
}

/* The write of [in_cluster, end) from the start of a run of clusters. */
typedef struct ClusterWrite {
    uint64_t in_cluster;        /* of the first cluster */
    uint64_t end;               /* from the start of the first cluster */
} ClusterWrite;

/* The subclusters [*first, *end) of cluster @n of the run that @w writes. */
static void cluster_write_range(BDRVQcow2State *s, const ClusterWrite *w,
                                int n, int *first, int *end)
{
    uint64_t start = (uint64_t)n << s->cluster_bits;
    uint64_t from = MAX(w->in_cluster, start);
    uint64_t to = MIN(w->end, start + s->cluster_size);

    *first = (from - start) >> s->subcluster_bits;
    *end = DIV_ROUND_UP(to - start, s->subcluster_size);
}

/*
 * Counts the clusters from slice index @idx on (at most @max) that a write
 * reaches the same way as the first, @kind; host clusters contiguous
 * unless they are new.
 */
static int count_run(BlockDriverState *bs, uint64_t *slice, int idx, int max,
                     const ClusterWrite *w, ClusterWriteKind kind,
                     uint64_t first_host)
{
    BDRVQcow2State *s = bs->opaque;
    int n;

    for (n = 0; n < max; n++) {
        uint64_t e = l2_get_entry(s, slice, idx + n);
        uint64_t b = l2_get_bitmap(s, slice, idx + n);
        int first, end;

        cluster_write_range(s, w, n, &first, &end);
        if (!l2_entry_is_valid(s, e, qcow2_get_cluster_type(bs, e)) ||
            !l2_bitmap_is_valid(bs, e, b) ||
            cluster_write_kind(bs, e, b, first, end) != kind) {
            break;
        }
        if (kind != WRITE_NEW &&
            (e & L2E_OFFSET_MASK) !=
            first_host + ((uint64_t)n << s->cluster_bits)) {
            break;
        }
    }
    return n;
}

/*
 * Where the copy-on-write around a write must start (relative to the
 * first cluster): at the cluster's start without subclusters.  With them,
 * a cluster that moves brings its allocated subclusters (from the first
 * to the last, all of a compressed cluster); unallocated and zero ones
 * outside that keep what they read through the bitmap; a written
 * subcluster that holds data already in a reused cluster needs no copy;
 * else the written subcluster is completed.  @end_side asks the same for
 * the end of the write in the last cluster (@n), returning where the copy
 * ends.
 */
static uint64_t cow_boundary(BlockDriverState *bs, uint64_t entry,
                             uint64_t bitmap, ClusterWriteKind kind,
                             uint64_t pos, bool end_side, int n)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cluster_start = (uint64_t)n << s->cluster_bits;
    QCow2ClusterType type = qcow2_get_cluster_type(bs, entry);
    int sc = ((end_side ? pos - 1 : pos) - cluster_start) >>
             s->subcluster_bits;

    if (!s->extended_l2) {
        return end_side ? cluster_start + s->cluster_size : cluster_start;
    }
    if (kind == WRITE_NEW && type == QCOW2_CLUSTER_COMPRESSED) {
        return end_side ? cluster_start + s->cluster_size : cluster_start;
    }
    if (kind == WRITE_NEW && cluster_type_has_host(type) &&
        (bitmap & QCOW2_SC_ALL_ALLOC)) {
        uint32_t alloc = bitmap & QCOW2_SC_ALL_ALLOC;

        if (end_side) {
            int last = 31 - __builtin_clz(alloc);

            return cluster_start +
                   ((uint64_t)MAX(last, sc) + 1) * s->subcluster_size;
        }
        return cluster_start +
               ((uint64_t)MIN(__builtin_ctz(alloc), sc) <<
                s->subcluster_bits);
    }
    if (kind == WRITE_REUSE && (bitmap & QCOW2_SC_ALLOC(sc))) {
        return pos;
    }
    return end_side ? ROUND_UP(pos, s->subcluster_size)
                    : QEMU_ALIGN_DOWN(pos, s->subcluster_size);
}

/*
 * The run of a write that starts at guest @offset got only @n clusters:
 * shortens *cur_bytes to them and reads the L2 entry of the last one.
 */
static int coroutine_fn shorten_alloc_run(BlockDriverState *bs,
                                          uint64_t offset, int n,
                                          uint64_t *cur_bytes,
                                          uint64_t *last_entry,
                                          uint64_t *last_bitmap)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t *slice;
    uint64_t l2_offset;
    int slice_index, ret;

    ret = get_cluster_table(bs, offset, &slice, &l2_offset, &slice_index);
    if (ret < 0) {
        return ret;
    }
    *cur_bytes = MIN(*cur_bytes, ((uint64_t)n << s->cluster_bits) -
                                 offset_into_cluster(s, offset));
    *last_entry = l2_get_entry(s, slice, slice_index + n - 1);
    *last_bitmap = l2_get_bitmap(s, slice, slice_index + n - 1);
    qcow2_cache_put(s->l2_table_cache, (void **)&slice);
    return 0;
}

int coroutine_fn qcow2_alloc_host_offset(BlockDriverState *bs,
                                         uint64_t offset,
                                         unsigned int *bytes,
                                         uint64_t *host_offset,
                                         QCowL2Meta **m)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t in_cluster = offset_into_cluster(s, offset);
    uint64_t cur_bytes, slice_end, alloc_offset, entry, bitmap;
    uint64_t last_entry, last_bitmap;
    uint64_t *slice;
    uint64_t l2_offset;
    int slice_index, nb_clusters, n, first_sc, end_sc;
    ClusterWriteKind kind;
    ClusterWrite w;
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
    bitmap = l2_get_bitmap(s, slice, slice_index);
    if (!l2_entry_is_valid(s, entry, qcow2_get_cluster_type(bs, entry)) ||
        !l2_bitmap_is_valid(bs, entry, bitmap)) {
        qcow2_cache_put(s->l2_table_cache, (void **)&slice);
        if (qcow2_get_cluster_type(bs, entry) == QCOW2_CLUSTER_ZERO_ALLOC &&
            offset_into_cluster(s, entry & L2E_OFFSET_MASK)) {
            qcow2_signal_corruption(bs, true, -1, -1, "Preallocated zero "
                                    "cluster offset %#" PRIx64 " unaligned "
                                    "(guest offset: %#" PRIx64 ")",
                                    (uint64_t)(entry & L2E_OFFSET_MASK),
                                    offset);
            return -EIO;
        }
        return l2_entry_corrupt(bs, l2_offset, offset_to_l2_index(s, offset),
                                entry, qcow2_get_cluster_type(bs, entry),
                                L2_ENTRY_MET_ALLOCATING);
    }
    w.in_cluster = in_cluster;
    w.end = in_cluster + cur_bytes;
    cluster_write_range(s, &w, 0, &first_sc, &end_sc);
    kind = cluster_write_kind(bs, entry, bitmap, first_sc, end_sc);
    n = count_run(bs, slice, slice_index, nb_clusters, &w, kind,
                  entry & L2E_OFFSET_MASK);
    assert(n > 0);
    cur_bytes = MIN(cur_bytes, ((uint64_t)n << s->cluster_bits) - in_cluster);
    w.end = in_cluster + cur_bytes;
    last_entry = l2_get_entry(s, slice, slice_index + n - 1);
    last_bitmap = l2_get_bitmap(s, slice, slice_index + n - 1);
    qcow2_cache_put(s->l2_table_cache, (void **)&slice);

    if (kind == WRITE_IN_PLACE) {
        *host_offset = (entry & L2E_OFFSET_MASK) + in_cluster;
        *bytes = cur_bytes;
        return 0;
    }
    keep_old = kind == WRITE_REUSE;
    if (keep_old) {
        alloc_offset = entry & L2E_OFFSET_MASK;
    } else if (has_data_file(bs)) {
        /* an external data file holds each cluster at its guest offset
         * (QEMU requires it) and has no refcounts */
        alloc_offset = start_of_cluster(s, offset);
    } else {
        int64_t ret64 = 0;

        BLKDBG_EVENT(bs->file, BLKDBG_CLUSTER_ALLOC);
        if (*host_offset) {
            /* the previous piece's host range goes on as far as it is
             * free, as QEMU's does: no gap it leaves stays a hole */
            ret64 = qcow2_alloc_clusters_at(bs, *host_offset, n);
            if (ret64 < 0) {
                return ret64;
            }
            alloc_offset = *host_offset;
        }
        if (ret64 == 0) {
            ret64 = qcow2_alloc_clusters(bs, (uint64_t)n << s->cluster_bits);
            if (ret64 < 0) {
                return ret64;
            }
            alloc_offset = ret64;
        } else if (ret64 < n) {
            ret = shorten_alloc_run(bs, offset, ret64, &cur_bytes,
                                    &last_entry, &last_bitmap);
            if (ret < 0) {
                qcow2_free_unreferenced_clusters(bs, alloc_offset,
                                                 ret64 << s->cluster_bits,
                                                 QCOW2_DISCARD_NEVER);
                return ret;
            }
            n = ret64;
            w.end = in_cluster + cur_bytes;
        }
    }

    meta = g_new0(QCowL2Meta, 1);
    meta->offset = start_of_cluster(s, offset);
    meta->alloc_offset = alloc_offset;
    meta->nb_clusters = n;
    meta->keep_old_clusters = keep_old;
    meta->cow_start_offset = cow_boundary(bs, entry, bitmap, kind,
                                          in_cluster, false, 0);
    meta->cow_start_bytes = in_cluster - meta->cow_start_offset;
    meta->cow_end_offset = w.end;
    meta->cow_end_bytes = cow_boundary(bs, last_entry, last_bitmap, kind,
                                       w.end, true, n - 1) - w.end;
    meta->filled_start = meta->cow_start_offset;
    meta->filled_end = meta->cow_end_offset + meta->cow_end_bytes;
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

static void coroutine_fn wait_for_allocations(BlockDriverState *bs,
                                              uint64_t offset,
                                              uint64_t bytes);

/*
 * The subclusters of cluster @i of @m that the write and its copy-on-write
 * filled are allocated now and no longer zero; the others keep their
 * state.
 */
static void l2meta_update_bitmap(BDRVQcow2State *s, QCowL2Meta *m,
                                 uint64_t *slice, int idx, int i)
{
    uint64_t start = (uint64_t)i << s->cluster_bits;
    uint64_t from = MAX(m->filled_start, start);
    uint64_t to = MIN(m->filled_end, start + s->cluster_size);
    uint64_t bitmap = l2_get_bitmap(s, slice, idx);
    int first = (from - start) >> s->subcluster_bits;
    int end = DIV_ROUND_UP(to - start, s->subcluster_size);

    assert(from < to);
    bitmap |= QCOW2_SC_ALLOC_RANGE(first, end);
    bitmap &= ~QCOW2_SC_ZERO_RANGE(first, end);
    l2_set_bitmap(s, slice, idx, bitmap);
}

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
    /* qcow2.h inv. 2: the copy-on-write is done */
    assert(!m->cow_start_bytes && !m->cow_end_bytes);
    if (s->use_lazy_refcounts) {
        /* qcow2.h inv. 5: dirty before deferred refcounts can matter */
        ret = qcow2_mark_dirty(bs);
        if (ret < 0) {
            goto fail;
        }
    } else {
        /* qcow2.h inv. 1 */
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
    /* qcow2-cluster.c inv. 2: the update stays in one slice */
    assert(slice_index + m->nb_clusters <= l2_slice_entries(s));

    BLKDBG_EVENT(bs->file, BLKDBG_L2_UPDATE);
    old_entries = g_new(uint64_t, m->nb_clusters);
    for (int i = 0; i < m->nb_clusters; i++) {
        uint64_t host = m->alloc_offset + ((uint64_t)i << s->cluster_bits);

        old_entries[i] = l2_get_entry(s, slice, slice_index + i);
        l2_set_entry(s, slice, slice_index + i, host | QCOW_OFLAG_COPIED);
        if (s->extended_l2 && !m->prealloc) {
            l2meta_update_bitmap(s, m, slice, slice_index + i, i);
        }
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
    /* qcow2.h inv. 1: the bytes' refcounts reach the file first */
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
                                old, qcow2_get_cluster_type(bs, old),
                                L2_ENTRY_MET_ALLOCATING);
    }
    BLKDBG_EVENT(bs->file, BLKDBG_L2_UPDATE_COMPRESSED);
    l2_set_entry(s, slice, slice_index, l2_entry);
    if (s->extended_l2) {
        /* a compressed cluster has no subclusters */
        l2_set_bitmap(s, slice, slice_index, 0);
    }
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
    if (!m->keep_old_clusters && !has_data_file(bs)) {
        /* never linked: no L2 table names them, so their refcounts need
         * not wait for the L2 cache (which may be what failed) */
        qcow2_free_unreferenced_clusters(bs, m->alloc_offset,
                                         (uint64_t)m->nb_clusters <<
                                         s->cluster_bits,
                                         QCOW2_DISCARD_NEVER);
    }
    l2meta_finish(s, m);
}

/*
 * Waits until no in-flight allocation overlaps the clusters of [offset,
 * offset + bytes), so that discard and zeroize never change an L2 entry
 * that a pending link_l2 is about to overwrite
 * (qcow2-cluster.c inv. 1).
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

/*
 * What a discard leaves in an entry and its bitmap (whole clusters); see
 * qcow2_cluster_discard().
 */
static void discarded_entry(BlockDriverState *bs, uint64_t *entry,
                            uint64_t *bitmap, bool full_discard)
{
    BDRVQcow2State *s = bs->opaque;
    QCow2ClusterType type = qcow2_get_cluster_type(bs, *entry);

    if (full_discard) {
        *entry = 0;
        *bitmap = 0;
    } else if (bs->backing || cluster_type_is_allocated(type)) {
        /* v2 has no zero flag: the backing file shows through there */
        *entry = s->qcow_version >= 3 && !s->extended_l2 ? QCOW_OFLAG_ZERO
                                                         : 0;
        *bitmap = s->extended_l2 ? QCOW2_SC_ALL_ZERO : 0;
    }
    /* else unallocated or zero without a backing file reads zeroes already */
}

/*
 * What zeroize leaves in an entry and its bitmap for subclusters
 * [first, end) (the whole cluster without subclusters); see
 * qcow2_subcluster_zeroize().  -ENOTSUP: part of a compressed cluster.
 */
static int zeroized_entry(BlockDriverState *bs, uint64_t *entry,
                          uint64_t *bitmap, int first, int end, int flags,
                          bool *unmap)
{
    BDRVQcow2State *s = bs->opaque;
    QCow2ClusterType type = qcow2_get_cluster_type(bs, *entry);
    bool whole = !s->extended_l2 || (first == 0 && end == QCOW2_SUBCLUSTERS);

    if (!whole) {
        if (type == QCOW2_CLUSTER_COMPRESSED) {
            return -ENOTSUP;
        }
        *unmap = false;
        *bitmap |= QCOW2_SC_ZERO_RANGE(first, end);
        *bitmap &= ~QCOW2_SC_ALLOC_RANGE(first, end);
        return 0;
    }
    /* a compressed descriptor cannot carry the zero flag */
    *unmap = type == QCOW2_CLUSTER_COMPRESSED ||
             ((flags & BDRV_REQ_MAY_UNMAP) && cluster_type_is_allocated(type));
    if (s->extended_l2) {
        *entry = *unmap ? 0 : *entry;
        *bitmap = QCOW2_SC_ALL_ZERO;
    } else {
        *entry = *unmap ? QCOW_OFLAG_ZERO : *entry | QCOW_OFLAG_ZERO;
    }
    return 0;
}

enum {
    L2_OP_DISCARD,
    L2_OP_ZEROIZE,
};

/*
 * What rewrite_l2_range() does to each entry: one set of options, which it
 * hands unchanged to rewrite_l2_slice() for every slice of the range.
 */
typedef struct L2Rewrite {
    int op;                         /* L2_OP_DISCARD or L2_OP_ZEROIZE */
    bool full_discard;              /* discard: see discarded_entry() */
    int flags;                      /* zeroize: see zeroized_entry() */
    Qcow2DiscardType discard_type;  /* for the clusters it frees */
} L2Rewrite;

/*
 * Rewrites the entries of the clusters that [offset, offset + bytes)
 * touches, all within one L2 slice (subclusters of the first and last
 * cluster only, for zeroize with subclusters), and frees what the
 * replaced entries pointed to.
 */
static int coroutine_fn rewrite_l2_slice(BlockDriverState *bs,
                                         uint64_t offset, uint64_t bytes,
                                         const L2Rewrite *rw)
{
    BDRVQcow2State *s = bs->opaque;
    int l1_index = offset_to_l1_index(s, offset);
    int nb_clusters = size_to_clusters(s, offset_into_cluster(s, offset) +
                                          bytes);
    ClusterWrite w = {
        .in_cluster = offset_into_cluster(s, offset),
        .end = offset_into_cluster(s, offset) + bytes,
    };
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
        uint64_t new = 0, new_bitmap = 0;

        if (rw->op == L2_OP_DISCARD) {
            discarded_entry(bs, &new, &new_bitmap, rw->full_discard);
        } else {
            bool no_table_unmap;
            int first, end;

            /* every entry is the same (0): the first cluster tells */
            cluster_write_range(s, &w, 0, &first, &end);
            ret = zeroized_entry(bs, &new, &new_bitmap, first, end, rw->flags,
                                 &no_table_unmap);
            if (ret < 0) {
                return ret;
            }
        }
        if (new == 0 && new_bitmap == 0) {
            return 0;
        }
    }

    ret = get_cluster_table(bs, offset, &slice, &l2_offset, &slice_index);
    if (ret < 0) {
        return ret;
    }
    for (int i = 0; i < nb_clusters; i++) {
        uint64_t old = l2_get_entry(s, slice, slice_index + i);
        uint64_t old_bitmap = l2_get_bitmap(s, slice, slice_index + i);
        QCow2ClusterType type = qcow2_get_cluster_type(bs, old);
        uint64_t new = old, new_bitmap = old_bitmap;
        bool unmap = true;
        int first, end;

        /* a discard drops an unaligned host offset with the entry, and
         * qcow2_free_any_cluster() reports it as non-fatal, as in QEMU */
        if ((rw->op != L2_OP_DISCARD && !l2_entry_is_valid(s, old, type)) ||
            !l2_bitmap_is_valid(bs, old, old_bitmap)) {
            qcow2_cache_put(s->l2_table_cache, (void **)&slice);
            return l2_entry_corrupt(bs, l2_offset,
                                    offset_to_l2_index(s, offset) + i, old,
                                    type, L2_ENTRY_MET_ALLOCATING);
        }
        if (rw->op == L2_OP_DISCARD) {
            discarded_entry(bs, &new, &new_bitmap, rw->full_discard);
        } else {
            cluster_write_range(s, &w, i, &first, &end);
            ret = zeroized_entry(bs, &new, &new_bitmap, first, end, rw->flags,
                                 &unmap);
            if (ret < 0) {
                qcow2_cache_put(s->l2_table_cache, (void **)&slice);
                return ret;
            }
        }
        if (new == old && new_bitmap == old_bitmap) {
            continue;
        }
        l2_set_entry(s, slice, slice_index + i, new);
        if (s->extended_l2) {
            l2_set_bitmap(s, slice, slice_index + i, new_bitmap);
        }
        qcow2_cache_entry_mark_dirty(s->l2_table_cache, slice);
        if (unmap && new != old && cluster_type_is_allocated(type)) {
            qcow2_free_any_cluster(bs, old, 1, rw->discard_type);
        }
    }
    qcow2_cache_put(s->l2_table_cache, (void **)&slice);
    return 0;
}

/*
 * Applies rewrite_l2_slice() to [offset, offset + bytes), slice by slice;
 * the range is whole clusters (or subclusters, for zeroize with them).
 *
 * The clusters it frees are discarded in the file once, at the end, with
 * adjacent ones merged (as QEMU does): one request per run of the file
 * instead of one per cluster.  Besides the system calls, that keeps the
 * file's extents as QEMU leaves them: punching a run cluster by cluster,
 * from its middle, splits an extent first, and a file system that then
 * needs an extent tree block keeps it (250 measures it with du).
 */
static int coroutine_fn rewrite_l2_range(BlockDriverState *bs,
                                         uint64_t offset, uint64_t bytes,
                                         const L2Rewrite *rw)
{
    BDRVQcow2State *s = bs->opaque;
    bool batching = s->cache_discards;
    int ret = 0;

    assert(!(offset & (s->subcluster_size - 1)));
    wait_for_allocations(bs, offset, bytes);
    s->cache_discards = true;
    while (bytes > 0) {
        uint64_t slice_end = ROUND_UP(offset + 1, l2_slice_bytes_mapped(s));
        uint64_t n = MIN(bytes, slice_end - offset);

        ret = rewrite_l2_slice(bs, offset, n, rw);
        if (ret < 0) {
            break;
        }
        offset += n;
        bytes -= n;
    }
    /* a caller that batches already issues them before dropping s->lock */
    s->cache_discards = batching;
    if (!batching) {
        /* what was freed before a failure is free: discard it all the same */
        qcow2_process_discards(bs, 0);
    }
    return ret;
}

int coroutine_fn qcow2_cluster_discard(BlockDriverState *bs, uint64_t offset,
                                       uint64_t bytes, bool full_discard,
                                       Qcow2DiscardType type)
{
    L2Rewrite rw = { .op = L2_OP_DISCARD, .full_discard = full_discard,
                     .discard_type = type };

    return rewrite_l2_range(bs, offset, bytes, &rw);
}

int coroutine_fn qcow2_subcluster_zeroize(BlockDriverState *bs,
                                          uint64_t offset, uint64_t bytes,
                                          int flags)
{
    BDRVQcow2State *s = bs->opaque;
    L2Rewrite rw = { .op = L2_OP_ZEROIZE, .flags = flags,
                     .discard_type = QCOW2_DISCARD_REQUEST };

    /*
     * v2 has no zero flag.  Without a backing file unallocated clusters
     * read as zeroes, so a discard does it (as QEMU does); with one, the
     * generic layer writes zeroes instead.
     */
    if (s->qcow_version < 3) {
        if (bs->backing) {
            return -ENOTSUP;
        }
        return qcow2_cluster_discard(bs, offset, bytes, false,
                                     QCOW2_DISCARD_REQUEST);
    }
    return rewrite_l2_range(bs, offset, bytes, &rw);
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
                                       entry, type, L2_ENTRY_MET_READING);
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
