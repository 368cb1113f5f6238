/*
 * qcow2: reference counts of host clusters.
 *
 * The refcount table (s->refcount_table, host-endian copy of the on-disk
 * table) points at refcount blocks; block i describes host clusters
 * [i << refcount_block_bits, (i + 1) << refcount_block_bits).  A refcount
 * block is an array of refcount_bits-wide big-endian unsigned entries;
 * entries narrower than a byte are packed starting at the least
 * significant bit of each byte.  A missing block (table entry 0) or a
 * cluster beyond the table has refcount 0.
 *
 * Allocation is first-fit from s->free_cluster_index.  As in QEMU, a
 * search leaves the index past the range it found, so that the refcount
 * block that range may need goes after it, and the retry searches again
 * from the range found, which then takes the first free clusters (no
 * hole).  Such a block can lie outside the range it describes and, after
 * a shrink, describe nothing; the shrink frees it (qcow2_shrink_reftable,
 * as QEMU's does).  Only freeing moves the index back: free clusters
 * below it that were too few for an earlier request stay unused until
 * then.  Host layouts therefore come out as QEMU's do (a write's later
 * pieces continue where the earlier ones ended, qcow2_alloc_host_offset).
 * Giving a cluster a refcount may need a new refcount block (which may
 * describe itself) or a bigger refcount table; whenever such metadata
 * was allocated, the update returns -EAGAIN and the allocator searches
 * again, because the new metadata may sit where the free range was
 * found.
 *
 * Ordering (besides qcow2.h inv. 1, enforced by the cache dependency):
 *  - a new refcount block reaches the disk before the table entry that
 *    points to it, and a new table with its blocks before the header
 *    switches to it; the old table is freed only after the switch;
 *  - a decrease makes the refcount cache depend on the L2 cache, so that
 *    a refcount reaches 0 on disk only after the L2 entry that referenced
 *    the cluster was replaced.
 *
 * Everything here runs under s->lock (qcow2.h inv. 4).
 */
#include "block/qcow2.h"
#include "util/aio.h"
#include "util/coroutine.h"

/* A freed range waiting to be discarded in the file. */
typedef struct Qcow2DiscardRegion {
    BdrvChild *child;           /* bs->file, or an external data file */
    uint64_t offset;
    uint64_t bytes;
} Qcow2DiscardRegion;

/* ---------------------------------------------------------------------- */
/* Refcount block entries */

/*
 * Where entry @index of a refcount block lies when entries are narrower
 * than a byte (refcount orders 0 to 2) and share bytes, lowest bits first;
 * get and set both find such an entry this way.
 */
typedef struct Qcow2RefblockBits {
    uint64_t byte;      /* the byte that holds the entry */
    int shift;          /* the entry's first bit in that byte */
    unsigned max;       /* the largest value it holds: its mask unshifted */
} Qcow2RefblockBits;

static Qcow2RefblockBits qcow2_refblock_bits(int refcount_order,
                                             uint64_t index)
{
    int bits = 1 << refcount_order;
    int per_byte = 8 / bits;

    return (Qcow2RefblockBits) {
        .byte = index / per_byte,
        .shift = (index % per_byte) * bits,
        .max = (1u << bits) - 1,
    };
}

uint64_t qcow2_refblock_get_entry(int refcount_order, const void *block,
                                  uint64_t index)
{
    const uint8_t *p = block;

    switch (refcount_order) {
    case 0:
    case 1:
    case 2: {
        Qcow2RefblockBits e = qcow2_refblock_bits(refcount_order, index);

        return (p[e.byte] >> e.shift) & e.max;
    }
    case 3:
        return p[index];
    case 4:
        return GUINT16_FROM_BE(((const uint16_t *)block)[index]);
    case 5:
        return GUINT32_FROM_BE(((const uint32_t *)block)[index]);
    case 6:
        return GUINT64_FROM_BE(((const uint64_t *)block)[index]);
    default:
        g_assert_not_reached();
    }
}

void qcow2_refblock_set_entry(int refcount_order, void *block, uint64_t index,
                              uint64_t value)
{
    uint8_t *p = block;

    switch (refcount_order) {
    case 0:
    case 1:
    case 2: {
        Qcow2RefblockBits e = qcow2_refblock_bits(refcount_order, index);
        uint8_t mask = e.max << e.shift;

        assert(value <= e.max);
        p[e.byte] = (p[e.byte] & ~mask) | (uint8_t)(value << e.shift);
        break;
    }
    case 3:
        assert(value <= UINT8_MAX);
        p[index] = value;
        break;
    case 4:
        assert(value <= UINT16_MAX);
        ((uint16_t *)block)[index] = GUINT16_TO_BE(value);
        break;
    case 5:
        assert(value <= UINT32_MAX);
        ((uint32_t *)block)[index] = GUINT32_TO_BE(value);
        break;
    case 6:
        ((uint64_t *)block)[index] = GUINT64_TO_BE(value);
        break;
    default:
        g_assert_not_reached();
    }
}

/* The refcount table index of the block that describes host @offset. */
static inline uint64_t qcow2_rt_index(BDRVQcow2State *s, uint64_t offset)
{
    return offset >> (s->cluster_bits + s->refcount_block_bits);
}

static uint64_t qcow2_refblock_get(BDRVQcow2State *s, const void *block,
                                   uint64_t index)
{
    return qcow2_refblock_get_entry(s->refcount_order, block, index);
}

static void qcow2_refblock_set(BDRVQcow2State *s, void *block,
                               uint64_t index, uint64_t value)
{
    qcow2_refblock_set_entry(s->refcount_order, block, index, value);
}

