/*
 * block/io.c: what reaches a driver for each kind of request.
 *
 * Requests go through the edge test-fmt -> test-mem, so io.c shapes them
 * for test-mem, which demands the alignment and limits each test sets and
 * records every call it gets.
 */

#include "test-mem-driver.h"
#include "qblock/block-backend.h"

/* Fills @len bytes with a pattern derived from @seed. */
static void fill(uint8_t *buf, size_t len, uint8_t seed)
{
    size_t i;

    for (i = 0; i < len; i++) {
        buf[i] = seed + i * 7;
    }
}

static BdrvChild *file_of(BlockDriverState *bs)
{
    return bs->file;
}

static void test_aligned_passthrough(void)
{
    BlockDriverState *bs;
    uint8_t *w = g_malloc(8192), *r = g_malloc(8192);

    test_mem_cfg_reset(4096);
    bs = test_open_fmt(BDRV_O_RDWR);
    fill(w, 8192, 1);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 4096, 8192, w, 0), ==, 0);
    g_assert_cmpint(bdrv_pread(file_of(bs), 4096, 8192, r, 0), ==, 0);
    test_log_assert("write 4096 8192; read 4096 8192");
    g_assert_cmpmem(w, 8192, r, 8192);
    g_assert_cmpuint(bs->file->bs->stats.writes, ==, 1);
    g_assert_cmpuint(bs->file->bs->stats.bytes_written, ==, 8192);
    g_assert_cmpuint(bs->file->bs->stats.reads, ==, 1);
    bdrv_unref(bs);
    g_free(w);
    g_free(r);
}

static void test_unaligned_read(void)
{
    BlockDriverState *bs;
    uint8_t w[8192], r[600];

    test_mem_cfg_reset(4096);
    bs = test_open_fmt(BDRV_O_RDWR);
    fill(w, sizeof(w), 3);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, 8192, w, 0), ==, 0);
    test_log_reset();

    /* inside one block */
    g_assert_cmpint(bdrv_pread(file_of(bs), 100, 500, r, 0), ==, 0);
    g_assert_cmpmem(r, 500, w + 100, 500);
    test_log_assert("read 0 4096");

    /* across a block boundary: one widened read */
    g_assert_cmpint(bdrv_pread(file_of(bs), 4000, 600, r, 0), ==, 0);
    g_assert_cmpmem(r, 600, w + 4000, 600);
    test_log_assert("read 0 8192");
    bdrv_unref(bs);
}

static void test_unaligned_write_rmw(void)
{
    BlockDriverState *bs;
    uint8_t old[12288], w[5000], r[12288];

    test_mem_cfg_reset(4096);
    bs = test_open_fmt(BDRV_O_RDWR);
    fill(old, sizeof(old), 5);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, sizeof(old), old, 0), ==, 0);
    test_log_reset();

    /* inside one block: read it, write it back merged */
    fill(w, 512, 9);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 1000, 512, w, 0), ==, 0);
    test_log_assert("read 0 4096; write 0 4096");
    memcpy(old + 1000, w, 512);

    /* head in block 0, tail in block 2: both edge blocks read */
    fill(w, 5000, 11);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 3000, 5000, w, 0), ==, 0);
    test_log_assert("read 0 4096; read 4096 4096; write 0 8192");
    memcpy(old + 3000, w, 5000);

    g_assert_cmpint(bdrv_pread(file_of(bs), 0, sizeof(r), r, 0), ==, 0);
    g_assert_cmpmem(r, sizeof(r), old, sizeof(old));
    bdrv_unref(bs);
}

typedef struct WriteCo {
    BdrvChild *child;
    int64_t offset;
    int64_t bytes;
    uint8_t *buf;
    BdrvRequestFlags flags;
    int ret;
    bool done;
} WriteCo;

static void coroutine_fn write_co_entry(void *opaque)
{
    WriteCo *wc = opaque;
    QEMUIOVector qiov;

    qemu_iovec_init_buf(&qiov, wc->buf, wc->bytes);
    wc->ret = bdrv_co_pwritev(wc->child, wc->offset, wc->bytes, &qiov,
                              wc->flags);
    wc->done = true;
}

