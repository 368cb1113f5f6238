/*
 * Crash consistency of every qcow2 metadata operation, exhaustively.
 *
 * Each operation below runs on a small image (512-byte or 4 KiB clusters,
 * so that one request crosses the boundary the case is named for) whose
 * file sits under a blkcrash node: a volatile write cache that the power
 * can cut.  The operation is first run whole, to count the requests that
 * reach the cache and to prove it did what its name says (a new L2 table,
 * a grown refcount table, ...).  Then, for every request n from the first
 * to one past the last, and for each cut mode (all unflushed writes lost;
 * a random subset of them; a random subset of their sectors), a fresh copy
 * of the image runs the operation with the power going as request n
 * arrives; whatever the operation has not done by then fails, and the
 * image is checked (crash-model.h): the real qemu-img check finds no
 * corruption, qemu-img info opens it, qblock opens it and reads its info
 * (what qblock-img info shows), and every sector
 * holds what was written to it before the last flush that completed, or
 * something written later.
 *
 * Leaks: QEMU orders its metadata writes so that a cut can leave a
 * cluster counted but unused, never used but uncounted.  Each case says
 * where QEMU's own ordering leaks (CrashOp.leaks); a case without that
 * reason must not leak at all.  Snapshot creation and deletion change a
 * refcount and the COPIED bits of the entries naming the cluster in two
 * writes; a cut between them leaves "ERROR OFLAG_COPIED" (repaired by
 * check -r all, no data at risk), and QEMU 7.2's own qemu-img snapshot -c
 * and -d leave it too when killed between the two (measured with
 * tests/crash/crashpoint.c): CrashOp.copied says so for these cases only.
 *
 * QBLOCK_CRASH_STRIDE=<k> cuts at every k-th request only (a quick run);
 * the default, 1, is the exhaustive matrix.  QBLOCK_CRASH_SHARD=<i>/<n>
 * runs only the i-th (0-based) of n equal runs of consecutive cut points,
 * so that processes running at once share a long matrix between them
 * (tests/crash/run.sh adds their crash-matrix lines up); consecutive,
 * since neighbouring cuts often leave the same image, which a process
 * has qemu-img check only once (crash-model.c).
 */
#include "crash-model.h"
#include "block/blkcrash.h"
#include "block/snapshot.h"
#include "util/qemu-option.h"

/* One image (or model) the operation works on. */
typedef struct CrashRun {
    CrashModel model;
    BlockBackend *blk;          /* NULL: only log into the model */
} CrashRun;

typedef struct CrashOp {
    const char *name;
    const char *create;         /* qcow2 creation options */
    int64_t size;
    /* Before the cut, unrecorded: leaves the image as the case needs it.
     * Also run on the model alone (CrashRun.blk NULL). */
    void (*prepare)(CrashRun *r);
    /* The operation; false as soon as a step fails (the power went). */
    bool (*run)(CrashRun *r);
    /* Asserts on a whole run's image that the operation did its job. */
    void (*did)(const CrashHeader *before, const CrashHeader *after);
    /* Why QEMU's ordering may leak clusters here; NULL: no leak allowed. */
    const char *leaks;
    /* Why it may leave OFLAG_COPIED mismatches; NULL: none allowed. */
    const char *copied;
} CrashOp;

static const BlkcrashCut crash_modes[] = {
    BLKCRASH_CUT_ALL, BLKCRASH_CUT_RANDOM_WRITES, BLKCRASH_CUT_RANDOM_SECTORS,
};

/* ---- steps: a request, logged in the model (crash-model.h inv. 1, 2) */

static bool step_done(CrashRun *r, int ret, int64_t offset, int64_t bytes)
{
    if (ret < 0) {
        return false;
    }
    crash_model_completed(&r->model, offset, bytes);
    return true;
}

static bool step_write(CrashRun *r, int64_t offset, int64_t bytes,
                       uint32_t seed)
{
    g_autofree uint8_t *buf = g_malloc(bytes);

    crash_model_log(&r->model, offset, bytes, seed);
    crash_pattern(buf, bytes, offset / CRASH_SECTOR, seed);
    return step_done(r, r->blk ? blk_pwrite(r->blk, offset, bytes, buf, 0)
                     : 0, offset, bytes);
}

