/*
 * block/dirty-bitmap.c and util/hbitmap.c: the hierarchical bitmap agrees
 * with a plain array under random operations; dirty bitmaps mark every
 * write path of the request path (writes, zero writes, discards,
 * copy-on-read, growth); enable/disable, merge across granularities,
 * clear and restore, successors as backup uses them, serialisation and
 * the checks' messages.
 */
#include "block/block_int.h"
#include "block/dirty-bitmap.h"
#include "qblock/block-backend.h"

#define IMG_SIZE    (4 * MiB)
#define CLUSTER     (64 * KiB)

static char *test_dir;

/* ---- util/hbitmap.c against a plain array ---- */

static void check_against(HBitmap *hb, const bool *ref, uint64_t size)
{
    uint64_t count = 0;

    for (uint64_t i = 0; i < size; i++) {
        g_assert_cmpint(hbitmap_get(hb, i), ==, ref[i]);
        count += ref[i];
    }
    g_assert_cmpuint(hbitmap_count(hb), ==, count);
    /* next_set and next_clear from random points, over random lengths */
    for (int n = 0; n < 50; n++) {
        uint64_t from = g_test_rand_int_range(0, size);
        uint64_t len = g_test_rand_int_range(1, size - from + 1);
        int64_t want_set = -1, want_clear = -1;

        for (uint64_t i = from; i < from + len; i++) {
            if (ref[i] && want_set < 0) {
                want_set = i;
            }
            if (!ref[i] && want_clear < 0) {
                want_clear = i;
            }
        }
        g_assert_cmpint(hbitmap_next_set(hb, from, len), ==, want_set);
        g_assert_cmpint(hbitmap_next_clear(hb, from, len), ==, want_clear);
    }
}

static void test_hbitmap_random(void)
{
    /* sizes around word and summary-level boundaries */
    static const uint64_t sizes[] = { 1, 63, 64, 65, 4095, 4096, 4097,
                                      70000, 262145 };

    for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++) {
        uint64_t size = sizes[s];
        g_autofree bool *ref = g_new0(bool, size);
        HBitmap *hb = hbitmap_alloc(size);

        for (int op = 0; op < 200; op++) {
            uint64_t first = g_test_rand_int_range(0, size);
            /* mostly short ranges, sometimes long ones */
            uint64_t count = g_test_rand_bit()
                             ? g_test_rand_int_range(1, 130)
                             : g_test_rand_int_range(1, size + 1);
            bool set = g_test_rand_int_range(0, 3) != 0;
            uint64_t end = MIN(first + count, size);

            if (set) {
                hbitmap_set(hb, first, count);
            } else {
                hbitmap_reset(hb, first, count);
            }
            for (uint64_t i = first; i < end; i++) {
                ref[i] = set;
            }
            if (op % 40 == 39) {
                check_against(hb, ref, size);
            }
        }
        hbitmap_free(hb);
    }
}

static void test_hbitmap_truncate_serialize(void)
{
    HBitmap *hb = hbitmap_alloc(200);
    HBitmap *back;
    uint8_t buf[32];

    hbitmap_set(hb, 0, 1);
    hbitmap_set(hb, 70, 3);
    hbitmap_set(hb, 199, 1);
    /* bit i of byte j is bit 8j + i */
    memset(buf, 0xff, sizeof(buf));
    hbitmap_serialize(hb, buf, 0, 200);
    g_assert_cmphex(buf[0], ==, 0x01);
    g_assert_cmphex(buf[8], ==, 0xc0);
    g_assert_cmphex(buf[9], ==, 0x01);
    g_assert_cmphex(buf[24], ==, 0x80);

    back = hbitmap_alloc(200);
    hbitmap_deserialize(back, buf, 0, 200);
    g_assert_cmpuint(hbitmap_count(back), ==, 5);
    g_assert_true(hbitmap_get(back, 72) && hbitmap_get(back, 199));

    /* shrinking drops the bits past the new end; growing adds clear ones */
    hbitmap_truncate(hb, 71);
    g_assert_cmpuint(hbitmap_count(hb), ==, 2);
    hbitmap_truncate(hb, 1000);
    g_assert_cmpuint(hbitmap_count(hb), ==, 2);
    g_assert_cmpint(hbitmap_next_set(hb, 71, 929), ==, -1);
    hbitmap_truncate(hb, 0);
    g_assert_cmpuint(hbitmap_count(hb), ==, 0);
    g_assert_cmpint(hbitmap_next_set(hb, 0, 10), ==, -1);
    hbitmap_free(hb);
    hbitmap_free(back);
}

