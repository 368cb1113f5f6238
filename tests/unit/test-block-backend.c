/*
 * block/block-backend.c: writethrough by flushes, the write cache flag
 * changing under I/O, statistics, aio completion rules, drain.
 *
 * The graph is test-fmt -> test-mem; test-mem plays the file node whose
 * flushes are counted (stats.flushes, what reached flush_to_disk).
 */

#include "test-mem-driver.h"
#include "qblock/block-backend.h"

static BlockBackend *open_blk(int flags)
{
    QDict *opts = qdict_new();
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "test-fmt");
    qdict_put_str(opts, "file.driver", "test-mem");
    blk = blk_new_open(NULL, NULL, opts, flags, &error_abort);
    g_assert_nonnull(blk);
    test_log_reset();
    return blk;
}

static BlockDriverState *file_node(BlockBackend *blk)
{
    return blk_bs(blk)->file->bs;
}

static void test_writethrough_flushes_each_write(void)
{
    BlockBackend *blk;
    uint8_t buf[4096] = { 1 };
    int i;

    test_mem_cfg_reset(512);
    blk = open_blk(BDRV_O_RDWR);
    g_assert_true(blk_enable_write_cache(blk));
    blk_set_enable_write_cache(blk, false);
    for (i = 0; i < 5; i++) {
        g_assert_cmpint(blk_pwrite(blk, i * 4096, 4096, buf, 0), ==, 0);
        g_assert_cmpuint(file_node(blk)->stats.flushes, ==, i + 1);
    }
    /* zero writes are writes too */
    g_assert_cmpint(blk_pwrite_zeroes(blk, 0, 4096, 0), ==, 0);
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 6);
    /* reads never flush */
    g_assert_cmpint(blk_pread(blk, 0, 4096, buf, 0), ==, 0);
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 6);
    blk_unref(blk);
}

static void test_writeback_flushes_on_request(void)
{
    BlockBackend *blk;
    uint8_t buf[4096] = { 1 };
    int i;

    test_mem_cfg_reset(512);
    blk = open_blk(BDRV_O_RDWR);
    for (i = 0; i < 5; i++) {
        g_assert_cmpint(blk_pwrite(blk, i * 4096, 4096, buf, 0), ==, 0);
    }
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 1);
    blk_unref(blk);
}

static void test_toggle_between_writes(void)
{
    BlockBackend *blk;
    uint8_t buf[4096] = { 1 };

    test_mem_cfg_reset(512);
    blk = open_blk(BDRV_O_RDWR);
    g_assert_cmpint(blk_pwrite(blk, 0, 4096, buf, 0), ==, 0);
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 0);
    blk_set_enable_write_cache(blk, false);
    g_assert_cmpint(blk_pwrite(blk, 0, 4096, buf, 0), ==, 0);
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 1);
    blk_set_enable_write_cache(blk, true);
    g_assert_cmpint(blk_pwrite(blk, 0, 4096, buf, 0), ==, 0);
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 1);
    blk_unref(blk);
}

typedef struct AioWrite {
    BlockBackend *blk;
    QEMUIOVector qiov;
    uint8_t buf[4096];
    int ret;
    bool done;
    /* flushes of the file node when the callback ran */
    uint64_t flushes_seen;
} AioWrite;

static void aio_write_cb(void *opaque, int ret)
{
    AioWrite *w = opaque;

    g_assert_false(qemu_in_coroutine());
    w->ret = ret;
    w->done = true;
    w->flushes_seen = file_node(w->blk)->stats.flushes;
}

static void aio_write_start(AioWrite *w, BlockBackend *blk, int64_t offset)
{
    w->blk = blk;
    w->done = false;
    memset(w->buf, 0x5a, sizeof(w->buf));
    qemu_iovec_init_buf(&w->qiov, w->buf, sizeof(w->buf));
    blk_aio_pwritev(blk, offset, &w->qiov, 0, aio_write_cb, w);
}

/*
 * Writes submitted in writeback mode that complete after the switch to
 * writethrough are flushed before their callbacks run, and so are writes
 * submitted in writethrough mode that complete after the switch back.
 */
