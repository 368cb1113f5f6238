/*
 * qcow2: changing the options of an existing image (qemu-img amend).
 *
 * The steps run in QEMU's order, each leaving a valid image behind: an
 * upgrade to v3 first (features below may need it), then a new refcount
 * width, the data file options, lazy refcounts, the size, and a downgrade
 * to v2 last (after the features v2 lacks are gone).  Errors are QEMU's.
 *
 * Invariants, cited as "qcow2-amend.c inv. N" (qcow2.h's apply;
 * everything runs in one coroutine holding s->lock, except the resize,
 * which takes it itself):
 *  1. A new refcount structure is complete on disk (blocks, then table)
 *     before the header names it, together with its width, in one write;
 *     the old one is freed only after that.  A crash before the switch
 *     leaves the old structure in charge; after it, leaked clusters.
 *  2. Expanding a zero cluster for v2 writes the zeroes (and gives the
 *     new cluster its refcount) before the L2 entry names it (cache
 *     dependency); the header says v2 only after every entry is done.
 */
#include "block/qcow2.h"

#include "qapi/qapi-opts.h"

/* What amend was asked to change; -1 / NULL: unchanged. */
typedef struct Qcow2AmendRequest {
    int version;
    int refcount_bits;
    int lazy_refcounts;         /* -1, 0 or 1 */
    int64_t size;               /* 0: unchanged */
    const char *backing_file;
    const char *backing_fmt;
    bool has_backing;
    const char *data_file;
    bool data_file_raw;
    bool encrypt;               /* encrypt.*: key slots (qcow2-crypt.c) */
} Qcow2AmendRequest;

/* The overall progress: each step counts as one share of the work. */
typedef struct Qcow2AmendProgress {
    BlockDriverState *bs;
    BlockDriverAmendStatusCB *cb;
    void *opaque;
    int steps;
    int step;
} Qcow2AmendProgress;

/* Reports @done of @total within the current step. */
static void qcow2_amend_report(Qcow2AmendProgress *p, int64_t done,
                               int64_t total)
{
    const int64_t unit = 1000000;

    if (p->cb && p->steps && total > 0) {
        p->cb(p->bs, p->step * unit + done * unit / total, p->steps * unit,
              p->opaque);
    }
}

/* ---------------------------------------------------------------------- */
/* Parsing */

