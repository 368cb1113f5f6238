/*
 * block/null.c: null-co and null-aio store nothing, read zeroes only when
 * asked to, report block status as QEMU does, and differ in how they
 * complete: null-co in the calling coroutine, null-aio from the event loop.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"

static BlockBackend *open_null(const char *filename, const char *options)
{
    QDict *opts = options ? keyval_parse(options, NULL, &error_abort) : NULL;

    return blk_new_open(filename, NULL, opts, BDRV_O_RDWR, &error_abort);
}

/* As with QEMU, a bare "null-co://" probes as raw over the null node. */
static void check_filename(const char *filename, const char *driver)
{
    BlockBackend *blk;
    BlockDriverState *bs;

    blk = blk_new_open(filename, NULL, NULL, 0, &error_abort);
    bs = blk_bs(blk);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "raw");
    g_assert_cmpstr(bdrv_get_format_name(bs->file->bs), ==, driver);
    g_assert_cmpint(blk_getlength(blk), ==, 1 * GiB);
    blk_unref(blk);
}

static void test_filename_and_default_size(void)
{
    check_filename("null-co://", "null-co");
    check_filename("null-aio://", "null-aio");
}

static void test_exact_filename(void)
{
    BlockBackend *blk;

    /* latency only changes timing: the bare name still opens the same */
    blk = open_null(NULL, "driver=null-aio,latency-ns=5");
    g_assert_cmpstr(blk_bs(blk)->filename, ==, "null-aio://");
    blk_unref(blk);

    blk = open_null(NULL, "driver=null-co,size=1M");
    g_assert_true(g_str_has_prefix(blk_bs(blk)->filename, "json:"));
    g_assert_nonnull(strstr(blk_bs(blk)->filename, "\"size\""));
    blk_unref(blk);
}

static void test_bad_filename(void)
{
    Error *err = NULL;

    g_assert_null(blk_new_open("null-co://x", NULL, NULL, 0, &err));
    g_assert_nonnull(err);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "The only allowed filename for this driver is "
                    "'null-co://'");
    error_free(err);
}

static void test_size_option(void)
{
    BlockBackend *blk = open_null(NULL, "driver=null-aio,size=64M");

    g_assert_cmpint(blk_getlength(blk), ==, 64 * MiB);
    blk_unref(blk);
}