static void test_toggle_while_in_flight(void)
{
    BlockBackend *blk;
    AioWrite w[3];
    int i;

    test_mem_cfg_reset(512);
    test_mem_cfg.yield = true;
    blk = open_blk(BDRV_O_RDWR);
    for (i = 0; i < 3; i++) {
        aio_write_start(&w[i], blk, i * 4096);
    }
    /* all three are inside the driver now */
    test_log_assert("write 0 4096; write 4096 4096; write 8192 4096");
    g_assert_cmpuint(blk_in_flight(blk), ==, 3);
    blk_set_enable_write_cache(blk, false);
    AIO_WAIT_WHILE(qemu_get_aio_context(),
                   !w[0].done || !w[1].done || !w[2].done);
    for (i = 0; i < 3; i++) {
        g_assert_cmpint(w[i].ret, ==, 0);
        /* its own flush happened before its callback */
        g_assert_cmpuint(w[i].flushes_seen, >=, i + 1);
    }
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 3);
    g_assert_cmpuint(blk_in_flight(blk), ==, 0);

    /*
     * The other way round: issued in writethrough, completing after the
     * switch to writeback, it is still flushed (its issuer counted on it).
     */
    blk_set_enable_write_cache(blk, false);
    aio_write_start(&w[0], blk, 0);
    blk_set_enable_write_cache(blk, true);
    AIO_WAIT_WHILE(qemu_get_aio_context(), !w[0].done);
    g_assert_cmpint(w[0].ret, ==, 0);
    g_assert_cmpuint(w[0].flushes_seen, ==, 4);
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 4);

    /* issued and completed in writeback: no flush */
    aio_write_start(&w[0], blk, 0);
    AIO_WAIT_WHILE(qemu_get_aio_context(), !w[0].done);
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 4);
    blk_unref(blk);
}

/*
 * The switch to writethrough may come after a write left the graph but
 * before its callback ran: it is flushed before the callback all the same.
 */
static void test_toggle_before_callback(void)
{
    BlockBackend *blk;
    AioWrite w;

    test_mem_cfg_reset(512);
    blk = open_blk(BDRV_O_RDWR);
    aio_write_start(&w, blk, 0);
    /* the driver completed it at once; only the callback is pending */
    test_log_assert("write 0 4096");
    g_assert_false(w.done);
    blk_set_enable_write_cache(blk, false);
    AIO_WAIT_WHILE(qemu_get_aio_context(), !w.done);
    g_assert_cmpint(w.ret, ==, 0);
    g_assert_cmpuint(w.flushes_seen, ==, 1);
    g_assert_cmpuint(blk_in_flight(blk), ==, 0);
    /* the late flush counts as a flush op of its own */
    g_assert_cmpuint(blk_get_stats(blk)->nr_ops[BLOCK_ACCT_FLUSH], ==, 1);

    /* without a switch, a writeback write stays unflushed */
    blk_set_enable_write_cache(blk, true);
    aio_write_start(&w, blk, 4096);
    AIO_WAIT_WHILE(qemu_get_aio_context(), !w.done);
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 1);
    blk_unref(blk);
}

/*
 * Group commit: writethrough writes that complete while a flush runs share
 * the next one.  Eight writes in flight: the first one's flush covers it
 * alone, the second flush covers the seven that returned meanwhile.
 */
static void test_writethrough_group_commit(void)
{
    BlockBackend *blk;
    AioWrite w[8];

    test_mem_cfg_reset(512);
    test_mem_cfg.yield = true;
    test_mem_cfg.flush_yield = true;
    blk = open_blk(BDRV_O_RDWR);
    blk_set_enable_write_cache(blk, false);
    for (int i = 0; i < 8; i++) {
        aio_write_start(&w[i], blk, i * 4096);
    }
    AIO_WAIT_WHILE(qemu_get_aio_context(), blk_in_flight(blk) > 0);
    for (int i = 0; i < 8; i++) {
        g_assert_true(w[i].done);
        g_assert_cmpint(w[i].ret, ==, 0);
        /* never reported before a flush that started after it returned */
        g_assert_cmpuint(w[i].flushes_seen, >=, i == 0 ? 1 : 2);
    }
    g_assert_cmpuint(file_node(blk)->stats.flushes, ==, 2);
    blk_unref(blk);
}

/*
 * A drain while writethrough writes wait for their shared flush: the
 * flush is part of writes already in flight and must not wait for the
 * drain to end (which waits for those writes).
 */