/* ---------------------------------------------------------------------- */
/* Open and close */

int qcow2_refcount_init(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t bytes = (uint64_t)s->refcount_table_size * sizeof(uint64_t);
    uint32_t i;
    int ret;

    /*
     * Not checked against the file length: like QEMU, a table beyond the
     * end reads as zeroes, so that check can still repair the image.
     */
    if (bytes > QCOW_MAX_REFTABLE_SIZE) {
        return -EFBIG;
    }
    /*
     * An empty table (opened for check to rebuild it) may be anywhere.  A
     * table at offset 0 is the header's bytes: like QEMU, open it all the
     * same, so that reads still work and check can rebuild it (its
     * entries are reported, and the header's writes ignore it:
     * qcow2_overlap_in_header()).
     */
    if (bytes && (s->refcount_table_offset < 0 ||
                  offset_into_cluster(s, s->refcount_table_offset) ||
                  (uint64_t)s->refcount_table_offset > INT64_MAX - bytes)) {
        return -EINVAL;
    }

    s->refcount_table = g_try_new0(uint64_t, MAX(s->refcount_table_size, 1));
    if (!s->refcount_table) {
        return -ENOMEM;
    }
    if (bytes) {
        BLKDBG_EVENT(bs->file, BLKDBG_REFTABLE_LOAD);
        ret = bdrv_pread(bs->file, s->refcount_table_offset, bytes,
                         s->refcount_table, 0);
        if (ret < 0) {
            g_free(s->refcount_table);
            s->refcount_table = NULL;
            return ret;
        }
        for (i = 0; i < s->refcount_table_size; i++) {
            s->refcount_table[i] = GUINT64_FROM_BE(s->refcount_table[i]);
        }
    }
    return 0;
}

void qcow2_refcount_close(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    g_free(s->refcount_table);
    s->refcount_table = NULL;
    g_list_free_full(s->discards, g_free);
    s->discards = NULL;
}

/* ---------------------------------------------------------------------- */
/* Reading refcounts */

/*
 * The refcount block offset of table entry @rt_index, 0 if there is none;
 * -EIO (after reporting corruption) if the entry is not cluster aligned or
 * lies past what a host offset can be (L1E_OFFSET_MASK's 56 bits): such an
 * offset, stored in an int64_t, could read as negative, i.e. as an error
 * code, or be truncated into a positive int by a caller.
 */
static int64_t qcow2_refblock_offset(BlockDriverState *bs, uint64_t rt_index)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t offset;

    if (rt_index >= s->refcount_table_size) {
        return 0;
    }
    offset = s->refcount_table[rt_index] & REFT_OFFSET_MASK;
    if (offset & ~L1E_OFFSET_MASK) {
        qcow2_signal_corruption(bs, true, -1, -1,
                                "Refblock offset %#" PRIx64 " past the "
                                "largest host offset (reftable index: "
                                "%#" PRIx64 ")", offset, rt_index);
        return -EIO;
    }
    if (offset && offset_into_cluster(s, offset)) {
        qcow2_signal_corruption(bs, true, offset, -1,
                                "Refblock offset %#" PRIx64 " unaligned "
                                "(reftable index: %#" PRIx64 ")",
                                offset, rt_index);
        return -EIO;
    }
    return offset;
}

int qcow2_get_refcount(BlockDriverState *bs, int64_t cluster_index,
                       uint64_t *refcount)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t rt_index = cluster_index >> s->refcount_block_bits;
    void *block;
    int64_t offset;
    int ret;

    offset = qcow2_refblock_offset(bs, rt_index);
    if (offset <= 0) {
        *refcount = 0;
        return offset;
    }
    ret = qcow2_cache_get(bs, s->refcount_block_cache, offset, &block);
    if (ret < 0) {
        return ret;
    }
    *refcount = qcow2_refblock_get(s, block, cluster_index &
                                   (s->refcount_block_size - 1));
    qcow2_cache_put(s->refcount_block_cache, &block);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Discards */

static bool qcow2_discard_enabled(BDRVQcow2State *s, Qcow2DiscardType type)
{
    switch (type) {
    case QCOW2_DISCARD_NEVER:
        return false;
    case QCOW2_DISCARD_ALWAYS:
        return true;
    case QCOW2_DISCARD_REQUEST:
        return s->discard_passthrough_request;
    case QCOW2_DISCARD_SNAPSHOT:
        return s->discard_passthrough_snapshot;
    case QCOW2_DISCARD_OTHER:
        return s->discard_passthrough_other;
    }
    g_assert_not_reached();
}

/*
 * Queues [offset, offset + bytes) of @child, merged with the regions it
 * touches so that a run of freed clusters becomes one discard, whatever
 * order its clusters were freed in (a region that grows until it meets
 * another one is joined with it).
 */
static void qcow2_queue_discard(BDRVQcow2State *s, BdrvChild *child,
                                uint64_t offset, uint64_t bytes)
{
    Qcow2DiscardRegion *d;
    GList *l = s->discards;

    while (l) {
        GList *next = l->next;

        d = l->data;
        if (d->child == child &&
            (d->offset + d->bytes == offset || offset + bytes == d->offset)) {
            offset = MIN(offset, d->offset);
            bytes += d->bytes;
            g_free(d);
            s->discards = g_list_delete_link(s->discards, l);
        }
        l = next;
    }
    d = g_new(Qcow2DiscardRegion, 1);
    d->child = child;
    d->offset = offset;
    d->bytes = bytes;
    s->discards = g_list_append(s->discards, d);
}

typedef struct Qcow2DiscardCo {
    GList *regions;
    bool done;
} Qcow2DiscardCo;