static int qcow2_amend_parse(BlockDriverState *bs, QemuOpts *opts,
                             Qcow2AmendRequest *r, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    bool has_data_file = s->data_file != bs->file;
    bool raw = s->autoclear_features & QCOW2_AUTOCLEAR_DATA_FILE_RAW;

    *r = (Qcow2AmendRequest) {
        .version = s->qcow_version,
        .refcount_bits = s->refcount_bits,
        .lazy_refcounts = -1,
        .data_file_raw = raw,
    };
    /*
     * Only x-blockdev-amend names the encryption format (block/job-amend.c;
     * qemu-img's option list has no encrypt.format): QEMU's checks and
     * words of that path.
     */
    if (qemu_opt_get(opts, "encrypt.format")) {
        if (!s->crypto) {
            error_setg(errp, "image is not encrypted, can't amend");
            return -EOPNOTSUPP;
        }
        if (strcmp(qemu_opt_get(opts, "encrypt.format"), "luks")) {
            error_setg(errp, "Amend can't be used to change the qcow2 "
                       "encryption format");
            return -EOPNOTSUPP;
        }
        if (s->crypt_method != QCOW2_CRYPT_LUKS) {
            error_setg(errp, "Only LUKS encryption options can be amended "
                       "for qcow2 with blockdev-amend");
            return -EOPNOTSUPP;
        }
        r->encrypt = true;
    }
    /* in the order of the option list, as QEMU checks them */
    for (const QemuOptDesc *d = qapi_opts_qcow2_amend.desc; d->name; d++) {
        const char *name = d->name;

        if (!qemu_opt_has(opts, name)) {
            continue;
        }
        if (!strcmp(name, "backing_file")) {
            r->backing_file = qemu_opt_get(opts, name);
            r->has_backing = true;
        } else if (!strcmp(name, "backing_fmt")) {
            r->backing_fmt = qemu_opt_get(opts, name);
            r->has_backing = true;
        } else if (!strcmp(name, "compat")) {
            const char *compat = qemu_opt_get(opts, name);

            r->version = qcow2_compat_version(compat);
            if (!r->version) {
                error_setg(errp, "Unknown compatibility level %s", compat);
                return -EINVAL;
            }
        } else if (!strcmp(name, "data_file")) {
            r->data_file = qemu_opt_get(opts, name);
            if (!has_data_file) {
                error_setg(errp, "data-file can only be set for images that "
                           "use an external data file");
                return -EINVAL;
            }
        } else if (!strcmp(name, "data_file_raw")) {
            r->data_file_raw = qemu_opt_get_bool(opts, name, raw);
            if (r->data_file_raw && !raw) {
                error_setg(errp, "data-file-raw cannot be set on existing "
                           "images");
                return -EINVAL;
            }
        } else if (g_str_has_prefix(name, "encrypt.")) {
            if (!s->crypto) {
                error_setg(errp, "Can't amend encryption options - "
                           "encryption not present");
                return -EINVAL;
            }
            r->encrypt = true;
        } else if (!strcmp(name, "lazy_refcounts")) {
            r->lazy_refcounts = qemu_opt_get_bool(opts, name, false);
        } else if (!strcmp(name, "refcount_bits")) {
            uint64_t bits = qemu_opt_get_number(opts, name, 0);

            if (bits == 0 || bits > 64 || !is_power_of_2(bits)) {
                error_setg(errp, "Refcount width must be a power of two and "
                           "may not exceed 64 bits");
                return -EINVAL;
            }
            r->refcount_bits = bits;
        } else if (!strcmp(name, "size")) {
            r->size = qemu_opt_get_size(opts, name, 0);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* A new refcount width */

/*
 * Places a refcount structure of @order for @clusters clusters (and for
 * itself) right after them: *blocks blocks, then *table table clusters.
 */
static void qcow2_amend_refcount_layout(BDRVQcow2State *s, int order,
                                        int64_t clusters, int64_t *blocks,
                                        int64_t *table)
{
    int64_t per_block = ((int64_t)s->cluster_size * 8) >> order;
    int64_t per_table = s->cluster_size / sizeof(uint64_t);
    int64_t prev;

    *blocks = 0;
    *table = 0;
    do {
        prev = *blocks + *table;
        *blocks = DIV_ROUND_UP(clusters + *blocks + *table, per_block);
        *table = DIV_ROUND_UP(*blocks, per_table);
    } while (*blocks + *table != prev);
}

/* The refcount fields of @s for entries of 1 << @order bits. */
static void qcow2_amend_set_order(BDRVQcow2State *s, int order)
{
    s->refcount_order = order;
    s->refcount_bits = 1 << order;
    s->refcount_max = s->refcount_bits == 64 ? UINT64_MAX
                      : (1ULL << s->refcount_bits) - 1;
    s->refcount_block_bits = s->cluster_bits - (order - 3);
    s->refcount_block_size = 1 << s->refcount_block_bits;
}

/* Writes the refcount blocks of @refs for @order through the cache. */
static int coroutine_fn qcow2_amend_write_refblocks(BlockDriverState *bs,
                                                    const uint64_t *refs,
                                                    int64_t nb_refs,
                                                    int order,
                                                    int64_t first_block,
                                                    int64_t blocks,
                                                    Qcow2AmendProgress *p)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t per_block = ((int64_t)s->cluster_size * 8) >> order;

    for (int64_t i = 0; i < blocks; i++) {
        uint64_t offset = (uint64_t)(first_block + i) << s->cluster_bits;
        void *block;
        int ret;

        ret = qcow2_cache_get_empty(bs, s->refcount_block_cache, offset,
                                    &block);
        if (ret < 0) {
            return ret;
        }
        memset(block, 0, s->cluster_size);
        for (int64_t j = 0; j < per_block && i * per_block + j < nb_refs;
             j++) {
            qcow2_refblock_set_entry(order, block, j, refs[i * per_block + j]);
        }
        qcow2_cache_entry_mark_dirty(s->refcount_block_cache, block);
        qcow2_cache_put(s->refcount_block_cache, &block);
        ret = qcow2_cache_flush(bs, s->refcount_block_cache);
        if (ret < 0) {
            return ret;
        }
        qcow2_amend_report(p, nb_refs + i, nb_refs + blocks);
    }
    return 0;
}

/*
 * The refcounts that a new width copies must be the image's own: a
 * refcount block past the end of the file reads as zeroes, so the
 * header, the tables and the data would all be copied as free, the new
 * structure would not even be marked corrupt, and the next allocation
 * would overwrite metadata (QEMU 7.2 crashes here instead).  Such an
 * image is corrupt: say so, as the allocator does, and change nothing.
 */
static int qcow2_amend_check_refblocks(BlockDriverState *bs,
                                       int64_t file_len, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    for (uint32_t i = 0; i < s->refcount_table_size; i++) {
        uint64_t block = s->refcount_table[i] & REFT_OFFSET_MASK;

        if (block && block >= (uint64_t)file_len) {
            qcow2_signal_corruption(bs, true, -1, -1, "Refcount block %u "
                                    "at offset %#" PRIx64 " is past the "
                                    "end of the file (%" PRId64 " bytes)",
                                    i, block, file_len);
            error_setg(errp, "Cannot change the refcount width: refcount "
                       "block %u at offset %#" PRIx64 " is past the end of "
                       "the file (%" PRId64 " bytes); repair the image with "
                       "'check -r all'", i, block, file_len);
            return -EIO;
        }
    }
    return 0;
}

static int coroutine_fn qcow2_amend_refcount_order(BlockDriverState *bs,
                                                   int order,
                                                   Qcow2AmendProgress *p,
                                                   Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    int old_order = s->refcount_order;
    uint64_t new_max = order == 6 ? UINT64_MAX : (1ULL << (1 << order)) - 1;
    int64_t file_len = bdrv_getlength(bs->file->bs);
    int64_t clusters, blocks, table_clusters, nb_refs;
    g_autofree uint64_t *refs = NULL;
    g_autofree uint64_t *table = NULL;
    uint64_t *old_table;
    uint32_t old_size;
    int64_t old_offset;
    int ret;

    ret = qcow2_flush_caches(bs);
    if (ret < 0 || file_len < 0) {
        ret = ret < 0 ? ret : file_len;
        error_setg_errno(errp, -ret, "Failed to flush the refcount data");
        return ret;
    }
    ret = qcow2_amend_check_refblocks(bs, file_len, errp);
    if (ret < 0) {
        return ret;
    }
    clusters = size_to_clusters(s, file_len);
    qcow2_amend_refcount_layout(s, order, clusters, &blocks,
                                &table_clusters);
    nb_refs = clusters + blocks + table_clusters;
    refs = g_try_new0(uint64_t, nb_refs);
    table = g_try_new0(uint64_t, table_clusters * s->cluster_size /
                                 sizeof(uint64_t));
    if (!refs || !table) {
        error_setg(errp, "Could not allocate the new refcount structure");
        return -ENOMEM;
    }

    /* every refcount, checked against the new width */
    for (int64_t i = 0; i < clusters; i++) {
        ret = qcow2_get_refcount(bs, i, &refs[i]);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Failed to read refcount of "
                             "cluster %" PRId64, i);
            return ret;
        }
        if (refs[i] > new_max) {
            error_setg(errp, "Cannot decrease refcount entry width to %i "
                       "bits: Cluster at offset %#" PRIx64 " has a refcount "
                       "of %" PRIu64, 1 << order,
                       (uint64_t)i << s->cluster_bits, refs[i]);
            return -EINVAL;
        }
        if ((i & 0xfff) == 0) {
            qcow2_amend_report(p, i, nb_refs);
        }
    }
    for (int64_t i = clusters; i < nb_refs; i++) {
        refs[i] = 1;
    }

    /* qcow2-amend.c inv. 1: the new blocks and table after everything
     * else, on disk */
    ret = qcow2_cache_empty(bs, s->refcount_block_cache);
    if (ret == 0) {
        ret = qcow2_amend_write_refblocks(bs, refs, nb_refs, order, clusters,
                                          blocks, p);
    }
    for (int64_t i = 0; i < blocks; i++) {
        table[i] = (uint64_t)(clusters + i) << s->cluster_bits;
    }
    if (ret == 0) {
        ret = qcow2_write_reftable(bs, (clusters + blocks) << s->cluster_bits,
                                   0, table, table_clusters *
                                   s->cluster_size / sizeof(uint64_t));
    }
    if (ret == 0) {
        ret = qcow2_cache_empty(bs, s->refcount_block_cache);
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to write the new refcount "
                         "structure");
        return ret;
    }

    /* the switch: width, table and size in one header write */
    old_table = s->refcount_table;
    old_size = s->refcount_table_size;
    old_offset = s->refcount_table_offset;
    s->refcount_table = g_steal_pointer(&table);
    s->refcount_table_size = table_clusters * s->cluster_size /
                             sizeof(uint64_t);
    s->refcount_table_offset = (clusters + blocks) << s->cluster_bits;
    qcow2_overlap_singles_changed(s);
    qcow2_amend_set_order(s, order);
    ret = qcow2_update_header(bs);
    if (ret < 0) {
        table = s->refcount_table;
        s->refcount_table = old_table;
        s->refcount_table_size = old_size;
        s->refcount_table_offset = old_offset;
        qcow2_overlap_singles_changed(s);
        qcow2_amend_set_order(s, old_order);
        error_setg_errno(errp, -ret, "Failed to update the image header");
        return ret;
    }
    s->free_cluster_index = 0;
    /* qcow2.h inv. 7 */
    qcow2_overlap_rebuild_active(s);

    /* the old structure is unreferenced now: free it */
    for (uint32_t i = 0; i < old_size; i++) {
        uint64_t block = old_table[i] & REFT_OFFSET_MASK;

        if (block) {
            qcow2_free_clusters(bs, block, s->cluster_size,
                                QCOW2_DISCARD_OTHER);
        }
    }
    qcow2_free_clusters(bs, old_offset, (uint64_t)old_size * sizeof(uint64_t),
                        QCOW2_DISCARD_OTHER);
    g_free(old_table);
    ret = qcow2_flush_caches(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to flush the refcount data");
    }
    return ret;
}

