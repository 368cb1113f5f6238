/*
 * In-memory block drivers for the block layer's unit tests.
 *
 * "test-mem" is a protocol that keeps its data in memory, demands the
 * alignment and limits the test sets in test_mem_cfg before opening it, and
 * records every call it gets in test_log (strings such as "read 0 4096" or
 * "write 0 4096 fua"), so tests can assert exactly what reached the driver.
 * "test-fmt" is a pass-through format over a file child that records its
 * flush steps, to check the order of flushes through a graph.
 *
 * The drivers check the guarantees io.c gives them (alignment, limits) and
 * fail the test if one is broken.
 */
#ifndef TEST_MEM_DRIVER_H
#define TEST_MEM_DRIVER_H

#include "block/block_int.h"

typedef struct TestMemConfig {
    int64_t size;
    uint32_t align;
    uint64_t max_transfer;
    /* zero writes: has_zero = driver implements them */
    bool has_zero;
    uint32_t zero_align;
    int64_t max_zeroes;
    bool has_discard;
    uint32_t discard_align;
    int64_t max_discard;
    /* BDRV_REQ_FUA etc. the driver announces for writes */
    unsigned write_flags;
    /* yield to the loop once inside every read/write, to interleave */
    bool yield;
    /* yield once inside flush_to_disk too (flushes then take a while) */
    bool flush_yield;
} TestMemConfig;

static TestMemConfig test_mem_cfg;
static GPtrArray *test_log;

typedef struct BDRVTestMemState {
    TestMemConfig cfg;
    uint8_t *data;
    int64_t size;
} BDRVTestMemState;

static void G_GNUC_PRINTF(1, 2) test_log_add(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    g_ptr_array_add(test_log, g_strdup_vprintf(fmt, ap));
    va_end(ap);
}

static void test_log_reset(void)
{
    if (test_log) {
        g_ptr_array_unref(test_log);
    }
    test_log = g_ptr_array_new_with_free_func(g_free);
}

/* The log as one string, entries separated by "; ", for assertions. */
static char *test_log_str(void)
{
    GString *s = g_string_new("");
    guint i;

    for (i = 0; i < test_log->len; i++) {
        g_string_append_printf(s, "%s%s", i ? "; " : "",
                               (char *)test_log->pdata[i]);
    }
    return g_string_free(s, false);
}

static void test_log_assert(const char *expected)
{
    char *got = test_log_str();

    g_assert_cmpstr(got, ==, expected);
    g_free(got);
    test_log_reset();
}

static void coroutine_fn test_mem_yield(BDRVTestMemState *s)
{
    if (s->cfg.yield) {
        aio_co_schedule(qemu_get_current_aio_context(), qemu_coroutine_self());
        qemu_coroutine_yield();
    }
}

static void test_mem_check_aligned(BDRVTestMemState *s, int64_t offset,
                                   int64_t bytes)
{
    g_assert_cmpint(offset % s->cfg.align, ==, 0);
    g_assert_cmpint(bytes % s->cfg.align, ==, 0);
    if (s->cfg.max_transfer) {
        g_assert_cmpint(bytes, <=, s->cfg.max_transfer);
    }
}

static void test_mem_grow(BDRVTestMemState *s, int64_t end)
{
    if (end > s->size) {
        s->data = g_realloc(s->data, end);
        memset(s->data + s->size, 0, end - s->size);
        s->size = end;
    }
}

static int test_mem_open(BlockDriverState *bs, QDict *options, int flags,
                         Error **errp)
{
    BDRVTestMemState *s = bs->opaque;

    s->cfg = test_mem_cfg;
    if (!s->cfg.align) {
        s->cfg.align = 1;
    }
    s->size = s->cfg.size;
    s->data = g_malloc0(MAX(s->size, 1));
    bs->supported_write_flags = s->cfg.write_flags;
    bs->supported_zero_flags = s->cfg.has_zero ?
        (BDRV_REQ_MAY_UNMAP | BDRV_REQ_NO_FALLBACK) : 0;
    return 0;
}

static void test_mem_close(BlockDriverState *bs)
{
    BDRVTestMemState *s = bs->opaque;

    g_free(s->data);
}