/* ---- dirty bitmaps on a qcow2 node ---- */

static void create_qcow2(const char *path, const char *backing)
{
    const BlockDriver *drv = bdrv_find_format("qcow2");
    const BlockDriver *proto = bdrv_find_protocol(path, true, &error_abort);
    g_autofree char *text = g_strdup_printf(
        "size=%" PRId64 "%s%s%s", (int64_t)IMG_SIZE, backing ? ",backing_fmt=qcow2" : "",
        backing ? ",backing_file=" : "", backing ? backing : "");
    QemuOptsList *list = qemu_opts_append(NULL, drv->create_opts);
    QemuOpts *opts;

    list = qemu_opts_append(list, proto->create_opts);
    opts = qemu_opts_parse(list, text, &error_abort);
    g_assert_cmpint(bdrv_create(drv, path, opts, &error_abort), ==, 0);
    qemu_opts_del(opts);
    qemu_opts_free(list);
}

static BlockBackend *open_image(const char *name, const char *extra,
                                int flags)
{
    g_autofree char *path = g_build_filename(test_dir, name, NULL);
    g_autofree char *text = g_strdup_printf(
        "driver=qcow2,file.filename=%s%s", path, extra ? extra : "");

    return blk_new_open(NULL, NULL, keyval_parse(text, NULL, &error_abort),
                        flags, &error_abort);
}

static BlockBackend *new_image(const char *name)
{
    g_autofree char *path = g_build_filename(test_dir, name, NULL);

    create_qcow2(path, NULL);
    return open_image(name, ",discard=unmap",
                      BDRV_O_RDWR | BDRV_O_UNMAP | BDRV_O_RESIZE);
}

static void write_pattern(BlockBackend *blk, int64_t offset, int64_t bytes)
{
    g_autofree uint8_t *buf = g_malloc(bytes);

    memset(buf, 0x5a, bytes);
    g_assert_cmpint(blk_pwrite(blk, offset, bytes, buf, 0), ==, 0);
}

/* The dirty areas of @b as "start+count ..." */
static char *areas(BdrvDirtyBitmap *b)
{
    GString *s = g_string_new("");
    int64_t pos = 0, start, count;

    while (bdrv_dirty_bitmap_next_dirty_area(b, pos, INT64_MAX, INT64_MAX,
                                             &start, &count)) {
        g_string_append_printf(s, "%s%" PRId64 "+%" PRId64,
                               s->len ? " " : "", start, count);
        pos = start + count;
    }
    return g_string_free(s, false);
}

#define assert_areas(b, want) do {                  \
        g_autofree char *got_ = areas(b);           \
        g_assert_cmpstr(got_, ==, want);            \
    } while (0)

