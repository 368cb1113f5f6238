/*
 * Crash consistency of qcow2's persistent dirty bitmaps (block/qcow2-
 * bitmap.c), exhaustively: a power cut at every request of a session
 * that opens an image with a stored, clean bitmap, writes to it (writes,
 * zero writes, discards, rewrites of granules the bitmap has, flushes
 * between) and closes it, which stores the bitmaps.
 *
 * The session runs on a fresh copy of the image each time, its file under
 * a blkcrash node armed before the image is opened, so that the cut can
 * fall on the open, any write, the marking of the bitmaps in use before a
 * write that sets a new bit, the checkpoint of a flush or any step of the
 * store at close; for each request n from the first to one past the last,
 * and each cut mode (all unflushed writes lost; a random subset of them; a
 * random subset of their sectors).  Then the image must pass what every
 * crash case checks (crash-model.h: qemu-img check finds no corruption,
 * both tools open it, every sector holds a version it may hold), and its
 * bitmap must be either in use (inconsistent: the one safe way to say
 * "unknown") or consistent and mark every cluster the session wrote, and
 * every cluster a failed write of the session changed.  A consistent
 * bitmap that misses a changed cluster is the failure this test exists
 * for.  And the checkpoints must hold: a cut after a completed flush
 * finds the bitmap consistent unless a later request of the session
 * touched a granule the bitmap did not have at that flush.
 *
 * Leaks are allowed: the store frees the old directory, tables and data
 * after the header names the new ones (qcow2-bitmap.c invariant 2), and
 * the writes leak as in QEMU when cut between refcount and mapping.
 *
 * /bitmap-crash/rewrite counts requests: after a checkpoint, rewrites of
 * granules the bitmap has reach the file as their data writes alone.
 *
 * QBLOCK_CRASH_STRIDE=<k> cuts at every k-th request only.
 */
#include "crash-model.h"
#include "block/blkcrash.h"
#include "block/dirty-bitmap.h"

#define IMG_SIZE    (1 * MiB)
#define CLUSTER     (4 * KiB)

static const BlkcrashCut crash_modes[] = {
    BLKCRASH_CUT_ALL, BLKCRASH_CUT_RANDOM_WRITES, BLKCRASH_CUT_RANDOM_SECTORS,
};

#define NB_GRANULES (IMG_SIZE / CLUSTER)

/* The ranges the session touches, for the bitmap check. */
typedef struct BitmapRange {
    int64_t offset, bytes;
    bool completed;             /* the request returned success */
} BitmapRange;

typedef struct BitmapSession {
    CrashModel model;
    BlockBackend *blk;          /* NULL: only log into the model */
    GArray *touched;            /* BitmapRange, logged before the request */
    /* the granules the bitmap held at the last checkpoint */
    bool stored[NB_GRANULES];
    /* a request since then touched a granule outside @stored */
    bool new_bit;
} BitmapSession;

static void touch(BitmapSession *s, int64_t offset, int64_t bytes)
{
    BitmapRange r = { offset, bytes, false };

    g_array_append_val(s->touched, r);
    for (int64_t o = offset; o < offset + bytes; o += CLUSTER) {
        s->new_bit |= !s->stored[o / CLUSTER];
    }
}

static void touch_completed(BitmapSession *s)
{
    g_array_index(s->touched, BitmapRange, s->touched->len - 1).completed =
        true;
}

static bool step_write(BitmapSession *s, int64_t offset, int64_t bytes,
                       uint32_t seed)
{
    g_autofree uint8_t *buf = g_malloc(bytes);
    int ret = 0;

    crash_model_log(&s->model, offset, bytes, seed);
    touch(s, offset, bytes);
    crash_pattern(buf, bytes, offset / CRASH_SECTOR, seed);
    if (s->blk) {
        ret = blk_pwrite(s->blk, offset, bytes, buf, 0);
    }
    if (ret < 0) {
        return false;
    }
    crash_model_completed(&s->model, offset, bytes);
    touch_completed(s);
    return true;
}

