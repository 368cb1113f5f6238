/*
 * qcow2 check and repair (qemu-img check [-r leaks|all]): counts every
 * reference to every host cluster, compares the counts with the stored
 * refcounts and the OFLAG_COPIED flags, and repairs what @fix allows,
 * rebuilding the refcount structures where they cannot be trusted.
 *
 * Everything here runs under s->lock (qcow2.h inv. 4).
 */
#include "block/qcow2.h"
#include "util/coroutine.h"

/* ---------------------------------------------------------------------- */
/* qemu-img check
 *
 * The check builds its own count of references per host cluster (one
 * uint64_t per cluster of the file, grown when references point past it),
 * compares it with the stored refcounts and then checks OFLAG_COPIED.  Its
 * messages go to stderr and are worded and ordered as QEMU's, so that
 * scripts and test references written against qemu-img check match.
 */

/* L2 walk for the active image: fragmentation and allocation info. */
#define QCOW2_CHECK_FRAG_INFO 1

/*
 * Extended L2 entries: the low 32 bits of the subcluster bitmap say which
 * subclusters have data in the host cluster (the high 32, which read as
 * zeroes).
 */
#define QCOW2_CHECK_L2_BITMAP_ALLOC 0xffffffffULL

typedef struct Qcow2CheckRefs {
    uint64_t *refs;             /* references counted per cluster */
    int64_t nb_clusters;        /* entries in refs */
    int64_t file_len;           /* the file's length in bytes */
} Qcow2CheckRefs;

static int qcow2_check_refs_grow(Qcow2CheckRefs *r, int64_t nb_clusters)
{
    uint64_t *n;

    if (nb_clusters <= r->nb_clusters) {
        return 0;
    }
    n = g_try_renew(uint64_t, r->refs, nb_clusters);
    if (!n) {
        return -ENOMEM;
    }
    memset(n + r->nb_clusters, 0,
           (nb_clusters - r->nb_clusters) * sizeof(uint64_t));
    r->refs = n;
    r->nb_clusters = nb_clusters;
    return 0;
}

/* Counts one reference to every cluster [offset, offset + size) touches. */
static int qcow2_check_inc_refs(BlockDriverState *bs, BdrvCheckResult *res,
                                Qcow2CheckRefs *r, int64_t offset,
                                int64_t size)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t k, first, last;
    int ret;

    if (size <= 0) {
        return 0;
    }
    /*
     * @offset comes from the image (a snapshot's L1 table may say 2^64 -
     * 64k): one that no file length holds is past the end too, and must
     * not become a negative index into r->refs.
     */
    if (offset < 0 || offset > INT64_MAX - size ||
        offset + size - r->file_len >= s->cluster_size) {
        fprintf(stderr, "ERROR: counting reference for region exceeding the "
                "end of the file by one cluster or more: offset 0x%" PRIx64
                " size 0x%" PRIx64 "\n", offset, size);
        res->corruptions++;
        return 0;
    }

    first = offset >> s->cluster_bits;
    last = (offset + size - 1) >> s->cluster_bits;
    ret = qcow2_check_refs_grow(r, last + 1);
    if (ret < 0) {
        res->check_errors++;
        return ret;
    }
    for (k = first; k <= last; k++) {
        if (r->refs[k] == s->refcount_max) {
            fprintf(stderr, "ERROR: overflow cluster offset=0x%" PRIx64 "\n",
                    k << s->cluster_bits);
            fprintf(stderr, "Use qemu-img amend to increase the refcount "
                    "entry width or qemu-img convert to create a clean copy "
                    "if the image cannot be opened for writing\n");
            res->corruptions++;
            continue;
        }
        r->refs[k]++;
    }
    return 0;
}

static QCow2ClusterType qcow2_check_entry_type(BDRVQcow2State *s,
                                               uint64_t l2_entry,
                                               bool ext_data)
{
    if (l2_entry & QCOW_OFLAG_COMPRESSED) {
        return QCOW2_CLUSTER_COMPRESSED;
    }
    /* with subclusters the bitmap, not the flag, says what is zero */
    if ((l2_entry & QCOW_OFLAG_ZERO) && s->qcow_version >= 3 &&
        !s->extended_l2) {
        return (l2_entry & L2E_OFFSET_MASK) ? QCOW2_CLUSTER_ZERO_ALLOC
                                            : QCOW2_CLUSTER_ZERO_PLAIN;
    }
    /* in an external data file, offset 0 is the first guest cluster */
    if (!(l2_entry & L2E_OFFSET_MASK) &&
        !(ext_data && (l2_entry & QCOW_OFLAG_COPIED))) {
        return QCOW2_CLUSTER_UNALLOCATED;
    }
    return QCOW2_CLUSTER_NORMAL;
}

