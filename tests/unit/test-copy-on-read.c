/*
 * block/copy-on-read.c: reads through the filter copy what the backing
 * chain supplies into the image below it (whole clusters), leave what
 * the image already has alone, stop at "bottom", pass writes through,
 * and refuse a read-only image and a bad "bottom" with QEMU's messages.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"

#define IMG_SIZE    (1024 * 1024)
#define CLUSTER     (64 * KiB)

static char *test_dir;

static void create_qcow2(const char *path, const char *backing)
{
    const BlockDriver *drv = bdrv_find_format("qcow2");
    const BlockDriver *proto = bdrv_find_protocol(path, true, &error_abort);
    g_autofree char *text = g_strdup_printf(
        "size=%d%s%s%s", IMG_SIZE, backing ? ",backing_fmt=qcow2" : "",
        backing ? ",backing_file=" : "", backing ? backing : "");
    QemuOptsList *list = qemu_opts_append(NULL, drv->create_opts);
    QemuOpts *opts;

    list = qemu_opts_append(list, proto->create_opts);
    opts = qemu_opts_parse(list, text, &error_abort);
    g_assert_cmpint(bdrv_create(drv, path, opts, &error_abort), ==, 0);
    qemu_opts_del(opts);
    qemu_opts_free(list);
}

static BlockBackend *open_opts(const char *text, int flags, Error **errp)
{
    return blk_new_open(NULL, NULL, keyval_parse(text, NULL, &error_abort),
                        flags, errp);
}

/* Fills [offset, offset + bytes) of the qcow2 image @path with @byte. */
static void fill(const char *path, int64_t offset, int64_t bytes, int byte)
{
    g_autofree char *text = g_strdup_printf(
        "driver=qcow2,file.filename=%s", path);
    BlockBackend *blk = open_opts(text, BDRV_O_RDWR, &error_abort);
    g_autofree uint8_t *buf = g_malloc(bytes);

    memset(buf, byte, bytes);
    g_assert_cmpint(blk_pwrite(blk, offset, bytes, buf, 0), ==, 0);
    blk_unref(blk);
}

static void assert_reads(BlockBackend *blk, int64_t offset, int64_t bytes,
                         int byte)
{
    g_autofree uint8_t *buf = g_malloc(bytes);

    g_assert_cmpint(blk_pread(blk, offset, bytes, buf, 0), ==, 0);
    for (int64_t i = 0; i < bytes; i++) {
        g_assert_cmpint(buf[i], ==, byte);
    }
}

/* Bytes of [offset, offset + bytes) that @bs itself has, from @offset. */
static int64_t allocated(BlockDriverState *bs, int64_t offset, int64_t bytes)
{
    int64_t pnum;
    int ret = bdrv_is_allocated(bs, offset, bytes, &pnum);

    g_assert_cmpint(ret, >=, 0);
    return ret ? pnum : 0;
}

/* base.qcow2 (0x11 in cluster 0, 0x22 in cluster 4) <- top.qcow2 */
static void make_chain(char **base, char **top)
{
    *base = g_build_filename(test_dir, "base.qcow2", NULL);
    *top = g_build_filename(test_dir, "top.qcow2", NULL);
    create_qcow2(*base, NULL);
    create_qcow2(*top, *base);
    fill(*base, 0, CLUSTER, 0x11);
    fill(*base, 4 * CLUSTER, CLUSTER, 0x22);
}

static void test_copies_backing_data(void)
{
    g_autofree char *base = NULL, *top = NULL, *text = NULL;
    BlockBackend *blk;
    BlockDriverState *image;

    make_chain(&base, &top);
    text = g_strdup_printf("driver=copy-on-read,file.driver=qcow2,"
                           "file.file.filename=%s", top);
    blk = open_opts(text, BDRV_O_RDWR, &error_abort);
    image = blk_bs(blk)->file->bs;
    g_assert_cmpstr(bdrv_get_format_name(blk_bs(blk)), ==, "copy-on-read");
    g_assert_cmpint(allocated(image, 0, IMG_SIZE), ==, 0);

    /* a small read copies its whole cluster, and only that */
    assert_reads(blk, 512, 512, 0x11);
    g_assert_cmpint(allocated(image, 0, IMG_SIZE), ==, CLUSTER);
    g_assert_cmpint(allocated(image, CLUSTER, IMG_SIZE - CLUSTER), ==, 0);
    blk_unref(blk);

    /* the copy is in top itself: without its backing file it still reads */
    g_free(text);
    text = g_strdup_printf("driver=qcow2,file.filename=%s", top);
    blk = open_opts(text, BDRV_O_NO_BACKING, &error_abort);
    assert_reads(blk, 0, CLUSTER, 0x11);
    assert_reads(blk, 4 * CLUSTER, CLUSTER, 0);
    blk_unref(blk);
}

/* A cluster top already has is read, not overwritten from the backing. */
static void test_keeps_own_data(void)
{
    g_autofree char *base = NULL, *top = NULL, *text = NULL;
    BlockBackend *blk;

    make_chain(&base, &top);
    fill(top, 0, CLUSTER, 0x33);
    text = g_strdup_printf("driver=copy-on-read,file.driver=qcow2,"
                           "file.file.filename=%s", top);
    blk = open_opts(text, BDRV_O_RDWR, &error_abort);
    assert_reads(blk, 0, CLUSTER, 0x33);
    assert_reads(blk, 4 * CLUSTER, CLUSTER, 0x22);
    g_assert_cmpint(allocated(blk_bs(blk)->file->bs, 4 * CLUSTER, CLUSTER),
                    ==, CLUSTER);
    blk_unref(blk);
}