static void test_mem_refresh_limits(BlockDriverState *bs, Error **errp)
{
    BDRVTestMemState *s = bs->opaque;

    bs->bl.request_alignment = s->cfg.align;
    bs->bl.max_transfer = s->cfg.max_transfer;
    bs->bl.pwrite_zeroes_alignment = s->cfg.zero_align;
    bs->bl.max_pwrite_zeroes = s->cfg.max_zeroes;
    bs->bl.pdiscard_alignment = s->cfg.discard_align;
    bs->bl.max_pdiscard = s->cfg.max_discard;
}

static int64_t test_mem_getlength(BlockDriverState *bs)
{
    BDRVTestMemState *s = bs->opaque;

    return s->size;
}

static int coroutine_fn test_mem_preadv(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags)
{
    BDRVTestMemState *s = bs->opaque;
    int64_t avail;

    test_mem_check_aligned(s, offset, bytes);
    g_assert_cmpuint(qiov->size, ==, bytes);
    test_log_add("read %" PRId64 " %" PRId64, offset, bytes);
    test_mem_yield(s);
    avail = MAX(0, MIN(bytes, s->size - offset));
    qemu_iovec_from_buf(qiov, 0, s->data + offset, avail);
    qemu_iovec_memset(qiov, avail, 0, bytes - avail);
    return 0;
}

static int coroutine_fn test_mem_pwritev(BlockDriverState *bs, int64_t offset,
                                         int64_t bytes, QEMUIOVector *qiov,
                                         BdrvRequestFlags flags)
{
    BDRVTestMemState *s = bs->opaque;

    test_mem_check_aligned(s, offset, bytes);
    g_assert_cmpuint(qiov->size, ==, bytes);
    g_assert_cmphex(flags & ~s->cfg.write_flags, ==, 0);
    test_log_add("write %" PRId64 " %" PRId64 "%s", offset, bytes,
                 (flags & BDRV_REQ_FUA) ? " fua" : "");
    test_mem_yield(s);
    test_mem_grow(s, offset + bytes);
    qemu_iovec_to_buf(qiov, 0, s->data + offset, bytes);
    return 0;
}

static int coroutine_fn test_mem_pwrite_zeroes(BlockDriverState *bs,
                                               int64_t offset, int64_t bytes,
                                               BdrvRequestFlags flags)
{
    BDRVTestMemState *s = bs->opaque;

    if (!s->cfg.has_zero) {
        return -ENOTSUP;
    }
    test_mem_check_aligned(s, offset, bytes);
    if (s->cfg.max_zeroes) {
        g_assert_cmpint(bytes, <=, s->cfg.max_zeroes);
    }
    test_log_add("zero %" PRId64 " %" PRId64 "%s", offset, bytes,
                 (flags & BDRV_REQ_MAY_UNMAP) ? " unmap" : "");
    test_mem_grow(s, offset + bytes);
    memset(s->data + offset, 0, bytes);
    return 0;
}

static int coroutine_fn test_mem_pdiscard(BlockDriverState *bs,
                                          int64_t offset, int64_t bytes)
{
    BDRVTestMemState *s = bs->opaque;

    if (!s->cfg.has_discard) {
        return -ENOTSUP;
    }
    test_mem_check_aligned(s, offset, bytes);
    if (s->cfg.max_discard) {
        g_assert_cmpint(bytes, <=, s->cfg.max_discard);
    }
    test_log_add("discard %" PRId64 " %" PRId64, offset, bytes);
    return 0;
}

static int coroutine_fn test_mem_flush_to_disk(BlockDriverState *bs)
{
    BDRVTestMemState *s = bs->opaque;

    test_log_add("mem.flush_to_disk");
    if (s->cfg.flush_yield) {
        aio_co_schedule(qemu_get_current_aio_context(), qemu_coroutine_self());
        qemu_coroutine_yield();
    }
    return 0;
}

static int coroutine_fn test_mem_truncate(BlockDriverState *bs,
                                          int64_t offset, bool exact,
                                          PreallocMode prealloc,
                                          BdrvRequestFlags flags,
                                          Error **errp)
{
    BDRVTestMemState *s = bs->opaque;

    test_log_add("truncate %" PRId64, offset);
    test_mem_grow(s, offset);
    s->size = offset;
    return 0;
}

