/*
 * block/raw-format.c over the real file driver: offset/size windows and
 * their errors, truncate, block status, create, and the guard that keeps a
 * probed raw image from being turned into another format by a write of
 * its first sector.
 */
#include <sys/stat.h>

#include "block/block_int.h"
#include "qblock/block-backend.h"
#include "qapi/qapi-opts.h"

#define FILE_SIZE   (64 * KiB)

/* A format that recognises sectors starting with TEST_MAGIC, standing in
 * for qcow2 & co. in the sector-0 guard tests. */
#define TEST_MAGIC      "TESTFMT!"

static char *test_dir;

static uint8_t pattern_byte(int64_t offset)
{
    return offset * 7 + 1;
}

/* Creates @name in the test directory with FILE_SIZE pattern bytes. */
static char *make_file(const char *name)
{
    char *path = g_build_filename(test_dir, name, NULL);
    g_autofree uint8_t *buf = g_malloc(FILE_SIZE);
    int64_t i;

    for (i = 0; i < FILE_SIZE; i++) {
        buf[i] = pattern_byte(i);
    }
    g_assert_true(g_file_set_contents(path, (char *)buf, FILE_SIZE, NULL));
    return path;
}

static void read_file(const char *path, int64_t offset, void *buf,
                      size_t len)
{
    int fd = open(path, O_RDONLY);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, buf, len, offset), ==, len);
    close(fd);
}

static int64_t file_length(const char *path)
{
    struct stat st;

    g_assert_cmpint(stat(path, &st), ==, 0);
    return st.st_size;
}

static QDict *raw_opts(const char *path, const char *extra)
{
    g_autofree char *text = g_strdup_printf(
        "driver=raw,file.driver=file,file.filename=%s%s%s", path,
        extra ? "," : "", extra ? extra : "");

    return keyval_parse(text, NULL, &error_abort);
}

static BlockBackend *open_raw(const char *path, const char *extra, int flags)
{
    return blk_new_open(NULL, NULL, raw_opts(path, extra), flags,
                        &error_abort);
}