/* Writes L2 entry @index of the table at @l2_offset through the cache. */
static int qcow2_check_set_l2_entry(BlockDriverState *bs, uint64_t l2_offset,
                                    int index, uint64_t entry)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t slice = s->l2_cache_entry_size ? s->l2_cache_entry_size
                                            : s->cluster_size;
    uint64_t byte = (uint64_t)index * (s->extended_l2 ? 16 : 8);
    uint64_t *table;
    int ret;

    ret = qcow2_cache_get(bs, s->l2_table_cache,
                          l2_offset + QEMU_ALIGN_DOWN(byte, slice),
                          (void **)&table);
    if (ret < 0) {
        return ret;
    }
    table[(byte % slice) / 8] = GUINT64_TO_BE(entry);
    qcow2_cache_entry_mark_dirty(s->l2_table_cache, table);
    qcow2_cache_put(s->l2_table_cache, (void **)&table);
    return qcow2_cache_write(bs, s->l2_table_cache);
}

/* Counts the references of one L2 table and its clusters. */
static int qcow2_check_l2(BlockDriverState *bs, BdrvCheckResult *res,
                          Qcow2CheckRefs *r, uint64_t l2_offset, int flags,
                          BdrvCheckMode fix)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint64_t *l2 = g_try_malloc(s->cluster_size);
    uint64_t next_contiguous = 0;
    bool ext_data = s->data_file != bs->file;
    int i, ret;

    if (!l2) {
        res->check_errors++;
        return -ENOMEM;
    }
    ret = bdrv_pread(bs->file, l2_offset, s->cluster_size, l2, 0);
    if (ret < 0) {
        fprintf(stderr, "ERROR: I/O error in check_refcounts_l2\n");
        res->check_errors++;
        return ret;
    }

    for (i = 0; i < s->l2_size; i++) {
        uint64_t entry = GUINT64_FROM_BE(l2[i * (s->extended_l2 ? 2 : 1)]);
        uint64_t offset = entry & L2E_OFFSET_MASK;
        QCow2ClusterType type = qcow2_check_entry_type(s, entry, ext_data);

        switch (type) {
        case QCOW2_CLUSTER_COMPRESSED: {
            uint64_t coffset;
            int csize;

            if (entry & QCOW_OFLAG_COPIED) {
                fprintf(stderr, "ERROR: coffset=0x%" PRIx64 ": copied flag "
                        "must never be set for compressed clusters\n",
                        entry & s->cluster_offset_mask);
                entry &= ~QCOW_OFLAG_COPIED;
                res->corruptions++;
            }
            if (ext_data) {
                fprintf(stderr, "ERROR compressed cluster %d with data file, "
                        "entry=0x%" PRIx64 "\n", i, entry);
                res->corruptions++;
                break;
            }
            if (flags & QCOW2_CHECK_FRAG_INFO) {
                /* compressed clusters never continue the previous one */
                res->bfi.allocated_clusters++;
                res->bfi.compressed_clusters++;
                res->bfi.fragmented_clusters++;
            }
            qcow2_parse_compressed_l2_entry(s, entry, &coffset, &csize);
            ret = qcow2_check_inc_refs(bs, res, r, coffset, csize);
            if (ret < 0) {
                return ret;
            }
            break;
        }
        case QCOW2_CLUSTER_ZERO_ALLOC:
        case QCOW2_CLUSTER_NORMAL:
            if (entry & L2E_STD_RESERVED_MASK) {
                fprintf(stderr, "ERROR found l2 entry with reserved bits "
                        "set: %" PRIx64 "\n", entry);
                res->corruptions++;
            }
            if (flags & QCOW2_CHECK_FRAG_INFO) {
                res->bfi.allocated_clusters++;
                if (next_contiguous && offset != next_contiguous) {
                    res->bfi.fragmented_clusters++;
                }
                next_contiguous = offset + s->cluster_size;
            }
            if (offset_into_cluster(s, offset)) {
                /*
                 * No guest data lives in the host cluster: a zero cluster,
                 * or (extended L2) one whose subclusters are all zero or
                 * unallocated.  Dropping the offset then loses nothing;
                 * with subclusters the bitmap keeps saying which read as
                 * zeroes and which from the backing file.
                 */
                bool zero = s->extended_l2 ?
                    !(GUINT64_FROM_BE(l2[i * 2 + 1]) &
                      QCOW2_CHECK_L2_BITMAP_ALLOC) :
                    type == QCOW2_CLUSTER_ZERO_ALLOC;

                if (zero && (fix & BDRV_FIX_ERRORS)) {
                    fprintf(stderr, "Repairing offset=%" PRIx64 ": "
                            "Preallocated cluster is not properly "
                            "aligned; L2 entry corrupted.\n", offset);
                    ret = qcow2_check_set_l2_entry(bs, l2_offset, i,
                                                   s->extended_l2 ? 0 :
                                                   QCOW_OFLAG_ZERO);
                    if (ret < 0) {
                        res->corruptions++;
                        res->check_errors++;
                    } else {
                        res->corruptions_fixed++;
                        break;
                    }
                } else {
                    fprintf(stderr, "ERROR offset=%" PRIx64 ": %s cluster "
                            "is not properly aligned; L2 entry corrupted.\n",
                            offset, zero ? "Preallocated" : "Data");
                    res->corruptions++;
                }
            }
            if (!ext_data) {
                ret = qcow2_check_inc_refs(bs, res, r, offset,
                                           s->cluster_size);
                if (ret < 0) {
                    return ret;
                }
            }
            break;
        case QCOW2_CLUSTER_ZERO_PLAIN:
        case QCOW2_CLUSTER_UNALLOCATED:
        case QCOW2_CLUSTER_UNALLOCATED_ALLOC:
            break;
        }
    }
    return 0;
}

