/*
 * qcow2: the image format driver's options, open/close/reopen, resize,
 * backing file changes, queries and the driver table.
 *
 * The other concerns live in their own files, reached through qcow2.h:
 * the header (qcow2-header.c), the data path and all copy-on-write
 * (qcow2-io.c), compressed clusters (qcow2-compress.c), image creation
 * (qcow2-create.c), the mapping (qcow2-cluster.c), the reference counts
 * (qcow2-refcount.c), check and repair (qcow2-check.c) and the table
 * caches (qcow2-cache.c).
 *
 * Invariants of this file, cited as "qcow2.c inv. N" (qcow2.h's apply as
 * well):
 *  1. Autoclear bits of features this driver does not know are cleared
 *     before the image is first modified, as the specification demands;
 *     it maintains bitmaps (qcow2-bitmap.c) and data-file-raw.
 */
#include "block/qcow2.h"
#include "block/dirty-bitmap.h"

#include "crypto/luks.h"
#include "qapi/qapi-opts.h"
#include "qblock/block-backend.h"
#include "util/cutils.h"

#define QCOW2_OPT_LAZY_REFCOUNTS        "lazy-refcounts"
#define QCOW2_OPT_DISCARD_REQUEST       "pass-discard-request"
#define QCOW2_OPT_DISCARD_SNAPSHOT      "pass-discard-snapshot"
#define QCOW2_OPT_DISCARD_OTHER         "pass-discard-other"
#define QCOW2_OPT_DISCARD_NO_UNREF      "discard-no-unref"
#define QCOW2_OPT_CACHE_SIZE            "cache-size"
#define QCOW2_OPT_L2_CACHE_SIZE         "l2-cache-size"
#define QCOW2_OPT_L2_CACHE_ENTRY_SIZE   "l2-cache-entry-size"
#define QCOW2_OPT_REFCOUNT_CACHE_SIZE   "refcount-cache-size"
#define QCOW2_OPT_CACHE_CLEAN_INTERVAL  "cache-clean-interval"

/*
 * Cache sizing, as QEMU does it, so that an image behaves the same under
 * both: the L2 cache covers the whole disk up to 32 MiB (a 256 GiB disk
 * with 64 KiB clusters), the refcount cache holds four clusters, and
 * neither falls below the tables one request may need at once.
 */
#define QCOW2_DEFAULT_L2_CACHE_MAX_SIZE (32 * MiB)
#define QCOW2_MIN_L2_CACHE_TABLES       2
#define QCOW2_MIN_REFCOUNT_CACHE_TABLES 4
#define QCOW2_DEFAULT_REFCOUNT_CACHE_TABLES 4
/* An L2 cache that cannot cover the disk uses small entries (QEMU). */
#define QCOW2_SMALL_L2_CACHE_ENTRY      4096

/* ---------------------------------------------------------------------- */
/* Runtime options */

/* Runtime options as parsed, applied at open and at reopen commit. */
typedef struct Qcow2Options {
    bool use_lazy_refcounts;
    bool discard_passthrough_request;
    bool discard_passthrough_snapshot;
    bool discard_passthrough_other;
    bool discard_no_unref;
    uint64_t l2_cache_size;         /* bytes */
    uint64_t l2_cache_entry_size;
    uint64_t refcount_cache_size;   /* bytes */
    uint64_t cache_clean_interval;  /* seconds */
    int overlap_check;              /* QCOW2_OL_* */
} Qcow2Options;

/* What blockdev-reopen may reset: all but the encryption's (QEMU's). */
static const char *const qcow2_mutable_opts[] = {
    "lazy-refcounts",
    "pass-discard-request",
    "pass-discard-snapshot",
    "pass-discard-other",
    "discard-no-unref",
    "cache-size",
    "l2-cache-size",
    "l2-cache-entry-size",
    "refcount-cache-size",
    "cache-clean-interval",
    "overlap-check",
    "overlap-check.",
    NULL
};

/*
 * A reopen that keeps the old options (qemu-io's reopen -o) merges the
 * changes over them, QEMU's way: a new overlap-check template (short or
 * long form) replaces every old overlap-check option, and a new total
 * cache-size the old L2 and refcount sizes.  An old total is never kept
 * (QEMU drops it whenever the changes give none), so a new L2 or
 * refcount size is never refused for exceeding an old total.
 */
static void qcow2_join_options(QDict *changes, QDict *old)
{
    if (qdict_haskey(changes, "overlap-check") ||
        qdict_haskey(changes, "overlap-check.template")) {
        QDict *old_flags = NULL;

        qdict_del(old, "overlap-check");
        qdict_extract_subqdict(old, &old_flags, "overlap-check.");
        qdict_unref(old_flags);
    }
    if (qdict_haskey(changes, QCOW2_OPT_CACHE_SIZE)) {
        qdict_del(old, QCOW2_OPT_L2_CACHE_SIZE);
        qdict_del(old, QCOW2_OPT_REFCOUNT_CACHE_SIZE);
    } else {
        qdict_del(old, QCOW2_OPT_CACHE_SIZE);
    }
}

/*
 * Splits the cache budget between the L2 and the refcount cache.  Without
 * any size given the L2 cache covers the whole disk (at most 32 MiB) and
 * the refcount cache takes four clusters; cache-size gives the L2 cache
 * what covers the disk and the refcount cache the rest.
 */