static bool step_compressed(CrashRun *r, int64_t offset, int64_t bytes,
                            uint32_t seed)
{
    g_autofree uint8_t *buf = g_malloc(bytes);

    crash_model_log(&r->model, offset, bytes, seed);
    crash_pattern(buf, bytes, offset / CRASH_SECTOR, seed);
    return step_done(r, r->blk ? blk_pwrite_compressed(r->blk, offset, bytes,
                                                       buf) : 0,
                     offset, bytes);
}

static bool step_zero(CrashRun *r, int64_t offset, int64_t bytes,
                      BdrvRequestFlags flags)
{
    crash_model_log(&r->model, offset, bytes, 0);
    return step_done(r, r->blk ? blk_pwrite_zeroes(r->blk, offset, bytes,
                                                    flags) : 0,
                     offset, bytes);
}

/* Only whole clusters: a partial one keeps its data, as in QEMU. */
static bool step_discard(CrashRun *r, int64_t offset, int64_t bytes)
{
    crash_model_log(&r->model, offset, bytes, 0);
    return step_done(r, r->blk ? blk_pdiscard(r->blk, offset, bytes) : 0,
                     offset, bytes);
}

static bool step_flush(CrashRun *r)
{
    if (r->blk && blk_flush(r->blk) < 0) {
        return false;
    }
    crash_model_flushed(&r->model);
    return true;
}

static bool step_truncate(CrashRun *r, int64_t size)
{
    if (size < r->model.len_completed) {
        crash_model_may_shrink(&r->model, size);
    }
    if (r->blk && blk_truncate(r->blk, size, true, PREALLOC_MODE_OFF, 0,
                               NULL) < 0) {
        return false;
    }
    r->model.len_completed = size;
    return true;
}

static bool step_snapshot_create(CrashRun *r, const char *name)
{
    QEMUSnapshotInfo sn = { 0 };

    if (!r->blk) {
        return true;
    }
    g_strlcpy(sn.name, name, sizeof(sn.name));
    sn.icount = QEMU_SNAPSHOT_NO_ICOUNT;
    return bdrv_snapshot_create(blk_bs(r->blk), &sn) == 0;
}

static void crash_amend_status(BlockDriverState *bs, int64_t done,
                               int64_t total, void *opaque)
{
}

/* What qblock-img amend does with -o @options. */
static bool step_amend(CrashRun *r, const char *options)
{
    BlockDriverState *bs = blk_bs(r->blk);
    QemuOpts *opts = qemu_opts_parse(bs->drv->amend_opts, options,
                                     &error_abort);
    int ret = bs->drv->bdrv_amend_options(bs, opts, crash_amend_status, NULL,
                                          false, NULL);

    qemu_opts_del(opts);
    return ret == 0;
}

/* ---- the operations ---- */


/* Data at the start of the disk, so that an L2 table exists. */
static void prepare_first_cluster(CrashRun *r)
{
    g_assert_true(step_write(r, 0, 4 * KiB, 1));
}

/* Fills [0, @bytes) with data, 64 KiB a request. */
static void prepare_fill(CrashRun *r, int64_t bytes)
{
    for (int64_t off = 0; off < bytes; off += 64 * KiB) {
        g_assert_true(step_write(r, off, MIN(64 * KiB, bytes - off),
                                 off / (64 * KiB) + 1));
    }
}

static void prepare_fill_64k(CrashRun *r)
{
    prepare_fill(r, 64 * KiB);
}

/* Overwrites in place: no metadata changes, so nothing may leak. */
static bool run_overwrite(CrashRun *r)
{
    return step_write(r, 0, 2 * KiB, 10) &&
           step_write(r, 1 * KiB, 2 * KiB, 11) && step_flush(r) &&
           step_write(r, 2 * KiB, 1 * KiB, 12);
}

/* New clusters in an existing L2 table, partial ones (copy-on-write). */
static bool run_alloc_write(CrashRun *r)
{
    return step_write(r, 8 * KiB + 512, 1 * KiB, 10) &&
           step_write(r, 14 * KiB, 6 * KiB, 11) && step_flush(r) &&
           step_write(r, 8 * KiB, 4 * KiB, 12) &&
           step_write(r, 32 * KiB, 512, 13) && step_flush(r) &&
           step_write(r, 40 * KiB, 4 * KiB, 14);
}