/* Counts the references of an L1 table, its L2 tables and their data. */
static int qcow2_check_l1(BlockDriverState *bs, BdrvCheckResult *res,
                          Qcow2CheckRefs *r, int64_t l1_offset,
                          uint32_t l1_size, int flags, BdrvCheckMode fix)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint64_t *l1 = NULL;
    uint32_t i;
    int ret;

    ret = qcow2_check_inc_refs(bs, res, r, l1_offset, (int64_t)l1_size * 8);
    if (ret < 0) {
        return ret;
    }
    if (!l1_size) {
        return 0;
    }
    l1 = g_try_new(uint64_t, l1_size);
    if (!l1) {
        res->check_errors++;
        return -ENOMEM;
    }
    ret = bdrv_pread(bs->file, l1_offset, (int64_t)l1_size * 8, l1, 0);
    if (ret < 0) {
        fprintf(stderr, "ERROR: I/O error in check_refcounts_l1\n");
        res->check_errors++;
        return ret;
    }

    for (i = 0; i < l1_size; i++) {
        uint64_t entry = GUINT64_FROM_BE(l1[i]);
        uint64_t l2_offset = entry & L1E_OFFSET_MASK;

        if (entry & L1E_RESERVED_MASK) {
            fprintf(stderr, "ERROR found L1 entry with reserved bits set: %"
                    PRIx64 "\n", entry);
            res->corruptions++;
        }
        if (!l2_offset) {
            continue;
        }
        ret = qcow2_check_inc_refs(bs, res, r, l2_offset, s->cluster_size);
        if (ret < 0) {
            return ret;
        }
        if (offset_into_cluster(s, l2_offset)) {
            fprintf(stderr, "ERROR l2_offset=%" PRIx64 ": Table is not "
                    "cluster aligned; L1 entry corrupted\n", l2_offset);
            res->corruptions++;
        }
        ret = qcow2_check_l2(bs, res, r, l2_offset, flags, fix);
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

/*
 * Every snapshot's L1 table (and what it maps), then the snapshot table.
 * The entries are those the table read at open parsed (s->snapshots):
 * reading the table again would allocate as much as its entries' extra
 * data sizes say, up to 2 GiB for a table of one snapshot.
 */
static int qcow2_check_snapshots(BlockDriverState *bs, BdrvCheckResult *res,
                                 Qcow2CheckRefs *r, BdrvCheckMode fix)
{
    BDRVQcow2State *s = bs->opaque;
    uint32_t i;
    int ret;

    for (i = 0; i < s->nb_snapshots && s->snapshots_size > 0; i++) {
        const QCowSnapshot *sn = &s->snapshots[i];
        uint64_t l1_offset = sn->l1_table_offset;
        uint32_t l1_size = sn->l1_size;
        const char *id = sn->id_str, *name = sn->name;

        if (offset_into_cluster(s, l1_offset)) {
            fprintf(stderr, "ERROR snapshot %s (%s) l1_offset=%#" PRIx64 ": "
                    "L1 table is not cluster aligned; snapshot table entry "
                    "corrupted\n", id, name, l1_offset);
            res->corruptions++;
            continue;
        }
        if ((uint64_t)l1_size * 8 > QCOW_MAX_L1_SIZE) {
            fprintf(stderr, "ERROR snapshot %s (%s) l1_size=%#" PRIx32 ": "
                    "L1 table is too large; snapshot table entry "
                    "corrupted\n", id, name, l1_size);
            res->corruptions++;
            continue;
        }
        /* no file reaches there: nothing to read, the check goes on */
        if (l1_offset > (uint64_t)BDRV_MAX_LENGTH - (uint64_t)l1_size * 8) {
            fprintf(stderr, "ERROR snapshot %s (%s) l1_offset=%#" PRIx64 ": "
                    "L1 table is past the largest file length; snapshot "
                    "table entry corrupted\n", id, name, l1_offset);
            res->corruptions++;
            continue;
        }
        ret = qcow2_check_l1(bs, res, r, l1_offset, l1_size, 0, fix);
        if (ret < 0) {
            return ret;
        }
    }
    return qcow2_check_inc_refs(bs, res, r, s->snapshots_offset,
                                s->snapshots_size);
}

/* Counts the refcount blocks, after checking each table entry. */
static int qcow2_check_refblocks(BlockDriverState *bs, BdrvCheckResult *res,
                                 Qcow2CheckRefs *r, BdrvCheckMode fix,
                                 bool *rebuild)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t i;
    int ret;

    for (i = 0; i < s->refcount_table_size; i++) {
        uint64_t entry = s->refcount_table[i];
        uint64_t offset = entry & REFT_OFFSET_MASK;
        int64_t cluster = offset >> s->cluster_bits;

        if (entry & REFT_RESERVED_MASK) {
            fprintf(stderr, "ERROR refcount table entry %" PRIu64 " has "
                    "reserved bits set\n", i);
            res->corruptions++;
            *rebuild = true;
            continue;
        }
        if (!offset) {
            continue;
        }
        if (offset_into_cluster(s, offset)) {
            fprintf(stderr, "ERROR refcount block %" PRIu64 " is not "
                    "cluster aligned; refcount table entry corrupted\n", i);
            res->corruptions++;
            *rebuild = true;
            continue;
        }
        if (cluster >= DIV_ROUND_UP(r->file_len, s->cluster_size)) {
            if (!(fix & BDRV_FIX_ERRORS)) {
                fprintf(stderr, "ERROR refcount block %" PRIu64 " is outside "
                        "image\n", i);
                res->corruptions++;
                continue;
            }
            /*
             * Make the file cover the block so that it can be counted as
             * any other: that repairs it, as in QEMU; the comparison that
             * follows decides whether its refcount needs a rebuild.
             */
            fprintf(stderr, "Repairing refcount block %" PRIu64 " is outside "
                    "image\n", i);
            /*
             * A table entry holds 55 bits of offset: its block's end can be
             * past what a file length holds, or wrap to a small number (a
             * truncate to it would destroy the image).
             */
            if (offset > BDRV_MAX_LENGTH - s->cluster_size) {
                ret = -EINVAL;
            } else {
                Error *local_err = NULL;

                /* the file driver's reason first, as QEMU prints it */
                ret = bdrv_truncate(bs->file, offset + s->cluster_size, false,
                                    PREALLOC_MODE_OFF, 0, &local_err);
                if (ret < 0) {
                    error_report_err(local_err);
                }
            }
            if (ret < 0) {
                fprintf(stderr, "ERROR could not resize image: %s\n",
                        strerror(-ret));
                res->corruptions++;
                *rebuild = true;
                continue;
            }
            r->file_len = offset + s->cluster_size;
            res->corruptions_fixed++;
        }
        ret = qcow2_check_inc_refs(bs, res, r, offset, s->cluster_size);
        if (ret < 0) {
            return ret;
        }
        if (cluster < r->nb_clusters && r->refs[cluster] != 1) {
            fprintf(stderr, "ERROR refcount block %" PRIu64 " refcount=%"
                    PRIu64 "\n", i, r->refs[cluster]);
            res->corruptions++;
            *rebuild = true;
        }
    }
    return 0;
}