static int qcow2_read_cache_sizes(BlockDriverState *bs, QemuOpts *opts,
                                  Qcow2Options *o, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    bool combined_set = qemu_opt_has(opts, QCOW2_OPT_CACHE_SIZE);
    bool l2_set = qemu_opt_has(opts, QCOW2_OPT_L2_CACHE_SIZE);
    bool refcount_set = qemu_opt_has(opts, QCOW2_OPT_REFCOUNT_CACHE_SIZE);
    bool entry_set = qemu_opt_has(opts, QCOW2_OPT_L2_CACHE_ENTRY_SIZE);
    uint64_t combined = qemu_opt_get_size(opts, QCOW2_OPT_CACHE_SIZE, 0);
    uint64_t max_l2_cache = ROUND_UP(size_to_clusters(s, s->virtual_size) *
                                     (s->extended_l2 ? 16 : 8),
                                     s->cluster_size);
    uint64_t min_refcount_cache = (uint64_t)QCOW2_DEFAULT_REFCOUNT_CACHE_TABLES
                                  * s->cluster_size;
    uint64_t l2_max_setting;

    o->l2_cache_size = qemu_opt_get_size(opts, QCOW2_OPT_L2_CACHE_SIZE, 0);
    o->refcount_cache_size = qemu_opt_get_size(opts,
                                               QCOW2_OPT_REFCOUNT_CACHE_SIZE,
                                               0);
    o->l2_cache_entry_size = qemu_opt_get_size(opts,
                                               QCOW2_OPT_L2_CACHE_ENTRY_SIZE,
                                               s->cluster_size);
    l2_max_setting = l2_set ? o->l2_cache_size
                            : QCOW2_DEFAULT_L2_CACHE_MAX_SIZE;

    if (combined_set) {
        if (l2_set && refcount_set) {
            error_setg(errp, QCOW2_OPT_CACHE_SIZE ", " QCOW2_OPT_L2_CACHE_SIZE
                       " and " QCOW2_OPT_REFCOUNT_CACHE_SIZE " may not be "
                       "set at the same time");
            return -EINVAL;
        }
        if (l2_set && o->l2_cache_size > combined) {
            error_setg(errp, QCOW2_OPT_L2_CACHE_SIZE " may not exceed "
                       QCOW2_OPT_CACHE_SIZE);
            return -EINVAL;
        }
        if (o->refcount_cache_size > combined) {
            error_setg(errp, QCOW2_OPT_REFCOUNT_CACHE_SIZE " may not exceed "
                       QCOW2_OPT_CACHE_SIZE);
            return -EINVAL;
        }
        if (l2_set) {
            o->refcount_cache_size = combined - o->l2_cache_size;
        } else if (refcount_set) {
            o->l2_cache_size = combined - o->refcount_cache_size;
        } else if (combined >= max_l2_cache + min_refcount_cache) {
            o->l2_cache_size = max_l2_cache;
            o->refcount_cache_size = combined - max_l2_cache;
        } else {
            o->refcount_cache_size = MIN(combined, min_refcount_cache);
            o->l2_cache_size = combined - o->refcount_cache_size;
        }
    } else {
        if (!l2_set) {
            o->l2_cache_size = MIN(max_l2_cache, l2_max_setting);
        }
        if (!refcount_set) {
            o->refcount_cache_size = min_refcount_cache;
        }
    }

    /* a cache that cannot hold the whole disk evicts; small entries make
     * each eviction cheaper */
    if (o->l2_cache_size < max_l2_cache && !entry_set) {
        o->l2_cache_entry_size = MIN(s->cluster_size,
                                     QCOW2_SMALL_L2_CACHE_ENTRY);
    }
    if (o->l2_cache_entry_size < (1 << QCOW2_MIN_CLUSTER_BITS) ||
        o->l2_cache_entry_size > s->cluster_size ||
        !is_power_of_2(o->l2_cache_entry_size)) {
        error_setg(errp, "L2 cache entry size must be a power of two "
                   "between %d and the cluster size (%d)",
                   1 << QCOW2_MIN_CLUSTER_BITS, s->cluster_size);
        return -EINVAL;
    }
    return 0;
}

static int qcow2_read_options(BlockDriverState *bs, QDict *options,
                              int flags, Qcow2Options *o, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    QemuOpts *opts;
    int ret;

    opts = qemu_opts_absorb_qdict(&qapi_opts_qcow2_runtime, options, errp);
    if (!opts) {
        return -EINVAL;
    }
    ret = qcow2_read_cache_sizes(bs, opts, o, errp);
    if (ret < 0) {
        goto out;
    }
    o->cache_clean_interval = qemu_opt_get_number(
        opts, QCOW2_OPT_CACHE_CLEAN_INTERVAL, 0);
    if (o->cache_clean_interval > UINT_MAX) {
        error_setg(errp, "Cache clean interval too big");
        ret = -EINVAL;
        goto out;
    }

    o->use_lazy_refcounts = qemu_opt_get_bool(
        opts, QCOW2_OPT_LAZY_REFCOUNTS,
        s->compatible_features & QCOW2_COMPAT_LAZY_REFCOUNTS);
    if (o->use_lazy_refcounts && s->qcow_version < 3) {
        error_setg(errp, "Lazy refcounts require a qcow2 image with at least "
                   "qemu 1.1 compatibility level");
        ret = -EINVAL;
        goto out;
    }
    o->discard_passthrough_request = qemu_opt_get_bool(
        opts, QCOW2_OPT_DISCARD_REQUEST, flags & BDRV_O_UNMAP);
    o->discard_passthrough_snapshot = qemu_opt_get_bool(
        opts, QCOW2_OPT_DISCARD_SNAPSHOT, true);
    o->discard_passthrough_other = qemu_opt_get_bool(
        opts, QCOW2_OPT_DISCARD_OTHER, false);
    o->discard_no_unref = qemu_opt_get_bool(opts, QCOW2_OPT_DISCARD_NO_UNREF,
                                            false);
    ret = qcow2_overlap_read_options(opts, &o->overlap_check, errp);
    if (ret < 0) {
        goto out;
    }
    if (o->discard_no_unref && s->qcow_version < 3) {
        error_setg(errp, QCOW2_OPT_DISCARD_NO_UNREF " is only supported "
                   "since qcow2 version 3");
        ret = -EINVAL;
        goto out;
    }
    ret = 0;
out:
    qemu_opts_del(opts);
    return ret;
}

static void qcow2_cache_clean_timer_cb(void *opaque)
{
    BlockDriverState *bs = opaque;
    BDRVQcow2State *s = bs->opaque;

    qcow2_cache_clean_unused(s->l2_table_cache);
    qcow2_cache_clean_unused(s->refcount_block_cache);
    timer_mod(s->cache_clean_timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) /
              SCALE_MS + (int64_t)s->cache_clean_interval * 1000);
}

/* (Re)arms the timer in @ctx, the node's context or the one it moves to. */
static void qcow2_cache_clean_timer_arm(BlockDriverState *bs, AioContext *ctx)
{
    BDRVQcow2State *s = bs->opaque;

    if (s->cache_clean_timer) {
        timer_del(s->cache_clean_timer);
        timer_free(s->cache_clean_timer);
        s->cache_clean_timer = NULL;
    }
    if (s->cache_clean_interval > 0) {
        s->cache_clean_timer = aio_timer_new(ctx,
                                             QEMU_CLOCK_REALTIME, SCALE_MS,
                                             qcow2_cache_clean_timer_cb, bs);
        timer_mod(s->cache_clean_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) / SCALE_MS +
                  (int64_t)s->cache_clean_interval * 1000);
    }
}

static void qcow2_cache_clean_timer_update(BlockDriverState *bs)
{
    qcow2_cache_clean_timer_arm(bs, bdrv_get_aio_context(bs));
}

/* The cache-clean timer is the only thing bound to the node's context. */
static int qcow2_change_aio_context(BlockDriverState *bs, AioContext *new_ctx,
                                    Error **errp)
{
    qcow2_cache_clean_timer_arm(bs, new_ctx);
    return 0;
}