static void check_read_zeroes(const char *driver)
{
    g_autofree char *plain = g_strdup_printf("driver=%s,size=1M", driver);
    g_autofree char *zeroes =
        g_strdup_printf("driver=%s,size=1M,read-zeroes=on", driver);
    uint8_t buf[4096], zero[4096] = { 0 }, fill[4096];
    BlockBackend *blk;

    memset(fill, 0xa5, sizeof(fill));

    /* without read-zeroes the buffer is left as it was */
    blk = open_null(NULL, plain);
    memcpy(buf, fill, sizeof(buf));
    g_assert_cmpint(blk_pread(blk, 4096, sizeof(buf), buf, 0), ==, 0);
    g_assert_cmpmem(buf, sizeof(buf), fill, sizeof(fill));
    blk_unref(blk);

    blk = open_null(NULL, zeroes);
    memcpy(buf, fill, sizeof(buf));
    g_assert_cmpint(blk_pread(blk, 4096, sizeof(buf), buf, 0), ==, 0);
    g_assert_cmpmem(buf, sizeof(buf), zero, sizeof(zero));

    /* writes are dropped: the data does not come back */
    g_assert_cmpint(blk_pwrite(blk, 4096, sizeof(fill), fill, 0), ==, 0);
    g_assert_cmpint(blk_pread(blk, 4096, sizeof(buf), buf, 0), ==, 0);
    g_assert_cmpmem(buf, sizeof(buf), zero, sizeof(zero));
    g_assert_cmpint(blk_pwrite_zeroes(blk, 0, 8192, 0), ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    blk_unref(blk);
}

static void test_read_zeroes_co(void)
{
    check_read_zeroes("null-co");
}

static void test_read_zeroes_aio(void)
{
    check_read_zeroes("null-aio");
}

static void check_block_status(const char *driver)
{
    g_autofree char *plain = g_strdup_printf("driver=%s,size=1M", driver);
    g_autofree char *zeroes =
        g_strdup_printf("driver=%s,size=1M,read-zeroes=on", driver);
    BlockDriverState *file;
    BlockBackend *blk;
    int64_t pnum, map;
    int ret;

    /* QEMU reports neither data nor zeroes: qemu-img map shows the range
     * as not present */
    blk = open_null(NULL, plain);
    ret = bdrv_block_status(blk_bs(blk), 4096, 65536, &pnum, &map, &file);
    g_assert_cmpint(ret, >=, 0);
    g_assert_cmpint(ret & (BDRV_BLOCK_DATA | BDRV_BLOCK_ZERO |
                           BDRV_BLOCK_ALLOCATED), ==, 0);
    g_assert_true(ret & BDRV_BLOCK_OFFSET_VALID);
    g_assert_cmpint(pnum, ==, 65536);
    g_assert_cmpint(map, ==, 4096);
    g_assert_true(file == blk_bs(blk));
    blk_unref(blk);

    blk = open_null(NULL, zeroes);
    ret = bdrv_block_status(blk_bs(blk), 4096, 65536, &pnum, &map, &file);
    g_assert_cmpint(ret, >=, 0);
    g_assert_true(ret & BDRV_BLOCK_ZERO);
    g_assert_true(ret & BDRV_BLOCK_OFFSET_VALID);
    g_assert_false(ret & BDRV_BLOCK_DATA);
    g_assert_cmpint(pnum, ==, 65536);
    g_assert_cmpint(map, ==, 4096);
    blk_unref(blk);
}

static void test_block_status_co(void)
{
    check_block_status("null-co");
}

static void test_block_status_aio(void)
{
    check_block_status("null-aio");
}

typedef struct ReadCo {
    BlockBackend *blk;
    bool done;
    int ret;
} ReadCo;

static void coroutine_fn read_co_entry(void *opaque)
{
    ReadCo *rc = opaque;
    uint8_t buf[512];
    QEMUIOVector qiov;

    qemu_iovec_init_buf(&qiov, buf, sizeof(buf));
    rc->ret = blk_co_preadv(rc->blk, 0, sizeof(buf), &qiov, 0);
    rc->done = true;
}

/* Starts a read in a coroutine; returns whether it finished before the
 * coroutine first yielded. */
static bool read_completes_inline(BlockBackend *blk, ReadCo *rc)
{
    Coroutine *co;
    bool inline_done;

    *rc = (ReadCo) { .blk = blk };
    co = qemu_coroutine_create(read_co_entry, rc);
    qemu_coroutine_enter(co);
    inline_done = rc->done;
    while (!rc->done) {
        aio_poll(blk_get_aio_context(blk), true);
    }
    g_assert_cmpint(rc->ret, ==, 0);
    return inline_done;
}

static void test_co_completes_without_yield(void)
{
    BlockBackend *blk = open_null(NULL, "driver=null-co");
    ReadCo rc;

    /* the benchmark path: nothing but the call chain */
    g_assert_true(read_completes_inline(blk, &rc));
    blk_unref(blk);
}

static void test_aio_completes_from_loop(void)
{
    BlockBackend *blk = open_null(NULL, "driver=null-aio");
    ReadCo rc;

    g_assert_false(read_completes_inline(blk, &rc));
    blk_unref(blk);
}

static void check_latency(const char *driver)
{
    g_autofree char *o = g_strdup_printf("driver=%s,latency-ns=20000000",
                                         driver);
    BlockBackend *blk = open_null(NULL, o);
    uint8_t buf[512];
    int64_t start = get_clock_ns();

    g_assert_cmpint(blk_pread(blk, 0, sizeof(buf), buf, 0), ==, 0);
    g_assert_cmpint(get_clock_ns() - start, >=, 20000000);
    blk_unref(blk);
}

static void test_latency_co(void)
{
    check_latency("null-co");
}

static void test_latency_aio(void)
{
    check_latency("null-aio");
}

static void test_bad_option(void)
{
    Error *err = NULL;

    g_assert_null(blk_new_open(NULL, NULL,
                               keyval_parse("driver=null-co,read-zeroes=maybe",
                                            NULL, &error_abort),
                               0, &err));
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(error_get_pretty(err), "read-zeroes"));
    error_free(err);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();

    g_test_add_func("/null/filename", test_filename_and_default_size);
    g_test_add_func("/null/exact-filename", test_exact_filename);
    g_test_add_func("/null/bad-filename", test_bad_filename);
    g_test_add_func("/null/size", test_size_option);
    g_test_add_func("/null/bad-option", test_bad_option);
    g_test_add_func("/null/co/read-zeroes", test_read_zeroes_co);
    g_test_add_func("/null/aio/read-zeroes", test_read_zeroes_aio);
    g_test_add_func("/null/co/block-status", test_block_status_co);
    g_test_add_func("/null/aio/block-status", test_block_status_aio);
    g_test_add_func("/null/co/no-yield", test_co_completes_without_yield);
    g_test_add_func("/null/aio/from-loop", test_aio_completes_from_loop);
    g_test_add_func("/null/co/latency", test_latency_co);
    g_test_add_func("/null/aio/latency", test_latency_aio);
    return g_test_run();
}