static bool step_zero(BitmapSession *s, int64_t offset, int64_t bytes)
{
    int ret = 0;

    crash_model_log(&s->model, offset, bytes, 0);
    touch(s, offset, bytes);
    if (s->blk) {
        ret = blk_pwrite_zeroes(s->blk, offset, bytes, BDRV_REQ_MAY_UNMAP);
    }
    if (ret < 0) {
        return false;
    }
    crash_model_completed(&s->model, offset, bytes);
    touch_completed(s);
    return true;
}

static bool step_discard(BitmapSession *s, int64_t offset, int64_t bytes)
{
    crash_model_log(&s->model, offset, bytes, 0);
    touch(s, offset, bytes);
    if (s->blk && blk_pdiscard(s->blk, offset, bytes) < 0) {
        return false;
    }
    crash_model_completed(&s->model, offset, bytes);
    touch_completed(s);
    return true;
}

static bool step_flush(BitmapSession *s)
{
    if (s->blk && blk_flush(s->blk) < 0) {
        return false;
    }
    crash_model_flushed(&s->model);
    /* the flush checkpointed what the session touched (invariant 4) */
    for (guint i = 0; i < s->touched->len; i++) {
        BitmapRange *r = &g_array_index(s->touched, BitmapRange, i);

        for (int64_t o = r->offset; o < r->offset + r->bytes; o += CLUSTER) {
            s->stored[o / CLUSTER] = true;
        }
    }
    s->new_bit = false;
    return true;
}

/*
 * The guest's part of the session: new clusters, rewrites of granules the
 * last checkpoint stored (which must leave it standing), zeroes, a
 * discard.  The discard is flushed before anything allocates: qcow2 may
 * give its cluster to the next allocation at once, and a cut that lost
 * the discard's mapping update but kept the new data would show that
 * data at the discarded offset (as in QEMU); that is qcow2's discard, not
 * the bitmaps', and tests/crash/test-qcow2-crash covers discards.
 */
static bool session_writes(BitmapSession *s)
{
    return step_write(s, 8 * KiB, 4 * KiB, 10) &&
           step_write(s, 200 * KiB, 12 * KiB, 11) && step_flush(s) &&
           step_write(s, 8 * KiB, 4 * KiB, 14) &&
           step_write(s, 204 * KiB, 4 * KiB, 15) && step_flush(s) &&
           step_write(s, 0, 4 * KiB, 12) &&
           step_zero(s, 64 * KiB, 8 * KiB) && step_flush(s) &&
           step_write(s, 200 * KiB, 4 * KiB, 16) &&
           step_write(s, 900 * KiB, 4 * KiB, 13) &&
           step_discard(s, 16 * KiB, 8 * KiB);
}

/* Before the bitmap: data in the first 64 KiB. */
static void prepare_data(BitmapSession *s)
{
    g_assert_true(step_write(s, 0, 64 * KiB, 1));
}

static BlockBackend *open_qcow2(const char *path, int flags)
{
    QDict *opts = qdict_new();

    qdict_put_str(opts, "driver", "qcow2");
    qdict_put_str(opts, "discard", "unmap");
    return blk_new_open(path, NULL, opts, flags | BDRV_O_UNMAP,
                        &error_abort);
}