/*
 * Creates the caches for @o: L2 tables are cached in slices of the entry
 * size, refcount blocks whole; each cache holds at least what one request
 * needs at once.
 */
static int qcow2_caches_create(BlockDriverState *bs, const Qcow2Options *o,
                               Qcow2Cache **l2, Qcow2Cache **refcount,
                               Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t l2_tables = MAX(o->l2_cache_size / o->l2_cache_entry_size,
                             QCOW2_MIN_L2_CACHE_TABLES);
    uint64_t refcount_tables = MAX(o->refcount_cache_size / s->cluster_size,
                                   QCOW2_MIN_REFCOUNT_CACHE_TABLES);

    if (l2_tables > INT_MAX) {
        error_setg(errp, "L2 cache size too big");
        return -EINVAL;
    }
    if (refcount_tables > INT_MAX) {
        error_setg(errp, "Refcount cache size too big");
        return -EINVAL;
    }
    *l2 = qcow2_cache_create(bs, l2_tables, o->l2_cache_entry_size);
    *refcount = qcow2_cache_create(bs, refcount_tables, s->cluster_size);
    if (!*l2 || !*refcount) {
        if (*l2) {
            qcow2_cache_destroy(*l2);
        }
        if (*refcount) {
            qcow2_cache_destroy(*refcount);
        }
        *l2 = *refcount = NULL;
        error_setg(errp, "Could not allocate metadata caches");
        return -ENOMEM;
    }
    return 0;
}

static void qcow2_apply_options(BlockDriverState *bs, const Qcow2Options *o)
{
    BDRVQcow2State *s = bs->opaque;

    s->use_lazy_refcounts = o->use_lazy_refcounts;
    s->discard_passthrough_request = o->discard_passthrough_request;
    s->discard_passthrough_snapshot = o->discard_passthrough_snapshot;
    s->discard_passthrough_other = o->discard_passthrough_other;
    s->discard_no_unref = o->discard_no_unref;
    s->l2_cache_size = o->l2_cache_size;
    s->l2_cache_entry_size = o->l2_cache_entry_size;
    s->refcount_cache_size = o->refcount_cache_size;
    s->cache_clean_interval = o->cache_clean_interval;
    s->overlap_check = o->overlap_check;
}

/* ---------------------------------------------------------------------- */
/* Open and close */

/* Reads the active L1 table into its host-endian copy. */
static int qcow2_read_l1(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    s->l1_table = g_try_malloc0(ROUND_UP(MAX(s->l1_size, 1) *
                                         sizeof(uint64_t), 512));
    if (!s->l1_table) {
        error_setg(errp, "Could not allocate L1 table");
        return -ENOMEM;
    }
    if (!s->l1_size) {
        return 0;
    }
    ret = bdrv_pread(bs->file, s->l1_table_offset,
                     s->l1_size * sizeof(uint64_t), s->l1_table, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read L1 table");
        return ret;
    }
    for (int i = 0; i < s->l1_size; i++) {
        s->l1_table[i] = GUINT64_FROM_BE(s->l1_table[i]);
    }
    return 0;
}

/* Opens the external data file the header names, or the one given. */
static int qcow2_open_data_file(BlockDriverState *bs, QDict *options,
                                Qcow2HeaderExts *exts, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Error *local_err = NULL;

    s->image_data_file = g_steal_pointer(&exts->data_file);
    /* one given opens first, as in QEMU: its own errors come first */
    s->data_file = bdrv_open_child(NULL, options, "data-file", bs,
                                   BDRV_CHILD_OPEN_OPTIONAL, &local_err);
    if (local_err) {
        error_propagate(errp, local_err);
        return -EINVAL;
    }
    if (!(s->incompatible_features & QCOW2_INCOMPAT_DATA_FILE)) {
        if (s->data_file) {
            bdrv_unref_child(bs, s->data_file);
            s->data_file = NULL;
            error_setg(errp, "'data-file' can only be set for images with "
                       "an external data file");
            return -EINVAL;
        }
        s->data_file = bs->file;
        return 0;
    }
    if (s->data_file) {
        return 0;
    }
    if (!s->image_data_file && (bs->open_flags & BDRV_O_NO_IO)) {
        /* qemu-img info can still describe the image */
        s->data_file = bs->file;
        return 0;
    }
    if (!s->image_data_file) {
        error_setg(errp, "'data-file' is required for this image");
        return -EINVAL;
    }
    /*
     * The name as the header has it: a relative one is relative to the
     * current directory, not the image's (unlike a backing file name), as
     * in QEMU, which also creates the file there (qemu-img create -o
     * data_file=NAME): an image made in one directory opens from it.
     */
    s->data_file = bdrv_open_child(s->image_data_file, options, "data-file",
                                   bs, 0, errp);
    return s->data_file ? 0 : -EINVAL;
}

typedef struct Qcow2OpenCo {
    int flags;
    Error **errp;
    /* a bitmaps extension without its autoclear bit, to drop */
    bool stale_bitmaps;
} Qcow2OpenCo;

/* The metadata part of open, in coroutine context under s->lock. */
static int coroutine_fn qcow2_open_co_locked(BlockDriverState *bs,
                                             Qcow2OpenCo *o)
{
    BDRVQcow2State *s = bs->opaque;
    bool writable = (o->flags & BDRV_O_RDWR) &&
                    !(o->flags & BDRV_O_INACTIVE);
    int ret;

    ret = qcow2_refcount_init(bs);
    if (ret < 0) {
        error_setg_errno(o->errp, -ret, "Could not initialize refcount "
                         "handling");
        return ret;
    }
    ret = qcow2_read_l1(bs, o->errp);
    if (ret < 0) {
        return ret;
    }
    ret = qcow2_overlap_init(bs, o->errp);
    if (ret < 0) {
        return ret;
    }

    /*
     * A dirty image (lazy refcounts, not closed cleanly) has refcounts that
     * may be too low; rebuild them before anything allocates.  check opens
     * it to report, not to repair behind the user's back.
     */
    if (writable && !(o->flags & BDRV_O_CHECK) &&
        (s->incompatible_features & QCOW2_INCOMPAT_DIRTY)) {
        BdrvCheckResult result = { 0 };

        ret = qcow2_check_refcounts(bs, &result,
                                    BDRV_FIX_ERRORS | BDRV_FIX_LEAKS);
        if (ret < 0 || result.check_errors) {
            if (ret >= 0) {
                ret = -EIO;
            }
            error_setg_errno(o->errp, -ret, "Could not repair dirty image");
            return ret;
        }
        ret = qcow2_mark_clean(bs);
        if (ret < 0) {
            error_setg_errno(o->errp, -ret, "Could not mark image clean");
            return ret;
        }
    }

    /* qcow2.c inv. 1: bits of features we do not know go first; a
     * stale bitmaps extension goes with them */
    if (writable &&
        ((s->autoclear_features & ~(uint64_t)QCOW2_AUTOCLEAR_MASK) ||
         o->stale_bitmaps)) {
        s->autoclear_features &= QCOW2_AUTOCLEAR_MASK;
        ret = qcow2_update_header(bs);
        if (ret < 0) {
            error_setg_errno(o->errp, -ret, "Could not update qcow2 header");
            return ret;
        }
    }
    if (!(o->flags & BDRV_O_INACTIVE)) {
        Error *err = NULL;

        ret = qcow2_load_dirty_bitmaps(bs, o->flags, &err);
        if (ret < 0 && (o->flags & BDRV_O_CHECK)) {
            /* check reports what is wrong with them */
            error_free(err);
            bdrv_release_all_dirty_bitmaps(bs);
            ret = 0;
        } else if (ret < 0) {
            error_propagate(o->errp, err);
            return ret;
        }
    }
    return 0;
}