/* ---------------------------------------------------------------------- */
/* Downgrade to v2 */

/*
 * A walk over the L2 tables of every L1 table (active and snapshots).
 * Progress, where reported, counts L1 entries of all tables, allocated or
 * not, as QEMU's does: a 4 GiB image of 64 KiB clusters moves by eighths.
 */
typedef struct Qcow2AmendWalk {
    uint64_t l2_refcount;       /* of the table being walked */
    bool found_compressed;
    Qcow2AmendProgress *progress;   /* NULL: none reported */
    int64_t l1_visited;
    int64_t l1_total;
} Qcow2AmendWalk;

/* Runs @fn over the entries of the L2 table of one L1 entry, if any. */
static int coroutine_fn qcow2_amend_l1_entry(BlockDriverState *bs,
                                             uint64_t l1_entry,
                                             uint32_t l1_index,
                                             Qcow2L2EntryFn *fn,
                                             Qcow2AmendWalk *w)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t l2_offset = l1_entry & L1E_OFFSET_MASK;
    int ret;

    if (!l2_offset) {
        return 0;
    }
    if (offset_into_cluster(s, l2_offset)) {
        qcow2_signal_corruption(bs, true, -1, -1, "L2 table offset %#"
                                PRIx64 " unaligned (L1 index: %#x)",
                                l2_offset, l1_index);
        return -EIO;
    }
    ret = qcow2_get_refcount(bs, l2_offset >> s->cluster_bits,
                             &w->l2_refcount);
    if (ret < 0) {
        return ret;
    }
    return qcow2_l2_table_map(bs, l2_offset, fn, w);
}