static void coroutine_fn qcow2_discard_co_entry(void *opaque)
{
    Qcow2DiscardCo *dc = opaque;
    GList *l;

    for (l = dc->regions; l; l = l->next) {
        Qcow2DiscardRegion *d = l->data;

        /* A failed discard only leaves data in place: nothing to undo. */
        bdrv_co_pdiscard(d->child, d->offset, d->bytes);
    }
    dc->done = true;
}

void qcow2_process_discards(BlockDriverState *bs, int ret)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2DiscardCo dc = { .regions = s->discards };

    s->discards = NULL;
    /*
     * A corrupt image's refcounts may have freed metadata: nothing more
     * reaches the file (qcow2.h inv. 6).
     */
    if (ret >= 0 && !qcow2_refuses_writes(bs) && dc.regions) {
        if (qemu_in_coroutine()) {
            qcow2_discard_co_entry(&dc);
        } else {
            /* e.g. repair at open time: run the requests and wait. */
            Coroutine *co = qemu_coroutine_create(qcow2_discard_co_entry,
                                                  &dc);

            aio_co_enter(bdrv_get_aio_context(bs), co);
            AIO_WAIT_WHILE(bdrv_get_aio_context(bs), !dc.done);
        }
    }
    g_list_free_full(dc.regions, g_free);
}

/* ---------------------------------------------------------------------- */
/* Refcount structure growth */

int qcow2_write_reftable(BlockDriverState *bs, int64_t table_offset,
                         uint64_t first, const uint64_t *entries,
                         uint64_t n)
{
    int ret;

    BLKDBG_EVENT(bs->file, BLKDBG_REFTABLE_UPDATE);
    ret = qcow2_write_table64(bs, QCOW2_OL_REFCOUNT_TABLE,
                              table_offset + first * sizeof(uint64_t),
                              entries, n);
    if (ret < 0) {
        return ret;
    }
    return bdrv_flush(bs->file->bs);
}

int qcow2_install_reftable(BlockDriverState *bs, uint64_t **table,
                           uint64_t entries, int64_t table_offset,
                           uint32_t table_clusters)
{
    BDRVQcow2State *s = bs->opaque;
    /* refcount_table_offset and _clusters are adjacent: one write. */
    struct QEMU_PACKED {
        uint64_t offset;
        uint32_t clusters;
    } header_update = {
        .offset = GUINT64_TO_BE(table_offset),
        .clusters = GUINT32_TO_BE(table_clusters),
    };
    int ret;

    ret = qcow2_header_write(bs, offsetof(QCowHeader, refcount_table_offset),
                             &header_update, sizeof(header_update));
    if (ret < 0) {
        return ret;
    }
    g_free(s->refcount_table);
    s->refcount_table = g_steal_pointer(table);
    s->refcount_table_size = entries;
    s->refcount_table_offset = table_offset;
    qcow2_overlap_singles_changed(s);
    return 0;
}

/*
 * Cluster 0 holds the header, so a consistent image gives it refcount 1
 * at least.  If it reads as free (its refcount block missing, or lying
 * past the end of the file), the refcounts are wrong and handing it out
 * would let a table or guest data overwrite the header (and the caches
 * refuse a table at offset 0): every allocation path comes through here
 * or qcow2_alloc_clusters_at(), and reports corruption instead.
 */
static int qcow2_refuse_header_cluster(BlockDriverState *bs,
                                       int64_t cluster_index,
                                       const char *what)
{
    if (cluster_index != 0) {
        return 0;
    }
    if (what) {
        /* QEMU's words where QEMU refuses the structure itself */
        qcow2_signal_corruption(bs, true, -1, -1, "Preventing invalid "
                                "allocation of %s at offset 0", what);
    } else {
        qcow2_signal_corruption(bs, true, -1, -1, "Preventing invalid "
                                "allocation of a host cluster at offset 0 "
                                "(the header's refcount is 0)");
    }
    return -EIO;
}

/*
 * Finds @size bytes of free clusters (refcount 0) from the allocation hint
 * on; returns the host offset.  Changes nothing but the hint.  @what names
 * the structure to be stored there for a corruption message, or is NULL.
 */
static int64_t qcow2_alloc_clusters_noref(BlockDriverState *bs, uint64_t size,
                                          const char *what)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t nb_clusters = size_to_clusters(s, size);
    int64_t i = s->free_cluster_index, start = i;
    uint64_t refcount;
    int ret;

    assert(nb_clusters > 0);
    while (i - start < nb_clusters) {
        ret = qcow2_get_refcount(bs, i, &refcount);
        if (ret < 0) {
            return ret;
        }
        if (refcount) {
            start = i + 1;
        }
        i++;
    }
    /* past the range, which the caller is about to use (see the top) */
    s->free_cluster_index = i;
    ret = qcow2_refuse_header_cluster(bs, start, what);
    if (ret < 0) {
        return ret;
    }

    /* Host offsets must fit in the L2 entry's 56-bit offset field. */
    if ((uint64_t)(start + nb_clusters) >
        (L2E_OFFSET_MASK >> s->cluster_bits)) {
        return -EFBIG;
    }
    return start << s->cluster_bits;
}

static int qcow2_update_refcount(BlockDriverState *bs, int64_t offset,
                                 int64_t length, uint64_t addend,
                                 bool decrease, Qcow2DiscardType type);

/*
 * How many refcount blocks an image of @clusters clusters needs, counting
 * the blocks and the table themselves, and how many clusters that table
 * takes (QEMU's arithmetic, reproduced from its layouts: it counts the
 * blocks describing the first @clusters once more, and leaves the table
 * room for half its size again).  Sets *nb_blocks and *table_clusters.
 */
