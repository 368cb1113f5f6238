/*
 * block/mirror.c: a guest write racing a copy in flight.  The target
 * sits on blkdebug, whose break point holds the mirror's first write to
 * the target (a copy of the source's old data) while the test writes new
 * data to the source; after the pivot the target must hold the new data,
 * not the copy that was in flight (mirror.c invariants 1 and 2).  A
 * mirror that cleared its dirty bits after the copy instead of before
 * the read, or that let a newer copy overtake an older one, fails here.
 */
#include "block/block_int.h"
#include "block/dirty-bitmap.h"
#include "job/block-jobs.h"
#include "qblock/block-backend.h"

#define DISK_SIZE   (1 * MiB)
#define GRANULE     (64 * KiB)
#define OLD_BYTE    0x11
#define NEW_BYTE    0x22

static char *test_dir;

static char *test_file(const char *name, int fill)
{
    char *path = g_build_filename(test_dir, name, NULL);
    g_autofree uint8_t *buf = g_malloc(DISK_SIZE);

    memset(buf, fill, DISK_SIZE);
    g_assert_true(g_file_set_contents(path, (char *)buf, DISK_SIZE, NULL));
    return path;
}

static BlockBackend *test_open(const char *fmt, const char *path)
{
    g_autofree char *text = g_strdup_printf(fmt, path);

    return blk_new_open(NULL, NULL, keyval_parse(text, NULL, &error_abort),
                        BDRV_O_RDWR, &error_abort);
}

typedef struct WriteCo {
    BlockBackend *blk;
    bool done;
    int ret;
} WriteCo;

/* The guest's write: NEW_BYTE over the first granule. */
static void coroutine_fn write_co_entry(void *opaque)
{
    WriteCo *w = opaque;
    g_autofree uint8_t *buf = g_malloc(GRANULE);
    QEMUIOVector qiov;

    memset(buf, NEW_BYTE, GRANULE);
    qemu_iovec_init_buf(&qiov, buf, GRANULE);
    w->ret = blk_co_pwritev(w->blk, 0, GRANULE, &qiov, 0);
    w->done = true;
}

static void poll_until(bool *cond)
{
    gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;

    while (!*cond) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        aio_poll(qemu_get_aio_context(), true);
    }
}

static void poll_for_ms(int ms)
{
    gint64 end = g_get_monotonic_time() + ms * 1000;

    while (g_get_monotonic_time() < end) {
        aio_poll(qemu_get_aio_context(), false);
        g_usleep(1000);
    }
}

static void poll_until_suspended(BlockDriverState *bs, const char *tag)
{
    gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;

    while (!bdrv_debug_is_suspended(bs, tag)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        aio_poll(qemu_get_aio_context(), true);
    }
}

static void poll_until_status(Job *job, JobStatus status)
{
    gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;

    while (job->status != status) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        aio_poll(qemu_get_aio_context(), true);
    }
}

static void check_bytes(BlockBackend *blk, int64_t offset, int64_t bytes,
                        int expect)
{
    g_autofree uint8_t *buf = g_malloc(bytes);

    g_assert_cmpint(blk_pread(blk, offset, bytes, buf, 0), >=, 0);
    for (int64_t i = 0; i < bytes; i++) {
        if (buf[i] != expect) {
            g_test_message("byte %" PRId64 " is 0x%x, not 0x%x",
                           offset + i, buf[i], expect);
            g_assert_not_reached();
        }
    }
}

static void race_body(bool write_blocking)
{
    g_autofree char *src_path = test_file("src.raw", OLD_BYTE);
    g_autofree char *dst_path = test_file("dst.raw", 0);
    BlockBackend *guest = test_open("driver=raw,file.driver=file,"
                                    "file.filename=%s", src_path);
    BlockBackend *dst = test_open("driver=raw,file.driver=blkdebug,"
                                  "file.image.driver=file,"
                                  "file.image.filename=%s", dst_path);
    BlockDriverState *target = blk_bs(dst);
    MirrorOptions opts = {
        .sync = MIRROR_SYNC_FULL,
        .write_blocking = write_blocking,
        .granularity = GRANULE,
        .buf_size = DISK_SIZE,
        .on_source_error = BLOCKDEV_ON_ERROR_REPORT,
        .on_target_error = BLOCKDEV_ON_ERROR_REPORT,
    };
    WriteCo w = { .blk = guest };
    Job *job;

    /* the job takes the target's write permission: only its node stays */
    bdrv_ref(target);
    blk_unref(dst);
    g_assert_cmpint(bdrv_debug_breakpoint(target->file->bs, "write_aio",
                                          "A"), ==, 0);
    g_assert_true(mirror_start("m", blk_bs(guest), target, &opts,
                               &error_abort));
    job = job_get("m");
    g_assert_nonnull(job);
    job_ref(job);

    /* the first copy read OLD_BYTE and waits to write it */
    poll_until_suspended(target->file->bs, "A");
    qemu_coroutine_enter(qemu_coroutine_create(write_co_entry, &w));
    if (!write_blocking) {
        /* the source has the new data; the target's copy is stale */
        poll_until(&w.done);
    } else {
        /*
         * The write reached the source, and its copy to the target must
         * wait for the older copy in flight (invariant 2): were it let
         * through, the older copy would land after it.
         */
        poll_for_ms(200);
        g_assert_false(w.done);
    }
    g_assert_cmpint(bdrv_debug_resume(target->file->bs, "A"), ==, 0);
    poll_until(&w.done);
    g_assert_cmpint(w.ret, ==, 0);

    poll_until_status(job, JOB_STATUS_READY);
    g_assert_true(job_complete(job, &error_abort));
    poll_until_status(job, JOB_STATUS_NULL);
    g_assert_cmpint(job->ret, ==, 0);
    job_unref(job);

    /* the pivot moved the guest to the target */
    g_assert_true(blk_bs(guest) == target);
    check_bytes(guest, 0, GRANULE, NEW_BYTE);
    check_bytes(guest, GRANULE, DISK_SIZE - GRANULE, OLD_BYTE);
    blk_unref(guest);
    bdrv_unref(target);
    unlink(src_path);
    unlink(dst_path);
}

static void test_race_background(void)
{
    race_body(false);
}

static void test_race_write_blocking(void)
{
    race_body(true);
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    test_dir = g_dir_make_tmp("test-mirror-XXXXXX", NULL);
    g_assert_nonnull(test_dir);

    g_test_add_func("/mirror/race/background", test_race_background);
    g_test_add_func("/mirror/race/write-blocking", test_race_write_blocking);
    ret = g_test_run();
    rmdir(test_dir);
    return ret;
}