static int coroutine_fn qcow2_open_co(BlockDriverState *bs, void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = qcow2_open_co_locked(bs, opaque);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/* Frees what open built; used by close and by a failed open. */
static void qcow2_free_state(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    if (s->cache_clean_timer) {
        timer_del(s->cache_clean_timer);
        timer_free(s->cache_clean_timer);
        s->cache_clean_timer = NULL;
    }
    if (s->l2_table_cache) {
        qcow2_cache_destroy(s->l2_table_cache);
        s->l2_table_cache = NULL;
    }
    if (s->refcount_block_cache) {
        qcow2_cache_destroy(s->refcount_block_cache);
        s->refcount_block_cache = NULL;
    }
    if (s->refcount_table) {
        qcow2_refcount_close(bs);
    }
    qcow2_overlap_close(s);
    qcow2_crypt_close(bs);
    g_clear_pointer(&s->l1_table, g_free);
    qcow2_free_snapshots(bs);
    g_clear_pointer(&s->unknown_header_fields, g_free);
    g_list_free_full(s->unknown_header_ext, g_free);
    s->unknown_header_ext = NULL;
    g_clear_pointer(&s->image_backing_file, g_free);
    g_clear_pointer(&s->image_backing_format, g_free);
    g_clear_pointer(&s->image_data_file, g_free);
}

static int qcow2_open(BlockDriverState *bs, QDict *options, int flags,
                      Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2HeaderExts exts = { 0 };
    Qcow2Options opts;
    Qcow2OpenCo co = { .flags = flags, .errp = errp };
    int ret;

    qemu_co_mutex_init(&s->lock);
    qemu_co_queue_init(&s->dependent_requests);
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }

    ret = qcow2_read_header(bs, flags, &exts, errp);
    if (ret < 0) {
        goto fail;
    }
    ret = qcow2_open_data_file(bs, options, &exts, errp);
    if (ret < 0) {
        goto fail;
    }
    ret = qcow2_crypt_open(bs, &exts, options, flags, errp);
    if (ret < 0) {
        goto fail;
    }
    s->image_backing_format = g_steal_pointer(&exts.backing_format);
    s->unknown_header_ext = g_steal_pointer(&exts.unknown);
    /* metadata only while the bitmaps are valid (autoclear bit set) */
    if (s->autoclear_features & QCOW2_AUTOCLEAR_BITMAPS) {
        s->nb_bitmaps = exts.nb_bitmaps;
        s->bitmap_directory_offset = exts.bitmap_directory_offset;
        s->bitmap_directory_size = exts.bitmap_directory_size;
    } else if (exts.has_bitmaps) {
        warn_report("a program lacking bitmap support modified this file, "
                    "so all bitmaps are now considered inconsistent");
        fprintf(stderr, "Some clusters may be leaked, run 'qemu-img check "
                "-r' on the image file to fix.");
        co.stale_bitmaps = true;
    }

    ret = qcow2_read_options(bs, options, flags, &opts, errp);
    if (ret < 0) {
        goto fail;
    }
    qcow2_apply_options(bs, &opts);
    ret = qcow2_caches_create(bs, &opts, &s->l2_table_cache,
                              &s->refcount_block_cache, errp);
    if (ret < 0) {
        goto fail;
    }
    if (!s->use_lazy_refcounts) {
        /* qcow2.h inv. 1 */
        qcow2_cache_set_dependency(bs, s->l2_table_cache,
                                   s->refcount_block_cache);
    }
    ret = qcow2_read_snapshots(bs, flags & BDRV_O_CHECK, errp);
    if (ret < 0) {
        goto fail;
    }
    ret = bdrv_run_co(bs, qcow2_open_co, &co);
    if (ret < 0) {
        goto fail;
    }

    if (s->image_backing_file) {
        pstrcpy(bs->backing_file, sizeof(bs->backing_file),
                s->image_backing_file);
    }
    if (s->image_backing_format) {
        pstrcpy(bs->backing_format, sizeof(bs->backing_format),
                s->image_backing_format);
    }
    bs->corrupt = s->incompatible_features & QCOW2_INCOMPAT_CORRUPT;
    /*
     * Zero clusters keep a longer backing file from showing through.  A
     * v2 image has none: it takes the flag too and fails in the driver,
     * with QEMU's "Failed to zero out new clusters".
     */
    bs->supported_truncate_flags = BDRV_REQ_ZERO_WRITE;
    qcow2_cache_clean_timer_update(bs);
    qcow2_header_exts_clear(&exts);
    return 0;

fail:
    qcow2_header_exts_clear(&exts);
    qcow2_free_state(bs);
    return ret;
}

/*
 * Writes @c back at close and flushes the file, as QEMU does for each
 * cache.  The metadata that cannot be written is lost (clusters leak, or
 * a lazy-refcounts image stays dirty) and close has no caller to tell:
 * the user is told, in QEMU's words, which cache failed, also when only
 * the flush did (a file that fails every request fails both).
 */
static int coroutine_fn qcow2_close_write_cache(BlockDriverState *bs,
                                                Qcow2Cache *c,
                                                const char *what)
{
    int ret = qcow2_cache_flush(bs, c);

    if (ret < 0) {
        error_report("Failed to flush the %s cache: %s", what,
                     strerror(-ret));
    }
    return ret;
}