static void qcow2_refcount_metadata_size(BDRVQcow2State *s, uint64_t clusters,
                                         uint64_t *nb_blocks,
                                         uint64_t *table_clusters)
{
    uint64_t epb = s->refcount_block_size;
    uint64_t ept = s->cluster_size / sizeof(uint64_t);
    uint64_t blocks = DIV_ROUND_UP(clusters, epb), table = 0;
    bool room_added = false;

    for (;;) {
        uint64_t old_blocks = blocks, old_table = table;

        blocks = DIV_ROUND_UP(clusters + table + blocks, epb);
        table = DIV_ROUND_UP(blocks, ept);
        if (blocks != old_blocks || table != old_table) {
            continue;
        }
        if (room_added) {
            break;
        }
        clusters += DIV_ROUND_UP(table, 2);
        room_added = true;
    }
    *nb_blocks = blocks;
    /* the table itself: half as many entries again, in whole clusters */
    *table_clusters = DIV_ROUND_UP(blocks + DIV_ROUND_UP(blocks, 2), ept);
}

/*
 * Replaces the refcount table by a bigger one that has entry @rt_index
 * point to @new_block, the refcount block just written for it.  The new
 * table and the refcount blocks that describe it (and themselves) go to
 * an area that starts where the first refcount block range after both
 * @rt_index's and @new_block's begins: nothing there has a refcount yet.
 * The blocks come first, then the table, as in QEMU's layout; the range
 * up to the area stays free for the allocation that needed the block.
 */
static int qcow2_grow_reftable(BlockDriverState *bs, uint64_t rt_index,
                               int64_t new_block)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t epb = s->refcount_block_size;
    uint64_t old_size = s->refcount_table_size;
    int64_t old_offset = s->refcount_table_offset;
    uint64_t area_index = MAX(rt_index, qcow2_rt_index(s, new_block)) + 1;
    uint64_t area_start = area_index * epb;     /* cluster index */
    uint64_t entries, table_clusters, total_blocks, nb_blocks, area_clusters;
    uint64_t i, c;
    g_autofree uint64_t *table = NULL;
    int64_t table_offset;
    int ret;

    assert(rt_index >= old_size);
    qcow2_refcount_metadata_size(s, area_start, &total_blocks,
                                 &table_clusters);
    /* the area's blocks are the table entries from area_index on */
    nb_blocks = total_blocks > area_index ? total_blocks - area_index : 1;
    area_clusters = nb_blocks + table_clusters;
    assert(DIV_ROUND_UP(area_clusters, epb) <= nb_blocks);
    entries = table_clusters * s->cluster_size / sizeof(uint64_t);
    if (entries * sizeof(uint64_t) > QCOW_MAX_REFTABLE_SIZE ||
        area_index + nb_blocks > entries) {
        return -EFBIG;
    }
    if (area_start + area_clusters > (L2E_OFFSET_MASK >> s->cluster_bits)) {
        return -EFBIG;
    }
    table_offset = (area_start + nb_blocks) << s->cluster_bits;

    BLKDBG_EVENT(bs->file, BLKDBG_REFTABLE_GROW);
    table = g_try_new0(uint64_t, entries);
    if (!table) {
        return -ENOMEM;
    }
    memcpy(table, s->refcount_table, old_size * sizeof(uint64_t));
    table[rt_index] = new_block;

    /* The new blocks, each giving refcount 1 to the area it describes. */
    BLKDBG_EVENT(bs->file, BLKDBG_REFBLOCK_ALLOC_WRITE_BLOCKS);
    for (i = 0; i < nb_blocks; i++) {
        uint64_t block_offset = (area_start + i) << s->cluster_bits;
        uint64_t first = (area_index + i) * epb;
        void *block;

        ret = qcow2_cache_get_empty(bs, s->refcount_block_cache,
                                    block_offset, &block);
        if (ret < 0) {
            return ret;
        }
        memset(block, 0, s->cluster_size);
        for (c = MAX(first, area_start);
             c < MIN(first + epb, area_start + area_clusters); c++) {
            qcow2_refblock_set(s, block, c - first, 1);
        }
        qcow2_cache_entry_mark_dirty(s->refcount_block_cache, block);
        qcow2_cache_put(s->refcount_block_cache, &block);
        table[area_index + i] = block_offset;
    }
    ret = qcow2_cache_flush(bs, s->refcount_block_cache);
    if (ret < 0) {
        return ret;
    }

    BLKDBG_EVENT(bs->file, BLKDBG_REFBLOCK_ALLOC_WRITE_TABLE);
    ret = qcow2_write_reftable(bs, table_offset, 0, table, entries);
    if (ret < 0) {
        return ret;
    }

    BLKDBG_EVENT(bs->file, BLKDBG_REFBLOCK_ALLOC_SWITCH_TABLE);
    ret = qcow2_install_reftable(bs, &table, entries, table_offset,
                                 table_clusters);
    if (ret < 0) {
        return ret;
    }
    for (i = old_size; i < entries; i++) {
        qcow2_overlap_refblock_changed(s, 0, s->refcount_table[i]);
    }

    qcow2_free_clusters(bs, old_offset, old_size * sizeof(uint64_t),
                        QCOW2_DISCARD_OTHER);
    return -EAGAIN;
}

/*
 * Gets the refcount block for @cluster_index into *block.  If there is
 * none, allocates it (or grows the table) and returns -EAGAIN: the caller
 * must search for free clusters again.
 *
 * blkdebug's refblock_alloc and refblock_load are QEMU's events, and QEMU
 * raises them on every such lookup, a cached block included: an
 * inject-error rule written for QEMU fails the I/O that follows the
 * lookup, whether the block was cached or not (iotest 026).
 */
