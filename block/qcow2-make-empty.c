/*
 * qcow2: emptying an image (qemu-img commit, after the data went to the
 * backing file).
 *
 * A v3 image without snapshots or an external data file is reset to the
 * layout of a new one, as QEMU does: header, refcount table, one refcount
 * block, the (empty) L1 table, and the file cut after them.  Any other
 * image has its clusters discarded one by one, so that snapshots and the
 * data file keep what they reference.
 *
 * Invariants for the reset, cited as "qcow2-make-empty.c inv. N"
 * (qcow2.h's apply; s->lock held):
 *  1. The dirty bit is on disk before the first refcount goes wrong, and
 *      cleared only after the new refcount structure is complete: a crash
 *      in between is repaired on the next read-write open.
 *  2. The L1 table the header names is zeroed on disk before anything it
 *      pointed to is reused, and the header switches to the new L1 table
 *      and refcount table in one write, after both are on disk.
 */
#include "block/qcow2.h"

/* Clusters of the reset layout: header, refcount table and block, L1. */
static int64_t qcow2_empty_layout_clusters(BDRVQcow2State *s)
{
    return 3 + DIV_ROUND_UP((int64_t)s->l1_size * sizeof(uint64_t),
                            s->cluster_size);
}

static bool qcow2_can_reset(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    /* the reset layout has no room for a LUKS header: keep it in place */
    return s->qcow_version >= 3 && !s->nb_snapshots &&
           s->data_file == bs->file && s->crypt_method == QCOW2_CRYPT_NONE &&
           qcow2_empty_layout_clusters(s) <= s->refcount_block_size;
}

static int coroutine_fn qcow2_reset_image(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t clusters = qcow2_empty_layout_clusters(s);
    int64_t l1_bytes = (int64_t)s->l1_size * sizeof(uint64_t);
    uint64_t *reftable;
    void *block;
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
    /* qcow2-make-empty.c inv. 2: nothing is mapped any more */
    memset(s->l1_table, 0, l1_bytes);
    ret = qcow2_write_l1_table(bs);
    if (ret < 0) {
        return ret;
    }
    /* from here on the old refcount structure is overwritten */
    BLKDBG_EVENT(bs->file, BLKDBG_EMPTY_IMAGE_PREPARE);

    /* the new refcount block: the layout's clusters, nothing else */
    BLKDBG_EVENT(bs->file, BLKDBG_REFBLOCK_ALLOC);
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
    reftable = g_new0(uint64_t, s->cluster_size / sizeof(uint64_t));
    reftable[0] = 2 * s->cluster_size;
    ret = qcow2_write_reftable(bs, s->cluster_size, 0, reftable,
                               s->cluster_size / sizeof(uint64_t));
    if (ret == 0) {
        int64_t old = s->l1_table_offset;

        s->l1_table_offset = 3 * s->cluster_size;
        qcow2_overlap_singles_changed(s);
        ret = qcow2_write_l1_table(bs);
        if (ret < 0) {
            s->l1_table_offset = old;
            qcow2_overlap_singles_changed(s);
        }
    }
    if (ret < 0) {
        g_free(reftable);
        return ret;
    }

    /* qcow2-make-empty.c inv. 2: one header write names both */
    g_free(s->refcount_table);
    s->refcount_table = reftable;
    s->refcount_table_size = s->cluster_size / sizeof(uint64_t);
    s->refcount_table_offset = s->cluster_size;
    qcow2_overlap_singles_changed(s);
    s->free_cluster_index = clusters;
    s->free_byte_offset = 0;
    ret = qcow2_update_header(bs);
    if (ret < 0) {
        return ret;
    }
    /* a failure only leaves the file longer than it needs to be */
    bdrv_co_truncate(bs->file, clusters * s->cluster_size, false,
                     PREALLOC_MODE_OFF, 0, NULL);
    /* qcow2-make-empty.c inv. 1 */
    return qcow2_mark_clean(bs);
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