/*
 * Two unaligned writes into one 4096-byte block, interleaved by a driver
 * that yields inside every call: without serialisation both would read the
 * old block and the second write would undo the first.
 */
static void test_concurrent_unaligned_writes(void)
{
    BlockDriverState *bs;
    uint8_t a[512], b[512], r[4096], expect[4096];
    WriteCo wa, wb;

    test_mem_cfg_reset(4096);
    test_mem_cfg.yield = true;
    bs = test_open_fmt(BDRV_O_RDWR);
    fill(a, sizeof(a), 21);
    fill(b, sizeof(b), 77);
    wa = (WriteCo) { .child = file_of(bs), .offset = 0, .bytes = 512,
                     .buf = a };
    wb = (WriteCo) { .child = file_of(bs), .offset = 1024, .bytes = 512,
                     .buf = b };
    qemu_coroutine_enter(qemu_coroutine_create(write_co_entry, &wa));
    qemu_coroutine_enter(qemu_coroutine_create(write_co_entry, &wb));
    AIO_WAIT_WHILE(qemu_get_aio_context(), !wa.done || !wb.done);
    g_assert_cmpint(wa.ret, ==, 0);
    g_assert_cmpint(wb.ret, ==, 0);
    /* the second RMW started only after the first one's write */
    test_log_assert("read 0 4096; write 0 4096; read 0 4096; write 0 4096");

    memset(expect, 0, sizeof(expect));
    memcpy(expect, a, 512);
    memcpy(expect + 1024, b, 512);
    g_assert_cmpint(bdrv_pread(file_of(bs), 0, 4096, r, 0), ==, 0);
    g_assert_cmpmem(r, 4096, expect, 4096);
    g_assert_cmpuint(bs->file->bs->serialising_in_flight, ==, 0);
    g_assert_null(bs->file->bs->tracked_requests);
    bdrv_unref(bs);
}

/* Aligned writes to different blocks do not wait for each other. */
static void test_aligned_writes_not_serialised(void)
{
    BlockDriverState *bs;
    uint8_t a[4096], b[4096];
    WriteCo wa, wb;

    test_mem_cfg_reset(4096);
    test_mem_cfg.yield = true;
    bs = test_open_fmt(BDRV_O_RDWR);
    wa = (WriteCo) { .child = file_of(bs), .offset = 0, .bytes = 4096,
                     .buf = a };
    wb = (WriteCo) { .child = file_of(bs), .offset = 4096, .bytes = 4096,
                     .buf = b };
    qemu_coroutine_enter(qemu_coroutine_create(write_co_entry, &wa));
    qemu_coroutine_enter(qemu_coroutine_create(write_co_entry, &wb));
    /* both reached the driver before either completed */
    test_log_assert("write 0 4096; write 4096 4096");
    g_assert_cmpuint(bs->file->bs->in_flight, ==, 2);
    AIO_WAIT_WHILE(qemu_get_aio_context(), !wa.done || !wb.done);
    g_assert_cmpuint(bs->file->bs->in_flight, ==, 0);
    bdrv_unref(bs);
}

static void test_fua_emulated(void)
{
    BlockDriverState *bs;
    uint8_t w[4096] = { 1 };

    test_mem_cfg_reset(512);
    bs = test_open_fmt(BDRV_O_RDWR);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, 4096, w, BDRV_REQ_FUA), ==,
                    0);
    test_log_assert("write 0 4096; mem.flush_to_disk");
    g_assert_cmpuint(bs->file->bs->stats.flushes, ==, 1);
    bdrv_unref(bs);
}

static void test_fua_native(void)
{
    BlockDriverState *bs;
    uint8_t w[4096] = { 1 };

    test_mem_cfg_reset(512);
    test_mem_cfg.write_flags = BDRV_REQ_FUA;
    bs = test_open_fmt(BDRV_O_RDWR);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, 4096, w, BDRV_REQ_FUA), ==,
                    0);
    test_log_assert("write 0 4096 fua");
    g_assert_cmpuint(bs->file->bs->stats.flushes, ==, 0);
    bdrv_unref(bs);
}