static int coroutine_fn qcow2_amend_l1_walk(BlockDriverState *bs,
                                            const uint64_t *l1,
                                            uint32_t l1_size,
                                            Qcow2L2EntryFn *fn,
                                            Qcow2AmendWalk *w)
{
    for (uint32_t i = 0; i < l1_size; i++) {
        int ret = qcow2_amend_l1_entry(bs, l1[i], i, fn, w);

        if (ret < 0) {
            return ret;
        }
        if (w->progress) {
            qcow2_amend_report(w->progress, ++w->l1_visited, w->l1_total);
        }
    }
    return 0;
}

/*
 * Runs @fn over every L2 entry of the image, snapshots included; reports
 * progress to @p unless it is NULL.
 */
static int coroutine_fn qcow2_amend_walk_all(BlockDriverState *bs,
                                             Qcow2L2EntryFn *fn,
                                             Qcow2AmendWalk *w,
                                             Qcow2AmendProgress *p)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    w->progress = p;
    w->l1_visited = 0;
    w->l1_total = s->l1_size;
    for (uint32_t i = 0; i < s->nb_snapshots; i++) {
        w->l1_total += s->snapshots[i].l1_size;
    }
    ret = qcow2_amend_l1_walk(bs, s->l1_table, s->l1_size, fn, w);
    for (uint32_t i = 0; i < s->nb_snapshots && ret == 0; i++) {
        g_autofree uint64_t *l1 = NULL;
        Error *local_err = NULL;

        ret = qcow2_snapshot_read_l1(bs, &s->snapshots[i], &l1, &local_err);
        if (ret < 0) {
            /* the caller's message gives only the errno: say which table
             * is wrong first, on a line of its own as QEMU does */
            error_report_err(local_err);
        } else {
            ret = qcow2_amend_l1_walk(bs, l1, s->snapshots[i].l1_size, fn,
                                      w);
        }
    }
    return ret;
}