/* Invariant 3: writes and zero writes reach the image unchanged. */
static void test_writes_pass_through(void)
{
    g_autofree char *base = NULL, *top = NULL, *text = NULL;
    g_autofree uint8_t *buf = g_malloc(CLUSTER);
    BlockBackend *blk;

    make_chain(&base, &top);
    text = g_strdup_printf("driver=copy-on-read,file.driver=qcow2,"
                           "file.file.filename=%s", top);
    blk = open_opts(text, BDRV_O_RDWR, &error_abort);
    memset(buf, 0x44, CLUSTER);
    g_assert_cmpint(blk_pwrite(blk, 2 * CLUSTER, CLUSTER, buf, 0), ==, 0);
    g_assert_cmpint(blk_pwrite_zeroes(blk, 4 * CLUSTER, CLUSTER, 0), ==, 0);
    assert_reads(blk, 2 * CLUSTER, CLUSTER, 0x44);
    assert_reads(blk, 4 * CLUSTER, CLUSTER, 0);
    blk_unref(blk);
    /* the base is untouched */
    text = (g_free(text), g_strdup_printf("driver=qcow2,file.filename=%s",
                                          base));
    blk = open_opts(text, 0, &error_abort);
    assert_reads(blk, 4 * CLUSTER, CLUSTER, 0x22);
    blk_unref(blk);
}

/*
 * Invariant 2: with bottom=mid, what mid or layers above it hold is
 * copied, what only base holds is read through.
 */
static void test_bottom(void)
{
    g_autofree char *base = NULL, *top = NULL, *text = NULL;
    g_autofree char *mid = g_build_filename(test_dir, "mid.qcow2", NULL);
    BlockBackend *blk;
    BlockDriverState *image;

    make_chain(&base, &top);
    create_qcow2(mid, base);
    create_qcow2(top, mid);
    fill(mid, 2 * CLUSTER, CLUSTER, 0x55);
    text = g_strdup_printf("driver=copy-on-read,bottom=mid,"
                           "file.driver=qcow2,file.file.filename=%s,"
                           "file.backing.node-name=mid,"
                           "file.backing.driver=qcow2,"
                           "file.backing.file.filename=%s", top, mid);
    blk = open_opts(text, BDRV_O_RDWR, &error_abort);
    image = blk_bs(blk)->file->bs;
    assert_reads(blk, 0, CLUSTER, 0x11);
    assert_reads(blk, 2 * CLUSTER, CLUSTER, 0x55);
    g_assert_cmpint(allocated(image, 0, CLUSTER), ==, 0);
    g_assert_cmpint(allocated(image, 2 * CLUSTER, CLUSTER), ==, CLUSTER);
    blk_unref(blk);
}

static void test_bottom_errors(void)
{
    g_autofree char *base = NULL, *top = NULL, *text = NULL;
    Error *err = NULL;

    make_chain(&base, &top);
    text = g_strdup_printf("driver=copy-on-read,bottom=nowhere,"
                           "file.driver=qcow2,file.file.filename=%s", top);
    g_assert_null(open_opts(text, BDRV_O_RDWR, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Bottom node 'nowhere' not found");
    error_free(err);
    err = NULL;

    g_free(text);
    text = g_strdup_printf("driver=copy-on-read,bottom=dbg,"
                           "file.driver=qcow2,file.file.driver=blkdebug,"
                           "file.file.node-name=dbg,"
                           "file.file.image.filename=%s", top);
    g_assert_null(open_opts(text, BDRV_O_RDWR, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Bottom node 'dbg' is a filter");
    error_free(err);
}

/* Invariant 1: a read-only image cannot take the filter. */
static void test_read_only_refused(void)
{
    g_autofree char *base = NULL, *top = NULL, *text = NULL;
    Error *err = NULL;

    make_chain(&base, &top);
    text = g_strdup_printf("driver=copy-on-read,file.driver=qcow2,"
                           "file.file.filename=%s", top);
    g_assert_null(open_opts(text, 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, "Block node is read-only");
    error_free(err);
}

/* A file name given with driver=copy-on-read names the filter's child. */
static void test_filename_is_child(void)
{
    g_autofree char *base = NULL, *top = NULL;
    QDict *opts = qdict_new();
    BlockBackend *blk;

    make_chain(&base, &top);
    qdict_put_str(opts, "driver", "copy-on-read");
    qdict_put_str(opts, "file.driver", "qcow2");
    blk = blk_new_open(top, NULL, opts, BDRV_O_RDWR, &error_abort);
    g_assert_cmpstr(bdrv_get_format_name(blk_bs(blk)->file->bs), ==,
                    "qcow2");
    assert_reads(blk, 4 * CLUSTER, CLUSTER, 0x22);
    g_assert_cmpint(allocated(blk_bs(blk)->file->bs, 4 * CLUSTER, CLUSTER),
                    ==, CLUSTER);
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
    test_dir = g_dir_make_tmp("test-copy-on-read-XXXXXX", NULL);
    g_assert_nonnull(test_dir);

    g_test_add_func("/copy-on-read/copies-backing-data",
                    test_copies_backing_data);
    g_test_add_func("/copy-on-read/keeps-own-data", test_keeps_own_data);
    g_test_add_func("/copy-on-read/writes-pass-through",
                    test_writes_pass_through);
    g_test_add_func("/copy-on-read/bottom", test_bottom);
    g_test_add_func("/copy-on-read/bottom-errors", test_bottom_errors);
    g_test_add_func("/copy-on-read/read-only-refused",
                    test_read_only_refused);
    g_test_add_func("/copy-on-read/filename-is-child",
                    test_filename_is_child);
    ret = g_test_run();

    remove_test_dir();
    return ret;
}