static void did_alloc_write(const CrashHeader *b, const CrashHeader *a)
{
    g_assert_cmpint(a->l1_used, ==, b->l1_used);
}

/* With 512-byte clusters an L2 table maps 32 KiB. */
static bool run_l2_alloc(CrashRun *r)
{
    return step_write(r, 64 * KiB, 1 * KiB, 10) &&
           step_write(r, 96 * KiB + 512, 32 * KiB, 11) && step_flush(r) &&
           step_write(r, 200 * KiB, 512, 12);
}

static void did_l2_alloc(const CrashHeader *b, const CrashHeader *a)
{
    g_assert_cmpint(a->l1_used, ==, b->l1_used + 4);
}

/* 1 MiB needs 32 L1 entries, 4 MiB 128: the table moves. */
static bool run_l1_grow(CrashRun *r)
{
    return step_truncate(r, 4 * MiB) && step_write(r, 3 * MiB, 1 * KiB, 10) &&
           step_flush(r);
}

static void did_l1_grow(const CrashHeader *b, const CrashHeader *a)
{
    g_assert_cmpuint(a->l1_size, >, b->l1_size);
    g_assert_cmpuint(a->l1_table_offset, !=, b->l1_table_offset);
    g_assert_cmpuint(a->size, ==, 4 * MiB);
}

/* 1000 KiB and 1 MiB both need 32 L1 entries: only the size changes. */
static bool run_resize_grow(CrashRun *r)
{
    return step_truncate(r, 1 * MiB) && step_flush(r) &&
           step_write(r, 1000 * KiB, 24 * KiB, 10) && step_flush(r);
}

static void did_resize_grow(const CrashHeader *b, const CrashHeader *a)
{
    g_assert_cmpuint(a->l1_table_offset, ==, b->l1_table_offset);
    g_assert_cmpuint(a->size, ==, 1 * MiB);
}

static void prepare_spread(CrashRun *r)
{
    g_assert_true(step_write(r, 0, 8 * KiB, 1));
    g_assert_true(step_write(r, 600 * KiB, 40 * KiB, 2));
    g_assert_true(step_write(r, 960 * KiB, 64 * KiB, 3));
}

/* A shrink to @size, then a write into what is left. */
static bool shrink_then_write(CrashRun *r, int64_t size)
{
    return step_truncate(r, size) && step_flush(r) &&
           step_write(r, 4 * KiB, 8 * KiB, 10);
}

static bool run_resize_shrink(CrashRun *r)
{
    return shrink_then_write(r, 512 * KiB);
}

static void did_resize_shrink(const CrashHeader *b, const CrashHeader *a)
{
    g_assert_cmpuint(a->size, ==, 512 * KiB);
    g_assert_cmpint(a->l1_used, <, b->l1_used);
}

/*
 * 512-byte clusters, 64-bit refcounts: a refcount block covers 32 KiB of
 * the file, so that the shrink leaves blocks describing nothing but
 * themselves, which it takes out of the refcount table and frees.
 */
static void prepare_fill_128k(CrashRun *r)
{
    prepare_fill(r, 128 * KiB);
}

static bool run_shrink_refblocks(CrashRun *r)
{
    return shrink_then_write(r, 32 * KiB);
}

static void did_shrink_refblocks(const CrashHeader *b, const CrashHeader *a)
{
    g_assert_cmpuint(a->size, ==, 32 * KiB);
    g_assert_cmpint(a->reftable_used, <, b->reftable_used);
}

/*
 * 512-byte clusters, 16-bit refcounts: a refcount block covers 128 KiB of
 * the file; 112 KiB of data (and its L2 tables) nearly fills the first.
 */
static void prepare_refblock(CrashRun *r)
{
    prepare_fill(r, 112 * KiB);
}

static bool run_refblock_grow(CrashRun *r)
{
    return step_write(r, 128 * KiB, 32 * KiB, 10) && step_flush(r) &&
           step_write(r, 160 * KiB, 4 * KiB, 11);
}