static void test_writethrough_drain(void)
{
    BlockBackend *blk;
    AioWrite w[4];

    test_mem_cfg_reset(512);
    test_mem_cfg.yield = true;
    test_mem_cfg.flush_yield = true;
    blk = open_blk(BDRV_O_RDWR);
    blk_set_enable_write_cache(blk, false);
    for (int i = 0; i < 4; i++) {
        aio_write_start(&w[i], blk, i * 4096);
    }
    blk_drain(blk);
    g_assert_cmpuint(blk_in_flight(blk), ==, 0);
    for (int i = 0; i < 4; i++) {
        g_assert_true(w[i].done);
        g_assert_cmpint(w[i].ret, ==, 0);
    }
    g_assert_cmpuint(file_node(blk)->stats.flushes, >=, 1);
    blk_unref(blk);
}

static void test_aio_callback_after_return(void)
{
    BlockBackend *blk;
    AioWrite w;

    test_mem_cfg_reset(512);
    blk = open_blk(BDRV_O_RDWR);
    /* the driver completes at once: the callback must still wait */
    aio_write_start(&w, blk, 0);
    g_assert_false(w.done);
    g_assert_cmpuint(blk_in_flight(blk), ==, 1);
    AIO_WAIT_WHILE(qemu_get_aio_context(), !w.done);
    g_assert_cmpint(w.ret, ==, 0);
    g_assert_cmpuint(blk_in_flight(blk), ==, 0);
    blk_unref(blk);
}