/* Counts every reference in the image from scratch into @r. */
typedef struct Qcow2CheckBitmapRefs {
    BlockDriverState *bs;
    BdrvCheckResult *res;
    Qcow2CheckRefs *r;
} Qcow2CheckBitmapRefs;

static int qcow2_check_bitmap_ref(void *opaque, int64_t offset, int64_t size)
{
    Qcow2CheckBitmapRefs *c = opaque;

    return qcow2_check_inc_refs(c->bs, c->res, c->r, offset, size);
}

/* The bitmap directory, tables and data clusters (qcow2-bitmap.c). */
static int qcow2_check_bitmaps(BlockDriverState *bs, BdrvCheckResult *res,
                               Qcow2CheckRefs *r)
{
    Qcow2CheckBitmapRefs c = { .bs = bs, .res = res, .r = r };

    return qcow2_bitmaps_for_each_ref(bs, res, qcow2_check_bitmap_ref, &c);
}

static int qcow2_check_calculate(BlockDriverState *bs, BdrvCheckResult *res,
                                 Qcow2CheckRefs *r, BdrvCheckMode fix,
                                 bool *rebuild)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    g_free(r->refs);
    r->refs = NULL;
    r->nb_clusters = 0;
    ret = qcow2_check_refs_grow(r, size_to_clusters(s, r->file_len));
    if (ret < 0) {
        res->check_errors++;
        return ret;
    }

    ret = qcow2_check_inc_refs(bs, res, r, 0, s->cluster_size);
    if (ret < 0) {
        return ret;
    }
    ret = qcow2_check_l1(bs, res, r, s->l1_table_offset, s->l1_size,
                         QCOW2_CHECK_FRAG_INFO, fix);
    if (ret < 0) {
        return ret;
    }
    ret = qcow2_check_snapshots(bs, res, r, fix);
    if (ret < 0) {
        return ret;
    }
    ret = qcow2_check_bitmaps(bs, res, r);
    if (ret < 0) {
        return ret;
    }
    ret = qcow2_check_inc_refs(bs, res, r, s->refcount_table_offset,
                               (int64_t)s->refcount_table_size * 8);
    if (ret < 0) {
        return ret;
    }
    if (s->crypt_method == QCOW2_CRYPT_LUKS) {
        ret = qcow2_check_inc_refs(bs, res, r, s->crypto_header_offset,
                                   s->crypto_header_length);
        if (ret < 0) {
            return ret;
        }
    }
    return qcow2_check_refblocks(bs, res, r, fix, rebuild);
}