static int coroutine_fn qcow2_amend_find_compressed(BlockDriverState *bs,
                                                    QCow2ClusterType type,
                                                    uint64_t *entry,
                                                    void *opaque)
{
    Qcow2AmendWalk *w = opaque;

    if (type == QCOW2_CLUSTER_COMPRESSED) {
        w->found_compressed = true;
    }
    return 0;
}

/* A cluster of zeroes with as many references as the L2 table has. */
static int64_t coroutine_fn qcow2_amend_zero_cluster(BlockDriverState *bs,
                                                     uint64_t l2_refcount)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t offset = qcow2_alloc_clusters(bs, s->cluster_size);
    int ret = 0;

    if (offset < 0) {
        return offset;
    }
    if (l2_refcount > 1) {
        ret = qcow2_update_cluster_refcount(bs, offset >> s->cluster_bits,
                                            l2_refcount - 1, false,
                                            QCOW2_DISCARD_NEVER);
    }
    /* qcow2-amend.c inv. 2 */
    if (ret == 0) {
        ret = qcow2_pre_write_data_check(bs, offset, s->cluster_size);
    }
    if (ret == 0) {
        ret = bdrv_co_pwrite_zeroes(s->data_file, offset, s->cluster_size, 0);
    }
    if (ret < 0) {
        qcow2_free_clusters(bs, offset, s->cluster_size, QCOW2_DISCARD_NEVER);
        return ret;
    }
    return offset;
}