static void test_statistics(void)
{
    BlockBackend *blk;
    BlockAcctStats *st;
    uint8_t buf[8192] = { 0 };

    test_mem_cfg_reset(512);
    blk = open_blk(BDRV_O_RDWR);
    st = blk_get_stats(blk);
    g_assert_cmpint(blk_pwrite(blk, 0, 4096, buf, 0), ==, 0);
    g_assert_cmpint(blk_pwrite(blk, 8192, 8192, buf, 0), ==, 0);
    g_assert_cmpint(blk_pread(blk, 0, 512, buf, 0), ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    g_assert_cmpint(blk_pdiscard(blk, 0, 4096), ==, 0);

    g_assert_cmpuint(st->nr_ops[BLOCK_ACCT_WRITE], ==, 2);
    g_assert_cmpuint(st->nr_bytes[BLOCK_ACCT_WRITE], ==, 12288);
    g_assert_cmpuint(st->nr_ops[BLOCK_ACCT_READ], ==, 1);
    g_assert_cmpuint(st->nr_bytes[BLOCK_ACCT_READ], ==, 512);
    g_assert_cmpuint(st->nr_ops[BLOCK_ACCT_FLUSH], ==, 1);
    g_assert_cmpuint(st->nr_ops[BLOCK_ACCT_UNMAP], ==, 1);
    g_assert_cmpuint(st->wr_highest_offset, ==, 16384);
    g_assert_cmpuint(st->last_access_time_ns, >, 0);

    /* a writethrough flush counts as a flush op of its own */
    blk_set_enable_write_cache(blk, false);
    g_assert_cmpint(blk_pwrite(blk, 0, 512, buf, 0), ==, 0);
    g_assert_cmpuint(st->nr_ops[BLOCK_ACCT_WRITE], ==, 3);
    g_assert_cmpuint(st->nr_ops[BLOCK_ACCT_FLUSH], ==, 2);

    /* out of range: invalid, not failed */
    g_assert_cmpint(blk_pread(blk, MiB, 512, buf, 0), ==, -EIO);
    g_assert_cmpuint(st->invalid_ops[BLOCK_ACCT_READ], ==, 1);
    g_assert_cmpuint(st->failed_ops[BLOCK_ACCT_READ], ==, 0);
    g_assert_cmpuint(st->nr_ops[BLOCK_ACCT_READ], ==, 1);
    blk_unref(blk);
}

static void test_failed_ops(void)
{
    BlockBackend *blk;
    BlockAcctStats *st;
    uint8_t buf[512] = { 0 };

    test_mem_cfg_reset(512);
    /* a read-only graph under a backend that asks for no write */
    blk = open_blk(0);
    st = blk_get_stats(blk);
    g_assert_cmpint(blk_pwrite(blk, 0, 512, buf, 0), ==, -EPERM);
    g_assert_cmpuint(st->failed_ops[BLOCK_ACCT_WRITE], ==, 1);
    g_assert_cmpuint(st->nr_ops[BLOCK_ACCT_WRITE], ==, 0);
    blk_unref(blk);
}

static void test_write_beyond_eof(void)
{
    BlockBackend *blk;
    uint8_t buf[4096] = { 0 };

    test_mem_cfg_reset(512);
    blk = open_blk(BDRV_O_RDWR);
    g_assert_cmpint(blk_getlength(blk), ==, MiB);
    g_assert_cmpint(blk_pwrite(blk, MiB - 512, 1024, buf, 0), ==, -EIO);
    g_assert_cmpint(blk_pwrite(blk, MiB + 512, 512, buf, 0), ==, -EIO);
    g_assert_cmpint(blk_pwrite(blk, -512, 512, buf, 0), ==, -EIO);
    test_log_assert("");
    blk_set_allow_write_beyond_eof(blk, true);
    g_assert_cmpint(blk_pwrite(blk, MiB - 512, 1024, buf, 0), ==, 0);
    g_assert_cmpint(blk_getlength(blk), ==, MiB + 512);
    blk_unref(blk);
}

static void test_perms(void)
{
    BlockBackend *blk;
    uint64_t perm, shared;

    test_mem_cfg_reset(512);
    /* A writer asks for RESIZE only when it says so (BDRV_O_RESIZE). */
    blk = open_blk(BDRV_O_RDWR);
    blk_get_perm(blk, &perm, &shared);
    g_assert_cmphex(perm, ==, BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE);
    g_assert_cmphex(shared, ==, BLK_PERM_ALL);
    blk_unref(blk);

    blk = open_blk(BDRV_O_RDWR | BDRV_O_RESIZE);
    blk_get_perm(blk, &perm, &shared);
    g_assert_cmphex(perm, ==, BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE |
                    BLK_PERM_RESIZE);
    blk_unref(blk);

    blk = open_blk(BDRV_O_NO_SHARE);
    blk_get_perm(blk, &perm, &shared);
    g_assert_cmphex(perm, ==, BLK_PERM_CONSISTENT_READ);
    g_assert_cmphex(shared, ==, BLK_PERM_CONSISTENT_READ |
                    BLK_PERM_WRITE_UNCHANGED);
    blk_unref(blk);
}

static void test_truncate(void)
{
    BlockBackend *blk;
    Error *err = NULL;
    int64_t len;

    test_mem_cfg_reset(512);
    blk = open_blk(BDRV_O_RDWR | BDRV_O_RESIZE);
    g_assert_cmpint(blk_truncate(blk, 2 * MiB, true, PREALLOC_MODE_OFF, 0,
                                 &error_abort), ==, 0);
    g_assert_cmpint(blk_getlength(blk), ==, 2 * MiB);
    blk_unref(blk);

    /* A writer that did not ask to resize gets an error, not a crash. */
    blk = open_blk(BDRV_O_RDWR);
    len = blk_getlength(blk);
    g_assert_cmpint(blk_truncate(blk, len + MiB, true, PREALLOC_MODE_OFF, 0,
                                 &err), <, 0);
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "the resize permission was not taken"));
    error_free(err);
    g_assert_cmpint(blk_getlength(blk), ==, len);
    blk_unref(blk);
}

static void test_no_medium(void)
{
    BlockBackend *blk = blk_new(qemu_get_aio_context(), 0, BLK_PERM_ALL);
    uint8_t buf[512];
    Error *err = NULL;

    g_assert_null(blk_bs(blk));
    g_assert_cmpint(blk_pread(blk, 0, 512, buf, 0), ==, -ENOMEDIUM);
    g_assert_cmpint(blk_pwrite(blk, 0, 512, buf, 0), ==, -ENOMEDIUM);
    g_assert_cmpint(blk_flush(blk), ==, -ENOMEDIUM);
    g_assert_cmpint(blk_getlength(blk), ==, -ENOMEDIUM);
    g_assert_cmpint(blk_truncate(blk, 0, true, PREALLOC_MODE_OFF, 0, &err),
                    ==, -ENOMEDIUM);
    error_free_or_abort(&err);
    blk_unref(blk);
}