/*
 * The refcount of @cluster as check reads it.  A refcount table entry
 * whose block lies past the largest host offset (a table overwritten with
 * other data, one at offset 0 that holds the header) gives 0, as in QEMU,
 * which reads such a block from past the end of the file, as zeroes:
 * qcow2_check_refblocks() has reported the entry and asked for a rebuild.
 * qcow2_get_refcount() would mark the image corrupt instead, and every
 * cluster the entry covers would be an error of its own.  An unaligned
 * entry fails here as in QEMU (reported as corruption; the rebuild of
 * check -r all replaces it).
 */
static int qcow2_check_get_refcount(BlockDriverState *bs, int64_t cluster,
                                    uint64_t *refcount)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t rt_index = (uint64_t)cluster >> s->refcount_block_bits;

    if (rt_index < s->refcount_table_size &&
        (s->refcount_table[rt_index] & REFT_OFFSET_MASK & ~L1E_OFFSET_MASK)) {
        *refcount = 0;
        return 0;
    }
    return qcow2_get_refcount(bs, cluster, refcount);
}

/*
 * Compares stored refcounts with @r; repairs what @fix allows.  A cluster
 * in use whose refcount is 0 cannot be repaired in place (its refcount
 * block may be missing or broken): it asks for a rebuild instead.
 */
static void qcow2_check_compare(BlockDriverState *bs, BdrvCheckResult *res,
                                Qcow2CheckRefs *r, BdrvCheckMode fix,
                                bool *rebuild, int64_t *highest_cluster)
{
    int64_t i;
    int ret;

    for (i = 0; i < r->nb_clusters; i++) {
        uint64_t stored, counted = r->refs[i];
        int *num_fixed = NULL;

        ret = qcow2_check_get_refcount(bs, i, &stored);
        if (ret < 0) {
            fprintf(stderr, "Can't get refcount for cluster %" PRId64 ": %s\n",
                    i, strerror(-ret));
            res->check_errors++;
            continue;
        }
        if (stored || counted) {
            *highest_cluster = i;
        }
        if (stored == counted) {
            continue;
        }

        if (stored == 0) {
            *rebuild = true;
        } else if (stored > counted && (fix & BDRV_FIX_LEAKS)) {
            num_fixed = &res->leaks_fixed;
        } else if (stored < counted && (fix & BDRV_FIX_ERRORS)) {
            num_fixed = &res->corruptions_fixed;
        }
        fprintf(stderr, "%s cluster %" PRId64 " refcount=%" PRIu64
                " reference=%" PRIu64 "\n",
                num_fixed ? "Repairing" : stored < counted ? "ERROR"
                                                           : "Leaked",
                i, stored, counted);
        if (num_fixed) {
            ret = qcow2_update_cluster_refcount(
                bs, i, stored > counted ? stored - counted : counted - stored,
                stored > counted, QCOW2_DISCARD_ALWAYS);
            if (ret >= 0) {
                (*num_fixed)++;
                continue;
            }
        }
        if (stored < counted) {
            res->corruptions++;
        } else {
            res->leaks++;
        }
    }
}

/*
 * Where a rebuild puts the new refcount structure, as QEMU does (its
 * iotest 108 checks the places): each refcount block in the first free
 * cluster at or after the start of the range it describes, so that no
 * block takes a hole before its range; the table, once every block has
 * its place, in the first free run anywhere.  So a structure fits in the
 * holes of an image that cannot grow, as on a block device.
 *
 * Invariant: every cluster in [used_from, used_to) is in use.  A search
 * that starts inside that run starts at its end: the blocks are placed in
 * range order, so placing them all walks a full image once, not once
 * per block.
 */
typedef struct Qcow2RebuildAlloc {
    int64_t used_from;
    int64_t used_to;
} Qcow2RebuildAlloc;