/* Split at max_transfer, an emulated FUA flushes once, after the last. */
static void test_max_transfer_split(void)
{
    BlockDriverState *bs;
    uint8_t *w = g_malloc(32768), *r = g_malloc(32768);

    test_mem_cfg_reset(512);
    test_mem_cfg.max_transfer = 8192;
    bs = test_open_fmt(BDRV_O_RDWR);
    fill(w, 32768, 2);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, 20480, w, BDRV_REQ_FUA), ==,
                    0);
    test_log_assert("write 0 8192; write 8192 8192; write 16384 4096; "
                    "mem.flush_to_disk");
    g_assert_cmpint(bdrv_pread(file_of(bs), 0, 20480, r, 0), ==, 0);
    test_log_assert("read 0 8192; read 8192 8192; read 16384 4096");
    g_assert_cmpmem(r, 20480, w, 20480);
    bdrv_unref(bs);
    g_free(w);
    g_free(r);
}

static void test_detect_zeroes(void)
{
    BlockDriverState *bs;
    QDict *opts;
    uint8_t z[4096] = { 0 }, nz[4096] = { 1 };

    test_mem_cfg_reset(512);
    test_mem_cfg.has_zero = true;

    /* off (the default): a zero buffer is written as data */
    bs = test_open_fmt(BDRV_O_RDWR);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, 4096, z, 0), ==, 0);
    test_log_assert("write 0 4096");
    bdrv_unref(bs);

    /* on: it becomes a zero write, never an unmapping one */
    opts = qdict_new();
    qdict_put_str(opts, "file.detect-zeroes", "on");
    qdict_put_str(opts, "file.discard", "unmap");
    bs = test_open_fmt_opts(BDRV_O_RDWR, opts);
    g_assert_cmpint(bs->file->bs->detect_zeroes, ==,
                    BLOCKDEV_DETECT_ZEROES_OPTIONS_ON);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, 4096, z, 0), ==, 0);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 4096, 4096, nz, 0), ==, 0);
    test_log_assert("zero 0 4096; write 4096 4096");
    bdrv_unref(bs);

    /* unmap, with discard=unmap: the zero write may unmap */
    opts = qdict_new();
    qdict_put_str(opts, "file.detect-zeroes", "unmap");
    qdict_put_str(opts, "file.discard", "unmap");
    bs = test_open_fmt_opts(BDRV_O_RDWR, opts);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, 4096, z, 0), ==, 0);
    test_log_assert("zero 0 4096 unmap");
    bdrv_unref(bs);
}

static void test_zero_write_driver(void)
{
    BlockDriverState *bs;

    test_mem_cfg_reset(512);
    test_mem_cfg.has_zero = true;
    test_mem_cfg.zero_align = 4096;
    test_mem_cfg.max_zeroes = 8192;
    bs = test_open_fmt(BDRV_O_RDWR);
    /* head up to the zero alignment, aligned bulk in max pieces, tail */
    g_assert_cmpint(bdrv_pwrite_zeroes(file_of(bs), 3584, 13312, 0), ==, 0);
    test_log_assert("zero 3584 512; zero 4096 8192; zero 12288 4096; "
                    "zero 16384 512");
    /* the file child inherits discard=unmap; here it is as if ignored */
    g_assert_cmpint(bdrv_pwrite_zeroes(file_of(bs), 0, 4096,
                                       BDRV_REQ_MAY_UNMAP), ==, 0);
    test_log_assert("zero 0 4096 unmap");
    bs->file->bs->open_flags &= ~BDRV_O_UNMAP;
    g_assert_cmpint(bdrv_pwrite_zeroes(file_of(bs), 0, 4096,
                                       BDRV_REQ_MAY_UNMAP), ==, 0);
    test_log_assert("zero 0 4096");
    bdrv_unref(bs);
}