static int coroutine_fn qcow2_close_co(BlockDriverState *bs, void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    int ret, ret2;

    qemu_co_mutex_lock(&s->lock);
    if (!(bs->open_flags & BDRV_O_INACTIVE)) {
        Error *err = NULL;

        if (qcow2_store_dirty_bitmaps(bs, &err) < 0) {
            error_report("Lost persistent bitmaps during inactivation of "
                         "node '%s': %s", bdrv_get_node_name(bs),
                         error_get_pretty(err));
            error_free(err);
        }
    }
    ret = qcow2_close_write_cache(bs, s->l2_table_cache, "L2 table");
    ret2 = qcow2_close_write_cache(bs, s->refcount_block_cache,
                                   "refcount block");
    ret = ret < 0 ? ret : ret2;
    if (ret == 0 && s->use_lazy_refcounts) {
        ret = qcow2_mark_clean(bs);
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

static void qcow2_close(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    /* qcow2.h inv. 8: a node whose refcounts are lost writes nothing */
    if (bdrv_is_writable(bs) && !bs->corrupt && !s->refcounts_lost) {
        /* nobody to report a failure to: the image stays dirty (lazy
         * refcounts) or leaks clusters, and check repairs it */
        bdrv_run_co(bs, qcow2_close_co, NULL);
    }
    qcow2_free_state(bs);
}

/* ---------------------------------------------------------------------- */
/* Resizing */

/* The end of the last cluster with a nonzero refcount, for shrinking. */
static int64_t qcow2_last_used_cluster_end(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t file_len = bdrv_getlength(bs->file->bs);
    int64_t i;

    if (file_len < 0) {
        return file_len;
    }
    for (i = size_to_clusters(s, file_len) - 1; i >= 0; i--) {
        uint64_t refcount;
        int ret = qcow2_get_refcount(bs, i, &refcount);

        if (ret < 0) {
            return ret;
        }
        if (refcount) {
            break;
        }
    }
    return (i + 1) << s->cluster_bits;
}

/*
 * Empties the L1 entries from @new_l1_size on and frees their L2 tables
 * (whose entries the caller has discarded already).  The table keeps its
 * size, as in QEMU.
 */
static int coroutine_fn qcow2_shrink_l1_table(BlockDriverState *bs,
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
        /* qcow2.h inv. 7: the freed table is no metadata any more */
        qcow2_overlap_l2_changed(s, old, 0);
        qcow2_free_clusters(bs, l2_offset, s->cluster_size,
                            QCOW2_DISCARD_ALWAYS);
    }
    return 0;
}

static int coroutine_fn qcow2_shrink(BlockDriverState *bs, int64_t offset,
                                     Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t start = ROUND_UP(offset, s->cluster_size);
    int64_t end;
    int ret;

    if (start < s->virtual_size) {
        /* what the disk loses is given back to the host, whatever
         * pass-discard-* say (QEMU does the same) */
        ret = qcow2_cluster_discard(bs, start, s->virtual_size - start,
                                    true, QCOW2_DISCARD_ALWAYS);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Failed to discard cropped "
                             "clusters");
            return ret;
        }
    }
    ret = qcow2_shrink_l1_table(bs, qcow2_size_to_l1(s, offset));
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to reduce the number of L2 "
                         "tables");
        return ret;
    }
    ret = qcow2_shrink_reftable(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to discard unused refblocks");
        return ret;
    }
    ret = qcow2_write_caches(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to flush the metadata");
        return ret;
    }
    end = qcow2_last_used_cluster_end(bs);
    if (end < 0) {
        error_setg_errno(errp, -end, "Failed to find the last cluster");
        return end;
    }
    /* the freed tail of the file goes back to the host; failing to do so
     * only wastes space */
    bdrv_co_truncate(bs->file, end, false, PREALLOC_MODE_OFF, 0, NULL);
    return 0;
}

/* Reserves [offset, offset + bytes) of the data file: allocated zeroes. */
static int coroutine_fn qcow2_reserve_host_range(BlockDriverState *bs,
                                                 uint64_t offset,
                                                 uint64_t bytes,
                                                 PreallocMode prealloc)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint8_t *zeroes = NULL;
    uint64_t chunk = MIN(bytes, 1 * MiB);
    QEMUIOVector qiov;
    int ret = 0;

    if (prealloc == PREALLOC_MODE_FALLOC) {
        /* no unmap allowed: the file system allocates (ZERO_RANGE) */
        return bdrv_co_pwrite_zeroes(s->data_file, offset, bytes, 0);
    }
    /* full: zeroes written as data, as a full truncate writes them */
    zeroes = g_malloc0(chunk);
    while (bytes > 0 && ret == 0) {
        uint64_t n = MIN(bytes, chunk);

        qemu_iovec_init_buf(&qiov, zeroes, n);
        ret = bdrv_co_pwritev(s->data_file, offset, n, &qiov, 0);
        offset += n;
        bytes -= n;
    }
    return ret;
}

/*
 * falloc/full preallocation of guest [offset, offset + bytes), whose
 * clusters metadata preallocation has just mapped: the data clusters that
 * lie at or past @old_file_end are new and hold nothing, so they are
 * reserved in the file (L2 tables written after them left them holes).
 * Clusters below it were allocated before and keep their data; of the
 * cluster the old end cuts, only the part past the old end is reserved.
 */
static int coroutine_fn qcow2_reserve_clusters(BlockDriverState *bs,
                                               uint64_t offset,
                                               uint64_t bytes,
                                               uint64_t old_file_end,
                                               PreallocMode prealloc)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t run_start = 0, run_end = 0;
    int ret;

    if (offset_into_cluster(s, offset)) {
        unsigned int cur = MIN(bytes, s->cluster_size -
                                      offset_into_cluster(s, offset));
        uint64_t host;
        QCow2ClusterType type;

        ret = qcow2_get_host_offset(bs, offset, &cur, &host, &type);
        if (ret < 0) {
            return ret;
        }
        /*
         * The cluster the old end cuts holds data before the old end (its
         * own, or what was copied from the backing file when it was
         * just allocated); its part past the old end was no part of the
         * disk, so only that is reserved, as zeroes (the grown disk must
         * read zeroes there).
         */
        if (type == QCOW2_CLUSTER_NORMAL) {
            ret = qcow2_reserve_host_range(bs, host, cur, prealloc);
            if (ret < 0) {
                return ret;
            }
        }
        offset += cur;
        bytes -= cur;
    }
    while (bytes > 0) {
        unsigned int cur = MIN(bytes, (uint64_t)(INT_MAX & -s->cluster_size));
        uint64_t host;
        QCow2ClusterType type;

        ret = qcow2_get_host_offset(bs, offset, &cur, &host, &type);
        if (ret < 0) {
            return ret;
        }
        if (type == QCOW2_CLUSTER_NORMAL && host >= old_file_end) {
            if (host != run_end) {
                if (run_end > run_start) {
                    ret = qcow2_reserve_host_range(bs, run_start,
                                                   run_end - run_start,
                                                   prealloc);
                    if (ret < 0) {
                        return ret;
                    }
                }
                run_start = host;
            }
            run_end = ROUND_UP(host + cur, (uint64_t)s->cluster_size);
        }
        offset += cur;
        bytes -= MIN(bytes, cur);
    }
    if (run_end > run_start) {
        return qcow2_reserve_host_range(bs, run_start, run_end - run_start,
                                        prealloc);
    }
    return 0;
}