/* First fit of @n free clusters at or after @from in @r; marks them used. */
static int64_t qcow2_rebuild_alloc(Qcow2CheckRefs *r, Qcow2RebuildAlloc *a,
                                   int64_t from, int64_t n)
{
    bool in_run = a->used_from <= from && from <= a->used_to;
    int64_t start = in_run ? MAX(from, a->used_to) : from, i;

    for (i = start; i - start < n; i++) {
        if (i < r->nb_clusters && r->refs[i]) {
            start = i + 1;
        }
    }
    if (qcow2_check_refs_grow(r, start + n) < 0) {
        return -ENOMEM;
    }
    for (i = start; i < start + n; i++) {
        r->refs[i] = 1;
    }
    /* [from, start + n) is in use now: the run grows or moves there */
    if (!in_run) {
        a->used_from = from;
    }
    a->used_to = start + n;
    return start;
}

/* Gives back clusters that qcow2_rebuild_alloc() handed out. */
static void qcow2_rebuild_free(Qcow2CheckRefs *r, Qcow2RebuildAlloc *a,
                               int64_t first, int64_t n)
{
    for (int64_t i = first; i < first + n; i++) {
        r->refs[i] = 0;
    }
    /* the run may hold them: forget it (it is only a shortcut) */
    a->used_from = a->used_to = 0;
}

static bool qcow2_rebuild_range_used(BDRVQcow2State *s, Qcow2CheckRefs *r,
                                     uint64_t block_index)
{
    int64_t first = block_index << s->refcount_block_bits;
    int64_t end = MIN(first + s->refcount_block_size, r->nb_clusters);

    for (int64_t i = first; i < end; i++) {
        if (r->refs[i]) {
            return true;
        }
    }
    return false;
}

/*
 * Grows the refcount table that qcow2_rebuild_refcounts() builds to @want
 * entries, the new ones empty: while blocks are added, and at the end to
 * fill its clusters.  -ENOMEM leaves the table as it was.
 */
static int qcow2_rebuild_grow_table(uint64_t **table, uint64_t *entries,
                                    uint64_t want)
{
    uint64_t *n = g_try_renew(uint64_t, *table, want);

    if (!n) {
        return -ENOMEM;
    }
    memset(n + *entries, 0, (want - *entries) * 8);
    *table = n;
    *entries = want;
    return 0;
}

/*
 * Writes a whole new refcount structure from @r: refcount blocks and a
 * table in free clusters (Qcow2RebuildAlloc says which), then switches the
 * header to the new table.  The old structure is left alone; it is
 * counted in @r, so the new blocks give it refcount 1 and the leak repair
 * that follows frees it.
 */
static int qcow2_rebuild_refcounts(BlockDriverState *bs, Qcow2CheckRefs *r)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint64_t *table = NULL;
    uint64_t entries = 0, table_clusters = 0, i;
    int64_t table_offset = -1;
    Qcow2RebuildAlloc alloc = { 0 };
    int ret;

    ret = qcow2_cache_empty(bs, s->refcount_block_cache);
    if (ret < 0) {
        error_report("ERROR emptying the refcount cache: %s", strerror(-ret));
        return ret;
    }

    /* Until stable: blocks for every used range, a table for every block. */
    for (;;) {
        uint64_t need = DIV_ROUND_UP(r->nb_clusters, s->refcount_block_size);
        uint64_t need_clusters;
        bool changed = false;

        if (need > entries &&
            qcow2_rebuild_grow_table(&table, &entries, need) < 0) {
            return -ENOMEM;
        }
        for (i = 0; i < entries; i++) {
            if (!table[i] && qcow2_rebuild_range_used(s, r, i)) {
                int64_t off = qcow2_rebuild_alloc(
                    r, &alloc, i << s->refcount_block_bits, 1);

                if (off < 0) {
                    return off;
                }
                table[i] = off << s->cluster_bits;
                changed = true;
            }
        }
        if (DIV_ROUND_UP(r->nb_clusters, s->refcount_block_size) > entries) {
            continue;
        }
        need_clusters = DIV_ROUND_UP(entries * 8, s->cluster_size);
        if (need_clusters > table_clusters) {
            if (table_offset >= 0) {
                qcow2_rebuild_free(r, &alloc, table_offset >> s->cluster_bits,
                                   table_clusters);
            }
            table_offset = qcow2_rebuild_alloc(r, &alloc, 0, need_clusters);
            if (table_offset < 0) {
                return table_offset;
            }
            table_offset <<= s->cluster_bits;
            table_clusters = need_clusters;
            changed = true;
        }
        if (!changed) {
            break;
        }
    }
    if (table_clusters * s->cluster_size > QCOW_MAX_REFTABLE_SIZE) {
        error_report("ERROR rebuilding the refcount structure: the refcount "
                     "table would be larger than %" PRId64 " bytes",
                     (int64_t)QCOW_MAX_REFTABLE_SIZE);
        return -EFBIG;
    }

    for (i = 0; i < entries; i++) {
        int64_t first = i << s->refcount_block_bits;
        void *block;

        if (!table[i]) {
            continue;
        }
        ret = qcow2_cache_get_empty(bs, s->refcount_block_cache, table[i],
                                    &block);
        if (ret < 0) {
            error_report("ERROR writing refblock: %s", strerror(-ret));
            return ret;
        }
        memset(block, 0, s->cluster_size);
        for (int64_t c = first;
             c < MIN(first + s->refcount_block_size, r->nb_clusters); c++) {
            qcow2_refblock_set_entry(s->refcount_order, block, c - first,
                                     r->refs[c]);
        }
        qcow2_cache_entry_mark_dirty(s->refcount_block_cache, block);
        qcow2_cache_put(s->refcount_block_cache, &block);
    }
    ret = qcow2_cache_flush(bs, s->refcount_block_cache);
    if (ret < 0) {
        error_report("ERROR writing refblock: %s", strerror(-ret));
        return ret;
    }

    /* The table fills its clusters: pad with empty entries. */
    ret = qcow2_rebuild_grow_table(&table, &entries,
                                   table_clusters * s->cluster_size / 8);
    if (ret < 0) {
        return ret;
    }
    ret = qcow2_write_reftable(bs, table_offset, 0, table, entries);
    if (ret < 0) {
        error_report("ERROR writing reftable: %s", strerror(-ret));
        return ret;
    }

    ret = qcow2_install_reftable(bs, &table, entries, table_offset,
                                 table_clusters);
    if (ret < 0) {
        error_report("ERROR setting reftable: %s", strerror(-ret));
        return ret;
    }
    s->free_cluster_index = 0;
    qcow2_overlap_rebuild_active(s);
    return 0;
}