static int qcow2_alloc_refcount_block(BlockDriverState *bs,
                                      int64_t cluster_index, void **block)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t rt_index = cluster_index >> s->refcount_block_bits;
    int64_t offset, new_block;
    void *nb;
    int ret;

    BLKDBG_EVENT(bs->file, BLKDBG_REFBLOCK_ALLOC);
    offset = qcow2_refblock_offset(bs, rt_index);
    if (offset < 0) {
        return offset;
    }
    if (offset) {
        BLKDBG_EVENT(bs->file, BLKDBG_REFBLOCK_LOAD);
        return qcow2_cache_get(bs, s->refcount_block_cache, offset, block);
    }

    new_block = qcow2_alloc_clusters_noref(bs, s->cluster_size,
                                           "refcount block");
    if (new_block < 0) {
        return new_block;
    }
    if (qcow2_rt_index(s, new_block) != rt_index) {
        /* Described by another block: give it its refcount there. */
        ret = qcow2_update_refcount(bs, new_block, s->cluster_size, 1, false,
                                    QCOW2_DISCARD_NEVER);
        if (ret < 0) {
            return ret;
        }
    }

    ret = qcow2_cache_get_empty(bs, s->refcount_block_cache, new_block, &nb);
    if (ret < 0) {
        goto fail;
    }
    memset(nb, 0, s->cluster_size);
    if (qcow2_rt_index(s, new_block) == rt_index) {
        qcow2_refblock_set(s, nb, (new_block >> s->cluster_bits) &
                           (s->refcount_block_size - 1), 1);
    }
    BLKDBG_EVENT(bs->file, BLKDBG_REFBLOCK_ALLOC_WRITE);
    qcow2_cache_entry_mark_dirty(s->refcount_block_cache, nb);
    qcow2_cache_put(s->refcount_block_cache, &nb);
    ret = qcow2_cache_flush(bs, s->refcount_block_cache);
    if (ret < 0) {
        goto fail;
    }

    if (rt_index >= s->refcount_table_size) {
        /* the new table takes the block in */
        ret = qcow2_grow_reftable(bs, rt_index, new_block);
        if (ret != -EAGAIN) {
            goto fail;
        }
        return ret;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_REFBLOCK_ALLOC_HOOKUP);
    ret = qcow2_write_reftable(bs, s->refcount_table_offset, rt_index,
                               (uint64_t *)&new_block, 1);
    if (ret < 0) {
        goto fail;
    }
    qcow2_overlap_refblock_changed(s, s->refcount_table[rt_index],
                                   new_block);
    s->refcount_table[rt_index] = new_block;
    return -EAGAIN;

fail:
    nb = qcow2_cache_is_table_offset(s->refcount_block_cache, new_block);
    if (nb) {
        qcow2_cache_discard(s->refcount_block_cache, nb);
    }
    if (qcow2_rt_index(s, new_block) != rt_index) {
        qcow2_update_refcount(bs, new_block, s->cluster_size, 1, true,
                              QCOW2_DISCARD_NEVER);
    }
    return ret;
}

/* ---------------------------------------------------------------------- */
/* Updating refcounts */

/* A cluster whose refcount fell to 0 is no table any more: drop it from
 * the caches, so that no stale dirty copy is written over new data. */
static void qcow2_forget_cached_tables(BDRVQcow2State *s, uint64_t offset)
{
    void *table;

    table = qcow2_cache_is_table_offset(s->refcount_block_cache, offset);
    if (table) {
        qcow2_cache_discard(s->refcount_block_cache, table);
    }
    /* L2 slices smaller than a cluster: every slice of the cluster. */
    for (uint64_t o = offset; o < offset + s->cluster_size;
         o += s->l2_cache_entry_size ? s->l2_cache_entry_size
                                     : s->cluster_size) {
        table = qcow2_cache_is_table_offset(s->l2_table_cache, o);
        if (table) {
            qcow2_cache_discard(s->l2_table_cache, table);
        }
    }
}

/*
 * Adds @addend to (or subtracts it from) the refcount of every cluster
 * touched by [offset, offset + length).  All or nothing: on failure the
 * clusters already updated are reverted.  A decrease must not reach the
 * file before the L2 tables that dropped the references do: the caller
 * has seen to that (qcow2_update_refcount), or no table on disk
 * references the clusters (qcow2_free_unreferenced_clusters).
 */