static void test_zero_write_fallback(void)
{
    BlockDriverState *bs;
    uint8_t w[16384], r[16384];

    test_mem_cfg_reset(512);
    test_mem_cfg.max_transfer = 4096;
    bs = test_open_fmt(BDRV_O_RDWR);
    fill(w, sizeof(w), 40);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, sizeof(w), w, 0), ==, 0);
    test_log_reset();

    g_assert_cmpint(bdrv_pwrite_zeroes(file_of(bs), 1024, 10240, 0), ==, 0);
    test_log_assert("write 1024 4096; write 5120 4096; write 9216 2048");
    memset(w + 1024, 0, 10240);
    g_assert_cmpint(bdrv_pread(file_of(bs), 0, sizeof(r), r, 0), ==, 0);
    g_assert_cmpmem(r, sizeof(r), w, sizeof(w));
    test_log_reset();

    /* NO_FALLBACK: the driver cannot promise, nothing is written */
    g_assert_cmpint(bdrv_pwrite_zeroes(file_of(bs), 0, 4096,
                                       BDRV_REQ_NO_FALLBACK), ==, -ENOTSUP);
    test_log_assert("");
    bdrv_unref(bs);
}

/* An unaligned zero write rewrites the edge blocks, zeroes the middle. */
static void test_zero_write_unaligned(void)
{
    BlockDriverState *bs;
    uint8_t w[16384], r[16384];

    test_mem_cfg_reset(4096);
    test_mem_cfg.has_zero = true;
    bs = test_open_fmt(BDRV_O_RDWR);
    fill(w, sizeof(w), 60);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, sizeof(w), w, 0), ==, 0);
    test_log_reset();
    g_assert_cmpint(bdrv_pwrite_zeroes(file_of(bs), 1000, 12000, 0), ==, 0);
    test_log_assert("read 0 4096; write 0 4096; zero 4096 8192; "
                    "read 12288 4096; write 12288 4096");
    memset(w + 1000, 0, 12000);
    g_assert_cmpint(bdrv_pread(file_of(bs), 0, sizeof(r), r, 0), ==, 0);
    g_assert_cmpmem(r, sizeof(r), w, sizeof(w));
    bdrv_unref(bs);
}

static void coroutine_fn discard_co_entry(void *opaque)
{
    WriteCo *wc = opaque;

    wc->ret = bdrv_co_pdiscard(wc->child, wc->offset, wc->bytes);
    wc->done = true;
}

static int run_discard(BdrvChild *child, int64_t offset, int64_t bytes)
{
    WriteCo wc = { .child = child, .offset = offset, .bytes = bytes };

    qemu_coroutine_enter(qemu_coroutine_create(discard_co_entry, &wc));
    AIO_WAIT_WHILE(qemu_get_aio_context(), !wc.done);
    return wc.ret;
}

static void test_discard(void)
{
    BlockDriverState *bs;
    QDict *opts;

    test_mem_cfg_reset(512);
    test_mem_cfg.has_discard = true;
    test_mem_cfg.discard_align = 4096;
    test_mem_cfg.max_discard = 8192;

    /* discard=ignore: succeeds, the driver sees nothing */
    bs = test_open_fmt(BDRV_O_RDWR);
    bs->file->bs->open_flags &= ~BDRV_O_UNMAP;
    g_assert_cmpint(run_discard(file_of(bs), 0, 65536), ==, 0);
    test_log_assert("");
    g_assert_cmpuint(bs->file->bs->stats.discards, ==, 0);
    bdrv_unref(bs);

    opts = qdict_new();
    qdict_put_str(opts, "file.discard", "unmap");
    bs = test_open_fmt_opts(BDRV_O_RDWR, opts);
    /* partial sectors dropped; pieces aligned and at most max_pdiscard */
    g_assert_cmpint(run_discard(file_of(bs), 3000, 20000), ==, 0);
    test_log_assert("discard 3072 1024; discard 4096 8192; "
                    "discard 12288 8192; discard 20480 2048");
    g_assert_cmpint(run_discard(file_of(bs), 100, 200), ==, 0);
    test_log_assert("");
    bdrv_unref(bs);
}