static void did_refblock_grow(const CrashHeader *b, const CrashHeader *a)
{
    g_assert_cmpint(a->reftable_used, >, b->reftable_used);
}

/*
 * 512-byte clusters, 64-bit refcounts: a refcount block covers 32 KiB, the
 * one-cluster refcount table 2 MiB of the file; 1920 KiB of data with its
 * L2 tables and refcount blocks nearly fills it.
 */
static void prepare_reftable(CrashRun *r)
{
    prepare_fill(r, 1920 * KiB);
}

static bool run_reftable_grow(CrashRun *r)
{
    return step_write(r, 1920 * KiB, 128 * KiB, 10) && step_flush(r) &&
           step_write(r, 2048 * KiB, 4 * KiB, 11);
}

static void did_reftable_grow(const CrashHeader *b, const CrashHeader *a)
{
    g_assert_cmpuint(a->refcount_table_clusters, >,
                     b->refcount_table_clusters);
    g_assert_cmpuint(a->refcount_table_offset, !=, b->refcount_table_offset);
}

static bool run_discard(CrashRun *r)
{
    return step_discard(r, 8 * KiB, 16 * KiB) && step_flush(r) &&
           step_discard(r, 40 * KiB, 4 * KiB) &&
           step_write(r, 8 * KiB, 4 * KiB, 10) && step_flush(r) &&
           step_discard(r, 48 * KiB, 8 * KiB);
}

static bool run_zero_write(CrashRun *r)
{
    return step_zero(r, 8 * KiB, 8 * KiB, 0) &&
           step_zero(r, 24 * KiB, 8 * KiB, BDRV_REQ_MAY_UNMAP) &&
           step_zero(r, 128 * KiB, 8 * KiB, 0) &&
           step_zero(r, 40 * KiB + 512, 1 * KiB, 0) && step_flush(r) &&
           step_write(r, 8 * KiB, 4 * KiB, 10) &&
           step_zero(r, 48 * KiB, 4 * KiB, BDRV_REQ_MAY_UNMAP);
}

/* Whole 4 KiB clusters of the pattern, which compresses well. */
static bool run_compressed(CrashRun *r)
{
    return step_compressed(r, 8 * KiB, 4 * KiB, 10) &&
           step_compressed(r, 0, 4 * KiB, 11) && step_flush(r) &&
           step_compressed(r, 16 * KiB, 4 * KiB, 12) &&
           step_compressed(r, 8 * KiB, 4 * KiB, 13) && step_flush(r) &&
           step_compressed(r, 24 * KiB, 4 * KiB, 14);
}

static bool run_snapshot_create(CrashRun *r)
{
    return step_snapshot_create(r, "s1") && step_flush(r) &&
           step_write(r, 0, 4 * KiB, 10) && step_flush(r);
}

static void did_snapshot_create(const CrashHeader *b, const CrashHeader *a)
{
    g_assert_cmpuint(a->nb_snapshots, ==, b->nb_snapshots + 1);
}

/* Version 1 in the snapshot, then 2 over part of it. */
static void prepare_snapshot(CrashRun *r)
{
    prepare_fill_64k(r);
    g_assert_true(step_snapshot_create(r, "s1"));
    g_assert_true(step_write(r, 16 * KiB, 16 * KiB, 2));
    g_assert_true(step_write(r, 128 * KiB, 8 * KiB, 3));
}

/* The active disk becomes the snapshot's: version 1 again, and zeroes. */
static bool run_snapshot_apply(CrashRun *r)
{
    crash_model_log(&r->model, 16 * KiB, 16 * KiB, 1);
    crash_model_log(&r->model, 128 * KiB, 8 * KiB, 0);
    if (bdrv_snapshot_goto(blk_bs(r->blk), "s1", NULL) < 0) {
        return false;
    }
    crash_model_completed(&r->model, 16 * KiB, 16 * KiB);
    crash_model_completed(&r->model, 128 * KiB, 8 * KiB);
    return step_flush(r) && step_write(r, 0, 4 * KiB, 10) && step_flush(r);
}

static bool run_snapshot_delete(CrashRun *r)
{
    return bdrv_snapshot_delete(blk_bs(r->blk), NULL, "s1", NULL) == 0 &&
           step_flush(r) && step_write(r, 16 * KiB, 4 * KiB, 10) &&
           step_flush(r);
}