static int qcow2_change_refcount(BlockDriverState *bs, int64_t offset,
                                 int64_t length, uint64_t addend,
                                 bool decrease, Qcow2DiscardType type)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t start, last, cluster;
    uint64_t block_index = UINT64_MAX;
    void *block = NULL;
    int ret = 0;

    if (length <= 0 || addend == 0) {
        return length < 0 ? -EINVAL : 0;
    }

    start = offset >> s->cluster_bits;
    last = (offset + length - 1) >> s->cluster_bits;
    for (cluster = start; cluster <= last; cluster++) {
        uint64_t idx = cluster >> s->refcount_block_bits;
        uint64_t refcount;

        if (idx != block_index) {
            if (block) {
                qcow2_cache_put(s->refcount_block_cache, &block);
            }
            ret = qcow2_alloc_refcount_block(bs, cluster, &block);
            if (ret < 0) {
                block = NULL;
                break;
            }
            block_index = idx;
        }

        refcount = qcow2_refblock_get(s, block, cluster &
                                      (s->refcount_block_size - 1));
        if (decrease ? refcount < addend
                     : refcount > s->refcount_max - addend) {
            /* QEMU's errno for both: "Could not create snapshot 'x': -22
             * (Invalid argument)" is what users of a full refcount see */
            ret = -EINVAL;
            break;
        }
        refcount = decrease ? refcount - addend : refcount + addend;
        qcow2_refblock_set(s, block, cluster & (s->refcount_block_size - 1),
                           refcount);
        qcow2_cache_entry_mark_dirty(s->refcount_block_cache, block);

        if (refcount == 0) {
            if (cluster < s->free_cluster_index) {
                s->free_cluster_index = cluster;
            }
            /* a free cluster may become anything: compressed data must
             * not go on filling it */
            if (s->free_byte_offset >> s->cluster_bits == cluster) {
                s->free_byte_offset = 0;
            }
        } else if (cluster == s->free_cluster_index) {
            s->free_cluster_index++;
        }
    }
    if (block) {
        qcow2_cache_put(s->refcount_block_cache, &block);
    }

    if (ret < 0) {
        if (cluster > start) {
            /* Revert what was done: it succeeded once, it cannot fail
             * for lack of a refcount block. */
            qcow2_update_refcount(bs, offset,
                                  (cluster - start) << s->cluster_bits,
                                  addend, !decrease, QCOW2_DISCARD_NEVER);
        }
        return ret;
    }

    /*
     * Only now that nothing can be reverted: forget the tables freed
     * clusters held and queue their discard.
     */
    if (decrease) {
        for (cluster = start; cluster <= last; cluster++) {
            uint64_t refcount;

            if (qcow2_get_refcount(bs, cluster, &refcount) < 0 || refcount) {
                continue;
            }
            qcow2_forget_cached_tables(s, cluster << s->cluster_bits);
            /* a free cluster may be reused for anything: compressed
             * bytes must not be appended to it any more */
            if (s->free_byte_offset &&
                (s->free_byte_offset >> s->cluster_bits) == cluster) {
                s->free_byte_offset = 0;
            }
            if (qcow2_discard_enabled(s, type)) {
                qcow2_queue_discard(s, bs->file, cluster << s->cluster_bits,
                                    s->cluster_size);
            }
        }
        if (!s->cache_discards) {
            qcow2_process_discards(bs, 0);
        }
    }
    return 0;
}

/* qcow2_change_refcount() with the order a decrease needs (see there). */
static int qcow2_update_refcount(BlockDriverState *bs, int64_t offset,
                                 int64_t length, uint64_t addend,
                                 bool decrease, Qcow2DiscardType type)
{
    BDRVQcow2State *s = bs->opaque;

    if (decrease && length > 0 && addend) {
        int ret = qcow2_cache_set_dependency(bs, s->refcount_block_cache,
                                             s->l2_table_cache);

        if (ret < 0) {
            return ret;
        }
    }
    return qcow2_change_refcount(bs, offset, length, addend, decrease, type);
}

int qcow2_update_cluster_refcount(BlockDriverState *bs, int64_t cluster_index,
                                  uint64_t addend, bool decrease,
                                  Qcow2DiscardType type)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    do {
        ret = qcow2_update_refcount(bs, cluster_index << s->cluster_bits, 1,
                                    addend, decrease, type);
    } while (ret == -EAGAIN);
    return ret;
}

int qcow2_update_refcount_range(BlockDriverState *bs, int64_t offset,
                                int64_t length, uint64_t addend,
                                bool decrease, Qcow2DiscardType type)
{
    int ret;

    do {
        ret = qcow2_update_refcount(bs, offset, length, addend, decrease,
                                    type);
    } while (ret == -EAGAIN);
    return ret;
}

int qcow2_ref_used_range(BlockDriverState *bs, int64_t offset,
                         int64_t length)
{
    /* no retry: -EAGAIN means a block had to be made for these clusters */
    return qcow2_update_refcount(bs, offset, length, 1, false,
                                 QCOW2_DISCARD_NEVER);
}

/* ---------------------------------------------------------------------- */
/* Allocation and freeing */

int64_t qcow2_alloc_clusters(BlockDriverState *bs, uint64_t size)
{
    return qcow2_alloc_named_clusters(bs, size, NULL);
}

int64_t qcow2_alloc_named_clusters(BlockDriverState *bs, uint64_t size,
                                   const char *what)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t offset;
    int ret;

    BLKDBG_EVENT(bs->file, BLKDBG_CLUSTER_ALLOC);
    /* A freed range must be discarded before it can be reused. */
    qcow2_process_discards(bs, 0);
    do {
        offset = qcow2_alloc_clusters_noref(bs, size, what);
        if (offset < 0) {
            return offset;
        }
        ret = qcow2_update_refcount(bs, offset, size, 1, false,
                                    QCOW2_DISCARD_NEVER);
        if (ret == -EAGAIN) {
            /* the range found is searched again, around the new
             * metadata if that went into it (see the top) */
            s->free_cluster_index = MIN(s->free_cluster_index,
                                        offset >> s->cluster_bits);
        }
    } while (ret == -EAGAIN);
    return ret < 0 ? ret : offset;
}