/*
 * v2 has no zero flag: a zero cluster becomes unallocated where nothing
 * shows through, else a cluster of zeroes.  Every L1 table that reaches
 * an L2 table reaches its clusters, so a new one gets as many references
 * as the table has.  A preallocated zero cluster is zeroed in place only
 * if nothing else uses it; QEMU 7.2 zeroes it even when a snapshot still
 * reads its old data there.
 */
static int coroutine_fn qcow2_amend_expand_zero(BlockDriverState *bs,
                                                QCow2ClusterType type,
                                                uint64_t *entry,
                                                void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2AmendWalk *w = opaque;
    uint64_t host = *entry & L2E_OFFSET_MASK;
    uint64_t refcount;
    int64_t offset;
    int ret = 0;

    if (type == QCOW2_CLUSTER_ZERO_PLAIN && !bs->backing) {
        *entry = 0;
        return 0;
    }
    if (type == QCOW2_CLUSTER_ZERO_ALLOC) {
        ret = qcow2_get_refcount(bs, host >> s->cluster_bits, &refcount);
        if (ret < 0) {
            return ret;
        }
        if (refcount <= w->l2_refcount) {
            ret = qcow2_pre_write_data_check(bs, host, s->cluster_size);
            if (ret == 0) {
                ret = bdrv_co_pwrite_zeroes(s->data_file, host,
                                            s->cluster_size, 0);
            }
            if (ret == 0) {
                *entry &= ~QCOW_OFLAG_ZERO;
            }
            return ret;
        }
    } else if (type != QCOW2_CLUSTER_ZERO_PLAIN) {
        return 0;
    }

    offset = qcow2_amend_zero_cluster(bs, w->l2_refcount);
    if (offset < 0) {
        return offset;
    }
    *entry = offset | (w->l2_refcount == 1 ? QCOW_OFLAG_COPIED : 0);
    if (type == QCOW2_CLUSTER_ZERO_ALLOC) {
        /* this table's references to the shared cluster go (after the
         * new entry is on disk: the decrease orders the caches so) */
        ret = qcow2_update_cluster_refcount(bs, host >> s->cluster_bits,
                                            w->l2_refcount, true,
                                            QCOW2_DISCARD_NEVER);
    }
    return ret;
}

static int coroutine_fn qcow2_amend_downgrade(BlockDriverState *bs,
                                              Qcow2AmendProgress *p,
                                              Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2AmendWalk w = { 0 };
    uint64_t features = s->incompatible_features &
                        ~(uint64_t)(QCOW2_INCOMPAT_DIRTY |
                                    QCOW2_INCOMPAT_COMPRESSION);
    int ret;

    if (s->refcount_order != 4) {
        error_setg(errp, "compat=0.10 requires refcount_bits=16");
        return -ENOTSUP;
    }
    if (s->data_file != bs->file) {
        error_setg(errp, "Cannot downgrade an image with a data file");
        return -ENOTSUP;
    }
    /*
     * A version 2 reader takes every snapshot to be of the disk's size and
     * its VM state to fit 32 bits; the extra data that says otherwise is
     * kept, but nothing makes a v2 reader heed it (QEMU refuses the same).
     */
    for (uint32_t i = 0; i < s->nb_snapshots; i++) {
        if (s->snapshots[i].vm_state_size > UINT32_MAX ||
            s->snapshots[i].disk_size != (uint64_t)s->virtual_size) {
            error_setg(errp, "Internal snapshots prevent downgrade of image");
            return -ENOTSUP;
        }
    }
    if (s->incompatible_features & QCOW2_INCOMPAT_DIRTY) {
        ret = qcow2_mark_clean(bs);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Failed to make the image clean");
            return ret;
        }
    }
    if (features) {
        error_setg(errp, "Cannot downgrade an image with incompatible "
                   "features %#" PRIx64 " set", features);
        return -ENOTSUP;
    }
    if (s->compression_type != QCOW2_COMPRESSION_TYPE_ZLIB) {
        /* a quick scan: the progress is the expansion's below */
        ret = qcow2_amend_walk_all(bs, qcow2_amend_find_compressed, &w,
                                   NULL);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Failed to look for compressed "
                             "clusters");
            return ret;
        }
        if (w.found_compressed) {
            error_setg(errp, "Cannot downgrade an image with zstd "
                       "compression type and existing compressed clusters");
            return -ENOTSUP;
        }
    }

    /* qcow2-amend.c inv. 2: the zeroes and their refcounts before the
     * entries */
    ret = qcow2_cache_set_dependency(bs, s->l2_table_cache,
                                     s->refcount_block_cache);
    if (ret == 0) {
        ret = qcow2_amend_walk_all(bs, qcow2_amend_expand_zero, &w, p);
    }
    if (ret == 0) {
        ret = qcow2_flush_caches(bs);
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to turn zero into data "
                         "clusters");
        return ret;
    }

    s->qcow_version = 2;
    s->compression_type = QCOW2_COMPRESSION_TYPE_ZLIB;
    s->incompatible_features = 0;
    s->compatible_features = 0;
    s->autoclear_features = 0;
    s->use_lazy_refcounts = false;
    ret = qcow2_update_header(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to update the image header");
    }
    return ret;
}