/* A clean stored bitmap "b0" over an image that has data already. */
static char *prepare_base(void)
{
    const BlockDriver *drv = bdrv_find_format("qcow2");
    QemuOptsList *list = qemu_opts_append(NULL, drv->create_opts);
    g_autofree char *spec = g_strdup_printf("size=%d,cluster_size=%d",
                                            (int)IMG_SIZE, (int)CLUSTER);
    QemuOpts *opts = qemu_opts_parse(list, spec, &error_abort);
    char *path = crash_tmp_path("bitmap-base");
    BitmapSession s = { .touched = g_array_new(false, false,
                                               sizeof(BitmapRange)) };

    g_assert_cmpint(bdrv_create(drv, path, opts, &error_abort), ==, 0);
    qemu_opts_del(opts);
    qemu_opts_free(list);
    s.blk = open_qcow2(path, BDRV_O_RDWR);
    crash_model_init(&s.model, IMG_SIZE);
    prepare_data(&s);
    g_assert_true(step_flush(&s));
    g_assert_nonnull(bdrv_dirty_bitmap_add(blk_bs(s.blk), "b0", CLUSTER,
                                           BDRV_BITMAP_ADD_PERSISTENT,
                                           &error_abort));
    blk_unref(s.blk);
    crash_model_destroy(&s.model);
    g_array_unref(s.touched);
    return path;
}

/* A blkcrash node "crash0" over the file at @path, not armed. */
static BlockDriverState *open_crash_node(const char *path)
{
    QDict *opts = qdict_new();

    qdict_put_str(opts, "driver", "blkcrash");
    qdict_put_str(opts, "node-name", "crash0");
    qdict_put_str(opts, "file.driver", "file");
    qdict_put_str(opts, "file.filename", path);
    return bdrv_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
}

/* Whether the cluster at @offset reads differently in @a and @b. */
static bool cluster_changed(BlockBackend *a, BlockBackend *b, int64_t offset)
{
    uint8_t buf_a[CLUSTER], buf_b[CLUSTER];

    g_assert_cmpint(blk_pread(a, offset, CLUSTER, buf_a, 0), ==, 0);
    g_assert_cmpint(blk_pread(b, offset, CLUSTER, buf_b, 0), ==, 0);
    return memcmp(buf_a, buf_b, CLUSTER) != 0;
}

/*
 * The bitmap of the image at @path after the cut: NULL if it is in use,
 * else a failure message if a cluster that a completed request touched,
 * or that a failed one changed from @base, is clean in it.
 */
static char *check_bitmap(const char *path, const char *base,
                          GArray *touched, bool *in_use)
{
    BlockBackend *blk = open_qcow2(path, 0);
    BlockBackend *orig = open_qcow2(base, 0);
    BdrvDirtyBitmap *b = bdrv_find_dirty_bitmap(blk_bs(blk), "b0");
    char *failure = NULL;

    *in_use = false;
    if (!b) {
        failure = g_strdup("bitmap b0 is gone");
    } else if (bdrv_dirty_bitmap_inconsistent(b)) {
        *in_use = true;
    } else {
        for (guint i = 0; !failure && i < touched->len; i++) {
            BitmapRange *r = &g_array_index(touched, BitmapRange, i);

            for (int64_t o = r->offset; o < r->offset + r->bytes;
                 o += CLUSTER) {
                if (!bdrv_dirty_bitmap_get(b, o) &&
                    (r->completed || cluster_changed(blk, orig, o))) {
                    failure = g_strdup_printf(
                        "bitmap b0 claims to be consistent but cluster at "
                        "%" PRId64 ", %s by the session, is clean", o,
                        r->completed ? "written" : "changed");
                    break;
                }
            }
        }
    }
    blk_unref(orig);
    blk_unref(blk);
    return failure;
}

typedef struct BitmapTally {
    int runs, in_use, consistent, failed;
    /* consistent after a cut between the open and the close: a
     * checkpoint stood */
    int consistent_open;
    /* cuts where no granule was new since the last checkpoint */
    int must_be_consistent;
} BitmapTally;

/*
 * One session on a copy of @base, the power going as request @cut_at
 * arrives (0: never).  Returns the requests it made; failures in @t.
 */
