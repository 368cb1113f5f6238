/*
 * block/compress.c: every write through the filter lands as compressed
 * clusters of the qcow2 image below (counted by qcow2's check), an
 * unaligned write keeps the rest of its cluster, zero writes stay zero
 * clusters, and formats without compressed writes are refused with
 * QEMU's message.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"

#define IMG_SIZE    (1024 * 1024)
#define CLUSTER     (64 * KiB)

static char *test_dir;
static char *img_path;

static void create_sized(const char *fmt, const char *path, int64_t size)
{
    const BlockDriver *drv = bdrv_find_format(fmt);
    const BlockDriver *proto = bdrv_find_protocol(path, true, &error_abort);
    g_autofree char *text = g_strdup_printf("size=%" PRId64, size);
    QemuOptsList *list = qemu_opts_append(NULL, drv->create_opts);
    QemuOpts *opts;

    list = qemu_opts_append(list, proto->create_opts);
    opts = qemu_opts_parse(list, text, &error_abort);
    g_assert_cmpint(bdrv_create(drv, path, opts, &error_abort), ==, 0);
    qemu_opts_del(opts);
    qemu_opts_free(list);
}

static void create_image(const char *fmt, const char *path)
{
    create_sized(fmt, path, IMG_SIZE);
}

static BlockBackend *open_compress(void)
{
    g_autofree char *text = g_strdup_printf(
        "driver=compress,file.driver=qcow2,file.file.filename=%s", img_path);

    create_image("qcow2", img_path);
    return blk_new_open(NULL, NULL, keyval_parse(text, NULL, &error_abort),
                        BDRV_O_RDWR, &error_abort);
}

static int64_t compressed_clusters(BlockBackend *blk)
{
    BdrvCheckResult res = { 0 };

    g_assert_cmpint(bdrv_check(blk_bs(blk)->file->bs, &res, 0), ==, 0);
    g_assert_cmpint(res.corruptions, ==, 0);
    g_assert_cmpint(res.leaks, ==, 0);
    return res.bfi.compressed_clusters;
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

static void write_byte(BlockBackend *blk, int64_t offset, int64_t bytes,
                       int byte)
{
    g_autofree uint8_t *buf = g_malloc(bytes);

    memset(buf, byte, bytes);
    g_assert_cmpint(blk_pwrite(blk, offset, bytes, buf, 0), ==, 0);
}

static void test_writes_are_compressed(void)
{
    BlockBackend *blk = open_compress();

    g_assert_cmpint(compressed_clusters(blk), ==, 0);
    write_byte(blk, 0, 2 * CLUSTER, 0x11);
    g_assert_cmpint(compressed_clusters(blk), ==, 2);
    assert_reads(blk, 0, 2 * CLUSTER, 0x11);
    blk_unref(blk);
}

/* Invariant 2: the alignment, and what an unaligned write does. */
static void test_unaligned_write(void)
{
    BlockBackend *blk = open_compress();

    g_assert_cmpint(blk_bs(blk)->bl.request_alignment, ==, CLUSTER);
    write_byte(blk, 4 * CLUSTER + 4096, 512, 0x22);
    g_assert_cmpint(compressed_clusters(blk), ==, 1);
    assert_reads(blk, 4 * CLUSTER, 4096, 0);
    assert_reads(blk, 4 * CLUSTER + 4096, 512, 0x22);
    assert_reads(blk, 4 * CLUSTER + 4608, CLUSTER - 4608, 0);
    blk_unref(blk);
}

/* Invariant 3: zero writes and discards are not compressed data. */
static void test_zeroes_pass_through(void)
{
    BlockBackend *blk = open_compress();

    write_byte(blk, 0, CLUSTER, 0x33);
    g_assert_cmpint(blk_pwrite_zeroes(blk, 0, CLUSTER, 0), ==, 0);
    g_assert_cmpint(blk_pwrite_zeroes(blk, 2 * CLUSTER, CLUSTER, 0), ==, 0);
    g_assert_cmpint(compressed_clusters(blk), ==, 0);
    assert_reads(blk, 0, 3 * CLUSTER, 0);
    blk_unref(blk);
}

static void assert_refused(const char *text, const char *expected)
{
    Error *err = NULL;

    g_assert_null(blk_new_open(NULL, NULL,
                               keyval_parse(text, NULL, &error_abort),
                               BDRV_O_RDWR, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, expected);
    error_free(err);
}

/* Invariant 1. */
static void test_refuses_other_formats(void)
{
    g_autofree char *raw = g_build_filename(test_dir, "img.raw", NULL);
    g_autofree char *over_raw = g_strdup_printf(
        "driver=compress,file.driver=raw,file.file.filename=%s", raw);
    g_autofree char *over_file = g_strdup_printf(
        "driver=compress,file.filename=%s", raw);

    create_image("raw", raw);
    assert_refused(over_raw,
                   "Compression is not supported for underlying format: "
                   "raw");
    assert_refused(over_file,
                   "Compression is not supported for underlying format: "
                   "file");
}

/*
 * A partial last cluster cannot be written as a whole one without
 * resizing: a writer without the resize permission is refused, a reader
 * is not (QEMU's rule and message).
 */
static void test_partial_last_cluster(void)
{
    g_autofree char *text = g_strdup_printf(
        "driver=compress,file.driver=qcow2,file.file.filename=%s", img_path);
    BlockBackend *blk;

    create_sized("qcow2", img_path, CLUSTER + 36 * KiB);
    assert_refused(text, "Cannot get 'write' permission without 'resize': "
                   "Image size is not a multiple of request alignment");
    blk = blk_new_open(NULL, NULL, keyval_parse(text, NULL, &error_abort),
                       0, &error_abort);
    assert_reads(blk, CLUSTER, 36 * KiB, 0);
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
    test_dir = g_dir_make_tmp("test-compress-XXXXXX", NULL);
    g_assert_nonnull(test_dir);
    img_path = g_build_filename(test_dir, "img.qcow2", NULL);

    g_test_add_func("/compress/writes-are-compressed",
                    test_writes_are_compressed);
    g_test_add_func("/compress/unaligned-write", test_unaligned_write);
    g_test_add_func("/compress/zeroes-pass-through",
                    test_zeroes_pass_through);
    g_test_add_func("/compress/partial-last-cluster",
                    test_partial_last_cluster);
    g_test_add_func("/compress/refuses-other-formats",
                    test_refuses_other_formats);
    ret = g_test_run();

    g_free(img_path);
    remove_test_dir();
    return ret;
}