/* ---------------------------------------------------------------------- */
/* The whole operation */

static int coroutine_fn qcow2_amend_lazy_refcounts(BlockDriverState *bs,
                                                   bool on, int version,
                                                   Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    if (on) {
        if (version < 3) {
            error_setg(errp, "Lazy refcounts only supported with "
                       "compatibility level 1.1 and above (use compat=1.1 "
                       "or greater)");
            return -EINVAL;
        }
        s->compatible_features |= QCOW2_COMPAT_LAZY_REFCOUNTS;
        ret = qcow2_update_header(bs);
        if (ret < 0) {
            s->compatible_features &= ~QCOW2_COMPAT_LAZY_REFCOUNTS;
            error_setg_errno(errp, -ret, "Failed to update the image header");
            return ret;
        }
        s->use_lazy_refcounts = true;
        /* qcow2.h inv. 1 no longer ties L2 to refcount writes */
        return 0;
    }
    /* the refcounts are right on disk before the feature goes */
    ret = qcow2_mark_clean(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to make the image clean");
        return ret;
    }
    s->compatible_features &= ~QCOW2_COMPAT_LAZY_REFCOUNTS;
    ret = qcow2_update_header(bs);
    if (ret < 0) {
        s->compatible_features |= QCOW2_COMPAT_LAZY_REFCOUNTS;
        error_setg_errno(errp, -ret, "Failed to update the image header");
        return ret;
    }
    s->use_lazy_refcounts = false;
    return qcow2_cache_set_dependency(bs, s->l2_table_cache,
                                      s->refcount_block_cache);
}

typedef struct Qcow2AmendCo {
    QemuOpts *opts;
    Qcow2AmendProgress progress;
    Error **errp;
} Qcow2AmendCo;

