/*
 * qcow2: emptying an image (qemu-img commit, after the data went to the
 * backing file).
 *
 * A v3 image without snapshots, persistent bitmaps, encryption or an
 * external data file is reset to the layout of a new one, as QEMU does:
 * header, refcount table, one refcount block, the (empty) L1 table, and
 * the file cut after them.  Any other image has its clusters discarded one
 * by one, so that snapshots, bitmaps and the data file keep what they
 * reference.
 *
 * The reset takes QEMU's steps in QEMU's order, so that an error at any
 * step (blkdebug events l1_update, empty_image_prepare, reftable_update,
 * refblock_alloc) leaves the image in the state QEMU leaves it in, and the
 * next read-write open repairs it the same way.
 *
 * Invariants for the reset, cited as "qcow2-make-empty.c inv. N"
 * (qcow2.h's apply; s->lock held):
 *  1. The dirty bit is on disk before the first refcount goes wrong, and
 *     cleared only after the new refcount structure is complete: a crash
 *     or an error in between is repaired on the next read-write open.
 *  2. The L1 table is zeroed on disk before anything it pointed to is
 *     reused; the in-memory table follows the disk (a failed write keeps
 *     it).
 *  3. From the first write of the L1 table's zeroes until the new
 *     refcount block is on disk, the file's L1 table and refcounts are not
 *     known to describe anything true (a failed write may have reached
 *     part of the disk): a failure there sets s->refcounts_lost, after
 *     which the node writes nothing more, not even its caches at close
 *     (qcow2.h inv. 8), and the dirty bit makes the next read-write open
 *     repair them, as QEMU's ejected node leaves them.
 */
#include "block/qcow2.h"

/* Clusters of the L1 table of the reset layout. */
static int64_t qcow2_empty_l1_clusters(BDRVQcow2State *s)
{
    return DIV_ROUND_UP((int64_t)s->l1_size * sizeof(uint64_t),
                        s->cluster_size);
}

/* Clusters of the reset layout: header, refcount table and block, L1. */
static int64_t qcow2_empty_layout_clusters(BDRVQcow2State *s)
{
    return 3 + qcow2_empty_l1_clusters(s);
}

static bool qcow2_can_reset(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    /*
     * the reset layout has no room for a LUKS header or a bitmap
     * directory: those images keep them in place
     */
    return s->qcow_version >= 3 && !s->nb_snapshots && !s->nb_bitmaps &&
           s->data_file == bs->file && s->crypt_method == QCOW2_CRYPT_NONE &&
           qcow2_empty_layout_clusters(s) <= s->refcount_block_size;
}

/* qcow2-make-empty.c inv. 2: zeroes the L1 table on disk, then in memory. */
static int coroutine_fn qcow2_reset_zero_l1(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    size_t l1_bytes = (size_t)s->l1_size * sizeof(uint64_t);
    g_autofree uint64_t *old = NULL;
    int ret;

    if (!l1_bytes) {
        return 0;
    }
    old = g_memdup2(s->l1_table, l1_bytes);
    memset(s->l1_table, 0, l1_bytes);
    ret = qcow2_write_l1_table(bs);
    if (ret < 0) {
        memcpy(s->l1_table, old, l1_bytes);
    }
    return ret;
}

/*
 * The steps after which the old refcount structure is gone: zero the new
 * layout's clusters, point the header at the new (empty) refcount table
 * and L1 table, enter the refcount block, give the layout its refcounts.
 * Any failure leaves the refcounts lost (qcow2-make-empty.c inv. 3).
 */