static void test_names_and_iteration(void)
{
    BlockBackend *a = blk_new(qemu_get_aio_context(), 0, BLK_PERM_ALL);
    BlockBackend *b = blk_new(qemu_get_aio_context(), 0, BLK_PERM_ALL);
    BlockBackend *it;
    int seen = 0;

    g_assert_cmpstr(blk_name(a), ==, "");
    blk_set_name(a, "drive0");
    g_assert_cmpstr(blk_name(a), ==, "drive0");
    for (it = blk_next(NULL); it; it = blk_next(it)) {
        seen += (it == a) + (it == b);
    }
    g_assert_cmpint(seen, ==, 2);
    blk_unref(a);
    for (it = blk_next(NULL); it; it = blk_next(it)) {
        g_assert_true(it != a);
    }
    blk_unref(b);
    g_assert_null(blk_next(NULL));
}

/* blk_drain returns with every aio request completed. */
static void test_drain(void)
{
    BlockBackend *blk;
    AioWrite w[4];
    int i;

    test_mem_cfg_reset(512);
    test_mem_cfg.yield = true;
    blk = open_blk(BDRV_O_RDWR);
    for (i = 0; i < 4; i++) {
        aio_write_start(&w[i], blk, i * 4096);
    }
    g_assert_cmpuint(blk_in_flight(blk), ==, 4);
    blk_drain(blk);
    g_assert_cmpuint(blk_in_flight(blk), ==, 0);
    for (i = 0; i < 4; i++) {
        g_assert_true(w[i].done);
    }
    blk_unref(blk);
}

/*
 * bdrv_drain_all() drains every BlockBackend through the registry they
 * join in blk_new(): each aio request has completed, its callback run.
 */
static void test_drain_all(void)
{
    BlockBackend *a, *b;
    AioWrite wa[2], wb[2];
    int i;

    test_mem_cfg_reset(512);
    test_mem_cfg.yield = true;
    a = open_blk(BDRV_O_RDWR);
    b = open_blk(BDRV_O_RDWR);
    for (i = 0; i < 2; i++) {
        aio_write_start(&wa[i], a, i * 4096);
        aio_write_start(&wb[i], b, i * 4096);
    }
    g_assert_cmpuint(blk_in_flight(a) + blk_in_flight(b), ==, 4);
    bdrv_drain_all();
    g_assert_cmpuint(blk_in_flight(a) + blk_in_flight(b), ==, 0);
    for (i = 0; i < 2; i++) {
        g_assert_true(wa[i].done && wb[i].done);
    }
    blk_unref(a);
    blk_unref(b);
}

/*
 * Draining a node below a BlockBackend waits for the backend's requests
 * too, also while only their completion is left above the graph: the
 * drain asks the root edge's class (drained_poll), which counts a request
 * until its callback has returned.
 */
static void test_node_drain_waits_for_backend(void)
{
    BlockBackend *blk;
    AioWrite w[3];
    int i;

    test_mem_cfg_reset(512);
    test_mem_cfg.yield = true;
    blk = open_blk(BDRV_O_RDWR);
    for (i = 0; i < 3; i++) {
        aio_write_start(&w[i], blk, i * 4096);
    }
    g_assert_cmpuint(blk_in_flight(blk), ==, 3);
    bdrv_drain(file_node(blk));
    g_assert_cmpuint(blk_in_flight(blk), ==, 0);
    for (i = 0; i < 3; i++) {
        g_assert_true(w[i].done);
    }
    blk_unref(blk);
}

/* A permission conflict names the BlockBackend through its edge's class. */
static void test_conflict_names_device(void)
{
    BlockBackend *writer = open_blk(BDRV_O_RDWR);
    BlockDriverState *bs = blk_bs(writer);
    BlockBackend *excl;
    Error *err = NULL;

    excl = blk_new(qemu_get_aio_context(), BLK_PERM_CONSISTENT_READ,
                   BLK_PERM_CONSISTENT_READ);
    g_assert_cmpint(blk_insert_bs(excl, bs, &err), <, 0);
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "unshared by an unnamed block device"));
    error_free(err);
    err = NULL;

    blk_set_name(writer, "disk0");
    g_assert_cmpint(blk_insert_bs(excl, bs, &err), <, 0);
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "'write' are both required by block device "
                            "'disk0'"));
    error_free(err);
    blk_unref(excl);
    blk_unref(writer);
}