/* Invariant 6 of io.c: every kind of write marks what it touched. */
static void test_write_paths_mark(void)
{
    BlockBackend *blk = new_image("paths.qcow2");
    BlockDriverState *bs = blk_bs(blk);
    BdrvDirtyBitmap *b = bdrv_create_dirty_bitmap(bs, CLUSTER, "b0",
                                                  &error_abort);

    g_assert_cmpint(bdrv_dirty_bitmap_size(b), ==, IMG_SIZE);
    assert_areas(b, "");
    /* a small write marks its whole granule */
    write_pattern(blk, CLUSTER + 512, 512);
    assert_areas(b, "65536+65536");
    /* a write across a boundary marks both granules */
    write_pattern(blk, 4 * CLUSTER - 512, 1024);
    assert_areas(b, "65536+65536 196608+131072");
    g_assert_cmpint(bdrv_get_dirty_count(b), ==, 3 * CLUSTER);

    bdrv_clear_dirty_bitmap(b, NULL);
    g_assert_cmpint(blk_pwrite_zeroes(blk, 8 * CLUSTER, CLUSTER, 0), ==, 0);
    assert_areas(b, "524288+65536");

    bdrv_clear_dirty_bitmap(b, NULL);
    g_assert_cmpint(blk_pdiscard(blk, 10 * CLUSTER, 2 * CLUSTER), ==, 0);
    assert_areas(b, "655360+131072");

    /* a disabled bitmap keeps what it has and records nothing */
    bdrv_disable_dirty_bitmap(b);
    write_pattern(blk, 0, 4096);
    assert_areas(b, "655360+131072");
    bdrv_enable_dirty_bitmap(b);

    /* growth marks the new area, and the bitmap covers the new length */
    bdrv_clear_dirty_bitmap(b, NULL);
    g_assert_cmpint(blk_truncate(blk, IMG_SIZE + CLUSTER, false,
                                 PREALLOC_MODE_OFF, 0, &error_abort), ==, 0);
    g_assert_cmpint(bdrv_dirty_bitmap_size(b), ==, IMG_SIZE + CLUSTER);
    assert_areas(b, "4194304+65536");
    blk_unref(blk);
}

/* Copy-on-read writes into the image: they are writes and are marked. */
static void test_copy_on_read_marks(void)
{
    g_autofree char *base = g_build_filename(test_dir, "cor-base.qcow2",
                                             NULL);
    g_autofree char *top = g_build_filename(test_dir, "cor-top.qcow2", NULL);
    BlockBackend *blk;
    BdrvDirtyBitmap *b;
    uint8_t buf[512];

    create_qcow2(base, NULL);
    create_qcow2(top, base);
    blk = open_image("cor-base.qcow2", NULL, BDRV_O_RDWR);
    write_pattern(blk, 3 * CLUSTER, CLUSTER);
    blk_unref(blk);

    blk = open_image("cor-top.qcow2", NULL,
                     BDRV_O_RDWR | BDRV_O_COPY_ON_READ);
    b = bdrv_create_dirty_bitmap(blk_bs(blk), CLUSTER, "cor", &error_abort);
    g_assert_cmpint(blk_pread(blk, 3 * CLUSTER + 512, 512, buf, 0), ==, 0);
    assert_areas(b, "196608+65536");
    blk_unref(blk);
}

static void test_granularity_and_iteration(void)
{
    BlockBackend *blk = new_image("iter.qcow2");
    BlockDriverState *bs = blk_bs(blk);
    BdrvDirtyBitmap *b = bdrv_create_dirty_bitmap(bs, 512, NULL,
                                                  &error_abort);
    int64_t start, count;

    bdrv_set_dirty_bitmap(b, 1000, 1);
    bdrv_set_dirty_bitmap(b, 3 * MiB, 4096);
    g_assert_cmpint(bdrv_dirty_bitmap_next_dirty(b, 0, -1), ==, 512);
    g_assert_cmpint(bdrv_dirty_bitmap_next_dirty(b, 700, -1), ==, 700);
    g_assert_cmpint(bdrv_dirty_bitmap_next_dirty(b, 1024, 3 * MiB - 1024),
                    ==, -1);
    g_assert_cmpint(bdrv_dirty_bitmap_next_dirty(b, 1024, -1), ==, 3 * MiB);
    g_assert_cmpint(bdrv_dirty_bitmap_next_zero(b, 512, -1), ==, 1024);
    g_assert_true(bdrv_dirty_bitmap_next_dirty_area(b, 2048, IMG_SIZE, 1024,
                                                    &start, &count));
    g_assert_cmpint(start, ==, 3 * MiB);
    g_assert_cmpint(count, ==, 1024);

    /* reset clears whole granules only; the end's partial one too */
    bdrv_reset_dirty_bitmap(b, 3 * MiB + 100, 900);
    g_assert_cmpint(bdrv_get_dirty_count(b), ==, 512 + 4096);
    bdrv_reset_dirty_bitmap(b, 3 * MiB, 1024);
    g_assert_cmpint(bdrv_get_dirty_count(b), ==, 512 + 3072);
    bdrv_release_dirty_bitmap(b);
    g_assert_null(bdrv_dirty_bitmap_first(bs));
    blk_unref(blk);
}