static BlockDriver bdrv_test_mem = {
    .format_name = "test-mem",
    .instance_size = sizeof(BDRVTestMemState),
    .bdrv_open = test_mem_open,
    .bdrv_close = test_mem_close,
    .bdrv_refresh_limits = test_mem_refresh_limits,
    .bdrv_getlength = test_mem_getlength,
    .bdrv_co_preadv = test_mem_preadv,
    .bdrv_co_pwritev = test_mem_pwritev,
    .bdrv_co_pwrite_zeroes = test_mem_pwrite_zeroes,
    .bdrv_co_pdiscard = test_mem_pdiscard,
    .bdrv_co_flush_to_disk = test_mem_flush_to_disk,
    .bdrv_co_truncate = test_mem_truncate,
};

/* test-fmt: a pass-through format that records its flush steps. */

static int test_fmt_open(BlockDriverState *bs, QDict *options, int flags,
                         Error **errp)
{
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    return bs->file ? 0 : -EINVAL;
}

static int64_t test_fmt_getlength(BlockDriverState *bs)
{
    return bdrv_getlength(bs->file->bs);
}

static int coroutine_fn test_fmt_preadv(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags)
{
    return bdrv_co_preadv(bs->file, offset, bytes, qiov, flags);
}

static int coroutine_fn test_fmt_pwritev(BlockDriverState *bs, int64_t offset,
                                         int64_t bytes, QEMUIOVector *qiov,
                                         BdrvRequestFlags flags)
{
    return bdrv_co_pwritev(bs->file, offset, bytes, qiov, flags);
}

static int coroutine_fn test_fmt_truncate(BlockDriverState *bs,
                                          int64_t offset, bool exact,
                                          PreallocMode prealloc,
                                          BdrvRequestFlags flags,
                                          Error **errp)
{
    return bdrv_co_truncate(bs->file, offset, exact, prealloc, flags, errp);
}

static int coroutine_fn test_fmt_flush_to_os(BlockDriverState *bs)
{
    test_log_add("fmt.flush_to_os");
    return 0;
}

static int coroutine_fn test_fmt_flush_to_disk(BlockDriverState *bs)
{
    test_log_add("fmt.flush_to_disk");
    return 0;
}

static BlockDriver bdrv_test_fmt = {
    .format_name = "test-fmt",
    .instance_size = 1,
    .is_format = true,
    .bdrv_open = test_fmt_open,
    .bdrv_getlength = test_fmt_getlength,
    .bdrv_co_preadv = test_fmt_preadv,
    .bdrv_co_pwritev = test_fmt_pwritev,
    .bdrv_co_truncate = test_fmt_truncate,
    .bdrv_co_flush_to_os = test_fmt_flush_to_os,
    .bdrv_co_flush_to_disk = test_fmt_flush_to_disk,
};

static void test_drivers_register(void)
{
    bdrv_init();
    bdrv_register(&bdrv_test_mem);
    bdrv_register(&bdrv_test_fmt);
    test_log_reset();
}

/* Sets test_mem_cfg to a default 1 MiB image with @align alignment. */
static void test_mem_cfg_reset(uint32_t align)
{
    test_mem_cfg = (TestMemConfig) {
        .size = 1 * MiB,
        .align = align,
    };
}

/*
 * Opens test-fmt over test-mem (configured by test_mem_cfg), with extra
 * @opts (consumed, may be NULL) such as "file.detect-zeroes".
 */
static BlockDriverState *test_open_fmt_opts(int flags, QDict *opts)
{
    BlockDriverState *bs;

    if (!opts) {
        opts = qdict_new();
    }
    qdict_put_str(opts, "driver", "test-fmt");
    qdict_put_str(opts, "file.driver", "test-mem");
    bs = bdrv_open(NULL, NULL, opts, flags, &error_abort);
    g_assert_nonnull(bs);
    test_log_reset();
    return bs;
}

static G_GNUC_UNUSED BlockDriverState *test_open_fmt(int flags)
{
    return test_open_fmt_opts(flags, NULL);
}

#endif