static void did_snapshot_delete(const CrashHeader *b, const CrashHeader *a)
{
    g_assert_cmpuint(a->nb_snapshots, ==, b->nb_snapshots - 1);
}

static bool run_amend_refcount_bits(CrashRun *r)
{
    return step_amend(r, "refcount_bits=64") && step_flush(r);
}

static void did_amend_refcount_bits(const CrashHeader *b,
                                    const CrashHeader *a)
{
    g_assert_cmpuint(b->refcount_order, ==, 4);
    g_assert_cmpuint(a->refcount_order, ==, 6);
}

/* Zero clusters, which compat=0.10 cannot express, over data and holes. */
static void prepare_zero_clusters(CrashRun *r)
{
    prepare_fill_64k(r);
    g_assert_true(step_zero(r, 8 * KiB, 8 * KiB, 0));
    g_assert_true(step_zero(r, 128 * KiB, 8 * KiB, 0));
}

static bool run_amend_compat(CrashRun *r)
{
    return step_amend(r, "compat=0.10") && step_flush(r);
}

static void did_amend_compat(const CrashHeader *b, const CrashHeader *a)
{
    g_assert_cmpuint(b->version, ==, 3);
    g_assert_cmpuint(a->version, ==, 2);
}

#define C512    "cluster_size=512"
#define C4K     "cluster_size=4096"
#define ALLOC_LEAK \
    "QEMU raises a new cluster's refcount before the L2 entry that uses " \
    "it reaches the disk (the refcount cache is flushed first)"
#define FREE_LEAK \
    "QEMU drops a mapping before the refcount of the cluster it named " \
    "(the L2 cache is flushed before the refcount decrement)"

static const CrashOp crash_ops[] = {
    { "overwrite", C4K, 1 * MiB, prepare_fill_64k, run_overwrite, NULL,
      NULL },
    { "alloc-write", C4K, 1 * MiB, prepare_first_cluster, run_alloc_write,
      did_alloc_write, ALLOC_LEAK },
    { "l2-alloc", C512, 1 * MiB, prepare_first_cluster, run_l2_alloc,
      did_l2_alloc, ALLOC_LEAK },
    { "l1-grow", C512, 1 * MiB, prepare_first_cluster, run_l1_grow,
      did_l1_grow, ALLOC_LEAK "; the new L1 table is counted before the "
      "header names it, the old one freed after" },
    { "refblock-grow", C512 ",refcount_bits=16", 1 * MiB, prepare_refblock,
      run_refblock_grow, did_refblock_grow, ALLOC_LEAK },
    { "reftable-grow", C512 ",refcount_bits=64", 4 * MiB, prepare_reftable,
      run_reftable_grow, did_reftable_grow, ALLOC_LEAK "; the old "
      "refcount table is freed after the header names the new one" },
    { "discard", C4K, 1 * MiB, prepare_fill_64k, run_discard, NULL,
      FREE_LEAK },
    { "zero-write", C4K, 1 * MiB, prepare_fill_64k, run_zero_write, NULL,
      FREE_LEAK "; a partial-cluster zero write allocates like a write" },
    { "compressed-write", C4K, 1 * MiB, prepare_first_cluster,
      run_compressed, NULL, ALLOC_LEAK "; an overwritten cluster is freed "
      "after the new mapping" },
    { "snapshot-create", C4K, 1 * MiB, prepare_fill_64k, run_snapshot_create,
      did_snapshot_create, "QEMU raises the refcounts of the clusters a "
      "snapshot shares before the snapshot table names it",
      "QEMU raises the refcounts before it clears the COPIED bits" },
    { "snapshot-apply", C4K, 1 * MiB, prepare_snapshot, run_snapshot_apply,
      NULL, "QEMU raises the refcounts of the snapshot's clusters before it "
      "writes the active L1 table, and drops the old ones after" },
    { "snapshot-delete", C4K, 1 * MiB, prepare_snapshot, run_snapshot_delete,
      did_snapshot_delete, "QEMU removes the snapshot from the table before "
      "it drops the refcounts of its clusters",
      "QEMU drops the refcounts to 1 before it sets the COPIED bits" },
    { "resize-grow", C512, 1000 * KiB, prepare_first_cluster, run_resize_grow,
      did_resize_grow, ALLOC_LEAK },
    { "resize-shrink", C512, 1 * MiB, prepare_spread, run_resize_shrink,
      did_resize_shrink, FREE_LEAK },
    { "resize-shrink-refblocks", C512 ",refcount_bits=64", 128 * KiB,
      prepare_fill_128k, run_shrink_refblocks, did_shrink_refblocks,
      FREE_LEAK "; an unused refcount block leaves the refcount table "
      "before it is freed" },
    { "amend-refcount-bits", C4K ",refcount_bits=16", 1 * MiB,
      prepare_fill_64k, run_amend_refcount_bits, did_amend_refcount_bits,
      "QEMU writes the new refcount structure before the header names it "
      "and frees the old one after" },
    { "amend-compat-0.10", C4K, 1 * MiB, prepare_zero_clusters,
      run_amend_compat, did_amend_compat, ALLOC_LEAK "; zero clusters are "
      "expanded into allocated ones" },
};