static uint64_t run_once(const char *base, uint64_t cut_at, BlkcrashCut mode,
                         BitmapTally *t, GString *where)
{
    g_autofree char *path = crash_copy_file(base);
    uint32_t seed = cut_at * ARRAY_SIZE(crash_modes) + mode;
    BitmapSession s = { .touched = g_array_new(false, false,
                                               sizeof(BitmapRange)) };
    QDict *opts;
    BlockDriverState *crash;
    Error *err = NULL;
    bool cut_while_open = false;
    uint64_t requests;
    CrashVerdict v;
    char *failure;
    bool in_use;

    crash_model_init(&s.model, IMG_SIZE);
    prepare_data(&s);
    crash_model_flushed(&s.model);
    g_array_set_size(s.touched, 0);
    s.new_bit = true;           /* the open marks it in use, as QEMU's */

    crash = open_crash_node(path);
    if (cut_at) {
        g_assert_cmpint(blkcrash_arm(crash, cut_at, mode, seed), ==, 0);
    }
    opts = qdict_new();
    qdict_put_str(opts, "driver", "qcow2");
    qdict_put_str(opts, "file", "crash0");
    qdict_put_str(opts, "discard", "unmap");
    s.blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR | BDRV_O_UNMAP, &err);
    if (s.blk) {
        blk_set_enable_write_cache(s.blk, true);
        if (!session_writes(&s)) {
            g_assert_true(blkcrash_is_dead(crash));
            cut_while_open = true;
        }
        /* the close stores the bitmaps: the cut may fall there too */
        blk_unref(s.blk);
    } else {
        /* the cut came during the open */
        g_assert_true(blkcrash_is_dead(crash));
        error_free(err);
    }
    requests = blkcrash_requests(crash);
    if (!blkcrash_is_dead(crash)) {
        g_assert_cmpint(blkcrash_power_cut(crash, mode, seed), >=, 0);
    }
    bdrv_unref(crash);

    t->runs++;
    v = crash_verify(path, &s.model, CRASH_ALLOW_LEAKS);
    failure = v.failure ? v.failure
                        : check_bitmap(path, base, s.touched, &in_use);
    if (!failure && in_use && !s.new_bit) {
        failure = g_strdup("bitmap b0 is in use, but no request since the "
                           "last checkpoint touched a granule it lacked");
    }
    t->must_be_consistent += !s.new_bit;
    if (!failure) {
        t->in_use += in_use;
        t->consistent += !in_use;
        t->consistent_open += !in_use && cut_while_open;
    } else {
        g_string_append_printf(where, " %" PRIu64 "/%d", cut_at, mode);
        if (t->failed++ < 3) {
            g_test_message("cut at request %" PRIu64 ", mode %d: %s", cut_at,
                           mode, failure);
        }
        g_free(failure);
    }
    crash_model_destroy(&s.model);
    g_array_unref(s.touched);
    unlink(path);
    return requests;
}

static bool skip_without_qemu_img(void)
{
    if (crash_have_qemu_img()) {
        return false;
    }
    g_test_skip("qemu-img (Debian's qemu-utils) is not installed: it is the "
                "oracle of these tests");
    return true;
}

static void test_bitmap_session(void)
{
    const char *s = g_getenv("QBLOCK_CRASH_STRIDE");
    int stride = s ? MAX(atoi(s), 1) : 1;
    g_autofree char *base = NULL;
    g_autoptr(GString) where = g_string_new("");
    BitmapTally whole = { 0 }, t = { 0 };
    uint64_t requests;

    if (skip_without_qemu_img()) {
        return;
    }
    base = prepare_base();
    /* without a cut the bitmap is stored clean, with every write in it */
    requests = run_once(base, 0, BLKCRASH_CUT_ALL, &whole, where);
    g_assert_cmpint(whole.failed, ==, 0);
    g_assert_cmpint(whole.consistent, ==, 1);
    for (uint64_t n = 1; n <= requests + 1; n += stride) {
        for (size_t m = 0; m < ARRAY_SIZE(crash_modes); m++) {
            run_once(base, n, crash_modes[m], &t, where);
        }
    }
    printf("# crash-matrix bitmap-session: %" PRIu64 " requests, %" PRIu64
           " cut points x %zu modes = %d runs, %d in use, %d consistent "
           "(%d of them cut while the image was open; %d had to be), "
           "%d failed\n",
           requests, (requests + stride) / stride, ARRAY_SIZE(crash_modes),
           t.runs, t.in_use, t.consistent, t.consistent_open,
           t.must_be_consistent, t.failed);
    /* the cuts fall on both sides of a store's commit */
    g_assert_cmpint(t.in_use, >, 0);
    g_assert_cmpint(t.consistent, >, 0);
    /* the flushes checkpoint: a crash before the close keeps the bitmap */
    g_assert_cmpint(t.consistent_open, >, 0);
    g_assert_cmpint(t.must_be_consistent, >, 0);
    if (t.failed) {
        printf("# bitmap-session failed at (request/mode):%s\n", where->str);
        g_test_fail();
    }
    unlink(base);
}