/* Invariant 6: write hooks see each write after it reached the driver. */
static void coroutine_fn test_hook_after_write(BdrvWriteHook *hook,
                                               int64_t offset, int64_t bytes,
                                               QEMUIOVector *qiov, int ret)
{
    test_log_add("hook %" PRId64 " %" PRId64 " %s %d", offset, bytes,
                 qiov ? "data" : "none", ret);
}

static void test_write_hooks(void)
{
    static BdrvWriteHook hook = { .after_write = test_hook_after_write };
    uint8_t buf[1000];
    BlockDriverState *bs;
    QDict *opts = qdict_new();

    test_mem_cfg_reset(512);
    test_mem_cfg.has_discard = true;
    qdict_put_str(opts, "file.discard", "unmap");
    bs = test_open_fmt_opts(BDRV_O_RDWR, opts);
    bdrv_add_write_hook(bs->file->bs, &hook);
    memset(buf, 1, sizeof(buf));
    /* unaligned: the caller's range, after the read-modify-write */
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 100, 1000, buf, 0), ==, 0);
    test_log_assert("read 0 512; read 1024 512; write 0 1536; "
                    "hook 100 1000 data 0");
    g_assert_cmpint(bdrv_pwrite_zeroes(file_of(bs), 2048, 512, 0), ==, 0);
    test_log_assert("write 2048 512; hook 2048 512 none 0");
    g_assert_cmpint(run_discard(file_of(bs), 4096, 4096), ==, 0);
    test_log_assert("discard 4096 4096; hook 4096 4096 none 0");
    /* reads are not shown; a removed hook sees nothing more */
    g_assert_cmpint(bdrv_pread(file_of(bs), 0, 512, buf, 0), ==, 0);
    bdrv_remove_write_hook(bs->file->bs, &hook);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, 512, buf, 0), ==, 0);
    test_log_assert("read 0 512; write 0 512");
    bdrv_unref(bs);
}

/* block_int.h's order: flush_to_os, children, flush_to_disk. */
static void test_flush_order(void)
{
    BlockDriverState *bs;
    BlockBackend *blk;
    uint8_t w[512] = { 1 };

    test_mem_cfg_reset(512);
    bs = test_open_fmt(BDRV_O_RDWR);
    blk = blk_new(qemu_get_aio_context(),
                  BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE, BLK_PERM_ALL);
    g_assert_cmpint(blk_insert_bs(blk, bs, &error_abort), ==, 0);
    g_assert_cmpint(blk_pwrite(blk, 0, 512, w, 0), ==, 0);
    test_log_reset();
    g_assert_cmpint(bdrv_flush(bs), ==, 0);
    test_log_assert("fmt.flush_to_os; mem.flush_to_disk; fmt.flush_to_disk");
    g_assert_cmpuint(bs->file->bs->stats.flushes, ==, 1);
    g_assert_cmpuint(bs->stats.flushes, ==, 1);

    /* nothing written since: the disk steps are skipped */
    g_assert_cmpint(bdrv_flush(bs), ==, 0);
    test_log_assert("fmt.flush_to_os");
    g_assert_cmpuint(bs->file->bs->stats.flushes, ==, 1);
    blk_unref(blk);
    bdrv_unref(bs);
}

/* cache.no-flush (cache=unsafe): only flush_to_os happens. */
static void test_no_flush(void)
{
    BlockDriverState *bs;
    uint8_t w[512] = { 1 };

    test_mem_cfg_reset(512);
    bs = test_open_fmt(BDRV_O_RDWR | BDRV_O_NO_FLUSH);
    g_assert_true(bs->file->bs->open_flags & BDRV_O_NO_FLUSH);
    g_assert_cmpint(bdrv_pwrite(bs->file, 0, 512, w, 0), ==, 0);
    test_log_reset();
    g_assert_cmpint(bdrv_flush(bs), ==, 0);
    g_assert_cmpint(bdrv_pwrite(bs->file, 0, 512, w, BDRV_REQ_FUA), ==, 0);
    test_log_assert("fmt.flush_to_os; write 0 512");
    g_assert_cmpuint(bs->file->bs->stats.flushes, ==, 0);
    bdrv_unref(bs);
}