/*
 * Grows the disk: the L1 table first, then the preallocation asked for;
 * the header's size changes last, so that a failure leaves the old size.
 */
static int coroutine_fn qcow2_grow(BlockDriverState *bs, int64_t offset,
                                   PreallocMode prealloc,
                                   BdrvRequestFlags flags, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t new_l1 = qcow2_size_to_l1(s, offset);
    int64_t old = s->virtual_size;
    uint64_t host_end = 0;
    int64_t file_len;
    int ret;

    if (new_l1 > QCOW_MAX_L1_SIZE / sizeof(uint64_t)) {
        error_setg(errp, "Active L1 table too large");
        return -EFBIG;
    }
    if (new_l1 > (uint64_t)s->l1_size) {
        ret = qcow2_grow_l1_table(bs, new_l1, true);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Failed to grow the L1 table");
            return ret;
        }
    }

    if (prealloc != PREALLOC_MODE_OFF) {
        int64_t old_file_end = bdrv_getlength(s->data_file->bs);

        if (old_file_end < 0) {
            error_setg_errno(errp, -old_file_end, "Could not get file size");
            return old_file_end;
        }
        ret = qcow2_preallocate_range(bs, old, offset - old, &host_end);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Preallocation failed");
            return ret;
        }
        /* falloc and full reserve the new clusters (growing the file) */
        if (prealloc == PREALLOC_MODE_FALLOC ||
            prealloc == PREALLOC_MODE_FULL) {
            ret = qcow2_reserve_clusters(bs, old, offset - old,
                                         old_file_end, prealloc);
            if (ret < 0) {
                error_setg_errno(errp, -ret, "Preallocation failed");
                return ret;
            }
        }
        file_len = bdrv_getlength(s->data_file->bs);
        if (file_len < 0) {
            error_setg_errno(errp, -file_len, "Could not get file size");
            return file_len;
        }
        /* the clusters exist in the file: metadata preallocation makes
         * them holes */
        if ((int64_t)host_end > file_len) {
            ret = bdrv_co_truncate(s->data_file, host_end, false,
                                   prealloc == PREALLOC_MODE_METADATA ?
                                   PREALLOC_MODE_OFF : prealloc, 0, errp);
            if (ret < 0) {
                return ret;
            }
        }
    }

    if ((flags & BDRV_REQ_ZERO_WRITE) && offset > old) {
        /* a longer backing file must not show through the new area */
        int64_t zero_start = ROUND_UP(old, s->cluster_size);

        if (zero_start < offset) {
            ret = qcow2_subcluster_zeroize(bs, zero_start,
                                           offset - zero_start, 0);
            if (ret < 0) {
                error_setg_errno(errp, -ret, "Failed to zero out new "
                                 "clusters");
                return ret;
            }
        }
    }
    return 0;
}

/* Writes zeroes over [offset, offset + bytes) through the data path. */
static int coroutine_fn qcow2_write_zero_bytes(BlockDriverState *bs,
                                               int64_t offset, int64_t bytes)
{
    g_autofree uint8_t *buf = g_malloc0(bytes);
    QEMUIOVector qiov;

    qemu_iovec_init_buf(&qiov, buf, bytes);
    return qcow2_co_pwritev(bs, offset, bytes, &qiov, 0);
}

int coroutine_fn qcow2_co_truncate(BlockDriverState *bs, int64_t offset,
                                   bool exact, PreallocMode prealloc,
                                   BdrvRequestFlags flags, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    bool stale_tail = false;
    int64_t old;
    int ret;

    if (offset & (BDRV_SECTOR_SIZE - 1)) {
        error_setg(errp, "The new size must be a multiple of 512");
        return -EINVAL;
    }
    if (prealloc >= PREALLOC_MODE__MAX) {
        error_setg(errp, "Unsupported preallocation mode");
        return -ENOTSUP;
    }

    qemu_co_mutex_lock(&s->lock);
    old = s->virtual_size;
    /* the stored bitmaps would not fit the new size (qcow2-bitmap.c 4.) */
    ret = qcow2_mark_bitmaps_in_use_locked(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not mark the bitmaps in use");
        goto out;
    }
    /* v3 snapshots record their own disk size; v2 ones cannot */
    if (s->nb_snapshots && s->qcow_version < 3) {
        error_setg(errp, "Can't resize a v2 image which has snapshots");
        ret = -ENOTSUP;
        goto out;
    }
    if (offset < old) {
        if (prealloc != PREALLOC_MODE_OFF) {
            error_setg(errp, "Preallocation can't be used for shrinking an "
                       "image");
            ret = -EINVAL;
            goto out;
        }
        ret = qcow2_shrink(bs, offset, errp);
    } else if (qcow2_data_file_is_raw(s) && prealloc == PREALLOC_MODE_OFF) {
        /* a raw data file is the disk: every cluster maps to its place
         * there, as QEMU maps them */
        ret = qcow2_grow(bs, offset, PREALLOC_MODE_METADATA, flags, errp);
    } else {
        ret = qcow2_grow(bs, offset, prealloc, flags, errp);
    }
    if (ret < 0) {
        goto out;
    }
    if (qcow2_data_file_is_raw(s)) {
        ret = bdrv_co_truncate(s->data_file, offset, exact,
                               prealloc == PREALLOC_MODE_METADATA ?
                               PREALLOC_MODE_OFF : prealloc, 0, errp);
        if (ret < 0) {
            goto out;
        }
    }
    s->virtual_size = offset;
    ret = qcow2_update_header(bs);
    if (ret < 0) {
        s->virtual_size = old;
        error_setg_errno(errp, -ret, "Failed to update the image size");
    }
    /*
     * A shrink to the middle of a cluster leaves the rest of it as it
     * was: growing again must not bring that data back (QEMU 7.2 does).
     */
    if (ret == 0 && offset > old && offset_into_cluster(s, old)) {
        unsigned int n = s->cluster_size - offset_into_cluster(s, old);
        uint64_t host;
        QCow2ClusterType type;

        stale_tail = qcow2_get_host_offset(bs, old, &n, &host, &type) == 0 &&
                     (type == QCOW2_CLUSTER_NORMAL ||
                      type == QCOW2_CLUSTER_COMPRESSED);
    }
out:
    qemu_co_mutex_unlock(&s->lock);

    /* the part of the old last cluster the zero clusters did not cover */
    if (ret == 0 && ((flags & BDRV_REQ_ZERO_WRITE) || stale_tail) &&
        offset > old && offset_into_cluster(s, old)) {
        int64_t n = MIN(ROUND_UP(old, s->cluster_size), offset) - old;

        ret = qcow2_write_zero_bytes(bs, old, n);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Failed to zero out the new area");
        }
    }
    return ret;
}