int64_t qcow2_alloc_clusters_at(BlockDriverState *bs, uint64_t offset,
                                int64_t nb_clusters)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cluster = offset >> s->cluster_bits;
    uint64_t refcount;
    int64_t i;
    int ret;

    assert(!offset_into_cluster(s, offset));
    /* host offsets must fit in the L2 entry's 56-bit offset field */
    if (cluster >= (L2E_OFFSET_MASK >> s->cluster_bits)) {
        return 0;
    }
    nb_clusters = MIN(nb_clusters,
                      (int64_t)((L2E_OFFSET_MASK >> s->cluster_bits) -
                                cluster));
    if (nb_clusters == 0) {
        return 0;
    }
    ret = qcow2_refuse_header_cluster(bs, cluster, NULL);
    if (ret < 0) {
        return ret;
    }
    qcow2_process_discards(bs, 0);
    do {
        for (i = 0; i < nb_clusters; i++) {
            ret = qcow2_get_refcount(bs, cluster + i, &refcount);
            if (ret < 0) {
                return ret;
            }
            if (refcount) {
                break;
            }
        }
        ret = qcow2_update_refcount(bs, offset, i << s->cluster_bits, 1,
                                    false, QCOW2_DISCARD_NEVER);
    } while (ret == -EAGAIN);
    return ret < 0 ? ret : i;
}

int64_t qcow2_alloc_bytes(BlockDriverState *bs, int size)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t offset, new_cluster;
    uint64_t refcount;
    int ret;

    assert(size > 0 && size <= s->cluster_size);
    BLKDBG_EVENT(bs->file, BLKDBG_CLUSTER_ALLOC_BYTES);
    qcow2_process_discards(bs, 0);

    do {
        int64_t free_in_cluster;

        offset = s->free_byte_offset;
        if (offset) {
            ret = qcow2_get_refcount(bs, offset >> s->cluster_bits,
                                     &refcount);
            if (ret < 0) {
                return ret;
            }
            /* A cluster cannot be shared by more users than this. */
            if (refcount == s->refcount_max) {
                offset = 0;
            }
        }
        free_in_cluster = offset ? s->cluster_size -
                                   offset_into_cluster(s, offset) : 0;
        if (free_in_cluster < size) {
            new_cluster = qcow2_alloc_clusters_noref(bs, s->cluster_size,
                                                     "compressed cluster");
            if (new_cluster < 0) {
                return new_cluster;
            }
            /* Compressed data may run on into a contiguous cluster. */
            if (!offset || ROUND_UP(offset, s->cluster_size) != new_cluster) {
                offset = new_cluster;
            }
        }
        ret = qcow2_update_refcount(bs, offset, size, 1, false,
                                    QCOW2_DISCARD_NEVER);
    } while (ret == -EAGAIN);
    if (ret < 0) {
        return ret;
    }

    s->free_byte_offset = offset + size;
    if (!offset_into_cluster(s, s->free_byte_offset)) {
        s->free_byte_offset = 0;
    }
    return offset;
}

/*
 * A failure to free leaves the refcounts as they were: the clusters leak,
 * which is safe and what `qemu-img check -r leaks` repairs.  Callers
 * cannot act on it, so the leak is reported here, on stderr and in
 * QEMU's words (scripts such as QEMU's iotest 217 match the line).  A
 * node marked corrupt refuses the update by design, and that was
 * reported when it was marked (qcow2.h inv. 6): no second report.
 */
static void qcow2_free_report(BlockDriverState *bs, int ret)
{
    if (ret < 0 && !bs->corrupt) {
        fprintf(stderr, "qcow2_free_clusters failed: %s\n", strerror(-ret));
    }
}

void qcow2_free_clusters(BlockDriverState *bs, int64_t offset, int64_t size,
                         Qcow2DiscardType type)
{
    BLKDBG_EVENT(bs->file, BLKDBG_CLUSTER_FREE);
    qcow2_free_report(bs, qcow2_update_refcount(bs, offset, size, 1, true,
                                                type));
}

void qcow2_free_unreferenced_clusters(BlockDriverState *bs, int64_t offset,
                                      int64_t size, Qcow2DiscardType type)
{
    BLKDBG_EVENT(bs->file, BLKDBG_CLUSTER_FREE);
    /* no L2 table to wait for: a cache that cannot be written (the error
     * that made the caller give the clusters back) costs no leak */
    qcow2_free_report(bs, qcow2_change_refcount(bs, offset, size, 1, true,
                                                type));
}

void qcow2_free_any_cluster(BlockDriverState *bs, uint64_t l2_entry,
                            int nb_clusters, Qcow2DiscardType type)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t offset = l2_entry & L2E_OFFSET_MASK;

    if (l2_entry & QCOW_OFLAG_COMPRESSED) {
        uint64_t coffset;
        int csize;

        qcow2_parse_compressed_l2_entry(s, l2_entry, &coffset, &csize);
        qcow2_free_clusters(bs, coffset & ~511ULL, csize + (coffset & 511),
                            type);
        return;
    }
    if (!offset) {
        return;
    }
    if (offset_into_cluster(s, offset)) {
        qcow2_signal_corruption(bs, false, -1, -1,
                                "Cannot free unaligned cluster %#" PRIx64,
                                offset);
        return;
    }
    if (s->data_file != bs->file) {
        /* An external data file has no refcounts, only the discard. */
        if (qcow2_discard_enabled(s, type)) {
            qcow2_queue_discard(s, s->data_file, offset,
                                (uint64_t)nb_clusters << s->cluster_bits);
            if (!s->cache_discards) {
                qcow2_process_discards(bs, 0);
            }
        }
        return;
    }
    qcow2_free_clusters(bs, offset, (int64_t)nb_clusters << s->cluster_bits,
                        type);
}

/* ---------------------------------------------------------------------- */
/* Shrinking */

/*
 * Whether @block, the refcount block of table entry @rt_index stored at
 * @offset, gives a refcount to nothing but (possibly) itself.
 */