static void test_window(void)
{
    g_autofree char *path = make_file("window.img");
    uint8_t buf[8192], expect[8192], w[512];
    BlockBackend *blk;
    int64_t i;

    blk = open_raw(path, "offset=4096,size=8192", BDRV_O_RDWR);
    g_assert_cmpint(blk_getlength(blk), ==, 8192);
    g_assert_cmpint(blk_pread(blk, 0, sizeof(buf), buf, 0), ==, 0);
    for (i = 0; i < sizeof(expect); i++) {
        expect[i] = pattern_byte(4096 + i);
    }
    g_assert_cmpmem(buf, sizeof(buf), expect, sizeof(expect));

    /* a write at guest offset 512 lands at file offset 4608 */
    memset(w, 0xee, sizeof(w));
    g_assert_cmpint(blk_pwrite(blk, 512, sizeof(w), w, 0), ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    read_file(path, 4608, buf, sizeof(w));
    g_assert_cmpmem(buf, sizeof(w), w, sizeof(w));

    /* nothing past the window is reachable */
    g_assert_cmpint(blk_pwrite(blk, 8192, sizeof(w), w, 0), <, 0);
    read_file(path, 4096 + 8192, buf, sizeof(w));
    for (i = 0; i < sizeof(w); i++) {
        g_assert_cmpint(buf[i], ==, pattern_byte(4096 + 8192 + i));
    }
    blk_unref(blk);
}

static void test_window_default_size(void)
{
    g_autofree char *path = make_file("rest.img");
    BlockBackend *blk;
    uint8_t b;

    blk = open_raw(path, "offset=4096", 0);
    g_assert_cmpint(blk_getlength(blk), ==, FILE_SIZE - 4096);
    g_assert_cmpint(blk_pread(blk, 0, 1, &b, 0), ==, 0);
    g_assert_cmpint(b, ==, pattern_byte(4096));
    blk_unref(blk);

    /* the window may be empty */
    blk = open_raw(path, "offset=65536", 0);
    g_assert_cmpint(blk_getlength(blk), ==, 0);
    blk_unref(blk);
}

static void assert_open_error(const char *path, const char *extra,
                              const char *expected)
{
    Error *err = NULL;

    g_assert_null(blk_new_open(NULL, NULL, raw_opts(path, extra), 0, &err));
    g_assert_nonnull(err);
    g_assert_cmpstr(error_get_pretty(err), ==, expected);
    error_free(err);
}

static void test_window_errors(void)
{
    g_autofree char *path = make_file("errors.img");

    assert_open_error(path, "offset=131072",
                      "Offset (131072) cannot be greater than size of the "
                      "containing file (65536)");
    assert_open_error(path, "offset=32768,size=65536",
                      "The sum of offset (32768) and size (65536) has to be "
                      "smaller or equal to the  actual size of the "
                      "containing file (65536)");
    assert_open_error(path, "size=1000",
                      "Specified size is not multiple of 512");
}

static void test_truncate(void)
{
    g_autofree char *path = make_file("truncate.img");
    BlockBackend *blk;
    Error *err = NULL;

    blk = open_raw(path, "offset=4096,size=8192",
                   BDRV_O_RDWR | BDRV_O_RESIZE);
    g_assert_cmpint(blk_truncate(blk, 16384, true, PREALLOC_MODE_OFF, 0,
                                 &err), ==, -ENOTSUP);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Cannot resize fixed-size raw disks");
    error_free(err);
    blk_unref(blk);
    g_assert_cmpint(file_length(path), ==, FILE_SIZE);

    /* without a fixed size the file follows, shifted by the offset */
    blk = open_raw(path, "offset=4096", BDRV_O_RDWR | BDRV_O_RESIZE);
    g_assert_cmpint(blk_truncate(blk, 16384, true, PREALLOC_MODE_OFF, 0,
                                 &error_abort), ==, 0);
    g_assert_cmpint(blk_getlength(blk), ==, 16384);
    blk_unref(blk);
    g_assert_cmpint(file_length(path), ==, 4096 + 16384);
}

static void test_block_status(void)
{
    g_autofree char *path = make_file("status.img");
    BlockDriverState *bs, *file;
    BlockBackend *blk;
    int64_t pnum, map;
    int ret;

    blk = open_raw(path, "offset=4096,size=8192", 0);
    bs = blk_bs(blk);
    ret = bdrv_block_status(bs, 512, 4096, &pnum, &map, &file);
    g_assert_cmpint(ret, >=, 0);
    g_assert_true(ret & BDRV_BLOCK_OFFSET_VALID);
    g_assert_true(ret & BDRV_BLOCK_DATA);
    g_assert_cmpint(pnum, ==, 4096);
    g_assert_cmpint(map, ==, 4096 + 512);
    g_assert_true(file == bs->file->bs);
    blk_unref(blk);
}

static void test_flags_from_file(void)
{
    g_autofree char *path = make_file("flags.img");
    BlockDriverState *bs;
    BlockBackend *blk;
    unsigned passed = BDRV_REQ_FUA | BDRV_REQ_MAY_UNMAP |
                      BDRV_REQ_NO_FALLBACK;

    blk = open_raw(path, NULL, BDRV_O_RDWR);
    bs = blk_bs(blk);
    g_assert_cmpuint(bs->supported_zero_flags & passed, ==,
                     bs->file->bs->supported_zero_flags & passed);
    g_assert_cmpuint(bs->supported_write_flags & BDRV_REQ_FUA, ==,
                     bs->file->bs->supported_write_flags & BDRV_REQ_FUA);
    g_assert_true(bs->supported_write_flags & BDRV_REQ_WRITE_UNCHANGED);
    blk_unref(blk);
}

static void test_create(void)
{
    g_autofree char *path = g_build_filename(test_dir, "created.img", NULL);
    g_autofree char *full = g_build_filename(test_dir, "full.img", NULL);
    QemuOptsList *list = qemu_opts_append(NULL, &qapi_opts_raw_create);
    const BlockDriver *drv = bdrv_find_format("raw");
    QemuOpts *opts;
    struct stat st;

    list = qemu_opts_append(list, &qapi_opts_file_create);
    opts = qemu_opts_create(list);
    qemu_opt_set(opts, "size", "1M", &error_abort);
    g_assert_cmpint(bdrv_create(drv, path, opts, &error_abort), ==, 0);
    g_assert_cmpint(file_length(path), ==, 1 * MiB);

    /* preallocation is the file protocol's option, passed through */
    qemu_opt_set(opts, "preallocation", "full", &error_abort);
    g_assert_cmpint(bdrv_create(drv, full, opts, &error_abort), ==, 0);
    g_assert_cmpint(stat(full, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 1 * MiB);
    g_assert_cmpint(st.st_blocks * 512, >=, 1 * MiB);
    qemu_opts_del(opts);
    qemu_opts_free(list);
}

static void test_probe_score(void)
{
    uint8_t sector[512] = { 0 };

    /* the lowest positive score: any other format that knows the content
     * wins */
    g_assert_cmpint(bdrv_find_format("raw")->bdrv_probe(sector, 512, NULL),
                    ==, 1);
}

static int test_fmt_probe(const uint8_t *buf, int buf_size,
                          const char *filename)
{
    return buf_size >= (int)strlen(TEST_MAGIC) &&
           !memcmp(buf, TEST_MAGIC, strlen(TEST_MAGIC)) ? 100 : 0;
}

static int test_fmt_open(BlockDriverState *bs, QDict *options, int flags,
                         Error **errp)
{
    error_setg(errp, "test-probe-fmt only probes");
    return -ENOTSUP;
}

static int64_t test_fmt_getlength(BlockDriverState *bs)
{
    return 0;
}

static BlockDriver test_probe_fmt = {
    .format_name        = "test-probe-fmt",
    .is_format          = true,
    .bdrv_probe         = test_fmt_probe,
    .bdrv_open          = test_fmt_open,
    .bdrv_getlength     = test_fmt_getlength,
};

static void probed_guard_body(const char *path)
{
    uint8_t sector[512], head[100], check[512], before[512];
    BlockBackend *blk;

    blk = blk_new_open(path, NULL, NULL, BDRV_O_RDWR, &error_abort);
    g_assert_true(blk_bs(blk)->probed);
    g_assert_cmpstr(bdrv_get_format_name(blk_bs(blk)), ==, "raw");
    /* sub-sector writes are read-modify-write of the whole sector */
    g_assert_cmpuint(blk_bs(blk)->bl.request_alignment, >=, 512);

    read_file(path, 0, before, sizeof(before));
    memset(sector, 0, sizeof(sector));
    memcpy(sector, TEST_MAGIC, strlen(TEST_MAGIC));
    g_assert_cmpint(blk_pwrite(blk, 0, sizeof(sector), sector, 0), ==,
                    -EPERM);
    memcpy(head, TEST_MAGIC, strlen(TEST_MAGIC));
    g_assert_cmpint(blk_pwrite(blk, 0, sizeof(head), head, 0), ==, -EPERM);
    read_file(path, 0, check, sizeof(check));
    g_assert_cmpmem(check, sizeof(check), before, sizeof(before));

    /* the magic elsewhere, or other content at 0, is fine */
    g_assert_cmpint(blk_pwrite(blk, 512, sizeof(sector), sector, 0), ==, 0);
    memset(head, 0x11, sizeof(head));
    g_assert_cmpint(blk_pwrite(blk, 0, sizeof(head), head, 0), ==, 0);
    g_assert_cmpint(blk_pwrite_zeroes(blk, 0, 512, 0), ==, 0);
    blk_unref(blk);

    /* with the format given, the guest owns sector 0 */
    blk = open_raw(path, NULL, BDRV_O_RDWR);
    g_assert_false(blk_bs(blk)->probed);
    g_assert_cmpint(blk_pwrite(blk, 0, sizeof(sector), sector, 0), ==, 0);
    blk_unref(blk);
    read_file(path, 0, check, sizeof(check));
    g_assert_cmpmem(check, sizeof(check), sector, sizeof(sector));
}

static void test_probed_guard(void)
{
    g_autofree char *path = make_file("probed.img");

    if (g_test_subprocess()) {
        bdrv_register(&test_probe_fmt);
        probed_guard_body(path);
        return;
    }
    /* in a subprocess: opening a probed raw image read-write warns */
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_passed();
    g_test_trap_assert_stderr("*probing guessed raw*");
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    test_dir = g_dir_make_tmp("test-raw-format-XXXXXX", NULL);
    g_assert_nonnull(test_dir);

    g_test_add_func("/raw-format/window", test_window);
    g_test_add_func("/raw-format/window-default-size",
                    test_window_default_size);
    g_test_add_func("/raw-format/window-errors", test_window_errors);
    g_test_add_func("/raw-format/truncate", test_truncate);
    g_test_add_func("/raw-format/block-status", test_block_status);
    g_test_add_func("/raw-format/flags-from-file", test_flags_from_file);
    g_test_add_func("/raw-format/create", test_create);
    g_test_add_func("/raw-format/probe-score", test_probe_score);
    g_test_add_func("/raw-format/probed-guard", test_probed_guard);
    ret = g_test_run();

    {
        g_autoptr(GDir) dir = g_dir_open(test_dir, 0, NULL);
        const char *name;

        while (dir && (name = g_dir_read_name(dir))) {
            g_autofree char *p = g_build_filename(test_dir, name, NULL);
            unlink(p);
        }
    }
    rmdir(test_dir);
    return ret;
}