/* ---------------------------------------------------------------------- */
/* Reopen */

typedef struct Qcow2ReopenState {
    Qcow2Options opts;
    Qcow2Cache *l2_table_cache;
    Qcow2Cache *refcount_block_cache;
} Qcow2ReopenState;

static int coroutine_fn qcow2_reopen_flush_co(BlockDriverState *bs,
                                              void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    bool going_ro = *(bool *)opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    if (going_ro) {
        Error *err = NULL;

        /* read-only, the bitmaps must be stored: nothing will at close */
        if (qcow2_store_dirty_bitmaps(bs, &err) < 0) {
            qemu_co_mutex_unlock(&s->lock);
            error_report("Could not store the bitmaps of node '%s': %s",
                         bdrv_get_node_name(bs), error_get_pretty(err));
            error_free(err);
            return -EIO;
        }
    }
    ret = qcow2_write_caches(bs);
    if (ret == 0 && going_ro) {
        /* read-only, the image must be consistent on its own */
        ret = qcow2_mark_clean(bs);
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/*
 * New options take new caches, so the old ones are written back first;
 * a switch to read-only also leaves the refcounts consistent on disk.
 */
static int qcow2_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    BlockDriverState *bs = state->bs;
    BDRVQcow2State *s = bs->opaque;
    Qcow2ReopenState *r = g_new0(Qcow2ReopenState, 1);
    bool going_ro = !(state->flags & BDRV_O_RDWR);
    int ret;

    ret = qcow2_read_options(bs, state->options, state->flags, &r->opts,
                             errp);
    if (ret < 0) {
        goto fail;
    }
    if (bdrv_is_writable(bs)) {
        ret = bdrv_run_co(bs, qcow2_reopen_flush_co, &going_ro);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not write the qcow2 "
                             "metadata");
            goto fail;
        }
    }
    if ((state->flags & BDRV_O_RDWR) &&
        (s->incompatible_features & QCOW2_INCOMPAT_CORRUPT)) {
        error_setg(errp, "qcow2: Image is corrupt; cannot be opened "
                   "read/write");
        ret = -EACCES;
        goto fail;
    }
    ret = qcow2_caches_create(bs, &r->opts, &r->l2_table_cache,
                              &r->refcount_block_cache, errp);
    if (ret < 0) {
        goto fail;
    }
    state->opaque = r;
    return 0;

fail:
    g_free(r);
    return ret;
}

static void qcow2_reopen_commit(BDRVReopenState *state)
{
    BlockDriverState *bs = state->bs;
    BDRVQcow2State *s = bs->opaque;
    Qcow2ReopenState *r = state->opaque;

    /* prepare wrote them back and nothing ran since */
    qcow2_cache_destroy(s->l2_table_cache);
    qcow2_cache_destroy(s->refcount_block_cache);
    s->l2_table_cache = r->l2_table_cache;
    s->refcount_block_cache = r->refcount_block_cache;
    qcow2_apply_options(bs, &r->opts);
    if (!s->use_lazy_refcounts) {
        qcow2_cache_set_dependency(bs, s->l2_table_cache,
                                   s->refcount_block_cache);
    }
    qcow2_cache_clean_timer_update(bs);
    g_free(r);
    state->opaque = NULL;
}