/* ---- the sweep ---- */

/* Counts over one operation's sweep, for the report. */
typedef struct CrashTally {
    uint64_t requests;
    int runs;
    int leaked;
    int copied;
    int failed;
} CrashTally;

static char *crash_create(const CrashOp *op)
{
    const BlockDriver *drv = bdrv_find_format("qcow2");
    QemuOptsList *list = qemu_opts_append(NULL, drv->create_opts);
    g_autofree char *spec = g_strdup_printf("size=%" PRId64 ",%s", op->size,
                                            op->create);
    QemuOpts *opts = qemu_opts_parse(list, spec, &error_abort);
    char *path = crash_tmp_path("base");

    g_assert_cmpint(bdrv_create(drv, path, opts, &error_abort), ==, 0);
    qemu_opts_del(opts);
    qemu_opts_free(list);
    return path;
}

static BlockBackend *crash_open(const char *path, bool with_cache)
{
    QDict *opts = qdict_new();
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "qcow2");
    if (with_cache) {
        qdict_put_str(opts, "file.driver", "blkcrash");
        qdict_put_str(opts, "file.file.driver", "file");
        qdict_put_str(opts, "file.file.filename", path);
    }
    blk = blk_new_open(with_cache ? NULL : path, NULL, opts,
                       BDRV_O_RDWR | BDRV_O_RESIZE | BDRV_O_UNMAP,
                       &error_abort);
    blk_set_enable_write_cache(blk, true);
    return blk;
}

/* The image the operation starts from, prepared without a cut. */
static char *crash_prepare(const CrashOp *op)
{
    char *path = crash_create(op);
    CrashRun r = { .blk = crash_open(path, false) };

    crash_model_init(&r.model, op->size);
    op->prepare(&r);
    g_assert_true(step_flush(&r));
    blk_unref(r.blk);
    crash_model_destroy(&r.model);
    return path;
}

/*
 * One run on a copy of @base: the power goes as request @cut_at arrives
 * (0: after the whole operation).  Returns the requests the operation
 * made; the verdict of the image in *@v.
 */
static uint64_t crash_run_once(const CrashOp *op, const char *base,
                               uint64_t cut_at, BlkcrashCut mode,
                               CrashHeader *after, CrashVerdict *v)
{
    g_autofree char *path = crash_copy_file(base);
    uint32_t seed = cut_at * ARRAY_SIZE(crash_modes) + mode;
    CrashRun r = { 0 };
    BlockDriverState *crash;
    uint64_t start;

    crash_model_init(&r.model, op->size);
    op->prepare(&r);
    crash_model_flushed(&r.model);
    r.blk = crash_open(path, true);
    crash = blkcrash_find(blk_bs(r.blk));
    start = blkcrash_requests(crash);
    if (cut_at) {
        g_assert_cmpint(blkcrash_arm(crash, start + cut_at, mode, seed), ==,
                        0);
    }
    if (!op->run(&r)) {
        g_assert_true(blkcrash_is_dead(crash));
    }
    start = blkcrash_requests(crash) - start;
    if (!blkcrash_is_dead(crash)) {
        /* the power goes before the image is closed, which would flush */
        g_assert_cmpint(blkcrash_power_cut(crash, mode, seed), >=, 0);
    }
    blk_unref(r.blk);
    *v = crash_verify(path, &r.model,
                      (op->leaks ? CRASH_ALLOW_LEAKS : 0) |
                      (op->copied ? CRASH_ALLOW_COPIED : 0));
    if (after) {
        crash_read_header(path, after);
    }
    crash_model_destroy(&r.model);
    unlink(path);
    return start;
}