/* OFLAG_COPIED must be set exactly where the refcount is 1 (qcow2.h inv. 3). */
static int qcow2_check_oflag_copied(BlockDriverState *bs,
                                    BdrvCheckResult *res, BdrvCheckMode fix)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint64_t *l2 = g_try_malloc(s->cluster_size);
    bool ext_data = s->data_file != bs->file;
    /*
     * -r leaks repairs the flag too, but only when nothing else was found
     * wrong: the refcounts it compares with are trustworthy then (QEMU
     * does the same).
     */
    bool repair = (fix & BDRV_FIX_ERRORS) ||
                  ((fix & BDRV_FIX_LEAKS) && !res->check_errors &&
                   !res->corruptions && !res->leaks);
    uint64_t refcount;
    int i, j, ret;

    if (!l2) {
        res->check_errors++;
        return -ENOMEM;
    }
    for (i = 0; i < s->l1_size; i++) {
        uint64_t l1_entry = s->l1_table[i];
        uint64_t l2_offset = l1_entry & L1E_OFFSET_MASK;

        if (!l2_offset) {
            continue;
        }
        ret = qcow2_check_get_refcount(bs, l2_offset >> s->cluster_bits,
                                       &refcount);
        if (ret < 0) {
            /* reported by the comparison already */
            continue;
        }
        if ((refcount == 1) != !!(l1_entry & QCOW_OFLAG_COPIED)) {
            fprintf(stderr, "%s OFLAG_COPIED L2 cluster: l1_index=%d "
                    "l1_entry=%" PRIx64 " refcount=%" PRIu64 "\n",
                    repair ? "Repairing" : "ERROR", i, l1_entry, refcount);
            if (repair) {
                s->l1_table[i] = refcount == 1
                                 ? l1_entry | QCOW_OFLAG_COPIED
                                 : l1_entry & ~QCOW_OFLAG_COPIED;
                ret = qcow2_write_l1_entry(bs, i);
                if (ret < 0) {
                    res->check_errors++;
                    return ret;
                }
                res->corruptions_fixed++;
            } else {
                res->corruptions++;
            }
        }

        ret = bdrv_pread(bs->file, l2_offset, s->cluster_size, l2, 0);
        if (ret < 0) {
            fprintf(stderr, "ERROR: Could not read L2 table: %s\n",
                    strerror(-ret));
            res->check_errors++;
            return ret;
        }
        for (j = 0; j < s->l2_size; j++) {
            uint64_t entry = GUINT64_FROM_BE(l2[j * (s->extended_l2 ? 2 :
                                                       1)]);
            QCow2ClusterType type = qcow2_check_entry_type(s, entry,
                                                           ext_data);

            if (type != QCOW2_CLUSTER_NORMAL &&
                type != QCOW2_CLUSTER_ZERO_ALLOC) {
                continue;
            }
            if (ext_data) {
                refcount = 1;
            } else if (qcow2_check_get_refcount(
                           bs, (entry & L2E_OFFSET_MASK) >> s->cluster_bits,
                           &refcount) < 0) {
                continue;
            }
            if ((refcount == 1) == !!(entry & QCOW_OFLAG_COPIED)) {
                continue;
            }
            fprintf(stderr, "%s OFLAG_COPIED data cluster: l2_entry=%" PRIx64
                    " refcount=%" PRIu64 "\n",
                    repair ? "Repairing" : "ERROR", entry, refcount);
            if (!repair) {
                res->corruptions++;
                continue;
            }
            entry = refcount == 1 ? entry | QCOW_OFLAG_COPIED
                                  : entry & ~QCOW_OFLAG_COPIED;
            if (offset_into_cluster(s, l2_offset)) {
                /* a misaligned table is not ours to write into */
                res->corruptions++;
                continue;
            }
            ret = qcow2_check_set_l2_entry(bs, l2_offset, j, entry);
            if (ret < 0) {
                fprintf(stderr, "ERROR: Could not write L2 table: %s\n",
                        strerror(-ret));
                res->check_errors++;
                return ret;
            }
            res->corruptions_fixed++;
        }
    }
    return 0;
}