static void test_read_past_eof(void)
{
    BlockDriverState *bs;
    uint8_t w[4096], r[8192], expect[8192];

    test_mem_cfg_reset(4096);
    test_mem_cfg.size = 4096;
    bs = test_open_fmt(BDRV_O_RDWR);
    fill(w, sizeof(w), 80);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, 4096, w, 0), ==, 0);
    test_log_reset();
    memset(r, 0xaa, sizeof(r));
    g_assert_cmpint(bdrv_pread(file_of(bs), 2048, 8192, r, 0), ==, 0);
    /* only the block that exists reaches the driver */
    test_log_assert("read 0 4096");
    memset(expect, 0, sizeof(expect));
    memcpy(expect, w + 2048, 2048);
    g_assert_cmpmem(r, sizeof(r), expect, sizeof(expect));
    bdrv_unref(bs);
}

static void test_errors(void)
{
    BlockDriverState *bs;
    uint8_t buf[512] = { 0 };
    BdrvChild nomedium = { 0 };

    test_mem_cfg_reset(512);
    bs = test_open_fmt(0);
    g_assert_true(bs->file->bs->read_only);
    g_assert_cmpint(bdrv_pwrite(file_of(bs), 0, 512, buf, 0), ==, -EPERM);
    g_assert_cmpint(bdrv_pwrite_zeroes(file_of(bs), 0, 512, 0), ==, -EPERM);
    g_assert_cmpint(bdrv_pread(file_of(bs), -512, 512, buf, 0), ==, -EIO);
    g_assert_cmpint(bdrv_pread(file_of(bs), INT64_MAX - 256, 512, buf, 0),
                    ==, -EIO);
    g_assert_cmpint(bdrv_pread(&nomedium, 0, 512, buf, 0), ==, -ENOMEDIUM);
    /* flushing a read-only node has nothing to do */
    g_assert_cmpint(bdrv_flush(bs->file->bs), ==, 0);
    test_log_assert("");
    bdrv_unref(bs);
}

static void test_truncate(void)
{
    BlockDriverState *bs;
    Error *err = NULL;

    test_mem_cfg_reset(512);
    bs = test_open_fmt(BDRV_O_RDWR);
    bs->file->perm |= BLK_PERM_RESIZE;
    g_assert_cmpint(bdrv_truncate(bs->file, 2 * MiB, true, PREALLOC_MODE_OFF,
                                  0, &error_abort), ==, 0);
    test_log_assert("truncate 2097152");
    g_assert_cmpint(bdrv_getlength(bs->file->bs), ==, 2 * MiB);

    g_assert_cmpint(bdrv_truncate(bs->file, -1, true, PREALLOC_MODE_OFF, 0,
                                  &err), ==, -EINVAL);
    error_free_or_abort(&err);

    /* without the resize permission on the edge */
    bs->file->perm &= ~BLK_PERM_RESIZE;
    g_assert_cmpint(bdrv_truncate(bs->file, MiB, true, PREALLOC_MODE_OFF, 0,
                                  &err), ==, -EPERM);
    error_free_or_abort(&err);
    test_log_assert("");
    bdrv_unref(bs);
}