static int coroutine_fn qcow2_amend_locked(BlockDriverState *bs,
                                           Qcow2AmendCo *c,
                                           Qcow2AmendRequest *r)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2AmendProgress *p = &c->progress;
    int ret;

    if (r->version > s->qcow_version) {
        /*
         * v3 wants every snapshot table entry to carry its extra data
         * (VM state size, disk size, icount): v2 writers may have left
         * it out.  The rewritten table, still valid for v2, comes first.
         */
        if (s->nb_snapshots) {
            ret = qcow2_write_snapshots(bs);
            if (ret < 0) {
                error_setg_errno(c->errp, -ret, "Failed to update the "
                                 "snapshot table");
                return ret;
            }
        }
        s->qcow_version = r->version;
        ret = qcow2_update_header(bs);
        if (ret < 0) {
            s->qcow_version = 2;
            error_setg_errno(c->errp, -ret, "Failed to update the image "
                             "header");
            return ret;
        }
        p->step++;
    }
    if (r->refcount_bits != s->refcount_bits) {
        if (r->version < 3 && r->refcount_bits != 16) {
            error_setg(c->errp, "Refcount widths other than 16 bits require "
                       "compatibility level 1.1 or above (use compat=1.1 or "
                       "greater)");
            return -EINVAL;
        }
        ret = qcow2_amend_refcount_order(bs, ctz64(r->refcount_bits), p,
                                         c->errp);
        if (ret < 0) {
            return ret;
        }
        p->step++;
    }

    if (r->data_file_raw) {
        s->autoclear_features |= QCOW2_AUTOCLEAR_DATA_FILE_RAW;
    } else {
        s->autoclear_features &= ~QCOW2_AUTOCLEAR_DATA_FILE_RAW;
    }
    if (r->data_file) {
        g_free(s->image_data_file);
        s->image_data_file = *r->data_file ? g_strdup(r->data_file) : NULL;
    }
    ret = qcow2_update_header(bs);
    if (ret < 0) {
        error_setg_errno(c->errp, -ret, "Failed to update the image header");
        return ret;
    }

    if (r->has_backing &&
        (g_strcmp0(r->backing_file, s->image_backing_file) ||
         g_strcmp0(r->backing_fmt, s->image_backing_format))) {
        error_setg(c->errp, "Cannot amend the backing file");
        error_append_hint(c->errp, "You can use 'qemu-img rebase' "
                          "instead.\n");
        return -EINVAL;
    }
    if (r->lazy_refcounts >= 0 && r->lazy_refcounts != s->use_lazy_refcounts) {
        ret = qcow2_amend_lazy_refcounts(bs, r->lazy_refcounts, r->version,
                                         c->errp);
        if (ret < 0) {
            return ret;
        }
    }
    if (r->size) {
        qemu_co_mutex_unlock(&s->lock);
        ret = qcow2_co_truncate(bs, r->size, true, PREALLOC_MODE_OFF, 0,
                                c->errp);
        qemu_co_mutex_lock(&s->lock);
        if (ret < 0) {
            return ret;
        }
    }
    if (r->version < s->qcow_version) {
        ret = qcow2_amend_downgrade(bs, p, c->errp);
        if (ret < 0) {
            return ret;
        }
    }
    return qcow2_flush_caches(bs);
}

static int coroutine_fn qcow2_amend_co(BlockDriverState *bs, void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2AmendCo *c = opaque;
    Qcow2AmendRequest r;
    int ret;

    ret = qcow2_amend_parse(bs, c->opts, &r, c->errp);
    if (ret < 0) {
        return ret;
    }
    c->progress.steps = (r.version != s->qcow_version) +
                        (r.refcount_bits != s->refcount_bits);
    qemu_co_mutex_lock(&s->lock);
    qcow2_overlap_begin_shared_l2_writes(bs);
    ret = qcow2_amend_locked(bs, c, &r);
    qcow2_overlap_end_shared_l2_writes(bs);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

int qcow2_amend_options(BlockDriverState *bs, QemuOpts *opts,
                        BlockDriverAmendStatusCB *status_cb, void *cb_opaque,
                        bool force, Error **errp)
{
    Qcow2AmendCo c = {
        .opts = opts,
        .progress = { .bs = bs, .cb = status_cb, .opaque = cb_opaque },
        .errp = errp,
    };

    Qcow2AmendRequest r;
    int ret;

    if (bs->corrupt) {
        error_setg(errp, "Image is corrupt");
        return -EIO;
    }
    ret = bdrv_run_co(bs, qcow2_amend_co, &c);
    /* the key slots last, once the rest succeeded (--force: erase the
     * last one) */
    if (ret == 0 && qcow2_amend_parse(bs, opts, &r, NULL) == 0 &&
        r.encrypt) {
        ret = qcow2_crypt_amend(bs, opts, force, errp);
    }
    return ret;
}