static void test_merge_clear_restore(void)
{
    BlockBackend *blk = new_image("merge.qcow2");
    BlockDriverState *bs = blk_bs(blk);
    BdrvDirtyBitmap *fine = bdrv_create_dirty_bitmap(bs, 4096, "fine",
                                                     &error_abort);
    BdrvDirtyBitmap *coarse = bdrv_create_dirty_bitmap(bs, CLUSTER, "coarse",
                                                       &error_abort);
    HBitmap *backup;
    Error *err = NULL;

    bdrv_set_dirty_bitmap(fine, CLUSTER + 4096, 4096);
    bdrv_set_dirty_bitmap(coarse, 0, 1);
    /* a fine granule sets the coarse granule it lies in */
    g_assert_true(bdrv_merge_dirty_bitmap(coarse, fine, &backup,
                                          &error_abort));
    assert_areas(coarse, "0+131072");
    bdrv_restore_dirty_bitmap(coarse, backup);
    assert_areas(coarse, "0+65536");
    /* and the other way round, every fine granule of it */
    g_assert_true(bdrv_merge_dirty_bitmap(fine, coarse, NULL, &error_abort));
    assert_areas(fine, "0+65536 69632+4096");

    bdrv_clear_dirty_bitmap(fine, &backup);
    assert_areas(fine, "");
    bdrv_restore_dirty_bitmap(fine, backup);
    g_assert_cmpint(bdrv_get_dirty_count(fine), ==, CLUSTER + 4096);

    /* a read-only source may be merged, a read-only target may not */
    bdrv_dirty_bitmap_set_readonly(coarse, true);
    g_assert_false(bdrv_merge_dirty_bitmap(coarse, fine, NULL, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Bitmap 'coarse' is readonly and cannot be modified");
    error_free(err);
    err = NULL;
    g_assert_true(bdrv_merge_dirty_bitmap(fine, coarse, NULL, &error_abort));
    bdrv_dirty_bitmap_set_readonly(coarse, false);

    bdrv_dirty_bitmap_set_inconsistent(coarse);
    g_assert_false(bdrv_dirty_bitmap_enabled(coarse));
    g_assert_false(bdrv_merge_dirty_bitmap(fine, coarse, NULL, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Bitmap 'coarse' is inconsistent and cannot be used");
    error_free(err);
    err = NULL;

    g_assert_null(bdrv_create_dirty_bitmap(bs, 512, "fine", &err));
    g_assert_cmpstr(error_get_pretty(err), ==, "Bitmap already exists: fine");
    error_free(err);
    blk_unref(blk);
}

/* Successors: what backup does with a bitmap on success and on failure. */
static void test_successor(void)
{
    BlockBackend *blk = new_image("succ.qcow2");
    BlockDriverState *bs = blk_bs(blk);
    BdrvDirtyBitmap *b = bdrv_create_dirty_bitmap(bs, CLUSTER, "inc",
                                                  &error_abort);
    BdrvDirtyBitmap *r;
    Error *err = NULL;

    bdrv_dirty_bitmap_set_persistence(b, true);
    write_pattern(blk, 0, 4096);
    g_assert_cmpint(bdrv_dirty_bitmap_create_successor(b, &error_abort), ==,
                    0);
    g_assert_true(bdrv_dirty_bitmap_busy(b));
    g_assert_false(bdrv_dirty_bitmap_enabled(b));
    g_assert_cmpint(bdrv_dirty_bitmap_create_successor(b, &err), ==, -1);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Bitmap 'inc' is currently in use by another operation "
                    "and cannot be used");
    error_free(err);
    err = NULL;
    /* writes during the backup go to the successor only */
    write_pattern(blk, 2 * CLUSTER, 4096);
    assert_areas(b, "0+65536");

    /* failure: the two are merged back, the bitmap records again */
    r = bdrv_reclaim_dirty_bitmap(b, &error_abort);
    g_assert_true(r == b);
    assert_areas(b, "0+65536 131072+65536");
    g_assert_false(bdrv_dirty_bitmap_busy(b));
    g_assert_true(bdrv_dirty_bitmap_enabled(b));
    g_assert_true(bdrv_dirty_bitmap_next(b) == NULL);

    /* success: the successor takes the name and what came after */
    g_assert_cmpint(bdrv_dirty_bitmap_create_successor(b, &error_abort), ==,
                    0);
    write_pattern(blk, 5 * CLUSTER, 4096);
    r = bdrv_dirty_bitmap_abdicate(b, &error_abort);
    g_assert_true(bdrv_find_dirty_bitmap(bs, "inc") == r);
    g_assert_true(bdrv_dirty_bitmap_get_persistence(r));
    assert_areas(r, "327680+65536");
    g_assert_null(bdrv_dirty_bitmap_abdicate(r, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, "Cannot relinquish control if "
                    "there's no successor present");
    error_free(err);
    blk_unref(blk);
}

static void test_serialize_and_sha256(void)
{
    BlockBackend *blk = new_image("ser.qcow2");
    BlockDriverState *bs = blk_bs(blk);
    BdrvDirtyBitmap *a = bdrv_create_dirty_bitmap(bs, CLUSTER, "a",
                                                  &error_abort);
    BdrvDirtyBitmap *c = bdrv_create_dirty_bitmap(bs, CLUSTER, "c",
                                                  &error_abort);
    uint64_t len = bdrv_dirty_bitmap_serialization_size(a, 0, IMG_SIZE);
    g_autofree uint8_t *buf = g_malloc0(len);
    g_autofree char *empty = NULL, *sa = NULL, *sc = NULL;

    /* 64 granules of 64 KiB: 8 bytes */
    g_assert_cmpuint(len, ==, 8);
    empty = bdrv_dirty_bitmap_sha256(a);
    /* SHA-256 of the 8 zero bytes of one empty word */
    g_assert_cmpstr(empty, ==, "af5570f5a1810b7af78caf4bc70a660f0df51e42baf9"
                    "1d4de5b2328de0e83dfc");
    bdrv_set_dirty_bitmap(a, 0, 1);
    bdrv_set_dirty_bitmap(a, IMG_SIZE - 1, 1);
    bdrv_dirty_bitmap_serialize_part(a, buf, 0, IMG_SIZE);
    g_assert_cmphex(buf[0], ==, 0x01);
    g_assert_cmphex(buf[7], ==, 0x80);
    bdrv_dirty_bitmap_deserialize_part(c, buf, 0, IMG_SIZE);
    sa = bdrv_dirty_bitmap_sha256(a);
    sc = bdrv_dirty_bitmap_sha256(c);
    g_assert_cmpstr(sa, ==, sc);
    g_assert_cmpstr(sa, !=, empty);
    blk_unref(blk);
}

static void remove_test_dir(void)
{
    g_autoptr(GDir) dir = g_dir_open(test_dir, 0, NULL);
    const char *name;

    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(test_dir, name, NULL);

        unlink(path);
    }
    rmdir(test_dir);
    g_free(test_dir);
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    test_dir = g_dir_make_tmp("test-dirty-bitmap-XXXXXX", NULL);
    g_assert_nonnull(test_dir);

    g_test_add_func("/hbitmap/random", test_hbitmap_random);
    g_test_add_func("/hbitmap/truncate-serialize",
                    test_hbitmap_truncate_serialize);
    g_test_add_func("/dirty-bitmap/write-paths-mark", test_write_paths_mark);
    g_test_add_func("/dirty-bitmap/copy-on-read-marks",
                    test_copy_on_read_marks);
    g_test_add_func("/dirty-bitmap/granularity-and-iteration",
                    test_granularity_and_iteration);
    g_test_add_func("/dirty-bitmap/merge-clear-restore",
                    test_merge_clear_restore);
    g_test_add_func("/dirty-bitmap/successor", test_successor);
    g_test_add_func("/dirty-bitmap/serialize-and-sha256",
                    test_serialize_and_sha256);
    ret = g_test_run();

    remove_test_dir();
    return ret;
}