/* Marks the bitmaps in use or read-only to match what the node became. */
static int coroutine_fn qcow2_reopen_bitmaps_co(BlockDriverState *bs,
                                                void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    Error **errp = opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = qcow2_reopen_bitmaps(bs, bdrv_is_writable(bs), errp);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

static void qcow2_reopen_commit_post(BlockDriverState *bs)
{
    Error *err = NULL;

    if (bdrv_run_co(bs, qcow2_reopen_bitmaps_co, &err) < 0) {
        error_report("Could not mark the bitmaps of node '%s' in use: %s",
                     bdrv_get_node_name(bs), error_get_pretty(err));
        error_free(err);
    }
}

static void qcow2_reopen_abort(BDRVReopenState *state)
{
    Qcow2ReopenState *r = state->opaque;

    if (r) {
        qcow2_cache_destroy(r->l2_table_cache);
        qcow2_cache_destroy(r->refcount_block_cache);
        g_free(r);
        state->opaque = NULL;
    }
}

/* ---------------------------------------------------------------------- */
/* Rebase */

typedef struct Qcow2BackingChange {
    const char *file;
    const char *fmt;
} Qcow2BackingChange;

/* The header update under s->lock (qcow2.h inv. 4). */
static int coroutine_fn qcow2_change_backing_file_locked(
    BlockDriverState *bs, const char *backing_file, const char *backing_fmt)
{
    BDRVQcow2State *s = bs->opaque;
    char *old_file = s->image_backing_file;
    char *old_fmt = s->image_backing_format;
    int ret;

    if (backing_file && strlen(backing_file) > QCOW2_MAX_BACKING_FILE_NAME) {
        return -EINVAL;
    }
    /* a raw data file is the whole disk: nothing may show through */
    if (backing_file && qcow2_data_file_is_raw(s)) {
        return -EINVAL;
    }
    s->image_backing_file = g_strdup(backing_file);
    s->image_backing_format = g_strdup(backing_fmt);
    ret = qcow2_update_header(bs);
    if (ret < 0) {
        g_free(s->image_backing_file);
        g_free(s->image_backing_format);
        s->image_backing_file = old_file;
        s->image_backing_format = old_fmt;
        return ret;
    }
    g_free(old_file);
    g_free(old_fmt);
    return 0;
}

static int coroutine_fn qcow2_change_backing_file_co(BlockDriverState *bs,
                                                     void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2BackingChange *c = opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = qcow2_change_backing_file_locked(bs, c->file, c->fmt);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

static int qcow2_change_backing_file(BlockDriverState *bs,
                                     const char *backing_file,
                                     const char *backing_fmt)
{
    Qcow2BackingChange c = { .file = backing_file, .fmt = backing_fmt };

    return bdrv_run_co(bs, qcow2_change_backing_file_co, &c);
}

/* ---------------------------------------------------------------------- */
/* Queries */

static int64_t qcow2_getlength(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    return s->virtual_size;
}

static int qcow2_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    BDRVQcow2State *s = bs->opaque;

    bdi->cluster_size = s->cluster_size;
    bdi->vm_state_offset = qcow2_vm_state_offset(s);
    bdi->is_dirty = s->incompatible_features & QCOW2_INCOMPAT_DIRTY;
    return 0;
}

/*
 * ImageInfoSpecific for qemu-img info and the monitor: the members of
 * "data" in QEMU's order (ties in QEMU's QDict order depend on it); the
 * human "Format specific information:" lines are rendered from them.
 */
static JsonNode *qcow2_get_specific_info(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    g_autoptr(JsonObject) data = json_object_new();
    g_autoptr(JsonObject) info = json_object_new();
    JsonNode *encrypt;

    json_object_set_string_member(data, "compat",
                                  s->qcow_version == 2 ? "0.10" : "1.1");
    json_object_set_string_member(data, "compression-type",
                                  s->compression_type ==
                                  QCOW2_COMPRESSION_TYPE_ZSTD ?
                                  "zstd" : "zlib");
    if (s->qcow_version != 2) {
        JsonArray *bitmaps = qcow2_get_bitmap_info_list(bs);

        json_object_set_boolean_member(data, "lazy-refcounts",
                                       !!(s->compatible_features &
                                       QCOW2_COMPAT_LAZY_REFCOUNTS));
        if (bitmaps) {
            json_object_set_array_member(data, "bitmaps", bitmaps);
        }
    }
    json_object_set_int_member(data, "refcount-bits", s->refcount_bits);
    encrypt = qcow2_crypt_get_info(bs);
    if (encrypt) {
        json_object_set_member(data, "encrypt", encrypt);
    }
    if (s->qcow_version != 2) {
        if (s->image_data_file) {
            json_object_set_string_member(data, "data-file",
                                          s->image_data_file);
        }
        if (s->incompatible_features & QCOW2_INCOMPAT_DATA_FILE) {
            json_object_set_boolean_member(data, "data-file-raw",
                                           qcow2_data_file_is_raw(s));
        }
        json_object_set_boolean_member(data, "corrupt",
                                       !!(s->incompatible_features &
                                       QCOW2_INCOMPAT_CORRUPT));
        json_object_set_boolean_member(data, "extended-l2",
                                       !!(s->incompatible_features &
                                       QCOW2_INCOMPAT_EXTL2));
    }
    json_object_set_string_member(info, "type", "qcow2");
    json_object_set_object_member(info, "data", json_object_ref(data));
    return json_node_init_object(json_node_alloc(), info);
}

static int coroutine_fn qcow2_co_check(BlockDriverState *bs,
                                       BdrvCheckResult *result,
                                       BdrvCheckMode fix)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = qcow2_check_snapshot_table(bs, result, fix);
    if (ret == 0) {
        ret = qcow2_check_refcounts(bs, result, fix);
    }
    if (ret == 0) {
        ret = qcow2_fix_snapshot_table(bs, result, fix);
    }
    if (ret == 0 && fix && !result->check_errors && !result->corruptions) {
        /* the refcounts are right now: neither bit applies any more */
        ret = qcow2_mark_clean(bs);
        if (ret == 0) {
            ret = qcow2_mark_consistent(bs);
        }
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

static void qcow2_refresh_limits(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    /* byte-granular: copy-on-write fills the rest of a cluster; LUKS
     * encrypts whole sectors (qcow2-crypt.c inv. 3) */
    bs->bl.request_alignment = s->crypto ? CRYPTO_LUKS_SECTOR_SIZE : 1;
    bs->bl.pwrite_zeroes_alignment = s->subcluster_size;
    bs->bl.pdiscard_alignment = s->cluster_size;
    bs->bl.opt_transfer = MAX(bs->bl.opt_transfer, s->cluster_size);
}

static const BlockDriver bdrv_qcow2 = {
    .format_name                    = "qcow2",
    .instance_size                  = sizeof(BDRVQcow2State),
    .is_format                      = true,
    .supports_backing               = true,
    .runtime_opts                   = &qapi_opts_qcow2_runtime,
    .mutable_opts                   = qcow2_mutable_opts,
    .bdrv_join_options              = qcow2_join_options,
    .create_opts                    = &qapi_opts_qcow2_create,
    .bdrv_probe                     = qcow2_probe,
    .bdrv_open                      = qcow2_open,
    .bdrv_close                     = qcow2_close,
    .bdrv_change_aio_context        = qcow2_change_aio_context,
    .bdrv_co_create_opts            = qcow2_co_create_opts,
    .bdrv_co_create_on_node         = qcow2_co_create_target,
    .bdrv_reopen_prepare            = qcow2_reopen_prepare,
    .bdrv_reopen_commit             = qcow2_reopen_commit,
    .bdrv_reopen_commit_post        = qcow2_reopen_commit_post,
    .bdrv_reopen_abort              = qcow2_reopen_abort,
    .bdrv_co_preadv                 = qcow2_co_preadv,
    .bdrv_co_pwritev                = qcow2_co_pwritev,
    .bdrv_co_pwritev_compressed     = qcow2_co_pwritev_compressed,
    .bdrv_co_pwrite_zeroes          = qcow2_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = qcow2_co_pdiscard,
    .bdrv_co_flush_to_os            = qcow2_co_flush_to_os,
    .bdrv_co_block_status           = qcow2_co_block_status,
    .bdrv_co_truncate               = qcow2_co_truncate,
    .bdrv_getlength                 = qcow2_getlength,
    .bdrv_refresh_limits            = qcow2_refresh_limits,
    .bdrv_get_info                  = qcow2_get_info,
    .bdrv_get_specific_info         = qcow2_get_specific_info,
    .bdrv_co_check                  = qcow2_co_check,
    .bdrv_change_backing_file       = qcow2_change_backing_file,
    .bdrv_make_empty                = qcow2_make_empty,
    .bdrv_measure                   = qcow2_measure,
    .bdrv_supports_persistent_dirty_bitmap =
        qcow2_supports_persistent_dirty_bitmap,
    .bdrv_can_store_new_dirty_bitmap = qcow2_can_store_new_dirty_bitmap,
    .bdrv_remove_persistent_dirty_bitmap =
        qcow2_remove_persistent_dirty_bitmap,
    .bdrv_co_mark_bitmaps_in_use    = qcow2_co_mark_bitmaps_in_use,
    .amend_opts                     = &qapi_opts_qcow2_amend,
    .bdrv_amend_options             = qcow2_amend_options,
    .bdrv_snapshot_create           = qcow2_snapshot_create,
    .bdrv_snapshot_goto             = qcow2_snapshot_goto,
    .bdrv_snapshot_delete           = qcow2_snapshot_delete,
    .bdrv_snapshot_list             = qcow2_snapshot_list,
    .bdrv_snapshot_load_tmp         = qcow2_snapshot_load_tmp,
    .bdrv_co_save_vmstate           = qcow2_co_save_vmstate,
    .bdrv_co_load_vmstate           = qcow2_co_load_vmstate,
    .supported_zero_flags           = BDRV_REQ_MAY_UNMAP |
                                      BDRV_REQ_NO_FALLBACK,
};

block_init(bdrv_register, bdrv_qcow2)