static int crash_stride(void)
{
    const char *s = g_getenv("QBLOCK_CRASH_STRIDE");

    return s ? MAX(atoi(s), 1) : 1;
}

/* QBLOCK_CRASH_SHARD=<i>/<n>: this process's share of the cut points. */
static void crash_shard(int *index, int *count)
{
    const char *s = g_getenv("QBLOCK_CRASH_SHARD");

    *index = 0;
    *count = 1;
    if (s && (sscanf(s, "%d/%d", index, count) != 2 || *count < 1 ||
              *index < 0 || *index >= *count)) {
        g_error("QBLOCK_CRASH_SHARD=%s: expected <i>/<n> with 0 <= i < n",
                s);
    }
}

static void crash_test_op(gconstpointer data)
{
    const CrashOp *op = data;
    g_autofree char *base = NULL;
    CrashTally t = { 0 };
    g_autoptr(GString) where = g_string_new("");
    CrashHeader before, after;
    CrashVerdict v;
    int stride = crash_stride();
    int shard, shards;
    g_autofree char *label = NULL;
    uint64_t cuts = 0, points, first, end;

    if (!crash_have_qemu_img()) {
        g_test_skip("qemu-img (Debian's qemu-utils) is not installed: it is "
                    "the oracle of these tests");
        return;
    }
    base = crash_prepare(op);
    crash_read_header(base, &before);
    t.requests = crash_run_once(op, base, 0, BLKCRASH_CUT_ALL, &after, &v);
    if (v.failure) {
        g_error("%s without a cut: %s", op->name, v.failure);
    }
    if (op->did) {
        op->did(&before, &after);
    }
    crash_shard(&shard, &shards);
    /* cut points 1, 1 + stride, ... up to one past the last request:
     * this shard's are the indices [first, end) */
    points = t.requests / stride + 1;
    first = points * shard / shards;
    end = points * (shard + 1) / shards;
    for (uint64_t n = 1 + first * stride; n < 1 + end * stride; n += stride) {
        cuts++;
        for (size_t m = 0; m < ARRAY_SIZE(crash_modes); m++) {
            crash_run_once(op, base, n, crash_modes[m], NULL, &v);
            t.runs++;
            t.leaked += v.leaked;
            t.copied += v.copied;
            if (v.failure) {
                g_string_append_printf(where, " %" PRIu64 "/%d", n,
                                       crash_modes[m]);
                if (t.failed++ < 3) {
                    g_test_message("%s, cut at request %" PRIu64 " of %"
                                   PRIu64 ", mode %d: %s", op->name, n,
                                   t.requests, crash_modes[m], v.failure);
                }
                g_free(v.failure);
            }
        }
    }
    /* one line per operation, the figures docs/reliability.md shows */
    label = shards > 1 ? g_strdup_printf("%s [shard %d/%d]", op->name, shard,
                                         shards)
                       : g_strdup(op->name);
    printf("# crash-matrix %s: %" PRIu64 " requests, %" PRIu64 " cut points"
           " x %zu modes = %d runs, %d leaked, %d OFLAG_COPIED, %d failed\n",
           label, t.requests, cuts, ARRAY_SIZE(crash_modes), t.runs,
           t.leaked, t.copied, t.failed);
    if (t.failed) {
        printf("# %s failed at (request/mode):%s\n", op->name, where->str);
        g_test_fail();
    }
    unlink(base);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    for (size_t i = 0; i < ARRAY_SIZE(crash_ops); i++) {
        g_autofree char *name = g_strdup_printf("/qcow2-crash/%s",
                                                crash_ops[i].name);

        g_test_add_data_func(name, &crash_ops[i], crash_test_op);
    }
    return g_test_run();
}