static bool qcow2_refblock_is_unused(BDRVQcow2State *s, uint64_t rt_index,
                                     uint64_t offset, const void *block)
{
    uint64_t self = UINT64_MAX;

    if (qcow2_rt_index(s, offset) == rt_index) {
        self = (offset >> s->cluster_bits) & (s->refcount_block_size - 1);
    }
    for (uint64_t i = 0; i < s->refcount_block_size; i++) {
        if (i != self && qcow2_refblock_get(s, block, i)) {
            return false;
        }
    }
    return true;
}

/*
 * Whether the refcount of the block at @offset (entry @rt_index) can be
 * dropped: it describes itself, or the table has a block for it.  A block
 * that the structure does not cover (an entry past the file, a damaged
 * one) is corruption: freeing it would have to allocate the block that
 * should describe it, in the middle of a shrink.  Checked for every block
 * before the table changes, so that nothing is written.
 */
static bool qcow2_refblock_is_covered(BlockDriverState *bs, uint64_t rt_index,
                                      int64_t offset)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t covering = qcow2_rt_index(s, offset);

    if (covering == rt_index ||
        (covering < s->refcount_table_size &&
         (s->refcount_table[covering] & REFT_OFFSET_MASK))) {
        return true;
    }
    qcow2_signal_corruption(bs, true, -1, -1, "Refblock at %#" PRIx64
                            " is not covered by the refcount structures",
                            offset);
    return false;
}

/*
 * One pass of qcow2_shrink_reftable(): takes the blocks unused now out of
 * the table and frees them; returns how many, or -errno.
 */
static int64_t qcow2_drop_unused_refblocks(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint64_t *table = NULL;
    uint64_t rt_index;
    int64_t dropped = 0;
    int ret;

    /*
     * Every decrease the shrink made must be on disk, after the L2 tables
     * that dropped the references, before a block that now reads as all
     * zeroes in the cache leaves the table: otherwise a crash could leave
     * a cluster referenced on disk with no refcount.
     */
    ret = qcow2_flush_caches(bs);
    if (ret < 0) {
        return ret;
    }
    table = g_memdup2(s->refcount_table,
                      s->refcount_table_size * sizeof(uint64_t));
    for (rt_index = 0; rt_index < s->refcount_table_size; rt_index++) {
        int64_t offset = qcow2_refblock_offset(bs, rt_index);
        void *block;
        bool unused;

        if (offset <= 0) {
            if (offset < 0) {
                return offset;
            }
            continue;
        }
        ret = qcow2_cache_get(bs, s->refcount_block_cache, offset, &block);
        if (ret < 0) {
            return ret;
        }
        unused = qcow2_refblock_is_unused(s, rt_index, offset, block);
        qcow2_cache_put(s->refcount_block_cache, &block);
        if (unused) {
            /* a damaged image's block may share its cluster with other
             * metadata, which freeing it would free: it stays */
            ret = qcow2_check_metadata_overlap(bs, QCOW2_OL_REFCOUNT_BLOCK,
                                               offset, s->cluster_size);
            if (ret < 0) {
                return ret;
            }
            unused = ret == 0;
        }
        if (unused && !qcow2_refblock_is_covered(bs, rt_index, offset)) {
            return -EIO;
        }
        if (unused) {
            table[rt_index] = 0;
            dropped++;
        }
    }
    if (!dropped) {
        return 0;
    }

    /* First out of the table, then freed: a crash between leaks them. */
    ret = qcow2_write_reftable(bs, s->refcount_table_offset, 0, table,
                               s->refcount_table_size);
    if (ret < 0) {
        return ret;
    }
    for (rt_index = 0; rt_index < s->refcount_table_size; rt_index++) {
        uint64_t offset = s->refcount_table[rt_index] & REFT_OFFSET_MASK;
        void *cached;

        if (!offset || table[rt_index]) {
            continue;
        }
        cached = qcow2_cache_is_table_offset(s->refcount_block_cache,
                                             offset);
        if (cached) {
            qcow2_cache_discard(s->refcount_block_cache, cached);
        }
        qcow2_overlap_refblock_changed(s, s->refcount_table[rt_index], 0);
        s->refcount_table[rt_index] = 0;
        /*
         * A block that described itself took its refcount with it; one
         * described by another block is freed there.  Both are free now.
         */
        if (qcow2_rt_index(s, offset) == rt_index) {
            s->free_cluster_index = MIN(s->free_cluster_index,
                                        offset >> s->cluster_bits);
            if (qcow2_discard_enabled(s, QCOW2_DISCARD_OTHER)) {
                qcow2_queue_discard(s, bs->file, offset, s->cluster_size);
            }
        } else {
            qcow2_free_clusters(bs, offset, s->cluster_size,
                                QCOW2_DISCARD_OTHER);
        }
    }
    if (!s->cache_discards) {
        qcow2_process_discards(bs, 0);
    }
    ret = qcow2_flush_caches(bs);
    return ret < 0 ? ret : dropped;
}

int qcow2_shrink_reftable(BlockDriverState *bs)
{
    int64_t ret;

    /* freeing a block described by another can leave that one unused */
    do {
        ret = qcow2_drop_unused_refblocks(bs);
    } while (ret > 0);
    return ret;
}

/* ---------------------------------------------------------------------- */
/* Writing the caches */

int qcow2_write_caches(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    ret = qcow2_cache_write(bs, s->l2_table_cache);
    if (ret < 0) {
        return ret;
    }
    return qcow2_cache_write(bs, s->refcount_block_cache);
}

int qcow2_flush_caches(BlockDriverState *bs)
{
    int ret = qcow2_write_caches(bs);

    if (ret < 0) {
        return ret;
    }
    return bdrv_flush(bs->file->bs);
}