static void test_block_status(void)
{
    BlockDriverState *bs;
    BlockDriverState *file;
    int64_t pnum, map;
    int ret;

    test_mem_cfg_reset(512);
    bs = test_open_fmt(BDRV_O_RDWR);
    /* a protocol without a callback: all data, at its own offsets */
    ret = bdrv_block_status(bs->file->bs, 4096, MiB, &pnum, &map, &file);
    g_assert_cmpint(ret, ==, BDRV_BLOCK_DATA | BDRV_BLOCK_ALLOCATED |
                    BDRV_BLOCK_OFFSET_VALID | BDRV_BLOCK_EOF);
    g_assert_cmpint(pnum, ==, MiB - 4096);
    g_assert_cmpint(map, ==, 4096);
    g_assert_true(file == bs->file->bs);

    ret = bdrv_block_status(bs->file->bs, 0, 4096, &pnum, NULL, NULL);
    g_assert_cmpint(ret & BDRV_BLOCK_EOF, ==, 0);
    g_assert_cmpint(pnum, ==, 4096);

    /* at or past the end */
    ret = bdrv_block_status(bs->file->bs, MiB, 4096, &pnum, NULL, NULL);
    g_assert_cmpint(ret, ==, BDRV_BLOCK_EOF);
    g_assert_cmpint(pnum, ==, 0);

    g_assert_cmpint(bdrv_is_allocated(bs->file->bs, 0, 4096, &pnum), ==, 1);
    g_assert_cmpint(pnum, ==, 4096);

    /* a format without a callback and without backing: allocated data */
    ret = bdrv_block_status_above(bs, NULL, 0, 4096, &pnum, NULL, NULL,
                                  NULL);
    g_assert_cmpint(ret & BDRV_BLOCK_ALLOCATED, ==, BDRV_BLOCK_ALLOCATED);
    bdrv_unref(bs);
}

/* bdrv_drain returns only when the requests in flight are done. */
static void test_drain(void)
{
    BlockDriverState *bs;
    uint8_t a[4096], b[4096];
    WriteCo wa, wb;

    test_mem_cfg_reset(512);
    test_mem_cfg.yield = true;
    bs = test_open_fmt(BDRV_O_RDWR);
    wa = (WriteCo) { .child = file_of(bs), .offset = 0, .bytes = 4096,
                     .buf = a };
    wb = (WriteCo) { .child = file_of(bs), .offset = 100, .bytes = 4096,
                     .buf = b };
    qemu_coroutine_enter(qemu_coroutine_create(write_co_entry, &wa));
    qemu_coroutine_enter(qemu_coroutine_create(write_co_entry, &wb));
    g_assert_false(wa.done);
    bdrv_drain(bs);
    g_assert_true(wa.done && wb.done);
    g_assert_cmpuint(bs->file->bs->in_flight, ==, 0);
    g_assert_cmpint(bs->file->bs->quiesce_counter, ==, 0);
    bdrv_unref(bs);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    test_drivers_register();

    g_test_add_func("/block-io/aligned-passthrough", test_aligned_passthrough);
    g_test_add_func("/block-io/unaligned-read", test_unaligned_read);
    g_test_add_func("/block-io/unaligned-write-rmw", test_unaligned_write_rmw);
    g_test_add_func("/block-io/concurrent-unaligned-writes",
                    test_concurrent_unaligned_writes);
    g_test_add_func("/block-io/aligned-writes-not-serialised",
                    test_aligned_writes_not_serialised);
    g_test_add_func("/block-io/fua-emulated", test_fua_emulated);
    g_test_add_func("/block-io/fua-native", test_fua_native);
    g_test_add_func("/block-io/max-transfer-split", test_max_transfer_split);
    g_test_add_func("/block-io/detect-zeroes", test_detect_zeroes);
    g_test_add_func("/block-io/zero-write-driver", test_zero_write_driver);
    g_test_add_func("/block-io/zero-write-fallback", test_zero_write_fallback);
    g_test_add_func("/block-io/zero-write-unaligned",
                    test_zero_write_unaligned);
    g_test_add_func("/block-io/discard", test_discard);
    g_test_add_func("/block-io/write-hooks", test_write_hooks);
    g_test_add_func("/block-io/flush-order", test_flush_order);
    g_test_add_func("/block-io/no-flush", test_no_flush);
    g_test_add_func("/block-io/read-past-eof", test_read_past_eof);
    g_test_add_func("/block-io/errors", test_errors);
    g_test_add_func("/block-io/truncate", test_truncate);
    g_test_add_func("/block-io/block-status", test_block_status);
    g_test_add_func("/block-io/drain", test_drain);
    return g_test_run();
}