static int coroutine_fn qcow2_reset_refcounts(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t clusters = qcow2_empty_layout_clusters(s);
    /* l1_table_offset, refcount_table_offset, refcount_table_clusters */
    struct QEMU_PACKED {
        uint64_t l1_offset;
        uint64_t reftable_offset;
        uint32_t reftable_clusters;
    } layout = {
        .l1_offset = GUINT64_TO_BE(3 * s->cluster_size),
        .reftable_offset = GUINT64_TO_BE(s->cluster_size),
        .reftable_clusters = GUINT32_TO_BE(1),
    };
    uint64_t entry = GUINT64_TO_BE(2 * s->cluster_size);
    void *block;
    int ret;

    _Static_assert(offsetof(QCowHeader, refcount_table_offset) ==
                   offsetof(QCowHeader, l1_table_offset) + 8 &&
                   offsetof(QCowHeader, refcount_table_clusters) ==
                   offsetof(QCowHeader, l1_table_offset) + 16,
                   "the reset's header fields are adjacent");

    BLKDBG_EVENT(bs->file, BLKDBG_EMPTY_IMAGE_PREPARE);
    /* whatever lies there (old tables, data) is overwritten on purpose */
    ret = qcow2_pre_write_overlap_check(bs, QCOW2_OL_ALL, s->cluster_size,
                                        (clusters - 1) * s->cluster_size);
    if (ret == 0) {
        ret = bdrv_pwrite_zeroes(bs->file, s->cluster_size,
                                 (clusters - 1) * s->cluster_size, 0);
    }
    if (ret < 0) {
        return ret;
    }
    memset(s->refcount_table, 0, s->refcount_table_size * sizeof(uint64_t));

    BLKDBG_EVENT(bs->file, BLKDBG_REFTABLE_UPDATE);
    ret = qcow2_header_write(bs, offsetof(QCowHeader, l1_table_offset),
                             &layout, sizeof(layout));
    if (ret < 0) {
        return ret;
    }
    s->l1_table_offset = 3 * s->cluster_size;
    g_free(s->refcount_table);
    s->refcount_table = g_new0(uint64_t, s->cluster_size / sizeof(uint64_t));
    s->refcount_table_size = s->cluster_size / sizeof(uint64_t);
    s->refcount_table_offset = s->cluster_size;
    qcow2_overlap_singles_changed(s);

    BLKDBG_EVENT(bs->file, BLKDBG_REFBLOCK_ALLOC);
    ret = qcow2_pre_write_overlap_check(bs, QCOW2_OL_REFCOUNT_TABLE,
                                        s->cluster_size, sizeof(entry));
    if (ret == 0) {
        ret = bdrv_pwrite_sync(bs->file, s->cluster_size, sizeof(entry),
                               &entry, 0);
    }
    if (ret < 0) {
        return ret;
    }
    s->refcount_table[0] = 2 * s->cluster_size;

    /* the new refcount block: the layout's clusters, nothing else */
    ret = qcow2_cache_get_empty(bs, s->refcount_block_cache,
                                2 * s->cluster_size, &block);
    if (ret < 0) {
        return ret;
    }
    memset(block, 0, s->cluster_size);
    for (int64_t i = 0; i < clusters; i++) {
        qcow2_refblock_set_entry(s->refcount_order, block, i, 1);
    }
    qcow2_cache_entry_mark_dirty(s->refcount_block_cache, block);
    qcow2_cache_put(s->refcount_block_cache, &block);
    ret = qcow2_cache_flush(bs, s->refcount_block_cache);
    if (ret < 0) {
        return ret;
    }
    s->free_cluster_index = clusters;
    s->free_byte_offset = 0;
    return 0;
}

static int coroutine_fn qcow2_reset_image(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    /* qcow2-make-empty.c inv. 1 */
    ret = qcow2_mark_dirty(bs);
    if (ret == 0) {
        ret = qcow2_cache_empty(bs, s->l2_table_cache);
    }
    if (ret == 0) {
        ret = qcow2_cache_empty(bs, s->refcount_block_cache);
    }
    if (ret < 0) {
        return ret;
    }
    /*
     * qcow2-make-empty.c inv. 3: a failed write may have zeroed part of
     * the L1 table on disk, after which neither the table nor the
     * refcounts are known to describe the file
     */
    ret = qcow2_reset_zero_l1(bs);
    if (ret == 0) {
        ret = qcow2_reset_refcounts(bs);
    }
    if (ret < 0) {
        /* qcow2-make-empty.c inv. 3 */
        s->refcounts_lost = true;
        return ret;
    }
    /* qcow2-make-empty.c inv. 1 */
    ret = qcow2_mark_clean(bs);
    if (ret < 0) {
        return ret;
    }
    /* a failure only leaves the file longer than it needs to be */
    bdrv_co_truncate(bs->file, qcow2_empty_layout_clusters(s) *
                     s->cluster_size, false, PREALLOC_MODE_OFF, 0, NULL);
    return 0;
}

static int coroutine_fn qcow2_make_empty_co(BlockDriverState *bs,
                                            void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    if (qcow2_can_reset(bs)) {
        ret = qcow2_reset_image(bs);
    } else {
        ret = qcow2_cluster_discard(bs, 0, s->virtual_size, true,
                                    QCOW2_DISCARD_REQUEST);
        if (ret == 0) {
            ret = qcow2_flush_caches(bs);
        }
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

int qcow2_make_empty(BlockDriverState *bs)
{
    if (bs->corrupt) {
        return -EIO;
    }
    return bdrv_run_co(bs, qcow2_make_empty_co, NULL);
}