/* What the image's file holds now: a power cut that loses every unflushed
 * write, without one (blkcrash keeps those in memory). */
static bool snapshot_in_use(const char *path, GArray *touched)
{
    g_autofree char *copy = crash_copy_file(path);
    bool in_use;
    char *failure = check_bitmap(copy, copy, touched, &in_use);

    g_assert_null(failure);
    unlink(copy);
    return in_use;
}

/*
 * Rewrites of granules a checkpoint stored reach the file as their data
 * writes and nothing more; the first write to a new granule marks the
 * bitmap in use first (a directory write and a flush ahead of it).
 */
static void test_bitmap_rewrite(void)
{
    g_autofree char *base = NULL;
    g_autofree char *path = NULL;
    BitmapSession s = { .touched = g_array_new(false, false,
                                               sizeof(BitmapRange)) };
    QDict *opts;
    BlockDriverState *crash;
    uint64_t before;

    if (skip_without_qemu_img()) {
        return;
    }
    base = prepare_base();
    path = crash_copy_file(base);
    crash_model_init(&s.model, IMG_SIZE);
    crash = open_crash_node(path);
    opts = qdict_new();
    qdict_put_str(opts, "driver", "qcow2");
    qdict_put_str(opts, "file", "crash0");
    s.blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
    blk_set_enable_write_cache(s.blk, true);

    /* the open marks it in use, as QEMU's does; the first flush stores */
    g_assert_true(snapshot_in_use(path, s.touched));
    g_assert_true(step_write(&s, 8 * KiB, 4 * KiB, 2));
    g_assert_true(step_write(&s, 200 * KiB, 12 * KiB, 3));
    g_assert_true(step_flush(&s));
    g_assert_false(snapshot_in_use(path, s.touched));

    before = blkcrash_requests(crash);
    g_assert_true(step_write(&s, 8 * KiB, 4 * KiB, 4));
    g_assert_true(step_write(&s, 204 * KiB, 4 * KiB, 5));
    g_assert_true(step_write(&s, 200 * KiB, 8 * KiB, 6));
    /* three data writes to allocated clusters: three requests */
    g_assert_cmpint(blkcrash_requests(crash) - before, ==, 3);
    g_assert_false(snapshot_in_use(path, s.touched));

    before = blkcrash_requests(crash);
    g_assert_true(step_write(&s, 300 * KiB, 4 * KiB, 7));
    /* the directory read and written, a flush, then the data (and its
     * allocation, whose metadata waits in the caches for a flush) */
    g_assert_cmpint(blkcrash_requests(crash) - before, >=, 4);
    g_assert_true(snapshot_in_use(path, s.touched));
    g_assert_true(step_flush(&s));
    g_assert_false(snapshot_in_use(path, s.touched));

    blk_unref(s.blk);
    bdrv_unref(crash);
    crash_model_destroy(&s.model);
    g_array_unref(s.touched);
    unlink(path);
    unlink(base);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    g_test_add_func("/bitmap-crash/session", test_bitmap_session);
    g_test_add_func("/bitmap-crash/rewrite", test_bitmap_rewrite);
    return g_test_run();
}