int qcow2_check_refcounts(BlockDriverState *bs, BdrvCheckResult *res,
                          BdrvCheckMode fix)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2CheckRefs r = { 0 };
    BdrvCheckResult pre_compare;
    /* cluster 0 (the header) is always in use; QEMU reports at least it
     * as the image end even when no refcount could be read */
    int64_t highest_cluster = 0, virtual_size;
    bool rebuild = false;
    int ret;

    r.file_len = bdrv_getlength(bs->file->bs);
    if (r.file_len < 0) {
        res->check_errors++;
        return r.file_len;
    }
    if (size_to_clusters(s, r.file_len) > INT_MAX) {
        res->check_errors++;
        return -EFBIG;
    }
    virtual_size = bdrv_getlength(bs);
    if (virtual_size > 0) {
        res->bfi.total_clusters = size_to_clusters(s, virtual_size);
    }

    /* What the caches hold must be on disk: the walk reads the file. */
    ret = qcow2_write_caches(bs);
    if (ret < 0) {
        res->check_errors++;
        return ret;
    }

    ret = qcow2_check_calculate(bs, res, &r, fix, &rebuild);
    if (ret < 0) {
        goto out;
    }

    /* Report first; repair in a second pass. */
    pre_compare = *res;
    qcow2_check_compare(bs, res, &r, 0, &rebuild, &highest_cluster);

    if (rebuild && (fix & BDRV_FIX_ERRORS)) {
        BdrvCheckResult scratch = { 0 };
        bool still_broken = false;
        int old_corruptions;

        fprintf(stderr, "Rebuilding refcount structure\n");
        ret = qcow2_rebuild_refcounts(bs, &r);
        if (ret < 0) {
            res->check_errors++;
            goto out;
        }
        /*
         * What the recount below still finds was not fixed by the
         * rebuild (an unaligned data cluster, say): as QEMU does, only
         * the difference counts as repaired.
         */
        old_corruptions = res->corruptions;
        res->leaks_fixed += res->leaks;
        res->corruptions = 0;
        res->leaks = 0;
        /*
         * The refcounts the comparison could not read were the old
         * structure's, which the rebuild replaced: the recount below
         * reads the new one.  Left counted, they would keep the corrupt
         * bit set on an image that this check repaired (QEMU clears it
         * only in a second check -r).
         */
        res->check_errors = pre_compare.check_errors;

        /* The old structure is leaked now: count afresh and free it. */
        r.file_len = bdrv_getlength(bs->file->bs);
        if (r.file_len < 0) {
            ret = r.file_len;
            res->check_errors++;
            goto out;
        }
        ret = qcow2_check_calculate(bs, &scratch, &r, 0, &still_broken);
        if (ret < 0) {
            res->check_errors++;
            goto out;
        }
        highest_cluster = 0;
        qcow2_check_compare(bs, &scratch, &r, BDRV_FIX_LEAKS, &still_broken,
                            &highest_cluster);
        if (still_broken) {
            fprintf(stderr, "ERROR rebuilt refcount structure is still "
                    "broken\n");
        }
        res->leaks += scratch.leaks;
        res->corruptions += scratch.corruptions;
        res->check_errors += scratch.check_errors;
        if (res->corruptions < old_corruptions) {
            res->corruptions_fixed += old_corruptions - res->corruptions;
        }
    } else if (rebuild && fix) {
        fprintf(stderr, "ERROR need to rebuild refcount structures\n");
        res->check_errors++;
        ret = -EIO;
        goto out;
    } else if (fix && (res->leaks || res->corruptions)) {
        *res = pre_compare;
        highest_cluster = 0;
        qcow2_check_compare(bs, res, &r, fix, &rebuild, &highest_cluster);
    }

    ret = qcow2_check_oflag_copied(bs, res, fix);
    if (ret < 0) {
        goto out;
    }
    res->image_end_offset = (highest_cluster + 1) * s->cluster_size;
    ret = qcow2_flush_caches(bs);
    if (ret < 0) {
        res->check_errors++;
    }

out:
    g_free(r.refs);
    return ret;
}
