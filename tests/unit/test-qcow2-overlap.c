/*
 * block/qcow2-overlap.c over real qcow2 images made by the driver: which
 * ranges each structure covers, that the index follows L2 and refcount
 * block allocation, that a hit emits BLOCK_IMAGE_CORRUPTED once with its
 * data and leaves the file untouched, and that the cost of a check does
 * not grow with the number of indexed structures.
 */
#include "block/qcow2.h"
#include "qblock/block-backend.h"
#include "util/qapi-event.h"
#include "util/qdict.h"
#include "block/snapshot.h"

#include <glib/gstdio.h>

static char *test_dir;

static char *make_image(const char *name, const char *cluster_size)
{
    char *path = g_build_filename(test_dir, name, NULL);
    const BlockDriver *drv = bdrv_find_format("qcow2");
    QemuOpts *o = qemu_opts_create(drv->create_opts);

    qemu_opt_set(o, "size", "64M", &error_abort);
    qemu_opt_set(o, "cluster_size", cluster_size, &error_abort);
    g_assert_cmpint(bdrv_create(drv, path, o, &error_abort), ==, 0);
    qemu_opts_del(o);
    return path;
}

static BlockBackend *open_image_flags(const char *path, const char *overlap,
                                     int flags)
{
    QDict *opts = qdict_new();
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "qcow2");
    if (overlap) {
        qdict_put_str(opts, "overlap-check", overlap);
    }
    blk = blk_new_open(path, NULL, opts, flags, &error_abort);
    g_assert_nonnull(blk);
    return blk;
}

static BlockBackend *open_image(const char *path, const char *overlap)
{
    return open_image_flags(path, overlap, BDRV_O_RDWR);
}

static BDRVQcow2State *state_of(BlockBackend *blk)
{
    return blk_bs(blk)->opaque;
}

static void write_pattern(BlockBackend *blk, int64_t offset, int64_t bytes)
{
    g_autofree uint8_t *buf = g_malloc(bytes);

    memset(buf, 0xa5, bytes);
    g_assert_cmpint(blk_pwrite(blk, offset, bytes, buf, 0), ==, 0);
}

static int check(BlockBackend *blk, int ign, int64_t offset, int64_t size)
{
    return qcow2_check_metadata_overlap(blk_bs(blk), ign, offset, size);
}

typedef struct PreWriteCheck {
    int64_t offset;
    int64_t size;
} PreWriteCheck;