/* While the file node is drained, new requests wait at the backend. */
static void test_drained_section_queues(void)
{
    BlockBackend *blk;
    AioWrite w;
    int i;

    test_mem_cfg_reset(512);
    blk = open_blk(BDRV_O_RDWR);
    bdrv_drained_begin(file_node(blk));
    aio_write_start(&w, blk, 0);
    for (i = 0; i < 5; i++) {
        aio_poll(qemu_get_aio_context(), false);
    }
    g_assert_false(w.done);
    test_log_assert("");
    /* a drain of the backend meanwhile does not wait for it */
    g_assert_cmpuint(blk_in_flight(blk), ==, 0);
    bdrv_drained_end(file_node(blk));
    AIO_WAIT_WHILE(qemu_get_aio_context(), !w.done);
    test_log_assert("write 0 4096");
    blk_unref(blk);
}

typedef struct SyncInCo {
    BlockBackend *blk;
    bool done;
} SyncInCo;

static void coroutine_fn sync_in_co_entry(void *opaque)
{
    SyncInCo *s = opaque;
    uint8_t w[1000], r[1000];

    memset(w, 0x42, sizeof(w));
    g_assert_cmpint(blk_pwrite(s->blk, 300, sizeof(w), w, 0), ==, 0);
    g_assert_cmpint(blk_pread(s->blk, 300, sizeof(r), r, 0), ==, 0);
    g_assert_cmpmem(r, sizeof(r), w, sizeof(w));
    g_assert_cmpint(blk_flush(s->blk), ==, 0);
    g_assert_cmpint(blk_truncate(s->blk, 2 * MiB, true, PREALLOC_MODE_OFF, 0,
                                 &error_abort), ==, 0);
    g_assert_cmpint(bdrv_pread(blk_bs(s->blk)->file, 300, sizeof(r), r, 0),
                    ==, 0);
    g_assert_cmpmem(r, sizeof(r), w, sizeof(w));
    s->done = true;
}

/* The synchronous forms also work from a coroutine, without polling. */
static void test_sync_in_coroutine(void)
{
    SyncInCo s = { 0 };

    test_mem_cfg_reset(512);
    test_mem_cfg.yield = true;
    s.blk = open_blk(BDRV_O_RDWR | BDRV_O_RESIZE);
    qemu_coroutine_enter(qemu_coroutine_create(sync_in_co_entry, &s));
    AIO_WAIT_WHILE(qemu_get_aio_context(), !s.done);
    g_assert_cmpint(blk_getlength(s.blk), ==, 2 * MiB);
    g_assert_cmpuint(blk_in_flight(s.blk), ==, 0);
    blk_unref(s.blk);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    test_drivers_register();

    g_test_add_func("/block-backend/writethrough-flushes-each-write",
                    test_writethrough_flushes_each_write);
    g_test_add_func("/block-backend/writeback-flushes-on-request",
                    test_writeback_flushes_on_request);
    g_test_add_func("/block-backend/toggle-between-writes",
                    test_toggle_between_writes);
    g_test_add_func("/block-backend/toggle-while-in-flight",
                    test_toggle_while_in_flight);
    g_test_add_func("/block-backend/toggle-before-callback",
                    test_toggle_before_callback);
    g_test_add_func("/block-backend/writethrough-group-commit",
                    test_writethrough_group_commit);
    g_test_add_func("/block-backend/writethrough-drain",
                    test_writethrough_drain);
    g_test_add_func("/block-backend/aio-callback-after-return",
                    test_aio_callback_after_return);
    g_test_add_func("/block-backend/statistics", test_statistics);
    g_test_add_func("/block-backend/failed-ops", test_failed_ops);
    g_test_add_func("/block-backend/write-beyond-eof", test_write_beyond_eof);
    g_test_add_func("/block-backend/perms", test_perms);
    g_test_add_func("/block-backend/truncate", test_truncate);
    g_test_add_func("/block-backend/no-medium", test_no_medium);
    g_test_add_func("/block-backend/names-and-iteration",
                    test_names_and_iteration);
    g_test_add_func("/block-backend/sync-in-coroutine",
                    test_sync_in_coroutine);
    g_test_add_func("/block-backend/drain", test_drain);
    g_test_add_func("/block-backend/drain-all", test_drain_all);
    g_test_add_func("/block-backend/node-drain-waits-for-backend",
                    test_node_drain_waits_for_backend);
    g_test_add_func("/block-backend/conflict-names-device",
                    test_conflict_names_device);
    g_test_add_func("/block-backend/drained-section-queues",
                    test_drained_section_queues);
    return g_test_run();
}