static int coroutine_fn pre_write_check_co(BlockDriverState *bs, void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    PreWriteCheck *c = opaque;
    int ret;

    /* the write path's check runs under s->lock (qcow2.h invariant 7) */
    qemu_co_mutex_lock(&s->lock);
    ret = qcow2_pre_write_overlap_check(bs, 0, c->offset, c->size);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/* qcow2_pre_write_overlap_check() as a metadata write calls it. */
static int pre_write_check(BlockBackend *blk, int64_t offset, int64_t size)
{
    PreWriteCheck c = { .offset = offset, .size = size };

    return bdrv_run_co(blk_bs(blk), pre_write_check_co, &c);
}

/* Each single-range structure is found at its bytes and only there. */
static void test_single_ranges(void)
{
    g_autofree char *path = make_image("single.qcow2", "64k");
    BlockBackend *blk = open_image(path, "all");
    BDRVQcow2State *s = state_of(blk);
    int64_t l1 = s->l1_table_offset, rt = s->refcount_table_offset;

    g_assert_cmpint(check(blk, 0, 0, 1), ==, QCOW2_OL_MAIN_HEADER);
    g_assert_cmpint(check(blk, 0, 65535, 1), ==, QCOW2_OL_MAIN_HEADER);
    g_assert_cmpint(check(blk, QCOW2_OL_MAIN_HEADER, 0, 512), ==, 0);
    g_assert_cmpint(check(blk, 0, l1, 8), ==, QCOW2_OL_ACTIVE_L1);
    g_assert_cmpint(check(blk, QCOW2_OL_ACTIVE_L1, l1, 8), ==, 0);
    g_assert_cmpint(check(blk, 0, rt, 8), ==, QCOW2_OL_REFCOUNT_TABLE);
    /* the first byte after each table is free */
    g_assert_cmpint(check(blk, 0, l1 + s->l1_size * 8, 512), ==, 0);
    g_assert_cmpint(check(blk, 0, 0, 0), ==, 0);
    /*
     * A write across several names the first in QEMU's order: the header,
     * the active L1 table, then the refcount table (which lies before the
     * L1 table in the file).
     */
    g_assert_cmpint(rt, <, l1);
    g_assert_cmpint(check(blk, 0, 0, l1 + 8), ==, QCOW2_OL_MAIN_HEADER);
    g_assert_cmpint(check(blk, QCOW2_OL_MAIN_HEADER, 0, l1 + 8), ==,
                    QCOW2_OL_ACTIVE_L1);
    g_assert_cmpint(check(blk, QCOW2_OL_MAIN_HEADER | QCOW2_OL_ACTIVE_L1, 0,
                          l1 + 8), ==, QCOW2_OL_REFCOUNT_TABLE);
    blk_unref(blk);
}

/* The bitmap directory is checked while the bitmaps are valid. */
static void test_bitmap_directory(void)
{
    g_autofree char *path = make_image("bitmaps.qcow2", "64k");
    BlockBackend *blk = open_image(path, "constant");
    BDRVQcow2State *s = state_of(blk);

    s->bitmap_directory_offset = 10 * 65536;
    s->bitmap_directory_size = 100;
    g_assert_cmpint(check(blk, 0, 10 * 65536 + 99, 1), ==,
                    QCOW2_OL_BITMAP_DIRECTORY);
    g_assert_cmpint(check(blk, 0, 10 * 65536 + 100, 1), ==, 0);
    s->overlap_check &= ~QCOW2_OL_BITMAP_DIRECTORY;
    g_assert_cmpint(check(blk, 0, 10 * 65536, 1), ==, 0);
    s->bitmap_directory_size = 0;
    blk_unref(blk);
}

static int l2_cluster_of(BDRVQcow2State *s, int64_t guest)
{
    return (s->l1_table[guest >> (s->cluster_bits + s->l2_bits)] &
            L1E_OFFSET_MASK) >> s->cluster_bits;
}

/* New L2 tables and refcount blocks enter the index as they are made. */
static void test_index_follows_allocation(void)
{
    g_autofree char *path = make_image("alloc.qcow2", "512");
    BlockBackend *blk = open_image(path, "cached");
    BDRVQcow2State *s = state_of(blk);
    int64_t l2_span = (int64_t)s->cluster_size << s->l2_bits;
    int n_l2 = 0;

    /*
     * 512-byte clusters: an L2 table maps 32 KiB, a refcount block covers
     * 256 clusters, which 128 L2 tables and their data outgrow.
     */
    for (int64_t off = 0; off < 128 * l2_span; off += l2_span) {
        int64_t l2;

        write_pattern(blk, off, 512);
        l2 = (int64_t)l2_cluster_of(s, off) << s->cluster_bits;
        g_assert_cmpint(l2, !=, 0);
        g_assert_cmpint(check(blk, 0, l2, 512), ==, QCOW2_OL_ACTIVE_L2);
        g_assert_cmpint(check(blk, QCOW2_OL_ACTIVE_L2, l2, 512), ==, 0);
        n_l2++;
    }
    g_assert_cmpint(n_l2, ==, 128);
    /* the image grew past one refcount block: every block is known */
    g_assert_cmpuint(s->refcount_table[1], !=, 0);
    for (uint32_t i = 0; i < s->refcount_table_size; i++) {
        if (s->refcount_table[i]) {
            g_assert_cmpint(check(blk, 0, s->refcount_table[i], 512), ==,
                            QCOW2_OL_REFCOUNT_BLOCK);
        }
    }
    /* and a data cluster is nothing */
    g_assert_cmpint(check(blk, 0, 0, 1), ==, QCOW2_OL_MAIN_HEADER);
    blk_unref(blk);

    /* after a reopen the index is rebuilt from the file alone */
    blk = open_image(path, "cached");
    s = state_of(blk);
    for (int64_t off = 0; off < 128 * l2_span; off += l2_span) {
        int64_t l2 = (int64_t)l2_cluster_of(s, off) << s->cluster_bits;

        g_assert_cmpint(check(blk, 0, l2, 1), ==, QCOW2_OL_ACTIVE_L2);
    }
    blk_unref(blk);
}

/* Counts: a table referenced twice stays indexed until both go. */
static void test_index_counts(void)
{
    g_autofree char *path = make_image("counts.qcow2", "64k");
    BlockBackend *blk = open_image(path, "cached");
    BDRVQcow2State *s = state_of(blk);
    uint64_t fake = 40 * 65536ULL;

    qcow2_overlap_l2_changed(s, 0, fake);
    qcow2_overlap_l2_changed(s, 0, fake | QCOW_OFLAG_COPIED);
    g_assert_cmpint(check(blk, 0, fake, 1), ==, QCOW2_OL_ACTIVE_L2);
    qcow2_overlap_l2_changed(s, fake, 0);
    g_assert_cmpint(check(blk, 0, fake, 1), ==, QCOW2_OL_ACTIVE_L2);
    qcow2_overlap_l2_changed(s, fake, 0);
    g_assert_cmpint(check(blk, 0, fake, 1), ==, 0);
    /* a change that keeps the offset (the COPIED flag) changes nothing */
    qcow2_overlap_refblock_changed(s, 0, fake);
    qcow2_overlap_refblock_changed(s, fake, fake);
    g_assert_cmpint(check(blk, 0, fake, 1), ==, QCOW2_OL_REFCOUNT_BLOCK);
    qcow2_overlap_refblock_changed(s, fake, 0);
    g_assert_cmpint(check(blk, 0, fake, 1), ==, 0);
    blk_unref(blk);
}

/* Invariant 3: past 32767 references a count no longer goes down. */
static void test_index_saturation(void)
{
    g_autofree char *path = make_image("saturate.qcow2", "64k");
    BlockBackend *blk = open_image(path, "cached");
    BDRVQcow2State *s = state_of(blk);
    uint64_t fake = 50 * 65536ULL;

    for (int i = 0; i < 70000; i++) {
        qcow2_overlap_l2_changed(s, 0, fake);
    }
    for (int i = 0; i < 70000; i++) {
        qcow2_overlap_l2_changed(s, fake, 0);
    }
    g_assert_cmpint(check(blk, 0, fake, 1), ==, QCOW2_OL_ACTIVE_L2);
    /* the other sets' counts in the same cluster are independent */
    qcow2_overlap_refblock_changed(s, 0, fake);
    qcow2_overlap_refblock_changed(s, fake, 0);
    g_assert_cmpint(check(blk, QCOW2_OL_ACTIVE_L2, fake, 1), ==, 0);
    blk_unref(blk);
}

/*
 * The index against a plain model under random adds and removes of
 * clusters that collide in the hash table, growing and shrinking it.
 */
static void test_index_random_model(void)
{
    g_autofree char *path = make_image("model.qcow2", "64k");
    BlockBackend *blk = open_image(path, "cached");
    BDRVQcow2State *s = state_of(blk);
    int only_l2 = QCOW2_OL_ALL & ~QCOW2_OL_ACTIVE_L2;
    enum { N = 3000 };
    g_autofree int *model = g_new0(int, N);
    GRand *rand = g_rand_new_with_seed(4242);

    for (int round = 0; round < 40; round++) {
        for (int op = 0; op < 2000; op++) {
            /* clusters 1000.. hold no real metadata of this image */
            int c = g_rand_int_range(rand, 0, round < 20 ? N : N / 10);
            uint64_t e = (uint64_t)(1000 + c) << 16;

            if (g_rand_boolean(rand) || !model[c]) {
                qcow2_overlap_l2_changed(s, 0, e);
                model[c]++;
            } else {
                qcow2_overlap_l2_changed(s, e, 0);
                model[c]--;
            }
        }
        for (int c = 0; c < N; c++) {
            g_assert_cmpint(check(blk, only_l2, (int64_t)(1000 + c) << 16, 1),
                            ==, model[c] ? QCOW2_OL_ACTIVE_L2 : 0);
        }
        if (round == 20) {
            /* drop most entries: what stays must still be found */
            for (int c = 0; c < N; c++) {
                while (model[c] && c >= N / 10) {
                    qcow2_overlap_l2_changed(s, (uint64_t)(1000 + c) << 16, 0);
                    model[c]--;
                }
            }
        }
    }
    g_rand_free(rand);
    blk_unref(blk);
}

typedef struct EventLog {
    int count;
    QDict *last;
} EventLog;

static void record_event(const char *event, QDict *data, void *opaque)
{
    EventLog *log = opaque;

    if (strcmp(event, "BLOCK_IMAGE_CORRUPTED")) {
        return;
    }
    log->count++;
    if (log->last) {
        qdict_unref(log->last);
    }
    log->last = qdict_ref(data);
}

/* A hit: EIO, nothing written, the corrupt bit, one event with data. */
static void test_hit_reports_once(void)
{
    g_autofree char *path = make_image("hit.qcow2", "64k");
    BlockBackend *blk = open_image(path, NULL);
    BDRVQcow2State *s = state_of(blk);
    EventLog log = { 0 };
    g_autofree gchar *before = NULL, *after = NULL;
    gsize len_before, len_after;
    int64_t l1 = s->l1_table_offset;
    int ret;

    write_pattern(blk, 0, 4096);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    g_assert_true(g_file_get_contents(path, &before, &len_before, NULL));

    qapi_event_add_listener(record_event, &log);
    ret = pre_write_check(blk, l1, 512);
    g_assert_cmpint(ret, ==, -EIO);
    g_assert_true(blk_bs(blk)->corrupt);
    g_assert_true(s->incompatible_features & QCOW2_INCOMPAT_CORRUPT);
    g_assert_cmpint(log.count, ==, 1);
    g_assert_cmpstr(qdict_get_try_str(log.last, "msg"), ==,
                    "Preventing invalid write on metadata (overlaps with "
                    "active L1 table)");
    g_assert_cmpint(g_ascii_strtoll(qdict_get_try_str(log.last, "offset"),
                                    NULL, 10), ==, l1);
    g_assert_cmpstr(qdict_get_try_str(log.last, "size"), ==, "512");
    g_assert_cmpstr(qdict_get_try_str(log.last, "fatal"), ==, "true");
    g_assert_nonnull(qdict_get_try_str(log.last, "device"));

    /* the second hit is silent; writes are refused before qcow2 */
    ret = pre_write_check(blk, l1, 512);
    g_assert_cmpint(ret, ==, -EIO);
    g_assert_cmpint(log.count, ==, 1);
    g_assert_cmpint(blk_pwrite(blk, 65536 * 8, 512, before, 0), ==, -EIO);
    qapi_event_remove_listener(record_event, &log);
    qdict_unref(log.last);
    blk_unref(blk);

    /* only the corrupt bit changed in the file */
    g_assert_true(g_file_get_contents(path, &after, &len_after, NULL));
    g_assert_cmpuint(len_before, ==, len_after);
    g_assert_cmpint(after[79] & ~before[79], ==, QCOW2_INCOMPAT_CORRUPT);
    after[79] = before[79];
    g_assert_cmpmem(before, len_before, after, len_after);
}

/*
 * A check does not walk the structures: with thousands of L2 tables and
 * refcount blocks indexed, checking a data cluster looks at that cluster
 * alone.  (Measured as the number of index lookups, not as time.)
 */
static void test_cost_independent_of_size(void)
{
    g_autofree char *path = make_image("cost.qcow2", "512");
    BlockBackend *blk = open_image(path, "all");
    BDRVQcow2State *s = state_of(blk);
    int64_t l2_span = (int64_t)s->cluster_size << s->l2_bits;

    for (int64_t off = 0; off < 2048 * l2_span; off += l2_span) {
        write_pattern(blk, off, 512);
    }
    g_assert_cmpuint(qcow2_overlap_index_size(s), >, 2000);
    s->overlap_lookups = 0;
    g_assert_cmpint(check(blk, 0, 2048 * l2_span, 4096), ==, 0);
    /* 4096 bytes at 512-byte clusters: 8 clusters, 8 lookups */
    g_assert_cmpuint(s->overlap_lookups, ==, 8);
    blk_unref(blk);
}

/*
 * Over the whole file, every 512-byte write that the inline check clears
 * (qcow2_overlap_index_clears) is one the full check finds nothing in;
 * returns how many it cleared.
 */
static int64_t assert_index_clears_only_free_ranges(BlockBackend *blk)
{
    BlockDriverState *bs = blk_bs(blk);
    int64_t len = bdrv_getlength(bs->file->bs);
    int64_t cleared = 0;

    g_assert_cmpint(len, >, 0);
    for (int64_t off = 0; off < len + 65536; off += 512) {
        if (qcow2_overlap_index_clears(bs, 0, off, 512)) {
            g_assert_cmpint(check(blk, 0, off, 512), ==, 0);
            cleared++;
        }
    }
    return cleared;
}

/*
 * The one-probe check in front of every write (qcow2.h) never clears a
 * write that the full check refuses, while the tables move and grow: the
 * refcount table outgrows its cluster, snapshots come and go (the
 * snapshot table moves, the active L1 table is replaced by a snapshot's),
 * the L1 table grows, the bitmap directory goes.  512-byte clusters, so
 * that each table spans many clusters.
 */
static void test_inline_check_agrees(void)
{
    g_autofree char *path = make_image("inline.qcow2", "512");
    BlockBackend *blk = open_image_flags(path, "all",
                                         BDRV_O_RDWR | BDRV_O_RESIZE);
    BlockDriverState *bs = blk_bs(blk);
    BDRVQcow2State *s = state_of(blk);
    int64_t old_l1 = s->l1_table_offset, old_reftable;
    QEMUSnapshotInfo sn;

    g_assert_cmpint(assert_index_clears_only_free_ranges(blk), >, 0);

    /* 10 MiB of data: the 8 MiB one reftable cluster covers run out */
    old_reftable = s->refcount_table_offset;
    for (int64_t off = 0; off < 10 * MiB; off += MiB) {
        write_pattern(blk, off, MiB);
    }
    g_assert_cmpint(s->refcount_table_offset, !=, old_reftable);
    /* data clusters are cleared, so the probe is what decides for them */
    g_assert_cmpint(assert_index_clears_only_free_ranges(blk), >,
                    9 * MiB / 512);
    g_assert_false(qcow2_overlap_index_clears(bs, 0, old_l1, 8));
    g_assert_false(qcow2_overlap_index_clears(bs, 0, 0, 8));
    g_assert_false(qcow2_overlap_index_clears(bs, 0,
                                              s->refcount_table_offset +
                                              s->refcount_table_size * 8 - 8,
                                              8));

    for (int i = 0; i < 3; i++) {
        sn = (QEMUSnapshotInfo) { 0 };
        snprintf(sn.name, sizeof(sn.name), "s%d", i);
        g_assert_cmpint(bdrv_snapshot_create(bs, &sn), ==, 0);
        write_pattern(blk, i * MiB, 64 * 1024);
        assert_index_clears_only_free_ranges(blk);
    }
    g_assert_cmpint(s->nb_snapshots, ==, 3);
    g_assert_false(qcow2_overlap_index_clears(bs, 0, s->snapshots_offset,
                                              8));
    g_assert_cmpint(bdrv_snapshot_delete(bs, NULL, "s1", &error_abort), ==,
                    0);
    assert_index_clears_only_free_ranges(blk);
    g_assert_cmpint(bdrv_snapshot_goto(bs, "s0", &error_abort), ==, 0);
    assert_index_clears_only_free_ranges(blk);

    /* 64 MiB -> 8 GiB: the L1 table moves and grows from 16 KiB to 2 MiB */
    old_l1 = s->l1_table_offset;
    g_assert_cmpint(blk_truncate(blk, 8 * GiB, false, PREALLOC_MODE_OFF, 0,
                                 &error_abort), ==, 0);
    g_assert_cmpint(s->l1_table_offset, !=, old_l1);
    g_assert_false(qcow2_overlap_index_clears(bs, 0, s->l1_table_offset +
                                              s->l1_size * 8 - 512, 512));
    assert_index_clears_only_free_ranges(blk);

    /* writes across two clusters always take the full check */
    g_assert_false(qcow2_overlap_index_clears(bs, 0, 20 * MiB + 256, 512));
    blk_unref(blk);
}

/*
 * A write that waits on s->lock while the lock holder marks the image
 * corrupt passed the generic layer's entry test before the image was
 * corrupt: qcow2 refuses it where it would write (qcow2.h inv. 6), and
 * nothing of it reaches the file.
 */
typedef struct CorruptRace {
    BlockBackend *blk;
    int64_t offset;
    uint8_t *buf;
    int ret;
    bool done;
} CorruptRace;

static void coroutine_fn race_holder_co(void *opaque)
{
    CorruptRace *r = opaque;
    BlockDriverState *bs = blk_bs(r->blk);
    BDRVQcow2State *s = bs->opaque;

    qemu_co_mutex_lock(&s->lock);
    qemu_coroutine_yield();
    qcow2_signal_corruption(bs, true, -1, -1, "test: found while the "
                            "write waited");
    qemu_co_mutex_unlock(&s->lock);
    r->done = true;
}

static void coroutine_fn race_writer_co(void *opaque)
{
    CorruptRace *r = opaque;
    QEMUIOVector qiov;

    qemu_iovec_init_buf(&qiov, r->buf, 4096);
    r->ret = blk_co_pwritev(r->blk, r->offset, 4096, &qiov, 0);
    r->done = true;
}

static void test_corrupt_while_waiting(void)
{
    g_autofree char *path = make_image("race.qcow2", "1M");
    BlockBackend *blk = open_image(path, NULL);
    g_autofree uint8_t *buf = g_malloc(4096);
    g_autofree gchar *before = NULL, *after = NULL;
    gsize len_before, len_after;
    CorruptRace holder = { .blk = blk };
    CorruptRace writer = { .blk = blk, .offset = 512 * 1024, .buf = buf };
    Coroutine *h;

    memset(buf, 0x5a, 4096);
    g_assert_true(g_file_get_contents(path, &before, &len_before, NULL));
    h = qemu_coroutine_create(race_holder_co, &holder);
    qemu_coroutine_enter(h);
    qemu_coroutine_enter(qemu_coroutine_create(race_writer_co, &writer));
    /* the writer waits on s->lock, past the generic layer's test */
    g_assert_false(writer.done);
    g_assert_false(blk_bs(blk)->corrupt);
    qemu_coroutine_enter(h);
    while (!holder.done || !writer.done) {
        aio_poll(qemu_get_aio_context(), true);
    }
    g_assert_true(blk_bs(blk)->corrupt);
    g_assert_cmpint(writer.ret, ==, -EIO);
    blk_unref(blk);

    /* the header's corrupt bit is the only change to the file */
    g_assert_true(g_file_get_contents(path, &after, &len_after, NULL));
    g_assert_cmpuint(len_after, ==, len_before);
    g_assert_cmpint(memcmp(before + 80, after + 80, len_before - 80), ==, 0);
    g_assert_cmpint(after[79] & QCOW2_INCOMPAT_CORRUPT, !=, 0);
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    test_dir = g_dir_make_tmp("test-qcow2-overlap-XXXXXX", NULL);
    g_assert_nonnull(test_dir);

    g_test_add_func("/qcow2-overlap/single-ranges", test_single_ranges);
    g_test_add_func("/qcow2-overlap/bitmap-directory", test_bitmap_directory);
    g_test_add_func("/qcow2-overlap/index-follows-allocation",
                    test_index_follows_allocation);
    g_test_add_func("/qcow2-overlap/index-counts", test_index_counts);
    g_test_add_func("/qcow2-overlap/index-saturation",
                    test_index_saturation);
    g_test_add_func("/qcow2-overlap/index-random-model",
                    test_index_random_model);
    g_test_add_func("/qcow2-overlap/hit-reports-once", test_hit_reports_once);
    g_test_add_func("/qcow2-overlap/corrupt-while-waiting",
                    test_corrupt_while_waiting);
    g_test_add_func("/qcow2-overlap/inline-check-agrees",
                    test_inline_check_agrees);
    g_test_add_func("/qcow2-overlap/cost-independent-of-size",
                    test_cost_independent_of_size);
    ret = g_test_run();

    {
        g_autoptr(GDir) dir = g_dir_open(test_dir, 0, NULL);
        const char *name;

        while (dir && (name = g_dir_read_name(dir))) {
            g_autofree char *p = g_build_filename(test_dir, name, NULL);

            g_unlink(p);
        }
    }
    g_rmdir(test_dir);
    return ret;
}
